"""RoPE over n-D coordinates (time, height, width, ...): which pairs turn with which axis.

A token of an image or a video has several coordinates, e.g. (t, h, w). RoPE extends to
them by giving each of the d/2 rotated pairs one axis to read its position from: pair j
turns by coords[axis_j] * theta_j. Every pair is still a plain rotation, so the score
<R q, R k> depends only on the offsets (dt, dh, dw). The families differ in the spectrum
theta_j and in the axis assignment ("section_style"); ``sections`` gives the number of
pairs per axis (summing to d/2):
  "axial"        each axis is its own RoPE of dimension 2 * sections[i], with its own
                 spectrum base^(-2j/d_i), features concatenated in axis order
                 (Flux's EmbedND, HunyuanVideo; ``apply_rope_2d`` is two equal axes)
  "contiguous"   one spectrum base^(-2j/d) over all d/2 pairs; consecutive blocks of pairs
                 read successive axes (Qwen2-VL's mrope_section, e.g. (16, 24, 24) at d = 128):
                 time gets the fast pairs, width the slow ones
  "interleaved"  one spectrum; pairs go to the axes round-robin t, h, w, t, h, w, ... up to
                 pair n * sections[a] for axis a >= 1, the rest to axis 0 (Qwen3-VL), so every
                 axis sees fast and slow frequencies
Text tokens sit at (p, p, ..., p): under "contiguous" and "interleaved" every pair then
turns by p * theta_j, which is 1-D RoPE exactly.
``mrope_positions`` builds the (t, h, w) coordinates of a mixed text/image/video sequence.
Names: d = head dimension, n = number of axes, coords = integer coordinates (seq, n).
"""
from __future__ import annotations

from functools import partial
from typing import Sequence

import torch
from torch import Tensor

from . import _validate as v
from .device import moved
from .angles import checked_frequencies, rope_frequencies
from .rope import RopeOptions, broadcast_over_heads, rope_tables, rotate_partial
from .rotary import rotate

STYLES = ("axial", "contiguous", "interleaved")


def _check_sections(sections: object, half: int | None = None, half_name: str = "x.shape[-1] / 2") -> tuple[int, ...]:
    """A non-empty sequence of positive pair counts; summing to ``half`` (= r/2, called half_name) when given."""
    if isinstance(sections, (str, bytes)) or not isinstance(sections, Sequence) or not sections:
        raise ValueError(f"sections must be a non-empty sequence of pair counts, one per axis, got {sections!r}")
    counts = tuple(v.int_at_least(f"sections[{i}]", s, 1) for i, s in enumerate(sections))
    if half is not None and sum(counts) != half:
        raise ValueError(f"sections must sum to {half_name} = {half} (pairs per axis), "
                         f"got {counts} (sum {sum(counts)})")
    return counts


def rope_nd_axes(sections: Sequence[int], section_style: str = "contiguous") -> Tensor:
    """The axis each rotated pair reads its position from.

    returns: (sum(sections),) long; entry j is the axis of pair j
    Taught in: notebooks/09_beyond_1d.ipynb
    """
    sections = _check_sections(sections)
    style = v.one_of("section_style", section_style, STYLES)
    n, half = len(sections), sum(sections)
    if style != "interleaved":
        return torch.repeat_interleave(torch.arange(n), torch.tensor(sections))
    j = torch.arange(half)
    axes = torch.zeros(half, dtype=torch.long)
    for a in range(1, n):
        if a + n * (sections[a] - 1) >= half:  # its round-robin slots would run past the last pair
            raise ValueError(f"sections[{a}] = {sections[a]} is too many for the interleaved style: "
                             f"axis {a} takes pairs {a}, {a + n}, ..., which must stay below {half}")
        axes[(j % n == a) & (j < n * sections[a])] = a
    return axes


def rope_nd_frequencies(
    sections: Sequence[int],
    section_style: str = "contiguous",
    *,
    base: float = 10000.0,
    device: torch.device | str | None = None,
    dtype: torch.dtype = torch.float32,
) -> Tensor:
    """theta_j of each pair: one spectrum over d = 2 * sum(sections), or one per axis ("axial").

    returns: (sum(sections),) float32 (or float64)
    Taught in: notebooks/09_beyond_1d.ipynb
    """
    sections = _check_sections(sections)
    style = v.one_of("section_style", section_style, STYLES)
    if style == "axial":
        return torch.cat([rope_frequencies(2 * s, base=base, device=device, dtype=dtype) for s in sections])
    return rope_frequencies(2 * sum(sections), base=base, device=device, dtype=dtype)


