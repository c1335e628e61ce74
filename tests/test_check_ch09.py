"""Checkers of chapter 9 (posenc_lib.check.ch09): designs built here from the reasoning the exercises ask for
pass, each named misconception is named, and the checker module holds no design."""
import math

import pytest
import torch

import posenc_lib as pl
from posenc_lib import check
from posenc_lib.check import ch09


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


# ---------------------------------------------------------------- Exercise 1: the same patch, one frame back

def _rotated(u, at):
    return pl.apply_rope_nd(u[None], torch.tensor([at]), sections=(24, 20, 20), section_style="interleaved",
                            base=5e6, layout="half")[0]


# The layout, derived here from §2's rule: a grid starting at s puts (i, j) at (s, s + i, s + j); the 4-token
# timestamp after a 6 x 6 grid starts at s + 6, the next grid at s + 10: one temporal patch back is (-10, -10, -10).
BACK = (-10, -10, -10)


def previous_frame_design(offset=BACK, pairs=(0, 1, 2), weights=(1.0, 1.0, 1.0)):
    """u in chosen pairs (pair j: features j and j + 64), q = R_offset u, k = u: the score u^T R_(Δ - offset) u
    peaks at Δ = offset. Qwen3-VL deals pairs 0, 1, 2 to t, h and w: the fastest pair of each axis."""
    u = torch.zeros(128, dtype=torch.float64)
    for j, w in zip(pairs, weights):
        u[j] = w
    return _rotated(u, offset), u


def test_the_layout_is_the_one_derived_here():
    ids = pl.mrope_positions(ch09.LAYOUT)
    block = ch09.TIMESTAMP + 36
    assert (ids[block + ch09.TIMESTAMP:] - ids[ch09.TIMESTAMP:-block]).unique(dim=0).tolist() == [[10, 10, 10]]


def test_previous_frame_head(capsys):
    assert run(check.previous_frame_head, None, capsys)[0] is None
    ok, out = run(check.previous_frame_head, previous_frame_design(), capsys)
    assert ok is True and "all correct!" in out and "by at least 0.062" in out  # equal weights: a thin lead
    ok, out = run(check.previous_frame_head, previous_frame_design(weights=(0.5, 0.75, 1.0)), capsys)
    assert ok is True and "by at least 0.091" in out  # the worked solution's weighting: a lead of 1.8 x MARGIN
    q, k = previous_frame_design(weights=(1.0, 1.05, 1.1))  # another weighting of the same pairs, as lists
    assert run(check.previous_frame_head, (q.tolist(), k.tolist()), capsys)[0] is True
    u = torch.zeros(128, dtype=torch.float64)
    u[[0, 64, 1, 65, 2, 66]] = torch.tensor([1.0, 0.5, 1.0, -0.5, 1.0, 0.3], dtype=torch.float64)  # both features
    assert run(check.previous_frame_head, (_rotated(u, BACK), u), capsys)[0] is True


def test_previous_frame_head_names_each_misconception(capsys):
    ok, out = run(check.previous_frame_head, previous_frame_design((-1, 0, 0)), capsys)  # chapter 8's head, in t
    assert ok is False and "one t step back at the same h and w ids" in out
    ok, out = run(check.previous_frame_head, previous_frame_design((-10, 0, 0)), capsys)  # back in t only
    assert ok is False and "looks back along t alone" in out
    ok, out = run(check.previous_frame_head, previous_frame_design((10, 10, 10)), capsys)  # the sign of the offset
    assert ok is False and "a key ahead of the query" in out
    ok, out = run(check.previous_frame_head, previous_frame_design((0, 0, 0)), capsys)  # q = k
    assert ok is False and "attends most to itself" in out and "offset 0" in out
    for short in ((-6, -6, -6), (-5, -5, -5)):  # the timestamp's 4 ids left out, or a step of the wrong size
        ok, out = run(check.previous_frame_head, previous_frame_design(short), capsys)
        assert ok is False and f"{-short[0]} steps back along every axis" in out and "of the wrong size" in out
        assert "itself" not in out and "ahead" not in out
    ok, out = run(check.previous_frame_head, previous_frame_design((-11, -10, -10)), capsys)  # off by one along t
    assert ok is False and "one t step too far back" in out and "-10, -10" not in out
    ok, out = run(check.previous_frame_head, previous_frame_design(pairs=(0, 16, 40)), capsys)  # Qwen2-VL's blocks
    assert ok is False and "does not change along w" in out  # pairs 16 and 40 are both h's in Qwen3-VL
    ok, out = run(check.previous_frame_head, previous_frame_design(weights=(1.0, 1.0, 3.0)), capsys)  # w dominates
    assert ok is False and "turn too little between the two, or come back" in out
    # the slowest pair of each axis (57 t, 58 h, 59 w) all turn, far too slowly: not "no pair turns"
    ok, out = run(check.previous_frame_head, previous_frame_design(pairs=(57, 58, 59)), capsys)
    assert ok is False and "turn too little between the two, or come back" in out and "no pair you use" not in out
    ok, out = run(check.previous_frame_head, (torch.ones(128), torch.ones(128)), capsys)
    assert ok is False and "more than 6" in out
    q, k = previous_frame_design()
    ok, out = run(check.previous_frame_head, (q[:64], k), capsys)
    assert ok is False and "two vectors of 128" in out
    for design in ((-1, 0, 0), (-10, 0, 0), (0, 0, 0)):  # no message names where the key sits
        out = run(check.previous_frame_head, previous_frame_design(design), capsys)[1]
        assert "-10, -10, -10" not in out and "10, 10, 10" not in out


