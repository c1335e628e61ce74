"""The chapter 3 checkers accept right answers, reject wrong ones with a reason, never raise."""
import math

import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def _not_done(*args):
    raise NotImplementedError


# --- offset_from_codes -------------------------------------------------------------------
SLOWEST = 10000.0 ** (-6 / 8)  # pair 3 of d = 8: one turn takes 2π / 1e-3 ≈ 6283 positions


def _turn(code, j):
    return math.atan2(float(code[2 * j]), float(code[2 * j + 1]))


def offset_by_slowest_pair(code_a, code_b):
    """Read the slowest pair's turn from code_a to code_b, bring it into (-π, π], divide by its frequency."""
    turn = _turn(code_b, 3) - _turn(code_a, 3)
    turn = (turn + math.pi) % (2 * math.pi) - math.pi
    return turn / SLOWEST


def offset_by_rotation(code_a, code_b):
    """Another right form: the slow pair as complex numbers, b * conj(a) = e^{i k θ} (numpy, float32 codes)."""
    import numpy as np

    a, b = np.asarray(code_a, dtype=np.float32), np.asarray(code_b, dtype=np.float32)
    za, zb = complex(a[7], a[6]), complex(b[7], b[6])  # (cos, sin) as cos + i sin
    return np.float32(np.angle(zb * za.conjugate()) / SLOWEST)


def test_offset_from_codes_fact_independent_of_the_checker():
    """The codes are §1's table at real positions; the slowest pair's turn over q - p is (q - p) θ_3 < π."""
    torch.testing.assert_close(check.ch03.code_of(7.0), pl.sinusoidal_positions(8, 8, dtype=torch.float64)[7])
    for p, q in check.ch03.CODE_PAIRS:
        assert abs(q - p) * SLOWEST < math.pi
        assert abs(offset_by_slowest_pair(check.ch03.code_of(p), check.ch03.code_of(q)) - (q - p)) < 1e-6


@pytest.mark.parametrize("right", [offset_by_slowest_pair, offset_by_rotation,
                                   lambda a, b: torch.tensor(offset_by_slowest_pair(a, b))])
def test_offset_from_codes_accepts_right_answers(right, capsys):
    assert check.offset_from_codes(right) is True
    assert "all correct!" in capsys.readouterr().out


def _fast_pair(code_a, code_b):  # pair 0: one radian per position, so its turn repeats every 2π positions
    return (_turn(code_b, 0) - _turn(code_a, 0) + math.pi) % (2 * math.pi) - math.pi


