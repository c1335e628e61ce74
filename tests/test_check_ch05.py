"""Exercise checkers of notebooks/05_rope.ipynb: for every exercise the right answer passes, the shortcuts its
prompt forbids (and the ones a reader would try) are refused, each misconception the checker names is named,
and the checker module hands over no answer. Right answers are written here from the math, not from the checker."""
import bisect
import cmath
import functools
import inspect
import math
import pathlib
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


# ---------------------------------------------------------------- Exercise 1: RoPE with the direction forgotten
# <R_n q, R_m k> = <R_(-m) q, R_(-n) k> (shift both by -(m + n)), and stacked vectors add their dot products, so
# E(x, m) = [R_m x, R_(-m) x] / sqrt(2) gives the average of the two sides; pair by pair it is cos((n - m) theta_j)
# (q_j . k_j), which the cos/sin form below writes without the library.
def undirected_by_library(x, positions):
    return torch.cat((pl.apply_rope(x, positions), pl.apply_rope(x, -positions)), -1) / math.sqrt(2)


def _own_angles(positions, d):
    """m theta_j for the chapter's frequencies 10000^(-2j/d), each repeated for the pair's two features."""
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    return (positions.double()[:, None] * theta).repeat_interleave(2, -1)


def undirected_by_cos_and_sin(x, positions):
    """[x cos(m theta_j), x sin(m theta_j)]: cos(m t) cos(n t) + sin(m t) sin(n t) = cos((n - m) t), no library."""
    a = _own_angles(positions, x.shape[-1])
    return torch.cat((x * a.cos(), x * a.sin()), -1)


def _rope_score(q, k, m, n):
    """<R_m q, R_n k> with the chapter's R_m built by hand from 2 x 2 blocks."""
    d = len(q)
    theta = 10000.0 ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)

    def R(p):
        return torch.block_diag(*[torch.tensor([[math.cos(p * t), -math.sin(p * t)], [math.sin(p * t), math.cos(p * t)]],
                                               dtype=torch.float64) for t in theta.tolist()])
    return (R(m) @ q) @ (R(n) @ k)


def test_undirected_right_answers_are_the_definition():
    """Independent of the checker: both designs give (<R_m q, R_n k> + <R_n q, R_m k>) / 2 with R_m built by hand,
    for keys ahead of, at and behind the query, and that score is the same on both sides while RoPE's is not."""
    g = torch.Generator().manual_seed(3)
    for m, n in ((5, 2), (2, 5), (7, 7), (0, 3000), (4096, 11)):
        q, k = torch.randn(2, 8, dtype=torch.float64, generator=g)
        want = (_rope_score(q, k, m, n) + _rope_score(q, k, n, m)) / 2
        for design in (undirected_by_library, undirected_by_cos_and_sin):
            got = design(q[None], torch.tensor([m]))[0] @ design(k[None], torch.tensor([n]))[0]
            assert math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-9), (design.__name__, m, n)
        mirror = 2 * m - n  # the key on the other side of the query, as far away
        if mirror >= 0 and m != n:
            assert math.isclose(want, (_rope_score(q, k, m, mirror) + _rope_score(q, k, mirror, m)) / 2, abs_tol=1e-9)
            assert not math.isclose(_rope_score(q, k, m, n), _rope_score(q, k, m, mirror), abs_tol=1e-3)


PERM16 = torch.randperm(16, generator=torch.Generator().manual_seed(16))


@pytest.mark.parametrize("right", [undirected_by_library, undirected_by_cos_and_sin,
                                   lambda x, p: undirected_by_library(x, p).numpy(),
                                   lambda x, p: undirected_by_library(x, p).tolist(),
                                   lambda x, p: undirected_by_library(x, p).squeeze(0),  # one row as (d',)
                                   lambda x, p: undirected_by_library(x, p)[:, PERM16],  # features in any order
                                   ])
def test_undirected_right_designs_pass(right, capsys):
    assert check.rope_undirected(right) is True
    assert "all correct!" in _out(capsys)


