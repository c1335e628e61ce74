"""What the chapters say about transformers that only its code or private internals can show.

The chapters check transformers through its public API on tiny offline inputs (configs, modules'
outputs, `generate`). A few claims cannot be reached that way: where a module keeps its rotated
features, that it never switches autocast off, a quirk of its eager path. They are checked here,
against TRANSFORMERS_CHECKED, the version they were read in (the lock's). When the lock moves
transformers, every test here fails and names the chapter claim to re-read: read the new code,
fix the chapter if the claim changed, then set TRANSFORMERS_CHECKED to the new version.
"""
import inspect
import math
import re
from pathlib import Path

import pytest
import torch

import posenc_lib as pl

TRANSFORMERS_CHECKED = "5.24.0"
LOCK = Path(__file__).resolve().parents[1] / "requirements" / "lab.txt"


def transformers_as_checked(claim: str):
    """transformers, if it is the version `claim` was checked against; otherwise fail naming the claim."""
    transformers = pytest.importorskip("transformers")
    if transformers.__version__ != TRANSFORMERS_CHECKED:
        pytest.fail(f"re-check {claim}: it was read in transformers {TRANSFORMERS_CHECKED}, this is "
                    f"{transformers.__version__}. Read the new code, fix the chapter if it changed, then set "
                    "TRANSFORMERS_CHECKED in tests/test_upstream_claims.py")
    return transformers


def test_the_checked_version_is_the_locked_one():
    locked = re.search(r"^transformers==(\S+)", LOCK.read_text(), re.M).group(1)
    assert locked == TRANSFORMERS_CHECKED, (
        f"the lock moved transformers to {locked}: re-check every claim in tests/test_upstream_claims.py")


def test_ch05_llama_rotary_embedding_never_switches_autocast_off():
    """Chapter 5 §9: "It does not switch autocast off, and it need not" (the notebook shows it need not)."""
    transformers_as_checked("chapter 5 §9, 'LlamaRotaryEmbedding does not switch autocast off'")
    from transformers.models.llama import modeling_llama

    source = inspect.getsource(modeling_llama.LlamaRotaryEmbedding.forward)
    assert "autocast" not in source


def test_ch06_falcon_eager_path_adds_the_alibi_row_twice():
    """Chapter 6 §5: Falcon's eager path adds alibi to q.k before the 1/sqrt(d) scale *and* adds the mask
    that already holds alibi / sqrt(d); with q = k = 0 the weights are those of slopes 2 m_h / sqrt(d_head).
    (The SDPA path adds it once: tests/test_crosscheck.py.)"""
    transformers_as_checked("chapter 6 §5, 'Falcon's eager path adds the row twice'")
    from test_crosscheck import _tiny_falcon_alibi

    heads, head_dim, L = 4, 8, 7
    model = _tiny_falcon_alibi("eager", heads, head_dim)
    torch.nn.init.zeros_(model.h[0].self_attention.query_key_value.weight)  # q = k = 0: the bias alone
    with torch.no_grad():
        w = model(torch.arange(L)[None], output_attentions=True).attentions[0][0]
    twice = pl.alibi_bias(heads, L, slopes=2 * pl.alibi_slopes(heads) / math.sqrt(head_dim)).softmax(-1)
    once = pl.alibi_bias(heads, L, slopes=pl.alibi_slopes(heads) / math.sqrt(head_dim)).softmax(-1)
    torch.testing.assert_close(w, twice)
    assert not torch.allclose(w, once, atol=1e-3)


def test_ch06_bloom_eager_attention_adds_its_row_to_every_query_with_baddbmm():
    """Chapter 6 §5: BLOOM stores one bias row per head, but its eager attention adds it to q.k for every query
    with torch.baddbmm, so the (B * H, q, k) scores exist in full (the chapter reads their shape from outputs)."""
    transformers_as_checked("chapter 6 §5, 'BLOOM's eager attention adds the row with torch.baddbmm'")
    from transformers.models.bloom import modeling_bloom

    source = inspect.getsource(modeling_bloom.BloomAttention.forward)
    assert "baddbmm" in source and "alibi" in source


def test_ch06_flex_attention_score_mod_computes_alibi_inside_attention():
    """Chapter 6 §5: FlexAttention's score_mod(score, b, h, q_idx, kv_idx) can add ALiBi's bias from the slopes,
    with no bias tensor: the same output as pl.attention with the dense causal bias."""
    import warnings

    flex = pytest.importorskip("torch.nn.attention.flex_attention")
    H, L, d = 4, 16, 8
    q, k, v = torch.randn(3, 1, H, L, d, generator=torch.Generator().manual_seed(0)).unbind(0)
    slopes = pl.alibi_slopes(H)

    def alibi(score, b, h, q_idx, kv_idx):
        return torch.where(q_idx >= kv_idx, score - slopes[h] * (q_idx - kv_idx), float("-inf"))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # eager (unfused) flex_attention warns that it is not compiled
        out = flex.flex_attention(q, k, v, score_mod=alibi)
    torch.testing.assert_close(out, pl.attention(q, k, v, bias=pl.alibi_bias(H, L))[0], atol=1e-5, rtol=1e-5)


