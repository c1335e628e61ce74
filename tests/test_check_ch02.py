"""Chapter 2 checkers: right answers pass in several forms, typical wrong ones are told their
misconception without the answer, unattempted ones say so."""
import itertools
import math
import random

import mpmath
import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def _out(capsys):
    return capsys.readouterr().out


# --- exercise 1: carry_witness ---------------------------------------------------------------
def witness(d, k):
    """Written here from the argument: the bits below k's lowest set bit L never change and carry nothing, so a
    witness needs two bits from L's on; sources 0, L, 2L, 3L use them in all four patterns and balance, and the
    carry of K + 1 or K + 2 (K = k / L, odd) falls on one side only. No smaller witness exists."""
    low = k & -k
    return (0, 3 * low, low, 2 * low)


def other_smallest(d, k):
    """Another smallest witness: below L the four may hold any balanced low bits (here bit 0 on both sides)."""
    low = k & -k
    return (1, 3 * low, low + 1, 2 * low) if low > 1 else (0, 3, 1, 2)


def _bits(x, y, d):
    return [(x >> t & 1) + (y >> t & 1) for t in range(d)]


def _is_witness(quad, d, k):
    a, b, c, e = quad
    return (sorted((a, b)) != sorted((c, e)) and _bits(a, b, d) == _bits(c, e, d)
            and _bits(a + k, b + k, d) != _bits(c + k, e + k, d))


def test_carry_witness_fact_on_the_tables():
    """Independent of the checker: on the library's tables for d = 4 .. 9 and every k < 2^(d-2), the witness
    balances and its images do not, and least squares agrees that no affine map exists; for d <= 6 a search
    over every four positions finds no witness whose largest position is smaller."""
    for d in range(4, 10):
        table = pl.binary_positions(2**d, d, dtype=torch.float64)
        for k in range(1, 2 ** (d - 2)):
            a, b, c, e = witness(d, k)
            assert max(a, b, c, e) + k < 2**d
            torch.testing.assert_close(table[a] + table[b], table[c] + table[e])
            assert not torch.equal(table[a + k] + table[b + k], table[c + k] + table[e + k]), (d, k)
            assert pl.affine_shift_residual(table, k) > 1e-6
            assert _is_witness(other_smallest(d, k), d, k) and max(other_smallest(d, k)) == max(a, b, c, e)
    for d in range(4, 7):
        for k in range(1, 2 ** (d - 2)):
            below = max(witness(d, k))
            assert not any(_is_witness(q, d, k) for q in itertools.product(range(below), repeat=4)), (d, k)


def test_carry_witness_accepts_a_smallest_witness_in_several_forms(capsys):
    for right in (witness, other_smallest, lambda d, k: list(witness(d, k)),
                  lambda d, k: np.array(witness(d, k), dtype=np.int64),
                  lambda d, k: witness(d, k)[2:] + witness(d, k)[:2]):  # the two sides swapped
        assert check.carry_witness(right) is True
        out = _out(capsys)
        assert "all correct!" in out and "the smallest for every offset" in out


def test_carry_witness_refuses_a_measurement_and_a_search(capsys):
    """The table and least squares (what section 4 used), and a blind search over small positions."""
    def measured(d, k):
        table = pl.binary_positions(2**d, d)
        return (0, 3, 1, 2) if table is not None else None

    def fitted(d, k):
        torch.linalg.lstsq(torch.eye(2), torch.eye(2))
        return witness(d, k)

    def search(d, k):  # every quadruple below 16, smallest largest position first
        for top in range(16):
            for quad in itertools.product(range(top + 1), repeat=4):
                if max(quad) == top and _is_witness(quad, d, k):
                    return quad
        return 0, 0, 0, 0

    for shortcut, says in ((measured, "calls pl.binary_positions"), (fitted, "calls torch.linalg.lstsq"),
                           (search, "searches too long")):
        assert check.carry_witness(shortcut) is False
        out = _out(capsys)
        assert says in out and "hint:" in out, out
    assert pl.binary_positions(2, 1).shape == (2, 1) and torch.linalg.lstsq is not None  # the patches are gone


