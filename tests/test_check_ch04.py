"""The chapter 4 (relative encodings) exercise checkers: right answers pass, wrong ones fail, None is unattempted."""
import math

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


def last_bucket_by_search(num_buckets, max_distance, bidirectional):
    """Another right answer: walk the distances up until the bucket is the last one."""
    last = (num_buckets // 2 if bidirectional else num_buckets) - 1
    n = 0
    while pl.t5_relative_bucket(torch.tensor([-n]), num_buckets=num_buckets, max_distance=max_distance,
                                bidirectional=bidirectional).item() != last:
        n += 1
    return n


def rel_shift_right(x):
    q, k = x.shape
    return F.pad(x, (1, 0)).view(k + 1, q)[1:].reshape(q, k)


def rel_shift_by_gather(x):
    """A different correct answer: exact where visible, a different (zero) garbage above."""
    q, k = x.shape
    col = (torch.arange(k)[None, :] + q - 1 - torch.arange(q)[:, None]).clamp(max=k - 1)
    return torch.gather(x, 1, col).masked_fill(pl.relative_positions(q, k, q_offset=k - q) > 0, 0.0)


def p2c_right(k_c, q_r):
    n, span = k_c.shape[0], q_r.shape[0] // 2
    idx = (pl.relative_positions(n, n) + span).clamp(0, 2 * span - 1)  # delta(j, i) at [i, j]
    return torch.stack([torch.stack([k_c[j] @ q_r[idx[i, j]] for j in range(n)]) for i in range(n)])


def p2c_swapped(k_c, q_r):
    n, span = k_c.shape[0], q_r.shape[0] // 2
    idx = pl.deberta_relative_index(n, n, span)  # delta(i, j): the released code's index
    return torch.stack([torch.stack([k_c[j] @ q_r[idx[i, j]] for j in range(n)]) for i in range(n)])


def test_checkers_are_exported():
    for name in ("xl_rel_shift", "t5_buckets", "t5_last_bucket", "deberta_p2c"):
        assert callable(getattr(check, name))


@pytest.mark.parametrize("checker", [check.xl_rel_shift, check.t5_buckets, check.t5_last_bucket, check.deberta_p2c])
def test_unattempted_says_so(checker, capsys):
    assert checker(None) is None
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize("checker", [check.t5_last_bucket, check.xl_rel_shift, check.deberta_p2c])
def test_stub_raising_not_implemented_is_unattempted_and_bugs_are_reported(checker, capsys):
    def stub(*args):
        raise NotImplementedError

    assert checker(stub) is None
    assert "not attempted yet" in capsys.readouterr().out
    assert checker(lambda *args: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_t5_last_bucket_known_values():
    """Independent of the checker: the 16/32 case of §4 starts at 20; T5's defaults at 91 (encoder), 113 (decoder)."""
    assert last_bucket_closed_form(16, 32, True) == last_bucket_by_search(16, 32, True) == 20
    assert last_bucket_closed_form(32, 128, True) == 91 and last_bucket_closed_form(32, 128, False) == 113
    b = pl.t5_relative_bucket(torch.tensor([-90, -91, -112, -113]), num_buckets=32, max_distance=128)
    b_causal = pl.t5_relative_bucket(torch.tensor([-112, -113]), num_buckets=32, max_distance=128, bidirectional=False)
    assert b[:2].tolist() == [14, 15] and b_causal.tolist() == [30, 31]


@pytest.mark.parametrize("right", [last_bucket_closed_form, last_bucket_by_search])
def test_t5_last_bucket_accepts_right_answers(right, capsys):
    assert check.t5_last_bucket(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (lambda nb, md, bidir: md, "the last bucket begins before it"),  # the imprecise "beyond max_distance"
    (lambda nb, md, bidir: last_bucket_closed_form(nb, md, bidir) - 1, "off by one"),  # floor, not ceil
    (lambda nb, md, bidir: last_bucket_closed_form(nb, md, True), "is not where"),  # ignores the decoder's B
    (lambda nb, md, bidir: float(last_bucket_closed_form(nb, md, bidir)), "integer distance"),
])
def test_t5_last_bucket_rejects_wrong_answers(wrong, says, capsys):
    assert check.t5_last_bucket(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out and "113" not in out  # the decoder's answer (113) stays hidden


def test_t5_buckets_right_and_wrong(capsys):
    want = pl.t5_relative_bucket(torch.tensor(check.ch04.T5_OFFSETS)).tolist()
    assert want == [3, 10, 26, 15]
    assert check.t5_buckets(want) is True
    assert "all correct!" in capsys.readouterr().out
    assert check.t5_buckets([3, 10, 10, 15]) is False
    assert "upper half" in capsys.readouterr().out
    assert check.t5_buckets([3, 20, 26, 15]) is False
    assert check.t5_buckets([3, 10]) is False


def test_xl_rel_shift_right_and_wrong(capsys):
    assert check.xl_rel_shift(rel_shift_right) is True
    assert check.xl_rel_shift(pl.rel_shift) is True
    assert check.xl_rel_shift(rel_shift_by_gather) is True  # other garbage above the diagonal is fine
    assert "all correct!" in capsys.readouterr().out
    assert check.xl_rel_shift(lambda x: x) is False
    assert check.xl_rel_shift(lambda x: F.pad(x, (0, 1)).view(x.shape[1] + 1, x.shape[0])[1:].reshape(x.shape)) is False
    assert check.xl_rel_shift(lambda x: x[:, :-1]) is False


def test_deberta_p2c_right_and_wrong(capsys):
    assert check.deberta_p2c(p2c_right) is True
    assert "all correct!" in capsys.readouterr().out
    assert check.deberta_p2c(p2c_swapped) is False
    assert "delta(i, j)" in capsys.readouterr().out
    assert check.deberta_p2c(lambda k_c, q_r: p2c_right(k_c, q_r).T) is False
    assert check.deberta_p2c(lambda k_c, q_r: torch.zeros(2, 2)) is False
