# %% [markdown] slideshow={"slide_type": "slide"}
# # 5 · Rotary position embedding (RoPE)
#
# Absolute encodings add a position vector to the token; the relative encodings of chapter 4
# put something that depends on the offset into the score: learned vectors (Shaw), projected
# sinusoids (Transformer-XL), a learned scalar per bucket (T5), projected relative embeddings
# (DeBERTa). RoPE (Su et al., *RoFormer*, 2021) adds nothing: it **rotates** the query and the
# key by an angle proportional to their position, so that their dot product sees only the offset
# n − m between them: how far apart they are, and which of the two comes first.
#
# This chapter:
# 1. rotations in 2-D;
# 2. **derives** RoPE: ask for one rule, applied alike to queries and keys, whose scores depend
#    only on the offset n − m; in the complex plane that rule must be a rotation by an angle
#    proportional to the position;
# 3. the block-diagonal d × d matrix R_m, why ⟨R_m q, R_n k⟩ depends only on n − m, what
#    that buys, and why every such rotation is 2 × 2 pairs in disguise;
# 4. where RoPE acts: on q and k, in every layer; and v, which needs a rotation back;
# 5. the 5 × 4 worked example of one of our sources, recomputed digit by digit (optional reading);
# 6. every implementation in the sources (Meta's complex numbers, the even/odd form,
#    Hugging Face's `rotate_half`, an alternating form), each checked against
#    `posenc_lib.apply_rope`, and how the two pair layouts relate;
# 7. frequencies and wavelengths;
# 8. the long-term-decay bound next to measured scores;
# 9. why angles must be computed in float32 (and how Hugging Face's code does it);
# 10. score heatmaps;
# 11. what the dense form costs;
# 12. exercises; then an aside that compares Hugging Face's cos table with ours bit for bit,
#     and the errata of the sources.
#
# Positions are 0-based; the query sits at m, the key at n, and the **offset** of the key is
# n − m (negative for keys in the past), as on the [conventions page](00_index.ipynb#Conventions).
# The main line, in the chapter's order: the rotation (§1–2) → R_m and the relative property (§3–4)
# → implementations checked against `apply_rope` (§6) → frequencies (§7) → decay (§8) → precision (§9); §5 is optional reading, and
# paragraphs that open with **Aside** (the sources' slips, one library's code) are off it: skip them
# on a first reading.
# How to make RoPE fast (a one-pass C kernel, counting passes over memory, timings) is in the
# [appendix](10_making_it_fast.ipynb), off the teaching path.

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import cmath
import functools
import math
import warnings

import torch
from ipywidgets import Dropdown, IntSlider, SelectionSlider
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

import posenc_lib as pl
from posenc_lib import check, viz

viz.use_style()  # white figures, dark text: readable in light and dark themes

torch.set_printoptions(precision=4, sci_mode=False)
device = pl.default_device()  # the CPU unless you opt in with POSENC_DEVICE (00_index); tensors below follow it
g = torch.manual_seed(0)
F64 = torch.float64

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. A rotation in the plane
#
# Read a pair of features (x, y) as a point in the plane. Turning it counter-clockwise
# by an angle α multiplies it by
#
# $$R(\alpha) = \begin{pmatrix}\cos\alpha & -\sin\alpha\\ \sin\alpha & \cos\alpha\end{pmatrix},
# \qquad (x, y) \mapsto (x\cos\alpha - y\sin\alpha,\; x\sin\alpha + y\cos\alpha).$$
#
# Counter-clockwise means the x-axis turns towards the y-axis: R(90°) sends (1, 0) to (0, 1).

# %% slideshow={"slide_type": "fragment"}
def rot2(angle: float) -> torch.Tensor:
    """The 2 x 2 counter-clockwise rotation by `angle` radians (float64)."""
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, -s], [s, c]], dtype=F64)


e1 = torch.tensor([1.0, 0.0], dtype=F64)
quarter_turn = rot2(math.pi / 2) @ e1
torch.testing.assert_close(quarter_turn, torch.tensor([0.0, 1.0], dtype=F64))  # the x-axis goes to the y-axis
print("R(90°) (1, 0) =", quarter_turn.round(decimals=4).tolist())

# %% [markdown] slideshow={"slide_type": "subslide"}
# Two facts carry the whole chapter: **angles add**, R(α) R(β) = R(α + β), and the
# **transpose turns back**, R(α)ᵀ = R(−α). Together: ⟨R(α)u, R(β)w⟩ = uᵀR(α)ᵀR(β)w =
# ⟨u, R(β − α)w⟩ — the dot product of two rotated vectors sees only the *difference*
# of the angles. The next cell checks all three.

# %% slideshow={"slide_type": "fragment"}
a, b = 0.7, 2.1
u, w = torch.randn(2, dtype=F64), torch.randn(2, dtype=F64)
torch.testing.assert_close(rot2(a) @ rot2(b), rot2(a + b))  # angles add
torch.testing.assert_close(rot2(a).T, rot2(-a))  # the transpose turns back
torch.testing.assert_close((rot2(a) @ u) @ (rot2(b) @ w), u @ (rot2(b - a) @ w))
torch.testing.assert_close((rot2(a) @ u).norm(), u.norm())  # and lengths are kept
print("angles add; the dot product sees only b − a; lengths are unchanged")

# %% [markdown] slideshow={"slide_type": "subslide"}
# RoPE turns the pair at position m by m·θ: the same vector at positions 0, 1, 2, …
# walks round a circle by a fixed step θ (here θ = 0.6 rad).

# %% slideshow={"slide_type": "fragment"}
theta_demo, pair = 0.6, torch.tensor([1.0, 0.3], dtype=F64)
fig, ax = viz.figure(width=3.6, height=3.4)
for m in range(8):
    px, py = (rot2(m * theta_demo) @ pair).tolist()
    ax.annotate("", xy=(px, py), xytext=(0, 0), arrowprops=dict(arrowstyle="->", color=f"C{m}"))
    ax.text(1.12 * px, 1.12 * py, f"m={m}", ha="center", va="center", fontsize=8)
ax.set(xlim=(-1.35, 1.35), ylim=(-1.35, 1.35), xlabel="first feature of the pair",
       ylabel="second feature", title="one pair at positions m = 0..7")
ax.set_aspect("equal")
fig

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Deriving RoPE: what must the encoding be?
#
# Rather than check an answer, let us find it. We want functions f_q(x, m) and f_k(x, n)
# that put position into the query of token x_m at position m and the key of token x_n at
# position n, such that the score depends on the tokens and the **offset** n − m only:
#
# $$\langle f_q(x_m, m),\, f_k(x_n, n)\rangle = g(x_m, x_n, n - m).$$
#
# (RoFormer, §3.1, Eq. (11), writes g(x_m, x_n, m − n); a function of m − n is a function of n − m, so
# only the name of the argument changes.) At position 0 nothing is added: f_q(x, 0) = q = W_q x
# and f_k(x, 0) = k = W_k x. Work in d = 2 and read a point (a, b) of the plane as the complex
# number a + ib. The dot product of two points is then the real part of one times the
# conjugate of the other, and turning a point by α is multiplying it by e^{iα}:
#
# $$\langle u, w\rangle = \operatorname{Re}\big[u\,\overline{w}\big], \qquad R(\alpha)\,u = e^{i\alpha} u .$$

# %% slideshow={"slide_type": "fragment"}
def as_complex(p: torch.Tensor) -> complex:
    """The point (a, b) as the complex number a + ib."""
    return complex(p[0].item(), p[1].item())


u, w, alpha = torch.randn(2, dtype=F64), torch.randn(2, dtype=F64), 0.9
assert math.isclose((as_complex(u) * as_complex(w).conjugate()).real, (u @ w).item(), abs_tol=1e-12)
turned = as_complex(rot2(alpha) @ u)
assert abs(turned - math.e ** (1j * alpha) * as_complex(u)) < 1e-12
print("⟨u, w⟩ = Re[u·conj(w)], and R(α)u = e^{iα}·u")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Like RoFormer we ask a little more: the whole complex number
# f_q(x_m, m)·conj(f_k(x_n, n)), whose real part is the score, shall depend only on x_m, x_n
# and n − m. Write every quantity in **polar form**, a length times a phase:
# f_q(x_m, m) = ρ_q e^{iΦ_q}, f_k(x_n, n) = ρ_k e^{iΦ_k}, g = ρ_g e^{iΦ_g}. The product is
# ρ_q ρ_k e^{i(Φ_q − Φ_k)}, so lengths and phases must match separately:
#
# $$\rho_q(x_m, m)\,\rho_k(x_n, n) = \rho_g(x_m, x_n, n - m), \qquad
# \Phi_q(x_m, m) - \Phi_k(x_n, n) = \Phi_g(x_m, x_n, n - m).$$
#
# **Lengths.** At n = m the offset is 0, as at m = n = 0 where nothing is added, so
# ρ_q(x_m, m) ρ_k(x_n, m) = ρ_g(x_m, x_n, 0) = |q||k|, i.e. ρ_q(x_m, m)/|q| = |k|/ρ_k(x_n, m). The
# left side does not involve the key and the right side does not involve the query, so both are
# one function c(m) of the position alone, with c(0) = 1: ρ_q = c(m)|q| and ρ_k = |k|/c(n).
# For general m, n the ratio c(m)/c(n) must depend on n − m only; with n = m + 1 the step
# c(m + 1)/c(m) is the same for every m, so c(m) = e^{λm} for one number λ. If queries and keys
# follow the same rule (ρ_k = c(n)|k| too) then c(n)² = 1: **the length cannot depend on the
# position**. With e^{λm} on the query and e^{−λn} on the key the product e^{λ(m−n)} depends on
# the offset only: that is the idea behind xPos (Sun et al., 2022). RoFormer takes λ = 0.
#
# **Phases.** At n = m: Φ_q(x_m, m) − Φ_k(x_n, m) = Φ_g(x_m, x_n, 0) = arg q − arg k, so
# Φ_q(x_m, m) − arg q = Φ_k(x_n, m) − arg k. The left side does not involve the key and the
# right side does not involve the query, so both are one function of the position alone,
# φ(m), with φ(0) = 0. The condition for general m, n then reads φ(m) − φ(n) = a function of
# n − m. With n = m + 1 the step φ(m + 1) − φ(m) is the same for every m: call it θ. Hence
#
# $$\varphi(m) = m\theta, \qquad f_q(x_m, m) = q\,e^{im\theta}, \qquad f_k(x_n, n) = k\,e^{in\theta}:$$
#
# multiply by e^{imθ}, which is **turning the point by mθ**, the R(mθ) of §1. The score is
# Re[q·conj(k)·e^{i(m−n)θ}]. The next cell builds the product f_q·conj(f_k) along the
# diagonal n = m + 3 for four candidates: this answer; xPos's lengths e^{λm} and e^{−λn} with
# λ = −0.1, which the argument allows (a past key's factor e^{λ(m−n)} decays with its distance
# m − n); and two it rules out, a length that follows the same rule for q and k and a phase
# that is not linear in m. (That RoPE's phase advances by the same θ at every step is true by
# construction; the cell demonstrates it and the score formula rather than testing them.)

# %% slideshow={"slide_type": "fragment"}
theta, offset = 0.3, 3
qc, kc = as_complex(torch.randn(2, dtype=F64)), as_complex(torch.randn(2, dtype=F64))
candidates = {  # name: (f_q(q, m), f_k(k, n))
    "rotate by mθ (RoPE)": (lambda z, m: z * cmath.exp(1j * m * theta), lambda z, n: z * cmath.exp(1j * n * theta)),
    "length (1 + m/10), same rule for q and k": (lambda z, m: (1 + m / 10) * z * cmath.exp(1j * m * theta),
                                                 lambda z, n: (1 + n / 10) * z * cmath.exp(1j * n * theta)),
    "length e^{λm} on q, e^{−λn} on k": (lambda z, m: math.exp(-0.1 * m) * z * cmath.exp(1j * m * theta),
                                       lambda z, n: math.exp(0.1 * n) * z * cmath.exp(1j * n * theta)),
    "phase m²θ (not linear)": (lambda z, m: z * cmath.exp(1j * m * m * theta),
                               lambda z, n: z * cmath.exp(1j * n * n * theta)),
}
depends_on_offset_only = {}
for name, (f_q, f_k) in candidates.items():
    along_diagonal = [f_q(qc, m) * f_k(kc, m + offset).conjugate() for m in range(20)]
    depends_on_offset_only[name] = max(abs(z - along_diagonal[0]) for z in along_diagonal) < 1e-9
    print(f"{name:42s} product depends on n − m only: {depends_on_offset_only[name]}")
assert depends_on_offset_only == {"rotate by mθ (RoPE)": True, "length (1 + m/10), same rule for q and k": False,
                                  "length e^{λm} on q, e^{−λn} on k": True, "phase m²θ (not linear)": False}
xpos_q, xpos_k = candidates["length e^{λm} on q, e^{−λn} on k"]
past_factor = [abs(xpos_q(1, m) * xpos_k(1, 0).conjugate()) for m in (1, 5, 10)]  # key at n = 0, query at m
assert past_factor[0] > past_factor[1] > past_factor[2]  # λ = −0.1: decays with the distance m − n
rope_q = candidates["rotate by mθ (RoPE)"][0]
steps = [cmath.phase(rope_q(qc, m + 1) / rope_q(qc, m)) for m in range(20)]  # φ(m + 1) − φ(m)
assert max(abs(s_ - theta) for s_ in steps) < 1e-12  # demonstrates the constant step θ of φ(m) = mθ
score = (rope_q(qc, 7) * rope_q(kc, 4).conjugate()).real  # m = 7, n = 4
assert math.isclose(score, (qc * kc.conjugate() * cmath.exp(1j * (7 - 4) * theta)).real)

# %% [markdown] slideshow={"slide_type": "fragment"}
# For d features RoFormer *chooses* to cut the vector into d/2 pairs and to turn each pair this
# way: the argument above was made for one pair, not for d features. The detour at the end of §3
# shows that the choice costs nothing once q and k come from linear maps: every relative rotation
# of d features is pairs in some basis, and W_q and W_k absorb the basis. Nothing in the argument
# fixes θ either: each pair j may turn at its own rate θ_j. RoFormer takes the frequencies of the
# sinusoidal encoding of chapter 3, θ_j = base^(−2j/d). The next section puts the pairs together.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. d features: the block-diagonal matrix R_m
#
# A d-dimensional query is cut into d/2 pairs. Pair j turns at its own frequency
# θ_j = base^(−2j/d) (j = 0 … d/2 − 1 counts pairs; base = 10000), so at position m it
# turns by m·θ_j. All pairs at once form the block-diagonal rotation
#
# $$R_m = \operatorname{diag}\big(R(m\theta_0), R(m\theta_1), \dots, R(m\theta_{d/2-1})\big).$$
#
# `pl.rope_matrix(m, d)` builds it; here is R_2 for d = 6 (θ = 1, 0.0464, 0.0022).

# %% slideshow={"slide_type": "fragment"}
print(pl.rope_frequencies(6))
print(pl.rope_matrix(2, 6))
assert [f"{t:.4f}" for t in pl.rope_frequencies(6, dtype=F64).tolist()] == ["1.0000", "0.0464", "0.0022"]

