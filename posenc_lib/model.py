"""A tiny decoder-only transformer whose positional method is one constructor argument.

Used by the extrapolation experiment (``posenc_lib.experiments.extrapolation``) to
train the same network with each way of telling it about positions. The methods live
in one registry, ``POSITIONAL_METHODS`` (name -> ``PositionalSpec``), in this order:
  "none"        NoPE: nothing; only the causal mask breaks the symmetry
  "learned"     a trained vector per position added to the token embedding (GPT-2)
  "sinusoidal"  Vaswani et al.'s fixed sinusoids added to the token embedding
  "rope"        queries and keys rotated by their positions (``RotaryEmbedding``)
  "alibi"       a linear distance penalty on the scores (``ALiBi``)
  "t5"          a learned scalar per (distance bucket, head) on the scores (``T5RelativeBias``)
A method is a module with three hooks (``PositionalHooks``): ``embed`` (add to the token
embeddings), ``rotate`` (turn q and k), ``bias`` (add to the scores). Adding a method is
one registry entry plus its tests; ``TinyDecoder`` and the experiment need no edit.
Pre-LayerNorm blocks as in GPT-2; attention runs through torch's
``scaled_dot_product_attention`` with the positional bias as its mask, which equals
``posenc_lib.attention`` (the teaching form) but is faster.
Names: B = batch, T = sequence length, H = num_heads, C = d_model, d = C / H.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Callable, ClassVar

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _validate as v
from .absolute import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from .alibi import ALiBi
from .attention import causal_mask
from .relative import T5RelativeBias
from .rope import RotaryEmbedding, apply_rope


# ---------------------------------------------------------------- the hooks

class PositionalHooks(nn.Module):
    """What a positional method may do to the decoder; each default does nothing ("none").

    embed(x):     x (B, T, C) token embeddings -> (B, T, C) with positions added
    rotate(q, k): q, k (B, H, T, d) -> (q, k) turned by their positions
    bias(T):      (H, T, T) additive scores, -inf above the diagonal, or None (plain causal)
    Subclasses override the hooks they need. The model calls embed once, bias once per
    forward (shared by every layer) and rotate in every layer.
    """

    # rotate() accepts inv_freq / attention_factor overrides (context extension at evaluation).
    rotary: ClassVar[bool] = False

    def embed(self, x: Tensor) -> Tensor:
        return x

    def rotate(self, q: Tensor, k: Tensor, *, inv_freq: Tensor | None = None,
               attention_factor: float = 1.0) -> tuple[Tensor, Tensor]:
        return q, k

    def bias(self, T: int) -> Tensor | None:
        return None


class AddedEncoding(PositionalHooks):
    """Absolute methods: ``encoding`` maps x (..., T, C) -> x + P[:T]."""

    def __init__(self, encoding: nn.Module):
        super().__init__()
        self.encoding = encoding

    def embed(self, x: Tensor) -> Tensor:
        return self.encoding(x)


class Rotary(PositionalHooks):
    """RoPE on q and k, with the trained frequencies or, at evaluation, others (``scaled_rope_frequencies``)."""

    rotary = True

    def __init__(self, d: int, *, base: float):
        super().__init__()
        self.rope = RotaryEmbedding(d, base=base)

    def rotate(self, q: Tensor, k: Tensor, *, inv_freq: Tensor | None = None,
               attention_factor: float = 1.0) -> tuple[Tensor, Tensor]:
        if inv_freq is None and attention_factor == 1.0:
            return self.rope(q, k)
        kw = dict(inv_freq=self.rope.inv_freq if inv_freq is None else inv_freq, attention_factor=attention_factor)
        return apply_rope(q, **kw), apply_rope(k, **kw)


class ScoreBias(PositionalHooks):
    """Relative methods on the scores: ``scores`` maps T -> (H, T, T); the future is masked here."""

    def __init__(self, scores: nn.Module):
        super().__init__()
        self.scores = scores

    def bias(self, T: int) -> Tensor:
        b = self.scores(T)
        return b.masked_fill(causal_mask(T, T, device=b.device), float("-inf"))  # no-op where already -inf


# ---------------------------------------------------------------- the registry

@dataclass(frozen=True)
class PositionalSpec:
    """One positional method: how to build it, check its config, and show it in plots."""

    label: str  # for legends and tables, e.g. "ALiBi"
    color: str  # one matplotlib colour per method, the same in every figure
    build: Callable[["DecoderConfig"], PositionalHooks]  # called right after the token embedding
    check: Callable[["DecoderConfig"], None] | None = None  # raises ValueError naming the parameter
    length_limited: bool = False  # runs only up to config.max_len tokens (a row per position)


def _check_sinusoidal(c: "DecoderConfig") -> None:
    v.even_dim("d_model", c.d_model)


def _check_rope(c: "DecoderConfig") -> None:
    v.even_dim("head dimension d_model / num_heads", c.d_model // c.num_heads)


def _check_t5(c: "DecoderConfig") -> None:
    if c.max_len <= c.t5_num_buckets // 2:
        raise ValueError(f"max_len must be > t5_num_buckets // 2 = {c.t5_num_buckets // 2} (T5's max_distance "
                         f"is max_len; the first half of the buckets are exact offsets), got {c.max_len}")


# name -> spec, in the order of the experiment's tables and legends.
POSITIONAL_METHODS: dict[str, PositionalSpec] = {
    "none": PositionalSpec(
        "NoPE", "#7f7f7f", build=lambda c: PositionalHooks()),
    "learned": PositionalSpec(
        "learned", "#8c564b", build=lambda c: AddedEncoding(LearnedPositionalEncoding(c.max_len, c.d_model)),
        length_limited=True),
    "sinusoidal": PositionalSpec(
        "sinusoidal", "#1f77b4",
        build=lambda c: AddedEncoding(SinusoidalPositionalEncoding(c.d_model, c.max_len, base=c.base)),
        check=_check_sinusoidal),
    "rope": PositionalSpec(
        "RoPE", "#d62728", build=lambda c: Rotary(c.d_model // c.num_heads, base=c.base), check=_check_rope),
    "alibi": PositionalSpec(
        "ALiBi", "#2ca02c", build=lambda c: ScoreBias(ALiBi(c.num_heads))),
    # One table shared by all layers, as in T5; every bucket for the past (a decoder never sees the future).
    "t5": PositionalSpec(
        "T5 bias", "#9467bd",
        build=lambda c: ScoreBias(T5RelativeBias(c.num_heads, bidirectional=False, num_buckets=c.t5_num_buckets,
                                                 max_distance=c.max_len)),
        check=_check_t5),
}


# ---------------------------------------------------------------- the model

@dataclass
class DecoderConfig:
    """Size and positional method of a ``TinyDecoder``.

    Taught in: notebooks/07_beyond.ipynb
    """

    vocab_size: int
    positional: str = "rope"  # a key of POSITIONAL_METHODS
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
        check = POSITIONAL_METHODS[self.positional].check
        if check is not None:
            check(self)


Rotate = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


class CausalSelfAttention(nn.Module):
    """Multi-head causal self-attention with an optional rotation of q, k and an additive bias.

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

    def forward(self, x: Tensor, *, bias: Tensor | None = None, rotate: Rotate | None = None) -> Tensor:
        """bias: (H, T, T) additive scores including -inf above the diagonal, or None (plain causal).
        rotate: (q, k) -> (q, k), each (B, H, T, d), or None for no rotation."""
        B, T, C = x.shape
        q, k, val = self.heads(x)
        if rotate is not None:
            q, k = rotate(q, k)
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
        self.mlp = nn.Sequential(nn.Linear(config.d_model, config.d_ff), nn.GELU(),
                                 nn.Linear(config.d_ff, config.d_model))

    def forward(self, x: Tensor, **attn_kw) -> Tensor:
        x = x + self.attn(self.ln1(x), **attn_kw)
        return x + self.mlp(self.ln2(x))


