"""Checkers for notebooks/01_why_positions.ipynb: attention without positions.

No checker here holds an answer. A design is checked by the property it must have, on tokens and weights
the learner does not choose; a set or a list is checked against salted digests (``_core.sealed``), one
per item the answer must hold, so importing this module hands nothing over.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from .. import absolute
from ..attention import attention
from ._core import Verdict, close, float64_tensor, report, sealed, whole_numbers

__all__ = ["passes_through", "equivariant_layers", "blind_query", "causal_twins", "causal_swap_rows"]


# Exercise 1: a 4x4 matrix T, not a permutation, with Attn(TX) = T Attn(X) for every X and every head.
def _heads(n: int = 4, d: int = 6, count: int = 4) -> Iterator[tuple[torch.Tensor, ...]]:
    """Random tokens (n, d) and projections W_Q, W_K, W_V (d, d) in float64: the heads a design must pass."""
    for seed in range(count):
        g = torch.Generator().manual_seed(100 + seed)
        yield tuple(torch.randn(*shape, generator=g, dtype=torch.float64) for shape in ((n, d), (d, d), (d, d), (d, d)))


def _is_permutation(t: torch.Tensor) -> bool:
    """One 1 in every row and every column, 0 elsewhere."""
    return bool(((t == 0) | (t == 1)).all() and (t.sum(0) == 1).all() and (t.sum(1) == 1).all())


def passes_through(answer: Any) -> bool | None:
    """Exercise 1: a 4x4 matrix T that is not a permutation matrix, with Attn(TX) = T Attn(X) for
    every 4 tokens X and every head (pl.attention after bias-free projections)."""

    def run(t: Any) -> Iterator[Verdict]:
        t = float64_tensor(t)
        if t is None or t.shape != (4, 4):
            yield False, ("T must be 4x4 (one row per output slot, one column per token), got shape "
                          f"{None if t is None else tuple(t.shape)}")
            return
        if _is_permutation(t):
            yield False, "T is a permutation matrix: section 1's own answer; the design asks for one that is not"
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
            yield False, ("T flips the sign of some tokens and not of others: the score between a flipped and an "
                          "unflipped token changes sign, and the softmax sees that")
        elif _is_permutation(t / entries[0]):
            yield False, (f"T scales every token by {float(entries[0]):g}: every score then scales by its square, "
                          "and the softmax is not blind to the scale of the scores (section 2's weights show it)")
        else:
            yield False, "Attn(TX) differs from T Attn(X) on random tokens and weights"

    return report("a matrix that is not a permutation and still passes through attention", answer, run,
                  "redo the derivation of Attn(PX) = P Attn(X) with T in place of P: which property of P does "
                  "each step use?")


# Exercise 2: which of these layers, each a map from n tokens (n, d) to (n, d), keep permutation
# equivariance f(PX) = P f(X)? Each is written out so that a test (and a learner) can run it.
def _previous(x: torch.Tensor) -> torch.Tensor:
    return x + torch.cat([torch.zeros_like(x[:1]), x[:-1]])


def _rank_scale(x: torch.Tensor) -> torch.Tensor:
    rank = x[:, 0].argsort().argsort().to(x.dtype)  # 0 for the token with the smallest first feature
    return x * (1 + rank)[:, None]


LAYERS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "a": lambda x: x + x.mean(0),  # add the mean token to every token
    "b": _previous,  # add the previous token (the first token gets 0)
    "c": lambda x: (x - x.mean(0)) / x.std(0),  # normalise each feature over the tokens
    "d": lambda x: x.cumsum(0) / torch.arange(1, x.shape[0] + 1, dtype=x.dtype)[:, None],  # running mean of 0..i
    "e": lambda x: x + x.amax(0),  # add the feature-wise maximum over the tokens
    "f": _rank_scale,  # scale token i by 1 + its rank in the order of the first feature
}
# sealed(letter, "ch01.equivariant_layers") of every layer that keeps equivariance
_KEEPS = frozenset({"16ddc175a94ee55da38011c3", "b3cf6785e59eb58ada8a2836", "218234544086ef5c6af1d249",
                    "ed731d6112cede73febb28fe"})


def equivariant_layers(answer: Any) -> bool | None:
    """Exercise 2: the set of letters (of LAYERS) whose layer keeps f(PX) = P f(X)."""

    def run(ans: Any) -> Iterator[Verdict]:
        if isinstance(ans, str):
            ans = list(ans.replace(",", " ").split()) if " " in ans or "," in ans else list(ans)
        if not isinstance(ans, (list, tuple, set, frozenset)) or not all(isinstance(k, str) for k in ans):
            yield False, f"answer must be a set of letters such as {{'a', 'b'}}, got {ans!r}"
            return
        got = {k.strip().lower() for k in ans}
        unknown = sorted(got - set(LAYERS))
        if unknown:
            yield False, f"the layers are named {', '.join(LAYERS)}; {unknown} is not one of them"
            return
        wrongly_in = sum(sealed(k, "ch01.equivariant_layers") not in _KEEPS for k in got)
        wrongly_out = len(_KEEPS) - (len(got) - wrongly_in)
        if not wrongly_in and not wrongly_out:
            yield True, ("right: a layer keeps equivariance when it treats every token by the same rule, "
                         "whatever its place; mixing tokens (a mean, a maximum, a rank) is allowed")
            return
        if wrongly_in:
            yield False, (f"{wrongly_in} of the layers you chose {'treats' if wrongly_in == 1 else 'treat'} a token "
                          "by where it stands (which tokens come before it): reorder the tokens and it sees other "
                          "neighbours")
        if wrongly_out:
            yield False, (f"{wrongly_out} of the layers you left out {'keeps' if wrongly_out == 1 else 'keep'} "
                          "equivariance: mixing tokens does not break it by itself (attention mixes them too); "
                          "only a rule that depends on a token's place does")

    return report("which layers keep f(PX) = P f(X)", answer, run,
                  "what, in each layer, could tell a token where it stands?")


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
    """Exercise 3: a (8, 8) W_Q of rank 7 with which the two "dog" rows of single-head attention over
    x + p (row convention, q = (x + p) W_Q) are identical, whatever W_K and W_V are."""

    def run(w: Any) -> Iterator[Verdict]:
        w = float64_tensor(w)
        if w is None or w.shape != (DOG_D, DOG_D):
            yield False, f"W_Q must be {DOG_D}x{DOG_D}, got shape {None if w is None else tuple(w.shape)}"
            return
        rank = int(torch.linalg.matrix_rank(w))
        if rank < DOG_D - 1:
            yield False, (f"W_Q has rank {rank}: it throws away more than it must (W_Q = 0 also makes every row "
                          f"alike, by making attention uniform); keep rank {DOG_D - 1}")
            return
        _, p, w_k, w_v = dog_setup()
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
            yield False, ("W_Q u = 0 is the column convention; here a query is the row (x + p) W_Q: "
                          "which side of W_Q must the difference meet?")
        elif any((p[i] @ w).norm() < 1e-8 * w.norm() for i in DOGS):
            yield False, "you erased one dog's position code, but the two inputs still differ"
        elif _dog_rows_equal(w, w_k, w_v):
            yield False, "the dogs agree for the first head only: the design must hold whatever W_K and W_V are"
        else:
            yield False, ("the two dog rows still differ: which of q, k, v of the two dogs does the difference "
                          "between their outputs come from?")

    return report("a W_Q with which the two dogs stay identical despite positions", answer, run,
                  "which of the things a row's output is made of can differ between the two dog rows?")


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
            yield True, ("rows i and j are identical for every weight tried: a causal head sees the mix of the "
                         "tokens before it, not how many there are; a start token that occurs only once is what "
                         "lets a model without positions count (chapter 7)")
            return
        if tokens[i] != tokens[j]:
            yield False, ("positions i and j hold different tokens: their queries differ, so their weights and "
                          "outputs differ whatever the keys are")
        elif set(tokens[: i + 1]) != set(tokens[: j + 1]):
            yield False, ("the prefix up to j holds a token that the prefix up to i lacks: it takes some weight "
                          "in row j and none in row i")
        else:
            yield False, ("same token, same set of tokens before it, and still different rows: a softmax weighs "
                          "every copy of a key on its own, so how often each token occurs matters too")

    return report("two positions a causal head without positions cannot tell apart", answer, run,
                  "row i of a causal head is a softmax-weighted average over tokens 0..i: what about the "
                  "prefix can change, from row i to row j, without changing that average?")


# Exercise 5: a causal head without positions over 8 distinct tokens; swap the tokens at these positions.
SWAP = (2, 5)
SWAP_LEN = 8
# sealed(row, "ch01.causal_swap_rows") of every row whose output changes
_CHANGED = frozenset({"cdd559dc403096fe72d0c585", "e41bf052805df07f0768b3f2", "8f778d8681e276c01f77f50c",
                      "5f284e53ec0112f4d3b4ef1d"})


def causal_swap_rows(answer: Any) -> bool | None:
    """Exercise 5: the output rows of a causal head (no positions, 8 distinct tokens) that change
    when the tokens at positions 2 and 5 are swapped."""

    def run(ans: Any) -> Iterator[Verdict]:
        rows_given = whole_numbers(ans)  # a list, tuple, set, 1-D tensor or array
        if rows_given is None:
            yield False, f"answer must be a list of row indices (integers), got {ans!r}"
            return
        rows = set(rows_given)
        bad = sorted(i for i in rows if not 0 <= i < SWAP_LEN)
        if bad:
            yield False, f"rows are numbered 0 to {SWAP_LEN - 1} (positions count from 0), got {bad}"
            return
        extra = {i for i in rows if sealed(i, "ch01.causal_swap_rows") not in _CHANGED}
        missing = len(_CHANGED) - (len(rows) - len(extra))
        if not extra and not missing:
            yield True, ("right: row i depends only on its own token and the set of tokens 0..i; the rows after "
                         "the swap see the same query and the same (key, value) pairs, in another order")
            return
        if any(i < SWAP[0] for i in extra):
            yield False, "a row before position 2 cannot reach either swapped token"
        if any(i > SWAP[1] for i in extra):
            yield False, ("you list a row after position 5: its query is its own token as before, and its keys "
                          "and values are the same pairs as before; what does section 1 say the order of the "
                          "pairs changes?")
        if missing:
            yield False, (f"{missing} {'rows that change are' if missing > 1 else 'row that changes is'} "
                          "missing from your list")

    return report("which rows of a causal head change when tokens 2 and 5 swap", answer, run,
                  "a causal row is plain attention of one query over a prefix: which of section 1's facts "
                  "still hold inside that prefix?")
