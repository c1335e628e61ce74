"""Checkers for notebooks/02_integer_binary.ipynb: integer and binary codes, affine maps between positions.

No checker here holds an answer. The exact offsets are compared with least squares on the tables (for short
tables, measured while the learner's function cannot) and, for lengths no table reaches, with salted digests;
the bit counter is checked by the properties it must have; the Gray bit's wave, a formula in a symbolic bit,
exactly against the code's definition (i XOR (i >> 1)), at bits and positions past any table.
"""
from __future__ import annotations

import math
import random
from contextlib import contextmanager
from fractions import Fraction
from typing import Any, Callable, Iterator

import torch

from .. import absolute
from ._core import Verdict, float64_tensor, report, sealed, whole_numbers
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["exact_offsets", "bit_counter", "gray_wave"]


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
            (numpy.linalg, "pinv", "numpy.linalg.pinv"), (numpy.linalg, "solve", "numpy.linalg.solve"),
            *((owner, name, f"{prefix}.{name}") for owner, prefix in ((torch.linalg, "torch.linalg"),
                                                                      (numpy.linalg, "numpy.linalg"))
              for name in _RANK_TESTS),
            (torch, "svd", "torch.svd"), (torch, "qr", "torch.qr"), (torch, "matrix_rank", "torch.matrix_rank"))


# a fit tested by hand: a rank or a factorisation of the pairs' matrix (an element budget stops the table besides)
_RANK_TESTS = ("svd", "svdvals", "matrix_rank", "qr", "eig", "eigh", "eigvals", "eigvalsh")
OFFSET_ELEMENTS = 20_000  # tensor and array elements per length: a rule makes none or a few hundred; the table of
# N = 1 000 003 positions alone holds 20 million


# Exercise 1: every offset with an exact affine map on the table of the first N positions, for any N.
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
    "the boundary case": (
        "an off-by-one at the boundary: the offsets you leave out sit exactly on the edge of your rule, and "
        "they have an exact map too",
        {5: None, 12: "e5161a250a380d641271bbee", 23: None, 40: "d0aec2486e9f053706be400f",
         64: "b9c7111561eda372709b0b21", 100: "d534cfa1bb029c65f23f13a9", 1_000_003: None, 3 * 2**40 + 5: None,
         2**59 + 2**31 + 1: None, 2**60: "bbb1b23779a58645ba45403f"}),  # the same list as "too few points" at
        # 12, 40, 64 and 2^60: only N = 100 tells the two apart, and the set of names left is intersected over N
    "too many points": (
        "some offsets you list have no exact map: their pairs hold section 4's square",
        {5: "e06f6747b214fca5ac96f099", 12: None, 23: "da35a779fd2b3205c08a107a", 40: "07857265a15bb6152b52a499",
         64: None, 100: "b39039a34492d3bb242dc646", 1_000_003: "3d729300693c4c417158f974",
         3 * 2**40 + 5: "f1f2e880afd674600fc976db", 2**59 + 2**31 + 1: "147ca689d5bde2e61c97bfda", 2**60: None}),
}


def _every_offset_from_the_bound(by_case: dict[tuple[Any, ...], Any]) -> bool:
    """Whether each answer on the short tables is every offset from 2^(d-2) on (d: the bits N needs)."""
    for (n,), got in by_case.items():
        offsets = whole_numbers(got)
        if offsets is None or set(offsets) != set(range(2 ** (max((n - 1).bit_length(), 2) - 2), n)):
            return False
    return True


