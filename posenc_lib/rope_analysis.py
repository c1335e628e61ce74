"""Measuring RoPE: wavelengths, the long-term-decay bound, scores by distance, angle error,
and which angles a longer input reaches that training never showed (chapter 7).

These are the analysis formulas of the RoPE chapter; the rotation itself lives in
``rope.py`` and the angle grid in ``angles.py`` (both reused here, never re-typed).

Complex view used throughout (interleaved layout; ``layout="half"`` pairs (j, j + d/2)):
pair j of q is the complex number q_j = q[2j] + i q[2j+1]. Then
    <R_m q, R_n k> = Re sum_j h_j e^{i (m - n) theta_j},   h_j = q_j * conj(k_j),
so the score is a function of the distance r = m - n only.
Names: d = feature (head) dimension, r = m - n = query position minus key position.
"""
from __future__ import annotations

import math

import torch
from torch import Tensor

from . import _validate as v
from .angles import position_ids, rope_angles, rope_frequencies
from .rope import LAYOUTS, pair_indices

# Angle dtypes rope_angle_error can measure (float64 is the reference it measures against).
_LOW_PRECISION = (torch.bfloat16, torch.float16, torch.float32)


def _exact_angles(distances: int | Tensor, d: int, base: float, device=None) -> Tensor:
    """Angle grid r * theta_j in float64: (len, d // 2)."""
    pos = position_ids(distances, device)
    if pos.dim() != 1:
        raise ValueError(f"distances must be an int or a 1-D integer tensor, got shape {tuple(pos.shape)}")
    inv_freq = rope_frequencies(d, base=base, device=pos.device, dtype=torch.float64)
    return rope_angles(pos, d, inv_freq=inv_freq)


def rope_wavelengths(
    d: int,
    *,
    base: float = 10000.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float64,
) -> Tensor:
    """Wavelength of each pair in positions: 2 pi / theta_j, from 2 pi (j = 0) to 2 pi base^(1 - 2/d).

    returns: (d // 2,) in ``dtype`` (float32 or float64), on ``device``
    Taught in: notebooks/05_rope.ipynb
    """
    return 2 * math.pi / rope_frequencies(d, base=base, device=device, dtype=dtype)


def rope_partial_sums(distances: int | Tensor, d: int, *, base: float = 10000.0) -> Tensor:
    """RoFormer's partial sums S_j = sum_{k < j} e^{i r theta_k} for j = 1 .. d/2.

    distances: int n (meaning r = 0..n-1) or (len,) integer tensor of r = m - n
    returns:   (len, d // 2) complex128; column j - 1 holds S_j (so the last column is
               the full sum S_{d/2}); on the distances' device
    Taught in: notebooks/05_rope.ipynb
    """
    d = v.even_dim("d", d)
    base = v.base_above_one(base)
    angles = _exact_angles(distances, d, base)
    return torch.polar(torch.ones_like(angles), angles).cumsum(-1)


def rope_decay_bound(distances: int | Tensor, d: int, *, base: float = 10000.0) -> Tensor:
    """RoFormer's relative upper bound (1 / (d/2)) * sum_{j=1}^{d/2} |S_j| at each distance r.

    Multiplied by max_j |h_{j+1} - h_j| (and d/2) it bounds |sum_j h_j e^{i r theta_j}|,
    of which the score is the real part; it is a bound on a scale, not a score.
    distances: int n (r = 0..n-1) or (len,) integer tensor
    returns:   (len,) float64; equals (d/2 + 1) / 2 at r = 0
    Taught in: notebooks/05_rope.ipynb
    """
    return rope_partial_sums(distances, d, base=base).abs().mean(-1)


def rope_pair_products(q: Tensor, k: Tensor, *, layout: str = "interleaved") -> Tensor:
    """h_j = q_j * conj(k_j), the complex coefficients of the score's expansion.

    q, k:    (..., d), same d, broadcastable
    returns: (..., d // 2) complex (complex128 for float64 input, else complex64)
    Taught in: notebooks/05_rope.ipynb
    """
    if not isinstance(q, Tensor) or not isinstance(k, Tensor) or q.dim() < 1 or k.dim() < 1:
        raise ValueError("q and k must be tensors of shape (..., d)")
    d = v.even_dim("q.shape[-1]", q.shape[-1])
    v.last_dim("k", k, d)
    layout = v.one_of("layout", layout, LAYOUTS)
    first, second = (i.to(q.device) for i in pair_indices(d, layout))
    dtype = torch.float64 if torch.float64 in (q.dtype, k.dtype) else torch.float32
    q, k = q.to(dtype), k.to(dtype)
    qc = torch.complex(q[..., first], q[..., second])
    kc = torch.complex(k[..., first], k[..., second])
    return qc * kc.conj()


