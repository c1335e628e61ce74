"""A model's RoPE from its config.json (posenc_lib.rope_config), Llama 4's temperature, the model table."""
import copy
import json
import math
from importlib import resources

import pytest
import torch

import posenc_lib as pl

# ---------------------------------------------------------------- small configs, both forms

LLAMA31_LIKE = {  # legacy form: rope_theta + rope_scaling, head dim from hidden_size / heads
    "hidden_size": 256, "num_attention_heads": 4, "max_position_embeddings": 131072, "rope_theta": 500000.0,
    "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                     "original_max_position_embeddings": 8192},
}


def test_default_rope_is_plain_frequencies_in_both_forms():
    """rope_theta alone, or rope_parameters with rope_type default: base**(-2j/d), attention factor 1."""
    legacy = {"hidden_size": 64, "num_attention_heads": 4, "rope_theta": 500.0, "rope_scaling": None}
    new = {"head_dim": 16, "rope_parameters": {"rope_type": "default", "rope_theta": 500.0}}
    for cfg in (legacy, new):
        inv, att = pl.rope_from_config(cfg)
        torch.testing.assert_close(inv, pl.rope_frequencies(16, base=500.0), rtol=0, atol=0)
        assert att == 1.0 and inv.dtype == torch.float32
    # no theta at all: transformers' default base 10000
    torch.testing.assert_close(pl.rope_from_config({"head_dim": 8})[0], torch.tensor([1.0, 0.1, 0.01, 0.001]))


def test_legacy_type_key_and_rope_type_key_agree():
    a = {"head_dim": 32, "max_position_embeddings": 4096, "rope_scaling": {"type": "linear", "factor": 4.0}}
    b = {"head_dim": 32, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    torch.testing.assert_close(pl.rope_from_config(a)[0], pl.rope_from_config(b)[0], rtol=0, atol=0)
    torch.testing.assert_close(pl.rope_from_config(a)[0], pl.rope_frequencies(32) / 4)


def test_partial_rotary_factor_gives_a_smaller_rope():
    """p < 1: the frequencies of a RoPE of dimension int(head_dim * p), not the first entries of the full one."""
    cfg = {"head_dim": 64, "rope_theta": 10000.0, "partial_rotary_factor": 0.25}
    inv, _ = pl.rope_from_config(cfg)
    torch.testing.assert_close(inv, pl.rope_frequencies(16), rtol=0, atol=0)
    assert not torch.allclose(inv, pl.rope_frequencies(64)[:8])


def test_proportional_keeps_the_full_dimension_and_zeroes_the_rest():
    """Gemma 4: head_dim/2 entries; the first p*head_dim/2 are base**(-2j/head_dim), the rest 0."""
    cfg = {"head_dim": 64, "rope_parameters": {"rope_type": "proportional", "rope_theta": 1e6,
                                               "partial_rotary_factor": 0.25}}
    inv, att = pl.rope_from_config(cfg)
    full = pl.rope_frequencies(64, base=1e6)
    assert inv.shape == (32,) and att == 1.0
    torch.testing.assert_close(inv[:8], full[:8], rtol=0, atol=0)
    assert (inv[8:] == 0).all()


def test_zero_frequency_pairs_give_offset_invariant_scores():
    """Pairs with frequency 0 never turn: shifting both q and k changes nothing, and neither does moving one."""
    inv, _ = pl.rope_from_config({"head_dim": 16, "rope_parameters": {
        "rope_type": "proportional", "rope_theta": 100.0, "partial_rotary_factor": 0.5}})
    q, k = torch.randn(1, 16, dtype=torch.float64), torch.randn(1, 16, dtype=torch.float64)
    q[:, :8], k[:, :8] = 0, 0  # interleaved: features 0..7 are pairs 0..3, the turning ones (p * 16 / 2 = 4)
    rq = pl.apply_rope(q, torch.tensor([3]), inv_freq=inv.double())
    for m in (0, 7, 1000):
        rk = pl.apply_rope(k, torch.tensor([m]), inv_freq=inv.double())
        torch.testing.assert_close(rq @ rk.T, q @ k.T)


def test_per_layer_rope_parameters_are_selected_by_layer_type():
    cfg = {"head_dim": 32, "layer_types": ["sliding_attention", "full_attention"],
           "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                               "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}}
    local, _ = pl.rope_from_config(cfg, layer_type="sliding_attention")
    global_, _ = pl.rope_from_config(cfg, layer_type="full_attention")
    torch.testing.assert_close(local, pl.rope_frequencies(32))
    torch.testing.assert_close(global_, pl.rope_frequencies(32, base=1e6) / 8)
    with pytest.raises(ValueError, match=r"layer_type must be one of \('sliding_attention', 'full_attention'\)"):
        pl.rope_from_config(cfg)


