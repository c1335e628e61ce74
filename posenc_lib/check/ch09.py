"""Checkers for notebooks/09_beyond_1d.ipynb: a video head that looks at the same patch one frame back
(Qwen3-VL's allocation), CoPE keys and queries that count sentences and clauses at once, and a 2-D RoPE
head that prefers one diagonal.

Every checker tests properties a right design must have, on its own inputs (a video, a text, a
neighbourhood): none holds a design, and any design with the properties passes.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ..cope import cope_positions
from ..rope import rotate_pairs
from ..rope_nd import apply_rope_nd, mrope_positions
from ._core import float64_tensor, report
from ._guard import answers_under_guard, stopped_verdict

__all__ = ["previous_frame_head", "two_counters", "diagonal_head"]

# ---------------------------------------------------------------- Exercise 1: the same patch, one frame back

# Qwen3-VL's head: d = 128, pairs dealt to (t, h, w) round-robin, sections (24, 20, 20), base 5e6, "half" layout.
QWEN3_VL = dict(sections=(24, 20, 20), section_style="interleaved", base=5e6, layout="half")
HEAD_DIM = 128
TIMESTAMP, GRID, FRAMES = 4, (6, 6), 4  # a 4-token timestamp before each temporal patch of 6 x 6 tokens, 4 of them
LAYOUT = [("text", TIMESTAMP), ("video", (1, *GRID))] * FRAMES
MARGIN = 0.05  # the target key must beat every other visible key by this fraction of |q| |k|
MAX_NONZERO = 6  # numbers in q and in k: a design reads a few pairs


def _scores(q: torch.Tensor, k: torch.Tensor, coords: torch.Tensor) -> torch.Tensor:
    """(tokens, tokens): the score of every query token against every key token, divided by |q| |k|."""
    rq = apply_rope_nd(q.expand(len(coords), HEAD_DIM), coords, **QWEN3_VL)
    rk = apply_rope_nd(k.expand(len(coords), HEAD_DIM), coords, **QWEN3_VL)
    return rq @ rk.T / (q.norm() * k.norm())


def _peak(q: torch.Tensor, k: torch.Tensor, reach: int = 64) -> tuple[int | None, ...]:
    """The offset (t, h, w) within +-reach where q . R_offset k is largest, per axis (None: flat along that axis).
    Each pair of Qwen3-VL's head turns with one axis, so the score is a sum of one part per axis and each axis's
    best offset can be found alone."""
    steps = torch.arange(-reach, reach + 1)
    best = []
    for axis in range(3):
        at = torch.zeros(len(steps), 3, dtype=torch.long)
        at[:, axis] = steps
        s = apply_rope_nd(k.expand(len(steps), HEAD_DIM), at, **QWEN3_VL) @ q
        best.append(None if float(s.max() - s.min()) < 1e-9 * float(q.norm() * k.norm()) else int(steps[s.argmax()]))
    return tuple(best)


def _turns_along(q: torch.Tensor, k: torch.Tensor, axis: int) -> bool:
    """Whether q . R_offset k changes at all along one axis: a pair that turns with it, however slowly, shows
    within millions of steps; with none, the score is the same number at every offset."""
    steps = torch.tensor([0, 1, 7, 1000, 123_457, 9_876_543])
    at = torch.zeros(len(steps), 3, dtype=torch.long)
    at[:, axis] = steps
    s = apply_rope_nd(k.expand(len(steps), HEAD_DIM), at, **QWEN3_VL) @ q
    return float(s.max() - s.min()) > 1e-9 * float(q.norm() * k.norm())


def previous_frame_head(answer: Any) -> bool | None:
    """answer: (q, k), two vectors of 128 numbers with at most 6 nonzero entries each, for a Qwen3-VL head, such that
    every video token of the checker's video (a timestamp before each temporal patch) attends most to the token at
    the same row and column of the previous temporal patch, ahead of every other key it can see (those before it,
    timestamps included) by at least 0.05 |q| |k|."""

    def run(value):
        vecs = [float64_tensor(v) for v in value] if isinstance(value, (tuple, list)) and len(value) == 2 else None
        if vecs is None or any(v is None or v.shape != (HEAD_DIM,) for v in vecs):
            yield False, f"expected (q, k), two vectors of {HEAD_DIM} numbers each; got {value!r:.60}"
            return
        q, k = vecs
        if q.norm() == 0 or k.norm() == 0:
            yield False, "q and k must not be zero"
            return
        for name, v in (("q", q), ("k", k)):
            used = int((v.abs() > 1e-9 * v.abs().max()).sum())
            if used > MAX_NONZERO:
                yield False, (f"{name} has {used} nonzero numbers, more than {MAX_NONZERO}: design the head from the "
                              "few pairs it needs (a numerical search over all 128 numbers is not a design)")
                return
        coords = mrope_positions(LAYOUT)
        block = TIMESTAMP + GRID[0] * GRID[1]
        scores = _scores(q, k, coords)
        worst = None  # (lead, query, rival)
        for query in range(block, len(coords)):
            if query % block < TIMESTAMP:
                continue  # a timestamp token: no question asked of it
            seen = scores[query, :query + 1].masked_fill(torch.arange(query + 1) == query - block, -math.inf)
            lead = float(scores[query, query - block] - seen.max())
            if worst is None or lead < worst[0]:
                worst = (lead, query, int(seen.argmax()))
        lead, query, rival = worst
        here, wanted, other = (tuple(coords[i].tolist()) for i in (query, query - block, rival))
        where = f"query at (t, h, w) = {here}"
        if lead >= MARGIN:
            yield True, (f"every video token's same patch one temporal patch back wins, by at least {lead:.3f} "
                         "|q||k|")
            return
        target = tuple(a - b for a, b in zip(wanted, here))  # key minus query
        peak = _peak(q, k)  # where the head scores highest, over every offset, seen or not
        named = None
        if None not in peak and peak != target and lead < -1e-9:
            if peak == (0, 0, 0):
                named = "your head scores highest at offset 0: it attends most to itself"
            elif min(peak) >= 0:
                named = ("your head scores highest at a key ahead of the query, which the query cannot see: an "
                         "offset is the key's position minus the query's")
            elif peak == (target[0], 0, 0):
                named = ("your head looks back along t alone: what does §2's rule do to the h and w ids of each "
                         "new grid?")
            elif peak == (-1, 0, 0):
                named = ("your head looks one t step back at the same h and w ids: where does §2's rule put the next "
                         "temporal patch, after its timestamp?")
            elif peak == (target[0] - 1, target[1], target[2]):
                named = ("your head looks one t step too far back, with h and w right: where does §2's rule start "
                         "the next grid's t id?")
            elif peak[0] == peak[1] == peak[2]:
                named = (f"your head scores highest {-peak[0]} steps back along every axis: a step along t, h and w "
                         "together, of the wrong size")
        if named:
            yield False, f"{where}: {named}"
        elif lead >= -1e-9:  # the right key, tied or nearly tied with another
            apart = tuple(a - b for a, b in zip(other, wanted))  # the rival, seen from the right key
            differs = [a for a in range(3) if apart[a] != 0]
            axis = "thw"[differs[0]] if len(differs) == 1 else None
            yield False, (f"{where}: a key {apart} from the right one (in t, h, w) ties with it: your score does not "
                          f"change along {axis}, no pair you use turns with it" if axis and not _turns_along(
                              q, k, differs[0]) else
                          f"{where}: right key, but a key {apart} from it (in t, h, w) is within {lead:.3f} |q||k|: "
                          "the pairs you use turn too little between the two, or come back to the same angle there")
        else:
            seen_from = tuple(a - b for a, b in zip(other, here))
            yield False, f"{where}: it attends most to the key at offset {seen_from} (key minus query)"

    return report("A head that looks one frame back", answer, run,
                  "a RoPE score is a function of the offset alone, and how sharply it peaks along an axis "
                  "depends on which pairs turn with that axis.")


# ---------------------------------------------------------------- Exercise 2: two counters from one set of keys

# A text of words, commas and full stops; the last token is a word (the current clause is open).
TEXT = ("we came , we saw , and we left . it rained all day . then , at last , the sun came out , warm and bright "
        ". no one stayed inside").split()
_COUNT_TOLERANCE = 0.05
_COUNTER_ELEMENTS = 3_200  # tensor elements per call (the prompt forbids a search in words; this catches one):
                           # five vectors of d take 5 d, one step of an optimiser over a text 40 d or more per operation


def _counts(kinds: tuple[str, ...]) -> torch.Tensor:
    """For each key j: how many tokens of the given kinds lie from j to the last token (inclusive)."""
    marks = torch.tensor([w in kinds for w in TEXT], dtype=torch.float64)
    return marks.flip(0).cumsum(0).flip(0)


def _last_positions(q: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
    """CoPE's positions p_ij of every key j seen from the last token, gates sigmoid(q . k_j / sqrt(d))."""
    n, d = keys.shape
    causal = torch.full((n, n), float("-inf"), dtype=torch.float64).triu(1)
    return cope_positions(causal + (q @ keys.T / math.sqrt(d)).expand(n, n))[-1]


