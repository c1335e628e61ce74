"""The chapter 3 checkers accept right answers, reject wrong ones with a reason, never raise."""
import math

import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def _not_done(*args):
    raise NotImplementedError


# --- pe_entry ---------------------------------------------------------------------------

def test_pe_entry_accepts_the_right_value(capsys):
    """cos(7 · 10000^(−2/10)) is PE[7, 3] for d = 10."""
    assert check.pe_entry(math.cos(7 * 10000 ** (-2 / 10))) is True
    assert "all correct!" in capsys.readouterr().out


def test_pe_entry_accepts_a_zero_dim_tensor():
    """A 0-d tensor answer is read as a number."""
    assert check.pe_entry(pl.sinusoidal_positions(8, 10)[7, 3]) is True


@pytest.mark.parametrize(
    "wrong, says",
    [
        (math.sin(7 * 10000 ** (-2 / 10)), "wrong function"),
        (math.cos(7 * 10000 ** (-3 / 10)), "column index"),
        (0.5, "is not"),
        ("a string", "one number"),
    ],
)
def test_pe_entry_rejects_wrong_values_with_a_reason(wrong, says, capsys):
    """Typical slips get a specific message and the hint."""
    assert check.pe_entry(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out


def test_pe_entry_unattempted_is_none(capsys):
    """None means not attempted yet."""
    assert check.pe_entry(None) is None
    assert "not attempted yet" in capsys.readouterr().out


def test_pe_entry_other_questions():
    """The question can be changed: position, column and d are parameters."""
    assert check.pe_entry(math.sin(2 * 1.0), position=2, column=0, d=4) is True


# --- shift_matrix ------------------------------------------------------------------------

def _right_shift(k, d):
    return pl.rope_matrix(-k, d, inv_freq=pl.rope_frequencies(d, dtype=torch.float64))


def _explicit_shift(k, d):
    M = torch.zeros(d, d, dtype=torch.float64)
    for j, theta in enumerate(pl.rope_frequencies(d, dtype=torch.float64).tolist()):
        c, s = math.cos(k * theta), math.sin(k * theta)
        M[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor([[c, s], [-s, c]])
    return M


@pytest.mark.parametrize("fn", [_right_shift, _explicit_shift])
def test_shift_matrix_accepts_right_answers(fn, capsys):
    """Both the library form R_{-k} and a hand-built block matrix pass."""
    assert check.shift_matrix(fn) is True
    assert "all correct!" in capsys.readouterr().out


def test_shift_matrix_rejects_the_transpose(capsys):
    """Using RoPE's block unchanged (R_k) shifts the wrong way, and the checker says so."""
    assert check.shift_matrix(lambda k, d: _right_shift(k, d).T) is False
    assert "transpose" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda k, d: torch.eye(d), "differs"),
        (lambda k, d: torch.eye(d + 1), "shape"),
        (lambda k, d: 1 / 0, "ZeroDivisionError"),
    ],
)
def test_shift_matrix_rejects_wrong_functions(wrong, says, capsys):
    """Wrong matrices, wrong shapes and crashing answers are reported, not raised."""
    assert check.shift_matrix(wrong) is False
    assert says in capsys.readouterr().out


@pytest.mark.parametrize("answer", [None, _not_done])
def test_shift_matrix_unattempted_is_none(answer, capsys):
    """None or a stub raising NotImplementedError means not attempted."""
    assert check.shift_matrix(answer) is None
    assert "not attempted yet" in capsys.readouterr().out


# --- wavelengths -------------------------------------------------------------------------

def test_wavelengths_accepts_the_right_function(capsys):
    """2π / θ_j, the positions one full turn of pair j takes."""
    assert check.wavelengths(lambda d, base: 2 * math.pi / pl.rope_frequencies(d, base=base)) is True
    assert "all correct!" in capsys.readouterr().out


def test_wavelengths_spots_the_missing_two_pi(capsys):
    """1/θ_j is a common slip; the message names it."""
    assert check.wavelengths(lambda d, base: 1 / pl.rope_frequencies(d, base=base)) is False
    assert "2π" in capsys.readouterr().out


@pytest.mark.parametrize(
    "wrong, says",
    [
        (lambda d, base: 2 * math.pi * pl.rope_frequencies(d, base=base), "is wrong"),
        (lambda d, base: torch.ones(d), "shape"),
    ],
)
def test_wavelengths_rejects_wrong_functions(wrong, says, capsys):
    """Wrong values or shapes are reported."""
    assert check.wavelengths(wrong) is False
    assert says in capsys.readouterr().out


@pytest.mark.parametrize("answer", [None, _not_done])
def test_wavelengths_unattempted_is_none(answer):
    """None or a stub raising NotImplementedError means not attempted."""
    assert check.wavelengths(answer) is None


# --- pe_dot -------------------------------------------------------------------------------

def test_pe_dot_accepts_the_closed_form(capsys):
    """Σ_j cos(k θ_j)."""
    assert check.pe_dot(lambda k, d: torch.cos(k * pl.rope_frequencies(d, dtype=torch.float64)).sum()) is True
    assert "all correct!" in capsys.readouterr().out


def test_pe_dot_accepts_a_direct_computation():
    """Computing the dot product of two table rows also passes."""

    def direct(k, d):
        P = pl.sinusoidal_positions(300, d, dtype=torch.float64)
        return P[40] @ P[40 + k]

    assert check.pe_dot(direct) is True


@pytest.mark.parametrize(
    "wrong",
    [
        lambda k, d: d / 2,  # forgets the decay
        lambda k, d: torch.sin(k * pl.rope_frequencies(d, dtype=torch.float64)).sum(),
        lambda k, d: torch.cos(k * pl.rope_frequencies(d, dtype=torch.float64)).sum() * 2,
    ],
)
def test_pe_dot_rejects_wrong_functions(wrong, capsys):
    """Constant, sine and doubled answers fail; the expected value is not shown."""
    assert check.pe_dot(wrong) is False
    out = capsys.readouterr().out
    assert "is wrong" in out and "expected" not in out
    assert "0.5403" not in out  # pe_dot(1, 2) = cos(1), the first case: its value stays hidden


@pytest.mark.parametrize("answer", [None, _not_done])
def test_pe_dot_unattempted_is_none(answer):
    """None or a stub raising NotImplementedError means not attempted."""
    assert check.pe_dot(answer) is None
