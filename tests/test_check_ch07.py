"""Checkers of chapter 7 (posenc_lib.check.ch07): right answers pass, each shortcut the prompt forbids is refused
and named, each misconception the checker claims to name is named, and the module hands over no answer.

Right answers are written here from their derivations (closed forms, or an independent rounding routine),
never by calling the checker's own code.
"""
import math
import sys

import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check
from posenc_lib.check import ch07


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


def stub(*args):
    raise NotImplementedError


@pytest.mark.parametrize("name", ["counter_merge", "smallest_divisors", "one_base_in_range", "uniform_divisors"])
def test_unattempted_and_grading(name, monkeypatch, capsys):
    checker = getattr(check, name)
    assert run(checker, None, capsys)[0] is None
    assert run(checker, stub, capsys)[0] is None
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="not attempted"):
        checker(None)


def test_the_checker_module_hands_over_no_answer():
    """The module's own callables are the four checkers and two helpers that return no answer (shortcut targets;
    the frequencies and which pairs never turned, both printed in §2); Exercise 1's positions appear only sealed."""
    own = {name for name, obj in vars(ch07).items() if callable(obj) and getattr(obj, "__module__", None) == ch07.__name__}
    assert own == set(ch07.__all__) | {"_library_shortcuts", "_slow_pairs"}
    assert {label for _, _, label in ch07._library_shortcuts()} == {
        "pl.scaled_rope_frequencies", "pl.rope_angle_novelty", "pl.rope_combination_gap"}
    theta, slow = ch07._slow_pairs(128, 10000.0, 2048)
    torch.testing.assert_close(theta, pl.rope_frequencies(128, dtype=torch.float64))
    assert slow.nonzero().flatten().tolist() == list(range(41, 64))  # §2's j* = 40.2: pairs 41..63, printed there
    text = repr(vars(ch07))
    assert "189" not in text and "1463" not in text


# ---------------------------------------------------------------- Exercise 1: where NoPE's counter merges

def _bf16(x: float) -> float:
    """Round to bfloat16's 8 significant bits, ties to even (frexp gives x = m 2^e, 0.5 <= m < 1)."""
    m, e = math.frexp(x)
    return round(m * 256) / 256 * 2.0**e


def _first_merge(rounded) -> int:
    i = 0
    while rounded(1 / (i + 1)) != rounded(1 / (i + 2)):
        i += 1
    return i


MERGE = {torch.bfloat16: _first_merge(_bf16), torch.float16: _first_merge(lambda x: float(np.float16(x)))}


def test_counter_merge(capsys):
    assert MERGE == {torch.bfloat16: 189, torch.float16: 1463}
    # The solution's prediction: merges start once 1/(i+2) is below 2^-(p-1), p significant bits.
    assert 2**7 <= MERGE[torch.bfloat16] + 2 < 2**8 and 2**10 <= MERGE[torch.float16] + 2 < 2**11
    ok, out = run(check.counter_merge, MERGE.__getitem__, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.counter_merge, lambda dt: MERGE[dt] - 1, capsys)
    assert ok is False and "188 and 189 still differ" in out and "hint" in out
    later = {torch.bfloat16: 197, torch.float16: 1489}  # they merge too, but not first
    assert all((1 / torch.tensor([i + 1.0, i + 2.0], dtype=torch.float64)).to(dt).unique().numel() == 1
               for dt, i in later.items())
    ok, out = run(check.counter_merge, later.__getitem__, capsys)
    assert ok is False and "an earlier pair of neighbours already does" in out
    ok, out = run(check.counter_merge, lambda dt: MERGE[dt] + 0.5, capsys)
    assert ok is False and "not a position" in out
    assert "189" not in run(check.counter_merge, lambda dt: 5, capsys)[1]  # the answer stays hidden


# ---------------------------------------------------------------- Exercise 2: the smallest divisor per pair

