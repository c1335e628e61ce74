"""Checkers for notebooks/05_rope.ipynb (rotary position embedding).

Each checker takes the learner's answer (a function), checks it and prints what is
right, what is wrong and a hint. None (or a function still raising NotImplementedError) counts as not
attempted (see _core for grading mode). The module holds no answer: Ex 1's encoding is checked by the dot products
of its encodings of the checker's own vectors against the scores it must give, computed as the exercise writes them;
a pair index is checked by the property that defines it; and the frequencies of a generator
are measured on the checker's own matrices after the learner's function has run.
"""
from __future__ import annotations

import math
import os
import random
import sys
from typing import Any, Callable, Iterator

import numpy
import torch

from ..rotary import apply_rope
from ._core import Verdict, close, float64_tensor, number, report, whole_number
from ._guard import Counted, Shortcut, answers_under_guard, counting, shadow_of, stopped_verdict, value_of

__all__ = ["rope_undirected", "rope_first_slow_pair", "rope_tilted_frequencies"]


# Exercise 1: RoPE's score with the direction forgotten. The learner designs an encoding E(x, positions), applied
# alike to queries and keys, with <E(q, m), E(k, n)> = (<R_m q, R_n k> + <R_n q, R_m k>) / 2 for every q, k, m, n.
# The checker holds no encoding: it encodes its own vectors one at a time (so no encoding can depend on the other
# tokens) and compares the dot products of the encodings with that right side, computed as written; then it encodes
# them all in one call, which must give the same rows (a real call has many tokens).
UNDIRECTED_D = 8
UNDIRECTED_POSITIONS = (0, 1, 4, 9, 30, 250, 1001, 4096)
UNDIRECTED_MOVES = {"as given": lambda p: p, "moved by 1000": lambda p: p + 1000,
                    "mirrored (every offset changes sign)": lambda p: 5000 - p, "all at 0": lambda p: 0 * p}


def _undirected_inputs() -> tuple[torch.Tensor, torch.Tensor]:
    """The checker's own vectors (one per position, d = 8, float64) and positions: the learner never sees them."""
    x = torch.randn(len(UNDIRECTED_POSITIONS), UNDIRECTED_D, dtype=torch.float64,
                    generator=torch.Generator().manual_seed(2026))
    return x, torch.tensor(UNDIRECTED_POSITIONS)


def _averaged_scores(x: torch.Tensor, pos: torch.Tensor, layout: str = "interleaved") -> torch.Tensor:
    """[i, j] = (<R_(p_i) x_i, R_(p_j) x_j> + <R_(p_j) x_i, R_(p_i) x_j>) / 2, as the exercise writes it."""
    n = len(pos)
    turned = apply_rope(x[:, None, :].expand(n, n, x.shape[-1]), pos, layout=layout)  # [i, j] = R_(p_j) x_i
    own = turned[torch.arange(n), torch.arange(n)]  # R_(p_i) x_i
    return (own @ own.T + (turned * turned.transpose(0, 1)).sum(-1)) / 2


