"""The chapter 6 (ALiBi) exercise checkers: right answers pass, wrong ones fail, None is unattempted."""
import math

import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def recipe(n):
    c = 2 ** math.floor(math.log2(n))
    power = lambda k: [2 ** (-8 * h / k) for h in range(1, k + 1)]
    return power(c) + power(2 * c)[0::2][: n - c]


def test_checkers_are_exported():
    for name in ("alibi_slopes_recipe", "alibi_bias_entries", "is_causal_alibi", "row_shift_modes", "head_reach"):
        assert callable(getattr(check, name))


@pytest.mark.parametrize("checker", [check.alibi_slopes_recipe, check.alibi_bias_entries,
                                     check.is_causal_alibi, check.row_shift_modes, check.head_reach])
def test_unattempted_says_so(checker, capsys):
    assert checker(None) is None
    assert "not attempted yet" in capsys.readouterr().out


def test_slopes_recipe_right_and_wrong(capsys):
    assert check.alibi_slopes_recipe(recipe) is True
    assert "all correct!" in capsys.readouterr().out
    assert check.alibi_slopes_recipe(lambda n: [2 ** (-8 * h / n) for h in range(1, n + 1)]) is False
    out = capsys.readouterr().out
    assert "✓ 8 heads" in out and "✗ 6 heads: the plain 2**(-8h/H)" in out and "hint" in out
    assert "0.3968" not in out  # the right first slope for 6 heads, 2**-(8/6) ~ 0.39685, stays hidden
    assert check.alibi_slopes_recipe(lambda n: sorted(recipe(n), reverse=True)) is False  # monotone: wrong for 6
    assert "✗ 6 heads: wrong" in capsys.readouterr().out


def test_slopes_recipe_stub_is_unattempted_and_bugs_are_reported(capsys):
    def stub(n):
        raise NotImplementedError

    assert check.alibi_slopes_recipe(stub) is None
    assert check.alibi_slopes_recipe(lambda n: 1 / 0) is False
    assert "ZeroDivisionError" in capsys.readouterr().out


def test_bias_entries(capsys):
    assert check.alibi_bias_entries((-0.625, float("-inf"))) is True
    assert check.alibi_bias_entries([-5 / 8, -math.inf]) is True
    capsys.readouterr()
    assert check.alibi_bias_entries((0.625, float("-inf"))) is False  # sign
    out = capsys.readouterr().out
    assert "bias[2, 7, 2]: not 0.625" in out and "0.125" not in out  # head 2's slope stays hidden
    assert check.alibi_bias_entries((-1.25, float("-inf"))) is False  # head counted from 1
    assert check.alibi_bias_entries((-0.625, -0.25)) is False  # future key not hidden
    assert check.alibi_bias_entries(-0.625) is False
    assert "expected a pair" in capsys.readouterr().out


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


def test_row_shift_modes(capsys):
    assert check.row_shift_modes({"causal"}) is True
    assert check.row_shift_modes(["causal"]) is True
    capsys.readouterr()
    assert check.row_shift_modes({"causal", "nonsymmetric"}) is False
    out = capsys.readouterr().out
    assert "1 of the four forms is on the wrong side" in out
    assert "nonsymmetric" not in out and "✓ symmetric: different weights" in out  # the wrong one is not named
    assert check.row_shift_modes({"causal", "symmetric"}) is False
    assert check.row_shift_modes(set()) is False
    assert check.row_shift_modes("causal") is False
    assert check.row_shift_modes({"bidirectional"}) is False
    assert "unknown names" in capsys.readouterr().out


def measured_reach(H):
    """The reach read off real attention weights: q·k = 0, causal ALiBi, the last query of a long sequence."""
    L = 1300  # longer than the gentlest head's reach (2**8 * ln 100 ~ 1179)
    zeros = torch.zeros(1, H, L, 1, dtype=torch.float64)
    _, w = pl.attention(zeros, zeros, zeros, bias=pl.alibi_bias(H, L, dtype=torch.float64))
    ratio = w[0, :, -1].flip(-1) / w[0, :, -1, -1:]  # ratio[h, D]: D steps back over the query's own weight
    below = ratio < 0.01
    assert below.any(-1).all()
    return below.int().argmax(-1).tolist()  # the first D where it is below


def test_head_reach_right_and_wrong(capsys):
    assert measured_reach(8)[:2] == [10, 19]  # m = 1/2: e**-4.5 > 0.01 > e**-5; m = 1/4: e**-4.5 > 0.01 > e**-4.75
    assert check.head_reach(measured_reach) is True
    assert "all correct!" in capsys.readouterr().out
    by_formula = lambda H: [math.floor(math.log(100) / m) + 1 for m in recipe(H)]
    assert check.head_reach(by_formula) is True
    capsys.readouterr()
    assert check.head_reach(lambda H: [x - 1 for x in by_formula(H)]) is False
    out = capsys.readouterr().out
    assert "one step short" in out and "1179" not in out and "hint" in out  # the answer stays hidden
    assert check.head_reach(lambda H: [math.log(100) / m for m in recipe(H)]) is False  # not rounded
    assert "whole numbers" in capsys.readouterr().out
    assert check.head_reach(lambda H: [math.floor(math.log10(100) / m) + 1 for m in recipe(H)]) is False
    assert check.head_reach(lambda H: by_formula(H)[:-1]) is False
    assert "expected 8 distances" in capsys.readouterr().out
    assert check.head_reach(lambda H: None) is False
