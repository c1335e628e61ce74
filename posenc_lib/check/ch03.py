"""Checkers for notebooks/03_sinusoids.ipynb (sinusoidal position encodings).

Each checker takes the learner's answer (a number or a function), compares it with
``posenc_lib`` and prints what is right, what is wrong and a hint. None (or a function
still raising NotImplementedError) counts as not attempted (see _core for grading mode).
"""
from __future__ import annotations

import math
from typing import Any, Iterator

import torch

from ..absolute import sinusoidal_positions
from ..angles import rope_frequencies
from ._core import Verdict, close, float64_tensor, number, report, whole_number

__all__ = ["offset_from_codes", "offset_only_score", "slow_pairs"]


def _f64_freqs(d: int, base: float = 10000.0) -> torch.Tensor:
    return rope_frequencies(d, base=base, dtype=torch.float64)


# Exercise 1: read the offset q - p back from the codes of p and q (d = 8, base 10000, real positions).
CODE_D = 8
CODE_PAIRS = ((3.0, 5.5), (1000.75, 12.5), (123_456.5, 125_678.25), (987_654_321.125, 987_651_500.5), (42.0, 42.0),
              (500_000_000.3, 500_001_234.867), (2.0, 2999.9))  # (p, q): |q - p| < 3000, p up to 10^9


