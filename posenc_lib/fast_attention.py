"""Attention with a relative-position bias (ALiBi, T5) that never builds the (H, L, L) bias.

A bias that depends only on the offset j - i (key minus query) is a Toeplitz matrix:
every row is the previous one shifted by one. So one "ramp" of 2K - 1 values per head,
ramp[h, t] = bias for offset t - (K - 1), holds all of it, and the (H, q_len, K) bias is a
zero-copy strided view of the ramp (``Tensor.as_strided`` with row stride 1 after the
queries are taken in reverse order). PyTorch's CPU flash-attention kernel reads that view
through its strides, so the extra memory is O(H K) instead of O(H L^2): the sources'
precomputed maxpos x maxpos bias would need 34 GB at L = 32768, H = 8.

The queries are processed in chunks (sized by a memory budget, in case a backend copies
the mask): in causal mode a chunk only attends to keys up to its last query, which skips
the masked half of the work as ``is_causal=True`` does.
On a GPU (CUDA, float16/bfloat16/float32, head dimension >= 16) the same results come from
FlexAttention instead (``kernels/flex.py``): the bias is added to each score inside one fused
kernel (ALiBi's from the slopes alone, any other from the ramp), with a causal block mask, so
there too no (H, L, L) tensor exists; chunk_size and memory_budget then do not apply.
Names: q_len (index i), k_len = K (index j), H heads, D head dimension.
Taught in: notebooks/06_alibi.ipynb
"""
from __future__ import annotations

from typing import Callable

import torch
import torch.nn.functional as F
from torch import Tensor

from . import _validate as v
from .alibi import alibi_bias, alibi_slopes
from .kernels import flex
from .relative import T5RelativeBias, relative_positions, t5_relative_bucket

# Bytes a chunk's (H, chunk, K) bias may take if a backend materialises it.
DEFAULT_MEMORY_BUDGET = 256 * 2**20
FAST_MODES = ("causal", "symmetric")


def _check_qkv(q: Tensor, k: Tensor, v_: Tensor) -> None:
    """(batch, heads, seq, d) q, k, v (``_validate.qkv``), the queries being the last positions of the keys."""
    v.qkv(q, k, v_, dims=4)
    if k.shape[-2] < q.shape[-2]:
        raise ValueError(f"k_len must be >= q_len={q.shape[-2]} (queries are the last positions), got {k.shape[-2]}")


