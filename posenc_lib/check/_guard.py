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
``no_frame_access`` refuses the routes to the checker's own frames (``sys._getframe``, a traceback's or a
generator's frame, ``f_back``, the garbage collector's object lists), where the cases' answers sit as locals.
For a closed form in a matrix's entries, ``counting`` hands the learner entries that count the arithmetic
done with them (``Counted``).
"""
from __future__ import annotations

import contextlib
import math
import numbers
import os
import sys
from contextlib import ExitStack, contextmanager
from types import CodeType, FunctionType
from typing import Any, Iterable, Iterator
from unittest import mock

__all__ = ["Shortcut", "TooManySteps", "TooManyElements", "refusing", "step_budget", "element_budget",
           "no_huge_arrays", "no_frame_access", "answers_under_guard", "stopped_verdict", "loaded", "differentiation", "Counted", "OperationBudget",
           "counting", "value_of", "shadow_of", "STEPS", "HUGE", "ELEMENTS"]

STEPS = 200_000  # Python lines: thousands of times what a closed form runs, far fewer than a loop over 10^12 keys
HUGE = 10**8  # elements: no closed form needs an array this long; a measurement over 10^12 keys does
TRACED_BYTES_PER_ELEMENT = 64  # element_budget(traced=True): eight float64 arrays of the whole budget held at once
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


def _elements(value: Any, scalars: bool = True) -> int:
    """How many numbers a result holds: a tensor's or an array's elements, summed over tuples and lists of them
    (without ``scalars``, a result of one element counts 0)."""
    if isinstance(value, (tuple, list)):
        return sum(_elements(item, scalars) for item in value)
    numel = getattr(value, "numel", None)
    if callable(numel):  # a torch tensor
        count = int(numel())
    else:
        size = getattr(value, "size", None)  # a numpy array or scalar: size is a number there, a method on a tensor
        count = int(size) if isinstance(size, int) else 0
    return count if scalars or count > 1 else 0


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


def _counting_array(spend: Any) -> Any:
    """An ndarray subclass whose ufunc results (``a * b``, ``np.e ** a``, ``abs(a)``, ``a.sum()``) are spent from
    an element budget and are of the subclass again, so that a chain of operators on a built array is counted."""
    import numpy

    class Counted(numpy.ndarray):
        def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
            def plain(x: Any) -> Any:
                return x.view(numpy.ndarray) if isinstance(x, Counted) else x

            if "out" in kwargs:
                kwargs["out"] = tuple(plain(o) for o in kwargs["out"])
            result = getattr(ufunc, method)(*(plain(x) for x in inputs), **kwargs)

            def counted(r: Any) -> Any:
                spend(r)
                return r.view(Counted) if type(r) is numpy.ndarray else r

            return tuple(counted(r) for r in result) if isinstance(result, tuple) else counted(result)

    return Counted


@contextmanager
def element_budget(limit: int = ELEMENTS, *, traced: bool = False, scalars: bool = True,
                   operators: bool = False) -> Iterator[None]:
    """While inside, the tensors torch's functions and methods return, and the arrays numpy's builders return,
    may hold at most ``limit`` elements in all; the result that passes it raises ``TooManyElements``.

    A closed form touches a few numbers; a vectorised search builds a grid of candidates and a tensor per
    step over it, which a Python step budget does not see (the loop runs in C). Views count like copies:
    the budget measures the work a function asks for, not the memory it holds. numpy's element-wise
    operators on an array (``a * b``) are not counted, only the builders that make one (``_NUMPY_BUILDERS``)
    and numpy's ufuncs called by name (``np.multiply(range(n), h)`` builds an array from a range).

    traced: also raise ``TooManyElements`` when the block ends if the memory Python and numpy allocated inside
            it (``tracemalloc``, which numpy reports its arrays' data to) peaked above ``TRACED_BYTES_PER_ELEMENT``
            bytes per element of ``limit``. numpy's builders are counted through their names on the module, so a
            name bound before the block (``from numpy import arange``, ``_ar = np.arange``) escapes the count;
            the memory an array takes does not depend on the name that built it.
    scalars: count results of one element too (the default). Off, they are free: indexing a tensor in a loop
             (``code[6]``) makes one per index, and a step budget already bounds how many a loop can make.
    operators: also count numpy's element-wise operators: the arrays numpy's builders and ufuncs return are
               handed back as an ndarray subclass whose ufunc results (``np.e ** (1j * ks)``, ``abs(a) ** 2``) are
               counted too (off by default: only the chapters that ask for it see the subclass).
    """
    import tracemalloc

    import numpy
    from torch.overrides import TorchFunctionMode

    used = 0

    def spend(result: Any) -> Any:
        nonlocal used
        used += _elements(result, scalars)
        if used > limit:
            raise TooManyElements(limit)
        return result

    if operators:
        counted_array = _counting_array(spend)
        count = spend

        def spend(result: Any) -> Any:  # noqa: F811 (the builders' results become counted arrays)
            if isinstance(result, counted_array):
                return result  # a ufunc on a counted array: already spent in its __array_ufunc__
            count(result)
            return result.view(counted_array) if type(result) is numpy.ndarray else result

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
        started = traced and not tracemalloc.is_tracing()
        if started:
            tracemalloc.start()
        if traced:
            tracemalloc.reset_peak()
            before = tracemalloc.get_traced_memory()[0]
        try:
            yield
            if traced and tracemalloc.get_traced_memory()[1] - before > TRACED_BYTES_PER_ELEMENT * limit:
                raise TooManyElements(limit)
        finally:
            if started:
                tracemalloc.stop()


def _number(value: Any) -> float | None:
    """A plain number (int, float, numpy scalar, one-element tensor or array) as a float; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, numbers.Real):
        return float(value)
    numel = getattr(value, "numel", None)
    size = numel() if callable(numel) else getattr(value, "size", None)
    if size == 1 and hasattr(value, "item"):
        item = value.item()
        return float(item) if isinstance(item, numbers.Real) and not isinstance(item, bool) else None
    return None


