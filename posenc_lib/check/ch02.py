"""Checkers for notebooks/02_integer_binary.ipynb: integer and binary codes, affine maps between positions."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from .. import absolute
from ._core import Verdict, report

__all__ = ["affine_counter", "carry_steps", "smallest_bits", "integer_cosine"]


# Exercise 1: the 2-bit code p_0..p_3, offsets k = 1, 2, 3, with and without wrap-around.
COUNTER_BITS = 2
COUNTER_OFFSETS = (1, 2, 3)


def no_affine_offsets(wrap: bool, d: int = COUNTER_BITS) -> list[int]:
    """The offsets k (1 .. 2**d - 1) for which no affine map sends p_i to p_{i+k} on the d-bit code.

    wrap: positions count mod 2**d (p_{(i+k) mod 2**d}); otherwise only the pairs with i + k < 2**d.
    """
    table = absolute.binary_positions(2**d, d, dtype=torch.float64)
    out = []
    for k in range(1, 2**d):
        rows = torch.cat([table, table[:k]]) if wrap else table  # appended rows: the pairs that wrap
        if absolute.affine_shift_residual(rows, k) > 1e-9:
            out.append(k)
    return out


def affine_counter(answer: Any) -> bool | None:
    """Exercise 1: {"wrap": [k, ...], "no_wrap": [k, ...]}, the offsets k in 1..3 with no affine map
    p_i -> p_{i+k} on the 2-bit code, with and without wrap-around."""

    def run(ans: Any) -> Iterator[Verdict]:
        if not isinstance(ans, dict) or set(ans) != {"wrap", "no_wrap"}:
            yield False, f"answer must be a dict with the keys 'wrap' and 'no_wrap', got {ans!r}"
            return
        for part, wrap in (("wrap", True), ("no_wrap", False)):
            got = ans[part]
            if not isinstance(got, (list, tuple, set)) or not all(
                    isinstance(k, int) and not isinstance(k, bool) and k in COUNTER_OFFSETS for k in got):
                yield False, f"{part}: give a list of offsets from {list(COUNTER_OFFSETS)} (maybe empty), got {got!r}"
                continue
            want = set(no_affine_offsets(wrap))
            extra, missing = set(got) - want, want - set(got)
            if not extra and not missing:
                yield True, (f"{part}: right: " + ("the four codes form a square, p_0 + p_3 = p_1 + p_2, and an "
                                                   "affine f must keep that balance" if wrap else
                                                   "at most 3 pairs, and 3 points not on a line can go anywhere"))
                continue
            if extra:
                yield False, (f"{part}: {len(extra)} of your offsets {'has' if len(extra) == 1 else 'have'} an "
                              "exact affine map (try to build it)")
            if missing:
                plural = "s" if len(missing) > 1 else ""
                yield False, f"{part}: {len(missing)} offset{plural} with no affine map missing"

    return report("offsets with no affine map on the 2-bit code", answer, run,
                  "draw the four codes as points in the plane: what linear relation holds among the four "
                  "corners, and what does f(p) = Mp + b do to such a relation? Without wrap-around, count "
                  "what f has to fit")


def carry_steps(answer: Any, d: int = 6) -> bool | None:
    """Exercise 2: {t: how many steps p_i -> p_{i+1}, i = 0 .. 2**d - 2, flip exactly t bits}, t = 1 .. d."""

    def run(ans: Any) -> Iterator[Verdict]:
        if not isinstance(ans, dict) or set(ans) != set(range(1, d + 1)):
            yield False, f"answer must be a dict with the keys 1 .. {d} (bits flipped), got {ans!r}"
            return
        if not all(isinstance(c, int) and not isinstance(c, bool) and c >= 0 for c in ans.values()):
            yield False, "every count must be a whole number >= 0"
            return
        table = absolute.binary_positions(2**d, d)
        flipped = (table[1:] != table[:-1]).sum(-1)
        want = {t: int((flipped == t).sum()) for t in range(1, d + 1)}
        total = sum(ans.values())
        yield total == 2**d - 1, (f"the counts add up to the {2**d - 1} steps" if total == 2**d - 1
                                  else f"the counts add up to {total}, but there are {2**d - 1} steps")
        wrong = [t for t in want if ans[t] != want[t]]
        yield not wrong, ("every count is right: half the steps have length 1, and one step (a carry through "
                          f"every bit) has length sqrt({d})" if not wrong
                          else f"{len(wrong)} of the {d} counts {'is' if len(wrong) == 1 else 'are'} wrong")

    return report(f"how many steps of the {d}-bit code flip t bits", answer, run,
                  "adding 1 flips bit 0; when bit 0 was 1 the carry flips bit 1 too, and so on: how many bits "
                  "flip depends on how i ends in binary. How many i < 63 end in a given pattern?")


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
                  "d bits name the positions 0 .. 2**d - 1: which position is the largest one you must name?")


# Exercise 4: from which position i on is cos(x, x + p_i) below this, for a LayerNorm-ed x of these widths?
DROWN_COS = 0.1
DROWN_WIDTHS = (64, 4096)


def drowned_position(d: int, threshold: float = DROWN_COS) -> int:
    """The smallest i with cos(x, x + p_i) < threshold, measured on a LayerNorm-ed random x of d features."""
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.layer_norm(torch.randn(d, generator=g, dtype=torch.float64), (d,))
    i = 0
    while torch.nn.functional.cosine_similarity(x, x + i * torch.ones_like(x), dim=0) >= threshold:
        i += 1
    return i


def integer_cosine(answer: Any) -> bool | None:
    """Exercise 4: (i for d = 64, i for d = 4096), the smallest position i with cos(x, x + p_i) < 0.1
    for a LayerNorm-ed token x and the integer code p_i = i * 1."""

    def run(ans: Any) -> Iterator[Verdict]:
        if not isinstance(ans, (tuple, list)) or len(ans) != len(DROWN_WIDTHS) or not all(
                isinstance(i, int) and not isinstance(i, bool) for i in ans):
            yield False, f"answer must be a pair of whole numbers (i for d = 64, i for d = 4096), got {ans!r}"
            return
        for d, got in zip(DROWN_WIDTHS, ans):
            want = drowned_position(d)
            if got == want:
                yield True, f"d = {d}: from position {want} on, cos(x, x + p_i) < {DROWN_COS}"
            elif got < want:
                yield False, f"d = {d}: not {got}: at position {got} the cosine is still {DROWN_COS} or more"
            else:
                yield False, f"d = {d}: not {got}: an earlier position already has cos < {DROWN_COS}"
        if ans[0] != ans[1]:
            yield False, "your two answers differ: write the cosine out and see what becomes of d"

    return report(f"the first position whose integer code drowns the token (cos < {DROWN_COS})", answer, run,
                  "LayerNorm fixes the mean and the length of x: what are x . 1 and ||x||? "
                  "Write x . (x + p_i) and ||x + p_i|| with them")
