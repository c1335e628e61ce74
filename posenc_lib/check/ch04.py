"""Checkers for notebooks/04_relative.ipynb: a strided relative shift as a view, a T5 rule that reads every row,
T5's last bucket, the rows a table blind to DeBERTa's p2c index must tie.

No answer is kept here, not even as a digest. The cases of every exercise are drawn anew at each check;
a shift is judged by the distance each entry holds and by sharing x's memory, a bucket rule by the properties the prompt asks
for (T5's buckets in the past, the future ordered in the upper half, every row reached, each upper
bucket as wide as its mirror in the past: the library's
buckets, read outside the learner's function), a last bucket by the bucket rule of §4
at the answer and one below it, and a row's tied set by the ties read off DeBERTa's index at check time.
"""
from __future__ import annotations

import math
import random
from fractions import Fraction
from typing import Any, Callable, Iterator

import torch

from .. import deberta, relative
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
    """Four (q_len, k_len, stride): two queries, then strides 2 and 3 and one at random (1 to 4), several
    queries each, new at every check (at least two queries: a row stride means nothing with one row)."""
    return [(2, rng.randrange(3, 7), rng.randrange(2, 5)), (rng.randrange(3, 7), rng.randrange(2, 9), 2),
            (rng.randrange(2, 6), rng.randrange(1, 9), 3), (rng.randrange(2, 8), rng.randrange(1, 12), rng.randrange(1, 5))]


def xl_rel_shift(fn: Any) -> bool | None:
    """Exercise 1: fn(x, stride) -> (q_len, k_len) scores as a view of x, entry (i, j) holding the score at
    distance stride * i - j (query i at position stride * i, key j at j), from x of shape
    (q_len, stride * (q_len - 1) + k_len) whose column c holds distance stride * (q_len - 1) - c, largest first.

    Each row of x is a random function of the distance, drawn anew at every check, so an entry is right
    exactly when it holds the value at the right distance. The answer must be a torch tensor sharing x's
    memory, with x left as it was: a copy (a gather, a loop, a pad) has the right numbers and is refused, since
    the exercise is to find the view; nothing but a view can pass, whatever route builds it.
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
            x = at((stride * (q_len - 1) - torch.arange(width)).expand(q_len, -1)).contiguous()  # largest first
            before = x.clone()
            raw = f(x, stride)
            got = float64_tensor(raw)
            where = f"q_len = {q_len}, k_len = {k_len}, stride {stride}"
            if got is None or got.shape != (q_len, k_len):
                yield False, f"{where}: return a (q_len, k_len) = ({q_len}, {k_len}) tensor, got {getattr(got, 'shape', got)}"
                return
            if not torch.equal(x, before):
                yield False, f"{where}: your function wrote into x; read it, do not change it"
                return
            needed = stride * rows - cols  # the distance entry (i, j) needs, query minus key

            def held(distance: torch.Tensor) -> torch.Tensor:
                value = at(distance)
                return (got - value).abs() < 1e-6 * (1 + value.abs())

            def holds(distance: torch.Tensor) -> bool:
                return bool(held(distance).all())

            one_off = held(needed + 1) | held(needed - 1)  # (an index one off runs out of the matrix at a corner)
            if holds(needed):
                if not (isinstance(raw, torch.Tensor)
                        and raw.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()):
                    yield False, (f"{where}: every entry holds the right distance, but in new memory: the answer "
                                  "must be a view of x (a torch tensor sharing its memory), with no copy")
                    return
                continue
            if stride > 1 and q_len > 1 and holds(rows - cols):
                yield False, (f"{where}: right for the first query, then each row moves one column from the row "
                              "before: how far apart are two queries?")
            elif holds(stride * (q_len - 1) - needed - (k_len - 1)):  # the columns read in the other order
                yield False, (f"{where}: you read the columns as if the smallest distance came first; here the "
                              "largest does, as in §3")
            elif bool((one_off | held(needed)).all()) and float(one_off.double().mean()) >= 0.5:
                yield False, f"{where}: the entries hold a distance one away from the one they need"
            else:
                yield False, f"{where}: some entries hold the wrong distance"
            return
        yield True, ("every entry (i, j) holds the distance stride * i - j, in a view of x, at every shape and stride "
                     "drawn at this check")

    return report("a relative shift for strided queries, as a view", fn, run,
                  "label each column with the distance it holds, as §3 labelled its entries; a view is a fixed "
                  "step through memory for each index")


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


def t5_rows_read(fn: Any) -> bool | None:
    """Exercise 2: fn(offsets, num_buckets, max_distance) -> an encoder's bucket of each offset (key minus query)
    that keeps T5's bucket for every key at or before the query, gives keys after it upper buckets,
    non-decreasing with the distance, reads every one of the num_buckets rows, and keeps the past's spacing:
    every bounded upper bucket B + b holds as many distances as bucket b holds in the past, give or take one.
    The learner must still find the row T5 leaves unread.

    Judged by those properties on settings drawn at every check (the check is of what the rule does, so a copy
    gains nothing over finding it): the past and its widths against the library's buckets, computed outside the
    learner's function.
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
            if len(set(ahead.tolist())) != B:
                yield False, f"{case}: some row of the upper half is still never read by any offset"
                return
            # offsets -reach .. 0 and 1 .. reach + 1: as many distances on each side; every bounded upper bucket
            # (all but the last, which takes what is left) must hold as many as its mirror, give or take one
            widths_past = torch.bincount(t5[past], minlength=B)
            widths_ahead = torch.bincount(ahead - B, minlength=B)
            if bool(((widths_past[:-1] - widths_ahead[:-1]).abs() <= 1).all()) and not \
                    bool(((widths_past[:-1] > 2) & (widths_ahead[:-1] == 1)).any()):
                continue
            far = widths_past[:-1] > 1  # the past's bounded buckets wider than one distance
            if bool(far.any()) and bool((widths_ahead[:-1][far] == 1).all()):
                yield False, (f"{case}: your upper buckets hold one distance each where the past's far buckets hold "
                              "several: the future has lost the past's log spacing")
            else:
                yield False, (f"{case}: the future does not mirror the past: some upper bucket holds more than one "
                              "distance more or fewer than its mirror in the past")
            return
        yield True, ("for four encoder settings drawn at this check: the past as T5 has it, the future ordered in "
                     "the upper half, every row of the table read, and every upper bucket as wide as its mirror, give or take one")

    return report("a T5 encoder rule that reads every row", fn, run,
                  "a row is read only if some offset lands in its bucket: compare what the past and the future "
                  "can reach")