def _one_number(q_sent: torch.Tensor, q_clause: torch.Tensor, keys: torch.Tensor) -> str:
    """Why the gates of the two queries depend on one number per key, if they do: the queries read the same
    direction of the keys, or the keys differ along one direction only ('' otherwise)."""
    if torch.linalg.matrix_rank(torch.stack([q_sent, q_clause]), rtol=1e-9) < 2:
        return "both queries read the same direction of the keys"
    if torch.linalg.matrix_rank(keys, rtol=1e-9) < 2:
        return "the three keys lie on one line through 0"
    return ""


def _counting_helpers() -> tuple[tuple[Any, str, str], ...]:
    """This module's counting of its own text (an optimiser's target, were it reachable)."""
    import sys

    return tuple((sys.modules[__name__], name, "the checker's own counting") for name in ("_counts", "_last_positions"))


def two_counters(answer: Callable[[int], Any] | None) -> bool | None:
    """answer(d) -> (q_sentence, q_clause, k_word, k_comma, k_stop), each of d numbers: one key per kind of token
    shared by two queries, such that CoPE's positions from q_sentence count the full stops and from q_clause the
    commas and full stops, each to within 0.05 on the checker's text."""

    def run(fn):
        kind = {",": "comma", ".": "stop"}
        counted_at_8 = set()  # the queries that counted right at d = 8
        outs, stopped = answers_under_guard(fn, [(8,), (32,)], _counting_helpers(), loops=False,
                                            elements_per_case=_COUNTER_ELEMENTS)
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function", shortcut="it counts the checker's text for you",
                                  grid="five vectors of d numbers need 5 d of them; "
                                  "the function builds a design (any test of it belongs outside)")
            return
        for d in (8, 32):
            out = outs[(d,)]
            vecs = [float64_tensor(v) for v in out] if isinstance(out, (tuple, list)) and len(out) == 5 else None
            if vecs is None or any(v is None or v.shape != (d,) for v in vecs):
                yield False, f"d = {d}: expected five vectors (q_sentence, q_clause, k_word, k_comma, k_stop) of {d}"
                continue
            q_sent, q_clause, k_word, k_comma, k_stop = vecs
            by_kind = {"word": k_word, "comma": k_comma, "stop": k_stop}
            keys = torch.stack([by_kind[kind.get(w, "word")] for w in TEXT])
            one = _one_number(q_sent, q_clause, torch.stack([k_word, k_comma, k_stop]))
            if one:
                yield False, (f"d = {d}: {one}: one number per key cannot open the clause gate on commas while the "
                              "sentence gate stays shut there")
                continue
            for name, q, counted in (("sentences", q_sent, (".",)), ("clauses", q_clause, (",", "."))):
                p, want = _last_positions(q, keys), _counts(counted)
                if (p - want).abs().max() <= _COUNT_TOLERANCE:
                    counted_at_8 |= {name} if d == 8 else set()
                    yield True, f"d = {d}: the {name} query counts {name}"
                    continue
                gate = {k: torch.sigmoid(q @ v / math.sqrt(d)).item() for k, v in by_kind.items()}
                should = {"word": False, "comma": name == "clauses", "stop": True}
                half = [k for k in gate if abs(gate[k] - 0.5) < 1e-9]
                wrong = [k for k in gate if (gate[k] > 0.5) != should[k] and k not in half]
                if half:
                    yield False, (f"d = {d}: the {name} query's gate on {half[0]}s is exactly 1/2: a dot product of 0 "
                                  "is a half-open gate, not a closed one")
                elif wrong:
                    yield False, (f"d = {d}: the {name} query's gate is {'open' if not should[wrong[0]] else 'closed'}"
                                  f" on {wrong[0]}s ({gate[wrong[0]]:.2f})")
                else:
                    unscaled = name in counted_at_8  # firm at d = 8, soft now
                    yield False, (f"d = {d}: the {name} query's gates point the right way but are soft (words "
                                  f"{gate['word']:.3f}, commas {gate['comma']:.3f}, full stops {gate['stop']:.3f}): "
                                  f"over the text the count drifts by {(p - want).abs().max():.2f}"
                                  + ("; it counted at d = 8: the gate's logit is q . k / sqrt(d), and the same dot "
                                     "product is softer at a larger d" if unscaled else ""))

    return report("Two counters from one set of keys", answer, run,
                  "each gate is a yes or no that one query asks of one kind of key; a dot product answers by its "
                  "sign, and firmly only far from zero.")


