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
# 1. **integer codes** $p_i = i\cdot\mathbf 1$: they swamp the token (we measure by how much),
#    and a LayerNorm after the sum erases them;
# 2. **normalised codes** $p_i = \tfrac{i}{m}\mathbf 1$: small, but the step between
#    neighbours depends on the sequence length $m$, and a LayerNorm erases them too;
# 3. **binary codes**: the bits of $i$; bounded, but jumpy, partly erased by a LayerNorm, and
#    (despite what a source says) with no fixed affine map from $p_i$ to $p_{i+k}$ for any
#    $k < 2^{d-2}$;
# 4. **sinusoids as smooth bits**: the way out, which chapter 3 develops;
# 5. **learned tables** (BERT, GPT-2): let training choose $p_i$; what a table learns, and why
#    it cannot go past the positions it was trained on.
#
# Sources followed: `001` (integer, normalised and binary codes, and five properties a code
# should have: (1) a vector of its own for every position, (2) a simple way from $p_i$ to
# $p_{i+k}$, (3) it generalises to longer sequences, (4) a fixed pattern, (5) it extends from 1-D
# to n-D) and `002` (why not binary, why not divide by the length). This chapter tests these codes
# against properties 1 to 4; property 5 is assessed for them in the course's map
# ([00_index](00_index.ipynb)), and tested for sinusoids and RoPE in chapter 9. Errors are corrected in the
# open and listed at the end. Positions count from 0; bit $b$ is the bit worth $2^b$, and $k$
# is always an offset. Notation and signs (offsets $j - i$ as key minus query, bit and pair
# orders) follow the course's [conventions page](00_index.ipynb#Conventions).

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import ipywidgets as widgets
import torch
import torch.nn.functional as F

import posenc_lib as pl
from posenc_lib import check, viz

viz.use_style()  # white figures, dark text: readable in light and dark themes

device = pl.default_device()  # the CPU unless you opt in with POSENC_DEVICE (00_index); tensors below follow it
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
# (2; an *affine* shift, not a linear map: section 4 makes property 2 precise), it generalises to
# longer sequences (3: work at 8K tokens, generalise to 32K, in `001`'s words), and it is a fixed
# pattern (4). The cell checks 1 and 2 on 100 positions. Property 3 is claimed too soon: the code
# is *defined* for every position, but its values grow without bound, so a model trained on up to
# $n$ tokens meets, at every position past them, values larger than any it saw (checked for
# $n = 64$). `00_index` leaves it ungraded, "? not trained; its values grow without bound"; the errata
# list the correction.

# %% slideshow={"slide_type": "fragment"}
P100 = pl.integer_positions(100, 8, device=device)
assert torch.unique(P100, dim=0).shape[0] == 100  # property 1: all rows distinct
for k in (1, 5, 37):
    torch.testing.assert_close(P100[k:], P100[:-k] + k)  # property 2: a fixed shift by k * 1
assert (P100[64:].min(-1).values > P100[:64].max()).all()  # property 3: past 64 tokens, every value is new
print("unique rows, and p_(i+k) = p_i + k·1 for every i; trained on 64 tokens, positions 64 .. 99 hold values "
      f"{P100[64:].min().item():.0f} .. {P100[64:].max().item():.0f}, above any seen ({P100[:64].max().item():.0f})")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Signal against noise
#
# The trouble is size, in a model that adds the code straight to tokens of a fixed size (the
# original Transformer does, see below). Take layer-normalised tokens: each token's features
# have mean 0 and variance 1, so $\lVert x_i\rVert = \sqrt d$. The code has
# $\lVert p_i\rVert = i\sqrt d$, so at position $i$ it is $i$ times larger than the token it is
# added to. Worse, $x_i$ has mean 0, so it is orthogonal to $\mathbf 1$, and the angle between
# the token and the token-plus-position is
#
# $$\cos(x_i,\ x_i + p_i) = \frac{\lVert x_i\rVert^2}{\lVert x_i\rVert\,\lVert x_i + p_i\rVert}
#   = \frac{1}{\sqrt{1 + i^2}},$$
#
# whatever $d$ is. At position 10 the cosine is already about 0.1 ($1/\sqrt{101}$). The cell
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
assert abs(cos[10].item() - 0.1) < 1e-3  # position 10: cosine about 0.1
print("||p_i|| / ||x_i|| at i = 1, 10, 63:", [round(ratio[j].item(), 2) for j in (1, 10, 63)])
print("cos(x_i, x_i + p_i) at i = 1, 10, 63:", [round(cos[j].item(), 3) for j in (1, 10, 63)])

# %% [markdown] slideshow={"slide_type": "fragment"}
# Two *different* tokens at the same position end up pointing almost the same way. Since
# $x\cdot x' \ge -d$, their cosine once the code is added is at least $(i^2-1)/(i^2+1)$:
# above 0.98 from position 10 on, for *any* two tokens, reached by opposite tokens $x' = -x$
# (0.9802 at position 10). The token is not lost (it sits intact in the directions orthogonal to
# $\mathbf 1$), but every map that reads the direction $\mathbf 1$, as random, untrained
# attention does, sees mostly the position.

# %% slideshow={"slide_type": "fragment"}
pairs = F.cosine_similarity(x[10:-1] + p[10:-1], x[11:] + p[10:-1], dim=-1)  # token i+1 placed at position i
worst = F.cosine_similarity(x + p, -x + p, dim=-1)  # opposite tokens at the same position
torch.testing.assert_close(worst, (i**2 - 1) / (i**2 + 1), atol=1e-5, rtol=0)  # the bound, reached
assert worst[10:].min() > 0.98 and abs(worst[10].item() - 99 / 101) < 1e-5 and (pairs >= worst[10:-1] - 1e-6).all()
print("cosine of opposite tokens at position 10:", round(worst[10].item(), 4),
      "· smallest among neighbouring random tokens at positions >= 10:", round(pairs.min().item(), 3))

# %% [markdown] slideshow={"slide_type": "fragment"}
# **What it costs attention.** Take one attention head with random maps $W_q, W_k$ (entries of
# standard deviation $1/\sqrt d$, as at initialisation) and logits $q_i\cdot k_j/\sqrt d$, with
# $q_i = W_q^\top x_i'$ and $k_j = W_k^\top x_j'$. For the tokens alone the logits have a standard deviation
# of about 1. With the code they gain the term $i\,j\,(W_q^\top\mathbf 1)\cdot(W_k^\top\mathbf 1)/\sqrt d$,
# and their standard deviation grows more than a hundredfold; the softmax then puts more than 99% of a
# query's weight on a single key for most queries. The cell measures it for 10 draws of the
# maps, and checks that removing the part along $\mathbf 1$ gives back the token exactly.

# %% slideshow={"slide_type": "fragment"}
draws = 10
W_qk = (torch.randn(draws, 2, d, d, generator=torch.Generator().manual_seed(1)) / d**0.5).to(device)


def random_head_logits(inputs):
    """q_i · k_j / sqrt(d) for each of the random draws of (W_q, W_k): (draws, n, n)."""
    return (inputs @ W_qk[:, 0]) @ (inputs @ W_qk[:, 1]).transpose(-1, -2) / d**0.5


