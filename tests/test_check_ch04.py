"""The chapter 4 (relative encodings) exercise checkers: right answers pass, wrong ones fail, None is unattempted."""
import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import posenc_lib as pl
from posenc_lib import check


def last_bucket_closed_form(num_buckets, max_distance, bidirectional):
    """Solve e + floor(log(n/e) / log(max_distance/e) * (B - e)) >= B - 1 for the smallest integer n."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    return math.ceil(e * (max_distance / e) ** ((B - 1 - e) / (B - e)))


def last_bucket_by_hand_loop(num_buckets, max_distance, bidirectional):
    """Right numbers, wrong route: walk the distances up through the formula written out (no library call)."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    n = e
    while e + math.floor(math.log(n / e) / math.log(max_distance / e) * (B - e)) < B - 1:
        n += 1
    return np.int64(n)  # a numpy integer: the same verdict as an int


def last_bucket_by_library(num_buckets, max_distance, bidirectional):
    """Right numbers, wrong route: asks the library for the buckets the exercise asks to derive."""
    last = (num_buckets // 2 if bidirectional else num_buckets) - 1
    b = pl.t5_relative_bucket(-torch.arange(4 * max_distance), num_buckets=num_buckets,
                              max_distance=max_distance, bidirectional=bidirectional)
    return int((b == last).nonzero()[0])


def rel_shift_right(x):
    q, k = x.shape
    return F.pad(x, (1, 0)).view(k + 1, q)[1:].reshape(q, k)


def rel_shift_by_gather(x):
    """A different correct answer: exact where visible, a different (zero) garbage above."""
    q, k = x.shape
    col = (torch.arange(k)[None, :] + q - 1 - torch.arange(q)[:, None]).clamp(max=k - 1)
    return torch.gather(x, 1, col).masked_fill(pl.relative_positions(q, k, q_offset=k - q) > 0, 0.0)


def test_checkers_are_exported():
    for name in ("xl_rel_shift", "t5_rows_read", "t5_last_bucket", "deberta_blind_table"):
        assert callable(getattr(check, name))


@pytest.mark.parametrize("checker", [check.xl_rel_shift, check.t5_rows_read, check.t5_last_bucket,
                                     check.deberta_blind_table])
def test_unattempted_says_so(checker, capsys):
    assert checker(None) is None
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize("checker", [check.t5_last_bucket, check.xl_rel_shift])
def test_stub_raising_not_implemented_is_unattempted_and_bugs_are_reported(checker, capsys):
    def stub(*args):
        raise NotImplementedError

    assert checker(stub) is None
    assert "not attempted yet" in capsys.readouterr().out
    assert checker(lambda *args: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out


# ---------------------------------------------------------------- Exercise 2: rows a T5 encoder reads

def test_t5_rows_read_known_value():
    """Independent of the checker: bucket 16 (upper half, distance 0) is never produced by any offset."""
    b = pl.t5_relative_bucket(torch.arange(-5000, 5001), num_buckets=32, max_distance=128)
    assert sorted(set(range(32)) - set(b.tolist())) == [16]


@pytest.mark.parametrize("right", [31, 31.0, torch.tensor(31), np.int64(31)])
def test_t5_rows_read_accepts_every_form_of_the_count(right, capsys):
    assert check.t5_rows_read(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (32, "assumes every bucket is reached"),  # both halves taken as mirror images
    (16, "one direction's half"),  # forgot the keys after the query
    (30, "too few"),  # thought the past loses a row too
    (40, "not a number of rows"),
    ("many", "expected a whole number"),
])
def test_t5_rows_read_names_the_misconception(wrong, says, capsys):
    assert check.t5_rows_read(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out and "31" not in out


# ---------------------------------------------------------------- Exercise 3: where the last bucket starts

def test_t5_last_bucket_known_values():
    """Independent of the checker: the 16/32 case of §4 starts at 20; T5's defaults at 91 (encoder), 113 (decoder)."""
    assert last_bucket_closed_form(16, 32, True) == last_bucket_by_hand_loop(16, 32, True) == 20
    assert last_bucket_closed_form(32, 128, True) == 91 and last_bucket_closed_form(32, 128, False) == 113
    b = pl.t5_relative_bucket(torch.tensor([-90, -91, -112, -113]), num_buckets=32, max_distance=128)
    b_causal = pl.t5_relative_bucket(torch.tensor([-112, -113]), num_buckets=32, max_distance=128, bidirectional=False)
    assert b[:2].tolist() == [14, 15] and b_causal.tolist() == [30, 31]


def last_bucket_closed_float32(num_buckets, max_distance, bidirectional):
    """The closed form in float32 torch arithmetic: a few distances off at 4.5e7, exact below."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    return torch.ceil(e * (torch.tensor(max_distance / e, dtype=torch.float32)) ** ((B - 1 - e) / (B - e)))


@pytest.mark.parametrize("right", [
    last_bucket_closed_form,  # an int
    lambda nb, md, bidir: np.int64(last_bucket_closed_form(nb, md, bidir)),  # a numpy integer
    last_bucket_closed_float32,  # a float32 0-d tensor
    lambda nb, md, bidir: torch.tensor(last_bucket_closed_form(nb, md, bidir)),  # a 0-d tensor
    lambda nb, md, bidir: float(last_bucket_closed_form(nb, md, bidir)),  # a whole float
])
def test_t5_last_bucket_accepts_right_answers(right, capsys):
    assert check.t5_last_bucket(right) is True
    assert "all correct!" in capsys.readouterr().out


def _printed_answers():
    return [str(check.ch04._last_bucket_start(*case)) for case in check.ch04.T5_LAST_BUCKET_CASES]


@pytest.mark.parametrize("wrong, says", [
    (lambda nb, md, bidir: md, "the last bucket begins before it"),  # the imprecise "beyond max_distance"
    (lambda nb, md, bidir: last_bucket_closed_form(nb, md, bidir) - 1, "off by one"),  # floor, not ceil
    (lambda nb, md, bidir: last_bucket_closed_form(nb, md, True), "belongs to the other mode"),  # one B for both
    (lambda nb, md, bidir: (nb // 4) * (md / (nb // 4)) ** 0.9, "whole distance"),  # unrounded
    (last_bucket_by_library, "calls pl.t5_relative_bucket"),
    (last_bucket_by_hand_loop, "walks the distances up one by one"),  # a measurement through the formula
    (lambda nb, md, bidir: int(np.argmax(np.arange(4 * md) >= last_bucket_closed_form(nb, md, bidir))),
     "calls numpy.arange with"),  # a list of every distance
])
def test_t5_last_bucket_rejects_wrong_answers(wrong, says, capsys):
    assert check.t5_last_bucket(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert not any(f" {want} " in out or f"= {want}" in out for want in _printed_answers())  # answers stay hidden


def test_t5_last_bucket_leaves_the_library_working(capsys):
    import sys

    for shortcut in (last_bucket_by_library, last_bucket_by_hand_loop):
        check.t5_last_bucket(shortcut)
        assert pl.t5_relative_bucket(torch.tensor([-3])).tolist() == [3]  # the patch is gone
        assert torch.arange(3).tolist() == [0, 1, 2] and sys.gettrace() is None  # and so are the guards


def test_t5_far_case_start_by_the_rule_in_float64():
    """Independent of the checker: the far case's start is the first n whose log term reaches B - 1, exactly;
    the library's float32 logarithm is too coarse to place it (so the checker uses the rule)."""
    nb, md, bidir = check.ch04.T5_FAR_CASE
    B, e = nb // 2, nb // 4
    term = lambda n: e + math.floor(math.log(n / e) / math.log(md / e) * (B - e))  # noqa: E731
    start = last_bucket_closed_form(nb, md, bidir)
    assert start == 44_721_360 and term(start) == B - 1 and term(start - 1) == B - 2
    assert abs(check.ch04._far_last_bucket_start() - start) < 1
    assert pl.t5_relative_bucket(-torch.tensor([start + 10]), num_buckets=nb, max_distance=md).item() == B - 1


def test_t5_last_bucket_cases_are_not_the_chapters_printed_ones():
    assert {(16, 32, True), (32, 128, True), (32, 128, False)}.isdisjoint(check.ch04.T5_LAST_BUCKET_CASES)


# ---------------------------------------------------------------- Exercise 1: the relative shift

def rel_shift_gather_clamped(x):
    """The notebook's solution form: one gather, the index clamped into range (its garbage differs)."""
    q, k = x.shape
    i, j = torch.arange(q)[:, None], torch.arange(k)[None, :]
    return x.gather(1, (q - 1 - i + j).clamp(0, k - 1))


def test_xl_rel_shift_right_and_wrong(capsys):
    assert check.xl_rel_shift(rel_shift_by_gather) is True  # other garbage above the diagonal is fine
    assert check.xl_rel_shift(rel_shift_gather_clamped) is True
    assert "all correct!" in capsys.readouterr().out
    torch.testing.assert_close(rel_shift_right(torch.eye(3)), pl.rel_shift(torch.eye(3)))  # §3's route ...
    for shortcut, says in ((lambda x: pl.rel_shift(x), "calls pl.rel_shift"), (rel_shift_right, "calls F.pad")):
        assert check.xl_rel_shift(shortcut) is False  # ... is refused: the exercise asks for the gather
        assert says in capsys.readouterr().out
    assert F.pad(torch.ones(1, 1), (1, 0)).tolist() == [[0.0, 1.0]]  # and works again afterwards
    assert check.xl_rel_shift(lambda x: x) is False
    assert check.xl_rel_shift(lambda x: F.pad(x, (0, 1)).view(x.shape[1] + 1, x.shape[0])[1:].reshape(x.shape)) is False
    assert check.xl_rel_shift(lambda x: x[:, :-1]) is False


# ---------------------------------------------------------------- Exercise 4: a direction-blind table

def blind_table(rows):
    """A (6, 4) table whose rows follow the pattern: rows[r] names the distinct row it copies."""
    basis = torch.eye(4, dtype=torch.float64)
    return torch.stack([basis[c] for c in rows])


RIGHT_TABLE = blind_table([0, 0, 1, 2, 1, 0])  # classes {0, 1, 5}, {2, 4}, {3}


def test_the_right_table_really_is_blind():
    """Independent of the checker: p2c with either index, the table and its constraint classes."""
    g = torch.Generator().manual_seed(0)
    q_c, k_c = torch.randn(2, 10, 4, generator=g, dtype=torch.float64)
    k_r = torch.randn(6, 4, generator=g, dtype=torch.float64)
    paper = pl.deberta_terms(q_c, k_c, RIGHT_TABLE, k_r, p2c_index="paper")[2]
    code = pl.deberta_terms(q_c, k_c, RIGHT_TABLE, k_r, p2c_index="reference")[2]
    torch.testing.assert_close(paper, code)
    random_table = torch.randn(6, 4, generator=g, dtype=torch.float64)
    assert not torch.allclose(pl.deberta_terms(q_c, k_c, random_table, k_r, p2c_index="paper")[2],
                              pl.deberta_terms(q_c, k_c, random_table, k_r, p2c_index="reference")[2])


@pytest.mark.parametrize("right", [
    RIGHT_TABLE,  # a float64 tensor
    RIGHT_TABLE.float().numpy(),  # a numpy array
    RIGHT_TABLE.tolist(),  # nested lists
    torch.stack([torch.full((4,), v) for v in (2.0, 2.0, -1.0, 5.0, -1.0, 2.0)]),  # other values, same pattern
])
def test_deberta_blind_table_accepts_right_answers(right, capsys):
    assert check.deberta_blind_table(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (blind_table([0, 1, 2, 2, 1, 0]), "reads the same from either end"),  # the plain flip, r <-> 2k - 1 - r
    (blind_table([0, 1, 2, 3, 2, 1]), "clipped edge rows"),  # the window right, the edges forgotten
    (torch.arange(24.0).view(6, 4), "rows of your table that differ"),  # no constraint at all
    (torch.ones(6, 4), "only 1 different row"),  # blind, but useless
    (blind_table([0, 0, 0, 1, 0, 0]), "only 2 different rows"),  # blind, but not as many rows as allowed
    (torch.ones(5, 4), "expected a (6, 4) table"),
])
def test_deberta_blind_table_names_the_misconception(wrong, says, capsys):
    assert check.deberta_blind_table(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "{0, 1, 5}" not in out and " 3 different" not in out  # the classes and the count stay hidden


def test_the_guards_are_undone_whatever_the_answer_does(capsys):
    """A refused call, a runaway loop and a plain bug all leave the library, numpy and tracing as they were."""
    import sys

    from posenc_lib.check import _guard

    before = (pl.t5_relative_bucket, torch.arange, np.arange, sys.gettrace())
    for answer, says in ((last_bucket_by_library, "calls pl.t5_relative_bucket"),
                         (last_bucket_by_hand_loop, "walks the distances"), (lambda *a: 1 / 0, "ZeroDivisionError")):
        assert check.t5_last_bucket(answer) is False
        assert says in capsys.readouterr().out
        assert (pl.t5_relative_bucket, torch.arange, np.arange, sys.gettrace()) == before
    answers, stopped = _guard.answers_under_guard(lambda n: sum(range(n)), [(3,), (4,)])
    assert answers == {(3,): 3, (4,): 6} and stopped is None  # nothing refused: the answers by case
