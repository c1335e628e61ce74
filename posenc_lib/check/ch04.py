"""Checkers for notebooks/04_relative.ipynb: XLNet's shift, T5's rows and last bucket, a DeBERTa table.

No answer is kept here. The cases of every exercise are drawn anew at each check; a shift is judged
by the distance each entry holds, a count of rows against the library's buckets (outside the
learner's function), a last bucket by the bucket rule of §4 at the answer and one below it, and a
table by the scores it gives with both p2c indices; the largest number of different rows such a
table can have is stored as a salted digest (``_core.sealed``).
"""
from __future__ import annotations

import math
import random
from typing import Any, Callable, Iterator

import torch

from .. import deberta, relative, xl
from ._core import Verdict, close, float64_tensor, report, sealed, whole_number
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["xl_rel_shift", "t5_rows_read", "t5_last_bucket", "deberta_blind_table"]

FORMULA_STEPS = 40  # Python lines for one case of Exercise 3: a closed form needs 3 to 20; a bisection over 10^18
#                    distances 60 or more, even written as bisect.bisect_left with a one-line key
SHORT_STEPS = 2_000  # for Exercise 2: its answer is short too, and a walk over the offsets needs thousands


def _fresh_rng() -> random.Random:
    """The cases of a check are drawn from here, seeded by the operating system: no two checks see the same."""
    return random.Random()


# ---------------------------------------------------------------- Exercise 1: XLNet's relative shift

def _shift_functions() -> tuple[tuple[Any, str, str], ...]:
    """§3's shift (XL's layout), and XLNet's own in transformers, where it is installed."""
    import posenc_lib

    found = [(posenc_lib, "rel_shift", "pl.rel_shift"), (xl, "rel_shift", "pl.rel_shift")]
    try:
        from transformers.models.xlnet.modeling_xlnet import XLNetRelativeAttention
    except ImportError:  # the checker does not need transformers; it only refuses it where it is
        return tuple(found)
    return tuple(found + [(XLNetRelativeAttention, name, f"XLNet's {name}") for name in ("rel_shift", "rel_shift_bnij")])


def _shift_cases(rng: random.Random) -> list[tuple[int, int]]:
    """Four (q_len, k_len) shapes, k_len = q_len + M: one query alone, no memory, and two of each at random."""
    return [(1, 1 + rng.randrange(1, 6)), (rng.randrange(2, 7), 0), (rng.randrange(2, 7), rng.randrange(1, 7)),
            (rng.randrange(3, 9), rng.randrange(2, 9))]


