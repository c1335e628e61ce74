"""Checkers for notebooks/03_sinusoids.ipynb (sinusoidal position encodings).

Each checker takes the learner's answer (a number or a function), compares it with
``posenc_lib`` and prints what is right, what is wrong and a hint. None (or a function
still raising NotImplementedError) counts as not attempted (see _core for grading mode).
"""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import torch

from ..absolute import sinusoidal_positions
from ..angles import rope_angles, rope_frequencies
from ..rope import rope_matrix
from ._core import Verdict, close, report

__all__ = ["pe_entry", "shift_matrix", "wavelengths", "pe_dot"]


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
        "column c belongs to pair j = c // 2; even columns hold sin, odd ones cos, of position · 10000^(−2j/d)",
    )


def _call(fn: Callable, *args: Any) -> torch.Tensor:
    out = fn(*args)
    return torch.as_tensor(out, dtype=torch.float64)


def shift_matrix(fn: Callable[[int, int], Any] | None) -> bool | None:
    """Exercise: write shift_matrix(k, d) -> (d, d) with PE[p + k] = M_k @ PE[p] (interleaved layout)."""

    def run(f: Callable) -> Iterator[Verdict]:
        for d, k in ((2, 1), (4, 3), (8, -5), (16, 40)):
            M = _call(f, k, d)
            if M.shape != (d, d):
                yield False, f"shift_matrix({k}, {d}) has shape {tuple(M.shape)}, expected ({d}, {d})"
                return
            P = sinusoidal_positions(200, d, dtype=torch.float64)
            p = torch.arange(60, 70)
            ok = close(P[p + k], P[p] @ M.T, atol=1e-6)
            if not ok:
                want = rope_matrix(-k, d, inv_freq=_f64_freqs(d))
                if close(M, want.T, atol=1e-6):
                    yield False, f"shift_matrix({k}, {d}) is the transpose of M_k (it shifts by −k)"
                else:
                    yield False, f"shift_matrix({k}, {d}) @ PE[p] differs from PE[p + {k}]"
                return
            yield True, f"shift_matrix({k}, {d}) @ PE[p] == PE[p + {k}] for p = 60..69"

    return report(
        "the shift matrix M_k",
        fn,
        run,
        "block j is [[cos kθ_j, sin kθ_j], [−sin kθ_j, cos kθ_j]] acting on (sin, cos); "
        "use pl.rope_frequencies(d) for θ_j (or recall M_k = R_{−k} from chapter 5)",
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
        "sin(p·θ_j) repeats when p·θ_j grows by 2π, i.e. every 2π/θ_j = 2π·base^(2j/d) positions",
    )


def pe_dot(fn: Callable[[int, int], Any] | None) -> bool | None:
    """Exercise: write pe_dot(k, d) -> PE[p] · PE[p + k] (a number; it does not depend on p)."""

    def run(f: Callable) -> Iterator[Verdict]:
        for d, k in ((2, 1), (4, 0), (16, 3), (64, -17), (128, 250)):
            got = float(_call(f, k, d))
            want = rope_angles(torch.tensor([k]), d, inv_freq=_f64_freqs(d)).cos().sum().item()
            if abs(got - want) > 1e-5 * max(1.0, abs(want)):
                yield False, f"pe_dot({k}, {d}) = {got:.5f} is wrong"
                return
            yield True, f"pe_dot({k}, {d}) = {want:.5f}"

    return report(
        "PE[p] · PE[p + k]",
        fn,
        run,
        "each pair contributes sin(a)sin(b) + cos(a)cos(b) = cos(b − a) = cos(k·θ_j): sum that over j",
    )
