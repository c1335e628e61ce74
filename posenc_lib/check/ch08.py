"""Checkers for notebooks/08_rope_in_models.ipynb: the cost of a KV cache that stays exact, DeepSeek's scores
on an engine with a fixed softmax scale, a query scale against many distractors, and moving a cache's keys to
earlier positions.

No checker holds an answer: Exercise 1 keeps salted digests (``_core.sealed``) of its answers and of the
answers each misconception gives; the others check properties a right answer must have (the multipliers a
config puts on each part of a score, measured through transformers' DeepSeek modules at check time; the
needle's weight; the library's own rotation of hidden keys).
"""
from __future__ import annotations

import functools
import math
import random
from typing import Any, Callable

import torch

from .. import rope_config, rotary, scaling
from ._core import close, float64_tensor, number, report, sealed, whole_number
from ._guard import answers_under_guard, loaded, stopped_verdict

__all__ = ["cache_rotations", "deepseek_mscales", "needle_scale", "context_shift"]


def _frequency_readers() -> tuple[tuple[Any, str, str], ...]:
    """Every door to RoPE's frequencies at a given length: probing them answers Exercise 1 by measurement. The
    registry's own functions (``scaling.SCALINGS``, which every public door calls) are refused through their code,
    so reaching them through the dict, or through any other name bound to them, is refused too."""
    import posenc_lib

    registry = tuple((scaling, fn.__name__, f"posenc_lib.scaling.SCALINGS[{key!r}]")
                     for key, fn in scaling.SCALINGS.items() if getattr(scaling, fn.__name__, None) is fn)
    return ((posenc_lib, "rope_from_config", "pl.rope_from_config"),
            (rope_config, "rope_from_config", "pl.rope_from_config"),
            (rope_config.RopeSettings, "frequencies", "RopeSettings.frequencies"),
            (posenc_lib, "scaled_rope_frequencies", "pl.scaled_rope_frequencies"),
            (scaling, "scaled_rope_frequencies", "pl.scaled_rope_frequencies"),
            (rope_config, "scaled_rope_frequencies", "pl.scaled_rope_frequencies"), *registry)


def _transformers_yarn() -> tuple[tuple[Any, str, str], ...]:
    """transformers' own doors to Exercise 2's multipliers, in the modules the learner has loaded (``loaded``: the
    checker imports no heavy library; the notebook has loaded them all by Exercise 2): its YaRN
    (``ROPE_INIT_FUNCTIONS["yarn"]``, which returns the RoPE's attention factor; refused through its code, so reaching
    it through the dict or through a model's rotary embedding is refused too) and DeepSeek's ``yarn_apply_mscale``
    (the softmax scale). Reading their source is allowed (the prompt points to it); calling them is a lookup."""
    doors = [(owner, attribute, "transformers' ROPE_INIT_FUNCTIONS['yarn']")
             for owner, attribute, _ in loaded("transformers.modeling_rope_utils", ["_compute_yarn_parameters"])]
    for family in ("deepseek_v2", "deepseek_v3"):
        doors += loaded(f"transformers.models.{family}.modeling_{family}", ["yarn_apply_mscale"])
    return tuple(doors)


def _transformers_frequencies() -> tuple[tuple[Any, str, str], ...]:
    """transformers' doors to RoPE's frequencies at a given length, in the modules the learner has loaded
    (``loaded``: the checker imports no heavy library): every ``ROPE_INIT_FUNCTIONS`` entry (refused through its
    code, so the dict, any other name bound to it, a rotary embedding built during the check and a dynamic
    rotary embedding's update at a new length are refused too), and the ``forward`` of every rotary-embedding
    class of a loaded model (one built before the check keeps its frequencies at hand)."""
    import sys

    doors: list[tuple[Any, str, str]] = []
    utils = sys.modules.get("transformers.modeling_rope_utils")
    registry = getattr(utils, "ROPE_INIT_FUNCTIONS", {}) if utils is not None else {}
    for key, fn in registry.items():
        name = getattr(fn, "__name__", "")
        if getattr(utils, name, None) is fn:
            doors += [(owner, attribute, f"transformers' ROPE_INIT_FUNCTIONS[{key!r}]")
                      for owner, attribute, _ in loaded("transformers.modeling_rope_utils", [name])]
    for module_name, module in list(sys.modules.items()):
        if module is None or not module_name.startswith("transformers.models.") or ".modeling_" not in module_name:
            continue
        for attribute, value in list(vars(module).items()):
            if (isinstance(value, type) and attribute.endswith("RotaryEmbedding")
                    and getattr(value, "__module__", None) == module_name and "forward" in vars(value)):
                doors.append((value, "forward", f"transformers' {attribute}"))
    return tuple(doors)


def _checker_rotations() -> tuple[tuple[Any, str, str], ...]:
    """This module's own rotations of Exercise 4's keys (they read the layout and the rotated slice for the
    learner); the library's rotations are allowed: knowing which rotation to apply is the exercise."""
    import sys

    return tuple((sys.modules[__name__], name, "the checker's own rotation")
                 for name in ("_keys_at", "_shift_misreadings"))


