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
# # 1 · Why attention needs positions
#
# Self-attention compares every token with every other token, but nothing in its formula says
# *where* a token sits. This chapter shows, with asserted outputs, what that means:
#
# 1. permute all the input tokens (each one's query, key and value move together) and the
#    output rows permute the same way (**equivariance**), as long as every token sees every other
#    (no causal mask: a causal mask breaks it, and that is where chapter 7 begins); the same holds
#    for a whole transformer block, residual connections, feed-forward network and
#    normalisation included;
# 2. for a fixed query, shuffle the (key, value) pairs and the output does not change at all
#    (**invariance** in keys and values);
# 3. the "The dog chased another dog" demo: both "dog" tokens get identical outputs;
# 4. add a positional encoding and they stop being identical; a code must differ from place to
#    place for that (section 4);
# 5. for reading: what the demo's details (the weights' scale, the biases) change and what they
#    do not, and where the source's own formula puts the positions.
#
# Source followed: `001` (its introduction and test code). It loads a gated 1B-parameter
# checkpoint for its embeddings; we need no download: a toy vocabulary with seeded random
# embeddings shows the same thing, because the effect comes from the attention formula, not
# from the embeddings. Errors in the source are corrected in the open and listed at the end.
# Positions count from 0 (the first token is at position 0); the conventions every chapter
# follows are collected on one page in `00_index`.
#
# Notation and signs (0-based positions, offsets $j - i$ as key minus query, bit and pair
# orders) follow the course's [conventions page](00_index.ipynb#Conventions).

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import itertools

import ipywidgets as widgets
import torch
from matplotlib.figure import Figure
from torch import nn

import posenc_lib as pl
from posenc_lib import check, viz

viz.use_style()  # white figures, dark text: readable in light and dark themes

device = pl.default_device()  # the CPU unless you opt in with POSENC_DEVICE (00_index); tensors below follow it
g = torch.manual_seed(0)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1 · Self-attention without positions
#
# Write the $n$ input tokens as the rows of $X \in \mathbb{R}^{n\times d}$. One attention head
# projects them, $Q = XW_Q$, $K = XW_K$, $V = XW_V$, and returns
#
# $$\mathrm{Attn}(X) = A\,V, \qquad A = \mathrm{softmax}\!\left(\frac{QK^\top}{\sqrt{d}}\right),$$
#
# the softmax running along each row (over the keys): $A$ holds the attention weights, one row
# per query, one column per key, each row summing to 1. `pl.attention(q, k, v)` is this formula,
# and `pl.self_attention(x, w_q, w_k, w_v)` projects first and then calls it. Five random
# tokens, $d = 8$:

# %% slideshow={"slide_type": "fragment"}
n, d = 5, 8
x = torch.randn(n, d).to(device)
w_q, w_k, w_v = (torch.randn(d, d).to(device) / d**0.5 for _ in range(3))

out, weights = pl.attention(x @ w_q, x @ w_k, x @ w_v)
torch.testing.assert_close(pl.self_attention(x, w_q, w_k, w_v)[0], out)  # the same thing, wrapped
torch.testing.assert_close(weights.sum(-1), torch.ones(n, device=device))  # each row is a distribution
print("output:", tuple(out.shape), " weights:", tuple(weights.shape))

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Permute the tokens: the outputs permute with them
#
# A permutation of the rows is a matrix $P$ with one 1 in every row and column:
# `pl.permutation_matrix(order)` puts row `order[i]` of $X$ into row $i$ of $PX$. Feed $PX$
# instead of $X$: $Q$, $K$, $V$ become $PQ$, $PK$, $PV$, the weights become $PAP^\top$
# (rows *and* columns move), and since $P^\top P = I$
#
# $$\mathrm{Attn}(PX) = P\,A\,P^\top P\,V = P\,\mathrm{Attn}(X).$$
#
# The output rows are the old output rows, reordered exactly like the input: attention is
# **permutation-equivariant**. For any function $f$ from rows to rows,
# `pl.equivariance_error(f, x, order)` measures how far it is from this: the largest entry of
# $\lvert f(PX) - P f(X)\rvert$, 0 (up to rounding) for an equivariant $f$. The next cell
# checks all three statements, and the same one with `pl.equivariance_error`. (This is
# attention without a mask, where every query sees every key, as in an encoder such as BERT.
# A decoder's causal mask changes the answer: see below.)

# %% slideshow={"slide_type": "fragment"}
order = [3, 0, 4, 1, 2]
P = pl.permutation_matrix(order, device=device)
torch.testing.assert_close(P @ x, x[order])

out_p, weights_p = pl.self_attention(P @ x, w_q, w_k, w_v)
torch.testing.assert_close(out_p, P @ out)  # equivariant: rows move with the input
torch.testing.assert_close(weights_p, P @ weights @ P.T)  # weights: rows and columns move
assert pl.equivariance_error(lambda t: pl.self_attention(t, w_q, w_k, w_v)[0], x, order) < 1e-5
print("Attn(PX) == P Attn(X): True")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Why the softmax moves with the permutation
#
# One step above hides a fact: the scores become $PSP^\top$ (with $S = QK^\top/\sqrt d$), and
# we used $\mathrm{softmax}(PSP^\top) = P\,\mathrm{softmax}(S)\,P^\top$. Why is that true?
# Entry $(i, j)$ of $PSP^\top$ is $S_{\text{order}[i],\,\text{order}[j]}$, so row $i$ of
# $PSP^\top$ holds exactly the entries of row $\text{order}[i]$ of $S$, listed in another
# order. The softmax treats each row on its own and each entry by the same rule,
# $e^{s}/\sum_{s' \in \text{row}} e^{s'}$, and the sum over a row does not depend on the order
# of its terms. So every entry keeps its weight and simply travels with it: permuting rows and
# columns only relabels which entries share a row.
#
# A row-wise function that *does* look at where an entry sits in its row breaks this. A
# running sum along the row (`cumsum`) is one; the causal mask, next, is another.

# %% slideshow={"slide_type": "fragment"}
S = (x @ w_q) @ (x @ w_k).T / d**0.5  # the head's scores
torch.testing.assert_close(P @ S @ P.T, S[order][:, order])  # entry (i, j) is S[order[i], order[j]]
torch.testing.assert_close((P @ S @ P.T).softmax(-1), P @ S.softmax(-1) @ P.T)  # the softmax commutes
assert not torch.allclose((P @ S @ P.T).cumsum(-1), P @ S.cumsum(-1) @ P.T)  # a running sum does not
print("softmax(P S P^T) == P softmax(S) P^T: True;  the same for cumsum: False")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### From one layer to a whole model
#
# So far one attention head. A transformer block runs several heads side by side and adds a
# residual connection, a feed-forward network (FFN) and normalisation, in one of two
# arrangements: the **post-LN** of the original Transformer and BERT, $h = \mathrm{LN}(x + \mathrm{Attn}(x))$,
# $\mathrm{out} = \mathrm{LN}(h + \mathrm{FFN}(h))$, or the **pre-LN** of GPT-2,
# $h = x + \mathrm{Attn}(\mathrm{LN}(x))$, $\mathrm{out} = h + \mathrm{FFN}(\mathrm{LN}(h))$, with one more LN after
# the last block. Llama keeps the pre-LN arrangement with RMSNorm, which divides each row by its root mean square
# and skips LayerNorm's mean subtraction: still a map of each row alone. Each new part keeps equivariance, for its
# own reason:
#
# * LayerNorm (and RMSNorm) and the FFN act on each token's row **alone, with the same weights for every
#   row**. Any such row-wise map $f$ satisfies $f(PX) = P f(X)$: it never looks at the
#   other rows, so it cannot notice that they moved. (So does a bias added to every row.)
# * **Multi-head attention** runs $H$ heads on the same tokens, each with its own
#   $W_Q, W_K, W_V$ (usually $d/H$ columns wide), writes the $H$ outputs of each token side by
#   side in one row, and multiplies every row by one more matrix $W_O$. Each head moves its rows
#   with $P$, rows written side by side move together, and $W_O$ is row-wise: the layer is
#   equivariant too. PyTorch's `nn.MultiheadAttention` is this layer: it stores every head's
#   projections stacked in `in_proj_weight` and $W_O$ in `out_proj` (section 5 rebuilds it by
#   hand).
# * The residual adds the input itself, and $PX + P\,\mathrm{Attn}(X) = P\,(X + \mathrm{Attn}(X))$.
# * Maps that are each equivariant compose to one that is: $f(g(PX)) = f(P\,g(X)) = P\,f(g(X))$.
#   So a stack of blocks is equivariant, and so is the whole model up to its output layer
#   (row-wise again).
#
# The cell checks it on PyTorch's own `nn.TransformerEncoderLayer`, in both arrangements and as
# a stack of two, for the five tokens above (two heads each, no dropout).

