"""Exercise checkers of notebooks/05_rope.ipynb: for every exercise the right answer passes, the shortcuts its
prompt forbids (and the ones a reader would try) are refused, each misconception the checker names is named,
and the checker module hands over no answer. Right answers are written here from the math, not from the checker."""
import bisect
import inspect
import math

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
# The query's pair (2, 1) at m = 10^18 + 50, the key's (1, −1) at n = 10^18 + 30, theta_1 = 10000^(−2/8) = 0.1,
# lengths zeta^m and zeta^(−n), zeta = 0.98. Written out: zeta^(m−n) qᵀR((n − m)θ)k, and
# qᵀR(φ)k = cos φ (q·k) + sin φ (q·Jk) with q·k = 1, q·Jk = 3.
ZETA, THETA_1, GAP = 0.98, 10000 ** (-2 / 8), 20  # GAP = m − n


def pair_score(phi, length=ZETA**GAP):
    return length * (math.cos(phi) + 3 * math.sin(phi))


PAIR_SCORE = pair_score(-GAP * THETA_1)


def _rotated(pair, angle):
    c, s = math.cos(angle), math.sin(angle)
    return pair[0] * c - pair[1] * s, pair[0] * s + pair[1] * c


def _absolute_float64():
    """The shortcut the prompt warns about: every factor at the absolute positions, in float64."""
    m, n = 10**18 + 50, 10**18 + 30
    q, k = _rotated((2.0, 1.0), m * THETA_1), _rotated((1.0, -1.0), n * THETA_1)
    return ZETA**GAP * (q[0] * k[0] + q[1] * k[1])  # the lengths already combined: the only part that survives


def _apply_rope_at_absolute_positions():
    """pl.apply_rope with the real positions (float32 angles), lengths combined by hand."""
    q, k = torch.zeros(1, 8), torch.zeros(1, 8)
    q[0, 2:4], k[0, 2:4] = torch.tensor([2.0, 1.0]), torch.tensor([1.0, -1.0])
    rq = pl.apply_rope(q, torch.tensor([10**18 + 50]))
    rk = pl.apply_rope(k, torch.tensor([10**18 + 30]))
    return ZETA**GAP * (rq @ rk.T).item()


@pytest.mark.parametrize("right", [PAIR_SCORE, torch.tensor(PAIR_SCORE), np.float64(PAIR_SCORE), [PAIR_SCORE],
                                   round(PAIR_SCORE, 3), np.float32(PAIR_SCORE)])
def test_pair_score_right_answer_passes_in_any_carrier(right, capsys):
    assert check.rope_pair_score(right) is True
    assert "all correct!" in _out(capsys)


@pytest.mark.parametrize("shortcut, says", [
    (_absolute_float64, "no turn between the two pairs"),  # m·θ and n·θ round to the same float
    (_apply_rope_at_absolute_positions, "no turn between the two pairs"),
    (lambda: np.float64(ZETA) ** (10**18 + 50) * np.float64(ZETA) ** -(10**18 + 30), "not a finite number"),
])
def test_pair_score_refuses_computing_at_the_absolute_positions(shortcut, says, capsys):
    with np.errstate(all="ignore"):
        value = shortcut()
    assert check.rope_pair_score(value) is False
    out = _out(capsys)
    assert says in out and "hint:" in out


def test_pair_score_cannot_be_computed_as_written_with_python_floats():
    """§2's candidate, copied with λ = ln ζ at the real positions, raises before it yields a number."""
    lam = math.log(ZETA)
    with pytest.raises(OverflowError):
        math.exp(-lam * (10**18 + 30))


