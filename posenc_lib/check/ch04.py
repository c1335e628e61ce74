"""Checkers for notebooks/04_relative.ipynb: XL's shift, T5 buckets and the last bucket, DeBERTa's p2c."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from .. import deberta, relative, xl
from ._core import Verdict, close, report

__all__ = ["xl_rel_shift", "t5_buckets", "t5_last_bucket", "deberta_p2c"]

T5_OFFSETS = (-3, -20, 20, -500)  # key minus query; bidirectional, 32 buckets, max_distance 128


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
                  "§4's three steps: which half (direction), then exact or log-spaced; "
                  "work out B and e for 32 buckets first")


# (num_buckets, max_distance, bidirectional): T5's defaults in both modes, and settings whose
# last bucket does not start near an integer solution of the formula (no rounding ambiguity).
T5_LAST_BUCKET_CASES = ((32, 128, True), (32, 128, False), (8, 20, True), (24, 100, True), (12, 50, False),
                        (40, 1000, False))


def _last_bucket_start(num_buckets: int, max_distance: int, bidirectional: bool) -> int:
    """The first distance in the last bucket of the past, found by the library's buckets (no formula)."""
    last = (num_buckets // 2 if bidirectional else num_buckets) - 1
    dist = torch.arange(0, 4 * max_distance)
    buckets = relative.t5_relative_bucket(-dist, num_buckets=num_buckets, max_distance=max_distance,
                                          bidirectional=bidirectional)
    return int(dist[buckets == last][0])


def t5_last_bucket(fn: Any) -> bool | None:
    """Exercise 3: fn(num_buckets, max_distance, bidirectional) -> first distance in the last bucket of the past."""

    def run(f: Callable[[int, int, bool], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(num_buckets, max_distance, bidirectional), got {type(f).__name__}"
            return
        for nb, md, bidir in T5_LAST_BUCKET_CASES:
            want, got = _last_bucket_start(nb, md, bidir), f(nb, md, bidir)
            mode = "bidirectional" if bidir else "causal"
            case = f"fn({nb}, {md}, {bidir})"
            if not isinstance(got, (int, torch.Tensor)) or isinstance(got, bool) or (
                    isinstance(got, torch.Tensor) and (got.numel() != 1 or got.is_floating_point())):
                yield False, f"{case} must return an integer distance, got {got!r}"
                return
            got = int(got)
            if got == want:
                yield True, f"{case}: right ({mode})"
            elif got == md:
                yield False, f"{case} = max_distance: the last bucket begins before it (§4)"
            elif abs(got - want) == 1:
                yield False, f"{case} is off by one: distances are integers; which side of the exact solution is in?"
            else:
                yield False, f"{case} = {got} is not where the last bucket of the past starts ({mode})"

    return report("where T5's last bucket starts", fn, run,
                  "the last bucket of the past is B - 1; write when the floored log term reaches it as an inequality, "
                  "solve it for n, and mind what B and e are in each mode")


def xl_rel_shift(fn: Any) -> bool | None:
    """Exercise 1: fn(x) -> XL's relative shift of x (q_len, k_len), on the part the causal mask keeps."""

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
                       f"({q_len}, {k_len}): some visible entries hold the wrong distance; compare row i "
                       "of your result with row i of x: by how many columns must it move?")

    return report("the relative shift", fn, run,
                  "write the distance entry (i, j) needs (§3: M + i - j), then the column of x that holds it")


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
                  "§5's delta with the roles of i and j swapped; one matmul scores every key against every row, "
                  "then pick the right row for each (i, j)")
