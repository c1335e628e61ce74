"""The tiny decoder-only transformer (posenc_lib.model) and its registry of positional methods."""
import dataclasses

import pytest
import torch
from matplotlib.colors import is_color_like, to_hex

import posenc_lib as pl
from posenc_lib.model import POSITIONAL_METHODS, DecoderConfig, PositionalHooks, PositionalSpec, TinyDecoder


def small(positional, **kw):
    torch.manual_seed(0)
    return TinyDecoder(vocab_size=11, positional=positional, d_model=16, num_heads=2, d_ff=32, max_len=12,
                       t5_num_buckets=8, **kw).eval()


@pytest.mark.parametrize("positional", POSITIONAL_METHODS)
def test_logits_shape_and_dtype(positional):
    m = small(positional)
    out = m(torch.randint(0, 11, (3, 12)))
    assert out.shape == (3, 12, 11) and out.dtype == torch.float32


@pytest.mark.parametrize("positional", POSITIONAL_METHODS)
def test_decoder_is_causal(positional):
    """Changing token t never changes the logits before t."""
    m = small(positional)
    x = torch.randint(0, 11, (1, 12))
    y = x.clone()
    y[0, 7] = (y[0, 7] + 1) % 11
    with torch.no_grad():
        a, b = m(x), m(y)
    torch.testing.assert_close(a[:, :7], b[:, :7])
    assert not torch.allclose(a[:, 7:], b[:, 7:])


@pytest.mark.parametrize("positional", [p for p, s in POSITIONAL_METHODS.items() if not s.length_limited])
def test_runs_beyond_training_length_except_length_limited(positional):
    m = small(positional)
    assert m(torch.randint(0, 11, (1, 40))).shape == (1, 40, 11)


def test_learned_table_has_a_length_limit():
    assert [p for p, s in POSITIONAL_METHODS.items() if s.length_limited] == ["learned"]
    with pytest.raises(ValueError, match="sequence length must be <= max_len=12"):
        small("learned")(torch.randint(0, 11, (1, 13)))


def test_nope_sees_order_only_through_the_causal_mask():
    """Two layers, no positions: swapping two earlier tokens still changes the last output, because
    under the causal mask each earlier token's layer-1 output depends on its own prefix."""
    m = small("none")
    x = torch.tensor([[1, 2, 3, 4, 5]])
    y = torch.tensor([[2, 1, 3, 4, 5]])
    with torch.no_grad():
        assert not torch.allclose(m(x)[0, -1], m(y)[0, -1])


def test_nope_single_layer_last_token_is_permutation_invariant_in_its_prefix():
    """With one layer and no MLP influence on keys, the last query attends to a set: swapping
    earlier tokens leaves its output unchanged."""
    torch.manual_seed(0)
    m = TinyDecoder(vocab_size=11, positional="none", d_model=16, num_heads=2, num_layers=1, d_ff=32).eval()
    x = torch.tensor([[1, 2, 3, 4, 5]])
    y = torch.tensor([[3, 1, 4, 2, 5]])
    with torch.no_grad():
        torch.testing.assert_close(m(x)[0, -1], m(y)[0, -1])


@pytest.mark.parametrize("positional", ["rope", "alibi", "t5", "none", "sinusoidal"])
def test_attention_layer_equals_the_teaching_attention(positional):
    """scaled_dot_product_attention with the model's bias == posenc_lib.attention (dense reference)."""
    m = small(positional)
    attn = m.blocks[0].attn
    x = torch.randn(2, 10, 16)
    bias = m.attention_bias(10)
    q, k, v = attn.heads(x)
    if positional == "rope":
        q, k = pl.apply_rope(q), pl.apply_rope(k)  # base 10000, the config's default
    ref, _ = pl.attention(q, k, v, bias=None if bias is None else bias.masked_fill(bias.isinf(), 0.0), causal=True)
    ref = attn.out(ref.transpose(1, 2).reshape(2, 10, 16))
    with torch.no_grad():
        got = attn(x, bias=bias, rotate=m.positional.rotate)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_alibi_and_t5_biases_come_from_the_library():
    m = small("alibi")
    torch.testing.assert_close(m.attention_bias(6), pl.alibi_bias(2, 6))
    m = small("t5")
    bias = m.attention_bias(6)
    t5 = m.positional.scores
    assert isinstance(t5, pl.T5RelativeBias) and not t5.bidirectional and t5.max_distance == 12
    assert torch.isinf(bias).sum() == 2 * 15
    torch.testing.assert_close(bias.tril(), t5(6).tril())