@pytest.mark.parametrize("wrong, says", [
    (lambda a, b: -offset_by_slowest_pair(a, b), "you read p - q"),
    (lambda a, b: abs(offset_by_slowest_pair(a, b)), "right size, wrong sign"),
    (lambda a, b: round(offset_by_slowest_pair(a, b)), "a whole number"),
    (_fast_pair, "repeats within 3000 positions"),
    (lambda a, b: (_turn(b, 3) - _turn(a, 3)) / SLOWEST, "whole turn of the slowest pair"),  # not wrapped
    (lambda a, b: 0.0, "not the offset"),
    (lambda a, b: [1.0, 2.0], "one number"),
])
def test_offset_from_codes_names_the_misconception_without_the_offset(wrong, says, capsys):
    assert check.offset_from_codes(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    for p, q in check.ch03.CODE_PAIRS:  # neither the offsets nor the positions are printed
        for secret in (q - p, p, q):
            if abs(secret) >= 10:  # (small ones would match the case numbers "2 of 7")
                assert f"{secret:g}" not in out and f"{abs(secret):g}" not in out


def test_offset_from_codes_unattempted(capsys):
    assert check.offset_from_codes(None) is None
    assert "not attempted yet" in capsys.readouterr().out


# --- offset_only_score ------------------------------------------------------------------
F16 = pl.rope_frequencies(16, dtype=torch.float64)


def _rotation(c):
    return pl.rope_matrix(c, 16, inv_freq=F16)


def test_offset_only_score_accepts_rotations_toward_the_past(capsys):
    assert check.offset_only_score(_rotation(-4)) is True
    assert "all correct!" in capsys.readouterr().out
    assert check.offset_only_score(2.5 * _rotation(-4).float().numpy()) is True  # any positive scale, any array
    scale = torch.arange(1, 9, dtype=torch.float64).repeat_interleave(2)  # one positive scale per pair
    assert check.offset_only_score(torch.diag(scale) @ _rotation(-4)) is True  # still commutes with every M_k
    assert check.offset_only_score(_rotation(-4).tolist()) is True


def test_offset_only_score_fact_independent_of_the_checker():
    """p_m R_-4 p_n^T, written as a sum over pairs, is sum_j cos((n - m + 4) θ_j): largest at n - m = -4."""
    p = pl.sinusoidal_positions(40, 16, dtype=torch.float64)
    g = p @ _rotation(-4) @ p.T
    for m, n in ((5, 2), (30, 27), (10, 25), (0, 39)):
        torch.testing.assert_close(g[m, n], torch.cos((n - m + 4) * F16).sum())
    s = torch.cos((torch.arange(-20, 21, dtype=torch.float64)[:, None] + 4) * F16).sum(-1)
    assert int(s.argmax()) - 20 == -4


def test_offset_only_score_names_typical_mistakes(capsys):
    g = torch.Generator().manual_seed(0)
    assert check.offset_only_score(torch.randn(16, 16, generator=g)) is False  # W_Q W_K^T at random
    out = capsys.readouterr().out
    assert "depends on where the pair sits" in out and "rotation" not in out.split("hint")[0]
    a = torch.randn(16, 16, generator=g)
    assert check.offset_only_score(a + a.T) is False
    assert "a symmetric W is not enough" in capsys.readouterr().out
    assert check.offset_only_score(torch.eye(16)) is False  # the plain dot product of §6
    out = capsys.readouterr().out
    assert "s(k) = s(-k)" in out and "R_" not in out and "rope_matrix" not in out
    assert check.offset_only_score(_rotation(4)) is False  # the sign slip
    out = capsys.readouterr().out
    assert "mirror offset" in out and "rope_matrix" not in out and "-4)" not in out
    assert check.offset_only_score(_rotation(-5)) is False
    assert "another offset" in capsys.readouterr().out
    assert check.offset_only_score(torch.eye(8)) is False
    assert "must be 16x16" in capsys.readouterr().out
    assert check.offset_only_score(None) is None


# --- slow_pairs -------------------------------------------------------------------------
def test_slow_pairs_fact_by_the_exponents():
    """The bug: the exponent uses 2 * (2j) / d. Pair j is too slow when 4j/64 > 62/64, j = 16 .. 31."""
    row = check.ch03.buggy_sinusoids(2, 64)[1]
    theta = torch.atan2(row[0::2], row[1::2])
    torch.testing.assert_close(theta, 10000.0 ** (-4 * torch.arange(32, dtype=torch.float64) / 64))
    assert [j for j in range(32) if 4 * j > 62] == list(range(16, 32))
    assert check.ch03.too_slow_pairs() == 16


def test_slow_pairs_accepts_the_count_in_several_forms(capsys):
    import numpy as np

    for right in (16, 16.0, torch.tensor(16), np.int64(16)):
        assert check.slow_pairs(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (0, "builder is right"),  # no bug seen
    (32, "pair 0 turns one radian"),  # every pair
    (15, "close"),  # the boundary pair dropped
    (17, "close"),
    (8, "not that many"),
    (2.5, "whole number"),
    ("16", "whole number"),
])
def test_slow_pairs_names_the_misconception_without_the_count(wrong, says, capsys):
    assert check.slow_pairs(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "16" not in out.replace(repr(wrong), "")


def test_slow_pairs_unattempted(capsys):
    assert check.slow_pairs(None) is None
    assert "not attempted yet" in capsys.readouterr().out


def test_slow_pairs_notebook_shows_the_library_function_verbatim():
    """Exercise 3 prints the buggy builder as text in its markdown: it must be the checker's function."""
    import inspect
    from pathlib import Path

    source = (Path(__file__).parents[1] / "notebooks" / "src" / "03_sinusoids.py").read_text()
    block = source.split("# ```python\n", 1)[1].split("# ```\n", 1)[0]
    shown = "\n".join(line[2:] if line.startswith("# ") else "" for line in block.splitlines())
    assert shown.strip() == inspect.getsource(check.ch03.buggy_sinusoids).strip()
