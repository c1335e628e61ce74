"""Checkers for notebooks/01_why_positions.ipynb: attention without positions.

No checker here holds an answer. A design (a matrix, a layer, a sequence) is checked by the property it
must have, on tokens and weights the learner does not choose. The rows of Exercise 5 are checked against
salted digests (``_core.sealed``) of what a causal head gives on sequences of up to 10^12 tokens, where
the answer space is far too large to search and no simulation runs; its small cases are there to name a
misconception on a sequence one can draw, and what they give away a simulation gives as well.
"""
from __future__ import annotations

import itertools
import random
from typing import Any, Callable, Iterator

import torch

from .. import absolute
from ..attention import attention
from ._core import Verdict, close, float64_tensor, report, sealed, whole_number, whole_numbers
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["passes_through", "shift_not_shuffle", "blind_query", "causal_twins", "changed_rows"]


# Exercise 1: a 4x4 matrix T, not a permutation, with Attn(TX) = T Attn(X) for every X and every head.
def _heads(n: int = 4, d: int = 6, count: int = 4) -> Iterator[tuple[torch.Tensor, ...]]:
    """Random tokens (n, d) and projections W_Q, W_K, W_V (d, d) in float64: the heads a design must pass."""
    for seed in range(count):
        g = torch.Generator().manual_seed(100 + seed)
        yield tuple(torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((n, d), (d, d), (d, d), (d, d)))


def _is_permutation(t: torch.Tensor) -> bool:
    """One 1 in every row and every column, 0 elsewhere."""
    return bool(((t == 0) | (t == 1)).all() and (t.sum(0) == 1).all() and (t.sum(1) == 1).all())


_NUDGE = 1e-3  # a T closer than this to a permutation, entry by entry, is that permutation (correct designs are >= 1 away)


def _permutation_gap(t: torch.Tensor) -> float:
    """The largest entry of |T - P| for the permutation matrix P nearest to T (4x4: all 24 tried)."""
    eye = torch.eye(t.shape[0], dtype=t.dtype)
    return min(float((t - eye[list(order)]).abs().max()) for order in itertools.permutations(range(t.shape[0])))


def passes_through(answer: Any) -> bool | None:
    """Exercise 1: a 4x4 matrix T that is not a permutation matrix, with Attn(TX) = T Attn(X) for
    every 4 tokens X and every head (pl.attention after bias-free projections)."""

    def run(t: Any) -> Iterator[Verdict]:
        t = float64_tensor(t)
        if t is None or t.shape != (4, 4) or not bool(torch.isfinite(t).all()):
            yield False, ("T must be 4x4 finite numbers (one row per output slot, one column per token), got "
                          f"{'shape ' + str(tuple(t.shape)) if t is not None and t.shape != (4, 4) else repr(answer)}")
            return
        if _permutation_gap(t) < _NUDGE:
            yield False, ("T is a permutation matrix, or one with its entries nudged by less than 0.001: section 1's "
                          "own answer; the design asks for one that is not")
            return
        if int(torch.linalg.matrix_rank(t)) < 4:
            yield False, ("T is singular: it drops a token or writes one over another, so some query sees other "
                          "keys than before; keep all four tokens")
            return
        if all(close(attention(t @ x @ wq, t @ x @ wk, t @ x @ wv)[0], t @ attention(x @ wq, x @ wk, x @ wv)[0],
                     atol=1e-9, rtol=1e-7) for x, wq, wk, wv in _heads()):
            yield True, ("T passes through every head: a score multiplies a query by a key, so a factor shared by "
                         "every token meets itself twice there, while the values carry it once to the output")
            return
        entries = t[t != 0]
        if _is_permutation(t.abs()) and bool((entries > 0).any() and (entries < 0).any()):
            yield False, ("T keeps every token's size and still fails: it changes some of the scores between tokens, "
                          "and the softmax sees every score")
        elif _is_permutation(t / entries[0]):
            yield False, (f"T scales every token by {float(entries[0]):g}: attention is not linear in its tokens, and "
                          "the softmax is not blind to the scale of its scores (section 5's weights show it)")
        elif bool(((t != 0).sum(1) > 1).any()):
            yield False, ("T mixes tokens: some slot of TX is a blend of several tokens, and attention is not linear "
                          "(a blend's scores, and the softmax of them, are not the blend of its tokens')")
        else:
            yield False, ("T scales its tokens by different factors: the scores between them change against each "
                          "other, and the softmax sees every score")

    return report("a matrix that is not a permutation and still passes through attention", answer, run,
                  "redo the derivation of Attn(PX) = P Attn(X) with T in place of P: which property of P does "
                  "each step use?")