def test_gemma3_legacy_local_base_becomes_the_sliding_layers_rope():
    cfg = {"head_dim": 32, "rope_theta": 1e6, "rope_local_base_freq": 10000.0,
           "rope_scaling": {"rope_type": "linear", "factor": 8.0}}
    torch.testing.assert_close(pl.rope_from_config(cfg, layer_type="sliding_attention")[0], pl.rope_frequencies(32))
    torch.testing.assert_close(pl.rope_from_config(cfg, layer_type="full_attention")[0],
                               pl.rope_frequencies(32, base=1e6) / 8)


def test_flat_config_serves_every_layer_type_it_declares():
    cfg = {**LLAMA31_LIKE, "layer_types": ["full_attention"] * 2}
    torch.testing.assert_close(pl.rope_from_config(cfg, layer_type="full_attention")[0], pl.rope_from_config(cfg)[0])
    with pytest.raises(ValueError, match="layer_type must be one of \\('full_attention',\\)"):
        pl.rope_from_config(cfg, layer_type="sliding_attention")


def test_multimodal_config_reads_its_text_config():
    outer = {"model_type": "gemma3", "text_config": copy.deepcopy(LLAMA31_LIKE)}
    torch.testing.assert_close(pl.rope_from_config(outer)[0], pl.rope_from_config(LLAMA31_LIKE)[0])


def test_factor_none_means_max_over_original_for_yarn_and_longrope():
    """DeepSeek / Phi-3 give no factor: s = max_position_embeddings / original_max_position_embeddings."""
    yarn = {"head_dim": 64, "max_position_embeddings": 16384, "rope_theta": 10000.0,
            "rope_scaling": {"type": "yarn", "original_max_position_embeddings": 4096}}
    inv, att = pl.rope_from_config(yarn)
    want, want_att = pl.scaled_rope_frequencies(64, method="yarn", factor=4.0, original_max_position=4096)
    torch.testing.assert_close(inv, want, rtol=0, atol=0)
    assert att == want_att == pytest.approx(0.1 * math.log(4) + 1)


