"""A gallery of RoPE implementations for the doctor (tests/test_rope_gallery.py), written for posenc's tests
with torch alone, independently of posenc_lib: the frequencies read from the config files in
tests/data/configs by this file's own code, and five forms of the rotation (transformers' cos/sin with
rotate_half or pairs, Meta's complex numbers, dense 2 x 2 blocks R_m, a vLLM-style engine over a cos/sin
cache of flattened tokens, MRoPE and MLA kernels). Each entry changes one or two steps the way a public bug
report describes (engine, issue or PR in ``Entry.report``); the correct entries are the fixed versions.

``Entry.expect`` is the set of hypothesis names that must be named, "correct", "broken" (fn raises, which
the doctor reports), or "unexplained" (a bug outside the doctor's classes: it must still not pass).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

CONFIGS = Path(__file__).resolve().parent / "data" / "configs"


def config(name: str) -> dict:
    return json.loads((CONFIGS / f"{name}.json").read_text())


def _text(cfg: dict) -> dict:
    inner = cfg.get("text_config")
    return inner if isinstance(inner, dict) else cfg


# ---------------------------------------------------------------- the frequencies, read here from the file

def _geometric(dim: int, base: float) -> torch.Tensor:
    return base ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)


@dataclass
class Spectrum:
    inv: torch.Tensor  # (pairs,) float64
    attention: float
    rotary: int  # rotated features
    head: int


def _rope_dict(cfg: dict, layer: str | None) -> dict:
    raw = cfg.get("rope_parameters") or cfg.get("rope_scaling") or {}
    if any(isinstance(x, dict) for x in raw.values()):
        return dict(raw[layer])
    if "rope_local_base_freq" in cfg:  # Gemma 3's older files: the local base for sliding layers
        return {"rope_theta": cfg["rope_local_base_freq"]} if layer == "sliding_attention" else dict(raw)
    return dict(raw)


def spectrum(cfg: dict, seq_len: int, layer: str | None = None, **change) -> Spectrum:
    """This file's own reading of a config's RoPE at a current length; ``change`` replaces any of
    method, base, factor, L0, truncate, low/high, mscale, attention, dim (the exponent), rotary."""
    t = _text(cfg)
    rope = _rope_dict(t, layer)
    head = t.get("qk_rope_head_dim") or t.get("head_dim") or t["hidden_size"] // t["num_attention_heads"]
    p = rope.get("partial_rotary_factor", t.get("partial_rotary_factor", 1.0))
    rotary = change.get("rotary", int(head * p))
    base = change.get("base", rope.get("rope_theta", t.get("rope_theta", 10000.0)))
    method = change.get("method", rope.get("rope_type", rope.get("type", "default")))
    if method == "dynamic" and rope.get("alpha") and "method" not in change:
        method = "ntk"
    factor = change.get("factor", rope.get("alpha") if method == "ntk" and rope.get("alpha") else rope.get("factor"))
    ctx = t.get("max_position_embeddings")
    L0 = change.get("L0", t.get("original_max_position_embeddings") or rope.get("original_max_position_embeddings") or ctx)
    dim = change.get("dim", rotary)
    inv = _geometric(dim, base)[: rotary // 2]
    if "zero_from" in change:  # pairs past this one never turn
        inv = inv.clone()
        inv[change["zero_from"]:] = 0
    attention = 1.0
    if method == "linear":
        inv = inv / factor
    elif method == "ntk":
        inv = _geometric(dim, base * factor ** (dim / (dim - 2)))[: rotary // 2]
    elif method == "dynamic":
        n = max(seq_len, L0)
        grown = factor * n / L0 - (factor - 1)
        inv = _geometric(dim, base * grown ** (dim / (dim - 2)))[: rotary // 2]
    elif method == "yarn":
        factor = factor or ctx / L0
        fast = change.get("beta_fast", rope.get("beta_fast") or 32)
        slow = change.get("beta_slow", rope.get("beta_slow") or 1)

        def pair_at(turns):  # the fractional pair index making `turns` turns over L0
            return dim * math.log(L0 / (turns * 2 * math.pi)) / (2 * math.log(base))

        lo, hi = pair_at(fast), pair_at(slow)
        if change.get("truncate", rope.get("truncate", True)):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        ramp = ((torch.arange(dim // 2, dtype=torch.float64) - lo) / (hi - lo if hi > lo else 1e-3)).clamp(0, 1)
        inv = inv / factor * ramp + inv * (1 - ramp)
        ms, msa = change.get("mscale", rope.get("mscale")), rope.get("mscale_all_dim")
        curve = lambda m: 0.1 * m * math.log(factor) + 1 if factor > 1 else 1.0  # noqa: E731
        attention = rope.get("attention_factor") or (curve(ms) / curve(msa) if ms and msa else curve(1.0))
    elif method == "llama3":
        low, high = change.get("low", rope["low_freq_factor"]), change.get("high", rope["high_freq_factor"])
        turns = L0 * inv / (2 * math.pi)
        keep = ((turns - low) / (high - low)).clamp(0, 1) if high != low else (turns >= low).double()
        inv = inv * keep + inv / factor * (1 - keep)
    elif method == "longrope":
        factor = factor or ctx / L0
        lists = rope["long_factor"] if change.get("long", seq_len > L0) else rope["short_factor"]
        inv = inv / torch.tensor(lists, dtype=torch.float64)
        attention = rope.get("attention_factor") or math.sqrt(1 + math.log(factor) / math.log(L0))
    return Spectrum(inv, change.get("attention", attention), rotary, head)


# ---------------------------------------------------------------- MRoPE: which coordinate each pair reads

def mrope_axes(sections, style: str) -> torch.Tensor:
    half = sum(sections)
    if style == "contiguous":
        return torch.cat([torch.full((s,), a) for a, s in enumerate(sections)])
    axes = torch.zeros(half, dtype=torch.long)
    n = len(sections)
    for a in range(1, n):
        axes[a: n * sections[a]: n] = a  # a slice: past the last pair it stops, as the kernels' slicing does
    return axes


# ---------------------------------------------------------------- the rotation, in several forms

def _pair_view(x: torch.Tensor, layout: str) -> tuple[torch.Tensor, torch.Tensor]:
    if layout == "half":
        h = x.shape[-1] // 2
        return x[..., :h], x[..., h:]
    return x[..., 0::2], x[..., 1::2]


def _join(a: torch.Tensor, b: torch.Tensor, layout: str) -> torch.Tensor:
    return torch.cat((a, b), -1) if layout == "half" else torch.stack((a, b), -1).flatten(-2)


def turn_hf(x, cos, sin, layout):
    """transformers' form: x cos + rotate(x) sin with full-width cos/sin tables."""
    if layout == "half":
        h = x.shape[-1] // 2
        rotated = torch.cat((-x[..., h:], x[..., :h]), -1)
        return x * torch.cat((cos, cos), -1) + rotated * torch.cat((sin, sin), -1)
    rotated = torch.stack((-x[..., 1::2], x[..., 0::2]), -1).flatten(-2)
    return x * cos.repeat_interleave(2, -1) + rotated * sin.repeat_interleave(2, -1)


