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


# --- two-sided and learned ALiBi -------------------------------------------------------------

def test_two_sided_bias_uses_left_slope_below_and_right_slope_above_the_diagonal():
    """bias[h, i, j] = -left[h] (i - j) for j <= i and -right[h] (j - i) for j > i."""
    left, right = torch.tensor([0.5, 0.25]), torch.tensor([0.125, 1.0])
    b = pl.alibi_bias_two_sided(left, right, 5)
    d = torch.arange(5)[None] - torch.arange(5)[:, None]  # j - i
    expected = torch.where(d > 0, -right.view(-1, 1, 1) * d, left.view(-1, 1, 1) * d)
    torch.testing.assert_close(b, expected)
    assert b.shape == (2, 5, 5)
    assert (b.diagonal(dim1=-2, dim2=-1) == 0).all()


def test_two_sided_bias_equals_source_triu_plus_tril_form():
    """The source's triu(right part) + tril(left part) gives the same matrix when q_len == k_len."""
    left, right = torch.rand(3), torch.rand(3)
    dist = (torch.arange(6)[None] - torch.arange(6)[:, None]).abs()
    source = torch.triu(-right.view(-1, 1, 1) * dist) + torch.tril(-left.view(-1, 1, 1) * dist)
    torch.testing.assert_close(pl.alibi_bias_two_sided(left, right, 6), source)


def test_two_sided_with_equal_slopes_is_symmetric_alibi():
    m = pl.alibi_slopes(4)
    torch.testing.assert_close(pl.alibi_bias_two_sided(m, m, 7), pl.alibi_bias(4, 7, mode="symmetric"))


def test_two_sided_aligns_queries_to_the_end_of_the_keys():
    left, right = torch.rand(2), torch.rand(2)
    full = pl.alibi_bias_two_sided(left, right, 7)
    torch.testing.assert_close(pl.alibi_bias_two_sided(left, right, 3, 7), full[:, -3:])


@pytest.mark.parametrize(
    "left, right, q_len, k_len, message",
    [
        (torch.ones(2, 2), torch.ones(2), 4, None, "slopes_left must be a 1-D floating tensor"),
        (torch.ones(2), torch.ones(2, dtype=torch.long), 4, None, "slopes_right must be a 1-D floating tensor"),
        ([1.0, 2.0], torch.ones(2), 4, None, "slopes_left must be"),
        (torch.ones(2), torch.ones(3), 4, None, "slopes_right must have shape (2,)"),
        (torch.ones(0), torch.ones(0), 4, None, "num_heads"),
        (torch.ones(2), torch.ones(2), -1, None, "q_len must be"),
        (torch.ones(2), torch.ones(2), 5, 3, "k_len must be >= q_len=5"),
    ],
)
def test_two_sided_bad_input_raises(left, right, q_len, k_len, message):
    with pytest.raises(ValueError) as e:
        pl.alibi_bias_two_sided(left, right, q_len, k_len)
    assert message in str(e.value)


def test_learned_alibi_shapes_and_zero_diagonal():
    torch.manual_seed(0)
    mod = pl.LearnedALiBi(6)
    assert mod.slopes_left.shape == mod.slopes_right.shape == (6,)
    b = mod(5)
    assert b.shape == (6, 5, 5)
    assert mod(3, 8).shape == (6, 3, 8)
    assert (b.diagonal(dim1=-2, dim2=-1) == 0).all()
    assert torch.isfinite(b).all()  # no mask: both directions visible
    assert (b <= 0).all()


def test_learned_alibi_is_two_sided_bias_of_sigmoid_slopes():
    """The source's form: slopes = -sigmoid(param), bias = triu(slope_r |i-j|) + tril(slope_l |i-j|)."""
    torch.manual_seed(1)
    mod = pl.LearnedALiBi(4)
    dist = (torch.arange(5)[None] - torch.arange(5)[:, None]).abs()
    sl, sr = -torch.sigmoid(mod.slopes_left), -torch.sigmoid(mod.slopes_right)
    source = torch.triu(sr.view(-1, 1, 1) * dist) + torch.tril(sl.view(-1, 1, 1) * dist)
    torch.testing.assert_close(mod(5), source)


def test_learned_alibi_init_is_normal_minus_two_one():
    """Parameters start ~ normal(-2, 1): over many heads, mean ~ -2 and std ~ 1."""
    torch.manual_seed(0)
    mod = pl.LearnedALiBi(20000)
    for p in (mod.slopes_left, mod.slopes_right):
        assert abs(p.mean().item() + 2) < 0.05 and abs(p.std().item() - 1) < 0.05
    m_left, m_right = mod.slopes()
    assert ((m_left > 0) & (m_left < 1)).all() and ((m_right > 0) & (m_right < 1)).all()


