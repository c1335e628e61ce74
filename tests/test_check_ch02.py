"""Chapter 2 checkers: right answers pass, wrong ones fail with a reason, unattempted ones say so."""
import math

import torch

import posenc_lib as pl
from posenc_lib import check


def _out(capsys):
    return capsys.readouterr().out


RIGHT_AFFINE = {"wrap": [1, 3], "no_wrap": []}


def test_affine_counter_right_answer(capsys):
    assert check.affine_counter(RIGHT_AFFINE) is True
    assert "all correct!" in _out(capsys)
    assert check.affine_counter({"wrap": (3, 1), "no_wrap": set()}) is True  # any order and container


def test_affine_counter_wrong_answers_count_without_naming(capsys):
    assert check.affine_counter({"wrap": [1, 2, 3], "no_wrap": []}) is False  # k = 2 flips bit 1 alone
    out = _out(capsys)
    assert "wrap: 1 of your offsets has an exact affine map" in out and "no_wrap: right" in out
    assert "k = 2" not in out and "[1, 3]" not in out
    assert check.affine_counter({"wrap": [1, 3], "no_wrap": [1]}) is False  # the finite-table trap
    assert "no_wrap: 1 of your offsets has an exact affine map" in _out(capsys)
    assert check.affine_counter({"wrap": [1], "no_wrap": []}) is False
    assert "1 offset with no affine map missing" in _out(capsys)


def test_affine_counter_rejects_bad_formats(capsys):
    assert check.affine_counter([1, 3]) is False
    assert "keys 'wrap' and 'no_wrap'" in _out(capsys)
    assert check.affine_counter({"wrap": [1, 4], "no_wrap": []}) is False
    assert "offsets from [1, 2, 3]" in _out(capsys)
    assert check.affine_counter({"wrap": "13", "no_wrap": []}) is False
    assert check.affine_counter({"wrap": [True], "no_wrap": []}) is False
    assert check.affine_counter(None) is None
    assert "not attempted yet" in _out(capsys)


def test_no_affine_offsets_by_the_square_and_by_construction():
    """The keyed answer, from the argument the exercise wants (not from least squares)."""
    p = {i: torch.tensor([i >> 1 & 1, i & 1], dtype=torch.float64) for i in range(4)}
    torch.testing.assert_close(p[0] + p[3], p[1] + p[2])  # the square: any affine f keeps this balance
    balanced = [k for k in (1, 2, 3) if torch.equal(p[k % 4] + p[(3 + k) % 4], p[(1 + k) % 4] + p[(2 + k) % 4])]
    assert balanced == [2]  # k = 1 and 3 break it: no affine map
    flip_bit_1 = lambda q: torch.tensor([1 - q[0], q[1]], dtype=torch.float64)  # affine: M = diag(-1, 1), b = [1, 0]
    assert all(torch.equal(flip_bit_1(p[i]), p[(i + 2) % 4]) for i in range(4))
    # Without wrap-around k = 1 needs p_0, p_1, p_2 -> p_1, p_2, p_3: solve for [M^T; b] exactly.
    src = torch.stack([torch.cat([p[i], torch.ones(1, dtype=torch.float64)]) for i in range(3)])
    dst = torch.stack([p[i + 1] for i in range(3)])
    a = torch.linalg.solve(src, dst)  # 3 points not on a line: a unique exact map
    torch.testing.assert_close(src @ a, dst)
    assert check.ch02.no_affine_offsets(wrap=True) == RIGHT_AFFINE["wrap"]
    assert check.ch02.no_affine_offsets(wrap=False) == RIGHT_AFFINE["no_wrap"]
    assert check.ch02.no_affine_offsets(wrap=True, d=6) == [k for k in range(1, 64) if k != 32]


RIGHT_STEPS = {1: 32, 2: 16, 3: 8, 4: 4, 5: 2, 6: 1}


