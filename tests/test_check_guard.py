"""check/_guard.py: the shortcuts it refuses, the loops it stops, and that it always undoes itself."""
from __future__ import annotations

import math
import sys

import numpy as np
import pytest
import torch

from posenc_lib.check import _guard as g


def test_refusing_raises_shortcut_by_name_and_restores_the_function():
    original = torch.softmax
    with pytest.raises(g.Shortcut) as caught:
        with g.refusing([(torch, "softmax", "torch.softmax"), (torch, "no_such_function", "ignored")]):
            torch.softmax(torch.zeros(3), dim=0)
    assert caught.value.name == "torch.softmax"
    assert torch.softmax is original
    assert torch.allclose(torch.softmax(torch.zeros(2), dim=0), torch.full((2,), 0.5))


@pytest.mark.parametrize("differentiate, name", [
    (lambda x: torch.autograd.grad((x * x).sum(), x), "torch.autograd.grad"),
    (lambda x: (x * x).sum().backward(), "Tensor.backward"),
    (lambda x: torch.autograd.backward((x * x).sum()), "torch.autograd.backward"),
    (lambda x: torch.func.grad(lambda y: (y * y).sum())(x), "torch.autograd.grad")])
def test_differentiation_refuses_every_route_and_restores_it(differentiate, name):
    x = torch.ones(2, requires_grad=True)
    with pytest.raises(g.Shortcut) as caught:
        with g.refusing(g.differentiation()):
            differentiate(x)
    assert caught.value.name == name
    assert torch.autograd.grad((x * x).sum(), x)[0].tolist() == [2.0, 2.0]
    (3 * x).sum().backward()
    assert x.grad.tolist() == [3.0, 3.0]


def test_step_budget_stops_a_python_loop_but_not_a_short_closed_form():
    def loop(n):
        total = 0
        for i in range(n):
            total += i
        return total

    previous = sys.gettrace()
    with g.step_budget(1000):
        assert loop(100) == 4950  # ~200 lines: inside the budget
    with pytest.raises(g.TooManySteps):
        with g.step_budget(1000):
            loop(10_000)
    assert sys.gettrace() is previous  # the tracer is gone whatever happened inside


@pytest.mark.parametrize("build", [
    lambda: torch.arange(10**9),
    lambda: torch.zeros((10, 10**8)),
    lambda: np.ones(10**8),
    lambda: torch.linspace(0, 1, steps=10**8),
])
def test_no_huge_arrays_refuses_before_allocating(build):
    originals = (torch.arange, torch.zeros, np.ones, torch.linspace)
    with pytest.raises(g.Shortcut, match="1e\\+08 or more entries"):
        with g.no_huge_arrays():
            build()
    assert (torch.arange, torch.zeros, np.ones, torch.linspace) == originals  # the builders are whole again


def test_no_huge_arrays_lets_small_arrays_through():
    with g.no_huge_arrays():
        assert torch.arange(4).sum().item() == 6 and np.zeros(3).shape == (3,)


@pytest.mark.parametrize("build, entries", [
    (lambda: torch.full((2, 3), float("-inf")), 6),  # a fill value is no size
    (lambda: torch.full((4,), 1e12), 4),
    (lambda: np.full(3, -1e30), 3),
    (lambda: torch.arange(10**12 - 3, 10**12), 3),  # a range's ends are huge, its length is 3
    (lambda: torch.arange(start=10**12, end=10**12 + 5), 5),
    (lambda: np.arange(10**15, 10**15 + 40, 10), 4),
    (lambda: torch.arange(0, 1e12, 1e10), 100),
    (lambda: torch.linspace(0, 1e12, 7), 7),
    (lambda: torch.zeros(3, 4, dtype=torch.float64), 12),
    (lambda: torch.randn(2, 3, generator=torch.Generator().manual_seed(0)), 6),
])
def test_no_huge_arrays_counts_entries_not_values(build, entries):
    """Only a shape, a number of steps or a range's length counts: a correct closed form may fill with -inf or
    count positions near 10^12 (chapter 6, Exercise 1), and is not refused for it."""
    with g.no_huge_arrays():
        out = build()
    assert (out.numel() if isinstance(out, torch.Tensor) else out.size) == entries


