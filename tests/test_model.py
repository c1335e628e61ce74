"""The tiny decoder-only transformer (posenc_lib.model)."""
import pytest
import torch

import posenc_lib as pl
from posenc_lib.model import POSITIONAL_METHODS, DecoderConfig, TinyDecoder


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


@pytest.mark.parametrize("positional", [p for p in POSITIONAL_METHODS if p != "learned"])
def test_runs_beyond_training_length_except_learned(positional):
    m = small(positional)
    assert m(torch.randint(0, 11, (1, 40))).shape == (1, 40, 11)


def test_learned_table_has_a_length_limit():
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
        q, k = pl.apply_rope(q, inv_freq=m.inv_freq), pl.apply_rope(k, inv_freq=m.inv_freq)
    ref, _ = pl.attention(q, k, v, bias=None if bias is None else bias.masked_fill(bias.isinf(), 0.0), causal=True)
    ref = attn.out(ref.transpose(1, 2).reshape(2, 10, 16))
    with torch.no_grad():
        got = attn(x, bias=bias, inv_freq=m.inv_freq)
    torch.testing.assert_close(got, ref, rtol=1e-5, atol=1e-5)


def test_alibi_and_t5_biases_come_from_the_library():
    m = small("alibi")
    torch.testing.assert_close(m.attention_bias(6), pl.alibi_bias(2, 6))
    m = small("t5")
    bias = m.attention_bias(6)
    assert torch.isinf(bias).sum() == 2 * 15 and m.t5.max_distance == 12
    torch.testing.assert_close(bias.tril(), m.t5(6).tril())


def test_rope_frequencies_are_a_nonpersistent_buffer():
    m = small("rope")
    torch.testing.assert_close(m.inv_freq, pl.rope_frequencies(8))
    assert "inv_freq" not in m.state_dict()


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
    (dict(vocab_size=5, positional="xpos"), r"positional must be one of \('none', 'learned'"),
    (dict(vocab_size=0), "vocab_size must be an integer >= 1"),
    (dict(vocab_size=5, d_model=30, num_heads=4), "d_model must be a multiple of num_heads=4"),
    (dict(vocab_size=5, d_model=12, num_heads=4, positional="rope"), "must be even"),
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
    with pytest.raises(ValueError, match="need positional='rope'"):
        m(torch.zeros(1, 5, dtype=torch.long), inv_freq=torch.ones(4))
