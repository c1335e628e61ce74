"""Which layers of a model turn which RoPE, from its config.json: ``layer_plan``, ``query_scalings``.

A config rarely lists its layers outright. transformers derives the list ``layer_types`` from
older keys, family by family, and the attention code then decides which layers rotate q and k;
this module follows both, so a report never says "every layer uses the same RoPE" of a model
whose layers differ:
  layer_types             as written, when the file has it (Gemma 3, GPT-OSS, SmolLM3, ...)
  full_attention_interval every n-th layer full attention, the others linear attention (Gated
                          DeltaNet), which has no RoPE (Qwen3-Next, Qwen3.5; default 4)
  sliding_window_pattern  every n-th layer full attention, the others sliding-window attention
                          (Gemma 3: default 6; Cohere2 / Command R7B: default 4, and its full
                          layers have no RoPE)
  alternating             Gemma 2, GPT-OSS, Ministral: sliding and full attention take turns
  use_sliding_window      Qwen2 / Qwen3: a window only when true, on layers >= max_window_layers
  no_rope_layers          1 = the layer turns q and k, 0 = NoPE (Llama 4, SmolLM3); empty or
                          absent: every no_rope_layer_interval-th layer (default 4) is NoPE
  sliding_window          every layer of the other families (Mistral, Phi-3, StarCoder2), when set
A window that covers the whole context changes nothing; the plan says so instead of calling the
model windowed. ``query_scalings`` names what multiplies a layer's queries besides RoPE: Llama 4's
temperature on its NoPE layers and Ministral 3's ``llama_4_scaling_beta`` on every layer.
Names: L0 = original_max_position_embeddings.
"""
from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from . import _validate as v
from .rope_config import rope_layer_types, text_config

_INTERVAL_FAMILIES = ("qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text")
_PATTERN_DEFAULT = {"gemma3": 6, "gemma3_text": 6, "cohere2": 4}
_ALTERNATING = ("gemma2", "gpt_oss", "ministral")
_USE_SLIDING = ("qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "qwen2_5_vl", "qwen2_5_vl_text", "qwen2_vl",
                "qwen2_vl_text", "smollm3")
_NO_ROPE_FAMILIES = ("llama4", "llama4_text", "smollm3")
_NOPE_FULL_LAYERS = ("cohere2",)  # full-attention layers skip RoPE (only the sliding ones turn q and k)


@dataclass(frozen=True)
class LayerPlan:
    """Every layer of a model: its attention, whether it turns q and k, and with which RoPE.

    attention:  per layer, transformers' layer_types entry ("full_attention", "sliding_attention",
                "linear_attention", "chunked_attention"); all "full_attention" when nothing says otherwise
    rope:       per layer, the RoPE it turns q and k with: a key of the config's per-layer rope dicts
                ("sliding_attention", ...), "rope" for the model's only RoPE, or None (NoPE, linear attention)
    derived_from: the keys the plan was read from (for the report)
    sliding_window: the window of the sliding layers, or None where no layer has an effective one
    window_note: why a window in the file is not used ("use_sliding_window is false", "covers the context")
    """

    attention: tuple[str, ...]
    rope: tuple[str | None, ...]
    derived_from: str
    sliding_window: int | None
    window_note: str | None
    attention_chunk_size: int | None

    @property
    def num_layers(self) -> int:
        return len(self.attention)

    def layers_with(self, rope: str | None) -> list[int]:
        return [i for i, r in enumerate(self.rope) if r == rope]

    def summary(self) -> str:
        """One line: how many layers of each kind, which have no RoPE, and where it comes from."""
        if not self.attention:
            return f"num_hidden_layers is not in the file, so no layer is listed [{self.derived_from}]"
        kinds = Counter(zip(self.attention, self.rope))
        if len(kinds) == 1:
            ((attention, rope),) = kinds
            how = "" if self.derived_from == "one kind of layer" else f" [{self.derived_from}]"
            return f"{self.num_layers} layers, all {attention} {_turns(rope)}{how}"
        parts = []
        largest = max(kinds, key=lambda kind: kinds[kind])
        for kind, n in kinds.items():
            where = [i for i, pair in enumerate(zip(self.attention, self.rope)) if pair == kind]
            listed = "the others" if kind == largest else index_ranges(where)
            parts.append(f"{n} {kind[0]} {_turns(kind[1])} ({listed})")
        return f"{self.num_layers} layers: " + "; ".join(parts) + f" [{self.derived_from}]"


def _turns(rope: str | None) -> str:
    return "without RoPE" if rope is None else "with RoPE" if rope == "rope" else f"with the {rope} RoPE"


