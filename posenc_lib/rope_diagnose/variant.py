"""The reference with some of its steps changed (``Variant``), and how far fn's output is from it.

Every hypothesis is a Variant: the reference computation (``rope.py``'s steps, in float64) with one
or two fields changed. ``residual`` measures fn against a variant on a probe in tolerances:

  an output may differ from the float64 reference by |x_pair| * 2^-19 (|m theta_j| + 1) per feature
  (float32 angles are exact to a few units in the last place of m theta_j), plus 2^-5 |x| for
  bfloat16 inputs and 2^-8 |x| for float16 ones (the rounding of a half-precision result).

A residual <= 1 reproduces fn. ``squared_difference`` is the sum of squares that ranks near misses.
Names: m = position, theta_j = inv_freq[j], r = rotated features.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch import Tensor

from ..rope import pair_indices, rotate_pairs

F32_ANGLE = 2.0 ** -19  # float32: a few ulps of m theta_j, and of the result
HALF_SLACK = {torch.bfloat16: 2.0 ** -5, torch.float16: 2.0 ** -8}  # a half-precision result's rounding
HALF = (torch.bfloat16, torch.float16)


@dataclass(frozen=True)
class Variant:
    """The reference with some of its steps changed (each hypothesis changes one or two fields)."""

    layout: str
    frequencies: Callable[[Tensor], Tensor]  # positions (batch, seq[, n]) -> theta (pairs,) or (batch, seq, pairs)
    r: int
    rotated: str
    scale: float
    axes: Tensor | None
    direction: int = 1
    shift: int = 0
    shift_past_zero: bool = False  # the shift only where a sequence starts past 0 (the decoding path)
    restart: bool = False
    restart_batch: bool = False  # every sequence moved back by the first sequence's start (one offset per batch)
    offset_twice: bool = False  # every sequence's first position added once more (the cache length counted twice)
    first_row: bool = False
    turns: tuple[int, int] = (1, 1)  # (q, k)
    rounding: str | None = None  # "frequencies", "product", "angles" or "positions" rounded to rounding_dtype
    rounding_dtype: torch.dtype | None = None  # None: the inputs' dtype when it is half precision
    table_dtype: torch.dtype | None = None  # cos and sin stored in this dtype for every input
    output_dtype: torch.dtype | None = None  # the rotation done in this dtype (q, k, cos, sin cast down)
    sides: tuple[float, float] = (1.0, 1.0)  # extra factors on q and on k (one-sided attention factors)
    names: tuple[str, ...] = ()
    words: tuple[str, ...] = ()


def named(v: Variant, name: str, words: str, **changes) -> Variant:
    """v with this hypothesis added: its name, its words and its changes."""
    return replace(v, names=v.names + (name,), words=v.words + (words,), **changes)


def seq_len(positions: Tensor) -> int:
    """The current length as transformers reads it: the largest position + 1 (max over the batch)."""
    return int(positions.max()) + 1


def _positions(v: Variant, positions: Tensor) -> Tensor:
    pos = positions
    if v.first_row:
        pos = pos[:1].expand_as(pos)
    if v.restart:
        pos = pos - pos[:, :1]
    if v.restart_batch:
        pos = pos - pos[:1, :1]
    if v.offset_twice:
        pos = pos + pos[:, :1]
    if v.shift_past_zero:
        return pos + v.shift * (pos[:, :1] > 0)
    return pos + v.shift


def _angles(v: Variant, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(angles, |m| theta_j): each (batch, 1, seq, pairs) float64, for inputs of this dtype."""
    pos = _positions(v, positions)
    theta = v.frequencies(pos)
    m = pos.unsqueeze(-1) if v.axes is None else pos.index_select(-1, v.axes.to(pos.device))
    exact = m.double() * theta
    low = v.rounding_dtype or (dtype if dtype in HALF else None)
    if v.rounding is None or low is None:
        angles = exact
    elif v.rounding == "frequencies":
        angles = m.double() * theta.to(low).double()
    elif v.rounding == "positions":
        angles = m.to(low).double() * theta
    elif v.rounding == "product":
        angles = (m.to(low) * theta.to(low)).double()
    else:  # "angles"
        angles = (m.float() * theta.float()).to(low).double()
    return (v.direction * angles).unsqueeze(1), exact.abs().unsqueeze(1)


