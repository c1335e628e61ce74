"""Checkers of chapter 9 (posenc_lib.check.ch09): right, wrong and unattempted answers, and grading mode."""

import pytest
import torch

from posenc_lib import check

MROPE_RIGHT = [[0, 0, 0], [1, 1, 1], [2, 2, 2], [2, 2, 3], [2, 2, 4], [2, 3, 2], [2, 3, 3], [2, 3, 4],
               [5, 5, 5], [6, 6, 6]]  # written out by hand from Qwen2-VL's rule


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


def test_mrope_by_hand(capsys):
    assert run(check.mrope_by_hand, None, capsys)[0] is None
    ok, out = run(check.mrope_by_hand, MROPE_RIGHT, capsys)
    assert ok is True and "all correct!" in out
    wrong = MROPE_RIGHT[:8] + [[3, 3, 3], [4, 4, 4]]  # text continues after the image's token count
    ok, out = run(check.mrope_by_hand, wrong, capsys)
    assert ok is False and "last text tokens: wrong" in out and "image tokens: right" in out
    assert "[5, 5, 5]" not in out and "5" not in out.split("hint")[0]  # the expected ids stay hidden
    ok, out = run(check.mrope_by_hand, MROPE_RIGHT[:9], capsys)
    assert ok is False and "10 rows" in out


def test_pair_axes(capsys):
    def right(sections, style):
        n = len(sections)
        if style == "contiguous":
            return torch.cat([torch.full((s,), a) for a, s in enumerate(sections)])
        out = torch.zeros(sum(sections), dtype=torch.long)
        for a in range(1, n):
            out[a:n * sections[a]:n] = a
        return out

    def plain_round_robin(sections, style):  # forgets that axes >= 1 stop after sections[a] pairs
        if style == "contiguous":
            return right(sections, style)
        return torch.arange(sum(sections)) % len(sections)

    def stub(sections, style):
        raise NotImplementedError

    assert run(check.pair_axes, None, capsys)[0] is None
    assert run(check.pair_axes, stub, capsys)[0] is None
    ok, out = run(check.pair_axes, right, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.pair_axes, plain_round_robin, capsys)
    assert ok is False and "(24, 20, 20), interleaved: wrong" in out and "(16, 24, 24), contiguous: right" in out
    ok, out = run(check.pair_axes, lambda s, st: torch.zeros(3), capsys)
    assert ok is False and "hint" in out


def test_cope_by_hand(capsys):
    assert run(check.cope_by_hand, None, capsys)[0] is None
    ok, out = run(check.cope_by_hand, [3.5, 2.5, 2.5, 2.0, 1.0, 1.0], capsys)  # 1+0+.5+1+0+1 from each j
    assert ok is True and "all correct!" in out
    ok, out = run(check.cope_by_hand, [3.5, 3.5, 2.5, 2.0, 1.0, 0.0], capsys)  # forward sum, query left out
    assert ok is False and "(the query itself): wrong" in out and "3.5" not in out
    ok, out = run(check.cope_by_hand, [1, 2, 3], capsys)
    assert ok is False and "6 positions" in out


@pytest.mark.parametrize("checker,right", [
    (check.mrope_by_hand, MROPE_RIGHT),
    (check.cope_by_hand, [3.5, 2.5, 2.5, 2.0, 1.0, 1.0]),
])
def test_grading_mode_raises_on_wrong_or_missing_answers(checker, right, monkeypatch, capsys):
    monkeypatch.setenv("POSENC_GRADING", "1")
    assert checker(right) is True
    with pytest.raises(AssertionError, match="not attempted yet"):
        checker(None)
    with pytest.raises(AssertionError, match="hint"):
        checker([[0]])
