"""Exercise checkers of notebooks/05_rope.ipynb: for every exercise the right answer passes, the shortcuts its
prompt forbids (and the ones a reader would try) are refused, each misconception the checker names is named,
and the checker module hands over no answer. Right answers are written here from the math, not from the checker."""
import bisect
import cmath
import functools
import inspect
import math
import pickle

import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check
from posenc_lib.check import ch05


def _unfinished(*_):
    raise NotImplementedError


def _out(capsys):
    return capsys.readouterr().out


# ---------------------------------------------------------------- Exercise 1: one pair's score, lengths scaled
# <zeta^m R(m theta) q, zeta^(-n) R(n theta) k> = zeta^(m - n) q^T R((n - m) theta) k, and for one pair
# q^T R(phi) k = cos(phi) (q . k) + sin(phi) (q_1 k_0 - q_0 k_1): only m - n is ever needed.
def pair_score(q, k, m, n, zeta, theta):
    """Written from the polar form, not from the checker."""
    phi = (n - m) * theta
    return zeta ** (m - n) * (math.cos(phi) * (q[0] * k[0] + q[1] * k[1]) + math.sin(phi) * (q[1] * k[0] - q[0] * k[1]))


def pair_score_complex(q, k, m, n, zeta, theta):
    """The same as complex numbers: f_q conj(f_k) = zeta^(m-n) q conj(k) e^{i(m-n) theta}, real part."""
    return (zeta ** (m - n) * complex(*q) * complex(*k).conjugate() * cmath.exp(1j * (m - n) * theta)).real


def pair_score_by_library(q, k, m, n, zeta, theta):
    """The library's rotation, at the offset only: q at position 0, k at n - m."""
    inv_freq = torch.tensor([theta], dtype=torch.float64)
    rq = pl.apply_rope(torch.tensor([q], dtype=torch.float64), torch.tensor([0]), inv_freq=inv_freq)
    rk = pl.apply_rope(torch.tensor([k], dtype=torch.float64), torch.tensor([n - m]), inv_freq=inv_freq)
    return torch.tensor(zeta, dtype=torch.float64) ** (m - n) * (rq @ rk.T)[0, 0]


def _turned(p, angle):
    c, s = math.cos(angle), math.sin(angle)
    return p[0] * c - p[1] * s, p[0] * s + p[1] * c


def as_written(q, k, m, n, zeta, theta):
    """The shortcut the prompt rules out: every factor at the absolute positions, in float64."""
    a, b = _turned(q, m * theta), _turned(k, n * theta)
    return zeta**m * zeta ** (-n) * (a[0] * b[0] + a[1] * b[1])


def as_written_lengths_combined(q, k, m, n, zeta, theta):
    """Half the insight: the lengths by m - n, the angles still at the absolute positions."""
    a, b = _turned(q, m * theta), _turned(k, n * theta)
    return zeta ** (m - n) * (a[0] * b[0] + a[1] * b[1])


def apply_rope_at_absolute_positions(q, k, m, n, zeta, theta):
    """pl.apply_rope at the real positions (positions beyond int64 are clipped by the learner: still noise)."""
    pos = [min(m, 2**62), min(n, 2**62)]
    inv_freq = torch.tensor([theta])
    rq = pl.apply_rope(torch.tensor([q], dtype=torch.float32), torch.tensor([pos[0]]), inv_freq=inv_freq)
    rk = pl.apply_rope(torch.tensor([k], dtype=torch.float32), torch.tensor([pos[1]]), inv_freq=inv_freq)
    return zeta ** (m - n) * (rq @ rk.T).item()


def by_mpmath(q, k, m, n, zeta, theta):
    """Arbitrary precision at the absolute positions (the reader's shortcut): 500 digits follow 10^400."""
    import mpmath

    mpmath.mp.dps = 500
    a, b = mpmath.mpf(m) * mpmath.mpf(theta), mpmath.mpf(n) * mpmath.mpf(theta)
    qa = (q[0] * mpmath.cos(a) - q[1] * mpmath.sin(a), q[0] * mpmath.sin(a) + q[1] * mpmath.cos(a))
    kb = (k[0] * mpmath.cos(b) - k[1] * mpmath.sin(b), k[0] * mpmath.sin(b) + k[1] * mpmath.cos(b))
    return float(mpmath.mpf(zeta) ** (m - n) * (qa[0] * kb[0] + qa[1] * kb[1]))


