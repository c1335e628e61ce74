"""Checkers for notebooks/02_integer_binary.ipynb: integer and binary codes, affine maps between positions."""
from __future__ import annotations

import functools
from typing import Any, Callable, Iterator

import torch

from .. import absolute, angles, rope, rotary
from ..angles import rope_frequencies
from ._core import Verdict, close, float64_tensor, number, report, whole_number, whole_numbers
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["affine_counter", "exact_offsets", "one_bit_steps", "sin_step"]


# Exercise 1: the 2-bit code p_0..p_3 as a counter that wraps around (p_{(i+k) mod 4}), k = 1, 2, 3.
COUNTER_BITS = 2
COUNTER_OFFSETS = (1, 2, 3)


def no_affine_offsets(wrap: bool, d: int = COUNTER_BITS) -> list[int]:
    """The offsets k (1 .. 2**d - 1) for which no affine map sends p_i to p_{i+k} on the d-bit code.

    wrap: positions count mod 2**d (p_{(i+k) mod 2**d}); otherwise only the pairs with i + k < 2**d.
    """
    table = absolute.binary_positions(2**d, d, dtype=torch.float64)
    out = []
    for k in range(1, 2**d):
        rows = torch.cat([table, table[:k]]) if wrap else table  # appended rows: the pairs that wrap
        if absolute.affine_shift_residual(rows, k) > 1e-9:
            out.append(k)
    return out


def _offsets(ans: Any) -> list[int] | None:
    """A learner's list of offsets as ints (a list, tuple, set, tensor or array of whole numbers, or one), else None."""
    single = whole_number(ans)
    return [single] if single is not None else whole_numbers(ans)


def affine_counter(answer: Any) -> bool | None:
    """Exercise 1: the offsets k in 1..3 with no affine map p_i -> p_{(i+k) mod 4} on the 2-bit counter."""

    def run(ans: Any) -> Iterator[Verdict]:
        got = _offsets(ans)
        if got is None or not set(got) <= set(COUNTER_OFFSETS):
            yield False, f"answer must be a list of offsets from {list(COUNTER_OFFSETS)} (maybe empty), got {ans!r}"
            return
        want = set(no_affine_offsets(wrap=True))
        extra, missing = set(got) - want, want - set(got)
        if not extra and not missing:
            yield True, ("right: the four codes are the corners of a square, p_0 + p_3 = p_1 + p_2, and an "
                         "affine f keeps every such balance; only some offsets respect it")
            return
        if extra:
            n = len(extra)
            yield False, (f"{n} of your offsets {'has' if n == 1 else 'have'} an exact affine map: try to build "
                          "it (a carry that never reaches a kept bit is no obstacle)")
        if missing:
            n = len(missing)
            yield False, (f"{n} offset{'s' if n > 1 else ''} with no affine map {'are' if n > 1 else 'is'} missing: "
                          "with wrap-around all four pairs count, and four points are not three")

    return report("offsets with no affine map on the wrapping 2-bit counter", answer, run,
                  "draw the four codes as points in the plane: what linear relation holds among the four "
                  "corners, and what does f(p) = Mp + b do to such a relation?")


# Exercise 2: every offset with an exact affine map on the d-bit table (no wrap-around), for any d.
OFFSET_BITS_MEASURED = (3, 4, 5, 6, 7, 8)  # checked against least squares
OFFSET_BITS_FAR = (20, 40, 60)  # 2^d positions: far too many rows for any table


def exact_offsets_by_rule(d: int) -> list[int]:
    """The offsets k (1 .. 2**d - 1) with an exact affine map p_i -> p_{i+k} on the d-bit table: those that
    leave 2**a or 3 * 2**a pairs (tests/test_check_ch02.py checks the rule against least squares)."""
    pairs = {2**a for a in range(d)} | {3 * 2**a for a in range(d - 1)}
    return sorted(2**d - n for n in pairs)


@functools.lru_cache(maxsize=None)
def exact_offsets_measured(d: int) -> tuple[int, ...]:
    """The offsets with an exact affine map on the d-bit table, measured by least squares (small d only)."""
    missing = set(no_affine_offsets(wrap=False, d=d))
    return tuple(k for k in range(1, 2**d) if k not in missing)


def _offsets_wanted(d: int) -> list[int]:
    return list(exact_offsets_measured(d)) if d <= max(OFFSET_BITS_MEASURED) else exact_offsets_by_rule(d)


