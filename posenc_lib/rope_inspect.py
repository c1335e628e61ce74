"""A model's RoPE as chapter 8 reads it, from its config.json: ``inspect_config``, the wavelength
figure (``wavelength_figure``), and the command line ``posenc-inspect`` (``python -m posenc_lib inspect``).

For each RoPE of a model (one per layer type that has its own) it reports the rope type, base,
rotated and head dimensions, the pair layout of the model's family (``rope_config.PAIR_LAYOUTS``,
from model_type or the classes ``architectures`` names), MRoPE's sections and their style, three
lengths and what the pairs do within them:
  L0       the length the scaling is anchored to: original_max_position_embeddings where the file
           has it (for llama3, yarn and longrope without it: max_position_embeddings, as
           transformers reads it; for dynamic: max_position_embeddings)
  context  the model's context, max_position_embeddings; factor x L0 is named beside it where
           it differs (the scaling's own reach, which an engine may or may not serve)
  L        the longest span a RoPE layer sees: the context (dynamic NTK: factor x L0, where its
           base stops growing; no max_position_embeddings: factor x L0), but at most
           attention_chunk_size (Llama 4's chunked RoPE layers) and, for sliding-window layers
           with a RoPE of their own, at most the window (Gemma 3)
Pair j turns once every lambda_j = 2 pi / theta_j positions; it "completes a turn" within a length
when lambda_j <= length (``turning_pairs``). Within L0 counts the plain (unscaled) RoPE, within L
the RoPE as configured, at seq_len = L (LongRoPE past L0 uses its long factors). Which layers use
which RoPE, and what else scales their queries, comes from ``rope_layers``.
Names: r = rotated features, L0, L as above, theta_j = inv_freq[j].
"""
from __future__ import annotations

import argparse
import json
import math
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import torch
from torch import Tensor

from .rope_config import USES_L0, RopeSettings, pair_layout, rope_layer_types, rope_settings, text_config
from .rope_layers import LayerPlan, layer_plan, query_scalings

_LAYOUT_WORDS = {
    "half": "half (rotate_half: pair j is features j and j + r/2)",
    "interleaved": "interleaved (pair j is features 2j and 2j + 1)",
}


def turning_pairs(inv_freq: Tensor, length: int) -> int:
    """How many pairs complete at least one turn within ``length`` positions: 2 pi / theta_j <= length.

    inv_freq: (pairs,) frequencies (a zero frequency never turns)
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    return int((2 * math.pi / inv_freq.double() <= length).sum())


@dataclass(frozen=True)
class RopeLengths:
    """A layer type's lengths (module docstring): L0, the context, factor x L0 and L."""

    L0: int | None
    context: int | None  # max_position_embeddings
    scaled: int | None  # factor x L0, where the method has both
    L: int | None


def scaled_length(settings: RopeSettings) -> int | None:
    """factor x L0 for the methods anchored at L0 (and dynamic NTK, whose L0 is max_position_embeddings)."""
    if settings.method not in USES_L0 + ("dynamic",) or settings.original_max_position is None:
        return None
    factor = settings.factor or settings.max_position / settings.original_max_position
    return int(factor * settings.original_max_position)


def lengths_of(config: Mapping, layer_type: str | None = None) -> RopeLengths:
    """The module docstring's lengths of one layer type's RoPE."""
    settings = rope_settings(config, layer_type=layer_type)
    cfg = text_config(config)
    L0 = settings.original_max_position_embeddings
    if L0 is None and settings.method in USES_L0 + ("dynamic",):
        L0 = settings.original_max_position  # the fallback transformers reads: max_position_embeddings
    context, scaled = settings.max_position, scaled_length(settings)
    L = scaled if settings.method == "dynamic" or context is None else context
    if L is not None and cfg.get("attention_chunk_size"):
        L = min(L, int(cfg["attention_chunk_size"]))  # chunked RoPE layers see one chunk
    if L is not None and layer_type == "sliding_attention" and cfg.get("sliding_window"):
        L = min(L, int(cfg["sliding_window"]))  # this RoPE serves only layers that see their window
    return RopeLengths(L0, context, scaled if scaled != context else None, L)


def rope_lengths(config: Mapping, layer_type: str | None = None) -> tuple[int | None, int | None]:
    """(L0 or None, L or None) for one layer type (``lengths_of``)."""
    lengths = lengths_of(config, layer_type)
    return lengths.L0, lengths.L


