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
# # 7 · Beyond: no positions, longer contexts, and a measurement
#
# The position-encoding summary (`001`) promises to end with NoPE ("no positional
# encoding", which it attributes to LLaMA 4) and YaRN (which it attributes to the Qwen
# models). This chapter covers those, and then tests the third of the five properties `001`
# asks of a positional encoding: that it generalise to longer contexts ("not only at 8K, but
# also at 32K"), by running the ALiBi paper's headline experiment ourselves, small. (`001`'s
# fifth property, encodings for images and video, is chapter 9's.)
#
# 1. **NoPE**: what a causal mask alone tells a model about position (it can count);
# 2. **context extension**: why a RoPE model meets angles it never saw once the input
#    outgrows its training length, and how position interpolation, NTK, dynamic NTK, YaRN
#    and Llama 3's bands change RoPE's frequencies, per pair, checked against Hugging Face;
# 3. **train short, test long**: six positional methods, trained at 64 tokens (three seeds
#    each) on a local task and two long-range ones, are evaluated at up to 512 tokens. Controls
#    test the explanations that can be tested (the section says which it cannot separate), and
#    a look at the trained models' attention shows where it goes. The results are loaded from
#    `results/extrapolation.json`: this notebook does not train
#    (`python -m posenc_lib.experiments.extrapolation` does).
#
# Corrections to the sources are listed at the end.
#
# Notation and signs (0-based positions, offsets $j - i$ as key minus query, bit and pair
# orders) follow the course's [conventions page](00_index.ipynb#Conventions).

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import collections
import math
from fractions import Fraction

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, NullLocator

import posenc_lib as pl
from posenc_lib import check, viz

viz.use_style()  # white figures, dark text: readable in light and dark themes
from posenc_lib.experiments import extrapolation as ex

device = pl.default_device()  # the CPU unless you opt in with POSENC_DEVICE (00_index); tensors below follow it
g = torch.manual_seed(0)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1 · NoPE: the causal mask is a counter
#
# Chapter 1 shows that attention without positions treats its keys as a set, and that a
# causal mask breaks this permutation equivariance. Here is what the mask gives instead:
# query $i$ sees keys $0 \dots i$ only, so *how many* keys it sees depends on $i$. Take the
# bluntest head possible, equal scores everywhere ($q = 0$): query $i$ then returns the
# plain average of its $i + 1$ values. If the first token carries a marker (value 1, say a
# beginning-of-sequence token) and every other value is 0, the output at position $i$ is
# exactly $1/(i+1)$: the position, readable by the next layer. This is the construction
# behind Kazemnejad et al. (2023, Theorem 1): a decoder's first layer can recover absolute
# positions from the causal mask and a beginning-of-sequence token. Their Theorem 2 adds that, with
# those positions in the hidden state, the later layers can implement a relative encoding: a score
# that depends on the offset between query and key.

# %% slideshow={"slide_type": "fragment"}
n = 8
q = torch.zeros(n, 4, device=device)  # equal scores: softmax is uniform over visible keys
marker = torch.zeros(n, 1, device=device)
marker[0] = 1.0
causal_out, _ = pl.attention(q, q, marker, causal=True)
full_out, _ = pl.attention(q, q, marker, causal=False)
print("causal:       ", [round(x, 4) for x in causal_out[:, 0].tolist()])
print("bidirectional:", [round(x, 4) for x in full_out[:, 0].tolist()])
i = torch.arange(n, device=device)
torch.testing.assert_close(causal_out[:, 0], 1 / (i + 1))  # the counter
torch.testing.assert_close(full_out[:, 0], torch.full((n,), 1 / n, device=device))  # no position at all

# %% [markdown] slideshow={"slide_type": "subslide"}
# So a decoder with no positional encoding is not position-blind: Haviv et al. (2022) found that
# causal language models trained without one still learn position, and conjecture that the causal mask lets the model infer how many predecessors each
# token can attend to. Chi et al. (2023, *Latent Positional Information is in the Self-Attention
# Variance of Transformer Language Models Without Positional Embeddings*) name one way that count
# becomes readable: the variance of a causal average over random-looking values shrinks as the
# number of keys averaged over grows. Kazemnejad et al. (2023) found such "NoPE" decoders
# length-generalise as well as or better than explicit encodings on their reasoning tasks. In
# language models the picture is less rosy: Wang et al. (2024, *Length Generalization of Causal
# Transformers without Position Encoding*) find that NoPE extends further than RoPE but still
# fails past a point, and recover more length by tuning the attention's temperature (per head).
# Llama 4 interleaves layers without positions with RoPE layers, and in them scales the query at
# position $i$ by $1 + 0.1\log(\lfloor (i+1)/8192 \rfloor + 1)$, growing with position, not a constant per head
# (the last cell of this chapter checks transformers' settings for it; chapter 8, §5, runs it).
#
# But the counter is *coarse*: neighbours $i$ and
# $i+1$ differ by $\frac{1}{i+1} - \frac{1}{i+2}$, between
# $1/(i+2)^2$ and $1/(i+1)^2$, so about $1/i^2$: below $10^{-3}$ from positions 31/32 on
# and below $10^{-5}$ from 315/316 on. The counter separates neighbours worst at the *end*
# of the input: among positions 48–63, the last quarter of a 64-token window,
# neighbours differ by less than $4.1\cdot 10^{-4}$, a tenth of the gap at position 14.
# A later layer can rescale the counter, which changes that gap but not the *relative* one (the
# gap as a share of the counter's value): about 2 % at position 50, and 1.6 % to 2 % across
# positions 48–63.
# In a 16-bit format neighbours eventually round to the same number (Exercise 1 predicts where).
# Exercise 1 (at the end of the chapter) is on this section.

# %% slideshow={"slide_type": "fragment"}
positions = torch.arange(1, 1024, dtype=torch.float64)
counter = 1 / (positions + 1)
gap = counter[:-1] - counter[1:]
fig, axes = viz.figure(2, width=4.0, height=3.0)
axes[0].plot(positions.numpy(), counter.numpy())
axes[0].set(xscale="log", yscale="log", xlabel="position i", ylabel="causal average 1/(i+1)",
            title="what a NoPE head can read")
axes[1].plot(positions[:-1].numpy(), gap.numpy(), color="C3")
axes[1].set(xscale="log", yscale="log", xlabel="position i", ylabel="1/(i+1) − 1/(i+2)",
            title="difference between neighbours")
left = positions[:-1]  # gap[k] compares positions i = k + 1 and i + 1
assert ((1 / (left + 2) ** 2 <= gap) & (gap <= 1 / (left + 1) ** 2)).all()
assert gap[30 - 1] >= 1e-3 > gap[31 - 1] and gap[314 - 1] >= 1e-5 > gap[315 - 1]  # first below: 31 -> 32, 315 -> 316
late = gap[48 - 1:63 - 1]  # neighbours among positions 48..63
assert late.max() < 4.1e-4 and late.max() < gap[14 - 1] / 10
relative = gap / counter[:-1]  # the gap as a share of the counter's value
exact = [(Fraction(1, i + 1) - Fraction(1, i + 2)) / Fraction(1, i + 1) for i in range(1, 1023)]  # per position
torch.testing.assert_close(relative, torch.tensor([float(x) for x in exact], dtype=torch.float64))
torch.testing.assert_close((3.7 * gap) / (3.7 * counter[:-1]), relative)  # a rescale leaves it as it is
late_rel = relative[48 - 1:63 - 1]
assert round(relative[50 - 1].item(), 2) == 0.02 and [round(x.item(), 3) for x in late_rel.aminmax()] == [0.016, 0.02]
fig

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2 · Context extension: stretch RoPE's frequencies
#
# RoPE's score depends only on the offset between query and key (chapter 5). A causal
# model trained on $L_0$ tokens has therefore seen the distances $r = m - n = 0 \dots L_0 - 1$
# (query minus key: the course's offset, key minus query, without its sign) and, in pair $j$, the
# angles $r\,\theta_j$ for those $r$ only. Pair $j$ turns once every
# $\lambda_j = 2\pi/\theta_j$ positions (its *wavelength*, chapter 5). Pairs with
# $\lambda_j \ll L_0$ have gone round many times in training: every angle is familiar.
# Pairs with $\lambda_j > L_0$ never completed a turn: they saw only the arc
# $[0, (L_0-1)\theta_j]$, and beyond $L_0$ they reach angles the model never saw. Which
# pairs are those? $L_0\theta_j < 2\pi$ with $\theta_j = b^{-2j/d}$; taking logarithms,
#
# $$L_0\, b^{-2j/d} < 2\pi \iff j > j^* = \frac{d}{2}\,\frac{\ln(L_0/2\pi)}{\ln b},$$
#
# the "critical dimension" of Liu et al. (2023, *Scaling Laws of RoPE-based Extrapolation*), in pairs.
# Chapter 5's Exercise 2 counts a turn only within the positions $0 \dots L_0-1$, $(L_0-1)\theta_j \ge 2\pi$;
# here, as in chapter 8, a pair has turned when its wavelength is at most $L_0$, $L_0\theta_j \ge 2\pi$, because
# that is the form Liu et al.'s critical dimension takes. The two differ by less than one step $\theta_j$, and no
# pair used here falls between them (asserted below for this head and for §3's $d = 16$ head).
#
# The cell checks this count against a direct measurement, `pl.rope_angle_novelty`: for
# every pair, the largest distance on the circle from an angle at the distances
# $0 \dots sL_0 - 1$ to the nearest angle seen in training. More than one step $\theta_j$
# (the spacing of a slow pair's trained angles) means "new". Numbers: LLaMA's head, as in
# Chen et al. (2023, the position interpolation paper): $d = 128$, $b = 10^4$, trained on $L_0 = 2048$ tokens; run on $s = 8$
# times that.

