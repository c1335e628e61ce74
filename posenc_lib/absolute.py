"""Absolute position codes: a vector p_i per position i, added to the token embedding.

Three designs in the order the notebooks build them: integer codes p_i = i*1,
binary codes (the bits of i) and sinusoids (smooth binary digits).
Names: n = number of positions, d = feature dimension.
"""
from __future__ import annotations

import torch
from torch import Tensor, nn

from . import _validate as v
from .angles import rope_angles, rope_frequencies
from .device import float64_device, moved

LAYOUTS_SINUSOID = ("interleaved", "concat")


def integer_positions(
    n: int,
    d: int,
    *,
    normalize: bool = False,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Integer code p_i = i * 1 (every feature holds the position), or i / n when normalized.

    returns: (n, d)
    Taught in: notebooks/02_integer_binary.ipynb
    """
    n = v.int_at_least("n", n, 0)
    d = v.int_at_least("d", d, 1)
    i = torch.arange(n, device=float64_device(device), dtype=torch.float64)  # the CPU's for MPS
    if normalize and n > 0:
        i = i / n  # depends on n: the step between neighbours is 1/n, not fixed
    return moved(i, device, dtype).unsqueeze(-1).expand(n, d).clone()


def binary_positions(
    n: int,
    d: int,
    *,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Binary code: row i holds the d bits of i, most significant bit first.

    d=3 gives row 1 = [0, 0, 1], row 2 = [0, 1, 0]. d bits name 2**d positions.
    returns: (n, d)
    Taught in: notebooks/02_integer_binary.ipynb
    """
    n = v.int_at_least("n", n, 0)
    d = v.int_at_least("d", d, 1)
    if n > 2**d:
        raise ValueError(f"n must be <= 2**d = {2**d} for d={d} bits, got n={n}")
    i = torch.arange(n, device=device).unsqueeze(-1)
    shifts = torch.arange(d - 1, -1, -1, device=device)  # MSB first
    return ((i >> shifts) & 1).to(dtype)


def sinusoidal_positions(
    n: int,
    d: int,
    *,
    base: float = 10000.0,
    layout: str = "interleaved",
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """Vaswani et al.'s sinusoids: p_{i,2j} = sin(i * f_j), p_{i,2j+1} = cos(i * f_j).

    f_j = base**(-2j/d), the same frequencies RoPE uses (``rope_angles``).
    layout: "interleaved" = [sin f0, cos f0, sin f1, cos f1, ...] (the paper);
            "concat"      = [sin f0, sin f1, ..., cos f0, cos f1, ...]
                            (tensor2tensor / fairseq).
    returns: (n, d), computed in float32 (or float64) and cast to ``dtype``
    Taught in: notebooks/03_sinusoids.ipynb
    """
    n = v.int_at_least("n", n, 0)
    d = v.even_dim("d", d)
    layout = v.one_of("layout", layout, LAYOUTS_SINUSOID)
    grid_dtype = torch.float64 if dtype == torch.float64 else torch.float32
    inv_freq = rope_frequencies(d, base=base, device=device, dtype=grid_dtype)
    angles = rope_angles(n, d, inv_freq=inv_freq, device=device)  # (n, d/2)
    sin, cos = angles.sin(), angles.cos()
    if layout == "interleaved":
        out = torch.stack((sin, cos), dim=-1).flatten(-2)
    else:
        out = torch.cat((sin, cos), dim=-1)
    return out.to(dtype)


def affine_shift_residual(table: Tensor, k: int) -> float:
    """How far the best affine map p_i -> p_{i+k} is from exact, over a whole table.

    Least squares over every pair (p_i, p_{i+k}) of the rows: the smallest
    ||[p_i, 1] A - p_{i+k}|| over all (d + 1, d) matrices A (a matrix M_k and a shift b_k),
    in float64. 0 means one fixed affine map moves every position k steps (sinusoids:
    a rotation); a large value means no such map exists (binary codes, sines alone).
    table: (n, d), one row per position; k: offset, 1 <= k < n
    Taught in: notebooks/02_integer_binary.ipynb, notebooks/03_sinusoids.ipynb
    """
    if not isinstance(table, Tensor) or table.dim() != 2:
        raise ValueError(f"table must be a 2-D tensor (positions, features), got {getattr(table, 'shape', table)!r}")
    n = table.shape[0]
    k = v.int_at_least("k", k, 1)
    if k >= n:
        raise ValueError(f"k must be < the number of rows ({n}), got {k}")
    t = table.detach().to("cpu", torch.float64)
    inputs = torch.cat([t[:-k], torch.ones(n - k, 1, dtype=torch.float64)], dim=1)
    fit = torch.linalg.lstsq(inputs, t[k:], driver="gelsd").solution  # gelsd: rank-deficient tables too
    return (inputs @ fit - t[k:]).norm().item()


class SinusoidalPositionalEncoding(nn.Module):
    """Adds fixed sinusoids to its input: x + P[offset : offset + seq].

    The table is a non-persistent buffer, so ``.to(device)`` moves it and it
    stays out of ``state_dict``. Longer inputs than ``max_len`` are computed on
    the fly: sinusoids are defined for every position.
    x: (..., seq, d) -> (..., seq, d)
    offset: position of x's first row (the KV-cache length when decoding token by token)
    Taught in: notebooks/03_sinusoids.ipynb
    """

    def __init__(self, d: int, max_len: int = 2048, *, base: float = 10000.0, layout: str = "interleaved"):
        super().__init__()
        self.d = v.even_dim("d", d)
        self.base = v.base_above_one(base)
        self.layout = v.one_of("layout", layout, LAYOUTS_SINUSOID)
        max_len = v.int_at_least("max_len", max_len, 1)
        self.register_buffer("pe", sinusoidal_positions(max_len, d, base=base, layout=layout), persistent=False)

    def table(self, n: int) -> Tensor:
        if n <= self.pe.shape[0]:
            return self.pe[:n]
        return sinusoidal_positions(n, self.d, base=self.base, layout=self.layout, device=self.pe.device)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        v.last_dim("x", x, self.d)
        offset = v.int_at_least("offset", offset, 0)
        return x + self.table(offset + x.shape[-2])[offset:].to(x.dtype)


class LearnedPositionalEncoding(nn.Module):
    """Adds a trained vector per position (BERT, GPT-2): x + E[offset : offset + seq].

    A learned table has no row for positions it never saw, so inputs reaching
    beyond ``max_len`` raise: this is the extrapolation limit the notebooks show.
    x: (..., seq, d) -> (..., seq, d)
    offset: position of x's first row (the KV-cache length when decoding token by token)
    Taught in: notebooks/00_index.ipynb, notebooks/07_beyond.ipynb
    """

    def __init__(self, max_len: int, d: int):
        super().__init__()
        self.max_len = v.int_at_least("max_len", max_len, 1)
        self.d = v.int_at_least("d", d, 1)
        self.embedding = nn.Embedding(max_len, d)
        nn.init.normal_(self.embedding.weight, std=0.02)

    def forward(self, x: Tensor, *, offset: int = 0) -> Tensor:
        v.last_dim("x", x, self.d)
        offset = v.int_at_least("offset", offset, 0)
        seq = x.shape[-2]
        if offset + seq > self.max_len:
            what = "sequence length" if offset == 0 else "offset + sequence length"
            got = f"{seq}" if offset == 0 else f"{offset} + {seq}"
            raise ValueError(f"{what} must be <= max_len={self.max_len}, got {got}")
        pos = torch.arange(offset, offset + seq, device=x.device)
        return x + self.embedding(pos).to(x.dtype)