def _last_bucket_cases(rng: random.Random) -> list[tuple[int, int, bool]]:
    """Six settings none of which the chapter shows, new at every check: an encoder and a decoder of modest size,
    three more at random, and one with max_distance beyond 10^18 (too far to walk to, or to bisect in a few
    steps). Each gives its direction at least 4 buckets, so that the last one is not simply max_exact. No modest
    setting is a tie: each one's exact bound lies at least ``TIE_CLEARANCE`` from a whole number, so any right
    closed form, in float64 or float32, lands on the exact start (at an exact tie T5's own float32 rule falls on
    either side by float rounding, and so would a reader's)."""
    def setting(bidirectional: bool, per_direction: int, max_distance: int) -> tuple[int, int, bool]:
        return (2 * per_direction if bidirectional else per_direction), max_distance, bidirectional

    def modest(bidirectional: bool) -> tuple[int, int, bool]:
        while True:
            per_direction, max_distance = rng.randrange(4, 33), rng.randrange(65, 5000)
            if not _near_whole_bound(per_direction, max_distance):
                return setting(bidirectional, per_direction, max_distance)

    cases = [modest(bidir) for bidir in (True, False, *(rng.random() < 0.5 for _ in range(3)))]
    return cases + [setting(rng.random() < 0.5, rng.randrange(8, 17), rng.randrange(10**18, 10**19))]


TIE_CLEARANCE = Fraction(1, 100)  # a float32 closed form is at most ~0.002 off at max_distance 5000; float64 far less


