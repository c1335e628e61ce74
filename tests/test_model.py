"""The tiny decoder-only transformer (posenc_lib.model) and its registry of positional methods."""
import dataclasses
import math

import pytest
import torch
from matplotlib.colors import is_color_like, to_hex

import posenc_lib as pl
from posenc_lib.model import (POSITIONAL_METHODS, DecoderConfig, IRoPE, KVCache, PositionalHooks, PositionalSpec,
                              TinyDecoder, swapped_rotary)


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


def scaled(m, inv, att):
    """The model's rotary module reconfigured with these frequencies and attention factor."""
    return m.positional.rope.reconfigured(inv_freq=inv, attention_factor=att)


def test_rope_scaling_at_evaluation_changes_output_and_factor_one_does_not():
    m = small("rope")
    x = torch.randint(0, 11, (1, 30))
    inv, att = pl.scaled_rope_frequencies(8, method="linear", factor=1.0, original_max_position=12)
    with torch.no_grad():
        trained = m(x)
        with swapped_rotary(m, scaled(m, inv, att)):
            torch.testing.assert_close(m(x), trained)
        inv, att = pl.scaled_rope_frequencies(8, method="yarn", factor=4.0, original_max_position=12)
        with swapped_rotary(m, scaled(m, inv, att)) as swapped:
            assert swapped is m and m.positional.rope.attention_factor == att
            assert not torch.allclose(m(x), trained)
        torch.testing.assert_close(m(x), trained)  # the trained module is back after the block


def test_rope_state_lives_in_the_rotary_module():
    """No RoPE-only parameter in the hooks or the forward: context extension swaps the module."""
    import inspect

    hooks = inspect.signature(PositionalHooks.rotate).parameters
    assert [n for n, p in hooks.items() if p.kind == p.KEYWORD_ONLY] == ["layer", "offset"]
    assert list(inspect.signature(TinyDecoder.forward).parameters) == ["self", "tokens", "cache"]
    assert not hasattr(PositionalHooks, "rotary")
    m = small("irope")
    inv, att = pl.scaled_rope_frequencies(8, method="yarn", factor=4.0, original_max_position=12)
    rope = scaled(m, inv, att)
    assert rope.d == rope.rotary_dim == 8 and rope.layout == m.positional.rope.layout
    torch.testing.assert_close(rope.inv_freq, inv, rtol=0, atol=0)
    assert torch.equal(m.positional.rope.reconfigured(attention_factor=2.0).inv_freq, m.positional.rope.inv_freq)


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
     r"positional must be one of \('none', 'learned', 'sinusoidal', 'rope', 'alibi', 't5', 'irope', 'cope'\), "
     r"got 'xpos'"),
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
    with pytest.raises(ValueError, match="rotary positional method .* got positional='alibi'"):
        with swapped_rotary(m, pl.RotaryEmbedding(8)):
            pass
    with pytest.raises(ValueError, match="rope must be a RotaryEmbedding of the head dimension d = 8"):
        with swapped_rotary(small("rope"), pl.RotaryEmbedding(16)):
            pass


# ---------------------------------------------------------------- the registry

def test_registry_names_keep_their_order():
    assert tuple(POSITIONAL_METHODS) == ("none", "learned", "sinusoidal", "rope", "alibi", "t5", "irope", "cope")
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
    future = torch.ones(12, 12, dtype=torch.bool).triu(1)
    if bias is not None:
        assert bias.shape == (2, 12, 12)
        assert torch.isneginf(bias[:, future]).all() and torch.isfinite(bias[:, ~future]).all()
    assert hooks.contextual == (positional == "cope")
    if hooks.contextual:  # the logits hook: a term of the logits' shape, per layer
        logits = torch.randn(3, 2, 12, 12).masked_fill(future, float("-inf"))
        assert all(hooks.logits(q, logits, layer=i).shape == logits.shape for i in range(2))


