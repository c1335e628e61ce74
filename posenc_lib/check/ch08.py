"""Checkers for notebooks/08_rope_in_models.ipynb: when a KV cache goes stale, the context behind LongRoPE's
factor, Llama 4's temperature, the keys a chunked RoPE layer sees, RoPE for a config (checked by diagnose_rope)."""
from __future__ import annotations

import math
from typing import Any, Callable

import torch

from ..rope_config import rope_from_config
from ..rope_diagnose import HYPOTHESES, diagnose_rope
from ..temperature import attention_temperature
from ._core import close, number, report, whole_number

__all__ = ["stale_from", "longrope_context", "temperature_position", "keys_seen", "rope_for_config"]

def _frequencies(config: dict, L: int) -> torch.Tensor:
    return rope_from_config(config, seq_len=L)[0]


def _stale_from(config: dict, longest: int = 1 << 22) -> int | None:
    """The first input length whose frequencies differ from those one token shorter (the library's reading
    of the config); None if none does up to `longest`. Every rope type here changes at most once: before
    a threshold the frequencies are those of length 1, after it they differ, so bisection finds it."""
    first = _frequencies(config, 1)
    if torch.equal(_frequencies(config, longest), first):
        return None
    lo, hi = 1, longest  # same at lo, different at hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if torch.equal(_frequencies(config, mid), first) else (lo, mid)
    return hi


