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


def base_above_one(base: object) -> float:
    """The frequency base: a finite number > 1 (base <= 1 gives no spread of wavelengths)."""
    if isinstance(base, bool) or not isinstance(base, (int, float)) or not math.isfinite(base):
        raise ValueError(f"base must be a finite number > 1, got {base!r}")
    if base <= 1:
        raise ValueError(f"base must be > 1, got {base}")
    return float(base)


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