# %% slideshow={"slide_type": "fragment"}
ffn = nn.Sequential(nn.Linear(d, 16), nn.GELU(), nn.Linear(16, d)).to(device).requires_grad_(False)
torch.testing.assert_close(ffn(P @ x), P @ ffn(x))  # row-wise: the FFN ...
torch.testing.assert_close(nn.functional.layer_norm(P @ x, (d,)), P @ nn.functional.layer_norm(x, (d,)))  # ... and LN
torch.testing.assert_close(nn.functional.rms_norm(P @ x, (d,)), P @ nn.functional.rms_norm(x, (d,)))  # ... and RMSNorm
blocks = {name: nn.TransformerEncoderLayer(d, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                           norm_first=pre).to(device).eval().requires_grad_(False)
          for name, pre in (("post-LN (as BERT)", False), ("pre-LN (as GPT-2)", True))}
blocks["two pre-LN blocks"] = nn.TransformerEncoder(blocks["pre-LN (as GPT-2)"], num_layers=2,  # copies the block
                                                    enable_nested_tensor=False).to(device).eval()
g_second = torch.Generator().manual_seed(2)  # the second block gets weights of its own (a local generator)
for w in blocks["two pre-LN blocks"].layers[1].parameters():
    w.copy_(torch.randn(w.shape, generator=g_second).to(device) / w.shape[-1] ** 0.5)
first_block, second_block = blocks["two pre-LN blocks"].layers
assert not torch.equal(first_block.linear1.weight, second_block.linear1.weight)  # two different blocks
for name, block in blocks.items():
    assert pl.equivariance_error(lambda t: block(t[None])[0], x, order) < 1e-5, name
    print(f"{name}: Block(PX) == P Block(X): True")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### A causal mask breaks equivariance
#
# A decoder (GPT, Llama) hides the future: query $i$ may look at keys $j \le i$ only. The mask
# sets every score above the diagonal to $-\infty$ before the softmax
# (`pl.attention(..., causal=True)`). The mask is tied to the *places* in the sequence, not to
# the tokens: after a permutation the tokens move, but the triangle stays where it is. In the
# algebra above, $P$ would have to move the mask too, and $PMP^\top$ is not the triangle
# $M$ for any order but the identity (the cell tries all 120 orders of 5 tokens). So permuting
# the input no longer just permutes the output.
#
# With the mask, the token at position 0 sees only itself, and a head that attends uniformly
# gives row $i$ the share $1/(i+1)$ of the first token's value (the cell checks both). If that
# value has a feature no other token has, row $i$ carries a count the next layer can read: the
# seed of chapter 7's NoPE story ("no positional encoding"), which builds the counter and shows
# where it stops.

# %% slideshow={"slide_type": "fragment"}
def causal_head(t):
    return pl.attention(t @ w_q, t @ w_k, t @ w_v, causal=True)[0]


mask = pl.causal_mask(n, n, device=device).float()  # 1 where key j is in the future of query i
assert not torch.equal(P @ mask @ P.T, mask)  # the triangle does not move with the tokens
perms = [pl.permutation_matrix(o, device=device) for o in itertools.permutations(range(n))]
kept = [Po for Po in perms if torch.equal(Po @ mask @ Po.T, mask)]  # orders that map the triangle to itself
assert len(perms) == 120 and len(kept) == 1 and torch.equal(kept[0], torch.eye(n, device=device))  # identity only
assert pl.equivariance_error(causal_head, x, order) > 1e-2  # no longer equivariant
causal = nn.Transformer.generate_square_subsequent_mask(n, device=device)  # -inf above the diagonal
causal_block = lambda t: blocks["pre-LN (as GPT-2)"](t[None], src_mask=causal, is_causal=True)[0]  # noqa: E731
assert pl.equivariance_error(causal_block, x, order) > 1e-2  # nor is a whole causal block
assert pl.equivariance_error(causal_head, x, list(range(n))) == 0  # (the identity order, trivially, is)
torch.testing.assert_close(causal_head(x)[0], x[0] @ w_v)  # position 0 attends to itself alone
torch.testing.assert_close(causal_head(P @ x)[0], x[order[0]] @ w_v)  # whichever token stands there
flag = torch.zeros(n, 1, device=device)
flag[0] = 1.0  # a value feature only the first token has
uniform = pl.attention(torch.zeros(n, 1, device=device), torch.zeros(n, 1, device=device), flag, causal=True)[0]
torch.testing.assert_close(uniform[:, 0], 1 / torch.arange(1, n + 1, device=device).float())  # 1 / (i + 1)
print("causal mask: Attn(PX) == P Attn(X)?", pl.equivariance_error(causal_head, x, order) < 1e-5)
print("causal mask: Block(PX) == P Block(X)?", pl.equivariance_error(causal_block, x, order) < 1e-5)

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Fix the query, shuffle the keys and values: nothing changes
#
# Now keep one query $q$ and shuffle the (key, value) **pairs** together. Each weight stays
# attached to its value; only the order of the terms in the sum
# $\sum_j \mathrm{softmax}_j(q\cdot k_j/\sqrt d)\, v_j$ changes, so the output is identical:
# attention is **invariant** to a joint permutation of keys and values. Shuffling the keys
# alone is a different matter: the weights then land on the wrong values. Shuffling the queries
# alone moves the output rows with them, $\mathrm{Attn}(PQ, K, V) = P\,\mathrm{Attn}(Q, K, V)$
# (each row uses its own query only): source `001`'s "equivariant in the query, invariant in
# key and value". The two together give section 1's equivariance, $\mathrm{Attn}(PQ, PK, PV) =
# P\,\mathrm{Attn}(Q, PK, PV) = P\,\mathrm{Attn}(Q, K, V)$.

# %% slideshow={"slide_type": "fragment"}
q = torch.randn(1, d).to(device)
k, v = x @ w_k, x @ w_v
one, w_one = pl.attention(q, k, v)
shuffled, w_shuffled = pl.attention(q, k[order], v[order])

torch.testing.assert_close(shuffled, one)  # identical output
torch.testing.assert_close(w_shuffled, w_one[:, order])  # the weights moved with their keys
keys_only, _ = pl.attention(q, k[order], v)
assert not torch.allclose(keys_only, one, atol=1e-4)  # keys alone: a different output
queries = x @ w_q  # one query per token
torch.testing.assert_close(pl.attention(queries[order], k, v)[0], pl.attention(queries, k, v)[0][order])  # queries alone
torch.testing.assert_close(pl.attention(queries[order], k[order], v[order])[0], pl.attention(queries, k, v)[0][order])
print("joint shuffle of keys and values: identical output")
print("keys shuffled, values not:       different output")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### "I love you" and "you love I"
#
# Source `001` makes the point with the Chinese sentences 我爱你 ("I love you") and 你爱我
# ("you love me"). In Chinese the two use the very same three characters, only swapped, so a
# literal English gloss is `I love you` vs `you love I`. As keys and values they give the same
# output for any query, and as a whole sentence each word gets the same output in both: the
# model cannot tell who loves whom.

# %% slideshow={"slide_type": "fragment"}
word_vec = {w: torch.randn(d).to(device) for w in ("I", "love", "you")}
s1 = torch.stack([word_vec[w] for w in ("I", "love", "you")])
s2 = torch.stack([word_vec[w] for w in ("you", "love", "I")])

torch.testing.assert_close(pl.attention(q, s1 @ w_k, s1 @ w_v)[0], pl.attention(q, s2 @ w_k, s2 @ w_v)[0])
out1 = pl.self_attention(s1, w_q, w_k, w_v)[0]
out2 = pl.self_attention(s2, w_q, w_k, w_v)[0]
torch.testing.assert_close(out2, out1[[2, 1, 0]])  # "I" gets the same output in both sentences
print("same output for every word in 'I love you' and 'you love I'")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2 · The dog demo, without a download
#
# Source `001` embeds "The dog chased another dog" with a pretrained tokenizer and embedding
# table, runs it through `nn.MultiheadAttention` (section 1's multi-head layer, 4 heads) and
# compares the outputs of the two "dog" tokens. It compares positions **2 and 5**, not 1 and 4,
# because, as the source's indices imply, its tokenizer puts a beginning-of-sequence token in front. We mimic that with a toy vocabulary that has a `<s>`
# token and seeded random embeddings, 16 features wide instead of 2048, and draw every weight
# from $\mathcal{N}(0, 0.3^2)$. The source draws from $\mathcal{N}(0, 0.1^2)$; at our width of 16
# that makes every head attend almost uniformly, which pulls every output row toward one common
# mix: every difference between rows, the positions' included, would be small beside the outputs
# (section 5 measures it at our width; we do not measure the source's 2048-wide setting).

