"""Transformer-XL relative scores and the relative shift (posenc_lib.xl)."""
import pytest
import torch

import posenc_lib as pl


def xl_loop(q, k, r, u, v):
    """XL's A_ij written entry by entry with Python ints (offsets o = M + i - j)."""
    q_len, k_len = q.shape[0], k.shape[0]
    m = k_len - q_len
    out = torch.full((q_len, k_len), float("-inf"), dtype=q.dtype)
    for i in range(q_len):
        for j in range(k_len):
            o = m + i - j
            if o >= 0:
                out[i, j] = q[i] @ k[j] + q[i] @ r[o] + u @ k[j] + v @ r[o]
    return out


@pytest.mark.parametrize("q_len,k_len", [(1, 1), (4, 4), (3, 7), (1, 6), (5, 9)])
def test_shift_and_direct_match_a_scalar_loop(q_len, k_len):
    g = torch.Generator().manual_seed(q_len * 10 + k_len)
    q, k, r = (torch.randn(n, 6, generator=g, dtype=torch.float64) for n in (q_len, k_len, k_len))
    u, v = torch.randn(6, generator=g, dtype=torch.float64), torch.randn(6, generator=g, dtype=torch.float64)
    want = xl_loop(q, k, r, u, v)
    torch.testing.assert_close(pl.xl_scores_direct(q, k, r, u, v), want)
    torch.testing.assert_close(pl.xl_scores(q, k, r, u, v), want)


def test_terms_sum_to_the_direct_scores_and_c_is_the_same_for_every_query():
    q, k, r = torch.randn(2, 3, 4, 8), torch.randn(2, 3, 6, 8), torch.randn(3, 6, 8)
    u, v = torch.randn(3, 1, 8), torch.randn(3, 1, 8)
    t = pl.xl_score_terms(q, k, r, u, v)
    assert set(t) == {"a", "b", "c", "d"} and all(x.shape == (2, 3, 4, 6) for x in t.values())
    torch.testing.assert_close(t["a"] + t["b"] + t["c"] + t["d"], pl.xl_scores_direct(q, k, r, u, v))
    torch.testing.assert_close(t["c"], t["c"][..., :1, :].expand_as(t["c"]))
    torch.testing.assert_close(pl.xl_scores(q, k, r, u, v), pl.xl_scores_direct(q, k, r, u, v))


def test_rel_shift_moves_row_i_left_by_q_len_minus_1_minus_i():
    q_len, k_len = 3, 5
    x = torch.arange(q_len * k_len, dtype=torch.float32).view(q_len, k_len)
    out = pl.rel_shift(x)
    m = k_len - q_len
    for i in range(q_len):
        for j in range(i + m + 1):
            assert out[i, j] == x[i, j + q_len - 1 - i]
    assert out.shape == x.shape


def test_rel_shift_future_entries_are_garbage_not_scores():
    """Above the causal diagonal the shift returns the zero pad or the next row's values."""
    x = torch.arange(1.0, 17.0).view(4, 4)
    out = pl.rel_shift(x)
    assert out[0, 1] == 0 and out[0, 2] == x[1, 0]  # the pad, then the next row wrapping in
    raw = pl.xl_scores(torch.randn(4, 4), torch.randn(4, 4), torch.randn(4, 4), torch.randn(4), torch.randn(4),
                       mask_future=False)
    assert torch.isfinite(raw).all()


def test_rel_shift_works_on_batched_noncontiguous_input():
    x = torch.randn(2, 3, 7, 4).transpose(-2, -1)  # (2, 3, 4, 7), not contiguous
    out = pl.rel_shift(x)
    torch.testing.assert_close(out, torch.stack([torch.stack([pl.rel_shift(x[a, b].contiguous()) for b in range(3)])
                                                 for a in range(2)]))


def test_xl_sinusoids_are_the_concat_sinusoid_table_indexed_by_offset():
    r = pl.xl_relative_sinusoids(5, 8)
    torch.testing.assert_close(r, pl.sinusoidal_positions(5, 8, layout="concat"))
    assert r[0, :4].abs().max() == 0 and (r[0, 4:] == 1).all()  # offset 0: sin 0, cos 0


def test_float64_and_device_are_followed():
    q = torch.randn(2, 4, dtype=torch.float64)
    k = r = torch.randn(3, 4, dtype=torch.float64)
    u = v = torch.zeros(4, dtype=torch.float64)
    assert pl.xl_scores(q, k, r, u, v).dtype == torch.float64
    assert pl.xl_relative_sinusoids(3, 4, dtype=torch.float64).dtype == torch.float64


@pytest.mark.parametrize(
    "call,msg",
    [
        (lambda: pl.rel_shift(torch.randn(5)), "x must be a tensor of shape"),
        (lambda: pl.rel_shift(torch.randn(5, 3)), "k_len) must be >= x.shape[-2] (q_len)=5"),
        (lambda: pl.xl_scores(torch.randn(4, 8), torch.randn(3, 8), torch.randn(3, 8), torch.zeros(8), torch.zeros(8)),
         "k_len) must be >= q.shape[-2] (q_len)=4"),
        (lambda: pl.xl_scores(torch.randn(2, 8), torch.randn(3, 8), torch.randn(4, 8), torch.zeros(8), torch.zeros(8)),
         "r.shape[-2] must be k_len=3"),
        (lambda: pl.xl_score_terms(torch.randn(2, 8), torch.randn(3, 6), torch.randn(3, 8), torch.zeros(8),
                                   torch.zeros(8)), "k.shape[-1] must be 8"),
        (lambda: pl.xl_scores(torch.randn(2, 8), torch.randn(3, 8), torch.randn(3, 8), torch.zeros(4), torch.zeros(8)),
         "u.shape[-1] must be 8"),
        (lambda: pl.xl_scores(torch.randn(2, 8), torch.randn(3, 8), torch.randn(3, 8), torch.zeros(8), None),
         "v must be a tensor"),
        (lambda: pl.xl_relative_sinusoids(4, 5), "d must be even"),
    ],
)
def test_bad_input_raises_value_error_naming_the_parameter(call, msg):
    with pytest.raises(ValueError, match=None) as e:
        call()
    assert msg in str(e.value)
