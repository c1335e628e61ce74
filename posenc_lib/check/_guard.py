"""How a checker keeps a derivation a derivation: library shortcuts that refuse to run, and a step budget.

Some exercises ask for a closed form where a measurement (the library's own function, a softmax, a
loop over every key) would hand over the same numbers. While the learner's function runs,
``refusing`` makes the named functions raise ``Shortcut`` and ``step_budget`` stops a Python loop
that runs too long, so the checker can say which shortcut was taken instead of passing it or hanging.
Both are undone when the block ends, whatever happened inside.
"""
from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager
from types import CodeType, FunctionType
from typing import Any, Iterable, Iterator
from unittest import mock

__all__ = ["Shortcut", "TooManySteps", "refusing", "step_budget", "no_huge_arrays", "answers_under_guard",
           "stopped_verdict", "STEPS", "HUGE"]

STEPS = 200_000  # Python lines: thousands of times what a closed form runs, far fewer than a loop over 10^12 keys
HUGE = 10**8  # elements: no closed form needs an array this long; a measurement over 10^12 keys does
_FACTORIES = ("arange", "linspace", "logspace", "ones", "zeros", "empty", "full", "rand", "randn")


class Shortcut(Exception):
    """Raised by a refused function; ``name`` is what the learner's function called."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class TooManySteps(Exception):
    """Raised when the learner's function runs more Python lines than ``step_budget`` allows."""


def _refusing_code(name: str) -> CodeType:
    """The code of a function that raises ``Shortcut(name)`` whatever it is called with (no free variables)."""
    source = (f"def refused(*args, **kwargs):\n"
              f"    raise __import__({__name__!r}, fromlist=['Shortcut']).Shortcut({name!r})\n")
    namespace: dict[str, Any] = {}
    exec(compile(source, f"<refused {name}>", "exec"), namespace)  # noqa: S102 (our own two lines)
    return namespace["refused"].__code__


@contextmanager
def refusing(targets: Iterable[tuple[Any, str, str]]) -> Iterator[None]:
    """While inside, every ``owner.attribute`` of ``targets`` raises ``Shortcut(name)`` when called.

    targets: (owner, attribute, name) triples, e.g. (torch.linalg, "lstsq", "torch.linalg.lstsq");
             an owner without that attribute is skipped.
    A plain Python function is refused through its code, so every other name bound to it (``from posenc_lib
    import rel_shift``, ``shift = pl.rel_shift`` before the call) is refused too; built-in functions and
    methods are refused by replacing the attribute on its owner.
    """
    swapped: dict[int, tuple[FunctionType, CodeType]] = {}
    with ExitStack() as stack:

        def restore() -> None:
            for function, code in swapped.values():
                function.__code__ = code

        stack.callback(restore)  # runs last, after every attribute is put back
        for owner, attribute, name in targets:
            if not hasattr(owner, attribute):
                continue
            target = getattr(owner, attribute)
            if isinstance(target, FunctionType) and not target.__closure__ and id(target) not in swapped:
                swapped[id(target)] = (target, target.__code__)
                target.__code__ = _refusing_code(name)

            def refuse(*_: Any, _name: str = name, **__: Any) -> None:
                raise Shortcut(_name)

            stack.enter_context(mock.patch.object(owner, attribute, refuse))
        yield


@contextmanager
def step_budget(lines: int = STEPS) -> Iterator[None]:
    """While inside, the functions called from here may run at most ``lines`` Python lines in all;
    the next one raises ``TooManySteps`` (a loop in C, such as ``sum(range(n))``, is not counted)."""
    count = 0
    previous = sys.gettrace()

    def count_lines(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if event == "line":
            count += 1
            if count > lines:
                raise TooManySteps
        return count_lines

    sys.settrace(lambda frame, event, arg: count_lines)  # new frames only: the checker's own is not counted
    try:
        yield
    finally:
        sys.settrace(previous)


def _sizes(value: Any) -> Iterator[float]:
    """Every number in an argument (ints, floats, and those inside tuples and lists)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        yield abs(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _sizes(item)


@contextmanager
def no_huge_arrays(limit: int = HUGE) -> Iterator[None]:
    """While inside, torch's and numpy's array builders (arange, ones, zeros, ...) refuse a size or an
    end of ``limit`` or more with ``Shortcut``, before allocating: an array with one entry per key of a
    10^12-token input would exhaust the memory instead of failing."""
    import numpy

    import torch

    with ExitStack() as stack:
        for owner, prefix in ((torch, "torch"), (numpy, "numpy")):
            for attribute in _FACTORIES:
                original = getattr(owner, attribute, None)
                if original is None:
                    continue

                def guarded(*args: Any, _original: Any = original, _name: str = f"{prefix}.{attribute}",
                            **kwargs: Any) -> Any:
                    if any(size >= limit for value in (*args, *kwargs.values()) for size in _sizes(value)):
                        raise Shortcut(f"{_name} with {limit:.0e} or more entries")
                    return _original(*args, **kwargs)

                stack.enter_context(mock.patch.object(owner, attribute, guarded))
        yield


def answers_under_guard(fn: Any, cases: Iterable[tuple[Any, ...]], refuse: Iterable[tuple[Any, str, str]] = (),
                        *, loops: bool = True, steps_per_case: int | None = None,
                        ) -> tuple[dict[tuple[Any, ...], Any], tuple[Any, Exception] | None]:
    """fn(*case) for every case, while the ``refuse`` targets refuse to run (and, with ``loops``, while
    huge arrays are refused and Python steps are counted). Every guard is undone before this returns,
    so the checker reports with the library whole again.

    steps_per_case: with ``loops``, a budget of Python lines for each case on its own (a closed form needs a
                    few dozen; a search, even a bisection, needs hundreds) instead of ``STEPS`` for all of them.
    returns: (the answers by case, None), or (the answers so far, (the case that stopped, its
             Shortcut or TooManySteps)); any other exception of fn propagates (report() shows it).
    """
    answers: dict[tuple[Any, ...], Any] = {}
    case: tuple[Any, ...] = ()
    try:
        with ExitStack() as stack:
            stack.enter_context(refusing(refuse))
            if loops:
                stack.enter_context(no_huge_arrays())
                if steps_per_case is None:
                    stack.enter_context(step_budget())
            for case in cases:
                if loops and steps_per_case is not None:
                    with step_budget(steps_per_case):
                        answers[case] = fn(*case)
                else:
                    answers[case] = fn(*case)
    except (Shortcut, TooManySteps) as stopped:
        return answers, (case, stopped)
    return answers, None


def stopped_verdict(why: Exception, call: str, *, shortcut: str, loop: str = "") -> tuple[bool, str]:
    """The verdict on an answer the guards stopped: "<call> calls <what>: <shortcut>" for a refused
    function, "<call> <loop>" for a loop that ran out of steps."""
    if isinstance(why, Shortcut):
        return False, f"{call} calls {why.name}: {shortcut}"
    return False, f"{call} {loop}"
