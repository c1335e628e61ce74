"""Checkers for notebooks/04_relative.ipynb: XL's shift, T5's rows and last bucket, a DeBERTa table."""
from __future__ import annotations

import math
from typing import Any, Callable, Iterator

import torch
import torch.nn.functional as F

from .. import deberta, relative, xl
from ._core import Verdict, close, float64_tensor, report, whole_number
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["xl_rel_shift", "t5_rows_read", "t5_last_bucket", "deberta_blind_table"]


def _t5_rows_read(num_buckets: int = 32, max_distance: int = 128) -> int:
    """How many rows of a bidirectional T5 table some offset reaches (every offset up to 4 max_distance)."""
    offsets = torch.arange(-4 * max_distance, 4 * max_distance + 1)
    return len(relative.t5_relative_bucket(offsets, num_buckets=num_buckets, max_distance=max_distance).unique())


def t5_rows_read(answer: Any) -> bool | None:
    """Exercise 2: how many of a T5 encoder's 32 rows (32 buckets, max_distance 128) any input can read."""

    def run(ans: Any) -> Iterator[Verdict]:
        got = whole_number(ans)
        if got is None:
            yield False, f"expected a whole number of rows, got {ans!r}"
            return
        want = _t5_rows_read()
        if got == want:
            yield True, "right: checked against every offset out to four times max_distance"
        elif not 0 <= got <= 32:
            yield False, f"{got} is not a number of rows of a 32-row table"
        elif got == 32:
            yield False, ("32 assumes every bucket is reached by some offset: is there a bucket that no "
                          "distance a key can have on its side lands in?")
        elif got == 16:
            yield False, "16 is one direction's half: an encoder reads the other half for keys after the query"
        elif got < want:
            yield False, (f"{got} is too few: far enough back (and ahead) every log bucket is reached, "
                          "whatever max_distance is")
        else:
            yield False, f"{got} is not the count"

    return report("how many of a T5 encoder's 32 rows are ever read", answer, run,
                  "a row is read only if some offset j - i lands in its bucket; ask, for each half of the "
                  "table, which distances a key on that side of the query can have")


# (num_buckets, max_distance, bidirectional): none is printed in the chapter (16/32 encoder: 20 and
# T5's defaults: 91, 113 are), and none has its exact solution near an integer (no rounding ambiguity).
T5_LAST_BUCKET_CASES = ((8, 20, True), (24, 100, True), (12, 50, False), (40, 1000, False), (64, 256, False),
                        (16, 40, True))
# And one a loop cannot walk to: the last bucket starts near 4.5e7, and distances up to 4e15 cannot be listed.
T5_FAR_CASE = (8, 10**15, True)


