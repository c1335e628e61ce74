"""Checkers for notebooks/06_alibi.ipynb."""
from __future__ import annotations

import math
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterable, Iterator
from unittest import mock

import torch

from .. import alibi as alibi_module
from .. import fast_attention
from ..alibi import alibi_bias, alibi_bias_two_sided, alibi_slopes
from ._core import Verdict, close, report

__all__ = ["alibi_slopes_recipe", "alibi_bias_entries", "is_causal_alibi", "row_shift_modes", "head_reach"]


def alibi_slopes_recipe(fn: Callable[[int], Any] | None) -> bool | None:
    """Exercise: write slopes(num_heads) -> list/tensor of H slopes, for any H >= 1."""

    def run(fn: Callable[[int], Any]) -> Iterable[Verdict]:
        for n in (1, 2, 4, 8, 16, 3, 5, 6, 7, 12, 24):
            got = fn(n)
            want = alibi_slopes(n, dtype=torch.float64)
            ok = close(got, want, atol=1e-9)
            naive = ok or close(got, [2 ** (-8 * h / n) for h in range(1, n + 1)], atol=1e-9)
            yield ok, f"{n} heads: " + ("right" if ok else "the plain 2**(-8h/H), which is not the recipe for "
                                        "this H" if naive else "wrong")

    return report("ALiBi slopes for any number of heads", fn, run,
                  "§1 of the chapter states the recipe in words: which power of two lies just below H, and from "
                  "which longer sequence do the remaining heads come? Compare your 6-head list with the one §1 prints.")


def alibi_bias_entries(answer: Any) -> bool | None:
    """Exercise: causal ALiBi with 8 heads and 10 positions; give (bias[2, 7, 2], bias[2, 7, 9]).

    Heads are counted from 0, so head 2 is the third head.
    """

    def run(answer: Any) -> Iterable[Verdict]:
        if not isinstance(answer, (tuple, list)) or len(answer) != 2:
            yield False, f"expected a pair (value at j=2, value at j=9), got {answer!r}"
            return
        b = alibi_bias(8, 10)
        below, above = float(answer[0]), float(answer[1])
        want_below, want_above = b[2, 7, 2].item(), b[2, 7, 9].item()
        yield math.isclose(below, want_below, abs_tol=1e-6), (
            "bias[2, 7, 2] is right" if math.isclose(below, want_below, abs_tol=1e-6)
            else f"bias[2, 7, 2]: not {below}")
        yield above == want_above, (
            "bias[2, 7, 9] is right" if above == want_above
            else f"bias[2, 7, 9]: got {above}; key 9 comes after query 7")

    return report("reading a causal ALiBi bias", answer, run,
                  "first ask whether query 7 can see the key at all. For a visible key you need head 2's slope "
                  "(§1 lists the 8 slopes, counting heads from 1; here they count from 0) and the distance back.")


def _bias_cases() -> list[tuple[str, torch.Tensor, bool]]:
    g = torch.Generator().manual_seed(6)
    causal6 = alibi_bias(6, 7)
    naive = torch.tensor([2 ** (-8 * h / 6) for h in range(1, 7)])
    mj = alibi_slopes(4).view(-1, 1, 1) * torch.arange(5.0)
    mj = mj.masked_fill(torch.ones(5, 5, dtype=torch.bool).triu(1), float("-inf"))
    left = torch.rand(4, generator=g)
    return [
        ("causal ALiBi, 8 heads, length 5", alibi_bias(8, 5), True),
        ("causal ALiBi, 6 heads, length 7", causal6, True),
        ("causal ALiBi, 1 head, length 3", alibi_bias(1, 3), True),
        ("symmetric ALiBi", alibi_bias(8, 5, mode="symmetric"), False),
        ("non-symmetric ALiBi", alibi_bias(8, 5, mode="nonsymmetric"), False),
        ("causal with the naive 2**(-8h/6) slopes", alibi_bias(6, 7, slopes=naive), False),
        ("+m*j with a causal mask (same softmax, different bias)", mj, False),
        ("a causal ALiBi with its heads in reverse order", causal6.flip(0), False),
        ("a transposed causal ALiBi", alibi_bias(8, 5).transpose(-1, -2), False),
        ("learned two-sided slopes", alibi_bias_two_sided(left, left, 5), False),
    ]


class _LibraryShortcut(Exception):
    """Raised when the learner's is_causal_alibi asks the library for the very bias it must recognise."""


@contextmanager
def _without_alibi_bias() -> Iterator[None]:
    """While the learner's function runs, pl.alibi_bias (and what builds on it) refuses to work."""

    def refuse(*_: Any, **__: Any) -> None:
        raise _LibraryShortcut

    import posenc_lib

    with ExitStack() as stack:
        for module in (posenc_lib, alibi_module, fast_attention):
            stack.enter_context(mock.patch.object(module, "alibi_bias", refuse))
        yield


