"""Checkers for notebooks/07_beyond.ipynb: NoPE's counter, context extension, 2-D RoPE."""
from __future__ import annotations

from typing import Any, Callable

import torch

from ..attention import attention
from ..rope2d import apply_rope_2d
from ..scaling import scaled_rope_frequencies
from ._core import close, report

__all__ = ["nope_counter", "pi_frequencies", "ntk_base", "rope_2d"]


def nope_counter(answer: Callable[[int], Any]) -> bool | None:
    """answer(n) -> (n,): what causal attention with equal scores outputs at positions 0..n-1
    when the first token's value is 1 and every other value is 0."""

    def run(fn):
        for n in (1, 5, 17):
            q = torch.zeros(n, 4, dtype=torch.float64)
            v = torch.zeros(n, 1, dtype=torch.float64)
            v[0] = 1.0
            want = attention(q, q, v, causal=True)[0][:, 0]
            got = fn(n)
            ok = close(got, want, atol=1e-6)
            yield ok, f"n={n}: {'matches' if ok else 'differs from'} the causal average"

    return report("NoPE counts: the causal average of a first-token marker", answer, run,
                  "position i averages i + 1 values (itself and everything before), and only one of them is 1.")


def pi_frequencies(answer: Callable[[int, float], Any]) -> bool | None:
    """answer(d, factor) -> (d // 2,): position-interpolation frequencies for base 10000."""

    def run(fn):
        for d, s in ((8, 2.0), (16, 4.0), (64, 8.0)):
            want, _ = scaled_rope_frequencies(d, method="linear", factor=s)
            got = fn(d, s)
            ok = close(got, want, atol=1e-7)
            yield ok, f"d={d}, factor={s}: {'right' if ok else 'wrong'}"

    return report("Position interpolation frequencies", answer, run,
                  "start from pl.rope_frequencies(d); interpolating positions m -> m / s is the same as dividing "
                  "every frequency by s.")


def ntk_base(answer: Callable[[float, float, int], Any]) -> bool | None:
    """answer(base, factor, d) -> float: the NTK-aware base that slows the slowest pair by exactly factor."""

    def run(fn):
        for base, s, d in ((10000.0, 4.0, 64), (10000.0, 8.0, 128), (500000.0, 2.0, 16)):
            want, _ = scaled_rope_frequencies(d, method="ntk", factor=s, base=base, dtype=torch.float64)
            got = float(fn(base, s, d))
            new = torch.arange(0, d, 2, dtype=torch.float64) / d
            ok = got > 1 and close(got ** -new, want, atol=1e-9)
            yield ok, f"base={base:g}, factor={s:g}, d={d}: {'right' if ok else f'{got:.6g} is wrong'}"

    return report("NTK-aware base", answer, run,
                  "the slowest pair has theta = base**(-(d-2)/d); choose base' so that this becomes theta / s: "
                  "base' = base * s**(d/(d-2)).")


def rope_2d(answer: Callable[..., Any]) -> bool | None:
    """answer(x, rows, cols) -> x rotated by axial 2-D RoPE (first half by row, second by column)."""

    def run(fn):
        g = torch.Generator().manual_seed(7)
        for shape in ((6, 8), (2, 9, 16)):
            x = torch.randn(*shape, generator=g, dtype=torch.float64)
            rows = torch.randint(0, 10, (shape[-2],), generator=g)
            cols = torch.randint(0, 10, (shape[-2],), generator=g)
            want = apply_rope_2d(x, rows, cols)
            got = fn(x, rows, cols)
            ok = close(got, want, atol=1e-6)
            yield ok, f"x of shape {shape}: {'matches' if ok else 'differs from'} pl.apply_rope_2d"

    return report("Axial 2-D RoPE", answer, run,
                  "rotate x[..., :d//2] with pl.apply_rope at the rows and x[..., d//2:] at the columns, "
                  "then concatenate.")
