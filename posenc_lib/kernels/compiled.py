"""The reference rotation fused into one kernel by ``torch.compile``: ``apply_rope_compiled``'s path (opt-in).

On a GPU this is the one-pass path; on the CPU the C kernel (``kernels.cpu``) is faster
and needs no compile step. The first call per layout compiles (seconds to tens of seconds
on a CPU, where it needs a C++ compiler); later calls make one pass over x.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..rope import rotate_in_float32
from . import torch_fast

# One compiled function per layout, built on first use (functions, never tensors).
_COMPILED: dict[str, Callable[..., Tensor]] = {}


def applies(x: Tensor, cos: Tensor, sin: Tensor) -> bool:
    """CPU or CUDA without gradients, as ``torch_fast`` (the caller falls back otherwise)."""
    return torch_fast.applies(x, cos, sin)


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor:
    """``rope.rotate_in_float32`` compiled by ``torch.compile`` (dynamic shapes): the same formula, one pass.

    returns: a new tensor with x's shape, dtype and device
    """
    fn = _COMPILED.get(layout)
    if fn is None:
        fn = _COMPILED[layout] = torch.compile(rotate_in_float32, dynamic=True)
    return fn(x, cos, sin, layout)