def test_rope_is_a_rotary_embedding_with_nonpersistent_frequencies():
    m = small("rope")
    assert isinstance(m.positional.rope, pl.RotaryEmbedding)
    torch.testing.assert_close(m.positional.rope.inv_freq, pl.rope_frequencies(8))
    assert not any("inv_freq" in k for k in m.state_dict())


@pytest.mark.parametrize("positional,make_table", [
    ("learned", lambda: pl.LearnedPositionalEncoding(12, 16)),
    ("t5", lambda: pl.T5RelativeBias(2, bidirectional=False, num_buckets=8, max_distance=12)),
])
def test_positional_parameters_are_created_right_after_the_embedding(positional, make_table):
    """The random init depends on creation order: embedding, positional table, then the blocks."""
    m = small(positional)
    torch.manual_seed(0)
    embed, table = torch.nn.Embedding(11, 16), make_table()
    assert torch.equal(m.embed.weight, embed.weight)
    assert torch.equal(next(m.positional.parameters()), next(table.parameters()))


def test_rope_scaling_at_evaluation_changes_output_and_factor_one_does_not():
    m = small("rope")
    x = torch.randint(0, 11, (1, 30))
    inv, att = pl.scaled_rope_frequencies(8, method="linear", factor=1.0, original_max_position=12)
    with torch.no_grad():
        torch.testing.assert_close(m(x, inv_freq=inv, attention_factor=att), m(x))
        inv, att = pl.scaled_rope_frequencies(8, method="yarn", factor=4.0, original_max_position=12)
        assert not torch.allclose(m(x, inv_freq=inv, attention_factor=att), m(x))


