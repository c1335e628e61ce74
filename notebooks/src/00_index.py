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
# # Positional encodings, from "why" to YaRN
#
# Attention compares every token with every other token, and nothing in that comparison
# says where a token stands. These notebooks show why that is a problem, then build the
# ways transformers fix it, one chapter per idea. The formulas live once, in the library
# `posenc_lib`. A chapter writes out only a one-liner such as $i/m$, or a form it then checks
# against the library. Chapters 1 to 9 have self-checking exercises near their end, and the appendix on
# speed, off the teaching path, has two. Lecturers: the plan for teaching with them is under "How to
# use these notebooks in class", below.
#
# The course follows five Chinese blog posts on positional encodings and RoPE, cited as sources `000`
# to `004`; where they slip, a chapter says so and its closing "Errata in the sources" corrects them
# in the open.
#
# How the chapters check their own text, which versions they run and how to use a GPU: see
# "About these notebooks", below.

# %% slideshow={"slide_type": "skip"}
# %matplotlib inline
import math
import os

import torch
import transformers

import posenc_lib as pl

print("posenc_lib", pl.__version__, "| torch", torch.__version__.split("+")[0],  # "+cpu", "+cu128": the build
      "| transformers", transformers.__version__)
device = pl.default_device()  # where every chapter puts its tensors ("About these notebooks", below)
assert device.type == "cpu" or os.environ.get("POSENC_DEVICE"), "the CPU unless POSENC_DEVICE opts in"

# %% [markdown] slideshow={"slide_type": "slide"}
# ## Five properties a positional encoding should have
#
# Chapter 1 shows that attention without a causal mask cannot see where a token stands: shuffle
# the tokens and the outputs are shuffled the same way, nothing more. (A decoder's causal mask
# breaks this symmetry, a thread chapter 7 follows.) The fix is a **positional encoding**: a vector
# $p_i$ for each position $i$, added to the token, or, in later methods, a rotation of the queries and
# keys (RoPE) or a term added to the scores (relative encodings, ALiBi). Five properties we want from it,
# in our words:
#
# 1. **Unique.** Each position gets its own code. If two positions shared one, two equal
#    tokens there would get identical outputs again, in a layer without a causal mask (chapter 1).
# 2. **A fixed relation between $p_i$ and $p_{i+k}$.** Knowing the code $p_i$ of position $i$,
#    the code $p_{i+k}$ follows by the same simple rule for every $i$, in a sequence of any
#    length. Ideally the rule is a fixed affine map $p_{i+k} = M_k\,p_i + b_k$: one matrix $M_k$
#    and one vector $b_k$ for each offset $k$ (for the sinusoids of chapter 3 a linear one,
#    $b_k = 0$). Then "k tokens apart" is the same map everywhere in the sequence. The map alone does
#    not make a head's scores depend on the offset alone (chapter 3 §6 asks what the head must do as well).
# 3. **Generalises to longer sequences.** A model trained on 8K tokens should still make
#    sense of a 32K context.
# 4. **A deterministic pattern.** The codes come from a fixed rule, not from a table that
#    must be learned position by position. The sources' reason is that a model should learn
#    more easily from a regular pattern; that is their motivation, not something this course
#    measures.
# 5. **Extends to more dimensions.** The same idea should work for images (2-D) and video
#    (3-D), not only for a line of text. The map below asks whether it carries over without a
#    new fault; faults a method already has in 1-D count under their own property.
#
# The map below grades each method on five questions close to these properties. Where the properties come
# from, and where this course departs from its sources: "Where properties 1 and 2 part from source `001`",
# in the appendix at the end of this page.

# %% [markdown] slideshow={"slide_type": "slide"}
# ## The chapters
#
# | # | notebook | in one line |
# |---|---|---|
# | 1 | [01_why_positions](01_why_positions.ipynb) | without positions and without a causal mask, attention is blind to word order: permute the tokens and the outputs just move with them; a causal mask breaks this, but within one layer the tokens before a query are still a bag |
# | 2 | [02_integer_binary](02_integer_binary.ipynb) | the first attempts, integer, normalised and binary codes, and learned tables (BERT, GPT-2): what goes wrong with each |
# | 3 | [03_sinusoids](03_sinusoids.ipynb) | sinusoids as smooth binary digits; a shift by k positions is one fixed rotation $M_k$ |
# | 4 | [04_relative](04_relative.ipynb) | relative encodings: Shaw, Transformer-XL, T5 buckets, DeBERTa |
# | 5 | [05_rope](05_rope.ipynb) | rotary embeddings derived from scores that depend only on the offset $n-m$; why 2 × 2 pairs; why q and k are rotated and v is not (unless each output is rotated back); every implementation form in the sources |
# | 6 | [06_alibi](06_alibi.ipynb) | ALiBi: a per-head linear penalty on distance instead of an encoding; how far it extrapolates; which encodings fit linear attention |
# | 7 | [07_beyond](07_beyond.ipynb) | NoPE; why RoPE meets unseen angles past its training length, and the ways to stretch it (PI, NTK, YaRN, Llama 3's); a train-short, test-long experiment of six methods |
# | 8 | [08_rope_in_models](08_rope_in_models.ipynb) | RoPE in today's models: configs, partial and proportional RoPE, attention factors, KV caches, Llama 4's iRoPE |
# | 9 | [09_beyond_1d](09_beyond_1d.ipynb) | beyond 1-D and beyond counting tokens: axial RoPE (each pair turned by one axis of the image) and (t, h, w) RoPE for images and video, MRoPE for sequences that mix text, images and video, CoPE's gated positions, and a CoPE/RoPE/NoPE experiment |
# | A | [10_making_it_fast](10_making_it_fast.ipynb) | appendix, off the teaching path: loops against vectorised calls, passes over memory, RoPE's one-pass C kernel, and on a GPU its Triton kernel (checked by the tests under Triton's interpreter) |
#
# The five sources, and the chapters that follow each (a chapter cites a source by its number):
#
# | source | what it covers | chapters |
# |---|---|---|
# | `000` | a survey: sinusoids and RoPE, with RoPE in complex numbers; relative encodings in one sentence (Shaw's paper) and ALiBi as a link | 3, 4, 5, 10 |
# | `001` | attention's blindness to order (the dog example), the five properties, integer and binary codes (headings for sinusoids and relative encodings, with nothing under them), RoPE and Llama's code; it names NoPE and YaRN | 1, 2, 5, 7, 8, 9, 10 |
# | `002` | four requirements, the sinusoidal formula, its code and a printed table | 2, 3 |
# | `003` | sinusoids, RoPE and ALiBi (three forms) in code, and a heading for CoPE | 3, 5, 6, 8, 9, 10 |
# | `004` | absolute, relative (Shaw's clipped offsets, Transformer-XL's terms, T5's bias, DeBERTa's two middle terms) and rotary encodings, with worked tables | 3, 4, 5 |

# %% [markdown] slideshow={"slide_type": "subslide"}
# ## The map at a glance
#
# Nine ways to give a transformer positions, against five questions: ✔ yes, ✘ no, ~ partly, – does not
# apply, ? not tested here (for learned tables: training decides); [7] or [9] is a mark that chapter 7 or 9
# gives after asking you to predict it.
# Skim the map now as the route of the course; the appendix at the end of this page repeats it with
# the reason for each entry and where it is tested.
#
# 1. **Told apart.** If two of the tokens a token attends to trade places, can its output change?
# 2. **Fixed shift.** 2a: does one map, a matrix times the code plus a vector, the same in a sequence of
#    any length, turn every position's code into the code $k$ places later?
#    2b: do positions enter the attention scores only through how far apart two tokens are?
# 3. **Longer sequences.** Does a model trained on short sequences still work on longer ones?
# 4. **Deterministic.** Do the codes come from a fixed rule, with nothing learned?
# 5. **n-D.** Does the form for images (2-D) work without a fault the 1-D form does not have?
#
# The methods: **NoPE**, no code; **integer**, $i$ added to every feature; **normalised**, $i/m$ in a
# sequence of length $m$; **binary**, the bits of $i$; **sinusoidal**, sines and cosines of $i$ at $d/2$
# frequencies; **learned absolute**, one trained vector per position; **relative**: Shaw, a learned vector per
# offset $j - i$ up to a clip, which the query reads; T5, a learned number per offset bucket added to the
# score; **RoPE**, queries and keys turned by angles that grow with their position (its "code" is that
# rotation, $R_m$); **ALiBi**, a penalty on each score that grows with the distance (its *symmetric* form
# gives a key before the query and one after it the same penalty).
#
# Each column is graded in the setting its rule states (column 1 with and without a causal mask, column 5
# for NoPE in a causal decoder), so one row's settings can differ between columns; the appendix gives each.
#
# | method | 1 told apart | 2a one map between codes | 2b scores offset-only | 3 longer sequences | 4 deterministic | 5 n-D: no *new* fault |
# |---|---|---|---|---|---|---|
# | none (NoPE) | ✘ | – | – | [7] | – | ~ |
# | integer $i\cdot\mathbf 1$ | ~ | ✔ | ✘ | ? | ✔ | [9] |
# | normalised $i/m$ | ~ | ✘ | ✘ | ? | ✔ | [9] |
# | binary | ~ | ✘ | ✘ | ? | ✔ | [9] |
# | sinusoidal | ✔ | ✔ | ✘ | [7] | ✔ | [9] |
# | learned absolute | ? | ? | ✘ | ✘ | ✘ | ? |
# | relative: Shaw, T5 | ~ | – | ✔ | [7] | ✘ | ✔ |
# | RoPE | ✔ | ✔ | ✔ | [7] | ✔ | [9] |
# | ALiBi | ✔ | – | ✔ | [7] | ✔ | ~ |
#
# ~ in column 1: a LayerNorm subtracts each vector's mean, so $i\cdot\mathbf 1$ vanishes (the normalised
# code too) and binary's all-0 and all-1 codes merge; or far positions share one term (Shaw, T5). ALiBi's ✔
# leaves out its symmetric form (~).
#
# Column 3 waits for chapter 7's experiment and the axial entries of column 5 for chapter 9: guess
# those marks before you get there.

