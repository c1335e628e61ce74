"""Chapter 2 checkers: right answers pass in several forms, typical wrong ones are told their
misconception without the answer, unattempted ones say so."""
import numpy as np
import torch

import posenc_lib as pl
from posenc_lib import check


def _out(capsys):
    return capsys.readouterr().out


# --- exercise 1: affine_counter --------------------------------------------------------------
RIGHT_WRAP = [1, 3]


def test_affine_counter_right_answer_in_several_forms(capsys):
    assert check.affine_counter(RIGHT_WRAP) is True
    assert "all correct!" in _out(capsys)
    assert check.affine_counter((3, 1)) is True
    assert check.affine_counter({1, 3}) is True
    assert check.affine_counter(torch.tensor([1, 3])) is True
    assert check.affine_counter(np.array([3, 1])) is True
    assert check.affine_counter([np.int64(1), 3.0]) is True


def test_affine_counter_wrong_answers_count_without_naming(capsys):
    assert check.affine_counter([1, 2, 3]) is False  # "no offset of a carrying counter is affine"
    out = _out(capsys)
    assert "1 of your offsets has an exact affine map" in out
    assert "k = 2" not in out and "[1, 3]" not in out
    assert check.affine_counter([]) is False  # the finite-table intuition: three points always fit
    out = _out(capsys)
    assert "2 offsets with no affine map are missing" in out and "four points are not three" in out
    assert not any(f"k = {k}" in out or f"[{k}" in out for k in (1, 2, 3))  # no offset is named
    assert check.affine_counter([1]) is False
    assert "1 offset with no affine map is missing" in _out(capsys)


def test_affine_counter_rejects_bad_formats(capsys):
    assert check.affine_counter({"wrap": [1, 3]}) is False
    assert "list of offsets from [1, 2, 3]" in _out(capsys)
    assert check.affine_counter([1, 4]) is False
    assert check.affine_counter("13") is False
    assert check.affine_counter([True]) is False
    assert check.affine_counter([1.5]) is False
    assert check.affine_counter(None) is None
    assert "not attempted yet" in _out(capsys)


def test_no_affine_offsets_by_the_square_and_by_construction():
    """The keyed answer, from the argument the exercise wants (not from least squares)."""
    p = {i: torch.tensor([i >> 1 & 1, i & 1], dtype=torch.float64) for i in range(4)}
    torch.testing.assert_close(p[0] + p[3], p[1] + p[2])  # the square: any affine f keeps this balance
    balanced = [k for k in (1, 2, 3) if torch.equal(p[k % 4] + p[(3 + k) % 4], p[(1 + k) % 4] + p[(2 + k) % 4])]
    assert balanced == [2]  # k = 1 and 3 break it: no affine map
    flip_bit_1 = lambda q: torch.tensor([1 - q[0], q[1]], dtype=torch.float64)  # affine: M = diag(-1, 1), b = [1, 0]
    assert all(torch.equal(flip_bit_1(p[i]), p[(i + 2) % 4]) for i in range(4))
    assert check.ch02.no_affine_offsets(wrap=True) == RIGHT_WRAP
    assert check.ch02.no_affine_offsets(wrap=False) == []
    assert check.ch02.no_affine_offsets(wrap=True, d=6) == [k for k in range(1, 64) if k != 32]


# --- exercise 2: exact_offsets ---------------------------------------------------------------
def offsets_by_rule(d):
    """The offsets that leave 2^a or 3 * 2^a pairs (written here from the argument, not from the checker)."""
    left = [2**a for a in range(d)] + [3 * 2**a for a in range(d - 1)]
    return sorted(2**d - n for n in left)


def offsets_by_bits(d):
    """The same rule read off the bits: k's complement 2^d - k has at most two one-bits, and two only side by side."""
    out = []
    for k in range(1, 2**d):
        n = 2**d - k
        low = n & -n  # the lowest set bit
        if n in (low, 3 * low):
            out.append(k)
    return np.array(out)  # a numpy array of whole numbers


