"""Checkers for notebooks/06_alibi.ipynb."""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F

from .. import alibi as alibi_module
from .. import attention as attention_module
from .. import fast_attention
from ..alibi import alibi_bias, alibi_bias_two_sided, alibi_slopes
from ._core import Verdict, close, float64_tensor, report, whole_number
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["is_causal_alibi", "alibi_bf16_collapse", "nonsym_one_row", "alibi_far_share"]


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


def _alibi_bias_everywhere() -> tuple[tuple[Any, str, str], ...]:
    """pl.alibi_bias under every name a learner's function can reach it by."""
    import posenc_lib

    return tuple((module, "alibi_bias", "pl.alibi_bias") for module in (posenc_lib, alibi_module, fast_attention))


def is_causal_alibi(fn: Callable[[torch.Tensor], Any] | None) -> bool | None:
    """Exercise: fn(bias (H, L, L)) -> True exactly when bias equals causal ALiBi (Press's slopes),
    built without pl.alibi_bias (the point is to know what to compare)."""

    def run(fn: Callable[[torch.Tensor], Any]) -> Iterable[Verdict]:
        cases = _bias_cases()
        answers, stopped = answers_under_guard(fn, [(bias.clone(),) for _, bias, _ in cases],
                                               _alibi_bias_everywhere(), loops=False)
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function",
                                  shortcut="build the causal bias yourself (pl.alibi_slopes is allowed)")
            return
        for (name, _, want), got in zip(cases, answers.values()):
            ok = isinstance(got, (bool, torch.Tensor)) and bool(got) == want
            yield ok, f"{name}: " + ("right" if ok else f"wrong ({got!r})")

    return report("is this matrix causal ALiBi?", fn, run,
                  "look at which impostors got through: each agrees with causal ALiBi on part of the matrix "
                  "(a triangle, the softmax, the shape). Which entries must you compare, against what, and does your "
                  "comparison treat two -inf entries as equal?")


BF16_HEADS = 8  # Exercise 2: head 1 of 8 heads, BLOOM's +m_h j row stored in bfloat16


def _first_collapse(num_heads: int = BF16_HEADS, longest: int = 5000) -> int:
    """The smallest L at which the last two keys' +m_1 j biases round to one bfloat16 value (float32 product first)."""
    slope = alibi_slopes(num_heads)[0]
    j = torch.arange(longest)
    row = (slope * j).to(torch.bfloat16)  # entry j is the bias of key j, whatever L is
    same = (row[1:] == row[:-1]).nonzero().flatten()  # keys j and j + 1 share a value
    return int(same[0]) + 2  # keys L - 2 = j and L - 1 = j + 1


def alibi_bf16_collapse(answer: Any) -> bool | None:
    """Exercise 2: the smallest length at which head 1's two nearest keys share one bfloat16 +m_h j bias."""

    def run(ans: Any) -> Iterable[Verdict]:
        got = whole_number(ans)
        if got is None:
            yield False, f"expected a whole length L, got {ans!r}"
            return
        want = _first_collapse()
        if got == want:
            yield True, "right: the first length at which head 1 cannot tell its two nearest keys apart"
        elif got == want - 1:
            yield False, ("at that length both biases are still stored exactly: look at the spacing of "
                          "bfloat16 numbers just below and just above the larger one")
        elif got == want + 1:
            yield False, "a tie in bfloat16 rounds to the even neighbour, not up"
        elif got > want and got <= 2 * want:
            yield False, ("you waited for a spacing of 2 between bfloat16 numbers; a spacing of 1 already "
                          "merges a value that ends in .5 with a neighbour")
        elif got > want:
            yield False, f"at L = {got} the two keys have long shared their bias: it happens much earlier"
        else:
            yield False, f"at L = {got} the two nearest keys still get different bfloat16 biases"

    return report("when head 1's two nearest keys share one bfloat16 bias", answer, run,
                  "bfloat16 keeps 8 significant bits: how far apart are its numbers near the two biases, and "
                  "which way does a value exactly half-way between two of them go?")


NONSYM_CASES = ((8, 10), (4, 7), (2, 5), (6, 9))


def nonsym_one_row(fn: Callable[[int, int], Any] | None) -> bool | None:
    """Exercise 3: fn(H, L) -> an (H, 1, L) bias that, with the non-symmetric form's -inf mask, gives its weights."""

    def run(fn: Callable[[int, int], Any]) -> Iterable[Verdict]:
        g = torch.Generator().manual_seed(3)
        for H, L in NONSYM_CASES:
            got = fn(H, L)
            if not isinstance(got, torch.Tensor) or tuple(got.shape) != (H, 1, L):
                yield False, f"H={H}, L={L}: return an ({H}, 1, {L}) tensor, got {getattr(got, 'shape', got)!r}"
                return
            row = got.detach().double()
            exact = alibi_bias(H, L, mode="nonsymmetric", dtype=torch.float64)
            scores = torch.randn(H, L, L, dtype=torch.float64, generator=g)
            want = (scores + exact).softmax(-1)
            have = (scores + row.expand(H, L, L)).masked_fill(torch.isinf(exact), float("-inf")).softmax(-1)
            ok = [close(have[h], want[h], atol=1e-6, rtol=1e-5) for h in range(H)]
            if all(ok):
                continue
            half = H // 2
            steps = row[:, 0, 1:] - row[:, 0, :-1]  # per head: the change from key j to key j + 1
            slopes = alibi_slopes(half, dtype=torch.float64).repeat(2)
            if not close(steps.abs(), slopes[:, None].expand_as(steps), atol=1e-6, rtol=1e-5):
                yield False, (f"H={H}: the steps of your rows are not the form's slopes; which slopes does the "
                              "non-symmetric form use in each half (§2)?")
            elif all(ok[:half]) and not any(ok[half:]):
                yield False, (f"H={H}: the left-looking half is right; the right-looking half sees keys j >= i, "
                              "where the distance is j - i: which sign of j does its bias carry?")
            elif all(ok[half:]) and not any(ok[:half]):
                yield False, f"H={H}: the right-looking half is right; the left-looking half sees keys j <= i"
            else:
                yield False, f"H={H}: the weights differ for {ok.count(False)} of the {H} heads"
            return
        yield True, f"the same weights as the non-symmetric form for (H, L) = {', '.join(map(str, NONSYM_CASES))}"

    return report("a one-row bias for the non-symmetric form", fn, run,
                  "which keys does the mask leave a row of each half, and what can differ between two biases "
                  "without changing a single weight?")


