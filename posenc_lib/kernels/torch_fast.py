"""RoPE in as few passes as torch operations allow: the path for CUDA and for CPUs with no C compiler.

Same numbers as ``rope.rotate_pairs`` in float32 (float64 for float64 x) up to the last
bit of rounding, with fewer trips through memory:
* interleaved layout: one complex multiply x * e^{i angle}, written straight into the output;
* half layout: out = x_first * [cos, sin] + x_second * [-sin, cos], the halves broadcast
  (zero-copy views) against (seq, 2, d/2) tables: two passes, no temporaries, no cat;
* half-precision x: rotated in float32 chunk by chunk through one reused buffer of at most
  ``_CHUNK_BYTES`` (kept in the last-level cache; few chunks, because each op costs a
  thread-pool round trip that is expensive on a loaded CPU).
It writes with ``out=``, so it has no backward: ``rotary.rotate`` sends calls that need
gradients elsewhere.
"""
from __future__ import annotations

import torch
from torch import Tensor

DTYPES = (torch.float32, torch.float64, torch.float16, torch.bfloat16)
# Bytes of float32 work per chunk for half-precision inputs (fits a server's L3 cache).
_CHUNK_BYTES = 8 * 2**20


def applies(x: Tensor, cos: Tensor, sin: Tensor) -> bool:
    """CPU or CUDA, a floating dtype, and no gradient needed through x, cos or sin."""
    needs_grad = torch.is_grad_enabled() and (x.requires_grad or cos.requires_grad or sin.requires_grad)
    return x.dtype in DTYPES and x.device.type in ("cpu", "cuda") and cos.device == x.device and not needs_grad


def _tables(cos: Tensor, sin: Tensor, layout: str) -> tuple[Tensor, ...]:
    """interleaved: (e^{i angle},), (..., seq, d/2) complex; half: ([cos, sin], [-sin, cos]), (..., seq, 2, d/2)."""
    if layout == "interleaved":
        return (torch.complex(cos, sin),)
    return torch.stack((cos, sin), dim=-2), torch.stack((-sin, cos), dim=-2)


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


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """R x with cos/sin (float32, float64 for float64 x) broadcastable to (..., seq, d/2).

    returns: a new tensor with x's shape, dtype and device
    """
    work_dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    tables = _tables(cos.to(work_dtype), sin.to(work_dtype), layout)
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