def turn_complex(x, cos, sin, layout):
    """Meta's form: consecutive pairs as complex numbers times e^(i angle) (interleaved only)."""
    if layout != "interleaved":
        a, b = _pair_view(x, layout)
        z = torch.view_as_complex(torch.stack((a, b), -1).contiguous())
        out = torch.view_as_real(z * torch.complex(cos, sin))
        return _join(out[..., 0], out[..., 1], layout)
    z = torch.view_as_complex(x.unflatten(-1, (-1, 2)).contiguous())
    return torch.view_as_real(z * torch.complex(cos, sin)).flatten(-2)


def turn_dense(x, cos, sin, layout):
    """A 2 x 2 block R per pair and position, applied as a matrix product."""
    a, b = _pair_view(x, layout)
    block = torch.stack((torch.stack((cos, -sin), -1), torch.stack((sin, cos), -1)), -2)  # (..., P, 2, 2)
    out = (block @ torch.stack((a, b), -1).unsqueeze(-1)).squeeze(-1)
    return _join(out[..., 0], out[..., 1], layout)


FORMS = {"hf": turn_hf, "complex": turn_complex, "dense": turn_dense}


@dataclass
class Impl:
    """One implementation: the config it serves and the steps it takes (each a hook a bug can change)."""

    cfg: dict
    layer: str | None = None
    layout: str = "half"
    form: str = "hf"
    rotated: str = "first"  # which end of the head turns (MLA: "last")
    spectrum: dict = field(default_factory=dict)  # changes to spectrum(): a wrong base, factor, method, ...
    fixed_length: int | None = None  # frequencies computed once, at this length (a frozen dynamic NTK)
    positions: Callable | None = None  # positions -> positions for q and k
    k_positions: Callable | None = None  # ... for k alone
    angle_dtype: object = None  # (kind, dtype): "product" / "positions" / "frequencies" / "angles"; dtype "input"
    table_dtype: torch.dtype | None = None
    compute_dtype: torch.dtype | None = None  # q, k, cos and sin cast to this dtype for the rotation
    scale: tuple[float | None, float | None] = (None, None)  # absolute factors on q, k (None: the config's)
    sections: tuple | None = None  # MRoPE sections (default the config's)
    style: str | None = None  # MRoPE style (default the config's)
    axes_order: tuple | None = None
    long_always: bool | None = None  # LongRoPE lists: True always long, False never, None the rule
    switch_at: int | None = None  # LongRoPE: long lists once seq_len >= this (the right rule: > L0)
    crossed: bool = False  # q's second half computed from k (a fused kernel's typo)

    def __call__(self, q, k, positions):
        return self.turn(q, positions, 0), self.turn(k, positions, 1)

    def _spec(self, seq_len):
        n = self.fixed_length or seq_len
        change = dict(self.spectrum)
        if self.long_always is not None:
            change["long"] = self.long_always
        elif self.switch_at is not None:
            change["long"] = seq_len >= self.switch_at
        return spectrum(self.cfg, n, self.layer, **change)

    def angles(self, x, pos):
        spec = self._spec(int(pos.max()) + 1)
        inv = spec.inv
        rope = _rope_dict(_text(self.cfg), self.layer)
        if pos.dim() == 3:  # MRoPE coordinates (batch, seq, n)
            sections = self.sections or tuple(rope["mrope_section"])
            style = self.style or ("interleaved" if rope.get("mrope_interleaved") else "contiguous")
            axes = mrope_axes(sections, style)
            if self.axes_order is not None:
                axes = torch.tensor(self.axes_order)[axes]
            m = pos.index_select(-1, axes).double()
        else:
            m = pos[..., None].double()
        kind, dtype = self.angle_dtype or (None, None)
        low = x.dtype if dtype == "input" and x.dtype in (torch.bfloat16, torch.float16) else (
            None if dtype == "input" else dtype)
        if kind is None or low is None:
            ang = m * inv
        elif kind == "frequencies":
            ang = m * inv.to(low).double()
        elif kind == "positions":
            ang = m.to(low).double() * inv
        elif kind == "product":
            ang = (m.to(low) * inv.to(low)).double()
        else:
            ang = (m.float() * inv.float()).to(low).double()
        return ang[:, None], spec

    def turn(self, x, pos, which):
        p = pos if self.positions is None else self.positions(pos)
        if which == 1 and self.k_positions is not None:
            p = self.k_positions(p)
        ang, spec = self.angles(x, p)
        cos, sin = ang.cos(), ang.sin()
        if self.table_dtype is not None:
            cos, sin = cos.to(self.table_dtype).double(), sin.to(self.table_dtype).double()
        a = self.scale[which] if self.scale[which] is not None else spec.attention
        r = spec.rotary
        d = x.shape[-1]
        part = slice(0, r) if self.rotated == "first" else slice(d - r, d)
        work = self.compute_dtype or torch.float64
        y = x.double().clone()
        y[..., part] = FORMS[self.form](x.to(work)[..., part], (cos * a).to(work), (sin * a).to(work),
                                        self.layout).double()
        return y.to(x.dtype)


