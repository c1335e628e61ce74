"""Checkers for notebooks/05_rope.ipynb (rotary position embedding).

Each checker takes the learner's answer (a number, integers or a function), checks it and prints what is
right, what is wrong and a hint. None (or a function still raising NotImplementedError) counts as not
attempted (see _core for grading mode). The module holds no answer: a number is sealed (``_core.sealed_number``),
a permutation and a pair index are checked by the properties that define them, and the frequencies of a
generator are measured on the checker's own matrices after the learner's function has run.
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import torch

from ..rotary import apply_rope
from ._core import Verdict, close, float64_tensor, near_sealed, number, report, whole_number, whole_numbers
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["rope_pair_score", "rope_first_slow_pair", "rope_layout_perm", "rope_tilted_frequencies"]


# Exercise 1: pair j = 1 of a d = 8 head (base 10000, theta_1 = 0.1) in a RoPE that also scales lengths, the rule
# §2 leaves open (c(m) = zeta^m): the query's pair is zeta^m R(m theta) q at m, the key's zeta^(-n) R(n theta) k at n.
# The positions are far beyond any float's reach: only the offset and the product of the lengths can be used.
PAIR_Q, PAIR_K, PAIR_M, PAIR_N = (2.0, 1.0), (1.0, -1.0), 10**18 + 50, 10**18 + 30
PAIR_J, PAIR_D, PAIR_ZETA = 1, 8, 0.98
_PAIR = "ch05.rope_pair_score"
_PAIR_RIGHT = "82b66087348acf5967cc93d7"  # sealed_number(answer, _PAIR): the checker does not hold the number
_PAIR_SLIPS = {  # sealed wrong answers, each a misconception, told without the number
    "59a67a0e2579aacaf89c9772": "the key turned the other way: the score sees the key's angle minus the query's (§1), "
                                "not the reverse",
    "1b3004f1807699c7dfa82f4f": "the key turned the other way (the score sees the key's angle minus the query's), and "
                                "the lengths are left out",
    "7bb8ae6fa38c90f16862fb2a": "the lengths: the query carries ζ^m and the key ζ^(−n); which power of ζ is their "
                                "product?",
    "407cc7f845fc6c7f2912ce96": "the lengths and the direction of the turn are both reversed",
    "7c665a6597c4bb248b15df14": "the rotation is right, but the lengths are left out: this RoPE scales the "
                                "query by ζ^m and the key by ζ^(−n)",
    "0d96c176ce3300b3f7b4bab4": "that is the score with no turn between the two pairs: either the rotation is "
                                "left out, or each pair was turned by its absolute angle, where m·θ and n·θ "
                                "(about 10^17 radians, floats 16 apart) round to the same number",
    "cd3f784179b88d78dfce58eb": "without any rotation or scaling: both happen before the dot product",
    "65334e43222d2fd2739d56ce": "that angle is pair 0's rate; pair j turns at θ_j = 10000^(−2j/d)",
    "a959e7d4cee442589263f527": "θ_j = 10000^(−2j/d): the exponent has the factor 2 (j counts pairs, not features)",
}


def rope_pair_score(answer: Any) -> bool | None:
    """Exercise 1: one pair's contribution to the score, for a RoPE that also scales lengths (a number)."""

    def run(ans: Any) -> Iterator[Verdict]:
        value = number(ans)
        if value is None:
            yield False, "expected one number"
            return
        if not math.isfinite(value):
            yield False, ("not a finite number: at these positions ζ^m alone underflows and ζ^(−n) overflows, and "
                          "any angle m·θ has lost its digits; the positions themselves are not what the score uses")
            return
        if near_sealed(value, _PAIR_RIGHT, _PAIR):
            yield True, ("right: the lengths multiply and the angles subtract, so the score never sees where the "
                         "pair sits")
            return
        for digest, why in _PAIR_SLIPS.items():
            if near_sealed(value, digest, _PAIR):
                yield False, why
                return
        yield False, (f"{value:.4f} is not this pair's contribution (rotating at the absolute positions gives "
                      "rounding noise here: an angle of 10^17 radians keeps no digits after the point)")

    return report(f"pair j = {PAIR_J} of q at m = 10^18 + 50 and k at n = 10^18 + 30, lengths ζ^m and ζ^(−n)",
                  answer, run, "§2's polar form: a complex number is a length times a phase")


