"""Checkers for notebooks/01_why_positions.ipynb: attention without positions."""
from __future__ import annotations

from typing import Any, Callable, Iterator

import torch

from .. import absolute, permutation
from ..attention import attention
from ._core import Verdict, close, report

__all__ = ["reorder_matrix", "predict_equal", "order_aware_attention", "distinct_outputs", "causal_swap_rows"]

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
        hit = [n for n, xr in zip("abcd", x) if torch.allclose(r, xr)]
        names.append(hit[0] if hit else "?")
    return "[" + ", ".join(names) + "]"


# Exercise 2: predict, then run. Each item: (correct answer, why).
PREDICTIONS = {
    "a": (True, "without positions the two 'dog' rows have identical inputs, so identical queries, and attend "
                "over the same set of keys and values"),
    "b": (False, "adding p_2 and p_5 makes the two 'dog' inputs different vectors"),
    "c": (True, "a fixed query sees the same (key, value) pairs, only listed in another order: the weighted sum "
                "does not depend on the order of its terms"),
    "d": (False, "shuffling the keys alone pairs each weight with a different value"),
    "e": (True, "swapping two identical tokens gives back the very same input sequence"),
}


def predict_equal(answer: Any) -> bool | None:
    """Exercise 2: a dict {"a": bool, ..., "e": bool} of predictions "the two outputs are identical"."""

    def run(ans: Any) -> Iterator[Verdict]:
        if not isinstance(ans, dict):
            yield False, f"answer must be a dict like {{'a': True, 'b': False, ...}}, got {type(ans).__name__}"
            return
        wrong = 0  # counted, not named: naming a wrong True/False would give the answer away
        for key, (want, why) in PREDICTIONS.items():
            got = ans.get(key)
            if not isinstance(got, bool):
                yield False, f"({key}): answer True or False, got {got!r}"
            elif got == want:
                yield True, f"({key}): {want}: {why}"
            else:
                wrong += 1
        if wrong:
            yield False, (f"{wrong} of your predictions {'is' if wrong == 1 else 'are'} wrong: run the cases, "
                          "as sections 1 to 3 do, to find which")

    return report("predict whether the outputs are identical", answer, run,
                  "without positions, attention sees a set of (key, value) pairs; positions make equal tokens unequal")


def order_aware_attention(fn: Any) -> bool | None:
    """Exercise 3: fn(x, w_q, w_k, w_v) -> (n, d) self-attention with sinusoidal positions added to x first."""

    def run(f: Callable[..., Any]) -> Iterator[Verdict]:
        if not callable(f):
            yield False, f"answer must be a function fn(x, w_q, w_k, w_v), got {type(f).__name__}"
            return
        g = torch.Generator().manual_seed(1)
        n, d = 6, 8
        emb = torch.randn(4, d, generator=g)
        x = emb[torch.tensor([0, 1, 2, 3, 1, 0])]  # tokens 0 and 1 occur twice
        wq, wk, wv = (torch.randn(d, d, generator=g) / d**0.5 for _ in range(3))
        pos = absolute.sinusoidal_positions(n, d)
        got = f(x, wq, wk, wv)
        if isinstance(got, tuple):  # (output, weights) is fine too
            got = got[0]
        if not isinstance(got, torch.Tensor) or got.shape != (n, d):
            yield False, f"fn must return a ({n}, {d}) tensor, got {getattr(got, 'shape', type(got))}"
            return
        want = permutation.self_attention(x, wq, wk, wv, positions=pos)[0]
        blind = permutation.self_attention(x, wq, wk, wv)[0]
        after = _after_projection(x, wq, wk, wv, pos)
        aware = not torch.allclose(got[1], got[4], atol=1e-5)
        yield aware, ("the two copies of the same token get different outputs" if aware
                      else "the two copies of the same token still get identical outputs: no position reached them")
        if close(got, want, atol=1e-4):
            yield True, "matches softmax(QK^T/sqrt(d)) V with Q, K, V projected from x + P"
        elif close(got, blind, atol=1e-4):
            yield False, "this is attention without positions: add sinusoidal_positions(n, d) to x"
        elif close(got, after, atol=1e-4):
            yield False, "you added P after the projections (x W + P): add it to x before projecting, W(x + P)"
        else:
            yield False, "the values differ from softmax(QK^T/sqrt(d)) V with Q = (x + P) w_q, K = (x + P) w_k, V = (x + P) w_v"

    return report("self-attention that knows the order", fn, run,
                  "section 3 compares the two places a position code can go and runs the usual one; "
                  "build the code for this x's length and width, and keep attention itself as in section 1")