# %% [markdown] slideshow={"slide_type": "fragment"}
# Our own construction from 2 × 2 blocks gives the same matrix, up to rounding. From here on
# `agree(a, b, within)` asserts that two computations agree to within a few roundings and at most
# `within`, and prints that tolerance, not the measured difference (its docstring says why).

# %% slideshow={"slide_type": "fragment"}
def agree(actual: torch.Tensor, expected: torch.Tensor, within: float) -> str:
    """assert_close(actual, expected), then |actual − expected| ≤ within and < 4 roundings everywhere; the bound.

    A rounding is one float64 or float32 step at the largest |expected|. The bound printed is the smaller of
    `within` and 4 roundings rounded up to a power of ten, not the exact difference: its last bit can change
    with the CPU's sin and cos, and the stored outputs must be the same on any CPU."""
    atol, rtol = (1e-7, 1e-7) if expected.dtype == F64 else (1e-5, 1.3e-6)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=rtol)
    gap = (actual - expected).abs().max().item()
    rounding = torch.finfo(expected.dtype).eps * expected.abs().max().item()  # one step at the largest |value|
    bound = min(within, 10.0 ** math.ceil(math.log10(4 * rounding)))
    assert gap <= within and gap < 4 * rounding, f"largest difference {gap:.1e}: above {within:g} or 4 roundings"
    return f"agree within the tolerance {bound:.0e}"


d = 6
thetas = pl.rope_frequencies(d, dtype=F64)
own = torch.stack([torch.block_diag(*[rot2(m * t) for t in thetas.tolist()]) for m in (0, 2, 37)])
library = torch.stack([pl.rope_matrix(m, d, inv_freq=thetas) for m in (0, 2, 37)])
print("block_diag of 2 x 2 rotations vs pl.rope_matrix at m = 0, 2, 37:", agree(own, library, 1e-12))

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Why the score depends only on n − m.** Each block obeys the 2-D facts, so blockwise
#
# $$R_m^\top R_n = \operatorname{diag}\big(R(m\theta_j)^\top R(n\theta_j)\big)
# = \operatorname{diag}\big(R((n-m)\theta_j)\big) = R_{n-m},$$
#
# $$\langle R_m q, R_n k\rangle = q^\top R_m^\top R_n k = q^\top R_{n-m}\, k .$$
#
# The positions enter only through the offset n − m (key minus query): shifting both by s
# changes nothing. This is §2's e^{imθ}·conj(e^{inθ}) = e^{−i(n−m)θ}, pair by pair. The sign of
# the offset counts: R_{n−m} and R_{m−n} turn opposite ways, so a key 3 positions ahead and one
# 3 behind score differently. The next cell checks all of this for 50 random q, k, m, n and shifts s
# (float64, d = 16).

# %% slideshow={"slide_type": "fragment"}
d = 16
f64 = pl.rope_frequencies(d, dtype=F64)


def R(m: int) -> torch.Tensor:
    return pl.rope_matrix(m, d, inv_freq=f64)


for _ in range(50):
    m, n, s = torch.randint(0, 5000, (3,)).tolist()
    q, k = torch.randn(d, dtype=F64), torch.randn(d, dtype=F64)
    score = (R(m) @ q) @ (R(n) @ k)
    torch.testing.assert_close(R(m).T @ R(n), R(n - m))
    torch.testing.assert_close(score, q @ R(n - m) @ k)
    torch.testing.assert_close(score, (R(m + s) @ q) @ (R(n + s) @ k))
    assert m == n or not torch.isclose(score, q @ R(m - n) @ k)  # the other sign is another score
print("50 random (q, k, m, n, s): ⟨R_m q, R_n k⟩ = ⟨q, R_(n−m) k⟩ = ⟨R_(m+s) q, R_(n+s) k⟩ ≠ ⟨q, R_(m−n) k⟩")

# %% [markdown] slideshow={"slide_type": "subslide"}
# From here on the library rotates for us: `pl.apply_rope(x, positions)` turns row i of x, of shape
# (…, seq, d), by R_{positions[i]} (positions default to 0, 1, …, seq − 1), with the pairs (0, 1),
# (2, 3), … of R_m above. §6 shows how it is written without ever building R_m; the cell checks it
# against R_m.

# %% slideshow={"slide_type": "fragment"}
x4 = torch.randn(4, d, dtype=F64, generator=torch.Generator().manual_seed(4))
at = torch.tensor([0, 3, 7, 4000])
by_matrix = torch.stack([R(p) @ x4[i] for i, p in enumerate(at.tolist())])
print("pl.apply_rope(x, positions)[i] vs R_(positions[i]) x[i]:", agree(pl.apply_rope(x4, at, inv_freq=f64), by_matrix, 1e-12))
print("default positions 0, 1, 2, 3:", agree(pl.apply_rope(x4), torch.stack([R(p) @ x4[p] for p in range(4)]), 1e-12))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### What shift invariance buys, and what it does not
#
# A model that generates text one token at a time keeps the keys and values of the tokens it has
# already seen, its **KV cache**, and computes them only for each new token.
# Shift invariance is not what makes decoding with a KV cache possible. A cache needs only that a key, once
# computed, never changes: true of an absolute encoding as well (the token at position 7 gets
# $W_k(x + p_7)$ when it arrives, and that key is as right at step 100 as at step 8). What RoPE adds
# is that the scores among a group of tokens do not depend on *where* the group sits: a sentence
# gets the same scores at positions 0–4 and at 1000–1004. A pattern learned at one place
# applies at every place, and a model that only ever attends within a window sees the same offsets
# at position 10⁶ as at position 100 (angle precision aside, §9). Chapter 4's relative methods share
# that invariance in their scores; what RoPE changes is where the offset enters. They add a term to the score of
# every (query, key) pair, and Shaw's, T5's and DeBERTa's read it from a table learned per offset,
# clipped or bucketed to keep the table small. RoPE touches only q and k: nothing is learned, no
# offset is clipped, and the score stays a plain dot product of two vectors, so an attention kernel
# that takes only q, k and v computes it as it is.
# The cell shows both halves: keys cached one token at a time equal keys computed at once, for sinusoids
# added to the tokens and for RoPE alike; moving five tokens by 1000 positions changes their scores under the sinusoids and
# leaves them under RoPE.

# %% slideshow={"slide_type": "fragment"}
gen5 = torch.Generator().manual_seed(5)  # its own stream: the cells below keep their random numbers
W_q5, W_k5 = torch.randn(2, d, d, dtype=F64, generator=gen5)
x5 = torch.randn(5, d, dtype=F64, generator=gen5)  # five tokens


