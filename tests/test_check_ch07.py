"""Checkers of chapter 7 (posenc_lib.check.ch07): right, wrong and unattempted answers."""

import torch

import posenc_lib as pl
from posenc_lib import check


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


def test_nope_counter(capsys):
    assert run(check.nope_counter, None, capsys)[0] is None
    ok, out = run(check.nope_counter, lambda n: 1 / torch.arange(1, n + 1, dtype=torch.float64), capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.nope_counter, lambda n: 1 / torch.full((n,), float(n)), capsys)  # no mask: 1/n
    assert ok is False and "hint" in out
    assert "n=5: differs from the causal average" in out and "0.5" not in out  # 1, 1/2, 1/3 ... stay hidden


def test_pi_frequencies(capsys):
    assert run(check.pi_frequencies, None, capsys)[0] is None
    assert run(check.pi_frequencies, lambda d, s: pl.rope_frequencies(d) / s, capsys)[0] is True
    assert run(check.pi_frequencies, lambda d, s: pl.rope_frequencies(d) * s, capsys)[0] is False

    def stub(d, s):
        raise NotImplementedError

    assert run(check.pi_frequencies, stub, capsys)[0] is None


def test_ntk_base(capsys):
    assert run(check.ntk_base, None, capsys)[0] is None
    assert run(check.ntk_base, lambda b, s, d: b * s ** (d / (d - 2)), capsys)[0] is True
    ok, out = run(check.ntk_base, lambda b, s, d: b * s, capsys)  # forgets the exponent
    assert ok is False and "base' = base * s**(d/(d-2))" in out
    assert run(check.ntk_base, lambda b, s, d: "x", capsys)[0] is False  # raises inside: reported


def test_rope_2d(capsys):
    assert run(check.rope_2d, None, capsys)[0] is None

    def right(x, rows, cols):
        h = x.shape[-1] // 2
        return torch.cat((pl.apply_rope(x[..., :h], rows), pl.apply_rope(x[..., h:], cols)), -1)

    def swapped(x, rows, cols):
        return right(x, cols, rows)

    assert run(check.rope_2d, right, capsys)[0] is True
    ok, out = run(check.rope_2d, swapped, capsys)
    assert ok is False and "differs" in out
    assert run(check.rope_2d, lambda x, r, c: pl.apply_rope(x), capsys)[0] is False
