"""Checkers for notebooks/07_beyond.ipynb: where NoPE's counter starts to merge neighbours in a format of p
significant bits, which RoPE pair a stale KV cache under dynamic NTK hurts most, the smallest single base that keeps
every slow pair in range, and which uniform divisors land one span of lookup distances on another.

No function or constant here returns or holds an answer: each checker judges by the properties that define the
answer (the first merge, found by exact rounding inside the checker; the pair whose frequency changes most in
radians; every slow pair inside its trained arc, and no smaller base would do; both ends of a span landing inside
the other), on cases the learner's function meets only while the checker runs.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from .. import rope_analysis, scaling
from ._core import float64_tensor, number, report, whole_number
from ._guard import ELEMENTS, answers_under_guard, stopped_verdict

__all__ = ["counter_merge", "stale_cache_pair", "one_base_in_range", "uniform_divisors"]


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

# Formats of p significant bits: float16 (11), float32 (24) and others torch has no dtype for, up to first merges
# hundreds of millions of positions in (p = 30).
_MERGE_BITS = (11, 13, 16, 20, 24, 30)
_MERGE_RTOL = 0.02  # an estimate within 2 % of the first merge


def counter_merge(answer: Callable[[int], Any] | None) -> bool | None:
    """answer(p) -> an estimate, within 2 %, of the first position i at which NoPE's counter 1/(i+1), rounded to a
    format of p significant bits (round to nearest, ties to even), equals the counter of position i + 1."""

    def rounded(i: int, bits: int) -> tuple[int, int]:
        """1/(i+1) rounded to `bits` significant bits, ties to even, exactly: (mantissa, exponent), normalised."""
        e = -(i + 1).bit_length() - bits + 1  # 2^(bits-1) <= 2^-e / (i+1) < 2^bits ... up to one step
        while True:
            q, r = divmod(1 << -e, i + 1)
            if q >= 1 << bits:
                e += 1
            elif q < 1 << (bits - 1):
                e -= 1
            else:
                break
        q += 2 * r > i + 1 or (2 * r == i + 1 and q % 2 == 1)
        return (q >> 1, e + 1) if q == 1 << bits else (q, e)

    def first_merge(bits: int) -> int:
        """Exactly, position by position from i + 1 = isqrt(2^(2 bits - 1)) - 2. No merge comes earlier: two numbers
        farther apart than the format's spacing never round to one, and before that point neighbouring counters
        are (below 2^(1-bits): (i+1)(i+2) < 2^(2 bits - 1); above, 1/(i+2) > 2^(1-bits), the spacing relative to
        the number). tests/test_check_ch07.py walks from 0 to confirm it for small formats."""
        i = max(0, math.isqrt(2 ** (2 * bits - 1)) - 3)
        while rounded(i, bits) != rounded(i + 1, bits):
            i += 1
        return i

    def run(fn):
        answers, stopped = answers_under_guard(fn, [(p,) for p in _MERGE_BITS], elements_per_case=ELEMENTS)
        if stopped is not None:
            (p,), why = stopped
            yield stopped_verdict(why, f"first_merge({p})", shortcut="estimate it from the spacing instead",
                                  loop=f"walks the positions one by one (near 2^{p}): estimate where merging starts "
                                       "from how the format spaces its numbers instead",
                                  grid="a search over positions; estimate it from how the format spaces its numbers")
            return
        got, want = {}, {}
        for (p,), raw in answers.items():
            value = number(raw)
            if value is None or not math.isfinite(value) or value <= 0:
                yield False, f"first_merge({p}): {raw!r:.60} is not a position (one positive number)"
                return
            got[p], want[p] = value, first_merge(p)
        ratio = {p: got[p] / want[p] for p in got}
        wrong = [p for p in got if abs(ratio[p] - 1) > _MERGE_RTOL]
        if not wrong:
            yield True, (f"within 2 % of the first merge for p = {', '.join(map(str, _MERGE_BITS))}: float16, float32 "
                         "and formats torch has no dtype for")
            return
        spread = max(ratio.values()) / min(ratio.values())
        if all(math.log2(ratio[p]) < -0.25 * p for p in wrong):
            yield False, ("your estimate grows like the square root of the positions it should reach: you compared "
                          "the step between neighbours with a fixed spacing, but a float's spacing shrinks with the "
                          "number it stores")
        elif spread < 1.06 and min(abs(math.log2(r)) for r in ratio.values()) > 0.2:
            yield False, ("your estimate is off by one constant factor for every p: the format's spacing, relative "
                          "to the number, is not the same everywhere between two powers of two; take it where the "
                          "counter is when neighbours start to merge")
        else:
            yield False, f"more than 2 % off the first merge at p = {', '.join(map(str, wrong))}"

    return report("Where NoPE's counter merges neighbours", answer, run,
                  "a floating-point format spaces its numbers relative to their size; compare that with how far "
                  "apart neighbouring counters are, relative to theirs.")


# ---------------------------------------------------------------- Exercise 2: the pair a stale KV cache hurts most

_RTOL = 1e-6  # relative: a float32 answer (7 significant digits) passes, a base 1e-4 off does not
_FLOAT_TIE = 1e-14  # relative: a few dozen ulps, what float64 resolves of the drift b1^-x - b2^-x near its peak

# (d, b1, b2): the LLaMA head of §2 with NTK's base at s = 8 and a milder step, a Llama-3-like base, the
# experiment's head, a wide head, and heads of 2e9 features (no array or loop over the pairs).
_STALE_CASES = ((128, 10000.0, 10000.0 * 8 ** (128 / 126)), (128, 10000.0, 15000.0), (64, 500000.0, 2000000.0),
                (16, 10000.0, 30000.0), (4096, 10000.0, 1000000.0), (2 * 10**9, 10000.0, 20000.0),
                (2 * 10**9, 500000.0, 50000000.0))


def stale_cache_pair(answer: Callable[[int, float, float], Any] | None) -> bool | None:
    """answer(d, b1, b2) -> the pair j (0-based) whose angle in the score drifts fastest with the key's position when
    the key was rotated with base b1 and the query with base b2 > b1: the j maximising b1^(-2j/d) - b2^(-2j/d)."""

    def drift(j: float, d: int, b1: float, b2: float) -> float:  # radians per position of the key
        return b1 ** (-2 * j / d) - b2 ** (-2 * j / d)

    def best(d: int, b1: float, b2: float) -> set[int]:
        """The pairs that drift fastest: every pair compared for a small head; for a huge one the two whole numbers
        around the smooth maximum (drift is one smooth bump in j)."""
        if d // 2 <= 10**5:
            rates = [drift(j, d, b1, b2) for j in range(d // 2)]
            top = max(rates)
            return {j for j, r in enumerate(rates) if r >= top * (1 - 1e-12)}
        peak = d / 2 * math.log(math.log(b2) / math.log(b1)) / math.log(b2 / b1)
        return {min(max(j, 0), d // 2 - 1) for j in (math.floor(peak), math.ceil(peak))}

    def fastest(got: int, d: int, b1: float, b2: float) -> bool:
        """got is one of the best pairs, or, for a huge head, a pair whose drift float64 cannot tell from the peak's
        (within _FLOAT_TIE relative: up to 15 of 10^9 pairs either side of it when d = 2e9)."""
        right = best(d, b1, b2)
        if got in right or d // 2 <= 10**5:
            return got in right
        return drift(got, d, b1, b2) >= max(drift(j, d, b1, b2) for j in right) * (1 - _FLOAT_TIE)

    def run(fn):
        answers, stopped = answers_under_guard(fn, _STALE_CASES, elements_per_case=ELEMENTS)
        if stopped is not None:
            (d, b1, b2), why = stopped
            yield stopped_verdict(why, f"worst_pair({d}, ...)", shortcut="an array over the pairs; find the pair "
                                  "without listing them",
                                  loop=f"runs a loop over the pairs ({d // 2:.0e} of them): find the pair without "
                                       "listing them",
                                  grid=f"an array over the pairs ({d // 2:.0e} of them): find the pair without listing "
                                       "them")
            return
        for (d, b1, b2), raw in answers.items():
            case = f"d={d}, b1={b1:g}, b2={b2:g}"
            got = whole_number(raw)
            if got is None or not 0 <= got < d // 2:
                yield False, f"{case}: {raw!r:.60} is not a pair index (a whole number from 0 to d/2 - 1)"
                return
            right = best(d, b1, b2)
            if fastest(got, d, b1, b2):
                continue
            if got == d // 2 - 1:
                yield False, (f"{case}: the slowest pair's frequency changes most *relative* to itself; the key's "
                              "angle is off by its position times the *absolute* change")
            elif got == 0:
                yield False, f"{case}: pair 0 turns by 1 radian per position whatever the base"
            elif any(abs(got - 2 * j) <= 1 for j in right):
                yield False, f"{case}: that is a feature index; pair j is features 2j and 2j + 1"
            else:
                yield False, f"{case}: another pair's angle drifts faster"
            return
        yield True, (f"the fastest-drifting pair for {len(_STALE_CASES)} heads, from 16 features to 2e9")

    return report("The pair a stale KV cache hurts most", answer, run,
                  "chapter 5: a score's angle in pair j is the key's angle minus the query's; here each was turned "
                  "with its own frequency.")


# ---------------------------------------------------------------- Exercise 3: one base for every pair

# (d, base, L0, L): the chapter's LLaMA numbers, a shorter head, Llama-3-like numbers, the experiment's head, L <= L0
# (nothing to do), and a head of 10^9 pairs: no array over the pairs fits, and no loop over them ends.
_BASE_CASES = ((128, 10000.0, 2048, 16384), (64, 10000.0, 4096, 32768), (128, 500000.0, 8192, 131072),
               (16, 10000.0, 64, 512), (64, 10000.0, 4096, 2048), (2 * 10**9, 500000.0, 8192, 131072))


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
                  "a base acts on each pair through an exponent that grows with the pair's index.")


# ---------------------------------------------------------------- Exercise 4: uniform divisors between two spans

# (lookups at test time, lookups in training), as (nearest, farthest) distances: the dictionary-first task at
# 128 and 512 tokens against its training lookups, the dictionary anywhere at 512, and two that barely fit / miss.
_SPAN_CASES = (((117, 126), (53, 62)), ((501, 510), (53, 62)), ((1, 510), (1, 62)), ((20, 30), (10, 15)),
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
                yield False, (f"{case}: you give a range, but no single divisor lands this whole span inside the "
                              "trained one")
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
                  "dividing by one number stretches or shrinks a span as a whole: what about the span does it keep?")
