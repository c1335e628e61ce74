"""Checkers for notebooks/07_beyond.ipynb: NoPE's counter in low precision, where dynamic NTK meets static
NTK, a base that interpolates a chosen pair, the smallest per-pair divisors for a longer context."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ..angles import rope_frequencies
from ..scaling import scaled_rope_frequencies
from ._core import close, float64_tensor, number, report, whole_number

__all__ = ["counter_merge", "dynamic_ntk_length", "ntk_base_for_pair", "smallest_divisors"]


def _first_merge(dtype: torch.dtype, limit: int = 1 << 16) -> int:
    """The first position i whose causal-average counter 1/(i+1) rounds (in dtype) to that of i + 1."""
    counter = (1 / torch.arange(1, limit + 2, dtype=torch.float64)).to(dtype)
    return int((counter[:-1] == counter[1:]).nonzero()[0])


def counter_merge(answer: Callable[[torch.dtype], Any]) -> bool | None:
    """answer(dtype) -> int: the first position i at which NoPE's counter 1/(i+1), rounded to dtype,
    equals the counter of position i + 1."""

    def run(fn):
        for dtype in (torch.bfloat16, torch.float16):
            want, raw = _first_merge(dtype), fn(dtype)
            got = whole_number(raw)
            name = str(dtype).removeprefix("torch.")
            if got is None:
                yield False, f"{name}: {raw!r} is not a position (a whole number)"
            elif got == want:
                yield True, f"{name}: right"
            elif got > want:
                yield False, f"{name}: {got} is too late, an earlier pair of neighbours already rounds to one number"
            else:
                yield False, f"{name}: {got} is too early, positions {got} and {got + 1} still differ in {name}"

    return report("Where NoPE's counter merges neighbours", answer, run,
                  "neighbours differ by a relative 1/(i+2); how many significant bits does each format keep, "
                  "and how small a relative gap can it still see?")


def dynamic_ntk_length(answer: Callable[[int, float], Any]) -> bool | None:
    """answer(L0, factor) -> float: the input length L at which dynamic NTK (transformers' rule, scale
    factor * L / L0 - (factor - 1)) uses the same frequencies as static NTK with that factor."""

    def run(fn):
        for L0, s in _DYNAMIC_CASES:
            want = L0 * (2 - 1 / s)  # factor * L / L0 - (factor - 1) = factor
            raw = fn(L0, s)
            got = number(raw)
            case = f"L0 = {L0}, s = {s:g}"
            if got is None:
                yield False, f"{case}: {raw!r} is not a length (one number)"
            elif close(got, want, atol=1e-6, rtol=1e-9):
                yield True, f"{case}: right"
            elif close(got, s * L0, atol=1e-6):
                yield False, (f"{case}: {got:g} is s·L0, where static NTK is meant to be used; dynamic NTK's "
                              f"scale there is already larger than s (it keeps growing with L)")
            elif close(got, L0, atol=1e-6):
                yield False, f"{case}: {got:g} is where dynamic NTK starts to stretch (scale 1), not where it reaches s"
            else:
                yield False, f"{case}: {got:g} is wrong"

    return report("Where dynamic NTK equals static NTK", answer, run,
                  "dynamic NTK picks its own stretch from the input's length (§2's table); when has that stretch "
                  "grown to the static one, and is that before or after s·L0?")


# (L0, factor): the chapter's LLaMA numbers, Llama-3-like, a factor of 2, a factor of 1 (no stretch at all).
_DYNAMIC_CASES = ((2048, 8.0), (8192, 4.0), (4096, 2.0), (4096, 1.0))


# (d, base, factor, j): the chapter's head and pair 41, another pair, a short head, a Llama-3-like base.
_PAIR_BASE_CASES = ((128, 10000.0, 8.0, 41), (128, 10000.0, 8.0, 20), (16, 10000.0, 2.0, 3), (128, 500000.0, 4.0, 50))


def ntk_base_for_pair(answer: Callable[[int, float, float, int], Any]) -> bool | None:
    """answer(d, base, factor, j) -> float: the base b' under which pair j's frequency is exactly theta_j / factor
    (NTK's own base does this for the slowest pair, j = d/2 - 1, only)."""

    def run(fn):
        for d, base, s, j in _PAIR_BASE_CASES:
            want = base * s ** (d / (2 * j))  # (b'/b)^(-2j/d) = 1/s
            raw = fn(d, base, s, j)
            got = number(raw)
            case = f"d = {d}, base = {base:g}, s = {s:g}, pair j = {j}"
            if got is None:
                yield False, f"{case}: {raw!r:.60} is not a base (one number)"
            elif close(got, want, atol=0, rtol=1e-6):
                yield True, f"{case}: right"
            elif close(got, base * s ** (d / (d - 2)), atol=0, rtol=1e-6):
                yield False, (f"{case}: that is NTK's own base, which divides the slowest pair by s; "
                              "the pair asked for sits at another exponent")
            elif got <= base:
                yield False, f"{case}: a base no larger than b leaves every pair as fast or faster, never slower"
            elif any(close(got, base * s ** (d / (2 * k)), atol=0, rtol=1e-6) for k in (j - 1, j + 1) if k > 0):
                yield False, f"{case}: the base of a neighbouring pair: θ_j = b^(-2j/d) counts pairs from j = 0"
            elif close(got, base * s ** (2 * j / d), atol=0, rtol=1e-6):
                yield False, (f"{case}: the exponent is upside down: that base slows pair j by s^(4j²/d²), "
                              "not by s")
            elif close(got, base * s, atol=0, rtol=1e-6):
                yield False, (f"{case}: multiplying the base by s slows pair j by s^(2j/d) only: a base change "
                              "acts through an exponent")
            else:
                yield False, f"{case}: {got:.6g} slows pair j by another factor than s"

    return report("A base that interpolates a chosen pair", answer, run,
                  "NTK's base is the one that lands a particular pair exactly on the interpolated speed; what in "
                  "§2's ratio singles that pair out, and what would single out yours?")


# (d, base, L0, L): the chapter's numbers, a shorter head, Llama-3-like numbers, and L <= L0 (nothing to do).
_DIVISOR_CASES = ((128, 10000.0, 2048, 16384), (64, 10000.0, 4096, 32768), (128, 500000.0, 8192, 131072),
                  (64, 10000.0, 4096, 2048))


def smallest_divisors(answer: Callable[[int, float, int, int], Any]) -> bool | None:
    """answer(d, base, L0, L) -> (d // 2,): per pair the smallest kappa_j >= 1 such that, with frequency
    theta_j / kappa_j, every distance 0 .. L-1 gives an angle that training (distances 0 .. L0-1, frequency
    theta_j) already showed or, for a pair that never completed a turn, inside its trained arc."""

    def run(fn):
        for d, base, L0, L in _DIVISOR_CASES:
            theta = rope_frequencies(d, base=base, dtype=torch.float64)
            got = fn(d, base, L0, L)
            kappa = float64_tensor(got)
            case = f"d={d}, base={base:g}, L0={L0}, L={L}"
            if kappa is None or kappa.shape != (d // 2,):
                yield False, f"{case}: expected d/2 = {d // 2} divisors, got {got!r:.60}"
                continue
            turned = L0 * theta >= 2 * math.pi
            arc_end = (L0 - 1) * theta  # the largest trained angle of a pair that never turned
            reach = (L - 1) * theta / kappa
            problems = []
            if bool((kappa < 1 - 1e-12).any()):
                problems.append("a divisor below 1 speeds a pair up")
            if bool((kappa[turned] != 1).any()):
                problems.append("pairs that turned in training are slowed although they saw every angle")
            slow = ~turned
            if bool((reach[slow] > arc_end[slow] * (1 + 1e-9)).any()):
                problems.append("a slow pair still reaches past its trained arc at distance L - 1")
            elif bool(((kappa[slow] > 1 + 1e-12) & (reach[slow] < arc_end[slow] * (1 - 1e-9))).any()):
                problems.append("a slow pair is slowed more than needed")
            yield not problems, f"{case}: " + ("right" if not problems else "; ".join(problems))

    return report("The smallest divisor per pair", answer, run,
                  "which pairs have already seen every angle in training? For the others, what is the largest "
                  "angle they will meet, and the largest they met?")
