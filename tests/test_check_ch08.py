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


def test_longrope_factor(capsys):
    assert run(check.longrope_factor, None, capsys)[0] is None

    def right(c):
        L0 = c["original_max_position_embeddings"]
        return math.sqrt(1 + math.log(c["max_position_embeddings"] / L0) / math.log(L0))

    assert run(check.longrope_factor, right, capsys)[0] is True
    yarn = lambda c: 0.1 * math.log(c["max_position_embeddings"] / c["original_max_position_embeddings"]) + 1  # noqa: E731
    ok, out = run(check.longrope_factor, yarn, capsys)
    assert ok is False and "hint" in out and "1.19" not in out
    assert run(check.longrope_factor, lambda c: 1.0, capsys)[0] is False
    assert run(check.longrope_factor, lambda c: c["factor"], capsys)[0] is False  # KeyError: reported


def test_longrope_factor_matches_phi3():
    """The checker's reference is the library; Phi-3's numbers give sqrt(1 + 5/12) = 1.190."""
    config = check.ch08._phi3_like(4096, 131072)
    assert math.isclose(pl.rope_from_config(config)[1], math.sqrt(1 + 5 / 12))


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


@pytest.mark.parametrize("checker", [check.pairs_that_turn, check.longrope_factor, check.rotate_new])
def test_grading_raises_on_a_wrong_function(checker, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="hint"):
        checker(lambda *a: 0)
