"""Checkers for notebooks/05_rope.ipynb (rotary position embedding).

Each checker takes the learner's answer (numbers, a tensor or a function), compares it
with ``posenc_lib`` and prints what is right, what is wrong and a hint. None (or a
function still raising NotImplementedError) counts as not attempted (see _core for grading mode).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import torch

from ..angles import rope_frequencies
from ..attention import attention
from ..rope import layout_permutation
from ..rotary import apply_rope
from ._core import Verdict, close, float64_tensor, number, report, whole_number, whole_numbers
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["rope_pair_score", "rope_first_slow_pair", "rope_layout_perm", "rope_tilted_frequencies"]


# Exercise 1: the query's pair and the key's pair of pair j = 1 (d = 8, base 10000), at positions m and n.
PAIR_Q, PAIR_K, PAIR_M, PAIR_N, PAIR_J, PAIR_D = (2.0, 1.0), (1.0, -1.0), 30, 50, 1, 8


def _pair_score(angle_q: float, angle_k: float) -> float:
    """⟨R(angle_q) q, R(angle_k) k⟩ for the pairs of Exercise 1."""
    def turn(p: tuple[float, float], a: float) -> tuple[float, float]:
        return p[0] * math.cos(a) - p[1] * math.sin(a), p[0] * math.sin(a) + p[1] * math.cos(a)

    (a0, a1), (b0, b1) = turn(PAIR_Q, angle_q), turn(PAIR_K, angle_k)
    return a0 * b0 + a1 * b1


def rope_pair_score(answer: Any) -> bool | None:
    """Exercise 1: one pair's contribution ⟨R_m q, R_n k⟩ to the score (a number)."""
    theta = rope_frequencies(PAIR_D, dtype=torch.float64)[PAIR_J].item()
    m, n = PAIR_M, PAIR_N
    want = _pair_score(m * theta, n * theta)
    slips = {  # each a misconception, told without the number
        "the key turned the other way: the score sees the key's angle minus the query's (§1), not the reverse":
            _pair_score(n * theta, m * theta),
        "positions enter only through the offset n − m; you turned one vector by its absolute angle":
            _pair_score(0.0, n * theta),
        "that is the other vector's absolute angle; the score needs the difference of the two angles":
            _pair_score(0.0, m * theta),
        "the angles do not add up: the score sees the difference of the two turns (§1)":
            _pair_score(0.0, (m + n) * theta),
        "that angle is pair 0's rate; pair j turns at θ_j = 10000^(−2j/d)": _pair_score(m, n),
        "θ_j = 10000^(−2j/d): the exponent has the factor 2 (j counts pairs, not features)":
            _pair_score(m * 10000.0 ** (-PAIR_J / PAIR_D), n * 10000.0 ** (-PAIR_J / PAIR_D)),
        "without any rotation: RoPE turns both vectors before the dot product": _pair_score(0.0, 0.0),
    }

    def run(ans: Any) -> Iterator[Verdict]:
        value = number(ans)
        if value is None:
            yield False, "expected one number"
            return
        if close(value, want, atol=1e-3):
            yield True, "right: the pair's score depends on the offset and the pair's frequency only"
            return
        for why, slip in slips.items():
            if close(value, slip, atol=1e-3):
                yield False, why
                return
        yield False, f"{value:.4f} is not this pair's contribution"

    return report(f"pair j = {PAIR_J} of q at m = {m} and k at n = {n}", answer, run,
                  "§1: the dot product of two turned vectors sees only the difference of their angles")


