"""Fast paths for the formulas in the reference modules (today: RoPE's rotation).

The reference (``posenc_lib/rope.py``) says *what* is computed; these modules compute
the same numbers faster, and ``rope._rotate`` is the single place that picks one:
  cpu         ``torch.ops.posenc.rope_rotate``: a one-pass C loop registered with
              ``torch.library`` (fake tensor, autograd, ``torch.compile``), built on first use
  torch_fast  fewer passes with torch operations: CUDA, and CPUs without a C compiler
  compiled    ``apply_rope_compiled``: the reference fused by ``torch.compile`` (opt-in)
"""
from . import cpu, torch_fast

__all__ = ["cpu", "torch_fast"]