# %% slideshow={"slide_type": "fragment"}
vocab = ["<s>", "the", "dog", "chased", "another"]
words = ["<s>", "the", "dog", "chased", "another", "dog"]
ids = torch.tensor([[vocab.index(w) for w in words]], device=device)  # (batch=1, 6)
assert [i for i, w in enumerate(words) if w == "dog"] == [2, 5]  # with <s> in front
assert [i for i, w in enumerate(words[1:]) if w == "dog"] == [1, 4]  # without it

hdim = 16
g = torch.manual_seed(1)  # the demo's own seed, whatever ran above
embed = nn.Embedding(len(vocab), hdim)
mha = nn.MultiheadAttention(hdim, num_heads=4, batch_first=True)
mha.requires_grad_(False)
embed.requires_grad_(False)
with torch.no_grad():
    for weight in mha.parameters():
        weight.normal_(0.0, 0.3)
embed, mha = embed.to(device), mha.to(device)  # drawn on the CPU, then moved: the same weights anywhere

x_dog = embed(ids)  # (1, 6, 16)
print("token ids:", ids.tolist())

# %% [markdown] slideshow={"slide_type": "subslide"}
# Run it and compare the two "dog" rows: the same token at two places, and nothing in the layer
# to tell the places apart.

# %% slideshow={"slide_type": "fragment"}
out_dog, _ = mha(x_dog, x_dog, x_dog)
dog1, dog2 = out_dog[0, 2], out_dog[0, 5]
same = torch.allclose(dog1, dog2, atol=1e-6)
assert same
print("dog outputs identical?", same)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3 · Add positions: the dogs differ
#
# Give each position $i$ its own vector $p_i$ and add it to the token's embedding, $x_i' = x_i + p_i$.
# Any vector that differs from place to place would do for weights like these (not for every weight:
# section 4 comes back to it); random distinct vectors would make the same point, and we take chapter 3's
# sinusoids, `pl.sinusoidal_positions(n, d)`, as a ready-made set of distinct codes. The two "dog" inputs now differ, and with these weights so do their
# outputs: in this draw of the demo's weights (seed 1) by 0.32 of the first dog's length, far from a
# rounding error. For scale, the 14 other pairs of rows, two different words each, differ by 0.35 to
# 1.51 of it. How far apart depends on the draw: the cell after this one redraws the demo ten times.
# The invariance of section 1 goes too: a fixed query's output changes when the tokens are shuffled,
# because each token now carries its place with it.

# %% slideshow={"slide_type": "fragment"}
pos = pl.sinusoidal_positions(len(words), hdim, device=device)  # (6, 16)
x_pos = x_dog + pos
out_pos, _ = mha(x_pos, x_pos, x_pos)
same = torch.allclose(out_pos[0, 2], out_pos[0, 5], atol=1e-6)
apart = ((out_pos[0, 2] - out_pos[0, 5]).norm() / out_pos[0, 2].norm()).item()  # relative difference
assert not same and round(apart, 2) == 0.32  # this draw
OTHER_PAIRS = [(i, j) for i, j in itertools.combinations(range(len(words)), 2) if (i, j) != (2, 5)]
gaps = [((out_pos[0, i] - out_pos[0, j]).norm() / out_pos[0, 2].norm()).item() for i, j in OTHER_PAIRS]
assert len(gaps) == 14 and [round(f(gaps), 2) for f in (min, max)] == [0.35, 1.51]  # the yardstick
assert pl.equivariance_error(lambda t: mha(t + pos, t + pos, t + pos)[0], x_dog, [5, 4, 3, 2, 1, 0]) > 1e-3
pos5 = pl.sinusoidal_positions(n, d, device=device)  # the same for section 1's five tokens and fixed query
kv, kv_shuffled = x + pos5, x[order] + pos5  # the tokens shuffled, the places not
fixed_query = pl.attention(q, kv @ w_k, kv @ w_v)[0]
assert not torch.allclose(pl.attention(q, kv_shuffled @ w_k, kv_shuffled @ w_v)[0], fixed_query, atol=1e-4)
print(f"dog outputs identical? {same}: ||dog_1 - dog_2|| / ||dog_1|| = {apart:.2f}")
print(f"two different words, the other 14 row pairs: {min(gaps):.2f} to {max(gaps):.2f} of ||dog_1||")
print("reordering the words now changes more than the order of the outputs")
print("a fixed query's output now changes when the tokens are shuffled")

# %% [markdown] slideshow={"slide_type": "fragment"}
# Is 0.32 typical? Redraw the demo (embeddings and the 4 heads, weights from
# $\mathcal{N}(0, 0.3^2)$ as above) with seeds 1 to 10 and measure the same ratio each time.
# The dogs never coincide, but the size of their difference belongs to the draw: from 0.06 to
# 0.48 over these ten, while the median gap between two different words' outputs (the other 14
# row pairs, on the same scale) goes from 0.36 to 1.13.

# %% slideshow={"slide_type": "fragment"}
def redraw(seed):
    """The demo's embedding and 4 heads drawn again, exactly as above, with `seed` (on the CPU)."""
    with torch.random.fork_rng(devices=[]):  # leaves the notebook's own random stream alone
        torch.manual_seed(seed)
        emb = nn.Embedding(len(vocab), hdim).requires_grad_(False)
        heads = nn.MultiheadAttention(hdim, num_heads=4, batch_first=True).requires_grad_(False)
        for weight in heads.parameters():
            weight.normal_(0.0, 0.3)
    return emb, heads


def outputs_of(emb, heads, code=pos):
    """(6, 16) outputs of `heads` for the demo's tokens from `emb`, with `code` added."""
    h = emb(ids.cpu()) + code.cpu()
    return heads(h, h, h)[0][0]


def dogs_apart(emb, heads, code=pos):
    """||dog_1 - dog_2|| / ||dog_1||."""
    out = outputs_of(emb, heads, code)
    return ((out[2] - out[5]).norm() / out[2].norm()).item()


def words_apart(emb, heads):
    """The median over the 14 other row pairs (two different words each) of ||out_i - out_j|| / ||dog_1||."""
    out = outputs_of(emb, heads)
    return torch.tensor([(out[i] - out[j]).norm() / out[2].norm() for i, j in OTHER_PAIRS]).quantile(0.5).item()


spread = {seed: round(dogs_apart(*redraw(seed)), 2) for seed in range(1, 11)}
assert spread[1] == round(apart, 2)  # seed 1 is the demo above
assert min(spread.values()) == 0.06 and max(spread.values()) == 0.48  # never zero; the size is the draw's
words_spread = {seed: round(words_apart(*redraw(seed)), 2) for seed in range(1, 11)}
assert min(words_spread.values()) == 0.36 and max(words_spread.values()) == 1.13  # the yardstick, per draw
print("||dog_1 - dog_2|| / ||dog_1|| by seed:", spread)
print("median gap between two different words, same scale, by seed:", words_spread)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4 · See it: permute the sentence
#
# Left: the output of the demo's attention layer for the original sentence, one row per
# token. Middle: the output for the sentence read backwards; its rows are the same rows in
# reverse order. Right: the backwards output moved back into the original order, minus the
# original output: all zero (white), because without positions the layer cannot see the
# order. (The two outputs share one colour bar; the right panel's bar fits the largest
# difference it shows, with a floor that keeps rounding errors white.)

# %% slideshow={"slide_type": "skip"}
ORDERS = {
    "reversed": [5, 4, 3, 2, 1, 0],
    "rotate by one": [1, 2, 3, 4, 5, 0],
    "rotate by three": [3, 4, 5, 0, 1, 2],
    "swap the two dogs": [0, 1, 5, 3, 4, 2],
    "swap 'the' and 'chased'": [0, 3, 2, 1, 4, 5],
    "shuffle": [3, 5, 0, 2, 1, 4],
    "unchanged": [0, 1, 2, 3, 4, 5],
}
CODES = {  # what is added to the token at each of the 6 places
    "none": torch.zeros_like(pos),
    "sinusoidal": pos,
    "one vector at every place": pos[1].expand_as(pos),  # place 1's code, everywhere
    "repeats every 3 places": pos[[0, 1, 2, 0, 1, 2]],
}