# Exercise 2: a layer that moves with every rotation of the sequence, but not with every permutation.
# The checker draws three sizes anew at every call, one n from each range, and 1 to 6 features each: the prompt says
# "any n >= 5", so no layer may be written for the sizes tried.
_N_RANGES = ((5, 9), (10, 16), (17, 40))
# Relative errors. Above _MOVES a rotation did more than move the rows. A swap sees the order when its error stands
# above the layer's own rounding, measured by its rotations: _ABOVE_ROUNDING times their largest error, and at
# least _FLOOR (float64 rounding is ~1e-16), so that a small but exact mixing coefficient (1e-5, 1e-9) counts.
_MOVES, _ABOVE_ROUNDING, _FLOOR = 1e-6, 100.0, 1e-12


def _ring_tokens() -> list[torch.Tensor]:
    """The tokens a design must pass: float64, one tensor (n, d) per range of _N_RANGES, sizes and values drawn
    anew at every call (from the operating system's randomness, which no seed set in the notebook repeats)."""
    rng = random.SystemRandom()
    g = torch.Generator().manual_seed(rng.randrange(2**62))
    return [torch.randn(rng.randint(lo, hi), rng.randint(1, 6), generator=g, dtype=torch.float64) for lo, hi in _N_RANGES]


def _reorder_error(f: Callable[[torch.Tensor], Any], x: torch.Tensor, order: list[int],
                   moved_as: list[int] | None = None) -> float | None:
    """max |f(x[order]) - f(x)[moved_as]| over max |f(x)| (moved_as defaults to order), or None when f does not
    return (n, d) numbers."""
    out, moved = float64_tensor(f(x.clone())), float64_tensor(f(x[order].clone()))
    if out is None or moved is None or out.shape != x.shape or moved.shape != x.shape:
        return None
    if not bool(torch.isfinite(out).all() and torch.isfinite(moved).all()):
        return None
    return float((moved - out[order if moved_as is None else moved_as]).abs().max() / (1e-12 + out.abs().max()))


def shift_not_shuffle(answer: Any) -> bool | None:
    """Exercise 2: a function f from n tokens (n, d) to (n, d) with f(PX) = P f(X) for every rotation P of
    the sequence (token i moves to place i + s mod n) and not for every permutation, at each size tried."""

    def run(f: Any) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function f(x) from (n, d) tokens to (n, d), got {type(f).__name__}"
            return
        for x in _ring_tokens():
            n, d = x.shape
            rotations = [[(i + s) % n for i in range(n)] for s in range(1, n)]
            errors = [_reorder_error(f, x, order) for order in rotations]
            if None in errors:
                yield False, f"for {n} tokens of {d} features f must return finite numbers, a tensor of shape ({n}, {d})"
                return
            if max(errors) > _MOVES:
                backwards = [_reorder_error(f, x, [(i + s) % n for i in range(n)], [(i - s) % n for i in range(n)])
                             for s in range(1, n)]
                if None not in backwards and max(backwards) <= _MOVES:
                    yield False, (f"with {n} tokens, rotating the sequence one way rotates your layer's output rows the "
                                  "other way: no place is special to it, but it turns the sequence around, so a shift "
                                  "goes in and the opposite shift comes out")
                    return
                kept = [_reorder_error(f, x, [(i + s) % n for i in range(n)], list(range(n))) for s in range(1, n)]
                if None not in kept and max(kept) <= _MOVES:
                    yield False, (f"with {n} tokens, rotating the sequence leaves your layer's output rows where they "
                                  "were: the output ignores the order instead of moving with the tokens (invariant, "
                                  "not equivariant)")
                    return
                yield False, (f"with {n} tokens, rotating the sequence changes your layer's output beyond moving its "
                              "rows: some place in the sequence is special to your layer")
                return
            swaps = [[*range(a), b, *range(a + 1, b), a, *range(b + 1, n)] for a in range(n) for b in range(a + 1, n)]
            seen = [_reorder_error(f, x, order) for order in swaps]
            if None in seen:
                yield False, f"for {n} tokens of {d} features f must return finite numbers, a tensor of shape ({n}, {d})"
                return
            if max(seen) <= max(_FLOOR, _ABOVE_ROUNDING * max(errors)):
                yield False, (f"with {n} tokens every permutation tried only moves your layer's rows (up to rounding): "
                              "it treats the tokens as a bag, so it cannot see their order at all")
                return
        yield True, ("right: your layer reads each token's neighbours by their offset, not by their place; a rotation "
                     "keeps every offset and a shuffle does not. Relative positions (chapter 4) rest on the same idea")

    return report("a layer that moves with every rotation of the sequence, not with every permutation", answer, run,
                  "what does a rotation of the sequence keep that a shuffle destroys?")


