"""RoPE's CPU kernel as a torch operator: ``torch.ops.posenc.rope_rotate`` (``csrc/rope_kernel.c``).

Why a kernel: eager PyTorch makes one trip through memory per operation, so even the
best arrangement of ``x * cos - y * sin`` in torch ops costs two or more passes, and a
bfloat16 input adds a float32 copy each way. The C loop reads each element once, rotates
the pair in float32 in registers and writes it once: the cost of ``x * 1.5``.

Why a *registered* operator (``torch.library.custom_op``) rather than a bare ctypes call:
torch then knows what it is. ``register_fake`` tells ``torch.compile`` and the meta device
the output's shape without running C, so a compiled model keeps the kernel in its graph;
``register_autograd`` gives it a backward pass, which is the same kernel rotating by
-angle (R_m is orthogonal, so the gradient of R_m x is R_m^T g = R_{-m} g).

It is built with the system C compiler (``cc``, or ``$CC``) on first use (the first CPU
tensor of ``rotary.SMALL`` elements or more: smaller ones never reach it), in well under
a second, into a cache folder (``$POSENC_KERNEL_DIR``, else ``$XDG_CACHE_HOME/posenc_lib``,
else ``~/.cache/posenc_lib``), keyed by a hash of the source and flags. Where there is no
compiler, ``apply_rope`` keeps its torch path: ``available()`` says which.
``POSENC_CPU_KERNEL=0`` in the environment (or ``use_cpu_kernel(False)``) turns it off.

Contract: for float32 and bfloat16 CPU tensors the result is bit-identical to the plain
form ``rotate_pairs`` in float32 (cast back to bfloat16 with round-to-nearest-even), NaN
payloads aside: the build disables fused multiply-add so every product and difference is
rounded as torch rounds it. Which inputs it serves is decided in one place,
``posenc_lib.rotary.rotate`` (via ``applies`` below).
Taught in: notebooks/10_making_it_fast.ipynb (sections "3. Counting calls and bytes" and "4. Forward + backward")
"""
from __future__ import annotations

import contextlib
import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Iterator

import torch
from torch import Tensor

SOURCE = Path(__file__).with_name("csrc") / "rope_kernel.c"
# -ffp-contract=off: no fused multiply-add, so results match torch's separately rounded ops.
FLAGS = ("-O3", "-ffp-contract=off", "-fPIC", "-shared")
# OpenMP splits the work over torch's own thread pool: the library it links, libgomp.so.1,
# is the one torch has already loaded. A compiler without OpenMP builds a one-thread kernel.
OPENMP_FLAGS = ("-fopenmp",)
_DTYPE_CODES = {torch.float32: 0, torch.bfloat16: 1}
# Below this many elements one thread is faster than starting more.
_MIN_ELEMENTS_PER_THREAD = 1 << 15

_state: dict[str, object] = {"lib": None, "tried": False, "error": None, "enabled": None}


# ------------------------------------------------------------------ building and loading

def _compiler() -> str | None:
    return os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or shutil.which("clang")


def cache_dir() -> Path:
    """Where the built kernel is kept."""
    if os.environ.get("POSENC_KERNEL_DIR"):
        return Path(os.environ["POSENC_KERNEL_DIR"])
    root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(root) / "posenc_lib"


def library_path() -> Path:
    """The shared library's path: its name hashes the source, the flags and the platform."""
    h = hashlib.sha256(SOURCE.read_bytes())
    h.update(" ".join((*FLAGS, *OPENMP_FLAGS, str(_compiler()), platform.machine(), platform.system())).encode())
    suffix = ".dylib" if platform.system() == "Darwin" else ".so"
    return cache_dir() / f"rope_kernel-{h.hexdigest()[:16]}{suffix}"


def build(force: bool = False) -> Path:
    """Compile the kernel if it is not in the cache yet; returns its path.

    Raises RuntimeError (with the compiler's message) when it cannot be built.
    """
    path = library_path()
    if path.exists() and not force:
        return path
    cc = _compiler()
    if cc is None:
        raise RuntimeError("no C compiler found (set CC, or install gcc or clang)")
    path.parent.mkdir(parents=True, exist_ok=True)
    # Build under a temporary name and rename: several processes may build at once.
    fd, tmp = tempfile.mkstemp(prefix=path.stem + "-", suffix=".tmp", dir=path.parent)
    os.close(fd)
    try:
        res = None
        for extra in (OPENMP_FLAGS, ()):
            res = subprocess.run([cc, *FLAGS, *extra, "-o", tmp, str(SOURCE)], capture_output=True, text=True,
                                 timeout=120)
            if res.returncode == 0:
                break
        if res.returncode != 0:
            raise RuntimeError(f"{cc} failed to build {SOURCE.name}:\n{res.stderr[-2000:]}")
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return path


def _load() -> ctypes.CDLL | None:
    if not _state["tried"]:
        _state["tried"] = True
        try:
            lib = ctypes.CDLL(str(build()))
            fn = lib.posenc_rope
            fn.restype = ctypes.c_int
            i64, ptr, i32 = ctypes.c_int64, ctypes.c_void_p, ctypes.c_int
            fn.argtypes = [ptr, ptr, ptr, ptr, i64, i64, i64, i64, i32, i32, i32, i32]
            _state["lib"] = lib
        except (OSError, RuntimeError, subprocess.SubprocessError) as err:
            _state["error"] = str(err)
    return _state["lib"]  # type: ignore[return-value]


