"""Plain softmax attention, written out for teaching (and as the dense reference)."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from .relative import relative_positions


def causal_mask(q_len: int, k_len: int, *, device: torch.device | str | None = None) -> Tensor:
    """True where key j is in the future of query i (queries are the last q_len positions).

    returns: (q_len, k_len) bool
    Taught in: notebooks/07_beyond.ipynb (the causal mask as a counter)
    """
    return relative_positions(q_len, k_len, q_offset=k_len - q_len, device=device) > 0


def attention(
    q: Tensor, k: Tensor, v: Tensor, *, bias: Tensor | None = None, causal: bool = False
) -> tuple[Tensor, Tensor]:
    """softmax(q k^T / sqrt(d) + bias) v, returning the weights too.

    q: (..., q_len, d); k: (..., k_len, d); v: (..., k_len, d_v), same leading dims
    bias: broadcastable to (..., q_len, k_len), e.g. (H, q_len, k_len) for (B, H, ., .) inputs
    causal: hide keys after each query (queries are the last q_len positions)
    returns: (output (..., q_len, d_v), weights (..., q_len, k_len))
    Taught in: notebooks/01_why_positions.ipynb
    """
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not isinstance(t, Tensor) or t.dim() < 2:
            raise ValueError(f"{name} must be a tensor of shape (..., seq, d), got {getattr(t, 'shape', type(t))}")
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k.shape[-1] must equal q.shape[-1]={q.shape[-1]}, got {k.shape[-1]}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"v.shape[-2] must equal k.shape[-2]={k.shape[-2]} (one value per key), got {v.shape[-2]}")
    if not (q.shape[:-2] == k.shape[:-2] == v.shape[:-2]):
        raise ValueError(
            f"q, k and v must share leading dims, got {tuple(q.shape[:-2])}, {tuple(k.shape[:-2])}, {tuple(v.shape[:-2])}"
        )
    q_len, k_len = q.shape[-2], k.shape[-2]
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if bias is not None:
        want = tuple(scores.shape)
        if bias.dim() > scores.dim() or tuple(bias.shape[-2:]) != (q_len, k_len) or any(
            b not in (1, s) for b, s in zip(reversed(bias.shape), reversed(want))
        ):
            raise ValueError(f"bias must broadcast to {want} with last dims ({q_len}, {k_len}), got {tuple(bias.shape)}")
        scores = scores + bias.to(scores.dtype)
    if causal:
        if k_len < q_len:
            raise ValueError(f"k_len must be >= q_len={q_len} for causal attention, got {k_len}")
        scores = scores.masked_fill(causal_mask(q_len, k_len, device=q.device), float("-inf"))
    weights = scores.softmax(dim=-1)
    return weights @ v, weights
