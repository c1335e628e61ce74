"""Chapter 2 checkers: right answers pass in several forms, typical wrong ones are told their
misconception without the answer, unattempted ones say so."""
import math

import mpmath
import numpy as np
import pytest
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


def _exact_as_64(n):
    """Section 4's list read as a pattern: n - k is a power of two or three times one."""
    return sorted({n - m for a in range(n.bit_length()) for m in (2**a, 3 * 2**a) if 1 <= n - m < n})


@pytest.mark.parametrize("wrong, says", [
    (_exact_as_64, "64-row table"),  # read off section 4's printed list: right for n = 64 only
    (lambda n: _offsets_up_to(n, 2), "under-count"),  # two points fit, three are not believed to
    (lambda n: _offsets_up_to(n, 4), "section 4's square"),  # four patterns taken to fit as well
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


def test_bit_counter_unattempted(capsys):
    assert check.bit_counter(None) is None
    assert "not attempted yet" in _out(capsys)


# --- exercise 3: far_distance (how far apart positions k apart are, d -> infinity) -----------------
def distance_ci(k, base):
    """Written here from the derivation: pair j moves along a chord of squared length 2 - 2 cos(k θ_j), the pairs
    add, and as d grows ||p_k - p_0||^2 / d -> ∫_0^1 (1 - cos(k base^(-t))) dt; with u = k base^(-t) that is
    ∫_{k/base}^k (1 - cos u) / u du / ln base = 1 - (Ci(k) - Ci(k / base)) / ln base."""
    mpmath.mp.dps = 30
    k, base = mpmath.mpf(k), mpmath.mpf(base)
    return float(mpmath.sqrt(1 - (mpmath.ci(k) - mpmath.ci(k / base)) / mpmath.log(base)))


def distance_float(k, base):
    """The same formula by another route: Ci in mpmath, the rest in float64 with math (as many learners write it)."""
    return math.sqrt(1 - (float(mpmath.ci(k)) - float(mpmath.ci(k / base))) / math.log(base))


def width_sum(k, base, d):
    """||p_k - p_0|| / sqrt(d) built by hand from the formula at one width (no library builder): the measurement."""
    theta = base ** (-2 * torch.arange(d // 2, dtype=torch.float64) / d)
    return float(((2 - 2 * torch.cos(k * theta)).sum() / d).sqrt())


def test_distance_fact_against_the_tables():
    """Independent of the checker: the library's tables at widths 2^12 .. 2^18 approach the limit for small offsets,
    the gap shrinking like 1/d, and the distance is the same from every position; quadrature of the integral in t
    agrees with the Ci form for k up to 10^4; at k = 10^9 even d = 2^22 is far from it."""
    for k, base in ((1, 10000.0), (100, 500000.0)):
        limit = distance_ci(k, base)
        gaps = []
        for d in (2**12, 2**15, 2**18):
            table = pl.sinusoidal_positions(k + 2, d, base=base, dtype=torch.float64)
            steps = (table[k:] - table[:-k]).norm(dim=-1) / d**0.5
            torch.testing.assert_close(steps[0], steps[1])
            gaps.append(float(steps[0]) - limit)
        assert all(gap > 0 for gap in gaps) and 2.5 < gaps[0] / gaps[1] < 12 and 6 < gaps[1] / gaps[2] < 10
    for k, base in ((1, 1e4), (100, 5e5), (10**4, 1e4)):
        mpmath.mp.dps = 20
        in_t = mpmath.quad(lambda t: 1 - mpmath.cos(k * mpmath.power(base, -t)), mpmath.linspace(0, 1, 400))
        assert abs(float(mpmath.sqrt(in_t)) - distance_ci(k, base)) < 1e-12
    assert abs(width_sum(10**9, 1e9, 2**22) - distance_ci(10**9, 1e9)) > 1e-6


def test_far_distance_accepts_the_limit_in_several_forms(capsys):
    mp_value = lambda k, b: mpmath.mpf(distance_ci(k, b))  # noqa: E731  an mpmath number
    for right in (distance_ci, distance_float, mp_value, lambda k, b: np.float64(distance_ci(k, b)),
                  lambda k, b: torch.tensor(distance_ci(k, b), dtype=torch.float64)):
        assert check.far_distance(right) is True
        out = _out(capsys)
        assert "all correct!" in out


def richardson(k, base):
    """The cold read's shortcut: steps built by hand at two widths, extrapolated, sqrt(2 S(2d) - S(d))."""
    d = 2**20
    return (2 * width_sum(k, base, 2 * d) ** 2 - width_sum(k, base, d) ** 2) ** 0.5


def integral_in_t(k, base):
    """The integral derived, but sampled in t (Simpson, 200 001 points): right where the cosine turns slowly."""
    t = torch.linspace(0, 1, 200_001, dtype=torch.float64)
    f = 1 - torch.cos(k * base**-t)
    return float((f[0] + f[-1] + 4 * f[1:-1:2].sum() + 2 * f[2:-1:2].sum()).div(3 * 200_000).sqrt())


@pytest.mark.parametrize("wrong, says", [
    (richardson, "wrong for the large ones"),  # a measurement, extrapolated: fine for small k only
    (integral_in_t, "wrong for the large ones"),  # the integral, sampled in t
    (lambda k, b: width_sum(k, b, 2**16), "not the limit"),  # one width, as wide as one likes
    (lambda k, b: distance_ci(k, b) ** 2, "square of the distance"),
    (lambda k, b: distance_ci(k, b) / 2**0.5, "1/√2 of the distance"),  # one coordinate per pair
    (lambda k, b: distance_ci(k, b) * 2**0.5, "counts the pairs"),  # the limit of the distance / sqrt(d / 2)
    (lambda k, b: (1 - math.cos(k)) ** 0.5, "every pair as the fastest"),
    (lambda k, b: 1.0, "not the limit"),
    (lambda k, b: [1.0, 2.0], "one real number"),
    (lambda k, b: float("nan"), "one real number"),
])
def test_far_distance_names_typical_mistakes_without_the_value(wrong, says, capsys):
    assert check.far_distance(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    for k, base in check.ch02.DISTANCE_CASES:
        assert f"{distance_ci(k, base):.4f}" not in out  # the value is never printed
    assert "Ci" not in out and "∫" not in out and "integral" not in out.replace("an integral sampled", "")


def test_far_distance_unattempted(capsys):
    assert check.far_distance(None) is None
    assert "not attempted yet" in _out(capsys)


# --- the answer key -------------------------------------------------------------------------
def test_the_checker_module_hands_over_no_answer():
    """No constant of check.ch02 equals an answer, and none of its functions returns one (called with nothing,
    a flag, a length, a width, or an offset and a base): the far lengths' lists and the distances are sealed, the
    short tables measured inside the checker, the counter checked by its properties."""
    from _hands_over import held_answers

    lengths = check.ch02.OFFSET_N_MEASURED + check.ch02.OFFSET_N_FAR
    cases = check.ch02.DISTANCE_CASES
    answers = [offsets_by_rule(n) for n in lengths] + [set(offsets_by_rule(n)) for n in lengths]
    answers += [distance_ci(k, b) for k, b in cases] + [[distance_ci(k, b) for k, b in cases]]
    answers += [torch.tensor(counter(d), dtype=torch.float64) for d in check.ch02.COUNTER_WIDTHS]
    calls = [(), (True,), (False,)] + [(n,) for n in lengths] + [(d,) for d in check.ch02.COUNTER_WIDTHS]
    calls += list(cases)
    assert held_answers(check.ch02, answers, calls) == []