def rope_complex_scores(h: Tensor, distances: int | Tensor, *, base: float = 10000.0) -> Tensor:
    """sum_j h_j e^{i r theta_j} for each distance r; its real part is the RoPE score.

    h:         (..., d // 2) complex (from ``rope_pair_products``)
    distances: int n (r = 0..n-1) or (len,) integer tensor
    returns:   (..., len) complex128
    Taught in: notebooks/05_rope.ipynb
    """
    if not isinstance(h, Tensor) or h.dim() < 1 or not h.is_complex():
        raise ValueError(f"h must be a complex tensor of shape (..., d/2), got {getattr(h, 'dtype', type(h))}")
    d = 2 * h.shape[-1]
    base = v.base_above_one(base)
    angles = _exact_angles(distances, d, base, device=h.device)  # (len, d/2)
    phases = torch.polar(torch.ones_like(angles), angles)
    return h.to(torch.complex128) @ phases.T


def rope_scores_by_distance(
    q: Tensor, k: Tensor, distances: int | Tensor, *, base: float = 10000.0, layout: str = "interleaved"
) -> Tensor:
    """<R_m q, R_n k> as a function of r = m - n, without building a rotated copy per position.

    q, k:      (..., d), broadcastable (e.g. (N, d) samples)
    distances: int n (r = 0..n-1) or (len,) integer tensor of r = m - n (negative allowed)
    returns:   (..., len) float64; out[..., i] == apply_rope(q, [m]) . apply_rope(k, [m - r_i])
    Taught in: notebooks/05_rope.ipynb
    """
    return rope_complex_scores(rope_pair_products(q, k, layout=layout), distances, base=base).real


def rope_abel_bound(h: Tensor, distances: int | Tensor, *, base: float = 10000.0) -> Tensor:
    """RoFormer's bound |sum_j h_j e^{i r theta_j}| <= max_j |h_{j+1} - h_j| * sum_{j=1}^{d/2} |S_j|.

    Abel summation with S_0 = 0 and h_{d/2} = 0 (so the last difference is |h_{d/2-1}|).
    h:         (..., d // 2) complex
    distances: int n or (len,) integer tensor
    returns:   (..., len) float64, >= rope_complex_scores(h, distances).abs()
    Taught in: notebooks/05_rope.ipynb
    """
    if not isinstance(h, Tensor) or h.dim() < 1 or not h.is_complex():
        raise ValueError(f"h must be a complex tensor of shape (..., d/2), got {getattr(h, 'dtype', type(h))}")
    d = 2 * h.shape[-1]
    padded = torch.cat((h, torch.zeros_like(h[..., :1])), dim=-1).to(torch.complex128)
    step = padded.diff(dim=-1).abs().amax(-1, keepdim=True)  # (..., 1)
    sums = rope_partial_sums(distances, d, base=base).to(h.device).abs().sum(-1)  # (len,)
    return step * sums


def rope_angle_error(
    positions: int | Tensor, d: int, *, base: float = 10000.0, dtype: torch.dtype = torch.bfloat16
) -> Tensor:
    """|angle computed in ``dtype`` - exact angle|, wrapped to [0, pi], for each (position, pair).

    The low-precision angle is formed the naive way: positions and theta_j are cast to
    ``dtype`` and multiplied there (what happens when a model's angle code runs under
    bf16/fp16). float16 cannot hold positions above 65504: those entries are nan.
    positions: int n (0..n-1) or (seq,) integer tensor
    dtype:     torch.bfloat16, torch.float16 or torch.float32
    returns:   (seq, d // 2) float64
    Taught in: notebooks/05_rope.ipynb
    """
    d = v.even_dim("d", d)
    base = v.base_above_one(base)
    v.dtype_in("dtype", dtype, _LOW_PRECISION)
    pos = position_ids(positions, None)
    exact = _exact_angles(pos, d, base)
    inv_freq = rope_frequencies(d, base=base, device=exact.device, dtype=torch.float64).to(dtype)
    low = pos.to(dtype).unsqueeze(-1) * inv_freq  # the product rounded in dtype
    err = low.double() - exact
    wrapped = (torch.remainder(err + math.pi, 2 * math.pi) - math.pi).abs()
    return torch.where(torch.isfinite(low), wrapped, torch.full_like(wrapped, float("nan")))


def _frequency_vector(name: str, t: object) -> Tensor:
    """A 1-D tensor of finite frequencies >= 0, returned as float64 on the CPU."""
    if not isinstance(t, Tensor) or t.dim() != 1 or not t.is_floating_point() or len(t) == 0:
        raise ValueError(f"{name} must be a non-empty 1-D floating tensor of shape (d // 2,), "
                         f"got {getattr(t, 'shape', t)!r}")
    t = t.detach().to("cpu", torch.float64)
    if not bool(torch.isfinite(t).all()) or bool((t < 0).any()):
        raise ValueError(f"{name} must hold finite frequencies >= 0")
    return t


def _trained_and_new(trained_inv_freq: object, inv_freq: object) -> tuple[Tensor, Tensor]:
    """The trained frequencies and the ones asked about (the trained ones when inv_freq is None), checked
    to be frequency vectors of one shape; float64 on the CPU."""
    trained = _frequency_vector("trained_inv_freq", trained_inv_freq)
    new = trained if inv_freq is None else _frequency_vector("inv_freq", inv_freq)
    if new.shape != trained.shape:
        raise ValueError(f"inv_freq must have the shape of trained_inv_freq {tuple(trained.shape)}, "
                         f"got {tuple(new.shape)}")
    return trained, new