def test_previous_frame_head_refuses_a_search_over_every_number(capsys):
    """An optimiser over all 128 numbers of q and k finds a head (the reader's gradient ascent); it is not a design
    and uses far more than 6 numbers. Here a few steps from a random start stand for it."""
    g = torch.Generator().manual_seed(0)
    q, k = (torch.randn(128, generator=g, dtype=torch.float64).requires_grad_(True) for _ in range(2))
    ids = pl.mrope_positions(ch09.LAYOUT)
    opt = torch.optim.Adam([q, k], lr=0.05)
    for _ in range(20):
        rq = pl.apply_rope_nd(q.expand(len(ids), 128), ids, **ch09.QWEN3_VL)
        rk = pl.apply_rope_nd(k.expand(len(ids), 128), ids, **ch09.QWEN3_VL)
        block = ch09.TIMESTAMP + 36
        target = (rq[block:] * rk[:-block]).sum(-1) / (q.norm() * k.norm())
        opt.zero_grad()
        (-target.mean()).backward()
        opt.step()
    ok, out = run(check.previous_frame_head, (q.detach(), k.detach()), capsys)
    assert ok is False and "nonzero numbers, more than 6" in out


# ---------------------------------------------------------------- Exercise 2: two counters

def two_counters_design(d):
    """Two features: one says "ends a sentence", one "ends a clause"; every key has -1 or +1 in both, so no
    gate sits at sigmoid(0) = 1/2. Each query reads one feature, scaled so that |q . k| / sqrt(d) = 12."""
    k_word, k_comma, k_stop = (torch.zeros(d, dtype=torch.float64) for _ in range(3))
    k_word[:2] = torch.tensor([-1.0, -1.0])
    k_comma[:2] = torch.tensor([-1.0, 1.0])
    k_stop[:2] = torch.tensor([1.0, 1.0])
    q_sent, q_clause = torch.zeros(d, dtype=torch.float64), torch.zeros(d, dtype=torch.float64)
    q_sent[0] = q_clause[1] = 12 * math.sqrt(d)
    return q_sent, q_clause, k_word, k_comma, k_stop


def test_two_counters(capsys):
    assert run(check.two_counters, None, capsys)[0] is None
    ok, out = run(check.two_counters, two_counters_design, capsys)
    assert ok is True and "all correct!" in out
    as_lists = lambda d: [v.tolist() for v in two_counters_design(d)]  # noqa: E731
    assert run(check.two_counters, as_lists, capsys)[0] is True


