"""Checkers for notebooks/07_beyond.ipynb: NoPE's counter in low precision, the smallest per-pair divisors for a
longer context, the smallest single base that does the same, and which uniform divisors land one span of lookup
distances on another.

No function or constant here returns or holds an answer: Exercise 1's answers are salted digests (``sealed``),
the others are checked by the properties that define them (every slow pair inside its trained arc, and no
smaller divisor or base would do; both ends of a span landing inside the other).
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from .. import angles as angles_module
from .. import rope_analysis, scaling
from ..angles import rope_frequencies
from ._core import float64_tensor, number, report, sealed, whole_number
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["counter_merge", "smallest_divisors", "one_base_in_range", "uniform_divisors"]


def _library_shortcuts() -> tuple[tuple[Any, str, str], ...]:
    """What measures instead of deriving: the scalings, the angle measurement, and the frequencies themselves."""
    import posenc_lib

    targets = []
    for owner in (posenc_lib, scaling):
        targets.append((owner, "scaled_rope_frequencies", "pl.scaled_rope_frequencies"))
    for owner in (posenc_lib, rope_analysis):
        targets.append((owner, "rope_angle_novelty", "pl.rope_angle_novelty"))
        targets.append((owner, "rope_combination_gap", "pl.rope_combination_gap"))
    return tuple(targets)


# ---------------------------------------------------------------- Exercise 1: where NoPE's counter merges

_MERGE_ANSWERS = {"bfloat16": "a344ca2f4c7bf09325ffe96d", "float16": "c57ee010ac165eb1e975a037"}  # sealed


def counter_merge(answer: Callable[[torch.dtype], Any]) -> bool | None:
    """answer(dtype) -> int: the first position i at which NoPE's counter 1/(i+1), rounded to dtype,
    equals the counter of position i + 1."""

    def run(fn):
        for dtype in (torch.bfloat16, torch.float16):
            raw = fn(dtype)
            got = whole_number(raw)
            name = str(dtype).removeprefix("torch.")
            if got is None or got < 0:
                yield False, f"{name}: {raw!r} is not a position (a whole number >= 0)"
                continue
            pair = (1 / torch.tensor([got + 1.0, got + 2.0], dtype=torch.float64)).to(dtype)  # positions got, got + 1
            if pair[0] != pair[1]:
                yield False, f"{name}: positions {got} and {got + 1} still differ in {name}"
            elif sealed([name, got], "ch07.counter_merge") == _MERGE_ANSWERS[name]:
                yield True, f"{name}: right"
            else:
                yield False, (f"{name}: positions {got} and {got + 1} do round to one number, but an earlier pair "
                              "of neighbours already does")

    return report("Where NoPE's counter merges neighbours", answer, run,
                  "a floating-point format spaces its numbers relative to their size; compare that with how far "
                  "apart neighbouring counters are, relative to theirs.")


# ---------------------------------------------------------------- Exercise 2: the smallest divisor per pair

# (d, base, L0, L): the chapter's LLaMA numbers, a shorter head, Llama-3-like numbers, the experiment's head, and
# L <= L0 (nothing to do).
_DIVISOR_CASES = ((128, 10000.0, 2048, 16384), (64, 10000.0, 4096, 32768), (128, 500000.0, 8192, 131072),
                  (16, 10000.0, 64, 512), (64, 10000.0, 4096, 2048))


_RTOL = 1e-6  # relative: a float32 answer (7 significant digits) passes, a divisor 1e-4 off does not


def _slow_pairs(d: int, base: float, L0: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(theta, never_turned): a pair that never completed a turn over the L0 trained distances saw only its arc."""
    theta = rope_frequencies(d, base=base, dtype=torch.float64)
    return theta, L0 * theta < 2 * math.pi


