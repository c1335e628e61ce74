"""A model's RoPE from its Hugging Face ``config.json``: ``rope_from_config``.

config.json files come in two forms, and both are read as transformers (>= 5) reads them:
  transformers 5  "rope_parameters": {"rope_type": ..., "rope_theta": ..., "factor": ..., ...},
                  or one such dict per layer type, e.g. {"sliding_attention": {...},
                  "full_attention": {...}} (Gemma 3), chosen by ``layer_type``
  older files     top-level "rope_theta" and "partial_rotary_factor", plus "rope_scaling":
                  {"type" or "rope_type": ..., "factor": ..., ...} or null; Gemma 3's
                  "rope_local_base_freq" is the base of its sliding-window layers
Then each rope type is one entry of our ``SCALINGS`` registry:

  rope_type     SCALINGS      L0 = original_max_position is config.json's
  default       "none"        (unused)
  linear        "linear"      (unused)
  dynamic       "dynamic"     max_position_embeddings (transformers' reading)
  yarn          "yarn"        original_max_position_embeddings
  longrope      "longrope"    original_max_position_embeddings   (Phi-3's early name: "su")
  llama3        "llama3"      original_max_position_embeddings
  proportional  "proportional"(unused)

where "original_max_position_embeddings" is read at the top level first (Phi-3 keeps it
there), then in the rope dict, then falls back to max_position_embeddings, as transformers
does. For yarn and longrope a missing "factor" means max_position_embeddings / L0.
One deliberate difference: for per-layer-type yarn, transformers 5 reads "truncate" from
the outer dict (so always True); we read it from the layer's own dict.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from . import _validate as v
from .scaling import scaled_rope_frequencies

# transformers' rope_type -> our SCALINGS key.
ROPE_TYPES = {
    "default": "none",
    "linear": "linear",
    "dynamic": "dynamic",
    "yarn": "yarn",
    "longrope": "longrope",
    "su": "longrope",
    "llama3": "llama3",
    "proportional": "proportional",
    "mrope": "none",  # Qwen2-VL's older files: plain frequencies, split over (t, h, w) by mrope_section
}
DEFAULT_ROPE_THETA = 10000.0  # transformers' default_theta when a config gives none
_ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta")
_SIZE_KEYS = ("qk_rope_head_dim", "head_dim", "hidden_size")
USES_L0 = ("yarn", "longrope", "llama3")  # rope types whose bands or lists are anchored at L0


# The pair layout of each model family's RoPE in transformers, by config.json's model_type
# (tests/test_rope_inspect.py runs each family's own rotation to check its entry):
#   "half"         rotate_half: pair j is features (j, j + r/2)  (GPT-NeoX's form)
#   "interleaved"  pair j is features (2j, 2j + 1)                (RoFormer, Meta's LLaMA code, GPT-J)
# A checkpoint's q/k weights are laid out for one of them (transformers permutes Meta's Llama rows at
# conversion so that rotate_half reproduces Meta's interleaved code); loading them under the other is a bug
# (chapter 5, §6).
PAIR_LAYOUTS = {
    **dict.fromkeys(("llama", "mistral", "mixtral", "ministral", "ministral3", "qwen2", "qwen2_moe", "qwen3",
                     "qwen3_moe", "qwen2_vl", "qwen2_5_vl", "qwen2_5_vl_text", "qwen3_vl", "qwen3_vl_text",
                     "qwen3_next", "qwen3_5", "qwen3_5_text", "qwen3_5_moe", "qwen3_5_moe_text", "gemma", "gemma2",
                     "gemma3", "gemma3_text", "gemma4", "gemma4_text", "phi", "phi3", "gpt_neox", "gpt_oss", "olmo",
                     "olmo2", "starcoder2", "granite", "smollm3", "dbrx", "nemotron", "glm4_moe", "hunyuan_v1_dense",
                     "hunyuan_v1_moe"), "half"),
    # DeepSeek-V3 follows its config's rope_interleave (true unless the file says otherwise)
    **dict.fromkeys(("deepseek_v2", "deepseek_v3", "deepseek_v32", "llama4", "llama4_text", "gptj", "cohere",
                     "cohere2", "glm", "glm4", "helium", "ernie4_5"), "interleaved"),
}
_ARCHITECTURE_SUFFIXES = ("ForCausalLM", "ForConditionalGeneration", "Model")


def _family_of_architecture(name: object) -> str | None:
    """The PAIR_LAYOUTS model_type whose transformers class an `architectures` entry names
    (DeepseekV3ForCausalLM -> deepseek_v3: the class prefix is the model_type without underscores)."""
    if not isinstance(name, str):
        return None
    stem = next((name[: -len(s)] for s in _ARCHITECTURE_SUFFIXES if name.endswith(s)), name).lower()
    return next((t for t in PAIR_LAYOUTS if t.replace("_", "") == stem), None)


def pair_layout(config: Mapping) -> tuple[str | None, str | None]:
    """(layout, model_type) of a config's model family from ``PAIR_LAYOUTS``; (None, model_type) if unknown.

    The text config's model_type is read first (a multimodal config names its language model there),
    then the classes `architectures` names (a custom model_type such as Kimi K2's "kimi_k2" runs
    transformers' DeepseekV3ForCausalLM); model_type is returned as the file states it.
    """
    cfg = text_config(config)
    stated = cfg.get("model_type") or config.get("model_type")
    families = [cfg.get("model_type"), config.get("model_type")]
    families += [_family_of_architecture(a) for c in (cfg, config) for a in (c.get("architectures") or [])]
    for family in families:
        if family in PAIR_LAYOUTS:
            if family == "deepseek_v3" and cfg.get("rope_interleave") is False:
                return "half", stated
            return PAIR_LAYOUTS[family], stated
    return None, stated


def text_config(config: object) -> Mapping:
    """The dict holding the language model's settings: the config itself, or a
    multimodal config's "text_config" (Gemma 3 4B+, Llama 4), when the top level has no RoPE or size keys."""
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict (a parsed config.json), got {type(config).__name__}")
    inner = config.get("text_config")
    if isinstance(inner, Mapping) and not any(k in config for k in _ROPE_KEYS + _SIZE_KEYS):
        return text_config(inner)
    return config


def _rope_dicts(cfg: Mapping) -> tuple[dict | None, bool]:
    """(the rope dict, whether it is nested by layer type)."""
    raw = cfg.get("rope_scaling") or cfg.get("rope_parameters") or {}  # rope_scaling wins, as in transformers
    if not isinstance(raw, Mapping):
        raise ValueError(f"rope_parameters / rope_scaling must be a dict or null, got {raw!r}")
    if any(isinstance(value, Mapping) for value in raw.values()):
        return {k: val for k, val in raw.items() if isinstance(val, Mapping) or val is None}, True
    if "rope_local_base_freq" in cfg:  # Gemma 3's older files: the scaling applies to global layers only
        local = {"rope_type": "default", "rope_theta": cfg["rope_local_base_freq"]}
        return {"sliding_attention": local, "full_attention": dict(raw)}, True
    return dict(raw), False


def rope_layer_types(config: Mapping) -> list[str | None]:
    """The layer types that have a RoPE of their own, for ``layer_type=``; [None]: one RoPE for every layer.

    Per-layer rope dicts (transformers 5), or Gemma 3's older rope_local_base_freq (sliding layers);
    a layer type whose dict is null has no RoPE and is left out.
    """
    params, nested = _rope_dicts(text_config(config))
    return [k for k, x in params.items() if x is not None] if nested else [None]


def _layer_params(cfg: Mapping, layer_type: str | None) -> tuple[dict, bool]:
    """The rope dict that applies to ``layer_type``, with the top-level defaults filled in."""
    params, nested = _rope_dicts(cfg)
    if nested:
        if layer_type not in params:
            raise ValueError(f"layer_type must be one of {tuple(params)} for this config's per-layer RoPE, "
                             f"got {layer_type!r}")
        if params[layer_type] is None:
            raise ValueError(f"layer_type {layer_type!r} has no RoPE in this config (its rope dict is null)")
        params = dict(params[layer_type])
    elif layer_type is not None and layer_type not in cfg.get("layer_types", [layer_type]):
        raise ValueError(f"layer_type must be one of {tuple(dict.fromkeys(cfg['layer_types']))}, got {layer_type!r}")
    params.setdefault("rope_theta", cfg.get("rope_theta", DEFAULT_ROPE_THETA))
    if cfg.get("partial_rotary_factor") is not None:
        params.setdefault("partial_rotary_factor", cfg["partial_rotary_factor"])
    params.setdefault("rope_type", params.get("type", "default"))
    return params, nested


def _head_dim(cfg: Mapping, layer_type: str | None) -> int:
    """Features per head that RoPE sees, before partial_rotary_factor."""
    if layer_type == "full_attention" and cfg.get("global_head_dim"):  # Gemma 4's wider global heads
        return v.int_at_least("global_head_dim", cfg["global_head_dim"], 1)
    for key in ("qk_rope_head_dim", "head_dim"):  # DeepSeek's MLA rotates qk_rope_head_dim features only
        if cfg.get(key):
            return v.int_at_least(key, cfg[key], 1)
    if cfg.get("hidden_size") and cfg.get("num_attention_heads"):
        hidden = v.int_at_least("hidden_size", cfg["hidden_size"], 1)
        return hidden // v.int_at_least("num_attention_heads", cfg["num_attention_heads"], 1)
    raise ValueError("config needs a head dimension: 'head_dim', or 'hidden_size' and 'num_attention_heads'")


def _required(params: Mapping, key: str, rope_type: str) -> object:
    if params.get(key) is None:
        raise ValueError(f"rope_type {rope_type!r} needs the key {key!r} in rope_parameters / rope_scaling")
    return params[key]


def _max_position(cfg: Mapping) -> int:
    if cfg.get("max_position_embeddings") is None:
        raise ValueError("this rope type needs the key 'max_position_embeddings' in the config")
    return v.int_at_least("max_position_embeddings", cfg["max_position_embeddings"], 1)


def _stated_original_max_position(cfg: Mapping, params: Mapping, nested: bool) -> int | None:
    """The file's original_max_position_embeddings: transformers moves a top-level value (Phi-3) into
    the rope dict, overriding it. None if the file has none."""
    key = "original_max_position_embeddings"
    value = cfg.get(key) if not nested and cfg.get(key) is not None else params.get(key)
    return None if value is None else v.int_at_least(key, value, 1)


def _original_max_position(cfg: Mapping, params: Mapping, nested: bool) -> int:
    """L0 as yarn, longrope and llama3 read it: the file's value, else max_position_embeddings."""
    stated = _stated_original_max_position(cfg, params, nested)
    return _max_position(cfg) if stated is None else stated


# Keys of a rope dict that this module reads for each rope type (below), and keys any rope dict
# may carry that leave the frequencies alone: the layout of MRoPE, Ministral 3's query scaling
# (rope_layers.query_scalings reads it), names, and L0 where the type does not read it.
_READS = {
    "default": {"factor"},  # transformers ignores a factor here too
    "mrope": {"factor"},
    "linear": {"factor"},
    "dynamic": {"factor", "alpha"},
    "yarn": {"factor", "original_max_position_embeddings", "beta_fast", "beta_slow", "truncate", "attention_factor",
             "mscale", "mscale_all_dim"},
    "longrope": {"factor", "original_max_position_embeddings", "short_factor", "long_factor", "attention_factor"},
    "llama3": {"factor", "original_max_position_embeddings", "low_freq_factor", "high_freq_factor"},
    "proportional": {"factor"},
}
_READS["su"] = _READS["longrope"]
_HARMLESS = {"rope_type", "type", "rope_theta", "partial_rotary_factor", "mrope_section", "mrope_interleaved",
             "llama_4_scaling_beta", "original_max_position_embeddings"}


def _refuse_unknown_keys(rope_type: str, params: Mapping) -> None:
    """A key that could change the frequencies and that this reader does not understand is refused:
    ignoring it would report frequencies the model does not use."""
    unknown = sorted(set(params) - _READS[rope_type] - _HARMLESS)
    if unknown:
        raise ValueError(f"rope_parameters / rope_scaling key {unknown[0]!r} is not understood for rope_type "
                         f"{rope_type!r} (it reads {sorted(_READS[rope_type] - {'rope_type'})}): it may change "
                         "the frequencies, so nothing is reported rather than frequencies the model may not use")


def _options(rope_type: str, params: Mapping) -> dict[str, object]:
    """The method options of scaled_rope_frequencies that this rope dict sets."""
    if rope_type == "llama3":
        return {k: _required(params, k, rope_type) for k in ("low_freq_factor", "high_freq_factor")}
    if rope_type in ("longrope", "su"):
        opts = {k: _required(params, k, rope_type) for k in ("short_factor", "long_factor")}
        return opts | _present(params, ("attention_factor",))
    if rope_type == "yarn":
        # beta_fast / beta_slow: null or 0 mean the defaults, as transformers reads them.
        betas = {k: params[k] for k in ("beta_fast", "beta_slow") if params.get(k)}
        return betas | _present(params, ("truncate", "attention_factor", "mscale", "mscale_all_dim"))
    return {}


def _present(params: Mapping, keys: tuple[str, ...]) -> dict[str, object]:
    return {k: params[k] for k in keys if params.get(k) is not None}


@dataclass(frozen=True)
class RopeSettings:
    """One layer type's RoPE as a config.json states it, read and checked (``rope_settings``).

    rope_type:  config.json's name ("default", "llama3", "yarn", ...; "su" and "mrope" as written)
    method:     the ``SCALINGS`` key that computes it
    base:       rope_theta (Gemma 3's older files: rope_local_base_freq for sliding layers)
    head_dim:   features per head RoPE sees (qk_rope_head_dim for DeepSeek's MLA, global_head_dim for
                Gemma 4's full layers)
    partial_rotary_factor: p; rotary_dim = int(head_dim * p) features turn
    rotary_dim: r, the rotated features: pairs laid out within the first r ("proportional": within the
                whole head, whose pairs past r/2 have frequency 0)
    factor:     s, or None for "max_position_embeddings / L0" (yarn, longrope without a factor)
    original_max_position: L0 as the method reads it (None where the method does not read it)
    max_position: max_position_embeddings (None if absent)
    mrope_section: pairs per axis (t, h, w) of a multimodal RoPE (Qwen2-VL), or None
    mrope_interleaved: Qwen3-VL's round-robin allocation of those pairs
    options:    the method's own keys (llama3's band factors, LongRoPE's lists, YaRN's betas, ...)
    original_max_position_embeddings: the file's own value (top level first, then the rope dict), or None
    Taught in: notebooks/08_rope_in_models.ipynb
    """

    rope_type: str
    method: str
    base: float
    head_dim: int
    partial_rotary_factor: float
    rotary_dim: int
    factor: float | None
    original_max_position: int | None
    max_position: int | None
    mrope_section: tuple[int, ...] | None
    mrope_interleaved: bool
    options: Mapping[str, object]
    original_max_position_embeddings: int | None = None  # as the file states it (None if absent)

    @property
    def pairs(self) -> int:
        """Entries of inv_freq: r/2, or head_dim/2 for "proportional" (the zero-frequency pairs included)."""
        return (self.head_dim if self.method == "proportional" else self.rotary_dim) // 2

    def frequencies(
        self,
        seq_len: int | None = None,
        *,
        device: torch.device | str | None = None,
        dtype: torch.dtype = torch.float32,
    ) -> tuple[Tensor, float]:
        """(inv_freq (pairs,), attention_factor) at the current length seq_len ("dynamic", "longrope")."""
        d = self.head_dim if self.method == "proportional" else self.rotary_dim
        options = dict(self.options)
        if self.method == "proportional":
            options["partial_rotary_factor"] = self.partial_rotary_factor
        return scaled_rope_frequencies(
            d, method=self.method, factor=self.factor, base=self.base,
            original_max_position=self.original_max_position or 2048,  # read only by the methods that set it
            seq_len=seq_len, device=device, dtype=dtype, max_position=self.max_position, **options,
        )

    def unscaled(self) -> RopeSettings:
        """The same RoPE without context extension: plain frequencies (proportional keeps its zeros)."""
        method = "proportional" if self.method == "proportional" else "none"
        return replace(self, rope_type="default", method=method, factor=1.0, original_max_position=None, options={})


def _mrope(params: Mapping) -> tuple[tuple[int, ...] | None, bool]:
    section = params.get("mrope_section")
    if section is None:
        return None, False
    if isinstance(section, (str, bytes)) or not isinstance(section, (list, tuple)) or not section:
        raise ValueError(f"mrope_section must be a list of pair counts (t, h, w), got {section!r}")
    counts = tuple(v.int_at_least("every entry of mrope_section", s, 1) for s in section)
    return counts, bool(params.get("mrope_interleaved", False))


def rope_settings(config: Mapping, *, layer_type: str | None = None) -> RopeSettings:
    """The RoPE settings of one layer type of a model, read from its Hugging Face config.json.

    config, layer_type: as in ``rope_from_config`` (which is ``rope_settings(...).frequencies(seq_len)``)
    Raises ValueError naming the key for a missing head dimension, an unknown rope type, a missing
    required key, and values out of range.
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    cfg = text_config(config)
    params, nested = _layer_params(cfg, layer_type)
    rope_type = v.one_of("rope_type", params["rope_type"], ROPE_TYPES)
    _refuse_unknown_keys(rope_type, params)
    method = ROPE_TYPES[rope_type]
    if rope_type == "dynamic" and params.get("alpha") is not None:
        # HunYuan's files say "dynamic" with a fixed alpha: an NTK-aware base, base * alpha^(d/(d-2)),
        # the same at every length (transformers' HunYuan code reads it so; "ntk" in SCALINGS)
        method, params = "ntk", {**params, "factor": v.finite_number("alpha", params["alpha"], at_least=1)}
    head_dim = _head_dim(cfg, layer_type)
    base = v.finite_number("rope_theta", params["rope_theta"], above=1)
    p = v.finite_number("partial_rotary_factor", params.get("partial_rotary_factor", 1.0), above=0)
    if p > 1:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {p}")
    options = _options(rope_type, params)
    r = int(head_dim * p)
    if method != "proportional" and (r < 2 or r % 2):
        raise ValueError(f"partial_rotary_factor={p} with head dim {head_dim} gives {r} rotated features; "
                         "it must be even and >= 2")
    if method in ("none", "proportional"):
        factor = params.get("factor") or 1.0 if method == "proportional" else 1.0
    elif method in ("yarn", "longrope"):
        factor = params.get("factor")  # None: max_position_embeddings / L0
    else:
        factor = _required(params, "factor", rope_type)
    L0 = None
    if method in USES_L0:
        L0 = _original_max_position(cfg, params, nested)
    elif method == "dynamic":
        L0 = _max_position(cfg)
    max_position = None
    if cfg.get("max_position_embeddings") is not None:
        max_position = _max_position(cfg)
    if factor is None:
        max_position = _max_position(cfg)
        if max_position < L0:
            raise ValueError(f"without a 'factor', max_position_embeddings ({max_position}) must be at least "
                             f"original_max_position_embeddings ({L0}): the factor is their ratio")
    section, interleaved = _mrope(params)
    if section is not None and sum(section) != r // 2:
        raise ValueError(f"mrope_section must sum to the rotated pairs r/2 = {r // 2}, got {list(section)}")
    stated = _stated_original_max_position(cfg, params, nested)
    settings = RopeSettings(rope_type, method, base, head_dim, p, r, factor, L0, max_position, section,
                            interleaved, options, stated)
    settings.frequencies()  # the method checks its own options (list lengths, band factors) now, not later
    return settings


def rope_from_config(
    config: Mapping,
    *,
    layer_type: str | None = None,
    seq_len: int | None = None,
    device: torch.device | str | None = None,
) -> tuple[Tensor, float]:
    """The RoPE of a model from its Hugging Face config.json: (inv_freq, attention_factor).

    config:     the parsed config.json (either form, see the module docstring; a multimodal
                config's "text_config" is used when the top level has no RoPE settings)
    layer_type: for per-layer-type RoPE (e.g. "sliding_attention", "full_attention")
    seq_len:    current length, for "dynamic" and "longrope" (None: as at start-up)
    returns:    inv_freq float32 on ``device``, of r/2 entries where r = int(head_dim * p)
                with p = partial_rotary_factor (1 if absent): the frequencies of a RoPE of
                dimension r, for ``apply_rope(x, inv_freq=..., rotary_dim=r,
                attention_factor=...)``. For "proportional", head_dim/2 entries, of which
                those past int(p * head_dim) // 2 are 0. Equal to transformers'
                ``ROPE_INIT_FUNCTIONS`` (and its default computation) for every rope type.
    Raises ValueError naming the key for a missing head dimension, an unknown rope type,
    a missing required key, factor lists of the wrong length, and values out of range.
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    return rope_settings(config, layer_type=layer_type).frequencies(seq_len, device=device)