@pytest.mark.parametrize("wrong, says", [
    (pair_score(GAP * THETA_1), "the key turned the other way"),  # offset m − n instead of n − m
    (pair_score(GAP * THETA_1, 1.0), "and the lengths are left out"),
    (pair_score(-GAP * THETA_1, ZETA**-GAP), "which power of ζ is their product"),  # ζ^(n − m)
    (pair_score(GAP * THETA_1, ZETA**-GAP), "both reversed"),
    (pair_score(-GAP * THETA_1, 1.0), "the lengths are left out"),  # plain RoPE
    (ZETA**GAP * 1.0, "no turn between the two pairs"),  # q·k scaled, unrotated
    (1.0, "without any rotation or scaling"),
    (pair_score(-GAP * 1.0), "pair 0's rate"),  # θ_0 = 1 instead of θ_1
    (pair_score(-GAP * 10000 ** (-1 / 8)), "the factor 2"),  # θ = 10000^(−j/d)
])
def test_pair_score_names_each_misconception_without_the_number(wrong, says, capsys):
    assert check.rope_pair_score(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert "-2.09" not in out and "2.099" not in out  # the value stays hidden


@pytest.mark.parametrize("wrong", [PAIR_SCORE + 0.01, [1.0, 2.0], "-2.099", -2099])
def test_pair_score_other_wrong_answers_fail(wrong, capsys):
    assert check.rope_pair_score(wrong) is False
    assert "hint:" in _out(capsys)


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


@pytest.mark.parametrize("wrong, says", [([0] * 64, "not a permutation"), (list(range(8)), "expected 64 integers"),
                                         ("abc", "expected 64 integers"), ([0.5] * 64, "expected 64 integers")])
def test_layout_malformed_answers(wrong, says, capsys):
    assert check.rope_layout_perm(wrong) is False
    assert says in _out(capsys)


# ---------------------------------------------------------------- Exercise 4: frequencies of a tilted generator
def _generator(Q, thetas=(1.0, 0.01)):
    """Q B Qᵀ with B RoPE's d = 4 generator (frequencies 1 and 1/100 unless said), written out here."""
    B = torch.zeros(4, 4, dtype=torch.float64)
    B[0, 1], B[1, 0], B[2, 3], B[3, 2] = -thetas[0], thetas[0], -thetas[1], thetas[1]
    return Q @ B @ Q.T


def _random_orthogonal(seed):
    q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64, generator=torch.Generator().manual_seed(seed)))
    return q


def frequencies_by_invariants(A):
    """Exercise 4's closed form: tr(AᵀA) = 2(θ1² + θ2²) and det A = θ1² θ2², both blind to the basis."""
    A = torch.as_tensor(A, dtype=torch.float64)
    s = (A**2).sum() / 2  # θ1² + θ2²
    p = torch.linalg.det(A).clamp(min=0).sqrt()  # θ1 θ2
    fast = ((s + 2 * p).sqrt() + (s - 2 * p).clamp(min=0).sqrt()) / 2  # (θ1 + θ2 + |θ1 − θ2|) / 2
    return torch.stack((fast, p / fast))


def frequencies_by_pfaffian(A):
    """Another right form: the Pfaffian a01 a23 − a02 a13 + a03 a12 = ±θ1 θ2, the quadratic's roots, Python floats,
    in the input's own dtype (float32 stays float32)."""
    a = torch.as_tensor(A)
    s = float((a**2).sum()) / 2
    pf = abs(float(a[0, 1] * a[2, 3] - a[0, 2] * a[1, 3] + a[0, 3] * a[1, 2]))
    root = math.sqrt(max(s * s - 4 * pf * pf, 0.0))
    return [math.sqrt((s + root) / 2), pf / math.sqrt((s + root) / 2)]


def frequencies_in_float32(A):
    """The quadratic's roots in float32 arithmetic, as numpy floats."""
    a = np.asarray(A, dtype=np.float32)
    s, p2 = (a**2).sum() / 2, np.linalg.det(a)
    root = np.sqrt(max(s * s - 4 * p2, 0))
    return np.array([np.sqrt((s + root) / 2), np.sqrt(max((s - root) / 2, 0))], dtype=np.float32)


def frequencies_by_power_iteration(A):
    """A reader's numerical route once eigenvalue routines refuse: iterate AᵀA towards its top eigenvector."""
    A = torch.as_tensor(A, dtype=torch.float64)
    M, v = A.T @ A, torch.ones(4, dtype=torch.float64)
    for _ in range(3000):
        v = M @ v
        v = v / v.norm()
    fast = (v @ M @ v).sqrt()
    return torch.stack((fast, torch.linalg.det(A).abs().sqrt() / fast))


@pytest.mark.parametrize("right", [frequencies_by_invariants, frequencies_by_pfaffian, frequencies_in_float32,
                                   lambda A: tuple(frequencies_by_invariants(A).tolist())])
def test_tilted_frequencies_accept_every_closed_form(right, capsys):
    assert check.rope_tilted_frequencies(right) is True
    assert "all correct!" in _out(capsys)


