"""RoPE's CPU kernel: the rotation in one pass over memory (``csrc/rope_kernel.c``).

Why a kernel: eager PyTorch makes one trip through memory per operation, so even the
best arrangement of ``x * cos - y * sin`` in torch ops costs two or more passes, and a
bfloat16 input adds a float32 copy each way. The C loop reads each element once, rotates
the pair in float32 in registers and writes it once: the cost of ``x * 1.5``.

It is built with the system C compiler (``cc``, or ``$CC``) on first use, in well under
a second, into a cache folder (``$POSENC_KERNEL_DIR``, else ``$XDG_CACHE_HOME/posenc_lib``,
else ``~/.cache/posenc_lib``), keyed by a hash of the source and flags. Where there is no
compiler, ``apply_rope`` simply keeps its torch path:
``available()`` says which. ``POSENC_CPU_KERNEL=0`` in the environment (or
``use_cpu_kernel(False)``) turns it off.

Contract: for float32 and bfloat16 CPU tensors the result is bit-identical to the plain
form ``rotate_pairs`` in float32 (cast back to bfloat16 with round-to-nearest-even), NaN
payloads aside: the build disables fused multiply-add so every product and difference is
rounded as torch rounds it. Float64, float16, other devices, autograd and non-contiguous inputs use
the torch path in ``rope.py``.
Taught in: notebooks/05_rope.ipynb (section "Speed and memory")
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
_LAYOUT_CODES = {"interleaved": 0, "half": 1}
# Below this many elements one thread is faster than starting more.
_MIN_ELEMENTS_PER_THREAD = 1 << 15

_state: dict[str, object] = {"lib": None, "tried": False, "error": None, "enabled": None}


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
            i64, ptr = ctypes.c_int64, ctypes.c_void_p
            fn.argtypes = [ptr, ptr, ptr, ptr, i64, i64, i64, i64, ctypes.c_int, ctypes.c_int, ctypes.c_int]
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


def rotate(x: Tensor, cos: Tensor, sin: Tensor, layout: str) -> Tensor | None:
    """R x through the kernel, or None where it does not apply (the caller falls back).

    x:        (..., seq, d) contiguous float32 or bfloat16 on the CPU
    cos, sin: float32, (seq, d/2) or (batch, 1, ..., 1, seq, d/2) with batch == x.shape[0]
    layout:   "interleaved" or "half"
    returns:  a new tensor like x
    """
    code = _DTYPE_CODES.get(x.dtype)
    if (
        code is None
        or x.device.type != "cpu"
        or not x.is_contiguous()
        or x.numel() == 0
        or cos.dtype != torch.float32
        or sin.dtype != torch.float32
        or cos.shape != sin.shape
        or torch.compiler.is_compiling()
        or not enabled()
    ):
        return None
    lib = _load()
    if lib is None:
        return None
    seq, d = x.shape[-2], x.shape[-1]
    n = x.numel() // (seq * d)
    if cos.shape[-2:] != (seq, d // 2):
        return None
    p = cos.numel() // (seq * (d // 2))
    if p != 1 and (x.dim() < 3 or x.shape[0] != p):
        return None
    cos, sin = cos.contiguous(), sin.contiguous()
    out = torch.empty_like(x)
    threads = max(1, min(torch.get_num_threads(), x.numel() // _MIN_ELEMENTS_PER_THREAD))
    rc = lib.posenc_rope(x.data_ptr(), out.data_ptr(), cos.data_ptr(), sin.data_ptr(), n, seq, d, p, code,
                         _LAYOUT_CODES[layout], threads)
    if rc != 0:  # cannot happen for shapes checked above; keep the torch path honest anyway
        return None
    return out


if __name__ == "__main__":  # python -m posenc_lib.rope_cpu_kernel: build now, say where
    print(build())
