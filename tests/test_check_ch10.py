"""check.ch10: RoPE's backward rotation written into the gradient, with fewer new elements than g has; and the
prediction of the tables' bytes in a training step (tables_in_a_step)."""
import math
import re
from fractions import Fraction

import numpy as np
import pytest
import torch

import posenc_lib as pl
from _hands_over import held_answers
from posenc_lib import check
from posenc_lib.check import ch10


def halves(g, layout):
    d = g.shape[-1]
    return (g[..., : d // 2], g[..., d // 2:]) if layout == "half" else (g[..., 0::2], g[..., 1::2])


def right(g, cos, sin, layout):
    """a' = a cos + b sin, b' = b cos - a sin: a is saved before it is overwritten."""
    a, b = halves(g, layout)
    saved = a.clone()
    a.mul_(cos).addcmul_(b, sin)
    b.mul_(cos).addcmul_(saved, sin, value=-1)


def complex_when_interleaved(g, cos, sin, layout):
    """Right where g's last dimension is contiguous: adjacent pairs are complex numbers, multiplied in place by
    e^{-i angle}. view_as_complex needs a last stride of 1, so it raises on a g whose last stride is 2."""
    if layout == "half":
        return right(g, cos, sin, layout)
    torch.view_as_complex(g.unflatten(-1, (g.shape[-1] // 2, 2))).mul_(torch.complex(cos, -sin))


def shears(g, cos, sin, layout):
    """Another right design, with no copy of g: the rotation by -angle as three shears, each an in-place multiply-add
    of one member by the other, t = tan(angle / 2) = sin / (1 + cos). Where cos < 0 it first turns the pair by a
    half turn (both members negated, in place) and shears by the rest, so that 1 + cos >= 1 and |t| <= 1. Its only
    new tensors are of the tables' size."""
    a, b = halves(g, layout)
    sign = torch.where(cos < 0, -1.0, 1.0)
    c, s = cos * sign, sin * sign  # the angle less the half turn
    t = s / (1 + c)
    a.mul_(sign)
    b.mul_(sign)
    a.addcmul_(b, t)
    b.addcmul_(a, s, value=-1)
    a.addcmul_(b, t)


def shears_through_a_half_turn(g, cos, sin, layout):
    """The shears without the half turn: t = sin / (1 + cos) is infinite where cos rounds to -1."""
    a, b = halves(g, layout)
    t = sin / (1 + cos)
    a.addcmul_(b, t)
    b.addcmul_(a, sin, value=-1)
    a.addcmul_(b, t)


def verdict(answer, capsys):
    ok = check.rotate_back_in_place(answer)
    return ok, capsys.readouterr().out


MINUS_ONE = torch.tensor(-1.0)  # a module-level scalar: brought in from outside, one element


def negated_sine(g, cos, sin, layout):
    """Right, with one more (seq, d/2) tensor, -sin: still fewer new elements than g."""
    a, b = halves(g, layout)
    saved = a.clone()
    a.mul_(cos).addcmul_(b, sin)
    b.mul_(cos).addcmul_(saved, -sin)


def scalar_from_outside(g, cos, sin, layout):
    """Right, with a scalar tensor made before the call: one element brought in from outside."""
    a, b = halves(g, layout)
    saved = a.clone()
    a.mul_(cos).addcmul_(b, sin)
    b.mul_(cos).addcmul_(saved.mul_(MINUS_ONE), sin)


@pytest.mark.parametrize("answer", [right, negated_sine, scalar_from_outside, shears])
def test_right_designs_pass(answer, capsys):
    ok, out = verdict(answer, capsys)
    assert ok is True and out.count("✓") == len(ch10._CASES), out


def new_elements(out):
    """The new elements of each passing case: the checker keeps them, and prints only that the budget is met."""
    assert out.count("within the budget") == len(ch10._NEW_ELEMENTS) and "new elements (g has" not in out, out
    return list(ch10._NEW_ELEMENTS)


def test_the_budget_is_met_by_a_design_with_no_copy_of_g(capsys):
    """The saved member is half of g; the shears make a few tensors of the tables' size (seq x d/2) and no more."""
    ok, out = verdict(right, capsys)
    halves_of_g = [math.prod(shape) // 2 for shape, _, _ in ch10._CASES]
    assert ok is True and new_elements(out) == halves_of_g, out
    ok, out = verdict(shears, capsys)
    tables = [shape[2] * shape[3] // 2 for shape, _, _ in ch10._CASES]
    assert ok is True and all(n < 6 * t for n, t in zip(new_elements(out), tables)), out
    assert all(n < half for n, half in zip(new_elements(out), halves_of_g)), out


def test_shears_need_the_half_turn_where_cos_is_near_minus_one(capsys):
    ok, out = verdict(shears_through_a_half_turn, capsys)
    assert ok is False and out.count("except at pairs whose cos is near -1") == len(ch10._CASES), out
    assert out.count("a step divides by a number that comes near zero at those angles") == len(ch10._CASES), out


def divide_by_cos(g, cos, sin, layout):
    """No copy of g, by solving for the overwritten member: a' = a cos + b sin, then b' = (b - a' sin) / cos, which
    equals b cos - a sin in exact arithmetic and is unstable where cos is near 0."""
    a, b = halves(g, layout)
    a.mul_(cos).addcmul_(b, sin)
    b.addcmul_(a, sin, value=-1).div_(cos)


def test_dividing_by_cos_is_named(capsys):
    ok, out = verdict(divide_by_cos, capsys)
    assert ok is False and out.count("except at pairs whose cos is near 0,") == len(ch10._CASES), out
    assert out.count("dividing by it magnifies the rounding") == len(ch10._CASES), out
    assert "half turn" not in out and "shear" not in out and "clone" not in out  # the failure, not a design


def test_a_nan_in_g_is_counted_not_printed_as_a_size(capsys):
    """A NaN has no size: the message counts the entries that are not finite instead of printing "up to nan"."""
    def nan_at_one_entry(g, cos, sin, layout):
        right(g, cos, sin, layout)
        g[..., 1, 1] = float("nan")  # feature 1 at position 1, in every head of every sequence

    ok, out = verdict(nan_at_one_entry, capsys)
    assert ok is False and "nan" not in out and out.count("NaN or infinite at") == len(ch10._CASES), out
    heads = [math.prod(shape[:2]) for shape, _, _ in ch10._CASES]
    assert [int(n.replace(",", "")) for n in re.findall(r"NaN or infinite at ([\d,]+) of", out)] == heads, out


def test_an_error_in_one_case_names_that_case_and_the_others_still_run(capsys):
    def by_rows(g, cos, sin, layout):  # right, but g.view fails on the transposed gradients
        right(g.view(-1, g.shape[-2], g.shape[-1]), cos, sin, layout)

    ok, out = verdict(by_rows, capsys)
    transposed = [f"{layout} layout, a transposed view g of" for _, layout, s in ch10._CASES if s == "transposed"]
    assert ok is False and out.count("✓") == sum(s != "transposed" for *_, s in ch10._CASES), out
    assert all(where in out for where in transposed) and out.count("your function raised RuntimeError") == len(transposed), out
    assert "assumes that g's last dimension is contiguous" not in out  # their last stride is 1


def test_a_design_that_needs_a_last_stride_of_1_is_refused_and_named(capsys):
    """view_as_complex passes every case whose last stride is 1, and raises on every other feature of a wider g."""
    ok, out = verdict(complex_when_interleaved, capsys)
    sliced = [case for case in ch10._CASES if case[2] == "sliced"]
    assert sliced and all(layout == "interleaved" for _, layout, _ in sliced)
    assert ok is False and out.count("✓") == len(ch10._CASES) - len(sliced), out
    assert out.count("a view with last stride 2 g of") == len(sliced), out
    assert out.count("your function raised RuntimeError") == len(sliced), out
    assert out.count("your function assumes that g's last dimension is contiguous") == len(sliced), out
    assert "clone" not in out and "mul_" not in out and "addcmul" not in out  # the misconception, not a design


def test_writing_next_to_g_is_refused(capsys):
    """A slice's neighbours in memory are not g's: using them as scratch space is refused."""
    def neighbours_as_scratch(g, cos, sin, layout):
        if g.stride(-1) == 2:
            spare = torch.as_strided(g, g.shape, g.stride(), g.storage_offset() + 1)  # the other features
            spare.fill_(0.0)
        right(g, cos, sin, layout)

    ok, out = verdict(neighbours_as_scratch, capsys)
    assert ok is False and out.count("writes into memory next to g's entries") == 1, out


def test_not_attempted(capsys):
    def stub(g, cos, sin, layout):
        raise NotImplementedError

    assert check.rotate_back_in_place(stub) is None and check.rotate_back_in_place(None) is None


def rotated_clone(g, cos, sin, layout):
    out = g.clone()
    right(out, cos, sin, layout)
    return out


SHORTCUTS = {  # out-of-place routes, each written into g at the end
    "the library's rotation": lambda g, c, s, layout: g.copy_(pl.rotate_pairs(g, c, -s, layout)),
    "the right design on a clone": lambda g, c, s, layout: g.copy_(rotated_clone(g, c, s, layout)),
    "the two halves as expressions": lambda g, c, s, layout: [
        h.copy_(v) for h, v in zip(halves(g, layout), (halves(g, layout)[0] * c + halves(g, layout)[1] * s,
                                                         halves(g, layout)[1] * c - halves(g, layout)[0] * s))],
    "a Python list": lambda g, c, s, layout: g.copy_(torch.tensor(pl.rotate_pairs(g, c, -s, layout).tolist())),
    "the result returned, not written": lambda g, c, s, layout: pl.rotate_pairs(g, c, -s, layout),
}


@pytest.mark.parametrize("name", SHORTCUTS)
def test_out_of_place_routes_are_refused_by_the_count(name, capsys):
    ok, out = verdict(SHORTCUTS[name], capsys)
    assert ok is False and out.count("the budget is fewer than g's own") == len(ch10._CASES), out
    assert out.count("Every out-of-place expression") == len(ch10._CASES), out  # the misconception, named


def test_one_product_out_of_place_is_over_the_budget(capsys):
    def saved_and_a_product(g, cos, sin, layout):  # right values, but b * sin is a second half of g
        a, b = halves(g, layout)
        saved = a.clone()
        a.mul_(cos).add_(b * sin)
        b.mul_(cos).addcmul_(saved, sin, value=-1)

    ok, out = verdict(saved_and_a_product, capsys)
    assert ok is False and out.count("the budget is fewer than g's own") == len(ch10._CASES), out


def test_the_count_is_cumulative_not_a_peak(capsys):
    """An out-of-place rotation in pieces of 4 positions: small at any moment, all of g in new tensors in total."""
    peaks = []

    def in_pieces(g, cos, sin, layout):
        for start in range(0, g.shape[-2], 4):
            piece = g[..., start:start + 4, :]
            a, b = halves(piece, layout)
            c, s = cos[start:start + 4], sin[start:start + 4]
            new_a, new_b = a * c + b * s, b * c - a * s  # out of place: each half of the piece
            peaks.append(new_a.numel() + new_b.numel())
            a.copy_(new_a)
            b.copy_(new_b)

    ok, out = verdict(in_pieces, capsys)
    assert max(peaks) <= max(math.prod(shape) for shape, _, _ in ch10._CASES) // 8  # never much held at once
    assert ok is False and out.count("the rule is not a peak") == len(ch10._CASES), out


def test_pieces_through_one_reused_buffer_pass(capsys):
    """The count is of allocations: rotating 8 positions at a time through one small buffer, made once, passes."""

    def through_one_buffer(g, cos, sin, layout):
        a, b = halves(g, layout)
        buf = torch.empty(a[..., :8, :].shape)  # the only new tensor: 8 positions of one member
        for start in range(0, g.shape[-2], 8):
            a_c, b_c = a[..., start:start + 8, :], b[..., start:start + 8, :]
            c, s = cos[start:start + 8], sin[start:start + 8]
            torch.mul(a_c, c, out=buf)
            buf.addcmul_(b_c, s)  # the new a, while a_c still holds the old one
            b_c.mul_(c).addcmul_(a_c, s, value=-1)
            a_c.copy_(buf)

    ok, out = verdict(through_one_buffer, capsys)
    eighths = [shape[0] * shape[1] * 8 * shape[3] // 2 for shape, _, _ in ch10._CASES]
    assert ok is True and new_elements(out) == eighths, out


def test_numpy_route_is_counted_outside_torch(capsys):
    def in_numpy(g, cos, sin, layout):  # the same right design, but its temporary is a numpy array
        x = np.asarray(g)
        a, b = halves(x, layout)
        saved = a.copy()
        a *= cos.numpy()
        a += b * sin.numpy()
        b *= cos.numpy()
        b -= saved * sin.numpy()

    ok, out = verdict(in_numpy, capsys)
    assert ok is False and out.count("bytes outside torch's tensors") == len(ch10._CASES), out


WIDE = {"float64": (torch.float64, 2), "complex128": (torch.complex128, 4)}  # dtype, float32 elements per element


@pytest.mark.parametrize("wide", WIDE)
def test_a_copy_of_g_in_wider_storage_is_counted_in_gs_elements(wide, capsys):
    """A float32 copy of all of g hidden in float64 or complex128 storage: counted as g's elements, not the wide ones."""
    dtype, per = WIDE[wide]

    def wide_copy(g, cos, sin, layout):
        saved = torch.empty(g.numel() // per, dtype=dtype).view(torch.float32).view(g.shape)
        saved.copy_(g)
        a, b = halves(g, layout)
        sa, sb = halves(saved, layout)
        torch.mul(sa, cos, out=a)
        a.addcmul_(sb, sin)
        torch.mul(sb, cos, out=b)
        b.addcmul_(sa, sin, value=-1)

    ok, out = verdict(wide_copy, capsys)
    assert ok is False and out.count("the budget is fewer than g's own") == len(ch10._CASES), out


def test_memory_made_before_the_call_is_counted(capsys):
    scratch = torch.empty(10**6)

    def with_scratch(g, cos, sin, layout):
        saved = halves(scratch[: g.numel()].view(g.shape), layout)[0]  # no new tensor: memory from outside
        a, b = halves(g, layout)
        saved.copy_(a)
        a.mul_(cos).addcmul_(b, sin)
        b.mul_(cos).addcmul_(saved, sin, value=-1)

    ok, out = verdict(with_scratch, capsys)
    assert ok is False and out.count("(or brings in from outside) 1,000,000 elements") == len(ch10._CASES), out


def test_changing_the_tables_is_refused(capsys):
    def no_rotation_at_all(g, cos, sin, layout):  # tables of angle 0: the library's R^T g would be g itself
        cos.fill_(1.0)
        sin.zero_()

    ok, out = verdict(no_rotation_at_all, capsys)
    assert ok is False and out.count("changes cos or sin") == len(ch10._CASES), out


def forward(g, cos, sin, layout):
    a, b = halves(g, layout)
    saved = a.clone()
    a.mul_(cos).addcmul_(b, sin, value=-1)
    b.mul_(cos).addcmul_(saved, sin)


def stale_second(g, cos, sin, layout):  # b' from the a already overwritten
    a, b = halves(g, layout)
    a.mul_(cos).addcmul_(b, sin)
    b.mul_(cos).addcmul_(a, sin, value=-1)


def stale_first(g, cos, sin, layout):  # the other order: a' from the b already overwritten
    a, b = halves(g, layout)
    b.mul_(cos).addcmul_(a, sin, value=-1)
    a.mul_(cos).addcmul_(b, sin)


def other_layout(g, cos, sin, layout):
    right(g, cos, sin, "interleaved" if layout == "half" else "half")


def unchanged(g, cos, sin, layout):
    return None


def wrong_sign_of_both(g, cos, sin, layout):  # neither named case: reported by how far off it is
    a, b = halves(g, layout)
    a.neg_()


@pytest.mark.parametrize("answer, name", [
    (forward, "the forward rotation (by +angle)"),
    (stale_second, "computed from the other member after that member was overwritten"),
    (stale_first, "computed from the other member after that member was overwritten"),
    (other_layout, "as if its pairs were laid out as"),
    (unchanged, "g is unchanged"),
    (wrong_sign_of_both, "differs from R^T g: off by up to"),
])
def test_misconceptions_are_named(answer, name, capsys):
    ok, out = verdict(answer, capsys)
    assert ok is False and out.count(name) == len(ch10._CASES), out


def test_checker_hands_over_no_answer():
    cases = [ch10._inputs(shape, layout, stored, seed) + (layout,)
             for seed, (shape, layout, stored) in enumerate(ch10._CASES)]
    answers = []
    for g, cos, sin, layout in cases:
        done = g.clone()
        right(done, cos, sin, layout)
        answers.append(done)
    calls = [(), *[(g.clone(), cos, sin, layout) for g, cos, sin, layout in cases],
             *[(g.clone(), cos, sin, layout, first) for g, cos, sin, layout in cases for first in (0, 1)]]
    assert held_answers(ch10, answers, calls) == []
    assert ch10.__all__ == ["rotate_back_in_place", "tables_in_a_step"]


# The count is a TorchDispatchMode, and torch's private API can switch modes off. What it cannot hide is the change
# to g: the checker compares g before and after every write it sees, so a write made while the count is off shows
# as a change between two seen writes (or after the last one). Known limit: a learner who patches the checker's
# own class can still defeat it (adversarial, not a design: the exercise asks for a design).
def unseen_only(g, cos, sin, layout):
    from torch.utils._python_dispatch import _disable_current_modes

    with _disable_current_modes():
        g.copy_(pl.rotate_pairs(g, cos, -sin, layout))


def unseen_then_a_seen_write(g, cos, sin, layout):  # the out-of-place rotation hidden, then a write the count sees
    unseen_only(g, cos, sin, layout)
    g.mul_(1.0)


def seen_write_then_unseen(g, cos, sin, layout):
    g.mul_(1.0)
    unseen_only(g, cos, sin, layout)


@pytest.mark.parametrize("answer", [unseen_only, unseen_then_a_seen_write, seen_write_then_unseen])
def test_switching_the_count_off_is_refused(answer, capsys):
    ok, out = verdict(answer, capsys)
    assert ok is False and out.count("g was changed where the count could not see it") == len(ch10._CASES), out


def per_slice_where_the_count_is_off(g, cos, sin, layout):
    """The out-of-place rotation of one (batch, head) slice at a time, made while the count is off; each result is
    copied into g where the count sees it, then freed, so the next slice's result is made at the same address."""
    from torch.utils._python_dispatch import _disable_current_modes

    for i in range(g.shape[0]):
        for j in range(g.shape[1]):
            gi = g[i, j]
            with _disable_current_modes():
                o = pl.rotate_pairs(gi, cos, -sin, layout)
            gi.copy_(o)
            del o


def test_a_reused_address_counts_again(capsys):
    """Every slice's result is brought in from outside the count: all of them add up to g's size, though each is
    freed before the next one takes its address."""
    ok, out = verdict(per_slice_where_the_count_is_off, capsys)
    sizes = [f"(or brings in from outside) {math.prod(shape):,} elements" for shape, _, _ in ch10._CASES]
    assert ok is False and all(size in out for size in sizes), out
    assert out.count("the budget is fewer than g's own") == len(ch10._CASES), out
    assert out.count("Every out-of-place expression") == len(ch10._CASES), out  # the misconception, named


def test_the_appendix_quotes_the_triton_kernel_as_it_is():
    """§5 quotes lines of triton_rope.py in markdown (a notebook does not read source code): each quoted line is
    one of the module's lines, so the quote cannot drift from the kernel."""
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    chapter = (root / "notebooks/src/10_making_it_fast.py").read_text()
    source = (root / "posenc_lib/kernels/triton_rope.py").read_text()
    kernel = {line.strip() for line in source.splitlines()}
    quoted = chapter.split("# ```python\n", 1)[1].split("# ```\n", 1)[0].splitlines()
    assert len(quoted) == 18
    for line in quoted:
        assert line.startswith("# ") and line[2:].strip() in kernel, line
    # the prose after it names the option that keeps torch's rounding: the kernel must still set it
    assert "`enable_fp_fusion=False` (`_compile_options` in the same file)" in chapter
    assert "def _compile_options(" in source and '"enable_fp_fusion": False' in source  # (imports triton: read)


# ---------------------------------------------------------------- Exercise 2: the tables in a training step
from posenc_lib.counting import RecordOps, total_bytes  # noqa: E402


def step_bounds(batch, heads, seq, d, itemsize):
    """Written here from the count, not from the checker: x and g one bound each; the float32 cos and sin tables,
    seq x d/2 each and shared by every sequence and head, read in both passes."""
    return 2 + Fraction(2 * 2 * seq * (d // 2) * 4, 2 * batch * heads * seq * d * itemsize)


def measured_on_meta(batch, heads, seq, d, itemsize):
    """The step counted as the appendix counts it: the C operator forward and backward on the meta device."""
    dtype = {1: torch.float8_e4m3fn, 2: torch.bfloat16, 4: torch.float32, 8: torch.float64}[itemsize]
    x = torch.empty(batch, heads, seq, d, dtype=dtype, device="meta").requires_grad_()
    cos, sin = torch.empty(seq, d // 2, device="meta"), torch.empty(seq, d // 2, device="meta")
    with RecordOps() as rec:
        out = torch.ops.posenc.rope_rotate(x, cos, sin, interleaved=False, inverse=False)
        torch.autograd.grad(out, x, torch.empty_like(out))
    return Fraction(total_bytes(rec.ops), 2 * x.numel() * itemsize)


@pytest.mark.parametrize("size", [(1, 8, 1024, 128, 2), (2, 3, 16, 64, 2), (3, 1, 8, 32, 4), (1, 5, 12, 16, 8)])
def test_the_answer_key_is_what_the_appendix_counts(size):
    assert measured_on_meta(*size) == step_bounds(*size)
    assert step_bounds(1, 8, 1024, 128, 2) == Fraction(9, 4)  # the appendix's own instance: 2 + 1/4


def tables_verdict(answer, capsys):
    ok = check.tables_in_a_step(answer)
    return ok, capsys.readouterr().out


def test_the_prediction_passes(capsys):
    ok, out = tables_verdict(step_bounds, capsys)
    assert ok is True and "right at 5 sizes" in out, out
    ok, _ = tables_verdict(lambda *size: Fraction(step_bounds(*size)).limit_denominator(10**200), capsys)
    assert ok is True  # any exact type of the same value


def test_the_measurement_route_is_refused(capsys):
    """Counting on the meta device answers the appendix's sizes, not the checker's: no tensor has 10^30 heads."""
    ok, out = tables_verdict(measured_on_meta, capsys)
    assert ok is False and "raised" in out, out


def test_a_float_is_refused(capsys):
    ok, out = tables_verdict(lambda *size: float(step_bounds(*size)), capsys)
    assert ok is False and "a float cannot hold these values exactly" in out, out


@pytest.mark.parametrize("answer, name", [
    (lambda B, h, L, d, b: 2 + Fraction(4, b), "one copy of the tables for every head of every sequence"),
    (lambda B, h, L, d, b: 2 + Fraction(4, h * b), "one copy of the tables for every sequence of the batch"),
    (lambda B, h, L, d, b: 2 + Fraction(4, B * b), "one copy of the tables for every head, shared by"),  # review r30
    (lambda B, h, L, d, b: Fraction(5, 2) + Fraction(4, B * h * b), "the backward pass reads x again"),  # review r33
    (lambda B, h, L, d, b: 2 + Fraction(2 * 2 * L * (d // 2) * b, 2 * B * h * L * d * b), "in x's dtype"),
    (lambda B, h, L, d, b: 2 + Fraction(2, B * h * b), "only one of the step's two passes"),
    (lambda B, h, L, d, b: 2, "leaves the tables out"),
    # the tables written once and read twice: the stateless function's step, not the module's
    (lambda B, h, L, d, b: 2 + Fraction(2 * 2 * L * (d // 2) * 4 * 3, 2 * 2 * B * h * L * d * b), "tables made inside the step"),
    (lambda B, h, L, d, b: 2 + Fraction(2 * 2 * L * (d // 2) * 4, 2 * B * h * L * d * 2), "in one fixed dtype"),
    (lambda B, h, L, d, b: 2 + Fraction(8, B * h * b), "a table entry for every feature of x"),
    (lambda B, h, L, d, b: 1 + Fraction(2, B * h * b), "the forward pass alone"),
    # the whole step in units of x's bytes, not of a one-pass bound (2 x's bytes): a unit slip (reader k10, finding 3)
    (lambda B, h, L, d, b: Fraction(4 * B * h * L * d * b + 2 * 2 * L * (d // 2) * 4, B * h * L * d * b),
     "counted in units of x's bytes"),
    # a low-precision temporary: the float32 tables read, cast to x's dtype (written), the copy read by the rotation
    (lambda B, h, L, d, b: 2 + Fraction(2 * (L * d * 4 + 2 * L * d * b), 2 * B * h * L * d * b),
     "cast to x's dtype (a bfloat16 copy for a bf16 x), written and read again in each pass"),
    (lambda B, h, L, d, b: 2 + Fraction(L * d * 4 + L * d * b + 2 * L * d * b, 2 * B * h * L * d * b),
     "cast to x's dtype (a bfloat16 copy for a bf16 x), made once and read in both passes"),
])
def test_tables_misconceptions_are_named(answer, name, capsys):
    ok, out = tables_verdict(answer, capsys)
    assert ok is False and name in out, out
    assert str(step_bounds(3, 10**30, 10**12, 256, 2)) not in out
    # the one hint (a table belongs to a position) is printed for the counts that copy the tables per head or
    # per sequence, the mistake it addresses, and for no other (final reader, finding 5)
    per_copy = name.startswith("one copy of the tables for every")
    assert ("hint: a table belongs to a position" in out) == per_copy and out.count("hint:") == per_copy, out


@pytest.mark.parametrize("answer, names", [
    # a table entry per feature, and the tables' bytes over x's bytes (not over the bound, 2 x's bytes): the same
    # number at every size, so the message names both (final reader r10, finding 2)
    (lambda B, h, L, d, b: 2 + Fraction(2 * 2 * L * d * 4, 2 * B * h * L * d * b), ("every feature of x",)),
    (lambda B, h, L, d, b: 2 + Fraction(2 * 2 * L * (d // 2) * 4, B * h * L * d * b), ("divided by x's bytes",)),
    # float64-sized tables (8 bytes an entry): the same number again, so the message names it too (reader j10, 6)
    (lambda B, h, L, d, b: 2 + Fraction(2 * 2 * L * (d // 2) * 8, 2 * B * h * L * d * b), ("weighed at 8 bytes",)),
    # one table (sin forgotten), and both tables at 2 bytes an entry: the number of the tables read in one pass only,
    # so one message names all three (reader j10, finding 6)
    (lambda B, h, L, d, b: 2 + Fraction(2 * 1 * L * (d // 2) * 4, 2 * B * h * L * d * b), ("only one of the two tables",)),
    (lambda B, h, L, d, b: 2 + Fraction(2 * 2 * L * (d // 2) * 2, 2 * B * h * L * d * b), ("weighed at 2 bytes",)),
    (lambda B, h, L, d, b: 2 + Fraction(1 * 2 * L * (d // 2) * 4, 2 * B * h * L * d * b),
     ("only one of the step's two passes",)),
    # the tables made in the step (the stateless function), and a table written for the backward pass: the same
    # number, so the message names both
    (lambda B, h, L, d, b: 2 + Fraction(3 * 2 * L * (d // 2) * 4, 2 * B * h * L * d * b), ("stateless apply_rope",)),
    (lambda B, h, L, d, b: 2 + Fraction((2 + 1) * 2 * L * (d // 2) * 4, 2 * B * h * L * d * b),
     ("made for the backward pass",)),
    # the backward pass writes a -sin table of its own, then reads cos and it: five table passes. At a 2-byte x this
    # is also the number of a bf16 copy made once; the message is the backward table's (reader j10, finding 1)
    (lambda B, h, L, d, b: 2 + Fraction(5, B * h * b), ("made for the backward pass", "a -sin table")),
])
def test_slips_that_give_the_same_number_are_both_named(answer, names, capsys):
    ok, out = tables_verdict(answer, capsys)
    assert ok is False and all(name in out for name in names), out
    groups = [("every feature of x", "divided by x's bytes", "weighed at 8 bytes"),
              ("stateless apply_rope", "made for the backward pass"),
              ("only one of the step's two passes", "only one of the two tables", "weighed at 2 bytes")]
    for group in groups:
        assert len({name in out for name in group}) == 1, out  # the slips of a group are named together
    assert str(step_bounds(3, 10**30, 10**12, 256, 2)) not in out and "hint:" not in out, out


@pytest.mark.parametrize("constant", [Fraction(9, 4), Fraction(5, 2), 7])
def test_a_constant_is_called_an_instance(constant, capsys):
    """The appendix's instance (2 + 1/4), or any number that does not depend on the sizes, is refused as a
    measured instance, not diagnosed as a count (reader f10l, finding 2); 2 (no tables) and 3 (a
    copy per head in x's dtype) are counts, named elsewhere."""
    ok, out = tables_verdict(lambda *size: constant, capsys)
    assert ok is False and "does not change with the sizes: a measured instance, not a count" in out, out
    assert "leaves the tables out" not in out and "every head" not in out and "hint:" not in out, out
    assert str(step_bounds(3, 10**30, 10**12, 256, 2)) not in out


def test_a_misconception_that_fits_only_some_wrong_cases_is_not_named(capsys):
    """A misconception is named only when its count gives the answer at every size where the answer is wrong: one
    that coincides at the 2-byte sizes alone is another count (reader j10, finding 1)."""
    cast_once = (lambda B, h, L, d, b: 2 + Fraction(L * d * 4 + L * d * b + 2 * L * d * b, 2 * B * h * L * d * b))
    for partial in (lambda B, h, L, d, b: cast_once(B, h, L, d, b) if b == 2 else step_bounds(B, h, L, d, b) + 1,
                    lambda B, h, L, d, b: cast_once(B, h, L, d, b) if b == 2 else 2):  # 2 and 3 of 5: none named
        ok, out = tables_verdict(partial, capsys)
        assert ok is False and "not the bytes of that step" in out, out
        assert "your answers match" not in out, out
    ok, out = tables_verdict(lambda B, h, L, d, b: 2 + Fraction(5, B * h * b), capsys)
    assert "a temporary copy" not in out, out


def test_other_wrong_answers_are_not_placed(capsys):
    for wrong in (lambda *size: step_bounds(*size) + 1, lambda *size: step_bounds(*size) - Fraction(1, 10**50)):
        ok, out = tables_verdict(wrong, capsys)
        assert ok is False and "not the bytes of that step" in out, out
        assert not re.search(r"too (high|low)|above|below|more|less", out), out
        assert "hint:" not in out, out  # the hint addresses one misconception, not this answer


@pytest.mark.parametrize("answer, names", [
    # two slips at once, which no digest names: the checker reads the answer's shape at more sizes (finding f10.7)
    (lambda B, h, L, d, b: 1 + Fraction(2, b), ("every head of every sequence", "the forward pass alone")),
    (lambda B, h, L, d, b: Fraction(5, 2) + Fraction(4, h * b),
     ("every sequence of the batch", "the backward pass reads x again")),
    (lambda B, h, L, d, b: 4 + Fraction(8, B * b), ("a copy of the tables for every head", "in units of x's bytes")),
    (lambda B, h, L, d, b: 1 + Fraction(1, 2 * B * h), ("does not change with itemsize", "the forward pass alone")),
    (lambda B, h, L, d, b: 1 + Fraction(4, B * h * b), ("the forward pass alone",)),  # and a table per feature
    (lambda B, h, L, d, b: 3, ("changes with none of batch, heads and itemsize",)),  # per head, in x's dtype
    (lambda B, h, L, d, b: 2 + Fraction(4 * 1024, B * h * L * b), ("changes when only seq changes",)),  # fixed tables
    (lambda B, h, L, d, b: 2 + Fraction(4 * 64, B * h * d * b), ("changes when only d changes",)),
])
def test_two_slips_at_once_are_named_by_the_answers_shape(answer, names, capsys):
    ok, out = tables_verdict(answer, capsys)
    assert ok is False and all(name in out for name in names), out
    assert str(step_bounds(3, 10**30, 10**12, 256, 2)) not in out and "2 + " not in out, out
    per_copy = any(name.startswith(("every head", "every sequence", "a copy of the tables")) for name in names)
    assert ("hint: a table belongs to a position" in out) == per_copy, out


def test_a_shape_the_learner_code_cannot_probe_is_not_read(capsys):
    def only_the_cases(batch, heads, seq, d, itemsize):  # wrong, and raises at any size the checker did not ask
        if (batch, heads) == (3, 5):
            raise KeyError(itemsize)
        return Fraction(7, 3) + Fraction(2, itemsize)

    ok, out = tables_verdict(only_the_cases, capsys)
    assert ok is False and "not the bytes of that step" in out and "your count" not in out, out


def test_a_raising_answer_gets_no_unrelated_hint(capsys):
    def broken(batch, heads, seq, d, itemsize):
        raise ValueError("a bug in the learner's code")

    ok, out = tables_verdict(broken, capsys)
    assert ok is False and "raised ValueError" in out and "hint:" not in out, out


def test_tables_not_attempted(capsys):
    def stub(batch, heads, seq, d, itemsize):
        raise NotImplementedError

    assert check.tables_in_a_step(stub) is None and check.tables_in_a_step(None) is None


def test_tables_checker_hands_over_no_answer():
    cases = list(ch10._STEP_RIGHT)
    answers = [x for case in cases for f in [step_bounds(*case)] for x in (float(f), [f.numerator, f.denominator],
                                                                            str(f))]
    assert held_answers(ch10, answers, [(), *cases]) == []
    assert not any(isinstance(v, Fraction) for v in vars(ch10).values())


def test_the_tables_prompt_does_not_list_what_each_pass_reads():
    """The exercise asks the reader to decide what the forward and backward operators read; the prompt and the
    cells above it must not list it, nor give the tables' fraction of a bound."""
    from pathlib import Path

    chapter = (Path(__file__).resolve().parents[1] / "notebooks/src/10_making_it_fast.py").read_text()
    above, prompt = chapter.split("# **Exercise (prediction): the tables in a training step.**", 1)
    prompt = prompt.split("# %%", 1)[0]
    for listing in ("x in, result out", "g in, its gradient out", "both tables read"):
        assert listing not in prompt, listing
    for fraction in ("1/16 of a bound", "1/4 bound each"):
        assert fraction not in above, fraction


def test_the_tables_answer_is_not_printed_or_computed_above_the_exercise():
    """No cell above the exercise counts the C operator's bytes with its tables (the one computation that gives the
    answer), and no stored output above it prints that count: 1.5 bounds forward for §2's float32 x with one head,
    2.25 (9/4) for a training step on §3's bf16 xb."""
    import json
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    above = (root / "notebooks/src/10_making_it_fast.py").read_text().split(
        "# **Exercise (prediction): the tables in a training step.**", 1)[0]
    # nor the C operator's training step itself (forward and backward on the meta device): counting its operators'
    # bytes there gives the answer at the appendix's size (final reader, finding 6)
    for computation in ("bytes_of(lambda: torch.ops.posenc.rope_rotate", "all_bytes(operator_ops)", "c_operator =",
                        "c_operator_step", "operator_ops", "torch.autograd.grad(rotated"):
        assert computation not in above, computation
    for book in ("notebooks/10_making_it_fast.ipynb", "notebooks/zh/10_making_it_fast.ipynb"):
        cells = json.loads((root / book).read_text())["cells"]
        first = next(i for i, cell in enumerate(cells)
                     if cell["cell_type"] == "markdown" and "the tables in a training step" in "".join(cell["source"])
                     or "tables_in_a_step" in "".join(cell["source"]))
        # a timing cell's output (nbval-ignore-output) is a wall-clock time, which may round to 1.5 ms by chance
        printed = "".join(text for cell in cells[:first] if cell["cell_type"] == "code"
                          and not "".join(cell["source"]).startswith("# nbval-ignore-output")
                          for out in cell["outputs"] for text in out.get("text", []))
        assert printed and not re.search(r"(?<![\d.])(1\.50?|2\.25|9/4)(?![\d])", printed), book


# ---------------------------------------------------------------- the appendix's quoted benchmark numbers
def _readme_table(title: str) -> list[dict[str, str]]:
    """The first markdown table after the paragraph of benchmarks/README.md that starts with **title**: one dict
    per row, keyed by the header's cells (as written, backticks kept)."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[1] / "benchmarks/README.md").read_text()
    lines = text.split(f"**{title}**", 1)[1].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith("|")), len(lines))
    cells = [[cell.strip() for cell in row.strip().strip("|").split("|")] for row in lines[start:end]]
    header, body = cells[0], cells[2:]  # cells[1] is the |---| line
    return [dict(zip(header, row)) for row in body]


def _number(cell: str) -> float:
    """'0.90x' -> 0.9, '1.25 × clone' -> 1.25, '16.3' -> 16.3."""
    return float(re.match(r"[\d.]+", cell).group())


def _holds_a_number(value) -> bool:
    if isinstance(value, dict):
        return any(_holds_a_number(v) for v in value.values())
    if isinstance(value, (tuple, list)):
        return any(_holds_a_number(v) for v in value)
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _quoted_constants() -> dict[str, object]:
    """Every name the appendix's two cells of quoted benchmark numbers bind to a literal (the cell that starts
    '# quoted from benchmarks/README.md', §3, and the one that starts '# the H200 run, quoted', §5)."""
    import ast
    from pathlib import Path

    chapter = (Path(__file__).resolve().parents[1] / "notebooks/src/10_making_it_fast.py").read_text()
    cells = [cell for cell in chapter.split("\n# %%")
             if cell.split("\n", 1)[-1].startswith(("# quoted from benchmarks/README.md", "# the H200 run, quoted"))]
    assert len(cells) == 2
    constants = {}
    for cell in cells:
        for node in ast.parse(cell.split("\n", 1)[1]).body:
            if not isinstance(node, ast.Assign):
                continue
            try:
                value = ast.literal_eval(node.value)
            except ValueError:
                continue  # computed from the quoted numbers, not quoted
            if not _holds_a_number(value):
                continue  # labels (the figure's column names), not numbers
            (target,) = node.targets
            if isinstance(target, ast.Tuple):
                constants.update(zip((name.id for name in target.elts), value))
            else:
                constants[target.id] = value
    return constants


def test_the_appendix_quotes_the_benchmarks_readme_as_it_is():
    """§3 and §5 type the benchmark numbers they read (the notebook times nothing on a GPU, and reads no file of
    results): each is the entry of benchmarks/README.md's table it names, so a quote cannot drift from a rerun."""
    quoted = _quoted_constants()
    checked = set()

    small = {(row["dtype"], int(row["elements"])): row for row in _readme_table("Where the C kernel pays off")}
    columns = ("reference, interleaved (µs)", "kernel / reference, interleaved", "half", "fwd+bwd interleaved",
               "fwd+bwd half")
    assert {(dtype, size) for dtype, by_size in quoted["small_bench"].items() for size in by_size} == set(small)
    for dtype, by_size in quoted["small_bench"].items():
        for size, row in by_size.items():
            assert row == tuple(_number(small[dtype, size][column]) for column in columns), (dtype, size)
    checked.add("small_bench")
    from benchmarks.bench_rope import SMALL_SIZES  # the appendix says which measured sizes the README leaves out

    assert sorted(set(SMALL_SIZES) - {size for _, size in small}) == [512, 2048, 32768]
    from pathlib import Path

    readme = (Path(__file__).resolve().parents[1] / "benchmarks/README.md").read_text()
    assert "rows 512, 2048 and 32768 left out here" in readme
    import re  # the spread the appendix weighs those ratios against: two runs of the same code, large tensors

    spread_paragraph = readme.split("When `rope.py` became the pure reference")[1].split("\n\n")[0]
    assert f"(up to {quoted['run_spread']}x, bfloat16 forward + backward at L = 4096)" in spread_paragraph
    assert quoted["largest_time"] == max(float(v) for v in re.findall(r"(\d+\.\d+)x", spread_paragraph))
    checked |= {"run_spread", "largest_time"}

    h200 = {(row["dtype"], int(row["L"])): row for row in _readme_table("First GPU run of this tree")}
    h200_columns = ("bound (ms)", "clone", "`apply_rope`", "module", "Triton, tables", "Triton, registers",
                    "`apply_rope` torch", "module torch", "`apply_rope_compiled`", "HF eager", "HF compiled")
    assert set(quoted["h200"]) == set(h200)  # every row of the README's forward table
    for key, row in quoted["h200"].items():
        assert row == tuple(_number(h200[key][column]) for column in h200_columns), key
    checked.add("h200")

    h100 = {int(row["L"]): row for row in _readme_table("A quoted GPU measurement")}
    assert quoted["prototype"] == {seq: _number(row["Triton prototype"]) for seq, row in h100.items()}  # every row
    assert all("× clone" in row["Triton prototype"] for row in h100.values())  # in units of a clone, as §5 reads it
    checked |= {"prototype"}

    # the one number of those cells that is not the README's: the H200's peak bandwidth, NVIDIA's specification
    assert quoted["h200_peak_tb_per_s"] == 4.8
    checked.add("h200_peak_tb_per_s")

    assert set(quoted) == checked  # a number quoted in those cells and not checked here fails
