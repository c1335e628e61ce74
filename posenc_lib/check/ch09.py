"""Checkers for notebooks/09_beyond_1d.ipynb: designing a (t, h, w) allocation of RoPE's pairs, designing
CoPE gates that count sentences, and the largest leak a CoPE gate may have."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ..angles import rope_frequencies
from ..cope import cope_positions
from ._core import close, float64_tensor, number, report, whole_numbers

__all__ = ["design_axes", "sentence_gates", "leak_logit"]

# Exercise 1: Qwen2-VL's head (d = 128, 64 pairs, base 10^6), q = k = ones, so the score is 128 at offset 0 and
# each pair of an axis moved by Δ lowers it by 2 (1 - cos(Δ θ_j)).
AXES_D, AXES_BASE = 128, 1e6
MIN_PAIRS = 16  # every axis gets at least this many pairs
T_OFFSET, T_KEEP = 16, 0.99  # frames 16 apart keep at least 99 % of the maximum along t
NEIGHBOUR_DROP = 1.0  # the next row, and the next column, lower the score by at least 1 (of 128)


def axis_score(axes: torch.Tensor, axis: int, delta: int) -> float:
    """q = k = ones under the allocation `axes` (the axis of each pair): the score when the key moves by
    `delta` along `axis` only, 2 sum_j cos(delta theta_j) over the axis's pairs plus 2 per other pair."""
    theta = rope_frequencies(AXES_D, base=AXES_BASE, dtype=torch.float64)
    mine = axes == axis
    return AXES_D - 2 * float((1 - torch.cos(delta * theta[mine])).sum())


def design_axes(answer: Any) -> bool | None:
    """answer: 64 axis numbers (0 = t, 1 = h, 2 = w), one per pair of a d = 128 head at base 10^6, such that
    every axis has >= 16 pairs, frames 16 apart keep >= 99 % of the score along t, and the next row and the
    next column each lower the score by >= 1."""

    def run(value):
        ids = whole_numbers(value)
        if ids is None or len(ids) != AXES_D // 2 or not set(ids) <= {0, 1, 2}:
            yield False, f"expected {AXES_D // 2} axis numbers, each 0 (t), 1 (h) or 2 (w); got {value!r:.60}"
            return
        axes = torch.tensor(ids)
        counts = [int((axes == a).sum()) for a in range(3)]
        small = [name for name, n in zip("thw", counts) if n < MIN_PAIRS]
        yield not small, ("every axis has at least 16 pairs" if not small else
                          f"axis {', '.join(small)} has fewer than 16 pairs: it would have too few angles to hold "
                          f"its coordinate")
        t16 = axis_score(axes, 0, T_OFFSET)
        ok = t16 >= T_KEEP * AXES_D
        yield ok, (f"t: frames 16 apart score {t16:.2f} of 128" + (", near enough" if ok else
                   ": t holds pairs that turn visibly within 16 frames (a pair turns by 16 θ_j)"))
        for axis, name in ((1, "row"), (2, "column")):
            drop = AXES_D - axis_score(axes, axis, 1)
            ok = drop >= NEIGHBOUR_DROP
            yield ok, (f"{'hw'[axis - 1]}: the next {name} lowers the score by {drop:.2f}" + ("" if ok else
                       f": too little to tell neighbours apart; one step turns a pair by only θ_j, which only "
                       f"the fastest pairs feel"))

    return report("An allocation of RoPE's pairs for video", answer, run,
                  "a pair's angle changes by Δ·θ_j: which pairs stay nearly still over 16 steps, and which ones "
                  "move noticeably in one step? Then decide which axis needs which, and whether two axes can "
                  "share the fast end.")


# Exercise 2's text: words and full stops; the last token is a word, so the current sentence is open.
SENTENCES = "we met . it was late and dark . the end came . no".split()


def _sentence_counts() -> torch.Tensor:
    stop = torch.tensor([w == "." for w in SENTENCES], dtype=torch.float64)
    return stop.flip(0).cumsum(0).flip(0)  # full stops from key j to the last token


