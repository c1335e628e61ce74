"""Checkers of chapter 8 (posenc_lib.check.ch08): the right answer (derived here, independently of the
checker) passes, every shortcut the prompts forbid is refused, each named misconception is named, and the
checker module hands over no answer."""
import inspect
import math
import random
import re

import pytest
import torch

import posenc_lib as pl
from posenc_lib import check
from posenc_lib.check import ch08
from posenc_lib.check._core import sealed


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


def _stub(*args):
    raise NotImplementedError


# ---------------------------------------------------------------- Exercise 1: an exact cache's rotations

def _kind(config):
    rs = config.get("rope_scaling") or config.get("rope_parameters") or {}
    return rs.get("rope_type", rs.get("type", "default")), rs


def _changes(config, prompt, new, early=0):
    """The lengths n (prompt < n <= prompt + new) whose frequencies differ from those of length n - 1:
    LongRoPE's once, past original_max_position_embeddings; dynamic NTK's at every length past
    max_position_embeddings (§4's table); none for the others. `early` moves the threshold one token earlier
    (-1: one token later)."""
    kind, rs = _kind(config)
    end = prompt + new
    if kind == "longrope":
        switch = (config.get("original_max_position_embeddings") or rs["original_max_position_embeddings"]) + 1 - early
        return range(switch, switch + 1) if prompt < switch <= end else range(0)
    if kind == "dynamic":
        return range(max(prompt + 1, config["max_position_embeddings"] + 1 - early), end + 1)
    return range(0)


