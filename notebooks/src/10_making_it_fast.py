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
# 3. counting passes over memory, and a one-pass C kernel for RoPE;
# 4. the same count for a training step (forward + backward), and the floor it sets.
#
# Timings differ between machines and between runs, so the cells that print them are not
# compared by the tests (each says so in its first line). What is asserted does not depend
# on the machine: equal results, numbers of operations, numbers of passes over memory.

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import math

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import posenc_lib as pl
from posenc_lib import viz
from posenc_lib.kernels import cpu as cpu_kernel
from posenc_lib.rotary import SMALL  # below this many elements apply_rope keeps the reference
from posenc_lib.timing import median_ms  # torch.utils.benchmark.Timer underneath

viz.use_style()  # white figures, dark text: readable in light and dark themes

torch.set_printoptions(precision=4, sci_mode=False)
device = pl.default_device()  # the CPU unless you opt in with POSENC_DEVICE (00_index); tensors below follow it
g = torch.manual_seed(0)


class RecordCalls(TorchFunctionMode):
    """Inside a `with` block, records each torch call: its name and the size of the largest tensor it touches."""

    def __init__(self):
        super().__init__()
        self.calls: list[tuple[str, int]] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        tensors = [t for t in (*args, *(kwargs or {}).values(), out) if isinstance(t, torch.Tensor)]
        self.calls.append((getattr(func, "__name__", str(func)), max((t.numel() for t in tensors), default=0)))
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
    names = [name for name, _ in rec.calls]
    counts[size] = (len(names), names.count("sin"), names.count("cos"))
assert len(set(counts.values())) == 1 and counts[(10, 8)][1:] == (1, 1)
print("torch calls (total, sin, cos) per size:", counts)

