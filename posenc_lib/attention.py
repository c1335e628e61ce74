"""Plain softmax attention, written out for teaching (and as the dense reference), and causal
linear attention, the kernelised form that runs as a recurrence."""
from __future__ import annotations

import math

import torch
from torch import Tensor

from . import _validate
from .device import moved
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
    _validate.qkv(q, k, v)
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


def causal_linear_attention(
    phi_q: Tensor,
    phi_k: Tensor,
    v: Tensor,
    *,
    decay: float | Tensor = 1.0,
    q_num: Tensor | None = None,
    k_num: Tensor | None = None,
) -> Tensor:
    """Causal linear (kernelised) attention as a recurrence: one (d, d_v) state, one step per token.

    out_i = q_num_i · S_i / (phi_q_i · z_i), with the running sums
    S_i = decay * S_{i-1} + k_num_i v_i^T  and  z_i = decay * z_{i-1} + phi_k_i,
    so key j <= i enters row i with the factor decay**(i - j): 1 is plain linear attention
    (Katharopoulos et al., 2020), below 1 a decay (the recurrence of RetNet's retention).
    The quadratic form it equals: (q_num k_num^T * D) v / rowsum(phi_q phi_k^T * D),
    D[i, j] = decay**(i - j) for j <= i, else 0.

    phi_q, phi_k: (..., L, d) positive features of the queries and keys, e.g. F.elu(x) + 1
    v:            (..., L, d_v)
    q_num, k_num: (..., L, d) features for the numerator only (default phi_q, phi_k). RoFormer
                  (section 3.3) puts RoPE's rotation here and keeps the denominator unrotated.
    decay:        gamma in (0, 1]: a number, or a tensor broadcastable to the leading dims
                  (e.g. (H,) for one gamma per head of (B, H, L, d) inputs)
    returns:      (..., L, d_v)
    Taught in: notebooks/06_alibi.ipynb (which encodings fit linear attention)
    """
    q_num = phi_q if q_num is None else q_num
    k_num = phi_k if k_num is None else k_num
    named = {"phi_q": phi_q, "phi_k": phi_k, "q_num": q_num, "k_num": k_num}
    for name, t in {**named, "v": v}.items():
        if not isinstance(t, Tensor) or t.dim() < 2:
            raise ValueError(f"{name} must be a tensor of shape (..., L, d), got {getattr(t, 'shape', type(t))}")
    for name, t in named.items():
        if t.shape != phi_q.shape:
            raise ValueError(f"{name} must have the shape of phi_q, {tuple(phi_q.shape)}, got {tuple(t.shape)}")
    if v.shape[:-1] != phi_q.shape[:-1]:
        raise ValueError(f"v must have shape {tuple(phi_q.shape[:-1])} + (d_v,), one value per key, got {tuple(v.shape)}")
    bad = ValueError(f"decay must be in (0, 1] (a number or a tensor of them), got {decay!r}")
    if isinstance(decay, Tensor):
        # Checked where it costs nothing: reading a GPU tensor's values would wait on the device.
        if decay.device.type == "cpu" and not bool(((decay > 0) & (decay <= 1)).all()):
            raise bad
        gamma = moved(decay, phi_q.device, phi_q.dtype)
    elif isinstance(decay, bool) or not isinstance(decay, (int, float)) or not 0 < decay <= 1:
        raise bad
    else:
        gamma = torch.full((), float(decay), dtype=phi_q.dtype, device=phi_q.device)
    gamma = gamma[..., None]  # broadcasts against z (..., d); one more axis below for S (..., d, d_v)
    S = phi_q.new_zeros(*phi_q.shape[:-2], phi_q.shape[-1], v.shape[-1])
    z = torch.zeros_like(phi_k[..., 0, :])
    outs = []
    for i in range(phi_q.shape[-2]):  # the recurrence: the state never grows with L
        S = gamma[..., None] * S + k_num[..., i, :, None] * v[..., i, None, :]
        z = gamma * z + phi_k[..., i, :]
        num = (q_num[..., i, :, None] * S).sum(-2)
        outs.append(num / (phi_q[..., i, :] * z).sum(-1, keepdim=True))
    return torch.stack(outs, dim=-2)
