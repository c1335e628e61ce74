"""Checkers for notebooks/06_alibi.ipynb.

No function or constant here returns or holds an answer: Exercise 2's answers are salted digests (``sealed``) of
formats with a rounding no torch dtype has; Exercises 1 and 4 are compared with the chapter's library functions (``alibi_bias``, a
softmax) on inputs the learner does not see (Exercise 4 while those same functions refuse to run for the learner's
code); Exercise 3 compares the learner's rows with the weights of hidden biases, and knows which hidden heads no
row serves from how it built them.
"""
from __future__ import annotations

import math

from typing import Any, Callable, Iterable

import torch
import torch.nn.functional as F

from .. import alibi as alibi_module
from .. import attention as attention_module
from .. import fast_attention
from ..alibi import alibi_bias, alibi_slopes
from ._core import Verdict, close, float64_tensor, report, sealed, whole_number
from ._guard import ELEMENTS, answers_under_guard, stopped_verdict

__all__ = ["ring_bias", "alibi_shared_bias", "one_row_bias", "alibi_far_share"]


def _alibi_bias_everywhere() -> tuple[tuple[Any, str, str], ...]:
    """pl.alibi_bias under every name a learner's function can reach it by (pl.ALiBi calls it too)."""
    import posenc_lib

    return tuple((module, "alibi_bias", "pl.alibi_bias") for module in (posenc_lib, alibi_module, fast_attention))