def test_two_counters_refuses_an_optimiser(capsys):
    """Gradient descent on the five vectors against a text's counts finds counters too (run outside the checker,
    these 1000 steps pass it); inside, the element budget stops it after a step."""
    def optimised(d):
        g = torch.Generator().manual_seed(0)
        vecs = [torch.randn(d, generator=g, dtype=torch.float64).requires_grad_(True) for _ in range(5)]
        opt = torch.optim.Adam(vecs, lr=0.5)
        text = "a b , c d . e , f . g h".split()  # a text of its own
        keys_of = [{",": 3, ".": 4}.get(w, 2) for w in text]
        n = len(text)
        future = torch.ones(n, n, dtype=torch.bool).triu(1)
        counts = {kinds: torch.tensor([sum(w in kinds for w in text[j:]) for j in range(n)], dtype=torch.float64)
                  for kinds in ((".",), (",", "."))}
        for _ in range(1000):
            keys = torch.stack([vecs[i] for i in keys_of])
            loss = 0
            for q, kinds in ((vecs[0], (".",)), (vecs[1], (",", "."))):
                logits = (q @ keys.T / math.sqrt(d)).expand(n, n).masked_fill(future, -math.inf)
                loss = loss + ((pl.cope_positions(logits)[-1] - counts[kinds]) ** 2).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
        return tuple(v.detach() for v in vecs)

    ok, out = run(check.two_counters, optimised, capsys)
    assert ok is False and "creates more than 3,200 tensor or array elements" in out and "optimis" not in out
    found = {d: optimised(d) for d in (8, 32)}  # the same search outside the checker: it does find counters
    assert run(check.two_counters, lambda d: found[d], capsys)[0] is True

    def checked_inside(d):  # a right design, tested over a text of 60 tokens inside the function: same verdict
        vecs = two_counters_design(d)
        keys = torch.stack([vecs[2 + i % 3] for i in range(60)])
        future = torch.ones(60, 60, dtype=torch.bool).triu(1)
        logits = (vecs[0] @ keys.T / math.sqrt(d)).expand(60, 60).masked_fill(future, -math.inf)
        assert pl.cope_positions(logits)[-1, 0] > 0
        return vecs

    ok, out = run(check.two_counters, checked_inside, capsys)
    assert ok is False and "creates more than 3,200 tensor or array elements" in out and "optimis" not in out

    def with_the_checkers_text(d):
        ch09._last_positions(torch.ones(d, dtype=torch.float64), torch.ones(3, d, dtype=torch.float64))
        return two_counters_design(d)

    ok, out = run(check.two_counters, with_the_checkers_text, capsys)
    assert ok is False and "calls the checker's own counting" in out
    assert run(check.two_counters, lambda d: [v.tolist() for v in two_counters_design(d)], capsys)[0] is True


def test_two_counters_names_each_misconception(capsys):
    def zero_word_key(d):  # the word key shares nothing with either query: its gates sit at 1/2
        q_sent, q_clause, _, k_comma, k_stop = two_counters_design(d)
        return q_sent, q_clause, torch.zeros(d), k_comma, k_stop

    ok, out = run(check.two_counters, zero_word_key, capsys)
    assert ok is False and "a dot product of 0 is a half-open gate" in out

    def swapped(d):
        q_sent, q_clause, *keys = two_counters_design(d)
        return (q_clause, q_sent, *keys)

    ok, out = run(check.two_counters, swapped, capsys)
    assert ok is False and "sentences query's gate is open on commas" in out
    assert "clauses query's gate is closed on commas" in out

    def soft(d):
        q_sent, q_clause, *keys = two_counters_design(d)
        return (q_sent / 6, q_clause / 6, *keys)  # |q . k| / sqrt(d) = 2: gates of 0.12 and 0.88

    ok, out = run(check.two_counters, soft, capsys)
    assert ok is False and "soft" in out and "drifts" in out and "sqrt(d)" not in out  # soft at every d

    def no_sqrt(d):  # firm at d = 8 with |q . k| = 25, but the logit divides by sqrt(d): soft at d = 32
        q_sent, q_clause, *keys = two_counters_design(d)
        return (q_sent / (12 * math.sqrt(d)) * 25, q_clause / (12 * math.sqrt(d)) * 25, *keys)

    ok, out = run(check.two_counters, no_sqrt, capsys)
    assert ok is False and "✓ d = 8" in out and "the gate's logit is q . k / sqrt(d)" in out

    def one_feature(d):  # one number per key, the same question asked twice
        keys = [torch.zeros(d, dtype=torch.float64) for _ in range(3)]
        for key, x in zip(keys, (-1.0, 0.5, 1.0)):
            key[0] = x
        q = torch.zeros(d, dtype=torch.float64)
        q[0] = 20 * math.sqrt(d)
        return (q, q.clone(), *keys)

    ok, out = run(check.two_counters, one_feature, capsys)
    assert ok is False and "both queries read the same direction" in out and "one number per key" in out

    def keys_on_a_line(d):
        q_sent, q_clause, *keys = one_feature(d)
        q_clause[1] = 5.0  # another direction for the second query: the keys still give it one number each
        return (q_sent, q_clause, *keys)

    ok, out = run(check.two_counters, keys_on_a_line, capsys)
    assert ok is False and "the three keys lie on one line" in out
    ok, out = run(check.two_counters, lambda d: two_counters_design(d)[:3], capsys)
    assert ok is False and "expected five vectors" in out