def apply(v: Variant, x: Tensor, positions: Tensor, which: int) -> tuple[Tensor, Tensor]:
    """(v applied to x (batch, heads, seq, d) in float64, |m theta| per rotated pair); which: 0 = q, 1 = k."""
    angles, phase = _angles(v, positions, x.dtype)
    angles = angles * v.turns[which]
    cos, sin = angles.cos(), angles.sin()
    if v.table_dtype is not None:
        cos, sin = cos.to(v.table_dtype).double(), sin.to(v.table_dtype).double()
    scale = v.scale * v.sides[which]
    x = x.double()
    d = x.shape[-1]
    part = slice(0, v.r) if v.rotated == "first" else slice(d - v.r, d)
    out = x.clone()
    if v.output_dtype is not None:
        low = v.output_dtype
        out[..., part] = rotate_pairs(x[..., part].to(low), (cos * scale).to(low), (sin * scale).to(low),
                                      v.layout).double()
    else:
        out[..., part] = rotate_pairs(x[..., part], cos * scale, sin * scale, v.layout)
    return out, phase


def _pairs(x: Tensor, v: Variant) -> tuple[Tensor, Tensor]:
    start = 0 if v.rotated == "first" else x.shape[-1] - v.r
    a, b = pair_indices(v.r, v.layout)
    return a + start, b + start


def allowed(x: Tensor, v: Variant, phase: Tensor) -> Tensor:
    """The tolerance per output feature (module docstring): (batch, heads, seq, d) float64."""
    x64 = x.double()
    a, b = _pairs(x, v)
    size = x64.abs()
    norm = torch.sqrt(x64[..., a] ** 2 + x64[..., b] ** 2)
    size[..., a], size[..., b] = norm, norm
    slack = torch.full(x.shape, F32_ANGLE, dtype=torch.float64)
    per_pair = F32_ANGLE * (phase.expand(*x.shape[:-1], phase.shape[-1]) + 1)
    slack[..., a], slack[..., b] = per_pair, per_pair
    slack = slack + HALF_SLACK.get(x.dtype, 0.0)
    return size * slack * max(1.0, v.scale * max(v.sides)) + 1e-7


def residual(v: Variant, q: Tensor, k: Tensor, positions: Tensor, got: tuple[Tensor, Tensor]
             ) -> tuple[float, Tensor, float, float]:
    """(max error in tolerances, the same per position, max error / rms(x), sum of squared errors)
    of variant v against fn's (q, k) on these inputs."""
    worst = torch.zeros(q.shape[-2], dtype=torch.float64)
    size = squares = 0.0
    for which, (x, y) in enumerate(zip((q, k), got)):
        want, phase = apply(v, x, positions, which)
        err = (y - want).abs()
        worst = torch.maximum(worst, (err / allowed(x, v, phase)).amax(dim=(0, 1, 3)))
        size = max(size, float(err.max() / x.double().pow(2).mean().sqrt()))
        squares += float((err * err).sum())
    return float(worst.max()), worst, size, squares


def scores_match(v: Variant, q: Tensor, k: Tensor, positions: Tensor, got: tuple[Tensor, Tensor]) -> bool:
    """fn's scores q_m . k_n equal the variant's (fn may still move features around); GQA probes compare
    every q head with its group's k head."""
    wq, _ = apply(v, q, positions, 0)
    wk, _ = apply(v, k, positions, 1)
    gq, gk = got
    group = wq.shape[1] // wk.shape[1]
    wk, gk = wk.repeat_interleave(group, 1), gk.repeat_interleave(group, 1)
    size = wq.norm(dim=-1).unsqueeze(-1) * wk.norm(dim=-1).unsqueeze(-2)
    slack = 2.0 ** -4 if q.dtype in HALF else 2.0 ** -17 * (int(positions.abs().max()) + 1)
    diff = (gq @ gk.transpose(-1, -2) - wq @ wk.transpose(-1, -2)).abs()
    return bool((diff <= slack * size + 1e-6).all())


def fit_scales(v: Variant, inputs) -> tuple[float | None, float | None]:
    """The constants c_q, c_k that best map v's rotated q and k onto fn's (least squares over the
    float32 probes). inputs: (q, k, positions, (fn_q, fn_k)) per probe."""
    num, den = [0.0, 0.0], [0.0, 0.0]
    for q, k, positions, got in inputs:
        if q.dtype in HALF:
            continue
        for which, (x, y) in enumerate(zip((q, k), got)):
            want, _ = apply(replace(v, scale=1.0, sides=(1.0, 1.0)), x, positions, which)
            part = slice(0, v.r) if v.rotated == "first" else slice(x.shape[-1] - v.r, x.shape[-1])
            num[which] += float((want[..., part] * y[..., part]).sum())
            den[which] += float((want[..., part] ** 2).sum())
    c = [n / d if d > 0 else None for n, d in zip(num, den)]
    return c[0], c[1]
