"""The chapter 3 checkers: right answers pass, the shortcuts each prompt forbids are refused, each
misconception a checker names gets its name, and the checker module hands over no answer."""
import inspect
import math
import random

import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check
from posenc_lib.check import ch03
from _answer_key import defined_here, flat


@pytest.fixture(params=range(8))
def draw(request, monkeypatch):
    """Run a test under several draws of Exercise 1's positions (each seeded, so a failure can be replayed)."""
    monkeypatch.setattr(ch03, "_fresh_rng", lambda: random.Random(request.param))
    return request.param


# --- Exercise 1: offset_from_codes --------------------------------------------------------------
SLOWEST = 10000.0 ** (-6 / 8)  # pair 3 of d = 8: one turn takes 2π / 1e-3 ≈ 6283 positions


def _turn(code, j):
    return math.atan2(float(code[2 * j]), float(code[2 * j + 1]))


def offset_by_slowest_pair(code_a, code_b):
    """Read the slowest pair's turn from code_a to code_b, bring it into (-π, π], divide by its frequency."""
    turn = _turn(code_b, 3) - _turn(code_a, 3)
    turn = (turn + math.pi) % (2 * math.pi) - math.pi
    return turn / SLOWEST


def offset_by_rotation(code_a, code_b):
    """Another right form: the slow pair as complex numbers, b * conj(a) = e^{i k θ} (numpy, float32 codes)."""
    a, b = np.asarray(code_a, dtype=np.float32), np.asarray(code_b, dtype=np.float32)
    za, zb = complex(a[7], a[6]), complex(b[7], b[6])  # (cos, sin) as cos + i sin
    return np.float32(np.angle(zb * za.conjugate()) / SLOWEST)


def test_offset_from_codes_cases_are_the_codes_of_real_positions(draw):
    """Independent of the checker: the codes are §1's table at real positions, whose slowest pair turns by less
    than π between them; the first case passes π on the way (so an unwrapped difference is a turn off)."""
    torch.testing.assert_close(ch03.code_of(7.0), pl.sinusoidal_positions(8, 8, dtype=torch.float64)[7])
    cases = ch03._code_cases(random.Random(draw))
    assert len(cases) == 7 and cases[2][0] == cases[2][1]
    for m, n in cases:
        assert 0 <= m <= 1e9 and 0 <= n <= 1e9 + 3000 and abs(n - m) * SLOWEST < math.pi
        assert abs(offset_by_slowest_pair(ch03.code_of(m), ch03.code_of(n)) - (n - m)) < 1e-6
    m, n = cases[0]
    assert n > m and abs((_turn(ch03.code_of(n), 3) - _turn(ch03.code_of(m), 3)) / SLOWEST - (n - m)) > 6000
    assert cases[1][1] < cases[1][0]


def test_offset_from_codes_draws_new_positions_at_every_check():
    assert ch03._code_cases(ch03._fresh_rng()) != ch03._code_cases(ch03._fresh_rng())


@pytest.mark.parametrize("right", [offset_by_slowest_pair, offset_by_rotation,
                                   lambda a, b: torch.tensor(offset_by_slowest_pair(a, b))])
def test_offset_from_codes_accepts_right_answers(right, draw, capsys):
    assert check.offset_from_codes(right) is True
    assert "all correct!" in capsys.readouterr().out


def _fast_pair(code_a, code_b):  # pair 0: one radian per position, so its turn repeats every 2π positions
    return (_turn(code_b, 0) - _turn(code_a, 0) + math.pi) % (2 * math.pi) - math.pi


def _memorised(table):
    """A lookup of the answers one check saw, keyed by the first code: the shortcut of reading the cases."""
    return lambda a, b: table[tuple(np.round(np.asarray(a, dtype=np.float64), 9))]


