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

from collections import OrderedDict

import torch
from torch import Tensor, nn

from . import _validate as v
from . import rope_cpu_kernel
from .angles import rope_angles, rope_frequencies

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
    Taught in: notebooks/05_rope.ipynb
    """
    d = x.shape[-1]
    if layout == "interleaved":
        pairs = x.unflatten(-1, (d // 2, 2))
        a, b = pairs[..., 0], pairs[..., 1]
        return torch.stack((a * cos - b * sin, a * sin + b * cos), dim=-1).flatten(-2)
    a, b = x[..., : d // 2], x[..., d // 2 :]
    return torch.cat((a * cos - b * sin, a * sin + b * cos), dim=-1)


def _rotate_fused(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """The plain form: rotate in float32 (float64 for float64 x) and cast back to x's dtype."""
    work = x if x.dtype in (torch.float32, torch.float64) else x.float()
    return rotate_pairs(work, cos.to(work.dtype), sin.to(work.dtype), layout).to(x.dtype)


def _check_rope_args(x: Tensor, base: float, layout: str) -> str:
    if not isinstance(x, Tensor) or x.dim() < 2:
        raise ValueError(f"x must be a tensor of shape (..., seq, d), got {getattr(x, 'shape', type(x))}")
    v.even_dim("x.shape[-1]", x.shape[-1])
    v.base_above_one(base)
    return v.one_of("layout", layout, LAYOUTS)


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
               and cast back. On the CPU, contiguous float32/bfloat16 x is rotated by a C
               loop in one pass (``rope_cpu_kernel``), bit-identical to ``rotate_pairs``.
    Taught in: notebooks/05_rope.ipynb
    """
    layout = _check_rope_args(x, base, layout)
    if _fast_path_ok(x, inv_freq):
        return _apply_rope_fast(x, positions, base, layout, inv_freq, attention_factor)
    return _rotate_fused(x, *_cos_sin(x, positions, base, inv_freq, attention_factor), layout)


# ---------------------------------------------------------------------------------------
# Fast path (rotate_pairs's numbers up to the last bit of rounding, fewer passes over memory).
# * CPU, float32/bfloat16, contiguous: the C kernel of rope_cpu_kernel.py, one pass,
#   bit-identical to rotate_pairs in float32. Everything below is the torch fallback.
# * cos/sin tables for positions=None are cached per (seq, d, base/inv_freq, factor,
#   device, angle dtype): recomputing sin and cos costs more than the rotation itself.
# * interleaved layout, float32/float64: one complex multiply x * e^{i angle} written
#   straight into the output (one pass, no temporaries).
# * half layout, float32/float64: out = x_first * [cos, sin] + x_second * [-sin, cos], with
#   the two halves broadcast (zero-copy views) against (seq, 2, d/2) tables: two passes,
#   no temporaries, no cat.
# * half-precision inputs: rotated in float32 chunk by chunk through one reused buffer of
#   at most _CHUNK_BYTES (kept in the last-level cache; few chunks, because each op costs a
#   thread-pool round trip that is expensive on a loaded CPU).
# Autograd (x or inv_freq requiring grad) and devices other than CPU/CUDA use the plain
# rotate_pairs form above.
# ---------------------------------------------------------------------------------------
_TABLE_CACHE: "OrderedDict[tuple, tuple[Tensor, ...]]" = OrderedDict()
_TABLE_CACHE_SIZE = 16
_FAST_DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# Bytes of float32 work per chunk for half-precision inputs (fits a server's L3 cache).
_CHUNK_BYTES = 8 * 2**20


def _fast_path_ok(x: Tensor, inv_freq: Tensor | None) -> bool:
    if x.dtype not in _FAST_DTYPES or x.device.type not in ("cpu", "cuda"):
        return False
    if torch.is_grad_enabled() and (x.requires_grad or (inv_freq is not None and inv_freq.requires_grad)):
        return False
    return inv_freq is None or inv_freq.device.type in ("cpu", "cuda")


def _tables(
    x: Tensor, positions: Tensor | None, base: float, layout: str, inv_freq: Tensor | None, attention_factor: float
) -> tuple[Tensor, ...]:
    """Rotation tables broadcastable against x's (..., seq, pairs) grid.

    interleaved: (cis,) complex e^{i angle} * factor, (..., seq, d/2)
    cos_sin:     (cos, sin), each (..., seq, d/2) (the compiled path)
    half:        (cs1, cs2) with cs1 = [cos, sin], cs2 = [-sin, cos] stacked on dim -2:
                 (..., seq, 2, d/2), so out = x[first half] * cs1 + x[second half] * cs2
    Angles in float32 (float64 for float64 x), as in _cos_sin.
    """
    key = None
    if positions is None:
        freq_key = None if inv_freq is None else (inv_freq.dtype, tuple(inv_freq.detach().cpu().tolist()))
        angle_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        key = (layout, x.shape[-2], x.shape[-1], base, freq_key, attention_factor, x.device, angle_dtype)
        hit = _TABLE_CACHE.get(key)
        if hit is not None:
            _TABLE_CACHE.move_to_end(key)
            return hit
    cos, sin = _cos_sin(x, positions, base, inv_freq, attention_factor)
    if x.dtype == torch.float64:
        cos, sin = cos.double(), sin.double()
    if layout == "cos_sin":  # for the compiled path
        tables: tuple[Tensor, ...] = (cos, sin)
    elif layout == "interleaved":
        tables = (torch.complex(cos, sin),)
    else:
        tables = (torch.stack((cos, sin), dim=-2), torch.stack((-sin, cos), dim=-2))
    if key is not None:
        _TABLE_CACHE[key] = tables
        if len(_TABLE_CACHE) > _TABLE_CACHE_SIZE:
            _TABLE_CACHE.popitem(last=False)
    return tables


def _as_complex(t: Tensor) -> Tensor | None:
    try:
        return torch.view_as_complex(t.unflatten(-1, (t.shape[-1] // 2, 2)))
    except RuntimeError:  # strides that a complex view cannot express
        return None


def _rotate_chunk(out: Tensor, x: Tensor, tables: tuple[Tensor, ...], layout: str) -> None:
    """out = R x for one chunk; out is float32/float64 and may alias nothing in x."""
    if layout == "interleaved":
        torch.mul(_as_complex(x), tables[0], out=_as_complex(out))
        return
    h = x.shape[-1] // 2
    xs, os_ = x.unflatten(-1, (2, h)), out.unflatten(-1, (2, h))
    torch.mul(xs[..., 0:1, :], tables[0], out=os_)  # [a cos, a sin]
    os_.addcmul_(xs[..., 1:2, :], tables[1])  # + [-b sin, b cos]


def _slice_tables(tables: tuple[Tensor, ...], sl: slice, layout: str) -> tuple[Tensor, ...]:
    if layout == "interleaved":  # (..., seq, d/2)
        return tuple(t[..., sl, :] for t in tables)
    return tuple(t[..., sl, :, :] for t in tables)  # (..., seq, 2, d/2)


def _apply_rope_fast(
    x: Tensor, positions: Tensor | None, base: float, layout: str, inv_freq: Tensor | None, attention_factor: float
) -> Tensor:
    if x.device.type == "cpu" and rope_cpu_kernel.enabled():  # one pass in C (rope_cpu_kernel.py)
        cos, sin = _tables(x, positions, base, "cos_sin", inv_freq, attention_factor)
        out = rope_cpu_kernel.rotate(x, cos, sin, layout)
        if out is not None:
            return out
    tables = _tables(x, positions, base, layout, inv_freq, attention_factor)
    work_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if x.dtype == work_dtype and _as_complex(x) is None:
        x = x.contiguous()
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if x.dtype == work_dtype:  # one complex multiply, or two broadcast passes (half layout)
        _rotate_chunk(out, x, tables, layout)
        return out
    seq, d = x.shape[-2], x.shape[-1]
    rows_per_position = max(1, x.numel() // max(1, seq * d))
    step = seq
    if x.device.type == "cpu":
        step = max(1, min(seq, _CHUNK_BYTES // (rows_per_position * d * 4)))
    # Half precision: convert each chunk to float32, rotate there, cast back into out.
    buf_in = torch.empty((*x.shape[:-2], min(step, seq), d), dtype=work_dtype, device=x.device)
    buf_out = torch.empty_like(buf_in)
    for s in range(0, seq, step):
        sl = slice(s, s + step)
        n = min(step, seq - s)
        xi, xo = buf_in[..., :n, :], buf_out[..., :n, :]
        xi.copy_(x[..., sl, :])
        _rotate_chunk(xo, xi, _slice_tables(tables, sl, layout), layout)
        out[..., sl, :].copy_(xo)
    return out


_COMPILED: dict[str, object] = {}


def apply_rope_compiled(
    x: Tensor,
    positions: Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    attention_factor: float = 1.0,
) -> Tensor:
    """``apply_rope`` with the rotation fused into one ``torch.compile`` kernel (opt-in).

    Same arguments, result and precision rules as ``apply_rope``: angles, cos and sin in
    float32 (float64 for float64 x), half-precision x rotated in float32 and cast back.
    The first call per (layout, dtype) compiles a kernel (seconds to tens of seconds on a
    CPU, and it needs a C++ compiler there); later calls make one pass over x.
    x: (..., seq, d); positions: None, (seq,) or (batch, seq)
    returns: same shape, dtype and device as x
    Taught in: notebooks/05_rope.ipynb
    """
    layout = _check_rope_args(x, base, layout)
    if not _fast_path_ok(x, inv_freq):
        return apply_rope(x, positions, base=base, layout=layout, inv_freq=inv_freq, attention_factor=attention_factor)
    cos, sin = _tables(x, positions, base, "cos_sin", inv_freq, attention_factor)
    fn = _COMPILED.get(layout)
    if fn is None:
        fn = _COMPILED[layout] = torch.compile(_rotate_fused, dynamic=True)
    return fn(x, cos, sin, layout)  # type: ignore[operator]


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
