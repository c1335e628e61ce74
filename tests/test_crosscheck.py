"""Cross-checks against widely used implementations, built offline from small configs."""
import pytest
import torch

import posenc_lib as pl

pytestmark = pytest.mark.crosscheck
transformers = pytest.importorskip("transformers")


@pytest.mark.parametrize("head_dim,theta", [(16, 10000.0), (64, 500000.0)])
def test_half_layout_matches_hf_llama_rotary(head_dim, theta):
    """HF LlamaRotaryEmbedding + apply_rotary_pos_emb is the half layout."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    heads = 4
    cfg = LlamaConfig(hidden_size=heads * head_dim, num_attention_heads=heads, max_position_embeddings=256,
                      rope_parameters={"rope_type": "default", "rope_theta": theta})
    rot = LlamaRotaryEmbedding(cfg)
    g = torch.Generator().manual_seed(head_dim)
    q, k = torch.randn(2, heads, 37, head_dim, generator=g), torch.randn(2, heads, 37, head_dim, generator=g)
    pos = torch.arange(100, 137).expand(2, -1)
    cos, sin = rot(q, pos)
    hq, hk = apply_rotary_pos_emb(q, k, cos, sin)
    # Both sides compute float32 angles up to 137 rad, where one ulp is 1.5e-5 rad; HF rounds
    # 1/base**x and we round base**-x, so entries may differ by a few ulps times |x|.
    torch.testing.assert_close(pl.apply_rope(q, pos, base=theta, layout="half"), hq, atol=1e-4, rtol=1e-5)
    torch.testing.assert_close(pl.apply_rope(k, pos, base=theta, layout="half"), hk, atol=1e-4, rtol=1e-5)


def meta_precompute_freqs_cis(dim: int, end: int, theta: float = 10000.0) -> torch.Tensor:
    """Meta LLaMA's complex-number form, restated: e^{i m theta_j} as a (end, dim/2) complex tensor."""
    freqs = 1.0 / theta ** (torch.arange(0, dim, 2).float() / dim)
    angles = torch.outer(torch.arange(end).float(), freqs)
    return torch.polar(torch.ones_like(angles), angles)


def meta_apply_rotary_emb(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """x: (batch, seq, heads, head_dim) as in Meta's code; pairs (2j, 2j+1) become complex numbers."""
    xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
    rotated = xc * freqs_cis[None, :, None, :]
    return torch.view_as_real(rotated).flatten(3).type_as(x)


def test_interleaved_layout_matches_meta_complex_form():
    x = torch.randn(2, 11, 3, 32)  # Meta's (batch, seq, heads, head_dim)
    ref = meta_apply_rotary_emb(x, meta_precompute_freqs_cis(32, 11))
    ours = pl.apply_rope(x.transpose(1, 2)).transpose(1, 2)
    torch.testing.assert_close(ours, ref, atol=1e-5, rtol=1e-5)


def test_meta_checkpoint_runs_in_hf_layout_after_permuting_qk_rows():
    """HF's LLaMA conversion permutes W_q/W_k rows per head; then half layout == Meta's interleaved."""
    d_model, heads, hd = 32, 2, 16
    W_q = torch.randn(d_model, d_model)
    x = torch.randn(9, d_model)
    q_meta = (x @ W_q.T).view(9, heads, hd).transpose(0, 1)  # (heads, seq, hd)
    P = pl.layout_permutation(hd)
    W_q_hf = W_q.view(heads, hd, d_model)[:, P].reshape(d_model, d_model)
    q_hf = (x @ W_q_hf.T).view(9, heads, hd).transpose(0, 1)
    torch.testing.assert_close(pl.apply_rope(q_hf, layout="half"), pl.apply_rope(q_meta)[..., P], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("heads", [4, 6, 12])
def test_causal_alibi_gives_bloom_attention(heads):
    """BLOOM adds m*j (not -m*(i-j)): a per-row constant, so the softmax is identical."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    L = 10
    bloom = build_alibi_tensor(torch.ones(1, L), heads, torch.float32).view(heads, 1, L)
    torch.testing.assert_close(bloom[:, 0, 1:2].flatten(), pl.alibi_slopes(heads))  # same slopes
    scores = torch.randn(heads, L, L)
    mask = torch.ones(L, L).triu(1).bool()
    ref = (scores + bloom).masked_fill(mask, float("-inf")).softmax(-1)
    ours = (scores + pl.alibi_bias(heads, L)).softmax(-1)
    torch.testing.assert_close(ours, ref)


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets,max_distance", [(32, 128), (8, 16), (64, 300)])
def test_t5_bucket_matches_hf_t5(bidirectional, num_buckets, max_distance):
    from transformers.models.t5.modeling_t5 import T5Attention

    rel = pl.relative_positions(40, 700)
    ref = T5Attention._relative_position_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    ours = pl.t5_relative_bucket(rel, bidirectional=bidirectional, num_buckets=num_buckets, max_distance=max_distance)
    assert torch.equal(ours, ref)