def outputs_for(order_name, code_name, tokens=x_dog, layer=mha):
    """Outputs (6, 16) of the demo layer for the original and the permuted sentence, each token with the
    code of its place added, and the permuted output moved back into the original order minus the original."""
    order, code = ORDERS[order_name], CODES[code_name]
    with torch.no_grad():
        h = tokens + code
        original = layer(h, h, h)[0][0]
        hp = tokens[:, order] + code
        permuted = layer(hp, hp, hp)[0][0]
    # permuted row k is the output for the token from place order[k]; the inverse order puts each row back there
    moved_back = permuted[pl.inverse_permutation(order).to(device)]
    return original, permuted, moved_back - original


# One colour scale for the outputs, over every order and code; the difference panel's scale follows
# what it shows, down to a floor of 1% of the outputs' scale: float32 rounding is far below it and
# stays white, a real difference of at least that 1% fills the scale, and every case the drop-downs
# offer is either rounding or more than three times the floor (asserted below, after `lit`).
OUT_SCALE = max(outputs_for(o, c)[0].abs().max().item() for o in ORDERS for c in CODES)
DIFF_FLOOR = 0.01 * OUT_SCALE


def draw_outputs(fig, order_name="reversed", code_name="none"):
    """Heatmaps of the original output, the permuted output and the moved-back difference, with colour
    bars; returns the update(order_name, code_name) that redraws them."""
    axes = fig.subplots(1, 3)
    ims = [viz.heatmap(torch.zeros(len(words), hdim), ax=ax, xlabel="features", diverging=True, vmax=OUT_SCALE,
                       colorbar=None) for ax in axes]
    for ax in axes:
        ax.set_xticks([])  # 16 anonymous features
    axes[0].set_yticks(range(len(words)), words)
    axes[2].set_yticks(range(len(words)), words)
    axes[2].set_title("moved back − original")
    fig.colorbar(ims[0], ax=axes[:2], shrink=0.9, label="output")
    fig.colorbar(ims[2], ax=axes[2], shrink=0.9, label="difference")

    def update(order_name, code_name):
        original, permuted, diff = outputs_for(order_name, code_name)
        for im, m in zip(ims, (original, permuted, diff)):
            im.set_data(m.cpu().numpy())
        scale = max(diff.abs().max().item(), DIFF_FLOOR)
        ims[2].set_clim(-scale, scale)  # the colour bar follows
        axes[0].set_title(f"original, code: {code_name}")
        axes[1].set_title(f"permuted: {order_name}")
        axes[1].set_yticks(range(len(words)), [words[j] for j in ORDERS[order_name]])

    update(order_name, code_name)
    return update


# %% slideshow={"slide_type": "fragment"}
fig = Figure(figsize=(9.5, 2.8), layout="constrained")
draw_outputs(fig)
diff = outputs_for("reversed", "none")[2]
assert diff.abs().max() < 1e-5  # the right panel really is zero
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# Add the sinusoidal codes and the right panel lights up, for every order except "unchanged".
# Even "swap the two dogs" lights it up: that swap gives back the very same sentence, hence the
# very same output, but the two "dog" rows now differ, so moving rows with their tokens no
# longer reproduces it. With positions an output belongs to a place in the sentence, not to a
# token. The cell checks both claims for the orders of the drop-down: without a code no order
# lights the right panel up; with the sinusoidal code every order but "unchanged" does, while the
# dog swap leaves the output itself exactly as it was. The figure after it shows the dog swap
# with the code: only the two dog rows light up.

# %% slideshow={"slide_type": "fragment"}
def lit(order_name, code_name, *demo):
    """Does the right panel light up: does moving the rows back leave a difference above rounding?"""
    return outputs_for(order_name, code_name, *demo)[2].abs().max().item() > 1e-4


assert not any(lit(name, "none") for name in ORDERS)
assert [name for name in ORDERS if not lit(name, "sinusoidal")] == ["unchanged"]
original, swapped, dog_diff = outputs_for("swap the two dogs", "sinusoidal")
torch.testing.assert_close(swapped, original)  # same sentence, same output
assert (dog_diff.abs().amax(-1) > 1e-4).tolist() == [False, False, True, False, False, True]  # the dog rows only
largest = [outputs_for(o, c)[2].abs().max().item() for o in ORDERS for c in CODES]
assert all(m < 1e-5 or m > 3 * DIFF_FLOOR for m in largest)  # rounding stays white; a change fills the bar
print("no code: no order lights the right panel up; sinusoidal code: every order but 'unchanged' does")

# %% slideshow={"slide_type": "fragment"}
fig = Figure(figsize=(9.5, 2.8), layout="constrained")
draw_outputs(fig, "swap the two dogs", "sinusoidal")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# Now choose the order and the code yourself. Besides none and the sinusoids, the drop-down
# offers two codes that are not drawn above: one vector added at every place, and a code that
# repeats every 3 places ($p_3 = p_0$, $p_4 = p_1$, $p_5 = p_2$). Predict before you look:
# 1. With the sinusoids, "swap 'the' and 'chased'" moves two words that, unlike the dogs,
#    differ. Which rows light up: only the rows of the two words that moved, or more?
# 2. With one vector at every place, which orders light the panel up?
# 3. With the code that repeats every 3 places, which orders leave it white?

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "fragment"}
permute_widget = viz.InteractiveFigure(
    draw_outputs, figsize=(9.5, 2.8),
    order_name=widgets.Dropdown(options=list(ORDERS), value="reversed", description="order"),
    code_name=widgets.Dropdown(options=list(CODES), value="none", description="code"),
)
permute_widget

# %% [markdown] slideshow={"slide_type": "subslide"}
# <details><summary><b>Answers</b> (open after predicting and trying the widget)</summary>
#
# **1.** With the sinusoids, "swap 'the' and 'chased'" lights up every row, the four tokens that
# stayed in place too (`<s>`, both dogs and "another"). Each output is a weighted mix of every
# token's value, and with positions a key and a value carry their place as well as their word: when
# two words trade places, every token's weights and the values they mix change, not only theirs. The dog swap lit only the dog
# rows because it left the sentence, and so every mix, as it was. Without a code the same swap
# changes nothing but the order of the two rows.
#
# **2 and 3.** One vector at every place lights up nothing: adding the same vector to every
# token is a map applied to each row alone, and section 1 showed that such maps keep attention
# blind to order. The code that repeats every 3 places leaves the panel white for "swap the two
# dogs" and "rotate by three", besides "unchanged": both move every token to a place with the
# same code as the one it left. The rule behind all three answers has two halves. If every token
# lands on a place with the code of the place it left, the layer is fed the permuted input
# itself, and by section 1 the panel stays white, whatever the weights. If some token lands on a
# place with another code, the panel lights up for the demo's weights and for the ten redrawn
# demos of section 3 (checked below); not for every weight one could choose
# (Exercise 3 asks for a head that hides such a change). That is why property 1 of `00_index`,
# "unique", asks for a different code at every place: two places that share a code give two
# equal tokens there identical outputs, in a layer without a causal mask. The
# cell checks each answer, and both halves for every order and every code of the drop-downs,
# with the demo's weights and with those ten.
#
# </details>

# %% slideshow={"slide_type": "fragment"}
# Checks the answers folded above (read it after opening them).
_, _, diff_on = outputs_for("swap 'the' and 'chased'", "sinusoidal")
_, _, diff_off = outputs_for("swap 'the' and 'chased'", "none")
per_row = diff_on.abs().amax(-1)  # the largest change in each row of the right panel
stayed = [0, 2, 4, 5]  # <s>, dog, another, dog: their tokens did not move
assert (per_row[stayed] > 0.15).all() and diff_off.abs().max() < 1e-5  # 1: every row
assert not any(lit(name, "one vector at every place") for name in ORDERS)  # 2: none
white = [name for name in ORDERS if not lit(name, "repeats every 3 places")]
assert white == ["rotate by three", "swap the two dogs", "unchanged"]  # 3
shared, _, _ = outputs_for("unchanged", "repeats every 3 places")  # places 2 and 5 share a code
torch.testing.assert_close(shared[2], shared[5])  # property 1: the two dogs there get identical outputs
for name, order in ORDERS.items():  # the rule, with the demo's weights: white when, and only when,
    for code_name, code in CODES.items():  # every token keeps its place's code
        assert lit(name, code_name) == (not torch.equal(code[order], code)), (name, code_name)
