"""``diagnose_rope``: run fn on the probes, compare it with the claimed RoPE, name its bug; and
``diagnose_model``: every RoPE of a transformers model against its own config, in one call.

The doctor reports and never raises on fn: an exception, a wrong shape or NaN from fn is a finding
(verdict "broken", one line). Only its own bad arguments raise ValueError, naming the parameter.
"""
from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass, replace
from typing import Mapping, Sequence

import torch
from torch import Tensor

from ..rope_config import pair_layout, rope_layer_types
from .adapters import Fn, from_hf
from .claim import Claim, build_claim
from .hypotheses import Context
from .probes import FnFailed, Probe, call, make_probes, probe_positions
from .report import ProbeResult, RopeDiagnosis, symptoms
from .search import closest, fits, search, squared_difference
from .variant import F32_ANGLE, HALF, Variant, apply, fit_scales, residual, scores_match, seq_len

SHIFT = 37  # the relative property: move q and k together by this many positions


def _relative_start(claim: Claim) -> int:
    """Where the relative test starts: both placements stay on one side of L0 (LongRoPE's lists)."""
    return 0 if claim.L0 is None or claim.L0 >= 12 + SHIFT + 1 else claim.L0 + 1


def _relative(fn: Fn, claim: Claim, seed: int, device) -> float:
    """How much fn's scores change when q and k move together by 37 positions (a fraction of |q||k|)."""
    gen = torch.Generator().manual_seed(seed + 1)
    T = 10 if claim.sections else 12
    start = _relative_start(claim)
    q, k = (torch.randn(1, 1, T, claim.d, generator=gen) for _ in range(2))
    scores = []
    for s in (start, start + SHIFT):
        pos = probe_positions(claim, s, T, 1)
        rq, rk, _ = call(fn, Probe("relative", f"scores at positions from {s}", q, k, pos), device)
        scores.append(rq[0, 0] @ rk[0, 0].T)
    size = q[0, 0].double().norm(dim=-1)[:, None] * k[0, 0].double().norm(dim=-1)[None, :]
    return float(((scores[1] - scores[0]).abs() / size).max())


def _relative_tolerance(claim: Claim) -> float:
    """float32 angles at positions up to `top`: each of the r/2 pairs' score term may move by 2^-19 (top + 1)."""
    top = _relative_start(claim) + SHIFT + 12
    return F32_ANGLE * 4 * (top + 1) * max(1.0, claim.attention_factor) ** 2


def _reference(claim: Claim, layout: str) -> Variant:
    return Variant(layout=layout, frequencies=lambda pos: claim.frequencies(seq_len(pos)), r=claim.r,
                   rotated=claim.rotated, scale=claim.attention_factor, axes=claim.axes())


def _results(reference: Variant, probes: list[Probe], outputs) -> list[ProbeResult]:
    out = []
    for probe, got in zip(probes, outputs):
        err, by_pos, size, _ = residual(reference, probe.q, probe.k, probe.positions, got)
        out.append(ProbeResult(probe.name, probe.what, err, err <= 1, size, tuple(float(x) for x in by_pos)))
    return out


def _scores_match_across_calls(reference: Variant, probes: list[Probe], outputs) -> bool:
    """A query from one probe against a key from another: fn's scores are the reference's. One fixed map of the
    features (true equivalence) passes; positions that depend on the call (an offset lost in a cache) do not."""
    rows = []
    for probe, (gq, gk) in zip(probes, outputs):
        if probe.dtype in HALF or probe.positions.dim() != 2:
            continue
        wq, _ = apply(reference, probe.q[:1, :1], probe.positions[:1], 0)
        wk, _ = apply(reference, probe.k[:1, :1], probe.positions[:1], 1)
        rows.append((wq[0, 0], wk[0, 0], gq[0, 0], gk[0, 0], int(probe.positions.max())))
    for (wq, _, gq, _, top_q), (_, wk, _, gk, top_k) in itertools.product(rows, rows):
        slack = 2.0 ** -17 * (max(top_q, top_k) + 1)
        size = wq.norm(dim=-1)[:, None] * wk.norm(dim=-1)[None, :]
        if not bool(((gq @ gk.T - wq @ wk.T).abs() <= slack * size + 1e-6).all()):
            return False
    return True


def _checked(claim: Claim, probes: list[Probe]) -> str:
    top = max(p.span[1] for p in probes)
    bound = f"the context ends at {claim.top} ({claim.span})" if claim.top is not None else "no context given"
    return f"positions 0..{top} checked, {bound}"