def _under_guard(fn: Any, cases: Any, doors: Callable[[], tuple[tuple[Any, str, str], ...]],
                 **options: Any) -> tuple[Any, dict, Any]:
    """``answers_under_guard`` with the doors ``doors()`` lists, which cover only the modules already loaded (the
    checker imports no heavy library). An answer that imports transformers itself would meet its doors unguarded,
    so when a call loads a module that adds doors, every case runs again with those refused too (the second run
    finds the modules loaded and the doors swapped, however the answer reaches them). ``cases`` is a list, or a
    function that draws the cases: then the second run draws new ones, so that no answer kept from the first run
    fits them. Returns (the cases run, their answers, the stop or None)."""
    draw = cases if callable(cases) else (lambda: cases)
    refused, run = doors(), draw()
    answers, stopped = answers_under_guard(fn, run, refused, **options)
    if stopped is None and len(doors()) > len(refused):
        run = draw()
        answers, stopped = answers_under_guard(fn, run, doors(), **options)
    return run, answers, stopped


# ---------------------------------------------------------------- Exercise 1: an exact cache's rotations

def _longrope(original: int, maximum: int) -> dict:
    """A Phi-3-style LongRoPE config: no 'factor' (the stretch is maximum / original), L0 at the top level."""
    return {"head_dim": 8, "rope_theta": 10000.0, "max_position_embeddings": maximum,
            "original_max_position_embeddings": original,
            "rope_scaling": {"type": "longrope", "short_factor": [1.0] * 4, "long_factor": [2.0] * 4}}


def _dynamic(maximum: int) -> dict:
    return {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": maximum,
            "rope_scaling": {"rope_type": "dynamic", "factor": 2.0}}


