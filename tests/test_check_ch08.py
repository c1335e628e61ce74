"""Checkers of chapter 8 (posenc_lib.check.ch08): the right answer (derived here, independently of the
checker) passes, every shortcut the prompts forbid is refused, each named misconception is named, and the
checker module hands over no answer."""
import math
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
    max_position_embeddings (§4's table); none for the others. `early` moves the threshold one token earlier."""
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
    if kind not in ("longrope", "dynamic"):
        return {}
    changes = _changes(config, prompt, new)
    right = _cost(prompt, new, changes)
    out = {"never": prompt + new, "threshold": _cost(prompt, new, _changes(config, prompt, new, early=1)),
           "prefill": right - prompt, "new_key": right - len(changes)}
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


def test_cache_rotations_refuses_measuring_and_looping(capsys):
    ok, out = run(check.cache_rotations, _bisect_with_the_library, capsys)
    assert ok is False and "calls pl.rope_from_config" in out
    ok, out = run(check.cache_rotations, lambda c, p, n: pl.rope_settings(c).frequencies(n) and 0, capsys)
    assert ok is False and "calls RopeSettings.frequencies" in out
    ok, out = run(check.cache_rotations, _token_by_token, capsys)
    assert ok is False and "loops over the generated tokens" in out


def _with(misconception):
    return lambda c, p, n: _misread(c, p, n).get(misconception, rotations_by_rule(c, p, n))


@pytest.mark.parametrize("misconception, words", [
    ("once", "as if the frequencies changed once"),
    ("never", "as if nothing ever changed"),
    ("threshold", "off by one at the threshold"),
    ("prefill", "the prompt's keys are rotated too"),
    ("new_key", "also rotates its new token's key"),
])
def test_cache_rotations_names_each_misconception(misconception, words, capsys):
    ok, out = run(check.cache_rotations, _with(misconception), capsys)
    assert ok is False and words in out and "hint" in out
    for _, config, prompt, new, _, _ in ch08._ROTATION_CASES:  # no count beyond prompt + new is ever printed
        count = rotations_by_rule(config, prompt, new)
        assert count == prompt + new or not re.search(rf"\b{count}\b", out.replace(" ", ""))


def test_cache_rotations_names_a_length_for_a_static_rope(capsys):
    ok, out = run(check.cache_rotations, lambda c, p, n: _cost(p, n, range(p + 1, p + n + 1)), capsys)  # all change
    assert ok is False and "depend on the config alone" in out


# ---------------------------------------------------------------- Exercise 2: DeepSeek's two mscales

def mscales_derived(content, rotated, factor):
    """The softmax scale (0.1 m_all ln s + 1)^2 reaches every feature; the RoPE factor, the ratio of the two
    mscale terms, multiplies the rotated q and k: the rotated part gets ratio^2 m_all^2 = (0.1 m ln s + 1)^2.
    Each part is set by one mscale alone."""
    step = 0.1 * math.log(factor)
    return (math.sqrt(rotated) - 1) / step, (math.sqrt(content) - 1) / step


def test_deepseek_mscales(capsys):
    assert run(check.deepseek_mscales, None, capsys)[0] is None
    ok, out = run(check.deepseek_mscales, mscales_derived, capsys)
    assert ok is True and "all correct!" in out
    assert run(check.deepseek_mscales, lambda c, r, s: torch.tensor(mscales_derived(c, r, s)).tolist(), capsys)[0]
    assert mscales_derived(*ch08._MSCALE_CASES[2]) == pytest.approx((1.0, 1.0))  # DeepSeek-V3's own config


def test_deepseek_mscales_names_each_misconception(capsys):
    ok, out = run(check.deepseek_mscales, lambda c, r, s: mscales_derived(c, r, s)[::-1], capsys)
    assert ok is False and "swapped" in out
    step = lambda s: 0.1 * math.log(s)  # noqa: E731
    ok, out = run(check.deepseek_mscales, lambda c, r, s: ((r - 1) / step(s), (c - 1) / step(s)), capsys)
    assert ok is False and "meets it twice" in out  # no square root

    def softmax_forgotten(c, r, s):  # the RoPE factor alone made to give r: (0.1 m ln s + 1) / sqrt(c) = sqrt(r)
        m, m_all = mscales_derived(c, r, s)
        return (math.sqrt(r) * math.sqrt(c) - 1) / step(s), m_all

    ok, out = run(check.deepseek_mscales, softmax_forgotten, capsys)
    assert ok is False and "reaches the rotated features as well" in out
    ok, out = run(check.deepseek_mscales, lambda c, r, s: (1.0, 0.0), capsys)
    assert ok is False and "two nonzero numbers" in out
    # the settings asked for are never printed
    assert "1.0000" not in out and all(f"{v:.4g}" not in out for case in ch08._MSCALE_CASES[:2]
                                       for v in mscales_derived(*case))


def test_deepseek_mscales_refuses_the_library_and_a_search_over_the_checker(capsys):
    def with_library(c, r, s):
        pl.rope_from_config(ch08._deepseek_config(1.0, 1.0, s))
        return mscales_derived(c, r, s)

    ok, out = run(check.deepseek_mscales, with_library, capsys)
    assert ok is False and "calls pl.rope_from_config" in out
    ok, out = run(check.deepseek_mscales, lambda c, r, s: ch08._multipliers(1.0, 1.0, s), capsys)
    assert ok is False and "calls pl.rope_from_config" in out  # the checker's own map runs through the library


# ---------------------------------------------------------------- Exercise 3: a query scale against n keys

def needle_derived(n, n0, gap):
    """E[e^(t z)] = e^(t^2/2): the weight is 1 / (1 + n e^(t^2/2 - gap t)). Equal weights at (t, n) and (1, n0):
    t^2 - 2 gap t + 2 gap - 1 + 2 ln(n/n0) = 0, whose smaller root is gap - sqrt((gap-1)^2 - 2 ln(n/n0))."""
    inside = (gap - 1) ** 2 - 2 * math.log(n / n0)
    return None if inside < 0 else gap - math.sqrt(inside)


def test_needle_scale(capsys):
    assert run(check.needle_scale, None, capsys)[0] is None  # None as a function: not attempted
    ok, out = run(check.needle_scale, needle_derived, capsys)
    assert ok is True and "all correct!" in out
    assert any(needle_derived(*case) is None for case in ch08._NEEDLE_CASES)  # both kinds of case are asked
    assert needle_derived(8192, 8192, 3.0) == 1.0 and needle_derived(4096, 8192, 3.0) < 1


def test_needle_scale_names_each_misconception(capsys):
    ok, out = run(check.needle_scale, lambda n, n0, g: 1 + math.log(n / n0) / g, capsys)  # z held fixed
    assert ok is False and "scaling the query scales them too" in out

    def larger_root(n, n0, g):
        t = needle_derived(n, n0, g)
        return None if t is None else 2 * g - t

    ok, out = run(check.needle_scale, larger_root, capsys)
    assert ok is False and "a smaller one does too" in out
    ok, out = run(check.needle_scale, lambda n, n0, g: needle_derived(n, n0, g) or 3.0, capsys)  # a scale always
    assert ok is False and "check whether any scale reaches it" in out
    ok, out = run(check.needle_scale, lambda n, n0, g: None, capsys)
    assert ok is False and "a scale does restore the weight here" in out
    ok, out = run(check.needle_scale, lambda n, n0, g: float("nan"), capsys)
    assert ok is False and "not a scale" in out
    out = run(check.needle_scale, lambda n, n0, g: 1 + math.log(n / n0) / g, capsys)[1]
    assert all(f"{t:.4g}" not in out for t in map(lambda c: needle_derived(*c), ch08._NEEDLE_CASES) if t and t != 1)


def test_needle_scale_refuses_a_simulation_and_a_search_over_the_checker(capsys):
    def simulated(n, n0, g):
        z = torch.randn(10_000)
        return float(z.std())

    ok, out = run(check.needle_scale, simulated, capsys)
    assert ok is False and "calls torch.randn" in out and "closed form" in out
    assert run(check.needle_scale, needle_derived, capsys)[0] is True  # the closed form fits the step budget

    def searched(n, n0, g):  # bisection over the checker's own weight
        lo, hi = 0.0, g
        target = ch08._needle_weight(1.0, n0, g)
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if ch08._needle_weight(mid, n, g) < target else (lo, mid)
        return hi

    ok, out = run(check.needle_scale, searched, capsys)
    assert ok is False and "calls the checker's own weight" in out

    def integrated_and_bisected(n, n0, g):  # the expectation integrated numerically, the scale found by bisection
        z = torch.linspace(-40.0, 60.0, 10_001, dtype=torch.float64)
        density = torch.exp(-z * z / 2) / math.sqrt(2 * math.pi)

        def weight(t, count):
            return 1 / (1 + count * float((torch.exp(t * z - g * t) * density).sum() * (z[1] - z[0])))

        lo, hi = 0.0, g
        if weight(g, n) < weight(1.0, n0):
            return None
        for _ in range(60):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if weight(mid, n) < weight(1.0, n0) else (lo, mid)
        return hi

    ok, out = run(check.needle_scale, integrated_and_bisected, capsys)
    assert ok is False and "searches for the scale step by step" in out
    ok, out = run(check.needle_scale, lambda n, n0, g: float(torch.trapezoid(torch.ones(3))), capsys)
    assert ok is False and "calls torch.trapezoid" in out


def test_needle_weight_is_the_closed_form():
    """The checker integrates E[e^(tz)] numerically; it equals e^(t^2/2) to float64 precision."""
    for t in (0.0, 0.5, 1.0, 3.0, 7.5):
        assert ch08._needle_weight(t, 1e6, 3.0).item() == pytest.approx(1 / (1 + 1e6 * math.exp(t * t / 2 - 3 * t)),
                                                                          rel=1e-10)


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


def test_context_shift_refuses_the_library_and_the_checkers_rotation(capsys):
    def with_apply_rope(keys, shift, config):
        inv_freq, _ = pl.rope_from_config(config)
        return pl.apply_rope(keys, torch.full(keys.shape[-2:-1], -shift), inv_freq=inv_freq, layout="half")

    ok, out = run(check.context_shift, with_apply_rope, capsys)
    assert ok is False and "calls pl.apply_rope" in out and "write the rotation yourself" in out
    ok, out = run(check.context_shift, lambda k, s, c: ch08._keys_at(k, c, torch.full(k.shape[-2:-1], -s)), capsys)
    assert ok is False and "calls the checker's own rotation" in out


def test_context_shift_names_each_misconception(capsys):
    def factor_again(keys, shift, config):
        return shift_by_hand(keys, shift, config) * pl.rope_from_config(config)[1]

    ok, out = run(check.context_shift, factor_again, capsys)
    assert ok is False and "applied a second time" in out and "Qwen2.5-like head" in out
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
    ok, out = run(check.context_shift, lambda k, s, c: k[..., :-1], capsys)
    assert ok is False and "expected keys of shape" in out


# ---------------------------------------------------------------- no answer in the learner's hands

def test_the_checker_module_hands_over_no_answer():
    """No module-level value is an answer, and every helper that computes a forward map (a multiplier, a weight,
    a rotation) is refused while a learner's function runs (shown above): nothing returns an answer."""
    answers = {rotations_by_rule(c, p, n) for _, c, p, n, _, _ in ch08._ROTATION_CASES} - {
        p + n for _, c, p, n, _, _ in ch08._ROTATION_CASES}  # prompt + new: no cache work, read off the case
    answers |= {round(v, 6) for case in ch08._MSCALE_CASES for v in mscales_derived(*case)}
    answers |= {round(t, 6) for t in (needle_derived(*case) for case in ch08._NEEDLE_CASES) if t is not None}

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
    assert private == {"_frequency_readers", "_rotations", "_longrope", "_dynamic", "_deepseek_config", "_multipliers",
                       "_needle_weight", "_simulations", "_keys_at", "_shift_misreadings"}


@pytest.mark.parametrize("name", ch08.__all__)
def test_grading_raises(name, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="not attempted"):
        getattr(check, name)(None)
    with pytest.raises(AssertionError, match="hint"):
        getattr(check, name)(lambda *a: 0)