def test_the_closed_form_is_what_the_chapter_measures():
    """Independent of the checker: the invariants give §3's eigenvalue frequencies for generators built by hand."""
    for seed, thetas in ((0, (1.0, 0.01)), (3, (2.0, 0.5)), (8, (0.7, 0.3)), (13, (1.0, 0.995))):
        A = _generator(_random_orthogonal(seed), thetas)
        torch.testing.assert_close(frequencies_by_invariants(A), torch.tensor(thetas, dtype=torch.float64))
        evals = torch.linalg.eigvalsh(A @ A)  # §3's route: -θ², each twice
        torch.testing.assert_close((-evals[[0, 2]]).sqrt(), torch.tensor(thetas, dtype=torch.float64))
        assert (A.abs() > 1e-9).sum() > 8  # tilted: every feature coupled


@pytest.mark.parametrize("shortcut, says", [
    (lambda A: torch.linalg.eigvalsh(A.T @ A).sqrt()[[3, 0]], "calls torch.linalg.eigvalsh"),
    (lambda A: np.sort(np.abs(np.linalg.eigvals(np.asarray(A)).imag))[[3, 0]], "calls numpy.linalg.eigvals"),
    (lambda A: torch.linalg.svdvals(A)[[0, 2]], "calls torch.linalg.svdvals"),
    (lambda A: np.sort(np.abs(np.roots(np.poly(np.asarray(A))).imag))[[3, 0]], "calls numpy.poly"),
    (frequencies_by_power_iteration, "runs more than 150 Python lines"),
])
def test_tilted_frequencies_refuse_the_numerical_route(shortcut, says, capsys):
    assert check.rope_tilted_frequencies(shortcut) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert torch.linalg.eigvalsh(torch.eye(2)).tolist() == [1.0, 1.0] and np.poly([1.0]).tolist() == [1.0, -1.0]


@pytest.mark.parametrize("wrong, says", [
    (lambda A: frequencies_by_invariants(A).flip(0), "the slower first"),
    (lambda A: frequencies_by_invariants(A) ** 2, "squares of the frequencies"),
    (lambda A: 2 * math.pi / frequencies_by_invariants(A), "wavelengths"),
    (lambda A: math.sqrt(2) * frequencies_by_invariants(A), "twice the right sum"),
    (lambda A: [1.0, 0.01], "not the frequencies"),  # RoPE's own, for every A
    (lambda A: frequencies_by_invariants(A)[:1], "expected two numbers"),
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


def _holds(value, wanted) -> bool:
    """Does a constant (or anything inside it) equal one of the answers?"""
    if isinstance(value, (list, tuple, set, frozenset)) and not isinstance(value, str):
        if isinstance(value, (list, tuple)) and len(value) == len(LAYOUT_RIGHT) and list(value) == LAYOUT_RIGHT:
            return True
        return any(_holds(v, wanted) for v in value)
    if isinstance(value, dict):
        return any(_holds(v, wanted) for v in (*value.keys(), *value.values()))
    if isinstance(value, torch.Tensor):
        return value.numel() == 64 and value.flatten().tolist() == LAYOUT_RIGHT
    return isinstance(value, float) and abs(value - PAIR_SCORE) < 2e-3


def test_the_checker_module_hands_over_no_answer(capsys):
    """No constant of check.ch05 holds Ex 1's number or Ex 3's permutation, and no function of it, called with an
    exercise's inputs, returns an answer: Ex 1's number, Ex 3's permutation, Ex 2's pair index or Ex 4's
    frequencies."""
    for name, value in vars(ch05).items():
        if not callable(value) and not inspect.ismodule(value):
            assert not _holds(value, None), name
    tilted = _generator(_random_orthogonal(4), (1.3, 0.2))
    calls = [(), (64,), (8,), (tilted,), (tilted.float(),), (0.98,), (10**18 + 50, 10**18 + 30)]
    settings = [setting for setting in ch05.SLOW_SETTINGS]
    functions = [f for f in vars(ch05).values() if inspect.isfunction(f) and f.__module__ == ch05.__name__]
    assert len(functions) >= 8
    for f in functions:
        for args in calls + settings:
            try:
                got = f(*args)
            except Exception:  # noqa: BLE001 - a function that cannot take these inputs hands over nothing
                continue
            assert not _holds(got, None), (f.__name__, args)
            if isinstance(got, torch.Tensor) and got.numel() == 2:
                assert not torch.allclose(got.double().flatten(), torch.tensor([1.3, 0.2], dtype=torch.float64)), f
            if any(args is setting for setting in settings) and type(got) is int:
                assert got != _first_slow_pair(*args), (f.__name__, args)
    _out(capsys)
