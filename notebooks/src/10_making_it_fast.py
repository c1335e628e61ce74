# %% [markdown] slideshow={"slide_type": "slide"}
# # Appendix — Making it fast
#
# The chapters write every formula in its plainest form, because that is the form to learn
# from. This appendix is about speed, and it is off the teaching path: nothing in the chapters
# needs it. It collects the engineering that grew out of
# [chapter 3](03_sinusoids.ipynb) (the sinusoidal table) and [chapter 5](05_rope.ipynb) (RoPE):
#
# 1. a Python expression per entry against one vectorised call (chapter 3's table), and what
#    decides the table's accuracy;
# 2. the dense rotation matrices R_m against the cos/sin tables (chapter 5, §11);
# 3. counting calls and the bytes they move, and a one-pass C kernel for RoPE;
# 4. the same count for a training step (forward + backward), the floor it sets, and two exercises:
#    a prediction of the tables' bytes in a step, and the backward rotation written into the gradient itself;
# 5. on a GPU: RoPE's Triton kernel, run under Triton's interpreter on the CPU where Triton is installed (the tests);
# 6. RoPE's share of a step's arithmetic and bytes (one training step of chapter 7's `TinyDecoder`, its optimizer's
#    update included, counted).
#
# **Scope.** §1–§4 and §6 count on the CPU, where `apply_rope` has a C kernel. §5 reads
# the GPU's kernel; where Triton is installed (the test suite's environment, not the course's) it runs it on the CPU
# under Triton's interpreter, which checks what it computes, not how fast; the only GPU timings here are quoted from `benchmarks/README.md`, named where shown.
# What you read does not depend on whether the C kernel is built here: its counts are taken on PyTorch's
# meta device, which has shapes and no values.
#
# Timings differ between machines and between runs, so this appendix times one thing only (§1,
# a difference of many times), asserts nothing about it, and leaves ratios to `make bench`
# (`benchmarks/README.md`), which measures them round-robin over many rounds. What is asserted does
# not depend on the machine: equal results, numbers of operations, and the operators a computation
# runs with the bytes they read and write.

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import math
import platform
from unittest import mock

import torch
from torch.utils.flop_counter import FlopCounterMode

import posenc_lib as pl
from posenc_lib import check, viz
from posenc_lib.counting import Call, RecordCalls, RecordOps, bounds, entries_and_bytes, record, total_bytes
from posenc_lib.kernels import cpu as cpu_kernel
from posenc_lib.kernels import torch_fast
from posenc_lib.rotary import SMALL  # below this many elements apply_rope keeps the reference
from posenc_lib.timing import block_ms  # torch.utils.benchmark.Timer underneath

viz.use_style()  # white figures, dark text: readable in light and dark themes

torch.set_printoptions(precision=4, sci_mode=False)
device = pl.default_device()  # the CPU unless you opt in with POSENC_DEVICE (00_index); tensors below follow it
g = torch.manual_seed(0)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **How this appendix counts: one recorder, one rule.** Most of what the appendix asserts is a count of bytes.
# `record(fn)` (`posenc_lib/counting.py`) lists the operators of ATen, torch's C++ library of tensor operators
# (`aten::mul`, `aten::cat`), that fn() runs, forward and backward alike, with the entries and bytes of each tensor each
# reads and writes; views and allocations move no data and are left out. A tensor's bytes are the distinct values it
# shows: an expanded view counts each value once.
#
# One rule, `bounds(ops, x)`, turns such a list into (operators, bytes), the bytes in **one-pass bounds** of x: what
# `x * 1.5` moves, x's bytes read once and a result of x's size written once. No function that reads every value of x
# and returns a new tensor of x's size moves less, so one pass over x is the floor; tables and temporaries add to it.
# §6, a whole training step with no one x, sums every record as recorded (`total_bytes`); its first count checks that
# `bounds` gives the same share to within 0.001.

# %% slideshow={"slide_type": "fragment"}
ones = torch.ones(8, 1024)
assert bounds(record(lambda: ones * 1.5), ones) == (1, 1.0)  # one operator, one bound
print("x times a number: 1 operator, 1 bound")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. A Python expression per entry vs one vectorised call
#
# One of chapter 3's sources (`003`) builds the sinusoidal table in three steps: a nested list
# comprehension computes the angle of every entry, m / 10000^(2⌊c/2⌋/d) for position m and column c
# (both columns of a pair share ⌊c/2⌋ = j), in Python; one call turns the nested list into a tensor;
# then two vectorised calls take the sine of the even columns and the cosine of the odd ones. Source 003
# builds its table once, in `PositionalEncoding.__init__` (`max_len: int = 5000` positions), and keeps it as a
# (1, max_len, d) buffer that `forward` cuts to the input's length: a cost paid once, when the model is built, not in
# every step. So the difference below matters only where tables are built often (many models, widths or lengths).
# (Its cut is wrong: see the errata table at the end; the cell checks it.) Our version of that builder (it takes the
# angle as an argument, so the cell can count its calls; `RecordCalls`, in `posenc_lib/counting.py`, records its calls
# of torch's Python API, the one place this appendix counts those):

