"""Integer, binary and sinusoidal codes (posenc_lib.absolute)."""
import math
import re

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc_lib as pl

# The 4 x 10 table printed in the sinusoid source (002_*.txt), max_len=4, d_model=10.
SOURCE_SINUSOID_TABLE = [
    [0.0000e00, 1.0000e00, 0.0000e00, 1.0000e00, 0.0000e00, 1.0000e00, 0.0000e00, 1.0000e00, 0.0000e00, 1.0000e00],
    [8.4147e-01, 5.4030e-01, 1.5783e-01, 9.8747e-01, 2.5116e-02, 9.9968e-01, 3.9811e-03, 9.9999e-01, 6.3096e-04, 1.0000e00],
    [9.0930e-01, -4.1615e-01, 3.1170e-01, 9.5018e-01, 5.0217e-02, 9.9874e-01, 7.9621e-03, 9.9997e-01, 1.2619e-03, 1.0000e00],
    [1.4112e-01, -9.8999e-01, 4.5775e-01, 8.8908e-01, 7.5285e-02, 9.9716e-01, 1.1943e-02, 9.9993e-01, 1.8929e-03, 1.0000e00],
]


def test_integer_positions_rows_are_position_times_ones():
    """Row i of the integer code is i in every feature; normalised it is i/n."""
    p = pl.integer_positions(5, 3)
    assert p.shape == (5, 3)
    assert p[:, 0].tolist() == [0, 1, 2, 3, 4]
    assert torch.equal(p, p[:, :1].expand(5, 3))
    pn = pl.integer_positions(5, 3, normalize=True)
    assert pn[:, 1].tolist() == pytest.approx([0, 0.2, 0.4, 0.6, 0.8])


def test_normalized_step_depends_on_length():
    """i/n breaks the fixed step between neighbours: the step is 1/n."""
    step = lambda n: (pl.integer_positions(n, 1, normalize=True)[1] - pl.integer_positions(n, 1, normalize=True)[0]).item()
    assert step(4) == pytest.approx(0.25) and step(10) == pytest.approx(0.1)


def test_binary_positions_d3_matches_source():
    """d=3: p0=[0,0,0], p1=[0,0,1], p2=[0,1,0] (most significant bit first)."""
    b = pl.binary_positions(8, 3)
    assert b[:3].tolist() == [[0, 0, 0], [0, 0, 1], [0, 1, 0]]
    assert b[7].tolist() == [1, 1, 1]
    assert (b[2] - b[1]).tolist() == [0, 1, -1]


def test_binary_rows_decode_to_positions():
    """Reading the bits back gives 0..n-1: every position has its own code."""
    b = pl.binary_positions(64, 6)
    weights = torch.tensor([2.0**k for k in range(5, -1, -1)])
    assert (b @ weights).tolist() == list(range(64))


def test_sinusoid_reproduces_source_table():
    """The 4 x 10 table printed in the source, to its 5 significant digits."""
    torch.testing.assert_close(pl.sinusoidal_positions(4, 10), torch.tensor(SOURCE_SINUSOID_TABLE), atol=6e-5, rtol=0)


