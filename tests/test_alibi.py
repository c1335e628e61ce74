"""ALiBi slopes and biases (posenc_lib.alibi)."""
import math

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc_lib as pl


def press_get_slopes(n: int) -> list[float]:
    """Press et al.'s recipe, restated: start = ratio = 2**(-2**-(log2(n) - 3))."""
    def power_of_2(n):
        start = 2 ** (-(2 ** -(math.log2(n) - 3)))
        return [start * start**i for i in range(n)]

    if math.log2(n).is_integer():
        return power_of_2(n)
    c = 2 ** math.floor(math.log2(n))
    return power_of_2(c) + press_get_slopes(2 * c)[0::2][: n - c]


def test_slopes_for_8_heads_are_halvings():
    """The paper's example: 8 heads give 1/2, 1/4, ..., 1/256."""
    assert pl.alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]


@pytest.mark.parametrize("n", list(range(1, 33)) + [48, 80, 96])
def test_slopes_match_press_recipe(n):
    """Every head count, powers of two or not, gives Press's get_slopes."""
    torch.testing.assert_close(pl.alibi_slopes(n, dtype=torch.float64), torch.tensor(press_get_slopes(n), dtype=torch.float64))


def test_non_power_of_two_differs_from_naive_geometric():
    """For 6 heads the recipe is not 2**(-8h/6): it interleaves the 8-head slopes."""
    naive = torch.tensor([2 ** (-8 * h / 6) for h in range(1, 7)])
    assert not torch.allclose(pl.alibi_slopes(6), naive)
    torch.testing.assert_close(pl.alibi_slopes(6), torch.tensor([2**-2, 2**-4, 2**-6, 2**-8, 2**-1, 2**-3]))


@given(h=st.integers(1, 16), q=st.integers(1, 40))
def test_causal_bias_is_linear_in_distance_and_zero_on_diagonal(h, q):
    """bias[h, i, j] = -m_h (i - j) for j <= i, -inf above the diagonal."""
    b = pl.alibi_bias(h, q)
    m = pl.alibi_slopes(h)
    i, j = torch.meshgrid(torch.arange(q), torch.arange(q), indexing="ij")
    below = j <= i
    expected = -m.view(-1, 1, 1) * (i - j).float()
    torch.testing.assert_close(b[:, below], expected[:, below])
    assert torch.isneginf(b[:, ~below]).all()
    assert (b.diagonal(dim1=-2, dim2=-1) == 0).all()


def test_symmetric_bias_is_minus_slope_times_abs_distance():
    b = pl.alibi_bias(4, 5, mode="symmetric")
    d = (torch.arange(5)[None] - torch.arange(5)[:, None]).abs().float()
    torch.testing.assert_close(b, -pl.alibi_slopes(4).view(-1, 1, 1) * d)
    torch.testing.assert_close(b, b.transpose(-1, -2))


def test_nonsymmetric_heads_look_left_then_right():
    """First half of the heads see only the past, second half only the future; slopes of H/2 heads."""
    b = pl.alibi_bias(4, 5, mode="nonsymmetric")
    assert torch.isneginf(b[:2].triu(1)[:, torch.ones(5, 5).triu(1).bool()]).all()
    assert torch.isneginf(b[2:][:, torch.ones(5, 5).tril(-1).bool()]).all()
    torch.testing.assert_close(b[0, 4, 0], -4 * pl.alibi_slopes(2)[0])
    torch.testing.assert_close(b[2, 0, 4], -4 * pl.alibi_slopes(2)[0])


def test_queries_align_to_the_end_of_the_keys():
    """With a cache (q_len < k_len), the last query row equals the full matrix's last row."""
    full = pl.alibi_bias(3, 7)
    torch.testing.assert_close(pl.alibi_bias(3, 2, 7), full[:, -2:])


def test_alibi_module_matches_function():
    m = pl.ALiBi(6)
    torch.testing.assert_close(m(5), pl.alibi_bias(6, 5))
    assert "slopes" not in m.state_dict()
