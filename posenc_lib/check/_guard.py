"""How a checker keeps a derivation a derivation: library shortcuts that refuse to run, a step budget,
and an element budget.

Some exercises ask for a closed form where a measurement (the library's own function, a softmax, a
loop over every key, a grid over millions of candidates) would hand over the same numbers. While the
learner's function runs, ``refusing`` makes the named functions raise ``Shortcut``, ``step_budget``
stops a Python loop that runs too long, and ``element_budget`` stops a vectorised search: it counts
the elements of every tensor a torch function returns (a ``TorchFunctionMode``) and of every array
numpy's builders and ufuncs return, so a grid over millions of candidates runs out where a closed form, which
touches a few dozen numbers, stays far below. The checker can then say which shortcut was taken
instead of passing it or hanging. ``no_huge_arrays`` refuses, before allocating, any array or torch result
of 10^8 elements or more (a product of two long vectors is predicted from the shapes, on the meta device),
so a measurement that would exhaust the memory fails instead. All are undone when the block ends, whatever happened inside.
"""
from __future__ import annotations

import contextlib
import math
import os
import sys
from contextlib import ExitStack, contextmanager
from types import CodeType, FunctionType
from typing import Any, Iterable, Iterator
from unittest import mock

__all__ = ["Shortcut", "TooManySteps", "TooManyElements", "refusing", "step_budget", "element_budget",
           "no_huge_arrays", "answers_under_guard", "stopped_verdict", "STEPS", "HUGE", "ELEMENTS"]

STEPS = 200_000  # Python lines: thousands of times what a closed form runs, far fewer than a loop over 10^12 keys
HUGE = 10**8  # elements: no closed form needs an array this long; a measurement over 10^12 keys does
ELEMENTS = 100_000  # tensor and array elements created: a closed form makes dozens, a grid over 10^6 candidates millions
_FACTORIES = ("arange", "linspace", "logspace", "ones", "zeros", "empty", "full", "rand", "randn")
# numpy's functions that build a new array from sizes or Python data (a search's grid starts in one of them)
_NUMPY_BUILDERS = ("arange", "linspace", "logspace", "geomspace", "array", "asarray", "asanyarray", "fromiter",
                   "frombuffer", "fromfunction", "ones", "zeros", "empty", "full", "ones_like", "zeros_like",
                   "empty_like", "full_like", "tile", "repeat", "meshgrid", "outer", "indices", "eye", "identity",
                   "broadcast_to", "concatenate", "stack", "hstack", "vstack", "column_stack", "cumsum", "cumprod",
                   "diff", "sort", "unique")
_GUARD_FILE = __file__
_NOT_COUNTED = (_GUARD_FILE, contextlib.__file__)  # the guards and the context managers that start and end them


class Shortcut(Exception):
    """Raised by a refused function; ``name`` is what the learner's function called."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class TooManySteps(Exception):
    """Raised when the learner's function runs more Python lines than ``step_budget`` allows."""