# %% slideshow={"slide_type": "fragment"}
def angle_003(m: int, c: int, d: int, base: float = 10000.0) -> float:
    return m / base ** (2 * (c // 2) / d)  # columns 2j and 2j + 1 share frequency j


def builder_003(n: int, d: int, dtype=torch.float32, angle=angle_003) -> torch.Tensor:
    """Source 003's method: one Python expression per entry for the angles, then sin and cos over column slices."""
    table = torch.tensor([[angle(m, c, d) for c in range(d)] for m in range(n)], dtype=dtype)
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
torch.testing.assert_close(table_003, pl.sinusoidal_positions(n, d, dtype=torch.float64))  # float64's default tolerance
assert calls["angle"] == n * d and torch_calls.count("sin") == torch_calls.count("cos") == 1
print(f"the same table as the library's, within float64's standard tolerance; the builder evaluates {calls['angle']} = n·d angles in Python, then makes "
      f"{len(torch_calls)} torch calls, one sin and one cos among them")
# 003's cut (errata): [:x.shape[1]] slices the buffer's size-1 first axis, so it keeps all max_len positions: x + pe
# fails for every length above 1 other than max_len (where it adds correctly), and at length 1 silently broadcasts; the correct form is [:, :x.shape[1]]
buffer_003 = table_003[None]  # the (1, max_len, d) buffer, here with max_len = n
x_003 = torch.zeros(2, 10, d, dtype=torch.float64)  # a batch of 2 inputs of 10 positions
assert buffer_003[: x_003.shape[1]].shape == (1, n, d)  # the source's cut: the size-1 axis, every position kept
try:
    x_003 + buffer_003[: x_003.shape[1]]
    raise AssertionError("the source's cut should not broadcast")
except RuntimeError:
    pass
x_len1 = torch.zeros(2, 1, d, dtype=torch.float64)  # one position: the source's cut broadcasts, with no error
assert (x_len1 + buffer_003[: x_len1.shape[1]]).shape == (2, n, d) != x_len1.shape
assert torch.equal((x_003 + buffer_003[:, : x_003.shape[1]])[1], table_003[:10])  # the correct cut: the positions
x_full = torch.zeros(2, n, d, dtype=torch.float64)  # max_len positions: the source's cut happens to be right
assert torch.equal(x_full + buffer_003[: x_full.shape[1]], x_full + buffer_003[:, : x_full.shape[1]])
print("003's forward: [:x.shape[1]] keeps all positions: it fails to add 10 positions, and turns 1 position into "
      f"{tuple((x_len1 + buffer_003[:1]).shape)}; [:, :x.shape[1]] adds the first 10")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Vectorising itself costs no accuracy: the vectorised table computed in float64 and rounded once to float32 is
# within 10⁻⁷ of exact. The library's float32 table is within about 8·10⁻⁶, about 10 % further than source 003's
# slow builder in float32, because the library rounds its float32 angles twice, the builder once. The aside below
# checks this; the main line continues at "The library makes a fixed number".

# %% [markdown] slideshow={"slide_type": "skip"}
# ### Aside: where float32's error comes from
#
# `pl.sinusoidal_positions` makes its float32 angles in two roundings: θ_j is
# rounded to float32 once (`rope_frequencies` computes it in float64 first), and the product m·θ_j,
# taken in float32, is rounded again; then sin and cos round once more. An error δ in an angle
# becomes an error of about δ·|cos| in its sine and δ·|sin| in its cosine (the slope of each), plus
# that last rounding. The library accepts the second rounding because its tables follow the caller's dtype and
# device, and some devices (Apple's MPS) have no float64; taking m·θ_j in float64 would make a float64 table first,
# on devices that have one.
#
# Pair 0 has no angle error: θ₀ = 1, so the angle is the position itself, an integer that float32
# holds exactly. The largest errors sit in pair 1: θ₁ = 10000^(−2/64) ≈ 0.75 is not a float32
# number, and its angles are the largest that are not integers, up to 199·θ₁ ≈ 149, where float32's
# spacing is 2⁻¹⁶ ≈ 1.5·10⁻⁵ (from 128 up: positions 171 to 199). Later pairs turn more slowly, so
# their angles are smaller and more finely spaced.
#
# Source 003's builder in float32, whose angles are Python float64 numbers rounded once, comes out slightly more
# accurate, and the vectorised table computed in float64 and rounded once at the end is accurate to a few times
# 10⁻⁸. The cell checks each of these statements.

# %% slideshow={"slide_type": "skip"}
exact = pl.sinusoidal_positions(n, d, dtype=torch.float64)
err32 = (exact - pl.sinusoidal_positions(n, d).double()).abs()  # (n, d): columns 2j, 2j + 1 are pair j
pair_max = err32.view(n, d // 2, 2).amax(dim=(0, 2))
top = err32.flatten().topk(5)
theta_1 = 10000 ** (-2 / d)
assert int(pair_max.argmax()) == 1 and pair_max[0] < 1e-7 and round(err32.max().item(), 7) == 8.1e-6
assert all(i % d // 2 == 1 and i // d * theta_1 >= 128 for i in top.indices.tolist())  # the top 5: pair 1, angle >= 128
assert 170 * theta_1 < 128 <= 171 * theta_1 and 2 ** -16 == (torch.nextafter(torch.tensor(128.0), torch.tensor(256.0)) - 128)
# the angle errors (float32 angles as the library makes them, against float64) times the slopes explain every entry
m_col = torch.arange(n, dtype=torch.float64)[:, None]
angle_err = (m_col.float() * pl.rope_frequencies(d)).double() - m_col * pl.rope_frequencies(d, dtype=torch.float64)
angle = m_col * pl.rope_frequencies(d, dtype=torch.float64)
slopes = torch.stack((angle.cos().abs(), angle.sin().abs()), -1).flatten(-2)  # sine columns, cosine columns
assert (err32 - angle_err.abs().repeat_interleave(2, -1) * slopes).abs().max() < 1.2e-7  # up to the trig rounding
err_003 = (exact - builder_003(n, d)).abs().max().item()  # angles in Python float64, rounded once to float32
err_once = (exact - exact.float().double()).abs().max().item()  # float64 all the way, rounded once at the end
assert 7e-6 < err_003 < 7.6e-6 < err32.max().item() and err_once < 1e-7
assert 1.05 < err32.max().item() / err_003 < 1.15  # the library's two roundings: about 10 % more than the builder's one
print(f"largest float32 error {err32.max().item():.1e}, in pair 1; "
      f"the five largest all in pair 1 at angles from 128 up; pair 0 at most {pair_max[0].item():.0e}")
print("every entry's error is its angle's error times its slope, to within 1.2e-07")
print("003's builder in float32: largest error between 7e-06 and 7.6e-06, the library's about 10 % larger "
      f"({round(err32.max().item() / err_003, 1)} times); the float64 table rounded once: under 1e-07")

# %% [markdown] slideshow={"slide_type": "skip"}
# These roundings grow with the position, as chapter 5 (§9) shows up to 10⁷: over positions 99 000 to 100 000
# (d = 128), where float32's spacing is 2⁻⁷ ≈ 0.0078, the float32 angles are off by up to about 0.007 rad, again
# largest in pair 1 (pair 0 exact).

# %% slideshow={"slide_type": "skip"}
far = torch.arange(99_000, 100_001, dtype=torch.float64)[:, None]
far_err = ((far.float() * pl.rope_frequencies(128)).double() - far * pl.rope_frequencies(128, dtype=torch.float64)).abs()
spacing_1e5 = (torch.nextafter(torch.tensor(1e5), torch.tensor(2e5)) - 1e5).item()
assert spacing_1e5 == 2**-7 and far_err[:, 0].max() == 0 and int(far_err.amax(0).argmax()) == 1
assert 0.006 < far_err.max() < 0.008
print(f"float32 spacing at 1e5: {spacing_1e5}; angle error at positions 99000-100000, d = 128: up to "
      f"{far_err.max().item():.4f} rad, in pair {int(far_err.amax(0).argmax())}")

# %% [markdown] slideshow={"slide_type": "skip"}
# Source 003 also asks a question, in a comment of its RoPE code. That code makes its angle table as
# the positions times the frequencies `torch.exp(torch.arange(0, dim, 2, dtype=torch.float) * -(math.log(10000.0) / dim))`.
# The comment says that this table equals the one made in three lines by the `precompute_freqs_cis`
# the same post shows as Llama's: `freqs = 1.0 / (theta ** (torch.arange(0, d_model, 2)[: (d_model // 2)].float() / d_model))`,
# `t = torch.arange(end, device=freqs.device)`, then `freqs = torch.outer(t, freqs).float()`; and it asks whether computing the frequencies
# with `torch.exp` saves any computation. Both tables are positions times frequencies, each product
# rounded once in float32, so they can differ only where their frequencies differ (the cell checks it):
# in effect the comment compares two forms of θ_j = 10000^(−2j/d), the exp form and the power form.
# Does the exp form save anything? No, for two reasons.
#
# - **Cost.** Either form computes d/2 = 32 numbers, once per table, next to the n·d/2 angles and as
#   many sines and cosines the table needs; whichever of the two is faster, the difference is a few
#   dozen numbers.
# - **Accuracy.** The two are the same number in exact arithmetic, not in float32. The exp form
#   rounds its constant −ln(10000)/d to float32, then its argument, up to ln 10000 ≈ 9.2 in size, to float32's spacing there (2⁻²⁰) before
#   taking the exponential, and exp turns an absolute error in its argument into the same relative
#   error in its result: several ulps of the frequency (an ulp, a unit in the last place, is the
#   spacing between a float32 number and the next one up). Here the power form is off by at most one
#   ulp, because d = 64 is a power of two, so its exponent 2j/d is exact in float32 (the cell checks d = 32 and
#   128 too); for other d both forms are several ulps off (the cell checks d = 48, 80 and 96).
#   The library computes θ_j in float64 and rounds once (`pl.rope_frequencies`), so each θ_j is the
#   float32 number nearest the exact value, and that is what the cell measures both forms against.
#
# So the comment's claim holds for the formulas, not for their float32 numbers: at d = 64 the two
# tables differ in every column whose frequencies differ.

# %% slideshow={"slide_type": "skip"}
j2 = torch.arange(0, d, 2, dtype=torch.float32)
exp_form = torch.exp(j2 * -(math.log(10000.0) / d))  # 003's frequencies
pow_form = 1.0 / (10000 ** (j2 / d))  # the form its comment calls the same
assert torch.equal(pow_form, 1.0 / (10000.0 ** (torch.arange(0, d, 2)[: (d // 2)].float() / d)))  # as 003 quotes it
table_exp = torch.arange(n, dtype=torch.float).unsqueeze(-1) * exp_form  # 003's angle table (n = 200 positions)
table_pow = torch.outer(torch.arange(n), pow_form).float()  # the three lines its comment calls the same
same_freq = exp_form == pow_form
assert torch.equal(table_exp[:, same_freq], table_pow[:, same_freq])  # equal frequencies: equal columns
assert (table_exp != table_pow)[:, ~same_freq].any(0).all()  # every column whose frequency differs differs
nearest = pl.rope_frequencies(d)  # float64 rounded once: the float32 number nearest each exact theta_j
ulp = torch.nextafter(nearest, torch.tensor(math.inf)) - nearest
ulps_off = {"exp": (exp_form - nearest).abs() / ulp, "power": (pow_form - nearest).abs() / ulp}
assert len(nearest) == d // 2 == 32
assert ulps_off["power"].max() <= 1 and ulps_off["exp"].max() > 3
assert (ulps_off["exp"] > 1).sum() > d // 8  # not one unlucky frequency: many of them
assert (~same_freq).sum() > d // 4  # more than half of the 32 differ (how many depends on the CPU's exp)
for d_other in (32, 128, 48, 80, 96):  # 2j/d is exact in float32 when d is a power of two, not otherwise
    j_other = torch.arange(0, d_other, 2, dtype=torch.float32)
    near_other = pl.rope_frequencies(d_other)
    ulp_other = torch.nextafter(near_other, torch.tensor(math.inf)) - near_other
    pow_other = ((1.0 / (10000 ** (j_other / d_other)) - near_other).abs() / ulp_other).max()
    exp_other = ((torch.exp(j_other * -(math.log(10000.0) / d_other)) - near_other).abs() / ulp_other).max()
    if d_other & (d_other - 1) == 0:
        assert pow_other <= 1  # a power of two: the power form at most 1 ulp off, as at d = 64
    else:
        assert pow_other > 2 and exp_other > 2  # both forms several ulps off
print("003's two angle tables (d = 64) differ in every column whose frequencies differ (more than half of the "
      f"{d // 2}), and only there")
print(f"the {d // 2} frequencies in float32, against the nearest float32 numbers: the exp form more than 3 ulps "
      "off at its worst, the power form at most 1 (d = 64; also at d = 32 and 128); at d = 48, 80 and 96 both more "
      "than 2")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The library makes a fixed number of tensor operations, one `sin` and one `cos` over the whole
# (n, d/2) angle grid, and no Python work per entry, whatever n and d are. `RecordCalls` records
# every torch call it makes: more of them than the builder's (22 against 7: small ones such as dtype
# conversions and the d/2 frequencies). Our reading, not checked: the number of calls is not what costs
# here; the work per entry is, and the builder does its per-entry work in the interpreter.

# %% slideshow={"slide_type": "fragment"}
counts = {}
for size in [(10, 8), (200, 64), (2048, 512)]:
    with RecordCalls() as rec:
        pl.sinusoidal_positions(*size)
    names = [call.name for call in rec.calls]
    counts[size] = (len(names), names.count("sin"), names.count("cos"))
assert len(set(counts.values())) == 1 and counts[(10, 8)][1:] == (1, 1)
assert counts[(n, d)][0] == 22 and len(torch_calls) == 7  # more calls than the builder, a fixed number
print("torch calls (total, sin, cos) per size:", counts)

# %% [markdown] slideshow={"slide_type": "fragment"}
# Timing. Both make one `sin` and one `cos` call over the whole table. What separates them, in our reading: the
# builder's Python work per entry, n·d = 12 800 angle expressions in the interpreter and a nested
# list of as many Python floats that `torch.tensor` must read one by one. The next cell times the builder
# next to the library on your machine, and those two parts of the builder apart (the control; the parts need not add
# up: the rest, the strided sin/cos assignments and noise, is not timed). It asserts nothing, because a time is not the same on two
# machines; the counts above are the claim. Other programs running at the same time can only add
# time to a block of calls, so the cell compares each function's fastest block, the least disturbed,
# and reads only a difference of many times: it prints "more than 5 times slower" when the
# builder's fastest block takes over 5 times the library's, and "not separated on this run"
# otherwise.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: wall-clock timings differ on every run and machine
angle_list = [[angle_003(m, c, d) for c in range(d)] for m in range(n)]
steps_003 = {
    "003's builder": lambda: builder_003(n, d),
    "pl.sinusoidal_positions (vectorised)": lambda: pl.sinusoidal_positions(n, d),
    "  its part: the nested list of angles alone": lambda: [[angle_003(m, c, d) for c in range(d)] for m in range(n)],
    "  its part: torch.tensor on that list, prebuilt": lambda: torch.tensor(angle_list, dtype=torch.float32),
}
print(f"n = {n}, d = {d}; milliseconds per call in each function's fastest block")
fastest = {}
for name, fn in steps_003.items():
    fastest[name] = block_ms(fn, min_run_time=1.0)[0]  # blocks over 1 s: more for the slow builder
    print(f"{name:48s} {fastest[name]:.2g} ms")
slow, fast, in_python, to_tensor = fastest.values()
print("003's builder:", "more than 5 times slower" if slow > 5 * fast else "not separated on this run")
print(f"of the builder's time on this run: the nested list {in_python / slow:.0%}, torch.tensor on it {to_tensor / slow:.0%}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Dense R_m against cos/sin tables
#
# **The lesson, first**: RoPE is elementwise, so its arithmetic is cheap and the bytes it moves set a floor on its
# cost; the fast form makes one pass over x and reads cached tables. That floor is what this appendix counts, not a
# time: on a GPU (§5, quoted) the kernel's time came close to it at L = 16384.
#
# Chapter 5 (§11) showed that building the d × d matrix R_m for every position stores d times
# more numbers than the cos and sin tables `apply_rope` uses, and gives the same result. It also
# does more arithmetic: a d × d matrix times a vector is d² multiplications per position, while a
# rotation needs 4 per pair, 2d per position: d/2 = 32 times fewer at d = 64. The next cell
# counts both, for L = 1024 positions: the product's with torch's `FlopCounterMode` (which counts a
# multiply-add as 2 operations), the rotation's as the entries of the `aten::mul` operators of chapter 5's
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
rotation = record(lambda: pl.rotate_pairs(xs, angles.cos(), angles.sin()))
rotation_mults = sum(op.size for op in rotation if op.name == "aten::mul.Tensor")
assert dense_mults == L * d * d and rotation_mults == 2 * L * d and dense_mults == (d // 2) * rotation_mults
print(f"same result; the dense form holds {R_all.numel():,} numbers (the input {xs.numel():,}) and makes "
      f"{dense_mults:,} multiplications, the rotation {rotation_mults:,}: {dense_mults // rotation_mults} times fewer")

# %% [markdown] slideshow={"slide_type": "fragment"}
# So the dense form loses on both counts: d times the memory, d/2 times the multiplications. It also
# loses a third count, the bytes it moves: the product reads every matrix R_m, 64 times x's bytes, one matrix entry
# per multiply-add, and reads x and writes its result: 33 one-pass bounds (66 times x's bytes), where a rotation
# from tables makes one.

# %% slideshow={"slide_type": "fragment"}
R_cpu, xs_cpu = R_all.cpu(), xs.cpu()  # counted on the CPU, where torch runs the product as one operator
dense_ops = record(lambda: (R_cpu @ xs_cpu.unsqueeze(-1)).squeeze(-1))
x_bytes = xs.numel() * xs.element_size()
assert [op.name for op in dense_ops if op.name != "aten::_unsafe_view"] == ["aten::bmm"]  # the product, one operator
dense_bytes = 2 * x_bytes * bounds(dense_ops, xs_cpu)[1]
assert dense_bytes == R_all.numel() * 4 + 2 * x_bytes == 66 * x_bytes  # every R_m read, x read, result written
assert dense_mults == R_all.numel()  # one multiply-add per matrix entry read (4 bytes)
assert bounds(dense_ops, xs_cpu)[1] == 33  # in one-pass bounds of x (x read once, written once)
print(f"the dense product moves {bounds(dense_ops, xs_cpu)[1]:g} one-pass bounds, {dense_bytes / x_bytes:.0f} times x's "
      f"bytes ({dense_bytes / 2**20:.2f} MiB)")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. Counting calls and bytes
#
# Where the section goes: the floor (one pass over x), then the operators and bytes of six forms of one forward
# rotation, the plain form, source 001's, the library's torch path and its C kernel, Hugging Face's and the complex
# form, side by side at the end with their tables; last, where the C kernel pays off on the CPU.
#
# **Why one pass is the goal.** Rotating a pair is 4 multiplications and 2 additions, 6 operations,
# and in bf16 (bfloat16, a 16-bit float with float32's 8 exponent bits and 7 mantissa bits; §3's first cell checks
# both) it reads 2 values and writes 2: 8 bytes, under one operation per byte. An H100 does
# about 10 separate float32 multiplications or additions in the time its memory moves one byte
# (NVIDIA's data sheet for the SXM card: 67 TFLOPS, which counts a fused multiply-add as two, against
# 3.35 TB/s). So on a GPU the arithmetic is nearly free, and for large tensors the bytes set the floor.
# In the standard words: RoPE's arithmetic intensity (operations per byte, here under one) is far below the
# roofline's ridge point (about 10 on the H100), so it is memory-bound.
# A copy (`clone`) reads x once and writes it once: exactly one one-pass bound (the cell checks it). That is the
# floor of a standalone RoPE operator that computes its cos and sin in registers; one that reads tables moves them
# too, and one fused into the projection or into attention need not write the rotated x at all (both in §4). So a
# copy's time is the yardstick (§5 quotes two GPU runs against it).

# %% [markdown] slideshow={"slide_type": "fragment"}
# From here on x is `xb`, a bf16 x of 8 heads, 1024 positions and 128 features (2 MiB), and every byte count is in
# one-pass bounds of it, 4 bytes per entry. A count of bytes is a floor, not a prediction of time: each call also has a fixed cost, and small tensors may sit in a cache. Both
# weigh on the CPU here, where x is 2 MiB, so the bytes counted from here on model what GPU-sized tensors
# cost, not a CPU time. They count a strided view by the elements it shows: `x[..., ::2]` is half of x. Memory moves
# whole cache lines (a GPU whole sectors), so a read of the even features alone, or of the odd ones (as 003's and
# 001's forms below do), moves about all of x; the counts leave that out.
#
# A bf16 x is where the plain form makes two extra passes, a float32 copy in and a bf16 copy out.
# Written with torch operations, `x·cos − y·sin` is one call per operation: the products, the
# difference, the `stack`/`cat` that puts the pairs back, and those two copies. Each reads and writes
# whole tensors, and a float32 temporary moves twice the bytes per entry of the bf16 x. So we count
# both: operators (here one per call), and bytes in units of the bound.
#
# `pl.apply_rope` keeps chapter 5's formula as its reference (`pl.rotate_pairs`, in
# `posenc_lib/rope.py`) and hands the rotation to the fastest path that applies. One function chooses,
# `posenc_lib.rotary.rotate`; on the CPU it has three to choose from:
#
# - **The reference itself**, for a tensor of fewer than `rotary.SMALL` = 16 384 elements, such as
#   chapter 5's 5 × 4 example (`SMALL` is read off measurements quoted at the end of this section).
#   Single-sequence decoding is such a case: one new position of a Llama-sized query, (1, 32, 1, 128), is
#   4 096 elements (a batch of four sequences reaches `SMALL`), so this section's counts are about prefill (the pass over a prompt's
#   tokens before decoding) and training. A decoding step rotates only the new token's q and k: the KV cache
#   stores keys already rotated.
# - **A C kernel**, where the machine has a C compiler and x is contiguous, in float32 or bfloat16
#   (with float32 tables): a small loop in C, `posenc_lib/kernels/csrc/rope_kernel.c` (built on first
#   use), registered as the torch operator `torch.ops.posenc.rope_rotate`. It is written to read each pair
#   once, rotate it in float32 in registers and write it once. Its backward pass is the same loop rotating
#   by −angle (§4).
# - **A torch path** otherwise (no compiler, `POSENC_CPU_KERNEL=0`, or an x the C kernel does not
#   take; `posenc_lib/kernels/torch_fast.py`), when no gradient is needed; with one, the reference.
#   Interleaved, it is one complex multiply, x·e^{i·angle}; half, a multiply, then a multiply-add into
#   that result (`addcmul_`), whose sum may round differently from the plain form's separate steps. A bf16
#   input is copied to float32 on the way in and back to bf16 on the way out.
#
# The next cell checks both fast paths against the plain form: the C kernel bit for bit (where there is
# one, compiled with no fused multiply-add); the torch path within `torch.testing.assert_close`'s
# tolerances, and, on x86-64, bit for bit in the interleaved layout (our explanation, not checked: torch's
# vectorised complex multiply there rounds each product and the difference apart, and on other CPUs a compiler may
# fuse them); and that the small example and a single-sequence decoding step never reach the C operator. The cell
# after it prints the C kernel's inner loop, read from its source file as it runs: for each pair (members at `IA`
# and `IB`: 2j and 2j + 1, or j and j + d/2), two loads (`LOAD` widens bf16 to float32), the rotation in float32,
# two stores (`STORE` rounds back to bf16).

# %% slideshow={"slide_type": "fragment"}
xb = torch.randn(8, L, 128).to(torch.bfloat16)  # 8 heads of a bf16 model
ab = pl.rope_angles(L, 128)
assert xb.numel() * xb.element_size() == 2 * 2**20 and 2 * xb.element_size() == 4  # 2 MiB; a bound: 4 bytes an entry
assert bounds(record(xb.clone), xb) == (1, 1.0)  # a copy: exactly one one-pass bound
bf16, f32 = torch.finfo(torch.bfloat16), torch.finfo(torch.float32)
assert bf16.bits == 16 and bf16.eps == 2**-7  # 7 mantissa bits: the step just above 1 is 2^-7
assert (bf16.tiny, bf16.max > 3e38) == (f32.tiny, f32.max > 3e38)  # float32's 8 exponent bits: the same range
assert round(67e12 / 2 / 3.35e12) == 10  # the H100's data sheet, quoted: separate operations per byte moved


on_x86 = platform.machine() in ("x86_64", "AMD64")  # where the interleaved torch path is checked bit for bit
for x_in in (xb, xb.float()):
    for layout in ("interleaved", "half"):
        plain_form = pl.rotate_pairs(x_in.float(), ab.cos(), ab.sin(), layout).to(x_in.dtype)
        by_torch = torch_fast.rotate(x_in, ab.cos(), ab.sin(), layout)  # the torch path, on any machine
        torch.testing.assert_close(by_torch, plain_form)  # the dtype's tolerances: a sum may round differently
        if on_x86:  # interleaved: the plain form's arithmetic, on x86-64
            assert torch.equal(by_torch, plain_form) or layout == "half"
        if cpu_kernel.available():  # one C loop, bit for bit the plain form
            assert torch.equal(pl.apply_rope(x_in, layout=layout), plain_form)
        else:  # no C compiler: the torch path
            assert torch.equal(pl.apply_rope(x_in, layout=layout), torch_fast.rotate(x_in, ab.cos(), ab.sin(), layout))
small_ops = record(lambda: pl.apply_rope(torch.randn(5, 4)))  # chapter 5's size: the reference rotates it
assert 5 * 4 < SMALL == 16384 <= xb.numel() and not any("rope_rotate" in op.name for op in small_ops)
decode_step = torch.randn(1, 32, 1, 128)  # one new position of a Llama-sized query, 1000 tokens in
decode_ops = record(lambda: pl.apply_rope(decode_step, torch.tensor([1000])))
assert decode_step.numel() == 4096 < SMALL and not any("rope_rotate" in op.name for op in decode_ops)
assert 4 * decode_step.numel() == SMALL  # a batch of four decoding sequences is no longer small
print("against rotate_pairs in float32, for bf16 and float32 inputs and both layouts: the C kernel bit for bit "
      "(where it is built); "
      + ("the torch path bit for bit (interleaved) or up to rounding (half)" if on_x86 else
         "the torch path up to rounding (bit for bit in the interleaved layout: not checked on this CPU)"))

# %% slideshow={"slide_type": "fragment"}
from pathlib import Path

c_source = (Path(cpu_kernel.__file__).parent / "csrc" / "rope_kernel.c").read_text()  # the file the kernel is built from
inner_loop = c_source[c_source.index("#define ROTATE"):c_source.index("#define ID(")].rstrip()
assert "float first = a * cj - b * sj;" in inner_loop and "float second = a * sj + b * cj;" in inner_loop
print("--- posenc_lib/kernels/csrc/rope_kernel.c: the inner loop, as the file has it now ---")
print("\n".join(line.rstrip(" \\") for line in inner_loop.splitlines()))
print("--- end ---")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **The question: how many passes over x-sized data does each way of writing the rotation make?** The cell counts
# with `bounds(ops, x, x_sized_only=True)`, `bounds`' one choice, forward only: tensors under half of x (one member of every pair) are left
# out, which leaves out the tables. Why half: the half layout's rotation works on x's halves, and those must count.
# The tables are left out by that size, not by name: a (seq, d/2) table has 1/16 of the entries of x's 8 heads, under
# the threshold, but would reach it with one head (the cell checks both). This section's last table adds them back.

# %% slideshow={"slide_type": "fragment"}
def passes(fn, x: torch.Tensor) -> tuple[int, float]:
    """(operators, bytes in one-pass bounds of x) of fn() on x-sized data."""
    return bounds(record(fn), x, x_sized_only=True)


table_row = torch.ones(1024)  # 1/8 of the entries of ones (8, 1024), read with it
assert bounds(record(lambda: ones * table_row), ones) == (1, 1 + 1 / 16)  # every byte: the table too
assert passes(lambda: ones * table_row, ones) == (1, 1.0)  # passes over x only


def plain(x: torch.Tensor) -> torch.Tensor:
    return pl.rotate_pairs(x.float(), ab.cos(), ab.sin(), "half").to(x.dtype)


xf = xb.float()
assert xb.shape[0] == 8 and 16 * ab.cos().numel() == xb.numel()  # the tables: 1/16 of x, under the threshold
assert ab.cos().numel() >= xb[:1].numel() // 2  # with one head a table would reach it


def per_path(x: torch.Tensor) -> dict[str, tuple[int, float]]:
    """passes of apply_rope's half-layout rotation of x on each path, counted on any machine: the torch path with
    the C kernel switched off, the C operator on the meta device (its registered shapes, no data)."""
    with cpu_kernel.use_cpu_kernel(False):
        counts = {"torch path": passes(lambda: pl.apply_rope(x, layout="half"), x)}
    on_meta = [t.to("meta") for t in (x, ab.cos(), ab.sin())]
    counts["C kernel"] = passes(lambda: torch.ops.posenc.rope_rotate.default(*on_meta, interleaved=False,
                                                                              inverse=False), x)
    this_machine = counts["C kernel" if cpu_kernel.available() else "torch path"]
    assert passes(lambda: pl.apply_rope(x, layout="half"), x) == this_machine  # the path this machine takes
    return counts


# bf16 x, bytes per entry of x: float32 copy in 2 + 4; 4 products over half the entries, 2 + 2 each (float32
# read and written); the difference and the sum, 4 + 2 each; the cat 4 + 4; the bf16 copy back 4 + 2:
# 48 bytes, 12 bounds of 4 bytes
plain_counts = {xb.dtype: passes(lambda: plain(xb), xb), xf.dtype: passes(lambda: plain(xf), xf)}
assert plain_counts[xb.dtype] == (9, 12.0)
# the C operator reads x and writes the result once; the torch path copies in (2 + 4, its float32 buffer written,
# not read), multiplies (2 + 4),
# multiplies and adds into that result (2 + 4 read, 4 written) and copies out (4 + 2): 28 bytes, 7 bounds.
# Four calls because xb's float32 copy (4 MiB) fits one of the torch path's chunks (8 MiB, torch_fast's
# _CHUNK_BYTES): a larger x makes four calls per chunk
assert xb.numel() * 4 <= torch_fast._CHUNK_BYTES
path_counts = {xb.dtype: per_path(xb), xf.dtype: per_path(xf)}
assert path_counts[xb.dtype] == {"torch path": (4, 7.0), "C kernel": (1, 1.0)}
# a float32 x needs no copies: the plain form's 7 calls are 36 bytes per entry, 4.5 bounds of 8 bytes
assert plain_counts[xf.dtype] == (7, 4.5) and path_counts[xf.dtype] == {"torch path": (2, 2.0), "C kernel": (1, 1.0)}
for x_in, label in ((xb, "bf16 x:   "), (xf, "float32 x:")):
    (c_calls, c_bounds), (t_calls, t_bounds) = (path_counts[x_in.dtype][path] for path in ("C kernel", "torch path"))
    print(f"{label} plain form {plain_counts[x_in.dtype][0]} operators, {plain_counts[x_in.dtype][1]:g} bounds of bytes "
          f"({plain_counts[x_in.dtype][1] * 2 * x_in.element_size():g} B per entry); "
          f"apply_rope {c_calls} operator, {c_bounds:g} bound on the C kernel ({t_calls} operators, {t_bounds:g} bounds "
          "on the torch path)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Chapter 5 (§6d) sent source 003's RoPE here. It builds an interleaved [sin, cos] table, expands
# it to (batch, heads, seq, d) and only then pulls cos and sin out with `repeat_interleave(2)`, every
# value twice: so its cos and sin are each as large as all of x, one copy per head, on every call,
# where the plain form's are (seq, d/2), shared by the heads. It also builds the swapped vector
# [−x₁, x₀, …] as one more x-sized tensor, and its products are x-sized. The cell counts every
# operator's bytes (`RecordOps`), tables included, for float32 x with one head and with §3's 8
# heads, against the plain form making its own tables, and separates the causes with a control:
# 003's form with its tables repeated before the expand, so that one copy is shared by the heads.
# The copies per head explain about 1.75 of the 2.56 bounds 003 moves beyond the plain form at 8
# heads, and none of the 2.98 at one head, where there is nothing to share. The rest, 2.98 bounds at one
# head and 0.81 at 8, comes from what 003 does with any number of heads (full-width repeated tables, the
# swapped vector, x-sized products); how it splits among those causes is not measured here.

# %% slideshow={"slide_type": "fragment"}
def rope_003(x: torch.Tensor) -> torch.Tensor:
    """Our version of source 003's RoPE (interleaved layout): repeated tables and an alternating vector."""
    seq, dim = x.shape[-2:]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * -(math.log(10000.0) / dim))
    table = torch.arange(seq, dtype=torch.float32)[:, None] * div
    table = torch.stack((table.sin(), table.cos()), dim=-1).flatten(-2)  # [sin0, cos0, sin1, cos1, ...]
    table = table.expand(*x.shape[:-2], -1, -1)  # as the source does: one copy per head, before repeating
    cos_rep, sin_rep = (table[..., i::2].repeat_interleave(2, dim=-1) for i in (1, 0))  # x's shape each
    x_alt = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).reshape(x.shape)  # [-x1, x0, -x3, x2, ...]
    return x * cos_rep + x_alt * sin_rep


def rope_003_shared(x: torch.Tensor) -> torch.Tensor:
    """The control: rope_003 with its cos and sin repeated before the expand, one copy shared by the heads."""
    seq, dim = x.shape[-2:]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * -(math.log(10000.0) / dim))
    table = torch.arange(seq, dtype=torch.float32)[:, None] * div
    table = torch.stack((table.sin(), table.cos()), dim=-1).flatten(-2)
    cos_rep, sin_rep = (table[..., i::2].repeat_interleave(2, dim=-1).expand(*x.shape[:-2], -1, -1) for i in (1, 0))
    x_alt = torch.stack((-x[..., 1::2], x[..., ::2]), dim=-1).reshape(x.shape)
    return x * cos_rep + x_alt * sin_rep


def plain_with_tables(x: torch.Tensor) -> torch.Tensor:
    angles = pl.rope_angles(x.shape[-2], x.shape[-1])
    return pl.rotate_pairs(x, angles.cos(), angles.sin(), "interleaved")


bounds_003 = {}
for heads in (1, 8):
    x_h = xf[:heads]
    # 003's exp-form frequencies are a few float32 ulps off (§1); at angles near 1000 that is about 1e-4
    torch.testing.assert_close(rope_003(x_h), plain_with_tables(x_h), atol=1e-3, rtol=0)
    assert torch.equal(rope_003_shared(x_h), rope_003(x_h))  # the control computes the same values
    for form in (rope_003, rope_003_shared, plain_with_tables):
        bounds_003[heads, form.__name__] = bounds(record(lambda: form(x_h)), x_h)[1]
assert 9.7 < bounds_003[1, "rope_003"] < 9.8 and 6.7 < bounds_003[1, "plain_with_tables"] < 6.8
assert 7.3 < bounds_003[8, "rope_003"] < 7.4 and 4.7 < bounds_003[8, "plain_with_tables"] < 4.8
gap = {h: bounds_003[h, "rope_003"] - bounds_003[h, "plain_with_tables"] for h in (1, 8)}
per_head_copies = {h: bounds_003[h, "rope_003"] - bounds_003[h, "rope_003_shared"] for h in (1, 8)}
assert per_head_copies[1] == 0 and 2.95 < gap[1] < 3.0  # one head: nothing to share, the whole gap remains
assert 1.7 < per_head_copies[8] < 1.8 and 2.55 < gap[8] < 2.6  # 8 heads: the copies per head, about 2/3 of it
rest = {h: gap[h] - per_head_copies[h] for h in (1, 8)}  # what the control leaves, not split further
assert (round(gap[1], 2), round(per_head_copies[8], 2), round(gap[8], 2)) == (2.98, 1.75, 2.56)
assert (round(rest[1], 2), round(rest[8], 2)) == (2.98, 0.81)
print("every byte, tables included, in one-pass bounds (float32): "
      + "; ".join(f"{h} head{'s' * (h > 1)}: 003's form {bounds_003[h, 'rope_003']:.2f}, with shared tables "
                  f"{bounds_003[h, 'rope_003_shared']:.2f}, the plain form {bounds_003[h, 'plain_with_tables']:.2f}"
                  for h in (1, 8)))
print(f"of 003's excess over the plain form, the copies per head are {per_head_copies[1]:.2f} of {gap[1]:.2f} "
      f"(1 head) and {per_head_copies[8]:.2f} of {gap[8]:.2f} (8 heads)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Hugging Face's `apply_rotary_pos_emb` (transformers' Llama) does the half layout's rotation another
# way, and it is worth seeing why it moves fewer bytes than the plain form. It takes its cos and sin
# tables from the caller, already in the model's dtype, and computes in that dtype. In a Llama model
# the caller is the model's `LlamaRotaryEmbedding`: on every forward pass it computes cos and sin once
# for all the layers, in float32, and casts them to the model's dtype (the cell checks both, its output against
# the float32 computation cast to bf16). For a bf16 model, then, every
# product and the sum of the rotation are rounded to bf16, where the plain form, the C kernel and the
# torch path compute in float32 and round once at the end. No float32 temporaries, so fewer bytes;
# but less precision. The angles themselves it computes in float32 (it converts the positions and the
# frequencies before multiplying), as it must: with 8 significant bits, bf16 cannot hold every integer
# above 256, so positions 0 to 299 in bf16 keep only 279 distinct values (the cell checks it). The next cell counts the sines and cosines of a small two-layer Llama (random
# weights, built here from its configuration) over two forward passes.

# %% slideshow={"slide_type": "fragment"}
from transformers import LlamaConfig, LlamaModel

with torch.random.fork_rng():  # its random initial weights leave the notebook's random numbers as they were
    llama = LlamaModel(LlamaConfig(vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                                   num_attention_heads=4, num_key_value_heads=2)).to(torch.bfloat16)
with RecordOps() as llama_ops:
    for _ in range(2):
        llama(torch.arange(10)[None])
trig = [op.name for op in llama_ops.ops if op.name in ("aten::cos", "aten::sin")]
assert trig == ["aten::cos", "aten::sin"] * 2  # once per forward pass, for both layers; again on the next pass
cos_given, _ = llama.rotary_emb(torch.zeros(1, 10, 64, dtype=torch.bfloat16), torch.arange(10)[None])
assert cos_given.dtype == torch.bfloat16  # what the layers receive
assert torch.arange(257, dtype=torch.bfloat16).unique().numel() == 257  # 0 to 256: exact in bf16
assert torch.arange(300, dtype=torch.bfloat16).unique().numel() == 279  # above 256: repeats
positions = torch.arange(300)
cos_300, sin_300 = llama.rotary_emb(torch.zeros(1, 300, 64, dtype=torch.bfloat16), positions[None])
inv_freq = llama.rotary_emb.inv_freq  # the module's frequencies, as it holds them
angles_32 = positions.float()[:, None] * inv_freq.float()  # positions and frequencies converted, then multiplied
angles_16 = positions.to(torch.bfloat16)[:, None] * inv_freq.to(torch.bfloat16)  # the same in bf16
for given, fn in ((cos_300, torch.cos), (sin_300, torch.sin)):
    assert torch.equal(given[0], fn(torch.cat((angles_32, angles_32), -1)).to(torch.bfloat16))  # float32, then cast
    assert not torch.equal(given[0], fn(torch.cat((angles_16, angles_16), -1)))  # not the bf16 computation
print("two forward passes of a two-layer Llama: one cos and one sin each, handed to every layer in bf16; "
      "its cos and sin equal the float32 computation cast to bf16, not the bf16 one")

# %% [markdown] slideshow={"slide_type": "fragment"}
# Now the rotation itself: its operators and bytes per rotated tensor (it rotates a query and a key in one
# call: we hand it x for both and halve), and its precision against float64. Its error has two
# causes: the tables, rounded to bf16 before any arithmetic, and the arithmetic, rounded to bf16 after
# every product and the sum. The cell adds them one at a time, with a third form: the plain rotation in float32
# on Hugging Face's bf16 tables, so only the tables are rounded. The yardstick is half a bf16 step of
# the exact answer: bf16 keeps 8 significant bits (`torch.finfo(torch.bfloat16).eps` = 2⁻⁷, the
# spacing just above 1), so a value v with 2^e ≤ |v| < 2^(e+1) has bf16 neighbours 2^(e−7) apart, and
# rounding it once to bf16 lands within half that, 2^(e−8).

# %% slideshow={"slide_type": "fragment"}
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

cos_b, sin_b = (torch.cat((t, t), dim=-1).to(xb.dtype) for t in (ab.cos(), ab.sin()))  # the caller's bf16 tables


def hf_rope(x: torch.Tensor) -> torch.Tensor:
    """transformers' rotation of x as a query (and as a key: both returned). unsqueeze_dim=0: the tables are
    (L, d) and x (heads, L, d), so they broadcast after adding an axis in front (older releases took a
    position_ids argument in this place)."""
    return apply_rotary_pos_emb(x, x, cos_b, sin_b, unsqueeze_dim=0)


hf_calls, hf_bounds = passes(lambda: hf_rope(xb), xb)
assert (hf_calls / 2, hf_bounds / 2) == (5, 5.0)  # per tensor: 5 operators, 5 bounds, against the plain form's 9 and 12
assert torch.finfo(torch.bfloat16).eps == 2**-7
exact = pl.apply_rope(xb.double(), layout="half")  # float64 angles and arithmetic
half_step = 2.0 ** (torch.floor(torch.log2(exact.abs().clamp_min(2**-126))) - 8)  # half a bf16 step of the answer
rounded_tables_only = pl.rotate_pairs(xb.float(), cos_b[:, :64].float(), sin_b[:, :64].float(), "half").to(xb.dtype)
outputs = {"apply_rope": pl.apply_rope(xb, layout="half"), "bf16 tables, float32 arithmetic": rounded_tables_only,
           "transformers": hf_rope(xb)[0]}
off = {name: ((out.double() - exact).abs() > half_step * (1 + 1e-9)).double().mean().item()
       for name, out in outputs.items()}
largest = {name: (out.double() - exact).abs().max().item() for name, out in outputs.items()}
assert off["apply_rope"] < 0.01 < 0.25 < off["bf16 tables, float32 arithmetic"] < off["transformers"] - 0.05
assert off["transformers"] > 0.3 and largest["transformers"] > largest["apply_rope"]
print("apply_rotary_pos_emb: 5 operators and 5 bounds of bytes per tensor (the plain form: 9 and 12)")
print("entries more than half a bf16 step from the float64 answer: under 1 % for apply_rope (which rounds once), "
      "over 25 % with bf16 tables and float32 arithmetic, over 30 % for apply_rotary_pos_emb (bf16 tables and "
      "arithmetic): the bf16 tables alone already put over a quarter of the entries off, rounding the arithmetic too puts "
      "more off; transformers' largest error is above apply_rope's too")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Sources 000 and 003 rotate in complex numbers, the form source 003 attributes to Llama's code. A table
# `freqs_cis = torch.polar(torch.ones_like(freqs), freqs)` holds e^{i·angle} (complex64, made once);
# x is copied to float32, each pair (2j, 2j + 1) is viewed as one complex number (`view_as_complex`),
# multiplied by the table, viewed back as pairs of reals (`view_as_real`, `flatten`) and copied back to
# x's dtype (the sources write `type_as(x)`; we write `.to(x.dtype)`, the same copy): the interleaved layout. The
# views move nothing. Counted on `xb`: 3 operators and 5 bounds, the float32
# copy in (2 + 4 bytes per entry), the complex product (4 + 4) and the copy back (4 + 2), as many bounds as
# Hugging Face's code in fewer operators, and 4 bounds more than the C kernel. Its result is the plain form's
# up to rounding (the cell checks it).

# %% slideshow={"slide_type": "fragment"}
def rope_complex(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """Our version of sources 000's and 003's rotation in complex numbers (interleaved layout)."""
    x_pairs = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    return torch.view_as_real(x_pairs * freqs_cis).flatten(-2).to(x.dtype)  # the sources: .type_as(x)


freqs_cis = torch.polar(torch.ones_like(ab), ab)  # (L, 64) complex64, once
assert freqs_cis.dtype == torch.complex64
torch.testing.assert_close(rope_complex(xb, freqs_cis), pl.rotate_pairs(xb.float(), ab.cos(), ab.sin()).to(xb.dtype))
complex_counts = passes(lambda: rope_complex(xb, freqs_cis), xb)
assert complex_counts == (3, 5.0) and complex_counts[1] == hf_bounds / 2 and complex_counts[0] < hf_calls / 2
assert complex_counts[1] - path_counts[xb.dtype]["C kernel"][1] == 4
print(f"the complex form on bf16 xb: {complex_counts[0]} operators, {complex_counts[1]:g} bounds")

# %% [markdown] slideshow={"slide_type": "fragment"}
# Source 001 writes the interleaved rotation on views of the even and odd features, `x[..., ::2]` and
# `x[..., 1::2]` (no data moved): four products with the (seq, d/2) tables, a difference and a sum, a `stack` into
# (…, 2, d/2), and two einops `rearrange` calls that put each pair back together, a transpose (a view) and then a
# reshape of that non-contiguous view, which must copy. Our version writes the two as `transpose` and `reshape` (the
# same operations, without einops). The source takes its tables as (x, sin, cos), sin first, and never converts
# back: given a bf16 x and float32 tables, its result is float32. Counted on `xb`: 8 operators
# and 10 bounds, against the plain form's 9 and 12. It makes neither of the plain form's copies (float32 in, bf16
# out), but its reshape copies all of x once more, in float32. Its result is the plain form's in float32, bit for
# bit (the cell checks it). Charged the whole span of x its four strided reads lie in (whole cache lines), it makes
# 11 bounds, still below the plain form's 12 (checked).

# %% slideshow={"slide_type": "fragment"}
def rope_001(x: torch.Tensor, sin: torch.Tensor, cos: torch.Tensor) -> torch.Tensor:
    """Our version of source 001's apply_rotary_pos_emb (interleaved layout); its rearranges as transpose, reshape."""
    x_even, x_odd = x[..., ::2], x[..., 1::2]
    odds = cos * x_even - sin * x_odd  # the source's names
    evens = sin * x_even + cos * x_odd
    stacked = torch.stack((odds, evens), -2)  # (..., seq, 2, d/2)
    return stacked.transpose(-2, -1).reshape(*x.shape)  # (..., seq, d/2, 2), then (..., seq, d): a copy


out_001 = rope_001(xb, ab.sin(), ab.cos())
assert out_001.dtype == torch.float32 and torch.equal(out_001, pl.rotate_pairs(xb.float(), ab.cos(), ab.sin()))
counts_001 = passes(lambda: rope_001(xb, ab.sin(), ab.cos()), xb)
assert counts_001 == (8, 10.0) and plain_counts[xb.dtype] == (9, 12.0)
ops_001 = [op.name for op in record(lambda: rope_001(xb, ab.sin(), ab.cos()))]
assert "aten::_to_copy" not in ops_001 and ops_001.count("aten::clone") == 1  # no dtype copy; the reshape copies
strided_001 = sum(nbytes for op in record(lambda: rope_001(xb, ab.sin(), ab.cos())) if op.name == "aten::mul.Tensor"
                  for n, nbytes in op.read if n == xb.numel() // 2 and nbytes == n * xb.element_size())  # x[..., ::2]
assert counts_001[1] + strided_001 / (2 * xb.nbytes) == 11 < plain_counts[xb.dtype][1]  # each read at its whole span
print(f"001's form on bf16 xb: {counts_001[0]} operators, {counts_001[1]:g} bounds; its result {out_001.dtype}")

# %% [markdown] slideshow={"slide_type": "fragment"}
# §3's forward counts side by side, in one-pass bounds of `xb`, tables left out. Counting every byte instead (the
# tables, and their making where the call makes them) adds 1/8 for Hugging Face and the complex form, 1/2 for the plain form and 001's (here they make cos and sin
# in the call), 1.19 for the torch path, and changes no place among them (the cell checks it; the C kernel's tables
# come after §4's exercise). The torch path's 1.19: on every call it makes cos and sin (1/4), then two stacked
# full-width tables, `stack` of cos and sin and of −sin and cos after a `neg` (0.63 to make), which the rotation
# reads (1/4); the angles make the rest:

# %% slideshow={"slide_type": "fragment"}
forward_bounds = {"plain form": plain_counts[xb.dtype][1], "001's form (float32 result)": counts_001[1],
                  "torch path": path_counts[xb.dtype]["torch path"][1],
                  "Hugging Face": hf_bounds / 2, "complex form": complex_counts[1],
                  "C kernel": path_counts[xb.dtype]["C kernel"][1]}
assert list(forward_bounds.values()) == [12, 10, 7, 5, 5, 1]


def small_part(ops: list[Call], x: torch.Tensor) -> float:
    """What x_sized_only leaves out: every byte less the passes over x, in one-pass bounds of x."""
    return bounds(ops, x)[1] - bounds(ops, x, x_sized_only=True)[1]


def small_bounds(fn, x: torch.Tensor) -> float:
    return small_part(record(fn), x)


with cpu_kernel.use_cpu_kernel(False):
    torch_path_ops = record(lambda: pl.apply_rope(xb, layout="half"))
small_torch_path = small_part(torch_path_ops, xb)
table_bounds = {"plain form": small_bounds(lambda: plain(xb), xb),
                "001's form (float32 result)": small_bounds(lambda: rope_001(xb, ab.sin(), ab.cos()), xb),
                "torch path": small_torch_path, "Hugging Face": small_bounds(lambda: hf_rope(xb), xb) / 2,
                "complex form": small_bounds(lambda: rope_complex(xb, freqs_cis), xb)}  # the C kernel's: after §4's exercise
assert table_bounds["Hugging Face"] == table_bounds["complex form"] == 1 / 8
assert table_bounds["plain form"] == table_bounds["001's form (float32 result)"] == 1 / 2
assert round(table_bounds["torch path"], 2) == 1.19
torch_path_split = {part: small_part([op for op in torch_path_ops if op.name in names], xb)
                    for part, names in (("cos and sin", {"aten::cos", "aten::sin"}),
                                        ("stacked tables made", {"aten::stack", "aten::neg"}),
                                        ("stacked tables read", {"aten::mul.out", "aten::addcmul_"}))}
assert [round(b, 2) for b in torch_path_split.values()] == [0.25, 0.63, 0.25]
assert 0 < table_bounds["torch path"] - sum(torch_path_split.values()) < 0.07  # the angles (arange, pow, mul)
with_tables = [forward_bounds[name] + table_bounds[name] for name in table_bounds]
assert with_tables == sorted(with_tables, reverse=True) and with_tables[3] == with_tables[4]  # the same ranking
print("one forward rotation of the bf16 xb, in one-pass bounds: "
      + ", ".join(f"{name} {bounds:g}" for name, bounds in forward_bounds.items()))
print("with the tables added back: " + ", ".join(f"{name} {bounds:.3g}" for name, bounds in zip(table_bounds, with_tables))
      + "; the same ranking")
print("the torch path's 1.19: " + ", ".join(f"{part} {b:.2f}" for part, b in torch_path_split.items()))

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Where the C kernel pays off.** `SMALL` = 16 384 is a choice, one threshold for both layouts, set by the half
# layout: below it the half layout's kernel did not reliably win in one run (float32's ratios 0.93 to 1.18 up to
# `SMALL`, 7 of its 10 within 14 % of 1); above it every ratio was below 1. The interleaved
# layout's ratios (forward: 0.62 and 0.47 at 4 096 and 8 192 elements in float32, 0.57 and 0.44 in bf16) suggest a
# lower threshold for it alone: one run. The spread between runs is at least 14 % (0.65 bounds over the largest
# time, 4.59), the README's only one, from large tensors; at small sizes it was not measured. The figure: the kernel's time over the reference's, x of (4, seq, 64), the median of 5 paired rounds on
# one loaded 2-core VM, typed from `make bench` (`benchmarks/README.md`, "Where the C kernel pays off";
# `tests/test_check_ch10.py` checks every number against it).

# %% slideshow={"slide_type": "fragment"}
# quoted from benchmarks/README.md ("Where the C kernel pays off"), elements -> (the reference's time, interleaved,
# in µs; the kernel's time over the reference's: interleaved, half, forward + backward interleaved, and half)
small_bench = {"float32": {256: (16.3, 0.90, 1.13, 1.04, 1.18), 1024: (17.9, 0.83, 1.11, 1.02, 1.18),
                           4096: (24.9, 0.62, 1.08, 0.89, 1.16), 8192: (33.7, 0.47, 0.99, 0.77, 1.12),
                           16384: (51.0, 0.34, 0.93, 0.59, 0.96), 65536: (101.5, 0.20, 0.48, 0.23, 0.33)},
               "bfloat16": {256: (18.9, 0.78, 0.96, 0.90, 1.01), 1024: (21.4, 0.71, 0.92, 0.88, 1.01),
                            4096: (28.9, 0.57, 0.90, 0.78, 0.98), 8192: (38.0, 0.44, 0.82, 0.67, 0.93),
                            16384: (57.5, 0.32, 0.73, 0.52, 0.82), 65536: (132.3, 0.17, 0.29, 0.21, 0.28)}}
# two runs of the same code, large tensors: spread up to 0.65x the bound, times up to 4.59x ("When rope.py became ...")
run_spread, largest_time = 0.65, 4.59
bench_rows = [(dtype, size, row) for dtype, by_size in small_bench.items() for size, row in by_size.items()]
measured_sizes = [2**k for k in range(8, 17)]  # bench_rope.SMALL_SIZES (tests/test_check_ch10.py checks it)
assert sorted(set(measured_sizes) - set(small_bench["float32"])) == [512, 2048, 32768]  # measured, not shown
above_small = [row[j] for _, size, row in bench_rows if size > SMALL for j in range(1, 5)]
assert SMALL == 16384 and max(above_small) < 1  # above SMALL, every ratio below 1
assert round(run_spread / largest_time, 2) == 0.14  # the README's spread: 14 % or more of the time
f32_half_near = [r for size, row in small_bench["float32"].items() if size <= SMALL for r in row[2::2]]
assert (min(f32_half_near), max(f32_half_near), len(f32_half_near)) == (0.93, 1.18, 10)
assert sum(abs(r - 1) <= 0.14 for r in f32_half_near) == 7  # not separated from 1 by such a spread
interleaved_below = {dtype: [small_bench[dtype][size][1] for size in (4096, 8192)] for dtype in small_bench}
assert interleaved_below == {"float32": [0.62, 0.47], "bfloat16": [0.57, 0.44]}  # the interleaved layout, forward
assert all(1 - r > 0.14 for rs in interleaved_below.values() for r in rs)  # each a win beyond that spread
print(f"quoted, {len(small_bench['float32'])} of {len(measured_sizes)} measured sizes: float32's half layout up to "
      f"{SMALL}: ratios {min(f32_half_near)} to {max(f32_half_near)}, {sum(abs(r - 1) <= 0.14 for r in f32_half_near)} "
      f"of {len(f32_half_near)} within 0.14 of 1; above {SMALL}: every ratio below 1")
print(f"interleaved, forward, at 4096 and 8192: {interleaved_below}, each more than 0.14 below 1")
fig, axes = viz.figure(2, width=4.4, height=3.4)
columns = ("interleaved", "half", "fwd + bwd, interleaved", "fwd + bwd, half")
for ax, (dtype, by_size) in zip(axes, small_bench.items()):
    ax.axhline(1, color="0.4", lw=0.8)
    ax.axvline(SMALL, color="0.4", ls="--", lw=0.8)
    for j, (name, marker) in enumerate(zip(columns, "os^v"), start=1):
        ax.plot(list(by_size), [row[j] for row in by_size.values()], marker=marker, ms=4, lw=1, label=name)
    ax.set(xscale="log", xlabel="elements of x", ylabel="kernel time / reference time", ylim=(0, 1.3),
           title=f"{dtype} (quoted; dashed: SMALL)")
    ax.set_xticks(list(by_size), [f"{size:,}" for size in by_size], fontsize=7)
axes[0].legend(fontsize=7, loc="lower left")
fig

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
# this floor is a standalone operator's, not RoPE's. One real example, for decoding (it has no backward pass):
# FlashAttention's `flash_attn_with_kvcache`, given `rotary_cos` and `rotary_sin`, rotates q and the new k inside its
# attention kernel (its docstring, `flash_attn/flash_attn_interface.py` in Dao-AILab/flash-attention, commit 0053002).
#
# **The question: how close does a training step come to that floor of two bounds?** The cell counts passes over x
# (`x_sized_only=True`) as §3 did, over the operators of a training step, backward included. The cell counts the plain form; the C operator's step, which the
# exercise below asks about, is counted after the exercise.

# %% slideshow={"slide_type": "fragment"}
def train_step_ops(rope) -> list[Call]:
    """The operators of out = rope(q), then the gradient of <out, g> with respect to q."""
    q, grad_out = xb.clone().requires_grad_(), torch.randn(xb.shape).to(xb.dtype)
    return record(lambda: torch.autograd.grad(rope(q), q, grad_out))


def whole_tensor(ops) -> tuple[int, float]:
    """(operators, bytes in one-pass bounds of xb) on xb-sized data: passes over x."""
    return bounds(ops, xb, x_sized_only=True)


plain_ops = train_step_ops(lambda q: plain(q))
q_alone = xb.clone().requires_grad_()
with RecordOps() as plain_forward:  # the forward alone: the step's first operators
    plain(q_alone)
n_forward = len(plain_forward.ops)
assert [op.name for op in plain_ops[:n_forward]] == [op.name for op in plain_forward.ops]
# forward: one operator per call of §3's count; backward: float32 copy of g, the products and sums of the chain
# rule, two slice_backward fills for the halves, their sum, the bf16 copy back
assert whole_tensor(plain_ops[:n_forward]) == plain_counts[xb.dtype] == (9, 12.0)
assert whole_tensor(plain_ops[n_forward:]) == (12, 17.0) and whole_tensor(plain_ops) == (21, 29.0)
print(f"forward + backward on xb-sized data: the plain form {whole_tensor(plain_ops)[0]} operators, "
      f"{whole_tensor(plain_ops)[1]:g} bounds of bytes (forward {whole_tensor(plain_ops[:n_forward])[0]} operators and "
      f"{whole_tensor(plain_ops[:n_forward])[1]:g} bounds, backward {whole_tensor(plain_ops[n_forward:])[0]} and "
      f"{whole_tensor(plain_ops[n_forward:])[1]:g})")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise (prediction): the tables in a training step.** Before the next cells count the cos and sin
# tables, predict them. `pl.RotaryEmbedding`, from its second call, rotates x of shape (batch, heads, seq, d), in
# a dtype of `itemsize` bytes per entry, on the C operator, in a training step (forward and backward; g, the incoming
# gradient, has x's shape and dtype); its cos and
# sin tables, (seq, d/2) each as handed to the operator, stay float32 whatever x's dtype (the library keeps them so). Write
# `step_bounds(batch, heads, seq, d, itemsize)`: every byte the step's operators read and write, tables included,
# in one-pass bounds of that x, counted as this appendix counts (each tensor an operator reads or writes, once per
# call), as an exact number (a `fractions.Fraction` or an int). The checker asks at sizes no tensor could have (up
# to 10⁴⁰ positions), so write the count itself; it also asks at 1 and 8 bytes per entry, dtypes the C operator does
# not take, for a step that would run as this one does.

# %% slideshow={"slide_type": "fragment"}
from fractions import Fraction


def step_bounds(batch, heads, seq, d, itemsize):
    raise NotImplementedError  # your code: the step's bytes in one-pass bounds of x, exactly


_ = check.tables_in_a_step(step_bounds)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "tables_in_a_step_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
from fractions import Fraction  # outside the solution: the student's copy keeps it


def step_bounds(batch, heads, seq, d, itemsize):
    ### BEGIN SOLUTION
    # A bound is x read once and a result of its size written once: 2 * batch * heads * seq * d * itemsize bytes.
    # x and g each take one bound. The tables are per position and pair, shared by every sequence and head:
    # 2 tables * seq * d/2 entries * 4 bytes = 4 seq d bytes, read in each of the two passes: 8 seq d bytes.
    bound = 2 * batch * heads * seq * d * itemsize
    return 2 + Fraction(2 * 2 * seq * (d // 2) * 4, bound)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "tables_in_a_step", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.tables_in_a_step(step_bounds)

# %% [markdown] slideshow={"slide_type": "subslide"}
# Now the tables, which §3 left out. Each has 1/16 as many entries as x here (8 heads share a table
# row, and a pair needs one angle), in float32: 1/16 of a one-pass bound of the bf16 x each. A step on the C
# operator, in one-pass bounds (the cell checks each row):
#
# | what | `RotaryEmbedding` (from its second call) | `apply_rope` |
# |---|---|---|
# | x and g, each read once and its result written once | 2 | 2 |
# | cos and sin read, forward and backward | 1/4 | 1/4 |
# | cos and sin written (made on every call) | 0 | 1/8 |
# | angles written once, read by cos and by sin; positions and frequencies | 0 | 3/16; under 0.01 |
#
# So for this x (8 heads, bf16), a kernel that reads float32 tables, called on one tensor, can go no lower than
# 2 + 1/4 with cached tables and
# 2 + 3/8 for the stateless function; `apply_rope` also writes and reads its angles, 3/16 more (2.57 with
# positions and frequencies). Only a kernel that computes sin and cos
# itself, from the positions, gets down to 2, at the price of d/2 sines and cosines per position in
# every call. On a GPU with Triton, `pl.apply_rope` hands x to such a kernel (§5); no GPU runs here, so
# the cell checks only that hand-off, with a stand-in for the kernel. The cell first counts the C
# operator's step on x-sized tensors alone (on the meta device, so on any machine: 2 operators, 2
# bounds, the floor §4 began with). Then it asks **what a step moves all told**: every byte (`bounds` without
# `x_sized_only`), tables and angles in.

# %% slideshow={"slide_type": "fragment"}
lib_ops = train_step_ops(lambda q: pl.apply_rope(q, layout="half"))
cos_meta, sin_meta = ab.cos().to("meta"), ab.sin().to("meta")


def c_operator_step() -> list[Call]:
    """The C operator's training step on the meta device (its registered shapes, no data), so on any machine."""
    q = xb.to("meta").requires_grad_()
    with RecordOps() as rec:
        rotated = torch.ops.posenc.rope_rotate(q, cos_meta, sin_meta, interleaved=False, inverse=False)
        torch.autograd.grad(rotated, q, torch.empty_like(q))
    return rec.ops


operator_ops = c_operator_step()
# the C operator once forward, once backward: x and g each read once, written once
assert [op.name for op in operator_ops if op.size >= xb.numel() // 2] == ["posenc::rope_rotate"] * 2
assert [op.name for op in operator_ops] == ["posenc::rope_rotate"] * 2  # and nothing else: no converted copy of any input
assert whole_tensor(operator_ops) == (2, 2.0)
# apply_rope takes the C operator where it is built; without it the torch path has no backward, so autograd runs
# through the plain form
assert whole_tensor(lib_ops) == whole_tensor(operator_ops if cpu_kernel.available() else plain_ops)
print(f"forward + backward on xb-sized data, x-sized tensors only: the C operator {whole_tensor(operator_ops)[0]} "
      f"operators, {whole_tensor(operator_ops)[1]:g} bounds; apply_rope runs it where it is built, the plain form "
      "otherwise")


def all_bytes(ops) -> float:
    """Every byte the operators read and write, tables and angles included, in one-pass bounds of xb."""
    return bounds(ops, xb)[1]


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
first_big = next(i for i, op in enumerate(lib_ops) if op.size >= xb.numel() // 2)
table_making = all_bytes(lib_ops[:first_big])  # apply_rope's angles, cos and sin, before it rotates
on_c_kernel = {"RotaryEmbedding": all_bytes(operator_ops), "apply_rope": all_bytes(operator_ops) + table_making}
assert on_c_kernel["RotaryEmbedding"] == 2 + 1 / 4  # x and g once each, the tables read twice
angles_op = lib_ops[first_big - 3]  # the angles (positions times frequencies), read next by cos and by sin
assert angles_op.name == "aten::mul.Tensor" and [op.name for op in lib_ops[first_big - 2:first_big]] == ["aten::cos", "aten::sin"]
assert angles_op.written[0][1] / (2 * xb.numel() * xb.element_size()) == 1 / 16  # as large as one table
assert 3 / 16 < on_c_kernel["apply_rope"] - (2 + 3 / 8) < 3 / 16 + 0.01  # the angles, then positions and frequencies
import posenc_lib.rotary as rotary_lib

handed_to_kernel = []  # on CUDA with Triton (stood in for here), apply_rope hands x to the kernel of §5: no tables
with (mock.patch.object(rotary_lib, "_fused", lambda *args: True),
      mock.patch.object(rotary_lib, "_rope_in_kernel", lambda *args: handed_to_kernel.append(args) or (args[0], None)),
      RecordOps() as in_kernel):
    pl.apply_rope(xb)
assert len(handed_to_kernel) == 1 and trig_entries(in_kernel.ops) == 0
if cpu_kernel.available():  # the path this machine takes, measured as it runs
    assert all_bytes(second_call) == on_c_kernel["RotaryEmbedding"] and all_bytes(lib_ops) == on_c_kernel["apply_rope"]
else:  # the plain form reads the tables in each of its products (and autograd keeps them for the backward)
    assert all_bytes(second_call) > whole_tensor(plain_ops)[1] > 2 + 1 / 4
print(f"every byte of a training step, in one-pass bounds, on the C kernel: RotaryEmbedding (from its second call) "
      f"{on_c_kernel['RotaryEmbedding']:.2f}, apply_rope {on_c_kernel['apply_rope']:.2f}; "
      f"the plain form on given angles {all_bytes(plain_ops):.2f}")
print(f"cos + sin entries per training step: apply_rope {trig_entries(lib_ops)}, "
      f"RotaryEmbedding {trig_entries(first_call)} on its first call, {trig_entries(second_call)} after")
# apply_rope on the C kernel: the counts in §4's table of floors
assert path_counts[xb.dtype]["C kernel"] == (1, 1.0)
assert whole_tensor(operator_ops) == (2, 2.0) and round(on_c_kernel["apply_rope"], 2) == 2.57
# every byte of one forward call: the C operator's forward, tables read, and apply_rope's tables made
forward_on_xb = all_bytes(operator_ops[:1]) + table_making
assert all_bytes(operator_ops[:1]) == 1 + 1 / 8 and round(forward_on_xb, 2) == 1.44
if cpu_kernel.available():  # the path this machine takes, measured as it runs
    with RecordOps() as forward_ops:
        pl.apply_rope(xb, layout="half")
    assert abs(all_bytes(forward_ops.ops) - forward_on_xb) < 1e-12
# one call for q and a k as large as xb (§5's kernel): the tables read (and made) once for both, in bounds of q and k
tables_read, tables_made = all_bytes(operator_ops) - 2, written_tables / (2 * xb.numel() * xb.element_size())
assert (tables_read, tables_made) == (1 / 4, 1 / 8)
assert (2 + tables_read / 2, 2 + (tables_read + tables_made) / 2) == (2 + 1 / 8, 2 + 3 / 16)

# %% [markdown] slideshow={"slide_type": "fragment"}
# Source 003 asks, in a comment on its `precompute_freqs_cis`, whether `freqs_cis` should not be
# fixed once the model's width and the longest input are set, reading its parameter `end` as each
# input's length. It already is fixed: source 000's example calls
# `precompute_freqs_cis(dim, max_seq_len * 2)` in its attention module's `__init__` (once per layer, when
# the model is built), and Meta's Llama code calls it once per model (in `Transformer.__init__`, with the
# head width `dim // n_heads`), so `end` is a fixed bound, twice the longest length, not each input's. Fixed,
# the table must then be cut to the input's positions before the multiply: Meta's code slices it, while 000's
# example never does and multiplies by the whole table ([chapter 5](05_rope.ipynb) catches that slip, in its
# §6 aside and its errata). The cell just above measures what fixing it saves: `RotaryEmbedding` builds its
# tables once, no sine or cosine
# from its second call on; the stateless `apply_rope` computes L · d/2 cosines and as many sines on every
# call, and writes the tables again, 1/8 of a bound.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **The floors of a training step, for this x** (bf16, 8 heads; in one-pass bounds; the cells above check each):
#
# | what is counted | value |
# |---|---|
# | x and g alone (a kernel that computes sin and cos itself) | 2 |
# | and the float32 tables, cached (`RotaryEmbedding`) | 2 + 1/4 |
# | and the tables made on every call (`apply_rope`) | 2 + 3/8 |
# | every byte of `apply_rope` on the C kernel, angles in (its forward call alone: 1.44) | 2.57 |
# | q and k in one call (a k as large as x), in bounds of q and k together: cached, made | 2 + 1/8, 2 + 3/16 |
#
# More heads sharing each table row shrink the tables' share. These are bytes, not times: `make bench` times two
# plain passes and a stateless call's floor next to `apply_rope` and `RotaryEmbedding`, round-robin
# over many rounds, and `benchmarks/README.md` has its tables and what they do and do not show.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise (design): the backward rotation in place.** Design `rotate_back_(g, cos, sin, layout)`
# that overwrites g, of shape (..., seq, d) and any strides, with $R_m^\top g$ (every pair turned by
# −angle), for cos and sin of shape (seq, d/2) and either layout ("half": features j and j + d/2 form
# pair j; "interleaved": 2j and 2j + 1). Use torch operations whose new tensors hold, all of them
# together over the call, fewer elements than g itself: every new tensor counts, even one freed
# before the call returns (a tensor of another dtype counts its bytes in g's elements; no numpy or
# Python copy of the values). More than one design meets this. The note below says when writing into
# g is safe, what it saves, and what the checker runs.

# %% [markdown] slideshow={"slide_type": "fragment"}
# **Note on the exercise (for reference).**
#
# - **What it requires.** When the function returns, g holds $R_m^\top g$; the new tensors its torch
#   operations make, added up over the whole call (every allocation counted, not the most held at once),
#   hold fewer elements than g. A loop that allocates a fresh result for each small piece of g adds up to
#   all of g and fails.
# - **When writing into g is safe: only when RoPE's backward pass owns g**, made for it alone (as attention's
#   backward pass makes q's gradient) and read by nothing afterwards. Autograd may hand one gradient tensor to two
#   branches (an addition's backward pass does, checked below), and overwriting it would corrupt the other branch's
#   gradient; the exercise asks for the rotation, not that wiring.
# - **What it saves: memory, not bytes.** A fused kernel writing into g saves one g-sized tensor; a design with torch
#   operations saves that less its own new tensors. One pass moves the same bytes into its input as into a new
#   tensor (`y_pass.mul_(1.5)` against `y_pass * 1.5`, checked below), and with torch operations each operation is a
#   pass of its own (two in-place operations move twice one's bytes), so an in-place design's bytes depend on its
#   operations, not on writing into g.
# - **How the checker works.** It runs the function on float32 gradients of its own, some of them strided
#   views, adds up every element the ATen operators it reaches create, checks that every change to g is
#   made by an operator it saw, and compares g with `pl.rotate_pairs` by −angle.
#
# Limits: the checker's sum of new elements bounds the extra memory a design holds at any moment; the peak of a whole
# backward pass is not measured, nor what a CPU adds for new memory (a cache that reads a line before writing it,
# page faults on first touch).

# %% slideshow={"slide_type": "fragment"}
handed = []  # the gradient each branch of w * 2 + q * 3 receives from the addition's backward pass
w_branch, q_branch = torch.zeros(4, requires_grad=True) * 2, torch.zeros(4, requires_grad=True) * 3
for branch in (w_branch, q_branch):
    branch.register_hook(handed.append)
(w_branch + q_branch).backward(torch.ones(4))
assert handed[0] is handed[1]  # one tensor for both branches: overwriting it in one would change the other's
y_pass = torch.ones(8, 1024)
pass_bounds = {}
one_or_two = {"new": lambda: y_pass * 1.5, "into y": lambda: y_pass.mul_(1.5),
              "twice into y": lambda: y_pass.mul_(1.5).add_(1)}
for how, fn in one_or_two.items():
    pass_bounds[how] = bounds(record(fn), y_pass)[1]
assert pass_bounds == {"new": 1, "into y": 1, "twice into y": 2}  # in place, the same bytes; each operation a pass
print("the addition's backward pass hands both branches the same gradient tensor")
print(f"bytes in one-pass bounds: y_pass * 1.5 {pass_bounds['new']:g}, y_pass.mul_(1.5) {pass_bounds['into y']:g}, "
      f"y_pass.mul_(1.5).add_(1) {pass_bounds['twice into y']:g}")

# %% slideshow={"slide_type": "fragment"}
def rotate_back_(g, cos, sin, layout):
    raise NotImplementedError  # your code: overwrite g with R_m^T g


_ = check.rotate_back_in_place(rotate_back_)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "rotate_back_in_place_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def rotate_back_(g, cos, sin, layout):
    ### BEGIN SOLUTION
    # One design among several. R^T turns a pair (a, b) into (a cos + b sin, b cos - a sin): each new member
    # needs both old ones, so whichever member is written first destroys a value the other still needs. This
    # design saves that member first: its one temporary, half of g. Everything else is an in-place operator on
    # a view of g (mul_, addcmul_), which allocates nothing; an expression such as b * sin would be another
    # half of g. Another design needs no copy of g at all: a rotation is three shears, each an in-place
    # multiply-add of one member by the other (a += t b, b -= sin a, a += t b, with t = sin / (1 + cos) =
    # tan(angle / 2)), after a half turn (both members negated) where cos < 0 so that t stays finite; its
    # only new tensors are of the tables' size. A third rotates a few positions at a time through one small
    # buffer, made once and reused: the count adds up allocations, so it sees that buffer once.
    # tests/test_check_ch10.py runs all three.
    d = g.shape[-1]
    a, b = (g[..., : d // 2], g[..., d // 2:]) if layout == "half" else (g[..., 0::2], g[..., 1::2])
    saved = a.clone()
    a.mul_(cos).addcmul_(b, sin)
    b.mul_(cos).addcmul_(saved, sin, value=-1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "rotate_back_in_place", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.rotate_back_in_place(rotate_back_)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. On a GPU: one pass in Triton
#
# On a GPU the C kernel is of no use (it is a CPU loop), and the torch path pays the same extra
# passes as on the CPU. So the library has a GPU kernel, written in Triton, a Python dialect that
# compiles to GPU code: `posenc_lib/kernels/triton_rope.py`, registered as the torch operator
# `torch.ops.posenc.rope_triton`, with autograd. `rotary.rotate` takes it for CUDA tensors. Its aim
# is §3's: one pass, reading q and k once and writing them once.
#
# **What one program instance does.** Triton runs many copies of one function (program instances),
# each on its own block of data. Here one takes a block of positions of one sequence and:
# 1. gets the cos and sin of its angles once, either by reading the float32 tables the caller made
#    (`RotaryEmbedding`'s cache) or by computing them in registers from the positions and the
#    frequencies (then no table exists anywhere);
# 2. for every head, q's then k's (with GQA, grouped-query attention, where each key head serves a
#    group of query heads, their counts differ; one launch serves both), loads that
#    head's rows for these positions, rotates each pair in float32 with the cos and sin it holds,
#    and stores the rows, rounded once to the tensor's dtype.
#
# In the kernel's source (`_rope_kernel`), these are the lines of the half layout, by tables, for float32 and bf16
# tensors (quoted; `tests/test_check_ch10.py` checks that each is in `triton_rope.py`). `tl.arange` makes a
# block of indices, so `s` holds this instance's positions and `j` its pair indices; `tl.load` and
# `tl.store` move a whole block between memory and registers, and `mask` switches off the lanes
# past the tensor's end (a position past `seq`, a padded pair). `R` is the number of rotated
# features (so `R // 2` starts the second half); `blocks` is the number of position blocks per sequence and head
# group, `⌈seq / BLOCK_S⌉`; `t_off` and `t_ok` are the tables' offsets and mask,
# `ok` the row's mask:
#
# ```python
# s = (tl.program_id(0) % blocks) * BLOCK_S + tl.arange(0, BLOCK_S)  # (BLOCK_S,) the positions' rows
# j = tl.arange(0, HALF)  # pair index, padded to a power of two
# c = tl.load(cos_ptr + t_off, mask=t_ok, other=0.0)
# sn = tl.load(sin_ptr + t_off, mask=t_ok, other=0.0)
# a = tl.load(x_row + j[None, :], mask=ok, other=0.0)
# y = tl.load(x_row + R // 2 + j[None, :], mask=ok, other=0.0)
# a, y = a.to(tl.float32), y.to(tl.float32)
# out = tl.join(a * c - y * sn, a * sn + y * c)  # (BLOCK_S, HALF, 2), rotate_pairs's order of operations
# if OUT_BF16:  # round to nearest even by hand: the interpreter's own cast truncates
#     u = out.to(tl.uint32, bitcast=True)
#     u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
#     u = tl.where(out != out, 0x7FC0, u)  # NaN stays NaN
#     out = u.to(tl.uint16).to(tl.bfloat16, bitcast=True)
# else:
#     out = out.to(dst.dtype.element_ty)
# first, second = tl.split(out)
# tl.store(o_row + j[None, :], first, mask=ok)
# tl.store(o_row + R // 2 + j[None, :], second, mask=ok)
# ```
#
# The loaded values are converted to float32 (the kernel's branch for float64 tensors, not quoted, converts to
# float64), rotated, and the float32 result is rounded once to the output's dtype: for bf16 by hand, in its bits.
# A float32 number's top 16 bits are a bf16 number; adding 0x7FFF, plus 1 when the lowest kept bit is 1, then
# dropping the low 16 bits rounds to the nearest bf16 number, a tie to the one whose last bit is 0 (even), as
# torch's `.to(torch.bfloat16)` does; a NaN is set to a NaN explicitly. The kernel's comment gives the reason: the
# interpreter's own cast truncates. The next cell checks that formula against torch's rounding, and the kernel's
# bf16 output under the interpreter against `pl.apply_rope`; where Triton is installed, it also runs a one-line
# kernel that casts float32 to bf16 under the interpreter: equal to truncation, not to torch's rounding.
#
# The `tl.join` and then `tl.split` in the half layout are not a no-op left in by mistake: the join makes one
# (BLOCK_S, HALF, 2) block of both members so that that rounding, and the interleaved layout's store (the block
# reshaped into whole rows), are written once for both layouts; the half layout then splits the rounded block back
# into its two halves to store them.
#
# "rotate_pairs's order of operations" holds for the rounding too: the kernel is compiled with
# `enable_fp_fusion=False` (`_compile_options` in the same file), so no fused multiply-add merges a product
# into the sum, and each product and difference is rounded as torch's separate operations round it.
# Triton's interpreter, below, ignores that option, so this appendix cannot show it; on a GPU,
# `make test-gpu` (`tests/test_gpu.py`) holds the compiled kernel's table path bit for bit to torch's.
#
# The tables cost little: for long sequences they are read once per block of positions and shared by
# every head (for very short ones, such as decoding, `launch_shape` splits the heads into groups, each
# reading them; where Triton is installed, the next cell checks that choice, from shapes alone, for a
# Llama-sized q and k). For a
# Llama-sized layer (32 query heads and 8 key heads of 128, bf16) q and k move 40 · 128 · 2 · 2 bytes
# per position, the tables 2 · 64 · 4: 2.5 % more. The backward pass is the same kernel with the
# sine negated: the rotation by −angle (§4).
#
# Triton has an interpreter that runs a kernel on CPU tensors, one program instance at a time, in
# numpy. It says nothing about speed, but it runs the same code, so the next cell checks what the
# kernel computes, where Triton is installed. The stored output below was made in the test environment (`make
# test` and `make notebooks` install `requirements/test.txt`, with Triton on Linux x86-64); in the course's own
# environment, without Triton, a learner's run checks only the rounding formula and prints that the kernel was not
# run; the kernel itself is checked by `tests/test_rope_triton.py` (under the interpreter, in the test environment)
# and `tests/test_gpu.py` (compiled, on a GPU).
# Small q (4 heads) and k (2 heads) rotated in one launch, by tables and in registers, against `pl.apply_rope`;
# then its backward.

# %% slideshow={"slide_type": "fragment"}
import importlib.util

assert 2 * 64 * 4 / (40 * 128 * 2 * 2) == 0.025  # the tables' bytes per position against q's and k's
# the kernel's rounding to bf16, written with torch's integer operations on a million float32 numbers
x32 = torch.randn(1_000_000, generator=torch.Generator().manual_seed(6)) * 10
u = x32.view(torch.int32).to(torch.int64) & 0xFFFFFFFF  # the float32 bits, unsigned
u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16  # the kernel's line
assert torch.equal((u << 16).to(torch.int32).view(torch.float32), x32.to(torch.bfloat16).float())  # torch's rounding
assert not torch.equal((x32.view(torch.int32) & ~0xFFFF).view(torch.float32), x32.to(torch.bfloat16).float())  # truncation differs


def check_triton_kernel() -> None:
    """The kernel under Triton's interpreter against apply_rope: q and k in one launch, forward and backward."""
    import triton
    import triton.language as tl

    from posenc_lib.kernels import triton_rope  # CPU tensors run under Triton's interpreter

    def cast_to_bf16(x_ptr, y_ptr, n: tl.constexpr):  # the interpreter's own cast, alone
        offsets = tl.arange(0, n)
        tl.store(y_ptr + offsets, tl.load(x_ptr + offsets).to(tl.bfloat16))

    with triton_rope._interpret(True):
        cast_kernel = triton.jit(cast_to_bf16)
    cast = torch.empty(1024, dtype=torch.bfloat16)
    cast_kernel[(1,)](x32[:1024], cast, n=1024)
    assert torch.equal(cast.float(), (x32[:1024].view(torch.int32) & ~0xFFFF).view(torch.float32))  # it truncates
    assert not torch.equal(cast, x32[:1024].to(torch.bfloat16))  # it does not round to nearest

    for seq, groups in ((1, 8), (16, 8), (4096, 1), (16384, 1)):  # on a GPU (an H100's 132 multiprocessors)
        q_shape, k_shape = torch.empty(1, 32, seq, 128, device="meta"), torch.empty(1, 8, seq, 128, device="meta")
        assert triton_rope.launch_shape(q_shape, k_shape, interpret=False)[1] == groups  # heads split only when short
    g5 = torch.Generator().manual_seed(5)
    q5, k5 = torch.randn(1, 4, 16, 64, generator=g5), torch.randn(1, 2, 16, 64, generator=g5)  # CPU tensors
    a5 = pl.rope_angles(16, 64)
    by_tables = triton_rope.rope(q5, k5, cos=a5.cos(), sin=a5.sin(), layout="half")
    in_registers = triton_rope.rope(q5, k5, inv_freq=pl.rope_frequencies(64), layout="half")
    for x5, from_tables, from_registers in zip((q5, k5), by_tables, in_registers):
        expected = pl.apply_rope(x5, layout="half")
        assert torch.equal(from_tables, expected)  # the reference's arithmetic on the reference's tables
        # its own cos and sin (numpy's here, the GPU's math library there): within 2 eps max|x|, eps = 2^-23
        assert (from_registers - expected).abs().max() <= 2 * torch.finfo(torch.float32).eps * x5.abs().max()
    q5_grad, g_out5 = q5.clone().requires_grad_(), torch.randn(q5.shape, generator=g5)
    (grad5,) = torch.autograd.grad(triton_rope.rope(q5_grad, cos=a5.cos(), sin=a5.sin(), layout="half")[0],
                                   q5_grad, g_out5)
    assert torch.equal(grad5, pl.rotate_pairs(g_out5, a5.cos(), -a5.sin(), "half"))  # the rotation by -angle
    for x5, from_tables in zip((q5, k5), triton_rope.rope(q5.bfloat16(), k5.bfloat16(), cos=a5.cos(), sin=a5.sin(),
                                                          layout="half")):  # bf16: the rounding by hand
        assert from_tables.dtype == torch.bfloat16 and torch.equal(from_tables, pl.apply_rope(x5.bfloat16(), layout="half"))


if importlib.util.find_spec("triton") is None:  # the course's own environment has no Triton; the test one does
    print("Triton is not installed here (`pip install triton`): the kernel is not run, only its rounding formula checked")
else:
    check_triton_kernel()
    print("under Triton's interpreter: a cast of float32 to bf16 truncates; q and k in one launch; from tables equal to apply_rope bit for bit (float32, "
          "and bf16 with its rounding by hand), in registers within 2 eps max|x| (eps = 2^-23, float32's spacing at 1); "
          "the backward equal to the rotation by -angle")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **How fast, on a GPU: quoted, not run here.**
#
# **What to remember: in the one run of this library's kernel on a GPU (an H200), bytes set its time at L = 16384,
# where it took 1.07 to 1.11 times a copy of q and k; the L = 4096 row is unexplained: most paths took longer there
# than with four times the positions. One run: no rule for other lengths.**
#
# `make bench DEVICE=cuda` times q (1, 32, L, 128) and k (1, 8, L, 128) rotated in the half layout by each path:
# CUDA events, the median of 25 calls, one run with no spread, on the machine's torch 2.11 (not the lock's 2.13).
# `benchmarks/README.md` ("First GPU run of this tree")
# gives each time in units of one elementwise pass over q and k (`q * c, k * c`, the bound), and the bound in ms.
# The next cell types that whole forward table (`tests/test_check_ch10.py` checks every number against the README)
# and prints it in copies: each entry over the time of a copy (`clone`) of q and k in the same row, §3's one-pass
# yardstick.
#
# - **L = 16384: bytes set the kernel's time.** The bound moved q's and k's bytes at 3.9 TB/s in bf16, against the
#   H200's peak of 4.8 TB/s (NVIDIA's H200 specification). The kernel called alone (one launch for q and k) took 1.07
#   to 1.11 copies, from tables or in registers, in both dtypes, and `RotaryEmbedding` as much. The alternative is a
#   cost fixed per call: the clone took 0.077 ms at L = 4096, a quarter of the bytes, and the bf16 times here (the
#   bound 0.086 ms, the kernel from tables 0.090) are only 1.1 and 1.2 times that, so the bf16 row sits near such a
#   floor. The float32 row rules it out: twice the bytes took the kernel 2.0 times as long (0.178 against 0.090 ms;
#   a fixed 0.077 ms would allow at most 0.104), the bound 1.92 times, and there, at more than twice the floor, the
#   kernel took 1.10 to 1.11 copies. `apply_rope` (one launch per tensor) took
#   1.29 to 1.43 in this one run; the run has no control that would say why. The
#   eager torch paths and the library's `torch.compile` path (whose generated code is Triton's too) took 3.7 to 12.4;
#   the compiled one's 7.29 (bf16) against Hugging Face's compiled rotation's 1.13 is a gap this run does not
#   explain. The printed table has the other entries.
# - **L = 4096: unexplained.** One pass over q and k ran at only 1.2 TB/s (bf16), and seven of the nine paths took
#   longer than at L = 16384 (bf16: the kernel from tables 0.44 ms against 0.090, `apply_rope` 1.13 against 0.12,
#   the module 0.44 against 0.090). Neither the bytes nor a cost fixed per call explains a call that is slower with
#   a quarter of the positions (the README says so). The README's one hypothesis, not tested: the calls were timed
#   with no synchronisation between them, so a call's time may include the host's work to launch it. Warm-up, a
#   first call's compilation and the order of the rows have no control in that run either. This row ranks no path.
#
# So a count of bytes, this appendix's method, gives a floor: at L = 16384 the kernel alone came close to it (1.07
# to 1.11 copies); at L = 4096 the run timed something the bytes do not explain.
#
# An earlier run on an H100 ("A quoted GPU measurement", bf16, before the library had this kernel) timed an untuned
# Triton prototype, its angles in registers, in copies of q and k: 1.41, 1.25 and 1.09 at L = 4096, 16384 and 65536.
# It has no times in ms, so it cannot tell whether bytes set its rows.

# %% slideshow={"slide_type": "fragment"}
# the H200 run, quoted ("First GPU run of this tree", forward): (dtype, L) -> the bound in ms, then each path's time in
# units of the bound, in the README's order of columns
h200_columns = ("clone", "apply_rope", "RotaryEmbedding", "kernel, tables", "kernel, registers", "apply_rope torch",
                "module torch", "apply_rope_compiled", "HF eager", "HF compiled")
h200 = {("bfloat16", 4096): (0.069, 1.11, 16.34, 6.44, 6.37, 5.33, 17.99, 8.94, 17.42, 4.37, 2.88),
        ("bfloat16", 16384): (0.086, 0.98, 1.40, 1.05, 1.05, 1.07, 12.15, 11.44, 7.14, 11.60, 1.11),
        ("float32", 4096): (0.073, 1.09, 15.40, 6.34, 5.32, 4.91, 14.85, 6.20, 15.55, 4.84, 3.09),
        ("float32", 16384): (0.165, 0.98, 1.26, 1.09, 1.08, 1.09, 5.42, 3.71, 3.62, 7.37, 1.36)}
# the H100 run, quoted ("A quoted GPU measurement", bf16): the Triton prototype in units of a clone of q and k
prototype = {4096: 1.41, 16384: 1.25, 65536: 1.09}
h200_peak_tb_per_s = 4.8  # not the README's: NVIDIA's H200 specification (HBM3e, 4.8 TB/s)
copies = {key: dict(zip(h200_columns[1:], (t / row[1] for t in row[2:]))) for key, row in h200.items()}
dtypes = ("bfloat16", "float32")
print("the H200 run, each path's time in copies of q and k (its time over a clone's, the same row)")
for group in (h200_columns[1:5], h200_columns[5:]):  # Triton paths; the torch paths and Hugging Face's
    print(f"{'':16s}" + "".join(f"{name:>20s}" for name in group))
    for (dtype, seq), row in copies.items():
        print(f"{dtype:8s} {seq:6d} " + "".join(f"{row[name]:20.2f}" for name in group))


def in_copies(seq: int, *paths: str, ndigits: int = 2) -> list[float]:
    """The paths' times in copies, rounded, bf16 first, then float32."""
    return [round(copies[dtype, seq][path], ndigits) for path in paths for dtype in dtypes]


entries = {seq: 40 * seq * 128 for seq in (4096, 16384)}  # q's 32 heads and k's 8, 128 features each
tb_per_s = {seq: 2 * 2 * entries[seq] / (h200["bfloat16", seq][0] * 1e-3) / 1e12 for seq in entries}  # bf16: 2 + 2 bytes
assert (round(tb_per_s[4096], 1), round(tb_per_s[16384], 1)) == (1.2, 3.9)
f32_over_bf16 = {seq: h200["float32", seq][0] / h200["bfloat16", seq][0] for seq in entries}  # twice the bytes
assert round(f32_over_bf16[16384], 2) == 1.92
assert tb_per_s[16384] < h200_peak_tb_per_s  # below the peak, as a measured rate must be
kernel = ("kernel, tables", "kernel, registers")
torch_paths = ("apply_rope torch", "module torch", "apply_rope_compiled")
# L = 16384
assert (min(in_copies(16384, *kernel)), max(in_copies(16384, *kernel))) == (1.07, 1.11)
assert in_copies(16384, "RotaryEmbedding") == [1.07, 1.11] and in_copies(16384, "apply_rope") == [1.43, 1.29]
assert min(in_copies(16384, "apply_rope")) > max(in_copies(16384, *kernel, "RotaryEmbedding"))  # one launch per tensor
assert (min(in_copies(16384, *torch_paths, ndigits=1)), max(in_copies(16384, *torch_paths, ndigits=1))) == (3.7, 12.4)
assert in_copies(16384, "HF eager", ndigits=1) == [11.8, 7.5] and in_copies(16384, "HF compiled") == [1.13, 1.39]
assert in_copies(16384, "apply_rope_compiled")[0] == 7.29  # bf16: the library's compiled path, unexplained
kernel_tables_ms = {dtype: h200[dtype, 16384][0] * h200[dtype, 16384][1 + h200_columns.index("kernel, tables")]
                    for dtype in dtypes}  # the kernel from tables at L = 16384: its own float32 over bf16
assert (round(kernel_tables_ms["float32"], 3), round(kernel_tables_ms["bfloat16"], 3)) == (0.178, 0.090)
assert round(kernel_tables_ms["float32"] / kernel_tables_ms["bfloat16"], 1) == 2.0
# the alternative, a cost fixed per call: the clone's time at L = 4096 (a quarter of the bytes) as that floor
floor_ms = h200["bfloat16", 4096][0] * h200["bfloat16", 4096][1]
assert (round(floor_ms, 3), round(h200["bfloat16", 16384][0] * h200["bfloat16", 16384][1], 3)) == (0.077, 0.084)
assert [round(t / floor_ms, 1) for t in (h200["bfloat16", 16384][0], kernel_tables_ms["bfloat16"])] == [1.1, 1.2]
assert round(2 * kernel_tables_ms["bfloat16"] - floor_ms, 3) == 0.104 < kernel_tables_ms["float32"]  # floor + 2 x rest
assert h200["float32", 16384][0] / floor_ms > 2 and in_copies(16384, *kernel)[1::2] == [1.10, 1.11]  # float32
print(f"the bound (bf16): {tb_per_s[4096]:.1f} TB/s at L = 4096, {tb_per_s[16384]:.1f} at 16384; float32 over bf16 at "
      f"16384: {f32_over_bf16[16384]:.2f} as long")
print(f"L = 16384, the kernel from tables: float32 {kernel_tables_ms['float32']:.3f} ms, bf16 "
      f"{kernel_tables_ms['bfloat16']:.3f} ms, {kernel_tables_ms['float32'] / kernel_tables_ms['bfloat16']:.1f} times "
      f"as long; the bound at {tb_per_s[16384]:.1f} TB/s against the H200's peak {h200_peak_tb_per_s} TB/s")
print(f"a fixed cost per call of {floor_ms:.3f} ms (the clone at L = 4096) would allow the kernel at most "
      f"{2 * kernel_tables_ms['bfloat16'] - floor_ms:.3f} ms in float32 at 16384; it took {kernel_tables_ms['float32']:.3f}")
# L = 4096, bf16: each path's time in ms against its time at 16384, with a quarter of the positions
ms_bf16 = {seq: dict(zip(h200_columns, (h200["bfloat16", seq][0] * t for t in h200["bfloat16", seq][1:])))
           for seq in entries}
slower_short = [path for path in h200_columns if ms_bf16[4096][path] > ms_bf16[16384][path]]
assert slower_short == ["apply_rope", "RotaryEmbedding", "kernel, tables", "kernel, registers", "apply_rope torch",
                        "apply_rope_compiled", "HF compiled"]  # seven of the nine paths; the clone not among them
assert [round(ms_bf16[seq][path], ndigits) for path, ndigits in
        (("kernel, tables", 2), ("apply_rope", 2), ("RotaryEmbedding", 2)) for seq in entries] == [0.44, 0.09, 1.13,
                                                                                                 0.12, 0.44, 0.09]
print("bf16, ms at L = 4096 against 16384: " + ", ".join(
    f"{path} {ms_bf16[4096][path]:.3f} / {ms_bf16[16384][path]:.3f}" for path in h200_columns))
print(f"slower at L = 4096 (a quarter of the positions): {len(slower_short)} of {len(h200_columns) - 1} paths")
print("H100, the prototype in copies of q and k: " + ", ".join(f"L = {seq}: {t}" for seq, t in prototype.items()))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. RoPE's share of a step's arithmetic and bytes
#
# RoPE is small in arithmetic. Per token, in the forward pass, the four projections of an attention layer
# (q, k, v and the output) with d_model = 4096 make 4 · 4096² multiply-adds; rotating q and k makes
# 2 multiplications and one addition or subtraction per entry of each, about 2.5·10⁴ operations against
# 1.3·10⁸, one part in five thousand (counted below). This layer is multi-head attention, k as wide
# as q; §5's Llama-sized layer (grouped-query attention, 8 key heads of 128) has narrower k and v
# projections and a narrower k to rotate. The ratio comes out the same, and not by chance: each width w of
# k costs the projections 4 · 4096 · w operations (k and v, a multiply-add counting 2) and RoPE 3w, so the
# ratio is 4 · 4096 / 3 whatever w is (the cell checks both widths). In a training step the gap widens: a
# projection's backward pass makes two products the size of its forward one (the gradients for the input
# and for the weight), while RoPE's backward is one more rotation, so the step's ratio is 3/2 of the
# forward's, one part in 8192 (the cell counts the projection's backward too). The optimizer's update of the
# weights is left out of this count of arithmetic: it is a few operations per weight once a step, shared by
# every token of the step, not a cost per token; the counts of bytes below include it.

# %% slideshow={"slide_type": "fragment"}
d_model = 4096
with FlopCounterMode(display=False) as projections:
    torch.nn.functional.linear(torch.zeros(1, d_model), torch.zeros(d_model, d_model))  # one projection, one token
projection_ops = 4 * projections.get_total_flops()  # q, k, v, o (a multiply-add counts 2)
one_token = torch.zeros(1, d_model // 128, 1, 128)  # 32 heads of 128, one position
rope_record = record(lambda: pl.rotate_pairs(one_token, torch.zeros(1, 64), torch.zeros(1, 64)))
rope_ops = 2 * sum(op.size for op in rope_record if op.name in ("aten::mul.Tensor", "aten::sub.Tensor", "aten::add.Tensor"))
assert projection_ops == 4 * 2 * d_model**2 and rope_ops == 2 * 3 * d_model  # q and k: 3 operations per entry
assert projection_ops // rope_ops == 5461
gqa_projection_ops = 2 * (2 * d_model**2 + 2 * d_model * 1024)  # q and o 4096 wide, k and v 8 heads of 128
gqa_rope_ops = 3 * (d_model + 1024)  # q and 8 key heads
assert gqa_projection_ops // gqa_rope_ops == 5461 == (4 * d_model) // 3  # 4 d (d + w) / (3 (d + w)), any w
x1, w1 = torch.zeros(1, d_model, requires_grad=True), torch.zeros(d_model, d_model, requires_grad=True)
with FlopCounterMode(display=False) as step_flops:
    torch.nn.functional.linear(x1, w1).sum().backward()  # forward and backward of one projection
assert step_flops.get_total_flops() == 3 * projections.get_total_flops()  # backward: two products of its size
assert (3 * projection_ops) // (2 * rope_ops) == 8192  # RoPE's backward is one rotation more: 1 / 8192 a step
with FlopCounterMode(display=False) as tiny_projection:  # the same count for chapter 7's model, counted below
    torch.nn.functional.linear(torch.zeros(1, 64), torch.zeros(64, 64))  # d_model = 64
tiny_rope = record(lambda: pl.rotate_pairs(torch.zeros(1, 4, 1, 16), torch.zeros(1, 8), torch.zeros(1, 8)))  # 4 heads
tiny_rope_ops = 2 * sum(op.size for op in tiny_rope if op.name in ("aten::mul.Tensor", "aten::sub.Tensor", "aten::add.Tensor"))
assert round(4 * tiny_projection.get_total_flops() / tiny_rope_ops) == 85 == (4 * 64) // 3  # one part in 85
print(f"per token and layer: projections {projection_ops:.2e} operations, RoPE on q and k {rope_ops:.2e}: "
      f"1 / {projection_ops // rope_ops}; at d_model = 64 (4 heads of 16): 1 / {4 * tiny_projection.get_total_flops() / tiny_rope_ops:.0f}")

# %% [markdown] slideshow={"slide_type": "fragment"}
# What RoPE costs, by what this appendix counts, is calls and bytes. The next cell counts them in one training
# step of chapter 7's `TinyDecoder` (2 layers, d_model = 64, 4 heads of 16; a batch of 8 sequences of 255
# tokens), with RoPE and with no positional encoding. The control: RoPE's rotation replaced by the identity runs the
# same operators, in the same order, moving the same bytes as the step without (checked), so the difference is the
# rotation's. These are counts, the same on every machine for the locked library versions, not times. The model
# hands q and k to its `RotaryEmbedding` as permuted views (not contiguous), which the C kernel does not take, so the
# plain form runs (checked: no `posenc::rope_rotate`). A third count hands the C operator contiguous copies (the
# copies counted).
#
# *How it is counted.* A step is the forward pass, the loss, the backward pass and the optimizer's update: AdamW, as
# chapter 7 trains with, one weight at a time (`foreach=False`, the CPU's default), its two moments per weight made
# by an update before the count, so that the update counted is the one every later step makes (checked: one update
# per weight). The optimizer's marks for torch's profiler move nothing and are left out. For the third count the
# recorder answers the C operator with a tensor of its result's shape instead of running it, so it counts on any
# machine; where the kernel is built, the module's own run on the same copies records the same operators (checked).
# Every count in §6 sums every record (`total_bytes`), `aten::_unsafe_view` records (which move nothing) and a
# copy's destination included; §3's rule, `bounds`, gives the plain form's share to within 0.001 (checked).

# %% slideshow={"slide_type": "fragment"}
class RecordOpsOperatorByShape(RecordOps):
    """RecordOps, with posenc::rope_rotate recorded and answered by zeros of its result's shape, not run."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func is torch.ops.posenc.rope_rotate.default:
            out = torch.zeros_like(args[0])
            self.ops.append(Call(func.name(), entries_and_bytes(args[:3]), entries_and_bytes([out])))
            return out
        return super().__torch_dispatch__(func, types, args, kwargs)


def by_operator(rope: pl.RotaryEmbedding, q: torch.Tensor, k: torch.Tensor, offset: int):
    q, k = q.contiguous(), k.contiguous()  # the copies the C operator needs, counted
    cos, sin = rope.tables(q.shape[-2], offset)
    return tuple(torch.ops.posenc.rope_rotate(t, cos, sin, interleaved=rope.layout == "interleaved", inverse=False)
                 for t in (q, k))


def updated_adamw(model: torch.nn.Module) -> torch.optim.AdamW:
    """AdamW with the course's training settings (posenc_lib/experiments/_training.py), one weight at a time
    (foreach=False, the CPU's default), after one update on zero gradients that makes its two moments per weight:
    the update it makes next is the one of every later step."""
    optimizer = torch.optim.AdamW(model.parameters(), betas=(0.9, 0.98), weight_decay=0.0, foreach=False)
    for weight in model.parameters():
        weight.grad = torch.zeros_like(weight)
    optimizer.step()
    optimizer.zero_grad()
    return optimizer


def without_marks(ops: list[Call]) -> list[Call]:
    """ops less the optimizer's marks for torch's profiler (profiler::...), which move nothing."""
    return [op for op in ops if not op.name.startswith("profiler::")]


def step_ops(positional: str, rotate=None, recorder=RecordOps, batch: int = 8, width: int = 64,
             vocab: int = 64) -> list[Call]:
    """The ATen operators of one training step (forward, loss, backward, AdamW's update) of a TinyDecoder of
    d_model = width (heads of 16 features, d_ff = 4 width) and a vocabulary of vocab tokens on batch sequences, on
    the CPU; rotate(rope, q, k, offset), if given, replaces the model's rotation."""
    with torch.random.fork_rng():
        torch.manual_seed(0)
        model = pl.TinyDecoder(pl.DecoderConfig(vocab_size=vocab, positional=positional, max_len=256, d_model=width,
                                                num_heads=width // 16, d_ff=4 * width))
        tokens = torch.randint(0, vocab, (batch, 256))
    if rotate is not None:
        rope = model.positional.rope
        model.positional.rotate = lambda q, k, *, layer=0, offset=0: rotate(rope, q, k, offset)
    optimizer = updated_adamw(model)
    with recorder() as rec:
        logits = model(tokens[:, :-1])
        torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens[:, 1:].flatten()).backward()
        optimizer.step()
        optimizer.zero_grad()
    return without_marks(rec.ops)


default = pl.DecoderConfig(vocab_size=64)
assert (default.d_model, default.num_heads, default.d_ff) == (64, 4, 4 * 64)  # chapter 7's model, as step_ops builds it
with_rope, without = step_ops("rope"), step_ops("none")
rope_share = {"operators": 1 - len(without) / len(with_rope), "bytes": 1 - total_bytes(without) / total_bytes(with_rope)}
n_weights = len(list(pl.TinyDecoder(default).parameters()))
assert sum(op.name == "aten::addcdiv_" for op in with_rope) == n_weights == 29  # AdamW's update: once per weight
assert (len(with_rope), len(without)) == (415, 338) and 0.18 < rope_share["operators"] < 0.19
assert 0.25 < rope_share["bytes"] < 0.26
unit = torch.ones(1)  # bounds' unit cancels in a ratio
assert abs(1 - bounds(without, unit)[1] / bounds(with_rope, unit)[1] - rope_share["bytes"]) < 0.001  # §3's rule
assert not any("rope_rotate" in op.name for op in with_rope)  # the reference path: q and k arrive permuted
identity = step_ops("rope", lambda rope, q, k, offset: (q, k))  # the control: RoPE's rotation left out
assert [op.name for op in identity] == [op.name for op in without] and total_bytes(identity) == total_bytes(without)
print(f"one training step, AdamW's update included: {len(with_rope)} operators with RoPE, {len(without)} without "
      f"({len(identity)} with the rotation replaced by the identity, the same bytes); "
      f"RoPE's share of the bytes read and written: {rope_share['bytes']:.2f}")
on_operator = step_ops("rope", by_operator, RecordOpsOperatorByShape)
operator_share = 1 - total_bytes(without) / total_bytes(on_operator)
assert len(on_operator) == 363 and round(1 - len(without) / len(on_operator), 2) == 0.07 and 0.115 < operator_share < 0.125
assert sum(op.name == "posenc::rope_rotate" for op in on_operator) == 8  # q and k, 2 layers, forward and backward
if cpu_kernel.available():  # the module's own choice on contiguous q and k, run: the same operators and bytes
    module_run = step_ops("rope", lambda rope, q, k, offset: rope(q.contiguous(), k.contiguous(), offset=offset))
    assert [op.name for op in module_run] == [op.name for op in on_operator]
    assert total_bytes(module_run) == total_bytes(on_operator)
print(f"with contiguous copies of q and k and the C operator: {len(on_operator)} operators; "
      f"RoPE's share of the bytes: {operator_share:.3f}")

# %% [markdown] slideshow={"slide_type": "fragment"}
# In this small model (d_model = 64), RoPE in its plain form is about a fifth of a training step's operators
# (77 of 415, AdamW's update included) and a quarter of the bytes it reads and writes. Its arithmetic is not what costs (1/85 of the projections' in
# this model, 1/5461 at d_model = 4096; §6's first cell counts both): what it costs, by this appendix's counts, is calls and bytes.
# A share of bytes is not a share of time: where the matmuls are compute-bound, as at real widths, their time is
# set by their arithmetic, not their bytes, so RoPE's share of the bytes overstates its share of the time; this
# appendix claims no time. Handed contiguous q and k, the C operator
# brings RoPE's share to 7 % of the operators (363 against 338 without RoPE, the copies
# included) and about an eighth of the bytes.
#
# These shares assume fused attention, as in modern GPU training: the model calls
# `F.scaled_dot_product_attention`, which the CPU records as one operator, so its T × T scores are
# never counted. The next cell writes attention out (scores, mask, softmax, weighted sum) in the
# same step: the step's bytes grow about threefold, and RoPE's share falls from about a quarter to
# under a tenth. The fused count reads q, k and v once each (that is what this count assumes); a real
# flash-attention kernel on a GPU re-reads k and v for every block of queries (and, in its backward
# pass, q and the output's gradient for every block of keys), so it moves more than this count, which
# would lower RoPE's share. So about a quarter is this count's share (eager operators on the CPU, this
# model at d_model = 64, attention read once), and the written-out attention's 0.07 shows how far a
# larger count for attention can lower it. Every share below is the fused one.

# %% slideshow={"slide_type": "fragment"}
def eager_attention(q, k, v, *, is_causal):
    """Attention written out: what F.scaled_dot_product_attention(q, k, v, is_causal=True) computes."""
    assert is_causal  # the only call a TinyDecoder's training step makes
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    scores = scores.masked_fill(torch.ones(scores.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return scores.softmax(-1) @ v


fused_forward = [op for op in with_rope if op.name == "aten::_scaled_dot_product_flash_attention_for_cpu"]
assert len(fused_forward) == 2  # one per layer, each reading q, k and v once: (batch, heads, T, 16) each
assert all([entries for entries, _ in op.read] == [8 * 4 * 255 * 16] * 3 for op in fused_forward)
with mock.patch.object(torch.nn.functional, "scaled_dot_product_attention", eager_attention):
    eager_with, eager_without = step_ops("rope"), step_ops("none")
eager_share = 1 - total_bytes(eager_without) / total_bytes(eager_with)
assert 2.5 < total_bytes(eager_with) / total_bytes(with_rope) < 3  # the T x T tensors, now counted
assert 0.07 < eager_share < 0.08 < 0.25 < rope_share["bytes"]
print(f"attention written out: the step's bytes x {total_bytes(eager_with) / total_bytes(with_rope):.2f}; "
      f"RoPE's share {eager_share:.3f} (fused: {rope_share['bytes']:.3f})")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **What to remember: in this tiny model, RoPE in its plain form is from about a quarter of a training step's bytes
# (vocabulary 64) to a twentieth (vocabulary 8192); the C operator on contiguous copies halves the quarter (counted
# above). The share depends on the width too (below).**
#
# The next cell counts the step again, with and without RoPE, at d_model = 64, 128, 256 and 512 (heads of 16
# features, d_ff = 4 · d_model, the model's own ratio), on the same 8 sequences of 255 tokens and on one sequence.
# RoPE's share of the bytes:
#
# | d_model | 8 sequences | 1 sequence |
# |---|---|---|
# | 64 | 0.25 | 0.20 |
# | 512 | 0.20 | 0.07 |
#
# Why it falls: RoPE's bytes are almost all per token (its tables are read once per position, shared by the
# sequences) and grow about eightfold from 64 to 512, while the rest of the step has a part that does not grow with
# the tokens, the weights' traffic, which grows faster than the width. The fewer tokens a step has, the more that part
# weighs, so the faster the share falls.
#
# A larger vocabulary adds only bytes RoPE has no part in (logits, embedding and output weights), so it lowers RoPE's
# share: with a vocabulary of 8192, 0.05 at d_model = 64 and 0.12 at 512. Those bytes grow less than RoPE's with the
# width (1.7-fold against eightfold from 64 to 512), so with a vocabulary of 1024 or 8192 the share is higher at 512
# than at 64; with 1024 the change is small (0.17 and 0.18).
#
# Limits: none of this says what a real model's width, vocabulary and length give; this appendix does not count one.

# %% slideshow={"slide_type": "fragment"}
widths = (64, 128, 256, 512)
by_width = {(batch, w): (total_bytes(with_rope), total_bytes(without)) if (batch, w) == (8, 64)
            else tuple(total_bytes(step_ops(positional, batch=batch, width=w)) for positional in ("rope", "none"))
            for batch in (8, 1) for w in widths}
share_by_width = {key: 1 - rest / total for key, (total, rest) in by_width.items()}
for batch in (8, 1):  # the share falls with the width, with either batch
    assert [share_by_width[batch, w] for w in widths] == sorted((share_by_width[batch, w] for w in widths), reverse=True)
assert [round(share_by_width[8, w], 2) for w in (64, 512)] == [0.25, 0.20]  # 8 sequences: slowly
assert [round(share_by_width[1, w], 2) for w in (64, 512)] == [0.20, 0.07]  # one sequence: fast


def growth(batch: int) -> tuple[float, float]:
    """From d_model = 64 to 512: how many times RoPE's bytes grow, and the rest of the step's."""
    (total64, rest64), (total512, rest512) = by_width[batch, 64], by_width[batch, 512]
    return (total512 - rest512) / (total64 - rest64), rest512 / rest64


assert 7.5 < growth(1)[0] < growth(8)[0] < 8  # RoPE's bytes: about as the width, with either batch
assert round(growth(8)[1]) == 11 and round(growth(1)[1]) == 25  # the rest's: faster, more so with one sequence
rest_per_batch = {w: by_width[8, w][1] / by_width[1, w][1] for w in (64, 512)}
assert [round(rest_per_batch[w], 1) for w in (64, 512)] == [5.6, 2.4]  # not eightfold: a part not grown by tokens
fixed_part = {w: (8 * by_width[1, w][1] - by_width[8, w][1]) / 7 for w in (64, 512)}  # the rest at 0 sequences
param_bytes = {w: sum(p.numel() * p.element_size() for p in pl.TinyDecoder(pl.DecoderConfig(
    vocab_size=64, positional="none", max_len=256, d_model=w, num_heads=w // 16, d_ff=4 * w)).parameters()) for w in (64, 512)}
assert all(21.9 < fixed_part[w] / param_bytes[w] < 22 for w in (64, 512))  # about 22 times the weights' bytes
for w in (64, 512):  # a third count, at 2 sequences, lies on the line F + b * T the two counts give
    per_sequence = (by_width[8, w][1] - by_width[1, w][1]) / 7  # T
    rest_2 = total_bytes(step_ops("none", batch=2, width=w))
    assert abs(rest_2 - (fixed_part[w] + 2 * per_sequence)) / rest_2 < 1e-3
assert param_bytes[512] / param_bytes[64] > 8  # the weights grow faster than the width
update_bytes = {}  # the control: AdamW's update alone, on a model of each width
for w in (64, 512):
    model_w = pl.TinyDecoder(pl.DecoderConfig(vocab_size=64, positional="none", max_len=256, d_model=w,
                                              num_heads=w // 16, d_ff=4 * w))
    optimizer_w = updated_adamw(model_w)
    for weight in model_w.parameters():
        weight.grad = torch.zeros_like(weight)
    with RecordOps() as update_rec:
        optimizer_w.step()
    update_bytes[w] = total_bytes(without_marks(update_rec.ops))
    per_operator = {}  # in weights' bytes, by operator (add_ also counts the one-number step counter)
    for op in without_marks(update_rec.ops):
        if op.name != "aten::_local_scalar_dense":  # reads a one-number tensor
            per_operator[op.name] = per_operator.get(op.name, 0) + total_bytes([op]) / param_bytes[w]
    assert {name.split("::")[1]: round(share) for name, share in per_operator.items()} == {
        "lerp_.Scalar": 3, "mul_.Tensor": 2, "addcmul_": 4, "sqrt": 2, "div.Tensor": 2, "add_.Tensor": 2, "addcdiv_": 4}
    assert sum(p.numel() * p.element_size() for p in model_w.parameters()) == param_bytes[w]
    assert 18.99 < update_bytes[w] / param_bytes[w] < 19.01  # AdamW's update: 19 times the weights' bytes
    assert 2.9 < (fixed_part[w] - update_bytes[w]) / param_bytes[w] < 3  # forward and backward: about 3 times
fused_update = 4 + 3  # a model, not a count: a fused AdamW reads the weight, its gradient and two moments; writes the weight and moments
assert all(round((fixed_part[w] - update_bytes[w]) / param_bytes[w] + fused_update) == 10 for w in (64, 512))
share_fused = {(batch, w): (total - rest) / (total - (update_bytes[w] - fused_update * param_bytes[w]))
               for (batch, w), (total, rest) in by_width.items() if w in (64, 512)}
assert [round(share_fused[key], 2) for key in ((8, 64), (8, 512), (1, 64), (1, 512))] == [0.26, 0.23, 0.23, 0.12]
print("d_model  RoPE's share of a step's bytes: 8 sequences, 1 sequence (255 tokens each)")
for w in widths:
    print(f"{w:7d}  {share_by_width[8, w]:.3f}  {share_by_width[1, w]:.3f}")
for batch in (8, 1):
    print(f"from 64 to 512, {batch} sequence(s): RoPE's bytes x {growth(batch)[0]:.2f}, "
          f"the rest of the step's x {growth(batch)[1]:.2f}")
print(f"the rest's bytes from 1 sequence to 8: x {rest_per_batch[64]:.2f} at d_model = 64, "
      f"x {rest_per_batch[512]:.2f} at 512; its part that does not grow with the sequences, in parameters' bytes: "
      f"{fixed_part[64] / param_bytes[64]:.2f} at 64, {fixed_part[512] / param_bytes[512]:.2f} at 512, of which AdamW's "
      f"update alone {update_bytes[64] / param_bytes[64]:.2f} and {update_bytes[512] / param_bytes[512]:.2f}")
print("with a fused AdamW (7 weights' bytes), RoPE's share at d_model = 64, 512: "
      f"{share_fused[8, 64]:.3f}, {share_fused[8, 512]:.3f} (8 sequences); {share_fused[1, 64]:.3f}, "
      f"{share_fused[1, 512]:.3f} (one)")
vocabs = (64, 1024, 8192)  # the vocabulary, held at 64 above; 8 sequences of 255 tokens
by_vocab = {(w, v): by_width[8, w] if v == 64
            else tuple(total_bytes(step_ops(positional, width=w, vocab=v)) for positional in ("rope", "none"))
            for w in (64, 512) for v in vocabs}
share_by_vocab = {key: 1 - rest / total for key, (total, rest) in by_vocab.items()}
for w in (64, 512):
    assert len({by_vocab[w, v][0] - by_vocab[w, v][1] for v in vocabs}) == 1  # RoPE's bytes: the same at every vocab
    assert [share_by_vocab[w, v] for v in vocabs] == sorted((share_by_vocab[w, v] for v in vocabs), reverse=True)
assert round(share_by_vocab[64, 8192], 2) == 0.05 and round(share_by_vocab[512, 8192], 2) == 0.12
assert share_by_vocab[64, 64] > share_by_vocab[512, 64]  # vocabulary 64: the share falls with the width
assert all(share_by_vocab[64, v] < share_by_vocab[512, v] for v in (1024, 8192))  # larger ones: higher at 512
assert [round(share_by_vocab[w, 1024], 2) for w in (64, 512)] == [0.17, 0.18]
vocab_added = {v: (by_vocab[512, v][1] - by_vocab[512, 64][1]) / (by_vocab[64, v][1] - by_vocab[64, 64][1])
               for v in vocabs[1:]}  # from d_model = 64 to 512: how many times the bytes the vocabulary adds grow
assert all(round(vocab_added[v], 1) == 1.7 for v in vocabs[1:]) and 7.5 < growth(8)[0]  # RoPE's: about 8 times
print("vocabulary  RoPE's share of a step's bytes (8 sequences): d_model = 64, 512")
for v in vocabs:
    print(f"{v:10d}  {share_by_vocab[64, v]:.3f}  {share_by_vocab[512, v]:.3f}")
print("RoPE's bytes at every vocabulary: the same; the share is lower at d_model = 512 than at 64 at vocabulary 64, "
      f"higher at 1024 and 8192, where the bytes the vocabulary adds grow x {vocab_added[8192]:.1f}, RoPE's x {growth(8)[0]:.1f}")


# %% [markdown] slideshow={"slide_type": "skip"}
# ### Optional reference: the part of the step that does not grow with the tokens
#
# Nothing later uses this. Write the rest of the step (all but RoPE) as rest(b) = F + b · T for b sequences; two counts give F = (8 · rest(1) − rest(8)) / 7,
# about 22 times the weights' bytes at both widths, and a third, at 2 sequences, lies on that line to within 0.1 %. A
# control counts AdamW's update alone: 19 of those 22; the other 3, our reading (not counted one by one): each weight
# read forward, read again backward, and its gradient written.
# The 19 are eager AdamW's, one weight at a time (`foreach=False`, the CPU's default), which passes over the moments
# several times and builds a temporary for the denominator. In weight-sized tensors read and written, per operator
# (the cell above counts each): `lerp_` 3 (the first moment), `mul_` 2 and `addcmul_` 4 (the second: it is handed the
# gradient twice, as `addcmul_(grad, grad)`, and the count charges both reads, one that memory need not move again),
# `sqrt` 2, `div` 2 and `add_` 2 (the denominator), `addcdiv_` 4 (the weight). A fused AdamW reads each weight, its
# gradient and its two moments once and writes the weight and the moments: 7, which would make F about 10 times the
# weights' bytes. Estimated so (a model of a fused update, not a count), the share still falls with the width: from 0.26 to 0.23 with 8 sequences, from 0.23 to
# 0.12 with one.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Errata in the sources
#
# The cell below proves every item again (the first two from §1's numbers; the source's versions fail).
#
# | Source | The source writes | What is right | Where |
# |---|---|---|---|
# | `003` (`PositionalEncoding.forward`) | `self.positional_encodings[:x.shape[1]]` | `self.positional_encodings[:, :x.shape[1]]`: the buffer is (1, max_len, d), so the source's slice cuts its size-1 axis, keeps every position: `x + pe` fails for every length above 1 other than max_len (where it adds correctly), and at length 1 silently broadcasts to (B, max_len, d) | §1 |
# | `003` (its RoPE code, a comment) | says its angle table, positions times `torch.exp(torch.arange(0, dim, 2, dtype=torch.float) * -(math.log(10000.0) / dim))`, equals `torch.outer(t, freqs)` with `freqs = 1.0 / (theta ** (torch.arange(0, d_model, 2)[: (d_model // 2)].float() / d_model))`: in effect, that its two forms of the frequencies are the same | the same in exact arithmetic, not in float32: at d = 64 the two differ in more than half of the 32 frequencies (how many depends on the CPU's `torch.exp`), and the tables in those columns; the exp form is more than 3 ulps off the float32 number nearest θ_j, the power form at most 1 | §1 |
# | `003` (a comment in `precompute_freqs_cis`) | asks whether `freqs_cis` should not be fixed once the model's width and the longest input are set, reading `end` as each input's length | the code already does so: `end` is a fixed bound (twice the longest length), and the table is built when the model is built (once per layer in source 000's example, once per model in Meta's Llama code; §4). For plain RoPE fixing it is right (dynamic NTK recomputes it when the length grows; chapter 7): the table depends only on d, the base and the positions, so one table for the longest length, cut to the first L rows, is the table for L, bit for bit; `pl.RotaryEmbedding` keeps its tables between calls, while `pl.apply_rope` remakes them on every call (§4 counts what that costs) | below |

# %% slideshow={"slide_type": "fragment"}
assert buffer_003[: x_003.shape[1]].shape == (1, 200, 64) != buffer_003[:, : x_003.shape[1]].shape  # the cut
assert (x_len1 + buffer_003[: x_len1.shape[1]]).shape == (2, 200, 64)  # at length 1: broadcast, no error
differ = int((exp_form != pow_form).sum())
assert len(exp_form) == len(pow_form) == 32 and differ > 32 // 2  # "the same": not in float32 (17 to 19 seen)
assert int((table_exp != table_pow).any(0).sum()) == differ  # and the angle tables in as many columns
assert ulps_off["exp"].max() > 3 and ulps_off["power"].max() <= 1
assert torch.equal(pl.rope_angles(2 * 1024, 64)[:1024], pl.rope_angles(1024, 64))  # one table, cut: the same
print("003's two forms of the 32 frequencies (d = 64) differ in more than half of them in float32; "
      "a table made once for 2048 positions, cut to 1024, equals the one made for 1024")