# Exercise 2: the first pair whose angle never reaches a full turn, as a formula. The checker holds no answer:
# it checks the property that defines one (pair j stays below 2π at position L - 1, pair j - 1 does not).
SLOW_SETTINGS = ((128, 10000.0, 4096), (64, 10000.0, 2048), (128, 500000.0, 8192), (96, 10000.0, 512),
                 (16, 100.0, 1000), (32, 10000.0, 7), (10**12, 10000.0, 4096), (2 * 10**9, 500000.0, 131072))
SLOW_STEPS = 30  # Python lines per question: a formula takes a few; a search over 10^11 pairs takes over 100


def _largest_turns(j: int, d: int, base: float, L: int) -> float:
    """Pair j's largest angle in a context of L tokens (at position L - 1), in turns."""
    return (L - 1) * base ** (-2 * j / d) / (2 * math.pi)


def _frequency_functions() -> tuple[tuple[Any, str, str], ...]:
    """The library's lists of every pair's frequency, angle or wavelength (and chapter 8's turning-pair count)."""
    import posenc_lib

    from .. import angles, rope_analysis, rope_inspect, scaling

    names = (("rope_frequencies", angles), ("rope_angles", angles), ("rope_wavelengths", rope_analysis),
             ("rope_angle_novelty", rope_analysis), ("scaled_rope_frequencies", scaling),
             ("inspect_config", rope_inspect), ("turning_pairs", rope_inspect))
    return tuple(t for name, module in names for t in ((posenc_lib, name, f"pl.{name}"), (module, name, f"pl.{name}")))


def rope_first_slow_pair(fn: Callable[[int, float, int], Any] | None) -> bool | None:
    """Exercise 2: first_slow_pair(d, base, L) -> the smallest pair j whose angle m*theta_j stays
    below one full turn (2 pi) at every position m = 0 .. L-1; d/2 when every pair turns fully.
    A formula: the library's frequency lists refuse to run, arrays of 10^8 entries are refused, and each
    question allows ``SLOW_STEPS`` Python lines."""

    def run(fn: Callable[[int, float, int], Any]) -> Iterator[Verdict]:
        answers, stopped = answers_under_guard(fn, SLOW_SETTINGS, _frequency_functions(), steps_per_case=SLOW_STEPS)
        for setting in SLOW_SETTINGS:
            d, base, L = setting
            where = f"d={d:,}, base={base:g}, L={L:,}"
            if setting not in answers:
                yield stopped_verdict(stopped[1], f"{where}: your function",
                                      shortcut="that lists every pair; the exercise asks for a formula in d, base "
                                               "and L",
                                      loop=f"runs more than {SLOW_STEPS} Python lines: that is a search over the "
                                           "pairs, not a formula")
                return
            got = whole_number(answers[setting])
            if got is None:
                yield False, f"{where}: expected a whole pair index"
                return
            if not 0 <= got <= d // 2:
                yield False, f"{where}: {got} is not a pair index (pairs are 0 .. d/2 − 1, or d/2 for none)"
                return
            if got < d // 2 and _largest_turns(got, d, base, L) >= 1:
                near = _largest_turns(got, d, base, L) - 1 < 1e-4
            elif got > 0 and _largest_turns(got - 1, d, base, L) < 1:
                near = 1 - _largest_turns(got - 1, d, base, L) < 1e-4
            else:
                continue
            if near and d > 10**6:
                yield False, (f"{where}: off, though your pair's angle is within 10^−4 of a full turn: at this d the "
                              "formula needs about 12 significant digits, and float32 keeps 7 (use Python floats)")
            elif got < d // 2 and _largest_turns(got, d, base, L) >= 1:
                yield False, f"{where}: pair {got} still completes a full turn before position L − 1"
            else:
                yield False, f"{where}: pair {got - 1} already stays below one turn: find the smallest such j"
            return
        yield True, f"the first slow pair, right for all {len(SLOW_SETTINGS)} (d, base, L) settings"

    return report("the first pair that never completes a turn", fn, run,
                  "the frequencies θ_j form a geometric sequence in j")


