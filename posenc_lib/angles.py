"""The angle grid shared by sinusoidal encodings and RoPE.

Both methods use the same numbers: pair j of a d-dimensional vector turns at
frequency theta_j = base**(-2j/d) radians per position, so position m has
angle m * theta_j. Sinusoids write sin/cos of these angles into the vector;
RoPE rotates the vector by them. One formula, one place: every other module
calls these two functions.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _validate as v
from .device import float64_device, moved

# Angles are products position * frequency. In bf16 (8 bits of mantissa) the
# product at position 1000 is already off by ~4 radians, so the grid is always
# built in float32 (float64 if asked), whatever dtype the activations have.
_ANGLE_DTYPES = (torch.float32, torch.float64)


def rope_frequencies(
    d: int,
    *,
    base: float = 10000.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Inverse frequencies theta_j = base**(-2j/d), j = 0 .. d/2 - 1 (j counts pairs).

    d:       even feature dimension (the head dimension for RoPE)
    returns: (d // 2,) float32 (or float64), on ``device``
    Taught in: notebooks/03_sinusoids.ipynb, notebooks/05_rope.ipynb
    """
    d = v.even_dim("d", d)
    base = v.base_above_one(base)
    v.dtype_in("dtype", dtype, _ANGLE_DTYPES)
    # Computed in float64 then rounded once, so each theta_j is the float32
    # nearest the exact value (the usual float32 formula can be 1 ulp off).
    # On a device without float64 (MPS) that happens on the CPU and the result is moved.
    exponent = torch.arange(0, d, 2, device=float64_device(device), dtype=torch.float64) / d
    return moved(base ** -exponent, device, dtype)


def position_ids(positions: int | Tensor, device: torch.device | str | None = None) -> Tensor:
    """Positions as a tensor: an int n means 0 .. n-1 (on ``device``); a (seq,) or (batch, seq)
    integer tensor is checked and returned as it is. Raises ValueError naming ``positions``."""
    if isinstance(positions, Tensor):
        v.integer_tensor("positions", positions)
        if positions.dim() not in (1, 2):
            raise ValueError(
                f"positions must be 1-D (seq,) or 2-D (batch, seq), got shape {tuple(positions.shape)}"
            )
        return positions
    n = v.int_at_least("positions", positions, 0)
    return torch.arange(n, device=device)


def checked_frequencies(inv_freq: Tensor, d: int, device: torch.device | str | None) -> Tensor:
    """Caller-given frequencies for d features: shape (d // 2,), float32 or float64 (others become
    float32), on ``device``. Raises ValueError naming ``inv_freq``."""
    if inv_freq.shape != (d // 2,):
        raise ValueError(f"inv_freq must have shape ({d // 2},) for d={d}, got {tuple(inv_freq.shape)}")
    if inv_freq.dtype not in _ANGLE_DTYPES:
        inv_freq = inv_freq.float()
    return inv_freq.to(device)


def rope_angles(
    positions: int | Tensor,
    d: int,
    *,
    base: float = 10000.0,
    inv_freq: Tensor | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """Rotation angle of each (position, pair): out[m, j] = positions[m] * theta_j.

    positions: int n (meaning 0..n-1), (seq,) or (batch, seq) integer tensor
    d:         even feature dimension
    inv_freq:  optional (d // 2,) frequencies replacing base**(-2j/d), e.g. from
               ``scaled_rope_frequencies`` (context extension)
    returns:   (seq, d // 2) or (batch, seq, d // 2), float32 (float64 if
               inv_freq is float64) whatever the positions' dtype, on the
               positions' device (or ``device`` when positions is an int)
    Taught in: notebooks/05_rope.ipynb
    """
    d = v.even_dim("d", d)
    pos = position_ids(positions, device)
    if inv_freq is None:
        inv_freq = rope_frequencies(d, base=base, device=pos.device)
    else:
        inv_freq = checked_frequencies(inv_freq, d, pos.device)
    # An outer product, as a broadcasted multiply so batched positions work too.
    return pos.to(inv_freq.dtype).unsqueeze(-1) * inv_freq