for emb, heads in (redraw(seed) for seed in range(1, 11)):  # and with each of section 3's ten redrawn demos
    tokens, heads = emb(ids.cpu()).to(device), heads.to(device)
    assert all(lit(o, c, tokens, heads) == (not torch.equal(CODES[c][ORDERS[o]], CODES[c])) for o in ORDERS for c in CODES)
print("answers 1 to 3 and the rule behind them: checked")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5 · Behind the demo
#
# Reading for after the lecture, in four short parts: the source adds the codes after the projections,
# which is another model than the usual one; the weights' std shrinks every difference between output
# rows about alike, the dogs' with the rest, and the biases do not explain that; the source's extra
# projections fold into the layer's own; and `nn.MultiheadAttention` by hand.

# %% [markdown] slideshow={"slide_type": "skip"}
# ### Where do the positions go? The source's formula
#
# Source `001` writes attention with absolute positions in the column convention
# ($X \in \mathbb{R}^{d\times m}$, one column per token; its matrix of codes $P = [p_1, \dots, p_m]$
# counts from 1, and we write $P_{\mathrm{pos}} = [p_0, \dots, p_{m-1}]$, since $P$ is a permutation in
# this chapter) as
#
# $$\mathrm{Attn}(X) = (V+P_{\mathrm{pos}})\,\mathrm{softmax}\!\left(\frac{(K+P_{\mathrm{pos}})^\top(Q+P_{\mathrm{pos}})}{\sqrt d}\right),
#   \qquad Q = W_QX,\ K = W_KX,\ V = W_VX,$$
#
# which adds the codes **after** the projections. That is a model one may build (chapter 5's RoPE, for
# one, acts on the projected queries and keys), but not the usual absolute form, which adds them
# **before**: $Q = W_Q(X+P_{\mathrm{pos}}) = W_QX + W_QP_{\mathrm{pos}}$. Vaswani et al. add the codes once,
# to the first layer's input, and `nn.MultiheadAttention` fed $X + P_{\mathrm{pos}}$ (section 3) projects
# the sum. The two forms agree when $W_QP_{\mathrm{pos}} = P_{\mathrm{pos}}$ (and the same for $K$,
# $V$), which learned weights have no reason to satisfy; for generic weights they differ. In this column convention the softmax runs down
# each column (over the keys, `dim=0`). The cell takes a one-head module without biases, `one_head`, and
# its $W_Q, W_K$ (the first two thirds of `in_proj_weight`, stored as (out, in), so $Q = W_QX$ here); it
# checks that the usual form gives the weights the module returns for $X + P_{\mathrm{pos}}$, and that the
# source's form gives other attention weights (not only other scores: the softmax would forgive a shift).

# %% slideshow={"slide_type": "skip"}
one_head = nn.MultiheadAttention(hdim, num_heads=1, bias=False, batch_first=True).to(device).requires_grad_(False)
X = x_dog[0].T  # (16, 6): the source's column convention
P_pos = pos.T  # the source's P: one column per position, p_0 .. p_5
Wq_, Wk_ = one_head.in_proj_weight.chunk(3)[:2]  # (out, in) matrices: Q = W_Q X in this convention
usual = (Wk_ @ (X + P_pos)).T @ (Wq_ @ (X + P_pos))  # (keys, queries)
source_form = (Wk_ @ X + P_pos).T @ (Wq_ @ X + P_pos)

row_scores = (x_pos[0] @ Wq_.T) @ (x_pos[0] @ Wk_.T).T  # the row convention used in code: (queries, keys)
torch.testing.assert_close(usual, row_scores.T)  # same numbers, transposed
torch.testing.assert_close((usual / hdim**0.5).softmax(dim=0).T, (row_scores / hdim**0.5).softmax(dim=-1))
module_weights = one_head(x_pos, x_pos, x_pos)[1][0]
torch.testing.assert_close((usual / hdim**0.5).softmax(dim=0).T, module_weights)  # the module's own
assert not torch.allclose(source_form, usual, atol=1e-3)  # P after W: other scores ...
source_weights = (source_form / hdim**0.5).softmax(dim=0).T
assert (source_weights - module_weights).abs().max() > 0.05  # ... and other attention weights: a different model
print("P added before the projections (usual) != P added after them (source): True")

# %% [markdown] slideshow={"slide_type": "skip"}
# ### Why std 0.3, not the source's 0.1
#
# We redraw the demo with seeds 1 to 10 (`redraw`, section 3) and rescale every weight to std 0.1 and to
# 0.3 (a draw from $\mathcal{N}(0, 0.3^2)$ divided by 3 is a draw from $\mathcal{N}(0, 0.1^2)$). Without
# positions the dogs are identical at both (to rounding). With positions they differ by 0.016 to 0.077 of the first
# dog's length at std 0.1, against 0.06 to 0.48 at 0.3: at least 2.5 times less at 0.1 in each of these
# ten draws (read the bounds as these draws', not as constants of the setting).
#
# **The reason is the softmax, and every gap shrinks.** A score multiplies a query by a key, so at a
# third of the std every score is a ninth as large and the heads attend almost uniformly: each row's
# entropy $-\sum_j a_j \log a_j$, as a fraction of its maximum $\log 6$, is 0.94 or more in every row,
# head and draw at std 0.1, while every draw has a row below 0.41 at 0.3. Near-uniform weights give every
# row nearly the same mix of the values, whatever its word. The control: divide the dogs' gap by the
# median gap between the other 14 row pairs (two different words each). Draw by draw that ratio at 0.1
# over the one at 0.3 runs from 0.5 to 1.9, either way round, so "about alike" is the claim, not a match
# of two numbers.
#
# So 0.3 is a choice that makes the difference easy to see, not a need: at 0.1 the dogs still differ by
# at least 0.016, while without positions their gap stays below $10^{-6}$ (rounding).
#
# How near uniform also depends on the width and on the inputs' size (asserted, with random inputs and
# every weight at std 0.1): for inputs with unit-variance features, 16 times the width gives about 16 times
# the spread of the scores, while for rows of length 1 the spread stays about the same at widths 16, 256
# and 2048. The source's 0.1 belongs to a 2048-wide model fed
# with pretrained embeddings through an extra linear layer, so their size decides, and we do not measure it.

# %% slideshow={"slide_type": "skip"}
def scaled(heads, std, *, biases=True):
    """A copy of `heads`, on its device, with every weight rescaled from N(0, 0.3^2) to N(0, std^2); biases
    zeroed unless `biases`."""
    module = nn.MultiheadAttention(hdim, num_heads=4, batch_first=True).requires_grad_(False)
    module = module.to(heads.in_proj_weight.device)  # moved before the load: a device's tensors load in place
    module.load_state_dict({name: t * (std / 0.3) if biases or "bias" not in name else torch.zeros_like(t)
                            for name, t in heads.state_dict().items()})
    return module


def smallest_entropy(emb, heads):
    """The smallest row entropy / log 6 over the heads and queries, on the demo's tokens with positions."""
    h = emb(ids.cpu()) + pos.cpu()
    w = heads(h, h, h, average_attn_weights=False)[1]  # (1, heads, 6, 6)
    return (-(w * w.log()).sum(-1) / torch.log(torch.tensor(float(len(words))))).min().item()


draws = {seed: redraw(seed) for seed in range(1, 11)}
apart_at = {std: [dogs_apart(emb, scaled(heads, std)) for emb, heads in draws.values()] for std in (0.1, 0.3)}
assert [round(f(apart_at[0.1]), 3) for f in (min, max)] == [0.016, 0.077]
assert [round(f(apart_at[0.3]), 2) for f in (min, max)] == [0.06, 0.48]
assert [round(a, 2) for a in apart_at[0.3]] == list(spread.values())  # std 0.3: section 3's ten draws
assert min(b / a for a, b in zip(apart_at[0.1], apart_at[0.3])) > 2.5  # 0.1 below 0.3, draw by draw
entropy = {std: [smallest_entropy(emb, scaled(heads, std)) for emb, heads in draws.values()] for std in (0.1, 0.3)}
assert min(entropy[0.1]) >= 0.94 and max(entropy[0.3]) < 0.41
g_width, spread_at = torch.Generator().manual_seed(3), {}
for width in (16, 256, 2048):  # random inputs, every weight at std 0.1, on the CPU
    xs = torch.randn(64, width, generator=g_width)  # unit-variance features: rows of length about sqrt(width)
    wq, wk = (torch.randn(width, width, generator=g_width) * 0.1 for _ in range(2))
    for kind, inputs in (("unit variance", xs), ("unit length", xs / xs.norm(dim=1, keepdim=True))):
        spread_at[kind, width] = ((inputs @ wq) @ (inputs @ wk).T / width**0.5).std().item()