def diagnose_rope(
    fn: Fn,
    config: Mapping | None = None,
    *,
    layer_type: str | None = None,
    head_dim: int | None = None,
    layout: str | None = None,
    base: float | None = None,
    inv_freq: Tensor | None = None,
    attention_factor: float | None = None,
    rotary_dim: int | None = None,
    rotated: str = "first",
    sections: Sequence[int] | None = None,
    section_style: str = "contiguous",
    max_positions: int | None = None,
    seed: int = 0,
    device: torch.device | str | None = None,
) -> RopeDiagnosis:
    """Run fn on probes, compare it with the RoPE it claims, and name the bug if there is one.

    fn:        fn(q, k, positions) -> (q, k), q (batch, heads, seq, head_dim), k (batch, kv_heads, seq, head_dim),
               positions (batch, seq) integers, or (batch, seq, n) coordinates for MRoPE. Other shapes:
               ``from_hf``, ``from_engine``, ``from_one_tensor``.
    config:    the claimed RoPE as a Hugging Face config.json dict (``rope_settings``; layer_type for
               per-layer RoPE); layout then defaults to the model family's (``PAIR_LAYOUTS``); a family the
               table does not know leaves it open, and the report names the layout fn implements
    or the claimed RoPE as ``apply_rope``'s arguments: base (10000), layout ("interleaved"), inv_freq,
               attention_factor (1), rotary_dim; sections and section_style as ``apply_rope_nd``'s
    head_dim:  features per head of the probes (default: the config's, else rotary_dim, else 64)
    rotated:   "first" (GPT-NeoX, Phi) or "last" (DeepSeek's MLA) rotary_dim features turn
    max_positions: the positions fn can take (e.g. its cos/sin cache); default the config's context
               (max_position_embeddings; dynamic NTK: factor x that); no probe goes past it
    seed:      the probes' random q and k; device: where fn gets them (default the CPU; the
               comparison runs in float64 on the CPU)
    returns:   ``RopeDiagnosis`` (``str()`` is one paragraph); the package docstring lists the probes and
               hypotheses. Raises ValueError for a malformed claim or config (naming the field); never for
               fn: an exception, a wrong shape or NaN from fn is the verdict "broken" (a stub's
               NotImplementedError passes through: nothing to diagnose yet).
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    if not callable(fn):
        raise ValueError(f"fn must be callable as fn(q, k, positions) -> (q, k), got {type(fn).__name__}")
    claim = build_claim(config, layer_type=layer_type, head_dim=head_dim, layout=layout, base=base,
                        inv_freq=inv_freq, attention_factor=attention_factor, rotary_dim=rotary_dim, rotated=rotated,
                        sections=sections, section_style=section_style, max_positions=max_positions)
    probes = make_probes(claim, seed)
    layouts = [claim.layout] if claim.layout else ["half", "interleaved"]
    outputs, notes = [], []
    try:
        for probe in probes:
            q, k, more = call(fn, probe, device)
            outputs.append((q, k))
            notes += [n for n in more if n not in notes]
        relative_error = _relative(fn, claim, seed, device)
    except FnFailed as failure:
        done = probes[: len(outputs)]
        results = max((_results(_reference(claim, lay), done, outputs) for lay in layouts),
                      key=lambda rs: sum(r.passed for r in rs))
        return RopeDiagnosis(False, "broken", claim.words, float("nan"), failure.probe, None, (), None, False,
                             float("nan"), [], results, notes, layout=claim.layout, model_type=claim.model_type,
                             checked=_checked(claim, probes), finding=str(failure))
    relative = relative_error <= _relative_tolerance(claim)
    ctx = Context(claim, probes, outputs)
    checked = _checked(claim, probes)
    common = dict(layout_inferred=claim.layout is None, model_type=claim.model_type, checked=checked)
    for lay in layouts:
        results = _results(_reference(claim, lay), probes, outputs)
        if all(r.passed for r in results):
            return RopeDiagnosis(True, "correct", claim.words, max(r.error for r in results), None, None, (), None,
                                 relative, relative_error, [], results, notes, layout=lay, **common)
    # each layout the claim allows, searched; the one with an explanation (single before pair) wins
    tries = []
    for lay in layouts:
        reference = _reference(claim, lay)
        found = search(reference, ctx)
        rank = (0 if found and len(found.variant.names) == 1 else 1 if found else 2,
                found.residual if found else squared_difference(reference, ctx))
        tries.append((rank, lay, reference, found))
    _, lay, reference, found = min(tries, key=lambda t: t[0])
    results = _results(reference, probes, outputs)
    worst = max(r.error for r in results)
    failed = next(r.name for r in results if not r.passed)
    cq, ck = fit_scales(reference, ctx.inputs)
    constant = cq is not None and ck is not None and abs(cq - ck) < 2e-3 * abs(cq) and \
        fits(replace(reference, scale=(cq + ck) / 2), ctx, stop=1) <= 1
    found_symptoms = symptoms(results, probes, (cq + ck) / 2 / claim.attention_factor if constant else None)
    same_scores = all(scores_match(reference, p.q, p.k, p.positions, got) for p, got in zip(probes, outputs))
    head = (claim.words, worst, failed)
    if found is not None and same_scores:
        notes.append("within each call fn's scores q·k are the reference's (moving every position of a call by the "
                     "same amount cancels in n − m); it matters where these keys meet keys rotated elsewhere, e.g. "
                     "in a KV cache")
    if found is None and same_scores and _scores_match_across_calls(reference, probes, outputs):
        return RopeDiagnosis(False, "equivalent", *head, None, (), None, relative, relative_error, found_symptoms,
                             results, notes, layout=lay, **common)
    if found is None and same_scores:
        notes.append("within each call fn's scores q·k are the reference's, but a query from one call against a "
                     "key from another (a KV cache) scores differently: fn's positions depend on the call")
    if found is None:
        near = min((closest(ref, ctx) for _, _, ref, _ in tries), key=lambda t: t[1])
        return RopeDiagnosis(False, "unexplained", *head, None, (), None, relative, relative_error, found_symptoms,
                             results, notes, near, layout=lay, **common)
    variant = found.variant
    verdict = "convention" if variant.names == ("clockwise",) and relative else "bug"
    return RopeDiagnosis(False, verdict, *head, " and ".join(variant.words), variant.names, found.residual, relative,
                         relative_error, found_symptoms, results, notes,
                         alternatives=[(o.names[0], " and ".join(o.words)) for o in found.others], layout=lay,
                         **common)


# ---------------------------------------------------------------- one call per transformers model

@dataclass
class ModelDiagnosis:
    """``diagnose_model``'s result: one ``RopeDiagnosis`` per RoPE (layer type) of the model."""

    name: str
    reports: dict[str | None, RopeDiagnosis]

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.reports.values())

    @property
    def text(self) -> str:
        lines = [f"{self.name}: {len(self.reports)} RoPE" + ("s" if len(self.reports) > 1 else "")]
        lines += [f"  {'the RoPE' if t is None else t + ' layers'}: {r.text}" for t, r in self.reports.items()]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.text


