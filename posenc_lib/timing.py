"""Timing for the notebooks' "how fast is it" cells, on torch's own benchmark timer.

``torch.utils.benchmark.Timer`` warms up, fixes the thread count and synchronises CUDA
before reading the clock (a plain ``perf_counter`` around a GPU call measures only the
launch). Timings change from run to run, so cells that print them are not compared by
the tests; ``make bench`` (``benchmarks/``) measures ratios properly, round-robin.
"""
from __future__ import annotations

from typing import Callable

from torch.utils.benchmark import Timer


def median_ms(fn: Callable[[], object], *, min_run_time: float = 0.2) -> float:
    """Median milliseconds per call of ``fn()`` over blocks of calls lasting about ``min_run_time`` s in all.

    Taught in: notebooks/06_alibi.ipynb (10_making_it_fast uses ``block_ms``)
    """
    return median_iqr_ms(fn, min_run_time=min_run_time)[0]


def median_iqr_ms(fn: Callable[[], object], *, min_run_time: float = 0.2) -> tuple[float, float]:
    """(median, interquartile range) of the milliseconds per call of ``fn()``, over the blocks of calls of
    ``median_ms``: the spread says how far one median can be trusted.
    """
    measured = Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
    return measured.median * 1e3, measured.iqr * 1e3


def block_ms(fn: Callable[[], object], *, min_run_time: float = 0.2) -> list[float]:
    """Milliseconds per call of ``fn()`` in each block of calls of ``median_ms``, fastest first. Other programs
    running at the same time can only add time to a block, so the fastest block is the least disturbed.

    Taught in: notebooks/10_making_it_fast.ipynb
    """
    measured = Timer("fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
    return sorted(t * 1e3 for t in measured.times)