assert 12 < spread_at["unit variance", 256] / spread_at["unit variance", 16] < 20  # 16 times the width: about 16 times
assert all(0.9 < spread_at["unit length", w] / spread_at["unit length", 16] < 1.1 for w in (256, 2048))  # no growth
no_code = torch.zeros_like(pos)
no_code_gap = max(dogs_apart(emb, scaled(heads, std), no_code) for emb, heads in draws.values() for std in (0.1, 0.3))
assert no_code_gap < 1e-6 and min(apart_at[0.1]) > 0.015  # 0.1 still shows the dogs apart; without positions: rounding
print("dogs apart, positions added, 10 draws: std 0.1:",
      f"{min(apart_at[0.1]):.3f} to {max(apart_at[0.1]):.3f};",
      f"std 0.3: {min(apart_at[0.3]):.2f} to {max(apart_at[0.3]):.2f}")
print(f"smallest row entropy / log 6: std 0.1: {min(entropy[0.1]):.2f} or more;",
      f"std 0.3: {max(entropy[0.3]):.2f} or less")
per_draw = {std: [dogs_apart(emb, scaled(heads, std)) / words_apart(emb, scaled(heads, std))
                   for emb, heads in draws.values()] for std in (0.1, 0.3)}
draw_ratio = [a / b for a, b in zip(per_draw[0.1], per_draw[0.3])]  # draw by draw, std 0.1 over std 0.3
assert 0.45 < min(draw_ratio) < 0.6 and 1.8 < max(draw_ratio) < 1.95  # either way round: no draw-by-draw order
print("without positions the dogs' gap at both stds, 10 draws: below 1e-6 (rounding)")  # same text on any device
print(f"the same ratio, std 0.1 over std 0.3, draw by draw: {min(draw_ratio):.1f} to {max(draw_ratio):.1f}")

# %% [markdown] slideshow={"slide_type": "skip"}
# ### The biases do not explain it
#
# `nn.MultiheadAttention` also has biases, rescaled with the weights. The value bias $b_v$ and the output
# bias $b_o$ add one shared vector, $b_v W_O^\top + b_o$, to every output row (each row's weights sum to
# 1). The key bias adds $q_i\cdot b_k$ to every score of row $i$, a constant the softmax removes; the query
# bias adds $b_q\cdot k_j$ to column $j$, which does change the weights. A shared vector leaves the dogs'
# difference as it is but can lengthen or shorten the first dog's output (here it lengthens some rows and
# shortens others; asserted), so it could shrink or grow the ratio we measure. The control zeroes every bias; then
# rescaling $W_V$ and $W_O$ leaves the ratio alone (checked) and only the scores change with the std. The
# dogs still differ by only 0.016 to 0.085 at std 0.1, against 0.08 to 0.48 at 0.3, at least 2.2 times
# less at 0.1 in each draw: the near-uniform attention, not the biases, shrinks the dogs' difference.

# %% slideshow={"slide_type": "skip"}
def without(module, *parts):
    """A copy of `module` with some biases zeroed: "q", "k", "v" (the thirds of in_proj_bias) and "out"."""
    copy = scaled(module, 0.3)  # an exact copy (std 0.3 is the scale it was drawn at)
    for part in parts:
        if part == "out":
            copy.out_proj.bias.zero_()
        else:
            copy.in_proj_bias["qkv".index(part) * hdim:("qkv".index(part) + 1) * hdim] = 0
    return copy


full_out, full_w = mha(x_pos, x_pos, x_pos, average_attn_weights=False)  # weights: (1, heads, 6, 6)
shift_out = full_out - without(mha, "v", "out")(x_pos, x_pos, x_pos)[0]  # what b_v and b_o add, per row
b_v, W_O = mha.in_proj_bias[2 * hdim:], mha.out_proj.weight
torch.testing.assert_close(shift_out[0], (b_v @ W_O.T + mha.out_proj.bias).expand(len(words), hdim))  # one vector
longer = full_out[0].norm(dim=-1) - (full_out - shift_out)[0].norm(dim=-1)  # each row's length with it minus without
assert (longer > 0).any() and (longer < 0).any()  # the shared vector lengthens some rows and shortens others
change = {part: (without(mha, part)(x_pos, x_pos, x_pos, average_attn_weights=False)[1] - full_w).abs().max().item()
          for part in "qk"}
assert change["k"] < 1e-6 and change["q"] > 0.05  # b_k: a constant per row, gone in the softmax; b_q: not


def scores_only(heads, std):
    """`heads` without biases, with only W_Q and W_K rescaled to std (W_V and W_O kept at 0.3)."""
    module = scaled(heads, 0.3, biases=False)
    module.in_proj_weight[: 2 * hdim] *= std / 0.3
    return module


bare = {std: [dogs_apart(emb, scaled(heads, std, biases=False)) for emb, heads in draws.values()] for std in (0.1, 0.3)}
assert [round(f(bare[0.1]), 3) for f in (min, max)] == [0.016, 0.085]
assert [round(f(bare[0.3]), 2) for f in (min, max)] == [0.08, 0.48]
assert min(b / a for a, b in zip(bare[0.1], bare[0.3])) > 2.2  # still below 0.3, draw by draw
for (emb, heads), a in zip(draws.values(), bare[0.1]):  # W_V and W_O at 0.3 or 0.1: the same ratio
    assert abs(dogs_apart(emb, scores_only(heads, 0.1)) - a) < 1e-5
print(f"largest weight change, zeroing b_k: below 1e-6 (rounding); zeroing b_q: {change['q']:.2f}")  # same on any device
print("biases zeroed, dogs apart, 10 draws: std 0.1:",
      f"{min(bare[0.1]):.3f} to {max(bare[0.1]):.3f}; std 0.3: {min(bare[0.3]):.2f} to {max(bare[0.3]):.2f}")

# %% [markdown] slideshow={"slide_type": "skip"}
# The weights of the demo's 4 heads (seed 1, no positions) as pictures, one row per query and one
# column per key: at std 0.1 (top) every weight lies between 0.09 and 0.24, close to uniform's
# $1/6 \approx 0.17$; at std 0.3 (bottom) 8 of the 24 rows (6 queries in each of 4 heads) put more
# than half of their weight on one token. In
# every panel the rows of the two "dog" queries (2 and 5) are identical: however sharp a head
# gets, sharper attention does not give a token its place. (We do not measure the source's
# 2048-wide setting.)

# %% slideshow={"slide_type": "skip"}
def head_weights(std):
    """(4, 6, 6) attention weights of the demo's heads with its weights rescaled to N(0, std^2)."""
    return scaled(mha, std)(x_dog, x_dog, x_dog, average_attn_weights=False)[1][0]


def draw_weights(fig, std):
    """One heatmap per head of the weights at weight std `std`, on one colour scale from 0 to 1."""
    axes = fig.subplots(1, 4, sharey=True)
    for h, (ax, w) in enumerate(zip(axes, head_weights(std))):
        im = viz.heatmap(w, ax=ax, xlabel="key", colorbar=None, diverging=False, vmin=0, vmax=1,
                         title=f"head {h + 1}, std {std:.1f}")  # prose counts heads from 1
        ax.title.set_fontsize(9)
    axes[0].set_yticks(range(len(words)), words)
    fig.colorbar(im, ax=axes, shrink=0.9, label="attention weight")


# %% slideshow={"slide_type": "skip"}
fig = Figure(figsize=(9, 4.4), layout="constrained")
top_row, bottom_row = fig.subfigures(2, 1)
draw_weights(top_row, 0.1)
draw_weights(bottom_row, 0.3)
for std in (0.1, 0.3):
    w = head_weights(std)
    torch.testing.assert_close(w[:, 2], w[:, 5])  # the two dogs' rows, every head
