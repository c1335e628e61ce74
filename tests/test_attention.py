"""Teaching attention (posenc_lib.attention) against PyTorch's fused kernel."""
import torch
import torch.nn.functional as F

import posenc_lib as pl


def test_attention_matches_sdpa_with_bias_and_causal():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8), torch.randn(2, 3, 6, 8)
    bias = torch.randn(3, 6, 6)
    out, w = pl.attention(q, k, v, bias=bias)
    torch.testing.assert_close(out, F.scaled_dot_product_attention(q, k, v, attn_mask=bias))
    torch.testing.assert_close(w.sum(-1), torch.ones(2, 3, 6))
    out_c, w_c = pl.attention(q, k, v, causal=True)
    torch.testing.assert_close(out_c, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    assert (w_c.triu(1) == 0).all()


def test_causal_mask_aligns_queries_to_the_end():
    assert pl.causal_mask(2, 4).tolist() == [[False, False, False, True], [False, False, False, False]]
