"""Relative positions: what attention sees when only the offset j - i matters.

Offsets are key minus query (j - i): negative for keys in the past. Shaw et al.
clip the offset and learn a vector per clipped offset; T5 buckets it (exact
near, log-spaced far) and learns one scalar per bucket and head.
Names: q_len, k_len = number of queries and keys; i indexes queries, j keys.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from . import _validate as v


def relative_positions(
    q_len: int,
    k_len: int | None = None,
    *,
    q_offset: int = 0,
    device: torch.device | str | None = None,
) -> Tensor:
    """Offsets out[i, j] = j - (i + q_offset): key position minus query position.

    q_offset places the queries later than the keys' start, e.g. k_len - q_len when
    the queries are the last q_len tokens (generation with a key/value cache).
    returns: (q_len, k_len) long
    Taught in: notebooks/04_relative.ipynb
    """
    q_len = v.int_at_least("q_len", q_len, 0)
    k_len = q_len if k_len is None else v.int_at_least("k_len", k_len, 0)
    i = torch.arange(q_len, device=device) + q_offset
    j = torch.arange(k_len, device=device)
    return j.unsqueeze(0) - i.unsqueeze(1)


def clipped_relative_positions(
    q_len: int, k_len: int | None, max_distance: int, *, device: torch.device | str | None = None
) -> Tensor:
    """Shaw et al. (2018) indices: clip(j - i, -k, k) + k, into a table of 2k + 1 embeddings.

    Offsets beyond k share the edge embedding: the model cannot tell 10 from 100 apart.
    returns: (q_len, k_len) long in [0, 2k]
    Taught in: notebooks/04_relative.ipynb
    """
    k = v.int_at_least("max_distance", max_distance, 0)
    return relative_positions(q_len, k_len, device=device).clamp(-k, k) + k


def t5_relative_bucket(
    relative_position: Tensor,
    *,
    bidirectional: bool = True,
    num_buckets: int = 32,
    max_distance: int = 128,
) -> Tensor:
    """T5's bucket of each offset (key minus query): exact when near, log-spaced when far.

    bidirectional: half the buckets for keys before the query, half for keys after.
                   Otherwise (decoders) only the past is bucketed; future keys get bucket 0.
    Within a direction, distances n = 0 .. e - 1 get their own bucket (B = buckets per
    direction, e = B // 2); larger ones get min(B - 1, e + floor(log(n/e) / log(max_distance/e)
    * (B - e))): log-spaced buckets, their edges growing roughly geometrically but floored to
    whole distances, so a far bucket can be as wide as, or narrower than, the one before (32
    buckets, max_distance 128: encoder buckets 8 and 9 hold 4 distances each; decoder bucket 17
    holds 2, bucket 16 holds 3). The last bucket starts *before* max_distance (where a
    bucket B, one past the last, would begin): with 16 buckets and max_distance 32, at 20.
    relative_position: integer tensor of any shape, e.g. ``relative_positions(q, k)``
    returns: same shape, long, in [0, num_buckets)
    Taught in: notebooks/04_relative.ipynb
    """
    if not isinstance(relative_position, Tensor):
        raise ValueError("relative_position must be an integer tensor, e.g. relative_positions(q_len, k_len)")
    v.integer_tensor("relative_position", relative_position)
    num_buckets = v.int_at_least("num_buckets", num_buckets, 4 if bidirectional else 2)
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    max_exact = per_direction // 2
    max_distance = v.int_at_least("max_distance", max_distance, max_exact + 1)

    n = relative_position.long()
    if bidirectional:
        buckets = (n > 0).long() * per_direction  # keys after the query: upper half
        n = n.abs()
    else:
        buckets = torch.zeros_like(n)
        n = (-n).clamp(min=0)  # distance into the past; the future collapses to 0
    # Log-spaced buckets from max_exact (inclusive) to max_distance. float32 like T5,
    # so bucket edges agree with the reference bit for bit.
    log_ratio = torch.log(n.float().clamp(min=1) / max_exact) / math.log(max_distance / max_exact)
    far = max_exact + (log_ratio * (per_direction - max_exact)).long()
    far = far.clamp(max=per_direction - 1)
    return buckets + torch.where(n < max_exact, n, far)


class T5RelativeBias(nn.Module):
    """T5's learned bias: one scalar per (bucket, head), added to the attention scores.

    forward(q_len, k_len=None) -> (num_heads, q_len, k_len)
    Taught in: notebooks/04_relative.ipynb
    """

    def __init__(self, num_heads: int, *, bidirectional: bool = True, num_buckets: int = 32, max_distance: int = 128):
        super().__init__()
        self.num_heads = v.int_at_least("num_heads", num_heads, 1)
        self.bidirectional = bidirectional
        self.num_buckets = num_buckets
        self.max_distance = max_distance
        t5_relative_bucket(torch.zeros(1, dtype=torch.long), bidirectional=bidirectional,
                           num_buckets=num_buckets, max_distance=max_distance)  # validate once, early
        self.embedding = nn.Embedding(num_buckets, num_heads)

    def buckets(self, q_len: int, k_len: int | None = None) -> Tensor:
        rel = relative_positions(q_len, k_len, device=self.embedding.weight.device)
        return t5_relative_bucket(rel, bidirectional=self.bidirectional,
                                  num_buckets=self.num_buckets, max_distance=self.max_distance)

    def forward(self, q_len: int, k_len: int | None = None) -> Tensor:
        return self.embedding(self.buckets(q_len, k_len)).permute(2, 0, 1)


class ShawRelativePositions(nn.Module):
    """Shaw et al. (2018): a learned key vector a^K and value vector a^V per clipped offset.

    forward(q_len, k_len=None) -> (a_k, a_v), each (q_len, k_len, d); use with
    ``shaw_attention``.
    Taught in: notebooks/04_relative.ipynb
    """

    def __init__(self, d: int, max_distance: int):
        super().__init__()
        self.d = v.int_at_least("d", d, 1)
        self.max_distance = v.int_at_least("max_distance", max_distance, 0)
        self.keys = nn.Embedding(2 * max_distance + 1, d)
        self.values = nn.Embedding(2 * max_distance + 1, d)

    def forward(self, q_len: int, k_len: int | None = None) -> tuple[Tensor, Tensor]:
        idx = clipped_relative_positions(q_len, k_len, self.max_distance, device=self.keys.weight.device)
        return self.keys(idx), self.values(idx)


def shaw_attention(q: Tensor, k: Tensor, v_: Tensor, a_k: Tensor, a_v: Tensor) -> tuple[Tensor, Tensor]:
    """Attention with Shaw et al.'s relative key and value vectors.

    e_ij = q_i . (k_j + a^K_ij) / sqrt(d);  z_i = sum_j softmax_j(e_ij) (v_j + a^V_ij)
    q: (..., q_len, d); k, v_: (..., k_len, d); a_k, a_v: (q_len, k_len, d)
    returns: (z, weights) with shapes (..., q_len, d) and (..., q_len, k_len)
    Taught in: notebooks/04_relative.ipynb
    """
    q_len, d = q.shape[-2:]
    k_len = k.shape[-2]
    for name, a in (("a_k", a_k), ("a_v", a_v)):
        if a.shape != (q_len, k_len, d):
            raise ValueError(f"{name} must have shape ({q_len}, {k_len}, {d}), got {tuple(a.shape)}")
    scores = (q @ k.transpose(-2, -1) + torch.einsum("...id,ijd->...ij", q, a_k)) / math.sqrt(d)
    weights = scores.softmax(dim=-1)
    return weights @ v_ + torch.einsum("...ij,ijd->...id", weights, a_v), weights