def absolute_qk(x: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Chapter 3: sinusoids of positions start .. start + len(x) - 1 added to the tokens, then W_q, W_k."""
    p = pl.sinusoidal_positions(start + len(x), d, dtype=F64)[start:]
    return (x + p) @ W_q5.T, (x + p) @ W_k5.T


def rope_qk(x: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
    pos = torch.arange(start, start + len(x))
    return pl.apply_rope(x @ W_q5.T, pos), pl.apply_rope(x @ W_k5.T, pos)


for encode in (absolute_qk, rope_qk):  # a cache works for both: keys made one at a time = keys made at once
    one_by_one = torch.cat([encode(x5[t:t + 1], t)[1] for t in range(5)])
    torch.testing.assert_close(one_by_one, encode(x5, 0)[1])
scores_at = {(f.__name__, start): (lambda qk: qk[0] @ qk[1].T)(f(x5, start))
             for f in (absolute_qk, rope_qk) for start in (0, 1000)}
abs_gap = (scores_at["absolute_qk", 1000] - scores_at["absolute_qk", 0]).abs().max().item()
torch.testing.assert_close(scores_at["rope_qk", 1000], scores_at["rope_qk", 0])  # RoPE: same scores
assert abs_gap > 1.0
print(f"cached keys = keys computed at once, for both; moving 5 tokens by 1000 changes their scores by up to "
      f"{abs_gap:.1f} with added sinusoids, by nothing with RoPE")

# %% [markdown] slideshow={"slide_type": "fragment"}
# The cache itself is bookkeeping: a new token is rotated at its true position (the number of tokens
# already cached) while the cached keys keep the rotations they got when they were new.
# [Chapter 8, §4](08_rope_in_models.ipynb) decodes this way with a KV cache. `pl.RotaryEmbedding`, the
# module form of `apply_rope` that keeps its cos and sin tables, takes the **start position** of the new
# tokens, the position of the first of them. The library names that argument `offset=`; in this course's
# prose an offset is always n − m, key minus query, and where new tokens begin is their start position:

# %% slideshow={"slide_type": "fragment"}
rope16 = pl.RotaryEmbedding(d)
q_new, k_new = torch.randn(2, 1, 3, d, generator=torch.Generator().manual_seed(3))  # 3 new tokens, 40 cached
q_rot, k_rot = rope16(q_new, k_new, offset=40)
print("start position 40 (offset=40) vs apply_rope at positions 40, 41, 42:",
      agree(q_rot, pl.apply_rope(q_new, torch.arange(40, 43)), 1e-6))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Why 2 × 2 pairs? (a detour: nothing later needs it but Exercise 3)
#
# One source (`000`) says RoPE turns 2-D pairs because "a d-dimensional rotation is too complex".
# But $R_m$ *is* a d-dimensional rotation, and pairs are not a simplification: up to a change of basis
# they are the only shape a relative family of rotations without a reflection can have. The argument in
# three steps:
#
# 1. **One matrix, in powers.** Ask for any d × d matrices with $R_0 = I$ (position 0 changes nothing,
#    as in §2) and $R_m^\top R_n = R_{n-m}$ for all positions. Then $R_m^\top R_m = R_0 = I$, so every
#    $R_m$ is orthogonal, and $R_n = R_1 R_1^\top R_n = R_1 R_{n-1} = \dots = R_1^n$: the family is the
#    powers of one orthogonal matrix.
# 2. **Its generator.** For d = 2, $R(m\theta) = \exp(mA)$ with $A = \begin{pmatrix}0 & -\theta\\ \theta & 0\end{pmatrix}$:
#    the matrix exponential (the series $I + A + A^2/2! + \dots$) of a rotation *speed* is the turn
#    it makes in time m, as $e^{im\theta}$ is for a complex number. In d dimensions, if positions could be
#    any real t with $R_t$ smooth, step 1's rule $R_{t+s} = R_t R_s$ gives $\tfrac{d}{dt}R_t = R_t A$ with $A$ the
#    derivative at 0, so $R_t = \exp(tA)$, and differentiating $R_t^\top R_t = I$ at 0 gives
#    $A^\top = -A$. We call this **skew-symmetric** A the family's **generator**. (With integer positions
#    only, the same holds for any $R_1$ without a reflection, a theorem we take on trust.)
# 3. **Its planes.** Why is a skew-symmetric A made of 2 × 2 blocks? $A^2 = -A^\top A$ is symmetric, so
#    it has an orthonormal basis of eigenvectors, with eigenvalues $-\theta^2 \le 0$ ($u^\top A^2 u =
#    -|Au|^2$). Take one, u, with $A^2u = -\theta^2u$, θ > 0, and let $v = Au/\theta$. Then v is a unit
#    vector ($|Au|^2 = \theta^2$), orthogonal to u ($u^\top Au = 0$ for any skew A), and
#    $Au = \theta v$, $Av = A^2u/\theta = -\theta u$: A maps the plane (u, v) into itself exactly as
#    the 2 × 2 block $\begin{pmatrix}0 & -\theta\\ \theta & 0\end{pmatrix}$ does. What is left, the
#    vectors w orthogonal to u and v, A maps into itself too ($u^\top Aw = -(Au)^\top w = -\theta\,v^\top w = 0$,
#    and likewise for v), so the step repeats there. It ends with an orthonormal basis $Q$ of such planes,
#    plus the directions A sends to zero: pairs with θ = 0 (possible for any d), and one lone unturned
#    feature when d is odd. So $A = Q B Q^\top$ with B block-diagonal, so $R_m = Q\,\exp(mB)\,Q^\top$: RoPE's block rotations
#    with frequencies $\theta_j$, seen in the basis $Q$. We say A is RoPE **tilted** by Q.
#
# The basis costs nothing, since the projections absorb it:
# $\langle R_m W_q x, R_n W_k y\rangle = \langle \exp(mB)\,Q^\top W_q x,\; \exp(nB)\,Q^\top W_k y\rangle$,
# a RoPE model with $W_q' = Q^\top W_q$ and $W_k' = Q^\top W_k$. What RoPE does choose is the
# frequencies, $\theta_j = \text{base}^{-2j/d}$.
#
# The cell checks step 2 for d = 2, then takes a random skew-symmetric $A$ (d = 6), checks that
# $\exp(mA)$ is relative, builds $Q$ and the $\theta_j$ exactly as step 3 says (eigenvectors of $A^2$,
# each $\theta_j^2$ twice: one u per plane and $v = Au/\theta_j$), and checks the two claims.

# %% slideshow={"slide_type": "fragment"}
torch.testing.assert_close(torch.linalg.matrix_exp(3 * torch.tensor([[0, -0.7], [0.7, 0]], dtype=F64)), rot2(3 * 0.7))
gen6 = torch.Generator().manual_seed(6)
M6 = torch.randn(6, 6, dtype=F64, generator=gen6)
A = M6 - M6.T  # skew-symmetric
assert not torch.allclose(A, A * torch.block_diag(*[torch.ones(2, 2, dtype=F64)] * 3))  # not in pairs here


def R_A(m: int) -> torch.Tensor:
    return torch.linalg.matrix_exp(m * A)


for m, n in ((3, 7), (10, 2), (0, 25)):
    torch.testing.assert_close(R_A(m).T @ R_A(n), R_A(n - m))  # relative, like RoPE
evals, evecs = torch.linalg.eigh(A @ A)  # -theta_j^2, each twice, ascending: fastest plane first
thetas_A = (-evals[0::2]).sqrt()
torch.testing.assert_close(evals[0::2], evals[1::2])  # each plane's theta^2 comes twice
Q = torch.stack([w for j in range(3) for w in (evecs[:, 2 * j], A @ evecs[:, 2 * j] / thetas_A[j])], dim=1)
torch.testing.assert_close(Q.T @ Q, torch.eye(6, dtype=F64))  # an orthonormal basis
for m in (1, 5, 37):
    torch.testing.assert_close(Q.T @ R_A(m) @ Q, pl.rope_matrix(m, 6, inv_freq=thetas_A))  # pairs in Q's basis
Wq6, Wk6 = torch.randn(2, 6, 6, dtype=F64, generator=gen6)
xs6 = torch.randn(2, 6, dtype=F64, generator=gen6)
score_A = (R_A(4) @ Wq6 @ xs6[0]) @ (R_A(9) @ Wk6 @ xs6[1])
score_rope = (pl.apply_rope((Q.T @ Wq6 @ xs6[0])[None], torch.tensor([4]), inv_freq=thetas_A)[0]
              @ pl.apply_rope((Q.T @ Wk6 @ xs6[1])[None], torch.tensor([9]), inv_freq=thetas_A)[0])
torch.testing.assert_close(score_A, score_rope)  # the projections absorb Q
A5 = M6[:5, :5] - M6[:5, :5].T  # odd d: A² has a zero eigenvalue, the lone unturned direction
assert torch.linalg.eigvalsh(A5 @ A5).abs().min() < 1e-12 < torch.linalg.eigvalsh(A @ A).abs().min()
w = evecs[:, 2:]  # orthogonal to the first plane (u, v): A keeps them orthogonal to it
assert (Q[:, :2].T @ A @ (w - Q[:, :2] @ (Q[:, :2].T @ w))).abs().max() < 1e-12
print("frequencies of this A:", [round(t, 3) for t in thetas_A.tolist()],
      "| exp(mA) = Q R_m Q^T, and the score equals RoPE's with W_q, W_k turned by Q^T")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. Where RoPE acts: q and k in every layer, and v only with a turn back
#
# In an attention layer token x_n gives a query q_n = W_q x_n, a key k_n = W_k x_n and a value
# v_n = W_v x_n, and the output at position m is o_m = Σ_n a_mn v_n with weights
# a_mn = softmax_n(⟨q_m, k_n⟩/√d). RoPE turns q_m by R_m and k_n by R_n **after** the
# projections and leaves v_n alone. It adds nothing to the token embeddings (unlike the
# sinusoids of chapter 3, added once at the input): RoPE writes no code into the residual
# stream. What reaches the stream about order comes through attention, mixed into what each
# layer outputs (the second cell below shows that it does reach it). Nothing in the architecture makes
# it a rotation by the offset, so we do not expect it to be a reliable relative signal for the next
# layer (an argument, not measured here). So RoPE models
# turn q and k **in every attention layer**, and each layer's scores have §3's relative form. That
# is a design choice, not a necessity (the third cell below is the control). The small decoder that
# chapter 7 trains, `pl.TinyDecoder`, shows it. All we need of it here: its positional method sits in
# `tiny.positional`, and each attention layer hands its q and k, of shape (batch, heads, seq, d), to
# `tiny.positional.rotate(q, k, layer=i)` (i its layer's index). We put a recording wrapper in that
# place in a 3-layer model:

# %% slideshow={"slide_type": "fragment"}
tiny = pl.TinyDecoder(vocab_size=11, positional="rope", d_model=32, num_heads=2, num_layers=3).eval()
x_emb = torch.randn(1, 6, 32)
assert torch.equal(tiny.positional.embed(x_emb), x_emb)  # RoPE adds nothing to the embeddings
calls, turn_qk = [], tiny.positional.rotate


def recording_rotate(q: torch.Tensor, k: torch.Tensor, **kw):
    calls.append((kw["layer"], tuple(q.shape), tuple(k.shape)))
    return turn_qk(q, k, **kw)


tiny.positional.rotate = recording_rotate  # the model looks the hook up on every forward
with torch.no_grad():
    tiny(torch.randint(0, 11, (1, 6)))
del tiny.positional.rotate
assert calls == [(layer, (1, 2, 6, 16), (1, 2, 6, 16)) for layer in range(3)]
print("rotation calls (layer, q shape, k shape):", calls)

# %% [markdown] slideshow={"slide_type": "fragment"}
# Order does reach the residual stream through attention. Feed the tokens 3, 5, 7 and 5, 3, 7 and
# read the stream after the first layer at the last position (token 7 both times). Without the rotation
# that position sees the same set of keys in both inputs and cannot tell the orders apart; with it, the
# two differ.

# %% slideshow={"slide_type": "fragment"}
after_layer_1 = []
hook = tiny.blocks[0].register_forward_hook(lambda module, args, out: after_layer_1.append(out[0, -1]))
with torch.no_grad():
    for rotate in (turn_qk, lambda q, k, **kw: (q, k)):  # RoPE, then no rotation at all
        tiny.positional.rotate = rotate
        for order in ([3, 5, 7], [5, 3, 7]):
            tiny(torch.tensor([order]))
del tiny.positional.rotate
hook.remove()
rope_gap = (after_layer_1[0] - after_layer_1[1]).abs().max().item()
torch.testing.assert_close(after_layer_1[2], after_layer_1[3])  # no rotation: order invisible
assert rope_gap > 1e-3
print(f"stream after layer 1 at token 7: 3,5,7 vs 5,3,7 differ by up to {rope_gap:.3f} with RoPE, "
      "not at all without it")

# %% [markdown] slideshow={"slide_type": "fragment"}
# **The control: past layer 1, order gets through without any rotation.** The same two inputs, no
# rotation in any layer, the stream read after each layer at the last position. After layer 1 the
# two agree, as above; after layers 2 and 3 they differ: the causal mask let positions 0 and 1
# see different prefixes in layer 1 (token 3 alone, or token 5 alone), and layer 2 reads their
# outputs. A causal stack sees order with no positional code at all ([chapter 1](01_why_positions.ipynb),
# "A causal mask breaks equivariance"). So rotating in every layer is a choice: it hands each
# layer the offset in its scores, rather than whatever the mask leaks. Models make the other choice
# too: Llama 4's iRoPE leaves some layers unrotated (NoPE layers, [chapter 8, §5](08_rope_in_models.ipynb)).

# %% slideshow={"slide_type": "fragment"}
unrotated = {}
hooks = [block.register_forward_hook(lambda module, args, out, i=i: unrotated.setdefault(i, []).append(out[0, -1]))
         for i, block in enumerate(tiny.blocks)]
with torch.no_grad():
    tiny.positional.rotate = lambda q, k, **kw: (q, k)  # no rotation in any layer
    for order in ([3, 5, 7], [5, 3, 7]):
        tiny(torch.tensor([order]))
del tiny.positional.rotate
for hook in hooks:
    hook.remove()
gaps = [(a - b).abs().max().item() for a, b in unrotated.values()]  # after layers 1, 2, 3
assert gaps[0] < 1e-5 and min(gaps[1:]) > 1e-2  # layer 1 blind to the order; layers 2 and 3 not
print("no rotation anywhere: 3,5,7 vs 5,3,7 at token 7 agree after layer 1 (to 1e-5), differ after layers 2, 3 "
      f"by up to {gaps[1]:.2f}, {gaps[2]:.2f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Why not v, naively?** The score is what must be relative, and §3 showed it is:
# ⟨R_m q, R_n k⟩ = qᵀR_{n−m}k. A value is not compared with anything; it is averaged. Turning
# the values too gives o_m = Σ_n a_mn R_n v_n, which carries the absolute positions n of the
# values. The test: the same 6 tokens at positions 0–5 and shifted to s … s + 5. With q and k
# turned, the weights and outputs are the same for every shift; with v turned as well the
# weights are still the same, but the outputs are not.
#
# Values *can* be rotated, though, if the output is turned back: o_m = R_mᵀ Σ_n a_mn R_n v_n
# = Σ_n a_mn R_{n−m} v_n turns each value by its offset, which is relative again. Su Jianlin's blog
# names this VO-RoPE ("the second kind of rotary position embedding", 2025; a citation: the cell checks
# the idea, not its history). Below, `pl.attention(q, k, v)` is chapter 1's softmax attention,
# returning the outputs and the weights softmax(qkᵀ/√d). The last line of the cell checks that VO-RoPE
# is shift-invariant and that it is not the plain layer (its outputs carry the offsets).

# %% slideshow={"slide_type": "fragment"}
qs, ks, vs = torch.randn(3, 6, 16, dtype=F64)


def layer_output(start: int, turn_values: bool, turn_back: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, weights) of one attention layer for the 6 tokens at positions start .. start + 5.

    turn_values: rotate v_n by R_n; turn_back: then rotate each output o_m by R_m^T (VO-RoPE)."""
    pos = torch.arange(start, start + 6)
    values = pl.apply_rope(vs, pos) if turn_values else vs
    out, w = pl.attention(pl.apply_rope(qs, pos), pl.apply_rope(ks, pos), values)
    if turn_back:
        out = pl.apply_rope(out, -pos)  # R_m^T = R_(-m)
    return out, w


for shift in (1, 100, 4321):
    for turn_values in (False, True):
        torch.testing.assert_close(layer_output(shift, turn_values)[1], layer_output(0, turn_values)[1])
    torch.testing.assert_close(layer_output(shift, False)[0], layer_output(0, False)[0])
    gap = (layer_output(shift, True)[0] - layer_output(0, True)[0]).abs().max().item()
    assert gap > 0.1
    torch.testing.assert_close(layer_output(shift, True, True)[0], layer_output(0, True, True)[0])  # VO-RoPE
    print(f"shift {shift:4d}: q, k turned: output unchanged; v turned too: output moves by up to {gap:.2f}; "
          "v turned and output turned back: unchanged")
assert not torch.allclose(layer_output(0, True, True)[0], layer_output(0, False)[0], atol=1e-3)  # not the plain layer

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. The worked example, digit by digit
#
# *Optional reading.* Steps 1–3 recompute one source's hand-worked table; from its printed table on,
# the section is errata forensics (two rounding slips, two formulas), and nothing later needs it.
#
# Source `004` (a RoFormer summary) rotates 5 positions of d = 4 features by hand.
# Step 1: split each input row into pairs (x₀, x₁) and (x₂, x₃); the cell prints them.
#
# The source's code splits with `vec[:2]` and `vec[2:]` and types the angles m and m/100: it is
# written for d = 4, as the source says. At d = 4 the split looks like cutting the vector into
# halves, but it yields the **interleaved** pairs (x₀, x₁), (x₂, x₃), not (x₀, x₂), (x₁, x₃), the
# "half" layout that §6c introduces (`pl.pair_indices(d, layout)` returns two index tensors: the first
# feature of every pair, then the second). For larger d the row is split into d/2 pairs (at d = 8, `vec[2:]` would hold six features).

# %% slideshow={"slide_type": "fragment"}
x = torch.tensor([[1, 0, 1, 0], [0, 1, 0, 1], [1, 1, 1, 1], [1, -1, 1, -1], [0.5, 0.5, 0.5, 0.5]], dtype=F64)
pairs = x.view(5, 2, 2)  # (position, pair j, member)
for m in range(5):
    print(f"m = {m}: (x₀, x₁) = {tuple(pairs[m, 0].tolist())}, (x₂, x₃) = {tuple(pairs[m, 1].tolist())}")
first, second = pl.pair_indices(4, "interleaved")
assert torch.equal(pairs[:, 0], x[:, :2]) and torch.equal(pairs[:, 1], x[:, 2:])  # the source's vec[:2], vec[2:]
assert (first.tolist(), second.tolist()) == ([0, 2], [1, 3])  # interleaved: pairs (0, 1) and (2, 3)
assert [p.tolist() for p in pl.pair_indices(4, "half")] == [[0, 1], [2, 3]]  # half: pairs (0, 2) and (1, 3)
assert len(list(range(8))[2:]) == 6  # at d = 8 the second "pair" would have six features

# %% [markdown] slideshow={"slide_type": "subslide"}
# Step 2: the angles. With d = 4 there are two pairs: θ₀ = 10000⁰ = 1 and
# θ₁ = 10000^(−2/4) = 1/100, so position m turns pair 0 by m and pair 1 by m/100
# (`pl.rope_angles(L, d)` gives the (position, pair) grid of angles m·θ_j).

# %% slideshow={"slide_type": "fragment"}
angles = pl.rope_angles(5, 4, inv_freq=pl.rope_frequencies(4, dtype=F64))  # (position, pair)
print(angles)
m_col = torch.arange(5, dtype=F64)
torch.testing.assert_close(angles, torch.stack((m_col, m_col / 100), -1))

# %% [markdown] slideshow={"slide_type": "subslide"}
# Step 3: rotate each pair counter-clockwise, (a, b) ↦ (a cos − b sin, a sin + b cos),
# in float64, and print the table to 4 decimals.

# %% slideshow={"slide_type": "fragment"}
c, s = angles.cos(), angles.sin()
a_, b_ = pairs[..., 0], pairs[..., 1]
rotated = torch.stack((a_ * c - b_ * s, a_ * s + b_ * c), -1).reshape(5, 4)


def fmt(v: torch.Tensor) -> str:
    return "[" + ", ".join(f"{t:7.4f}" for t in v.tolist()) + "]"


print(" m | input                 | θ_m,0  θ_m,1 | rotated pair 0     | rotated pair 1")
for m in range(5):
    print(f" {m} | {str(x[m].tolist()):22}| {angles[m, 0]:.0f}      {angles[m, 1]:.2f}  "
          f"| {fmt(rotated[m, :2])} | {fmt(rotated[m, 2:])}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The source prints this table (its numbers, kept here as data), and `pl.apply_rope`
# must agree with our float64 table:

# %% slideshow={"slide_type": "fragment"}
SOURCE_TABLE = [  # "rotated group 1 | rotated group 2" as printed in the source
    [1.0, 0.0, 1.0, 0.0],
    [-0.8415, 0.5403, -0.0100, 0.9999],
    [-1.3254, 0.4932, 0.9798, 1.0198],
    [-0.8489, 1.1311, 1.0296, -0.9696],
    [0.0516, -0.7052, 0.4796, 0.5196],
]
torch.testing.assert_close(pl.apply_rope(x.float()), rotated.float(), atol=1e-6, rtol=0)
ours = [[f"{v:.4f}" for v in row] for row in rotated.tolist()]
theirs = [[f"{v:.4f}" for v in row] for row in SOURCE_TABLE]
mismatch = [(m, j, theirs[m][j], ours[m][j]) for m in range(5) for j in range(4) if ours[m][j] != theirs[m][j]]
for m, j, t, o in mismatch:
    print(f"row {m}, feature {j}: source prints {t}, correctly rounded value is {o} (exact {rotated[m, j]:.13f})")
assert [(m, j) for m, j, _, _ in mismatch] == [(1, 3), (3, 2)]
assert not torch.allclose(pl.apply_rope(x, layout="half"), rotated, atol=1e-2)  # the table is interleaved

# %% [markdown] slideshow={"slide_type": "subslide"}
# 18 of 20 entries match; the other two are rounding slips:
# * 1.0296 is cos(0.03) + sin(0.03) = 1.029546…, which rounds to 1.0295; cos and sin rounded to
#   4 decimals *before* adding give 0.9996 + 0.0300 = 1.0296.
# * 0.9999 is cos(0.01) = 0.9999500004167…, only 4.2·10⁻¹⁰ above the rounding tie 0.99995. Its
#   nearest float32 number, 0.99994999…, is already below the tie, so float32 prints 0.9999.
#
# The post does not say which step its author took. The next cell recomputes the table four ways
# and counts the printed entries each reproduces: float64, 18 of 20; cos and sin rounded to 4
# decimals first, 19 (all but 0.9999); float32, 19 (all but 1.0296); float32 cos and sin rounded
# to 4 decimals before the rotation, all 20. The slips are **consistent with** that last process;
# they do not prove it.

# %% slideshow={"slide_type": "fragment"}
v_exact, v_early = math.cos(0.03) + math.sin(0.03), round(math.cos(0.03), 4) + round(math.sin(0.03), 4)
c_exact, c_f32 = math.cos(0.01), torch.tensor(0.01).cos().item()
assert (f"{v_exact:.4f}", f"{v_early:.4f}") == ("1.0295", "1.0296")  # rounded early: the printed value
assert (f"{c_exact:.4f}", f"{c_f32:.4f}") == ("1.0000", "0.9999") and f"{c_exact:.13f}" == "0.9999500004167"
assert 4.1e-10 < c_exact - 0.99995 < 4.2e-10 and f"{torch.tensor(c_exact).item():.8f}" == "0.99994999"


def table_by(cos: torch.Tensor, sin: torch.Tensor) -> list[list[str]]:
    """The worked example from these cos and sin tables (any dtype), printed to 4 decimals."""
    a, b = pairs[..., 0].to(cos.dtype), pairs[..., 1].to(cos.dtype)
    return [[f"{v:.4f}" for v in row] for row in torch.stack((a * cos - b * sin, a * sin + b * cos), -1)
            .reshape(5, 4).double().tolist()]


a32 = angles.float()
processes = {
    "float64": table_by(angles.cos(), angles.sin()),
    "float64, cos and sin rounded to 4 decimals first": table_by(angles.cos().round(decimals=4),
                                                                 angles.sin().round(decimals=4)),
    "float32": table_by(a32.cos(), a32.sin()),
    "float32 cos and sin, rounded to 4 decimals first": table_by(a32.cos().double().round(decimals=4),
                                                                 a32.sin().double().round(decimals=4)),
}
reproduced = {name: sum(t == o for r_t, r_o in zip(theirs, table) for t, o in zip(r_t, r_o))
              for name, table in processes.items()}
for name, count in reproduced.items():
    print(f"{name:50s} reproduces {count} of 20 printed entries")
assert list(reproduced.values()) == [18, 19, 19, 20]

# %% [markdown] slideshow={"slide_type": "subslide"}
# **The source's two formulas** (its table follows the right method; one formula is wrong,
# the other needs a convention the post does not state):
#
# * It writes the angle of pair i (our j) at position n as n·(1/10000)^(−2i/d). That is
#   n·10000^(+2i/d): it *grows* with i (100·n for i = 1, d = 4). The correct angle is
#   n·10000^(−2i/d) = n/100 — which is what its own table uses.
# * It prints the rotation matrix as M = [[cos, sin], [−sin, cos]] without saying how M is
#   applied. Acting on a **column** vector, M·(x, y)ᵀ, the convention of RoFormer (§3.2) and
#   of this course, M turns **clockwise**, and row 1 of the table rules that out: (0, 1)
#   turned by 1 rad is (−0.8415, 0.5403) counter-clockwise and (+0.8415, 0.5403) clockwise;
#   the table prints −0.8415. Read as a **row** vector times the matrix, (x, y)·M =
#   (x cos − y sin, x sin + y cos), the same M is the counter-clockwise turn of its code and
#   table. The matrix is right only in that reading, which the post never states.
#
# The next cell rebuilds the table with the source's angle formula and with both readings
# of M, and asserts which ones match.

# %% slideshow={"slide_type": "fragment"}
def rotate_table(angles: torch.Tensor, clockwise: bool = False) -> torch.Tensor:
    c, s = angles.cos(), angles.sin()
    s = -s if clockwise else s  # clockwise = rotation by −angle
    return torch.stack((a_ * c - b_ * s, a_ * s + b_ * c), -1).reshape(5, 4)


source = torch.tensor(SOURCE_TABLE, dtype=F64)
wrong_angles = m_col[:, None] * (1 / 10000) ** (-2 * torch.arange(2, dtype=F64) / 4)  # n (1/10000)^(−2i/d)
print("angles of pair 1 with the source's formula:", wrong_angles[:, 1].tolist())
err_right = (rotate_table(angles) - source).abs().max().item()
err_sign = (rotate_table(wrong_angles) - source).abs().max().item()
err_clockwise = (rotate_table(angles, clockwise=True) - source).abs().max().item()
print(f"largest gap to the printed table: correct {err_right:.1e}, "
      f"source's angle formula {err_sign:.2f}, clockwise turn {err_clockwise:.2f}")
assert err_right < 6e-5 and err_sign > 0.5 and err_clockwise > 0.5


def source_matrix(angle: float) -> torch.Tensor:
    """The source's M = [[cos, sin], [−sin, cos]]."""
    c, s = math.cos(angle), math.sin(angle)
    return torch.tensor([[c, s], [-s, c]], dtype=F64)


as_column = torch.stack([torch.stack([source_matrix(t) @ p for p, t in zip(pairs[m], angles[m].tolist())])
                         for m in range(5)]).reshape(5, 4)  # M (x, y)^T
as_row = torch.stack([torch.stack([p @ source_matrix(t) for p, t in zip(pairs[m], angles[m].tolist())])
                      for m in range(5)]).reshape(5, 4)  # (x, y) M
torch.testing.assert_close(as_column, rotate_table(angles, clockwise=True))  # column reading: clockwise
torch.testing.assert_close(as_row, rotated)  # row reading: the counter-clockwise turn of the code
e2 = torch.tensor([0.0, 1.0], dtype=F64)
assert [f"{t:.4f}" for t in (e2 @ source_matrix(1.0)).tolist()] == ["-0.8415", "0.5403"]  # row 1 as printed
assert [f"{t:.4f}" for t in (source_matrix(1.0) @ e2).tolist()] == ["0.8415", "0.5403"]  # column reading
print(f"the source's M on column vectors: gap {(as_column - source).abs().max():.2f}; "
      f"row vector times M: gap {(as_row - source).abs().max():.1e}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. Every implementation in the sources
#
# The sources show four ways to code the same rotation (`000` and `003` Meta's, `001` the
# even/odd and Hugging Face's, `003` the alternating one). We write each one ourselves and
# compare it with `pl.apply_rope` on a (batch, heads, seq, d) tensor. Meta's, the even/odd
# and the alternating forms use the **interleaved** layout, pairs (0, 1), (2, 3), …;
# Hugging Face's uses the **half** layout, pairs (j, j + d/2).

# %% slideshow={"slide_type": "fragment"}
B, H, L, D = 2, 3, 10, 16
xq = torch.randn(B, H, L, D).to(device)
want = pl.apply_rope(xq)  # interleaved
want_half = pl.apply_rope(xq, layout="half")
ang = pl.rope_angles(L, D, device=device)  # (seq, d/2): m θ_j, float32
print(tuple(xq.shape), tuple(ang.shape))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 6a. Meta LLaMA: complex numbers
#
# Read pair j as the complex number x_{2j} + i·x_{2j+1}; turning it by mθ_j is multiplying
# by e^{imθ_j}. Meta precomputes these unit complex numbers with `torch.polar`
# (`precompute_freqs_cis`) and multiplies `view_as_complex` pairs (`apply_rotary_emb`).

# %% slideshow={"slide_type": "fragment"}
def unit_phases(angles: torch.Tensor) -> torch.Tensor:
    """e^{i m θ_j} for each (position, pair): torch.polar(radius 1, angle)."""
    return torch.polar(torch.ones_like(angles), angles)


def complex_rope(x: torch.Tensor, phases: torch.Tensor) -> torch.Tensor:
    z = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))  # (..., seq, d/2) complex
    return torch.view_as_real(z * phases).flatten(-2).type_as(x)


print("complex form vs apply_rope (interleaved):", agree(complex_rope(xq, unit_phases(ang)), want, 1e-6))

# %% [markdown] slideshow={"slide_type": "fragment"}
# **Aside** (a source's slip; nothing later needs it). Source `000`'s attention sketch precomputes the
# phases for `2 * max_seq_len` positions and multiplies by the whole table; Meta's code first slices
# the rows of the current positions. Without the slice, a prompt of 10 tokens fails at once: 10 rows do
# not broadcast against 64.
#
# One token does broadcast, so each step of decoding runs on. The token comes out turned to all 64
# positions of the table, for the query and the key alike, and the scores become 64 × 64. The error
# surfaces one line later: at `matmul(scores, xv)` in the sketch, or, with a KV cache, when 64 key rows
# are written into the cache's one-row slot. It points there, not at the table that caused it. The
# slice for a token at position p is `table[p : p + 1]`. The cell runs both cases through the sketch's
# attention and writes into a cache of its own.

# %% slideshow={"slide_type": "fragment"}
table = unit_phases(pl.rope_angles(2 * 32, D, device=device))  # 64 positions precomputed
try:
    complex_rope(xq, table)
    raise AssertionError("expected a shape error")
except RuntimeError as e:
    print("unsliced table, 10 tokens:", str(e).split("at non-singleton")[0].strip())
torch.testing.assert_close(complex_rope(xq, table[:L]), want)  # slice [start : start + seq]
one_token = xq[..., 7:8, :]  # decoding: the token at position 7 alone, as its query, key and value
q_one, k_one = complex_rope(one_token, table), complex_rope(one_token, table)  # no error: 64 rows each
weights = torch.softmax(q_one @ k_one.transpose(-1, -2) / math.sqrt(D), dim=-1)  # (…, 64, 64): no error
assert q_one.shape == (B, H, 64, D) and weights.shape == (B, H, 64, 64) and one_token.shape == (B, H, 1, D)
try:
    weights @ one_token  # the sketch's matmul(scores, xv)
    raise AssertionError("expected a shape error")
except RuntimeError as e:
    print("unsliced table, 1 token: the multiply gives 64 rows; the value product fails:", str(e).split(".")[0])
cache_k = torch.zeros(B, H, 64, D, device=device)  # a KV cache: one slot per position
try:
    cache_k[..., 7:8, :] = k_one  # the slot of position 7
    raise AssertionError("expected a shape error")
except RuntimeError as e:
    print("unsliced table, 1 token, with a KV cache: the cache write fails:", str(e).split(".")[0])
torch.testing.assert_close(complex_rope(one_token, table[7:8]), want[..., 7:8, :])  # sliced: the token at 7

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 6b. The even/odd ("naive") form
#
# Take the even features x[..., ::2] and the odd ones x[..., 1::2] (0-indexed), rotate
# them as whole vectors, then weave the results back together.

# %% slideshow={"slide_type": "fragment"}
def even_odd_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor):
    x_even, x_odd = x[..., ::2], x[..., 1::2]  # features 0, 2, 4, … and 1, 3, 5, …
    first = cos * x_even - sin * x_odd  # goes to features 0, 2, 4, … (the source calls it `odds`)
    second = sin * x_even + cos * x_odd  # goes to features 1, 3, 5, … (the source's `evens`)
    stacked = torch.stack((first, second), -2)  # (..., seq, 2, d/2)
    return stacked.transpose(-1, -2).flatten(-2), stacked