def _mpmath_by_name():
    """The same with the functions imported by name, which no patch of the module can reach: the line budget does."""
    from mpmath import cos, mp, mpf, sin

    def score(q, k, m, n, zeta, theta):
        mp.dps = 500
        a, b = mpf(m) * theta, mpf(n) * theta
        qa = (q[0] * cos(a) - q[1] * sin(a), q[0] * sin(a) + q[1] * cos(a))
        kb = (k[0] * cos(b) - k[1] * sin(b), k[0] * sin(b) + k[1] * cos(b))
        return float(zeta ** (m - n) * (qa[0] * kb[0] + qa[1] * kb[1]))
    return score


def by_sympy(q, k, m, n, zeta, theta):
    import sympy

    a, b = sympy.Integer(m) * sympy.Float(theta, 30), sympy.Integer(n) * sympy.Float(theta, 30)
    return as_written_lengths_combined(q, k, 0, 0, 1.0, 0.0) * float(sympy.cos(a - b).evalf(30))


def by_decimal(q, k, m, n, zeta, theta):
    """Exact angles with decimal, reduced by a long 2 pi: refused by name."""
    import decimal

    decimal.getcontext().prec = 50
    return float(decimal.Decimal(m) * decimal.Decimal(theta) - decimal.Decimal(n) * decimal.Decimal(theta))


def by_fraction(q, k, m, n, zeta, theta):
    import fractions

    return float(fractions.Fraction(m) * fractions.Fraction(theta) - fractions.Fraction(n) * fractions.Fraction(theta))


def by_the_checkers_definition(q, k, m, n, zeta, theta):
    return ch05._as_defined(q, k, m, n, zeta, theta)


@pytest.mark.parametrize("right", [pair_score, pair_score_complex, pair_score_by_library,
                                   lambda *a: np.float64(pair_score(*a)), lambda *a: torch.tensor(pair_score(*a)),
                                   lambda *a: [pair_score(*a)]])
def test_pair_score_right_answers_pass(right, capsys):
    assert check.rope_pair_score(right) is True
    assert "all correct!" in _out(capsys)


def test_pair_score_right_answer_is_the_definition_far_away():
    """Independent of the checker: at positions that float64 still follows exactly in its angles (m theta with
    theta = 1/2 and m below 2^40), the formula equals the score as written."""
    for m, n in ((2**39 + 50, 2**39 + 30), (2**39 + 3, 2**39 + 41)):
        q, k = (0.3, -1.2), (0.7, 0.4)
        assert math.isclose(pair_score(q, k, m, n, 1.0, 0.5), as_written(q, k, m, n, 1.0, 0.5), abs_tol=1e-3)
    assert math.isclose(pair_score((2.0, 1.0), (1.0, -1.0), 10**18 + 50, 10**18 + 30, 0.98, 0.1),
                        0.98**20 * (math.cos(-2.0) + 3 * math.sin(-2.0)), rel_tol=1e-12)


@pytest.mark.parametrize("shortcut, says", [
    (as_written, "not finite"),  # ζ^(−n) overflows at n = 10^18
    (as_written_lengths_combined, "depends on where the pair sits"),  # m·θ and n·θ lose their digits
    (apply_rope_at_absolute_positions, "depends on where the pair sits"),
    (by_mpmath, "calls mpmath.mpf"),
    (_mpmath_by_name(), "runs more than 400 Python lines"),
    (by_sympy, "calls sympy.Integer"),
    (by_decimal, "calls decimal.Decimal"),
    (by_fraction, "calls fractions.Fraction"),
    (by_the_checkers_definition, "calls check.ch05._as_defined"),
])
def test_pair_score_refuses_computing_at_the_absolute_positions(shortcut, says, capsys):
    assert check.rope_pair_score(shortcut) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    import mpmath
    assert mpmath.mpf(1) == 1 and ch05._as_defined((1.0, 0.0), (1.0, 0.0), 0, 0, 1.0, 0.0) == 1.0  # guards undone