# Exercise 3: the five tokens "the dog chased another dog" with sinusoidal positions; design W_Q.
DOG_WORDS = ["the", "dog", "chased", "another", "dog"]
DOG_D = 8
DOGS = (1, 4)


def dog_setup() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x, p, w_k, w_v): seeded embeddings of DOG_WORDS (5, 8), their sinusoidal codes, and two
    random projections (8, 8). The first head the checker tries."""
    g = torch.Generator().manual_seed(0)
    vocab = sorted(set(DOG_WORDS))
    emb = torch.randn(len(vocab), DOG_D, generator=g, dtype=torch.float64)
    x = emb[torch.tensor([vocab.index(w) for w in DOG_WORDS])]
    p = absolute.sinusoidal_positions(len(DOG_WORDS), DOG_D, dtype=torch.float64)
    w_k, w_v = (torch.randn(DOG_D, DOG_D, generator=g, dtype=torch.float64) / DOG_D**0.5 for _ in range(2))
    return x, p, w_k, w_v


def _dog_rows_equal(w: torch.Tensor, w_k: torch.Tensor, w_v: torch.Tensor) -> bool:
    """Are the two dogs' outputs identical with W_Q = w and these W_K, W_V?"""
    x, p, _, _ = dog_setup()
    h = x + p
    out = attention(h @ w, h @ w_k, h @ w_v)[0]
    return close(out[DOGS[0]], out[DOGS[1]], atol=1e-8, rtol=1e-5)


def blind_query(answer: Any) -> bool | None:
    """Exercise 3: a (8, 8) W_Q with which the two "dog" rows of single-head attention over x + p (row
    convention, q = (x + p) W_Q) are identical, whatever W_K and W_V are, while the other three tokens keep
    queries apart from each other and from the dogs'."""

    def run(w: Any) -> Iterator[Verdict]:
        w = float64_tensor(w)
        if w is None or w.shape != (DOG_D, DOG_D):
            yield False, f"W_Q must be {DOG_D}x{DOG_D}, got shape {None if w is None else tuple(w.shape)}"
            return
        if not bool(torch.isfinite(w).all()):
            yield False, "W_Q must hold finite numbers: with inf or NaN every output is NaN, which proves nothing"
            return
        x, p, w_k, w_v = dog_setup()
        q = ((x + p) @ w)[[0, DOGS[0], 2, 3]]  # the, dog, chased, another
        gaps = (q[:, None] - q[None]).norm(dim=-1).fill_diagonal_(float("inf"))  # each token against the others
        if float(gaps.min()) <= 1e-6 * (1 + float(q.norm(dim=-1).max())):
            yield False, ("W_Q gives two different tokens the same query (W_Q = 0 does so to every token and makes "
                          "attention uniform, which proves nothing): only the two dogs may share one")
            return
        g = torch.Generator().manual_seed(1)
        heads = [(w_k, w_v)] + [tuple(torch.randn(DOG_D, DOG_D, generator=g, dtype=torch.float64) / DOG_D**0.5
                                      for _ in range(2)) for _ in range(3)]
        unit = w / w.norm()
        if all(_dog_rows_equal(w, wk, wv) for wk, wv in heads):
            if not all(_dog_rows_equal(unit, wk, wv) for wk, wv in heads):
                yield False, ("the dogs' outputs agree only while one key takes all the weight: scale W_Q down "
                              "and they differ")
                return
            yield True, ("the two dogs get identical outputs with positions added, for every head tried: W_Q erases "
                         "the one direction in which their inputs differ, and every row shares the same keys and "
                         "values")
            return
        u = p[DOGS[0]] - p[DOGS[1]]
        if (w @ u).norm() < 1e-8 * u.norm() * w.norm():
            yield False, ("your W_Q would do it in the source's column convention, q = W_Q h; this exercise uses "
                          "the chapter's row convention, q = h W_Q")
        elif any((p[i] @ w).norm() < 1e-8 * w.norm() for i in DOGS):
            yield False, "you erased one dog's position code, but the two inputs still differ"
        elif _dog_rows_equal(w, w_k, w_v):
            yield False, "the dogs agree for the first head only: the design must hold whatever W_K and W_V are"
        else:
            yield False, "the two dog rows still differ, already for the first head"

    return report("a W_Q with which the two dogs stay identical despite positions", answer, run,
                  "a linear map can forget some directions of its input entirely")