# ---------------------------------------------------------------- Exercise 3: a head that prefers one diagonal

DIAGONAL_MARGIN = 0.1  # each anti-diagonal neighbour scores this fraction of |q| |k| below the query's own place
_ANTI = ((1, -1), (-1, 1))
# steps t of the main-diagonal offsets (t, t) tried, both signs: a pair whose angle changes along the diagonal,
# however slowly, shows within a billion steps
_ALONG = (1, 2, 3, 7, 1000, 123_457, 9_876_543, 10**9)
_EXACT = 1e-9  # "the same score": to within this fraction of |q| |k|


def _grid_score(freqs: torch.Tensor, q: torch.Tensor, k: torch.Tensor, query: tuple[int, int],
                key: tuple[int, int]) -> float:
    """(R(query) q) . (R(key) k), pair j (features 2j, 2j + 1) turning by freqs[j] . (row, col)."""
    def turned(x, at):
        angles = freqs @ torch.tensor(at, dtype=torch.float64)
        return rotate_pairs(x, angles.cos(), angles.sin(), layout="interleaved")

    return float(turned(q, query) @ turned(k, key))


def _rounded_turns(freqs: torch.Tensor) -> float | None:
    """The largest error per step, in rad, when every pair's angle per step along the main diagonal,
    freqs[j, 0] + freqs[j, 1], is 0 or a whole number of turns up to float32 rounding of its two numbers and at
    least one is a nonzero whole number of turns off by more than float64 rounding; otherwise None."""
    step = freqs.sum(-1)
    whole = (step / (2 * math.pi)).round()
    off = (step - 2 * math.pi * whole).abs()
    near = off <= 2.0**-22 * freqs.abs().sum(-1)  # float32 keeps 24 bits: each number off by up to 2^-24 of it
    turning = whole != 0
    if not (near.all() and turning.any() and (off[turning] > 1e-12).any()):
        return None
    return float(off.max())