def _rotary_module(model) -> torch.nn.Module:
    for name, module in model.named_modules():
        kind = type(module).__name__
        if kind.endswith("RotaryEmbedding") and "Vision" not in kind and "vision" not in name:
            return module
    raise ValueError(f"model must hold a transformers rotary module (a ...RotaryEmbedding submodule); "
                     f"{type(model).__name__} has none")


def diagnose_model(model, *, seed: int = 0, device: torch.device | str | None = None,
                   max_positions: int | None = None) -> ModelDiagnosis:
    """Every RoPE of a transformers model (each layer type with its own) checked against the model's own
    config, through its rotary module and its family's apply_rotary_pos_emb (``from_hf``).

    model:   a transformers PreTrainedModel (weights are not used: a tiny config built offline will do)
    returns: ``ModelDiagnosis`` (``.reports`` per layer type, ``.ok``, ``.text``); raises ValueError when
             model has no rotary module or its family no apply_rotary_pos_emb
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    config = getattr(model, "config", None)
    if config is None or not hasattr(config, "to_dict"):
        raise ValueError(f"model must be a transformers model with a .config, got {type(model).__name__}")
    rotary = _rotary_module(model)
    module = sys.modules[type(rotary).__module__]
    cfg = config.to_dict()
    interleave = pair_layout(cfg)[1] in ("deepseek_v2", "deepseek_v3", "deepseek_v32") and getattr(
        getattr(config, "text_config", config), "rope_interleave", True)
    apply = getattr(module, "apply_rotary_pos_emb_interleave" if interleave else "apply_rotary_pos_emb", None) or \
        getattr(module, "apply_rotary_pos_emb", None)
    if apply is None:
        raise ValueError(f"model's family ({module.__name__}) has no apply_rotary_pos_emb to call")
    reports = {}
    for layer_type in rope_layer_types(cfg):
        builder = rotary if layer_type is None else (lambda x, ids, t=layer_type: rotary(x, ids, t))
        reports[layer_type] = diagnose_rope(from_hf(apply, builder), cfg, layer_type=layer_type, seed=seed,
                                            device=device, max_positions=max_positions)
    return ModelDiagnosis(type(model).__name__, reports)
