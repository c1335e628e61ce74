"""The chapter 3 checkers: right answers pass, the shortcuts each prompt forbids are refused, each
misconception a checker names gets its name, and the checker module hands over no answer."""
import gc
import inspect
import itertools
import math
import operator
import random
import re
import sys

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
BASE = 1e12  # Exercise 1's base: pair j of d = 8 turns 10^(-3 j) rad per position
SLOWEST = BASE ** (-6 / 8)  # pair 3: one turn takes 2π / 1e-9 ≈ 6.3 10^9 positions, over |n - m| < 10^9 at most 1 rad


def _turn(code, j):
    return math.atan2(float(code[2 * j]), float(code[2 * j + 1]))


def offset_by_slowest_pair(code_a, code_b):
    """Read the slowest pair's turn from code_a to code_b, bring it into (-π, π], divide by its frequency."""
    turn = _turn(code_b, 3) - _turn(code_a, 3)
    turn = (turn + math.pi) % (2 * math.pi) - math.pi
    return turn / SLOWEST


def offset_by_rotation(code_a, code_b):
    """Another right form: the slow pair as complex numbers, b * conj(a) = e^{i k θ} (numpy)."""
    a, b = np.asarray(code_a), np.asarray(code_b)
    za, zb = complex(a[7], a[6]), complex(b[7], b[6])  # (cos, sin) as cos + i sin
    return np.float64(np.angle(zb * za.conjugate()) / SLOWEST)


def test_offset_from_codes_cases_are_the_codes_of_real_positions(draw):
    """Independent of the checker: the codes are §1's table at real positions, whose slowest pair turns by less
    than π between them; the first case passes π on the way (so an unwrapped difference is a turn off)."""
    torch.testing.assert_close(ch03.code_of(7.0), pl.sinusoidal_positions(8, 8, base=BASE, dtype=torch.float64)[7])
    cases = ch03._code_cases(random.Random(draw))
    assert len(cases) == 7 and cases[2][0] == cases[2][1]
    for m, n in cases:
        assert 0 <= m <= 1e10 and 0 <= n <= 1e10 + 1e9 and abs(n - m) < 1e9 and abs(n - m) * SLOWEST < 1
        assert abs(offset_by_slowest_pair(ch03.code_of(m), ch03.code_of(n)) - (n - m)) < 1e-4  # float64: ~1e-6
    m, n = cases[0]
    assert n > m and abs((_turn(ch03.code_of(n), 3) - _turn(ch03.code_of(m), 3)) / SLOWEST - (n - m)) > 6e9
    assert cases[1][1] < cases[1][0]


def test_offset_from_codes_draws_new_positions_at_every_check():
    assert ch03._code_cases(ch03._fresh_rng()) != ch03._code_cases(ch03._fresh_rng())


_arctan2, _asarray = np.arctan2, np.asarray  # bound before the check, as ``from numpy import arctan2`` does


def offset_by_prebound_numpy(code_a, code_b):
    """The right formula with numpy names bound before the check: the memory budget does not refuse it."""
    a, b = _asarray(code_a), _asarray(code_b)
    turn = _arctan2(b[6::8], b[7::8]) - _arctan2(a[6::8], a[7::8])
    return float((turn[0] + math.pi) % (2 * math.pi) - math.pi) / SLOWEST


@pytest.mark.parametrize("right", [offset_by_slowest_pair, offset_by_rotation, offset_by_prebound_numpy,
                                   lambda a, b: torch.tensor(offset_by_slowest_pair(a, b), dtype=torch.float64)])
def test_offset_from_codes_accepts_right_answers(right, draw, capsys):
    assert check.offset_from_codes(right) is True
    assert "all correct!" in capsys.readouterr().out


def _fast_pair(code_a, code_b):  # pair 0: one radian per position, so its turn repeats every 2π positions
    return (_turn(code_b, 0) - _turn(code_a, 0) + math.pi) % (2 * math.pi) - math.pi


def _wrap(turn):
    return (turn + math.pi) % (2 * math.pi) - math.pi


def _swapped_atan2(code_a, code_b):
    """The slowest pair read with its sine and cosine swapped, atan2(cos, sin): the angle π/2 - x, turning backwards."""
    return _wrap(math.atan2(float(code_b[7]), float(code_b[6])) - math.atan2(float(code_a[7]), float(code_a[6]))) / SLOWEST


def _by_asin(code_a, code_b):
    """Each angle from the sine alone: asin only returns angles in [-π/2, π/2]."""
    return (math.asin(float(code_b[6])) - math.asin(float(code_a[6]))) / SLOWEST


def test_the_swapped_atan2_is_the_reversed_difference_and_asin_is_right_near_zero(draw):
    """Why they get those names: swapping sin and cos gives -(n - m) at every case, exactly what reading from the
    second code to the first gives, so its message names both; asin is right while both angles stay within a quarter
    circle of 0 (case 4 starts there), so it is no sign error."""
    for m, n in ch03._code_cases(random.Random(draw)):
        a, b = ch03.code_of(m), ch03.code_of(n)
        assert abs(_swapped_atan2(a, b) - offset_by_slowest_pair(b, a)) < 1e-4  # float64 at 10^9: ~1e-6
    a, b = ch03.code_of(1e6), ch03.code_of(5.01e8)  # slowest angles 0.001 and 0.501 rad
    assert abs(_by_asin(a, b) - 5e8) < 1e-4 and abs(_swapped_atan2(a, b) + 5e8) < 1e-4