def chunk_size_for(num_heads: int, k_len: int, *, memory_budget: int = DEFAULT_MEMORY_BUDGET,
                   element_size: int = 4) -> int:
    """Queries per chunk so that one chunk's (H, chunk, k_len) bias fits in memory_budget bytes.

    returns: an int >= 1
    """
    num_heads = v.int_at_least("num_heads", num_heads, 1)
    k_len = v.int_at_least("k_len", k_len, 0)
    memory_budget = v.int_at_least("memory_budget", memory_budget, 1)
    return max(1, memory_budget // max(1, num_heads * k_len * element_size))


def toeplitz_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    ramp: Tensor,
    *,
    causal: bool = False,
    chunk_size: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
    scale: float | None = None,
) -> Tensor:
    """softmax(q k^T * scale + bias) v for a bias that depends only on the offset j - i.

    q: (B, H, q_len, D); k: (B, H, K, D); v: (B, H, K, D_v); queries are the last q_len
    positions of the K keys (so q_len == K for self-attention).
    ramp: (H, 2K - 1): ramp[h, t] is the bias of head h at offset j - i = t - (K - 1)
          (-inf hides a key). Built once; the (H, q_len, K) bias is only ever a view of it.
    causal: additionally hide keys after each query (and skip computing them)
    scale: defaults to 1/sqrt(D), as in ``posenc_lib.attention``
    returns: (B, H, q_len, D_v)
    Taught in: notebooks/06_alibi.ipynb
    """
    _check_qkv(q, k, v)
    num_heads, q_len, k_len = q.shape[1], q.shape[-2], k.shape[-2]
    if not isinstance(ramp, Tensor) or tuple(ramp.shape) != (num_heads, 2 * k_len - 1):
        raise ValueError(f"ramp must have shape ({num_heads}, {2 * k_len - 1}) = (heads, 2 * k_len - 1), "
                         f"got {getattr(ramp, 'shape', type(ramp))}")
    if q_len == 0:
        return q.new_empty((*q.shape[:-1], v.shape[-1]))
    if flex.applies(q, k, v):
        return flex.ramp_attention(q, k, v, ramp, causal=causal, scale=scale)
    if chunk_size is None:
        chunk_size = chunk_size_for(num_heads, k_len, memory_budget=memory_budget, element_size=q.element_size())
    chunk_size = _chunk_arg(chunk_size)
    ramp = ramp.to(q.dtype).contiguous()
    # Reversed query r sits at position K - 1 - r; its bias row over keys j is
    # ramp[j - (K - 1 - r) + K - 1] = ramp[r + j]: row stride +1, a plain strided view.
    q_rev = q.flip(-2)
    out_rev = q.new_empty((*q.shape[:-1], v.shape[-1]))
    row = ramp.stride(0)
    for r0 in range(0, q_len, chunk_size):
        r1 = min(q_len, r0 + chunk_size)
        keys = k_len - r0 if causal else k_len  # the chunk's latest query is at K - 1 - r0
        bias = ramp.as_strided((1, num_heads, r1 - r0, keys), (0, row, 1, 1), ramp.storage_offset() + r0)
        out_rev[..., r0:r1, :] = F.scaled_dot_product_attention(
            q_rev[..., r0:r1, :], k[..., :keys, :], v[..., :keys, :], attn_mask=bias, scale=scale)
    return out_rev.flip(-2)


def _chunk_arg(chunk_size: object) -> int:
    return v.int_at_least("chunk_size", chunk_size, 1)


def alibi_ramp(num_heads: int, k_len: int, *, mode: str = "causal", slopes: Tensor | None = None,
               device: torch.device | str | None = None, dtype: torch.dtype = torch.float32) -> Tensor:
    """ALiBi's bias per offset: (H, 2 k_len - 1), entry t for offset j - i = t - (k_len - 1).

    The past half is the last row of ``alibi_bias`` (the same numbers, bit for bit); the
    future half is -inf (causal) or its mirror image (symmetric: -m_h |j - i|).
    Taught in: notebooks/06_alibi.ipynb
    """
    mode = v.one_of("mode", mode, FAST_MODES)
    k_len = v.int_at_least("k_len", k_len, 1)
    past = alibi_bias(num_heads, 1, k_len, mode=mode, slopes=slopes, device=device, dtype=dtype)[:, 0, :]
    future = past.flip(-1)[:, 1:] if mode == "symmetric" else torch.full_like(past[:, 1:], float("-inf"))
    return torch.cat((past, future), dim=-1)


def alibi_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    *,
    mode: str = "causal",
    slopes: Tensor | None = None,
    chunk_size: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> Tensor:
    """ALiBi attention without the (H, L, L) bias: equals
    ``attention(q, k, v, bias=alibi_bias(H, q_len, k_len, mode=mode, slopes=slopes))[0]``.

    q: (B, H, q_len, D); k, v: (B, H, k_len, D), k_len >= q_len (queries are the last
    positions). mode: "causal" or "symmetric".
    Memory: O(H k_len) for the bias instead of O(H q_len k_len); causal mode skips the
    hidden keys. chunk_size (queries per chunk) defaults to what memory_budget allows.
    returns: (B, H, q_len, D)
    Taught in: notebooks/06_alibi.ipynb
    """
    _check_qkv(q, k, v)
    mode = _mode_arg(mode)
    if flex.applies(q, k, v):
        if slopes is None:
            slopes = alibi_slopes(q.shape[1], device=q.device)
        elif not isinstance(slopes, Tensor) or slopes.shape != (q.shape[1],):
            raise ValueError(f"slopes must have shape ({q.shape[1]},), got {tuple(getattr(slopes, 'shape', ()))}")
        return flex.alibi_attention(q, k, v, slopes, causal=mode == "causal")
    ramp = alibi_ramp(q.shape[1], k.shape[-2], mode=mode, slopes=slopes, device=q.device)
    return toeplitz_attention(q, k, v, ramp, causal=mode == "causal", chunk_size=chunk_size,
                              memory_budget=memory_budget)