def test_undirected_runs_in_a_fused_kernel_given_the_head_scale():
    """The prompt's claim: a kernel runs the design given the scale 1/sqrt(d) explicitly; its default 1/sqrt(d') sees
    the design's width (2d here) and gives other weights. Scores built by hand, independent of the checker."""
    g = torch.Generator().manual_seed(5)
    x, v = torch.randn(6, 8, dtype=torch.float64, generator=g), torch.randn(6, 3, dtype=torch.float64, generator=g)
    pos = torch.tensor([0, 3, 9, 40, 41, 700])
    averaged = torch.tensor([[(_rope_score(x[i], x[j], m, n) + _rope_score(x[i], x[j], n, m)) / 2
                              for j, n in enumerate(pos.tolist())] for i, m in enumerate(pos.tolist())])
    E = undirected_by_library(x, pos)
    want = torch.softmax(averaged / math.sqrt(8), -1) @ v
    sdpa = torch.nn.functional.scaled_dot_product_attention
    torch.testing.assert_close(sdpa(E[None], E[None], v[None], scale=1 / math.sqrt(8))[0], want)
    assert not torch.allclose(sdpa(E[None], E[None], v[None])[0], want, atol=1e-3)  # the default scale: 1/sqrt(16)


def _rope_and_keys_side(x, p):
    return torch.cat((pl.apply_rope(x, p), x), -1) / math.sqrt(2)