out, stacked = even_odd_rope(xq, ang.cos(), ang.sin())
assert torch.equal(stacked[..., 0, :], out[..., ::2])  # row 0: o_1, o_3, o_5, … (1-indexed)
print("even/odd form vs apply_rope:", agree(out, want, 1e-6))
print("the stacked row 0 holds the outputs at 0-indexed features 0, 2, 4, … (equal bit for bit)")

# %% [markdown] slideshow={"slide_type": "fragment"}
# **Aside** (a source's slips). Two slips in source `001`, both checked above: its code names the inputs
# with 0-indexed parity (`x_even = x[..., ::2]`) but the outputs with 1-indexed parity, so the tensor
# called `odds` lands on the *even* 0-indexed features; and its picture of the stacked tensor writes the
# first row as o₁, o₁, …, o_{d−1} where o₁, o₃, …, o_{d−1} is meant. Its matrix also ends with blocks at
# θ_{d/2}: counting from θ₀ the last pair is θ_{d/2−1} (θ_{d/2} = 1/base would need d + 2 features).

# %% slideshow={"slide_type": "fragment"}
freqs = pl.rope_frequencies(D, dtype=F64)
assert freqs.shape == (D // 2,) and freqs[0] == 1
assert not torch.isclose(freqs, torch.tensor(1 / 10000.0, dtype=F64)).any()  # θ_{d/2} = 1/base is not used
torch.testing.assert_close(freqs[-1], torch.tensor(10000.0 ** (-(D - 2) / D), dtype=F64))
print(f"d = {D}: pairs θ_0 … θ_{D // 2 - 1}; the last is 10000^(−{D - 2}/{D}) = {freqs[-1]:.6f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 6c. Hugging Face: `rotate_half`
#
# Hugging Face pairs feature j with feature j + d/2. With cos and sin repeated over the two
# halves, x·cos + rotate_half(x)·sin rotates every such pair, where
# rotate_half(x₁, x₂) = (−x₂, x₁) on the two halves.

# %% slideshow={"slide_type": "fragment"}
def rotate_half(x: torch.Tensor) -> torch.Tensor:
    x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def half_rope(x: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
    both = torch.cat((angles, angles), dim=-1)  # (seq, d): the angle of pair j at j and at j + d/2
    return x * both.cos() + rotate_half(x) * both.sin()


print("rotate_half form vs apply_rope(layout='half'):", agree(half_rope(xq, ang), want_half, 1e-6))
far = (half_rope(xq, ang) - want).abs().max().item()
assert far > 1
print(f"rotate_half form vs the interleaved layout: differs by up to {far:.1f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Source `001`, which shows this code, says its matrix is the same interleaved block-diagonal
# matrix. It is not: the half layout puts cos/sin at rows and columns (j, j + d/2). Its
# matrix is the interleaved one **conjugated by a permutation** P = `pl.layout_permutation(d)`
# = [0, 2, 4, …, 1, 3, 5, …]: R_half = P R_int Pᵀ, i.e. `R_int[P][:, P]`.

# %% slideshow={"slide_type": "fragment"}
m, d = 3, 8
R_int, R_half = pl.rope_matrix(m, d), pl.rope_matrix(m, d, layout="half")
P = pl.layout_permutation(d)
print("P =", P.tolist())
torch.testing.assert_close(R_half, R_int[P][:, P])
assert not torch.allclose(R_half, R_int)
x8 = torch.randn(d)
assert not torch.allclose(R_int @ x8, pl.apply_rope(x8.expand(m + 1, d), layout="half")[m], atol=1e-3)
print("R_half = R_int[P][:, P]; the interleaved matrix does not describe rotate_half")

# %% slideshow={"slide_type": "fragment"}
fig, axes = viz.figure(2, width=3.6, height=3.2)
viz.heatmap(R_int, ax=axes[0], title="interleaved R_3 (d = 8)", xlabel="input feature", ylabel="output feature",
            diverging=True)
viz.heatmap(R_half, ax=axes[1], title="half layout R_3 (d = 8)", xlabel="input feature", ylabel="output feature",
            diverging=True)
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 6d. The alternating form
#
# Source `003` builds a sinusoidal table with sin and cos interleaved, [sin₀, cos₀, sin₁,
# cos₁, …], pulls out cos and sin with `repeat_interleave(2)`, and pairs them with the
# "alternate" vector [−q₁, q₀, −q₃, q₂, …]. Its frequencies come as exp(−2j·ln(base)/d),
# which is base^(−2j/d) written through a logarithm (within a few float32 ulps, below). The source
# asks whether the exp form is faster; where RoPE's time goes is the
# [appendix](10_making_it_fast.ipynb)'s subject.

# %% slideshow={"slide_type": "fragment"}
def alternating_rope(q: torch.Tensor, base: float = 10000.0) -> torch.Tensor:
    seq, d = q.shape[-2], q.shape[-1]
    div = torch.exp(torch.arange(0, d, 2, dtype=torch.float32, device=q.device) * -(math.log(base) / d))
    angles = torch.arange(seq, dtype=torch.float32, device=q.device)[:, None] * div
    table = torch.stack((angles.sin(), angles.cos()), dim=-1).flatten(-2)  # [sin0, cos0, sin1, cos1, …]
    cos_rep = table[..., 1::2].repeat_interleave(2, dim=-1)  # [cos0, cos0, cos1, cos1, …]
    sin_rep = table[..., ::2].repeat_interleave(2, dim=-1)
    q_alt = torch.stack((-q[..., 1::2], q[..., ::2]), dim=-1).reshape(q.shape)  # [−q1, q0, −q3, q2, …]
    return q * cos_rep + q_alt * sin_rep


print(torch.stack((-torch.arange(8.0)[1::2], torch.arange(8.0)[::2]), -1).reshape(8))
div = torch.exp(torch.arange(0, D, 2, dtype=torch.float32) * -(math.log(10000.0) / D))
print("alternating form vs apply_rope (interleaved):", agree(alternating_rope(xq), want, 1e-6))
base_pow = pl.rope_frequencies(D)  # base^(−2j/d) in float32
ulps = ((div - base_pow) / (torch.nextafter(base_pow, torch.tensor(math.inf)) - base_pow)).round().int()
assert ulps.abs().max() <= 4 and ((div - base_pow) / base_pow).abs().max() < 5e-7
print("exp(−2j ln(base)/d) vs base^(−2j/d): at most 4 float32 ulps apart at every pair (how many at each pair "
      "depends on the CPU's float32 exp, so the count per pair is not printed)")

# %% [markdown] slideshow={"slide_type": "fragment"}
# **Aside** (a source's slips). Two slips in source `003`. A comment claims
# `torch.sin(pos_emb).T.flatten()` is "the same as" the repeated sin table. At that line `pos_emb`
# is the interleaved [sin, cos] table already expanded to (batch, heads, seq, d). On a 4-D tensor
# `.T` reverses all four axes (as `.permute(3, 2, 1, 0)` does), and `.flatten()` then gives a 1-D
# vector of batch·heads·seq·d numbers, the sines of those sines and cosines: not the (batch, heads,
# seq, d) table `pos_emb[..., ::2].repeat_interleave(2, dim=-1)` that the code builds on the line
# above. And its score formula writes the key as R W_k **x_m**; the key must come from x_n, or the
# score would not depend on the key token at all (checked below with a toy W_q, W_k).

# %% slideshow={"slide_type": "fragment"}
pos_emb = torch.stack((ang.sin(), ang.cos()), -1).flatten(-2)[None, None].expand(B, H, -1, -1)  # as at that line
sin_emb = pos_emb[..., ::2].repeat_interleave(2, dim=-1)  # the table the code builds, (batch, heads, seq, d)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # torch's deprecation warning for .T on a 4-D tensor (printed once per process)
    reversed_axes = torch.sin(pos_emb).T
    flat = reversed_axes.flatten()  # what the comment proposes
assert reversed_axes.shape == (D, L, H, B) and torch.equal(reversed_axes, torch.sin(pos_emb).permute(3, 2, 1, 0))
assert flat.shape == (B * H * L * D,) and sin_emb.shape == (B, H, L, D)
assert not any(torch.allclose(flat, t) for t in (sin_emb.flatten(), sin_emb.permute(3, 2, 1, 0).flatten()))
Wq, Wk = torch.randn(D, D, dtype=F64), torch.randn(D, D, dtype=F64)
x_m, x_n, x_n2 = torch.randn(3, D, dtype=F64)
Rq, Rk = pl.rope_matrix(4, D, inv_freq=freqs), pl.rope_matrix(1, D, inv_freq=freqs)


def score_as_written(xm, xn):  # (R W_q x_m)^T (R W_k x_m): x_n never enters
    return (Rq @ Wq @ xm) @ (Rk @ Wk @ xm)


assert score_as_written(x_m, x_n) == score_as_written(x_m, x_n2)
assert (Rq @ Wq @ x_m) @ (Rk @ Wk @ x_n) != (Rq @ Wq @ x_m) @ (Rk @ Wk @ x_n2)
print("with x_m in the key, the score ignores the key token; with x_n it does not")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### 6e. Same rotation, different layout: converting weights
#
# Since apply_rope(x)[..., P] = apply_rope(x[..., P], layout="half"), a model trained with
# interleaved pairs runs unchanged under a half-layout kernel if each head's query and key
# features are permuted by P — that is, the **rows of W_q and W_k**, head by head. Scores
# are dot products, and a dot product does not care about the order of features.
#
# Hugging Face's script for converting Meta's LLaMA checkpoints does exactly this:
# `src/transformers/models/llama/convert_llama_weights_to_hf.py` in the huggingface/transformers
# repository (read at commit 6ae9169c) defines `permute(w)`, which reshapes the rows to
# (heads, d/2, 2, d_model), swaps the two middle axes and flattens, and applies it to `wq` and
# `wk` only; `wv` is copied unchanged, since Llama's values are not rotated. That script is not
# part of the installed package, so no cell can run it: what this paragraph says of it is a citation.
# The next cell checks the reshape it describes against P, and the cell after it runs the installed
# package's own RoPE.

# %% slideshow={"slide_type": "fragment"}
d_model, heads, d = 32, 2, 8
P = pl.layout_permutation(d)
W_q, W_k = torch.randn(heads * d, d_model, dtype=F64), torch.randn(heads * d, d_model, dtype=F64)
tokens = torch.randn(6, d_model, dtype=F64)


def rope_scores(Wq: torch.Tensor, Wk: torch.Tensor, layout: str) -> torch.Tensor:
    q = (tokens @ Wq.T).view(6, heads, d).transpose(0, 1)  # (heads, seq, d)
    k = (tokens @ Wk.T).view(6, heads, d).transpose(0, 1)
    return pl.apply_rope(q, layout=layout) @ pl.apply_rope(k, layout=layout).transpose(-1, -2)


def permute_rows(W: torch.Tensor) -> torch.Tensor:
    """Each head's rows reordered by P."""
    return W.view(heads, d, -1)[:, P, :].reshape(heads * d, -1)


def permute_rows_hf_style(W: torch.Tensor) -> torch.Tensor:
    """The same by reshaping: (heads, d/2, 2, d_model) -> swap the middle axes -> flatten."""
    return W.view(heads, d // 2, 2, -1).transpose(1, 2).reshape(heads * d, -1)


x_any = torch.randn(heads, 6, d, dtype=F64, generator=torch.Generator().manual_seed(1))  # (heads, seq, d)
swapped = agree(pl.apply_rope(x_any)[..., P], pl.apply_rope(x_any[..., P], layout="half"), 1e-12)
assert not torch.allclose(pl.apply_rope(x_any)[..., P], pl.apply_rope(x_any[..., P]))  # the layout matters
assert torch.equal(permute_rows(W_q), permute_rows_hf_style(W_q))  # the same rows, moved
s_meta = rope_scores(W_q, W_k, "interleaved")
converted = agree(rope_scores(permute_rows(W_q), permute_rows(W_k), "half"), s_meta, 1e-10)
unconverted = (rope_scores(W_q, W_k, "half") - s_meta).abs().max().item()
assert unconverted > 1
print("apply_rope(x)[..., P] vs apply_rope(x[..., P], layout='half'):", swapped)
print("interleaved weights + interleaved RoPE vs permuted weights + half RoPE, scores:", converted)
print(f"unpermuted weights with the half layout: scores differ by up to {unconverted:.1f}")

# %% [markdown] slideshow={"slide_type": "fragment"}
# transformers (in the locked set `make lab` installs; the index, "Versions", names the version)
# rotates q and k in `apply_rotary_pos_emb` of `models/llama/modeling_llama.py`:
# it is the half layout, §6c's `rotate_half` form, equal to `apply_rope(..., layout="half")`.

# %% slideshow={"slide_type": "fragment"}
from transformers.models.llama import modeling_llama as hf_llama  # transformers' Llama

cos_both, sin_both = (torch.cat((t, t), dim=-1) for t in (ang.cos(), ang.sin()))  # (seq, d)
q_hf, k_hf = hf_llama.apply_rotary_pos_emb(xq, 2 * xq, cos_both, sin_both, unsqueeze_dim=0)
print("transformers' apply_rotary_pos_emb vs apply_rope(layout='half'), q:", agree(q_hf, want_half, 1e-6))
print("and k:", agree(k_hf, 2 * want_half, 1e-6))
hf_far = (q_hf - want).abs().max().item()
assert hf_far > 1
print(f"vs the interleaved layout: differs by up to {hf_far:.1f}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. Frequencies and wavelengths
#
# Pair j completes a turn every 2π/θ_j positions: its **wavelength**. The first pair
# (θ₀ = 1) comes round every 2π ≈ 6.3 positions (never exactly at a whole position); the last, θ_{d/2−1} = base^(−(d−2)/d), every
# 2π·base^(1−2/d) positions, base^(2/d) times less than 2π·base: close to it only for wide heads
# (ten times under at d = 8, as the table shows; 13 % under at d = 128, printed below it). Fast pairs resolve neighbours; slow
# pairs change little over a whole context.
#
# Each end does one job. Pair 0 turns by a full radian per position, so neighbours differ a lot in it,
# but it comes back close to where it started: at position 44 it is 0.018 rad past its angle at 0
# (44 rad is 7 turns and 0.018 more), so on its own it hardly tells position 0 from 44. The slowest pair of a
# d = 128 head moves 1.2·10⁻⁴ rad per position, too little to tell neighbours apart, but it stays inside
# one turn for about 54 400 positions, so no two of them share its angle. A head needs both ends, as a
# clock needs both hands (chapter 3 found the same for the sinusoids).

# %% slideshow={"slide_type": "fragment"}
d = 8
print(" j   θ_j          wavelength 2π/θ_j")
for j, (t, wl) in enumerate(zip(pl.rope_frequencies(d, dtype=F64).tolist(), pl.rope_wavelengths(d).tolist())):
    print(f" {j}   {t:.6f}    {wl:10.2f}")
wl = pl.rope_wavelengths(128)
torch.testing.assert_close(wl[0], torch.tensor(2 * math.pi, dtype=F64))
torch.testing.assert_close(wl[-1], torch.tensor(2 * math.pi * 10000 ** (1 - 2 / 128), dtype=F64))
fast_back = 44 - 7 * 2 * math.pi  # pair 0 (θ₀ = 1) at position 44, past 7 full turns
assert round(fast_back, 3) == 0.018 and all(abs(m - round(m / (2 * math.pi)) * 2 * math.pi) > fast_back for m in range(1, 44))
theta_slow = pl.rope_frequencies(128, dtype=F64)[-1].item()
assert round(theta_slow, 5) == 1.2e-4 and round(wl[-1].item(), -2) == 54_400  # slowest pair: per step, one turn
assert wl[-1] < 2 * math.pi * 10000 and bool((wl.diff() > 0).all())
assert round(1 - wl[-1].item() / (2 * math.pi * 10000), 2) == 0.13  # d = 128: 13 % under 2π·base
print(f"d = 128: the last wavelength is {wl[-1].item():,.0f}, {1 - wl[-1].item() / (2 * math.pi * 10000):.0%} under 2π·base")
assert abs(pl.rope_wavelengths(8)[-1].item() * 10 - 2 * math.pi * 10000) < 1e-6 * 2 * math.pi * 10000  # d = 8: a tenth

# %% slideshow={"slide_type": "fragment"}
fig, ax = viz.figure(width=4.8, height=3.2)
for base_ in (500.0, 10000.0, 500000.0):
    ax.plot(pl.rope_wavelengths(128, base=base_).numpy(), label=f"base = {base_:g}")
ax.axhline(4096, color="grey", ls=":", lw=1, label="a 4096-token context")
ax.set(yscale="log", xlabel="pair j (d = 128)", ylabel="wavelength (positions)", title="wavelength per pair")
ax.legend(fontsize=8)
fig

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 8. Long-term decay: a bound, and what random vectors actually do
#
# In complex form (pair j of q is the complex number q̃_j = q_{2j} + i q_{2j+1}, and k̃_j likewise) the score is
#
# $$\langle R_m q, R_n k\rangle = \operatorname{Re}\sum_{j=0}^{d/2-1} h_j e^{i r\theta_j},
# \qquad h_j = \tilde q_j \overline{\tilde k_j},\; r = m - n .$$
#
# (This is §2's q·conj(k)·e^{i(m−n)θ}, summed over the pairs.) Here r = m − n is the offset
# n − m with its sign flipped: for a key in the past (n ≤ m, all a causal model sees) r ≥ 0, and
# then r is the key's **distance** |n − m| behind the query. RoFormer's decay argument (§3.4.3) and
# `posenc_lib`'s decay functions use r; nothing below depends on its sign, since S_j(−r) (defined next) is the complex conjugate
# of S_j(r), so the bound is the same at r and −r (asserted in the next cell).
#
# RoFormer bounds it by **Abel summation**. With the partial sums
# S_j = Σ_{l<j} e^{irθ_l} (S₀ = 0) and h_{d/2} = 0,
#
# $$\sum_j h_j e^{ir\theta_j} = \sum_j h_j (S_{j+1} - S_j) = -\sum_j S_{j+1}(h_{j+1} - h_j),
# \quad\text{so}\quad \Big|\sum_j h_j e^{ir\theta_j}\Big| \le \max_j |h_{j+1} - h_j|\; \sum_{j=1}^{d/2} |S_j| .$$
#
# RoFormer plots the **relative upper bound** (1/(d/2)) Σ_j |S_j| (`pl.rope_decay_bound`).
# It falls steeply over the first few hundred distances (d = 128: 32.5 at r = 0, 6.2 at r = 500), but
# it does not keep falling: it ripples up and down, and at r = 5000 it is back at 7.6, above its 4.5 at
# r = 1000. "Decay" describes its trend over short distances, not every step. The cell checks the complex form against rotated vectors, with r = m − n
# of either sign, then Abel's identity and |score| ≤ bound on random q, k; each library function it
# uses is named in a comment where it first appears.

# %% slideshow={"slide_type": "fragment"}
d, N = 128, 256
dist = torch.arange(0, 1024, 8)  # distances r = m − n
qs, ks = torch.randn(N, 256, dtype=F64), torch.randn(N, 256, dtype=F64)  # samples (first d features used)
theta_d = pl.rope_frequencies(d, dtype=F64)
q1, k1 = qs[0, :d], ks[0, :d]
h1 = torch.complex(q1[0::2], q1[1::2]) * torch.complex(k1[0::2], k1[1::2]).conj()  # h_j = q̃_j conj(k̃_j)
for m, n in ((5, 0), (700, 3), (3, 700), (40, 40), (0, 1000)):  # r = m − n from −1000 to 697
    rotated_dot = pl.apply_rope(q1[None], torch.tensor([m]))[0] @ pl.apply_rope(k1[None], torch.tensor([n]))[0]
    complex_form = (h1 * torch.exp(1j * (m - n) * theta_d)).sum().real
    torch.testing.assert_close(rotated_dot, complex_form)
    # pl.rope_scores_by_distance(q, k, r): the score Re Σ_j h_j e^{irθ_j}, for each distance r
    torch.testing.assert_close(pl.rope_scores_by_distance(q1, k1, torch.tensor([m - n]))[0], complex_form)
    if m != n:  # the other sign, e^{i(n−m)θ_j}, is a different number
        assert not torch.isclose(rotated_dot, (h1 * torch.exp(1j * (n - m) * theta_d)).sum().real)
print("⟨R_m q, R_n k⟩ = Re Σ_j h_j e^{i(m−n)θ_j} at (m, n) = (5, 0), (700, 3), (3, 700), (40, 40), (0, 1000)")
h = pl.rope_pair_products(qs[:, :d], ks[:, :d])  # pl.rope_pair_products(q, k): the h_j, as h1 above
total = pl.rope_complex_scores(h, dist)  # pl.rope_complex_scores(h, r): (N, len), Σ_j h_j e^{irθ_j}
S = pl.rope_partial_sums(dist, d)  # pl.rope_partial_sums(r, d): (len, d/2), S_1 … S_{d/2}
h_pad = torch.cat((h, torch.zeros_like(h[:, :1])), -1)
torch.testing.assert_close(total, -(S[None] * h_pad.diff(dim=-1)[:, None, :]).sum(-1))  # Abel's identity
torch.testing.assert_close(pl.rope_partial_sums(-dist, d), S.conj())  # r -> −r conjugates S_j
scores = pl.rope_scores_by_distance(qs[:, :d], ks[:, :d], dist)  # checked against rotated vectors above
ratio = scores.abs() / pl.rope_abel_bound(h, dist)  # pl.rope_abel_bound(h, r): max_j |h_{j+1} − h_j| · Σ_j |S_j|
assert bool((ratio <= 1).all()) and ratio.median() < 0.01
print(f"|score| <= bound for all {ratio.numel()} (sample, distance) cases; median |score| / bound = {ratio.median():.4f}")
far_bound = pl.rope_decay_bound(torch.tensor([0, 500, 1000, 5000]), d)
rises = int((pl.rope_decay_bound(torch.arange(1, 1024), d).diff() > 0).sum())
assert far_bound[0] > 5 * far_bound[1] and far_bound[3] > far_bound[2] and rises > 100  # falls, then not monotone
print("bound at r = 0, 500, 1000, 5000:", [round(float(b), 1) for b in far_bound],
      f"| it rises on {rises} of the 1022 one-step moves below r = 1024")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The bound holds but is very loose: the typical score is a fraction of a percent of it.
# It bounds a **scale**, not the score. So what do scores do? Two honest measurements
# over N = 256 random Gaussian vectors:
#
# * **independent q and k**: the mean |⟨R_m q, R_n k⟩|. R_r k is again a Gaussian vector
#   with the same distribution, so this mean is **flat** in r — no decay at all;
# * **q = k**, one vector as both query and key (not a token attending to itself: its W_q x and
#   W_k x differ unless W_q = W_k): the mean ⟨R_m q, R_n q⟩ equals 2 Σ_j cos(rθ_j) in expectation —
#   it **does** decay with distance, like the bound.
#
# In between, the mean of the score qᵀR_{n−m}k is linear in the cross-covariance C = E[q kᵀ]: 0 for
# independent vectors, I for q = k, and ρI for q = ρk + √(1 − ρ²)·(independent noise), which gives
# ρ times the q = k curve (checked below at ρ = 1/2). So how much a model's scores decay is set by
# how its queries correlate with its keys (W_q, W_k and the data), not by the rotation alone; this
# chapter measures no trained model (Barbero et al., 2024, "Round and round we go! What makes Rotary
# Positional Encodings useful?", arXiv:2410.06205, make the point for random vectors and study trained
# ones; a citation). The q = k curve is divided by its value at r = 0, the
# independent one by its average.

# %% slideshow={"slide_type": "fragment"}
@functools.lru_cache(maxsize=None)  # the widget below revisits the same (d, base) settings
def decay_curves(d: int, base: float):
    bound = pl.rope_decay_bound(dist, d, base=base)
    q, k = qs[:, :d], ks[:, :d]
    indep = pl.rope_scores_by_distance(q, k, dist, base=base).abs().mean(0)
    same = pl.rope_scores_by_distance(q, q, dist, base=base).mean(0)
    expected = pl.rope_partial_sums(dist, d, base=base)[:, -1].real / (d / 2)  # E⟨R_m q, R_n q⟩ / d
    return bound, indep / indep.mean(), same / same[0], expected


bound, indep, same, expected = decay_curves(128, 10000.0)
far_r = dist >= 256
assert bound[0] == (64 + 1) / 2 and bound[far_r].max() < 0.4 * bound[0]  # the bound falls by > 2.5x
near, far = indep[dist < 256].mean(), indep[dist >= 768].mean()
assert abs(near / far - 1) < 0.1  # independent vectors: flat (no trend beyond sampling noise)
assert same[far_r].abs().mean() < 0.3 and (same - expected).abs().max() < 0.05  # q = k: decays, as expected
b_big, i_big, s_big, _ = decay_curves(128, 500000.0)  # a larger base: slower decay, still flat
assert b_big[far_r].mean() > bound[far_r].mean() and s_big[far_r].mean() > same[far_r].mean()
assert abs(i_big[dist < 256].mean() / i_big[dist >= 768].mean() - 1) < 0.1
print(f"bound: {bound[0]:.1f} at r = 0, at most {bound[far_r].max():.1f} from r = 256 on")
print(f"independent q, k: mean |score| for r < 256 over r >= 768: {near / far:.2f} (no decay)")
print(f"q = k: mean score from r = 256 on is {same[far_r].mean():.2f} of its r = 0 value")
q_half = 0.5 * ks[:, :128] + math.sqrt(0.75) * qs[:, :128]  # ρ = 1/2: C = I/2
half = pl.rope_scores_by_distance(q_half, ks[:, :128], dist).mean(0) / 128  # E⟨q, k⟩ = 128ρ at r = 0
assert (half - 0.5 * expected).abs().max() < 0.05  # half the q = k expectation at every distance
print(f"ρ = 1/2: mean score / d is within {(half - 0.5 * expected).abs().max():.3f} of half the q = k expectation")
bases, widths = [100.0, 1000.0, 10000.0, 100000.0, 500000.0], [16, 32, 64, 128, 256]  # the widget's settings
margins = []  # far-mean rise of (bound, q = k curve) from each base to the next, from 10 000 up
for d_ in widths:
    for b_ in bases:
        _, indep_, _, _ = decay_curves(d_, b_)
        assert abs(indep_[dist < 256].mean() / indep_[dist >= 768].mean() - 1) < 0.1  # flat
    for lower, higher in zip(bases[2:], bases[3:]):  # from 10 000 up: a larger base decays more slowly
        (b_lo, _, s_lo, _), (b_hi, _, s_hi, _) = decay_curves(d_, lower), decay_curves(d_, higher)
        margins.append((b_hi[far_r].mean() - b_lo[far_r].mean(), s_hi[far_r].mean() - s_lo[far_r].mean()))
    for b_ in bases[:2]:  # below 10 000: beyond r = 256 the q = k curve averages about zero at 100 and 1000 alike
        assert decay_curves(d_, b_)[2][far_r].mean().abs() < 0.03
bound_margin, curve_margin = (min(m[i].item() for m in margins) for i in (0, 1))
assert bound_margin > 0.05 and curve_margin > 0.04  # every step up in base raises both far means by this much
bound_falls = [d_ for d_ in widths
               if decay_curves(d_, 1000.0)[0][far_r].mean() < decay_curves(d_, 100.0)[0][far_r].mean()]
assert bound_falls == [16, 32]  # from base 100 to 1000 the bound itself falls for the narrow heads
print(f"all {len(widths) * len(bases)} (d, base) of the widget below: independent q, k flat; from base 10000 up, "
      "a larger base decays more slowly")
print(f"smallest rise of the far mean (r >= 256) from one base to the next, over the {len(margins)} steps: "
      f"bound {bound_margin:.2f}, q = k curve {curve_margin:.2f} (of its r = 0 value)")
print(f"bases 100 and 1000: the q = k curve averages below 0.03 in size from r = 256 on, for every d; "
      f"the bound is lower at 1000 than at 100 for d = {', '.join(map(str, bound_falls))}")

# %% slideshow={"slide_type": "fragment"}
def draw_decay(fig, d: int, base: float):
    ax1, ax2 = fig.subplots(1, 2)
    for ax in (ax1, ax2):  # few ticks: tick labels dominate the time to draw a frame
        ax.xaxis.set_major_locator(MaxNLocator(5))
        ax.yaxis.set_major_locator(MaxNLocator(5))
    curves = decay_curves(d, base)
    (lb,) = ax1.plot(dist.numpy(), curves[0].numpy(), color="C3")
    ax1.set(xlabel="distance r = m − n (key behind query)", ylabel="(1/(d/2)) Σ_j |S_j|", title="RoFormer's relative bound")
    (li,) = ax2.plot(dist.numpy(), curves[1].numpy(), label="mean |q·k|, independent q, k (/ average)")
    (ls,) = ax2.plot(dist.numpy(), curves[2].numpy(), label="mean q·k, q = k (/ value at r = 0)")
    (le,) = ax2.plot(dist.numpy(), curves[3].numpy(), "k:", lw=1, label="q = k, expectation")
    ax2.axhline(0, color="grey", lw=0.5)
    ax2.set(xlabel="distance r = m − n (key behind query)", ylabel="relative score", ylim=(-0.4, 1.6),
            title="measured over 256 random vectors")
    ax2.legend(fontsize=7, loc="upper right")

    def update(d: int, base: float):
        b_, i_, s_, e_ = decay_curves(d, base)
        lb.set_ydata(b_.numpy())
        ax1.set_ylim(0, 1.05 * b_.max().item())
        li.set_ydata(i_.numpy())
        ls.set_ydata(s_.numpy())
        le.set_ydata(e_.numpy())
        ax1.set_title(f"RoFormer's relative bound (d = {d}, base = {base:g})")

    update(d, base)
    return update


fig = Figure(figsize=(9.5, 3.4), layout="constrained")
draw_decay(fig, 128, 10000.0)
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# Move the base and d: from base 10 000 up, a larger base slows the decay of both the bound and
# the q = k curve (more pairs with long wavelengths), and the independent-vector curve stays flat
# for every setting. Below 10 000 the rule need not hold: from r = 256 on the q = k curve averages
# about zero at bases 100 and 1000 alike, so which of the two is lower is noise, and for d = 16 and
# 32 even the bound is lower at 1000 than at 100 (try d = 16). All of this is checked over the
# widget's settings two cells above.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
decay_widget = viz.InteractiveFigure(
    draw_decay, figsize=(9.5, 3.4),
    d=SelectionSlider(options=widths, value=128, description="d"),
    base=SelectionSlider(options=bases, value=10000.0, description="base"),
)
decay_widget

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 9. Precision: compute the angles in float32
#
# The angle m·θ_j is a product of a position and a frequency. In bfloat16 (8 significant
# bits) integers above 256 are no longer all representable: near 10⁵ the spacing is 512, so
# the *position itself* is rounded before any rotation happens. float16 (11 bits) is finer and
# overflows only from 65520 on (its largest value is 65504), but long before that its angles are off: by 0.1 to 0.5 rad
# around position 1000 and by whole radians near 10⁴ (the table below). The position is one of three roundings: the frequency θ_j and the
# product m·θ_j are rounded to 8 bits as well, and each of those alone turns an angle by a tenth
# of a radian or more at position 106, which bf16 holds exactly (checked with the table below).

# %% slideshow={"slide_type": "fragment"}
print("bf16 stores 100000, 100001, 100255 as", torch.tensor([100000, 100001, 100255]).bfloat16().tolist())
print("fp16 stores 70000 as", torch.tensor(70000).half().item())
assert torch.tensor(100001).bfloat16() == torch.tensor(100000).bfloat16()

# %% [markdown] slideshow={"slide_type": "subslide"}
# `pl.rope_angle_error` forms the angles the naive way in a given dtype and measures them against
# float64, wrapped to [0, π] (an error of π means the rotation points the opposite way). Largest error
# over the d/2 pairs, d = 128, at positions up to 10⁷. float32 is not exact either: it holds every
# position up to 2²⁴ ≈ 1.7·10⁷, but the frequency θ_j and the product m·θ_j keep 24 bits, so their
# rounding errors grow in proportion to m. Below 0.01 rad up to 10⁵, the error is about 0.05 rad at 10⁶
# and about 0.8 rad at 10⁷ (pair 1 both times; pair 0, with θ₀ = 1, is exact).

# %% slideshow={"slide_type": "fragment"}
decades = torch.cat([torch.logspace(0, 5, 80, dtype=F64), torch.logspace(5, 7, 33, dtype=F64)])  # 1 … 10^7
positions = torch.unique(decades.round().long())
dtypes = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
worst = {name: pl.rope_angle_error(positions, 128, dtype=dt).amax(-1) for name, dt in dtypes.items()}
print("position   " + "  ".join(f"{n:>9}" for n in dtypes))
for p in (100, 1000, 10000, 100000, 10**6, 10**7):
    i = int((positions - p).abs().argmin())
    print(f"{positions[i].item():>8}   " + "  ".join(f"{worst[n][i].item():9.2e}" for n in dtypes))
big = positions >= 10000
assert worst["bfloat16"][big].min() > 1.0  # whole radians off: angles are effectively random
assert torch.tensor(65519.0).half().item() == 65504 and torch.tensor(65520.0).half().isinf()  # fp16's overflow
assert torch.isnan(worst["float16"][positions > 65504]).all()  # fp16 cannot even hold the position
fp16_held = big & (positions <= 65504)  # 10^4 .. 65504: held, yet whole radians off
assert worst["float16"][(positions - 1000).abs().argmin()] > 0.1 and worst["float16"][fp16_held].min() > 1.0
near_1000 = pl.rope_angle_error(torch.arange(900, 1101), 128, dtype=torch.float16).amax(-1)
assert 0.1 < near_1000.min() and near_1000.max() < 0.55  # 0.1 to 0.5 rad over positions 900 to 1100
assert worst["float32"][positions <= 100_000].max() < 1e-2  # float32: below 0.01 rad up to 100000
f32_far = pl.rope_angle_error(torch.tensor([10**6, 10**7]), 128, dtype=torch.float32)  # (position, pair)
assert torch.tensor(10**7).float().long() == 10**7  # the position itself is exact in float32 (up to 2^24)
assert 0.03 < f32_far[0].max() < 0.08 and 0.5 < f32_far[1].max() < 1.0  # ≈ 0.05 rad at 10^6, ≈ 0.8 rad at 10^7
assert f32_far.argmax(-1).tolist() == [1, 1] and bool((f32_far[:, 0] == 0).all())  # pair 1 worst; pair 0 exact
torch.testing.assert_close(worst["float32"][-1], f32_far[1].max())  # the table's last row
theta64, m106 = pl.rope_frequencies(128, dtype=F64), torch.tensor(106.0, dtype=F64)
assert m106.bfloat16().double() == m106  # the position itself is exact in bf16


def angle_off(angles: torch.Tensor) -> float:  # largest error against float64 m·θ_j, wrapped to [0, π]
    return float(torch.remainder(angles - m106 * theta64 + math.pi, 2 * math.pi).sub(math.pi).abs().max())


only_freq = angle_off(m106 * theta64.bfloat16().double())  # θ_j rounded, product exact
only_product = angle_off((m106 * theta64).bfloat16().double())  # product rounded
all_three = worst["bfloat16"][positions == 106].item()
assert only_freq > 0.1 and only_product > 0.1 and all_three > max(only_freq, only_product)
print(f"position 106 (exact in bf16): θ_j rounded {only_freq:.2f} rad, m·θ_j rounded {only_product:.2f} rad, "
      f"both (rope_angle_error) {all_three:.2f} rad")

# %% [markdown] slideshow={"slide_type": "subslide"}
# A score sees only the relative angle (n − m)·θ_j, so the control is that difference, formed from
# the two float32 angles. Which error matters? A pair tells a key at n from one at n + 1 only by the
# step θ_j that one position adds to its angle, so the measure is the error divided by θ_j: the error
# **in positions**. An error of ε positions makes the pair score the key as if it sat ε positions
# away; past ε = 1/2 the pair puts it nearer its neighbour's place than its own. The cell prints ε,
# the largest over the pairs for keys up to 1000 positions after a query at m, with only the
# frequency rounded, only the two products rounded, and both.

# %% slideshow={"slide_type": "fragment"}
def positions_off(start: int, freq: bool = True, product: bool = True, span: int = 1000) -> float:
    """Largest error, in positions, of float32 relative angles (n − start)·θ_j for keys up to span after."""
    pos, theta = torch.arange(start, start + span + 1, dtype=F64), pl.rope_frequencies(128, dtype=F64)
    low = pos[:, None] * (theta.float().double() if freq else theta)  # θ_j rounded to float32, or not
    if product:
        low = low.float().double()  # each angle m·θ_j rounded to float32 (both: the float32 grid above)
    err = (low - low[0]) - (pos - start)[:, None] * theta  # against the float64 relative angle
    wrapped = torch.remainder(err + math.pi, 2 * math.pi).sub(math.pi).abs()
    return float((wrapped / theta).max())  # in positions: divided by θ_j, the angle one position adds


starts = [10**e for e in (5, 6, 7)]
eps = {how: [positions_off(m, *flags) for m in starts]
       for how, flags in {"frequency only": (True, False), "products only": (False, True), "both": (True, True)}.items()}
for how, e in eps.items():
    print(f"{how:>14}: ε =", ", ".join(f"{x:.2g}" for x in e), "positions at m = 1e5, 1e6, 1e7")
print("    m·2^-23 = " + ", ".join(f"{m * 2**-23:.2g}" for m in starts) + f"; 1000·2^-24 = {1000 * 2**-24:.1g}")
assert all(e <= 1000 * 2**-24 for e in eps["frequency only"])  # shared by q and k: only (n − m)·δθ_j is left
assert all(0.9 * m * 2**-23 < e <= m * 2**-23 for m, e in zip(starts, eps["products only"]))
assert all(0.9 * m * 2**-23 < e <= m * 2**-23 for m, e in zip(starts, eps["both"]))
both = eps["both"]
assert 0.01 < both[0] < 0.012 and 0.1 < both[1] < 0.12 and both[2] > 1  # a hundredth, a tenth, past a neighbour

# %% [markdown] slideshow={"slide_type": "fragment"}
# The frequency's rounding is the same in the query's angle and the key's, so it almost cancels: what
# is left is (n − m)·δθ_j, at most about 1000·2⁻²⁴ of a position here, whatever m is. What grows is the
# rounding of the two products m·θ_j and n·θ_j: each is off by at most 2⁻²⁴ of its angle, m·2⁻²⁴
# positions, and the query's and the key's add up to m·2⁻²³. With both roundings ε is 0.011, 0.11 and
# 1.1 positions at 10⁵, 10⁶ and 10⁷, each just below m·2⁻²³. So "float32 or better" has a reach:
# float32 keeps every pair within about a hundredth of a position at 10⁵ tokens and a tenth at 10⁶;
# at 10⁷ some pair puts a key more than a whole position away, past its neighbour.

# %% slideshow={"slide_type": "fragment"}
fig, ax = viz.figure(width=4.8, height=3.3)
for name in dtypes:
    ax.plot(positions.numpy(), worst[name].numpy(), label=name)
ax.axvline(65504, color="grey", ls=":", lw=1)
ax.text(65504, 2e-6, "fp16 max ", ha="right", fontsize=8)
ax.set_xscale("log")
ax.set_yscale("log", nonpositive="mask")
ax.set(xlabel="position m", ylabel="max angle error (rad)", title="angle m·θ_j computed in low precision (d = 128)")
ax.legend(fontsize=8)
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# This is why libraries build the angle grid in float32 even when the model runs in bf16,
# and `posenc_lib` does the same: `apply_rope`
# on a bf16 tensor computes angles, cos and sin in float32 and rounds only the result.
# At positions around 90 000 its output is within 0.02 of the float64 answer (in this draw); rotating with
# bf16-computed angles is wrong by whole units. `pl.rotate_pairs(x, cos, sin)`, the step of
# `apply_rope` after the table, turns each pair of x by the angles whose cos and sin it is given:
# here the naive bf16 ones.

# %% slideshow={"slide_type": "fragment"}
pos = torch.arange(90_000, 90_064)
xb = torch.randn(64, 128).bfloat16()
exact = pl.apply_rope(xb.double(), pos)  # float64 angles and arithmetic
lib_err = (pl.apply_rope(xb, pos).double() - exact).abs().max().item()
bf_angles = pos.bfloat16()[:, None] * pl.rope_frequencies(128).bfloat16()  # the naive bf16 grid
naive_err = (pl.rotate_pairs(xb, bf_angles.cos(), bf_angles.sin()).double() - exact).abs().max().item()
print(f"largest error vs float64: apply_rope on bf16 {lib_err:.3f}; bf16 angles {naive_err:.2f}")
assert lib_err < 0.02 and naive_err > 1.0 and naive_err > 50 * lib_err

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Aside: what Hugging Face does.** transformers' `LlamaRotaryEmbedding` (the locked version: see
# the index, "Versions") casts the positions and the frequencies to float32, multiplies them
# elementwise, takes cos and sin, and casts only those to the model's dtype: its bf16 table is
# the float32 grid's cos, rounded once, as ours is. It does not switch autocast off, and it need
# not: mixed-precision autocast lowers matrix products (`@`, `linear`) to bf16, not elementwise
# products. A grid written as a matrix product, positions (seq, 1) @ frequencies (1, d/2), would be
# lowered, so code written that way must switch autocast off around it. transformers 4.39 to 4.x
# (before the locked 5.x) did exactly that: their grid was this matrix product
# inside `torch.autocast(..., enabled=False)` (a citation; the comment there points to
# huggingface/transformers PR #29285). The next cell runs the locked version's module
# at positions near 90 000 with and without autocast, and shows what autocast does to the
# matrix-product form. (Hugging Face's frequencies differ from ours in the last bit at some pairs,
# so the two bf16 tables are close but not equal: the aside after the exercises says why.)

# %% slideshow={"slide_type": "fragment"}
from transformers import LlamaConfig

hf_rope = hf_llama.LlamaRotaryEmbedding(LlamaConfig(hidden_size=256, num_attention_heads=2, head_dim=128))
x_bf16 = torch.zeros(1, len(pos), 128, dtype=torch.bfloat16)  # only its dtype and device are read
cos_hf, _ = hf_rope(x_bf16, pos[None])
with torch.autocast("cpu", dtype=torch.bfloat16):
    cos_hf_autocast, _ = hf_rope(x_bf16, pos[None])
    grid_as_matmul = pos[:, None].float() @ pl.rope_frequencies(128)[None]  # (seq, 1) @ (1, d/2)
assert cos_hf.dtype == torch.bfloat16 and torch.equal(cos_hf_autocast, cos_hf)
hf_freq = hf_rope.inv_freq
elementwise = (pos[:, None].float() * hf_freq).cos()  # float32 positions x float32 frequencies
assert torch.equal(cos_hf[0, :, :64], elementwise.bfloat16())  # that grid, rounded to bf16 once
grid_err = (grid_as_matmul.double() - pl.rope_angles(pos, 128, inv_freq=pl.rope_frequencies(128, dtype=F64)))
assert grid_as_matmul.dtype == torch.bfloat16 and grid_err.abs().max() > 100
print("LlamaRotaryEmbedding: the float32 grid, rounded once; the same cos/sin under autocast")
print(f"the grid as a matrix product under autocast: bf16, angles off by up to {grid_err.abs().max():.0f} rad")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 10. The score pattern RoPE induces
#
# Fix one vector q and use it as both query and key (k = q). The score
# ⟨R_m q, R_n q⟩ over positions (m, n) is a **Toeplitz** matrix: it is constant along every
# diagonal, because it depends only on the offset n − m; it peaks on the main diagonal and oscillates
# away from it. It is also symmetric about that diagonal, but only because k = q: ⟨R_m q, R_n q⟩ and
# ⟨R_n q, R_m q⟩ are one dot product read both ways. With a key k ≠ q the map stays constant along
# diagonals and is not symmetric, since the offset's sign counts (§3); the cell checks both. Moving
# every position by the same amount (the 48 positions start at s instead of 0) leaves it unchanged,
# in exact arithmetic. In floating point it stays unchanged only as far as the
# angles keep their digits (§9): the cell compares starts 1000 and 100 000 with start 0, for angles
# computed in float64, in float32 (as `apply_rope` does for a bf16 or float32 model) and in bf16 (the
# naive grid of §9).

# %% slideshow={"slide_type": "fragment"}
q_fixed = torch.randn(128, dtype=F64)
ANGLE_DTYPES = {"float64": F64, "float32": torch.float32, "bfloat16": torch.bfloat16}


def score_grid(d: int, base: float, start: int, angles: str = "float64", n_pos: int = 48) -> torch.Tensor:
    """[m, n] = ⟨R_m q, R_n q⟩ for the positions start .. start + n_pos − 1, the angles m·θ_j formed in `angles`
    (position and frequency both in that dtype, as §9's naive grid), the rest in float64."""
    pos = torch.arange(start, start + n_pos)
    dt = ANGLE_DTYPES[angles]
    grid_ = (pos.to(dt)[:, None] * pl.rope_frequencies(d, base=base, dtype=F64).to(dt)).double()
    rq = pl.rotate_pairs(q_fixed[:d].expand(n_pos, d), grid_.cos(), grid_.sin())
    return rq @ rq.T


grid = score_grid(64, 10000.0, 0)
torch.testing.assert_close(grid, (lambda r: r @ r.T)(pl.apply_rope(q_fixed[:64].expand(48, 64))))  # RoPE
torch.testing.assert_close(grid[1:, 1:], grid[:-1, :-1])  # constant along diagonals
assert torch.allclose(grid.diagonal(), grid.max(dim=1).values)  # each row peaks at m = n (Cauchy–Schwarz)
torch.testing.assert_close(grid, grid.T)  # symmetric: k = q
k_other = torch.randn(64, dtype=F64, generator=torch.Generator().manual_seed(10))  # a key k ≠ q
grid_qk = pl.apply_rope(q_fixed[:64].expand(48, 64)) @ pl.apply_rope(k_other.expand(48, 64)).T
torch.testing.assert_close(grid_qk[1:, 1:], grid_qk[:-1, :-1])  # k ≠ q: still constant along diagonals
assert (grid_qk - grid_qk.T).abs().max() > 1.0  # and not symmetric
moved = {(a, s_): (score_grid(64, 10000.0, s_, a) - grid).abs().max().item()
         for a in ANGLE_DTYPES for s_ in (1000, 100_000)}
assert moved["float64", 1000] < 1e-8 and moved["float64", 100_000] < 1e-8  # unchanged
peak = grid.abs().max()  # the diagonal, |q|² (Cauchy–Schwarz), about d = 64 for a Gaussian q
torch.testing.assert_close(peak, q_fixed[:64].pow(2).sum())
assert moved["float32", 100_000] < 0.05 and 60 < peak < 70  # a few hundredths on scores up to about 64
assert moved["bfloat16", 1000] > 10 and moved["bfloat16", 100_000] > 10  # the pattern is gone
collapsed = score_grid(64, 10000.0, 100_000, "bfloat16")
assert torch.equal(collapsed, collapsed[0].expand(48, 48))  # bf16: 48 positions round to one, all rows equal
print(f"constant along diagonals; peaks on the diagonal, at |q|² = {peak:.1f}")
print("largest change of a score when the positions start at 1000 / 100000 instead of 0:")
for a in ANGLE_DTYPES:  # float64's changes are rounding noise, printed as the bound asserted above
    print(f"  angles in {a:8s} " + "   ".join(f"{moved[a, s_]:9.2g}" if moved[a, s_] > 1e-6 else "    <1e-8"
                                             for s_ in (1000, 100_000)))
fig, ax = viz.figure(width=4.6, height=3.8)
viz.heatmap(grid, ax=ax, title="⟨R_m q, R_n q⟩, d = 64, base = 10000", xlabel="key position n",
            ylabel="query position m", colorbar="score", diverging=True)
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# Move d and the base to see how wide the central peak is and how far its ripples reach; move the start
# with float32 angles, then with bf16 ones, to watch the pattern survive and break. With bf16 angles at a
# start of 100 000 every row is the same: bf16 rounds all 48 positions to one number, so no token can
# tell its neighbours apart.

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
viz.interactive_heatmap(
    score_grid,
    title=lambda d, base, start, angles: f"⟨R_m q, R_n q⟩, d = {d}, base = {base:g}, positions from {start}",
    xlabel="key position n − start", ylabel="query position m − start", colorbar="score", diverging=True,
    d=SelectionSlider(options=[8, 16, 32, 64, 128], value=64, description="d"),
    base=SelectionSlider(options=bases, value=10000.0, description="base"),
    start=IntSlider(0, 0, 100_000, step=1000, description="start"),
    angles=Dropdown(options=list(ANGLE_DTYPES), value="float64", description="angles in"),
)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 11. What the dense form costs
#
# Teaching RoPE with R_m suggests computing it that way: build the d × d matrix for every
# position and multiply. That stores L·d·d numbers. `apply_rope` instead stores the cos
# and sin tables, L·d/2 numbers each (L·d together, the size of the input), and does
# 4 multiplications and 2 additions per pair. Both give the same result (L = 1024, d = 64):

# %% slideshow={"slide_type": "fragment"}
L, d = 1024, 64
xs = torch.randn(L, d).to(device)


def dense_matrices(L: int, d: int) -> torch.Tensor:
    """R_m for every position at once: (L, d, d), block [[cos, −sin], [sin, cos]] per pair."""
    a = pl.rope_angles(L, d, device=device)
    cos, sin = a.cos(), a.sin()
    R = torch.zeros(L, d, d, device=device)
    i = torch.arange(0, d, 2, device=device)
    R[:, i, i], R[:, i, i + 1], R[:, i + 1, i], R[:, i + 1, i + 1] = cos, -sin, sin, cos
    return R


R_all = dense_matrices(L, d)
for m in (0, 1, 517, L - 1):
    torch.testing.assert_close(R_all[m], pl.rope_matrix(m, d, device=device))
dense_out = (R_all @ xs.unsqueeze(-1)).squeeze(-1)
torch.testing.assert_close(dense_out, pl.apply_rope(xs), atol=1e-5, rtol=1e-5)
dense_bytes = R_all.nelement() * R_all.element_size()
a = pl.rope_angles(L, d, device=device)
table_bytes = 2 * a.nelement() * a.element_size()  # cos and sin
print(f"dense R_m for all positions: {dense_bytes:,} bytes; cos + sin tables: {table_bytes:,} bytes")
assert dense_bytes == L * d * d * 4 == 16_777_216 and table_bytes == L * d * 4 == 262_144
assert dense_bytes == d * table_bytes

# %% [markdown] slideshow={"slide_type": "fragment"}
# So a library never builds R_m: it keeps the two tables and rotates pairs. How fast that can
# be made (a Python loop timed against one vectorised call; the dense form, a one-pass C kernel and the
# other forms counted, in operations and passes over memory, not timed) is the subject of the
# [appendix](10_making_it_fast.ipynb).

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 12. Exercises
#
# Each exercise has a cell for your answer and a checker that says what is right or wrong, with
# a hint. The worked solution follows, collapsed (expand it only after trying), then a cell that
# checks it. In a graded copy (`make student`) the solution cell is empty: write your answer there.
#
# **Exercise 1 (design).** RoPE's score sees the sign of the offset (§3): a key 3 positions ahead of
# the query and one 3 behind score differently. An encoder that attends both ways may want the distance
# without the direction. Design one encoding E for queries and keys alike, `undirected_rope(x, positions)`:
# x of shape (seq, d) and integer positions of shape (seq,) in, shape (seq, d') out, with a width d' of
# your choice, such that for every q, k and positions m, n
#
# $$\langle E(q, m),\, E(k, n)\rangle = \tfrac12\big(\langle R_m q, R_n k\rangle + \langle R_n q, R_m k\rangle\big):$$
#
# RoPE's score averaged over the key at n and the key moved to the mirror position on the other side of
# the query (the second term is qᵀR_{m−n}k). Since only dot products of encoded vectors are taken, any
# attention kernel and any KV cache would run it, given the scale 1/√d explicitly (a kernel's default,
# 1/√d', would change it). R_m is this chapter's (pairs (2j, 2j + 1),
# base 10 000), and `pl.apply_rope` is yours to use. The checker encodes its own vectors (d = 8, float64)
# one at a time, at positions from 0 to about 5 000, and compares the dot products of the encodings
# with the right side, to within 1e-6; encoded all in one call, they must give the same rows.

# %% slideshow={"slide_type": "fragment"}
def undirected_rope(x, positions):
    raise NotImplementedError  # your code


_ = check.rope_undirected(undirected_rope)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "rope_undirected_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def undirected_rope(x, positions):
    ### BEGIN SOLUTION
    # §3: moving both positions by the same amount changes no score, so moving them by −(m + n) gives
    # ⟨R_n q, R_m k⟩ = ⟨R_{−m} q, R_{−n} k⟩, RoPE's score at the negated positions. And the dot product of
    # two stacked vectors is the sum of their parts' dot products. So stack RoPE at the positions and at their
    # negatives, each scaled by 1/√2: d' = 2d. (Pair by pair the score is cos((n − m)θ_j)·(q_j · k_j).)
    return torch.cat((pl.apply_rope(x, positions), pl.apply_rope(x, -positions)), dim=-1) / math.sqrt(2)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "rope_undirected", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.rope_undirected(undirected_rope)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 2 (derive).** In a context of L tokens (positions 0 … L − 1) the fast pairs turn
# round many times, but the slowest ones never complete a single turn: a model trained on
# L tokens has never seen their angles beyond some value (chapter 7 starts from this).
# Derive a formula, then write `first_slow_pair(d, base, L)`: the smallest pair index j whose
# angle m·θ_j stays below 2π at every position of the context (d/2 if every pair completes a
# turn). The point is the formula, so the checker also asks about heads far wider than any
# model's (d up to 10^12, where no list of the pairs fits in memory), draws two of its settings
# anew at every check, the library's lists of
# frequencies, angles and wavelengths refuse to run while your function does, and each question
# allows it a few dozen Python lines: enough for a formula, not for a search over the pairs.

# %% slideshow={"slide_type": "fragment"}
def first_slow_pair(d, base, L):
    raise NotImplementedError  # your code


_ = check.rope_first_slow_pair(first_slow_pair)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "rope_first_slow_pair_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def first_slow_pair(d, base, L):
    ### BEGIN SOLUTION
    # Pair j turns most at the last position: (L − 1)·base^(−2j/d) < 2π
    # <=> j > (d/2)·ln((L − 1)/2π) / ln(base); the smallest such whole j, clipped to 0 … d/2.
    # Python floats (float64): at d = 10^12 the bound has 12 digits before the point. (j > bound strictly, but
    # ⌈bound⌉ would do as well: the bound is never a whole number, as (L − 1)/2π is transcendental and
    # base^(2j/d) is not.)
    if L - 1 < 2 * math.pi:
        return 0  # even pair 0 (θ_0 = 1) stays below one turn
    bound = (d / 2) * math.log((L - 1) / (2 * math.pi)) / math.log(base)
    return min(d // 2, math.floor(bound) + 1)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "rope_first_slow_pair", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.rope_first_slow_pair(first_slow_pair)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 3 (derive).** §3 called A the *generator* of a relative family (R_m = exp(mA)) and found
# that A = Q B Qᵀ, where B is RoPE's own block generator and Q an orthonormal basis: A is RoPE *tilted*
# by Q. It found A's frequencies numerically, from an eigen-decomposition of A². Derive them in closed
# form instead: write `tilted_frequencies(A)` that takes a 4 × 4 skew-symmetric A (4 rows of 4 numbers)
# and returns its two frequencies θ (radians per position), the faster first, as a formula in A's
# entries. The checker's entries count the arithmetic done with them and allow only +, −, ×, /, **
# (`x ** 0.5` for a square root), `abs`, `sum`, `max` and comparisons, 400 operations per A: room for a
# formula, not for iterating towards the eigenvalues. Try it on a tilted A of your own first.

# %% slideshow={"slide_type": "fragment"}
def tilted_frequencies(A):
    raise NotImplementedError  # your code


_ = check.rope_tilted_frequencies(tilted_frequencies)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "rope_tilted_frequencies_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def tilted_frequencies(A):
    ### BEGIN SOLUTION
    # A = Q B Qᵀ (§3), so anything a change of orthonormal basis cannot alter depends on B's
    # frequencies alone. Two such numbers are easy to read off A's entries:
    #   the sum of the squares of the entries, tr(AᵀA) = tr(BᵀB) = 2 (θ1² + θ2²) (each θ sits twice in B);
    #   the determinant, det A = det B = θ1² θ2². For a 4 × 4 skew-symmetric A it is the square of
    #   a01 a23 − a02 a13 + a03 a12 (expand it, or check it on B, where it is θ1 θ2).
    # With s = θ1² + θ2² and p = θ1 θ2: (θ1 ± θ2)² = s ± 2p. The faster frequency is the half-sum of
    # the two roots, and the slower p / faster (which avoids subtracting two nearly equal numbers).
    s = sum(a * a for row in A for a in row) / 2
    p = abs(A[0][1] * A[2][3] - A[0][2] * A[1][3] + A[0][3] * A[1][2])
    fast = ((s + 2 * p) ** 0.5 + max(s - 2 * p, 0) ** 0.5) / 2
    return fast, p / fast
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "rope_tilted_frequencies", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.rope_tilted_frequencies(tilted_frequencies)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Aside: Hugging Face's cos table, bit for bit
#
# Only for anyone who compares tables bit for bit; nothing in the chapter needs it. §9's `cos_hf`
# is within 2⁻⁶ ≈ 0.016 of our bf16 table but not equal to it everywhere, and neither is wrong.
# Hugging Face computes θ_j in float32 as 1/base^(2j/d), rounding twice (the power, then its
# reciprocal); `pl.rope_frequencies` rounds base^(−2j/d) once. With a correctly rounded power the two
# differ by one float32 step at 19 of the 64 frequencies of d = 128, on every CPU, since float32
# division is correctly rounded everywhere. Near position 90 000 that moves an angle by up to 2⁻⁷ rad
# and a bf16 cos by up to 2⁻⁶: close in absolute terms, yet more than 20 bf16 steps where |cos| is small.

# %% slideshow={"slide_type": "fragment"}
pos = torch.arange(90_000, 90_064)  # §9's positions, as in cos_hf
exponents = torch.arange(0, 128, 2, dtype=F64) / 128  # 2j/d, exact in float32 and float64
power = 10000.0**exponents  # float64: its rounding to float32 is correct (no value lies near a tie, asserted)
power32 = power.float()
gap_to_tie = ((power - power32.double()) / (torch.nextafter(power32, power32 * 2) - power32).double()).abs()
assert (0.5 - gap_to_tie).abs().min() > 1e-3
two_roundings = 1.0 / power32  # a correctly rounded power, then a correctly rounded float32 reciprocal
ours_freq = pl.rope_frequencies(128)  # 10000^(-2j/d) in float64, rounded to float32 once
apart = two_roundings != ours_freq
one_up, one_down = (torch.nextafter(ours_freq, torch.full_like(ours_freq, t)) for t in (2.0, 0.0))
assert int(apart.sum()) == 19 and bool(((two_roundings == one_up) | (two_roundings == one_down))[apart].all())
assert bool(((hf_freq == ours_freq) | (hf_freq == one_up) | (hf_freq == one_down)).all())  # on any CPU: a step
# on a CPU whose float32 pow misses a last bit, other frequencies can be the ones a step apart; where pow is
# correctly rounded (as on the machine that stored this notebook), Hugging Face's table is exactly the two roundings
if torch.equal(10000.0 ** exponents.float(), power32):
    assert torch.equal(hf_freq, two_roundings)  # Hugging Face's table is exactly the two roundings
ours = pl.rope_angles(pos, 128).cos().bfloat16()  # our bf16 cos table: float32 angles, rounded once
cos_gap = (cos_hf[0, :, :64].float() - ours.float()).abs()
assert cos_gap.max() <= 2**-6  # Hugging Face's bf16 table, on any CPU (cos itself may differ in its last bit)
our_grid, their_grid = pl.rope_angles(pos, 128), pos[:, None].float() * two_roundings
angle_gap = (their_grid - our_grid).abs()
worst = our_grid.flatten()[angle_gap.argmax()]  # the angle where the grids differ most
assert 0 < angle_gap.max() <= 2**-7 and angle_gap.max() <= 2 * (torch.nextafter(worst, worst + 1) - worst)
step_gap = (their_grid.cos().bfloat16().float() - ours.float()).abs()
bf16_step = 2.0 ** (torch.floor(torch.log2(ours.float().abs().clamp_min(2**-126))) - 7)  # of ours
assert step_gap.max() <= 2**-6 and (step_gap / bf16_step).max() > 20  # close absolutely, not relatively
print("Hugging Face's inv_freq: 1/base^(2j/d), rounded twice; with a correctly rounded power, 19 of 64 frequencies "
      "one float32 step from ours")
print("near position 90000 the angles then differ by at most 2^-7 rad and the bf16 cos tables by at most 2^-6, "
      "which is more than 20 bf16 steps where |cos| is small")


# %% [markdown] slideshow={"slide_type": "slide"}
# ## Errata in the sources
#
# Each row but one was checked by a cell above (the cell asserts the source's version fails; for the
# matrix, in which reading it fails); the history row rests on citations.
#
# | Source | The source writes | Correct | Checked in |
# |---|---|---|---|
# | `004` (RoFormer summary, worked example) | angle n·(1/10000)^(−2i/d), growing with i | n·10000^(−2i/d) (= n/100 for i = 1, d = 4) | §5 |
# | `004` | rotation matrix [[cos, sin], [−sin, cos]], no convention stated | on a column vector (RoFormer's and our convention) it turns clockwise, against its code and table; it matches them only as row vector × matrix: say so, or write [[cos, −sin], [sin, cos]] | §5 |
# | `004`, table | 0.9999 (row 1) and 1.0296 (row 3) | 1.0000 and 1.0295 (both slips are consistent with cos and sin taken in float32 and rounded to 4 decimals before the rotation) | §5 |
# | `001` (position-encoding summary, even/odd code) | output named `odds` for features 0, 2, 4, … (0-indexed); `evens` for 1, 3, … | names swapped in the code's own 0-indexed convention | §6b |
# | `001` | stacked picture with first row o₁, o₁, …, o_{d−1} | o₁, o₃, …, o_{d−1} | §6b |
# | `001` | last block uses θ_{d/2} | θ_{d/2−1} (pairs θ₀ … θ_{d/2−1}) | §6b |
# | `001` | `rotate_half` has the interleaved block-diagonal matrix | pairs (j, j + d/2): R_half = P R_int Pᵀ | §6c |
# | `001` (its history) | RoPE "was first used in the LLaMA architecture" | RoFormer used it in its own model (Su et al., 2021); GPT-J (Wang and Komatsuzaki, released June 2021), GPT-NeoX-20B (Black et al., 2022, arXiv:2204.06745) and PaLM (Chowdhery et al., 2022, arXiv:2204.02311) used it before LLaMA (Touvron et al., February 2023, arXiv:2302.13971) | citations, not checked here |
# | `000` (position-encoding notes, LLaMA sketch) | passes the whole `2·max_seq_len` phase table to the multiply | slice the current positions first: unsliced, a prompt fails at the multiply; one decoding token (seq = 1) passes it with `2·max_seq_len` rows and fails only at the value product, a line away from the cause | §6a |
# | `000` | RoPE "对embedding向量做一个角度旋转" (turns the embedding vector) | RoPE turns q and k after the projections, in every layer; the embeddings are left as they are | §4 (its first cell) |
# | `000` | pairs are used because "a d-dimensional rotation is too complex" | R_m is a d-dimensional rotation; every relative family exp(mA) is 2 × 2 pairs in a basis that W_q and W_k absorb | §3 |
# | `003` (positional-embedding notes, RoPE formula) | key R W_k x_m | R W_k x_n | §6d |
# | `003` (notes) | RoPE acts only on q and k, so every attention layer generally needs it | a precision, not an error: "generally" is right; turning q and k in every layer is the usual design; §4 answers why and shows, with a control, that it is a design choice, not a necessity | §4 |
# | `003` (code comment) | `torch.sin(pos_emb).T.flatten()` "same as" the repeated sin table | at that line `pos_emb` is (batch, heads, seq, d): `.T` reverses all four axes and `.flatten()` gives a 1-D vector of batch·heads·seq·d numbers; the table is `pos_emb[..., ::2].repeat_interleave(2, dim=-1)` | §6d |
#
# None of this changes the method: each source's *code* computes correct RoPE, as §5 and §6 show by
# running it, apart from one piece: `000`'s unsliced table.
