"""Checkers for notebooks/02_integer_binary.ipynb: integer and binary codes, affine maps between positions.

No checker here holds an answer. A witness and a code are checked by the properties they must have, and the
smallest witnesses by a salted digest of their largest positions (``_core.sealed``); the exact offsets are
compared with least squares on the tables (for short tables, measured while the learner's function cannot)
and, for lengths no table reaches, with salted digests; the growth of the sinusoids' step with salted
digests of its values to eleven decimals, which no width one can build reaches.
"""
from __future__ import annotations

import itertools
import math
from contextlib import contextmanager
from typing import Any, Callable, Iterator

import torch

from .. import absolute, angles, rope, rotary
from ._core import Verdict, float64_tensor, number, report, sealed, whole_numbers
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


# Exercise 1: the smallest four positions whose codes balance (p_a + p_b = p_c + p_e) while their images k steps
# on do not. Every k is below 2^(d-2), where section 4 found no exact map; the widths go far past any table.
WITNESS_CASES = ((4, 1), (4, 2), (6, 4), (6, 12), (8, 3), (8, 40), (20, 5 * 2**9), (40, 2**30 + 2**20),
                 (48, 3 * 2**44), (60, 7 * 2**40), (60, 2**57 + 2**3))
# sealed([the largest position of a smallest witness, for each case], "ch02.carry_witness.smallest")
_SMALLEST_SEALED = "1fd0460363e2be06fca01b23"


def _bit_sums(x: int, y: int, d: int) -> list[int]:
    """bits(x) + bits(y), one entry per bit 0 .. d-1: the sum p_x + p_y of two d-bit codes."""
    return [(x >> t & 1) + (y >> t & 1) for t in range(d)]


def carry_witness(fn: Any) -> bool | None:
    """Exercise 1: fn(d, k) -> four positions (a, b, c, e) of the d-bit table, with a + k, ... still in it,
    whose codes balance, p_a + p_b = p_c + p_e, while p_(a+k) + p_(b+k) != p_(c+k) + p_(e+k), and whose
    largest position is as small as any such witness allows. Widths up to 60: the table and least squares
    refuse to run, and a search runs out of steps."""

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
        largest = []
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
            largest.append(max(quad))
        yield True, (f"a witness for all {len(WITNESS_CASES)} offsets, up to d = 60: an affine map keeps every "
                     "balance, and a carry that falls on one side only breaks it, so no affine map exists")
        if sealed(largest, "ch02.carry_witness.smallest") != _SMALLEST_SEALED:
            yield False, ("but not the smallest witness for every offset: some of your positions are larger than "
                          "a proof needs")
            return
        yield True, "and the smallest for every offset: no witness has a smaller largest position"

    return report("the smallest four positions that prove there is no affine map", fn, run,
                  "an affine map sees only bits, and adding k does something to the bits that depends on the bits "
                  "below: which bits does adding k leave alone, carries included?")


# Exercise 2: every offset with an exact affine map on the table of the first N positions, for any N.
OFFSET_N_MEASURED = (5, 12, 23, 40, 64, 100)  # least squares on the tables, measured by the checker
OFFSET_N_FAR = (1_000_003, 3 * 2**40 + 5, 2**59 + 2**31 + 1, 2**60)  # far too many rows for any table
# sealed(sorted offsets, f"ch02.exact_offsets.{N}") for each far length
_OFFSETS_SEALED = {1_000_003: "495762f76163d7e30c86aad8", 3 * 2**40 + 5: "1607aeec681f51288997384c",
                   2**59 + 2**31 + 1: "317bf4981024a00e928def35", 2**60: "22872868a36abc123cfb0867"}