@pytest.mark.parametrize("build", [
    lambda: torch.ones(10**5, 10**5),  # every size below the limit, their product above it
    lambda: torch.zeros(size=(10**4, 10**4)),
    lambda: np.zeros((2, 10**8)),
    lambda: torch.arange(10**12 - 10**9, 10**12),  # a long range far from 0
    lambda: np.arange(start=0, stop=10**9),
    lambda: torch.arange(torch.tensor(10**9)),
    lambda: torch.full((10**8,), 0.0),
    lambda: np.linspace(0, 1, num=10**8),
])
def test_no_huge_arrays_refuses_many_entries_however_given(build):
    with pytest.raises(g.Shortcut, match="1e\\+08 or more entries"):
        with g.no_huge_arrays():
            build()
_LONG = torch.ones(2, 10**5, dtype=torch.float64)  # two rows of 10^5: a product of them is 10^10 numbers


@pytest.mark.parametrize("build", [
    lambda: _LONG.T @ _LONG,  # a d x d matrix from two (2, d) factors
    lambda: torch.einsum("hi,hj->ij", _LONG, _LONG),
    lambda: _LONG[0][:, None] * _LONG[1][None, :],  # a broadcast
    lambda: torch.zeros(10**5, 10**5),  # no single size of 10^8, their product
    lambda: torch.eye(10**5),
    lambda: np.zeros((10**5, 10**5)),
    lambda: np.outer(np.ones(10**5), np.ones(10**5)),
    lambda: np.kron(np.ones((400, 400)), np.ones((400, 400))),
])
def test_no_huge_arrays_refuses_a_huge_result_before_computing_it(build):
    """Each would ask for 10^10 numbers (80 GB): refused at once, from the shapes alone."""
    originals = (torch.zeros, np.zeros, np.outer, np.kron)
    with pytest.raises(g.Shortcut, match="1e\\+08 or more"):
        with g.no_huge_arrays():
            build()
    assert (torch.zeros, np.zeros, np.outer, np.kron) == originals
    assert (_LONG.T[:3] @ _LONG[:, :3]).shape == (3, 3)  # and nothing is predicted any more


def test_no_huge_arrays_lets_products_of_ordinary_size_through():
    with g.no_huge_arrays():
        a = torch.ones(300, 300)
        assert (a @ a).shape == (300, 300) and torch.einsum("ij,jk->ik", a, a).shape == (300, 300)
        assert (a[:, :1] * a[:1, :]).sum().item() == 300 * 300 and torch.zeros(300, 300, device="meta").is_meta
        assert np.outer(np.ones(300), np.ones(300)).sum() == 300 * 300


