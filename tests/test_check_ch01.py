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


@pytest.mark.parametrize("shortcut", [pl.permutation_matrix([2, 0, 3, 1]), torch.eye(4), pl.permutation_matrix([1, 0, 2, 3]).T])
def test_passes_through_refuses_a_permutation(shortcut, capsys):
    """The section's own answer (the library's permutation matrix, the identity, a transpose) is no design."""
    assert check.passes_through(shortcut) is False
    out = _out(capsys)
    assert "is a permutation matrix" in out and "hint:" in out


@pytest.mark.parametrize("wrong, says", [
    (2 * torch.eye(4), "scales every token by 2"),  # attention taken for linear
    (-3 * pl.permutation_matrix([2, 0, 3, 1]), "scales every token by -3"),  # the sign is right, the size is not
    (torch.diag(torch.tensor([-1.0, 1, 1, 1])), "flips the sign of some tokens"),  # one token's sign
    (torch.tensor([[1.0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]]), "singular"),  # a token copied
    (torch.zeros(4, 4), "singular"),  # passes trivially, keeps nothing
    (torch.eye(4) + 0.1, "differs from T Attn(X)"),  # a mixing matrix
    (torch.eye(3), "must be 4x4"),
])
def test_passes_through_names_the_misconception_without_the_answer(wrong, says, capsys):
    assert check.passes_through(wrong) is False
    out = _out(capsys)
    assert says in out and "hint:" in out, out
    assert "-I" not in out and "-P" not in out and "negat" not in out and "minus" not in out


def test_passes_through_unattempted(capsys):
    assert check.passes_through(None) is None
    assert "not attempted yet" in _out(capsys)


# --- exercise 2: equivariant_layers -------------------------------------------------------
KEEP = {"a", "c", "e", "f"}


def test_equivariant_layers_right_answer_in_several_forms(capsys):
    assert check.equivariant_layers(KEEP) is True
    assert "all correct!" in _out(capsys)
    assert check.equivariant_layers(["f", "e", "c", "a"]) is True
    assert check.equivariant_layers("acef") is True
    assert check.equivariant_layers("A, C, E, F") is True


def test_equivariant_layers_names_both_misconceptions_without_the_answer(capsys):
    assert check.equivariant_layers(set("abcdef")) is False  # "everything that mixes tokens is fine"
    out = _out(capsys)
    assert "2 of the layers you chose treat a token by where it stands" in out and "left out" not in out
    assert check.equivariant_layers(set()) is False  # "mixing tokens breaks it"
    out = _out(capsys)
    assert "4 of the layers you left out keep equivariance" in out and "mixing tokens does not break it" in out
    assert check.equivariant_layers({"a", "b"}) is False  # both at once
    out = _out(capsys)
    assert "1 of the layers you chose treats" in out and "3 of the layers you left out" in out
    for text in (out,):
        assert not any(f"({k})" in text or f"'{k}'" in text for k in "abcdef")  # no layer is named
    assert check.equivariant_layers({"a", "z"}) is False
    assert "not one of them" in _out(capsys)
    assert check.equivariant_layers([1, 2]) is False
    assert "set of letters" in _out(capsys)
    assert check.equivariant_layers(None) is None
    assert "not attempted yet" in _out(capsys)


def test_equivariant_layers_fact_over_every_order_of_five_tokens():
    """The keyed set, by running each layer on every one of the 120 orders of 5 tokens."""
    import itertools

    x = torch.randn(5, 3, generator=torch.Generator().manual_seed(4), dtype=torch.float64)
    keeps = set()
    for name, f in check.ch01.LAYERS.items():
        if all(torch.allclose(f(x[list(o)]), f(x)[list(o)], atol=1e-12) for o in itertools.permutations(range(5))):
            keeps.add(name)
    assert keeps == KEEP
    # and the two that break it, broken by swapping the first two tokens
    for name in set("abcdef") - KEEP:
        f = check.ch01.LAYERS[name]
        assert not torch.allclose(f(x[[1, 0, 2, 3, 4]]), f(x)[[1, 0, 2, 3, 4]])


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