assert 0.09 < head_weights(0.1).min() and head_weights(0.1).max() < 0.24
peaked = (head_weights(0.3).amax(-1) > 0.5).sum().item()  # rows with more than half their weight on one key
assert peaked == 8 and head_weights(0.3).amax(-1).numel() == 24
print(f"std 0.3: {peaked} of 24 rows put more than half of their weight on one token")
torch.testing.assert_close(head_weights(0.3), mha(x_dog, x_dog, x_dog, average_attn_weights=False)[1][0])
fig

# %% [markdown] slideshow={"slide_type": "skip"}
# ### The source projects twice
#
# Before calling `nn.MultiheadAttention`, the source passes the embeddings through three
# extra `nn.Linear` layers, `mha(W_q(e), W_k(e), W_v(e))`. But `nn.MultiheadAttention` applies
# its own input projections (`in_proj_weight`), so the queries are projected twice. That is
# redundant: two linear maps in a row are one linear map. The cell folds the extra layers into
# the module's own projection and gets the same output, without positions (identical dogs) and
# with the codes added to the embeddings first (the dogs differ, as in section 3).

# %% slideshow={"slide_type": "skip"}
W_q, W_k, W_v = (nn.Linear(hdim, hdim, bias=False).to(device).requires_grad_(False) for _ in range(3))
out_twice, _ = mha(W_q(x_dog), W_k(x_dog), W_v(x_dog))  # the source's call

folded = scaled(mha, 0.3)  # an exact copy of the demo's heads
in_q, in_k, in_v = mha.in_proj_weight.chunk(3)
folded.in_proj_weight.copy_(torch.cat([in_q @ W_q.weight, in_k @ W_k.weight, in_v @ W_v.weight]))
torch.testing.assert_close(folded(x_dog, x_dog, x_dog)[0], out_twice)  # one projection does it
assert torch.allclose(out_twice[0, 2], out_twice[0, 5], atol=1e-6)  # and the dogs are still identical
twice_pos, _ = mha(W_q(x_pos), W_k(x_pos), W_v(x_pos))  # the source's call, positions added first
torch.testing.assert_close(folded(x_pos, x_pos, x_pos)[0], twice_pos)  # folds just the same
assert not torch.allclose(twice_pos[0, 2], twice_pos[0, 5], atol=1e-3)  # and now the dogs differ
print("extra projections fold into in_proj_weight: same output, without and with positions")

# %% [markdown] slideshow={"slide_type": "skip"}
# ### What `nn.MultiheadAttention` computes, by hand
#
# With one head and no biases, `nn.MultiheadAttention` is exactly `pl.attention` between an input projection
# and an output projection. Its `in_proj_weight` stacks $W_Q^\top, W_K^\top, W_V^\top$ (PyTorch stores `Linear`
# weights as (out, in)), so $Q = X\,W_Q$ reads `x @ in_q.T`. With several heads the projections are cut into one
# slice per head, and the weights returned are the heads' average: the cell checks it on the demo's `mha` too.

