# %% [markdown] slideshow={"slide_type": "slide"}
# # Appendix — Making it fast
#
# The chapters write every formula in its plainest form, because that is the form to learn
# from. This appendix is about speed, and it is off the teaching path: nothing in the chapters
# needs it. It collects the engineering that grew out of
# [chapter 3](03_sinusoids.ipynb) (the sinusoidal table) and [chapter 5](05_rope.ipynb) (RoPE):
#
# 1. a Python expression per entry against one vectorised call (chapter 3's table);
# 2. the dense rotation matrices R_m against the cos/sin tables (chapter 5, §11);
# 3. counting calls and the bytes they move, and a one-pass C kernel for RoPE;
# 4. the same count for a training step (forward + backward), and the floor it sets;
# 5. on a GPU (a section still to be written);
# 6. what this is worth in a model.
#
# **Scope: the CPU.** Everything measured and counted here runs on the CPU, where `apply_rope` has
# a C kernel. A GPU has different paths and different costs, and §5 is kept for them; until it is
# written, nothing here says how fast RoPE runs on a GPU.
#
# Timings differ between machines and between runs, so the cells that print them assert
# nothing and are not compared by the tests (each says so in its first line); those that time RoPE
# also print which path `apply_rope` took on your machine. What is asserted does not depend on the machine:
# equal results, numbers of operations, and the torch calls a computation makes with the bytes they
# read and write.

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
from posenc_lib.kernels import torch_fast
from posenc_lib.rotary import SMALL  # below this many elements apply_rope keeps the reference
from posenc_lib.timing import median_iqr_ms, median_ms  # torch.utils.benchmark.Timer underneath

viz.use_style()  # white figures, dark text: readable in light and dark themes

torch.set_printoptions(precision=4, sci_mode=False)
device = pl.default_device()  # the CPU unless you opt in with POSENC_DEVICE (00_index); tensors below follow it
g = torch.manual_seed(0)
PATH = ("path: the C kernel (posenc::rope_rotate)" if cpu_kernel.available() else
        "path: torch operations (no C compiler, or POSENC_CPU_KERNEL=0)")  # printed by the timing cells


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
# ## 1. A Python expression per entry vs one vectorised call
#
# One of chapter 3's sources (`003`) builds the sinusoidal table in three steps: a nested list
# comprehension computes the angle of every entry, p / 10000^(2⌊c/2⌋/d) for position p and column c
# (both columns of a pair share ⌊c/2⌋ = j), in Python; one call turns the nested list into a tensor;
# then two vectorised calls take the sine of the even columns and the cosine of the odd ones. Our
# version of that builder (it takes the angle as an argument, so the cell can count its calls):