def _measurements() -> tuple[tuple[Any, str, str], ...]:
    """What would measure the fits instead of knowing the rule: the table and least squares."""
    import numpy

    import posenc_lib

    return ((posenc_lib, "affine_shift_residual", "pl.affine_shift_residual"),
            (absolute, "affine_shift_residual", "pl.affine_shift_residual"),
            (posenc_lib, "binary_positions", "pl.binary_positions"), (absolute, "binary_positions", "pl.binary_positions"),
            (torch.linalg, "lstsq", "torch.linalg.lstsq"), (torch.linalg, "pinv", "torch.linalg.pinv"),
            (torch.linalg, "solve", "torch.linalg.solve"), (numpy.linalg, "lstsq", "numpy.linalg.lstsq"),
            (numpy.linalg, "pinv", "numpy.linalg.pinv"), (numpy.linalg, "solve", "numpy.linalg.solve"))


def exact_offsets(fn: Any) -> bool | None:
    """Exercise 2: fn(d) -> the sorted offsets k (1 <= k < 2**d) with an exact affine map on the d-bit table,
    no wrap-around; for d up to 60, so the table and least squares refuse to run while fn does."""

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(d) returning a list of offsets, got {type(f).__name__}"
            return
        widths = OFFSET_BITS_MEASURED + OFFSET_BITS_FAR
        wants = {d: _offsets_wanted(d) for d in widths}  # measured before the learner's function runs
        by_case, stopped = answers_under_guard(f, [(d,) for d in widths], _measurements())
        if stopped is not None:
            (d,), why = stopped
            yield stopped_verdict(why, f"fn({d})", shortcut=f"that measures the fits, and the checker goes up to "
                                  f"d = {OFFSET_BITS_FAR[-1]}, where no table can be built; your function has to know "
                                  "which offsets fit", loop=f"tries the offsets one by one (2^{d} - 1 of them): find "
                                  "which ones fit without trying them")
            return
        answers = {d: by_case[d,] for d in widths}
        for d in widths:
            got = whole_numbers(answers[d])
            if got is None:
                yield False, f"fn({d}) must return a list of whole offsets, got {type(answers[d]).__name__}"
                return
            want, given = set(wants[d]), set(got)
            if given == want:
                continue
            extra, missing = given - want, want - given
            low = [k for k in extra if k < 2 ** (d - 2)]
            if given == {2 ** (d - 1)}:
                yield False, (f"fn({d}) is the counter that wraps around; without it only the pairs inside the "
                              "table count, and fewer pairs are easier to fit")
            elif low:
                yield False, f"fn({d}) lists offsets below 2^(d-2); §4 found no exact map for any of them"
            elif any(not 1 <= k < 2**d for k in extra):
                yield False, f"fn({d}) lists offsets outside 1 .. 2^d - 1"
            elif missing and not extra:
                yield False, (f"fn({d}) misses {len(missing)} offsets that have an exact map: their pairs' "
                              "sources are not a whole block of low bits, and an affine map fits them anyway")
            elif extra and not missing:
                yield False, (f"fn({d}) lists {len(extra)} offsets with no exact map: for them some carry "
                              "depends on the low bits, and no affine map follows it")
            else:
                yield False, (f"fn({d}): {len(extra)} of your offsets have no exact map, and {len(missing)} that "
                              "have one are missing")
            return
        yield True, (f"right for d = {widths[0]} to {OFFSET_BITS_MEASURED[-1]} (least squares agrees) and for "
                     f"d = {', '.join(map(str, OFFSET_BITS_FAR))}: 2d - 1 offsets, every one the table's edge")

    return report("the offsets with an exact affine map, for any width", fn, run,
                  "an exact map only has to fit the pairs that exist: count them for offset k, and look at which "
                  "numbers their sources are")


