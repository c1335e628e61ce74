"""Checkers for notebooks/05_rope.ipynb (rotary position embedding).

Each checker takes the learner's answer (a number, integers or a function), checks it and prints what is
right, what is wrong and a hint. None (or a function still raising NotImplementedError) counts as not
attempted (see _core for grading mode). The module holds no answer: the score of Ex 1 is compared, far from the
start, with the score as defined at small positions; a permutation and a pair index are checked by the properties
that define them; and the frequencies of a generator are measured on the checker's own matrices after the
learner's function has run.
"""
from __future__ import annotations

import math
import sys
from typing import Any, Callable, Iterator

import torch

from ..rotary import apply_rope
from ._core import Verdict, close, float64_tensor, number, report, whole_number, whole_numbers
from ._guard import Shortcut, answers_under_guard, counting, loaded, stopped_verdict, value_of

__all__ = ["rope_pair_score", "rope_first_slow_pair", "rope_layout_perm", "rope_tilted_frequencies"]


# Exercise 1: one pair's contribution to the score in a RoPE that also scales lengths, the rule §2 leaves open
# (c(m) = zeta^m): the query's pair is zeta^m R(m theta) q at m, the key's zeta^(-n) R(n theta) k at n. The learner
# writes a function; the checker calls it with its own pairs, rates and lengths at positions far beyond any float
# (10^18 to 10^400), where only the offset and the product of the lengths can be used. It holds no formula for
# that: it computes the score as defined at small positions, and asks the function for the same pair moved far away.
PAIR_SHIFTS = (10**18, 10**30 + 7, 10**400)  # how far the checker moves each pair (both positions alike)
PAIR_STEPS = 400  # Python lines per call: a formula (or the library's rotation at the offset) runs under 200;
# arbitrary precision at the absolute positions (mpmath, sympy) runs thousands


def _pair_cases() -> list[tuple[tuple[float, float], tuple[float, float], int, int, float, float]]:
    """(q, k, m, n, zeta, theta) at small positions: key behind, ahead of and at the query, zeta below, above and at 1."""
    g = torch.Generator().manual_seed(2025)
    qk = torch.randn(4, 2, 2, dtype=torch.float64, generator=g).tolist()
    settings = ((50, 30, 0.98, 0.1), (3, 41, 1.02, 1.0), (12, 12, 0.9, 10000 ** (-6 / 8)), (0, 7, 1.0, 0.5))
    return [(tuple(q), tuple(k), m, n, zeta, theta) for (q, k), (m, n, zeta, theta) in zip(qk, settings)]


def _as_defined(q, k, m: int, n: int, zeta: float, theta: float) -> float:
    """<zeta^m R(m theta) q, zeta^(-n) R(n theta) k>, computed as written: right only while m and n are small."""
    def turned(p, angle):
        c, s_ = math.cos(angle), math.sin(angle)
        return p[0] * c - p[1] * s_, p[0] * s_ + p[1] * c

    a, b = turned(q, m * theta), turned(k, n * theta)
    return zeta**m * zeta ** (-n) * (a[0] * b[0] + a[1] * b[1])


_PAIR_SLIPS = (  # (what changes in the definition, the misconception named)
    (dict(theta=lambda t: -t), "each pair turned the other way: the score sees the key's angle minus the query's "
                               "(§1), and your sign is reversed"),
    (dict(zeta=lambda z: 1 / z), "the lengths: the query carries ζ^m and the key ζ^(−n); which power of ζ is their "
                                 "product?"),
    (dict(zeta=lambda z: 1 / z, theta=lambda t: -t), "the lengths and the direction of the turn are both reversed"),
    (dict(zeta=lambda z: 1.0), "the rotation is right, but the lengths are left out: this RoPE scales the query by "
                               "ζ^m and the key by ζ^(−n)"),
    (dict(zeta=lambda z: 1.0, theta=lambda t: -t), "the turn is reversed and the lengths are left out"),
    (dict(theta=lambda t: 0.0), "no turn between the two pairs: the rotation is left out"),
    (dict(zeta=lambda z: 1.0, theta=lambda t: 0.0), "neither the rotation nor the lengths: both happen before the dot "
                                                    "product"),
)


def _arbitrary_precision() -> list[tuple[Any, str, str]]:
    """Arbitrary-precision arithmetic, where the learner has loaded it: the way to compute the score as written."""
    found = loaded("mpmath", ("mpf", "mpc", "cos", "sin", "exp", "expj", "cospi", "sinpi", "power", "mpmathify",
                              "fmod", "cos_sin", "nint"))
    mp = getattr(sys.modules.get("mpmath"), "mp", None)
    if mp is not None:
        found += [(mp, name, f"mpmath.mp.{name}") for name in ("mpf", "mpc", "cos", "sin", "exp", "expj", "power")]
    found += loaded("sympy", ("cos", "sin", "exp", "Integer", "Rational", "Float", "N", "sympify", "nsimplify"))
    found += loaded("decimal", ("Decimal",)) + loaded("fractions", ("Fraction",))
    return found + [(sys.modules[__name__], "_as_defined", "check.ch05._as_defined")]


