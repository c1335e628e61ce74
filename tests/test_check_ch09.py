"""Checkers of chapter 9 (posenc_lib.check.ch09): right answers in more than one form, typical wrong answers
each told its misconception, unattempted answers and grading mode. Right answers are built here from the
reasoning the exercises ask for, not from the checkers' references."""
import math

import pytest
import torch

import posenc_lib as pl
from posenc_lib import check

# Exercise 1: h and w share the fast end (alternating), t takes the 16 slowest pairs.
AXES_RIGHT = [1, 2] * 24 + [0] * 16
# Another: of the four fastest pairs w takes 0 and 3, h 1 and 2; then h, w in blocks; t in the middle-slow range.
AXES_RIGHT_2 = [2, 1, 1, 2] + [1] * 10 + [2] * 10 + [0] * 20 + [1] * 10 + [2] * 10


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


def test_design_axes(capsys):
    assert run(check.design_axes, None, capsys)[0] is None
    for right in (AXES_RIGHT, torch.tensor(AXES_RIGHT), tuple(float(a) for a in AXES_RIGHT), AXES_RIGHT_2):
        ok, out = run(check.design_axes, right, capsys)
        assert ok is True and "all correct!" in out, out
    qwen2 = pl.rope_nd_axes((16, 24, 24), "contiguous")  # t on the fastest pairs
    ok, out = run(check.design_axes, qwen2, capsys)
    assert ok is False and "turn visibly within 16 frames" in out and "too little to tell neighbours apart" in out
    time_slow = torch.tensor([1, 2, 0])[pl.rope_nd_axes((24, 24, 16), "contiguous")]  # h fast, w in the middle
    ok, out = run(check.design_axes, time_slow, capsys)
    assert ok is False and "✓ t:" in out and "✓ h:" in out and "✗ w:" in out
    ok, out = run(check.design_axes, [0] * 4 + [1, 2] * 30, capsys)  # t gets too few pairs
    assert ok is False and "fewer than 16 pairs" in out
    ok, out = run(check.design_axes, AXES_RIGHT[:63], capsys)
    assert ok is False and "expected 64 axis numbers" in out


def test_design_axes_scores_are_apply_rope_nds():
    """The checker's closed-form score equals pl.apply_rope_nd's with the same allocation (q = k = ones)."""
    axes = torch.tensor(AXES_RIGHT)
    for axis, delta in ((0, 16), (1, 1), (2, 1), (1, 7)):
        coords = torch.zeros(2, 3, dtype=torch.long)
        coords[1, axis] = delta
        # the allocation as a contiguous split of a permuted head: reorder the pairs so that each axis is one block
        order = torch.cat([(axes == a).nonzero().flatten() for a in range(3)])
        sections = tuple(int((axes == a).sum()) for a in range(3))
        theta = pl.rope_frequencies(128, base=1e6, dtype=torch.float64)[order]
        r = pl.apply_rope_nd(torch.ones(2, 128, dtype=torch.float64), coords, sections=sections,
                             section_style="contiguous", inv_freq=theta)
        assert math.isclose((r[0] @ r[1]).item(), check.ch09.axis_score(axes, axis, delta), rel_tol=1e-12)


def test_sentence_gates(capsys):
    assert run(check.sentence_gates, None, capsys)[0] is None

    def one_axis(d):  # q along e_0; full stops along it, words against it, far from 0 after the 1/sqrt(d)
        e = torch.eye(d, dtype=torch.float64)[0] * 8 * math.sqrt(d)
        return e, -e, e

    def two_axes(d):  # lists; the query reads a "full stop" feature and a "word" feature
        q = [0.0] * d
        q[0], q[1] = 10 * math.sqrt(d), -10 * math.sqrt(d)
        stop, word = [0.0] * d, [0.0] * d
        stop[0], word[1] = 1.0, 1.0
        return q, word, stop

    for right in (one_axis, two_axes):
        ok, out = run(check.sentence_gates, right, capsys)
        assert ok is True and "all correct!" in out, out
    ok, out = run(check.sentence_gates, lambda d: (one_axis(d)[0], one_axis(d)[0], one_axis(d)[0]), capsys)
    assert ok is False and "count tokens" in out
    ok, out = run(check.sentence_gates, lambda d: (one_axis(d)[0], one_axis(d)[0], -one_axis(d)[0]), capsys)
    assert ok is False and "count words" in out
    ok, out = run(check.sentence_gates, lambda d: tuple(v / (4 * math.sqrt(d)) for v in one_axis(d)), capsys)
    assert ok is False and "part-open gates" in out
    ok, out = run(check.sentence_gates, lambda d: torch.ones(d), capsys)
    assert ok is False and "three vectors" in out


def test_leak_logit(capsys):
    assert run(check.leak_logit, None, capsys)[0] is None
    right = lambda n, tol: math.log(tol / (n - tol))  # noqa: E731  n sigmoid(x) = tol
    assert run(check.leak_logit, right, capsys)[0] is True
    assert run(check.leak_logit, lambda n, tol: -torch.log(torch.tensor(n / tol - 1.0)), capsys)[0] is True
    ok, out = run(check.leak_logit, lambda n, tol: tol / n, capsys)
    assert ok is False and "the gate itself" in out
    ok, out = run(check.leak_logit, lambda n, tol: math.log(tol / (1 - tol)), capsys)  # one token's bound
    assert ok is False and "tokens add their gates" in out
    ok, out = run(check.leak_logit, lambda n, tol: math.log(tol / n), capsys)
    assert ok is False and "logarithm of the gate" in out
    ok, out = run(check.leak_logit, lambda n, tol: -right(n, tol), capsys)
    assert ok is False and "positive" in out
    assert "-6.797" not in run(check.leak_logit, lambda n, tol: -1.0, capsys)[1]  # the expected value stays hidden


def test_leak_logit_bound_holds_in_cope():
    """At the bound, n ignored tokens shift CoPE's position by exactly the tolerance."""
    n, tol = 480, 0.5
    x = math.log(tol / (n - tol))
    logits = torch.full((1, n), x, dtype=torch.float64)
    assert math.isclose(pl.cope_positions(logits)[0, 0].item(), tol, rel_tol=1e-9)


@pytest.mark.parametrize("name", ["design_axes", "sentence_gates", "leak_logit"])
def test_grading_raises(name, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="not attempted"):
        getattr(check, name)(None)