def test_sinusoid_matches_formula_loop():
    """Every entry equals sin/cos(i / 10000**(2j/d)) computed with math, one by one."""
    n, d = 7, 8
    p = pl.sinusoidal_positions(n, d, dtype=torch.float64)
    for i in range(n):
        for j in range(d // 2):
            w = i / 10000 ** (2 * j / d)
            assert p[i, 2 * j].item() == pytest.approx(math.sin(w), abs=1e-12)
            assert p[i, 2 * j + 1].item() == pytest.approx(math.cos(w), abs=1e-12)


def test_concat_layout_is_a_column_permutation_of_interleaved():
    """tensor2tensor's [sin..., cos...] holds the same columns as Vaswani's interleaving."""
    inter = pl.sinusoidal_positions(9, 12)
    concat = pl.sinusoidal_positions(9, 12, layout="concat")
    perm = torch.cat((torch.arange(0, 12, 2), torch.arange(1, 12, 2)))
    torch.testing.assert_close(concat, inter[:, perm], rtol=0, atol=0)


@given(p=st.integers(0, 500), k=st.integers(-50, 50), half_d=st.integers(1, 16))
def test_sinusoid_shift_is_a_rotation_independent_of_position(p, k, half_d):
    """PE(p+k) = M_k PE(p) with M_k block-diagonal [[cos kf, sin kf], [-sin kf, cos kf]]."""
    d = 2 * half_d
    if p + k < 0:
        k = -p
    pe = pl.sinusoidal_positions(p + max(k, 0) + 1, d, dtype=torch.float64)
    M = torch.zeros(d, d, dtype=torch.float64)
    for j in range(half_d):
        w = k / 10000 ** (2 * j / d)
        # (sin(a+w), cos(a+w)) = [[cos w, sin w], [-sin w, cos w]] (sin a, cos a)
        M[2 * j : 2 * j + 2, 2 * j : 2 * j + 2] = torch.tensor([[math.cos(w), math.sin(w)], [-math.sin(w), math.cos(w)]], dtype=torch.float64)
    torch.testing.assert_close(M @ pe[p], pe[p + k], atol=1e-9, rtol=0)


def test_sinusoidal_module_adds_table_and_extends():
    """The module adds P[:seq]; beyond max_len it computes the rows it lacks."""
    m = pl.SinusoidalPositionalEncoding(8, max_len=4)
    x = torch.zeros(2, 6, 8)
    torch.testing.assert_close(m(x)[0], pl.sinusoidal_positions(6, 8))
    assert "pe" not in m.state_dict()


def test_learned_module_refuses_unseen_positions():
    """A learned table has no row for position max_len and beyond."""
    m = pl.LearnedPositionalEncoding(4, 8)
    assert m(torch.zeros(1, 4, 8)).shape == (1, 4, 8)
    with pytest.raises(ValueError, match="max_len=4"):
        m(torch.zeros(1, 5, 8))


def test_modules_add_the_rows_from_offset():
    """With a KV cache the new tokens sit at offset, offset + 1, ...: rows offset.. of the table."""
    sin = pl.SinusoidalPositionalEncoding(8, max_len=4)
    x = torch.zeros(2, 3, 8)
    torch.testing.assert_close(sin(x, offset=5)[0], pl.sinusoidal_positions(8, 8)[5:])  # beyond max_len too
    learned = pl.LearnedPositionalEncoding(6, 8)
    torch.testing.assert_close(learned(x, offset=2)[1], learned.embedding.weight[2:5])
    assert torch.equal(learned(x, offset=0), learned(x))


def test_offset_is_validated_and_counts_towards_max_len():
    learned = pl.LearnedPositionalEncoding(6, 8)
    assert learned(torch.zeros(1, 2, 8), offset=4).shape == (1, 2, 8)
    with pytest.raises(ValueError, match=r"offset \+ sequence length must be <= max_len=6, got 5 \+ 2"):
        learned(torch.zeros(1, 2, 8), offset=5)
    for m in (learned, pl.SinusoidalPositionalEncoding(8)):
        with pytest.raises(ValueError, match="offset must be an integer >= 0, got -1"):
            m(torch.zeros(1, 2, 8), offset=-1)


# --- affine_shift_residual: is there one affine map p_i -> p_{i+k}? ------------------------

def test_affine_residual_is_zero_for_sinusoids_and_for_a_hand_made_affine_code():
    """Sin+cos pairs rotate (exact for every k); a code built as p_i = A^i p_0 + shift is affine too."""
    S = pl.sinusoidal_positions(64, 6, dtype=torch.float64)
    assert max(pl.affine_shift_residual(S, k) for k in range(1, 64)) < 1e-9
    counting = torch.arange(10.0).unsqueeze(1) * torch.tensor([[1.0, -2.0]]) + torch.tensor([3.0, 5.0])
    assert pl.affine_shift_residual(counting, 4) < 1e-9  # p_{i+k} = p_i + k·(1, -2)


def test_affine_residual_of_one_sine_is_its_cosine_part():
    """One column sin(i): the best affine fit of sin(i + k) misses sin(k)·cos(i), so the residual
    is at least |sin k| times the part of cos(i) no affine function of sin(i) explains (> 0)."""
    i = torch.arange(200, dtype=torch.float64)
    for k in (1, 2, 5):
        # the exact least-squares residual, computed independently with numpy-free normal equations
        X = torch.stack([torch.sin(i[:-k]), torch.ones(200 - k, dtype=torch.float64)], dim=1)
        y = torch.sin(i[k:])
        coef = torch.linalg.solve(X.T @ X, X.T @ y)
        want = (X @ coef - y).norm().item()
        got = pl.affine_shift_residual(torch.sin(i).unsqueeze(1), k)
        assert want > 1 and abs(got - want) < 1e-9


def test_affine_residual_of_binary_codes_is_large_for_small_offsets():
    B = pl.binary_positions(64, 6)
    assert all(pl.affine_shift_residual(B, k) > 1 for k in range(1, 16))


@pytest.mark.parametrize("table, k, says", [
    (torch.zeros(5), 1, "table must be a 2-D tensor"),
    (torch.zeros(5, 2), 0, "k must be an integer >= 1"),
    (torch.zeros(5, 2), 5, "k must be < the number of rows (5)"),
    (torch.zeros(5, 2), 1.5, "k must be an integer"),
])
def test_affine_residual_rejects_bad_input(table, k, says):
    with pytest.raises(ValueError, match=re.escape(says)):
        pl.affine_shift_residual(table, k)
