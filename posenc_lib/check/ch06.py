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
from ._guard import answers_under_guard, stopped_verdict

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
            elif (bits := first_lost_position(fn, H, W, g)) is not None:
                yield False, (f"{case}: your weights are right at t = 2^{bits} - 1 and wrong at t = 2^{bits} + 1, the "
                              f"first whole number that a format of {bits} significant bits cannot hold (float32 "
                              "keeps 24): a position rounded that way is read as another one")
            elif row[finite].abs().max() > 1e6:
                yield False, (f"{case}: your biases are numbers near m·t (up to {row[finite].abs().max():.0e}); "
                              "float64 stores numbers that large only to about 1e-4, so their differences, all a "
                              "softmax uses, are off by that much and the weights by more than this check's 1e-6 "
                              "(§3, 'in low precision')")
            elif (scale := float(m.max()) * t) > 1e6 and bool(held.all()) and 0 < float(
                    ((d := (row - want)) - d[:, :1]).abs().max()) <= 8 * math.ulp(scale):
                yield False, (f"{case}: your weights are off only by the rounding of numbers near m·t (up to "
                              f"{scale:.0e}): float64 stores those only to about {math.ulp(scale):.0e}, and a "
                              "difference of two of them keeps that error although the result is small; the "
                              "weights move by more than this check's 1e-6 (§3, 'in low precision')")
            else:
                wrong = sum(not close(_weights(row[h], scores[h]), _weights(want[h], scores[h]), atol=1e-6, rtol=1e-5)
                            for h in range(H))
                yield False, f"{case}: the weights differ from causal ALiBi's over the last {W} keys for {wrong} of {H} heads"
            return
        yield True, (f"the weights of causal ALiBi over the last W keys, for {len(RING_CASES)} rings, from a ring not "
                     "yet full to one 10^12 steps on")

    return report("ALiBi's bias over a ring buffer", fn, run,
                  "ALiBi charges a key for how far back it is, not for where it is stored: what can a slot "
                  "know about when its key arrived?")


# ---------------------------------------------------------------- Exercise 2: when two keys share one stored bias

