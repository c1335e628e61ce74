"""Fast paths for the formulas in the reference modules (today: RoPE's rotation).

The reference (``posenc_lib/rope.py``) says *what* is computed and imports nothing from
here; these modules import it and compute the same numbers faster. Which one runs is
decided in one place above both, ``posenc_lib.rotary.rotate``:
  cpu         ``torch.ops.posenc.rope_rotate``: a one-pass C loop registered with
              ``torch.library`` (fake tensor, autograd, ``torch.compile``), built on first use
  torch_fast  fewer passes with torch operations: CUDA, and CPUs without a C compiler
  compiled    the reference fused by ``torch.compile`` (``apply_rope_compiled``, opt-in)
  triton_rope ``torch.ops.posenc.rope_triton``: a one-pass Triton kernel for CUDA (q and k in
              one launch, angles from tables or computed in registers), interpreted on CPU
              tensors; imported by ``rotary`` only where torch has a GPU backend and Triton is
              installed (importing Triton takes most of a second), so not listed below
  flex        ALiBi and T5 through FlexAttention on a GPU (``fast_attention``'s CUDA path)
Each module offers ``applies(...)`` (can it serve this call?) and the computation.
"""
from importlib import import_module

__all__ = ["compiled", "cpu", "torch_fast"]


def __getattr__(name: str):
    """Submodules load on first use (PEP 562): ``cpu`` and ``compiled`` bring torch.compile's machinery
    (about 140 MB and a second), which ``fast_attention``'s CPU path, importing ``flex``, never needs."""
    if name in (*__all__, "flex", "triton_rope"):
        return import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
