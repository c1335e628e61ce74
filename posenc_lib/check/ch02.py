"""Checkers for notebooks/02_integer_binary.ipynb: integer, normalised and binary codes."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import torch

from .. import absolute
from ._core import Verdict, close, report

__all__ = ["binary_code", "normalised_step", "smallest_bits", "integer_cosine"]


def binary_code(answer: Any, position: int = 13, d: int = 5) -> bool | None:
    """Exercise 1: the d-bit binary code of ``position``, most significant bit first."""

    def run(ans: Any) -> Iterator[Verdict]:
        if not (isinstance(position, int) and isinstance(d, int) and d >= 1 and 0 <= position < 2**d):
            yield False, f"this exercise needs 0 <= position < 2**d, got position={position!r}, d={d!r}"
            return
        got = torch.as_tensor(ans, dtype=torch.float64).flatten()
        want = absolute.binary_positions(position + 1, d, dtype=torch.float64)[position]
        if got.numel() != d:
            yield False, f"a {d}-bit code has {d} entries, got {got.numel()}"
            return
        bits = bool(((got == 0) | (got == 1)).all())
        yield bits, "every entry is a bit (0 or 1)" if bits else "entries must be 0 or 1"
        if close(got, want):
            yield True, f"{position} = {''.join(str(int(b)) for b in want.tolist())} in binary"
        elif close(got, want.flip(0)):
            yield False, "these bits are in reverse order: write the most significant bit first (as binary_positions does)"
        else:
            value = int(sum(int(b) << (d - 1 - i) for i, b in enumerate(got.tolist()))) if bits else None
            yield False, f"these bits spell {value}, not {position}" if bits else f"this is not the code of {position}"

    return report(f"the {d}-bit binary code of position {position}", answer, run,
                  f"write {position} as a sum of powers of two; bit j (counting from 0 at the left) stands for 2**({d - 1} - j)")


def normalised_step(answer: Any) -> bool | None:
    """Exercise 2: (p_5 - p_3 for length m=8, the same for m=16), with p_i = i/m."""

    def run(ans: Any) -> Iterator[Verdict]:
        if not isinstance(ans, (tuple, list)) or len(ans) != 2:
            yield False, f"answer must be a pair (step for m=8, step for m=16), got {ans!r}"
            return
        for m, got in zip((8, 16), ans):
            p = absolute.integer_positions(m, 1, normalize=True, dtype=torch.float64)[:, 0]
            want = float(p[5] - p[3])
            ok = isinstance(got, (int, float)) and math.isclose(got, want, abs_tol=1e-6)
            yield ok, (f"m={m}: p_5 - p_3 = 2/{m} = {want}" if ok
                       else f"m={m}: not {got!r}; each step is 1/m and there are two steps")
        if all(isinstance(a, (int, float)) for a in ans) and not math.isclose(ans[0], ans[1]):
            yield True, "same offset k=2, different differences: the step depends on the length m"

    return report("the normalised step between positions 3 and 5", answer, run,
                  "p_i = i/m, so p_{i+k} - p_i = k/m")


def smallest_bits(fn: Any) -> bool | None:
    """Exercise 3: fn(n) -> the smallest number of bits d >= 1 with room for n positions (0..n-1)."""

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(n), got {type(f).__name__}"
            return
        wrong = []
        cases = list(range(2, 1100)) + [2**20, 2**20 + 1, 10**6]
        for n in cases:
            want = (n - 1).bit_length()
            got = f(n)
            if not (isinstance(got, int) or (isinstance(got, float) and got.is_integer())) or int(got) != want:
                wrong.append((n, got))
        yield not wrong, ("correct for n = 2 .. 1099, 2**20, 2**20 + 1 and 10**6" if not wrong
                          else f"wrong for {len(wrong)} of {len(cases)} lengths, e.g. fn({wrong[0][0]}) = "
                               f"{wrong[0][1]!r} is not the smallest number of bits")
        if not wrong:
            d = int(f(1000))
            absolute.binary_positions(1000, d)  # fits
            try:
                absolute.binary_positions(1000, d - 1)
                fits_fewer = True
            except ValueError:
                fits_fewer = False
            yield not fits_fewer, f"binary_positions(1000, {d}) works and binary_positions(1000, {d - 1}) refuses"

    return report("the smallest number of bits for n positions", fn, run,
                  "d bits name 2**d positions, 0 .. 2**d - 1; watch the powers of two: n = 1024 needs 10 bits, "
                  "n = 1025 needs 11")


def integer_cosine(answer: Any) -> bool | None:
    """Exercise 4: cos(x, x + p_3) for a LayerNorm-ed x (d = 64) and the integer code p_3 = 3 * 1."""

    def run(ans: Any) -> Iterator[Verdict]:
        if isinstance(ans, torch.Tensor) and ans.numel() == 1:
            ans = float(ans)
        if not isinstance(ans, (int, float)):
            yield False, f"answer must be a number, got {type(ans).__name__}"
            return
        want = 1 / math.sqrt(1 + 3**2)
        ok = math.isclose(ans, want, abs_tol=1e-3)
        yield ok, (f"cos = 1/sqrt(1 + 3^2) = {want:.4f}: only {want:.0%} of the direction is still the token"
                   if ok else f"not {ans:.4g}")

    return report("cosine between a token and the token plus integer position 3", answer, run,
                  "LayerNorm makes x have mean 0 (so x . 1 = 0) and length sqrt(d); p_3 = 3 * 1 has length 3 sqrt(d)")