def exact_offsets(fn: Any) -> bool | None:
    """Exercise 1: fn(N) -> the offsets k (1 <= k < N) with an exact affine map p_i -> p_(i+k) on the table of
    the first N positions (only the pairs with i + k < N count), for N up to 2^60: the table, least squares and
    the rank tests (SVD, QR, eigenvalues) refuse to run while fn does, a table built by hand runs out of elements,
    and a loop over every offset runs out of steps."""

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(N) returning a list of offsets, got {type(f).__name__}"
            return
        measured = {}
        with _one_thread():  # before the learner's function runs, while the library is whole
            for n in OFFSET_N_MEASURED:
                table = absolute.binary_positions(n, (n - 1).bit_length(), dtype=torch.float64)
                measured[n] = {k for k in range(1, n) if absolute.affine_shift_residual(table, k) < 1e-9}
        by_case, stopped = answers_under_guard(f, [(n,) for n in OFFSET_N_MEASURED], _measurements(),
                                               elements_per_case=OFFSET_ELEMENTS)
        if stopped is None and _every_offset_from_the_bound(by_case) and any(
                set(whole_numbers(by_case[n,])) != measured[n] for n in OFFSET_N_MEASURED):
            yield False, ("every offset from 2^(d-2) on, for every table: section 4 proved that no offset below "
                          "2^(d-2) has a map, not that every offset from there on has one")
            return  # before the far lengths, where such a list would not fit in memory

        def diagnose(lengths: tuple[int, ...]) -> Iterator[Verdict]:
            """The verdict on the answers for `lengths` (all in by_case), or nothing if they are all right."""
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
                return
            call = f"fn({wrong[0]})" + (f" and {len(wrong) - 1} more" if len(wrong) > 1 else "")
            if mistakes:
                yield False, f"{call}: {_OFFSET_MISTAKES[min(mistakes)][0]}"
            elif wrong[0] in measured:
                yield False, f"{call} is not the list least squares finds on the {wrong[0]}-row table"
            else:
                yield False, (f"{call} is wrong, although the short tables were right: a pattern read off small "
                              "tables, not a rule that holds for every length")

        if stopped is None:  # the short tables first: a wrong rule is named even if it loops over the offsets
            verdicts = list(diagnose(OFFSET_N_MEASURED))
            if verdicts:
                yield from verdicts
                return
            far, stopped = answers_under_guard(f, [(n,) for n in OFFSET_N_FAR], _measurements(),  # guarded again
                                               elements_per_case=OFFSET_ELEMENTS)
            by_case.update(far)
        if stopped is not None:
            (n,), why = stopped
            yield stopped_verdict(why, f"fn({n})", shortcut=f"that measures the fits, and the checker goes up to "
                                  f"N = 2^60, where no table can be built; your function has to know which offsets "
                                  "fit", loop=f"runs out of steps at N = {n}: find a rule for the offsets that fit, not "
                                  "a walk over them", grid="a table of the positions, or a fit tested on one; "
                                  "the checker goes up to N = 2^60, where no table can be built")
            return
        verdicts = list(diagnose(OFFSET_N_FAR))
        if verdicts:
            yield from verdicts
            return
        yield True, (f"right for N = {', '.join(map(str, OFFSET_N_MEASURED))} (least squares agrees) and for "
                     "four lengths up to 2^60, where no table can be built")

    return report("the offsets with an exact affine map, for any length", fn, run,
                  "an exact map only has to fit the pairs that exist: which numbers are their sources?")


# Exercise 2: a counter of 2d positions in d bits, one bit per step (wrapping around included), whose every step
# is one fixed affine map.
COUNTER_WIDTHS = (2, 3, 4, 5, 8, 13, 40)


def _step_map(table: torch.Tensor) -> tuple[torch.Tensor, float]:
    """The least-squares affine map p_i -> p_(i+1) of a table whose last row steps back to the first: (M, residual)."""
    cyclic = torch.cat([table, table[:1]])
    inputs = torch.cat([cyclic[:-1], torch.ones(len(table), 1, dtype=torch.float64)], 1)
    fit = torch.linalg.lstsq(inputs, cyclic[1:], driver="gelsd").solution
    return fit[:-1].T, absolute.affine_shift_residual(cyclic, 1)