# %% [markdown] slideshow={"slide_type": "skip"}
# ## Conventions
#
# A reference page: read it when a chapter points here. One set of conventions for the whole course; every chapter follows it and says so where a
# source forces another choice. The sources themselves do not agree (one writes offsets as
# $j-i$, another as $i-j$, a third counts bits from the left), which is a common source of
# sign errors when reading them side by side.
#
# | what | our convention | where a source differs |
# |---|---|---|
# | positions | 0-based: the first token is at position 0. Query position $i$, key position $j$; the RoPE chapters use RoFormer's $m$ (query) and $n$ (key) | source `001`, which chapters 1 and 2 follow, counts from 1 ($x_i$ and $p_i$ for $i = 1, \dots, m$; its integer code starts at $p_1 = \mathbf 1$), though its binary example starts at $p_0$; those chapters translate it to 0-based. The worked tables of source `004` start at 0, as we do |
# | **the letter $j$** | names two things: a **key position** (offsets $j - i$, biases, chapters 1, 4, 6, and CoPE's $p_{ij}$ in chapter 9 §3) and a **frequency pair** ($\theta_j$, chapters 2, 3, 5, 7–9). They never share a formula: wherever positions and pairs meet, the positions are $i$ (chapter 3's $p_{i,2j}$: position $i$, pair $j$) or $m$, $n$ (RoPE, and chapter 3's scores on the way to it), and $j$ is the pair | some sources use $i$ for the pair ($p_{pos,2i}$ in source `002`, $\theta_i$ in RoFormer); source `000` writes $p_{i,2j}$, as we do |
# | **offset** | key minus query, $j - i$ ($n - m$): negative for keys in the past. `pl.relative_positions(L)[i, j] == j - i` | Shaw's paper and T5's `relative_position` agree; source `004` writes Shaw's offset as $m-n$ (the same table transposed, equivalently every offset negated, ch. 4); Transformer-XL indexes its sinusoids by the signed distance $i-j$, and DeBERTa's $\delta$ is query minus key (ch. 4) |
# | **distance** | $\lvert j - i\rvert$; for a causal model's past keys, $i - j \ge 0$. One signed exception: `pl.rope_scores_by_distance` takes $r = m - n$, query minus key, negative allowed (ch. 5 §8) | ALiBi's penalty $-m_h\,(i-j)$ is written with the distance ($m_h$ is a head's slope there, not a position; ch. 6) |
# | RoPE | $R_m$ turns each pair **counter-clockwise** by $m\theta_j$: $(x, y) \mapsto (x\cos m\theta_j - y\sin m\theta_j,\ x\sin m\theta_j + y\cos m\theta_j)$, the matrix $[[\cos, -\sin], [\sin, \cos]]$ times a column vector, so $(1, 0)$ turns towards $(0, 1)$. Then $R_m^\top R_n = R_{n-m}$: the score of query $m$ and key $n$ is a function of the offset $n-m$ | source `004` prints $[[\cos, \sin], [-\sin, \cos]]$, which turns a column vector clockwise, beside code that turns counter-clockwise (ch. 5); RoFormer §3.1 writes the score as $g(x_m, x_n, m-n)$, the offset the other way round (ch. 5) |
# | frequencies | $\theta_j = \text{base}^{-2j/d}$ for pair $j = 0 \dots d/2-1$ (base 10 000 unless said); pair $j$ at position $m$ turns by $m\theta_j$. Over $L$ tokens, a pair **completes a turn** when its wavelength $2\pi/\theta_j$ is at most $L$ (`pl.rope_inspect.turning_pairs`; chapters 7 and 8). One exercise asks the exact question instead and says so: chapter 5's Exercise 2 wants the angle reached at the last position, $(L-1)\,\theta_j \ge 2\pi$. The two differ only for a pair whose wavelength lies between $L - 1$ and $L$ | papers that count pairs from 1 write $\theta_i = \text{base}^{-2(i-1)/d}$ |
# | sinusoids | $p_i[2j] = \sin(i\theta_j)$, $p_i[2j+1] = \cos(i\theta_j)$ (Vaswani's interleaved order) | many codebases concatenate all sines, then all cosines (ch. 3 shows both) |
# | pair layouts | `"interleaved"` pairs features $(2j, 2j+1)$ (RoFormer, Meta's complex-number code); `"half"` pairs $(j, j+d/2)$ (GPT-NeoX, Hugging Face's `rotate_half`) | the two are a fixed permutation apart (ch. 5) |
# | binary codes | "bit $b$" is the bit worth $2^b$: bit 0 is the least significant and the fastest to flip, as pair 0 is the sinusoids' fastest pair. Codes are drawn and stored as numbers are written, most significant bit first: bit 0 is the **last** column of `pl.binary_positions`, while pair 0 is the **first** two columns of `pl.sinusoidal_positions` (the two tensors run in opposite directions) | source `001` numbers the bits from the left: its $p_{i,0}$ is the slowest bit, our bit $d-1$, and it writes the fastest as $p_{i,d}$ (counted from 0, the last of $d$ bits is $p_{i,d-1}$), our bit 0. Its example $p_1 = [0, 0, 1]$, $p_2 = [0, 1, 0]$ is drawn as ours is |
# | tensor shapes | (batch, heads, seq, head_dim); $d$ = head_dim in the RoPE chapters, $d$ = the model width for absolute codes | docstrings state every shape |
# | the letter $m$ | a query position in the RoPE chapters ($R_m$); a sequence length in the normalised code $i/m$ (chapter 2, as source `001` writes it); and, always with its head index, ALiBi's slope $m_h$ | — |
# | head numbers | prose counts heads from 1 (head $h$ has ALiBi slope $m_h$, $h = 1 \dots H$); code counts from 0: head 1 is `pl.alibi_slopes(H)[0]` and `bias[0]` (ch. 6) | ALiBi's paper counts from 1 as the prose does |
#
# The cell below checks the conventions the library encodes, so that a reader can trust the
# table against the code.

# %% slideshow={"slide_type": "skip"}
rel = pl.relative_positions(4)
assert rel[3, 1] == 1 - 3  # query 3, key 1: offset j - i = -2, a key in the past
R = lambda m: pl.rope_matrix(m, 2)  # noqa: E731  the 2x2 rotation of one pair, theta_0 = 1
cos, sin = math.cos(1.0), math.sin(1.0)
assert torch.allclose(R(1), torch.tensor([[cos, -sin], [sin, cos]]))  # counter-clockwise on a column vector
assert torch.allclose(pl.apply_rope(torch.tensor([[1.0, 0.0]]), torch.tensor([1])), torch.tensor([[cos, sin]]))
assert sin > 0  # (1, 0) turned by one radian has a positive second feature: towards (0, 1), not away from it
assert torch.allclose(R(5).T @ R(7), R(7 - 5), atol=1e-6)  # R_m^T R_n = R_{n-m}
assert all(torch.allclose(R(m + 3), R(3) @ R(m), atol=1e-5) for m in range(10))  # R_{m+k} = R_k R_m, the same R_k
qk8 = torch.randn(2, 1, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)  # random q and k, d = 8
offset3 = [(pl.apply_rope(qk8[0], torch.tensor([m])) @ pl.apply_rope(qk8[1], torch.tensor([m + 3])).T).item()
           for m in (0, 5, 10, 1000)]
assert max(offset3) - min(offset3) < 1e-9  # query at m, key at m + 3: one score wherever the pair stands
theta = pl.rope_frequencies(8)
assert torch.allclose(theta, 10000.0 ** (-torch.arange(4) * 2 / 8))  # theta_j = base^(-2j/d), j from 0
pe = pl.sinusoidal_positions(3, 8)
assert torch.allclose(pe[2, 0::2], torch.sin(2 * theta)) and torch.allclose(pe[2, 1::2], torch.cos(2 * theta))
assert theta.argmax() == 0  # pair 0, the first two columns of the sinusoids, turns fastest
# wavelengths 2 pi * (1, 10, 100, 1000) = 6.3, 63, 628, 6283: two pairs turn within 100 tokens, one within 62
assert (pl.rope_inspect.turning_pairs(theta, 100), pl.rope_inspect.turning_pairs(theta, 62)) == (2, 1)
assert pl.rope_inspect.turning_pairs(theta, 63) == 2 and 62 * theta[1] < 2 * math.pi  # wavelength 62.8, between L - 1 and L: the two counts differ
bits = pl.binary_positions(8, 3)
assert bits[6].tolist() == [1, 1, 0]  # 6 = 110 in binary, drawn most significant bit first
assert [int(b) for b in bits[:, -1]] == [0, 1] * 4  # the last column is bit 0, the fastest to flip
assert bits[1].tolist() == [0, 0, 1] and bits[2].tolist() == [0, 1, 0]  # source 001's p_1 and p_2, drawn alike
first, second = pl.pair_indices(8, "interleaved"), pl.pair_indices(8, "half")
assert first[0].tolist() == [0, 2, 4, 6] and second[0].tolist() == [0, 1, 2, 3] and second[1].tolist() == [4, 5, 6, 7]
x = torch.randn(2, 3, 5, 8, generator=torch.Generator().manual_seed(0))  # (batch, heads, seq, head_dim)
turned = pl.apply_rope(x)  # positions 0 .. 4 along the seq axis
assert turned.shape == x.shape and torch.equal(turned[:, :, 0], x[:, :, 0])  # position 0 is not turned ...
assert not torch.allclose(turned[:, :, 1], x[:, :, 1])  # ... position 1 is: the third axis is the sequence
slopes = pl.alibi_slopes(8)
assert slopes[0] == 2**-1 and slopes[-1] == 2**-8  # head 1 (code index 0) has ALiBi's first slope, 1/2 for 8 heads
assert pl.alibi_bias(8, 4)[0, 3, 1] == -slopes[0] * (3 - 1)  # bias[0]: head 1's -m_1 (i - j), query 3, key 1
qk = torch.randn(2, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)  # one query, one key
signed = pl.rope_scores_by_distance(qk[0], qk[1], torch.tensor([-3, 3]))  # r = m - n: query minus key
at = lambda m, n: pl.apply_rope(qk[0][None], torch.tensor([m]))[0] @ pl.apply_rope(qk[1][None], torch.tensor([n]))[0]  # noqa: E731
assert torch.allclose(signed, torch.stack([at(10, 13), at(10, 7)]))  # r = -3: the key 3 after query 10; r = 3: 3 before
print("the conventions table matches the library")

# %% [markdown] slideshow={"slide_type": "skip"}
# ## About these notebooks
#
# **What "checked" means here.** Each statement about a number, a shape, an equality or an
# ordering that a chapter makes in its text (a derivation's result, "the two outputs are
# identical", "a shift by $k$ positions is one rotation $M_k$") is followed by a cell that asserts it,
# so a notebook that runs top to bottom has checked its own text, on the instances its cells run. Statements about history
# and about papers ("Press et al. report …") are cited, not asserted; statements about
# what other libraries do are asserted by running them on tiny offline inputs through their
# public API where the lock installs them (PyTorch, transformers), and cited otherwise (fairseq,
# microsoft/DeBERTa); the few that only a library's code shows are checked in
# `tests/test_upstream_claims.py`. Results of training runs are asserted as orderings only
# where the seeds separate them; a higher mean without that separation is reported as a null or
# thin result (chapters 6 to 9 say where).
#
# **Versions.** `make lab`, Binder and conda install the locked versions of
# `requirements/lab.txt`; `make test` takes `requirements/test.txt`, the same versions plus the
# test tools and, on Linux x86-64, Triton. Colab is the exception: each chapter's first cell keeps
# Colab's own PyTorch and installs only the locked transformers there, so on Colab the last digits of
# an output may differ from the stored ones. The stored outputs were made with the test lock (only
# the appendix's Triton cell tells the two apart, and says so), and the claims about other
# libraries were checked against these versions. The first code cell of this page prints the ones you run; a
# chapter names a version only where a claim is about that version's code (chapter 9's erratum).
#
# **Devices.** The chapters compute on the CPU on every machine, GPU or not: their examples are
# small, and the CPU prints the digits stored here and has float64. To use your GPU, start
# JupyterLab with `POSENC_DEVICE=cuda` (or `mps`, or `auto` for the best one present): random inputs
# are still drawn on the CPU, so only last digits may move; the experiments take `--device cuda`.