_YARN = {"head_dim": 128, "rope_theta": 1e6, "max_position_embeddings": 32768,
         "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
_LLAMA3 = {"head_dim": 128, "rope_theta": 5e5, "max_position_embeddings": 131072,
           "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                            "original_max_position_embeddings": 8192}}
_LINEAR = {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 8192,
           "rope_scaling": {"rope_type": "linear", "factor": 2.0}}
_PLAIN = {"head_dim": 64, "rope_theta": 10000.0, "max_position_embeddings": 4096}

# (case, config, prompt, new tokens) -> the sealed answer and the sealed answers of named misconceptions.
# The digests were made from the count the exercise asks for (tests/test_check_ch08.py derives it again,
# on its own, and checks every digest).
_ROTATION_CASES: tuple[tuple[str, dict, int, int, str, dict[str, str]], ...] = (
    ('LongRoPE (L0 4096), a 1000-token prompt, 10 000 new tokens', _longrope(4096, 131072), 1000, 10_000,
     '0c8283116852a56b23f2ac34', {'unread': '4c969883040039c2c0e27510', 'never': '57b8bafc8c89c4eb9882c29d',
      'threshold': '4c969883040039c2c0e27510',
      'prefill': '139ffe1b66d3548e5201dd36',
      'new_key': '4c969883040039c2c0e27510',
      'twice': 'a5ed17bd8aa3896486600f9c',
      'late': 'a5ed17bd8aa3896486600f9c'}),
    ('LongRoPE (L0 4096), a 4096-token prompt, 10 new tokens', _longrope(4096, 131072), 4096, 10,
     '8aefa33ec29dbb2f96829460', {'unread': 'b6bb3629de63764af45d85f4', 'never': '6325d5da4417f3ef61538d34',
      'threshold': '6325d5da4417f3ef61538d34',
      'prefill': '6325d5da4417f3ef61538d34',
      'new_key': 'b6bb3629de63764af45d85f4',
      'twice': '89ee0ffe4e84be4c2d2f4a4b',
      'late': '89ee0ffe4e84be4c2d2f4a4b'}),
    ('LongRoPE (L0 4096), a 6000-token prompt, 10 000 new tokens', _longrope(4096, 131072), 6000, 10_000,
     '5e0c64babb7725851106ef59', {'unread': '41cdeefbe46d80d84c869305', 'prefill': 'f30718fe3cdfd29ed8c79133'}),
    ('LongRoPE (L0 2048), a 100-token prompt, 1000 new tokens', _longrope(2048, 16384), 100, 1000,
     'f44487075f46df717f37c550', {'unread': '83643aac0292565b2c0b4d41', 'prefill': 'cb62905a1eb0c303a51e2e8f'}),
    ('dynamic NTK (max_position_embeddings 4096), a 1000-token prompt, 1 000 000 new tokens',
     _dynamic(4096), 1000, 1_000_000,
     '09f553eb8683e6fb9ffb519a', {'unread': '3edb554d80601a88120224c8', 'never': '8193773a76e49c0c76bf5fa2',
      'threshold': 'ce748a08b28fd522c950c7cb',
      'prefill': '6e07940eec0f466c7b4af4a4',
      'new_key': 'ecdf109765b7f955aca50a4e',
      'twice': 'aa1a0d53890e0863cb2f5cd9',
      'once': 'b64354231d8a6684c01a36f1',
      'late': 'f87d0b5daa44df064fe7f596'}),
    ('dynamic NTK (max_position_embeddings 4096), a 100 000-token prompt, 50 000 new tokens',
     _dynamic(4096), 100_000, 50_000,
     '02360d05797d05b1f5fb5059', {'unread': 'dfb5b24dd43a926cb0f90192', 'never': '9f1ea62f46276bf8ddcada6f',
      'prefill': 'f76cf78489147a5cf5913400',
      'new_key': '270d9cd0fe25b4ad9d28f1d2',
      'twice': '4171622c9187e3c1795fbb8c',
      'once': '9f1ea62f46276bf8ddcada6f'}),
    ('dynamic NTK (max_position_embeddings 8192), a 10-token prompt, 100 new tokens', _dynamic(8192), 10, 100,
     'fc80b3b8556b42e6c0c8790c', {'unread': 'ab1a03c0a659bbb0e1064948', 'prefill': 'd86d05a515c2bb20bdb8a7a9'}),
    ('YaRN x4 from 32768, a 1000-token prompt, 200 000 new tokens', _YARN, 1000, 200_000,
     '78e48a9ac157faa30fedd728', {'unread': 'be078ca87c85c980394c330c', 'prefill': '031c27de82353540a2c4456c'}),
    ('Llama 3.1 (llama3 x8), a 10-token prompt, 500 000 new tokens', _LLAMA3, 10, 500_000,
     '945d6d781b5579a1c756cfc9', {'unread': '2d89ea2f66fed25d8baf9e4c', 'prefill': 'cc9c4e39ad70f9c22ae0dac1'}),
    ('linear x2, a 5000-token prompt, 5000 new tokens', _LINEAR, 5000, 5000,
     'f30718fe3cdfd29ed8c79133', {'unread': 'd38f10957b1bde01a51edf3d', 'prefill': 'b88633d55cabc4116b1fbf28'}),
    ('plain RoPE, a 7-token prompt, 3 new tokens', _PLAIN, 7, 3,
     '95f963c8aafe86e06a5c1f79', {'unread': '11d718747fc9d5df9be9215b', 'prefill': '6143c401f2ae30ac61eeed16'}),
)

# What each sealed misconception means, in words that do not give the count away.
_ROTATION_MISCONCEPTIONS = {
    "once": "as if the frequencies changed once, at the threshold: do they stay put at the lengths after it?",
    "never": "as if nothing ever changed: these frequencies depend on the input's length, and a change costs "
             "a rotation of every cached key",
    "threshold": "off by one at the threshold: are the frequencies at the threshold length itself the old "
                 "ones or the new ones?",
    "late": "off by one after the threshold: is the first length past it read with the old frequencies or "
            "the new ones?",
    "prefill": "the prompt's keys are rotated too, once each, when the prompt is read",
    "unread": "as if the last of the `new` tokens were never read, as in §4's demo, which stops before feeding "
              "back its last token: this server reads every one of them",
    "new_key": "as if a step that re-rotates the cache left out the key of the token that step reads",
    "twice": "a step that re-rotates the cache rotates its new token's key twice (on arrival and again with "
             "the cache): the step turns each key it holds once",
}
_STATIC = "these frequencies depend on the config alone: no step ever needs to re-rotate a cached key"
# The static count on every LongRoPE case where the switch falls inside the run (right on the others): the answer
# did not see "longrope" in the legacy key "type" those configs write, so named apart from the other readings.
_LEGACY = ("as if nothing ever changed, on the LongRoPE configs only: they write their rope type under the legacy "
           "key \"type\"; does your function read it there?")
_STATIC_CASES = ("YaRN", "Llama 3.1", "linear", "plain")  # the cases whose frequencies never change
_ROTATION_SALT = "ch08.cache_rotations"


def cache_rotations(answer: Callable[[dict, int, int], Any] | None) -> bool | None:
    """answer(config, prompt, new) -> int: how many times a server that stays exact (the logits of a fresh
    forward pass at every step) applies RoPE to a key of one head, prefilling `prompt` tokens and then
    reading `new` more tokens one at a time (all of them: the cache ends holding prompt + new keys)."""

    def run(fn):
        def one(i: int) -> Any:
            _, config, prompt, new, _, _ = _ROTATION_CASES[i]
            return fn(dict(config), prompt, new)

        _, answers, stopped = _under_guard(one, [(i,) for i in range(len(_ROTATION_CASES))],
                                           lambda: _frequency_readers() + _transformers_frequencies())
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function", shortcut="that measures the frequencies at each "
                                  "length instead of knowing when they change", loop="loops over the generated "
                                  "tokens (a million in one case): count them in closed form")
            return
        counts = [whole_number(raw) for raw in answers.values()]
        digests = [None if got is None else sealed(got, _ROTATION_SALT) for got in counts]
        # Two misconceptions can give the same count in one case; across all the cases each gives its own
        # counts. A misconception that fits every case is named once, so each has a message of its own.
        fits = [k for k in _ROTATION_MISCONCEPTIONS
                if all(d == wrong.get(k, right) for d, (*_, right, wrong) in zip(digests, _ROTATION_CASES))]
        # Where one count fits several misreadings, the ones that fit most of the answer's counts are named (two at
        # most): a misreading the answer shows in one case only is not offered beside the one it shows throughout.
        support = {k: sum(d == wrong.get(k, right) for d, (*_, right, wrong) in zip(digests, _ROTATION_CASES))
                   for k in _ROTATION_MISCONCEPTIONS}
        legacy = all(d == (wrong.get("never", right) if name.startswith("LongRoPE") else right)
                     for d, (name, *_, right, wrong) in zip(digests, _ROTATION_CASES))
        for (name, _, _, _, right, wrong), raw, got, digest in zip(_ROTATION_CASES, answers.values(), counts,
                                                                   digests):
            candidates = [k for k, d in wrong.items() if d == digest]
            best = max((support[k] for k in candidates), default=0)
            named = [_ROTATION_MISCONCEPTIONS[k] for k in candidates if support[k] == best][:2]
            if got is None:
                yield False, f"{name}: {raw!r} is not a count (a whole number)"
            elif digest == right:
                yield True, f"{name}: right"
            elif legacy:
                yield False, f"{name}: {_LEGACY}"
            elif fits:
                yield False, f"{name}: {got} is wrong"
            elif named:
                yield False, f"{name}: " + "; or ".join(named)
            elif name.startswith(_STATIC_CASES):
                yield False, f"{name}: {_STATIC}"
            else:
                yield False, f"{name}: {got} is wrong"
        if fits and not legacy and any(d != right for d, (*_, right, _) in zip(digests, _ROTATION_CASES)):
            yield False, ("each count marked ✗ above fits one misreading: "
                          + "; or ".join(_ROTATION_MISCONCEPTIONS[k] for k in fits))

    return report("What an exact KV cache costs", answer, run,
                  "a rope type's frequencies are a function of something; what is it, for each type?")


# ---------------------------------------------------------------- Exercise 2: DeepSeek on a fixed softmax scale

def _port_cases(rng: "random.Random | None" = None, count: int = 12) -> tuple[tuple[float, float, float], ...]:
    """Exercise 2's settings, drawn afresh at every check (so no feedback can be matched to a fixed case): mscale and
    mscale_all_dim each in [0.3, 2] and at least 0.2 apart (the case no cell shows: §3's DeepSeek-V3 and V2-Lite have
    the two equal), s log-uniform in [2, 128]."""
    rng = rng or random.SystemRandom()
    cases = []
    for _ in range(count):
        mscale, factor = rng.uniform(0.3, 2.0), math.exp(rng.uniform(math.log(2.0), math.log(128.0)))
        other = mscale
        while abs(other - mscale) < 0.2:
            other = rng.uniform(0.3, 2.0)
        cases.append((mscale, other, factor))
    return tuple(cases)


def _deepseek_config(mscale: float, mscale_all_dim: float, factor: float) -> dict:
    return {"model_type": "deepseek_v3", "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "rope_theta": 10000.0,
            "max_position_embeddings": int(4096 * factor),
            "rope_scaling": {"type": "yarn", "factor": factor, "original_max_position_embeddings": 4096,
                             "beta_fast": 32, "beta_slow": 1, "mscale": mscale, "mscale_all_dim": mscale_all_dim}}


def _deepseek_scores(mscale: float, mscale_all_dim: float, factor: float) -> tuple[float, float, float]:
    """Measured, not derived: transformers' DeepSeek-V3 rotary embedding and softmax scale applied to random
    unrotated and rotated features of a query and a key at position 0, each score divided by the plain engine's
    score of the same features (q . k / sqrt(head_dim), no factor). Returns (the rotary embedding's factor on each
    rotated feature, the unrotated part's ratio, the rotated part's ratio). Run after the learner's function, and
    refused while it runs (``_checker_scores``)."""
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3 import modeling_deepseek_v3 as ds

    from transformers.utils import logging as transformers_logging

    spec = _deepseek_config(mscale, mscale_all_dim, factor)
    verbosity = transformers_logging.get_verbosity()
    transformers_logging.set_verbosity_error()  # its note that int(4096 s) / 4096 is not exactly s: not the learner's
    try:
        config = DeepseekV3Config(rope_scaling=spec["rope_scaling"], max_position_embeddings=spec[
            "max_position_embeddings"], qk_rope_head_dim=spec["qk_rope_head_dim"],
            qk_nope_head_dim=spec["qk_nope_head_dim"], rope_theta=spec["rope_theta"])
    finally:
        transformers_logging.set_verbosity(verbosity)
    head_dim = config.qk_rope_head_dim + config.qk_nope_head_dim
    softmax_scale = ds.yarn_apply_mscale(config.rope_parameters, head_dim ** -0.5)
    rotary = ds.DeepseekV3RotaryEmbedding(config)
    generator = torch.Generator().manual_seed(0)
    q_nope, k_nope = torch.randn(2, config.qk_nope_head_dim, generator=generator, dtype=torch.float64)
    q_rope, k_rope = torch.randn(2, 1, 1, 1, config.qk_rope_head_dim, generator=generator, dtype=torch.float64)
    cos, sin = rotary(q_rope.float(), torch.zeros(1, 1, dtype=torch.long))
    q_rot, k_rot = ds.apply_rotary_pos_emb_interleave(q_rope, k_rope, cos.double(), sin.double())
    plain = lambda q, k: float((q * k).sum()) * head_dim ** -0.5  # noqa: E731
    nope = float((q_nope * k_nope).sum()) * softmax_scale / plain(q_nope, k_nope)
    rope = float((q_rot * k_rot).sum()) * softmax_scale / plain(q_rope, k_rope)
    return float(cos.flatten()[0]), nope, rope


def _checker_scores() -> tuple[tuple[Any, str, str], ...]:
    """This module's measurement of DeepSeek's scores, refused while a learner's function runs."""
    import sys

    return ((sys.modules[__name__], "_deepseek_scores", "the checker's own measurement"),)


def deepseek_mscales(answer: Callable[[float, float, float], Any] | None) -> bool | None:
    """answer(mscale, mscale_all_dim, factor) -> (c_nope, c_rope): the numbers that, multiplying a query's unrotated
    and its rotated features (folded into the query projection's rows), make an engine with the plain softmax scale
    1/sqrt(head_dim) and a RoPE without attention factor compute DeepSeek's scores exactly."""

    def run(fn):
        cases, answers, stopped = _under_guard(fn, _port_cases, lambda: _frequency_readers() + _transformers_yarn()
                                               + _checker_scores(), loops=False)
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function", shortcut="it reads the multipliers off a library, "
                                  "and deriving them is the exercise")
            return
        # One verdict per kind of mistake, never per setting or number.
        wrong: dict[str, str] = {}
        for (mscale, mscale_all_dim, factor), raw in zip(cases, answers.values()):
            pair = list(raw) if isinstance(raw, (tuple, list)) and len(raw) == 2 else None
            scales = None if pair is None else [number(x) for x in pair]
            if scales is None or any(c is None or not math.isfinite(c) for c in scales):
                wrong["type"] = "expected a pair of finite numbers (c_nope, c_rope) from every call"
                continue
            # What DeepSeek's scores are, measured through transformers' DeepSeek modules (not written here)
            rope_factor, content, rotated = _deepseek_scores(mscale, mscale_all_dim, factor)
            c_nope, c_rope = scales
            if close(c_nope, c_rope, rtol=1e-9, atol=0):
                wrong["same"] = "your two scales are equal for settings that differ: do the two settings reach " \
                                "the same parts of a score?"
            if close(c_nope, rotated, rtol=1e-6, atol=0) and close(c_rope, content, rtol=1e-6, atol=0):
                wrong["swapped"] = "each of your scales follows the setting that its own part of the score " \
                                   "does not, in the end, depend on: where does each setting multiply a score?"
                continue
            once = close(c_rope, rope_factor * content, rtol=1e-6, atol=0)
            if once:
                wrong["rope_once"] = "your rotated scale counts the RoPE's attention factor once per score: " \
                                     "which vectors does that factor multiply?"
            if close(c_rope, rotated / content, rtol=1e-6, atol=0):
                wrong["rope_spared"] = "your rotated scale leaves the softmax scale out: DeepSeek's softmax scale " \
                                       "multiplies the whole score, its rotated part included"
            for key, part, c, want in (("nope", "unrotated", c_nope, content), ("rope", "rotated", c_rope, rotated)):
                if key == "rope" and (once or "rope_spared" in wrong and close(c, rotated / content, rtol=1e-6,
                                                                               atol=0)):
                    continue
                if close(c * c, want, rtol=1e-6, atol=0) and not close(c, want, rtol=1e-6, atol=0):
                    wrong[f"{key}_twice"] = f"your {part} scale acts as if it reached each score twice: it is on " \
                                            "the query only, so each score meets it once"
                elif not close(c, want, rtol=1e-6, atol=0):
                    wrong[f"{key}_other"] = f"your {part} scale multiplies the {part} part of the scores by " \
                                            "something other than DeepSeek's does"
        if wrong:  # in a fixed order, whatever the draw
            order = ("type", "same", "swapped", "nope_twice", "nope_other", "rope_spared", "rope_once", "rope_twice",
                     "rope_other")
            yield from ((False, wrong[kind]) for kind in order if kind in wrong)
        else:
            yield True, f"right on all {len(cases)} settings drawn for this check"

    return report("DeepSeek's scores on a fixed softmax scale", answer, run,
                  "follow each setting to every place where it multiplies a score.")


