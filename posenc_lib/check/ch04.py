"""Checkers for notebooks/04_relative.ipynb: a strided relative shift, a T5 rule that reads every row,
T5's last bucket, the rows DeBERTa's two p2c indices tie.

No answer is kept here, not even as a digest. The cases of every exercise are drawn anew at each check;
a shift is judged by the distance each entry holds, a bucket rule by the properties the prompt asks
for (T5's buckets in the past, each upper bucket as wide as its mirror, every row reached: the library's
buckets, read outside the learner's function, give the widths), a last bucket by the bucket rule of §4
at the answer and one below it, and tie classes by the ties read off the library's index at check time
(every tie inside a class, every class held together by ties).
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, Iterator

import torch

from .. import deberta, relative, xl
from ._core import Verdict, float64_tensor, report, whole_number
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["xl_rel_shift", "t5_rows_read", "t5_last_bucket", "deberta_tied_rows"]

FORMULA_STEPS = 40  # Python lines for one case of Exercise 3: a closed form needs 3 to 20; a bisection over 10^18
#                    distances 60 or more, even written as bisect.bisect_left with a one-line key
FORMULA_ELEMENTS = 200  # tensor elements for one case of Exercise 3: a closed form in torch makes a handful; a grid
#                         search, even in stages, hundreds per stage (and a few stages cannot reach 10^18)


def _fresh_rng() -> random.Random:
    """The cases of a check are drawn from here, seeded by the operating system: no two checks see the same."""
    return random.Random()


# ---------------------------------------------------------------- Exercise 1: a strided relative shift

def _shift_cases(rng: random.Random) -> list[tuple[int, int, int]]:
    """Four (q_len, k_len, stride): one query alone, then strides 2 and 3 and one at random (1 to 4), several
    queries each, new at every check."""
    return [(1, rng.randrange(3, 7), rng.randrange(2, 5)), (rng.randrange(3, 7), rng.randrange(2, 9), 2),
            (rng.randrange(2, 6), rng.randrange(1, 9), 3), (rng.randrange(2, 8), rng.randrange(1, 12), rng.randrange(1, 5))]


def xl_rel_shift(fn: Any) -> bool | None:
    """Exercise 1: fn(x, stride) -> (q_len, k_len) scores, entry (i, j) holding the score at distance stride * i - j
    (query i at position stride * i, key j at j), from x of shape (q_len, stride * (q_len - 1) + k_len) whose
    column c holds distance c - (k_len - 1), smallest first.

    Each row of x is a random function of the distance, drawn anew at every check, so an entry is right
    exactly when it holds the value at the right distance.
    """

    def run(f: Callable[[torch.Tensor, int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(x, stride), got {type(f).__name__}"
            return
        rng = _fresh_rng()
        for q_len, k_len, stride in _shift_cases(rng):
            width = stride * (q_len - 1) + k_len
            coefficients = torch.tensor([[rng.gauss(0, 1) for _ in range(4)] for _ in range(q_len)], dtype=torch.float64)

            def at(distance: torch.Tensor) -> torch.Tensor:  # row i's value at each distance: a random cubic
                powers = torch.stack([distance.double() ** p for p in range(4)], dim=-1)
                return (powers * coefficients[:, None, :]).sum(-1)

            rows, cols = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
            x = at((torch.arange(width) - (k_len - 1)).expand(q_len, -1))  # column c: distance c - (k_len - 1)
            got = float64_tensor(f(x.clone(), stride))
            where = f"q_len = {q_len}, k_len = {k_len}, stride {stride}"
            if got is None or got.shape != (q_len, k_len):
                yield False, f"{where}: return a (q_len, k_len) = ({q_len}, {k_len}) tensor, got {getattr(got, 'shape', got)}"
                return
            needed = stride * rows - cols  # the distance entry (i, j) needs, query minus key

            def held(distance: torch.Tensor) -> torch.Tensor:
                value = at(distance)
                return (got - value).abs() < 1e-6 * (1 + value.abs())

            def holds(distance: torch.Tensor) -> bool:
                return bool(held(distance).all())

            one_off = held(needed + 1) | held(needed - 1)  # (an index one off runs out of the matrix at a corner)
            if holds(needed):
                continue
            if stride > 1 and q_len > 1 and holds(rows - cols):
                yield False, (f"{where}: right for the first query, then each row moves one column from the row "
                              "before: how far apart are two queries?")
            elif holds(stride * (q_len - 1 - rows) + cols - (k_len - 1)):
                yield False, (f"{where}: you read the columns as if the largest distance came first (§3's layout); "
                              "here the smallest does")
            elif bool((one_off | held(needed)).all()) and float(one_off.double().mean()) >= 0.5:
                yield False, f"{where}: the entries hold a distance one away from the one they need"
            else:
                yield False, f"{where}: some entries hold the wrong distance"
            return
        yield True, ("every entry (i, j) holds the distance stride * i - j, at every shape and stride drawn at this "
                     "check")

    return report("a relative shift for strided queries", fn, run,
                  "label each column with the distance it holds, as §3 labelled its entries")


# ---------------------------------------------------------------- Exercises 2 and 3: T5's buckets

def _t5_bucket_functions() -> tuple[tuple[Any, str, str], ...]:
    """The library's bucket function (and so the module built on it), and transformers' own, where installed."""
    import posenc_lib

    found = [(posenc_lib, "t5_relative_bucket", "pl.t5_relative_bucket"),
             (relative, "t5_relative_bucket", "pl.t5_relative_bucket")]
    try:
        from transformers.models.t5.modeling_t5 import T5Attention
    except ImportError:
        return tuple(found)
    return tuple(found + [(T5Attention, "_relative_position_bucket", "T5Attention._relative_position_bucket")])


def _t5_answers(f: Callable[..., Any], cases: list[tuple[int, int, bool]], steps: int, elements: int, *,
                shortcut: str, loop: str, grid: str) -> tuple[dict[tuple[Any, ...], Any], Verdict | None]:
    """f(*case) for every case, the library's buckets refused, ``steps`` Python lines and ``elements`` tensor
    elements per case; or the verdict on the shortcut, the loop or the grid that stopped it."""
    answers, stopped = answers_under_guard(f, cases, _t5_bucket_functions(), steps_per_case=steps,
                                           elements_per_case=elements)
    if stopped is None:
        return answers, None
    return answers, stopped_verdict(stopped[1], f"fn{stopped[0]}", shortcut=shortcut, loop=loop, grid=grid)


def _per_direction(num_buckets: int, bidirectional: bool) -> int:
    return num_buckets // 2 if bidirectional else num_buckets


def _rows_cases(rng: random.Random) -> list[tuple[int, int]]:
    """Four encoder settings like T5's (max_distance at least 4 num_buckets, where every bucket of the past is
    reached), new at every check: (num_buckets, max_distance)."""
    out = []
    for _ in range(4):
        nb = 2 * rng.randrange(4, 33)
        out.append((nb, rng.randrange(4 * nb, 40 * nb)))
    return out


def _widths(buckets: torch.Tensor, first: int, count: int) -> list[int]:
    """How many entries of ``buckets`` fall in each of the buckets first .. first + count - 1."""
    return [int((buckets == b).sum()) for b in range(first, first + count)]


def t5_rows_read(fn: Any) -> bool | None:
    """Exercise 2: fn(offsets, num_buckets, max_distance) -> an encoder's bucket of each offset (key minus query)
    that keeps T5's bucket for every key at or before the query, gives keys after it upper buckets as wide as
    their mirror images in the past, non-decreasing with the distance, and reads every one of the num_buckets rows.

    Judged by those properties on settings drawn at every check: the past and the widths against the
    library's buckets, computed outside the learner's function.
    """

    def run(f: Callable[[torch.Tensor, int, int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(offsets, num_buckets, max_distance), got {type(f).__name__}"
            return
        for nb, md in _rows_cases(_fresh_rng()):
            B, case = nb // 2, f"fn(offsets, {nb}, {md})"
            reach = 2 * md  # every bucket's start lies below max_distance
            offsets = torch.arange(-reach, reach + 2)
            raw = f(offsets.clone(), nb, md)
            got = raw if isinstance(raw, torch.Tensor) else float64_tensor(raw)
            if got is None or got.shape != offsets.shape:
                yield False, f"{case}: return one bucket per offset, shape {tuple(offsets.shape)}, got {getattr(got, 'shape', raw)!r}"
                return
            if got.is_floating_point() and not bool((got == got.round()).all()):
                yield False, f"{case}: buckets are whole numbers (row indices of the table)"
                return
            got = got.long()
            t5 = relative.t5_relative_bucket(offsets, num_buckets=nb, max_distance=md)
            past, future = offsets <= 0, offsets > 0
            if not torch.equal(got[past], t5[past]):
                yield False, (f"{case}: a key at or before the query must keep T5's bucket (a trained table's rows "
                              "keep their meaning there); yours moves some")
                return
            ahead = got[future]  # distances 1, 2, ..., reach + 1
            if bool((ahead < B).any()) or bool((ahead >= nb).any()):
                yield False, f"{case}: a key after the query must land in the upper half, rows {B} to {nb - 1}"
                return
            if bool((ahead.diff() < 0).any()):
                yield False, f"{case}: a key farther after the query lands in a lower bucket than a nearer one"
                return
            mirror = _widths(t5[past].flip(0), 0, B - 1)  # past distances 0, 1, ... per bucket, all but the last
            if _widths(ahead, B, B - 1) == mirror:
                continue
            if len(set(ahead.tolist())) < B:
                yield False, (f"{case}: some row of the upper half is still never read: which distance would a key "
                              "after the query need to reach it?")
            else:
                yield False, (f"{case}: every row is read, but the upper half does not mirror the past: upper bucket "
                              "B + b must hold as many distances as bucket b")
            return
        yield True, ("for four encoder settings drawn at this check: the past as T5 has it, the future its mirror, "
                     "and every row of the table read")

    return report("a T5 encoder rule that reads every row", fn, run,
                  "a row is read only if some offset lands in its bucket: which distances can a key after the "
                  "query have?")


def _last_bucket_cases(rng: random.Random) -> list[tuple[int, int, bool]]:
    """Six settings none of which the chapter shows, new at every check: an encoder and a decoder of modest size,
    three more at random, and one with max_distance beyond 10^18 (too far to walk to, or to bisect in a few
    steps). Each gives its direction at least 4 buckets, so that the last one is not simply max_exact."""
    def setting(bidirectional: bool, per_direction: int, max_distance: int) -> tuple[int, int, bool]:
        return (2 * per_direction if bidirectional else per_direction), max_distance, bidirectional

    cases = [setting(bidir, rng.randrange(4, 33), rng.randrange(65, 5000))
             for bidir in (True, False, *(rng.random() < 0.5 for _ in range(3)))]
    return cases + [setting(rng.random() < 0.5, rng.randrange(8, 17), rng.randrange(10**18, 10**19))]


EXACT_UP_TO = 10**6  # max_distance up to which an answer may also agree with the library's float32 buckets


def _past_last_edge(n: int, per_direction: int, max_distance: int) -> int:
    """How far distance n is past the start of the last bucket of the past (B - 1) by §4's rule in exact
    arithmetic: from n >= e on, e + floor(log(n/e) / log(max_distance/e) (B - e)) >= B - 1 reads, after
    multiplying out the logs, n^(B-e) e^(B-1-e) >= max_distance^(B-1-e) e^(B-e); this returns the left side
    minus the right (>= 0: in the last bucket, 0: exactly on its edge)."""
    if not 2 <= per_direction <= 64:  # the checker's settings; a power of 10^18 would never finish
        raise ValueError(f"per_direction must be 2 to 64, got {per_direction}")
    e = per_direction // 2
    return n ** (per_direction - e) * e ** (per_direction - 1 - e) - max_distance ** (per_direction - 1 - e) * e ** (per_direction - e)


def _in_last(n: int, per_direction: int, max_distance: int) -> bool:
    """Is distance n in the last bucket of the past by §4's rule in exact arithmetic?"""
    if n >= max_distance:
        return True
    return n >= per_direction // 2 and _past_last_edge(n, per_direction, max_distance) >= 0


