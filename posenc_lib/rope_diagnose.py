"""Check a RoPE implementation against the reference, and name its bug: ``diagnose_rope(fn, ...)``.

``fn(q, k, positions) -> (q, k)`` is run on probes (q, k of shape (batch, heads, seq, head_dim),
positions (batch, seq), or (batch, seq, n) coordinates for MRoPE) and its output compared with the
reference (``rope.py``'s steps, in float64). On a mismatch, each hypothesis below is a
transformation of the reference; the one whose output reproduces fn's is the diagnosis (two at
once are tried when no single one does). Every hypothesis and the probe that exposes it:

  hypothesis            what fn does instead of the claimed RoPE                 exposed by
  layout                the other pair layout (interleaved <-> half)             start
  clockwise             R_{-m}, the transposed rotation (a convention)           start
  position_plus_one     positions + 1 (1-based), in every call or once a         start / offset
                        sequence starts past 0 (the cache length counted twice)
  position_minus_one    positions - 1, likewise                                  start / offset
  restart_at_zero       positions restart at 0: the cache offset is ignored      offset
  first_row_positions   every sequence of a batch gets the first one's positions batched
  double_rotation       k (or q, or both) turned twice: angle 2 m theta_j        start
  bf16_angles           frequencies, angles or their product in bfloat16         bf16
                        (always, or only for bfloat16 inputs)
  rotated_slice         the last r features rotated instead of the first, or     start
                        the reverse (partial rotary; DeepSeek's MLA)
  rotary_dim            head_dim features rotated instead of rotary_dim, or      start
                        half or twice rotary_dim
  head_dim_exponent     theta_j = base^(-2j/head_dim) for the r rotated features start
  partial_proportional  partial rotary where proportional is claimed, or the     start
                        reverse (pairs within the block vs across the head)
  wrong_base            another base (estimated from fn's own angles)            start
  scaling_dropped       the context extension ignored: plain frequencies         far
  llama3_bands          llama3's bands anchored at another L0                    far
  longrope_switch       LongRoPE's lists switched at the wrong length (one token at L0 / past L0
                        early, never, always, or token by token)
  section_order         MRoPE's sections or coordinates in another order, or     start
                        every pair on the first coordinate (MRoPE read as 1-D)
  no_rotation           nothing rotated                                          start
  attention_factor      a constant factor c on q and k (scores x c^2): the       start
                        claimed factor missing, doubled, or one where none is
"exposed by" is a probe the bug always fails (``Hypothesis.probe``; tests/test_rope_diagnose.py
checks it on a gallery of buggy implementations, one or more per hypothesis).

The probes (``make_probes``): start (positions 0..11), offset (a KV cache: 37..42), batched (two
sequences at 0 and 200), decode (one token at 1000), bf16 (bfloat16 inputs at 300..307), several
shapes among them, and for configs with lengths: at L0 (ending at L0 - 1), past L0 (ending at L0)
and far (ending at L - 1). Separately, the relative property: fn's scores q_m . k_n for the same
vectors at positions shifted by 37 must not change (scores depend only on m - n).

Tolerance: float32 angles are exact to a few units in the last place of m theta_j, so an output
may differ from the float64 reference by |x_pair| * 2^-19 (|m theta_j| + 1) per feature (bf16
inputs: 2^-6 more, the rounding of a bf16 result). Residuals are in these units: <= 1 reproduces.
Names: d = head_dim fed to fn, r = rotated features, m, n = positions, theta_j = inv_freq[j].
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field, replace
from typing import Callable, Mapping, Sequence

import torch
from torch import Tensor

from . import _validate as v
from .angles import rope_frequencies
from .rope import LAYOUTS, pair_indices, rope_tables, rotate_pairs
from .rope_config import USES_L0, RopeSettings, pair_layout, rope_settings
from .rope_inspect import rope_lengths
from .rope_nd import STYLES, mrope_positions, rope_nd_axes, rope_nd_frequencies

Fn = Callable[[Tensor, Tensor, Tensor], tuple[Tensor, Tensor]]
_F32_ANGLE = 2.0 ** -19  # float32: a few ulps of m theta_j, and of the result
_BF16 = 2.0 ** -5  # bfloat16 result: cos, sin and the products each rounded to 8 bits
_SHIFT = 37  # the relative property: move q and k together by this many positions


# ---------------------------------------------------------------- what fn claims to implement

@dataclass(frozen=True)
class Claim:
    """The RoPE fn claims: the reference that ``diagnose_rope`` compares it with."""

    d: int  # head_dim of the probes
    r: int  # rotated features
    layout: str
    rotated: str  # "first" or "last": which r features turn
    base: float
    attention_factor: float
    settings: RopeSettings | None  # from a config: recomputes frequencies (lengths, bases, bands)
    inv_freq: Tensor | None  # given frequencies (float64), else computed from base / settings
    sections: tuple[int, ...] | None  # MRoPE: pairs per axis
    section_style: str
    L0: int | None  # where a scaled RoPE changes (probes at and past it)
    L: int | None  # the deployed length (the far probe)
    words: str  # how the report names it

    def frequencies(self, seq_len: int, *, exponent: int | None = None, base: float | None = None) -> Tensor:
        """theta_j (pairs,) float64 at the current length seq_len; ``exponent`` = the dimension in
        base^(-2j/dim) (head_dim hypotheses), ``base`` another base."""
        if self.inv_freq is not None and exponent is None and base is None:
            return self.inv_freq
        if self.settings is not None:
            s = self.settings
            if exponent is not None:
                s = replace(s, rotary_dim=exponent, partial_rotary_factor=1.0) if s.method != "proportional" else \
                    replace(s, method="none", rotary_dim=exponent, partial_rotary_factor=1.0, factor=1.0)
            if base is not None:
                s = replace(s, base=base)
            return s.frequencies(seq_len, dtype=torch.float64)[0]
        if self.sections is not None and exponent is None:
            return rope_nd_frequencies(self.sections, self.section_style, base=base or self.base, dtype=torch.float64)
        return rope_frequencies(exponent or self.r, base=base or self.base, dtype=torch.float64)

    def axes(self, sections: tuple[int, ...] | None = None, order: tuple[int, ...] | None = None) -> Tensor | None:
        """The axis each pair reads (MRoPE), for these sections and this order of the coordinates."""
        if self.sections is None:
            return None
        axes = rope_nd_axes(sections or self.sections, self.section_style)
        return axes if order is None else torch.tensor(order)[axes]


# ---------------------------------------------------------------- a transformation of the reference

@dataclass(frozen=True)
class Variant:
    """The reference with some of its steps changed (each hypothesis changes one or two fields)."""

    layout: str
    frequencies: Callable[[Tensor], Tensor]  # positions (batch, seq[, n]) -> theta (pairs,) or (batch, seq, pairs)
    r: int
    rotated: str
    scale: float
    axes: Tensor | None
    direction: int = 1
    shift: int = 0
    shift_past_zero: bool = False  # the shift only where a sequence starts past 0 (the decoding path)
    restart: bool = False
    first_row: bool = False
    turns: tuple[int, int] = (1, 1)  # (q, k)
    rounding: str | None = None  # "frequencies", "product" or "angles": rounded to bfloat16
    rounding_bf16_inputs_only: bool = False  # rounded only when the inputs are bfloat16 (cast to x.dtype)
    names: tuple[str, ...] = ()
    words: tuple[str, ...] = ()


def _seq_len(positions: Tensor) -> int:
    """The current length as transformers reads it: the largest position + 1 (max over the batch)."""
    return int(positions.max()) + 1


def _positions(v: Variant, positions: Tensor) -> Tensor:
    pos = positions
    if v.first_row:
        pos = pos[:1].expand_as(pos)
    if v.restart:
        pos = pos - pos[:, :1]
    if v.shift_past_zero:
        return pos + v.shift * (pos[:, :1] > 0)
    return pos + v.shift


def _angles(v: Variant, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
    """(angles, |m| theta_j): each (batch, 1, seq, pairs) float64, for inputs of this dtype."""
    pos = _positions(v, positions)
    theta = v.frequencies(pos)
    m = pos.unsqueeze(-1) if v.axes is None else pos.index_select(-1, v.axes.to(pos.device))
    exact = m.double() * theta
    if v.rounding_bf16_inputs_only and dtype != torch.bfloat16:
        angles = exact
    elif v.rounding == "frequencies":
        angles = m.double() * theta.to(torch.bfloat16).double()
    elif v.rounding == "product":
        angles = (m.to(torch.bfloat16) * theta.to(torch.bfloat16)).double()
    elif v.rounding == "angles":
        angles = (m.float() * theta.float()).to(torch.bfloat16).double()
    else:
        angles = exact
    return (v.direction * angles).unsqueeze(1), exact.abs().unsqueeze(1)


def _apply(v: Variant, x: Tensor, positions: Tensor, which: int) -> tuple[Tensor, Tensor]:
    """(v applied to x (batch, heads, seq, d) in float64, |m theta| per rotated pair); which: 0 = q, 1 = k."""
    angles, phase = _angles(v, positions, x.dtype)
    angles = angles * v.turns[which]
    x = x.double()
    d = x.shape[-1]
    part = slice(0, v.r) if v.rotated == "first" else slice(d - v.r, d)
    out = x.clone()
    out[..., part] = rotate_pairs(x[..., part], *rope_tables(angles, v.scale), v.layout)
    return out, phase


def _pair_sizes(x: Tensor, v: Variant) -> Tensor:
    """|x_pair| for every feature of the rotated slice (its own value elsewhere): (batch, heads, seq, d)."""
    x = x.double()
    d = x.shape[-1]
    size = x.abs()
    start = 0 if v.rotated == "first" else d - v.r
    a, b = (i + start for i in pair_indices(v.r, v.layout))
    norm = torch.sqrt(x[..., a] ** 2 + x[..., b] ** 2)
    size[..., a], size[..., b] = norm, norm
    return size


def _allowed(x: Tensor, v: Variant, phase: Tensor, bf16: bool) -> Tensor:
    """The tolerance per output feature (module docstring)."""
    d = x.shape[-1]
    slack = torch.full(x.shape, _F32_ANGLE, dtype=torch.float64)
    start = 0 if v.rotated == "first" else d - v.r
    a, b = (i + start for i in pair_indices(v.r, v.layout))
    per_pair = _F32_ANGLE * (phase.expand(*x.shape[:-1], phase.shape[-1]) + 1)
    slack[..., a], slack[..., b] = per_pair, per_pair
    if bf16:
        slack = slack + _BF16
    return _pair_sizes(x, v) * slack * max(1.0, v.scale) + 1e-7


# ---------------------------------------------------------------- probes

@dataclass(frozen=True)
class Probe:
    name: str
    what: str
    q: Tensor  # (batch, heads, seq, d)
    k: Tensor
    positions: Tensor  # (batch, seq) or (batch, seq, n)

    @property
    def bf16(self) -> bool:
        return self.q.dtype == torch.bfloat16


def _coords(start: int, claim: Claim) -> Tensor:
    """(seq, n) MRoPE coordinates: two text tokens, a 2 x 3 image, two text tokens, from ``start``."""
    n = len(claim.sections)
    grid = mrope_positions([("text", 2), ("image", (2, 3)), ("text", 2)])  # (10, 3)
    grid = grid[:, :n] if n <= 3 else torch.cat([grid, grid[:, -1:].expand(-1, n - 3)], -1)
    return grid + start


def _probe_positions(claim: Claim, start: int, length: int, batch: int) -> Tensor:
    if claim.sections is None:
        return (start + torch.arange(length)).expand(batch, length)
    return _coords(start, claim).expand(batch, -1, -1)


def make_probes(claim: Claim, seed: int = 0) -> list[Probe]:
    """The probes for a claim, ordered by their largest position (a dynamic RoPE only grows).

    returns: list of ``Probe``: start, offset, batched, decode, bf16, and at L0, past L0, far when the
    claim has those lengths
    """
    gen = torch.Generator().manual_seed(seed)
    mrope = claim.sections is not None
    T0 = 10 if mrope else 12

    def probe(name, what, start, batch, heads, length=None, dtype=torch.float32, positions=None, end=None):
        pos = _probe_positions(claim, start, length or T0, batch) if positions is None else positions
        if end is not None:  # shift so that the largest position is `end`
            pos = pos - int(pos.max()) + end
        seq = pos.shape[1]
        q, k = (torch.randn(batch, heads, seq, claim.d, generator=gen).to(dtype) for _ in range(2))
        return Probe(name, what, q, k, pos)

    span = lambda p: f"{int(p.min())}..{int(p.max())}"  # noqa: E731
    probes = [probe("start", "positions from 0", 0, 1, 2)]
    probes.append(probe("offset", "a KV cache of 37 tokens: positions from 37", 37, 2, 1, 6))
    if mrope:
        other = _coords(0, claim).flip(0) + 200  # another sequence, another layout of coordinates
        batched = torch.stack([_coords(0, claim), other])
    else:
        batched = torch.stack([torch.arange(5), 200 + torch.arange(5)])
    probes.append(probe("batched", "two sequences at different positions (batched positions)", 0, 2, 3,
                        positions=batched))
    probes.append(probe("decode", "one new token at position 1000", 1000, 1, 4, 1,
                        positions=(torch.full((1, 1, len(claim.sections)), 1000) if mrope else
                                   torch.tensor([[1000]]))))
    probes.append(probe("bf16", "bfloat16 inputs from position 300", 300, 1, 2, 8, dtype=torch.bfloat16))
    if claim.L0 is not None and claim.L0 > 6 + T0:
        probes.append(probe("at L0", f"a length of L0 = {claim.L0}: the last positions before it", 0, 1, 2, 6,
                            end=claim.L0 - 1))
        probes.append(probe("past L0", f"one position past L0 = {claim.L0}", 0, 1, 2, 6, end=claim.L0))
    if claim.L is not None and claim.L > 2000:
        probes.append(probe("far", f"the last positions before L = {claim.L}", 0, 1, 1, 6, end=claim.L - 1))
    probes = [replace(p, what=f"{p.what} ({span(p.positions)}), q and k {tuple(p.q.shape)} "
                              f"{str(p.q.dtype).removeprefix('torch.')}") for p in probes]
    return sorted(probes, key=lambda p: int(p.positions.max()))


# ---------------------------------------------------------------- running fn

def _call(fn: Fn, probe: Probe, device: torch.device | str | None = None) -> tuple[Tensor, Tensor, list[str]]:
    """fn's (q, k) on a probe (its tensors moved to ``device``), checked: a clear ValueError for an
    exception, a wrong shape or NaN. returns: (q, k) float64 on the CPU, and notes."""
    q, k, pos = (t.clone().to(device) for t in (probe.q, probe.k, probe.positions))
    where = f"on the probe '{probe.name}': {probe.what}"
    try:
        out = fn(q, k, pos)
    except NotImplementedError:  # a stub: nothing to diagnose yet (exercise checkers say "not attempted")
        raise
    except Exception as e:  # the user's bug, reported with what it was given
        raise ValueError(f"fn raised {type(e).__name__} {where}: {e}") from e
    if not isinstance(out, (tuple, list)) or len(out) != 2 or not all(isinstance(t, Tensor) for t in out):
        raise ValueError(f"fn must return (q, k), two tensors; it returned {type(out).__name__} {where}")
    notes = []
    for name, t, x in (("q", out[0], probe.q), ("k", out[1], probe.k)):
        if tuple(t.shape) != tuple(x.shape):
            raise ValueError(f"fn returned {name} of shape {tuple(t.shape)} for {name} of shape {tuple(x.shape)} "
                             f"{where}: RoPE keeps the shape")
        if not t.is_floating_point():
            raise ValueError(f"fn returned {name} of dtype {t.dtype} {where}: rotated features are floating point")
        if not bool(torch.isfinite(t).all()):
            raise ValueError(f"fn returned {name} with NaN or infinite values {where}")
        if t.dtype != x.dtype and name == "q":
            notes.append(f"fn returns {str(t.dtype).removeprefix('torch.')} for "
                         f"{str(x.dtype).removeprefix('torch.')} inputs")
    if not (torch.equal(q.cpu(), probe.q) and torch.equal(k.cpu(), probe.k)):
        notes.append("fn changes its input tensors in place")
    return out[0].detach().cpu().double(), out[1].detach().cpu().double(), notes


@dataclass(frozen=True)
class ProbeResult:
    name: str
    what: str
    error: float  # largest |fn - reference|, in tolerances (<= 1 passes)
    passed: bool
    size: float  # largest |fn - reference| as a fraction of the inputs' root mean square
    error_by_position: tuple[float, ...]  # per sequence position, in tolerances (max over batch, heads, features)


def _residual(v: Variant, probe: Probe, got: tuple[Tensor, Tensor]) -> tuple[float, Tensor, float]:
    """(max error in tolerances, the same per position, max error / rms(x)) of variant v against fn on a probe."""
    worst = torch.zeros(probe.q.shape[-2], dtype=torch.float64)
    size = 0.0
    for which, (x, y) in enumerate(zip((probe.q, probe.k), got)):
        want, phase = _apply(v, x, probe.positions, which)
        err = (y - want).abs()
        worst = torch.maximum(worst, (err / _allowed(x, v, phase, probe.bf16)).amax(dim=(0, 1, 3)))
        size = max(size, float(err.max() / x.double().pow(2).mean().sqrt()))
    return float(worst.max()), worst, size


def _scores_match(v: Variant, ctx: _Context) -> bool:
    """fn's scores q_m . k_n equal the reference's on every probe (fn may still move features around)."""
    for probe, (gq, gk) in zip(ctx.probes, ctx.outputs):
        wq, _ = _apply(v, probe.q, probe.positions, 0)
        wk, _ = _apply(v, probe.k, probe.positions, 1)
        size = wq.norm(dim=-1).unsqueeze(-1) * wk.norm(dim=-1).unsqueeze(-2)
        slack = 2.0 ** -4 if probe.bf16 else 2.0 ** -17 * (int(probe.positions.abs().max()) + 1)
        if not bool(((gq @ gk.transpose(-1, -2) - wq @ wk.transpose(-1, -2)).abs() <= slack * size + 1e-6).all()):
            return False
    return True


# ---------------------------------------------------------------- hypotheses

@dataclass(frozen=True)
class Hypothesis:
    """A named bug: ``variants(v, ctx)`` are the reference v with this bug added (several candidates)."""

    name: str
    title: str  # the bug class in words, without the claim's numbers (what a checker may say)
    probe: str  # the probe that exposes it ("a / b": one of them, by variant)
    touches: frozenset[str]  # Variant fields it changes (two hypotheses combine only if disjoint)
    variants: Callable[[Variant, "_Context"], list[Variant]]


@dataclass
class _Context:
    claim: Claim
    probes: list[Probe]
    outputs: list[tuple[Tensor, Tensor]]


def _named(v: Variant, name: str, words: str, **changes) -> Variant:
    return replace(v, names=v.names + (name,), words=v.words + (words,), **changes)


def _layout(v, ctx):
    if v.r < 4:
        return []
    other = "half" if v.layout == "interleaved" else "interleaved"
    return [_named(v, "layout", f"pairs laid out {other} instead of {v.layout}", layout=other)]


def _clockwise(v, ctx):
    return [_named(v, "clockwise", "the rotation transposed (clockwise: R_{-m} instead of R_m)", direction=-v.direction)]


def _shift(step):
    def variants(v, ctx):
        name = f"position_{'plus' if step > 0 else 'minus'}_one"
        return [_named(v, name, f"positions shifted by {step:+d}", shift=v.shift + step),
                _named(v, name, f"positions shifted by {step:+d} once they start past 0 (the cache length "
                       f"counted {'one too many' if step > 0 else 'one too few'})", shift=v.shift + step,
                       shift_past_zero=True)]
    return variants


def _restart(v, ctx):
    return [_named(v, "restart_at_zero", "positions restarting at 0 (the cache offset ignored)", restart=True)]


def _first_row(v, ctx):
    return [_named(v, "first_row_positions", "every sequence of the batch rotated with the first one's positions",
                   first_row=True)]


def _double(v, ctx):
    return [_named(v, "double_rotation", f"{who} rotated twice (angle 2 m theta_j)", turns=turns)
            for who, turns in (("the keys", (1, 2)), ("the queries", (2, 1)), ("q and k both", (2, 2)))]


def _bf16(v, ctx):
    words = {"frequencies": "frequencies theta_j rounded to bfloat16 (a bf16 inv_freq buffer)",
             "product": "angles m theta_j computed in bfloat16 (positions and frequencies cast first)",
             "angles": "angles m theta_j rounded to bfloat16 before cos and sin"}
    return [_named(v, "bf16_angles", w + (" for bfloat16 inputs (cast to the inputs' dtype)" if only else ""),
                   rounding=kind, rounding_bf16_inputs_only=only)
            for only in (True, False) for kind, w in words.items()]


def _estimate_base(v: Variant, ctx: _Context) -> list[float]:
    """Bases that fit fn's own angles at position 1 of the start probe (pairs 1.. of its layout)."""
    claim = ctx.claim
    i = next(j for j, p in enumerate(ctx.probes) if p.name == "start")
    probe, (got_q, _) = ctx.probes[i], ctx.outputs[i]
    x, y = probe.q.double(), got_q
    start = 0 if v.rotated == "first" else claim.d - v.r
    a, b = (idx + start for idx in pair_indices(v.r, v.layout))
    zx = torch.complex(x[..., 1, a], x[..., 1, b])
    zy = torch.complex(y[..., 1, a], y[..., 1, b])
    theta = torch.angle((zx.conj() * zy).sum(dim=(0, 1))).abs()  # pair j's angle at position 1
    j = torch.arange(len(theta), dtype=torch.float64)
    ok = (j >= 1) & (theta > 1e-3) & (theta < 3.0)
    if not bool(ok.any()):
        return []
    est = float(torch.exp(-(torch.log(theta[ok]) * v.r / (2 * j[ok]))).median())
    if not math.isfinite(est) or est <= 1:
        return []
    digits = {float(f"{est:.{n}g}") for n in (1, 2, 3)}
    return sorted(b for b in digits | {10000.0, 500000.0, 1e6} if not math.isclose(b, claim.base, rel_tol=1e-6))


