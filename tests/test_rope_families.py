"""What inspect says about every model family the issue names, from released config.json files
(tests/data/configs, sources in tests/data/configs/SOURCES.md): layers, pair layout, context, scalings.
The expected values are read off the files and the families' published structure, not computed by
posenc_lib; the layer plans are cross-checked against the layer_types transformers derives (offline)."""
import json
import math
from pathlib import Path

import pytest
import torch

from posenc_lib.rope_config import rope_from_config
from posenc_lib.rope_inspect import inspect_config, main
from posenc_lib.rope_layers import layer_plan, query_scalings

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"


def load(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


# file: (layout, [(layer_type, rope_type, base, rotary_dim, head_dim, L0, context, factor x L0)], layers summary start,
#        RoPE layers, layers without RoPE, sliding window, MRoPE style)
FAMILIES = {
    "llama3.1-8b": ("half", [(None, "llama3", 5e5, 128, 128, 8192, 131072, 65536)], 32, 0, None, None),
    "llama3.2-3b": ("half", [(None, "llama3", 5e5, 128, 128, 8192, 131072, 262144)], 28, 0, None, None),
    "llama4-scout-instruct": ("interleaved", [(None, "llama3", 5e5, 128, 128, 8192, 10485760, 131072)], 36, 12, None,
                              None),
    "qwen2.5-7b": ("half", [(None, "default", 1e6, 128, 128, None, 131072, None)], 28, 0, None, None),
    "qwen3-8b": ("half", [(None, "default", 1e6, 128, 128, None, 40960, None)], 36, 0, None, None),
    "qwen3-next-80b-a3b": ("half", [(None, "default", 1e7, 64, 256, None, 262144, None)], 12, 36, None, None),
    "qwen3.5-35b-a3b": ("half", [(None, "default", 1e7, 64, 256, None, 262144, None)], 10, 30, None, "interleaved"),
    "qwen2.5-vl-7b": ("half", [(None, "default", 1e6, 128, 128, None, 128000, None)], 28, 0, None, "contiguous"),
    "qwen3-vl-2b": ("half", [(None, "default", 5e6, 128, 128, None, 262144, None)], 28, 0, None, "interleaved"),
    "deepseek-v2-lite": ("interleaved", [(None, "yarn", 1e4, 64, 64, 4096, 163840, None)], 27, 0, None, None),
    "deepseek-v3": ("interleaved", [(None, "yarn", 1e4, 64, 64, 4096, 163840, None)], None, None, None, None),
    "deepseek-v3.2": ("interleaved", [(None, "yarn", 1e4, 64, 64, 4096, 163840, None)], 61, 0, None, None),
    "kimi-k2": ("interleaved", [(None, "yarn", 5e4, 64, 64, 4096, 262144, None)], 61, 0, None, None),
    "glm4.5-air": ("half", [(None, "default", 1e6, 64, 128, None, 131072, None)], 46, 0, None, None),
    "gpt-oss-20b": ("half", [(None, "yarn", 1.5e5, 64, 64, 4096, 131072, None)], 24, 0, 128, None),
    "phi3-mini-128k": ("half", [(None, "longrope", 1e4, 96, 96, 4096, 131072, None)], None, None, None, None),
    "phi3.5-mini": ("half", [(None, "longrope", 1e4, 96, 96, 4096, 131072, None)], 32, 0, None, None),
    "phi4-mini": ("half", [(None, "longrope", 1e4, 96, 128, 4096, 131072, None)], 32, 0, None, None),
    "gemma2-9b": ("half", [(None, "default", 1e4, 256, 256, None, 8192, None)], 42, 0, 4096, None),
    "gemma3-1b": ("half", [("sliding_attention", "default", 1e4, 256, 256, None, 32768, None),
                           ("full_attention", "default", 1e6, 256, 256, None, 32768, None)], 26, 0, 512, None),
    "gemma3-4b": ("half", [("sliding_attention", "default", 1e4, 256, 256, None, 131072, None),
                           ("full_attention", "linear", 1e6, 256, 256, None, 131072, None)], None, None, 1024, None),
    "ministral3-3b": ("half", [(None, "yarn", 1e6, 128, 128, 16384, 262144, None)], 26, 0, None, None),
    "command-r7b": ("interleaved", [(None, "default", 5e4, 128, 128, None, 8192, None)], 24, 8, 4096, None),
    "smollm3-3b": ("half", [(None, "default", 5e6, 128, 128, None, 65536, None)], 27, 9, None, None),
    "olmo2-7b": ("half", [(None, "default", 5e5, 128, 128, None, 4096, None)], 32, 0, None, None),
    "starcoder2-7b": ("half", [(None, "default", 1e6, 128, 128, None, 16384, None)], 32, 0, 4096, None),
    "mistral-7b-v0.3": ("half", [(None, "default", 1e6, 128, 128, None, 32768, None)], 32, 0, None, None),
}


@pytest.mark.parametrize("name", FAMILIES)
def test_inspect_pins_each_family(name):
    layout, ropes, with_rope, without, window, style = FAMILIES[name]
    report = inspect_config(load(name), name=name)
    assert report.layout == layout
    got = [(r.layer_type, r.rope_type, r.base, r.rotary_dim, r.head_dim, r.L0, r.context, r.scaled_length)
           for r in report.rows]
    assert got == ropes
    layers = report.layers
    if with_rope is not None:
        rope, none = [x for x in layers["rope"] if x], [x for x in layers["rope"] if not x]
        assert (len(rope), len(none)) == (with_rope, without), layers["summary"]
    assert layers["sliding_window"] == window, layers["summary"]
    assert [r.to_dict()["mrope_style"] for r in report.rows] == [style] * len(ropes)
    if without:
        assert f"{without} " in report.text() and "without RoPE" in report.text()


def test_every_family_the_issue_names_has_a_file():
    families = {"llama3.1", "llama3.2", "llama4", "qwen2.5", "qwen3-8b", "qwen3-next", "qwen3.5", "qwen2.5-vl",
                "qwen3-vl", "deepseek-v2", "deepseek-v3", "deepseek-v3.2", "kimi-k2", "glm4.5", "gpt-oss", "phi3-mini",
                "phi3.5", "phi4-mini", "gemma2", "gemma3", "ministral3", "command-r7b", "smollm3", "olmo2",
                "starcoder2", "mistral"}
    for family in families:
        assert any(name.startswith(family) for name in FAMILIES), family
    sources = (CONFIGS / "SOURCES.md").read_text()
    for path in CONFIGS.glob("*.json"):
        assert f"`{path.name}`" in sources, path.name


def test_layers_without_rope_are_named_not_hidden():
    """Qwen3-Next: 36 of 48 layers are linear attention with no RoPE; Command R7B: its global layers have none."""
    nxt = inspect_config(load("qwen3-next-80b-a3b"))
    assert nxt.layers["linear_attention_layers"] == [i for i in range(48) if i % 4 != 3]
    assert "36 linear_attention without RoPE" in nxt.text() and "every layer uses the same RoPE" not in nxt.text()
    cohere = inspect_config(load("command-r7b"))
    assert cohere.layers["nope_layers"] == [3, 7, 11, 15, 19, 23, 27, 31]
    assert "8 full_attention without RoPE" in cohere.text() and "24 sliding_attention with RoPE" in cohere.text()


def test_windows_only_where_enabled():
    qwen = inspect_config(load("qwen2.5-7b")).layers
    assert qwen["sliding_window"] is None and "use_sliding_window is false" in qwen["window_note"]
    phi = inspect_config(load("phi3.5-mini")).layers
    assert phi["sliding_window"] is None and "covers the whole context" in phi["window_note"]
    assert inspect_config(load("starcoder2-7b")).layers["sliding_window"] == 4096


def test_context_is_max_position_embeddings_and_factor_x_L0_is_named_as_that():
    """Llama 3.2: the context is 131072; 32 x 8192 = 262144 is the scaling's own reach, not the context."""
    report = inspect_config(load("llama3.2-3b"))
    (row,) = report.rows
    assert (row.context, row.scaled_length, row.L) == (131072, 32 * 8192, 131072)
    assert "context = 131072 (max_position_embeddings), factor x L0 = 262144 (the scaling's own reach, past the " \
           "context), L = 131072" in report.text()


def test_mrope_interleaving_is_shown_in_text_and_json(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(load("qwen3-vl-2b")))
    assert main([str(path)]) == 0
    assert "MRoPE sections [24, 20, 20] (t, h, w), interleaved" in capsys.readouterr().out
    assert main([str(path), "--json"]) == 0
    rope = json.loads(capsys.readouterr().out)["ropes"][0]
    assert rope["mrope_section"] == [24, 20, 20] and rope["mrope_style"] == "interleaved"


def test_json_carries_inv_freq_per_layer_type(tmp_path, capsys):
    """Gemma 3 1B: base 10000 on sliding layers, 10^6 on full ones, each theta_j = base^(-2j/256)."""
    path = tmp_path / "config.json"
    path.write_text(json.dumps(load("gemma3-1b")))
    assert main([str(path), "--json"]) == 0
    ropes = {r["layer_type"]: r["inv_freq"] for r in json.loads(capsys.readouterr().out)["ropes"]}
    j = torch.arange(128, dtype=torch.float64)
    for layer_type, base in (("sliding_attention", 1e4), ("full_attention", 1e6)):
        torch.testing.assert_close(torch.tensor(ropes[layer_type], dtype=torch.float64), base ** (-2 * j / 256),
                                   rtol=1e-6, atol=0)


def test_query_scalings_llama4_temperature_and_ministral3_beta():
    (beta,) = query_scalings(load("ministral3-3b"))
    assert (beta.beta, beta.step, beta.shift, beta.layers) == (0.1, 16384, 0, "every layer")
    assert beta.at(262143) == pytest.approx(1 + 0.1 * math.log(1 + 15))  # floor(262143 / 16384) = 15
    text = inspect_config(load("ministral3-3b")).text()
    assert "query scaling: Llama 4 scaling (llama_4_scaling_beta) on every layer" in text
    assert "softmax scale by" not in text  # DeepSeek's MLA pitfall is not printed for Ministral 3
    (temp,) = query_scalings(load("llama4-scout-instruct"))
    assert (temp.beta, temp.step, temp.shift, temp.layers) == (0.1, 8192, 1, "the NoPE layers")


def test_alpha_style_dynamic_ntk_is_read_as_a_fixed_ntk_base():
    """HunYuan's 'dynamic' with alpha: base x alpha^(d/(d-2)) at every length, as transformers' HunYuan reads it
    (its public rotary class, built offline), not plain RoPE 1000x off in the slowest pair."""
    from transformers import AutoConfig
    from transformers.models.hunyuan_v1_dense.modeling_hunyuan_v1_dense import HunYuanDenseV1RotaryEmbedding

    cfg = {"model_type": "hunyuan_v1_dense", "hidden_size": 256, "num_attention_heads": 2, "head_dim": 128,
           "max_position_embeddings": 32768, "rope_theta": 10000.0,
           "rope_scaling": {"type": "dynamic", "factor": 1.0, "alpha": 1000.0}}
    ours, _ = rope_from_config(cfg)
    hf = HunYuanDenseV1RotaryEmbedding(AutoConfig.for_model(
        "hunyuan_v1_dense", hidden_size=256, num_attention_heads=2, head_dim=128, max_position_embeddings=32768,
        rope_parameters={"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 1.0, "alpha": 1000.0}))
    torch.testing.assert_close(ours, hf.inv_freq.float(), rtol=1e-6, atol=0)
    assert "alpha: a fixed NTK-aware base" in inspect_config(cfg).text()


@pytest.mark.parametrize("rope,key", [({"type": "dynamic", "factor": 2.0, "beta": 3.0}, "beta"),
                                      ({"rope_type": "yarn", "factor": 4.0, "ramp": "cosine"}, "ramp"),
                                      ({"rope_type": "linear", "factor": 2.0, "alpha": 8.0}, "alpha")])
def test_a_key_that_may_change_frequencies_is_refused_not_ignored(rope, key, tmp_path, capsys):
    cfg = {"head_dim": 64, "max_position_embeddings": 4096, "rope_scaling": rope}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(cfg))
    assert main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"key {key!r} is not understood" in err


# ---------------------------------------------------------------- the layer plans, against transformers' own

TRANSFORMERS_PLAN = ["qwen3-next-80b-a3b", "qwen3.5-35b-a3b", "command-r7b", "gemma2-9b", "gemma3-1b", "smollm3-3b",
                     "llama4-scout-instruct", "qwen2.5-7b", "gpt-oss-20b", "qwen3-8b"]


@pytest.mark.crosscheck
@pytest.mark.parametrize("name", TRANSFORMERS_PLAN)
def test_layer_plan_is_the_layer_types_transformers_derives(name):
    """The file's keys given to the family's transformers config (offline): the same layer_types, and the same
    NoPE layers where the config lists them (no_rope_layers)."""
    from transformers import AutoConfig

    raw = load(name)
    cfg = raw.get("text_config", raw)
    keep = {k: v for k, v in cfg.items() if k in ("num_hidden_layers", "layer_types", "full_attention_interval",
                                                  "sliding_window", "sliding_window_pattern", "use_sliding_window",
                                                  "max_window_layers", "no_rope_layers", "no_rope_layer_interval",
                                                  "attention_chunk_size")}
    if "layer_types" in keep:
        keep.setdefault("num_hidden_layers", len(keep["layer_types"]))
    hf = AutoConfig.for_model(cfg["model_type"], **keep)
    plan = layer_plan(raw)
    assert list(plan.attention) == list(hf.layer_types)
    if hasattr(hf, "no_rope_layers"):
        assert [int(r is not None) for r in plan.rope] == list(hf.no_rope_layers)
