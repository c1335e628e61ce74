"""Exercise checkers of notebooks/05_rope.ipynb: right answers pass, wrong ones fail, None is 'not attempted'."""
import math

import numpy as np
import pytest
import torch

from posenc_lib import check


def _unfinished(*_):
    raise NotImplementedError


def _first_slow_pair(d, base, L):
    """Written from the inequality (L - 1) * base**(-2j/d) < 2*pi, not from the library."""
    if L - 1 < 2 * math.pi:
        return 0
    return min(d // 2, math.floor((d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)) + 1)


# Exercise 1, written out from §1's rule: qᵀR(φ)k = cos φ (q·k) + sin φ (q·Jk), φ = (n − m) θ_1, θ_1 = 0.1.
PHI = (50 - 30) * 10000 ** (-2 / 8)
PAIR_SCORE = math.cos(PHI) * 1.0 + math.sin(PHI) * 3.0  # q·k = 2 - 1, q·Jk = (2, 1)·(1, 1)


def _generator(Q, thetas=(1.0, 0.01)):
    """Q B Qᵀ with B RoPE's d = 4 generator (frequencies 1 and 1/100 unless said): written out, not from the library."""
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


TILTED = _generator(_random_orthogonal(0))


CASES = {
    "rope_pair_score": (
        PAIR_SCORE,
        [
            math.cos(PHI) - 3 * math.sin(PHI),  # the key turned the other way
            math.cos(50 * 0.1) + 3 * math.sin(50 * 0.1),  # one vector turned by its absolute angle
            1.0,  # no rotation
            [1.0, 2.0],
            "2.31",
        ],
    ),
    "rope_first_slow_pair": (
        _first_slow_pair,
        [
            lambda d, base, L: _first_slow_pair(d, base, L) - 1,  # the last pair that still turns
            lambda d, base, L: _first_slow_pair(d, base, L) + 1,
            lambda d, base, L: math.ceil((d / 2) * math.log(L / (2 * math.pi)) / math.log(base)),  # L, not L - 1,
            lambda d, base, L: (d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base),  # not a whole number
            lambda d, base, L: -1,
            lambda d, base, L: "46",
        ],
    ),
    "rope_layout_perm": (
        [0, 4, 1, 5, 2, 6, 3, 7],
        [
            [0, 2, 4, 6, 1, 3, 5, 7],  # P itself, the other direction
            [0, 1, 2, 3, 4, 5, 6, 7],
            [0, 0, 1, 1, 2, 2, 3, 3],
            [1, 2],
            "abc",
        ],
    ),
    "rope_tilted_frequencies": (
        frequencies_by_invariants,
        [
            lambda A: frequencies_by_invariants(A).flip(0),  # the slower first
            lambda A: frequencies_by_invariants(A) ** 2,  # θ², not θ
            lambda A: 2 * math.pi / frequencies_by_invariants(A),  # wavelengths
            lambda A: math.sqrt(2) * frequencies_by_invariants(A),  # the whole sum of squares for θ1² + θ2²
            lambda A: frequencies_by_invariants(A)[:1],
            lambda A: "θ",
        ],
    ),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_right_answer_passes(name, capsys):
    """The worked solution prints 'all correct!' and returns True."""
    assert getattr(check, name)(CASES[name][0]) is True
    out = capsys.readouterr().out
    assert "all correct!" in out and "✗" not in out


@pytest.mark.parametrize("name, wrong", [(n, w) for n, (_, ws) in sorted(CASES.items()) for w in ws])
def test_wrong_answer_fails_with_a_hint(name, wrong, capsys):
    """A wrong answer returns False, never raises, and prints a hint."""
    assert getattr(check, name)(wrong) is False
    out = capsys.readouterr().out
    assert "✗" in out and "hint:" in out


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("blank", [None, ...])
def test_unattempted_says_so(name, blank, capsys):
    """None / ... means not attempted yet (returns None)."""
    assert getattr(check, name)(blank) is None
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["rope_first_slow_pair"])
def test_stub_raising_not_implemented_counts_as_unattempted(name, capsys):
    """A learner stub that still raises NotImplementedError is not an error."""
    assert getattr(check, name)(_unfinished) is None
    assert "not attempted yet" in capsys.readouterr().out


@pytest.mark.parametrize("right", [PAIR_SCORE, torch.tensor(PAIR_SCORE), np.float64(PAIR_SCORE), [PAIR_SCORE],
                                   round(PAIR_SCORE, 4)])
def test_pair_score_accepts_every_form(right, capsys):
    assert check.rope_pair_score(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (math.cos(PHI) - 3 * math.sin(PHI), "turned the other way"),  # offset m - n instead of n - m
    (math.cos(5.0) + 3 * math.sin(5.0), "only through the offset"),  # the key's absolute angle alone
    (math.cos(8.0) + 3 * math.sin(8.0), "do not add up"),  # the sum of the two angles
    (math.cos(20.0) + 3 * math.sin(20.0), "pair 0's rate"),  # theta_0 = 1 instead of theta_1
    (1.0, "without any rotation"),
])
def test_pair_score_names_the_misconception(wrong, says, capsys):
    assert check.rope_pair_score(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out and "2.31" not in out  # the value stays hidden


@pytest.mark.parametrize("right", [frequencies_by_invariants, frequencies_by_pfaffian, frequencies_in_float32,
                                   lambda A: tuple(frequencies_by_invariants(A).tolist())])
def test_tilted_frequencies_accept_every_closed_form(right, capsys):
    assert check.rope_tilted_frequencies(right) is True
    assert "all correct!" in capsys.readouterr().out


def test_the_closed_form_is_what_the_chapter_measures():
    """Independent of the checker: the invariants give §3's eigenvalue frequencies for generators built by hand."""
    for seed, thetas in ((0, (1.0, 0.01)), (3, (2.0, 0.5)), (8, (0.7, 0.3))):
        A = _generator(_random_orthogonal(seed), thetas)
        torch.testing.assert_close(frequencies_by_invariants(A), torch.tensor(thetas, dtype=torch.float64))
        evals = torch.linalg.eigvalsh(A @ A)  # §3's route: -θ², each twice
        torch.testing.assert_close((-evals[[0, 2]]).sqrt(), torch.tensor(thetas, dtype=torch.float64))
        assert (A.abs() > 1e-9).sum() > 8  # tilted: every feature coupled


@pytest.mark.parametrize("wrong, says", [
    (lambda A: frequencies_by_invariants(A).flip(0), "the slower first"),
    (lambda A: frequencies_by_invariants(A) ** 2, "squares of the frequencies"),
    (lambda A: 2 * math.pi / frequencies_by_invariants(A), "wavelengths"),
    (lambda A: math.sqrt(2) * frequencies_by_invariants(A), "twice the right sum"),
    (lambda A: torch.linalg.eigvalsh(A.T @ A).sqrt()[[3, 0]], "calls torch.linalg.eigvalsh"),
    (lambda A: np.sort(np.abs(np.linalg.eigvals(np.asarray(A)).imag))[[3, 0]], "calls numpy.linalg.eigvals"),
    (lambda A: torch.linalg.svdvals(A)[[0, 2]], "calls torch.linalg.svdvals"),
    (lambda A: [1.0, 0.01], "not the frequencies"),  # RoPE's own, for every A
])
def test_tilted_frequencies_name_the_misconception(wrong, says, capsys):
    assert check.rope_tilted_frequencies(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "det" not in out and "trace" not in out and "Pfaffian" not in out  # the route stays hidden
    assert torch.linalg.eigvalsh(torch.eye(2)).tolist() == [1.0, 1.0]  # the routines work again


def test_specific_feedback_for_common_slips(capsys):
    """P for Q and off-by-one pairs are named."""
    check.rope_layout_perm([0, 2, 4, 6, 1, 3, 5, 7])
    out = capsys.readouterr().out
    assert "that is P" in out and "follow one pair" in out
    assert "undoes" not in out and "P[Q]" not in out and "0, 4, 1, 5" not in out  # the hint hides the inverse
    check.rope_first_slow_pair(CASES["rope_first_slow_pair"][1][0])
    out = capsys.readouterr().out
    assert "pair 45 still completes a full turn" in out and "46" not in out  # the answer stays hidden
    check.rope_first_slow_pair(CASES["rope_first_slow_pair"][1][1])
    assert "pair 46 already stays below one turn" in capsys.readouterr().out


def test_first_slow_pair_edges_and_number_types(capsys):
    """Llama 2's setting is pair 46 (pair 45 still turns, by 0.4 %); numpy and tensor integers count."""
    assert 4095 * 10000 ** (-90 / 128) >= 2 * math.pi > 4095 * 10000 ** (-92 / 128)
    assert check.rope_first_slow_pair(lambda d, base, L: np.int64(_first_slow_pair(d, base, L))) is True
    assert check.rope_first_slow_pair(lambda d, base, L: torch.tensor(_first_slow_pair(d, base, L))) is True
    assert check.rope_first_slow_pair(lambda d, base, L: float(_first_slow_pair(d, base, L))) is True
