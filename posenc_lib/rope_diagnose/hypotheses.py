"""The named bugs (``HYPOTHESES``): each a transformation of the reference, offered as one or more
``Variant``s (its candidates, e.g. every other base worth trying), and the probe that exposes it.

The registry's order is the order of preference when several hypotheses reproduce fn (the rest
are reported as giving the same numbers): the claim's own scaling before generic causes that can
mimic it, the attention factor last (it fits its constant to whatever a paired hypothesis changed).
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace
from typing import Callable

import torch
from torch import Tensor

from ..rope import pair_indices
from ..rope_nd import rope_nd_frequencies
from .claim import Claim
from .probes import Probe
from .variant import Variant, fit_scales, named, seq_len


@dataclass
class Context:
    """What a hypothesis may look at: the claim, the probes and fn's outputs on them."""

    claim: Claim
    probes: list[Probe]
    outputs: list[tuple[Tensor, Tensor]]

    @property
    def inputs(self):
        return [(p.q, p.k, p.positions, got) for p, got in zip(self.probes, self.outputs)]


@dataclass(frozen=True)
class Hypothesis:
    """A named bug: ``variants(v, ctx)`` are the reference v with this bug added (several candidates)."""

    name: str
    title: str  # the bug class in words, without the claim's numbers (what a checker may say)
    probe: str  # the probe that exposes it ("a / b": one of them, by variant)
    touches: frozenset[str]  # Variant fields it changes (two hypotheses combine only if disjoint)
    variants: Callable[[Variant, Context], list[Variant]]


def _layout(v, ctx):
    if v.r < 4 or ctx.claim.layout is None:  # a layout the config does not fix is no bug
        return []
    other = "half" if v.layout == "interleaved" else "interleaved"
    return [named(v, "layout", f"pairs laid out {other} instead of {v.layout}", layout=other)]


def _clockwise(v, ctx):
    return [named(v, "clockwise", "the rotation transposed (clockwise: R_{-m} instead of R_m)", direction=-v.direction)]


def _shift(step):
    def variants(v, ctx):
        name = f"position_{'plus' if step > 0 else 'minus'}_one"
        return [named(v, name, f"positions shifted by {step:+d}", shift=v.shift + step),
                named(v, name, f"positions shifted by {step:+d} once they start past 0 (the cache length "
                      f"counted {'one too many' if step > 0 else 'one too few'})", shift=v.shift + step,
                      shift_past_zero=True)]
    return variants


def _restart(v, ctx):
    return [named(v, "restart_at_zero", "positions restarting at 0 (the cache offset ignored)", restart=True),
            named(v, "restart_at_zero", "positions moved back by the first sequence's start (one cache offset for the "
                  "whole batch)", restart_batch=True)]


def _offset_twice(v, ctx):
    return [named(v, "offset_twice", "the cache offset added twice (positions past the cache start at twice "
                  "its length)", offset_twice=True)]


def _first_row(v, ctx):
    return [named(v, "first_row_positions", "every sequence of the batch rotated with the first one's positions",
                  first_row=True)]


def _double(v, ctx):
    return [named(v, "double_rotation", f"{who} rotated twice (angle 2 m theta_j)", turns=turns)
            for who, turns in (("the keys", (1, 2)), ("the queries", (2, 1)), ("q and k both", (2, 2)))]


_DTYPE = {torch.bfloat16: "bfloat16", torch.float16: "float16", None: "the inputs' dtype (bfloat16 or float16)"}
_ROUNDED = {"frequencies": "frequencies theta_j rounded to {} (a half-precision inv_freq buffer)",
            "positions": "positions m cast to {} before the product (arange in the buffer's dtype)",
            "product": "angles m theta_j computed in {} (positions and frequencies cast first)",
            "angles": "angles m theta_j rounded to {} before cos and sin"}