# Exercise 3: a checkpoint trained with a clockwise RoPE (R_(-m), Meta's interleaved pairs), to run on the
# counter-clockwise half-layout kernel: Q with apply_rope(x, -pos)[..., Q] == apply_rope(x[..., Q], pos, "half").
LAYOUT_D = 64


def _layout_faults(order: list[int], d: int) -> str | None:
    """What is wrong with `order` as Q, read pair by pair of the half-layout kernel (None: nothing)."""
    h = d // 2
    for j in range(h):
        a, b = order[j], order[j + h]  # the checkpoint's features in the kernel's pair j: (first, second member)
        if a // 2 != b // 2:
            return (f"the kernel's pair {j} (features {j} and {j + h}) gets features {a} and {b} of the checkpoint, "
                    "which belong to two different pairs: the half layout pairs feature j with j + d/2")
        if a // 2 != j:
            return (f"the checkpoint's pair {a // 2} sits in the kernel's pair {j}: it would turn at θ_{j} instead "
                    f"of θ_{a // 2}")
        if a % 2 == 0:
            return (f"the checkpoint's pair {j} keeps its order in the kernel's pair {j}, so it turns "
                    "counter-clockwise there; the checkpoint was trained turning it clockwise")
    return None


def rope_layout_perm(answer: Any, *, d: int = LAYOUT_D) -> bool | None:
    """Exercise 3: Q (d integers) that runs a clockwise, interleaved checkpoint on the half-layout kernel:
    apply_rope(x, -positions)[..., Q] == apply_rope(x[..., Q], positions, layout="half") for every x."""

    def run(ans: Any) -> Iterator[Verdict]:
        indices = whole_numbers(ans)
        if indices is None or len(indices) != d:
            yield False, f"expected {d} integers"
            return
        if sorted(indices) != list(range(d)):
            yield False, f"not a permutation of 0 .. {d - 1}: each feature of the checkpoint goes to one place"
            return
        fault = _layout_faults(indices, d)
        g = torch.Generator().manual_seed(7)
        x = torch.randn(3, 5, d, dtype=torch.float64, generator=g)  # inputs the learner does not see
        pos = torch.tensor([0, 1, 9, 250, 4099])
        got = apply_rope(x[..., indices], pos, layout="half")
        gap = (apply_rope(x, -pos)[..., indices] - got).abs().max().item()
        if fault is None and gap < 1e-9:
            yield True, ("the kernel turns every pair counter-clockwise and the checkpoint clockwise: "
                         "with each pair's two features exchanged, the two agree for every input")
        else:
            yield False, fault or f"the two sides differ by {gap:.3f}"

    return report(f"a clockwise checkpoint on a counter-clockwise half-layout kernel, d = {d}", answer, run,
                  "a mirror turns a clockwise turn into a counter-clockwise one")


# Exercise 4: the two frequencies of a 4 x 4 skew-symmetric generator, from its entries (no eigenvalues).
def _tilted(thetas: tuple[float, float], seed: int, dtype: torch.dtype = torch.float64) -> torch.Tensor:
    """Q B Qᵀ: RoPE's generator with these frequencies, in a random orthonormal basis Q (seeded)."""
    B = torch.zeros(4, 4, dtype=torch.float64)
    B[0, 1], B[1, 0], B[2, 3], B[3, 2] = -thetas[0], thetas[0], -thetas[1], thetas[1]
    q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    return (q @ B @ q.T).to(dtype)


def _skew(seed: int) -> torch.Tensor:
    m = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return m - m.T


TILTED_STEPS = 150  # Python lines per generator: a closed form takes about 10; power iteration needs hundreds


def _tilted_cases() -> list[tuple[str, torch.Tensor]]:
    """The generators the checker asks about (not the answers): RoPE's own (§5's d = 4), tilted ones, random ones,
    one in float32, and one with two nearly equal frequencies (where iterating towards the faster one is slow)."""
    rope4 = torch.tensor([[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 0, -0.01], [0, 0, 0.01, 0]], dtype=torch.float64)
    return [("RoPE's own generator, d = 4", rope4), ("the same frequencies, tilted", _tilted((1.0, 0.01), seed=5)),
            ("a random skew-symmetric A", _skew(11)), ("a tilted A in float32", _tilted((2.0, 0.5), seed=9, dtype=torch.float32)),
            ("another random one", 3 * _skew(23)), ("two nearly equal frequencies", _tilted((1.0, 0.995), seed=13))]


