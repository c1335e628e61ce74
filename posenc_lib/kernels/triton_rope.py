"""RoPE on a GPU in one pass: a Triton kernel registered as the torch operator ``posenc::rope_triton``.

Why it is bandwidth-bound: rotating a pair takes 6 flops (4 multiplies, 2 adds) and moves 8
bytes in bfloat16 (2 values read, 2 written; 16 in float32): under one flop per byte, where an
H100 can do about 20 float32 flops per byte of HBM bandwidth. So the time is the time to move q
and k through memory, and the goal is one read and one write per element: the cost of a copy.
Even cos and sin computed in the kernel (some 40 instructions a pair) are shared by every head of
a program, about one instruction per pair per head. Eager torch spends a trip through memory
per operation (``x * cos``, ``y * sin``, the difference, the concatenation, the casts), about 10
of them; this kernel does all of them in registers.

What one program instance does (a one-dimensional grid: the position blocks of sequence and head
group 0, then of 1, ...):
  1. takes BLOCK_S positions s of one sequence and computes their angles once, as a
     (BLOCK_S, r/2) block of cos and sin, in one of two ways:
       * tables: read the float32 cos/sin rows the caller made (``RotaryEmbedding``'s cache);
       * registers: angle = float(position) * inv_freq[j], then cos and sin, all in float32
         (float64 for float64 inputs), from the positions tensor or offset + s and the (r/2,)
         frequencies: no table exists anywhere (the stateless ``apply_rope``'s natural path);
  2. for every head of its group, q's heads and then k's (GQA: their counts may differ, one
     launch serves both): loads that (head, positions) tile's BLOCK_S rows of r features,
     rotates each pair in float32 with the cos/sin it already holds, and stores the rows; the
     d - r features of partial RoPE are copied through in the same pass.
The two layouts differ only in where a pair's members sit: the half layout loads each row's two
halves (features j and j + r/2), the interleaved layout loads the rows whole and splits even from
odd features (2j and 2j + 1); the rotation is shared. Both keep every load and store contiguous
(16-byte vector accesses when compiled).
The backward pass is the same kernel with sin negated: R_m is orthogonal, so the gradient of
R_m x is R_m^T g = R_{-m} g (as in ``kernels/cpu.py``). ``register_fake`` gives the output shapes
to ``torch.compile`` and the meta device, so a compiled model keeps the operator in its graph
(``torch.library.custom_op`` rather than ``triton_op``: the same registration then works under
Triton's interpreter on CPU tensors, which is what the tests and the appendix run).

Numbers, against the reference ``rope.rotate_in_float32`` (``rope.rotate_at_positions``):
* Every product and difference is rounded as torch rounds it (``enable_fp_fusion=False``: no
  fused multiply-add), half-precision inputs are rotated in float32 and rounded to nearest even
  once. So the table path computes exactly the reference's arithmetic on the reference's
  tables: equal bit for bit, under the interpreter and (expected) on a GPU, in every dtype.
* The register path computes the reference's angles bit for bit (a float32 product of the same
  two numbers) but takes cos/sin from the kernel's math library: libdevice's ``cosf``/``sinf`` on a
  GPU (the CUDA math library torch's own CUDA ``cos``/``sin`` call), numpy's under the interpreter,
  where torch's CPU reference uses its own (SLEEF). Each is within about an ulp, so the result
  differs from the CPU reference by about one float32 ulp of max|x|, and in bfloat16/float16 by at
  most one rounding step of the output. Measured under the interpreter (d = 128, positions up to
  131072, 16384 values per dtype and layout): float32 at most 1.03 eps * max|x| (85 % of values
  equal), bfloat16 all equal, float16 one value in 16384 one step apart, float64 at most
  0.51 eps64 * max|x|; tests/test_rope_triton.py allows 2 eps * max(1, max|x|) and one step.
  The C kernel's contract (bit-identical to the reference on the CPU) is stronger because it reads
  tables: this path trades that for never making them.

Triton's interpreter: a CPU tensor always runs under ``TRITON_INTERPRET``-style interpretation
(numpy, one program instance at a time), whatever the environment says, so the tests and a
laptop need no variable and no import order. CUDA tensors run the compiled kernel, unless
``TRITON_INTERPRET=1`` was set before the first CUDA call in the process (Triton reads it when a
kernel is decorated, which here happens on first use: ``kernel(interpret)``). So the kernel uses
Triton's builtins only: helpers of ``triton.language.standard`` (``tl.cdiv``, reductions) are
compiled functions unless TRITON_INTERPRET was set when Triton was imported, and an interpreted
kernel cannot call them.
Taught in: notebooks/10_making_it_fast.ipynb (the GPU section)
"""
from __future__ import annotations

