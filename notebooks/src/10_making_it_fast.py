# %% [markdown] slideshow={"slide_type": "slide"}
# # Appendix — Making it fast
#
# The chapters write every formula in its plainest form, because that is the form to learn
# from. This appendix is about speed, and it is off the teaching path: nothing in the chapters
# needs it. It collects the engineering that grew out of
# [chapter 3](03_sinusoids.ipynb) (the sinusoidal table) and [chapter 5](05_rope.ipynb) (RoPE):
#
# 1. a loop per entry against one vectorised call (chapter 3's table);
# 2. the dense rotation matrices R_m against the cos/sin tables (chapter 5, §11);
# 3. counting calls and the bytes they move, and a one-pass C kernel for RoPE;
# 4. the same count for a training step (forward + backward), and the floor it sets.
#
# Timings differ between machines and between runs, so the cells that print them assert
# nothing and are not compared by the tests (each says so in its first line). What is asserted
# does not depend on the machine: equal results, numbers of operations, and the torch calls a
# computation makes with the bytes they read and write.

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import math
from typing import NamedTuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

import posenc_lib as pl
from posenc_lib import viz
from posenc_lib.kernels import cpu as cpu_kernel
from posenc_lib.rotary import SMALL  # below this many elements apply_rope keeps the reference
from posenc_lib.timing import median_ms  # torch.utils.benchmark.Timer underneath

viz.use_style()  # white figures, dark text: readable in light and dark themes

torch.set_printoptions(precision=4, sci_mode=False)
device = pl.default_device()
g = torch.manual_seed(0)


class Call(NamedTuple):
    """One recorded torch call: its name, and (entries, bytes) of each tensor it reads and of each it writes."""

    name: str
    read: list[tuple[int, int]]
    written: list[tuple[int, int]]

    @property
    def size(self) -> int:
        """Entries of the largest tensor the call touches."""
        return max((n for n, _ in (*self.read, *self.written)), default=0)


def entries_and_bytes(tensors) -> list[tuple[int, int]]:
    return [(t.numel(), t.numel() * t.element_size()) for t in tensors]


class RecordCalls(TorchFunctionMode):
    """Inside a `with` block, records each torch call (a `Call`). A call reads its tensor arguments and writes
    its results, except: `out=` and the destination of `copy_` are written, not read; an in-place call
    (`addcmul_`) reads and writes its tensor; a call that hands back one of its arguments unchanged
    (`x.float()` of a float32 x) moves nothing."""

    def __init__(self):
        super().__init__()
        self.calls: list[Call] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        name = getattr(func, "__name__", str(func))
        read = [t for t in tree_leaves((args, {k: v for k, v in kwargs.items() if k != "out"}))
                if isinstance(t, torch.Tensor)]
        written = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
        if name == "copy_":
            read = read[1:]
        elif not name.endswith("_") and any(w is r for w in written for r in read):
            read, written = [], []
        self.calls.append(Call(name, entries_and_bytes(read), entries_and_bytes(written)))
        return out


# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. A loop per entry vs one vectorised call
#
# One of chapter 3's sources (`003`) fills the sinusoidal table with a nested list
# comprehension: for each position p and column c it computes p / 10000^(2⌊c/2⌋/d) (both
# columns of a pair share ⌊c/2⌋ = j), then takes the sine of the even columns and the cosine
# of the odd ones. Our version of that idea as a plain loop (it takes the trig functions as
# arguments so we can count the calls):

