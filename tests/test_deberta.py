"""DeBERTa's disentangled attention terms (posenc_lib.deberta)."""
import math

import pytest
import torch

import posenc_lib as pl


def delta(i: int, j: int, k: int) -> int:
    """The paper's delta(i, j): 0 for i - j <= -k, 2k - 1 for i - j >= k, else i - j + k."""
    if i - j <= -k:
        return 0
    if i - j >= k:
        return 2 * k - 1
    return i - j + k


@pytest.mark.parametrize("q_len,k_len,span", [(5, 5, 2), (4, 7, 3), (6, 3, 1), (1, 1, 4)])
def test_terms_match_a_naive_per_pair_loop(q_len, k_len, span):
    g = torch.Generator().manual_seed(q_len + 7 * k_len + 31 * span)
    d = 4
    qc, kc = torch.randn(q_len, d, generator=g, dtype=torch.float64), torch.randn(k_len, d, generator=g, dtype=torch.float64)
    qr, kr = (torch.randn(2 * span, d, generator=g, dtype=torch.float64) for _ in range(2))
    c2c, c2p, p2c = pl.deberta_terms(qc, kc, qr, kr)
    for i in range(q_len):
        for j in range(k_len):
            torch.testing.assert_close(c2c[i, j], qc[i] @ kc[j])
            torch.testing.assert_close(c2p[i, j], qc[i] @ kr[delta(i, j, span)])
            torch.testing.assert_close(p2c[i, j], kc[j] @ qr[delta(j, i, span)])
    torch.testing.assert_close(pl.deberta_scores(qc, kc, qr, kr), (c2c + c2p + p2c) / math.sqrt(3 * d))


def test_relative_index_is_query_minus_key_clipped_into_2k_rows():
    idx = pl.deberta_relative_index(4, 4, 2)
    assert idx.tolist() == [[2, 1, 0, 0], [3, 2, 1, 0], [3, 3, 2, 1], [3, 3, 3, 2]]
    assert all(idx[i, j] == delta(i, j, 2) for i in range(4) for j in range(4))


def test_batched_heads_broadcast():
    qc, kc = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8)
    qr, kr = torch.randn(3, 6, 8), torch.randn(3, 6, 8)
    c2c, c2p, p2c = pl.deberta_terms(qc, kc, qr, kr)
    assert c2p.shape == p2c.shape == (2, 3, 5, 5)
    torch.testing.assert_close(p2c[1, 2], pl.deberta_terms(qc[1, 2], kc[1, 2], qr[2], kr[2])[2])


def test_matches_hugging_face_deberta_relative_terms_with_the_reference_p2c_index():
    """transformers' disentangled_att_bias is c2p + p2c with p2c at delta(i, j), not the paper's delta(j, i)."""
    mod = pytest.importorskip("transformers.models.deberta.modeling_deberta")
    from transformers import DebertaConfig

    torch.manual_seed(0)
    cfg = DebertaConfig(hidden_size=8, num_attention_heads=2, intermediate_size=16, max_relative_positions=4,
                        relative_attention=True, pos_att_type=["c2p", "p2c"])
    att = mod.DisentangledSelfAttention(cfg).eval()
    q, k = torch.randn(1, 2, 6, 4), torch.randn(1, 2, 6, 4)
    rel_emb = torch.randn(8, 8)  # 2 * max_relative_positions rows, hidden_size wide
    with torch.no_grad():
        rel_pos = mod.build_relative_position(q, k)  # query minus key, (1, q_len, k_len)
        hf = att.disentangled_att_bias(q, k, rel_pos, rel_emb, scale_factor=3)
        k_r = att.transpose_for_scores(att.pos_proj(rel_emb)[None])[0]  # (heads, 2k, d)
        q_r = att.transpose_for_scores(att.pos_q_proj(rel_emb)[None])[0]
    _, c2p, _ = pl.deberta_terms(q, k, q_r, k_r)
    _, _, p2c_ref = pl.deberta_terms(q, k, q_r / math.sqrt(3 * 4), k_r, p2c_index="reference")
    _, _, p2c_paper = pl.deberta_terms(q, k, q_r / math.sqrt(3 * 4), k_r)
    torch.testing.assert_close(hf, c2p + p2c_ref)
    assert not torch.allclose(hf, c2p + p2c_paper, atol=1e-3)