def _low_precision(v, ctx):
    return [named(v, "low_precision_angles", words.format(_DTYPE[dtype]) + (
        " for every input, float32 included" if dtype is not None else ""), rounding=kind, rounding_dtype=dtype)
            for dtype in (None, torch.bfloat16, torch.float16) for kind, words in _ROUNDED.items()]


def _table_dtype(v, ctx):
    return [named(v, "table_dtype", f"cos and sin tables stored in {_DTYPE[dtype]} for every input, float32 "
                  "included (a cached buffer cast by model.to())", table_dtype=dtype)
            for dtype in (torch.bfloat16, torch.float16)]


def _rotation_dtype(v, ctx):
    return [named(v, "rotation_dtype", f"the rotation done in {_DTYPE[dtype]} for every input, float32 included "
                  "(q and k cast down first)", output_dtype=dtype) for dtype in (torch.bfloat16, torch.float16)]


def estimate_base(v: Variant, ctx: Context) -> list[float]:
    """Bases that fit fn's own angles at position 1 of the start probe (pairs 1.. of its layout)."""
    claim = ctx.claim
    i = next(j for j, p in enumerate(ctx.probes) if p.name == "start")
    probe, (got_q, _) = ctx.probes[i], ctx.outputs[i]
    x, y = probe.q.double(), got_q
    start = 0 if v.rotated == "first" else claim.d - v.r
    a, b = (idx + start for idx in pair_indices(v.r, v.layout))
    zx = torch.complex(x[..., 1, a], x[..., 1, b])
    zy = torch.complex(y[..., 1, a], y[..., 1, b])
    theta = torch.angle((zx.conj() * zy).sum(dim=(0, 1))).abs()  # pair j's angle at position 1
    j = torch.arange(len(theta), dtype=torch.float64)
    ok = (j >= 1) & (theta > 1e-3) & (theta < 3.0)
    if not bool(ok.any()):
        return []
    est = float(torch.exp(-(torch.log(theta[ok]) * v.r / (2 * j[ok]))).median())
    if not math.isfinite(est) or est <= 1:
        return []
    digits = {float(f"{est:.{n}g}") for n in (1, 2, 3)}
    return sorted(b for b in digits | {10000.0, 500000.0, 1e6} if not math.isclose(b, claim.base, rel_tol=1e-6))


def _base(v, ctx):
    claim = ctx.claim
    if claim.inv_freq is not None and claim.settings is None:
        return []
    return [named(v, "wrong_base", f"base {b:g} instead of {claim.base:g}",
                  frequencies=lambda pos, b=b: claim.frequencies(seq_len(pos), base=b))
            for b in estimate_base(v, ctx)]


def _factor(v, ctx):
    """One constant c on q and k (scores x c^2) where the claim has a."""
    cq, ck = fit_scales(v, ctx.inputs)
    a = ctx.claim.attention_factor
    if cq is None or ck is None or not math.isclose(cq, ck, rel_tol=2e-3):
        return []
    c = (cq + ck) / 2
    if c <= 0 or math.isclose(c, v.scale, rel_tol=1e-3):
        return []
    if a != 1 and math.isclose(c, a * a, rel_tol=2e-3):
        words = f"the attention factor applied twice (c = a^2 = {c:.4g} on q and k, scores x{c * c:.4g})"
    elif a != 1 and math.isclose(c, 1.0, rel_tol=2e-3):
        words = f"the attention factor {a:.4g} missing (scores x{1 / a ** 2:.4g} too small)"
    elif a == 1:
        words = f"a factor {c:.4g} on q and k where none is claimed (scores x{c * c:.4g})"
    else:
        words = f"a factor {c:.4g} on q and k instead of the attention factor {a:.4g} (scores x{(c / a) ** 2:.4g})"
    return [named(v, "attention_factor", words, scale=c)]


