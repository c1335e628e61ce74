"""Which hypotheses reproduce fn (``search``), and, when none does, which comes nearest (``closest``).

``search`` tries every single hypothesis, then pairs of hypotheses that change different steps.
``closest`` ranks every single candidate by the share of fn's squared difference from the
reference that it leaves (computed over all probes, never cut short), so the report can say how
near the nearest cause comes without claiming more than it explains.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .hypotheses import HYPOTHESES, Context
from .variant import Variant, residual


def fits(v: Variant, ctx: Context, stop: float = 1.0) -> float:
    """v's largest error against fn over the probes, in tolerances; it stops at the first probe past ``stop``
    (enough to reject a candidate). A variant the claim cannot express is inf."""
    worst = 0.0
    for probe, got in zip(ctx.probes, ctx.outputs):
        try:
            worst = max(worst, residual(v, probe.q, probe.k, probe.positions, got)[0])
        except (ValueError, RuntimeError, IndexError):
            return math.inf
        if worst > stop:
            break
    return worst


def squared_difference(v: Variant, ctx: Context) -> float:
    """Sum over every probe of |fn - v|^2 (inf for a variant the claim cannot express)."""
    try:
        return sum(residual(v, p.q, p.k, p.positions, got)[3] for p, got in zip(ctx.probes, ctx.outputs))
    except (ValueError, RuntimeError, IndexError):
        return math.inf


def _variants(h, v: Variant, ctx: Context) -> list[Variant]:
    try:
        return h.variants(v, ctx)
    except (ValueError, RuntimeError, IndexError):  # a candidate the claim cannot build is no candidate
        return []


@dataclass
class Found:
    variant: Variant
    residual: float
    others: list[Variant]  # other single hypotheses that reproduce fn as well (the same numbers, another cause)


def search(reference: Variant, ctx: Context) -> Found | None:
    """The first single hypothesis (registry order) whose variant reproduces fn, with the others that
    reproduce it as well; else the first pair of hypotheses that does; else None."""
    singles, found = [], []
    for h in HYPOTHESES.values():
        tried = [(variant, fits(variant, ctx)) for variant in _variants(h, reference, ctx)]
        singles += [variant for variant, _ in tried]
        best = min((t for t in tried if t[1] <= 1), key=lambda t: t[1], default=None)
        if best:
            found.append(best)
    if found:
        return Found(found[0][0], found[0][1], [variant for variant, _ in found[1:]])
    order = list(HYPOTHESES)
    for v1 in singles:
        h1 = HYPOTHESES[v1.names[0]]
        for h2 in HYPOTHESES.values():
            if h2.touches & h1.touches or order.index(h2.name) <= order.index(h1.name):
                continue
            tried = [(variant, fits(variant, ctx)) for variant in _variants(h2, v1, ctx)]
            best = min((t for t in tried if t[1] <= 1), key=lambda t: t[1], default=None)
            if best:
                return Found(best[0], best[1], [])
    return None


def closest(reference: Variant, ctx: Context) -> tuple[str, float]:
    """(words, share) of the single candidate that leaves the smallest share of fn's squared difference from
    the reference, every candidate ranked on every probe; share >= 1: none comes nearer than the reference."""
    baseline = squared_difference(reference, ctx)
    ranked = sorted(((squared_difference(variant, ctx) / baseline, " and ".join(variant.words))
                     for h in HYPOTHESES.values() for variant in _variants(h, reference, ctx)), key=lambda t: t[0])
    if not ranked or baseline == 0:
        return "none", 1.0
    share, words = ranked[0]
    return words, share