# Exercise 3: a code of n positions in d bits whose every step flips one bit.
def one_bit_steps(fn: Any) -> bool | None:
    """Exercise 3: fn(n, d) -> an (n, d) table of 0s and 1s, rows distinct, with p_{i+1} and p_i
    differing in exactly one bit for every i (n <= 2**d)."""

    def run(f: Callable[[int, int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(n, d), got {type(f).__name__}"
            return
        for n, d in ((8, 3), (16, 4), (64, 6), (40, 6), (1024, 10)):
            t = float64_tensor(f(n, d))
            if t is None or t.shape != (n, d):
                yield False, f"fn({n}, {d}) must have shape ({n}, {d}), got {None if t is None else tuple(t.shape)}"
                return
            if not ((t == 0) | (t == 1)).all():
                yield False, f"fn({n}, {d}) holds entries other than 0 and 1: a bit code has only 0s and 1s"
                return
            if torch.unique(t, dim=0).shape[0] != n:
                yield False, f"fn({n}, {d}) gives two positions the same code: property 1 (unique) fails"
                return
            flips = (t[1:] != t[:-1]).sum(-1)
            if not (flips == 1).all():
                many = int((flips > 1).sum())
                yield False, (f"fn({n}, {d}): {many} of the {n - 1} steps flip more than one bit: counting in "
                              "binary carries through the low bits, which is what makes its steps jumpy")
                return
        table = float64_tensor(f(64, 6))
        residual = absolute.affine_shift_residual(table, 1)
        yield True, "every step flips exactly one bit, all rows distinct: neighbours are always at distance 1"
        if residual > 1e-6:  # what the design does not buy: said, not graded
            yield True, (f"and still no fixed affine map p_i -> p_(i+1) on your 6-bit table (least-squares "
                         f"residual {residual:.1f}): even steps alone do not give property 2")

    return report("a bit code whose every step flips one bit", fn, run,
                  "a 1-bit code is easy; how could you reuse a (d-1)-bit code that already steps one bit at a "
                  "time to build a d-bit one, without a big jump where the two halves meet?")


# Exercise 4: the constant step length of the sinusoidal code, in closed form.
STEP_CASES = ((6, 10000.0), (64, 10000.0), (512, 10000.0), (16, 100.0))


def _measured_step(d: int, base: float) -> float:
    table = absolute.sinusoidal_positions(40, d, base=base, dtype=torch.float64)
    return float((table[1:] - table[:-1]).norm(dim=-1).mean())


def _code_builders() -> tuple[tuple[Any, str, str], ...]:
    """What builds codes (or rotates vectors) to measure the step instead of deriving it."""
    import posenc_lib

    found = []
    for name in ("sinusoidal_positions", "SinusoidalPositionalEncoding", "rope_angles", "rope_matrix", "apply_rope"):
        for module in (posenc_lib, absolute, angles, rope, rotary):
            if name in vars(module) or module is posenc_lib:
                found.append((module, name, f"pl.{name}"))
    return tuple(found)


def sin_step(fn: Any) -> bool | None:
    """Exercise 4: fn(d, base) -> the distance ||p_{i+1} - p_i|| between neighbouring sinusoidal codes, derived:
    the library's code builders refuse to run while fn does (pl.rope_frequencies is allowed)."""

    def run(f: Callable[[int, float], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(d, base), got {type(f).__name__}"
            return
        answers, stopped = answers_under_guard(f, STEP_CASES, _code_builders(), loops=False)
        if stopped is not None:
            (d, base), why = stopped
            yield stopped_verdict(why, f"fn({d}, {base:g})",
                                  shortcut="that builds the codes and measures the step; derive it from the frequencies")
            return
        for d, base in STEP_CASES:
            raw = answers[d, base]
            got = number(raw)
            if got is None:
                yield False, f"fn({d}, {base:g}) must return one number, got {type(raw).__name__}"
                return
            want = _measured_step(d, base)
            if close(got, want, atol=1e-6):
                continue
            theta = rope_frequencies(d, base=base, dtype=torch.float64)
            if close(got, want**2, atol=1e-6):
                yield False, f"fn({d}, {base:g}) is the squared distance: take the root"
            elif close(got * 2**0.5, want, atol=1e-6):
                yield False, (f"fn({d}, {base:g}) is 1/√2 of the distance: each pair moves in two coordinates, "
                              "sine and cosine")
            elif close(got, float(torch.sqrt(2 - 2 * torch.cos(theta[0]))) * (d / 2) ** 0.5, atol=1e-6):
                yield False, f"fn({d}, {base:g}) treats every pair as the fastest: the pairs turn at different speeds"
            else:
                yield False, f"fn({d}, {base:g}) is not the distance between neighbouring rows of the table"
            return
        yield True, (f"right for {len(STEP_CASES)} widths and bases: the same for every i, unlike the jumps of "
                     "a binary carry")

    return report("the step length of the sinusoidal code", fn, run,
                  "look at one pair of columns at a time: what shape do its points trace as i grows?")