def smallest_divisors(answer: Callable[[int, float, int, int], Any]) -> bool | None:
    """answer(d, base, L0, L) -> (d // 2,): per pair the smallest kappa_j >= 1 such that, with frequency
    theta_j / kappa_j, every distance 0 .. L-1 gives an angle that training (distances 0 .. L0-1, frequency
    theta_j) already showed or, for a pair that never completed a turn, inside its trained arc."""

    def run(fn):
        answers, stopped = answers_under_guard(fn, _DIVISOR_CASES, _library_shortcuts(), loops=False)
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function", shortcut="derive each pair's divisor instead")
            return
        for (d, base, L0, L), got in answers.items():
            theta, slow = _slow_pairs(d, base, L0)
            kappa = float64_tensor(got)
            case = f"d={d}, base={base:g}, L0={L0}, L={L}"
            if kappa is None or kappa.shape != (d // 2,):
                yield False, f"{case}: expected d/2 = {d // 2} divisors, got {got!r:.60}"
                continue
            arc_end = (L0 - 1) * theta  # the largest trained angle of a pair that never turned
            reach = (L - 1) * theta / kappa
            problems = []
            if bool((kappa < 1 - _RTOL).any()):
                problems.append("a divisor below 1 speeds a pair up")
            if bool(((kappa[~slow] - 1).abs() > _RTOL).any()):
                problems.append("pairs that turned in training are slowed although they saw every angle")
            if bool((reach[slow] > arc_end[slow] * (1 + _RTOL)).any()):
                problems.append("a slow pair still reaches past its trained arc at distance L - 1")
            elif bool(((kappa[slow] > 1 + _RTOL) & (reach[slow] < arc_end[slow] * (1 - _RTOL))).any()):
                problems.append("a slow pair is slowed more than needed")
            yield not problems, f"{case}: " + ("right" if not problems else "; ".join(problems))

    return report("The smallest divisor per pair", answer, run,
                  "§2 split the pairs in two by what training showed them; what is the farthest a pair of each "
                  "kind may be turned?")


# ---------------------------------------------------------------- Exercise 3: one base for every pair

# Exercise 2's cases, and a head of 10^9 pairs: no array over the pairs fits, and no loop over them ends.
_BASE_CASES = _DIVISOR_CASES + ((2 * 10**9, 500000.0, 8192, 131072),)

def one_base_in_range(answer: Callable[[int, float, int, int], Any]) -> bool | None:
    """answer(d, base, L0, L) -> b' >= base: the smallest base under which no pair that never completed a turn
    in training (distances 0 .. L0-1, base b) turns past its trained arc at any distance 0 .. L-1."""

    def slow_pairs_to_check(d: int, base: float, L0: int) -> torch.Tensor:
        """The pairs that never turned: all of them for a small head; for a head of 10^9 pairs, the first two
        and the last (every pair between is slowed by a base more than the first and needs no more)."""
        first, last = 0, d // 2  # the first pair that never turned, by bisection on a monotone predicate
        while first < last:
            mid = (first + last) // 2
            first, last = (first, mid) if L0 * base ** (-2 * mid / d) < 2 * math.pi else (mid + 1, last)
        if d // 2 <= 10**5:
            return torch.arange(first, d // 2, dtype=torch.float64)
        return torch.tensor([first, first + 1, d // 2 - 1], dtype=torch.float64)

    def past_arc(d: int, base: float, L0: int, L: int, new_base: float) -> bool:
        j = slow_pairs_to_check(d, base, L0)
        theta, new = base ** (-2 * j / d), new_base ** (-2 * j / d)
        return bool(((L - 1) * new > (L0 - 1) * theta * (1 + _RTOL)).any())

    def run(fn):
        answers, stopped = answers_under_guard(fn, _BASE_CASES, _library_shortcuts())
        if stopped is not None:
            case, why = stopped
            yield stopped_verdict(why, f"one_base_in_range{case}", shortcut="derive the base instead",
                                  loop=f"runs a loop over the pairs ({case[0] // 2:.0e} of them): which one pair "
                                       "decides the base?")
            return
        for (d, base, L0, L), raw in answers.items():
            got = number(raw)
            case = f"d={d}, base={base:g}, L0={L0}, L={L}"
            if got is None or not math.isfinite(got) or got <= 0:
                yield False, f"{case}: {raw!r:.60} is not a base (one positive number)"
                continue
            s = L / L0
            if got < base * (1 - _RTOL):
                yield False, f"{case}: a base below b speeds every pair up"
            elif not past_arc(d, base, L0, L, got) and (got <= base * (1 + _RTOL) or past_arc(d, base, L0, L,
                                                                                               got * (1 - 1e-4))):
                yield True, f"{case}: right"
            elif math.isclose(got, base * s ** (d / (d - 2)), rel_tol=1e-6):
                yield False, (f"{case}: that is NTK's base: it brings one pair back exactly, and the pair it "
                              "picks is not the one that limits the others")
            elif math.isclose(got, base * s, rel_tol=1e-6):
                yield False, f"{case}: multiplying the base by s slows pair j by s^(2j/d) only: a base acts through an exponent"
            elif past_arc(d, base, L0, L, got):
                yield False, f"{case}: with this base a slow pair still turns past its trained arc at distance L - 1"
            else:
                yield False, (f"{case}: every slow pair stays inside its arc, but a smaller base would too: "
                              "you slowed the pairs more than needed")

    return report("One base that keeps every pair in range", answer, run,
                  "a larger base slows every pair, but not by the same factor: which of the pairs that need it "
                  "gets the least?")


# ---------------------------------------------------------------- Exercise 4: uniform divisors between two spans

# (lookups at test time, lookups in training), as (nearest, farthest) distances: the dictionary-first task at
# 128 and 512 tokens against its training lookups, the dictionary anywhere at 512, and two that barely fit / miss.
_SPAN_CASES = (((117, 126), (53, 62)), ((501, 510), (53, 62)), ((8, 510), (8, 62)), ((20, 30), (10, 15)),
               ((21, 30), (10, 15)), ((53, 62), (53, 62)), ((10**11, 10**12), (10, 100)),
               ((10**9, 10**12), (53, 62)))  # the last two: spans no loop or array over their distances can cover


def uniform_divisors(answer: Callable[[tuple[int, int], tuple[int, int]], Any]) -> bool | None:
    """answer(test_span, trained_span) -> (kappa_min, kappa_max), or None: the divisors kappa for which every
    distance r of the test span, read as r / kappa, lies in the trained span (both spans closed, distances > 0)."""

    def inside(kappa: float, test: tuple[int, int], trained: tuple[int, int]) -> bool:
        return all(trained[0] * (1 - _RTOL) <= r / kappa <= trained[1] * (1 + _RTOL) for r in test)

    def run(fn):
        answers, stopped = answers_under_guard(fn, _SPAN_CASES, _library_shortcuts())
        if stopped is not None:
            case, why = stopped
            yield stopped_verdict(why, f"uniform_divisors{case}", shortcut="derive the range instead",
                                  loop="runs a loop over the distances of the span: which of them can go wrong?")
            return
        for (test, trained), got in answers.items():
            case = f"test {test}, trained {trained}"
            fits = any(inside(k, test, trained) for k in (test[1] / trained[1], test[0] / trained[0]))
            if got is None:
                ok = not fits
                yield ok, f"{case}: " + ("right, no divisor fits" if ok else "some divisor does land the whole span")
                continue
            pair = float64_tensor(got)
            if pair is None or pair.shape != (2,):
                yield False, f"{case}: expected (kappa_min, kappa_max) or None, got {got!r:.60}"
                continue
            lo, hi = pair.tolist()
            if not fits:
                yield False, (f"{case}: no divisor lands both ends of this span inside the trained one: divide "
                              "the two ends by one number and compare their ratio with the trained span's")
            elif lo > hi:
                yield False, f"{case}: the smallest divisor is larger than the largest"
            elif not (inside(lo, test, trained) and inside(hi, test, trained)):
                yield False, (f"{case}: one of your ends lands a test distance outside the trained span: "
                              "which end of the test span limits each end of the range?")
            elif inside(lo * (1 - 1e-4), test, trained) or inside(hi * (1 + 1e-4), test, trained):
                yield False, f"{case}: your range is too narrow: a divisor just outside it still fits"
            else:
                yield True, f"{case}: right"

    return report("Which uniform divisors land one span on another", answer, run,
                  "dividing by one number shrinks a span without changing its shape.")
