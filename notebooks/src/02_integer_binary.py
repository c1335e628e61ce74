# ---
# jupyter:
#   jupytext:
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
# ---

# %% [markdown] slideshow={"slide_type": "slide"}
# # 2 · First attempts: integer and binary codes
#
# Chapter 1 showed that attention needs a vector $p_i$ per position, added to the token,
# $x_i' = x_i + p_i$. What should $p_i$ be? This chapter tries the obvious answers in the
# order the sources do, and measures what goes wrong with each:
#
# 1. **integer codes** $p_i = i\cdot\mathbf 1$: they swamp the token (we measure by how much);
# 2. **normalised codes** $p_i = \tfrac{i}{m}\mathbf 1$: small, but the step between
#    neighbours depends on the sequence length $m$;
# 3. **binary codes**: the bits of $i$; bounded, but jumpy, and (despite what a source says)
#    with no fixed linear map from $p_i$ to $p_{i+k}$;
# 4. **sinusoids as smooth bits**: the way out, which chapter 3 develops.
#
# Sources followed: `001` (integer, normalised and binary codes, the five properties) and
# `002` (why not binary, why not divide by the length). Errors are corrected in the open and
# listed at the end.

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import ipywidgets as widgets
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

import posenc_lib as pl
from posenc_lib import check, viz

viz.use_style()  # white figures, dark text: readable in light and dark themes

device = pl.default_device()  # CUDA or MPS if present, else the CPU; every tensor below follows it
g = torch.manual_seed(0)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1 · Integer codes
#
# The simplest code writes the position into every feature: $p_i = i\cdot\mathbf 1 =
# [i, i, \dots, i] \in \mathbb R^d$. (`001` counts positions from 1; the library, like
# Python, from 0.) `pl.integer_positions(n, d)` builds the $n\times d$ table:

# %% slideshow={"slide_type": "fragment"}
P_int = pl.integer_positions(5, 4, device=device)
print(P_int.cpu())

# %% [markdown] slideshow={"slide_type": "subslide"}
# `001` says this code has four of the five properties: every position gets its own vector
# (1), moving $k$ steps is the same simple operation everywhere, $p_{i+k} = p_i + k\cdot\mathbf 1$
# (2), it is defined for any length (3), and it is a fixed pattern (4). The cell checks 1 and 2
# on 100 positions.

# %% slideshow={"slide_type": "fragment"}
P100 = pl.integer_positions(100, 8, device=device)
assert torch.unique(P100, dim=0).shape[0] == 100  # property 1: all rows distinct
for k in (1, 5, 37):
    torch.testing.assert_close(P100[k:], P100[:-k] + k)  # property 2: a fixed shift by k * 1
print("unique rows, and p_(i+k) = p_i + k·1 for every i")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Signal against noise
#
# The trouble is size. The input of attention is usually layer-normalised: each token's
# features have mean 0 and variance 1, so $\lVert x_i\rVert = \sqrt d$. The code has
# $\lVert p_i\rVert = i\sqrt d$, so at position $i$ it is $i$ times larger than the token it is
# added to. Worse, $x_i$ has mean 0, so it is orthogonal to $\mathbf 1$, and the angle between
# the token and the token-plus-position is
#
# $$\cos(x_i,\ x_i + p_i) = \frac{\lVert x_i\rVert^2}{\lVert x_i\rVert\,\lVert x_i + p_i\rVert}
#   = \frac{1}{\sqrt{1 + i^2}},$$
#
# whatever $d$ is. At position 10 only 10% of the direction is still the token. The cell
# measures all of this on 64 random layer-normalised tokens.

# %% slideshow={"slide_type": "fragment"}
n, d = 64, 64
x = F.layer_norm(torch.randn(n, d), (d,)).to(device)
p = pl.integer_positions(n, d, device=device)
i = torch.arange(n, device=device, dtype=torch.float32)