def _library_in_last(n: int, num_buckets: int, max_distance: int, bidirectional: bool) -> bool:
    """Is offset -n in the same bucket as -max_distance by the library's buckets (float32, as §4 walked them)?"""
    if n >= max_distance:
        return True
    if n < 0:
        return False
    buckets = relative.t5_relative_bucket(-torch.tensor([n, max_distance]), bidirectional=bidirectional,
                                          num_buckets=num_buckets, max_distance=max_distance)
    return bool(buckets[0] == buckets[1])


def _starts_last(n: int, num_buckets: int, max_distance: int, bidirectional: bool, slack: int = 0) -> bool:
    """n is where the last bucket of the past starts, give or take ``slack`` distances, by the exact rule; or,
    up to ``EXACT_UP_TO``, one past a start that lies exactly on the edge, or where the library's float32
    buckets start it (they put a few near ties on the other side)."""
    B = _per_direction(num_buckets, bidirectional)
    if _in_last(n + slack, B, max_distance) and not _in_last(n - slack - 1, B, max_distance):
        return True
    if max_distance > EXACT_UP_TO:
        return False
    if n - 1 >= B // 2 and _past_last_edge(n - 1, B, max_distance) == 0 and not _in_last(n - 2, B, max_distance):
        return True  # one past a start that lies exactly on the edge: float arithmetic may put the edge outside
    return _library_in_last(n, num_buckets, max_distance, bidirectional) and not \
        _library_in_last(n - 1, num_buckets, max_distance, bidirectional)


