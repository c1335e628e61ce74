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
# # 3 · Sinusoids: smooth binary digits
#
# Chapter 2 (§5) already read each binary digit as a wave, $\text{bit}_b(i) = 1 \iff
# \sin(\pi(i+\tfrac12)/2^b) < 0$, with frequencies that shrink by a constant factor per digit.
# Keep the smooth waves as the code, each digit a sine/cosine pair that turns at its own speed,
# and you get the encoding of *Attention Is All You Need* (Vaswani et al., 2017). This chapter
#
# 1. builds the table and reproduces a source's printed numbers digit for digit;
# 2. draws it, in both column layouts found in the wild;
# 3. proves that moving k positions is one fixed rotation $M_k$, whatever the start;
# 4. shows why each pair needs a sine **and** a cosine: for sines alone no affine map does it;
# 5. measures how the dot product of two encodings depends on their distance, and when an
#    attention score built from them depends on the offset alone (the road to RoPE);
# 6. weighs two explanations of why token embeddings are scaled before the encoding is added,
#    and why the code is added rather than concatenated;
# 7. packages the table as a module, fixing the errors the source modules make.
#
# Sources followed: `000` (the formula and $X\cdot M + P$), `002` (a PyTorch walk-through with a
# printed table and a heatmap), `003` (a module; its list-comprehension builder, timed against the
# vectorised one, is in the appendix notebook `10_making_it_fast`); `004` for one
# typo, which it copies from RoFormer (Su et al., 2021). Every correction is proved in a cell
# and listed at the end.
#
# Notation and signs (0-based positions, offsets as key minus query, bit and pair orders) follow
# the course's [conventions page](00_index.ipynb#Conventions). That page writes an offset $j - i$;
# this chapter writes $n - m$ (query at $m$, key at $n$), since here $j$ counts pairs.

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import ast
import math

import ipywidgets as widgets
import torch
from torch import nn

import posenc_lib as pl
from posenc_lib import check, viz

viz.use_style()  # white figures, dark text: readable in light and dark themes

g = torch.manual_seed(0)
torch.set_printoptions(precision=4, sci_mode=None)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1 · The formula
#
# Row $i$ of the table $P \in \mathbb{R}^{n\times d}$ is the **code** $p_i$ of position $i$ (the
# papers write $PE(i)$). Its $d$ columns form $d/2$ pairs; pair $j$ turns at frequency $\theta_j$
# radians per position:
#
# $$p_{i,2j} = \sin(i\,\theta_j), \qquad p_{i,2j+1} = \cos(i\,\theta_j), \qquad
#   \theta_j = 10000^{-2j/d}, \quad j = 0, \dots, d/2-1 .$$
#
# Throughout the chapter $i$ (and $m$, $n$ in §6 and the exercises) is a position and $p_i$ its code; when a matrix
# acts on a code, the code is a **column** vector, as in chapters 4 and 5 ($P$ stores the codes as
# its rows).
#
# Here $j$ counts **pairs**, so the exponent $2j/d$ runs over $0, 2/d, 4/d, \dots, (d-2)/d$:
# pair 0 turns one radian per position, the last pair $10000^{-(d-2)/d} = 10000^{2/d}/10000$ radian:
# close to $1/10000$ for a large $d$ (1.15e-4 at $d = 128$), but 6.3e-4 at the $d = 10$ below.
# Vaswani et al. say the same in wavelengths: $2\pi/\theta_j$ forms a geometric progression from
# $2\pi$ towards $10000 \cdot 2\pi$, each pair's wavelength $10000^{2/d}$ times the last one's (1.155 at
# $d = 128$), the slowest stopping that factor short of $10000 \cdot 2\pi$.
# These are exactly the frequencies RoPE uses in chapter 5, so they live in one function,
# `pl.rope_frequencies`. Written out for $d = 10$, and the table built from them once by hand for 4
# positions (every angle $i\,\theta_j$ as an outer product, its sine and cosine, interleaved into
# columns $2j$ and $2j+1$), checked against the library's `pl.sinusoidal_positions`:

