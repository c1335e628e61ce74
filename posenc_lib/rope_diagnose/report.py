"""What ``diagnose_rope`` found (``RopeDiagnosis``), in one paragraph a user can act on.

The paragraph states the verdict, the symptoms (what a person would see, from the error's shape
over probes and positions), the diagnosis, and whether the scores still depend only on the offset
(the course's convention: the score of query m and key n is q^T R_m^T R_n k = q^T R_{n-m} k).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .probes import Probe
from .variant import HALF

_LAYOUT_PAIRS = {"half": "pairs (j, j + r/2): rotate_half", "interleaved": "pairs (2j, 2j + 1)"}


@dataclass(frozen=True)
class ProbeResult:
    name: str
    what: str
    error: float  # largest |fn - reference|, in tolerances (<= 1 passes)
    passed: bool
    size: float  # largest |fn - reference| as a fraction of the inputs' root mean square
    error_by_position: tuple[float, ...]  # per sequence position, in tolerances (max over batch, heads, features)


@dataclass
class RopeDiagnosis:
    """What ``diagnose_rope`` found. ``str(report)`` (or ``report.text``) is one readable paragraph.

    ok:           fn matches the claimed RoPE on every probe
    verdict:      "correct"; "equivalent" (other outputs, the reference's scores q . k); "convention"
                  (self-consistent, scores still depend only on n - m, but not the claimed rotation: clockwise);
                  "bug" (a named hypothesis, or two, reproduce fn); "unexplained"; or "broken" (fn raised or
                  returned no rotated (q, k): ``finding`` says what, on which probe)
    worst_error:  largest |fn - reference| over the probes, in tolerances (<= 1 passes)
    failed_probe: the first probe (by position) fn fails, or None
    explanation:  the hypothesis (or two) that reproduces fn's output, in words, or None
    hypotheses:   their names (keys of ``HYPOTHESES``)
    residual:     that explanation's largest error against fn, in tolerances (<= 1: reproduces it)
    alternatives: other single hypotheses that reproduce fn exactly as well, (name, words): some bugs give
                  the same numbers (dropping a linear factor 2 = turning q and k twice)
    relative:     fn's scores depend only on n - m (q and k moved together by 37 positions)
    symptoms:     what a person would see, from the error's shape over the probes and positions
    layout:       the pair layout of the reference compared with; layout_inferred: the config does not fix
                  it, so it is fn's own (the report says so and what to check)
    checked:      the positions the probes used, and the context that bounds them
    closest:      (words, share) when nothing reproduces fn: the nearest candidate and the share of fn's
                  squared difference from the reference it still leaves
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
    closest: tuple[str, float] | None = None
    alternatives: list[tuple[str, str]] = field(default_factory=list)
    layout: str | None = None
    layout_inferred: bool = False
    model_type: str | None = None
    checked: str = ""
    finding: str | None = None

    @property
    def text(self) -> str:
        if self.verdict == "broken":
            passed = sum(p.passed for p in self.probes)
            return (f"✗ {self.finding}. " + (f"Before it, fn matched the reference on {passed} of "
                                              f"{len(self.probes)} probes. " if self.probes else "")
                    + "Nothing else was checked: fix this first.")
        n = len(self.probes)
        rel = ("Its scores depend only on n − m (q and k moved together by 37 positions: unchanged)."
               if self.relative else
               f"Its scores do not depend on n − m alone: moving q and k together by 37 positions changes them "
               f"(by {self.relative_error:.2g} of |q||k|).")
        notes = "".join(f" Note: {x}." for x in self.notes)
        layout = self._layout_words()
        if self.ok:
            return (f"✓ Matches the claimed RoPE ({self.claim}) on all {n} probes "
                    f"({', '.join(p.name for p in self.probes)}; {self.checked}), within float32 rounding. "
                    f"{layout}{rel}{notes}")
        size = max(p.size for p in self.probes)
        head = (f"✗ Not the claimed RoPE ({self.claim}): it fails {sum(not p.passed for p in self.probes)} of {n} "
                f"probes ({self.checked}), first '{self.failed_probe}' (worst error {size:.2g} times the inputs' "
                "RMS).")
        symptoms = " Symptoms: " + "; ".join(self.symptoms) + "." if self.symptoms else ""
        if self.verdict == "equivalent":
            body = (" Diagnosis: the outputs differ from the reference's, but the scores q·k are the reference's on "
                    "every probe: fn applies one fixed map of the features to q and k alike (e.g. it writes the "
                    "rotated pairs back in another order, as transformers' DeepSeek-V3 does), or moves a constant "
                    "between them. Attention cannot tell; anything that reads q or k feature by feature can.")
        elif self.verdict == "convention":
            body = (f" Diagnosis: {self.explanation} (reproduces fn within float32 rounding). This "
                    "is a convention, not a broken RoPE: the rotation is self-consistent and the scores still depend "
                    "only on n − m, but the score of query m and key n turns with R_{m−n} where the reference's "
                    "turns with R_m^T R_n = R_{n−m}, so it will not load checkpoints trained with the usual "
                    "counter-clockwise rotation.")
        elif self.verdict == "bug":
            body = (f" Diagnosis: {self.explanation}: this change to the reference reproduces fn's output within "
                    "float32 rounding" + "".join(f" (so does {words}: the same numbers)" for _, words in self.alternatives)
                    + ".")
        else:
            words, share = self.closest or ("none", 1.0)
            body = (" No named hypothesis (or pair of them) reproduces it, and none comes nearer to fn than the "
                    "claimed RoPE itself." if share >= 0.995 else
                    f" No named hypothesis (or pair of them) reproduces it. The nearest single one, {words}, still "
                    f"leaves {share:.0%} of fn's squared difference from the reference (summed over all probes): "
                    "part of the cause at most, not the diagnosis.")
        return head + symptoms + body + " " + layout + rel + notes

    def _layout_words(self) -> str:
        if not self.layout_inferred or self.layout is None:
            return ""
        family = f"model_type {self.model_type!r}" if self.model_type else "this config"
        return (f"The pair layout is not fixed by the config ({family} is not in posenc_lib's table): fn implements "
                f"the {self.layout} layout ({_LAYOUT_PAIRS[self.layout]}), and the results above assume it; check "
                "that the checkpoint was trained with it (read the model's attention code) before loading it. ")

    def __str__(self) -> str:
        return self.text


def symptoms(results: list[ProbeResult], probes: list[Probe], scale: float | None) -> list[str]:
    """What a person would see: the error's shape over the probes and over positions (facts, not causes)."""
    by = {r.name: r for r in results}
    span = {p.name: p.span for p in probes}
    half = {p.name for p in probes if p.dtype in HALF}
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
        full = [name for name in failed if name not in half]
        if not full:
            which = " and ".join(sorted({"bfloat16" if n == "bf16" else "float16" for n in failed}))
            out.append(f"right for float32 inputs, wrong for {which} inputs")
        elif set(full) <= {"at L0", "past L0", "far"}:
            first = min(full, key=lambda name: span[name][0])
            ok = max(span[r.name][1] for r in results if r.passed and span[r.name][1] < span[first][1])
            later = [r.name for r in results if r.passed and span[r.name][1] > span[first][1] and r.name not in half]
            out.append(f"right up to position {ok} and wrong from the probe '{first}' "
                       f"({span[first][0]}..{span[first][1]}) on" if not later else
                       f"right up to position {ok}, wrong on the probe '{first}' ({span[first][0]}..{span[first][1]}), "
                       f"right again on {', '.join(repr(x) for x in later)}: wrong near a length")
        else:
            out.append("right while positions start at 0, wrong once they start past 0 (the probes "
                       + ", ".join(f"'{name}' ({span[name][0]}..{span[name][1]})" for name in full) + ")")
    return out