def test_same_seed_same_model():
    a, b = small("t5"), small("t5")
    for (na, pa), (nb, pb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert na == nb and torch.equal(pa, pb)


def test_config_or_keywords_not_both():
    cfg = DecoderConfig(vocab_size=5)
    assert TinyDecoder(cfg).config is cfg
    with pytest.raises(ValueError, match="either a DecoderConfig or keywords"):
        TinyDecoder(cfg, positional="alibi")


@pytest.mark.parametrize("kw,match", [
    (dict(vocab_size=5, positional="xpos"),
     r"positional must be one of \('none', 'learned', 'sinusoidal', 'rope', 'alibi', 't5'\), got 'xpos'"),
    (dict(vocab_size=0), "vocab_size must be an integer >= 1"),
    (dict(vocab_size=5, d_model=30, num_heads=4), "d_model must be a multiple of num_heads=4"),
    (dict(vocab_size=5, d_model=12, num_heads=4, positional="rope"), "head dimension d_model / num_heads must be even"),
    (dict(vocab_size=5, d_model=9, num_heads=3, positional="sinusoidal"), "d_model must be even"),
    (dict(vocab_size=5, max_len=0), "max_len must be"),
    (dict(vocab_size=5, positional="t5", max_len=16), r"max_len must be > t5_num_buckets // 2 = 16"),
])
def test_bad_config_raises_value_error(kw, match):
    with pytest.raises(ValueError, match=match):
        DecoderConfig(**kw)


def test_bad_forward_input_raises_value_error():
    m = small("alibi")
    with pytest.raises(ValueError, match=r"tokens must be a \(batch, seq\) integer tensor"):
        m(torch.zeros(5, dtype=torch.long))
    with pytest.raises(ValueError, match="tokens must have an integer dtype"):
        m(torch.zeros(1, 5))
    with pytest.raises(ValueError, match="need a rotary positional method .* got positional='alibi'"):
        m(torch.zeros(1, 5, dtype=torch.long), inv_freq=torch.ones(4))
    with pytest.raises(ValueError, match="need a rotary positional method"):
        m(torch.zeros(1, 5, dtype=torch.long), attention_factor=1.5)


# ---------------------------------------------------------------- the registry

def test_registry_names_keep_their_order():
    assert tuple(POSITIONAL_METHODS) == ("none", "learned", "sinusoidal", "rope", "alibi", "t5")
    assert "rope" in POSITIONAL_METHODS and "xpos" not in POSITIONAL_METHODS
    assert pl.POSITIONAL_METHODS is POSITIONAL_METHODS


def test_every_method_has_a_distinct_label_and_colour():
    specs = POSITIONAL_METHODS.values()
    assert all(isinstance(s, PositionalSpec) and s.label.strip() and is_color_like(s.color) for s in specs)
    assert len({s.label for s in specs}) == len({to_hex(s.color) for s in specs}) == len(POSITIONAL_METHODS)
    with pytest.raises(dataclasses.FrozenInstanceError):
        POSITIONAL_METHODS["rope"].label = "x"  # type: ignore[misc]


@pytest.mark.parametrize("positional", POSITIONAL_METHODS)
def test_every_method_builds_hooks_with_the_documented_shapes(positional):
    m = small(positional)
    hooks = m.positional
    assert isinstance(hooks, PositionalHooks)
    x, q, k = torch.randn(3, 12, 16), torch.randn(3, 2, 12, 8), torch.randn(3, 2, 12, 8)
    assert hooks.embed(x).shape == x.shape
    rq, rk = hooks.rotate(q, k)
    assert rq.shape == q.shape and rk.shape == k.shape
    bias = hooks.bias(12)
    if bias is not None:
        future = torch.ones(12, 12, dtype=torch.bool).triu(1)
        assert bias.shape == (2, 12, 12)
        assert torch.isneginf(bias[:, future]).all() and torch.isfinite(bias[:, ~future]).all()
    assert hooks.rotary == (positional == "rope")


class _Recorder(PositionalHooks):
    """A toy method: records what the model hands each hook; attention sees only the diagonal."""

    rotary = True

    def __init__(self):
        super().__init__()
        self.calls = []

    def embed(self, x):
        self.calls.append(("embed", tuple(x.shape)))
        return x

    def rotate(self, q, k, *, inv_freq=None, attention_factor=1.0):
        self.calls.append(("rotate", tuple(q.shape), tuple(k.shape), attention_factor))
        return q, k

    def bias(self, T):
        self.calls.append(("bias", T))
        eye = torch.eye(T, dtype=torch.bool)
        return torch.zeros(2, T, T).masked_fill(~eye, float("-inf"))


def _check_toy(c):
    if c.num_heads != 2:
        raise ValueError(f"num_heads must be 2 for positional='toy', got {c.num_heads}")


def test_a_registered_method_runs_end_to_end_without_touching_the_model(monkeypatch):
    """One registry entry is enough: config check, construction, every hook, the bias."""
    monkeypatch.setitem(POSITIONAL_METHODS, "toy", PositionalSpec("toy", "black", lambda c: _Recorder(), _check_toy))
    with pytest.raises(ValueError, match="num_heads must be 2 for positional='toy', got 4"):
        DecoderConfig(vocab_size=11, positional="toy", d_model=16, num_heads=4)
    m = small("toy")
    x = torch.randint(0, 11, (3, 9))
    with torch.no_grad():
        out = m(x, attention_factor=0.5)
    assert m.positional.calls == [("embed", (3, 9, 16)), ("bias", 9),
                                  ("rotate", (3, 2, 9, 8), (3, 2, 9, 8), 0.5), ("rotate", (3, 2, 9, 8), (3, 2, 9, 8), 0.5)]
    # The bias really reaches attention: with only the diagonal visible, changing token 4 changes nothing else.
    y = x.clone()
    y[:, 4] = (y[:, 4] + 1) % 11
    with torch.no_grad():
        out_y = m(y, attention_factor=0.5)
    assert not torch.allclose(out[:, 4], out_y[:, 4])
    torch.testing.assert_close(torch.cat([out[:, :4], out[:, 5:]], 1), torch.cat([out_y[:, :4], out_y[:, 5:]], 1))
    with pytest.raises(ValueError, match="positional must be one of .*'toy'"):
        DecoderConfig(vocab_size=11, positional="toy2")
