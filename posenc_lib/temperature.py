"""Llama 4's attention temperature on its layers without positions (iRoPE).

Llama 4 leaves RoPE out of every fourth layer (NoPE layers). Those layers get no signal
of distance, and over a long context their softmax spreads over more and more keys; the fix
(the paper transformers' Llama 4 code cites: arXiv 2501.19399, Scalable-Softmax) multiplies
each query by a factor that grows like the log of its position, sharpening the softmax
again. Llama 4 grows it in steps of ``floor_scale`` tokens: 1 for the first
floor_scale - 1 positions, then 1 + attn_scale ln(1 + floor((pos + 1) / floor_scale)).
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _validate as v
from .angles import position_ids
from .device import float64_device, moved


def attention_temperature(
    positions: int | Tensor, *, floor_scale: int = 8192, attn_scale: float = 0.1
) -> Tensor:
    """Query scale of a NoPE layer: 1 + attn_scale * ln(1 + floor((pos + 1) / floor_scale)).

    positions:   int n (meaning 0..n-1) or a (seq,) / (batch, seq) integer tensor of
                 absolute positions >= 0 (with a KV cache: offset by the cache length)
    floor_scale: step length in tokens (Llama 4: 8192)
    attn_scale:  strength (Llama 4: 0.1)
    returns:     float32 tensor of the positions' shape, on their device; multiply the
                 queries with it, broadcast over heads and features
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    pos = position_ids(positions, None)
    if pos.device.type == "cpu" and pos.numel() and int(pos.min()) < 0:  # elsewhere, reading it would wait on the host
        raise ValueError(f"positions must be >= 0, got a minimum of {int(pos.min())}")
    floor_scale = v.int_at_least("floor_scale", floor_scale, 1)
    attn_scale = v.finite_number("attn_scale", attn_scale)
    # Integer floor division: exact for any floor_scale (a float division may round across a step).
    steps = torch.div(pos + 1, floor_scale, rounding_mode="floor")
    steps = moved(steps, float64_device(pos.device), torch.float64)  # float64 where the device has it (not MPS)
    return moved(1.0 + attn_scale * torch.log1p(steps), pos.device, torch.float32)