def _after_projection(x: torch.Tensor, wq: torch.Tensor, wk: torch.Tensor, wv: torch.Tensor,
                      pos: torch.Tensor) -> torch.Tensor:
    """The source's form (positions added after projecting), used to recognise that mistake."""
    return attention(x @ wq + pos, x @ wk + pos, x @ wv + pos)[0]


SENTENCE = "the cat saw the cat and the dog".split()


def _count_distinct_rows(out: torch.Tensor) -> int:
    reps: list[torch.Tensor] = []
    for r in out:
        if not any(torch.allclose(r, s, atol=1e-5) for s in reps):
            reps.append(r)
    return len(reps)


def distinct_output_counts() -> tuple[int, int]:
    """Count distinct self-attention output rows for SENTENCE without and with sinusoidal positions."""
    vocab = sorted(set(SENTENCE))
    g = torch.Generator().manual_seed(0)
    d = 8
    emb = torch.randn(len(vocab), d, generator=g)
    x = emb[torch.tensor([vocab.index(w) for w in SENTENCE])]
    wq, wk, wv = (torch.randn(d, d, generator=g) / d**0.5 for _ in range(3))
    blind = permutation.self_attention(x, wq, wk, wv)[0]
    aware = permutation.self_attention(x, wq, wk, wv, positions=absolute.sinusoidal_positions(len(SENTENCE), d))[0]
    return _count_distinct_rows(blind), _count_distinct_rows(aware)


def distinct_outputs(answer: Any) -> bool | None:
    """Exercise 4: (without positions, with positions) = numbers of distinct output rows."""

    def run(ans: Any) -> Iterator[Verdict]:
        if not isinstance(ans, (tuple, list)) or len(ans) != 2:
            yield False, f"answer must be a pair (without, with), got {ans!r}"
            return
        blind, aware = distinct_output_counts()
        yield ans[0] == blind, (f"without positions: {blind} distinct rows, one per distinct word" if ans[0] == blind
                                else f"without positions: not {ans[0]}; which of the 8 input rows are the very same vector?")
        yield ans[1] == aware, (f"with positions: {aware} distinct rows, one per token" if ans[1] == aware
                                else f"with positions: not {ans[1]}; once p_i is added, are any two input rows still equal?")

    return report(f"distinct output rows for '{' '.join(SENTENCE)}'", answer, run,
                  "equal inputs give equal outputs: which input rows are equal without, and with, p_i?")


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
    return [i for i in range(SWAP_LEN) if not torch.allclose(after[i], before[i], atol=1e-9)]


def causal_swap_rows(answer: Any) -> bool | None:
    """Exercise 5: the output rows of a causal head (no positions, 8 distinct tokens) that change
    when the tokens at positions 2 and 5 are swapped."""

    def run(ans: Any) -> Iterator[Verdict]:
        if isinstance(ans, torch.Tensor):
            ans = ans.tolist()
        if not isinstance(ans, (list, tuple, set)) or not all(isinstance(i, int) and not isinstance(i, bool)
                                                               for i in ans):
            yield False, f"answer must be a list of row indices (integers), got {ans!r}"
            return
        rows = set(ans)
        bad = sorted(i for i in rows if not 0 <= i < SWAP_LEN)
        if bad:
            yield False, f"rows are numbered 0 to {SWAP_LEN - 1} (positions count from 0), got {bad}"
            return
        changed = set(causal_swap_changed_rows())
        extra, missing = rows - changed, changed - rows
        if not extra and not missing:
            yield True, ("rows 2 to 5 change: row i depends only on its own token and the set of tokens 0..i; "
                         "rows 6 and 7 see the same query and the same (key, value) pairs, in another order")
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