def test_exact_offsets_rule_against_least_squares():
    """Independent of the checker: least squares on the table finds exactly the rule's offsets, d = 3 .. 10."""
    for d in range(3, 11):
        table = pl.binary_positions(2**d, d, dtype=torch.float64)
        fits = [k for k in range(1, 2**d) if pl.affine_shift_residual(table, k) < 1e-9]
        assert fits == offsets_by_rule(d) == offsets_by_bits(d).tolist(), d
    assert offsets_by_rule(6) == [16, 32, 40, 48, 52, 56, 58, 60, 61, 62, 63]  # §4's list
    assert all(len(offsets_by_rule(d)) == 2 * d - 1 for d in range(2, 61))


def test_exact_offsets_accepts_the_rule_in_several_forms(capsys):
    assert check.exact_offsets(offsets_by_rule) is True
    assert "all correct!" in _out(capsys)
    assert check.exact_offsets(lambda d: tuple(reversed(offsets_by_rule(d)))) is True  # any order, a tuple
    assert check.exact_offsets(lambda d: torch.tensor(offsets_by_rule(d))) is True  # a tensor of int64


def test_exact_offsets_names_typical_mistakes_without_the_list(capsys):
    def powers_only(d):  # sources that fill a block of low bits, and nothing else
        return sorted(2**d - 2**a for a in range(d))

    def counter(d):  # the wrap-around answer
        return [2 ** (d - 1)]

    def from_first_on(d):  # "every offset from 2^(d-2) on": the table's edge taken too far
        return list(range(2 ** (d - 2), min(2**d, 2 ** (d - 2) + 64)))

    def measured(d):  # least squares on the table: fine for small d, impossible at d = 60
        table = pl.binary_positions(2**d, d, dtype=torch.float64)
        return [k for k in range(1, 2**d) if pl.affine_shift_residual(table, k) < 1e-9]

    def enumerate_offsets(d):  # the rule tested offset by offset: 2^60 of them
        return [k for k in range(1, 2**d) if (2**d - k) in {(2**d - k) & -(2**d - k), 3 * ((2**d - k) & -(2**d - k))}]

    for wrong, says in ((powers_only, "misses 2 offsets"), (counter, "wraps around"),
                        (from_first_on, "offsets with no exact map"),
                        (lambda d: offsets_by_rule(d) + [1], "below 2^(d-2)"),
                        (measured, "calls pl.binary_positions"), (enumerate_offsets, "tries the offsets one by one"),
                        (lambda d: "16", "list of whole offsets")):
        assert check.exact_offsets(wrong) is False
        out = _out(capsys)
        assert says in out and "hint:" in out, out
        assert "3 * 2" not in out and "2^a" not in out and "[16, 32" not in out  # neither the rule nor the list
    assert torch.linalg.lstsq is not None and pl.binary_positions(2, 1).shape == (2, 1)  # the patches are gone
    assert check.exact_offsets(None) is None


# --- exercise 3: one_bit_steps ---------------------------------------------------------------
def gray(n, d):
    i = torch.arange(n)
    g = i ^ (i >> 1)
    return ((g[:, None] >> torch.arange(d - 1, -1, -1)) & 1).float()


def test_one_bit_steps_accepts_a_gray_code_in_several_forms(capsys):
    assert check.one_bit_steps(gray) is True
    out = _out(capsys)
    assert "all correct!" in out and "still no fixed affine map" in out
    assert check.one_bit_steps(lambda n, d: gray(n, d).int().tolist()) is True
    assert check.one_bit_steps(lambda n, d: gray(n, d).numpy()) is True


