"""Rotary position embedding (RoPE, Su et al. 2021): rotate each feature pair by m * theta_j.

Pair j of a vector at position m turns by the angle m * theta_j (``rope_angles``).
Because rotations compose, <R_m q, R_n k> = <q, R_{n-m} k>: the score sees only n - m.

Two pairings are in use and both are exact RoPE, differing by a fixed
permutation of the features (``layout_permutation``):
  "interleaved": pairs (0, 1), (2, 3), ...          RoFormer, Meta LLaMA, GPT-J
  "half":        pairs (j, j + d/2), j < d/2        GPT-NeoX, Hugging Face ``rotate_half``
Rotation is counter-clockwise: (x, y) -> (x cos - y sin, x sin + y cos).
Names: d = feature (head) dimension, m, n = positions.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from . import _validate as v
from .angles import rope_angles, rope_frequencies

LAYOUTS = ("interleaved", "half")


def pair_indices(d: int, layout: str = "interleaved") -> tuple[Tensor, Tensor]:
    """Feature indices of the two members of each rotated pair.

    returns: (first, second), each (d // 2,) long; pair j is (first[j], second[j])
    """
    d = v.even_dim("d", d)
    layout = v.one_of("layout", layout, LAYOUTS)
    j = torch.arange(d // 2)
    if layout == "interleaved":
        return 2 * j, 2 * j + 1
    return j, j + d // 2


def layout_permutation(d: int) -> Tensor:
    """The permutation P taking the interleaved layout to the half layout.

    apply_rope(x, layout="interleaved")[..., P] == apply_rope(x[..., P], layout="half").
    P = [0, 2, 4, ..., d-2, 1, 3, ..., d-1]. To run an interleaved checkpoint with a
    half-layout kernel, permute the rows of W_q and W_k (per head) by P: this is what
    Hugging Face's LLaMA conversion script does to Meta's weights.
    returns: (d,) long
    Taught in: notebooks/05_rope.ipynb
    """
    first, second = pair_indices(d, "interleaved")
    return torch.cat((first, second))


def _as_positions(positions: Tensor | None, x: Tensor) -> Tensor:
    seq = x.shape[-2]
    if positions is None:
        return torch.arange(seq, device=x.device)
    if not isinstance(positions, Tensor):
        raise ValueError(f"positions must be None or an integer tensor, got {type(positions).__name__}")
    v.integer_tensor("positions", positions)
    if positions.dim() not in (1, 2) or positions.shape[-1] != seq:
        raise ValueError(
            f"positions must have shape ({seq},) or (batch, {seq}) to match x of shape "
            f"{tuple(x.shape)}, got {tuple(positions.shape)}"
        )
    if positions.dim() == 2 and (x.dim() < 3 or positions.shape[0] != x.shape[0]):
        raise ValueError(
            f"batched positions of shape {tuple(positions.shape)} need x of shape "
            f"({positions.shape[0]}, ..., {seq}, d), got {tuple(x.shape)}"
        )
    return positions


def _cos_sin(
    x: Tensor, positions: Tensor | None, base: float, inv_freq: Tensor | None, attention_factor: float
) -> tuple[Tensor, Tensor]:
    """cos and sin of the angle grid, shaped to broadcast against x's pairs (..., seq, d/2)."""
    d = x.shape[-1]
    pos = _as_positions(positions, x)
    if inv_freq is None and x.dtype == torch.float64:
        inv_freq = rope_frequencies(d, base=base, device=x.device, dtype=torch.float64)
    angles = rope_angles(pos, d, base=base, inv_freq=inv_freq)
    if angles.dim() == 3:  # (batch, seq, d/2) -> (batch, 1, ..., 1, seq, d/2)
        angles = angles.view(angles.shape[0], *([1] * (x.dim() - 3)), *angles.shape[1:])
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:  # YaRN scales q and k by this (so scores by its square)
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "interleaved") -> Tensor:
    """Rotate every feature pair of x counter-clockwise by the angle whose cos/sin are given.

    x:        (..., seq, d)
    cos, sin: broadcastable to (..., seq, d // 2)
    returns:  (..., seq, d), in the promoted dtype of x and cos
    """
    d = x.shape[-1]
    if layout == "interleaved":
        pairs = x.unflatten(-1, (d // 2, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def apply_rope(
    x: Tensor,
    positions: Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    attention_factor: float = 1.0,
) -> Tensor:
    """Rotate queries or keys by their positions: out[..., m, :] = R_m x[..., m, :].

    x:         (..., seq, d), d even, e.g. (batch, heads, seq, head_dim)
    positions: None (0..seq-1), (seq,) or (batch, seq) integer tensor
    layout:    "interleaved" or "half" (see module docstring)
    inv_freq:  (d // 2,) frequencies to use instead of base**(-2j/d) (context extension)
    attention_factor: multiplies the output (YaRN's magnitude correction)
    returns:   same shape, dtype and device as x. Angles, cos and sin are computed in
               float32 (float64 for float64 x); half-precision x is rotated in float32
               and cast back.
    Taught in: notebooks/05_rope.ipynb
    """
    if not isinstance(x, Tensor) or x.dim() < 2:
        raise ValueError(f"x must be a tensor of shape (..., seq, d), got {getattr(x, 'shape', type(x))}")
    v.even_dim("x.shape[-1]", x.shape[-1])
    v.base_above_one(base)
    layout = v.one_of("layout", layout, LAYOUTS)
    cos, sin = _cos_sin(x, positions, base, inv_freq, attention_factor)
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return rotate_pairs(work, cos.to(work.dtype), sin.to(work.dtype), layout).to(x.dtype)


def rope_matrix(
    m: int,
    d: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """The dense d x d rotation R_m (the teaching form): apply_rope(x)[m] == R_m @ x[m].

    Block-diagonal [[cos, -sin], [sin, cos]] per pair for the interleaved layout; the
    same blocks spread over rows (j, j + d/2) for the half layout.
    m may be negative: R_{-m} = R_m^T.
    returns: (d, d) float32
    Taught in: notebooks/05_rope.ipynb
    """
    if isinstance(m, bool) or not isinstance(m, int):
        raise ValueError(f"m must be an integer position, got {m!r}")
    d = v.even_dim("d", d)
    layout = v.one_of("layout", layout, LAYOUTS)
    angles = rope_angles(torch.tensor([m], device=device), d, base=base, inv_freq=inv_freq)[0]
    cos, sin = angles.cos(), angles.sin()
    a, b = (idx.to(angles.device) for idx in pair_indices(d, layout))
    R = torch.zeros(d, d, dtype=angles.dtype, device=angles.device)
    R[a, a], R[a, b], R[b, a], R[b, b] = cos, -sin, sin, cos
    return R


class RotaryEmbedding(nn.Module):
    """RoPE as a module: (q, k) -> (R q, R k).

    Holds its frequencies as a non-persistent buffer, so ``.to(device)`` moves them
    and checkpoints do not carry them.
    q, k: (..., seq, d); positions: None, (seq,) or (batch, seq)
    Taught in: notebooks/05_rope.ipynb
    """

    def __init__(
        self,
        d: int,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        inv_freq: Tensor | None = None,
        attention_factor: float = 1.0,
    ):
        super().__init__()
        self.d = v.even_dim("d", d)
        self.layout = v.one_of("layout", layout, LAYOUTS)
        self.attention_factor = float(attention_factor)
        if inv_freq is None:
            inv_freq = rope_frequencies(d, base=base)
        elif inv_freq.shape != (d // 2,):
            raise ValueError(f"inv_freq must have shape ({d // 2},), got {tuple(inv_freq.shape)}")
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)

    def forward(self, q: Tensor, k: Tensor, positions: Tensor | None = None) -> tuple[Tensor, Tensor]:
        v.last_dim("q", q, self.d)
        v.last_dim("k", k, self.d)
        kw = dict(layout=self.layout, inv_freq=self.inv_freq, attention_factor=self.attention_factor)
        return apply_rope(q, positions, **kw), apply_rope(k, positions, **kw)