@dataclass
class RopeRow:
    """One RoPE of a model (a layer type with its own RoPE, or the model's only one)."""

    label: str
    layer_type: str | None
    rope_type: str
    base: float
    head_dim: int
    rotary_dim: int
    pairs: int
    L0: int | None
    L: int | None
    attention_factor: float
    turning_within_L0: int | None  # plain RoPE, as pretrained
    turning_within_L: int | None  # as configured, at seq_len = L
    zero_frequency_pairs: int
    wavelengths: dict[str, float]  # shortest / longest, pretrained and as configured (finite ones)
    mrope_section: tuple[int, ...] | None
    plain: Tensor = field(repr=False)  # (pairs,) float64: the unscaled frequencies
    inv_freq: Tensor = field(repr=False)  # (pairs,) float64: as configured, at seq_len = L
    context: int | None = None  # max_position_embeddings
    scaled_length: int | None = None  # factor x L0 where it differs from the context
    mrope_interleaved: bool = False
    method: str = "none"  # the SCALINGS entry that computes it ("ntk" for dynamic with alpha)

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in ("label", "layer_type", "rope_type", "method", "base", "head_dim",
                                             "rotary_dim", "pairs", "L0", "context", "scaled_length", "L",
                                             "attention_factor", "turning_within_L0", "turning_within_L",
                                             "zero_frequency_pairs", "wavelengths")}
        out["mrope_section"] = None if self.mrope_section is None else list(self.mrope_section)
        out["mrope_style"] = None if self.mrope_section is None else (
            "interleaved" if self.mrope_interleaved else "contiguous")
        out["inv_freq"] = [float(x) for x in self.inv_freq]  # as configured, at seq_len = L
        return out


def _wavelengths(inv_freq: Tensor) -> tuple[float, float]:
    turning = inv_freq[inv_freq > 0].double()
    return (2 * math.pi / turning.max()).item(), (2 * math.pi / turning.min()).item()


def rope_row(config: Mapping, layer_type: str | None = None, label: str = "model") -> RopeRow:
    """The chapter 8 table row of one layer type's RoPE (``RopeRow``)."""
    settings = rope_settings(config, layer_type=layer_type)
    lengths = lengths_of(config, layer_type)
    L0, L = lengths.L0, lengths.L
    inv_freq, factor = settings.frequencies(seq_len=L)  # float32, as rope_from_config and the models compute it
    inv_freq = inv_freq.double()
    plain, _ = settings.unscaled().frequencies(dtype=torch.float64)
    (short, long_), (short0, long0) = _wavelengths(inv_freq), _wavelengths(plain)
    if layer_type is not None:
        label = f"{label} ({layer_type.split('_')[0]})"
    return RopeRow(
        label=label, layer_type=layer_type, rope_type=settings.rope_type, base=settings.base,
        head_dim=settings.head_dim, rotary_dim=settings.rotary_dim, pairs=settings.pairs, L0=L0, L=L,
        attention_factor=factor, turning_within_L0=None if L0 is None else turning_pairs(plain, L0),
        turning_within_L=None if L is None else turning_pairs(inv_freq, L),
        zero_frequency_pairs=int((inv_freq == 0).sum()),
        wavelengths={"shortest": short, "longest": long_, "shortest_pretrained": short0, "longest_pretrained": long0},
        mrope_section=settings.mrope_section, plain=plain, inv_freq=inv_freq, context=lengths.context,
        scaled_length=lengths.scaled, mrope_interleaved=settings.mrope_interleaved, method=settings.method,
    )


def _lengths_line(row: RopeRow) -> str:
    dash = lambda x: "–" if x is None else x  # noqa: E731
    line = f"    L0 = {dash(row.L0)}, context = {dash(row.context)} (max_position_embeddings)"
    if row.scaled_length is not None:
        reach = ("dynamic NTK's scale reaches factor there" if row.method == "dynamic" else
                 "the scaling's own reach" + (", past the context" if row.context and row.scaled_length > row.context
                                              else ", short of the context" if row.context else ""))
        line += f", factor x L0 = {row.scaled_length} ({reach})"
    return line + f", L = {dash(row.L)}"