def test_one_bit_steps_names_typical_mistakes(capsys):
    assert check.one_bit_steps(pl.binary_positions) is False  # counting in binary
    out = _out(capsys)
    assert "carries" in out and "i ^ (i >> 1)" not in out and "gray" not in out.lower()
    assert check.one_bit_steps(lambda n, d: gray(n, d) * 2) is False
    assert "other than 0 and 1" in _out(capsys)
    assert check.one_bit_steps(lambda n, d: torch.cat([gray(n - 1, d), gray(1, d)])) is False  # back to the start
    assert "the same code" in _out(capsys)
    assert check.one_bit_steps(lambda n, d: gray(n, d)[:, 1:]) is False
    assert "shape" in _out(capsys)
    assert check.one_bit_steps(None) is None


# --- exercise 4: sin_step --------------------------------------------------------------------
def right_step(d, base):
    theta = pl.rope_frequencies(d, base=base, dtype=torch.float64)
    return 2 * torch.sin(theta / 2).pow(2).sum().sqrt()


def test_sin_step_accepts_the_closed_form_in_several_forms(capsys):
    assert check.sin_step(right_step) is True
    assert "all correct!" in _out(capsys)
    assert check.sin_step(lambda d, b: float(right_step(d, b))) is True
    assert check.sin_step(lambda d, b: right_step(d, b).numpy()) is True  # a 0-d array
    thetas = lambda d, b: pl.rope_frequencies(d, base=b, dtype=torch.float64)  # noqa: E731
    assert check.sin_step(lambda d, b: (2 - 2 * torch.cos(thetas(d, b))).sum().sqrt()) is True  # same, unsimplified


def test_sin_step_fact_against_the_table():
    """Independent of the checker: the closed form equals every step of a long table."""
    for d, base in ((6, 10000.0), (64, 10000.0), (16, 100.0)):
        table = pl.sinusoidal_positions(300, d, base=base, dtype=torch.float64)
        steps = (table[1:] - table[:-1]).norm(dim=-1)
        torch.testing.assert_close(steps, torch.full_like(steps, float(right_step(d, base))))


def test_sin_step_refuses_a_measurement(capsys):
    """The step measured on a table, or on codes made by rotating a vector, is not the derivation."""
    measured = lambda d, b: pl.sinusoidal_positions(2, d, base=b, dtype=torch.float64).diff(dim=0).norm()  # noqa: E731
    rotated = lambda d, b: (pl.apply_rope(torch.ones(1, d, dtype=torch.float64), torch.tensor([1]), base=b)  # noqa: E731
                            - torch.ones(1, d, dtype=torch.float64)).norm() / 2**0.5
    for wrong, says in ((measured, "calls pl.sinusoidal_positions"), (rotated, "calls pl.apply_rope")):
        assert check.sin_step(wrong) is False
        out = _out(capsys)
        assert says in out and "derive it" in out
    assert pl.sinusoidal_positions(2, 4).shape == (2, 4)  # the library works again
    assert check.sin_step(lambda d, b: float(right_step(d, b))) is True  # pl.rope_frequencies stays allowed


def test_sin_step_names_typical_mistakes(capsys):
    thetas = lambda d, b: pl.rope_frequencies(d, base=b, dtype=torch.float64)  # noqa: E731
    assert check.sin_step(lambda d, b: (1 - torch.cos(thetas(d, b))).sum().sqrt()) is False  # one coordinate
    out = _out(capsys)
    assert "1/√2 of the distance" in out and "sin(" not in out and "chord" not in out and "circle" not in out
    assert check.sin_step(lambda d, b: right_step(d, b) ** 2) is False
    assert "squared distance" in _out(capsys)
    assert check.sin_step(lambda d, b: (d / 2) ** 0.5 * 2 * torch.sin(thetas(d, b)[0] / 2)) is False  # all pairs fast
    assert "every pair as the fastest" in _out(capsys)
    assert check.sin_step(lambda d, b: 1.0) is False
    out = _out(capsys)
    assert "not the distance" in out
    for d, b in check.ch02.STEP_CASES:
        assert f"{float(right_step(d, b)):.3f}" not in out  # the value is never printed
    assert check.sin_step(lambda d, b: [1.0, 2.0]) is False
    assert "one number" in _out(capsys)
    assert check.sin_step(None) is None
