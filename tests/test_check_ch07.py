"""Checkers of chapter 7 (posenc_lib.check.ch07): right, wrong and unattempted answers.

Right answers are written here from their derivations (closed forms, or an independent rounding
routine), never by calling the checker's own reference.
"""
import math

import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


def stub(*args):
    raise NotImplementedError


def _bf16(x: float) -> float:
    """Round to bfloat16's 8 significant bits, ties to even (frexp gives x = m 2^e, 0.5 <= m < 1)."""
    m, e = math.frexp(x)
    return round(m * 256) / 256 * 2.0**e


def _first_merge(rounded) -> int:
    i = 0
    while rounded(1 / (i + 1)) != rounded(1 / (i + 2)):
        i += 1
    return i


def test_counter_merge(capsys):
    assert run(check.counter_merge, None, capsys)[0] is None
    assert run(check.counter_merge, stub, capsys)[0] is None
    merge = {torch.bfloat16: _first_merge(_bf16), torch.float16: _first_merge(lambda x: float(np.float16(x)))}
    assert merge == {torch.bfloat16: 189, torch.float16: 1463}
    # The solution's prediction: merges start once 1/(i+2) is below 2^-(p-1), p significant bits.
    assert 2**7 <= merge[torch.bfloat16] + 2 < 2**8 and 2**10 <= merge[torch.float16] + 2 < 2**11
    ok, out = run(check.counter_merge, merge.__getitem__, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.counter_merge, lambda dt: merge[dt] + 1, capsys)
    assert ok is False and "too late" in out and "hint" in out
    ok, out = run(check.counter_merge, lambda dt: merge[dt] - 1, capsys)
    assert ok is False and "too early" in out and "188 and 189 still differ" in out
    ok, out = run(check.counter_merge, lambda dt: merge[dt] + 0.5, capsys)
    assert ok is False and "not a position" in out
    assert "189" not in run(check.counter_merge, lambda dt: 5, capsys)[1]  # the answer stays hidden


def test_dynamic_ntk_length(capsys):
    """Right: L0 (2 - 1/s), from s L / L0 - (s - 1) = s, written as a float or rounded to the integer it is."""
    assert run(check.dynamic_ntk_length, None, capsys)[0] is None
    assert run(check.dynamic_ntk_length, stub, capsys)[0] is None
    ok, out = run(check.dynamic_ntk_length, lambda L0, s: L0 * (2 - 1 / s), capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.dynamic_ntk_length, lambda L0, s: torch.tensor(round(L0 * (2 * s - 1) / s)), capsys)
    assert ok is True  # a tensor holding the whole number
    ok, out = run(check.dynamic_ntk_length, lambda L0, s: s * L0, capsys)  # the usual slip: "dynamic = static at s L0"
    assert ok is False and "is s·L0" in out and "larger than s" in out
    ok, out = run(check.dynamic_ntk_length, lambda L0, s: float(L0), capsys)  # where it only starts
    assert ok is False and "starts to stretch" in out
    ok, out = run(check.dynamic_ntk_length, lambda L0, s: [L0, s], capsys)
    assert ok is False and "not a length" in out
    for L0, s in ((2048, 8.0), (8192, 4.0)):  # no expected length printed for a wrong answer
        assert f"{L0 * (2 - 1 / s):g}" not in run(check.dynamic_ntk_length, lambda a, b: 1.0, capsys)[1]


def test_dynamic_ntk_length_is_where_the_library_agrees():
    """At L = L0 (2 - 1/s) the library's dynamic NTK gives static NTK's frequencies, and not at s L0."""
    for L0, s in ((4096, 4.0), (2048, 8.0), (4096, 2.0)):
        L = round(L0 * (2 - 1 / s))
        static, _ = pl.scaled_rope_frequencies(64, method="ntk", factor=s, original_max_position=L0, dtype=torch.float64)
        at = lambda n: pl.scaled_rope_frequencies(64, method="dynamic", factor=s, original_max_position=L0,  # noqa: E731
                                                  seq_len=n, dtype=torch.float64)[0]
        torch.testing.assert_close(at(L), static, rtol=1e-12, atol=0)
        assert not torch.allclose(at(int(s * L0)), static)