@dataclass
class ModelRope:
    """What ``inspect_config`` finds: the RoPE rows, the layers, the pair layout and the pitfalls."""

    name: str
    model_type: str | None
    layout: str | None
    rows: list[RopeRow]
    layers: dict
    warnings: list[str]

    def to_dict(self) -> dict:
        return {"name": self.name, "model_type": self.model_type, "layout": self.layout,
                "ropes": [row.to_dict() for row in self.rows], "layers": self.layers, "warnings": self.warnings}

    def text(self) -> str:
        lines = [f"{self.name}" + (f" (model_type {self.model_type})" if self.model_type else "")]
        layout = _LAYOUT_WORDS.get(self.layout, "unknown for this model_type: read the model's code "
                                                "(rotate_half means half; pairs (2j, 2j+1) interleaved)")
        lines.append(f"  pair layout: {layout}")
        for row in self.rows:
            head = f"  RoPE{'' if row.layer_type is None else ' of ' + row.layer_type + ' layers'}: "
            partial = "" if row.rotary_dim == row.head_dim else f" of head_dim {row.head_dim}"
            method = " (alpha: a fixed NTK-aware base)" if row.rope_type == "dynamic" and row.method == "ntk" else ""
            mrope = "" if not row.mrope_section else (
                f", MRoPE sections {list(row.mrope_section)} (t, h, w), "
                + ("interleaved (mrope_interleaved: pairs go to t, h, w in turn)" if row.mrope_interleaved else
                   "contiguous (consecutive blocks of pairs per axis)"))
            lines.append(f"{head}{row.rope_type}{method}, base {row.base:g}, rotary_dim {row.rotary_dim}{partial}, "
                         f"{row.pairs} pairs{mrope}")
            lines.append(_lengths_line(row) + f"; attention factor {row.attention_factor:.3f} "
                         f"(scores x{row.attention_factor ** 2:.3f})")
            n = row.pairs
            within = [f"{row.turning_within_L0}/{n} within L0 (plain RoPE)"] if row.L0 is not None else []
            within += [f"{row.turning_within_L}/{n} within L (as configured)"] if row.L is not None else []
            if within:
                lines.append("    pairs that complete a turn: " + ", ".join(within))
            w = row.wavelengths
            still = f"; {row.zero_frequency_pairs} pairs never turn (frequency 0)" if row.zero_frequency_pairs else ""
            lines.append(f"    wavelengths: {w['shortest']:.3g} to {w['longest']:.4g} tokens as configured "
                         f"({w['shortest_pretrained']:.3g} to {w['longest_pretrained']:.4g} plain){still}")
        lines.append("  layers: " + self.layers["summary"])
        for scaling in self.layers["query_scalings_text"]:
            lines.append(f"  query scaling: {scaling}")
        if self.warnings:
            lines.append("  pitfalls:")
            lines += [f"    - {w}" for w in self.warnings]
        return "\n".join(lines)


def _layers(config: Mapping, rows: list[RopeRow]) -> dict:
    """Which layers use which RoPE, sliding windows, chunks, linear attention or no positions (NoPE),
    and what scales their queries (``rope_layers``)."""
    cfg = text_config(config)
    plan: LayerPlan = layer_plan(config)
    nope = [i for i in plan.layers_with(None) if plan.attention[i] != "linear_attention"]
    linear = [i for i, a in enumerate(plan.attention) if a == "linear_attention"]
    out: dict = {"num_hidden_layers": plan.num_layers or cfg.get("num_hidden_layers"),
                 "layer_types": dict(Counter(plan.attention)) if len(set(plan.attention)) > 1 else None,
                 "attention": list(plan.attention), "rope": list(plan.rope), "derived_from": plan.derived_from,
                 "sliding_window": plan.sliding_window, "window_note": plan.window_note,
                 "attention_chunk_size": plan.attention_chunk_size, "nope_layers": nope,
                 "linear_attention_layers": linear, "temperature": None}
    parts = [plan.summary()] if plan.attention or plan.derived_from != "one kind of layer" else []
    if plan.sliding_window:
        parts.append(f"sliding window {plan.sliding_window} tokens")
        plain_all = [row for row in rows if row.layer_type is None]
        if plain_all and "sliding_attention" in plan.attention:  # one RoPE serves the sliding layers too
            parts.append(f"within that window {turning_pairs(plain_all[0].inv_freq, plan.sliding_window)}"
                         f"/{plain_all[0].pairs} pairs turn")
    elif plan.window_note:
        parts.append(plan.window_note)
    if plan.attention_chunk_size and "chunked_attention" in plan.attention:
        parts.append(f"RoPE layers attend within chunks of {plan.attention_chunk_size} tokens")
    if not parts:
        parts.append("every layer uses the same RoPE")
    scalings = query_scalings(config)
    context = cfg.get("max_position_embeddings")
    out["query_scalings"] = [q.to_dict() for q in scalings]
    out["query_scalings_text"] = [q.words(int(context) if context else None) for q in scalings]
    for q in scalings:
        if q.name == "attention temperature":
            last = int(context or q.step) - 1
            out["temperature"] = {"floor_scale": q.step, "attn_scale": q.beta, "at_position": last, "value": q.at(last)}
    out["summary"] = "; ".join(parts)
    return out


