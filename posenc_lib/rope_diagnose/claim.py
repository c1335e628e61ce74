"""What fn claims to implement (``Claim``), read once from a config or from ``apply_rope``'s arguments.

The claim fixes the reference ``diagnose_rope`` compares fn with: frequencies (recomputed at each
length for dynamic NTK and LongRoPE), pair layout, rotated slice, attention factor, MRoPE sections
and their style, and the positions the probes may use. A layout the config does not fix stays
unknown (None): the doctor then reads it off fn instead of assuming one.
Names: d = head_dim of the probes, r = rotated features, L0 = where a scaled RoPE changes.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping, Sequence

import torch
from torch import Tensor

from .. import _validate as v
from ..angles import rope_frequencies
from ..rope import LAYOUTS
from ..rope_config import USES_L0, RopeSettings, pair_layout, rope_settings
from ..rope_inspect import lengths_of
from ..rope_nd import STYLES, rope_nd_axes, rope_nd_frequencies


@dataclass(frozen=True)
class Claim:
    """The RoPE fn claims: the reference that ``diagnose_rope`` compares it with."""

    d: int  # head_dim of the probes
    r: int  # rotated features
    layout: str | None  # None: the config does not say (fn's own layout is read off its output)
    rotated: str  # "first" or "last": which r features turn
    base: float
    attention_factor: float
    settings: RopeSettings | None  # from a config: recomputes frequencies (lengths, bases, bands)
    inv_freq: Tensor | None  # given frequencies (float64), else computed from base / settings
    sections: tuple[int, ...] | None  # MRoPE: pairs per axis
    section_style: str
    L0: int | None  # where a scaled RoPE changes (probes at and past it)
    top: int | None  # the largest position a probe may use (context - 1), None: no limit
    span: str  # where top comes from, for the report
    words: str  # how the report names the claim
    model_type: str | None = None
    _cache: dict = field(default_factory=dict, compare=False, repr=False)

    def frequencies(self, seq_len: int, *, exponent: int | None = None, base: float | None = None,
                    settings: RopeSettings | None = None) -> Tensor:
        """theta_j (pairs,) float64 at the current length seq_len; ``exponent`` = the dimension in
        base^(-2j/dim) (head_dim hypotheses), ``base`` another base, ``settings`` another scaling."""
        scaled = settings is not None or self.settings is not None
        key = (seq_len if scaled else 0, exponent, base, id(settings))
        if key not in self._cache:  # the entry keeps `settings` alive, so its id is not reused
            self._cache[key] = (settings, self._frequencies(seq_len, exponent, base, settings))
        return self._cache[key][1]

    def _frequencies(self, seq_len, exponent, base, settings) -> Tensor:
        if self.inv_freq is not None and exponent is None and base is None and settings is None:
            return self.inv_freq
        s = settings or self.settings
        if s is not None:
            if exponent is not None:
                s = replace(s, rotary_dim=exponent, partial_rotary_factor=1.0) if s.method != "proportional" else \
                    replace(s, method="none", rotary_dim=exponent, partial_rotary_factor=1.0, factor=1.0)
            if base is not None:
                s = replace(s, base=base)
            return s.frequencies(seq_len, dtype=torch.float64)[0]
        if self.sections is not None and exponent is None:
            return rope_nd_frequencies(self.sections, self.section_style, base=base or self.base, dtype=torch.float64)
        return rope_frequencies(exponent or self.r, base=base or self.base, dtype=torch.float64)

    def axes(self, sections: tuple[int, ...] | None = None, order: tuple[int, ...] | None = None,
             style: str | None = None) -> Tensor | None:
        """The axis each pair reads (MRoPE), for these sections, this order of the coordinates and this
        style; raises ValueError for sections the style cannot hold."""
        if self.sections is None:
            return None
        axes = rope_nd_axes(sections or self.sections, style or self.section_style)
        return axes if order is None else torch.tensor(order)[axes]


def _top(max_positions: int | None, context: int | None, span: str) -> tuple[int | None, str]:
    if max_positions is not None:
        return v.int_at_least("max_positions", max_positions, 64) - 1, f"max_positions = {max_positions}"
    return (None, "no context given") if context is None else (context - 1, span)


def claim_from_config(config: Mapping, layer_type: str | None, head_dim: int | None, layout: str | None,
                      rotated: str, max_positions: int | None) -> Claim:
    """The claim a config.json makes for one layer type (``diagnose_rope``'s config form)."""
    s = rope_settings(config, layer_type=layer_type)
    r = s.head_dim if s.method == "proportional" else s.rotary_dim
    d = s.head_dim if head_dim is None else v.even_dim("head_dim", head_dim)
    if d < r:
        raise ValueError(f"head_dim must be at least the config's rotated features {r}, got {d}")
    family, model_type = pair_layout(config)
    layout = layout or family
    lengths = lengths_of(config, layer_type)
    L0 = s.original_max_position if s.method in USES_L0 + ("dynamic",) else lengths.L0
    if s.method == "dynamic":  # its base grows past max_position_embeddings, up to factor x L0
        context, span = lengths.scaled or lengths.context, "factor x max_position_embeddings (dynamic NTK's reach)"
    elif lengths.context is not None:
        context, span = lengths.context, "max_position_embeddings"
    else:
        context, span = lengths.scaled, "factor x L0 (no max_position_embeddings)"
    top, span = _top(max_positions, context, span)
    style = "interleaved" if s.mrope_interleaved else "contiguous"
    _, a = s.frequencies(dtype=torch.float64)
    words = (f"{s.rope_type}, base {s.base:g}, " + (f"{layout} layout" if layout else "pair layout not fixed by the "
                                                   f"config (model_type {model_type!r})")
             + f", rotating the {rotated} {r} of {d} features"
             + (f", attention factor {a:.4g}" if a != 1 else "")
             + (f", MRoPE sections {list(s.mrope_section)} ({style})" if s.mrope_section else "")
             + (f", L0 = {L0}" if L0 else ""))
    return Claim(d, r, layout, rotated, s.base, a, s, None, s.mrope_section, style, L0, top, span, words, model_type)


def claim_from_arguments(head_dim, layout, base, inv_freq, attention_factor, rotary_dim, rotated, sections,
                         section_style, max_positions) -> Claim:
    """The claim of ``apply_rope``'s arguments (``diagnose_rope`` without a config)."""
    base = v.base_above_one(10000.0 if base is None else base)
    layout = layout or "interleaved"  # apply_rope's default: the claim is that call
    a = v.finite_number("attention_factor", 1.0 if attention_factor is None else attention_factor, above=0)
    if sections is not None:
        sections = tuple(v.int_at_least(f"sections[{i}]", x, 1) for i, x in enumerate(sections))
        section_style = v.one_of("section_style", section_style, STYLES)
    if inv_freq is not None:
        if not isinstance(inv_freq, Tensor) or inv_freq.dim() != 1 or not inv_freq.is_floating_point():
            raise ValueError(f"inv_freq must be a 1-D floating tensor (r/2,), got {getattr(inv_freq, 'shape', inv_freq)!r}")
        r_freq = 2 * len(inv_freq)
        if rotary_dim is not None and v.even_dim("rotary_dim", rotary_dim) != r_freq:
            raise ValueError(f"inv_freq has {len(inv_freq)} entries, so rotary_dim must be {r_freq}, got {rotary_dim}")
        rotary_dim = r_freq
        inv_freq = inv_freq.detach().cpu().double()
    if sections is not None and rotary_dim is None:
        rotary_dim = 2 * sum(sections)
    r = v.even_dim("rotary_dim", rotary_dim) if rotary_dim is not None else None
    d = v.even_dim("head_dim", head_dim) if head_dim is not None else (r or 64)
    r = r or d
    if r > d:
        raise ValueError(f"rotary_dim must be at most head_dim = {d}, got {r}")
    if sections is not None:
        if 2 * sum(sections) != r:
            raise ValueError(f"sections must sum to rotary_dim / 2 = {r // 2}, got {list(sections)}")
        rope_nd_axes(sections, section_style)  # sections the claimed style cannot hold are the caller's error
    top, span = _top(max_positions, None, "")
    words = (f"base {base:g}, {layout} layout, rotating the {rotated} {r} of {d} features"
             + (", given frequencies" if inv_freq is not None else "")
             + (f", attention factor {a:.4g}" if a != 1 else "")
             + (f", sections {list(sections)} ({section_style})" if sections is not None else ""))
    return Claim(d, r, layout, rotated, base, a, None, inv_freq, sections, section_style, None, top, span, words)


def build_claim(config: Mapping | None, *, layer_type: str | None, head_dim: int | None, layout: str | None,
                base: float | None, inv_freq: Tensor | None, attention_factor: float | None, rotary_dim: int | None,
                rotated: str, sections: Sequence[int] | None, section_style: str,
                max_positions: int | None) -> Claim:
    """The claim of either form, its arguments checked (ValueError naming the parameter)."""
    rotated = v.one_of("rotated", rotated, ("first", "last"))
    if layout is not None:
        layout = v.one_of("layout", layout, LAYOUTS)
    if config is None:
        return claim_from_arguments(head_dim, layout, base, inv_freq, attention_factor, rotary_dim, rotated,
                                    sections, section_style, max_positions)
    given = [name for name, x in (("base", base), ("inv_freq", inv_freq), ("attention_factor", attention_factor),
                                  ("rotary_dim", rotary_dim), ("sections", sections)) if x is not None]
    if given:
        raise ValueError(f"give either config or {', '.join(given)}: the config already sets them")
    return claim_from_config(config, layer_type, head_dim, layout, rotated, max_positions)