import contextlib
import math
import os
from typing import Callable, Iterator, Optional

import numpy as np
import torch
import triton
import triton.language as tl
from torch import Tensor

try:  # the GPU's math library (libdevice on NVIDIA, its ROCm twin on AMD); absent in old Triton
    from triton.language.extra import libdevice
except ImportError:  # pragma: no cover - Triton < 3.0
    libdevice = None

DTYPES = (torch.float32, torch.bfloat16, torch.float16, torch.float64)
# Devices whose tensors ``rotary`` sends here. The kernel itself also runs on CPU tensors, under
# the interpreter; the tests add "cpu" here to run the whole dispatch that way.
DEVICES = ("cuda",)
# One kernel object per mode (compiled, interpreted): functions, never tensors.
_KERNELS: dict[bool, Callable] = {}


def _rope_kernel(
    q_ptr, k_ptr, qo_ptr, ko_ptr,  # inputs (any strides, features contiguous) and contiguous outputs
    cos_ptr, sin_ptr, pos_ptr, inv_ptr,  # the angles' source; unused ones point anywhere
    seq_q, seq_k, seq,  # rows of q, of k, and the larger
    q_sb, q_sh, q_ss, k_sb, k_sh, k_ss,  # input strides: batch, head, position
    qo_sb, qo_sh, ko_sb, ko_sh,  # output strides: batch, head (a position is D further)
    t_sb, t_ss, p_sb,  # table strides (batch, position), positions' batch stride (0: shared)
    offset, factor_hi, factor_lo, sign,  # first position; attention factor (hi + lo); +1 or -1 (backward)
    D: tl.constexpr, R: tl.constexpr, HALF: tl.constexpr, PASS: tl.constexpr,  # features, rotated, padded
    HQ: tl.constexpr, HK: tl.constexpr, GROUPS: tl.constexpr, BLOCK_S: tl.constexpr,
    INTERLEAVED: tl.constexpr, TABLES: tl.constexpr, HAS_POS: tl.constexpr, SCALED: tl.constexpr,
    ANGLE_F64: tl.constexpr, WORK_F64: tl.constexpr, OUT_BF16: tl.constexpr, LIBDEVICE: tl.constexpr,
):
    """One program: BLOCK_S positions of one sequence, HQ heads of q and HK heads of k (module docstring).

    Tables hold rows 0 .. seq - 1 with row stride t_ss (t_sb between sequences, 0 when shared).
    """
    blocks = (seq + BLOCK_S - 1) // BLOCK_S  # 1-D grid: the position blocks of (sequence, group) 0, then 1, ...
    s = (tl.program_id(0) % blocks) * BLOCK_S + tl.arange(0, BLOCK_S)  # (BLOCK_S,) the positions' rows
    b = (tl.program_id(0) // blocks // GROUPS).to(tl.int64)  # the sequence
    g = tl.program_id(0) // blocks % GROUPS  # the head group
    j = tl.arange(0, HALF)  # pair index, padded to a power of two
    pair_ok = j < R // 2

    # 1. cos and sin of this block's angles, once for all its heads: (BLOCK_S, HALF)
    if TABLES:
        t_off = b * t_sb + s[:, None] * t_ss + j[None, :]
        t_ok = (s < seq)[:, None] & pair_ok[None, :]
        c = tl.load(cos_ptr + t_off, mask=t_ok, other=0.0)
        sn = tl.load(sin_ptr + t_off, mask=t_ok, other=0.0)
    else:
        if HAS_POS:
            p = tl.load(pos_ptr + b * p_sb + s, mask=s < seq, other=0)
        else:
            p = s + offset
        theta = tl.load(inv_ptr + j, mask=pair_ok, other=0.0)  # float32 (float64): the angle dtype
        angle = p.to(theta.dtype)[:, None] * theta[None, :]  # one rounding, as rope_angles
        if LIBDEVICE:
            c = libdevice.cos(angle)
            sn = libdevice.sin(angle)
        else:
            c = tl.cos(angle)
            sn = tl.sin(angle)
        if SCALED:  # rope_tables: cos * factor in the angle dtype (float32: factor rounded to float32)
            if ANGLE_F64:
                c = c * factor_hi + c * factor_lo
                sn = sn * factor_hi + sn * factor_lo
            else:
                c = c * factor_hi
                sn = sn * factor_hi
    if WORK_F64:
        c = c.to(tl.float64)
        sn = sn.to(tl.float64)
    else:
        c = c.to(tl.float32)
        sn = sn.to(tl.float32)
    sn = sn * sign  # exact: the backward rotates by -angle

    # 2. every head of the group, q's then k's: load its (BLOCK_S, r) tile, rotate each pair, store it
    f = tl.arange(0, 2 * HALF)  # the tile's features 0 .. r - 1 (padded)
    s64 = s.to(tl.int64)  # row offsets: a (batch, seq, heads, d) view's rows are heads * d apart
    for i in range(HQ + HK):
        is_q = i < HQ
        h = tl.where(is_q, g * HQ + i, g * HK + i - HQ).to(tl.int64)
        src = tl.where(is_q, q_ptr + b * q_sb + h * q_sh, k_ptr + b * k_sb + h * k_sh)
        dst = tl.where(is_q, qo_ptr + b * qo_sb + h * qo_sh, ko_ptr + b * ko_sb + h * ko_sh)
        rows = s < tl.where(is_q, seq_q, seq_k)
        x_row = src + s64[:, None] * tl.where(is_q, q_ss, k_ss)  # (BLOCK_S, 1) row starts
        o_row = dst + s64[:, None] * D
        if INTERLEAVED:  # pairs (2j, 2j + 1): load the rows, split even from odd features
            ok = rows[:, None] & (f < R)[None, :]
            a, y = tl.split(tl.reshape(tl.load(x_row + f[None, :], mask=ok, other=0.0), (BLOCK_S, HALF, 2)))
        else:  # pairs (j, j + r/2): load the rows' two halves
            ok = rows[:, None] & pair_ok[None, :]
            a = tl.load(x_row + j[None, :], mask=ok, other=0.0)
            y = tl.load(x_row + R // 2 + j[None, :], mask=ok, other=0.0)
        if WORK_F64:
            a, y = a.to(tl.float64), y.to(tl.float64)
        else:
            a, y = a.to(tl.float32), y.to(tl.float32)
        out = tl.join(a * c - y * sn, a * sn + y * c)  # (BLOCK_S, HALF, 2), rotate_pairs's order of operations
        if OUT_BF16:  # round to nearest even by hand: the interpreter's own cast truncates
            u = out.to(tl.uint32, bitcast=True)
            u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
            u = tl.where(out != out, 0x7FC0, u)  # NaN stays NaN
            out = u.to(tl.uint16).to(tl.bfloat16, bitcast=True)
        else:
            out = out.to(dst.dtype.element_ty)
        if INTERLEAVED:
            tl.store(o_row + f[None, :], tl.reshape(out, (BLOCK_S, 2 * HALF)), mask=ok)
        else:
            first, second = tl.split(out)
            tl.store(o_row + j[None, :], first, mask=ok)
            tl.store(o_row + R // 2 + j[None, :], second, mask=ok)
        if PASS > 0:  # partial RoPE: features r .. d - 1 pass through in the same trip
            e = R + tl.arange(0, PASS)
            e_ok = rows[:, None] & (e < D)[None, :]
            tl.store(o_row + e[None, :], tl.load(x_row + e[None, :], mask=e_ok, other=0.0), mask=e_ok)


@contextlib.contextmanager
def _interpret(flag: bool) -> Iterator[None]:
    """Triton's TRITON_INTERPRET switch for one decoration (knobs in Triton >= 3.4, else the variable)."""
    knobs = getattr(triton, "knobs", None)
    if knobs is not None:
        with knobs.runtime.scope():
            knobs.runtime.interpret = flag
            yield
        return
    old = os.environ.get("TRITON_INTERPRET")  # pragma: no cover - older Triton
    os.environ["TRITON_INTERPRET"] = "1" if flag else "0"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TRITON_INTERPRET")
        else:
            os.environ["TRITON_INTERPRET"] = old


def kernel(interpret: bool) -> Callable:
    """The jitted kernel: under Triton's interpreter (``interpret=True``, for CPU tensors) or as Triton
    decides from TRITON_INTERPRET (compiled for the GPU unless it is set). Built on first use."""
    if interpret not in _KERNELS:
        if interpret:
            with _interpret(True):
                _KERNELS[True] = triton.jit(_rope_kernel)
        else:
            _KERNELS[False] = triton.jit(_rope_kernel)
    return _KERNELS[interpret]


def interpreted(fn: Callable) -> bool:
    """Whether a kernel object runs under Triton's interpreter rather than compiled."""
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(fn, InterpretedFunction)


# ------------------------------------------------------------------ which calls it serves

def applies(x: Tensor, *others: Tensor | None) -> bool:
    """Shapes, dtypes and devices only (``torch.compile`` traces this): x (..., seq, d) on a device in
    ``DEVICES``, a dtype in ``DTYPES``, non-empty; no gradient needed through ``others`` (tables,
    frequencies: the operator differentiates q and k only)."""
    grad = torch.is_grad_enabled()
    return (
        x.device.type in DEVICES
        and x.dtype in DTYPES
        and x.dim() >= 2
        and x.numel() > 0
        and not any(t is not None and (t.device != x.device or (grad and t.requires_grad)) for t in others)
    )


def tables_fit(x: Tensor, cos: Tensor, sin: Tensor) -> bool:
    """Whether the kernel can walk tables broadcastable to x's (..., seq, r/2): one (seq, r/2) table
    shared by every sequence, or (batch, 1, ..., 1, seq, r/2) tables (batched positions), float32 or
    float64 (anything else: the caller takes another path)."""
    if cos.shape != sin.shape or cos.dim() < 2 or cos.dim() > x.dim() or cos.shape[-2:] != (x.shape[-2], x.shape[-1] // 2):
        return False
    if cos.dtype not in (torch.float32, torch.float64) or sin.dtype != cos.dtype:
        return False
    lead = cos.shape[:-2]
    return all(n == 1 for n in lead) or (len(lead) == x.dim() - 2 and lead[0] == x.shape[0]
                                         and all(n == 1 for n in lead[1:]))


def applies_tables(x: Tensor, cos: Tensor, sin: Tensor) -> bool:
    """``applies`` for a rotation by given tables (``rotary.rotate``), with tables as ``tables_fit`` accepts."""
    return applies(x, cos, sin) and tables_fit(x, cos, sin)


# ------------------------------------------------------------------ the launch

def _as_4d(x: Tensor) -> Tensor:
    """(..., seq, d) as (batch, heads, seq, d): (seq, d) -> (1, 1, ...), (n, seq, d) -> (n, 1, ...),
    more leading dimensions folded into heads (a view where the strides allow, else a copy)."""
    if x.stride(-1) != 1:
        x = x.contiguous()
    if x.dim() == 2:
        return x[None, None]
    if x.dim() == 3:
        return x[:, None]
    return x.reshape(x.shape[0], -1, *x.shape[-2:])


def _pow2(n: int) -> int:
    return 1 << max(0, n - 1).bit_length()


def launch_shape(q4: Tensor, k4: Tensor | None, interpret: bool) -> tuple[int, int, int]:
    """(block_s, groups, num_warps) for q4 (B, Hq, S, D) and k4 (B, Hk, S', D).

    Interpreted: whole sequences and all heads per program (the interpreter runs programs one by
    one in Python). On a GPU, the design: one program per block of positions covering every head of
    q and k, so cos/sin are made once per position; 16 positions per program, fewer (down to 2)
    until the grid has 4 programs per multiprocessor (at 4096 positions, 16 per program would be
    256 programs, too few to keep an H100's memory busy); only sequences too short even for that
    (decoding) split the heads into groups (a divisor of both head counts). Warps: one per 256
    elements of a head's tile (a 16-byte load per thread), 1 to 4. ``benchmarks/bench_rope.py``
    (``run_triton_shapes``, ``make bench DEVICE=cuda BENCH_ARGS=--tune``) sweeps these on a GPU.
    """
    hq, hk = q4.shape[1], 0 if k4 is None else k4.shape[1]
    seq = max(q4.shape[2], 0 if k4 is None else k4.shape[2])
    if interpret:
        return min(64, _pow2(seq)), 1, 1
    sms = torch.cuda.get_device_properties(q4.device).multi_processor_count if q4.is_cuda else 132
    block_s = 16
    while block_s > 2 and -(-seq // block_s) * q4.shape[0] < 4 * sms:
        block_s //= 2
    programs = -(-seq // block_s) * q4.shape[0]
    common = math.gcd(hq, hk) if hk else hq
    groups = next((n for n in range(1, common + 1) if common % n == 0 and programs * n >= 4 * sms), common)
    return block_s, groups, max(1, min(4, block_s * q4.shape[3] // 256))


def _compile_options(num_warps: int) -> dict:
    """Launch options: no fused multiply-add (rounding as torch's separate ops); on CUDA, libdevice's cos/sin
    without flushing denormals to zero (as torch's own CUDA build calls them). The interpreter ignores both."""
    options = {"num_warps": num_warps, "enable_fp_fusion": False}
    if torch.version.hip is None:
        options["enable_reflect_ftz"] = False
    return options


def _launch(q: Tensor, k: Tensor | None, cos: Tensor | None, sin: Tensor | None, positions: Tensor | None,
            inv_freq: Tensor | None, offset: int, rotary_dim: int, attention_factor: float, interleaved: bool,
            inverse: bool, block_s: int, groups: int, num_warps: int) -> tuple[Tensor, Tensor]:
    """Run the kernel once for q and k (see ``rope_triton`` for the arguments)."""
    q4 = _as_4d(q)
    k4 = None if k is None else _as_4d(k)
    if k4 is not None and k4.shape[0] != q4.shape[0]:
        raise RuntimeError(f"posenc::rope_triton: q and k need the same batch, got {tuple(q.shape)}, {tuple(k.shape)}")
    d, r = q.shape[-1], rotary_dim
    qo = torch.empty(q.shape, dtype=q.dtype, device=q.device)
    ko = torch.empty(k.shape, dtype=k.dtype, device=k.device) if k is not None else q.new_empty(0)
    qo4, ko4 = _as_4d(qo), (_as_4d(ko) if k is not None else None)
    fn = kernel(interpret=q.device.type == "cpu")
    auto = launch_shape(q4, k4, interpreted(fn))
    block_s, groups, num_warps = (given or chosen for given, chosen in zip((block_s, groups, num_warps), auto))
    hq, hk = q4.shape[1], 0 if k4 is None else k4.shape[1]
    if hq % groups or hk % groups:
        raise RuntimeError(f"posenc::rope_triton: groups={groups} must divide both head counts ({hq}, {hk})")
    seq_q, seq_k = q4.shape[2], 0 if k4 is None else k4.shape[2]
    seq = max(seq_q, seq_k)
    tables = cos is not None
    if tables:  # (rows, r/2) or (batch, rows, r/2), rows contiguous
        cos, sin = (t.contiguous().reshape(-1, *t.shape[-2:]) for t in (cos, sin))
        t_sb, t_ss = (cos.stride(0) if cos.shape[0] > 1 else 0), cos.stride(1)
        angle_f64 = cos.dtype == torch.float64
    else:
        t_sb = t_ss = 0
        inv_freq = inv_freq.contiguous()
        angle_f64 = inv_freq.dtype == torch.float64
    if positions is not None:
        positions = positions.contiguous()
    p_sb = positions.stride(0) if positions is not None and positions.dim() == 2 else 0
    hi = float(np.float32(attention_factor))  # float32's nearest; the float64 rest goes in factor_lo
    dummy = q4
    kk, kko = (k4, ko4) if k4 is not None else (dummy, qo4)
    grid = (triton.cdiv(seq, block_s) * q4.shape[0] * groups,)
    fn[grid](
        q4, kk, qo4, kko,
        cos if tables else dummy, sin if tables else dummy,
        positions if positions is not None else dummy, inv_freq if not tables else dummy,
        seq_q, seq_k, seq,
        q4.stride(0), q4.stride(1), q4.stride(2), kk.stride(0), kk.stride(1), kk.stride(2),
        qo4.stride(0), qo4.stride(1), kko.stride(0), kko.stride(1),
        t_sb, t_ss, p_sb,
        offset, hi, attention_factor - hi, -1.0 if inverse else 1.0,
        D=d, R=r, HALF=_pow2(r // 2), PASS=_pow2(d - r) if d > r else 0,
        HQ=hq // groups, HK=hk // groups, GROUPS=groups, BLOCK_S=block_s,
        INTERLEAVED=interleaved, TABLES=tables, HAS_POS=positions is not None,
        SCALED=not tables and attention_factor != 1.0, ANGLE_F64=angle_f64,
        WORK_F64=q.dtype == torch.float64, OUT_BF16=q.dtype == torch.bfloat16,
        LIBDEVICE=not interpreted(fn) and libdevice is not None,
        **_compile_options(num_warps),
    )
    return qo, ko


# ------------------------------------------------------------------ the operator

# typing.Optional rather than "Tensor | None": the schema is inferred from these annotations, and Optional
# is the spelling torch's inference has read the longest (a GPU machine may have an older torch).
@torch.library.custom_op("posenc::rope_triton", mutates_args=())
def rope_triton(q: Tensor, k: Optional[Tensor], cos: Optional[Tensor], sin: Optional[Tensor],
                positions: Optional[Tensor], inv_freq: Optional[Tensor], offset: int, rotary_dim: int,
                attention_factor: float, interleaved: bool, inverse: bool, block_s: int = 0, groups: int = 0,
                num_warps: int = 0) -> tuple[Tensor, Tensor]:
    """(R q, R k) in one launch (R^T when ``inverse``): the kernel on CUDA, interpreted on CPU tensors.

    q: (..., seq_q, d); k: (..., seq_k, d) or None (returns an empty tensor in its place), same dtype
    and batch as q. Angles from exactly one source:
      cos, sin:  tables (seq, r/2) or (batch, 1, ..., seq, r/2), float32/float64, for rows
                 0 .. max(seq_q, seq_k) - 1, attention factor already in them (``rope_tables``)
      inv_freq:  (r/2,) float32/float64 frequencies, with positions (seq,) or (batch, seq) integer,
                 or None for offset, offset + 1, ...; attention_factor multiplies cos and sin
    rotary_dim: r, even, <= d (features r.. pass through). block_s, groups, num_warps: 0 = ``launch_shape``.
    returns: contiguous tensors shaped like q and k
    """
    return _launch(q, k, cos, sin, positions, inv_freq, offset, rotary_dim, attention_factor, interleaved, inverse,
                   block_s, groups, num_warps)


@rope_triton.register_fake
def _(q, k, cos, sin, positions, inv_freq, offset, rotary_dim, attention_factor, interleaved, inverse,
      block_s=0, groups=0, num_warps=0):
    out_k = torch.empty(k.shape, dtype=k.dtype, device=k.device) if k is not None else q.new_empty(0)
    return torch.empty(q.shape, dtype=q.dtype, device=q.device), out_k


def _setup_context(ctx, inputs, output) -> None:
    q, k, cos, sin, positions, inv_freq, *scalars = inputs
    ctx.save_for_backward(cos, sin, positions, inv_freq)
    ctx.has_k, ctx.scalars = k is not None, scalars
    ctx.q_shape, ctx.q_dtype, ctx.q_device = q.shape, q.dtype, q.device


def _backward(ctx, grad_q: Tensor | None, grad_k: Tensor | None):
    cos, sin, positions, inv_freq = ctx.saved_tensors
    offset, rotary_dim, factor, interleaved, inverse, *shape = ctx.scalars
    grad_k = grad_k if ctx.has_k and grad_k is not None else None
    if grad_q is None:  # only k's output was used
        grad_q = torch.zeros(ctx.q_shape, dtype=ctx.q_dtype, device=ctx.q_device)
    # d(R x)/dx applied to g is R^T g: the same kernel, rotating the other way (factor included).
    gq, gk = rope_triton(grad_q, grad_k, cos, sin, positions, inv_freq, offset, rotary_dim, factor, interleaved,
                         not inverse, *shape)
    return gq, (gk if grad_k is not None else None), *([None] * 12)


rope_triton.register_autograd(_backward, setup_context=_setup_context)


# ------------------------------------------------------------------ what rotary calls

def rope(
    q: Tensor,
    k: Tensor | None = None,
    *,
    cos: Tensor | None = None,
    sin: Tensor | None = None,
    positions: Tensor | None = None,
    offset: int = 0,
    inv_freq: Tensor | None = None,
    rotary_dim: int | None = None,
    attention_factor: float = 1.0,
    layout: str = "interleaved",
    block_s: int = 0,
    groups: int = 0,
    num_warps: int = 0,
) -> tuple[Tensor, Tensor | None]:
    """RoPE of q and k (or q alone) in one launch; arguments as ``rope_triton``'s, checked by the caller.

    Angles from tables (``cos``, ``sin``: ``RotaryEmbedding``'s cache rows) or from registers
    (``inv_freq`` with ``positions`` or ``offset``). q and k with different batches take two launches.
    returns: (R q, R k), k's None when k is
    """
    r = q.shape[-1] if rotary_dim is None else rotary_dim
    args = (cos, sin, positions, inv_freq, offset, r, attention_factor, layout == "interleaved", False,
            block_s, groups, num_warps)
    if k is not None and (k.dim() != q.dim() or (q.dim() > 2 and k.shape[0] != q.shape[0])):
        return rope_triton(q, None, *args)[0], rope_triton(k, None, *args)[0]
    out_q, out_k = rope_triton(q, k, *args)
    return out_q, (out_k if k is not None else None)


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """R x by given tables (``rotary.rotate``'s CUDA path): cos/sin as ``table_batch_stride`` accepts.

    returns: a new contiguous tensor like x
    """
    return rope(x, cos=cos, sin=sin, rotary_dim=x.shape[-1], layout=layout)[0]