@pytest.mark.parametrize("wrong, says", [
    (lambda q, k, m, n, z, t: pair_score(q, k, n, m, 1 / z, t), "turned the other way"),  # offset m − n for n − m
    (lambda q, k, m, n, z, t: pair_score(q, k, m, n, 1 / z, t), "which power of ζ is their product"),  # ζ^(n − m)
    (lambda q, k, m, n, z, t: pair_score(q, k, n, m, z, t), "both reversed"),
    (lambda q, k, m, n, z, t: pair_score(q, k, m, n, 1.0, t), "the lengths are left out"),  # plain RoPE
    (lambda q, k, m, n, z, t: pair_score(q, k, n, m, 1.0, t), "reversed and the lengths are left out"),
    (lambda q, k, m, n, z, t: pair_score(q, k, m, n, z, 0.0), "no turn between the two pairs"),
    (lambda q, k, m, n, z, t: q[0] * k[0] + q[1] * k[1], "neither the rotation nor the lengths"),
])
def test_pair_score_names_each_misconception(wrong, says, capsys):
    assert check.rope_pair_score(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert "cos" not in out and "m − n)" not in out  # the formula stays hidden


@pytest.mark.parametrize("wrong, says", [
    (lambda q, k, m, n, z, t: pair_score(q, k, m, n, z, t) + 0.01, "wrong already at small positions"),
    (lambda q, k, m, n, z, t: "2.0", "expected one number"),
    (lambda q, k, m, n, z, t: [1.0, 2.0], "expected one number"),
    (lambda q, k, m, n, z, t: math.nan, "not a finite number at small positions"),
])
def test_pair_score_other_wrong_answers_fail(wrong, says, capsys):
    assert check.rope_pair_score(wrong) is False
    assert says in _out(capsys)


# ---------------------------------------------------------------- Exercise 2: the first slow pair, a formula
def _first_slow_pair(d, base, L):
    """Written from the inequality (L - 1) * base**(-2j/d) < 2*pi, not from the library."""
    if L - 1 < 2 * math.pi:
        return 0
    return min(d // 2, math.floor((d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)) + 1)


def _by_library(d, base, L):  # the reader's shortcut: every pair's frequency, then the first slow one
    slow = ((L - 1) * pl.rope_frequencies(d, base=base) < 2 * math.pi).nonzero()
    return int(slow[0]) if len(slow) else d // 2


def _by_wavelengths(d, base, L):
    slow = (pl.rope_wavelengths(d, base=base) > L - 1).nonzero()
    return int(slow[0]) if len(slow) else d // 2


def _by_own_list(d, base, L):  # the same without the library: one frequency per pair
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    slow = ((L - 1) * theta < 2 * math.pi).nonzero()
    return int(slow[0]) if len(slow) else d // 2


def _by_loop(d, base, L):
    for j in range(d // 2):
        if (L - 1) * base ** (-2 * j / d) < 2 * math.pi:
            return j
    return d // 2


def _by_bisection(d, base, L):  # a search over a copied helper: ~40 halvings at d = 10^12
    lo, hi = 0, d // 2
    while lo < hi:
        mid = (lo + hi) // 2
        if (L - 1) * base ** (-2 * mid / d) < 2 * math.pi:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _by_bisect_module(d, base, L):  # the search in C, its key in Python
    return bisect.bisect_left(range(d // 2), True, key=lambda j: (L - 1) * base ** (-2 * j / d) < 2 * math.pi)


def _by_turning_pairs(d, base, L):  # chapter 8's count of the pairs that turn
    return pl.rope_inspect.turning_pairs(pl.rope_frequencies(d, base=base), L)


def _in_float32(d, base, L):  # the right formula in float32 arithmetic
    j = torch.tensor(d / 2) * torch.log(torch.tensor((L - 1) / (2 * math.pi))) / torch.log(torch.tensor(base))
    return int(torch.clamp(torch.floor(j) + 1, 0, d // 2))


@pytest.mark.parametrize("right", [_first_slow_pair, lambda d, b, L: np.int64(_first_slow_pair(d, b, L)),
                                   lambda d, b, L: torch.tensor(_first_slow_pair(d, b, L)),
                                   lambda d, b, L: float(_first_slow_pair(d, b, L))])
def test_first_slow_pair_right_formula_passes(right, capsys):
    assert check.rope_first_slow_pair(right) is True
    assert "all correct!" in _out(capsys)


def test_first_slow_pair_settings_are_far_from_ties():
    """Independent of the checker: every setting's bound is at least 0.01 from a whole number, so the right
    formula in float64 and the property the checker tests cannot disagree by rounding (Llama 2's setting included:
    pair 45 still turns, by 0.4 %)."""
    for d, base, L in ch05.SLOW_SETTINGS:
        if L - 1 >= 2 * math.pi:
            bound = (d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)
            assert bound > d // 2 or 0.01 < bound % 1 < 0.99, (d, base, L)
    assert 4095 * 10000 ** (-90 / 128) >= 2 * math.pi > 4095 * 10000 ** (-92 / 128)


@pytest.mark.parametrize("shortcut, says", [
    (_by_library, "calls pl.rope_frequencies"),
    (_by_wavelengths, "calls pl.rope_wavelengths"),
    (_by_turning_pairs, "calls pl.rope_frequencies"),
    (_by_own_list, "calls torch.arange with 1e+08 or more entries"),
    (_by_loop, "runs more than 30 Python lines"),
    (_by_bisection, "runs more than 30 Python lines"),
    (_by_bisect_module, "runs more than 30 Python lines"),
])
def test_first_slow_pair_refuses_every_search_over_pairs(shortcut, says, capsys):
    assert _by_bisection(128, 10000.0, 4096) == _first_slow_pair(128, 10000.0, 4096)  # the shortcut is no wrong answer
    assert check.rope_first_slow_pair(shortcut) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert torch.arange(3).tolist() == [0, 1, 2] and pl.rope_frequencies(2).tolist() == [1.0]  # the guards are gone


@pytest.mark.parametrize("wrong, says", [
    (lambda d, b, L: _first_slow_pair(d, b, L) - 1, "pair 45 still completes a full turn"),  # the last turning pair
    (lambda d, b, L: _first_slow_pair(d, b, L) + 1, "pair 46 already stays below one turn"),
    (_in_float32, "float32 keeps 7"),
    (lambda d, b, L: -1, "is not a pair index"),
    (lambda d, b, L: (d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(b), "expected a whole pair index"),
    (lambda d, b, L: "46", "expected a whole pair index"),
])
def test_first_slow_pair_names_each_misconception_without_the_answer(wrong, says, capsys):
    assert check.rope_first_slow_pair(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert "(d/2)" not in out and "log" not in out  # the formula stays hidden


def test_first_slow_pair_l_instead_of_l_minus_1_fails(capsys):
    """The context's last position is L − 1: counting to L moves the answer in one of the settings."""
    wrong = lambda d, b, L: min(d // 2, math.floor((d / 2) * math.log(L / (2 * math.pi)) / math.log(b)) + 1)  # noqa
    assert any(wrong(*s) != _first_slow_pair(*s) for s in ch05.SLOW_SETTINGS)
    assert check.rope_first_slow_pair(wrong) is False
    out = _out(capsys)
    assert "reaches a full turn only at position L, one past the context" in out  # the off-by-one, named
    assert "log" not in out


# ---------------------------------------------------------------- Exercise 3: a clockwise checkpoint, half kernel
# The mirror (a, b) -> (b, a) turns a clockwise rotation into a counter-clockwise one, so the kernel's pair j
# (features j, j + 32) takes the checkpoint's pair j (features 2j, 2j + 1) in mirrored order.
LAYOUT_RIGHT = [2 * j + 1 for j in range(32)] + [2 * j for j in range(32)]


def test_layout_right_answer_is_what_the_kernels_do():
    """Independent of the checker: the clockwise interleaved RoPE, reordered, is the half-layout kernel's output."""
    x = torch.randn(2, 7, 64, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    pos = torch.tensor([0, 3, 17, 100, 999, 4096, 65000])
    cos, sin = (f(pos[:, None].double() * pl.rope_frequencies(64, dtype=torch.float64)) for f in (torch.cos, torch.sin))
    a, b = x[..., 0::2], x[..., 1::2]  # Meta's pairs, turned clockwise by hand
    clockwise = torch.stack((a * cos + b * sin, -a * sin + b * cos), -1).flatten(-2)
    torch.testing.assert_close(clockwise, pl.apply_rope(x, -pos))
    torch.testing.assert_close(clockwise[..., LAYOUT_RIGHT], pl.apply_rope(x[..., LAYOUT_RIGHT], pos, layout="half"))


@pytest.mark.parametrize("right", [LAYOUT_RIGHT, tuple(LAYOUT_RIGHT), torch.tensor(LAYOUT_RIGHT),
                                   np.array(LAYOUT_RIGHT), [float(i) for i in LAYOUT_RIGHT]])
def test_layout_right_answer_passes(right, capsys):
    assert check.rope_layout_perm(right) is True
    assert "all correct!" in _out(capsys)


@pytest.mark.parametrize("shortcut, says", [
    (pl.layout_permutation(64).tolist(), "turns counter-clockwise there"),  # §6e's P: the direction is left out
    (torch.argsort(pl.layout_permutation(64)).tolist(), "two different pairs"),  # P's inverse, the way back
    (list(range(32, 64)) + list(range(32)), "two different pairs"),  # the halves swapped: a half-layout mirror
    ([i ^ 1 for i in range(64)], "two different pairs"),  # neighbours swapped: the interleaved mirror
    (list(range(64)), "two different pairs"),
    (list(range(63, -1, -1)), "two different pairs"),
    ([2 * ((j + 1) % 32) + 1 for j in range(32)] + [2 * ((j + 1) % 32) for j in range(32)], "would turn at θ_0"),
])
def test_layout_names_each_misconception_without_the_answer(shortcut, says, capsys):
    assert check.rope_layout_perm(shortcut) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert "1, 3, 5" not in out and "2j + 1" not in out  # the answer stays hidden
    assert "mirror" not in out and "its order" not in out and "swap" not in out and "exchang" not in out  # nor the fix


@pytest.mark.parametrize("wrong, says", [([0] * 64, "not a permutation"), (list(range(8)), "expected 64 integers"),
                                         ("abc", "expected 64 integers"), ([0.5] * 64, "expected 64 integers")])
def test_layout_malformed_answers(wrong, says, capsys):
    assert check.rope_layout_perm(wrong) is False
    assert says in _out(capsys)


# ---------------------------------------------------------------- Exercise 4: frequencies of a tilted generator
# The checker hands the function A's entries as numbers that count their arithmetic (check._guard.Counted):
# a formula in the entries passes, anything that needs floats or many operations does not.
def _generator(Q, thetas=(1.0, 0.01)):
    """Q B Qᵀ with B RoPE's d = 4 generator (frequencies 1 and 1/100 unless said), written out here."""
    B = torch.zeros(4, 4, dtype=torch.float64)
    B[0, 1], B[1, 0], B[2, 3], B[3, 2] = -thetas[0], thetas[0], -thetas[1], thetas[1]
    return Q @ B @ Q.T


def _random_orthogonal(seed):
    q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    return q


def frequencies_by_pfaffian(A):
    """tr(AᵀA) = 2(θ1² + θ2²) and the Pfaffian a01 a23 − a02 a13 + a03 a12 = ±θ1 θ2 (det A is its square), both
    blind to the basis; then (θ1 ± θ2)² = s ± 2p."""
    s = sum(a * a for row in A for a in row) / 2
    p = abs(A[0][1] * A[2][3] - A[0][2] * A[1][3] + A[0][3] * A[1][2])
    fast = ((s + 2 * p) ** 0.5 + max(s - 2 * p, 0) ** 0.5) / 2
    return fast, p / fast


def _product(X, Y):
    return [[sum(X[i][k] * Y[k][j] for k in range(4)) for j in range(4)] for i in range(4)]


def frequencies_by_traces(A):
    """tr(A²) = −2(θ1² + θ2²) and tr(A⁴) = 2(θ1⁴ + θ2⁴): two matrix products, then a quadratic."""
    A2 = _product(A, A)
    s = -sum(A2[i][i] for i in range(4)) / 2
    s4 = sum(A2[i][j] * A2[j][i] for i in range(4) for j in range(4)) / 2
    p2 = (s * s - s4) / 2  # θ1² θ2²
    fast2 = (s + max(s * s - 4 * p2, 0) ** 0.5) / 2
    return [fast2**0.5, (p2 / fast2) ** 0.5]


def _det(M):
    """Laplace expansion along the first row."""
    if len(M) == 1:
        return M[0][0]
    return sum((-1) ** j * M[0][j] * _det([row[:j] + row[j + 1:] for row in M[1:]]) for j in range(len(M)))


def frequencies_by_determinant(A):
    """det A = θ1² θ2², by Laplace expansion, and the sum of squares."""
    s = sum(a * a for row in A for a in row) / 2
    p = max(_det([list(row) for row in A]), 0) ** 0.5  # θ1 θ2
    slow = (s / 2 - max(s * s / 4 - p * p, 0) ** 0.5) ** 0.5
    return p / slow, slow


def frequencies_with_numpy_objects(A):
    """numpy over the entries themselves (an object array): its arithmetic is still theirs."""
    a = np.array(A, dtype=object)
    s = (a * a).sum() / 2
    p = abs(a[0, 1] * a[2, 3] - a[0, 2] * a[1, 3] + a[0, 3] * a[1, 2])
    fast = ((s + 2 * p) ** 0.5 + max(s - 2 * p, 0) ** 0.5) / 2
    return np.array([fast, p / fast])


@pytest.mark.parametrize("right", [frequencies_by_pfaffian, frequencies_by_traces, frequencies_by_determinant,
                                   frequencies_with_numpy_objects, lambda A: list(frequencies_by_pfaffian(A))])
def test_tilted_frequencies_accept_every_closed_form(right, capsys):
    assert check.rope_tilted_frequencies(right) is True
    assert "all correct!" in _out(capsys)


def test_the_closed_forms_are_what_the_chapter_measures():
    """Independent of the checker: on plain floats, the closed forms give §3's eigenvalue frequencies for generators
    built by hand."""
    for seed, thetas in ((0, (1.0, 0.01)), (3, (2.0, 0.5)), (8, (0.7, 0.3)), (13, (1.0, 0.995))):
        A = _generator(_random_orthogonal(seed), thetas)
        for closed_form in (frequencies_by_pfaffian, frequencies_by_traces, frequencies_by_determinant):
            torch.testing.assert_close(torch.tensor(closed_form(A.tolist()), dtype=torch.float64),
                                       torch.tensor(thetas, dtype=torch.float64))
        evals = torch.linalg.eigvalsh(A @ A)  # §3's route: -θ², each twice
        torch.testing.assert_close((-evals[[0, 2]]).sqrt(), torch.tensor(thetas, dtype=torch.float64))
        assert (A.abs() > 1e-9).sum() > 8  # tilted: every feature coupled


def by_repeated_squaring(A):
    """The reader's route: 30 normalised squarings of AᵀA (numpy, on the entries), Rayleigh quotient, trace."""
    M = np.array(A, dtype=object)
    M = M.T @ M
    P = M
    for _ in range(30):
        P = P @ P
        P = P / P[0, 0]
    v = P[:, 0]
    fast2 = (v @ M @ v) / (v @ v)
    slow2 = (M[0, 0] + M[1, 1] + M[2, 2] + M[3, 3]) / 2 - fast2
    return fast2**0.5, slow2**0.5


def by_squaring_with_reduce(A):
    """The same with the loop in C (functools.reduce), only 11 squarings: the operations are still counted."""
    M = np.array(A, dtype=object)
    M = M.T @ M
    P = functools.reduce(lambda P, _: (P @ P) / (P @ P)[0, 0], range(11), M)
    v = P[:, 0]
    fast2 = (v @ M @ v) / (v @ v)
    return fast2**0.5, ((M[0, 0] + M[1, 1] + M[2, 2] + M[3, 3]) / 2 - fast2) ** 0.5


def by_power_iteration(A):
    """Matrix-vector products with AᵀA, by hand."""
    v = [1.0, 1.0, 1.0, 1.0]
    for _ in range(40):
        Av = [sum(A[i][k] * v[k] for k in range(4)) for i in range(4)]
        w = [sum(A[k][i] * Av[k] for k in range(4)) for i in range(4)]
        norm = sum(x * x for x in w) ** 0.5
        v = [x / norm for x in w]
    fast = sum(x * x for x in (sum(A[i][k] * v[k] for k in range(4)) for i in range(4))) ** 0.5
    return fast, abs(A[0][1] * A[2][3] - A[0][2] * A[1][3] + A[0][3] * A[1][2]) / fast


def by_bisection_on_comparisons(A):
    """Recovering the six free entries as floats by comparisons alone (50 halvings each), then eigenvalues."""
    def bisect_entry(x):
        lo, hi = -100.0, 100.0
        for _ in range(50):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if x > mid else (lo, mid)
        return lo

    a = np.zeros((4, 4))
    for i, j in ((0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)):
        a[i, j] = bisect_entry(A[i][j])
        a[j, i] = -a[i, j]
    return np.sort(np.abs(np.linalg.eigvals(a).imag))[[3, 0]]


@pytest.mark.parametrize("shortcut, says", [
    (lambda A: torch.linalg.eigvalsh(torch.tensor(A)), "calls torch.tensor or numpy.array on the checker's entries"),
    (lambda A: np.linalg.eigvals(np.array(A, dtype=float)), "calls float()"),
    (lambda A: torch.stack([torch.linalg.matrix_norm(torch.tensor(A, dtype=torch.float64), o) for o in (2, -2)]),
     "calls float()"),  # the reader's matrix_norm shortcut
    (lambda A: torch.linalg.svdvals(torch.as_tensor(A, dtype=torch.float64))[[0, 2]], "calls float()"),
    (lambda A: np.linalg.norm(np.asarray(A, dtype=np.float64), 2), "calls float()"),
    (lambda A: np.roots(np.poly(np.array(A, dtype=float))), "calls float()"),
    (lambda A: [float(x) for row in A for x in row][:2], "calls float()"),
    (lambda A: [f"{A[0][1]:.17g}", 0], "calls float()"),
    (lambda A: [pickle.loads(pickle.dumps(A[0][1])), 0], "calls float()"),
    (lambda A: [ch05.value_of(A[0][1]), 0], "calls check.ch05.value_of"),
    (lambda A: [check._guard.value_of(A[0][1]), 0], "calls check._guard.value_of"),
    (lambda A: [A[0][1]._counted_value, 0], "calls the hidden slot"),
    (by_repeated_squaring, "does more than 400 operations"),
    (by_squaring_with_reduce, "does more than 400 operations"),
    (by_power_iteration, "does more than 400 operations"),
    (by_bisection_on_comparisons, "does more than 400 operations"),
])
def test_tilted_frequencies_refuse_the_numerical_route(shortcut, says, capsys):
    assert check.rope_tilted_frequencies(shortcut) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert ch05.value_of(3.0) == 3.0 and torch.linalg.eigvalsh(torch.eye(2)).tolist() == [1.0, 1.0]  # guards undone


def test_a_few_products_are_not_enough_for_the_nearly_equal_generator(capsys):
    """Within the budget (3 squarings) repeated squaring has not converged where the frequencies are close."""
    def three_squarings(A):
        M = np.array(A, dtype=object)
        M = M.T @ M
        P = M @ M
        v = P[:, 0]
        fast2 = (v @ M @ v) / (v @ v)
        return fast2**0.5, ((M[0, 0] + M[1, 1] + M[2, 2] + M[3, 3]) / 2 - fast2) ** 0.5

    assert check.rope_tilted_frequencies(three_squarings) is False
    assert "not the frequencies of this A" in _out(capsys)


@pytest.mark.parametrize("wrong, says", [
    (lambda A: frequencies_by_pfaffian(A)[::-1], "the slower first"),
    (lambda A: [f * f for f in frequencies_by_pfaffian(A)], "squares of the frequencies"),
    (lambda A: [2 * math.pi / f for f in frequencies_by_pfaffian(A)], "wavelengths"),
    (lambda A: [math.sqrt(2) * f for f in frequencies_by_pfaffian(A)], "twice the right sum"),
    (lambda A: [1.0, 0.01], "not the frequencies"),  # RoPE's own, for every A
    (lambda A: frequencies_by_pfaffian(A)[:1], "expected two numbers"),
])
def test_tilted_frequencies_name_the_misconception(wrong, says, capsys):
    assert check.rope_tilted_frequencies(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert "det" not in out and "trace" not in out and "Pfaffian" not in out  # the route stays hidden


# ---------------------------------------------------------------- every exercise
@pytest.mark.parametrize("name, blank", [(name, blank) for name in ("rope_pair_score", "rope_first_slow_pair",
                                                                     "rope_layout_perm", "rope_tilted_frequencies")
                                         for blank in (None, ...)]
                         + [("rope_first_slow_pair", _unfinished), ("rope_tilted_frequencies", _unfinished)])
def test_unattempted_says_so(name, blank, capsys):
    """None / ... (or, for a function, a stub raising NotImplementedError) is not attempted yet (returns None)."""
    assert getattr(check, name)(blank) is None
    assert "not attempted yet" in _out(capsys)


def _holds(value) -> bool:
    """Does a constant (or anything inside it) equal Ex 3's permutation?"""
    if isinstance(value, (list, tuple, set, frozenset)) and not isinstance(value, str):
        if isinstance(value, (list, tuple)) and len(value) == len(LAYOUT_RIGHT) and list(value) == LAYOUT_RIGHT:
            return True
        return any(_holds(v) for v in value)
    if isinstance(value, dict):
        return any(_holds(v) for v in (*value.keys(), *value.values()))
    if isinstance(value, torch.Tensor):
        return value.numel() == 64 and value.flatten().tolist() == LAYOUT_RIGHT
    return False


def test_the_checker_module_hands_over_no_answer(capsys):
    """No constant of check.ch05 holds Ex 3's permutation, and no function of it, called with an exercise's inputs,
    returns an answer: Ex 1's score far from the start, Ex 2's pair index or Ex 4's frequencies."""
    for name, value in vars(ch05).items():
        if not callable(value) and not inspect.ismodule(value):
            assert not _holds(value), name
    tilted = _generator(_random_orthogonal(4), (1.3, 0.2))
    far = ((0.3, -1.2), (0.7, 0.4), 10**18 + 50, 10**18 + 30, 0.98, 0.1)
    calls = [(), (64,), (8,), (tilted,), (tilted.tolist(),), (0.98,), far]
    settings = list(ch05.SLOW_SETTINGS)
    functions = [f for f in vars(ch05).values() if inspect.isfunction(f) and f.__module__ == ch05.__name__]
    assert len(functions) >= 8
    for f in functions:
        for args in calls + settings:
            try:
                got = f(*args)
            except Exception:  # noqa: BLE001 - a function that cannot take these inputs hands over nothing
                continue
            assert not _holds(got), (f.__name__, args)
            value = ch05.number(got) if not isinstance(got, (list, tuple, torch.Tensor)) else None
            if args is far and value is not None and math.isfinite(value):
                assert not math.isclose(value, pair_score(*far), abs_tol=1e-3), f.__name__
            if isinstance(got, torch.Tensor) and got.numel() == 2:
                assert not torch.allclose(got.double().flatten(), torch.tensor([1.3, 0.2], dtype=torch.float64)), f
            if any(args is setting for setting in settings) and type(got) is int:
                assert got != _first_slow_pair(*args), (f.__name__, args)
    _out(capsys)