# The misconceptions, sealed the same way where they differ from the right list (None: the same list there).
_OFFSET_MISTAKES = {
    "read off the 64-row table": (
        "a pattern of the 64-row table (N - k a power of two or three times one), which holds where N is a power "
        "of two: the sources of a shorter or longer table are other numbers",
        {5: "e06f6747b214fca5ac96f099", 12: None, 23: "87647a1c4cd57b3b84fcfa19", 40: "07857265a15bb6152b52a499",
         64: None, 100: "fd5b9e10eec9e77196222f69", 1_000_003: "2038ed5c829f9dac5c755793",
         3 * 2**40 + 5: "9ee84c874946d2d1693fa672", 2**59 + 2**31 + 1: "f802029c247629f618279ab3", 2**60: None}),
    "too few points": (
        "some offsets you leave out do have an exact map: you under-count how many points an affine map can "
        "send wherever it likes",
        {5: None, 12: "e5161a250a380d641271bbee", 23: "e997b9e758e3034380b11b93", 40: "d0aec2486e9f053706be400f",
         64: "b9c7111561eda372709b0b21", 100: "b8125aed68c5b40e183983ad", 1_000_003: "dcb62fc4a729116abcd7c96e",
         3 * 2**40 + 5: "358596b37a122535e33c708f", 2**59 + 2**31 + 1: "59034d51d24e61005611c482",
         2**60: "bbb1b23779a58645ba45403f"}),
    "too many points": (
        "some offsets you list have no exact map: their pairs hold four sources of Exercise 1's kind",
        {5: "e06f6747b214fca5ac96f099", 12: None, 23: "da35a779fd2b3205c08a107a", 40: "07857265a15bb6152b52a499",
         64: None, 100: "b39039a34492d3bb242dc646", 1_000_003: "3d729300693c4c417158f974",
         3 * 2**40 + 5: "f1f2e880afd674600fc976db", 2**59 + 2**31 + 1: "147ca689d5bde2e61c97bfda", 2**60: None}),
}