def test_carry_steps(capsys):
    assert check.carry_steps(RIGHT_STEPS) is True
    assert "all correct!" in _out(capsys)
    assert check.carry_steps({**RIGHT_STEPS, 6: 0, 5: 3}) is False
    out = _out(capsys)
    assert "add up to the 63 steps" in out and "2 of the 6 counts are wrong" in out
    assert check.carry_steps({1: 32, 2: 16, 3: 8, 4: 4, 5: 2, 6: 2}) is False
    assert "add up to 64" in _out(capsys)
    assert check.carry_steps({1: 32}) is False
    assert "keys 1 .. 6" in _out(capsys)
    assert check.carry_steps({t: 10.5 for t in range(1, 7)}) is False
    assert "whole number" in _out(capsys)
    assert check.carry_steps(None) is None
    assert "not attempted yet" in _out(capsys)


def test_carry_steps_counts_are_trailing_ones():
    """Steps i -> i+1 flip (trailing ones of i) + 1 bits; counted here with integers, not tensors."""
    def trailing_ones(i):
        return (i ^ (i + 1)).bit_length() - 1

    counts = {t: sum(trailing_ones(i) + 1 == t for i in range(63)) for t in range(1, 7)}
    assert counts == RIGHT_STEPS
    steps = (pl.binary_positions(64, 6)[1:] - pl.binary_positions(64, 6)[:-1]).norm(dim=-1) ** 2
    assert sorted(round(s) for s in steps.tolist()) == sorted(t for t, c in counts.items() for _ in range(c))


def test_smallest_bits(capsys):
    assert check.smallest_bits(lambda n: (n - 1).bit_length()) is True
    assert "binary_positions(1000, 10) works" in _out(capsys)
    assert check.smallest_bits(lambda n: math.ceil(math.log2(n))) is True  # exact for these n
    assert check.smallest_bits(lambda n: n.bit_length()) is False  # off by one at powers of two
    out = _out(capsys)
    assert "fn(2) = 2 is not the smallest" in out and "expected" not in out  # the right count stays hidden
    assert check.smallest_bits(lambda n: int(math.log2(n))) is False
    assert check.smallest_bits(lambda n: str(n)) is False
    assert check.smallest_bits(10) is False
    assert "must be a function" in _out(capsys)


def test_smallest_bits_unattempted(capsys):
    def stub(n):
        raise NotImplementedError

    assert check.smallest_bits(stub) is None
    assert check.smallest_bits(None) is None
    assert "not attempted yet" in _out(capsys)


def test_integer_cosine(capsys):
    assert check.integer_cosine((10, 10)) is True
    assert "all correct!" in _out(capsys)
    assert check.integer_cosine([10, 10]) is True
    assert check.integer_cosine((9, 10)) is False  # cos(x, x + p_9) = 1/sqrt(82) > 0.1
    out = _out(capsys)
    assert "still 0.1 or more" in out and "differ" in out
    assert check.integer_cosine((10, 11)) is False
    assert "an earlier position" in _out(capsys)
    assert check.integer_cosine((10, 80)) is False  # the width does not matter
    assert check.integer_cosine(1 / math.sqrt(10)) is False  # the old single-number answer
    assert "must be a pair" in _out(capsys)
    assert check.integer_cosine(("10", 10)) is False
    assert check.integer_cosine(None) is None
    assert "not attempted yet" in _out(capsys)


def test_integer_cosine_answer_is_what_layernorm_gives():
    """cos(x, x + i*1) = 1/sqrt(1 + i^2) for a LayerNorm-ed x, any width: measured for several seeds,
    so the first i below 0.1 is 10 (1/sqrt(101) < 0.1 <= 1/sqrt(82))."""
    g = torch.Generator().manual_seed(0)
    for d in (64, 4096):
        x = torch.nn.functional.layer_norm(torch.randn(20, d, generator=g, dtype=torch.float64), (d,))
        for i in (3, 9, 10):
            p = pl.integer_positions(i + 1, d, dtype=torch.float64)[i]
            cos = torch.nn.functional.cosine_similarity(x, x + p, dim=-1)
            torch.testing.assert_close(cos, torch.full((20,), 1 / math.sqrt(1 + i * i), dtype=torch.float64),
                                       atol=1e-4, rtol=0)  # LayerNorm eps
    assert 1 / math.sqrt(1 + 9**2) >= 0.1 > 1 / math.sqrt(1 + 10**2)
