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
  "irope"       Llama 4's iRoPE: RoPE in most layers, none in every k-th (``IRoPE``)
  "cope"        CoPE: positions counted by gates on the attention logits (``CoPE``, one per layer)
A method is a module with up to four hooks (``PositionalHooks``): ``embed`` (add to the token
embeddings), ``rotate`` (turn q and k, per layer), ``bias`` (add to the scores), ``logits``
(add to the scores a term computed from the scores themselves, per layer). Adding a
method is one registry entry plus its tests; ``TinyDecoder`` and the experiment need no edit.
The hooks carry no method's own parameters: RoPE's state (frequencies, attention factor, cos/sin
cache) lives in its rotary module (``Rotary.rope``), and evaluation under a context-extension
method swaps that module (``swapped_rotary``), as transformers swaps a model's ``rotary_emb``.
Decoding token by token: ``model(tokens, cache=KVCache())`` keeps each layer's keys and
values, and every hook sees the new tokens at positions offset.. (offset = the cache length).
Pre-LayerNorm blocks as in GPT-2; attention runs through torch's
``scaled_dot_product_attention`` with the positional bias as its mask, which equals
``posenc_lib.attention`` (the teaching form) but is faster; a method with a ``logits`` hook
(``contextual = True``) needs the logits in hand, so its attention is computed explicitly.
Names: B = batch, T = sequence length, H = num_heads, C = d_model, d = C / H.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import partial
from typing import Callable, ClassVar, Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from . import _validate as v
from .absolute import LearnedPositionalEncoding, SinusoidalPositionalEncoding
from .alibi import ALiBi
from .attention import causal_mask
from .cope import CoPE
from .relative import T5RelativeBias
from .rotary import RotaryEmbedding
from .temperature import attention_temperature


# ---------------------------------------------------------------- the hooks

class PositionalHooks(nn.Module):
    """What a positional method may do to the decoder; each default does nothing ("none").

    The T tokens in hand sit at positions offset .. offset + T - 1, where offset is the
    number of tokens already in the KV cache (0 without one).
    embed(x, offset):            x (B, T, C) token embeddings -> (B, T, C) with positions added
    rotate(q, k, layer, offset): q, k (B, H, T, d) of the new tokens in block ``layer`` (0-based)
                                 -> (q, k) turned by their positions. Cached keys were turned
                                 when they were new and are never turned again.
    bias(q_len, k_len):          (H, q_len, k_len) additive scores of the last q_len queries
                                 against all k_len keys, -inf for future keys; or None (plain causal)
    logits(q, logits, layer):    q (B, H, T, d) of the new tokens, logits (B, H, T, S) their scaled,
                                 masked scores against all S keys (-inf for future keys) -> a
                                 (B, H, T, S) term added to them; called only when ``contextual``
    Subclasses override the hooks they need. The model calls embed once, bias once per
    forward (shared by every layer), rotate in every layer, and logits in every layer.
    """

    # logits() reads the attention logits: the model then computes attention explicitly, not through SDPA.
    contextual: ClassVar[bool] = False

    def embed(self, x: Tensor, *, offset: int = 0) -> Tensor:
        return x

    def rotate(self, q: Tensor, k: Tensor, *, layer: int = 0, offset: int = 0) -> tuple[Tensor, Tensor]:
        return q, k

    def bias(self, q_len: int, k_len: int | None = None) -> Tensor | None:
        return None

    def logits(self, q: Tensor, logits: Tensor, *, layer: int = 0) -> Tensor:
        return torch.zeros_like(logits)


class AddedEncoding(PositionalHooks):
    """Absolute methods: ``encoding`` maps x (..., T, C) -> x + P[:T]."""

    def __init__(self, encoding: nn.Module):
        super().__init__()
        self.encoding = encoding

    def embed(self, x: Tensor, *, offset: int = 0) -> Tensor:
        return self.encoding(x, offset=offset)