# %% [markdown] slideshow={"slide_type": "skip"}
# ## How to use these notebooks in class
#
# **Before the lecture.** `make lab` opens the notebooks in JupyterLab; run the chapter top to
# bottom once (Run → Run All Cells), so that every widget is live. `make slides` builds a
# reveal.js deck of each chapter from the same cells (`slide`, `subslide`, `fragment` and
# `skip` are set on every cell); the deck shows the static figures and works offline, so
# keep it as a fallback and switch to JupyterLab for the widgets. This page's deck stops after the map
# at a glance: the rest of the page is reference.
#
# **During the lecture.** Every chapter follows the same rhythm: a paragraph says what the
# next cell will show, the cell shows it and asserts it. Before running an assert, ask the
# room to predict the outcome ("will the two dogs get the same output?"), then run it. Every
# widget comes after a static figure of the same thing: explain the static figure, then move
# the sliders.
#
# **Exercises.** Each chapter from 1 to 9 ends with 3–5 exercises; the appendix has two (a count of a training step's bytes, and an in-place backward rotation)
# (`tests/test_notebooks_meta.py` checks both). A learner's cell prints
# "not attempted yet" until it holds an answer; the checker then says what is right or wrong
# and gives a hint. The worked solution sits in the next, collapsed cell, and a locked cell
# checks it. To grade, `make student` writes the students' copies without the solutions
# (nbgrader's `generate_assignment`) and `POSENC_GRADING=1 nbgrader autograde` scores the
# returned ones (TEACHING.md, "Student copies and grading with nbgrader").

# %% [markdown] slideshow={"slide_type": "skip"}
# ### A 50-minute path per chapter
#
# Each chapter is one 50-minute session: 40 minutes along its path, from the slides or the
# live notebook, with the widgets of the "show live" column shown in their sections, then 10
# minutes to start the exercises assigned in class; the rest are homework. § numbers are the
# chapter's sections, minutes in brackets; each row's minutes add up to 40, except rows 0 and 1
# (chapter 0's 10 and chapter 1's 30 share one session) and row A, reading only. This is the one copy of the lecture plan (the README links here; `tests/test_notebooks_meta.py`
# checks its sections, widgets and exercises against the chapters).
#
# | chapter | 50-minute path | show live | assign |
# |---|---|---|---|
# | 0 `00_index` | the first 10 minutes of the session on chapter 1: the five properties a positional encoding should have, and the map at a glance, column 3 left for chapter 7 and the axial entries of column 5 for chapter 9 (10) | — | — |
# | 1 `01_why_positions` | §1 attention without positions, derive $\mathrm{Attn}(PX) = P\,\mathrm{Attn}(X)$ and why the softmax commutes (10), why a block with several heads keeps it and a causal mask breaks it (5) → §2–3 the dog demo, then add positions (5) → §4 permute the sentence: the two static figures, then the three predictions with the widget and their answers (10); §5 (the demo's weights and biases, the source's formula) as reading | §4 `permute_widget`: choose the order and the code (none, sinusoidal, one vector at every place, one repeating every 3 places), and let the room predict which rows light up | `passes_through`, `shift_not_shuffle` in class; `blind_query`, `causal_twins`, `changed_rows` at home |
# | 2 `02_integer_binary` | §1 integer codes, their size against a normalised token, and the LayerNorm that erases them (8) → §2 normalised codes (3) → §3 binary codes: fast and slow bits, jumpy steps, source `002`'s reasons against them (8) → §4 "is there a fixed affine map to $p_{i+k}$?": let the room guess, run least squares, then the proof for every width (10) → §5 bits as sinusoids (3) → §6 learned tables: what they learn, the copied-rows control, why they stop at the training length (8) | §4 `misfit_widget` (binary, Gray and sinusoidal codes; try $k = 3$, then 16) | `bit_counter` in class; `exact_offsets`, `gray_wave` at home |
# | 3 `03_sinusoids` | §1 the formula (10) → §2 heatmap (5) → §4 a shift by $k$ is one rotation $M_k$ (10) → §5 why a sine and a cosine (5) → §6 similarity vs distance, and when an attention score depends only on the offset (10); §3, §7–8 as reading | §2 `pe_widget`: d, length, base, layout; §6 `dot_widget`: base, range | `offset_from_codes` in class; `offset_only_score`, `slow_pairs` at home |
# | 4 `04_relative` | §1 the four terms of an absolute score (10) → §2 Shaw (10) → §3 Transformer-XL and its relative shift (10) → §4 T5 buckets: the formula and the last bucket (10); §5 DeBERTa, §6 one view, §7 the methods side by side as reading | §4 buckets, max distance, bidirectional | `xl_rel_shift`, `t5_rows_read` in class; `t5_last_bucket`, `deberta_tied_rows` at home |
# | 5 `05_rope` | §1 rotations (5) → §2 deriving RoPE in the complex plane (10) → §3 $R_m$ and the offset $n-m$ (5) → §4 q and k in every layer; v only if each output is rotated back (5) → §6 implementations, one or two forms (5) → §8 long-term decay (5) → §10 score pattern (5); §5 the worked example, §7, §9, §11 as reading | §8 `decay_widget`: d, base; §10 score map: d, base, start, angles in (with float32 angles the pattern survives a start of 100 000; with bf16 angles (bfloat16, a 16-bit float far coarser than float32) it breaks, §9's lesson) | `rope_undirected`, `rope_first_slow_pair` in class; `rope_tilted_frequencies` at home |
# | 6 `06_alibi` | §1 slopes (10) → §2 bias matrices (10) → §3 the $+m_h j$ shortcut (5) → §4 ALiBi inside attention and a first look at longer inputs (10) → §6 which encodings fit linear attention (5); §5, §7 and the end section *Going further* (read after chapter 7: ALiBi's trained models past their training length) as reading | §4 the last query's weights: input length, heads H | `ring_bias`, `alibi_shared_bias` in class; `one_row_bias`, `alibi_far_share` at home |
# | 7 `07_beyond` | §1 NoPE: the causal mask is a counter (10) → §2 why RoPE meets unseen angles past $L_0$, and PI, NTK, YaRN, Llama 3 (15) → §3 train short, test long: three tasks, three seeds, reading error bars; the attention of the trained models; the dictionary-moved control and the marks for this page's column 3 (15); §3's "Going further" asides (is YaRN's failure dilution, two more mechanisms, NoPE in a sliding window, how many orderings could be luck, the lookup gap and its 84 placements) as reading | §2 `scaling_widget` (the scale factor s, every method at once) | `counter_merge`, `stale_cache_pair` in class; `one_base_in_range` at home |
# | 8 `08_rope_in_models` | §1 read a config: the table and the wavelength figure (5) → §2 partial, decoupled (DeepSeek) and proportional RoPE, fast and slow pairs, Gemma 3's bases (10) → §3 attention factors of Phi-3 and DeepSeek-V3 (5) → §4 q and k, not v naively; the KV cache, double rotation and stale caches (10) → §5 iRoPE: the temperature, chunked RoPE layers and the extrapolation run (10); §6 (check your own RoPE: `posenc-inspect`, `diagnose_rope`) as reading | §2 `fraction_widget`: the fraction $p$ and the base, partial against proportional | `cache_rotations`, `deepseek_mscales` in class; `needle_scale`, `context_shift` at home |
# | 9 `09_beyond_1d` | §1 raster vs axial RoPE: the right and the lower neighbour, the (Δrow, Δcol) score map, then (t, h, w) (10) → §2 MRoPE: text at (p, p, p) is 1-D RoPE, the mixed-sequence ids and why they continue at max + 1, which pairs turn with which axis (10) → §3 CoPE: open gates give relative positions, gates on "." count sentences, what counting costs (10) → the flip-flop results (a task: each read must return the last bit written, past instructions to ignore) (10); errata as reading | §1 `grid_widget`: move the query patch, axial against raster; §2 `allocation_widget`: build an allocation; §3 `gate_widget`: the gate logits on full stops and on words | `previous_frame_head`, `two_counters` in class; `diagonal_head` at home |
# | A `10_making_it_fast` | reading only: the appendix on speed (loops vs vectorised calls, passes over memory, the C kernel, the Triton kernel under Triton's interpreter) | — | `tables_in_a_step`, `rotate_back_in_place` at home |
#
# A short course takes chapters 1, 3, 5 and 6 (and 7 if time allows), with chapter 2's §5, which chapter 3
# builds on; a single guest
# lecture on RoPE can take the slides of chapter 5 alone.