def _encoded_one_at_a_time(fn: Callable[[Any, Any], Any], x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor | str:
    """fn on each (1, d) row and its (1,) position alone, stacked to (seq, d'); else a text saying what is wrong."""
    rows = []
    for i in range(len(pos)):
        raw = fn(x[i:i + 1].clone(), pos[i:i + 1].clone())
        complex_out = raw.is_complex() if isinstance(raw, torch.Tensor) else getattr(raw, "dtype", None) is not None \
            and getattr(raw.dtype, "kind", "") == "c"  # a numpy array of complex numbers
        if complex_out:
            return ("expected a real tensor of shape (seq, d'): the scores are dot products of real vectors, and a "
                    "complex encoding's imaginary parts would be dropped")
        got = float64_tensor(raw)
        if got is None or got.dim() == 0 or got.numel() == 0:
            return "expected a real tensor of shape (seq, d') for each call"
        if got.dim() > 1 and got.shape[0] != 1:
            return f"one token in gave {got.shape[0]} rows out: expected one row per token, of shape (seq, d')"
        rows.append(got.reshape(-1))
    if len({len(r) for r in rows}) != 1:
        return "the width d' of your encoding changes with the token or the position: it must be one width"
    out = torch.stack(rows)
    return out if bool(out.isfinite().all()) else "your encoding is not finite at some of the checker's positions"


def rope_undirected(fn: Callable[[Any, Any], Any] | None) -> bool | None:
    """Exercise 1: fn(x, positions) -> (seq, d'), one encoding for queries and keys alike, such that
    <fn(q, m), fn(k, n)> = (<R_m q, R_n k> + <R_n q, R_m k>) / 2: RoPE's score (pairs (2j, 2j + 1), base 10 000)
    averaged over the key's two sides of the query. x: (seq, d) float64; positions: (seq,) int64."""

    def run(fn: Callable[[Any, Any], Any]) -> Iterator[Verdict]:
        x, pos = _undirected_inputs()
        grams, alone = {}, {}
        for name, move in UNDIRECTED_MOVES.items():
            encoded = _encoded_one_at_a_time(fn, x, move(pos))
            if isinstance(encoded, str):
                yield False, encoded
                return
            alone[name], grams[name] = encoded, encoded @ encoded.T  # grams[i, j]: token i's score with token j
        # the same tokens in one call, as a model makes it: each row must be that token's encoding alone
        together = float64_tensor(fn(x.clone(), pos.clone()))
        if together is None or together.shape != alone["as given"].shape \
                or not close(together, alone["as given"], atol=1e-6, rtol=1e-6):
            yield False, (f"called on all {len(pos)} tokens at once, your encoding is not the same tokens encoded one "
                          "at a time: a token's row must depend on its own vector and position only, not on the "
                          "other rows of the call")
            return
        tol = dict(atol=1e-6, rtol=1e-6)
        target = {name: _averaged_scores(x, move(pos)) for name, move in UNDIRECTED_MOVES.items()}
        if all(close(grams[name], target[name], **tol) for name in UNDIRECTED_MOVES):
            yield True, ("the direction is forgotten and the distance kept, by one encoding of queries and keys: "
                         "on the checker's vectors and positions, your encodings' dot products are the averaged scores")
            return
        G, T = grams["as given"], target["as given"]
        turned = apply_rope(x, pos)
        # float32 keeps about 7 digits: an angle at position ~5000 is off by ~1e-4 rad (3e-6 in these scores), while
        # every design the messages below name is off by more than 0.01. Name the precision, not a wrong design.
        off = max(float((grams[name] - target[name]).abs().max()) for name in UNDIRECTED_MOVES)
        if off < 1e-4:
            yield False, (f"your scores are the averaged ones to within {off:.0e}, not the 1e-6 asked: at the "
                          "checker's positions (up to about 5000) an angle computed in float32, which keeps about 7 "
                          "significant digits, is already off by about 1e-4 rad; compute the angles in float64")
            return
        if close(G, turned @ turned.T, **tol):
            why = "that is RoPE's own score: a key r positions ahead and one r behind still score differently"
        elif not close(grams["moved by 1000"], G, **tol):
            why = ("your scores change when every position moves by 1000: they depend on where the tokens sit, "
                   "not only on how far apart they are")
        elif not close(grams["mirrored (every offset changes sign)"], G, **tol):
            why = "your scores change when every offset changes sign: they still tell a key ahead from one behind"
        elif close(G, grams["all at 0"], **tol):
            why = "your scores do not change with the distance: the positions are left out"
        elif close(G, _averaged_scores(x, pos, layout="half"), **tol):
            why = ("your pairs are features j and j + d/2 (§6c's half layout); R_m of the exercise pairs features "
                   "2j and 2j + 1")
        elif (G * T).sum() != 0 and close(G * (T * T).sum() / (G * T).sum(), T, **tol):  # G = c T
            why = ("your scores forget the direction and follow the distance as they should, but are the right "
                   "ones times a constant: at m = n the score must be ⟨q, k⟩")
        else:
            why = ("your scores forget the direction and do not depend on where the tokens sit, but they are not "
                   "RoPE's score averaged over the key's two sides")
        yield False, why

    return report("RoPE with the direction forgotten: one encoding, scores that see only the distance", fn, run,
                  "§3: a score does not change when both positions move by the same amount")


# Exercise 2: the first pair whose angle never reaches a full turn, as a formula. The checker holds no answer:
# it checks the property that defines one (pair j stays below 2π at position L - 1, pair j - 1 does not).
SLOW_SETTINGS = ((128, 10000.0, 4096), (64, 10000.0, 2048), (128, 500000.0, 8192), (96, 10000.0, 512),
                 (16, 100.0, 1000), (32, 10000.0, 7), (32, 10000.0, 3), (10**12, 10000.0, 4096), (2 * 10**9, 500000.0, 131072))
SLOW_STEPS = 30  # Python lines per question: a formula takes a few; a search over 10^11 pairs takes over 100
SLOW_DRAWN = 2  # settings drawn anew at every check, so answers worked out in advance for the fixed ones do not pass


def _drawn_slow_settings(rng: "random.Random | None" = None, count: int = SLOW_DRAWN) -> tuple[tuple[int, float, int], ...]:
    """Settings the learner cannot see before the check: d even in [10^7, 10^10] (a search over d/2 pairs needs
    more than SLOW_STEPS lines even when it halves), base log-uniform in [100, 10^6], L in [100, 10^6]; a draw
    whose bound (d/2)·ln((L − 1)/2π)/ln(base) lies within 0.01 of a whole number, or past d/2 − 1, is drawn again,
    so float64 rounding cannot decide it."""
    rng = rng or random.SystemRandom()
    drawn: list[tuple[int, float, int]] = []
    while len(drawn) < count:
        d = 2 * rng.randrange(5 * 10**6, 5 * 10**9)
        base, L = 10 ** rng.uniform(2, 6), rng.randrange(100, 10**6)
        bound = (d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)
        if bound < d // 2 - 1 and 0.01 < bound % 1 < 0.99:
            drawn.append((d, base, L))
    return tuple(drawn)


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
        settings = SLOW_SETTINGS + _drawn_slow_settings()
        answers, stopped = answers_under_guard(fn, settings, _frequency_functions(), steps_per_case=SLOW_STEPS)
        for setting in settings:
            d, base, L = setting
            where = f"d={d:,}, base={base:.6g}, L={L:,}"
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
            if got < 0 and L - 1 < 2 * math.pi:
                yield False, (f"{where}: {got} is not a pair index (pairs are 0 .. d/2 − 1): a context so short that "
                              "even the fastest pair never turns still has a first slow pair")
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
                yield False, f"{where}: pair {got} still completes a full turn by position L − 1"
            elif _largest_turns(got - 1, d, base, L + 1) >= 1:
                yield False, (f"{where}: pair {got - 1} reaches a full turn only at position L, one past the context: "
                              "its positions run 0 … L − 1")
            else:
                yield False, f"{where}: pair {got - 1} already stays below one turn: find the smallest such j"
            return
        yield True, (f"the first slow pair, right for all {len(settings)} (d, base, L) settings, {SLOW_DRAWN} of them "
                     "drawn at random for this check")

    return report("the first pair that never completes a turn", fn, run,
                  "the frequencies θ_j form a geometric sequence in j")


# Exercise 3: the two frequencies of a 4 x 4 skew-symmetric generator, from its entries (no eigenvalues). The
# learner's function gets entries that count the arithmetic done with them (``_guard.counting``): a closed form
# costs dozens of operations; eigenvalue routines cannot take them, and an iteration (power iteration, repeated
# squaring, in numpy or by hand) spends the budget long before it converges on the nearly-equal case. Each entry
# carries a shadow through the same arithmetic: the same entry of a second tilted generator with other frequencies
# (``_shadow_generator``). A formula in the entries gives that generator's frequencies on the shadows; values read
# past the count by introspection and mixed into the answer (even scaled by a counted term) do not.
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


def _pfaffian(A: torch.Tensor) -> float:
    return float(A[0, 1] * A[2, 3] - A[0, 2] * A[1, 3] + A[0, 3] * A[1, 2])


SHADOW_FREQUENCIES = (1.3, 0.4)  # the shadow generator's: well apart, and apart from every case's


def _shadow_generator(A: torch.Tensor, seed: int) -> torch.Tensor:
    """A tilted generator with ``SHADOW_FREQUENCIES`` whose Pfaffian has A's sign, so that a formula right on A
    (which may use the Pfaffian's sign) takes the same branches on the shadow and gives its frequencies."""
    slow = SHADOW_FREQUENCIES[1] if _pfaffian(A) * _pfaffian(_tilted(SHADOW_FREQUENCIES, seed)) > 0 else \
        -SHADOW_FREQUENCIES[1]
    return _tilted((SHADOW_FREQUENCIES[0], slow), seed)


def _shadows(raw: Any) -> list[Any] | None:
    """The shadows of the answer's numbers (``_guard.shadow_of``), or None if one of them is not a ``Counted``
    result at all (a plain number read, measured or typed outside the counted arithmetic)."""
    if getattr(raw, "dtype", None) == object and hasattr(raw, "tolist"):
        raw = raw.tolist()
    if isinstance(raw, (list, tuple)):
        parts = [_shadows(x) for x in raw]
        return None if any(p is None for p in parts) else parts
    return [shadow_of(raw)] if isinstance(raw, Counted) else None


FLOAT_ROUTES = ("float() on one of the checker's entries or on a number made from them (math.sqrt and math's other "
                "functions call it, as do int(), a format and a pickle)")
_NUMERIC_LIBRARIES = tuple(os.path.dirname(m.__file__) for m in (numpy, torch))


def _float_routine(e: BaseException) -> str | None:
    """The shortcut behind an error of the learner's function, if a float routine refused the checker's entries:
    a tensor or float array of them, or numpy's and torch's linear algebra and ufuncs on an object array of them."""
    text = str(e)
    routine = ("a numpy or torch routine that needs floats (eigenvalues, a decomposition, a determinant, a ufunc "
               "such as numpy.sqrt) on the checker's entries or on numbers made from them")
    if "ufunc" in text or "dtype('O')" in text or "object_" in text:  # numpy's object arrays, torch.from_numpy
        return routine
    if "Counted" in text or "counts its arithmetic" in text:  # torch.tensor(A), a float array of A
        return "torch.tensor or numpy.array on the checker's entries"
    tb = e.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename.startswith(_NUMERIC_LIBRARIES):
            return routine
        tb = tb.tb_next
    return None


def rope_tilted_frequencies(fn: Callable[[Any], Any] | None) -> bool | None:
    """Exercise 3: fn(A) -> the two frequencies (faster first) of a 4 x 4 skew-symmetric A, as a formula in its
    entries. A comes as 4 rows of ``_guard.Counted`` entries (+, −, ×, /, **, abs and comparisons work; no float,
    tensor or array of them), with ``TILTED_OPS`` operations and ``TILTED_STEPS`` Python lines per generator.
    The checker measures the frequencies by eigenvalues itself, after fn has run, and asks that the answer's shadow
    (the same arithmetic on a second generator's entries, ``_shadow_generator``) be that generator's frequencies,
    as a formula's is."""

    def run(fn: Callable[[Any], Any]) -> Iterator[Verdict]:
        cases = _tilted_cases()

        def on_counted_entries(n: int) -> Any:
            try:
                return fn(counting(cases[n][1], TILTED_OPS, shadow=_shadow_generator(cases[n][1], seed=40 + n)))
            except Shortcut as e:  # an entry's float(): name the everyday routes to it, math.sqrt first
                if e.name.startswith("float()"):
                    raise Shortcut(FLOAT_ROUTES) from e
                raise
            except (TypeError, RuntimeError, ValueError) as e:  # torch.tensor(A), numpy's linalg on A's entries, ...
                routine = _float_routine(e)
                if routine is not None:
                    raise Shortcut(routine) from e
                raise

        unwrap = [(sys.modules[value_of.__module__], "value_of", "check._guard.value_of"),  # the checker's own read
                  (sys.modules[__name__], "value_of", "check.ch05.value_of"),
                  (sys.modules[shadow_of.__module__], "shadow_of", "check._guard.shadow_of"),
                  (sys.modules[__name__], "shadow_of", "check.ch05.shadow_of")]
        by_case, stopped = answers_under_guard(on_counted_entries, [(n,) for n in range(len(cases))], unwrap,
                                               steps_per_case=TILTED_STEPS)
        if stopped is not None:
            yield stopped_verdict(stopped[1], f"{cases[stopped[0][0]][0]}: your function",
                                  shortcut="the entries, and every number made from them, count the arithmetic "
                                           "done with them, and only +, −, ×, /, ** (x ** 0.5 for a square root), "
                                           "abs, sum, max and comparisons keep them counting",
                                  loop=f"does more than {TILTED_OPS} operations on A's entries (or runs more than "
                                       f"{TILTED_STEPS} Python lines): an iteration towards the eigenvalues, not a "
                                       "formula in A's entries")
            return
        outside = None  # the first case whose right numbers lack a formula's shadow
        for (name, A), raw in zip(cases, by_case.values()):
            got = float64_tensor(_plain(raw))
            if got is None or got.numel() != 2:
                yield False, f"{name}: expected two numbers, the faster frequency first"
                return
            # measured here (fn is done): the square roots of AᵀA's eigenvalues, each frequency twice, fastest last
            got, want = got.flatten(), torch.linalg.eigvalsh(A.T @ A).clamp(min=0).sqrt()[[3, 0]]
            tol = dict(atol=2e-5, rtol=1e-5)
            if close(got, want, **tol):
                shadows = _shadows(raw)
                shadow = None if shadows is None else float64_tensor(shadows)
                if shadow is None:  # not a counted result at all: refused at once
                    outside = (name, "a number read or typed outside it is the answer")
                    break
                # the shadow's order follows the value's comparisons, so compare the shadow answer as a set; a
                # wrong shadow is judged after every generator's numbers, so that a wrong answer is told so first
                shadow_want = torch.tensor(SHADOW_FREQUENCIES, dtype=torch.float64)
                if not close(shadow.flatten().abs().sort().values, shadow_want.sort().values, atol=4e-5, rtol=1e-5):
                    outside = outside or (name, "the same arithmetic on another generator's entries does not give "
                                                "its frequencies")
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
        if outside is not None:
            yield False, (f"{outside[0]}: the right numbers, but not made from A's entries by the counted arithmetic "
                          f"alone: {outside[1]}")
            return
        yield True, (f"right for {len(cases)} generators: the frequencies are properties of A that no change of "
                     "basis can alter, which is why the basis Q costs nothing")

    return report("the frequencies of a tilted generator, in closed form", fn, run,
                  "§3: A = Q B Qᵀ with an orthonormal Q and RoPE's generator B; which numbers that you can compute "
                  "from A's entries stay the same when Q changes?")
