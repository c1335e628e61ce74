"""DeBERTa's disentangled attention (He et al., ICLR 2021; arXiv 2006.03654, 2020).

Each token carries a content vector; positions live in a separate table P of 2k
relative embeddings with their *own* projections: q^r = P W_{q,r}, k^r = P W_{k,r}
(the paper and v1; DeBERTa-v2/v3 with ``share_att_key`` reuse the content projections,
i.e. pass q_r = P W_q, k_r = P W_k, and bucket the distance by log first).
The relative distance of query i and key j, bucketed into 2k rows, is

    delta(i, j) = clip(i - j + k, 0, 2k - 1)      (query minus key, then shifted by k)

and the score keeps three of the four terms of the absolute expansion:

    A_ij = q^c_i . k^c_j                  content-to-content (c2c)
         + q^c_i . k^r_{delta(i, j)}      content-to-position (c2p)
         + k^c_j . q^r_{delta(j, i)}      position-to-content (p2c): note delta(j, i)
    softmax over j of A_ij / sqrt(3d)     (three terms, so 3d instead of d)

The paper's p2c index is delta(j, i). The released code uses delta(i, j), the same index
as c2p, reached two ways: transformers' port gathers k_c q_r^T along the *key* rows with
clip(-(i - j) + k) and transposes; microsoft/DeBERTa's disentangled_attention.py gathers
q_r k_c^T along dim -2 with c2p's clip(i - j + k). ``p2c_index="reference"`` reproduces
it (tests/test_deberta.py checks both recipes and transformers' v1 attention;
tests/test_crosscheck.py checks transformers' deberta_v2 attention with share_att_key).
Names: q_len, k_len; span = k (the table has 2k rows); d = head dimension.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from . import _validate as v
from .device import float64_device, moved
from .relative import relative_positions


def deberta_relative_index(
    q_len: int, k_len: int | None, span: int, *, device: torch.device | str | None = None
) -> Tensor:
    """delta(i, j) = clip(i - j + k, 0, 2k - 1): the row of the 2k-row table for query i, key j.

    Query minus key (the opposite sign of ``relative_positions``); distances <= -k share
    row 0 and distances >= k share row 2k - 1. The p2c term needs delta(j, i) =
    clip(j - i + k, 0, 2k - 1): for q_len == k_len, this matrix's transpose.
    returns: (q_len, k_len) long in [0, 2 * span)
    Taught in: notebooks/04_relative.ipynb
    """
    span = v.int_at_least("span", span, 1)
    key_minus_query = relative_positions(q_len, k_len, device=device)
    return (span - key_minus_query).clamp(0, 2 * span - 1)


def deberta_log_bucket(relative_position: Tensor, *, position_buckets: int = 256, max_position: int = 512) -> Tensor:
    """DeBERTa-v2/v3's bucket of each query-minus-key distance delta: exact when near, log-spaced when far.

    With h = position_buckets // 2:
        bucket(delta) = delta                                                     if |delta| <= h
                      = sign(delta) * (h + ceil(log(|delta| / h) / log((max_position - 1) / h) * (h - 1)))
    One signed, symmetric rule (T5 splits the buckets by direction and floors); the ceiling keeps
    distances exact a little past h (to 131 with v3's 256 and 512), |delta| = max_position - 1 lands
    on h + h - 1, and there is no cap: farther distances keep growing, and the caller clips them
    into the 2 * position_buckets rows of the table (as c2p's index does). Computed in float64.
    relative_position: integer tensor of query-minus-key distances, any shape
    returns: same shape, long
    Taught in: notebooks/04_relative.ipynb
    """
    if not isinstance(relative_position, Tensor):
        raise ValueError("relative_position must be an integer tensor of query-minus-key distances")
    v.integer_tensor("relative_position", relative_position)
    buckets = v.int_at_least("position_buckets", position_buckets, 4)
    h = buckets // 2
    top = v.int_at_least("max_position", max_position, h + 2)  # log((max_position - 1) / h) > 0
    delta = relative_position.long()
    # The near ones are replaced below; clamp keeps log finite. float64 where the device has it (not MPS).
    far = moved(delta.abs().clamp(min=h), float64_device(delta.device), torch.float64)
    log_bucket = moved(h + torch.ceil(torch.log(far / h) / math.log((top - 1) / h) * (h - 1)), delta.device, torch.long)
    return torch.where(delta.abs() <= h, delta, delta.sign() * log_bucket)


def _check(q_c: Tensor, k_c: Tensor, q_r: Tensor, k_r: Tensor) -> int:
    for name, t in (("q_c", q_c), ("k_c", k_c), ("q_r", q_r), ("k_r", k_r)):
        if not isinstance(t, Tensor) or t.dim() < 2:
            raise ValueError(f"{name} must be a tensor of shape (..., seq, d), got {getattr(t, 'shape', type(t))}")
    d = q_c.shape[-1]
    for name, t in (("k_c", k_c), ("q_r", q_r), ("k_r", k_r)):
        v.last_dim(name, t, d)
    rows = q_r.shape[-2]
    if rows < 2 or rows % 2:
        raise ValueError(f"q_r.shape[-2] must be an even number 2k >= 2 (the relative table), got {rows}")
    if k_r.shape[-2] != rows:
        raise ValueError(f"k_r.shape[-2] must equal q_r.shape[-2]={rows}, got {k_r.shape[-2]}")
    return rows // 2


P2C_INDEX = ("paper", "reference")


def deberta_terms(
    q_c: Tensor, k_c: Tensor, q_r: Tensor, k_r: Tensor, *, p2c_index: str = "paper"
) -> tuple[Tensor, Tensor, Tensor]:
    """The three disentangled terms (c2c, c2p, p2c), unscaled.

    c2p: score every query against all 2k position keys (one matmul), then pick column
    delta(i, j) for each key j. p2c: score every content key against all 2k position
    queries, then pick row delta(j, i).
    p2c_index: "paper" (delta(j, i), eq. 4 of the paper) or "reference" (delta(i, j), what
               the released code computes; use it to reproduce trained checkpoints)
    q_c: (..., q_len, d) content queries H W_{q,c};  k_c: (..., k_len, d) content keys
    q_r, k_r: (..., 2k, d) projected relative table P W_{q,r}, P W_{k,r}
    returns: three (..., q_len, k_len) tensors
    Taught in: notebooks/04_relative.ipynb
    """
    span = _check(q_c, k_c, q_r, k_r)
    p2c_index = v.one_of("p2c_index", p2c_index, P2C_INDEX)
    q_len, k_len = q_c.shape[-2], k_c.shape[-2]
    c2c = q_c @ k_c.transpose(-2, -1)
    c2p_all = q_c @ k_r.transpose(-2, -1)  # (..., q_len, 2k)
    p2c_all = k_c @ q_r.transpose(-2, -1)  # (..., k_len, 2k)
    idx = deberta_relative_index(q_len, k_len, span, device=q_c.device)  # delta(i, j)
    if p2c_index == "paper":  # delta(j, i) = clip(j - i + k, 0, 2k - 1)
        p2c_idx = (relative_positions(q_len, k_len, device=q_c.device) + span).clamp(0, 2 * span - 1)
    else:
        p2c_idx = idx
    idx_t = p2c_idx.T  # laid out as [j, i] to gather along p2c_all's rows
    c2p = torch.gather(c2p_all, -1, idx.expand(*c2p_all.shape[:-2], q_len, k_len))
    p2c = torch.gather(p2c_all, -1, idx_t.expand(*p2c_all.shape[:-2], k_len, q_len)).transpose(-2, -1)
    return c2c, c2p, p2c


def deberta_scores(q_c: Tensor, k_c: Tensor, q_r: Tensor, k_r: Tensor, *, p2c_index: str = "paper") -> Tensor:
    """(c2c + c2p + p2c) / sqrt(3d): DeBERTa's scores, ready for the softmax over keys.

    Shapes as in ``deberta_terms``; returns (..., q_len, k_len).
    Taught in: notebooks/04_relative.ipynb
    """
    c2c, c2p, p2c = deberta_terms(q_c, k_c, q_r, k_r, p2c_index=p2c_index)
    return (c2c + c2p + p2c) / math.sqrt(3 * q_c.shape[-1])