def rope_layout_perm(answer: Any, *, d: int = 8) -> bool | None:
    """Exercise: the way back, Q with apply_rope(x, layout='half')[..., Q] == apply_rope(x[..., Q]).

    answer: d integers (a half-layout model's q/k features reordered for an interleaved kernel)
    """
    forward = layout_permutation(d)  # P: interleaved -> half, shown in the chapter
    want = torch.argsort(forward)

    def run(ans: Any) -> Iterator[Verdict]:
        indices = whole_numbers(ans)
        got = None if indices is None else torch.tensor(indices, dtype=torch.long)
        if got is None or got.shape != (d,):
            yield False, f"expected {d} integers"
        elif torch.equal(got, want):
            yield True, "Q undoes P: apply_rope(x, layout='half')[..., Q] == apply_rope(x[..., Q])"
        elif sorted(got.tolist()) != list(range(d)):
            yield False, f"{got.tolist()} is not a permutation of 0..{d - 1}"
        elif torch.equal(got, forward):
            yield False, "that is P, the interleaved → half direction; this exercise goes back"
        else:
            x = torch.randn(3, d, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
            gap = (apply_rope(x, layout="half")[..., got] - apply_rope(x[..., got])).abs().max()
            yield False, f"with Q = {got.tolist()} the two sides differ by {gap:.3f}"

    return report(f"the layout permutation back, for d = {d}", answer, run,
                  "follow one pair through both layouts: which two features does it occupy in each?")


def rope_first_slow_pair(fn: Callable[[int, float, int], Any] | None) -> bool | None:
    """Exercise: first_slow_pair(d, base, L) -> the smallest pair j whose angle m*theta_j stays
    below one full turn (2 pi) at every position m = 0 .. L-1; d/2 when every pair turns fully.
    """
    settings = ((128, 10000.0, 4096), (64, 10000.0, 2048), (128, 500000.0, 8192), (96, 10000.0, 512),
                (16, 100.0, 1000), (32, 10000.0, 7))

    def run(fn: Callable[[int, float, int], Any]) -> Iterator[Verdict]:
        for d, base, L in settings:
            last = (L - 1) * rope_frequencies(d, base=base, dtype=torch.float64)  # largest angle of each pair
            slow = torch.nonzero(last < 2 * math.pi).flatten()
            want = int(slow[0]) if len(slow) else d // 2
            got = whole_number(fn(d, base, L))
            where = f"d={d}, base={base:g}, L={L}"
            if got is None:
                yield False, f"{where}: expected a whole pair index"
                return
            if got == want:
                continue
            if not 0 <= got <= d // 2:
                yield False, f"{where}: {got} is not a pair index (pairs are 0 .. d/2 − 1, or d/2 for none)"
            elif got < want:
                yield False, f"{where}: pair {got} still completes a full turn before position L − 1"
            else:
                yield False, f"{where}: pair {got - 1} already stays below one turn: find the smallest such j"
            return
        yield True, f"the first slow pair, right for all {len(settings)} (d, base, L) settings"

    return report("the first pair that never completes a turn", fn, run,
                  "at which position does pair j reach its largest angle, and how does θ_j change as j grows? "
                  "Logarithms turn base^(−2j/d) into something linear in j")


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


def tilted_cases() -> list[tuple[str, torch.Tensor]]:
    """The generators the checker asks about: RoPE's own (§5's d = 4), tilted ones, a random one, one in float32."""
    rope4 = torch.tensor([[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 0, -0.01], [0, 0, 0.01, 0]], dtype=torch.float64)
    return [("RoPE's own generator, d = 4", rope4), ("the same frequencies, tilted", _tilted((1.0, 0.01), seed=5)),
            ("a random skew-symmetric A", _skew(11)), ("a tilted A in float32", _tilted((2.0, 0.5), seed=9, dtype=torch.float32)),
            ("another random one", 3 * _skew(23))]


def _frequencies(A: torch.Tensor) -> torch.Tensor:
    """(fast, slow) frequencies of a 4 x 4 skew-symmetric A, by eigenvalues (the checker's measurement)."""
    return torch.linalg.eigvalsh(A.double().T @ A.double()).clamp(min=0).sqrt()[[3, 0]]


def _decompositions() -> tuple[tuple[Any, str, str], ...]:
    """Eigenvalue and singular-value routines: §3's numerical route."""
    import sys

    import numpy

    names = ("eig", "eigvals", "eigh", "eigvalsh", "svd", "svdvals")
    found = [(torch.linalg, n, f"torch.linalg.{n}") for n in names] + [(numpy.linalg, n, f"numpy.linalg.{n}") for n in names]
    found += [(torch, "svd", "torch.svd"), (torch.Tensor, "svd", "Tensor.svd"), (torch, "lobpcg", "torch.lobpcg"),
              (numpy, "roots", "numpy.roots")]
    scipy_linalg = sys.modules.get("scipy.linalg")  # only if the learner has it loaded
    if scipy_linalg is not None:
        found += [(scipy_linalg, n, f"scipy.linalg.{n}") for n in names]
    return tuple(found)


def rope_tilted_frequencies(fn: Callable[[torch.Tensor], Any] | None) -> bool | None:
    """Exercise 4: fn(A) -> the two frequencies (faster first) of a 4 x 4 skew-symmetric A, from its entries:
    eigenvalue and singular-value routines refuse to run while fn does."""

    def run(fn: Callable[[torch.Tensor], Any]) -> Iterator[Verdict]:
        cases = tilted_cases()
        by_case, stopped = answers_under_guard(lambda n: fn(cases[n][1].clone()), [(n,) for n in range(len(cases))],
                                               _decompositions(), loops=False)
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function", shortcut="that is §3's numerical route; the exercise "
                                  "asks for the frequencies as a formula in A's entries")
            return
        for (name, A), raw in zip(cases, by_case.values()):
            got = float64_tensor(raw)
            if got is None or got.numel() != 2:
                yield False, f"{name}: expected two numbers, the faster frequency first"
                return
            got, want = got.flatten(), _frequencies(A)
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