class TinyDecoder(nn.Module):
    """Decoder-only transformer: tokens (B, T) long -> next-token logits (B, T, vocab_size).

    ``TinyDecoder(DecoderConfig(vocab_size=32, positional="alibi"))`` or the same as
    keywords, ``TinyDecoder(vocab_size=32, positional="alibi")``. The method's module
    (``PositionalHooks``) is ``model.positional``.
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
        # Creation order (embedding, positional method, blocks, ln_f, head) fixes the random init.
        self.embed = nn.Embedding(c.vocab_size, c.d_model)
        self.positional: PositionalHooks = POSITIONAL_METHODS[c.positional].build(c)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.num_layers))
        self.ln_f = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab_size)

    def attention_bias(self, T: int) -> Tensor | None:
        """The (H, T, T) additive bias shared by every layer (with -inf above the diagonal), or None."""
        return self.positional.bias(T)

    def forward(self, tokens: Tensor, *, inv_freq: Tensor | None = None, attention_factor: float = 1.0) -> Tensor:
        """tokens: (B, T) long. inv_freq / attention_factor: RoPE frequencies to use instead of
        the trained ones (context extension at evaluation time; only for a rotary method, "rope")."""
        if not isinstance(tokens, Tensor) or tokens.dim() != 2:
            raise ValueError(f"tokens must be a (batch, seq) integer tensor, got {getattr(tokens, 'shape', tokens)!r}")
        v.integer_tensor("tokens", tokens)
        if (inv_freq is not None or attention_factor != 1.0) and not self.positional.rotary:
            raise ValueError("inv_freq and attention_factor need a rotary positional method (positional='rope'), "
                             f"got positional={self.config.positional!r}")
        if inv_freq is not None:
            inv_freq = inv_freq.to(tokens.device)
        x = self.positional.embed(self.embed(tokens))
        bias = self.positional.bias(tokens.shape[1])
        rotate = partial(self.positional.rotate, inv_freq=inv_freq, attention_factor=attention_factor)
        for block in self.blocks:
            x = block(x, bias=bias, rotate=rotate)
        return self.head(self.ln_f(x))
