"""Checkers for notebooks/01_why_positions.ipynb: attention without positions."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from .. import absolute, permutation
from ..attention import attention
from ._core import Verdict, close, float64_tensor, report, whole_numbers

__all__ = ["reorder_matrix", "equivariant_layers", "blind_query", "causal_twins", "causal_swap_rows"]

# Exercise 1: rows [a, b, c, d] -> [c, a, d, b].
REORDER = [2, 0, 3, 1]


def reorder_matrix(answer: Any) -> bool | None:
    """Exercise 1: the 4x4 matrix P with P @ X = rows of X in the order [c, a, d, b]."""

    def run(p: Any) -> Iterator[Verdict]:
        p = torch.as_tensor(p, dtype=torch.float64)
        if p.shape != (4, 4):
            yield False, f"P must be 4x4 (one row per output slot, one column per input row), got shape {tuple(p.shape)}"
            return
        binary = bool(((p == 0) | (p == 1)).all())
        yield binary, "entries are 0 or 1" if binary else "a permutation matrix holds only 0s and 1s"
        one_per_row = bool((p.sum(1) == 1).all())
        one_per_col = bool((p.sum(0) == 1).all())
        yield one_per_row and one_per_col, (
            "exactly one 1 in every row and every column" if one_per_row and one_per_col
            else "each row and each column needs exactly one 1 (every token goes to exactly one slot)"
        )
        want = permutation.permutation_matrix(REORDER, dtype=torch.float64)
        x = torch.arange(4 * 3, dtype=torch.float64).reshape(4, 3)
        if close(p, want):
            yield True, "P @ X lists the rows as [c, a, d, b]"
        elif close(p, want.T):
            yield False, "this is the transpose: it sends row i to slot order[i] instead of fetching row order[i] into slot i"
        else:
            yield False, f"P @ X gives the rows in order {_row_names(p @ x, x)}, not [c, a, d, b]"

    return report("the permutation matrix that reorders [a, b, c, d] to [c, a, d, b]", answer, run,
                  "row i of P has its single 1 in the column of the input row you want in slot i "
                  "(slot 0 wants c: which row of X is c?)")


def _row_names(rows: torch.Tensor, x: torch.Tensor) -> str:
    names = []
    for r in rows:
        hit = [n for n, xr in zip("abcd", x) if close(r, xr, atol=1e-8, rtol=1e-5)]
        names.append(hit[0] if hit else "?")
    return "[" + ", ".join(names) + "]"


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


def equivariant_layer_names() -> set[str]:
    """The layers of LAYERS that keep equivariance, measured on random tokens and orders."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(7, 5, generator=g, dtype=torch.float64)
    orders = [torch.randperm(7, generator=g) for _ in range(5)]
    return {name for name, f in LAYERS.items()
            if all(permutation.equivariance_error(f, x, o) < 1e-9 for o in orders)}


def equivariant_layers(answer: Any) -> bool | None:
    """Exercise 2: the set of letters (of LAYERS) whose layer keeps f(PX) = P f(X)."""

    def run(ans: Any) -> Iterator[Verdict]:
        if isinstance(ans, str):
            ans = list(ans.replace(",", " ").split()) if " " in ans or "," in ans else list(ans)
        if not isinstance(ans, (list, tuple, set)) or not all(isinstance(k, str) for k in ans):
            yield False, f"answer must be a set of letters such as {{'a', 'b'}}, got {ans!r}"
            return
        got = {k.strip().lower() for k in ans}
        unknown = sorted(got - set(LAYERS))
        if unknown:
            yield False, f"the layers are named {', '.join(LAYERS)}; {unknown} is not one of them"
            return
        keep = equivariant_layer_names()
        wrongly_in, wrongly_out = got - keep, keep - got
        if not wrongly_in and not wrongly_out:
            yield True, ("right: a layer keeps equivariance when it treats every token by the same rule, "
                         "whatever its place; mixing tokens (a mean, a maximum, a rank) is allowed")
            return
        if wrongly_in:
            n = len(wrongly_in)
            yield False, (f"{n} of the layers you chose {'treats' if n == 1 else 'treat'} a token by where it "
                          "stands (which tokens come before it): reorder the tokens and it sees other neighbours")
        if wrongly_out:
            n = len(wrongly_out)
            yield False, (f"{n} of the layers you left out {'keeps' if n == 1 else 'keep'} equivariance: mixing "
                          "tokens does not break it by itself (attention mixes them too); only a rule that "
                          "depends on a token's place does")

    return report("which layers keep f(PX) = P f(X)", answer, run,
                  "permute the tokens and ask, for each layer: does a token's output depend on anything "
                  "other than itself and the *set* of tokens?")


# Exercise 3: the five tokens "the dog chased another dog" with sinusoidal positions; design W_Q.
DOG_WORDS = ["the", "dog", "chased", "another", "dog"]
DOG_D = 8
DOGS = (1, 4)