def rope_pair_score(fn: Callable[..., Any] | None) -> bool | None:
    """Exercise 1: fn(q, k, m, n, zeta, theta) -> <zeta^m R(m theta) q, zeta^(-n) R(n theta) k>, one pair's score in a
    RoPE that also scales lengths (q, k: two numbers each; m, n: Python ints up to 10^400). Arbitrary-precision
    libraries refuse to run while fn does, and each call allows ``PAIR_STEPS`` Python lines."""

    def run(fn: Callable[..., Any]) -> Iterator[Verdict]:
        small = _pair_cases()
        far = [(q, k, m + s, n + s, zeta, theta) for s in PAIR_SHIFTS for q, k, m, n, zeta, theta in small]
        def overflow_as_inf(*case: Any) -> Any:
            try:
                return fn(*case)
            except OverflowError:  # ζ^(−n) as a Python float at n = 10^18: the number is not finite
                return math.inf

        answers, stopped = answers_under_guard(overflow_as_inf, small + far, _arbitrary_precision(),
                                               steps_per_case=PAIR_STEPS)
        if stopped is not None:
            case = stopped[0]
            where = "your function" if case in small else f"at positions near 10^{len(str(case[2])) - 1} your function"
            yield stopped_verdict(stopped[1], where,
                                  shortcut="that computes the score as written, at the absolute positions; the "
                                           "exercise asks what the score can be computed from instead",
                                  loop=f"runs more than {PAIR_STEPS} Python lines: that is arbitrary-precision "
                                       "arithmetic at the absolute positions, not what the score depends on")
            return
        got = [number(answers[case]) for case in small + far]
        if any(v is None for v in got):
            yield False, "expected one number for each call"
            return
        want = [_as_defined(*case) for case in small]
        if not all(math.isfinite(v) for v in got[:len(small)]):
            yield False, "not a finite number at small positions, where the score as written is an ordinary number"
            return
        if not all(math.isclose(v, w, rel_tol=1e-5, abs_tol=1e-5) for v, w in zip(got, want)):
            for change, why in _PAIR_SLIPS:
                slip = [_as_defined(q, k, m, n, change.get("zeta", lambda z: z)(zeta),
                                    change.get("theta", lambda t: t)(theta)) for q, k, m, n, zeta, theta in small]
                if all(math.isclose(v, w, rel_tol=1e-5, abs_tol=1e-5) for v, w in zip(got, slip)):
                    yield False, why
                    return
            yield False, "wrong already at small positions, where the score can be computed as written"
            return
        for s, start in zip(PAIR_SHIFTS, range(len(small), len(got), len(small))):
            moved = got[start:start + len(small)]
            if all(math.isclose(v, w, rel_tol=1e-5, abs_tol=1e-5) for v, w in zip(moved, want)):
                continue
            if not all(math.isfinite(v) for v in moved):
                yield False, ("right at small positions; with both positions moved by about 10^"
                              f"{len(str(s)) - 1} your function returns a number that is not finite: ζ^m alone "
                              "underflows or overflows there")
            else:
                yield False, ("right at small positions, but the score changes when both positions move by about 10^"
                              f"{len(str(s)) - 1}: your function depends on where the pair sits (an angle of 10^17 "
                              "radians or more keeps no digits after the point)")
            return
        yield True, ("right at every distance from the start: the lengths multiply and the angles subtract, so the "
                     "score never sees where the pair sits")

    return report("one pair's score when RoPE also scales lengths, at positions up to 10^400", fn, run,
                  "§2's polar form: a complex number is a length times a phase")


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
            elif _largest_turns(got - 1, d, base, L + 1) >= 1:
                yield False, (f"{where}: pair {got - 1} reaches a full turn only at position L, one past the context: "
                              "its positions run 0 … L − 1")
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
            return (f"every pair sits in the kernel's pair of the same frequency, but pair {j} turns "
                    "counter-clockwise there, and the checkpoint was trained with it turning clockwise")
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
                  "reordering features is a change of basis: in which basis of the plane does R(α) look like R(−α)?")


