"""2-D axial RoPE (posenc_lib.rope2d)."""
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import posenc_lib as pl

coord = st.integers(-50, 50)


def test_axial_positions_are_raster_order():
    rows, cols = pl.axial_positions(2, 3)
    assert rows.tolist() == [0, 0, 0, 1, 1, 1] and cols.tolist() == [0, 1, 2, 0, 1, 2]
    assert rows.dtype == cols.dtype == torch.long


@pytest.mark.parametrize("layout", ["interleaved", "half"])
def test_first_half_turns_with_row_second_half_with_column(layout):
    """Features [:d/2] are 1-D RoPE of dimension d/2 at the row; [d/2:] at the column."""
    x = torch.randn(12, 16, dtype=torch.float64)
    rows, cols = pl.axial_positions(3, 4)
    out = pl.apply_rope_2d(x, rows, cols, layout=layout)
    torch.testing.assert_close(out[:, :8], pl.apply_rope(x[:, :8], rows, layout=layout))
    torch.testing.assert_close(out[:, 8:], pl.apply_rope(x[:, 8:], cols, layout=layout))


def test_row_only_moves_leave_column_half_alone():
    """Changing the row rotates only the first half; changing the column only the second."""
    x = torch.randn(1, 8)
    a = pl.apply_rope_2d(x, torch.tensor([0]), torch.tensor([5]))
    b = pl.apply_rope_2d(x, torch.tensor([3]), torch.tensor([5]))
    torch.testing.assert_close(a[:, 4:], b[:, 4:])
    assert not torch.allclose(a[:, :4], b[:, :4])


def test_preserves_norm():
    x = torch.randn(2, 3, 20, 32)
    rows, cols = pl.axial_positions(4, 5)
    out = pl.apply_rope_2d(x, rows, cols)
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)


@given(r1=coord, c1=coord, r2=coord, c2=coord, shift_r=coord, shift_c=coord, seed=st.integers(0, 2**16))
def test_score_depends_only_on_row_and_column_offsets(r1, c1, r2, c2, shift_r, shift_c, seed):
    """<R(r1,c1) q, R(r2,c2) k> is unchanged when both patches move by the same (shift_r, shift_c)."""
    g = torch.Generator().manual_seed(seed)
    q, k = torch.randn(1, 16, generator=g, dtype=torch.float64), torch.randn(1, 16, generator=g, dtype=torch.float64)

    def score(a, b, c, e):
        t = lambda z: torch.tensor([z])  # noqa: E731
        return (pl.apply_rope_2d(q, t(a), t(b)) * pl.apply_rope_2d(k, t(c), t(e))).sum()

    torch.testing.assert_close(score(r1, c1, r2, c2), score(r1 + shift_r, c1 + shift_c, r2 + shift_r, c2 + shift_c))


def test_score_is_not_a_function_of_one_offset_alone():
    """Row and column offsets are told apart: (1, 0) and (0, 1) give different scores."""
    q, k = torch.randn(1, 16), torch.randn(1, 16)
    t = lambda z: torch.tensor([z])  # noqa: E731
    s10 = (pl.apply_rope_2d(q, t(0), t(0)) * pl.apply_rope_2d(k, t(1), t(0))).sum()
    s01 = (pl.apply_rope_2d(q, t(0), t(0)) * pl.apply_rope_2d(k, t(0), t(1))).sum()
    assert not torch.isclose(s10, s01)


def test_batched_positions_and_dtype_follow_input():
    x = torch.randn(2, 4, 6, 8, dtype=torch.bfloat16)
    rows = torch.randint(0, 5, (2, 6))
    cols = torch.randint(0, 5, (2, 6))
    out = pl.apply_rope_2d(x, rows, cols)
    assert out.shape == x.shape and out.dtype == torch.bfloat16
    torch.testing.assert_close(out[1].float(), pl.apply_rope_2d(x[1:2], rows[1:2], cols[1:2])[0].float())


@pytest.mark.parametrize("args,match", [
    ((torch.randn(4, 6), torch.arange(4), torch.arange(4)), "multiple of 4"),
    ((torch.randn(4), torch.arange(4), torch.arange(4)), "x must be a tensor of shape"),
    ((torch.randn(4, 8), torch.arange(4), torch.arange(3)), "rows and cols must have the same shape"),
    ((torch.randn(4, 8), [0, 1, 2, 3], torch.arange(4)), "rows must be an integer tensor"),
    ((torch.randn(4, 8), torch.arange(4.0), torch.arange(4.0)), "rows must have an integer dtype"),
])
def test_bad_input_raises_value_error(args, match):
    with pytest.raises(ValueError, match=match):
        pl.apply_rope_2d(*args)


@pytest.mark.parametrize("h,w", [(0, 3), (3, 0), (2.5, 2)])
def test_axial_positions_reject_bad_sizes(h, w):
    with pytest.raises(ValueError, match="must be an integer >= 1"):
        pl.axial_positions(h, w)