class _Recorder(PositionalHooks):
    """A toy method: records what the model hands each hook; attention sees only the diagonal."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def embed(self, x, *, offset=0):
        self.calls.append(("embed", tuple(x.shape), offset))
        return x

    def rotate(self, q, k, *, layer=0, offset=0):
        self.calls.append(("rotate", tuple(q.shape), tuple(k.shape), layer, offset))
        return q, k

    def bias(self, q_len, k_len=None):
        k_len = q_len if k_len is None else k_len
        self.calls.append(("bias", q_len, k_len))
        eye = torch.eye(k_len, dtype=torch.bool)[k_len - q_len:]
        return torch.zeros(2, q_len, k_len).masked_fill(~eye, float("-inf"))


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
        out = m(x)
    assert m.positional.calls == [("embed", (3, 9, 16), 0), ("bias", 9, 9),
                                  ("rotate", (3, 2, 9, 8), (3, 2, 9, 8), 0, 0),
                                  ("rotate", (3, 2, 9, 8), (3, 2, 9, 8), 1, 0)]
    # With a cache, the hooks see the new token at its offset (9) and the bias spans all 10 keys.
    m.positional.calls.clear()
    cache = KVCache()
    with torch.no_grad():
        m(x, cache=cache)
        m.positional.calls.clear()
        m(x[:, :1], cache=cache)
    assert m.positional.calls == [("embed", (3, 1, 16), 9), ("bias", 1, 10),
                                  ("rotate", (3, 2, 1, 8), (3, 2, 1, 8), 0, 9),
                                  ("rotate", (3, 2, 1, 8), (3, 2, 1, 8), 1, 9)]
    # The bias really reaches attention: with only the diagonal visible, changing token 4 changes nothing else.
    y = x.clone()
    y[:, 4] = (y[:, 4] + 1) % 11
    with torch.no_grad():
        out_y = m(y)
    assert not torch.allclose(out[:, 4], out_y[:, 4])
    torch.testing.assert_close(torch.cat([out[:, :4], out[:, 5:]], 1), torch.cat([out_y[:, :4], out_y[:, 5:]], 1))
    with pytest.raises(ValueError, match="positional must be one of .*'toy'"):
        DecoderConfig(vocab_size=11, positional="toy2")


# ---------------------------------------------------------------- decoding with a KV cache

def decode(m, x, splits, **kw):
    """The logits of x fed in chunks of the given sizes through one KVCache."""
    assert sum(splits) == x.shape[1]
    cache, out, start = KVCache(), [], 0
    for n in splits:
        out.append(m(x[:, start:start + n], cache=cache, **kw))
        start += n
    assert cache.length == x.shape[1] and len(cache.layers) == m.config.num_layers
    return torch.cat(out, 1)


# Every registered method, plus iRoPE with a floor small enough that the temperature varies within 10 tokens.
CACHE_CASES = [pytest.param(p, {}, id=p) for p in POSITIONAL_METHODS] + [
    pytest.param("irope", dict(irope_floor_scale=2), id="irope-floor2"),
    pytest.param("irope", dict(irope_chunk=3), id="irope-chunk3")]


@pytest.mark.parametrize("splits", [(1,) * 10, (4, 1, 3, 2)], ids=["token-by-token", "prefill-then-chunks"])
@pytest.mark.parametrize("positional,kw", CACHE_CASES)
def test_decoding_with_the_cache_equals_the_full_forward(positional, kw, splits):
    """Positions continue from the cache length: same logits as one pass over the whole sequence."""
    m = small(positional, **kw)
    x = torch.randint(0, 11, (2, 10))
    with torch.no_grad():
        full, stepped = m(x), decode(m, x, splits)
    torch.testing.assert_close(stepped, full, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("positional", ["rope", "irope"])
def test_decoding_with_the_cache_keeps_rope_scaling(positional):
    m = small(positional)
    x = torch.randint(0, 11, (1, 10))
    inv, att = pl.scaled_rope_frequencies(8, method="yarn", factor=4.0, original_max_position=4)
    with torch.no_grad(), swapped_rotary(m, scaled(m, inv, att)):
        full = m(x)
        torch.testing.assert_close(decode(m, x, (3, 1, 1, 5)), full, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert not torch.allclose(full, m(x), atol=1e-3)  # the scaling was really in use


class _RotatesCachedKeysAgain(KVCache):
    """The double-rotation bug: the cached keys, already turned, are turned again at every step."""

    def __init__(self, rope):
        super().__init__()
        self.rope = rope

    def update(self, layer, k, v):
        n = self.layers[layer][0].shape[-2] if layer < len(self.layers) else 0
        k_all, v_all = super().update(layer, k, v)
        return torch.cat((self.rope.rotate(k_all[..., :n, :]), k_all[..., n:, :]), -2), v_all


@pytest.mark.parametrize("positional", ["rope", "irope"])
def test_the_equivalence_catches_double_rotation(positional):
    """A decoder that turns cached keys twice gives other logits from the second token on."""
    m = small(positional)
    x = torch.randint(0, 11, (2, 10))
    bad = _RotatesCachedKeysAgain(m.positional.rope)
    with torch.no_grad():
        full = m(x)
        wrong = torch.cat([m(x[:, t:t + 1], cache=bad) for t in range(10)], 1)
    torch.testing.assert_close(wrong[:, :2], full[:, :2])  # nothing cached, then one key at position 0 (R_0 = I)
    assert not torch.allclose(wrong[:, 2:], full[:, 2:], atol=1e-3)


def test_learned_table_limit_counts_the_cached_tokens():
    m = small("learned")
    cache = KVCache()
    with torch.no_grad():
        m(torch.randint(0, 11, (1, 12)), cache=cache)
        with pytest.raises(ValueError, match=r"offset \+ sequence length must be <= max_len=12, got 12 \+ 1"):
            m(torch.randint(0, 11, (1, 1)), cache=cache)


def test_bad_cache_raises_value_error():
    m = small("rope")
    cache = KVCache()
    with torch.no_grad():
        m(torch.randint(0, 11, (2, 3)), cache=cache)
        with pytest.raises(ValueError, match="cache must hold 2 layers of batch 1 .* got 2 layers of batch 2"):
            m(torch.randint(0, 11, (1, 1)), cache=cache)
        with pytest.raises(ValueError, match="cache must hold 2 layers .* got 3 layers"):
            m(torch.randint(0, 11, (2, 1)), cache=KVCache(cache.layers + cache.layers[:1]))
    with pytest.raises(ValueError, match="cache must be a KVCache or None, got list"):
        m(torch.randint(0, 11, (2, 1)), cache=[])


def test_empty_cache_is_not_falsy_and_grows_in_place():
    cache = KVCache()
    assert cache.length == 0 and cache is not None and not hasattr(cache, "__len__")
    m = small("alibi")
    with torch.no_grad():
        m(torch.randint(0, 11, (1, 4)), cache=cache)
    assert cache.length == 4 and [k.shape for k, _ in cache.layers] == [(1, 2, 4, 8)] * 2


# ---------------------------------------------------------------- iRoPE

def irope_hooks(**kw) -> IRoPE:
    return small("irope", num_layers=4, **kw).positional


def test_irope_nope_layers_are_every_kth_as_in_llama4():
    """Llama 4 (transformers' no_rope_layers): layer i uses RoPE unless (i + 1) % 4 == 0."""
    hooks = small("irope", num_layers=8, irope_every=4).positional
    assert [i for i in range(8) if hooks.is_nope(i)] == [3, 7]
    assert DecoderConfig(vocab_size=5, positional="irope").irope_every == 2  # 2 layers: RoPE, then NoPE


def test_irope_rotates_only_its_rope_layers():
    hooks = irope_hooks(irope_every=2, irope_temperature=False)
    q, k = torch.randn(2, 2, 6, 8), torch.randn(2, 2, 6, 8)
    pos = torch.arange(5, 11)
    for layer in range(4):
        rq, rk = hooks.rotate(q, k, layer=layer, offset=5)
        if layer in (1, 3):
            assert torch.equal(rq, q) and torch.equal(rk, k)
        else:
            torch.testing.assert_close(rq, pl.apply_rope(q, pos))
            torch.testing.assert_close(rk, pl.apply_rope(k, pos))


def test_irope_model_is_rope_then_nope():
    """End to end: block 0 rotates q and k like apply_rope, block 1 attends without positions."""
    m = small("irope", irope_temperature=False)
    x = torch.randint(0, 11, (2, 9))
    with torch.no_grad():
        h = m.blocks[0](m.embed(x), rotate=lambda q, k: (pl.apply_rope(q), pl.apply_rope(k)))
        ref = m.head(m.ln_f(m.blocks[1](h)))
        torch.testing.assert_close(m(x), ref)


def test_irope_temperature_scales_queries_of_nope_layers_only():
    """1 + 0.1 ln(1 + floor((pos + 1) / 4)): 1 for positions 0..2, 1 + 0.1 ln 2 for 3..6, 1 + 0.1 ln 3 for 7..10."""
    hooks = irope_hooks(irope_floor_scale=4, irope_attn_scale=0.1)
    q, k = torch.randn(1, 2, 11, 8), torch.randn(1, 2, 11, 8)
    want = torch.tensor([1.0] * 3 + [1 + 0.1 * math.log(2)] * 4 + [1 + 0.1 * math.log(3)] * 4)
    rq, rk = hooks.rotate(q, k, layer=1)
    torch.testing.assert_close(rq, q * want[:, None])
    assert torch.equal(rk, k)
    rq, _ = hooks.rotate(q[:, :, :2], k[:, :, :2], layer=3, offset=9)  # positions 9, 10 from the offset
    torch.testing.assert_close(rq, q[:, :, :2] * (1 + 0.1 * math.log(3)))
    rq, rk = hooks.rotate(q, k, layer=0)  # a RoPE layer: rotated, lengths unchanged, no temperature
    torch.testing.assert_close(rq, pl.apply_rope(q))
    torch.testing.assert_close(rq.norm(dim=-1), q.norm(dim=-1))


def test_irope_default_temperature_is_one_within_max_len():
    """The default floor is max_len (12): nothing changes before position 11, so training is plain iRoPE."""
    on, off = small("irope"), small("irope", irope_temperature=False)
    assert on.positional.floor_scale == 12
    x = torch.randint(0, 11, (1, 30))
    with torch.no_grad():
        a, b = on(x), off(x)
    torch.testing.assert_close(a[:, :11], b[:, :11], rtol=0, atol=0)
    assert not torch.allclose(a[:, 11:], b[:, 11:], atol=1e-4)


@pytest.mark.parametrize("kw,match", [
    (dict(irope_every=1), "irope_every must be an integer >= 2, got 1"),
    (dict(irope_every=3), r"irope_every must be <= num_layers=2 \(else no layer is without positions\), got 3"),
    (dict(irope_every=2.0), "irope_every must be an integer >= 2, got 2.0"),
    (dict(irope_temperature="yes"), "irope_temperature must be True or False, got 'yes'"),
    (dict(irope_floor_scale=0), "irope_floor_scale must be an integer >= 1, got 0"),
    (dict(irope_attn_scale=-0.1), "irope_attn_scale must be a finite number >= 0, got -0.1"),
    (dict(irope_attn_scale=float("nan")), "irope_attn_scale must be a finite number >= 0, got nan"),
    (dict(irope_chunk=0), "irope_chunk must be an integer >= 1, got 0"),
    (dict(d_model=12, num_heads=4), "head dimension d_model / num_heads must be even"),
])
def test_bad_irope_config_raises_value_error(kw, match):
    with pytest.raises(ValueError, match=match):
        DecoderConfig(vocab_size=5, positional="irope", **kw)
    DecoderConfig(vocab_size=5, positional="rope", **{k: x for k, x in kw.items() if k.startswith("irope")})  # unused


def test_irope_chunk_keeps_rope_layers_inside_their_block():
    """Llama 4's chunked attention: a RoPE layer sees only keys of its own chunk, a NoPE layer sees all;
    within one chunk nothing changes, so a model trained at length <= chunk is the same model."""
    plain, chunked = small("irope"), small("irope", irope_chunk=4)
    assert chunked.positional.contextual and not plain.positional.contextual
    x = torch.randint(0, 11, (2, 10))
    with torch.no_grad():
        torch.testing.assert_close(chunked(x[:, :4]), plain(x[:, :4]))
        rope_layer, nope_layer = chunked.attention_logits(x)
    block = torch.arange(10) // 4
    outside = block[:, None] != block[None, :]
    future = torch.ones(10, 10, dtype=torch.bool).triu(1)
    assert torch.isneginf(rope_layer[..., outside | future]).all() and torch.isfinite(rope_layer[..., ~outside & ~future]).all()
    assert torch.isfinite(nope_layer[..., ~future]).all()
    # changing token 1 changes position 5 only through the NoPE layer
    y = x.clone()
    y[:, 1] = (y[:, 1] + 1) % 11
    with torch.no_grad():
        assert not torch.allclose(chunked(x)[:, 5], chunked(y)[:, 5])
        rope_block = lambda t: chunked.blocks[0](  # noqa: E731
            chunked.embed(t), rotate=lambda q, k: chunked.positional.rotate(q, k, layer=0),
            contextual=lambda q, lg: chunked.positional.logits(q, lg, layer=0))
        h_x, h_y = rope_block(x), rope_block(y)
    torch.testing.assert_close(h_x[:, 4:], h_y[:, 4:])  # the RoPE layer: chunk 1 never saw token 1


@pytest.mark.parametrize("positional,kw", [pytest.param(p, {}, id=p) for p in POSITIONAL_METHODS]
                         + [pytest.param("irope", dict(irope_chunk=3), id="irope-chunk3")])
def test_attention_logits_are_the_ones_each_layer_uses(positional, kw):
    """softmax(attention_logits) @ v, projected out, is exactly each attention layer's output."""
    m = small(positional, **kw)
    x = torch.randint(0, 11, (2, 10))
    outputs = []
    hooks = [b.attn.register_forward_hook(lambda mod, a, out: outputs.append((a[0], out))) for b in m.blocks]
    try:
        logits = m.attention_logits(x)
    finally:
        for h in hooks:
            h.remove()
    assert len(logits) == len(outputs) == m.config.num_layers
    future = torch.ones(10, 10, dtype=torch.bool).triu(1)
    for lg, (inp, out), block in zip(logits, outputs, m.blocks):
        assert lg.shape == (2, 2, 10, 10) and torch.isneginf(lg[..., future]).all()
        _, _, val = block.attn.heads(inp)
        y = (lg.softmax(-1) @ val).transpose(1, 2).reshape(2, 10, 16)
        torch.testing.assert_close(block.attn.out(y), out, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("positional", ["rope", "none", "alibi"])
def test_rotated_qk_are_the_q_and_k_behind_the_logits(positional):
    """rotated_qk hands out each layer's q and k after the rotation: their scaled product, with the layer's bias
    (or the causal mask), is attention_logits; for RoPE they are the heads' q and k turned by apply_rope."""
    m = small(positional)
    x = torch.randint(0, 11, (2, 10), generator=torch.Generator().manual_seed(0))
    qk, logits = m.rotated_qk(x), m.attention_logits(x)
    assert len(qk) == len(logits) == m.config.num_layers
    bias = m.attention_bias(10)
    future = torch.ones(10, 10, dtype=torch.bool).triu(1)
    for (q, k), lg in zip(qk, logits):
        assert q.shape == k.shape == (2, 2, 10, 8)
        want = q @ k.transpose(-1, -2) / math.sqrt(8)
        want = want + bias if bias is not None else want.masked_fill(future, float("-inf"))
        torch.testing.assert_close(lg, want)
    if positional == "rope":
        q0, k0, _ = m.blocks[0].attn.heads(m.blocks[0].ln1(m.positional.embed(m.embed(x))))  # what layer 1 reads
        torch.testing.assert_close(qk[0][0], pl.apply_rope(q0, base=m.config.base))
