"""Checkers for notebooks/07_beyond.ipynb: where NoPE's counter starts to merge neighbours in a format of p
significant bits, where (by any route differentiable in the two bases: torch operations all the way) the drift of
a stale KV cache under dynamic NTK peaks, and how far a single base can extend the context when it may slow the
pairs that turned in training by at most c.

No function or constant here returns or holds an answer: each checker judges by the properties that define the
answer (the first merge, found by exact rounding inside the checker; the drift's slope vanishing at the answer and
the answer's gradient matching the peak's; both limits met at the answer and broken just past it), on cases the
learner's function meets only while the checker runs.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from .. import rope_analysis, scaling
from ._core import number, report
from ._guard import ELEMENTS, answers_under_guard, stopped_verdict

__all__ = ["counter_merge", "stale_cache_pair", "one_base_in_range"]


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

# A Newton step from the answer, relative to it: the closed form and a converged Newton search on the slope are both
# ~1e-15 off (the prompt allows both: both are differentiable in the bases); a ternary search on the
# drift itself stops ~1e-8 off, where float64 can no longer order two drifts.
_PEAK_RTOL = 1e-9
_GRAD_RTOL = 1e-6  # the answer's gradient against the peak's, relative

# (b1, b2), b1 < b2: NTK's base at s = 8 for the LLaMA head of §2 and a milder step, Llama-3-like bases, the
# experiment's head's, steps from 2x to 10^11 x, and small bases; passed as two float64 tensors, all at once.
_STALE_BASES = ((10000.0, 10000.0 * 8 ** (128 / 126)), (10000.0, 15000.0), (500000.0, 2000000.0),
                (10000.0, 30000.0), (10000.0, 1000000.0), (500000.0, 50000000.0), (10.0, 1e12), (2.0, 30.0),
                (1000.0, 1500.0))


def stale_cache_pair(answer: Callable[[torch.Tensor, torch.Tensor], Any] | None) -> bool | None:
    """answer(b1, b2) -> x, elementwise over float64 tensors of bases b1 < b2: the place x = 2j/d (as a real number)
    where the drift b1^-x - b2^-x, radians per position of a key rotated with b1 against a query rotated with b2,
    peaks. Judged by the peak's two properties: the drift's slope in x vanishes at x, and x moves with the bases as
    the peak does (its gradient, by the implicit function theorem, against autograd through the answer)."""

    def slope(x: torch.Tensor, b1: torch.Tensor, b2: torch.Tensor) -> torch.Tensor:  # d drift / dx
        return b2.log() * b2 ** -x - b1.log() * b1 ** -x

    def run(fn):
        b1 = torch.tensor([b for b, _ in _STALE_BASES], dtype=torch.float64, requires_grad=True)
        b2 = torch.tensor([b for _, b in _STALE_BASES], dtype=torch.float64, requires_grad=True)
        answers, stopped = answers_under_guard(fn, [(b1, b2)], elements_per_case=ELEMENTS)
        if stopped is not None:
            yield stopped_verdict(stopped[1], "drift_peak(b1, b2)", shortcut="find where the drift stops rising",
                                  loop="runs a long search: where does the drift stop rising?",
                                  grid="a grid over x cannot reach float64 precision: where does the drift stop "
                                       "rising?")
            return
        x = answers[(b1, b2)]
        if not isinstance(x, torch.Tensor) or x.shape != b1.shape or not x.is_floating_point():
            got = f"a tensor of shape {tuple(x.shape)}" if isinstance(x, torch.Tensor) else type(x).__name__
            yield False, (f"drift_peak returned {got}: expected a float tensor of the bases' shape "
                          f"({len(_STALE_BASES)},), computed from b1 and b2 with torch operations")
            return
        value = x.detach().to(torch.float64)
        if not torch.isfinite(value).all():
            yield False, "drift_peak returned a value that is not finite"
            return
        xs = value.clone().requires_grad_(True)
        g = slope(xs, b1.detach(), b2.detach())
        (g_x,) = torch.autograd.grad(g.sum(), xs)  # the drift's curvature at x, per base pair
        newton = (g / g_x).detach()  # how far x is from the peak, to first order
        off = newton.abs() > _PEAK_RTOL * value.abs().clamp_min(1e-300)
        if off.any():
            if (value > 0.99).all():
                yield False, ("your x is the slowest pair: its frequency changes most *relative* to itself; the "
                              "key's angle is off by its position times the *absolute* change")
            elif (value.abs() < 1e-6).all():
                yield False, "x = 0 is pair 0, which turns by 1 radian per position whatever the base"
            else:
                yield False, (f"for {int(off.sum())} of {len(_STALE_BASES)} base pairs the drift is not at its peak "
                              "at your x (to float64 precision)")
            return
        if not x.requires_grad:
            yield False, ("your x is the peak, but it carries no gradient with respect to b1 and b2: the answer "
                          "must be differentiable in the bases (torch operations on b1 and b2 all the way), so a "
                          "search that only compares values is refused by design")
            return
        got = torch.autograd.grad(x.sum(), (b1, b2), allow_unused=True)
        # implicit function theorem on slope(x, b1, b2) = 0: dx/db = -(d slope/db) / (d slope/dx)
        bb1, bb2 = b1.detach().clone().requires_grad_(True), b2.detach().clone().requires_grad_(True)
        want = torch.autograd.grad(slope(value, bb1, bb2).sum(), (bb1, bb2))
        want = [-w / g_x for w in want]
        for name, have, w in zip(("b1", "b2"), got, want):
            if have is None or not torch.allclose(have.to(torch.float64), w, rtol=_GRAD_RTOL, atol=0):
                yield False, (f"your x is the peak, but its gradient with respect to {name} is not the peak's: "
                              "an expression that equals the peak for every pair of bases has the peak's gradient; "
                              "the answer must follow the bases through torch operations all the way, by design")
                return
        yield True, (f"the peak, to float64 precision, for {len(_STALE_BASES)} pairs of bases from 2 to 10^12, and it "
                     "moves with the bases as the peak does")

    return report("The pair a stale KV cache hurts most", answer, run,
                  "chapter 5: a score's angle in pair j is the key's angle minus the query's; here each was turned "
                  "with its own frequency. Where does a smooth bump peak?")


# ---------------------------------------------------------------- Exercise 3: how far one base can reach

_REACH_TOL = 1e-9  # the limits, relative: a float64 answer meets them to ~1e-15
_REACH_STEP = 1e-6  # a context this much longer (relative) must break them

# (d, base, L0, c): the chapter's LLaMA head with c = 2 and c = 8, a shorter head, Llama-3-like numbers, the
# experiment's head, c = 1 (no pair may slow), and a head of 10^9 pairs: no array over the pairs fits, no loop ends.
_REACH_CASES = ((128, 10000.0, 2048, 2.0), (128, 10000.0, 2048, 8.0), (64, 10000.0, 4096, 3.0),
                (128, 500000.0, 8192, 4.0), (16, 10000.0, 64, 2.0), (64, 10000.0, 4096, 1.0),
                (2 * 10**9, 500000.0, 8192, 4.0))


def one_base_in_range(answer: Callable[[int, float, int, float], Any] | None) -> bool | None:
    """answer(d, base, L0, c) -> the largest L for which some base b' >= base keeps every pair that never completed
    a turn in training (distances 0 .. L0-1) inside its trained arc at every distance up to L - 1, while slowing no
    pair that did complete one by more than a factor c. Judged by the two limits: at the answer some base meets
    both, at an answer 1e-6 longer none does."""

    def pairs(d: int, base: float, L0: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(pairs that turned, pairs that never did): all of them for a small head; for a head of 10^9 pairs the
        ends of each group (a base slows pair j by a factor that grows with j, so the ends decide)."""
        first, last = 0, d // 2  # the first pair that never turned, by bisection on a monotone predicate
        while first < last:
            mid = (first + last) // 2
            first, last = (first, mid) if L0 * base ** (-2 * mid / d) < 2 * math.pi else (mid + 1, last)
        if d // 2 <= 10**5:
            return (torch.arange(0, first, dtype=torch.float64), torch.arange(first, d // 2, dtype=torch.float64))
        return (torch.tensor([0.0, first - 1.0], dtype=torch.float64),
                torch.tensor([first, d // 2 - 1.0], dtype=torch.float64))

    def fits(d: int, base: float, L0: int, c: float, L: float) -> bool:
        """Some base meets both limits: the smallest base that keeps every slow pair in its arc (log of b'/b) slows
        no turned pair by more than c."""
        turned, slow = pairs(d, base, L0)
        need = max(0.0, math.log((L - 1) / (L0 - 1)))  # each slow pair's angle must shrink by this much (log)
        log_ratio = (need * d / (2 * slow)).max().item()  # ln(b'/b): the smallest that serves every slow pair
        return bool((2 * turned / d * log_ratio <= math.log(c) + _REACH_TOL).all())

    def slip(d: int, base: float, L0: int, c: float, got: float, whole: bool) -> bool:
        """Two slips of the derivation: `whole` the lengths L and L0 used for the distances L - 1 and L0 - 1, else the
        real-valued place j* = d/2 log(L0 / 2 pi) / log(base) used for the two neighbouring pairs around it."""
        j = d / 2 * math.log(L0 / (2 * math.pi)) / math.log(base)
        if whole:
            j = math.floor(j) + 1
            return math.isclose(got, L0 * c ** (j / (j - 1)), rel_tol=1e-9) if j > 1 else False
        return any(math.isclose(got, 1 + (L0 - 1) * c ** e, rel_tol=1e-9) for e in ((j + 1) / j, j / (j - 1))
                   if math.isfinite(e))

    def run(fn):
        answers, stopped = answers_under_guard(fn, _REACH_CASES, _library_shortcuts())
        if stopped is not None:
            case, why = stopped
            yield stopped_verdict(why, f"longest_context{case}", shortcut="derive the length instead",
                                  loop=f"runs a loop over the pairs ({case[0] // 2:.0e} of them): which pairs "
                                       "decide?")
            return
        for (d, base, L0, c), raw in answers.items():
            got = number(raw)
            case = f"d={d}, base={base:g}, L0={L0}, c={c:g}"
            if got is None or not math.isfinite(got) or got < L0 * (1 - _REACH_TOL):
                yield False, f"{case}: {raw!r:.60} is not a context length of at least L0"
                return
            too_long = not fits(d, base, L0, c, got * (1 - _REACH_TOL))
            if too_long or fits(d, base, L0, c, got * (1 + _REACH_STEP)):
                turned, slow = pairs(d, base, L0)
                if too_long and math.isclose(got, 1 + (L0 - 1) * c ** ((d // 2 - 1) / (slow[0].item() - 1)),
                                             rel_tol=1e-6):
                    yield False, (f"{case}: you kept the slowest pair in its arc; it is the pair a base slows most, "
                                  "not the one that limits the others")
                elif slip(d, base, L0, c, got, whole=False):
                    yield False, (f"{case}: your pairs are not whole numbers: the two limits fall on actual pairs, "
                                  "not on the real-valued place where a pair would just complete a turn")
                elif slip(d, base, L0, c, got, whole=True):
                    yield False, (f"{case}: your length counts one distance too many: a context of L tokens "
                                  "reaches distances up to L - 1, and training's up to L0 - 1")
                elif too_long:
                    yield False, (f"{case}: the base this context needs slows a pair that turned in training by "
                                  "more than c")
                else:
                    yield False, f"{case}: some base meets both limits at a longer context too"
                return
        yield True, (f"the longest context for {len(_REACH_CASES)} heads, from 16 features to 2e9")

    return report("How far one base can reach", answer, run,
                  "a base slows neighbouring pairs by nearly the same factor.")