def test_phi3_attention_factor_is_1_190():
    """Phi-3-mini-128k: s = 131072 / 4096 = 32, sqrt(1 + ln 32 / ln 4096) = 1.190."""
    cfg = {"hidden_size": 3072, "num_attention_heads": 32, "max_position_embeddings": 131072,
           "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
           "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 48, "long_factor": [2.0] * 48}}
    _, att = pl.rope_from_config(cfg)
    assert att == pytest.approx(math.sqrt(1 + math.log(32) / math.log(4096))) and round(att, 3) == 1.190


def test_longrope_switches_lists_above_the_original_length():
    short, long_ = [1.0 + j / 10 for j in range(8)], [2.0 + j for j in range(8)]
    cfg = {"head_dim": 16, "max_position_embeddings": 8192, "original_max_position_embeddings": 1024,
           "rope_scaling": {"type": "longrope", "short_factor": short, "long_factor": long_}}
    base = pl.rope_frequencies(16, dtype=torch.float64)
    for seq_len, lam in ((None, short), (1024, short), (1025, long_), (8192, long_)):
        inv, _ = pl.rope_from_config(cfg, seq_len=seq_len)
        torch.testing.assert_close(inv, (base / torch.tensor(lam, dtype=torch.float64)).float(), rtol=0, atol=0)


def test_deepseek_mscale_puts_the_correction_in_the_softmax():
    """mscale == mscale_all_dim: the RoPE's attention factor is exactly 1 (DeepSeek-V3)."""
    cfg = {"qk_rope_head_dim": 64, "head_dim": 64, "hidden_size": 7168, "num_attention_heads": 128,
           "max_position_embeddings": 163840, "rope_theta": 10000,
           "rope_scaling": {"type": "yarn", "factor": 40, "original_max_position_embeddings": 4096, "beta_fast": 32,
                            "beta_slow": 1, "mscale": 1.0, "mscale_all_dim": 1.0}}
    inv, att = pl.rope_from_config(cfg)
    assert att == 1.0 and inv.shape == (32,)
    cfg["rope_scaling"]["mscale_all_dim"] = 0.5
    assert pl.rope_from_config(cfg)[1] == pytest.approx((0.1 * math.log(40) + 1) / (0.05 * math.log(40) + 1))


@pytest.mark.parametrize("cfg,match", [
    ({"rope_theta": 10000.0}, "config needs a head dimension: 'head_dim', or 'hidden_size'"),
    ({"hidden_size": 64}, "config needs a head dimension"),
    ([1, 2], "config must be a dict"),
    ({"head_dim": 16, "rope_scaling": {"type": "ntk-by-parts", "factor": 2.0}}, "rope_type must be one of"),
    ({"head_dim": 16, "rope_scaling": {"type": "linear"}}, "needs the key 'factor'"),
    ({"head_dim": 16, "max_position_embeddings": 64,
      "rope_scaling": {"type": "llama3", "factor": 2.0, "low_freq_factor": 1.0}}, "needs the key 'high_freq_factor'"),
    ({"head_dim": 16, "max_position_embeddings": 64, "rope_scaling": {"type": "longrope", "long_factor": [1.0] * 8}},
     "needs the key 'short_factor'"),
    ({"head_dim": 16, "max_position_embeddings": 64,
      "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 8, "long_factor": [1.0] * 7}},
     r"long_factor must be a list of d/2 = 8 numbers \(one per pair\), got length 7"),
    ({"head_dim": 16, "max_position_embeddings": 64,
      "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 7 + [0.0], "long_factor": [1.0] * 8}},
     "every entry of short_factor must be a finite number > 0"),
    ({"head_dim": 16, "rope_scaling": {"type": "dynamic", "factor": 2.0}}, "needs the key 'max_position_embeddings'"),
    ({"head_dim": 16, "max_position_embeddings": 1024,
      "rope_scaling": {"type": "yarn", "original_max_position_embeddings": 4096}},
     r"max_position_embeddings \(1024\) must be at least original_max_position_embeddings \(4096\)"),
    ({"head_dim": 16, "rope_theta": 1.0}, "rope_theta must be a finite number > 1"),
    ({"head_dim": 16, "partial_rotary_factor": 1.5}, r"partial_rotary_factor must be in \(0, 1\]"),
    ({"head_dim": 16, "partial_rotary_factor": 0.1}, "gives 1 rotated features; it must be even"),
    ({"head_dim": 16, "rope_scaling": "linear"}, "rope_parameters / rope_scaling must be a dict"),
    ({"head_dim": 16, "rope_parameters": {"full_attention": None, "sliding_attention": {"rope_theta": 10.0}}},
     "layer_type must be one of"),
])
def test_bad_config_raises_value_error_naming_the_key(cfg, match):
    with pytest.raises(ValueError, match=match):
        pl.rope_from_config(cfg)


def test_nope_layer_type_raises():
    cfg = {"head_dim": 16, "rope_parameters": {"full_attention": None, "sliding_attention": {"rope_theta": 10.0}}}
    with pytest.raises(ValueError, match="layer_type 'full_attention' has no RoPE"):
        pl.rope_from_config(cfg, layer_type="full_attention")


# ---------------------------------------------------------------- cross-checks with transformers

def _hf(cls_path: str, rotary_path: str, cfg: dict, layer_type=None):
    """transformers' RoPE for a config dict, through the model's own RotaryEmbedding (its default path included)."""
    pytest.importorskip("transformers")
    import importlib

    mod, name = cls_path.rsplit(".", 1)
    config = getattr(importlib.import_module(mod), name)(**copy.deepcopy(cfg))
    mod, name = rotary_path.rsplit(".", 1)
    rot = getattr(importlib.import_module(mod), name)(config)
    prefix = f"{layer_type}_" if layer_type else ""
    return getattr(rot, f"{prefix}inv_freq"), getattr(rot, f"{prefix}attention_scaling"), config


def _hf_init(cls_path: str, cfg: dict, seq_len=None, layer_type=None):
    """transformers' ROPE_INIT_FUNCTIONS[rope_type] on a config built from the dict."""
    pytest.importorskip("transformers")
    import importlib

    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    mod, name = cls_path.rsplit(".", 1)
    config = getattr(importlib.import_module(mod), name)(**copy.deepcopy(cfg))
    params = config.rope_parameters[layer_type] if layer_type else config.rope_parameters
    kw = {"layer_type": layer_type} if layer_type else {}
    return ROPE_INIT_FUNCTIONS[params["rope_type"]](config, "cpu", seq_len=seq_len, **kw)


LLAMA = ("transformers.LlamaConfig", "transformers.models.llama.modeling_llama.LlamaRotaryEmbedding")
QWEN2 = ("transformers.Qwen2Config", "transformers.models.qwen2.modeling_qwen2.Qwen2RotaryEmbedding")
PHI3 = ("transformers.Phi3Config", "transformers.models.phi3.modeling_phi3.Phi3RotaryEmbedding")
DEEPSEEK = ("transformers.DeepseekV3Config",
            "transformers.models.deepseek_v3.modeling_deepseek_v3.DeepseekV3RotaryEmbedding")
GPT_OSS = ("transformers.GptOssConfig", "transformers.models.gpt_oss.modeling_gpt_oss.GptOssRotaryEmbedding")
LLAMA4 = ("transformers.Llama4TextConfig", "transformers.models.llama4.modeling_llama4.Llama4TextRotaryEmbedding")
GEMMA3 = ("transformers.Gemma3TextConfig", "transformers.models.gemma3.modeling_gemma3.Gemma3RotaryEmbedding")
GEMMA4 = ("transformers.Gemma4TextConfig", "transformers.models.gemma4.modeling_gemma4.Gemma4TextRotaryEmbedding")

_SMALL = {"num_hidden_layers": 2, "vocab_size": 32, "intermediate_size": 32,
          "layer_types": ["sliding_attention", "full_attention"]}
PHI_FACTORS = {"short_factor": [1.0 + 0.05 * j for j in range(16)], "long_factor": [1.0 + 0.9 * j for j in range(16)]}
PHI_PARTIAL = {"short_factor": [1.0 + 0.1 * j for j in range(8)], "long_factor": [2.0 + 0.5 * j for j in range(8)]}

# (name, model, config dict, layer_type): one case per rope type and per form found in the wild.
MODEL_CASES = [
    ("default-legacy", LLAMA, {"hidden_size": 128, "num_attention_heads": 4, "rope_theta": 500000.0}, None),
    ("default-new", QWEN2, {"hidden_size": 128, "num_attention_heads": 2,
                            "rope_parameters": {"rope_type": "default", "rope_theta": 1e6}}, None),
    ("default-partial", PHI3, {"hidden_size": 128, "num_attention_heads": 2, "partial_rotary_factor": 0.75,
                               "rope_theta": 10000.0}, None),
    ("linear", LLAMA, {"hidden_size": 128, "num_attention_heads": 4,
                       "rope_scaling": {"type": "linear", "factor": 4.0}, "rope_theta": 10000.0}, None),
    ("dynamic", LLAMA, {"hidden_size": 128, "num_attention_heads": 4, "max_position_embeddings": 2048,
                        "rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}}, None),
    ("llama3-legacy", LLAMA, {**LLAMA31_LIKE}, None),
    ("llama3-llama4", LLAMA4, {"hidden_size": 256, "num_attention_heads": 2, "head_dim": 128,
                               "max_position_embeddings": 262144, "rope_theta": 500000.0,
                               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}},
     None),
    ("llama3-equal-band-factors", LLAMA, {"hidden_size": 256, "num_attention_heads": 2,
                                          "max_position_embeddings": 65536, "rope_theta": 500000.0,
                                          "rope_scaling": {"rope_type": "llama3", "factor": 16.0,
                                                           "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                                                           "original_max_position_embeddings": 4096}}, None),
    ("yarn-qwen", QWEN2, {"hidden_size": 256, "num_attention_heads": 2, "max_position_embeddings": 32768,
                          "rope_theta": 1e6, "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                              "original_max_position_embeddings": 32768}}, None),
    ("yarn-deepseek-mscale", DEEPSEEK, {"hidden_size": 256, "num_attention_heads": 4, "qk_rope_head_dim": 64,
                                        "qk_nope_head_dim": 128, "v_head_dim": 128, "max_position_embeddings": 163840,
                                        "rope_theta": 10000,
                                        "rope_scaling": {"type": "yarn", "factor": 40, "beta_fast": 32, "beta_slow": 1,
                                                         "mscale": 1.0, "mscale_all_dim": 1.0,
                                                         "original_max_position_embeddings": 4096}}, None),
    ("yarn-mscale-unequal", DEEPSEEK, {"hidden_size": 256, "num_attention_heads": 4, "qk_rope_head_dim": 32,
                                       "max_position_embeddings": 32768, "rope_theta": 10000,
                                       "rope_scaling": {"type": "yarn", "factor": 8, "mscale": 0.707,
                                                        "mscale_all_dim": 1.0,
                                                        "original_max_position_embeddings": 4096}}, None),
    ("yarn-no-factor", DEEPSEEK, {"hidden_size": 256, "num_attention_heads": 4, "qk_rope_head_dim": 64,
                                  "max_position_embeddings": 163840, "rope_theta": 10000,
                                  "rope_scaling": {"type": "yarn", "factor": None,
                                                   "original_max_position_embeddings": 4096}}, None),
    ("yarn-gpt-oss-no-truncate", GPT_OSS, {"hidden_size": 128, "num_attention_heads": 4, "head_dim": 64,
                                           "num_key_value_heads": 2, "max_position_embeddings": 131072, **_SMALL,
                                           "rope_parameters": {"rope_type": "yarn", "factor": 32.0,
                                                               "beta_fast": 32.0, "beta_slow": 1.0, "truncate": False,
                                                               "original_max_position_embeddings": 4096,
                                                               "rope_theta": 150000}}, None),
    ("yarn-partial", LLAMA, {"hidden_size": 256, "num_attention_heads": 2, "max_position_embeddings": 16384,
                             "partial_rotary_factor": 0.5,
                             "rope_parameters": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 10000.0,
                                                 "original_max_position_embeddings": 4096}}, None),
    ("longrope-phi3", PHI3, {"hidden_size": 128, "num_attention_heads": 4, "max_position_embeddings": 131072,
                             "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
                             "rope_scaling": {"type": "longrope", **PHI_FACTORS}}, None),
    ("longrope-su-partial", PHI3, {"hidden_size": 128, "num_attention_heads": 4, "max_position_embeddings": 16384,
                                   "original_max_position_embeddings": 4096, "partial_rotary_factor": 0.5,
                                   "rope_scaling": {"type": "su", "original_max_position_embeddings": 4096,
                                                    **PHI_PARTIAL}}, None),
    ("longrope-factor-attention", PHI3, {"hidden_size": 128, "num_attention_heads": 4,
                                         "max_position_embeddings": 8192, "original_max_position_embeddings": 4096,
                                         "rope_scaling": {"type": "longrope", "factor": 8.0, "attention_factor": 1.3,
                                                          **PHI_FACTORS}}, None),
    ("gemma3-legacy-local", GEMMA3, {"hidden_size": 128, "num_attention_heads": 2, "head_dim": 64, **_SMALL,
                                     "rope_theta": 1e6, "rope_local_base_freq": 10000.0,
                                     "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, "sliding_attention"),
    ("gemma3-legacy-global", GEMMA3, {"hidden_size": 128, "num_attention_heads": 2, "head_dim": 64, **_SMALL,
                                      "rope_theta": 1e6, "rope_local_base_freq": 10000.0,
                                      "rope_scaling": {"rope_type": "linear", "factor": 8.0}}, "full_attention"),
    ("gemma3-nested-global", GEMMA3, {"hidden_size": 128, "num_attention_heads": 2, "head_dim": 32, **_SMALL,
                                      "rope_parameters": {
                                          "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                          "full_attention": {"rope_type": "yarn", "factor": 4.0, "rope_theta": 1e6,
                                                             "original_max_position_embeddings": 1024}}},
     "full_attention"),
    ("gemma4-sliding", GEMMA4, {"hidden_size": 128, "num_attention_heads": 2, "head_dim": 32, **_SMALL,
                                "global_head_dim": 64}, "sliding_attention"),
    ("gemma4-proportional", GEMMA4, {"hidden_size": 128, "num_attention_heads": 2, "head_dim": 32, **_SMALL,
                                     "global_head_dim": 64}, "full_attention"),
    ("gemma4-proportional-factor", GEMMA4, {"hidden_size": 128, "num_attention_heads": 2, "head_dim": 32, **_SMALL,
                                            "global_head_dim": 128, "rope_parameters": {
                                                "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                                "full_attention": {"rope_type": "proportional", "factor": 2.0,
                                                                   "partial_rotary_factor": 0.5,
                                                                   "rope_theta": 1e6}}},
     "full_attention"),
]


def _gemma4_defaults(cfg: dict) -> dict:
    """Gemma4TextConfig's built-in rope_parameters, written out so our side reads the same dict."""
    if "rope_parameters" in cfg or "global_head_dim" not in cfg:
        return cfg
    return {**cfg, "rope_parameters": {
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1e6}}}


@pytest.mark.crosscheck
@pytest.mark.parametrize("name,model,cfg,layer_type", MODEL_CASES, ids=[c[0] for c in MODEL_CASES])
def test_matches_the_models_rotary_embedding_in_transformers(name, model, cfg, layer_type):
    """inv_freq and attention factor equal those of the model's own RotaryEmbedding in transformers."""
    hf_inv, hf_att, _ = _hf(*model, cfg, layer_type)
    inv, att = pl.rope_from_config(_gemma4_defaults(cfg), layer_type=layer_type)
    assert inv.shape == hf_inv.shape
    torch.testing.assert_close(inv, hf_inv.float(), rtol=1e-6, atol=0)
    assert att == pytest.approx(hf_att, rel=1e-12)


SEQ_CASES = [("longrope-phi3", s) for s in (None, 100, 4096, 4097, 131072)] + [
    ("dynamic", s) for s in (None, 1000, 2048, 3000, 10000)]


@pytest.mark.crosscheck
@pytest.mark.parametrize("name,seq_len", SEQ_CASES)
def test_seq_len_dependent_types_match_transformers(name, seq_len):
    """longrope below and above L0 (short vs long factors), dynamic below and above max_position."""
    _, model, cfg, _ = next(c for c in MODEL_CASES if c[0] == name)
    hf_inv, hf_att = _hf_init(model[0], cfg, seq_len=seq_len)
    inv, att = pl.rope_from_config(cfg, seq_len=seq_len)
    torch.testing.assert_close(inv, hf_inv, rtol=1e-6, atol=0)
    assert att == pytest.approx(hf_att, rel=1e-12)


@pytest.mark.crosscheck
@pytest.mark.parametrize("p", [0.25, 0.5, 0.75, 1.0])
@pytest.mark.parametrize("rope_type", ["default", "linear", "dynamic", "yarn", "llama3", "longrope", "proportional"])
def test_partial_rotary_factor_matches_transformers_for_every_rope_type(rope_type, p):
    """rope_parameters with partial_rotary_factor p, through ROPE_INIT_FUNCTIONS (Phi-3's default path for default)."""
    head_dim, L0 = 64, 1024
    n = int(head_dim * p) // 2
    params = {"rope_type": rope_type, "rope_theta": 20000.0, "partial_rotary_factor": p}
    params |= {"default": {}, "linear": {"factor": 4.0}, "dynamic": {"factor": 4.0},
               "yarn": {"factor": 4.0, "original_max_position_embeddings": L0},
               "llama3": {"factor": 4.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                          "original_max_position_embeddings": L0},
               "longrope": {"short_factor": [1.0 + j / n for j in range(n)],
                            "long_factor": [1.0 + 3 * j for j in range(n)],
                            "original_max_position_embeddings": L0},
               "proportional": {"factor": 2.0}}[rope_type]
    cfg = {"hidden_size": 4 * head_dim, "num_attention_heads": 4, "max_position_embeddings": 4 * L0,
           "rope_parameters": params}
    if rope_type == "default":
        hf_inv, hf_att, _ = _hf(*PHI3, cfg)
    else:
        hf_inv, hf_att = _hf_init(LLAMA[0], cfg, seq_len=4 * L0)
    inv, att = pl.rope_from_config(cfg, seq_len=4 * L0)
    assert inv.shape == hf_inv.shape == ((head_dim // 2,) if rope_type == "proportional" else (n,))
    torch.testing.assert_close(inv, hf_inv.float(), rtol=1e-6, atol=0)
    assert att == pytest.approx(hf_att, rel=1e-12)


class _FakeCache:
    """Stands in for a KV cache of ``length`` tokens: Llama 4 reads the query's position from it."""

    def __init__(self, length: int):
        self.length = length

    def get_seq_length(self, layer_idx: int) -> int:
        return self.length

    def update(self, k, v, layer_idx, *args, **kwargs):
        return k, v


@pytest.mark.crosscheck
@pytest.mark.parametrize("floor_scale,attn_scale", [(8192, 0.1), (4096, 0.25), (2, 1.0)])
def test_attention_temperature_matches_llama4_attention(floor_scale, attn_scale, monkeypatch):
    """transformers' Llama4TextAttention scales a NoPE layer's queries by exactly this factor."""
    pytest.importorskip("transformers")
    import transformers.models.llama4.modeling_llama4 as m4
    from transformers import Llama4TextConfig

    cfg = Llama4TextConfig(hidden_size=8, num_attention_heads=1, num_key_value_heads=1, head_dim=8,
                           num_hidden_layers=4, no_rope_layers=[0, 1, 1, 1], floor_scale=floor_scale,
                           attn_scale=attn_scale, attn_temperature_tuning=True, use_qk_norm=False,
                           intermediate_size=8, intermediate_size_mlp=8, vocab_size=8)
    cfg._attn_implementation = "eager"
    attn = m4.Llama4TextAttention(cfg, layer_idx=0)
    assert not attn.use_rope
    seen = {}

    def spy(module, query, key, value, attention_mask, **kwargs):  # records the scaled queries
        seen["q"] = query
        return torch.zeros(query.shape[0], query.shape[2], query.shape[1], query.shape[3]), None

    monkeypatch.setattr(m4, "eager_attention_forward", spy)
    with torch.no_grad():
        attn.q_proj.weight.copy_(torch.eye(8))  # q = the input, all ones: what comes out is the scale
        for pos in (0, 1, 8190, 8191, 8192, 16383, 16384, 100000, 1 << 20):  # one decoding step each
            attn(torch.ones(1, 1, 8), position_embeddings=None, attention_mask=None, cache=_FakeCache(pos))
            ours = pl.attention_temperature(torch.tensor([pos]), floor_scale=floor_scale, attn_scale=attn_scale)
            assert ours.item() == pytest.approx(seen["q"][0, 0, 0, 0].item(), rel=1e-6), pos


# ---------------------------------------------------------------- the temperature by itself

def test_attention_temperature_steps_every_floor_scale_tokens():
    t = pl.attention_temperature(torch.tensor([0, 8190, 8191, 16382, 16383, 8192 * 9 - 1]))
    want = [1.0, 1.0, 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(2), 1 + 0.1 * math.log(3), 1 + 0.1 * math.log(10)]
    torch.testing.assert_close(t, torch.tensor(want), rtol=1e-7, atol=0)
    assert t.dtype == torch.float32
    assert pl.attention_temperature(5).shape == (5,)
    assert pl.attention_temperature(torch.zeros(2, 3, dtype=torch.long)).shape == (2, 3)


@pytest.mark.parametrize("kw,match", [
    (dict(positions=torch.tensor([0.5])), "positions must have an integer dtype"),
    (dict(positions=torch.tensor([-1])), "positions must be >= 0"),
    (dict(positions=3, floor_scale=0), "floor_scale must be an integer >= 1"),
    (dict(positions=3, attn_scale=float("nan")), "attn_scale must be a finite number"),
])
def test_attention_temperature_bad_input(kw, match):
    with pytest.raises(ValueError, match=match):
        pl.attention_temperature(**kw)


# ---------------------------------------------------------------- the shipped model table

def _model_table() -> dict:
    return json.loads(resources.files("posenc_lib").joinpath("data/model_rope_configs.json").read_text())


def test_model_table_loads_through_rope_from_config():
    """Every model's config: rope_from_config does not raise and gives rotary_dim / 2 frequencies."""
    table = _model_table()
    assert len(table["models"]) >= 6
    for name, entry in table["models"].items():
        cfg = entry["config"]
        assert entry["source"].endswith("config.json"), name
        for layer_type in entry.get("rope_layer_types") or [None]:
            inv, att = pl.rope_from_config(cfg, layer_type=layer_type)
            assert inv.shape == (entry["rotary_dim"] // 2,), (name, layer_type)
            assert torch.isfinite(inv).all() and (inv > 0).all() and att >= 1.0, name


def test_model_table_attention_factors_and_layer_bases():
    """The numbers the chapter quotes: Phi-3's 1.190, DeepSeek's 1.0, Gemma 3's two bases, Llama 4's bands."""
    models = _model_table()["models"]
    phi = models["Phi-3 mini 128k instruct"]["config"]
    short, att = pl.rope_from_config(phi)
    long_, _ = pl.rope_from_config(phi, seq_len=131072)
    assert round(att, 3) == 1.190 and short.shape == long_.shape == (48,)
    theta = pl.rope_frequencies(96, dtype=torch.float64)  # head dim 3072 / 32 = 96: 48 pairs
    ends = [0, -1]
    torch.testing.assert_close(short[ends].double(), theta[ends] / torch.tensor([1.1, 3.05], dtype=torch.float64))
    torch.testing.assert_close(long_[ends].double(), theta[ends] / torch.tensor([1.07, 64.76], dtype=torch.float64))
    assert pl.rope_from_config(models["DeepSeek-V3"]["config"])[1] == 1.0
    gemma = models["Gemma 3 4B"]["config"]
    local, _ = pl.rope_from_config(gemma, layer_type="sliding_attention")
    global_, _ = pl.rope_from_config(gemma, layer_type="full_attention")
    torch.testing.assert_close(local, pl.rope_frequencies(256, base=1e4))
    torch.testing.assert_close(global_, pl.rope_frequencies(256, base=1e6) / 8)
    llama4 = models["Llama 4 Scout 17B-16E Instruct"]["config"]["text_config"]
    assert llama4["no_rope_layers"].count(0) == 12 and llama4["no_rope_layers"][3::4] == [0] * 12
    base = models["Llama 4 Scout 17B-16E (base)"]["config"]["text_config"]
    assert base["no_rope_layers"] == [] and (base["max_position_embeddings"], llama4["max_position_embeddings"]) == (
        262144, 40 * 262144)  # the base file leaves the pattern to the config class; the Instruct file spells it out
    assert base["rope_scaling"] == llama4["rope_scaling"]  # the same RoPE block in both files


TABLE_MODELS = {  # model_type of the (text) config -> transformers' config class and rotary module
    "llama": LLAMA, "qwen2": QWEN2, "gemma3_text": GEMMA3, "deepseek_v3": DEEPSEEK, "gpt_oss": GPT_OSS,
    "phi3": PHI3, "llama4_text": LLAMA4,
}


@pytest.mark.crosscheck
@pytest.mark.parametrize("name", list(_model_table()["models"]))
def test_model_table_matches_transformers(name):
    """Each shipped config read by transformers' own config class and rotary module gives our numbers."""
    entry = _model_table()["models"][name]
    text = entry["config"].get("text_config", entry["config"])
    extra = {"num_hidden_layers": len(text["layer_types"])} if "layer_types" in text else {}
    # Scout's file holds attn_temperature_tuning = 4; transformers 5's strict config wants a bool.
    hf_text = {k: val for k, val in text.items() if k != "attn_temperature_tuning"} | extra
    for layer_type in entry.get("rope_layer_types") or [None]:
        hf_inv, hf_att, _ = _hf(*TABLE_MODELS[text["model_type"]], hf_text, layer_type)
        inv, att = pl.rope_from_config(entry["config"], layer_type=layer_type)
        torch.testing.assert_close(inv, hf_inv.float(), rtol=1e-6, atol=0)
        assert att == pytest.approx(hf_att, rel=1e-12)


# ---------------------------------------------------------------- rope_settings: the parsed config, read once

def test_rope_settings_is_what_rope_from_config_computes():
    for name, entry in _model_table()["models"].items():
        for layer_type in entry["rope_layer_types"] or [None]:
            s = pl.rope_settings(entry["config"], layer_type=layer_type)
            assert s.rotary_dim == entry["rotary_dim"], name
            for seq_len in (None, 8192, 200000):
                inv, att = pl.rope_from_config(entry["config"], layer_type=layer_type, seq_len=seq_len)
                inv2, att2 = s.frequencies(seq_len)
                torch.testing.assert_close(inv, inv2, rtol=0, atol=0)
                assert att == att2


def test_rope_settings_reads_mrope_sections_in_both_forms():
    old = {"hidden_size": 128, "num_attention_heads": 1, "rope_theta": 1e6,
           "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    new = {"head_dim": 128, "rope_parameters": {"rope_type": "default", "rope_theta": 1e6,
                                                "mrope_section": [24, 20, 20], "mrope_interleaved": True}}
    assert (pl.rope_settings(old).mrope_section, pl.rope_settings(old).mrope_interleaved) == ((16, 24, 24), False)
    assert (pl.rope_settings(new).mrope_section, pl.rope_settings(new).mrope_interleaved) == ((24, 20, 20), True)
    torch.testing.assert_close(pl.rope_from_config(old)[0], pl.rope_frequencies(128, base=1e6))  # plain frequencies
    with pytest.raises(ValueError, match=r"mrope_section must sum to the rotated pairs r/2 = 64"):
        pl.rope_settings({**old, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24]}})


def test_unscaled_settings_keep_proportionals_zeros_and_drop_the_scaling():
    llama = pl.rope_settings(LLAMA31_LIKE)
    torch.testing.assert_close(llama.unscaled().frequencies()[0], pl.rope_frequencies(64, base=500000.0))
    prop = pl.rope_settings({"head_dim": 64, "rope_parameters": {"rope_type": "proportional", "rope_theta": 1e6,
                                                                 "factor": 2.0, "partial_rotary_factor": 0.25}})
    plain = prop.unscaled().frequencies()[0]
    assert prop.pairs == 32 and (plain[8:] == 0).all()
    torch.testing.assert_close(plain[:8], pl.rope_frequencies(64, base=1e6)[:8])