# Exercise 4: a token sequence in which a causal head without positions gives two positions one output.
TWIN_VOCAB, TWIN_MAX_LEN = 5, 12


def _causal_outputs(tokens: list[int], seed: int) -> torch.Tensor:
    """A causal head without positions over the tokens (random embeddings and weights, float64)."""
    g = torch.Generator().manual_seed(seed)
    d = 8
    emb = torch.randn(TWIN_VOCAB, d, generator=g, dtype=torch.float64)
    wq, wk, wv = (torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5 for _ in range(3))
    x = emb[torch.tensor(tokens)]
    return attention(x @ wq, x @ wk, x @ wv, causal=True)[0]


def causal_twins(answer: Any) -> bool | None:
    """Exercise 4: (tokens, (i, j)): at most 12 tokens from 0..4, at least two different ones up to j, and
    i < j whose outputs a causal head without positions makes identical, whatever its weights."""

    def run(ans: Any) -> Iterator[Verdict]:
        shape = isinstance(ans, (tuple, list)) and len(ans) == 2
        tokens = whole_numbers(ans[0]) if shape else None
        pair = whole_numbers(ans[1]) if shape and isinstance(ans[1], (tuple, list)) else None
        if tokens is None or pair is None or len(pair) != 2:
            yield False, f"answer must be (tokens, (i, j)): a list of token ids and two positions, got {ans!r}"
            return
        if not 2 <= len(tokens) <= TWIN_MAX_LEN or not all(0 <= t < TWIN_VOCAB for t in tokens):
            yield False, f"use 2 to {TWIN_MAX_LEN} tokens, each an id from 0 to {TWIN_VOCAB - 1}"
            return
        i, j = sorted(pair)
        if i == j or not 0 <= i < j < len(tokens):
            yield False, f"i and j must be two different positions of your sequence (0 to {len(tokens) - 1})"
            return
        if len(set(tokens[: j + 1])) < 2:
            yield False, ("every token up to position j is the same one: then every row is that token's value "
                          "vector, which proves nothing about order; use at least two different tokens")
            return
        if all(close(out[i], out[j], atol=1e-9, rtol=1e-9) for out in (_causal_outputs(tokens, s) for s in range(3))):
            yield True, ("rows i and j are identical for every weight tried. That is a fact about one layer: a "
                         "second layer "
                         "reads the first layer's outputs, and the rows before i and j differ (the first token sees "
                         "only itself), so a stack of layers can tell more places apart (chapter 7)")
            return
        if tokens[i] != tokens[j]:
            yield False, ("positions i and j hold different tokens: their queries differ, so their weights and "
                          "outputs differ for generic weights")
        elif set(tokens[: i + 1]) != set(tokens[: j + 1]):
            yield False, ("the prefix up to j holds a token that the prefix up to i lacks: it takes some weight "
                          "in row j and none in row i")
        else:
            yield False, ("same token and the same set of tokens before it, and still different rows: the set is "
                          "not all that a softmax over the prefix sees")

    return report("two positions a causal head without positions cannot tell apart", answer, run,
                  "row i of a causal head is a softmax-weighted average over tokens 0..i: what about the "
                  "prefix can change, from row i to row j, without changing that average?")


# Exercise 5: the rows of a causal head without positions that change when tokens are swapped.
def _far_swaps(seed: int, clusters: int) -> tuple[int, tuple[tuple[int, int], ...]]:
    """(n, swaps) for n = 10^12 tokens: `clusters` groups of three places within 10^6 of each other, spread
    over the whole sequence, each with a few swaps among its places (in their order, the groups interleaved),
    and one swap between two neighbouring groups. Only what they do is sealed below."""
    rng = random.Random(seed)
    n = 10**12
    places = [sorted(rng.sample(range(start, start + 10**6), 3)) for start in sorted(rng.sample(range(n - 10**6), clusters))]
    groups = [[[(a, b)], [(c, a), (a, c)], [(a, b), (b, c)], [(b, a), (c, b), (a, c)], [(b, c), (a, b)]][rng.randrange(5)]
              for a, b, c in places]
    swaps: list[tuple[int, int]] = []
    while any(groups):
        group = rng.choice([g for g in groups if g])
        swaps.append(group.pop(0))
    k = rng.randrange(clusters - 1)
    swaps.insert(rng.randrange(len(swaps)), (places[k][2], places[k + 1][0]))
    return n, tuple(swaps)


