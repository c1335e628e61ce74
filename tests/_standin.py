"""A stand-in accelerator for the chapters: a second device that refuses what Apple's MPS refuses.

A chapter opted in to an accelerator (``POSENC_DEVICE``) must run there with every assert holding.
Without a GPU, tests/test_notebook_devices.py runs each chapter on PyTorch's ``lazy`` device
(TorchScript's backend, present in CPU builds): a real second device whose tensors do not mix with
the CPU's, so a CPU tensor meeting a device tensor fails as it would on CUDA or MPS. On top,
``MpsLike`` refuses, on any device but the CPU:
  - a tensor in float64 or complex128 (MPS has neither), and
  - a random draw (``torch.randn(..., device=...)``, ``tensor.normal_()``, a module initialised
    there): a GPU's generator gives other numbers than the CPU's for the same seed, so the chapter
    must draw on the CPU and move the result.
It sees the torch calls a chapter and the library make (a ``TorchFunctionMode``), not those inside
torch's own functions, which create no float64 unless asked.
``install()`` is what the kernel runs at start (``startup_file`` writes it into an IPython profile).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._pytree import tree_flatten

DEVICE = "lazy"
RANDOM = {"rand", "randn", "randint", "randperm", "normal", "bernoulli", "multinomial", "poisson", "rand_like",
          "randn_like", "randint_like", "normal_", "uniform_", "bernoulli_", "random_", "exponential_",
          "cauchy_", "log_normal_", "geometric_", "rrelu",
          # torch.nn.init, which every module's reset_parameters calls
          "kaiming_uniform_", "kaiming_normal_", "xavier_uniform_", "xavier_normal_", "trunc_normal_",
          "orthogonal_", "sparse_"}
DROPOUT = {"dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout"}
WIDE = (torch.float64, torch.complex128)


class StandInRefusal(RuntimeError):
    """What MPS (or any GPU, for random draws) would make of this call."""


def _off_cpu(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type not in ("cpu", "meta")


def _target(args: tuple, kwargs: dict) -> torch.device | None:
    if kwargs.get("device") is not None:
        return torch.device(kwargs["device"])
    first = next((a for a in tree_flatten((args, kwargs))[0] if isinstance(a, torch.Tensor)), None)
    return None if first is None else first.device


def _draws(name: str, args: tuple, kwargs: dict) -> bool:
    if name in RANDOM:
        return True
    if name in DROPOUT:  # F.dropout(x, p, training): random only when training and p > 0
        p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
        training = kwargs.get("training", args[2] if len(args) > 2 else True)
        return bool(training) and p > 0
    return False


class MpsLike(TorchFunctionMode):
    """Refuses float64 and random draws off the CPU (see the module docstring)."""

    def __torch_function__(self, func: Callable, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        name = getattr(func, "__name__", "")
        target = _target(args, kwargs)
        if target is not None and target.type not in ("cpu", "meta") and _draws(name, args, kwargs):
            raise StandInRefusal(f"random draw {name!r} on {target}: a GPU's generator gives other numbers than the "
                                 "CPU's; draw on the CPU, then move")
        out = func(*args, **kwargs)
        for t in tree_flatten(out)[0]:
            if _off_cpu(t) and t.dtype in WIDE:
                raise StandInRefusal(f"{name!r} made a {t.dtype} tensor on {t.device}: MPS has no float64; "
                                     "keep float64 work on the CPU")
        return out


# The lazy backend's own gap, not a chapter's: views that return several tensors (chunk, split,
# unbind) hand out pieces its later ops reject ("Input tensor is not a lazy tensor"), also when
# torch.nn calls them (MultiheadAttention's in-projection). On lazy tensors the stand-in cuts such
# pieces with narrow/select, which it handles; every other device keeps torch's own methods.
def _cut(t: torch.Tensor, lengths: list[int], dim: int) -> tuple[torch.Tensor, ...]:
    out, start = [], 0
    for n in lengths:
        out.append(t.narrow(dim, start, n))
        start += n
    return tuple(out)


def _patch_multi_views() -> None:
    chunk, split, unbind = torch.Tensor.chunk, torch.Tensor.split, torch.Tensor.unbind

    def lazy_chunk(self: torch.Tensor, chunks: int, dim: int = 0) -> tuple[torch.Tensor, ...]:
        if self.device.type != DEVICE:
            return chunk(self, chunks, dim)
        n = self.shape[dim]
        step = math.ceil(n / chunks) if n else 0
        return _cut(self, [min(step, n - s) for s in range(0, n, step)] if step else [0], dim)

    def lazy_split(self: torch.Tensor, split_size: Any, dim: int = 0) -> tuple[torch.Tensor, ...]:
        if self.device.type != DEVICE:
            return split(self, split_size, dim)
        if isinstance(split_size, int):
            n = self.shape[dim]
            return _cut(self, [min(split_size, n - s) for s in range(0, n, split_size)] or [0], dim)
        return _cut(self, list(split_size), dim)

    def lazy_unbind(self: torch.Tensor, dim: int = 0) -> tuple[torch.Tensor, ...]:
        if self.device.type != DEVICE:
            return unbind(self, dim)
        return tuple(self.select(dim, i) for i in range(self.shape[dim]))

    torch.Tensor.chunk, torch.Tensor.split, torch.Tensor.unbind = lazy_chunk, lazy_split, lazy_unbind
    torch.chunk = lambda t, chunks, dim=0: t.chunk(chunks, dim)
    torch.unbind = lambda t, dim=0: t.unbind(dim)


def install() -> None:
    """Start the lazy device and keep ``MpsLike`` on for the rest of the process (a kernel's life)."""
    import torch._lazy
    import torch._lazy.ts_backend

    torch._lazy.ts_backend.init()
    _patch_multi_views()
    # Lazy tensors record a graph until a value is read; a training loop reads none until it ends, so
    # the graph would span every step. Cut it after each optimiser step, as a lazy training loop does.
    from torch.optim.optimizer import register_optimizer_step_post_hook

    register_optimizer_step_post_hook(lambda *_: torch._lazy.mark_step())
    MpsLike().__enter__()


def available() -> str | None:
    """None when the stand-in works in this torch; otherwise why not (one line)."""
    try:
        import torch._lazy.ts_backend  # noqa: F401
    except ImportError as e:  # a torch without TorchScript's lazy backend
        return f"torch {torch.__version__} has no lazy TorchScript backend ({e})"
    return None


def startup_file(ipython_dir: Path) -> Path:
    """An IPython profile whose kernels call ``install()`` first; use it as IPYTHONDIR."""
    startup = ipython_dir / "profile_default" / "startup"
    startup.mkdir(parents=True, exist_ok=True)
    here = Path(__file__).resolve().parent
    path = startup / "00-posenc-standin.py"
    path.write_text(f"import sys\nsys.path.insert(0, {str(here)!r})\nimport _standin\n_standin.install()\n"
                    f"sys.path.remove({str(here)!r})\n")
    return path
