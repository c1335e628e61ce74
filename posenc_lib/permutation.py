"""Reordering tokens: permutation matrices and how attention outputs move with them.

Without positions, self-attention cannot tell token orders apart: permute the input
rows and the output rows permute the same way (equivariance in the queries); shuffle
keys and values together and a fixed query's output does not change (invariance).
These helpers make that checkable in one line.
Names: n = number of tokens, d = feature dimension, ``order`` = a permutation of 0..n-1
meaning "row i of the result is row order[i] of the input" (``x[order]``).
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch
from torch import Tensor

from . import _validate as v
from .attention import attention


def _order_tensor(order: Sequence[int] | Tensor, device: torch.device | str | None = None) -> Tensor:
    if isinstance(order, Tensor):
        v.integer_tensor("order", order)
        t = order.to(device) if device is not None else order
    else:
        try:
            items = [v.int_at_least("order[i]", o, 0) for o in order]
        except TypeError:
            raise ValueError(f"order must be a sequence of integers, got {order!r}") from None
        t = torch.tensor(items, dtype=torch.long, device=device)
    if t.dim() != 1:
        raise ValueError(f"order must be 1-D (n,), got shape {tuple(t.shape)}")
    n = t.numel()
    if not torch.equal(t.sort().values.cpu(), torch.arange(n)):
        raise ValueError(f"order must be a permutation of 0..{n - 1} (each index once), got {t.tolist()}")
    return t.long()


def permutation_matrix(
    order: Sequence[int] | Tensor,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """The matrix P with P @ x == x[order]: P[i, order[i]] = 1, every other entry 0.

    order:   a permutation of 0..n-1 (list or (n,) integer tensor)
    returns: (n, n), on ``device`` (default: the order tensor's device, else the CPU)
    Taught in: notebooks/01_why_positions.ipynb
    """
    t = _order_tensor(order, device)
    n = t.numel()
    p = torch.zeros(n, n, device=t.device, dtype=dtype)
    p[torch.arange(n, device=t.device), t] = 1
    return p


def inverse_permutation(order: Sequence[int] | Tensor) -> Tensor:
    """The order that undoes ``order``: x[order][inverse] == x.

    returns: (n,) long, on the order tensor's device (CPU for a list)
    Taught in: notebooks/01_why_positions.ipynb
    """
    return _order_tensor(order).argsort()


def self_attention(
    x: Tensor,
    w_q: Tensor,
    w_k: Tensor,
    w_v: Tensor,
    *,
    positions: Tensor | None = None,
) -> tuple[Tensor, Tensor]:
    """Single-head self-attention of x, with an absolute code added before the projections.

    Q = (x + P) w_q, K = (x + P) w_k, V = (x + P) w_v (the usual form: positions are
    added to the input, then projected), output = softmax(Q K^T / sqrt(d_k)) V.
    x:         (..., n, d)
    w_q, w_k:  (d, d_k), right-multiplied (an nn.Linear weight is its transpose)
    w_v:       (d, d_v)
    positions: None (no positions: order-blind) or (n, d), e.g. ``sinusoidal_positions(n, d)``
    returns:   (output (..., n, d_v), weights (..., n, n))
    Taught in: notebooks/01_why_positions.ipynb
    """
    if not isinstance(x, Tensor) or x.dim() < 2:
        raise ValueError(f"x must be a tensor of shape (..., n, d), got {getattr(x, 'shape', type(x))}")
    d = x.shape[-1]
    for name, w in (("w_q", w_q), ("w_k", w_k), ("w_v", w_v)):
        if not isinstance(w, Tensor) or w.dim() != 2 or w.shape[0] != d:
            raise ValueError(f"{name} must have shape ({d}, d_out) for x of shape {tuple(x.shape)}, "
                             f"got {getattr(w, 'shape', type(w))}")
    if w_k.shape[1] != w_q.shape[1]:
        raise ValueError(f"w_k.shape[1] must equal w_q.shape[1]={w_q.shape[1]}, got {w_k.shape[1]}")
    if positions is not None:
        if not isinstance(positions, Tensor) or tuple(positions.shape) != tuple(x.shape[-2:]):
            raise ValueError(f"positions must have shape {tuple(x.shape[-2:])}, got {getattr(positions, 'shape', None)}")
        x = x + positions.to(x.dtype)
    return attention(x @ w_q, x @ w_k, x @ w_v)


def equivariance_error(fn: Callable[[Tensor], Tensor], x: Tensor, order: Sequence[int] | Tensor) -> float:
    """How far fn is from moving its output rows with its input rows: max |fn(x[order]) - fn(x)[order]|.

    0 (to rounding) for order-blind self-attention; clearly > 0 once positions are added.
    fn:      maps (..., n, d) to (..., n, d_out), e.g. ``lambda x: self_attention(x, wq, wk, wv)[0]``
    x:       (..., n, d)
    returns: a Python float
    Taught in: notebooks/01_why_positions.ipynb
    """
    if not isinstance(x, Tensor) or x.dim() < 2:
        raise ValueError(f"x must be a tensor of shape (..., n, d), got {getattr(x, 'shape', type(x))}")
    t = _order_tensor(order, x.device)
    if t.numel() != x.shape[-2]:
        raise ValueError(f"order must have length n={x.shape[-2]}, got {t.numel()}")
    moved = fn(x[..., t, :])
    expected = fn(x)[..., t, :]
    return float((moved - expected).abs().max()) if moved.numel() else 0.0