def sentence_gates(answer: Callable[[int], Any]) -> bool | None:
    """answer(d) -> (q, k_word, k_stop), each (d,): one query for every position and one key per kind of token
    such that CoPE's positions p_ij (gates sigmoid(q . k / sqrt(d))) count the full stops from key j to query i."""

    def run(fn):
        want = _sentence_counts()
        n = len(SENTENCES)
        for d in (8, 32):
            out = fn(d)
            vecs = [float64_tensor(v) for v in out] if isinstance(out, (tuple, list)) and len(out) == 3 else None
            if vecs is None or any(v is None or v.shape != (d,) for v in vecs):
                yield False, f"d = {d}: expected three vectors (q, k_word, k_stop) of {d} numbers each"
                continue
            q, k_word, k_stop = vecs
            keys = torch.stack([k_stop if w == "." else k_word for w in SENTENCES])
            causal = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
            logits = causal + (q @ keys.T / math.sqrt(d)).expand(n, n)
            p = cope_positions(logits)[-1]  # the last query's positions
            if close(p, want, atol=0.05):
                yield True, f"d = {d}: the positions count sentences"
            elif close(p, torch.arange(n, 0, -1, dtype=torch.float64), atol=0.5):
                yield False, f"d = {d}: the positions count tokens: the gates are open on words as well"
            elif close(p, torch.arange(n, 0, -1, dtype=torch.float64) - want, atol=0.5):
                yield False, f"d = {d}: the positions count words: the gates open on words and stay shut on full stops"
            else:
                gate = torch.sigmoid(torch.stack([q @ k_word, q @ k_stop]) / math.sqrt(d))
                yield False, (f"d = {d}: the gates are {gate[0]:.2f} on words and {gate[1]:.2f} on full stops: "
                              f"part-open gates give fractional positions that drift over a long text")

    return report("CoPE gates that count sentences", answer, run,
                  "the gate is the sigmoid of a scaled dot product: which sign must q·k have for each kind of "
                  "token, and how large must it be for the sigmoid to be 0 or 1 within a few hundredths?")


# Exercise 3: (ignored tokens n, tolerance): the flip-flop run's sparse mix at 512 tokens, a short one, a strict one.
_LEAK_CASES = ((480, 0.5), (2, 0.5), (1000, 0.25))


def leak_logit(answer: Callable[[int, float], Any]) -> bool | None:
    """answer(n, tolerance) -> float: the largest logit a gate on tokens that should not count may have, so
    that n such tokens shift CoPE's count by less than `tolerance` (together)."""

    def run(fn):
        for n, tol in _LEAK_CASES:
            want = math.log(tol / (n - tol))  # n sigmoid(x) = tol  =>  sigmoid(x) = tol / n
            raw = fn(n, tol)
            got = number(raw)
            case = f"n = {n}, tolerance {tol:g}"
            if got is None:
                yield False, f"{case}: {raw!r} is not a logit (one number)"
            elif close(got, want, atol=1e-6, rtol=1e-6):
                yield True, f"{case}: right"
            elif close(got, tol / n, atol=1e-9, rtol=1e-6):
                yield False, f"{case}: {got:.4g} is the gate itself, sigmoid(logit); the logit is asked"
            elif close(got, math.log(tol / (1 - tol)) if tol < 1 else math.inf, atol=1e-6):
                yield False, f"{case}: {got:.4g} keeps one token's gate below the tolerance; {n} tokens add their gates"
            elif close(got, math.log(tol / n), atol=1e-6, rtol=1e-6):
                yield False, (f"{case}: {got:.4g} is the logarithm of the gate, not its logit (the two agree "
                              f"only as the gate vanishes)")
            elif got > 0:
                yield False, f"{case}: {got:.4g} is positive: a logit above 0 opens the gate more than half way"
            else:
                yield False, f"{case}: {got:.4g} is wrong"

    return report("How much may an ignored token leak into CoPE's count?", answer, run,
                  "a gate is a sigmoid of its logit, and CoPE's position adds gates up: what does a budget on the "
                  "sum say about each term, and about the logit behind it?")