# ---------------------------------------------------------------- Exercise 3: one diagonal

def diagonal_design():
    """An axial pair reads one offset, and S(1, 1) + S(-1, -1) = S(1, -1) + S(-1, 1) for any sum f(dr) + g(dc).
    The whole main diagonal scores as the query's place only if every pair that carries weight does not turn
    along (1, 1): freqs[j] . (1, 1) = 0 (mod 2 pi). One mixed pair turning by a (dr - dc) is at angle 0 on the
    whole main diagonal and at 2a on the anti-diagonal: with a = pi / 2 and q = k, the scores are 1 against -1."""
    freqs = torch.tensor([[math.pi / 2, -math.pi / 2]])
    u = torch.tensor([1.0, 0.0])
    return freqs, u, u


def test_diagonal_head(capsys):
    assert run(check.diagonal_head, None, capsys)[0] is None
    ok, out = run(check.diagonal_head, diagonal_design(), capsys)
    assert ok is True and "all correct!" in out
    # the same rotation for integer offsets: the pair turns by 2 pi per step along the diagonal (in float64; in
    # float32 the two numbers sum to 2 pi only to 1e-7, and 10^9 steps along the diagonal turn the pair by ~100 rad)
    turns = torch.tensor([[math.pi / 2, 3 * math.pi / 2]], dtype=torch.float64)
    ok, out = run(check.diagonal_head, (turns, *diagonal_design()[1:]), capsys)
    assert ok is True
    ok, out = run(check.diagonal_head, (turns.float(), *diagonal_design()[1:]), capsys)
    assert ok is False and "score differently" in out and "only up to the rounding" in out  # named as precision
    for pair in ([math.pi / 3, 5 * math.pi / 3], [1.0, 2 * math.pi - 1.0], [0.7, 4 * math.pi - 0.7]):
        ok, out = run(check.diagonal_head, (torch.tensor([pair], dtype=torch.float64), *diagonal_design()[1:]),
                      capsys)
        assert ok is True  # whole turns per step along the diagonal: right in float64
        ok, out = run(check.diagonal_head, (torch.tensor([pair]), *diagonal_design()[1:]), capsys)  # float32
        assert ok is False and "only up to the rounding" in out
    freqs = torch.tensor([[0.3, -0.3], [1.0, 0.0], [0.5, -0.5]])  # mixed pairs, and an axial one with no weight
    ok, out = run(check.diagonal_head, (freqs, torch.tensor([1.0, 0, 0, 0, 1, 0]), torch.tensor([1.0, 0, 0, 0, 1, 0])),
                  capsys)
    assert ok is True


def test_diagonal_head_refuses_a_random_search(capsys):
    """A blind search over random frequencies, queries and keys: each draw's diagonal turns, so none passes
    (a margin at four neighbours only, the prompt before, let 39 of 300 such draws through: about one in eight)."""
    g = torch.Generator().manual_seed(0)
    passed = 0
    for _ in range(300):
        freqs = (torch.rand(2, 2, generator=g, dtype=torch.float64) * 2 - 1) * math.pi
        q, k = torch.randn(2, 4, generator=g, dtype=torch.float64)
        ok, out = run(check.diagonal_head, (freqs, q, k), capsys)
        passed += ok is True
        assert ok is True or "score differently" in out or "axial" in out
    assert passed == 0
    near = torch.tensor([[math.pi / 2, -math.pi / 2 + 1e-7]])  # off by 1e-7 rad per step: 100 rad at 10^9 steps
    ok, out = run(check.diagonal_head, (near, *diagonal_design()[1:]), capsys)
    assert ok is False and "score differently" in out and "rounding" not in out  # not a whole turn: not rounding
    off = torch.tensor([[math.pi / 2, 3 * math.pi / 2 + 1e-5]], dtype=torch.float64)  # 1e-5 from a whole turn
    ok, out = run(check.diagonal_head, (off, *diagonal_design()[1:]), capsys)
    assert ok is False and "score differently" in out and "rounding" not in out  # beyond float32's rounding