def _one_sided(v, ctx):
    """Different constants on q and on k; none when their product keeps the scores (a legitimate fold)."""
    cq, ck = fit_scales(v, ctx.inputs)
    a = ctx.claim.attention_factor
    if cq is None or ck is None or cq <= 0 or ck <= 0 or math.isclose(cq, ck, rel_tol=2e-3):
        return []
    if math.isclose(cq * ck, a * a, rel_tol=2e-3):
        return []
    side = lambda c: "unscaled" if math.isclose(c, 1.0, rel_tol=2e-3) else (  # noqa: E731
        f"x a = {c:.4g}" if a != 1 and math.isclose(c, a, rel_tol=2e-3) else f"x {c:.4g}")
    if a != 1 and (math.isclose(cq, a, rel_tol=2e-3) or math.isclose(ck, a, rel_tol=2e-3)) and math.isclose(
            min(cq, ck, key=lambda c: abs(c - 1)), 1.0, rel_tol=2e-3):
        which = "q" if math.isclose(cq, a, rel_tol=2e-3) else "k"
        words = (f"the attention factor {a:.4g} on {which} only (scores x{cq * ck:.4g} instead of x{a * a:.4g})")
    else:
        words = f"q {side(cq)} and k {side(ck)} (scores x{cq * ck:.4g} instead of x{a * a:.4g})"
    return [named(v, "one_sided_factor", words, scale=1.0, sides=(cq, ck))]


def _slice(v, ctx):
    if v.r == ctx.claim.d:
        return []
    other = "last" if v.rotated == "first" else "first"
    return [named(v, "rotated_slice", f"the {other} {v.r} features rotated instead of the {v.rotated}", rotated=other)]