# (H, train_len, test_len): the last one has 10^12 keys, too many to weigh one by one (loop or tensor).
FAR_CASES = ((8, 1024, 2048), (6, 64, 512), (16, 100, 1000), (1, 10, 400), (4, 300, 10**12))
FAR_RTOL, FAR_ATOL = 1e-4, 1e-9  # float32 closed forms are within 3e-5 (relative) of the float64 shares


def _far_share(H: int, train_len: int, test_len: int) -> torch.Tensor:
    """The last query's weight on distances >= train_len, q.k = 0, measured with a softmax (no formula);
    for test_len beyond 10^5, the keys past 10^5 are left out (their weight is below 1e-150)."""
    keys = min(test_len, 10**5)
    w = alibi_bias(H, 1, keys, dtype=torch.float64).softmax(-1)[:, 0]  # (H, keys), key j
    return w[:, : keys - train_len].sum(-1)  # distances train_len .. keys - 1


def _shortcuts() -> tuple[tuple[Any, str, str], ...]:
    """What measures the weights instead of deriving them: the bias itself, and every softmax."""
    softmaxes = ((torch, "softmax", "torch.softmax"), (F, "softmax", "a softmax"), (torch.Tensor, "softmax", "a softmax"),
                 (torch.special, "softmax", "a softmax"), (torch, "log_softmax", "a softmax"),
                 (F, "log_softmax", "a softmax"), (torch.Tensor, "log_softmax", "a softmax"),
                 (torch, "logsumexp", "a logsumexp"), (torch.Tensor, "logsumexp", "a logsumexp"),
                 (attention_module, "attention", "pl.attention"))
    import posenc_lib

    return _alibi_bias_everywhere() + softmaxes + ((posenc_lib, "attention", "pl.attention"),)


def alibi_far_share(fn: Callable[[int, int, int], Any] | None) -> bool | None:
    """Exercise 4: fn(H, train_len, test_len) -> per head, the share of the last query's weight on distances
    >= train_len (causal ALiBi, q.k = 0, an input of test_len tokens), as a closed form: pl.alibi_bias, every
    softmax and arrays of 10^8 entries refuse to run while fn does, and a loop over the keys runs out of steps."""

    def as_shares(got: Any, n: int) -> torch.Tensor | None:
        t = float64_tensor(got)
        return t.flatten() if t is not None and t.numel() == n else None

    def near(a: torch.Tensor, b: torch.Tensor) -> bool:
        return close(a, b, atol=FAR_ATOL, rtol=FAR_RTOL)

    def run(fn: Callable[[int, int, int], Any]) -> Iterable[Verdict]:
        answers, stopped = answers_under_guard(fn, FAR_CASES, _shortcuts())
        if stopped is not None:
            case, why = stopped
            yield stopped_verdict(why, f"far_share{case}", shortcut="that measures the weights; derive how they add up "
                                  "instead", loop=f"runs a loop over the keys ({case[2]:.0e} of them): derive how the "
                                  "weights add up instead of adding them")
            return
        for (H, T, L), raw in answers.items():
            case = f"far_share({H}, {T}, {L})"
            got = as_shares(raw, H)
            if got is None:
                yield False, f"{case}: expected {H} numbers, one per head"
                return
            want = _far_share(H, T, L)
            if near(got, want):
                continue
            m = alibi_slopes(H, dtype=torch.float64)
            g = torch.exp(-m)
            beyond = {"infinite": g**T, "one past": (g ** (T + 1) - g**L) / (1 - g**L),
                      "one short": (g ** (T - 1) - g**L) / (1 - g**L)}
            naive = torch.exp(-torch.tensor([2 ** (-8 * h / H) for h in range(1, H + 1)], dtype=torch.float64))
            if near(got, beyond["infinite"]):
                yield False, f"{case}: you summed the series to infinity; the input has only test_len keys"
            elif any(near(got, beyond[k]) for k in ("one past", "one short")):
                yield False, (f"{case}: off by one; training showed distances 0 to train_len - 1, which is the "
                              "first one it never showed?")
            elif near(got, (naive**T - naive**L) / (1 - naive**L)):
                yield False, f"{case}: those are the plain 2**(-8h/H) slopes; for this H ALiBi uses §1's recipe"
            elif near(got, 1 - want):
                yield False, f"{case}: that is the share of the distances training did show, not of the others"
            else:
                wrong = sum(not near(got[h], want[h]) for h in range(H))
                yield False, f"{case}: not the shares for {wrong} of the {H} heads"
            return
        yield True, (f"right for {len(FAR_CASES)} settings, from 1 head to 16 and up to 10^12 tokens: only the "
                     "gentlest heads can put weight beyond the training length, and only a little")

    return report("how much weight lies beyond the training length", fn, run,
                  "§4 drew these weights on a log scale: what does a straight line there say about how the "
                  "weights of the keys, read from the query backwards, relate to each other?")