def is_causal_alibi(fn: Callable[[torch.Tensor], Any] | None) -> bool | None:
    """Exercise: fn(bias (H, L, L)) -> True exactly when bias equals causal ALiBi (Press's slopes),
    built without pl.alibi_bias (the point is to know what to compare)."""

    def run(fn: Callable[[torch.Tensor], Any]) -> Iterable[Verdict]:
        cases = _bias_cases()
        verdicts = []
        with _without_alibi_bias():  # collected first, so the patch is gone before anything is reported
            for name, bias, want in cases:
                try:
                    got = fn(bias.clone())
                except _LibraryShortcut:
                    verdicts = [(False, "your function calls pl.alibi_bias: build the causal bias yourself "
                                        "(pl.alibi_slopes is allowed)")]
                    break
                ok = isinstance(got, (bool, torch.Tensor)) and bool(got) == want
                verdicts.append((ok, f"{name}: " + ("right" if ok else f"wrong ({got!r})")))
        yield from verdicts

    return report("is this matrix causal ALiBi?", fn, run,
                  "look at which impostors got through: each agrees with causal ALiBi on part of the matrix "
                  "(a triangle, the softmax, the shape). Which entries must you compare, against what, and does your "
                  "comparison treat two -inf entries as equal?")


ROW_SHIFT_MODES = ("causal", "symmetric", "nonsymmetric", "learned")


def row_shift_modes(answer: Any) -> bool | None:
    """Exercise: for which forms does +m_h*j (same -inf mask) give the same attention weights?

    answer: a set/list of names from ("causal", "symmetric", "nonsymmetric", "learned")
    """

    def run(answer: Any) -> Iterable[Verdict]:
        if isinstance(answer, str) or not isinstance(answer, (set, frozenset, list, tuple)):
            yield False, f"expected a set of names such as {{'causal'}}, got {answer!r}"
            return
        chosen = set(answer)
        unknown = chosen - set(ROW_SHIFT_MODES)
        if unknown:
            yield False, f"unknown names {sorted(unknown)}; choose from {ROW_SHIFT_MODES}"
            return
        why = {
            "causal": "every visible key has j <= i, so -m(i - j) = m*j - m*i and -m*i is constant in the row",
            "symmetric": "-m|i - j| is m*j - m*i left of the diagonal but m*i - m*j right of it: no single row constant",
            "nonsymmetric": "the right-looking heads need -m*j (they see j >= i), so +m*j is wrong for half the heads",
            "learned": "nothing is masked and the two sides have different slopes: no row constant fixes both",
        }
        wrong = 0  # counted, not named: naming a misplaced form would give the answer away
        for mode in ROW_SHIFT_MODES:
            want = mode == "causal"
            if (mode in chosen) == want:
                yield True, f"{mode}: {'same' if want else 'different'} weights ({why[mode]})"
            else:
                wrong += 1
        if wrong:
            yield False, (f"{wrong} of the four forms {'is' if wrong == 1 else 'are'} on the wrong side: write each "
                          "bias over the keys a row can see, as the hint says")

    return report("where does the +m*j shortcut work?", answer, run,
                  "softmax ignores a constant added to a whole row. For each form and head, take one row i and "
                  "only the keys it can see: is the bias there +m*j plus something that depends on i alone?")


REACH_FRACTION = 0.01  # "below 1% of the weight on the query's own token"


def _reach(slope: float) -> int:
    """Smallest whole distance D >= 1 with exp(-slope * D) < REACH_FRACTION (never an exact tie: ln 100 is irrational)."""
    return math.floor(math.log(1 / REACH_FRACTION) / slope) + 1


def head_reach(fn: Callable[[int], Any] | None) -> bool | None:
    """Exercise: fn(H) -> for each head, the smallest distance back at which its weight falls below 1%.

    With q.k = 0 and causal ALiBi over a long enough sequence, the weight on the key D steps back,
    divided by the weight on the query's own token (D = 0), drops below 0.01 first at D = fn(H)[h].
    """

    def run(fn: Callable[[int], Any]) -> Iterable[Verdict]:
        for n in (1, 8, 6, 12):
            got = fn(n)
            want = [_reach(m) for m in alibi_slopes(n, dtype=torch.float64).tolist()]
            try:
                values = [float(x) for x in (got.tolist() if isinstance(got, torch.Tensor) else got)]
            except (TypeError, ValueError):
                yield False, f"{n} heads: expected a list of {n} whole numbers, got {got!r}"
                continue
            if len(values) != n:
                yield False, f"{n} heads: expected {n} distances, one per head, got {len(values)}"
            elif any(x != round(x) for x in values):
                yield False, f"{n} heads: distances are whole numbers of tokens; round in the right direction"
            elif values == want:
                yield True, f"{n} heads: right"
            elif values == [w - 1 for w in want]:
                yield False, f"{n} heads: one step short: at those distances the weight is still above 1%"
            else:
                yield False, f"{n} heads: wrong for {sum(x != w for x, w in zip(values, want))} of the {n} heads"

    return report("how far back does each head look?", fn, run,
                  "with q·k = 0 every visible key's weight is proportional to exp(bias), so the weight D steps back "
                  "divided by the weight on the query itself depends only on D and the slope. Ask when that falls "
                  "below 1/100 and solve for the smallest whole D; or measure it with pl.attention on zeros over "
                  "a sequence long enough for the gentlest head.")