def test_diagonal_head_names_each_misconception(capsys):
    axial = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    u = torch.tensor([1.0, 0.0, 1.0, 0.0])
    q = pl.rotate_pairs(u, torch.cos(-axial.sum(-1)), torch.sin(-axial.sum(-1)))  # aimed at the offset (1, 1)
    ok, out = run(check.diagonal_head, (axial, q, u), capsys)
    assert ok is False and "every pair turns with one axis only" in out
    assert "S(" not in out and "+" not in out and "f(" not in out  # the prediction's reason is not handed over
    same_sign = torch.tensor([[math.pi / 2, math.pi / 2]])  # reads dr + dc: turns along the main diagonal
    ok, out = run(check.diagonal_head, (same_sign, torch.tensor([1.0, 0.0]), torch.tensor([1.0, 0.0])), capsys)
    assert ok is False and "score differently" in out
    assert "dr" not in out and "pi" not in out  # names what the answer shows, not the fix
    assert "frequency vector along the main diagonal" in out  # (a, a): the misconception named
    ones = torch.tensor([[1.0, 1.0], [0.3, 0.0]])  # another answer along (1, 1), beside an axial pair
    ok, out = run(check.diagonal_head, (ones, torch.ones(4), torch.ones(4)), capsys)
    assert ok is False and "frequency vector along the main diagonal" in out and "axial" not in out
    idle = torch.tensor([[1.0, 1.0], [0.3, 0.0]])  # the (1, 1) pair carries no weight: the axial one drifts
    ok, out = run(check.diagonal_head, (idle, torch.tensor([0.0, 0, 1, 0]), torch.tensor([0.0, 0, 1, 0])), capsys)
    assert ok is False and "score differently" in out and "along the main diagonal" not in out
    whole = torch.tensor([[math.pi, math.pi]], dtype=torch.float64)  # equal, but a whole turn per diagonal step
    ok, out = run(check.diagonal_head, (whole, torch.tensor([1.0, 0.0]), torch.tensor([1.0, 0.0])), capsys)
    assert ok is False and "along the main diagonal" not in out
    gentle = torch.tensor([[0.1, -0.1]])
    ok, out = run(check.diagonal_head, (gentle, torch.tensor([1.0, 0.0]), torch.tensor([1.0, 0.0])), capsys)
    assert ok is False and "only" in out
    flipped = (torch.tensor([[math.pi / 2, -math.pi / 2]]), torch.tensor([1.0, 0.0]), torch.tensor([-1.0, 0.0]))
    ok, out = run(check.diagonal_head, flipped, capsys)  # q = -k: the diagonal is flat, at the lowest score
    assert ok is False and "scores above the main diagonal" in out
    ok, out = run(check.diagonal_head, (torch.zeros(2, 2), torch.ones(4), torch.ones(4)), capsys)
    assert ok is False and "no pair turns at all" in out and "axial" not in out
    ok, out = run(check.diagonal_head, (torch.ones(2, 3), torch.ones(4), torch.ones(4)), capsys)
    assert ok is False and "expected (freqs of shape (P, 2)" in out


def test_axial_heads_cannot_prefer_a_diagonal():
    """The identity the checker names: for random axial heads S(1,1) + S(-1,-1) = S(1,-1) + S(-1,1)."""
    g = torch.Generator().manual_seed(0)
    for _ in range(5):
        freqs = torch.rand(4, 2, generator=g, dtype=torch.float64) * torch.tensor([[1.0, 0.0]] * 2 + [[0.0, 1.0]] * 2)
        q, k = torch.randn(2, 8, generator=g, dtype=torch.float64)
        s = {o: ch09._grid_score(freqs, q, k, (0, 0), o) for o in ((1, 1), (-1, -1), (1, -1), (-1, 1))}
        assert s[1, 1] + s[-1, -1] == pytest.approx(s[1, -1] + s[-1, 1], abs=1e-12)


def test_the_checker_module_holds_no_design():
    """The module's values are the exercises' settings and inputs (a video's size, a text, margins); no vector
    and no frequency table: a checker cannot hand over a design it does not hold."""
    for name, value in vars(ch09).items():
        if name.startswith("__") or name == "annotations" or callable(value) or isinstance(value, type(ch09)):
            continue
        assert not isinstance(value, torch.Tensor), name
        assert isinstance(value, (int, float, str, tuple, list, dict)), name

    def numbers(x):
        if isinstance(x, dict):
            x = list(x.values())
        if isinstance(x, (list, tuple)):
            return [n for item in x for n in numbers(item)]
        return [x] if isinstance(x, (int, float)) and not isinstance(x, bool) else []

    stored = {n for name, value in vars(ch09).items() if not name.startswith("__") for n in numbers(value)}
    assert not {10, -10} & stored  # Exercise 1's offset is derived from the layout when checking, never stored


@pytest.mark.parametrize("name", ch09.__all__)
def test_grading_raises(name, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="not attempted"):
        getattr(check, name)(None)