def test_carry_witness_refuses_a_witness_found_by_generate_and_test(capsys):
    """The shortcut of the first cold read: random disjoint X, Y give (X, Y, X | Y, 0), balanced by
    construction; keep the first whose images do not balance. A proof, found without a thought about carries,
    and not the smallest one."""
    def generate_and_test(d, k):
        rng = random.Random(d * 1000 + k)
        while True:
            x = rng.randrange(2**d - k)
            y = rng.randrange(2**d - k) & ~x
            quad = (x, y, x | y, 0)
            if max(quad) + k < 2**d and _is_witness(quad, d, k):
                return quad

    assert check.carry_witness(generate_and_test) is False
    out = _out(capsys)
    assert "a witness for all 11 offsets" in out and "not the smallest" in out, out
    assert "lowest" not in out and "3 * " not in out and "multiple" not in out


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
    (lambda d, k: (4, 7, 5, 6) if k % 2 else witness(d, k), "not the smallest"),  # moved up by 4: valid, larger
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
def _offsets_up_to(n, factor):
    """The offsets k < n with n - k <= factor * L (L: k's lowest set bit), listed without trying every k: for each
    L, the odd multiples of L in [n - factor * L, n)."""
    out = []
    for a in range(n.bit_length()):
        low = 2**a
        m = max(1, -(-(n - factor * low) // low))
        m += 1 - m % 2  # odd
        while m * low < n:
            out.append(m * low)
            m += 2
    return sorted(out)


def offsets_by_rule(n):
    """Written here from the argument: adding k = L * K (L its lowest set bit, K odd) copies the bits below L and
    adds K to the rest, so only the sources' values from L's bit on matter: the n - k sources 0 .. n - k - 1 give
    ceil((n - k) / L) of them. Up to three (not on one line) an affine map fits; four hold Exercise 1's witness.
    So k fits iff n - k <= 3L."""
    return _offsets_up_to(n, 3)


def offsets_by_trying(n):
    """The same rule, offset by offset (fine for short tables)."""
    return [k for k in range(1, n) if n - k <= 3 * (k & -k)]


def test_exact_offsets_rule_against_least_squares():
    """Independent of the checker: least squares on the table of the first n positions finds exactly the rule's
    offsets, n = 2 .. 100 (one width more changes nothing); for n = 2^d, the 2d - 1 offsets of section 4."""
    for n in range(2, 101):
        width = (n - 1).bit_length()
        for d in (width, width + 1):
            table = pl.binary_positions(n, max(d, 1), dtype=torch.float64)
            fits = [k for k in range(1, n) if pl.affine_shift_residual(table, k) < 1e-9]
            assert fits == offsets_by_rule(n) == offsets_by_trying(n), n
    assert offsets_by_rule(64) == [16, 32, 40, 48, 52, 56, 58, 60, 61, 62, 63]  # §4's list
    assert all(len(offsets_by_rule(2**d)) == 2 * d - 1 for d in range(2, 61))


def test_exact_offsets_accepts_the_rule_in_several_forms(capsys):
    assert check.exact_offsets(offsets_by_rule) is True
    assert "all correct!" in _out(capsys)
    assert check.exact_offsets(lambda n: tuple(reversed(offsets_by_rule(n)))) is True  # any order, a tuple
    assert check.exact_offsets(lambda n: torch.tensor(offsets_by_rule(n))) is True  # a tensor of int64
    assert check.exact_offsets(lambda n: set(offsets_by_rule(n))) is True


def _exact_as_64(n):
    """Section 4's list read as a pattern: n - k is a power of two or three times one."""
    return sorted({n - m for a in range(n.bit_length()) for m in (2**a, 3 * 2**a) if 1 <= n - m < n})


@pytest.mark.parametrize("wrong, says", [
    (_exact_as_64, "64-row table"),  # read off section 4's printed list: right for n = 64 only
    (lambda n: _offsets_up_to(n, 2), "under-count"),  # two points fit, three are not believed to
    (lambda n: _offsets_up_to(n, 4), "Exercise 1's kind"),  # four patterns taken to fit as well
    (lambda n: offsets_by_rule(n) if n < 1000 else offsets_by_rule(n)[1:], "pattern read off small tables"),
    (lambda n: offsets_by_rule(n)[1:], "not the list least squares finds on the 5-row table"),
    (lambda n: offsets_by_rule(n) + [n], "outside 1 .. N - 1"),
    (lambda n: "16", "list of whole offsets"),
])
def test_exact_offsets_names_typical_mistakes_without_the_list(wrong, says, capsys):
    assert check.exact_offsets(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    assert "3L" not in out and "lowest" not in out and "<=" not in out and "[1" not in out  # neither rule nor list


def test_exact_offsets_refuses_a_measurement_and_a_loop(capsys):
    def measured(n):  # least squares on the table: fine for short tables, impossible at n = 2^60
        table = pl.binary_positions(n, (n - 1).bit_length(), dtype=torch.float64)
        return [k for k in range(1, n) if pl.affine_shift_residual(table, k) < 1e-9]

    def fitted(n):
        np.linalg.lstsq(np.eye(2), np.eye(2), rcond=None)
        return offsets_by_rule(n)

    for shortcut, says in ((measured, "calls pl.binary_positions"), (fitted, "calls numpy.linalg.lstsq"),
                           (offsets_by_trying, "tries the offsets one by one")):
        assert check.exact_offsets(shortcut) is False
        out = _out(capsys)
        assert says in out and "hint:" in out, out
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
def growth_mpmath(base):
    """Written here from the derivation: pair j moves along a chord of its circle, squared length 2 - 2 cos θ_j,
    the same for every i; the θ_j = base^(-t), t = 2j/d, fill [0, 1) evenly as d grows, so the squared step is
    (d / 2) times the mean of 2 - 2 cos base^(-t): ||p_(i+1) - p_i||^2 / d -> ∫_0^1 (1 - cos base^(-t)) dt."""
    mpmath.mp.dps = 30
    return float(mpmath.sqrt(mpmath.quad(lambda t: 1 - mpmath.cos(mpmath.power(base, -t)), [0, 1])))


def growth_simpson(base, points=200_001):
    """The same integral by Simpson's rule in float64 torch: what a learner without mpmath writes."""
    t = torch.linspace(0, 1, points, dtype=torch.float64)
    f = 1 - torch.cos(base**-t)
    return (f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()).div(3 * (points - 1)).sqrt()


def step_at_width(base, d):
    """||p_1 - p_0|| / sqrt(d), built by hand from the formula (no library builder): the measurement."""
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    rows = torch.cat([torch.sin(torch.tensor([[0.0], [1.0]], dtype=torch.float64) * theta),
                      torch.cos(torch.tensor([[0.0], [1.0]], dtype=torch.float64) * theta)], -1)
    return float((rows[1] - rows[0]).norm() / d**0.5)


def test_step_growth_fact_against_the_tables():
    """Independent of the checker: the library's tables, two rows at widths 2^10 .. 2^18, approach the limit,
    the gap shrinking like 1/d; every step of a table is the same (the chord does not depend on i)."""
    for base in (10000.0, 100.0):
        limit = growth_mpmath(base)
        gaps = []
        for d in (2**10, 2**14, 2**18):
            table = pl.sinusoidal_positions(3, d, base=base, dtype=torch.float64)
            steps = (table[1:] - table[:-1]).norm(dim=-1) / d**0.5
            torch.testing.assert_close(steps[0], steps[1])
            gaps.append(float(steps[0]) - limit)
        assert all(0 < gap for gap in gaps) and 10 < gaps[0] / gaps[1] < 20 and 10 < gaps[1] / gaps[2] < 20
        assert abs(float(growth_simpson(base)) - limit) < 1e-13


def test_step_growth_accepts_the_limit_in_several_forms(capsys):
    for right in (growth_mpmath, growth_simpson, lambda b: growth_simpson(b).numpy(), lambda b: float(growth_simpson(b)),
                  lambda b: torch.trapezoid(1 - torch.cos(b ** -torch.linspace(0, 1, 10**6 + 1, dtype=torch.float64)),
                                            dx=1e-6).sqrt()):
        assert check.sin_step(right) is True
        out = _out(capsys)
        assert "all correct!" in out
        assert f"{growth_mpmath(10000.0):.4f}" not in out


def test_step_growth_refuses_a_measurement(capsys):
    """The library's table, and a step built by hand at one width as wide as memory allows (d = 2^22): close,
    but not the limit to eleven decimals."""
    from_table = lambda b: float(pl.sinusoidal_positions(2, 4096, base=b, dtype=torch.float64).diff(dim=0).norm()) / 64  # noqa: E731
    rotated = lambda b: float((pl.apply_rope(torch.ones(1, 64, dtype=torch.float64), torch.tensor([1]), base=b)  # noqa: E731
                               - torch.ones(1, 64, dtype=torch.float64)).norm()) / 2**0.5 / 8
    for wrong, says in ((from_table, "calls pl.sinusoidal_positions"), (rotated, "calls pl.apply_rope")):
        assert check.sin_step(wrong) is False
        out = _out(capsys)
        assert says in out and "derive the limit" in out, out
    assert check.sin_step(lambda b: step_at_width(b, 2**22)) is False
    out = _out(capsys)
    assert "close, but not the limit" in out and "hint:" in out, out
    assert pl.sinusoidal_positions(2, 4).shape == (2, 4)  # the library works again
    assert check.sin_step(lambda b: float(growth_simpson(b))) is True  # pl.rope_frequencies and torch stay allowed


@pytest.mark.parametrize("wrong, says", [
    (lambda b: growth_mpmath(b) ** 2, "square of the growth"),
    (lambda b: growth_mpmath(b) / 2**0.5, "1/√2 of the growth"),  # one coordinate per pair
    (lambda b: growth_mpmath(b) * 2**0.5, "counts the pairs"),  # the limit of step / sqrt(d / 2)
    (lambda b: (1 - math.cos(1)) ** 0.5, "every pair as the fastest"),
    (lambda b: 1.0, "not the growth"),
    (lambda b: [1.0, 2.0], "one number"),
    (lambda b: float("nan"), "one number"),
])
def test_step_growth_names_typical_mistakes_without_the_value(wrong, says, capsys):
    assert check.sin_step(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    for base in check.ch02.GROWTH_BASES:
        assert f"{growth_mpmath(base):.3f}" not in out  # the value is never printed
    assert "cos θ" not in out and "∫" not in out and "integral" not in out


def test_step_growth_unattempted(capsys):
    assert check.sin_step(None) is None
    assert "not attempted yet" in _out(capsys)


# --- the answer key -------------------------------------------------------------------------
def test_the_checker_module_hands_over_no_answer():
    """No constant of check.ch02 equals an answer, and none of its functions returns one (called with
    nothing, a flag, a width and offset, a length or a base): the far lengths' lists, the smallest witnesses'
    largest positions and the growth are sealed, the short tables measured inside the checker, the witness and
    the code checked by their properties."""
    from _hands_over import held_answers

    cases, lengths = check.ch02.WITNESS_CASES, check.ch02.OFFSET_N_MEASURED + check.ch02.OFFSET_N_FAR
    answers = [[max(witness(d, k)) for d, k in cases]] + [witness(d, k) for d, k in cases]
    answers += [max(witness(d, k)) for d, k in cases if k > 2**8]
    answers += [offsets_by_rule(n) for n in lengths] + [set(offsets_by_rule(n)) for n in lengths]
    answers += [growth_mpmath(b) for b in check.ch02.GROWTH_BASES]
    answers += [[growth_mpmath(b) for b in check.ch02.GROWTH_BASES]]
    calls = [(), (True,), (False,)] + list(cases) + [(n,) for n in lengths] + [(b,) for b in check.ch02.GROWTH_BASES]
    assert held_answers(check.ch02, answers, calls) == []