def _memorised(table):
    """A lookup of the answers one check saw, keyed by the first code: the shortcut of reading the cases."""
    return lambda a, b: table[tuple(np.round(np.asarray(a, dtype=np.float64), 9))]


@pytest.mark.parametrize("wrong, says", [
    (lambda a, b: -offset_by_slowest_pair(a, b), "opposite sign to n - m at every pair"),
    (_swapped_atan2, "opposite sign to n - m at every pair"),  # the same function as the line above
    (_by_asin, "one number of its pair"),
    (lambda a, b: _wrap(math.asin(float(b[6])) - math.asin(float(a[6]))) / SLOWEST, "one number of its pair"),
    (lambda a, b: (math.acos(float(b[7])) - math.acos(float(a[7]))) / SLOWEST, "one number of its pair"),
    (lambda a, b: abs(offset_by_slowest_pair(a, b)), "right size, wrong sign"),
    (lambda a, b: round(offset_by_slowest_pair(a, b)), "a whole number"),
    (_fast_pair, "repeats within 10^9 positions"),
    (lambda a, b: (_turn(b, 3) - _turn(a, 3)) / SLOWEST, "whole turn of the slowest pair"),  # not wrapped
    (lambda a, b: 0.0, "not the offset"),
    (lambda a, b: [1.0, 2.0], "one number"),
    # the prompt asks for float64: the codes read in float32 (angles good to ~1e-7 rad, ~100 positions on pair 3) ...
    (lambda a, b: offset_by_slowest_pair(a.float(), b.float()), "float32's precision"),
    (lambda a, b: torch.tensor(offset_by_slowest_pair(a, b), dtype=torch.float32), "float32's precision"),  # ... or returned
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
        return sum((math.sin(_turn(code_a, j) + k * BASE ** (-j / 4)) - float(code_b[2 * j])) ** 2
                   + (math.cos(_turn(code_a, j) + k * BASE ** (-j / 4)) - float(code_b[2 * j + 1])) ** 2 for j in (1,))
    best = min(range(-3000, 3000), key=miss)
    return min((best + t / 10 for t in range(-10, 11)), key=miss)


def _vectorised_search(code_a, code_b):
    """The cold reader's shortcut: every candidate offset on a grid in one tensor, code_a's pairs turned by each with
    torch.sin/cos, the best kept and refined (no Python loop, no library call, no array builder of 10^8)."""
    theta = BASE ** (-torch.arange(4, dtype=torch.float64) / 4)
    a = torch.atan2(code_a[0::2], code_a[1::2])

    def best(candidates):
        turned = a + candidates[:, None] * theta
        miss = (torch.sin(turned) - code_b[0::2]).square() + (torch.cos(turned) - code_b[1::2]).square()
        return candidates[miss.sum(-1).argmin()]

    k = best(torch.linspace(-3000, 3000, 600_001, dtype=torch.float64))
    return best(torch.linspace(float(k) - 0.01, float(k) + 0.01, 20_001, dtype=torch.float64))


def _numpy_search(code_a, code_b):
    """The same grid in numpy."""
    theta = BASE ** (-np.arange(4) / 4)
    a = np.arctan2(np.asarray(code_a)[0::2], np.asarray(code_a)[1::2])
    k = np.linspace(-3000, 3000, 600_001)
    miss = ((np.sin(a + k[:, None] * theta) - np.asarray(code_b)[0::2]) ** 2).sum(-1)
    return float(k[miss.argmin()])


def _ufunc_search(code_a, code_b):
    """Cold read 2's route: the grid made by a numpy ufunc on a range() (no builder called), refined once."""
    theta = np.power(BASE, np.divide(range(4), -4))
    a = np.arctan2(np.asarray(code_a)[0::2], np.asarray(code_a)[1::2])
    k = np.multiply(range(-300_000, 300_001), 1e-2)
    miss = np.square(np.subtract(np.sin(np.add(a, np.multiply.outer(k, theta))), np.asarray(code_b)[0::2])).sum(-1)
    return float(k[miss.argmin()])


_ar, _sin, _cos = np.arange, np.sin, np.cos  # bound at import, before any guard patches numpy (cold read 16)


def _prebound_search(code_a, code_b):
    """Cold read 16's route: numpy's builder and ufuncs bound to other names before the check (as ``from numpy
    import sin, cos, arange`` does), a grid of 12 million offsets, step 0.0005, in one go."""
    theta = BASE ** (-_ar(4) / 4)
    a, b = np.asarray(code_a), np.asarray(code_b)
    start = np.arctan2(a[2], a[3])  # pair 1, 1e-3 rad per position: no full turn over |k| < 3000
    k = _ar(-3000, 3000, 0.0005)
    miss = (_sin(start + k * theta[1]) - b[2]) ** 2 + (_cos(start + k * theta[1]) - b[3]) ** 2
    return float(k[miss.argmin()])


def _whole_offset_grid(code_a, code_b):
    """The smallest grid over every offset: the 6001 whole offsets at once, on all four pairs, then the best one
    refined on pair 1 (which reads a turn of under half a circle without ambiguity)."""
    theta = BASE ** (-torch.arange(4, dtype=torch.float64) / 4)
    turn = torch.atan2(code_b[0::2], code_b[1::2]) - torch.atan2(code_a[0::2], code_a[1::2])
    k = torch.arange(-3000, 3001, dtype=torch.float64)
    best = k[torch.cos(k[:, None] * theta - turn).sum(-1).argmax()]
    return float(best) + _wrap(float(turn[1]) - float(best) * 1e-3) / 1e-3  # refined on pair 1 (1e-3 rad a step)


def _whole_offsets_by_operators(code_a, code_b):
    """Cold read 20's route: the 6001 whole offsets from np.arange, scored with numpy's element-wise operators only
    (np.e ** (1j * ks * theta), abs, **), then two refinements of 201 candidates: 6403 elements from builders."""
    a, b = np.asarray(code_a), np.asarray(code_b)
    theta = BASE ** (-1 / 4)  # pair 1
    turn = np.e ** (1j * (np.arctan2(b[2], b[3]) - np.arctan2(a[2], a[3])))
    ks = np.arange(-3000, 3001)
    best = ks[abs(np.e ** (1j * ks * theta) - turn).argmin()]
    for width in (1.0, 0.01):
        ks = best + np.linspace(-width, width, 201)
        best = ks[(abs(np.e ** (1j * ks * theta) - turn) ** 2).argmin()]
    return float(best)


def _short_search_on_tensors(code_a, code_b, step=10**7):
    """The allowed short search (a coarse scan on the slowest pair, then golden-section steps) written on the tensors
    as given: every index and every operation on it makes a tensor of one element, hundreds in all."""
    start = torch.atan2(code_a[6], code_a[7])

    def miss(k):
        return (torch.sin(start + k * SLOWEST) - code_b[6]) ** 2 + (torch.cos(start + k * SLOWEST) - code_b[7]) ** 2

    best = min(range(-10**9, 10**9 + 1, step), key=miss)
    lo, hi, r = best - step, best + step, (math.sqrt(5) - 1) / 2
    for _ in range(70):
        x1, x2 = hi - r * (hi - lo), lo + r * (hi - lo)
        lo, hi = (lo, x2) if miss(x1) < miss(x2) else (x1, hi)
    return float((lo + hi) / 2)


def _map_search(code_a, code_b, window=100_000):
    """Cold read 24's route: every whole offset of a window scored at C speed (map, operator, math: no traced Python
    line, no tensor element) on pair 2, the best refined on pair 1. Over the old span, |k| < 3000, such a search
    found every offset; over |k| < 10^9 no window it can afford covers the span."""
    turn = [math.atan2(float(code_b[2 * j]), float(code_b[2 * j + 1]))
            - math.atan2(float(code_a[2 * j]), float(code_a[2 * j + 1])) for j in range(3)]
    ks = range(-window, window + 1)
    scores = map(math.cos, map(operator.sub, map(operator.mul, ks, itertools.repeat(1e-6)), itertools.repeat(turn[2])))
    best = max(zip(scores, ks))[1]  # whole offsets at C speed, pair 2 (1e-6 rad a step: no full turn in the window)
    return best + _wrap(turn[1] - best * 1e-3) / 1e-3


def test_the_vectorised_searches_are_right_when_unguarded():
    """So that refusing them below is refusing a working shortcut, not a broken one."""
    m, n = 123_456.25, 123_456.25 + 1234.5
    a, b = ch03.code_of(m), ch03.code_of(n)
    assert abs(float(_vectorised_search(a, b)) - 1234.5) < 1e-3
    assert abs(_numpy_search(a, b) - 1234.5) < 0.02 and abs(_ufunc_search(a, b) - 1234.5) < 0.02
    assert abs(_prebound_search(a, b) - 1234.5) < 1e-3
    assert abs(_whole_offset_grid(a, b) - 1234.5) < 1e-6 and abs(_search_by_hand(a, b) - 1234.5) < 0.06
    assert abs(_whole_offsets_by_operators(a, b) - 1234.5) < 0.01
    assert abs(_map_search(a, b) - 1234.5) < 1e-6


@pytest.mark.parametrize("shortcut, says", [
    (_search_over_whole_offsets, "calls pl.rope_matrix"),
    (_search_by_hand, "runs out of its steps"),  # a loop over every whole offset (its indexing is free: one element each)
    (_whole_offset_grid, "all the candidate offsets at once?"),
    (lambda a, b: float(pl.sinusoidal_positions(2, 8)[0, 0]), "calls pl.sinusoidal_positions"),
    (_vectorised_search, "all the candidate offsets at once?"),
    (_numpy_search, "all the candidate offsets at once?"),
    (_ufunc_search, "all the candidate offsets at once?"),
    (_prebound_search, "all the candidate offsets at once?"),
    (_whole_offsets_by_operators, "all the candidate offsets at once?"),  # numpy's operators are counted too
])
def test_offset_from_codes_refuses_a_library_call_or_a_search_over_every_offset(shortcut, says, capsys):
    assert check.offset_from_codes(shortcut) is False
    out = capsys.readouterr().out
    assert says in out
    assert pl.rope_matrix(0, 2).tolist() == [[1.0, 0.0], [0.0, 1.0]]  # the library is whole again
    assert torch.linspace(0, 1, 10**6).numel() == 10**6  # and nothing is counted any more


def test_offset_from_codes_puts_a_search_over_every_offset_out_of_reach(draw, capsys):
    """Cold read 24: a search at C speed (map) passes no step or element budget, so the span makes it no answer:
    2 10^9 whole offsets, where the widest window such a search affords in a check (here 2 10^5) misses the drawn
    offsets, and the checker says the answer is not the offset."""
    assert ch03.CODE_SPAN == 10**9 and ch03.CODE_SPAN * SLOWEST < math.pi  # the slowest pair still reads it
    assert sum(abs(n - m) > 100_000 for m, n in ch03._code_cases(random.Random(draw))) >= 5
    assert check.offset_from_codes(_map_search) is False
    out = capsys.readouterr().out
    assert "not the offset" in out or "repeats within" in out


def _coarse_then_golden_search(code_a, code_b):
    """Cold read 11's route, now allowed ("any route is fine, a short search included"): 21 whole candidates on the
    slowest pair, then 50 golden-section steps. It finds the offset only because it reads the pair that never
    completes a turn over |k| < 10^9: the same search on pair 0 fails."""
    return _golden_search(code_a, code_b, pair=3)


def _golden_search(code_a, code_b, pair):
    a, b = [float(x) for x in code_a], [float(x) for x in code_b]
    theta = BASE ** (-pair / 4)
    start = math.atan2(a[2 * pair], a[2 * pair + 1])

    def miss(k):
        return (math.sin(start + k * theta) - b[2 * pair]) ** 2 + (math.cos(start + k * theta) - b[2 * pair + 1]) ** 2

    best = min(range(-10**9, 10**9 + 1, 10**7), key=miss)
    lo, hi, r = best - 1e7, best + 1e7, (math.sqrt(5) - 1) / 2
    for _ in range(70):
        x1, x2 = hi - r * (hi - lo), lo + r * (hi - lo)
        lo, hi = (lo, x2) if miss(x1) < miss(x2) else (x1, hi)
    return (lo + hi) / 2


def test_offset_from_codes_accepts_a_short_search_on_the_slowest_pair(capsys):
    assert check.offset_from_codes(_coarse_then_golden_search) is True
    assert check.offset_from_codes(_short_search_on_tensors) is True  # its one-element tensors are free
    assert check.offset_from_codes(lambda a, b: _short_search_on_tensors(a, b, step=3 * 10**6)) is True  # 667 candidates
    assert check.offset_from_codes(lambda a, b: _golden_search(a, b, pair=0)) is False


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


def _walk_to_positions(frame):
    """Cold read 25's route: up the stack from the answer's caller (the checker's lambda, holding the case index i)
    to the checker's frame that holds the positions it drew, and n - m read from there."""
    i = frame.f_locals["i"]
    while "positions" not in frame.f_locals:
        frame = frame.f_back
    m, n = frame.f_locals["positions"][i]
    return n - m


def _stack_walk(code_a, code_b):
    return _walk_to_positions(sys._getframe(1))


def _stack_walk_by_inspect(code_a, code_b):
    return _walk_to_positions(inspect.currentframe().f_back)


def _stack_walk_by_traceback(code_a, code_b):
    try:
        raise ValueError
    except ValueError as error:
        return _walk_to_positions(error.__traceback__.tb_frame.f_back)


def _stack_walk_caught(code_a, code_b):
    """The refusal caught, and a fallback returned: the attempt is refused all the same."""
    try:
        return _stack_walk(code_a, code_b)
    except Exception:
        return 0.0


def test_the_stack_walk_is_right_when_frames_are_not_refused(monkeypatch, capsys):
    """So that refusing it below is refusing a working shortcut: with the frame guard off, it passes."""
    guarded = ch03.answers_under_guard
    monkeypatch.setattr(ch03, "answers_under_guard", lambda *a, **k: guarded(*a, **{**k, "frames": False}))
    for walk in (_stack_walk, _stack_walk_by_inspect, _stack_walk_by_traceback):
        assert check.offset_from_codes(walk) is True
    capsys.readouterr()


@pytest.mark.parametrize("walk", [_stack_walk, _stack_walk_by_inspect, _stack_walk_by_traceback, _stack_walk_caught,
                                  lambda a, b: 0.0 * len(gc.get_objects())])
def test_offset_from_codes_refuses_walking_to_the_checkers_frames(walk, capsys):
    assert check.offset_from_codes(walk) is False
    out = capsys.readouterr().out
    assert "the checker's frames" in out and "the two codes you are given carry the offset" in out
    assert sys._getframe(0).f_back is not None and gc.get_objects()  # refused no longer once the check is over


def test_offset_from_codes_unattempted(capsys):
    assert check.offset_from_codes(None) is None
    assert "not attempted yet" in capsys.readouterr().out


# --- Exercise 2: offset_only_score (the relative part of A) -------------------------------------------
def relative_part(a):
    """Per pair, keep A's coordinates along I and J (each of squared length 2): a = (A_xx + A_yy) / 2,
    b = (A_xy - A_yx) / 2; nothing across pairs."""
    a = torch.as_tensor(a, dtype=torch.float64)
    out = torch.zeros_like(a)
    for j in range(a.shape[0] // 2):
        x = a[2 * j: 2 * j + 2, 2 * j: 2 * j + 2]
        s, t = (x[0, 0] + x[1, 1]) / 2, (x[0, 1] - x[1, 0]) / 2
        out[2 * j: 2 * j + 2, 2 * j: 2 * j + 2] = torch.stack([torch.stack([s, t]), torch.stack([-t, s])])
    return out


def relative_part_vectorised(a):
    """The same in one pass over the pairs' blocks, float32 numpy out."""
    a = np.asarray(a, dtype=np.float64)
    d = a.shape[0]
    out = np.zeros_like(a)
    i = np.arange(0, d, 2)
    s, t = (a[i, i] + a[i + 1, i + 1]) / 2, (a[i, i + 1] - a[i + 1, i]) / 2
    out[i, i] = out[i + 1, i + 1] = s
    out[i, i + 1], out[i + 1, i] = t, -t
    return out.astype(np.float32)


def _commutant_projection(a):
    """Independent of the closed form: the least-squares projection onto the null space of A -> A M_1 - M_1 A,
    computed numerically over all d^2 entries."""
    d = a.shape[0]
    m1 = pl.rope_matrix(-1, d, inv_freq=pl.rope_frequencies(d, dtype=torch.float64))
    eye = torch.eye(d, dtype=torch.float64)
    commutator = torch.kron(eye, m1.T.contiguous()) - torch.kron(m1, eye)  # row-major vec(A M_1 - M_1 A)
    _, sv, vh = torch.linalg.svd(commutator)
    null = vh[sv < 1e-9]
    return (null.T @ (null @ a.flatten())).view(d, d)


@pytest.mark.parametrize("d", [4, 8, 16, 20])
def test_relative_part_is_the_numerical_projection(d):
    a = torch.randn(d, d, generator=torch.Generator().manual_seed(d), dtype=torch.float64)
    near = _commutant_projection(a)
    torch.testing.assert_close(relative_part(a), near)
    p = pl.sinusoidal_positions(200, d, dtype=torch.float64)
    scores = p @ near @ p.T
    for k in (-150, -3, 0, 5, 120):  # the score of the projection depends on the offset alone
        diagonal = scores.diagonal(k)
        assert float(diagonal.max() - diagonal.min()) < 1e-9


@pytest.mark.parametrize("right", [relative_part, relative_part_vectorised, lambda a: relative_part(a).tolist()])
def test_offset_only_score_accepts_right_answers(right, draw, capsys):
    assert check.offset_only_score(right) is True
    assert "all correct!" in capsys.readouterr().out


def _pairs(a, keep_i, keep_j):
    """relative_part with each coordinate scaled (keep_i, keep_j): 1, 1 is right."""
    right = relative_part(a)
    d = right.shape[0]
    eye = torch.eye(d, dtype=torch.float64)
    sym = right * eye.repeat_interleave(1, 0)  # the diagonal entries: the I part
    return keep_i * sym + keep_j * (right - sym)


def _blocks_kept(a):
    a = torch.as_tensor(a)
    return torch.block_diag(*[a[2 * j: 2 * j + 2, 2 * j: 2 * j + 2] for j in range(a.shape[0] // 2)])


def _first_entry_only(a):
    """a = A_xx instead of the average of the two diagonal entries: offset alone, not nearest."""
    out = relative_part(a)
    a = torch.as_tensor(a)
    for j in range(a.shape[0] // 2):
        out[2 * j, 2 * j] = out[2 * j + 1, 2 * j + 1] = a[2 * j, 2 * j]
    return out


@pytest.mark.parametrize("wrong, says", [
    (lambda a: a, "that is A itself"),
    (_blocks_kept, "each pair's 2x2 block is kept as it is"),
    (lambda a: torch.zeros_like(torch.as_tensor(a)) + torch.eye(a.shape[0]), "not the nearest"),
    (lambda a: _pairs(a, 1, 0), "kept only the part that scores a key before the query like one after it"),
    (lambda a: _pairs(a, 0, 1), "dropped the part that scores before and after alike"),
    (lambda a: _pairs(a, 1, -1), "wrong sign"),
    (lambda a: 2 * relative_part(a), "twice too long"),
    (lambda a: relative_part(a) / 2, "half too short"),
    (_first_entry_only, "not the nearest such matrix"),
    (lambda a: relative_part(a)[:-1], "return a ("),
    (lambda a: torch.full_like(torch.as_tensor(a), float("nan")), "finite numbers"),
])
def test_offset_only_score_names_the_misconception(wrong, says, draw, capsys):
    assert check.offset_only_score(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "/ 2" not in out and "average" not in out and "A_xx" not in out  # the formula stays hidden


def _projection_on_the_basis(a):
    """Cold read 5: the derived answer written as a projection onto the d matrices I_j, J_j (one per pair, each
    d x d, squared length 2), all at once. A correct derivation, so it passes: no element budget refuses it."""
    a = torch.as_tensor(a, dtype=torch.float64)
    d = a.shape[0]
    basis = torch.zeros(d, d, d, dtype=torch.float64)
    for j in range(d // 2):
        basis[2 * j, 2 * j, 2 * j] = basis[2 * j, 2 * j + 1, 2 * j + 1] = 1  # I on pair j
        basis[2 * j + 1, 2 * j, 2 * j + 1], basis[2 * j + 1, 2 * j + 1, 2 * j] = 1, -1  # J on pair j
    return torch.einsum("b,bij->ij", torch.einsum("bij,ij->b", basis, a) / 2, basis)


def test_offset_only_score_accepts_a_projection_over_all_entries(capsys):
    """Any route that returns the right matrix passes, the numerical projection over the d^2 entries included
    (at small widths here; the checker's widths reach 64, where it is slow but still right)."""
    assert check.offset_only_score(_projection_on_the_basis) is True
    assert "all correct!" in capsys.readouterr().out
    a = torch.randn(12, 12, generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    torch.testing.assert_close(_commutant_projection(a), relative_part(a))


def test_offset_only_score_names_an_average_over_shifts_as_not_commuting(capsys):
    """Averaging M_k^T A M_k over 3000 shifts approaches the answer but does not reach it: named for what it is."""
    def averaged(a):
        f = pl.rope_frequencies(a.shape[0], dtype=torch.float64)
        return sum(pl.rope_matrix(k, a.shape[0], inv_freq=f) @ a @ pl.rope_matrix(-k, a.shape[0], inv_freq=f)
                   for k in range(3000)) / 3000

    assert check.offset_only_score(averaged) is False
    assert "does not commute with the shift M_1" in capsys.readouterr().out


def test_offset_only_score_unattempted(capsys):
    assert check.offset_only_score(None) is None
    assert check.offset_only_score(lambda a: (_ for _ in ()).throw(NotImplementedError)) is None
    assert "not attempted yet" in capsys.readouterr().out


def test_offset_only_score_draws_new_matrices():
    """Two checks see different widths or matrices: nothing to memorise."""
    seen = set()
    for _ in range(4):
        captured = []
        check.offset_only_score(lambda a: captured.append(float(a.sum())) or relative_part(a))
        seen.add(tuple(captured))
    assert len(seen) > 1


# --- Exercise 3: slow_pairs ----------------------------------------------------------------------
def slow_by_exponents(d, length):
    """Pair j of the buggy table turns at 10000^(-4j/d) (two_j holds 2j and is doubled again): over L positions it
    turns by L 10000^(-4j/d), at least 0.1 rad for j <= (d/4) log(10 L) / log 10000. The rest are slow."""
    turning = min(d // 2, math.floor(d / 4 * math.log(10 * length) / math.log(10000)) + 1)
    return d // 2 - turning


def fixed_exponent(two_j, d):
    """two_j holds the column index 2j, which is §1's 2i already: the exponent is two_j / d, not 2 two_j / d."""
    return two_j / d


def test_fixed_exponent_fact_by_the_tables():
    """Independent of the checker: the builder with its exponent line fixed is §1's table (pl.sinusoidal_positions)."""
    pos = torch.arange(50, dtype=torch.float64)[:, None]
    for d in (8, 64, 130):
        two_j = torch.arange(0, d, 2, dtype=torch.float64)
        angle = pos / 10000 ** fixed_exponent(two_j, d)
        fixed = torch.stack((torch.sin(angle), torch.cos(angle)), -1).reshape(50, d)
        torch.testing.assert_close(fixed, pl.sinusoidal_positions(50, d, dtype=torch.float64))
        assert not torch.allclose(ch03.buggy_sinusoids(50, d), fixed)


def test_slow_pairs_grades_the_count_alone(capsys):
    """Cold read 24: the fix is answerable from §1, so Exercise 3 grades the count alone (the warm-up has no checker)."""
    assert check.slow_pairs(slow_by_exponents) is True
    out = capsys.readouterr().out
    assert "all correct!" in out and "fixed_exponent" not in out
    with pytest.raises(TypeError):
        check.slow_pairs(slow_by_exponents, fixed_exponent)  # one function: the fix is not graded


def test_notebook_grades_the_count_and_not_the_warm_up():
    """Cold read 24: the fix is answerable from §1, so it is an ungraded warm-up with no checker; the graded cell calls
    slow_pairs on the count alone, and the worked solution checks the fixed builder against §1's table."""
    from pathlib import Path

    source = (Path(__file__).parents[1] / "notebooks" / "src" / "03_sinusoids.py").read_text()
    graded = [cell for cell in source.split("# %%") if '"grade": true' in cell.split("\n", 1)[0]]
    assert any(cell.strip().endswith("_ = check.slow_pairs(slow_count)") for cell in graded)
    assert not any("fixed_exponent" in cell for cell in graded)
    assert "ungraded warm-up" in source and "pl.sinusoidal_positions(n, d)" in source


def test_slow_pairs_fact_by_the_exponents(draw):
    """Independent of the checker: the buggy angles are 10000^(-4j/d), i.e. §1's frequencies with base 10000^2;
    the closed form agrees with the builder's own angles where a table fits, and in these seeded draws the bound's
    pair index (40 digits) is 1e-3 or more from a whole number, so the float64 formulas below are tested off a tie."""
    from decimal import Decimal, getcontext

    getcontext().prec = 40
    row = ch03.buggy_sinusoids(2, 64)[1]
    theta = torch.atan2(row[0::2], row[1::2])
    torch.testing.assert_close(theta, 10000.0 ** (-4 * torch.arange(32, dtype=torch.float64) / 64))
    torch.testing.assert_close(theta, pl.rope_frequencies(64, base=1e8, dtype=torch.float64))
    for d in (6, 64, 1000, 4096):
        for length in (8, 137, 2048, 999_983):  # not a power of 10: L θ_j = 0.1 exactly at none of these
            row = ch03.buggy_sinusoids(2, d)[1]
            assert slow_by_exponents(d, length) == int((0.1 / torch.atan2(row[0::2], row[1::2]) > length).sum())
    cases = ch03._slow_cases(random.Random(draw))
    assert sum(d >= 10**9 for d, _ in cases) == 3 and all(d <= 10**12 and 8 <= n <= 10**6 for d, n in cases)
    for d, length in cases:
        edge = Decimal(d) * (Decimal(10 * length).ln() / Decimal(10000).ln()) / 4  # L θ_j = 0.1 at j = edge
        assert abs(edge - round(edge)) > Decimal("1e-3"), (d, length)  # a float64 formula errs by ~1e-4 at 10^12


@pytest.mark.parametrize("right", [
    slow_by_exponents,
    lambda d, n: np.int64(slow_by_exponents(d, n)),
    lambda d, n: torch.tensor(slow_by_exponents(d, n)),
    lambda d, n: d // 2 - min(d // 2, int(torch.floor(torch.tensor(d / 4 * math.log(10 * n, 1e4),
                                                                      dtype=torch.float64))) + 1),
    lambda d, n: d // 2 - min(d // 2, math.floor(d * math.log10(10 * n) / 16) + 1),
])
def test_slow_pairs_accepts_right_answers(right, draw, capsys):
    assert check.slow_pairs(right) is True
    out = capsys.readouterr().out
    assert "all correct!" in out and "compare with §1's table" in out
    assert not any(word in out for word in ("twice", "doubled", "1e8", "10000", "two_j / d"))  # no fix given away


def _count_by_bisection(d, length):
    """A bisection over the pairs with the listing's own exponent typed in: a route to the count that needs no bug
    found (cold read 15). Cold read 24 found the fix answerable from §1, so it is an ungraded warm-up now: the count
    is the graded question, and reading the buggy exponent off the listing is part of answering it."""
    import bisect

    return d // 2 - bisect.bisect_left(range(d // 2), True, key=lambda j: 0.1 * 10000 ** (4 * j / d) > length)


def test_slow_pairs_accepts_a_bisection_on_the_exponent_read_off_the_listing(capsys):
    assert check.slow_pairs(_count_by_bisection) is True
    assert "all correct!" in capsys.readouterr().out


def _count_from_the_table(d, length):
    """Cold read 10's shortcut: the builder's row 1, atan2, count (no bug found, no derivation)."""
    row = ch03.buggy_sinusoids(2, d)[1]
    return int((0.1 / torch.atan2(row[0::2], row[1::2]) > length).sum())


def _count_from_own_table(d, length):
    """The frequencies typed in by hand (no call to the builder): a loop over the pairs."""
    return sum(1 for j in range(d // 2) if 0.1 * 10000 ** (4 * j / d) > length)


def _count_from_the_library_at_base_1e8(d, length):
    """The bug found (base 10000^2), then counted over a frequency per pair: vectorised, no loop."""
    return int((0.1 / pl.rope_frequencies(d, base=1e8, dtype=torch.float64) > length).sum())


def _count_by_the_checkers_own_turns(d, length):
    """A bisection with the checker's private per-pair turn."""
    import bisect

    return d // 2 - bisect.bisect_left(range(d // 2), True, key=lambda j: 0.1 > length * ch03._pair_turn(j, d))


@pytest.mark.parametrize("shortcut, says", [
    (_count_from_the_table, "does not fit in memory"),
    (_count_from_the_library_at_base_1e8, "does not fit in memory"),
    (lambda d, n: int((10000 ** (4 * np.arange(d // 2) / d) * 0.1 > n).sum()), "does not fit in memory"),
    (_count_from_own_table, "long loop over the pairs"),
    (_count_by_the_checkers_own_turns, "check.ch03._pair_turn"),
])
def test_slow_pairs_refuses_counting_over_the_pairs(shortcut, says, draw, capsys):
    """Every route that counts pair by pair (the builder's table, the library at base 1e8, numpy, a loop) meets a
    width of 10^9 or more, where the table cannot exist: only a formula in d and L (or the exponent, solved) answers."""
    assert shortcut(64, 1000) == slow_by_exponents(64, 1000)  # right where a table fits
    assert check.slow_pairs(shortcut) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out


def _measure_then_scale(d, length):
    """Measure the builder's count at the largest width that fits easily, at the same L, and scale it to d."""
    small = 20_000
    return round(d * _count_from_the_table(small, length) / small)


@pytest.mark.parametrize("wrong, says", [
    (lambda d, n: d // 2 - min(d // 2, math.floor(d / 2 * math.log(10 * n) / math.log(10000)) + 1),
     "belongs to §1's correct table"),  # the bug not seen
    (lambda d, n: d // 2 - min(d // 2, math.floor(d / 4 * math.log(n / (2 * math.pi)) / math.log(10000)) + 1),
     "a full circle"),  # pairs that never complete a turn
    (lambda d, n: slow_by_exponents(d, n) + 1, "off by one"),
    (lambda d, n: slow_by_exponents(d, n) - 1, "off by one"),
    (lambda d, n: d // 2 - slow_by_exponents(d, n), "turn by 0.1 rad or more"),  # the complement
    (lambda d, n: d, "is not a number of pairs"),
    (lambda d, n: 1, "is not that count"),
    (_measure_then_scale, "is not that count"),  # a measurement scaled to 10^12 misses by millions
    (lambda d, n: d // 4, "is not that count"),
    (lambda d, n: d / 4 + 0.5, "must be a whole number"),
    (lambda d, n: "16", "must be a whole number"),
])
def test_slow_pairs_names_the_misconception_without_the_count(wrong, says, draw, capsys):
    assert check.slow_pairs(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    for d, length in ch03._slow_cases(random.Random(draw)):
        assert f"fn({d}, {length}) = {slow_by_exponents(d, length)} " not in out


def test_slow_pairs_hint_names_an_idea_not_the_steps(capsys):
    """Cold read 21: the count's hint named the steps (the slow pairs are the last ones; one inequality in j).
    It now names one idea, the frequencies' geometric progression, and no step of the solution."""
    assert check.slow_pairs(lambda d, n: 1) is False
    hint = capsys.readouterr().out.split("hint:", 1)[1]
    assert "geometric progression" in hint
    assert not any(step in hint for step in ("inequality", "the last", "log", "0.1", "slow pairs are"))


def test_slow_pairs_draws_new_cases():
    assert ch03._slow_cases(ch03._fresh_rng()) != ch03._slow_cases(ch03._fresh_rng())


def test_slow_pairs_unattempted(capsys):
    stub = lambda *args: (_ for _ in ()).throw(NotImplementedError)  # noqa: E731
    assert check.slow_pairs(None) is None
    assert check.slow_pairs(stub) is None
    assert "not attempted yet" in capsys.readouterr().out


def test_pair_turn_is_the_turn_of_each_table():
    """The checker's per-pair turns (no table) against the tables themselves: the buggy builder's row 1 holds its
    turn per position (all below π), and §1's are the library's frequencies."""
    for d in (8, 64, 130):
        row = ch03.buggy_sinusoids(2, d)[1]
        as_built = torch.tensor([ch03._pair_turn(j, d) for j in range(d // 2)], dtype=torch.float64)
        torch.testing.assert_close(as_built, torch.atan2(row[0::2], row[1::2]))
        section_1 = torch.tensor([ch03._pair_turn(j, d, as_built=False) for j in range(d // 2)], dtype=torch.float64)
        torch.testing.assert_close(section_1, pl.rope_frequencies(d, dtype=torch.float64))


def test_slow_pairs_notebook_shows_the_library_function_verbatim():
    """Exercise 3 prints the buggy builder as text in its markdown: it must be the checker's function."""
    from pathlib import Path

    source = (Path(__file__).parents[1] / "notebooks" / "src" / "03_sinusoids.py").read_text()
    block = source.split("# ```python\n", 1)[1].split("# ```\n", 1)[0]
    shown = "\n".join(line[2:] if line.startswith("# ") else "" for line in block.splitlines())
    assert shown.strip() == inspect.getsource(ch03.buggy_sinusoids).strip()


# --- the answer key is not in the learner's hands ------------------------------------------------
def test_no_function_of_the_checker_module_passes_an_exercise(capsys):
    """Whatever the module defines, none of it is an answer: no callable passes any exercise, as a function or
    through what it returns without arguments, and the module stores no sealed answer to hash against."""
    attributes = defined_here(ch03)
    assert {"code_of", "buggy_sinusoids", "_along_rotations", "_pair_turn", "_is_slow_count"} <= attributes.keys()
    for name, value in attributes.items():
        if callable(value):
            for checker in (check.offset_from_codes, check.offset_only_score, check.slow_pairs):
                assert checker(value) is not True, name
    assert not any(isinstance(v, str) and len(v) == 24 for v in flat(list(attributes.values())))  # no digests
    capsys.readouterr()


def test_the_checker_source_holds_no_formula_of_an_answer():
    source = inspect.getsource(ch03)
    assert "// 4" not in source and "4 * j" not in source and "/ 4 *" not in source and "sealed" not in source
    assert not re.search(r"(?<!2 \* )two_j / d", source)  # the fix, two_j / d (the builder's 2 * two_j / d is shown)
    assert "else two_j" not in source and "doubled" not in source  # nor the fix as the other arm of a choice
    assert "with I and with J" not in source and "squared length)" not in source  # nor Ex 2's projection, in words
    exercise_2 = source.split("# Exercise 2:", 1)[1].split("# Exercise 3:", 1)[0]
    assert not re.search(r"\]\s*\)\s*/\s*2", exercise_2)  # no block entries summed and halved: (x[0, 0] + x[1, 1]) / 2


def test_offset_from_codes_prompt_states_the_checker_budget():
    """Exercise 1's prompt names the budget a short search must fit; it is the checker's."""
    from pathlib import Path

    source = (Path(__file__).parents[1] / "notebooks" / "src" / "03_sinusoids.py").read_text()
    assert ch03.CLOSED_FORM_STEPS == 2_000 and ch03.CLOSED_FORM_ELEMENTS == 10_000
    assert "each pair of codes gets 2 000 Python steps and 10 000 tensor elements (a tensor of one number" in " ".join(
        line.lstrip("# ") for line in source.splitlines())


def test_offset_from_codes_hint_points_to_the_section_that_introduces_wavelengths(capsys):
    """Exercise 1's hint names a section for the wavelength: the chapter must introduce wavelengths there (§1),
    not in a later section (cold read 23)."""
    from pathlib import Path

    assert check.offset_from_codes(lambda a, b: 0.0) is False
    hint = capsys.readouterr().out.split("hint:", 1)[1]
    named = re.search(r"wavelength, §(\d+)", hint)
    assert named is not None, hint
    source = (Path(__file__).parents[1] / "notebooks" / "src" / "03_sinusoids.py").read_text()
    sections = re.split(r"^# ## (\d+) · ", source, flags=re.M)  # [preamble, number, body, number, body, ...]
    first = next(num for num, body in zip(sections[1::2], sections[2::2]) if "wavelength" in body)
    assert named.group(1) == first == "1"