def bit_counter(fn: Any) -> bool | None:
    """Exercise 2: fn(d) -> a (2d, d) table of 0s and 1s, rows distinct, in which every step p_i -> p_(i+1), and
    the step from the last row back to the first, flips exactly one bit, and one affine map M p + b does every
    step. Checked by these properties for widths 2 to 40; what M turns out to be is said, not graded."""

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(d) returning a (2d, d) table, got {type(f).__name__}"
            return
        tables, stopped = answers_under_guard(f, [(d,) for d in COUNTER_WIDTHS])  # a step budget: a search stops
        if stopped is not None:
            (d,), why = stopped
            yield stopped_verdict(why, f"fn({d})", shortcut="", loop=(
                f"runs out of steps: it searches for the table ({d} bits, {2 * d} rows), which gets out of reach as d "
                "grows; build the rows from a rule instead"))
            return
        maps = {}
        for d in COUNTER_WIDTHS:
            t = float64_tensor(tables[d,])
            call = f"fn({d})"
            if t is None or t.shape != (2 * d, d):
                yield False, (f"{call} must have shape ({2 * d}, {d}), 2d rows of d bits, got "
                              f"{None if t is None else tuple(t.shape)}")
                return
            if not ((t == 0) | (t == 1)).all():
                yield False, f"{call} holds entries other than 0 and 1: a bit code has only 0s and 1s"
                return
            if torch.unique(t, dim=0).shape[0] != 2 * d:
                yield False, f"{call} gives two positions the same code: property 1 (unique) fails"
                return
            flips = (t[1:] != t[:-1]).sum(-1)
            if (flips > 1).any():
                yield False, (f"{call}: {int((flips > 1).sum())} of the {2 * d - 1} steps flip more than one bit: "
                              "a carry, or any jump, is what the counter must not have")
                return
            back = int((t[0] != t[-1]).sum())
            if back != 1:
                yield False, (f"{call}: every step flips one bit, but the last row and the first differ in {back} "
                              "bits: a counter wraps around, and that step must flip one bit too")
                return
            maps[d], residual = _step_map(t)
            if residual > 1e-6:
                yield False, (f"{call}: every step flips one bit, yet no one affine map takes every row to the next "
                              f"(least-squares residual {residual:.2f}): a walk along the cube's edges is not a "
                              "map; which bit a step flips must follow from the row, the same way for every row")
                return
        yield True, (f"for every width from {COUNTER_WIDTHS[0]} to {COUNTER_WIDTHS[-1]}: 2d distinct codes, one bit "
                     "per step, and one affine map does every step, so k steps are that map k times: property 2")
        m, eye = maps[8], torch.eye(8, dtype=torch.float64)
        if (torch.allclose(m.T @ m, eye, atol=1e-9) and torch.linalg.det(m) > 0
                and torch.allclose(torch.linalg.matrix_power(m, 16), eye, atol=1e-9)):  # what it is, said, not graded
            yield True, ("and at d = 8 your M is a rotation: about the cube's centre (p - 1/2) the code turns, and 2d "
                         "turns bring it back, as chapter 3's sinusoids turn")

    return report("a bit counter with one fixed affine map", fn, run,
                  "which affine maps send the corners of the cube onto the corners, no two to the same one?")


# Exercise 3: bit k of the Gray code of i as the sign of one sine, sin(2π (i + s) / P) < 0. The learner's function
# gets b as a symbol, so (P, s) is one formula for every bit (no table of a concrete bit can be searched for it);
# the formula is checked at bits up to 1000, where no table of the code exists.
GRAY_BITS = (0, 1, 2, 3, 5, 8, 13, 21, 34, 40, 1000)
GRAY_FAR = 2**45  # positions past any table of the code


def _gray_bit(i: int, k: int) -> int:
    """Bit k of the Gray code of i: the definition, i XOR (i >> 1), no wave."""
    return ((i ^ (i >> 1)) >> k) & 1


def _binary_bit(i: int, k: int) -> int:
    return (i >> k) & 1


