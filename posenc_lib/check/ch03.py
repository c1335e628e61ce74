"""Checkers for notebooks/03_sinusoids.ipynb (sinusoidal position encodings).

Each checker takes the learner's answer (a function or a matrix), compares it with ``posenc_lib``
and prints what is right, what is wrong and a hint. None (or a function still raising
NotImplementedError) counts as not attempted (see _core for grading mode).

No answer is kept here: Exercise 1's positions are drawn anew at every check, Exercise 2's matrix is
judged by the scores it gives, and Exercise 3's counts are stored as salted digests (``_core.sealed``).
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, Iterator

import torch

from .. import absolute, angles, rope, rotary
from ..absolute import sinusoidal_positions
from ..angles import rope_frequencies
from ._core import Verdict, float64_tensor, number, report, sealed, whole_number
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["offset_from_codes", "offset_only_score", "slow_pairs"]

CLOSED_FORM_STEPS = 2_000  # Python lines for one case: a formula needs dozens, a search over offsets thousands


def _fresh_rng() -> random.Random:
    """The cases of a check are drawn from here, seeded by the operating system: no two checks see the same."""
    return random.Random()


def _code_builders() -> tuple[tuple[Any, str, str], ...]:
    """What builds the code of a chosen position, or turns one: the tools of a search over offsets."""
    import posenc_lib

    found = []
    for name in ("sinusoidal_positions", "rope_angles", "rope_matrix", "apply_rope"):
        for module in (posenc_lib, absolute, angles, rope, rotary):
            if hasattr(module, name):
                found.append((module, name, f"pl.{name}"))
    return tuple(found)


# Exercise 1: read the offset n - m back from the codes of m and n (d = 8, base 10000, real positions).
CODE_D, CODE_SPAN = 8, 3000


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


def _code_cases(rng: random.Random) -> list[tuple[float, float]]:
    """Seven (m, n) pairs of real positions up to 10^9 with 0 <= |n - m| < 3000, new at every check.

    Their kinds are fixed, so that each misconception shows at the same case every time: 1, n > m with
    the slowest pair's angle passing pi between the two; 2, n < m; 3, m = n; 4 to 7, anywhere. Every
    offset but case 3's is at least 0.1 away from a whole number.
    """
    slowest = 10000.0 ** (-(CODE_D - 2) / CODE_D)

    def offset(sign: int) -> float:
        return sign * (rng.randrange(500, CODE_SPAN - 10) + rng.uniform(0.1, 0.9))

    k = offset(+1)
    below_pi = rng.uniform(0.05, k * slowest - 0.05)  # the slowest angle of m sits this far below pi
    m = (2 * math.pi * rng.randrange(1, 150_000) + math.pi - below_pi) / slowest
    cases = [(m, m + k)]
    for low, high, sign in ((CODE_SPAN, 1e9, -1), (0, 1e9, 0), (0, 10, +1), (1e8, 1e9, -1), (0, 1e9, +1),
                            (CODE_SPAN, 1e9, -1)):
        m = rng.uniform(low, high)
        cases.append((m, m + offset(sign) if sign else m))
    return cases


def offset_from_codes(fn: Any) -> bool | None:
    """Exercise 1: fn(code_a, code_b) -> n - m, from the codes (8,) of two real positions m, n (|n - m| < 3000),
    read off the codes (building or turning codes of chosen positions is refused, and so is a loop)."""
    thetas = rope_frequencies(CODE_D, dtype=torch.float64).tolist()

    def run(f: Any) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(code_a, code_b), got {type(f).__name__}"
            return
        positions = _code_cases(_fresh_rng())
        cases = [(code_of(m), code_of(n)) for m, n in positions]
        answers, stopped = answers_under_guard(lambda i: f(*cases[i]), [(i,) for i in range(len(cases))],
                                               _code_builders(), steps_per_case=CLOSED_FORM_STEPS)
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function", shortcut="that tries positions or offsets one by "
                                  "one; read the offset off the two codes you are given",
                                  loop="runs a long loop (a search over offsets?): read the offset off the two "
                                       "codes instead")
            return
        for (i,), raw in answers.items():
            m, n = positions[i]
            got, k = number(raw), n - m
            where = f"pair of codes {i + 1} of {len(cases)}"
            if got is None:
                yield False, f"{where}: expected one number, got {type(raw).__name__}"
                return
            if abs(got - k) < 1e-3:
                continue
            if abs(got + k) < 1e-3 and i == 0:  # the first pair has n > m
                yield False, (f"{where}: you read m - n; the offset goes from the first code to the second, "
                              "n - m (key minus query, as everywhere in the course)")
            elif abs(got + k) < 1e-3:  # right so far for n > m, wrong sign now that n < m: |n - m|
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
        yield True, (f"right for {len(cases)} pairs of codes, drawn anew at this check, positions up to 10^9 and "
                     "not whole: the codes carry the offset as a turn of each pair, and one pair that never "
                     "completes a turn reads it without ambiguity")

    return report("the offset between two codes", fn, run,
                  "what does going k positions on do to each pair (§4), and after how many positions does a pair "
                  "look the same again?")


# Exercise 2: an A for which the position-position score p_m^T A p_n depends only on the offset k = n - m
# and tells a key before the query from one after it by its sign, within a context of SCORE_N positions.
SCORE_D, SCORE_N = 16, 64


def position_scores(a: torch.Tensor) -> torch.Tensor:
    """(SCORE_N, SCORE_N) matrix of p_m^T A p_n (query m, key n) over the sinusoidal codes, float64."""
    p = sinusoidal_positions(SCORE_N, SCORE_D, dtype=torch.float64)  # row m is p_m
    return p @ a @ p.T


def diagonal_spread(scores: torch.Tensor) -> float:
    """Largest max - min along any diagonal n - m = k: 0 when the score depends on the offset alone."""
    n = scores.shape[0]
    return max(float(scores.diagonal(k).max() - scores.diagonal(k).min()) for k in range(-(n - 1), n))


def offset_only_score(answer: Any) -> bool | None:
    """Exercise 2: a (16, 16) A with p_m^T A p_n a function s(n - m) of the offset alone, positive for every
    key before the query and negative for every key after it, in a context of 64 positions."""

    def run(a: Any) -> Iterator[Verdict]:
        a = float64_tensor(a)
        if a is None or a.shape != (SCORE_D, SCORE_D):
            yield False, f"A must be {SCORE_D}x{SCORE_D}, got shape {None if a is None else tuple(a.shape)}"
            return
        if not torch.isfinite(a).all():
            yield False, "A must hold finite numbers"
            return
        g = position_scores(a)
        scale = max(float(a.norm()), 1e-12)
        if diagonal_spread(g) > 1e-9 * scale * SCORE_D:
            yield False, ("the score changes along a diagonal n - m = k: it depends on where the pair sits, not "
                          "only on the offset; A must commute with every shift M_k")
            return
        yield True, "the score depends on the offset n - m alone"
        s = {k: float(g.diagonal(k)[0]) for k in range(-(SCORE_N - 1), SCORE_N)}  # s(k), k = n - m
        tiny = 1e-9 * scale
        past, future = [s[-k] for k in range(1, SCORE_N)], [s[k] for k in range(1, SCORE_N)]
        if max(abs(v) for v in s.values()) <= tiny:
            yield False, "your score is 0 at every offset: it tells nothing apart"
        elif all(abs(s[k] - s[-k]) <= tiny for k in range(1, SCORE_N)):
            yield False, ("s(k) = s(-k): your A scores a key k tokens before the query exactly like one k tokens "
                          "after it, as §6's plain dot product does")
        elif all(v > tiny for v in past) and all(v < -tiny for v in future):
            yield True, ("and its sign tells the direction: positive for every key before the query, negative "
                         "for every key after it")
        elif all(v < -tiny for v in past) and all(v > tiny for v in future):
            yield False, "the signs are the mirror of what is asked: positive for keys after the query"
        elif all(abs(s[k] + s[-k]) <= tiny for k in range(1, SCORE_N)):
            yield False, ("s(-k) = -s(k), good, but the sign changes among the keys on one side of the query: some "
                          "pair of your A turns by more than half a circle within 64 positions")
        else:
            yield False, ("part of your A still scores a key k tokens before the query like one k tokens after "
                          "it, and it wins at some offsets: the sign does not tell the direction")

    return report("a position score whose sign tells before from after", answer, run,
                  "what does exchanging the query and the key do to the score, and to A? And for how many "
                  "positions does one pair's sine keep its sign?")


# Exercise 3: find the bug in a builder; count, for any d, the pairs it makes slower than the correct slowest.
def buggy_sinusoids(n: int, d: int) -> torch.Tensor:
    """A sinusoidal table with one bug (Exercise 3 of chapter 3)."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    two_j = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / 10000 ** (2 * two_j / d)
    table = torch.zeros(n, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table


# d -> the sealed count (``sealed(count, f"ch03.slow_pairs/{d}")``), and the sealed counts one too many and one
# too few (the boundary pair decided the wrong way). Small, large and huge widths, d/2 even and odd.
SLOW_CASES: dict[int, tuple[str, tuple[str, str]]] = {
    64: ("54b4830fc50a1ec1fdffd65f", ("496dc1fe97cd3a124c224e2b", "99813d2f2ac7484a84fdcf41")),
    6: ("577453e37d971c7c7e9c191a", ("6bf413a9798772f4ce27cd8d", "553d2dbe43d2cbc377aa6119")),
    10: ("ad326a3823dabfc56e1fa8db", ("4822ea48961911dd62d205a1", "caca3975a6ce12f8fc05d06f")),
    12: ("37e9085c3e1c924b14a16571", ("69c0072ed934a57f36e416ce", "1e3c1cbaa38adf933e081ec5")),
    1_000_002: ("3264f4e69cb66837f5920608", ("738570277462471e1cee5099", "989155041fcdcc2be8f2dae8")),
    200_000_000_006: ("2001c3e9b875e2d67718e064", ("b8be81847f4fe2fa216c4aa3", "d3d73de407d8e91d1cc81fe6")),
    4_000_000_000_000: ("8f8a50cd03632e8989e38e4a", ("139090006ba13d681f907742", "bc5cec1ea102dbd7ca5337a6")),
}


def _slow_seal(count: int, d: int) -> str | None:
    return sealed(count, f"ch03.slow_pairs/{d}")


def _builders_of_the_table() -> tuple[tuple[Any, str, str], ...]:
    import sys

    return ((sys.modules[__name__], "buggy_sinusoids", "check.ch03.buggy_sinusoids"),)


def slow_pairs(fn: Any) -> bool | None:
    """Exercise 3: fn(d) -> how many pairs of buggy_sinusoids(n, d) turn more slowly than the correct table's
    slowest pair, 10000^(-(d-2)/d) radian per position, for any even d (up to 4e12: no table is built)."""

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(d), got {type(f).__name__}"
            return
        widths = list(SLOW_CASES)
        answers, stopped = answers_under_guard(f, [(d,) for d in widths], _builders_of_the_table(),
                                               steps_per_case=CLOSED_FORM_STEPS)
        if stopped is not None:
            yield stopped_verdict(stopped[1], f"fn({stopped[0][0]})",
                                  shortcut="count from the builder's formula, not from its table (the checker "
                                           "asks for widths no table can have)",
                                  loop="runs a long loop over the pairs: compare the two exponents instead")
            return
        for (d,), raw in answers.items():
            got = whole_number(raw)
            right, off_by_one = SLOW_CASES[d]
            if got is None:
                yield False, f"fn({d}) must be a whole number of pairs, got {raw!r}"
                return
            if _slow_seal(got, d) == right:
                continue
            if got == 0:
                yield False, f"fn({d}) = 0 would mean the builder is right: compare its exponent with §1's"
            elif got >= d // 2:
                yield False, f"fn({d}): not every pair: pair 0 turns one radian per position in any such table"
            elif _slow_seal(got, d) in off_by_one:
                yield False, (f"fn({d}) is off by one: decide for the pair nearest the correct slowest one "
                              "whether it is slower, exactly as slow, or faster")
            else:
                yield False, f"fn({d}) is not that count: write the buggy θ_j as a power of 10000 and compare exponents"
            return
        yield True, (f"right for d = {', '.join(f'{d:,}' for d in widths)}: the exponent counts the 2 twice, so "
                     "the frequencies fall twice as fast, and the slow half of the pairs sits below the correct "
                     "slowest one (those columns are almost constant: wasted features)")

    return report("how many pairs of the buggy table are too slow, for any d", fn, run,
                  "read the builder against §1's formula one symbol at a time: what does each variable hold?")