def exact_offsets(fn: Any) -> bool | None:
    """Exercise 2: fn(N) -> the offsets k (1 <= k < N) with an exact affine map p_i -> p_(i+k) on the table of
    the first N positions (only the pairs with i + k < N count), for N up to 2^60: the table and least squares
    refuse to run while fn does, and a loop over every offset runs out of steps."""

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(N) returning a list of offsets, got {type(f).__name__}"
            return
        measured = {}
        with _one_thread():  # before the learner's function runs, while the library is whole
            for n in OFFSET_N_MEASURED:
                table = absolute.binary_positions(n, (n - 1).bit_length(), dtype=torch.float64)
                measured[n] = {k for k in range(1, n) if absolute.affine_shift_residual(table, k) < 1e-9}
        lengths = OFFSET_N_MEASURED + OFFSET_N_FAR
        by_case, stopped = answers_under_guard(f, [(n,) for n in lengths], _measurements())
        if stopped is not None:
            (n,), why = stopped
            yield stopped_verdict(why, f"fn({n})", shortcut=f"that measures the fits, and the checker goes up to "
                                  f"N = 2^60, where no table can be built; your function has to know which offsets "
                                  "fit", loop=f"tries the offsets one by one ({n - 1} of them): find which ones fit "
                                  "without trying them")
            return
        wrong, mistakes = [], set(_OFFSET_MISTAKES)
        for n in lengths:
            got = whole_numbers(by_case[n,])
            if got is None:
                yield False, f"fn({n}) must return a list of whole offsets, got {type(by_case[n,]).__name__}"
                return
            if any(not 1 <= k < n for k in got):
                yield False, f"fn({n}) lists offsets outside 1 .. N - 1"
                return
            given = sorted(set(got))
            digest = sealed(given, f"ch02.exact_offsets.{n}")
            if (set(given) == measured[n]) if n in measured else digest == _OFFSETS_SEALED[n]:
                continue
            wrong.append(n)
            mistakes &= {name for name, (_, seals) in _OFFSET_MISTAKES.items() if seals[n] == digest}
        if not wrong:
            yield True, (f"right for N = {', '.join(map(str, OFFSET_N_MEASURED))} (least squares agrees) and for "
                         "four lengths up to 2^60, where no table can be built")
            return
        call = f"fn({wrong[0]})" + (f" and {len(wrong) - 1} more" if len(wrong) > 1 else "")
        if mistakes:
            yield False, f"{call}: {_OFFSET_MISTAKES[min(mistakes)][0]}"
        elif wrong[0] in measured:
            yield False, f"{call} is not the list least squares finds on the {wrong[0]}-row table"
        else:
            yield False, (f"{call} is wrong, although the short tables were right: a pattern read off small "
                          "tables, not a rule that holds for every length")

    return report("the offsets with an exact affine map, for any length", fn, run,
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



# Exercise 4: how the sinusoids' step grows with the width: lim_(d -> inf) ||p_(i+1) - p_i|| / sqrt(d), per base.
GROWTH_BASES = (10000.0, 100.0, 500000.0, 2.0)
# sealed([round(value * scale) for each base], f"ch02.step_growth.{scale:g}"): the limit to 11 decimals, and to
# 5 (a finite width's step, or a rough integral, gets that far); then the misconceptions, to 5 decimals.
_GROWTH_SEALED = {1e11: "201d2742d0816a64bb4156a8", 1e5: "753ef6f79d4ef51b463c2722"}
_GROWTH_MISTAKES = (
    ("8d4d2647618eaee95152adaf", "is the square of the growth: the step is the root of the squared step"),
    ("e6a4d430dfeb9c973decea45", "is 1/√2 of the growth: each pair moves in two coordinates, sine and cosine"),
    ("ca1988d63f070a86933df6fc", "is √2 times the growth: it counts the pairs (d/2 of them), not the d features"),
    ("50067aa361d03a10eaa372e8", "treats every pair as the fastest one: the pairs turn at different speeds"),
)


def _matches(values: list[float], scale: float, digest: str) -> bool:
    """Whether values, rounded to 1/scale, equal the sealed ones within one unit each (rounding either way)."""
    rounded = [round(v * scale) for v in values]
    for shifts in itertools.product((0, -1, 1), repeat=len(rounded)):
        if sealed([r + s for r, s in zip(rounded, shifts)], f"ch02.step_growth.{scale:g}") == digest:
            return True
    return False


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
    """Exercise 4: fn(base) -> lim_(d -> inf) ||p_(i+1) - p_i|| / sqrt(d) for the sinusoidal code with that base,
    to 11 decimals; the library's code builders refuse to run while fn does, and no width one can build gets
    that close."""

    def run(f: Callable[[float], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(base), got {type(f).__name__}"
            return
        answers, stopped = answers_under_guard(f, [(base,) for base in GROWTH_BASES], _code_builders(), loops=False)
        if stopped is not None:
            (base,), why = stopped
            yield stopped_verdict(why, f"fn({base:g})", shortcut="that builds codes to measure steps; derive the "
                                  "limit instead")
            return
        values = []
        for base in GROWTH_BASES:
            got = number(answers[base,])
            if got is None or not math.isfinite(got):
                yield False, f"fn({base:g}) must return one number, got {type(answers[base,]).__name__}"
                return
            values.append(float(got))
        bases = ", ".join(f"{b:g}" for b in GROWTH_BASES)
        if _matches(values, 1e11, _GROWTH_SEALED[1e11]):
            yield True, (f"right to 11 decimals for bases {bases}: the step grows like √d, and a larger base puts "
                         "more pairs on slow frequencies, which add almost nothing to it")
            return
        for digest, says in _GROWTH_MISTAKES:
            if _matches(values, 1e5, digest):
                yield False, f"fn(base) {says}"
                return
        if _matches(values, 1e5, _GROWTH_SEALED[1e5]):
            yield False, ("fn(base) is close, but not the limit to 11 decimals: a step measured at one width, however "
                          "wide, or a number computed roughly, is not the limit")
            return
        yield False, f"fn(base) is not the growth of the step for bases {bases}"

    return report("how the sinusoids' step grows with the width", fn, run,
                  "each pair moves on its own circle: what does one pair add to the squared step?")
