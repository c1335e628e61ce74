"""Timing helpers: warm up, interleave the candidates, take medians.

The machines these run on are shared and noisy, so absolute times mean little: every
benchmark times a reference and its candidates round-robin in the same process and
reports ratios of medians.
"""
from __future__ import annotations

import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from typing import Callable, Mapping

import torch


def interleaved_medians(fns: Mapping[str, Callable[[], object]], *, repeats: int = 5, warmup: int = 1) -> dict[str, float]:
    """Median seconds per call of each function, timed round-robin (one call of each per round)."""
    for f in fns.values():
        for _ in range(warmup):
            f()
    times: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, f in fns.items():
            gc.collect()
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    return {name: statistics.median(ts) for name, ts in times.items()}


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
