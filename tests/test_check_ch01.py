"""Chapter 1 checkers: right answers pass, wrong ones fail with a reason, unattempted ones say so."""
import numpy as np
import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def _out(capsys):
    return capsys.readouterr().out


# --- exercise 1: reorder_matrix ------------------------------------------------------------
def test_reorder_matrix_accepts_the_right_matrix(capsys):
    p = pl.permutation_matrix([2, 0, 3, 1])
    assert check.reorder_matrix(p) is True
    assert "all correct!" in _out(capsys)
    assert check.reorder_matrix(p.tolist()) is True  # nested lists are fine


def test_reorder_matrix_names_the_transpose_mistake(capsys):
    assert check.reorder_matrix(pl.permutation_matrix([2, 0, 3, 1]).T) is False
    assert "transpose" in _out(capsys)


def test_reorder_matrix_rejects_non_permutations_and_wrong_shapes(capsys):
    assert check.reorder_matrix(torch.ones(4, 4)) is False
    assert "exactly one 1" in _out(capsys)
    assert check.reorder_matrix(torch.eye(3)) is False
    assert "must be 4x4" in _out(capsys)
    assert check.reorder_matrix(torch.eye(4)) is False
    out = _out(capsys)
    assert "[a, b, c, d]" in out and "P[0, 2]" not in out  # the hint gives the method, not an entry
    assert check.reorder_matrix("nonsense") is False  # an exception is reported, not raised
    assert "raised" in _out(capsys)


def test_reorder_matrix_unattempted(capsys):
    assert check.reorder_matrix(None) is None
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
    assert keeps == KEEP == check.ch01.equivariant_layer_names()
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
    assert changed == [2, 3, 4, 5] == check.ch01.causal_swap_changed_rows()