# %% slideshow={"slide_type": "fragment"}
d = 10
theta = pl.rope_frequencies(d)
by_hand = torch.tensor([10000 ** (-2 * j / d) for j in range(d // 2)])
torch.testing.assert_close(theta, by_hand)
assert theta[0] == 1 and 1e-4 < theta[-1] == 10000 ** (-(d - 2) / d)
assert round(theta[-1].item(), 5) == 6.3e-4 and round(pl.rope_frequencies(128)[-1].item(), 6) == 1.15e-4
assert pl.rope_frequencies(8, base=10.0)[0] == 1  # pair 0 turns one radian per position for any base
waves = 2 * math.pi / pl.rope_frequencies(128, dtype=torch.float64)  # Vaswani's wavelengths, d = 128
ratio = waves[1:] / waves[:-1]
assert torch.allclose(ratio, torch.full_like(ratio, 10000 ** (2 / 128))) and round(ratio[0].item(), 3) == 1.155
assert waves[0] == 2 * math.pi and math.isclose(waves[-1] * 10000 ** (2 / 128), 10000 * 2 * math.pi)
angles = torch.outer(torch.arange(4.0), theta)  # row i, column j: the angle i θ_j
by_hand_table = torch.stack([angles.sin(), angles.cos()], dim=-1).flatten(1)  # sin, cos of pair 0, then pair 1, ...
torch.testing.assert_close(by_hand_table, pl.sinusoidal_positions(4, d))
print("theta_j for d = 10:", theta)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### The source's printed table, reproduced
#
# Source `002` builds the table for `max_len = 4` positions and `d_model = 10` features and prints
# it. Below are its printed numbers as data; the next cell asserts that
# `pl.sinusoidal_positions(4, 10)` rounds to exactly the same digits (4 decimals in scientific
# notation, as PyTorch prints them).

# %% slideshow={"slide_type": "fragment"}
printed_in_002 = [
    [0.0000e+00, 1.0000e+00, 0.0000e+00, 1.0000e+00, 0.0000e+00, 1.0000e+00, 0.0000e+00, 1.0000e+00, 0.0000e+00, 1.0000e+00],
    [8.4147e-01, 5.4030e-01, 1.5783e-01, 9.8747e-01, 2.5116e-02, 9.9968e-01, 3.9811e-03, 9.9999e-01, 6.3096e-04, 1.0000e+00],
    [9.0930e-01, -4.1615e-01, 3.1170e-01, 9.5018e-01, 5.0217e-02, 9.9874e-01, 7.9621e-03, 9.9997e-01, 1.2619e-03, 1.0000e+00],
    [1.4112e-01, -9.8999e-01, 4.5775e-01, 8.8908e-01, 7.5285e-02, 9.9716e-01, 1.1943e-02, 9.9993e-01, 1.8929e-03, 1.0000e+00],
]
table = pl.sinusoidal_positions(4, 10)


def as_printed(rows):
    return [[f"{x:.4e}" for x in row] for row in rows]


assert as_printed(table.tolist()) == as_printed(printed_in_002), "the table no longer matches the source"
print(table)

# %% [markdown] slideshow={"slide_type": "subslide"}
# Reading the table: column 0 is $\sin(i)$, one radian per step, so it rises and already falls
# back (0, 0.84, 0.91, 0.14); column 8 is $\sin(i \cdot 10000^{-8/10})$ and barely moves. Row 0 is
# $[0, 1, 0, 1, \dots]$ for every $d$: sine 0 and cosine 1. Every pair lies on the unit circle,
# so every row has the same length $\sqrt{d/2}$:

# %% slideshow={"slide_type": "fragment"}
pairs = table.unflatten(-1, (d // 2, 2))
torch.testing.assert_close(pairs.norm(dim=-1), torch.ones(4, d // 2))
torch.testing.assert_close(table.norm(dim=-1), torch.full((4,), math.sqrt(d / 2)))
for dd in (2, 10, 512):
    assert torch.equal(pl.sinusoidal_positions(1, dd)[0], torch.tensor([0.0, 1.0]).repeat(dd // 2))
print("row norms:", table.norm(dim=-1), " sqrt(d/2) =", round(math.sqrt(d / 2), 4))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Two slips in the sources' ranges and indices
#
# Source `002` says the position runs "from 0 to max_len" and the even index `_2i` "from 0 to
# d_model". Its own code uses `torch.arange`, which stops *before* the end: positions are
# $0, \dots, \text{max\_len}-1$ and the even index is $0, 2, \dots, d_\text{model}-2$. Had `_2i`
# really reached $d_\text{model}$, there would be $d/2 + 1$ sine columns for $d/2$ slots.

# %% slideshow={"slide_type": "fragment"}
max_len, d_model = 4, 10
pos = torch.arange(0, max_len)
two_j = torch.arange(0, d_model, 2)
assert pos[-1] == max_len - 1 and pos[-1] != max_len
assert two_j[-1] == d_model - 2 and two_j.numel() == d_model // 2
too_many = torch.arange(0, d_model + 1, 2)  # "from 0 to d_model" taken literally
assert too_many.numel() == d_model // 2 + 1 != table[:, 0::2].shape[1]
print("positions:", pos.tolist(), " even indices 2j:", two_j.tolist())

# %% [markdown] slideshow={"slide_type": "fragment"}
# Source `004` writes $p_{i,2t} = \sin(k / 10000^{2t/d})$ and $p_{i,2t+1} = \cos(k/10000^{2t/d})$.
# The slip is not `004`'s own: it copies equation (4) of RoFormer (Su et al., 2021,
# arXiv:2104.09864, §2.2, where the paper restates Vaswani et al.'s code), which has this typo.
# The left side is indexed by position $i$ but the right side uses $k$, which is not defined
# there. Read literally (one fixed $k$), every row would be the same vector and positions could
# not be told apart. The correct right side uses $i$: $\sin(i/10000^{2t/d})$.

# %% slideshow={"slide_type": "fragment"}
k_fixed = 3
literal_004 = torch.sin(k_fixed * pl.rope_frequencies(8)).expand(5, -1)  # the sine columns, k in place of i
assert (literal_004 == literal_004[0]).all(), "with a fixed k every row is identical"
sines = pl.sinusoidal_positions(5, 8)[:, 0::2]
assert len({tuple(r) for r in sines.tolist()}) == 5, "with i every row differs"
print("distinct rows with k:", len({tuple(r) for r in literal_004.tolist()}), "· with i:", 5)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2 · The heatmap
#
# Source `002` draws the table of `PositionalEmbedding(40, 20)` — $d_\text{model} = 40$ features,
# `max_len` $= 20$ positions — with positions down the y-axis and features along the x-axis.
# (It uses the `coolwarm` map; our figures use one diverging map centred on 0 throughout.)
# Left columns (fast pairs) flicker from row to row; right columns (slow pairs) hardly change:
# the smooth version of chapter 2's low and high bits, **mirrored**: chapter 2 writes a binary
# code as numbers are written, the slow high bit on the left and the fast bit 0 on the right,
# while the sinusoidal table puts its fastest pair ($j = 0$) on the left. Read one against the
# other from opposite ends. (The cell checks both directions.)

# %% slideshow={"slide_type": "fragment"}
P = pl.sinusoidal_positions(20, 40)
step = P.diff(dim=0).abs().mean(dim=0)  # mean change from one row to the next, per column
assert (step[:2] > 0.5).all() and (step[-2:] < 1e-3).all()  # fast pair 0 vs slow pair 19
bits = pl.binary_positions(64, 6)
flips = (bits[1:] != bits[:-1]).sum(0)  # per column: how often it changes
assert flips.argmax() == 5 and flips.argmin() == 0  # binary: fastest column on the right, slowest on the left
fig, ax = viz.figure(width=6.0, height=3.6)
viz.heatmap(P, ax=ax, colorbar="value",
            xlabel="embedding dimension (d_model = 40)", ylabel="position (max_len = 20)",
            title="sinusoidal encoding, interleaved sin/cos")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# Explore: change the number of features, the number of positions, the base and the column
# layout (next section). A larger base stretches the slow wavelengths; a small one shortens every
# wavelength but pair 0's ($\theta_0 = 1$ for any base). Predict before sliding: at base 10
# ($d = 64$, 64 positions), does the rightmost pair still look constant? (The answer is asserted
# below the widget.)

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
pe_widget = viz.interactive_heatmap(
    lambda d, n, base, layout: pl.sinusoidal_positions(n, d, base=base, layout=layout),
    title=lambda d, n, base, layout: f"d = {d}, n = {n}, base = {base:g}",
    xlabel="embedding dimension", ylabel="position", colorbar="value", diverging=True, figsize=(4.6, 3.4),
    d=widgets.IntSlider(64, min=4, max=256, step=2, description="d_model"),
    n=widgets.IntSlider(64, min=4, max=256, step=4, description="length"),
    base=widgets.FloatLogSlider(10000, base=10, min=1, max=6, step=0.5, description="base"),
    layout=widgets.Dropdown(options=["interleaved", "concat"], description="layout"),
)
pe_widget

# %% slideshow={"slide_type": "fragment"}
# The answer: no. At base 10 the slowest pair of d = 64 turns 10^(-62/64) ≈ 0.107 rad per position, more than a
# full turn over the 64 rows.
slow_at_10 = pl.rope_frequencies(64, base=10.0, dtype=torch.float64)[-1].item()
assert round(slow_at_10, 3) == 0.107 and 63 * slow_at_10 > 2 * math.pi
print(f"base 10, d = 64: the slowest pair turns {slow_at_10:.3f} rad per position, {63 * slow_at_10:.2f} rad over 64 rows")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Why keep the slow columns at all? Pair 0 alone already gives every position its own code
# (property 1 of chapter 0): its angle $i$ radians never comes back to the same value mod $2\pi$,
# as $\pi$ is irrational. Distinct is not distinguishable, though: among the first 100 000
# positions, 0 and 710 (within $6.0\cdot10^{-5}$ of 113 whole turns, as $\pi \approx 355/113$) have
# pair-0 codes only $6.0\cdot10^{-5}$ apart; the slower pairs set them far apart (by 9.95 in a
# $d = 128$ code). That is what the slow pairs are for.

# %% slideshow={"slide_type": "fragment"}
pair0 = pl.sinusoidal_positions(100_000, 2, dtype=torch.float64)  # pair 0 alone, positions 0 .. 99 999
assert torch.unique(pair0, dim=0).shape[0] == 100_000  # no two rows equal
gaps = torch.cdist(pair0[:1], pair0[1:]).flatten()  # how close pair 0 puts every position to position 0
assert gaps.argmin().item() + 1 == 710 and round(gaps.min().item(), 6) == 6.0e-5  # distinct, but crowded
assert round(710 - 113 * 2 * math.pi, 6) == 6.0e-5 and 2 * 355 == 710 and abs(355 / 113 - math.pi) < 3e-7  # π ≈ 355/113
gap_128 = pl.sinusoidal_positions(711, 128, dtype=torch.float64)[[0, 710]].diff(dim=0).norm().item()
assert round(gap_128, 2) == 9.95  # the slower pairs set them apart
print(f"positions 0 and 710: pair 0 alone {gaps.min():.1e} apart, the d = 128 code {gap_128:.2f} apart")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3 · Interleaved or concatenated?
#
# The paper's formula **interleaves**: columns $[\sin\theta_0, \cos\theta_0, \sin\theta_1,
# \cos\theta_1, \dots]$ (`layout="interleaved"`, our default). Google's tensor2tensor and
# Facebook's fairseq **concatenate**: all sines, then all cosines (the layout of `layout="concat"`,
# though not its frequencies: see the parenthesis); the
# heatmap in Jay Alammar's *Illustrated Transformer* is drawn from tensor2tensor, so it shows
# the concatenated form, split into a left and a right half (a July 2020 update of that post
# adds the interleaved picture). (Both libraries also space their
# frequencies as $10000^{-j/(d/2-1)}$ rather than $10000^{-2j/d}$, so their slowest pair is
# exactly $1/10000$; fairseq's `get_embedding` docstring says its version matches tensor2tensor
# but "differs slightly" from the paper. The second cell below checks fairseq's numbers, through
# the copy transformers ships.)
#
# With the same frequencies the two layouts hold **the same columns in a different order**: the
# permutation $[0, 2, 4, \dots, d-2, 1, 3, \dots, d-1]$ — the one chapter 5 needs to convert
# between RoPE's interleaved and half-split pairings (`pl.layout_permutation`). For a linear layer
# that reads the stream, the layout does not matter when the token embeddings are learned too:
# permuting the token embeddings' columns and the layer's weight rows the same way gives the same
# outputs (the cell checks it for one random projection). With the embeddings and weights held
# fixed, swapping the layout changes the outputs (the cell checks that too).

# %% slideshow={"slide_type": "fragment"}
d, n = 16, 50
inter = pl.sinusoidal_positions(n, d, layout="interleaved")
concat = pl.sinusoidal_positions(n, d, layout="concat")
perm = pl.layout_permutation(d)
assert torch.equal(inter[:, perm], concat), "same columns, permuted"
assert not torch.equal(inter, concat), "but not the same table"
W_read = torch.randn(d, 4, generator=torch.Generator().manual_seed(0))  # any weights that read the stream
torch.testing.assert_close(concat @ W_read, inter @ W_read[perm.argsort()])  # the same outputs, rows of W permuted
x_tok = torch.randn(n, d, generator=torch.Generator().manual_seed(1))  # token embeddings, interleaved model
torch.testing.assert_close((x_tok[:, perm] + concat) @ W_read, (x_tok + inter) @ W_read[perm.argsort()])  # learned: same
assert not torch.allclose((x_tok + concat) @ W_read, (x_tok + inter) @ W_read)  # fixed x and W, layout swapped: not
print("interleaved column for each concat column:", perm.tolist())

# %% slideshow={"slide_type": "fragment"}
pos50 = torch.arange(n, dtype=torch.float64)[:, None]
theta_fairseq = 10000.0 ** (-torch.arange(d // 2, dtype=torch.float64) / (d // 2 - 1))  # 10000^(-j/7) for d = 16
assert theta_fairseq[-1] == 1e-4  # the slowest pair turns exactly 1/10000 radian per position
fairseq_form = torch.cat([torch.sin(pos50 * theta_fairseq), torch.cos(pos50 * theta_fairseq)], dim=1).float()
from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

hf_table = M2M100SinusoidalPositionalEmbedding.get_embedding(n, d)  # fairseq's builder, as transformers ships it
torch.testing.assert_close(hf_table, fairseq_form)  # concatenated, theta_j = 10000^(-j/(d/2-1))
assert not torch.allclose(hf_table, concat, atol=0.1)  # not the paper's frequencies, even in the concat layout
assert (fairseq_form - concat).abs().max() > 1  # same layout, other frequencies: a different table
assert (fairseq_form - inter).abs().max() > 1  # and not the interleaved one either
print("fairseq's table (transformers' M2M100 copy): concatenated, theta_j = 10000^(-j/7) for d = 16;",
      "not the paper's table in either layout")

# %% slideshow={"slide_type": "subslide"}
fig, axes = viz.figure(2, width=3.8, height=3.2)
for ax, (name, t) in zip(axes, [("interleaved (paper)", inter), ("concat (the paper's frequencies)", concat)]):
    viz.heatmap(t, ax=ax, title=name, xlabel="column", ylabel="position", colorbar="value", diverging=True)
fig

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4 · A shift by k is one fixed rotation
#
# The paper picked sinusoids hoping the model could learn to attend by *relative* position,
# because for every fixed offset $k$ the code $p_{i+k}$ is a linear function of the code $p_i$.
# Source `002` cites Timo Denk's post
# [Linear Relationships in the Transformer's Positional Encoding](https://blog.timodenk.com/linear-relationships-in-the-transformers-positional-encoding/)
# for a proof; here is one. Fix pair $j$ and write $a = i\,\theta_j$ (where
# position $i$ is) and $b = k\,\theta_j$ (how far we move). The angle-addition formulas
#
# $$\sin(a+b) = \cos b \,\sin a + \sin b\,\cos a, \qquad \cos(a+b) = -\sin b\,\sin a + \cos b\,\cos a$$
#
# say, in matrix form,
#
# $$\begin{pmatrix}\sin((i+k)\theta_j)\\ \cos((i+k)\theta_j)\end{pmatrix}
#  = \underbrace{\begin{pmatrix}\cos k\theta_j & \sin k\theta_j\\ -\sin k\theta_j & \cos k\theta_j\end{pmatrix}}_{B_j(k)}
#    \begin{pmatrix}\sin i\theta_j\\ \cos i\theta_j\end{pmatrix}.$$
#
# $B_j(k)$ contains $k$ and $\theta_j$ but **not $i$**. Stacking the $d/2$ blocks on the diagonal
# gives $M_k = \operatorname{diag}(B_0(k), \dots, B_{d/2-1}(k))$ with
# $p_{i+k} = M_k\,p_i$ for every $i$. Each block is a rotation (orthogonal, determinant 1), so
# $M_k$ is a rotation too, and $M_{k}M_{l} = M_{k+l}$.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **The library's name for $M_k$.** Chapter 5's RoPE multiplies queries and keys by block-diagonal
# rotations by the same angles $m\theta_j$, which the library builds as `pl.rope_matrix(m, d)`. Our
# $M_k$ is one of them: `pl.rope_matrix(-k, d)`, which equals the transpose of `pl.rope_matrix(k, d)`.
# The minus sign comes from the order in each pair: read as a point $(x, y)$, a pair holds
# $(\sin, \cos)$, so moving on turns it **clockwise** (position 0 sits at $(0, 1)$ and moves towards
# $(1, 0)$), while the rotation $R_m$ of the [conventions page](00_index.ipynb#Conventions) turns
# counter-clockwise. The next cell builds $M_k$ block by block from the formula above and checks
# all three.

# %% slideshow={"slide_type": "fragment"}
def shift_matrix_by_blocks(k, d):
    """M_k from the proof: block j = [[cos kθ_j, sin kθ_j], [-sin kθ_j, cos kθ_j]] (teaching form)."""
    blocks = []
    for t in (k * pl.rope_frequencies(d, dtype=torch.float64)).tolist():
        blocks.append(torch.tensor([[math.cos(t), math.sin(t)], [-math.sin(t), math.cos(t)]], dtype=torch.float64))
    return torch.block_diag(*blocks)


f64 = pl.rope_frequencies(8, dtype=torch.float64)  # float64 frequencies: exact checks below
M3 = pl.rope_matrix(-3, 8, inv_freq=f64)
torch.testing.assert_close(shift_matrix_by_blocks(3, 8), M3)
torch.testing.assert_close(M3, pl.rope_matrix(3, 8, inv_freq=f64).T)
xy0, xy1 = pl.sinusoidal_positions(2, 8, dtype=torch.float64).view(2, 4, 2)  # positions 0 and 1, pairs as (x, y)
assert torch.equal(xy0, torch.tensor([[0.0, 1.0]] * 4, dtype=torch.float64))  # every pair starts at (0, 1)
assert (xy0[:, 0] * xy1[:, 1] - xy0[:, 1] * xy1[:, 0] < 0).all()  # negative cross product: clockwise, every pair
print("M_3 for d = 8 (rounded):\n", M3.to(torch.float32))

# %% [markdown] slideshow={"slide_type": "subslide"}
# Now the claim itself, numerically, in float64: for $d = 64$, 300 starting positions $i$ and
# every offset $k$ from −100 to 100, $p_{i+k} = M_k\,p_i$ with **one** $M_k$ per offset. For the
# concatenated layout the pairs are columns $(j, j + d/2)$, RoPE's "half" pairing, so the same
# matrix spread over those rows works: `pl.rope_matrix(-k, d, layout="half")`.

# %% slideshow={"slide_type": "fragment"}
d = 64
f64 = pl.rope_frequencies(d, dtype=torch.float64)
starts = torch.arange(100, 400)  # 300 starting positions i
ks = torch.arange(-100, 101)  # 201 offsets
worst = 0.0
for lay, pair_layout in (("interleaved", "interleaved"), ("concat", "half")):
    P = pl.sinusoidal_positions(600, d, layout=lay, dtype=torch.float64)
    M = torch.stack([pl.rope_matrix(-k, d, layout=pair_layout, inv_freq=f64) for k in ks.tolist()])  # (201, d, d)
    shifted = P[starts] @ M.transpose(1, 2)  # slice k, row i: (M_k p_i)^T; shape (201, 300, d)
    target = P[ks[:, None] + starts]  # p_(i + k), same shape
    worst = max(worst, (shifted - target).abs().max().item())
assert worst < 1e-9
M5, M7 = pl.rope_matrix(-5, d, inv_freq=f64), pl.rope_matrix(-7, d, inv_freq=f64)
torch.testing.assert_close(M5 @ M7, pl.rope_matrix(-12, d, inv_freq=f64))  # M_k M_l = M_{k+l}
torch.testing.assert_close(M5 @ M5.T, torch.eye(d, dtype=torch.float64))  # orthogonal ...
assert abs(torch.linalg.det(M5).item() - 1) < 1e-9  # ... with determinant 1: a rotation
print(f"201 offsets x 300 positions x 2 layouts: largest error below 1e-9: {worst < 1e-9}")

# %% [markdown] slideshow={"slide_type": "fragment"}
# The paper had a second hope (Vaswani et al., §3.5): that sinusoids "may allow the model to
# extrapolate to sequence lengths longer than the ones encountered during training", where a
# learned table has no rows (chapter 2). The rotation just proved holds at every position, but a
# code defined everywhere is not a model that understands it everywhere: chapter 7 (§3, *Train
# short, test long*) trains small models on short inputs and tests whether that hope is kept.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5 · Why a sine *and* a cosine?
#
# Look again at the proof in §4: the new sine $\sin((i+k)\theta_j) = \cos k\theta_j\,\sin i\theta_j +
# \sin k\theta_j\,\cos i\theta_j$ is built from the old sine **and the old cosine**. Keep only the
# sines and a map from $p_i$ to $p_{i+k}$ would have to produce the missing
# $\sin k\theta_j \cos i\theta_j$ from sines. No *affine* map can, at any width, over all positions.
# Multiply a column by $\cos i\theta_j$ and average over the positions $i = 0, \dots, N-1$; write
# $\langle f \rangle$ for the limit of that average as $N$ grows. Then
#
# $$\langle \cos i\theta_j \cdot \cos i\theta_j \rangle = \tfrac12, \qquad
#   \langle 1 \cdot \cos i\theta_j \rangle = 0, \qquad
#   \langle \sin i\theta_l \cdot \cos i\theta_j \rangle = 0 \ \text{(every pair } l\text{, } j \text{ included)},$$
#
# $$\text{so}\quad \Big\langle \big(c_0 + \textstyle\sum_l c_l \sin i\theta_l\big) \cos i\theta_j \Big\rangle = 0
#   \quad\text{but}\quad \big\langle \sin((i+k)\theta_j) \cos i\theta_j \big\rangle = \tfrac12 \sin k\theta_j .$$
#
# Why: the first is the mean of $\cos^2$; $1 \cdot \cos i\theta_j$ is
# just $\cos i\theta_j$, which averages out, and by the product-to-sum formula
# $\sin i\theta_l \cos i\theta_j = \tfrac12[\sin i(\theta_l + \theta_j) + \sin i(\theta_l - \theta_j)]$, where
# $\theta_l + \theta_j$ is never a multiple of $2\pi$ (all $\theta$ lie in $(0, 1]$), so that sine
# averages out, and $\theta_l - \theta_j$ is either not a multiple of $2\pi$ or, for $l = j$, zero,
# and $\sin 0 = 0$. An affine map of the sines makes
# every output column a combination of 1 and the $\sin i\theta_l$, so its average against
# $\cos i\theta_j$ tends to 0; the target $\sin((i+k)\theta_j)$ has average
# $\tfrac12\sin k\theta_j$, which is 0 only when $k\theta_j$ is a multiple of $\pi$. The cell checks
# these averages for the fastest pair of a $d = 512$ table over 20 000 positions, the target's
# at $k = 3$ included ($\tfrac12 \sin 3 \approx 0.071$).
#
# Could a non-affine function do it? That depends on which positions count. Over all real
# positions and a **single** sine column, no function at all can: a sine does not say which angle
# it came from ($\sin a = \sin(\pi - a)$, and the two angles have cosines of opposite sign). Two
# sine columns do not escape it: the $d = 4$ table's sines ($\theta = 1$ and $0.01$) agree at
# $i = 49\pi \approx 153.94$ and $i + 2\pi$ (the first column has period $2\pi$; in the second the
# two angles add up to $\pi$), while their targets for $k = 1$ differ by about $6.3 \times 10^{-4}$ in
# the second column; the next cell checks this. On the integer positions the answer turns: there
# one does exist even for a single column, since $\sin i$ never repeats ($\pi$ is irrational), so
# $\sin i$ names $i$. That is no help to a linear layer.
#
# A finite table shows the same thing, less cleanly. Chapter 2 (§4) tested this property with a
# least-squares fit: the best affine map $p_{i+k} \approx M_k p_i + b_k$ over all pairs of a table;
# a residual of 0 means one map works for every $i$. The library holds that test as
# `pl.affine_shift_residual`, which returns the residual's norm; divided by the norm of the target
# rows it becomes a **relative** residual, 0 for an exact map and 1 for a map no better than
# predicting zeros. Run it on three tables of 64 positions:
# * **sin + cos**, 3 pairs (the chapter's table);
# * **sines only**, the 3 sine columns of that table;
# * **sines only, 6 frequencies**: the sine columns of the $d = 12$ table, as many columns as
#   sin + cos has, so the comparison is not just about fewer numbers.
#
# Then the control for the window itself. A finite window can hide what all positions show: with
# about as many columns as positions, least squares fits almost anything. So the cell repeats the
# test at $d = 256$: 128 sine columns over the same 64 positions, and over 1024.

# %% slideshow={"slide_type": "fragment"}
N_avg = 20_000  # the argument for all positions: averages against cos(i θ_0), d = 512
i_avg = torch.arange(N_avg, dtype=torch.float64)[:, None]
theta512 = pl.rope_frequencies(512, dtype=torch.float64)
cos0 = torch.cos(i_avg[:, 0] * theta512[0])
averages = {"cos(i θ_0) itself": (cos0 * cos0).mean().item(), "the constant 1": cos0.mean().item(),
            "the largest over the 256 sines": (cos0[:, None] * torch.sin(i_avg * theta512)).mean(0).abs().max().item()}
assert abs(averages["cos(i θ_0) itself"] - 0.5) < 1e-3
assert abs(averages["the constant 1"]) < 1e-3 and averages["the largest over the 256 sines"] < 2e-3
averages["the target sin((i+3) θ_0)"] = (cos0 * torch.sin((i_avg[:, 0] + 3) * theta512[0])).mean().item()
assert abs(averages["the target sin((i+3) θ_0)"] - math.sin(3) / 2) < 1e-3 and round(math.sin(3) / 2, 3) == 0.071
print("mean of cos(i θ_0) times ...:", {name: round(v, 4) for name, v in averages.items()})

theta4 = pl.rope_frequencies(4, dtype=torch.float64)  # the d = 4 table's two frequencies
torch.testing.assert_close(theta4, torch.tensor([1.0, 0.01], dtype=torch.float64))
i_a = torch.tensor(49 * math.pi, dtype=torch.float64)  # (π - 2π·0.01) / (2·0.01)
i_b = i_a + 2 * math.pi
torch.testing.assert_close(torch.sin(i_a * theta4), torch.sin(i_b * theta4))  # the same sine code ...
target_gap = (torch.sin((i_a + 1) * theta4) - torch.sin((i_b + 1) * theta4)).abs()
assert target_gap[0] < 1e-12 and 6.2e-4 < target_gap[1] < 6.4e-4  # ... two targets for k = 1
print(f"sines at i = {i_a.item():.3f} and i + 2π agree; targets for k = 1 differ by {target_gap[1].item():.2e}")

S = pl.sinusoidal_positions(64, 6, dtype=torch.float64)
tables = {
    "sin + cos (3 pairs)": S,
    "sines only (3 columns)": S[:, 0::2],
    "sines only (6 frequencies)": pl.sinusoidal_positions(64, 12, dtype=torch.float64)[:, 0::2],
}


def relative_residual(table, k):
    """The best affine map's residual over the table, as a fraction of the rows it must produce."""
    return pl.affine_shift_residual(table, k) / table[k:].norm().item()


shift_ks = list(range(1, 41))  # offsets with at least 24 pairs (p_i, p_i+k) left in the table
residual = {name: torch.tensor([relative_residual(t, k) for k in shift_ks]) for name, t in tables.items()}
assert residual["sin + cos (3 pairs)"].max() < 1e-12  # exact for every k
near_pi = torch.tensor([abs(math.sin(k)) < 0.2 for k in shift_ks])  # k·θ_0 = k rad close to a multiple of π
for name in ("sines only (3 columns)", "sines only (6 frequencies)"):
    r = residual[name]
    assert ((r < 0.1) <= near_pi).all(), name  # within 10% only where sin(k θ_0) is small
    assert (r > 0.1).sum() >= 37, name  # off by more than 10% at 37 or more of the 40 offsets
near_fits = {name: [k for k, x in zip(shift_ks, r) if x < 0.1] for name, r in residual.items() if "only" in name}
assert near_fits == {"sines only (3 columns)": [3, 22, 25], "sines only (6 frequencies)": [22, 25]}
best = {name: (shift_ks[int(r.argmin())], round(r.min().item(), 3)) for name, r in residual.items() if "only" in name}
assert best == {"sines only (3 columns)": (22, 0.022), "sines only (6 frequencies)": (22, 0.079)}
print("sines only, offsets 1..40 within 10%:", near_fits, "· sin(k) there:", {k: round(math.sin(k), 3) for k in (3, 22, 25)})
print("best offset and its relative residual:", best, "· sin + cos: below 1e-12 at every offset")

wide_ks = (1, 5, 22, 40)  # the control: a wide table, a short window and a long one
wide = {}
for n_pos in (64, 1024):
    W_tab = pl.sinusoidal_positions(n_pos, 256, dtype=torch.float64)
    wide[n_pos] = {"sines only": [round(relative_residual(W_tab[:, 0::2], k), 3) for k in wide_ks],
                   "sin + cos": max(relative_residual(W_tab, k) for k in wide_ks)}
assert min(wide[1024]["sines only"]) > 0.2  # not hidden by 1024 positions
sines64 = pl.sinusoidal_positions(64, 256, dtype=torch.float64)[:, 0::2]
for k in wide_ks:  # hidden by 64 positions, for any rank cutoff of the float64 solver
    x = torch.cat([sines64[:-k], torch.ones(64 - k, 1, dtype=torch.float64)], dim=1)
    for rcond in (None, 1e-13, 1e-8):
        fit = torch.linalg.lstsq(x, sines64[k:], rcond=rcond, driver="gelsd").solution
        assert (x @ fit - sines64[k:]).norm() < 0.05 * sines64[k:].norm(), (k, rcond)
assert wide[64]["sin + cos"] < 1e-12 and wide[1024]["sin + cos"] < 1e-12
print(f"d = 256, offsets {wide_ks}: sines only over 64 positions {wide[64]['sines only']}, "
      f"over 1024 {wide[1024]['sines only']}; sin + cos below 1e-12 in both")

# %% slideshow={"slide_type": "fragment"}
fig, ax = viz.figure(width=6.0, height=3.0)
for (name, r), style in zip(residual.items(), ("k.", "s", "^")):
    ax.plot(shift_ks, r, style, ms=4, label=name)
ax.set(xlabel="offset k", ylabel="relative residual", title="best affine map p_i → p_(i+k), 64 positions")
ax.legend(loc="upper right")
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# The sines-only fits come within 10% only at a few offsets ($k = 3, 22, 25$ with three columns,
# $22, 25$ with six): there $k\theta_0 = k$ radians lies near a multiple of $\pi$ ($22 \approx 7\pi$),
# so the missing term $\sin k\theta_0 \cos i\theta_0$ of the fastest pair is small. Close is not
# exact: the best of them, $k = 22$ with three columns, still misses by 2.2% of the target. At
# $d = 256$ the 64-position window hides the failure: a float64 least-squares fit over 128 sine
# columns and 64 positions comes within 5%, whatever rank cutoff the solver uses ($10^{-13}$ to
# $10^{-8}$ tried). A 1024-position window shows the failure again (over 20%), as the averages
# say it must. With the cosine in the table the fit is exact for every $k$ and every width: that
# is why every frequency gets a **pair** of columns.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6 · How similar are two positions?
#
# Take the dot product of two codes. Pair $j$ contributes
# $\sin a \sin b + \cos a\cos b = \cos(b - a)$, so with $b - a = k\theta_j$
#
# $$s(k) = p_i^\top p_{i+k} = \sum_{j=0}^{d/2-1} \cos(k\,\theta_j).$$
#
# The cells compute these angles with `pl.rope_angles(k, d)`: the table of $k\theta_j$, one row per
# offset $k$ and one column per pair (the name is chapter 5's, where RoPE turns by the same angles).
# Three facts follow, each asserted below for $d = 128$, positions up to 2048:
# * $s$ depends on the offset $k$ only, **not on $i$**: the Gram matrix $PP^\top$ is constant
#   along each diagonal;
# * $s(-k) = s(k)$: the dot product alone cannot tell "k before" from "k after";
# * $s(0) = d/2$ is the largest value, reached only at $k = 0$.
#
# Every code has squared length $s(0) = d/2$, so the distance between two codes depends on the
# offset alone too, the equal spacing chapter 2 promised: $\|p_{i+k} - p_i\|^2 = d - 2\,s(k)$.

# %% slideshow={"slide_type": "fragment"}
d, n_pos = 128, 2048
P = pl.sinusoidal_positions(n_pos, d, dtype=torch.float64)
offsets = torch.arange(-(n_pos - 1), n_pos)
s = pl.rope_angles(offsets, d, inv_freq=pl.rope_frequencies(d, dtype=torch.float64)).cos().sum(-1)
s_of = lambda k: s[k + n_pos - 1]  # s(k) for k in -(n_pos-1) .. n_pos-1
G = P @ P.T
for k in (0, 1, 7, 100, 511, 2047):
    torch.testing.assert_close(G.diagonal(k), s_of(k).expand(n_pos - k))  # the same for every i
torch.testing.assert_close(s, s.flip(0))  # s(-k) = s(k)
assert s_of(0) == d / 2 and (s[offsets != 0] < d / 2 - 1e-6).all()
for k in (1, 7, 100, 2047):  # equal spacing: the squared distance d - 2 s(k), the same for every i
    torch.testing.assert_close((P[k:] - P[: n_pos - k]).square().sum(-1), (d - 2 * s_of(k)).expand(n_pos - k))
print(f"s(0) = {s_of(0):.1f},  s(1) = {s_of(1):.2f},  s(10) = {s_of(10):.2f},  s(100) = {s_of(100):.2f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Decaying, but not monotonically.** For $d = 128$, $s(k)$ first rises again after $k = 11$, and
# it first dips below 0 at $k = 1707$. What holds is decay on a logarithmic scale. Group the offsets
# into **octaves**, $2^a \le k < 2^{a+1}$ ($1$; $2, 3$; $4, \dots, 7$; ...): from one octave to the
# next, both the maximum of $s$ (the dots in the figure) and its mean fall, up to the octave that
# starts at $2^{13}$. Each octave holds twice as many offsets as the one before, which could only
# raise its maximum, so the falling maxima are no artefact of the grouping.
#
# **So $s(k)$ is a similarity, not a distance: a pair that comes back around its circle looks
# close again**, and far enough out the decay stops. The octave $2^{14} \le k < 2^{15}$, 0.3 to 0.6
# of the slowest wavelength ($2\pi\cdot 10000^{126/128} \approx 54\,400$ positions), sits higher than
# the one before. There the larger octave *could* explain a higher maximum, so the cell checks two
# controls: the mean rises too ($-2.89$ to $-1.53$), and with 512 offsets drawn from each octave the
# later one is higher in 199 of 200 draws.
#
# <details><summary>Optional: which pairs make the rise</summary>
#
# Split the rise of the mean, $+1.36$, by pair (each pair's mean of $\cos k\theta_j$ over the
# octave): the six pairs that have turned 0.93 to 1.9 circles by $k = 2^{15}$ gain $+4.24$; in the
# octave before, near their half turn, their mean cosines were negative ($-0.15$ to $-0.83$), and
# each one's mean rises as it heads back towards $+1$. The three slowest pairs (0.6 to 0.8 circles
# by $2^{15}$) pass their half turn only in this octave and lose $2.01$ (the slowest one's mean
# cosine falls from $+0.15$ to $-0.82$); the other 55 pairs together lose $0.86$.
#
# </details>

# %% slideshow={"slide_type": "fragment"}
ks = torch.arange(n_pos)
rises = ((s_of(ks[1:]) - s_of(ks[:-1])) > 0).nonzero().flatten() + 1
octaves = [ks[2**a : 2 ** (a + 1)] for a in range(11)]
oct_max = torch.stack([s_of(o).max() for o in octaves])
oct_at = torch.stack([o[s_of(o).argmax()] for o in octaves])  # where each octave peaks
oct_mean = torch.stack([s_of(o).mean() for o in octaves])
assert rises.numel() > 0 and rises[0] == 12, "not monotone: s(12) > s(11)"
assert (s_of(ks) < 0).nonzero()[0].item() == 1707, "first negative value"
far = {a: pl.rope_angles(torch.arange(2**a, 2 ** (a + 1)), d, inv_freq=pl.rope_frequencies(d, dtype=torch.float64)
                         ).cos().sum(-1) for a in (11, 12, 13, 14)}  # s over the octaves 2^11.. to 2^14..
assert oct_max[-1] > far[11].max() > far[12].max() > far[13].max()  # the octaves after 2^10 keep falling ...
assert oct_mean[-1] > far[11].mean() > far[12].mean() > far[13].mean()  # ... in their means too, to 2^13
assert far[14].max() > far[13].max(), "the decay stops: octave maxima rise again"
f_d = pl.rope_frequencies(d, dtype=torch.float64)
before = torch.cos(torch.arange(2**13, 2**14)[:, None] * f_d).mean(0)  # each pair's mean cosine over octave 2^13
pair_rise = torch.cos(torch.arange(2**14, 2**15)[:, None] * f_d).mean(0) - before  # ... and its rise to octave 2^14
circles = 2**15 * f_d / (2 * math.pi)  # how many circles each pair has turned by k = 2^15
back, passing = (circles > 0.9) & (circles < 2), circles < 0.9  # heading back to +1; at their half turn
assert round((far[14].mean() - far[13].mean()).item(), 2) == 1.36 and torch.isclose(pair_rise.sum(), far[14].mean() - far[13].mean())
assert back.sum() == 6 and [round(v, 2) for v in (circles[back].min().item(), circles[back].max().item())] == [0.93, 1.9]
assert (pair_rise[back] > 0).all() and round(pair_rise[back].sum().item(), 2) == 4.24  # every one of the six rises
assert (before[back] < 0).all() and [round(v, 2) for v in (before[back].max().item(), before[back].min().item())] == [-0.15, -0.83]
assert passing.sum() == 3 and [round(v, 1) for v in circles[passing].tolist()] == [0.8, 0.7, 0.6]
assert ((circles[passing] / 2 < 0.5) & (circles[passing] > 0.5)).all()  # the half turn falls inside octave 2^14
assert (pair_rise[passing] < 0).all() and round(pair_rise[passing].sum().item(), 2) == -2.01
assert round(before[-1].item(), 2) == 0.15 and round((before[-1] + pair_rise[-1]).item(), 2) == -0.82  # the slowest pair
assert round(pair_rise[~(back | passing)].sum().item(), 2) == -0.86 and (~(back | passing)).sum() == 55
assert round(far[13].mean().item(), 2) == -2.89 and round(far[14].mean().item(), 2) == -1.53  # the mean rises too
draws = torch.Generator().manual_seed(5)  # equal samples: 512 offsets from each octave, 200 times
higher = sum(bool(far[14][torch.randint(0, 2**14, (512,), generator=draws)].max()
                  > far[13][torch.randint(0, 2**13, (512,), generator=draws)].max()) for _ in range(200))
assert higher == 199, higher  # not the larger octave's larger sample: 199 of 200 draws
assert 54_000 < 2 * math.pi / pl.rope_frequencies(d, dtype=torch.float64)[-1] < 55_000  # slowest wavelength
slowest_wave = 2 * math.pi / f_d[-1].item()
assert round(2**14 / slowest_wave, 1) == 0.3 and round(2**15 / slowest_wave, 1) == 0.6  # where octave 14 sits
assert (oct_max.diff() < 0).all() and (oct_mean.diff() < 0).all(), "octave maxima and means fall"
print("first rise at k =", rises[0].item(), "· first negative at k =", (s_of(ks) < 0).nonzero()[0].item(),
      "· minimum", round(s_of(ks).min().item(), 2), "at k =", s_of(ks).argmin().item())
print("octave maxima:", [round(v, 1) for v in oct_max.tolist()])
print(f"octaves 2^13 and 2^14: maxima {far[13].max():.1f} -> {far[14].max():.1f}, means {far[13].mean():.2f} -> "
      f"{far[14].mean():.2f}; 512 offsets from each, 200 draws: the later octave higher in {higher}")

# %% slideshow={"slide_type": "subslide"}
fig, ax = viz.figure(width=6.4, height=3.2)
ax.plot(offsets[n_pos - 1 - 300 : n_pos + 300], s[n_pos - 1 - 300 : n_pos + 300], lw=1, color="tab:blue", label="s(k)")
ax.plot(oct_at[:9], oct_max[:9], "o", color="tab:red", ms=4, label="octave maxima")
ax.axhline(0, color="grey", lw=0.6)
ax.set(xlabel="offset k", ylabel="p_i · p_(i+k)", title=f"dot product vs offset, d = {d}")
ax.legend(loc="upper right")
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# **What $d$ changes, and what it does not.** The base sets the *range* of frequencies; $d$ only
# sets how finely that range is sampled. $\theta_j = \text{base}^{-2j/d}$ always runs from 1 down
# towards $1/\text{base}$, evenly spaced on a log scale; a larger $d$ adds pairs inside that range,
# its slowest pair $\text{base}^{2/d}/\text{base}$ approaching $1/\text{base}$ from above but never
# passing it. So the similarity as a fraction of its maximum, $s(k)/(d/2)$ (the mean of
# $\cos k\theta_j$ over the pairs), settles as $d$ grows, towards the average of
# $\cos(k\,\text{base}^{-u})$ over $u \in [0, 1)$: at $k = 100$ it is 0.477 for $d = 128$ and
# already within 0.001 of that limit for $d = 512$.
#
# The cell measures how far each change moves the curve over the figure's offsets, $0 \le k \le 500$,
# by the largest gap between two curves, and prints a table: each factor 4 in $d$ against a factor 4 in the base (up and down) at
# the same, lower, width. At every width the base moves the curve more than $d$ does, and each step
# in $d$ moves it less than the one before. This is about the shape at $k \le 500$ only: where the
# curve first turns negative, far beyond, depends on $d$ as much as on the base (the answer below
# the next widget).

# %% slideshow={"slide_type": "fragment"}
def normalised_s(k, d, base=10000.0):
    """s(k) / (d/2): the mean over pairs of cos(k θ_j)."""
    return torch.cos(k * pl.rope_frequencies(d, base=base, dtype=torch.float64)).mean().item()


slowest = [pl.rope_frequencies(dd, dtype=torch.float64)[-1].item() for dd in (128, 512, 4096)]
assert [f"{v:.3e}" for v in slowest] == ["1.155e-04", "1.037e-04", "1.005e-04"]  # slower with d ...
assert all(v > 1e-4 for v in slowest) and slowest == sorted(slowest, reverse=True)  # ... but never past 1/base
u = (torch.arange(1_000_000, dtype=torch.float64) + 0.5) / 1_000_000  # midpoints of [0, 1)
limit = torch.cos(100 * 10000 ** (-u)).mean().item()  # d -> infinity
at_128, at_512 = normalised_s(100, 128), normalised_s(100, 512)
assert abs(at_128 - 0.477) < 1e-3 and abs(at_512 - 0.437) < 1e-3 and abs(at_512 - limit) < 1e-3
by_base = {b: normalised_s(100, 128, base=b) for b in (100.0, 10000.0, 1e6)}
assert by_base[1e6] > 0.58 and by_base[100.0] < 0  # the base moves it far more than d does
assert min(abs(by_base[1e6] - at_128), abs(by_base[100.0] - at_128)) > 2 * abs(at_128 - at_512)
k_axis = torch.arange(0, 501)  # the figure's offsets


def curve(dd, b=10000.0):
    return torch.cos(k_axis[:, None] * pl.rope_frequencies(dd, base=b, dtype=torch.float64)).mean(-1)


by_d = (curve(128) - curve(512)).abs()
by_b = torch.maximum((curve(128, 100.0) - curve(128)).abs(), (curve(128, 1e6) - curve(128)).abs())
assert round(by_d.max().item(), 2) == 0.13 and by_d.argmax().item() == 468
assert round(curve(128)[468].item(), 2) == 0.14 and round(curve(512)[468].item(), 2) == 0.27
assert round(by_b.max().item(), 2) == 0.57 and by_b.max() > 4 * by_d.max()
gap = lambda x, y: (x - y).abs().max().item()  # the largest gap between two curves over 0 <= k <= 500
widths = (32, 128, 512)  # each row: a factor 4 in d, and a factor 4 in the base each way, at the lower width
d_steps = [gap(curve(lo), curve(4 * lo)) for lo in widths]
base_up = [gap(curve(lo, 4e4), curve(lo)) for lo in widths]
base_down = [gap(curve(lo, 2500.0), curve(lo)) for lo in widths]
assert [round(v, 2) for v in d_steps] == [0.34, 0.13, 0.04] and d_steps[0] > d_steps[1] > d_steps[2]
assert [round(v, 2) for v in base_up] == [0.39, 0.26, 0.15] and [round(v, 2) for v in base_down] == [0.52, 0.33, 0.19]
assert all(min(up, down) > step for step, up, down in zip(d_steps, base_up, base_down))  # the base, at every width
print(f"s(100)/(d/2): d = 128: {at_128:.3f}, d = 512: {at_512:.3f}, d -> inf: {limit:.3f}")
print("largest gap over 0 <= k <= 500, at the lower width d:")
print("  d     d x 4   base x 4   base / 4")
for lo, step, up, down in zip(widths, d_steps, base_up, base_down):
    print(f"  {lo:<5} {step:<7.2f} {up:<10.2f} {down:.2f}")
print(f"the extremes drawn, base 100 or 1e6 against 10000 at d = 128: up to {by_b.max():.2f}")

fig, ax = viz.figure(width=6.4, height=3.0)
for dd, b, style in ((128, 10000.0, "-"), (512, 10000.0, "--"), (128, 100.0, ":"), (128, 1e6, "-.")):
    ax.plot(k_axis, curve(dd, b), style, lw=1.2, label=f"d = {dd}, base = {b:g}")
ax.axhline(0, color="grey", lw=0.6)
ax.set(xlabel="offset k", ylabel="s(k) / (d/2)", title="normalised similarity by d and base")
ax.legend(loc="upper right")
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# Explore what the four curves only sample: slide the base through every value between 10 and
# $10^6$ at $d = 128$ (for $k \le 500$ the cell above found $d$ mattering less than the base; where
# the curve first turns negative depends on $d$ too, as the answer below shows), and
# widen the range of offsets: at small bases it shows where the decay stops. Predict before sliding: base 10000 first
# turns negative at $k = 1707$ (above), and base 100 (the dotted curve) at $k = 59$; at base 1000,
# is that nearer 59, 1707, or in between, and where? (The answer is asserted below the widget.)

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
def draw_dot(fig, base, span, d=128):
    ax = fig.subplots()
    (line,) = ax.plot([], [], lw=1, color="tab:blue")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set(xlabel="offset k", ylabel="s(k) / (d/2)", ylim=(-0.3, 1.05))

    def update(base, span):
        k = torch.arange(-span, span + 1)
        line.set_data(k, pl.rope_angles(k, d, base=base).cos().mean(-1))
        ax.set_xlim(-span, span)
        ax.set_title(f"d = {d}, base = {base:g}")

    update(base, span)
    return update


dot_widget = viz.InteractiveFigure(
    draw_dot, figsize=(6.4, 3.2),
    base=widgets.FloatLogSlider(10000, base=10, min=1, max=6, step=0.25, description="base"),
    span=widgets.IntSlider(300, min=20, max=2000, step=20, description="max |k|"),
)
dot_widget

# %% slideshow={"slide_type": "fragment"}
# The answer: in between, at k = 361, 14 % above the geometric middle of 59 and 1707 (317); a factor 10 of the
# base moves it by x6.1, then by x4.7, no fixed factor. And this first zero crossing depends on d as much as on the
# base: at base 1000 it lies at k = 197, 361, 474, 612 for d = 64, 128, 512, 2048; at base 10000 at 725, 1707,
# 3284, 4539.
k_neg = torch.arange(0, 5000)


def first_negative_at(d, base):
    return (pl.rope_angles(k_neg, d, base=base).cos().mean(-1) < 0).nonzero()[0].item()


first_negative = {b: first_negative_at(128, b) for b in (100.0, 1000.0, 10000.0)}
assert first_negative == {100.0: 59, 1000.0: 361, 10000.0: 1707} and round(math.sqrt(59 * 1707)) == 317
assert round(361 / 59, 1) == 6.1 and round(1707 / 361, 1) == 4.7 and round(100 * (361 / math.sqrt(59 * 1707) - 1)) == 14
by_width = {b: [first_negative_at(dd, b) for dd in (64, 128, 512, 2048)] for b in (1000.0, 10000.0)}
assert by_width == {1000.0: [197, 361, 474, 612], 10000.0: [725, 1707, 3284, 4539]}
print("d = 128, first offset where s(k) < 0:", {f"{b:g}": k for b, k in first_negative.items()})
print("the same for d = 64, 128, 512, 2048:", {f"{b:g}": ks for b, ks in by_width.items()})

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### From $p_m^\top p_n$ to an attention score
#
# Attention does not take the dot product of two codes; it takes that of a query
# $W_Q(x_m + p_m)$ and a key $W_K(x_n + p_n)$ (query at position $m$, key at $n$, the letters
# chapter 5 uses, so that $j$ keeps counting pairs and $k$ stays the offset). The
# position-position part of that score is $p_m^\top A\,p_n$ with $A = W_Q^\top W_K$. Does it still
# depend only on the offset? Write the
# codes through the shift of §4, $p_m = M_m\,p_0$:
#
# $$p_m^\top A\,p_n = p_0^\top M_m^\top A\,M_n\,p_0 .$$
#
# If $A$ **commutes with every $M_k$**, then $M_m^\top A M_n = M_m^\top M_n A = M_{n-m} A$ and the
# score is $p_0^\top M_{n-m} A\,p_0$: a function of $n - m$ alone. Which $A$ commute with every
# $M_k$? Since $M_k = M_1^k$, those that commute with $M_1$. Cut $A$ into $2\times 2$ blocks
# $A_{jl}$ (rows of pair $j$, columns of pair $l$) and write $B_j$ for $M_1$'s block $j$, the
# rotation by $\theta_j$. Then $A M_1 = M_1 A$ says, block by block, $A_{jl} B_l = B_j A_{jl}$.
# Two steps:
# * **Nothing across pairs.** Multiply by $B_j^{-1}$ on the left and $B_l^{-1}$ on the right:
#   $B_j^{-1} A_{jl} = A_{jl} B_l^{-1}$, that is $A_{jl} B_l^{-1} = B_j^{-1} A_{jl}$. Add this to the first
#   equation: $A_{jl}(B_l + B_l^{-1}) =
#   (B_j + B_j^{-1}) A_{jl}$. A rotation plus its inverse is $2\cos\theta$ times the identity,
#   so $(\cos\theta_l - \cos\theta_j) A_{jl} = 0$. Different pairs have different
#   $\theta \in (0, 1]$, hence different cosines: $A_{jl} = 0$ for $j \ne l$.
# * **A scaled rotation on each pair.** On the diagonal, $A_{jj}$ commutes with
#   $B_j = \cos\theta_j\, I + \sin\theta_j\, J$, $J = \begin{pmatrix} 0 & 1\\ -1 & 0\end{pmatrix}$,
#   and $\sin\theta_j \ne 0$, so it commutes with $J$. Writing
#   $A_{jj} = \begin{pmatrix} w & x\\ y & z\end{pmatrix}$, $A_{jj}J = JA_{jj}$ reads $z = w$ and
#   $y = -x$: $A_{jj} = \begin{pmatrix} a & b\\ -b & a\end{pmatrix} = aI + bJ$, two free numbers
#   per pair.
#
# Conversely every such matrix commutes with $M_1$ (rotations of one plane commute), so these
# are all of them: a space of dimension $d$.
#
# <details><summary>Optional: and only these give an offset-only score (a proof)</summary>
#
# If $p_m^\top A\,p_n$ depends on $n - m$ alone, then
# $p_{m+1}^\top A\,p_{n+1} = p_m^\top A\,p_n$ for all $m, n$, that is
# $p_m^\top (M_1^\top A M_1 - A)\,p_n = 0$. The codes $p_0, \dots, p_{d-1}$ span $\mathbb{R}^d$. To see
# it, write sines and cosines with complex exponentials, $\mathrm{i} = \sqrt{-1}$:
#
# $$\sin x = \frac{e^{\mathrm{i}x} - e^{-\mathrm{i}x}}{2\mathrm{i}}, \qquad \cos x = \frac{e^{\mathrm{i}x} + e^{-\mathrm{i}x}}{2}.$$
#
# A vector orthogonal to all the codes would then make a combination of the $d$ sequences
# $e^{\pm \mathrm{i} m\theta_j}$ (the position is $m$) vanish at $m = 0, \dots, d-1$, a Vandermonde system whose
# $d$ nodes $e^{\pm \mathrm{i}\theta_j}$ all differ: $e^{\mathrm{i}\theta_j} \ne e^{\mathrm{i}\theta_l}$ as each
# $\theta_j$ is its own value in $(0, 1]$, and $e^{\mathrm{i}\theta_j} \ne e^{-\mathrm{i}\theta_l}$ as
# $\theta_j + \theta_l$ lies in $(0, 2]$, never a multiple of $2\pi$. So only the zero combination does. Hence
# $M_1^\top A M_1 = A$, and since $M_1$ is orthogonal, $A M_1 = M_1 A$.
#
# </details>
#
# So the commuting matrices are exactly those whose position–position score depends on the
# offset alone.
#
# A random $W_Q^\top W_K$ is far from such a matrix. The cell checks the steps that rule out blocks
# across pairs (every pair its own cosine) and make the codes span $\mathbb{R}^d$ (every $\theta_j$ in
# $(0, 1]$, so the Vandermonde nodes all differ), then
# measures, for $d = 128$ and 128 positions, how much the score changes along a diagonal $n - m = k$, as a
# fraction of the largest score (0 means: offset only), for a random $W_Q^\top W_K$, for a random
# *symmetric* $A$ (the plain dot product of §6 is $A = I$: symmetric, offset-only, with
# $s(-k) = s(k)$; so symmetry is the first guess, and the cell shows it is not enough; it also checks
# $A = I$), and for a random $A$ of the commuting kind; the two random kinds are drawn with ten
# more seeds each, and every draw changes by more than the largest score.
#
# So absolute sinusoids give relative position–position scores only if training finds such an
# $A$ in every head. In multi-head attention a head's $A = W_Q^\top W_K$ has rank at most
# $d_\text{head} < d$, and a commuting $A$ has rank 2 on every pair whose block is not zero
# ($\det(aI + bJ) = a^2 + b^2$), so such a head reads at most $d_\text{head}/2$ of the $d/2$ pairs
# (the cell checks the rank at $d = 128$, $d_\text{head} = 16$). And even then the score as a whole is not relative: its content–position
# terms, $x_m^\top A\,p_n$ and $p_m^\top A\,x_n$ (chapter 4 starts from all four terms), still see
# where the key and the query are. A commuting $A$ is necessary, not sufficient; the cell's last
# measurement shows the content–position term of a commuting $A$ changing along the diagonals.
# RoPE builds the structure in instead: it rotates the queries and keys themselves, so that the
# score of a query at $m$ and a key at $n$ sees their positions only through $n - m$, whatever $W_Q$
# and $W_K$ are (chapter 5).

# %% slideshow={"slide_type": "fragment"}
def diagonal_spread(scores):
    """Largest max - min along any diagonal n - m = k of a square score matrix, over its largest |score|
    (0: offset only; comparable between matrices of any scale)."""
    n_pos = scores.shape[0]
    spread = max((scores.diagonal(k).max() - scores.diagonal(k).min()).item() for k in range(-(n_pos - 1), n_pos))
    return spread / scores.abs().max().item()


d, n_pos = 128, 128  # width, and positions 0 .. n_pos - 1 (n is the key's position)
cosines = torch.cos(pl.rope_frequencies(d, dtype=torch.float64))
assert (cosines.diff() > 0).all()  # every pair its own cosine: the step that rules out blocks across pairs
f128 = pl.rope_frequencies(d, dtype=torch.float64)
assert (f128 > 0).all() and (f128 <= 1).all()  # θ_j in (0, 1], so θ_j + θ_l in (0, 2]: the spanning step
nodes = torch.polar(torch.ones(d, dtype=torch.float64), torch.cat([f128, -f128]))  # e^(±iθ_j)
assert (nodes[:, None] - nodes[None, :]).abs().add(torch.eye(d)).min() > 1e-6  # the d nodes all differ
P = pl.sinusoidal_positions(n_pos, d, dtype=torch.float64)  # row m is p_m, so (P A P^T)[m, n] = p_m^T A p_n
gen = torch.Generator().manual_seed(0)
W_Q, W_K = (torch.randn(d, d, generator=gen, dtype=torch.float64) / d**0.5 for _ in range(2))
sym = torch.randn(d, d, generator=gen, dtype=torch.float64)
a, b = torch.randn(2, d // 2, generator=gen, dtype=torch.float64)
commuting = torch.block_diag(*[torch.tensor([[ai, bi], [-bi, ai]], dtype=torch.float64) for ai, bi in zip(a.tolist(), b.tolist())])
for k in (1, 5, 40):
    M_k = pl.rope_matrix(-k, d, inv_freq=f128)
    torch.testing.assert_close(commuting @ M_k, M_k @ commuting)  # commutes with every shift
    assert not torch.allclose((W_Q.T @ W_K) @ M_k, M_k @ (W_Q.T @ W_K))  # a random product does not
spreads = {"random W_Q^T W_K": diagonal_spread(P @ W_Q.T @ W_K @ P.T),
           "random symmetric A": diagonal_spread(P @ (sym + sym.T) @ P.T),
           "commuting A": diagonal_spread(P @ commuting @ P.T)}
assert spreads["random W_Q^T W_K"] > 1 and spreads["random symmetric A"] > 1  # more than the largest score
other_draws = []  # not one lucky draw: ten more seeds of each random kind
for seed in range(1, 11):
    g_s = torch.Generator().manual_seed(seed)
    wq, wk, sy = (torch.randn(d, d, generator=g_s, dtype=torch.float64) for _ in range(3))
    other_draws += [diagonal_spread(P @ wq.T @ wk @ P.T), diagonal_spread(P @ (sy + sy.T) @ P.T)]
assert min(other_draws) > 1
assert spreads["commuting A"] < 1e-10
assert diagonal_spread(P @ P.T) < 1e-10  # A = I, the plain dot product: offset only
assert torch.linalg.matrix_rank(commuting) == d  # every block a^2 + b^2 > 0: rank 2 per pair
head_A = commuting.clone()
head_A[16:, 16:] = 0  # a head of width d_head = 16 (rank 16 at most): only 8 pairs can be non-zero
assert torch.linalg.matrix_rank(head_A) == 16 and diagonal_spread(P @ head_A @ P.T) < 1e-10
wq_h, wk_h = torch.randn(2, 16, d, generator=torch.Generator().manual_seed(11), dtype=torch.float64)  # one head
assert torch.linalg.matrix_rank(wq_h.T @ wk_h) == 16  # a head's W_Q^T W_K: rank d_head, not d
token = torch.randn(d, generator=gen, dtype=torch.float64)  # one token, the same at every position
content_position = (token @ commuting @ P.T).expand(n_pos, n_pos)  # x^T A p_n: row m (query), column n (key)
spreads["content-position term, commuting A"] = diagonal_spread(content_position)
assert spreads["content-position term, commuting A"] > 0.5  # still sees the key's absolute position
print("largest change along a diagonal n - m = k, over the largest |score|:",
      {name: ("below 1e-10" if v < 1e-10 else round(v, 2)) for name, v in spreads.items()})
print(f"seeds 1-10, both random kinds: smallest change {min(other_draws):.2f}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7 · Why scale the token embeddings first?
#
# The encoding is *added* to the token embeddings: the input is $X + P$. Source `000` points out
# that when the rows of $X$ are about as long as the rows of $P$, or shorter, position drowns out
# meaning, and suggests enlarging $X$: $X \cdot M + P$. The paper does exactly this: its
# embedding layers multiply their weights by $M = \sqrt{d_\text{model}}$ (fairseq's `embed_scale`
# does the same).
#
# Measure it for $d = 512$. Every row of $P$ has length exactly $\sqrt{d/2} = 16$ (§1). A token
# row's length depends on how the embedding was initialised, and for one init on the vocabulary
# size $V$ too:
# * PyTorch's `nn.Embedding` default, $\mathcal{N}(0, 1)$: length ≈ $\sqrt d \approx 22.6$;
# * a small init with std $d^{-1/2}$ (tensor2tensor's): length ≈ 1, **16 times shorter than P**;
# * Xavier-uniform, whose std $\sqrt{2/(V + d)}$ counts the table's two sides, the vocabulary and
#   the width: length $\approx \sqrt{2d/(V + d)}$, about 0.82 for a toy vocabulary of
#   $V = 1000$ and 0.18 for a realistic $V = 32\,000$ (Llama 2's; GPT-2 has 50 257), 20 to 90
#   times shorter than P.

# %% slideshow={"slide_type": "fragment"}
d, vocab = 512, 1000
g = torch.manual_seed(0)
inits = {
    "nn.Embedding default N(0, 1)": nn.Embedding(vocab, d).weight.detach(),
    "normal, std d^-1/2": nn.init.normal_(torch.empty(vocab, d), std=d**-0.5),
    "xavier_uniform": nn.init.xavier_uniform_(torch.empty(vocab, d)),
    "xavier_uniform, V = 32 000": nn.init.xavier_uniform_(torch.empty(32_000, d)),  # a realistic vocabulary
}
p_norm = pl.sinusoidal_positions(2048, d).norm(dim=-1)
torch.testing.assert_close(p_norm, torch.full((2048,), math.sqrt(d / 2)))
ratio = {}
print(f"{'init':32s} {'|x|':>6s} {'|x|·√d':>8s}   |p| = {math.sqrt(d / 2):.1f}")
for name, W in inits.items():
    x = W.norm(dim=-1).mean().item()
    ratio[name] = (x / math.sqrt(d / 2), x * math.sqrt(d) / math.sqrt(d / 2))
    print(f"{name:32s} {x:6.2f} {x * math.sqrt(d):8.1f}")

# %% [markdown] slideshow={"slide_type": "fragment"}
# With the small inits the token vector is under a tenth of the position vector's length. Scaled
# by $\sqrt d$ it becomes comparable for std $d^{-1/2}$ (ratio near $\sqrt 2$, since
# $\sqrt d / \sqrt{d/2} = \sqrt 2$), and for Xavier only while the vocabulary is small: 1.16 at
# $V = 1000$, but 0.25 at $V = 32\,000$, where even the scaled token is 4 times shorter than the
# code. With the $\mathcal N(0,1)$ default the token vectors are already $\sqrt 2$ times longer than
# $P$'s rows, and scaling again would make the position a ~3% ripple: $M$ only makes sense together
# with the initialisation (and, for Xavier, the vocabulary).

# %% slideshow={"slide_type": "fragment"}
assert ratio["normal, std d^-1/2"][0] < 0.1 and ratio["xavier_uniform"][0] < 0.1  # P dominates
assert abs(16 * ratio["normal, std d^-1/2"][0] - 1) < 0.05 and ratio["xavier_uniform"][0] < 1 / 16  # 16 times, or more
assert abs(ratio["normal, std d^-1/2"][1] - math.sqrt(2)) < 0.05  # after × √d: ≈ √2
assert 1 < ratio["xavier_uniform"][1] < 1.5  # V = 1000: comparable after × √d ...
assert 0.2 < ratio["xavier_uniform, V = 32 000"][1] < 0.3  # ... V = 32 000: still 4 times shorter than the code
for name, V in (("xavier_uniform", vocab), ("xavier_uniform, V = 32 000", 32_000)):  # length √(2d / (V + d))
    assert abs(ratio[name][0] * math.sqrt(d / 2) / math.sqrt(2 * d / (V + d)) - 1) < 0.01
assert abs(ratio["nn.Embedding default N(0, 1)"][0] - math.sqrt(2)) < 0.05  # already ≈ √2 unscaled
assert 1 / ratio["nn.Embedding default N(0, 1)"][1] < 0.04  # scaled again: |p| is < 4% of |x|
print({name: tuple(round(r, 3) for r in rs) for name, rs in ratio.items()})

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Two explanations of the $\sqrt d$, and what each predicts
#
# The paper states the scaling but not its reason, and two explanations are in circulation.
#
# 1. **Source `000`'s: keep the meaning on top.** Scale $X$ so that the position does not
#    drown the token. The numbers above only half support it: after the scaling the token is
#    about $\sqrt 2$ times as long as the code, comparable, not dominant. And it is a reason to
#    scale only embeddings that start small: with the $\mathcal N(0,1)$ default the token is
#    already the longer one, and scaling it again overshoots.
# 2. **Tied embeddings.** The paper shares one weight matrix between the two embedding
#    layers and the pre-softmax linear layer (Vaswani et al., §3.4; Press & Wolf, 2017). As the
#    output layer, its rows are multiplied with a hidden state $h$ whose entries have variance
#    about 1; to start with logits of order 1 the weights need std about $d^{-1/2}$
#    (tensor2tensor initialises them so). As an input layer the same rows are then $\sqrt d$ too
#    short, entries of std $d^{-1/2}$ beside a code whose entries have root mean square
#    $\sqrt{1/2} \approx 0.71$. Multiplying by $\sqrt d$ gives them entries of std 1: one matrix,
#    two jobs, each at its natural scale.
#
# Where do they differ? Both say "scale" for tied, small-initialised embeddings, and neither
# for untied $\mathcal N(0, 1)$ ones (the first because the token is long already, the second
# because nothing is tied). They part for **untied, small-initialised** embeddings: the first
# says "scale", since the code would drown the token; the second has nothing to say, since there
# is no output layer to share the matrix with. The numbers above cannot decide between them: the
# logit scale of a tied matrix is an identity both accept. The cell only checks the second
# explanation's arithmetic: with std $d^{-1/2}$ weights the logits $h W^\top$ have std about 1,
# with std-1 weights about $\sqrt d \approx 22.6$; and after $\times\sqrt d$ the token entries
# have std 1, next to the code's 0.71.

# %% slideshow={"slide_type": "fragment"}
h = torch.randn(256, d, generator=torch.Generator().manual_seed(1))  # hidden states, entries of variance 1
small_w, unit_w = inits["normal, std d^-1/2"], inits["nn.Embedding default N(0, 1)"]
logit_std = {"std d^-1/2": (h @ small_w.T).std().item(), "std 1": (h @ unit_w.T).std().item()}
assert abs(logit_std["std d^-1/2"] - 1) < 0.05 and abs(logit_std["std 1"] - math.sqrt(d)) < 1  # 1 and √d ≈ 22.6
scaled_std = (small_w * math.sqrt(d)).std().item()
code_rms = pl.sinusoidal_positions(2048, d).pow(2).mean().sqrt().item()
assert abs(scaled_std - 1) < 0.01 and abs(code_rms - math.sqrt(0.5)) < 1e-3
print("logit std with std d^-1/2 weights ≈ 1, with std 1 weights ≈ √d: True")
print("token entries after × √d: std ≈ 1;  code entries: root mean square √(1/2) ≈ 0.71: True")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Why add, and not concatenate?
#
# Source `002` lists this among the questions it leaves open. Concatenating,
# $\begin{pmatrix} x_i \\ p_i\end{pmatrix}$ (width $2d$), and then projecting with
# $W_Q = \begin{pmatrix} W_x & W_p\end{pmatrix}$ gives $W_x x_i + W_p p_i$: exactly **adding** a
# projected token and a projected code. So for what a linear layer reads from the input (the
# first layer's $W_Q$, $W_K$, $W_V$ in a post-LN model like the paper's; those of a pre-LN model
# read $\mathrm{LayerNorm}(x_i + p_i)$), a concatenation is an addition with separate weights for the
# two parts; addition is the special case $W_x = W_p$, and costs no extra width in any layer.
# That identity holds for the projections only, not for the **residual stream**, which carries
# the input itself to every later layer: $x_i + p_i$ there, both parts in $d$ features, against
# both parts apart in $2d$. What addition gives up is a guarantee that the two stay separable.
# The control in the cell: the best *linear* read-out of $p_i$ from $x_i + p_i$ (one matrix, what a layer applies), for a token drawn
# from the 1000 rows of §7's std-$d^{-1/2}$ table (scaled by $\sqrt d$) and a position from 0 to
# 199, misses $p_i$ by about 30% of its length (the best *affine* read-out, whose bias supplies the
# mean code for free, misses the part of $p_i$ that varies with the position by 42%), while from
# the concatenation a selection recovers it
# exactly ("best" is computed exactly, from the means and second moments of that token and position
# distribution, and checked on 2000 sampled pairs). The 30% belongs to this setting (random tokens
# 22.6 long against the code's 16, 200 positions): with tokens half as long it is 17%, with 400
# positions 36%, and trained embeddings could learn to avoid the codes' subspace. What holds in
# every setting: adding costs no width; it costs the guarantee of a *linear* read-out.
#
# The same sum reappears inside every score: $(x_m + p_m)^\top W_Q^\top W_K(x_n + p_n)$ splits into
# token–token, token–position, position–token and position–position terms, the four terms
# chapter 4 starts from.

# %% slideshow={"slide_type": "fragment"}
x4, p4 = torch.randn(6, d, generator=torch.Generator().manual_seed(2)), pl.sinusoidal_positions(6, d)  # rows
W_cat = torch.randn(64, 2 * d, generator=torch.Generator().manual_seed(3)) / math.sqrt(2 * d)  # (W_x  W_p)
W_x, W_p = W_cat[:, :d], W_cat[:, d:]
torch.testing.assert_close(torch.cat([x4, p4], dim=-1) @ W_cat.T, x4 @ W_x.T + p4 @ W_p.T)  # concat = add, projected

# the residual stream: can a linear layer still read p_i alone from x_i + p_i?
token_table = small_w.double() * math.sqrt(d)  # §7's std d^-1/2 rows, scaled: a token is one of these 1000
code_table = pl.sinusoidal_positions(200, d, dtype=torch.float64)  # a position is one of 0..199


def best_readout_of(token_table, code_table):
    """The W minimising E|W s - p|^2, s = x + p, a token and a position drawn independently; and its relative miss."""
    mean_x, mean_p = token_table.mean(0), code_table.mean(0)
    second_x = token_table.T @ token_table / len(token_table)  # E[x x^T]
    second_p = code_table.T @ code_table / len(code_table)  # E[p p^T]
    second_s = second_x + second_p + torch.outer(mean_x, mean_p) + torch.outer(mean_p, mean_x)  # E[s s^T]
    cross = second_p + torch.outer(mean_p, mean_x)  # E[p s^T]
    readout = cross @ torch.linalg.inv(second_s)
    return readout, math.sqrt((second_p.trace() - (readout @ cross.T).trace()) / second_p.trace())


assert round(token_table.norm(dim=-1).mean().item(), 1) == 22.6  # against the code's 16
best_readout, exact_miss = best_readout_of(token_table, code_table)
miss_shorter_tokens = best_readout_of(token_table / 2, code_table)[1]  # tokens 11.3 long against the code's 16
miss_more_positions = best_readout_of(token_table, pl.sinusoidal_positions(400, d, dtype=torch.float64))[1]
assert (round(miss_shorter_tokens, 2), round(miss_more_positions, 2)) == (0.17, 0.36)  # the 30% is one setting's

mix = torch.Generator().manual_seed(4)  # 2000 sampled pairs, to check the exact read-out on
pos_ids = torch.randint(0, 200, (2000,), generator=mix)
tok_rows = token_table[torch.randint(0, vocab, (2000,), generator=mix)]
code_rows = code_table[pos_ids]
summed = tok_rows + code_rows
held_out = (summed @ best_readout.T - code_rows).norm() / code_rows.norm()
select = torch.cat([torch.zeros(d, d), torch.eye(d)]).double()  # from [x_i, p_i]: keep the second half
assert torch.equal(torch.cat([tok_rows, code_rows], dim=-1) @ select, code_rows)  # exact, every pair
assert round(exact_miss, 2) == 0.30 and abs(held_out - exact_miss) < 0.01  # the best read-out: 30% off
# the best affine read-out (a bias supplies the mean code): its miss of p_i minus the mean code
cov_x = torch.cov(token_table.T, correction=0)
cov_p = torch.cov(code_table.T, correction=0)
affine_miss = math.sqrt((cov_p.trace() - (cov_p @ torch.linalg.inv(cov_x + cov_p) @ cov_p).trace()) / cov_p.trace())
assert round(affine_miss, 2) == 0.42
print("W_Q [x; p] == W_x x + W_p p: True")
print(f"best linear read-out of p_i from x_i + p_i: relative error {exact_miss:.2f} over the distribution, "
      f"{held_out:.2f} on 2000 sampled pairs; from [x_i, p_i]: 0 (a selection)")
print(f"best affine read-out, against p_i minus the mean code: {affine_miss:.2f}")
print(f"the same with tokens half as long: {miss_shorter_tokens:.2f}; with 400 positions: {miss_more_positions:.2f}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 8 · As a module, and what the sources' modules get wrong
#
# `pl.SinusoidalPositionalEncoding(d, max_len)` computes the table once and adds its first `seq`
# rows to an input of shape `(..., seq, d)`. The table is a **non-persistent buffer**: it moves
# with `.to(device)` and stays out of `state_dict` (it is a formula, not a weight).
#
# That also answers a question source `002` lists among those it leaves open: how is the positional
# embedding trained? The sinusoidal one is **not trained at all**. It has no parameters, so the
# optimiser never sees it, and backpropagation stops at it: the gradient reaches the tokens it was
# added to, not the table (the cell checks all three). What training learns is how to *read* it,
# in the projections after it ($W_Q$, $W_K$ and the rest, §6). A learned table (chapter 2, as in
# BERT and GPT-2) is the other choice: an `nn.Embedding` over positions, trained like the token
# embeddings.

# %% slideshow={"slide_type": "fragment"}
pe = pl.SinusoidalPositionalEncoding(8, max_len=16)
x = torch.randn(2, 5, 8)
torch.testing.assert_close(pe(x), x + pl.sinusoidal_positions(5, 8))
assert "pe" in dict(pe.named_buffers()) and len(pe.state_dict()) == 0
assert list(pe.parameters()) == []  # nothing for an optimiser to update
tokens = torch.randn(2, 5, 8, requires_grad=True)
pe(tokens).square().sum().backward()
assert tokens.grad is not None and not pe.pe.requires_grad and pe.pe.grad is None  # the gradient stops at the table
with torch.random.fork_rng():  # building a learned table draws random numbers: leave the notebook's stream alone
    learned_pe = pl.LearnedPositionalEncoding(max_len=16, d=8)
assert sum(q.numel() for q in learned_pe.parameters()) == 16 * 8  # a learned table: one trained row per position
print("output shape:", tuple(pe(x).shape), "· state_dict keys:", list(pe.state_dict()),
      "· parameters: sinusoidal 0, learned", sum(q.numel() for q in learned_pe.parameters()))

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Source `002`'s module** creates its table with `torch.zeros(max_len, d_model, device=device)`
# and stores it as a plain attribute. `Module.to()` only moves parameters and buffers, so a
# plain tensor stays where it was created. Its `forward` takes the token ids, shape
# `(batch, seq)`, only for their length, and returns the slice `self.encoding[:seq_len, :]`; the
# *caller* adds that slice to the embedded tokens. Build on the CPU, call `.to("cuda")`, and the
# forward pass still returns a CPU slice: the failure comes one step later, in the caller's
# addition of a CPU table to GPU activations. Below, a small reconstruction of that pattern (our
# code) and the library module, both sent to PyTorch's `meta` device, which stands in for a GPU
# here: only the buffer follows, and the caller's addition fails. (As printed in the post, perhaps
# an export artifact rather than the author's code, `002`'s module does not parse: its
# `def forward` line is indented with a tab after lines indented with spaces, which Python 3
# refuses with a `TabError`; the cell checks those lines, and that they parse with four spaces for
# the tab.)

# %% slideshow={"slide_type": "fragment"}
class PlainAttributeTable(nn.Module):
    """The pattern of source 002: the table is an ordinary attribute, made on a fixed device."""

    def __init__(self, d, max_len, device):
        super().__init__()
        self.encoding = pl.sinusoidal_positions(max_len, d).to(device)  # fixed at construction

    def forward(self, ids):  # token ids (batch, seq): only their length is used
        _, seq_len = ids.shape
        return self.encoding[:seq_len, :]


printed = ("class PositionalEmbedding(nn.Module):\n    def __init__(self,d_model,max_len,device):\n"
           "        plt.show()\n        \n\tdef forward(self,x):\n        batch_size,seq_len = x.size()\n")  # 002's lines
try:
    ast.parse(printed)
    raise AssertionError("expected a TabError")
except TabError:
    ast.parse(printed.replace("\t", "    "))  # with four spaces for the tab it parses

plain = PlainAttributeTable(8, 16, device="cpu").to("meta")
buffered = pl.SinusoidalPositionalEncoding(8, max_len=16).to("meta")
assert plain.encoding.device.type == "cpu", "the plain attribute stayed behind"
assert buffered.pe.device.type == "meta", "the buffer moved"
ids = torch.zeros(2, 5, dtype=torch.long, device="meta")  # token ids, where the model now lives
embedded = torch.zeros(2, 5, 8, device="meta")  # the caller's embedded tokens, there too
assert plain(ids).device.type == "cpu"  # forward itself runs: it only slices
try:
    embedded + plain(ids)  # the caller's addition
    raise AssertionError("expected the addition to fail")
except RuntimeError as e:
    print("the caller's addition fails:", str(e))
assert buffered(embedded).device.type == "meta"  # the library module adds on the device it was moved to
print("plain attribute:", plain.encoding.device, "· buffer:", buffered.pe.device)

# %% [markdown] slideshow={"slide_type": "subslide"}
# `002`'s `__init__` also **draws the heatmap** (and calls `plt.show()`): every model built pops
# up a figure, and since matplotlib needs a CPU array, building the module on a GPU fails inside
# the constructor. Plotting belongs outside the model (as in §2). Reconstruction, with the meta
# device again standing in for a GPU:

# %% slideshow={"slide_type": "fragment"}
from matplotlib.figure import Figure


class PlotsInInit(nn.Module):
    """The other pattern of source 002: construction draws a figure as a side effect."""

    def __init__(self, d, max_len, device):
        super().__init__()
        self.encoding = pl.sinusoidal_positions(max_len, d).to(device)  # fixed at construction
        Figure().subplots().imshow(self.encoding)


PlotsInInit(8, 16, device="cpu")  # works on the CPU (and would show a figure each time)
try:
    PlotsInInit(8, 16, device="meta")
    raise AssertionError("expected construction on a non-CPU device to fail")
except TypeError as e:
    print("construction failed:", str(e).split(".")[0])
pl.SinusoidalPositionalEncoding(8, 16).to("meta")  # the library module has no such problem
print("library module on meta: fine")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Source `003`'s module** stores the table with shape `(1, max_len, d)` (a leading batch axis
# of size 1) but its forward pass slices it as `[:x.shape[1]]`, which slices that **batch axis**:
# the slice is the whole `(1, max_len, d)` table. For an input `(batch, seq, d)` with
# `seq < max_len` the addition then fails, or — worse, with `seq = 1` — silently broadcasts to
# `max_len` rows. The fix slices the position axis: `[:, :seq]`. The module is adapted from labml's
# annotated implementation (same class, names, `dropout_prob` and `.detach().requires_grad_(False)`),
# which is right in its own layout: labml stores the table as `(max_len, 1, d)` for inputs
# `(seq, batch, d)`, so `[:x.shape[0]]` cuts positions there. `003` moved the batch axis first and
# changed the index to `x.shape[1]`, but not the axis the slice cuts; the cell checks labml's layout too.

# %% slideshow={"slide_type": "fragment"}
table_1 = pl.sinusoidal_positions(8, 4).unsqueeze(0)  # (1, max_len=8, d=4), as in 003
x = torch.randn(2, 5, 4)  # batch 2, seq 5
assert table_1[: x.shape[1]].shape == (1, 8, 4), "slices the batch axis: nothing is cut"
try:
    x + table_1[: x.shape[1]]
    raise AssertionError("expected a shape error")
except RuntimeError as e:
    print("003's slice:", str(e))
one = torch.randn(2, 1, 4)
assert (one + table_1[: one.shape[1]]).shape == (2, 8, 4), "seq = 1: silently 8 positions out"
fixed = x + table_1[:, : x.shape[1]]
table_seq_first = pl.sinusoidal_positions(8, 4).unsqueeze(1)  # (max_len, 1, d), labml's layout
x_seq_first = x.transpose(0, 1)  # (seq 5, batch 2, d)
torch.testing.assert_close(x_seq_first + table_seq_first[: x_seq_first.shape[0]], fixed.transpose(0, 1))  # right there
torch.testing.assert_close(fixed, pl.SinusoidalPositionalEncoding(4, 8)(x))
print("fixed slice [:, :seq]:", tuple(fixed.shape))

# %% [markdown] slideshow={"slide_type": "fragment"}
# A smaller point in `003`: a comment there says no `detach()` is needed *because* the buffer was
# registered with `persistent=False`. The conclusion is right, the reason is not: `persistent`
# only decides whether the buffer goes into `state_dict`. `register_buffer` does not change
# `requires_grad` at all: a buffer made from a tensor that does not require a gradient (like
# `003`'s table, a plain computed tensor) never does, persistent or not, and one made from a
# tensor that does require a gradient still does, persistent or not (the last assert).

# %% slideshow={"slide_type": "fragment"}
m = nn.Module()
m.register_buffer("kept", pl.sinusoidal_positions(4, 4), persistent=True)
m.register_buffer("not_kept", pl.sinusoidal_positions(4, 4), persistent=False)
assert not m.kept.requires_grad and not m.not_kept.requires_grad
assert list(m.state_dict()) == ["kept"]
m.register_buffer("leaf", torch.ones(3, requires_grad=True), persistent=False)
assert m.leaf.requires_grad and "leaf" not in m.state_dict()  # register_buffer keeps requires_grad as it is
print("requires_grad:", m.kept.requires_grad, m.not_kept.requires_grad, "· state_dict:", list(m.state_dict()))
print("a buffer made from a tensor that requires grad, persistent=False: requires_grad", m.leaf.requires_grad)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each exercise has a cell for your answer and a checker that says what is right or wrong, with
# a hint. The worked solution follows, collapsed (expand it only after trying), then a cell that
# checks it. In a graded copy (`make student`) the solution cell is empty: write your answer there.
#
# **1 (design: read the offset back).** Two sinusoidal codes of $d = 8$ features (§1's formula and
# interleaved layout, but with base $10^{12}$ in place of 10000, so that pair $j$ turns $10^{-3j}$
# radian per position) are given as float64 tensors: `code_a`, the code of a position $m$, and
# `code_b`, that of a position $n$. You know neither position: both are real numbers (not only whole
# ones) up to $10^{10}$, with $|n - m| < 10^9$. Write `offset(code_a, code_b)` returning $n - m$ to
# within $10^{-3}$, computed and returned in float64 (float32 numbers near $10^9$ lie 64 apart).
# Read the offset from the two codes: building codes of chosen positions, or trying every offset
# (one by one or all at once), is refused; a formula, or a short search, is fine. The scales are this large
# so that no search over every offset is within reach.
#
# <details><summary>The checker's rules</summary>
#
# It draws new positions at every check. While your function runs, the library's code builders
# are refused, and each pair of codes gets 2 000 Python steps and 10 000 tensor elements (a tensor of
# one number costs none): enough for a formula, or a short search on the right pair, not for trying
# the $2 \cdot 10^9$ whole offsets one by one (in Python or in C) or all of them at once.
#
# </details>

# %% slideshow={"slide_type": "subslide"}
def offset(code_a, code_b):
    raise NotImplementedError  # your code


_ = check.offset_from_codes(offset)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "offset_from_codes_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def offset(code_a, code_b):
    ### BEGIN SOLUTION
    # §4: going k positions on turns pair j by kθ_j. A pair's angle is only known up to whole turns, so
    # a fast pair (pair 0 repeats every 2π ≈ 6.3 positions) cannot tell k from k + 2π/θ_j. The slowest
    # pair, θ_3 = (10^12)^(-6/8) = 10^-9, turns by less than half a circle over |k| < 10^9 (1 < π): read
    # its angle in both codes, take the difference into (-π, π], divide by θ_3. In float64 the angles
    # are good to about 1e-16 rad, so the offset to about 1e-7. (The dot product of the codes, §6,
    # would not do: it is the same for k and -k.)
    theta_slow = 1e12 ** (-6 / 8)
    turn = math.atan2(code_b[6], code_b[7]) - math.atan2(code_a[6], code_a[7])  # (sin, cos) of pair 3
    turn = (turn + math.pi) % (2 * math.pi) - math.pi
    return turn / theta_slow
    ### END SOLUTION


near_1e9 = torch.tensor(1e9, dtype=torch.float32)
assert (torch.nextafter(near_1e9, torch.tensor(2e9)) - near_1e9).item() == 64  # why the prompt asks for float64


# %% nbgrader={"grade": true, "grade_id": "offset_from_codes", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.offset_from_codes(offset)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **2 (design: the relative part of a head).** §6 showed that a position–position score
# $p_m^\top A\,p_n$ depends on the offset alone exactly when $A$ commutes with the shift $M_1$, and
# that a random $W_Q^\top W_K$ is far from such a matrix. Every $A$ can be split into the part of
# that kind nearest to it and a rest. Write `relative_part(A)`: for a $d \times d$ matrix $A$ (any
# even $d$, pairs interleaved as in §1), return the matrix $A_\text{rel}$ whose score depends on the
# offset alone and which is nearest to $A$, nearest meaning the smallest sum of squared entries of
# $A - A_\text{rel}$. Any route is fine: a numerical one works, and so does a formula of a few
# lines, entry by entry, found on paper. The checker draws new matrices of several widths at every
# check and judges what you return by the two properties asked for.

# %% slideshow={"slide_type": "fragment"}
def relative_part(A):
    raise NotImplementedError  # your code


_ = check.offset_only_score(relative_part)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "offset_only_score_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def relative_part(A):
    ### BEGIN SOLUTION
    # The allowed matrices (§6): zero across pairs, a I + b J on each pair's block. They form a subspace,
    # spanned by one I and one J per pair (placed on that pair's block). These d matrices are orthogonal
    # to each other (different blocks, or <I, J> = 0 on one block) and each has squared length 2. The
    # nearest point of a subspace is the orthogonal projection: keep A's coordinate along each spanning
    # matrix, <A, I_j> / 2 and <A, J_j> / 2, and drop the rest (every entry across pairs, and the
    # symmetric traceless part of each block). On pair j's block [[w, x], [y, z]]:
    # a = (w + z) / 2, b = (x - y) / 2. The a part scores a key k before the query like one k after it;
    # the b part tells the two apart.
    A = torch.as_tensor(A, dtype=torch.float64)
    out = torch.zeros_like(A)
    for j in range(A.shape[0] // 2):
        w, x, y, z = A[2 * j, 2 * j], A[2 * j, 2 * j + 1], A[2 * j + 1, 2 * j], A[2 * j + 1, 2 * j + 1]
        a, b = (w + z) / 2, (x - y) / 2
        out[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.stack([torch.stack([a, b]), torch.stack([-b, a])])
    return out
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "offset_only_score", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.offset_only_score(relative_part)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3 (what a bug costs).** This builder looks like the formula of §1 and draws a plausible
# heatmap, but it has one bug. Find it by reading the builder against §1's formula, then write two
# functions. The first is an **ungraded warm-up** (§1's formula answers it, so it has no checker):
# `fixed_exponent(two_j, d)`, the exponent the line `angle = pos / 10000 ** (...)` should
# have, in the builder's own variables (`two_j` as the builder holds it, $d$ even), so that the table
# is §1's; check it yourself: with your exponent in that line, the table must equal
# `pl.sinusoidal_positions(n, d)`. The graded question is `slow_count(d, L)`: for an even width $d$ and a context of $L$ positions, how many of
# the *buggy* builder's $d/2$ pairs turn by less than 0.1 rad over the whole context
# ($L\theta_j < 0.1$), so that their two columns are nearly constant there? The checker draws new
# lengths (8 to $10^6$) and widths at every check, most of them between $10^9$ and $10^{12}$, so
# wide that no table, not even one row, fits in memory: the count must come from the builder's
# exponent, by a formula or a short search over the pairs (a table, or a loop over every pair, is
# refused). Then
# compare your count with §1's table at $d = 512$, $L = 2048$: what does the bug waste?
#
# ```python
# def buggy_sinusoids(n: int, d: int) -> torch.Tensor:
#     """A sinusoidal table with one bug (Exercise 3 of chapter 3)."""
#     pos = torch.arange(n, dtype=torch.float64)[:, None]
#     two_j = torch.arange(0, d, 2, dtype=torch.float64)
#     angle = pos / 10000 ** (2 * two_j / d)
#     table = torch.zeros(n, d, dtype=torch.float64)
#     table[:, 0::2] = torch.sin(angle)
#     table[:, 1::2] = torch.cos(angle)
#     return table
# ```

# %% slideshow={"slide_type": "fragment"}
def fixed_exponent(two_j, d):
    raise NotImplementedError  # your code


def slow_count(d, L):
    raise NotImplementedError  # your code


_ = check.slow_pairs(slow_count)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "slow_pairs_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def fixed_exponent(two_j, d):
    raise NotImplementedError  # your code


def slow_count(d, L):
    raise NotImplementedError  # your code


### BEGIN SOLUTION
def fixed_exponent(two_j, d):
    # The bug: two_j already holds the even column index 2j (§1's 2i), and the exponent doubles it again.
    return two_j / d


def slow_count(d, L):
    # As written, the builder turns pair j by 10000^(-4j/d) per position instead of 10000^(-2j/d), i.e. §1's
    # formula with base 10000^2 = 1e8. Over L positions pair j turns by L · 10000^(-4j/d), at least 0.1 rad
    # when j <= (d/4) log(10 L) / log(10000); the others are slow. At d = 512, L = 2048: 118 slow pairs,
    # against 0 in §1's table (its slowest pair turns 0.21 rad): 118 of 256 pairs are nearly constant, wasted.
    turning = min(d // 2, math.floor(d / 4 * math.log(10 * L) / math.log(10000)) + 1)
    return d // 2 - turning


# The warm-up, checked as the prompt says: the builder with the fixed exponent is §1's table.
pos_w, two_j_w = torch.arange(50, dtype=torch.float64)[:, None], torch.arange(0, 64, 2, dtype=torch.float64)
fixed_angle = pos_w / 10000 ** fixed_exponent(two_j_w, 64)
fixed_table = torch.stack([torch.sin(fixed_angle), torch.cos(fixed_angle)], dim=-1).flatten(1)
torch.testing.assert_close(fixed_table, pl.sinusoidal_positions(50, 64, dtype=torch.float64))

# The numbers above, from the tables themselves (d = 512, L = 2048): row 1 holds each pair's turn per position.
row_1 = check.ch03.buggy_sinusoids(2, 512)[1]
buggy_turns = 2048 * torch.atan2(row_1[0::2], row_1[1::2])
assert slow_count(512, 2048) == int((buggy_turns < 0.1).sum()) == 118
section1_turns = 2048 * pl.rope_frequencies(512, dtype=torch.float64)
assert int((section1_turns < 0.1).sum()) == 0 and f"{section1_turns.min():.2f}" == "0.21"
### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "slow_pairs", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.slow_pairs(slow_count)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Errata in the sources
#
# Each item is proved by an assertion in the section named.
#
# | Source | What it says | What is right | Where |
# |---|---|---|---|
# | `002` | position runs "from 0 to max_len", `_2i` "from 0 to d_model" | $0..\text{max\_len}-1$ and $0, 2, .., d_\text{model}-2$ (`arange` excludes the end) | §1 |
# | `004`, copying RoFormer (Su et al., 2021) eq. (4), which has this typo | $p_{i,2t} = \sin(k/10000^{2t/d})$, $p_{i,2t+1} = \cos(k/10000^{2t/d})$ | $i$ in place of $k$; with a fixed $k$ all rows are equal | §1 |
# | `002` | keeps the table as a plain tensor attribute created with `device=` | a non-persistent buffer, which `.to(device)` moves; as written, a module built on the CPU and then moved with `.to("cuda")` keeps its table on the CPU, and the caller's addition to GPU activations fails | §8 |
# | `002` | draws the heatmap inside `__init__` | plot outside the model; as written, building on a GPU fails | §8 |
# | `003` | forward slices `positional_encodings[:seq]` of a `(1, max_len, d)` table | `[:, :seq]`; the original fails for `seq < max_len` or broadcasts for `seq = 1` (labml's original, `(max_len, 1, d)` sliced `[:seq]` for seq-first inputs, is right) | §8 |
# | `003` | no `detach()` needed "because" `persistent=False` | its table does not require grad, and `register_buffer` does not change that (a buffer made from a tensor that requires grad still does); `persistent` only controls `state_dict` | §8 |
#
# `002` also lists two questions it leaves open. *How is the positional embedding trained?* The
# sinusoidal one is not: no parameters, and the gradient stops at it (§8); a learned table
# (chapter 2) is. *Why is it added to the token embedding?* For what the first projections of a
# post-LN model read, adding is concatenating with tied weights, but not in the residual stream (§7).
#
# Also worth knowing: `003` names the number of positions `n_channels`; tensor2tensor and fairseq
# concatenate sin and cos and space frequencies by $d/2-1$, so their tables differ from the
# paper's (§3, checked against fairseq's builder as transformers ships it). `002` calls the Illustrated
# Transformer's figure analogous, with sin and cos drawn separately (下图同理): right about the layout,
# though it leaves out that the figure is tensor2tensor's table, whose frequencies differ too (§3).