def dog_setup() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(x, p, w_k, w_v): seeded embeddings of DOG_WORDS (5, 8), their sinusoidal codes, and two
    random projections (8, 8). The checker's fixed keys and values."""
    g = torch.Generator().manual_seed(0)
    vocab = sorted(set(DOG_WORDS))
    emb = torch.randn(len(vocab), DOG_D, generator=g, dtype=torch.float64)
    x = emb[torch.tensor([vocab.index(w) for w in DOG_WORDS])]
    p = absolute.sinusoidal_positions(len(DOG_WORDS), DOG_D, dtype=torch.float64)
    w_k, w_v = (torch.randn(DOG_D, DOG_D, generator=g, dtype=torch.float64) / DOG_D**0.5 for _ in range(2))
    return x, p, w_k, w_v


def blind_query(answer: Any) -> bool | None:
    """Exercise 3: a (8, 8) W_Q of rank 7 with which the two "dog" rows of single-head attention over
    x + p (row convention, q = (x + p) W_Q) are identical, for the checker's random W_K, W_V."""

    def run(w: Any) -> Iterator[Verdict]:
        w = float64_tensor(w)
        if w is None or w.shape != (DOG_D, DOG_D):
            yield False, f"W_Q must be {DOG_D}x{DOG_D}, got shape {None if w is None else tuple(w.shape)}"
            return
        x, p, w_k, w_v = dog_setup()
        h = x + p
        out = attention(h @ w, h @ w_k, h @ w_v)[0]
        same = close(out[DOGS[0]], out[DOGS[1]], atol=1e-8, rtol=1e-5)
        rank = int(torch.linalg.matrix_rank(w))
        if rank < DOG_D - 1:
            yield False, (f"W_Q has rank {rank}: it throws away more than it must (W_Q = 0 also makes every row "
                          f"alike, by making attention uniform); keep rank {DOG_D - 1}")
            return
        if same:
            yield True, ("the two dogs get identical outputs with positions added: W_Q erases the one direction "
                         "in which their inputs differ, so their queries are equal, and every row shares the "
                         "same keys and values")
            return
        u = p[DOGS[0]] - p[DOGS[1]]
        if (w @ u).norm() < 1e-8 * u.norm() * w.norm():
            yield False, ("W_Q u = 0 is the column convention; here a query is the row (x + p) W_Q: "
                          "which side of W_Q must the difference meet?")
        elif any((p[i] @ w).norm() < 1e-8 * w.norm() for i in DOGS):
            yield False, "you erased one dog's position code, but the two inputs still differ"
        else:
            yield False, ("the two dog rows still differ: which of q, k, v of the two dogs does the difference "
                          "between their outputs come from?")

    return report("a W_Q with which the two dogs stay identical despite positions", answer, run,
                  "row i's output is softmax(q_i K^T / √d) V: which parts of that are the same for every row, "
                  "and what differs between the two dogs' inputs?")


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
        same = all(close(out[i], out[j], atol=1e-9, rtol=1e-9) for out in map(lambda s: _causal_outputs(tokens, s), range(3)))
        if same:
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


def causal_swap_changed_rows() -> list[int]:
    """Rows of a causal, position-free head whose output changes when the tokens at SWAP are swapped."""
    g = torch.Generator().manual_seed(0)
    d = 8
    x = torch.randn(SWAP_LEN, d, generator=g, dtype=torch.float64)  # distinct tokens
    wq, wk, wv = (torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5 for _ in range(3))
    order = list(range(SWAP_LEN))
    order[SWAP[0]], order[SWAP[1]] = SWAP[1], SWAP[0]
    before = attention(x @ wq, x @ wk, x @ wv, causal=True)[0]
    xs = x[order]
    after = attention(xs @ wq, xs @ wk, xs @ wv, causal=True)[0]
    return [i for i in range(SWAP_LEN) if not close(after[i], before[i], atol=1e-9, rtol=1e-5)]


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
        changed = set(causal_swap_changed_rows())
        extra, missing = rows - changed, changed - rows
        if not extra and not missing:
            yield True, ("right: row i depends only on its own token and the set of tokens 0..i; the rows after "
                         "the swap see the same query and the same (key, value) pairs, in another order")
            return
        if any(i < SWAP[0] for i in extra):
            yield False, "a row before position 2 cannot reach either swapped token"
        if any(i > SWAP[1] for i in extra):
            yield False, ("a row after position 5 that you list sees its old query and its old keys and values, "
                          "only reordered: think about section 1's invariance")
        if missing:
            many = len(missing) > 1
            yield False, (f"{len(missing)} {'rows that change are' if many else 'row that changes is'} "
                          "missing from your list")

    return report("which rows of a causal head change when tokens 2 and 5 swap", answer, run,
                  "row i sees its own token as the query and the tokens 0..i as keys and values; "
                  "for which i does the swap change the query, and for which the set of keys and values?")