def enabled() -> bool:
    """Whether apply_rope may use the kernel (POSENC_CPU_KERNEL=0 or use_cpu_kernel(False) say no)."""
    if _state["enabled"] is not None:
        return bool(_state["enabled"])
    return os.environ.get("POSENC_CPU_KERNEL", "1") not in ("0", "false", "no", "off")


def available() -> bool:
    """True when the kernel is enabled and built (building it now if needed)."""
    return enabled() and _load() is not None


# torch.compile reads this once while tracing instead of stepping into ctypes: a compiled
# function keeps the choice it was traced with (call torch._dynamo.reset() after a switch).
_available_when_traced = torch.compiler.assume_constant_result(available)


def build_error() -> str | None:
    """Why the kernel could not be built, or None."""
    _load()
    return _state["error"]  # type: ignore[return-value]


@contextlib.contextmanager
def use_cpu_kernel(flag: bool) -> Iterator[None]:
    """Turn the kernel on or off inside a ``with`` block (e.g. to time the torch path)."""
    old = _state["enabled"]
    _state["enabled"] = bool(flag)
    try:
        yield
    finally:
        _state["enabled"] = old


# ------------------------------------------------------------------ which inputs it serves

def _table_groups(x: Tensor, cos: Tensor) -> int | None:
    """How many table blocks cos holds for x: 1 for (seq, d/2), batch for (batch, 1, ..., seq, d/2)."""
    seq, h = x.shape[-2], x.shape[-1] // 2
    if cos.shape[-2:] != (seq, h) or cos.dim() > x.dim():
        return None
    lead = cos.shape[:-2]
    if all(n == 1 for n in lead):
        return 1
    if len(lead) == x.dim() - 2 and lead[0] == x.shape[0] and all(n == 1 for n in lead[1:]):
        return lead[0]
    return None


def applies(x: Tensor, cos: Tensor, sin: Tensor) -> bool:
    """Whether ``rope_rotate`` can serve this call (the caller falls back otherwise).

    x: (..., seq, d) contiguous float32/bfloat16 on the CPU, non-empty; cos/sin float32
    (seq, d/2) or (batch, 1, ..., 1, seq, d/2), not requiring grad (x may: the op has a
    backward). Shapes and dtypes only, so torch.compile can trace the test.
    """
    return (
        x.device.type == "cpu"
        and x.dtype in _DTYPE_CODES
        and x.dim() >= 2
        and x.numel() > 0
        and x.is_contiguous()
        and cos.dtype == torch.float32
        and sin.dtype == torch.float32
        and cos.device.type == "cpu"
        and sin.device.type == "cpu"
        and cos.shape == sin.shape
        and not (torch.is_grad_enabled() and (cos.requires_grad or sin.requires_grad))
        and _table_groups(x, cos) is not None
        and _available_when_traced()
    )


# ------------------------------------------------------------------ the operator

@torch.library.custom_op("posenc::rope_rotate", mutates_args=(), device_types="cpu")
def rope_rotate(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool, inverse: bool) -> Tensor:
    """R x (or R^T x when ``inverse``) in one pass; inputs as ``applies`` describes.

    returns: a new contiguous tensor like x
    """
    lib = _load()
    if lib is None:  # the dispatch checks availability first; say why if it is bypassed
        raise RuntimeError(f"posenc::rope_rotate: the C kernel is not available ({build_error()})")
    groups = _table_groups(x, cos)
    if not x.is_contiguous() or groups is None:
        raise RuntimeError(f"posenc::rope_rotate: unsupported shapes x {tuple(x.shape)}, cos {tuple(cos.shape)}")
    seq, d = x.shape[-2], x.shape[-1]
    cos, sin = cos.contiguous(), sin.contiguous()
    out = torch.empty_like(x)
    threads = max(1, min(torch.get_num_threads(), x.numel() // _MIN_ELEMENTS_PER_THREAD))
    rc = lib.posenc_rope(x.data_ptr(), out.data_ptr(), cos.data_ptr(), sin.data_ptr(), x.numel() // (seq * d), seq,
                         d, groups, _DTYPE_CODES[x.dtype], 0 if interleaved else 1, int(inverse), threads)
    if rc != 0:
        raise RuntimeError(f"posenc::rope_rotate: the kernel rejected its arguments (code {rc})")
    return out


@rope_rotate.register_fake
def _(x: Tensor, cos: Tensor, sin: Tensor, interleaved: bool, inverse: bool) -> Tensor:
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _setup_context(ctx, inputs, output) -> None:
    _, cos, sin, interleaved, inverse = inputs
    ctx.save_for_backward(cos, sin)
    ctx.interleaved, ctx.inverse = interleaved, inverse


def _backward(ctx, grad: Tensor):
    cos, sin = ctx.saved_tensors
    # d(R x)/dx applied to grad is R^T grad: the same kernel, rotating the other way.
    return rope_rotate(grad.contiguous(), cos, sin, ctx.interleaved, not ctx.inverse), None, None, None, None


rope_rotate.register_autograd(_backward, setup_context=_setup_context)


if __name__ == "__main__":  # python -m posenc_lib.kernels.cpu: build now, say where
    print(build())