torch.testing.assert_close(x.mean(-1), torch.zeros(n, device=device), atol=1e-6, rtol=0)
torch.testing.assert_close(x.norm(dim=-1), torch.full((n,), d**0.5, device=device), atol=1e-3, rtol=0)
ratio = p.norm(dim=-1) / x.norm(dim=-1)
torch.testing.assert_close(ratio, i, atol=1e-3, rtol=1e-4)  # ||p_i|| / ||x_i|| = i
cos = F.cosine_similarity(x, x + p, dim=-1)
torch.testing.assert_close(cos, 1 / (1 + i**2).sqrt(), atol=1e-4, rtol=0)
print("||p_i|| / ||x_i|| at i = 1, 10, 63:", [round(ratio[j].item(), 2) for j in (1, 10, 63)])
print("cos(x_i, x_i + p_i) at i = 1, 10, 63:", [round(cos[j].item(), 3) for j in (1, 10, 63)])

# %% [markdown] slideshow={"slide_type": "fragment"}
# Two *different* tokens at the same position end up pointing almost the same way. Since
# $x\cdot x' \ge -d$, their cosine once the code is added is at least $(i^2-1)/(i^2+1)$:
# above 0.98 from position 10 on, for *any* two tokens. The position drowns the word.

# %% slideshow={"slide_type": "fragment"}
pairs = F.cosine_similarity(x[10:-1] + p[10:-1], x[11:] + p[10:-1], dim=-1)  # token i+1 placed at position i
assert pairs.min() > 0.98
print("smallest cosine between two different tokens at the same position >= 10:", round(pairs.min().item(), 3))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### ... and a LayerNorm erases it completely
#
# There is a sharper problem the sources do not mention. LayerNorm subtracts each token's
# mean over its features, and $p_i = i\cdot\mathbf 1$ *is* a mean. So
# $\mathrm{LayerNorm}(h + p_i) = \mathrm{LayerNorm}(h)$ for every vector $h$: a model that
# normalises before each attention layer never sees an integer code at all. RMSNorm, which
# only rescales, keeps it.

# %% slideshow={"slide_type": "fragment"}
h = torch.randn(n, d).to(device)
torch.testing.assert_close(F.layer_norm(h + p, (d,)), F.layer_norm(h, (d,)), atol=1e-4, rtol=0)
assert not torch.allclose(F.rms_norm(h + p, (d,)), F.rms_norm(h, (d,)), atol=1e-2)
print("LayerNorm(h + i·1) == LayerNorm(h): True;  RMSNorm keeps the code: True")


# %% [markdown] slideshow={"slide_type": "subslide"}
# The figure plots the measured $\cos(x_i, x_i + p_i)$ against the position, for the integer
# code and for the normalised code of the next section (dashed: $1/\sqrt{1+i^2}$).

# %% slideshow={"slide_type": "skip"}
def code_cosines(n, d):
    """cos(x_i, x_i + p_i) for seeded layer-normalised tokens, integer and normalised codes."""
    gen = torch.Generator().manual_seed(0)
    tokens = F.layer_norm(torch.randn(n, d, generator=gen), (d,)).to(device)
    out = {}
    for name, normalize in (("integer i", False), ("normalised i/n", True)):
        code = pl.integer_positions(n, d, normalize=normalize, device=device)
        out[name] = F.cosine_similarity(tokens, tokens + code, dim=-1).cpu()
    return out


def draw_cosines(fig, n=64, d=64):
    ax = fig.subplots()
    curves = code_cosines(n, d)
    lines = {name: ax.plot(c, marker=".", label=name)[0] for name, c in curves.items()}
    formula, = ax.plot(1 / (1 + torch.arange(n) ** 2).sqrt(), "k--", lw=1, label="1/√(1+i²)")
    ax.set(xlabel="position i", ylabel="cos(x_i, x_i + p_i)", ylim=(0, 1.05))
    ax.legend(loc="center right")

    def update(n, d):
        for name, c in code_cosines(n, d).items():
            lines[name].set_data(range(n), c)
        formula.set_data(range(n), 1 / (1 + torch.arange(n) ** 2).sqrt())
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_title(f"d = {d}: the token's share of the direction")

    update(n, d)
    return update