def _weights(bias: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
    """softmax over the last dimension of scores + bias, float64; a row with nothing visible stays all zeros."""
    return (scores + bias).softmax(-1).nan_to_num(0.0)


# ---------------------------------------------------------------- Exercise 1: ALiBi in a ring buffer

# (H, W, t): the ring not yet full, just full, wrapped, 6 heads, a full turn, 10^12 steps (12 heads: slopes such as
# 2^-0.5, whose product with a position near 10^12 is rounded even in float64).
RING_CASES = ((8, 6, 3), (8, 6, 5), (8, 6, 13), (6, 5, 17), (4, 8, 16), (12, 4, 10**12))


def ring_bias(fn: Callable[[int, int, int], Any] | None) -> bool | None:
    """Exercise 1: fn(H, W, t) -> the (H, 1, W) bias of the query at position t over a ring buffer of W slots
    (position p's key in slot p mod W), giving the weights causal ALiBi gives over the last W keys."""

    def reference(H: int, W: int, t: int) -> torch.Tensor:
        """Replays the ring (every position written in turn) and reads each slot's bias off pl.alibi_bias's last
        row. A full ring at step t holds what it held at W + t mod W, W steps of positions later: same weights."""
        t = t if t < 2 * W else W + t % W
        slots: list[int | None] = [None] * W
        for p in range(t + 1):
            slots[p % W] = p
        row = alibi_bias(H, 1, t + 1, dtype=torch.float64)[:, 0]  # (H, t + 1): the bias of each key position
        hidden = torch.full((H,), float("-inf"), dtype=torch.float64)
        return torch.stack([hidden if p is None else row[:, p] for p in slots], -1)  # (H, W)

    def right_at(fn: Callable[[int, int, int], Any], H: int, W: int, t: int, g: torch.Generator) -> bool:
        """Whether fn's row for (H, W, t) gives the reference weights; an error or a wrong shape counts as wrong."""
        try:
            row = float64_tensor(fn(H, W, t))
        except Exception:  # the learner's code: any failure means 'not right here'
            return False
        if row is None or tuple(row.shape) != (H, 1, W):
            return False
        scores = torch.randn(H, W, dtype=torch.float64, generator=g)
        return close(_weights(row[:, 0], scores), _weights(reference(H, W, t), scores), atol=1e-6, rtol=1e-5)

    def first_lost_position(fn: Callable[[int, int, int], Any], H: int, W: int, g: torch.Generator) -> int | None:
        """The significant bits of bfloat16, float16 or float32 if fn is right at t = 2^bits - 1 and wrong at 2^bits + 1
        (the first whole number such a format rounds), else None: what the answer shows, not a guess at its code."""
        for bits in (8, 11, 24):
            if right_at(fn, H, W, 2**bits - 1, g) and not right_at(fn, H, W, 2**bits + 1, g):
                return bits
        return None

    def run(fn: Callable[[int, int, int], Any]) -> Iterable[Verdict]:
        answers, stopped = answers_under_guard(fn, RING_CASES)
        if stopped is not None:
            case, why = stopped
            yield stopped_verdict(why, f"ring_bias{case}",
                                  shortcut=f"that lists every position up to t = {case[2]:.0e}; a slot's content "
                                           "can be read without listing how the ring was written",
                                  loop=f"replays the ring position by position ({case[2]:.0e} steps): a slot's "
                                       "content can be read without replaying how it was written")
            return
        g = torch.Generator().manual_seed(1)
        for (H, W, t), got in answers.items():
            case = f"ring_bias({H}, {W}, {t})"
            row = float64_tensor(got)
            if row is None or tuple(row.shape) != (H, 1, W):
                yield False, f"{case}: return an ({H}, 1, {W}) tensor, got {getattr(got, 'shape', got)!r:.60}"
                return
            row = row[:, 0]
            want = reference(H, W, t)
            scores = torch.randn(H, W, dtype=torch.float64, generator=g)
            if close(_weights(row, scores), _weights(want, scores), atol=1e-6, rtol=1e-5):
                continue
            held = torch.isfinite(want[0])
            finite = torch.isfinite(row)
            m = alibi_slopes(H, dtype=torch.float64)[:, None]
            slot = torch.arange(W, dtype=torch.float64)
            by_slot = (m * slot).masked_fill(slot > t, float("-inf"))  # slot s read as position s
            naive = torch.tensor([2 ** (-8 * h / H) for h in range(1, H + 1)], dtype=torch.float64)[:, None]
            with_naive = torch.where(held, want * naive / m, want)  # the same distances, the plain 2**(-8h/H)
            flipped = torch.where(finite, -row, row)
            ahead = (slot - t).remainder(W)  # the distance counted the other way round the ring
            backwards = (-m * ahead).masked_fill(ahead > t, float("-inf"))
            same = lambda other: close(_weights(row, scores), _weights(other, scores), atol=1e-6, rtol=1e-5)  # noqa: E731
            if same(by_slot):
                yield False, f"{case}: the ring has wrapped: slot s no longer holds position s"
            elif same(backwards):
                yield False, f"{case}: you count the distance the wrong way round the ring"
            elif close(_weights(flipped, scores), _weights(want, scores), atol=1e-6, rtol=1e-5):
                yield False, f"{case}: the signs are flipped: ALiBi lowers the score of a far key"
            elif H & (H - 1) and same(with_naive):
                yield False, f"{case}: those are the plain 2**(-8h/H) slopes; for H = {H} ALiBi uses §1's recipe"
            elif not bool(finite[:, held].all()):
                yield False, f"{case}: a slot that holds a key gets no weight at all"
            elif bool(finite[:, ~held].any()):
                yield False, f"{case}: the ring is not full yet; slots that hold nothing must get no weight (-inf)"
            elif row[finite].abs().max() > 1e6:
                yield False, (f"{case}: your biases are numbers near m·t (up to {row[finite].abs().max():.0e}); "
                              "float64 stores numbers that large only to about 1e-4, so their differences, all a "
                              "softmax uses, are off by that much and the weights by more than this check's 1e-6 "
                              "(§3, 'in low precision')")
            elif (bits := first_lost_position(fn, H, W, g)) is not None:
                yield False, (f"{case}: your weights are right at t = 2^{bits} - 1 and wrong at t = 2^{bits} + 1, the "
                              f"first whole number that a format of {bits} significant bits cannot hold (float32 "
                              "keeps 24): a position rounded that way is read as another one")
            else:
                wrong = sum(not close(_weights(row[h], scores[h]), _weights(want[h], scores[h]), atol=1e-6, rtol=1e-5)
                            for h in range(H))
                yield False, f"{case}: the weights differ from causal ALiBi's over the last {W} keys for {wrong} of {H} heads"
            return
        yield True, (f"the weights of causal ALiBi over the last W keys, for {len(RING_CASES)} rings, from a ring not "
                     "yet full to one 10^12 steps on")

    return report("ALiBi's bias over a ring buffer", fn, run,
                  "ALiBi charges a key for how far back it is, not for where it is stored; a ring of W slots counts "
                  "the way a clock counts hours.")


# ---------------------------------------------------------------- Exercise 2: when two keys share one stored bias

# (p, k): a format of p significant bits that rounds a tie away from zero (no torch dtype does) holds BLOOM's +m j
# row of a head with slope m = 2^-k: 8 and 11 bits (bfloat16's and float16's widths), 24, and widths torch has no
# dtype for, up to 52 (every answer fits a float64 exactly, so any number type can carry it).
_SHARED_RIGHT = {  # sealed([p, k, answer], "ch06.first_shared") per case
    (8, 1): "b58300a7f6efb01c421163a6",
    (8, 8): "4cfdcfeb2ee2c8678e5893cf",
    (11, 3): "c4862c5b66fea1f0bb49dbe1",
    (24, 5): "202d764732a90683421d5bb3",
    (33, 4): "abf74fc9f82b3c154242af68",
    (40, 2): "42226b4a295c9d66cc5eee16",
    (52, 8): "a25348f97649da4abd85a82c",
}
_SHARED_WRONG = {  # sealed wrong answers of every case -> the misconception (a key of _SHARED_MISCONCEPTIONS)
    "783596bbd3ac1d25cce95b0e": "half_down", "d2bf30714ca10da7f9483a29": "spacing_2",
    "0d42c54b1961c810d0760735": "values", "76beb0de26248c977766a1cb": "half_down",
    "69e947e421d062488342c0d1": "spacing_2", "a6327dd5d386f515af55e5f5": "values",
    "3440a8f05f8db55cde297baa": "half_down", "d8e103d6bfdb4c60158bb800": "spacing_2",
    "5ddaa421ef9d5bea94896063": "values", "86a0fedd17073a01a39e5df0": "half_down",
    "cf24fd613eac8e5942f8cc92": "spacing_2", "f887924c72ed30690537a644": "values",
    "fd5b6f0b2e4868a13703a696": "half_down", "58afd62a4384b9fa7abe68c1": "spacing_2",
    "9adf453dd11410549106d808": "values", "6d6412d5ed3f5446fe6c1395": "half_down",
    "f91332b2fe11d9d33e157566": "spacing_2", "1cd3a0491c94794977a46244": "values",
    "2f34f7a13dd446d744f6045c": "half_down", "72d596417fa330dca4ccd9ff": "spacing_2",
    "bd1e708b56080624d4aeeed5": "values",
    # a format of one significant bit more, or fewer, than p (the leading 1 counted twice, or left out)
    "8c1b40e685d4ae18f674fe49": "bits", "cf4d45e08e7c6db415baac24": "bits", "cecae466a8c2c5b1a37b8d67": "bits",
    "cd160e531835719dfc524075": "bits", "e2735c4f3b7527f10a375ad5": "bits", "a3e522ca3559fe0e0432c3db": "bits",
    "488397dd056489fa22cd55e8": "bits", "dab92bf6e08025a5737a5a4f": "bits", "9ee45f3dae5e073c7c3b400b": "bits",
    "eb0b7b776906d2599644d91d": "bits", "5a741f429aeada923c7c5a4d": "bits", "19a661321ad981bb5f125c5e": "bits",
    "d562a2249a6eabd4f5dc6f11": "bits",
}
_SHARED_MISCONCEPTIONS = {
    "half_down": "at that length the two nearest keys (positions L - 1 and L - 2, counted from 0) share a bias only "
                 "if a value half-way between two stored numbers goes down (to even, as torch's formats do, or toward "
                 "zero); this format sends it away from zero",
    "spacing_2": "you waited for the format's spacing to reach twice the slope; a spacing of one slope's width "
                 "already merges a value that falls half-way between two stored numbers with a neighbour",
    "values": "your length moves with the slope as if the format kept a fixed number of digits after the point; "
              "its spacing is relative to the size of the numbers it stores",
    "bits": "your lengths are those of a format with another number of significant bits than p; the p significant "
            "bits count the leading 1 (bfloat16's 8 are that 1 and 7 stored bits)",
}


def alibi_shared_bias(fn: Callable[[int, int], Any] | None) -> bool | None:
    """Exercise 2: fn(p, k) -> the smallest length L at which BLOOM's +m_h j row, m = 2^-k, stored in a format of
    p significant bits (round to nearest, ties away from zero), gives the last query's two nearest keys (j = L - 1
    and L - 2) the same bias. A search over lengths is stopped (formats of up to 52 bits)."""

    def stored(n: int, bits: int) -> int:
        """The whole number n rounded to `bits` significant bits, ties away from zero (m = 2^-k scales every value
        alike, so the row's values n m round as n does)."""
        extra = n.bit_length() - bits
        if extra <= 0:
            return n
        q, r = divmod(n, 1 << extra)
        half = 1 << (extra - 1)
        return (q + (r >= half)) << extra

    def run(fn: Callable[[int, int], Any]) -> Iterable[Verdict]:
        answers, stopped = answers_under_guard(fn, list(_SHARED_RIGHT), elements_per_case=ELEMENTS)
        if stopped is not None:
            (p, k), why = stopped
            yield stopped_verdict(why, f"first_shared({p}, {k})", shortcut="work it out from how the format spaces "
                                  "its numbers instead", loop=f"searches length by length (lengths near 2^{p}): "
                                  "work it out from how the format spaces its numbers instead",
                                  grid="a search over lengths; work it out from how the format spaces its numbers")
            return
        named: dict[str, list[str]] = {}  # misconception -> the cases that show it
        first_wrong = None
        for (p, k), raw in answers.items():
            case = f"first_shared({p}, {k})"
            got = whole_number(raw)
            if got is None or got < 2:
                yield False, f"{case}: expected a whole length L >= 2, got {raw!r:.60}"
                return
            digest = sealed([p, k, got], "ch06.first_shared")
            if digest == _SHARED_RIGHT[(p, k)]:
                continue
            if digest in _SHARED_WRONG:
                named.setdefault(_SHARED_WRONG[digest], []).append(case)
            elif first_wrong is None:
                first_wrong = (case, got, p)
        by_slope = {k: whole_number(answers[(p, k)]) for p, k in answers if p == 8}  # one format, two slopes
        if len(set(by_slope.values())) > 1:  # what the answers show: the length moves with the slope
            yield False, f"first_shared(8, k) for k = {sorted(by_slope)}: {_SHARED_MISCONCEPTIONS['values']}"
            return
        if named:  # diagnosed on every case: the misconception the most cases show wins
            name = max(named, key=lambda n: len(named[n]))
            yield False, f"{named[name][0]}: {_SHARED_MISCONCEPTIONS[name]}"
            return
        if first_wrong is not None:
            case, got, p = first_wrong
            if stored(got - 2, p) == stored(got - 1, p):
                yield False, (f"{case}: at L = {got} the two nearest keys do share a bias, but a shorter input "
                              "already did")
            elif stored(got - 1, p) == got - 1 and stored(got - 2, p) == got - 2:
                yield False, (f"{case}: at L = {got} the two nearest keys sit at positions L - 1 and L - 2 (counted "
                              "from 0), and the format still holds both of their biases exactly: two biases that "
                              "nothing has rounded stay two")
            else:
                yield False, f"{case}: at L = {got} the two nearest keys get different stored biases"
            return
        yield True, (f"right for {len(_SHARED_RIGHT)} formats and slopes, from 8 significant bits (bfloat16's width) "
                     "to 52")

    return report("when the two nearest keys share one stored bias", fn, run,
                  "whether two nearby numbers survive as two depends on the format's spacing near them, which is "
                  "relative to their size, and on its rule for ties.")


# ---------------------------------------------------------------- Exercise 3: which distance biases fit one row

def one_row_bias(fn: Callable[[torch.Tensor], Any] | None) -> bool | None:
    """Exercise 3: fn(b (H, L) float64, the bias by distance) -> an (H, 1, L) row per head that, with the causal
    mask, gives every query the weights of b(i - j), or NaN for a head no row serves. Inputs up to 200 000 tokens:
    the whole L x L bias (4e10 entries) runs out of room and a Python loop over the queries out of steps (20 000
    lines for all cases: a design runs dozens)."""

    def hidden_cases() -> list[tuple[torch.Tensor, tuple[bool, ...]]]:
        """The hidden inputs: (H, L) biases by distance, b[h, d] for d = 0 .. L - 1, float64, and for each head
        whether one row serves every query (the checker's label, from how the head was built: a straight line in d,
        or anything with L = 2, does; the others do not). Kinds: ALiBi with a slope that is or is not a power of two,
        a flat head, a rising line, KERPLE's logarithm, T5-like buckets, a bonus on the diagonal, ALiBi clipped far
        back (only the last quarter of the distances leave the line), a line bent at the very last distance, and
        lines bent only in the middle (a tent, one distance off the line), which agree with their line at both ends
        and over their first and last steps."""
        g = torch.Generator().manual_seed(6)

        def d(L: int) -> torch.Tensor:
            return torch.arange(L, dtype=torch.float64)

        def buckets(L: int) -> torch.Tensor:
            edges = torch.tensor([0, 1, 2, 3, 4, 6, 9, 12, 10**9], dtype=torch.float64)
            values = torch.randn(len(edges), generator=g, dtype=torch.float64)
            return values[torch.bucketize(d(L), edges, right=True) - 1]

        kerple = lambda L: -1.5 * torch.log1p(0.8 * d(L))  # noqa: E731
        bonus = -d(12) / 8
        bonus[0] = 1.0
        bent = -d(5) / 2
        bent[4] += 1e-3

        def kinked(L: int, bump: float) -> torch.Tensor:
            """A line whose first two and last two steps are its slope's, bent in between: it meets the line at
            both ends, so a test of some steps, or of the ends alone, takes it for a line."""
            b = -d(L) / 4
            mid = (d(L) - (L - 1) / 2).abs()
            return b + bump * (L / 4 - mid).clamp(min=0)  # a tent over the middle half

        zigzag = -d(12) / 4
        zigzag[5] += 0.3  # one distance off the line, away from the ends
        big = 200_000
        return [
            (torch.stack([-d(12) / 4, -0.1234 * d(12), kerple(12), buckets(12), bonus, torch.full((12,), 0.7,
                          dtype=torch.float64)]), (True, True, False, False, False, True)),
            (torch.stack([kerple(2), buckets(2)]), (True, True)),
            (torch.stack([-d(5) / 3, bent, 0.25 - d(5)]), (True, False, True)),
            (torch.stack([kinked(12, 0.5), zigzag, kinked(12, -0.2), -0.3 * d(12)]), (False, False, False, True)),
            (torch.stack([-(2.0**-0.5) * d(big), -(2.0**-10) * d(big).clamp(max=150_000), 2.0 + 0.003 * d(big),
                          kerple(big), kinked(big, 1e-3)]), (True, False, True, False, False)),
        ]

    def query_rows(L: int) -> list[int]:
        return list(range(L)) if L <= 64 else [0, 1, 2, 1000, L // 2, 150_500, L - 2, L - 1]

    def serves(row: torch.Tensor, b: torch.Tensor, L: int, g: torch.Generator) -> bool:
        """Whether the row gives every checked query the weights of b(i - j), for random scores."""
        for i in query_rows(L):
            scores = torch.randn(i + 1, generator=g, dtype=torch.float64)
            want = (scores + b[: i + 1].flip(-1)).softmax(-1)  # key j = 0 .. i is i - j steps back
            if not close((scores + row[: i + 1]).softmax(-1), want, atol=1e-6, rtol=1e-5):
                return False
        return True

    def run(fn: Callable[[torch.Tensor], Any]) -> Iterable[Verdict]:
        cases = hidden_cases()
        answers, stopped = answers_under_guard(fn, [(b.clone(),) for b, _ in cases], steps=20_000)
        if stopped is not None:
            ((b,), why) = stopped
            yield stopped_verdict(why, f"one_row(<{b.shape[0]} heads, {b.shape[1]} distances>)",
                                  shortcut="the whole L x L bias does not fit; what must hold between the "
                                           "queries that share one row?",
                                  loop=f"runs a loop over the queries ({b.shape[1]} of them): what must hold "
                                       "between the queries that share one row?")
            return
        g = torch.Generator().manual_seed(3)
        missed, extra, ends, backwards, low = [], [], [], [], []
        for (b, has_row), raw in zip(cases, answers.values()):
            H, L = b.shape
            got = raw if isinstance(raw, torch.Tensor) else None
            if got is None or tuple(got.shape) != (H, 1, L):
                yield False, f"L={L}, H={H}: return an ({H}, 1, {L}) tensor, got {getattr(raw, 'shape', raw)!r:.60}"
                return
            row = got.detach().to("cpu", torch.float64)[:, 0]
            for h in range(H):
                nan = bool(torch.isnan(row[h]).all())
                if has_row[h] and nan:
                    missed.append(not bool(((b[h, 1:] - b[h, :-1]) == (b[h, 1] - b[h, 0])).all()))
                elif not has_row[h] and not nan:
                    last_only = close((row[h] - row[h, -1]), b[h].flip(-1) - b[h, 0], atol=1e-9)
                    step = b[h, 1:] - b[h, :-1]
                    straight_ends = L > 4 and abs(float(b[h, -1] - b[h, 0] - (L - 1) * step[0])) < 1e-9
                    extra.append(last_only)
                    ends.append(straight_ends)
                elif has_row[h] and not serves(row[h], b[h], L, g):
                    backwards.append(serves(row[h].flip(-1), b[h], L, g))
                    low.append(got.dtype != torch.float64 and L > 64)
        if not (missed or extra or backwards):
            yield True, ("every head that one row serves got one, for 2 to 200 000 tokens, and every other head "
                         "got NaN")
            return
        if any(backwards):
            yield False, ("some of your rows run the wrong way: they put the bias of distance d on key j = d, "
                          "while key j is i - j steps back from query i")
        elif backwards and all(low):
            yield False, ("your rows are right in exact arithmetic but stored in less than float64; at 200 000 "
                          "tokens the row's values are large and the format's spacing there is wider than the "
                          "differences the softmax needs (§3)")
        elif extra and all(ends) and not missed:
            yield False, ("some heads you gave a row are straight where you looked but not everywhere: agreeing "
                          "with a line at the ends, or over a few steps, does not make a bias a line")
        elif extra and all(extra) and not missed:
            yield False, ("your rows give the last query (which sees every key) its weights, but a row must serve "
                          "every query at once, and for some heads no row does: return NaN for those")
        elif missed and any(missed) and not extra:
            yield False, ("you gave NaN to some heads that one row does serve; a bias stored in float64 can hold "
                          "equal differences that differ in their last bits")
        elif missed and not extra:
            yield False, "you gave NaN to some heads that one row does serve"
        else:
            yield False, "some heads' rows do not give every query the weights of its bias"

    return report("which distance biases fit in one row", fn, run,
                  "§3: a softmax forgives one constant per query, and one row is shared by every query.")


# ---------------------------------------------------------------- Exercise 4: weight beyond the training length

# (slopes, train_len, test_len): Press's 8 and 6 heads, learned-looking slopes, slopes that training drove near 0
# read at 10^12 tokens (then most of the weight is far back), Press's 4 heads at 10^12 tokens, and gentle slopes at
# lengths with no common factor (T prime to L, 10^7 keys that all carry weight): no rescaling (m k, T / k, L / k) of a
# sum within the element budget lands on whole numbers of keys.
FAR_CASES = (
    (tuple(alibi_slopes(8, dtype=torch.float64).tolist()), 1024, 2048),
    (tuple(alibi_slopes(6, dtype=torch.float64).tolist()), 64, 512),
    ((0.3, 0.05, 0.004), 100, 1000),
    ((1e-11, 3e-12), 10**11, 10**12),
    (tuple(alibi_slopes(4, dtype=torch.float64).tolist()), 300, 10**12),
    ((3e-6, 1e-6), 1_555_555, 10_000_019),
)
FAR_RTOL, FAR_ATOL = 1e-4, 1e-9  # float32 closed forms of Press's slopes are within 3e-5 (relative)
_MEASURED_KEYS = 10**4  # the checker's own softmax weighs no more keys than this, or sums 10^7 of them directly


def alibi_far_share(fn: Callable[[torch.Tensor, int, int], Any] | None) -> bool | None:
    """Exercise 4: fn(slopes (H,) float64, train_len, test_len) -> per head, the share of the last query's weight
    on distances >= train_len (causal ALiBi, q.k = 0, test_len tokens), as a closed form: pl.alibi_bias, every
    softmax refuse to run while fn does, a case may create at most ELEMENTS tensor elements, and a loop over the
    keys runs out of steps."""

    def measured(slopes: torch.Tensor, T: int, L: int) -> torch.Tensor:
        """The share, measured with pl.alibi_bias and a softmax over at most _MEASURED_KEYS keys. Weights depend
        on m and the distance only through m * distance, so (m k, T / k, L / k) has the very same shares; where
        every head's weight dies out first (m * 10^4 > 36), the keys past that are left out; where T and L share no
        factor, every weight is summed in float64."""
        if L > _MEASURED_KEYS and math.gcd(T, L) == 1:
            w = torch.exp(-slopes[:, None] * torch.arange(L, dtype=torch.float64))  # key d steps back, (H, L)
            return w[:, T:].sum(-1) / w.sum(-1)
        if L > _MEASURED_KEYS:
            if bool((slopes * _MEASURED_KEYS > 36).all()):  # e^-36: below a float64's last bit
                L = _MEASURED_KEYS
            else:
                k = L // _MEASURED_KEYS
                assert T % k == 0 and L % k == 0, "a case the rescaling does not cover"
                slopes, T, L = slopes * k, T // k, L // k
        w = alibi_bias(len(slopes), 1, L, slopes=slopes, dtype=torch.float64).softmax(-1)[:, 0]  # (H, L), key j
        return w[:, : L - T].sum(-1)  # distances T .. L - 1

    def shortcuts() -> tuple[tuple[Any, str, str], ...]:
        import posenc_lib

        softmaxes = ((torch, "softmax", "torch.softmax"), (F, "softmax", "a softmax"),
                     (torch.Tensor, "softmax", "a softmax"), (torch.special, "softmax", "a softmax"),
                     (torch, "log_softmax", "a softmax"), (F, "log_softmax", "a softmax"),
                     (torch.Tensor, "log_softmax", "a softmax"), (torch, "logsumexp", "a logsumexp"),
                     (torch.Tensor, "logsumexp", "a logsumexp"), (attention_module, "attention", "pl.attention"),
                     (posenc_lib, "attention", "pl.attention"))
        return _alibi_bias_everywhere() + softmaxes

    def near(a: torch.Tensor, b: torch.Tensor) -> bool:
        return close(a, b, atol=FAR_ATOL, rtol=FAR_RTOL)

    def run(fn: Callable[[torch.Tensor, int, int], Any]) -> Iterable[Verdict]:
        cases = [(torch.tensor(m, dtype=torch.float64), T, L) for m, T, L in FAR_CASES]
        answers, stopped = answers_under_guard(fn, [(m.clone(), T, L) for m, T, L in cases], shortcuts(),
                                               elements_per_case=ELEMENTS)
        if stopped is not None:
            (m, T, L), why = stopped
            yield stopped_verdict(why, f"far_share(<{len(m)} slopes>, {T}, {L})",
                                  shortcut="that measures the weights; derive how they add up instead",
                                  loop=f"runs a loop over the keys ({L:.0e} of them): derive how the weights add up "
                                       "instead of adding them",
                                  grid="that adds up weights, one per key; derive how they add up instead")
            return
        for (m, T, L), raw in zip(cases, answers.values()):
            case = f"far_share(<{len(m)} slopes>, {T}, {L})"
            t = float64_tensor(raw)
            got = t.flatten() if t is not None and t.numel() == len(m) else None
            if got is None:
                yield False, f"{case}: expected {len(m)} numbers, one per head"
                return
            want = measured(m, T, L)
            if near(got, want):
                continue
            g = torch.exp(-m)
            if not bool(torch.isfinite(got).all()):
                yield False, (f"{case}: some shares are not numbers; with a slope this small, e^-m rounds to 1 in "
                              "float32: keep the slopes in float64 (or work with m times a distance)")
            elif near(got, g**T):
                yield False, f"{case}: you summed the series to infinity; the input has only test_len keys"
            elif any(near(got, (g**T2 - g**L) / (1 - g**L)) for T2 in (T + 1, T - 1)):
                yield False, (f"{case}: off by one; training showed distances 0 to train_len - 1, which is the "
                              "first one it never showed?")
            elif near(got, torch.full_like(got, (L - T) / L)):
                yield False, (f"{case}: these are the shares equal weights on every key would give, the same for "
                              "every head; each head's slope makes its weights fall with the distance")
            elif near(got, 1 - want):
                yield False, f"{case}: that is the share of the distances training did show, not of the others"
            elif bool((got < want * 0.9).any()) and bool((m < 1e-6).any()):
                yield False, (f"{case}: your shares leave out keys far back; with slopes this small the far keys "
                              "carry much of the weight")
            else:
                wrong = sum(not near(got[h], want[h]) for h in range(len(m)))
                yield False, f"{case}: not the shares for {wrong} of the {len(m)} heads"
            return
        yield True, (f"right for {len(FAR_CASES)} settings, Press's slopes and others, up to 10^12 tokens: a "
                     "steep head puts no weight beyond the training length, a slope near 0 most of it")

    return report("how much weight lies beyond the training length", fn, run,
                  "§4 drew these weights on a log scale: what does a straight line there say about how the "
                  "weights of the keys, read from the query backwards, relate to each other?")
