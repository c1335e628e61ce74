"""Transformer-XL's relative attention scores (Dai et al. 2019) and the relative shift.

A segment of q_len queries attends to k_len = M + q_len keys: M cached keys from the
previous segment (the memory), then the segment itself. Query i sits at position M + i,
key j at position j, so the query-minus-key distance is o = M + i - j (>= 0 for every key
the query may see). With projected vectors q_i = W_q x_i, k_j = W_{k,E} x_j and
r_o = W_{k,R} R_o (R_o the sinusoid of offset o, no learned parameters), XL scores

    A_ij = q_i . k_j        (a) content
         + q_i . r_o        (b) content-dependent position
         + u . k_j          (c) global content bias   (u replaces the projected W_q p_i)
         + v . r_o          (d) global position bias  (v replaces it in the position term)

Offsets run 0 .. k_len - 1, so r holds one row per offset: r[o] = W_{k,R} R_o. (The paper
writes R_{i-j} with i, j counted over the whole extended context, memory first: its i is
our M + i.)
Names: q_len, k_len; d = head dimension; M = k_len - q_len.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _validate as v
from .absolute import sinusoidal_positions
from .attention import causal_mask
from .relative import relative_positions


def xl_relative_sinusoids(
    k_len: int,
    d: int,
    *,
    base: float = 10000.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """R_o for offsets o = 0 .. k_len - 1: XL's fixed sinusoids, [sin | cos] halves.

    Row o is the sinusoid of *offset* o (not of a position); XL lays the halves out
    concatenated, as tensor2tensor does.
    returns: (k_len, d)
    Taught in: notebooks/04_relative.ipynb
    """
    return sinusoidal_positions(k_len, d, base=base, layout="concat", device=device, dtype=dtype)


def rel_shift(x: Tensor) -> Tensor:
    """The relative shift: turn scores against every offset into scores against every key.

    x[..., i, c] is query i's score against the offset k_len - 1 - c (columns hold offsets
    k_len - 1, ..., 1, 0, the order XL builds them in). Pad a zero column on the left,
    read the (q_len, k_len + 1) block as (k_len + 1, q_len), drop its first row and read
    the rest as (q_len, k_len): row i moves left by q_len - 1 - i, so

        out[..., i, j] = x[..., i, j + q_len - 1 - i]    for j <= i + k_len - q_len,

    i.e. the score against offset M + i - j, exact for every key the query may see.
    Entries with j > i + M (future keys) hold wrapped values from the next row or the
    zero pad: garbage that the causal mask must hide.
    x: (..., q_len, k_len) with k_len >= q_len
    returns: (..., q_len, k_len)
    Taught in: notebooks/04_relative.ipynb
    """
    if not isinstance(x, Tensor) or x.dim() < 2:
        raise ValueError(f"x must be a tensor of shape (..., q_len, k_len), got {getattr(x, 'shape', type(x))}")
    q_len, k_len = x.shape[-2:]
    if k_len < q_len:
        raise ValueError(f"x.shape[-1] (k_len) must be >= x.shape[-2] (q_len)={q_len}, got {k_len}")
    padded = F.pad(x, (1, 0))  # (..., q_len, k_len + 1), a zero column in front
    padded = padded.reshape(*x.shape[:-2], k_len + 1, q_len)
    return padded[..., 1:, :].reshape(x.shape)


def _check(q: Tensor, k: Tensor, r: Tensor, u: Tensor, v_: Tensor) -> None:
    for name, t in (("q", q), ("k", k), ("r", r)):
        if not isinstance(t, Tensor) or t.dim() < 2:
            raise ValueError(f"{name} must be a tensor of shape (..., seq, d), got {getattr(t, 'shape', type(t))}")
    d = q.shape[-1]
    for name, t in (("k", k), ("r", r), ("u", u), ("v", v_)):
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be a tensor with last dimension d={d}, got {type(t).__name__}")
        v.last_dim(name, t, d)
    q_len, k_len = q.shape[-2], k.shape[-2]
    if k_len < q_len:
        raise ValueError(f"k.shape[-2] (k_len) must be >= q.shape[-2] (q_len)={q_len}, got {k_len}")
    if r.shape[-2] != k_len:
        raise ValueError(f"r.shape[-2] must be k_len={k_len} (one row per offset 0..k_len-1), got {r.shape[-2]}")


def xl_score_terms(q: Tensor, k: Tensor, r: Tensor, u: Tensor, v: Tensor) -> dict[str, Tensor]:
    """XL's four score terms, computed directly: gather r at o = M + i - j for every (i, j).

    The plain O(q_len * k_len * d) form (it builds a (..., q_len, k_len, d) tensor of
    position vectors); ``xl_scores`` gets the same numbers with one matmul and ``rel_shift``.
    q: (..., q_len, d) projected queries W_q x_i
    k: (..., k_len, d) projected content keys W_{k,E} x_j
    r: (..., k_len, d) projected offsets, r[..., o, :] = W_{k,R} R_o, o = 0..k_len-1
    u, v: global content / position bias, broadcastable to q, e.g. (d,) or (H, 1, d)
    returns: {"a", "b", "c", "d"} -> (..., q_len, k_len), unscaled (XL divides the sum by
             sqrt(d) before the softmax). Terms (b) and (d) are -inf for future keys
             (j > M + i): no row of r exists for a negative offset.
    Taught in: notebooks/04_relative.ipynb
    """
    _check(q, k, r, u, v)
    q_len, k_len = q.shape[-2], k.shape[-2]
    offset = -relative_positions(q_len, k_len, q_offset=k_len - q_len, device=q.device)  # M + i - j
    future = offset < 0
    r_ij = r[..., offset.clamp(min=0), :]  # (..., q_len, k_len, d): r_{M+i-j}
    b = torch.einsum("...id,...ijd->...ij", q, r_ij)
    d_term = torch.einsum("...id,...ijd->...ij", v.expand_as(q), r_ij)
    return {
        "a": q @ k.transpose(-2, -1),
        "b": b.masked_fill(future, float("-inf")),
        "c": u.expand_as(q) @ k.transpose(-2, -1),  # the same row u . k_j for every query
        "d": d_term.masked_fill(future, float("-inf")),
    }


def xl_scores(q: Tensor, k: Tensor, r: Tensor, u: Tensor, v: Tensor, *, mask_future: bool = True) -> Tensor:
    """XL scores the fast way: (q + u) k^T  +  rel_shift((q + v) r_desc^T).

    One matmul scores every query against every offset (r_desc = r with rows in the
    order k_len - 1, ..., 0), then ``rel_shift`` moves row i so column j holds offset
    M + i - j. Equal to the sum of ``xl_score_terms`` on every key a query may see.
    mask_future: set future keys (j > M + i) to -inf. False returns the raw shifted
                 scores, whose future entries are wrapped garbage (for demonstrations).
    Shapes as in ``xl_score_terms``; returns (..., q_len, k_len), unscaled.
    Taught in: notebooks/04_relative.ipynb
    """
    _check(q, k, r, u, v)
    q_len, k_len = q.shape[-2], k.shape[-2]
    ac = (q + u) @ k.transpose(-2, -1)
    bd = rel_shift((q + v) @ r.flip(-2).transpose(-2, -1))
    scores = ac + bd
    if mask_future:
        scores = scores.masked_fill(causal_mask(q_len, k_len, device=q.device), float("-inf"))
    return scores


def xl_scores_direct(q: Tensor, k: Tensor, r: Tensor, u: Tensor, v: Tensor) -> Tensor:
    """The sum (a) + (b) + (c) + (d) of ``xl_score_terms``; -inf for future keys.

    returns: (..., q_len, k_len)
    Taught in: notebooks/04_relative.ipynb
    """
    terms = xl_score_terms(q, k, r, u, v)
    return terms["a"] + terms["b"] + terms["c"] + terms["d"]