# %% [markdown] slideshow={"slide_type": "fragment"}
# Timing. Only the loose claim is asserted: the loop, with n·d Python-level trig calls, is
# more than ten times slower than the fixed handful of vectorised calls.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
t_loop, t_vec = median_ms(lambda: naive_table(n, d)), median_ms(lambda: pl.sinusoidal_positions(n, d))
assert t_loop > 10 * t_vec
print(f"n = {n}, d = {d}: loop {t_loop:.2f} ms, vectorised {t_vec:.3f} ms ({t_loop / t_vec:.0f}x)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Dense R_m against cos/sin tables
#
# Chapter 5 (§11) showed that building the d × d matrix R_m for every position stores d times
# more numbers than the cos and sin tables `apply_rope` uses, and gives the same result. Here we
# time both for L = 1024 positions, d = 64: the matrix product alone (the matrices already
# built) against `pl.apply_rope` (tables built on every call).

# %% slideshow={"slide_type": "fragment"}
L, d = 1024, 64
xs = torch.randn(L, d).to(device)
R_all = torch.stack([pl.rope_matrix(m, d, device=device) for m in range(L)])  # (L, d, d)
dense_out = (R_all @ xs.unsqueeze(-1)).squeeze(-1)
torch.testing.assert_close(dense_out, pl.apply_rope(xs), atol=1e-5, rtol=1e-5)
assert R_all.numel() == d * (2 * L * (d // 2))  # d times the cos and sin tables (L x d/2 each)
print(f"same result; the dense form holds {R_all.numel():,} numbers, the input {xs.numel():,}")

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
t_matmul = median_ms(lambda: (R_all @ xs.unsqueeze(-1)).squeeze(-1))
t_lib = median_ms(lambda: pl.apply_rope(xs))
print(f"dense (matmul only): {t_matmul:7.3f} ms")
print(f"pl.apply_rope:       {t_lib:7.3f} ms  ({t_lib / t_matmul:.2f} x the time of the matmul alone)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. Counting passes over memory
#
# The tables fix the memory; what is left is time, and for an elementwise job like this
# the time is set by how often the data travels between memory and the CPU. The cheapest
# thing any function that returns a new tensor can do is read x once and write the result
# once: that is what `x * 1.5` does, so we use it as the **one-pass bound**. Written with
# torch operations, `x·cos − y·sin` makes a trip per operation: the products, the
# difference, the `stack`/`cat` that puts the pairs back, and for bf16 inputs a float32
# copy on the way in and out.
#
# `pl.apply_rope` keeps chapter 5's formula (`pl.rotate_pairs`, in `posenc_lib/rope.py`, which
# imports no fast path) as its reference and hands the rotation to the fastest path that applies
# (`posenc_lib/kernels/`, chosen in one function, `posenc_lib.rotary.rotate`). A CPU tensor of
# fewer than `rotary.SMALL` = 16 384 elements, such as chapter 5's 5 × 4 example, stays with
# the reference: there the kernel's fixed cost per call eats most of what it saves (`make bench`
# measures where it starts to pay off). For larger ones, on a CPU
# with a C compiler, the path is a small C loop registered as a torch operator,
# `torch.ops.posenc.rope_rotate`, which reads each pair once, rotates it in float32 in
# registers and writes it once; its backward pass is the same loop rotating by −angle.
# Without a compiler (or with `POSENC_CPU_KERNEL=0`), a torch path takes over that makes two
# passes over float32 data (a multiply, then a fused multiply-add); a bf16 input adds a float32
# copy on the way in and a bf16 copy on the way out, four passes in all (counted below). The next cell checks that the result is the plain form's: bit for bit on the
# C kernel, up to one rounding step on the torch path, and that the small example never
# reaches the C operator.

# %% slideshow={"slide_type": "fragment"}
xb = torch.randn(8, L, 128).to(torch.bfloat16)  # 8 heads of a bf16 model
ab = pl.rope_angles(L, 128)
for x_in in (xb, xb.float()):
    for layout in ("interleaved", "half"):
        plain_form = pl.rotate_pairs(x_in.float(), ab.cos(), ab.sin(), layout).to(x_in.dtype)
        if cpu_kernel.available():  # one C loop, bit for bit the plain form
            assert torch.equal(pl.apply_rope(x_in, layout=layout), plain_form)
        else:  # no C compiler: torch operations, equal up to one rounding step
            torch.testing.assert_close(pl.apply_rope(x_in, layout=layout), plain_form)
with RecordCalls() as small_calls:
    pl.apply_rope(torch.randn(5, 4))  # chapter 5's size: the reference rotates it
assert 5 * 4 < SMALL == 16384 <= xb.numel() and not any("rope_rotate" in name for name, _ in small_calls.calls)
print("apply_rope equals rotate_pairs in float32, for bf16 and float32 inputs and both layouts")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Now count the torch calls that move a whole tensor's worth of data (at least half of x: one
# member of every pair). Views, shape queries and allocations move none, so only the calls
# named in `DATA_OPS` count:

# %% slideshow={"slide_type": "fragment"}
DATA_OPS = {"float", "to", "mul", "sub", "add", "cat", "stack", "copy_", "addcmul_", "rope_rotate.default"}


def passes(fn) -> int:
    with RecordCalls() as rec:
        fn()
    return sum(name in DATA_OPS and size >= xb.numel() // 2 for name, size in rec.calls)


n_plain = passes(lambda: pl.rotate_pairs(xb.float(), ab.cos(), ab.sin(), "half").to(xb.dtype))
n_lib = passes(lambda: pl.apply_rope(xb, layout="half"))
# float32 copy, 4 products, a difference, a sum, the cat, the bf16 copy back
assert n_plain == 9
# the C operator: 1 call; the torch fallback: copy in, multiply, multiply-add, copy out (the two
# passes of the arithmetic, and the two dtype copies of a bf16 input; a float32 input needs no copies)
assert n_lib == (1 if cpu_kernel.available() else 4)
xf = xb.float()
n_lib_f32 = passes(lambda: pl.apply_rope(xf, layout="half"))
assert n_lib_f32 == (1 if cpu_kernel.available() else 2)
print(f"whole-tensor torch calls: the plain form makes {n_plain}; apply_rope makes 1 on the C kernel, 4 without it "
      "(2 for a float32 input)")

# %% [markdown] slideshow={"slide_type": "fragment"}
# Time in units of the one-pass bound, on this machine, next to Hugging Face's
# `apply_rotary_pos_emb` (transformers, when installed) on the same bf16 tensor. This is noisy;
# `make bench` measures the same ratios properly, round-robin over many rounds.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
t_bound = median_ms(lambda: xb * 1.5)
forms = {
    "plain rotate_pairs (float32 and back)": lambda: pl.rotate_pairs(xb.float(), ab.cos(), ab.sin(), "half").to(xb.dtype),
    "pl.apply_rope (half layout)": lambda: pl.apply_rope(xb, layout="half"),
}
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

cos_b, sin_b = (torch.cat((t, t), dim=-1).to(xb.dtype) for t in (ab.cos(), ab.sin()))
forms["transformers apply_rotary_pos_emb (q only)"] = lambda: apply_rotary_pos_emb(xb, xb, cos_b, sin_b, 0)[0]
for name, fn in forms.items():
    print(f"{name:44s} {median_ms(fn) / t_bound:5.1f} x the one-pass bound")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Forward + backward, and the floor it cannot go below
#
# Training also needs the gradient with respect to x. R_m is orthogonal, so for an incoming
# gradient g the chain rule gives R_mᵀ g = R_{−m} g: the backward pass is one more rotation,
# by −angle, and `torch.ops.posenc.rope_rotate` registers exactly that as its backward. Two
# jobs are left that no implementation can skip: read x and write R x, then read g and write
# R_{−m} g. That is two one-pass bounds.
#
# To see what autograd runs in the backward pass we need a recorder one level lower than
# `RecordCalls`: a `TorchDispatchMode` sees every ATen operator, including those the
# backward pass calls. Views (`slice`, `unsqueeze`, ...) move no data, so they are skipped.

# %% slideshow={"slide_type": "fragment"}
class RecordOps(TorchDispatchMode):
    """Inside a `with` block, records each ATen operator that is not a view: its name and the size of
    the largest tensor it touches (forward and backward passes alike)."""

    def __init__(self):
        super().__init__()
        self.ops: list[tuple[str, int]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not func.is_view:
            leaves = torch.utils._pytree.tree_leaves((args, kwargs, out))
            self.ops.append((func.name(), max((t.numel() for t in leaves if isinstance(t, torch.Tensor)), default=0)))
        return out


def train_step_ops(rope) -> list[tuple[str, int]]:
    """The operators of out = rope(q), then the gradient of <out, g> with respect to q."""
    q, grad_out = xb.clone().requires_grad_(), torch.randn(xb.shape).to(xb.dtype)
    with RecordOps() as rec:
        torch.autograd.grad(rope(q), q, grad_out)
    return rec.ops


def whole_tensor(ops) -> int:
    return sum(size >= xb.numel() // 2 for _, size in ops)


plain_ops = train_step_ops(lambda q: pl.rotate_pairs(q.float(), ab.cos(), ab.sin(), "half").to(q.dtype))
lib_ops = train_step_ops(lambda q: pl.apply_rope(q, layout="half"))
n_plain_step, n_lib_step = whole_tensor(plain_ops), whole_tensor(lib_ops)
# plain: forward 9 as in section 3, backward 12 (float32 copy, the products and sums of the
# chain rule, two slice_backward fills for the halves, their sum, the bf16 copy back)
assert n_plain_step == 21
if cpu_kernel.available():  # the C operator once forward, once backward
    assert [name for name, size in lib_ops if size >= xb.numel() // 2] == ["posenc::rope_rotate"] * 2
else:  # no C compiler: the torch path has no backward, so autograd runs through the plain form
    assert n_lib_step == n_plain_step
print(f"whole-tensor operators in forward + backward: the plain form {n_plain_step}; apply_rope 2 on the "
      f"C kernel (its operator, forward and backward), {n_plain_step} without it (the plain form)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The other cost is the tables. `pl.apply_rope` is stateless: every call computes cos and sin
# of all L × d/2 angles again. Each table has 1/16 as many entries as x here (8 heads share a
# table row, and a pair needs one angle), but every entry is a sine or a cosine rather than one
# multiply; the timing cell at the end shows what that costs next to a pass over x on your
# machine. For bf16 x the share is larger: the passes move 2 bytes per entry, while the
# tables stay float32. A `pl.RotaryEmbedding` keeps its tables: from its second call on it
# computes no sines at all.

# %% slideshow={"slide_type": "fragment"}
def trig_entries(ops) -> int:
    return sum(size for name, size in ops if name in ("aten::cos", "aten::sin"))


rotary = pl.RotaryEmbedding(128, layout="half")
first_call, second_call = train_step_ops(rotary.rotate), train_step_ops(rotary.rotate)
assert trig_entries(lib_ops) == 2 * L * 128 // 2 == 2 * xb.numel() // 16  # every call: cos and sin of L x d/2 angles
assert trig_entries(second_call) == 0 < trig_entries(first_call)  # the module builds its tables once
assert whole_tensor(second_call) == whole_tensor(lib_ops)  # and rotates as apply_rope does
assert xb.dtype == torch.bfloat16 and rotary.cos_cached.dtype == torch.float32  # bf16 passes, float32 tables
print(f"cos + sin entries per training step: apply_rope {trig_entries(lib_ops)}, "
      f"RotaryEmbedding {trig_entries(first_call)} on its first call, {trig_entries(second_call)} after")

# %% [markdown] slideshow={"slide_type": "subslide"}
# So a training step has a floor: two one-pass bounds for a module with cached tables, two
# bounds plus the tables for the stateless function. `make bench` times both floors next to
# `apply_rope` and `RotaryEmbedding` (B=1, 16 heads, d = 128, L = 1024 to 16384) and reports
# each as a multiple of the one-pass bound; the README quotes the numbers. Two effects make
# the floor larger than "2" on a real machine: the tables, and the cache. At small L one pass
# over x fits in the last-level cache while two passes (x, g and two outputs) do not, so the
# "two passes" themselves cost more than two bounds there.
#
# The cell below times one training step on this machine in units of the one-pass bound
# (with this section's 8 heads and L = 1024, smaller than `make bench`'s).

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
    print(f"{name:40s} {median_ms(fn) / t_bound:5.1f} x the one-pass bound")