# (p, k, ties): a format of p significant bits that rounds a tie to even (torch's rule: BLOOM's bfloat16 row is p = 8)
# or away from zero (no torch dtype does) holds BLOOM's +m j row of a head with slope m = 2^-k: 8, 11 and 24 bits
# (bfloat16's, float16's and float32's widths) and widths torch has no dtype for, up to 52 (every answer fits a
# float64 exactly, so any number type can carry it). Each call may run SHARED_STEPS Python lines and create
# SHARED_ELEMENTS tensor elements: a formula needs a few, a search over lengths from the start more. A few steps
# started next to the answer fit, but knowing where to start is what the exercise asks.
SHARED_STEPS, SHARED_ELEMENTS = 16, 4
_SHARED_RIGHT = {  # sealed([p, k, ties, answer], "ch06.first_shared") per case
    (8, 1, "even"): "3028c7b41f96328e0a981e00",
    (8, 8, "even"): "0ceed02d91c94c863d5480aa",
    (8, 3, "away"): "025f0afab76b3bbeabd1f7d3",
    (11, 3, "away"): "06887e0aee1516b70fef1124",
    (24, 5, "even"): "5423b6f333df9f9cc25800af",
    (33, 4, "away"): "23930b4e515dbcc9f77c36bd",
    (40, 2, "even"): "d26938372c1f8d8335c17356",
    (52, 8, "away"): "1733560940c14c0af0fbf014",
}
_SHARED_WRONG = {  # sealed wrong answers of every case -> the misconception (a key of _SHARED_MISCONCEPTIONS)
    "5210f4d7cdabd59acdfe45bc": "half_up", "96f30ec2f0a664efa01894eb": "bits", "2b71166f0bfaf0ca022b65ca": "bits",
    "37911fe6d1834d38828c358c": "bits", "368295c2a60c0dea08fdb462": "bits", "d72337068bd43bae8ea8dce4": "half_up",
    "70e956573e45b4d4277494d7": "values", "58cdfd18127a3059a6a7eacc": "bits", "0560c95db64f2eed0a5dea54": "bits",
    "6c869193e2c4e53aa4b83238": "values", "1050e313c7d38ad4574c1e0a": "bits", "b33422f00623a77a37e414db": "bits",
    "9fe31fa98233bfbbd96475e7": "half_down", "6fd109c0f03771593f0767ea": "values", "b9a8a33ac3e3f61343cd389e": "bits",
    "f2edd292a353659a69eea46c": "bits", "32bbf5b6bcc410cb665cd1a3": "values", "8f7aa6925ed8eb1d667924f4": "bits",
    "a0230388961fe3d122920ee2": "bits", "816fac20dd18b07f15cafc06": "half_down", "589f570918067124c0943d7d": "values",
    "c267856f4ae6b935d12127fa": "bits", "3de87e22a45ede80e83d0803": "bits", "501ccbfa01bfb04eaa37a020": "values",
    "9f58b4d3520959c770dc2a80": "bits", "c4af5fa4bbee7e29915e9c0d": "bits", "f25c055af327fba825ca8283": "half_up",
    "e5cbb2aebf3c74b6973d58b8": "values", "8b32278f2877811a96068133": "bits", "4d0af74fc40441f248137365": "bits",
    "ff862c2344a0e06efa7c2552": "values", "7d8b2a5e40d5c90052cd2922": "bits", "2ff2ccc0ca441eb5ea9c2e3d": "bits",
    "d15ac2ce8d4b50632babf537": "half_down", "f6013241eadbee5898b0a7d4": "values", "b0cb7fe1d8fa51d6b4fe416d": "bits",
    "031eb710d612a47f09b2b8a1": "bits", "f90cd992a856438e2a2340cc": "values", "f0f7a33979699e782cb8b6cc": "bits",
    "e1fe103456e910079d703ff9": "bits", "aa3150c9f32df5b1504a602f": "half_up", "b39e5d74f08e126070114c15": "values",
    "cb9a8ac6f6fba8fa4c9203ea": "bits", "a9ae0656fc9d5c282cb1e905": "bits", "d7956ede382ea665e0d04069": "values",
    "a755dff0e2d82445b3c6d6f0": "bits", "d6fe6e2d60c11dd23cc6a193": "bits", "c12aa5fd9882a9f7f5aa32d2": "half_down",
    "16ac561680bf97ff4bcd07e0": "values", "120534f8c893ffc293755840": "bits", "c0c8c26cab8c05f34985b77d": "bits",
    "f66c28a19fd1f7c20d810857": "values", "963a3982cc9a08758edbf153": "bits", "04420c751679354d69c631fd": "bits",
}
_SHARED_MISCONCEPTIONS = {
    "half_down": "your length sends a value half-way between two stored numbers to the smaller one (ties toward "
                 "zero); under the rule asked for, ties away from zero, a tie goes to the larger one",
    "half_up": "with ties to even, a value half-way between two stored numbers goes to the one whose last kept bit "
               "is 0, which need not be the larger one; your length is the one ties away from zero would give",
    "values": "your length moves with the slope as if the format kept a fixed number of digits after the point; "
              "its spacing is relative to the size of the numbers it stores",
    "bits": "your lengths are those of a format with another number of significant bits than p; the p significant "
            "bits count the leading 1 (bfloat16's 8 are that 1 and 7 stored bits)",
}