def _decompositions() -> tuple[tuple[Any, str, str], ...]:
    """Eigenvalue and singular-value routines: §3's numerical route."""
    import sys

    import numpy

    names = ("eig", "eigvals", "eigh", "eigvalsh", "svd", "svdvals")
    found = [(torch.linalg, n, f"torch.linalg.{n}") for n in names] + [(numpy.linalg, n, f"numpy.linalg.{n}") for n in names]
    found += [(torch, "svd", "torch.svd"), (torch.Tensor, "svd", "Tensor.svd"), (torch, "lobpcg", "torch.lobpcg"),
              (numpy, "roots", "numpy.roots"), (numpy, "poly", "numpy.poly")]  # numpy.poly(A) computes A's eigenvalues
    scipy_linalg = sys.modules.get("scipy.linalg")  # only if the learner has it loaded
    if scipy_linalg is not None:
        found += [(scipy_linalg, n, f"scipy.linalg.{n}") for n in names]
    return tuple(found)


def rope_tilted_frequencies(fn: Callable[[torch.Tensor], Any] | None) -> bool | None:
    """Exercise 4: fn(A) -> the two frequencies (faster first) of a 4 x 4 skew-symmetric A, from its entries:
    eigenvalue and singular-value routines refuse to run while fn does, and each A allows ``TILTED_STEPS``
    Python lines (an iteration towards the eigenvalues takes more). The checker measures the frequencies by
    eigenvalues itself, after fn has run."""

    def run(fn: Callable[[torch.Tensor], Any]) -> Iterator[Verdict]:
        cases = _tilted_cases()
        by_case, stopped = answers_under_guard(lambda n: fn(cases[n][1].clone()), [(n,) for n in range(len(cases))],
                                               _decompositions(), steps_per_case=TILTED_STEPS)
        if stopped is not None:
            yield stopped_verdict(stopped[1], f"{cases[stopped[0][0]][0]}: your function",
                                  shortcut="that is §3's numerical route; the exercise asks for the frequencies as a "
                                  "formula in A's entries",
                                  loop=f"runs more than {TILTED_STEPS} Python lines: an iteration towards the "
                                       "eigenvalues, not a formula in A's entries")
            return
        for (name, A), raw in zip(cases, by_case.values()):
            got = float64_tensor(raw)
            if got is None or got.numel() != 2:
                yield False, f"{name}: expected two numbers, the faster frequency first"
                return
            # measured here (fn is done): the square roots of AᵀA's eigenvalues, each frequency twice, fastest last
            got, want = got.flatten(), torch.linalg.eigvalsh(A.double().T @ A.double()).clamp(min=0).sqrt()[[3, 0]]
            tol = dict(atol=2e-5, rtol=1e-5)  # float32 arithmetic is fine (its slow root loses digits)
            if close(got, want, **tol):
                continue
            if close(got, want.flip(0), **tol):
                yield False, f"{name}: the right two frequencies, the slower first; give the faster one first"
            elif close(got, want**2, **tol) or close(got, want.flip(0) ** 2, **tol):
                yield False, f"{name}: those are the squares of the frequencies"
            elif close(got, 2 * math.pi / want, **tol) or close(got, 2 * math.pi / want.flip(0), **tol):
                yield False, f"{name}: those are the planes' wavelengths 2π/θ, not angles per position"
            elif close(got.sort().values, (2 ** 0.5 * want).sort().values, **tol) or close(
                    got.pow(2).sum(), 2 * want.pow(2).sum(), **tol):
                yield False, (f"{name}: your frequencies' squares add up to twice the right sum: each frequency "
                              "sits in A twice, above and below the diagonal")
            else:
                yield False, f"{name}: not the frequencies of this A"
            return
        yield True, (f"right for {len(cases)} generators: the frequencies are properties of A that no change of "
                     "basis can alter, which is why the basis Q costs nothing")

    return report("the frequencies of a tilted generator, in closed form", fn, run,
                  "§3: A = Q B Qᵀ with an orthonormal Q and RoPE's generator B; which numbers that you can compute "
                  "from A's entries stay the same when Q changes?")