def test_reference_p2c_index_matches_both_released_recipes():
    """transformers: gather k_c q_r^T (key rows) with clip(-(i - j) + k), transpose; microsoft/DeBERTa
    (DeBERTa/deberta/disentangled_attention.py): gather q_r k_c^T along dim -2 with c2p's clip(i - j + k)."""
    g = torch.Generator().manual_seed(3)
    L, span, d = 7, 3, 4
    qc, kc, qr, kr = (torch.randn(n, d, generator=g, dtype=torch.float64) for n in (L, L, 2 * span, 2 * span))
    i_minus_j = -pl.relative_positions(L, L)
    hf_style = torch.gather(kc @ qr.T, -1, (-i_minus_j + span).clamp(0, 2 * span - 1)).T
    ms_style = torch.gather(qr @ kc.T, -2, (i_minus_j + span).clamp(0, 2 * span - 1))
    _, _, p2c_ref = pl.deberta_terms(qc, kc, qr, kr, p2c_index="reference")
    torch.testing.assert_close(hf_style, p2c_ref)
    torch.testing.assert_close(ms_style, p2c_ref)


def test_reference_p2c_index_is_delta_i_j():
    qc, kc, qr, kr = torch.randn(4, 3), torch.randn(4, 3), torch.randn(4, 3), torch.randn(4, 3)
    _, _, p2c = pl.deberta_terms(qc, kc, qr, kr, p2c_index="reference")
    for i in range(4):
        for j in range(4):
            torch.testing.assert_close(p2c[i, j], kc[j] @ qr[delta(i, j, 2)])


@pytest.mark.parametrize(
    "call,msg",
    [
        (lambda: pl.deberta_relative_index(3, 3, 0), "span must be an integer >= 1"),
        (lambda: pl.deberta_terms(torch.randn(3, 4), torch.randn(3, 4), torch.randn(4, 4), torch.randn(4, 4),
                                  p2c_index="code"), "p2c_index must be one of"),
        (lambda: pl.deberta_terms(torch.randn(3, 4), torch.randn(3, 4), torch.randn(5, 4), torch.randn(5, 4)),
         "q_r.shape[-2] must be an even number"),
        (lambda: pl.deberta_terms(torch.randn(3, 4), torch.randn(3, 4), torch.randn(4, 4), torch.randn(6, 4)),
         "k_r.shape[-2] must equal q_r.shape[-2]=4"),
        (lambda: pl.deberta_terms(torch.randn(3, 4), torch.randn(3, 5), torch.randn(4, 4), torch.randn(4, 4)),
         "k_c.shape[-1] must be 4"),
        (lambda: pl.deberta_scores(torch.randn(4), torch.randn(3, 4), torch.randn(4, 4), torch.randn(4, 4)),
         "q_c must be a tensor of shape"),
    ],
)
def test_bad_input_raises_value_error_naming_the_parameter(call, msg):
    with pytest.raises(ValueError) as e:
        call()
    assert msg in str(e.value)


def test_deberta_log_bucket_is_exact_near_signed_and_uncapped():
    d = torch.arange(-2000, 2001)
    b = pl.deberta_log_bucket(d)  # v3: 256 buckets, max_position 512
    assert torch.equal(b, -pl.deberta_log_bucket(-d))  # symmetric
    assert torch.equal(b[(d.abs() <= 128)], d[d.abs() <= 128])  # exact to h = 128 ...
    assert b[d == 131].item() == 131 and b[d == 132].item() == 131  # ... and by the ceiling a little past it
    assert b[d == 511].item() == 255 and b[d == 512].item() == 256  # h + h - 1 at max_position - 1, then no cap
    assert bool((b[1:] >= b[:-1]).all())  # monotone in the distance
    # hand-computed far bucket: 128 + ceil(ln(300/128) / ln(511/128) * 127)
    assert pl.deberta_log_bucket(torch.tensor([300])).item() == 128 + math.ceil(math.log(300 / 128) / math.log(511 / 128) * 127)


@pytest.mark.parametrize("kwargs, name", [(dict(position_buckets=2), "position_buckets"),
                                         (dict(position_buckets=256, max_position=129), "max_position")])
def test_deberta_log_bucket_rejects_bad_settings(kwargs, name):
    with pytest.raises(ValueError, match=name):
        pl.deberta_log_bucket(torch.arange(5), **kwargs)
    with pytest.raises(ValueError, match="relative_position"):
        pl.deberta_log_bucket(torch.arange(5.0))