def test_ch08_deepseek_v3_rotates_the_last_features_with_one_key_for_every_head(monkeypatch):
    """Chapter 8 §2 (decoupled RoPE): in DeepseekV3Attention the rotated features come last in each head,
    the rotated key is one set shared by all heads, and the cache holds kv_lora_rank + qk_rope_head_dim
    numbers per token and layer (512 + 64 at DeepSeek-V3's sizes)."""
    transformers_as_checked("chapter 8 §2, DeepSeek's decoupled RoPE (rotated features last, one shared key)")
    from transformers import DeepseekV3Config, DynamicCache
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as m

    heads, nope, rope, latent, T = 3, 6, 4, 8, 5
    cfg = DeepseekV3Config(hidden_size=16, num_attention_heads=heads, num_key_value_heads=heads,
                           q_lora_rank=None, kv_lora_rank=latent, qk_nope_head_dim=nope, qk_rope_head_dim=rope,
                           v_head_dim=4, num_hidden_layers=1, vocab_size=16)
    cfg._attn_implementation = "eager"
    torch.manual_seed(0)
    attn = m.DeepseekV3Attention(cfg, layer_idx=0).eval()
    seen = []

    def spy(module, query, key, value, attention_mask, **kwargs):  # the states attention is given
        seen.append((query, key))
        return torch.zeros(query.shape[0], query.shape[2], query.shape[1], value.shape[-1]), None

    monkeypatch.setattr(m, "eager_attention_forward", spy)
    x = torch.randn(1, T, 16)
    angles = pl.rope_angles(T, rope)
    still = (torch.ones(1, T, rope), torch.zeros(1, T, rope))  # cos 1, sin 0: no rotation
    turned = tuple(torch.cat((t, t), dim=-1)[None] for t in (angles.cos(), angles.sin()))
    cache = DynamicCache(config=cfg)
    with torch.no_grad():
        attn(x, position_embeddings=still, attention_mask=None)
        attn(x, position_embeddings=turned, attention_mask=None, cache=cache)
    (q0, k0), (q1, k1) = seen
    moved_q = (q1 - q0).abs().amax(dim=(0, 1, 2)) > 0  # which of a head's features the rotation touched
    moved_k = (k1 - k0).abs().amax(dim=(0, 1, 2)) > 0
    assert moved_q.tolist() == [False] * nope + [True] * rope  # the rotated features come last
    assert moved_k.tolist() == [False] * nope + [True] * rope
    for h in range(1, heads):  # one rotated key, the same for every head
        assert torch.equal(k1[:, h, :, nope:], k1[:, 0, :, nope:])
    assert not torch.equal(k1[:, 1, :, :nope], k1[:, 0, :, :nope])  # (the content parts are per head)
    cached = sum(t.shape[-1] for t in (cache.layers[0].keys, cache.layers[0].values))
    assert cached == latent + rope  # the latent and the shared rotated key, nothing per head


def test_ch03_fairseq_builder_in_transformers_says_it_differs_slightly_from_the_paper():
    """Chapter 3 §2: fairseq's `get_embedding` docstring, as transformers ships it (M2M100), says its table
    "differs slightly" from the paper (the notebook checks the table's numbers)."""
    transformers_as_checked("chapter 3 §2, fairseq's docstring 'differs slightly'")
    from transformers.models.m2m_100.modeling_m2m_100 import M2M100SinusoidalPositionalEmbedding

    assert "differs slightly" in M2M100SinusoidalPositionalEmbedding.get_embedding.__doc__


def test_ch04_deberta_v3_facts_are_the_released_configs():
    """Chapter 4 §5 and §7 type in DeBERTa-v3's position settings (share_att_key, 256 position buckets,
    max_relative_positions -1 so max_position 512, no absolute positions at the input, a LayerNorm on the
    table). Here they are read from the authors' v3 base config (tests/data/configs/deberta-v3-base.json,
    sources in SOURCES.md), and transformers' DebertaV2Model built from them has what the chapter says."""
    transformers_as_checked("chapter 4 §5/§7, DeBERTa-v3's released position settings")
    import json

    from transformers import DebertaV2Config
    from transformers.models.deberta_v2 import modeling_deberta_v2 as hf_v2

    released = json.loads((Path(__file__).resolve().parent / "data" / "configs" / "deberta-v3-base.json").read_text())
    assert {k: released[k] for k in ("share_att_key", "position_buckets", "max_relative_positions",
                                      "max_position_embeddings", "position_biased_input", "norm_rel_ebd",
                                      "pos_att_type")} == {
        "share_att_key": True, "position_buckets": 256, "max_relative_positions": -1, "max_position_embeddings": 512,
        "position_biased_input": False, "norm_rel_ebd": "layer_norm", "pos_att_type": "p2c|c2p"}
    chapter = (Path(__file__).resolve().parents[1] / "notebooks" / "src" / "04_relative.py").read_text()
    assert ('share_att_key=True, position_buckets=256,\n                             max_relative_positions=-1, '
            'max_position_embeddings=512, norm_rel_ebd="layer_norm"') in chapter  # §7's cfg_v3 types these
    small = dict(released, hidden_size=16, num_attention_heads=2, intermediate_size=8, num_hidden_layers=1,
                 vocab_size=8)
    with torch.random.fork_rng():
        enc = hf_v2.DebertaV2Encoder(DebertaV2Config(**small))
        emb = hf_v2.DebertaV2Embeddings(DebertaV2Config(**small))
    assert enc.rel_embeddings.weight.shape == (2 * 256, 16) and enc.LayerNorm is not None  # 2 x 256 rows, normed
    assert emb.position_embeddings is None  # position_biased_input false: no absolute table at the input
