"""posenc_lib.fast_attention: biased attention without the (H, L, L) bias."""
import pytest
import torch

import posenc_lib as pl
from posenc_lib import fast_attention as fa


def qkv(b=2, h=4, q_len=37, k_len=None, d=16, dv=None, seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    k_len = q_len if k_len is None else k_len
    return (torch.randn(b, h, q_len, d, generator=g, dtype=dtype), torch.randn(b, h, k_len, d, generator=g, dtype=dtype),
            torch.randn(b, h, k_len, dv or d, generator=g, dtype=dtype))


@pytest.mark.parametrize("mode", ["causal", "symmetric"])
@pytest.mark.parametrize("chunk_size", [None, 1, 5, 37, 1000])
@pytest.mark.parametrize("q_len,k_len", [(37, 37), (12, 40), (1, 9)])
def test_alibi_attention_equals_dense_reference(mode, chunk_size, q_len, k_len):
    """Same result as attention(q, k, v, bias=alibi_bias(...)) to 1e-5, for any chunking."""
    q, k, v = qkv(q_len=q_len, k_len=k_len, dv=8)
    ref = pl.attention(q, k, v, bias=pl.alibi_bias(4, q_len, k_len, mode=mode))[0]
    torch.testing.assert_close(pl.alibi_attention(q, k, v, mode=mode, chunk_size=chunk_size), ref, atol=1e-5, rtol=1e-5)


def test_alibi_attention_custom_slopes_and_float64():
    q, k, v = qkv(h=3, dtype=torch.float64)
    slopes = torch.tensor([0.5, 0.1, 0.01], dtype=torch.float64)
    ref = pl.attention(q, k, v, bias=pl.alibi_bias(3, 37, mode="causal", slopes=slopes, dtype=torch.float64))[0]
    torch.testing.assert_close(pl.alibi_attention(q, k, v, slopes=slopes, chunk_size=6), ref, atol=1e-12, rtol=1e-10)


def test_alibi_ramp_is_the_last_row_of_alibi_bias():
    """The ramp holds alibi_bias's numbers bit for bit (past) and the right future half."""
    dense = pl.alibi_bias(4, 9, mode="symmetric")
    ramp = fa.alibi_ramp(4, 9, mode="symmetric")
    assert ramp.shape == (4, 17)
    # row i of the dense bias is ramp[:, 8 - i : 17 - i]
    for i in range(9):
        assert torch.equal(dense[:, i], ramp[:, 8 - i: 17 - i])
    causal = fa.alibi_ramp(4, 9)
    assert torch.isinf(causal[:, 9:]).all() and torch.equal(causal[:, :9], ramp[:, :9])


@pytest.mark.parametrize("bidirectional", [True, False])
def test_t5_attention_equals_dense_reference(bidirectional):
    t5 = pl.T5RelativeBias(4, bidirectional=bidirectional, num_buckets=8, max_distance=20)
    q, k, v = qkv(q_len=45)
    ref = pl.attention(q, k, v, bias=t5(45), causal=not bidirectional)[0]
    torch.testing.assert_close(pl.t5_attention(q, k, v, t5, chunk_size=8), ref, atol=1e-5, rtol=1e-5)


def test_t5_attention_gradients_reach_the_bias_table():
    t5 = pl.T5RelativeBias(2, num_buckets=8, max_distance=16)
    q, k, v = qkv(h=2, q_len=10)
    pl.t5_attention(q, k, v, t5, chunk_size=3).sum().backward()
    g_fast = t5.embedding.weight.grad.clone()
    t5.embedding.weight.grad = None
    pl.attention(q, k, v, bias=t5(10))[0].sum().backward()
    torch.testing.assert_close(g_fast, t5.embedding.weight.grad, atol=1e-5, rtol=1e-4)


def test_relative_bias_attention_with_any_offset_function():
    """A bias that is any function of j - i (here a per-head clipped distance)."""
    w = torch.tensor([0.3, -0.2, 0.1, 0.05])

    def bias_of_offset(rel):
        return -w.view(-1, *[1] * rel.dim()) * rel.clamp(-5, 5).abs()

    q, k, v = qkv(q_len=20)
    dense = bias_of_offset(pl.relative_positions(20, 20))
    for causal in (False, True):
        ref = pl.attention(q, k, v, bias=dense, causal=causal)[0]
        torch.testing.assert_close(pl.relative_bias_attention(q, k, v, bias_of_offset, causal=causal, chunk_size=6), ref,
                                   atol=1e-5, rtol=1e-5)


def test_chunk_size_follows_memory_budget():
    assert fa.chunk_size_for(8, 32768, memory_budget=256 * 2**20) == 256
    assert fa.chunk_size_for(8, 32768, memory_budget=1) == 1


def test_fast_attention_follows_device_and_dtype():
    q = torch.empty(1, 2, 6, 8, device="meta")
    assert pl.alibi_attention(q, q, q).device.type == "meta"
    q, k, v = qkv(h=2, q_len=6, dtype=torch.bfloat16)
    assert pl.alibi_attention(q, k, v).dtype == torch.bfloat16


@pytest.mark.parametrize("call,match", [
    (lambda: pl.alibi_attention(torch.randn(4, 8), torch.randn(4, 8), torch.randn(4, 8)), "q must be a tensor of shape"),
    (lambda: pl.alibi_attention(*qkv(), mode="nonsymmetric"), "mode must be one of"),
    (lambda: pl.alibi_attention(*qkv(q_len=9, k_len=5)), "k_len must be >= q_len"),
    (lambda: pl.alibi_attention(*qkv(), chunk_size=0), "chunk_size must be an integer >= 1"),
    (lambda: pl.alibi_attention(torch.randn(1, 2, 5, 8), torch.randn(1, 2, 5, 4), torch.randn(1, 2, 5, 8)), "k.shape"),
    (lambda: pl.alibi_attention(torch.randn(1, 2, 5, 8), torch.randn(1, 3, 5, 8), torch.randn(1, 3, 5, 8)), "share"),
    (lambda: pl.toeplitz_attention(*qkv(h=2, q_len=5), torch.zeros(2, 5)), "ramp must have shape"),
    (lambda: pl.t5_attention(*qkv(h=2), pl.T5RelativeBias(3)), "t5.num_heads"),
    (lambda: pl.t5_attention(*qkv(h=2), object()), "t5 must be"),
    (lambda: pl.relative_bias_attention(*qkv(h=2, q_len=5), lambda r: torch.zeros(5)), "bias_of_offset must return"),
])
def test_bad_input_names_the_parameter(call, match):
    with pytest.raises(ValueError, match=match.replace("(", r"\(").replace(")", r"\)")):
        call()