def _check_coords(coords: object, x: Tensor, n_axes: int) -> Tensor:
    seq = x.shape[-2]
    if not isinstance(coords, Tensor):
        raise ValueError(f"coords must be an integer tensor of shape ({seq}, {n_axes}) or (batch, {seq}, {n_axes}), "
                         f"got {type(coords).__name__}")
    v.integer_tensor("coords", coords)
    if coords.dim() not in (2, 3) or coords.shape[-1] != n_axes:
        raise ValueError(f"coords must have shape ({seq}, {n_axes}) or (batch, {seq}, {n_axes}): one coordinate "
                         f"per entry of sections in its last dimension, got {tuple(coords.shape)}")
    if coords.shape[-2] != seq:
        raise ValueError(f"coords.shape[-2] must be the sequence length of x, {seq}, got {tuple(coords.shape)}")
    if coords.dim() == 3 and (x.dim() < 3 or coords.shape[0] != x.shape[0]):
        raise ValueError(f"batched coords of shape {tuple(coords.shape)} need x of shape "
                         f"({coords.shape[0]}, ..., {seq}, d), got {tuple(x.shape)}")
    return coords


def apply_rope_nd(
    x: Tensor,
    coords: Tensor,
    *,
    sections: Sequence[int],
    base: float = 10000.0,
    layout: str = "interleaved",
    inv_freq: Tensor | None = None,
    attention_factor: float = 1.0,
    rotary_dim: int | None = None,
    section_style: str = "contiguous",
) -> Tensor:
    """Rotate queries or keys by n-D coordinates: pair j turns by coords[..., axis_j] * theta_j.

    x:        (..., seq, d), e.g. (batch, heads, seq, head_dim)
    coords:   (seq, n) or (batch, seq, n) integer coordinates, e.g. (t, h, w) from ``mrope_positions``
    sections: n pair counts, one per axis, summing to r/2 (Qwen2-VL: (16, 24, 24) at d = 128)
    layout:   the pair layout, as in ``apply_rope`` ("half" for the Qwen models); under "axial"
              it applies inside each axis's block of 2 * sections[i] features
    inv_freq, attention_factor, rotary_dim: as in ``apply_rope``; inv_freq replaces
              ``rope_nd_frequencies``, one theta per pair (r/2,)
    section_style: "axial", "contiguous" or "interleaved" (module docstring)
    returns:  same shape, dtype and device as x (angles in float32, float64 for float64 x)
    Taught in: notebooks/09_beyond_1d.ipynb
    """
    options = RopeOptions(base, layout, inv_freq, attention_factor, rotary_dim)
    style = v.one_of("section_style", section_style, STYLES)
    r = options.rotated_features(v.sequence_tensor("x", x).shape[-1])
    sections = _check_sections(sections, r // 2, "x.shape[-1] / 2" if rotary_dim is None else "rotary_dim / 2")
    coords = _check_coords(coords, x, len(sections))
    axes = moved(rope_nd_axes(sections, style), coords.device)  # a constant of the sections, made on the CPU
    if options.inv_freq is None:
        dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
        inv_freq = rope_nd_frequencies(sections, style, base=options.base, device=coords.device, dtype=dtype)
    else:
        inv_freq = checked_frequencies(options.inv_freq, r, coords.device)
    angles = coords.index_select(-1, axes).to(inv_freq.dtype) * inv_freq  # (..., seq, r/2), like rope_angles
    cos, sin = rope_tables(broadcast_over_heads(angles, x), options.attention_factor)
    if style == "axial" and options.layout == "half":
        return rotate_partial(x, cos, sin, options, partial(_rotate_axial_halves, sections=sections))
    return rotate_partial(x, cos, sin, options, rotate)


def _rotate_axial_halves(x: Tensor, cos: Tensor, sin: Tensor, layout: str, *, sections: tuple[int, ...]) -> Tensor:
    """The half layout under "axial": each axis pairs (j, j + s) inside its own block of 2s features."""
    out, start = [], 0
    for s in sections:
        block = slice(start, start + s)
        out.append(rotate(x[..., 2 * start:2 * (start + s)].contiguous(), cos[..., block].contiguous(),
                          sin[..., block].contiguous(), layout))
        start += s
    return torch.cat(out, dim=-1)


# ---------------------------------------------------------------- mixed sequences (MRoPE)

def _segment_grid(kind: str, size: object, merge: int, index: int) -> tuple[int, int, int]:
    """(t, h, w) of an image or video segment, in tokens (after spatial merging)."""
    want = 2 if kind == "image" else 3
    if not isinstance(size, (tuple, list)) or len(size) != want:
        raise ValueError(f"segments[{index}]: a {kind} needs a size of {want} integers "
                         f"({'(h, w)' if want == 2 else '(t, h, w)'}), got {size!r}")
    dims = [v.int_at_least(f"segments[{index}] size", s, 1) for s in size]
    t, h, w = (1, *dims) if kind == "image" else dims
    if h % merge or w % merge:
        raise ValueError(f"segments[{index}]: h and w must be multiples of spatial_merge={merge}, got {h} x {w}")
    return t, h // merge, w // merge


def mrope_positions(
    segments: Sequence[tuple],
    *,
    spatial_merge: int = 1,
    tokens_per_second: float | None = None,
    device: torch.device | str | None = None,
) -> Tensor:
    """(t, h, w) position ids of a mixed text, image and video sequence, by Qwen2-VL's max + 1 rule.

    segments: in sequence order, each one of
              ("text", n)                          n text tokens
              ("image", (h, w))                    an h x w patch grid (before merging)
              ("video", (t, h, w))                 t temporal patches of h x w patches
              ("video", (t, h, w), seconds)        the same, each temporal patch lasting ``seconds``
    spatial_merge: the vision encoder merges spatial_merge x spatial_merge patches into one token
              (Qwen2-VL: 2); h and w must be multiples of it
    tokens_per_second: None (Qwen2-VL, Qwen3-VL): video frames advance t by 1. A number (Qwen2.5-VL,
              25): t counts time, temporal patch k sits at int(k * seconds * tokens_per_second)
              (seconds per temporal patch = temporal_patch_size / fps, default 1), so videos sampled
              at different rates share one clock. Images stay one time step either way.
    returns:  (seq, 3) long, on ``device``. Text tokens get (p, p, p), p continuing from the largest position so far
              plus 1. A vision segment starting at s gives its token (k, i, j) (raster order, time
              outermost) the position (s + t_k, s + i, s + j), so an image is one time step over its
              grid; the text after it starts at s + max(t_last, h - 1, w - 1) + 1.
    Qwen3-VL splits a video into frames, each with a timestamp in text before it: write it as
    ("text", k), ("video", (1, h, w)), ("text", k), ....
    Note: transformers 5.x's get_rope_index of Qwen2-VL and Qwen2.5-VL (Qwen2VLModel,
    Qwen2_5_VLModel) starts the text after a vision segment at s + max(h, w) (merged), ignoring t.
    That equals the rule above (the models' release code; in transformers, the worked example in
    the docstring of Qwen2.5-Omni's get_rope_index, qwen2_5_omni/modeling_qwen2_5_omni.py) only
    while t_last < max(h, w); after a longer video, or a video with t counting seconds, its text
    positions fall back among the video's. transformers is not consistent with itself there: the
    mrope_position_deltas the same get_rope_index returns (max + 1 - length) continue generated
    tokens at max + 1 (tests/test_rope_nd.py::test_transformers_text_after_a_long_video_falls_among_its_ids).
    Taught in: notebooks/09_beyond_1d.ipynb
    """
    merge = v.int_at_least("spatial_merge", spatial_merge, 1)
    if tokens_per_second is not None:
        tokens_per_second = v.finite_number("tokens_per_second", tokens_per_second, above=0)
    if isinstance(segments, (str, bytes)) or not isinstance(segments, Sequence) or not segments:
        raise ValueError(f"segments must be a non-empty list of ('text', n), ('image', (h, w)) or "
                         f"('video', (t, h, w)) tuples, got {segments!r}")
    parts, start = [], 0
    for i, seg in enumerate(segments):
        kind = seg[0] if isinstance(seg, (tuple, list)) and seg else None
        if kind not in ("text", "image", "video") or not (len(seg) == 2 or (kind == "video" and len(seg) == 3)):
            raise ValueError(f"segments[{i}] must be ('text', n), ('image', (h, w)), ('video', (t, h, w)) or "
                             f"('video', (t, h, w), seconds), got {seg!r}")
        if kind == "text":
            n = v.int_at_least(f"segments[{i}] length", seg[1], 1)
            part = (start + torch.arange(n)).unsqueeze(-1).expand(n, 3)
        else:
            t, h, w = _segment_grid(kind, seg[1], merge, i)
            step = torch.arange(t, dtype=torch.float64)
            seconds = v.finite_number(f"segments[{i}] seconds", seg[2], above=0) if len(seg) == 3 else 1.0
            if kind == "video" and tokens_per_second is not None:
                step = step * (seconds * tokens_per_second)
            grid = torch.meshgrid(step.long(), torch.arange(h), torch.arange(w), indexing="ij")
            part = start + torch.stack(grid, dim=-1).reshape(-1, 3)
        parts.append(part)
        start = int(part.max()) + 1
    return moved(torch.cat(parts), device)