class TooManyElements(Exception):
    """Raised when the learner's function creates more tensor or array elements than ``element_budget`` allows."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit:,} elements")
        self.limit = limit


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

    import torch

    torch_dir = os.path.dirname(torch.__file__) + os.sep

    def new_frame(frame: Any, event: str, arg: Any) -> Any:
        """The learner's steps only: not the guards' own frames, nor torch's Python layer (which the guards'
        TorchFunctionModes send every call through), nor the frozen standard modules the shape checks call
        (abc's isinstance), only what the learner wrote or called besides."""
        name = frame.f_code.co_filename
        return None if name in _NOT_COUNTED or name.startswith((torch_dir, "<frozen ")) else count_lines

    sys.settrace(new_frame)  # new frames only: the checker's own is not counted
    try:
        yield
    finally:
        sys.settrace(previous)


def _elements(value: Any) -> int:
    """How many numbers a result holds: a tensor's or an array's elements, summed over tuples and lists of them."""
    if isinstance(value, (tuple, list)):
        return sum(_elements(item) for item in value)
    numel = getattr(value, "numel", None)
    if callable(numel):  # a torch tensor
        return int(numel())
    size = getattr(value, "size", None)  # a numpy array or scalar: size is a number there, a method on a tensor
    return int(size) if isinstance(size, int) else 0


class _CountedUfunc:
    """A numpy ufunc whose results (of a call, or of its methods: ``outer``, ``reduce``, ...) are spent from an
    element budget: called on a ``range`` or a list, a ufunc builds an array as a builder does."""

    def __init__(self, ufunc: Any, spend: Any) -> None:
        self._ufunc, self._spend = ufunc, spend

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._spend(self._ufunc(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._ufunc, name)
        if not callable(attribute):
            return attribute
        return lambda *args, **kwargs: self._spend(attribute(*args, **kwargs))


@contextmanager
def element_budget(limit: int = ELEMENTS) -> Iterator[None]:
    """While inside, the tensors torch's functions and methods return, and the arrays numpy's builders return,
    may hold at most ``limit`` elements in all; the result that passes it raises ``TooManyElements``.

    A closed form touches a few numbers; a vectorised search builds a grid of candidates and a tensor per
    step over it, which a Python step budget does not see (the loop runs in C). Views count like copies:
    the budget measures the work a function asks for, not the memory it holds. numpy's element-wise
    operators on an array (``a * b``) are not counted, only the builders that make one (``_NUMPY_BUILDERS``)
    and numpy's ufuncs called by name (``np.multiply(range(n), h)`` builds an array from a range).
    """
    import numpy
    import torch
    from torch.overrides import TorchFunctionMode

    used = 0

    def spend(result: Any) -> Any:
        nonlocal used
        used += _elements(result)
        if used > limit:
            raise TooManyElements(limit)
        return result

    class Counting(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            return spend(func(*args, **(kwargs or {})))

    with ExitStack() as stack:
        for attribute in _NUMPY_BUILDERS:
            original = getattr(numpy, attribute, None)
            if original is None:
                continue

            def counted(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
                return spend(_original(*args, **kwargs))

            stack.enter_context(mock.patch.object(numpy, attribute, counted))
        for attribute, ufunc in vars(numpy).copy().items():  # np.multiply(range(n), h) builds an array too
            if isinstance(ufunc, numpy.ufunc):
                stack.enter_context(mock.patch.object(numpy, attribute, _CountedUfunc(ufunc, spend)))
        stack.enter_context(Counting())
        yield


def _sizes(value: Any) -> Iterator[float]:
    """Every number in an argument (ints, floats, and those inside tuples and lists)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        yield abs(value)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _sizes(item)


def _product(value: Any) -> int:
    """The number of elements a shape asks for: an int, or the product of a tuple or list of ints (else 0)."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, (tuple, list)) and value and all(isinstance(v, int) and not isinstance(v, bool)
                                                          for v in value):
        total = 1
        for v in value:
            total *= v
        return total
    return 0


def _predicted_elements(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    """How many elements ``func(*args, **kwargs)`` would return, found on the meta device (shapes only, no
    memory); None where the meta device cannot say (the call then runs as usual)."""
    import torch
    from torch.utils._pytree import tree_map

    def meta(x: Any) -> Any:
        return x.to("meta") if isinstance(x, torch.Tensor) else x

    tensors = [x for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)
               or (isinstance(x, (tuple, list)) and any(isinstance(y, torch.Tensor) for y in x))]
    try:
        if tensors:
            out = func(*tree_map(meta, args), **tree_map(meta, kwargs))
        else:  # a factory: ask it for a meta tensor of the same shape
            out = func(*args, **{**kwargs, "device": "meta"})
    except Shortcut:
        raise
    except Exception:  # noqa: BLE001 (an op the meta device does not know: let the real call decide)
        return None
    return _elements(out)


# torch operations whose result can be far larger than their inputs: element-wise ones by broadcasting (their
# result's shape is the broadcast of their inputs' shapes), the others (products, repeats, factories) found on meta
_ELEMENTWISE = frozenset({
    "mul", "multiply", "add", "sub", "subtract", "div", "divide", "true_divide", "pow", "where", "atan2",
    "__mul__", "__rmul__", "__add__", "__radd__", "__sub__", "__rsub__", "__truediv__", "__rtruediv__", "__pow__",
})
_GROWING = frozenset({
    "matmul", "mm", "bmm", "einsum", "outer", "ger", "kron", "tensordot", "cartesian_prod", "cdist", "block_diag",
    "__matmul__", "__rmatmul__", "repeat", "tile", "repeat_interleave", "diag_embed",
    "zeros", "ones", "empty", "full", "rand", "randn", "eye", "zeros_like", "ones_like", "empty_like", "full_like",
})


def _broadcast_elements(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int | None:
    """The number of elements of an element-wise operation's result: its inputs' shapes broadcast together."""
    import torch

    shapes = [x.shape for x in (*args, *kwargs.values()) if isinstance(x, torch.Tensor)]
    try:
        return math.prod(torch.broadcast_shapes(*shapes)) if shapes else None
    except RuntimeError:
        return None


@contextmanager
def no_huge_arrays(limit: int = HUGE) -> Iterator[None]:
    """While inside, an array of ``limit`` or more elements is refused with ``Shortcut`` before it is allocated:
    torch's and numpy's builders (arange, ones, zeros, ...) with a size, an end or a shape that large, and any
    torch operation whose result would be that large (a product of two long vectors, a d x d matrix at a width
    of 10^5; predicted on the meta device). An array with one entry per key of a 10^12-token input, or a
    matrix no laptop holds, would exhaust the memory instead of failing."""
    import numpy

    import torch
    from torch.overrides import TorchFunctionMode

    class Predicting(TorchFunctionMode):
        def __torch_function__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            kwargs = kwargs or {}
            name = getattr(func, "__name__", "")
            size = (_broadcast_elements(args, kwargs) if name in _ELEMENTWISE
                    else _predicted_elements(func, args, kwargs) if name in _GROWING else None)
            if size is not None and size >= limit:
                raise Shortcut(f"torch.{name} for a result of {size:.1e} elements ({limit:.0e} or more)")
            return func(*args, **kwargs)

    with ExitStack() as stack:
        for owner, prefix in ((torch, "torch"), (numpy, "numpy")):
            for attribute in _FACTORIES:
                original = getattr(owner, attribute, None)
                if original is None:
                    continue

                def guarded(*args: Any, _original: Any = original, _name: str = f"{prefix}.{attribute}",
                            **kwargs: Any) -> Any:
                    values = (*args, *kwargs.values())
                    if str(kwargs.get("device")) == "meta":  # shapes only (a prediction of the torch mode below)
                        return _original(*args, **kwargs)
                    if any(size >= limit for value in values for size in _sizes(value)) or any(
                            _product(value) >= limit for value in values):
                        raise Shortcut(f"{_name} with {limit:.0e} or more entries")
                    return _original(*args, **kwargs)

                stack.enter_context(mock.patch.object(owner, attribute, guarded))
        for attribute in ("outer", "kron"):  # numpy's products of two arrays (Python functions, so patchable)
            original = getattr(numpy, attribute)

            def product(a: Any, b: Any, *rest: Any, _original: Any = original, _name: str = f"numpy.{attribute}",
                        **kwargs: Any) -> Any:
                if numpy.size(a) * numpy.size(b) >= limit:
                    raise Shortcut(f"{_name} for a result of {limit:.0e} or more elements")
                return _original(a, b, *rest, **kwargs)

            stack.enter_context(mock.patch.object(numpy, attribute, product))
        stack.enter_context(Predicting())
        yield


def answers_under_guard(fn: Any, cases: Iterable[tuple[Any, ...]], refuse: Iterable[tuple[Any, str, str]] = (),
                        *, loops: bool = True, steps_per_case: int | None = None,
                        elements_per_case: int | None = None,
                        ) -> tuple[dict[tuple[Any, ...], Any], tuple[Any, Exception] | None]:
    """fn(*case) for every case, while the ``refuse`` targets refuse to run (and, with ``loops``, while
    huge arrays are refused and Python steps are counted). Every guard is undone before this returns,
    so the checker reports with the library whole again.

    steps_per_case: with ``loops``, a budget of Python lines for each case on its own (a closed form needs a
                    few dozen; a search, even a bisection, needs hundreds) instead of ``STEPS`` for all of them.
    elements_per_case: a budget of tensor and array elements for each case on its own (``element_budget``;
                       a closed form creates dozens, a vectorised search over candidates thousands to millions).
    returns: (the answers by case, None), or (the answers so far, (the case that stopped, its
             Shortcut, TooManySteps or TooManyElements)); any other exception of fn propagates (report() shows it).
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
                with ExitStack() as per_case:  # the step budget last, so that it counts none of the others' set-up
                    if elements_per_case is not None:
                        per_case.enter_context(element_budget(elements_per_case))
                    if loops and steps_per_case is not None:
                        per_case.enter_context(step_budget(steps_per_case))
                    answers[case] = fn(*case)
    except (Shortcut, TooManySteps, TooManyElements) as stopped:
        return answers, (case, stopped)
    return answers, None


def stopped_verdict(why: Exception, call: str, *, shortcut: str, loop: str = "", grid: str = "") -> tuple[bool, str]:
    """The verdict on an answer the guards stopped: "<call> calls <what>: <shortcut>" for a refused
    function, "<call> <loop>" for a loop that ran out of steps, "<call> creates more than N tensor or
    array elements: <grid>" for a vectorised search (``grid``, or ``loop`` when no grid text is given)."""
    if isinstance(why, Shortcut):
        return False, f"{call} calls {why.name}: {shortcut}"
    if isinstance(why, TooManyElements):
        return False, f"{call} creates more than {why.limit:,} tensor or array elements: {grid or loop}"
    return False, f"{call} {loop}"