unit_one = torch.ones(d, device=device) / d**0.5  # the unit vector along 1
torch.testing.assert_close((x + p) - ((x + p) @ unit_one)[:, None] * unit_one, x, atol=1e-4, rtol=0)  # the token is intact
std_tokens = random_head_logits(x).std(dim=(-1, -2))
std_coded = random_head_logits(x + p).std(dim=(-1, -2))
top_weight = random_head_logits(x + p).softmax(-1).max(-1).values[:, 1:]  # queries 1 .. 63
assert ((0.9 < std_tokens) & (std_tokens < 1.1)).all() and (std_coded > 150).all()  # every draw
share_one_key = (top_weight > 0.99).float().mean().item()
assert share_one_key > 0.8 and random_head_logits(x).softmax(-1).max(-1).values.max() < 0.5  # vs. tokens alone
print(f"logit std over {draws} random heads: tokens alone {std_tokens.min():.2f} .. {std_tokens.max():.2f}, "
      f"with the integer code {std_coded.min():.0f} .. {std_coded.max():.0f}; queries with > 99% of their weight "
      f"on one key: {share_one_key:.0%} (tokens alone: none)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### ... and a LayerNorm erases it completely
#
# There is a sharper problem the sources do not mention. LayerNorm subtracts each token's
# mean over its features, and $p_i = i\cdot\mathbf 1$ *is* a mean. So
# $\mathrm{LayerNorm}(h + p_i) = \mathrm{LayerNorm}(h)$ for every vector $h$: a model that
# normalises before each attention layer never sees an integer code at all. RMSNorm, which
# only rescales, keeps it, and swamps the token again: it divides by the root mean square of the
# features of $h + i\cdot\mathbf 1$ (its length over $\sqrt d$), about $i$, so
# $\mathrm{RMSNorm}(h + i\cdot\mathbf 1) \approx (h + i\cdot\mathbf 1)/i = \mathbf 1 + h/i$, a token shrunk
# by $1/i$ (the cell measures the divisor and what is left of the token at $i = 63$).

# %% slideshow={"slide_type": "fragment"}
h = torch.randn(n, d).to(device)
torch.testing.assert_close(F.layer_norm(h + p, (d,)), F.layer_norm(h, (d,)), atol=1e-4, rtol=0)
assert not torch.allclose(F.rms_norm(h + p, (d,)), F.rms_norm(h, (d,)), atol=1e-2)
divisor = (h + p)[-1].pow(2).mean().sqrt()  # RMSNorm's divisor at i = 63: the root mean square of the features
torch.testing.assert_close(divisor, (h + p)[-1].norm() / d**0.5)  # = the length over sqrt(d) ...
assert abs(divisor / (n - 1) - 1) < 0.01  # ... about i, not i·sqrt(d)
left = (F.rms_norm(h + p, (d,))[-1] - 1).norm() * (n - 1) / h[-1].norm()  # what is left of the token, times i = 63
assert 0.9 < left < 1.1  # RMSNorm(h + 63·1) ≈ 1 + h/63: the token shrunk by 1/63
print("LayerNorm(h + i·1) == LayerNorm(h): True;  RMSNorm keeps the code: True;  "
      f"at i = 63 RMSNorm divides by {divisor:.2f}, and |RMSNorm(h + i·1) - 1| = {left:.2f} · |h| / 63")


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Which set-up do real models use?** Post-LN puts a LayerNorm after each residual sum, pre-LN
# one at the input of each block. BERT and GPT-2, whose learned position tables §6 introduces,
# both normalise right after the sum, so for them an integer code would be **erased, not
# swamped**. BERT (post-LN) applies a LayerNorm to token + position + segment embeddings before
# the first layer. GPT-2 (pre-LN): the residual stream carries $h + i\cdot\mathbf 1$, but every
# block reads $\mathrm{LN}(h + i\cdot\mathbf 1) = \mathrm{LN}(h)$, and the final LayerNorm removes
# the code from the output. The cell checks both with tiny models built offline by transformers:
# position rows $i\cdot\mathbf 1$ give the same output as a table of zeros, and (the control that
# the check can fail) random rows do not.

# %% slideshow={"slide_type": "fragment"}
from transformers import BertConfig, BertModel, GPT2Config, GPT2Model  # the installed library, tiny configs

g = torch.manual_seed(0)
tiny_bert = BertModel(BertConfig(vocab_size=50, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                 intermediate_size=64, max_position_embeddings=16)).eval()
tiny_gpt2 = GPT2Model(GPT2Config(vocab_size=50, n_embd=32, n_layer=2, n_head=2, n_positions=16,
                                 bos_token_id=0, eos_token_id=0)).eval()  # special ids inside the tiny vocabulary
token_ids = torch.randint(50, (2, 16))
tables = {"BERT": tiny_bert.embeddings.position_embeddings.weight, "GPT-2": tiny_gpt2.wpe.weight}
with torch.no_grad():
    for name, model_ in (("BERT", tiny_bert), ("GPT-2", tiny_gpt2)):
        outputs = {}
        for rows_name, rows in (("zeros", torch.zeros(16, 32)), ("i·1", pl.integer_positions(16, 32)),
                                ("random", torch.randn(16, 32))):
            tables[name].copy_(rows)
            outputs[rows_name] = model_(token_ids).last_hidden_state
        torch.testing.assert_close(outputs["i·1"], outputs["zeros"], atol=1e-3, rtol=0)  # erased
        assert not torch.allclose(outputs["random"], outputs["zeros"], atol=0.1)  # a real code gets through
        print(f"{name}: position rows i·1 give the output of a zero table: True; random rows do not: True")


# %% [markdown] slideshow={"slide_type": "subslide"}
# In one sentence: a model with no LayerNorm before its first attention loses $i\cdot\mathbf 1$ at
# its first LayerNorm, but not the code's trace in the attention output (shown in the optional
# part below).
#
# <details><summary><b>Going further</b>: that trace, measured (optional, with the cell after it;
# the main line resumes at the figure below them)</summary>
#
# The swamping measured above is what a model with no LayerNorm between the sum and the first
# attention sees, such as the original post-LN Transformer (Vaswani et al., 2017, §3.4–3.5: token
# embeddings scaled by $\sqrt d$, the code added). Its first LayerNorm, after the residual sum
# $h + \mathrm{Attn}(h)$, removes $i\cdot\mathbf 1$, but not the code's trace in the attention
# output: with values $v_j = W_v^\top(x_j + j\cdot\mathbf 1)$, the output at position $i$ holds
# $\bigl(\sum_j a_{ij}\,j\bigr)\,W_v^\top\mathbf 1$, which is not along $\mathbf 1$, so the LayerNorm
# keeps it. Its size depends on the sign of $(W_q^\top\mathbf 1)\cdot(W_k^\top\mathbf 1)$ in the
# logits' term above: positive, it pulls every query towards its latest keys, and $\sum_j a_{ij}\,j$
# grows with $i$ (above $0.6\,i$ at every $i \ge 10$ here); negative, towards the first keys
# ($\sum_j a_{ij}\,j$ below 8). The cell builds one layer $\mathrm{LN}(h + \mathrm{Attn}(h))$ with
# random $W_q, W_k, W_v$ (entries of standard deviation $1/\sqrt d$, 10 draws) and feeds it §1's tokens
# and a second random sequence at the same positions. With a positive product the two outputs at
# positions $\ge 10$ have a mean cosine above 0.99 (causal or not): the next layer gets outputs that
# point almost the same way whatever the tokens. With a negative one it stays below 0.5, and without
# the code it is near 0 in every draw.
#
# </details>

# %% [markdown] slideshow={"slide_type": "skip"}
# #### Optional: the trace, measured
#
# The next cell is the measurement of the *Going further* block above; skip it on a first reading.

# %% slideshow={"slide_type": "skip"}
gen = torch.Generator().manual_seed(2)
other = F.layer_norm(torch.randn(n, d, generator=gen), (d,)).to(device)  # a second sequence, same positions
W_qkv = (torch.randn(10, 3, d, d, generator=gen) / d**0.5).to(device)  # 10 draws of W_q, W_k, W_v
future = torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


def attention_weights(inputs, causal):
    """softmax(q k^T / sqrt(d)) of one random head per draw: (draws, n, n)."""
    logits = (inputs @ W_qkv[:, 0]) @ (inputs @ W_qkv[:, 1]).transpose(-1, -2) / d**0.5
    return (logits.masked_fill(future, float("-inf")) if causal else logits).softmax(-1)


def same_way(a, b, causal):
    """Per draw, the mean cosine of LN(h + Attn(h)) for sequences a and b, over positions 10 .. 63."""
    out_a, out_b = (F.layer_norm(h_ + attention_weights(h_, causal) @ (h_ @ W_qkv[:, 2]), (d,)) for h_ in (a, b))
    return F.cosine_similarity(out_a, out_b, dim=-1)[:, 10:].mean(-1)


ones = torch.ones(d, device=device)
latest = ((ones @ W_qkv[:, 0]) * (ones @ W_qkv[:, 1])).sum(-1) > 0  # (W_q^T 1) · (W_k^T 1) > 0, per draw
mean_key = attention_weights(x + p, True) @ i  # sum_j a_ij j, causal: (draws, n)
coded = {causal: same_way(x + p, other + p, causal) for causal in (True, False)}
uncoded = same_way(x, other, True)
assert latest.any() and (~latest).any()  # both kinds of head among the draws
assert (mean_key[latest, 10:] > 0.6 * i[10:]).all() and (mean_key[~latest, 10:] < 8).all()  # late keys / start
assert (coded[True][latest] > 0.99).all() and (coded[False][latest] > 0.99).all()  # the outputs point one way
assert (coded[True][~latest] < 0.5).all() and (coded[False][~latest] < 0.5).all()
assert (uncoded.abs() < 0.1).all()  # the control: without the code, two sequences differ
print(f"heads with (W_q^T 1)·(W_k^T 1) > 0: {latest.sum().item()} of 10; mean cosine of the layer's outputs for "
      f"two sequences, positions >= 10: with the code {coded[True][latest].min():.3f} .. "
      f"{coded[True][latest].max():.3f} causal, {coded[False][latest].min():.3f} .. {coded[False][latest].max():.3f} "
      f"without the mask; other heads {coded[True][~latest].min():.2f} .. {coded[True][~latest].max():.2f}; "
      f"without the code {uncoded.min():.2f} .. {uncoded.max():.2f}")


# %% [markdown] slideshow={"slide_type": "subslide"}
# The figure plots the measured $\cos(x_i, x_i + p_i)$ against the position, for the integer
# code and for the normalised code of the next section (dashed: $1/\sqrt{1+i^2}$).

# %% slideshow={"slide_type": "skip"}
def code_cosines(n, d):
    """cos(x_i, x_i + p_i) for seeded layer-normalised tokens, integer and normalised codes."""
    gen = torch.Generator().manual_seed(0)
    tokens = F.layer_norm(torch.randn(n, d, generator=gen), (d,)).to(device)
    out = {}
    for name, normalize in (("integer i", False), ("normalised i/m", True)):
        code = pl.integer_positions(n, d, normalize=normalize, device=device)
        out[name] = F.cosine_similarity(tokens, tokens + code, dim=-1).cpu()
    return out


# %% slideshow={"slide_type": "fragment"}
curves = code_cosines(64, 64)
fig, ax = viz.figure(width=5.5, height=3.2)
for name, c in curves.items():
    ax.plot(c, marker=".", label=name)
ax.plot(1 / (1 + torch.arange(64) ** 2).sqrt(), "k--", lw=1, label="1/√(1+i²)")
ax.set(xlabel="position i", ylabel="cos(x_i, x_i + p_i)", ylim=(0, 1.05),
       title="d = 64: the token's share of the direction")
ax.legend(loc="center right")
wide = code_cosines(64, 512)["integer i"]
torch.testing.assert_close(wide, curves["integer i"], atol=1e-4, rtol=0)  # d = 512: the very same curve
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# The integer curve does not depend on $d$ at all (the cell checks $d = 512$ against $d = 64$):
# more features do not help, and a longer sequence only adds more hopeless positions.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2 · Normalised codes: small, but the step depends on the length
#
# Divide by the sequence length $m$ and every entry lies in $[0, 1)$:
# $p_i = \tfrac{i}{m}\cdot\mathbf 1$ (`normalize=True`). Now the step between neighbours is
# $1/m$: the same two words three positions apart are $3/m$ apart, which depends on how long
# the sentence is. Property 2 asks for a relation between $p_i$ and $p_{i+k}$ that depends
# on $k$ only, and this one also depends on $m$. Position 2 itself gets a different code in
# a 4-token and in an 8-token sentence. And dividing by $m$ does not help against the LayerNorm
# of section 1: $\tfrac{i}{m}\cdot\mathbf 1$ is still the same number in every feature, a mean
# that LayerNorm subtracts, so a model that normalises after the sum never sees this code either.

# %% slideshow={"slide_type": "fragment"}
short = pl.integer_positions(4, 1, normalize=True, device=device)[:, 0]
long = pl.integer_positions(8, 1, normalize=True, device=device)[:, 0]
print("m = 4:", short.tolist())
print("m = 8:", long.tolist())
assert short[2] == 0.5 and long[2] == 0.25  # same position, different code
torch.testing.assert_close(short[1:] - short[:-1], torch.full((3,), 1 / 4, device=device))
torch.testing.assert_close(long[1:] - long[:-1], torch.full((7,), 1 / 8, device=device))
print("step p_(i+1) - p_i: 1/4 for m = 4, 1/8 for m = 8")
p_norm = pl.integer_positions(n, d, normalize=True, device=device)  # section 1's 64 tokens, code i / 64
torch.testing.assert_close(F.layer_norm(h + p_norm, (d,)), F.layer_norm(h, (d,)), atol=1e-5, rtol=0)
print("LayerNorm(h + (i/m)·1) == LayerNorm(h): True")

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
# `001` next writes $i$ in binary, one bit per feature. We name each bit by its weight:
# **bit $b$** is worth $2^b$, so bit 0 is the least significant. The code is written the way
# numbers are, most significant bit first: with $d$ bits, column $c$ holds bit $d-1-c$. With
# $d = 3$ features the first positions are
# $p_0 = [0,0,0]$, $p_1 = [0,0,1]$, $p_2 = [0,1,0]$ (`001`'s rows too).
# `pl.binary_positions(n, d)` builds the table; $d$ bits name $2^d$ positions:

# %% slideshow={"slide_type": "fragment"}
B3 = pl.binary_positions(8, 3, device=device)
assert B3[:3].tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]  # the source's three rows
assert all(B3[i, 3 - 1 - b] == (i >> b) & 1 for i in range(8) for b in range(3))  # column d-1-b holds bit b
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
# ### ... and what a LayerNorm leaves of it
#
# Section 1's LayerNorm acts on the binary code too. It subtracts each token's mean over the
# features, so of $p_i$ it keeps only the centred code $p_i - \bar p_i\mathbf 1$, where $\bar p_i$
# is the share of ones among the bits of $i$:
# $\mathrm{LN}(h + p_i) = \mathrm{LN}(h + p_i - \bar p_i\mathbf 1)$ for every $h$.
# The part along $\mathbf 1$ is erased, a share $\bar p_i$ of the
# code's squared length (half, on average over the $2^d$ positions, counting $p_0$, which has no
# length to erase, as 0; over positions 1 to 63 of $d = 6$ the mean is 0.508).
#
# **Which positions merge.** Two codes become one when they differ only along $\mathbf 1$. Two
# different codes of 0s and 1s do that only if one is $[0, \dots, 0]$ and the other
# $[1, \dots, 1]$, so the one condition is: the bits fill every feature of the token ($d$ bits in
# $d$ features) and the table runs to $2^d$ rows. Then, behind a LayerNorm (the set-up of BERT and
# GPT-2, §1), positions 0 and $2^d - 1$ get the same code and property 1 fails for them, and for no
# other pair. The cell checks the merge for $d = 6$, and that with two more features left at 0 no
# two positions merge.

# %% slideshow={"slide_type": "fragment"}
share_of_ones = B6.mean(-1)  # the share of ones among the bits of i
centred = B6 - share_of_ones[:, None]
h6 = torch.randn(64, 6).to(device)
torch.testing.assert_close(F.layer_norm(h6 + B6, (6,)), F.layer_norm(h6 + centred, (6,)))  # LN sees the centred code
erased = 6 * share_of_ones**2  # the squared length along 1
torch.testing.assert_close(erased[1:] / ones[1:], share_of_ones[1:])  # a share of ones/d of the squared length
assert abs(share_of_ones.mean().item() - 0.5) < 1e-6  # half, on average over the 64 positions (p_0 counted as 0)
assert round(share_of_ones[1:].mean().item(), 3) == 0.508  # over positions 1 .. 63
torch.testing.assert_close(F.layer_norm(h6 + B6[0], (6,)), F.layer_norm(h6 + B6[63], (6,)))  # p_0 and p_63: one code
same = (centred[:, None] - centred[None]).abs().sum(-1) < 1e-6  # (64, 64): codes equal after centring
assert [(i, j) for i, j in same.nonzero().tolist() if i < j] == [(0, 63)]  # and no other pair
in_wider = F.pad(B6, (0, 2))  # the same 6 bits in 8 features, the last two left at 0
wider_centred = in_wider - in_wider.mean(-1, keepdim=True)
assert ((wider_centred[:, None] - wider_centred[None]).abs().sum(-1) < 1e-6).sum() == 64  # each only with itself
print("LayerNorm(h + p_0) == LayerNorm(h + p_63): True; every other pair stays apart; the bits in 8 features: "
      "no pair merges; share of the squared length erased, averaged over the positions:",
      round(share_of_ones.mean().item(), 2))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Fast low bits, slow high bits
#
# Down the table, bit 0 (the last column) flips at every step, bit 1 every 2 steps, bit 2
# every 4: bit $b$ flips every $2^b$ steps, so each column runs at half the speed of the one to
# its right. The heatmap shows the 6-bit code of 64 positions, bit 5 on the left. These are all
# the rows 6 bits have: position 64 would need a seventh.

# %% slideshow={"slide_type": "fragment"}
fig, ax = viz.figure(width=4.6, height=3.6)
viz.heatmap(B6, ax=ax, xlabel="bit b (worth 2^b), most significant first", ylabel="position i",
            colorbar="bit value", title="binary code, d = 6")