# ---------------------------------------------------------------- Exercise 3: a query scale against n keys

_NEEDLE_COUNT = 1000  # cases per check, passed all at once as float64 tensors
_NEEDLE_ELEMENTS = 40 * _NEEDLE_COUNT  # tensor elements the answer may create: a closed form makes about ten per case
# Python lines for the whole call: a closed form runs a few (a few thousand where a TorchFunctionMode of the caller's
# inspects every torch call in Python), a search in Python over the cases hundreds of thousands
_NEEDLE_STEPS = 50_000
_NEEDLE_TOLERANCE = 1e-6  # on the needle's log-odds: a weight right to about one part in a million
_EDGE = 0.05  # no case lies this close (in log-odds) to the edge of what some scale can reach
_Z = torch.linspace(-15.0, 27.0, 841, dtype=torch.float64)  # where e^(t z) times the normal density lives, t <= 12
_T = torch.linspace(0.0, 12.0, 2401, dtype=torch.float64)  # scales the checker looks through for one that suffices


def _log_mean_exp(t: torch.Tensor) -> torch.Tensor:
    """ln E[e^(t z)] over a standard normal z, for every t (any shape, 0 <= t <= 12), integrated numerically on
    ``_Z`` (the exercise is to find its closed form; at this spacing the sum is exact to float64)."""
    log_density = -_Z * _Z / 2 - 0.5 * math.log(2 * math.pi)
    return torch.logsumexp(t.unsqueeze(-1) * _Z + log_density, dim=-1) + math.log(float(_Z[1] - _Z[0]))


