"""Checkers for notebooks/04_relative.ipynb: Shaw indices, T5 buckets, XL's shift, DeBERTa's p2c."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from .. import deberta, relative, xl
from ._core import Verdict, close, report

__all__ = ["shaw_index", "t5_buckets", "xl_rel_shift", "deberta_p2c"]

T5_OFFSETS = (-3, -20, 20, -500)  # key minus query; bidirectional, 32 buckets, max_distance 128


def shaw_index(fn: Any) -> bool | None:
    """Exercise 1: fn(i, j, k) -> Shaw's table row clip(j - i, -k, k) + k for query i, key j."""

    def run(f: Callable[[int, int, int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(i, j, k), got {type(f).__name__}"
            return
        wrong = []
        for k in (0, 1, 2, 5):
            table = relative.clipped_relative_positions(12, 12, k)
            for i in range(12):
                for j in range(12):
                    got = f(i, j, k)
                    if not isinstance(got, (int, torch.Tensor)) or int(got) != int(table[i, j]):
                        wrong.append((i, j, k, got))
        if not wrong:
            yield True, "right for every i, j < 12 and k in (0, 1, 2, 5)"
            return
        i, j, k, got = wrong[0]
        mirrored = all(int(f(i2, j2, 2)) == int(relative.clipped_relative_positions(12, 12, 2)[j2, i2])
                       for i2 in range(12) for j2 in range(12)) if callable(f) else False
        yield False, (f"wrong for {len(wrong)} of {4 * 144} cases, e.g. fn({i}, {j}, {k}) = {got!r}"
                      + (" (you used i - j: Shaw and this library use key minus query, j - i)" if mirrored else ""))

    return report("Shaw's clipped table index", fn, run,
                  "offset = j - i (key minus query); clip it to [-k, k]; add k so rows start at 0")


def t5_buckets(answer: Any) -> bool | None:
    """Exercise 2: T5 buckets of the offsets T5_OFFSETS (bidirectional, 32 buckets, max_distance 128)."""

    def run(ans: Any) -> Iterator[Verdict]:
        want = relative.t5_relative_bucket(torch.tensor(T5_OFFSETS)).tolist()
        if not isinstance(ans, (list, tuple)) or len(ans) != len(T5_OFFSETS):
            yield False, f"answer must be a list of {len(T5_OFFSETS)} bucket ids, one per offset {T5_OFFSETS}"
            return
        for off, got, w in zip(T5_OFFSETS, ans, want):
            ok = isinstance(got, int) and got == w
            yield ok, (f"offset {off:+d} -> bucket {w}" if ok else f"offset {off:+d}: not {got!r}"
                       + (" (a key after the query lives in the upper half)" if off > 0 and got == w - 16 else ""))

    return report(f"T5 buckets of the offsets {T5_OFFSETS}", answer, run,
                  "16 buckets per direction, 8 exact; far: 8 + int(log(n/8) / log(128/8) * 8), capped at 15; "
                  "keys after the query add 16")


def xl_rel_shift(fn: Any) -> bool | None:
    """Exercise 3: fn(x) -> XL's relative shift of x (q_len, k_len), on the part the causal mask keeps."""

    def run(f: Callable[[torch.Tensor], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(x), got {type(f).__name__}"
            return
        g = torch.Generator().manual_seed(4)
        for q_len, k_len in ((4, 4), (3, 6), (1, 5), (6, 9)):
            x = torch.randn(q_len, k_len, generator=g)
            got = f(x.clone())
            want = xl.rel_shift(x)
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                yield False, f"for x of shape ({q_len}, {k_len}) return the same shape, got {getattr(got, 'shape', got)!r}"
                return
            keep = relative.relative_positions(q_len, k_len, q_offset=k_len - q_len) <= 0  # j <= M + i
            ok = close(got[keep], want[keep], atol=1e-6)
            yield ok, (f"({q_len}, {k_len}): every visible entry holds offset M + i - j" if ok else
                       f"({q_len}, {k_len}): row i should start at column q_len - 1 - i of x")

    return report("the relative shift", fn, run,
                  "pad one zero column on the left, reshape (q, k+1) -> (k+1, q), drop the first row, reshape to (q, k)")


def deberta_p2c(fn: Any) -> bool | None:
    """Exercise 4: fn(k_c, q_r) -> the paper's p2c term, out[i, j] = k_c[j] . q_r[delta(j, i)] (q_len = k_len)."""

    def run(f: Callable[[torch.Tensor, torch.Tensor], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(k_c, q_r), got {type(f).__name__}"
            return
        g = torch.Generator().manual_seed(5)
        for n, span, d in ((5, 2, 4), (7, 3, 2), (4, 1, 3)):
            k_c, q_r = torch.randn(n, d, generator=g), torch.randn(2 * span, d, generator=g)
            got = f(k_c, q_r)
            _, _, want = deberta.deberta_terms(k_c, k_c, q_r, q_r, p2c_index="paper")
            _, _, swapped = deberta.deberta_terms(k_c, k_c, q_r, q_r, p2c_index="reference")
            if not isinstance(got, torch.Tensor) or got.shape != want.shape:
                yield False, f"return a ({n}, {n}) tensor, got {getattr(got, 'shape', got)!r}"
                return
            if close(got, want):
                yield True, f"n={n}, k={span}: matches k_c[j] . q_r[delta(j, i)]"
            elif close(got, swapped):
                yield False, f"n={n}, k={span}: you used delta(i, j); the paper's p2c uses delta(j, i)"
            elif close(got, want.T):
                yield False, f"n={n}, k={span}: transposed: rows are queries i, columns keys j"
            else:
                yield False, f"n={n}, k={span}: wrong values"

    return report("DeBERTa's position-to-content term", fn, run,
                  "delta(j, i) = clip(j - i + k, 0, 2k - 1); score all keys against all 2k rows (k_c @ q_r.T), "
                  "then pick row delta(j, i) for each (i, j)")