def code_of(position: float, d: int = CODE_D) -> torch.Tensor:
    """The sinusoidal code of a real position, interleaved (sin, cos) per pair, float64 (written out here)."""
    out = []
    for j in range(d // 2):
        angle = position * 10000.0 ** (-2 * j / d)
        out += [math.sin(angle), math.cos(angle)]
    return torch.tensor(out, dtype=torch.float64)


def _wrapped(angle: float) -> float:
    """angle brought into (-pi, pi]."""
    return angle - 2 * math.pi * math.ceil((angle - math.pi) / (2 * math.pi))


def offset_from_codes(fn: Any) -> bool | None:
    """Exercise 1: fn(code_a, code_b) -> q - p, from the codes (8,) of two real positions p, q (|q - p| < 3000)."""
    thetas = _f64_freqs(CODE_D).tolist()

    def run(f: Any) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(code_a, code_b), got {type(f).__name__}"
            return
        for n, (p, q) in enumerate(CODE_PAIRS, 1):
            raw = f(code_of(p), code_of(q))
            got, k = number(raw), q - p
            where = f"pair of codes {n} of {len(CODE_PAIRS)}"
            if got is None:
                yield False, f"{where}: expected one number, got {type(raw).__name__}"
                return
            if abs(got - k) < 1e-3:
                continue
            if abs(got + k) < 1e-3 and n == 1:  # the first pair has q > p
                yield False, (f"{where}: you read p - q; the offset goes from the first code to the second, "
                              "q - p (key minus query, as everywhere in the course)")
            elif abs(got + k) < 1e-3:  # right so far for q > p, wrong sign now that q < p: |q - p|
                yield False, (f"{where}: right size, wrong sign: whatever tells you the size here cannot tell "
                              "which code comes first (the dot product of two codes, §6, is the same for k and -k)")
            elif abs(got - round(k)) < 1e-3:
                yield False, f"{where}: a whole number, but positions here are real numbers, and so is their offset"
            elif any(abs(got - _wrapped(k * t) / t) < 1e-3 for t in thetas):
                yield False, (f"{where}: you read a pair whose angle repeats within 3000 positions: its turn is "
                              "only known up to whole circles")
            elif any(abs(got - k - c * 2 * math.pi / thetas[-1]) < 1e-3 for c in (-1, 1)):
                yield False, (f"{where}: off by one whole turn of the slowest pair: a difference of two angles is "
                              "only known up to 2π")
            else:
                yield False, f"{where}: not the offset between the two positions"
            return
        yield True, (f"right for {len(CODE_PAIRS)} pairs of codes, positions up to 10^9 and not whole: the codes "
                     "carry the offset as a turn of each pair, and one pair that never completes a turn reads it "
                     "without ambiguity")

    return report("the offset between two codes", fn, run,
                  "what does going k positions on do to each pair (§4), and after how many positions does a pair "
                  "look the same again?")


# Exercise 2: a W for which the position-position score p_m W p_n^T depends only on the offset n - m
# and is largest at n - m = PEAK (the key four tokens before the query), for d = SCORE_D.
SCORE_D, SCORE_N, PEAK, SCORE_SPAN = 16, 64, -4, 20


def position_scores(w: torch.Tensor) -> torch.Tensor:
    """(SCORE_N, SCORE_N) matrix of p_m W p_n^T over the sinusoidal codes (row vectors), float64."""
    p = sinusoidal_positions(SCORE_N, SCORE_D, dtype=torch.float64)
    return p @ w @ p.T


def diagonal_spread(scores: torch.Tensor) -> float:
    """Largest max - min along any diagonal n - m = k: 0 when the score depends on the offset alone."""
    n = scores.shape[0]
    return max(float(scores.diagonal(k).max() - scores.diagonal(k).min()) for k in range(-(n - 1), n))


def offset_only_score(answer: Any) -> bool | None:
    """Exercise 2: a (16, 16) W with p_m W p_n^T a function of n - m alone, largest at n - m = -4
    (over -20 .. 20)."""

    def run(w: Any) -> Iterator[Verdict]:
        w = float64_tensor(w)
        if w is None or w.shape != (SCORE_D, SCORE_D):
            yield False, f"W must be {SCORE_D}x{SCORE_D}, got shape {None if w is None else tuple(w.shape)}"
            return
        g = position_scores(w)
        scale = max(float(w.norm()), 1e-12)
        if diagonal_spread(g) > 1e-9 * scale * SCORE_D:
            symmetric = " (a symmetric W is not enough)" if close(w, w.T, atol=1e-8, rtol=1e-5) else ""
            yield False, ("the score changes along a diagonal n - m = k: it depends on where the pair sits, not "
                          f"only on the offset{symmetric}; W must commute with every shift M_k")
            return
        yield True, "the score depends on the offset n - m alone"
        ks = list(range(-SCORE_SPAN, SCORE_SPAN + 1))
        s = torch.stack([g.diagonal(k)[0] for k in ks])
        top = ks[int(s.argmax())]
        unique = bool((s.max() - s[[i for i, k in enumerate(ks) if k != top]]).min() > 1e-6 * scale)
        if top == PEAK and unique:
            yield True, "and it is largest four tokens back: a fixed rotation of the key's code toward the query's"
        elif close(s, s.flip(0), atol=1e-9 * scale, rtol=1e-5):
            yield False, ("s(k) = s(-k): your W cannot tell before from after (a W that commutes and is symmetric "
                          "never can)")
        elif top == -PEAK:
            yield False, "the largest score is at the mirror offset: check on which side of W the key's code stands"
        else:
            yield False, "offset-only, but the largest score is at another offset"

    return report("a W whose position score depends only on the offset and peaks four tokens back", answer, run,
                  "p_(m+k) = M_k p_m (column form): write p_m W p_n^T with p_n expressed through p_m, and ask "
                  "which W make the result forget m and favour one offset")


# Exercise 3: find the bug in a builder; count the pairs it makes slower than the correct slowest pair.
BUG_D = 64


def buggy_sinusoids(n: int, d: int) -> torch.Tensor:
    """A sinusoidal table with one bug (Exercise 3 of chapter 3)."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    two_j = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / 10000 ** (2 * two_j / d)
    table = torch.zeros(n, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table


def too_slow_pairs(d: int = BUG_D) -> int:
    """How many pairs of buggy_sinusoids turn more slowly than the slowest pair of the correct table,
    read off the table itself (the angle of each pair at position 1)."""
    row = buggy_sinusoids(2, d)[1]
    theta = torch.atan2(row[0::2], row[1::2])
    return int((theta < _f64_freqs(d)[-1]).sum())


def slow_pairs(answer: Any) -> bool | None:
    """Exercise 3: the number of pairs of buggy_sinusoids(n, 64) that turn more slowly than the paper's
    slowest pair, 10000^(-62/64) radian per position."""

    def run(ans: Any) -> Iterator[Verdict]:
        got = whole_number(ans)
        if got is None:
            yield False, f"answer must be a whole number of pairs, got {ans!r}"
            return
        want = too_slow_pairs()
        if got == want:
            yield True, ("right: the exponent counts the 2 twice, so the frequencies fall twice as fast and the "
                         "slow half of the pairs sit below the paper's slowest one (those columns are almost "
                         "constant: wasted features)")
        elif got == 0:
            yield False, "0 would mean the builder is right: compare its exponent with §1's formula term by term"
        elif got >= BUG_D // 2:
            yield False, f"not all {BUG_D // 2}: pair 0 turns one radian per position in any such table"
        elif abs(got - want) == 1:
            yield False, "close: decide for the pair at the boundary whether it is slower or exactly as slow"
        else:
            yield False, "not that many: write the buggy θ_j as a power of 10000 and compare exponents"

    return report(f"how many pairs of the buggy table (d = {BUG_D}) are too slow", answer, run,
                  "read the builder against §1's formula one symbol at a time: what does each variable hold?")
