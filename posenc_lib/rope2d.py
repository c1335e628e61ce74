"""2-D (axial) RoPE for image patches: half the pairs turn with the row, half with the column.

An image cut into a height x width grid of patches gives each patch two coordinates.
Axial RoPE splits the d features of a query or key in two halves: the first d/2 are
rotated by 1-D RoPE at the patch's row, the last d/2 by 1-D RoPE at its column (each
half with the frequencies of a d/2-dimensional RoPE). Because each half is plain RoPE,
<R q, R k> splits into a row part that sees only row_k - row_q and a column part that
sees only col_k - col_q: the score depends on the offset (drow, dcol) alone.
It is ``apply_rope_nd``'s "axial" style with two equal axes (posenc_lib/rope_nd.py).
Names: d = head dimension (a multiple of 4), rows/cols = integer patch coordinates.
"""
from __future__ import annotations

import torch
from torch import Tensor

from . import _validate as v
from .rope_nd import apply_rope_nd


def axial_positions(height: int, width: int, *, device: torch.device | str | None = None) -> tuple[Tensor, Tensor]:
    """Row and column of each patch of a height x width grid, in raster (row-major) order.

    returns: (rows, cols), each (height * width,) long; patch p sits at (rows[p], cols[p])
    Taught in: notebooks/07_beyond.ipynb
    """
    height = v.int_at_least("height", height, 1)
    width = v.int_at_least("width", width, 1)
    rows = torch.arange(height, device=device).repeat_interleave(width)
    cols = torch.arange(width, device=device).repeat(height)
    return rows, cols


def apply_rope_2d(
    x: Tensor,
    rows: Tensor,
    cols: Tensor,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
) -> Tensor:
    """Axial RoPE: features [: d/2] rotate by the row, features [d/2 :] by the column.

    x:          (..., seq, d), d a multiple of 4 (two halves of whole pairs)
    rows, cols: (seq,) or (batch, seq) integer coordinates, e.g. from ``axial_positions``
    layout:     pairing inside each half, as in ``apply_rope``
    returns:    same shape, dtype and device as x
    Taught in: notebooks/07_beyond.ipynb
    """
    d = v.multiple_of("x.shape[-1]", v.sequence_tensor("x", x).shape[-1], 4, "two halves of feature pairs")
    coords = torch.stack(v.same_shape_integer_tensors(rows=rows, cols=cols), dim=-1)
    # Two axes of d/4 pairs each, each a full 1-D RoPE of dimension d/2: the "axial" style.
    return apply_rope_nd(x, coords, sections=(d // 4, d // 4), base=base, layout=layout, section_style="axial")