def alibi_shared_bias(fn: Callable[[int, int, str], Any] | None) -> bool | None:
    """Exercise 2: fn(p, k, ties) -> the smallest length L at which BLOOM's +m_h j row, m = 2^-k, stored in a format
    of p significant bits (round to nearest, ties "even" or "away" from zero), gives the last query's two nearest
    keys (j = L - 1 and L - 2) the same bias. Each call may run SHARED_STEPS Python lines and create SHARED_ELEMENTS
    tensor elements: a search over lengths from the start is stopped. A short search that begins next to the
    answer passes, but finding where to begin is the exercise."""

    def stored(n: int, bits: int, ties: str) -> int:
        """The whole number n rounded to `bits` significant bits (m = 2^-k scales every value alike, so the row's
        values n m round as n does)."""
        extra = n.bit_length() - bits
        if extra <= 0:
            return n
        q, r = divmod(n, 1 << extra)
        half = 1 << (extra - 1)
        up = r > half or (r == half and (ties == "away" or q % 2 == 1))
        return (q + up) << extra

    def run(fn: Callable[[int, int, str], Any]) -> Iterable[Verdict]:
        answers, stopped = answers_under_guard(fn, list(_SHARED_RIGHT), steps_per_case=SHARED_STEPS,
                                               elements_per_case=SHARED_ELEMENTS)
        if stopped is not None:
            (p, k, ties), why = stopped
            yield stopped_verdict(why, f"first_shared({p}, {k}, {ties!r})", shortcut="work it out from how the "
                                  "format spaces its numbers instead",
                                  loop=f"runs more than {SHARED_STEPS} Python lines, a search over lengths: work it "
                                  "out from how the format spaces its numbers instead",
                                  grid="a search over lengths; work it out from how the format spaces its numbers")
            return
        named: dict[str, list[str]] = {}  # misconception -> the cases that show it
        first_wrong = None
        for (p, k, ties), raw in answers.items():
            case = f"first_shared({p}, {k}, {ties!r})"
            got = whole_number(raw)
            if got is None or got < 2:
                yield False, f"{case}: expected a whole length L >= 2, got {raw!r:.60}"
                return
            digest = sealed([p, k, ties, got], "ch06.first_shared")
            if digest == _SHARED_RIGHT[(p, k, ties)]:
                continue
            if digest in _SHARED_WRONG:
                named.setdefault(_SHARED_WRONG[digest], []).append(case)
            elif first_wrong is None:
                first_wrong = (case, got, p, ties)
        by_slope = {k: whole_number(answers[(p, k, t)]) for p, k, t in answers if (p, t) == (8, "even")}
        if len(set(by_slope.values())) > 1:  # what the answers show: the length moves with the slope
            yield False, f"first_shared(8, k, 'even') for k = {sorted(by_slope)}: {_SHARED_MISCONCEPTIONS['values']}"
            return
        for shift in (-2, -1, 1, 2):  # one count off in every case, under both tie rules: how L numbers its keys
            if all(sealed([p, k, t, whole_number(answers[(p, k, t)]) - shift], "ch06.first_shared") == right
                   for (p, k, t), right in _SHARED_RIGHT.items()):
                # named without saying how far off, or that every case is off alike: trying shifts is no way in
                yield False, ("your rule misplaces where the first shared bias falls: it ties the length L to the "
                              "wrong pair of keys; recheck which two biases the last query's two nearest keys "
                              "carry in a length-L input")
                return
        if named:  # diagnosed on every case: the misconception the most cases show wins
            name = max(named, key=lambda n: len(named[n]))
            yield False, f"{named[name][0]}: {_SHARED_MISCONCEPTIONS[name]}"
            return
        if first_wrong is not None:
            case, got, p, ties = first_wrong
            if stored(got - 2, p, ties) == stored(got - 1, p, ties):
                yield False, (f"{case}: at L = {got} the two nearest keys do share a bias, but a shorter input "
                              "already did")
            elif stored(got - 1, p, ties) == got - 1 and stored(got - 2, p, ties) == got - 2:
                yield False, (f"{case}: at L = {got} the two nearest keys sit at positions L - 1 and L - 2 (counted "
                              "from 0), and the format still holds both of their biases exactly: two biases that "
                              "nothing has rounded stay two")
            else:
                yield False, f"{case}: at L = {got} the two nearest keys get different stored biases"
            return
        yield True, (f"right for {len(_SHARED_RIGHT)} formats, slopes and tie rules, from 8 significant bits "
                     "(bfloat16's width) to 52")

    return report("when the two nearest keys share one stored bias", fn, run,
                  "whether two nearby numbers survive as two depends on the format's spacing near them, which is "
                  "relative to their size, and on its rule for ties.")


