"""Checkers for notebooks/03_sinusoids.ipynb (sinusoidal position encodings).

Each checker takes the learner's answer (a function or a matrix), compares it with ``posenc_lib``
and prints what is right, what is wrong and a hint. None (or a function still raising
NotImplementedError) counts as not attempted (see _core for grading mode).

No answer is kept here, not even as a digest: every exercise draws its cases anew at each check. Exercise 1's
offsets are judged against the positions drawn (which the answer cannot reach: the routes to the checker's frames are refused
while it runs), Exercise 2's matrix by the properties that define it
(it commutes with the shift, and what it leaves of A has nothing along any matrix that does), and
Exercise 3's count (its fix of the builder is an ungraded warm-up, with no checker: §1 answers it) by the builder's
exponent at two pairs only (the first the count calls slow, and the one before it),
at widths up to 10^12 where no table can be built.
"""
from __future__ import annotations

import math
import random
import sys
from typing import Any, Callable, Iterator

import torch

from .. import absolute, angles, rope, rotary
from ..absolute import sinusoidal_positions
from ..angles import rope_frequencies
from ._core import Verdict, float64_tensor, number, report, whole_number
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["offset_from_codes", "offset_only_score", "slow_pairs"]

CLOSED_FORM_STEPS = 2_000  # Python lines for one case: a formula needs dozens, a short search on the slowest pair
#                            (a coarse scan then a bisection) hundreds; trying every offset, 2 10^9 of them, is
#                            out of reach even at C speed (map, numpy), which is why the span is that wide
CLOSED_FORM_ELEMENTS = 10_000  # tensor elements for one case of Exercise 1: a formula touches dozens, a grid over
#                                a few thousand offsets at least twice as many (the grid and its scores: numpy's
#                                element-wise operators are counted too, operators=True). Results of one element are free
#                                (scalars=False): a short search that indexes the codes in a loop makes one per
#                                index, and the step budget already bounds how many a loop makes. The memory
#                                measured with it (traced, 64 bytes an element) leaves room for the Python objects
#                                such a loop allocates (130 kB at most in the tests)


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


# Exercise 1: read the offset n - m back from the codes of m and n (d = 8, base 10^12, real positions up to 10^10,
# |n - m| < 10^9: 2 10^9 whole offsets, too many to try one by one even in C, cold read 24).
CODE_D, CODE_BASE, CODE_SPAN, CODE_MAX = 8, 1e12, 10**9, 1e10


