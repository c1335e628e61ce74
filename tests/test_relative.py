"""Relative offsets, Shaw clipping, T5 buckets (posenc_lib.relative)."""
import math

import pytest
import torch

import posenc_lib as pl


def test_relative_positions_are_key_minus_query():
    r = pl.relative_positions(3, 4)
    assert r.tolist() == [[0, 1, 2, 3], [-1, 0, 1, 2], [-2, -1, 0, 1]]
    assert r.dtype == torch.long


def test_clipped_indices_saturate_at_window_edges():
    """clip(j - i, -k, k) + k: offsets beyond k share the edge embedding."""
    c = pl.clipped_relative_positions(1, 8, 2)
    assert c.tolist() == [[2, 3, 4, 4, 4, 4, 4, 4]]
    assert pl.clipped_relative_positions(6, 6, 2).max().item() == 4 and pl.clipped_relative_positions(6, 6, 2).min().item() == 0


def t5_bucket_loop(rel: int, bidirectional: bool, num_buckets: int, max_distance: int) -> int:
    """T5's bucketing for one offset, written with Python ints and math.log."""
    ret, n = 0, -rel
    if bidirectional:
        num_buckets //= 2
        if n < 0:
            ret += num_buckets
        n = abs(n)
    else:
        n = max(n, 0)
    max_exact = num_buckets // 2
    if n < max_exact:
        return ret + n
    val = max_exact + int(math.log(n / max_exact) / math.log(max_distance / max_exact) * (num_buckets - max_exact))
    return ret + min(val, num_buckets - 1)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 20), (16, 64)])
def test_t5_bucket_matches_scalar_loop(bidirectional, num_buckets, max_distance):
    rel = torch.arange(-300, 301)
    got = pl.t5_relative_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    want = [t5_bucket_loop(r, bidirectional, num_buckets, max_distance) for r in rel.tolist()]
    # float32 log vs float64 log may move a boundary offset; allow none here.
    assert got.tolist() == want


def test_t5_buckets_exact_near_shared_far():
    """Small offsets get a bucket each; far ones share; the future has its own half."""
    b = pl.t5_relative_bucket(torch.tensor([0, -1, -7, -8, -9, -127, -128, -1000, 1]))
    assert b[:3].tolist() == [0, 1, 7]
    assert b[3].item() == 8 and b[-3].item() == 15 and b[-2].item() == 15
    assert b[-1].item() == 17



def test_t5_last_bucket_starts_before_max_distance():
    """16 buckets (B = 8 a direction, e = 4), max_distance 32: the floored log term reaches B - 1 = 7 once
    log(n/4)/log(8)·4 >= 3, i.e. n >= 4·8^(3/4) ≈ 19.03: the last bucket holds 20, 21, ..., not only n >= 32."""
    assert 19 < 4 * 8 ** 0.75 < 20
    b = pl.t5_relative_bucket(-torch.arange(0, 200), num_buckets=16, max_distance=32)
    assert b[19].item() == 6 and (b[20:] == 7).all()

def test_t5_module_one_scalar_per_bucket_and_head():
    m = pl.T5RelativeBias(3, num_buckets=8, max_distance=16)
    bias = m(5, 6)
    assert bias.shape == (3, 5, 6)
    buckets = m.buckets(5, 6)
    torch.testing.assert_close(bias[1], m.embedding.weight[buckets, 1])


def test_shaw_attention_reduces_to_plain_attention_with_zero_embeddings():
    """With a^K = a^V = 0, Shaw attention is ordinary attention."""
    q, k, v = torch.randn(2, 5, 4), torch.randn(2, 7, 4), torch.randn(2, 7, 4)
    zeros = torch.zeros(5, 7, 4)
    z, w = pl.shaw_attention(q, k, v, zeros, zeros)
    z_ref, w_ref = pl.attention(q, k, v)
    torch.testing.assert_close(z, z_ref)
    torch.testing.assert_close(w, w_ref)


def test_shaw_attention_adds_relative_key_and_value_terms():
    """e_ij = q_i.(k_j + a_ij)/sqrt(d) and z_i = sum_j w_ij (v_j + aV_ij), entry by entry."""
    torch.manual_seed(0)
    rel = pl.ShawRelativePositions(4, 2)
    a_k, a_v = rel(3, 3)
    q, k, v = torch.randn(3, 4), torch.randn(3, 4), torch.randn(3, 4)
    z, w = pl.shaw_attention(q, k, v, a_k, a_v)
    for i in range(3):
        e = torch.stack([q[i] @ (k[j] + a_k[i, j]) / 2 for j in range(3)])
        torch.testing.assert_close(w[i], e.softmax(0))
        torch.testing.assert_close(z[i], sum(w[i, j] * (v[j] + a_v[i, j]) for j in range(3)))


@pytest.mark.parametrize("bidirectional,first_far", [(True, 8), (False, 16)])
def test_t5_far_buckets_grow_roughly_not_strictly(bidirectional, first_far):
    """T5's defaults (32, 128): floored log edges; encoder buckets 8 and 9 hold 4 distances each,
    decoder bucket 17 holds 2 where bucket 16 holds 3; the last full far bucket is much wider than the first."""
    b = pl.t5_relative_bucket(-torch.arange(0, 1000), bidirectional=bidirectional, num_buckets=32, max_distance=128)
    widths = [(b == k).sum().item() for k in range(first_far, 2 * first_far - 1)]
    assert widths[:2] == ([4, 4] if bidirectional else [3, 2])
    assert widths[-1] > 4 * widths[0]