def _base(v, ctx):
    claim = ctx.claim
    if claim.inv_freq is not None and claim.settings is None:
        return []
    out = []
    for b in _estimate_base(v, ctx):
        freqs = (lambda pos, b=b: claim.frequencies(_seq_len(pos), base=b))
        out.append(_named(v, "wrong_base", f"base {b:g} instead of {claim.base:g}", frequencies=freqs))
    return out


def _fit_scale(v: Variant, ctx: _Context) -> float | None:
    """The constant c that best maps v's rotated features onto fn's (least squares over the float32 probes)."""
    num = den = 0.0
    for probe, got in zip(ctx.probes, ctx.outputs):
        if probe.bf16:
            continue
        for which, (x, y) in enumerate(zip((probe.q, probe.k), got)):
            want, _ = _apply(replace(v, scale=1.0), x, probe.positions, which)
            part = slice(0, v.r) if v.rotated == "first" else slice(x.shape[-1] - v.r, x.shape[-1])
            num += float((want[..., part] * y[..., part]).sum())
            den += float((want[..., part] ** 2).sum())
    return num / den if den > 0 else None


def _factor(v, ctx):
    c = _fit_scale(v, ctx)
    a = ctx.claim.attention_factor
    if c is None or c <= 0 or math.isclose(c, v.scale, rel_tol=1e-3):
        return []
    if a != 1 and math.isclose(c, a * a, rel_tol=2e-3):
        words = f"the attention factor applied twice (c = a^2 = {c:.4g} on q and k, scores x{c * c:.4g})"
    elif a != 1 and math.isclose(c, 1.0, rel_tol=2e-3):
        words = f"the attention factor {a:.4g} missing (scores x{1 / a ** 2:.4g} too small)"
    elif a == 1:
        words = f"a factor {c:.4g} on q and k where none is claimed (scores x{c * c:.4g})"
    else:
        words = f"a factor {c:.4g} on q and k instead of the attention factor {a:.4g} (scores x{(c / a) ** 2:.4g})"
    return [_named(v, "attention_factor", words, scale=c)]


