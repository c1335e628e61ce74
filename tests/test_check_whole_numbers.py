"""One rule for what a whole number is (check/_core.py: ``whole_number``), in every checker that wants one.

Each integer-answer checker gets its right answer with every whole number written as a Python
int, a 0-d tensor, a numpy integer and an integral float: all are accepted. A wrong answer gets
the same feedback, naming the same misconception, whatever type carries it.
The right answers are the ones the chapter tests derive (imported from them), not the checkers'.
"""

import inspect
import random

import numpy as np
import pytest
import torch
from test_check_ch01 import _misconception, rule
from test_check_ch03 import slow_by_exponents
from test_check_ch04 import last_bucket_closed_form
from test_check_ch05 import _first_slow_pair
from test_check_ch06 import shared_right
from test_check_ch08 import _misread, rotations_by_rule

from posenc_lib import check
from posenc_lib.check._core import number, whole_number, whole_numbers

# How a learner's code may hand over a whole number n.
AS = {
    "int": int,
    "0-d tensor": torch.tensor,
    "numpy integer": np.int64,
    "integral float": float,
}


def typed(value, to):
    """value with every whole number in it (in dicts, lists, tuples, sets) converted by ``to``."""
    if isinstance(value, dict):
        return {k: typed(v, to) for k, v in value.items()}
    if isinstance(value, (list, tuple, set)):
        return type(value)(typed(v, to) for v in value)
    return to(value)


def returning(fn, to):
    """fn with its result converted by ``typed``."""
    return lambda *args: typed(fn(*args), to)


# checker -> (the right answer, a function of the converter; a wrong one; the words that name its mistake)
CASES = {
    "causal_twins": (lambda to: typed(([0, 1, 0, 1], (1, 3)), to), lambda to: typed(([0, 1, 1, 0], (1, 3)), to),
                     "hold different tokens"),
    "changed_rows": (lambda to: returning(lambda n, swaps: [(r.start, r.stop) for r in rule(n, swaps)], to),
                     lambda to: returning(lambda n, swaps: [(r.start, r.stop) for r in _misconception("apart")(n, swaps)],
                                          to), "each swap on its own"),
    "slow_pairs": (lambda to: returning(slow_by_exponents, to),
                   lambda to: returning(lambda d, n: slow_by_exponents(d, n) + 1, to), "off by one"),
    "t5_last_bucket": (lambda to: returning(last_bucket_closed_form, to),
                       lambda to: returning(lambda nb, md, bidir: last_bucket_closed_form(nb, md, bidir) - 1, to),
                       "off by one"),
    "rope_first_slow_pair": (lambda to: returning(_first_slow_pair, to),
                             lambda to: returning(lambda d, b, L: _first_slow_pair(d, b, L) - 1, to),
                             "still completes a full turn"),
    "alibi_shared_bias": (lambda to: returning(shared_right, to),
                          lambda to: returning(lambda p, k, ties: shared_right(p, k, ties) - 1, to),
                          "misplaces where the first shared bias falls"),  # one less everywhere: the keys, not ties
    "cache_rotations": (lambda to: returning(rotations_by_rule, to),
                        lambda to: returning(lambda c, p, n: _misread(c, p, n).get("prefill",
                                                                                     rotations_by_rule(c, p, n)), to),
                        "the prompt's keys are rotated too"),
}


def with_fix(name, checker):
    """Chapter 3's Exercise 3 grades the count alone (its fix is an ungraded warm-up)."""
    return checker


@pytest.fixture(autouse=True)
def same_draw_at_every_check(monkeypatch):
    """Checkers that draw their cases anew at every check (``_fresh_rng``) draw the same ones here, so that the
    feedback of two checks can be compared word for word."""
    for module in vars(check).values():
        if inspect.ismodule(module) and hasattr(module, "_fresh_rng"):
            monkeypatch.setattr(module, "_fresh_rng", lambda: random.Random(0))


@pytest.mark.parametrize("kind", AS)
@pytest.mark.parametrize("name", CASES)
def test_every_integer_checker_accepts_any_whole_number_type(name, kind, capsys):
    right, wrong, mistake = CASES[name]
    checker = with_fix(name, getattr(check, name))
    assert checker(right(AS[kind])) is True, capsys.readouterr().out
    assert "all correct!" in capsys.readouterr().out
    assert checker(wrong(AS[kind])) is False
    out = capsys.readouterr().out
    assert mistake in out, out  # the same misconception named, whatever type carried the answer
    assert checker(wrong(int)) is False
    assert capsys.readouterr().out == out


@pytest.mark.parametrize("name", ["t5_last_bucket", "rope_first_slow_pair", "cache_rotations",
                                  "slow_pairs", "alibi_shared_bias"])
def test_a_fraction_is_not_a_whole_number_anywhere(name, capsys):
    right = CASES[name][0]
    half = right(lambda n: n + 0.5)
    assert with_fix(name, getattr(check, name))(half) is False
    assert "all correct!" not in capsys.readouterr().out


def test_whole_number_rule():
    for n in (3, 3.0, np.int32(3), np.int64(3), np.float64(3.0), torch.tensor(3), torch.tensor(3.0), np.array(3),
              torch.tensor(3, dtype=torch.uint8), [3], (3.0,), torch.tensor([3]), np.array([[3]])):
        assert whole_number(n) == 3 and type(whole_number(n)) is int, n
    for bad in (True, np.True_, torch.tensor(True), 3.5, float("inf"), float("nan"), "3", [3, 4], torch.tensor([3, 4]),
                np.array([3, 4]), [], None, 3 + 0j, torch.tensor(3 + 0j), {3}, torch.Tensor, np.ndarray):
        assert whole_number(bad) is None, bad  # a class (torch.Tensor) has an unbound .item: not a number
    assert number(np.float32(0.5)) == 0.5 and number([torch.tensor(2.5)]) == 2.5 and number(torch.ones(2)) is None
    assert whole_numbers([1, torch.tensor(2), np.int64(3)]) == [1, 2, 3]
    assert whole_numbers(torch.tensor([4, 5])) == [4, 5] and whole_numbers(np.array([6])) == [6]
    assert whole_numbers([1, 2.5]) is None and whole_numbers("12") is None and whole_numbers(torch.ones(2, 2)) is None
