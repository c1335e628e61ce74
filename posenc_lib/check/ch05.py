"""Checkers for notebooks/05_rope.ipynb (rotary position embedding).

Each checker takes the learner's answer (numbers, a tensor or a function), compares it
with ``posenc_lib`` and prints what is right, what is wrong and a hint. None (or a
function still raising NotImplementedError) counts as not attempted (see _core for grading mode).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import torch

from ..angles import rope_angles, rope_frequencies
from ..rope import apply_rope, layout_permutation
from ._core import Verdict, close, report

__all__ = ["rope_thetas", "rope_rotate_pair", "rope_rotate_half", "rope_layout_perm", "rope_table_row"]

# The 5 x 4 worked example of the chapter (the source's table): rows are positions 0..4.
TABLE_INPUT = [[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1], [1, -1, 1, -1], [0.5, 0.5, 0.5, 0.5]]


def _as_f64(x: Any) -> torch.Tensor | None:
    try:
        return torch.as_tensor(x, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError):
        return None


def rope_thetas(fn: Callable[[int, float], Any] | None) -> bool | None:
    """Exercise: thetas(d, base) -> the d/2 frequencies theta_j = base**(-2j/d), j = 0 .. d/2-1."""

    def run(fn: Callable[[int, float], Any]) -> Iterator[Verdict]:
        for d, base in ((4, 10000.0), (8, 10000.0), (16, 500.0), (128, 500000.0)):
            got = _as_f64(fn(d, base))
            want = rope_frequencies(d, base=base, dtype=torch.float64)
            if got is None or got.shape != want.shape:
                shape = None if got is None else tuple(got.shape)
                yield False, f"d={d}: expected shape {tuple(want.shape)} (one theta per pair), got {shape}"
                return
            if torch.allclose(got, want, rtol=1e-5, atol=0):
                continue
            if torch.allclose(got, 1 / want, rtol=1e-5, atol=0):
                yield False, f"d={d}: you returned base**(+2j/d): the exponent needs its minus sign"
            elif torch.allclose(got, base ** (-torch.arange(d // 2, dtype=torch.float64) / d), rtol=1e-5, atol=0):
                yield False, f"d={d}: you used base**(-j/d): j counts pairs, the exponent is -2j/d"
            else:
                yield False, f"d={d}, base={base}: {got[:3].tolist()} ... is wrong"
            return
        yield True, "theta_j = base^(−2j/d) for four (d, base) settings"

    return report("θ_j for any d and base", fn, run, "j counts pairs: torch.arange(0, d, 2) / d is 2j/d")


def rope_rotate_pair(answer: Any, *, pair: tuple[float, float] = (2.0, 1.0), m: int = 30, j: int = 1,
                     d: int = 8) -> bool | None:
    """Exercise: rotate the pair (x, y) of pair index j at position m by hand (d features, base 10000).

    answer: two numbers [x', y']
    """
    angle = m * 10000.0 ** (-2 * j / d)
    x, y = pair
    c, s = math.cos(angle), math.sin(angle)
    want = torch.tensor([x * c - y * s, x * s + y * c], dtype=torch.float64)
    clockwise = torch.tensor([x * c + y * s, -x * s + y * c], dtype=torch.float64)

    def run(ans: Any) -> Iterator[Verdict]:
        got = _as_f64(ans)
        if got is None or got.shape != (2,):
            yield False, "expected two numbers [x', y']"
        elif close(got, want, atol=1e-4):
            yield True, f"angle {m}·θ_{j} = {angle:g} rad; ({x:g}, {y:g}) → ({want[0]:.4f}, {want[1]:.4f})"
        elif close(got, clockwise, atol=1e-4):
            yield False, "that is the clockwise rotation [[cos, sin], [−sin, cos]]; RoPE turns counter-clockwise"
        else:
            yield False, f"({got[0]:.4f}, {got[1]:.4f}) is not the rotated pair"

    return report(f"rotate ({x:g}, {y:g}) at position m = {m}, pair j = {j}, d = {d}", answer, run,
                  "x' = x cos(mθ_j) − y sin(mθ_j), y' = x sin(mθ_j) + y cos(mθ_j), θ_j = 10000^(−2j/d)")


def rope_rotate_half(fn: Callable[[torch.Tensor], Any] | None) -> bool | None:
    """Exercise: rotate_half(x) such that x*cos + rotate_half(x)*sin is RoPE in the half layout.

    fn: (..., d) -> (..., d); cos/sin are the angle grid repeated twice along the features.
    """

    def run(fn: Callable[[torch.Tensor], Any]) -> Iterator[Verdict]:
        g = torch.Generator().manual_seed(5)
        for shape in ((6, 8), (2, 3, 5, 16)):
            x = torch.randn(*shape, dtype=torch.float64, generator=g)
            got = fn(x)
            if not isinstance(got, torch.Tensor) or got.shape != x.shape:
                yield False, f"for x of shape {shape} expected a tensor of the same shape, got {getattr(got, 'shape', type(got))}"
                return
            angles = rope_angles(shape[-2], shape[-1], inv_freq=rope_frequencies(shape[-1], dtype=torch.float64))
            cos, sin = angles.cos().repeat(1, 2), angles.sin().repeat(1, 2)
            if not torch.allclose(x * cos + got * sin, apply_rope(x, layout="half"), atol=1e-9):
                half = shape[-1] // 2
                if torch.allclose(got, torch.cat((x[..., half:], -x[..., :half]), -1)):
                    yield False, "the sign is on the wrong half: the first half of the result is −(second half of x)"
                else:
                    yield False, f"x·cos + rotate_half(x)·sin differs from RoPE (half layout) for shape {shape}"
                return
        yield True, "x·cos + rotate_half(x)·sin equals apply_rope(x, layout='half')"

    return report("write rotate_half", fn, run, "split x into halves x1, x2 and return cat(−x2, x1) on the last dim")


def rope_layout_perm(answer: Any, *, d: int = 8) -> bool | None:
    """Exercise: the permutation P with apply_rope(x)[..., P] == apply_rope(x[..., P], layout='half').

    answer: d integers
    """
    want = layout_permutation(d)

    def run(ans: Any) -> Iterator[Verdict]:
        try:
            got = torch.as_tensor(ans).long()
        except (TypeError, ValueError, RuntimeError):
            got = None
        if got is None or got.shape != (d,):
            yield False, f"expected {d} integers"
        elif torch.equal(got, want):
            yield True, f"P = {want.tolist()}: the even features first, then the odd ones"
        elif sorted(got.tolist()) != list(range(d)):
            yield False, f"{got.tolist()} is not a permutation of 0..{d - 1}"
        elif torch.equal(torch.argsort(got), want):
            yield False, "that is the inverse permutation (half → interleaved)"
        else:
            x = torch.randn(3, d, generator=torch.Generator().manual_seed(0))
            yield False, (f"with P = {got.tolist()}, interleaved(x)[..., P] and half(x[..., P]) differ by "
                          f"{(apply_rope(x)[..., got] - apply_rope(x[..., got], layout='half')).abs().max():.3f}")

    return report(f"the layout permutation for d = {d}", answer, run,
                  "pair j is (2j, 2j+1) interleaved and (j, j + d/2) half: put feature 2j at slot j, 2j+1 at j + d/2")


def rope_table_row(answer: Any, *, m: int = 3) -> bool | None:
    """Exercise: row m of the 5 x 4 worked example after RoPE, rounded to 4 decimals.

    answer: 4 numbers; each must be within 0.00005 of the exact value (correct rounding).
    """
    x = torch.tensor(TABLE_INPUT, dtype=torch.float64)
    want = apply_rope(x)[m]

    def run(ans: Any) -> Iterator[Verdict]:
        got = _as_f64(ans)
        if got is None or got.shape != (4,):
            yield False, "expected four numbers"
            return
        err = (got - want).abs()
        if bool((err <= 5.01e-5).all()):
            yield True, f"row {m} = [{', '.join(f'{w:.4f}' for w in want.tolist())}]"
            return
        for i in torch.nonzero(err > 5.01e-5).flatten().tolist():
            if err[i] < 2e-4:
                yield False, f"entry {i}: {got[i]:.4f} is off in the 4th decimal: round to nearest, do not cut off"
            else:
                yield False, f"entry {i}: {got[i]:.4f} is not the rotated value"

    return report(f"row {m} of the worked example", answer, run,
                  f"pairs (x0, x1) and (x2, x3) turn by {m} and {m}/100 radians, counter-clockwise")
