"""The inputs fn is run on (``make_probes``), and running it (``call``).

Probes (ordered by their largest position, since a dynamic RoPE only grows): start (positions
0..11), gqa (k with fewer heads than q), offset (a KV cache: 37..42), batched (two sequences at 0
and 200), bf16 (bfloat16 inputs at 300..307), decode (one token at 1000), fp16 (float16 inputs
across position 2048, where float16 stops counting every integer), and for configs with lengths: at
L0 (ending at L0 - 1), past L0 (ending at L0) and far (ending at the last position of the context).
No probe goes past the context (``Claim.top``): a probe that would is moved down to end there.
Random q and k are drawn on the CPU from a seeded generator, then moved to fn's device.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import torch
from torch import Tensor

from ..rope_nd import mrope_positions
from .claim import Claim


@dataclass(frozen=True)
class Probe:
    name: str
    what: str
    q: Tensor  # (batch, heads, seq, d)
    k: Tensor  # (batch, kv_heads, seq, d): fewer heads than q on the gqa probe
    positions: Tensor  # (batch, seq) or (batch, seq, n)

    @property
    def dtype(self) -> torch.dtype:
        return self.q.dtype

    @property
    def span(self) -> tuple[int, int]:
        return int(self.positions.min()), int(self.positions.max())


class FnFailed(Exception):
    """fn raised, or returned something that is not a rotated (q, k): a finding, not a crash of the doctor."""

    def __init__(self, message: str, probe: str):
        super().__init__(message)
        self.probe = probe


def _coords(start: int, claim: Claim) -> Tensor:
    """(seq, n) MRoPE coordinates: two text tokens, a 2 x 3 image, two text tokens, from ``start``."""
    n = len(claim.sections)
    grid = mrope_positions([("text", 2), ("image", (2, 3)), ("text", 2)])  # (10, 3)
    grid = grid[:, :n] if n <= 3 else torch.cat([grid, grid[:, -1:].expand(-1, n - 3)], -1)
    return grid + start


def probe_positions(claim: Claim, start: int, length: int, batch: int) -> Tensor:
    if claim.sections is None:
        return (start + torch.arange(length)).expand(batch, length)
    return _coords(start, claim).expand(batch, -1, -1)


def make_probes(claim: Claim, seed: int = 0) -> list[Probe]:
    """The probes for a claim, ordered by their largest position (module docstring).

    returns: list of ``Probe``
    """
    gen = torch.Generator().manual_seed(seed)
    mrope = claim.sections is not None
    T0 = 10 if mrope else 12
    top = claim.top

    def probe(name, what, start, batch, heads, length=None, dtype=torch.float32, positions=None, end=None,
              kv_heads=None):
        pos = probe_positions(claim, start, length or T0, batch) if positions is None else positions
        if end is not None:  # shift so that the largest position is `end`
            pos = pos - int(pos.max()) + end
        if top is not None and int(pos.max()) > top:  # stay inside the model's context
            pos = pos - int(pos.max()) + top
        pos = pos.clamp(min=0)
        seq = pos.shape[1]
        q = torch.randn(batch, heads, seq, claim.d, generator=gen).to(dtype)
        k = torch.randn(batch, kv_heads or heads, seq, claim.d, generator=gen).to(dtype)
        return Probe(name, what, q, k, pos)

    probes = [probe("start", "positions from 0", 0, 1, 2)]
    probes.append(probe("gqa", "k with fewer heads than q (grouped-query attention)", 60, 1, 4, 8, kv_heads=2))
    probes.append(probe("offset", "a KV cache of 37 tokens: positions from 37", 37, 2, 1, 6))
    if mrope:
        other = _coords(0, claim).flip(0) + 200  # another sequence, another layout of coordinates
        batched = torch.stack([_coords(0, claim), other])
    else:
        batched = torch.stack([torch.arange(5), 200 + torch.arange(5)])
    probes.append(probe("batched", "two sequences at different positions (batched positions)", 0, 2, 3,
                        positions=batched))
    probes.append(probe("bf16", "bfloat16 inputs from position 300", 300, 1, 2, 8, dtype=torch.bfloat16))
    probes.append(probe("decode", "one new token at position 1000", 1000, 1, 4, 1,
                        positions=(torch.full((1, 1, len(claim.sections)), 1000) if mrope else
                                   torch.tensor([[1000]]))))
    probes.append(probe("fp16", "float16 inputs across position 2048", 2044, 1, 2, 8, dtype=torch.float16))
    if claim.L0 is not None and claim.L0 > 6 + T0 and (top is None or claim.L0 <= top):
        probes.append(probe("at L0", f"a length of L0 = {claim.L0}: the last positions before it", 0, 1, 2, 6,
                            end=claim.L0 - 1))
        probes.append(probe("past L0", f"one position past L0 = {claim.L0}", 0, 1, 2, 6, end=claim.L0))
    if top is not None and top >= 2048:
        probes.append(probe("far", f"the last positions of the context ({claim.span})", 0, 1, 1, 6, end=top))
    probes = [replace(p, what=f"{p.what} ({p.span[0]}..{p.span[1]}), q {tuple(p.q.shape)} k {tuple(p.k.shape)} "
                              f"{str(p.dtype).removeprefix('torch.')}") for p in probes]
    return sorted(probes, key=lambda p: p.span[1])


def call(fn, probe: Probe, device: torch.device | str | None = None) -> tuple[Tensor, Tensor, list[str]]:
    """fn's (q, k) on a probe (its tensors moved to ``device``), checked.

    returns: (q, k) float64 on the CPU, and notes; raises FnFailed when fn raises, returns the wrong
    shape, a non-floating dtype, NaN or inf (naming the probe). A stub's NotImplementedError passes
    through: there is nothing to diagnose yet.
    """
    q, k, pos = (t.clone().to(device) for t in (probe.q, probe.k, probe.positions))
    where = f"on the probe '{probe.name}': {probe.what}"
    try:
        out = fn(q, k, pos)
    except NotImplementedError:
        raise
    except Exception as e:  # the user's bug, reported with what it was given
        raise FnFailed(f"fn raised {type(e).__name__} {where}: {e}", probe.name) from e
    if not isinstance(out, (tuple, list)) or len(out) != 2 or not all(isinstance(t, Tensor) for t in out):
        raise FnFailed(f"fn must return (q, k), two tensors; it returned {type(out).__name__} {where}", probe.name)
    notes = []
    for name, t, x in (("q", out[0], probe.q), ("k", out[1], probe.k)):
        if tuple(t.shape) != tuple(x.shape):
            raise FnFailed(f"fn returned {name} of shape {tuple(t.shape)} for {name} of shape {tuple(x.shape)} "
                           f"{where}: RoPE keeps the shape", probe.name)
        if not t.is_floating_point():
            raise FnFailed(f"fn returned {name} of dtype {t.dtype} {where}: rotated features are floating point",
                           probe.name)
        if not bool(torch.isfinite(t).all()):
            raise FnFailed(f"fn returned {name} with NaN or infinite values {where}", probe.name)
        if t.dtype != x.dtype and name == "q":
            notes.append(f"fn returns {str(t.dtype).removeprefix('torch.')} for "
                         f"{str(x.dtype).removeprefix('torch.')} inputs")
    if not (torch.equal(q.cpu(), probe.q) and torch.equal(k.cpu(), probe.k)):
        notes.append("fn changes its input tensors in place")
    return out[0].detach().cpu().double(), out[1].detach().cpu().double(), notes