@dataclass
class Engine:
    """A vLLM-style engine: a cos/sin cache of ``cache`` positions built once (float32), indexed by the flat
    tokens' positions; query (tokens, heads * d) and key (tokens, kv_heads * d); GQA as it comes."""

    impl: Impl
    cache: int
    head_dim: int

    def __post_init__(self):
        ang, spec = self.impl.angles(torch.zeros(1), torch.arange(self.cache)[None])
        self.table = torch.cat((ang[0, 0].cos(), ang[0, 0].sin()), -1).float() * spec.attention

    def forward(self, positions, query, key):
        if self.impl.positions is not None:  # the engine's own position bookkeeping (a bug hook)
            positions = self.impl.positions(positions[None])[0]
        cos, sin = self.table[positions].chunk(2, -1)  # IndexError past the cache, as an engine would raise
        out = []
        for x in (query, key):
            x = x.view(x.shape[0], -1, self.head_dim).float()
            out.append(turn_hf(x, cos[:, None], sin[:, None], self.impl.layout).flatten(1).to(query.dtype))
        return tuple(out)


@dataclass(frozen=True)
class Entry:
    name: str
    config: str  # tests/data/configs/<config>.json, or a dict
    fn: Callable
    expect: object  # frozenset of hypothesis names, "correct", "broken" or "unexplained"
    report: str  # the public bug report this entry is modelled on (engine, issue or PR)
    claim: dict = field(default_factory=dict)  # more diagnose_rope keywords (layer_type, head_dim, rotated)