def _gray_positions(k: int) -> list[int]:
    """Positions either side of every change of bits k and k + 1 over the first 16 multiples of 2^k, the same far out
    (from max(2^45, 2^(k+5)) on), and 50 drawn at random below twice that."""
    if not 0 <= k <= GRAY_BITS[-1]:
        raise ValueError(f"k must be a bit from 0 to {GRAY_BITS[-1]}, got {k}")
    draw, far = random.Random(k), max(GRAY_FAR, 2 ** (k + 5))
    near = [m * 2**k + step for m in range(16) for step in (-1, 0, 1)]
    return sorted({i for i in near + [far + i for i in near] + [draw.randrange(2 * far) for _ in range(50)] if i >= 0})


def _bit_symbol() -> Any:
    import sympy

    return sympy.Symbol("b", integer=True, nonnegative=True)


def _at_bit(x: Any, bit: Any, k: int) -> Any:
    """The formula x (a sympy expression in the symbol ``bit``, or a number) at bit k, a sympy expression; floats in it
    are read as the exact binary fractions they hold. None when it is no formula. SymPy is imported here, not with
    the module: only this exercise needs it (it comes with torch, which requires it)."""
    import sympy

    if isinstance(x, (bool, str, bytes, type)):
        return None
    try:
        expr = sympy.sympify(x, strict=True)
        expr = expr.xreplace({f: sympy.Rational(f) for f in expr.atoms(sympy.Float)}).subs(bit, k)
    except (sympy.SympifyError, TypeError, ValueError, AttributeError):
        return None
    return expr if isinstance(expr, sympy.Basic) else None


def _exact_at(x: Any, bit: Any, k: int) -> Fraction | None:
    """The formula x at bit k as an exact fraction (see _at_bit). None when it is not a finite rational number there."""
    expr = _at_bit(x, bit, k)
    if expr is None or not expr.is_Rational:
        return None
    return Fraction(int(expr.p), int(expr.q))


def _pi_times_rational(x: Any, bit: Any, k: int) -> bool:
    """Whether the formula x at bit k is a rational number times pi or over pi: with sympy.pi exactly, or with the
    float math.pi (then a power of two times a fraction of denominator at most 12, to 1e-12)."""
    import sympy

    expr = _at_bit(x, bit, k)
    if expr is None or expr == 0:
        return False
    if any((expr * factor).is_Rational for factor in (sympy.pi, 1 / sympy.pi)):
        return True
    if not expr.is_Rational:
        return False
    value = abs(Fraction(int(expr.p), int(expr.q)))
    for r in (value / Fraction(math.pi), value * Fraction(math.pi)):
        scaled = r / Fraction(2) ** (r.numerator.bit_length() - r.denominator.bit_length())  # within (1/2, 2)
        near = scaled.limit_denominator(12)
        if abs(scaled - near) < Fraction(1, 10**12) * near:
            return True
    return False


def _power_of_two(x: Fraction) -> int | None:
    """log2 of x when x is a power of two (2^j, j of any sign), else None."""
    p, q = x.numerator, x.denominator
    if p > 0 and p & (p - 1) == 0 and q & (q - 1) == 0:
        return p.bit_length() - q.bit_length()
    return None


def _below_zero(period: Fraction, shift: Fraction, i: int) -> tuple[bool, bool]:
    """(sin(2π (i + shift) / period) < 0, the sine is exactly 0), computed exactly: the sine is below zero when the
    fractional part of (i + shift) / period lies strictly between 1/2 and 1."""
    x = (i + shift) / period
    frac = x - math.floor(x)
    return frac > Fraction(1, 2), frac in (0, Fraction(1, 2))


_PI_PERIOD = ("fn(b)'s period holds a factor π: P counts positions (the sine repeats every P positions), and the 2π in "
              "sin(2π (i + s) / P) already turns positions into an angle")