def code_of(position: float, d: int = CODE_D, base: float = CODE_BASE) -> torch.Tensor:
    """The sinusoidal code of a real position, interleaved (sin, cos) per pair, float64 (written out here)."""
    out = []
    for j in range(d // 2):
        angle = position * base ** (-2 * j / d)
        out += [math.sin(angle), math.cos(angle)]
    return torch.tensor(out, dtype=torch.float64)


def _wrapped(angle: float) -> float:
    """angle brought into (-pi, pi]."""
    return angle - 2 * math.pi * math.ceil((angle - math.pi) / (2 * math.pi))


def _one_entry_turns(code_a: torch.Tensor, code_b: torch.Tensor) -> list[float]:
    """The offsets a reading of the slowest pair's angles from one number each gives (asin of the sine, acos of
    the cosine), the difference as it is and brought into (-pi, pi]."""
    j, theta = CODE_D // 2 - 1, CODE_BASE ** (-(CODE_D - 2) / CODE_D)
    out = []
    for inverse, entry in ((math.asin, 2 * j), (math.acos, 2 * j + 1)):
        turn = inverse(max(-1.0, min(1.0, float(code_b[entry])))) - inverse(max(-1.0, min(1.0, float(code_a[entry]))))
        out += [turn / theta, _wrapped(turn) / theta]
    return out


def _code_cases(rng: random.Random) -> list[tuple[float, float]]:
    """Seven (m, n) pairs of real positions up to 10^10 with 0 <= |n - m| < 10^9, new at every check.

    Their kinds are fixed, so that each misconception shows at the same case every time: 1, n > m with
    the slowest pair's angle passing pi between the two; 2, n < m; 3, m = n; 4 to 7, anywhere. Every
    offset but case 3's is at least 0.1 away from a whole number.
    """
    slowest = CODE_BASE ** (-(CODE_D - 2) / CODE_D)

    def offset(sign: int, low: int = 500) -> float:
        return sign * (rng.randrange(low, CODE_SPAN - 10) + rng.uniform(0.1, 0.9))

    k = offset(+1, low=CODE_SPAN // 5)  # the slowest pair turns by 0.2 to 1 rad
    below_pi = rng.uniform(0.05, k * slowest - 0.05)  # the slowest angle of m sits this far below pi
    m = (2 * math.pi * rng.randrange(0, 2) + math.pi - below_pi) / slowest
    cases = [(m, m + k)]
    for low, high, sign in ((CODE_SPAN, CODE_MAX, -1), (0, CODE_MAX, 0), (0, 10, +1), (CODE_MAX / 10, CODE_MAX, -1),
                            (0, CODE_MAX, +1), (CODE_SPAN, CODE_MAX, -1)):
        m = rng.uniform(low, high)
        cases.append((m, m + offset(sign) if sign else m))
    return cases


def offset_from_codes(fn: Any) -> bool | None:
    """Exercise 1: fn(code_a, code_b) -> n - m, from the codes (8,) of two real positions m, n (|n - m| < 10^9),
    by any route within a budget of steps and tensor elements per case (building or turning codes of chosen
    positions with the library is refused)."""
    thetas = rope_frequencies(CODE_D, base=CODE_BASE, dtype=torch.float64).tolist()

    def run(f: Any) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(code_a, code_b), got {type(f).__name__}"
            return
        positions = _code_cases(_fresh_rng())
        cases = [(code_of(m), code_of(n)) for m, n in positions]
        answers, stopped = answers_under_guard(lambda i: f(*cases[i]), [(i,) for i in range(len(cases))],
                                               _code_builders(), steps_per_case=CLOSED_FORM_STEPS,
                                               elements_per_case=CLOSED_FORM_ELEMENTS, traced=True,
                                               scalars=False, operators=True, frames=True)
        if stopped is not None:
            frames = "checker's frames" in str(stopped[1])
            yield stopped_verdict(stopped[1], "your function",
                                  shortcut=("the checker's frames, and the positions it drew there, are not for "
                                            "answering" if frames else "the library's code builders are refused here")
                                           + "; the two codes you are given carry the offset",
                                  loop="runs out of its steps: there are 2 10^9 offsets to try; a formula, or a "
                                       "short search on a pair that reads the offset unambiguously, far fewer",
                                  grid="more tensor elements than a formula or a short search needs (all the "
                                       "candidate offsets at once?)")
            return
        raws = [answers[(i,)] for i in range(len(cases))]
        got_all = [number(raw) for raw in raws]
        for i, (raw, got) in enumerate(zip(raws, got_all)):
            if got is None:
                yield False, f"pair of codes {i + 1} of {len(cases)}: expected one number, got {type(raw).__name__}"
                return
        offsets = [n - m for m, n in positions]
        # patterns over every case: an answer is judged by what it does at all of them, not at the first wrong one
        flipped = all(abs(got + k) < 1e-3 for got, k in zip(got_all, offsets))
        one_entry = all(any(abs(got - v) < 1e-3 for v in _one_entry_turns(a, b))
                        for got, (a, b) in zip(got_all, cases))
        # near the offset everywhere, yet further from it somewhere than rounding to a whole number explains: the
        # spacing of float32 (64 near 10^9) or its angles (about 10^-7 rad, a hundred positions on the slowest pair)
        single = (all(abs(got - k) < 1e4 for got, k in zip(got_all, offsets))
                  and any(abs(got - k) > 0.5 for got, k in zip(got_all, offsets)))
        for i, (got, k) in enumerate(zip(got_all, offsets)):
            where = f"pair of codes {i + 1} of {len(cases)}"
            if abs(got - k) < 1e-3:
                continue
            if flipped:  # -(n - m) at every case: from the second code to the first, or sin and cos read swapped
                yield False, (f"{where}: your answers have the opposite sign to n - m at every pair of codes: the turn "
                              "is measured the wrong way round, either from the second code to the first (the offset "
                              "is n - m, key minus query, as everywhere in the course) or with each pair's sine and "
                              "cosine in the other order (§1: a pair holds (sin, cos))")
            elif one_entry:  # the slowest pair, each angle from its sine alone (asin) or its cosine alone (acos)
                yield False, (f"{where}: you read each angle from one number of its pair, a sine or a cosine alone: "
                              "one number does not say which of two angles it came from (§5: sin a = sin(π - a), "
                              "cos a = cos(-a)), so the turn comes out wrong wherever an angle lies on the other side")
            elif abs(got + k) < 1e-3 and i > 0:  # right so far, the wrong sign now (the cases before include n > m)
                yield False, (f"{where}: right size, wrong sign: whatever tells you the size here cannot tell "
                              "which code comes first (the dot product of two codes, §6, is the same for k and -k)")
            elif single:
                yield False, (f"{where}: near the offset, but not to within 10^-3: that is float32's precision (numbers "
                              "near 10^9 lie 64 apart, and an angle is good to about 10^-7 rad, a hundred positions "
                              "on a pair that turns 10^-9 rad a step): compute and return it in float64")
            elif abs(got - round(k)) < 1e-3:
                yield False, f"{where}: a whole number, but positions here are real numbers, and so is their offset"
            elif any(abs(got - _wrapped(k * t) / t) < 1e-3 for t in thetas):
                yield False, (f"{where}: you read a pair whose angle repeats within 10^9 positions: its turn is "
                              "only known up to whole circles")
            elif any(abs(got - k - c * 2 * math.pi / thetas[-1]) < 1e-3 for c in (-1, 1)):
                yield False, (f"{where}: off by one whole turn of the slowest pair: a difference of two angles is "
                              "only known up to 2π")
            else:
                yield False, f"{where}: not the offset between the two positions"
            return
        yield True, (f"right for {len(cases)} pairs of codes, drawn anew at this check, positions up to 10^10 and "
                     "not whole: the codes carry the offset as a turn of each pair, and one pair that never "
                     "completes a turn reads it without ambiguity")

    return report("the offset between two codes", fn, run,
                  "after how many positions does each pair look the same again (its wavelength, §1)?")


# Exercise 2: the part of any A whose position-position score p_m^T A p_n depends on the offset alone: the
# nearest matrix (in the sum of squared entries) that commutes with the shift M_1.
RELATIVE_WIDTHS = (8, 16, 64)  # and one more drawn at every check


def _shift(d: int) -> torch.Tensor:
    """M_1 of §4 for width d, float64: p_(i+1) = M_1 p_i."""
    return rope.rope_matrix(-1, d, inv_freq=rope_frequencies(d, dtype=torch.float64))


def _along_rotations(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per pair j, two numbers read from x's diagonal 2x2 block of that pair. The checker compares them between
    the answer and A: a right answer agrees with A on both for every pair, and each misconception it names
    changes them in its own way."""
    blocks = torch.stack([x[2 * j: 2 * j + 2, 2 * j: 2 * j + 2] for j in range(x.shape[0] // 2)])
    return blocks[:, 0, 0] + blocks[:, 1, 1], blocks[:, 0, 1] - blocks[:, 1, 0]


def offset_only_score(fn: Any) -> bool | None:
    """Exercise 2: fn(A) -> the (d, d) matrix nearest to A whose score p_m^T A_rel p_n depends on n - m alone,
    for random A of several even widths d drawn at every check (interleaved pairs, as in §1)."""

    def run(f: Any) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(A) returning a matrix, got {type(f).__name__}"
            return
        rng = _fresh_rng()
        gen = torch.Generator().manual_seed(rng.randrange(2**31))
        widths = sorted((*RELATIVE_WIDTHS, 2 * rng.choice([h for h in range(5, 24) if 2 * h not in RELATIVE_WIDTHS])))
        for d in widths:
            a = torch.randn(d, d, generator=gen, dtype=torch.float64)
            got = float64_tensor(f(a.clone()))  # any route: the answer is judged by what it is
            case = f"d = {d}"
            if got is None or got.shape != (d, d):
                yield False, f"{case}: return a ({d}, {d}) matrix, got {getattr(got, 'shape', type(got).__name__)}"
                return
            if not torch.isfinite(got).all():
                yield False, f"{case}: the matrix must hold finite numbers"
                return
            scale = float(a.norm())
            m1 = _shift(d)
            if float((got @ m1 - m1 @ got).norm()) > 1e-5 * scale:
                pairs_kept = torch.block_diag(*[a[2 * j: 2 * j + 2, 2 * j: 2 * j + 2] for j in range(d // 2)])
                if torch.allclose(got, a, atol=1e-6 * scale):
                    yield False, f"{case}: that is A itself, and its score depends on where the pair sits, not only on the offset"
                elif torch.allclose(got, pairs_kept, atol=1e-6 * scale):
                    yield False, (f"{case}: nothing across pairs, good, but each pair's 2x2 block is kept as it is: "
                                  "a block that is not a scaled rotation still sees where the pair sits")
                else:
                    yield False, (f"{case}: your matrix does not commute with the shift M_1, so its score still "
                                  "depends on where the pair sits, not only on the offset")
                return
            got_i, got_j = _along_rotations(got)
            a_i, a_j = _along_rotations(a)

            def same(x: torch.Tensor, y: torch.Tensor) -> bool:
                return bool(torch.allclose(x, y, atol=1e-6 * scale))

            if same(got_i, a_i) and same(got_j, a_j):
                continue
            zero = torch.zeros_like(a_i)
            if same(got_i, a_i) and same(got_j, zero):
                yield False, (f"{case}: offset alone, but you kept only the part that scores a key before the query "
                              "like one after it: the other half of a scaled rotation depends on the offset alone too")
            elif same(got_i, zero) and same(got_j, a_j):
                yield False, (f"{case}: offset alone, but you dropped the part that scores before and after alike: "
                              "it depends on the offset alone too")
            elif same(got_i, a_i) and same(got_j, -a_j):
                yield False, f"{case}: offset alone, but the part that tells before from after has the wrong sign"
            elif same(got_i, 2 * a_i) and same(got_j, 2 * a_j):
                yield False, (f"{case}: offset alone and along the right matrices, but twice too long: what is the "
                              "squared length of each matrix you projected on?")
            elif same(got_i, a_i / 2) and same(got_j, a_j / 2):
                yield False, f"{case}: offset alone and along the right matrices, but half too short"
            else:
                yield False, (f"{case}: your matrix depends on the offset alone, but it is not the nearest such "
                              "matrix to A: what it leaves, A - A_rel, still has a part along a scaled rotation")
            return
        yield True, (f"for {len(widths)} widths, 8 to 64, new matrices at this check: A_rel commutes with every "
                     "shift, and what it leaves of A has nothing along any matrix that does, so it is the nearest")

    return report("the part of A whose score depends on the offset alone", fn, run,
                  "the allowed matrices form a subspace (§6): what is the nearest point of a subspace?")


# Exercise 3: find the bug in a builder; count, for any d and L, its pairs that turn by less than 0.1 rad over L positions.
def buggy_sinusoids(n: int, d: int) -> torch.Tensor:
    """A sinusoidal table with one bug (Exercise 3 of chapter 3)."""
    pos = torch.arange(n, dtype=torch.float64)[:, None]
    two_j = torch.arange(0, d, 2, dtype=torch.float64)
    angle = pos / 10000 ** (2 * two_j / d)
    table = torch.zeros(n, d, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle)
    return table


SLOW_TURN = 0.1  # radians: a pair whose angle moves less than this over the whole context is nearly constant there


def _pair_turn(j: int, d: int, as_built: bool = True) -> float:
    """Pair j's turn per position at width d, one pair at a time (no table): buggy_sinusoids' (``as_built``, its
    angle line as written; tests/test_check_ch03.py holds it to the table), or theta_j of §1's formula."""
    if as_built:
        two_j = 2 * j  # the builder's variable for pair j
        return 10000 ** -(2 * two_j / d)
    return 10000 ** (-2 * j / d)  # §1's theta_j, j counting pairs


TIE = 1e-12  # relative: closer than this to the bound, a pair is on it to a float's precision (neighbouring pairs'
#              turns differ by a factor 10000^(4/d), 1 + 3.7e-11 at d = 10^12, so at most one pair is ever that close)


def _is_slow_count(count: int, d: int, length: int, as_built: bool = True, turn: float = SLOW_TURN) -> bool:
    """Whether ``count`` pairs turn by less than ``turn`` over ``length`` positions: the turns fall as j grows, so
    the count is right when the first pair it calls slow is slow and the pair before it is not (a pair on the
    bound to within TIE may go either way)."""
    if not 0 <= count <= d // 2:
        return False
    first = d // 2 - count
    return ((first == d // 2 or length * _pair_turn(first, d, as_built) < turn * (1 + TIE))
            and (first == 0 or length * _pair_turn(first - 1, d, as_built) >= turn * (1 - TIE)))


def _slow_cases(rng: random.Random) -> list[tuple[int, int]]:
    """Five (d, L) new at every check: a small width, a middling one and three from 10^9 to 10^12, where no table,
    not even one row, fits in memory; L from 8 to 10^6."""
    cases = []
    for low, high in ((2, 16), (250, 2_500), (5 * 10**8, 5 * 10**11), (5 * 10**8, 5 * 10**11),
                      (5 * 10**8, 5 * 10**11)):
        cases.append((2 * rng.randrange(low, high), round(10 ** rng.uniform(math.log10(8), 6))))
    return cases


def slow_pairs(fn: Any) -> bool | None:
    """Exercise 3: fn(d, L) -> how many of the d/2 pairs of buggy_sinusoids(n, d) turn by less than
    0.1 rad over L positions (L theta_j < 0.1), for (d, L) drawn at every check, most widths 10^9 to 10^12, where no
    table can be built (arrays of 10^8 elements or more are refused, and a long Python loop is stopped)."""

    def run(f: Callable[[int, int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(d, L), got {type(f).__name__}"
            return
        own = sys.modules[__name__]  # the checker's per-pair turns are its own, not a tool for the answer
        refuse = [(own, name, f"check.ch03.{name}") for name in ("_pair_turn", "_is_slow_count")]
        cases = _slow_cases(_fresh_rng())
        answers, stopped = answers_under_guard(f, cases, refuse)
        if stopped is not None:
            (d, length), why = stopped
            yield stopped_verdict(why, f"fn({d}, {length})",
                                  shortcut=("the checker's own tools are not for answering" if "check.ch03" in str(why)
                                            else "a table (or a row of one) this wide does not fit in memory")
                                           + "; the count follows from the builder's exponent, by a formula in d and L "
                                             "or a short search over the pairs",
                                  loop="runs a long loop over the pairs: at this width there are too many; the count "
                                       "follows from the builder's exponent, by a formula in d and L or a short search")
            return
        got: dict[tuple[int, int], int] = {}
        for (d, length), raw in answers.items():
            count = whole_number(raw)
            if count is None:
                yield False, f"fn({d}, {length}) must be a whole number of pairs, got {raw!r}"
                return
            if not 0 <= count <= d // 2:
                yield False, f"fn({d}, {length}) = {count} is not a number of pairs of a {d}-wide table"
                return
            got[(d, length)] = count
        # a misconception is named when it explains the answer at every case (at a narrow width two can agree)
        wrong = [case for case in cases if not _is_slow_count(got[case], *case)]
        if not wrong:
            yield True, (f"slow_count: right for {len(cases)} widths and lengths drawn at this check, widths up to "
                         "10^12; now compare with §1's table at the same d and L")
            return
        case = f"fn{wrong[0]}"
        if all(_is_slow_count(got[(d, n)], d, n, as_built=False) for d, n in cases):
            yield False, (f"{case}: that count belongs to §1's correct table; the builder's frequencies are not "
                          "§1's: compare its exponent with the formula")
        elif all(_is_slow_count(got[(d, n)], d, n, turn=2 * math.pi) for d, n in cases):
            yield False, f"{case}: that counts the pairs that turn less than a full circle; the bound is 0.1 rad"
        elif all(_is_slow_count(d // 2 - got[(d, n)], d, n) for d, n in cases):
            yield False, f"{case}: that counts the pairs that turn by 0.1 rad or more; the question asks for the others"
        elif any(all(_is_slow_count(got[c] + step, *c) for c in cases) for step in (-1, 1)):
            yield False, f"{case} is off by one: which pair is the first, and which the last, that counts?"
        else:
            yield False, f"{case} = {got[wrong[0]]} is not that count"

    return report("how many pairs of the buggy table turn by less than 0.1 rad over the context", fn, run,
                  "the builder's frequencies are still a geometric progression in j")
