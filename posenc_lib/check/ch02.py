"""Checkers for notebooks/02_integer_binary.ipynb: integer and binary codes, affine maps between positions.

No checker here holds an answer. A witness and a code are checked by the properties they must have; the
exact offsets are compared with least squares on the tables (for small widths, measured while the learner's
function cannot) and, for widths no table reaches, with salted digests (``_core.sealed``); the step length
is compared with a measurement the learner's function is refused.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from .. import absolute, angles, rope, rotary
from ..angles import rope_frequencies
from ._core import Verdict, close, float64_tensor, number, report, sealed, whole_numbers
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["carry_witness", "exact_offsets", "one_bit_steps", "sin_step"]


@contextmanager
def _one_thread() -> Iterator[None]:
    """Least squares on tables this small runs fastest, and steadiest on a busy machine, on one CPU thread."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def _measurements() -> tuple[tuple[Any, str, str], ...]:
    """What would measure the fits instead of reasoning about the bits: the table and least squares."""
    import numpy

    import posenc_lib

    return ((posenc_lib, "affine_shift_residual", "pl.affine_shift_residual"),
            (absolute, "affine_shift_residual", "pl.affine_shift_residual"),
            (posenc_lib, "binary_positions", "pl.binary_positions"), (absolute, "binary_positions", "pl.binary_positions"),
            (torch.linalg, "lstsq", "torch.linalg.lstsq"), (torch.linalg, "pinv", "torch.linalg.pinv"),
            (torch.linalg, "solve", "torch.linalg.solve"), (numpy.linalg, "lstsq", "numpy.linalg.lstsq"),
            (numpy.linalg, "pinv", "numpy.linalg.pinv"), (numpy.linalg, "solve", "numpy.linalg.solve"))


# Exercise 1: four positions whose codes balance (p_a + p_b = p_c + p_e) while their images k steps on do not.
# Every k here is below 2^(d-2), where section 4 found no exact map; the widths go far past any table.
WITNESS_CASES = ((4, 1), (4, 2), (6, 4), (6, 12), (8, 3), (8, 40), (20, 5 * 2**9), (40, 2**30 + 2**20),
                 (60, 7 * 2**40), (60, 2**57 + 2**3))


def _bit_sums(x: int, y: int, d: int) -> list[int]:
    """bits(x) + bits(y), one entry per bit 0 .. d-1: the sum p_x + p_y of two d-bit codes."""
    return [(x >> t & 1) + (y >> t & 1) for t in range(d)]