# %% slideshow={"slide_type": "fragment"}
def naive_table(n, d, base=10000.0, sin=math.sin, cos=math.cos):
    """One Python float operation chain per entry: the teaching form of pl.sinusoidal_positions."""
    rows = []
    for p in range(n):
        row = []
        for c in range(d):
            angle = p / base ** (2 * (c // 2) / d)  # columns 2j and 2j+1 share frequency j
            row.append(sin(angle) if c % 2 == 0 else cos(angle))
        rows.append(row)
    return torch.tensor(rows, dtype=torch.float64)


n, d = 200, 64
calls = {"trig": 0}


def counted(fn):
    def wrapper(x):
        calls["trig"] += 1
        return fn(x)
    return wrapper


slow = naive_table(n, d, sin=counted(math.sin), cos=counted(math.cos))
torch.testing.assert_close(slow, pl.sinusoidal_positions(n, d, dtype=torch.float64), atol=1e-12, rtol=0)
assert calls["trig"] == n * d
print(f"equal to 1e-12 (float64); the loop made {calls['trig']} = n·d trig calls")

# %% [markdown] slideshow={"slide_type": "subslide"}
# In float32, the library's default, the two differ by up to about 8·10⁻⁶. Where? Not in pair 0:
# there θ₀ = 1, so the angle is the position itself, an integer that float32 holds exactly, and
# only the sine and cosine round (by a few times 10⁻⁸). The largest error sits at position 188 in
# pair 1, whose frequency θ₁ = 10000^(−2/64) ≈ 0.75 is not a float32 number: the angle
# 188·θ₁ ≈ 141 carries the rounding of θ₁ times 188, plus its own rounding to float32's
# spacing there, 2⁻¹⁶ ≈ 1.5·10⁻⁵. The error of an angle grows with the position.

# %% slideshow={"slide_type": "fragment"}
err32 = (slow - pl.sinusoidal_positions(n, d).double()).abs()  # (n, d): columns 2j, 2j + 1 are pair j
worst = divmod(int(err32.argmax()), d)
pair_max = err32.view(n, d // 2, 2).amax(dim=(0, 2))
top2 = err32.flatten().topk(2).values
assert worst == (188, 2) and top2[0] - top2[1] > 1e-7  # position 188, column 2 (pair 1); the runner-up is
# 5e-7 lower, far more than float32's sin and cos differ between CPUs, so the place is the same everywhere
assert pair_max[0] < 1e-7 and round(err32.max().item(), 7) == 8.1e-6  # pair 0 is exact up to sin and cos
print(f"largest float32 error {err32.max().item():.1e} at position {worst[0]}, pair {worst[1] // 2}; "
      f"pair 0 at most {pair_max[0].item():.0e}")

# %% [markdown] slideshow={"slide_type": "subslide"}
#
# The library makes a fixed number of tensor operations, one `sin` and one `cos` over the whole
# (n, d/2) angle grid, whatever n and d are. `RecordCalls` (a `TorchFunctionMode`, defined in
# the first cell) records every torch call it makes:

# %% slideshow={"slide_type": "fragment"}
counts = {}
for size in [(10, 8), (200, 64), (2048, 512)]:
    with RecordCalls() as rec:
        pl.sinusoidal_positions(*size)
    names = [call.name for call in rec.calls]
    counts[size] = (len(names), names.count("sin"), names.count("cos"))
assert len(set(counts.values())) == 1 and counts[(10, 8)][1:] == (1, 1)
print("torch calls (total, sin, cos) per size:", counts)

# %% [markdown] slideshow={"slide_type": "fragment"}
# Timing. The counts above are the claim: n·d = 12 800 Python-level trig calls against one `sin`
# and one `cos` over the whole grid. The next cell shows what that costs on your machine; it
# asserts nothing, because a time is not the same on two machines.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
t_loop, t_vec = median_ms(lambda: naive_table(n, d)), median_ms(lambda: pl.sinusoidal_positions(n, d))
print(f"n = {n}, d = {d}: loop {t_loop:.2f} ms, vectorised {t_vec:.3f} ms ({t_loop / t_vec:.0f}x)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Dense R_m against cos/sin tables
#
# Chapter 5 (§11) showed that building the d × d matrix R_m for every position stores d times
# more numbers than the cos and sin tables `apply_rope` uses, and gives the same result. It also
# does more arithmetic: a d × d matrix times a vector is d² multiplications per position, while a
# rotation needs 4 per pair, 2d per position: d/2 = 32 times fewer at d = 64. The next cell
# counts both, for L = 1024 positions: the product's with torch's `FlopCounterMode` (which counts a
# multiply-add as 2 operations), the rotation's as the entries of the `mul` calls in chapter 5's
# plain form, `pl.rotate_pairs`.

# %% slideshow={"slide_type": "fragment"}
L, d = 1024, 64
xs = torch.randn(L, d, device=device)
R_all = torch.stack([pl.rope_matrix(m, d, device=device) for m in range(L)])  # (L, d, d)
dense_out = (R_all @ xs.unsqueeze(-1)).squeeze(-1)
torch.testing.assert_close(dense_out, pl.apply_rope(xs), atol=1e-5, rtol=1e-5)
assert R_all.numel() == d * (2 * L * (d // 2))  # d times the cos and sin tables (L x d/2 each)
with FlopCounterMode(display=False) as flops:
    (R_all @ xs.unsqueeze(-1)).squeeze(-1)
dense_mults = flops.get_total_flops() // 2  # multiply-adds
angles = pl.rope_angles(L, d, device=device)
with RecordCalls() as rotation:
    pl.rotate_pairs(xs, angles.cos(), angles.sin())
rotation_mults = sum(max(n for n, _ in call.written) for call in rotation.calls if call.name == "mul")
assert dense_mults == L * d * d and rotation_mults == 2 * L * d and dense_mults == (d // 2) * rotation_mults
print(f"same result; the dense form holds {R_all.numel():,} numbers (the input {xs.numel():,}) and makes "
      f"{dense_mults:,} multiplications, the rotation {rotation_mults:,}: {dense_mults // rotation_mults} times fewer")

# %% [markdown] slideshow={"slide_type": "fragment"}
# So the dense form loses on both counts: d times the memory, d/2 times the multiplications. The
# next cell times the two on your machine: the matrix product alone (the matrices built once,
# outside the timing) against `pl.apply_rope`, which computes its tables inside every call, so the
# comparison favours the dense form. It asserts nothing: how much of a 32-fold difference in
# arithmetic shows up as time depends on the hardware, on how fast it runs matrix products next
# to elementwise operations.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
t_matmul = median_ms(lambda: (R_all @ xs.unsqueeze(-1)).squeeze(-1))
t_lib = median_ms(lambda: pl.apply_rope(xs))
print(f"dense (matmul only): {t_matmul:7.3f} ms")
print(f"pl.apply_rope:       {t_lib:7.3f} ms, tables included")
print(f"the dense product takes {t_matmul / t_lib:.1f} x the time of apply_rope, for "
      f"{dense_mults // rotation_mults} x its multiplications")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. Counting calls and bytes
#
# The tables fix the memory; what is left is time. An elementwise job does a handful of
# arithmetic operations per entry, and what no function that returns a new tensor can avoid is
# reading x once and writing its result once. That is what `x * 1.5` does, so we use it as the
# **one-pass bound**: for a bf16 x, 4 bytes per entry (2 read, 2 written). Written with torch
# operations, `x·cos − y·sin` is one call per operation: the products, the difference, the
# `stack`/`cat` that puts the pairs back, and for a bf16 input a float32 copy on the way in and a
# bf16 copy on the way out. Each of those calls reads and writes whole tensors, and a float32
# temporary moves twice the bytes per entry of the bf16 x. So we count both: calls, and bytes in
# units of the bound.
#
# `pl.apply_rope` keeps chapter 5's formula (`pl.rotate_pairs`, in `posenc_lib/rope.py`, which
# imports no fast path) as its reference and hands the rotation to the fastest path that applies
# (`posenc_lib/kernels/`, chosen in one function, `posenc_lib.rotary.rotate`). A CPU tensor of
# fewer than `rotary.SMALL` = 16 384 elements, such as chapter 5's 5 × 4 example, stays with
# the reference: there the kernel's fixed cost per call eats most of what it saves (`make bench`
# measures where it starts to pay off). For larger ones, on a CPU with a C compiler, the path is a
# small C loop registered as a torch operator, `torch.ops.posenc.rope_rotate`, which reads each
# pair once, rotates it in float32 in registers and writes it once; its backward pass is the same
# loop rotating by −angle. Without a compiler (or with `POSENC_CPU_KERNEL=0`), a torch path takes
# over: a multiply, then a fused multiply-add, over float32 data, and for a bf16 input a float32
# copy on the way in and a bf16 copy on the way out (counted below). The next cell checks that the
# result is the plain form's: bit for bit on the C kernel; on the torch path equal up to rounding
# (within `torch.testing.assert_close`'s tolerances for the dtype: the fused multiply-add rounds
# once where the plain form rounds twice); and that the small example never reaches the C operator.

# %% slideshow={"slide_type": "fragment"}
xb = torch.randn(8, L, 128).to(torch.bfloat16)  # 8 heads of a bf16 model
ab = pl.rope_angles(L, 128)
for x_in in (xb, xb.float()):
    for layout in ("interleaved", "half"):
        plain_form = pl.rotate_pairs(x_in.float(), ab.cos(), ab.sin(), layout).to(x_in.dtype)
        if cpu_kernel.available():  # one C loop, bit for bit the plain form
            assert torch.equal(pl.apply_rope(x_in, layout=layout), plain_form)
        else:  # no C compiler: torch operations, equal up to rounding
            torch.testing.assert_close(pl.apply_rope(x_in, layout=layout), plain_form)
with RecordCalls() as small_calls:
    pl.apply_rope(torch.randn(5, 4))  # chapter 5's size: the reference rotates it
assert 5 * 4 < SMALL == 16384 <= xb.numel() and not any("rope_rotate" in call.name for call in small_calls.calls)
print("apply_rope equals rotate_pairs in float32, for bf16 and float32 inputs and both layouts")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Now count the torch calls that move a whole tensor's worth of data (at least half of x: one
# member of every pair), and the bytes of such tensors they read and write (`RecordCalls`, in the
# first cell, says what a call reads and what it writes). Views, shape queries and allocations
# move no data, so only the calls named in `DATA_OPS` count; the cos and sin tables (1/16 of x's
# entries each) are left out of both counts, and §4 comes back to them.

# %% slideshow={"slide_type": "fragment"}
DATA_OPS = {"float", "to", "mul", "sub", "add", "neg", "cat", "stack", "copy_", "addcmul_", "rope_rotate.default"}


def traffic(fn, x: torch.Tensor) -> tuple[int, float]:
    """(calls, bytes) of fn() on x-sized data: its whole-tensor calls, and the bytes of the tensors of at
    least half x's entries that they read and write, in one-pass bounds (2 x's bytes: one read, one write)."""
    with RecordCalls() as rec:
        fn()
    calls = [call for call in rec.calls if call.name in DATA_OPS and call.size >= x.numel() // 2]
    moved = sum(nbytes for call in calls for n, nbytes in (*call.read, *call.written) if n >= x.numel() // 2)
    return len(calls), moved / (2 * x.numel() * x.element_size())


def plain(x: torch.Tensor) -> torch.Tensor:
    return pl.rotate_pairs(x.float(), ab.cos(), ab.sin(), "half").to(x.dtype)


xf = xb.float()
c_kernel = cpu_kernel.available()
# bf16 x, bytes per entry of x: float32 copy in 2 + 4; 4 products over half the entries, 2 + 2 each (float32
# read and written); the difference and the sum, 4 + 2 each; the cat 4 + 4; the bf16 copy back 4 + 2:
# 48 bytes, 12 bounds of 4 bytes
assert traffic(lambda: plain(xb), xb) == (9, 12.0)
# the C operator reads x and writes the result once; the torch path copies in (2 + 4), multiplies (2 + 4),
# multiplies and adds into that result (2 + 4 read, 4 written) and copies out (4 + 2): 28 bytes, 7 bounds
assert traffic(lambda: pl.apply_rope(xb, layout="half"), xb) == ((1, 1.0) if c_kernel else (4, 7.0))
# a float32 x needs no copies: the plain form's 7 calls are 36 bytes per entry, 4.5 bounds of 8 bytes
assert traffic(lambda: plain(xf), xf) == (7, 4.5)
assert traffic(lambda: pl.apply_rope(xf, layout="half"), xf) == ((1, 1.0) if c_kernel else (2, 2.0))
print("bf16 x:    plain form 9 calls, 12 bounds of bytes; apply_rope 1 call, 1 bound on the C kernel "
      "(4 calls, 7 bounds without it)")
print("float32 x: plain form 7 calls, 4.5 bounds of bytes; apply_rope 1 call, 1 bound on the C kernel "
      "(2 calls, 2 bounds without it)")

# %% [markdown] slideshow={"slide_type": "fragment"}
# The same forms timed on this machine, in units of the one-pass bound, next to Hugging Face's
# `apply_rotary_pos_emb` on the same bf16 tensor (it rotates a query and a key in one call: we
# hand it x for both and halve its time and bytes). The bytes are what this appendix asserts; a
# time is not a byte count. A measured ratio can sit above its bytes (every call allocates a fresh
# result, and the arithmetic and the threads cost time of their own) or below them (a temporary
# that stays in a cache never travels to main memory); this cell separates none of these effects.
# It is also noisy: `make bench` measures such ratios properly, round-robin over many rounds.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

cos_b, sin_b = (torch.cat((t, t), dim=-1).to(xb.dtype) for t in (ab.cos(), ab.sin()))
forms = {  # name: (fn, tensors it rotates)
    "plain rotate_pairs (float32 and back)": (lambda: plain(xb), 1),
    "pl.apply_rope (half layout)": (lambda: pl.apply_rope(xb, layout="half"), 1),
    "transformers apply_rotary_pos_emb": (lambda: apply_rotary_pos_emb(xb, xb, cos_b, sin_b, 0), 2),
}
t_bound = median_ms(lambda: xb * 1.5)
for name, (fn, tensors) in forms.items():
    moved = traffic(fn, xb)[1] / tensors
    print(f"{name:38s} bytes {moved:4.1f} bounds, time {median_ms(fn) / tensors / t_bound:5.1f} bounds")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Forward + backward, and its floor in bytes
#
# Training also needs the gradient with respect to x. R_m is orthogonal, so for an incoming
# gradient g the chain rule gives R_mᵀ g = R_{−m} g: the backward pass is one more rotation,
# by −angle, and `torch.ops.posenc.rope_rotate` registers exactly that as its backward. Two
# jobs are left that no implementation can skip: read x and write R x, then read g and write
# R_{−m} g. That is two one-pass bounds of bytes.
#
# To see what autograd runs in the backward pass we need a recorder one level lower than
# `RecordCalls`: a `TorchDispatchMode` sees every ATen operator, including those the
# backward pass calls. Views (`slice`, `unsqueeze`, ...) move no data, so they are skipped. An
# operator reads its tensor arguments and writes its results; none of the operators recorded here
# writes into an argument (asserted), so that rule counts their bytes exactly as in §3.

# %% slideshow={"slide_type": "fragment"}
class RecordOps(TorchDispatchMode):
    """Inside a `with` block, records each ATen operator that is not a view as a `Call` (forward and backward
    passes alike): it reads its tensor arguments and writes its results."""

    def __init__(self):
        super().__init__()
        self.ops: list[Call] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            assert not any(a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments), func
            read = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            written = [t for t in tree_leaves(out) if isinstance(t, torch.Tensor)]
            self.ops.append(Call(func.name(), entries_and_bytes(read), entries_and_bytes(written)))
        return out


def train_step_ops(rope) -> list[Call]:
    """The operators of out = rope(q), then the gradient of <out, g> with respect to q."""
    q, grad_out = xb.clone().requires_grad_(), torch.randn(xb.shape).to(xb.dtype)
    with RecordOps() as rec:
        torch.autograd.grad(rope(q), q, grad_out)
    return rec.ops


def whole_tensor(ops) -> tuple[int, float]:
    """(operators, bytes) on xb-sized data, as `traffic` counts them in §3 (bytes in one-pass bounds on xb)."""
    big = [op for op in ops if op.size >= xb.numel() // 2]
    moved = sum(nbytes for op in big for n, nbytes in (*op.read, *op.written) if n >= xb.numel() // 2)
    return len(big), moved / (2 * xb.numel() * xb.element_size())


plain_ops = train_step_ops(lambda q: plain(q))
lib_ops = train_step_ops(lambda q: pl.apply_rope(q, layout="half"))
# plain: forward 9 operators and 12 bounds as in §3; backward 12 operators (float32 copy of g, the products and
# sums of the chain rule, two slice_backward fills for the halves, their sum, the bf16 copy back) and 17 bounds
assert whole_tensor(plain_ops) == (21, 29.0)
if cpu_kernel.available():  # the C operator once forward, once backward: x and g each read once, written once
    assert [op.name for op in lib_ops if op.size >= xb.numel() // 2] == ["posenc::rope_rotate"] * 2
    assert whole_tensor(lib_ops) == (2, 2.0)
else:  # no C compiler: the torch path has no backward, so autograd runs through the plain form
    assert whole_tensor(lib_ops) == whole_tensor(plain_ops)
print("forward + backward on xb-sized data: the plain form 21 operators, 29 bounds of bytes; apply_rope 2 "
      "operators, 2 bounds on the C kernel (its operator, forward and backward); without it, the plain form's")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The other cost is the tables. `pl.apply_rope` is stateless: every call computes cos and sin
# of all L × d/2 angles again. Each table has 1/16 as many entries as x here (8 heads share a
# table row, and a pair needs one angle). In bytes that is little: the two float32 tables written
# once are 1/8 of a one-pass bound on this bf16 x (they would be 1/16 of one on a float32 x). In
# arithmetic it is more: every entry is a sine or a cosine rather than one multiply, and the
# timing cell at the end shows what that costs next to a pass over x on your machine. A
# `pl.RotaryEmbedding` keeps its tables: from its second call on it computes no sines at all.

# %% slideshow={"slide_type": "fragment"}
def trig_entries(ops) -> int:
    return sum(op.size for op in ops if op.name in ("aten::cos", "aten::sin"))


table_bytes = sum(nbytes for op in lib_ops if op.name in ("aten::cos", "aten::sin") for _, nbytes in op.written)
assert table_bytes / (2 * xb.numel() * xb.element_size()) == 1 / 8  # the tables, written once, in bounds on xb


rotary = pl.RotaryEmbedding(128, layout="half")
first_call, second_call = train_step_ops(rotary.rotate), train_step_ops(rotary.rotate)
assert trig_entries(lib_ops) == 2 * L * 128 // 2 == 2 * xb.numel() // 16  # every call: cos and sin of L x d/2 angles
assert trig_entries(second_call) == 0 < trig_entries(first_call)  # the module builds its tables once
assert whole_tensor(second_call) == whole_tensor(lib_ops)  # and rotates as apply_rope does
assert xb.dtype == torch.bfloat16 and rotary.cos_cached.dtype == torch.float32  # bf16 passes, float32 tables
print(f"cos + sin entries per training step: apply_rope {trig_entries(lib_ops)}, "
      f"RotaryEmbedding {trig_entries(first_call)} on its first call, {trig_entries(second_call)} after")

# %% [markdown] slideshow={"slide_type": "subslide"}
# So a training step has a floor in bytes: two one-pass bounds for a module with cached tables,
# two bounds plus the tables for the stateless function. `make bench` times both floors next to
# `apply_rope` and `RotaryEmbedding` (B=1, 16 heads, d = 128, L = 1024 to 16384) and reports
# each as a multiple of the one-pass bound; `benchmarks/README.md` has the tables. On its machine
# the measured floors lie above 2 bounds, and it names two likely causes: the tables, and the
# last-level cache (at small L one pass over x fits in it while two passes do not). This appendix
# tests neither; it counts bytes, and a time is not a byte count (§3).
#
# The cell below times one training step on this machine in units of the one-pass bound
# (with this section's 8 heads and L = 1024, smaller than `make bench`'s). In time the bound is
# what torch's `x * 1.5` takes here, not what the memory allows: a kernel that moves the same
# bytes faster than torch's bf16 multiply can come in under "two passes", and that contradicts
# no count above.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
q_step, g_step = xb.clone().requires_grad_(), torch.randn(xb.shape).to(xb.dtype)
t_bound = median_ms(lambda: xb * 1.5)
steps = {
    "cos and sin tables alone": lambda: (ab.cos(), ab.sin()),
    "two passes (x * 1.5, g * 1.5)": lambda: (xb * 1.5, g_step * 1.5),
    "apply_rope, forward + backward": lambda: torch.autograd.grad(pl.apply_rope(q_step, layout="half"), q_step, g_step),
    "RotaryEmbedding, forward + backward": lambda: torch.autograd.grad(rotary.rotate(q_step), q_step, g_step),
    "plain rotate_pairs, forward + backward": lambda: torch.autograd.grad(
        pl.rotate_pairs(q_step.float(), ab.cos(), ab.sin(), "half").to(xb.dtype), q_step, g_step),
}
for name, fn in steps.items():
    print(f"{name:40s} {median_ms(fn) / t_bound:6.2f} x the one-pass bound")