# %% slideshow={"slide_type": "fragment"}
fig = Figure(figsize=(5.5, 3.2))
draw_cosines(fig)
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# Move the sliders: the integer curve does not depend on $d$ at all (more features do not
# help), and a longer sequence only adds more hopeless positions.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
cosine_widget = viz.InteractiveFigure(
    draw_cosines,
    figsize=(5.5, 3.2),
    n=widgets.IntSlider(64, min=4, max=256, step=4, description="length n"),
    d=widgets.IntSlider(64, min=8, max=512, step=8, description="features d"),
)
cosine_widget

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2 · Normalised codes: small, but the step depends on the length
#
# Divide by the sequence length $m$ and every entry lies in $[0, 1)$:
# $p_i = \tfrac{i}{m}\cdot\mathbf 1$ (`normalize=True`). Now the step between neighbours is
# $1/m$: the same two words three positions apart are $3/m$ apart, which depends on how long
# the sentence is. Property 2 asks for a relation between $p_i$ and $p_{i+k}$ that depends
# on $k$ only, and this one also depends on $m$. Position 2 itself gets a different code in
# a 4-token and in an 8-token sentence.

# %% slideshow={"slide_type": "fragment"}
short = pl.integer_positions(4, 1, normalize=True, device=device)[:, 0]
long = pl.integer_positions(8, 1, normalize=True, device=device)[:, 0]
print("m = 4:", short.tolist())
print("m = 8:", long.tolist())
assert short[2] == 0.5 and long[2] == 0.25  # same position, different code
torch.testing.assert_close(short[1:] - short[:-1], torch.full((3,), 1 / 4, device=device))
torch.testing.assert_close(long[1:] - long[:-1], torch.full((7,), 1 / 8, device=device))
print("step p_(i+1) - p_i: 1/4 for m = 4, 1/8 for m = 8")

# %% [markdown] slideshow={"slide_type": "fragment"}
# The same thing as a picture: the code of each position for three sentence lengths. The
# lines have different slopes, and a model trained on one slope meets another whenever the
# length changes.

# %% slideshow={"slide_type": "fragment"}
fig, ax = viz.figure(width=5.0, height=3.0)
for m in (4, 8, 16):
    ax.plot(pl.integer_positions(m, 1, normalize=True)[:, 0], marker="o", label=f"m = {m}")
ax.set(xlabel="position i", ylabel="p_i = i / m", title="normalised codes: slope 1/m")
ax.legend()
fig

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3 · Binary codes
#
# `001` next writes $i$ in binary, one bit per feature, most significant bit first. With
# $d = 3$ features its first positions are
# $p_0 = [0,0,0]$, $p_1 = [0,0,1]$, $p_2 = [0,1,0]$. `pl.binary_positions(n, d)` builds the
# table; $d$ bits name $2^d$ positions:

