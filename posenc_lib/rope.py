"""Rotary position embedding (RoPE, Su et al. 2021): rotate each feature pair by m * theta_j.

Pair j of a vector at position m turns by the angle m * theta_j (``rope_angles``).
Because rotations compose, <R_m q, R_n k> = <q, R_{n-m} k>: the score sees only n - m.

Two pairings are in use and both are exact RoPE, differing by a fixed
permutation of the features (``layout_permutation``):
  "interleaved": pairs (0, 1), (2, 3), ...          RoFormer, Meta LLaMA, GPT-J
  "half":        pairs (j, j + d/2), j < d/2        GPT-NeoX, Hugging Face ``rotate_half``
Rotation is counter-clockwise: (x, y) -> (x cos - y sin, x sin + y cos).

This file is the reference: angles -> cos/sin -> ``rotate_pairs``. Faster ways to do the
same rotation live in ``posenc_lib/kernels/``, and ``_rotate`` is the one place that picks
one; every path gives ``rotate_pairs``'s numbers (bit for bit on the CPU kernel).
Names: d = feature (head) dimension, m, n = positions.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from . import _validate as v
from .angles import rope_angles, rope_frequencies
from .kernels import cpu, torch_fast

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


# ---------------------------------------------------------------- angles -> cos, sin

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


def _cos_sin_of(angles: Tensor, attention_factor: float) -> tuple[Tensor, Tensor]:
    """cos and sin of an angle grid, times YaRN's factor (it scales q and k, so scores by its square)."""
    cos, sin = angles.cos(), angles.sin()
    if attention_factor != 1.0:
        cos, sin = cos * attention_factor, sin * attention_factor
    return cos, sin


def _angle_grid(x: Tensor, positions: Tensor | None, base: float, inv_freq: Tensor | None) -> Tensor:
    """positions * theta_j, shaped to broadcast against x's pairs: (seq, d/2) or (batch, 1, ..., 1, seq, d/2)."""
    angles = rope_angles(_as_positions(positions, x), x.shape[-1], base=base, inv_freq=inv_freq)
    if angles.dim() == 3:  # batched positions
        angles = angles.view(angles.shape[0], *([1] * (x.dim() - 3)), *angles.shape[1:])
    return angles


def _cos_sin(
    x: Tensor, positions: Tensor | None, base: float, inv_freq: Tensor | None, attention_factor: float
) -> tuple[Tensor, Tensor]:
    """cos and sin for x's positions, each broadcastable to (..., seq, d/2).

    float32, or float64 for float64 x (or float64 inv_freq), whatever x's dtype.
    """
    if inv_freq is None and x.dtype == torch.float64:
        inv_freq = rope_frequencies(x.shape[-1], base=base, device=x.device, dtype=torch.float64)
    return _cos_sin_of(_angle_grid(x, positions, base, inv_freq), attention_factor)


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
    """The precision contract: rotate in float32 (float64 for float64 x), cast back to x's dtype."""
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return rotate_pairs(work, cos.to(work.dtype), sin.to(work.dtype), layout).to(x.dtype)


def _rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """The single dispatch point: the same rotation, by the fastest path that applies.

    1. ``kernels.cpu``: CPU float32/bfloat16, contiguous, a C compiler found: one pass,
       bit-identical to ``rotate_in_float32``, with a backward (``torch.ops.posenc.rope_rotate``).
    2. ``kernels.torch_fast``: CPU or CUDA without gradients: two or fewer torch passes.
    3. ``rotate_in_float32`` (the reference): everything else, e.g. autograd on CUDA,
       gradients through cos/sin, the meta and MPS devices.
    """
    if cpu.applies(x, cos, sin):
        return cpu.rope_rotate(x, cos, sin, layout == "interleaved", False)
    if torch_fast.applies(x, cos, sin):
        return torch_fast.rotate(x, cos, sin, layout)
    return rotate_in_float32(x, cos, sin, layout)


def check_rope_args(x: Tensor, base: float, layout: str, rotary_dim: int | None = None) -> str:
    """Validate apply_rope's x, base, layout and rotary_dim; returns the layout."""
    if not isinstance(x, Tensor) or x.dim() < 2:
        raise ValueError(f"x must be a tensor of shape (..., seq, d), got {getattr(x, 'shape', type(x))}")
    if rotary_dim is None:
        v.even_dim("x.shape[-1]", x.shape[-1])
    else:
        check_rotary_dim(rotary_dim, x.shape[-1])
    v.base_above_one(base)
    return v.one_of("layout", layout, LAYOUTS)


def check_rotary_dim(rotary_dim: object, d: int, d_name: str = "x.shape[-1]") -> int:
    """rotary_dim: an even number of features, at most the head dimension d (called d_name in messages)."""
    rotary_dim = v.even_dim("rotary_dim", rotary_dim)
    if rotary_dim > d:
        raise ValueError(f"rotary_dim must be at most the head dimension {d_name} = {d}, got {rotary_dim}")
    return rotary_dim


def _rotate_part(x: Tensor, cos: Tensor, sin: Tensor, layout: str, rotary_dim: int) -> Tensor:
    """Rotate the first rotary_dim features of x (pairs laid out within them), pass the rest through."""
    if rotary_dim == x.shape[-1]:
        return _rotate(x, cos, sin, layout)
    # A contiguous copy of the rotated slice, so the C kernel can still serve it.
    rotated = _rotate(x[..., :rotary_dim].contiguous(), cos, sin, layout)
    return torch.cat((rotated, x[..., rotary_dim:]), dim=-1)


