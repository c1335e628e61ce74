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
}
DEFAULT_ROPE_THETA = 10000.0  # transformers' default_theta when a config gives none
_ROPE_KEYS = ("rope_parameters", "rope_scaling", "rope_theta")
_SIZE_KEYS = ("qk_rope_head_dim", "head_dim", "hidden_size")
_USES_L0 = ("yarn", "longrope", "llama3")


def _text_config(config: object) -> Mapping:
    """The dict holding the language model's settings: the config itself, or a
    multimodal config's "text_config" (Gemma 3 4B+, Llama 4)."""
    if not isinstance(config, Mapping):
        raise ValueError(f"config must be a dict (a parsed config.json), got {type(config).__name__}")
    inner = config.get("text_config")
    if isinstance(inner, Mapping) and not any(k in config for k in _ROPE_KEYS + _SIZE_KEYS):
        return _text_config(inner)
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
        return {"full_attention": dict(raw), "sliding_attention": local}, True
    return dict(raw), False


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


def _original_max_position(cfg: Mapping, params: Mapping, nested: bool) -> int:
    """L0: transformers moves a top-level value (Phi-3) into the rope dict, overriding it."""
    key = "original_max_position_embeddings"
    value = cfg.get(key) if not nested and cfg.get(key) is not None else params.get(key)
    return _max_position(cfg) if value is None else v.int_at_least(key, value, 1)


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
    cfg = _text_config(config)
    params, nested = _layer_params(cfg, layer_type)
    rope_type = v.one_of("rope_type", params["rope_type"], ROPE_TYPES)
    method = ROPE_TYPES[rope_type]
    head_dim = _head_dim(cfg, layer_type)
    base = v.finite_number("rope_theta", params["rope_theta"], above=1)
    p = v.finite_number("partial_rotary_factor", params.get("partial_rotary_factor", 1.0), above=0)
    if p > 1:
        raise ValueError(f"partial_rotary_factor must be in (0, 1], got {p}")
    options = _options(rope_type, params)
    if method == "proportional":
        d, options = head_dim, {"partial_rotary_factor": p}
    else:
        d = int(head_dim * p)
        if d < 2 or d % 2:
            raise ValueError(f"partial_rotary_factor={p} with head dim {head_dim} gives {d} rotated features; "
                             "it must be even and >= 2")
    if method in ("none", "proportional"):
        factor = params.get("factor") or 1.0 if method == "proportional" else 1.0
    elif method in ("yarn", "longrope"):
        factor = params.get("factor")  # None: max_position_embeddings / L0
    else:
        factor = _required(params, "factor", rope_type)
    L0 = 2048  # read by no method outside the two branches below
    if method in _USES_L0:
        L0 = _original_max_position(cfg, params, nested)
    elif method == "dynamic":
        L0 = _max_position(cfg)
    max_position = None
    if factor is None:
        max_position = _max_position(cfg)
        if max_position < L0:
            raise ValueError(f"without a 'factor', max_position_embeddings ({max_position}) must be at least "
                             f"original_max_position_embeddings ({L0}): the factor is their ratio")
    return scaled_rope_frequencies(
        d, method=method, factor=factor, base=base, original_max_position=L0, seq_len=seq_len,
        device=device, max_position=max_position, **options,
    )
