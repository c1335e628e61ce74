# %% [markdown] slideshow={"slide_type": "slide"}
# # 4 · Relative position encodings
#
# An absolute encoding gives the token at position $i$ a vector $p_i$ and adds it to the embedding before the
# projections. The attention score then sees *where* each token is, and only indirectly *how far
# apart* two tokens are. Relative encodings go the other way: they put into attention something that
# depends on the offset between query and key, and nothing else about the positions (most of them
# into the score alone; Shaw et al. also into the values, §2).
#
# This chapter follows one line of papers:
# 1. the four terms hidden inside an absolute score $q_i^\top k_j$;
# 2. Shaw et al. (2018): a learned vector per clipped offset, for keys and values;
# 3. Transformer-XL (Dai et al. 2019): sinusoidal offsets, two global biases $u, v$, scores
#    computed per distance rather than a vector per pair, and the *relative shift* (Music
#    Transformer's "skewing") that moves those scores into place;
# 4. T5 (Raffel et al. 2020): one learned scalar per offset bucket and head;
# 5. DeBERTa (He et al. 2021): content and position kept apart, with their own projections (in v1;
#    v2/v3 reuse the content ones), relative in every attention layer, with absolute positions added
#    back near the output for pretraining;
# 6. one picture of the bias each method adds, as a function of $(i, j)$;
# 7. one table: parameters, memory, what each method can express, which models use it;
# 8. exercises, and the errors in the source notes this chapter follows.
#
# **Sign convention** (the course's [conventions page](00_index.ipynb#Conventions)). Positions are
# 0-based, query $i$, key $j$. The library's **offset** is *key minus query*, $j - i$ (negative for keys
# in the past), as in Shaw et al. and T5; the **distance** is $|j - i|$. Sections that use another sign
# or other letters (XL and DeBERTa's query minus key, Shaw's window $k$) say so where they do.

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import math

import ipywidgets as widgets
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

import posenc_lib as pl
from posenc_lib import check, viz

viz.use_style()  # white figures, dark text: readable in light and dark themes

g = torch.manual_seed(0)
device = pl.default_device()  # the CPU unless you opt in with POSENC_DEVICE (00_index); tensors below follow it


def depends_only_on_offset(M: torch.Tensor, atol: float = 1e-5) -> bool:
    """True when M[i, j] is constant along every diagonal, i.e. a function of j - i alone."""
    return torch.allclose(M[1:, 1:], M[:-1, :-1], atol=atol)


def assert_close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5) -> None:
    """Same shape, same values (to atol; equal infinities count as equal)."""
    assert a.shape == b.shape and torch.allclose(a, b, atol=atol, rtol=1e-5), (a, b)


def heatmap_row(mats, titles, *, label="score", width=2.2, height=2.5):
    """One row of heatmaps on a shared, 0-centred colour scale with one colour bar.

    Fixed margins instead of the layout solver: five panels draw in half the time.
    """
    n, W = len(mats), width * len(mats) + 0.8
    fig = Figure(figsize=(W, height), layout="none")
    axes = fig.subplots(1, n)
    fig.subplots_adjust(left=0.5 / W, right=1 - 0.9 / W, bottom=0.2, top=0.86, wspace=0.3)
    vmax = max(float(m[torch.isfinite(m)].abs().max()) for m in mats)
    for ax, m, title in zip(axes, mats, titles):
        im = viz.heatmap(m, ax=ax, title=title, xlabel="key j", ylabel="query i" if ax is axes[0] else "",
                         colorbar=None, diverging=True, vmax=vmax)
    fig.colorbar(im, cax=fig.add_axes([1 - 0.75 / W, 0.2, 0.12 / W, 0.66]), label=label)
    return fig

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 1. Four terms inside an absolute score
#
# With an absolute encoding, the token at position $i$ enters attention as $x_i + p_i$, so
# $q_i = W_q (x_i + p_i)$ and $k_j = W_k (x_j + p_j)$. Multiplying out:
#
# $$q_i^\top k_j
#   = \underbrace{x_i^\top W_q^\top W_k x_j}_{\text{content–content}}
#   + \underbrace{x_i^\top W_q^\top W_k p_j}_{\text{content–position}}
#   + \underbrace{p_i^\top W_q^\top W_k x_j}_{\text{position–content}}
#   + \underbrace{p_i^\top W_q^\top W_k p_j}_{\text{position–position}}.$$
#
# Shaw, XL, T5 and DeBERTa (§§2–5) keep the first term and rewrite some of the other three. The next cell
# computes each term for 6 tokens ($d_\text{model} = 8$, head dimension 4, sinusoidal $p$) and checks
# that they add back up to the full score.

# %%
L, d_model, d_head = 6, 8, 4
x = torch.randn(L, d_model).to(device)
p = pl.sinusoidal_positions(L, d_model, device=device)
W_q, W_k = torch.randn(d_head, d_model).to(device), torch.randn(d_head, d_model).to(device)

full = ((x + p) @ W_q.T) @ ((x + p) @ W_k.T).T  # row i, column j: q_i . k_j
terms = {
    "content–content": (x @ W_q.T) @ (x @ W_k.T).T,
    "content–position": (x @ W_q.T) @ (p @ W_k.T).T,
    "position–content": (p @ W_q.T) @ (x @ W_k.T).T,
    "position–position": (p @ W_q.T) @ (p @ W_k.T).T,
}
assert_close(sum(terms.values()), full, atol=1e-4)
for name, t in terms.items():
    print(f"{name:18s} score of query 2, key 4: {t[2, 4].item():+8.3f}")
