"""fn(q, k, positions) -> (q, k) for the shapes RoPE code comes in: Hugging Face's cos/sin form
(``from_hf``), an inference engine's flattened tokens (``from_engine``) and a function that rotates one
tensor (``from_one_tensor``). q is (batch, heads, seq, d), k (batch, kv_heads, seq, d) (kv_heads may be
fewer: grouped-query attention), positions (batch, seq) or (batch, seq, n) MRoPE coordinates.
"""
from __future__ import annotations

from typing import Callable

from torch import Tensor

Fn = Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]


def from_hf(apply_rotary_pos_emb: Callable, rotary_emb: Callable) -> Fn:
    """fn for Hugging Face's form: cos, sin = rotary_emb(x, position_ids); apply_rotary_pos_emb(q, k, cos, sin).

    rotary_emb: a model's rotary module (e.g. ``LlamaRotaryEmbedding(config)``) or any cos/sin builder
    with that call; MRoPE coordinates (batch, seq, n) are passed as transformers' (n, batch, seq).
    """
    def fn(q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        ids = positions.permute(2, 0, 1) if positions.dim() == 3 else positions
        cos, sin = rotary_emb(q, ids)
        return apply_rotary_pos_emb(q, k, cos, sin)

    return fn


def from_engine(forward: Callable) -> Fn:
    """fn for an inference engine's forward(positions, query, key) on flattened tokens (vLLM's form):
    positions (tokens,) (MRoPE: (n, tokens)), query (tokens, heads * head_dim) and key
    (tokens, kv_heads * head_dim)."""
    def fn(q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        B, _, T, d = q.shape
        flat = lambda x: x.transpose(1, 2).reshape(B * T, x.shape[1] * d)  # noqa: E731
        pos = positions.reshape(B * T, -1).T if positions.dim() == 3 else positions.reshape(B * T)
        out_q, out_k = forward(pos, flat(q), flat(k))
        back = lambda y, heads: y.reshape(B, T, heads, d).transpose(1, 2)  # noqa: E731
        return back(out_q, q.shape[1]), back(out_k, k.shape[1])

    return fn


def from_one_tensor(rope: Callable[[Tensor, Tensor], Tensor]) -> Fn:
    """fn for a function that rotates one tensor: rope(x, token_positions), x (..., seq, d) and
    token_positions (..., seq) (course assignments: Stanford CS336's run_rope(d_k, theta, max_seq_len,
    in_query_or_key, token_positions) with its first three arguments bound)."""
    def fn(q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        B = q.shape[0]
        expand = lambda x: positions[:, None].expand(B, x.shape[1], *positions.shape[1:])  # noqa: E731
        return rope(q, expand(q)), rope(k, expand(k))

    return fn