# ---------------------------------------------------------------- the entries

def _impl(name: str, **steps) -> Impl:
    cfg = config(name) if isinstance(name, str) else name
    return Impl(cfg, **steps)


def _engine(name: str, cache: int, **steps) -> Callable:
    """fn (q, k, positions) over an Engine: flattens as from_engine does, here by hand."""
    impl = _impl(name, **steps)
    d = spectrum(impl.cfg, 1).head if "head_dim" not in steps else steps["head_dim"]
    engine = Engine(impl, cache, d)

    def fn(q, k, positions):
        B, H, T, D = q.shape
        flat = lambda x: x.transpose(1, 2).reshape(B * T, -1)  # noqa: E731
        oq, ok = engine.forward(positions.reshape(-1), flat(q), flat(k))
        return oq.reshape(B, T, H, D).transpose(1, 2), ok.reshape(B, T, k.shape[1], D).transpose(1, 2)

    return fn


def _gqa_crash(q, k, positions):
    """An engine that views k with q's head count (a GQA shape bug): it raises."""
    B, H, T, D = q.shape
    k.transpose(1, 2).reshape(B * T, H, D)
    return q, k


HUNYUAN = {"model_type": "hunyuan_v1_dense", "hidden_size": 2048, "num_attention_heads": 16, "head_dim": 128,
           "max_position_embeddings": 32768, "rope_theta": 10000.0,
           "rope_scaling": {"type": "dynamic", "factor": 1.0, "alpha": 1000.0}}
GEMMA4 = {"model_type": "gemma4_text", "head_dim": 64, "max_position_embeddings": 8192,
          "rope_parameters": {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25}}
UNKNOWN = {"model_type": "my_lab_model", "hidden_size": 1024, "num_attention_heads": 8, "max_position_embeddings": 8192,
           "rope_theta": 10000.0}
MLA = {"head_dim": 192, "rotated": "last"}  # DeepSeek's MLA head: 128 unrotated features, then the 64 rotated
F16, BF16 = torch.float16, torch.bfloat16
E = frozenset

