"""Chapter 1 checkers: right answers pass, wrong ones fail with a reason, unattempted ones say so."""
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


# --- exercise 2: predict_equal -------------------------------------------------------------
RIGHT = {"a": True, "b": False, "c": True, "d": False, "e": True}


def test_predict_equal_right_and_wrong(capsys):
    assert check.predict_equal(RIGHT) is True
    assert "all correct!" in _out(capsys)
    assert check.predict_equal({**RIGHT, "e": False}) is False
    out = _out(capsys)
    assert "1 of your predictions is wrong" in out
    assert "(e)" not in out  # naming the wrong one would give its answer away
    assert check.predict_equal({k: not v for k, v in RIGHT.items()}) is False
    out = _out(capsys)
    assert "5 of your predictions are wrong" in out and "✓" not in out
    assert check.predict_equal({"a": True}) is False
    assert "(b): answer True or False" in _out(capsys)
    assert check.predict_equal([True, False]) is False
    assert "must be a dict" in _out(capsys)


def test_predict_equal_unattempted(capsys):
    assert check.predict_equal(None) is None
    assert "not attempted yet" in _out(capsys)


def test_predictions_are_what_the_code_does():
    """The keyed answers are facts about attention, checked here by running it."""
    g = torch.Generator().manual_seed(3)
    d = 8
    wq, wk, wv = (torch.randn(d, d, generator=g) / d**0.5 for _ in range(3))  # softmax not saturated
    emb = torch.randn(5, d, generator=g)
    x = emb[torch.tensor([0, 1, 2, 3, 4, 2])]
    pos = pl.sinusoidal_positions(6, d)
    blind = pl.self_attention(x, wq, wk, wv)[0]
    aware = pl.self_attention(x, wq, wk, wv, positions=pos)[0]
    assert torch.allclose(blind[2], blind[5], atol=1e-6) == RIGHT["a"]
    assert torch.allclose(aware[2], aware[5], atol=1e-6) == RIGHT["b"]
    q, k, v = torch.randn(1, d, generator=g), x @ wk, x @ wv
    order = torch.tensor([3, 5, 0, 1, 4, 2])
    base = pl.attention(q, k, v)[0]
    assert torch.allclose(pl.attention(q, k[order], v[order])[0], base, atol=1e-6) == RIGHT["c"]
    assert torch.allclose(pl.attention(q, k[order], v)[0], base, atol=1e-6) == RIGHT["d"]
    swap = torch.tensor([0, 1, 5, 3, 4, 2])
    assert torch.allclose(pl.self_attention(x[swap], wq, wk, wv, positions=pos)[0], aware) == RIGHT["e"]


# --- exercise 3: order_aware_attention -----------------------------------------------------
def right_attention(x, w_q, w_k, w_v):
    h = x + pl.sinusoidal_positions(x.shape[-2], x.shape[-1])
    return pl.attention(h @ w_q, h @ w_k, h @ w_v)[0]


def test_order_aware_attention_accepts_the_solution_and_tuples(capsys):
    assert check.order_aware_attention(right_attention) is True
    assert "all correct!" in _out(capsys)
    assert check.order_aware_attention(lambda *a: (right_attention(*a), None)) is True


def test_order_aware_attention_names_common_mistakes(capsys):
    blind = lambda x, wq, wk, wv: pl.attention(x @ wq, x @ wk, x @ wv)[0]
    assert check.order_aware_attention(blind) is False
    out = _out(capsys)
    assert "without positions" in out and "still get identical outputs" in out

    def after(x, wq, wk, wv):
        p = pl.sinusoidal_positions(x.shape[-2], x.shape[-1])
        return pl.attention(x @ wq + p, x @ wk + p, x @ wv + p)[0]

    assert check.order_aware_attention(after) is False
    assert "after the projections" in _out(capsys)
    assert check.order_aware_attention(lambda x, *w: 2 * right_attention(x, *w)) is False
    assert "values differ" in _out(capsys)
    assert check.order_aware_attention(lambda *a: torch.zeros(3)) is False
    assert "must return a (6, 8) tensor" in _out(capsys)
    assert check.order_aware_attention(42) is False


def test_order_aware_attention_unattempted(capsys):
    def stub(x, w_q, w_k, w_v):
        raise NotImplementedError

    assert check.order_aware_attention(stub) is None
    assert "not attempted yet" in _out(capsys)
    assert check.order_aware_attention(None) is None


# --- exercise 4: distinct_outputs ----------------------------------------------------------
def test_distinct_outputs(capsys):
    assert check.ch01.distinct_output_counts() == (5, 8)
    assert check.distinct_outputs((5, 8)) is True
    assert "all correct!" in _out(capsys)
    assert check.distinct_outputs((8, 8)) is False
    out = _out(capsys)
    assert "the very same vector" in out
    assert "distinct words" not in out and "its own input" not in out  # the feedback keeps the answer back
    assert check.distinct_outputs((5, 5)) is False
    out = _out(capsys)
    assert "still equal" in out and "one per token" not in out
    assert check.distinct_outputs(5) is False
    assert "must be a pair" in _out(capsys)
    assert check.distinct_outputs(None) is None
    assert "not attempted yet" in _out(capsys)


# --- exercise 5: causal_swap_rows ----------------------------------------------------------
def test_causal_swap_rows_right_answer(capsys):
    assert check.causal_swap_rows([2, 3, 4, 5]) is True
    assert "all correct!" in _out(capsys)
    assert check.causal_swap_rows((5, 4, 3, 2)) is True  # any order, any sequence type
    assert check.causal_swap_rows(torch.tensor([2, 3, 4, 5])) is True


def test_causal_swap_rows_wrong_answers_point_the_way_without_the_answer(capsys):
    assert check.causal_swap_rows(list(range(8))) is False  # "everything changes": the equivariance reflex
    out = _out(capsys)
    assert "before position 2" in out and "after position 5" in out and "missing" not in out
    assert check.causal_swap_rows([2, 5]) is False  # only the swapped rows
    out = _out(capsys)
    assert "2 rows that change are missing" in out and "[2, 3, 4, 5]" not in out
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