def diagonal_head(answer: Any) -> bool | None:
    """answer: (freqs (P, 2), q (2P,), k (2P,)): a 2-D RoPE whose pair j turns by freqs[j] . (row, col) (pair j is
    features 2j and 2j + 1), and a query and key, such that every key on the query's main diagonal (offsets
    (t, t), every integer t) scores what the key at the query's own place scores, and both anti-diagonal
    neighbours ((1, -1), (-1, 1)) score at least 0.1 |q| |k| less."""

    def run(value):
        parts = [float64_tensor(v) for v in value] if isinstance(value, (tuple, list)) and len(value) == 3 else None
        if parts is None or any(p is None for p in parts) or parts[0].ndim != 2 or parts[0].shape[1] != 2 or \
                parts[1].shape != (2 * parts[0].shape[0],) or parts[2].shape != parts[1].shape:
            yield False, f"expected (freqs of shape (P, 2), q and k of 2P numbers); got {value!r:.60}"
            return
        freqs, q, k = parts
        if q.norm() == 0 or k.norm() == 0:
            yield False, "q and k must not be zero"
            return
        scale = (q.norm() * k.norm()).item()
        if (freqs == 0).all():
            yield False, "no pair turns at all: every key scores what the query's own place scores, the " \
                         "anti-diagonal neighbours too"
            return
        axial = bool(((freqs[:, 0] == 0) | (freqs[:, 1] == 0)).all())
        rounding = _rounded_turns(freqs)
        weighted = (q.view(-1, 2).norm(dim=-1) > 0) & (k.view(-1, 2).norm(dim=-1) > 0)  # pairs in the score
        step = 2 * freqs[:, 0]  # along the main diagonal a pair with equal frequencies turns by this per step
        off_turn = (step - 2 * math.pi * (step / (2 * math.pi)).round()).abs() > 1e-12
        along_diagonal = bool((weighted & (freqs[:, 0] == freqs[:, 1]) & off_turn).any())
        for query in ((0, 0), (5, -3)):
            where = f"query at {query}"
            own = _grid_score(freqs, q, k, query, query) / scale
            drift = max(abs(_grid_score(freqs, q, k, query, (query[0] + s * t, query[1] + s * t)) / scale - own)
                        for t in _ALONG for s in (1, -1))
            lead = own - max(_grid_score(freqs, q, k, query, (query[0] + a, query[1] + b)) / scale
                             for a, b in _ANTI)
            if drift <= _EXACT and lead >= DIAGONAL_MARGIN:
                yield True, f"{where}: the whole main diagonal scores as the query's place, {lead:.3f} |q||k| " \
                            "above the anti-diagonal neighbours"
            elif axial:
                yield False, (f"{where}: every pair turns with one axis only: this is an axial head, the case your "
                              "prediction is about")
            elif drift > _EXACT and rounding is not None:
                yield False, (f"{where}: some keys on the main diagonal score differently from the query's own "
                              "place: along the diagonal each pair turns by a whole number of turns per step only "
                              f"up to the rounding of the numbers given (off by up to {rounding:.1e} rad per step, "
                              "about what rounding to float32 leaves), and the checker tries steps up to 10^9, "
                              f"where that adds up to {rounding * 1e9:.0f} rad")
            elif drift > _EXACT and along_diagonal:
                yield False, (f"{where}: some keys on the main diagonal score differently from the query's own "
                              "place: a pair in the score has the same frequency for the row and the column, "
                              "a frequency vector along the main diagonal, so it turns with every step along it")
            elif drift > _EXACT:
                yield False, f"{where}: some keys on the main diagonal score differently from the query's own place"
            elif lead < 0:
                yield False, f"{where}: an anti-diagonal neighbour scores above the main diagonal"
            else:
                yield False, f"{where}: the anti-diagonal neighbours are only {lead:.3f} |q||k| lower"

    return report("A head that prefers one diagonal", answer, run,
                  "what can a pair that turns with the row alone know about the column?")