# %% [markdown] slideshow={"slide_type": "skip"}
# ## Appendix: the map with its evidence (read after chapter 9)
#
# This part uses the chapters' words and library functions. It repeats the map at a glance, with the
# same marks, to add the evidence: a few words for each entry, and below the table a short note per
# method. A chapter named in an entry is where the entry is tested; the few entries
# no chapter tests are checked in the cells for columns 1, 2, 3 and 5 after the notes, each right after a
# paragraph that says what it checks. The marks read as in the glance; column 3's, which chapter 7 gives, are
# listed at the end of this part. (ch. …) after a method's name lists the chapters that treat it. Where the five properties come
# from closes it.
#
# * **Column 1** asks whether one layer can tell positions apart: property 1, tested inside a layer.
#   - Example, without a mask: swap the keys one before and one after a query. Under RoPE the output
#     changes (✔); under symmetric ALiBi it does not, and on the palindrome "a b c b a" its mirror
#     positions get identical outputs (that form alone would get ~). Column 1's cell runs both.
#   - The rule: two different tokens, neither of them the query, trade places. Can the query's output
#     change? Without positions and without a mask it never can (chapter 1). ✔: every such swap of two
#     tokens the query sees can change its output, in every setting: with or without a
#     causal mask, with or without a LayerNorm before the layer (a LayerNorm removes each vector's mean and
#     scale). ~: only some swaps can, or only in some settings, under the condition the entry names. A
#     method whose far positions share one term (Shaw's clip, T5's buckets) gets at most ~; a code that
#     stops at a length (binary's $2^d$ positions, a learned table's `max_len`) has no position past it,
#     which column 3 counts. A ✔ needs one layer and one query on which every swap shows; the cells find
#     one, the middle query of 20 positions, so keys up to 10 away; farther than that the ✔ rests on an
#     argument where there is one, and for a random table, where a learned one starts, only on the range tested. For non-symmetric ALiBi that layer is its pair of heads
#     looking opposite ways: each alone misses the swaps its mask hides. For the sinusoids and RoPE the argument
#     is general: no two positions share pair 0's angle, as $\theta_0 = 1$ radian is no rational multiple
#     of $2\pi$, so before any normalisation the keys at two places always differ in what the head sees
#     (behind a LayerNorm, the 512-position check and the swap test back the mark). For ALiBi, distinct
#     distances get distinct biases, so keys at any two distances differ in what the head sees. A ✘ or ~ comes from
#     the method's structure (a LayerNorm erasing a constant code, mirror keys under symmetric ALiBi), the
#     same for every head and query.
#   - Limits. A code can be unique (property 1) and still get a ~: a LayerNorm erases the integer code
#     $i\cdot\mathbf 1$ and the normalised one. An RMSNorm, as in Llama, Qwen and Gemma, does not erase
#     them outright, but it divides by a spread that grows with $i$, so far positions come ever closer;
#     the ~ is graded for a LayerNorm. "Can" is about the method in exact arithmetic: the cells test 20
#     positions in float64; where a weight falls below what float64 shows (a far key under a steep ALiBi
#     slope, or the integer code's scores, which grow with $i \cdot j$ and saturate the softmax), that is a
#     question of numbers the map does not grade.
# * **Column 2** asks property 2 twice, of the codes (2a) and of the scores (2b).
#   - Example: the integer code has one affine map, $p_{i+k} = p_i + k\cdot\mathbf 1$ (2a ✔), yet a
#     head's score of positions $a$ and $b$ has a part that involves the positions alone,
#     $p_a^\top A\,p_b = ab\,(\mathbf 1^\top A\mathbf 1)$ ($A$ the
#     head's query-key matrix), which depends on the positions, not on $b - a$ (2b ✘). Under RoPE the score
#     of a query vector $u$ at $m$ and a key vector $v$ at $n$ is $(R_m u)^\top R_n v = u^\top R_{n-m}\,v$,
#     whatever the weights that made $u$ and $v$ (2b ✔; the conventions cell checks it on random ones).
#   - The rule. 2a: does one affine map take $p_i$ to $p_{i+k}$ at every position, the same map in a
#     sequence of any length? For RoPE the "code" is the rotation $R_m$, and $R_{m+k} = R_k R_m$ (the
#     conventions cell); relative terms and ALiBi have no code (–). 2b: for a head with any weights, does
#     every part of the score of a query at $i$ and a key at $i + k$ that involves positions involve them
#     only through $k$, wherever the pair stands? For an added code those parts are $p_i^\top A\,p_{i+k}$
#     and the cross terms of tokens with codes, such as $x_i^\top A\,p_{i+k}$. Shaw's term
#     $x_i W_Q\,(a^K_{k})^\top$ involves the query's token, but the positions only through $k$ (✔), as T5's
#     bias, ALiBi's and RoPE's $u^\top R_k\,v$ do. NoPE has neither codes nor a positional part of its
#     scores, so there is nothing to shift (–).
#   - Limits. An added code passes 2b only if it is the same at every position: a cross term
#     $x^\top A\,p_j$ with $A$ a single 1 in row $a$, column $b$ and $x$ the $a$-th unit vector reads
#     feature $b$ of $p_j$, so every feature must be the same at every $j$. Such a code carries no position
#     (✘ in column 1); no code here is one (column 2's cell). 2a does not give 2b: the sinusoids have the
#     map too, and a random head's position-only term $p_i^\top A\,p_{i+k}$ still moves with the
#     positions (column 2's cell).
# * **Column 3** has its rules beside its cell, below.
# * **Column 5** asks only for a fault that is new in n-D (property 5).
#   - Example: the map's 2-D ALiBi, a slope times the distance, gives the patch left of a query and the
#     one above it the same bias, a tie of two directions at a right angle that no 1-D form has (~).
#   - The rule: a fault the 1-D form already has counts in its own column. ~: the 2-D form has such a
#     fault, which the entry names (no row here loses the places themselves, which would be ✘). Unlike
#     column 3 it asks about the form, not a trained model: a fault of the form shows in its arithmetic,
#     so an entry needs no model run. It grades
#     one 2-D form per family; for learned absolute positions, ViT's table with one row per patch in raster
#     order. The relative terms are graded with one entry per 2-D offset, as in Swin (a vision transformer
#     that attends within windows of image patches). RoPE and the integer, normalised, binary and
#     sinusoidal codes take their **axial** form, each feature following one axis only, half of them the
#     row and half the column; the map leaves that form's mark to chapter 9 ([9]).
#
# | method | 1 told apart | 2a one map between codes | 2b scores offset-only | 3 longer sequences | 4 deterministic | 5 n-D: no *new* fault |
# |---|---|---|---|---|---|---|
# | none (NoPE) (ch. 1, 7, 8, 9) | ✘ one layer treats the tokens a query sees as a set; a causal mask only chooses which it sees (ch. 1); a second causal layer can tell order apart (ch. 1's summary) | – no code | – no positional part in the scores | [7] given after chapter 7 §3, after your prediction | – nothing to fix | ~ raster order gives one index (image patches in a causal decoder; argued from the index arithmetic, no model runs) |
# | integer $i\cdot\mathbf 1$ (ch. 2, 9) | ~ a LayerNorm erases it | ✔ affine: $p \mapsto p + k\cdot\mathbf 1$ | ✘ the positions-only part of a head's score of positions $a$, $b$ is $ab\,\mathbf 1^\top A\mathbf 1$ | ? not trained; its values grow without bound | ✔ | [9] axial: chapter 9 gives it after its Exercise 3 |
# | normalised $i/m$ (ch. 2, 9) | ~ a LayerNorm erases it | ✘ one map per length ($p_0$ is the same at every length, $p_3$ is not) | ✘ a random head's scores move with the positions | ? not trained; every code changes with the length, as position interpolation's angles do (chapter 7 §2) | ✔ | [9] axial: chapter 9 gives it after its Exercise 3 |
# | binary (ch. 2, 9) | ~ behind a LayerNorm $p_0$ and $p_{2^d-1}$ merge | ✘ no affine map for small $k$ | ✘ a random head's scores move with the positions | ? not trained; past $2^b$ positions a bit training never set | ✔ | [9] axial: chapter 9 gives it after its Exercise 3 |
# | sinusoidal (ch. 3, 7, 9) | ✔ even behind a LayerNorm (the swap test; and all 512 codes at $d = 16$ stay distinct after one) | ✔ a rotation $M_k$ | ✘ a random head's scores move with the positions (the plain dot product does not) | [7] given after chapter 7 §3 | ✔ | [9] axial: chapter 9 gives it after its Exercise 3 |
# | learned absolute (ch. 2, 7) | ? training decides (a random table, where it starts, passes) | ? training decides (a random table has none; chapter 2 §6's trained tables build much of one) | ✘ only a code equal at every position passes (column 2's rule) | ✘ no rows past `max_len`, and rows past the training length never trained | ✘ learned | ? training decides: on a fixed grid ViT's 1-D table learns the 2-D layout (Dosovitskiy et al. 2021, Fig. 7; 1-D and 2-D tables alike, App. D.4) |
# | relative: Shaw, T5 (ch. 4, 7) | ~ far offsets share one term: Shaw's clip, T5's buckets | – no code | ✔ one learned term per offset (or bucket) | [7] T5's, given after chapter 7 §3; no Shaw model trained | ✘ learned entries (a fixed rule picks which) | ✔ one term per 2-D offset |
# | RoPE (ch. 5, 7, 8, 9) | ✔ even without a mask | ✔ the rotations compose: $R_{m+k} = R_k R_m$ | ✔ the score is $u^\top R_{n-m}\,v$ for any weights | [7] given after chapter 7 §3 | ✔ | [9] axial: chapter 9 gives it after its Exercise 3 |
# | ALiBi (ch. 6, 7) | ✔ graded for the causal form (all 45 swaps of the keys that the middle of 20 queries sees under the mask change its output) and the non-symmetric encoder form (all 171 without a mask); the symmetric encoder form alone would get ~: without a mask, a key $k$ before and one $k$ after look alike | – no code | ✔ bias $-m_h(i-j)$ | [7] given after chapter 7 §3 | ✔ fixed slopes (a variant in source `003` learns them) | ~ left and above share a bias, a tie at a right angle no 1-D form has |
#
# The notes below add only what the table's entries leave out.
#
# **NoPE.** Column 1 grades the swap test only: if the first token carries a marker, a causal layer can
# still compute its own position, as $1/(i+1)$, the marker's share of a uniform average ([chapter 7](07_beyond.ipynb) §1, after Kazemnejad
# et al.'s Theorem 1): the position is not given, but it is not lost either. What a swap does to the other
# rows is chapter 1's Exercise 5.
#
# **Integer and normalised codes** ([chapter 2](02_integer_binary.ipynb) §1–2). The integer code is
# column 2's example; the normalised code's shift $+(k/m)\cdot\mathbf 1$ changes with the length $m$
# (column 2's cell for both).
#
# **Binary code.** Least squares finds exact affine maps at some $k \ge 2^{d-2}$; all but
# $k = 2^{d-1}$ come from the table's edge (it stops at $2^d - 1$): with the positions wrapped around
# (mod $2^d$) only $k = 2^{d-1}$ keeps a map, which flips the top bit (chapter 2's erratum 1; column 2's
# cell, $d$ = 4 to 6). So the mark is ✘: one map for one offset of the $2^d - 1$ is too little for a ~.
#
# **Learned absolute.** Nothing in the method asks for distinct rows or a shift map; training decides,
# so columns 1 and 2a leave it ungraded (?). The table where training starts, a random one, has rows distinct at any
# scale (column 1's cells run std 1 and std 0.02, transformers' start for BERT and GPT-2, which chapter 2
# §6 measures) and no affine
# map joins them (column 2's cell). What training then builds depends on the data. On chapter 2 §6's
# task, whose data repeat every 4 tokens, one wave that turns a quarter turn per position explains 65–85 %
# of the trained rows (5–7 % before training): one rotation carries that part from each row to the next,
# so there training built much of a shift map. One periodic task says little about what a table learns on
# other data, so the map grades no trained table. Past the training length the rows were
# never trained (column 3). In n-D, ViT's one row per patch in raster order (Dosovitskiy et al. 2021, §3.1; after a row
# for its class token) depends on the grid's width (column 5's cell), a fault of another grid size, as
# column 3's are of another length; ViT interpolates its table in 2-D when the grid changes (§3.2).
#
# **Relative terms.** Shaw's terms tell offsets apart up to the clip (chapter 4). T5's buckets give each
# distance below half their number its own bucket (16 of the decoder's 32), share each farther bucket
# among several distances, and put every distance from `max_distance` on in the last (column 1's cell runs
# T5's). In n-D the map grades Swin's form (Liu et al. 2021): one term per 2-D offset
# (column 5's cell).
#
# **RoPE.** Past its training length it meets angles it never saw: [chapter 7](07_beyond.ipynb) §2
# rescales them (PI, NTK, YaRN, Llama 3's) and §3 measures what that buys.
#
# **ALiBi.** The causal form is Press et al.'s; the non-symmetric encoder form is in source `003` (each
# head looks one way, half back and half ahead). In n-D
# the map grades a slope times the Euclidean distance, the form of CROMA's 2D-ALiBi (Fuller et al.,
# NeurIPS 2023; a citation, not run here).
#
# Not in the map: Transformer-XL (fixed sinusoids of the offset, unclipped) and DeBERTa (learned
# offsets, clipped in v1 and log-bucketed in v2/v3) put the offset into the scores as Shaw and T5 do; chapter 4 weighs them. LongRoPE
# (per-pair factors that stretch RoPE's frequencies) and Llama 4's iRoPE (RoPE layers interleaved with
# layers without positions) build on RoPE; chapter 8 weighs them. MRoPE (one RoPE for text, images and
# video in one sequence, its pairs split between time, row and column) builds on RoPE too. Chapter 9
# weighs it and CoPE (positions counted by learned gates, not by tokens).
#
# **Column 5: the axial rows.** For RoPE and the sinusoids, each pair of the axial form turns with one axis (column 5's cell,
# for RoPE). Whether that adds a 2-D fault is chapter 9's Exercise 3, left
# to it on purpose; [chapter 9](09_beyond_1d.ipynb) answers it right after ("After Exercise 3: the additive
# codes") and gives the mark, for axial RoPE and for every code added to the token, with the setting it
# grades. Chapter 9's other 2-D forms are not graded in the map.
#
# **Where the map disagrees with source `001`.** `001` gives the integer code properties 1 to
# 4 and binary codes properties 1 and 2. For the integer code and property 1, the map's ~ is the
# LayerNorm that erases it (its entry). `001` adds its code to inputs that, it says, a
# LayerNorm has usually already processed, with no LayerNorm after the sum, and there its ✔
# stands: the difference is the map's stricter rule, which grades a LayerNorm after the sum too, not an
# error in `001`. For binary codes and property 1 the map's ~ is, likewise, the LayerNorm that merges
# $p_0$ and $p_{2^d-1}$ (its entry), which `001` does not put after the sum. For binary codes and property 2 see chapter 2's
# erratum 1: least squares finds no affine map for small offsets. For the integer code and
# property 3, `001` gives the ✔ without a reason. The map leaves it untested (?), as no model with an
# integer code is trained here, and notes that the values grow without bound: position 1000 of a
# 64-wide model is a vector of length 8000, far beyond anything a model trained on short sequences has
# seen (chapter 2 measures it against a layer-normalised token).

