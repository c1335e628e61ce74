"""``apply_rope_compiled``: the reference rotation fused into one kernel by ``torch.compile`` (opt-in).

On a GPU this is the one-pass path; on the CPU the C kernel (``kernels.cpu``) is faster
and needs no compile step.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import Tensor

from ..rope import _cos_sin, apply_rope, check_rope_args, rotate_in_float32, torch_fast

_COMPILED: dict[str, Callable[..., Tensor]] = {}


def apply_rope_compiled(
    x: Tensor,
    positions: Tensor | None = None,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    attention_factor: float = 1.0,
) -> Tensor:
    """``apply_rope`` with the rotation fused into one ``torch.compile`` kernel.

    Same arguments, result and precision rules as ``apply_rope``. The first call per
    layout compiles (seconds to tens of seconds on a CPU, and it needs a C++ compiler
    there); later calls make one pass over x. Calls that need gradients or run on other
    devices than CPU/CUDA go to ``apply_rope``.
    x: (..., seq, d); positions: None, (seq,) or (batch, seq)
    returns: same shape, dtype and device as x
    Taught in: notebooks/05_rope.ipynb
    """
    layout = check_rope_args(x, base, layout)
    cos, sin = _cos_sin(x, positions, base, inv_freq, attention_factor)
    if not torch_fast.applies(x, cos, sin):
        return apply_rope(x, positions, base=base, layout=layout, inv_freq=inv_freq, attention_factor=attention_factor)
    fn = _COMPILED.get(layout)
    if fn is None:
        fn = _COMPILED[layout] = torch.compile(rotate_in_float32, dynamic=True)
    return fn(x, cos, sin, layout)
