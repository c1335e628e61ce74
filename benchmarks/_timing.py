"""Timing helpers on ``torch.utils.benchmark.Timer``: round-robin samples, paired ratios.

The machines these run on are shared and noisy, so absolute times mean little: every
benchmark times a reference and its candidates round-robin in the same process and
reports ratios. Timer does the per-sample work (a warm-up before every sample, the thread
count, accelerator synchronisation); what it lacks is added here: one sample per candidate
per round, the same call count for every candidate, and ratios paired within a round.
"""
from __future__ import annotations

import gc
import json
import math
import os
import platform
import statistics
import subprocess
import sys
from typing import Callable, Mapping

import torch
from torch.utils.benchmark import Timer
from torch.utils.benchmark.utils.timer import timer as _clock  # Timer's clock: syncs an accelerator

_HEAP: dict[str, bool] = {}


def steady_heap() -> bool:
    """Serve every allocation from the process heap and never give freed memory back to the OS.

    glibc serves large blocks (by default from 128 KB, at most from 32 MB: every q, k and
    output here) with fresh pages from mmap and unmaps them on free, so a timed call pays a
    page fault per 4 KB it writes, or not, depending on what ran before it. On these VMs that
    lottery moved the one-pass bound at L = 1024 between 2 and 22 ms from run to run, and at
    L = 16384 (float32, 128 MB) between 12 and 65 ms within one process, depending on whether
    earlier rows had left a large enough free stretch of heap. With mmap off (M_MMAP_MAX = 0)
    and no trimming, every call of every candidate reuses warm memory and the ratios measure
    the work. The heap then keeps its peak size until the process exits, which a benchmark
    process can afford. Returns False without glibc.
    """
    if "ok" not in _HEAP:
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            m_trim_threshold, m_mmap_max = -1, -4  # glibc's malloc.h; values are C ints
            _HEAP["ok"] = libc.mallopt(m_mmap_max, 0) == 1 and libc.mallopt(m_trim_threshold, 2**31 - 1) == 1
        except (OSError, AttributeError):
            _HEAP["ok"] = False
    return _HEAP["ok"]


def timer_for(f: Callable[[], object]) -> Timer:
    """A Timer calling ``f()`` with this process's thread count (Timer's default is one thread)."""
    return Timer("f()", globals={"f": f}, num_threads=torch.get_num_threads())


def interleaved_samples(
    fns: Mapping[str, Callable[[], object]], *, repeats: int = 5, warmup: int = 1, min_sample_s: float = 0.03
) -> dict[str, list[float]]:
    """Seconds per call of each function, one sample per round, timed round-robin.

    A sample is ``Timer.timeit(number)`` (which first warms up with max(number // 100, 2)
    calls) and its value the mean per call, with ``number`` chosen once, from the first
    function, so that its sample lasts at least ``min_sample_s``: a millisecond-long call
    on its own is at the mercy of the page faults its fresh output happens to draw (1-10 ms
    on these VMs), which is noise, not work. Every function gets the same ``number``, and
    the heap is made steady first (``steady_heap``). ``warmup`` extra calls of each function
    run once before the first round (lazy initialisation, a kernel build). The garbage
    collector runs once before the rounds; timeit keeps it off inside a sample (a full
    collection here takes ~0.2 s, so one per sample would dominate small benchmarks).
    """
    steady_heap()
    timers = {name: timer_for(f) for name, f in fns.items()}
    for f in fns.values():
        for _ in range(warmup):
            f()
    first = next(iter(timers.values()))
    number = max(1, math.ceil(min_sample_s / first.timeit(1).mean))
    times: dict[str, list[float]] = {name: [] for name in fns}
    gc.collect()
    for _ in range(repeats):
        for name, t in timers.items():
            times[name].append(t.timeit(number).mean)
    return times


def interleaved_medians(fns: Mapping[str, Callable[[], object]], **kw) -> dict[str, float]:
    """Median seconds per call of each function (``interleaved_samples``)."""
    return {name: statistics.median(ts) for name, ts in interleaved_samples(fns, **kw).items()}


def paired_ratios(samples: Mapping[str, list[float]], ref: str) -> dict[str, float]:
    """Median over rounds of each function's time over the reference's time in the same round.

    Pairing each sample with the reference taken moments before it cancels the slow drifts
    of a shared machine (a neighbour's load, the clock) that a ratio of medians keeps.
    """
    return {name: statistics.median(t / r for t, r in zip(ts, samples[ref])) for name, ts in samples.items()}


def device_samples(fns: Mapping[str, Callable[[], object]], device: torch.device | str, *, repeats: int = 25,
                   warmup: int = 2, min_sample_s: float = 0.03) -> dict[str, list[float]]:
    """Seconds per call of each function on ``device``, ``repeats`` samples each, round-robin.

    CUDA: one call per sample between two CUDA events (the GPU's own clock, no host round trip
    inside the timed stretch), after ``warmup`` calls of each; one synchronisation at the end.
    Elsewhere: ``interleaved_samples`` (a sample repeats the call for ``min_sample_s``).
    """
    device = torch.device(device)
    if device.type != "cuda":
        return interleaved_samples(fns, repeats=repeats, warmup=warmup, min_sample_s=min_sample_s)
    for f in fns.values():
        for _ in range(warmup):
            f()
    torch.cuda.synchronize(device)
    events: dict[str, list[tuple]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, f in fns.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            f()
            end.record()
            events[name].append((start, end))
    torch.cuda.synchronize(device)
    return {name: [start.elapsed_time(end) / 1e3 for start, end in pairs] for name, pairs in events.items()}


def peak_bytes(f: Callable[[], object], device: torch.device | str) -> int | None:
    """Extra device memory at the peak of one call of f (CUDA's allocator statistics); None off CUDA."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    torch.cuda.synchronize(device)
    base = torch.cuda.memory_allocated(device)
    torch.cuda.reset_peak_memory_stats(device)
    out = f()
    torch.cuda.synchronize(device)
    del out
    return torch.cuda.max_memory_allocated(device) - base


def first_call_seconds(f: Callable[[], object]) -> float:
    """Wall time of one call, cold (no warm-up), e.g. a compile on first use."""
    t0 = _clock()
    f()
    return _clock() - t0


def machine(device: torch.device | str = "cpu") -> str:
    """One line describing where the numbers were taken (the GPU too, for a CUDA device)."""
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        load = "load avg %.1f" % os.getloadavg()[0]
    except OSError:
        load = "load n/a"
    line = (f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"Python {platform.python_version()}, {load}")
    if torch.device(device).type == "cuda":
        try:
            import triton

            tri = f"Triton {triton.__version__}"
        except ImportError:
            tri = "no Triton"
        line = f"{torch.cuda.get_device_name(device)} (CUDA {torch.version.cuda}, {tri}); host: {line}"
    return line


def run_in_subprocess(code: str, timeout: float = 600) -> dict:
    """Run python code in a fresh interpreter; it must print one JSON object as its last line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"subprocess failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x"
