"""Chapter 2 checkers: right answers pass in several forms, typical wrong ones are told their
misconception without the answer, unattempted ones say so."""
import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def _out(capsys):
    return capsys.readouterr().out


# --- exercise 1: carry_witness ---------------------------------------------------------------
def witness(d, k):
    """Written here from the argument: sources 0, L, 2L, 3L with L the lowest set bit of k balance, and the
    carry of K + 1 or K + 2 (K = k / L, odd) falls on one side only."""
    low = k & -k
    return (0, 3 * low, low, 2 * low)


def test_carry_witness_fact_on_the_tables():
    """Independent of the checker: on the library's tables for d = 4 .. 9 and every k < 2^(d-2), the witness
    balances and its images do not, and least squares agrees that no affine map exists."""
    for d in range(4, 10):
        table = pl.binary_positions(2**d, d, dtype=torch.float64)
        for k in range(1, 2 ** (d - 2)):
            a, b, c, e = witness(d, k)
            assert max(a, b, c, e) + k < 2**d
            torch.testing.assert_close(table[a] + table[b], table[c] + table[e])
            assert not torch.equal(table[a + k] + table[b + k], table[c + k] + table[e + k]), (d, k)
            assert pl.affine_shift_residual(table, k) > 1e-6


def test_carry_witness_accepts_a_witness_in_several_forms(capsys):
    for right in (witness, lambda d, k: list(witness(d, k)), lambda d, k: np.array(witness(d, k), dtype=np.int64),
                  lambda d, k: witness(d, k)[2:] + witness(d, k)[:2]):  # the two sides swapped
        assert check.carry_witness(right) is True
        assert "all correct!" in _out(capsys)


def test_carry_witness_refuses_a_measurement_and_a_search(capsys):
    """The table and least squares (what section 4 used), and a blind search over small positions."""
    def measured(d, k):
        table = pl.binary_positions(2**d, d)
        return (0, 3, 1, 2) if table is not None else None

    def fitted(d, k):
        torch.linalg.lstsq(torch.eye(2), torch.eye(2))
        return witness(d, k)

    def search(d, k):  # every quadruple below 16: fine for small k, hopeless once k has many trailing zeros
        bits = lambda x, y: [(x >> t & 1) + (y >> t & 1) for t in range(d)]  # noqa: E731
        for a in range(16):
            for b in range(16):
                for c in range(16):
                    for e in range(16):
                        if (sorted((a, b)) != sorted((c, e)) and bits(a, b) == bits(c, e)
                                and bits(a + k, b + k) != bits(c + k, e + k)):
                            return a, b, c, e
        return 0, 0, 0, 0

    for shortcut, says in ((measured, "calls pl.binary_positions"), (fitted, "calls torch.linalg.lstsq"),
                           (search, "searches too long")):
        assert check.carry_witness(shortcut) is False
        out = _out(capsys)
        assert says in out and "hint:" in out, out
    assert pl.binary_positions(2, 1).shape == (2, 1) and torch.linalg.lstsq is not None  # the patches are gone


def _right_then(wrong):
    """The witness for the first offsets, then `wrong` from the first k divisible by 4 on (the case (6, 4))."""
    return lambda d, k: witness(d, k) if k % 4 else wrong(d, k)


@pytest.mark.parametrize("wrong, says", [
    (_right_then(lambda d, k: (0, 3, 1, 2)), "carries nowhere"),  # the odd-k witness reused: k's low bits are 0
    (lambda d, k: (0, 3, 1, 2), "balanced too"),  # at k = 2 the carries fall on both sides alike
    (lambda d, k: (0, 1, 1, 0), "same two positions on both sides"),  # a balance every map keeps
    (lambda d, k: (0, 1, 2, 3), "not balanced"),  # p_0 + p_1 != p_2 + p_3
    (lambda d, k: (2**d - 1, 0, 0, 0), "partner in the table"),  # 2^d - 1 + k is past the end
    (lambda d, k: (0, 3, 1), "four positions"),
])
def test_carry_witness_names_the_misconception_without_a_witness(wrong, says, capsys):
    assert check.carry_witness(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    assert "lowest" not in out and "k & -k" not in out and "3 * " not in out


def test_carry_witness_unattempted(capsys):
    assert check.carry_witness(None) is None
    assert "not attempted yet" in _out(capsys)


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


# --- the answer key -------------------------------------------------------------------------
def test_the_checker_module_hands_over_no_answer():
    """No constant of check.ch02 equals an answer, and none of its functions returns one (called with
    nothing, a flag or a width): the far widths' lists are sealed, the near ones measured inside the checker,
    the witness and the code checked by their properties."""
    from _hands_over import held_answers

    answers = [offsets_by_rule(d) for d in (*range(3, 9), 20)] + [[1, 3]]
    answers += [float(right_step(d, b)) for d, b in check.ch02.STEP_CASES]
    calls = [(), (True,), (False,)] + [(d,) for d in range(3, 9)] + list(check.ch02.STEP_CASES)
    assert held_answers(check.ch02, answers, calls) == []