def _log_odds(t: torch.Tensor, n: torch.Tensor, gap: torch.Tensor) -> torch.Tensor:
    """ln(1/w - 1) of the needle's expected weight w = e^(gap t) / (e^(gap t) + n E[e^(t z)]): lower is heavier."""
    return torch.log(n) + _log_mean_exp(t) - gap * t


def _heaviest(n: torch.Tensor, gap: torch.Tensor) -> torch.Tensor:
    """The lowest log-odds any scale in _T gives the needle, per case (the weight rises, then falls, with t)."""
    return (torch.log(n)[:, None] + _log_mean_exp(_T) - gap[:, None] * _T).min(-1).values


@functools.lru_cache(maxsize=1)
def _needle_cases() -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(n, n0, gap), float64 tensors of _NEEDLE_COUNT cases from a fixed generator: n0 from 100 to 100 000,
    n from e^-2 to e^14 times n0, gap from 1.5 to 6; cases within _EDGE of the edge of reach are dropped, and so
    are those where a negative scale would be asked (there even t = 0 gives the needle more weight than t = 1 among
    n0: n below n0 e^(1/2 - gap), with a margin of _EDGE)."""
    g = torch.Generator().manual_seed(835)
    size = 3 * _NEEDLE_COUNT
    n0 = torch.round(10 ** (2 + 3 * torch.rand(size, generator=g, dtype=torch.float64)))
    n = torch.round(n0 * torch.exp(-2 + 16 * torch.rand(size, generator=g, dtype=torch.float64)))
    gap = 1.5 + 4.5 * torch.rand(size, generator=g, dtype=torch.float64)
    target = _log_odds(torch.ones(()), n0, gap)
    at_zero = torch.log(n) - target  # the log-odds at t = 0 (E[e^0] = 1): below the target, t = 0 already beats it
    keep = (((_heaviest(n, gap) - target).abs() > _EDGE) & (at_zero > _EDGE)).nonzero().squeeze(-1)[:_NEEDLE_COUNT]
    return n[keep], n0[keep], gap[keep]


def _simulations() -> tuple[tuple[Any, str, str], ...]:
    """Random draws (a simulation of the softmax), numerical integrals, and this module's own weight (a search
    over it): each stands in for the closed form."""
    import sys

    import numpy

    return (*((sys.modules[__name__], name, "the checker's own weight") for name in ("_log_odds", "_log_mean_exp")),
            *((torch, name, f"torch.{name}") for name in ("trapezoid", "trapz", "cumulative_trapezoid")),
            *((numpy, name, f"numpy.{name}") for name in ("trapezoid", "trapz")),
            *((torch, name, f"torch.{name}") for name in ("randn", "randn_like", "normal", "rand", "rand_like")),
            (numpy.random, "normal", "numpy.random.normal"), (numpy.random, "randn", "numpy.random.randn"),
            (numpy.random, "standard_normal", "numpy.random.standard_normal"))


def _some(mask: torch.Tensor, what: str, n: torch.Tensor, n0: torch.Tensor, gap: torch.Tensor) -> str:
    """'k of the N cases <what>, e.g. n = .., n0 = .., gap ..' for the cases in mask."""
    i = int(mask.nonzero()[0])
    return (f"{int(mask.sum())} of the {len(mask)} cases {what}, e.g. n = {n[i]:.0f}, n0 = {n0[i]:.0f}, "
            f"gap {gap[i]:.3f}")


def needle_scale(answer: Callable[[torch.Tensor, torch.Tensor, torch.Tensor], Any] | None) -> bool | None:
    """answer(n, n0, gap) -> for every case (float64 tensors of one shape), the smallest query scale t that gives
    the needle (fixed score gap, in standard deviations above the mean of n normal distractors) the weight it has
    at scale 1 among n0 distractors, in expectation; NaN where no t does. Judged on _NEEDLE_COUNT cases at once,
    with a budget of tensor elements and Python lines, and by how the scales move with gap (autograd)."""

    def run(fn):
        n, n0, gap = _needle_cases()
        inputs = (n.clone(), n0.clone(), gap.clone().requires_grad_(True))
        try:
            answers, stopped = answers_under_guard(lambda: fn(*inputs), [()], _simulations(),
                                                   steps_per_case=_NEEDLE_STEPS, elements_per_case=_NEEDLE_ELEMENTS)
        except NotImplementedError:
            raise
        except (TypeError, ValueError, RuntimeError) as e:
            yield False, (f"your function raised {type(e).__name__}: {e}. The cases come as float64 tensors of "
                          f"{_NEEDLE_COUNT}: write it with torch's element-wise functions")
            return
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function", shortcut="a simulation or a numerical integral "
                                  "stands in for the expectation's closed form", loop="loops over the cases or "
                                  "searches step by step: write one expression for all the cases at once",
                                  grid="a numerical integral or a search over t, where the expectation has a "
                                  "closed form")
            return
        t = answers[()]
        if not isinstance(t, torch.Tensor) or t.shape != n.shape or not t.is_floating_point():
            yield False, (f"expected a float tensor of {_NEEDLE_COUNT} scales (NaN where no scale works), got "
                          f"{type(t).__name__} {tuple(getattr(t, 'shape', ()))}")
            return
        value = t.detach().double()
        target = _log_odds(torch.ones(()), n0, gap)
        reach, none = _heaviest(n, gap) < target, torch.isnan(value)
        scale = torch.where(none | ~torch.isfinite(value), torch.ones(()), value)
        equal = (_log_odds(scale, n, gap) - target).abs() <= _NEEDLE_TOLERANCE
        rising = _log_odds(scale + 1e-4, n, gap) < _log_odds(scale - 1e-4, n, gap)  # the weight still grows at t
        right = (reach & ~none & equal & rising) | (~reach & none)
        if bool(right.all()):
            yield True, f"all {_NEEDLE_COUNT} cases: right"
        if bool((~reach & ~none).any()):
            yield False, (_some(~reach & ~none, "get a scale", n, n0, gap) + ", but there no scale restores the "
                          "needle's weight: check whether any scale reaches it")
        if bool((reach & none).any()):
            yield False, _some(reach & none, "get NaN", n, n0, gap) + ", but a scale does restore the weight there"
        larger = reach & ~none & equal & ~rising
        if bool(larger.any()):
            yield False, (_some(larger, "get a scale that restores the weight", n, n0, gap) + ", but a smaller one "
                          "does too: the smallest is asked")
        off = reach & ~none & ~equal
        if bool(off.any()):
            fixed = off & torch.isclose(value, 1 + torch.log(n / n0) / gap, rtol=1e-7, atol=1e-12)
            if bool(fixed.any()):
                yield False, (_some(fixed, "get a scale", n, n0, gap) + ": that keeps the distractors' scores "
                              "where they were; scaling the query scales them too, and e^(t z) averages more than "
                              "e^0 over a spread of z")
            if bool((off & ~fixed).any()):
                missed = off & ~fixed
                light = missed & (_log_odds(scale, n, gap) > target)  # log-odds against the needle: higher is lighter
                i = int(missed.nonzero()[0])
                which = "lower" if bool(light[i]) else "higher"
                yield False, (_some(missed, "get a scale that misses the weight", n, n0, gap) + f": at your scale "
                              f"there the needle's expected weight among n distractors is {which} than its weight "
                              f"at scale 1 among n0 (lower in {int(light.sum())} of these cases, higher in "
                              f"{int((missed & ~light).sum())}). Follow the scale to every score it multiplies, the needle's and "
                              "each distractor's, and take the expectation over the distractors exactly")
        if bool(right.all()):
            ok = reach & ~none
            grad = None
            if t.requires_grad:
                grad = torch.autograd.grad(t[ok].sum(), inputs[2], allow_unused=True)[0]
            if grad is None:
                yield False, ("your scales do not follow gap through torch's operations (no gradient): a search, a "
                              "simulation, or a detour through numpy or Python numbers loses it; a closed form "
                              "written with torch keeps it")
                return
            at = value[ok]
            slope = (_log_mean_exp(at + 1e-4) - _log_mean_exp(at - 1e-4)) / 2e-4
            implicit = (at - 1) / (slope - gap[ok])  # dt/dgap along log-odds(t, n, gap) = target(n0, gap)
            if close(grad.double()[ok], implicit, rtol=1e-4, atol=1e-8):
                yield True, "and they move with gap as the equal-weight condition says"
            else:
                yield False, ("your scales are right, but they do not move with gap as the equal-weight condition "
                              "says (autograd): are they a closed form in n, n0 and gap?")

    return report("How far can a query scale hold a needle?", answer, run,
                  "a larger query scale lifts the needle's score, and it also spreads the distractors' scores.")


# ---------------------------------------------------------------- Exercise 4: a context shift

# Three models' RoPE, small enough to check quickly: YaRN's attention factor, partial RoPE with position
# interpolation, interleaved pairs with llama3's bands.
_SHIFT_CONFIGS = {
    "a Qwen2.5-like model": {
        "model_type": "qwen2", "hidden_size": 64, "num_attention_heads": 2, "rope_theta": 1e6,
        "max_position_embeddings": 32768,
        "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}},
    "a Phi-2-like model": {
        "model_type": "phi", "hidden_size": 80, "num_attention_heads": 2, "partial_rotary_factor": 0.4,
        "rope_theta": 10000.0, "max_position_embeddings": 4096, "rope_scaling": {"rope_type": "linear", "factor": 2.0}},
    "a Llama-4-like model": {
        "model_type": "llama4_text", "hidden_size": 64, "num_attention_heads": 2, "rope_theta": 5e5,
        "max_position_embeddings": 262144,
        "rope_scaling": {"rope_type": "llama3", "factor": 16.0, "low_freq_factor": 1.0, "high_freq_factor": 1.0,
                         "original_max_position_embeddings": 8192}},
}
_SHIFT_STARTS, _SHIFT = (1200, 37), 1000  # two sequences of the batch, at different positions; moved 1000 back
_SHIFT_TOLERANCE = 2e-3  # the library turns by float32 angles: about 1e-4 at positions near 2200


def _keys_at(raw: torch.Tensor, config: dict, positions: torch.Tensor, **change: Any) -> torch.Tensor:
    """The library's rotation of raw keys at positions, as the config's model runs it (``change`` overrides one
    setting: the wrong readings a misconception makes)."""
    settings = rope_config.rope_settings(config)
    inv_freq, factor = settings.frequencies()
    options = dict(inv_freq=inv_freq, attention_factor=factor, rotary_dim=settings.rotary_dim,
                   layout=rope_config.pair_layout(config)[0])
    options.update(change)
    return rotary.apply_rope(raw, positions, **options)


def context_shift(answer: Callable[[torch.Tensor, int, dict], Any] | None) -> bool | None:
    """answer(keys, shift, config) -> keys: cached keys (batch, heads, seq, head_dim), rotated (and scaled) as the
    config's model rotates them at their positions, made into the keys it would have cached at positions - shift,
    without knowing the positions. The library's rotations and the learner's own are allowed; only this checker's
    own rotations (``_checker_rotations``) are refused."""

    def run(fn):
        g = torch.Generator().manual_seed(8)
        cases = []
        for name, config in _SHIFT_CONFIGS.items():
            head_dim = config["hidden_size"] // config["num_attention_heads"]
            raw = torch.randn(2, 2, 6, head_dim, generator=g, dtype=torch.float64)
            positions = torch.stack([torch.arange(s, s + 6) for s in _SHIFT_STARTS]) + _SHIFT
            cases.append((name, config, raw, positions))
        stored = {name: _keys_at(raw, config, positions) for name, config, raw, positions in cases}
        answers, stopped = answers_under_guard(
            lambda name: fn(stored[name].clone(), _SHIFT, dict(_SHIFT_CONFIGS[name])), [(c[0],) for c in cases],
            _checker_rotations(), loops=False)
        if stopped is not None:
            yield stopped_verdict(stopped[1], "your function", shortcut="it reads the layout and the rotated "
                                  "features for you; use the library's or your own rotation")
            return
        for (name, config, raw, positions), got in zip(cases, answers.values()):
            out = float64_tensor(got)
            want = _keys_at(raw, config, positions - _SHIFT)
            if out is None or out.shape != want.shape:
                yield False, f"{name}: expected keys of shape {tuple(want.shape)}, got {getattr(got, 'shape', got)!r}"
                continue
            if close(out, want, atol=_SHIFT_TOLERANCE, rtol=0):
                yield True, f"{name}: right"
                continue
            r = rope_config.rope_settings(config).rotary_dim
            if not close(out[..., r:], want[..., r:], atol=_SHIFT_TOLERANCE, rtol=0):
                yield False, f"{name}: the features RoPE leaves alone changed: a shift cannot move them"
            if not close(out[..., :r], want[..., :r], atol=_SHIFT_TOLERANCE, rtol=0):
                misreadings = _shift_misreadings(raw, config, positions)
                hit = [why for why, alt in misreadings.items()
                       if alt is not None and close(out[..., :r], alt[..., :r], atol=_SHIFT_TOLERANCE, rtol=0)]
                # a rotation keeps each key's length, whatever its pairs or angles: lengths grown by the factor
                # name that mistake first, even where another one (a layout, a direction) is made with it
                factor = rope_config.rope_settings(config).frequencies()[1]
                regrown = factor != 1 and close(out[..., :r].norm(dim=-1), factor * stored[name][..., :r].norm(
                    dim=-1), atol=_SHIFT_TOLERANCE, rtol=0)
                hit = [next(iter(misreadings))] if regrown else hit
                yield False, f"{name}: " + (hit[0] if hit else "the rotated features are not those of positions - "
                                            "shift")

    return report("A context shift", answer, run,
                  "rotations of the same pair compose: their angles add.")


def _shift_misreadings(raw: torch.Tensor, config: dict, positions: torch.Tensor) -> dict[str, torch.Tensor | None]:
    """What each misconception makes of the stored keys (None where it changes nothing for this config)."""
    settings = rope_config.rope_settings(config)
    inv_freq, factor = settings.frequencies()
    layout = rope_config.pair_layout(config)[0]
    plain = rotary.rope_frequencies(settings.rotary_dim, base=settings.base, dtype=inv_freq.dtype)
    return {
        "the attention factor is applied a second time: the cached keys carry it already, and a rotation does "
        "not change a vector's length": None if factor == 1 else _keys_at(raw, config, positions - _SHIFT) * factor,
        "the keys moved later, not earlier: which way must they turn to sit `shift` positions back?":
            _keys_at(raw, config, positions + _SHIFT),
        "the keys turn at the base's plain frequencies, as if the config had no scaling: the model rotated "
        "them with its scaled ones": None if torch.equal(plain, inv_freq) else rotary.apply_rope(
            _keys_at(raw, config, positions), torch.full_like(positions, -_SHIFT), inv_freq=plain,
            rotary_dim=settings.rotary_dim, layout=layout),
        "the pairs are laid out the other way": rotary.apply_rope(
            _keys_at(raw, config, positions), torch.full_like(positions, -_SHIFT), inv_freq=inv_freq,
            rotary_dim=settings.rotary_dim, layout="interleaved" if layout == "half" else "half"),
        "the keys turn as `pl.apply_rope` turns them with its defaults (base 10 000, interleaved pairs, every "
        "feature), not as this config's model turned them: which of the config's settings did your rotation "
        "leave out?": rotary.apply_rope(_keys_at(raw, config, positions), torch.full_like(positions, -_SHIFT)),
    }