# Exercise 4: the two frequencies of a 4 x 4 skew-symmetric generator, from its entries (no eigenvalues). The
# learner's function gets entries that count the arithmetic done with them (``_guard.counting``): a closed form
# costs dozens of operations; eigenvalue routines cannot take them, and an iteration (power iteration, repeated
# squaring, in numpy or by hand) spends the budget long before it converges on the nearly-equal case.
def _tilted(thetas: tuple[float, float], seed: int) -> torch.Tensor:
    """Q B Qᵀ: RoPE's generator with these frequencies, in a random orthonormal basis Q (seeded)."""
    B = torch.zeros(4, 4, dtype=torch.float64)
    B[0, 1], B[1, 0], B[2, 3], B[3, 2] = -thetas[0], thetas[0], -thetas[1], thetas[1]
    q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    return q @ B @ q.T


def _skew(seed: int) -> torch.Tensor:
    m = torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))
    return m - m.T


TILTED_OPS = 400  # operations on A's entries per generator: a closed form takes under 200 (two 4 x 4 products
# included); converging on the nearly-equal generator by products takes thousands
TILTED_STEPS = 5000  # Python lines per generator: room for a formula written with small helper loops


def _tilted_cases() -> list[tuple[str, torch.Tensor]]:
    """The generators the checker asks about (not the answers): RoPE's own (§5's d = 4), tilted ones, random ones,
    and one with two nearly equal frequencies (where iterating towards the faster one is slow)."""
    rope4 = torch.tensor([[0, -1, 0, 0], [1, 0, 0, 0], [0, 0, 0, -0.01], [0, 0, 0.01, 0]], dtype=torch.float64)
    return [("RoPE's own generator, d = 4", rope4), ("the same frequencies, tilted", _tilted((1.0, 0.01), seed=5)),
            ("a random skew-symmetric A", _skew(11)), ("another tilted A", _tilted((2.0, 0.5), seed=9)),
            ("another random one", 3 * _skew(23)), ("two nearly equal frequencies", _tilted((1.0, 0.995), seed=13))]


def _plain(raw: Any) -> Any:
    """The learner's answer with the checker's counting entries read back (lists, tuples, object arrays)."""
    if getattr(raw, "dtype", None) == object and hasattr(raw, "tolist"):  # a numpy array of the entries
        raw = raw.tolist()
    if isinstance(raw, (list, tuple)):
        return [_plain(x) for x in raw]
    return value_of(raw)


def rope_tilted_frequencies(fn: Callable[[Any], Any] | None) -> bool | None:
    """Exercise 4: fn(A) -> the two frequencies (faster first) of a 4 x 4 skew-symmetric A, as a formula in its
    entries. A comes as 4 rows of ``_guard.Counted`` entries (+, −, ×, /, **, abs and comparisons work; no float,
    tensor or array of them), with ``TILTED_OPS`` operations and ``TILTED_STEPS`` Python lines per generator.
    The checker measures the frequencies by eigenvalues itself, after fn has run."""

    def run(fn: Callable[[Any], Any]) -> Iterator[Verdict]:
        cases = _tilted_cases()

        def on_counted_entries(n: int) -> Any:
            try:
                return fn(counting(cases[n][1], TILTED_OPS))
            except (TypeError, RuntimeError, ValueError) as e:  # torch.tensor(A), numpy's float arrays, ...
                if "Counted" in str(e) or "counts its arithmetic" in str(e):
                    raise Shortcut("torch.tensor or numpy.array on the checker's entries") from e
                raise

        unwrap = [(sys.modules[value_of.__module__], "value_of", "check._guard.value_of"),  # the checker's own read
                  (sys.modules[__name__], "value_of", "check.ch05.value_of")]
        by_case, stopped = answers_under_guard(on_counted_entries, [(n,) for n in range(len(cases))], unwrap,
                                               steps_per_case=TILTED_STEPS)
        if stopped is not None:
            yield stopped_verdict(stopped[1], f"{cases[stopped[0][0]][0]}: your function",
                                  shortcut="the entries count the arithmetic done with them, and only +, −, ×, /, **, "
                                           "abs and comparisons keep them counting: the exercise asks for a formula "
                                           "in A's entries",
                                  loop=f"does more than {TILTED_OPS} operations on A's entries (or runs more than "
                                       f"{TILTED_STEPS} Python lines): an iteration towards the eigenvalues, not a "
                                       "formula in A's entries")
            return
        for (name, A), raw in zip(cases, by_case.values()):
            got = float64_tensor(_plain(raw))
            if got is None or got.numel() != 2:
                yield False, f"{name}: expected two numbers, the faster frequency first"
                return
            # measured here (fn is done): the square roots of AᵀA's eigenvalues, each frequency twice, fastest last
            got, want = got.flatten(), torch.linalg.eigvalsh(A.T @ A).clamp(min=0).sqrt()[[3, 0]]
            tol = dict(atol=2e-5, rtol=1e-5)
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