class Rotary(PositionalHooks):
    """RoPE on q and k by its rotary module ``rope``, which holds all of RoPE's state (frequencies,
    attention factor, cos/sin cache). To evaluate with other frequencies, swap the module
    (``swapped_rotary``), as transformers swaps a model's ``rotary_emb``."""

    def __init__(self, d: int, *, base: float):
        super().__init__()
        self.rope = RotaryEmbedding(d, base=base)

    def rotate(self, q: Tensor, k: Tensor, *, layer: int = 0, offset: int = 0) -> tuple[Tensor, Tensor]:
        return self.rope(q, k, offset=offset)


class IRoPE(Rotary):
    """Llama 4's interleaved RoPE: RoPE in every layer except every ``every``-th, which has no positions.

    Layers every - 1, 2 * every - 1, ... (0-based; Llama 4: every = 4, layers 3, 7, ...) are NoPE:
    only the causal mask tells them order, so nothing in them depends on distances they never
    saw in training. With ``temperature`` their queries are multiplied by
    ``attention_temperature(position)`` = 1 + attn_scale * ln(1 + floor((pos + 1) / floor_scale)):
    1 up to position floor_scale - 2, then slowly sharper, against the softmax flattening over
    more keys. A swapped rotary module (``swapped_rotary``) acts on the RoPE layers only.
    With ``chunk`` (Llama 4's ``attention_chunk_size``) a RoPE layer attends only within its block
    of ``chunk`` positions (0 .. chunk - 1, chunk .. 2 chunk - 1, ...), so it never meets a distance
    of ``chunk`` or more; the NoPE layers still see every key. ``chunk`` may be changed on a trained
    model (the experiment evaluates with and without it); None: no chunks.
    """

    def __init__(self, d: int, *, base: float, every: int, temperature: bool, floor_scale: int, attn_scale: float,
                 chunk: int | None = None):
        super().__init__(d, base=base)
        self.every, self.temperature = every, temperature
        self.floor_scale, self.attn_scale = floor_scale, attn_scale
        self.chunk = chunk

    @property
    def contextual(self) -> bool:  # the chunk mask differs per layer: it goes through the logits hook
        return self.chunk is not None

    def is_nope(self, layer: int) -> bool:
        return (layer + 1) % self.every == 0

    def logits(self, q: Tensor, logits: Tensor, *, layer: int = 0) -> Tensor:
        """-inf for keys outside the query's chunk in a RoPE layer (the T queries are the last of the S keys)."""
        if self.chunk is None or self.is_nope(layer):
            return torch.zeros_like(logits)
        T, S = logits.shape[-2:]
        block = torch.arange(S, device=logits.device) // self.chunk
        outside = block[S - T:, None] != block[None, :]
        return torch.zeros_like(logits).masked_fill(outside, float("-inf"))

    def rotate(self, q: Tensor, k: Tensor, *, layer: int = 0, offset: int = 0) -> tuple[Tensor, Tensor]:
        if not self.is_nope(layer):
            return super().rotate(q, k, offset=offset)
        if not self.temperature:
            return q, k
        positions = torch.arange(offset, offset + q.shape[-2], device=q.device)
        scale = attention_temperature(positions, floor_scale=self.floor_scale, attn_scale=self.attn_scale)
        return q * scale.to(q.dtype).unsqueeze(-1), k


class ScoreBias(PositionalHooks):
    """Relative methods on the scores: ``scores`` maps n -> (H, n, n); the future is masked here."""

    def __init__(self, scores: nn.Module):
        super().__init__()
        self.scores = scores

    def bias(self, q_len: int, k_len: int | None = None) -> Tensor:
        k_len = q_len if k_len is None else k_len
        # The last q_len rows of the full square: the queries are the newest tokens. (T5RelativeBias(q, k)
        # would put them first.) O(k_len^2) per decoding step, nothing for a tiny model.
        b = self.scores(k_len)[:, k_len - q_len:]
        return b.masked_fill(causal_mask(q_len, k_len, device=b.device), float("-inf"))  # no-op where already -inf