def _mode_arg(mode: object) -> str:
    return v.one_of("mode", mode, FAST_MODES)


def relative_bias_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    bias_of_offset: Callable[[Tensor], Tensor],
    *,
    causal: bool = False,
    chunk_size: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> Tensor:
    """Attention with any bias that depends only on the offset j - i, without the (H, L, L) matrix.

    bias_of_offset(offsets) -> (H, *offsets.shape): the bias of each head for integer
    offsets (key minus query), called once on the (1, 2 k_len - 1) offsets
    -(k_len - 1) .. k_len - 1. Equals ``attention(q, k, v, bias=B, causal=causal)[0]``
    where B[h, i, j] = bias_of_offset(relative_positions(q_len, k_len, q_offset=k_len - q_len))[h, i, j].
    q: (B, H, q_len, D); k, v: (B, H, k_len, D)
    returns: (B, H, q_len, D)
    Taught in: notebooks/04_relative.ipynb
    """
    _check_qkv(q, k, v)
    k_len = k.shape[-2]
    offsets = relative_positions(1, 2 * k_len - 1, q_offset=k_len - 1, device=q.device)  # (1, 2K-1)
    ramp = bias_of_offset(offsets)
    if not isinstance(ramp, Tensor) or tuple(ramp.shape) != (q.shape[1], 1, 2 * k_len - 1):
        raise ValueError(f"bias_of_offset must return shape (heads={q.shape[1]}, *offsets.shape) = "
                         f"({q.shape[1]}, 1, {2 * k_len - 1}), got {getattr(ramp, 'shape', type(ramp))}")
    ramp = ramp[:, 0, :]
    if causal:
        ramp = ramp.masked_fill(offsets[0] > 0, float("-inf"))
    return toeplitz_attention(q, k, v, ramp, causal=causal, chunk_size=chunk_size, memory_budget=memory_budget)


def t5_attention(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    t5: T5RelativeBias,
    *,
    causal: bool | None = None,
    chunk_size: int | None = None,
    memory_budget: int = DEFAULT_MEMORY_BUDGET,
) -> Tensor:
    """Attention with T5's learned bucket bias, without the (H, L, L) bias.

    Equals ``attention(q, k, v, bias=t5(q_len, k_len), causal=causal)[0]`` for
    q_len == k_len. causal defaults to ``not t5.bidirectional`` (T5's decoder).
    q: (B, H, L, D) with H == t5.num_heads; k, v: (B, H, L, D)
    returns: (B, H, L, D)
    Taught in: notebooks/04_relative.ipynb
    """
    if not isinstance(t5, T5RelativeBias):
        raise ValueError(f"t5 must be a posenc_lib.T5RelativeBias, got {type(t5).__name__}")
    _check_qkv(q, k, v)
    if q.shape[1] != t5.num_heads:
        raise ValueError(f"q.shape[1] (heads) must equal t5.num_heads={t5.num_heads}, got {q.shape[1]}")
    if q.shape[-2] != k.shape[-2]:
        raise ValueError(f"t5_attention needs q_len == k_len (T5RelativeBias puts queries first), "
                         f"got {q.shape[-2]} and {k.shape[-2]}")

    def bias_of_offset(offsets: Tensor) -> Tensor:
        buckets = t5_relative_bucket(offsets, bidirectional=t5.bidirectional, num_buckets=t5.num_buckets,
                                     max_distance=t5.max_distance)
        return t5.embedding(buckets).permute(2, 0, 1)  # as T5RelativeBias.forward

    return relative_bias_attention(q, k, v, bias_of_offset, causal=(not t5.bidirectional) if causal is None else causal,
                                   chunk_size=chunk_size, memory_budget=memory_budget)