# %% [markdown] slideshow={"slide_type": "skip"}
# **Column 1, checked in the next four cells.** First, what a LayerNorm merges. It subtracts each
# vector's mean over its features and divides by its spread, so it merges two positions for every token
# exactly when their codes differ by the same number in every feature; the cell compares the codes with
# their means removed. Sinusoids ($d = 16$) keep all 512 positions apart, and so do the rows of a random
# table, where a learned one starts; the integer code keeps one. Binary codes of $d$ = 4, 5 and 6 bits
# keep $2^d - 1$ of their $2^d$ positions (15, 31 and 63): the all-zero $p_0$ and the all-one
# $p_{2^d-1}$ merge. The first $2^d$ positions take every one of the $2^d$ codes of $d$ bits, so
# position $2^d$ has none of its own; 17 bits already give each of Llama 3.1's 131 072 positions a code
# of its own, before a LayerNorm (behind one, $p_0$ and the last merge).

# %% slideshow={"slide_type": "skip"}
# Column 1 (i): what a LayerNorm merges
def kept_apart(codes):
    """How many positions a LayerNorm keeps apart: distinct codes once each one's mean is removed."""
    centred = codes.double() - codes.double().mean(-1, keepdim=True)
    return torch.unique(torch.round(centred * 1e6), dim=0).shape[0]


assert kept_apart(pl.sinusoidal_positions(512, 16, dtype=torch.float64)) == 512
assert kept_apart(torch.randn(512, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)) == 512
assert {d: kept_apart(pl.binary_positions(2**d, d)) for d in (4, 5, 6)} == {4: 15, 5: 31, 6: 63}
assert kept_apart(pl.integer_positions(64, 8)) == 1  # the integer code: every position merges
bits = pl.binary_positions(2**4, 4)
assert torch.unique(bits, dim=0).shape[0] == 16 and set(bits.unique().tolist()) == {0, 1}  # all 16 codes of 4 bits
assert 2**16 < 131_072 <= 2**17  # 17 bits are enough for a 131 072-token context, 16 are not
print("a LayerNorm keeps apart: sinusoids 512 of 512; binary, 4/5/6 bits:",
      {d: kept_apart(pl.binary_positions(2**d, d)) for d in (4, 5, 6)})

# %% [markdown] slideshow={"slide_type": "skip"}
# **The swap test behind a LayerNorm**, on a random head with 20 positions. For the sinusoids, for random
# tables (std 1, and std 0.02 as transformers starts BERT's and GPT-2's) and for RoPE,
# each of the 171 swaps of two tokens a query sees changes its output, for the middle query without a
# mask, and each of the 45 for the same query under a causal mask, where it sees only the 10 tokens
# before it. ALiBi: all 45 under the mask; symmetric, without one, 162, the 9 swaps of mirror pairs (a
# key $k$ before and one $k$ after) leaving it as it was. With the integer code or no code, no swap
# does, with or without the mask (the control), and neither does the normalised code. A binary code of
# 16 bits on these 20 positions changes every one, both ways: its two merging codes, $p_0$ and
# $p_{2^{16}-1}$, are not both there. With 4 bits on 16 positions they are: of the 105 swaps the query
# at 8 sees, the one of positions 0 and 15 leaves its output as it was. An RMSNorm in place of the LayerNorm divides by the spread without
# subtracting the mean: with it the integer and normalised codes change all 171 and all 45 here. It still
# squeezes the integer code: for one token, positions 1 and 2 land 0.96 apart after it, positions 100
# and 101 less than $10^{-3}$ (with a zero token, every position from 1 on lands on the same vector).

# %% slideshow={"slide_type": "skip"}
# Column 1 (ii): the swap test behind a LayerNorm, 20 positions, the middle query
def swaps_that_keep(head, query, causal, n=20):
    """The swaps of two tokens the query sees (not itself) that leave its output as it was; head(x, causal) -> (n, 16)."""
    x = torch.randn(n, 16, generator=torch.Generator().manual_seed(3), dtype=torch.float64)  # 20 different tokens
    seen = [p for p in range(query + 1 if causal else n) if p != query]
    before, kept = head(x, causal)[query], []
    for i, a in enumerate(seen):
        for b in seen[i + 1:]:
            order = list(range(n))
            order[a], order[b] = b, a
            if torch.allclose(head(x[order], causal)[query], before, rtol=0, atol=1e-9):
                kept.append((a, b))
    return kept


wq_s, wk_s, wv_s = torch.randn(3, 16, 16, generator=torch.Generator().manual_seed(4), dtype=torch.float64) / 4
ln = lambda x: torch.nn.functional.layer_norm(x, (16,))  # noqa: E731  a LayerNorm before the head, in every case


def added(codes):
    """A random head reading LayerNorm(token + code)."""
    return lambda x, causal: pl.attention(*(ln(x + codes) @ w for w in (wq_s, wk_s, wv_s)), causal=causal)[0]


def rope_head(x, causal):
    return pl.attention(pl.apply_rope(ln(x) @ wq_s), pl.apply_rope(ln(x) @ wk_s), ln(x) @ wv_s, causal=causal)[0]


def alibi_head(x, causal):  # the causal form under a mask, the symmetric form without one
    bias = pl.alibi_bias(1, 20, mode="causal" if causal else "symmetric", slopes=torch.tensor([0.5]), dtype=torch.float64)[0]
    return pl.attention(ln(x) @ wq_s, ln(x) @ wk_s, ln(x) @ wv_s, bias=bias)[0]


swap_heads = {"sinusoidal": added(pl.sinusoidal_positions(20, 16, dtype=torch.float64)),
              "random table": added(torch.randn(20, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)),
              "std 0.02 table": added(0.02 * torch.randn(20, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)),
              "RoPE": rope_head, "ALiBi": alibi_head,
              "integer": added(pl.integer_positions(20, 16).double()), "none": added(torch.zeros(20, 16, dtype=torch.float64)),
              "normalised": added((torch.arange(20, dtype=torch.float64) / 20)[:, None].expand(20, 16)),
              "binary": added(pl.binary_positions(20, 16).double())}
kept = {name: (swaps_that_keep(h, 10, False), swaps_that_keep(h, 10, True)) for name, h in swap_heads.items()}
swap_counts = {name: (171 - len(a), 45 - len(b)) for name, (a, b) in kept.items()}
print("swaps that change the middle query's output, (of 171, no mask), (of 45, causal):", swap_counts)
assert swap_counts == {"sinusoidal": (171, 45), "random table": (171, 45), "std 0.02 table": (171, 45), "RoPE": (171, 45),
                       "ALiBi": (162, 45), "integer": (0, 0), "none": (0, 0), "normalised": (0, 0), "binary": (171, 45)}
assert kept["ALiBi"][0] == sorted((10 - k, 10 + k) for k in range(1, 10))  # symmetric ALiBi keeps exactly the mirror pairs

rms = lambda x: x / x.pow(2).mean(-1, keepdim=True).sqrt()  # noqa: E731  an RMSNorm: no mean subtracted
rms_heads = {name: (lambda x, causal, c=c: pl.attention(*(rms(x + c) @ w for w in (wq_s, wk_s, wv_s)), causal=causal)[0])
             for name, c in (("integer", pl.integer_positions(20, 16).double()),
                             ("normalised", (torch.arange(20, dtype=torch.float64) / 20)[:, None].expand(20, 16)))}
rms_counts = {name: (171 - len(swaps_that_keep(h, 10, False)), 45 - len(swaps_that_keep(h, 10, True)))
              for name, h in rms_heads.items()}
print("with an RMSNorm instead:", rms_counts)
assert rms_counts == {"integer": (171, 45), "normalised": (171, 45)}
tok = torch.randn(16, generator=torch.Generator().manual_seed(5), dtype=torch.float64)  # one token, std 1
gap = lambda t, i: (rms(t + i) - rms(t + i + 1)).norm().item()  # noqa: E731  positions i and i + 1 after an RMSNorm
assert round(gap(tok, 1), 2) == 0.96 and gap(tok, 100) < 1e-3 and gap(torch.zeros(16, dtype=torch.float64), 5) < 1e-12
bits4 = pl.binary_positions(16, 4).double().repeat(1, 4)  # 4 bits on 16 positions, each bit on 4 features
assert swaps_that_keep(added(bits4), 8, False, n=16) == [(0, 15)]  # binary's two merging codes: the one swap kept
print("binary, 4 bits on 16 positions behind a LayerNorm, the swaps that leave the query at 8 as it was:",
      swaps_that_keep(added(bits4), 8, False, n=16))

# %% [markdown] slideshow={"slide_type": "skip"}
# **Without the LayerNorm.** The sinusoids, the random table and RoPE again change the output on every
# swap, both ways, and causal ALiBi under its mask. The non-symmetric ALiBi encoder form, two heads
# looking one way each, changes all 171, with and without the LayerNorm, though each head alone misses
# the swaps its own mask hides from the query: 36 of them for the head that looks back (9 keys ahead,
# $\binom{9}{2}$ pairs), 45 for the one that looks ahead (10 keys back). That is the mask's doing, not the
# slopes'. Nothing then merges the integer code's positions, but its scores grow with $i \cdot j$ and
# saturate the softmax. On this one head (one draw of weights) the middle query, at position 10, puts all
# but $10^{-7}$ of its weight on the last key, 19, without a mask, and on itself under the mask; every key
# but 18 and 19 (under the mask, but 9) gets less than $10^{-18}$. So only the swaps that move key 18 or 19
# change its output by more than $10^{-9}$ in float64: 35 of the 171 (under the mask, those that move key 9:
# 9 of the 45). A question of numbers the map does not grade (chapter 2 §1 weighs the code's size).

# %% slideshow={"slide_type": "skip"}
# Column 1 (iii): the same heads without the LayerNorm
def raw(codes, w=(wq_s, wk_s, wv_s)):
    """The same kind of head without the LayerNorm: token + code straight in."""
    return lambda x, causal: pl.attention(*((x + codes) @ m for m in w), causal=causal)[0]


