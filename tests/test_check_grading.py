"""POSENC_GRADING=1: every checker raises AssertionError on a wrong or unattempted answer.

The message is the text self-study prints, and under grading nothing is printed besides it;
right answers pass quietly in both modes (the right answers of every chapter are also run
under grading from the notebooks, in tests/test_grading.py).
"""
import importlib
import math
import pkgutil

import pytest

from posenc_lib import check

# Every chapter's checker module (check/chNN.py), found on disk so a new chapter is covered.
CHAPTERS = sorted(m.name for m in pkgutil.iter_modules(check.__path__) if m.name.startswith("ch"))
CHECKERS = [getattr(mod, name) for mod in map(lambda n: importlib.import_module(f"posenc_lib.check.{n}"), CHAPTERS)
            for name in mod.__all__]


def test_every_chapter_module_is_found_and_exported():
    assert CHAPTERS[0] == "ch01" and len(CHAPTERS) >= 9
    for fn in CHECKERS:
        assert getattr(check, fn.__name__) is fn  # `from posenc_lib import check; check.<name>` works


def _stub(*args):
    raise NotImplementedError


NONSENSE = object()  # not a number, a tensor, a dict or a function: wrong for every exercise


@pytest.fixture
def self_study(monkeypatch):
    monkeypatch.delenv("POSENC_GRADING", raising=False)


@pytest.mark.parametrize("value, on", [("1", True), ("true", True), ("0", False), ("", False), ("off", False)])
def test_the_switch_reads_the_environment_on_every_call(value, on, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", value)
    assert check.grading() is on
    monkeypatch.delenv("POSENC_GRADING")
    assert check.grading() is False


def test_a_misspelt_switch_is_an_error_naming_it(monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "grade")
    with pytest.raises(ValueError, match=r"POSENC_GRADING must be 1 .* or 0 .*got 'grade'"):
        check.slow_pairs(0)


@pytest.mark.parametrize("answer", [None, _stub, NONSENSE], ids=["None", "stub", "nonsense"])
@pytest.mark.parametrize("checker", CHECKERS, ids=[c.__name__ for c in CHECKERS])
def test_grading_raises_what_self_study_prints(checker, answer, self_study, monkeypatch, capsys):
    result = checker(answer)
    printed = capsys.readouterr().out
    assert result in (None, False)
    assert ("not attempted yet" in printed) == (result is None)
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError) as raised:
        checker(answer)
    assert str(raised.value) == printed.rstrip("\n")  # same message, word for word
    assert capsys.readouterr().out == ""  # and only once: in the error, not printed as well


def test_a_bug_in_the_answer_is_reported_in_the_assertion(monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match=r"your answer raised ZeroDivisionError: division by zero"):
        check.t5_last_bucket(lambda num_buckets, max_distance, bidirectional: 1 / 0)


def _t5_last_bucket_start(num_buckets, max_distance, bidirectional):
    per_direction = num_buckets // 2 if bidirectional else num_buckets
    exact = per_direction // 2
    bound = exact * (max_distance / exact) ** ((per_direction - 1 - exact) / (per_direction - exact))
    return round(bound) if abs(bound - round(bound)) < 1e-9 * bound else math.ceil(bound)  # a tie: on the edge


@pytest.mark.parametrize("grading", ["0", "1"])
def test_right_answers_print_all_correct_in_both_modes(grading, monkeypatch, capsys):
    monkeypatch.setenv("POSENC_GRADING", grading)
    assert check.passes_through([[-1, 0, 0, 0], [0, -1, 0, 0], [0, 0, -1, 0], [0, 0, 0, -1]]) is True  # ch. 1, Ex. 1
    assert check.t5_last_bucket(_t5_last_bucket_start) is True  # chapter 4, Ex. 3
    assert check.alibi_shared_bias(lambda p, k, ties: 2**p + 2 + (ties == "away")) is True  # chapter 6, Ex. 2
    out = capsys.readouterr().out
    assert out.count("all correct!") == 3 and "✗" not in out
