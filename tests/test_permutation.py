"""Permutation helpers: P @ x == x[order], and attention without positions is order-blind."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc_lib as pl


@given(st.permutations(list(range(6))))
def test_permutation_matrix_reorders_rows_like_indexing(order):
    """P @ x picks row order[i] into row i, exactly like x[order]."""
    x = torch.arange(6 * 3, dtype=torch.float32).reshape(6, 3)
    p = pl.permutation_matrix(order)
    torch.testing.assert_close(p @ x, x[order])
    torch.testing.assert_close(p @ p.T, torch.eye(6))  # orthogonal


@given(st.permutations(list(range(7))))
def test_inverse_permutation_undoes_the_order(order):
    """x[order][inverse] == x."""
    x = torch.randn(7, 2)
    inv = pl.inverse_permutation(order)
    torch.testing.assert_close(x[order][inv], x)
    torch.testing.assert_close(pl.permutation_matrix(inv), pl.permutation_matrix(order).T)


def test_permutation_matrix_accepts_tensors_and_follows_device_and_dtype():
    """A tensor order keeps its device; dtype is the caller's."""
    p = pl.permutation_matrix(torch.tensor([2, 0, 1]), dtype=torch.float64)
    assert p.dtype == torch.float64 and p.device == torch.device("cpu")
    assert p.tolist() == [[0, 0, 1], [1, 0, 0], [0, 1, 0]]
    assert pl.permutation_matrix([]).shape == (0, 0)


def _weights(d=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(d, d, generator=g) / d**0.5 for _ in range(3)]


@given(st.permutations(list(range(5))))
def test_self_attention_without_positions_is_permutation_equivariant(order):
    """Permute the tokens and the output rows permute the same way."""
    x = torch.randn(2, 5, 8, generator=torch.Generator().manual_seed(1))
    wq, wk, wv = _weights()
    err = pl.equivariance_error(lambda t: pl.self_attention(t, wq, wk, wv)[0], x, order)
    assert err < 1e-5


def test_self_attention_with_positions_is_order_aware_and_matches_the_formula():
    """Adding a code before the projections breaks equivariance; the output is attention(W(x+P))."""
    x = torch.randn(5, 8, generator=torch.Generator().manual_seed(2))
    wq, wk, wv = _weights()
    pos = pl.sinusoidal_positions(5, 8)
    out, w = pl.self_attention(x, wq, wk, wv, positions=pos)
    ref, ref_w = pl.attention((x + pos) @ wq, (x + pos) @ wk, (x + pos) @ wv)
    torch.testing.assert_close(out, ref)
    torch.testing.assert_close(w, ref_w)
    err = pl.equivariance_error(lambda t: pl.self_attention(t, wq, wk, wv, positions=pos)[0], x, [4, 3, 2, 1, 0])
    assert err > 1e-3


def test_equivariance_error_is_zero_for_rowwise_maps():
    """A row-wise map (no mixing between rows) is trivially equivariant."""
    x = torch.randn(4, 3)
    assert pl.equivariance_error(torch.tanh, x, [1, 2, 3, 0]) == 0.0


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda: pl.permutation_matrix([0, 0, 1]), "order must be a permutation of 0..2"),
        (lambda: pl.permutation_matrix([0, 3]), "order must be a permutation of 0..1"),
        (lambda: pl.permutation_matrix([0, -1]), "order[i] must be an integer >= 0"),
        (lambda: pl.permutation_matrix(torch.tensor([0.0, 1.0])), "order must have an integer dtype"),
        (lambda: pl.permutation_matrix(torch.zeros(2, 2, dtype=torch.long)), "order must be 1-D"),
        (lambda: pl.permutation_matrix(3), "order must be a sequence of integers"),
        (lambda: pl.inverse_permutation([1, 1]), "order must be a permutation"),
        (lambda: pl.self_attention(torch.randn(4), *_weights()), "x must be a tensor of shape"),
        (lambda: pl.self_attention(torch.randn(4, 6), *_weights()), "w_q must have shape (6, d_out)"),
        (lambda: pl.self_attention(torch.randn(4, 8), _weights()[0], torch.randn(8, 3), _weights()[2]),
         "w_k.shape[1] must equal w_q.shape[1]=8"),
        (lambda: pl.self_attention(torch.randn(4, 8), *_weights(), positions=torch.zeros(5, 8)),
         "positions must have shape (4, 8)"),
        (lambda: pl.equivariance_error(torch.tanh, torch.randn(4, 2), [0, 1, 2]), "order must have length n=4"),
        (lambda: pl.equivariance_error(torch.tanh, torch.randn(4), [0, 1, 2, 3]), "x must be a tensor of shape"),
    ],
)
def test_bad_input_raises_value_error_naming_the_parameter(call, message):
    with pytest.raises(ValueError, match=None) as e:
        call()
    assert message in str(e.value)