# ---------------------------------------------------------------- Exercise 3: which distance biases fit one row

SLIGHT_BEND = 2e-3  # bends this small (the hidden slightly bent heads: 1e-3) pass a tolerance of 1e-3


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
        missed, extra, ends, backwards, low, slight = [], [], [], [], [], []
        missed_not_falling = []  # per missed head: its bias is flat or grows with distance
        by_falling = []  # per head: the answer gave a row exactly where the bias never rises with distance
        for (b, has_row), raw in zip(cases, answers.values()):
            H, L = b.shape
            got = raw if isinstance(raw, torch.Tensor) else None
            if got is None or tuple(got.shape) != (H, 1, L):
                yield False, f"L={L}, H={H}: return an ({H}, 1, {L}) tensor, got {getattr(raw, 'shape', raw)!r:.60}"
                return
            row = got.detach().to("cpu", torch.float64)[:, 0]
            for h in range(H):
                nan = bool(torch.isnan(row[h]).all())
                by_falling.append(nan != bool((b[h, 1:] - b[h, :-1] <= 0).all()))
                if has_row[h] and nan:
                    missed.append(not bool(((b[h, 1:] - b[h, :-1]) == (b[h, 1] - b[h, 0])).all()))
                    missed_not_falling.append(float(b[h, 1] - b[h, 0]) >= 0)
                elif not has_row[h] and not nan:
                    last_only = close((row[h] - row[h, -1]), b[h].flip(-1) - b[h, 0], atol=1e-9)
                    step = b[h, 1:] - b[h, :-1]
                    straight_ends = L > 4 and abs(float(b[h, -1] - b[h, 0] - (L - 1) * step[0])) < 1e-9
                    straight_start = L > 3 and abs(float(step[1] - step[0])) < 1e-9  # a line over its first steps
                    extra.append(last_only)
                    ends.append(straight_ends or straight_start)
                    slight.append(float((step - step[0]).abs().max()) <= SLIGHT_BEND)
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
        elif extra and all(slight) and not missed:
            yield False, ("the heads you gave a row that no row serves are bent only slightly: their steps differ by "
                          f"{SLIGHT_BEND:g} or less, and your test of the steps takes that for equal. A tolerance "
                          "that loose cannot tell a bent bias from a straight one; float64's rounding of a line's "
                          "steps is far smaller")
        elif extra and all(ends) and not missed:
            yield False, ("some heads you gave a row are straight where you looked but not everywhere: agreeing "
                          "with a line at the ends, or over a few steps, does not make a bias a line")
        elif extra and all(extra) and not missed:
            yield False, ("your rows give the last query (which sees every key) its weights, but a row must serve "
                          "every query at once, and for some heads no row does: return NaN for those")
        elif extra and missed and all(by_falling):
            yield False, ("you gave a row to exactly the heads whose bias falls with distance, and NaN to the "
                          "others: whether one row serves every query does not depend on which way a bias runs, "
                          "nor on its falling")
        elif missed and all(missed_not_falling) and not extra:
            yield False, ("you gave NaN to some heads that one row does serve, and every one of them has a bias "
                          "that does not fall with distance (flat, or growing): whether one row serves them does "
                          "not depend on which way a bias runs")
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
# Review r25: steep heads (m >= 0.7), where the weight falls within a few keys, graded to 1e-9 (relative, no atol:
# shares down to e^-40 count). An exact form in float64 is within 1e-14 there; a numerical integral of e^-mx on a
# grid (an 800-interval Simpson rule, a 2000-bin midpoint rule) misses by 1e-7 to 1e-5, since one key then spans a
# large part of the weight's fall. The short case (T = 2, L = 5) also separates the weights taken as continuous over
# the distances that exist, 0 to L - 1, from the keys' own weights.
# Final read r3: a direct sum cut where the steep heads' weights vanish, plus a Simpson rule for the gentle heads,
# passed every case. So the middle cases: slopes of 10^-3 to 3 * 10^-3, whose weight spreads over thousands of keys,
# graded to 1e-9 like the steep ones, while each case may create FAR_ELEMENTS tensor elements and run FAR_STEPS
# Python lines. A sum cut where their weights vanish needs 7000 keys or more; a Simpson rule within those budgets
# (at most about 250 intervals in plain Python, 50 in tensors) misses by 1e-7 or more. A closed form needs under 100
# of each.
FAR_STEEP_CASES = (
    ((1.0, 2.5, 6.0), 3, 1000),
    ((0.7, 12.0), 2, 5),
    ((1.0, 8.0), 5, 10**12),
    ((3e-3, 1e-3), 500, 10**4),
    ((2e-3,), 3000, 9973),
)
FAR_STEEP_RTOL = 1e-9
FAR_ELEMENTS, FAR_STEPS = 1000, 1000  # per case: a closed form needs under 100 of each (tests/test_check_ch06.py)
_MEASURED_KEYS = 10**4  # the checker's own softmax weighs no more keys than this, or sums 10^7 of them directly


