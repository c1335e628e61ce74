"""Chapter 1 checkers: right answers pass, wrong ones fail with a reason, unattempted ones say so."""
import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def _out(capsys):
    return capsys.readouterr().out


# --- exercise 1: passes_through ------------------------------------------------------------
def attn(x, wq, wk, wv):
    """One bias-free head written out here (not pl.attention): softmax(QK^T / sqrt(d)) V, row by row."""
    s = (x @ wq) @ (x @ wk).T / x.shape[-1] ** 0.5
    w = torch.exp(s - s.max(-1, keepdim=True).values)
    return (w / w.sum(-1, keepdim=True)) @ (x @ wv)


def test_passes_through_fact_a_shared_sign_passes_and_a_scale_does_not():
    """Independent of the checker: -P passes through a head written out by hand, 2P and a single sign flip do not."""
    g = torch.Generator().manual_seed(3)
    x, wq, wk, wv = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((4, 6), (6, 6), (6, 6), (6, 6)))
    p = torch.eye(4, dtype=torch.float64)[[2, 0, 3, 1]]
    for t in (-p, -torch.eye(4, dtype=torch.float64), p):
        torch.testing.assert_close(attn(t @ x, wq, wk, wv), t @ attn(x, wq, wk, wv))
    for t in (2 * p, torch.diag(torch.tensor([-1.0, 1, 1, 1], dtype=torch.float64))):
        assert not torch.allclose(attn(t @ x, wq, wk, wv), t @ attn(x, wq, wk, wv), atol=1e-6)


def test_passes_through_accepts_a_shared_sign_in_several_forms(capsys):
    minus_p = -pl.permutation_matrix([2, 0, 3, 1])
    for right in (-torch.eye(4), minus_p, minus_p.tolist(), (-np.eye(4)).astype(np.float32)):
        assert check.passes_through(right) is True
        assert "all correct!" in _out(capsys)


@pytest.mark.parametrize("shortcut", [
    pl.permutation_matrix([2, 0, 3, 1]), torch.eye(4), pl.permutation_matrix([1, 0, 2, 3]).T,
    (1 + 1e-9) * torch.eye(4, dtype=torch.float64),  # nudged: a shared factor next to 1
    torch.eye(4, dtype=torch.float64) + 1e-10,  # nudged: every entry off 0 and 1
    pl.permutation_matrix([2, 0, 3, 1]).double() + 1e-4 * torch.randn(4, 4, generator=torch.Generator().manual_seed(0),
                                                                      dtype=torch.float64),
], ids=["permutation", "identity", "transpose", "scaled by 1 + 1e-9", "plus 1e-10", "plus noise 1e-4"])
def test_passes_through_refuses_a_permutation_nudged_or_not(shortcut, capsys):
    """The section's own answer (the library's permutation matrix, the identity, a transpose) is no design, and
    nudging its entries below the checker's tolerances does not make it one."""
    assert check.passes_through(shortcut) is False
    out = _out(capsys)
    assert "is a permutation matrix" in out and "hint:" in out


def test_passes_through_fact_a_nudged_identity_would_pass_the_attention_test():
    """Why the nudge needs its own refusal: (1 + 1e-9) I and I + 1e-10 pass through a head within any tolerance a
    float64 checker can use, written out here."""
    g = torch.Generator().manual_seed(4)
    x, wq, wk, wv = (torch.randn(*s, generator=g, dtype=torch.float64) for s in ((4, 6), (6, 6), (6, 6), (6, 6)))
    for t in ((1 + 1e-9) * torch.eye(4, dtype=torch.float64), torch.eye(4, dtype=torch.float64) + 1e-10):
        torch.testing.assert_close(attn(t @ x, wq, wk, wv), t @ attn(x, wq, wk, wv), rtol=1e-7, atol=1e-9)


def test_passes_through_accepts_a_right_design_off_by_rounding(capsys):
    """A shared sign with float32 rounding (or 1e-12 off) is still the design, however close it sits to -I."""
    assert check.passes_through(-(1 + 1e-12) * torch.eye(4, dtype=torch.float64)) is True
    assert check.passes_through((-pl.permutation_matrix([1, 2, 3, 0])).float()) is True
    assert "all correct!" in _out(capsys)


