"""The chapter 4 checkers: right answers pass, the shortcuts each prompt forbids are refused, each
misconception a checker names gets its name, and the checker module hands over no answer."""
import bisect
import inspect
import math
import random

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import posenc_lib as pl
from posenc_lib import check
from posenc_lib.check import ch04
from _answer_key import defined_here


@pytest.fixture(params=range(6))
def draw(request, monkeypatch):
    """Run a test under several draws of the checkers' cases (each seeded, so a failure can be replayed)."""
    monkeypatch.setattr(ch04, "_fresh_rng", lambda: random.Random(request.param))
    return request.param


def test_checkers_are_exported():
    for name in ("xl_rel_shift", "t5_rows_read", "t5_last_bucket", "deberta_blind_table"):
        assert callable(getattr(check, name))


@pytest.mark.parametrize("checker", [check.xl_rel_shift, check.t5_rows_read, check.t5_last_bucket,
                                     check.deberta_blind_table])
def test_unattempted_says_so_and_bugs_are_reported(checker, capsys):
    assert checker(None) is None
    assert "not attempted yet" in capsys.readouterr().out

    def stub(*args):
        raise NotImplementedError

    assert checker(stub) is None
    assert "not attempted yet" in capsys.readouterr().out
    assert checker(lambda *args: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out


# ---------------------------------------------------------------- Exercise 1: XLNet's shift

def xlnet_shift(x):
    """Column c of x holds distance K - c; entry (i, j) needs M + i - j = K - c, so c = Q - i + j."""
    q, width = x.shape
    i, j = torch.arange(q)[:, None], torch.arange(width - q)[None, :]
    return x.gather(1, q - i + j)


def xlnet_shift_by_loops(x):
    """The same index, entry by entry, in numpy: another right route."""
    a = np.asarray(x)
    q, width = a.shape
    return np.array([[a[i, q - i + j] for j in range(width - q)] for i in range(q)])


def xlnet_reshape_by_hand(x):
    """XLNet's own trick written out (no pad): read (Q, K+Q) as (K+Q, Q), drop a row, keep K columns. It
    needs the same reading of the layout, so it is accepted."""
    q, width = x.shape
    return x.reshape(width, q)[1:].reshape(q, width - 1)[:, : width - q]


def test_xlnet_layout_independent_of_the_checker():
    """transformers' XLNet builds R for distances K, K-1, ..., -(Q-1) (so column c holds K - c), and its own
    rel_shift_bnij puts distance M + i - j at (i, j) for every key: the index above does the same."""
    from transformers import XLNetConfig, XLNetModel
    from transformers.models.xlnet.modeling_xlnet import XLNetRelativeAttention

    with torch.random.fork_rng():
        model = XLNetModel(XLNetConfig(vocab_size=10, d_model=8, n_layer=1, n_head=2, d_inner=16))
    Q, K = 3, 7
    R = model.relative_positional_encoding(Q, K)[:, 0]
    assert R.shape[0] == K + Q
    x = torch.randn(Q, K + Q, generator=torch.Generator().manual_seed(0))
    theirs = XLNetRelativeAttention.rel_shift_bnij(x[None, None], klen=K)[0, 0]
    torch.testing.assert_close(theirs, xlnet_shift(x))


@pytest.mark.parametrize("right", [xlnet_shift, xlnet_shift_by_loops, xlnet_reshape_by_hand])
def test_xl_rel_shift_accepts_right_answers(right, draw, capsys):
    assert check.xl_rel_shift(right) is True
    assert "all correct!" in capsys.readouterr().out


def xl_index(x):
    """§3's index, for XL's layout (column c holds K - 1 - c): one column off here."""
    q, width = x.shape
    i, j = torch.arange(q)[:, None], torch.arange(width - q)[None, :]
    return x.gather(1, q - 1 - i + j)


def past_only(x):
    """Right where a causal mask would look, zeros for the keys after the query."""
    q, width = x.shape
    k = width - q
    out = xlnet_shift(x)
    return out.masked_fill(pl.relative_positions(q, k, q_offset=k - q) > 0, 0.0)


@pytest.mark.parametrize("wrong, says", [
    (xl_index, "the distance one more than it needs"),
    (past_only, "wrong for keys after it"),
    (lambda x: x[:, x.shape[0]:], "some entries hold the wrong distance"),  # right for query 0 only
    (lambda x: x, "return a (q_len, k_len)"),
])
def test_xl_rel_shift_names_the_misconception(wrong, says, draw, capsys):
    assert check.xl_rel_shift(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "q_len - i + j" not in out and "Q - i + j" not in out  # the index stays hidden


def sections_steps_copied(x):
    """§3's four steps (pad, read as (width + 1, Q), drop a row, read back), copied onto XLNet's matrix and cut
    to k_len columns: one column off, because XLNet's column c holds K - c, not K - 1 - c."""
    q, width = x.shape
    return torch.cat([torch.zeros(q, 1), x], dim=1).reshape(width + 1, q)[1:].reshape(q, width)[:, : width - q]


def test_xl_rel_shift_sections_steps_are_no_answer_until_the_layout_is_read(capsys):
    """§3's route (with torch.cat for F.pad) is not the answer as it stands: named one column off. Moved one
    column on, it is right, and that move is the exercise's derivation, so it is accepted."""
    assert check.xl_rel_shift(sections_steps_copied) is False
    assert "one more than it needs" in capsys.readouterr().out
    fixed = lambda x: torch.cat([torch.zeros(x.shape[0], 1), x], 1).reshape(x.shape[1] + 1, x.shape[0])[1:].reshape(  # noqa: E731
        x.shape[0], x.shape[1])[:, 1 : x.shape[1] - x.shape[0] + 1]
    assert check.xl_rel_shift(fixed) is True
    capsys.readouterr()


def _library_shift(x):
    q, width = x.shape
    return pl.rel_shift(x)[:, 1 : width - q + 1]  # §3's shift, one column on: right, but not derived


def _imported_shift(x):
    from posenc_lib.xl import rel_shift  # the same function under another name

    q, width = x.shape
    return rel_shift(x)[:, 1 : width - q + 1]


def _xlnets_own(x):
    from transformers.models.xlnet.modeling_xlnet import XLNetRelativeAttention

    return XLNetRelativeAttention.rel_shift_bnij(x[None, None], klen=x.shape[1] - x.shape[0])[0, 0]


def _shifted_column_numbers(x):
    """§3's last cell: shift the column numbers with pl.rel_shift and gather through them."""
    q, width = x.shape
    column = pl.rel_shift(torch.arange(width).expand(q, width))[:, 1 : width - q + 1]
    return x.gather(1, column)


@pytest.mark.parametrize("shortcut, says", [
    (_library_shift, "calls pl.rel_shift"),
    (_imported_shift, "calls pl.rel_shift"),
    (_xlnets_own, "calls XLNet's rel_shift_bnij"),
    (_shifted_column_numbers, "calls pl.rel_shift"),
])
def test_xl_rel_shift_refuses_the_library_shifts(shortcut, says, capsys):
    torch.testing.assert_close(shortcut(torch.arange(21.0).view(3, 7)), xlnet_shift(torch.arange(21.0).view(3, 7)))
    assert check.xl_rel_shift(shortcut) is False  # right numbers, refused
    assert says in capsys.readouterr().out
    assert pl.rel_shift(torch.eye(3)).shape == (3, 3)  # whole again


def test_every_check_draws_new_cases():
    """Unseeded draws differ from check to check (shapes for Ex 1, settings for Ex 2 and 3)."""
    for draw in (ch04._shift_cases, ch04._rows_cases, ch04._last_bucket_cases):
        assert len({tuple(draw(ch04._fresh_rng())) for _ in range(5)}) > 1, draw.__name__
    cases = ch04._shift_cases(random.Random(0))
    assert cases[0][0] == 1 and cases[1][1] == 0  # one query alone, and a segment with no memory


# ---------------------------------------------------------------- Exercise 2: rows a T5 table reads

def rows_read(num_buckets, max_distance, bidirectional):
    """An encoder's upper half has no bucket for 'after the query, distance 0' (distance 0 is the query itself,
    counted in the past): one row fewer. A decoder gives every bucket to the past, and every one is reached."""
    return num_buckets - 1 if bidirectional else num_buckets


@pytest.mark.parametrize("nb", [4, 6, 10, 32, 64, 128])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_rows_read_fact_independent_of_the_checker(nb, bidirectional):
    """By the library's buckets, for settings like T5's: the count is the rule above, whatever max_distance
    (>= 4 num_buckets) is, which is what lets the checker count a far setting at 4 num_buckets."""
    for md in sorted({4 * nb, 4 * nb + 1, 5 * nb + 3, 40 * nb, 40 * nb + 7}):
        offsets = torch.arange(-4 * md, 4 * md + 1)
        b = pl.t5_relative_bucket(offsets, num_buckets=nb, max_distance=md, bidirectional=bidirectional)
        assert len(b.unique()) == rows_read(nb, md, bidirectional), md
    if bidirectional:
        assert nb // 2 not in pl.t5_relative_bucket(torch.arange(-5000, 5001), num_buckets=nb, max_distance=4 * nb).tolist()


@pytest.mark.parametrize("nb", [4, 8, 32, 128])
@pytest.mark.parametrize("bidirectional", [True, False])
def test_rows_read_far_settings_reach_every_bucket(nb, bidirectional):
    """The checker counts a setting with max_distance in the trillions at 4 num_buckets. Justified: at such a
    max_distance the library puts the middle distance of every far bucket, e (md/e)^((b - e + 1/2)/(B - e)), in
    bucket b, and nothing lands in the encoder's upper bucket B."""
    B = nb // 2 if bidirectional else nb
    e = B // 2
    for md in (10**12, 3 * 10**12 + 17, 10**13 - 1):
        middles = torch.tensor([round(e * (md / e) ** ((b - e + 0.5) / (B - e))) for b in range(e, B)])
        offsets = torch.cat([-torch.arange(e), -middles])  # the past: every exact distance, every far middle
        got = pl.t5_relative_bucket(offsets, num_buckets=nb, max_distance=md, bidirectional=bidirectional)
        assert got.tolist() == list(range(B)), md
        if bidirectional:
            ahead = pl.t5_relative_bucket(-offsets[1:], num_buckets=nb, max_distance=md)  # keys after, distance >= 1
            assert ahead.tolist() == list(range(B + 1, 2 * B)) and B not in ahead.tolist()


@pytest.mark.parametrize("right", [
    rows_read,
    lambda nb, md, bidir: np.int64(nb - int(bidir)),
    lambda nb, md, bidir: torch.tensor(float(nb - bidir)),
])
def test_t5_rows_read_accepts_right_answers(right, draw, capsys):
    assert check.t5_rows_read(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (lambda nb, md, bidir: nb, "assumes every bucket is reached"),  # both halves taken as full
    (lambda nb, md, bidir: nb // 2 if bidir else nb, "one direction's share"),  # forgot the keys after the query
    (lambda nb, md, bidir: nb - 1, "belongs to the other kind of model"),  # one rule for both
    (lambda nb, md, bidir: nb - 2, "is not the number of rows"),
    (lambda nb, md, bidir: 10 * nb, "is not a number of rows"),
    (lambda nb, md, bidir: "many", "must be a whole number"),
])
def test_t5_rows_read_names_the_misconception(wrong, says, draw, capsys):
    assert check.t5_rows_read(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "- 1 if" not in out and "nb - 1" not in out


def _rows_by_library(nb, md, bidir):
    b = pl.t5_relative_bucket(torch.arange(-4 * md, 4 * md + 1), num_buckets=nb, max_distance=md, bidirectional=bidir)
    return len(b.unique())


def _rows_by_t5_bias(nb, md, bidir):
    return len(pl.T5RelativeBias(num_heads=1, num_buckets=nb, max_distance=md, bidirectional=bidir).buckets(64).unique())


def _rows_by_hand_loop(nb, md, bidir):
    """§4's teaching formula, copied, over every offset: a measurement with no library call."""
    B = nb // 2 if bidir else nb
    e = B // 2
    seen = set()
    for offset in range(-4 * md, 4 * md + 1):
        upper, n = (B if offset > 0 else 0, abs(offset)) if bidir else (0, max(-offset, 0))
        seen.add(upper + (n if n < e else min(B - 1, e + math.floor(math.log(n / e) / math.log(md / e) * (B - e)))))
    return len(seen)


@pytest.mark.parametrize("shortcut, says", [
    (_rows_by_library, "calls pl.t5_relative_bucket"),
    (_rows_by_t5_bias, "calls pl.t5_relative_bucket"),  # the module, through the function it uses
    (_rows_by_hand_loop, "walks the offsets one by one"),
])
def test_t5_rows_read_refuses_measuring_the_buckets(shortcut, capsys, says):
    assert check.t5_rows_read(shortcut) is False
    assert says in capsys.readouterr().out
    assert pl.t5_relative_bucket(torch.tensor([-3])).tolist() == [3]  # whole again


# ---------------------------------------------------------------- Exercise 3: where the last bucket starts

def last_bucket_closed_form(num_buckets, max_distance, bidirectional):
    """Solve e + floor(log(n/e) / log(max_distance/e) * (B - e)) >= B - 1 for the smallest integer n."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    return math.ceil(e * (max_distance / e) ** ((B - 1 - e) / (B - e)))


def last_bucket_by_library(num_buckets, max_distance, bidirectional):
    """Right numbers, wrong route: asks the library for the buckets the exercise asks to derive."""
    last = (num_buckets // 2 if bidirectional else num_buckets) - 1
    b = pl.t5_relative_bucket(-torch.arange(4 * max_distance), num_buckets=num_buckets,
                              max_distance=max_distance, bidirectional=bidirectional)
    return int((b == last).nonzero()[0])


def log_term(n, B, e, max_distance):
    """The issue's shortcut: a copy of the rule, to search over."""
    return e + math.floor(math.log(n / e) / math.log(max_distance / e) * (B - e))


def last_bucket_by_bisection(num_buckets, max_distance, bidirectional):
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    lo, hi = e, max_distance
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if log_term(mid, B, e, max_distance) >= B - 1 else (mid, hi)
    return hi


def last_bucket_by_bisect_module(num_buckets, max_distance, bidirectional):
    """The same search in one line of Python per step (bisect's key)."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    return e + bisect.bisect_left(range(e, max_distance), True, key=lambda n: log_term(n, B, e, max_distance) >= B - 1)


def last_bucket_by_walk(num_buckets, max_distance, bidirectional):
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    n = e
    while log_term(n, B, e, max_distance) < B - 1:
        n += 1
    return n


def last_bucket_closed_float32(num_buckets, max_distance, bidirectional):
    """The closed form in float32 torch arithmetic: some distances off in the far case, exact below."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    return torch.ceil(e * (torch.tensor(max_distance / e, dtype=torch.float32)) ** ((B - 1 - e) / (B - e)))


def test_t5_last_bucket_known_values():
    """Independent of the checker: the 16/32 case of §4 starts at 20; T5's defaults at 91 (encoder), 113 (decoder),
    and the closed form agrees with the library's buckets on a grid of settings."""
    assert last_bucket_closed_form(16, 32, True) == last_bucket_by_walk(16, 32, True) == 20
    assert last_bucket_closed_form(32, 128, True) == 91 and last_bucket_closed_form(32, 128, False) == 113
    for nb, md, bidir in ((8, 65, True), (24, 100, True), (12, 500, False), (40, 4999, False), (64, 256, True)):
        assert last_bucket_closed_form(nb, md, bidir) == last_bucket_by_library(nb, md, bidir)


@pytest.mark.parametrize("right", [
    last_bucket_closed_form,  # an int
    lambda nb, md, bidir: np.int64(last_bucket_closed_form(nb, md, bidir)),  # a numpy integer
    last_bucket_closed_float32,  # a float32 0-d tensor
    lambda nb, md, bidir: float(last_bucket_closed_form(nb, md, bidir)),  # a whole float
])
def test_t5_last_bucket_accepts_right_answers(right, draw, capsys):
    assert check.t5_last_bucket(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (lambda nb, md, bidir: md, "the last bucket begins before it"),  # the imprecise "beyond max_distance"
    (lambda nb, md, bidir: last_bucket_closed_form(nb, md, bidir) - 1, "off by one"),  # floor, not ceil
    (lambda nb, md, bidir: last_bucket_closed_form(nb, md, bidir) + 1, "off by one"),
    (lambda nb, md, bidir: last_bucket_closed_form(nb, md, True), "belongs to the other mode"),  # one B for both
    (lambda nb, md, bidir: (nb // 4) * (md / (nb // 4)) ** 0.9 + 0.5, "whole distance"),  # unrounded
    (lambda nb, md, bidir: 0, "is not where the last bucket"),
])
def test_t5_last_bucket_names_the_misconception(wrong, says, draw, capsys):
    assert check.t5_last_bucket(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    for nb, md, bidir in ch04._last_bucket_cases(random.Random(draw)):
        want = last_bucket_closed_form(nb, md, bidir)
        assert f" {want} " not in out and f"= {want} " not in out and f"{want}." not in out  # answers stay hidden


@pytest.mark.parametrize("shortcut, says", [
    (last_bucket_by_library, "calls pl.t5_relative_bucket"),
    (last_bucket_by_bisection, "searches the distances"),  # the issue's: a bisection over a copy of log_term
    (last_bucket_by_bisect_module, "searches the distances"),
    (last_bucket_by_walk, "searches the distances"),
    (lambda nb, md, bidir: int(np.argmax(np.arange(4 * md) >= last_bucket_closed_form(nb, md, bidir))),
     "calls numpy.arange with"),  # a list of every distance
])
def test_t5_last_bucket_refuses_the_shortcuts(shortcut, says, capsys):
    assert check.t5_last_bucket(shortcut) is False
    out = capsys.readouterr().out
    assert says in out


def test_t5_last_bucket_leaves_the_library_working(capsys):
    import sys

    before = (pl.t5_relative_bucket, pl.t5_relative_bucket.__code__, torch.arange, np.arange, sys.gettrace())
    for shortcut in (last_bucket_by_library, last_bucket_by_walk, lambda *a: 1 / 0):
        check.t5_last_bucket(shortcut)
        assert (pl.t5_relative_bucket, pl.t5_relative_bucket.__code__, torch.arange, np.arange, sys.gettrace()) == before
    assert pl.t5_relative_bucket(torch.tensor([-3])).tolist() == [3]
    capsys.readouterr()


def test_t5_last_bucket_far_case_by_the_rule_in_float64():
    """Independent of the checker: in the far case the closed form's answer is the first n whose bucket reaches
    B - 1 by the rule in exact-enough float64 (up to the float slack the checker allows), and a bisection would
    need more steps than the checker gives a case."""
    for draw in range(20):
        nb, md, bidir = ch04._last_bucket_cases(random.Random(draw))[-1]
        B = nb // 2 if bidir else nb
        e = B // 2
        start = last_bucket_closed_form(nb, md, bidir)
        slack = 1 + int(1e-6 * start)
        assert log_term(start + slack, B, e, md) >= B - 1 > log_term(start - slack - 1, B, e, md)
        assert start > 10**9 and math.log2(md) > 3 * ch04.FORMULA_STEPS / 2


# ---------------------------------------------------------------- Exercise 4: a direction-blind table

def blind_table(k, dim=4):
    """For i - j = o the code reads row clip(o + k), the paper row clip(k - o) (rows 0 .. 2k-1). Inside the
    window rows r and 2k - r are tied; at the edges row 2k-1 (o >= k-1) meets rows 1 and 0; so the classes
    are {0, 1, 2k-1}, {r, 2k-r} for r = 2 .. k-1, and {k}: k different rows at most."""
    basis = torch.randn(k, dim, generator=torch.Generator().manual_seed(k), dtype=torch.float64)
    label = [0, 0] + [min(r, 2 * k - r) - 1 for r in range(2, 2 * k - 1)] + [0]
    return basis[label]


@pytest.mark.parametrize("k", range(3, 17))
def test_the_right_table_really_is_blind_and_no_table_has_more_rows(k):
    """Independent of the checker: the design gives equal p2c under both indices and k different rows; tying
    rows by the two indices over every pair (a union-find on the library's own indices) leaves exactly k."""
    g = torch.Generator().manual_seed(k)
    q_c, k_c = torch.randn(2, 3 * k, 4, generator=g, dtype=torch.float64)
    k_r = torch.randn(2 * k, 4, generator=g, dtype=torch.float64)
    table = blind_table(k)
    paper = pl.deberta_terms(q_c, k_c, table, k_r, p2c_index="paper")[2]
    code = pl.deberta_terms(q_c, k_c, table, k_r, p2c_index="reference")[2]
    torch.testing.assert_close(paper, code)
    parent = list(range(2 * k))

    def root(r):
        while parent[r] != r:
            r = parent[r]
        return r

    code_rows = pl.deberta_relative_index(3 * k, 3 * k, k)  # delta(i, j)
    for a, b in zip(code_rows.flatten().tolist(), code_rows.T.flatten().tolist()):  # paper: delta(j, i)
        parent[root(a)] = root(b)
    assert len({root(r) for r in range(2 * k)}) == k == ch04._distinct_rows(table)
    assert ch04._blind_seal(k, k) == ch04.BLIND_MOST_ROWS[k]


@pytest.mark.parametrize("right", [
    blind_table,
    lambda k: blind_table(k).float().numpy(),  # a numpy array
    lambda k: blind_table(k).tolist(),  # nested lists
    lambda k: blind_table(k) * 7 - 1,  # other values, same pattern
])
def test_deberta_blind_table_accepts_right_answers(right, draw, capsys):
    assert check.deberta_blind_table(right) is True
    assert "all correct!" in capsys.readouterr().out


def flip_table(k):
    """The plain mirror, row r = row 2k - 1 - r: the wrong symmetry."""
    basis = torch.randn(k, 4, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    return basis[[min(r, 2 * k - 1 - r) for r in range(2 * k)]]


def window_only_table(k):
    """Rows r and 2k - r tied, the edges forgotten (row 0 left alone)."""
    basis = torch.randn(k + 1, 4, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    return basis[[0] + [min(r, 2 * k - r) for r in range(1, 2 * k)]]


def too_few_rows(k):
    table = blind_table(k)
    table[k] = table[0]  # blind still, one row fewer than allowed
    return table


@pytest.mark.parametrize("wrong, says", [
    (flip_table, "reads the same from either end"),
    (window_only_table, "clipped edge rows"),
    (lambda k: torch.arange(8.0 * k).view(2 * k, 4), "rows of your table that differ"),  # no constraint at all
    (lambda k: torch.ones(2 * k, 4), "only 1 different row"),  # blind, but useless
    (too_few_rows, "the constraint lets more of them differ"),
    (lambda k: torch.ones(2 * k - 1, 4), "expected a ("),
    (lambda k: torch.full((2 * k, 4), float("nan")), "finite numbers"),
])
def test_deberta_blind_table_names_the_misconception(wrong, says, draw, capsys):
    assert check.deberta_blind_table(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "{0, 1" not in out and "2k - r" not in out  # the classes stay hidden


def test_deberta_blind_table_asks_for_new_widths():
    seen = set()
    for draw in range(10):
        ch04_rng = random.Random(draw)
        seen.add(tuple([3] + ch04_rng.sample([k for k in ch04.BLIND_SPANS if k != 3], 2)))
    assert len(seen) > 5


# ---------------------------------------------------------------- the answer key is not in the learner's hands

def test_no_callable_or_constant_of_the_checker_module_passes_an_exercise(capsys):
    """Every function the module defines, public or private, is refused or wrong as an answer to every exercise;
    no constant is a count of rows or a table."""
    attributes = defined_here(ch04)
    assert {"_bucket_rule", "_in_last", "_starts_last", "BLIND_MOST_ROWS"} <= attributes.keys()
    for name, value in attributes.items():
        if callable(value):
            for checker in (check.xl_rel_shift, check.t5_rows_read, check.t5_last_bucket, check.deberta_blind_table):
                assert checker(value) is not True, name
        else:
            assert check.deberta_blind_table(lambda k, v=value: v) is not True, name
    capsys.readouterr()


def test_the_checker_source_holds_no_formula_of_an_answer():
    source = inspect.getsource(ch04)
    for answer_shape in ("(B - 1 - e) / (B - e)", "q_len - i + j", "- 1 if bidirectional", "2 * span - r",
                         "min(r, 2"):
        assert answer_shape not in source
    assert all(len(digest) == 24 for digest in ch04.BLIND_MOST_ROWS.values())