def index_ranges(indices: Sequence[int]) -> str:
    """'layers 3, 7, ..., 47: every 4th' for an arithmetic run, else the list."""
    if len(indices) > 2 and len({b - a for a, b in zip(indices, indices[1:])}) == 1:
        step = indices[1] - indices[0]
        return f"layers {indices[0]}, {indices[1]}, ..., {indices[-1]}: every {step}{_ordinal(step)}"
    return "layer" + ("s " if len(indices) != 1 else " ") + ", ".join(map(str, indices))


def _ordinal(n: int) -> str:
    return {1: "st", 2: "nd", 3: "rd"}.get(n if n < 20 else n % 10, "th")


def _count(cfg: Mapping) -> int | None:
    n = cfg.get("num_hidden_layers")
    return None if n is None else v.int_at_least("num_hidden_layers", n, 1)


def _no_rope_flags(cfg: Mapping, family: str | None, n: int | None) -> list[int] | None:
    """no_rope_layers as transformers fills it in: empty or absent means every interval-th layer is NoPE."""
    flags = cfg.get("no_rope_layers")
    if family not in _NO_ROPE_FAMILIES and not flags:
        return None
    if not flags:
        if n is None:
            return None
        every = v.int_at_least("no_rope_layer_interval", cfg.get("no_rope_layer_interval", 4), 1)
        return [int((i + 1) % every != 0) for i in range(n)]
    if not isinstance(flags, Sequence) or any(f not in (0, 1) for f in flags) or (n is not None and len(flags) != n):
        raise ValueError(f"no_rope_layers must be a list of num_hidden_layers = {n} flags (1: RoPE, 0: NoPE), "
                         f"got {flags!r}")
    return [int(f) for f in flags]


def _attention(cfg: Mapping, family: str | None, n: int | None, flags: list[int] | None) -> tuple[list[str], str]:
    """(layer_types, the keys they come from), as the family's transformers config derives them."""
    types = cfg.get("layer_types")
    if types:
        if isinstance(types, str) or not isinstance(types, Sequence) or (n is not None and len(types) != n):
            raise ValueError(f"layer_types must be a list of num_hidden_layers = {n} names, got {types!r}")
        return list(types), "layer_types"
    if family in _INTERVAL_FAMILIES:
        every = v.int_at_least("full_attention_interval", cfg.get("full_attention_interval", 4), 1)
        return (["full_attention" if (i + 1) % every == 0 else "linear_attention" for i in range(n)],
                f"full_attention_interval {every}")
    if family in _PATTERN_DEFAULT:
        every = v.int_at_least("sliding_window_pattern", cfg.get("sliding_window_pattern", _PATTERN_DEFAULT[family]), 1)
        return (["full_attention" if (i + 1) % every == 0 else "sliding_attention" for i in range(n)],
                f"sliding_window_pattern {every}")
    if family in _ALTERNATING:
        if family == "ministral" and not cfg.get("sliding_window"):
            return ["full_attention"] * n, "no sliding_window"
        return ["sliding_attention" if (i + 1) % 2 else "full_attention" for i in range(n)], "alternating"
    if family in ("llama4", "llama4_text"):
        chunk = cfg.get("attention_chunk_size")
        return (["chunked_attention" if f and chunk else "full_attention" for f in flags][:n],
                "no_rope_layers" + (" and attention_chunk_size" if chunk else ""))
    if family in _USE_SLIDING:
        windowed = bool(cfg.get("use_sliding_window")) and cfg.get("sliding_window") is not None
        if family == "smollm3":  # its window goes to the NoPE layers only
            return (["sliding_attention" if windowed and not f else "full_attention" for f in flags],
                    "no_rope_layers and use_sliding_window")
        first = int(cfg.get("max_window_layers", 28))
        return (["sliding_attention" if windowed and i >= first else "full_attention" for i in range(n)],
                "use_sliding_window" + (f" from layer {first}" if windowed else " false"))
    if cfg.get("sliding_window"):
        return ["sliding_attention"] * n, "sliding_window on every layer"
    return ["full_attention"] * n, "one kind of layer"


