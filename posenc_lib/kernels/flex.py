"""Attention with a bias of the offset j - i through FlexAttention: ALiBi and T5 on a GPU, one kernel.

``fast_attention`` computes ``softmax(q k^T * scale + bias) v`` without the (H, L, L) bias by
handing SDPA a strided view of one ramp of 2L - 1 values per head. On a GPU, SDPA's fused
kernels take no such mask (PyTorch then copies it out or falls back to the math kernel), so
there the bias goes into the attention kernel itself: ``torch.nn.attention.flex_attention``
compiles a FlashAttention-style kernel that calls a ``score_mod(score, b, h, q_idx, kv_idx)``
on each score in registers, and skips the key blocks a block mask marks empty.
* ALiBi: score + m_h * -|j - i|, the slope read per head, the distance computed in registers:
  nothing of size L is read at all.
* any bias of j - i (T5's buckets, ``toeplitz_attention``): score + ramp[h, j - i + K - 1], one
  gather from the (H, 2K - 1) ramp (a few KB, cache-resident); gradients reach the ramp.
* causal: a block mask of 128 x 128 tiles built from block indices alone (``causal_block_mask``):
  no (L, L) boolean mask (``create_block_mask`` would evaluate one), no value read back to the
  host. It is rebuilt per call, eagerly, and handed to the compiled function (about 20 small
  kernels, microseconds next to the attention); a model that wants to skip even that can build
  it once per length and keep it, as a module.
* offsets (where query i sits among the keys) reach the score_mods and mask_mods as 0-d tensors
  (``_scalar``), never as Python ints: see there.
Queries are the last q_len of the K keys (query i sits at position K - q_len + i), as in
``fast_attention``. The CPU keeps ``fast_attention``'s path (FlexAttention runs there, eagerly
and materialising the scores, which is what the tests use to check the score_mods); float64
and head dimensions under 16 stay there too (FlexAttention's GPU kernel has neither).
Taught in: notebooks/06_alibi.ipynb (the bias that is never built)
"""
from __future__ import annotations

import warnings
from typing import Callable

import torch
from torch import Tensor
from torch.nn.attention.flex_attention import BlockMask, flex_attention

DEVICES = ("cuda",)
DTYPES = (torch.float16, torch.bfloat16, torch.float32)
BLOCK = 128  # FlexAttention's default sparse block size (queries and keys)

# One compiled function per form, built on first use (functions, never tensors).
_COMPILED: dict[str, Callable[..., Tensor]] = {}


def applies(q: Tensor, k: Tensor, v: Tensor) -> bool:
    """A device in ``DEVICES``, a dtype in ``DTYPES``, head dimensions of at least 16, non-empty queries
    (shapes and dtypes only; ``fast_attention`` has checked the shapes agree)."""
    return (q.device.type in DEVICES and q.dtype in DTYPES and q.shape[-1] >= 16 and v.shape[-1] >= 16
            and q.shape[-2] > 0)


def _ordered(blocks: Tensor) -> tuple[Tensor, Tensor]:
    """(number of True per row, their column indices first) of a (rows, cols) block matrix, as BlockMask
    wants them: (1, 1, rows) and (1, 1, rows, cols) int32."""
    count = blocks.sum(-1, dtype=torch.int32)
    order = torch.argsort(blocks.to(torch.int32), dim=-1, descending=True, stable=True).to(torch.int32)
    return count[None, None], order[None, None]


def _scalar(value: int, device: torch.device) -> Tensor:
    """A 0-d int32 tensor on ``device`` (a fill kernel, no copy from the host). score_mods and mask_mods read
    offsets from such tensors, never from Python ints: under torch.compile's dynamic shapes a captured int
    becomes a symbol that inductor fails to lower (torch 2.11 on an H200, torch 2.13 on the CPU, at the
    second length)."""
    return torch.full((), value, dtype=torch.int32, device=device)


