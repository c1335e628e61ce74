"""Exercise checkers of notebooks/05_rope.ipynb: right answers pass, wrong ones fail, None is 'not attempted'."""
import math

import pytest
import torch

from posenc_lib import check


def _right_thetas(d, base):
    return base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)


def _rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), -1)


def _unfinished(*_):
    raise NotImplementedError


ANGLE = 30 * 10000 ** (-2 / 8)  # position 30, pair 1, d = 8: 3 radians
RIGHT_PAIR = [2 * math.cos(ANGLE) - math.sin(ANGLE), 2 * math.sin(ANGLE) + math.cos(ANGLE)]
EXACT_ROW3 = [-0.848872, 1.131112, 1.029546, -0.969555]

CASES = {
    "rope_thetas": (
        _right_thetas,
        [
            lambda d, base: base ** (torch.arange(0, d, 2, dtype=torch.float64) / d),  # sign lost
            lambda d, base: base ** (-torch.arange(d // 2, dtype=torch.float64) / d),  # j/d
            lambda d, base: base ** (-torch.arange(d, dtype=torch.float64) / d),  # one per feature
            lambda d, base: "nope",
        ],
    ),
    "rope_rotate_pair": (
        RIGHT_PAIR,
        [
            [2 * math.cos(ANGLE) + math.sin(ANGLE), -2 * math.sin(ANGLE) + math.cos(ANGLE)],  # clockwise
            [2.0, 1.0],
            [1.0],
        ],
    ),
    "rope_rotate_half": (
        _rotate_half,
        [
            lambda x: torch.cat((x[..., x.shape[-1] // 2:], -x[..., : x.shape[-1] // 2]), -1),  # sign swapped
            lambda x: torch.stack((-x[..., 1::2], x[..., ::2]), -1).flatten(-2),  # the interleaved partner
            lambda x: x[..., :2],
            lambda x: 1 / 0,
        ],
    ),
    "rope_layout_perm": (
        [0, 2, 4, 6, 1, 3, 5, 7],
        [
            [0, 4, 1, 5, 2, 6, 3, 7],  # inverse
            [0, 1, 2, 3, 4, 5, 6, 7],
            [0, 0, 1, 1, 2, 2, 3, 3],
            [1, 2],
            "abc",
        ],
    ),
    "rope_table_row": (
        [-0.8489, 1.1311, 1.0295, -0.9696],
        [
            [-0.8489, 1.1311, 1.0296, -0.9696],  # the source's rounding slip
            [1.1311, -0.8489, 1.0295, -0.9696],
            [0, 0, 0],
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_right_answer_passes(name, capsys):
    """The worked solution prints 'all correct!' and returns True."""
    assert getattr(check, name)(CASES[name][0]) is True
    out = capsys.readouterr().out
    assert "all correct!" in out and "✗" not in out


@pytest.mark.parametrize("name, wrong", [(n, w) for n, (_, ws) in sorted(CASES.items()) for w in ws])
def test_wrong_answer_fails_with_a_hint(name, wrong, capsys):
    """A wrong answer returns False, never raises, and prints a hint."""
    assert getattr(check, name)(wrong) is False
    out = capsys.readouterr().out
    assert "✗" in out and "hint:" in out


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("blank", [None, ...])
def test_unattempted_says_so(name, blank, capsys):
    """None / ... means not attempted yet (returns None)."""
    assert getattr(check, name)(blank) is None
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["rope_thetas", "rope_rotate_half"])
def test_stub_raising_not_implemented_counts_as_unattempted(name, capsys):
    """A learner stub that still raises NotImplementedError is not an error."""
    assert getattr(check, name)(_unfinished) is None
    assert "not attempted yet" in capsys.readouterr().out


def test_specific_feedback_for_common_slips(capsys):
    """Clockwise rotation, the inverse permutation and the 1.0296 slip are named."""
    check.rope_rotate_pair(CASES["rope_rotate_pair"][1][0])
    assert "clockwise" in capsys.readouterr().out
    check.rope_layout_perm([0, 4, 1, 5, 2, 6, 3, 7])
    assert "inverse" in capsys.readouterr().out
    check.rope_table_row([-0.8489, 1.1311, 1.0296, -0.9696])
    out = capsys.readouterr().out
    assert "entry 2: 1.0296 is off in the 4th decimal" in out and "1.0295" not in out  # the right value stays hidden
    check.rope_thetas(CASES["rope_thetas"][1][0])
    assert "minus sign" in capsys.readouterr().out


def test_exact_row_values_pass_unrounded():
    """Unrounded values (more decimals) are right too."""
    assert check.rope_table_row(EXACT_ROW3) is True