class Contextual(PositionalHooks):
    """Methods that add to the logits a term read from the logits: ``per_layer[i]`` maps (q, logits) -> term."""

    contextual = True

    def __init__(self, per_layer: list[nn.Module]):
        super().__init__()
        self.per_layer = nn.ModuleList(per_layer)

    def logits(self, q: Tensor, logits: Tensor, *, layer: int = 0) -> Tensor:
        return self.per_layer[layer](q, logits)


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


def _check_irope(c: "DecoderConfig") -> None:
    _check_rope(c)
    v.int_at_least("irope_every", c.irope_every, 2)
    if c.irope_every > c.num_layers:
        raise ValueError(f"irope_every must be <= num_layers={c.num_layers} (else no layer is without positions), "
                         f"got {c.irope_every}")
    if not isinstance(c.irope_temperature, bool):
        raise ValueError(f"irope_temperature must be True or False, got {c.irope_temperature!r}")
    if c.irope_floor_scale is not None:
        v.int_at_least("irope_floor_scale", c.irope_floor_scale, 1)
    v.finite_number("irope_attn_scale", c.irope_attn_scale, at_least=0)
    if c.irope_chunk is not None:
        v.int_at_least("irope_chunk", c.irope_chunk, 1)


def _build_irope(c: "DecoderConfig") -> IRoPE:
    return IRoPE(c.d_model // c.num_heads, base=c.base, every=c.irope_every, temperature=c.irope_temperature,
                 floor_scale=c.max_len if c.irope_floor_scale is None else c.irope_floor_scale,
                 attn_scale=c.irope_attn_scale, chunk=c.irope_chunk)


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
    "irope": PositionalSpec("iRoPE", "#ff9896", build=_build_irope, check=_check_irope),
    # One table per layer, shared by its heads, as in the reference code; max_len + 1 rows because the
    # count p_ij runs from 0 to i + 1. Longer counts are clamped to the last row.
    "cope": PositionalSpec(
        "CoPE", "#393b79",
        build=lambda c: Contextual([CoPE(c.max_len + 1, c.d_model // c.num_heads) for _ in range(c.num_layers)])),
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
    # iRoPE: every irope_every-th layer has no positions. Llama 4 uses 4; 2 here, so that the
    # default 2 layers are one RoPE layer and one NoPE layer. Must be in 2 .. num_layers.
    irope_every: int = 2
    irope_temperature: bool = True  # scale the NoPE layers' queries by attention_temperature
    irope_floor_scale: int | None = None  # None: max_len: the temperature is 1 up to max_len - 2 (Llama 4: 8192)
    irope_attn_scale: float = 0.1  # Llama 4's
    irope_chunk: int | None = None  # RoPE layers attend within chunks of this many positions (Llama 4: 8192)

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
AddToLogits = Callable[[Tensor, Tensor], Tensor]


@dataclass
class KVCache:
    """Each layer's keys and values of the tokens seen so far, for decoding token by token.

    ``logits = model(tokens, cache=cache)`` places tokens at positions cache.length.. and
    appends their keys and values in place; start with ``KVCache()``.
    Keys are stored rotated: each is turned once, at its own position, when it is new.
    Turning the cached keys again at each step is the "double rotation" bug.
    layers[i] = (k, v), each (B, H, length, d).
    Taught in: notebooks/08_rope_in_models.ipynb
    """

    layers: list[tuple[Tensor, Tensor]] = field(default_factory=list)

    @property
    def length(self) -> int:
        """Tokens cached (a property, not __len__: an empty cache must not be falsy)."""
        return self.layers[0][0].shape[-2] if self.layers else 0

    def update(self, layer: int, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Append the new tokens' k, v (B, H, T, d) to layer ``layer``; returns all its keys and values."""
        if layer == len(self.layers):
            self.layers.append((k, v))
        else:
            past_k, past_v = self.layers[layer]
            self.layers[layer] = (torch.cat((past_k, k), -2), torch.cat((past_v, v), -2))
        return self.layers[layer]


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

    def forward(self, x: Tensor, *, bias: Tensor | None = None, rotate: Rotate | None = None,
                cache: KVCache | None = None, layer: int = 0, contextual: AddToLogits | None = None) -> Tensor:
        """bias: (H, T, S) additive scores of the T new queries against all S keys (cached and new),
        including -inf for future keys, or None (plain causal).
        rotate: (q, k) -> (q, k) for the new tokens, each (B, H, T, d), or None for no rotation.
        cache: keys and values of earlier tokens, extended here in slot ``layer``; None: S = T.
        contextual: (q, logits) -> a term added to the masked logits (B, H, T, S), or None."""
        B, T, C = x.shape
        q, k, val = self.heads(x)
        if rotate is not None:
            q, k = rotate(q, k)  # the new tokens only: the cached keys are already turned
        if cache is not None:
            k, val = cache.update(layer, k, val)
        S = k.shape[-2]
        if contextual is not None:
            y = self._explicit(q, k, val, bias, contextual)
        elif bias is not None:
            y = F.scaled_dot_product_attention(q, k, val, attn_mask=bias.to(q.dtype))
        elif S == T:
            y = F.scaled_dot_product_attention(q, k, val, is_causal=True)
        else:  # is_causal puts the queries at the first keys; ours are the last (True = may attend)
            y = F.scaled_dot_product_attention(q, k, val, attn_mask=~causal_mask(T, S, device=q.device))
        return self.out(y.transpose(1, 2).reshape(B, T, C))

    def _explicit(self, q: Tensor, k: Tensor, val: Tensor, bias: Tensor | None, contextual: AddToLogits) -> Tensor:
        """softmax(logits) @ v with the logits of ``logits``."""
        return self.logits(q, k, bias=bias, contextual=contextual).softmax(-1) @ val

    @staticmethod
    def logits(q: Tensor, k: Tensor, *, bias: Tensor | None = None, contextual: AddToLogits | None = None) -> Tensor:
        """(B, H, T, S) attention logits: q k^T / sqrt(d) + bias (or the causal mask), plus contextual(q, that).

        q (B, H, T, d) are the last T of the S keys k (B, H, S, d), both already rotated."""
        T, S = q.shape[-2], k.shape[-2]
        if bias is None:
            bias = torch.zeros(T, S, device=q.device).masked_fill(causal_mask(T, S, device=q.device), float("-inf"))
        logits = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1]) + bias.to(q.dtype)
        return logits if contextual is None else logits + contextual(q, logits)


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
    Decoding: ``cache = KVCache()``, then ``model(next_tokens, cache=cache)`` step by step gives
    the logits of the full forward (tests/test_model.py checks it for every method).
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

    def attention_bias(self, q_len: int, k_len: int | None = None) -> Tensor | None:
        """The (H, q_len, k_len) additive bias shared by every layer (-inf for future keys), or None."""
        return self.positional.bias(q_len, k_len)

    def forward(self, tokens: Tensor, *, cache: KVCache | None = None) -> Tensor:
        """tokens: (B, T) long. cache: a ``KVCache`` of the tokens before these (extended in place),
        so the logits equal the last T rows of the full forward; None: the tokens start at position 0."""
        if not isinstance(tokens, Tensor) or tokens.dim() != 2:
            raise ValueError(f"tokens must be a (batch, seq) integer tensor, got {getattr(tokens, 'shape', tokens)!r}")
        v.integer_tensor("tokens", tokens)
        offset = self._cache_length(cache, tokens.shape[0])
        x = self.positional.embed(self.embed(tokens), offset=offset)
        bias = self.positional.bias(tokens.shape[1], offset + tokens.shape[1])
        for i, block in enumerate(self.blocks):
            rotate = partial(self.positional.rotate, layer=i, offset=offset)
            contextual = partial(self.positional.logits, layer=i) if self.positional.contextual else None
            x = block(x, bias=bias, rotate=rotate, cache=cache, layer=i, contextual=contextual)
        return self.head(self.ln_f(x))

    @torch.no_grad()
    def attention_logits(self, tokens: Tensor) -> list[Tensor]:
        """Each layer's attention logits (B, H, T, T) for one forward pass over tokens (B, T), no cache:
        the scaled scores plus the positional bias, -inf above the diagonal; ``.softmax(-1)`` gives the
        attention weights the layer used (SDPA computes the same softmax without handing it out)."""
        return [attn.logits(q, k, bias=kw.get("bias"), contextual=kw.get("contextual"))
                for attn, q, k, kw in self._attention_inputs(tokens)]

    @torch.no_grad()
    def rotated_qk(self, tokens: Tensor) -> list[tuple[Tensor, Tensor]]:
        """Each layer's q and k (B, H, T, d) for one forward pass over tokens (B, T), no cache, after the
        positional method's rotation (RoPE's, for a rotary method; unchanged otherwise)."""
        return [(q, k) for _, q, k, _ in self._attention_inputs(tokens)]

    def _attention_inputs(self, tokens: Tensor) -> list[tuple[CausalSelfAttention, Tensor, Tensor, dict]]:
        """Per layer: its attention module, the rotated q and k, and the keyword arguments it was called with."""
        out: list[tuple[CausalSelfAttention, Tensor, Tensor, dict]] = []

        def grab(attn: CausalSelfAttention, args: tuple, kwargs: dict) -> None:
            q, k, _ = attn.heads(args[0])
            if kwargs.get("rotate") is not None:
                q, k = kwargs["rotate"](q, k)
            out.append((attn, q, k, kwargs))

        handles = [block.attn.register_forward_pre_hook(grab, with_kwargs=True) for block in self.blocks]
        try:
            self(tokens)
        finally:
            for h in handles:
                h.remove()
        return out

    def _cache_length(self, cache: KVCache | None, batch: int) -> int:
        """The position of the first new token; checks that the cache belongs to this model and batch."""
        if cache is None:
            return 0
        if not isinstance(cache, KVCache):
            raise ValueError(f"cache must be a KVCache or None, got {type(cache).__name__}")
        if cache.layers and (len(cache.layers) != len(self.blocks) or cache.layers[0][0].shape[0] != batch):
            raise ValueError(f"cache must hold {len(self.blocks)} layers of batch {batch} (this model, these tokens), "
                             f"got {len(cache.layers)} layers of batch {cache.layers[0][0].shape[0]}")
        return cache.length


@contextmanager
def swapped_rotary(model: TinyDecoder, rope: RotaryEmbedding) -> Iterator[TinyDecoder]:
    """Inside the ``with`` block, ``model`` turns q and k with ``rope`` instead of its own rotary module.

    For evaluation under a context-extension method, as transformers swaps a model's
    ``rotary_emb``: ``with swapped_rotary(model, model.positional.rope.reconfigured(inv_freq=...,
    attention_factor=...)): model(tokens)``. Only a rotary method ("rope", "irope") has one; in
    iRoPE it acts on the RoPE layers only. ``rope`` is moved to the model's device.
    """
    own = getattr(model.positional, "rope", None)
    if not isinstance(own, RotaryEmbedding):
        raise ValueError("model must use a rotary positional method ('rope' or 'irope') to swap its rotary module, "
                         f"got positional={model.config.positional!r}")
    if not isinstance(rope, RotaryEmbedding) or rope.d != own.d:
        raise ValueError(f"rope must be a RotaryEmbedding of the head dimension d = {own.d}, got {rope!r}")
    model.positional.rope = rope.to(own.inv_freq.device)
    try:
        yield model
    finally:
        model.positional.rope = own