def _slice(v, ctx):
    if v.r == ctx.claim.d:
        return []
    other = "last" if v.rotated == "first" else "first"
    return [_named(v, "rotated_slice", f"the {other} {v.r} features rotated instead of the {v.rotated}", rotated=other)]


def _rotary_dim(v, ctx):
    claim = ctx.claim
    if (claim.inv_freq is not None and claim.settings is None) or claim.sections or (
            claim.settings is not None and claim.settings.method == "proportional"):
        return []
    out = []
    for r in sorted({claim.d, claim.r // 2, 2 * claim.r}):
        if r == claim.r or r > claim.d or r < 2 or r % 2:
            continue
        freqs = (lambda pos, r=r: claim.frequencies(_seq_len(pos), exponent=r))
        what = f"all head_dim = {r} features" if r == claim.d else f"{r} features"
        out.append(_named(v, "rotary_dim", f"{what} rotated instead of rotary_dim = {claim.r}", r=r, frequencies=freqs))
    return out


def _exponent(v, ctx):
    claim = ctx.claim
    if claim.r == claim.d or (claim.inv_freq is not None and claim.settings is None) or claim.sections:
        return []
    first = lambda pos: claim.frequencies(_seq_len(pos), exponent=claim.d)[: claim.r // 2]  # noqa: E731
    return [_named(v, "head_dim_exponent", f"theta_j = base^(-2j/{claim.d}) (head_dim in the exponent) instead of "
                   f"base^(-2j/{claim.r})", frequencies=first)]


def _proportional(v, ctx):
    claim, s = ctx.claim, ctx.claim.settings
    if claim.sections:
        return []
    if s is not None and s.method == "proportional":
        r = s.rotary_dim  # int(p * head_dim): a RoPE of dimension r on the first r features
        partial = lambda pos: replace(s, method="linear", head_dim=r, rotary_dim=r, partial_rotary_factor=1.0,  # noqa
                                      options={}).frequencies(dtype=torch.float64)[0]
        within = lambda pos: claim.frequencies(_seq_len(pos))[: r // 2]  # noqa: E731
        return [_named(v, "partial_proportional", f"partial rotary of dimension {r} instead of proportional",
                       r=r, frequencies=partial),
                _named(v, "partial_proportional", f"the proportional frequencies paired within the first {r} "
                       "features instead of across the head", r=r, frequencies=within)]
    if claim.r == claim.d or (claim.inv_freq is not None and claim.settings is None):
        return []

    def spread(pos):
        theta = claim.frequencies(_seq_len(pos), exponent=claim.d).clone()
        theta[claim.r // 2:] = 0
        return theta

    return [_named(v, "partial_proportional", f"proportional (pairs across all {claim.d} features, theta of "
                   f"head_dim, the rest 0) instead of partial rotary of dimension {claim.r}", r=claim.d,
                   frequencies=spread)]


def _scaling_dropped(v, ctx):
    s = ctx.claim.settings
    if s is None or s.method in ("none", "proportional"):
        return []
    plain = s.unscaled()
    return [_named(v, "scaling_dropped", f"the {s.rope_type} context extension ignored (plain RoPE frequencies)",
                   frequencies=lambda pos: plain.frequencies(dtype=torch.float64)[0])]


def _llama3(v, ctx):
    s = ctx.claim.settings
    if s is None or s.method != "llama3":
        return []
    L0 = s.original_max_position
    others = {x for x in (s.max_position, int(s.factor * L0), L0 // 2, 2 * L0) if x and x != L0}
    return [_named(v, "llama3_bands", f"llama3's bands anchored at L0 = {x} instead of {L0}",
                   frequencies=lambda pos, t=replace(s, original_max_position=x): t.frequencies(dtype=torch.float64)[0])
            for x in sorted(others)]


def _longrope(v, ctx):
    s = ctx.claim.settings
    if s is None or s.method != "longrope":
        return []
    L0 = s.original_max_position
    short = s.frequencies(L0, dtype=torch.float64)[0]
    long_ = s.frequencies(L0 + 1, dtype=torch.float64)[0]
    rules = {
        "at a length of L0 (one token early: seq_len >= L0)": lambda pos: long_ if _seq_len(pos) >= L0 else short,
        "never (short_factor at every length)": lambda pos: short,
        "always (long_factor at every length)": lambda pos: long_,
        "per token (positions >= L0 take long_factor)": lambda pos: torch.where(
            pos.unsqueeze(-1) >= L0, long_, short) if pos.dim() == 2 else short,
    }
    return [_named(v, "longrope_switch", f"LongRoPE's lists switched {when} instead of past L0 = {L0}",
                   frequencies=rule) for when, rule in rules.items()]


def _sections(v, ctx):
    claim = ctx.claim
    if claim.sections is None or len(claim.sections) < 2:
        return []
    out = []
    n = len(claim.sections)
    for perm in itertools.permutations(range(n)):
        if perm == tuple(range(n)):
            continue
        sec = tuple(claim.sections[i] for i in perm)
        out.append(_named(v, "section_order", f"coordinates read in the order {perm} (axis i's pairs turn with "
                          f"axis perm[i])", axes=claim.axes(order=perm)))
        if sec != claim.sections:
            freqs = rope_nd_frequencies(sec, claim.section_style, base=claim.base, dtype=torch.float64)
            out.append(_named(v, "section_order", f"sections {list(sec)} instead of {list(claim.sections)}",
                              axes=claim.axes(sections=sec),
                              frequencies=(lambda pos, f=freqs: f) if claim.section_style == "axial"
                              else v.frequencies))
    one_axis = torch.zeros_like(claim.axes())
    out.append(_named(v, "section_order", "every pair turning with the first coordinate (t): MRoPE read as 1-D "
                      "RoPE of the temporal position", axes=one_axis))
    return out


def _no_rotation(v, ctx):
    return [_named(v, "no_rotation", "nothing rotated (the output is the input)",
                   frequencies=lambda pos: torch.zeros(v.r // 2, dtype=torch.float64), direction=1)]


HYPOTHESES: dict[str, Hypothesis] = {h.name: h for h in (
    Hypothesis("layout", "the pairs are laid out the other way (interleaved vs half)",
               "start", frozenset({"layout"}), _layout),
    Hypothesis("clockwise", "the rotation turns the other way (clockwise)",
               "start", frozenset({"direction"}), _clockwise),
    Hypothesis("position_plus_one", "the positions are one too large",
               "start / offset", frozenset({"shift"}), _shift(+1)),
    Hypothesis("position_minus_one", "the positions are one too small",
               "start / offset", frozenset({"shift"}), _shift(-1)),
    Hypothesis("restart_at_zero", "the positions restart at 0: the offset of a KV cache is ignored",
               "offset", frozenset({"restart"}), _restart),
    Hypothesis("first_row_positions", "every sequence of a batch gets the first sequence's positions",
               "batched", frozenset({"first_row"}), _first_row),
    # the claim's own context extension before the generic causes that can give the same numbers
    Hypothesis("scaling_dropped", "the config's context extension (rope_scaling) is ignored",
               "far", frozenset({"frequencies"}), _scaling_dropped),
    Hypothesis("llama3_bands", "llama3's bands are anchored at the wrong length",
               "far", frozenset({"frequencies"}), _llama3),
    Hypothesis("longrope_switch", "LongRoPE's factor lists switch at the wrong length",
               "at L0 / past L0", frozenset({"frequencies"}), _longrope),
    Hypothesis("double_rotation", "q or k is rotated twice",
               "start", frozenset({"turns"}), _double),
    Hypothesis("bf16_angles", "the angles are computed in bfloat16",
               "bf16", frozenset({"rounding"}), _bf16),
    Hypothesis("rotated_slice", "the wrong end of the head is rotated",
               "start", frozenset({"rotated"}), _slice),
    Hypothesis("rotary_dim", "the wrong number of features is rotated",
               "start", frozenset({"r", "frequencies"}), _rotary_dim),
    # before wrong_base: base^(-2j/head_dim) is the base base^(r/head_dim) over r features; name the cause
    Hypothesis("head_dim_exponent", "the frequencies use head_dim where rotary_dim belongs",
               "start", frozenset({"frequencies"}), _exponent),
    Hypothesis("partial_proportional", "partial and proportional rotary are confused",
               "start", frozenset({"r", "frequencies"}), _proportional),
    Hypothesis("wrong_base", "the frequencies follow another base",
               "start", frozenset({"frequencies"}), _base),
    Hypothesis("section_order", "MRoPE's sections or coordinates are in the wrong order",
               "start", frozenset({"axes", "frequencies"}), _sections),
    Hypothesis("no_rotation", "nothing is rotated",
               "start", frozenset({"frequencies", "direction"}), _no_rotation),
    # last: it fits its constant to whatever the other hypothesis of a pair has changed
    Hypothesis("attention_factor", "q and k carry the wrong constant factor (the attention factor missing, doubled or extra)",
               "start", frozenset({"scale"}), _factor),
)}


# ---------------------------------------------------------------- the report

@dataclass
class RopeDiagnosis:
    """What ``diagnose_rope`` found. ``str(report)`` (or ``report.text``) is one readable paragraph.

    ok:           fn matches the claimed RoPE on every probe
    verdict:      "correct"; "equivalent" (other outputs, the reference's scores q . k); "convention"
                  (self-consistent, scores still depend on m - n, but not the claimed rotation: clockwise);
                  "bug" (a named hypothesis, or two, reproduce fn); or "unexplained"
    worst_error:  largest |fn - reference| over the probes, in tolerances (<= 1 passes)
    failed_probe: the first probe (by position) fn fails, or None
    explanation:  the hypothesis (or two) that reproduces fn's output, in words, or None
    hypotheses:   their names (keys of ``HYPOTHESES``)
    residual:     that explanation's largest error against fn, in tolerances (<= 1: reproduces it)
    alternatives: other single hypotheses that reproduce fn exactly as well, (name, words): some bugs give
                  the same numbers (dropping a linear factor 2 = turning q and k twice)
    relative:     fn's scores depend only on m - n (q and k moved together by 37 positions)
    symptoms:     what a person would see, from the error's shape over the probes and positions
    """

    ok: bool
    verdict: str
    claim: str
    worst_error: float
    failed_probe: str | None
    explanation: str | None
    hypotheses: tuple[str, ...]
    residual: float | None
    relative: bool
    relative_error: float
    symptoms: list[str]
    probes: list[ProbeResult]
    notes: list[str] = field(default_factory=list)
    closest: tuple[str, float] | None = None  # (words, residual) when nothing reproduces fn
    alternatives: list[tuple[str, str]] = field(default_factory=list)  # (name, words): the same output, other cause

    @property
    def text(self) -> str:
        n = len(self.probes)
        rel = ("Its scores depend only on m − n (q and k moved together by 37 positions: unchanged)."
               if self.relative else
               f"Its scores do not depend on m − n alone: moving q and k together by 37 positions changes them "
               f"(by {self.relative_error:.2g} of |q||k|).")
        notes = "".join(f" Note: {x}." for x in self.notes)
        if self.ok:
            return (f"✓ Matches the claimed RoPE ({self.claim}) on all {n} probes "
                    f"({', '.join(p.name for p in self.probes)}), within float32 rounding. {rel}{notes}")
        size = max(p.size for p in self.probes)
        head = (f"✗ Not the claimed RoPE ({self.claim}): it fails {sum(not p.passed for p in self.probes)} of {n} "
                f"probes, first '{self.failed_probe}' (worst error {size:.2g} times the inputs' RMS).")
        symptoms = " Symptoms: " + "; ".join(self.symptoms) + "." if self.symptoms else ""
        if self.verdict == "equivalent":
            body = (" Diagnosis: the outputs differ from the reference's, but the scores q·k are the reference's on "
                    "every probe: fn applies one fixed map of the features to q and k alike (e.g. it writes the "
                    "rotated pairs back in another order, as transformers' DeepSeek-V3 does). Attention cannot "
                    "tell; anything that reads q or k feature by feature can.")
        elif self.verdict == "convention":
            body = (f" Diagnosis: {self.explanation} (reproduces fn within float32 rounding). This "
                    "is a convention, not a broken RoPE: the rotation is self-consistent and the scores still depend "
                    "only on m − n, but q·k sees n − m where the reference sees m − n, so it will not load "
                    "checkpoints trained with the usual counter-clockwise rotation.")
        elif self.verdict == "bug":
            body = (f" Diagnosis: {self.explanation}: this change to the reference reproduces fn's output within "
                    "float32 rounding" + "".join(f" (so does {words}: the same numbers)" for _, words in self.alternatives)
                    + ".")
        else:
            words, res = self.closest or ("none", float("inf"))
            body = (f" No named hypothesis (or pair of them) reproduces it; the closest, {words}, still leaves "
                    f"{min(res / self.worst_error, 1):.0%} of the error.")
        return head + symptoms + body + " " + rel + notes

    def __str__(self) -> str:
        return self.text


def _symptoms(results: list[ProbeResult], probes: list[Probe], scale: float | None) -> list[str]:
    """What a person would see: the error's shape over the probes and over positions (facts, not causes)."""
    by = {r.name: r for r in results}
    span = {p.name: (int(p.positions.min()), int(p.positions.max())) for p in probes}
    failed = [r.name for r in results if not r.passed]
    out = []
    start = by["start"]
    if scale is not None:
        out.append(f"a constant factor: fn's rotated features are {scale:.4g} times the reference's at every "
                   f"position, 0 included (the logits x{scale * scale:.4g})")
    elif not start.passed:
        e = start.error_by_position
        if e[0] <= 1:
            first = next(i for i, x in enumerate(e) if x > 1)
            grows = e[-1] > 2 * e[first]
            out.append(f"zero at position 0 and wrong from position {first} on"
                       + (f", the error growing with the distance ({e[-1] / e[first]:.2g} times larger at position "
                          f"{len(e) - 1} than at {first})" if grows else ""))
        else:
            out.append("wrong already at position 0, where the rotation should be the identity")
    if start.passed and failed:
        float32 = [name for name in failed if name != "bf16"]
        if not float32:
            out.append("right for float32 inputs, wrong for bfloat16 inputs")
        elif set(float32) <= {"at L0", "past L0", "far"}:
            first = min(float32, key=lambda name: span[name][0])
            ok = max(span[r.name][1] for r in results if r.passed and span[r.name][1] < span[first][1])
            later = [r.name for r in results if r.passed and span[r.name][1] > span[first][1] and r.name != "bf16"]
            out.append(f"right up to position {ok} and wrong from the probe '{first}' "
                       f"({span[first][0]}..{span[first][1]}) on" if not later else
                       f"right up to position {ok}, wrong on the probe '{first}' ({span[first][0]}..{span[first][1]}), "
                       f"right again on {', '.join(repr(x) for x in later)}: wrong near a length")
        else:
            out.append("right while positions start at 0, wrong once they start past 0 (the probes "
                       + ", ".join(f"'{name}' ({span[name][0]}..{span[name][1]})" for name in float32) + ")")
    return out


def _relative_start(claim: Claim) -> int:
    """Where the relative test starts: both placements stay on one side of L0 (LongRoPE's lists)."""
    return 0 if claim.L0 is None or claim.L0 >= 12 + _SHIFT + 1 else claim.L0 + 1


def _relative(fn: Fn, claim: Claim, seed: int, device: torch.device | str | None) -> float:
    """How much fn's scores change when q and k move together by 37 positions (a fraction of |q||k|)."""
    gen = torch.Generator().manual_seed(seed + 1)
    T = 10 if claim.sections else 12
    start = _relative_start(claim)
    q, k = (torch.randn(1, 1, T, claim.d, generator=gen) for _ in range(2))
    scores = []
    for s in (start, start + _SHIFT):
        pos = _probe_positions(claim, s, T, 1)
        rq, rk, _ = _call(fn, Probe("relative", f"scores at positions from {s}", q, k, pos), device)
        scores.append(rq[0, 0] @ rk[0, 0].T)
    size = q[0, 0].double().norm(dim=-1)[:, None] * k[0, 0].double().norm(dim=-1)[None, :]
    return float(((scores[1] - scores[0]).abs() / size).max())


def _relative_tolerance(claim: Claim) -> float:
    """float32 angles at positions up to `top`: each of the r/2 pairs' score term may move by 2^-19 (top + 1)."""
    top = _relative_start(claim) + _SHIFT + 12
    return _F32_ANGLE * 4 * (top + 1) * max(1.0, claim.attention_factor) ** 2


def _claim(config, layer_type, head_dim, layout, base, inv_freq, attention_factor, rotary_dim, rotated, sections,
           section_style) -> Claim:
    rotated = v.one_of("rotated", rotated, ("first", "last"))
    if layout is not None:
        layout = v.one_of("layout", layout, LAYOUTS)
    if config is not None:
        given = [name for name, x in (("base", base), ("inv_freq", inv_freq), ("attention_factor", attention_factor),
                                      ("rotary_dim", rotary_dim), ("sections", sections)) if x is not None]
        if given:
            raise ValueError(f"give either config or {', '.join(given)}: the config already sets them")
        s = rope_settings(config, layer_type=layer_type)
        r = s.head_dim if s.method == "proportional" else s.rotary_dim
        d = s.head_dim if head_dim is None else v.even_dim("head_dim", head_dim)
        if d < r:
            raise ValueError(f"head_dim must be at least the config's rotated features {r}, got {d}")
        family, model_type = pair_layout(config)
        layout = layout or family or "half"
        L0, L = rope_lengths(config, layer_type)
        L0 = s.original_max_position if s.method in USES_L0 + ("dynamic",) else L0
        style = "interleaved" if s.mrope_interleaved else "contiguous"
        _, a = s.frequencies(dtype=torch.float64)
        words = (f"{s.rope_type}, base {s.base:g}, {layout} layout, rotating the {rotated} {r} of {d} features"
                 + (f", attention factor {a:.4g}" if a != 1 else "")
                 + (f", MRoPE sections {list(s.mrope_section)}" if s.mrope_section else "")
                 + (f", L0 = {L0}" if L0 else "") + (f", L = {L}" if L else ""))
        return Claim(d, r, layout, rotated, s.base, a, s, None, s.mrope_section, style, L0, L, words)
    base = v.base_above_one(10000.0 if base is None else base)
    layout = layout or "interleaved"
    a = v.finite_number("attention_factor", 1.0 if attention_factor is None else attention_factor, above=0)
    if sections is not None:
        sections = tuple(v.int_at_least(f"sections[{i}]", x, 1) for i, x in enumerate(sections))
        section_style = v.one_of("section_style", section_style, STYLES)
    if inv_freq is not None:
        if not isinstance(inv_freq, Tensor) or inv_freq.dim() != 1 or not inv_freq.is_floating_point():
            raise ValueError(f"inv_freq must be a 1-D floating tensor (r/2,), got {getattr(inv_freq, 'shape', inv_freq)!r}")
        r_freq = 2 * len(inv_freq)
        if rotary_dim is not None and v.even_dim("rotary_dim", rotary_dim) != r_freq:
            raise ValueError(f"inv_freq has {len(inv_freq)} entries, so rotary_dim must be {r_freq}, got {rotary_dim}")
        rotary_dim = r_freq
        inv_freq = inv_freq.detach().cpu().double()
    if sections is not None and rotary_dim is None:
        rotary_dim = 2 * sum(sections)
    r = v.even_dim("rotary_dim", rotary_dim) if rotary_dim is not None else None
    d = v.even_dim("head_dim", head_dim) if head_dim is not None else (r or 64)
    r = r or d
    if r > d:
        raise ValueError(f"rotary_dim must be at most head_dim = {d}, got {r}")
    if sections is not None and 2 * sum(sections) != r:
        raise ValueError(f"sections must sum to rotary_dim / 2 = {r // 2}, got {list(sections)}")
    words = (f"base {base:g}, {layout} layout, rotating the {rotated} {r} of {d} features"
             + (", given frequencies" if inv_freq is not None else "")
             + (f", attention factor {a:.4g}" if a != 1 else "")
             + (f", sections {list(sections)} ({section_style})" if sections is not None else ""))
    return Claim(d, r, layout, rotated, base, a, None, inv_freq, sections, section_style, None, None, words)


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
    seed: int = 0,
    device: torch.device | str | None = None,
) -> RopeDiagnosis:
    """Run fn on probes, compare it with the RoPE it claims, and name the bug if there is one.

    fn:        fn(q, k, positions) -> (q, k), q and k (batch, heads, seq, head_dim), positions (batch, seq)
               integers, or (batch, seq, n) coordinates when sections are given (MRoPE). Other shapes:
               ``from_hf``, ``from_engine``, ``from_one_tensor``.
    config:    the claimed RoPE as a Hugging Face config.json dict (``rope_settings``; layer_type for
               per-layer RoPE); layout then defaults to the model family's (``PAIR_LAYOUTS``, else "half")
    or the claimed RoPE as ``apply_rope``'s arguments: base (10000), layout ("interleaved"), inv_freq,
               attention_factor (1), rotary_dim; sections and section_style as ``apply_rope_nd``'s
    head_dim:  features per head of the probes (default: the config's, else rotary_dim, else 64)
    rotated:   "first" (GPT-NeoX, Phi) or "last" (DeepSeek's MLA) rotary_dim features turn
    seed:      the probes' random q and k; device: where fn gets them (default the CPU; the
               comparison runs in float64 on the CPU)
    returns:   ``RopeDiagnosis`` (``str()`` is one paragraph); the module docstring lists the probes and
               hypotheses. Raises ValueError for a malformed claim or config (naming the field), and
               when fn raises, returns the wrong shape or NaN (naming the probe): never a false "correct".
    Taught in: notebooks/08_rope_in_models.ipynb
    """
    if not callable(fn):
        raise ValueError(f"fn must be callable as fn(q, k, positions) -> (q, k), got {type(fn).__name__}")
    claim = _claim(config, layer_type, head_dim, layout, base, inv_freq, attention_factor, rotary_dim, rotated,
                   sections, section_style)
    probes = make_probes(claim, seed)
    outputs, notes = [], []
    for probe in probes:
        q, k, more = _call(fn, probe, device)
        outputs.append((q, k))
        notes += [n for n in more if n not in notes]
    reference = Variant(layout=claim.layout, frequencies=lambda pos: claim.frequencies(_seq_len(pos)), r=claim.r,
                        rotated=claim.rotated, scale=claim.attention_factor, axes=claim.axes())
    results = []
    for probe, got in zip(probes, outputs):
        err, by_pos, size = _residual(reference, probe, got)
        results.append(ProbeResult(probe.name, probe.what, err, err <= 1, size, tuple(float(x) for x in by_pos)))
    relative_error = _relative(fn, claim, seed, device)
    relative = relative_error <= _relative_tolerance(claim)
    worst = max(r.error for r in results)
    failed = next((r.name for r in results if not r.passed), None)
    if failed is None:
        return RopeDiagnosis(True, "correct", claim.words, worst, None, None, (), None, relative, relative_error, [],
                             results, notes)
    ctx = _Context(claim, probes, outputs)
    scale = _fit_scale(reference, ctx)
    constant = scale is not None and _fits(replace(reference, scale=scale), ctx) <= 1
    symptoms = _symptoms(results, probes, scale / claim.attention_factor if constant else None)
    same_scores = _scores_match(reference, ctx)
    best = _search(reference, ctx)
    if best is not None and same_scores:
        notes.append("within each call fn's scores q·k are the reference's (moving every position of a call by the "
                     "same amount cancels in m − n); it matters where these keys meet keys rotated elsewhere, e.g. "
                     "in a KV cache")
    if best is None and same_scores:
        return RopeDiagnosis(False, "equivalent", claim.words, worst, failed, None, (), None, relative,
                             relative_error, symptoms, results, notes)
    if best is None:
        closest = _closest(reference, ctx)
        return RopeDiagnosis(False, "unexplained", claim.words, worst, failed, None, (), None, relative, relative_error,
                             symptoms, results, notes, closest)
    variant, residual, others = best
    verdict = "convention" if variant.names == ("clockwise",) and relative else "bug"
    return RopeDiagnosis(False, verdict, claim.words, worst, failed, " and ".join(variant.words), variant.names,
                         residual, relative, relative_error, symptoms, results, notes,
                         alternatives=[(o.names[0], " and ".join(o.words)) for o in others])


def _fits(v: Variant, ctx: _Context, stop: float = 1e3) -> float:
    """v's largest error against fn over every probe, in tolerances (stops early once it exceeds ``stop``).

    A variant the claim cannot express (e.g. LongRoPE's per-pair lists at another rotary_dim) is inf.
    """
    worst = 0.0
    for probe, got in zip(ctx.probes, ctx.outputs):
        try:
            worst = max(worst, _residual(v, probe, got)[0])
        except ValueError:
            return math.inf
        if worst > stop:
            break
    return worst


def _search(reference: Variant, ctx: _Context) -> tuple[Variant, float, list[Variant]] | None:
    """The first single hypothesis (registry order) whose variant reproduces fn, with its residual and the
    other single hypotheses that reproduce it as well (the same numbers by another cause); else the first
    pair of hypotheses that does."""
    singles, found = [], []
    for h in HYPOTHESES.values():
        tried = [(variant, _fits(variant, ctx, stop=1)) for variant in h.variants(reference, ctx)]
        singles += [(h, variant) for variant, _ in tried]
        best = min((t for t in tried if t[1] <= 1), key=lambda t: t[1], default=None)
        if best:
            found.append(best)
    if found:
        return found[0][0], found[0][1], [variant for variant, _ in found[1:]]
    order = list(HYPOTHESES)
    for h1, v1 in singles:
        for h2 in HYPOTHESES.values():
            if h2.touches & h1.touches or order.index(h2.name) <= order.index(h1.name):
                continue
            tried = [(variant, _fits(variant, ctx, stop=1)) for variant in h2.variants(v1, ctx)]
            best = min((t for t in tried if t[1] <= 1), key=lambda t: t[1], default=None)
            if best:
                return best[0], best[1], []
    return None


def _closest(reference: Variant, ctx: _Context) -> tuple[str, float]:
    best = (float("inf"), "")
    for h in HYPOTHESES.values():
        for variant in h.variants(reference, ctx):
            best = min(best, (_fits(variant, ctx), " and ".join(variant.words)))
    return best[1], best[0]


# ---------------------------------------------------------------- adapters for the shapes in the wild

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
    positions (tokens,) (MRoPE: (n, tokens)), query and key (tokens, heads * head_dim)."""
    def fn(q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        B, H, T, d = q.shape
        flat = lambda x: x.transpose(1, 2).reshape(B * T, H * d)  # noqa: E731
        pos = positions.reshape(B * T, -1).T if positions.dim() == 3 else positions.reshape(B * T)
        out_q, out_k = forward(pos, flat(q), flat(k))
        back = lambda y: y.reshape(B, T, H, d).transpose(1, 2)  # noqa: E731
        return back(out_q), back(out_k)

    return fn


def from_one_tensor(rope: Callable[[Tensor, Tensor], Tensor]) -> Fn:
    """fn for a function that rotates one tensor: rope(x, token_positions), x (..., seq, d) and
    token_positions (..., seq) (course assignments: Stanford CS336's run_rope(d_k, theta, max_seq_len,
    in_query_or_key, token_positions) with its first three arguments bound)."""
    def fn(q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        B, H = q.shape[:2]
        pos = positions[:, None].expand(B, H, *positions.shape[1:])
        return rope(q, pos), rope(k, pos)

    return fn
