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

def _interleaved_shift(k, d):
    return pl.rope_matrix(-k, d, inv_freq=pl.rope_frequencies(d, dtype=torch.float64))


def _explicit_shift(k, d):
    """By hand: pair j's sine in row j, its cosine in row j + d/2 (the concatenated layout)."""
    M = torch.zeros(d, d, dtype=torch.float64)
    h = d // 2
    for j, theta in enumerate(pl.rope_frequencies(d, dtype=torch.float64).tolist()):
        c, s = math.cos(k * theta), math.sin(k * theta)
        M[j, j], M[j, j + h], M[j + h, j], M[j + h, j + h] = c, s, -s, c
    return M


def _permuted_shift(k, d):
    """The interleaved M_k conjugated by the layout permutation: another right answer."""
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # concat column c = interleaved perm[c]
    return _interleaved_shift(k, d)[perm][:, perm]


@pytest.mark.parametrize("fn", [_explicit_shift, _permuted_shift])
def test_shift_matrix_accepts_right_answers(fn, capsys):
    """A hand-built matrix and the permuted interleaved one both pass."""
    assert check.shift_matrix(fn) is True
    assert "all correct!" in capsys.readouterr().out


def test_shift_matrix_rejects_the_reverse_shift(capsys):
    """Sine entries with the wrong sign shift by -k, and the checker says so."""
    assert check.shift_matrix(lambda k, d: _explicit_shift(k, d).T) is False
    assert "shifts by −k" in capsys.readouterr().out


def test_shift_matrix_rejects_the_interleaved_answer(capsys):
    """§4's matrix is right for the other layout only."""
    assert check.shift_matrix(_interleaved_shift) is False
    assert "interleaved layout" in capsys.readouterr().out


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


# --- sine_only_offsets ----------------------------------------------------------------------

def _exact_affine_fit(k, theta=math.pi / 6, n=60):
    """Independent of the checker: the normal equations for sin((i + k)θ) ≈ a sin(iθ) + b."""
    i = torch.arange(n - k, dtype=torch.float64)
    X = torch.stack([torch.sin(i * theta), torch.ones_like(i)], dim=1)
    y = torch.sin((i + k) * theta)
    coef = torch.linalg.lstsq(X, y.unsqueeze(1)).solution
    return (X @ coef - y.unsqueeze(1)).norm().item() < 1e-9


def test_sine_only_offsets_accepts_the_multiples_of_six(capsys):
    """sin((i+k)π/6) = ±sin(iπ/6) exactly when kπ/6 is a multiple of π."""
    right = [k for k in range(1, 25) if _exact_affine_fit(k)]
    assert right == [6, 12, 18, 24]
    assert check.sine_only_offsets(right) is True
    assert check.sine_only_offsets({24, 6, 18, 12}) is True  # a set, any order
    assert "all correct!" in capsys.readouterr().out


def test_sine_only_offsets_nudges_a_full_turn_only_answer(capsys):
    """Only the full turns (the identity map) misses the sign flips; the message says so."""
    assert check.sine_only_offsets([12, 24]) is False
    out = capsys.readouterr().out
    assert "missing" in out and "negative" in out and "6" not in out.split("hint:")[0].replace("24", "")


@pytest.mark.parametrize(
    "wrong, says",
    [
        ([3, 6, 12, 18, 24], "k = 3: no affine map"),  # sin(iπ/6 + π/2) = cos(iπ/6): not affine in the sine
        ([6, 12, 18], "missing"),
        ([0, 6, 12, 18, 24], "outside"),
        ("6, 12", "list of integer offsets"),
        ([6.0, 12.0], "list of integer offsets"),
    ],
)
def test_sine_only_offsets_rejects_wrong_answers(wrong, says, capsys):
    """Wrong offsets are named; the expected list is never printed."""
    assert check.sine_only_offsets(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out and "[6, 12, 18, 24]" not in out


def test_sine_only_offsets_unattempted_is_none(capsys):
    assert check.sine_only_offsets(None) is None
    assert "not attempted yet" in capsys.readouterr().out
