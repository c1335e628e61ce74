"""Timing helpers: warm up, interleave the candidates, take medians.

The machines these run on are shared and noisy, so absolute times mean little: every
benchmark times a reference and its candidates round-robin in the same process and
reports ratios of medians.
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
import time
from typing import Callable, Mapping

import torch


_HEAP: dict[str, bool] = {}


def steady_heap() -> bool:
    """Keep freed buffers up to 32 MB in the process heap instead of returning them to the OS.

    glibc serves large blocks (every q, k and output here) from fresh pages and gives them
    back on free, so whether a call pays thousands of page faults depends on what ran just
    before it: on these VMs that lottery moved the one-pass bound at L = 1024 between 2 and
    22 ms from run to run. With a 32 MB mmap threshold (glibc's maximum) and no trimming,
    a timed call reuses warm memory, and the ratios measure the work. Tensors above 32 MB
    still get fresh pages, for every candidate alike. Returns False without glibc.
    """
    if "ok" not in _HEAP:
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h; values are C ints
            _HEAP["ok"] = (libc.mallopt(m_mmap_threshold, 32 << 20) == 1
                           and libc.mallopt(m_trim_threshold, 2**31 - 1) == 1)
        except (OSError, AttributeError):
            _HEAP["ok"] = False
    return _HEAP["ok"]


def interleaved_samples(
    fns: Mapping[str, Callable[[], object]], *, repeats: int = 5, warmup: int = 1, min_sample_s: float = 0.03
) -> dict[str, list[float]]:
    """Seconds per call of each function, one sample per round, timed round-robin.

    A sample runs a function ``number`` times in a row, with ``number`` chosen so the first
    function's sample lasts at least ``min_sample_s``: a millisecond-long call on its own
    is at the mercy of the page faults its fresh output happens to draw (1-10 ms on these
    VMs), which is noise, not work. Every function gets the same ``number``, and the heap
    is made steady first (``steady_heap``).
    """
    steady_heap()
    for f in fns.values():
        for _ in range(warmup):
            f()
    first = next(iter(fns.values()))
    t0 = time.perf_counter()
    first()
    number = max(1, math.ceil(min_sample_s / max(time.perf_counter() - t0, 1e-9)))
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, f in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            for _ in range(number):
                f()
            times[name].append((time.perf_counter() - t0) / number)
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


def first_call_seconds(f: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


def machine() -> str:
    """One line describing where the numbers were taken."""
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
    return (f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
            f"Python {platform.python_version()}, {load}")


def run_in_subprocess(code: str, timeout: float = 600) -> dict:
    """Run python code in a fresh interpreter; it must print one JSON object as its last line."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")])}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    if res.returncode != 0:
        raise RuntimeError(f"subprocess failed ({res.returncode}):\n{res.stderr[-3000:]}")
    return json.loads(res.stdout.strip().splitlines()[-1])


def fmt_ratio(x: float) -> str:
    return f"{x:.2f}x"
