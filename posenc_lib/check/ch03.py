"""Checkers for notebooks/03_sinusoids.ipynb (sinusoidal position encodings).

Each checker takes the learner's answer (a number or a function), compares it with
``posenc_lib`` and prints what is right, what is wrong and a hint. None (or a function
still raising NotImplementedError) counts as not attempted (see _core for grading mode).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import torch

from ..absolute import affine_shift_residual, sinusoidal_positions
from ..angles import rope_frequencies
from ._core import Verdict, close, report

__all__ = ["pe_entry", "shift_matrix", "wavelengths", "sine_only_offsets"]


def _f64_freqs(d: int, base: float = 10000.0) -> torch.Tensor:
    return rope_frequencies(d, base=base, dtype=torch.float64)


def pe_entry(answer: Any, *, position: int = 7, column: int = 3, d: int = 10) -> bool | None:
    """Exercise: the value of PE[position, column] for d features (base 10000), by hand.

    answer: a number (float, or a 0-d tensor)
    """
    want = sinusoidal_positions(position + 1, d, dtype=torch.float64)[position, column].item()
    j, fn = column // 2, ("sin" if column % 2 == 0 else "cos")

    def run(ans: Any) -> Iterator[Verdict]:
        try:
            got = float(ans)
        except (TypeError, ValueError, RuntimeError):
            yield False, f"expected one number, got {type(ans).__name__}"
            return
        if abs(got - want) < 1e-4:
            yield True, f"PE[{position}, {column}] = {fn}({position} · 10000^(−{2 * j}/{d})) = {want:.6f}"
            return
        other = math.cos if fn == "sin" else math.sin
        if abs(got - other(position * 10000 ** (-2 * j / d))) < 1e-4:
            yield False, f"{got:.6f} uses the wrong function: column {column} is {'even' if fn == 'sin' else 'odd'}"
        elif abs(got - getattr(math, fn)(position * 10000 ** (-column / d))) < 1e-4:
            yield False, f"{got:.6f} uses the column index {column} in the exponent instead of 2j = {2 * j}"
        else:
            yield False, f"PE[{position}, {column}] is not {got:.6f}"

    return report(
        f"PE[{position}, {column}] for d = {d}",
        answer,
        run,
        "which pair j does column c belong to, is it a sine or a cosine column, and what is that pair's θ_j? (§1)",
    )


def _call(fn: Callable, *args: Any) -> torch.Tensor:
    out = fn(*args)
    return torch.as_tensor(out, dtype=torch.float64)


def shift_matrix(fn: Callable[[int, int], Any] | None) -> bool | None:
    """Exercise: write shift_matrix(k, d) -> (d, d) with PE[p + k] = M_k @ PE[p] (concatenated layout)."""

    def run(f: Callable) -> Iterator[Verdict]:
        for d, k in ((2, 1), (4, 3), (8, -5), (16, 40)):
            M = _call(f, k, d)
            if M.shape != (d, d):
                yield False, f"shift_matrix({k}, {d}) has shape {tuple(M.shape)}, expected ({d}, {d})"
                return
            P = sinusoidal_positions(200, d, dtype=torch.float64, layout="concat")
            p = torch.arange(60, 70)
            ok = close(P[p + k], P[p] @ M.T, atol=1e-6)
            if not ok:
                back = close(P[p - k], P[p] @ M.T, atol=1e-6)
                interleaved = sinusoidal_positions(200, d, dtype=torch.float64)
                if back:
                    yield False, f"shift_matrix({k}, {d}) shifts by −k: check the signs of the sine entries"
                elif close(interleaved[p + k], interleaved[p] @ M.T, atol=1e-6) and d > 2:
                    yield False, f"shift_matrix({k}, {d}) is M_k for the interleaved layout, not the concatenated one"
                else:
                    yield False, f"shift_matrix({k}, {d}) @ PE[p] differs from PE[p + {k}] (concatenated layout)"
                return
            yield True, f"shift_matrix({k}, {d}) @ PE[p] == PE[p + {k}] for p = 60..69"

    return report(
        "the shift matrix M_k",
        fn,
        run,
        "the angle-addition formulas of §4 still hold per pair; only the rows of sin and cos moved "
        "(θ_j from pl.rope_frequencies(d))",
    )


def wavelengths(fn: Callable[..., Any] | None) -> bool | None:
    """Exercise: write wavelengths(d, base) -> (d // 2,): how many positions pair j takes to repeat."""

    def run(f: Callable) -> Iterator[Verdict]:
        for d, base in ((8, 10000.0), (64, 10000.0), (16, 100.0)):
            got = _call(f, d, base)
            want = 2 * math.pi / _f64_freqs(d, base)
            if got.shape != want.shape:
                yield False, f"wavelengths({d}, {base:g}) has shape {tuple(got.shape)}, expected {tuple(want.shape)}"
                return
            if not torch.allclose(got, want, rtol=1e-5):
                if torch.allclose(got, 1 / _f64_freqs(d, base), rtol=1e-5):
                    yield False, f"wavelengths({d}, {base:g}) is the period in radians-per-step, missing the 2π"
                else:
                    yield False, f"wavelengths({d}, {base:g}) = {got[:3].tolist()}... is wrong"
                return
            yield True, f"wavelengths({d}, {base:g}) runs from {want[0]:.3f} to {want[-1]:.1f} positions"

    return report(
        "the wavelength of each pair",
        fn,
        run,
        "after how many positions has the angle p·θ_j grown by one full turn?",
    )


SINE_THETA = math.pi / 6  # one column p_i = sin(i θ): a sine without its cosine
SINE_OFFSETS = range(1, 25)


def _affine_offsets(theta: float, offsets: range, n: int = 60) -> list[int]:
    """The offsets k for which an exact affine map takes sin(i θ) to sin((i + k) θ), by least squares."""
    column = torch.sin(torch.arange(n, dtype=torch.float64) * theta).unsqueeze(1)
    return [k for k in offsets if affine_shift_residual(column, k) < 1e-6]


def _repeats(n: int = 60) -> set[int]:
    """The offsets after which the column sin(i θ) repeats itself: there the map is the identity."""
    column = torch.sin(torch.arange(n, dtype=torch.float64) * SINE_THETA)
    return {k for k in SINE_OFFSETS if torch.allclose(column[k:], column[:-k], atol=1e-9)}


def sine_only_offsets(answer: Any) -> bool | None:
    """Exercise: the offsets k = 1..24 with an exact affine map p_{i+k} = a p_i + b for p_i = sin(i π/6).

    answer: a list (or set) of integers
    """
    want = set(_affine_offsets(SINE_THETA, SINE_OFFSETS))

    def run(ans: Any) -> Iterator[Verdict]:
        if not isinstance(ans, (list, tuple, set)) or not all(
                isinstance(k, int) and not isinstance(k, bool) for k in ans):
            yield False, f"answer must be a list of integer offsets from 1 to 24, got {ans!r}"
            return
        got = set(ans)
        if not got <= set(SINE_OFFSETS):
            yield False, f"offsets run from 1 to 24; {sorted(got - set(SINE_OFFSETS))} are outside"
            return
        wrong, missed = sorted(got - want), want - got
        for k in wrong:
            yield False, f"k = {k}: no affine map takes sin(iθ) to sin((i + {k})θ) for every i"
        if missed:
            extra = " (the map need not be the identity: its slope a may be negative)" if got == _repeats() else ""
            yield False, f"{len(missed)} offset(s) with an exact affine map are missing{extra}"
        if not wrong and not missed:
            yield True, f"exactly {len(want)} offsets from 1 to 24 have one"

    return report(
        "offsets with an affine map for a sine alone",
        answer,
        run,
        "expand sin((i + k)θ) with the angle-addition formula of §4: which term can no affine function "
        "of sin(iθ) supply, and for which k does it vanish?",
    )