ax.set_xticks(range(6), [str(5 - c) for c in range(6)])  # column c holds bit 5 - c
flips_by_bit = (B6[1:] != B6[:-1]).sum(0).flip(0)  # entry b: how often bit b flips in 63 steps
assert flips_by_bit.tolist() == [64 // 2**b - 1 for b in range(6)]  # bit b flips every 2**b steps
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# `001` numbers the *columns* from the left, so its $p_{i,0}$ is the high bit (our bit
# $d-1$), which changes slowly, and it calls the fast low bit $p_{i,d}$. With $d$ columns
# numbered from 0 the last one is $p_{i,d-1}$; there is no $p_{i,d}$. In our naming the fast
# one is simply bit 0. The next plot draws each bit of the 4-bit code against the position,
# the picture `001` refers to.

# %% slideshow={"slide_type": "fragment"}
B4 = pl.binary_positions(16, 4)
assert (B4[1:, 3] != B4[:-1, 3]).all()  # column d-1 = p_{i,d-1} = bit 0 flips at every step
try:
    B4[:, 4]
    raise AssertionError("there should be no column d")
except IndexError:
    pass

fig, ax = viz.figure(width=5.5, height=3.2)
for c in range(4):  # column c holds bit 3 - c; bit b is drawn at height 1.5 b
    ax.step(range(16), B4[:, c] + 1.5 * (3 - c), where="mid")
ax.set(xlabel="position i", yticks=[1.5 * b + 0.5 for b in range(4)],
       yticklabels=[f"bit {b} = p_(i,{3 - b})" for b in range(4)],
       title="the 4-bit code: bit 0, the source's p_(i,3), is fastest")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Jumpy steps
#
# `001`'s last objection: the same token at positions 1 and 2 differs by
# $p_2 - p_1 = [0,1,0] - [0,0,1] = [0,1,-1]$, and more generally the distance between
# neighbours jumps around: 1 when only bit 0 flips, $\sqrt 2$ when two flip, up to
# $\sqrt d$ when a carry runs through every bit. A small shift of the sentence (one token
# more or less in front) moves different positions by very different amounts.
#
# The **sinusoidal code** of Vaswani et al., which chapter 3 develops, keeps every neighbour at
# the same distance. It splits the $d$ features into $d/2$ pairs; pair $j$ holds a sine and a
# cosine of the position at its own frequency $\theta_j = \text{base}^{-2j/d}$ (base 10 000):
#
# $$p_i[2j] = \sin(i\,\theta_j), \qquad p_i[2j+1] = \cos(i\,\theta_j), \qquad j = 0, \ldots, d/2 - 1,$$
#
# and `pl.sinusoidal_positions(n, d)` builds the $n\times d$ table. `pl.rope_frequencies(d)`
# returns the $\theta_j$; its name comes from RoPE (chapter 5), which turns its pairs at the very
# same frequencies. The cell checks the table against the formula, then compares its steps with
# the binary code's, at the same $d = 6$.

# %% slideshow={"slide_type": "fragment"}
assert (B3[2] - B3[1]).tolist() == [0, 1, -1]
step_binary = (B6[1:] - B6[:-1]).norm(dim=-1)
S6 = pl.sinusoidal_positions(64, 6, device=device)
theta6 = pl.rope_frequencies(6, device=device)  # theta_j = 10000^(-2j/6), j = 0, 1, 2
i64 = torch.arange(64, device=device, dtype=torch.float32)[:, None]
torch.testing.assert_close(S6[:, 0::2], torch.sin(i64 * theta6))  # the formula above, column by column
torch.testing.assert_close(S6[:, 1::2], torch.cos(i64 * theta6))
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

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Source `002`'s reasons against binary, checked
#
# Source `002` gives three reasons for leaving binary codes, and says it is unsure of them:
# (1) 0s and 1s "waste" what a float can hold; (2) they may be awkward to add to a word vector;
# (3) the code must serve sentences of every length and keep a fixed step, so one cannot encode
# integers and divide by `max_len`. The cell below checks each answer.
#
# 1. **Capacity is real, but it does not bite: bits run out slowly.** One pair of floats, $(\sin i, \cos i)$, gives
#    100 000 positions distinct codes, where two bits name 4; but distinct is not far apart:
#    $p_{710}$ is only $6\cdot 10^{-5}$ from $p_0$ (710 is within $10^{-4}$ of $113\cdot 2\pi$).
#    And $d$ bits name $2^d$ positions: 17 cover Llama 3.1's 131 072, in a model 4096 features
#    wide. So what a code needs from its floats is not more names but a better geometry.
# 2. **Adding costs little**: the bounded code does not swamp the token, and a LayerNorm after
#    the sum costs it one direction, its part along $\mathbf 1$, and at most one collision:
#    positions 0 and $2^d - 1$, only where the bits fill every feature (the previous subsection).
# 3. **Read as written, the fixed-step reason is wrong.** In `002`'s own code `max_len` is the
#    fixed table size, `torch.zeros(max_len, d_model)`, and dividing by it keeps the step fixed:
#    position 2 gets the same code in a sentence of 4 tokens as in one of 8, and one step is
#    1/`max_len` of a token (small, and erased like $i/m$, §2). The step changes with the length only
#    when the integers are divided by the sentence's own length, §2's $i/m$: position 2 gets another
#    code in 4 tokens than in 8, and the step $1/m$ changes. Binary codes
#    do not depend on the length, but their step is not fixed either: their neighbours are from 1 to
#    $\sqrt d$ apart (the figure above), while the Gray code of §4, the bits of $i \oplus (i \gg 1)$,
#    flips one bit per step, so all its neighbours are 1 apart.
#
# What remains against binary codes so far is their geometry, the jumps and the part a LayerNorm
# erases; section 4 asks next whether one fixed map takes $p_i$ to $p_{i+k}$. This chapter measures
# the codes, not a model trained on them: what the jumps cost a model is not measured here. One more
# difference matters past the training length: a model trained on up to $2^b$ tokens never sees bit
# $b$ (or any bit above it) set, and past that length every code has one set, an input it never met.

# %% slideshow={"slide_type": "fragment"}
import json
from importlib.resources import files

one_pair = pl.sinusoidal_positions(100_000, 2, dtype=torch.float64)  # (sin i, cos i): theta_0 = 1
assert torch.unique(one_pair, dim=0).shape[0] == 100_000  # every position its own code
near = (one_pair[710] - one_pair[0]).norm().item()
assert 5e-5 < near < 7e-5 and abs(710 - 113 * 2 * torch.pi) < 1e-4  # 710 positions on: back where it started
assert torch.unique(pl.binary_positions(2**16, 16), dim=0).shape[0] == 65_536  # 16 bits, 65 536 distinct codes
llama = json.loads((files("posenc_lib") / "data" / "model_rope_configs.json").read_text())["models"]["Llama 3.1 8B"]
context = llama["config"]["max_position_embeddings"]  # the released config.json
assert context == 131_072 == 2**17 and llama["config"]["hidden_size"] == 4096  # 17 bits are enough
print(f"one pair: 100 000 distinct codes, but ||p_710 - p_0|| = {near:.1e}; Llama 3.1: {context} positions = 2^17")

max_len = 512  # 002's table size: a sentence of m tokens takes the table's first m rows
by_table = lambda m: pl.integer_positions(m, d, device=device) / max_len  # noqa: E731  i / max_len, d = 64
by_length = lambda m: pl.integer_positions(m, d, normalize=True, device=device)  # noqa: E731  i / m (§2)
assert torch.equal(by_table(4)[2], by_table(8)[2]) and not torch.equal(by_length(4)[2], by_length(8)[2])
assert by_length(4)[1, 0] == 1 / 4 and by_length(8)[1, 0] == 1 / 8  # i / m: the step 1/m changes with the length
relative_step = (by_table(8)[1:] - by_table(8)[:-1]).norm(dim=-1) / x[:7].norm(dim=-1)  # x: §1's normalised tokens
torch.testing.assert_close(relative_step, torch.full((7,), 1 / max_len, device=device))  # 1/512 of a token
torch.testing.assert_close(F.layer_norm(h + by_table(n), (d,)), F.layer_norm(h, (d,)), atol=1e-5, rtol=0)  # as in §2
print("i / m: position 2 has another code in 4 tokens than in 8, step 1/4 against 1/8")
print("i / max_len: the same code for position 2 in 4 and 8 tokens, step 1/512 of a token")

assert torch.equal(pl.binary_positions(8, 6, device=device), B6[:8])  # binary: position i has one code, any length
assert (B6[:32, 0] == 0).all() and (B6[32:, 0] == 1).all()  # trained on 32 tokens: bit 5 never set; past them, always
print("binary rows do not depend on the sequence length; in the first 32 positions bit 5 is always 0, after them 1")

positions64 = torch.arange(64, device=device)
gray_step = B6[positions64 ^ (positions64 >> 1)].diff(dim=0).norm(dim=-1)  # Gray: binary rows of i XOR (i >> 1)
assert (gray_step == 1).all() and step_binary.min() == 1 and step_binary.max() > 2.4  # fixed step: Gray yes, binary no
print(f"neighbour distance, d = 6: binary {step_binary.min():.0f} to {step_binary.max():.2f}, Gray always 1")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4 · Is there a fixed affine map from $p_i$ to $p_{i+k}$?
#
# `001` says that binary codes satisfy property 2: from $p_i$ one gets $p_{i+k}$ simply. It calls
# the property 线性相关性 (linear dependence, or correlation) and defines it no further.
#
# This course reads it as a fixed **affine** map: one matrix $M_k$ and one vector $b_k$ with
# $p_{i+k} = M_k\,p_i + b_k$ for **every** $i$. That reading is our choice, not `001`'s words. We
# take the affine form because the integer code's shift meets it, with $M_k = I$ and
# $b_k = k\cdot\mathbf 1$. A linear map ($b_k = 0$) fails the integer code, as shown below. The
# sinusoids of chapter 3 meet property 2 with a linear map.
#
# A shift alone gives attention no relative reading. Attention compares codes through its maps:
# $p_i^\top W p_j$ with $W = W_q W_k^\top$ (§1's $q_i\cdot k_j$). For the integer code that is
# $(i\cdot\mathbf 1)^\top W (j\cdot\mathbf 1) = ij\,\mathbf 1^\top W \mathbf 1$, a product of the
# positions, not a function of their offset (the next cell checks it). Maps that keep dot products
# are chapter 3's subject. Here we test the binary code.
#
# **The test.** `pl.affine_shift_residual(table, k)` fits the best $M_k$ and $b_k$ by least squares
# over all pairs $(p_i, p_{i+k})$ of a table, in float64. It returns the smallest
# $\lVert [p_i, 1]\,A - p_{i+k}\rVert$ over all $(d+1)\times d$ matrices $A$ (the rows of
# $M_k^\top$, then $b_k$). Zero means an exact fit: one map moves every position of the table
# $k$ steps on. The next cell adds two helpers: `linear_residual`, the same test without $b_k$,
# and `best_fit_misfit`, what the fit leaves over at each pair.
#
# **Linear?** No, but that proves little. $p_0 = [0,\dots,0]$, every matrix maps $0$ to $0$, and
# $p_k \ne 0$. The integer code also has $p_0 = 0$, so it has no linear map either, yet its shift
# works. The cell checks both.

# %% slideshow={"slide_type": "fragment"}
def best_fit_misfit(table, k, shift=True):
    """p_(i+k) minus its least-squares prediction M p_i (+ b with `shift`), for every source i: (n - k, d), float64."""
    t = table.detach().to("cpu", torch.float64)
    sources = torch.cat([t[:-k], torch.ones(len(t) - k, 1, dtype=torch.float64)], 1) if shift else t[:-k]
    return t[k:] - sources @ torch.linalg.lstsq(sources, t[k:], driver="gelsd").solution


def linear_residual(table, k):
    """Smallest ||p_i M - p_(i+k)|| over all d x d matrices M (no shift), in float64."""
    return best_fit_misfit(table, k, shift=False).norm().item()


M = torch.randn(6, 6).to(device)  # any matrix at all
assert torch.equal(M @ B6[0], torch.zeros(6, device=device)) and B6[1:].abs().sum(-1).min() > 0
I6 = pl.integer_positions(64, 6, device=device)
assert I6[0].abs().sum() == 0  # the integer code's p_0 is 0 as well
lin_int = [linear_residual(I6, k) for k in range(1, 6)]
assert all(r > 9 for r in lin_int)  # no linear map for the integer code either ...
integer_logits = I6 @ M @ I6.T  # p_i^T M p_j for the integer code
torch.testing.assert_close(integer_logits, torch.outer(I6[:, 0], I6[:, 0]) * M.sum(), atol=1e-2, rtol=1e-4)  # i j 1^T M 1 ...
assert integer_logits[1, 3] != integer_logits[2, 4]  # ... so the same offset gives different logits
assert all(pl.affine_shift_residual(I6, k) < 1e-9 for k in range(1, 64))  # ... but an exact affine one, every k
assert all(abs(best_fit_misfit(I6, k).norm() - pl.affine_shift_residual(I6, k)) < 1e-9 for k in (1, 7))  # one test
assert all(linear_residual(B6, k) > 1 for k in range(1, 16))  # binary: no linear map
print("M p_0 = 0 for every M, but p_k != 0 for k = 1..63: no linear M_k")
print("integer code, best linear fit, k = 1..5:", [round(r, 1) for r in lin_int], "· best affine fit: 0")


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Affine?** Allow the shift. For the integer code (previous cell) and the sinusoidal code
# (same $d = 6$) the fit is exact for every $k$, the sinusoids' even without the shift (a linear
# map); for the binary code it fails for every small offset.

# %% slideshow={"slide_type": "fragment"}
offsets = range(1, 64)
res_binary = torch.tensor([pl.affine_shift_residual(B6, k) for k in offsets])
res_sin = torch.tensor([pl.affine_shift_residual(S6, k) for k in offsets])
assert (res_binary[:15] > 1).all()  # k = 1 .. 15: no affine map
assert (res_sin < 1e-4).all()  # sinusoids: an exact affine map for every k ...
assert all(linear_residual(S6, k) < 1e-4 for k in offsets)  # ... with no shift: a linear map
exact = [k for k, r in zip(offsets, res_binary) if r < 1e-9]
assert exact == [16, 32, 40, 48, 52, 56, 58, 60, 61, 62, 63]
print("binary code, offsets k with an exact affine fit:", exact)

# %% [markdown] slideshow={"slide_type": "fragment"}
# **A look ahead to chapter 3.** There the sinusoids' linear map turns out to be a rotation. A
# rotation keeps dot products, so their $p_i\cdot p_j$ depends on $j - i$ alone; $p_i^\top W p_j$
# does so when $W$ commutes with the rotations (chapter 3 shows when exactly), and a
# random $W$ loses it. The cell checks $W = I$, a $W$ that commutes (a scaled rotation on each
# pair) and the random $W$ of the linear test.

# %% slideshow={"slide_type": "fragment"}
W_turn = torch.block_diag(*[torch.tensor([[a_, b_], [-b_, a_]]) for a_, b_ in ((1.0, 2.0), (-0.5, 1.0), (3.0, 0.0))])
for name, W, offset_only in (("W = I", torch.eye(6), True), ("commuting W", W_turn, True), ("random W", M.cpu(), False)):
    sin_logits = S6 @ W.to(device) @ S6.T  # p_i^T W p_j for the sinusoids of section 3
    along = (sin_logits[1:, 1:] - sin_logits[:-1, :-1]).abs().max().item()  # change along each diagonal j - i
    assert along < 1e-4 if offset_only else along > 0.5  # W = I and a commuting W: the offset alone; random W: not
    print(f"sinusoids, {name}: p_i^T W p_j changes along a diagonal j - i by at most {along:.1e}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### A proof for every width
#
# For every $k$ from 1 to 15 the residual is large, and exact fits appear from $k = 16$ on. Least
# squares tests one table at a time; a proof for every width needs two facts.
#
# * **An affine map keeps balances.** If $p_a + p_b = p_c + p_e$, then for $f(p) = Mp + b$,
#   $f(p_a) + f(p_b) = M(p_a + p_b) + 2b = f(p_c) + f(p_e)$. So four positions whose codes balance,
#   while the codes $k$ steps on from them do not, rule out every affine map.
# * **Bits balance only against themselves.** For vectors $u, v, w$ of 0s and 1s, $u + w = 2v$
#   forces $u = v = w$: an entry of $u + w$ is 0 or 2 only where both entries are 0 or both are 1.
#
# Write $k = L\cdot K$, with $L = 2^a$ the lowest set bit of $k$ and $K = 2t + 1$ odd, and take
# the four sources $0, L, 2L, 3L$. All their bits are 0 except bits $a$ and $a + 1$, which run
# through the four patterns 00, 01, 10, 11, the corners of a square: $p_0 + p_{3L} = p_L + p_{2L}$.
# Their images are $(K + s)\,L$ for $s = 0, 1, 2, 3$. Below bit $a$ they are 0. Bit $a$, the last
# bit of $K + s$, reads $1, 0, 1, 0$ and balances. The bits above it hold the number
# $(K + s) \gg 1$, which is $t, t + 1, t + 1, t + 2$. So the images balance only if
# $\mathrm{bits}(t) + \mathrm{bits}(t+2) = 2\,\mathrm{bits}(t+1)$, which by the second fact needs
# $\mathrm{bits}(t) = \mathrm{bits}(t+1)$: impossible. For $k < 2^{d-2}$ the four sources and their
# images are all in the table (the largest image is $3L + k \le 4k < 2^d$, as $L \le k$), so
# **for every width $d$, there is no affine map for any $k < 2^{d-2}$.**
#
# **An example**, $d = 5$ and $k = 6 = 2\cdot 3$: $L = 2$ ($a = 1$), $K = 3$, $t = 1$. The sources
# $0, 2, 4, 6$ are `00000`, `00010`, `00100`, `00110`, a square in bits 1 and 2:
# $p_0 + p_6 = p_2 + p_4$. Their images $6, 8, 10, 12$ are `00110`, `01000`, `01010`, `01100`:
# bit 1 reads $1, 0, 1, 0$, and the bits above it hold $1, 2, 2, 3$ (that is $t, t+1, t+1, t+2$).
# So $p_6 + p_{12}$ = `00110` + `01100` = `0,1,2,1,0` while $p_8 + p_{10}$ = `01000` + `01010` =
# `0,2,0,1,0`: the images do not balance, and no affine map sends $p_i$ to $p_{i+6}$ for all $i$.
#
# This is also why four source patterns can block a fit. Four points in $\mathbb R^6$ that are
# affinely independent can be sent anywhere, but the corners of a square are not independent:
# one balance ties them, and the step $k$ breaks it.
#
# **With wrap-around** (positions modulo $2^d$, a counter) every source has its partner. The
# argument then needs only that bit $a + 1$ exists, $L \le 2^{d-2}$: the bits above $a$ hold
# $t, t+1, t+1, t+2$ modulo $2^{d-a-1} \ge 2$, and $t \ne t+1$ there too. That covers every
# $k < 2^d$ but $k = 2^{d-1}$. That one has a map: adding $2^{d-1}$ modulo $2^d$ flips the top bit
# and nothing else, $x \mapsto 1 - x$ in one coordinate. So of the plain table's exact fits, all
# but $k = 2^{d-1}$ come from its edge: the table stops at $2^d - 1$. (Which offsets fit on a
# table of any length is Exercise 1.)
#
# The cell checks the example first. Then it checks every step of the proof on the bits
# themselves: for every $k$ at every width from 3 to 12, and for sampled offsets at widths 20, 40
# and 60. Last, it runs least squares on the tables of widths 3 to 8, plain and wrapped around.

# %% slideshow={"slide_type": "fragment"}
import itertools
import random


def bits(x, d):
    """The d-bit code of the whole number x, bit 0 first: one row of the table, without the table."""
    return [x >> bit & 1 for bit in range(d)]


def plus(u, w):
    return [p + q for p, q in zip(u, w)]


def proof_steps(d, k, wrap=False):
    """The proof's steps for one width and offset: (the four sources balance, bit a of their images reads
    1, 0, 1, 0, the bits above a hold t, t+1, t+1, t+2, the images do not balance)."""
    low = k & -k  # L = 2^a, the lowest set bit of k
    a, t = low.bit_length() - 1, (k // low - 1) // 2  # k = L (2t + 1)
    sources = [0, low, 2 * low, 3 * low]
    images = [(x + k) % 2**d if wrap else x + k for x in sources]
    assert max(sources) < 2**d and max(images) < 2**d  # every source and its partner in the table
    return (plus(bits(sources[0], d), bits(sources[3], d)) == plus(bits(sources[1], d), bits(sources[2], d)),
            [x >> a & 1 for x in images] == [1, 0, 1, 0],
            [x >> (a + 1) for x in images] == [(t + s) % 2 ** (d - a - 1) for s in (0, 1, 1, 2)],
            plus(bits(images[0], d), bits(images[3], d)) != plus(bits(images[1], d), bits(images[2], d)))


example = [bits(x, 5) for x in (0, 2, 4, 6, 8, 10, 12)]  # d = 5, k = 6: sources 0, 2, 4, 6; images 6 .. 12
assert plus(example[0], example[3]) == plus(example[1], example[2])  # the sources balance ...
assert plus(example[3], example[6]) == [0, 1, 2, 1, 0][::-1] and plus(example[4], example[5]) == [0, 2, 0, 1, 0][::-1]
assert all(proof_steps(5, 6))  # ... their images do not (bits() lists bit 0 first, the text most significant first)
triples = itertools.product(itertools.product((0, 1), repeat=3), repeat=3)  # every u, v, w of three bits
assert all(u == v == w for u, v, w in triples if plus(u, w) == [2 * x for x in v])  # u + w = 2v: all equal
for d in range(3, 13):
    assert all(all(proof_steps(d, k)) for k in range(1, 2 ** (d - 2)))
    assert all(all(proof_steps(d, k, wrap=True)) for k in range(1, 2**d) if k != 2 ** (d - 1))
draw = random.Random(0)
for d in (20, 40, 60):
    ks = [1, 2 ** (d - 2) - 1] + [draw.randrange(1, 2 ** (d - 2)) for _ in range(300)]
    assert all(all(proof_steps(d, k)) for k in ks)
    assert all(all(proof_steps(d, k, wrap=True)) for k in ks + [2 ** (d - 1) + 1, 2**d - 1])
print("every step of the proof holds: every k < 2^(d-2) for d = 3 .. 12 (and every k but 2^(d-1) with "
      "wrap-around), and 302 offsets each at d = 20, 40, 60")

first_exact, only_wrapped = {}, {}
for width in range(3, 9):
    table = pl.binary_positions(2**width, width, dtype=torch.float64)
    fits = [k for k in range(1, 2**width) if pl.affine_shift_residual(table, k) < 1e-9]
    first_exact[width] = fits[0]
    wrapped = torch.cat([table, table])  # positions mod 2^width: p_(i+k) for every i
    only_wrapped[width] = [k for k in range(1, 2**width)
                           if pl.affine_shift_residual(wrapped[: 2**width + k], k) < 1e-9]
    top_flipped = table.clone()
    top_flipped[:, 0] = 1 - top_flipped[:, 0]  # column 0 holds the top bit
    assert torch.equal(table.roll(-(2 ** (width - 1)), 0), top_flipped)  # k = 2^(d-1), wrapped: the top bit flips
assert first_exact == {width: 2 ** (width - 2) for width in range(3, 9)}
assert only_wrapped == {width: [2 ** (width - 1)] for width in range(3, 9)}
print("least squares, first exact offset for d = 3 .. 8:", first_exact, "· with wrap-around only 2^(d-1):",
      only_wrapped)

# %% [markdown] slideshow={"slide_type": "fragment"}
# The figure draws each residual per pair, the root mean square over the $64 - k$ pairs the fit
# must match (the raw residual would also shrink with $k$ just because fewer pairs count).

# %% slideshow={"slide_type": "fragment"}
pairs_per_k = torch.tensor([64.0 - k for k in offsets])  # the pairs each fit must match
fig, ax = viz.figure(width=5.5, height=3.0)
ax.bar(list(offsets), res_binary / pairs_per_k.sqrt(), width=0.8, label="binary")
ax.plot(list(offsets), res_sin / pairs_per_k.sqrt(), "k.", label="sinusoidal")
ax.set(xlabel="offset k", ylabel="residual per pair (root mean square)", title="best affine map p_i → p_(i+k), d = 6")
ax.legend()
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# **What the code shows.** $p_{i+k}$ is a *function* of $p_i$: add $k$ in binary. It is not an
# affine one, because which bits flip depends on the carries, that is, on $i$. So binary codes
# fail property 2, even in its affine form, for every $k < 2^{d-2}$, contrary to `001`.
#
# **Different steps are not the failure.** The left heatmap shows the steps $p_{i+3} - p_i$ of the
# 6-bit code, one row per source $i$: +1 where a bit turns on, −1 where it turns off. The carries
# make the rows differ from source to source (nine different rows). The sinusoidal code's steps, on
# the right, differ too (61 different rows): a rotation moves every point by a vector of its own.
# Property 2 asks for one *map* for all sources, not one step. What measures it is the **misfit**
# of the best affine map at each source, $p_{i+k} - (M_k p_i + b_k)$: zero for the sinusoids (the
# cell checks it), not for the binary code.
#
# The widget below the figure draws that misfit for any width and offset. Besides the binary and
# the sinusoidal code it offers the reflected **Gray code**, the bits of $i \oplus (i \gg 1)$. The
# Gray code cures the jumps: every step flips exactly one bit. Yet on the 6-bit table it has no
# fixed map for any $k < 16$ either: even steps are not enough (the cell checks both).
#
# **Reading the widget.** Each row of the heatmap is a source $i$, each column a feature; an exact
# map leaves every cell white. The title gives the misfit per pair (root mean square) and the width
# drawn. The sinusoids need an even $d$, so for an odd one they get $d + 1$. For the binary code
# the last column, bit 0, stays white at every $k$: bit 0 of $i + k$ is bit 0 of $i$ or its
# complement, an affine function of it. The misfit sits in the bits that carries reach. Try $k = 3$
# for each code.
#
# At $k = 16$ the binary code fits exactly on the 64-row table, but not on the 128-row one
# ($d = 7$: its first exact offset there is 32, as printed above). **Predict before you move the
# slider:** does the Gray code fit exactly at $k = 16$, on the 64-row table, and on the 128-row
# table? The answer is below the widget.

# %% slideshow={"slide_type": "fragment"}
def gray_positions(n, d):
    """The reflected Gray code of positions 0 .. n-1 in d bits: the binary code of i XOR (i >> 1)."""
    i = torch.arange(n)
    return pl.binary_positions(2**d, d)[i ^ (i >> 1)]


G6 = gray_positions(64, 6)
assert ((G6[1:] != G6[:-1]).sum(-1) == 1).all() and torch.unique(G6, dim=0).shape[0] == 64  # one bit per step
assert all(pl.affine_shift_residual(G6, k) > 1 for k in range(1, 16))  # and no affine map for k < 16
assert all(best_fit_misfit(B6, k)[:, -1].abs().max() < 1e-9 for k in offsets)  # bit 0: white at every k
steps3 = {"binary": B6[3:] - B6[:-3], "sinusoidal": S6[3:] - S6[:-3]}  # p_(i+3) - p_i, one row per source i
assert torch.unique(steps3["binary"], dim=0).shape[0] == 9  # nine different steps for the one offset k = 3
assert torch.unique(steps3["sinusoidal"].cpu().double().round(decimals=6), dim=0).shape[0] == 61  # all different
assert best_fit_misfit(S6, 3).abs().max() < 1e-5 < 0.5 < best_fit_misfit(B6, 3).abs().max()  # yet one map
fig, axes = viz.figure(ncols=2, width=3.6, height=3.6)
for ax, (name, steps) in zip(axes, steps3.items()):
    viz.heatmap(steps, ax=ax, xlabel="feature (binary: bit 5 … bit 0)", ylabel="source position i",
                colorbar="p_(i+3) − p_i", diverging=True, vmax=1,
                title=f"{name}, k = 3: {torch.unique(steps.cpu().double().round(decimals=6), dim=0).shape[0]} "
                      "different steps")
fig

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
# nbval-ignore-output: a widget's stored output is its model id, new on every run.
codes = {"binary": pl.binary_positions, "Gray": gray_positions,
         "sinusoidal": lambda n, d: pl.sinusoidal_positions(n, d + d % 2, dtype=torch.float64)}  # pairs: d even


def draw_misfit(fig, code, d, k):
    ax = fig.subplots()
    image = viz.heatmap(best_fit_misfit(codes[code](2**d, d), min(k, 2**d - 1)), ax=ax, colorbar="misfit",
                        xlabel="feature (bits: most significant first)", ylabel="source position i",
                        diverging=True, vmax=1)

    def update(code, d, k):
        k = min(k, 2**d - 1)
        misfit = best_fit_misfit(codes[code](2**d, d), k)
        viz.update_heatmap(image, misfit, vmax=1)
        ax.set_title(f"{code}, d = {misfit.shape[1]}, k = {k}: misfit per pair "
                     f"{misfit.norm() / misfit.shape[0] ** 0.5:.3f}")

    update(code, d, k)
    return update


assert codes["sinusoidal"](8, 3).shape == (8, 4)  # an odd width draws the next even one


misfit_widget = viz.InteractiveFigure(
    draw_misfit, figsize=(4.6, 3.6),
    code=widgets.Dropdown(options=list(codes), value="binary", description="code"),
    d=widgets.IntSlider(6, min=3, max=8, description="bits d"),
    k=widgets.IntSlider(3, min=1, max=64, description="offset k"),
)
misfit_widget

# %% [markdown] slideshow={"slide_type": "fragment"}
# **The answer.** Like the binary code, the Gray code fits exactly at $k = 16$ on the 64-row
# table. On the 128-row table (7 bits, where 16 is $2^{d-3}$) neither code fits at $k = 16$.
#
# The two fits at $k = 2^{d-2}$ have different reasons. The binary code's comes from where the
# table ends (§4): on the wrapped table (positions modulo $2^d$) it is gone. The Gray code's is a
# map of its own. Adding $2^{d-2}$ turns its top two bits one step around the square
# 00 → 01 → 11 → 10, flips bit $d-3$ and leaves the rest. That is an affine map, so it fits the
# wrapped table too. The cell checks that map at every position, and both codes on both tables,
# plain and wrapped, at 6 and 7 bits.

# %% slideshow={"slide_type": "fragment"}
assert pl.affine_shift_residual(B6, 16) < 1e-9 and pl.affine_shift_residual(G6, 16) < 1e-9  # k = 16: both fit ...
seven_bits = (pl.binary_positions(128, 7), gray_positions(128, 7))
assert min(pl.affine_shift_residual(code, 16) for code in seven_bits) > 1  # ... but on 7 bits neither does
for width in (6, 7):  # wrapped around (positions mod 2^d), at k = 2^(d-2)
    plain_b, plain_g = pl.binary_positions(2**width, width), gray_positions(2**width, width)
    wrap_b, wrap_g = (torch.cat([t, t])[: 2**width + 2 ** (width - 2)] for t in (plain_b, plain_g))
    assert pl.affine_shift_residual(wrap_g, 2 ** (width - 2)) < 1e-9  # Gray: its own map, edge or not
    assert pl.affine_shift_residual(wrap_b, 2 ** (width - 2)) > 1  # binary: only the table's end fits it
    around = {(0, 0): [0, 1], (0, 1): [1, 1], (1, 1): [1, 0], (1, 0): [0, 0]}  # top two bits: one step around
    mapped = [around[tuple(row[:2])] + [1 - row[2]] + row[3:] for row in plain_g.int().tolist()]  # bit d-3 flipped
    assert wrap_g[2 ** (width - 2):].int().tolist() == mapped  # Gray at i + 2^(d-2) (mod 2^d), for every i
print("k = 16: binary and Gray fit exactly on 6 bits; on 7 bits, residuals",
      [round(pl.affine_shift_residual(code, 16), 2) for code in seven_bits])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5 · Sinusoids as smooth binary digits
#
# Look at bit $b$ of $i$, counting from the least significant ($b = 0$). It is 0 for
# $2^b$ positions, then 1 for $2^b$ positions: a square wave with period $2^{b+1}$. A sine
# of the same period, shifted by half a step, has exactly the opposite sign pattern:
#
# $$\text{bit}_b(i) = 1 \iff \sin\!\left(\frac{\pi\,(i + \tfrac12)}{2^b}\right) < 0 .$$
#
# Drop the hard threshold and keep the smooth wave, $(1 - \sin(\pi(i+\frac12)/2^b))/2$, and
# each bit becomes a continuous digit. The cell checks the identity for all 64 positions and
# 6 bits; the figure overlays the bits and their smooth versions.

# %% slideshow={"slide_type": "fragment"}
pos64 = torch.arange(64, dtype=torch.float64)
for b in range(6):
    bit = (torch.arange(64) >> b) & 1
    wave = torch.sin(torch.pi * (pos64 + 0.5) / 2**b)
    assert torch.equal(bit.bool(), wave < 0)
    torch.testing.assert_close(B6[:, 5 - b].cpu().long(), bit)  # the library's column 5 - b is bit b
print("bit b of i == (sin(pi (i + 1/2) / 2**b) < 0) for i < 64, b < 6")

fine = torch.linspace(-0.5, 15.5, 400, dtype=torch.float64)
fig, ax = viz.figure(width=5.5, height=3.4)
for b in range(4):
    offset = 1.5 * b
    line, = ax.step(range(16), ((torch.arange(16) >> b) & 1) + offset, where="mid", lw=1.5)
    ax.plot(fine, (1 - torch.sin(torch.pi * (fine + 0.5) / 2**b)) / 2 + offset, "--", color=line.get_color())
ax.set(xlabel="position i", yticks=[1.5 * b + 0.5 for b in range(4)],
       yticklabels=[f"bit {b}" for b in range(4)], ylabel="bit b (0 = least significant)",
       title="bits (steps) and sinusoids of period 2^(b+1) (dashed)")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# The bits' frequencies halve from one digit to the next: $\pi, \pi/2, \pi/4, \ldots$ (bit $b$
# is the wave $\sin(\pi(i+\tfrac12)/2^b)$). The sinusoidal code's frequencies
# $\theta_j = \text{base}^{-2j/d}$ (section 3) also shrink by a constant factor per pair,
# $\text{base}^{-2/d}$. With $\text{base} = 2^{d/2}$ that factor is exactly $1/2$, as for the
# bits, but the frequencies themselves are $1, 1/2, 1/4, \ldots$, a factor $\pi$ below the bits':
# the formula starts at $\theta_0 = \text{base}^0 = 1$ whatever the base, so its fastest pair
# turns once in $2\pi \approx 6.3$ positions where bit 0 repeats every 2. With the usual base
# 10 000 and $d = 512$ the factor is about 0.965: many more, slowly spaced "digits". Each digit
# is a sine *and* a cosine, which is what makes the fixed rotation $M_k$ of chapter 3 possible.

# %% slideshow={"slide_type": "fragment"}
d8 = 8
theta = pl.rope_frequencies(d8, base=2 ** (d8 / 2))
torch.testing.assert_close(theta[1:] / theta[:-1], torch.full((3,), 0.5))  # halving, like the bits
torch.testing.assert_close(torch.pi * theta, torch.pi / 2 ** torch.arange(4.0))  # pi * theta_j = bit j's frequency
assert all(pl.rope_frequencies(8, base=b)[0] == 1 for b in (16.0, 100.0, 10000.0))  # theta_0 = 1, any base
theta512 = pl.rope_frequencies(512, dtype=torch.float64)
ratio512 = theta512[1:] / theta512[:-1]
torch.testing.assert_close(ratio512, torch.full_like(ratio512, 10000 ** (-2 / 512)))
print("base 2**(d/2): theta_j =", theta.tolist(), "· the bits: pi times these")
print("base 10000, d = 512: ratio between neighbouring frequencies =", round(ratio512[0].item(), 4))

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6 · Learned tables: BERT and GPT-2
#
# Why design $p_i$ at all? BERT (Devlin et al., 2019) and GPT-2 (Radford et al., 2019) let
# training choose it. The model keeps a table $E$ with one row per position, `max_len` rows in
# all (512 in BERT, 1024 in GPT-2), and adds row $i$ to the token at position $i$:
# $x_i' = x_i + E_i$. The rows start as small random numbers and are trained by gradient descent
# with every other weight. In transformers both models draw them from $\mathcal N(0, 0.02^2)$, the
# `initializer_range` of their configs (the cell measures it on freshly built models); OpenAI's
# original GPT-2 code drew its position table with standard deviation 0.01 and its token table
# with 0.02 (cited from `openai/gpt-2`, `src/model.py`; not run here). `pl.LearnedPositionalEncoding(max_len, d)` is such a
# table, an `nn.Embedding` with `max_len` rows that starts like transformers'. A sequence longer
# than the table has no rows to add.

# %% slideshow={"slide_type": "fragment"}
table = pl.LearnedPositionalEncoding(max_len=8, d=4).to(device)
E8 = table.embedding.weight  # (max_len, d): one trainable row per position
tokens = torch.randn(5, 4).to(device)
torch.testing.assert_close(table(tokens), tokens + E8[:5])  # row i is added to the token at position i
assert tuple(E8.shape) == (8, 4) and E8.requires_grad
try:
    table(torch.randn(9, 4).to(device))
    raise AssertionError("a 9th position should have no row")
except ValueError as e:
    print("9 tokens:", e)
assert abs(pl.LearnedPositionalEncoding(max_len=512, d=64).embedding.weight.std().item() - 0.02) < 1e-3  # initial std

g = torch.manual_seed(0)
fresh = {"BERT": BertModel(BertConfig(vocab_size=50, hidden_size=64, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=64)).embeddings.position_embeddings.weight,
         "GPT-2": GPT2Model(GPT2Config(vocab_size=50, n_embd=64, n_layer=1, n_head=2, bos_token_id=0,
                                       eos_token_id=0)).wpe.weight}  # the default table sizes, tiny widths
assert fresh["BERT"].shape[0] == 512 and fresh["GPT-2"].shape[0] == 1024
assert BertConfig().initializer_range == GPT2Config().initializer_range == 0.02  # the configs' default
assert all(abs(rows.mean().item()) < 1e-3 and abs(rows.std().item() - 0.02) < 1e-3  # N(0, 0.02^2), drawn:
           for rows in fresh.values())  # 32 768 and 65 536 values
print("transformers' fresh position tables: BERT 512 rows, GPT-2 1024 rows, std",
      ", ".join(f"{rows.std().item():.3f}" for rows in fresh.values()))


# %% [markdown] slideshow={"slide_type": "subslide"}
# ### What does a table learn?
#
# Whatever the training data make positions useful for. A small experiment: every sequence
# repeats a random block of 4 tokens, `a b c d a b c d ...`, 32 tokens long, and a small model
# learns to predict the next token. Once it has seen one block, the next token is the one 4
# places before it, and equally the one 8 places before it, and so on: the model has to find
# earlier tokens by their *phase*, position $\bmod 4$ (which phase, the next subsections measure).
#
# The model is `pl.TinyDecoder` (the small decoder chapter 7 trains with every method), here
# with one layer: each token id picks a row of a token table (16 tokens, 32 features), the
# position's row $E_i$ of a learned table of `max_len = 64` rows is added, and one block
# follows: a LayerNorm, causal attention with two heads (queries, keys and values are linear maps
# of the normalised sum), its output added back to the sum, then a LayerNorm, a small MLP, added
# back again; a last LayerNorm and a linear layer give the 16 logits of the next token.
# `model.attention_logits(tokens)` hands out the attention logits, whose softmax is the weights
# the heads used. We train for 200 steps of Adam, three times with three seeds; the figures show
# seed 0, every measurement below runs on all three. (Adam without weight decay: a row that gets
# no gradient is not touched at all, which we use below.)

# %% slideshow={"slide_type": "fragment"}
def repeating_blocks(batch, length, vocab, generator, period=4):
    """(batch, length) token ids that repeat a random block of `period` tokens: a b c d a b c d ..."""
    block = torch.randint(vocab, (batch, period), generator=generator)
    return block.repeat(1, length // period + 1)[:, :length]


VOCAB, TRAIN_LEN, MAX_LEN = 16, 32, 64


# A model this small is quick enough on the CPU: it stays there. The asserts below use tolerance bands,
# and the printed digits are rounded so that they agreed on the CPUs tested (no promise for every CPU).
train_on = torch.device("cpu")


def train_table_model(seed, steps=200):
    """A one-layer TinyDecoder with a learned table of MAX_LEN rows, trained on length TRAIN_LEN.
    Returns the model, its table's initial rows, the last loss and the data generator."""
    torch.manual_seed(seed)
    net = pl.TinyDecoder(vocab_size=VOCAB, positional="learned", d_model=32, num_heads=2, num_layers=1,
                         d_ff=64, max_len=MAX_LEN).to(train_on)
    start = net.positional.encoding.embedding.weight.detach().clone()
    adam = torch.optim.Adam(net.parameters(), lr=1e-2)
    gen = torch.Generator().manual_seed(seed)
    for _ in range(steps):
        batch = repeating_blocks(32, TRAIN_LEN + 1, VOCAB, gen).to(train_on)  # inputs: positions 0 .. 31
        last = F.cross_entropy(net(batch[:, :-1]).flatten(0, 1), batch[:, 1:].flatten())
        adam.zero_grad()
        last.backward()
        adam.step()
    return net, start, last.item(), gen


threads = torch.get_num_threads()
torch.set_num_threads(1)  # matrices this small: one CPU thread is fastest (no waiting on the others)
try:
    runs = [train_table_model(seed) for seed in range(3)]
finally:
    torch.set_num_threads(threads)
model, E_init, loss, data = runs[0]  # seed 0 for the figures
E = model.positional.encoding.embedding.weight  # (64, 32), the learned table

assert abs(E_init.std().item() - 0.02) < 0.002  # the library starts the rows at N(0, 0.02^2)
# The first 3 next tokens cannot be guessed (log 16 each), the other 29 can: the best loss is 3 log(16) / 32.
guessing = torch.log(torch.tensor(float(VOCAB))).item()
best = 3 * guessing / TRAIN_LEN
assert abs(best - 0.26) < 0.005 and abs(guessing - 2.77) < 0.005  # the two numbers printed below
assert all(run[2] < 0.5 < guessing for run in runs)  # every seed
print(f"training loss below 0.5 for every seed (best possible {best:.2f}, guessing {guessing:.2f}): True")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The figure compares every row of the trained table with every other: entry $(i, j)$ is the
# cosine between $E_i$ and $E_j$. The 32 rows the model was trained on (top left, inside the
# lines) show stripes parallel to the diagonal, repeating every 4 positions: the cosine on average
# depends on $j - i \bmod 4$ (the next cell measures each stripe); the 32 rows it never used look like noise.

# %% slideshow={"slide_type": "fragment"}
unit = F.normalize(E.detach(), dim=-1)
cos_rows = unit @ unit.T  # (64, 64)
fig, ax = viz.figure(width=4.8, height=4.0)
viz.heatmap(cos_rows, ax=ax, xlabel="position j", ylabel="position i", colorbar="cos(E_i, E_j)",
            diverging=True, vmax=1, title=f"learned rows after training on length {TRAIN_LEN}")
ax.axhline(TRAIN_LEN - 0.5, color="k", lw=1)
ax.axvline(TRAIN_LEN - 0.5, color="k", lw=1)
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# The next cell measures, on the 32 trained rows of every seed and on the same rows before
# training, how alike rows are by their distance mod 4, how much of them one period-4 wave
# explains, and how alike neighbouring rows are.

# %% slideshow={"slide_type": "fragment"}
idx = torch.arange(TRAIN_LEN, device=train_on)
phase = (idx[None, :] - idx[:, None]) % 4  # (j - i) mod 4: key minus query
off_diagonal = idx[:, None] != idx[None, :]


def cosines_by_phase(table):
    """Mean cosine of rows r = 0, 1, 2, 3 apart (mod 4), of neighbours i, i + 1, and mean |cosine| of neighbours
    and of all rows 1 or 3 apart (mod 4), over the first TRAIN_LEN rows of a (max_len, d) table."""
    rows = F.normalize(table.detach()[:TRAIN_LEN], dim=-1)
    cos = rows @ rows.T
    one_apart = ((phase == 1) | (phase == 3)) & off_diagonal
    return ([cos[(phase == r) & off_diagonal].mean().item() for r in range(4)], cos.diagonal(1).mean().item(),
            (cos.diagonal(1).abs().mean().item(), cos[one_apart].abs().mean().item()))


phase_wave = torch.stack([torch.cos(torch.pi * idx / 2), torch.sin(torch.pi * idx / 2)], 1).double()  # (32, 2)
period4_basis = torch.cat([torch.ones_like(phase_wave[:, :1]), phase_wave,
                           torch.cos(torch.pi * idx).double()[:, None]], 1)  # (32, 4): every period-4 sequence


def period4_fit(table):
    """Least squares E_i ~ a cos(pi i / 2) + b sin(pi i / 2) over the first TRAIN_LEN rows: (share of the squared
    length explained, cos(a, b), |a| / |b|, share explained by all four period-4 parts)."""
    rows = table.detach()[:TRAIN_LEN].double()
    a, b = torch.linalg.lstsq(phase_wave, rows).solution
    by_phase = [rows[r::4].mean(0) for r in range(4)]  # the mean row of each phase
    torch.testing.assert_close((a, b), ((by_phase[0] - by_phase[2]) / 2, (by_phase[1] - by_phase[3]) / 2),
                               atol=1e-5, rtol=0)  # float32 waves: cos(pi / 2) is 4e-8, not 0
    share = 1 - ((rows - phase_wave @ torch.stack([a, b])).norm() ** 2 / rows.norm() ** 2).item()
    every_part = torch.linalg.lstsq(period4_basis, rows).solution  # constant, both waves, cos(pi i)
    share_period4 = 1 - ((rows - period4_basis @ every_part).norm() ** 2 / rows.norm() ** 2).item()
    return share, F.cosine_similarity(a, b, dim=0).item(), (a.norm() / b.norm()).item(), share_period4


by_seed = [cosines_by_phase(net.positional.encoding.embedding.weight) for net, *_ in runs]
at_init = [cosines_by_phase(start) for _, start, *_ in runs]  # the same rows before training
for by_phase, neighbours, _ in by_seed:
    assert by_phase[0] > 0.7 and by_phase[2] < -0.6  # same phase alike, opposite phase opposite
    assert abs(by_phase[1] - by_phase[3]) < 1e-6  # one number: the cosine matrix is symmetric
    assert abs(by_phase[1]) < 0.1 and abs(neighbours) < 0.1  # 1 or 3 apart: near 0
abs_cos = [(trained[2], start[2]) for trained, start in zip(by_seed, at_init)]  # ((neighbours, 1 or 3 apart), ...)
assert all(t[0] < 0.09 and 0.13 < s[0] < 0.2 for t, s in abs_cos)  # neighbours: below initialisation, every seed
assert all(t[1] < 0.09 and 0.13 < s[1] < 0.16 for t, s in abs_cos[:2])  # all pairs one phase apart: seeds 0, 1
assert abs_cos[2][0][1] > abs_cos[2][1][1]  # ... but above initialisation for seed 2
fits = [(period4_fit(net.positional.encoding.embedding.weight), period4_fit(start)) for net, start, *_ in runs]
for (share, cos_ab, ratio, share_period4), (share_init, *_) in fits:
    assert 0.65 < share < 0.85 and abs(cos_ab) < 0.1 and 0.9 < ratio < 1.1  # a square: a, b orthogonal, equally long
    assert share <= share_period4 < 0.9  # all period-4 parts: over 10% of the rows is not period 4
    assert 0.05 < share_init < 0.07  # before training: about 2 of 32 dimensions' worth
for seed, ((by_phase, neighbours, _), (t, s), ((share, cos_ab, ratio, share_period4), (share_init, *_))) in enumerate(
        zip(by_seed, abs_cos, fits)):  # + 0.0: no "-0.0"
    print(f"seed {seed}: mean cosine of rows r = 0, 1 (= 3), 2 apart (mod 4):", [round(c, 2) + 0.0 for c in by_phase[:3]],
          f"· of neighbours: {round(neighbours, 2) + 0.0}")
    print(f"        period-4 wave explains {share:.0%} (initial {share_init:.0%}), cos(a, b) = "
          f"{round(cos_ab, 2) + 0.0}, |a| / |b| = {ratio:.2f}; all period-4 parts explain {share_period4:.0%}")
    print(f"        mean |cos| of neighbours {t[0]:.2f} (initial {s[0]:.2f}), of all rows 1 or 3 apart {t[1]:.2f} "
          f"(initial {s[1]:.2f})")


# %% [markdown] slideshow={"slide_type": "fragment"}
# **What it showed: the table learned mostly a period-4 wave**, the kind of code chapter 3 builds
# by design, and its neighbouring rows are *not* alike.
#
# Rows a multiple of 4 apart point the same way (mean cosine about 0.8). Rows 2 apart point
# opposite ways (about −0.7). Rows 1 or 3 apart, neighbours among them, have a mean cosine near 0.
# These are the figure's stripes. The means for $j - i \equiv 1$ and $j - i \equiv 3 \pmod 4$ are
# one number, not two measurements: the cosine matrix is symmetric, and the pairs 3 apart are the
# pairs 1 apart, transposed (the cell checks it).
#
# Those phases suggest a square: two directions $a$ and $b$, at right angles and of equal length,
# with position $i$ near $a\cos(\pi i/2) + b\sin(\pi i/2)$, a quarter turn per position. Fitted by
# least squares over the 32 trained rows, this wave explains between 65% and 85% of the rows'
# squared length. For the same rows before training ($E_{\text{init}}$) it explains 5–7%.
#
# The fit also gives $\lvert\cos(a, b)\rvert < 0.1$ and $\lVert a\rVert / \lVert b\rVert$ between
# 0.9 and 1.1 (all printed). These two numbers are not further evidence for the square. Over the 32
# rows, least squares makes $a$ half the mean row of phase 0 minus that of phase 2, and $b$ the same
# of phases 1 and 3 (the cell checks it). So $a\cdot b$ sums only products of rows one phase apart,
# whose cosines were just measured near 0: the two numbers restate the phases.
#
# Fitting the other period-4 parts too (a constant and $\cos(\pi i)$) still leaves over 10% of
# every seed's rows. That part is not period 4, and this chapter does not analyse it.
#
# Neighbours $E_i, E_{i+1}$ have a mean $\lvert\cos\rvert$ below 0.09 for every seed, against
# 0.13–0.2 for the same rows before training. Over all pairs of rows one phase apart it is below
# 0.09 for seeds 0 and 1; for seed 2 it is above its value before training (both printed). Nothing
# in a table makes $E_{i+1}$ close to $E_i$; neighbours end up similar only where the data reward
# it. (What the tables of BERT and GPT-2 hold after training on text is studied by Wang & Chen,
# 2020, arXiv:2010.04903.)


# %% [markdown] slideshow={"slide_type": "subslide"}
# **Why period 4?** The next token after position $i$ is the token at $i - 3$ (and $i - 7$,
# $i - 11$, ...): the keys whose phase is one step ahead, $j \equiv i + 1 \pmod 4$. So all that the
# positions have to tell attention is "query of phase $r$, look for keys of phase $r + 1$". The
# cell measures that this is what the model does: for every seed, both heads put above 95% of
# their weight, on average over queries 3 to 31, on exactly those keys. The control zeroes the
# position rows (the same weights, the same sequences): then both heads put under 30% there, near
# the 22% that attention spread evenly over the keys it may see would put there (computed in the cell).

# %% slideshow={"slide_type": "fragment"}
def next_phase_weight(net, gen):
    """Each head's attention weight on keys n ≡ i + 1 (mod 4), n <= i, averaged over queries 3 .. 31."""
    tokens = repeating_blocks(64, TRAIN_LEN, VOCAB, gen).to(train_on)
    weights = net.attention_logits(tokens)[0].softmax(-1).mean(0)  # (heads, 32, 32), averaged over the batch
    next_phase = (phase == 1) & (idx[None, :] <= idx[:, None])  # j - i = 1 (mod 4), j <= i
    return (weights * next_phase).sum(-1)[:, 3:].mean(-1)


heads, heads_no_position = [], []
for seed, (net, *_) in enumerate(runs):
    heads.append(next_phase_weight(net, torch.Generator().manual_seed(100 + seed)))
    table_rows = net.positional.encoding.embedding.weight
    kept = table_rows.detach().clone()
    with torch.no_grad():
        table_rows.zero_()  # control: no position at all, the same sequences
        heads_no_position.append(next_phase_weight(net, torch.Generator().manual_seed(100 + seed)))
        table_rows.copy_(kept)
assert all((weight > 0.95).all() for weight in heads)  # every seed, both heads look for the next phase
assert all((weight < 0.3).all() for weight in heads_no_position)  # ... through the position rows
even = torch.tril(torch.ones(TRAIN_LEN, TRAIN_LEN))  # chance: the same weight on every key n <= i
chance = ((even / even.sum(-1, keepdim=True)) * (phase == 1).cpu()).sum(-1)[3:].mean()
assert 0.22 < chance < 0.23 and all((weight - chance < 0.08).all() for weight in heads_no_position)  # near chance
print(f"even attention over the keys n <= i would put {chance:.3f} on the next phase")
for seed, (weight, control_weight) in enumerate(zip(heads, heads_no_position)):
    print(f"seed {seed}: weight on the next phase per head", [round(w, 2) for w in weight.tolist()],
          "· position rows zeroed:", [round(w, 2) for w in control_weight.tolist()])

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Why a table cannot extrapolate
#
# Two reasons, both exact. There is no row past `max_len`, so a longer input is an error.
# And rows inside the table but past the training length are never *used* in training, so
# their gradient is exactly zero: they keep the values they started with, draws from
# $\mathcal N(0, 0.02^2)$. Those are tiny: about 0.11 long, against about 2.5 for a trained row
# and 5 for a token's row (every seed, measured below). So a model that meets position 40 for the
# first time adds almost nothing to the token: it gets next to *no* position, rather than a wrong
# one. The cell checks both reasons, then measures the damage on sequences of 64 tokens: the model
# that gets almost every predictable next token right at positions 3 to 31 gets most of them
# wrong from position 32 on.

# %% slideshow={"slide_type": "fragment"}
try:
    model(repeating_blocks(1, MAX_LEN + 1, VOCAB, data).to(train_on))
    raise AssertionError("position 64 should have no row")
except ValueError as e:
    print(f"{MAX_LEN + 1} tokens:", e)

check_data = [data] + [torch.Generator().manual_seed(200 + seed) for seed in (1, 2)]  # seed 0: its own generator
for (net, start, *_), gen in zip(runs, check_data):
    rows_e = net.positional.encoding.embedding.weight
    seq = repeating_blocks(32, TRAIN_LEN + 1, VOCAB, gen).to(train_on)
    net.zero_grad()
    F.cross_entropy(net(seq[:, :-1]).flatten(0, 1), seq[:, 1:].flatten()).backward()
    assert (rows_e.grad[:TRAIN_LEN].abs().sum(-1) > 0).all()  # every position used in training gets a gradient
    assert torch.equal(rows_e.grad[TRAIN_LEN:], torch.zeros_like(rows_e.grad[TRAIN_LEN:]))  # the others: exactly 0
    assert (rows_e.detach()[:TRAIN_LEN] != start[:TRAIN_LEN]).any(-1).all()  # trained rows moved
    assert torch.equal(rows_e.detach()[TRAIN_LEN:], start[TRAIN_LEN:])  # untrained rows: still their initial values
print(f"rows {TRAIN_LEN} .. {MAX_LEN - 1}, every seed: zero gradient, initial values kept: True")

for net, *_ in runs:
    lengths = net.positional.encoding.embedding.weight.detach().norm(dim=-1)
    untrained, trained = lengths[TRAIN_LEN:].mean().item(), lengths[:TRAIN_LEN].mean().item()
    token_rows = net.embed.weight.detach().norm(dim=-1).mean().item()
    assert 0.1 < untrained < 0.12 and 2.3 < trained < 2.8 and 4.7 < token_rows < 5.4  # the sizes quoted above
    print(f"mean length of a row: untrained {untrained:.2f}, trained {trained:.2f}, token {token_rows:.2f}")

accuracy = []  # per seed: accuracy per position on 256 sequences of 64 tokens
for (net, *_), gen in zip(runs, check_data):
    test = repeating_blocks(256, MAX_LEN + 1, VOCAB, gen).to(train_on)
    with torch.no_grad():
        accuracy.append((net(test[:, :-1]).argmax(-1) == test[:, 1:]).cpu().double().mean(0))
assert all(acc[3:TRAIN_LEN].mean() > 0.95 and acc[TRAIN_LEN:].mean() < 0.5 for acc in accuracy)  # every seed
right = accuracy[0]  # seed 0 for the figure
for seed, acc in enumerate(accuracy):
    print(f"seed {seed}: accuracy at positions 3 .. {TRAIN_LEN - 1}: {acc[3:TRAIN_LEN].mean():.2f};  "
          f"at {TRAIN_LEN} .. {MAX_LEN - 1}: {acc[TRAIN_LEN:].mean():.2f}  (guessing: {1 / VOCAB:.2f})")

fig, ax = viz.figure(width=5.5, height=3.0)
ax.plot(right, marker=".")
ax.axvline(TRAIN_LEN - 0.5, color="k", lw=1, ls="--", label="training length")
ax.set(xlabel="position i", ylabel="accuracy of the next token", ylim=(0, 1.05),
       title="learned table: right inside the training length, mostly wrong past it")
ax.legend(loc="upper right")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Is it really the untrained rows?** An obvious alternative: the model never saw 64 tokens,
# so it might fail past 32 for other reasons (more keys to spread its attention over, a
# longer softmax). The control is cheap: copy the trained rows 0–31 into rows 32–63, so that
# position $32 + i$ gets the row of position $i$ (the same phase, as $32 \equiv 0 \bmod 4$),
# and run the same 64-token test, for each of the three seeds. If the long input were the
# problem, the copied rows would not help. They do: past position 32 the accuracy goes from
# about 0.4 to above 0.95 for every seed (the ranges are printed). Two more controls say what
# the untrained rows are. Rows of zeros, *no* position at all, score the same as the untrained
# rows: those act as a missing code. Trained rows copied one phase off (row $i - 1$ into position
# $32 + i$), a *wrong* code, land in between, and climb from below 0.5 at positions 32–39 to
# above 0.75 at 56–63, for every seed. (A guess we do not test: past 32 every row is off by the
# same phase, so a query still finds the right keys among those from 32 on, and the further past
# 32 it sits, the more of its keys lie there.) What the model needs from a row is its phase.
#
# **Why about 0.4, not $1/16$?** Without a position the model still sees which tokens the
# sequence holds, and it has learned that the next token is almost never the current one. Past
# position 32 (untrained rows) its prediction is one of the block's tokens for more than 99% of
# the queries, and the current token for under 2%: it guesses among the block's other tokens. A
# uniform guess among those is right about 0.36 of the time on these sequences (blocks may repeat
# a token; the cell computes it exactly), close to the 0.38–0.39 measured.

# %% slideshow={"slide_type": "fragment"}
def predictions_past_training(net, rows, test_seq):
    """The model's next-token predictions at positions 32 .. 63 of 64-token sequences, table rows 32 .. 63 set
    to `rows` (then restored)."""
    table = net.positional.encoding.embedding.weight
    kept = table.detach().clone()
    with torch.no_grad():
        table[TRAIN_LEN:] = rows
        predicted = net(test_seq[:, :-1]).argmax(-1)[:, TRAIN_LEN:]
        table.copy_(kept)
    return predicted


def other_block_tokens_guess(test_seq):
    """Accuracy at positions 32 .. 63 of a uniform guess among the block's distinct tokens other than the current one."""
    block = test_seq[:, :4].sort(-1).values
    distinct = 1 + (block[:, 1:] != block[:, :-1]).sum(-1, keepdim=True)  # (batch, 1)
    current, target = test_seq[:, TRAIN_LEN:MAX_LEN], test_seq[:, TRAIN_LEN + 1:MAX_LEN + 1]
    return ((target != current) / (distinct - 1).clamp(min=1)).double().mean().item()


control = {"untrained rows": [], "rows of zeros": [], "rows 0-31 copied": [], "copied one phase off": []}
phase_off_by_position, in_block, is_current, guess = [], [], [], []
for net, _, _, gen in runs:
    trained = net.positional.encoding.embedding.weight.detach()[:TRAIN_LEN]
    test_seq = repeating_blocks(256, MAX_LEN + 1, VOCAB, gen).to(train_on)
    target = test_seq[:, TRAIN_LEN + 1:]
    rows = {"untrained rows": net.positional.encoding.embedding.weight.detach()[TRAIN_LEN:],
            "rows of zeros": torch.zeros_like(trained), "rows 0-31 copied": trained,
            "copied one phase off": trained.roll(1, 0)}  # row i - 1 at 32 + i
    for name, new_rows in rows.items():
        predicted = predictions_past_training(net, new_rows, test_seq)
        hits = (predicted == target).cpu().double()
        control[name].append(hits.mean().item())
        if name == "copied one phase off":
            phase_off_by_position.append(hits.mean(0))
        if name == "untrained rows":
            in_block.append((predicted[:, :, None] == test_seq[:, None, :4]).any(-1).double().mean().item())
            is_current.append((predicted == test_seq[:, TRAIN_LEN:MAX_LEN]).double().mean().item())
            guess.append(other_block_tokens_guess(test_seq))
spans = {name: f"{min(accs):.2f}–{max(accs):.2f}" for name, accs in control.items()}
assert all(a < 0.45 for a in control["untrained rows"] + control["rows of zeros"])  # about 0.4, every seed
assert all(abs(u - z) < 0.03 for u, z in zip(control["untrained rows"], control["rows of zeros"]))  # missing code
assert all(a > 0.95 for a in control["rows 0-31 copied"])  # the drop was the untrained rows
assert all(0.5 < a < 0.8 for a in control["copied one phase off"])  # trained, wrong phase: in between
assert all(acc[:8].mean() < 0.5 and acc[-8:].mean() > 0.75 for acc in phase_off_by_position)  # climbs with position
assert min(in_block) > 0.99 and max(is_current) < 0.02  # a guess among the block's other tokens ...
assert all(0.34 < g_ < 0.38 and 0 < a - g_ < 0.05 for g_, a in zip(guess, control["untrained rows"]))  # ... ~ 0.36
print("accuracy at positions 32-63, seeds 0, 1, 2:")
for name, accs in control.items():
    print(f"  {name:21s}", ", ".join(f"{a:.2f}" for a in accs), f"  (range {spans[name]})")
print("copied one phase off, positions 32-39 / 56-63:",
      ", ".join(f"{acc[:8].mean():.2f} / {acc[-8:].mean():.2f}" for acc in phase_off_by_position))
print("untrained rows: prediction among the block's tokens", ", ".join(f"{a:.3f}" for a in in_block),
      "· the current token", ", ".join(f"{a:.3f}" for a in is_current),
      "· a guess among the block's other tokens", ", ".join(f"{a:.2f}" for a in guess))

# %% [markdown] slideshow={"slide_type": "fragment"}
# Inside the training length Vaswani et al. found a learned table as good as a formula: they
# (2017, Table 3, row E) replaced their sinusoids by learned position embeddings and got "nearly
# identical results" (development BLEU 25.7 against 25.8, perplexity 4.92 for both; cited from
# the paper, not run here). The
# difference is past the training length, where the table has nothing to offer.
#
# A code that is a formula of the position (sinusoids, chapter 3) has a row for every
# position, and relative methods (chapters 4 to 6) have no learned absolute table.
# Chapter 7 trains the same small decoder with each method and measures them past the
# training length.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each exercise has a cell for your answer and a checker that says what is right or wrong, with
# a hint. The worked solution follows, collapsed (expand it only after trying), then a cell that
# checks it. In a graded copy (`make student`) the solution cell is empty: write your answer there.
#
# **Exercise 1. Which offsets have an exact map, on a table of any length? Derive.** Section 4
# proved that no affine map exists for $k < 2^{d-2}$, and least squares found exact maps on the
# 64-row table at some larger offsets, but not at all of them. A table of positions need not have $2^d$ rows. Write
# `exact_offsets(N)` returning the offsets $k$, $1 \le k < N$, with an exact affine map
# $p_{i+k} = M p_i + b$ on the table of the first $N$ positions (the binary code, in as many bits
# as $N$ needs; only the pairs with $i + k < N$ count). The checker compares your lists with least
# squares on six short tables, $N = 5$ to 100, then asks for four lengths up to $2^{60}$, where no
# table can be built; while your function runs, the table and least squares refuse to work, and a
# loop over every offset runs out of steps. Before that, explore freely: build short tables and run
# `pl.affine_shift_residual` on them to find the pattern. What is graded is the rule, at lengths no
# table reaches.

# %% slideshow={"slide_type": "fragment"}
def exact_offsets(N):
    raise NotImplementedError  # your code


_ = check.exact_offsets(exact_offsets)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "exact_offsets_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def exact_offsets(N):
    ### BEGIN SOLUTION
    # Write k = L * K with L = 2^a its lowest set bit (K odd). Adding k leaves the bits below a alone and starts
    # no carry there, so every pair copies them (the identity) and adds K to the number c = i >> a that the
    # bits from a on form. Only those numbers matter, and the sources i = 0 .. N - k - 1 give c = 0, 1, ..., H - 1
    # with H = ceil((N - k) / L).
    # H >= 4: the sources 0, L, 2L, 3L and their partners are in the table, and section 4's square breaks every
    #   affine map.
    # H <= 3: the codes of c = 0, 1, 2 are distinct corners of a cube, and three distinct corners are never on
    #   one line (a line meets a cube's corners at most twice, as no corner lies between two others). So they
    #   are affinely independent, and an affine map sends them wherever their images are; with the identity on
    #   the bits below a, that is an exact map for every pair.
    # So k fits iff N - k <= 3L. For each L = 2^a these are the odd multiples of L in [N - 3L, N), at most two,
    # listed without trying every k.
    out = []
    for a in range(N.bit_length()):
        low = 2**a
        m = max(1, -(-(N - 3 * low) // low))  # the first multiple of L at or above N - 3L ...
        m += 1 - m % 2  # ... that is odd, so that L is its lowest set bit
        while m * low < N:
            out.append(m * low)
            m += 2
    return sorted(out)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "exact_offsets", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.exact_offsets(exact_offsets)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 2. Design: a bit counter with a fixed map.** Section 4 showed that the binary code
# has no fixed affine map from one position to the next, and neither, on the 6-bit table, has the
# Gray code, which flips one bit per step. Design a code of 0s and 1s that has one: write `bit_counter(d)` returning a
# $2d \times d$ table, all rows different, such that every step from $p_i$ to $p_{i+1}$, and the
# step from the last row back to the first (a counter that wraps around), flips exactly one bit,
# and one fixed affine map does every step: $p_{i+1} = M p_i + b$ for every $i$, and
# $p_0 = M p_{2d-1} + b$. The checker asks for widths from 2 to 40; it tells you what your table
# lacks.

# %% slideshow={"slide_type": "fragment"}
def bit_counter(d):
    raise NotImplementedError  # your code


_ = check.bit_counter(bit_counter)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "bit_counter_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def bit_counter(d):
    ### BEGIN SOLUTION
    # An affine map that sends each row, a corner of the cube, to the next corner is easiest to find among
    # the maps that send every corner to a corner: those permute the features and replace some x by 1 - x.
    # Moving one feature into the next, and the last one back into the first as 1 - x, is such a map:
    # p -> (1 - p[d-1], p[0], ..., p[d-2]) flips exactly one bit on the rows 1..10..0 and 0..01..1 (its own
    # rows; on other rows it can flip several), and from the zeros it
    # fills the row with ones from the left (d steps), then empties it the same way (d steps): 2d distinct
    # rows, then the zeros again. As a formula, p_i[c] = 1 exactly when (i - c - 1) mod 2d < d: every column is
    # the same square wave of period 2d, column c delayed by c steps. (Digital circuits know it as the Johnson,
    # or twisted-ring, counter.) M is a signed cyclic shift: about the cube's centre, p - 1/2, it is orthogonal
    # and M^(2d) = I, a rotation for even d (for odd d its determinant is -1: a rotation with a reflection).
    i = torch.arange(2 * d)[:, None]
    c = torch.arange(d)[None, :]
    return ((i - c - 1) % (2 * d) < d).float()
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "bit_counter", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.bit_counter(bit_counter)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 3. A Gray bit as the sign of one sine.** Section 5 wrote bit $b$ of the binary code
# as the sign of one sine: $\text{bit}_b(i) = 1$ exactly when $\sin(2\pi(i + s)/P) < 0$, with period
# $P = 2^{b+1}$ and shift $s = \tfrac12$. The Gray code of §4's widget, the bits of $i \oplus (i \gg 1)$,
# is also one sine per bit. Write `gray_wave(b)` returning a pair $(P, s)$ such that bit $b$ of the
# Gray code of $i$ is 1 exactly when $\sin(2\pi(i + s)/P) < 0$, for every position $i \ge 0$. The
# checker calls `gray_wave` once, with `b` a symbol (SymPy), so return two formulas in `b` built with
# `+`, `-`, `*`, `/` and `**` (like section 5's `2 ** (b + 1), 0.5`), one pair for every bit; it then
# computes the sign exactly, for bits $b$ up to 1000 and positions far past any table.

# %% slideshow={"slide_type": "fragment"}
def gray_wave(b):
    raise NotImplementedError  # your code


_ = check.gray_wave(gray_wave)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "gray_wave_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def gray_wave(b):
    ### BEGIN SOLUTION
    # Gray bit b is bit b XOR bit b + 1 of i. Over one period of bit b + 1, 2^(b+2) positions, bit b + 1 reads
    # 0 0 1 1 by quarters of 2^b positions and bit b reads 0 1 0 1, so their XOR reads 0 1 1 0: one run of 2^(b+1)
    # ones, starting 2^b positions in. That is a square wave of period 2^(b+2), bit b + 1's wave moved a quarter
    # period earlier: Gray bit b of i is bit b + 1 of i + 2^b. Section 5's sine of bit b + 1, shifted by 2^b, gives
    # it. (Binary bit b + 1 and Gray bit b are then a sine and a cosine of one frequency: chapter 3's pairs.)
    return 2 ** (b + 2), 2**b + 0.5
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "gray_wave", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.gray_wave(gray_wave)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Summary
#
# | code | size against the token | $p_i \to p_{i+k}$ | longer sequences |
# |---|---|---|---|
# | integer $i\cdot\mathbf 1$ | $i$ times larger; erased by LayerNorm | affine shift by $k\cdot\mathbf 1$ (no linear map; logits depend on $ij$, not on the offset) | defined for any length, but past the training length every value is new |
# | normalised $i/m$ | at most as large; erased by LayerNorm too (§2) | depends on $m$ | same position, new code |
# | binary | at most as large, jumpy; LayerNorm erases the share of ones (and merges positions 0 and $2^d - 1$ when the bits fill every feature) | no affine map for any $k < 2^{d-2}$ (proved for every $d$) | $2^d$ positions, plenty; trained on up to $2^b$ tokens, past the training length a bit is set that training never saw set (its effect not measured here) |
# | learned table $E_i$ | trained rows about half as long as a row of the token table (about 2.5 against 5, every seed); untrained rows tiny (0.11) | whatever the data reward (here: the phase mod 4) | no row past `max_len`; rows never trained keep their tiny initial values, next to no position (copying trained rows there restores the accuracy) |
#
# Sinusoids keep what is good in binary codes (bounded, one fast and many slow digits) and
# replace the bits by smooth waves: chapter 3.
#
# ## Errata in the sources
#
# 1. **Binary codes and property 2.** `001` says binary codes satisfy property 2 (from $p_i$
#    one gets $p_{i+k}$ simply), a property it calls 线性相关性 (linear dependence, or correlation)
#    without defining it further. This course reads it as a fixed affine map
#    $p_{i+k} = M_k p_i + b_k$ (the form the integer code's shift meets; our reading, not `001`'s
#    words). Then none exists for any $k < 2^{d-2}$, for every width $d$: section 4 proves it with
#    four positions whose codes balance while their codes $k$ steps on do not, and checks the proof's
#    steps. Of the table's exact fits (all at $k \ge 2^{d-2}$), all but $k = 2^{d-1}$ come from its
#    edge: a counter that wraps around has a map only for $k = 2^{d-1}$ (proved the same way). That
#    $p_0 = 0$ rules out a *linear* map is not why the binary code fails: it rules one out for the
#    integer code too, whose shift works (section 4 checks both).
# 2. **The integer code and property 3.** `001` says the integer code satisfies property 3,
#    "generalises to longer contexts" (from 8K to 32K tokens). It is *defined* for every position,
#    but its values grow without bound: past the training length every value is one the model
#    never saw (section 1 asserts it). So it should not generalise, argued from the values being new,
#    not measured (no model here is run past its training length); `00_index` leaves it ungraded ("?").
# 3. **Bit index.** `001` numbers the columns from the most significant bit and calls the
#    fastest bit $p_{i,d}$; with $d$ columns numbered from 0 it is $p_{i,d-1}$, bit 0 in this
#    course's naming (section 3 asserts it flips at every step and that column $d$ does not
#    exist).
# 4. **Why not binary, per `002`.** Of its three tentative reasons the first does not bite, the
#    second costs little, and the third, read as written, is wrong.
#    Floats "wasted" on 0s and 1s: capacity is real, but bits run out slowly: $d$ bits name $2^d$
#    positions, and 17 cover Llama 3.1's 131 072. Awkward to add: the code is bounded, so it does not
#    swamp the token, and a LayerNorm after the sum costs it one direction (its part along
#    $\mathbf 1$) and at most one collision (positions 0 and $2^d - 1$, where the bits fill every
#    feature). "One cannot divide by `max_len`" to keep the step fixed: in `002`'s code `max_len` is
#    the fixed table size, and dividing by it does keep the step fixed (1/`max_len` of a token); only
#    dividing by the sentence's own length (§2's $i/m$) makes the step $1/m$ change with it. Binary
#    codes do not depend on the length, but their neighbours are 1 to $\sqrt d$ apart, Gray
#    neighbours always 1. Section 3 checks each answer.
# 5. **"Normally distributed per column, with small mean and variance."** `001` writes that the
#    layer-normalised input of attention "follows a normal distribution per column, and its mean
#    and variance are generally small". `001` lays the tokens out as the *columns* of
#    $x \in \mathbb R^{d\times m}$, so its column is a token, and LayerNorm does work on each
#    token: it gives that token's features mean exactly 0 and variance exactly 1, but only before
#    its learned scale and shift; after them, in the input of attention that `001` describes,
#    they are whatever those make them (the cell checks a scale of 2 and a shift of 0.5: mean 0.5,
#    variance 4). But it makes nothing normal:
#    within one token it only shifts and rescales the features, an affine map that keeps the shape
#    of their distribution. The next cell layer-normalises tokens whose features are skewed
#    (skewness about 2; a normal sample has 0): the skewness of every token's features is the same
#    after as before. The trouble with the integer code is not that the token is small but that
#    $i\cdot\mathbf 1$ grows without bound (section 1 asserts $\lVert x_i\rVert = \sqrt d$).
# 6. **Not in the sources:** a LayerNorm after the sum removes the integer code entirely,
#    since $i\cdot\mathbf 1$ is a per-token mean (and the normalised code, §2); both BERT (post-LN)
#    and GPT-2 (pre-LN) are set up so (section 1). Of the binary code it removes the share of ones, and where the
#    bits fill every feature positions 0 and $2^d - 1$ become one (section 3). And the binary code's "fixed signal-to-noise problem"
#    is only bounded: at position $2^d - 1$ the code is as long as the token (section 3).

# %% slideshow={"slide_type": "skip"}
skew_gen = torch.Generator().manual_seed(0)
skewed = torch.empty(4096, 64).exponential_(generator=skew_gen) * torch.linspace(0.5, 2, 64)  # 4096 tokens, 64 features
normed = F.layer_norm(skewed, (64,))
torch.testing.assert_close(normed.mean(-1), torch.zeros(4096), atol=1e-5, rtol=0)  # per token: mean 0 ...
torch.testing.assert_close(normed.var(-1, unbiased=False), torch.ones(4096), atol=1e-3, rtol=0)  # ... variance 1
scaled = F.layer_norm(skewed, (64,), weight=torch.full((64,), 2.0), bias=torch.full((64,), 0.5))  # learned scale, shift
torch.testing.assert_close(scaled.mean(-1), torch.full((4096,), 0.5), atol=1e-5, rtol=0)  # after them: mean 0.5 ...
torch.testing.assert_close(scaled.var(-1, unbiased=False), torch.full((4096,), 4.0), atol=4e-3, rtol=0)  # ... var 4


def skewness(t):
    """Skewness of each token's features, a row (0 for a normal sample)."""
    centred = t - t.mean(-1, keepdim=True)
    return (centred**3).mean(-1) / centred.pow(2).mean(-1) ** 1.5


before, after = skewness(skewed.double()), skewness(normed.double())
torch.testing.assert_close(after, before, atol=1e-4, rtol=0)  # an affine map per token: the shape is kept
assert before.median() > 1.5  # the tokens' features are skewed, and stay so
print(f"after LayerNorm: every token mean 0, variance 1; the skewness of a token's features, median "
      f"{before.median():.2f} before, {after.median():.2f} after (a normal sample: 0)")