def _warnings(config: Mapping, rows: list[RopeRow], layout: str | None, model_type: str | None) -> list[str]:
    cfg = text_config(config)
    out = []
    for row in rows:
        s = rope_settings(config, layer_type=row.layer_type)
        where = "" if row.layer_type is None else f" ({row.layer_type})"
        if s.method == "longrope":
            out.append(f"LongRoPE{where} switches from short_factor to long_factor once the input passes L0 = "
                       f"{s.original_max_position} tokens: keys cached before the switch keep the short list's "
                       "angles, so a cache that spans the switch must be recomputed (transformers' generate "
                       "does it once, at the switch)")
        if s.method == "dynamic":
            out.append(f"dynamic NTK{where} raises the base as the input grows past {s.original_max_position} "
                       "tokens: keys already cached keep the base they were rotated with, so a kept cache mixes "
                       "bases")
        if s.method in USES_L0:
            if s.original_max_position_embeddings is None:
                out.append(f"no original_max_position_embeddings{where}: L0 falls back to "
                           f"max_position_embeddings = {s.original_max_position}, as transformers reads it; if "
                           "that is already the extended length, the scaling is anchored to the wrong length")
            elif s.max_position is not None and s.factor and s.factor > 1:
                if s.max_position <= s.original_max_position:
                    out.append(f"max_position_embeddings ({s.max_position}) is L0{where}: the extension to "
                               f"factor x L0 = {int(s.factor * s.original_max_position)} lives only in the rope "
                               "dict, and an engine that caps the context at max_position_embeddings never uses it")
                elif not math.isclose(s.max_position, s.factor * s.original_max_position):
                    out.append(f"max_position_embeddings ({s.max_position}) is "
                               f"{s.max_position / s.original_max_position:g} x L0 but factor is {s.factor:g}"
                               f"{where}: the frequencies follow factor, the context length follows "
                               "max_position_embeddings")
        if s.method == "llama3" and s.options["low_freq_factor"] == s.options["high_freq_factor"]:
            out.append(f"llama3{where} with low_freq_factor = high_freq_factor: no smooth band, a hard step at "
                       f"wavelength L0 / low_freq_factor = {s.original_max_position / s.options['low_freq_factor']:g}")
        if row.attention_factor != 1.0:
            out.append(f"attention factor {row.attention_factor:.4g}{where} multiplies the rotated q and k (scores x"
                       f"{row.attention_factor ** 2:.4g}): apply it once, to q and k alike; an engine that also "
                       "multiplies its own mscale squares it")
        if s.method == "yarn" and s.options.get("mscale") and s.options.get("mscale_all_dim"):
            if cfg.get("qk_rope_head_dim"):
                out.append(f"mscale and mscale_all_dim are both set: the RoPE's attention factor "
                           f"({row.attention_factor:g}) depends on both (it is not mscale / mscale_all_dim), and "
                           "DeepSeek's MLA attention also corrects its softmax scale: both corrections apply")
            else:
                out.append(f"mscale and mscale_all_dim are both set{where}: the RoPE's attention factor "
                           f"({row.attention_factor:g}) depends on both (it is not mscale / mscale_all_dim); the "
                           "softmax correction of DeepSeek's MLA does not apply here (no qk_rope_head_dim)")
        if s.method == "yarn" and s.options.get("truncate") is False:
            out.append(f"YaRN with truncate: false{where}: the ramp's ends stay fractional; an engine that rounds "
                       "them to whole pairs (transformers' default) turns the pairs at the ends of the ramp wrong")
        if s.mrope_section and s.mrope_interleaved:
            out.append(f"interleaved MRoPE{where}: pairs go to the axes t, h, w in turn; a kernel with contiguous "
                       "sections (Qwen2-VL's) gives the same numbers on text tokens and wrong ones on images")
        if s.method == "proportional":
            out.append(f"proportional RoPE{where}: pairs span the whole head of {s.head_dim} features "
                       f"(head_dim/2 frequencies, the last {row.zero_frequency_pairs} zero), not a RoPE of "
                       f"dimension {s.rotary_dim} within the first {s.rotary_dim} features")
        elif s.rotary_dim < s.head_dim:
            out.append(f"partial rotary{where}: only the first {s.rotary_dim} of {s.head_dim} features turn, their "
                       f"pairs laid out within them and theta_j = base^(-2j/{s.rotary_dim}): a kernel must rotate "
                       "rotary_dim features, not head_dim")
    if cfg.get("qk_rope_head_dim"):
        out.append(f"MLA (DeepSeek): the {cfg['qk_rope_head_dim']} rotated features per head are separate "
                   f"(qk_rope_head_dim), last in each head after {cfg.get('qk_nope_head_dim', '?')} unrotated ones, "
                   "and one rotated key is shared by every head")
    if layout is None:
        out.append(f"the pair layout of model_type {model_type!r} is not in posenc_lib's table: check the model's "
                   "code (rotate_half means half, pairs (2j, 2j+1) interleaved) before porting a checkpoint")
    return list(dict.fromkeys(out))


