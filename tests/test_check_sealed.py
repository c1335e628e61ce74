"""Sealed answers (check/_core.py): a checker stores a salted digest, and any carrier of one answer seals alike."""
import hashlib

import numpy as np
import pytest
import torch

from posenc_lib.check._core import canonical, near_sealed, sealed, sealed_number


@pytest.mark.parametrize("carrier", [3, 3.0, torch.tensor(3), np.int64(3)])
def test_every_carrier_of_a_whole_number_seals_alike(carrier):
    assert canonical(carrier) == "3"
    assert sealed(carrier, "ex") == sealed(3, "ex")


def test_lists_keep_their_order_and_sets_do_not():
    assert sealed([1, 2], "ex") != sealed([2, 1], "ex")
    assert sealed({1, 2}, "ex") == sealed({2, 1}, "ex") == sealed(frozenset({1, 2}), "ex")
    assert sealed(torch.tensor([1, 2]), "ex") == sealed([1, 2], "ex") == sealed((1, 2), "ex")
    assert sealed({"a", "B "}, "ex") == sealed({"b", "a"}, "ex")


def test_the_salt_separates_exercises_and_the_digest_is_fixed():
    """The digest is sha256 of "posenc/<exercise>/<canonical>", cut to 24 hex digits: stable across runs and
    machines, so a checker can store it."""
    assert sealed(7, "one") != sealed(7, "two")
    assert sealed(7, "one") == hashlib.sha256(b"posenc/one/7").hexdigest()[:24]
    assert sealed([1, 2], "x") == hashlib.sha256(b"posenc/x/[1,2]").hexdigest()[:24]


@pytest.mark.parametrize("not_an_answer", [None, 3.5, float("nan"), [1, 2.5], object(), True])
def test_a_value_that_is_no_answer_seals_to_none(not_an_answer):
    assert sealed(not_an_answer, "ex") is None


def test_a_real_number_is_sealed_at_its_decimals_and_matched_within_one_step():
    """sealed_number rounds to `places` decimals; near_sealed accepts that rounding or one step either way
    (|error| <= 1.5 units of the last place), and nothing further, whatever type carries the number."""
    digest = sealed_number(-2.098985578, "ex")
    assert digest == hashlib.sha256(b"posenc/ex/3/-2099").hexdigest()[:24]
    for near in (-2.098985578, -2.0985, -2.0995, torch.tensor(-2.1), np.float32(-2.098), [-2.0999]):
        assert near_sealed(near, digest, "ex"), near
    for far in (-2.1006, -2.0974, 2.099, -2099, "-2.099", None, float("nan"), [1.0, 2.0]):
        assert not near_sealed(far, digest, "ex"), far
    assert not near_sealed(-2.099, digest, "other") and sealed_number(float("inf"), "ex") is None
    assert sealed_number(0.1234, "ex", places=2) == sealed(12, "ex/2")