def t5_last_bucket(fn: Any) -> bool | None:
    """Exercise 3: fn(num_buckets, max_distance, bidirectional) -> first distance in the last bucket of the past.

    The point is the closed form: the library's bucket function refuses to run while fn does, each case
    has the Python steps and the tensor elements of a formula (not of a walk, a bisection or a grid), and
    one case puts the start beyond 10^16, where no list of distances fits in memory.
    """

    def run(f: Callable[[int, int, bool], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(num_buckets, max_distance, bidirectional), got {type(f).__name__}"
            return
        cases = _last_bucket_cases(_fresh_rng())
        answers, refused = _t5_answers(f, cases, FORMULA_STEPS, FORMULA_ELEMENTS,
                                       shortcut="derive the start from the formula of §4 instead of listing buckets",
                                       loop="searches the distances (a walk or a bisection runs out of steps; one "
                                            "case has max_distance beyond 10^18): solve the rule for n instead",
                                       grid="a search over a grid of distances, vectorised: solve the rule for n "
                                            "instead")
        if refused is not None:
            yield refused
            return
        for (nb, md, bidir), raw in answers.items():
            case = f"fn({nb}, {md}, {bidir})"
            mode = "bidirectional" if bidir else "causal"
            got = whole_number(raw)
            if got is None:
                yield False, f"{case} must return a whole distance (distances are integers), got {raw!r}"
                return
            slack = 1 + int(1e-6 * abs(got)) if md > EXACT_UP_TO else 0  # float32 arithmetic is 1e-7 off, relatively
            if _starts_last(got, nb, md, bidir, slack):
                continue
            if got == md:
                yield False, f"{case} = max_distance: the last bucket begins before it (§4)"
            elif _starts_last(got + 1, nb, md, bidir, slack) or _starts_last(got - 1, nb, md, bidir, slack):
                yield False, f"{case} is off by one: distances are integers; which side of the exact solution is in?"
            elif nb // 2 > 1 and _starts_last(got, nb, md, not bidir, slack):
                yield False, (f"{case}: that start belongs to the other mode; how many buckets does a {mode} bias "
                              "give the past?")
            else:
                yield False, f"{case} = {got} is not where the last bucket of the past starts ({mode})"
            return
        yield True, (f"right for {len(cases)} settings drawn anew at this check, one of them with max_distance "
                     "beyond 10^18")

    return report("where T5's last bucket starts", fn, run,
                  "run §4's formula backwards, from a bucket to the first distance that reaches it")


# ---------------------------------------------------------------- Exercise 4: the rows the two p2c indices tie

TIE_SPANS_SMALL = (3,)  # k = 3 first, where a reader can still check by hand
TIE_SPANS_FAR = (20_000, 200_000)  # then two k drawn here: no (L, L) index, Jacobian or p2c of that size fits


def _classes(raw: Any) -> list[set[int]] | None:
    """The answer as a list of sets of row numbers, or None when it is not one."""
    try:
        out = [{int(r) for r in c if int(r) == r} for c in raw]
        if [len(c) for c in out] != [len(set(c)) for c in raw]:
            return None
    except (TypeError, ValueError):
        return None
    return out


def deberta_tied_rows(fn: Any) -> bool | None:
    """Exercise 4: fn(k) -> the rows of q^r (a table of 2k rows) that must be equal for the paper's and the code's
    p2c to agree for every content and length, as a partition of 0 .. 2k-1 into classes (a class: rows tied
    together, directly or through others; a row tied to no other: a class of one). k = 3, then two k too large
    for any (L, L) tensor, drawn at every check.

    Judged against the ties read off the library's own index at check time: one row and one column of
    ``deberta_relative_index`` give, for every offset o = i - j, the row the code reads (delta(i, j)) and the row
    the paper reads (delta(j, i)); a partition is right when every tie lies inside a class and every class is
    held together by ties.
    """

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(k) returning a list of sets of rows, got {type(f).__name__}"
            return
        rng = _fresh_rng()
        spans = list(TIE_SPANS_SMALL) + [rng.randrange(TIE_SPANS_FAR[0], TIE_SPANS_FAR[1])
                                          for _ in range(2)]
        for span in spans:
            case = f"fn({span})"
            n = 2 * span + 1  # offsets 0 .. 2k: past both clips
            code = deberta.deberta_relative_index(n, 1, span)[:, 0].tolist()  # delta(o, 0): offset i - j = o
            paper = deberta.deberta_relative_index(1, n, span)[0].tolist()  # delta(0, o) = delta(j, i) at i - j = o
            # (negative offsets swap the two, so the offsets 0 .. 2k give every tie)
            classes = _classes(f(span))
            if classes is None:
                yield False, f"{case}: return a list of sets of row numbers (whole numbers 0 to {2 * span - 1})"
                return
            where: dict[int, int] = {}
            for c_index, c in enumerate(classes):
                for r in c:
                    if r in where or not 0 <= r < 2 * span:
                        yield False, (f"{case}: every row 0 .. {2 * span - 1} must lie in exactly one class (a row "
                                      "tied to no other: a class of its own)")
                        return
                    where[r] = c_index
            if len(where) != 2 * span:
                yield False, (f"{case}: every row 0 .. {2 * span - 1} must lie in exactly one class (a row tied to "
                              "no other: a class of its own)")
                return
            split = [o for o in range(n) if where[code[o]] != where[paper[o]]]
            if split:
                if all(o >= span for o in split):
                    yield False, (f"{case}: every (query, key) pair less than k apart reads two rows of one class; "
                                  "pairs k or more apart read the clipped edge rows, and yours keeps those apart")
                elif all(len(c) <= 2 and all(2 * span - 1 - r in c for r in c) for c in classes):
                    yield False, (f"{case}: your classes pair row r with row 2k - 1 - r (the table read from either "
                                  "end), but the two indices are not mirror images in that sense: compare them for "
                                  "one pair")
                else:
                    yield False, (f"{case}: for some (query, key) pairs the two indices read rows that your classes "
                                  "keep apart: for a pair at i - j = o, which two rows are they?")
                return
            # every tie lies inside a class; is every class held together by ties?
            group = list(range(2 * span))

            def root(r: int) -> int:
                while group[r] != r:
                    group[r] = group[group[r]]
                    r = group[r]
                return r

            for a, b in zip(code, paper):
                group[root(a)] = root(b)
            if len({root(r) for r in range(2 * span)}) != len(classes):
                yield False, (f"{case}: no pair separates your classes, but some class joins rows that no chain of "
                              "pairs ties: a table could let them differ")
                return
        yield True, (f"the tie classes for k = {spans[0]} and for two k between {TIE_SPANS_FAR[0]:,} and "
                     f"{TIE_SPANS_FAR[1]:,} drawn at this check")

    return report("the rows DeBERTa's two p2c indices tie", fn, run,
                  "every (query, key) pair ties the row one index reads to the row the other reads; follow the "
                  "offsets from 0 outwards")