def _cost(prompt, new, changes):
    """Each key rotated once on arrival; a step to a changed length re-rotates its n - 1 cached keys too."""
    n = len(changes)
    return prompt + new + (n * (changes[0] + changes[-1]) // 2 - n if n else 0)


def rotations_by_rule(config, prompt, new):
    return _cost(prompt, new, _changes(config, prompt, new))


def _misread(config, prompt, new):
    """What each misconception the checker names answers (only where it differs from the right count)."""
    kind, _ = _kind(config)
    changes = _changes(config, prompt, new)
    right = _cost(prompt, new, changes)
    unread = _cost(prompt, new - 1, _changes(config, prompt, new - 1))  # the last new token never read
    if kind not in ("longrope", "dynamic"):
        return {"prefill": right - prompt, "unread": unread}  # no step re-rotates: a key forgotten
    out = {"never": prompt + new, "threshold": _cost(prompt, new, _changes(config, prompt, new, early=1)),
           "prefill": right - prompt, "new_key": right - len(changes), "twice": right + len(changes),
           "late": _cost(prompt, new, _changes(config, prompt, new, early=-1)), "unread": unread}
    if kind == "dynamic":
        T = config["max_position_embeddings"]
        out["once"] = _cost(prompt, new, range(T + 1, T + 2) if prompt < T + 1 <= prompt + new else range(0))
    return {k: v for k, v in out.items() if v != right}


def test_cache_rotations_accepts_the_count_in_any_form(capsys):
    assert run(check.cache_rotations, None, capsys)[0] is None
    assert run(check.cache_rotations, _stub, capsys)[0] is None
    ok, out = run(check.cache_rotations, rotations_by_rule, capsys)
    assert ok is True and "all correct!" in out
    assert run(check.cache_rotations, lambda c, p, n: torch.tensor(rotations_by_rule(c, p, n)), capsys)[0] is True
    assert run(check.cache_rotations, lambda c, p, n: float(rotations_by_rule(c, p, n)), capsys)[0] is True


def test_cache_rotations_accepts_a_vectorised_sum(capsys):
    """The prompt stops only a Python loop over the tokens and says so: an array's .sum() over the changed lengths
    (numpy's or torch's), done in C, passes, as the prompt states."""
    import numpy as np

    def summed(config, prompt, new):
        changes = _changes(config, prompt, new)
        return prompt + new + int((np.arange(changes.start, changes.stop) - 1).sum())

    def summed_in_torch(config, prompt, new):
        changes = _changes(config, prompt, new)
        return prompt + new + int((torch.arange(len(changes), dtype=torch.float64) + changes.start - 1).sum())

    assert run(check.cache_rotations, summed, capsys)[0] is True
    assert run(check.cache_rotations, summed_in_torch, capsys)[0] is True
    _, exercises = _chapter_above_the_exercises()
    prompt = " ".join(exercises.split("**Exercise 1", 1)[1].split("# %%", 1)[0].replace("#", " ").split())
    assert "a built-in or array operation applied to a whole `range` or array (numpy's or torch's)" in prompt
    assert "sum" not in prompt.lower()  # the prompt allows these without naming the step (a sum) they would take


def test_cache_rotations_accepts_sum_over_a_range_and_refuses_a_generator(capsys):
    """The prompt's words: a closed form, or a built-in (Python's sum) applied to a whole range object, passes; a sum
    over a generator expression iterates over the tokens in Python, and is refused, as the prompt says."""
    def over_range(config, prompt, new):
        changes = _changes(config, prompt, new)
        return prompt + new + sum(range(changes.start - 1, changes.stop - 1))

    def over_generator(config, prompt, new):
        return prompt + new + sum(n - 1 for n in _changes(config, prompt, new))

    assert run(check.cache_rotations, over_range, capsys)[0] is True
    ok, out = run(check.cache_rotations, over_generator, capsys)
    assert ok is False and "loops over the generated tokens" in out

    def over_comprehension(config, prompt, new):
        return prompt + new + sum([n - 1 for n in _changes(config, prompt, new)])

    ok, out = run(check.cache_rotations, over_comprehension, capsys)
    assert ok is False and "loops over the generated tokens" in out


def test_cache_rotations_configs_use_the_legacy_key_the_prompt_names(capsys):
    """The prompt says some configs write the legacy key "type" (as Phi-3's files do): the LongRoPE ones do. An
    answer reading "rope_type" alone treats them as static and is told just that, on the LongRoPE cases only."""
    longrope = [c["rope_scaling"] for name, c, *_ in ch08._ROTATION_CASES if name.startswith("LongRoPE")]
    assert longrope and all(rs.get("type") == "longrope" and "rope_type" not in rs for rs in longrope)

    def rope_type_only(config, prompt, new):
        rs = config.get("rope_scaling") or {}
        return rotations_by_rule({**config, "rope_scaling": {**rs, "type": rs.get("rope_type", "default")}}, prompt,
                                 new)

    ok, out = run(check.cache_rotations, rope_type_only, capsys)
    wrong = [line for line in out.splitlines() if "✗" in line]
    assert ok is False and wrong and all(line.lstrip(" ✗").startswith("LongRoPE") for line in wrong), out
    assert all("as if nothing ever changed" in line for line in wrong), out
    # named precisely: the legacy key, and none of the readings it merely coincides with on one case
    assert all("legacy" in line and "off by one" not in line and "prompt's keys" not in line for line in wrong), out
    assert "fits one misreading" not in out, out


def test_cache_rotations_static_everywhere_is_not_told_about_the_legacy_key(capsys):
    """An answer that never re-rotates is wrong on dynamic NTK too: the legacy-key message is kept for answers
    right everywhere but on the LongRoPE configs."""
    ok, out = run(check.cache_rotations, lambda config, prompt, new: prompt + new, capsys)
    assert ok is False and "legacy" not in out and "as if nothing ever changed" in out, out


def test_cache_rotations_digests_are_the_counts_derived_here():
    """Every sealed answer and sealed misconception of the checker is the count derived in this file."""
    for name, config, prompt, new, right, wrong in ch08._ROTATION_CASES:
        assert right == sealed(rotations_by_rule(config, prompt, new), ch08._ROTATION_SALT), name
        assert wrong == {k: sealed(v, ch08._ROTATION_SALT) for k, v in _misread(config, prompt, new).items()}, name


def test_cache_rotations_rule_is_where_the_library_changes_its_frequencies():
    """The rule above, checked against the library at the thresholds and around them (small lengths only)."""
    def changed(config, n):
        return not torch.equal(pl.rope_from_config(config, seq_len=n)[0], pl.rope_from_config(config, seq_len=n - 1)[0])

    for name, config, prompt, new, _, _ in ch08._ROTATION_CASES:
        probe = [n for n in (2, 3, 100, 2048, 2049, 2050, 4096, 4097, 4098, 8192, 8193, 9000, 32768, 32769, 40000)]
        for n in probe:
            assert changed(config, n) == (n in _changes(config, 1, 10**6)), (name, n)


def _bisect_with_the_library(config, prompt, new):
    """The shortcut: find where the frequencies change by measuring them (the old checker's own method)."""
    first = pl.rope_from_config(config, seq_len=1)[0]
    return prompt + new if torch.equal(first, pl.rope_from_config(config, seq_len=10**7)[0]) else 0


def _token_by_token(config, prompt, new):
    """The rule as a loop over the generated tokens."""
    changes = _changes(config, prompt, new)
    total = prompt
    for n in range(prompt + 1, prompt + new + 1):
        total += n if n in changes else 1
    return total


_REGISTRY_DYNAMIC = pl.SCALINGS["dynamic"]  # bound before the check: the guard must still refuse it


def _through_the_registry(config, prompt, new):
    """The shortcut through the private registry: measure where the frequencies change with SCALINGS' functions
    (rope_from_config's doors refused), then count from the measured change points."""
    from posenc_lib.scaling import SCALINGS

    kind, rs = _kind(config)
    method = {"default": "none", "rope_type": "none"}.get(kind, kind)
    d = config["head_dim"]
    L0 = config.get("original_max_position_embeddings") or rs.get("original_max_position_embeddings") or \
        config["max_position_embeddings"]
    options = {k: v for k, v in rs.items() if k in ("short_factor", "long_factor", "low_freq_factor",
                                                     "high_freq_factor")}
    factor = rs.get("factor", config["max_position_embeddings"] / L0)

    def freq(n):
        return SCALINGS[method](d, factor=factor, base=config["rope_theta"], original_max_position=L0,
                                seq_len=n, device=None, **options)[0]

    changes = [n for n in (prompt + 1, prompt + new) if not torch.equal(freq(n), freq(n - 1))]
    return prompt + new + sum(n - 1 for n in changes)


def _bound_registry_function(config, prompt, new):
    """The same through a name bound to the registry's function before the check."""
    _REGISTRY_DYNAMIC(64, factor=2.0, base=1e4, original_max_position=4096, seq_len=prompt + new, device=None)
    return rotations_by_rule(config, prompt, new)


def test_cache_rotations_refuses_the_private_registry(capsys):
    """pl.SCALINGS / posenc_lib.scaling.SCALINGS hold the functions every public door calls: measuring through
    them is the same shortcut, and is refused by name, however the function is reached."""
    for shortcut in (_through_the_registry, _bound_registry_function):
        ok, out = run(check.cache_rotations, shortcut, capsys)
        assert ok is False and "calls posenc_lib.scaling.SCALINGS[" in out, out
    assert run(check.cache_rotations, rotations_by_rule, capsys)[0] is True  # every guard undone afterwards
    assert pl.SCALINGS["dynamic"] is _REGISTRY_DYNAMIC and _REGISTRY_DYNAMIC(
        8, factor=2.0, base=1e4, original_max_position=16, seq_len=32, device=None)[0].shape == (4,)


def test_cache_rotations_refuses_measuring_and_looping(capsys):
    ok, out = run(check.cache_rotations, _bisect_with_the_library, capsys)
    assert ok is False and "calls pl.rope_from_config" in out
    ok, out = run(check.cache_rotations, lambda c, p, n: pl.rope_settings(c).frequencies(n) and 0, capsys)
    assert ok is False and "calls RopeSettings.frequencies" in out
    ok, out = run(check.cache_rotations, _token_by_token, capsys)
    assert ok is False and "loops over the generated tokens" in out


def _transformers_config(config):
    """The exercise's config as transformers' own config object (Llama for dynamic NTK, Phi-3 for LongRoPE)."""
    from transformers import LlamaConfig, Phi3Config

    kind, rs = _kind(config)
    if kind == "longrope":
        return Phi3Config(hidden_size=16, num_attention_heads=2, max_position_embeddings=config["max_position_embeddings"],
                          original_max_position_embeddings=config["original_max_position_embeddings"],
                          rope_parameters={"rope_type": "longrope", "short_factor": rs["short_factor"],
                                           "long_factor": rs["long_factor"], "rope_theta": config["rope_theta"]})
    return LlamaConfig(hidden_size=128, num_attention_heads=2, head_dim=64,
                       max_position_embeddings=config["max_position_embeddings"],
                       rope_parameters={"rope_type": "dynamic", "factor": rs.get("factor", 2.0),
                                        "rope_theta": config["rope_theta"]})


def _switch_measured_by_transformers(config, prompt, new):
    """The shortcut a cold reader passed before: ask transformers' ROPE_INIT_FUNCTIONS for the frequencies at the
    threshold and one past it (L0 and L0 + 1, max_position_embeddings and + 1), at end - 1 and end, and sum the
    re-rotations in closed form from where they were seen to change."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

    kind, _ = _kind(config)
    if kind not in ("longrope", "dynamic"):
        return prompt + new
    hf = _transformers_config(config)
    T = config["original_max_position_embeddings"] if kind == "longrope" else config["max_position_embeddings"]
    at = {n: ROPE_INIT_FUNCTIONS[kind](hf, "cpu", seq_len=n)[0] for n in (T, T + 1, prompt + new - 1, prompt + new)}
    changes = range(T + 1, T + 2) if kind == "longrope" else range(T + 1, prompt + new + 1)
    changes = [n for n in changes if prompt < n <= prompt + new] if not torch.equal(at[T], at[T + 1]) else []
    return _cost(prompt, new, range(changes[0], changes[-1] + 1) if changes else range(0))


def _through_a_rotary_embedding(built):
    """The same through a rotary embedding module built before the check: its forward at growing lengths."""
    def measure(config, prompt, new):
        built(torch.zeros(1, 1, 64), torch.arange(prompt + new)[None])
        return rotations_by_rule(config, prompt, new)
    return measure


def test_cache_rotations_refuses_transformers_frequencies(capsys):
    """Measuring through transformers is the same shortcut as through posenc_lib: its ROPE_INIT_FUNCTIONS (every
    entry, through the dict or a bound name) and its rotary embeddings' forward are refused while the answer runs,
    and put back afterwards."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

    config = ch08._dynamic(4096)
    assert all(_switch_measured_by_transformers(dict(c), p, n) == rotations_by_rule(dict(c), p, n)
               for _, c, p, n, *_ in ch08._ROTATION_CASES)  # outside the check the shortcut gets every count
    ok, out = run(check.cache_rotations, _switch_measured_by_transformers, capsys)
    assert ok is False and "calls transformers' ROPE_INIT_FUNCTIONS['" in out and "instead of knowing" in out, out
    bound = ROPE_INIT_FUNCTIONS["longrope"]
    ok, out = run(check.cache_rotations, lambda c, p, n: bound(_transformers_config(ch08._longrope(4096, 131072)),
                                                              "cpu", seq_len=p + n) and 0, capsys)
    assert ok is False and "calls transformers' ROPE_INIT_FUNCTIONS['longrope']" in out, out
    built = LlamaRotaryEmbedding(_transformers_config(config))
    ok, out = run(check.cache_rotations, _through_a_rotary_embedding(built), capsys)
    assert ok is False and "calls transformers' LlamaRotaryEmbedding" in out, out
    assert run(check.cache_rotations, rotations_by_rule, capsys)[0] is True  # every guard undone afterwards
    assert ROPE_INIT_FUNCTIONS["longrope"].__code__.co_name == "_compute_longrope_parameters"
    assert built(torch.zeros(1, 1, 64), torch.arange(8)[None])[0].shape == (1, 8, 64)


def _with(misconception):
    return lambda c, p, n: _misread(c, p, n).get(misconception, rotations_by_rule(c, p, n))


MISCONCEPTION_WORDS = {
    "once": "as if the frequencies changed once",
    "never": "as if nothing ever changed",
    "threshold": "off by one at the threshold",
    "late": "off by one after the threshold",  # the first change counted at max_position_embeddings + 2
    "prefill": "the prompt's keys are rotated too",
    "unread": "as if the last of the `new` tokens were never read",
    "new_key": "left out the key of the token that step reads",
    "twice": "rotates its new token's key twice",
}


@pytest.mark.parametrize("misconception, words", MISCONCEPTION_WORDS.items())
def test_cache_rotations_names_each_misconception(misconception, words, capsys):
    ok, out = run(check.cache_rotations, _with(misconception), capsys)
    assert ok is False and words in out and "hint" in out
    # the misconception is named, not the count's recipe (the cache's final size, or which keys to count)
    assert "cache ends holding" not in out and "count every key" not in out and "prompt + new" not in out, out
    others = [w for k, w in MISCONCEPTION_WORDS.items() if k != misconception]
    assert not any(w in out for w in others), out  # each misconception gets a message of its own
    for _, config, prompt, new, _, _ in ch08._ROTATION_CASES:  # no count beyond prompt + new is ever printed
        count = rotations_by_rule(config, prompt, new)
        assert count == prompt + new or not re.search(rf"\b{count}\b", out.replace(" ", ""))


@pytest.mark.parametrize("misconception", ["threshold", "late"])
def test_cache_rotations_names_a_partial_misconception_alone(misconception, capsys):
    """A misreading on the LongRoPE configs only (right elsewhere): where its count collides with others (the
    prompt's keys, an unread token, a new key), the checker names the one the answer shows throughout, not every
    reading that gives that one count."""
    def partial(c, p, n):
        return (_with(misconception) if _kind(c)[0] == "longrope" else rotations_by_rule)(c, p, n)

    ok, out = run(check.cache_rotations, partial, capsys)
    assert ok is False and MISCONCEPTION_WORDS[misconception] in out, out
    others = [w for k, w in MISCONCEPTION_WORDS.items() if k != misconception]
    assert not any(w in out for w in others), out
    assert "; or " not in out, out


def test_cache_rotations_misconceptions_differ_over_the_cases():
    """Two misconceptions may give one count in a case (an early threshold and a new key forgotten, on LongRoPE),
    but never the same counts in every case: that is what lets the checker name each one alone."""
    answers = {k: tuple(_with(k)(dict(c), p, n) for _, c, p, n, _, _ in ch08._ROTATION_CASES)
               for k in MISCONCEPTION_WORDS}
    assert len(set(answers.values())) == len(answers)
    right = tuple(rotations_by_rule(dict(c), p, n) for _, c, p, n, _, _ in ch08._ROTATION_CASES)
    assert right not in answers.values()


def test_cache_rotations_names_a_forgotten_prompt_on_a_static_rope(capsys):
    """Forgetting the prompt's own rotations on a config whose frequencies never change is that misconception,
    not the static one (which names a different mistake)."""
    ok, out = run(check.cache_rotations, lambda c, p, n: n if _kind(c)[0] not in ("longrope", "dynamic")
                  else rotations_by_rule(c, p, n), capsys)
    assert ok is False and out.count("the prompt's keys are rotated too") == 4 and "depend on the config alone" not in out


def test_cache_rotations_names_a_length_for_a_static_rope(capsys):
    ok, out = run(check.cache_rotations, lambda c, p, n: _cost(p, n, range(p + 1, p + n + 1)), capsys)  # all change
    assert ok is False and "depend on the config alone" in out


# ---------------------------------------------------------------- Exercise 2: DeepSeek on a fixed softmax scale

def query_scales_derived(mscale, mscale_all_dim, factor):
    """DeepSeek multiplies the unrotated part of a score by the softmax term mu^2 = (0.1 mscale_all_dim ln s + 1)^2
    and the rotated part by ratio^2 mu^2 = (0.1 mscale ln s + 1)^2 (the RoPE factor, on q and k, is the ratio of
    the two terms). A scale on the query's features reaches each score once: each is its part's whole multiplier."""
    term = lambda x: 0.1 * x * math.log(factor) + 1  # noqa: E731
    return term(mscale_all_dim) ** 2, term(mscale) ** 2


def _term(x, s):
    return 0.1 * x * math.log(s) + 1


def _draws(n=20):
    rng = random.Random(0)
    return [case for _ in range(n) for case in ch08._port_cases(rng)]


def test_deepseek_cases_leave_out_zero_and_equal_settings():
    """The prompt leaves out a zero mscale or mscale_all_dim (transformers falls back to other formulas there), keeps
    s > 1, and grades only settings whose two mscales differ: §3 shows DeepSeek-V3's and V2-Lite's, equal ones."""
    cases = _draws()
    assert all(m >= 0.3 and a >= 0.3 and s >= 2 for m, a, s in cases)
    assert all(abs(m - a) >= 0.2 for m, a, _ in cases)


def test_deepseek_cases_are_drawn_afresh():
    """A fixed set of cases would let a learner fit the feedback; every check draws anew."""
    assert set(ch08._port_cases()).isdisjoint(ch08._port_cases())


def test_deepseek_query_scales(capsys):
    assert run(check.deepseek_mscales, None, capsys)[0] is None
    assert run(check.deepseek_mscales, _stub, capsys)[0] is None
    ok, out = run(check.deepseek_mscales, query_scales_derived, capsys)
    assert ok is True and "all correct!" in out
    as_tensors = lambda m, a, s: [torch.tensor(c) for c in query_scales_derived(m, a, s)]  # noqa: E731
    assert run(check.deepseek_mscales, as_tensors, capsys)[0] is True  # a list of tensors is read alike
    for m, a, s in _draws(2):  # the derivation's RoPE factor is the library's
        ratio = pl.rope_from_config(ch08._deepseek_config(m, a, s))[1]
        c_nope, c_rope = query_scales_derived(m, a, s)
        assert c_rope / c_nope == pytest.approx(ratio**2, rel=1e-12)


def test_deepseek_query_scales_refuse_one_number_for_both(capsys):
    """§3's softmax term mu^2 for both parts (DeepSeek-V3's answer, where the settings are equal) is refused, with the
    same words whatever the draw (no setting, no number)."""
    outs = [run(check.deepseek_mscales, lambda m, a, s: (_term(a, s) ** 2,) * 2, capsys) for _ in range(3)]
    assert all(ok is False for ok, _ in outs) and len({out for _, out in outs}) == 1
    out = outs[0][1]
    assert "your two scales are equal" in out and "rotated part of the scores by something other" in out
    assert "unrotated scale" not in out  # the unrotated one is right: not blamed
    assert "mscale" not in out and not re.search(r"\d\.\d", out)  # names no setting and no number


@pytest.mark.parametrize("wrong, words, not_words", [
    (lambda m, a, s: (_term(a, s), _term(m, s) ** 2), "unrotated scale acts as if it reached each score twice",
     "rotated scale"),
    (lambda m, a, s: (_term(a, s) ** 2, _term(m, s)), "rotated scale acts as if it reached each score twice",
     "unrotated scale"),
    (lambda m, a, s: (_term(a, s) ** 2, (_term(m, s) / _term(a, s)) ** 2), "leaves the softmax scale out",
     "unrotated scale"),
    (lambda m, a, s: (_term(a, s) ** 2, _term(m, s) / _term(a, s)), "rotated part of the scores by something other",
     "unrotated scale"),  # the library's RoPE factor alone
    (lambda m, a, s: (_term(m, s) ** 2, _term(a, s) ** 2), "each of your scales follows the setting that its own "
     "part of the score", "something other"),  # the two settings swapped
    (lambda m, a, s: (_term(a, s) ** 2, _term(m, s) * _term(a, s)), "counts the RoPE's attention factor once",
     "something other"),  # the RoPE factor (ratio of the terms) once, with the softmax term
    (lambda m, a, s: (_term(a, s), _term(m, s) * _term(a, s)), "counts the RoPE's attention factor once",
     "something other"),  # the same, and the unrotated scale's own mistake is named too (next test)
])
def test_deepseek_query_scales_name_each_misconception(wrong, words, not_words, capsys):
    ok, out = run(check.deepseek_mscales, wrong, capsys)
    assert ok is False and words in out and not_words not in out.replace(words, ""), out
    assert not re.search(r"\d\.\d", out)  # the feedback prints no number


def test_deepseek_query_scales_name_two_mistakes_apart(capsys):
    """The RoPE factor counted once does not hide a mistake in the unrotated scale: both are named."""
    ok, out = run(check.deepseek_mscales, lambda m, a, s: (_term(a, s), _term(m, s) * _term(a, s)), capsys)
    assert ok is False and "counts the RoPE's attention factor once" in out
    assert "unrotated scale acts as if it reached each score twice" in out


def test_deepseek_query_scales_refuse_malformed_answers(capsys):
    for wrong in (lambda m, a, s: 1.87, lambda m, a, s: ("1.87", 1.0), lambda m, a, s: (math.nan, 1.0)):
        ok, out = run(check.deepseek_mscales, wrong, capsys)
        assert ok is False and "expected a pair of finite numbers" in out


def test_deepseek_query_scales_refuse_the_library(capsys):
    def with_library(m, a, s):
        pl.rope_from_config(ch08._deepseek_config(m, a, s))
        return query_scales_derived(m, a, s)

    ok, out = run(check.deepseek_mscales, with_library, capsys)
    assert ok is False and "calls pl.rope_from_config" in out and "deriving them is the exercise" in out

    def with_the_registry(m, a, s):
        pl.SCALINGS["yarn"](64, factor=s, base=1e4, original_max_position=4096, seq_len=None, device=None,
                            mscale=m, mscale_all_dim=a)
        return query_scales_derived(m, a, s)

    ok, out = run(check.deepseek_mscales, with_the_registry, capsys)
    assert ok is False and "calls posenc_lib.scaling.SCALINGS['yarn']" in out


def test_deepseek_checker_writes_no_formula_for_the_answer():
    """The checker measures DeepSeek's scores through transformers' modules; its source writes neither the softmax
    term (0.1 mscale ln s + 1) nor a product of the RoPE factor with it (finding: `check.deepseek_mscales??`)."""
    source = inspect.getsource(ch08)
    assert "0.1" not in source and "math.log(factor)" not in source and "log(s)" not in source
    assert not re.search(r"rope_factor\s*\*\*\s*2", source)


def test_deepseek_measurement_matches_the_derivation():
    """The checker's measured ratios are the derived multipliers (written here, not read from the checker)."""
    for m, a, s in _draws(1)[:4]:
        factor, nope, rope = ch08._deepseek_scores(m, a, s)
        assert (nope, rope) == pytest.approx(query_scales_derived(m, a, s), rel=1e-6)
        assert factor == pytest.approx(_term(m, s) / _term(a, s), rel=1e-6)


def test_deepseek_query_scales_refuse_the_checkers_measurement(capsys):
    def with_checker(m, a, s):
        _, nope, rope = ch08._deepseek_scores(m, a, s)
        return nope, rope

    ok, out = run(check.deepseek_mscales, with_checker, capsys)
    assert ok is False and "the checker's own measurement" in out


def test_deepseek_query_scales_refuse_transformers_yarn(capsys):
    """The library-call shortcut through transformers: its YaRN (through ROPE_INIT_FUNCTIONS or its own name)
    returns the RoPE's attention factor, and DeepSeek's yarn_apply_mscale the softmax scale."""
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
    from transformers import DeepseekV3Config
    from transformers.models.deepseek_v3 import modeling_deepseek_v3

    def with_transformers(m, a, s):
        config = DeepseekV3Config(rope_scaling=ch08._deepseek_config(m, a, s)["rope_scaling"],
                                  max_position_embeddings=int(4096 * s))
        ROPE_INIT_FUNCTIONS["yarn"](config, "cpu")
        return query_scales_derived(m, a, s)

    ok, out = run(check.deepseek_mscales, with_transformers, capsys)
    assert ok is False and "calls transformers' ROPE_INIT_FUNCTIONS['yarn']" in out and "a library" in out

    def with_softmax_helper(m, a, s):
        modeling_deepseek_v3.yarn_apply_mscale({"factor": s, "mscale_all_dim": a}, 192 ** -0.5)
        return query_scales_derived(m, a, s)

    ok, out = run(check.deepseek_mscales, with_softmax_helper, capsys)
    assert ok is False and "calls transformers.models.deepseek_v3.modeling_deepseek_v3.yarn_apply_mscale" in out
    assert ROPE_INIT_FUNCTIONS["yarn"].__code__.co_name == "_compute_yarn_parameters"  # put back after the check
    assert run(check.deepseek_mscales, query_scales_derived, capsys)[0] is True  # the derived answer still passes


# ---------------------------------------------------------------- Exercise 3: a query scale against n keys

def needle_derived(n, n0, gap):
    """E[e^(t z)] = e^(t^2/2): the weight is 1 / (1 + n e^(t^2/2 - gap t)). Equal weights at (t, n) and (1, n0):
    t^2 - 2 gap t + 2 gap - 1 + 2 ln(n/n0) = 0, whose smaller root is gap - sqrt((gap-1)^2 - 2 ln(n/n0)); NaN
    where the discriminant is negative. Written for tensors."""
    inside = (gap - 1) ** 2 - 2 * torch.log(n / n0)
    return torch.where(inside < 0, torch.nan, gap - inside.clamp(min=0).sqrt())


def _cases():
    return ch08._needle_cases()


def test_needle_scale(capsys):
    assert run(check.needle_scale, None, capsys)[0] is None  # None as a function: not attempted
    assert run(check.needle_scale, _stub, capsys)[0] is None
    ok, out = run(check.needle_scale, needle_derived, capsys)
    assert ok is True and "all correct!" in out
    n, n0, gap = _cases()
    t = needle_derived(n, n0, gap)
    assert len(n) == 1000 and 0.3 < t.isnan().float().mean() < 0.7  # both kinds of case, in numbers
    assert bool((t[~t.isnan()] > 0).all())  # no case asks for a negative scale (the prompt's t is a scale up or down)
    assert bool((n >= n0 * torch.exp(0.5 - gap)).all())
    assert needle_derived(*(torch.tensor([x], dtype=torch.float64) for x in (8192.0, 8192.0, 3.0))).item() == 1.0
    # the solution's note: at n = n0 the smaller root is 1 only for gap >= 1 (2 gap - 1 below), and every gap drawn is
    assert needle_derived(*(torch.tensor([x], dtype=torch.float64) for x in (8192.0, 8192.0, 0.75))).item() == 0.5
    assert bool((gap >= 1.5).all())

    def step_by_step(n, n0, gap):  # the same closed form in several lines, with a mask instead of where
        log_ratio = torch.log(n) - torch.log(n0)
        disc = (gap - 1) ** 2 - 2 * log_ratio
        root = torch.sqrt(torch.relu(disc))
        out = gap - root
        return out.masked_fill(disc < 0, float("nan"))

    assert run(check.needle_scale, step_by_step, capsys)[0] is True


def test_needle_scale_names_each_misconception(capsys):
    ok, out = run(check.needle_scale, lambda n, n0, g: 1 + torch.log(n / n0) / g, capsys)  # z held fixed
    assert ok is False and "scaling the query scales them too" in out

    def larger_root(n, n0, g):
        return 2 * g - needle_derived(n, n0, g)

    ok, out = run(check.needle_scale, larger_root, capsys)
    assert ok is False and "a smaller one does too" in out
    ok, out = run(check.needle_scale, lambda n, n0, g: torch.nan_to_num(needle_derived(n, n0, g), nan=3.0), capsys)
    assert ok is False and "check whether any scale reaches it" in out  # a scale always
    ok, out = run(check.needle_scale, lambda n, n0, g: g * torch.nan, capsys)
    assert ok is False and "a scale does restore the weight there" in out  # never
    ok, out = run(check.needle_scale, lambda n, n0, g: [1.0] * len(n), capsys)
    assert ok is False and "expected a float tensor of 1000 scales" in out
    out = run(check.needle_scale, lambda n, n0, g: 1 + torch.log(n / n0) / g, capsys)[1]
    right = needle_derived(*_cases())
    assert all(f"{x:.4g}" not in out for x in right[~right.isnan()][:50].tolist() if x != 1)  # no right scale shown


def test_needle_scale_misses_name_the_direction_and_no_number(capsys):
    """A scale that misses the weight is told which way the needle's weight is off, not the checker's log-odds or
    any other number of the case beyond its inputs."""
    n, n0, gap = _cases()
    right = needle_derived(n, n0, gap)
    target = torch.log(n0) + 0.5 - gap  # the log-odds against the needle at scale 1 among n0 (e^(t^2/2) at t = 1)
    for factor, which in ((0.9, "lower"), (1.1, "higher")):  # below the smaller root: lower; just above: higher
        ok, out = run(check.needle_scale, lambda a, b, g: needle_derived(a, b, g) * factor, capsys)
        assert ok is False and "misses the weight" in out and f"expected weight among n distractors is {which}" in out
        assert "log-odds" not in out
        shown = [f"{x:.4g}" for x in (right * factor)[~right.isnan()][:50].tolist()]
        shown += [f"{x:.4g}" for x in target[:50].tolist()]
        assert all(x not in out for x in shown)  # neither the answer's scale nor the target is printed

    def squared(a, b, g):  # E[e^(t z)] taken as e^(t^2): t^2 - gap t = 1 - gap + ln(n0/n) has roots (gap -+ root)/2
        inside = g ** 2 - 4 * (1 - g + torch.log(a / b))
        return (g - torch.sqrt(inside)) / 2
    ok, out = run(check.needle_scale, squared, capsys)
    assert ok is False and "misses the weight" in out and "take the expectation over the distractors exactly" in out


def test_needle_scale_refuses_loops_searches_integrals_and_simulations(capsys):
    def python_loop(n, n0, g):  # the closed form, one case at a time
        out = []
        for a, b, c in zip(n.tolist(), n0.tolist(), g.tolist()):
            inside = (c - 1) ** 2 - 2 * math.log(a / b)
            out.append(float("nan") if inside < 0 else c - math.sqrt(inside))
        return torch.tensor(out, dtype=torch.float64)

    ok, out = run(check.needle_scale, python_loop, capsys)  # right numbers, but Python floats carry no gradient
    assert ok is False and "all 1000 cases: right" in out and "do not follow gap" in out

    def searched_in_python(n, n0, g):  # per case, a bisection on a numerical integral in plain Python
        def log_odds(t, count, gap):
            z = [-10 + 0.1 * i for i in range(301)]
            mean = sum(math.exp(t * x - x * x / 2) for x in z) * 0.1 / math.sqrt(2 * math.pi)
            return math.log(count) + math.log(mean) - gap * t
        out = []
        for a, b, c in zip(n.tolist(), n0.tolist(), g.tolist()):
            lo, hi, target = 0.0, c, log_odds(1.0, b, c)
            for _ in range(40):
                mid = (lo + hi) / 2
                lo, hi = (mid, hi) if log_odds(mid, a, c) > target else (lo, mid)
            out.append(hi)
        return torch.tensor(out)

    ok, out = run(check.needle_scale, searched_in_python, capsys)
    assert ok is False and "loops over the cases or searches step by step" in out

    def simulated(n, n0, g):
        z = torch.randn(10_000, dtype=torch.float64)
        return needle_derived(n, n0, g) + 0 * z.std()

    ok, out = run(check.needle_scale, simulated, capsys)
    assert ok is False and "calls torch.randn" in out and "closed form" in out

    def riemann_and_grid(n, n0, g):  # the reader's shortcut: E[e^(tz)] as a matrix product, t by a refined grid
        z = torch.arange(-40, 60, 0.05, dtype=torch.float64)
        density = torch.exp(-z * z / 2) / math.sqrt(2 * math.pi) * 0.05
        target = torch.log(n0) + torch.log(torch.exp(z) @ density) - g
        lo, width = torch.zeros_like(g), 12.0
        for _ in range(3):  # three unrolled refinement stages over 120 scales each
            ts = lo[:, None] + torch.linspace(0, width, 120, dtype=torch.float64)
            odds = torch.log(n)[:, None] + torch.log(torch.exp(ts[..., None] * z) @ density) - g[:, None] * ts
            first = (odds <= target[:, None]).float().argmax(-1)
            lo, width = ts.gather(1, (first - 1).clamp(min=0)[:, None]).squeeze(1), width / 120 * 2
        return lo

    ok, out = run(check.needle_scale, riemann_and_grid, capsys)
    assert ok is False and "tensor or array elements" in out and "search over t" in out

    def bisection(n, n0, g):  # a vectorised bisection on the closed-form-free weight (Gauss-Hermite, 20 nodes)
        import numpy
        nodes, weights = (torch.tensor(a) for a in numpy.polynomial.hermite.hermgauss(20))
        def log_mean(t):
            return torch.log((torch.exp(math.sqrt(2) * t[..., None] * nodes) * weights).sum(-1) / math.sqrt(math.pi))
        target = torch.log(n0) + log_mean(torch.ones_like(g)) - g
        lo, hi = torch.zeros_like(g), g.detach().clone()
        for _ in range(50):
            mid = (lo + hi) / 2
            above = torch.log(n) + log_mean(mid) - g * mid > target
            lo, hi = torch.where(above, mid, lo), torch.where(above, hi, mid)
        return hi

    ok, out = run(check.needle_scale, bisection, capsys)
    assert ok is False and ("tensor or array elements" in out or "loops over the cases" in out)

    def through_numpy(n, n0, g):  # the right closed form, computed off torch: the chain to gap is lost
        import numpy
        a, b, c = (x.detach().numpy() for x in (n, n0, g))
        inside = (c - 1) ** 2 - 2 * numpy.log(a / b)
        return torch.from_numpy(numpy.where(inside < 0, numpy.nan, c - numpy.sqrt(numpy.clip(inside, 0, None))))

    ok, out = run(check.needle_scale, through_numpy, capsys)
    assert ok is False and "all 1000 cases: right" in out and "do not follow gap" in out

    def searched(n, n0, g):  # the checker's own log-odds, searched
        return ch08._log_odds(torch.ones_like(g), n0, g)

    ok, out = run(check.needle_scale, searched, capsys)
    assert ok is False and "calls the checker's own weight" in out
    ok, out = run(check.needle_scale, lambda n, n0, g: needle_derived(n, n0, g) + 0 * torch.trapezoid(g), capsys)
    assert ok is False and "calls torch.trapezoid" in out
    ok, out = run(check.needle_scale, lambda n, n0, g: math.sqrt(g), capsys)  # math on a tensor of 1000
    assert ok is False and "write it with torch's element-wise functions" in out


def test_needle_log_mean_is_the_closed_form():
    """The checker integrates E[e^(tz)] numerically; it equals e^(t^2/2) to float64 precision, and its cases keep
    away from the edge of reach."""
    t = torch.tensor([0.0, 0.5, 1.0, 3.0, 7.5, 12.0], dtype=torch.float64)
    torch.testing.assert_close(ch08._log_mean_exp(t), t * t / 2, rtol=0, atol=1e-12)
    n, n0, gap = _cases()
    edge = (gap - 1) ** 2 / 2 - torch.log(n / n0)  # the log-odds the best scale t = gap gains beyond the target
    assert edge.abs().min() > ch08._EDGE


# ---------------------------------------------------------------- Exercise 4: a context shift

def shift_by_hand(keys, shift, config):
    """R_{p - s} = R_{-s} R_p: one rotation by -shift at the config's frequencies, on the rotated features only;
    a rotation keeps lengths, so the attention factor the stored keys carry stays as it is."""
    settings = pl.rope_settings(config)
    inv_freq, _ = settings.frequencies(dtype=torch.float64)
    r = settings.rotary_dim
    layout = pl.rope_config.pair_layout(config)[0]
    first, second = (torch.arange(r // 2), torch.arange(r // 2, r)) if layout == "half" else \
        (torch.arange(0, r, 2), torch.arange(1, r, 2))
    cos, sin = torch.cos(-shift * inv_freq), torch.sin(-shift * inv_freq)
    out = keys.clone()
    a, b = keys[..., first], keys[..., second]
    out[..., first], out[..., second] = a * cos - b * sin, a * sin + b * cos
    return out


def test_context_shift(capsys):
    assert run(check.context_shift, None, capsys)[0] is None
    assert run(check.context_shift, _stub, capsys)[0] is None
    ok, out = run(check.context_shift, shift_by_hand, capsys)
    assert ok is True and "all correct!" in out
    assert run(check.context_shift, lambda k, s, c: shift_by_hand(k, s, c).float(), capsys)[0] is True


def test_context_shift_configs_are_length_independent():
    """The prompt covers only scalings whose frequencies do not depend on the input's length (LongRoPE and dynamic
    NTK are out of its scope): every config the checker tries must be one."""
    for name, config in ch08._SHIFT_CONFIGS.items():
        settings = pl.rope_settings(config)
        short, long_ = (settings.frequencies(seq_len=n)[0] for n in (16, 1_000_000))
        assert torch.equal(short, long_), name


def test_context_shift_accepts_any_rotation_used_right(capsys):
    """Which rotation to apply is the exercise: the library's, or transformers', used right, passes."""
    def with_apply_rope(keys, shift, config):
        settings = pl.rope_settings(config)
        inv_freq, _ = settings.frequencies()
        return pl.apply_rope(keys, torch.full(keys.shape[-2:-1], -shift), inv_freq=inv_freq,
                             rotary_dim=settings.rotary_dim, layout=pl.rope_config.pair_layout(config)[0])

    assert run(check.context_shift, with_apply_rope, capsys)[0] is True
    from transformers.models.llama.modeling_llama import rotate_half

    def with_transformers(keys, shift, config):  # rotate_half's pairs; an interleaved model permuted to halves
        settings = pl.rope_settings(config)
        inv_freq, _ = settings.frequencies(dtype=torch.float64)
        r = settings.rotary_dim
        interleaved = pl.rope_config.pair_layout(config)[0] == "interleaved"
        order = pl.layout_permutation(r) if interleaved else torch.arange(r)  # the model's order -> halves
        angle = torch.cat((-shift * inv_freq,) * 2)
        x = keys[..., order]
        out = keys.clone()
        out[..., order] = x * angle.cos() + rotate_half(x) * angle.sin()  # back to the model's order
        return out

    assert run(check.context_shift, with_transformers, capsys)[0] is True


def test_context_shift_refuses_the_checkers_rotation(capsys):
    ok, out = run(check.context_shift, lambda k, s, c: ch08._keys_at(k, c, torch.full(k.shape[-2:-1], -s),
                                                                     attention_factor=1.0), capsys)
    assert ok is False and "calls the checker's own rotation" in out


def test_context_shift_names_each_misconception(capsys):
    def factor_again(keys, shift, config):  # "RoPE at position -shift", with the config's factor
        settings = pl.rope_settings(config)
        inv_freq, factor = settings.frequencies()
        return pl.apply_rope(keys, torch.full(keys.shape[-2:-1], -shift), inv_freq=inv_freq, attention_factor=factor,
                             rotary_dim=settings.rotary_dim, layout=pl.rope_config.pair_layout(config)[0])

    ok, out = run(check.context_shift, factor_again, capsys)
    assert ok is False and "applied a second time" in out and "Qwen2.5-like model" in out
    ok, out = run(check.context_shift, lambda k, s, c: shift_by_hand(k, -s, c), capsys)
    assert ok is False and "moved later, not earlier" in out

    def everything_turned(keys, shift, config):
        whole = dict(config, partial_rotary_factor=1.0)
        return shift_by_hand(keys, shift, whole)

    ok, out = run(check.context_shift, everything_turned, capsys)
    assert ok is False and "features RoPE leaves alone changed" in out and "Phi-2-like" in out

    def other_layout(keys, shift, config):
        swapped = dict(config, model_type="gptj" if pl.rope_config.pair_layout(config)[0] == "half" else "llama")
        return shift_by_hand(keys, shift, swapped)

    ok, out = run(check.context_shift, other_layout, capsys)
    assert ok is False and "laid out the other way" in out

    def factor_again_other_layout(keys, shift, config):  # two mistakes: the first one a length shows is named
        factor = pl.rope_settings(config).frequencies()[1]
        r = pl.rope_settings(config).rotary_dim
        out = other_layout(keys, shift, config)
        return torch.cat((out[..., :r] * factor, out[..., r:]), dim=-1)

    ok, out = run(check.context_shift, factor_again_other_layout, capsys)
    assert ok is False and "Qwen2.5-like model: the attention factor is applied a second time" in out
    assert "Llama-4-like model: the pairs are laid out the other way" in out

    def plain_frequencies(keys, shift, config):  # the scaling ignored: rope_theta's frequencies
        return shift_by_hand(keys, shift, {k: v for k, v in config.items() if k != "rope_scaling"})

    ok, out = run(check.context_shift, plain_frequencies, capsys)
    assert ok is False and out.count("plain frequencies, as if the config had no scaling") == 3
    ok, out = run(check.context_shift, lambda k, s, c: k[..., :-1], capsys)
    assert ok is False and "expected keys of shape" in out


def test_context_shift_names_the_default_rotation(capsys):
    """The naive answer, "RoPE at position -shift" with apply_rope's defaults (no config read), is named as such on
    every model, not only told that the rotated features are wrong."""
    ok, out = run(check.context_shift, lambda k, s, c: pl.apply_rope(k, torch.full(k.shape[-2:-1], -s)), capsys)
    assert ok is False and out.count("with its defaults") == 3, out
    assert "not those of positions - shift" not in out, out


# ---------------------------------------------------------------- no answer in the learner's hands

def test_the_checker_module_hands_over_no_answer():
    """No module-level value is an answer, and every helper that computes a forward map (a multiplier, a weight,
    a rotation) is refused while a learner's function runs (shown above): nothing returns an answer."""
    answers = {rotations_by_rule(c, p, n) for _, c, p, n, _, _ in ch08._ROTATION_CASES} - {
        p + n for _, c, p, n, _, _ in ch08._ROTATION_CASES}  # prompt + new: no cache work, read off the case
    scales = needle_derived(*ch08._needle_cases())
    answers |= {round(t, 6) for t in scales[~scales.isnan()].tolist()}

    def values(x):
        if isinstance(x, dict):
            for v in x.values():
                yield from values(v)
        elif isinstance(x, (list, tuple, set)):
            for v in x:
                yield from values(v)
        elif isinstance(x, (int, float)) and not isinstance(x, bool):
            yield x

    for name, value in vars(ch08).items():
        if not name.startswith("__") and not callable(value):
            assert not any(round(v, 6) in answers for v in values(value) if v not in (1.0,)), name
    private = {n for n, v in vars(ch08).items() if callable(v) and n.startswith("_") and getattr(v, "__module__", "")
               == ch08.__name__}
    assert private == {"_frequency_readers", "_transformers_frequencies", "_transformers_yarn", "_checker_rotations", "_under_guard", "_longrope", "_dynamic", "_port_cases", "_deepseek_config", "_deepseek_scores", "_checker_scores",
                       "_log_mean_exp", "_log_odds", "_heaviest", "_needle_cases", "_simulations",
                       "_some", "_keys_at", "_shift_misreadings"}
    n, n0, gap = ch08._needle_cases()  # the cases are inputs: no tensor of the module holds a scale
    assert not any(isinstance(v, torch.Tensor) and v.shape == n.shape for v in vars(ch08).values())


@pytest.mark.parametrize("name", ch08.__all__)
def test_grading_raises(name, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="not attempted"):
        getattr(check, name)(None)
    with pytest.raises(AssertionError, match="hint"):
        getattr(check, name)(lambda *a: 0)


# ---------------------------------------------------------------- no worked answer above the exercises

def _chapter_above_the_exercises():
    from pathlib import Path

    source = (Path(__file__).parents[1] / "notebooks" / "src" / "08_rope_in_models.py").read_text()
    above, exercises = source.split("# ## Exercises", 1)
    return above, exercises


def test_no_cell_above_exercise_2_splits_a_deepseek_score_by_multiplier():
    """Exercise 2's one computation (which part of a score a RoPE factor and a softmax scale each reach) is not
    worked above it: no cell puts YaRN's multiplier on a rotated slice and compares it with the softmax scale."""
    above, _ = _chapter_above_the_exercises()
    code = "\n".join(line for line in above.splitlines() if not line.startswith("#"))
    assert "attention_factor=mu" not in code and "attention_factor=m_all" not in code
    assert "only the rotated part" not in above and "whole score" not in above


def test_no_cell_above_exercise_2_states_which_setting_sets_what():
    """Exercise 2's two rules (the RoPE's factor as a ratio of the settings, the softmax term from mscale_all_dim)
    are not written above it: §1 and §3 show only DeepSeek-V3's equal settings, as numbers."""
    above, _ = _chapter_above_the_exercises()
    code = "\n".join(line for line in above.splitlines() if not line.startswith("#"))
    assert "mscale\\_all\\_dim} \\ln" not in above and "mscale} \\ln" not in above
    assert "text{mscale" not in above
    assert '["mscale_all_dim"] * math.log' not in code and '["mscale"] * math.log' not in code


def test_exercise_prompts_1_and_2_state_no_steps_and_no_printed_rules():
    """Exercise 1's prompt asks for the count, not where the re-rotations fall or what each costs; Exercise 2's does
    not send the learner to pl.inspect_config, and inspect's line on the two mscales writes no rule."""
    _, exercises = _chapter_above_the_exercises()
    first = exercises.split("**Exercise 1", 1)[1].split("# %%", 1)[0]
    second = exercises.split("**Exercise 2", 1)[1].split("# %%", 1)[0]
    assert "where the first re-rotation falls" not in first and "what each one costs" not in first
    assert "inspect_config" not in second
    # Exercise 2 asks for an experiment and a derivation: it does not send the learner to transformers' files
    assert "modeling_deepseek_v3" not in second and "modeling_rope_utils" not in second
    assert "ROPE_INIT_FUNCTIONS` and rotary embeddings" in first  # the checker's refusal, stated


def test_yarn_docstring_writes_no_deepseek_rule():
    """Exercise 2's RoPE factor (how mscale and mscale_all_dim combine) is not spelled in the docstring a learner
    reads with help(): the docstring says it depends on both and points to the exercise."""
    from posenc_lib import scaling

    doc = " ".join(scaling._yarn.__doc__.split())
    assert "mscale ln" not in doc and "mscale_all_dim ln" not in doc and "/ (0.1" not in doc
    assert "depends on both" in doc and "Exercise 2" in doc


def test_exercise_4_states_no_single_rotation_above_it_or_in_its_prompt():
    """Exercise 4's idea (one rotation by -shift moves every cached key) is neither computed above it (§4 no
    longer builds the turn a stale key needs) nor stated in its prompt by contrast with LongRoPE."""
    above, exercises = _chapter_above_the_exercises()
    prompt = exercises[exercises.index("**Exercise 4 (design).**"):exercises.index("def shift_keys")]
    assert "turn_needed" not in above
    assert "one rotation" not in above + prompt and "grows with its position" not in prompt
    # the doubled factor (§6) is the trap the learner must find: neither the prompt nor the hint names it
    assert "attention factor" not in prompt and "second time" not in prompt and "bug" not in prompt
    hint = inspect.getsource(ch08.context_shift).split("report(")[1]
    assert "factor" not in hint and "carries" not in hint and "length" not in hint


# ---------------------------------------------------------------- chapter claims read from released files

def test_ch08_deepseek_v2_lite_config_writes_the_reports_coefficient():
    """§3: the released DeepSeek-V2-Lite config writes mscale = mscale_all_dim = 0.707, so 0.1 x 0.707 is the
    report's 0.0707 (tests/data/configs/SOURCES.md names the copy the file was read from)."""
    import json
    from pathlib import Path

    config = json.loads((Path(__file__).parent / "data" / "configs" / "deepseek-v2-lite.json").read_text())
    scaling = config["rope_scaling"]
    assert scaling["type"] == "yarn" and scaling["mscale"] == scaling["mscale_all_dim"] == 0.707
    assert round(0.1 * scaling["mscale_all_dim"], 4) == 0.0707


_FRESH_IMPORT = '''
import math, sys
from posenc_lib import check
assert "transformers.modeling_rope_utils" not in sys.modules  # a fresh kernel: the learner has not loaded it


KEPT = {}  # the answers of a first run, kept for a second one with the same settings


def query_scales(m, a, s):
    if (m, a, s) in KEPT:
        return KEPT[m, a, s]
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # imported inside the answer
    from transformers import DeepseekV3Config
    rs = {"rope_type": "yarn", "factor": s, "original_max_position_embeddings": 4096, "mscale": m,
          "mscale_all_dim": a}
    _, factor = ROPE_INIT_FUNCTIONS["yarn"](DeepseekV3Config(rope_scaling=rs, max_position_embeddings=int(4096 * s)),
                                            "cpu")
    mu = 0.1 * a * math.log(s) + 1
    KEPT[m, a, s] = mu**2, (factor * mu) ** 2
    return KEPT[m, a, s]


def cache_rotations(config, prompt, new):
    from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS  # imported inside the answer
    from transformers import LlamaConfig
    ROPE_INIT_FUNCTIONS["linear"](LlamaConfig(rope_scaling={"rope_type": "linear", "factor": 2.0}), "cpu")
    return prompt + new


print("EX2", check.deepseek_mscales(query_scales))
print("EX1", check.cache_rotations(cache_rotations))
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
print("RESTORED", ROPE_INIT_FUNCTIONS["yarn"].__code__.co_name)
'''


def test_refusals_hold_when_the_answer_imports_transformers_itself():
    """A fresh interpreter where transformers is not loaded: an answer that imports ROPE_INIT_FUNCTIONS inside
    itself and calls its YaRN (Exercise 2), or its linear entry (Exercise 1), is refused all the same, even one that
    keeps its first answers for settings met again (Exercise 2 draws new ones); the functions are put back after."""
    import subprocess
    import sys
    from pathlib import Path

    done = subprocess.run([sys.executable, "-c", _FRESH_IMPORT], capture_output=True, text=True, timeout=240,
                          cwd=Path(__file__).parents[1])
    out = done.stdout
    assert done.returncode == 0, done.stderr[-2000:]
    assert "EX2 False" in out and "calls transformers' ROPE_INIT_FUNCTIONS['yarn']" in out, out
    assert "EX1 False" in out and "calls transformers' ROPE_INIT_FUNCTIONS['linear']" in out, out
    assert "RESTORED _compute_yarn_parameters" in out, out
