"""How a checker keeps a derivation a derivation: library shortcuts that refuse to run, and a step budget.

Some exercises ask for a closed form where a measurement (the library's own function, a softmax, a
loop over every key) would hand over the same numbers. While the learner's function runs,
``refusing`` makes the named functions raise ``Shortcut`` and ``step_budget`` stops a Python loop
that runs too long, so the checker can say which shortcut was taken instead of passing it or hanging.
Both are undone when the block ends, whatever happened inside. For a closed form in a matrix's entries,
``counting`` hands the learner entries that count the arithmetic done with them (``Counted``).
"""
from __future__ import annotations

import sys
from contextlib import ExitStack, contextmanager
from typing import Any, Iterable, Iterator
from unittest import mock

__all__ = ["Shortcut", "TooManySteps", "refusing", "step_budget", "no_huge_arrays", "answers_under_guard",
           "stopped_verdict", "loaded", "Counted", "OperationBudget", "counting", "value_of", "shadow_of", "STEPS",
           "HUGE"]

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


@contextmanager
def refusing(targets: Iterable[tuple[Any, str, str]]) -> Iterator[None]:
    """While inside, every ``owner.attribute`` of ``targets`` raises ``Shortcut(name)`` when called.

    targets: (owner, attribute, name) triples, e.g. (torch.linalg, "lstsq", "torch.linalg.lstsq");
             an owner without that attribute is skipped.
    """
    with ExitStack() as stack:
        for owner, attribute, name in targets:
            if not hasattr(owner, attribute):
                continue

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

    def on_call(frame: Any, event: str, arg: Any) -> Any:
        # new frames only (the checker's own is not counted), and not the guards' own wrappers: a refused
        # or size-checked builder runs lines of this module that the learner did not write
        return None if frame.f_code.co_filename == __file__ else count_lines

    sys.settrace(on_call)
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
                        *, loops: bool = True, steps_per_case: int | None = None
                        ) -> tuple[dict[tuple[Any, ...], Any], tuple[Any, Exception] | None]:
    """fn(*case) for every case, while the ``refuse`` targets refuse to run (and, with ``loops``, while
    huge arrays are refused and Python steps are counted: ``STEPS`` for all cases together, or
    ``steps_per_case`` for each, for a closed form that must not search). Every guard is undone before
    this returns, so the checker reports with the library whole again.

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


def loaded(module: str, names: Iterable[str]) -> list[tuple[Any, str, str]]:
    """Targets for ``refusing``: ``module.name`` for each name, if the learner has imported ``module`` (a checker
    never imports a heavy library itself: one the learner did not load cannot be called)."""
    found = sys.modules.get(module)
    return [] if found is None else [(found, name, f"{module}.{name}") for name in names]


# ---------------------------------------------------------------- numbers that count their arithmetic
# A closed form in a matrix's entries and an iteration towards its eigenvalues can both be written in a few
# Python lines once the matrix is a tensor (numpy and torch loop in C). Handed entries that count every
# operation done with them, a checker tells the two apart by arithmetic: a formula costs dozens of
# operations, repeated matrix products cost hundreds, and nothing can leave the count (no float, no tensor).

class OperationBudget:
    """The operations left to a family of ``Counted`` numbers; the one past the limit raises ``TooManySteps``."""

    def __init__(self, limit: int) -> None:
        self.limit, self.used = limit, 0

    def spend(self, units: int = 1) -> None:
        self.used += units
        if self.used > self.limit:
            raise TooManySteps


COMPARISON_COST = 10  # operations per comparison: the one way a bit of a number leaves the count (no bisection)
_HIDDEN = "_counted_value"  # the slot holding a Counted's number and its shadow; read by the checker through
# object.__getattribute__. Introspection can read it too, so a checker that must rule out a number read past the
# count asks that the answer be Counted and that its shadow be what the same formula gives on the shadow entries.


class Counted:
    """A real number that spends one unit of its ``OperationBudget`` on every +, −, ×, /, ** and abs, and
    ``COMPARISON_COST`` on every comparison (including bool()),
    returning ``Counted`` results on the same budget. Anything that would take the number out of the count
    (float(), int(), a float array or tensor of it, formatting or pickling it, reading its slot by name) raises
    ``Shortcut``; ``value_of`` is how a checker reads it back, after the learner's function has run.

    Each Counted also carries a **shadow**: the same arithmetic done on a second number the checker chose (another
    matrix's entry), with comparisons decided by the value alone. A result computed from the entries by the counted
    arithmetic has the shadow the same formula gives on the shadow matrix (``shadow_of``); a number read past the
    count and mixed in does not."""

    __slots__ = (_HIDDEN, "_budget")

    def __init__(self, value: float, budget: OperationBudget, shadow: float | None = None) -> None:
        object.__setattr__(self, _HIDDEN, (value, value if shadow is None else shadow))
        object.__setattr__(self, "_budget", budget)

    def __getattribute__(self, name: str) -> Any:
        if name == _HIDDEN:
            raise Shortcut("the hidden slot of one of the checker's entries")
        return object.__getattribute__(self, name)

    def _apply(self, other: Any, op: Any) -> "Counted":
        budget = object.__getattribute__(self, "_budget")
        budget.spend()
        a, a_shadow = object.__getattribute__(self, _HIDDEN)
        b, b_shadow = object.__getattribute__(other, _HIDDEN) if isinstance(other, Counted) else (other, other)
        return Counted(op(a, b), budget, op(a_shadow, b_shadow))

    def _compare(self, other: Any, op: Any) -> bool:
        object.__getattribute__(self, "_budget").spend(COMPARISON_COST)
        b = object.__getattribute__(other, _HIDDEN)[0] if isinstance(other, Counted) else other
        return op(object.__getattribute__(self, _HIDDEN)[0], b)

    def __add__(self, o): return self._apply(o, lambda a, b: a + b)  # noqa: E704
    def __radd__(self, o): return self._apply(o, lambda a, b: b + a)  # noqa: E704
    def __sub__(self, o): return self._apply(o, lambda a, b: a - b)  # noqa: E704
    def __rsub__(self, o): return self._apply(o, lambda a, b: b - a)  # noqa: E704
    def __mul__(self, o): return self._apply(o, lambda a, b: a * b)  # noqa: E704
    def __rmul__(self, o): return self._apply(o, lambda a, b: b * a)  # noqa: E704
    def __truediv__(self, o): return self._apply(o, lambda a, b: a / b)  # noqa: E704
    def __rtruediv__(self, o): return self._apply(o, lambda a, b: b / a)  # noqa: E704
    def __pow__(self, o): return self._apply(o, lambda a, b: a ** b)  # noqa: E704
    def __rpow__(self, o): return self._apply(o, lambda a, b: b ** a)  # noqa: E704
    def __neg__(self): return self._apply(None, lambda a, _: -a)  # noqa: E704
    def __pos__(self): return self  # noqa: E704
    def __abs__(self): return self._apply(None, lambda a, _: abs(a))  # noqa: E704
    def __bool__(self): return self._compare(0, lambda a, b: a != b)  # noqa: E704
    def __lt__(self, o): return self._compare(o, lambda a, b: a < b)  # noqa: E704
    def __le__(self, o): return self._compare(o, lambda a, b: a <= b)  # noqa: E704
    def __gt__(self, o): return self._compare(o, lambda a, b: a > b)  # noqa: E704
    def __ge__(self, o): return self._compare(o, lambda a, b: a >= b)  # noqa: E704

    def _leave(self, *_: Any, **__: Any) -> Any:
        raise Shortcut("float() (or int(), a format, a pickle) on one of the checker's entries")

    __float__ = __int__ = __index__ = __complex__ = __round__ = __trunc__ = __floor__ = __ceil__ = _leave
    __format__ = __reduce__ = __reduce_ex__ = __getstate__ = _leave  # pickling would hand over the slot

    def __copy__(self) -> "Counted":
        return self  # immutable

    def __deepcopy__(self, _memo: Any) -> "Counted":
        return self

    def __repr__(self) -> str:
        return "<an entry that counts its arithmetic>"

    __str__ = __repr__
    __hash__ = None  # type: ignore[assignment]


def counting(rows: Any, limit: int, shadow: Any = None) -> list[list[Counted]]:
    """A matrix (nested lists, array or tensor) as rows of ``Counted`` entries sharing a budget of ``limit`` operations;
    ``shadow``, a matrix of the same shape, gives each entry its shadow (by default the entry itself)."""
    def rows_of(m: Any) -> list[list[float]]:
        return m.tolist() if hasattr(m, "tolist") else m

    values = rows_of(rows)
    shadows = values if shadow is None else rows_of(shadow)
    budget = OperationBudget(limit)
    return [[Counted(float(x), budget, float(y)) for x, y in zip(row, s_row)] for row, s_row in zip(values, shadows)]


def value_of(x: Any) -> Any:
    """The number inside a ``Counted`` (a checker's read, after the learner's function has run); x itself otherwise."""
    return object.__getattribute__(x, _HIDDEN)[0] if isinstance(x, Counted) else x


def shadow_of(x: Any) -> Any:
    """The shadow of a ``Counted`` (the same arithmetic on the checker's shadow entries); None for anything else."""
    return object.__getattribute__(x, _HIDDEN)[1] if isinstance(x, Counted) else None