GALLERY = [
    # ---- wrong pairs, wrong direction
    Entry("gpt-oss declared interleaved", "gpt-oss-20b", _impl("gpt-oss-20b", layout="interleaved"), E({"layout"}),
          "NVIDIA/TensorRT-LLM PR #16378 (bug 2: GPT-OSS declared is_neox=False)"),
    Entry("qwen3.5 MRoPE with GPT-J pairs", "qwen3.5-35b-a3b", _impl("qwen3.5-35b-a3b", layout="interleaved"),
          E({"layout"}), "vllm-project/vllm PR #49323 (MRoPE kernel pairs by the other convention)"),
    Entry("deepseek-v3 MLA with rotate_half", "deepseek-v3", _impl("deepseek-v3", layout="half", rotated="last"),
          E({"layout"}), "huggingface/optimum-intel PR #1877 (DeepSeek-V3 RoPE-interleave bug)", MLA),
    Entry("nanochat's transposed rotation", "olmo2-7b", _impl("olmo2-7b", positions=lambda p: -p), E({"clockwise"}),
          "karpathy/nanochat PR #489 (the transpose of R_m: a convention)"),
    # ---- MRoPE
    Entry("qwen3-vl with contiguous sections", "qwen3-vl-2b", _impl("qwen3-vl-2b", style="contiguous"),
          E({"section_style"}), "alibaba/MNN PR #4133 (Qwen3-VL's interleaved MRoPE run as Qwen2.5-VL's blocks)"),
    Entry("qwen2.5-vl with interleaved sections", "qwen2.5-vl-7b", _impl("qwen2.5-vl-7b", style="interleaved"),
          E({"section_style"}), "Blaizzy/mlx-vlm PR #576 (Qwen2-VL / 2.5-VL given Qwen3-VL's interleaving)"),
    Entry("qwen2.5-vl read as 1-D", "qwen2.5-vl-7b", _impl("qwen2.5-vl-7b", axes_order=(0, 0, 0)),
          E({"section_order"}), "kekzl/imp PR #1174 (mrope_section missed: a VL model on single-axis RoPE)"),
    # ---- positions
    Entry("decode position one ahead", "llama3.1-8b",
          _impl("llama3.1-8b", positions=lambda p: p + (p[:, :1] > 0).long()), E({"position_plus_one"}),
          "fla-org/flash-linear-attention #766 (seen-token count committed early: upper layers one ahead)"),
    Entry("cache offset counted twice", "qwen3-8b", _impl("qwen3-8b", positions=lambda p: p + p[:, :1]),
          E({"offset_twice"}), "skyzh/tiny-llm PR #46 (offset jumps 6 -> 12 after the prompt)"),
    Entry("decode restarts at position 0", "mistral-7b-v0.3", _impl("mistral-7b-v0.3", positions=lambda p: p - p[:, :1]),
          E({"restart_at_zero"}), "Blaizzy/mlx-vlm #1983 (get_rope_index ignores the cache offset)"),
    Entry("batch shares the first sequence's offset", "olmo2-7b",
          _impl("olmo2-7b", positions=lambda p: p[:1].expand_as(p)), E({"first_row_positions"}),
          "ml-explore/mlx-lm PR #748 (one scalar offset for a batch of caches)"),
    Entry("keys rotated twice", "starcoder2-7b", _impl("starcoder2-7b", k_positions=lambda p: 2 * p),
          E({"double_rotation"}), "NVIDIA/TensorRT-LLM PR #16378 (bug 1 turned q and k twice; this entry turns only k, the same class)"),
    # ---- precision
    Entry("bf16 autocast angles", "gemma2-9b", _impl("gemma2-9b", angle_dtype=("product", "input")),
          E({"low_precision_angles"}), "huggingface/transformers PR #29285 (RoPE loses precision in bfloat16)"),
    Entry("fp16 positions after .half()", "llama3.2-3b", _impl("llama3.2-3b", angle_dtype=("product", "input")),
          E({"low_precision_angles"}), "NVIDIA/Megatron-LM #535 (seq cast to fp16 loses fraction bits)"),
    Entry("inv_freq quantized to bf16", "qwen2.5-7b", _impl("qwen2.5-7b", angle_dtype=("frequencies", BF16)),
          E({"low_precision_angles"}), "sgl-project/sglang-jax #1472 (inverse frequencies quantized before the phase)"),
    Entry("angles in fp16 for every input", "olmo2-7b", _impl("olmo2-7b", angle_dtype=("angles", F16)),
          E({"low_precision_angles"}), "EleutherAI/gpt-neox #1003 (tables computed in the model's fp16)"),
    Entry("fp16 angles past 65504", "phi3.5-mini", _impl("phi3.5-mini", angle_dtype=("product", F16)), "broken",
          "NVIDIA/Megatron-LM #535 (max_seq_len 32768 exceeds what fp16 positions hold; here the angles overflow)"),
    Entry("rotation in fp16 for every input", "mistral-7b-v0.3", _impl("mistral-7b-v0.3", compute_dtype=F16),
          E({"rotation_dtype"}), "ml-explore/mlx-lm PR #1076 (the rotation runs at the model's FP16)"),
    Entry("cos/sin cache cast by model.to()", "llama3.1-8b", _impl("llama3.1-8b", table_dtype=BF16),
          E({"table_dtype"}), "huggingface/transformers #25681 (wrong cache values after casting the model)"),
    # ---- attention factors
    Entry("mscale inflates a ratio of 1", "deepseek-v2-lite", _impl("deepseek-v2-lite", scale=(1.261, 1.261),
                                                                    layout="interleaved", rotated="last"),
          E({"attention_factor"}), "kekzl/imp PR #880 (rope mscale 1.261 where the ratio is 1.0)", MLA),
    Entry("generic YaRN mscale on Ministral 3", "ministral3-3b", _impl("ministral3-3b", scale=(1.2773, 1.2773)),
          E({"attention_factor"}), "vllm-project/vllm PR #48623 (generic YaRN ignores mscale / mscale_all_dim)"),
    Entry("YaRN factor also in the softmax", "gpt-oss-20b", _impl("gpt-oss-20b", scale=(1.3466 ** 2, 1.3466 ** 2)),
          E({"attention_factor"}), "guoqingbao/xinfer PR #329 (YaRN mscale propagated a second time)"),
    Entry("k carries mscale twice", "gpt-oss-20b", _impl("gpt-oss-20b", scale=(None, 1.3466 ** 2)),
          E({"one_sided_factor"}), "NVIDIA/TensorRT-LLM PR #16378 (the cached K ends up mscale^2-scaled)"),
    Entry("YaRN mscale on the queries only", "qwen2.5-7b-yarn", _impl("qwen2.5-7b-yarn", scale=(None, 1.0)),
          E({"one_sided_factor"}),
          "guoqingbao/xinfer PR #329 (the YaRN magnitude moved off q and k; here it stays on q alone)"),
    # ---- context extension
    Entry("dynamic NTK run as PI", "internlm2.5-7b", _impl("internlm2.5-7b", spectrum={"method": "linear"}),
          E({"scaling_method"}), "ml-explore/mlx-lm PR #1553 (dynamic NTK conflated with position scaling)"),
    Entry("dynamic NTK frozen at max_len x factor", "internlm2.5-7b", _impl("internlm2.5-7b", fixed_length=65536),
          E({"frozen_dynamic"}), "vllm-project/vllm #5093 (the dynamic NTK cache is static NTK)"),
    Entry("GPT-OSS ramp rounded", "gpt-oss-20b", _impl("gpt-oss-20b", spectrum={"truncate": True}),
          E({"yarn_ramp"}), "vllm-project/vllm #27722 (yarn_find_correction_range rounds for GPT-OSS)"),
    Entry("Kimi K2's betas read as YaRN's defaults", "kimi-k2",
          _impl("kimi-k2", layout="interleaved", rotated="last", spectrum={"beta_fast": 32.0, "beta_slow": 1.0}),
          E({"yarn_ramp"}), "ikawrakow/ik_llama.cpp #1298 (Kimi's YaRN settings read differently at long context)", MLA),
    Entry("YaRN ramp left fractional", "qwen2.5-7b-yarn", _impl("qwen2.5-7b-yarn", spectrum={"truncate": False}),
          E({"yarn_ramp"}),
          "keras-team/keras-hub PR #2981 (truncate defaulted to False)"),
    Entry("llama3 scaling ignored", "llama3.1-8b", _impl("llama3.1-8b", spectrum={"method": "default"}),
          E({"scaling_dropped"}), "Blaizzy/mlx-vlm PR #1710 (declared rope_scaling never applied)"),
    Entry("Llama 3.2 with factor 8", "llama3.2-3b", _impl("llama3.2-3b", spectrum={"factor": 8.0}),
          E({"scaling_factor"}), "meta-llama/llama-models #241 (scaling factor hard-coded to 8 for 3.2)"),
    Entry("LongRoPE long lists for every length", "phi3-mini-128k", _impl("phi3-mini-128k", long_always=True),
          E({"longrope_switch"}), "ggml-org/llama.cpp #24823 (factors picked by the allocated context)"),
    Entry("LongRoPE switched one token early", "phi4-mini", _impl("phi4-mini", switch_at=4096),
          E({"longrope_switch"}), "unslothai/unsloth PR #10681 (long factors at exactly L0)"),
    Entry("HunYuan's alpha ignored", HUNYUAN, _impl(HUNYUAN, spectrum={"method": "default"}), E({"scaling_dropped"}),
          "onnxruntime/mobius PR #293 (DynamicNTKRope read factor 1.0, not alpha 1000)"),
    Entry("Gemma 3 global layers unscaled", "gemma3-4b", _impl("gemma3-4b", layer="full_attention",
                                                               spectrum={"method": "default"}),
          E({"scaling_dropped"}), "Blaizzy/mlx-vlm PR #1709 (linear rope_scaling never applied to global layers)",
          {"layer_type": "full_attention"}),
    Entry("Gemma 3 sliding layers scaled", "gemma3-4b", _impl("gemma3-4b", layer="sliding_attention",
                                                              spectrum={"method": "linear", "factor": 8.0}),
          E({"scaling_method"}), "antonellof/ferrox #39 (linear scaling applied to the sliding-window layers)",
          {"layer_type": "sliding_attention"}),
    Entry("Gemma 3 sliding layers on the global base", "gemma3-1b",
          _impl("gemma3-1b", layer="sliding_attention", spectrum={"base": 1e6}), E({"wrong_base"}),
          "vllm-project/vllm PR #29111 (sliding layers need rope_local_base_freq)", {"layer_type": "sliding_attention"}),
    Entry("rope_theta left at 10000", "llama3.1-8b", _impl("llama3.1-8b", spectrum={"base": 10000.0}),
          E({"wrong_base"}), "lyogavin/airllm PR #369 (rope_theta not carried: 10000 for 500000)"),
    # ---- which features turn
    Entry("GLM rotates the whole head", "glm4.5-air", _impl("glm4.5-air", spectrum={"rotary": 128}), E({"rotary_dim"}),
          "ml-explore/mlx-lm PR #1698 (glm builds its RoPE over the whole head_dim)"),
    Entry("partial rotary paired across the head", "qwen3-next-80b-a3b",
          _impl("qwen3-next-80b-a3b", spectrum={"rotary": 256, "dim": 256, "zero_from": 32}), E({"partial_proportional"}),
          "pie-project/pie PR #603 (theta^(-2i/head_dim) and pairs (i, i + head_dim/2))"),
    Entry("proportional built as a small RoPE", GEMMA4, _impl(GEMMA4), E({"partial_proportional"}),
          "aws-neuron/neuronx-distributed-inference PR #106 (Gemma 4 global RoPE of dim 128, denominator 128)"),
    Entry("MLA turns the wrong end", "kimi-k2", _impl("kimi-k2", layout="interleaved", rotated="first"),
          E({"rotated_slice"}), "raullenchai/Rapid-MLX PR #1225 (rotary channels are last; the patch scaled the first)",
          MLA),
    Entry("no RoPE on Command R7B's sliding layers", "command-r7b",
          lambda q, k, positions: (q.clone(), k.clone()),
          E({"no_rotation"}), "vllm-project/vllm PR #11203 (the sliding-window condition inverted)"),
    # ---- two at once, a crash, and one outside the classes
    Entry("GPT-OSS engine without YaRN", "gpt-oss-20b", _impl("gpt-oss-20b", spectrum={"method": "default"},
                                                              scale=(1.0, 1.0)),
          E({"scaling_dropped", "attention_factor"}), "NVIDIA/TensorRT-Model-Connect #399 (YaRN and its factor dropped)"),
    Entry("GQA keys viewed with q's heads", "qwen3-8b", _gqa_crash, "broken",
          "vllm-project/vllm-ascend #12765 (a kernel path that ignores the model's own flags; here its head count)"),
    Entry("q and k halves crossed", "llama3.1-8b", None, "unexplained",  # fn set below
          "hpcaitech/ColossalAI PR #6429 (fused kernel computes q's second half from k)"),
]