# %% slideshow={"slide_type": "skip"}
ref_out, ref_w = one_head(x_dog, x_dog, x_dog)
in_q, in_k, in_v = one_head.in_proj_weight.chunk(3)
core, core_w = pl.attention(x_dog @ in_q.T, x_dog @ in_k.T, x_dog @ in_v.T)
torch.testing.assert_close(core @ one_head.out_proj.weight.T, ref_out)
torch.testing.assert_close(core_w, ref_w)
qkv = (x_dog @ mha.in_proj_weight.T + mha.in_proj_bias).unflatten(-1, (3, 4, hdim // 4)).movedim(-3, 0)
torch.testing.assert_close(pl.attention(*qkv.transpose(-3, -2))[1].mean(1), mha(x_dog, x_dog, x_dog)[1])
print("nn.MultiheadAttention == out_proj(pl.attention(...)), one head; 4 heads: weights averaged")


# %% [markdown] slideshow={"slide_type": "slide"}
# ## Exercises
#
# Each exercise has a cell for your answer and a checker that says what is right or wrong, with
# a hint. The worked solution follows, collapsed (expand it only after trying), then a cell that
# checks it. In a graded copy (`make student`) the solution cell is empty: write your answer there.
#
# **Exercise 1. Design: a matrix that passes through attention.** Section 1 showed that a
# permutation matrix passes through attention: $\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$. Are
# permutations the only such matrices? Design a $4\times 4$ matrix $T$ that is **not** a
# permutation matrix and keeps all four tokens (it is invertible), yet satisfies
# $\mathrm{Attn}(TX) = T\,\mathrm{Attn}(X)$ for every four tokens $X$ and every head
# $W_Q, W_K, W_V$ (one head without biases, as `pl.self_attention`). The checker tries random
# tokens and heads.

# %% slideshow={"slide_type": "fragment"}
answer = None  # your 4x4 tensor or nested list
_ = check.passes_through(answer)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "passes_through_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
answer = None  # your 4x4 tensor or nested list
### BEGIN SOLUTION
# The derivation used three facts about P: the scores become P S P^T, the softmax moves with the
# permutation, and P^T P = I lines the values up again. A sign shared by every token keeps all
# three: with T = -I the queries and keys are -Q and -K, so the scores (-Q)(-K)^T = QK^T do not
# change, while the values -V carry the sign to the output: Attn(-X) = -Attn(X). So does -P for
# any permutation P. A scale c other than 1 or -1 multiplies every score by c^2, which the softmax
# sees; flipping the sign of one token alone flips its scores with every other token.
answer = -torch.eye(4)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "passes_through", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.passes_through(answer)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 2. Design: between a bag and a line.** Section 1 met two kinds of layers. Some
# treat the tokens as a bag: a row-wise map (the FFN, LayerNorm) and attention; every
# permutation $P$ passes through them, $f(PX) = P\,f(X)$. Others are tied to places: a causal
# mask, a running sum. Is there a layer in between? Design a function `my_layer(x)` from $n$
# tokens, a tensor $(n, d)$, to $(n, d)$ that every **rotation** of the sequence passes through
# (the token at place $i$ moves to place $i + s \bmod n$, for every shift $s$), but not every
# permutation. It must work for any $n \ge 5$ and any $d$; the checker draws new sizes and tokens
# at every run and tries every rotation and every swap of two tokens.

# %% slideshow={"slide_type": "fragment"}
def my_layer(x):
    raise NotImplementedError  # your code


_ = check.shift_not_shuffle(my_layer)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "shift_not_shuffle_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def my_layer(x):
    ### BEGIN SOLUTION
    # A rotation keeps every token's neighbours: the token after x_i is still the one after it, with the last
    # token followed by the first. A shuffle does not. So mix each token with its neighbour at a fixed offset,
    # wrapping around at the end: f(x)_i = x_i + x_(i-1 mod n). Without the wrap-around the first token would
    # be special (it has no predecessor), and a rotation would move a token across that edge. Other mixes of
    # offsets work too (x_(i+1), x_(i-1) + x_(i+1), ...): they read offsets, not places, the idea behind the
    # relative encodings of chapter 4. Not every mix: one that weighs every other token alike (x_i alone, or
    # x_i plus the mean of all tokens) is a bag again.
    return x + x.roll(1, dims=0)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "shift_not_shuffle", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.shift_not_shuffle(my_layer)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 3. Design: a head whose output hides the positions.** Section 3 showed that adding
# positions makes the two "dog" outputs differ, for the demo's weights. Break that claim for one
# attention head (no second layer, no extra projections). Take the five tokens
# "the dog chased another dog" with sinusoidal positions, $h_i = x_i + p_i$ ($d = 8$; the dogs
# at positions 1 and 4), and one attention head in this chapter's row convention,
# $q_i = h_i W_Q$, $k_i = h_i W_K$, $v_i = h_i W_V$. The embeddings, their codes and a first
# head come from the checker (`x, p, w_k, w_v = check.ch01.dog_setup()`). Design a $W_Q$ with
# which the two dogs get identical outputs anyway, whatever $W_K$ and $W_V$ are (the checker
# tries several), while the other three tokens keep queries different from each other and from
# the dogs' ($W_Q = 0$ would make every row the same by making attention uniform, which proves
# nothing).

# %% slideshow={"slide_type": "fragment"}
answer = None  # your 8x8 W_Q
_ = check.blind_query(answer)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "blind_query_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
answer = None  # your 8x8 W_Q
### BEGIN SOLUTION
# Row i's output is softmax(q_i K^T / sqrt(d)) V, and K and V are shared by every row: only the
# query differs between the two dogs. Their inputs differ by u = p_1 - p_4 (same token), so any
# W_Q with u W_Q = 0 gives them equal queries, hence equal outputs; the projector that removes
# the direction of u is one (rank 7: every difference loses its part along u, but only those
# parallel to u vanish, so no other difference between the tokens does). Only W_Q matters for the two
# dogs: erasing u from W_K instead gives them equal keys, but their queries, and so their outputs, still
# differ (the lines after the answer check both with the checker's first head and a random W_Q).
x_, p_, w_k_, w_v_ = check.ch01.dog_setup()
u = (p_[1] - p_[4]) / (p_[1] - p_[4]).norm()
answer = torch.eye(8, dtype=torch.float64) - torch.outer(u, u)
h_ = x_ + p_
w_q_random = torch.randn(8, 8, generator=torch.Generator().manual_seed(4), dtype=torch.float64) / 8**0.5
dogs_of = lambda wq, wk: pl.attention(h_ @ wq, h_ @ wk, h_ @ w_v_)[0][[1, 4]]  # noqa: E731
assert torch.allclose(*dogs_of(answer, w_k_))  # u erased from W_Q: the dogs agree
assert not torch.allclose(*dogs_of(w_q_random, answer @ w_k_), atol=1e-3)  # erased from W_K only: they do not
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "blind_query", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.blind_query(answer)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 4. Design: two places a causal head cannot tell apart.** Section 1 showed that a causal
# mask breaks equivariance: row 0 sees only itself, and every other row sees a prefix of its
# own. Does that let a causal head without positions tell every position apart? Break that hope.
# Take one causal head without positions (`pl.attention(..., causal=True)`) over a sequence of token ids from 0 to 4 (each id stands for one
# embedding; at most 12 tokens). Design a sequence and two positions $i < j$ whose outputs are
# identical whatever the embeddings and the weights are, with at least two different tokens among
# positions 0 to $j$ (one token repeated up to $j$ makes every row up to $j$ that token's value
# vector, which proves nothing). Answer as `(tokens, (i, j))`; the checker tries several random
# embeddings and weights.

# %% slideshow={"slide_type": "fragment"}
answer = None  # (tokens, (i, j)), e.g. ([0, 1, 2], (0, 2))
_ = check.causal_twins(answer)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "causal_twins_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
answer = None  # (tokens, (i, j)), e.g. ([0, 1, 2], (0, 2))
### BEGIN SOLUTION
# Row i is sum_(t <= i) w_t v_t with w_t = exp(s_t) / sum_(t' <= i) exp(s_t'), s_t = q_i . k_t. Two
# copies of every key double the numerator and the denominator alike, so a prefix repeated twice over gives
# the same row as the prefix once, for the same query token. So repeat a pattern: after "0 1" and after
# "0 1 0 1" the last token is 1.
answer = ([0, 1, 0, 1], (1, 3))
# A fact about one layer. A second causal layer reads the first layer's rows, and rows 0 and 2 of those
# differ (row 0 sees token 0 alone, row 2 sees 0, 1, 0), so at layer 2 rows 1 and 3 see different mixes:
tokens, (i, j) = answer
g2 = torch.Generator().manual_seed(5)
emb2 = torch.randn(5, 8, generator=g2, dtype=torch.float64)
wq2, wk2, wv2 = torch.randn(3, 8, 8, generator=g2, dtype=torch.float64) / 8**0.5
for residual in (0.0, 1.0):  # without and with a residual connection
    layer = lambda t: residual * t + pl.attention(t @ wq2, t @ wk2, t @ wv2, causal=True)[0]  # noqa: E731
    first = layer(emb2[tokens])
    second = layer(first)
    assert torch.allclose(first[i], first[j]) and not torch.allclose(second[i], second[j], atol=1e-3)
### END SOLUTION

# %% nbgrader={"grade": true, "grade_id": "causal_twins", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.causal_twins(answer)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **Exercise 5. What a causal head still cannot see.** A causal head without positions
# (`pl.attention(..., causal=True)`) runs over $n$ different tokens. Then tokens are swapped,
# one swap after the other: `swaps` is a list of pairs `(a, b)`, and each swaps the tokens at
# places $a$ and $b$. Run the head again: which output rows differ from the rows at the same
# places before the swaps, for generic weights (special weights, such as $W_V = 0$, hide every
# change, and large weights saturate the softmax, so that a real change can be smaller than
# $10^{-9}$)? Write `changed_rows(n, swaps)` that returns them as a list of
# `range`s (rows 2, 3 and 9: `[range(2, 4), range(9, 10)]`). The checker asks about sequences
# of up to $10^{12}$ tokens, where no simulation of the head can run: derive the rule.

# %% slideshow={"slide_type": "fragment"}
def changed_rows(n, swaps):
    raise NotImplementedError  # your code


_ = check.changed_rows(changed_rows)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "changed_rows_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def changed_rows(n, swaps):
    ### BEGIN SOLUTION
    # Row i attends with the query of the token at place i over the keys and values at places 0..i, and
    # (section 1) the order of those (key, value) pairs does not matter: row i depends only on its own token
    # and on the set of tokens at 0..i. So row i changes exactly when its token moved, or when the set
    # changed, that is, when some token now at a place <= i came from a place > i (a token crossed i; one
    # that leaves the prefix makes room for one that enters it). Both say: i lies between the old and the
    # new place of some token that moved. Follow the few tokens the swaps touch (a later swap moves what an
    # earlier one placed), then take, for each token that moved, the rows from its old place to its new one.
    came_from = {}  # place -> the place its token stood at before the swaps
    for a, b in swaps:
        came_from[a], came_from[b] = came_from.get(b, b), came_from.get(a, a)
    return [range(min(p, q), max(p, q) + 1) for p, q in came_from.items() if p != q]
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "changed_rows", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.changed_rows(changed_rows)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Summary
#
# - Without positions, self-attention is **permutation-equivariant**: $\mathrm{Attn}(PX) =
#   P\,\mathrm{Attn}(X)$, because the softmax acts on each row's entries alike. Identical
#   tokens get identical outputs wherever they stand. Residual connections, feed-forward
#   networks and LayerNorm keep this (row-wise maps and sums of equivariant maps are
#   equivariant), so a whole block, and a whole model, is blind to order too.
# - This needs every query to see every key. A causal mask is tied to places, not tokens, and
#   breaks it: row 0 sees only itself (chapter 7 builds a counter on this). Within
#   one causal layer the tokens before a query still form a bag, weighed by their shares
#   (Exercises 4 and 5); a second layer reads the first one's outputs, which can differ between
#   two places whose rows were equal, because the rows before them differ.
# - For a fixed query it is **permutation-invariant** in the (key, value) pairs: the
#   sentence is a bag of words.
# - Adding a position code $p_i$ to each token before the projections breaks both: a reorder
#   stays invisible, for any weights, when every token lands on a place with the code of the
#   place it left (one vector everywhere hides every reorder), and shows for the demo's weights
#   (and ten redrawn ones) in every order and code of section 4's drop-downs where some token does
#   not (not for every weight: Exercise 3). Chapter 2 asks what a good
#   $p_i$ looks like.
#
# ## Errata in the sources
#
# 1. **Positions after the projections, written as if it were the usual form.** `001` writes
#    $\mathrm{Attn}(X) = (V+P)\,\mathrm{softmax}((K+P)^\top(Q+P)/\sqrt d)$ with $Q = W_QX$
#    and $P$ its matrix of position codes ($P_{\mathrm{pos}}$ in section 5): the codes are added
#    after projecting. Acting on positions after the projections is a design one may choose (RoPE,
#    chapter 5, rotates the projected q and k), so the formula is not wrong as a model; what is imprecise is that it does not
#    follow from `001`'s own line just before, $x_i' = x_i + p_i$, which projects the sum,
#    $Q = W_Q(X+P_{\mathrm{pos}})$, as `nn.MultiheadAttention` does when fed $X + P_{\mathrm{pos}}$. The
#    two give different attention weights (the cell in section 5 asserts it). The formula also leaves the softmax
#    axis unstated; in its column convention it must run over the keys (`dim=0`).
# 2. **Projected twice.** `001`'s demo applies three `nn.Linear` layers and then
#    `nn.MultiheadAttention`, which projects again. Harmless but redundant: section 5 folds
#    the extra layers into `in_proj_weight` and gets the same output, with and without positions.
# 3. **Not an error, but easy to misread:** the demo compares positions 2 and 5 because
#    its tokenizer, as those indices imply, prepends a beginning-of-sequence token; without it the two "dog" tokens
#    would be at positions 1 and 4.
