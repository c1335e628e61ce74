"""Exercise checkers of notebooks/05_rope.ipynb: right answers pass, wrong ones fail, None is 'not attempted'."""
import math

import numpy as np
import pytest
import torch

from posenc_lib import check


def _unfinished(*_):
    raise NotImplementedError


def _first_slow_pair(d, base, L):
    """Written from the inequality (L - 1) * base**(-2j/d) < 2*pi, not from the library."""
    if L - 1 < 2 * math.pi:
        return 0
    return min(d // 2, math.floor((d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)) + 1)


def _rotation(s, d):
    """R_s written out: a 2 x 2 block [[cos, -sin], [sin, cos]] of angle s * 10000**(-2j/d) per pair."""
    blocks = []
    for j in range(d // 2):
        a = s * 10000.0 ** (-2 * j / d)
        blocks.append(torch.tensor([[math.cos(a), -math.sin(a)], [math.sin(a), math.cos(a)]], dtype=torch.float64))
    return torch.block_diag(*blocks)


def _half_rotation(s, d):
    """R_s in the half layout: pair j at rows/columns (j, j + d/2)."""
    order = [f for j in range(d // 2) for f in (j, j + d // 2)]  # interleaved slot -> half feature
    back = torch.argsort(torch.tensor(order))
    return _rotation(s, d)[back][:, back]


ANGLE = 30 * 10000 ** (-2 / 8)  # position 30, pair 1, d = 8: 3 radians
RIGHT_PAIR = [2 * math.cos(ANGLE) - math.sin(ANGLE), 2 * math.sin(ANGLE) + math.cos(ANGLE)]
# [1, 2, -1, 0.5] at position 7 (d = 4): pairs turned by 7 and 0.07 rad, written out from cos/sin values.
C7, S7, C07, S07 = math.cos(7), math.sin(7), math.cos(0.07), math.sin(0.07)
EXACT_ROW7 = [C7 - 2 * S7, S7 + 2 * C7, -C07 - 0.5 * S07, -S07 + 0.5 * C07]

CASES = {
    "rope_rotate_pair": (
        RIGHT_PAIR,
        [
            [2 * math.cos(ANGLE) + math.sin(ANGLE), -2 * math.sin(ANGLE) + math.cos(ANGLE)],  # clockwise
            [2.0, 1.0],
            [1.0],
        ],
    ),
    "rope_first_slow_pair": (
        _first_slow_pair,
        [
            lambda d, base, L: _first_slow_pair(d, base, L) - 1,  # the last pair that still turns
            lambda d, base, L: _first_slow_pair(d, base, L) + 1,
            lambda d, base, L: math.ceil((d / 2) * math.log(L / (2 * math.pi)) / math.log(base)),  # L, not L - 1,
            lambda d, base, L: (d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base),  # not a whole number
            lambda d, base, L: -1,
            lambda d, base, L: "46",
        ],
    ),
    "rope_layout_perm": (
        [0, 4, 1, 5, 2, 6, 3, 7],
        [
            [0, 2, 4, 6, 1, 3, 5, 7],  # P itself, the other direction
            [0, 1, 2, 3, 4, 5, 6, 7],
            [0, 0, 1, 1, 2, 2, 3, 3],
            [1, 2],
            "abc",
        ],
    ),
    "rope_value_shift": (
        _rotation,
        [
            lambda s, d: _rotation(-s, d),  # turned the wrong way
            lambda s, d: torch.eye(d),  # "nothing changes"
            _half_rotation,  # the other layout
            lambda s, d: _rotation(s, d)[:2],
            lambda s, d: 1 / 0,
        ],
    ),
    "rope_table_row": (
        [-0.5601, 2.1648, -1.0325, 0.4288],
        [
            [-0.5601, 2.1648, -1.0326, 0.4288],  # cut off, not rounded
            [-0.8489, 1.1311, 1.0295, -0.9696],  # row 3 of §5's table
            [C7 + 2 * S7, -S7 + 2 * C7, -C07 + 0.5 * S07, S07 + 0.5 * C07],  # clockwise
            [C7 - 2 * S7, S7 + 2 * C7, -math.cos(700) - 0.5 * math.sin(700), -math.sin(700) + 0.5 * math.cos(700)],
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


@pytest.mark.parametrize("name", ["rope_first_slow_pair", "rope_value_shift"])
def test_stub_raising_not_implemented_counts_as_unattempted(name, capsys):
    """A learner stub that still raises NotImplementedError is not an error."""
    assert getattr(check, name)(_unfinished) is None
    assert "not attempted yet" in capsys.readouterr().out


def test_specific_feedback_for_common_slips(capsys):
    """Clockwise rotation, P for Q, the wrong turning direction, off-by-one pairs and the 1.0296 slip are named."""
    check.rope_rotate_pair(CASES["rope_rotate_pair"][1][0])
    assert "clockwise" in capsys.readouterr().out
    check.rope_layout_perm([0, 2, 4, 6, 1, 3, 5, 7])
    out = capsys.readouterr().out
    assert "that is P" in out and "follow one pair" in out
    assert "undoes" not in out and "P[Q]" not in out and "0, 4, 1, 5" not in out  # the hint hides the inverse
    check.rope_value_shift(lambda s, d: _rotation(-s, d))
    assert "wrong way" in capsys.readouterr().out
    check.rope_value_shift(lambda s, d: torch.eye(d))
    assert "M = I" in capsys.readouterr().out
    check.rope_first_slow_pair(CASES["rope_first_slow_pair"][1][0])
    out = capsys.readouterr().out
    assert "pair 45 still completes a full turn" in out and "46" not in out  # the answer stays hidden
    check.rope_first_slow_pair(CASES["rope_first_slow_pair"][1][1])
    assert "pair 46 already stays below one turn" in capsys.readouterr().out
    check.rope_table_row([-0.5601, 2.1648, -1.0326, 0.4288])
    out = capsys.readouterr().out
    assert "entry 2: -1.0326 is off in the 4th decimal" in out and "1.0325" not in out  # the right value stays hidden
    check.rope_table_row(CASES["rope_table_row"][1][2])
    assert "clockwise" in capsys.readouterr().out
    check.rope_table_row(CASES["rope_table_row"][1][3])
    assert "grows with j" in capsys.readouterr().out


def test_first_slow_pair_edges_and_number_types(capsys):
    """Llama 2's setting is pair 46 (pair 45 still turns, by 0.4 %); numpy and tensor integers count."""
    assert 4095 * 10000 ** (-90 / 128) >= 2 * math.pi > 4095 * 10000 ** (-92 / 128)
    assert check.rope_first_slow_pair(lambda d, base, L: np.int64(_first_slow_pair(d, base, L))) is True
    assert check.rope_first_slow_pair(lambda d, base, L: torch.tensor(_first_slow_pair(d, base, L))) is True
    assert check.rope_first_slow_pair(lambda d, base, L: float(_first_slow_pair(d, base, L))) is True


def test_value_shift_accepts_float32_matrices():
    """The library's float32 R_s is right too (the check allows float32 rounding)."""
    import posenc_lib as pl

    assert check.rope_value_shift(lambda s, d: pl.rope_matrix(s, d)) is True


def test_exact_row_values_pass_unrounded():
    """Unrounded values (more decimals) are right too."""
    assert check.rope_table_row(EXACT_ROW7) is True
    assert [round(v, 4) for v in EXACT_ROW7] == CASES["rope_table_row"][0]