# %% slideshow={"slide_type": "fragment"}
d, L0, s, base = 128, 2048, 8.0, 10000.0
theta = pl.rope_frequencies(d, base=base, dtype=torch.float64)
pair = torch.arange(d // 2)
never_turned = L0 * theta < 2 * math.pi  # λ_j > L0: the trained angles are the arc [0, (L0 - 1) θ_j]
j_star = d / 2 * math.log(L0 / (2 * math.pi)) / math.log(base)
novelty = pl.rope_angle_novelty(theta, L0, int(s * L0))  # measured, radians
new = novelty > theta  # farther than one trained step from every angle seen
assert torch.equal(never_turned, pair > j_star) and torch.equal(new, never_turned)
assert (novelty[~never_turned] <= theta[~never_turned] / 2 + 1e-12).all()  # a full turn leaves no gap > θ_j
assert math.isclose(novelty[-1].item(), (s - 1) * L0 * theta[-1].item(), rel_tol=1e-9)  # the arc grows s-fold
for d_, L_ in ((d, L0), (16, 64)):  # the two counts of "turned" agree on this head and on §3's d = 16 head
    th_ = pl.rope_frequencies(d_, base=base, dtype=torch.float64)
    assert torch.equal(L_ * th_ >= 2 * math.pi, (L_ - 1) * th_ >= 2 * math.pi)
turns = L0 * theta / (2 * math.pi)
print(f"j* = {j_star:.2f}: pairs {int(j_star) + 1}..{d // 2 - 1} ({int(new.sum())} of {d // 2}) never "
      f"complete a turn in {L0} positions")
print(f"pair 0 turns {turns[0]:.0f} times over L0; its farthest new angle is {novelty[0]:.4f} rad from a trained one")
print(f"pair {d // 2 - 1}: trained arc [0, {(L0 - 1) * theta[-1]:.3f}] rad; at {int(s * L0)} positions it reaches "
      f"{(s * L0 - 1) * theta[-1]:.3f} rad")

# %% [markdown] slideshow={"slide_type": "subslide"}
# On the circle: the angles seen in training (blue, $r < L_0$) and those of the new
# distances ($L_0 \le r < sL_0$, red, drawn inside) for a fast pair, the first pair that
# never turns, and the slowest pair. Pair 0 saw every angle; pair 63 saw a sliver.

# %% slideshow={"slide_type": "fragment"}
fig, axes = viz.figure(3, width=3.0, height=3.1)
r_train, r_new = torch.arange(L0, dtype=torch.float64), torch.arange(L0, int(s * L0), dtype=torch.float64)
circle = torch.linspace(0, 2 * math.pi, 200)
for ax, j in zip(axes, (0, int(j_star) + 1, d // 2 - 1)):
    for r, radius, color, label in ((r_train, 1.0, "C0", f"r < {L0}"), (r_new, 0.8, "C3", f"{L0} ≤ r < {int(s * L0)}")):
        ax.plot(radius * circle.cos(), radius * circle.sin(), color="0.85", lw=0.6)  # the whole turn, faint
        a = r * theta[j]
        ax.plot(radius * a.cos().numpy(), radius * a.sin().numpy(), ".", ms=2, color=color, label=label)
    ax.plot([0, 1.1], [0, 0], color="0.5", lw=0.6)  # angle 0; angles grow counter-clockwise
    ax.set(aspect="equal", xlim=(-1.15, 1.15), ylim=(-1.15, 1.15), xticks=[], yticks=[],
           title=f"pair {j}: {turns[j]:.3g} turns over L0")
handles = axes[2].get_lines()[1:4:2]  # one dot series per colour
axes[2].legend(handles=handles, fontsize=7, loc="lower left", markerscale=4)
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# This is why context-extension methods exist. Each changes $\theta_j$ so that a model
# can read $s\cdot L_0$ tokens ($s$ = `factor`) without retraining (or with a short
# fine-tune): position interpolation slows *every* pair by $s$, squeezing all angles back
# into the trained range; NTK, YaRN and Llama 3 slow mostly the slow pairs, which are the
# ones that need it. LongRoPE (Ding et al. 2024; chapter 8) is the search version of that per-pair
# idea: it sets each pair's factor by searching for the lowest perplexity, not by a rule.
#
# Why "NTK-aware"? The name is the *neural tangent kernel*'s: Tancik et al. (2020) used it to show
# that a network learns high-frequency detail of a low-dimensional input only if the input's
# embedding carries high-frequency components. bloc97's post (2023) and YaRN (Peng et al. 2023, §3.1)
# argue that interpolating every pair squeezes those components out, so the model can no longer tell
# close positions apart. NTK-aware scaling therefore changes the fastest pairs least (pair 0 not at all).
#
# The other route raises the base *during* training: adjusted base frequency (ABF), named by Xiong et
# al. (2023, *Effective Long-Context Scaling of Foundation Models*). Released configs show it:
# `rope_theta` is 1000000 in Qwen2.5's (`Qwen/Qwen2.5-7B-Instruct`, `config.json`; the course's copy is
# asserted in the next cell) and in Code Llama's (`codellama/CodeLlama-7b-hf`, `config.json`; cited, not
# checked here).
#
# In the table, dynamic NTK's scale $sL/L_0 - (s-1)$ is 1 at $L = L_0$ and grows linearly with $L$;
# `beta_fast` and `beta_slow` are YaRN's two thresholds, in turns over $L_0$; "NTK-by-parts" is
# bloc97's name for treating each pair by how often it turns.
#
# | method | new frequencies | who |
# |---|---|---|
# | `"linear"` (position interpolation) | $\theta_j / s$ for every pair | Chen et al. 2023; kaiokendev |
# | `"ntk"` (NTK-aware) | a larger base $b' = b\,s^{d/(d-2)}$: pair 0 unchanged, the slowest pair $\theta/s$ | bloc97 (2023) |
# | `"dynamic"` (dynamic NTK) | `"ntk"` with scale $s L/L_0 - (s-1)$ at current length $L$ | emozilla (2023) |
# | `"yarn"` | keep pairs turning > 32 times over $L_0$ (`beta_fast`), interpolate those turning < once (`beta_slow`), ramp between (bloc97's "NTK-by-parts"); scale q, k by $0.1\ln s + 1$ (YaRN = NTK-by-parts + this temperature) | Peng et al. 2023 |
# | `"llama3"` | keep $\lambda_j < L_0/4$, interpolate $\lambda_j > L_0$; between, $\theta'_j = (1-w)\,\theta_j/s + w\,\theta_j$ with $w = (L_0/\lambda_j - 1)/3$, linear in the turns $L_0/\lambda_j$ from 1 (`low_freq_factor`) to 4 (`high_freq_factor`) | Meta, Llama 3.1 |
#
# One call gives any of them: `pl.scaled_rope_frequencies(d, method=..., factor=s,
# original_max_position=L0)` returns `(inv_freq, attention_factor)` for
# `pl.apply_rope(x, inv_freq=..., attention_factor=...)`. The tests
# (`tests/test_scaling.py`) check every method against Hugging Face transformers'
# `ROPE_INIT_FUNCTIONS` for several dimensions and factors (`"ntk"` through transformers'
# `"dynamic"` at factor 1 and length $sL_0$, since no transformers config names a static
# `"ntk"` type).
#
# Two details matter when you check a model against this table:
#
# * **YaRN's ramp.** The paper defines the blend between keeping and interpolating as linear
#   in the number of turns over $L_0$. Its reference code, and transformers, ramp linearly in
#   the pair index $j$ between the pair that turns `beta_fast` = 32 times and the pair that
#   turns `beta_slow` = 1 time, which is linear in the *logarithm* of the turns, and clamps
#   that ramp at pair 0. Where no pair turns 32 times, as in §3's $d = 16$, $L_0 = 64$ head,
#   even pair 0 differs (paper ×0.65, code ×1 at $s = 2$; asserted in the next cell). This library, and
#   "YaRN" everywhere in this chapter, follows the code (transformers'), as the models you run do.
# * **Dynamic NTK in transformers** takes $L_0$ from `max_position_embeddings` and recomputes
#   the frequencies only when the input grows past the longest length seen so far (and
#   resets them when it falls back below $L_0$). Keys already in a KV cache keep the angles
#   of the older base, so a long generation mixes keys rotated with different frequencies
#   (a known issue, huggingface/transformers#25104; how much a model loses to it is not measured here,
#   and reports in the discussion differ). The next cell checks the recomputing on the
#   installed transformers, with a tiny configuration ($L_0 = 64$, $s = 2$).

# %% slideshow={"slide_type": "fragment"}
from transformers import LlamaConfig  # the installed library's dynamic NTK, on a tiny offline config
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

hf_dyn = LlamaRotaryEmbedding(LlamaConfig(hidden_size=32, num_attention_heads=2, max_position_embeddings=64,
                                          rope_parameters={"rope_type": "dynamic", "factor": 2.0, "rope_theta": 1e4}))
dyn_start = hf_dyn.inv_freq.clone()


def dyn_freqs(L):
    """transformers' dynamic-NTK frequencies after a forward pass over positions 0 .. L - 1."""
    hf_dyn(torch.zeros(1, 1, 16), torch.arange(L)[None])
    return hf_dyn.inv_freq.clone()


dyn_seen = {L: dyn_freqs(L) for L in (64, 128, 100, 160, 32)}  # in this order: grow, shrink, grow, fall below L0
assert torch.equal(dyn_seen[64], dyn_start)  # up to L0 = max_position_embeddings: the trained frequencies
assert not torch.equal(dyn_seen[128], dyn_start) and torch.equal(dyn_seen[100], dyn_seen[128])  # kept while shorter
assert (dyn_seen[160] < dyn_seen[128])[1:].all()  # past the longest seen: recomputed (a larger base, slower pairs)
assert torch.equal(dyn_seen[32], dyn_start)  # below L0 again: reset
dyn_base = 1e4 * (2.0 * 128 / 64 - (2.0 - 1)) ** (16 / 14)  # "ntk" at the scale s L / L0 - (s - 1), at L = 128
torch.testing.assert_close(dyn_seen[128], pl.rope_frequencies(16, base=dyn_base, dtype=torch.float64).float())

# YaRN's ramp (above), on §3's head (d = 16, L0 = 64, s = 2): no pair turns 32 times; pair 0, paper x0.65, code x1
turns_16 = 64 * pl.rope_frequencies(16, dtype=torch.float64) / (2 * math.pi)
ramp_0 = min(max((turns_16[0].item() - 1) / 31, 0.0), 1.0)  # the paper's ramp, linear in the turns (1 to 32)
code_0 = pl.scaled_rope_frequencies(16, method="yarn", factor=2.0, original_max_position=64, dtype=torch.float64)[0][0]
assert (turns_16 < 32).all() and round(ramp_0 + (1 - ramp_0) / 2, 2) == 0.65 and code_0.item() == 1.0

# ABF (above): Qwen2.5's base as released, from the course's copy of its config.json (chapter 8 reads the same file)
import json
from importlib.resources import files

released = json.loads((files("posenc_lib") / "data" / "model_rope_configs.json").read_text())["models"]
assert released["Qwen2.5 7B Instruct"]["source"] == "Qwen/Qwen2.5-7B-Instruct/config.json"
assert released["Qwen2.5 7B Instruct"]["config"]["rope_theta"] == 1000000

# %% slideshow={"slide_type": "fragment"}
METHODS = ["linear", "ntk", "yarn", "llama3"]
scaled = {m: pl.scaled_rope_frequencies(d, method=m, factor=s, original_max_position=L0, dtype=torch.float64)
          for m in METHODS}
ratio = {m: scaled[m][0] / theta for m in METHODS}  # how much each pair slows down
for m in METHODS:
    print(f"{m:>7}: pair 0 x{ratio[m][0].item():.3f}, pair 32 x{ratio[m][32].item():.3f}, "
          f"last pair x{ratio[m][-1].item():.3f}, attention factor {scaled[m][1]:.3f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# What the table says, asserted: linear divides every pair by $s$; NTK leaves pair 0 alone
# and divides the slowest pair by exactly $s$ (the base $b' = b\,s^{d/(d-2)}$ is what does it:
# $\theta'_j/\theta_j = (b'/b)^{-2j/d} = s^{-2j/(d-2)}$, which is $1$ at $j = 0$ and $1/s$ at
# $j = d/2 - 1$); YaRN and Llama 3 leave the fast pairs alone,
# interpolate the slow ones fully, and stay between the two everywhere; dynamic NTK is NTK
# at scale $L/L_0$ (with factor 1) and plain RoPE up to $L_0$.

# %% slideshow={"slide_type": "fragment"}
torch.testing.assert_close(ratio["linear"], torch.full_like(theta, 1 / s))
assert ratio["ntk"][0] == 1 and math.isclose(ratio["ntk"][-1].item(), 1 / s, rel_tol=1e-12)
torch.testing.assert_close(scaled["ntk"][0], pl.rope_frequencies(d, base=base * s ** (d / (d - 2)), dtype=torch.float64))
for m in ("yarn", "llama3"):
    assert ratio[m][0] == 1 and math.isclose(ratio[m][-1].item(), 1 / s, rel_tol=1e-12)
    assert ((ratio[m] <= 1 + 1e-12) & (ratio[m] >= 1 / s - 1e-12)).all()
turns = L0 * theta / (2 * math.pi)  # L0 / lambda_j: how many times pair j turns over L0
band = (turns > 1) & (turns < 4)  # Llama 3's band: wavelengths between L0/4 and L0
w = (turns - 1) / 3  # low_freq_factor = 1, high_freq_factor = 4: linear in the turns
assert band.nonzero().flatten().tolist() == list(range(31, 41))  # pairs 31 .. 40 of this head lie in the band
torch.testing.assert_close(scaled["llama3"][0][band], ((1 - w) * theta / s + w * theta)[band], rtol=1e-12, atol=0)
dyn = lambda L: pl.scaled_rope_frequencies(d, method="dynamic", factor=1.0, original_max_position=L0, seq_len=L)[0]  # noqa: E731
torch.testing.assert_close(dyn(4 * L0), pl.scaled_rope_frequencies(d, method="ntk", factor=4.0, original_max_position=L0)[0])
torch.testing.assert_close(dyn(L0 // 2), pl.rope_frequencies(d))

# %% [markdown] slideshow={"slide_type": "subslide"}
# Do they keep the angles in range? The same measurement as above, with each method's frequencies at
# the distances $0 \dots sL_0 - 1$ against plain RoPE's in training. Position interpolation maps
# distance $r$ to the angle of $r/s$: the first distance past the new context, $sL_0$, lands exactly
# where $L_0$ did, and the largest one, $sL_0 - 1$, on $(L_0 - 1/s)\,\theta_j$, less than one step
# past the trained arc (positions start at 0, so the last trained distance is $L_0 - 1$). That is in
# range by the one-step test above; under the strict test (no angle past the trained arc at
# all) PI reaches only $L = s(L_0 - 1) + 1$, short of $sL_0$ (asserted below). YaRN and
# Llama 3 interpolate every pair with $\lambda_j > L_0$ fully: they slow each such pair by the whole
# factor $s$, as PI does, so its angles too stay within one step of its trained arc and no pair sees
# a new angle (§3 tests whether that is enough). NTK changes the base instead; what that leaves at new angles, the next cell counts
# (Exercise 3 asks how far a change of base alone can go).

# %% slideshow={"slide_type": "fragment"}
fresh = {m: pl.rope_angle_novelty(theta, L0, int(s * L0), inv_freq=scaled[m][0]) > theta for m in METHODS}
print(f"pairs reaching unseen angles at {int(s * L0)} positions: plain RoPE {int(new.sum())}, "
      + ", ".join(f"{m} {int(fresh[m].sum())}" for m in METHODS))
pi_freq = scaled["linear"][0]
torch.testing.assert_close(s * L0 * pi_freq, L0 * theta, rtol=1e-12, atol=0)
assert ((s * L0 - 1) * pi_freq - (L0 - 1) * theta < theta).all()  # at most one step past the arc
L_strict = int(s * (L0 - 1)) + 1  # the strict test: every distance up to L - 1 inside the trained arc
torch.testing.assert_close((L_strict - 1) * pi_freq, (L0 - 1) * theta, rtol=1e-12, atol=0)  # lands on its end
assert (L_strict * pi_freq > (L0 - 1) * theta).all() and L_strict < s * L0  # one more distance is past it
for m in ("linear", "yarn", "llama3"):
    assert not fresh[m].any() and (2 * math.pi / scaled[m][0][never_turned] > s * L0).all()
    torch.testing.assert_close(ratio[m][never_turned], torch.full_like(theta[never_turned], 1 / s))  # fully
assert torch.equal(fresh["ntk"], never_turned & (pair < d // 2 - 1))

# %% [markdown] slideshow={"slide_type": "subslide"}
# Why does an unseen angle hurt, and an interpolated one not? Training fixes a head's
# scores only at the distances it saw. Two slow pairs barely turn over $[0, L_0)$, so a
# head can weigh them against each other (below: $q$ and $k$ with only pairs 62 and 63,
# giving the score $\cos(r\theta_{62}) - \cos(r\theta_{63})$) and its scores stay tiny on
# every trained distance (at most 0.0092), while beyond $L_0$ the two waves separate and the score reaches
# 0.26, about 28-fold: a score this head never produced in training. This is a hand-built two-pair
# head: it shows the effect can happen (28-fold here), not how large it is in a trained model. With position
# interpolation the same head is asked only for distances $r/s$ within the trained range (up
# to $L_0 - 1/s$, less than one step past the last trained distance, as above), where the score stays within 0.1 % of its trained maximum. Chen et al. (2023, §2.2,
# Figure 2; their numbers quoted here, not recomputed) show the same with a fitted score that reaches about 8000 beyond $L_0$, and
# bound the interpolated score (their Theorem 2.1: for LLaMA's sizes the bound is at least
# about 600 times smaller than the extrapolated one).
#
# Interpolation has a price: it slows the fast pairs
# too, so neighbouring tokens are $1/s$ of a trained distance apart (pair 0 turns
# $1/8$ rad per token instead of 1), which no training distance showed. Chen et al.
# fine-tune for about 1000 steps after interpolating; YaRN and Llama 3 leave the fast pairs
# of this head alone (YaRN pairs 0 to 16, Llama 3 pairs 0 to 30, exactly), NTK only pair 0.

# %% slideshow={"slide_type": "fragment"}
q_slow, k_slow = torch.zeros(2, d, dtype=torch.float64)
q_slow[[124, 126]] = 1.0  # pairs 62 and 63 (interleaved: features 2j, 2j + 1)
k_slow[124], k_slow[126] = 1.0, -1.0
r_all = torch.arange(int(s * L0))


def score_by_distance(inv_freq):
    """q at position r, k at position 0, for r = 0 .. s L0 - 1: the score at distance r."""
    rq = pl.apply_rope(q_slow.expand(len(r_all), d), r_all, inv_freq=inv_freq)
    rk = pl.apply_rope(k_slow[None], torch.zeros(1, dtype=torch.long), inv_freq=inv_freq)
    return rq @ rk[0]


plain_scores, pi_scores = score_by_distance(theta), score_by_distance(pi_freq)
torch.testing.assert_close(plain_scores, (r_all * theta[62]).cos() - (r_all * theta[63]).cos())
trained_max = plain_scores[:L0].abs().max()
grow = plain_scores[L0:].abs().max() / trained_max
assert round(grow.item()) == 28 and pi_scores.abs().max() < 1.001 * trained_max
assert round(trained_max.item(), 4) == 0.0092 and round(plain_scores[L0:].abs().max().item(), 2) == 0.26
assert pi_freq[0].item() == 1 / s  # pair 0: 1/8 rad between neighbours instead of 1
untouched = {m: int((ratio[m] == 1).long().cumprod(0).sum()) for m in ("yarn", "llama3")}  # leading pairs at ratio 1
assert untouched == {"yarn": 17, "llama3": 31}  # YaRN: pairs 0 .. 16; Llama 3: pairs 0 .. 30
assert ratio["ntk"][0] == 1 and (ratio["ntk"][1:] < 1).all()  # NTK: only pair 0 runs at its own speed
print(f"largest |score| over distances < L0: {trained_max:.4f}; beyond L0 (plain RoPE): {grow:.1f}x that; "
      f"with position interpolation: {pi_scores.abs().max() / trained_max:.4f}x")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The same per pair, in pictures. Left: the slow-down factor $\theta'_j/\theta_j$. Right:
# the wavelength $\lambda_j = 2\pi/\theta_j$ against the original context $L_0$ (dashed)
# and the extended one $s L_0$ (dotted); the shaded bands are where YaRN (pairs turning
# between 1 and 32 times over $L_0$) and Llama 3 ($L_0/4 < \lambda < L_0$) blend.

# %% slideshow={"slide_type": "fragment"}
COLORS = {"none": "black", "linear": "C1", "ntk": "C6", "yarn": "C9", "llama3": "C8"}


def draw_scalings(fig, factor=s, **_):
    ax_r, ax_w = fig.subplots(1, 2)
    j = torch.arange(d // 2).numpy()
    ax_w.axhspan(L0 / 32, L0, color="C9", alpha=0.12, label="YaRN ramp")
    ax_w.axhspan(L0 / 4, L0, color="C8", alpha=0.12, label="Llama 3 blend")
    ax_w.axhline(L0, color="black", ls="--", lw=0.8)
    line_L = ax_w.axhline(factor * L0, color="black", ls=":", lw=0.8)
    line_s = ax_r.axhline(1 / factor, color="black", ls=":", lw=0.8, label="1/s (right: s L0)")  # full slow-down
    ax_w.plot(j, (2 * math.pi / theta).numpy(), color="black", lw=1, label="RoPE")
    lines = {}
    for m in METHODS:
        (lines[m, "r"],) = ax_r.plot(j, j * 0.0 + 1, color=COLORS[m], label=m)
        (lines[m, "w"],) = ax_w.plot(j, j * 0.0 + 1, color=COLORS[m])
    # fixed limits that hold the widget's largest factor, s = 64: ratios down to 1/64, wavelengths up to 64 x 54 000
    ax_r.set(xlabel="pair j", ylabel="θ'_j / θ_j", yscale="log", ylim=(1 / 90, 1.5))
    ax_w.set(xlabel="pair j", ylabel="wavelength 2π/θ_j (positions)", yscale="log", ylim=(3, 1e7))
    ax_r.set_yticks([1 / 64, 1 / 8, 1])
    ax_w.set_yticks([10, 1e3, 1e5, 1e7])
    for ax in (ax_r, ax_w):  # few, plain tick labels: text dominates the widget's redraw time
        ax.set_xticks([0, 32, 63])
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.yaxis.set_minor_locator(NullLocator())
    handles = ax_r.get_lines() + ax_w.get_lines()[-len(METHODS) - 1:-len(METHODS)] + ax_w.patches[:2]
    ax_w.legend(handles=handles, fontsize=7, loc="lower right")  # one legend for both, where no curve runs
    title = ax_r.set_title("")

    def update(factor=s, **_):
        for m in METHODS:
            f, _att = pl.scaled_rope_frequencies(d, method=m, factor=factor, original_max_position=L0,
                                                 dtype=torch.float64)
            lines[m, "r"].set_ydata((f / theta).numpy())
            lines[m, "w"].set_ydata((2 * math.pi / f).numpy())
        line_L.set_ydata([factor * L0] * 2)
        line_s.set_ydata([1 / factor] * 2)
        title.set_text(f"d = {d}, L0 = {L0}, factor s = {factor:g}")

    update(factor)
    return update


fig = Figure(figsize=(8.5, 3.2))
_ = draw_scalings(fig, factor=s)
torch.testing.assert_close(2 * math.pi / theta, pl.rope_wavelengths(d))  # λ_j from the library
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# The widget below redraws the curves for any factor $s$; the slider moves the curves and the dotted
# lines ($1/s$ on the left, $sL_0$ on the right). Take NTK's pairs whose wavelength was beyond $L_0$
# (right of where the black RoPE curve crosses the dashed line). Predict, then slide $s$ from 2 to 64: how
# many of them does §2's one-step test find at unseen angles as $s$ grows, and how many of PI's, YaRN's and
# Llama 3's, and why?

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
scaling_widget = viz.InteractiveFigure(
    draw_scalings,
    figsize=(8.0, 3.0),
    factor=widgets.FloatLogSlider(value=8.0, base=2, min=0, max=6, step=0.5, description="factor s"),
)
scaling_widget

# %% [markdown] slideshow={"slide_type": "fragment"}
# <details><summary><b>Answer</b> (open after predicting and trying the widget; the cell below checks it at
# every factor of the slider: read it after predicting, too)</summary>
#
# The same 22 (pairs 41–62) at every $s > 1$ on the slider, and none for PI, YaRN or Llama 3 at any $s$. NTK
# slows pair $j$ by $s^{2j/(d-2)}$, less than $s$ for every pair but the slowest (on the left, above the
# dotted $1/s$), so at $sL_0$ those pairs pass the largest trained angle; the other three slow every such
# pair by the full $s$.
#
# </details>

# %% slideshow={"slide_type": "fragment"}
# Checks the answer folded above (read it after opening it).
for s_w in 2 ** torch.arange(0, 6.5, 0.5, dtype=torch.float64):
    f_w = {m: pl.scaled_rope_frequencies(d, method=m, factor=s_w.item(), original_max_position=L0,
                                         dtype=torch.float64)[0] for m in METHODS}
    assert math.isclose(f_w["linear"][0].item(), 1 / s_w.item()) and f_w["ntk"][0] == 1
    assert torch.equal(f_w["yarn"][2 * math.pi / theta < L0 / 32], theta[2 * math.pi / theta < L0 / 32])
    assert torch.equal(f_w["llama3"][2 * math.pi / theta < L0 / 4], theta[2 * math.pi / theta < L0 / 4])
    assert all((1 / 90 < f / theta).all() and (2 * math.pi / f < 1e7).all() for f in f_w.values())  # on the panels
    assert ((f_w["ntk"] / theta > (1 + 1e-12) / s_w) & never_turned).nonzero().flatten().tolist() == (
        list(range(41, 63)) if s_w > 1 else [])  # NTK: slowed by less than s, the same pairs at every s > 1
    assert not any(((f / theta > (1 + 1e-12) / s_w) & never_turned).any() for m, f in f_w.items() if m != "ntk")
    novel = {m: (pl.rope_angle_novelty(theta, L0, int(s_w * L0), inv_freq=f) > theta).nonzero().flatten().tolist()
             for m, f in f_w.items()}  # §2's one-step test
    assert novel == {"linear": [], "ntk": list(range(41, 63)) if s_w > 1 else [], "yarn": [], "llama3": []}
assert int(fresh["ntk"].sum()) == 22  # §2's one-step test at s = 8: the same 22 pairs as at every s > 1 (above)

# %% [markdown] slideshow={"slide_type": "subslide"}
# YaRN's direction, a common slip: the *high*-frequency pairs
# (small $j$, short wavelengths) are left alone and the *low*-frequency ones are
# interpolated. Its attention factor multiplies both q and k, so the scores grow by its
# square. Why $0.1\ln s + 1$? Peng et al. (YaRN, §3.4) found that a temperature $t$ on the
# logits lowers the perplexity of a stretched model, about equally at every position, and chose
# its size by measurement: fitting the temperature of lowest perplexity for LLaMA models of 7 to
# 65 billion parameters, without fine-tuning, across factors $s$, gives $\sqrt{1/t} = 0.1\ln s + 1$.
# It is an empirical fit, not a derivation; what it does is sharpen the softmax, which a longer
# input spreads over more keys (chapter 8 §3 shows how released models adjust it):

# %% slideshow={"slide_type": "fragment"}
inv_yarn, att = scaled["yarn"]
assert torch.equal(inv_yarn[:4], theta[:4]) and torch.allclose(inv_yarn[-4:], theta[-4:] / s)
qk = torch.randn(2, 5, d, dtype=torch.float64)
plain = pl.apply_rope(qk[0], inv_freq=inv_yarn) @ pl.apply_rope(qk[1], inv_freq=inv_yarn).T
boosted = pl.apply_rope(qk[0], inv_freq=inv_yarn, attention_factor=att) @ pl.apply_rope(
    qk[1], inv_freq=inv_yarn, attention_factor=att).T
torch.testing.assert_close(boosted, plain * att**2)
assert math.isclose(att, 0.1 * math.log(s) + 1, rel_tol=1e-12)
print(f"YaRN attention factor at s = {s:g}: 0.1 ln s + 1 = {att:.4f}; scores x{att**2:.4f}")

# %% [markdown] slideshow={"slide_type": "fragment"}
# Exercises 2 and 3 (at the end of the chapter) are on this section.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3 · Train short, test long
#
# The ALiBi paper (Press et al. 2022, Figure 1) trains language models on short inputs and
# evaluates their perplexity on longer ones; what it found comes after your prediction below. We measure the same kind of thing on
# a CPU with `pl.TinyDecoder` (2 layers, $d_{model}=64$, 4 heads of $d = 16$ features), whose positional method is
# one argument: `"none"`, `"learned"`, `"sinusoidal"`, `"rope"`, `"alibi"`, `"t5"`.
#
# **Predict first**, before the tasks and the table below: trained on 64 tokens, which of NoPE,
# sinusoids, T5, RoPE and ALiBi still get a local grammar (the next token set by the two before it)
# right at 512 tokens, and which can still look up a dictionary 500 tokens back? And does stretching
# RoPE's frequencies (PI, NTK, YaRN) help it on both kinds of task, on one, or on neither? Write your
# guesses down; the table answers them.
#
# A task decides a comparison by what it rewards, so there are three, each described with what
# it favours by construction:
#
# * **grammar (local).** A fixed table $T$ gives the next token for every pair of tokens,
#   $x_t = T[x_{t-2}, x_{t-1}]$ over 16 tokens, except that with probability 0.25 a token is
#   random. Only the current token and the one before it matter: a task made for a recency bias.
#
#   The best possible accuracy is $0.75 + 0.25/16 \approx 0.766$ on average.
# * **recall (long range, dictionary first).** A sequence opens with a small dictionary of 4
#   entries, each pairing one of 8 possible keys with one of 8 possible values (values may repeat). An
#   entry is one token meaning "key $k$ holds value $v$", so one content match finds the answer. Filler
#   tokens follow, then the 4 keys asked in a random order, each followed by its value. The model is
#   scored on the 4 values: perfect recall is 1, and guessing blind is 1/8.
#
#   The layout offers two shortcuts. First, the entry a question needs is $L-11$ to $L-2$ tokens
#   back, so the distance grows *in proportion to* $L$. A method that divides every distance by
#   $L/64$ (position interpolation) therefore brings every lookup back near the far end of the
#   training lookups, 53 to 62 (at 512 tokens onto 62.6 to 63.75).
#   Second, the dictionary always opens the sequence. Our reading (argued, not measured): there each entry's first-layer attention
#   averages over the dictionary alone (a causal average over a few tokens, like §1's counter), so
#   the entries reach the next layer unmixed with filler.
# * **recall_anywhere (long range, no fixed layout).** The same lookup, but the dictionary sits
#   at a uniformly random place before the questions, in training and in evaluation. In training a
#   lookup spans 1 to 62 tokens (the dictionary right before the questions can put the asked entry
#   one token back); at $L$ tokens it spans 1 to $L-2$. Neither shortcut above works here.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **The protocol.** Every method trains at length 64 on the same batches with the same budget: 400
# steps of AdamW on batches of 32 sequences, the learning rate rising over 50 warm-up steps to
# 0.003 and then decaying to a tenth of it (`ex.lr_factor`; asserted from the
# results file's config below). Each method trains for
# **three seeds** (the seed fixes the initialisation, the data and the grammar's table).
# Each model is evaluated at $L$ = 64, 128, 256, 512 tokens on 128 fresh sequences per length
# (512 recall answers per seed; $L - 2$ scored grammar tokens per sequence, from 7 936 per seed
# at 64 tokens to 65 280 at 512), in three ways:
# * **read at once** (`nonoverlapping` in the results file): the model reads all $L$ tokens in
#   one pass, so positions beyond 64 are new to it (extrapolation);
# * **sliding window**: a 64-token window moved 16 tokens at a time, each token scored once;
#   no position beyond 64 is ever used, and no token sees more than 63 tokens back;
# * **trained distances** (the recall tasks): the dictionary placed at $L - 64$, so that every
#   lookup spans 53 to 62 tokens, the distances of the dictionary-first training, but at
#   positions and lengths the model never saw. The move also takes the dictionary off the
#   sequence start. So a method read unscaled that fails with the dictionary first at $L$ and not
#   here fails *because of the distance*; one that does well at $L$ and fails here leaned on the
#   layout (the start, or positions it was trained at: the run does not separate them). Under a
#   scaling the control also moves the distances the model reads (PI's, below).
#
# | reading | holds fixed | changes |
# |---|---|---|
# | dictionary first, read at once | the training layout (dictionary at the start) | length, positions, lookup distances ($L-11$ to $L-2$) |
# | dictionary anywhere, read at once | no fixed layout, as in training | length, positions, lookup distances (up to $L-2$) |
# | trained distances | lookup distances (53 to 62) | length, positions; the dictionary leaves the start |
# | sliding window | every position and distance (under 64) | what a token sees: nothing 64 or more back |
# | key-blind floor | no model: the best recall of a reader that ignores the asked key (0.61, computed below) | what recall must exceed to show the key read |
#
# The RoPE model is also evaluated with PI, NTK and YaRN frequencies for $s = L/64$, with no
# retraining. The experiment also records where each head's attention goes.
#
# **The main line** runs: the table, then per task the result, its control and what it shows, the
# **Caveats**, the summary "What §3 found" and the index's map. Seven optional asides come after it.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **How to read the numbers.** Each entry is the mean over the three seeds, with the range
# from the worst to the best seed in brackets (the bars in the figure). With three seeds a
# standard deviation means little, so we use a blunt rule: method A beats method B only when
# *every* seed of A beats *every* seed of B (`ex.compare` returns 0 when the ranges overlap).
# Each such claim is an *ordering*.
# A win can rest on a few answers: when its *separation* (`ex.separation`, the worst seed of A minus
# the best seed of B in standard errors of the evaluation noise) is below 2, we call it **thin**. The
# formula, how often such wins pass by luck, and the wins thin if each sequence counts once: §3's
# optional section.

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Recall's key-blind floor.** Guessing blind scores 1/8, but a reader that ignores the asked key
# does better. It copies a value from the dictionary and skips the values already answered (each key
# is asked once, and earlier answers are in the input). Copying a random unanswered entry scores
# 0.58 on average, and guessing the commonest unanswered value scores 0.61 (copying without skipping:
# 0.34). No key-blind reader does better than that guess, since each unanswered entry is equally
# likely to be the one asked. A recall score at or below 0.61 therefore does not
# show that the model uses the key at all. The next cell computes these floors exactly, and checks
# them by running the key-blind reader on sequences from the task's own generator.

# %% slideshow={"slide_type": "fragment"}
# Recall's key-blind floor: exact, over every draw of the values not yet asked (ex.key_blind_floor, which the
# figure below draws too), then simulated on the generator
cfg_kb = ex.ExperimentConfig()
n_vals, n_entries = cfg_kb.values, cfg_kb.entries  # 8 values (they may repeat), 4 entries, each key asked once
floor_best, floor_skip, floor_copy = (ex.key_blind_floor(n_vals, n_entries, r) for r in ("best", "skip", "copy"))
assert (floor_best, floor_skip, floor_copy) == (Fraction(1243, 2048), Fraction(223, 384), Fraction(11, 32))
assert [round(float(f), 2) for f in (floor_best, floor_skip, floor_copy)] == [0.61, 0.58, 0.34]
voc_kb = ex.recall_vocab(cfg_kb)
for layout in (0, "random"):  # the dictionary first, or anywhere: the key-blind reader does not care
    tok_kb, asked_kb = ex.recall_sequences(4096, 64, cfg_kb, torch.Generator().manual_seed(0), start=layout)
    held = torch.nn.functional.one_hot((tok_kb[tok_kb < voc_kb["key"]] - voc_kb["entry"]) % n_vals, n_vals)
    unanswered = held.view(-1, n_entries, n_vals).sum(1)  # per sequence: how many entries hold each value
    answers = tok_kb[asked_kb].view(-1, n_entries) - voc_kb["value"]  # in the order asked
    hits = []
    for t in range(n_entries):
        hits.append(unanswered.argmax(-1) == answers[:, t])  # the commonest value not yet answered; the key unread
        unanswered = unanswered - torch.nn.functional.one_hot(answers[:, t], n_vals)  # skip the value just answered
    per_seq = torch.stack(hits, 1).double().mean(1)
    se_kb = per_seq.std().item() / math.sqrt(len(per_seq))
    assert (unanswered == 0).all() and abs(per_seq.mean().item() - float(floor_best)) < 3 * se_kb
print(f"recall's floors: guessing {1 / n_vals}, copying {float(floor_copy):.2f}, copying and skipping "
      f"{float(floor_skip):.2f}, the best key-blind reader {float(floor_best):.2f}")

# %% slideshow={"slide_type": "subslide"}
results = ex.load_results()  # results/extrapolation.json, found from any working directory
cfg = results["config"]
LENGTHS = [cfg["train_len"] * m for m in cfg["eval_multiples"]]
TASKS = list(results["tasks"])
assert LENGTHS == [64, 128, 256, 512] and len(cfg["seeds"]) == 3 and TASKS == ["grammar", "recall", "recall_anywhere"]
assert (cfg["train_len"], cfg["steps"], cfg["batch_size"], cfg["lr"], cfg["warmup"]) == (64, 400, 32, 0.003, 50)
assert math.isclose(ex.lr_factor(cfg["steps"], cfg["steps"], cfg["warmup"]), 0.1)  # decays to a tenth
assert (cfg["num_layers"], cfg["d_model"], cfg["num_heads"], cfg["d_model"] // cfg["num_heads"]) == (2, 64, 4, 16)
assert [ex.accuracy(results, "grammar", "rope", "nonoverlapping")[L]["n"] for L in LENGTHS] == [
    cfg["eval_sequences"] * (L - 2) for L in LENGTHS] == [7936, 16128, 32512, 65280]
assert {ex.accuracy(results, "recall", "rope", "nonoverlapping")[L]["n"] for L in LENGTHS} == {512}
assert results["cpu_time_s"] <= 20 * 60  # the course's budget for this run: 20 CPU-minutes
env = results["environment"]
print(f"the run took {results['cpu_time_s'] / 60:.1f} CPU-minutes on an {env['cpu']} (torch {env['torch']}, "
      f"{env['cpu_capability']} kernels); mean accuracy [worst seed, best seed]\n")


MODE_NAMES = {"nonoverlapping": "read at once", "sliding_window": "sliding window", "trained_distances": "trained distances"}


def show(task: str, mode: str, methods: list[str]) -> None:
    print(f"{task}, {MODE_NAMES[mode]}" + "".join(f"{L:>19}" for L in LENGTHS))
    for m in methods:
        row = ex.accuracy(results, task, m, mode)
        cells = ["n/a" if r is None else f"{r['mean']:.2f} [{r['min']:.2f}, {r['max']:.2f}]" for r in row.values()]
        print(f"  {ex.LABELS[m]:<19}" + "".join(f"{c:>19}" for c in cells))


BASE = list(cfg["methods"])
SCALED = ["rope"] + [f"rope+{s}" for s in cfg["scalings"]]
for task in TASKS:
    show(task, "nonoverlapping", BASE + SCALED[1:])
    print()

# %% slideshow={"slide_type": "subslide"}
fig = ex.draw(results)
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# **In brief** (each row is taken apart, and asserted, below). *Near keys*: those less than 64 tokens back (the
# trained distances); *far keys*: 64 or more back; *far − near logit*: a far key's mean logit minus a near key's.
#
# | Claim | Evidence | Control |
# |---|---|---|
# | Grammar: past 64 tokens RoPE falls as far keys lose the suppression near keys get, and are many | far − near logit above 0 in 23 of 24 heads at 512; a needed key still outscores a far one in the median head | NoPE's heads show dilution only; layer 1 (no positions below it) shows it too |
# | Grammar: ALiBi stays flat; no stretch of RoPE (PI, NTK, YaRN) gets near it at 512, even in range | accuracy, 64 to 512 tokens | a 64-token window gives RoPE ALiBi's flatness |
# | Recall, dictionary first: T5 (`max_distance` $= L_0 = 64$), NoPE and PI recall most at 512 | recall at 512 | at the trained distances plain RoPE recovers and PI falls: the layout decides |
# | Recall anywhere: PI and YaRN hold up, NoPE and T5 lose little; RoPE, NTK, ALiBi, sinusoids end under the key-blind floor | recall at 512 | the floor: what a key-blind reader gets |
# | No method keeps all three tasks at 512 (kept: a mean within 0.1 of the 64-token one; the index's rule, below) | means over 3 seeds | ALiBi keeps the grammar and T5 both lookups: no task is simply harder at 512 |
#
# * **Qualifications**: a recall at or below the key-blind floor (0.61) does not show
#   the key used; a *thin* win (separation below 2) carries no conclusion; T5's results hold for its
#   `max_distance` of 64, equal to $L_0$.

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### What the grammar shows
#
# > **Claim.** Past 64 tokens ALiBi keeps the grammar; RoPE and sinusoids lose it. **Number.** Every seed of
# > ALiBi stays within 0.04 of its 64-token accuracy up to 512, and beats every seed of RoPE and of sinusoids
# > there. **Control.** A 64-token sliding window gives RoPE ALiBi's flatness (below).
#
# Each sentence is asserted in the next cell.
#
# * **At 64 tokens** RoPE, sinusoids and ALiBi are within 0.06 of the best possible 0.766 for
#   every seed. NoPE (0.43) and learned positions (0.59) are far behind with the same budget.
# * **T5's seeds disagree wildly**, from 0.61 to 0.77, the only method whose seeds do (a spread of
#   0.16 at 64 tokens; the next widest, learned positions', is 0.08). Up to 256
#   tokens the seeds cannot place it against ALiBi; at 512 every seed of ALiBi beats every seed of T5,
#   by 0.03.
# * **Past 64 tokens**, ALiBi stays flat (every seed within 0.04 of its 64-token accuracy up
#   to 512), while sinusoids and RoPE fall with length, as in the ALiBi paper's Figure 1, where the
#   perplexity of sinusoidal and rotary models blows up past the training length and ALiBi's stays flat. At 512, every seed of ALiBi beats every
#   seed of RoPE and of sinusoids. Learned positions cannot run at all: their table has 64 rows.
# * **RoPE stretched at evaluation**: YaRN and NTK keep 128 tokens intact and slow the fall, but
#   at 512 neither gets near ALiBi.
# * Position interpolation alone did worse than doing nothing here, at every length past 64 and
#   for every seed: at 256 and 512 tokens by 0.07 and 0.05 on the means (0.48 against 0.41, 0.32
#   against 0.27), while the seed ranges sit under 0.02 apart.
#
# *Qualifications*: counted per sequence, ALiBi's 0.03 over T5 and PI's deficit to plain RoPE are thin.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# The asserts that check the grammar's claims above (collapsed: expand to read them)
acc = {t: {m: ex.accuracy(results, t, m) for m in BASE + SCALED[1:]} for t in TASKS}
slide = {t: {m: ex.accuracy(results, t, m, "sliding_window") for m in BASE} for t in TASKS}
moved = {t: {m: ex.accuracy(results, t, m, "trained_distances") for m in BASE + SCALED[1:]} for t in TASKS[1:]}
G, R, A = acc["grammar"], acc["recall"], acc["recall_anywhere"]
best = results["tasks"]["grammar"]["best_acc"]
assert (cfg["noise"], cfg["vocab_size"]) == (0.25, 16)  # the best possible: 0.75 + 0.25/16 ≈ 0.766
assert best == round(1 - cfg["noise"] + cfg["noise"] / cfg["vocab_size"], 4) and round(best, 3) == 0.766
ORDERINGS = []  # every "every seed of a beats every seed of b" this chapter asserts, counted at the end


def beats(t, a, b, L, mode="nonoverlapping"):
    ORDERINGS.append((t, a, b, L, mode))
    return ex.compare(results, t, a, b, L, mode) == 1


ties = lambda t, a, b, L: ex.compare(results, t, a, b, L) == 0  # noqa: E731  the seed ranges overlap
# grammar, at 64 tokens
assert all(G[m][64]["min"] > best - 0.06 for m in ("rope", "sinusoidal", "alibi"))
se_best = math.sqrt(best * (1 - best) / G["rope"][64]["n"])  # the rule's own scatter on 7 936 tokens: about 0.005
assert round(se_best, 3) == 0.005 and all(G[m][64]["max"] < best + 2 * se_best for m in BASE)  # above: noise only
assert G["none"][64]["max"] < 0.45 and G["learned"][64]["max"] < 0.65
assert [round(G[m][64]["mean"], 2) for m in ("none", "learned")] == [0.43, 0.59]  # the means quoted
last_loss = {m: [sd["methods"][m]["train_loss_curve"][-1] for sd in results["tasks"]["grammar"]["seeds"]]
             for m in ("none", "rope")}
assert cfg["steps"] == 400 and [(round(min(v), 2), round(max(v), 2)) for v in last_loss.values()] == [
    (1.88, 2.0), (1.14, 1.24)]  # NoPE's budget: the same 400 steps, a loss still far above RoPE's
assert G["t5"][64]["max"] - G["t5"][64]["min"] > 0.15 and all(ties("grammar", "t5", "alibi", L) for L in LENGTHS[:3])
spread64 = sorted((G[m][64]["max"] - G[m][64]["min"], m) for m in BASE + SCALED[1:])  # seed spread at 64 tokens
assert [(m, round(x, 2)) for x, m in spread64[-2:]] == [("learned", 0.08), ("t5", 0.16)]  # T5 alone is wide
assert all(a > b for L, L2 in zip(LENGTHS, LENGTHS[1:]) for a, b in zip(G["t5"][L]["acc"], G["t5"][L2]["acc"]))
assert beats("grammar", "alibi", "t5", 512)
# grammar, past 64 tokens
assert all(abs(s - a) < 0.04 for L in LENGTHS for s, a in zip(G["alibi"][L]["acc"], G["alibi"][64]["acc"]))
for m in ("rope", "sinusoidal", "none"):
    assert G[m][64]["mean"] > G[m][128]["mean"] > G[m][256]["mean"] > G[m][512]["mean"]
    assert beats("grammar", "alibi", m, 512)
assert all(G["learned"][L] is None for L in LENGTHS[1:])
# grammar, RoPE stretched
assert all(G[m][128]["min"] > best - 0.02 for m in ("rope+ntk", "rope+yarn"))
assert all(beats("grammar", m, "rope", L) for m in ("rope+ntk", "rope+yarn") for L in (256, 512))
assert all(beats("grammar", "alibi", m, 512) for m in ("rope+ntk", "rope+yarn"))
assert all(beats("grammar", "rope", "rope+linear", L) for L in LENGTHS[1:])
margins = [G["rope"][L]["min"] - G["rope+linear"][L]["max"] for L in LENGTHS[1:]]
assert round(margins[0], 2) == 0.08 and all(0 < g < 0.02 for g in margins[1:])  # the seed ranges' gap
assert [round(G[m][L]["mean"], 2) for L in (256, 512) for m in ("rope", "rope+linear")] == [0.48, 0.41, 0.32, 0.27]
assert [round(G["rope"][L]["mean"] - G["rope+linear"][L]["mean"], 2) for L in (256, 512)] == [0.07, 0.05]
assert round(G["alibi"][512]["min"] - G["t5"][512]["max"], 2) == 0.03
per_seq = lambda t, a, b, L: ex.separation_of(  # noqa: E731  each sequence counted once
    ex.accuracy(results, t, a)[L]["min"], ex.accuracy(results, t, b)[L]["max"], cfg["eval_sequences"])
assert per_seq("grammar", "alibi", "t5", 512) < 2 and all(per_seq("grammar", "rope", "rope+linear", L) < 2 for L in LENGTHS[1:])
assert beats("grammar", "rope+yarn", "rope+ntk", 512) and ex.separation(results, "grammar", "rope+yarn", "rope+ntk", 512) < 2
print("the grammar's claims hold")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Why RoPE fails at a task that needs one step back
#
# The grammar needs the current token and the previous one, offsets that every training
# sequence showed thousands of times. Why should RoPE lose it at 512 tokens? §2 gives the
# mechanism: a key more than 64 tokens back sits at a combination of angles no training distance
# produced (4 or 5 of its 8 pairs more than one step from every trained angle; 64 back, none), so its score against a query is whatever the head's weights happen to give there; §2's
# constructed head scored up to 28 times its trained range. If that is what happens here, the
# far keys should take the attention away from the two near ones, and they should do it by
# their scores, not merely by being many.
#
# The experiment records four numbers for each layer and head, at the last 16 positions of the
# first 16 of the 128 test sequences:
# * "needed": the attention mass on the two keys the rule reads (the query's own token and the one
#   before it);
# * "far": the mass on keys 64 or more back;
# * "near": the mass left for the other keys within the trained distances (the rest);
# * "far − near logit": the mean logit of a far key minus that of those near keys.
#
# From the masses follows one more: "needed − far, per key", the log of a needed key's mass over an average far key's.
#
# The reference is the same RoPE models read with position interpolation, which keeps every angle
# in range (§2). NoPE is a weaker one for plain **softmax dilution** (§1: not position-blind, so
# this is measured, not assumed): a far key scores like a near one (far − near logit within 0.15 of
# 0), and the far mass is the far keys' share of the keys a query sees (about 0.87 at 512 tokens for
# the last 16 positions). But its heads are near-uniform already at 64 tokens (it learned the rule
# only partly): the two needed keys get 0.05 of the attention in the median head, where equal scores
# would give them 0.036.

# %% slideshow={"slide_type": "fragment"}
def heads(m, L, key):
    """every (seed, layer, head) value of one attention measurement on the grammar, flattened."""
    return torch.tensor(ex.attention_heads(results, "grammar", m, L, key)).flatten()


q_last = torch.arange(512 - cfg["window_stride"], 512, dtype=torch.float64)  # the measured queries at 512
th_g = pl.rope_frequencies(cfg["d_model"] // cfg["num_heads"], dtype=torch.float64)  # these models' head, d = 16
off = (torch.arange(64, 512, dtype=torch.float64)[:, None, None] - torch.arange(64, dtype=torch.float64)[:, None]) * th_g
steps_off = ((off + math.pi).remainder(2 * math.pi) - math.pi).abs().amin(1) / th_g  # (r, pair), in steps θ_j
unseen_pairs = (steps_off > 1 + 1e-9).sum(-1)  # §2's one-step test, per key distance 64 .. 511
assert unseen_pairs[0] == 0 and set(unseen_pairs[1:].tolist()) == {4, 5}  # 64 back: none; 65 on: 4 or 5 of 8
uniform64 = (2 / torch.arange(64 - cfg["window_stride"] + 1, 65, dtype=torch.float64)).mean().item()  # 2 of q + 1 keys
assert round(uniform64, 3) == 0.036 and round(heads("none", 64, "mass").median().item(), 2) == 0.05
assert heads("none", 64, "mass").max() < 0.12  # NoPE's heads: near-uniform even where it was trained
far_share = ((q_last - 63) / (q_last + 1)).mean().item()  # keys 64+ back among the q + 1 a query sees
print(f"{'grammar, per head (3 seeds x 2 layers x 4 heads)':<44}{'needed, 64':>11}{'needed, 512':>12}"
      f"{'far, 512':>10}{'near, 512':>10}{'far − near logit':>18}")
for m in ("none", "rope", "rope+linear", "rope+yarn"):
    far_near = heads(m, 512, "far_gap")  # the far − near logit ("far_gap" in the results file)
    near = 1 - heads(m, 512, "mass") - heads(m, 512, "far")
    print(f"  {ex.LABELS[m]:<42}{heads(m, 64, 'mass').median():>11.2f}{heads(m, 512, 'mass').median():>12.2f}"
          f"{heads(m, 512, 'far').median():>10.2f}{near.median():>10.2f}{far_near.min():>9.2f} to {far_near.max():.2f}")
print(f"(medians over the 24 heads; the far share of keys is {far_share:.3f})")
n_far_q = (q_last - 63).mean().item()  # far keys per measured query at 512: 440.5 on average
assert n_far_q == 440.5  # "some 440 far keys face 2 needed ones"


def needed_over_far(m):
    """Each head's log of a needed key's mass over an average far key's, at 512 tokens."""
    return (heads(m, 512, "mass") / 2).log() - (heads(m, 512, "far") / n_far_q).log()


nf_rope = needed_over_far("rope")
print(f"RoPE at 512, needed − far per key: median {nf_rope.median():.1f}, {nf_rope.min():.1f} to {nf_rope.max():.1f}")
assert [round(x, 1) for x in (nf_rope.median().item(), nf_rope.min().item(), nf_rope.max().item())] == [2.0, -2.7, 3.6]
assert int((nf_rope > 0).sum()) == 21 and round(heads("rope", 512, "far_gap").median().item(), 1) == 1.5


def lost_to_far(m):
    """Of the mass the needed keys lose from 64 to 512 tokens (summed over the heads), the share the far keys gain."""
    lost = heads(m, 64, "mass") - heads(m, 512, "mass")
    return ((heads(m, 512, "far") - heads(m, 64, "far")).sum() / lost.sum()).item()


print("share of the needed keys' lost mass that goes to far keys:",
      {ex.LABELS[m]: round(lost_to_far(m), 2) for m in ("rope+yarn", "rope+linear")})
rope_far_near, nope_far_near = heads("rope", 512, "far_gap"), heads("none", 512, "far_gap")  # far − near logits
assert (heads("rope", 64, "mass") >= 0.6).all() and (heads("rope", 512, "mass") <= 0.15).all()  # needed keys lost
assert (heads("rope", 512, "far") >= 0.84).all() and int((rope_far_near > 0).sum()) == 23  # far keys outscore near ones
assert rope_far_near.numel() == 24  # "in 23 of 24 heads" (3 seeds x 2 layers x 4 heads)
assert round(rope_far_near.max().item(), 1) == 4.2  # "far − near logit up to 4.2"
assert ((heads("none", 512, "far") - far_share).abs() < 0.04).all() and nope_far_near.abs().max() < 0.15  # dilution only
assert (heads("rope+linear", 512, "far") <= 0.25).all() and (heads("rope+linear", 512, "far_gap") < -3).all()
assert (heads("rope+linear", 512, "mass") <= 0.3).all()  # in range, yet the needed keys lose
assert round(heads("rope+yarn", 512, "far_gap").max().item(), 2) == -2.88  # YaRN, in range: far keys below near ones
assert [round(heads("rope+yarn", L, "mass").median().item(), 2) for L in (64, 512)] == [0.84, 0.37]
assert [round(G["rope+yarn"][L]["mean"], 2) for L in (64, 512)] == [0.77, 0.57]
near512 = {m: (1 - heads(m, 512, "mass") - heads(m, 512, "far")).median().item() for m in ("rope+yarn", "rope+linear")}
near64 = (1 - heads("rope", 64, "mass") - heads("rope", 64, "far")).median().item()  # every RoPE variant at 64
assert [round(heads(m, 512, "far").median().item(), 2) for m in ("rope+yarn", "rope+linear")] == [0.36, 0.08]
assert [round(lost_to_far(m), 2) for m in ("rope+yarn", "rope+linear")] == [0.99, 0.13]
assert round(near512["rope+yarn"], 2) == round(near64, 2) == 0.16 and round(near512["rope+linear"], 2) == 0.74
pi8 = pl.scaled_rope_frequencies(16, method="linear", factor=8.0, original_max_position=64, seq_len=512,
                                 dtype=torch.float64)[0]  # PI at s = 8 reads distance r as r / 8:
torch.testing.assert_close(1 * pi8, pl.rope_frequencies(16, dtype=torch.float64) / 8)  # 1 back: 0.125 ...
torch.testing.assert_close(8 * pi8, pl.rope_frequencies(16, dtype=torch.float64))  # ... 8 back: the trained 1
layer1 = torch.tensor(ex.attention_heads(results, "grammar", "rope", 512, "far_gap"))[:, 0]  # [seed][layer][head]
print(f"RoPE at 512, layer 1 alone: far − near logit {layer1.min():.2f} to {layer1.max():.2f} in its {layer1.numel()} heads")
assert layer1.numel() == 12 and (layer1 > 0).all() and [round(x.item(), 2) for x in layer1.aminmax()] == [0.98, 3.77]
x_tok = torch.ones(1, 5, cfg["d_model"])  # any token embeddings
assert ex.build_model("rope", ex.ExperimentConfig(), task="grammar").positional.embed(x_tok) is x_tok  # nothing added
yarn8 = pl.scaled_rope_frequencies(16, method="yarn", factor=8.0, original_max_position=64, dtype=torch.float64)[0]
assert [round(x, 3) for x in (yarn8 / pl.rope_frequencies(16, dtype=torch.float64)).tolist()] == [
    1.0, 0.708, 0.417] + [0.125] * 5  # YaRN at s = 8: pair 0 kept, pairs 1 and 2 slowed partly, 3 to 7 as PI (x 1/8)

# %% [markdown] slideshow={"slide_type": "fragment"}
# All of it holds (the asserts above). Trained at 64 tokens, every RoPE head puts 0.6 or more
# of its attention on the two keys the rule reads; at 512, 0.15 or less, and far keys take most of the rest.
#
# Those far keys do not win by number alone. *Count alone*, the needed mass a head would keep at 512
# tokens if every far key scored like a near one, is 0.36 in the median head; RoPE's needed keys keep
# 0.03, under half of it in every head (next cell).

# %% slideshow={"slide_type": "fragment"}
# Count alone: each head's needed mass at 512 tokens if every near and far key there scored like a near key at 64
n_near64 = (torch.arange(64 - cfg["window_stride"], 64) - 1).double().mean().item()  # q - 1 near keys at 64: 54.5
n_far = (q_last - 63).mean().item()  # far keys per measured query at 512 (64 or more back): 433 to 448, 440.5
n_near = 64 - 2  # near keys at 512: 0 .. 63 back, less the two needed ones


def near_key64(m):
    """Each head's mass on one near key at 64 tokens."""
    return (1 - heads(m, 64, "mass") - heads(m, 64, "far")) / n_near64


count_only = {m: heads(m, 64, "mass") / (heads(m, 64, "mass") + near_key64(m) * (n_near + n_far))
              for m in ("none", "rope", "rope+yarn")}  # count alone, per head
print(f"median head: count alone {count_only['rope'].median():.2f}, RoPE at 512 {heads('rope', 512, 'mass').median():.2f}")
assert round(count_only["rope"].median().item(), 2) == 0.36 and round(heads("rope", 512, "mass").median().item(), 2) == 0.03
assert (heads("rope", 512, "mass") < 0.5 * count_only["rope"]).all()  # far keys win by their scores, not their count

# %% [markdown] slideshow={"slide_type": "fragment"}
# In all but one head the far keys' mean logit is *above* the near keys' (by 1.5 in the median head).
# Training taught the heads to hold near keys down; far keys escape that. They do not outscore the keys
# the rule needs: a needed key still gets about $e^{2.0}$ times an average far key's mass in the median head
# (−2.7 to 3.6 over the heads, above 0 in 21 of 24), but some 440 far keys face 2 needed ones. §2 showed
# that unseen angles can raise a score; what is measured here is lost suppression.
# Nor is that layer 2 reading layer-1 outputs that far keys already corrupted: layer 1, which reads
# the token embeddings with no position added, shows it in every one of its heads.
#
# The two references agree. The same models with PI's frequencies keep far keys below near ones
# (far − near logit below −3 in every head), and NoPE's near-uniform heads show plain dilution. So
# when RoPE loses a local task past $L_0$, its far keys are not held down as trained near keys are. Why, the run does not
# separate: a far key is both at angles and at an offset training never showed, and the PI reference
# does not hold the offsets while it moves the angles (it changes the near keys' angles too).
#
# **Control: the sliding window.** Hiding every key 64 or more back brings RoPE back within 0.04 of
# its 64-token accuracy (the figure's "grammar: sliding window of 64" panel; asserted below). That
# shows the far keys cost the accuracy; the logits above show why they win. Both halves are known:
# LM-Infinite (Han et al., 2023) names far keys scoring too high as a cause and, like StreamingLLM
# (Xiao et al., 2023), keeps such a window with the first tokens.
#
# **The two scalings that keep every angle in range fail too.** PI keeps far keys well below near
# ones (far − near logit below −3), and the needed keys' mass goes to the *near* keys (their share
# rises from 0.16 to 0.74). YaRN's near keys keep their 0.16, and its far keys score below them on
# average in every head (−2.88 or lower), yet take 99 % of what the needed keys lose (0.84 → 0.37);
# its grammar falls from 0.77 to 0.57. So keeping each pair's angles in range is not enough for a local task
# without fine-tuning (YaRN's paper fine-tunes after scaling too). Nor does YaRN leave the near keys as trained:
# it slows pairs 1 to 7, so the offsets 1 to 63 come back at angle *combinations* training never showed
# (`pl.rope_combination_gap`, the largest angle difference over the pairs from the nearest trained offset's:
# 0.59 rad on average, against 0 unscaled; next cell). Which of the two, far keys or moved near ones, costs the
# grammar, the run does not separate.
#
# YaRN's attention factor (logits ×1.46 at $s = 8$) is not the cause: without it no seed scores better
# at 512 tokens (next cell).

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# YaRN's near offsets and its attention factor, checked (collapsed: expand to read it)
yarn_512 = [sd["methods"]["rope+yarn"]["nonoverlapping"]["512"] for sd in results["tasks"]["grammar"]["seeds"]]
assert [(round(y["acc_factor_1"], 3), round(y["acc"], 3)) for y in yarn_512] == [
    (0.571, 0.587), (0.571, 0.588), (0.534, 0.537)]  # without the factor no better: it is not the cause
assert round((0.1 * math.log(8) + 1) ** 2, 2) == 1.46  # the factor scales q and k, so the logits by its square
near_r, th16 = torch.arange(1, 64, dtype=torch.float64), pl.rope_frequencies(16, dtype=torch.float64)
near_gap = {k: pl.rope_combination_gap(th16, (1, 63), near_r, inv_freq=f) for k, f in (("none", th16), ("yarn", yarn8))}
assert near_gap["none"].max().item() < 1e-9 and (near_gap["yarn"] > 0.05).all()  # YaRN moves every near offset
assert round(near_gap["yarn"].mean().item(), 2) == 0.59  # "0.59 rad on average", at s = 8 (512 tokens)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Recall, dictionary first: what the layout decides
#
# > **Claim.** Here the layout, not keeping angles in range, decides who recalls. **Number.** With the dictionary
# > at the trained distances plain RoPE recalls 0.74 at 512 (0.17 with it first) and PI 0.21. **Control.** With the
# > dictionary anywhere PI still beats plain RoPE with every seed (next subsection).
#
# Read at once, the dictionary-first task repeats the old headline:
# * NoPE recalls at least 0.93 with every seed at 512, second only to T5 there (thin).
# * RoPE falls fastest of the five trained methods that run past 64 tokens: the largest drop from
#   64 tokens at every longer length (learned positions cannot run there).
# * ALiBi loses the lookup past 128 tokens (chapter 6 §4 asks how much of that fall its penalty
#   causes, and finds it mixed with the layout).
# * Position interpolation rescues RoPE: every seed of RoPE + PI beats every seed of plain RoPE at
#   128, 256 and 512. PI also beats NTK and YaRN at 128 and 512.
# * Plain RoPE beats RoPE + NTK with every seed at 128 and 256 tokens (0.73 against 0.54; 0.55
#   against 0.29).
#
# The tempting explanation, "PI keeps every angle in range", is wrong on two counts, and the control
# tells what the task rewards instead:
#
# * **YaRN is in range too**, yet its grammar falls from 0.77 at 64 tokens to 0.57 at 512 (above). On
#   this recall it dips to 0.69 at 128 tokens and recovers to 0.97 at 256, level with PI (the dip is
#   not explained here; an optional aside after the summary looks at it). At 128 tokens ($s = 2$) too, each
#   pair has turned in training or is slowed enough to meet no unseen angle: 0 of 8 pairs, like PI.
# * **Move the dictionary to the trained distances** (at $L - 64$: every lookup spans 53 to 62
#   tokens, as in training), and the ranking turns over. Plain RoPE recalls 0.74 at 512 tokens
#   (0.17 with the dictionary first): most of its failure is the *distance* (unseen angles and unseen
#   offsets together: the control moves both). RoPE + PI drops to 0.21 (with the dictionary first it
#   recalls 1.00 at 128 tokens, where it maps the lookups near 53–62): at 512 PI reads these distances
#   as about 7, which this model never used for a lookup.
#
#   NoPE drops from 0.94 to 0.69 and T5 from 0.99 to 0.74: part of their near-perfect recall came with
#   the dictionary-first layout (which part, the run does not separate).
#
# With the dictionary first, the layout decided PI's near-perfect score and its lead over NTK and
# YaRN, not the rescue itself: with the dictionary anywhere PI still beats plain RoPE with every
# seed (next). With the dictionary first, PI maps the lookups, which grow in proportion to $L$, near the
# far end of the training lookups (53–62), and at 512 partly past the last distance training showed at all
# (63; the arithmetic in the collapsed cell).
#
# So the dictionary-first task rewards, by construction, the two shortcuts named with the tasks:
# lookups mapped back near 53–62, and the first tokens read easily. The task with the dictionary
# anywhere has neither (next).
#
# *Qualifications*: RoPE's lead over NTK is thin (separation 1.5 at 128; at 256 thin per sequence), and at 256
# both are below the key-blind floor 0.61, so neither is shown to read the key.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# The recall tables, then the asserts that check the claims above (collapsed: expand to read them)
for mode in ("nonoverlapping", "trained_distances"):
    show("recall", mode, ["none", "rope", "rope+linear", "rope+ntk", "rope+yarn", "alibi", "t5"])
    print()
M = moved["recall"]
t5_none = (ex.accuracy(results, "recall", "t5", "nonoverlapping")[512]["min"]
           - ex.accuracy(results, "recall", "none", "nonoverlapping")[512]["max"])
assert round(t5_none * 512) == 7 and round(ex.separation(results, "recall", "t5", "none", 512), 1) == 1.3  # thin
# read at once
assert R["none"][512]["min"] >= 0.93 and all(R["none"][L]["min"] > 0.99 for L in LENGTHS[:3])
assert R["alibi"][256]["mean"] < R["alibi"][128]["mean"] - 0.2 and beats("recall", "none", "alibi", 512)
assert all(beats("recall", "rope+linear", "rope", L) for L in LENGTHS[1:])
assert all(R["rope"][L]["mean"] == min(R[m][L]["mean"] for m in BASE if R[m][L]) for L in LENGTHS[1:])
assert all(beats("recall", "rope", "rope+ntk", L) for L in (128, 256))  # NTK: worse than no scaling
assert [round(R[m][L]["mean"], 2) for L in (128, 256) for m in ("rope", "rope+ntk")] == [0.73, 0.54, 0.55, 0.29]
assert round(ex.separation(results, "recall", "rope", "rope+ntk", 128), 1) == 1.5  # thin
assert ex.separation_of(R["rope"][256]["min"], R["rope+ntk"][256]["max"], cfg["eval_sequences"]) < 2  # per sequence
assert R["rope"][128]["mean"] > floor_best > max(R["rope"][256]["mean"], R["rope+ntk"][128]["mean"],
                                                 R["rope+ntk"][256]["mean"])  # the key-blind floor, 0.61
drop = lambda t, m, L: acc[t][m][64]["mean"] - acc[t][m][L]["mean"]  # noqa: E731
assert drop("recall", "alibi", 512) > 0.1 and drop("recall_anywhere", "alibi", 512) > 0.1  # ALiBi falls on both
assert all(drop("recall", "rope", L) == max(drop("recall", m, L) for m in BASE if R[m][L]) for L in LENGTHS[1:])
assert R["none"][512]["min"] > max(R[m][512]["max"] for m in ("sinusoidal", "rope", "alibi"))  # second only to T5
assert all(beats("recall", "rope+linear", m, L) for m in ("rope+ntk", "rope+yarn") for L in (128, 512))
assert ties("recall", "rope+linear", "rope+yarn", 256) and R["rope+yarn"][128]["max"] < 0.75
assert round(R["rope+yarn"][128]["mean"], 2) == 0.69  # YaRN, every pair in range, at 128 tokens ...
assert [round(R[m][256]["mean"], 2) for m in ("rope+yarn", "rope+linear")] == [0.97, 0.97]  # ... 256: level with PI
assert round(R["rope+yarn"][128]["mean"] - float(floor_best), 2) == 0.08  # above the key-blind floor by 0.08
# the control: the dictionary at L - 64
assert round(M["rope"][512]["mean"], 2) == 0.74 and M["rope"][512]["min"] > R["rope"][512]["max"]
assert round(M["rope+linear"][512]["mean"], 2) == 0.21 and M["rope+linear"][512]["max"] < R["rope+linear"][512]["min"]
assert R["rope+linear"][128]["min"] == 1.0  # PI with the dictionary first at 128: every seed 1.00
assert all(beats("recall", "rope", "rope+linear", L, "trained_distances") for L in LENGTHS[1:])  # order turned over
assert [round(M[m][512]["mean"], 2) for m in ("t5", "none")] == [0.74, 0.69]  # trained distances: both fall ...
assert [round(R[m][512]["mean"], 2) for m in ("t5", "none")] == [0.99, 0.94]  # ... from the dictionary first
assert all(M[m][512]["max"] < R[m][512]["min"] for m in ("t5", "none"))  # every seed falls
assert (cfg["entries"], cfg["keys"], cfg["values"]) == (4, 8, 8)
assert ex.compare(results, "recall_anywhere", "rope+linear", "rope", 512) == 1  # anywhere: PI above RoPE, every seed
# where PI puts the dictionary-first lookups L - 11 .. L - 2: divided by s = L / 64, at 64 - 704/L .. 64 - 128/L
pi_lookups = {L: ((L - 11) / (L / 64), (L - 2) / (L / 64)) for L in LENGTHS[1:]}
print("PI's lookups, as trained distances:", pi_lookups, "(training: 53 to 62; attention at most 63)")
assert pi_lookups == {128: (58.5, 63.0), 256: (61.25, 63.5), 512: (62.625, 63.75)}
assert 6.5 < 53 / 8 < 62 / 8 < 8  # the control at 512: PI reads the trained distances 53 .. 62 as about 7
assert all(lo > 53 and hi > 62 for lo, hi in pi_lookups.values()) and pi_lookups[512][1] > 63
print("the dictionary-first claims hold")

# %% slideshow={"slide_type": "fragment"}
# The experiment's head: d = 16, trained on L0 = 64; which pairs meet unseen angles at L = s * 64?
theta16 = pl.rope_frequencies(cfg["d_model"] // cfg["num_heads"], dtype=torch.float64)
unseen = {}
for s_ in (2, 4, 8):
    freq = {"rope": (theta16, 1.0)}
    freq.update({m: pl.scaled_rope_frequencies(16, method=m, factor=float(s_), original_max_position=64,
                                               seq_len=64 * s_, dtype=torch.float64) for m in ("linear", "ntk", "yarn")})
    unseen[s_] = {m: int((pl.rope_angle_novelty(theta16, 64, 64 * s_, inv_freq=f) > theta16).sum())
                  for m, (f, _) in freq.items()}
    unseen[s_]["yarn factor"] = round(freq["yarn"][1], 2)
print("pairs (of 8) at unseen angles:", unseen)
assert all(u == {"rope": 5, "linear": 0, "ntk": 4, "yarn": 0, "yarn factor": u["yarn factor"]} for u in unseen.values())
assert unseen[2]["yarn factor"] == 1.07
yarn2 = pl.scaled_rope_frequencies(16, method="yarn", factor=2.0, original_max_position=64, dtype=torch.float64)[0]
turns16 = 64 * theta16 / (2 * math.pi)
# In this d = 16 head no pair turns 32 times over 64 tokens (pair 0 turns 10 times), so the code's ramp runs from
# pair 0, which it keeps (the paper's would not, §2), to pair 3: at s = 2 pair 1 x 0.83, pair 2 x 0.67, pairs 3-7 / s.
print("YaRN at s = 2, per pair:", [round(x, 2) for x in (yarn2 / theta16).tolist()],
      f"(pair 0 turns {turns16[0]:.1f} times over 64 tokens)")
assert round(turns16[0].item(), 1) == 10.2 and (turns16 < 32).all()  # no pair turns 32 times
assert [round(x, 2) for x in (yarn2 / theta16).tolist()] == [1.0, 0.83, 0.67] + [0.5] * 5
ramp = ((turns16 - 1) / 31).clamp(0, 1)  # the paper's ramp: linear in the turns, from 1 (beta_slow) to 32 (beta_fast)
for s_, want in ((2, [[0.648, 0.536], [1.0, 0.833]]), (8, [[0.384, 0.188], [1.0, 0.708]])):  # pairs 0, 1: paper, code
    code = pl.scaled_rope_frequencies(16, method="yarn", factor=float(s_), original_max_position=64, dtype=torch.float64)
    assert [[round(x, 3) for x in v[:2].tolist()] for v in (ramp + (1 - ramp) / s_, code[0] / theta16)] == want

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Recall with the dictionary anywhere
#
# > **Claim.** With no layout to lean on, PI and YaRN hold up and plain RoPE falls. **Number.** At 512 YaRN
# > recalls 0.92, PI 0.82, RoPE 0.32; every seed of YaRN and of PI beats every seed of RoPE. **Control.** With the
# > dictionary at the trained distances RoPE recalls 0.81 at 512: mostly the distance.
#
# Here a lookup in training spans anything from 1 to 62 tokens, and nothing about the layout
# tells the model where the dictionary is. Three seeds at 400 steps learn it less well than
# the first task (at 64 tokens NoPE's seeds range from 0.75 to 0.99), so each method is
# compared with its own 64-token accuracy as well as with the others:
#
# * **RoPE still falls** (0.93 at 64, 0.32 at 512), and the control says mostly why: with the
#   dictionary at $L - 64$ it recalls 0.81 at 512, winning back 0.49 of the 0.60 it lost (81 %,
#   from the unrounded means). It is mostly the distance; the rest is lost at the trained
#   distances too.
# * **Stretching RoPE now holds up, for PI and YaRN.** YaRN keeps RoPE's 64-token accuracy at every
#   length (within 0.02 on average: 0.92 at 512), partly through its attention factor (0.83 at 512
#   without it, below). PI nearly does (0.82). NTK, which leaves 4 pairs at unseen angles, does not
#   (0.57). At 512 every seed of YaRN and of PI beats every seed of plain RoPE and of NTK.
# * **PI against YaRN**: the seeds cannot tell them apart at 512. That differs from the
#   dictionary-first ranking, where PI beat YaRN at 128 and 512 mostly by the layout.
# * **NoPE loses little** (0.87 to 0.80 on average) and T5 nothing (0.95 at 64 and at 512); the
#   seeds cannot separate the two at 512. ALiBi and sinusoids fall (0.53 and 0.50 at 512). On both
#   recall tasks NoPE loses less from 64 to 512 tokens (0.06 and 0.08) than sinusoids, RoPE and ALiBi
#   (0.29 or more), and more than T5, seed by seed.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# The recall_anywhere tables, then the asserts that check the claims above (collapsed: expand to read them)
for mode in ("nonoverlapping", "trained_distances"):
    show("recall_anywhere", mode, ["none", "rope", "rope+linear", "rope+ntk", "rope+yarn", "alibi", "t5", "sinusoidal"])
    print()
MA = moved["recall_anywhere"]
assert A["none"][64]["min"] < 0.76 and A["none"][64]["max"] > 0.99  # seeds learn it unevenly
assert (round(A["rope"][64]["mean"], 2), round(A["rope"][512]["mean"], 2), round(MA["rope"][512]["mean"], 2)) == (
    0.93, 0.32, 0.81)
assert MA["rope"][512]["min"] > A["rope"][512]["max"]  # the distance, again ...
assert round(MA["rope+ntk"][512]["mean"], 2) == 0.88 and MA["rope+ntk"][512]["min"] > A["rope+ntk"][512]["max"]  # NTK too
lost, won = A["rope"][64]["mean"] - A["rope"][512]["mean"], MA["rope"][512]["mean"] - A["rope"][512]["mean"]
assert (round(won, 2), round(lost, 2), round(won / lost, 2)) == (0.49, 0.60, 0.81)  # ... mostly: 81 % of the loss
assert all(abs(A["rope+yarn"][L]["mean"] - A["rope"][64]["mean"]) < 0.02 for L in LENGTHS)
assert [round(A[m][512]["mean"], 2) for m in ("rope+yarn", "rope+linear", "rope+ntk")] == [0.92, 0.82, 0.57]
assert all(beats("recall_anywhere", a, b, 512) for a in ("rope+yarn", "rope+linear") for b in ("rope", "rope+ntk"))
assert ties("recall_anywhere", "rope+yarn", "rope+linear", 512)  # dictionary first: PI beat YaRN at 128 and 512
no_factor = {t: [sd["methods"]["rope+yarn"]["nonoverlapping"]["512"]["acc_factor_1"]
                 for sd in results["tasks"][t]["seeds"]] for t in ("recall", "recall_anywhere")}
assert [round(sum(v) / 3, 2) for v in no_factor.values()] == [0.43, 0.83]  # YaRN without its factor, at 512
assert [round(R["rope+yarn"][512]["mean"], 2), round(A["rope+yarn"][512]["mean"], 2)] == [0.60, 0.92]
assert abs(R["rope+yarn"][512]["mean"] - floor_best) < 0.01  # dictionary first, 512: at the key-blind floor
assert max(A[m][512]["mean"] for m in ("rope", "rope+ntk", "alibi", "sinusoidal")) < floor_best  # anywhere: under it
assert max(no_factor["recall_anywhere"]) - A["rope+linear"][512]["max"] < 0.02 and abs(
    sum(no_factor["recall_anywhere"]) / 3 - A["rope+linear"][512]["mean"]) < 0.02  # level with PI
assert max(A["rope+yarn"][L]["mean"] for L in LENGTHS[1:]) - min(A["rope+yarn"][L]["mean"] for L in LENGTHS[1:]) < 0.02
assert [round(A[m][L]["mean"], 2) for m in ("none", "t5") for L in (64, 512)] == [0.87, 0.80, 0.95, 0.95]
assert ties("recall_anywhere", "t5", "none", 512) and beats("recall_anywhere", "none", "alibi", 512)
assert [round(A[m][512]["mean"], 2) for m in ("alibi", "sinusoidal")] == [0.53, 0.50]
sin_rope_alibi = ("sinusoidal", "rope", "alibi")  # NoPE against these three (T5, explicit too, loses less): 64 to 512
assert min(R["none"][64]["mean"], A["none"][64]["mean"]) >= 0.87
assert [round(drop(t, "none", 512), 2) for t in TASKS[1:]] == [0.06, 0.08]
assert all(min(drop(t, m, 512) for m in sin_rope_alibi) >= 0.29 > drop(t, "none", 512) > drop(t, "t5", 512) for t in TASKS[1:])
seed_drops = {t: {m: [sd["methods"][m]["nonoverlapping"]["64"]["acc"] - sd["methods"][m]["nonoverlapping"]["512"]["acc"]
                      for sd in results["tasks"][t]["seeds"]] for m in sin_rope_alibi + ("none", "t5")} for t in TASKS[1:]}
assert all(max(d["t5"]) < min(d["none"]) and max(d["none"]) < min(min(d[m]) for m in sin_rope_alibi)
           for d in seed_drops.values())  # seed by seed: T5 < NoPE < sinusoids, RoPE, ALiBi
assert [round(G["none"][L]["mean"], 2) for L in (64, 512)] == [0.43, 0.28]
cfg_x = ex.ExperimentConfig()
anywhere, asked_any = ex.recall_sequences(2000, 64, cfg_x, torch.Generator().manual_seed(0), start="random")
qb, qpos = asked_any.nonzero(as_tuple=True)
qpos = qpos - 1  # the asked key, one before each scored value
vocab = ex.recall_vocab(cfg_x)
row = anywhere[qb]
holds = (row >= vocab["entry"]) & (row < vocab["key"]) & (
    (row - vocab["entry"]) // cfg_x.values == (anywhere[qb, qpos] - vocab["key"])[:, None])
trained_back = qpos - holds.float().argmax(-1)  # how far back the asked entry is, in training (64 tokens)
assert (trained_back.min().item(), trained_back.max().item()) == (1, 62)
yarn_att = [pl.scaled_rope_frequencies(16, method="yarn", factor=float(s_), original_max_position=64)[1]
            for s_ in (2, 4, 8)]  # YaRN's attention factor, on in every YaRN score (the caveats below)
assert [round(a, 2) for a in yarn_att] == [1.07, 1.14, 1.21]
print("the recall_anywhere claims hold")

# %% [markdown] slideshow={"slide_type": "subslide"}
# **The sliding window** keeps every method's grammar accuracy within 0.04 of its 64-token
# value (NoPE's falls from 0.43 to 0.36 at 512), and it makes the dictionary-first recall impossible: a window of
# 64 tokens never reaches a dictionary 100 or more tokens back, so every method drops to
# guessing: chance is 1/8 (8 values), and every seed's recall at 128 to 512 tokens lies between 0.09
# and 0.16, within 3 standard errors of 1/8 (one standard error on 512 answers:
# $\sqrt{(1/8)(7/8)/512} \approx 0.015$ per answer, printed next; counted per sequence it is wider). With the dictionary anywhere (the figure's
# bottom-right panel) the window reaches the dictionary only when a lookup spans fewer than 64
# tokens, which grows rarer as $L$ grows: every method falls at every step in length, and at 512 every
# seed of every method lies between 0.17 and 0.23, a little above chance (1/8) and far below what reading at once gives
# RoPE + YaRN (0.92). Staying inside the training range is free only for local tasks.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# The sliding window's numbers, checked (collapsed: expand to read them)
def seeds_w(m, L):  # each seed's dictionary-first recall in the sliding window
    return [s["methods"][m]["sliding_window"][str(L)]["acc"] for s in results["tasks"]["recall"]["seeds"]]


assert all(abs(slide["grammar"][m][L]["mean"] - G[m][64]["mean"]) < 0.04 for m in BASE if m != "none" for L in LENGTHS)
assert [round(G["none"][64]["mean"], 2), round(slide["grammar"]["none"][512]["mean"], 2)] == [0.43, 0.36]  # NoPE falls
chance, se_chance = 1 / 8, ((1 / 8) * (7 / 8) / 512) ** 0.5  # 8 values; 512 answers per seed
print(f"recall, sliding window: every seed (chance {chance}, one standard error {se_chance:.3f})")
for m in BASE:
    print(f"  {ex.LABELS[m]:<19}", "  ".join(f"{L}: " + " ".join(f"{a:.3f}" for a in seeds_w(m, L)) for L in LENGTHS[1:]))
slid = [a for m in BASE for L in LENGTHS[1:] for a in seeds_w(m, L)]
assert len(slid) == 54 and (round(min(slid), 2), round(max(slid), 2)) == (0.09, 0.16)  # "between 0.09 and 0.16"
assert all(abs(a - chance) < 3 * se_chance for a in slid)  # within 3 standard errors of guessing
anywhere_w = {m: ex.accuracy(results, "recall_anywhere", m, "sliding_window") for m in BASE}
assert all(anywhere_w[m][a]["mean"] > anywhere_w[m][b]["mean"] for m in BASE for a, b in zip(LENGTHS, LENGTHS[1:]))
assert (round(min(anywhere_w[m][512]["min"] for m in BASE), 2), round(max(anywhere_w[m][512]["max"] for m in BASE), 2)) == (0.17, 0.23)
assert round(A["rope+yarn"][512]["mean"], 2) == 0.92

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Caveats** (more in §3's optional section, "More caveats"; each rests on a cell above):
#
# * This is one run of one small model (its size heads the summary below). Another CPU moves some
#   scores; the asserts that quote a number pin this run, and a rerun elsewhere tests the orderings
#   afresh.
# * Thin wins (separation below 2, How to read the numbers): YaRN over NTK on the grammar at 512,
#   plain RoPE over NTK on recall at 128 (separation 1.5), T5 over NoPE on recall at 512 (7 answers
#   of 512, separation 1.3). Counting each sequence once makes more thin (§3's optional section). Thin
#   means the seeds alone do not prove the ordering, not that the two are level; the text builds
#   nothing on these.
# * NoPE's smaller loss on recall is all this run shows: one lookup task, tiny models trained at 64
#   tokens, where the dictionary-first layout favours NoPE by construction. It does not test
#   Kazemnejad et al.'s result (§1), found on other tasks, models and lengths. The grammar shows
#   nothing either way: NoPE learned the rule only partly in its 400 steps (0.43 at 64 tokens, of a
#   best possible 0.77, then 0.28 at 512).

# %% [markdown] slideshow={"slide_type": "subslide"}
# **What §3 found** (in this one run of one small model: 2 layers, $d = 16$ per head, 400 steps, 3 seeds).
# * On the local grammar RoPE fails past $L_0$ as far keys take its attention: they are not held down as
#   trained near keys are (at angles and offsets training never showed; the run does not say which
#   counts), though a needed key still outscores an average far one, and they are many (433 to 448 per measured query at 512 tokens against 62 near ones, so
#   part of the far mass is their count). The sliding window, which hides them, restores it.
# * On the grammar ALiBi stays flat, as in the ALiBi paper's Figure 1, and so does RoPE read through a
#   64-token window: within 0.04 of its 64-token accuracy, and at 512 tokens every seed of it is above
#   every seed of ALiBi, by 0.03 (thin if each sequence counts once). So on this task a window does as well as ALiBi, within noise. The data
#   do not show that ALiBi's flatness *is* a window's: its gentlest head lowers a logit by only 1/256
#   per token back (under 2 even 511 back), and on recall it reads past any window (it scores above
#   every windowed reading). Chapter 6 §4 takes this apart.
# * Keeping each pair's angles in range is not enough without fine-tuning (we fine-tune none of the
#   scalings): YaRN keeps every pair in range, yet its grammar falls from 0.77 at 64 tokens to 0.57 at 512;
#   it also moves the near offsets' angle combinations, and the run does not say which costs more.
# * The layout decided the rankings. With the dictionary first PI looked best among the RoPE scalings
#   (only T5 and NoPE recalled more at 512: 0.99 and 0.94 against 0.79) and NoPE near-perfect.
#   With it anywhere PI and YaRN cannot be told apart (YaRN's attention factor lifts it from 0.83
#   to 0.92). The scalings share one set of trained RoPE models, so their orderings are not independent.
# * A recency bias (ALiBi) falls on both far lookups here (chapter 8's iRoPE is one answer: layers
#   without positions).

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "skip"}
# The summary's numbers not asserted in the sections above (collapsed: expand to read them)
sw_rope = ex.accuracy(results, "grammar", "rope", "sliding_window")[512]  # the summary: a window gives RoPE ALiBi's flatness
gentlest = pl.alibi_slopes(cfg["num_heads"], dtype=torch.float64).min().item()  # ALiBi's gentlest head, these models
assert gentlest == 1 / 256 and 511 * gentlest < 2  # "1/256 per token back (under 2 even 511 back)"
assert all(ex.accuracy(results, t, "alibi")[512]["min"] > max(ex.accuracy(results, t, m, "sliding_window")[512]["max"]
                                                                for m in BASE) for t in TASKS[1:])  # recall: no window
assert round(sw_rope["min"] - G["alibi"][512]["max"], 2) == 0.03  # above ALiBi with every seed, by 0.03
assert sw_rope["n"] == G["alibi"][512]["n"] == G["t5"][512]["n"]  # scored on the same tokens
both = {"window over ALiBi": (sw_rope["min"], G["alibi"][512]["max"]),  # judged alike: per token, per sequence
        "ALiBi over T5": (G["alibi"][512]["min"], G["t5"][512]["max"])}
judged = {k: tuple(round(ex.separation_of(a, b, n), 1) for n in (sw_rope["n"], cfg["eval_sequences"]))
          for k, (a, b) in both.items()}
print("separation counting each token, each sequence:", judged)
assert judged == {"window over ALiBi": (10.7, 0.5), "ALiBi over T5": (12.1, 0.5)}
assert all(o[4] != "sliding_window" for o in ORDERINGS)  # the window's win is not among the orderings counted in the optional section
top512 = sorted((m for m in BASE + SCALED[1:] if R[m][512]), key=lambda m: -R[m][512]["mean"])[:3]
assert top512 == ["t5", "none", "rope+linear"] and [round(R[m][512]["mean"], 2) for m in top512] == [0.99, 0.94, 0.79]

# %% [markdown] slideshow={"slide_type": "subslide"}
# **For the index's map (column 3).** The index leaves column 3 of these five methods to this
# section, after your prediction. The rule, set here: at 512 tokens, eight times the training
# length, a method *keeps* a task when its mean over the three seeds is within 0.1 of its mean at 64
# tokens; ✔ if it keeps all three tasks (the grammar, the lookup with the dictionary first, the
# lookup anywhere), ✘ if it keeps none, ~ otherwise. Each method as trained: no stretching, no
# fine-tuning. The marks are this run's, with its settings: T5's, for one, come with its
# `max_distance` of 64, equal to $L_0$.
# * Sinusoids ✘ and RoPE ✘: they lose all three, each by more than 0.4.
# * ALiBi ~: it keeps the grammar (within 0.01 in every seed) and loses both lookups.
# * T5 ~: it keeps both lookups and loses the grammar, by 0.15 on the mean but 0.07 to 0.28 by
#   seed, the least firm of the five marks.
# * NoPE ~: it keeps both lookups (0.06 and 0.08 lower) and loses the grammar it had learned only
#   partly (0.43, then 0.28).
#
# No method gets ✔. The control is in the same table: neither kind of task is simply harder at 512,
# since ALiBi keeps the grammar there and T5 keeps both lookups. And a lost task was first learned: at 64
# tokens every seed of the five recalls above the key-blind floor (0.61) on both lookups and scores 0.42 or
# more on the grammar, over six times guessing (1/16). The 0.1 is a choice: every
# threshold from 0.06 to 0.14 gives the same marks (the cell scans them); above that T5 gets ✔, below
# it NoPE gets ✘.

# %% slideshow={"slide_type": "fragment"}
# Column 3 of the index's map, by the rule above: means over three seeds, 64 tokens against 512
FIVE = ["none", "sinusoidal", "t5", "rope", "alibi"]
fall = {m: {t: acc[t][m][64]["mean"] - acc[t][m][512]["mean"] for t in TASKS} for m in FIVE}


def column3(keep: float) -> dict[str, str]:
    """Each method's mark when a task is kept if its mean falls by at most `keep`."""
    kept = {m: sum(f <= keep for f in fall[m].values()) for m in FIVE}
    return {m: "✔" if k == len(TASKS) else "✘" if k == 0 else "~" for m, k in kept.items()}


marks = column3(0.1)
for m in FIVE:
    print(f"{m:>10} {marks[m]}  fall from 64 to 512 tokens:", {t: round(f, 2) for t, f in fall[m].items()})
assert marks == {"none": "~", "sinusoidal": "✘", "t5": "~", "rope": "✘", "alibi": "~"}
t5_built = [mod for mod in ex.build_model("t5", ex.ExperimentConfig(), task="grammar").modules()
            if isinstance(mod, pl.T5RelativeBias)]  # the bias module the run's T5 models use
assert t5_built and all(mod.max_distance == cfg["train_len"] == 64 for mod in t5_built)  # max_distance = L0
assert min(fall["sinusoidal"].values()) > 0.4 and min(fall["rope"].values()) > 0.4
assert [t for t in TASKS if fall["alibi"][t] <= 0.1] == ["grammar"]  # the control: the grammar is kept at 512
per_seed = lambda t, m: [a - b for a, b in zip(acc[t][m][64]["acc"], acc[t][m][512]["acc"])]  # noqa: E731
assert max(abs(f) for f in per_seed("grammar", "alibi")) < 0.01
assert [t for t in TASKS if fall["t5"][t] <= 0.1] == ["recall", "recall_anywhere"]  # the control: lookups are kept
assert round(fall["t5"]["grammar"], 2) == 0.15
assert [round(f, 2) for f in sorted(per_seed("grammar", "t5"))] == [0.07, 0.09, 0.28]
assert [t for t in TASKS if fall["none"][t] <= 0.1] == ["recall", "recall_anywhere"]
assert [round(fall["none"][t], 2) for t in TASKS[1:]] == [0.06, 0.08]
assert [round(acc["grammar"]["none"][n]["mean"], 2) for n in (64, 512)] == [0.43, 0.28]
same = [k / 100 for k in range(101) if column3(k / 100) == marks]  # thresholds 0, 0.01, ..., 1
assert same == [k / 100 for k in range(6, 15)]  # 0.06 to 0.14, and no other
assert column3(0.15)["t5"] == "✔" and column3(0.05)["none"] == "✘"
assert all(acc[t][m][64]["min"] > floor_best for m in FIVE for t in TASKS[1:])  # learned: above the key-blind floor
assert round(min(acc["grammar"][m][64]["min"] for m in FIVE), 2) == 0.43 > 0.42 > 6 / cfg["vocab_size"]
print("thresholds that give the same marks:", same[0], "to", same[-1])

# %% [markdown] slideshow={"slide_type": "slide"}
# ### §3, going further (optional: read after the summary)
#
# Seven asides for after class. The main line above stands without them; each reuses its numbers.

# %% [markdown] slideshow={"slide_type": "subslide"}
# #### More caveats
#
# * Reruns: another CPU picks other vectorised kernels, which changes the last bits of training and
#   moves some scores (measured on ALiBi, and what such a shift could flip: below). The RoPE recall
#   models were not retrained, so every RoPE recall result here is a result of this run.
# * Recall's floor is 0.61, not 1/8: a reader that ignores the key scores that much (computed after
#   "How to read the numbers"). A recall at or below it does not show the key used, and the results
#   store nothing that tells a key-blind model from one whose lookups partly succeed. Under it: with
#   the dictionary first NTK at 128 and 256 tokens (0.54, 0.29) and plain RoPE at 256 (0.55), while
#   YaRN's 0.69 at 128 is only 0.08 above it; with the dictionary anywhere, at 512, RoPE (0.32), NTK
#   (0.57), ALiBi (0.53) and sinusoids (0.50).
# * Why PI fails the grammar is not measured, nor which near keys gain (the measurement pools every
#   key 2 to 63 back). Our reading, untested: at $s = 8$ PI reads the key one back as distance 0.125,
#   which training never showed, and the key 8 back as distance 1, where training found the needed key
#   (asserted with the grammar's attention). The other candidate is the missing fine-tuning (Chen et
#   al. fine-tune after interpolating; we do not).
# * Why NoPE lags on the grammar is not settled. Our reading, untested: a causal average like §1's
#   counter tells neighbours in the last quarter of the window apart by only 1.6 % to 2 % of its value
#   (16-bit formats merge neighbours outright only further out: Exercise 1's merge positions, after the
#   exercise).
#   The budget is the other candidate: NoPE's last logged training loss (one batch, at step 399) is 1.88 to 2.00,
#   far above RoPE's 1.14 to 1.24, and no run with more steps is stored.
# * NTK with the dictionary anywhere fails by the distance: at the trained distances its own $s = 8$
#   frequencies recall 0.88 at 512 tokens (every seed above every seed read at once, 0.57), so its
#   uneven slowing of the middle pairs costs little there. Whether the longer lookups fail by their
#   unseen angles (4 of 8 pairs) or by their unseen offsets, this run does not separate.
# * Every NTK result here uses $s = L/64$ exactly. YaRN's authors (Peng et al. 2023, on NTK-aware
#   interpolation) report that in practice it needs a larger $s$ than the extension asked for, a
#   setting this chapter does not test.
# * Moving the dictionary to the trained distances also takes it off the start of the sequence and
#   onto positions training never showed, which costs NoPE and T5 (above). But the same models with plain RoPE's frequencies still recall
#   0.74 at that placement. So the move does not by itself take RoPE + PI down to 0.21
#   (unless PI's frequencies make it costlier, which this run does not separate).
# * YaRN's attention factor (1.07, 1.14, 1.21 at $s$ = 2, 4, 8; its square on the logits) is on in
#   every YaRN score here unless set to 1. With the factor set to 1, the experiment's YaRN recalls
#   0.43 instead of 0.60 at 512 tokens with the dictionary first (within 0.01 of the key-blind floor),
#   and 0.83 instead of 0.92 with it
#   anywhere, level with PI. Part of YaRN's recall is the factor.

# %% [markdown] slideshow={"slide_type": "subslide"}
# #### Is YaRN's failure dilution?
#
# Many far keys, each scored a little lower? Count
# alone makes a prediction. Suppose every far key scored exactly like a near key, and the two needed
# keys kept the lead over a near key they had at 64 tokens. A measured query at 64 tokens (one of the
# last 16) sees 47 to 62 near keys, 54.5 on average; one at the end of 512 tokens sees the same 62
# near keys plus 433 to 448 far ones, 440.5 on average. Each head's needed mass at 64 tokens, $n$, and
# near mass, $r$, then predict its needed mass at 512 tokens:
# $n / \big(n + \tfrac{r}{54.5}(62 + 440.5)\big)$.
# At 64 tokens every RoPE variant is the same model ($s = 1$), so the prediction is the same for all.
#
# The next cell computes it. For NoPE, whose far keys do score like near ones, prediction and
# measurement agree (0.73 to 1.12 times the prediction per head): a check of the method, not evidence
# about YaRN. For YaRN they agree too: a median needed mass of 0.37 measured against 0.36 predicted,
# 0.59 to 1.82 times the prediction per head. Plain RoPE keeps 0.03 against the same 0.36, under
# half the prediction in every head: its far keys win by their scores, not their count (as found above).
#
# So YaRN's needed keys lose about what their count alone predicts: that loss is consistent with
# dilution. It is not proof of it, because the rest of the mass is not split as count alone splits it.
# The far keys take 0.36 where count alone gives them 0.56, and the near keys keep 0.16 where it
# leaves them 0.08 (medians). Far keys score below near ones on average (far − near logit −2.88 or lower),
# and the needed keys lose ground to the near keys as well (needed over near mass 2.3, where count
# alone gives 4.6). The two departures roughly cancel in the needed mass. Which far keys take the 0.36
# (combinations of angles that training never produced, or far keys whose content matches the
# query's), this summary cannot tell. We leave it open.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# Going further: dilution, counted (collapsed: expand to read it); n_near64, n_far, n_near, count_only: the main line
split = {}
print(f"{'grammar, per head':<26}{'needed at 512: measured':>25}{'count alone':>13}{'measured / count alone':>26}")
for m in ("none", "rope", "rope+yarn"):
    need64, need512, far512 = heads(m, 64, "mass"), heads(m, 512, "mass"), heads(m, 512, "far")
    per_key = count_only[m] * near_key64(m) / need64  # count alone's share of one near or far key at 512
    split[m] = {"far": ((per_key * n_far).median().item(), far512.median().item()),
                "near": ((per_key * n_near).median().item(), (1 - need512 - far512).median().item()),
                "needed/near": ((need64 / (near_key64(m) * n_near)).median().item(),
                                (need512 / (1 - need512 - far512)).median().item())}
    over_count = need512 / count_only[m]
    print(f"  {ex.LABELS[m]:<24}{need512.median():>25.3f}{count_only[m].median():>13.3f}"
          f"{over_count.min():>15.2f} to {over_count.max():.2f}")
print("YaRN, count alone vs measured (medians):", {k: tuple(round(x, 2) for x in v) for k, v in split["rope+yarn"].items()})
assert n_near64 == 54.5 and n_far == 440.5
assert len(q_last) == 16 and [(q_last - 63).min().item(), (q_last - 63).max().item()] == [433, 448]
over = {m: heads(m, 512, "mass") / count_only[m] for m in count_only}
assert [round(x.item(), 2) for x in over["none"].aminmax()] == [0.73, 1.12]  # NoPE: the method checks out
assert round(count_only["rope+yarn"].median().item(), 3) == 0.363  # count alone, every RoPE variant alike
torch.testing.assert_close(count_only["rope"], count_only["rope+yarn"])
assert round(heads("rope+yarn", 512, "mass").median().item(), 2) == 0.37  # YaRN: about what count alone predicts
assert [round(x.item(), 2) for x in over["rope+yarn"].aminmax()] == [0.59, 1.82]
assert round(heads("rope", 512, "mass").median().item(), 2) == 0.03 and (over["rope"] < 0.5).all()  # RoPE: far below
assert {k: tuple(round(x, 2) for x in v) for k, v in split["rope+yarn"].items()} == {
    "far": (0.56, 0.36), "near": (0.08, 0.16), "needed/near": (4.62, 2.26)}  # the split is not count alone's

# %% [markdown] slideshow={"slide_type": "subslide"}
# #### Two more mechanisms, checked
#
# * **T5's last bucket.** On both recall tasks T5 keeps its 64-token accuracy at 512 (at least
#   0.97 for every seed with the dictionary first). The obvious explanation is bucketing; the
#   control below rules it out as the whole story. The bucketing itself holds: the
#   model's own bias module (32 buckets for the past, `max_distance` 64 $= L_0$, read from the model
#   the experiment builds) puts every distance from 59 on in one bucket, and some training
#   lookups already sat there. At 512 the far entry sits in a bucket the model knows.
#
#   But with the dictionary at the trained distances, every lookup is in buckets T5 saw in training, yet T5 falls from 0.99 to
#   0.74 at 512, as NoPE falls from 0.94 to 0.69: the bucket is at most one part. The move changes two
#   things at once, which this run does not separate: the entries leave the start of the sequence,
#   and they sit at absolute positions training never showed (which the causal mask lets both
#   models count, §1). The count of keys is not the difference: both layouts are read at 512 tokens.
# * **YaRN's attention factor.** YaRN also multiplies q and k by 1.07 at $s = 2$ (the logits by
#   about 1.14). The experiment scores YaRN a second time with the factor set to 1: on the
#   dictionary-first task recall gets *worse* for every seed at every length past 64, so the
#   factor is not what costs YaRN there.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# Going further: the two mechanisms, checked (collapsed: expand to read it)
t5_bias = next(mod for mod in ex.build_model("t5", ex.ExperimentConfig(), task="recall").modules()
               if isinstance(mod, pl.T5RelativeBias))  # the module the trained T5 models use
assert (t5_bias.num_buckets, t5_bias.max_distance, t5_bias.bidirectional) == (32, 64, False)
dist = torch.arange(0, 600)
bucket = pl.t5_relative_bucket(-dist, bidirectional=False, num_buckets=t5_bias.num_buckets,
                               max_distance=t5_bias.max_distance)  # offset j - i = -distance
first_last = int((bucket == 31).nonzero()[0])
trained = range(64 - 11, 64 - 1)  # the dictionary-first training lookups: L - 11 .. L - 2
assert first_last == 59 and (bucket[59:] == 31).all()
assert any(bucket[d] == 31 for d in trained) and all(bucket[d] == 31 for d in range(512 - 11, 512 - 1))
assert all(R["t5"][L]["min"] >= 0.97 for L in LENGTHS) and all(A["t5"][L]["mean"] >= 0.94 for L in LENGTHS)
print(f"last bucket from distance {first_last}; training lookups' buckets:", sorted({int(bucket[d]) for d in trained}))
att_2 = pl.scaled_rope_frequencies(16, method="yarn", factor=2.0, original_max_position=64)[1]
assert round(att_2, 2) == 1.07 and round(att_2**2, 2) == 1.14  # YaRN's factor at s = 2, and on the logits
yarn_seeds = [sd["methods"]["rope+yarn"]["nonoverlapping"] for sd in results["tasks"]["recall"]["seeds"]]
assert all(y[str(L)]["acc_factor_1"] < y[str(L)]["acc"] for y in yarn_seeds for L in LENGTHS[1:])  # factor 1: worse

# %% [markdown] slideshow={"slide_type": "subslide"}
# #### NoPE in a sliding window
#
# On the grammar NoPE's sliding-window accuracy (0.36
# at 512) is *lower* than its accuracy at 64 tokens (0.43). The proposed reason: a window scores
# only its last 16 tokens (after the first window), and those are where a NoPE model's sense of
# position would be coarsest, if it comes from causal averages like §1's counter, which separate late
# positions worst, relative to their value too (our reading of NoPE's lag again, untested: More caveats).
#
# If that is the reason, two things must hold. NoPE's accuracy on the last 16 positions of a
# 64-token read (`tail_acc`, stored by the experiment) must be lower than its overall accuracy. And
# a mix of one first window plus last-16 windows must predict the sliding number. Both hold (next
# cell), and for RoPE, which knows every offset exactly, the last 16 positions are as good as the
# rest. These are necessary conditions, not a proof: a late position also has more keys to spread
# its attention over, and this check cannot tell that apart from the counter's coarseness.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# Going further: NoPE in a sliding window, checked (collapsed: expand to read it)
def seeds(task, m, L, key):
    return [s["methods"][m]["nonoverlapping"][str(L)][key] for s in results["tasks"][task]["seeds"]]


tail, whole = seeds("grammar", "none", 64, "tail_acc"), seeds("grammar", "none", 64, "acc")
windows = (512 - 64) // 16 + 1  # 29 windows over 512 tokens: the first scores 62 tokens, the others 16 each
predicted = [(62 * w + 16 * (windows - 1) * t) / (62 + 16 * (windows - 1)) for w, t in zip(whole, tail)]
measured = [s["methods"]["none"]["sliding_window"]["512"]["acc"] for s in results["tasks"]["grammar"]["seeds"]]
assert slide["grammar"]["none"][512]["mean"] < G["none"][64]["mean"] - 0.05  # the drop to explain
assert all(t < w - 0.05 for t, w in zip(tail, whole))  # NoPE: the last 16 positions are worse
assert all(abs(p - m) < 0.03 for p, m in zip(predicted, measured))  # and they predict the sliding window
rope_tail, rope_whole = seeds("grammar", "rope", 64, "tail_acc"), seeds("grammar", "rope", 64, "acc")
assert all(t > w - 0.02 for t, w in zip(rope_tail, rope_whole))  # RoPE: no such loss
print("NoPE, last 16 positions vs all:", [f"{t:.2f} vs {w:.2f}" for t, w in zip(tail, whole)])
print("sliding window at 512, predicted vs measured:", [f"{p:.2f} vs {m:.2f}" for p, m in zip(predicted, measured)])

# %% [markdown] slideshow={"slide_type": "subslide"}
# #### The separation of a win
#
# With $p$ the mean of the two accuracies and $n$ answers each, the separation is
# $(a_{\min} - b_{\max}) / \sqrt{2p(1-p)/n}$ (recall: 4 answers per sequence, which share one
# dictionary; the grammar: every scored token). For example, 0.95 against 0.90 is separated by 3.0
# on 512 answers each, but by 1.5 on 128: thin (next cell).

# %% slideshow={"slide_type": "fragment"}
# The separation of a win, on one example (ex.separation_of: two accuracies and n; ex.separation reads the results)
sep = {n: ex.separation_of(0.95, 0.90, n) for n in (512, 128)}
p_mid = (0.95 + 0.90) / 2
assert all(math.isclose(x, (0.95 - 0.90) / math.sqrt(2 * p_mid * (1 - p_mid) / n)) for n, x in sep.items())
assert {n: round(x, 1) for n, x in sep.items()} == {512: 3.0, 128: 1.5} and sep[128] < 2 < sep[512]
print("separation of 0.95 over 0.90:", {f"n = {n}": round(x, 1) for n, x in sep.items()})

# %% [markdown] slideshow={"slide_type": "subslide"}
# #### How many of these orderings could be luck?
#
# This section asserted 33 orderings "every seed of A beats every seed of B" (the next cell counts
# them). Were A and B equal, with independent seeds, a comparison would pass with probability 1/20
# in a direction fixed beforehand. These directions were read off the tables, so either counts:
# 1/10. That rate applies to every comparison examined (every pair of cells the tables show), not
# to the 33: if no method differed, about 1 in 10 of all comparisons examined would pass; the 33 are
# what passed. So the count alone cannot say how many of them are luck. And 24 of the
# 33 compare *the same trained RoPE models* (three seeds per task) under two scalings (or none). Those are not
# independent draws, so the 1-in-20 does not apply, and an ordering there says less than it seems.
#
# What carries the weight is the separation (above). The next cell lists
# the thin ones, per answer and per sequence (counting each sequence once is pessimistic: it scores a
# sequence of up to 510 tokens like one answer). Every other ordering is separated by more than 2.5,
# and every clear recall ordering by at least 47 answers, more than the 30 a kernel shift like
# ALiBi's could move (the cell after it).

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# Going further: the count of orderings, checked (collapsed: expand to read it)
assert beats("recall", "t5", "none", 512)  # the one ordering the text mentions without building on it
chance = ex.ordering_by_chance(3, 3)
separation = {o: ex.separation(results, o[0], o[1], o[2], o[3], o[4]) for o in dict.fromkeys(ORDERINGS)}
thin = sorted((o[:4], round(x, 1)) for o, x in separation.items() if x < 2)
print(f"{len(separation)} orderings asserted (the comparisons that passed); if no method differed, any "
      f"comparison examined would pass with probability {chance} (1 in {round(1 / chance)}) in a fixed "
      f"direction, {2 * chance} in either")
print("thin ones (separation < 2):", thin)
same_models = [o for o in separation if o[1].startswith("rope") and o[2].startswith("rope")]
print(f"{len(same_models)} of them compare the same trained RoPE models under two scalings")
assert chance == 1 / 20 and len(separation) == 33
assert len(same_models) == 24
assert sorted(collections.Counter(o[0] for o in same_models).items()) == [
    ("grammar", 8), ("recall", 12), ("recall_anywhere", 4)]  # the recall models carry 16 of them
assert [o for o, _ in thin] == [("grammar", "rope+yarn", "rope+ntk", 512), ("recall", "rope", "rope+ntk", 128),
                                ("recall", "t5", "none", 512)]
assert min(x for x in separation.values() if x >= 2) > 2.5  # the others: clear of the noise
recall_margin = {o: round((ex.accuracy(results, o[0], o[1], o[4])[o[3]]["min"]
                           - ex.accuracy(results, o[0], o[2], o[4])[o[3]]["max"]) * 512)
                 for o, x in separation.items() if o[0] != "grammar" and x >= 2}  # clear recall wins, in answers
closest = min(recall_margin, key=recall_margin.get)
assert closest[1:4] == ("rope+linear", "rope+yarn", 512) and recall_margin[closest] == 47  # PI over YaRN at 512 ...
assert round(separation[closest], 1) == 3.2  # ... more than a kernel shift (next cell)
by_sequence = {}  # the grammar's orderings with each sequence counted once (n = 128 per seed)
for o in separation:
    if o[0] == "grammar":
        a_, b_ = ex.accuracy(results, "grammar", o[1], o[4])[o[3]], ex.accuracy(results, "grammar", o[2], o[4])[o[3]]
        by_sequence[o[1:4]] = ex.separation_of(a_["min"], b_["max"], cfg["eval_sequences"])
thin_by_sequence = sorted(o for o, x in by_sequence.items() if x < 2)
print("grammar orderings thin if each sequence counts once:", thin_by_sequence)
assert len(by_sequence) == 14 and thin_by_sequence == [("alibi", "t5", 512), ("rope", "rope+linear", 128),
                                                        ("rope", "rope+linear", 256), ("rope", "rope+linear", 512),
                                                        ("rope+yarn", "rope+ntk", 512)]
recall_by_sequence = {}  # the recall orderings, each sequence counted once too (its 4 answers share a dictionary)
for o in separation:
    if o[0] != "grammar":
        a_, b_ = ex.accuracy(results, o[0], o[1], o[4])[o[3]], ex.accuracy(results, o[0], o[2], o[4])[o[3]]
        recall_by_sequence[o] = ex.separation_of(a_["min"], b_["max"], cfg["eval_sequences"])
thin_recall = sorted(o[:4] for o, x in recall_by_sequence.items() if x < 2 <= separation[o])
print("recall orderings clear per answer, thin if each sequence counts once:", thin_recall)
assert thin_recall == [("recall", "rope", "rope+ntk", 256), ("recall", "rope+linear", "rope+yarn", 512),
                       ("recall_anywhere", "none", "alibi", 512)]

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# Going further: the caveat on reruns, checked (collapsed: expand to read it).
# Forced on the same CPU, AVX2 kernels instead of AVX-512 (`--kernel-check`, results/other_kernels.json) retrained
# only some models: ALiBi on the dictionary-first recall (three seeds), whose recall moved by up to 15 answers of 512,
# and one seed each of RoPE and ALiBi on the grammar, whose accuracies did not change. The RoPE recall models, which
# carry 16 of the orderings counted in §3's optional section, were not retrained (8 more compare the grammar's
# RoPE models, of which one seed was retrained and did not change). No GPU run is stored.
# A shift like ALiBi's can move both scores of an ordering, by up to 30 answers of 512 together: 1.9 units of
# separation near p = 1/2, more away from it (3.1 at p = 0.9). So a recall ordering thinner than about 2 could flip on
# another CPU. The clear recall orderings win by at least 47 answers (PI over YaRN at 512, separation 3.2, asserted
# here; that no clear one wins by less: the cell above), more than 30, so a shift as large as ALiBi's would not flip them (though, counting each
# sequence once, PI over YaRN is itself thin). That the RoPE models move no more than ALiBi's did is an assumption no
# rerun checked.
other = ex.load_results("other_kernels")  # the same models retrained with AVX2 kernels forced on the same CPU
assert other["environment"]["cpu"] == env["cpu"] and other["environment"]["cpu_capability"] != env["cpu_capability"]
kernel_moved = [abs(acc - results["tasks"]["recall"]["seeds"][int(sd)]["methods"]["alibi"]["nonoverlapping"][L]["acc"]) * 512
         for sd, by_L in other["recall"]["alibi"].items() for L, acc in by_L.items()]
assert 10 < max(kernel_moved) <= 15.5  # recall: up to 15 answers of 512
assert set(other["recall"]) == {"alibi"} and len(other["recall"]["alibi"]) == 3  # recall: ALiBi's three seeds only
assert {m: len(v) for m, v in other["grammar"].items()} == {"rope": 1, "alibi": 1}  # grammar: one seed each
kernel_pair = 2 * max(kernel_moved)  # both scores of an ordering can move: up to 30 answers together
unit = lambda p: (2 * p * (1 - p) / 512) ** 0.5  # noqa: E731  one unit of the separation at mean accuracy p
assert [round(kernel_pair / 512 / unit(p), 1) for p in (0.5, 0.9)] == [1.9, 3.1]  # 1.9 units near 1/2, 3.1 at 0.9
pi_yarn = round((acc["recall"]["rope+linear"][512]["min"] - acc["recall"]["rope+yarn"][512]["max"]) * 512)  # in answers
assert pi_yarn == 47 > kernel_pair and round(ex.separation(results, "recall", "rope+linear", "rope+yarn", 512), 1) == 3.2
assert all(acc == results["tasks"]["grammar"]["seeds"][int(sd)]["methods"][m]["nonoverlapping"][L]["acc"]
           for m, by_seed in other["grammar"].items() for sd, by_L in by_seed.items() for L, acc in by_L.items())

# %% [markdown] slideshow={"slide_type": "subslide"}
# #### YaRN's dip at 128 tokens
#
# A description found after looking, not a test set out in advance. A separate control run (`--controls`,
# `results/recall_controls.json`; it also serves chapter 6 §4) retrained the RoPE recall models with the same
# code, seeds and CPU. Per pair YaRN stays in range, but a head
# sums its pairs, and training showed only the *combinations* of angles that real distances produce. The control
# run moved the dictionary to 7 places per length: 32 tokens in, YaRN at 128 tokens recalls 0.99, every seed above
# every seed with the dictionary first (0.67 on the control's sequences). Over its 84 settings, how far the
# lookups' combination lies from the training lookups' (`pl.rope_combination_gap`: for a lookup distance $r$,
# $\min_\rho \max_j |r\theta'_j - \rho\theta_j|$, each difference wrapped to $[-\pi, \pi]$, over the training
# lookups $\rho$ from 53 to 62) ranks recall well for every
# scaling, but a plain distance ranks it as well for plain RoPE, PI ($r/s$) and, away from the trained distances,
# NTK. For YaRN, in these 21 settings the gap ranks recall better than a distance does (next cell); found after
# looking, with no control for other measures that track YaRN's ramped middle pairs.

# %% jupyter={"source_hidden": true} slideshow={"slide_type": "fragment"}
# Going further: YaRN's dip, checked (collapsed: expand to read it)
controls = ex.load_results("recall_controls")  # python -m posenc_lib.experiments.extrapolation --controls
assert controls["environment"] == env  # the committed run's CPU and torch


def lookup_gap(m, L, start):
    """Mean over the lookups (dictionary at `start`) of their combination's distance from the training lookups'."""
    f = theta16 if m == "rope" else pl.scaled_rope_frequencies(
        16, method=m.removeprefix("rope+"), factor=L / 64, original_max_position=64, seq_len=L, dtype=torch.float64)[0]
    return pl.rope_combination_gap(theta16, (53, 62), torch.arange(L - 11 - start, L - 1 - start), inv_freq=f).mean().item()


def scaled_offset(L, start):
    """How far the lookups read as r / s (s = L / 64) fall outside the training lookups 53..62: mean, in tokens."""
    r = torch.arange(L - 11 - start, L - 1 - start, dtype=torch.float64) / (L / 64)
    return ((53 - r).clamp(min=0) + (r - 62).clamp(min=0)).mean().item()


def rank_corr(x, y):
    """Spearman's rank correlation, rounded (tied values share their mean rank)."""
    def ranks(v):
        v = torch.tensor(v, dtype=torch.float64)
        return (v[None] < v[:, None]).sum(1) + ((v[None] == v[:, None]).sum(1) - 1) / 2
    a, b = ranks(x), ranks(y)
    a, b = a - a.mean(), b - b.mean()
    return round((a @ b / (a.norm() * b.norm())).item(), 2)


placed = []  # (method, L, start, recall per seed)
for m in ("rope", "rope+linear", "rope+ntk", "rope+yarn"):
    key = m.removeprefix("rope+") if "+" in m else "none"
    placed += [(m, L, st, [c["placement"][key][str(L)][str(st)] for c in controls["seeds"]])
               for L in LENGTHS[1:] for st in ex.placement_starts(L, ex.ExperimentConfig())]
assert len(placed) == 4 * 3 * 7 == 84  # 4 scalings x 3 lengths x 7 places
yarn128 = {st: accs for m, L, st, accs in placed if m == "rope+yarn" and L == 128}
assert min(yarn128[32]) > max(yarn128[0]) and [round(sum(yarn128[st]) / 3, 2) for st in (32, 0)] == [0.99, 0.67]
measures = {"gap": lambda m, L, st: lookup_gap(m, L, st), "raw distance": lambda m, L, st: L - st,
            "r/s offset": lambda m, L, st: scaled_offset(L, st)}
corr = {}
for m in ("rope", "rope+linear", "rope+ntk", "rope+yarn"):
    for away in (False, True):  # away: without the placement at the trained distances (L - 64)
        rows = [(L, st, sum(a) / 3) for m_, L, st, a in placed if m_ == m and not (away and st == L - 64)]
        corr[m, away] = {k: rank_corr([f(m, L, st) for L, st, _ in rows], [r for *_, r in rows])
                         for k, f in measures.items()}
    print(f"{ex.LABELS[m]:<12} recall against, all 21 settings:", corr[m, False], " away from L - 64:", corr[m, True])
assert all(corr[m, False]["gap"] < -0.75 for m in ("rope", "rope+linear", "rope+ntk", "rope+yarn"))  # ranks well
assert corr["rope", False]["raw distance"] <= corr["rope", False]["gap"]  # plain RoPE: the distance as well
assert corr["rope+linear", False]["r/s offset"] <= corr["rope+linear", False]["gap"]  # PI: its r / s as well
assert corr["rope+ntk", True]["raw distance"] <= corr["rope+ntk", True]["gap"]  # NTK, away from L - 64: as well
assert corr["rope+ntk", False]["raw distance"] > corr["rope+ntk", False]["gap"] + 0.2  # (not with them)
assert corr["rope+yarn", False]["gap"] < min(corr["rope+yarn", False][k] for k in ("raw distance", "r/s offset")) - 0.25

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each exercise has a cell for your answer and a checker that says what is right or wrong, with
# a hint. The worked solution follows, collapsed (expand it only after trying), then a cell that
# checks it. In a graded copy (`make student`) the solution cell is empty: write your answer there.
#
# **Exercise 1 (predict, on §1).**
# §1's counter $1/(i+1)$ is exact in float64. Suppose a model holds it,
# scaled by some $a > 0$ (a layer's weight), as $a/(i+1)$ in a format that keeps $p$ significant
# bits and rounds to the nearest number it can hold (ties to even): float16 keeps 11,
# float32 24, float64 53. From some position on, neighbours $i$ and $i + 1$ round to the same number
# and the counter can no longer tell them apart. Predict where that starts, as a function of both
# $p$ and $a$: write `first_merge(p, a)` returning the first position $i$ whose rounded counter
# equals that of $i + 1$, within 2 %.
# The checker leaves out formats under 11 bits and scales just above a power of two ($a/2^k$ in $(1, 1.1)$).
# Where the counter stops telling neighbours apart decides how long a context a 16-bit NoPE counter can count: a
# question for long-context models, not for §3's 64 tokens. Do not search: at $p$ near
# 30 the first merge lies too far out to find by trying positions, and the checker refuses a search, including one
# run in a narrower format and scaled up to $p$ bits.

# %% slideshow={"slide_type": "fragment"}
def first_merge(p, a):
    raise NotImplementedError  # your code


_ = check.counter_merge(first_merge)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "counter_merge_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def first_merge(p, a):
    ### BEGIN SOLUTION
    # Neighbours a/(i+1) and a/(i+2) differ by about v/(i+1), with v = a/(i+1): relative to v, by 1/(i+1). Write
    # v = m 2^e with m in [1, 2): the format spaces its numbers there by 2^(e+1-p), relative to v 2^(1-p)/m. Two
    # numbers farther apart than the spacing never round to one value, so no merge comes while
    # 1/(i+1) > 2^(1-p)/m. Within one binade (fixed e), m (i+1) = a 2^-e =: A is fixed, so merging needs
    # (i+1)^2 > A 2^(p-1), and it can hold inside the binade (where i+1 <= A) only once A > 2^(p-1). The first
    # binade where it does has A = a moved by a power of two into (2^(p-1), 2^p], and merging starts near
    # i + 1 = sqrt(A 2^(p-1)) = 2^(p-1) sqrt(f), with f = a's significand taken in (1, 2]; soon after, two
    # neighbours fall into one rounding cell. For a = 1 (f = 2): 2^(p - 1/2), float16 1447 (the first merge is
    # at 1463); bfloat16 about 180 (189; 8 bits is too coarse for 2 %). For a = 1, a NoPE model that carries this
    # counter begins to merge neighbours at 189 positions in bfloat16 (1463 in float16). In the band just above
    # f = 1 the binade can end before two neighbours share a cell, and merging then starts in the next one
    # (A doubled); whether it does, the rounding grid decides.
    f = a / 2 ** (math.ceil(math.log2(a)) - 1)
    return 2 ** (p - 1) * math.sqrt(f) - 1
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "counter_merge", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.counter_merge(first_merge)

# %% [markdown] slideshow={"slide_type": "skip"}
# For the record (§3's NoPE caveat uses it): for $a = 1$, float16 first merges neighbours at
# position 1463 and bfloat16 at 189, both past the 64 tokens §3 trains on: there rounding merges no
# neighbours, so it cannot be why NoPE lags at 64 tokens. The next cell finds them by rounding the counter
# in each format, position by position.

# %% slideshow={"slide_type": "skip"}
counter16 = {dt: (1 / torch.arange(1, 4097, dtype=torch.float64)).to(dt) for dt in (torch.float16, torch.bfloat16)}
merged_at = {str(dt): int((c[:-1] == c[1:]).nonzero()[0]) for dt, c in counter16.items()}  # entry k holds 1/(k+1)
assert merged_at == {"torch.float16": 1463, "torch.bfloat16": 189} and min(merged_at.values()) > 64
print(merged_at)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 2 (derive, on §2).**
# Dynamic NTK (§2's table) raises the base as the input grows, and
# transformers recomputes the frequencies when it does, but keys already in the KV cache keep the
# angles they were rotated with (huggingface/transformers#25104). Take a key at position $n$ rotated
# with base $b_1$ and a query rotated, later, with base $b_2 > b_1$. In every pair but pair 0, the angle their
# score sees is off from the angle the offset alone would give, by an amount that grows with $n$.
# Which pair's drifts fastest? You answer with the place itself, not a pair index: treat the pair's
# place $x = 2j/d$ as a real number and write `drift_peak(b1, b2)` returning the real $x$ where the
# drift is fastest, within $10^{-6}$ of it (relative). The checker passes float64 tensors of many base
# pairs at once, with a budget of operations and Python lines that a closed form fits and no search does
# (on the drift or its slope, in float64 or in decimals): derive where it peaks.
# The pair of a head of $d$ features whose angle drifts fastest is then one of the two whole numbers
# around $d x/2$ (the fastest drift, not the worst harm: once angles pass a full turn, a slower pair can
# be as scrambled).

# %% slideshow={"slide_type": "fragment"}
def drift_peak(b1, b2):
    raise NotImplementedError  # your code


_ = check.stale_cache_pair(drift_peak)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "stale_cache_pair_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def drift_peak(b1, b2):
    ### BEGIN SOLUTION
    # The query at m is turned by m theta_j(b2), the cached key at n by n theta_j(b1); the score sees key
    # minus query, n theta_j(b1) - m theta_j(b2) = (n - m) theta_j(b2) + n (theta_j(b1) - theta_j(b2)): off by n times
    # the change of the pair's frequency, in radians per position. With x = 2j/d that change is
    # b1^-x - b2^-x: 0 for pair 0 (both frequencies are 1), near 0 for the slowest pairs (both tiny,
    # although their *ratio* changes most), largest in between, where the slope vanishes and the derivatives
    # of the two exponentials balance: ln(b1) b1^-x = ln(b2) b2^-x, so x = ln(ln b2 / ln b1) / ln(b2 / b1).
    # For the LLaMA head of §2 (d = 128) with NTK's base at s = 8: x = 0.098, pair 6, a *fast* pair
    # (wavelength about 15 tokens under b1, its frequency only 18 % lower; 19 % at x itself) whose angle drifts by 0.076 rad per position
    # of the key: 7.6 rad for a key 100 tokens in.
    return torch.log(torch.log(b2) / torch.log(b1)) / torch.log(b2 / b1)
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "stale_cache_pair", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.stale_cache_pair(drift_peak)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 3 (design, on §2).**
# NTK changes a single number, the base, and §2 found that its base
# leaves most of the slow pairs meeting new angles. A larger base would bring them back, but it
# also slows the pairs that had turned in training, the pairs §2's table says a method should
# spare. How far can a change of base alone extend the context? Allow it to slow no pair that
# completed a turn in training ($L_0\theta_j \ge 2\pi$) by more than a factor $c$
# ($\theta'_j \ge \theta_j / c$), and require every pair that never did to stay inside its trained
# arc at every distance up to $L - 1$: $(L - 1)\,\theta'_j \le (L_0 - 1)\,\theta_j$ (stricter than
# §2's novelty test, which lets an angle go up to one step $\theta_j$ past the arc). Write
# `longest_context(d, base, L0, c)` returning the largest $L$ (a real number) for which some base
# $b' \ge b$ meets both. The checker's heads each have at least two pairs that turned and one that
# did not, and one of them has $2 \cdot 10^9$ features, too many to list or loop over.

# %% slideshow={"slide_type": "fragment"}
def longest_context(d, base, L0, c):
    raise NotImplementedError  # your code


_ = check.one_base_in_range(longest_context)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "one_base_in_range_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def longest_context(d, base, L0, c):
    ### BEGIN SOLUTION
    # A base b' slows pair j by k^j, with k = (b'/b)^(2/d): the more, the larger j. The pairs that turned are
    # 0 .. j_min - 1 and the one slowed most is the last, j_min - 1: k^(j_min - 1) <= c. The slow pairs need
    # k^j >= (L - 1)/(L0 - 1), and the one slowed least is the first, j_min: the two limits fall on two
    # *neighbouring* pairs. The longest context takes the largest k, c^(1/(j_min - 1)):
    # L - 1 = (L0 - 1) c^(j_min / (j_min - 1)), barely more than c times the trained span. For the LLaMA head
    # (j_min = 41) with c = 2: L = 4166.6, about 2 L0; reaching s = 8 would slow pair 40 by 7.6, though it had
    # seen every angle. A base slows neighbours almost alike, so it cannot spare one pair and slow the next
    # s-fold: this is why YaRN and Llama 3 set each pair's factor on its own (§2's table).
    j_min = math.floor(d / 2 * math.log(L0 / (2 * math.pi)) / math.log(base)) + 1  # §2: the first past j*
    if not 2 <= j_min < d // 2:
        return math.inf  # at most pair 0 turned (no base slows it), or no pair is left to keep in its arc
    return 1 + (L0 - 1) * c ** (j_min / (j_min - 1))
    ### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "one_base_in_range", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.one_base_in_range(longest_context)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Errata in the sources
#
# `001` makes no error in the material of this chapter. It leaves one gap, and two of its
# statements deserve a precision note:
#
# | Where | The source writes | Note |
# |---|---|---|
# | `001`, end | promises (introduction) to close with "LLaMA4使用的NoPE和Qwen系列使用的YARN", the NoPE that LLaMA 4 uses and the YaRN the Qwen series uses | the sections are missing (the conclusion is empty); §1 and §2 above fill the gap. |
#
# **Precision notes** (the statements are true; here is what they cover):
# * "LLaMA 4 uses NoPE" is true of *some* of its layers: Llama 4 interleaves, most layers use RoPE
#   and some use no positional encoding (Meta's "iRoPE" design; which ones, every fourth, is set in
#   the released config as the list `no_rope_layers`; transformers builds that list from
#   `no_rope_layer_interval` = 4, and Meta's own code calls the same setting `nope_layer_interval`;
#   the cell below checks transformers' default).
# * "The Qwen series uses YaRN" is true of how Qwen runs past its native context: the models are
#   trained with unscaled RoPE (Qwen2.5 with its base raised to $10^6$, ABF, §2), and YaRN is what
#   their long-context documentation switches on (Qwen2.5: 32K to 128K tokens, factor 4). The
#   Qwen2 and Qwen2.5 technical reports pair YaRN with Dual Chunk Attention (DCA), which this
#   course does not cover.
#
# Chapter 8 checks both notes against the models' own config files: Llama 4 Scout's
# `no_rope_layers` (§5 there) and Qwen2.5's `rope_scaling` (null as shipped; the YaRN block
# its model card adds, factor 4 from 32 768 tokens). What concerns formulas (YaRN's, which
# pairs it interpolates) is asserted in §2 here and against Hugging Face's implementation in
# `tests/test_scaling.py`.

# %% slideshow={"slide_type": "skip"}
from transformers import Llama4TextConfig  # a config object only: nothing downloaded

llama4 = Llama4TextConfig()
assert llama4.no_rope_layer_interval == 4 and llama4.no_rope_layers[:8] == [1, 1, 1, 0, 1, 1, 1, 0]  # 0: no RoPE
print("transformers' Llama 4 default: every fourth layer without RoPE:", llama4.no_rope_layers[:8], "...")
# §1: "and scales the temperature in them": the config's temperature for the layers without RoPE (chapter 8 runs it)
assert llama4.attn_temperature_tuning and (llama4.attn_scale, llama4.floor_scale) == (0.1, 8192)