def _rotary_dim(v, ctx):
    claim = ctx.claim
    if (claim.inv_freq is not None and claim.settings is None) or claim.sections or (
            claim.settings is not None and claim.settings.method == "proportional"):
        return []
    out = []
    for r in sorted({claim.d, claim.r // 2, 2 * claim.r}):
        if r == claim.r or r > claim.d or r < 2 or r % 2:
            continue
        what = f"all head_dim = {r} features" if r == claim.d else f"{r} features"
        out.append(named(v, "rotary_dim", f"{what} rotated instead of rotary_dim = {claim.r}", r=r,
                         frequencies=lambda pos, r=r: claim.frequencies(seq_len(pos), exponent=r)))
    return out


def _exponent(v, ctx):
    claim = ctx.claim
    if claim.r == claim.d or (claim.inv_freq is not None and claim.settings is None) or claim.sections:
        return []
    first = lambda pos: claim.frequencies(seq_len(pos), exponent=claim.d)[: claim.r // 2]  # noqa: E731
    return [named(v, "head_dim_exponent", f"theta_j = base^(-2j/{claim.d}) (head_dim in the exponent) instead of "
                  f"base^(-2j/{claim.r})", frequencies=first)]


def _proportional(v, ctx):
    claim, s = ctx.claim, ctx.claim.settings
    if claim.sections:
        return []
    if s is not None and s.method == "proportional":
        r = s.rotary_dim  # int(p * head_dim): a RoPE of dimension r on the first r features
        partial = replace(s, method="linear", head_dim=r, rotary_dim=r, partial_rotary_factor=1.0, options={})
        return [named(v, "partial_proportional", f"partial rotary of dimension {r} instead of proportional",
                      r=r, frequencies=lambda pos: claim.frequencies(seq_len(pos), settings=partial)),
                named(v, "partial_proportional", f"the proportional frequencies paired within the first {r} "
                      "features instead of across the head", r=r,
                      frequencies=lambda pos: claim.frequencies(seq_len(pos))[: r // 2])]
    if claim.r == claim.d or (claim.inv_freq is not None and claim.settings is None):
        return []

    def spread(pos):
        theta = claim.frequencies(seq_len(pos), exponent=claim.d).clone()
        theta[claim.r // 2:] = 0
        return theta

    return [named(v, "partial_proportional", f"proportional (pairs across all {claim.d} features, theta of "
                  f"head_dim, the rest 0) instead of partial rotary of dimension {claim.r}", r=claim.d,
                  frequencies=spread)]


def _scaled(claim: Claim, words: str, name: str, v: Variant, settings, scale: bool = True) -> Variant:
    """v with another scaling's frequencies (and its attention factor) at every length."""
    a = float(settings.frequencies(dtype=torch.float64)[1])
    return named(v, name, words, frequencies=lambda pos: claim.frequencies(seq_len(pos), settings=settings),
                 **({"scale": a} if scale else {}))


def _scaling_dropped(v, ctx):
    s = ctx.claim.settings
    if s is None or s.method in ("none", "proportional"):
        return []
    return [_scaled(ctx.claim, f"the {s.rope_type} context extension ignored (plain RoPE frequencies)",
                    "scaling_dropped", v, s.unscaled(), scale=False)]


_METHOD_WORDS = {"linear": "linear position interpolation (every theta_j / s)", "ntk": "NTK-aware scaling (a larger "
                 "base, the same at every length)", "dynamic": "dynamic NTK (the base grows with the input)",
                 "yarn": "YaRN (ramp over the pairs, default betas)", "llama3": "llama3's bands (default factors)"}


def _target(s, method: str):
    """The claim's scaling done with another method, same factor (and L0 where the method reads one)."""
    factor = s.factor or s.max_position / s.original_max_position
    L0 = s.original_max_position or s.max_position
    if method in ("yarn", "llama3", "dynamic") and L0 is None:
        return None
    return replace(s, method=method, factor=factor, original_max_position=L0, options={})


_PI_FACTORS = (2.0, 4.0, 8.0, 16.0, 32.0)


def _scaling_method(v, ctx):
    s = ctx.claim.settings
    if s is not None and s.method == "none" and not s.mrope_section:  # a scaling where the claim has none
        return [_scaled(ctx.claim, f"linear position interpolation by {f:g} where the config scales nothing "
                        "(another layer type's scaling, or the model's, applied here)", "scaling_method", v,
                        replace(s, method="linear", factor=f)) for f in _PI_FACTORS]
    if s is None or s.method not in _METHOD_WORDS and s.method != "longrope":
        return []
    out = []
    for method in _METHOD_WORDS:
        t = _target(s, method)
        if method == s.method or t is None:
            continue
        out.append(_scaled(ctx.claim, f"{_METHOD_WORDS[method]} instead of {s.rope_type}, with the same factor "
                           f"{t.factor:g}", "scaling_method", v, t))
    return out


def _scaling_factor(v, ctx):
    s = ctx.claim.settings
    if s is None or s.method in ("none", "proportional", "longrope"):
        return []
    factor = s.factor or s.max_position / s.original_max_position
    L0 = s.original_max_position
    candidates = {factor * 2, factor / 2, factor * 4, factor / 4, 8.0, 32.0}
    if s.max_position and L0:
        candidates.add(s.max_position / L0)
    out = []
    for f in sorted(c for c in candidates if c > 1 and not math.isclose(c, factor, rel_tol=1e-6)):
        t = replace(s, factor=f)
        out.append(_scaled(ctx.claim, f"factor {f:g} instead of {factor:g} ({s.rope_type})", "scaling_factor", v, t))
    return out


def _frozen_dynamic(v, ctx):
    claim, s = ctx.claim, ctx.claim.settings
    if s is None or s.method != "dynamic":
        return []
    L0, factor = s.original_max_position, s.factor
    lengths = {int(L0 * factor): f"max_position_embeddings x factor = {int(L0 * factor)} (a cache built for the "
                                 "longest input)", 2 * L0: f"2 x max_position_embeddings = {2 * L0}"}
    if claim.top is not None:
        lengths.setdefault(claim.top + 1, f"the context, {claim.top + 1}")
    fixed = lambda n: lambda pos: claim.frequencies(n)  # noqa: E731
    return [named(v, "frozen_dynamic", f"dynamic NTK's base computed once, for a length of {words}, instead of "
                  "growing with the input", frequencies=fixed(n)) for n, words in lengths.items() if n > L0]


def _claimed(ctx: Context, method: str):
    """The claim's settings when its scaling is this method, else None."""
    s = ctx.claim.settings
    return s if s is not None and s.method == method else None


def _rebuilt(v: Variant, ctx: Context, name: str, candidates: list[tuple]) -> list[Variant]:
    """v with each (settings, words) candidate's frequencies (the claim's attention factor kept)."""
    return [_scaled(ctx.claim, words, name, v, t, scale=False) for t, words in candidates]


def _with_options(s, words: str, **options) -> tuple:
    """(the settings with these method options changed, the words naming the change)."""
    return replace(s, options={**s.options, **options}), words


def _yarn_ramp(v, ctx):
    """YaRN's ramp over the pairs built from other settings: truncate flipped (GPT-OSS's false rounded), the
    default betas (32, 1) or swapped ones where the config has others, L0 taken from max_position_embeddings."""
    s = _claimed(ctx, "yarn")
    if s is None:
        return []
    truncate = s.options.get("truncate", True)
    out = [_with_options(s, "YaRN's ramp ends rounded to whole pairs (truncate ignored: the config says false)"
                         if not truncate else "YaRN's ramp ends left fractional (truncate: false) where the config "
                         "rounds them", truncate=not truncate)]
    fast, slow = s.options.get("beta_fast", 32.0), s.options.get("beta_slow", 1.0)
    if (fast, slow) != (32.0, 1.0):
        out.append(_with_options(s, f"YaRN's default betas (32, 1) instead of the config's ({fast:g}, {slow:g})",
                                 beta_fast=32.0, beta_slow=1.0))
    if fast != slow:
        out.append(_with_options(s, "YaRN's beta_fast and beta_slow swapped", beta_fast=slow, beta_slow=fast))
    if s.max_position and s.max_position != s.original_max_position:
        out.append((replace(s, original_max_position=s.max_position, factor=s.factor or
                            s.max_position / s.original_max_position),
                    f"YaRN's ramp anchored at max_position_embeddings = {s.max_position} instead of L0 = "
                    f"{s.original_max_position}"))
    return _rebuilt(v, ctx, "yarn_ramp", out)


def _llama3(v, ctx):
    """llama3's bands from other settings: anchored at another L0, or other low/high_freq_factor."""
    s = _claimed(ctx, "llama3")
    if s is None:
        return []
    L0 = s.original_max_position
    out = [(replace(s, original_max_position=x), f"llama3's bands anchored at L0 = {x} instead of {L0}")
           for x in sorted({x for x in (s.max_position, int(s.factor * L0), L0 // 2, 2 * L0) if x and x != L0})]
    low, high = s.options["low_freq_factor"], s.options["high_freq_factor"]
    for lo, hi in {(1.0, 4.0), (high, low)} - {(low, high)}:
        if hi >= lo:
            out.append(_with_options(s, f"llama3's bands with low_freq_factor {lo:g} and high_freq_factor {hi:g} "
                                     f"instead of {low:g} and {high:g}", low_freq_factor=lo, high_freq_factor=hi))
    return _rebuilt(v, ctx, "llama3_bands", out)


def _longrope_rules(s) -> dict:
    """Wrong rules for LongRoPE's switch from short_factor to long_factor (the right one: past L0)."""
    L0 = s.original_max_position
    short = s.frequencies(L0, dtype=torch.float64)[0]
    long_ = s.frequencies(L0 + 1, dtype=torch.float64)[0]
    return {
        "at a length of L0 (one token early: seq_len >= L0)": lambda pos: long_ if seq_len(pos) >= L0 else short,
        "never (short_factor at every length)": lambda pos: short,
        "always (long_factor at every length)": lambda pos: long_,
        "per token (positions >= L0 take long_factor)": lambda pos: torch.where(
            pos.unsqueeze(-1) >= L0, long_, short) if pos.dim() == 2 else short,
    }


def _longrope(v, ctx):
    s = _claimed(ctx, "longrope")
    return [] if s is None else [
        named(v, "longrope_switch", f"LongRoPE's lists switched {when} instead of past L0 = {s.original_max_position}",
              frequencies=rule) for when, rule in _longrope_rules(s).items()]


def _axes_or_none(claim: Claim, **kw) -> Tensor | None:
    try:
        return claim.axes(**kw)
    except ValueError:  # sections that style cannot hold: not a candidate
        return None


def _sections(v, ctx):
    claim = ctx.claim
    if claim.sections is None or len(claim.sections) < 2:
        return []
    out = []
    n = len(claim.sections)
    for perm in itertools.permutations(range(n)):
        if perm == tuple(range(n)):
            continue
        sec = tuple(claim.sections[i] for i in perm)
        axes = _axes_or_none(claim, order=perm)
        if axes is not None:
            out.append(named(v, "section_order", f"coordinates read in the order {perm} (axis i's pairs turn with "
                             f"axis perm[i])", axes=axes))
        axes = _axes_or_none(claim, sections=sec)
        if sec != claim.sections and axes is not None:
            freqs = rope_nd_frequencies(sec, claim.section_style, base=claim.base, dtype=torch.float64)
            out.append(named(v, "section_order", f"sections {list(sec)} instead of {list(claim.sections)}",
                             axes=axes, frequencies=(lambda pos, f=freqs: f) if claim.section_style == "axial"
                             else v.frequencies))
    out.append(named(v, "section_order", "every pair turning with the first coordinate (t): MRoPE read as 1-D "
                     "RoPE of the temporal position", axes=torch.zeros_like(claim.axes())))
    return out


def _section_style(v, ctx):
    claim = ctx.claim
    if claim.sections is None or claim.section_style == "axial":
        return []
    other = "contiguous" if claim.section_style == "interleaved" else "interleaved"
    axes = _axes_or_none(claim, style=other)
    if axes is None:  # sections interleaving cannot hold: kernels slice round-robin and stop at the last pair
        n, half = len(claim.sections), sum(claim.sections)
        axes = torch.zeros(half, dtype=torch.long)
        for a in range(1, n):
            axes[a: n * claim.sections[a]: n] = a
    words = {"contiguous": "contiguous MRoPE sections (Qwen2-VL's blocks of pairs per axis)",
             "interleaved": "interleaved MRoPE sections (Qwen3-VL's pairs to t, h, w in turn)"}
    return [named(v, "section_style", f"{words[other]} instead of {claim.section_style} ones", axes=axes)]


def _no_rotation(v, ctx):
    return [named(v, "no_rotation", "nothing rotated (the output is the input)",
                  frequencies=lambda pos: torch.zeros(v.r // 2, dtype=torch.float64), direction=1)]


FREQUENCIES = frozenset({"frequencies"})
HYPOTHESES: dict[str, Hypothesis] = {h.name: h for h in (
    Hypothesis("layout", "the pairs are laid out the other way (interleaved vs half)",
               "start", frozenset({"layout"}), _layout),
    Hypothesis("clockwise", "the rotation turns the other way (clockwise)",
               "start", frozenset({"direction"}), _clockwise),
    Hypothesis("position_plus_one", "the positions are one too large",
               "start / offset", frozenset({"shift"}), _shift(+1)),
    Hypothesis("position_minus_one", "the positions are one too small",
               "start / offset", frozenset({"shift"}), _shift(-1)),
    Hypothesis("restart_at_zero", "the positions restart at 0: the offset of a KV cache is ignored",
               "offset", frozenset({"restart", "restart_batch"}), _restart),
    Hypothesis("offset_twice", "the offset of a KV cache is added twice",
               "offset", frozenset({"offset_twice"}), _offset_twice),
    Hypothesis("first_row_positions", "every sequence of a batch gets the first sequence's positions",
               "batched", frozenset({"first_row"}), _first_row),
    # the claim's own context extension before the generic causes that can give the same numbers; LongRoPE's
    # "never switched" first: with short factors of 1 (Phi-4-mini) it is the dropped scaling, factor kept
    Hypothesis("longrope_switch", "LongRoPE's factor lists switch at the wrong length",
               "at L0 / past L0", FREQUENCIES, _longrope),
    Hypothesis("scaling_dropped", "the config's context extension (rope_scaling) is ignored",
               "far", FREQUENCIES, _scaling_dropped),
    Hypothesis("scaling_method", "another context-extension method than the config's (e.g. PI for NTK)",
               "start / far", FREQUENCIES | {"scale"}, _scaling_method),
    Hypothesis("scaling_factor", "the context extension uses another factor than the config's",
               "start / far", FREQUENCIES | {"scale"}, _scaling_factor),
    Hypothesis("frozen_dynamic", "dynamic NTK's base is computed once instead of growing with the input",
               "start", FREQUENCIES, _frozen_dynamic),
    Hypothesis("yarn_ramp", "YaRN's ramp is built from other settings than the config's (truncate, betas, L0)",
               "start / far", FREQUENCIES, _yarn_ramp),
    Hypothesis("llama3_bands", "llama3's bands are built from other settings (L0, low/high_freq_factor)",
               "far", FREQUENCIES, _llama3),
    Hypothesis("double_rotation", "q or k is rotated twice",
               "start", frozenset({"turns"}), _double),
    Hypothesis("low_precision_angles", "the angles are computed in bfloat16 or float16",
               "bf16 / fp16", frozenset({"rounding"}), _low_precision),
    Hypothesis("table_dtype", "the cos and sin tables are stored in half precision, also for float32 inputs",
               "start", frozenset({"table_dtype"}), _table_dtype),
    Hypothesis("rotation_dtype", "the rotation is computed in half precision, also for float32 inputs",
               "start", frozenset({"output_dtype"}), _rotation_dtype),
    Hypothesis("rotated_slice", "the wrong end of the head is rotated",
               "start", frozenset({"rotated"}), _slice),
    Hypothesis("rotary_dim", "the wrong number of features is rotated",
               "start", frozenset({"r", "frequencies"}), _rotary_dim),
    # before wrong_base: base^(-2j/head_dim) is the base base^(r/head_dim) over r features; name the cause
    Hypothesis("head_dim_exponent", "the frequencies use head_dim where rotary_dim belongs",
               "start", FREQUENCIES, _exponent),
    Hypothesis("partial_proportional", "partial and proportional rotary are confused",
               "start", frozenset({"r", "frequencies"}), _proportional),
    Hypothesis("wrong_base", "the frequencies follow another base",
               "start", FREQUENCIES, _base),
    Hypothesis("section_order", "MRoPE's sections or coordinates are in the wrong order",
               "start", frozenset({"axes", "frequencies"}), _sections),
    Hypothesis("section_style", "MRoPE's sections are contiguous where they should be interleaved, or the reverse",
               "start", frozenset({"axes"}), _section_style),
    Hypothesis("no_rotation", "nothing is rotated",
               "start", frozenset({"frequencies", "direction"}), _no_rotation),
    # last: they fit their constants to whatever the other hypothesis of a pair has changed
    Hypothesis("attention_factor", "q and k carry the wrong constant factor (the attention factor missing, "
               "doubled or extra)", "start", frozenset({"scale"}), _factor),
    Hypothesis("one_sided_factor", "q and k carry different factors (the attention factor on q or k only)",
               "start", frozenset({"scale", "sides"}), _one_sided),
)}