def divisors_right(d, base, L0, L):
    """Pairs that turned saw every angle: 1. The others' largest angle (L - 1) theta / kappa stays in the arc
    (L0 - 1) theta: kappa = (L - 1) / (L0 - 1), and never below 1."""
    theta = [base ** (-2 * j / d) for j in range(d // 2)]
    return [1.0 if L0 * t >= 2 * math.pi else max(1.0, (L - 1) / (L0 - 1)) for t in theta]


def test_smallest_divisors(capsys):
    ok, out = run(check.smallest_divisors, divisors_right, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.smallest_divisors, lambda *a: torch.tensor(divisors_right(*a)), capsys)
    assert ok is True


@pytest.mark.parametrize("wrong, says", [
    (lambda d, b, L0, L: [L / L0] * (d // 2), "pairs that turned in training are slowed"),  # PI for every pair
    (lambda d, b, L0, L: [k if k == 1 else max(1.0, L / L0) for k in divisors_right(d, b, L0, L)],
     "still reaches past its trained arc"),  # L / L0: the last distance is L - 1, the last trained one L0 - 1
    (lambda d, b, L0, L: [k if k == 1 else k * 1.01 for k in divisors_right(d, b, L0, L)], "slowed more than needed"),
    (lambda d, b, L0, L: [min(k, 0.5) for k in divisors_right(d, b, L0, L)], "speeds a pair up"),
    (lambda *a: "x", "expected d/2"),
])
def test_smallest_divisors_names_the_misconception(wrong, says, capsys):
    ok, out = run(check.smallest_divisors, wrong, capsys)
    assert ok is False and says in out and "hint" in out


def test_smallest_divisors_refuses_the_library(capsys):
    """Llama 3 with both band edges at L0 slows exactly the right pairs, but measuring through it is refused."""
    def via_llama3(d, b, L0, L):
        f, _ = pl.scaled_rope_frequencies(d, method="llama3", factor=(L - 1) / (L0 - 1), original_max_position=L0,
                                          low_freq_factor=1.0, high_freq_factor=1.0, base=b, dtype=torch.float64)
        return pl.rope_frequencies(d, base=b, dtype=torch.float64) / f

    ok, out = run(check.smallest_divisors, via_llama3, capsys)
    assert ok is False and "calls pl.scaled_rope_frequencies" in out
    assert pl.scaled_rope_frequencies(16, method="linear", factor=2.0)[1] == 1.0  # the library works again


# ---------------------------------------------------------------- Exercise 3: one base for every pair

def one_base_right(d, base, L0, L):
    """A base b' slows pair j by (b'/b)^(2j/d), least for the smallest j; the first pair that never turned must be
    slowed by (L - 1) / (L0 - 1): b' = b ((L - 1)/(L0 - 1))^(d / (2 j_min)), and b itself when L <= L0. j_min is
    the first pair past j* = (d/2) ln(L0 / 2 pi) / ln b (§2), found without a loop over the pairs."""
    j_min = math.floor(d / 2 * math.log(L0 / (2 * math.pi)) / math.log(base)) + 1
    return base * max(1.0, (L - 1) / (L0 - 1)) ** (d / (2 * j_min))


def one_base_by_array(d, base, L0, L):
    """The same, with j_min read off an array of every pair's frequency: right for a small head only."""
    theta = pl.rope_frequencies(d, base=base, dtype=torch.float64)
    j_min = int((L0 * theta < 2 * math.pi).nonzero()[0])
    return base * max(1.0, (L - 1) / (L0 - 1)) ** (d / (2 * j_min))


def one_base_by_loop(d, base, L0, L):
    """The same, with j_min found by a loop over the pairs."""
    j_min = next(j for j in range(d // 2) if L0 * base ** (-2 * j / d) < 2 * math.pi)
    return base * max(1.0, (L - 1) / (L0 - 1)) ** (d / (2 * j_min))


def test_one_base_right_agrees_with_the_loop_on_small_heads():
    for case in ch07._DIVISOR_CASES:
        assert one_base_right(*case) == pytest.approx(one_base_by_loop(*case), rel=1e-12)


@pytest.mark.parametrize("shortcut, says", [
    (one_base_by_array, "torch.arange with"),  # rope_frequencies of 2 10^9 features
    (one_base_by_loop, "runs a loop over the pairs"),
])
def test_one_base_refuses_a_sweep_over_every_pair(shortcut, says, capsys):
    before = (torch.arange, sys.gettrace())
    ok, out = run(check.one_base_in_range, shortcut, capsys)
    assert ok is False and says in out and "hint" in out
    assert (torch.arange, sys.gettrace()) == before


def test_one_base_right_keeps_every_pair_in_range_and_no_smaller_base_does():
    """Independent of the checker: the library's frequencies at b' keep every slow pair inside its arc."""
    d, base, L0, L = 128, 10000.0, 2048, 16384
    theta = pl.rope_frequencies(d, base=base, dtype=torch.float64)
    slow = L0 * theta < 2 * math.pi
    for b2, fits in ((one_base_right(d, base, L0, L), True), (one_base_right(d, base, L0, L) * 0.999, False)):
        new = pl.rope_frequencies(d, base=b2, dtype=torch.float64)
        assert bool(((L - 1) * new[slow] <= (L0 - 1) * theta[slow] * (1 + 1e-12)).all()) is fits
    novelty = pl.rope_angle_novelty(theta, L0, L, inv_freq=pl.rope_frequencies(d, base=one_base_right(d, base, L0, L),
                                                                              dtype=torch.float64))
    assert not (novelty > theta).any()  # §2's measurement agrees: no pair at an unseen angle
    assert one_base_right(d, base, L0, L) / base == pytest.approx(25.7, abs=0.1)  # NTK's: 8.27


@pytest.mark.parametrize("right", [one_base_right, lambda *a: torch.tensor(one_base_right(*a)),
                                   lambda *a: np.float64(one_base_right(*a))])
def test_one_base_accepts_right_answers(right, capsys):
    ok, out = run(check.one_base_in_range, right, capsys)
    assert ok is True and "all correct!" in out


def one_base_slowest_pair(d, base, L0, L):
    """The same rule on the slowest pair (NTK's choice), with the right divisor."""
    return base * max(1.0, (L - 1) / (L0 - 1)) ** (d / (d - 2))


@pytest.mark.parametrize("wrong, says", [
    (lambda d, b, L0, L: b * (L / L0) ** (d / (d - 2)), "NTK's base"),
    (lambda d, b, L0, L: b * L / L0, "acts through an exponent"),
    (one_base_slowest_pair, "still turns past its trained arc"),
    (lambda d, b, L0, L: one_base_right(d, b, L0, L) * (L0 / L) ** 0.01 if L > L0 else b,
     "still turns past its trained arc"),
    (lambda d, b, L0, L: one_base_right(d, b, L0, L) * 1.5, "more than needed"),
    (lambda d, b, L0, L: b / 2, "speeds every pair up"),
    (lambda d, b, L0, L: [b, b], "not a base"),
])
def test_one_base_names_the_misconception(wrong, says, capsys):
    ok, out = run(check.one_base_in_range, wrong, capsys)
    assert ok is False and says in out and "hint" in out
    assert f"{one_base_right(128, 10000.0, 2048, 16384):.4g}" not in out


def test_one_base_refuses_the_measurement(capsys):
    """Searching for the base with §2's measurement is refused, and the guard is undone."""
    def search(d, b, L0, L):
        theta = pl.rope_frequencies(d, base=b, dtype=torch.float64)
        new = b
        while (pl.rope_angle_novelty(theta, L0, L, inv_freq=pl.rope_frequencies(d, base=new, dtype=torch.float64))
               > theta).any():
            new *= 1.01
        return new

    before = pl.rope_angle_novelty
    ok, out = run(check.one_base_in_range, search, capsys)
    assert ok is False and "calls pl.rope_angle_novelty" in out and pl.rope_angle_novelty is before


# ---------------------------------------------------------------- Exercise 4: uniform divisors between two spans

def spans_right(test, trained):
    """r / kappa must lie in [c, e] for r in [a, b]: kappa >= b / e and kappa <= a / c; none if b / e > a / c."""
    (a, b), (c, e) = test, trained
    lo, hi = b / e, a / c
    return None if lo > hi else (lo, hi)


def spans_by_every_distance(test, trained):
    """Checks every distance of the span for the two candidate divisors: a loop over the span."""
    lo, hi = test[1] / trained[1], test[0] / trained[0]
    ok = all(trained[0] <= r / k <= trained[1] for k in (lo, hi) for r in range(test[0], test[1] + 1))
    return (lo, hi) if ok else None


def test_uniform_divisors_refuses_a_loop_over_the_span(capsys):
    ok, out = run(check.uniform_divisors, spans_by_every_distance, capsys)
    assert ok is False and "runs a loop over the distances" in out and "hint" in out


def test_uniform_divisors(capsys):
    ok, out = run(check.uniform_divisors, spans_right, capsys)
    assert ok is True and "all correct!" in out
    assert spans_right((501, 510), (53, 62)) == pytest.approx((510 / 62, 501 / 53))  # PI's 8 is not in it
    assert not 510 / 62 <= 8 <= 501 / 53
    assert spans_right((8, 510), (8, 62)) is None  # the dictionary anywhere: no single divisor


@pytest.mark.parametrize("wrong, says", [
    (lambda t, tr: None if spans_right(t, tr) is None else spans_right(t, tr)[::-1], "smallest divisor is larger"),
    (lambda t, tr: (t[0] / tr[0], t[1] / tr[1]), "no divisor lands both ends"),  # ends paired the wrong way
    (lambda t, tr: None if spans_right(t, tr) is None else ((t[1] + 1) / (tr[1] + 1), t[0] / tr[0]),
     "lands a test distance outside"),
    (lambda t, tr: None if spans_right(t, tr) is None else (spans_right(t, tr)[0] * 1.01, spans_right(t, tr)[1]),
     "too narrow"),
    (lambda t, tr: None, "some divisor does land"),
    (lambda t, tr: "range", "expected (kappa_min, kappa_max)"),
])
def test_uniform_divisors_names_the_misconception(wrong, says, capsys):
    ok, out = run(check.uniform_divisors, wrong, capsys)
    assert ok is False and says in out and "hint" in out
