"""The chapter 6 (ALiBi) exercise checkers: right answers pass, wrong ones fail, None is unattempted."""
import math

import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def recipe(n):
    """ALiBi's slopes for any n, written from §1's recipe (not from the library)."""
    c = 2 ** math.floor(math.log2(n))
    power = lambda k: [2 ** (-8 * h / k) for h in range(1, k + 1)]
    return power(c) + power(2 * c)[0::2][: n - c]


def test_checkers_are_exported():
    for name in ("is_causal_alibi", "alibi_bf16_collapse", "nonsym_one_row", "alibi_far_share"):
        assert callable(getattr(check, name))


@pytest.mark.parametrize("checker", [check.is_causal_alibi, check.alibi_bf16_collapse, check.nonsym_one_row,
                                     check.alibi_far_share])
def test_unattempted_says_so(checker, capsys):
    assert checker(None) is None
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize("checker", [check.nonsym_one_row, check.alibi_far_share])
def test_stub_is_unattempted_and_bugs_are_reported(checker, capsys):
    def stub(*args):
        raise NotImplementedError

    assert checker(stub) is None
    assert checker(lambda *args: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def causal_by_hand(H, L, slopes):
    """-m_h (i - j) for keys j <= i, -inf after the query: written from the formula, not from pl.alibi_bias."""
    i = torch.arange(L)
    distance = (i[:, None] - i[None, :]).float()
    return (-torch.as_tensor(slopes).view(H, 1, 1) * distance).masked_fill(distance < 0, float("-inf"))


def test_is_causal_alibi(capsys):
    def right(b):
        h, L, _ = b.shape
        return torch.equal(b, causal_by_hand(h, L, recipe(h)))

    assert check.is_causal_alibi(right) is True
    assert "all correct!" in capsys.readouterr().out
    assert check.is_causal_alibi(lambda b: True) is False
    # Comparing only the lower triangle is not enough: the symmetric form agrees there.
    lower_only = lambda b: bool(torch.equal(b.tril(), causal_by_hand(b.shape[0], b.shape[1], recipe(b.shape[0])).tril()))
    assert check.is_causal_alibi(lower_only) is False  # symmetric passes the lower triangle
    naive = lambda b: torch.equal(b, causal_by_hand(b.shape[0], b.shape[1],
                                                    [2 ** (-8 * h / b.shape[0]) for h in range(1, b.shape[0] + 1)]))
    assert check.is_causal_alibi(naive) is False
    assert "6 heads" in capsys.readouterr().out


def test_is_causal_alibi_refuses_the_library_shortcut(capsys):
    """Asking pl.alibi_bias (or ALiBi, which calls it) for the answer is named; afterwards the library works again."""
    shortcut = lambda b: torch.equal(b, pl.alibi_bias(b.shape[0], b.shape[1]))
    module = lambda b: torch.equal(b, pl.ALiBi(b.shape[0])(b.shape[1]))
    for fn in (shortcut, module):
        assert check.is_causal_alibi(fn) is False
        assert "calls pl.alibi_bias" in capsys.readouterr().out
    assert pl.alibi_bias(2, 2)[0, 0, 1] == float("-inf")  # the patch is gone
    assert check.is_causal_alibi(lambda b: torch.equal(b, causal_by_hand(b.shape[0], b.shape[1],
                                                                          pl.alibi_slopes(b.shape[0])))) is True


# ---------------------------------------------------------------- Exercise 2: the bfloat16 collapse

def test_bf16_collapse_known_value():
    """Independent of the checker: at L = 258 head 1's last two +m j values (128.5, 128) round to one bf16 number;
    at 257 they (128, 127.5) are both exact. BLOOM's own builder agrees."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    for L, same in ((257, False), (258, True)):
        row = build_alibi_tensor(torch.ones(1, L, dtype=torch.long), 8, torch.bfloat16).view(8, L)[0]
        assert (row[-1] == row[-2]).item() is same
    values = torch.arange(0, 257) / 2  # keys 0..256 (every L up to 257): neighbours never merge
    assert (values.bfloat16()[1:] != values.bfloat16()[:-1]).all()


@pytest.mark.parametrize("right", [258, 258.0, torch.tensor(258), np.int64(258)])
def test_bf16_collapse_accepts_every_form(right, capsys):
    assert check.alibi_bf16_collapse(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (257, "still stored exactly"),  # thinks the spacing of 1 above 128 is enough at once
    (259, "rounds to the even neighbour"),  # ties rounded up
    (514, "spacing of 2"),  # waits for the values to be 2 apart
    (100, "still get different"),
    (5000, "much earlier"),
    ("258", "expected a whole length"),
])
def test_bf16_collapse_names_the_misconception(wrong, says, capsys):
    assert check.alibi_bf16_collapse(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out and ("258" not in out or wrong == "258")


# ---------------------------------------------------------------- Exercise 3: one row for the non-symmetric form

def one_row_right(H, L):
    m = torch.tensor(recipe(H // 2))
    j = torch.arange(L, dtype=torch.float32)
    return torch.cat((m[:, None] * j, -m[:, None] * j))[:, None, :]


@pytest.mark.parametrize("right", [
    one_row_right,
    lambda H, L: one_row_right(H, L).double() + 5.0,  # a constant per row changes nothing
    lambda H, L: one_row_right(H, L) - one_row_right(H, L)[..., -1:],  # MPT's way: shifted to end at zero
])
def test_nonsym_one_row_accepts_right_designs(right, capsys):
    assert check.nonsym_one_row(right) is True
    assert "all correct!" in capsys.readouterr().out


def test_the_right_row_reproduces_the_form():
    """Independent of the checker: the design's weights equal the non-symmetric form's, for every head."""
    H, L = 8, 9
    exact = pl.alibi_bias(H, L, mode="nonsymmetric")
    scores = torch.randn(H, L, L, generator=torch.Generator().manual_seed(0))
    ours = (scores + one_row_right(H, L)).masked_fill(torch.isinf(exact), float("-inf"))
    torch.testing.assert_close(ours.softmax(-1), (scores + exact).softmax(-1))


@pytest.mark.parametrize("wrong, says", [
    (lambda H, L: torch.tensor(recipe(H // 2) * 2)[:, None, None] * torch.arange(L), "right-looking half sees"),
    (lambda H, L: -torch.tensor(recipe(H // 2) * 2)[:, None, None] * torch.arange(L), "left-looking half sees"),
    (lambda H, L: torch.tensor(recipe(H))[:, None, None] * torch.arange(L), "not the form's slopes"),  # H slopes
    (lambda H, L: one_row_right(H, L)[:, 0], "return an"),
])
def test_nonsym_one_row_names_the_misconception(wrong, says, capsys):
    assert check.nonsym_one_row(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out


# ---------------------------------------------------------------- Exercise 4: weight beyond the training length

def far_share_closed_form(H, T, L):
    shares = []
    for m in recipe(H):
        g = math.exp(-m)
        shares.append((g**T - g**L) / (1 - g**L))
    return shares


def far_share_closed_float32(H, T, L):
    """The same closed form in float32, from the library's float32 slopes, as a tensor."""
    g = torch.exp(-pl.alibi_slopes(H))
    return (g**T - g**L) / (1 - g**L)


def far_share_measured(H, T, L):
    """The forbidden shortcut: measured from real attention weights (q.k = 0)."""
    zeros = torch.zeros(1, H, L, 1, dtype=torch.float64)
    _, w = pl.attention(zeros, zeros, zeros, bias=pl.alibi_bias(H, L, dtype=torch.float64))
    return w[0, :, -1, : L - T].sum(-1)


def far_share_softmax_by_hand(H, T, L):
    """Another measurement: the bias built from the slopes, then a softmax over every key."""
    m = torch.tensor(recipe(H), dtype=torch.float64)[:, None]
    return torch.softmax(-m * torch.arange(L), -1)[:, T:].sum(-1)


def far_share_summed(H, T, L):
    """A measurement with neither: one weight per key, added up (a tensor as long as the input)."""
    w = torch.exp(-torch.tensor(recipe(H), dtype=torch.float64)[:, None] * torch.arange(L))
    return w[:, T:].sum(-1) / w.sum(-1)


def far_share_loop(H, T, L):
    """A loop over the keys, in plain Python."""
    shares = []
    for m in recipe(H):
        total = far = 0.0
        for back in range(L):
            total += math.exp(-m * back)
            far += math.exp(-m * back) if back >= T else 0.0
        shares.append(far / total)
    return shares


def test_far_share_known_values():
    """8 heads trained at 1024, read at 2048: the gentlest head about 1.8 %, the next 0.03 %."""
    shares = far_share_closed_form(8, 1024, 2048)
    assert abs(shares[7] - 0.01799) < 1e-5 and abs(shares[6] - 3.35e-4) < 1e-6 and shares[5] < 1e-6


@pytest.mark.parametrize("right", [
    far_share_closed_form,  # a list of Python floats
    far_share_closed_float32,  # a float32 tensor
    lambda H, T, L: np.array(far_share_closed_form(H, T, L)),  # a numpy array
])
def test_far_share_accepts_right_answers(right, capsys):
    assert check.alibi_far_share(right) is True
    assert "all correct!" in capsys.readouterr().out


def test_far_share_closed_form_equals_the_measured_weights():
    """Independent of the checker: the closed form is what attention with q.k = 0 does, in float64 and float32."""
    for H, T, L in ((8, 1024, 2048), (6, 64, 512), (1, 10, 400)):
        measured = far_share_measured(H, T, L)
        torch.testing.assert_close(torch.tensor(far_share_closed_form(H, T, L), dtype=torch.float64), measured)
        assert torch.allclose(far_share_closed_float32(H, T, L).double(), measured, atol=1e-9, rtol=1e-4)


@pytest.mark.parametrize("measurement, says", [
    (far_share_measured, "calls pl.alibi_bias"),
    (far_share_softmax_by_hand, "calls torch.softmax"),
    (far_share_summed, "torch.arange with"),
    (far_share_loop, "runs a loop over the keys"),
])
def test_far_share_refuses_a_measurement(measurement, says, capsys):
    import sys

    before = (torch.softmax, torch.Tensor.softmax, torch.arange, pl.alibi_bias, sys.gettrace())
    assert check.alibi_far_share(measurement) is False
    out = capsys.readouterr().out
    assert says in out and "derive" in out and "0.0179" not in out
    assert (torch.softmax, torch.Tensor.softmax, torch.arange, pl.alibi_bias, sys.gettrace()) == before  # all undone
    assert check.alibi_far_share(far_share_closed_form) is True  # and the next answer runs normally


@pytest.mark.parametrize("wrong, says", [
    (lambda H, T, L: [math.exp(-m * T) for m in recipe(H)], "to infinity"),
    (lambda H, T, L: far_share_closed_form(H, T + 1, L), "off by one"),
    (lambda H, T, L: far_share_closed_form(H, T - 1, L), "off by one"),
    (lambda H, T, L: [(g**T - g**L) / (1 - g**L) for g in (math.exp(-(2 ** (-8 * h / H))) for h in range(1, H + 1))],
     "plain 2**(-8h/H)"),  # the naive slopes: right for 8 heads, wrong for 6
    (lambda H, T, L: far_share_closed_form(H, T, L)[:-1], "one per head"),
    (lambda H, T, L: [1 - x for x in far_share_closed_form(H, T, L)], "distances training did show"),
    (lambda H, T, L: far_share_closed_float32(H, T, L) * 1.001, "not the shares"),
])
def test_far_share_names_the_misconception(wrong, says, capsys):
    assert check.alibi_far_share(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out and "0.0179" not in out and "0.018" not in out
    assert "geometric" not in out  # the hint points to the figure, not to the series