def rope_raw(x, causal):
    return pl.attention(pl.apply_rope(x @ wq_s), pl.apply_rope(x @ wk_s), x @ wv_s, causal=causal)[0]


def changed(head):
    """How many swaps change the middle query's output: (of 171, no mask), (of 45, causal)."""
    return 171 - len(swaps_that_keep(head, 10, False)), 45 - len(swaps_that_keep(head, 10, True))


for codes in (pl.sinusoidal_positions(20, 16, dtype=torch.float64),
              torch.randn(20, 16, generator=torch.Generator().manual_seed(1), dtype=torch.float64)):
    assert changed(raw(codes)) == (171, 45)  # without the LayerNorm too
assert changed(rope_raw) == (171, 45)
nonsym = pl.alibi_bias(2, 20, mode="nonsymmetric", dtype=torch.float64)  # head 1 looks back, head 2 ahead
ahead = torch.ones(20, 20, dtype=torch.bool).triu(1)  # keys after the query
assert torch.equal(torch.isinf(nonsym[0]), ahead) and torch.equal(torch.isinf(nonsym[1]), ahead.T)  # one way each
one_way = [lambda x, causal, h=h: pl.attention(ln(x) @ wq_s, ln(x) @ wk_s, ln(x) @ wv_s, bias=nonsym[h])[0]
           for h in range(2)]
both_ways = lambda x, causal: torch.cat([f(x, causal) for f in one_way], dim=-1)  # noqa: E731  the layer's two heads
assert 171 - len(swaps_that_keep(both_ways, 10, False)) == 171  # non-symmetric ALiBi, no mask: every swap shows
assert [171 - len(swaps_that_keep(f, 10, False)) for f in one_way] == [171 - math.comb(9, 2), 171 - math.comb(10, 2)]  # each head alone misses exactly the swaps among the keys its mask hides
x20 = torch.randn(20, 16, generator=torch.Generator().manual_seed(3), dtype=torch.float64)  # the swap test's tokens
ints20 = pl.integer_positions(20, 16).double()
weights, masked = (pl.attention(*((x20 + ints20) @ w for w in (wq_s, wk_s, wv_s)), causal=c)[1][10]  # the integer code,
                   for c in (False, True))  # no LayerNorm: the middle query's weights, without and with the mask
assert 1 - weights[19] < 1e-7 and weights[:18].max() < 1e-18  # no mask: all on the last key (a little on 18)
assert 1 - masked[10] < 1e-7 and masked[:9].max() < 1e-18  # mask: all on itself (a little on key 9)
seen20 = [p for p in range(20) if p != 10]
pairs20 = {(a, b) for i, a in enumerate(seen20) for b in seen20[i + 1:]}  # the 171 swaps without a mask
assert pairs20 - set(swaps_that_keep(raw(ints20), 10, False)) == {(a, b) for a, b in pairs20 if {a, b} & {18, 19}}
assert {(a, b) for a in range(10) for b in range(a + 1, 10)} - set(swaps_that_keep(raw(ints20), 10, True)) == {
    (a, 9) for a in range(9)}  # under the mask: only the swaps that move key 9
assert changed(raw(ints20)) == (35, 9)  # the middle query: most swaps move it by less than 1e-9
causal_raw = lambda x, causal: pl.attention(x @ wq_s, x @ wk_s, x @ wv_s, bias=pl.alibi_bias(  # noqa: E731
    1, 20, slopes=torch.tensor([0.5]), dtype=torch.float64)[0])[0]  # causal ALiBi without the LayerNorm
assert changed(causal_raw)[1] == 45
raw_both = lambda x, causal: torch.cat([pl.attention(x @ wq_s, x @ wk_s, x @ wv_s, bias=nonsym[h])[0]  # noqa: E731
                                        for h in range(2)], dim=-1)  # non-symmetric ALiBi without the LayerNorm
assert 171 - len(swaps_that_keep(raw_both, 10, False)) == 171
print("without a LayerNorm, (of 171, no mask), (of 45, causal): sinusoids", changed(raw(pl.sinusoidal_positions(
    20, 16, dtype=torch.float64))), "RoPE", changed(rope_raw), "· non-symmetric ALiBi, both heads:",
      171 - len(swaps_that_keep(raw_both, 10, False)), "each head alone:",
      [171 - len(swaps_that_keep(f, 10, False)) for f in one_way])
print("integer code, no LayerNorm: the middle query's weight on key 19 (no mask) and on itself (mask) within 1e-7 of 1:",
      bool(1 - weights[19] < 1e-7), bool(1 - masked[10] < 1e-7), "· swaps that move its output:", changed(raw(ints20)))

# %% [markdown] slideshow={"slide_type": "skip"}
# **Two small cases, without a mask and with one.** A symmetric ALiBi head (a random one): swapping the
# tokens one before and one after the middle query leaves its output as it was; on the palindrome
# "a b c b a" its mirror positions (0 and 4, 1 and 3) tie and no other pair does. The same head with RoPE
# instead: the swap changes the query's output, and no pair of the palindrome ties. Then T5's decoder
# buckets (one-directional, 32 of them, `max_distance` 128) give every past distance below 16 its own
# bucket and put 16, 17 and 18 in one, far short of 128: under a causal mask, the keys 16 and 18 before a
# query trade places without changing its output; those 14 and 15 before it do change it.

# %% slideshow={"slide_type": "skip"}
# Column 1 (iv): symmetric ALiBi and RoPE on five tokens; T5's shared buckets
g = torch.Generator().manual_seed(1)
sym_bias = pl.alibi_bias(1, 5, mode="symmetric", slopes=torch.tensor([0.5]), dtype=torch.float64)[0]  # -0.5 |i - j|
wq_a, wk_a, wv_a = torch.randn(3, 8, 8, generator=g, dtype=torch.float64) / 8**0.5  # a random head, d = 8
tokens = torch.randn(5, 8, generator=g, dtype=torch.float64)  # five different tokens
swap = [0, 3, 2, 1, 4]  # the tokens one before and one after the query at position 2 trade places
alibi = lambda x: pl.attention(x @ wq_a, x @ wk_a, x @ wv_a, bias=sym_bias)[0]  # noqa: E731
rope = lambda x: pl.attention(pl.apply_rope(x @ wq_a), pl.apply_rope(x @ wk_a), x @ wv_a)[0]  # noqa: E731
torch.testing.assert_close(alibi(tokens[swap])[2], alibi(tokens)[2])  # ALiBi: the query at 2 cannot tell
assert not torch.allclose(rope(tokens[swap])[2], rope(tokens)[2], atol=1e-3)  # RoPE: it can
palindrome = tokens[[0, 1, 2, 1, 0]]  # tokens a b c b a
ties = lambda out: {(a, b) for a in range(5) for b in range(a + 1, 5) if torch.allclose(out[a], out[b])}  # noqa: E731
assert ties(alibi(palindrome)) == {(0, 4), (1, 3)}  # of the 10 pairs of positions, exactly the two mirror pairs
assert ties(rope(palindrome)) == set()  # RoPE: no ties
print("palindrome a b c b a, pairs of positions with equal outputs: ALiBi", sorted(ties(alibi(palindrome))),
      "RoPE", sorted(ties(rope(palindrome))))
t5_near = pl.t5_relative_bucket(-torch.arange(20), bidirectional=False, num_buckets=32, max_distance=128)
assert t5_near[16] == t5_near[17] == t5_near[18] and len(set(t5_near[:16].tolist())) == 16  # shared from 16 on, far short of 128
t5_far = pl.t5_relative_bucket(-torch.arange(1000), bidirectional=False, num_buckets=32, max_distance=128)
assert (torch.bincount(t5_far[:128])[16:] >= 2).all() and (t5_far[128:] == 31).all()  # farther buckets shared; the last from 128 on
print("T5 (32 buckets, max_distance 128), buckets of distances 14 to 19:", t5_near[14:].tolist())
g5 = torch.Generator().manual_seed(2)
t5_bias = torch.randn(32, generator=g5, dtype=torch.float64)[  # one learned term per bucket, key minus query
    pl.t5_relative_bucket(pl.relative_positions(20), bidirectional=False, num_buckets=32, max_distance=128)]
t5 = lambda x: pl.attention(x @ wq_a, x @ wk_a, x @ wv_a, causal=True, bias=t5_bias)[0]  # noqa: E731
seq = torch.randn(20, 8, generator=g5, dtype=torch.float64)  # 20 different tokens; the query is the last, 19
far, near = [0, 3, 2, 1] + list(range(4, 20)), list(range(4)) + [5, 4] + list(range(6, 20))
torch.testing.assert_close(t5(seq[far])[19], t5(seq)[19])  # distances 18 and 16 trade places: one bucket, no change
assert not torch.allclose(t5(seq[near])[19], t5(seq)[19], atol=1e-3)  # distances 15 and 14: two buckets, a change
print("T5, last query: output unchanged when the keys 18 and 16 back trade places:",
      torch.allclose(t5(seq[far])[19], t5(seq)[19]), "· when 15 and 14 back do:",
      torch.allclose(t5(seq[near])[19], t5(seq)[19], atol=1e-3))


# %% [markdown] slideshow={"slide_type": "skip"}
# **Column 2, checked in the next cell.** Several checks use `pl.affine_shift_residual(table, k)`
# (chapter 2 builds it): it fits one matrix and one vector by least squares to every pair
# $(p_i, p_{i+k})$ of a table at once and returns the error left over; 0 means one affine map moves
# every position $k$ steps. The integer code: a random head's $p_i^\top A\,p_{i+3}$ over
# $i = 0 \dots 59$ is $i(i+3)\,\mathbf 1^\top A\mathbf 1$, so it moves with $i$ though one affine map
# joins the codes. The normalised code: within a length of 16 or of 32 an exact affine shift by
# $(3/m)\cdot\mathbf 1$, a different one for each length. A learned table: an affine map
# $[p_i, 1] \mapsto p_{i+k}$ has $d+1$ numbers per output feature to fit and the table offers $n-k$
# pairs. So with $d+1$ pairs or fewer least squares fits almost any table exactly, and the test says
# nothing. Over more pairs a random table has no such map. Last, column 2b for every row with a code: the
# same random head's score of positions $i$ and $i + 3$, over $i = 0 \dots 59$, moves with $i$ for the
# integer, normalised, binary and sinusoidal codes and for a random table; ALiBi's bias and a relative
# term per offset give every pair 3 apart the same value.

# %% slideshow={"slide_type": "skip"}
# Column 2: the integer code's scores, the normalised code's one map per length, a random table
A = torch.randn(8, 8, generator=torch.Generator().manual_seed(5), dtype=torch.float64)  # a random head's W_q^T W_k
ints = pl.integer_positions(64, 8).double()  # p_i = i * 1
three_apart = torch.stack([ints[i] @ A @ ints[i + 3] for i in range(60)])  # p_i^T A p_(i+3), i = 0 .. 59
assert pl.affine_shift_residual(ints, 3) < 1e-9  # one affine map between codes 3 apart ...
torch.testing.assert_close(three_apart, torch.arange(60.0, dtype=torch.float64) * torch.arange(3.0, 63.0, dtype=torch.float64) * A.sum())
assert three_apart.max() - three_apart.min() > 100 * A.sum().abs()  # ... yet the score moves with i: i (i + 3) 1^T A 1
sines = pl.sinusoidal_positions(64, 8, dtype=torch.float64)  # the sinusoids: one rotation M_3 maps them ...
sine_scores = torch.stack([sines[i] @ A @ sines[i + 3] for i in range(60)])
assert pl.affine_shift_residual(sines, 3) < 1e-9 and sine_scores.max() - sine_scores.min() > 1  # ... scores move too
plain = torch.stack([sines[i] @ sines[i + 3] for i in range(60)])  # A = I: the plain dot product (chapter 3 §6)
assert plain.max() - plain.min() < 1e-12  # depends on the offset alone: only a special head is offset-only