def test_ntk_base_for_pair(capsys):
    assert run(check.ntk_base_for_pair, None, capsys)[0] is None
    assert run(check.ntk_base_for_pair, stub, capsys)[0] is None

    def right(d, base, s, j):  # (b'/b)^(-2j/d) = 1/s, solved for b'
        return base * s ** (d / (2 * j))

    for form in (right, lambda *a: torch.tensor(right(*a), dtype=torch.float64), lambda *a: np.float64(right(*a)),
                 lambda d, b, s, j: math.exp(math.log(b) + d / (2 * j) * math.log(s))):
        ok, out = run(check.ntk_base_for_pair, form, capsys)
        assert ok is True and "all correct!" in out
    # the property the design is for: pair j slows by exactly s, every slower pair by more (s^(i/j))
    d, base, s, j = 128, 10000.0, 8.0, 41
    ratio = pl.rope_frequencies(d, base=right(d, base, s, j), dtype=torch.float64) / pl.rope_frequencies(
        d, base=base, dtype=torch.float64)
    assert math.isclose(ratio[j].item(), 1 / s, rel_tol=1e-12) and (ratio[j + 1:] < 1 / s).all()
    assert (ratio[:j] > 1 / s).all()
    wrong = {
        "NTK's own base": lambda d, b, s, j: b * s ** (d / (d - 2)),
        "neighbouring pair": lambda d, b, s, j: b * s ** (d / (2 * (j + 1))),
        "upside down": lambda d, b, s, j: b * s ** (2 * j / d),
        "acts through an exponent": lambda d, b, s, j: b * s,
        "never slower": lambda d, b, s, j: b / s,
        "not a base": lambda d, b, s, j: [1.0, 2.0],
    }
    for message, fn in wrong.items():
        ok, out = run(check.ntk_base_for_pair, fn, capsys)
        assert ok is False and message in out, (message, out)
        assert f"{right(128, 10000.0, 8.0, 41):.4g}" not in out  # never the answer


def test_smallest_divisors(capsys):
    assert run(check.smallest_divisors, None, capsys)[0] is None
    assert run(check.smallest_divisors, stub, capsys)[0] is None

    def right(d, base, L0, L):
        theta = [base ** (-2 * j / d) for j in range(d // 2)]
        return [1.0 if L0 * t >= 2 * math.pi else max(1.0, (L - 1) / (L0 - 1)) for t in theta]

    ok, out = run(check.smallest_divisors, right, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.smallest_divisors, lambda d, b, L0, L: [L / L0] * (d // 2), capsys)  # PI for every pair
    assert ok is False and "pairs that turned in training are slowed" in out and "speeds a pair up" in out

    def positions_from_one(d, base, L0, L):  # L / L0: the last distance is L - 1, the last trained one L0 - 1
        return [k if k == 1 else max(1.0, L / L0) for k in right(d, base, L0, L)]

    ok, out = run(check.smallest_divisors, positions_from_one, capsys)
    assert ok is False and "still reaches past its trained arc" in out

    def too_much(d, base, L0, L):
        return [k if k == 1 else k * 1.01 for k in right(d, base, L0, L)]

    ok, out = run(check.smallest_divisors, too_much, capsys)
    assert ok is False and "slowed more than needed" in out and out.count("✓") == 1  # L <= L0: all ones
    ok, out = run(check.smallest_divisors, lambda *a: "x", capsys)
    assert ok is False and "expected d/2" in out


@pytest.mark.parametrize("name", ["counter_merge", "dynamic_ntk_length", "ntk_base_for_pair", "smallest_divisors"])
def test_wrong_answers_raise_under_grading(name, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="not attempted"):
        getattr(check, name)(None)


def test_ntk_frequencies_match_the_base_the_checker_teaches():
    """The library's NTK is the base b s^(d/(d-2)) that §2 states (Exercise 3 builds on it)."""
    d, s = 128, 8.0
    ntk, _ = pl.scaled_rope_frequencies(d, method="ntk", factor=s, dtype=torch.float64)
    torch.testing.assert_close(ntk, pl.rope_frequencies(d, base=10000.0 * s ** (d / (d - 2)), dtype=torch.float64))


def test_slow_pairs_only_is_llama3_with_both_band_edges_at_L0():
    """Exercise 4's discussion: Llama 3 with low_freq_factor = high_freq_factor = 1 divides exactly
    the pairs with wavelength > L0 (those that never turned) by s and keeps the others."""
    d, L0, s = 128, 2048, 8.0
    theta = pl.rope_frequencies(d, dtype=torch.float64)
    step, _ = pl.scaled_rope_frequencies(d, method="llama3", factor=s, original_max_position=L0,
                                         low_freq_factor=1.0, high_freq_factor=1.0, dtype=torch.float64)
    turned = L0 * theta >= 2 * math.pi
    torch.testing.assert_close(theta / step, torch.where(turned, 1.0, s).double())
