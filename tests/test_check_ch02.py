"""Chapter 2 checkers: right answers pass, wrong ones fail with a reason, unattempted ones say so."""
import math

import torch

import posenc_lib as pl
from posenc_lib import check


def _out(capsys):
    return capsys.readouterr().out


def test_binary_code_right_and_wrong(capsys):
    assert check.binary_code([0, 1, 1, 0, 1]) is True
    assert "13 = 01101" in _out(capsys)
    assert check.binary_code(torch.tensor([0.0, 1.0, 1.0, 0.0, 1.0])) is True
    assert check.binary_code([1, 0, 1, 1, 0]) is False
    assert "reverse order" in _out(capsys)
    assert check.binary_code([0, 1, 1, 1, 0]) is False
    assert "spell 14, not 13" in _out(capsys)
    assert check.binary_code([1, 1, 0, 1]) is False
    assert "has 5 entries" in _out(capsys)
    assert check.binary_code([0, 2, 1, 0, 1]) is False
    assert "0 or 1" in _out(capsys)


def test_binary_code_other_positions_and_widths(capsys):
    assert check.binary_code([1, 0, 1], position=5, d=3) is True
    assert check.binary_code(pl.binary_positions(200, 8)[199], position=199, d=8) is True
    assert check.binary_code([1, 0, 1], position=9, d=3) is False  # 9 does not fit in 3 bits
    assert "0 <= position < 2**d" in _out(capsys)


def test_binary_code_unattempted(capsys):
    assert check.binary_code(None) is None
    assert "not attempted yet" in _out(capsys)


def test_normalised_step(capsys):
    assert check.normalised_step((0.25, 0.125)) is True
    assert "depends on the length m" in _out(capsys)
    assert check.normalised_step((2 / 8, 2 / 16)) is True
    assert check.normalised_step((0.125, 0.0625)) is False  # one step, not two
    assert "two steps" in _out(capsys)
    assert check.normalised_step((2, 2)) is False  # the raw integer difference
    assert check.normalised_step(0.25) is False
    assert "must be a pair" in _out(capsys)
    assert check.normalised_step(None) is None
    assert "not attempted yet" in _out(capsys)


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
    assert check.integer_cosine(1 / math.sqrt(10)) is True
    assert check.integer_cosine(torch.tensor(0.3162)) is True
    assert check.integer_cosine(0.25) is False
    assert "mean 0" in _out(capsys)
    assert check.integer_cosine("0.316") is False
    assert check.integer_cosine(None) is None
    assert "not attempted yet" in _out(capsys)


def test_integer_cosine_answer_is_what_layernorm_gives():
    """The expected value is the measured one, for several seeds."""
    g = torch.Generator().manual_seed(0)
    x = torch.nn.functional.layer_norm(torch.randn(20, 64, generator=g), (64,))
    p = pl.integer_positions(4, 64)[3]
    cos = torch.nn.functional.cosine_similarity(x, x + p, dim=-1)
    torch.testing.assert_close(cos, torch.full((20,), 1 / math.sqrt(10)), atol=1e-4, rtol=0)