print(f"{'sum':18s} score of query 2, key 4: {full[2, 4].item():+8.3f}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# Only the position–position term is free of content. Even it does **not** depend on the offset alone
# once the projections are in the way. Take a query at $m$ and a key at $n$ (chapter 3's letters, as
# sinusoids are in play). Then $p_m^\top p_n$ is a sum of $\cos((n-m)\theta)$ over the pairs'
# frequencies $\theta$: a function of the offset (chapter 3, §6). But $p_m^\top W_q^\top W_k p_n$ is a function of the offset **if**
# $W_q^\top W_k$ acts on each pair as a scaled rotation, $\begin{pmatrix} a & -b \\ b & a \end{pmatrix}$, with nothing across pairs.
# That condition is sufficient, and for these sinusoids it is also necessary: the matrices $A$ that make
# $p_m^\top A\, p_n$ depend on the offset alone form a space of dimension 8 (a and b for each of the 4 pairs),
# exactly the scaled rotations (the cell solves for them). The cell also checks three matrices. The scaled rotations give a
# score constant along every diagonal. A symmetric block with zero trace on each pair does not. Nor does
# the random product of the cell above. It prints a sub-diagonal (query $m$, key $m + 1$, all at offset
# 1), where a function of the offset must be constant; the main diagonal proves nothing, since
# $p_m^\top p_m = d_\text{model}/2$ at every $m$.
#
# The condition has a price in a head narrower than the model. $W_q^\top W_k$ is $d_\text{model} \times
# d_\text{model}$ but has rank at most $d_\text{head}$: here at most 4, while a nonzero scaled rotation on
# each of the 4 pairs has rank 8. Each nonzero pair block has rank 2, so a product of this form keeps at
# most $d_\text{head}/2 = 2$ of the 4 pairs and sets the others to zero: it drops frequencies (checked).
#
# Whether *training* lands near a scaled rotation is another question. This random stand-in cannot
# answer it, and this chapter does not test it. Relative methods do not leave it to training: they build
# the offset dependence in by construction.

# %%
pp_plain = p @ p.T
assert depends_only_on_offset(pp_plain)  # sinusoids alone: a function of j - i
# Every A with p_m^T A p_n a function of n - m: each entry of P A P^T is linear in A's 64 entries, and the
# condition asks that neighbours along a diagonal agree, a linear system whose solutions are its null space.
p64 = pl.sinusoidal_positions(200, d_model, dtype=torch.float64)  # 200 positions: the slowest pair turns 0.2 rad
basis = torch.eye(d_model * d_model, dtype=torch.float64).view(-1, d_model, d_model)
along = torch.stack([(p64 @ E @ p64.T)[1:, 1:] - (p64 @ E @ p64.T)[:-1, :-1] for E in basis], -1).view(-1, d_model ** 2)
sing = torch.linalg.svdvals(along)
null = int((sing < 1e-12 * sing[0]).sum())
assert null == d_model and sing[-null - 1] > 1e-7 * sing[0]  # 8 = a and b for each of the 4 pairs, a clear gap
print(f"matrices A with p_m^T A p_n a function of n - m: a space of dimension {null} (the scaled rotations)")
assert not depends_only_on_offset(terms["position–position"], atol=1e-2)  # after W_q, W_k: not any more
ab = torch.randn(d_model // 2, 2, generator=torch.Generator().manual_seed(1)).tolist()  # a, b for each pair
rotation = torch.block_diag(*[torch.tensor([[a, -b], [b, a]]) for a, b in ab]).to(device)
traceless = torch.block_diag(*[torch.tensor([[a, b], [b, -a]]) for a, b in ab]).to(device)
assert depends_only_on_offset(p @ rotation @ p.T)  # a scaled rotation per pair: a function of j - i
assert not depends_only_on_offset(p @ traceless @ p.T, atol=1e-2)  # symmetric, zero trace: not
assert torch.allclose(pp_plain.diagonal(), torch.full((L,), d_model / 2, device=device))  # |p_m|^2: trivially constant
assert torch.linalg.matrix_rank((W_q.T @ W_k).cpu()) == d_head < torch.linalg.matrix_rank(rotation.cpu()) == d_model
assert all(torch.linalg.matrix_rank(rotation[t:t + 2, t:t + 2].cpu()) == 2 for t in range(0, d_model, 2))  # rank 2 a pair
two_pairs = torch.block_diag(rotation[:4, :4].cpu(), torch.zeros(4, 4)).to(device)  # 2 of the 4 pairs kept, 2 zeroed
assert torch.linalg.matrix_rank(two_pairs.cpu()) == d_head and depends_only_on_offset(p @ two_pairs @ p.T)
print("offset 1 (query m, key m + 1), p_m . p_n:           ", [round(v, 3) for v in pp_plain.diagonal(1).tolist()])
print("offset 1 (query m, key m + 1), p_m W_q^T W_k p_n:   ",
      [round(v, 3) for v in terms["position–position"].diagonal(1).tolist()])
print("offset 1 (query m, key m + 1), p_m (rotation) p_n:  ", [round(v, 3) for v in (p @ rotation @ p.T).diagonal(1).tolist()])
print("rank of W_q^T W_k:", torch.linalg.matrix_rank((W_q.T @ W_k).cpu()).item(), "of", d_model)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 2. Shaw et al. (2018): a learned vector per clipped offset
#
# Shaw, Uszkoreit and Vaswani drop $p$ from the input and add learned vectors inside attention instead.
# For query $i$ and key $j$ they look up row $\operatorname{clip}(j - i, -k, k)$ of two tables, $a^K$ and
# $a^V$ (each $2k + 1$ rows of size $d$). Here $k$ alone is the clipping window, a whole number, while $k_j$
# and $W_k$ still belong to the keys:
#
# $$e_{ij} = \frac{q_i^\top (k_j + a^K_{ij})}{\sqrt d}, \qquad
#   z_i = \sum_j \operatorname{softmax}_j(e_{ij})\,(v_j + a^V_{ij}).$$
#
# Offsets beyond $k$ share the edge row: past the window, one layer reading position alone cannot tell
# 10 from 100.
# `pl.clipped_relative_positions` returns the table row $\operatorname{clip}(j - i, -k, k) + k$.

# %%
L = 12
offsets = pl.relative_positions(L, device=device)  # j - i
rows = pl.clipped_relative_positions(L, L, 3, device=device)
assert rows.min().item() == 0 and rows.max().item() == 2 * 3
assert (rows == torch.clamp(offsets, -3, 3) + 3).all()
fig, ax = viz.figure(1, 1, width=4.0, height=3.2)
viz.heatmap(rows, ax=ax, title="table row clip(j − i, −3, 3) + 3", xlabel="key j", ylabel="query i",
            colorbar="row of a^K, a^V")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# Shaw attention in the library: `ShawRelativePositions` holds the two tables and returns
# $a^K_{ij}, a^V_{ij}$ for every pair; `shaw_attention` uses them. Keys more than $k$ away get the
# same vectors, so query 0 cannot distinguish key 5 from key 11 by position. The cell checks query 0's
# weights against $e_{0j}$ and its output $z_0 = \sum_j w_{0j}(v_j + a^V_{0j})$ by hand.

# %%
g = torch.manual_seed(0)
shaw = pl.ShawRelativePositions(d=4, max_distance=3).to(device)
a_k, a_v = (t.detach() for t in shaw(L))  # (L, L, 4) each
q_, k_, v_ = (torch.randn(L, 4).to(device) for _ in range(3))
z, w = pl.shaw_attention(q_, k_, v_, a_k, a_v)
assert_close(a_k[0, 5], a_k[0, 11])  # offsets 5 and 11: both clipped to +3
assert not torch.allclose(a_k[0, 1], a_k[0, 2])  # inside the window every offset differs
e_05 = q_[0] @ (k_[5] + a_k[0, 5]) / 2  # sqrt(d) = 2
assert_close(w[0].log() - w[0].log()[5], (q_[0] @ (k_.T + a_k[0].T) / 2) - e_05)
assert_close(z[0], (w[0, :, None] * (v_ + a_v[0])).sum(0))  # z_0 = sum_j w_0j (v_j + a^V_0j)
print("weights of query 0:", [round(v, 3) for v in w[0].tolist()])

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Two ways to write the same thing
#
# The source notes (`004`) write Shaw's method as $k_n = W_k(x_n + \tilde p^k_r)$ with
# $r = \operatorname{clip}(m - n, r_\min, r_\max)$, their query $m$ and key $n$ being our $i$ and $j$.
# Through $r$, that $k_n$ depends on the query $m$ too: it is one vector per *pair* $(m, n)$, not per key, which is
# what the $(L, L, d)$ tensor $a^K$ above holds (listed as erratum 5 at the end of the chapter). Two more
# differences from the library, neither an error:
#
# * **the sign**: $m - n$ is query minus key, the mirror of $j - i$. Indexing a table $T'$ by
#   $\operatorname{clip}(m-n, -k, k) + k$ gives the same vectors as indexing $T$ by
#   $\operatorname{clip}(j-i, -k, k) + k$ exactly when $T'$ is $T$ upside down;
# * **before or after the projection**: $W_k(x_n + \tilde p) = W_k x_n + W_k \tilde p$, so adding
#   $\tilde p$ before $W_k$ is Shaw's $a^K$ added after it, with $a^K = W_k \tilde p$.

# %%
k_win = 3
rows_query_minus_key = torch.clamp(-offsets, -k_win, k_win) + k_win  # the source's clip(m - n) + k
assert (rows_query_minus_key == 2 * k_win - rows).all()  # the mirror image of the library's rows
table = shaw.keys.weight.detach()  # (2k + 1, d), indexed by the library's rows
assert_close(table.flip(0)[rows_query_minus_key], table[rows])  # same vectors, table flipped

W = torch.randn(4, 4).to(device)
p_tilde = torch.randn(4).to(device)
assert_close(W @ (k_[1] + p_tilde), W @ k_[1] + W @ p_tilde)  # before W == after W, a = W p
print("query-minus-key rows are the key-minus-query rows of the flipped table")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 3. Transformer-XL: sinusoidal distances and two global biases
#
# Transformer-XL (Dai et al. 2019) processes text in segments. Each segment also attends to a cached
# copy of the previous one (the *memory*, $M$ keys). Absolute positions would clash between segments,
# because each segment numbers its tokens from 0. In the example below, segments have 4 tokens and the
# memory keeps the previous segment's last 2 (positions 2 and 3). So keys 0 and 4 both carry $p_2$. Yet
# key 4 is query 2 itself, and key 0 lies 4 steps before it (checked below).
#
# XL therefore rewrites the four terms of §1 around one idea: **the query's own position should not
# change how much it likes a key**. Take §1's terms one at a time, for query $i$ (at position $M + i$)
# and key $j$:
#
# * content–content, $x_i^\top W_q^\top W_k x_j$, stays; only the key's matrix gets a name of its own,
#   $W_{k,E}$ (E for embedding, the content);
# * content–position, $x_i^\top W_q^\top W_k p_j$: the key's absolute $p_j$ becomes $R_{M+i-j}$, a fixed
#   sinusoid of the distance between the two, with a second key matrix $W_{k,R}$ for positions;
# * position–content, $p_i^\top W_q^\top W_k x_j$: the query's projected position $W_q p_i$ becomes one
#   learned vector $u$, the same at every position;
# * position–position, $p_i^\top W_q^\top W_k p_j$: both changes at once, $W_q p_i$ becomes a second
#   learned vector $v$ and $p_j$ becomes $R_{M+i-j}$.
#
# Together:
#
# $$A^{\text{rel}}_{ij} =
#   \underbrace{x_i^\top W_q^\top W_{k,E}\, x_j}_{(a)\ \text{content}}
# + \underbrace{x_i^\top W_q^\top W_{k,R}\, R_{M+i-j}}_{(b)\ \text{content-dependent position}}
# + \underbrace{u^\top W_{k,E}\, x_j}_{(c)\ \text{global content bias}}
# + \underbrace{v^\top W_{k,R}\, R_{M+i-j}}_{(d)\ \text{global position bias}}.$$
#
# Query $i$ sits at position $M + i$, key $j$ at $j$. XL indexes its sinusoids by the **signed distance
# query minus key**, $M + i - j$. It is $\ge 0$ for every key the (causal) query may see, and it is the
# negative of this course's offset. We keep XL's sign in this section, as its paper and code do.
#
# $R_o$, the sinusoid of distance $o$, is fixed, not learned. It is laid out as XL's code lays it out:
# all sines, then all cosines (chapter 3's *concatenated* layout, not §1's interleaved one; the sign
# rule for negative signed distances below is worded for it). $u, v \in \mathbb R^{d_\text{head}}$ live
# *after* the projection, one pair per head.
#
# In the library: `q` $= W_q x_i$, `k` $= W_{k,E} x_j$, `r[o]` $= W_{k,R} R_o$ for distances
# $o = 0, \dots,$ `k_len`$- 1$ (`pl.xl_relative_sinusoids`, $[\sin \mid \cos]$), and
# `pl.xl_score_terms(q, k, r, u, v)` returns the four terms.

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### The four terms on a small example
#
# A segment of $Q = 4$ queries with a memory of $M = 2$ keys: $K = M + Q = 6$ keys in all. XL is a
# causal language model. So terms (b) and (d) are needed only for keys the query may see
# ($j \le M + i$; the shift below computes the rest too, and the mask hides it), and they need $R$ for the distances $0, \dots, K - 1$ only (a model that also looks
# ahead needs more, as XLNet shows below). Term (c) is the same for every query (a row vector
# repeated): it says which keys are worth attending to, whatever the query is. Each panel is drawn on
# its own scale (divided by its largest entry). The last panel, "sum", is
# `pl.xl_scores_direct`: the four terms added pair by pair, $-\infty$ on hidden keys (the shift below
# computes the same scores faster).

# %%
g = torch.manual_seed(0)
W_q, W_kE = torch.randn(d_head, d_model).to(device), torch.randn(d_head, d_model).to(device)  # W_q, W_{k,E}
M, Q = 2, 4
K = M + Q
h = torch.randn(K, d_model).to(device)  # memory rows first, then the segment
W_kR = torch.randn(d_head, d_model).to(device)
q = h[M:] @ W_q.T  # (Q, d_head): only the segment asks
k = h @ W_kE.T  # (K, d_head): memory and segment answer
r = pl.xl_relative_sinusoids(K, d_model, device=device) @ W_kR.T  # (K, d_head): row o = W_kR R_o
u, v = torch.randn(d_head).to(device), torch.randn(d_head).to(device)

xl_terms = pl.xl_score_terms(q, k, r, u, v)
seg_pos = torch.cat([torch.arange(Q)[-M:], torch.arange(Q)])  # memory: the previous Q-token segment's last M
xl_dist = M + torch.arange(Q)[:, None] - torch.arange(K)[None, :]  # query i minus key j, memory included
assert seg_pos.tolist() == [2, 3, 0, 1, 2, 3]  # absolute positions, numbered within each segment
assert seg_pos[0] == seg_pos[M + 2] == 2 and xl_dist[2, 0] == 4 and xl_dist[2, M + 2] == 0  # same p_2, 4 apart
assert_close(xl_terms["c"], xl_terms["c"][:1].expand(Q, K))  # (c): the same row for every query
hidden = pl.causal_mask(Q, K, device=device)
assert torch.isneginf(xl_terms["b"][hidden]).all() and torch.isfinite(xl_terms["b"][~hidden]).all()
ninf = torch.tensor(float("-inf"), device=device)
b_loop = torch.stack([torch.stack([q[i] @ r[M + i - j] if j <= M + i else ninf for j in range(K)]) for i in range(Q)])
d_loop = torch.stack([torch.stack([v @ r[M + i - j] if j <= M + i else ninf for j in range(K)]) for i in range(Q)])
assert_close(xl_terms["b"], b_loop)  # (b) and (d), pair by pair
assert_close(xl_terms["d"], d_loop)

names = {"a": "(a) content", "b": "(b) content–position", "c": "(c) global content u",
         "d": "(d) global position v"}
xl_panels = [*xl_terms.values(), pl.xl_scores_direct(q, k, r, u, v)]
fig = heatmap_row([m / m[torch.isfinite(m)].abs().max() for m in xl_panels], [*names.values(), "sum"],
                  label="term / max |term|")  # each panel on its own scale: (a) is far larger than (d)
fig

# %% [markdown] slideshow={"slide_type": "slide"}
# ### The relative shift, step by step
#
# Terms (b) and (d) need $r_{M+i-j}$ for every pair. XL does not look a vector up per pair: it scores
# every query against every *distance* with one matmul, $(q_i + v) \cdot r_o$ in a $(Q, K)$ matrix whose
# column $c$ holds distance $K - 1 - c$, and then moves row $i$ so that column $j$ lands on distance
# $M + i - j$. The move is a trick with memory layout:
#
# 1. pad a zero column on the left: $(Q, K+1)$;
# 2. read the same numbers as a $(K+1, Q)$ matrix;
# 3. drop its first row: $(K, Q)$;
# 4. read the rest as $(Q, K)$.
#
# The smallest case first: $Q = K = 3$, no memory, so query $i$ may see keys $0, \dots, i$ at distances
# $i, \dots, 0$. Fill the matrix with labels, entry $(i, c)$ holding $10\,(i+1) + \text{distance}$: the
# tens say which row a number came from, the units its distance.

# %%
Q3 = K3 = 3
labels3 = 10 * (torch.arange(Q3)[:, None] + 1) + (K3 - 1 - torch.arange(K3))  # row i: 10(i+1) + 2, 1, 0
step1 = F.pad(labels3, (1, 0))  # (Q, K + 1)
step2 = step1.reshape(K3 + 1, Q3)  # same memory, other shape
step3 = step2[1:]  # drop the first row: (K, Q)
step4 = step3.reshape(Q3, K3)
for name, s in [("labels (column c = distance K-1-c)", labels3), ("1. pad a zero column", step1),
                ("2. read as (K+1, Q)", step2), ("3. drop the first row", step3), ("4. read as (Q, K)", step4)]:
    print(f"{name}, shape {tuple(s.shape)}: {s.tolist()}")
assert torch.equal(step4, pl.rel_shift(labels3))  # the library's shift
assert step4.tolist() == [[10, 0, 22], [21, 20, 0], [32, 31, 30]]  # row i, key j <= i: 10(i+1) + (i - j)
assert step4.untyped_storage().data_ptr() == step1.untyped_storage().data_ptr()  # after the pad: views only

# %% [markdown] slideshow={"slide_type": "subslide"}
# Read step 4 row by row. Row 0 is $10$ (distance 0, key 0), then the pad and a number of row 1. Row 1
# is $21, 20$ (distances 1, 0), then the pad. Row 2 is $32, 31, 30$.
#
# Why it works: the padded rows hold $K + 1$ numbers, and step 4 reads them back $K$ at a time. So each
# output row starts one place further left in its own padded row than the row above did, where the
# distance is one larger. Dropping the first $Q$ numbers (step 3) sets where row 0 starts.
#
# With a memory of $M$ keys the same holds. Row $i$ holds its own labels, with distances
# $M + i, \dots, 0$ for keys $j = 0, \dots, M + i$: exactly the keys query $i$ may see. **That is where
# the trick is exact.** To the right of it sit the zero pad and numbers of row $i + 1$: wrapped garbage,
# which the causal mask hides. The cell checks it on §3's example ($Q = 4$, $M = 2$, $K = 6$), with
# labels $100\,(i+1) + \text{distance}$.

# %%
labels = 100 * (torch.arange(Q, device=device)[:, None] + 1) + (K - 1 - torch.arange(K, device=device))
shifted = pl.rel_shift(labels)
visible = ~pl.causal_mask(Q, K, device=device)  # j <= M + i
for i in range(Q):
    for j in range(K):
        if visible[i, j]:
            assert shifted[i, j] == 100 * (i + 1) + (M + i - j)  # own row, distance M + i - j
        else:
            assert shifted[i, j] // 100 in (0, i + 2)  # the pad or the next row: not a score

# %% [markdown] slideshow={"slide_type": "fragment"}
# Now with real scores: `pl.xl_scores` computes $(q+u)k^\top$ plus the shifted $(q+v)r^\top$. Without
# the mask it disagrees with the direct computation exactly on the future keys; with it, it agrees
# everywhere.

# %%
by_offset = (q + v) @ r.flip(0).T  # (Q, K): column c = distance K - 1 - c
raw = pl.xl_scores(q, k, r, u, v, mask_future=False)
direct = pl.xl_scores_direct(q, k, r, u, v)
assert_close(raw[visible], direct[visible])  # exact where the query may look
assert torch.isfinite(raw[~visible]).all() and torch.isneginf(direct[~visible]).all()  # garbage vs no score
assert_close(pl.xl_scores(q, k, r, u, v), direct)  # masked: identical, -inf included

content = (q + u) @ k.T  # (a)+(c), left out of the panels: they show only the moved (q+v)·r
fig = heatmap_row([by_offset, raw - content, direct - content], ["(q+v)·r, column c: distance K−1−c",
                  "shifted, unmasked", "direct (b)+(d)"], width=2.9)
fig.axes[0].set_xlabel("column c")
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### What the shift saves, and what it does not
#
# The saving is in scoring *distances* before pairs. Looking up $W_{k,R}R_{M+i-j}$ for every pair
# builds a $(Q, K, d)$ tensor of position vectors. One matmul of the queries against the $K$ distance
# vectors gives the same scores from a $(Q, K)$ matrix, $d$ times smaller (the paper's Appendix B).
# Music Transformer (Huang et al. 2018, §3.4 and its Figure 1) introduced the same trick, as "skewing",
# for Shaw's vectors.
#
# The shift is only the last move, and a gather does it too: `torch.gather` with each entry's column,
# $K - 1 - (M + i - j)$, puts the same scores in place, in the same $O(QK)$ memory. The shift spares
# only that $(Q, K)$ integer index, and the index can be built once and shared by every batch and head.
# The next cell counts, on §3's example ($Q = 4$, $K = 6$, $d = 4$), what each route builds after the
# distance scores, and checks that the gather and the shift agree.

# %%
per_pair = torch.stack([torch.stack([r[(M + i - j) % K] for j in range(K)]) for i in range(Q)])  # (Q, K, d)
column = (K - 1 - xl_dist).clamp(0, K - 1)  # the column holding distance M + i - j (clamped where hidden)
gathered = by_offset.gather(1, column.to(device))
assert_close(gathered[visible], pl.rel_shift(by_offset)[visible])  # the gather and the shift agree
assert_close(torch.einsum("id,ijd->ij", q + v, per_pair)[visible], gathered[visible])  # = the per-pair scores
built = {"per pair: (Q, K, d) vectors": per_pair.numel(), "gather: index + output": column.numel() + gathered.numel(),
         "shift: padded copy": F.pad(by_offset, (1, 0)).numel()}  # the gather's and the shift's: besides the scores
assert built == {"per pair: (Q, K, d) vectors": 96, "gather: index + output": 48, "shift: padded copy": 28}
assert list(built.values()) == [Q * K * d_head, 2 * Q * K, Q * (K + 1)]  # QKd, 2QK, Q(K + 1)
assert built["gather: index + output"] - built["shift: padded copy"] == Q * K - Q == 20 and column.numel() == 24
heads = torch.randn(2, 3, Q, K, generator=torch.Generator().manual_seed(4)).to(device)  # batch 2, 3 heads
shared = column.expand(2, 3, Q, K)  # the one (Q, K) index, read for every batch and head
assert shared.untyped_storage().data_ptr() == column.untyped_storage().data_ptr()  # a view of the index: no copy
assert shared.stride() == (0, 0, K, 1)  # step 0 over batch and heads
assert_close(heads.gather(-1, shared.to(device))[..., visible], pl.rel_shift(heads)[..., visible])
print(built)

# %% [markdown] slideshow={"slide_type": "fragment"}
# Per pair $QKd = 96$ numbers, the gather $2QK = 48$ (index and output), the shift $Q(K + 1) = 28$ (one
# padded copy, then views): scoring distances is the $d$-fold saving, and the shift's edge over a gather
# is only the index, small once it is shared across batch and heads.

# %% [markdown] slideshow={"slide_type": "fragment"}
# XL is causal, so it needs the distances $0, \dots, K - 1$ only. Keys after the query need negative
# signed distances, and the sinusoid has them: $R_{-o}$ keeps the cosines of $R_o$ and negates its sines
# (the next cell checks), so a key $o$ steps after the query is told apart from one $o$ steps before it. XLNet (Yang et al. 2019)
# uses XL's attention bidirectionally: its $R$ covers negative signed distances too, and a reshape shift of its
# own moves those scores into place (transformers' `XLNetRelativeAttention.rel_shift_bnij`).
#
# The paper writes one $u$ and one $v$ for the model; XLNet keeps a pair in every layer, and so do some
# of XL's own released runs (aside below). §7 counts the per-layer form.
#
# <details><summary>Aside, for readers of the released code (optional; citations, not run here)</summary>
#
# The authors' TensorFlow code shares one pair across layers unless its `untie_r` flag is set, and their
# WikiText-103 script sets it (kimiyoung/transformer-xl, `tf/sota/wt103.sh`). Their PyTorch code always
# shares one pair: `MemTransformerLM._create_params` in `pytorch/mem_transformer.py` creates a single
# `r_w_bias` and `r_r_bias` (XL's $u$ and $v$) for the whole model.
#
# </details>

# %%
dist_o = torch.arange(K, dtype=torch.float32)
theta = 10000.0 ** (-torch.arange(d_model // 2, dtype=torch.float32) * 2 / d_model)  # chapter 3's frequencies
R_pos = pl.xl_relative_sinusoids(K, d_model)  # R_o, [sin | cos]
assert_close(R_pos, torch.cat([torch.sin(dist_o[:, None] * theta), torch.cos(dist_o[:, None] * theta)], -1))
R_neg = torch.cat([torch.sin(-dist_o[:, None] * theta), torch.cos(-dist_o[:, None] * theta)], -1)  # R_{-o}, same rule
half = d_model // 2
assert_close(R_neg[:, half:], R_pos[:, half:])  # the cosines kept
assert_close(R_neg[:, :half], -R_pos[:, :half])  # the sines negated
assert not torch.equal(R_neg[1:], R_pos[1:])  # so o steps after and o steps before differ (o >= 1)
print("R_1:", [round(x, 3) for x in R_pos[1].tolist()], "\nR_-1:", [round(x, 3) for x in R_neg[1].tolist()])

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 4. T5: one learned scalar per offset bucket and head
#
# T5 drops position vectors altogether: each head $h$ adds a learned **scalar** $b_h(\text{bucket}(j - i))$
# to the score. The bucket of an offset comes from two numbers, `num_buckets` and `max_distance`
# (T5's defaults: 32 and 128), in three steps (`pl.t5_relative_bucket`):
#
# 1. **Direction.** A *bidirectional* (encoder) bias splits the buckets into two halves of
#    $B = \text{num\_buckets}/2$: a key at or before the query ($j \le i$) uses buckets $0, \dots, B-1$, a
#    key after it adds $B$; the distance is $n = |j - i|$. A *causal* (decoder) bias gives all
#    $B = \text{num\_buckets}$ buckets to the past, with $n = \max(i - j, 0)$: every key after the query
#    counts as distance 0.
# 2. **Exact near.** With $e = \lfloor B/2 \rfloor$ (T5's `max_exact`), a distance $n < e$ gets bucket $n$.
# 3. **Log-spaced far.** A distance $n \ge e$ gets
#
# $$\text{bucket}(n) = \min\Big(B - 1,\; e + \Big\lfloor \frac{\log(n/e)}{\log(\text{max\_distance}/e)}\,(B - e)
#   \Big\rfloor\Big).$$
#
# The $B - e$ far buckets cut $\log n$ between $\log e$ and $\log(\text{max\_distance})$ into equal
# steps, so their edges grow roughly geometrically, by a factor $(\text{max\_distance}/e)^{1/(B-e)}$ a
# bucket. Only roughly: the edges are floored to whole distances, so a far bucket can be as wide as the one
# before it, or even narrower. With T5's defaults, the encoder's buckets 8 and 9 both hold 4 distances,
# and the decoder's bucket 17 holds 2 where bucket 16 holds 3 (checked two cells down). The next cell
# writes the formula out in plain Python, one offset at a time, and checks the library against it and
# against transformers' `T5Attention._relative_position_bucket` for every offset up to ±300, in both modes.

# %%
def t5_bucket_by_formula(offset: int, num_buckets: int, max_distance: int, bidirectional: bool) -> int:
    """The three steps above for one offset j - i (teaching form of pl.t5_relative_bucket)."""
    if bidirectional:
        B, n, upper = num_buckets // 2, abs(offset), (num_buckets // 2 if offset > 0 else 0)
    else:
        B, n, upper = num_buckets, max(-offset, 0), 0
    e = B // 2
    if n < e:
        return upper + n
    return upper + min(B - 1, e + math.floor(math.log(n / e) / math.log(max_distance / e) * (B - e)))


from transformers.models.t5.modeling_t5 import T5Attention  # T5's bucketing as transformers ports it

span300 = torch.arange(-300, 301, device=device)
for nb_, maxd_, bidir in ((16, 32, True), (16, 32, False), (32, 128, True), (32, 128, False)):
    lib = pl.t5_relative_bucket(span300, num_buckets=nb_, max_distance=maxd_, bidirectional=bidir).tolist()
    assert lib == [t5_bucket_by_formula(o, nb_, maxd_, bidir) for o in span300.tolist()], (nb_, maxd_, bidir)
    hf = T5Attention._relative_position_bucket(span300, bidirectional=bidir, num_buckets=nb_, max_distance=maxd_)
    assert lib == hf.tolist(), (nb_, maxd_, bidir)
print("library == formula == transformers' T5 for offsets -300..300: 16/32 and 32/128 buckets/max_distance,",
      "both modes")

# %%
nb, maxd = 16, 32  # 8 per direction: distances 0..3 exact, 4 log buckets
past = torch.arange(0, -60, -1, device=device)  # offsets j - i = 0, -1, ..., -59
b_past = pl.t5_relative_bucket(past, num_buckets=nb, max_distance=maxd)
print("offsets 0..-11  ->", b_past[:12].tolist())
print("offsets -16..-23 ->", b_past[16:24].tolist())
assert b_past[:4].tolist() == [0, 1, 2, 3]  # exact near
assert len(b_past.unique()) == 8  # the 8 buckets of the past, all used
widths = [(b_past == b).sum().item() for b in (4, 5, 6)]
assert widths[0] < widths[1] < widths[2]  # here each far bucket happens to be wider than the one before
print("16 buckets, max 32: distances per far bucket 4, 5, 6:", widths)
far = torch.arange(0, -1000, -1, device=device)  # T5's defaults, 32 buckets and max_distance 128
for bidir, first_far in ((True, 8), (False, 16)):
    b_def = pl.t5_relative_bucket(far, num_buckets=32, max_distance=128, bidirectional=bidir)
    w_def = [(b_def == b).sum().item() for b in range(first_far, 2 * first_far - 1)]  # all but the last
    assert w_def[-1] > 4 * w_def[0]  # roughly geometric growth overall ...
    print(f"32 buckets, max 128, {'encoder' if bidir else 'decoder'}: distances per far bucket "
          f"{first_far}..{2 * first_far - 2}:", w_def)
    if bidir:
        assert w_def[0] == w_def[1] == 4  # ... but buckets 8 and 9 are equally wide
    else:
        assert w_def[1] < w_def[0]  # ... and bucket 17 (2 distances) is narrower than bucket 16 (3)
assert pl.t5_relative_bucket(-past, num_buckets=nb, max_distance=maxd)[1:].min() >= 8  # the future: upper half
t5_causal = pl.t5_relative_bucket(torch.arange(-3, 4, device=device), bidirectional=False, num_buckets=nb,
                                  max_distance=maxd)
assert t5_causal.tolist() == [3, 2, 1, 0, 0, 0, 0]  # decoder: keys after the query all land in bucket 0

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Which distances share the last bucket?
#
# Not "every distance beyond `max_distance`". At $n = \text{max\_distance}$ the log ratio in the formula
# is exactly 1, so the term before the $\min$ is $e + (B - e) = B$: bucket $B$, *one past the last*. The
# last bucket $B - 1$ is therefore reached earlier, and the $\min$ then catches every larger $n$. Walking
# the distances up through the library's buckets: with 16 buckets and `max_distance` 32 ($B = 8$, $e = 4$)
# the last bucket holds **20**, 21, …, 31 *and* every distance from 32 to infinity, while 19 is still in
# bucket 6. With T5's own defaults (32 buckets, `max_distance` 128) it starts at distance 91 in an encoder
# ($B = 16$), well before 128, but at 113 in a decoder ($B = 32$): more buckets per direction leave less
# room before `max_distance`. (Exercise 3 asks where it starts, for any setting, without walking.)

# %%
B, e = nb // 2, nb // 4
lib_last = pl.t5_relative_bucket(-torch.arange(500, device=device), num_buckets=nb, max_distance=maxd)
in_last = (lib_last == B - 1).nonzero().flatten()
assert (in_last == torch.arange(20, 500, device=device)).all()  # from distance 20 on, not from max_distance = 32
assert lib_last[19] == B - 2
print(f"last bucket ({B - 1}) of the past: distances {in_last[0].item()} and up; max_distance = {maxd};",
      f"distance 19 -> bucket {lib_last[19].item()}")
first_in_last = {}  # T5's defaults, 32 buckets and max_distance 128, found by walking the distances up
for bidir in (True, False):
    last_b = (16 if bidir else 32) - 1
    b_def = pl.t5_relative_bucket(-torch.arange(1000, device=device), num_buckets=32, max_distance=128,
                                  bidirectional=bidir)
    first_in_last[bidir] = int((b_def == last_b).nonzero()[0])
assert first_in_last == {True: 91, False: 113}  # "well before" 128 in an encoder; much less so in a decoder
print(f"T5's defaults (32 buckets, max_distance 128): the last bucket of the past starts at distance "
      f"{first_in_last[True]} in an encoder, {first_in_last[False]} in a decoder")

# %% [markdown] slideshow={"slide_type": "subslide"}
# The source notes call $b_{i,j}$ a "trainable vector matrix". It is one **scalar** per (bucket, head):
# `T5RelativeBias` holds a `(num_buckets, num_heads)` table, here 16 × 4 = 64 numbers for every pair
# $(i, j)$ of any length.

# %%
g = torch.manual_seed(0)
t5 = pl.T5RelativeBias(num_heads=4, num_buckets=nb, max_distance=maxd).to(device)
bias = t5(48)  # (heads, q_len, k_len)
assert t5.embedding.weight.shape == (nb, 4) and sum(p_.numel() for p_ in t5.parameters()) == 64
assert_close(bias[2], t5.embedding.weight[t5.buckets(48), 2])  # a scalar looked up per bucket
assert bias.shape == (4, 48, 48) and depends_only_on_offset(bias[2].detach())

fig = Figure(figsize=(7.6, 3.1), layout="none")  # fixed margins: faster than the layout solver
axes = fig.subplots(1, 2)
fig.subplots_adjust(left=0.07, right=0.97, bottom=0.16, top=0.9, wspace=0.35)
viz.heatmap(t5.buckets(48), ax=axes[0], title="bucket of j − i (16 buckets, max 32)", xlabel="key j",
            ylabel="query i", colorbar="bucket")
span = torch.arange(-60, 61, device=device)
axes[1].step(span.cpu(), pl.t5_relative_bucket(span, num_buckets=nb, max_distance=maxd).cpu(), where="mid")
axes[1].set(xlabel="offset j − i", ylabel="bucket", title="bidirectional: exact near, log-spaced far")
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# Explore, and predict before each move. The figure opens at T5's own defaults, 32 buckets and
# `max_distance` 128, not at the 16 and 32 drawn above (those are one click away).
# 1. Before you untick *bidirectional*: what will the map's upper-right triangle (keys after the
#    query) become, and will the keys in the past (lower left) be cut into more buckets or fewer?
# 2. Double `max_distance` to 256. Which buckets move, the exact ones near the diagonal or the far
#    ones, and do the far ones get wider or narrower?
# 3. Raise the number of buckets with `max_distance` fixed. Where do the new buckets go?

# %% tags=["nbval-ignore-output"] slideshow={"slide_type": "subslide"}
def t5_buckets_or_none(offsets, **settings):
    """The library's buckets, or None for a setting it refuses (max_distance <= max_exact)."""
    try:
        return pl.t5_relative_bucket(offsets, **settings)
    except ValueError:
        return None


def draw_t5(fig, num_buckets, max_distance, bidirectional):
    ax_map, ax_line = fig.subplots(1, 2)
    span = torch.arange(-160, 161, device=device)
    grid = pl.relative_positions(64, device=device)
    im = viz.heatmap(torch.zeros(64, 64), ax=ax_map, xlabel="key j", ylabel="query i", colorbar="bucket")
    (line,) = ax_line.step(span.cpu(), torch.zeros(len(span)), where="mid")
    ax_line.set(xlabel="offset j − i", ylabel="bucket", ylim=(-1, 64))

    def update(num_buckets, max_distance, bidirectional):
        kw = dict(num_buckets=num_buckets, max_distance=max_distance, bidirectional=bidirectional)
        on_grid, on_span = t5_buckets_or_none(grid, **kw), t5_buckets_or_none(span, **kw)
        if on_grid is None:  # no buckets for this setting: say why instead of drawing
            viz.update_heatmap(im, torch.zeros(64, 64))
            line.set_ydata(torch.full((len(span),), float("nan")))
            e = (num_buckets // 2 if bidirectional else num_buckets) // 2
            ax_map.set_title(f"max distance must exceed max_exact = {e}")
            return
        viz.update_heatmap(im, on_grid)
        line.set_ydata(on_span.cpu())
        ax_map.set_title(f"{num_buckets} buckets, max distance {max_distance}")

    update(num_buckets, max_distance, bidirectional)
    return update


assert t5_buckets_or_none(span, num_buckets=16, max_distance=32) is not None  # the chapter's case draws
assert t5_buckets_or_none(span, num_buckets=64, max_distance=32, bidirectional=False) is None  # e = 32: refused
viz.InteractiveFigure(
    draw_t5, figsize=(8.0, 3.3),
    num_buckets=widgets.IntSlider(32, min=8, max=64, step=4, description="buckets"),  # T5's defaults
    max_distance=widgets.IntSlider(128, min=4, max=256, description="max dist"),
    bidirectional=widgets.Checkbox(value=True, description="bidirectional"),
)

# %% [markdown] slideshow={"slide_type": "fragment"}
# <details><summary>The answers: open them after your three predictions (the cell below checks them at
# T5's defaults, distances 0 to 999 of the past: read it after predicting, too)</summary>
#
# 1. Unticked, every key after the query lands in bucket 0 (the upper-right triangle turns one colour),
#    and the past is cut into **more** buckets: all 32 instead of 16.
# 2. Doubling `max_distance` leaves the exact buckets near the diagonal alone (the first 8 distances keep
#    their own bucket) and moves the far ones out: no distance gets a higher bucket, some get a lower one,
#    and the far buckets are **wider** on average.
# 3. More buckets go to both ends: $e = B/2$ grows, so more distances near the diagonal get a bucket of
#    their own (12 instead of 8 at 48 buckets), and, from 12 buckets up at max 128, the far range is cut
#    into more, **narrower** buckets. Not at the slider's low end: 8 buckets hold 14.0 distances per far
#    bucket, 12 hold 17.0 (the next cell checks every slider step).
#
# </details>

# %%
dist = torch.arange(1000)  # distances in the past (offsets -dist), on the CPU: a few small integer checks


def past_buckets(nb_, md_, bidirectional=True):
    return pl.t5_relative_bucket(-dist, num_buckets=nb_, max_distance=md_, bidirectional=bidirectional)


def own_bucket_count(nb_, md_):
    """How many distances from 0 up each have a bucket of their own (a bucket holding one distance)."""
    width = torch.bincount(past_buckets(nb_, md_))
    return int((width != 1).nonzero()[0])


def mean_far_width(nb_, md_):
    """Distances per far bucket on average, the last (unbounded) one left out."""
    B_ = nb_ // 2
    b_ = past_buckets(nb_, md_)
    start_last = int((b_ == B_ - 1).nonzero()[0])
    return (start_last - own_bucket_count(nb_, md_)) / (B_ - 1 - own_bucket_count(nb_, md_))


ahead = pl.t5_relative_bucket(torch.arange(1, 161), num_buckets=32, max_distance=128, bidirectional=False)
assert (ahead == 0).all()  # 1: causal, every key after the query in bucket 0
assert len(past_buckets(32, 128, False).unique()) == 32 > len(past_buckets(32, 128).unique()) == 16  # 1: more
b128, b256 = past_buckets(32, 128), past_buckets(32, 256)
assert own_bucket_count(32, 128) == own_bucket_count(32, 256) == 8 and torch.equal(b128[:8], b256[:8])  # 2
assert (b256 <= b128).all() and (b256 < b128).any() and mean_far_width(32, 256) > mean_far_width(32, 128)  # 2
assert own_bucket_count(48, 128) == 12 and mean_far_width(48, 128) < mean_far_width(32, 128)  # 3
widths_by_count = [mean_far_width(nb_, 128) for nb_ in range(8, 68, 4)]  # every step of the buckets slider
assert widths_by_count[0] < widths_by_count[1]  # 3: not at 8 -> 12 ...
assert all(a > b for a, b in zip(widths_by_count[1:], widths_by_count[2:]))  # ... but from 12 buckets up
assert [round(w, 1) for w in widths_by_count[:2]] == [14.0, 17.0]

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 5. DeBERTa: content and position, disentangled
#
# *Core: the score, its $\sqrt{3d}$ and which row of $q^r$ p2c reads (up to the first aside; Exercise 4
# builds on it). The three asides after that are optional, and left out of the slides.*
#
# DeBERTa (He et al., ICLR 2021) keeps content and position in separate vectors all the way into the
# score. The positions are a table $P_\text{rel}$ of $2k$ relative embeddings (not chapter 3's
# absolute table $P$), projected in the paper (and in the v1 models) with **their own** matrices:
# $q^r = P_\text{rel} W_{q,r}$, $k^r = P_\text{rel} W_{k,r}$. (DeBERTa-v2/v3 reuse the content
# projections instead; see the second aside below.) The signed distance of query $i$ and key
# $j$ (query minus key) is bucketed into the $2k$ rows:
#
# $$\delta(i, j) = \operatorname{clip}(i - j + k,\ 0,\ 2k - 1).$$

# %% [markdown] slideshow={"slide_type": "fragment"}
# Write $q^c_i$, $k^c_j$ for the content query and key (the token's hidden state times DeBERTa's $W_q$,
# $W_k$). The score keeps three of the four terms of §1, with relative positions in place of absolute ones
# (DeBERTa drops position–position, arguing that with relative positions it adds little):
#
# $$A_{ij} = \underbrace{q^c_i \cdot k^c_j}_{\text{c2c}}
#          + \underbrace{q^c_i \cdot k^r_{\delta(i,j)}}_{\text{c2p}}
#          + \underbrace{k^c_j \cdot q^r_{\delta(j,i)}}_{\text{p2c}}, \qquad
#   \operatorname{softmax}_j\!\left(\frac{A_{ij}}{\sqrt{3d}}\right).$$
#
# Note $\delta(j, i)$ in p2c: the key's content looks at where the *query* is, seen from the key.
# `pl.deberta_terms` computes each term with one matmul against all $2k$ rows and a gather.

# %%
g = torch.manual_seed(0)
L, span_k = 7, 3
h = torch.randn(L, d_model).to(device)
P = torch.randn(2 * span_k, d_model).to(device)  # P_rel, the relative table, 2k rows
W_qc, W_kc, W_qr, W_kr = (torch.randn(d_head, d_model).to(device) for _ in range(4))
q_c, k_c = h @ W_qc.T, h @ W_kc.T  # content
q_r, k_r = P @ W_qr.T, P @ W_kr.T  # position, with its own projections

delta = pl.deberta_relative_index(L, L, span_k, device=device)
c2c, c2p, p2c = pl.deberta_terms(q_c, k_c, q_r, k_r)

def dlt(i, j):  # the paper's delta, with Python ints
    return min(max(i - j + span_k, 0), 2 * span_k - 1)


assert delta.tolist() == [[dlt(i, j) for j in range(L)] for i in range(L)]
assert_close(c2p, torch.stack([torch.stack([q_c[i] @ k_r[dlt(i, j)] for j in range(L)]) for i in range(L)]))
assert_close(p2c, torch.stack([torch.stack([k_c[j] @ q_r[dlt(j, i)] for j in range(L)]) for i in range(L)]))
assert_close(pl.deberta_scores(q_c, k_c, q_r, k_r), (c2c + c2p + p2c) / math.sqrt(3 * d_head))
print("delta(i, j) for k = 3 (rows: query i, columns: key j):")
print(delta.cpu().numpy())

# %%
fig = heatmap_row([c2c, c2p, p2c], ["c2c", "c2p: k^r at δ(i, j)", "p2c: q^r at δ(j, i)"], width=2.6)
fig

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Why $\sqrt{3d}$
#
# The argument **assumes** iid vectors: $q^c, k^c, q^r, k^r$ drawn independently, each entry
# independent with mean zero and variance one. Under that assumption
# each dot product of length $d$ has variance $d$. The three terms are **not independent**: c2c and
# c2p share the query $q^c_i$, c2c and p2c share the key $k^c_j$. They are *uncorrelated*, though:
# $\mathbb E[(q \cdot k)(q \cdot r)] = \sum_{a,b} \mathbb E[q_a q_b]\, \mathbb E[k_a]\,\mathbb E[r_b] = 0$
# when $k$ and $r$ are independent with mean zero. Uncorrelated terms are all a variance needs. So the
# sum has variance $3d$, and dividing by $\sqrt{3d}$ keeps the scores at unit scale, as $1/\sqrt d$
# does for one term.
#
# The cell simulates DeBERTa's case with the vectors shared as in the score, 200 000 draws at $d = 16$.
# It finds the variance of the sum at $3d$ and the three terms uncorrelated. Then it drops the
# assumption once: the key's content copies the query's ($k^c = q^c$, a token scoring itself). Now c2c
# is $|q^c|^2$, with variance $2d$, and the sum's variance is $4d$, not $3d$. So $\sqrt{3d}$ is the
# right scale for iid vectors; trained vectors need not be iid.

# %%
draws = torch.Generator().manual_seed(0)  # drawn on the CPU, then moved


def shared_terms(d_, n_):
    """c2c, c2p, p2c for n_ draws of four d_-dimensional vectors, shared as in DeBERTa's score."""
    qc_, kc_, qr_, kr_ = torch.randn(4, n_, d_, generator=draws).to(device)
    return torch.stack(((qc_ * kc_).sum(-1), (qc_ * kr_).sum(-1), (kc_ * qr_).sum(-1)))


n_samples, d_small = 200_000, 16
shared = shared_terms(d_small, n_samples)
ratio = shared.sum(0).var().item() / (3 * d_small)
corr = torch.corrcoef(shared)
assert abs(ratio - 1) < 0.02 and (corr - torch.eye(3, device=device)).abs().max() < 0.01  # variance 3d, uncorrelated
print(f"d = 16: variance of c2c + c2p + p2c over 3d: {ratio:.3f}; largest correlation between two terms: "
      f"{(corr - torch.eye(3, device=device)).abs().max().item():.3f}")
qc_, qr_, kr_ = torch.randn(3, n_samples, d_small, generator=draws).to(device)  # not iid: k^c = q^c
copied = torch.stack(((qc_ * qc_).sum(-1), (qc_ * kr_).sum(-1), (qc_ * qr_).sum(-1)))
ratio_copied = copied.sum(0).var().item() / (3 * d_small)
assert abs(copied[0].var().item() / (2 * d_small) - 1) < 0.03 and abs(ratio_copied - 4 / 3) < 0.03  # 2d; 4d in all
print(f"k^c = q^c: variance of the sum over 3d: {ratio_copied:.3f} (4d / 3d = 1.333)")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### Paper and released code: which row of $q^r$ does p2c read?
#
# The released code (transformers' DeBERTa ports, microsoft/DeBERTa) reads p2c at row $\delta(i, j)$ of
# $q^r$, c2p's own index, not the paper's $\delta(j, i)$, so the same table gives other p2c scores under
# each (`p2c_index="reference"` follows the code; the cell checks both halves), and a checkpoint needs the
# index its code used. The cell asserts that the code's
# p2c equals the score read at row $\delta(i, j)$, pair by pair, and that it differs from the paper's.

# %%
_, _, p2c_ref = pl.deberta_terms(q_c, k_c, q_r, k_r, p2c_index="reference")
by_code_row = torch.stack([torch.stack([k_c[j] @ q_r[delta[i, j]] for j in range(L)]) for i in range(L)])
assert torch.allclose(p2c_ref, by_code_row, atol=1e-5) and not torch.allclose(p2c_ref, p2c, atol=1e-3)

# %% [markdown] slideshow={"slide_type": "skip"}
# #### Aside, for readers of the released code (skip it on a first read)
#
# The released code computes p2c in two recipes:
#
# * transformers' port (`disentangled_att_bias` in `models/deberta/modeling_deberta.py`,
#   `disentangled_attention_bias` in `models/deberta_v2/modeling_deberta_v2.py`) scores every key against
#   all $2k$ rows of $q^r$, $S = k^c (q^r)^\top$ (row $a$: key $a$), gathers $G[a, b] = S[a, \text{pos}[a, b]]$
#   with $\text{pos}[a, b] = \operatorname{clip}(-(a - b) + k)$, and transposes, so entry $(i, j)$ is
#   $S[j, \text{pos}[j, i]]$;
# * microsoft/DeBERTa's current code (`disentangled_attention_bias` in
#   `DeBERTa/deberta/disentangled_attention.py`, the v2/v3 version) scores all $2k$ rows against every
#   key, $T = q^r (k^c)^\top$, a $(2k, k_\text{len})$ matrix, and gathers it along rows with c2p's own index,
#   so entry $(i, j)$ is $T[\delta(i, j), j]$.
#
# The table follows both recipes for four queries and keys with $k = 2$, so
# $\delta(i, j) = \operatorname{clip}(i - j + 2, 0, 3)$: which row of $q^r$ each reads against key $j$,
# printed for the pairs $i \le j$. Both read row $\delta(i, j)$; the cell asserts it for every pair, and
# that the paper reads another row for every pair off the diagonal. The last cell of this aside replays both recipes on the seven tokens above
# (`tests/test_deberta.py` checks `p2c_index="reference"` against transformers' v1
# `DisentangledSelfAttention`, `tests/test_crosscheck.py` against the deberta_v2 one).

# %% slideshow={"slide_type": "skip"}
L4, k2 = 4, 2
i4, j4 = torch.meshgrid(torch.arange(L4), torch.arange(L4), indexing="ij")
delta4 = pl.deberta_relative_index(L4, L4, k2)  # delta(i, j) = clip(i - j + k, 0, 2k - 1), as in c2p
paper_row = delta4.T  # delta(j, i)
pos4 = torch.clamp(-(i4 - j4) + k2, 0, 2 * k2 - 1)  # transformers' p2c_pos[a, b], rows a of S are keys
hf_key, hf_row = j4, pos4.T  # entry (i, j) = S[j, pos[j, i]]: key j against row pos[j, i] of q^r
ms_row, ms_key = delta4, j4  # entry (i, j) = T[delta(i, j), j]: row delta(i, j) of q^r against key j
assert torch.equal(hf_row, delta4) and torch.equal(ms_row, delta4) and torch.equal(hf_key, ms_key)
assert (paper_row != delta4).sum() == L4 * L4 - L4  # the paper reads another row everywhere off the diagonal
print(" i  j  i-j | transformers S[j, pos[j,i]] | microsoft T[δ(i,j), j] | row of q^r read")
for i_ in range(L4):
    for j_ in range(i_, L4):  # the pairs i <= j
        print(f" {i_}  {j_}  {i_ - j_:+d}  |         S[{j_}, {pos4[j_, i_].item()}]             |"
              f"        T[{delta4[i_, j_].item()}, {j_}]        |       {delta4[i_, j_].item()}")

# %% [markdown] slideshow={"slide_type": "skip"}
# #### Aside, continued: both recipes at full size, and the source notes' form
#
# The source notes (`004`) write DeBERTa's relative terms as
# $x_m^\top W_q^\top W_k \tilde p_{m-n} + \tilde p_{m-n}^\top W_q^\top W_k x_n$: the *content*
# projections, and the query-minus-key offset in both terms. That is not the v1 paper, whose positions
# have their own $W_{q,r}, W_{k,r}$ (`pos_q_proj`, `pos_proj` in transformers' v1), but it is what
# DeBERTa-v2/v3 do: with `share_att_key` set, deberta_v2's attention projects the relative table with
# the content `query_proj` and `key_proj` (biases included), and the released v3 configs set it
# (`share_att_key: true`, `position_buckets: 256` in microsoft/DeBERTa's
# `experiments/language_model/deberta_base.json` and `rtd_base.json`; `tests/test_upstream_claims.py`
# reads these and the other v3 settings used below from a copy of those fields). The offset $m - n$ in both
# terms is the released code's $\delta(i, j)$. What the source leaves out is the scale: its softmax
# divides by $\sqrt d$, DeBERTa's code (v1 and v2/v3) by $\sqrt{3d}$ when c2p and p2c are both on
# (`scale_factor` = 3); and v2/v3's log buckets of the offset (§7). The cell checks that the source's
# form is the library's terms with $W_{q,r} = W_q$, $W_{k,r} = W_k$; `tests/test_crosscheck.py` checks
# transformers' deberta_v2 attention with `share_att_key` against
# `softmax(pl.deberta_scores(..., p2c_index="reference"))`, which divides by $\sqrt{3d}$.

# %% slideshow={"slide_type": "skip"}
rel = -pl.relative_positions(L, L, device=device)  # query minus key, i - j, as the code builds it
p2c_pos = torch.clamp(-rel + span_k, 0, 2 * span_k - 1)  # clip(-(i - j) + k), laid over rows of keys
code_p2c = torch.gather(k_c @ q_r.T, -1, p2c_pos).T  # transformers: gather along the key rows, transpose
ms_p2c = torch.gather(q_r @ k_c.T, -2, delta)  # microsoft/DeBERTa: rows of q^r against keys, c2p's index
assert_close(code_p2c, p2c_ref)
assert_close(ms_p2c, p2c_ref)  # both recipes: the library's reference p2c

# the source's form: content projections W_qc, W_kc reused for positions, offset m - n in both terms
src_c2p = torch.stack([torch.stack([q_c[m] @ (W_kc @ P[delta[m, n]]) for n in range(L)]) for m in range(L)])
src_p2c = torch.stack([torch.stack([(W_qc @ P[delta[m, n]]) @ k_c[n] for n in range(L)]) for m in range(L)])
_, c2p_tied, p2c_tied = pl.deberta_terms(q_c, k_c, P @ W_qc.T, P @ W_kc.T, p2c_index="reference")
assert_close(src_c2p + src_p2c, c2p_tied + p2c_tied)  # a special case: W_{q,r} = W_q, W_{k,r} = W_k
assert not torch.allclose(src_c2p, c2p, atol=1e-3)  # v1's own W_{k,r} gives other scores

# %% [markdown] slideshow={"slide_type": "skip"}
# #### Aside, continued: relative in attention, absolute at the top
#
# Everything above is DeBERTa's *attention*, and it sees positions only through $\delta$. The model as
# a whole is not purely relative. For pretraining (masked-token prediction) the paper adds an
# **Enhanced Mask Decoder** (He et al., §3.2): absolute position embeddings enter after the Transformer
# layers, just before the softmax that predicts the masked tokens. Its argument: relative positions
# alone cannot tell apart two masked words with the same local context (its example is "a new *store*
# opened beside the new *mall*", where the subject and the object differ only by where they stand in
# the sentence). In microsoft/DeBERTa's code (`EnhancedMaskDecoder` in
# `DeBERTa/apps/models/masked_language_model.py`) the choice hangs on one config flag,
# `position_biased_input`. With it off, as the released v1 and v3 configs have it, that code adds the
# absolute position embeddings to the hidden states that enter the last layer, and that sum serves
# as the queries of the last layer, run twice more before the prediction head (as read in
# `EnhancedMaskDecoder.forward`: a citation, which the cell below does not run). With it on, they are
# added to the input instead, as BERT does.
#
# The cell checks the second route through transformers' port, which defaults to the flag on: an
# absolute table of `max_position_embeddings` rows, and the same token embedded differently at two
# positions; with the flag off, no table, and the two rows equal. (transformers' `DebertaV2Model` has no
# Enhanced Mask Decoder: with the released configs, what it computes is relative throughout.)

# %% slideshow={"slide_type": "skip"}
from transformers import DebertaV2Config, DebertaV2Model

with torch.random.fork_rng():  # building models draws random numbers: leave the notebook's stream alone
    tiny = dict(vocab_size=16, hidden_size=8, num_attention_heads=2, intermediate_size=8, num_hidden_layers=1,
                max_position_embeddings=12, relative_attention=True, pos_att_type="p2c|c2p")
    absolute_in = DebertaV2Model(DebertaV2Config(**tiny)).eval()  # transformers' default: position_biased_input=True
    relative_only = DebertaV2Model(DebertaV2Config(**tiny, position_biased_input=False)).eval()  # as the released configs
same_token = torch.tensor([[5, 5]])  # one token at positions 0 and 1
with torch.no_grad():
    rows_in, rows_rel = absolute_in.embeddings(input_ids=same_token)[0], relative_only.embeddings(input_ids=same_token)[0]
assert absolute_in.config.position_biased_input and absolute_in.embeddings.position_embeddings.weight.shape == (12, 8)
assert not torch.allclose(rows_in[0], rows_in[1])  # absolute positions at the input: the two rows differ
assert relative_only.embeddings.position_embeddings is None and torch.allclose(rows_rel[0], rows_rel[1])
print("position_biased_input on: an absolute table of", tuple(absolute_in.embeddings.position_embeddings.weight.shape),
      "and one token embedded differently at positions 0 and 1; off: no table, the two rows equal")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 6. One view for all: the bias as a function of $(i, j)$
#
# Each method adds (or induces) a term that depends on positions only through $j - i$. Two of them
# are met properly later, **RoPE in chapter 5 and ALiBi in chapter 6**; this picture needs only one
# fact about each:
#
# * ALiBi adds to head $h$'s scores a fixed penalty proportional to the distance, $-m_h\,(i - j)$ for a
#   key in the past, where $m_h > 0$ is the head's slope (a constant, not learned; `pl.alibi_bias`);
# * RoPE adds nothing to the scores. It rotates the query at position $m$ by $R_m$ and the key at
#   position $n$ by $R_n$, the block rotations of chapter 3 (§4 there: at position $m$, each pair turns
#   by $m$ times its own frequency; RoPE's letters, since here positions meet pairs); since
#   $R_m^\top R_n = R_{n-m}$, the score $\langle R_m q, R_n k\rangle = q^\top R_{n-m} k$ depends on the
#   positions only through the offset $n - m$, the $j - i$ of the other panels (`pl.apply_rope`).
#
# Side by side, for 16 positions. The learned parts (Shaw's vectors, T5's scalars, XL's $W_{k,R}$ and
# $v$) are drawn at random here, as at initialisation, not trained: the panels show the shape each
# formula allows, not what a trained model learns.
#
# * **Shaw**: $q \cdot a^K_{ij}$ for one fixed query vector $q$, a learned vector per clipped offset ($k = 3$);
# * **Transformer-XL** term (d): $v \cdot W_{k,R} R^\text{XL}_{i-j}$ (causal; $R^\text{XL}$ is §3's
#   sinusoid of the distance $i - j$, a vector, marked XL here so that it is not read as RoPE's rotation
#   $R_m$ above);
# * **T5**: one head's learned scalar per bucket;
# * **ALiBi**: one head's $-m_h (i - j)$ (causal);
# * **RoPE**: no bias at all, but for fixed $q, k$ the score $\langle R_m q, R_n k\rangle$ is
#   itself a function of $n - m$, a kernel over offsets.
#
# Every panel is constant along its diagonals; the next cell asserts it.

# %%
g = torch.manual_seed(0)
L = 16
shaw16 = pl.ShawRelativePositions(d=4, max_distance=3).to(device)
q_fixed = torch.randn(4).to(device)
shaw_bias = shaw16(L)[0].detach() @ q_fixed  # (L, L): q . a^K_ij
xl_bias = pl.xl_score_terms(torch.zeros(L, d_head, device=device), torch.zeros(L, d_head, device=device),
                            pl.xl_relative_sinusoids(L, d_model, device=device) @ W_kR.T, u, v)["d"]
t5_bias = t5(L)[0].detach()
alibi = pl.alibi_bias(4, L, device=device)[1]
q_rope, k_rope = torch.randn(16).to(device), torch.randn(16).to(device)
rope_kernel = pl.apply_rope(q_rope.expand(L, 16)) @ pl.apply_rope(k_rope.expand(L, 16)).T  # <R_m q, R_n k>

panels = [("Shaw: q·a^K (k = 3)", shaw_bias), ("XL (d): v·W R^XL(i−j)", xl_bias), ("T5, head 1", t5_bias),
          ("ALiBi, head 2", alibi), ("RoPE kernel ⟨R_m q, R_n k⟩", rope_kernel)]
for name, m in panels:
    assert depends_only_on_offset(m, atol=1e-4), name
assert not depends_only_on_offset(terms["position–position"], atol=1e-2)  # the absolute term of §1 is not

assert (shaw_bias[0, 3:] == shaw_bias[0, 3]).all()  # flat beyond k = 3
assert (t5_bias[-1, :4] == t5_bias[-1, 0]).all()  # last query: distances 12..15 share one bucket
steps = alibi[-1, 1:] - alibi[-1, :-1]
assert torch.allclose(steps, steps[0].expand_as(steps))  # a straight line
assert (alibi[torch.isfinite(alibi)] <= 0).all() and not list(pl.ALiBi(4).parameters())  # a penalty, not learned
R5, R9 = pl.rope_matrix(5, 16), pl.rope_matrix(9, 16)
assert_close(R5.T @ R9, pl.rope_matrix(4, 16))  # R_m^T R_n = R_(n-m)

fig = heatmap_row([m / m[torch.isfinite(m)].abs().max() for _, m in panels], [name for name, _ in panels],
                  label="bias / max |bias|", width=2.5)
fig

# %% [markdown] slideshow={"slide_type": "fragment"}
# They differ in what they can express. Shaw's table is learned and flat beyond its window; T5's is
# learned and flat inside each log bucket; XL's (d) and the RoPE kernel are sums of sinusoids of the
# offset; ALiBi is a fixed straight line.

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### What this buys: a moved sentence keeps its scores
#
# Put a 5-token sentence at the start of the input, then behind 7 other tokens (positions 7 to 11).
# With an absolute encoding (chapter 3's sinusoids added to the tokens) the scores among the sentence's
# own tokens change, because every token now carries another $p_m$. With any of the relative methods
# they stay exactly the same: the sentence's pairs have the same offsets wherever it sits. (Its
# *outputs* can still change: its queries now also see the 7 tokens before it. And these are attention
# scores: a model built on them may add absolute positions elsewhere, as DeBERTa's Enhanced Mask
# Decoder does near the output, §5.) The cell compares, for each method with this chapter's matrices,
# the sentence's $5 \times 5$ block of scores in both places. A score with no positions at all (the
# first row) is unchanged too, trivially; the relative ones are not position-blind, though: swapping the
# sentence's first two tokens only permutes the first row's scores, and changes every other method's.

# %%
g = torch.manual_seed(1)
sentence = torch.randn(5, d_model).to(device)  # drawn on the CPU, then moved
moved = torch.cat((torch.randn(7, d_model).to(device), sentence))  # the sentence at positions 7..11


def xl_pair_scores(x):  # XL's four terms (causal: the future is -inf in both places)
    r_ = pl.xl_relative_sinusoids(len(x), d_model, device=device) @ W_kR.T
    return pl.xl_scores_direct(x @ W_q.T, x @ W_kE.T, r_, u, v)


scorers = {
    "no positions": lambda x: (x @ W_q.T) @ (x @ W_kE.T).T,  # the control: position-blind, so trivially unchanged
    "absolute sinusoids": lambda x: ((x + pl.sinusoidal_positions(len(x), d_model, device=device)) @ W_q.T)
    @ ((x + pl.sinusoidal_positions(len(x), d_model, device=device)) @ W_kE.T).T,
    "Shaw": lambda x: (x @ W_q.T) @ (x @ W_kE.T).T
    + torch.einsum("id,ijd->ij", x @ W_q.T, shaw16(len(x))[0].detach()),
    "Transformer-XL": xl_pair_scores,
    "T5": lambda x: (x @ W_q.T) @ (x @ W_kE.T).T + t5(len(x))[0].detach(),
    "DeBERTa": lambda x: pl.deberta_scores(x @ W_qc.T, x @ W_kc.T, P @ W_qr.T, P @ W_kr.T),
    "RoPE": lambda x: pl.apply_rope(x @ W_q.T) @ pl.apply_rope(x @ W_kE.T).T,
}
for name, score in scorers.items():
    alone, inside = score(sentence), score(moved)[7:, 7:]
    gap = (alone - inside)[torch.isfinite(alone)].abs().max().item()
    assert torch.equal(torch.isinf(alone), torch.isinf(inside))
    assert (gap > 1.0) if name == "absolute sinusoids" else (gap < 1e-4), name
    swap = [1, 0, 2, 3, 4]  # a position-blind score only permutes; compare where both are finite
    a_, b_ = score(sentence[swap]), alone[swap][:, swap]
    both = torch.isfinite(a_) & torch.isfinite(b_)
    assert torch.allclose(a_[both], b_[both], atol=1e-4) == (name == "no positions"), name
    print(f"{name:19s} largest change of a score when the sentence moves by 7: {gap:.2f}")

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 7. The methods side by side
#
# The table describes one attention layer with $H$ heads and $d_\text{model} = H\,d_\text{head}$, on a
# sequence of $L$ tokens (as many queries as keys). As in §2 and §5, $k$ is the clipping window of Shaw
# and DeBERTa. The columns:
#
# * **learned parameters**: what the method adds to the model;
# * **materialised**: what it builds besides the $(H, L, L)$ attention scores every method has;
# * **adds to the score**: a *content × position* term (it depends on a query's or key's content and on
#   the offset) or a *position-only* one (the same for every content), and whether the heads differ;
# * **far distances**: what happens beyond the distances the method clips or was trained on.
#
# | method | learned parameters | materialised | adds to the score | far distances | used by |
# |---|---|---|---|---|---|
# | **Shaw** (§2) | $2(2k+1)\,d_\text{head}$ per layer ($a^K$, $a^V$), shared by the heads | $a^K_{ij}, a^V_{ij}$: $(L, L, d_\text{head})$ each as written; $(L, 2k+1)$ if $q$ is scored against the $2k+1$ rows first, then gathered | content × position, $q_i \cdot a^K_{ij}$, one table for all heads; $a^V$ also moves the output | all alike beyond $k$ | Shaw et al. 2018 (translation); Music Transformer (Huang et al. 2018) builds on it |
# | **Transformer-XL** (§3) | $d_\text{model}^2$ ($W_{k,R}$) $+\ 2\,d_\text{model}$ ($u, v$) per layer, as in XLNet and XL's code with `untie_r` (the paper: one $u$, $v$ for the model); $R$ is fixed | $r$: $(L, d_\text{model})$; scores by distance, $(H, L, L)$, then the shift | content × position (b), position-only (d), and a global content bias (c); per head | the formula: a sinusoid for every distance; the released evaluation runs clamp it (`clamp_len`) | Transformer-XL (Dai et al. 2019), XLNet (Yang et al. 2019) |
# | **T5** (§4) | $\text{num\_buckets}\cdot H$ per stack, encoder or decoder (its first layer computes the bias, the others reuse it) | bucket ids $(L, L)$, bias $(H, L, L)$ | position-only: a scalar per bucket and head | one shared last bucket, before `max_distance`: from distance 91 of 128 in an encoder, 113 in a decoder (§4) | T5 (Raffel et al. 2020) and its descendants (mT5, Flan-T5) |
# | **DeBERTa** (§5) | v1: a $2k$-row table $+\ 2\,d_\text{model}^2 + d_\text{model}$ per layer; v3: the table only (counted below) | $q^r, k^r$ for the table rows in use; scores $(H, L, \text{rows})$, then gathered (v1's code uses $2\min(L, k)$ rows, v2/v3's all of theirs) | content × position both ways (c2p, p2c); per head | v1: alike beyond $k$; v2/v3: log buckets, then the edge rows (below) | DeBERTa (He et al. 2021), v2/v3; absolute positions near the output (§5) |
# | RoPE (chapter 5) | 0 | $\cos, \sin$: $(L, d_\text{head}/2)$ | content × position: it *is* the rotated $q \cdot k$; the same rotation in every head | every distance, but angles never seen in training (chapter 7) | GPT-NeoX, Llama and most current LLMs (chapter 8) |
# | ALiBi (chapter 6) | 0 (fixed slopes $m_h$) | bias $(H, L, L)$, or only $H$ slopes in a fused kernel | position-only, $-m_h (i - j)$; a slope per head | a straight line, any distance | BLOOM, MPT |
#
# Transformer-XL's formula clips no distance. The released evaluation runs clamp it, though (aside).
#
# <details><summary>Aside, for readers of the released code (optional; citations, not run here)</summary>
#
# The authors' evaluation settings set `clamp_len` (kimiyoung/transformer-xl: the `eval` branch of
# `pytorch/run_wt103_base.sh`, `--clamp_len 400`; `tf/sota/wt103.sh`, `TEST_CLAMP_LEN=1000`). The
# training branch of the PyTorch script passes none.
#
# </details>
#
# Sources for the counts: Shaw et al. §3.3 share the tables across heads; the others are read off
# Hugging Face `transformers`' own modules. The cell below counts a layer of BERT-base's size ($H = 12$,
# $d_\text{model} = 768$). Its settings:
#
# * Shaw: a window of $k = 16$, our choice for the example (the count is $2(2k+1)\,d_\text{head}$ at any $k$);
# * T5: its 32 buckets;
# * DeBERTa v1: $k = 512$ as released (the table spans `max_position_embeddings`: $2k = 1024$ rows);
# * DeBERTa-v3: its 256 position buckets.
#
# Shaw, T5, RoPE and ALiBi are counted on the library's modules; XL, T5's stack and DeBERTa on
# transformers' modules, built offline (`tests/test_crosscheck.py` checks the same counts).

# %%
H_, dm, dh, k_win, k_v1, L_ = 12, 768, 64, 16, 512, 10  # k_win: Shaw's window here; k_v1: DeBERTa v1's k


def n_params(*modules_or_tensors) -> int:
    return sum(sum(p_.numel() for p_ in m.parameters()) if isinstance(m, torch.nn.Module) else m.numel()
               for m in modules_or_tensors)


shaw_layer = pl.ShawRelativePositions(d=dh, max_distance=k_win)
t5_stack = pl.T5RelativeBias(num_heads=H_, num_buckets=32, max_distance=128)
counts = {  # the library's modules against the table's formulas
    "Shaw (per layer)": (n_params(shaw_layer), 2 * (2 * k_win + 1) * dh),
    "T5 (whole stack)": (n_params(t5_stack), 32 * H_),
    "RoPE": (n_params(pl.RotaryEmbedding(dh)), 0),
    "ALiBi": (n_params(pl.ALiBi(H_)), 0),
}
for name, (counted, formula) in counts.items():
    assert counted == formula, name
formulas = {  # the table's formulas for what the library has no module of; transformers' modules below
    "XLNet, XL untie_r (per layer)": dm * dm + 2 * dm,  # W_kR, u, v
    "DeBERTa v1 (table, once)": 2 * k_v1 * dm,  # released v1: k = max_position_embeddings = 512
    "DeBERTa v1 (per layer)": 2 * dm * dm + dm,  # pos_proj, pos_q_proj (+ its bias)
    "DeBERTa-v3 (table, once)": 2 * 256 * dm + 2 * dm,  # 2 x 256 position buckets, and its LayerNorm
    "DeBERTa-v3 (per layer)": 0,  # share_att_key: the content projections
}
# transformers' own modules, at the same sizes
from transformers import DebertaConfig, DebertaV2Config, T5Config, XLNetConfig
from transformers.models.deberta import modeling_deberta as hf_v1
from transformers.models.deberta_v2 import modeling_deberta_v2 as hf_v2
from transformers.models.t5.modeling_t5 import T5Stack
from transformers.models.xlnet.modeling_xlnet import XLNetRelativeAttention

with torch.random.fork_rng():  # building modules draws random numbers: leave the notebook's stream alone
    xl_att = XLNetRelativeAttention(XLNetConfig(d_model=dm, n_head=H_))
    small = dict(hidden_size=dm, num_attention_heads=H_, intermediate_size=4, num_hidden_layers=1,
                 relative_attention=True)
    cfg_v1 = DebertaConfig(**small, pos_att_type="c2p|p2c", max_relative_positions=-1, max_position_embeddings=512)
    att_v1, enc_v1 = hf_v1.DisentangledSelfAttention(cfg_v1), hf_v1.DebertaEncoder(cfg_v1)
    cfg_v3 = DebertaV2Config(**small, pos_att_type="p2c|c2p", share_att_key=True, position_buckets=256,
                             max_relative_positions=-1, max_position_embeddings=512, norm_rel_ebd="layer_norm")
    att_v3, enc_v3 = hf_v2.DisentangledSelfAttention(cfg_v3), hf_v2.DebertaV2Encoder(cfg_v3)
    t5_hf = T5Stack(T5Config(d_model=16, d_kv=4, num_heads=H_, num_layers=3, d_ff=8, vocab_size=8,
                             relative_attention_num_buckets=32))
counted_hf = {
    "XLNet, XL untie_r (per layer)": n_params(xl_att.r, xl_att.r_w_bias, xl_att.r_r_bias),
    "DeBERTa v1 (table, once)": n_params(enc_v1.rel_embeddings),
    "DeBERTa v1 (per layer)": n_params(att_v1.pos_proj, att_v1.pos_q_proj),
    "DeBERTa-v3 (table, once)": n_params(enc_v3.rel_embeddings, enc_v3.LayerNorm),
    "DeBERTa-v3 (per layer)": n_params(att_v3) - n_params(att_v3.query_proj, att_v3.key_proj, att_v3.value_proj),
}
assert counted_hf == formulas, counted_hf
t5_tables = [n for n, p_ in t5_hf.named_parameters() if "relative_attention_bias" in n]
assert t5_tables == ["block.0.layer.0.SelfAttention.relative_attention_bias.weight"]  # block 0 only
assert n_params(t5_hf.block[0].layer[0].SelfAttention.relative_attention_bias) == counts["T5 (whole stack)"][0]
for name, n in {**{k_: c for k_, (c, _) in counts.items()}, **formulas}.items():
    print(f"{name:28s} {n:>9,d} parameters")

# what each one materialises, for L_ = 10 tokens
a_K, a_V = shaw_layer(L_)
assert a_K.shape == a_V.shape == (L_, L_, dh) and t5_stack(L_).shape == (H_, L_, L_)
q_h = torch.randn(L_, dh)
by_row = q_h @ shaw_layer.keys.weight.detach().T  # (L, 2k+1): each query against each table row
cheap = torch.gather(by_row, 1, pl.clipped_relative_positions(L_, L_, k_win))  # then pick row clip(j-i)+k
assert_close(cheap, torch.einsum("id,ijd->ij", q_h, a_K.detach()), atol=1e-4)  # = q_i . a^K_ij, no (L, L, d)
W_kR_h, r_dist = torch.zeros(dh, dm), pl.xl_relative_sinusoids(L_, dm)  # one head's W_kR; R for distances 0..L-1
u_h, v_h = torch.zeros(dh), torch.zeros(dh)  # one head's u, v
assert pl.xl_score_terms(q_h, q_h, r_dist @ W_kR_h.T, u_h, v_h)["d"].shape == (L_, L_)  # per-head u, v fit
P_rel, W_qr_all, W_kr_all = torch.zeros(2 * k_v1, dm), torch.zeros(dm, dm), torch.zeros(dm, dm)  # shapes only
assert P_rel.shape == enc_v1.rel_embeddings.weight.shape  # v1's released table: 2k = 1024 rows
c2c_, c2p_, p2c_ = pl.deberta_terms(q_h, q_h, P_rel @ W_qr_all[:dh].T, P_rel @ W_kr_all[:dh].T)
span_v1 = min(L_, k_v1)  # v1's released code slices the table to 2 min(L, k) rows around its middle
P_used = P_rel[k_v1 - span_v1:k_v1 + span_v1]  # (transformers' DeBERTa v1: compute_attention_span)
c2p_rows = (q_h @ (P_used @ W_kr_all[:dh].T).T).shape
assert c2p_.shape == p2c_.shape == (L_, L_) and c2p_rows == (L_, 2 * span_v1) == (10, 20)
print(f"L = {L_}: Shaw a^K {tuple(a_K.shape)}, or {tuple(by_row.shape)} scored first;",
      f"T5 bias {tuple(t5_stack(L_).shape)}; DeBERTa v1 c2p before the gather {tuple(c2p_rows)}")

# %% [markdown] slideshow={"slide_type": "subslide"}
# ### DeBERTa-v2/v3's log buckets are not T5's
#
# DeBERTa-v2/v3 also bucket far distances by log (`position_buckets`), but with another rule
# (transformers' `make_log_bucket_position(relative_pos, bucket_size, max_position)` in
# `models/deberta_v2/modeling_deberta_v2.py`; microsoft/DeBERTa's `DeBERTa/deberta/da_utils.py`). For
# the signed distance $s = i - j$ (query minus key; not §5's clipped row $\delta(i, j)$), $b$ =
# `position_buckets` and $P$ = `max_position`
# (v3: $b = 256$, and $P = 512$, its `max_position_embeddings`, since `max_relative_positions` is $-1$),
# with $h = b/2$:
#
# $$\text{bucket}(s) = \begin{cases} s & |s| \le h, \\
#   \operatorname{sign}(s)\left(h + \left\lceil \dfrac{\log(|s|/h)}{\log((P-1)/h)}\,(h - 1)
#   \right\rceil\right) & \text{otherwise.} \end{cases}$$
#
# How it differs from T5's:
#
# * it is one signed, symmetric rule, not two halves of buckets;
# * it rounds up where T5 floors. That keeps distances exact (a bucket holding its distance alone) a
#   little past $h$: up to 130 in v3, where 131 and 132 share a bucket;
# * the far buckets reach $\pm(h + h - 1) = \pm 255$ at $|s| = P - 1 = 511$;
# * there is no $\min$: farther distances keep growing ($\pm 256$ at 512). The clip into the table's
#   $2b = 512$ rows, $\operatorname{clip}(\text{bucket} + 256, 0, 511)$ as in c2p, makes them share the
#   edge rows.
#
# The cell writes the rule in plain Python, and checks it against `pl.deberta_log_bucket` and against
# the installed transformers' `make_log_bucket_position`.

# %%
def deberta_v2_bucket(delta: int, position_buckets: int = 256, max_position: int = 512) -> int:
    """DeBERTa-v2/v3's log bucket of a query-minus-key distance (teaching form, Python ints)."""
    h = position_buckets // 2
    if abs(delta) <= h:
        return delta
    far = h + math.ceil(math.log(abs(delta) / h) / math.log((max_position - 1) / h) * (h - 1))
    return far if delta > 0 else -far


deltas = list(range(-1500, 1501))
v3_bucket = {dl: deberta_v2_bucket(dl) for dl in deltas}
assert all(v3_bucket[-dl] == -v3_bucket[dl] for dl in deltas)  # signed and symmetric
holders = {}  # bucket -> the distances it holds
for dl in deltas:
    holders.setdefault(v3_bucket[dl], []).append(dl)
assert all(holders[n] == [n] for n in range(-130, 131))  # exact: bucket n holds n alone, up to 130
assert holders[131] == [131, 132] and holders[-131] == [-132, -131]  # 131 shares its bucket with 132
assert v3_bucket[511] == 255 and v3_bucket[-511] == -255 and v3_bucket[512] == 256  # 255 at m - 1, no min
assert [v3_bucket[dl] for dl in deltas] == pl.deberta_log_bucket(torch.tensor(deltas)).tolist()  # the library's
v3_row = {dl: min(max(v3_bucket[dl] + 256, 0), 511) for dl in deltas}  # the table row, c2p's clip
assert {v3_row[dl] for dl in deltas if dl >= 511} == {511} and {v3_row[dl] for dl in deltas if dl <= -512} == {0}
from transformers.models.deberta_v2.modeling_deberta_v2 import make_log_bucket_position  # transformers' own rule

for b_, m_ in ((256, 512), (64, 128), (32, 512)):
    hf_b = make_log_bucket_position(torch.tensor(deltas), b_, m_).long().tolist()
    assert hf_b == [deberta_v2_bucket(dl, b_, m_) for dl in deltas], (b_, m_)
print("v3 buckets (256, max 512) of distances 128..133:", [v3_bucket[dl] for dl in range(128, 134)],
      "| 300, 511, 512, 1000:", [v3_bucket[dl] for dl in (300, 511, 512, 1000)])
print("T5 encoder buckets (32, max 128) of distances 7..9 in the past:",
      pl.t5_relative_bucket(torch.tensor([-7, -8, -9]), num_buckets=32, max_distance=128).tolist())

# %% [markdown] slideshow={"slide_type": "slide"}
# ## 8. Exercises
#
# Each exercise has a cell for your answer and a checker that says what is right or wrong, with
# a hint. The worked solution follows, collapsed (expand it only after trying), then a cell that
# checks it. In a graded copy (`make student`) the solution cell is empty: write your answer there.
#
# **1 (derive: a strided shift as a view).** Funnel-Transformer (Dai et al. 2020, by XL's first
# author) uses XL's relative attention in a model that pools its sequence as it goes deeper. At a
# pooling layer the queries are pooled and the keys are not: query $i$ stands for position
# $s \cdot i$ (stride $s$), key $j$ for position $j$; a distance is the signed one, query minus key, as in §3, and
# keys after the query count too (Funnel is an encoder). As in §3, every query is first scored against every
# distance with one matmul. Here that matrix `x` has shape `(q_len, stride * (q_len - 1) + k_len)` and holds
# every distance a query needs: its column $c$ holds the distance $s\,(q_\text{len} - 1) - c$, the largest
# first, as in §3. §3 moved its scores with one padded copy; here no copy is needed at all. Write
# `strided_shift(x, stride)` returning the `(q_len, k_len)` scores, entry $(i, j)$ the score at distance
# $s\,i - j$, as a **view** of `x`: a torch tensor sharing `x`'s memory, with `x` left unchanged (a gather, a
# loop or a pad gives the right numbers in new memory, and the checker says so). The checker draws new shapes
# (at least two queries), strides and scores at every check.

# %%
def strided_shift(x, stride):
    raise NotImplementedError  # your code


_ = check.xl_rel_shift(strided_shift)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "xl_rel_shift_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def strided_shift(x, stride):
    ### BEGIN SOLUTION
    # Label the columns: column c holds distance s (Q - 1) - c. Entry (i, j) needs s i - j, so
    # c = s (Q - 1 - i) + j: one column further right for each key, s columns further left for each query.
    # In x's memory (rows of W = s (Q - 1) + K numbers) that entry sits at i W + s (Q - 1 - i) + j
    # = s (Q - 1) + i (W - s) + j: a start of s (Q - 1), a step of W - s from one query to the next and a step
    # of 1 from one key to the next. Steps and a start are all a view is: no copy, no index, no pad. (§3's
    # matrix holds only K distances, so its rows need the pad to make room; here every distance is there.
    # The same view by slicing: flatten, drop the first s (Q - 1) numbers, read rows of W - s, keep K.)
    q_len, width = x.shape
    k_len = width - stride * (q_len - 1)
    return x.as_strided((q_len, k_len), (width - stride, 1), x.storage_offset() + stride * (q_len - 1))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "xl_rel_shift", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.xl_rel_shift(strided_shift)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **2 (design: a T5 encoder that reads every row).** A T5 bias stores `num_buckets` learned scalars per
# head, and a row that no offset ever reaches is a parameter that never trains. Design
# `every_row(offsets, num_buckets, max_distance)`, a bucket rule for a bidirectional (encoder) bias
# (offsets $j - i$ in, buckets out) under which every row of the table is read, while a trained table
# keeps its meaning for the past (a key at or before the query keeps T5's bucket) and the future mirrors
# the past: a key after the query lands in the upper half, buckets $B, \dots, 2B - 1$ with
# $B$ = `num_buckets`/2, never in a lower bucket than a nearer key after the query, and the upper
# buckets keep the past's spacing (each holds as many distances as its mirror in the past, give or take
# one). You may call
# `pl.t5_relative_bucket`. The checker judges the rule by what it does on encoder settings like T5's
# (`max_distance` at least 4 × `num_buckets`), drawn at every check.

# %%
def every_row(offsets, num_buckets, max_distance):
    raise NotImplementedError  # your code


_ = check.t5_rows_read(every_row)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "t5_rows_read_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def every_row(offsets, num_buckets, max_distance):
    ### BEGIN SOLUTION
    # Which row does T5's encoder miss? A key after the query goes to B + bucket(n) with n = j - i >= 1, so the
    # upper half is bucket(1), bucket(2), ... shifted by B. Bucket B would be "a key after the query at distance
    # 0", but distance 0 is the query itself, counted in the past: row B is never read (num_buckets - 1 rows of
    # num_buckets, at any length). Any ordered future that reads every row must give the nearest key after the
    # query row B; keeping the past's widths then fixes the rest: a key at distance n after the query takes
    # B + bucket(n - 1), so each upper bucket holds exactly the distances of its mirror, shifted by one (exact
    # near, log-spaced far). (B + min(n - 1, B - 1) also reads every row, but is a Shaw-style clip: exact only
    # for the B - 1 nearest keys, every key from B on in the last row; the checker refuses it. B + n - 1 for the
    # exact near keys and B + bucket(n) beyond passes too: it leaves one far bucket one distance narrower.)
    B = num_buckets // 2
    past = pl.t5_relative_bucket(offsets, num_buckets=num_buckets, max_distance=max_distance)
    after = B + pl.t5_relative_bucket(-(offsets - 1).clamp(min=0), num_buckets=num_buckets, max_distance=max_distance)
    return torch.where(offsets > 0, after, past)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "t5_rows_read", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.t5_rows_read(every_row)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **3 (derive).** §4 found where the last bucket of the past starts by walking the distances up. Derive it
# instead: write `t5_last_bucket_start(num_buckets, max_distance, bidirectional)`, the smallest distance
# $n = i - j \ge 0$ (a key in the past) that lands in the last bucket of the past, as a closed form in the
# three arguments. The checker draws new settings at every check, one with `max_distance` beyond $10^{18}$,
# refuses `pl.t5_relative_bucket` while your function runs, and gives each setting the few Python steps
# and tensor elements a formula needs: a walk, a bisection or a grid over the distances runs out of them.
# Your answer must agree exactly with T5's rule (§4's formula, floor included) at every drawn setting, except
# the one beyond $10^{18}$, where a relative $10^{-6}$ is allowed (float64 holds 16 digits, and T5's float32 7).
# No drawn setting puts the edge exactly on a whole distance: at such a tie T5's own float32 code falls on
# either side by rounding, and so may any float formula.

# %%
def t5_last_bucket_start(num_buckets, max_distance, bidirectional):
    raise NotImplementedError  # your code


_ = check.t5_last_bucket(t5_last_bucket_start)

# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "t5_last_bucket_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def t5_last_bucket_start(num_buckets, max_distance, bidirectional):
    ### BEGIN SOLUTION
    # Last bucket of the past: B - 1. n >= e is in it when e + floor(x (B - e)) >= B - 1 with
    # x = log(n/e) / log(max_distance/e); a floor reaches an integer exactly when its argument does, so
    # x >= (B - 1 - e) / (B - e), i.e. n >= e * (max_distance/e) ** ((B - 1 - e) / (B - e));
    # distances are integers: round up. (16 buckets, max 32: 20; T5's defaults: 91 and 113, as in §4.)
    # At an exact tie (18 buckets, max 128: 4 * 32 ** 0.8 = 64 exactly, as 64 ** 5 == 4 * 128 ** 4) the
    # float result may land a hair above and the ceil one past, as T5's float32 may; the checker draws no tie.
    assert 64 ** 5 == 4 * 128 ** 4
    B = num_buckets // 2 if bidirectional else num_buckets
    e = B // 2
    return math.ceil(e * (max_distance / e) ** ((B - 1 - e) / (B - e)))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "t5_last_bucket", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.t5_last_bucket(t5_last_bucket_start)

# %% [markdown] slideshow={"slide_type": "subslide"}
# **4 (derive: the rows a blind table must tie).** §5 showed that the paper's p2c and the released code's
# read different rows of $q^r$, so a checkpoint trained with one index gives other scores with the other.
# Some tables give the same p2c with both indices, for every content and at every length. Write
# `tied_rows(k, row)`: the set of rows that every such table must set equal to row `row` of its $2k$ rows
# (`row` itself included). The checker asks for every row at $k = 3$, then for rows of one $k$ between
# 20 000 and 200 000 and of two $k$ between $10^{15}$ and $10^{18}$, drawn at every check; each call gets
# the few Python steps and tensor elements that a rule for the rows needs.

# %%
def tied_rows(k, row):
    raise NotImplementedError  # your code


_ = check.deberta_tied_rows(tied_rows)


# %% jupyter={"source_hidden": true} nbgrader={"grade": false, "grade_id": "deberta_tied_rows_answer", "locked": false, "schema_version": 3, "solution": true} slideshow={"slide_type": "skip"}
def tied_rows(k, row):
    ### BEGIN SOLUTION
    # For i - j = o the code reads row clip(o + k), the paper row clip(k - o), rows 0 .. 2k-1 (and o < 0 swaps
    # the two). Inside the window (|o| < k) that ties row k + o to row k - o: row r to row 2k - r, and row k to
    # itself. At the edges the clip keeps reading: o >= k reads code row 2k - 1 and paper row 0, so row 0 joins
    # 2k - 1, which the window already tied to row 1. Sets {0, 1, 2k-1}, {r, 2k-r} for r = 2 .. 2k-2, and
    # {k}: k classes (k = 3: {0, 1, 5}, {2, 4}, {3}), so a blind table has k free rows of its 2k.
    if row in (0, 1, 2 * k - 1):
        return {0, 1, 2 * k - 1}
    return {row, 2 * k - row}
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "deberta_tied_rows", "locked": true, "points": 1, "schema_version": 3, "solution": false} slideshow={"slide_type": "skip"}
_ = check.deberta_tied_rows(tied_rows)

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Errata in the sources
#
# The source notes this chapter follows (`004`, §2 on relative encodings; `000` names Shaw et al.). Quoted
# formulas keep the source's letters: its query $m$ and key $n$ are our $i$ and $j$.
#
# 1. **XL's formula, and its third and fourth terms.** The source gives the four-term score as "the core
#    idea of relative position encoding" (相对位置编码的核心思路) without naming Transformer-XL, whose
#    formula it is (Dai et al. 2019, §3.3). It writes $u^\top W_q^\top W_k x_n$ and
#    $v^\top W_q^\top \tilde W_k \tilde p_{m-n}$. In XL $u$ and $v$ replace the whole projected query
#    position $W_q p_i$: the terms are $u^\top W_{k,E} x_j$ and $v^\top W_{k,R} R_{i-j}$, with
#    $u, v \in \mathbb R^{d_\text{head}}$ (§3). With XL's $u$ the source's form does not type-check when
#    $d_\text{head} \ne d_\text{model}$; with a $u_\text{src} \in \mathbb R^{d_\text{model}}$ it equals XL's
#    term for $u = W_q u_\text{src}$: a different parameter, tied to $W_q$ (the cell after this list checks).
#    The slip is not the source's own: RoFormer (Su et al.), whose §2.2 the source follows equation by
#    equation, writes the same two terms (its Eq. (7)).
# 2. **The first $b_{i,j}$ equation, $q_m^\top k_n = x_m^\top W_q^\top W_k x_n + b_{i,j}$.** The source
#    gives it without saying whose it is and calls $b_{i,j}$ a "trainable vector matrix". RoFormer §2.2,
#    where it comes from, credits it to Raffel et al. (T5) and calls $b_{i,j}$ "a trainable bias"; in T5 it
#    is one learned scalar per (bucket, head), looked up by the bucket of $j - i$ (§4), not a vector.
#    (The source also switches from $m, n$ to $i, j$ there.)
# 3. **DeBERTa's citation**: the source writes "He et al. [2022]" (RoFormer, which it follows, has
#    [2020]); DeBERTa is He, Liu, Gao and Chen, ICLR 2021 (arXiv 2006.03654, 2020).
# 4. **DeBERTa's projections and scale**: the source reuses the content projections $W_q, W_k$ in the
#    relative terms. That is not the v1 paper (separate $W_{q,r}, W_{k,r}$), but it is exactly
#    DeBERTa-v2/v3 with `share_att_key`, as the released v3 configs set it (§5), so the formula fits
#    v2/v3 rather than the paper it cites. Its p2c index $m - n$ also matches the released code, not the
#    paper's $\delta(j, i)$ (§5). What it misses in either version is the scale: DeBERTa divides the
#    three-term sum by $\sqrt{3d}$, the source's softmax by $\sqrt d$ (§5); and v2/v3 bucket the offset
#    by log (§7), which the source's $\tilde p_{m-n}$ does not show.
# 5. **Shaw's key as a per-key vector.** The source writes $k_n = W_k(x_n + \tilde p^k_r)$ with
#    $r = \operatorname{clip}(m - n)$ (as RoFormer's Eq. (5) does), so its $k_n$ depends on the query $m$:
#    it is one vector per *pair*, $k_{mn}$ (its $v_n$ too), which is why Shaw's $a^K, a^V$ are
#    $(L, L, d)$ tensors (§2) and what §3's scoring by distance avoids. Its query-minus-key sign and $\tilde p$ before
#    $W_k$ are only conventions: they agree with $j - i$ and $a^K$ after $W_k$ with the table flipped and
#    $a^K = W_k \tilde p$ (§2).
# 6. **"Absolute encodings are fixed and not trainable, and limit the sequence length"** (`004`, §1:
#    绝对位置编码对能处理的序列长度有限制): sinusoids are fixed, but learned absolute tables (BERT, GPT-2;
#    `pl.LearnedPositionalEncoding`) are trained; and only such a table has a hard cap, its `max_len` rows,
#    while sinusoids compute at any length. No hard cap is not extrapolation: whether a model trained short
#    works longer is measured in chapter 7 (sinusoids and a learned table among others, trained at 64
#    tokens, tested up to 512) and read in chapter 6. The cell after this list checks.
# 7. **The second $b_{i,j}$ equation**,
#    $q_m^\top k_n = x_m^\top W_q^\top W_k x_n + p_m^\top U_q^\top U_k p_n + b_{i,j}$: absolute positions
#    with projections $U_q, U_k$ of their own (untied from $W_q, W_k$) plus a relative bias. The source
#    gives it without attribution. RoFormer §2.2 introduces it (its Eq. (9)) right after a sentence on
#    Ke et al., and credits it to Raffel et al. [2020] (paraphrased from RoFormer, a citation: no cell
#    checks the paper's wording); the form is TUPE's (Ke, He and Liu,
#    "Rethinking Positional Encoding in Language Pre-training", ICLR 2021), not T5's: T5 has only the
#    first equation's bias (§4).
# 8. **"Positions belong in $q$ and $k$, not in $v$"** (`004`, §2): the source hedges it in its next sentence (the rule is not
#    absolute: on some tasks $v$ can take positions too), but cites no study for either half. A study
#    exists: Shaw et al. 2018 ablate $a^K$ and $a^V$ (§4.3 and its table) and find, for translation, that
#    relative positions in the compatibility ($a^K$) alone may be sufficient, with more work needed for
#    other tasks (paraphrased; a citation, not run here). Later methods (XL, T5, DeBERTa, RoPE, ALiBi)
#    touch only the scores; Shaw's $a^V$ does move the output (§2 checks $z_0$).
# 9. **"Each relative position's embedding is trainable"** (`004`, §2: 每个相对位置关系，对应的emb是可以训练的):
#    true of Shaw's tables, T5's scalars and DeBERTa's relative table (§7 counts it), not of the others.
#    XL's $R$ is a fixed sinusoid (what trains is $W_{k,R}$, $u$, $v$), ALiBi's slopes are fixed and RoPE
#    has no parameters; the cell checks.
# 10. **"By theoretical analysis, the middle two terms suffice"** (`004`, §2:
#    经理论分析，……公式6的中间两项，足以表达相对位置关系):
#    DeBERTa gives no analysis for dropping position–position; its case is one informal sentence (§3.1):
#    with relative positions that term adds little information, so it is removed. §5's score keeps the
#    three terms (the cell checks that `pl.deberta_scores` is their sum over $\sqrt{3d}$).

# %%
W_q1, W_kE1 = torch.randn(4, 8).to(device), torch.randn(4, 8).to(device)  # d_head 4, d_model 8 (erratum 1)
x_j, u_xl, u_src = torch.randn(8).to(device), torch.randn(4).to(device), torch.randn(8).to(device)
try:
    u_xl @ W_q1.T @ (W_kE1 @ x_j)  # the source's u^T W_q^T W_k x_j with XL's u (size d_head): no product
    typechecks = True
except RuntimeError:
    typechecks = False
assert not typechecks
assert_close(u_src @ W_q1.T @ W_kE1 @ x_j, (W_q1 @ u_src) @ (W_kE1 @ x_j))  # = XL's term for u = W_q u_src

learned = pl.LearnedPositionalEncoding(max_len=8, d=4)
assert sum(p_.numel() for p_ in learned.parameters() if p_.requires_grad) == 8 * 4  # trainable
try:
    learned(torch.zeros(9, 4))  # one position past its 8 rows
    capped = False
except ValueError:
    capped = True
assert capped and torch.isfinite(pl.sinusoidal_positions(100_000, 4)).all()  # erratum 6: only the table is capped
assert not list(pl.SinusoidalPositionalEncoding(4, max_len=8).parameters())  # the sinusoidal one has none
assert not pl.xl_relative_sinusoids(8, 4).requires_grad  # XL's R: a function of the distance, nothing to train
assert n_params(pl.RotaryEmbedding(4)) == n_params(pl.ALiBi(4)) == 0
assert enc_v1.rel_embeddings.weight.requires_grad and enc_v3.rel_embeddings.weight.requires_grad  # DeBERTa's: trained
from posenc_lib.experiments import extrapolation as ex  # erratum 6: chapter 7's train-short, test-long results

ex_cfg = ex.load_results()["config"]
assert ex_cfg["train_len"] == 64 and ex_cfg["train_len"] * max(ex_cfg["eval_multiples"]) == 512
assert all({"sinusoidal", "learned"} <= set(t["methods"]) for t in ex.load_results()["tasks"].values())
qc10, kc10, qr10, kr10 = (torch.randn(5, 4).to(device) for _ in range(4))  # erratum 10: 5 tokens, k = 2
assert_close(pl.deberta_scores(qc10, kc10, qr10[:4], kr10[:4]) * math.sqrt(3 * 4),
             sum(pl.deberta_terms(qc10, kc10, qr10[:4], kr10[:4])))  # c2c + c2p + p2c, no position-position
print("learned absolute table: 32 trainable numbers, 8 positions at most; sinusoidal: none, any length;",
      "XL's R, RoPE, ALiBi: none; DeBERTa's relative table: trainable")