# Small cases first (they name a misconception on a sequence one can draw), then three far ones: 10^12 tokens,
# where no simulation of attention can run and only the rule gives the rows.
SWAP_CASES: tuple[tuple[int, tuple[tuple[int, int], ...]], ...] = (
    (8, ((2, 5),)),
    (10, ((1, 4), (6, 8))),
    (12, ((3, 7), (3, 7))),
    (12, ((2, 5), (5, 8), (2, 8))),
    (16, ((9, 3), (4, 12))),
    _far_swaps(1, 10), _far_swaps(2, 20), _far_swaps(3, 30),
)
# Per case: sealed(rows, "ch01.changed_rows") of the rows that change, then of the wrong rows each misconception
# gives (rows as merged [start, stop) pairs). A misconception that happens to give the right rows is left out.
_SWAP_SEALS: tuple[tuple[str, dict[str, str]], ...] = (
    ("d1704b45c2f857344a4901fe", {
        "every": "64d552c0af5ef20cb430f991", "moved": "62cdf055dd5c2735bbb692a3",
        "after": "67c7df7362bb2a04762db9c4", "keys": "de58e1234e64dc34d82e932c"}),
    ("5d32c8a18460f068aa8cd14e", {
        "every": "94102960676feaa69c6b0da8", "moved": "27cccf5667e3f7c61dcdddab",
        "after": "26a97297a57f44bc8a972109", "keys": "40df08507db62578c73c50db"}),
    ("ec6d1e2a6be7dfaee97766d5", {
        "every": "16143ffc1022cec91bd03895", "apart": "307c206826f0c2c5fcdd8b2d"}),
    ("eaa3a38b3da92b163aa5715b", {
        "every": "16143ffc1022cec91bd03895", "moved": "90176214b3f014d80e2a6395",
        "after": "38c73f3fedf1ad1fcf69dedf", "keys": "d0078292da6df15520d9e0e9", "apart": "3e603d1e31c743a5313df735"}),
    ("091a3fa28ab5a877726fb5c7", {
        "every": "e46cdeeb8a87e97ee2f0ffb8", "moved": "960f736e67aa92400e7018c4",
        "after": "e78727a2943b76ab24350947", "keys": "063c127546e8ceeeda6c7b8a"}),
    ("f89d8ae93117904a5c8cb038", {
        "every": "6b9c0f7e0d78ce483999a508", "moved": "3ec386ab232309247b428c27",
        "after": "433cf8f4d9d9800f1eda26ff", "keys": "b7bbb7efdc660f1fef992582", "apart": "532b53ae419a20ce11f831d6"}),
    ("f2842cd2df8f8054a7eaea7d", {
        "every": "6b9c0f7e0d78ce483999a508", "moved": "3ee5d9728ea875b99e996f60",
        "after": "9c40f0dde5fb2a4399173526", "keys": "f0f7fe835aef965a5d7dc118", "apart": "a298d1696cb97295b5a30fd4"}),
    ("01677965f37976aa278e4b1a", {
        "every": "6b9c0f7e0d78ce483999a508", "moved": "f2ddf02c9961e262e34dc16c",
        "after": "9e9d20c064e10e8a6dadc40c", "keys": "980ad5d9b205eb30148600be", "apart": "a44226bd7e3cba9369ebb532"}),
)
_SWAP_SAYS = {
    "every": ("every row changes in your answer, as if any reordering changed everything downstream: some "
              "rows read nothing a swap changes"),
    "moved": "you list only the rows whose own token moved: a row's output also depends on the tokens before it",
    "after": ("you list every row from the first swap on: but a row's keys and values can be reordered without "
              "changing it (section 1's invariance)"),
    "keys": "your rule looks only at the tokens before a row, its keys and values, and forgets the row's own query",
    "apart": ("you treat each swap on its own: the swaps act one after the other, so a later swap moves tokens that "
              "an earlier one placed"),
}