@pytest.mark.parametrize("wrong, says", [
    (lambda a, b: -offset_by_slowest_pair(a, b), "you read m - n"),
    (lambda a, b: abs(offset_by_slowest_pair(a, b)), "right size, wrong sign"),
    (lambda a, b: round(offset_by_slowest_pair(a, b)), "a whole number"),
    (_fast_pair, "repeats within 3000 positions"),
    (lambda a, b: (_turn(b, 3) - _turn(a, 3)) / SLOWEST, "whole turn of the slowest pair"),  # not wrapped
    (lambda a, b: 0.0, "not the offset"),
    (lambda a, b: [1.0, 2.0], "one number"),
])
def test_offset_from_codes_names_the_misconception_without_the_offset(wrong, says, draw, capsys):
    assert check.offset_from_codes(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    for m, n in ch03._code_cases(random.Random(draw)):  # neither the offsets nor the positions are printed
        for secret in (n - m, m, n):
            if abs(secret) >= 10:  # (small ones would match the case numbers "2 of 7")
                assert f"{secret:g}" not in out and f"{abs(secret):g}" not in out


def _search_over_whole_offsets(code_a, code_b):
    """The forbidden route: try every whole offset, turning code_a by the library's rotation."""
    f64 = pl.rope_frequencies(8, dtype=torch.float64)
    return min(range(-3000, 3000), key=lambda k: float((pl.rope_matrix(-k, 8, inv_freq=f64) @ code_a - code_b).norm()))


def _search_by_hand(code_a, code_b):
    """The same search written out, no library: a loop over 6000 candidates, refined to a tenth."""
    def miss(k):
        return sum((math.sin(_turn(code_a, j) + k * 10000 ** (-j / 4)) - float(code_b[2 * j])) ** 2 for j in range(4))
    best = min(range(-3000, 3000), key=miss)
    return min((best + t / 10 for t in range(-10, 11)), key=miss)


@pytest.mark.parametrize("shortcut, says", [
    (_search_over_whole_offsets, "calls pl.rope_matrix"),
    (_search_by_hand, "runs a long loop"),
    (lambda a, b: float(pl.sinusoidal_positions(2, 8)[0, 0]), "calls pl.sinusoidal_positions"),
])
def test_offset_from_codes_refuses_a_search(shortcut, says, capsys):
    assert check.offset_from_codes(shortcut) is False
    out = capsys.readouterr().out
    assert says in out
    assert pl.rope_matrix(0, 2).tolist() == [[1.0, 0.0], [0.0, 1.0]]  # the library is whole again


def test_offset_from_codes_refuses_answers_memorised_from_another_check(capsys):
    """Reading a check's cases (say from the checker's source) and replaying them fails the next check."""
    seen = ch03._code_cases(random.Random(1))
    table = {tuple(np.round(ch03.code_of(m).numpy(), 9)): n - m for m, n in seen}
    ch03_rng = ch03._fresh_rng
    try:
        ch03._fresh_rng = lambda: random.Random(1)
        assert check.offset_from_codes(_memorised(table)) is True  # the very same draw: it "works"
        ch03._fresh_rng = lambda: random.Random(2)
        assert check.offset_from_codes(_memorised(table)) is False  # any other draw: it cannot
        assert "KeyError" in capsys.readouterr().out
    finally:
        ch03._fresh_rng = ch03_rng


def test_offset_from_codes_unattempted(capsys):
    assert check.offset_from_codes(None) is None
    assert "not attempted yet" in capsys.readouterr().out


# --- Exercise 2: offset_only_score ---------------------------------------------------------------
F16 = pl.rope_frequencies(16, dtype=torch.float64)
J = torch.tensor([[0.0, 1.0], [-1.0, 0.0]], dtype=torch.float64)


def on_pairs(blocks):
    """A 16x16 block-diagonal matrix: blocks[j] acts on pair j (a 2x2 block, or None for zeros)."""
    return torch.block_diag(*[torch.zeros(2, 2, dtype=torch.float64) if b is None else b for b in blocks])


RIGHT_A = on_pairs([None, None, None] + [J] * 5)  # a quarter turn on the pairs that stay within half a circle


def test_offset_only_score_fact_independent_of_the_checker():
    """p_m^T (J on pair j) p_n = sin((m - n) θ_j) = -sin(k θ_j): positive for k < 0 while |k| θ_j < π, and the
    pairs 3..7 satisfy 63 θ_j < π; with every pair the sum turns negative (at k = -17 first)."""
    p = pl.sinusoidal_positions(64, 16, dtype=torch.float64)
    g = p @ RIGHT_A @ p.T
    for m, n in ((5, 2), (30, 27), (10, 25), (0, 63), (63, 0)):
        torch.testing.assert_close(g[m, n], -torch.sin((n - m) * F16[3:]).sum())
    assert (63 * F16[3:] < math.pi).all() and 63 * F16[2] > math.pi
    k = torch.arange(1, 64, dtype=torch.float64)[:, None]
    every_pair = torch.sin(k * F16).sum(-1)  # the score of the quarter turn on all 8 pairs, at offset -k
    assert every_pair.min() < -0.9 and int((every_pair < 0).nonzero()[0]) + 1 == 17


@pytest.mark.parametrize("right", [
    RIGHT_A,
    RIGHT_A.float().numpy() * 3.0,  # any positive scale, any array
    on_pairs([None, None] + [J] * 6),  # pair 2 too: outweighed by the slow pairs, so still right
    on_pairs([None] * 7 + [J]),  # the slowest pair alone
    on_pairs([None, None, None] + [float(j) * J for j in range(3, 8)]),  # a positive weight per pair
    RIGHT_A.tolist(),
])
def test_offset_only_score_accepts_right_answers(right, capsys):
    assert check.offset_only_score(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (torch.randn(16, 16, generator=torch.Generator().manual_seed(0), dtype=torch.float64),
     "depends on where the pair sits"),  # W_Q^T W_K at random
    (torch.eye(16), "s(k) = s(-k)"),  # §6's plain dot product
    (pl.rope_matrix(-4, 16, inv_freq=F16) + pl.rope_matrix(4, 16, inv_freq=F16), "s(k) = s(-k)"),  # symmetric
    (-RIGHT_A, "mirror"),  # the sign slip
    (on_pairs([J] * 8), "sign changes among the keys on one side"),  # every pair, the fast ones too
    (on_pairs([None] + [J] * 7), "sign changes among the keys on one side"),  # fails at one offset only
    (pl.rope_matrix(-4, 16, inv_freq=F16), "part of your A still scores"),  # the old exercise's answer, M_4
    (RIGHT_A + 0.3 * torch.eye(16, dtype=torch.float64), "part of your A still scores"),  # a symmetric part too
    (torch.zeros(16, 16), "0 at every offset"),
    (torch.eye(8), "must be 16x16"),
])
def test_offset_only_score_names_the_misconception(wrong, says, capsys):
    assert check.offset_only_score(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "pairs 3" not in out and "quarter" not in out and "[[0" not in out  # the design stays hidden


def test_offset_only_score_unattempted(capsys):
    assert check.offset_only_score(None) is None
    assert "not attempted yet" in capsys.readouterr().out


# --- Exercise 3: slow_pairs ----------------------------------------------------------------------
def too_slow_by_exponents(d):
    """Pair j of the buggy table turns at 10000^(-4j/d): slower than 10000^(-(d-2)/d) iff 4j > d - 2 (exactly)."""
    return sum(1 for j in range(d // 2) if 4 * j > d - 2) if d < 10**6 else d // 4


def test_slow_pairs_fact_by_the_exponents():
    """Independent of the checker: the buggy angles are 10000^(-4j/d), and the count is floor(d/4) for every even
    d (checked by the exponents for every d up to 2000); at d ≡ 2 (mod 4) one pair is exactly as slow."""
    row = ch03.buggy_sinusoids(2, 64)[1]
    theta = torch.atan2(row[0::2], row[1::2])
    torch.testing.assert_close(theta, 10000.0 ** (-4 * torch.arange(32, dtype=torch.float64) / 64))
    assert all(too_slow_by_exponents(d) == d // 4 for d in range(2, 2000, 2))
    assert [j for j in range(3) if 4 * j == 6 - 2] == [1]  # d = 6: pair 1 turns exactly as fast as the slowest
    for d, (right, _) in ch03.SLOW_CASES.items():
        assert ch03._slow_seal(too_slow_by_exponents(d), d) == right


@pytest.mark.parametrize("right", [
    too_slow_by_exponents,
    lambda d: d // 4,
    lambda d: np.int64(d // 2 - 1 - (d - 2) // 4),
    lambda d: torch.tensor(d // 4),
    lambda d: float(d // 4),
])
def test_slow_pairs_accepts_right_answers(right, capsys):
    assert check.slow_pairs(right) is True
    assert "all correct!" in capsys.readouterr().out


def _count_from_the_table(d):
    row = ch03.buggy_sinusoids(2, d)[1]
    return int((torch.atan2(row[0::2], row[1::2]) < 10000 ** (-(d - 2) / d)).sum())


def _count_from_own_table(d):
    """The table rebuilt by hand (no call to the builder): a loop over the pairs."""
    return sum(1 for j in range(d // 2) if 10000 ** (-4 * j / d) < 10000 ** (-(d - 2) / d))


@pytest.mark.parametrize("shortcut, says", [
    (_count_from_the_table, "calls check.ch03.buggy_sinusoids"),
    (_count_from_own_table, "runs a long loop over the pairs"),
    (lambda d: int((10000 ** (-4 * np.arange(d // 2) / d) < 10000 ** (-(d - 2) / d)).sum()), "calls numpy.arange"),
])
def test_slow_pairs_refuses_counting_on_a_table(shortcut, says, capsys):
    assert check.slow_pairs(shortcut) is False
    out = capsys.readouterr().out
    assert says in out
    assert ch03.buggy_sinusoids(2, 4).shape == (2, 4)  # whole again


@pytest.mark.parametrize("wrong, says", [
    (lambda d: 0, "builder is right"),  # no bug seen
    (lambda d: d // 2, "not every pair"),
    (lambda d: (d + 2) // 4, "off by one"),  # the boundary pair counted as slower at d = 6, 10, ...
    (lambda d: d // 4 - 1, "off by one"),
    (lambda d: d // 8, "not that count"),
    (lambda d: d / 4, "must be a whole number"),
    (lambda d: "16", "must be a whole number"),
])
def test_slow_pairs_names_the_misconception_without_the_count(wrong, says, capsys):
    assert check.slow_pairs(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    for d in ch03.SLOW_CASES:
        assert f"= {d // 4}" not in out and f"{d // 4:,} " not in out


def test_slow_pairs_unattempted(capsys):
    assert check.slow_pairs(None) is None
    assert check.slow_pairs(lambda d: (_ for _ in ()).throw(NotImplementedError)) is None
    assert "not attempted yet" in capsys.readouterr().out


def test_slow_pairs_notebook_shows_the_library_function_verbatim():
    """Exercise 3 prints the buggy builder as text in its markdown: it must be the checker's function."""
    from pathlib import Path

    source = (Path(__file__).parents[1] / "notebooks" / "src" / "03_sinusoids.py").read_text()
    block = source.split("# ```python\n", 1)[1].split("# ```\n", 1)[0]
    shown = "\n".join(line[2:] if line.startswith("# ") else "" for line in block.splitlines())
    assert shown.strip() == inspect.getsource(ch03.buggy_sinusoids).strip()


# --- the answer key is not in the learner's hands ------------------------------------------------
def test_no_function_of_the_checker_module_passes_an_exercise(capsys):
    """Whatever the module defines, none of it is an answer: no callable passes Exercise 1 or 3, no constant
    or zero-argument result passes Exercise 2, and no constant holds Exercise 3's counts."""
    counts = {d // 4 for d in ch03.SLOW_CASES}
    assert {"code_of", "buggy_sinusoids", "position_scores", "SLOW_CASES"} <= defined_here(ch03).keys()
    for name, value in defined_here(ch03).items():
        if callable(value):
            for checker in (check.offset_from_codes, check.slow_pairs):
                assert checker(value) is not True, name
            try:
                produced = value()
            except Exception:  # most need arguments
                continue
            assert check.offset_only_score(produced) is not True, name
        else:
            assert check.offset_only_score(value) is not True, name
            if isinstance(value, (dict, list, tuple)):  # SLOW_CASES holds widths and digests, never a count
                assert not counts & set(flat(value)), name
    capsys.readouterr()


def test_the_checker_source_holds_no_count_and_no_designed_matrix():
    source = inspect.getsource(ch03)
    assert "// 4" not in source and "4 * j" not in source and "d - 2) / 4" not in source
    assert "rope_matrix(-4" not in source and "quarter" not in source and "[[0" not in source