def gray_wave(fn: Any) -> bool | None:
    """Exercise 3: fn(b) -> (P, s), formulas in the symbol b (sympy), with Gray bit b of i equal to 1 exactly when
    sin(2π (i + s) / P) < 0, for every position i. Checked exactly (fractions, no rounding) at positions around
    every change of the bit, near 0 and far out, for bits b up to 1000."""

    def run(f: Callable[[Any], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(b) returning a pair (P, s), got {type(f).__name__}"
            return
        bit = _bit_symbol()
        try:
            formula = f(bit)
        except (TypeError, ValueError) as why:
            yield False, (f"fn(b) gets b as a symbol, not a number, and raised {type(why).__name__}: {why}. It must "
                          "be one formula in b, the same for every bit: nothing that needs b's value (a comparison, "
                          "a range, a loop over positions, numpy or math functions of b)")
            return
        pair = tuple(formula) if isinstance(formula, (tuple, list)) else None
        if pair is None or len(pair) != 2:
            yield False, f"fn(b) must return a pair (P, s) of formulas in b, got {formula!r:.60}"
            return
        answers = {(k,): [_exact_at(x, bit, k) for x in pair] for k in GRAY_BITS}
        pi_period = all(_pi_times_rational(pair[0], bit, k) for k in GRAY_BITS)  # a frequency or angle for a period
        failed, only_at_zero, binary_k, binary_next, opposite = [], True, True, True, True
        binary_period = True  # every period is binary bit b's, 2^(b+1)
        off_by = set()  # log2 of |P| over Gray bit b's period, at every bit (None: not a power of two)
        for k in GRAY_BITS:
            exact = answers[k,]
            if pi_period and (None in exact or exact[0] == 0):
                yield False, _PI_PERIOD
                return
            if None in exact or exact[0] == 0:
                yield False, (f"fn(b) must return a pair (P, s) of formulas in b that are rational numbers at every "
                              f"bit, P not 0; at b = {k} it gives {pair!r:.60}")
                return
            period, shift = exact
            binary_period &= abs(period) == 2 ** (k + 1)
            off_by.add(_power_of_two(abs(period) / 2 ** (k + 2)))
            wrong = False
            for i in _gray_positions(k):
                below, zero = _below_zero(period, shift, i)
                gray = _gray_bit(i, k)
                binary_k &= below == bool(_binary_bit(i, k))
                binary_next &= below == bool(_binary_bit(i, k + 1))
                opposite &= below != bool(gray)
                if below != bool(gray):
                    wrong = True
                    only_at_zero &= zero
            if wrong:
                failed.append(k)
        if not failed:
            yield True, (f"for every bit checked, b = 0 to {GRAY_BITS[-1]}, near 0 and far out: one sine's sign is "
                         "the Gray bit, as section 5's sines are the binary bits")
            return
        if binary_k:
            yield False, "fn(b) gives bit b of the binary code (section 5's wave), not bit b of the Gray code"
        elif binary_next:
            yield False, "fn(b) gives bit b + 1 of the binary code, not bit b of the Gray code"
        elif binary_period:
            yield False, ("fn(b)'s period is 2^(b+1), the period of bit b of the binary code; Gray bit b does not "
                          "repeat that often")
        elif pi_period:
            yield False, _PI_PERIOD
        elif len(off_by) == 1 and None not in off_by and off_by != {0}:  # 2^j times the period (j != 0), every bit
            yield False, ("fn(b)'s P is not the period of Gray bit b (the fewest positions after which it repeats) at "
                          "any bit checked, and no shift makes up for that")
        elif opposite:
            yield False, "fn(b) gives the opposite of the Gray bit at every position: 0 where it is 1, 1 where it is 0"
        elif only_at_zero:
            yield False, ("fn(b) is right except at positions where its sine is exactly 0, neither below 0 nor above: "
                          "there it gives 0 for a bit that is 1")
        else:
            yield False, f"fn(b)'s sine does not give the Gray bit at every position, for {len(failed)} of the " \
                         f"{len(GRAY_BITS)} bits checked"

    return report("a Gray bit as the sign of one sine", fn, run,
                  "the sign of a sine is a square wave, fixed by its period and its phase; a Gray bit is the "
                  "XOR of two neighbouring binary bits, each one of section 5's square waves")