def _shape_entries(shape: Any) -> float:
    """The entries of an array of this shape: a number, or the product of a tuple or list of them."""
    if isinstance(shape, (tuple, list)):
        return math.prod(max(0.0, _number(n) or 0.0) for n in shape)
    n = _number(shape)
    return 0.0 if n is None else max(0.0, n)


def _entries(builder: str, args: tuple, kwargs: dict) -> float:
    """How many entries the builder ``builder`` would create from these arguments, before it runs: only its size
    (a shape, the number of steps) and the ends of a range count, never a fill value or a dtype. A range's entries
    are its length, (end - start) / step, not its end: ``arange(t - 3, t)`` at t = 10^12 holds 3 entries."""
    if builder == "arange":  # arange(end) or arange(start, end[, step]); numpy names end 'stop'
        start, end, step = (0, args[0], 1) if len(args) == 1 else ((*args[:3], 1)[:3] if args else (0, None, 1))
        start = _number(kwargs.get("start", start))
        end = _number(kwargs.get("end", kwargs.get("stop", end)))
        step = _number(kwargs.get("step", step))
        if None in (start, end, step) or step == 0:
            return 0.0  # not numbers: the builder itself will say so
        return max(0.0, math.ceil((end - start) / step))
    if builder in ("linspace", "logspace"):  # (start, end, steps) in torch, (start, stop, num=50) in numpy
        count = args[2] if len(args) > 2 else kwargs.get("steps", kwargs.get("num", 50))
        return _shape_entries(count)
    if builder == "full":  # full(size, fill_value): the fill value is no size
        return _shape_entries(args[0] if args else kwargs.get("size", kwargs.get("shape", ())))
    # ones, zeros, empty, rand, randn: a shape as several numbers or as one tuple (torch), or as shape= / size=
    shape = args if args else kwargs.get("size", kwargs.get("shape", ()))
    if len(shape) == 1 and isinstance(shape, tuple) and isinstance(shape[0], (tuple, list)):
        shape = shape[0]
    return _shape_entries(shape)


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
    torch's and numpy's builders (arange, ones, zeros, ...) asked for that many entries (a shape's product, a
    range's length: ``torch.arange(t - 3, t)`` at t = 10^12 holds 3, ``torch.full((2, 3), -inf)`` 6), and any
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
                raise Shortcut(f"torch.{name} for a result of {size:.1e} elements ({limit:.0e} or more)"
                               f"{_through_library()}")
            return func(*args, **kwargs)

    with ExitStack() as stack:
        for owner, prefix in ((torch, "torch"), (numpy, "numpy")):
            for attribute in _FACTORIES:
                original = getattr(owner, attribute, None)
                if original is None:
                    continue

                def guarded(*args: Any, _original: Any = original, _name: str = f"{prefix}.{attribute}",
                            _builder: str = attribute, **kwargs: Any) -> Any:
                    if str(kwargs.get("device")) == "meta":  # shapes only (a prediction of the torch mode below)
                        return _original(*args, **kwargs)
                    if _entries(_builder, args, kwargs) >= limit:  # a range's length, a shape's product
                        raise Shortcut(f"{_name} with {limit:.0e} or more entries{_through_library()}")
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


# The audited operations that reach a frame other than one's own, or any object at all (CPython's audit events):
# the checker's frames hold the cases it drew, so an answer that walks up to them reads what it should derive.
_FRAME_EVENTS = frozenset({"sys._getframe", "sys._current_frames", "gc.get_objects", "gc.get_referrers",
                           "gc.get_referents"})
_FRAME_ATTRIBUTES = frozenset({"tb_frame", "gi_frame", "cr_frame", "ag_frame", "f_back"})
_FRAMES_REFUSED: list[str | None] = []  # non-empty while refused; its last item, what was tried (None: nothing)
_FRAME_HOOK: list[bool] = []  # an audit hook stays for good once added: it is added once, and idle outside the block


def _frame_hook(event: str, args: tuple[Any, ...]) -> None:
    if not _FRAMES_REFUSED:
        return
    if event in _FRAME_EVENTS or (event == "object.__getattr__" and len(args) > 1 and args[1] in _FRAME_ATTRIBUTES):
        what = event if event != "object.__getattr__" else f".{args[1]}"
        _FRAMES_REFUSED[-1] = what
        raise Shortcut(f"{what} (the checker's frames)")


@contextmanager
def no_frame_access() -> Iterator[None]:
    """While inside, reaching another frame (``sys._getframe``, ``inspect.currentframe``/``stack``, a traceback's
    ``tb_frame``, ``f_back``, ...) or the garbage collector's object lists raises ``Shortcut``; on leaving, a
    ``Shortcut`` is raised if one was tried, even if the learner's function caught it."""
    if not _FRAME_HOOK:
        sys.addaudithook(_frame_hook)
        _FRAME_HOOK.append(True)
    _FRAMES_REFUSED.append(None)
    try:
        yield
    finally:
        tried = _FRAMES_REFUSED.pop()
    if tried is not None:
        raise Shortcut(f"{tried} (the checker's frames)")


def answers_under_guard(fn: Any, cases: Iterable[tuple[Any, ...]], refuse: Iterable[tuple[Any, str, str]] = (),
                        *, loops: bool = True, steps: int = STEPS, steps_per_case: int | None = None,
                        elements_per_case: int | None = None, traced: bool = False, scalars: bool = True,
                        operators: bool = False, frames: bool = False) -> tuple[dict[tuple[Any, ...], Any], tuple[Any, Exception] | None]:
    """fn(*case) for every case, while the ``refuse`` targets refuse to run (and, with ``loops``, while
    huge arrays are refused and Python steps are counted). Every guard is undone before this returns,
    so the checker reports with the library whole again.

    steps: with ``loops``, the budget of Python lines for all cases together.
    steps_per_case: with ``loops``, a budget of Python lines for each case on its own (a closed form needs a
                    few dozen; a search, even a bisection, needs hundreds) instead of ``steps`` for all of them.
    elements_per_case: a budget of tensor and array elements for each case on its own (``element_budget``;
                       a closed form creates dozens, a vectorised search over candidates thousands to millions).
    traced: with ``elements_per_case``, also measure the memory each case allocates (``element_budget(traced=True)``),
            which numpy's builders bound to other names before the call cannot escape.
    scalars: with ``elements_per_case``, count results of one element too (``element_budget(scalars=...)``).
    operators: with ``elements_per_case``, count numpy's element-wise operators too (``element_budget(operators=...)``).
    frames: refuse the routes to the checker's frames while fn runs (``no_frame_access``).
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
                    stack.enter_context(step_budget(steps))
            for case in cases:
                with ExitStack() as per_case:  # the step budget last, so that it counts none of the others' set-up
                    if elements_per_case is not None:
                        per_case.enter_context(element_budget(elements_per_case, traced=traced, scalars=scalars,
                                                                  operators=operators))
                    if frames:
                        per_case.enter_context(no_frame_access())
                    if loops and steps_per_case is not None:
                        per_case.enter_context(step_budget(steps_per_case))
                    answers[case] = fn(*case)
    except (Shortcut, TooManySteps, TooManyElements) as stopped:
        return answers, (case, stopped)
    return answers, None


def _through_library() -> str:
    """' (through pl.f)' when the learner reached the builder through a library function f, else '': the message
    then names the call the learner wrote, not the builder inside it."""
    import posenc_lib

    frame, outermost = sys._getframe(1), ""
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        if module.startswith("posenc_lib.check"):
            if outermost:
                break  # past the learner's frames, back in the checker
        elif module.startswith("posenc_lib"):
            outermost = getattr(frame.f_code, "co_qualname", frame.f_code.co_name)  # ALiBi.forward, alibi_bias
        frame = frame.f_back
    if not outermost:
        return ""
    public = hasattr(posenc_lib, outermost.split(".")[0])
    return f" (through pl.{outermost})" if public else f" (through {outermost})"


def stopped_verdict(why: Exception, call: str, *, shortcut: str, loop: str = "", grid: str = "") -> tuple[bool, str]:
    """The verdict on an answer the guards stopped: "<call> calls <what>: <shortcut>" for a refused
    function, "<call> <loop>" for a loop that ran out of steps, "<call> creates more than N tensor or
    array elements: <grid>" for a vectorised search (``grid``, or ``loop`` when no grid text is given)."""
    if isinstance(why, Shortcut):
        return False, f"{call} calls {why.name}: {shortcut}"
    if isinstance(why, TooManyElements):
        return False, f"{call} creates more than {why.limit:,} tensor or array elements: {grid or loop}"
    return False, f"{call} {loop}"


def loaded(module: str, names: Iterable[str]) -> list[tuple[Any, str, str]]:
    """Targets for ``refusing``: ``module.name`` for each name, if the learner has imported ``module`` (a checker
    never imports a heavy library itself: one the learner did not load cannot be called)."""
    found = sys.modules.get(module)
    return [] if found is None else [(found, name, f"{module}.{name}") for name in names]


def differentiation() -> list[tuple[Any, str, str]]:
    """Targets for ``refusing``: torch's automatic differentiation (``torch.autograd.grad`` and ``backward``, which
    ``Tensor.backward``, ``torch.func`` and ``torch.autograd.functional`` all reach), for an exercise whose answer is
    where a derivative vanishes: a slope the learner did not derive, searched for its zero, is a search."""
    import torch

    return [(torch.autograd, "grad", "torch.autograd.grad"), (torch.autograd, "backward", "torch.autograd.backward"),
            (torch.Tensor, "backward", "Tensor.backward")]


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