# %% slideshow={"slide_type": "fragment"}
def angle_003(p: int, c: int, d: int, base: float = 10000.0) -> float:
    return p / base ** (2 * (c // 2) / d)  # columns 2j and 2j + 1 share frequency j


def builder_003(n: int, d: int, dtype=torch.float32, angle=angle_003) -> torch.Tensor:
    """Source 003's method: one Python expression per entry for the angles, then sin and cos over column slices."""
    table = torch.tensor([[angle(p, c, d) for c in range(d)] for p in range(n)], dtype=dtype)
    table[:, 0::2] = table[:, 0::2].sin()
    table[:, 1::2] = table[:, 1::2].cos()
    return table


n, d = 200, 64
calls = {"angle": 0}


def counted_angle(*args) -> float:
    calls["angle"] += 1
    return angle_003(*args)


with RecordCalls() as rec:
    table_003 = builder_003(n, d, dtype=torch.float64, angle=counted_angle)
torch_calls = [call.name for call in rec.calls]
torch.testing.assert_close(table_003, pl.sinusoidal_positions(n, d, dtype=torch.float64), atol=1e-12, rtol=0)
assert calls["angle"] == n * d and torch_calls.count("sin") == torch_calls.count("cos") == 1
print(f"equal to the library; the builder evaluates {calls['angle']} = n·d angles in Python, then makes "
      f"{len(torch_calls)} torch calls, one sin and one cos among them")

# %% [markdown] slideshow={"slide_type": "subslide"}
# In float32, the library's default, the table is off from the float64 one by up to about 8·10⁻⁶. Where?
# Not in pair 0: there θ₀ = 1, so the angle is the position itself, an integer that float32 holds
# exactly, and only the sine and cosine round (by a few times 10⁻⁸). The largest errors sit in pair 1:
# its frequency θ₁ = 10000^(−2/64) ≈ 0.75 is not a float32 number, and its angles are the largest that
# are not integers, up to 199·θ₁ ≈ 149. An angle carries the rounding of θ₁ times the position, plus
# its own rounding to float32's spacing there, which is 2⁻¹⁶ ≈ 1.5·10⁻⁵ from 128 up (positions 171 to
# 199 in pair 1). Later pairs turn more slowly, so their angles are smaller and more finely spaced.
# Which of positions 171 to 199 comes out worst (188) is where the two roundings happen to add up:
# there is no pattern to find in it.

# %% slideshow={"slide_type": "fragment"}
exact = pl.sinusoidal_positions(n, d, dtype=torch.float64)
err32 = (exact - pl.sinusoidal_positions(n, d).double()).abs()  # (n, d): columns 2j, 2j + 1 are pair j
worst = divmod(int(err32.argmax()), d)
pair_max = err32.view(n, d // 2, 2).amax(dim=(0, 2))
top = err32.flatten().topk(5)
theta_1 = 10000 ** (-2 / d)
assert worst == (188, 2) and top.values[0] - top.values[1] > 1e-7  # position 188, column 2 (pair 1); the runner-up
# is 5e-7 lower, far more than float32's sin and cos differ between CPUs, so the place is the same everywhere
assert int(pair_max.argmax()) == 1 and pair_max[0] < 1e-7 and round(err32.max().item(), 7) == 8.1e-6
assert all(i % d // 2 == 1 and i // d * theta_1 >= 128 for i in top.indices.tolist())  # the top 5: pair 1, angle >= 128
assert 170 * theta_1 < 128 <= 171 * theta_1 and 2 ** -16 == (torch.nextafter(torch.tensor(128.0), torch.tensor(256.0)) - 128)
print(f"largest float32 error {err32.max().item():.1e} at position {worst[0]}, pair {worst[1] // 2}; "
      f"the five largest all in pair 1 at angles from 128 up; pair 0 at most {pair_max[0].item():.0e}")

# %% [markdown] slideshow={"slide_type": "subslide"}
#
# The library makes a fixed number of tensor operations, one `sin` and one `cos` over the whole
# (n, d/2) angle grid, and no Python work per entry, whatever n and d are. `RecordCalls` (a
# `TorchFunctionMode`, defined in the first cell) records every torch call it makes:

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
# Timing. Both make one `sin` and one `cos` call over the whole table, so what separates them is the
# builder's Python work per entry: n·d = 12 800 angle expressions in the interpreter, and a nested list
# of as many Python floats that `torch.tensor` must read one by one. The next cell times the builder
# whole and step by step (the comprehension alone, the list to a tensor, the two trig calls), next to
# the library, so you can see where its time goes on your machine. It asserts nothing, because a time
# is not the same on two machines; the counts above are the claim.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
nested = [[angle_003(p, c, d) for c in range(d)] for p in range(n)]
flat = torch.tensor(nested)
steps_003 = {
    "003's builder, whole": lambda: builder_003(n, d),
    "  1. the angles, one Python expression each": lambda: [[angle_003(p, c, d) for c in range(d)] for p in range(n)],
    "  2. the nested list to a tensor": lambda: torch.tensor(nested),
    "  3. sin and cos of the column slices": lambda: (flat[:, 0::2].sin(), flat[:, 1::2].cos()),
    "pl.sinusoidal_positions (vectorised)": lambda: pl.sinusoidal_positions(n, d),
}
print(f"n = {n}, d = {d}")
for name, fn in steps_003.items():
    median, iqr = median_iqr_ms(fn)
    print(f"{name:45s} {median:8.3f} ms (interquartile range {iqr:.3f})")

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
xs = torch.randn(L, d).to(device)
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
# So the dense form loses on both counts: d times the memory, d/2 times the multiplications. It also
# loses a third count, the bytes each call moves: the product reads every matrix R_m, 16 MiB for
# 256 KiB of input, one matrix entry per multiply-add. A rotation from tables reads x, writes its result
# and writes and reads the cos and sin tables (as `apply_rope` does on every call): four times x's bytes.

# %% slideshow={"slide_type": "fragment"}
with RecordCalls() as dense_calls:
    (R_all @ xs.unsqueeze(-1)).squeeze(-1)
(product,) = [call for call in dense_calls.calls if call.name == "matmul"]
dense_bytes = sum(nbytes for _, nbytes in (*product.read, *product.written))
x_bytes = xs.numel() * xs.element_size()
table_bytes = 2 * angles.numel() * 4  # cos and sin, float32
rotation_bytes = 2 * x_bytes + 2 * table_bytes  # x read, result written, tables written and read
assert dense_bytes == R_all.numel() * 4 + 2 * x_bytes == 66 * x_bytes and rotation_bytes == 4 * x_bytes
assert dense_mults == R_all.numel()  # one multiply-add per matrix entry read (4 bytes)
print(f"bytes per call: the dense product {dense_bytes / 2**20:.2f} MiB (66 x the input), a rotation from tables "
      f"{rotation_bytes / 2**20:.2f} MiB (4 x): {dense_bytes // rotation_bytes} times fewer")

# %% [markdown] slideshow={"slide_type": "fragment"}
# Which count does the time follow? A CPU core does many multiply-adds in the time it takes to fetch
# 4 bytes from main memory, so a product that reads a fresh matrix entry for every multiply-add is
# likely to wait on memory, not on arithmetic; but that is a likelihood, not a measurement. The next
# cell times the matrix product alone (the matrices built once, outside the timing), `pl.apply_rope`
# (which computes its tables inside every call, so the comparison favours the dense form), and, as the
# control, one pass that reads all of R_all and does almost no arithmetic (`R_all.sum()`). If the
# product takes about as long as that pass, its time is the bytes; if it takes many times longer, it is
# the arithmetic. It asserts nothing: the answer depends on your hardware.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
print(PATH)
dense_ms, dense_iqr = median_iqr_ms(lambda: (R_all @ xs.unsqueeze(-1)).squeeze(-1))
read_ms, read_iqr = median_iqr_ms(lambda: R_all.sum())
lib_ms, lib_iqr = median_iqr_ms(lambda: pl.apply_rope(xs))
print(f"dense product (matmul only):    {dense_ms:7.3f} ms (interquartile range {dense_iqr:.3f})")
print(f"one pass reading R_all (sum):   {read_ms:7.3f} ms (interquartile range {read_iqr:.3f})")
print(f"pl.apply_rope, tables included: {lib_ms:7.3f} ms (interquartile range {lib_iqr:.3f})")
print(f"the product takes {dense_ms / read_ms:.1f} x the time of reading its matrices once, and {dense_ms / lib_ms:.1f} x "
      f"that of apply_rope, for {dense_bytes // rotation_bytes} x its bytes and {dense_mults // rotation_mults} x its "
      "multiplications")

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
# the reference: there the kernel's fixed cost per call eats most of what it saves (measured below).
# For larger ones, on a CPU with a C compiler, the path is a small C loop registered as a torch
# operator, `torch.ops.posenc.rope_rotate`, which reads each pair once, rotates it in float32 in
# registers and writes it once; its backward pass is the same loop rotating by −angle. Without a
# compiler (or with `POSENC_CPU_KERNEL=0`), a torch path takes over (`posenc_lib/kernels/torch_fast.py`):
# for the interleaved layout one complex multiply, x·e^{i·angle}, which makes the plain form's products
# and sums; for the half layout a multiply, then a multiply-add into that result (`addcmul_`), whose
# sum may be rounded differently from the plain form's separate steps; and for a bf16 input a float32
# copy on the way in and a bf16 copy on the way out (counted below). The next cell checks both paths
# against the plain form, whichever one your machine uses: the C kernel bit for bit (where there is
# one); the torch path bit for bit in the interleaved layout and, in the half layout, within
# `torch.testing.assert_close`'s tolerances for the dtype; and that the small example never reaches
# the C operator.

# %% slideshow={"slide_type": "fragment"}
xb = torch.randn(8, L, 128).to(torch.bfloat16)  # 8 heads of a bf16 model
ab = pl.rope_angles(L, 128)


for x_in in (xb, xb.float()):
    for layout in ("interleaved", "half"):
        plain_form = pl.rotate_pairs(x_in.float(), ab.cos(), ab.sin(), layout).to(x_in.dtype)
        by_torch = torch_fast.rotate(x_in, ab.cos(), ab.sin(), layout)  # the torch path, on any machine
        torch.testing.assert_close(by_torch, plain_form)  # the dtype's tolerances: a sum may round differently
        assert torch.equal(by_torch, plain_form) or layout == "half"  # interleaved: the plain form's arithmetic
        if cpu_kernel.available():  # one C loop, bit for bit the plain form
            assert torch.equal(pl.apply_rope(x_in, layout=layout), plain_form)
        else:  # no C compiler: the torch path
            assert torch.equal(pl.apply_rope(x_in, layout=layout), torch_fast.rotate(x_in, ab.cos(), ab.sin(), layout))
with RecordCalls() as small_calls:
    pl.apply_rope(torch.randn(5, 4))  # chapter 5's size: the reference rotates it
assert 5 * 4 < SMALL == 16384 <= xb.numel() and not any("rope_rotate" in call.name for call in small_calls.calls)
print("against rotate_pairs in float32, for bf16 and float32 inputs and both layouts: the C kernel bit for bit; "
      "the torch path bit for bit (interleaved) or up to rounding (half)")

# %% [markdown] slideshow={"slide_type": "fragment"}
# Where does the C kernel start to pay? `rotary.SMALL` comes from `make bench` (`benchmarks/README.md`,
# "Where the C kernel pays off"). The next cell repeats a small version of that measurement on your
# machine: the time of one rotation of x (4 heads, d = 64, float32) by the reference (chapter 5's plain
# form: several small torch calls) and by the fast path (the C kernel, or the torch path without it), for
# a growing number of positions. A cost fixed per call shows as a flat stretch on the left, the cost per
# element as the slope on the right; where the two curves cross depends on your machine.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
from posenc_lib.rope import rotate_in_float32  # the reference's rotation step


def fast_path(x, cos, sin):
    if cpu_kernel.available():
        return cpu_kernel.rope_rotate(x, cos, sin, True, False)  # interleaved, forward
    return torch_fast.rotate(x, cos, sin, "interleaved")


sizes, per_call = [], {"reference (plain form)": [], "fast path": []}
for seq in (1, 4, 16, 64, 256, 1024):
    x_small, a_small = torch.randn(4, seq, 64), pl.rope_angles(seq, 64)
    c_small, s_small = a_small.cos(), a_small.sin()
    sizes.append(x_small.numel())
    per_call["reference (plain form)"].append(
        1e3 * median_ms(lambda: rotate_in_float32(x_small, c_small, s_small, "interleaved"), min_run_time=0.05))
    per_call["fast path"].append(1e3 * median_ms(lambda: fast_path(x_small, c_small, s_small), min_run_time=0.05))
fig, ax = viz.figure(width=4.8, height=3.2)
for name, times in per_call.items():
    ax.plot(sizes, times, "o-", label=name)
ax.axvline(SMALL, color="grey", ls=":", lw=1, label="rotary.SMALL")
ax.set(xscale="log", yscale="log", xlabel="elements of x", ylabel="µs per call",
       title=f"one rotation on this machine ({PATH.split(': ')[1].split(' (')[0]})")
ax.legend(fontsize=8)
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# Now count the torch calls that move a whole tensor's worth of data (at least half of x: one
# member of every pair), and the bytes of such tensors they read and write (`RecordCalls`, in the
# first cell, says what a call reads and what it writes). Views, shape queries and allocations
# move no data, so only the calls named in `DATA_OPS` count. The cos and sin tables are read as well,
# but they are smaller (float32, 1/16 of x's entries each, so 1/8 of a bf16 x's bytes): this section
# leaves them out of both counts, and §4 adds them in.

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

# %% [markdown] slideshow={"slide_type": "subslide"}
# Hugging Face's `apply_rotary_pos_emb` (transformers' Llama) does the half layout's rotation another
# way, and it is worth seeing why it moves fewer bytes than the plain form: it takes its cos and sin
# tables from the caller, already in bf16 (a model builds them once, as `RotaryEmbedding` caches its
# own), and computes in bf16: every product and the sum are rounded to bf16, where the plain form, the
# C kernel and the torch path compute in float32 and round once at the end. No float32 temporaries, so
# fewer bytes; but less precision. The cell counts its calls and bytes per rotated tensor (it rotates a
# query and a key in one call: we hand it x for both and halve), and measures each form against float64.

# %% slideshow={"slide_type": "fragment"}
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

cos_b, sin_b = (torch.cat((t, t), dim=-1).to(xb.dtype) for t in (ab.cos(), ab.sin()))  # the caller's bf16 tables
hf_calls, hf_bounds = traffic(lambda: apply_rotary_pos_emb(xb, xb, cos_b, sin_b, 0), xb)
assert (hf_calls / 2, hf_bounds / 2) == (5, 5.0)  # per tensor: 5 calls, 5 bounds, against the plain form's 9 and 12
exact = pl.apply_rope(xb.double(), layout="half")  # float64 angles and arithmetic
half_step = 2.0 ** (torch.floor(torch.log2(exact.abs().clamp_min(2**-126))) - 8)  # half a bf16 step of the answer
off = {name: ((out.double() - exact).abs() > half_step * (1 + 1e-9)).double().mean().item()
       for name, out in (("apply_rope", pl.apply_rope(xb, layout="half")),
                         ("transformers", apply_rotary_pos_emb(xb, xb, cos_b, sin_b, 0)[0]))}
hf_err = (apply_rotary_pos_emb(xb, xb, cos_b, sin_b, 0)[0].double() - exact).abs().max().item()
lib_err = (pl.apply_rope(xb, layout="half").double() - exact).abs().max().item()
assert off["transformers"] > 0.3 and off["apply_rope"] < 0.01 and hf_err > lib_err
print("apply_rotary_pos_emb: 5 calls and 5 bounds of bytes per tensor (the plain form: 9 and 12)")
print("entries more than half a bf16 step from the float64 answer: over 30 % for apply_rotary_pos_emb, "
      "under 1 % for apply_rope (which rounds once); its largest error above apply_rope's too")

# %% [markdown] slideshow={"slide_type": "fragment"}
# The same forms timed on this machine, in units of the one-pass bound, with `RotaryEmbedding` (tables
# cached, like Hugging Face's given ones) next to `apply_rope` (tables computed in every call). The bytes
# are what this appendix asserts; a time is not a byte count. A measured ratio can sit above its bytes
# (every call allocates a fresh result, each call has a fixed cost, and the arithmetic and the threads
# cost time of their own) or below them (a temporary that stays in a cache never travels to main
# memory); this cell separates none of these effects, and §4 separates one. Each time comes with its
# interquartile range over the timer's blocks; `make bench` measures such ratios properly, round-robin
# over many rounds.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
print(PATH)
rope_module = pl.RotaryEmbedding(128, layout="half")
forms = {  # name: (fn, tensors it rotates)
    "plain rotate_pairs (float32 and back)": (lambda: plain(xb), 1),
    "pl.apply_rope (half layout)": (lambda: pl.apply_rope(xb, layout="half"), 1),
    "pl.RotaryEmbedding (tables cached)": (lambda: rope_module.rotate(xb), 1),
    "transformers apply_rotary_pos_emb": (lambda: apply_rotary_pos_emb(xb, xb, cos_b, sin_b, 0), 2),
}
t_bound = median_ms(lambda: xb * 1.5)
for name, (fn, tensors) in forms.items():
    moved = traffic(fn, xb)[1] / tensors
    median, iqr = median_iqr_ms(fn)
    print(f"{name:38s} bytes {moved:4.1f} bounds, time {median / tensors / t_bound:5.1f} bounds "
          f"(interquartile range {iqr / tensors / t_bound:.2f})")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Forward + backward, and its floor in bytes
#
# Training also needs the gradient with respect to x. R_m is orthogonal, so for an incoming
# gradient g the chain rule gives R_mᵀ g = R_{−m} g: the backward pass is one more rotation,
# by −angle, and `torch.ops.posenc.rope_rotate` registers exactly that as its backward. Two
# jobs are left that no standalone operator (one that returns a new tensor, as in §3) can skip:
# read x and write R x, then read g and write R_{−m} g. That is two one-pass bounds of bytes. A
# kernel that fuses the rotation into the operation that produces q and k (the projection) or into
# the one that consumes them (attention) never writes or reads the rotated tensor on its own, so
# this floor is a standalone operator's, not RoPE's.
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
# Now the tables, which §3 left out. Each has 1/16 as many entries as x here (8 heads share a table
# row, and a pair needs one angle), in float32: 1/8 of a bf16 x's bytes, so 1/16 of a one-pass bound
# each. The C operator reads both in each of its two calls, forward and backward: 1/4 of a bound.
# `pl.RotaryEmbedding` keeps its tables, so from its second call on that is all it adds: 2 + 1/4 bounds
# per step. `pl.apply_rope` is stateless: every call also computes its angles and their cos and sin
# (writing the tables, 1/8 of a bound, and reading the angles twice), so it can go no lower than
# 2 + 3/8 (tables written once, read twice), and it moves a little more. Only a kernel that computes
# sin and cos itself, from the positions, gets down to 2, at the price of d/2 sines and cosines per
# position in every call. The cell counts every operator's bytes, tables and angles included.

# %% slideshow={"slide_type": "fragment"}
def all_bytes(ops) -> float:
    """Every byte the operators read and write, tables and angles included, in one-pass bounds on xb."""
    return sum(nbytes for op in ops for _, nbytes in (*op.read, *op.written)) / (2 * xb.numel() * xb.element_size())


def trig_entries(ops) -> int:
    return sum(op.size for op in ops if op.name in ("aten::cos", "aten::sin"))


rotary = pl.RotaryEmbedding(128, layout="half")
first_call, second_call = train_step_ops(rotary.rotate), train_step_ops(rotary.rotate)
assert trig_entries(lib_ops) == 2 * L * 128 // 2 == 2 * xb.numel() // 16  # every call: cos and sin of L x d/2 angles
assert trig_entries(second_call) == 0 < trig_entries(first_call)  # the module builds its tables once
assert whole_tensor(second_call) == whole_tensor(lib_ops)  # and rotates as apply_rope does
assert xb.dtype == torch.bfloat16 and rotary.cos_cached.dtype == torch.float32  # bf16 passes, float32 tables
written_tables = sum(nbytes for op in lib_ops if op.name in ("aten::cos", "aten::sin") for _, nbytes in op.written)
assert written_tables / (2 * xb.numel() * xb.element_size()) == 1 / 8  # cos and sin, written once
if cpu_kernel.available():
    assert all_bytes(second_call) == 2 + 1 / 4  # x and g once each, the tables read twice
    assert 2 + 3 / 8 < all_bytes(lib_ops) < 2 + 5 / 8  # and the tables written, from angles written and read
else:  # the plain form reads the tables in each of its products (and autograd keeps them for the backward)
    assert all_bytes(second_call) > whole_tensor(plain_ops)[1] > 2 + 1 / 4
print("every byte of a training step, in one-pass bounds: RotaryEmbedding (from its second call) 2.25 on the C "
      "kernel, apply_rope between 2.375 and 2.625; the plain form's more")
print(f"cos + sin entries per training step: apply_rope {trig_entries(lib_ops)}, "
      f"RotaryEmbedding {trig_entries(first_call)} on its first call, {trig_entries(second_call)} after")

# %% [markdown] slideshow={"slide_type": "subslide"}
# So for this x a training step with a standalone operator has a floor in bytes of 2 + 1/4 one-pass
# bounds with cached float32 tables and 2 + 3/8 for the stateless function (with more heads sharing
# each table row, the tables' share shrinks). `make bench` times two plain passes and a stateless call's
# floor (two passes plus computing the tables) next to `apply_rope` and `RotaryEmbedding` (B = 1,
# 16 heads, d = 128, L = 1024 to 16384), each as a multiple of the one-pass bound; `benchmarks/README.md`
# has the tables. On its machine the two passes took 1.99 to 2.31 bounds in every row but float32 at
# L = 1024 (up to 3.07), and the stateless floor 2.44 to 3.73, above 2.5 in every bf16 row; it names two
# likely causes for the latter: the float32 tables next to 2-byte passes, and the last-level cache (at
# L = 1024 one pass over x fits in it while two passes do not). This appendix tests neither.
#
# The cell below times one training step on this machine in units of the one-pass bound (with this
# section's 8 heads and L = 1024, smaller than `make bench`'s). In time the bound is what torch's
# `x * 1.5` takes here, not what the memory allows: a kernel that moves the same bytes faster than
# torch's bf16 multiply can come in under "two passes", and that contradicts no count above.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
print(PATH)
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
    median, iqr = median_iqr_ms(fn)
    print(f"{name:40s} {median / t_bound:6.2f} x the one-pass bound (interquartile range {iqr / t_bound:.2f})")

# %% [markdown] slideshow={"slide_type": "subslide"}
# If the two RoPE steps come out well above two passes plus their tables, as they may at this size,
# the obvious suspect is a cost fixed per call: autograd's bookkeeping, the custom operator's dispatch,
# the call into C, and for `apply_rope` the Python work of building its positions and angles
# (`benchmarks/README.md` puts the fixed part near 0.05 ms a step). A fixed cost stays the same in
# microseconds as L grows and shrinks in bounds; a cost per byte grows with L and stays the same in
# bounds. The next cell is that control: the same step at L = 256, 1024 and 4096. Read the extra
# columns in microseconds: RotaryEmbedding's step minus the two passes, and apply_rope's minus
# RotaryEmbedding's minus its tables alone (what is left of the stateless function's extra cost once
# the sines and cosines are paid). Whichever stays about the same while L grows 16-fold is a fixed cost
# per call on your machine.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
print(PATH)
print("    L   two passes   module   apply_rope   tables  | module − passes   apply_rope − module − tables")
print("          (µs)        (µs)       (µs)       (µs)   |      (µs)                 (µs)")
for L_sweep in (256, 1024, 4096):
    x_sweep = torch.randn(8, L_sweep, 128).to(torch.bfloat16)
    q_sweep, g_sweep, a_sweep = x_sweep.clone().requires_grad_(), torch.randn(x_sweep.shape).to(torch.bfloat16), \
        pl.rope_angles(L_sweep, 128)
    module_sweep = pl.RotaryEmbedding(128, layout="half")
    module_sweep.rotate(x_sweep)  # build its tables outside the timing
    us = {name: 1e3 * median_ms(fn, min_run_time=0.1) for name, fn in {
        "passes": lambda: (x_sweep * 1.5, g_sweep * 1.5),
        "module": lambda: torch.autograd.grad(module_sweep.rotate(q_sweep), q_sweep, g_sweep),
        "apply_rope": lambda: torch.autograd.grad(pl.apply_rope(q_sweep, layout="half"), q_sweep, g_sweep),
        "tables": lambda: (a_sweep.cos(), a_sweep.sin()),
    }.items()}
    print(f"{L_sweep:5d} {us['passes']:10.0f} {us['module']:10.0f} {us['apply_rope']:10.0f} {us['tables']:10.0f}  | "
          f"{us['module'] - us['passes']:12.0f} {us['apply_rope'] - us['module'] - us['tables']:24.0f}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. On a GPU (to come)
#
# This section is a placeholder: the GPU half of this appendix (Triton kernels for RoPE, counted and
# timed the way §3 and §4 do it for the CPU) is still to be written. Until then, what the library does
# on a CUDA device, in short (`posenc_lib/rotary.py` says it in full): the C kernel is a CPU loop, so
# `apply_rope` takes the torch path of §3 for a forward pass without gradients, and the reference,
# chapter 5's plain form with §4's 21 operators, when gradients are needed; `apply_rope_compiled` fuses
# the forward pass into one kernel with `torch.compile` and, needing gradients, falls back the same
# way. None of that is measured here.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. What it is worth in a model
#
# In a training step RoPE is small in arithmetic. Per token, the four projections of an attention layer
# (q, k, v and the output) with d_model = 4096 make 4 · 4096² multiply-adds; rotating q and k makes
# 2 multiplications and one addition or subtraction per entry of each, about 2.5·10⁴ operations against
# 1.3·10⁸, one part in five thousand (counted below). What RoPE costs is bytes and calls: written as
# plain torch operations it makes 9 whole-tensor calls forward and 21 forward and backward (§3, §4)
# where one or two would do, and when the tensors are small (decoding one token at a time, short
# sequences) its fixed cost per call, not its bytes, is what a step pays (§3's figure, §4's last cell).
# A one-pass kernel removes the extra passes; fusing the rotation into a neighbouring kernel (the
# projection, or attention) removes its own call and its own pass as well.

# %% slideshow={"slide_type": "fragment"}
d_model = 4096
with FlopCounterMode(display=False) as projections:
    torch.nn.functional.linear(torch.zeros(1, d_model), torch.zeros(d_model, d_model))  # one projection, one token
projection_ops = 4 * projections.get_total_flops()  # q, k, v, o (a multiply-add counts 2)
one_token = torch.zeros(1, d_model // 128, 1, 128)  # 32 heads of 128, one position
with RecordCalls() as rope_calls:
    pl.rotate_pairs(one_token, torch.zeros(1, 64), torch.zeros(1, 64))
rope_ops = 2 * sum(max(n for n, _ in call.written) for call in rope_calls.calls if call.name in ("mul", "sub", "add"))
assert projection_ops == 4 * 2 * d_model**2 and rope_ops == 2 * 3 * d_model  # q and k: 3 operations per entry
assert projection_ops // rope_ops == 5461
print(f"per token and layer: projections {projection_ops:.2e} operations, RoPE on q and k {rope_ops:.2e}: "
      f"1 / {projection_ops // rope_ops}")