def test_blind_query_names_the_typical_mistakes_without_the_answer(capsys):
    x, p, w_k, w_v = check.ch01.dog_setup()
    u = (p[1] - p[4]) / (p[1] - p[4]).norm()
    assert check.blind_query(torch.eye(8)) is False  # positions left alone: the dogs differ
    out = _out(capsys)
    assert "still differ" in out and "p_1 - p_4" not in out and "projector" not in out
    a = torch.randn(8, 8, generator=torch.Generator().manual_seed(2), dtype=torch.float64)
    column = a @ (torch.eye(8, dtype=torch.float64) - torch.outer(u, u))  # W u = 0: the column convention
    assert torch.allclose(column @ u, torch.zeros(8, dtype=torch.float64), atol=1e-12)
    assert check.blind_query(column) is False
    assert "column convention" in _out(capsys)
    v = p[1] / p[1].norm()
    assert check.blind_query(torch.eye(8, dtype=torch.float64) - torch.outer(v, v)) is False  # one code erased
    assert "one dog's position code" in _out(capsys)
    assert check.blind_query(torch.zeros(8, 8)) is False  # works, but throws everything away
    assert "rank 0" in _out(capsys)
    assert check.blind_query(torch.eye(3)) is False
    assert "must be 8x8" in _out(capsys)
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
    (([0, 1, 0, 1, 1], (1, 4)), "how often each token occurs"),  # same set, other shares
    (([3, 3, 3], (0, 2)), "at least two different tokens"),  # one token repeated: trivially equal
    (([0, 1], (1, 1)), "two different positions"),
    (([0, 1, 7], (0, 1)), "each an id from 0 to 4"),
    (([0, 1, 0, 1],), "answer must be (tokens, (i, j))"),
])
def test_causal_twins_names_the_misconception_without_a_sequence(wrong, says, capsys):
    assert check.causal_twins(wrong) is False
    out = capsys.readouterr().out
    assert says in out and "hint:" in out
    assert "[0, 1, 0, 1]" not in out.replace(repr(wrong), "") and "repeat" not in out  # no sequence handed over


def test_causal_twins_unattempted(capsys):
    assert check.causal_twins(None) is None
    assert "not attempted yet" in capsys.readouterr().out


# --- exercise 5: causal_swap_rows ----------------------------------------------------------
RIGHT_ROWS = [2, 3, 4, 5]  # derived in test_causal_swap_fact_by_explicit_prefixes


def test_causal_swap_rows_right_answer(capsys):
    assert check.causal_swap_rows([2, 3, 4, 5]) is True
    assert "all correct!" in _out(capsys)
    assert check.causal_swap_rows((5, 4, 3, 2)) is True  # any order, any sequence type
    assert check.causal_swap_rows(torch.tensor([2, 3, 4, 5])) is True
    assert check.causal_swap_rows(np.array([2, 3, 4, 5])) is True
    assert check.causal_swap_rows([np.int64(2), 3.0, torch.tensor(4), 5]) is True


def test_causal_swap_rows_wrong_answers_point_the_way_without_the_answer(capsys):
    assert check.causal_swap_rows(list(range(8))) is False  # "everything changes": the equivariance reflex
    out = _out(capsys)
    assert "before position 2" in out and "after position 5" in out and "missing" not in out
    assert check.causal_swap_rows([2, 5]) is False  # only the swapped rows
    out = _out(capsys)
    assert "2 rows that change are missing" in out and "[2, 3, 4, 5]" not in out and "3, 4" not in out
    assert check.causal_swap_rows([2, 3, 4]) is False
    assert "1 row that changes is missing" in _out(capsys)
    assert check.causal_swap_rows([2, 3, 4, 5, 6, 7]) is False  # "everything after the first swap changes"
    out = _out(capsys)
    assert "after position 5" in out and "section 1" in out and "missing" not in out
    assert check.causal_swap_rows([2, 3, 4, 5, 8]) is False
    assert "numbered 0 to 7" in _out(capsys)
    assert check.causal_swap_rows("2-5") is False
    assert "list of row indices" in _out(capsys)
    assert check.causal_swap_rows([True, 3]) is False  # booleans are not row indices


def test_causal_swap_rows_unattempted(capsys):
    assert check.causal_swap_rows(None) is None
    assert "not attempted yet" in _out(capsys)


def test_causal_swap_fact_by_explicit_prefixes():
    """Row i of a causal head, computed as plain attention of query i over keys 0..i, changes
    exactly for i = 2..5 when tokens 2 and 5 swap (independent of the checker's code)."""
    g = torch.Generator().manual_seed(7)
    n, d = 8, 6
    x = torch.randn(n, d, generator=g, dtype=torch.float64)
    wq, wk, wv = (torch.randn(d, d, generator=g, dtype=torch.float64) / d**0.5 for _ in range(3))  # unsaturated

    def rows(t):
        out = []
        for i in range(n):
            s = (t[i] @ wq) @ (t[: i + 1] @ wk).T / d**0.5
            a = torch.exp(s - s.max())
            out.append((a / a.sum()) @ (t[: i + 1] @ wv))
        return torch.stack(out)

    swapped = x[[0, 1, 5, 3, 4, 2, 6, 7]]
    changed = [i for i in range(n) if not torch.allclose(rows(swapped)[i], rows(x)[i], atol=1e-9)]
    assert changed == [2, 3, 4, 5] == RIGHT_ROWS


# --- the answer key -------------------------------------------------------------------------
def test_the_checker_module_hands_over_no_answer():
    """No constant of check.ch01 equals an answer, and none of its functions returns one (called with
    nothing, a flag, a row count or a seed): the set and the rows are sealed, the designs are checked by
    their properties."""
    from _hands_over import held_answers

    answers = [KEEP, sorted(KEEP), RIGHT_ROWS, set(RIGHT_ROWS), [0, 1, 6, 7], {"b", "d"}]
    calls = [(), (True,), (False,)] + [(n,) for n in range(9)]
    assert held_answers(check.ch01, answers, calls) == []