def layer_plan(config: Mapping) -> LayerPlan:
    """Every layer's attention and RoPE, as transformers derives them from the config (module docstring).

    config: a parsed Hugging Face config.json (a multimodal file's text_config is read)
    returns: ``LayerPlan``; raises ValueError naming the key of a malformed entry
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    cfg = text_config(config)
    family = cfg.get("model_type") or config.get("model_type")
    n = _count(cfg)
    if n is None:  # a file that lists its layers gives their number
        listed = cfg.get("layer_types") or cfg.get("no_rope_layers")
        n = len(listed) if isinstance(listed, Sequence) and not isinstance(listed, str) and listed else None
    flags = _no_rope_flags(cfg, family, n)
    attention, derived = _attention(cfg, family, n or 0, flags or [])
    if n is None and attention:
        n = len(attention)
    if flags is not None and attention and len(flags) != len(attention):
        raise ValueError(f"no_rope_layers must have one flag per layer ({len(attention)}), got {len(flags)}")
    ropes = [t for t in rope_layer_types(config) if t is not None]
    rope = []
    for i, kind in enumerate(attention):
        if kind == "linear_attention" or (flags is not None and not flags[i]) or (
                family in _NOPE_FULL_LAYERS and kind == "full_attention"):
            rope.append(None)
        elif ropes:
            key = kind if kind in ropes else ("full_attention" if "full_attention" in ropes else ropes[0])
            rope.append(key)
        else:
            rope.append("rope")
    if flags is not None and "no_rope_layers" not in derived:
        derived += ", no_rope_layers"
    if family in _NOPE_FULL_LAYERS:
        derived += "; its full-attention layers skip RoPE"
    window, note = None, None
    raw = cfg.get("sliding_window")
    windowed = "sliding_attention" in attention or (not attention and (family in _PATTERN_DEFAULT or family in _ALTERNATING))
    if raw and windowed:
        window = v.int_at_least("sliding_window", raw, 1)
        context = cfg.get("max_position_embeddings")
        if context is not None and window >= int(context):
            window, note = None, (f"sliding_window {raw} covers the whole context (max_position_embeddings "
                                  f"{context}): no layer attends within a smaller window")
    elif raw:
        note = (f"sliding_window {raw} in the file is not used "
                + ("(use_sliding_window is false)" if family in _USE_SLIDING else "(no sliding layers)"))
    chunk = cfg.get("attention_chunk_size")
    chunk = v.int_at_least("attention_chunk_size", chunk, 1) if chunk else None
    return LayerPlan(tuple(attention), tuple(rope), derived, window, note, chunk)


@dataclass(frozen=True)
class QueryScaling:
    """A factor on the queries that grows with the position, besides RoPE: s(m) = 1 + beta ln(1 + floor((m + shift) / step))."""

    name: str
    beta: float
    step: int
    shift: int  # Llama 4 counts position + 1, Ministral 3 the position itself
    layers: str  # which layers apply it
    source: str  # the config keys

    def at(self, position: int) -> float:
        return 1 + self.beta * math.log1p((position + self.shift) // self.step)

    def words(self, context: int | None) -> str:
        grows = f"1 up to position {self.step - 1 - self.shift}" + (
            f", {self.at(context - 1):.3f} at position {context - 1}" if context else "")
        m = "(m + 1)" if self.shift else "m"
        return (f"{self.name} on {self.layers}: queries x (1 + {self.beta:g} ln(1 + floor({m} / {self.step}))), "
                f"{grows} [{self.source}]")

    def to_dict(self) -> dict:
        return {"name": self.name, "beta": self.beta, "step": self.step, "shift": self.shift, "layers": self.layers,
                "source": self.source}


def query_scalings(config: Mapping) -> list[QueryScaling]:
    """What multiplies the queries besides RoPE: Llama 4's attention temperature on its NoPE layers
    (attn_temperature_tuning, floor_scale, attn_scale) and Ministral 3's llama_4_scaling_beta
    (rope dict; step L0) on every layer. Scores grow by the same factor: it is not a RoPE attention factor."""
    cfg = text_config(config)
    out = []
    plan = layer_plan(config)
    if cfg.get("attn_temperature_tuning") and (plan.layers_with(None) or not plan.attention):
        out.append(QueryScaling("attention temperature", v.finite_number("attn_scale", cfg.get("attn_scale", 0.1)),
                                v.int_at_least("floor_scale", cfg.get("floor_scale", 8192), 1), 1,
                                "the NoPE layers", "attn_temperature_tuning, floor_scale, attn_scale"))
    dicts = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    for params in ([dicts] if not any(isinstance(x, Mapping) for x in dicts.values()) else dicts.values()):
        if isinstance(params, Mapping) and params.get("llama_4_scaling_beta"):
            L0 = params.get("original_max_position_embeddings") or cfg.get("original_max_position_embeddings")
            if L0 is None:
                raise ValueError("llama_4_scaling_beta needs original_max_position_embeddings: its step is L0")
            out.append(QueryScaling("Llama 4 scaling (llama_4_scaling_beta)",
                                    v.finite_number("llama_4_scaling_beta", params["llama_4_scaling_beta"]),
                                    v.int_at_least("original_max_position_embeddings", L0, 1), 0, "every layer",
                                    "rope dict: llama_4_scaling_beta, step original_max_position_embeddings"))
            break
    return out