def xl_rel_shift(fn: Any) -> bool | None:
    """Exercise 1: fn(x) -> XLNet's shift of x, (q_len, k_len + q_len) scores whose column c holds distance k_len - c,
    into (q_len, k_len) whose entry (i, j) holds distance M + i - j, for every key (M = k_len - q_len).

    Each row of x is a random function of the distance, drawn anew at every check, so an entry is right
    exactly when it holds the value at the right distance; pl.rel_shift and XLNet's own shift refuse to run.
    """

    def run(f: Callable[[torch.Tensor], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(x), got {type(f).__name__}"
            return
        rng = _fresh_rng()
        for q_len, memory in _shift_cases(rng):
            k_len = q_len + memory
            coefficients = torch.tensor([[rng.gauss(0, 1) for _ in range(4)] for _ in range(q_len)], dtype=torch.float64)

            def at(distance: torch.Tensor) -> torch.Tensor:  # row i's value at each distance: a random cubic
                powers = torch.stack([distance.double() ** p for p in range(4)], dim=-1)
                return (powers * coefficients[:, None, :]).sum(-1)

            rows, cols = torch.arange(q_len)[:, None], torch.arange(k_len)[None, :]
            x = at((k_len - torch.arange(k_len + q_len)).expand(q_len, -1))  # column c: distance k_len - c
            answers, stopped = answers_under_guard(f, [(x.clone(),)], _shift_functions(), loops=False)
            if stopped is not None:
                yield stopped_verdict(stopped[1], "your function", shortcut="build the shift with one gather, from "
                                      "the column that holds the distance each entry needs")
                return
            got = float64_tensor(next(iter(answers.values())))
            where = f"q_len = {q_len}, k_len = {k_len}"
            if got is None or got.shape != (q_len, k_len):
                yield False, f"{where}: return a (q_len, k_len) = ({q_len}, {k_len}) tensor, got {getattr(got, 'shape', got)}"
                return
            needed = memory + rows - cols  # the distance entry (i, j) needs, query minus key

            def holds(distance: torch.Tensor) -> torch.Tensor:
                return (got - at(distance)).abs() < 1e-6 * (1 + at(distance).abs())

            if holds(needed).all():
                continue
            if holds(needed + 1).all():
                yield False, (f"{where}: every entry holds the distance one more than it needs: which distance "
                              "does column c of XLNet's matrix hold, and which did §3's layout hold?")
            elif holds(needed)[needed >= 0].all():
                yield False, (f"{where}: right for every key at or before the query, wrong for keys after it: "
                              "XLNet needs them too (no mask hides them)")
            else:
                yield False, f"{where}: some entries hold the wrong distance"
            return
        yield True, "every entry (i, j), keys after the query included, holds the distance M + i - j, at every shape"

    return report("XLNet's relative shift, with one gather", fn, run,
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


def _t5_answers(f: Callable[..., Any], cases: list[tuple[int, int, bool]], steps: int, *, shortcut: str,
                loop: str) -> tuple[dict[tuple[Any, ...], Any], Verdict | None]:
    """f(*case) for every case, the library's buckets refused and ``steps`` Python lines per case; or the
    verdict on the shortcut or the loop that stopped it."""
    answers, stopped = answers_under_guard(f, cases, _t5_bucket_functions(), steps_per_case=steps)
    if stopped is None:
        return answers, None
    return answers, stopped_verdict(stopped[1], f"fn{stopped[0]}", shortcut=shortcut, loop=loop)


def _per_direction(num_buckets: int, bidirectional: bool) -> int:
    return num_buckets // 2 if bidirectional else num_buckets


def _rows_cases(rng: random.Random) -> list[tuple[int, int, bool]]:
    """Five settings like T5's (max_distance at least 4 num_buckets, where the count does not depend on it:
    tests/test_check_ch04.py): an encoder and a decoder of modest size, and one of each with max_distance in the
    trillions."""
    def buckets() -> int:
        return 2 * rng.randrange(2, 65)

    out = []
    for bidirectional in (True, False, rng.random() < 0.5):
        nb = buckets()
        out.append((nb, rng.randrange(4 * nb, 40 * nb), bidirectional))
    for bidirectional in (False, True):
        nb = buckets()
        out.append((nb, rng.randrange(10**12, 10**13), bidirectional))
    return out


def t5_rows_read(fn: Any) -> bool | None:
    """Exercise 2: fn(num_buckets, max_distance, bidirectional) -> how many of the num_buckets rows any input can
    read, for settings like T5's (max_distance >= 4 num_buckets); the library's buckets refuse to run meanwhile."""

    def run(f: Callable[[int, int, bool], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(num_buckets, max_distance, bidirectional), got {type(f).__name__}"
            return
        def rows_read(nb: int, md: int, bidir: bool) -> int:
            """By the library's buckets, outside the learner's function. For max_distance >= 4 num_buckets the
            count does not depend on max_distance (tests/test_check_ch04.py), so a setting too far to list is
            counted at 4 num_buckets."""
            md = min(md, 4 * nb)
            offsets = torch.arange(-4 * md, 4 * md + 1)
            return len(relative.t5_relative_bucket(offsets, num_buckets=nb, max_distance=md,
                                                   bidirectional=bidir).unique())

        cases = _rows_cases(_fresh_rng())
        answers, refused = _t5_answers(f, cases, SHORT_STEPS,
                                       shortcut="that measures the buckets; say which rows no offset can reach, and why",
                                       loop="walks the offsets one by one (max_distance is in the trillions there): "
                                            "reason about which rows no offset can reach instead")
        if refused is not None:
            yield refused
            return
        for (nb, md, bidir), raw in answers.items():
            case, mode = f"fn({nb}, {md}, {bidir})", "an encoder" if bidir else "a decoder"
            got = whole_number(raw)
            if got is None:
                yield False, f"{case} must be a whole number of rows, got {raw!r}"
                return
            want = rows_read(nb, md, bidir)
            if got == want:
                continue
            if not 0 <= got <= nb:
                yield False, f"{case} = {got} is not a number of rows of a {nb}-row table"
            elif got == nb:
                yield False, (f"{case}: {nb} assumes every bucket is reached in {mode}: is there a bucket that no "
                              "distance a key can have on its side lands in?")
            elif got == nb // 2:
                yield False, f"{case}: that is one direction's share; which buckets does {mode} give each side?"
            elif got == rows_read(nb, md, not bidir):
                yield False, (f"{case}: that count belongs to the other kind of model; what does {mode} do with keys "
                              "after the query?")
            else:
                yield False, f"{case} = {got} is not the number of rows {mode} can read"
            return
        yield True, (f"right for {len(cases)} settings, encoders and decoders, drawn anew at this check: one row "
                     "more or less, and why")

    return report("how many of a T5 table's rows are ever read", fn, run,
                  "a row is read only if some offset j - i lands in its bucket; which distances can a key have on "
                  "each side of the query?")


def _last_bucket_cases(rng: random.Random) -> list[tuple[int, int, bool]]:
    """Six settings none of which the chapter shows, new at every check: an encoder and a decoder of modest size,
    three more at random, and one with max_distance beyond 10^18 (too far to walk to, or to bisect in a few
    steps). Each gives its direction at least 4 buckets, so that the last one is not simply max_exact."""
    def setting(bidirectional: bool, per_direction: int, max_distance: int) -> tuple[int, int, bool]:
        return (2 * per_direction if bidirectional else per_direction), max_distance, bidirectional

    cases = [setting(bidir, rng.randrange(4, 33), rng.randrange(65, 5000))
             for bidir in (True, False, *(rng.random() < 0.5 for _ in range(3)))]
    return cases + [setting(rng.random() < 0.5, rng.randrange(8, 17), rng.randrange(10**18, 10**19))]


def _bucket_rule(n: int, per_direction: int, max_distance: int) -> float:
    """§4's bucket of distance n within one direction, in float64, before the min: n below max_exact is its own
    bucket; otherwise e + log(n/e) / log(max_distance/e) (B - e), not yet floored (so a checker can see a tie)."""
    e = per_direction // 2
    if n < e:
        return float(n)
    return e + math.log(n / e) / math.log(max_distance / e) * (per_direction - e)


def _in_last(n: int, per_direction: int, max_distance: int) -> bool:
    """Is distance n in the last bucket of the past (B - 1)? 1e-9 of slack where float32 and float64 could differ."""
    return n >= 0 and _bucket_rule(n, per_direction, max_distance) >= per_direction - 1 - 1e-9 * per_direction


def _starts_last(n: int, per_direction: int, max_distance: int, slack: int = 0) -> bool:
    """n is where the last bucket starts, give or take ``slack`` distances: the rule puts n + slack in the last
    bucket and n - slack - 1 outside it."""
    return _in_last(n + slack, per_direction, max_distance) and not _in_last(n - slack - 1, per_direction, max_distance)


def t5_last_bucket(fn: Any) -> bool | None:
    """Exercise 3: fn(num_buckets, max_distance, bidirectional) -> first distance in the last bucket of the past.

    The point is the closed form: the library's bucket function refuses to run while fn does, each case
    has the Python steps of a formula (not of a walk or a bisection), and one case puts the start beyond
    10^16, where no list of distances fits in memory.
    """

    def run(f: Callable[[int, int, bool], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(num_buckets, max_distance, bidirectional), got {type(f).__name__}"
            return
        cases = _last_bucket_cases(_fresh_rng())
        answers, refused = _t5_answers(f, cases, FORMULA_STEPS,
                                       shortcut="derive the start from the formula of §4 instead of listing buckets",
                                       loop="searches the distances (a walk or a bisection runs out of steps; one "
                                            "case has max_distance beyond 10^18): solve the rule for n instead")
        if refused is not None:
            yield refused
            return
        for (nb, md, bidir), raw in answers.items():
            B, case = _per_direction(nb, bidir), f"fn({nb}, {md}, {bidir})"
            mode = "bidirectional" if bidir else "causal"
            got = whole_number(raw)
            if got is None:
                yield False, f"{case} must return a whole distance (distances are integers), got {raw!r}"
                return
            slack = 1 + int(1e-6 * abs(got)) if md > 10**6 else 0  # float32 arithmetic is 1e-7 off, relatively
            if _starts_last(got, B, md, slack):
                continue
            if got == md:
                yield False, f"{case} = max_distance: the last bucket begins before it (§4)"
            elif _starts_last(got + 1, B, md, slack) or _starts_last(got - 1, B, md, slack):
                yield False, f"{case} is off by one: distances are integers; which side of the exact solution is in?"
            elif nb // 2 > 1 and _starts_last(got, _per_direction(nb, not bidir), md, slack):
                yield False, (f"{case}: that start belongs to the other mode; how many buckets does a {mode} bias "
                              "give the past?")
            else:
                yield False, f"{case} = {got} is not where the last bucket of the past starts ({mode})"
            return
        yield True, (f"right for {len(cases)} settings drawn anew at this check, one of them with max_distance "
                     "beyond 10^18")

    return report("where T5's last bucket starts", fn, run,
                  "run §4's formula backwards, from a bucket to the first distance that reaches it")


# ---------------------------------------------------------------- Exercise 4: a direction-blind DeBERTa table

BLIND_DIM = 4
BLIND_SPANS = range(3, 17)  # the k a check may ask for


def _blind_seal(rows: int, span: int) -> str | None:
    return sealed(rows, f"ch04.deberta_blind_table/{span}")


# k -> sealed largest number of different rows a blind (2k, d) table can have
BLIND_MOST_ROWS = {
    3: "91269e12396886a89e97c3f3",
    4: "a816d317b213e9bbea665bb6",
    5: "1f09178285c025e8ad8369b0",
    6: "d28302501a8139a383860169",
    7: "a1367a6b03c93bbe0550c428",
    8: "05b48751e34e0674a4e53881",
    9: "dd8349b7646985ead54113d5",
    10: "9fd09cdf149497d32110cb8c",
    11: "0ca03ce8d219f62a7ce4c3df",
    12: "7c312cf23bc47baab97d8bfa",
    13: "387fb6177469823da4a9f683",
    14: "8bca9cc17d78bd550d19f34c",
    15: "b8c0fa61bc3a73f93fb5733d",
    16: "e5ac1b37dbe46e990a8b9ac7",
}


def _distinct_rows(table: torch.Tensor, atol: float = 1e-6) -> int:
    rows: list[torch.Tensor] = []
    for row in table:
        if not any(close(row, r, atol=atol) for r in rows):
            rows.append(row)
    return len(rows)


def _p2c_both(table: torch.Tensor, length: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """p2c with the paper's index and with the released code's, for random content and this q^r table."""
    span = table.shape[0] // 2
    q_c, k_c = torch.randn(2, length, BLIND_DIM, generator=g, dtype=torch.float64)
    k_r = torch.randn(2 * span, BLIND_DIM, generator=g, dtype=torch.float64)
    paper = deberta.deberta_terms(q_c, k_c, table, k_r, p2c_index="paper")[2]
    code = deberta.deberta_terms(q_c, k_c, table, k_r, p2c_index="reference")[2]
    return paper, code


def deberta_blind_table(fn: Any) -> bool | None:
    """Exercise 4: fn(k) -> a (2k, 4) table q^r with which the paper's and the code's p2c agree for every content
    and at every length, with as many different rows as that allows; k is drawn anew at every check."""

    def run(f: Callable[[int], Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(k) returning a (2k, {BLIND_DIM}) table, got {type(f).__name__}"
            return
        rng = _fresh_rng()
        spans = [3] + rng.sample([k for k in BLIND_SPANS if k != 3], 2)
        g = torch.Generator().manual_seed(rng.randrange(2**31))
        for span in spans:
            raw = f(span)
            table = float64_tensor(raw)
            case = f"fn({span})"
            if table is None or table.shape != (2 * span, BLIND_DIM):
                yield False, f"{case}: expected a ({2 * span}, {BLIND_DIM}) table, got {getattr(table, 'shape', type(raw).__name__)}"
                return
            if not torch.isfinite(table).all():
                yield False, f"{case}: the table must hold finite numbers"
                return
            lengths = (span + 1, 2 * span + 2, 3 * span)
            both = [_p2c_both(table, n, g) for n in lengths]
            if not all(close(paper, code, atol=1e-9, rtol=1e-9) for paper, code in both):
                window = [relative.relative_positions(n, n).abs() < span for n in lengths]
                if all(close(paper[w], code[w], atol=1e-9, rtol=1e-9) for (paper, code), w in zip(both, window)):
                    yield False, (f"{case}: every (query, key) pair less than k apart agrees; keys k or more steps "
                                  "away read the clipped edge rows, and those differ in your table")
                elif close(table, table.flip(0), atol=1e-9, rtol=1e-5):
                    yield False, (f"{case}: your table reads the same from either end (row r = row 2k - 1 - r), but "
                                  "the two indices are not mirror images in that sense: compare them for one pair")
                else:
                    yield False, (f"{case}: for some (query, key) pairs the two indices read rows of your table that "
                                  "differ: for a pair at i - j = o, which two rows are they?")
                return
            rows = _distinct_rows(table)
            if _blind_seal(rows, span) != BLIND_MOST_ROWS[span]:
                yield False, (f"{case}: the paper's and the code's p2c agree, but your table has only {rows} "
                              f"different row{'s' if rows > 1 else ''}; the constraint lets more of them differ")
                return
        yield True, ("for k = 3 and two more drawn at this check: the two p2c indices give the same scores, and as "
                     "many rows differ as they can")

    return report("a DeBERTa table that does not care which p2c index it is read with", fn, run,
                  "every (query, key) pair ties two rows of the table together; which rows end up tied?")