def test_learned_alibi_gradients_reach_both_slopes_from_their_own_side():
    torch.manual_seed(0)
    mod = pl.LearnedALiBi(3)
    mod(6).tril().sum().backward()  # only the left part (and the zero diagonal)
    assert (mod.slopes_left.grad != 0).all()
    assert (mod.slopes_right.grad == 0).all()
    mod.zero_grad()
    mod(6).sum().backward()
    assert (mod.slopes_left.grad != 0).all() and (mod.slopes_right.grad != 0).all()


def test_learned_alibi_bias_follows_an_optimizer_step():
    """The bias is rebuilt in forward, so a training step changes it."""
    torch.manual_seed(0)
    mod = pl.LearnedALiBi(2)
    before = mod(4).detach()
    opt = torch.optim.SGD(mod.parameters(), lr=1.0)
    mod(4).sum().backward()
    opt.step()
    assert not torch.allclose(mod(4), before)


def test_learned_alibi_parameters_are_in_state_dict_and_follow_dtype():
    mod = pl.LearnedALiBi(2, dtype=torch.float64)
    assert set(mod.state_dict()) == {"slopes_left", "slopes_right"}
    assert mod(3).dtype == torch.float64
    assert pl.LearnedALiBi(2, device="meta")(3).device.type == "meta"


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(num_heads=0), "num_heads must be"),
        (dict(num_heads=2.5), "num_heads must be"),
        (dict(num_heads=2, init_std=-1.0), "init_std must be"),
        (dict(num_heads=2, init_std=float("nan")), "init_std must be"),
        (dict(num_heads=2, init_mean=float("inf")), "init_mean must be"),
        (dict(num_heads=2, init_mean="a"), "init_mean must be"),
    ],
)
def test_learned_alibi_bad_input_raises(kwargs, message):
    with pytest.raises(ValueError) as e:
        pl.LearnedALiBi(**kwargs)
    assert message in str(e.value)


def test_learned_alibi_forward_bad_length_raises():
    with pytest.raises(ValueError, match="q_len must be"):
        pl.LearnedALiBi(2)(-1)


@pytest.mark.parametrize("heads", [2, 4, 8, 12])
def test_nonsymmetric_mode_equals_the_source_construction(heads):
    """Source: -get_slopes(H/2)|i-j| repeated twice, plus triu(-inf, 1) masks for the first half
    (they look left) and tril(-inf, -1) masks for the second half (they look right)."""
    L = 6
    neg_inf = torch.full((L, L), float("-inf"))
    mask_right = torch.triu(neg_inf, 1).expand(heads // 2, L, L)  # hides keys to the right (future)
    mask_left = torch.tril(neg_inf, -1).expand(heads // 2, L, L)  # hides keys to the left (past)
    dist = (torch.arange(L)[None] - torch.arange(L)[:, None]).abs()
    slopes = -torch.tensor(press_get_slopes(heads // 2))
    alibi = (slopes.view(-1, 1, 1) * dist).repeat(2, 1, 1)
    source = alibi + torch.cat([mask_right, mask_left])
    torch.testing.assert_close(pl.alibi_bias(heads, L, mode="nonsymmetric"), source)


@pytest.mark.parametrize("n", [3, 5, 6, 7, 9, 12, 15, 24, 112])
def test_extra_run_starts_above_the_first_run_and_then_falls_between_it(n):
    """Exponents e (m = 2**-e): the second run's first value is the steepest of all; the rest lie
    strictly between neighbours of the first run. For H = 3, 5, 9 the second run is that one value."""
    c = 2 ** math.floor(math.log2(n))
    e = (-torch.log2(pl.alibi_slopes(n, dtype=torch.float64))).tolist()
    first, extra = e[:c], e[c:]
    assert first == pytest.approx([8 * h / c for h in range(1, c + 1)], abs=1e-12)
    assert extra == pytest.approx([8 * (2 * k + 1) / (2 * c) for k in range(n - c)], abs=1e-12)  # 4/c, 12/c, ...
    assert extra[0] < min(first)
    assert all(any(a < x < b for a, b in zip(first, first[1:])) for x in extra[1:])


def test_three_heads_extra_slope_is_the_steepest():
    assert pl.alibi_slopes(3).tolist() == [2.0**-4, 2.0**-8, 2.0**-2]
    assert pl.alibi_slopes(5).tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1]