def _stale_cases() -> dict[str, dict]:
    """Configs whose cache may or may not go stale: two LongRoPE, a dynamic NTK, three static ones."""
    return {
        "Phi-3-like LongRoPE (L0 4096, max 131072)": _phi3_like(4096, 131072),
        "LongRoPE (L0 2048, max 16384)": _phi3_like(2048, 16384),
        "dynamic NTK (max_position_embeddings 4096)": {"head_dim": 64, "max_position_embeddings": 4096,
                                                       "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}},
        "YaRN x4 from 32768 (Qwen2.5's card)": {"head_dim": 128, "rope_theta": 1e6, "max_position_embeddings": 32768,
                                                "rope_scaling": {"type": "yarn", "factor": 4.0,
                                                                 "original_max_position_embeddings": 32768}},
        "Llama 3.1 (llama3 x8 from 8192)": {"head_dim": 128, "rope_theta": 5e5, "max_position_embeddings": 131072,
                                            "rope_scaling": {"rope_type": "llama3", "factor": 8.0,
                                                             "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                                             "original_max_position_embeddings": 8192}},
        "plain RoPE": {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 4096},
    }


def stale_from(answer: Callable[[dict], Any]) -> bool | None:
    """answer(config) -> int or None: the first input length at which a config's RoPE frequencies differ
    from those of an input one token shorter (a KV cache kept across it is stale); None: never."""

    def run(fn):
        for name, config in _stale_cases().items():
            want = _stale_from(config)
            raw = fn(config)
            never = raw is None or (number(raw) is not None and math.isinf(number(raw)))
            got = None if never else whole_number(raw)
            if not never and got is None:
                yield False, f"{name}: {raw!r} is neither a length (a whole number) nor None"
            elif got == want:
                yield True, f"{name}: right"
            elif want is None:
                yield False, (f"{name}: a length, but these frequencies depend on the config only: the input's "
                              f"length never changes them, so a cache never goes stale")
            elif never:
                yield False, f"{name}: None, but this rope type picks its frequencies from the input's length"
            elif got == want - 1:
                yield False, (f"{name}: off by one at the threshold: does the switch happen at the threshold length "
                              f"itself, or only once an input is longer than it?")
            elif got in (config["max_position_embeddings"], config["max_position_embeddings"] + 1) and "longrope" in str(
                    config.get("rope_scaling")):
                yield False, (f"{name}: {got} is past the deployed context; LongRoPE switches lists at the "
                              f"pretraining length")
            else:
                yield False, f"{name}: {got} is wrong"

    return report("When does a KV cache go stale?", answer, run,
                  "ask of each rope type whether its frequencies are a function of the config alone or also of "
                  "the input's length, and, if of the length, which length in the config is the threshold "
                  "(§4's table says which key each rope type reads).")


def _phi3_like(original: int, maximum: int, d: int = 8) -> dict:
    """A Phi-3-style LongRoPE config: no 'factor', the stretch is maximum / original."""
    return {"head_dim": d, "rope_theta": 10000.0, "max_position_embeddings": maximum,
            "original_max_position_embeddings": original,
            "rope_scaling": {"type": "longrope", "short_factor": [1.0] * (d // 2), "long_factor": [2.0] * (d // 2)}}


# (a, L0): Phi-3's own factor sqrt(1 + 5/12) at 4096, no scaling at all, and two made-up models.
_CONTEXT_CASES = ((math.sqrt(1 + 5 / 12), 4096), (1.0, 2048), (1.1, 8192), (1.25, 4096))


def longrope_context(answer: Callable[[float, int], Any]) -> bool | None:
    """answer(a, L0) -> float: the deployed length L at which LongRoPE's attention factor equals a."""

    def run(fn):
        right = 0
        for a, L0 in _CONTEXT_CASES:
            # a^2 = 1 + ln(L / L0) / ln L0 = ln L / ln L0, so L = L0 ** (a^2)
            want = L0 ** (a * a)
            got = fn(a, L0)
            value = number(got)
            ok = value is not None and close(value, want, atol=0, rtol=1e-9)
            right += ok
            case = f"a = {a:.4f}, L0 = {L0}"
            if ok:
                yield True, f"{case}: right"
            elif value is None:
                yield False, f"{case}: {got!r} is not a length (one number)"
            elif a != 1 and close(value, L0 * a * a, atol=0, rtol=1e-9):
                yield False, (f"{case}: L0·a² reads a² as the stretch L/L0 itself; in §3's factor the stretch "
                              "sits inside a logarithm")
            elif a != 1 and close(value, L0 ** a, atol=0, rtol=1e-9):
                yield False, f"{case}: that undoes a, not a²: §3's factor is a square root"
            else:
                yield False, f"{case}: {value:.6g} gives another factor than a"
        if right == len(_CONTEXT_CASES):
            yield True, ("so a² = ln L / ln L0: LongRoPE scales the scores by the ratio of the logarithms of the "
                         "two lengths (Phi-3: ln 131072 / ln 4096 = 17/12)")

    return report("The context behind LongRoPE's attention factor", answer, run,
                  "§3's factor is a square root of an expression in ln s; what does it become written with the "
                  "logarithms of the two lengths?")


def temperature_position(answer: Any) -> bool | None:
    """answer: the first position at which attention_temperature (Llama 4's defaults) exceeds 1.2."""

    def run(value):
        pos = whole_number(value)
        if pos is None or pos < 1:
            yield False, f"{value!r} is not a position (a whole number >= 1)"
            return
        scales = attention_temperature(torch.tensor([pos - 1, pos])).double()
        yield bool(scales[1] > 1.2), f"position {pos}: the scale {'exceeds' if scales[1] > 1.2 else 'is not above'} 1.2"
        if scales[0] <= 1.2:
            yield True, "the position before it is not above 1.2 yet"
        elif attention_temperature(torch.tensor([pos - 2])).double()[0] <= 1.2:
            yield False, ("the scale already exceeds 1.2 one position earlier: positions count from 0, and the "
                          "floor counts the tokens up to and including the query")
        else:
            yield False, "the scale already exceeds 1.2 before this position: not the first"

    return report("When Llama 4's temperature passes 1.2", answer, run,
                  "the scale is a staircase in the position, one step every 8192 tokens: which step is the "
                  "first above 1.2, and at which position does that step begin?")


def keys_seen(answer: Callable[[int, int], Any]) -> bool | None:
    """answer(position, chunk) -> int: how many keys a query at `position` (0-based) attends to in a layer
    with chunked attention of `chunk` positions (Llama 4's RoPE layers; causal)."""

    def run(fn):
        for position, chunk in ((0, 8192), (100, 8192), (8191, 8192), (8192, 8192), (20000, 8192), (130, 64),
                                (63, 64), (64, 64)):
            want = position % chunk + 1
            raw = fn(position, chunk)
            got = whole_number(raw)
            case = f"position {position}, chunk {chunk}"
            if got is None:
                yield False, f"{case}: {raw!r} is not a number of keys (a whole number)"
            elif got == want:
                yield True, f"{case}: right"
            elif got == min(position + 1, chunk):
                yield False, (f"{case}: {got} is what a sliding window of {chunk} keys sees; a chunk does not "
                              f"slide, it starts afresh at every multiple of {chunk}")
            elif got == position + 1:
                yield False, f"{case}: {got} is every key before the query: that is a NoPE layer, not a chunked one"
            elif got == want - 1:
                yield False, f"{case}: off by one: is the query among the keys it attends to?"
            else:
                yield False, f"{case}: {got} is wrong"

    return report("Keys a chunked RoPE layer sees", answer, run,
                  "a query's chunk is fixed by its own position; which keys share it and come no later than "
                  "the query?")


# A Phi-2-shaped model (head_dim 2560 / 32 = 80, 40% of it rotated) whose context was doubled by
# position interpolation: the exercise's config, as the notebook prints it.
ROPE_EXERCISE_CONFIG = {"model_type": "phi", "hidden_size": 320, "num_attention_heads": 4,
                        "partial_rotary_factor": 0.4, "rope_theta": 10000.0, "max_position_embeddings": 4096,
                        "rope_scaling": {"rope_type": "linear", "factor": 2.0}}


def rope_for_config(answer: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Any]) -> bool | None:
    """answer(q, k, positions) -> (q, k): the RoPE of ROPE_EXERCISE_CONFIG, judged by diagnose_rope.

    A wrong answer hears its symptoms and its bug class (``HYPOTHESES[name].title``), never the
    claimed RoPE's settings.
    """

    def run(fn):
        found = diagnose_rope(fn, ROPE_EXERCISE_CONFIG)
        if found.verdict == "broken":  # fn raised or returned no rotated (q, k): say so as an error of the answer
            raise ValueError(found.finding)
        n = len(found.probes)
        if found.ok:
            yield True, (f"matches the config on all {n} probes: several shapes, k with fewer heads, a KV-cache "
                         "offset, batched positions, one decoded token, bfloat16 and float16 inputs, positions "
                         "near the end of the context")
        else:
            failed = [p.name for p in found.probes if not p.passed]
            yield False, f"wrong on {len(failed)} of {n} probes ({', '.join(failed)})"
            for symptom in found.symptoms:
                yield False, f"symptom: {symptom}"
            if found.hypotheses:
                yield False, ("diagnosis: " + "; and ".join(HYPOTHESES[h].title for h in found.hypotheses)
                              + "".join(f" (or, with the same numbers: {HYPOTHESES[h].title})"
                                        for h, _ in found.alternatives))
            elif found.verdict == "equivalent":
                yield False, "diagnosis: your scores are right, but the features come out in another order"
            else:
                yield False, "diagnosis: no single known bug (or pair of them) reproduces your output"
        yield found.relative, ("your scores depend only on m − n" if found.relative else
                               "your scores depend on more than m − n: q and k do not turn alike")

    return report("RoPE for a config", answer, run,
                  "every RoPE field of the config has a say, and so does the model family (pl.inspect_config "
                  "reads them for you); the symptoms above say where your rotation departs.")
