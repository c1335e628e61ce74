"""Checkers of chapter 8 (posenc_lib.check.ch08): right, wrong and unattempted answers."""
import math

import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


def _stub(*args):
    raise NotImplementedError


def test_pairs_that_turn(capsys):
    assert run(check.pairs_that_turn, None, capsys)[0] is None
    assert run(check.pairs_that_turn, _stub, capsys)[0] is None

    def by_loop(base, r, length):  # counting pair by pair is right too
        return sum(2 * math.pi * base ** (2 * j / r) <= length for j in range(r // 2))

    ok, out = run(check.pairs_that_turn, by_loop, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.pairs_that_turn, lambda b, r, L: by_loop(b, r, L) - 1, capsys)  # off by one
    assert ok is False and "hint" in out and "8192: -1 is wrong" not in out
    assert "base=500000, r=128, length=8192: 34 is wrong" in out  # the learner's value, never the expected 35
    assert "35" not in out
    assert run(check.pairs_that_turn, lambda b, r, L: r // 2, capsys)[0] is False  # every pair
    assert run(check.pairs_that_turn, lambda b, r, L: True, capsys)[0] is False  # a bool is not a count


def test_longrope_context(capsys):
    assert run(check.longrope_context, None, capsys)[0] is None
    ok, out = run(check.longrope_context, lambda a, L0: math.exp(a * a * math.log(L0)), capsys)
    assert ok is True and "all correct!" in out and "17/12" in out
    ok, out = run(check.longrope_context, lambda a, L0: L0 * math.exp((a * a - 1) * math.log(L0)), capsys)
    assert ok is True  # the same length, written as s * L0
    ok, out = run(check.longrope_context, lambda a, L0: L0 * a * a, capsys)  # a^2 as the stretch itself
    assert ok is False and "hint" in out and "17/12" not in out
    assert "131072" not in out  # Phi-3's length is never given away
    assert run(check.longrope_context, lambda a, L0: L0 ** a, capsys)[0] is False
    assert run(check.longrope_context, lambda a, L0: True, capsys)[0] is False  # a bool is not a length


@pytest.mark.parametrize("a, L0", check.ch08._CONTEXT_CASES)
def test_longrope_context_cases_match_the_library(a, L0):
    """The checker's closed form, fed back through pl.rope_from_config, gives the factor a again."""
    length = L0 ** (a * a)
    config = check.ch08._phi3_like(L0, round(length))
    assert math.isclose(pl.rope_from_config(config)[1], a, rel_tol=1e-5)


def test_phi3_factor_is_sqrt_17_over_12():
    """Phi-3's numbers give sqrt(1 + 5/12) = 1.190, and its deployed length is 4096 ** (17/12) = 131072."""
    config = check.ch08._phi3_like(4096, 131072)
    assert math.isclose(pl.rope_from_config(config)[1], math.sqrt(1 + 5 / 12))
    assert math.isclose(4096 ** (17 / 12), 131072)


def test_temperature_position(capsys):
    assert run(check.temperature_position, None, capsys)[0] is None
    # 1 + 0.1 ln(1 + k) > 1.2 needs k >= 7 (e^2 = 7.39), k = floor((pos + 1) / 8192)
    ok, out = run(check.temperature_position, 7 * 8192 - 1, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.temperature_position, 7 * 8192, capsys)  # one too late
    assert ok is False and "already exceeds 1.2 before" in out and str(7 * 8192 - 1) not in out
    assert run(check.temperature_position, 6 * 8192 - 1, capsys)[0] is False  # too early
    assert run(check.temperature_position, 57343.5, capsys)[0] is False  # not an integer
    assert run(check.temperature_position, "57343", capsys)[0] is False


def test_rotate_new(capsys):
    assert run(check.rotate_new, None, capsys)[0] is None
    right = lambda x, c: pl.apply_rope(x, torch.arange(c, c + x.shape[-2]))  # noqa: E731
    assert run(check.rotate_new, right, capsys)[0] is True
    ok, out = run(check.rotate_new, lambda x, c: pl.apply_rope(x), capsys)  # forgets the offset
    assert ok is False and "after 0 cached tokens: right" in out and "after 5 cached tokens: wrong" in out
    assert run(check.rotate_new, lambda x, c: pl.apply_rope(x, torch.arange(c - 1, c - 1 + x.shape[-2]).clamp(min=0)),
               capsys)[0] is False


@pytest.mark.parametrize("checker", [check.pairs_that_turn, check.longrope_context, check.rotate_new])
def test_grading_raises_on_a_wrong_function(checker, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="hint"):
        checker(lambda *a: 0)
