"""Argument checks shared by the public functions.

Every public function validates at the boundary and raises ``ValueError`` that
names the parameter, the value it got and the value it expected, so a learner
sees "d must be even" instead of an IndexError three calls deeper.
"""
from __future__ import annotations

import math
from typing import Iterable

import torch
from torch import Tensor


def int_at_least(name: str, value: object, minimum: int) -> int:
    """Return ``value`` as an int, or raise if it is not an integer >= minimum."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, Tensor) and value.numel() == 1 and not value.is_floating_point():
            value = int(value.item())
        else:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def even_dim(name: str, value: object) -> int:
    """A feature dimension that is split into 2-D pairs: a positive even integer."""
    value = int_at_least(name, value, 2)
    if value % 2:
        raise ValueError(f"{name} must be even (features are rotated in pairs), got {value}")
    return value


def finite_number(name: str, value: object, *, above: float | None = None, at_least: float | None = None) -> float:
    """A real Python number (not a bool), finite, optionally > ``above`` or >= ``at_least``."""
    want = "a finite number" + (f" > {above:g}" if above is not None else "") + (
        f" >= {at_least:g}" if at_least is not None else "")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"{name} must be {want}, got {value!r}")
    if (above is not None and not value > above) or (at_least is not None and not value >= at_least):
        raise ValueError(f"{name} must be {want}, got {value!r}")
    return float(value)


def base_above_one(base: object) -> float:
    """The frequency base: a finite number > 1 (base <= 1 gives no spread of wavelengths)."""
    return finite_number("base", base, above=1)


def dtype_in(name: str, dtype: object, allowed: tuple[torch.dtype, ...]) -> torch.dtype:
    """A torch dtype from ``allowed`` (e.g. the float dtypes angles may be computed in)."""
    if dtype not in allowed:
        raise ValueError(f"{name} must be one of {allowed}, got {dtype}")
    return dtype  # type: ignore[return-value]


def floating_vector(name: str, t: object) -> Tensor:
    """A 1-D floating-point tensor, e.g. per-head slopes of shape (num_heads,)."""
    if not isinstance(t, Tensor) or t.dim() != 1 or not t.is_floating_point():
        raise ValueError(f"{name} must be a 1-D floating tensor of shape (num_heads,), got {getattr(t, 'shape', t)!r}")
    return t


def one_of(name: str, value: object, choices: Iterable[str]) -> str:
    choices = tuple(choices)
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")
    return value  # type: ignore[return-value]


def last_dim(name: str, x: Tensor, expected: int) -> None:
    if x.shape[-1] != expected:
        raise ValueError(f"{name}.shape[-1] must be {expected}, got {x.shape[-1]} (shape {tuple(x.shape)})")


def integer_tensor(name: str, t: Tensor) -> None:
    if t.is_floating_point() or t.is_complex() or t.dtype == torch.bool:
        raise ValueError(f"{name} must have an integer dtype (e.g. torch.long), got {t.dtype}")


def sequence_tensor(name: str, t: object, dims: int | None = None, shape: str = "(..., seq, d)") -> Tensor:
    """A tensor of shape ``shape``: at least 2 dimensions, or exactly ``dims`` when given."""
    if not isinstance(t, Tensor) or t.dim() < 2 or (dims is not None and t.dim() != dims):
        raise ValueError(f"{name} must be a tensor of shape {shape}, got {getattr(t, 'shape', type(t))}")
    return t


def multiple_of(name: str, value: int, k: int, why: str) -> int:
    if value % k:
        raise ValueError(f"{name} must be a multiple of {k} ({why}), got {value}")
    return value


def same_shape_integer_tensors(**named: Tensor) -> tuple[Tensor, ...]:
    """Integer tensors of one shape, e.g. the row and column coordinates of the same patches."""
    for name, t in named.items():
        if not isinstance(t, Tensor):
            raise ValueError(f"{name} must be an integer tensor of shape (seq,) or (batch, seq), got {type(t).__name__}")
    shapes = [tuple(t.shape) for t in named.values()]
    if len(set(shapes)) > 1:
        raise ValueError(f"{' and '.join(named)} must have the same shape, got {' and '.join(map(str, shapes))}")
    for name, t in named.items():
        integer_tensor(name, t)
    return tuple(named.values())


def qkv(q: Tensor, k: Tensor, v: Tensor, *, dims: int | None = None) -> None:
    """Queries (..., q_len, d), keys (..., k_len, d) and values (..., k_len, d_v) with the same leading
    dims; exactly ``dims`` dimensions when given (4: (batch, heads, seq, d))."""
    shape = "(..., seq, d)" if dims is None else "(batch, heads, seq, d)"
    for name, t in (("q", q), ("k", k), ("v", v)):
        sequence_tensor(name, t, dims, shape)
    if k.shape[-1] != q.shape[-1]:
        raise ValueError(f"k.shape[-1] must equal q.shape[-1]={q.shape[-1]}, got {k.shape[-1]}")
    if v.shape[-2] != k.shape[-2]:
        raise ValueError(f"v.shape[-2] must equal k.shape[-2]={k.shape[-2]} (one value per key), got {v.shape[-2]}")
    if not q.shape[:-2] == k.shape[:-2] == v.shape[:-2]:
        raise ValueError(f"q, k and v must share leading dims, got {tuple(q.shape[:-2])}, {tuple(k.shape[:-2])}, "
                         f"{tuple(v.shape[:-2])}")