def _last_bucket_start(num_buckets: int, max_distance: int, bidirectional: bool) -> int:
    """The first distance in the last bucket of the past, found by the library's buckets (no formula)."""
    last = (num_buckets // 2 if bidirectional else num_buckets) - 1
    dist = torch.arange(0, 4 * max_distance)
    buckets = relative.t5_relative_bucket(-dist, num_buckets=num_buckets, max_distance=max_distance,
                                          bidirectional=bidirectional)
    return int(dist[buckets == last][0])


def _far_last_bucket_start() -> float:
    """T5_FAR_CASE's start as a real number, from the rule of §4 (the library's float32 logarithm cannot
    place the boundary to one distance at 4.5e7; tests/test_check_ch04.py checks the rule in float64)."""
    nb, md, bidir = T5_FAR_CASE
    B = nb // 2 if bidir else nb
    e = B // 2
    return e * (md / e) ** ((B - 1 - e) / (B - e))


def _t5_bucket_functions() -> tuple[tuple[Any, str, str], ...]:
    import posenc_lib

    return ((posenc_lib, "t5_relative_bucket", "pl.t5_relative_bucket"),
            (relative, "t5_relative_bucket", "pl.t5_relative_bucket"))


def t5_last_bucket(fn: Any) -> bool | None:
    """Exercise 3: fn(num_buckets, max_distance, bidirectional) -> first distance in the last bucket of the past.

    The point is the closed form: the library's bucket function refuses to run while fn does, and one
    case puts the start near 4.5e7, where a walk over the distances runs out of steps.
    """

    def run(f: Callable[[int, int, bool], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(num_buckets, max_distance, bidirectional), got {type(f).__name__}"
            return
        wants: dict[tuple[int, int, bool], float] = {case: _last_bucket_start(*case) for case in T5_LAST_BUCKET_CASES}
        wants[T5_FAR_CASE] = _far_last_bucket_start()  # before the patch
        answers, stopped = answers_under_guard(f, wants, _t5_bucket_functions())
        if stopped is not None:
            yield stopped_verdict(stopped[1], f"fn{stopped[0]}",
                                  shortcut="derive the start from the formula of §4 instead of listing buckets",
                                  loop="walks the distances up one by one (the last bucket starts tens of millions of "
                                       "distances out there): solve the rule for n instead")
            return
        for (nb, md, bidir), raw in answers.items():
            want, got = wants[(nb, md, bidir)], whole_number(raw)
            mode = "bidirectional" if bidir else "causal"
            case = f"fn({nb}, {md}, {bidir})"
            if got is None:
                yield False, f"{case} must return a whole distance (distances are integers), got {raw!r}"
                return
            try:
                other_mode = _last_bucket_start(nb, md, not bidir) if md < 10**6 else None
            except ValueError:  # max_distance too small for the other mode's exact range
                other_mode = None
            if got == want or ((nb, md, bidir) == T5_FAR_CASE and abs(got - want) <= 1 + 1e-7 * want):
                yield True, f"{case}: right ({mode})"  # (float32 arithmetic is a few distances off at 4.5e7)
            elif got == md:
                yield False, f"{case} = max_distance: the last bucket begins before it (§4)"
            elif abs(got - want) == 1:
                yield False, f"{case} is off by one: distances are integers; which side of the exact solution is in?"
            elif got == other_mode:
                yield False, (f"{case}: that start belongs to the other mode; how many buckets does a "
                              f"{mode} bias give the past?")
            else:
                yield False, f"{case} = {got} is not where the last bucket of the past starts ({mode})"

    return report("where T5's last bucket starts", fn, run,
                  "run the formula of §4 backwards, from the bucket to the distance; what does the floor leave "
                  "for you to decide at the end?")


def _shift_shortcuts() -> tuple[tuple[Any, str, str], ...]:
    """§3's own shift, and the pad it starts with."""
    import posenc_lib

    return ((posenc_lib, "rel_shift", "pl.rel_shift"), (xl, "rel_shift", "pl.rel_shift"),
            (F, "pad", "F.pad (§3's pad-and-reshape)"))


def xl_rel_shift(fn: Any) -> bool | None:
    """Exercise 1: fn(x) -> XL's relative shift of x (q_len, k_len), on the part the causal mask keeps, built
    with a gather: pl.rel_shift and F.pad refuse to run while fn does."""

    def run(f: Callable[[torch.Tensor], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(x), got {type(f).__name__}"
            return
        g = torch.Generator().manual_seed(4)
        for q_len, k_len in ((4, 4), (3, 6), (1, 5), (6, 9)):
            x = torch.randn(q_len, k_len, generator=g)
            answers, stopped = answers_under_guard(f, [(x.clone(),)], _shift_shortcuts(), loops=False)
            if stopped is not None:
                yield stopped_verdict(stopped[1], "your function",
                                      shortcut="build the shift with one gather, from the column each entry needs")
                return
            got, want = next(iter(answers.values())), xl.rel_shift(x)
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


BLIND_SPAN, BLIND_DIM = 3, 4  # the table of Exercise 4: 2k = 6 rows of 4 numbers


def _distinct_rows(table: torch.Tensor, atol: float = 1e-6) -> int:
    rows: list[torch.Tensor] = []
    for row in table:
        if not any(close(row, r, atol=atol) for r in rows):
            rows.append(row)
    return len(rows)


def _p2c_both(table: torch.Tensor, length: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """p2c with the paper's index and with the released code's, for random content and this q^r table."""
    q_c, k_c = torch.randn(2, length, BLIND_DIM, generator=g, dtype=torch.float64)
    k_r = torch.randn(2 * BLIND_SPAN, BLIND_DIM, generator=g, dtype=torch.float64)
    paper = deberta.deberta_terms(q_c, k_c, table, k_r, p2c_index="paper")[2]
    code = deberta.deberta_terms(q_c, k_c, table, k_r, p2c_index="reference")[2]
    return paper, code


def deberta_blind_table(answer: Any) -> bool | None:
    """Exercise 4: a (2k, d) = (6, 4) table q^r with which the paper's and the code's p2c agree at every length,
    with as many different rows as that allows."""
    k2 = 2 * BLIND_SPAN

    def run(ans: Any) -> Iterator[Verdict]:
        table = float64_tensor(ans)
        if table is None or table.shape != (k2, BLIND_DIM):
            yield False, f"expected a ({k2}, {BLIND_DIM}) table, got {getattr(table, 'shape', type(ans).__name__)}"
            return
        if not torch.isfinite(table).all():
            yield False, "the table must hold finite numbers"
            return
        g = torch.Generator().manual_seed(12)
        agree = all(close(*_p2c_both(table, n, g), atol=1e-9, rtol=1e-9) for n in (3, 5, 12))
        if not agree:
            window = all(close(table[r], table[2 * BLIND_SPAN - r], atol=1e-9, rtol=1e-5) for r in range(1, k2))
            if close(table, table.flip(0), atol=1e-9, rtol=1e-5):
                yield False, ("your table reads the same from either end (row r = row 2k - 1 - r), but the two "
                              "indices are not mirror images in that sense: compare them pair by pair in §5's "
                              "index table")
            elif window:
                yield False, ("every pair inside the window agrees; keys k or more steps away read the clipped "
                              "edge rows, and those differ in your table")
            else:
                yield False, ("for some (query, key) pairs the two indices read rows of your table that differ: "
                              "for a pair at i - j = o, which two rows are they?")
            return
        n = _distinct_rows(table)
        if n < BLIND_SPAN:
            yield False, (f"the paper's and the code's p2c agree, but your table has only {n} different "
                          f"row{'s' if n > 1 else ''}; the constraint lets more of them differ")
        else:
            yield True, "the two p2c indices give the same scores, and as many rows differ as they can"

    return report("a DeBERTa table that does not care which p2c index it is read with", answer, run,
                  "for a pair at i - j = o, name the two rows the two indices read; every such pair of rows must "
                  "be equal, and clip keeps reading at the edges")