def inspect_config(config: Mapping, *, name: str | None = None) -> ModelRope:
    """Everything chapter 8 reads from a model's config.json, per RoPE (``ModelRope``).

    config: a parsed Hugging Face config.json (either form; a multimodal file's text_config)
    name:   a label for the report (default: the config's model_type)
    returns: ``ModelRope``, with ``.text()`` (what the command line prints) and ``.to_dict()``
             (its --json); raises ValueError naming the field of a malformed config
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict (a parsed config.json), got {type(config).__name__}")
    layout, model_type = pair_layout(config)
    name = name or model_type or "model"
    rows = [rope_row(config, t, name) for t in rope_layer_types(config)]
    return ModelRope(name, model_type, layout, rows, _layers(config, rows), _warnings(config, rows, layout, model_type))


def wavelength_figure(rows: Iterable[RopeRow], *, width: float = 5.2, height: float = 3.6):
    """Chapter 8's wavelength figure: per pair, lambda_j / L0 of the plain RoPE (left) and lambda'_j / L
    as configured (right), the pair index as a fraction of the pairs so heads of any size share the axis.

    rows: ``RopeRow`` objects (``inspect_config(...).rows``, or several models' rows)
    returns: a matplotlib Figure (nothing is shown or saved)
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    from . import viz

    fig, axes = viz.figure(2, width=width, height=height)
    for i, row in enumerate(rows):
        x = (torch.arange(row.pairs) / row.pairs).numpy()
        style = dict(color=f"C{i % 10}", lw=1.2, label=row.label)
        if row.L0 is not None:
            axes[0].plot(x, (2 * math.pi / row.plain / row.L0).cpu().numpy(), **style)
        if row.L is not None:
            axes[1].plot(x, (2 * math.pi / row.inv_freq / row.L).cpu().numpy(), **style)
    for ax, title in zip(axes, ["pretrained: plain RoPE, λ_j / L0", "deployed: as configured, λ'_j / L"]):
        ax.axhline(1, color="black", ls="--", lw=0.8)
        ax.set(yscale="log", xlabel="pair j / (r/2)", ylabel="wavelength / context", title=title)
    models = [line for line in axes[1].get_lines() if not line.get_label().startswith("_")]  # not the dashed line
    axes[0].legend(handles=models, fontsize=6, loc="lower right")  # one legend, every model, in the empty corner
    return fig


# ---------------------------------------------------------------- the command line

def main(argv: Sequence[str] | None = None) -> int:
    """posenc-inspect CONFIG.json [--json] [--plot FILE.png] [--name LABEL]: exit status 0, or 2 with
    one line on standard error for a file that cannot be read or a malformed config."""
    ap = argparse.ArgumentParser(prog="posenc-inspect", description="A model's RoPE from its config.json, as "
                                 "chapter 8 of posenc reads it. Nothing is downloaded: pass a file.")
    ap.add_argument("config", help="a Hugging Face config.json on disk")
    ap.add_argument("--json", action="store_true", help="print the same data as JSON")
    ap.add_argument("--plot", metavar="FILE.png", help="draw chapter 8's wavelength figure for this model")
    ap.add_argument("--name", help="a label for the report (default: the config's model_type)")
    args = ap.parse_args(argv)
    try:
        text = Path(args.config).read_text()
    except OSError as e:
        print(f"posenc-inspect: cannot read {args.config}: {e.strerror or e}", file=sys.stderr)
        return 2
    try:
        config = json.loads(text)
        report = inspect_config(config, name=args.name)
    except json.JSONDecodeError as e:
        print(f"posenc-inspect: {args.config} is not JSON: {e}", file=sys.stderr)
        return 2
    except ValueError as e:
        print(f"posenc-inspect: {args.config}: {e}", file=sys.stderr)
        return 2
    print(json.dumps(report.to_dict(), indent=1) if args.json else report.text())
    if args.plot:
        from . import viz

        viz.use_style()
        wavelength_figure(report.rows).savefig(args.plot, dpi=120, bbox_inches="tight")
    return 0