@pytest.mark.parametrize("wrong, says", [
    (lambda x, p: pl.apply_rope(x, p), "that is RoPE's own score"),
    (lambda x, p: torch.cat((pl.apply_rope(x, p), pl.apply_rope(x, p)), -1) / math.sqrt(2), "that is RoPE's own"),
    (lambda x, p: pl.apply_rope(x, -p), "still tell a key ahead from one behind"),  # the other side alone
    (_rope_and_keys_side, "still tell a key ahead from one behind"),  # one side averaged with no rotation
    (lambda x, p: x * _own_angles(p, x.shape[-1]).cos(), "depend on where the tokens sit"),  # cos(m t) cos(n t)
    (lambda x, p: torch.cat((x * _own_angles(p, 8).cos(), x * _own_angles(p, 8).sin() * 0.5), -1),
     "depend on where the tokens sit"),
    (lambda x, p: x, "the positions are left out"),
    (lambda x, p: torch.cat((x, 0 * x + p[:, None] * 0), -1), "the positions are left out"),
    (lambda x, p: torch.cat((pl.apply_rope(x, p, layout="half"), pl.apply_rope(x, -p, layout="half")), -1) / math.sqrt(2),
     "half layout"),
    (lambda x, p: torch.cat((pl.apply_rope(x, p), pl.apply_rope(x, -p)), -1), "times a constant"),  # no 1/sqrt(2)
    (lambda x, p: undirected_by_cos_and_sin(x, 2 * p), "not RoPE's score averaged"),  # twice the frequencies
    (lambda x, p: x * (-1.0) ** p[:, None], "not RoPE's score averaged"),  # parity only
])
def test_undirected_names_each_misconception_without_the_answer(wrong, says, capsys):
    assert check.rope_undirected(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert "−m" not in out and "-positions" not in out and "√2" not in out and "cos(" not in out  # the design hidden


@pytest.mark.parametrize("wrong, says", [
    (lambda x, p: "encoding", "expected a real tensor"),
    (lambda x, p: torch.view_as_complex(undirected_by_library(x, p).reshape(len(p), -1, 2)), "complex encoding"),
    (lambda x, p: torch.view_as_complex(undirected_by_library(x, p).reshape(len(p), -1, 2)).numpy(), "complex"),
    (lambda x, p: torch.zeros(0), "expected a real tensor"),
    (lambda x, p: undirected_by_library(x, p).expand(3, 16), "expected one row per token"),
    (lambda x, p: undirected_by_library(x, p)[:, : 8 + int(p[0]) % 2], "one width"),
    (lambda x, p: undirected_by_library(x, p) / (p[:, None] - 9), "not finite"),
])
def test_undirected_malformed_answers(wrong, says, capsys):
    assert check.rope_undirected(wrong) is False
    assert says in _out(capsys)


def _undirected_in_float32(x, positions):
    """The right cos/sin design, its angles built by the library in float32 (its default): right up to rounding."""
    a = pl.rope_angles(positions, x.shape[-1]).repeat_interleave(2, -1)
    return torch.cat((x * a.cos(), x * a.sin()), -1)


@pytest.mark.parametrize("right_in_float32", [
    _undirected_in_float32,
    lambda x, p: undirected_by_library(x.float(), p),
    lambda x, p: torch.cat((x * (p[:, None] * pl.rope_frequencies(8)).repeat_interleave(2, -1).cos(),
                            x * (p[:, None] * pl.rope_frequencies(8)).repeat_interleave(2, -1).sin()), -1),
])
def test_undirected_names_float32_angles_as_precision_not_as_a_wrong_design(right_in_float32, capsys):
    """A right design computed in float32 misses the 1e-6 tolerance at positions in the thousands; the checker says
    so (float32's digits) instead of blaming the design for depending on where the tokens sit."""
    assert check.rope_undirected(right_in_float32) is False
    out = _out(capsys)
    assert "float32" in out and "7" in out and "float64" in out
    assert "depend on where the tokens sit" not in out and "ahead from one behind" not in out
    # the message says "the 1e-6 asked": the prompt must ask it
    src = (pathlib.Path(__file__).parents[1] / "notebooks/src/05_rope.py").read_text()
    prompt = src[src.index("**Exercise 1 (design).**"):src.index("def undirected_rope")]
    assert "not the 1e-6 asked" in out and "to within 1e-6" in " ".join(prompt.replace("#", " ").split())


@pytest.mark.parametrize("batch_dependent", [
    lambda x, p: undirected_by_library(x, p[0].expand(len(p))),  # every row at the first token's position
    lambda x, p: undirected_by_library(x - x.mean(0) * (len(p) > 1), p),  # centred on the other tokens of the call
    lambda x, p: undirected_by_library(x, p)[:1],  # the first row only
])
def test_undirected_refuses_an_encoding_right_only_one_token_at_a_time(batch_dependent, capsys):
    """One token at a time these are the right design; on a real call of several tokens they are not. The checker
    also encodes its tokens in one call and compares that with the rows encoded alone."""
    seen = []

    def recorded(x, p):
        seen.append(len(p))
        return batch_dependent(x, p)

    assert check.rope_undirected(recorded) is False
    assert "called on all 8 tokens at once" in _out(capsys)
    assert 1 in seen and 8 in seen


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


def _by_ceiling(d, base, L):  # ⌈bound⌉ instead of ⌊bound⌋ + 1
    if L - 1 < 2 * math.pi:
        return 0
    return min(d // 2, math.ceil((d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)))


def test_first_slow_pair_ceiling_is_as_right_as_floor_plus_one(capsys):
    """The answer is the smallest whole j above the bound (d/2)·ln((L − 1)/2π)/ln(base); ⌈bound⌉ is another answer
    only where the bound is a whole number k, i.e. where base^(2k/d) = (L − 1)/2π. That never happens: for a
    rational base (every float) the left side is algebraic, and the right side is transcendental because π is. So
    no setting can tell ⌈bound⌉ from ⌊bound⌋ + 1 except by float rounding at a near-tie, which the settings keep
    clear of (test_first_slow_pair_settings_are_far_from_ties): the checker rightly accepts both."""
    assert all(_by_ceiling(*s) == _first_slow_pair(*s) for s in ch05.SLOW_SETTINGS)
    assert check.rope_first_slow_pair(_by_ceiling) is True
    _out(capsys)


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


def _unclipped(d, base, L):  # the formula without its guard for contexts shorter than one turn of pair 0
    return min(d // 2, math.floor((d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)) + 1)


def test_first_slow_pair_has_a_context_shorter_than_one_turn():
    """Independent of the checker: at L = 3 (positions 0, 1, 2) pair 0 turns 2 rad < 2π, so the answer is 0, while
    the unguarded formula gives a negative index."""
    assert (32, 10000.0, 3) in ch05.SLOW_SETTINGS
    assert _first_slow_pair(32, 10000.0, 3) == 0 and _unclipped(32, 10000.0, 3) < 0


@pytest.mark.parametrize("wrong, says", [
    (lambda d, b, L: _first_slow_pair(d, b, L) - 1, "pair 45 still completes a full turn"),  # the last turning pair
    (lambda d, b, L: _first_slow_pair(d, b, L) + 1, "pair 46 already stays below one turn"),
    (_in_float32, "float32 keeps 7"),
    (lambda d, b, L: -1, "is not a pair index"),
    (_unclipped, "even the fastest pair never turns"),
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


# ---------------------------------------------------------------- Exercise 3: frequencies of a tilted generator
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
    (lambda A: [check._guard.shadow_of(A[0][1]), 0], "calls check._guard.shadow_of"),
    (lambda A: [A[0][1]._counted_value, 0], "calls the hidden slot"),
    # numpy's and torch's float routines on an object array of the entries: named, not a bare TypeError
    (lambda A: np.sort(np.abs(np.linalg.eigvals(np.array(A, dtype=object)).imag))[[3, 0]], "needs floats"),
    (lambda A: np.linalg.svd(np.array(A), compute_uv=False)[[0, 2]], "needs floats"),
    (lambda A: [np.linalg.det(np.array(A)) ** 0.25] * 2, "needs floats"),
    (lambda A: torch.linalg.svdvals(torch.from_numpy(np.array(A)))[[0, 2]], "needs floats"),
    (lambda A: np.sqrt(np.abs(np.array(A))).max(), "needs floats"),
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


def _by_eigenvalues_after(read, wrap=False):
    """The entries' values read past the count (``read``), then numpy's eigenvalues: the reader's slot shortcut;
    with ``wrap``, the plain results are then mixed into the counted arithmetic (0 times every entry, added)."""
    def frequencies(A):
        a = np.array([[read(x) for x in row] for row in A], dtype=np.float64)
        plain = np.sqrt(np.linalg.eigvalsh(a.T @ a).clip(0))[[3, 0]].tolist()
        if not wrap:
            return plain
        zero = sum(x * 0 for row in A for x in row)
        return [zero + plain[0], zero + plain[1]]
    return frequencies


def _by_slot(x):
    return object.__getattribute__(x, "_counted_value")[0]


def _by_descriptor(x):
    return type(x).__dict__["_counted_value"].__get__(x)[0]


def _by_eigenvalues_scaled_by_a_counted_term(A):
    """The reader's cheat on a scalar shadow: eigenvalues of the values read past the count, each carried by a
    counted term of degree 1 in A (s * (t / value(s))), so that its shadow scales as a formula's would."""
    a = np.array([[_by_slot(x) for x in row] for row in A], dtype=np.float64)
    plain = np.sqrt(np.linalg.eigvalsh(a.T @ a).clip(0))[[3, 0]].tolist()
    s = sum(x * x for row in A for x in row) ** 0.5  # the Frobenius norm: degree 1 in A
    return [s * (t / _by_slot(s)) for t in plain]


@pytest.mark.parametrize("shortcut", [
    _by_eigenvalues_scaled_by_a_counted_term,
    _by_eigenvalues_after(_by_slot), _by_eigenvalues_after(_by_descriptor),
    _by_eigenvalues_after(_by_slot, wrap=True), _by_eigenvalues_after(_by_descriptor, wrap=True),
    lambda A: [1.0, 0.01],  # RoPE's own frequencies typed in: right for the first generator only
])
def test_tilted_frequencies_refuse_right_numbers_made_outside_the_count(shortcut, capsys):
    """Introspection can read an entry's value past the guard; an answer made from such values, plain or mixed into
    the counted arithmetic, lacks the shadow a formula in the entries has, and is refused even where it is right."""
    assert check.rope_tilted_frequencies(shortcut) is False
    out = _out(capsys)
    assert "RoPE's own generator, d = 4: the right numbers, but not made from A's entries" in out and "hint:" in out


def test_tilted_frequencies_judge_the_numbers_before_the_shadow(capsys):
    """Counted results right on one generator only (typed-in numbers dressed as counted, or an iteration exact on
    RoPE's own block-diagonal generator) are told where their numbers are wrong, not accused of reading past the
    count."""
    assert check.rope_tilted_frequencies(lambda A: [A[0][0] * 0 + 1.0, A[0][0] * 0 + 0.01]) is False
    out = _out(capsys)
    assert "a random skew-symmetric A: not the frequencies of this A" in out and "not made from" not in out


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


def _pfaffian_with(sqrt):
    """The right closed form with `sqrt` for its square roots, on numbers made from A's entries."""
    def frequencies(A):
        s = sum(a * a for row in A for a in row) / 2
        p = abs(A[0][1] * A[2][3] - A[0][2] * A[1][3] + A[0][3] * A[1][2])
        fast = (sqrt(s + 2 * p) + sqrt(max(s - 2 * p, 0))) / 2
        return fast, p / fast
    return frequencies


@pytest.mark.parametrize("sqrt, says", [(lambda y: math.sqrt(y), "math.sqrt"), (math.sqrt, "math.sqrt"),
                                        (lambda y: np.sqrt(y), "numpy.sqrt"), (lambda y: y ** 0.5, None)])
def test_tilted_frequencies_name_a_float_square_root_accurately(sqrt, says, capsys):
    """A right formula whose square root leaves the count (math.sqrt, bound either way, or numpy.sqrt) is told what
    took its numbers out and what keeps them in (x ** 0.5), not that it is no formula; with ** 0.5 it passes."""
    assert check.rope_tilted_frequencies(_pfaffian_with(sqrt)) is (says is None)
    out = _out(capsys)
    if says is not None:
        assert says in out and "x ** 0.5 for a square root" in out and "formula" not in out and "hint:" in out


@pytest.mark.parametrize("wrong, says", [
    (lambda A: frequencies_by_pfaffian(A)[::-1], "the slower first"),
    (lambda A: [f * f for f in frequencies_by_pfaffian(A)], "squares of the frequencies"),
    (lambda A: [2 * math.pi / f for f in frequencies_by_pfaffian(A)], "wavelengths"),
    (lambda A: [math.sqrt(2) * f for f in frequencies_by_pfaffian(A)], "twice the right sum"),
    (lambda A: [2.0, 0.5], "not the frequencies"),
    (lambda A: frequencies_by_pfaffian(A)[:1], "expected two numbers"),
])
def test_tilted_frequencies_name_the_misconception(wrong, says, capsys):
    assert check.rope_tilted_frequencies(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert "det" not in out and "trace" not in out and "Pfaffian" not in out  # the route stays hidden


# ---------------------------------------------------------------- every exercise
@pytest.mark.parametrize("name, blank", [(name, blank) for name in ("rope_undirected", "rope_first_slow_pair",
                                                                     "rope_tilted_frequencies")
                                         for blank in (None, ...)]
                         + [("rope_undirected", _unfinished), ("rope_first_slow_pair", _unfinished),
                            ("rope_tilted_frequencies", _unfinished)])
def test_unattempted_says_so(name, blank, capsys):
    """None / ... (or, for a function, a stub raising NotImplementedError) is not attempted yet (returns None)."""
    assert getattr(check, name)(blank) is None
    assert "not attempted yet" in _out(capsys)


def test_the_checker_module_hands_over_no_answer(capsys):
    """No function of check.ch05, called with an exercise's inputs, returns Ex 2's pair index or Ex 3's
    frequencies, and none of them, used as Ex 1's encoding, passes Ex 1."""
    tilted = _generator(_random_orthogonal(4), (1.3, 0.2))
    calls = [(), (64,), (8,), (tilted,), (tilted.tolist(),), (0.98,)]
    settings = list(ch05.SLOW_SETTINGS)
    functions = [f for f in vars(ch05).values() if inspect.isfunction(f) and f.__module__ == ch05.__name__]
    assert len(functions) >= 8
    for f in functions:
        for args in calls + settings:
            try:
                got = f(*args)
            except Exception:  # noqa: BLE001 - a function that cannot take these inputs hands over nothing
                continue
            if isinstance(got, torch.Tensor) and got.numel() == 2:
                assert not torch.allclose(got.double().flatten(), torch.tensor([1.3, 0.2], dtype=torch.float64)), f
            if any(args is setting for setting in settings) and type(got) is int:
                assert got != _first_slow_pair(*args), (f.__name__, args)
        if f is not ch05.rope_undirected:
            def as_encoding(x, p, f=f):
                try:
                    return f(x, p)
                except Exception:  # noqa: BLE001
                    return "nothing"
            assert check.rope_undirected(as_encoding) is False, f.__name__
    _out(capsys)


def test_first_slow_pair_drawn_settings_keep_clear_of_ties_and_searches():
    """Independent of the checker's own filter: 300 draws, every bound at least 0.01 from a whole number and below
    d/2 - 1, and every d large enough that halving over d/2 pairs takes more than 22 steps."""
    import random
    for d, base, L in ch05._drawn_slow_settings(random.Random(0), count=300):
        bound = (d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)
        assert d % 2 == 0 and d >= 10**7 and 0.01 < bound % 1 < 0.99 and bound < d // 2 - 1, (d, base, L)
        assert (d // 2).bit_length() > 22


def test_first_slow_pair_refuses_answers_worked_out_in_advance(capsys):
    """The reader's shortcut: bisect every fixed setting before the check (no guard runs then), serve the answers from
    a cache, and fall back to the same bisection for anything else. The drawn settings meet the bisection inside the
    guard, where it is a search."""
    worked_out = {s: _by_bisection(*s) for s in ch05.SLOW_SETTINGS}
    cached = lambda d, b, L: worked_out.get((d, b, L)) if (d, b, L) in worked_out else _by_bisection(d, b, L)  # noqa
    assert all(cached(*s) == _first_slow_pair(*s) for s in ch05.SLOW_SETTINGS)  # right on every fixed setting
    assert check.rope_first_slow_pair(cached) is False
    assert "runs more than 30 Python lines" in _out(capsys)


def test_first_slow_pair_right_formula_passes_every_draw(capsys):
    for _ in range(5):
        assert check.rope_first_slow_pair(_first_slow_pair) is True
        assert "2 of them drawn at random" in _out(capsys)