# %% slideshow={"slide_type": "fragment"}
B3 = pl.binary_positions(8, 3, device=device)
assert B3[:3].tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]  # the source's three rows
for row, bits in enumerate(B3.int().tolist()):
    print(f"p_{row} = {bits}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Every entry is 0 or 1, so the code is never larger than the token:
# $\lVert p_i\rVert = \sqrt{\text{(number of ones in } i)} \le \sqrt d = \lVert x_i\rVert$.
# That is the improvement `001` claims. But "never larger" still means "as large as":
# position $2^d - 1$ has all bits set and is exactly as long as the token.

# %% slideshow={"slide_type": "fragment"}
B6 = pl.binary_positions(64, 6, device=device)
ones = torch.tensor([bin(j).count("1") for j in range(64)], device=device, dtype=torch.float32)
torch.testing.assert_close(B6.norm(dim=-1), ones.sqrt())
x6 = F.layer_norm(torch.randn(64, 6), (6,)).to(device)
ratio6 = B6.norm(dim=-1) / x6.norm(dim=-1)
assert ratio6.max() <= 1 + 1e-4 and abs(ratio6[63].item() - 1) < 1e-3
print("largest ||p_i|| / ||x_i||:", round(ratio6.max().item(), 3))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Fast low bits, slow high bits
#
# Down the table, the last column (the lowest bit) flips at every step, the one before it
# every 2 steps, then every 4, and so on: each column runs at half the speed of the one to its
# right. The heatmap shows the 6-bit code of 64 positions.

# %% slideshow={"slide_type": "fragment"}
fig, ax = viz.figure(width=4.6, height=3.6)
viz.heatmap(B6, ax=ax, xlabel="bit (0 = most significant)", ylabel="position i", colorbar="bit value",
            title="binary code, d = 6")
flips = (B6[1:] != B6[:-1]).sum(0)
assert flips.tolist() == [1, 3, 7, 15, 31, 63]  # column j flips 2**(j+1) - 1 times: twice as often as j-1
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# The same table with sliders. With $n > 2^d$ the widget shows only the $2^d$ positions that
# fit: past them the code has no new rows (property 3 fails at $2^d$).

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
binary_widget = viz.interactive_heatmap(
    lambda n, d: pl.binary_positions(min(n, 2**d), d, device=device),
    title=lambda n, d: f"d = {d} bits: {min(n, 2**d)} of {n} positions fit",
    xlabel="bit (0 = most significant)",
    ylabel="position i",
    colorbar="bit value",
    diverging=False,
    figsize=(4.6, 3.6),
    n=widgets.IntSlider(64, min=2, max=256, description="length n"),
    d=widgets.IntSlider(6, min=1, max=10, description="bits d"),
)
binary_widget

# %% [markdown] slideshow={"slide_type": "subslide"}
# `001` says the high bit, $p_{i,0}$, changes slowly and the low bit, which it calls
# $p_{i,d}$, fast. With $d$ bits numbered from 0 the last one is $p_{i,d-1}$; there is no
# $p_{i,d}$. The next plot draws each bit of the 4-bit code against the position, the
# picture `001` refers to.

# %% slideshow={"slide_type": "fragment"}
B4 = pl.binary_positions(16, 4)
assert (B4[1:, 3] != B4[:-1, 3]).all()  # p_{i,d-1} flips at every step
try:
    B4[:, 4]
    raise AssertionError("there should be no column d")
except IndexError:
    pass

fig, ax = viz.figure(width=5.5, height=3.2)
for j in range(4):
    ax.step(range(16), B4[:, j] + 1.5 * (3 - j), where="mid")
ax.set(xlabel="position i", yticks=[1.5 * (3 - j) + 0.5 for j in range(4)],
       yticklabels=[f"p_(i,{j})" for j in range(4)], title="columns of the 4-bit code: p_(i,d-1) = p_(i,3) is fastest")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Jumpy steps
#
# `001`'s last objection: the same token at positions 1 and 2 differs by
# $p_2 - p_1 = [0,1,0] - [0,0,1] = [0,1,-1]$, and more generally the distance between
# neighbours jumps around: 1 when only the last bit flips, $\sqrt 2$ when two flip, up to
# $\sqrt d$ when a carry runs through every bit. A small shift of the sentence (one token
# more or less in front) moves different positions by very different amounts. The
# sinusoidal code of chapter 3, in contrast, keeps every neighbour at the same distance.

# %% slideshow={"slide_type": "fragment"}
assert (B3[2] - B3[1]).tolist() == [0, 1, -1]
step_binary = (B6[1:] - B6[:-1]).norm(dim=-1)
S6 = pl.sinusoidal_positions(64, 6, device=device)
step_sin = (S6[1:] - S6[:-1]).norm(dim=-1)
assert step_binary.min() == 1 and abs(step_binary.max().item() - 6**0.5) < 1e-5  # from 1 to sqrt(d)
torch.testing.assert_close(step_sin, step_sin[:1].expand(63))  # constant for sinusoids
print("p_2 - p_1 =", (B3[2] - B3[1]).int().tolist())

fig, ax = viz.figure(width=5.5, height=3.0)
ax.bar(range(63), step_binary.cpu(), width=0.8, label="binary, d = 6")
ax.plot(range(63), step_sin.cpu(), "k-", lw=2, label="sinusoidal, d = 6")
ax.set(xlabel="position i", ylabel="‖p_(i+1) − p_i‖", title="distance between neighbours")
ax.legend(loc="upper left")
fig

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4 · Is there a fixed linear map from $p_i$ to $p_{i+k}$?
#
# `001` states that binary codes satisfy property 2: knowing $p_i$ we can get $p_{i+k}$
# simply. The precise form of that property, the one sinusoids have (chapter 3), is a fixed
# matrix $M_k$ with $p_{i+k} = M_k\,p_i$ for **every** $i$. Test it.
#
# **Linear?** No: $p_0 = [0,\dots,0]$, and any matrix maps $0$ to $0$, but $p_k \ne 0$.

# %% slideshow={"slide_type": "fragment"}
M = torch.randn(6, 6).to(device)  # any matrix at all
assert torch.equal(M @ B6[0], torch.zeros(6, device=device)) and B6[1:].abs().sum(-1).min() > 0
print("M p_0 = 0 for every M, but p_k != 0 for k = 1..63: no linear M_k")


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Affine?** Allow a shift as well, $p_{i+k} = M_k p_i + b_k$, and find the best $M_k, b_k$
# by least squares over all pairs $(p_i, p_{i+k})$ in the 64-position table. A residual of
# zero would mean an exact fit. For the sinusoidal code (same $d = 6$) the fit is exact for
# every $k$; for the binary code it fails for every small offset.

# %% slideshow={"slide_type": "fragment"}
def affine_residual(table, k):
    """Smallest || [p_i, 1] A - p_(i+k) || over all (d+1) x d matrices A, in float64."""
    t = table.double().cpu()
    inputs = torch.cat([t[:-k], torch.ones(len(t) - k, 1, dtype=torch.float64)], dim=1)
    fit = torch.linalg.lstsq(inputs, t[k:], driver="gelsd").solution
    return (inputs @ fit - t[k:]).norm().item()


offsets = range(1, 64)
res_binary = torch.tensor([affine_residual(B6, k) for k in offsets])
res_sin = torch.tensor([affine_residual(S6, k) for k in offsets])
assert (res_binary[:15] > 1).all()  # k = 1 .. 15: no affine map
assert (res_sin < 1e-4).all()  # sinusoids: an exact linear map for every k
exact = [k for k, r in zip(offsets, res_binary) if r < 1e-9]
print("binary code, offsets k with an exact affine fit:", exact)

# %% [markdown] slideshow={"slide_type": "fragment"}
# The few exact fits are artefacts of a finite table: for $k = 16, 32, 48, \ldots$ only the
# high bits change, and for $k$ near 64 so few pairs remain that a map through them is easy.
# For every $k$ from 1 to 15 the residual is large.

# %% slideshow={"slide_type": "fragment"}
fig, ax = viz.figure(width=5.5, height=3.0)
ax.bar(list(offsets), res_binary, width=0.8, label="binary")
ax.plot(list(offsets), res_sin, "k.", label="sinusoidal")
ax.set(xlabel="offset k", ylabel="least-squares residual", title="best affine map p_i → p_(i+k), d = 6")
ax.legend()
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# **What the code shows.** $p_{i+k}$ is a *function* of $p_i$ (add $k$ in binary), but not a
# linear or affine one: which bits flip depends on the carries, that is, on $i$. So binary
# codes do not satisfy property 2 in the sense sinusoids do, contrary to `001`. The integer
# code does satisfy it, as a shift; the sinusoidal code satisfies it as a rotation.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5 · Sinusoids as smooth binary digits
#
# Look at bit $k$ of $i$, counting from the least significant ($k = 0$). It is 0 for
# $2^k$ positions, then 1 for $2^k$ positions: a square wave with period $2^{k+1}$. A sine
# of the same period, shifted by half a step, has exactly the opposite sign pattern:
#
# $$\text{bit}_k(i) = 1 \iff \sin\!\left(\frac{\pi\,(i + \tfrac12)}{2^k}\right) < 0 .$$
#
# Drop the hard threshold and keep the smooth wave, $(1 - \sin(\pi(i+\frac12)/2^k))/2$, and
# each bit becomes a continuous digit. The cell checks the identity for all 64 positions and
# 6 bits; the figure overlays the bits and their smooth versions.

# %% slideshow={"slide_type": "fragment"}
pos64 = torch.arange(64, dtype=torch.float64)
for k in range(6):
    bit = (torch.arange(64) >> k) & 1
    wave = torch.sin(torch.pi * (pos64 + 0.5) / 2**k)
    assert torch.equal(bit.bool(), wave < 0)
    torch.testing.assert_close(B6[:, 5 - k].cpu().long(), bit)  # the library's column 5 - k is bit k
print("bit k of i == (sin(pi (i + 1/2) / 2**k) < 0) for i < 64, k < 6")

fine = torch.linspace(-0.5, 15.5, 400, dtype=torch.float64)
fig, ax = viz.figure(width=5.5, height=3.4)
for k in range(4):
    offset = 1.5 * k
    line, = ax.step(range(16), ((torch.arange(16) >> k) & 1) + offset, where="mid", lw=1.5)
    ax.plot(fine, (1 - torch.sin(torch.pi * (fine + 0.5) / 2**k)) / 2 + offset, "--", color=line.get_color())
ax.set(xlabel="position i", yticks=[1.5 * k + 0.5 for k in range(4)],
       yticklabels=[f"bit {k}" for k in range(4)], ylabel="bit k (0 = least significant)",
       title="bits (steps) and sinusoids of period 2^(k+1) (dashed)")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# The bits' frequencies halve from one digit to the next: $\pi, \pi/2, \pi/4, \ldots$.
# The sinusoidal code of Vaswani et al. uses frequencies $\theta_j = \text{base}^{-2j/d}$,
# which also shrink by a constant factor per pair, $\text{base}^{-2/d}$. With
# $\text{base} = 2^{d/2}$ that factor is exactly $1/2$, like the bits; with the usual
# base 10000 and $d = 512$ it is about 0.965: many more, slowly spaced "digits". Each digit
# is a sine *and* a cosine, which is what makes the fixed rotation $M_k$ of chapter 3
# possible.

# %% slideshow={"slide_type": "fragment"}
d8 = 8
theta = pl.rope_frequencies(d8, base=2 ** (d8 / 2))
torch.testing.assert_close(theta[1:] / theta[:-1], torch.full((3,), 0.5))
theta512 = pl.rope_frequencies(512, dtype=torch.float64)
ratio512 = theta512[1:] / theta512[:-1]
torch.testing.assert_close(ratio512, torch.full_like(ratio512, 10000 ** (-2 / 512)))
print("base 2**(d/2): theta_j =", theta.tolist())
print("base 10000, d = 512: ratio between neighbouring frequencies =", round(ratio512[0].item(), 4))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each exercise has a cell for your answer and a checker that says what is right or wrong, with
# a hint. The worked solution follows, collapsed (expand it only after trying), then a cell that
# checks it. In a graded copy (`make student`) the solution cell is empty: write your answer there.
#
# **Exercise 1.** Write the 5-bit binary code of position 13, most significant bit first,
# as a list of 0s and 1s.

# %% slideshow={"slide_type": "fragment"}
answer = None  # e.g. [0, 0, 0, 0, 0]
check.binary_code(answer)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "binary_code_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
answer = None  # e.g. [0, 0, 0, 0, 0]
### BEGIN SOLUTION
answer = [0, 1, 1, 0, 1]  # 13 = 8 + 4 + 1
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "binary_code", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.binary_code(answer)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 2.** With normalised codes $p_i = i/m$ (one feature), what is $p_5 - p_3$ in a
# sentence of length $m = 8$, and in one of length $m = 16$? Answer as a pair.

# %% slideshow={"slide_type": "fragment"}
answer = None  # (for m = 8, for m = 16)
check.normalised_step(answer)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "normalised_step_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
answer = None  # (for m = 8, for m = 16)
### BEGIN SOLUTION
answer = (2 / 8, 2 / 16)  # two steps of 1/m each
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "normalised_step", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.normalised_step(answer)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 3.** Write `smallest_bits(n)`: the smallest number of bits $d \ge 1$ such that
# the binary code has a row for each of the positions $0, \ldots, n-1$ (for $n \ge 2$).
# Careful at powers of two.

# %% slideshow={"slide_type": "fragment"}
def smallest_bits(n):
    raise NotImplementedError  # your code


check.smallest_bits(smallest_bits)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "smallest_bits_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def smallest_bits(n):
    ### BEGIN SOLUTION
    return (n - 1).bit_length()  # the largest position, n - 1, needs this many bits
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "smallest_bits", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.smallest_bits(smallest_bits)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 4.** A token $x$ with $d = 64$ features has been layer-normalised (mean 0,
# variance 1). Add the integer code of position 3, $p_3 = 3\cdot\mathbf 1$. What is
# $\cos(x, x + p_3)$? Work it out on paper, then compute it.

# %% slideshow={"slide_type": "fragment"}
answer = None  # a number
check.integer_cosine(answer)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "integer_cosine_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
answer = None  # a number
### BEGIN SOLUTION
# x . 1 = 0 (mean 0), so ||x + p_3||^2 = d + 9 d and cos = d / (sqrt(d) sqrt(10 d)) = 1 / sqrt(10)
answer = 1 / 10**0.5
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "integer_cosine", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.integer_cosine(answer)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Summary
#
# | code | size against a normalised token | $p_i \to p_{i+k}$ | longer sequences |
# |---|---|---|---|
# | integer $i\cdot\mathbf 1$ | $i$ times larger; erased by LayerNorm | shift by $k\cdot\mathbf 1$ | any length, ever larger |
# | normalised $i/m$ | at most as large | depends on $m$ | same position, new code |
# | binary | at most as large, jumpy | no linear or affine map | at most $2^d$ positions |
#
# Sinusoids keep what is good in binary codes (bounded, one fast and many slow digits) and
# replace the bits by smooth waves: chapter 3.
#
# ## Errata in the sources
#
# 1. **Binary codes and property 2.** `001` says binary codes satisfy property 2 (from $p_i$
#    one gets $p_{i+k}$ simply). No fixed linear map exists ($p_0 = 0$), and least squares
#    finds no affine one for any $k$ from 1 to 15 (section 4 asserts both).
# 2. **Bit index.** `001` calls the fastest bit $p_{i,d}$; with $d$ bits numbered from 0 it
#    is $p_{i,d-1}$ (section 3 asserts it flips at every step and that column $d$ does not
#    exist).
# 3. **"Small mean and variance".** `001` says layer-normalised inputs have small mean and
#    variance. Per token, LayerNorm makes them exactly 0 and 1 (before its learned scale
#    and shift); the trouble is not that the token is small but that $i\cdot\mathbf 1$ grows
#    without bound (section 1 asserts $\lVert x_i\rVert = \sqrt d$).
# 4. **Not in the sources:** a LayerNorm after the sum removes the integer code entirely,
#    since $i\cdot\mathbf 1$ is a per-token mean (section 1). And the binary code's "fixed
#    signal-to-noise problem" is only bounded: at position $2^d - 1$ the code is as long as
#    the token (section 3).