def test_answers_under_guard_returns_the_answers_or_the_case_that_stopped():
    closed_form = lambda n: n * (n - 1) // 2  # noqa: E731
    answers, stopped = g.answers_under_guard(closed_form, [(10,), (10**12,)])
    assert stopped is None and answers == {(10,): 45, (10**12,): 10**12 * (10**12 - 1) // 2}

    def measured(n):
        return torch.arange(n).sum().item()

    answers, stopped = g.answers_under_guard(measured, [(10,), (10**12,)])
    assert answers == {(10,): 45}
    case, why = stopped
    assert case == (10**12,) and isinstance(why, g.Shortcut)

    def by_softmax(n):
        return torch.softmax(torch.zeros(n), dim=0)[0].item()

    answers, stopped = g.answers_under_guard(by_softmax, [(4,)], refuse=[(torch, "softmax", "torch.softmax")])
    assert answers == {} and stopped[1].name == "torch.softmax"
    assert math.isclose(by_softmax(4), 0.25)  # undone before returning


def test_a_budget_per_case_stops_a_search_that_a_shared_budget_lets_through():
    """steps_per_case: each case gets its own few lines, so many small cases cannot pay for one search."""
    def bisection(n):  # the largest k with k * k <= n, found by halving an interval: ~5 lines a step
        lo, hi = 0, n + 1
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if mid * mid <= n else (lo, mid)
        return lo

    cases = [(n,) for n in range(1, 40)] + [(10**24,)]
    answers, stopped = g.answers_under_guard(bisection, cases)
    assert stopped is None and answers[(10**24,)] == 10**12  # 200 000 lines shared: plenty
    answers, stopped = g.answers_under_guard(bisection, cases, steps_per_case=30)
    assert isinstance(stopped[1], g.TooManySteps) and stopped[0] == (10**24,) and len(answers) == 39
    answers, stopped = g.answers_under_guard(math.isqrt, cases, steps_per_case=30)  # one C call: no lines at all
    assert stopped is None and answers[(10**24,)] == 10**12


def test_answers_under_guard_lets_other_errors_through():
    original, tracer = torch.arange, sys.gettrace()
    with pytest.raises(ZeroDivisionError):
        g.answers_under_guard(lambda n: 1 / n, [(0,)])
    assert torch.arange is original and sys.gettrace() is tracer


def test_stopped_verdict_names_the_shortcut_or_the_loop():
    ok, message = g.stopped_verdict(g.Shortcut("torch.softmax"), "f(10)", shortcut="a measurement, not a formula")
    assert not ok and message == "f(10) calls torch.softmax: a measurement, not a formula"
    ok, message = g.stopped_verdict(g.TooManySteps(), "f(10)", shortcut="x", loop="walks every key")
    assert not ok and message == "f(10) walks every key"


def test_refusing_a_library_function_refuses_every_name_bound_to_it():
    """`from posenc_lib import rel_shift` (or `shift = pl.rel_shift` before the call) is the same function:
    refused too, then whole again."""
    import posenc_lib as pl
    from posenc_lib import rel_shift as imported_before
    from posenc_lib import xl

    alias, code = pl.rel_shift, pl.rel_shift.__code__
    for call in (lambda x: imported_before(x), lambda x: alias(x), lambda x: xl.rel_shift(x)):
        with pytest.raises(g.Shortcut) as caught:
            with g.refusing([(pl, "rel_shift", "pl.rel_shift"), (xl, "rel_shift", "pl.rel_shift")]):
                call(torch.zeros(2, 3))
        assert caught.value.name == "pl.rel_shift"
    assert pl.rel_shift is alias and alias.__code__ is code  # the function is whole again
    assert imported_before(torch.arange(6.0).view(2, 3)).shape == (2, 3)


def test_step_budget_per_case_stops_a_search_that_a_shared_budget_lets_through():
    """A bisection takes ~50 rounds for 10^15: inside the shared budget, over a per-case budget of 100 lines."""
    def bisect_sqrt(n):
        lo, hi = 0, n
        while hi - lo > 1:
            mid = (lo + hi) // 2
            lo, hi = (mid, hi) if mid * mid <= n else (lo, mid)
        return lo

    tracer = sys.gettrace()
    answers, stopped = g.answers_under_guard(bisect_sqrt, [(10**15,)])
    assert stopped is None and answers[(10**15,)] == math.isqrt(10**15)
    answers, stopped = g.answers_under_guard(bisect_sqrt, [(10**15,)], steps_per_case=100)
    assert answers == {} and isinstance(stopped[1], g.TooManySteps)
    answers, stopped = g.answers_under_guard(math.isqrt, [(10**15,), (10**16,)], steps_per_case=100)
    assert stopped is None and answers[(10**16,)] == 10**8  # a closed form (here a built-in) passes every case
    assert sys.gettrace() is tracer


# ---------------------------------------------------------------- the element budget

def _offset_by_the_slow_pair(code_a, code_b):
    """A closed form in torch: the slowest pair's turn from one code to the other (a handful of elements)."""
    turn = torch.atan2(code_b[6], code_b[7]) - torch.atan2(code_a[6], code_a[7])
    return (torch.remainder(turn + math.pi, 2 * math.pi) - math.pi) / 1e-3


def _vectorised_search(code_a, code_b):
    """The readers' shortcut: every candidate offset on a grid, each pair turned by it, the best one kept
    (no Python loop, no array builder refused by size: only the element budget sees it)."""
    k = torch.linspace(-3000, 3000, 600_001, dtype=torch.float64)[:, None]
    theta = 10000.0 ** (-torch.arange(4, dtype=torch.float64) / 4)
    a_angle = torch.atan2(code_a[0::2], code_a[1::2])
    miss = (torch.sin(a_angle + k * theta) - code_b[0::2]).square().sum(-1)
    return k[miss.argmin(), 0]


def _codes(m, n):
    theta = 10000.0 ** (-torch.arange(4, dtype=torch.float64) / 4)
    def code(x):
        return torch.stack([torch.sin(x * theta), torch.cos(x * theta)], -1).flatten()
    return code(m), code(n)


def test_element_budget_passes_a_closed_form_and_stops_a_vectorised_search():
    code_a, code_b = _codes(1234.5, 3456.25)
    with g.element_budget(200):
        assert abs(float(_offset_by_the_slow_pair(code_a, code_b)) - 2221.75) < 1e-6
    assert abs(float(_vectorised_search(code_a, code_b)) - 2221.75) < 0.01  # right, unguarded
    with pytest.raises(g.TooManyElements) as caught:
        with g.element_budget(100_000):
            _vectorised_search(code_a, code_b)
    assert caught.value.limit == 100_000 and "more than 100,000 elements" in str(caught.value)


@pytest.mark.parametrize("build", [
    lambda: np.linspace(0, 1, 5001),  # a numpy grid
    lambda: np.array(list(range(5001))),  # a grid from Python data
    lambda: np.meshgrid(np.zeros(80), np.zeros(80)),  # 2 x 6400 from two small arrays
    lambda: torch.tensor(range(5001)),  # torch from Python data
    lambda: torch.zeros(100).expand(60, 100),  # a view counts: it is work asked for, not memory held
    lambda: sum(torch.ones(50) * i for i in range(120)),  # many small tensors add up
    lambda: np.multiply(range(5001), 1e-3),  # a ufunc called on a range builds the grid (cold read 2 of ch03)
    lambda: np.add.outer(np.zeros(80), np.zeros(80)),  # a ufunc's method
    lambda: np.sin(list(range(5001))),
])
def test_element_budget_counts_every_builder_and_every_result(build):
    with pytest.raises(g.TooManyElements):
        with g.element_budget(5000):
            build()


def test_element_budget_is_undone_whatever_happens():
    from torch.overrides import _get_current_function_mode_stack

    builders = (np.linspace, np.array, np.meshgrid, np.multiply, np.sin)
    for inside in (lambda: np.zeros(10), lambda: np.zeros(10**5), lambda: 1 / 0):
        try:
            with g.element_budget(1000):
                inside()
        except (g.TooManyElements, ZeroDivisionError):
            pass
        assert (np.linspace, np.array, np.meshgrid, np.multiply, np.sin) == builders and not _get_current_function_mode_stack()
    assert torch.arange(10**6).numel() == 10**6 and np.zeros(10**6).size == 10**6  # nothing counts outside
    assert isinstance(np.multiply, np.ufunc)


def test_answers_under_guard_with_an_element_budget_per_case():
    cases = [_codes(10.5, 20.25), _codes(1e6 + 0.5, 1e6 - 1500.75)]
    answers, stopped = g.answers_under_guard(_offset_by_the_slow_pair, cases, elements_per_case=200,
                                             steps_per_case=40)
    assert stopped is None and [round(float(a), 6) for a in answers.values()] == [9.75, -1501.25]
    answers, stopped = g.answers_under_guard(_vectorised_search, cases, elements_per_case=100_000)
    assert answers == {} and isinstance(stopped[1], g.TooManyElements)
    ok, message = g.stopped_verdict(stopped[1], "your function", shortcut="x", grid="a search over offsets")
    assert not ok and message == ("your function creates more than 100,000 tensor or array elements: "
                                  "a search over offsets")


def test_step_budget_does_not_count_the_guards_own_lines():
    """Each torch call under the element budget passes through the guard's Python code: those lines are the
    checker's, not the learner's, so a short torch closed form stays inside a small step budget."""
    code_a, code_b = _codes(5.0, 7.5)
    answers, stopped = g.answers_under_guard(_offset_by_the_slow_pair, [(code_a, code_b)], steps_per_case=10,
                                             elements_per_case=200)
    assert stopped is None
def test_the_guards_own_wrappers_do_not_count_as_the_learners_steps():
    """A size-checked builder runs lines of _guard.py; under a tight budget they must not stop a closed form."""
    with g.no_huge_arrays(), g.step_budget(5):
        for _ in range(3):
            torch.arange(4)
            np.zeros(3)


def test_counted_numbers_do_arithmetic_and_count_it():
    A = g.counting([[0.0, -1.0], [1.0, 0.0]], limit=100)
    x = (A[1][0] * 3 + 1) / 2 - A[0][1] ** 2  # 2 - 1
    assert g.value_of(x) == 1.0 and isinstance(x, g.Counted)
    assert g.value_of(abs(-A[1][0])) == 1.0 and g.value_of(sum(a for row in A for a in row)) == 0.0
    assert max(A[0][1], 0) == 0 and A[1][0] > 0.5  # comparisons answer as booleans
    budget = object.__getattribute__(A[0][0], "_budget")
    assert budget.used == 5 + 2 + 4 + 2 * g.COMPARISON_COST  # every operation counted, comparisons ten times
    assert g.value_of(2.5) == 2.5


def test_counted_numbers_carry_a_shadow_through_the_same_arithmetic():
    """Each entry's shadow follows the same operations; comparisons are decided by the value alone."""
    A = g.counting([[1.0, 4.0]], limit=100, shadow=[[2.0, 16.0]])
    x = max(A[0][1] ** 0.5 - A[0][0], 0) * 3  # value (2 - 1) * 3, shadow (4 - 2) * 3
    assert (g.value_of(x), g.shadow_of(x)) == (3.0, 6.0)
    y = A[0][0] * 0 + 5.0  # a plain number mixed in keeps its own value in the shadow
    assert (g.value_of(y), g.shadow_of(y)) == (5.0, 5.0) and g.shadow_of(5.0) is None
    B = g.counting([[1.5]], limit=10)
    assert g.shadow_of(B[0][0] * 2) == 3.0  # by default the shadow is the entry itself


def test_counted_numbers_stop_past_their_budget():
    A = g.counting(np.eye(4), limit=400)
    M = np.array(A, dtype=object)
    with pytest.raises(g.TooManySteps):
        for _ in range(10):
            M = M @ M  # about 112 operations each


@pytest.mark.parametrize("leave", [
    lambda x: float(x), lambda x: int(x), lambda x: f"{x:.3f}", lambda x: round(x),
    lambda x: np.array([x], dtype=float), lambda x: torch.tensor([x], dtype=torch.float64),
    lambda x: __import__("pickle").dumps(x), lambda x: x._counted_value, lambda x: math.sqrt(x),
])
def test_counted_numbers_never_leave_the_count(leave):
    x = g.counting([[1.5]], limit=100)[0][0]
    with pytest.raises(g.Shortcut):
        leave(x)
    assert "1.5" not in repr(x) and "1.5" not in str(x)


def test_element_budget_lets_a_few_ufunc_calls_through():
    with g.element_budget(100):
        assert float(np.multiply(np.arange(3), 2.0).sum()) == 6.0 and np.add.reduce([1, 2, 3]) == 6
        assert np.pi > 3 and np.multiply.nin == 2  # attributes that are not calls pass unchanged


def test_no_frame_access_refuses_the_routes_to_other_frames_and_is_idle_outside():
    """Cold read 25 (chapter 3): an answer that walks up the stack reads the checker's locals; inside the block every
    route to another frame or to all objects is refused, and a refusal the function caught is raised on leaving."""
    import gc
    import sys

    from posenc_lib.check._guard import Shortcut, no_frame_access

    def by_traceback():
        try:
            raise ValueError
        except ValueError as error:
            return error.__traceback__.tb_frame

    for route in (lambda: sys._getframe(1), by_traceback, lambda: gc.get_objects(), lambda: sys._current_frames()):
        with pytest.raises(Shortcut, match="the checker's frames"):
            with no_frame_access():
                route()
    with pytest.raises(Shortcut, match="the checker's frames"):
        with no_frame_access():
            try:
                sys._getframe(1)
            except Shortcut:
                pass  # caught, and refused all the same on leaving
    with no_frame_access():
        assert sum(range(10)) == 45  # a function that reaches no frame runs as before
    assert sys._getframe(0).f_back is not None and by_traceback() is not None and gc.get_objects()  # idle outside