steps = {}
for m in (16, 32):  # the normalised code i/m for two lengths
    normalised = (torch.arange(m, dtype=torch.float64) / m)[:, None].expand(m, 8)
    assert pl.affine_shift_residual(normalised, 3) < 1e-9  # within one length: an exact affine shift ...
    steps[m] = (normalised[3] - normalised[0])[0].item()
assert steps == {16: 3 / 16, 32: 3 / 32}  # ... by (k/m) 1, a different map for each length
# no single affine map serves both lengths: p_0 = 0 at both, but its image p_3 is 3/16 at one and 3/32 at the other
codes = {m: (torch.arange(m, dtype=torch.float64) / m)[:, None].expand(m, 8) for m in (16, 32)}
assert torch.equal(codes[16][0], codes[32][0]) and not torch.equal(codes[16][3], codes[32][3])

tall = torch.randn(64, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)  # a random table: 64 positions, d = 8
exact = [k for k in range(1, 64) if pl.affine_shift_residual(tall, k) < 1e-9]
assert exact == list(range(64 - 9, 64))  # no affine map while n - k > d + 1 = 9 pairs; one fits at every k after
print(f"random 64 x 8 table: an exact affine map only for k = {exact[0]} to 63 (n - k <= d + 1 = 9)")
first_binary = {d: next(k for k in range(1, 2**d) if pl.affine_shift_residual(pl.binary_positions(2**d, d).double(), k)
                        < 1e-9) for d in (4, 5, 6)}
assert first_binary == {d: 2 ** (d - 2) for d in (4, 5, 6)}  # binary codes: none below 2^(d-2), one at it ...
wrapped = {d: [k for k in range(1, 2**d) if pl.affine_shift_residual(
    pl.binary_positions(2**d, d).double().repeat(2, 1)[: 2**d + k], k) < 1e-9] for d in (4, 5, 6)}
assert wrapped == {d: [2 ** (d - 1)] for d in (4, 5, 6)}  # ... the edge's doing: wrapped mod 2^d, only 2^(d-1)

column_2b = {"integer": ints, "normalised": (torch.arange(64, dtype=torch.float64) / 64)[:, None].expand(64, 8),
             "binary": pl.binary_positions(64, 8).double(), "sinusoidal": sines, "random table": tall}
spread_2b = {name: (lambda sc: (sc.max() - sc.min()).item())(torch.stack([c[i] @ A @ c[i + 3] for i in range(60)]))
             for name, c in column_2b.items()}  # the spread of p_i^T A p_(i+3) over i
assert min(spread_2b.values()) > 0.1  # every code: the score of two positions 3 apart moves with where they stand
alibi_3 = pl.alibi_bias(1, 64, dtype=torch.float64)[0].diagonal(-3)  # ALiBi: query i + 3, key i (3 back), every i
relative_3 = torch.randn(127, generator=torch.Generator().manual_seed(6), dtype=torch.float64)[
    pl.relative_positions(64) + 63].diagonal(-3)  # one learned term per offset j - i: the same lookup
assert alibi_3.unique().numel() == 1 and relative_3.unique().numel() == 1  # one value for every pair 3 apart
assert all((c != c[0]).any() for c in column_2b.values())  # no code is the same at every position
print("column 2b, a random head's score of positions 3 apart moves by more than 0.1 with where they stand:",
      sorted(spread_2b), "· ALiBi and a per-offset term: one value:", alibi_3.unique().numel() == relative_3.unique().numel() == 1)


# %% [markdown] slideshow={"slide_type": "skip"}
# **Column 3, checked in the next cell.** Example: chapter 2's learned table keeps its rows 32 to 63,
# past its training length of 32, at their initial values, and its model is right inside the training
# length and mostly wrong past it: ✘. Three rules, one for every row:
#
# * ✘ where a chapter measures the failure, as there.
# * [7] where [chapter 7](07_beyond.ipynb) §3's train-short, test-long experiment trains the method:
#   NoPE, sinusoidal, RoPE, ALiBi and, for the relative row, T5. (It trains learned positions too, whose
#   table has no rows past the training length, so they cannot run there; their ✘ is the rule above.)
#   Its "Predict first" asks for these marks before the measurement; right after its summary ("For the
#   index's map"), chapter 7 gives them by a rule it states, with their seeds and controls.
# * ? where no model is trained (the integer, normalised and binary codes): each meets values training
#   never showed, as the cell asserts, but whether a model fails on them is not measured here. An integer code 1000 tokens in has length 8000 in a 64-wide model; past a training length
#   of $2^b$ positions, bit $b$ turns on, a value training never showed; a normalised code gives every
#   position but 0 a new code at a new length.

# %% slideshow={"slide_type": "skip"}
# Column 3: the rows no model is trained for
at16, at32 = torch.arange(16) / 16, torch.arange(16) / 32  # the normalised code of positions 0..15 at two lengths
assert at16[0] == at32[0] and (at16[1:] != at32[1:]).all()  # every position but 0 gets a new code
assert pl.integer_positions(1001, 64)[1000].norm() == 1000 * 64**0.5 == 8000  # ||p_i|| = i sqrt(d)
longer = pl.binary_positions(2**4 + 1, 5)  # 5 bits; trained on positions 0 .. 15, then position 16
assert longer[:16, 0].eq(0).all() and longer[16, 0] == 1  # bit 4 (the first column): never on in training, on at 16
print("untrained rows: integer code, d = 64: ||p_1000|| =", int(pl.integer_positions(1001, 64)[1000].norm()),
      "| binary, 5 bits: bit 4 first set at position", int(longer[:, 0].nonzero()[0]))


# %% [markdown] slideshow={"slide_type": "skip"}
# **Column 5, checked in the next cell**, for the rows it grades here. A relative bias with one entry per 2-D
# offset (key minus query, in rows and in columns) reads four different entries of its table for the
# patches left, right, above and below a query, the same four for another query. The map's 2-D ALiBi (a
# slope times the distance) gives all four one bias: the patch to the left and the one above tie, two
# directions at a right angle, which no 1-D form has (the symmetric 1-D form's tie of one key before and
# one after is column 1's).
# Axial RoPE (`pl.apply_rope_2d`, $d = 8$): moving a query to another column leaves the row's half of
# its features as it was, moving it to another row the column's half. Last, the two raster-order rows, two counts the cell
# shows by arithmetic (no model runs). NoPE's causal mask can give a patch at most its raster index $r\,W + c$ ($W$ the grid's width): on a
# 4 × 4 grid the last patch of row 0 and the first of row 1 get neighbouring indices 3 and 4, though they
# stand a row and 3 columns apart, while the first patch of row 0 and the one right below it are 4 indices apart.
# A learned table with one row
# per raster index reads, for the patch at row 1, column 0, raster index 4 on a 4-wide grid and 6 on a
# 6-wide one (ViT's table holds one more row first, for its class token): the same place in the image,
# another row: a fault when the grid's size changes, not on a fixed grid, where training decides (?).

# %% slideshow={"slide_type": "skip"}
# Column 5: 2-D offsets (relative, ALiBi), axial RoPE, raster order (NoPE, learned)
g = torch.Generator().manual_seed(3)  # this cell's own draws: it runs the same alone
rows, cols = torch.meshgrid(torch.arange(4), torch.arange(4), indexing="ij")  # a 4 x 4 grid of patches
place = torch.stack([rows.flatten(), cols.flatten()], dim=-1)  # (16, 2): patch -> (row, column)
offset = place[None, :] - place[:, None]  # (query, key, 2): key minus query, as in 1-D
table = torch.randn(7, 7, generator=g, dtype=torch.float64)  # one bias per offset, -3..3 in each axis
relative_2d = table[offset[..., 0] + 3, offset[..., 1] + 3]  # (16, 16)
alibi_2d = -0.5 * offset.double().norm(dim=-1)  # slope 0.5 times the distance
query, around = 5, (4, 6, 1, 9)  # patch (1, 1); its left, right, upper and lower neighbours (4, 1: the past)
assert len({tuple(offset[query, k].tolist()) for k in around}) == 4  # four directions, four entries of the table
assert torch.equal(relative_2d[query, list(around)], relative_2d[10, [9, 11, 6, 14]])  # patch (2, 2): the same four
assert len({alibi_2d[query, k].item() for k in around}) == 1  # four directions, one bias
print("relative bias per 2-D offset, left/right/up/down:", [round(relative_2d[query, k].item(), 2) for k in around])
print("2-D ALiBi (distance), left/right/up/down:", [alibi_2d[query, k].item() for k in around])

q8 = torch.randn(1, 8, generator=g, dtype=torch.float64)  # one query, d = 8: features 0-3 the row's, 4-7 the column's
at = lambda r, c: pl.apply_rope_2d(q8, torch.tensor([r]), torch.tensor([c]))[0]  # noqa: E731  the query at (r, c)
assert torch.allclose(at(2, 3)[:4], at(2, 7)[:4]) and torch.allclose(at(2, 3)[4:], at(6, 3)[4:])  # one axis each
assert not torch.allclose(at(2, 3)[4:], at(2, 7)[4:]) and not torch.allclose(at(2, 3)[:4], at(6, 3)[:4])
raster = lambda r, c, width: r * width + c  # noqa: E731  the index a causal mask can count to, row by row
assert (raster(0, 3, 4), raster(1, 0, 4)) == (3, 4)  # 3 columns apart, adjacent indices
assert raster(1, 0, 4) - raster(0, 0, 4) == 4  # right below: 4 indices apart
assert raster(1, 0, 4) != raster(1, 0, 6)  # a learned row per raster index: the same patch, rows 4 and 6
print("raster index of the patch at row 1, column 0, on a 4- and a 6-wide grid:", raster(1, 0, 4), raster(1, 0, 6))


# %% [markdown] slideshow={"slide_type": "skip"}
# **After chapter 7: the marks it gives.** This gives away what chapter 7 asks you to
# predict: read it once you have made your guesses. Column 3, by chapter 7 §3's rule (a method keeps a
# task when its mean over three seeds at 512 tokens, eight times the training length of 64, is within 0.1
# of its mean at 64; ✔ if it keeps all three tasks, ✘ if none, ~ otherwise): sinusoidal ✘, RoPE ✘, ALiBi
# ~, T5 ~, NoPE ~. A task is kept against the method's own mean at 64, which is at least six times uniform
# chance for every method (1/16 for the grammar's next token, 1/8 for a lookup's value; uniform chance is a floor,
# not the best a reader blind to position can do); nor
# do the tasks simply get harder at 512: ALiBi keeps the grammar, and T5 both lookups, each mean falling by
# less than 0.01. NoPE keeps the two lookups, which one content match solves with no positions (chapter 7
# §3's tasks), and loses a grammar it had reached only 0.43 on. Four marks are firm seed by seed: sinusoids
# and RoPE lose every task by more than 0.4 in every seed; ALiBi keeps the grammar within 0.01 and loses
# each lookup by more than 0.2 in every seed; NoPE loses the grammar by more than 0.1 and keeps recall in
# every seed, and recall_anywhere in two (seed 1 falls 0.125).
# T5's ~ rests on one seed: its grammar falls by 0.07, 0.28 and 0.09, kept by two seeds, lost on the
# mean (0.15). T5's and NoPE's marks also rest on the 0.1: every threshold from 0.06 to 0.14 gives these
# marks; above, T5 gets ✔; below, NoPE gets ✘ (chapter 7 scans them).
#
# Column 5's axial marks: chapter 9 grades them after its Exercise 3. The cell recomputes column 3 from chapter 7's stored run (`results/extrapolation.json`).