def alibi_far_share(fn: Callable[[torch.Tensor, int, int], Any] | None) -> bool | None:
    """Exercise 4: fn(slopes (H,) float64, train_len, test_len) -> per head, the share of the last query's weight
    on distances >= train_len (causal ALiBi, q.k = 0, test_len tokens), derived, not measured: pl.alibi_bias, every
    softmax refuse to run while fn does, a case may create at most FAR_ELEMENTS tensor elements and run FAR_STEPS
    Python lines, so a sum over the keys that carry weight, or a numerical integral fine enough, runs out."""

    def integrated_to_last_key(got: torch.Tensor, want: torch.Tensor, g: torch.Tensor, T: int, L: int,
                                near: Callable[[torch.Tensor, torch.Tensor], bool]) -> str | None:
        """'head 2' (the heads named) when got is the weight integrated over 0 .. L - 1 instead of 0 .. L on
        every head where that slip shows (its share off the right one by more than the grading) and right on the
        others; None where no head tells the two apart (at L = 10^12 they agree): only a slip seen is named."""
        slipped = (g**T - g ** (L - 1)) / (1 - g ** (L - 1))
        shows = [not near(slipped[h : h + 1], want[h : h + 1]) for h in range(len(want))]
        if not any(shows):
            return None
        for h, differs in enumerate(shows):
            if differs and not close(got[h : h + 1], slipped[h : h + 1], atol=0.0, rtol=1e-6):
                return None
            if not differs and not near(got[h : h + 1], want[h : h + 1]):
                return None
        heads = [h + 1 for h, differs in enumerate(shows) if differs]
        return ("head " if len(heads) == 1 else "heads ") + ", ".join(map(str, heads))

    def rounded_to_float32(got: torch.Tensor, m: torch.Tensor, T: int, L: int) -> bool:
        """Whether got is the share computed in float64 from slopes, or from the ratio e^-m, first rounded to
        float32 (the slip a learner makes with s.float() early on), within float64's own rounding."""
        m32, g32 = m.float().double(), torch.exp(-m.float()).double()
        from_slopes = (torch.exp(-m32 * T) - torch.exp(-m32 * L)) / -torch.expm1(-m32 * L)
        from_ratio = (g32**T - g32**L) / (1 - g32**L)
        return any(close(got, x, atol=0.0, rtol=1e-9) and not close(x, measured(m, T, L), atol=0.0, rtol=1e-9)
                   for x in (from_slopes, from_ratio))

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

    def run(fn: Callable[[torch.Tensor, int, int], Any]) -> Iterable[Verdict]:
        cases = [(torch.tensor(m, dtype=torch.float64), T, L) for m, T, L in FAR_CASES + FAR_STEEP_CASES]
        answers, stopped = answers_under_guard(fn, [(m.clone(), T, L) for m, T, L in cases], shortcuts(),
                                               steps_per_case=FAR_STEPS, elements_per_case=FAR_ELEMENTS)
        if stopped is not None:
            (m, T, L), why = stopped
            yield stopped_verdict(why, f"far_share(<{len(m)} slopes>, {T}, {L})",
                                  shortcut="that measures the weights; derive how they add up instead",
                                  loop=f"runs more than {FAR_STEPS:,} Python lines, a loop over the keys or over the "
                                       "points of a numerical integral: derive how the weights add up instead of "
                                       "adding them",
                                  grid="that adds up weights sampled one per key or on a grid (a cut-off sum, a "
                                       "numerical integral); derive how they add up instead")
            return
        for i, ((m, T, L), raw) in enumerate(zip(cases, answers.values())):
            case = f"far_share(<{len(m)} slopes>, {T}, {L})"
            steep = i >= len(FAR_CASES)

            def near(a: torch.Tensor, b: torch.Tensor) -> bool:
                return close(a, b, atol=0.0, rtol=FAR_STEEP_RTOL) if steep else close(a, b, atol=FAR_ATOL,
                                                                                        rtol=FAR_RTOL)
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
            elif steep and getattr(raw, "dtype", None) in (torch.float32, torch.float16, torch.bfloat16):
                yield False, (f"{case}: close, but computed in {raw.dtype}, whose rounding shows here: these heads "
                              "are graded to 1e-9; work in float64")
            elif steep and (bool((got.float().double() == got).all()) and close(got, want, atol=0.0, rtol=1e-4)
                            or rounded_to_float32(got, m, T, L)):
                # a right form run in float32 and handed back as Python floats or float64 keeps
                # float32's values, or its slopes or its ratio rounded to float32: name that rounding, not an
                # approximation.
                yield False, (f"{case}: close, but float32 rounding shows: some step ran in float32 (the slopes, "
                              "a ratio of weights or the result), whose rounding (about 1e-7 of a value) is larger "
                              "than the 1e-9 these heads are graded to; keep every step in float64")
            elif steep and close(got, want, atol=1e-15, rtol=0.0):
                yield False, (f"{case}: right to float64's last digit in absolute terms (1e-16), but these heads are "
                              "graded to 1e-9 of their own share, and some shares here are tiny: a share found as one "
                              "minus the rest keeps none of its own digits")
            elif steep and close(got, want, atol=0.0, rtol=1e-3):
                yield False, (f"{case}: close, but not exact: an approximation (a numerical integral of the "
                              "weights as if the distance were continuous, a grid, a cut-off) misses by more than "
                              "the 1e-9 these heads are graded to; the keys sit at whole distances: find how their "
                              "weights add up exactly")
            elif (short := integrated_to_last_key(got, want, g, T, L, near)) is not None:
                yield False, (f"{case}: your shares match the weight integrated over the distances 0 to "
                              "test_len - 1: that interval is too short by one unit, so the last key weighs less "
                              f"than the others (test_len keys, one per unit of distance; it shows in {short})")
            elif near(got, g**T - g**L):
                yield False, (f"{case}: these are the far keys' weights before the softmax divides them by the "
                              "sum of all the weights: a share is a part over the whole")
            elif bool((got < want * 0.9).any()) and bool((m < 1e-6).any()):
                yield False, (f"{case}: your shares leave out keys far back; with slopes this small the far keys "
                              "carry much of the weight")
            else:
                wrong = sum(not near(got[h], want[h]) for h in range(len(m)))
                yield False, f"{case}: not the shares for {wrong} of the {len(m)} heads"
            return
        yield True, (f"right for {len(cases)} settings, Press's slopes and others, up to 10^12 tokens, exact "
                     "where graded so: a steep head puts no weight beyond the training length, a slope near "
                     "0 most of it")

    return report("how much weight lies beyond the training length", fn, run,
                  "§4 drew these weights on a log scale: what does a straight line there say about how the "
                  "weights of the keys, read from the query backwards, relate to each other?")
