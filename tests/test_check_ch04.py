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
    for name in ("xl_rel_shift", "t5_rows_read", "t5_last_bucket", "deberta_tied_rows"):
        assert callable(getattr(check, name))


@pytest.mark.parametrize("checker", [check.xl_rel_shift, check.t5_rows_read, check.t5_last_bucket,
                                     check.deberta_tied_rows])
def test_unattempted_says_so_and_bugs_are_reported(checker, capsys):
    assert checker(None) is None
    assert "not attempted yet" in capsys.readouterr().out

    def stub(*args):
        raise NotImplementedError

    assert checker(stub) is None
    assert "not attempted yet" in capsys.readouterr().out
    assert checker(lambda *args: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out


# ---------------------------------------------------------------- Exercise 1: a strided relative shift

def strided_shift(x, stride):
    """Column c holds distance stride * (q - 1) - c; entry (i, j) needs stride * i - j, so c = stride * (q - 1 - i)
    + j, which sits at stride * (q - 1) + i * (width - stride) + j in x's memory: a view with those steps."""
    q, width = x.shape
    k = width - stride * (q - 1)
    return x.as_strided((q, k), (width - stride, 1), x.storage_offset() + stride * (q - 1))


def strided_shift_by_slices(x, stride):
    """The same view without as_strided: drop the first stride * (q - 1) numbers, read rows of width - stride."""
    q, width = x.shape
    k = width - stride * (q - 1)
    start = stride * (q - 1)
    return x.reshape(-1)[start:start + q * (width - stride)].reshape(q, width - stride)[:, :k]


def strided_shift_by_gather(x, stride):
    """The right numbers by an index, in new memory."""
    q, width = x.shape
    k = width - stride * (q - 1)
    i, j = torch.arange(q)[:, None], torch.arange(k)[None, :]
    return x.gather(1, stride * (q - 1 - i) + j)


def strided_shift_by_loops(x, stride):
    """The same index, entry by entry, in numpy: right numbers, a copy."""
    a = np.asarray(x)
    q, width = a.shape
    k = width - stride * (q - 1)
    return np.array([[a[i, stride * (q - 1 - i) + j] for j in range(k)] for i in range(q)])


def strided_shift_by_pad(x, stride):
    """§3's reshape trick worked out anew for the stride: pad `stride` zeros on the right and read the flat
    memory from element stride * (q - 1) on in rows of the old width: right numbers, but the pad is a copy."""
    q, width = x.shape
    k = width - stride * (q - 1)
    flat = F.pad(x, (0, stride)).reshape(-1)[stride * (q - 1):]
    return flat[: q * width].reshape(q, width)[:, :k]


def strided_shift_written_back(x, stride):
    """Right numbers written into x's own memory, then a view of it: x changes."""
    out = strided_shift_by_gather(x, stride)
    flat = x.view(-1)
    flat[: out.numel()] = out.reshape(-1)
    return flat[: out.numel()].view(out.shape)


def test_strided_layout_independent_of_the_checker():
    """Funnel-Transformer's pooled attention is the real case: transformers' _relative_shift_gather moves each
    query row `shift` (2) columns after pooling. Here, by hand: with stride 2, query 1 (position 2) and key 0
    are 2 apart, and the layout's column for distance 2 is stride * (q - 1) - 2 = 2."""
    q, k, stride = 3, 4, 2
    width = stride * (q - 1) + k
    distance_of_column = stride * (q - 1) - torch.arange(width)
    x = distance_of_column.double().expand(q, width).contiguous()  # each entry its own distance
    for right in (strided_shift, strided_shift_by_slices):
        out = right(x, stride)
        assert out.tolist() == [[stride * i - j for j in range(k)] for i in range(q)]
        assert out.untyped_storage().data_ptr() == x.untyped_storage().data_ptr()  # a view
    assert distance_of_column[2] == 2


@pytest.mark.parametrize("right", [strided_shift, strided_shift_by_slices])
def test_xl_rel_shift_accepts_right_answers(right, draw, capsys):
    assert check.xl_rel_shift(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("copy", [strided_shift_by_gather, strided_shift_by_loops, strided_shift_by_pad])
def test_xl_rel_shift_refuses_a_copy_and_says_the_numbers_are_right(copy, draw, capsys):
    """The shortcut: any route that builds the right numbers in new memory. The numbers are right, and so said."""
    assert check.xl_rel_shift(copy) is False
    out = capsys.readouterr().out
    assert "every entry holds the right distance, but in new memory" in out


def test_xl_rel_shift_refuses_writing_into_x(draw, capsys):
    assert check.xl_rel_shift(strided_shift_written_back) is False
    assert "wrote into x" in capsys.readouterr().out


def _smallest_first(x, stride):
    """The index of a layout with the smallest distance first, read on this one (largest first)."""
    q, width = x.shape
    k = width - stride * (q - 1)
    return x.gather(1, stride * torch.arange(q)[:, None] - torch.arange(k)[None, :] + k - 1)


def _stride_ignored(x, stride):
    """A view that steps one column per query, as §3's shift does."""
    q, width = x.shape
    k = width - stride * (q - 1)
    return x.as_strided((q, k), (width - 1, 1), x.storage_offset() + stride * (q - 1))


def _one_off(x, stride):
    q, width = x.shape
    k = width - stride * (q - 1)
    i, j = torch.arange(q)[:, None], torch.arange(k)[None, :]
    return x.gather(1, (stride * (q - 1 - i) + j + 1).clamp(max=width - 1))


def _rel_shift_as_is(x, stride):
    """§3's library shift applied to the strided layout, cut to k_len columns."""
    q, width = x.shape
    k = width - stride * (q - 1)
    return pl.rel_shift(x)[:, :k]


def _row_stride_of_x(x, stride):
    """The view with x's own row step (width): every row starts at the same column."""
    q, width = x.shape
    k = width - stride * (q - 1)
    return x.as_strided((q, k), (width, 1), x.storage_offset() + stride * (q - 1))


@pytest.mark.parametrize("wrong, says", [
    (_stride_ignored, "each row moves one column from the row before"),
    (_one_off, "one away from the one they need"),
    (_smallest_first, "as if the smallest distance came first"),
    (_rel_shift_as_is, ("some entries hold the wrong distance", "one away from the one they need")),  # by shape
    (_row_stride_of_x, "some entries hold the wrong distance"),
    (lambda x, s: x.T, "return a (q_len, k_len)"),
])
def test_xl_rel_shift_names_the_misconception(wrong, says, draw, capsys):
    assert check.xl_rel_shift(wrong) is False
    out = capsys.readouterr().out
    assert any(said in out for said in ((says,) if isinstance(says, str) else says)) and "hint:" in out
    assert "width - stride" not in out and "W - s" not in out and "as_strided" not in out  # the steps stay hidden


def test_every_check_draws_new_cases():
    """Unseeded draws differ from check to check (shapes for Ex 1, settings for Ex 2 and 3)."""
    for draw in (ch04._shift_cases, ch04._rows_cases, ch04._last_bucket_cases):
        assert len({tuple(draw(ch04._fresh_rng())) for _ in range(5)}) > 1, draw.__name__
    cases = ch04._shift_cases(random.Random(0))
    assert cases[0][0] == 2 and cases[1][2] == 2 and cases[2][2] == 3  # two queries, strides 2 and 3


# ---------------------------------------------------------------- Exercise 2: a T5 encoder rule that reads every row

def every_row(offsets, num_buckets, max_distance):
    """T5's bucket B of the upper half stands for 'a key after the query at distance 0', which does not exist
    (distance 0 is the query itself, counted in the past). Give the keys after the query the past's buckets of
    distance n - 1: distance 1 reaches row B, and each upper bucket is exactly as wide as its mirror."""
    B = num_buckets // 2
    past = pl.t5_relative_bucket(offsets, num_buckets=num_buckets, max_distance=max_distance)
    ahead = B + pl.t5_relative_bucket(-(offsets - 1).clamp(min=0), num_buckets=num_buckets, max_distance=max_distance)
    return torch.where(offsets > 0, ahead, past)


def every_row_by_formula(offsets, num_buckets, max_distance):
    """The same, written out from §4's three steps in Python, one offset at a time (numpy out)."""
    B = num_buckets // 2
    e = B // 2

    def bucket(n):
        return n if n < e else min(B - 1, e + math.floor(math.log(n / e) / math.log(max_distance / e) * (B - e)))

    return np.array([bucket(-o) if o <= 0 else B + bucket(o - 1) for o in offsets.tolist()])


@pytest.mark.parametrize("nb", [8, 16, 32, 64])
def test_t5s_own_encoder_rule_leaves_one_row_unread(nb):
    """Independent of the checker: with T5's rule no offset reaches row B of an encoder's table (for settings like
    T5's), and the design above reaches every row with the past unchanged."""
    md = 4 * nb
    offsets = torch.arange(-4 * md, 4 * md + 1)
    t5 = pl.t5_relative_bucket(offsets, num_buckets=nb, max_distance=md)
    assert sorted(set(t5.tolist())) == [b for b in range(nb) if b != nb // 2]
    design = every_row(offsets, nb, md)
    assert sorted(set(design.tolist())) == list(range(nb))
    assert torch.equal(design[offsets <= 0], t5[offsets <= 0])
    assert (torch.tensor(every_row_by_formula(offsets, nb, md)) == design).all()


def _linear_future(o, nb, md):
    """The design the old prompt let through: every key after the query exact, up to the last row, which
    ignores the past's spacing (the clamp of the cold read)."""
    B = nb // 2
    return torch.where(o > 0, B + (o - 1).clamp(0, B - 1), pl.t5_relative_bucket(o, num_buckets=nb, max_distance=md))


def _stretched_future(o, nb, md):
    """Log-spaced, but out to twice max_distance: every row read, the widths not the past's."""
    B = nb // 2
    ahead = B + pl.t5_relative_bucket(-(o - 1).clamp(min=0), num_buckets=nb, max_distance=2 * md)
    return torch.where(o > 0, ahead, pl.t5_relative_bucket(o, num_buckets=nb, max_distance=md))


@pytest.mark.parametrize("nb", [8, 16, 32, 64])
def test_the_mirror_widths_pin_the_design(nb):
    """Independent of the checker: every upper bucket of the design holds as many distances as its mirror in the
    past, and the two other designs that read every row do not."""
    md = 4 * nb
    o = torch.arange(-4 * md, 4 * md + 2)
    B = nb // 2

    def widths(rule):
        b = rule(o, nb, md)
        return torch.bincount(b[o <= 0], minlength=B).tolist(), torch.bincount(b[o > 0] - B, minlength=B).tolist()

    past, ahead = widths(every_row)
    assert past == ahead
    for other in (_linear_future, _stretched_future):
        p_, a_ = widths(other)
        assert p_ == past and a_ != past and len(set(other(o, nb, md)[o > 0].tolist())) == B


def _exact_near_then_t5(o, nb, md):
    """Cold read r16's design: B + n - 1 for the exact near keys, B + bucket(n) beyond: every row read, ordered,
    each upper bucket within one distance of its mirror (one far bucket one narrower)."""
    B, e = nb // 2, nb // 4
    t5_ahead = B + pl.t5_relative_bucket(-o.clamp(min=0), num_buckets=nb, max_distance=md)
    ahead = torch.where(o <= e, B + o - 1, t5_ahead)
    return torch.where(o > 0, ahead, pl.t5_relative_bucket(o, num_buckets=nb, max_distance=md))


@pytest.mark.parametrize("right", [
    every_row,
    every_row_by_formula,
    _exact_near_then_t5,
    lambda o, nb, md: every_row(o, nb, md).double(),  # whole floats are fine
    lambda o, nb, md: every_row(o, nb, md).tolist(),
])
def test_t5_rows_read_accepts_right_answers(right, draw, capsys):
    """The rule with the properties the prompt states passes, by tensor, by formula, as floats or a list."""
    assert check.t5_rows_read(right) is True
    assert "all correct!" in capsys.readouterr().out


def _past_shifted_too(o, nb, md):
    """Shift every distance by one, the past included."""
    B = nb // 2
    past = pl.t5_relative_bucket((o + 1).clamp(max=0), num_buckets=nb, max_distance=md)
    return torch.where(o > 0, every_row(o, nb, md), past)


def _future_down(o, nb, md):
    return torch.where(o > 0, every_row(o, nb, md) - nb // 2, every_row(o, nb, md))


def _future_reversed(o, nb, md):
    B = nb // 2
    return torch.where(o > 0, nb - 1 - (every_row(o, nb, md) - B), every_row(o, nb, md))


@pytest.mark.parametrize("wrong, says", [
    (lambda o, nb, md: pl.t5_relative_bucket(o, num_buckets=nb, max_distance=md), "still never read"),  # T5 itself
    (lambda o, nb, md: pl.t5_relative_bucket(o + (o > 0).long(), num_buckets=nb, max_distance=md), "still never read"),
    (lambda o, nb, md: torch.where(o > 0, (nb // 2 + o - 1).clamp(max=nb - 2), every_row(o, nb, md)),
     "still never read"),  # exact, but the last row forgotten
    (_past_shifted_too, "must keep T5's bucket"),
    (_future_down, "must land in the upper half"),
    (_future_reversed, "lands in a lower bucket"),
    (_linear_future, "lost the past's log spacing"),  # exact everywhere: ignores the spacing
    (_stretched_future, "more than one distance more or fewer than its mirror"),
    (lambda o, nb, md: torch.where(o > 0, every_row(o, nb, md).clamp(max=nb - 2) + (o > md).long(),
                                   every_row(o, nb, md)), "more than one distance more or fewer than its mirror"),
    (lambda o, nb, md: every_row(o, nb, md)[:-1], "one bucket per offset"),
    (lambda o, nb, md: nb - 1, "one bucket per offset"),  # the old exercise's count: no rule at all
    (lambda o, nb, md: every_row(o, nb, md) + 0.5, "whole numbers"),
])
def test_t5_rows_read_names_the_misconception(wrong, says, draw, capsys):
    assert check.t5_rows_read(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "o - 1" not in out and "n - 1" not in out and "distance 0" not in out  # the design stays hidden
    hint = out[out.index("hint:"):]
    assert "after the query" not in hint and "distances can" not in hint  # an idea, not the step to take


# ---------------------------------------------------------------- Exercise 3: where the last bucket starts

def last_bucket_closed_form(num_buckets, max_distance, bidirectional):
    """Solve e + floor(log(n/e) / log(max_distance/e) * (B - e)) >= B - 1 for the smallest integer n: round up,
    unless the bound is a whole number up to float error (a tie: the floor reaches B - 1 on it)."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    bound = e * (max_distance / e) ** ((B - 1 - e) / (B - e))
    return round(bound) if abs(bound - round(bound)) < 1e-9 * bound else math.ceil(bound)


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
    bound = e * (torch.tensor(max_distance / e, dtype=torch.float32)) ** ((B - 1 - e) / (B - e))
    return torch.round(bound) if abs(bound - torch.round(bound)) < 1e-6 * bound else torch.ceil(bound)


def test_t5_last_bucket_known_values():
    """Independent of the checker: the 16/32 case of §4 starts at 20; T5's defaults at 91 (encoder), 113 (decoder),
    and the closed form agrees with the library's buckets on a grid of settings."""
    assert last_bucket_closed_form(16, 32, True) == last_bucket_by_walk(16, 32, True) == 20
    assert last_bucket_closed_form(32, 128, True) == 91 and last_bucket_closed_form(32, 128, False) == 113
    for nb, md, bidir in ((8, 65, True), (24, 100, True), (12, 500, False), (40, 4999, False), (64, 256, True)):
        assert last_bucket_closed_form(nb, md, bidir) == last_bucket_by_library(nb, md, bidir)


def last_bucket_ceil(num_buckets, max_distance, bidirectional):
    """The plain closed form a reader writes: the bound e (max_distance/e)^((B-1-e)/(B-e)) in float64, rounded up."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    return math.ceil(e * (max_distance / e) ** ((B - 1 - e) / (B - e)))


def last_bucket_exp_log(num_buckets, max_distance, bidirectional):
    """The same algebra through exp and log (cold read r26: this form passed about 30 % of checks while ties were drawn)."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    return math.ceil(math.exp(math.log(e) + (B - 1 - e) / (B - e) * math.log(max_distance / e)))


def exact_start(num_buckets, max_distance, bidirectional):
    """Independent of the checker, in integers: the smallest n >= e with n^(B-e) >= e max_distance^(B-1-e)."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    m, power = B - e, e * max_distance ** (B - 1 - e)
    n = max(e, int(math.exp(math.log(power) / m)) - 2)
    while n ** m < power:
        n += 1
    return n


def test_drawn_settings_are_tie_free():
    """Cold read r26: a hidden exact tie at every check refused right closed forms by float rounding. Independent
    of the checker's own filter: over 200 draws every modest setting's exact bound (b^(B-e) = e md^(B-1-e), in
    fractions) lies more than 0.01 from a whole number, and the far case stays beyond 10^18."""
    from fractions import Fraction

    for seed in range(200):
        cases = ch04._last_bucket_cases(random.Random(seed))
        assert len(cases) == 6
        for nb, md, bidir in cases[:-1]:
            B = nb // 2 if bidir else nb
            e = B // 2
            m, power = B - e, e * md ** (B - 1 - e)
            n = exact_start(nb, md, bidir)
            assert (n - Fraction(99, 100)) ** m < power < (n - Fraction(1, 100)) ** m, (nb, md, bidir)  # n-1 < b < n
            assert 65 <= md < 5000 and 4 <= B <= 32
        assert cases[-1][1] >= 10**18


def test_the_tie_filter_catches_ties_and_near_ties():
    """The filter's own cases: 4 * 32 ** 0.8 = 64 exactly (18 buckets, max 128) and 2 * 7^2 = 98 (5 buckets, max 686)
    are ties; (7, 4666) has its edge a hair below 744; §4's T5 defaults (91, 113) are clear."""
    assert ch04._near_whole_bound(9, 128) and ch04._near_whole_bound(5, 686) and ch04._near_whole_bound(7, 4666)
    assert not ch04._near_whole_bound(16, 128) and not ch04._near_whole_bound(32, 128)


@pytest.mark.parametrize("right", [last_bucket_ceil, last_bucket_exp_log, last_bucket_closed_form])
def test_plain_closed_forms_pass_every_check(right, monkeypatch, capsys):
    """Cold read r26: any right closed form passes every time, not by luck of the draw (20 seeded draws, and the
    answers agree with the integer start at every modest setting drawn)."""
    for seed in range(20):
        for nb, md, bidir in ch04._last_bucket_cases(random.Random(seed))[:-1]:
            assert right(nb, md, bidir) == exact_start(nb, md, bidir), (nb, md, bidir)
    for seed in range(20):
        monkeypatch.setattr(ch04, "_fresh_rng", lambda seed=seed: random.Random(seed))
        assert check.t5_last_bucket(right) is True
    assert "all correct!" in capsys.readouterr().out


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


def last_bucket_by_staged_grid(num_buckets, max_distance, bidirectional):
    """The cold reader's shortcut: a grid of distances in one tensor, refined in stages around the first one in
    the last bucket (a copy of the rule, torch's exp, floor and argmax; no Python loop over distances)."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    lo, hi = math.log(e), math.log(max_distance)
    for _ in range(7):
        n = torch.exp(torch.linspace(lo, hi, 500, dtype=torch.float64))
        inside = e + torch.floor(torch.log(n / e) / math.log(max_distance / e) * (B - e)) >= B - 1
        k = int(inside.to(torch.uint8).argmax())
        lo, hi = math.log(float(n[max(k - 1, 0)])), math.log(float(n[k]))
    return math.ceil(float(n[k]))


def last_bucket_by_integer_grid(num_buckets, max_distance, bidirectional):
    """Every distance below max_distance in one tensor (torch.tensor(range(...)), no builder refused by size)."""
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    n = torch.tensor(range(e, min(max_distance, 10**6)), dtype=torch.float64)
    inside = e + torch.floor(torch.log(n / e) / math.log(max_distance / e) * (B - e)) >= B - 1
    return int(n[inside.to(torch.uint8).argmax()])


def test_the_grid_searches_are_right_when_unguarded():
    for nb, md, bidir in ((32, 128, True), (16, 32, True), (40, 4999, False)):
        assert last_bucket_by_integer_grid(nb, md, bidir) == last_bucket_closed_form(nb, md, bidir)
        assert abs(last_bucket_by_staged_grid(nb, md, bidir) - last_bucket_closed_form(nb, md, bidir)) <= 1


GRID = "a search over a grid of distances, vectorised"


@pytest.mark.parametrize("shortcut, says", [
    (last_bucket_by_staged_grid, (GRID,)),
    (last_bucket_by_integer_grid, (GRID,)),
    (last_bucket_by_library, ("calls pl.t5_relative_bucket", GRID)),  # its list of distances may be stopped first
    (last_bucket_by_bisection, ("searches the distances",)),  # the issue's: a bisection over a copy of log_term
    (last_bucket_by_bisect_module, ("searches the distances", "OverflowError")),  # range(e, 10^18) has no len()
    (last_bucket_by_walk, ("searches the distances",)),
    (lambda nb, md, bidir: int(np.argmax(np.arange(4 * md) >= last_bucket_closed_form(nb, md, bidir))),
     ("calls numpy.arange with", GRID)),  # a list of every distance
])
def test_t5_last_bucket_refuses_the_shortcuts(shortcut, says, capsys):
    assert check.t5_last_bucket(shortcut) is False
    out = capsys.readouterr().out
    assert any(reason in out for reason in says), out


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


# ---------------------------------------------------------------- Exercise 4: the rows a blind table must tie

def tied_rows(k, row):
    """For i - j = o the code reads row clip(o + k), the paper row clip(k - o) (rows 0 .. 2k-1). Inside the
    window rows r and 2k - r are tied; at the edges row 2k-1 (o >= k) meets row 0, and row 1 through the window;
    so the sets are {0, 1, 2k-1}, {r, 2k-r} for r = 2 .. 2k-2 ({k} alone)."""
    if row in (0, 1, 2 * k - 1):
        return {0, 1, 2 * k - 1}
    return {row, 2 * k - row}


def classes_of(k, rows_of=tied_rows):
    return list({frozenset(rows_of(k, r)) for r in range(2 * k)})


def union_find_classes(k, library=False):
    """The procedure the old prompt described: tie, offset by offset, the two rows read (from the clips by hand,
    or from the library's own index), and read off the groups."""
    parent = list(range(2 * k))
    code = pl.deberta_relative_index(2 * k + 1, 1, k)[:, 0].tolist() if library else None
    paper = pl.deberta_relative_index(1, 2 * k + 1, k)[0].tolist() if library else None

    def root(r):
        while parent[r] != r:
            r = parent[r]
        return r

    for o in range(2 * k + 1):
        parent[root(code[o] if library else min(o + k, 2 * k - 1))] = root(paper[o] if library else max(k - o, 0))
    classes = {}
    for r in range(2 * k):
        classes.setdefault(root(r), set()).add(r)
    return list(classes.values())


def by_union_find(k, row, library=False):
    return next(c for c in union_find_classes(k, library) if row in c)


@pytest.mark.parametrize("k", range(3, 17))
def test_the_classes_make_a_blind_table_and_no_finer_one_is_blind(k):
    """Independent of the checker: a table constant on the sets gives equal p2c under both indices (with
    the library's deberta_terms), splitting any set breaks it, and a union-find over every pair of the
    library's own (L, L) index finds the same sets."""
    g = torch.Generator().manual_seed(k)
    q_c, k_c = torch.randn(2, 3 * k, 4, generator=g, dtype=torch.float64)
    k_r = torch.randn(2 * k, 4, generator=g, dtype=torch.float64)
    classes = classes_of(k)
    assert sorted(map(sorted, classes)) == sorted(map(sorted, union_find_classes(k, library=True)))
    label = {r: c for c, rows in enumerate(classes) for r in rows}
    basis = torch.randn(len(classes), 4, generator=g, dtype=torch.float64)

    def p2c_agree(table):
        paper = pl.deberta_terms(q_c, k_c, table, k_r, p2c_index="paper")[2]
        code = pl.deberta_terms(q_c, k_c, table, k_r, p2c_index="reference")[2]
        return torch.allclose(paper, code)

    table = basis[[label[r] for r in range(2 * k)]]
    assert p2c_agree(table)
    for rows in classes:
        if len(rows) > 1:
            split = table.clone()
            split[min(rows)] += 1.0
            assert not p2c_agree(split)
    code_rows = pl.deberta_relative_index(3 * k, 3 * k, k)  # delta(i, j); the paper's is delta(j, i)
    parent = list(range(2 * k))

    def root(r):
        while parent[r] != r:
            r = parent[r]
        return r

    for a, b in zip(code_rows.flatten().tolist(), code_rows.T.flatten().tolist()):
        parent[root(a)] = root(b)
    found = {}
    for r in range(2 * k):
        found.setdefault(root(r), set()).add(r)
    assert sorted(map(sorted, found.values())) == sorted(map(sorted, classes)) == \
        sorted(map(sorted, union_find_classes(k)))


@pytest.mark.parametrize("right", [
    tied_rows,
    lambda k, row: sorted(tied_rows(k, row)),  # a list
    lambda k, row: frozenset(tied_rows(k, row)),
    lambda k, row: tuple(tied_rows(k, row)),
])
def test_deberta_tied_rows_accepts_right_answers(right, draw, capsys):
    assert check.deberta_tied_rows(right) is True
    assert "all correct!" in capsys.readouterr().out


def by_bisection(k, row):
    """A search the far k refuses too: find the offsets that read a row by bisection over the clips (both are
    monotone in the offset), then close the set over the ties; no rule for the rows, and hundreds of steps."""
    def rows_at(o):
        return min(max(o + k, 0), 2 * k - 1), min(max(k - o, 0), 2 * k - 1)

    def offsets_reading(r, which, sign):
        def first(v):
            lo, hi = 0, 2 * k + 1
            while lo < hi:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if sign * rows_at(mid)[which] >= v else (mid + 1, hi)
            return lo
        return first(sign * r), first(sign * r + 1) - 1

    found, todo = {row}, [row]
    while todo:
        r = todo.pop()
        for which, sign in ((0, 1), (1, -1)):
            a, b = offsets_reading(r, which, sign)
            for o in {a, b} if a <= b else ():
                other = rows_at(o)[1 - which]
                if other not in found:
                    found.add(other)
                    todo.append(other)
    return found


def test_the_shortcut_routes_are_right_when_unguarded():
    """The refused routes below are refused for their route, not for a wrong answer."""
    for k in (3, 7, 40):
        for row in range(2 * k):
            assert by_union_find(k, row) == by_union_find(k, row, library=True) == by_bisection(k, row) == \
                tied_rows(k, row)


@pytest.mark.parametrize("shortcut, says", [
    (lambda k, row: by_union_find(k, row, library=True), "calls pl.deberta_relative_index"),
    (by_union_find, "runs out of steps"),  # the union-find the old prompt described, clips typed by hand
    (by_bisection, "runs out of steps"),
    (lambda k, row: {int(r) for r in np.arange(2 * k) if r in tied_rows(k, row)}, "tensor or array elements"),
    (lambda k, row: set(torch.arange(2 * k)[torch.tensor([r in tied_rows(k, row) for r in range(2 * k)])].tolist()),
     "tensor or array elements"),
])
def test_deberta_tied_rows_refuses_the_shortcuts(shortcut, says, capsys):
    assert check.deberta_tied_rows(shortcut) is False
    out = capsys.readouterr().out
    assert says in out
    assert "{0, 1" not in out and "2k - r" not in out


def mirror_rows(k, row):
    """The plain mirror, row r with row 2k - 1 - r: the wrong symmetry."""
    return {row, 2 * k - 1 - row}


def window_only_rows(k, row):
    """Rows r and 2k - r tied, the edges forgotten (row 0 left alone)."""
    return {0} if row == 0 else {row, 2 * k - row} if row < 2 * k - 1 else {1, 2 * k - 1}


def no_ties(k, row):
    return {row}


def over_merged(k, row):
    s = tied_rows(k, row)
    return s | tied_rows(k, k) if 0 in s else s | tied_rows(k, 0) if k in s else s


def middle_only(k, row):
    """Right at k = 3, then too much: every row tied to the middle one beyond k = 3."""
    return tied_rows(k, row) if k == 3 else tied_rows(k, row) | {k}


@pytest.mark.parametrize("wrong, says", [
    (mirror_rows, "the table read from either end"),
    # row 0 tied to the other edge only (row 1 forgotten): a missing clip tie, not the wrong mirror
    (lambda k, row: {0, 2 * k - 1} if row == 0 else tied_rows(k, row), "clipped edge rows"),
    (window_only_rows, "clipped edge rows"),
    (no_ties, "clipped edge rows"),  # row 0 comes first, and only the edges tie it
    (lambda k, row: no_ties(k, row) if row != 0 else tied_rows(k, 0), "which two rows do the indices read?"),
    (lambda k, row: set(range(2 * k)), "no chain of (query, key) pairs ties"),  # everything, judged at k = 3
    (over_merged, "no chain of (query, key) pairs ties"),
    (middle_only, "no chain of (query, key) pairs ties"),
    (lambda k, row: {0, 1, 2} if row == 0 else tied_rows(k, row), "and holds one no pair ties"),
    (lambda k, row: tied_rows(k, row) - {row}, "holds row"),  # the row itself left out
    (lambda k, row: {0.5, row}, "set of row numbers"),
    (lambda k, row: 7, "set of row numbers"),
    (lambda k, row: tied_rows(k, row) | {2 * k}, "set of row numbers"),  # a row past the table
])
def test_deberta_tied_rows_names_the_misconception(wrong, says, draw, capsys):
    assert check.deberta_tied_rows(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "{0, 1" not in out and "2k - r" not in out  # the sets stay hidden


def test_deberta_tied_rows_asks_for_new_far_spans(capsys):
    """The far k are new at every check, beyond 10^15, and the rows asked there include random ones."""
    asked = []

    def spy(k, row):
        asked.append((k, row))
        return tied_rows(k, row)

    for _ in range(3):
        assert check.deberta_tied_rows(spy) is True
    capsys.readouterr()
    far = {k for k, _ in asked if k > 10**6}
    assert len(far) == 6 and min(far) >= 10**15
    assert {k for k, _ in asked if k == 3} == {3} and {r for k, r in asked if k == 3} == set(range(6))
    assert len({r for k, r in asked if k > 10**6} - {0, 1, 2}) > 10


# ---------------------------------------------------------------- the answer key is not in the learner's hands

def test_no_callable_or_constant_of_the_checker_module_passes_an_exercise(capsys):
    """Every function the module defines, public or private, is refused or wrong as an answer to every exercise;
    no constant is a set of classes, and the module stores no sealed answer to hash small numbers against."""
    attributes = defined_here(ch04)
    assert {"_past_last_edge", "_in_last", "_library_in_last", "_starts_last", "_index_rows", "_rows"} <= \
        attributes.keys()
    for name, value in attributes.items():
        if callable(value):
            for checker in (check.xl_rel_shift, check.t5_rows_read, check.t5_last_bucket, check.deberta_tied_rows):
                assert checker(value) is not True, name
        else:
            assert check.deberta_tied_rows(lambda k, row, v=value: v) is not True, name
            assert not (isinstance(value, dict) and any(isinstance(x, str) and len(x) == 24 for x in value.values()))
    capsys.readouterr()


def test_the_checker_source_holds_no_formula_of_an_answer():
    source = inspect.getsource(ch04)
    for answer_shape in ("(B - 1 - e) / (B - e)", "stride * i - j + k", "width - stride", "stride * (q_len - 1 - ", "- 1 if bidirectional", "2 * span - r",
                         "min(r, 2", "2 * k - r", "2 * span - 1, 0", "offsets - 1", "(o - 1)", "sealed"):
        assert answer_shape not in source, answer_shape


def test_exercise_2_prompt_states_what_the_checker_holds():
    """Cold read r15: stating the exact widths fixed the rule's shape; cold read r16: leaving them out let the checker
    hold an unstated rule. The prompt now states the requirement the checker holds (the past's spacing, each upper
    bucket within one distance of its mirror) and not the rule that meets it."""
    from pathlib import Path

    src = (Path(__file__).parents[1] / "notebooks" / "src" / "04_relative.py").read_text(encoding="utf-8")
    prompt = " ".join(src[src.index("**2 (design"):src.index("def every_row")].replace("#", " ").split())
    assert "mirrors the past" in prompt and "give or take one" in prompt and "spacing" in prompt
    assert "log-spaced far" not in prompt and "n - 1" not in prompt and "bucket(n" not in prompt


def test_deberta_tied_rows_hint_does_not_point_at_the_named_misconception(capsys):
    """Cold read r16: the hint said the indices read the table "from opposite ends", which suggests row r with
    2k - 1 - r, the very pairing the checker names as a misconception. The hint now names the idea only."""
    assert check.deberta_tied_rows(mirror_rows) is False
    out = capsys.readouterr().out
    hint = out[out.index("hint:"):]
    assert "either end" in out[:out.index("hint:")]  # the misconception is named ...
    assert "end" not in hint and "opposite" not in hint and "mirror" not in hint  # ... and the hint does not suggest it