def causal_block_mask(q_len: int, k_len: int, device: torch.device) -> BlockMask:
    """The causal mask of queries that are the last q_len of k_len keys, as 128 x 128 tiles.

    A tile is full (every key visible to every query: no mask evaluated) when its last key is at
    or before its first query and it lies inside both sequences; partial (``mask_mod`` decides per
    score) when its first key is at or before its last query; skipped otherwise.
    """
    off = k_len - q_len
    rows = torch.arange(-(-q_len // BLOCK), device=device)[:, None]
    cols = torch.arange(-(-k_len // BLOCK), device=device)[None, :]
    first_q, last_q = rows * BLOCK + off, torch.clamp(rows * BLOCK + BLOCK - 1, max=q_len - 1) + off
    first_k, last_k = cols * BLOCK, cols * BLOCK + BLOCK - 1
    inside = (rows * BLOCK + BLOCK <= q_len) & (last_k < k_len)
    full = (last_k <= first_q) & inside
    partial = (first_k <= last_q) & ~full

    shift = _scalar(off, device)

    def mask_mod(b, h, q_idx, kv_idx):
        return kv_idx <= q_idx + shift

    return BlockMask.from_kv_blocks(*_ordered(partial), *_ordered(full), BLOCK_SIZE=BLOCK, mask_mod=mask_mod,
                                    seq_lengths=(q_len, k_len))


def _mask(q: Tensor, k: Tensor, causal: bool) -> BlockMask | None:
    return causal_block_mask(q.shape[-2], k.shape[-2], q.device) if causal else None


def _alibi(q: Tensor, k: Tensor, v: Tensor, slopes: Tensor, mask: BlockMask | None, off: Tensor) -> Tensor:
    # off: query i sits at position i + off (a 0-d tensor, see _scalar)
    def score_mod(score, b, h, q_idx, kv_idx):
        distance = (kv_idx - q_idx - off).abs()  # as alibi_bias: -|j - i| as an integer, then times m_h
        return score + (slopes[h] * (-distance).to(slopes.dtype)).to(score.dtype)

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=mask)


def _ramp(q: Tensor, k: Tensor, v: Tensor, ramp: Tensor, mask: BlockMask | None, last: Tensor,
          scale: float | None) -> Tensor:
    # last = q_len - 1 (a 0-d tensor): ramp index of offset j - i is (j - i) + K - 1 = kv_idx - q_idx + last
    def score_mod(score, b, h, q_idx, kv_idx):
        return score + ramp[h, kv_idx - q_idx + last].to(score.dtype)

    return flex_attention(q, k, v, score_mod=score_mod, block_mask=mask, scale=scale)


def _run(name: str, fn: Callable[..., Tensor], q: Tensor, *args) -> Tensor:
    """fn compiled on a GPU (FlexAttention's fused kernel); eager on the CPU, on purpose (the tests check
    the score_mods there, where FlexAttention materialises the scores and says so in a warning)."""
    if q.device.type == "cpu":
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", "flex_attention called without torch.compile", UserWarning)
            return fn(q, *args)
    if name not in _COMPILED:
        _COMPILED[name] = torch.compile(fn)
    return _COMPILED[name](q, *args)


def _causal(q: Tensor, k: Tensor, v: Tensor, mask: BlockMask) -> Tensor:
    return flex_attention(q, k, v, block_mask=mask)


def causal_attention(q: Tensor, k: Tensor, v: Tensor) -> Tensor:
    """Plain causal attention through FlexAttention (no bias): the control ``benchmarks/bench_attention.py``
    times the biased forms against, so what the bias itself costs shows."""
    return _run("causal", _causal, q, k, v, _mask(q, k, True))


def alibi_attention(q: Tensor, k: Tensor, v: Tensor, slopes: Tensor, *, causal: bool) -> Tensor:
    """``fast_attention.alibi_attention``'s result through FlexAttention.

    q: (B, H, q_len, D); k, v: (B, H, K, D), K >= q_len; slopes: (H,) on q's device
    causal: hide keys after each query (else symmetric: -m_h |j - i|)
    returns: (B, H, q_len, D)
    """
    return _run("alibi", _alibi, q, k, v, slopes, _mask(q, k, causal),
                _scalar(k.shape[-2] - q.shape[-2], q.device))


def ramp_attention(q: Tensor, k: Tensor, v: Tensor, ramp: Tensor, *, causal: bool,
                   scale: float | None = None) -> Tensor:
    """``fast_attention.toeplitz_attention``'s result through FlexAttention: ramp (H, 2K - 1), entry t
    the bias of offset j - i = t - (K - 1) (-inf hides a key); causal also skips the blocks above the diagonal.

    returns: (B, H, q_len, D_v)
    """
    return _run("ramp", _ramp, q, k, v, ramp, _mask(q, k, causal), _scalar(q.shape[-2] - 1, q.device), scale)