def _near_whole_bound(per_direction: int, max_distance: int) -> bool:
    """Is the exact edge of the last bucket of the past within ``TIE_CLEARANCE`` of a whole distance (a tie, or
    near enough that float rounding decides)? With e = per_direction // 2 and m = per_direction - e the edge b
    solves b^m = e max_distance^(m-1) (see ``_past_last_edge``); the test is exact, in fractions, around the
    whole number nearest a float estimate of b (below 5000, only that one can lie within the clearance)."""
    e = per_direction // 2
    m = per_direction - e
    power = e * max_distance ** (m - 1)
    k = round(math.exp(math.log(power) / m))
    return (k - TIE_CLEARANCE) ** m <= power <= (k + TIE_CLEARANCE) ** m


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
    up to ``EXACT_UP_TO``, where the library's float32 buckets start it, as T5's own code does (near an edge its
    float32 log may fall on the other side). The prompt asks where T5's last bucket starts, so both count;
    anything else does not. (The checker draws no tie, so a right closed form always gives the exact start.)"""
    B = _per_direction(num_buckets, bidirectional)
    if _in_last(n + slack, B, max_distance) and not _in_last(n - slack - 1, B, max_distance):
        return True
    if max_distance > EXACT_UP_TO:
        return False
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


# ---------------------------------------------------------------- Exercise 4: the rows a blind table must tie

TIE_SPAN_SMALL = 3  # k = 3 first, where a reader can still check by hand (every row asked)
TIE_SPANS_MIDDLE = (20_000, 200_000)  # then a k whose 2k rows fit in memory: an answer listing them is judged here
TIE_SPANS_FAR = (10**15, 10**18)  # then two k drawn here: no index, list of rows or walk over offsets reaches them
TIE_STEPS = 40  # Python lines for one call: a rule needs a handful; a walk, a union-find or a bisection, hundreds
TIE_ELEMENTS = 200  # tensor elements for one call: a rule makes none or a few; any index over the rows, 2k
TIE_FAR_ROWS = 8  # random rows asked at each far k, besides the rows next to the edges and the middle


def _index_rows(offsets: list[int], span: int) -> tuple[list[int], list[int]]:
    """The rows the code's and the paper's p2c read at each query-minus-key offset o, for any span: the code
    reads delta(i, j), the paper delta(j, i), with ``deberta_relative_index``'s clip; Python ints, so that a
    span of 10^18 fits (the checker compares this with the library's own index on small spans at each check)."""
    def clipped(x: int) -> int:
        return min(max(x, 0), 2 * span - 1)

    return [clipped(span + o) for o in offsets], [clipped(span - o) for o in offsets]


EDGE_TIES_LEFT_OUT = ("every (query, key) pair less than k apart is accounted for; pairs k or more apart read the "
                      "clipped edge rows, and your set leaves out what they tie")


def deberta_tied_rows(fn: Any) -> bool | None:
    """Exercise 4: fn(k, row) -> the set of rows of q^r (a table of 2k rows) that every table giving the same
    p2c with the paper's and with the code's index must set equal to ``row`` (``row`` included). Asked for
    every row at k = 3, then for rows next to the edges, the middle and random rows at a k drawn between
    20 000 and 200 000 and two between 10^15 and 10^18 at every check; each call gets TIE_STEPS Python lines and TIE_ELEMENTS tensor
    elements, and the library's index refuses to run while fn does.

    Judged against the ties read off the index at check time: at k = 3 from the library's
    ``deberta_relative_index`` itself; at the far k from the same clip in Python ints (checked against the
    library at small spans first), the offsets that read a row found by bisection, since both indices are
    monotone in the offset, and a row's set closed over those ties.
    """

    def run(f: Callable[[int, int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(k, row) returning a set of rows, got {type(f).__name__}"
            return
        rng = _fresh_rng()
        for span in (TIE_SPAN_SMALL, rng.randrange(4, 12)):  # the Python clip is the library's index
            n = 2 * span + 1
            code, paper = _index_rows(list(range(n)), span)
            if code != deberta.deberta_relative_index(n, 1, span)[:, 0].tolist() or \
                    paper != deberta.deberta_relative_index(1, n, span)[0].tolist():
                raise RuntimeError(f"the checker's index differs from deberta_relative_index at span {span}")

        def reading(span: int, row: int, which: int, window: bool) -> list[int]:
            """The rows the other index reads at the offsets where index ``which`` (0: code, 1: paper) reads
            ``row``: offsets 0 .. 2k (negative ones swap the two indices), or only those inside the window."""
            top = span - 1 if window else 2 * span
            sign = 1 if which == 0 else -1  # the code's index grows with the offset, the paper's shrinks

            def first(at_least: int) -> int:  # the first offset whose row, in the growing direction, is >= at_least
                lo, hi = 0, top + 1
                while lo < hi:
                    mid = (lo + hi) // 2
                    if sign * _index_rows([mid], span)[which][0] >= at_least:
                        hi = mid
                    else:
                        lo = mid + 1
                return lo

            start, stop = first(sign * row), first(sign * row + 1) - 1  # the offsets that read ``row``
            if start > stop:
                return []
            ends = _index_rows([start, stop], span)[1 - which]  # the other index is monotone: every row between
            return list(range(min(ends), max(ends) + 1))

        def tied(span: int, row: int, window: bool = False) -> set[int]:
            found, todo = {row}, [row]
            while todo:
                r = todo.pop()
                for other in reading(span, r, 0, window) + reading(span, r, 1, window):
                    if other not in found:
                        found.add(other)
                        todo.append(other)
            return found

        # k = 3 first, then a k whose rows fit in memory (a set of every row is judged there, not built at
        # 10^18), then the two far k; each group is judged before the next is asked
        middle, far = rng.randrange(*TIE_SPANS_MIDDLE), [rng.randrange(*TIE_SPANS_FAR) for _ in range(2)]
        groups = [[(TIE_SPAN_SMALL, r) for r in range(2 * TIE_SPAN_SMALL)]]
        for span in [middle] + far:
            rows = [0, 1, 2, span - 1, span, span + 1, 2 * span - 2, 2 * span - 1]
            groups.append([(span, r) for r in rows + [rng.randrange(2 * span) for _ in range(TIE_FAR_ROWS)]])
        for cases in groups:
            answers, stopped = answers_under_guard(
                f, cases, [(deberta, "deberta_relative_index", "pl.deberta_relative_index")],
                steps_per_case=TIE_STEPS, elements_per_case=TIE_ELEMENTS)
            if stopped is not None:
                yield stopped_verdict(stopped[1], f"fn{stopped[0]}",
                                      shortcut="the index has 2k rows, and k reaches 10^18 here: a rule for the "
                                               "rows must come from the clips themselves",
                                      loop="runs out of steps: a walk over the rows or the offsets, or a search "
                                           "among them, cannot reach k beyond 10^15",
                                      grid="an array over the rows or the offsets cannot reach k beyond 10^15")
                return
            edge_only = None  # at row 0 or 2k - 1 the mirror and a forgotten clip tie give the same set
            for (span, row), raw in answers.items():
                case = f"fn({span}, {row})"
                got = _rows(raw, span)
                if got is None or row not in got:
                    yield False, (f"{case}: return a set of row numbers (whole numbers 0 to 2k - 1) that holds row "
                                  f"{row} itself")
                    return
                truth = tied(span, row)
                if got == truth:
                    continue
                if got == {row, 2 * span - 1 - row} and got < truth:
                    edge_only = edge_only or case  # judged by the other rows first: they tell the two apart
                    continue
                if got == {row, 2 * span - 1 - row}:
                    yield False, (f"{case}: your set pairs row r with row 2k - 1 - r (the table read from either "
                                  "end), but the two indices are not mirror images in that sense: compare them for "
                                  "one pair")
                elif got < truth and tied(span, row, window=True) <= got:
                    yield False, f"{case}: {EDGE_TIES_LEFT_OUT}"
                elif got < truth:
                    yield False, (f"{case}: some (query, key) pair ties a row to this set, directly or through "
                                  "others, that your set leaves out: for a pair at i - j = o, which two rows do the "
                                  "indices read?")
                elif got > truth:
                    yield False, (f"{case}: your set holds a row that no chain of (query, key) pairs ties to row "
                                  f"{row}: a blind table could let them differ")
                else:
                    yield False, (f"{case}: your set leaves out a row some (query, key) pair ties to row {row}, and "
                                  "holds one no pair ties to it")
                return
            if edge_only is not None:
                yield False, f"{edge_only}: {EDGE_TIES_LEFT_OUT}"
                return
        n_asked = sum(map(len, groups))
        yield True, (f"every row at k = {TIE_SPAN_SMALL}, and {n_asked - 2 * TIE_SPAN_SMALL} rows at one k between "
                     f"{TIE_SPANS_MIDDLE[0]:,} and {TIE_SPANS_MIDDLE[1]:,} and two between 10^15 and 10^18, drawn "
                     "at this check")

    return report("the rows a table blind to DeBERTa's p2c index must tie", fn, run,
                  "write out, for one (query, key) pair, the row each index reads: how do the two rows relate, "
                  "and what does a clip do to that relation?")


def _rows(raw: Any, span: int) -> set[int] | None:
    """The answer as a set of row numbers 0 .. 2k - 1 (at most a few thousand), or None when it is not one."""
    if isinstance(raw, (str, bytes)) or not hasattr(raw, "__len__") or len(raw) > 4096:
        return None
    try:
        out = {int(r) for r in raw if int(r) == r}
    except (TypeError, ValueError):
        return None
    if len(out) != len(set(raw)) or any(not 0 <= r < 2 * span for r in out):
        return None
    return out

