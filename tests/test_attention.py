"""Teaching attention (posenc_lib.attention) against PyTorch's fused kernel."""
import re

import pytest
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


def test_causal_linear_attention_two_tokens_by_hand():
    """With phi = 1 and d = 1, out_0 = v_0 and out_1 = (gamma v_0 + v_1) / (gamma + 1)."""
    ones, v = torch.ones(2, 1), torch.tensor([[2.0], [5.0]])
    for gamma in (1.0, 0.5):
        out = pl.causal_linear_attention(ones, ones, v, decay=gamma)
        torch.testing.assert_close(out, torch.tensor([[2.0], [(gamma * 2.0 + 5.0) / (gamma + 1.0)]]))


def test_causal_linear_attention_equals_the_quadratic_form():
    """The recurrence equals (q_num k_num^T * D) v / rowsum(phi_q phi_k^T * D), D[i, j] = gamma_h**(i - j), j <= i."""
    g = torch.Generator().manual_seed(0)
    B, H, L, d, dv = 2, 3, 9, 4, 5
    phi_q, phi_k = (F.elu(torch.randn(B, H, L, d, generator=g)) + 1 for _ in range(2))
    q_num, k_num, v = (torch.randn(B, H, L, n, generator=g) for n in (d, d, dv))
    gamma = torch.tensor([1.0, 0.9, 0.3])
    i = torch.arange(L)
    dist = i.view(-1, 1) - i.view(1, -1)
    D = torch.where(dist >= 0, gamma.view(-1, 1, 1) ** dist.clamp(min=0), torch.zeros(()))
    num = (q_num @ k_num.transpose(-1, -2) * D) @ v
    den = (phi_q @ phi_k.transpose(-1, -2) * D).sum(-1, keepdim=True)
    out = pl.causal_linear_attention(phi_q, phi_k, v, decay=gamma, q_num=q_num, k_num=k_num)
    torch.testing.assert_close(out, num / den)
    # Defaults: the numerator uses phi_q, phi_k; decay 1 is the plain causal mask.
    plain = phi_q @ phi_k.transpose(-1, -2) * (dist >= 0)
    torch.testing.assert_close(pl.causal_linear_attention(phi_q, phi_k, v), (plain @ v) / plain.sum(-1, keepdim=True))


@pytest.mark.parametrize("kwargs,message", [
    ({"decay": 0.0}, "decay must be in (0, 1]"),
    ({"decay": 1.5}, "decay must be in (0, 1]"),
    ({"decay": torch.tensor([0.5, -1.0])}, "decay must be in (0, 1]"),
    ({"q_num": torch.ones(2, 6, 4)}, "q_num must have the shape of phi_q"),
    ({"v": torch.ones(2, 4, 3)}, "v must have shape (2, 5) + (d_v,)"),
    ({"phi_k": torch.ones(4)}, "phi_k must be a tensor of shape"),
])
def test_causal_linear_attention_rejects_bad_input(kwargs, message):
    args = {"phi_q": torch.ones(2, 5, 4), "phi_k": torch.ones(2, 5, 4), "v": torch.ones(2, 5, 3)}
    args.update(kwargs)
    phi_q, phi_k, v = args.pop("phi_q"), args.pop("phi_k"), args.pop("v")
    with pytest.raises(ValueError, match=re.escape(message)):
        pl.causal_linear_attention(phi_q, phi_k, v, **args)