def apply_rope(
    x: Tensor,
    positions: Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    attention_factor: float = 1.0,
    rotary_dim: int | None = None,
) -> Tensor:
    """Rotate queries or keys by their positions: out[..., m, :] = R_m x[..., m, :].

    x:         (..., seq, d), d even, e.g. (batch, heads, seq, head_dim)
    positions: None (0..seq-1), (seq,) or (batch, seq) integer tensor
    layout:    "interleaved" or "half" (see module docstring)
    inv_freq:  (r // 2,) frequencies to use instead of base**(-2j/r) (context extension),
               r = rotary_dim or d
    attention_factor: multiplies the rotated features (YaRN's magnitude correction)
    rotary_dim: r, even, <= d: rotate only the first r features of each head (pairs laid
               out within them) and pass the other d - r through unchanged (partial
               rotary: GPT-NeoX, Phi, DeepSeek). None means r = d. As in transformers,
               attention_factor scales the rotated features only.
    returns:   same shape, dtype and device as x. Angles, cos and sin are computed in
               float32 (float64 for float64 x); half-precision x is rotated in float32
               and cast back. Stateless: cos and sin are computed on every call (a model
               keeps them in ``RotaryEmbedding``'s cache).
    Taught in: notebooks/05_rope.ipynb (rotary_dim: notebooks/08_rope_in_models.ipynb)
    """
    layout = check_rope_args(x, base, layout, rotary_dim)
    r = x.shape[-1] if rotary_dim is None else rotary_dim
    return _rotate_part(x, *_cos_sin(x[..., :r], positions, base, inv_freq, attention_factor), layout, r)


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
    """RoPE as a module: (q, k) -> (R q, R k), with its cos/sin tables cached.

    The module owns its tables (as torchtune's and rotary-embedding-torch's do): non-persistent
    buffers ``cos_cached``/``sin_cached`` of shape (n, d/2) for positions 0..n-1, grown when a
    longer sequence arrives and moved by ``.to(device)``; checkpoints do not carry them. They
    stay float32 even if the module is cast with ``.to(torch.bfloat16)``: angles need the bits.
    The forward pass reads sizes from shapes only, so it never synchronises with a GPU.

    q, k:      (..., seq, d) (q and k may have different lengths)
    positions: None (offset, offset + 1, ...), or a (seq,) / (batch, seq) integer tensor
               (computed on the spot, without the cache)
    offset:    first position when positions is None (e.g. the KV-cache length when decoding)
    rotary_dim: rotate only the first rotary_dim of the d features (see ``apply_rope``);
               inv_freq and the tables then have rotary_dim/2 columns
    Taught in: notebooks/05_rope.ipynb (offset and rotary_dim: notebooks/08_rope_in_models.ipynb)
    """

    def __init__(
        self,
        d: int,
        *,
        base: float = 10000.0,
        layout: str = "interleaved",
        inv_freq: Tensor | None = None,
        attention_factor: float = 1.0,
        rotary_dim: int | None = None,
    ):
        super().__init__()
        if rotary_dim is None:
            self.d = self.rotary_dim = v.even_dim("d", d)
        else:
            self.d = v.int_at_least("d", d, 1)
            self.rotary_dim = check_rotary_dim(rotary_dim, self.d, "d")
        r = self.rotary_dim
        self.layout = v.one_of("layout", layout, LAYOUTS)
        self.attention_factor = v.finite_number("attention_factor", attention_factor, above=0)
        if inv_freq is None:
            inv_freq = rope_frequencies(r, base=base)
        elif inv_freq.shape != (r // 2,):
            raise ValueError(f"inv_freq must have shape ({r // 2},), got {tuple(inv_freq.shape)}")
        self.register_buffer("inv_freq", inv_freq.float(), persistent=False)
        empty = torch.empty(0, r // 2, device=inv_freq.device)
        self.register_buffer("cos_cached", empty, persistent=False)
        self.register_buffer("sin_cached", empty.clone(), persistent=False)

    def _apply(self, fn, recurse: bool = True):
        # Follow device moves, but keep the float32 tables through dtype casts.
        before = {name: b for name, b in self._buffers.items() if b is not None}
        super()._apply(fn, recurse)
        for name, old in before.items():
            new = self._buffers[name]
            if new is not None and new.dtype != old.dtype:
                self._buffers[name] = old.to(device=new.device)
        return self

    def cos_sin(self, seq: int, offset: int = 0) -> tuple[Tensor, Tensor]:
        """cos and sin for positions offset .. offset + seq - 1, each (seq, rotary_dim/2) float32 (cache views)."""
        end = offset + seq
        if end > self.cos_cached.shape[0]:
            # Grow to the next power of two, so decoding token by token rebuilds rarely.
            n = 1 << max(0, end - 1).bit_length()
            angles = rope_angles(n, self.rotary_dim, inv_freq=self.inv_freq, device=self.inv_freq.device)
            self.cos_cached, self.sin_cached = _cos_sin_of(angles, self.attention_factor)
        return self.cos_cached[offset:end], self.sin_cached[offset:end]

    def rotate(self, x: Tensor, positions: Tensor | None = None, offset: int = 0) -> Tensor:
        """R x for one tensor (..., seq, d); see the class docstring for positions and offset."""
        v.last_dim("x", x, self.d)
        if positions is None:
            cos, sin = self.cos_sin(x.shape[-2], v.int_at_least("offset", offset, 0))
        else:
            rotated = x[..., : self.rotary_dim]
            cos, sin = _cos_sin_of(_angle_grid(rotated, positions, 10000.0, self.inv_freq), self.attention_factor)
        return _rotate_part(x, cos, sin, self.layout, self.rotary_dim)

    def forward(
        self, q: Tensor, k: Tensor, positions: Tensor | None = None, *, offset: int = 0
    ) -> tuple[Tensor, Tensor]:
        v.last_dim("q", q, self.d)
        v.last_dim("k", k, self.d)
        return self.rotate(q, positions, offset), self.rotate(k, positions, offset)