# %% slideshow={"slide_type": "skip"}
# After chapter 7: column 3 from its stored run
from posenc_lib.experiments import extrapolation as ex  # noqa: E402

runs = ex.load_results()  # results/extrapolation.json
cfg = runs["config"]
assert (cfg["train_len"], cfg["train_len"] * max(cfg["eval_multiples"]), len(cfg["seeds"]), len(runs["tasks"])) == (
    64, 512, 3, 3)
fall = {m: [ex.accuracy(runs, t, m)[64]["mean"] - ex.accuracy(runs, t, m)[512]["mean"] for t in runs["tasks"]]
        for m in ("none", "sinusoidal", "t5", "rope", "alibi")}  # the mean's fall from 64 to 512 tokens, per task


def marks_at(keep):
    """Column 3 when a task is kept if its mean falls by at most `keep`."""
    kept = {m: sum(f <= keep for f in falls) for m, falls in fall.items()}
    return {m: "✔" if k == len(runs["tasks"]) else "✘" if k == 0 else "~" for m, k in kept.items()}


column_3 = marks_at(0.1)
assert column_3 == {"none": "~", "sinusoidal": "✘", "t5": "~", "rope": "✘", "alibi": "~"}
assert list(runs["tasks"]) == ["grammar", "recall", "recall_anywhere"] and round(ex.accuracy(runs, "grammar", "none")[64]["mean"], 2) == 0.43
seed_falls = {m: [[a - b for a, b in zip(ex.accuracy(runs, t, m)[64]["acc"], ex.accuracy(runs, t, m)[512]["acc"])]
                  for t in runs["tasks"]] for m in fall}  # per method, per task: the fall of each seed
assert all(f > 0.4 for m in ("sinusoidal", "rope") for task in seed_falls[m] for f in task)  # firm: every seed loses
chance = {"grammar": 1 / cfg["vocab_size"], "recall": 1 / cfg["values"], "recall_anywhere": 1 / cfg["values"]}
assert chance == {"grammar": 1 / 16, "recall": 1 / 8, "recall_anywhere": 1 / 8}
assert all(ex.accuracy(runs, t, m)[64]["mean"] >= 6 * chance[t] for t in runs["tasks"] for m in fall)  # 6x uniform chance
assert fall["alibi"][0] < 0.01 and max(fall["t5"][1:]) < 0.01  # at 512 the grammar and the lookups can still be kept
nope = seed_falls["none"]
assert min(nope[0]) > 0.1 and max(nope[1]) <= 0.1 and [f <= 0.1 for f in nope[2]] == [True, False, True]
assert round(nope[2][1], 3) == 0.125  # NoPE: grammar lost and recall kept by every seed; recall_anywhere by two
assert max(map(abs, seed_falls["alibi"][0])) < 0.01 and min(seed_falls["alibi"][1] + seed_falls["alibi"][2]) > 0.2
assert [round(f, 2) for f in seed_falls["t5"][0]] == [0.07, 0.28, 0.09] and round(fall["t5"][0], 2) == 0.15
assert all(marks_at(k / 100) == column_3 for k in range(6, 15))  # every threshold from 0.06 to 0.14
assert (marks_at(0.15)["t5"], marks_at(0.05)["none"]) == ("✔", "✘")  # above: T5 keeps all; below: NoPE none

print("column 3's marks reproduced from results/extrapolation.json")


# %% [markdown] slideshow={"slide_type": "skip"}
# ### Where properties 1 and 2 part from source `001`
#
# Where the five properties come from: source `001` lists them, after a blog post it cites as 参考文献1
# (the reference list is empty in our copy). The properties, the route from integer to binary codes and
# the dog example match Christopher Fleetwood's Hugging Face post "You could have designed state of the art
# positional encoding" (2024). Properties 1 and 2 part from `001` here, as this section says and checks.
# Source `002` lists four, quoted from a Zhihu post it links (位置编码的需求: a unique position per token, a fixed spacing
# between codes, sentences of any length, a deterministic code): properties 1 to 4. Where a question of the
# map asks more or less than its property, the map's rules above say why.
#
# **Property 1 states its conditions here.** `001` says that two positions sharing a code would get
# 完全一致, completely identical, outputs, 根据前面推导的性质 (by the property derived before: its dog example,
# equal tokens and no mask). We make those conditions explicit and check the other cases. It holds for equal
# tokens at the two places, in a layer without a causal mask. Different tokens there get different queries. Under a causal mask the two places see
# different prefixes. Either way their outputs differ for random weights and tokens. (Without codes,
# chapter 1's Exercise 4 asks for an exception under a causal mask.) The cell below checks all three on
# one random head (weights of std 1). It then checks both differences on 50 more random heads at the usual
# scale (weights of std $1/\sqrt d$; codes and tokens of std 1): the outputs are more than 1e-3 apart
# every time. Special heads make exceptions: one that puts all its weight on one key both places see (the
# cell builds it with a large bias on that key) is one; others, such as a zero value matrix, are as contrived. Its two outputs are then that key's value, equal for different tokens and under a causal mask alike (checked too, on the last of the 50 heads). The
# harm of a shared code is elsewhere. Without a mask the layer cannot tell which of the two places each
# token stands at, so swapping the two tokens only swaps their output rows (checked too). That is chapter
# 1's blindness to order in small.
#
# **Property 2 is wider here than in the sources, on purpose.** `001` names it 线性相关性, a *linear*
# relation. The integer code $p_i = i\cdot\mathbf 1$, which `001` counts as having it, has no linear map
# from $p_i$ to $p_{i+k}$, only the affine $p_i \mapsto p_i + k\cdot\mathbf 1$: counting from 0, a linear
# map sends $p_0 = 0$ to $0$, not to $p_k = k\cdot\mathbf 1$; counting from 1, it sends $p_2 = 2p_1$ to
# $2p_{1+k} = (2 + 2k)\cdot\mathbf 1$, not to $p_{2+k} = (2+k)\cdot\mathbf 1$.
# So we ask for an affine map, which the integer code's ✔ in the map stands for; the sinusoids meet the
# strict, linear form too (chapter 3 §4 proves it; the cell checks it at k = 3). The cell checks the integer code both ways, with
# `pl.affine_shift_residual` (column 2's cell).

# %% slideshow={"slide_type": "skip"}
g = torch.Generator().manual_seed(0)
w_q, w_k, w_v = torch.randn(3, 8, 8, generator=g, dtype=torch.float64)  # one random head, d = 8
code = torch.randn(4, 8, generator=g, dtype=torch.float64)
code[3] = code[1]  # positions 1 and 3 share a code
equal = torch.randn(4, 8, generator=g, dtype=torch.float64)
equal[3] = equal[1]  # the same token at positions 1 and 3
unequal = equal.clone()
unequal[3] = torch.randn(8, generator=g, dtype=torch.float64)  # another token at position 3


def head(tokens, causal=False, bias=None):
    h = tokens + code
    return pl.attention(h @ w_q, h @ w_k, h @ w_v, causal=causal, bias=bias)[0]  # the outputs


assert torch.allclose(head(equal)[1], head(equal)[3])  # equal tokens, shared code: identical outputs
assert not torch.allclose(head(unequal)[1], head(unequal)[3], atol=1e-3)  # different tokens: not
assert not torch.allclose(head(equal, causal=True)[1], head(equal, causal=True)[3], atol=1e-3)  # causal: not
swapped = [0, 3, 2, 1]  # the tokens at positions 1 and 3 trade places
torch.testing.assert_close(head(unequal[swapped]), head(unequal)[swapped])  # only their rows trade places
apart = {"different tokens": 0, "causal mask": 0}
for seed in range(50):  # 50 more draws: how often each difference shows
    gs = torch.Generator().manual_seed(100 + seed)
    w_q, w_k, w_v = torch.randn(3, 8, 8, generator=gs, dtype=torch.float64) / 8**0.5  # std 1 / sqrt(d)
    code = torch.randn(4, 8, generator=gs, dtype=torch.float64)
    code[3] = code[1]
    equal = torch.randn(4, 8, generator=gs, dtype=torch.float64)
    equal[3] = equal[1]
    unequal = equal.clone()
    unequal[3] = torch.randn(8, generator=gs, dtype=torch.float64)
    apart["different tokens"] += not torch.allclose(head(unequal)[1], head(unequal)[3], atol=1e-3)
    apart["causal mask"] += not torch.allclose(head(equal, causal=True)[1], head(equal, causal=True)[3], atol=1e-3)
assert apart == {"different tokens": 50, "causal mask": 50}
one_key = torch.zeros(4, 4, dtype=torch.float64)
one_key[:, 0] = 1e9  # a head that puts all its weight on key 0, which both places see: the exception
assert torch.allclose(head(unequal, bias=one_key)[1], head(unequal, bias=one_key)[3])  # different tokens, same output
assert torch.allclose(head(equal, causal=True, bias=one_key)[1], head(equal, causal=True, bias=one_key)[3])  # causal too
print("shared code: identical outputs for equal tokens without a causal mask; in 50 more random heads,",
      "outputs more than 1e-3 apart:", apart)

ints = pl.integer_positions(16, 4, dtype=torch.float64)  # p_i = i * 1 for i = 0 .. 15, d = 4
for table in (ints, ints + 1):  # counted from 0 (this course) and from 1 (source 001)
    src, dst = table[:-3], table[3:]  # every pair (p_i, p_(i+3))
    linear = torch.linalg.lstsq(src, dst).solution  # the best single matrix M with p_i M = p_(i+3)
    assert (src @ linear - dst).norm() > 0.1 * dst.norm()  # not exact: no linear map (why: below)
    assert pl.affine_shift_residual(table, 3) < 1e-9  # exact: p -> p + 3 * 1
assert ints[0].abs().sum() == 0 and ints[3].abs().sum() > 0  # from 0: a linear map sends p_0 = 0 to 0, not to p_3
assert torch.equal((ints + 1)[1], 2 * (ints + 1)[0]) and not torch.equal((ints + 1)[4], 2 * (ints + 1)[3])  # from 1: p_2 = 2 p_1, p_5 != 2 p_4
sines = pl.sinusoidal_positions(16, 4, dtype=torch.float64)
assert (sines[:-3] @ torch.linalg.lstsq(sines[:-3], sines[3:]).solution - sines[3:]).norm() < 1e-9  # linear, b = 0
print("integer code, k = 3: no linear map, an exact affine one (from 0 and from 1); sinusoids: an exact linear one")