def rope_angle_novelty(
    trained_inv_freq: Tensor, trained_length: int, length: int, *, inv_freq: Tensor | None = None
) -> Tensor:
    """Per pair: how far the angles of a longer input get from every angle seen in training.

    Training shows pair j the angles r * theta_j for distances r = 0 .. trained_length - 1
    (theta = trained_inv_freq). At inference, distances r = 0 .. length - 1 give r * theta'_j
    (theta' = inv_freq, e.g. a context-extension method's frequencies; default theta).
    Measured directly, on the circle: the largest distance, in radians, from an inference
    angle to the nearest training angle. Compare it with theta_j, the step between a slow
    pair's neighbouring training angles: a pair that never completed a turn in training
    (trained_length * theta_j < 2 pi) has an unseen arc, and at most one step means
    "nothing new".
    trained_inv_freq, inv_freq: (d // 2,) frequencies >= 0
    returns: (d // 2,) float64 on the CPU, in [0, pi]
    Taught in: notebooks/07_beyond.ipynb
    """
    trained, new = _trained_and_new(trained_inv_freq, inv_freq)
    trained_length = v.int_at_least("trained_length", trained_length, 1)
    length = v.int_at_least("length", length, 1)
    turn = 2 * math.pi
    seen = (torch.arange(trained_length, dtype=torch.float64)[:, None] * trained).remainder(turn)
    seen = seen.T.sort(-1).values.contiguous()  # (pairs, trained_length), ascending on [0, 2 pi)
    asked = (torch.arange(length, dtype=torch.float64)[:, None] * new).remainder(turn).T.contiguous()
    idx = torch.searchsorted(seen, asked)  # the first seen angle >= each asked one
    # Neighbours below and above on the circle: past either end, wrap to the other end.
    below = torch.where(idx > 0, seen.gather(1, (idx - 1).clamp(min=0)), seen[:, -1:] - turn)
    above = torch.where(idx < trained_length, seen.gather(1, idx.clamp(max=trained_length - 1)), seen[:, :1] + turn)
    return torch.minimum(asked - below, above - asked).amax(-1)


def rope_combination_gap(
    trained_inv_freq: Tensor, trained_span: tuple[float, float], distances: Tensor, *,
    inv_freq: Tensor | None = None, step: float = 0.01,
) -> Tensor:
    """Per distance: how far the pairs' angles, taken *together*, get from every combination training showed.

    A head reads all its pairs at once. At a trained distance rho, pair j shows rho * theta_j, so the
    combinations training produced over ``trained_span`` = (lo, hi) lie on one curve, rho -> (rho theta_0,
    rho theta_1, ...), rho in [lo, hi] (a real rho between two trained distances turns every pair in
    between; sampled every ``step``). At inference, distance r shows (r theta'_0, r theta'_1, ...).
    The gap is the smallest, over the curve, of the largest circular difference over the pairs:
        gap(r) = min_rho max_j |r theta'_j - rho theta_j|   (each difference wrapped to [-pi, pi])
    0: a combination training produced (position interpolation: rho = r / s). A stretch that differs per
    pair (NTK, YaRN) can keep every pair inside its own trained range (``rope_angle_novelty`` 0) and still
    leave the curve, because it moves different pairs to different trained distances.
    trained_inv_freq, inv_freq: (P,) frequencies >= 0 of the pairs to compare (slice them to leave pairs out)
    distances: (n,) distances r >= 0
    returns: (n,) float64 on the CPU, in [0, pi]; exact to within step * max(theta) / 2
    Taught in: notebooks/07_beyond.ipynb
    """
    trained, new = _trained_and_new(trained_inv_freq, inv_freq)
    if (not isinstance(trained_span, (tuple, list)) or len(trained_span) != 2
            or not all(isinstance(x, (int, float)) and math.isfinite(x) for x in trained_span)
            or not 0 <= trained_span[0] <= trained_span[1]):
        raise ValueError(f"trained_span must be (lo, hi) with 0 <= lo <= hi, got {trained_span!r}")
    if not isinstance(step, (int, float)) or not step > 0:
        raise ValueError(f"step must be a number > 0, got {step!r}")
    if not isinstance(distances, Tensor) or distances.dim() != 1:
        raise ValueError(f"distances must be a 1-D tensor of distances >= 0, got {getattr(distances, 'shape', distances)!r}")
    r = distances.detach().to("cpu", torch.float64)
    if not bool(torch.isfinite(r).all()) or bool((r < 0).any()):
        raise ValueError("distances must hold finite distances >= 0")
    lo, hi = trained_span
    rho = torch.cat([torch.arange(lo, hi, step, dtype=torch.float64), torch.tensor([float(hi)], dtype=torch.float64)])
    curve = rho[:, None] * trained  # (points, P)
    turn = 2 * math.pi
    out = []
    for chunk in r.split(64):  # (64, points, P) at a time: memory stays small for long inputs
        diff = torch.remainder(chunk[:, None, None] * new - curve + math.pi, turn) - math.pi
        out.append(diff.abs().amax(-1).amin(-1))
    return torch.cat(out)