def _swap_refusals() -> tuple[tuple[Any, str, str], ...]:
    """What would simulate a causal head instead of reasoning about it: the library's attention and softmax."""
    import sys

    import posenc_lib

    from .. import permutation

    functional = torch.nn.functional
    return ((posenc_lib, "attention", "pl.attention"), (sys.modules["posenc_lib.attention"], "attention", "pl.attention"),
            (permutation, "attention", "pl.attention"), (posenc_lib, "self_attention", "pl.self_attention"),
            (permutation, "self_attention", "pl.self_attention"), (torch, "softmax", "torch.softmax"),
            (torch.Tensor, "softmax", "Tensor.softmax"), (functional, "softmax", "torch.nn.functional.softmax"),
            (functional, "scaled_dot_product_attention", "torch.nn.functional.scaled_dot_product_attention"),
            (torch.nn.MultiheadAttention, "forward", "nn.MultiheadAttention"))


def _row_ranges(rows: Any, n: int) -> list[list[int]] | str:
    """The rows as merged [start, stop) pairs, or what is wrong with them. rows: ranges (step 1), (start, stop)
    pairs and row indices, in any order, overlapping or not."""
    if isinstance(rows, range) or getattr(rows, "ndim", None) == 0:
        rows = [rows]
    if getattr(rows, "ndim", None) == 1 and hasattr(rows, "tolist"):
        rows = rows.tolist()
    if not isinstance(rows, (list, tuple, set, frozenset)):
        return f"must return a list of ranges such as [range(2, 4), range(9, 10)], got {type(rows).__name__}"
    pairs = []
    for item in rows:
        pair = whole_numbers(item) if isinstance(item, (tuple, list)) else None
        if isinstance(item, range) and item.step == 1:
            pairs.append([item.start, item.stop])
        elif pair is not None and len(pair) == 2:
            pairs.append(pair)  # (start, stop), as a range would hold them
        elif whole_number(item) is not None:
            pairs.append([whole_number(item), whole_number(item) + 1])
        else:
            return (f"must return a list of ranges (step 1), (start, stop) pairs or row indices, got an item "
                    f"{item!r}")
    pairs = [pair for pair in pairs if pair[1] > pair[0]]  # empty ranges name no row
    if any(start < 0 or stop > n for start, stop in pairs):
        return f"lists a row outside 0 to {n - 1} (positions count from 0)"
    merged: list[list[int]] = []
    for start, stop in sorted(pairs):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], stop)
        else:
            merged.append([start, stop])
    return merged


def _call(n: int, swaps: tuple[tuple[int, int], ...]) -> str:
    """How feedback names a case: written out when it is small, summarised when it is far."""
    return f"fn({n}, {list(swaps)})" if n < 100 else f"fn(10**12, <{len(swaps)} swaps>)"


def changed_rows(answer: Any) -> bool | None:
    """Exercise 5: fn(n, swaps) -> the rows of a causal head without positions, over n different tokens, whose
    output changes when the swaps (a, b) are applied one after the other; ranges, so that n can be 10^12."""

    def run(f: Any) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(n, swaps), got {type(f).__name__}"
            return
        answers, stopped = answers_under_guard(f, SWAP_CASES, _swap_refusals())
        if stopped is not None:
            (n, swaps), why = stopped
            yield stopped_verdict(why, _call(n, swaps),
                                  shortcut="a simulation of attention, not the rule (the checker goes up to "
                                           "10**12 tokens, where no simulation runs)",
                                  loop="walks the rows one by one: the checker goes up to 10**12 tokens")
            return
        for (n, swaps), (right, wrong) in zip(SWAP_CASES, _SWAP_SEALS):
            rows = _row_ranges(answers[(n, swaps)], n)
            shown = _call(n, swaps)
            if isinstance(rows, str):
                yield False, f"{shown} {rows}"
                return
            digest = sealed(rows, "ch01.changed_rows")
            if digest != right:
                named = [_SWAP_SAYS[name] for name, seal in wrong.items() if seal == digest]
                yield False, f"{shown}: " + (named[0] if named else "these are not the rows that change")
                return
        yield True, ("right: row i depends only on its own token and on the set of tokens at places 0..i, so it "
                     "changes exactly when its token moved or a token crossed it; within the prefix a causal head "
                     "still sees a bag")

    return report("the rows of a causal head that change when tokens are swapped", answer, run,
                  "a causal row is plain attention of one query over a prefix: which of section 1's facts "
                  "still hold inside that prefix?")
