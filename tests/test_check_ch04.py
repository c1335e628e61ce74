"""The chapter 4 (relative encodings) exercise checkers: right answers pass, wrong ones fail, None is unattempted."""
import pytest
import torch
import torch.nn.functional as F

import posenc_lib as pl
from posenc_lib import check


def shaw_right(i, j, k):
    return max(-k, min(k, j - i)) + k


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
    for name in ("shaw_index", "t5_buckets", "xl_rel_shift", "deberta_p2c"):
        assert callable(getattr(check, name))


@pytest.mark.parametrize("checker", [check.shaw_index, check.t5_buckets, check.xl_rel_shift, check.deberta_p2c])
def test_unattempted_says_so(checker, capsys):
    assert checker(None) is None
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize("checker", [check.shaw_index, check.xl_rel_shift, check.deberta_p2c])
def test_stub_raising_not_implemented_is_unattempted_and_bugs_are_reported(checker, capsys):
    def stub(*args):
        raise NotImplementedError

    assert checker(stub) is None
    assert "not attempted yet" in capsys.readouterr().out
    assert checker(lambda *args: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_shaw_index_right_and_wrong(capsys):
    assert check.shaw_index(shaw_right) is True
    assert "all correct!" in capsys.readouterr().out
    assert check.shaw_index(lambda i, j, k: max(-k, min(k, i - j)) + k) is False
    assert "key minus query" in capsys.readouterr().out
    assert check.shaw_index(lambda i, j, k: j - i + k) is False  # forgot the clip
    out = capsys.readouterr().out
    assert "e.g. fn(0, 1, 0) = 1" in out and "expected" not in out  # the right index (0) stays hidden
    assert check.shaw_index(7) is False


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