def carry_witness(fn: Any) -> bool | None:
    """Exercise 1: fn(d, k) -> four positions (a, b, c, e) of the d-bit table, with a + k, ... still in it,
    whose codes balance, p_a + p_b = p_c + p_e, while p_(a+k) + p_(b+k) != p_(c+k) + p_(e+k): a proof that
    no affine map sends p_i to p_(i+k). Widths up to 60, so the table and least squares refuse to run."""

    def run(f: Callable[[int, int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(d, k) returning four positions, got {type(f).__name__}"
            return
        answers, stopped = answers_under_guard(f, WITNESS_CASES, _measurements())
        if stopped is not None:
            (d, k), why = stopped
            yield stopped_verdict(why, f"fn({d}, {k})", shortcut="that measures instead of choosing the four "
                                  "positions, and no table of 2^60 rows can be built", loop="searches too long: "
                                  "choose the four positions from what adding k does to the bits")
            return
        for d, k in WITNESS_CASES:
            quad = whole_numbers(answers[d, k])
            call = f"fn({d}, {k})"
            if quad is None or len(quad) != 4:
                yield False, f"{call} must return four positions (a, b, c, e), got {answers[d, k]!r}"
                return
            a, b, c, e = quad
            if not all(0 <= x and x + k < 2**d for x in quad):
                yield False, (f"{call}: every position x must have its partner in the table, 0 <= x and "
                              f"x + k < 2^{d}")
                return
            if sorted((a, b)) == sorted((c, e)):
                yield False, (f"{call} puts the same two positions on both sides: that balance holds for every "
                              "map, so no map can break it")
                return
            if _bit_sums(a, b, d) != _bit_sums(c, e, d):
                yield False, (f"{call}: p_a + p_b and p_c + p_e differ, so the four sources are not balanced and an "
                              "affine map owes their images nothing")
                return
            if _bit_sums(a + k, b + k, d) == _bit_sums(c + k, e + k, d):
                if all(x & k == 0 for x in quad):
                    yield False, (f"{call}: adding k carries nowhere in your four sources, it only sets k's bits "
                                  "in each of them, and the balance survives")
                else:
                    yield False, f"{call}: the images are balanced too; the carries changed both sides alike"
                return
        yield True, (f"a witness for all {len(WITNESS_CASES)} offsets, up to d = 60: an affine map keeps every "
                     "balance, and a carry that falls on one side only breaks it, so no affine map exists")

    return report("four positions that prove there is no affine map", fn, run,
                  "an affine map sees only bits; adding k does something to the bits that depends on the bits "
                  "below: where can that act on one side of a balance and not the other?")


# Exercise 2: every offset with an exact affine map on the d-bit table (no wrap-around), for any d.
OFFSET_BITS_MEASURED = (3, 4, 5, 6, 7, 8)  # least squares on the tables, measured by the checker
OFFSET_BITS_FAR = (20, 40, 60)  # 2^d positions: far too many rows for any table
# sealed(sorted offsets, "ch02.exact_offsets") for each far width
_FAR_SEALED = {20: "cfd24e2eddd2a7d11616cbcc", 40: "12273967fd33ae1ab60ea74c", 60: "d0bf661899e6b66437b7c6f2"}


def exact_offsets(fn: Any) -> bool | None:
    """Exercise 2: fn(d) -> the sorted offsets k (1 <= k < 2**d) with an exact affine map on the d-bit table,
    no wrap-around; for d up to 60, so the table and least squares refuse to run while fn does."""

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(d) returning a list of offsets, got {type(f).__name__}"
            return
        measured = {}
        with _one_thread():  # before the learner's function runs, while the library is whole
            for d in OFFSET_BITS_MEASURED:
                table = absolute.binary_positions(2**d, d, dtype=torch.float64)
                measured[d] = {k for k in range(1, 2**d) if absolute.affine_shift_residual(table, k) < 1e-9}
        widths = OFFSET_BITS_MEASURED + OFFSET_BITS_FAR
        by_case, stopped = answers_under_guard(f, [(d,) for d in widths], _measurements())
        if stopped is not None:
            (d,), why = stopped
            yield stopped_verdict(why, f"fn({d})", shortcut=f"that measures the fits, and the checker goes up to "
                                  f"d = {OFFSET_BITS_FAR[-1]}, where no table can be built; your function has to know "
                                  "which offsets fit", loop=f"tries the offsets one by one (2^{d} - 1 of them): find "
                                  "which ones fit without trying them")
            return
        for d in widths:
            got = whole_numbers(by_case[d,])
            if got is None:
                yield False, f"fn({d}) must return a list of whole offsets, got {type(by_case[d,]).__name__}"
                return
            given = set(got)
            if d in measured:
                if given == measured[d]:
                    continue
                extra, missing = given - measured[d], measured[d] - given
            elif sealed(sorted(given), "ch02.exact_offsets") == _FAR_SEALED[d]:
                continue
            else:
                extra, missing = None, None
            if given == {2 ** (d - 1)}:
                yield False, (f"fn({d}) is the counter that wraps around; without it only the pairs inside the "
                              "table count, and fewer pairs are easier to fit")
            elif any(k < 2 ** (d - 2) for k in given):
                yield False, f"fn({d}) lists offsets below 2^(d-2); §4 found no exact map for any of them"
            elif any(not 1 <= k < 2**d for k in given):
                yield False, f"fn({d}) lists offsets outside 1 .. 2^d - 1"
            elif extra is None:
                yield False, (f"fn({d}) is wrong although d = {OFFSET_BITS_MEASURED[0]} to {OFFSET_BITS_MEASURED[-1]} "
                              "were right: a pattern read off small tables, not a rule that holds for every width")
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
                     f"d = {', '.join(map(str, OFFSET_BITS_FAR))}: 2d - 1 offsets, all of them the table's edge "
                     "except k = 2^(d-1), the one offset a counter that wraps around keeps too")

    return report("the offsets with an exact affine map, for any width", fn, run,
                  "an exact map only has to fit the pairs that exist: which numbers are their sources?")


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
                  "the 2^d codes are the corners of a d-dimensional cube, and a one-bit step is one of its "
                  "edges: what kind of walk along the edges do you need?")


# Exercise 4: the constant step length of the sinusoidal code, in closed form.
STEP_CASES = ((6, 10000.0), (64, 10000.0), (512, 10000.0), (16, 100.0))


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
        measured = {}  # the step of each case, measured on a table before the learner's function runs
        for d, base in STEP_CASES:
            table = absolute.sinusoidal_positions(40, d, base=base, dtype=torch.float64)
            measured[d, base] = float((table[1:] - table[:-1]).norm(dim=-1).mean())
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
            want = measured[d, base]
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
