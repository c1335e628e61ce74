"""Rotary position embedding (RoPE, Su et al. 2021): rotate each feature pair by m * theta_j.

Pair j of a vector at position m turns by the angle m * theta_j (``rope_angles``).
Because rotations compose, <R_m q, R_n k> = <q, R_{n-m} k>: the score sees only n - m.

Two pairings are in use and both are exact RoPE, differing by a fixed
permutation of the features (``layout_permutation``):
  "interleaved": pairs (0, 1), (2, 3), ...          RoFormer, Meta LLaMA, GPT-J
  "half":        pairs (j, j + d/2), j < d/2        GPT-NeoX, Hugging Face ``rotate_half``
Rotation is counter-clockwise: (x, y) -> (x cos - y sin, x sin + y cos).

This file is the reference and nothing else: arguments (``RopeOptions``) -> positions ->
angles (``position_angles``) -> cos/sin (``rope_tables``) -> ``rotate_pairs`` in float32
(``rotate_in_float32``), put together in ``rotate_at_positions``. It imports no fast path.
What callers use, ``apply_rope`` and ``RotaryEmbedding``, lives in ``posenc_lib/rotary.py``:
the same steps, with the rotation handed to the fastest path in ``posenc_lib/kernels/``
that gives this file's numbers.
Names: d = feature (head) dimension, r = rotated features (d unless partial), m, n = positions.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable

import torch
from torch import Tensor

from . import _validate as v
from .angles import position_ids, rope_angles, rope_frequencies

LAYOUTS = ("interleaved", "half")


def pair_indices(d: int, layout: str = "interleaved") -> tuple[Tensor, Tensor]:
    """Feature indices of the two members of each rotated pair.

    returns: (first, second), each (d // 2,) long; pair j is (first[j], second[j])
    Taught in: notebooks/05_rope.ipynb
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


# ---------------------------------------------------------------- the arguments

@dataclass(frozen=True)
class RopeOptions:
    """The keyword arguments every RoPE entry point takes, checked here once.

    ``apply_rope``, ``apply_rope_nd`` and ``RotaryEmbedding`` take these keywords with these
    defaults (tests/test_layering.py compares their signatures with the fields below;
    ``apply_rope_compiled`` passes its keywords on), build one ``RopeOptions`` and hand it to
    the steps below, so an option added here reaches all of them.
    base:             theta_j = base**(-2j/r)
    layout:           "interleaved" or "half" (module docstring)
    inv_freq:         (r // 2,) frequencies used instead of base's (context extension), or None
    attention_factor: multiplies the rotated features (YaRN's magnitude correction); > 0
    rotary_dim:       r, even: rotate the first r features of each head (pairs laid out within
                      them) and pass the other d - r through (partial rotary: GPT-NeoX, Phi,
                      DeepSeek); None: r = d
    """

    base: float = 10000.0
    layout: str = "interleaved"
    inv_freq: Tensor | None = None
    attention_factor: float = 1.0
    rotary_dim: int | None = None

    def __post_init__(self) -> None:
        checked = partial(object.__setattr__, self)  # frozen: store the normalised values once
        checked("base", v.base_above_one(self.base))
        checked("layout", v.one_of("layout", self.layout, LAYOUTS))
        if self.inv_freq is not None and not isinstance(self.inv_freq, Tensor):
            raise ValueError(f"inv_freq must be None or a tensor of frequencies, got {type(self.inv_freq).__name__}")
        checked("attention_factor", v.finite_number("attention_factor", self.attention_factor, above=0))
        if self.rotary_dim is not None:
            checked("rotary_dim", v.even_dim("rotary_dim", self.rotary_dim))

    def rotated_features(self, d: int, d_name: str = "x.shape[-1]") -> int:
        """r for a head dimension d (called d_name in messages): rotary_dim, at most d, or d itself (even)."""
        if self.rotary_dim is None:
            return v.even_dim(d_name, d)
        if self.rotary_dim > d:
            raise ValueError(f"rotary_dim must be at most the head dimension {d_name} = {d}, got {self.rotary_dim}")
        return self.rotary_dim


# ---------------------------------------------------------------- positions -> angles -> cos, sin

def sequence_positions(positions: Tensor | None, x: Tensor) -> Tensor:
    """The positions of x's seq rows: 0 .. seq - 1 for None, else a checked (seq,) or (batch, seq) integer tensor."""
    seq = x.shape[-2]
    if positions is None:
        return torch.arange(seq, device=x.device)
    if not isinstance(positions, Tensor):
        raise ValueError(f"positions must be None or an integer tensor, got {type(positions).__name__}")
    positions = position_ids(positions)
    if positions.shape[-1] != seq:
        raise ValueError(f"positions must have shape ({seq},) or (batch, {seq}) to match x of shape "
                         f"{tuple(x.shape)}, got {tuple(positions.shape)}")
    if positions.dim() == 2 and (x.dim() < 3 or positions.shape[0] != x.shape[0]):
        raise ValueError(f"batched positions of shape {tuple(positions.shape)} need x of shape "
                         f"({positions.shape[0]}, ..., {seq}, d), got {tuple(x.shape)}")
    return positions


def broadcast_over_heads(angles: Tensor, x: Tensor) -> Tensor:
    """(seq, r/2) angles as they are; batched (batch, seq, r/2) as (batch, 1, ..., 1, seq, r/2) for x (batch, ..., seq, d)."""
    if angles.dim() == 3:
        return angles.view(angles.shape[0], *([1] * (x.dim() - 3)), *angles.shape[1:])
    return angles


def position_angles(x: Tensor, positions: Tensor | None, options: RopeOptions) -> Tensor:
    """m * theta_j for the rotated features of x at its positions, broadcastable to (..., seq, r/2).

    float32 whatever x's dtype (bf16 cannot hold the products), float64 for float64 x or float64 inv_freq.
    """
    r = options.rotated_features(x.shape[-1])
    inv_freq = options.inv_freq
    if inv_freq is None and x.dtype == torch.float64:
        inv_freq = rope_frequencies(r, base=options.base, device=x.device, dtype=torch.float64)
    angles = rope_angles(sequence_positions(positions, x), r, base=options.base, inv_freq=inv_freq)
    return broadcast_over_heads(angles, x)


def rope_tables(angles: Tensor, attention_factor: float = 1.0) -> tuple[Tensor, Tensor]:
    """cos and sin of an angle grid, times YaRN's factor (it scales q and k, so the scores by its square)."""
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


# ---------------------------------------------------------------- the rotation

def rotate_pairs(x: Tensor, cos: Tensor, sin: Tensor, layout: str = "interleaved") -> Tensor:
    """Rotate every feature pair of x counter-clockwise by the angle whose cos/sin are given.

    x:        (..., seq, d)
    cos, sin: broadcastable to (..., seq, d // 2)
    returns:  (..., seq, d), in the promoted dtype of x and cos
    Taught in: notebooks/05_rope.ipynb
    """
    d = x.shape[-1]
    if layout == "interleaved":
        pairs = x.unflatten(-1, (d // 2, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def rotate_in_float32(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """The precision contract: rotate in float32 (float64 for float64 x), cast back to x's dtype.

    Every fast path in ``posenc_lib/kernels/`` computes this function's numbers.
    """
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return rotate_pairs(work, cos.to(work.dtype), sin.to(work.dtype), layout).to(x.dtype)


Rotation = Callable[[Tensor, Tensor, Tensor, str], Tensor]


def rotate_partial(x: Tensor, cos: Tensor, sin: Tensor, options: RopeOptions,
                   rotate: Rotation = rotate_in_float32) -> Tensor:
    """Rotate the first r features of x by ``rotate(x, cos, sin, layout)``, pass the other d - r through.

    rotate: the reference ``rotate_in_float32`` here; ``posenc_lib.rotary.rotate`` (the fast
    paths) in ``apply_rope``
    """
    r = options.rotated_features(x.shape[-1])
    if r == x.shape[-1]:
        return rotate(x, cos, sin, options.layout)
    # A contiguous copy of the rotated slice, so a one-pass kernel can still serve it.
    rotated = rotate(x[..., :r].contiguous(), cos, sin, options.layout)
    return torch.cat((rotated, x[..., r:]), dim=-1)


def rotate_at_positions(x: Tensor, positions: Tensor | None, options: RopeOptions,
                        rotate: Rotation = rotate_in_float32) -> Tensor:
    """out[..., m, :] = R_m x[..., m, :]: the body of every RoPE entry point, the reference by default.

    Checks x, turns its positions into angles, the angles into cos/sin, and rotates the first r
    features with ``rotate``. ``rotate_at_positions(x, positions, RopeOptions(...))`` gives
    ``apply_rope``'s numbers by the reference alone: what every fast path is tested against.
    x: (..., seq, d); positions: None (0..seq-1), (seq,) or (batch, seq)
    returns: same shape, dtype and device as x
    """
    options.rotated_features(v.sequence_tensor("x", x).shape[-1])
    cos, sin = rope_tables(position_angles(x, positions, options), options.attention_factor)
    return rotate_partial(x, cos, sin, options, rotate)


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


