"""A tiny decoder-only transformer whose positional method is one constructor argument.

Used by the extrapolation experiment (``posenc_lib.experiments.extrapolation``) to
train the same network with each way of telling it about positions:
  "none"        NoPE: nothing; only the causal mask breaks the symmetry
  "learned"     a trained vector per position added to the token embedding (GPT-2)
  "sinusoidal"  Vaswani et al.'s fixed sinusoids added to the token embedding
  "rope"        queries and keys rotated by their positions (``apply_rope``)
  "alibi"       a linear distance penalty on the scores (``alibi_bias``)
  "t5"          a learned scalar per (distance bucket, head) on the scores (``T5RelativeBias``)
Pre-LayerNorm blocks as in GPT-2; attention runs through torch's
``scaled_dot_product_attention`` with the positional bias as its mask, which equals
``posenc_lib.attention`` (the teaching form) but is faster.
Names: B = batch, T = sequence length, H = num_heads, C = d_model.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _validate as v
from .absolute import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from .alibi import ALiBi
from .angles import rope_frequencies
from .attention import causal_mask
from .relative import T5RelativeBias
from .rope import apply_rope

POSITIONAL_METHODS = ("none", "learned", "sinusoidal", "rope", "alibi", "t5")


@dataclass
class DecoderConfig:
    """Size and positional method of a ``TinyDecoder``.

    Taught in: notebooks/07_beyond.ipynb
    """

    vocab_size: int
    positional: str = "rope"  # one of POSITIONAL_METHODS
    d_model: int = 64
    num_heads: int = 4  # head dimension d = d_model / num_heads = 16
    num_layers: int = 2  # two layers are enough for an induction head (previous-token head + copy head)
    d_ff: int = 256  # 4 * d_model, as GPT-2
    max_len: int = 64  # rows of the learned table; also T5's max_distance, so every bucket is seen in training
    base: float = 10000.0  # RoPE and sinusoid frequency base
    t5_num_buckets: int = 32  # all for the past: the decoder never sees the future

    def __post_init__(self) -> None:
        v.int_at_least("vocab_size", self.vocab_size, 1)
        v.one_of("positional", self.positional, POSITIONAL_METHODS)
        v.int_at_least("num_heads", self.num_heads, 1)
        v.int_at_least("num_layers", self.num_layers, 1)
        v.int_at_least("d_ff", self.d_ff, 1)
        v.int_at_least("max_len", self.max_len, 1)
        v.int_at_least("d_model", self.d_model, 1)
        if self.d_model % self.num_heads:
            raise ValueError(f"d_model must be a multiple of num_heads={self.num_heads}, got {self.d_model}")
        if self.positional == "rope":
            v.even_dim("head dimension d_model / num_heads", self.d_model // self.num_heads)
        if self.positional == "sinusoidal":
            v.even_dim("d_model", self.d_model)
        if self.positional == "t5" and self.max_len <= self.t5_num_buckets // 2:
            raise ValueError(f"max_len must be > t5_num_buckets // 2 = {self.t5_num_buckets // 2} (T5's max_distance "
                             f"is max_len; the first half of the buckets are exact offsets), got {self.max_len}")


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with optional RoPE and additive bias.

    x: (B, T, C) -> (B, T, C)
    """

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.num_heads = config.num_heads
        self.qkv = nn.Linear(config.d_model, 3 * config.d_model)
        self.out = nn.Linear(config.d_model, config.d_model)

    def heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """q, k, v, each (B, H, T, d)."""
        B, T, C = x.shape
        q, k, val = self.qkv(x).view(B, T, 3, self.num_heads, C // self.num_heads).permute(2, 0, 3, 1, 4)
        return q, k, val

    def forward(
        self, x: Tensor, *, bias: Tensor | None = None, inv_freq: Tensor | None = None, attention_factor: float = 1.0
    ) -> Tensor:
        """bias: (H, T, T) additive scores including -inf above the diagonal, or None (plain causal).
        inv_freq: (d // 2,) RoPE frequencies, or None for no rotation."""
        B, T, C = x.shape
        q, k, val = self.heads(x)
        if inv_freq is not None:
            q = apply_rope(q, inv_freq=inv_freq, attention_factor=attention_factor)
            k = apply_rope(k, inv_freq=inv_freq, attention_factor=attention_factor)
        if bias is None:
            y = F.scaled_dot_product_attention(q, k, val, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, val, attn_mask=bias.to(q.dtype))
        return self.out(y.transpose(1, 2).reshape(B, T, C))


class Block(nn.Module):
    """Pre-LayerNorm transformer block: x + attn(ln(x)), then x + mlp(ln(x))."""

    def __init__(self, config: DecoderConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(config.d_model)
        self.attn = CausalSelfAttention(config)
        self.ln2 = nn.LayerNorm(config.d_model)
        self.mlp = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.GELU(), nn.Linear(config.d_ff, config.d_model))

    def forward(self, x: Tensor, **attn_kw) -> Tensor:
        x = x + self.attn(self.ln1(x), **attn_kw)
        return x + self.mlp(self.ln2(x))


class TinyDecoder(nn.Module):
    """Decoder-only transformer: tokens (B, T) long -> next-token logits (B, T, vocab_size).

    ``TinyDecoder(DecoderConfig(vocab_size=32, positional="alibi"))`` or the same as
    keywords, ``TinyDecoder(vocab_size=32, positional="alibi")``.
    Only "learned" has a length limit (config.max_len); the others run at any T.
    Taught in: notebooks/07_beyond.ipynb
    """

    def __init__(self, config: DecoderConfig | None = None, **kwargs):
        super().__init__()
        if config is None:
            config = DecoderConfig(**kwargs)
        elif kwargs:
            raise ValueError(f"pass either a DecoderConfig or keywords, not both (got {sorted(kwargs)})")
        self.config = c = config
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.add_positions: nn.Module | None = None
        self.alibi: ALiBi | None = None
        self.t5: T5RelativeBias | None = None
        if c.positional == "learned":
            self.add_positions = LearnedPositionalEncoding(c.max_len, c.d_model)
        elif c.positional == "sinusoidal":
            self.add_positions = SinusoidalPositionalEncoding(c.d_model, c.max_len, base=c.base)
        elif c.positional == "alibi":
            self.alibi = ALiBi(c.num_heads)
        elif c.positional == "t5":
            # One table shared by all layers, as in T5.
            self.t5 = T5RelativeBias(c.num_heads, bidirectional=False, num_buckets=c.t5_num_buckets,
                                     max_distance=c.max_len)
        # RoPE frequencies: a non-persistent buffer (follows .to(device), not in state_dict).
        head_dim = c.d_model // c.num_heads
        if c.positional == "rope":
            self.register_buffer("inv_freq", rope_frequencies(head_dim, base=c.base), persistent=False)
        else:
            self.inv_freq = None
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.num_layers))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size)

    def attention_bias(self, T: int) -> Tensor | None:
        """The (H, T, T) additive bias shared by every layer (with -inf above the diagonal), or None."""
        if self.alibi is not None:
            return self.alibi(T)
        if self.t5 is not None:
            mask = causal_mask(T, T, device=self.t5.embedding.weight.device)
            return self.t5(T).masked_fill(mask, float("-inf"))
        return None

    def forward(self, tokens: Tensor, *, inv_freq: Tensor | None = None, attention_factor: float = 1.0) -> Tensor:
        """tokens: (B, T) long. inv_freq / attention_factor: RoPE frequencies to use instead of
        the trained ones (context extension at evaluation time; only for positional="rope")."""
        if not isinstance(tokens, Tensor) or tokens.dim() != 2:
            raise ValueError(f"tokens must be a (batch, seq) integer tensor, got {getattr(tokens, 'shape', tokens)!r}")
        v.integer_tensor("tokens", tokens)
        if (inv_freq is not None or attention_factor != 1.0) and self.config.positional != "rope":
            raise ValueError(f"inv_freq and attention_factor need positional='rope', got {self.config.positional!r}")
        T = tokens.shape[1]
        x = self.embed(tokens)
        if self.add_positions is not None:
            x = self.add_positions(x)
        bias = self.attention_bias(T)
        freqs = self.inv_freq if inv_freq is None else inv_freq.to(x.device)
        for block in self.blocks:
            x = block(x, bias=bias, inv_freq=freqs, attention_factor=attention_factor)
        return self.head(self.ln_f(x))
