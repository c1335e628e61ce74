"""Chapter 2 checkers: right answers pass in several forms, typical wrong ones are told their
misconception without the answer, unattempted ones say so."""
import itertools
import math
from fractions import Fraction

import numpy as np
import pytest
import sympy
import torch

import posenc_lib as pl
from posenc_lib import check


def _out(capsys):
    return capsys.readouterr().out


# --- exercise 1: exact_offsets ---------------------------------------------------------------
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
    ceil((n - k) / L) of them. Up to three (distinct corners of a cube, never on one line) an affine map fits;
    four hold section 4's square. So k fits iff n - k <= 3L."""
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


def _off_by_one_at_the_boundary(n):
    """The rule with a strict inequality, n - k < 3L: the offsets with n - k = 3L left out."""
    return [k for k in offsets_by_rule(n) if n - k != 3 * (k & -k)]


def _sources_rounded_down(n):
    """A second route to the same list: the sources counted as floor((n - k) / L) instead of rounded up."""
    return [k for k in offsets_by_rule(n) if (n - k) // (k & -k) <= 2]


def test_the_boundary_answers_differ_from_the_rule():
    """The two boundary mistakes give one list; it is wrong on short tables (not only far away), and at n = 100 it
    is not the list of "too few points" (n - k <= 2L), which it equals at 12, 40 and 64."""
    for n in (5, 12, 23, 40, 64, 100, 1_000_003, 2**60):
        assert _off_by_one_at_the_boundary(n) == _sources_rounded_down(n), n
        assert (_off_by_one_at_the_boundary(n) != offsets_by_rule(n)) == (n in (12, 40, 64, 100, 2**60)), n
        assert (_off_by_one_at_the_boundary(n) != _offsets_up_to(n, 2)) == (n in (23, 100, 1_000_003)), n


def _exact_as_64(n):
    """Section 4's list read as a pattern: n - k is a power of two or three times one."""
    return sorted({n - m for a in range(n.bit_length()) for m in (2**a, 3 * 2**a) if 1 <= n - m < n})


@pytest.mark.parametrize("wrong, says", [
    (_exact_as_64, "64-row table"),  # read off section 4's printed list: right for n = 64 only
    (lambda n: _offsets_up_to(n, 2), "under-count"),  # two points fit, three are not believed to
    (lambda n: _offsets_up_to(n, 4), "section 4's square"),  # four patterns taken to fit as well
    (_off_by_one_at_the_boundary, "off-by-one at the boundary"),  # n - k < 3L
    (_sources_rounded_down, "off-by-one at the boundary"),  # the sources counted rounded down: the same list
    (lambda n: list(range(2 ** ((n - 1).bit_length() - 2), n)), "not that every offset from there on"),  # §4's bound
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


@pytest.mark.parametrize("factor, says", [(2, "under-count"), (4, "section 4's square")])
def test_exact_offsets_names_a_wrong_rule_even_written_as_a_loop(factor, says, capsys):
    """A wrong rule tried offset by offset is wrong on the short tables already: it gets the misconception's name,
    as the same rule without a loop does, not the loop's message (which a right rule in a loop gets)."""
    assert check.exact_offsets(lambda n: [k for k in range(1, n) if n - k <= factor * (k & -k)]) is False
    out = _out(capsys)
    assert says in out and "runs out of steps" not in out and "hint:" in out, out


def test_exact_offsets_refuses_a_measurement_and_a_loop(capsys):
    def measured(n):  # least squares on the table: fine for short tables, impossible at n = 2^60
        table = pl.binary_positions(n, (n - 1).bit_length(), dtype=torch.float64)
        return [k for k in range(1, n) if pl.affine_shift_residual(table, k) < 1e-9]

    def fitted(n):
        np.linalg.lstsq(np.eye(2), np.eye(2), rcond=None)
        return offsets_by_rule(n)

    for shortcut, says in ((measured, "calls pl.binary_positions"), (fitted, "calls numpy.linalg.lstsq"),
                           (offsets_by_trying, "runs out of steps at N = ")):
        assert check.exact_offsets(shortcut) is False
        out = _out(capsys)
        assert says in out and "hint:" in out, out
    assert torch.linalg.lstsq is not None and pl.binary_positions(2, 1).shape == (2, 1)  # the patches are gone
    assert check.exact_offsets(None) is None


def _table_by_hand(n):
    """The binary code of the first n positions, built without the library: (n, bits) float64."""
    bits = max((n - 1).bit_length(), 1)
    return ((torch.arange(n)[:, None] >> torch.arange(bits - 1, -1, -1)) & 1).double()


def _fits_by_svd(n):
    """Each offset tested by hand: the pairs' targets lie in the span of [p_i, 1] exactly when projecting them on the
    left singular vectors of [p_i, 1] leaves nothing (no library fit, no least squares)."""
    table, out = _table_by_hand(n), []
    for k in range(1, n):
        sources = torch.cat([table[:-k], torch.ones(n - k, 1, dtype=torch.float64)], 1)
        u, s, _ = torch.linalg.svd(sources, full_matrices=False)
        u = u[:, s > 1e-9 * s[0]]
        if (table[k:] - u @ (u.T @ table[k:])).norm() < 1e-9:
            out.append(k)
    return out


def test_exact_offsets_refuses_a_fit_tested_by_hand_fast(capsys):
    """r23 finding 1: the table built by hand and each fit tested by an SVD passes the short tables unless refused,
    and one SVD of the table at N = 1 000 003 takes seconds: it is refused by name, and a table built by hand is
    stopped by the element budget at the first far length, both within seconds; the rule still passes."""
    import time

    assert _fits_by_svd(100) == offsets_by_rule(100)  # the shortcut is right where it can run
    for shortcut, says in ((_fits_by_svd, "calls torch.linalg.svd"),
                           (lambda n: [k for k in range(1, n) if torch.linalg.matrix_rank(_table_by_hand(3)) > 9],
                            "calls torch.linalg.matrix_rank"),
                           (lambda n: (_table_by_hand(n), offsets_by_rule(n))[1],  # right on the short tables
                            "fn(1000003) creates more than 20,000 tensor or array elements")):
        start = time.perf_counter()
        assert check.exact_offsets(shortcut) is False
        assert time.perf_counter() - start < 10
        out = _out(capsys)
        assert says in out and "hint:" in out, out
    assert torch.linalg.svd is not None and torch.linalg.svd(torch.eye(2))[1].tolist() == [1.0, 1.0]  # restored
    assert check.exact_offsets(offsets_by_rule) is True


# --- exercise 2: bit_counter (a bit counter with one fixed affine map) --------------------
def counter(d):
    """Written here by iterating the map: shift every bit one column to the right and put the complement of the
    last bit into the first column, p -> (1 - p[d-1], p[0], ..., p[d-2]), from the zeros, 2d times."""
    rows = [[0] * d]
    for _ in range(2 * d - 1):
        last = rows[-1]
        rows.append([1 - last[-1]] + last[:-1])
    return rows


def gray(n, d):
    i = torch.arange(n)
    g = i ^ (i >> 1)
    return ((g[:, None] >> torch.arange(d - 1, -1, -1)) & 1).float()


def cyclic_gray(d):
    """A one-bit cycle of 2d codes with no affine map from d = 4 on: the first d and the last d codes of the
    reflected Gray code in m = ceil(log2 2d) bits (they meet, and wrap, in one flip of the top bit), in d columns."""
    m = max(2, (2 * d - 1).bit_length())
    codes = gray(2**m, m)
    rows = torch.cat([codes[:d], codes[2**m - d:]])
    return torch.cat([torch.zeros(2 * d, d - m), rows], 1)


def _step_residual(rows):
    t = torch.as_tensor(rows, dtype=torch.float64)
    return pl.affine_shift_residual(torch.cat([t, t[:1]]), 1)


def test_counter_fact_on_the_tables():
    """Independent of the checker: the counter has 2d distinct rows, one flip per step (wrapping around too), an
    exact affine map (least squares), and that map is the signed cyclic shift, a rotation about the centre. A
    search over every one-bit walk with an exact map finds none longer than 2d for d = 2, 3, 4."""
    for d in (2, 3, 4, 6, 9):
        t = torch.tensor(counter(d), dtype=torch.float64)
        cyc = torch.cat([t, t[:1]])
        assert torch.unique(t, dim=0).shape[0] == 2 * d and ((cyc[1:] != cyc[:-1]).sum(-1) == 1).all()
        assert _step_residual(t) < 1e-9
        shift = torch.zeros(d, d, dtype=torch.float64)
        shift[0, d - 1], shift[1:, :-1] = -1, torch.eye(d - 1, dtype=torch.float64)  # (1 - p[d-1], p[0], ...)
        torch.testing.assert_close((t - 0.5) @ shift.T, torch.roll(t, -1, 0) - 0.5)  # centred: a signed shift
    assert all(_step_residual(gray(2**d, d)) > 1 for d in (3, 4, 5))  # the Gray cycle has no map

    def longest(d):
        best = 0

        def extend(path):
            nonlocal best
            best = max(best, len(path))
            for bit in range(d):
                nxt = path[-1] ^ (1 << bit)
                if nxt in path or (len(path) == 1 and bit):
                    continue
                rows = [[x >> b & 1 for b in range(d)] for x in path + [nxt]]
                t = torch.tensor(rows, dtype=torch.float64)
                if pl.affine_shift_residual(t, 1) < 1e-9:
                    extend(path + [nxt])

        extend([0])
        return best

    assert [longest(d) for d in (2, 3, 4)] == [4, 6, 8]


def test_bit_counter_accepts_a_counter_in_several_forms(capsys):
    flipped = lambda d: [[1 - x for x in row] for row in counter(d)]  # noqa: E731  every bit complemented
    backwards = lambda d: counter(d)[::-1]  # noqa: E731  the same counter, run the other way
    permuted = lambda d: [row[::-1] for row in counter(d)]  # noqa: E731  the columns in the other order
    for right in (counter, flipped, backwards, permuted, lambda d: np.array(counter(d)),
                  lambda d: torch.tensor(counter(d), dtype=torch.int64)):
        assert check.bit_counter(right) is True
        out = _out(capsys)
        assert "all correct!" in out and "property 2" in out
    check.bit_counter(counter)
    assert "is a rotation" in _out(capsys)


@pytest.mark.parametrize("wrong, says", [
    (lambda d: pl.binary_positions(2 * d, d), "flip more than one bit"),  # counting in binary: carries
    (lambda d: gray(2 * d, d), "the last row and the first differ"),  # the textbook Gray code, cut at 2d rows
    (cyclic_gray, "no one affine map"),  # a one-bit cycle of 2d codes that is not one map (from d = 4 on)
    (lambda d: counter(d)[: d + 1] + counter(d)[d - 1:0:-1], "the same code"),  # fill, then empty backwards
    (lambda d: counter(d)[: d + 1], "shape"),  # the fill alone: d + 1 rows
    (lambda d: [[2 * x for x in row] for row in counter(d)], "other than 0 and 1"),
])
def test_bit_counter_names_the_misconception(wrong, says, capsys):
    assert check.bit_counter(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    assert "1 - x" not in out and "shift" not in out and "johnson" not in out.lower()


def test_bit_counter_names_a_search(capsys):
    """A search over which bit each step flips, kept if the cycle has one affine map: fine for d = 2, out of reach
    long before d = 40; the step budget names it instead of hanging."""
    def searched(d):
        for flips in itertools.product(range(d), repeat=2 * d):
            rows = [[0] * d]
            for bit in flips[:-1]:
                rows.append(rows[-1].copy())
                rows[-1][bit] = 1 - rows[-1][bit]
            ends = sum(x != y for x, y in zip(rows[0], rows[-1])) == 1 and flips[-1] == next(
                b for b in range(d) if rows[0][b] != rows[-1][b])
            if ends and len({tuple(r) for r in rows}) == 2 * d and _step_residual(rows) < 1e-9:
                return rows
        return None

    assert check.bit_counter(searched) is False
    out = _out(capsys)
    assert "runs out of steps" in out and "searches for the table" in out and "hint:" in out, out


def test_bit_counter_unattempted(capsys):
    assert check.bit_counter(None) is None
    assert "not attempted yet" in _out(capsys)


# --- exercise 3: gray_wave (a Gray bit as the sign of one sine) ------------------------------------
def gray_bit_wave(k):
    """Written here from the argument: Gray bit k = bit k XOR bit k + 1 reads 0 1 1 0 by quarters of bit k + 1's
    period 2^(k+2), so it is bit k + 1 of i + 2^k: section 5's sine of bit k + 1, moved by 2^k."""
    return 2 ** (k + 2), 2**k + sympy.Rational(1, 2)


def test_gray_wave_fact_against_the_code():
    """Independent of the checker: the wave, evaluated in float64 with math.sin, gives the Gray code's table
    (built from the library's binary table) for every position of 10 bits."""
    i = torch.arange(2**10)
    table = pl.binary_positions(2**10, 10)[i ^ (i >> 1)]  # column 9 - k holds Gray bit k
    for k in range(9):
        period, shift = gray_bit_wave(k)
        wave = torch.tensor([math.sin(2 * math.pi * (j + float(shift)) / int(period)) < 0 for j in range(2**10)])
        assert torch.equal(wave, table[:, 9 - k].bool())


def test_gray_wave_accepts_the_wave_in_several_forms(capsys):
    for right in (gray_bit_wave, lambda k: (2 ** (k + 2), 2**k + 0.5), lambda k: [2 ** (k + 2), 2**k + 0.25],
                  lambda k: (4 * 2**k, 2**k + Fraction(3, 4)), lambda k: (2.0 ** (k + 2), 2.0**k + 0.5),
                  lambda k: (2 ** (k + 2), 2**k + 0.5 + 3 * 2 ** (k + 2))):  # a whole number of periods later
        assert check.gray_wave(right) is True
        assert "all correct!" in _out(capsys)


@pytest.mark.parametrize("wrong, says", [
    (lambda k: (2 ** (k + 1), 0.5), "bit b of the binary code"),  # section 5's wave, copied
    (lambda k: (2 ** (k + 2), 0.5), "bit b + 1 of the binary code"),  # the right period, no shift
    (lambda k: (2 ** (k + 2), 3 * 2**k + 0.5), "opposite of the Gray bit"),  # half a period off: the sign
    (lambda k: (2 ** (k + 2), 2**k), "exactly 0"),  # the threshold on whole positions
    (lambda k: (2 ** (k + 2), 2**k + 0.5) if k < 4 else (2 ** (k + 2), 2**k - 0.5), "gets b as a symbol"),
    (lambda k: (3 * 2**k, 2**k), "does not give the Gray bit"),
    (lambda k: (2 ** (k + 1), 2**k / 2 + 0.5), "the period of bit b of the binary code"),  # binary's period, moved
    (lambda k: (-(2 ** (k + 1)), 0.25), "the period of bit b of the binary code"),
    (lambda k: (2 ** (k + 2), k**0.5), "rational numbers at every bit"),
    (lambda k: 2 ** (k + 2), "a pair (P, s)"),
    (lambda k: (0, 0.5), "a pair (P, s)"),
    (lambda k: (float("inf"), 0.5), "a pair (P, s)"),
    (lambda k: (2 ** (k + 2), math.floor(2**k) + 0.5), "gets b as a symbol"),  # needs the value of b
])
def test_gray_wave_names_typical_mistakes_without_the_answer(wrong, says, capsys):
    assert check.gray_wave(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    assert "2^(k+2)" not in out and "2^k + " not in out and "quarter" not in out  # neither the period nor the shift
    assert "fn(k)" not in out and "k <" not in out and "every k" not in out  # the bit is b: k names offsets


_OFF_BY_A_POWER_OF_TWO = "is not the period of Gray bit b"
_PI = "holds a factor π"


@pytest.mark.parametrize("wrong, says", [
    (lambda k: (2 ** (k + 3), 2**k + 0.5), _OFF_BY_A_POWER_OF_TWO),  # twice the period, the right shift
    (lambda k: (2 ** (k + 3), 0.5), _OFF_BY_A_POWER_OF_TWO),  # twice, no shift
    (lambda k: (2**k, 0.5), _OFF_BY_A_POWER_OF_TWO),  # a quarter
    (lambda k: (sympy.pi * 2 ** (k + 2), 2**k + 0.5), _PI),  # pi times the period, exactly
    (lambda k: (2 ** (k + 2) / sympy.pi, 2**k + 0.5), _PI),  # over pi: an angle per position
    (lambda k: (math.pi * 2 ** (k + 2), 2**k + 0.5), _PI),  # the float pi
    (lambda k: (2 ** (k + 2) / (2 * np.pi), 0.5), _PI),  # a frequency in turns: over 2 pi
    (lambda k: (math.pi * 2 ** (k + 1), 0.5), _PI),  # binary's period, times pi
])
def test_gray_wave_names_a_period_off_by_two_or_by_pi_without_the_answer(wrong, says, capsys):
    """r22 finding 2: a period off by a factor 2 (or any power of two) and one off by pi are named, neither the
    period nor the side it lies on; the right wave passes, and other wrong answers keep the generic message."""
    assert check.gray_wave(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    assert "does not give the Gray bit" not in out  # named, not the generic message
    assert "2^(b+2)" not in out and "2^b + " not in out and "quarter" not in out  # neither the period nor the shift
    for side in ("twice", "half", "factor 2", "factor of 2", "too long", "too short", "often", "longer", "shorter"):
        assert side not in out, side  # nor which way it is off
    assert check.gray_wave(gray_bit_wave) is True and "all correct!" in _out(capsys)


@pytest.mark.parametrize("wrong", [
    lambda k: (3 * 2**k, 2**k),  # not a power of two times the period
    lambda k: (2 ** (k + 2), 2 ** (k + 1) + 0.25),  # the right period, a shift that is not the Gray bit's
    lambda k: (2 ** (2 * k + 2), 0.5),  # a power of two, but off by another factor at every bit
    lambda k: (2 ** (k + 2) + 1, 2**k + 0.5),  # a period near the right one
])
def test_gray_wave_keeps_the_generic_message_for_other_wrong_periods(wrong, capsys):
    assert check.gray_wave(wrong) is False
    out = _out(capsys)
    assert "does not give the Gray bit" in out, out
    assert _OFF_BY_A_POWER_OF_TWO not in out and _PI not in out


def test_sympy_is_imported_only_by_the_function_that_needs_it():
    """r22 finding 5: SymPy comes with torch (which requires it), not with pyproject; check.ch02 imports it only
    inside the functions of Exercise 3, never at module level."""
    import ast
    import inspect

    tree = ast.parse(inspect.getsource(check.ch02))
    top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
    names = [alias.name for node in top_level for alias in node.names]
    names += [node.module or "" for node in top_level if isinstance(node, ast.ImportFrom)]
    assert not any(name.split(".")[0] == "sympy" for name in names), names
    assert "sympy" not in vars(check.ch02)


def test_gray_wave_feedback_of_two_different_wrong_answers_blames_only_what_each_shows(capsys):
    check.gray_wave(lambda k: (2 ** (k + 1), 0.5))
    copied = _out(capsys)
    check.gray_wave(lambda k: (2 ** (k + 3), 0.5))
    other = _out(capsys)
    assert "binary code" in copied and "binary code" not in other


def _gray_bit_of(i, k):
    return ((i ^ (i >> 1)) >> k) & 1


def test_gray_wave_refuses_a_search_at_the_bit_asked():
    """r19 finding 7: a guided search over 36 candidates (P = 2^b .. 2^(b+3), s = j 2^(b-1) + 1/2), each checked
    against the Gray bit at 48 positions, used to pass. The function now gets b as a symbol: no candidate can be
    compared with the bit at the b asked, so the search cannot run."""
    def searched(k):
        for p in range(4):
            for j in range(9):
                period, shift = 2 ** (k + p), Fraction(j * 2**k, 2) + Fraction(1, 2)
                if all((math.sin(2 * math.pi * float((i + shift) / period)) < 0) == bool(_gray_bit_of(i, k))
                       for i in range(48)):
                    return period, shift
        return None

    assert [searched(k) for k in (1, 2, 3)] == [gray_bit_wave(k) for k in (1, 2, 3)]  # concrete bits: it finds them
    assert check.gray_wave(searched) is False


def test_gray_wave_names_a_search_over_a_table(capsys):
    def searched(k):
        n = 2 ** (k + 3)
        bit = [_gray_bit_of(i, k) for i in range(n)]
        for period in range(1, n + 1):
            for quarter in range(4 * period):
                shift = Fraction(quarter, 4)
                if all((math.sin(2 * math.pi * float((i + shift) / period)) < 0) == bool(bit[i]) for i in range(n)):
                    return period, shift
        return None

    assert check.gray_wave(searched) is False
    out = _out(capsys)
    assert "gets b as a symbol" in out and "hint:" in out, out
    assert "2^(k+2)" not in out and "2^k + " not in out


def test_gray_wave_is_checked_past_any_table():
    """The formula is evaluated at b = 1000: a wave right for every bit up to 40 but not beyond fails."""
    assert check.ch02.GRAY_BITS[-1] == 1000
    assert check.gray_wave(lambda k: (2 ** (k + 2), 2**k + 0.5 + sympy.Heaviside(k - 41) * 2**k)) is False


def test_gray_wave_unattempted(capsys):
    assert check.gray_wave(None) is None
    assert "not attempted yet" in _out(capsys)


# --- the answer key -------------------------------------------------------------------------
def test_the_checker_module_hands_over_no_answer():
    """No constant of check.ch02 equals an answer, and none of its functions returns one (called with nothing,
    a flag, a length, a width, or a bit): the far lengths' lists are sealed, the short tables measured inside the
    checker, the counter checked by its properties, the Gray wave against the code's definition."""
    from _hands_over import held_answers

    lengths = check.ch02.OFFSET_N_MEASURED + check.ch02.OFFSET_N_FAR
    answers = [offsets_by_rule(n) for n in lengths] + [set(offsets_by_rule(n)) for n in lengths]
    answers += [pair for k in check.ch02.GRAY_BITS for pair in (gray_bit_wave(k), (2 ** (k + 2), 2**k + 0.5))]
    answers += [gray_bit_wave(sympy.Symbol("b", integer=True, nonnegative=True))]
    answers += [torch.tensor(counter(d), dtype=torch.float64) for d in check.ch02.COUNTER_WIDTHS]
    calls = [(), (True,), (False,)] + [(n,) for n in lengths] + [(d,) for d in check.ch02.COUNTER_WIDTHS]
    calls += [(k,) for k in check.ch02.GRAY_BITS]
    assert held_answers(check.ch02, answers, calls) == []