@pytest.mark.parametrize("wrong, says", [
    (2 * torch.eye(4), "scales every token by 2"),  # attention taken for linear
    (-3 * pl.permutation_matrix([2, 0, 3, 1]), "scales every token by -3"),  # the sign is right, the size is not
    (torch.diag(torch.tensor([-1.0, 1, 1, 1])), "changes some of the scores"),  # one token's sign
    (-pl.permutation_matrix([1, 0, 2, 3]) @ torch.diag(torch.tensor([1.0, 1, 1, -1])), "changes some of the scores"),
    (torch.tensor([[1.0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]), "singular"),  # a token copied
    (torch.zeros(4, 4), "singular"),  # passes trivially, keeps nothing
    (torch.eye(4) + 0.1, "T mixes tokens"),  # a mixing matrix
    (pl.permutation_matrix([1, 2, 3, 0]) + 0.002 * torch.eye(4), "T mixes tokens"),  # a permutation, off by a mix
    (torch.diag(torch.tensor([1.0, 2, 1, 1])), "by different factors"),  # one token scaled, the others kept
    (-pl.permutation_matrix([3, 1, 0, 2]) @ torch.diag(torch.tensor([1.0, 1, 3, 1])), "by different factors"),
    (torch.eye(3), "must be 4x4"),
    (torch.full((4, 4), float("nan")), "finite numbers"),
])
def test_passes_through_names_the_misconception_without_the_answer(wrong, says, capsys):
    assert check.passes_through(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    assert "-I" not in out and "-P" not in out and "negat" not in out and "minus" not in out and "sign" not in out
    assert "some of the tokens and not" not in out and "flip" not in out  # no pointer to the tokens to treat alike
    assert "square" not in out and "c^2" not in out and "twice" not in out  # no size that hands over c = -1


def test_passes_through_unattempted(capsys):
    assert check.passes_through(None) is None
    assert "not attempted yet" in _out(capsys)


# --- exercise 2: shift_not_shuffle ----------------------------------------------------------
def _rotations_pass_and_a_swap_does_not(f, n=7, d=3):
    """Independent of the checker: every rotation of n tokens only moves f's rows; some swap does more, far above
    float64 rounding (1e-12 of the output's size)."""
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    rotations = [[(i + s) % n for i in range(n)] for s in range(n)]
    swap = list(range(n))
    swap[0], swap[2] = 2, 0
    return (all(torch.allclose(f(x[o]), f(x)[o]) for o in rotations)
            and float((f(x[swap]) - f(x)[swap]).abs().max()) > 1e-12 * float(f(x).abs().max()))


RING_RIGHT = [
    lambda x: x + torch.cat([x[-1:], x[:-1]]),  # the token before, wrapping around (written without roll)
    lambda x: x * x.roll(-1, 0),  # times the token after
    lambda x: x + x.roll(1, 0) + x.roll(-1, 0),  # both neighbours
    lambda x: torch.tanh(x - 2 * x.roll(3, 0)) + x.mean(0),  # an offset of 3 and a bag term on top
    lambda x: x + 1e-5 * x.roll(1, 0),  # a small coefficient is still exact: the order shows far above rounding
    lambda x: x + 1e-9 * x.roll(1, 0),  # and a tiny one, in float64
    lambda x: (x.float() + x.float().roll(1, 0)).double(),  # float32 inside
]


@pytest.mark.parametrize("right", RING_RIGHT, ids=["before", "after", "both", "offset3", "small", "tiny", "float32"])
def test_shift_not_shuffle_accepts_any_fixed_mix_of_offsets(right, capsys):
    assert _rotations_pass_and_a_swap_does_not(right)
    assert check.shift_not_shuffle(right) is True
    assert "all correct!" in _out(capsys)


def _previous_zero_first(x):
    return x + torch.cat([torch.zeros_like(x[:1]), x[:-1]])


def _causal_head(x):
    w = torch.randn(3, x.shape[1], x.shape[1], generator=torch.Generator().manual_seed(0), dtype=x.dtype)
    return pl.attention(x @ w[0], x @ w[1], x @ w[2], causal=True)[0]


BAGS = [lambda x: x + x.mean(0), lambda x: x + x.amax(0), lambda x: (x - x.mean(0)) / x.std(0), torch.relu,
        lambda x: pl.self_attention(x, *torch.eye(x.shape[1], dtype=x.dtype).expand(3, -1, -1))[0],
        lambda x: torch.zeros_like(x), lambda x: x.float() + x.float().mean(0) + 1e-12 * x.float().roll(1, 0),
        lambda x: (x.float() @ x.float().T).softmax(-1) @ x.float()]
PLACES = [_previous_zero_first, lambda x: x.cumsum(0), lambda x: x * torch.arange(1, x.shape[0] + 1)[:, None],
          _causal_head, lambda x: x + x[0], lambda x: x + torch.randn(x.shape, dtype=x.dtype)]


@pytest.mark.parametrize("bag", BAGS, ids=["mean", "max", "normalise", "relu", "attention", "zero",
                                         "float32 mean, order below rounding", "float32 attention"])
def test_shift_not_shuffle_names_a_bag(bag, capsys):
    """Layers that every permutation passes through (section 1's own examples among them) see no order."""
    assert check.shift_not_shuffle(bag) is False
    out = _out(capsys)
    assert "treats the tokens as a bag" in out and "hint:" in out
    assert "roll" not in out and "wrap" not in out and "i - 1" not in out and "neighbour" not in out
    assert "offset" not in out and "ring" not in out


@pytest.mark.parametrize("placed", PLACES, ids=["previous", "running sum", "place number", "causal head",
                                                "first token", "noise"])
def test_shift_not_shuffle_names_a_special_place(placed, capsys):
    """Layers tied to places: the previous token with nothing before the first, a running sum, a causal head."""
    assert check.shift_not_shuffle(placed) is False
    out = _out(capsys)
    assert "some place in the sequence is special to your layer" in out
    assert "roll" not in out and "wrap" not in out and "neighbour" not in out


@pytest.mark.parametrize("turned", [lambda x: x.flip(0), lambda x: (x + 0.5 * x.roll(1, 0)).flip(0)],
                         ids=["reversal", "reversed mix"])
def test_shift_not_shuffle_names_a_reversal(turned, capsys):
    """A reversal has no special place: it turns a rotation one way into one the other way."""
    assert check.shift_not_shuffle(turned) is False
    out = _out(capsys)
    assert "rotates your layer's output rows the other way" in out and "hint:" in out
    assert "some place in the sequence is special" not in out
    assert "roll" not in out and "wrap" not in out and "neighbour" not in out and "offset" not in out


def test_shift_not_shuffle_fact_rounding_is_no_order():
    """Independent of the checker: a bag computed in float32 moves its rows only up to float32 rounding, under a
    rotation and a swap alike, while x + 1e-5 x_(i-1) is changed by a swap 100 times more than its rounding."""
    n = 6
    x = torch.randn(n, 4, generator=torch.Generator().manual_seed(12), dtype=torch.float64)
    rotate, swap = [(i + 1) % n for i in range(n)], [2, 1, 0, 3, 4, 5]

    def error(f, order):
        return float((f(x[order]) - f(x)[order]).abs().max() / f(x).abs().max())

    def bag(t):
        return (t.float() @ t.float().T).softmax(-1) @ t.float()

    def small(t):
        return t + 1e-5 * t.roll(1, 0)

    assert error(bag, swap) < 1e-6 and error(bag, rotate) < 1e-6
    assert error(small, swap) > 100 * max(error(small, rotate), 1e-12)


def test_shift_not_shuffle_refuses_other_shapes_and_non_functions(capsys):
    import re

    assert check.shift_not_shuffle(lambda x: x.sum(0)) is False
    shape = re.search(r"for (\d+) tokens of (\d+) features .* a tensor of shape \((\d+), (\d+)\)", _out(capsys))
    assert shape and shape[1] == shape[3] and shape[2] == shape[4] and int(shape[1]) >= 5
    assert check.shift_not_shuffle(lambda x: torch.full_like(x, float("nan"))) is False  # NaN equals nothing
    assert "finite numbers" in _out(capsys)
    assert check.shift_not_shuffle({"a", "c", "e", "f"}) is False  # the old exercise's kind of answer
    assert "answer must be a function" in _out(capsys)
    assert check.shift_not_shuffle(None) is None
    assert "not attempted yet" in _out(capsys)


def test_shift_not_shuffle_draws_new_sizes_at_every_call_whatever_the_notebook_seeds():
    """The prompt says "any n >= 5": the checker draws its sizes anew at every call (5 to 40 tokens, 1 to 6
    features), and seeding torch or random in the notebook does not make them repeat."""
    import random

    seen = []

    def spy(x):
        seen.append(tuple(x.shape))
        return x + x.roll(1, 0)

    for _ in range(5):
        torch.manual_seed(0)
        random.seed(0)
        assert check.shift_not_shuffle(spy) is True
    lengths = {n for n, _ in seen}
    assert min(lengths) >= 5 and max(lengths) > 16 and len(lengths) > 3
    assert {d for _, d in seen} <= set(range(1, 7))


def test_shift_not_shuffle_refuses_a_layer_written_for_the_old_sizes(capsys):
    """A layer that mixes neighbours only for the sizes an earlier checker tried (5, 6 and 8 tokens) and is a bag
    otherwise: two of the three sizes drawn are always 10 or more, so it is refused at every call."""
    def for_old_sizes(x):
        return x + x.roll(1, 0) if len(x) in (5, 6, 8) else x + x.mean(0)

    for _ in range(3):
        assert check.shift_not_shuffle(for_old_sizes) is False
        assert "treats the tokens as a bag" in _out(capsys)


def test_shift_not_shuffle_does_not_let_a_layer_change_the_tokens_it_is_given():
    """An in-place layer (x += ...) works on a copy: the checker's tokens stay as drawn."""
    def in_place(x):
        x += x.roll(1, 0)
        return x

    assert check.shift_not_shuffle(in_place) is True


# --- exercise 3: blind_query ---------------------------------------------------------------
def _projector():
    _, p, _, _ = check.ch01.dog_setup()
    u = p[1] - p[4]
    u = u / u.norm()
    return torch.eye(8, dtype=torch.float64) - torch.outer(u, u)


def test_blind_query_accepts_any_rank_7_map_that_kills_the_difference(capsys):
    w = _projector()
    assert check.blind_query(w) is True
    assert "all correct!" in _out(capsys)
    assert check.blind_query(w.tolist()) is True
    a = torch.randn(8, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    assert check.blind_query(w @ a) is True  # any W_Q whose rows space misses p_1 - p_4
    assert check.blind_query(w.float().numpy()) is True
    g = torch.Generator().manual_seed(3)
    a = w @ torch.randn(8, generator=g, dtype=torch.float64)  # a direction orthogonal to p_1 - p_4
    assert check.blind_query(torch.outer(a, torch.randn(8, generator=g, dtype=torch.float64))) is True  # rank 1
    assert check.blind_query(3e5 * w) is True  # large queries: the tokens' distances, not the diagonal, decide
    assert check.blind_query(3e9 * w) is True


def test_blind_query_names_the_typical_mistakes_without_the_answer(capsys):
    x, p, w_k, w_v = check.ch01.dog_setup()
    u = (p[1] - p[4]) / (p[1] - p[4]).norm()
    assert check.blind_query(torch.eye(8)) is False  # positions left alone: the dogs differ
    out = _out(capsys)
    assert "still differ" in out and "p_1 - p_4" not in out and "projector" not in out
    assert "query" not in out and "weights" not in out  # neither the feedback nor the hint names the step
    a = torch.randn(8, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    column = a @ (torch.eye(8, dtype=torch.float64) - torch.outer(u, u))  # W u = 0: the column convention
    assert torch.allclose(column @ u, torch.zeros(8, dtype=torch.float64), atol=1e-12)
    assert check.blind_query(column) is False
    out = _out(capsys)
    assert "column convention" in out and "which side" not in out
    v = p[1] / p[1].norm()
    assert check.blind_query(torch.eye(8, dtype=torch.float64) - torch.outer(v, v)) is False  # one code erased
    assert "one dog's position code" in _out(capsys)
    assert check.blind_query(torch.zeros(8, 8)) is False  # works, but throws everything away
    assert "the same query" in _out(capsys)
    basis = torch.linalg.qr(torch.stack([u, (x + p)[0] - (x + p)[2]], dim=1)).Q  # (8, 2)
    two_alike = torch.eye(8, dtype=torch.float64) - basis @ basis.T  # the dogs agree, and so do "the" and "chased"
    assert check.blind_query(two_alike) is False
    assert "the same query" in _out(capsys)
    assert check.blind_query(torch.eye(3)) is False
    assert "must be 8x8" in _out(capsys)
    assert check.blind_query(torch.full((8, 8), float("nan"))) is False  # NaN rows would compare equal
    assert "finite numbers" in _out(capsys)
    assert check.blind_query(None) is None


def test_blind_query_refuses_a_design_for_one_head_or_one_scale(capsys):
    """Two designs that make the dogs agree without erasing their difference: saturated attention (one key
    takes all the weight, at this scale only) and a W_Q tuned to the first head's keys."""
    x, p, w_k, w_v = check.ch01.dog_setup()
    u = (p[1] - p[4]) / (p[1] - p[4]).norm()
    saturated = 1e4 * _projector() + torch.outer(u, u)  # the dogs' queries differ, but both pick one key
    assert check.blind_query(saturated) is False
    out = _out(capsys)
    assert "one key takes all the weight" in out and "hint:" in out
    assert check.blind_query(1e6 * _projector() + 100 * torch.outer(u, u)) is False  # queries of norm > 1e6
    assert "one key takes all the weight" in _out(capsys)
    # The first head's keys: a query difference z with K z = 1 shifts every score of a row by the same
    # amount, so the two dogs get the same weights there although their queries differ.
    keys = (x + p) @ w_k
    z = torch.linalg.pinv(keys) @ torch.ones(5, dtype=torch.float64)
    delta = p[1] - p[4]
    first_head_only = _projector() + torch.outer(delta / delta.dot(delta), z)  # delta W_Q = z
    q = (x + p) @ first_head_only
    torch.testing.assert_close((q[1] - q[4]) @ keys.T, torch.ones(5, dtype=torch.float64))
    assert check.blind_query(first_head_only) is False
    out = _out(capsys)
    assert "first head only" in out and "whatever W_K and W_V" in out


def test_blind_query_fact_queries_equal_means_rows_equal():
    """Independent of the checker: with equal queries, the two rows' softmax weights and outputs agree."""
    x, p, w_k, w_v = check.ch01.dog_setup()
    h = x + p
    w = _projector()
    q = h @ w
    torch.testing.assert_close(q[1], q[4])
    scores = q @ (h @ w_k).T / 8**0.5
    out = scores.softmax(-1) @ (h @ w_v)
    torch.testing.assert_close(out[1], out[4])
    assert not torch.allclose(h[1], h[4])  # the inputs themselves differ


# --- exercise 4: causal_twins --------------------------------------------------------------
def test_causal_twins_fact_by_the_weights_written_out():
    """Independent of the checker: row i of a causal head is a weighted average over the prefix whose
    weights depend on each token's share; two copies of the prefix "0 1" give the same row as one."""
    g = torch.Generator().manual_seed(9)
    emb = torch.randn(5, 8, generator=g, dtype=torch.float64)
    wq, wk, wv = torch.randn(3, 8, 8, generator=g, dtype=torch.float64)

    def row(prefix):  # the last token's output, written out: softmax over the prefix, then the average
        x = emb[torch.tensor(prefix)]
        s = (x[-1] @ wq) @ (x @ wk).T / 8**0.5  # pl.attention's 1/sqrt(d)
        return (s.exp() / s.exp().sum()) @ (x @ wv)

    torch.testing.assert_close(row([0, 1]), row([0, 1, 0, 1]))  # same shares, same row
    torch.testing.assert_close(row([0, 1, 0, 1]), pl.attention(emb[[0, 1, 0, 1]] @ wq, emb[[0, 1, 0, 1]] @ wk,
                                                               emb[[0, 1, 0, 1]] @ wv, causal=True)[0][3])
    assert not torch.allclose(row([0, 1]), row([0, 1, 0, 1, 1]))  # same set, other shares: another row


def test_causal_twins_fact_a_second_layer_tells_the_twins_apart():
    """Independent of the checker: the twins are a one-layer fact. Stack a second causal layer (with or without
    a residual) and rows 1 and 3 of [0, 1, 0, 1] differ, since rows 0 and 2 of the first layer differ."""
    g = torch.Generator().manual_seed(9)
    emb = torch.randn(5, 8, generator=g, dtype=torch.float64)
    wq, wk, wv = torch.randn(3, 8, 8, generator=g, dtype=torch.float64) / 8**0.5
    for residual in (0.0, 1.0):
        def layer(t):
            s = (t @ wq) @ (t @ wk).T / 8**0.5 + torch.triu(torch.full((len(t),) * 2, -torch.inf), 1)
            return residual * t + s.softmax(-1) @ (t @ wv)

        first = layer(emb[[0, 1, 0, 1]])
        second = layer(first)
        assert torch.allclose(first[1], first[3]) and not torch.allclose(first[0], first[2], atol=1e-3)
        assert not torch.allclose(second[1], second[3], atol=1e-3)


def test_causal_twins_success_says_it_is_one_layer(capsys):
    assert check.causal_twins(([0, 1, 0, 1], (1, 3))) is True
    out = _out(capsys)
    assert "one layer" in out
    # Exercise 5 follows: the feedback must not state what a row depends on (its token and the prefix's mix)
    assert not any(word in out for word in ("mix", "share", "set of", "how many", "prefix"))


@pytest.mark.parametrize("right", [
    ([0, 1, 0, 1], (1, 3)),  # a list and a tuple
    ((2, 3, 3, 2, 3, 3), [5, 2]),  # the pair in either order
    (torch.tensor([0, 1, 2, 0, 1, 2]), (torch.tensor(2), 5)),  # tensors
    (np.array([4, 0, 0, 4, 4, 0, 0, 4]), (np.int64(3), 7)),  # numpy
])
def test_causal_twins_accepts_any_pair_with_the_same_shares(right, capsys):
    assert check.causal_twins(right) is True
    assert "all correct!" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, says", [
    (([0, 1, 1, 0], (1, 3)), "hold different tokens"),  # same set before them, different queries
    (([0, 1, 0, 1], (0, 2)), "lacks"),  # the prefix of j has a token the prefix of i has not
    (([0, 1, 0, 1, 1], (1, 4)), "the set is not all that a softmax"),  # same set, other shares
    (([3, 3, 3], (0, 2)), "at least two different tokens"),  # one token repeated: trivially equal
    (([0, 0, 0, 1], (0, 2)), "at least two different tokens"),  # two tokens, but not up to j: trivially equal
    (([0, 1], (1, 1)), "two different positions"),
    (([0, 1, 7], (0, 1)), "each an id from 0 to 4"),
    (([0, 1, 0, 1],), "answer must be (tokens, (i, j))"),
])
def test_causal_twins_names_the_misconception_without_a_sequence(wrong, says, capsys):
    assert check.causal_twins(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "[0, 1, 0, 1]" not in out.replace(repr(wrong), "") and "repeat" not in out  # no sequence handed over
    assert "how often" not in out and "share" not in out and "count" not in out  # nor the idea that gives one


def test_causal_twins_prompt_asks_what_the_checker_demands():
    """The prompt asks for two different tokens among positions 0 to j, as the checker does: a sequence with a
    second token only after j (([0, 0, 0, 1], (0, 2))) meets a looser wording and is refused."""
    from pathlib import Path

    src = (Path(__file__).resolve().parents[1] / "notebooks" / "src" / "01_why_positions.py").read_text()
    prompt = src[src.index("**Exercise 4."):src.index("check.causal_twins(answer)")]
    assert "two different tokens among positions 0 to $j$" in " ".join(line.lstrip("# ") for line in prompt.splitlines())


def test_causal_twins_unattempted(capsys):
    assert check.causal_twins(None) is None
    assert "not attempted yet" in capsys.readouterr().out


# --- exercise 5: changed_rows ----------------------------------------------------------------
# The rule, written here without the checker: row i changes iff i lies between some token's old and new place.
def _came_from(swaps):
    place = {}
    for a, b in swaps:
        place[a], place[b] = place.get(b, b), place.get(a, a)
    return {p: q for p, q in place.items() if p != q}


def rule(n, swaps):
    return [range(min(p, q), max(p, q) + 1) for p, q in _came_from(swaps).items()]


def _as_set(ranges):
    return {i for r in ranges for i in r}


def _causal_rows(x, wq, wk, wv):
    """A causal head written out row by row: query i over keys and values 0..i."""
    out = []
    for i in range(len(x)):
        s = (x[i] @ wq) @ (x[: i + 1] @ wk).T / x.shape[1] ** 0.5
        a = torch.exp(s - s.max())
        out.append((a / a.sum()) @ (x[: i + 1] @ wv))
    return torch.stack(out)


def test_changed_rows_fact_the_rule_is_what_a_causal_head_does():
    """Independent of the checker: on 300 random swap lists over 3 to 12 tokens, the rows that a causal head
    (written out here) changes are exactly the rows the rule gives."""
    import random

    rng = random.Random(5)
    g = torch.Generator().manual_seed(7)
    for _ in range(300):
        n = rng.randrange(3, 13)
        swaps = [tuple(rng.sample(range(n), 2)) for _ in range(rng.randrange(1, 5))]
        x = torch.randn(n, 6, generator=g, dtype=torch.float64)
        wq, wk, wv = torch.randn(3, 6, 6, generator=g, dtype=torch.float64) / 6**0.5
        y = x.clone()
        for a, b in swaps:
            y[[a, b]] = y[[b, a]]
        before, after = _causal_rows(x, wq, wk, wv), _causal_rows(y, wq, wk, wv)
        changed = {i for i in range(n) if not torch.allclose(before[i], after[i], atol=1e-9)}
        assert changed == _as_set(rule(n, swaps)), (n, swaps)


def test_changed_rows_fact_large_weights_can_make_a_real_change_tiny():
    """The prompt's note: with unscaled weights the softmax saturates and a row that must change (swap 1 and 6:
    rows 1 to 6) can move by less than 1e-9; with weights scaled by 1/sqrt(d) every such row moves by over 0.01."""
    smallest = {}
    for seed in range(20):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(8, 8, generator=g, dtype=torch.float64)
        wq, wk, wv = torch.randn(3, 8, 8, generator=g, dtype=torch.float64)
        order = [0, 6, 2, 3, 4, 5, 1, 7]
        for scale in (1.0, 8**-0.5):
            def head(t):
                return pl.attention(t @ wq * scale, t @ wk * scale, t @ wv, causal=True)[0]
            moved = (head(x[order]) - head(x)).abs().amax(-1)[1:7].min().item()
            smallest[scale] = min(smallest.get(scale, float("inf")), moved)
    assert smallest[1.0] < 1e-9 and smallest[8**-0.5] > 0.01


def test_changed_rows_accepts_the_rule_in_several_forms(capsys):
    assert check.changed_rows(rule) is True
    assert "all correct!" in _out(capsys)

    def pieces(n, swaps):  # unmerged, overlapping, with single rows as ints and an empty range
        rows = []
        for r in rule(n, swaps):
            rows += [r.start, range(r.start, r.stop), range(r.stop - 1, r.stop), range(0, 0)]
        return tuple(rows)

    assert check.changed_rows(pieces) is True
    assert check.changed_rows(lambda n, swaps: set(rule(n, swaps))) is True


def _misconception(name):
    def every(n, swaps):
        return [range(n)]

    def moved(n, swaps):
        return [range(p, p + 1) for p in _came_from(swaps)]

    def after(n, swaps):
        moved_ = _came_from(swaps)
        return [range(min(moved_), n)] if moved_ else []

    def keys(n, swaps):  # the rows whose prefix changed as a set, the query forgotten
        return [range(min(p, q), max(p, q)) for p, q in _came_from(swaps).items()]

    def apart(n, swaps):  # each swap on its own, not one after the other
        return [range(min(a, b), max(a, b) + 1) for a, b in swaps if a != b]

    return locals()[name]


@pytest.mark.parametrize("name, says", [
    ("every", "every row changes in your answer"),
    ("moved", "only the rows whose own token moved"),
    ("after", "every row from the first swap on"),
    ("keys", "forgets the row's own query"),
    ("apart", "you treat each swap on its own"),
])
def test_changed_rows_names_each_misconception_without_the_rows(name, says, capsys):
    assert check.changed_rows(_misconception(name)) is False
    out = _out(capsys)
    assert says in out and "hint:" in out
    assert "range(" not in out and "between" not in out and "crossed" not in out  # neither rows nor the rule


def test_changed_rows_over_inclusive_feedback_does_not_say_which_rows_are_wrong(capsys):
    """Every row listed: the feedback names the reflex, not where the extra rows are or how many."""
    assert check.changed_rows(lambda n, swaps: [range(n)]) is False
    out = _out(capsys)
    assert "before" not in out and "after position" not in out and not any(str(k) in out for k in (3, 4, 6, 7))


def test_changed_rows_refuses_a_simulation(capsys):
    """The library's attention is refused; a head written out by hand needs a tensor per token, and the far
    cases (10^12 tokens) refuse to build one; a walk over the rows runs out of steps."""
    def library(n, swaps):
        x = torch.randn(n, 4)
        return [i for i, r in enumerate(pl.attention(x, x, x, causal=True)[0]) if r.sum() > 99]

    def by_hand(n, swaps):
        x = torch.randn(n, 4, dtype=torch.float64)
        y = x.clone()
        for a, b in swaps:
            y[[a, b]] = y[[b, a]]
        wq, wk, wv = torch.eye(4, dtype=torch.float64).expand(3, 4, 4)
        before, after = _causal_rows(x, wq, wk, wv), _causal_rows(y, wq, wk, wv)
        return [i for i in range(n) if not torch.allclose(before[i], after[i], atol=1e-9)]

    def softmax_by_method(n, swaps):
        x = torch.randn(min(n, 50), 4)
        return [] if (x @ x.T).softmax(-1).sum() < 0 else rule(n, swaps)

    def walk(n, swaps):
        ranges = rule(n, swaps)
        return [i for i in range(n) if any(i in r for r in ranges)]

    for fn, says in ((library, "calls pl.attention"), (by_hand, "calls torch.randn with"),
                     (softmax_by_method, "calls Tensor.softmax"), (walk, "walks the rows one by one")):
        assert check.changed_rows(fn) is False
        out = _out(capsys)
        assert says in out, out
    x = torch.randn(3, 2)
    assert x.softmax(-1).shape == (3, 2) and pl.attention(x, x, x)[0].shape == (3, 2)  # whole again afterwards


def test_changed_rows_refuses_badly_formed_rows(capsys):
    assert check.changed_rows(lambda n, swaps: [range(0, n, 2)]) is False
    assert "step 1" in _out(capsys)
    assert check.changed_rows(lambda n, swaps: [range(0, n + 1)]) is False
    assert "outside 0 to 7" in _out(capsys)
    assert check.changed_rows(lambda n, swaps: "2-5") is False
    assert "list of ranges" in _out(capsys)
    assert check.changed_rows([2, 3, 4, 5]) is False  # the old exercise's kind of answer
    assert "answer must be a function" in _out(capsys)
    assert check.changed_rows(None) is None
    assert "not attempted yet" in _out(capsys)


def test_changed_rows_far_cases_are_far_and_varied():
    """The far cases are 10^12 tokens long, touch places spread over the whole sequence, and their rows are
    many separate stretches (an answer space no search reaches), some swaps undone or chained."""
    far = [case for case in check.ch01.SWAP_CASES if case[0] == 10**12]
    assert len(far) == 3
    for n, swaps in far:
        places = sorted({p for pair in swaps for p in pair})
        assert places[0] < 10**11 and places[-1] > 9 * 10**11
        assert len(rule(n, swaps)) >= 6 and len(_came_from(swaps)) < len(places)  # some swaps undone


# --- the answer key -------------------------------------------------------------------------
def test_the_checker_module_hands_over_no_answer():
    """No constant of check.ch01 equals an answer, and none of its functions returns one (called with nothing,
    a flag, a row count, a seed or one of Exercise 5's cases): the designs are checked by their properties, and
    Exercise 5's rows are sealed."""
    from _hands_over import held_answers

    cases = check.ch01.SWAP_CASES
    rows = [sorted(_as_set(rule(n, swaps))) for n, swaps in cases if n < 100]
    pairs = [[[r.start, r.stop] for r in sorted(rule(n, swaps), key=lambda r: r.start)] for n, swaps in cases]
    answers = [-torch.eye(4), [0, 1, 0, 1], ([0, 1, 0, 1], (1, 3)), *rows, *map(set, rows), *pairs]
    calls = [(), (True,), (False,)] + [(n,) for n in range(9)] + list(cases)
    assert held_answers(check.ch01, answers, calls) == []
    assert not hasattr(check.ch01, "LAYERS")  # the old Exercise 2 kept its layers public
    assert not hasattr(check, "neighbour_layer")  # Exercise 2's old name gave its idea away


@pytest.mark.parametrize("still", [lambda x: x[x.norm(dim=1).argsort()], lambda x: x.sort(dim=0).values],
                         ids=["rows sorted by norm", "each feature sorted"])
def test_shift_not_shuffle_names_an_output_that_does_not_move(still, capsys):
    """An output that ignores the order (invariant, not equivariant) has no special place: say what it does."""
    assert check.shift_not_shuffle(still) is False
    out = _out(capsys)
    assert "leaves your layer's output rows where they were" in out and "invariant, not equivariant" in out
    assert "some place in the sequence is special" not in out
    assert "roll" not in out and "wrap" not in out and "neighbour" not in out and "offset" not in out