def _crossed(q, k, positions):
    """q's second half taken from the rotated k, k's first half from the rotated q (GQA: by head group)."""
    right = _impl("llama3.1-8b")
    rq, rk = right(q, k, positions)
    group = q.shape[1] // k.shape[1]
    h = q.shape[-1] // 2
    oq, ok = rq.clone(), rk.clone()
    oq[..., h:] = rk.repeat_interleave(group, 1)[..., h:]
    ok[..., :h] = rq[:, ::group, :, :h]
    return oq, ok


GALLERY[-1] = Entry(GALLERY[-1].name, GALLERY[-1].config, _crossed, GALLERY[-1].expect, GALLERY[-1].report)

CORRECT = [
    Entry("Llama 4 Scout in complex numbers", "llama4-scout-instruct",
          _impl("llama4-scout-instruct", layout="interleaved", form="complex"), "correct",
          "meta-llama/llama-models #241 (fixed: the scaling read from the config)"),
    Entry("Llama 3.2 engine over a 131072-position cache, GQA", "llama3.2-3b", _engine("llama3.2-3b", 131072),
          "correct", "vllm-project/vllm PR #55910 (a cos/sin cache sized to the positions served)"),
    Entry("Qwen3 as dense 2 x 2 blocks", "qwen3-8b", _impl("qwen3-8b", form="dense"), "correct",
          "EleutherAI/gpt-neox #834 (the rotation of each pair written out)"),
    Entry("Qwen3-VL interleaved MRoPE kernel", "qwen3-vl-2b", _impl("qwen3-vl-2b"), "correct",
          "ollama/ollama PR #12807 (interleaved mrope)"),
    Entry("Kimi K2 MLA kernel", "kimi-k2", _impl("kimi-k2", layout="interleaved", rotated="last"), "correct",
          "huggingface/optimum-intel PR #1877 (fixed: interleaved pairs, the rotated slice last)", MLA),
    Entry("DeepSeek-V2-Lite MLA with the ratio 1", "deepseek-v2-lite",
          _impl("deepseek-v2-lite", layout="interleaved", rotated="last"), "correct",
          "kekzl/imp PR #880 (fixed: the rope mscale is the ratio, 1.0)", MLA),
    Entry("GPT-OSS with truncate false", "gpt-oss-20b", _impl("gpt-oss-20b"), "correct",
          "vllm-project/vllm PR #28244 (truncate passed to yarn)"),
    Entry("Phi-3.5 LongRoPE switching past L0", "phi3.5-mini", _impl("phi3.5-mini"), "correct",
          "unslothai/unsloth PR #10681 (short factors at exactly L0)"),
    Entry("InternLM2.5 dynamic NTK, layout not in the table", "internlm2.5-7b", _impl("internlm2.5-7b"), "correct",
          "vllm-project/vllm PR #41301 (the dynamic NTK scale grows with the length)"),
    Entry("Qwen3-Next partial rotary", "qwen3-next-80b-a3b", _impl("qwen3-next-80b-a3b"), "correct",
          "pie-project/pie PR #603 (fixed: the rotary width, not the head's)"),
    Entry("Llama 3.1, angles in float32 for half inputs", "llama3.1-8b", _impl("llama3.1-8b"), "correct",
          "sgl-project/sglang-jax PR #1473 (rotary phases in float32)"),
    Entry("HunYuan with alpha", HUNYUAN, _impl(HUNYUAN), "correct",
          "onnxruntime/mobius PR #293 (fixed: alpha read)"),
    Entry("a lab model with GPT-J pairs", UNKNOWN, _impl(UNKNOWN, layout="interleaved"), "correct",
          "raiyanyahya/how-to-train-your-gpt #6 (which pairing a model uses is the code's, not the config's)"),
]
