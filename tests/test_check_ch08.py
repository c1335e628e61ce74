"""Checkers of chapter 8 (posenc_lib.check.ch08): right, wrong and unattempted answers."""
import math
import re

import pytest
import torch

import posenc_lib as pl
from posenc_lib import check


def run(checker, answer, capsys):
    result = checker(answer)
    return result, capsys.readouterr().out


def _stub(*args):
    raise NotImplementedError


def stale_by_reading(config):
    """Right, written from §4: LongRoPE switches lists past original_max_position_embeddings, dynamic NTK
    stretches past max_position_embeddings; every other rope type is fixed by the config."""
    rs = config.get("rope_scaling") or {}
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "longrope":
        return config.get("original_max_position_embeddings", rs.get("original_max_position_embeddings")) + 1
    if kind == "dynamic":
        return config["max_position_embeddings"] + 1
    return None


def test_stale_from(capsys):
    assert run(check.stale_from, None, capsys)[0] is None
    assert run(check.stale_from, _stub, capsys)[0] is None
    ok, out = run(check.stale_from, stale_by_reading, capsys)
    assert ok is True and "all correct!" in out
    infinite = lambda c: float("inf") if stale_by_reading(c) is None else float(stale_by_reading(c))  # noqa: E731
    assert run(check.stale_from, infinite, capsys)[0] is True  # "never" as infinity, lengths as floats
    ok, out = run(check.stale_from, lambda c: None if stale_by_reading(c) is None else stale_by_reading(c) - 1, capsys)
    assert ok is False and "off by one at the threshold" in out and "4097" not in out
    ok, out = run(check.stale_from, lambda c: c["max_position_embeddings"] + 1, capsys)  # every model stretches
    assert ok is False and "never changes them" in out and "deployed context" in out
    ok, out = run(check.stale_from, lambda c: None, capsys)  # every model is static
    assert ok is False and "picks its frequencies from the input's length" in out
    assert run(check.stale_from, lambda c: "4097", capsys)[0] is False


def test_stale_from_reads_what_the_library_computes():
    """The checker's cases: the library's frequencies change exactly at the lengths §4 names."""
    for name, config in check.ch08._stale_cases().items():
        want = stale_by_reading(config)
        if want is None:
            assert torch.equal(pl.rope_from_config(config, seq_len=1)[0], pl.rope_from_config(config, seq_len=10**6)[0])
        else:
            before, at = (pl.rope_from_config(config, seq_len=n)[0] for n in (want - 1, want))
            assert torch.equal(before, pl.rope_from_config(config, seq_len=1)[0]) and not torch.equal(before, at), name


def test_longrope_context(capsys):
    assert run(check.longrope_context, None, capsys)[0] is None
    ok, out = run(check.longrope_context, lambda a, L0: math.exp(a * a * math.log(L0)), capsys)
    assert ok is True and "all correct!" in out and "17/12" in out
    ok, out = run(check.longrope_context, lambda a, L0: L0 * math.exp((a * a - 1) * math.log(L0)), capsys)
    assert ok is True  # the same length, written as s * L0
    ok, out = run(check.longrope_context, lambda a, L0: L0 * a * a, capsys)  # a^2 as the stretch itself
    assert ok is False and "reads a² as the stretch" in out and "hint" in out and "17/12" not in out
    assert "131072" not in out  # Phi-3's length is never given away
    ok, out = run(check.longrope_context, lambda a, L0: L0 ** a, capsys)
    assert ok is False and "a square root" in out and "131072" not in out
    ok, out = run(check.longrope_context, lambda a, L0: L0 ** (2 * a), capsys)
    assert ok is False and "another factor than a" in out
    ok, out = run(check.longrope_context, lambda a, L0: True, capsys)
    assert ok is False and "not a length" in out  # a bool is not a length


@pytest.mark.parametrize("a, L0", check.ch08._CONTEXT_CASES)
def test_longrope_context_cases_match_the_library(a, L0):
    """The checker's closed form, fed back through pl.rope_from_config, gives the factor a again."""
    length = L0 ** (a * a)
    config = check.ch08._phi3_like(L0, round(length))
    assert math.isclose(pl.rope_from_config(config)[1], a, rel_tol=1e-5)


def test_phi3_factor_is_sqrt_17_over_12():
    """Phi-3's numbers give sqrt(1 + 5/12) = 1.190, and its deployed length is 4096 ** (17/12) = 131072."""
    config = check.ch08._phi3_like(4096, 131072)
    assert math.isclose(pl.rope_from_config(config)[1], math.sqrt(1 + 5 / 12))
    assert math.isclose(4096 ** (17 / 12), 131072)


def test_temperature_position(capsys):
    assert run(check.temperature_position, None, capsys)[0] is None
    # 1 + 0.1 ln(1 + k) > 1.2 needs k >= 7 (e^2 = 7.39), k = floor((pos + 1) / 8192)
    ok, out = run(check.temperature_position, 7 * 8192 - 1, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.temperature_position, 7 * 8192, capsys)  # one too late: positions taken from 1
    assert ok is False and "positions count from 0" in out and str(7 * 8192 - 1) not in out
    ok, out = run(check.temperature_position, 7 * 8192 + 5000, capsys)  # inside the step, not its start
    assert ok is False and "not the first" in out and "positions count from 0" not in out
    ok, out = run(check.temperature_position, 6 * 8192 - 1, capsys)  # a step too early
    assert ok is False and "is not above 1.2" in out
    assert run(check.temperature_position, 57343.5, capsys)[0] is False  # not an integer
    assert run(check.temperature_position, "57343", capsys)[0] is False


def test_keys_seen(capsys):
    assert run(check.keys_seen, None, capsys)[0] is None
    ok, out = run(check.keys_seen, lambda p, c: p % c + 1, capsys)
    assert ok is True and "all correct!" in out
    ok, out = run(check.keys_seen, lambda p, c: torch.tensor(p - c * (p // c) + 1), capsys)  # the same, as a tensor
    assert ok is True
    ok, out = run(check.keys_seen, lambda p, c: min(p + 1, c), capsys)  # the usual confusion with a window
    assert ok is False and "sliding window" in out and "position 100, chunk 8192: right" in out
    ok, out = run(check.keys_seen, lambda p, c: p % c, capsys)
    assert ok is False and "off by one: is the query among the keys" in out
    ok, out = run(check.keys_seen, lambda p, c: p + 1, capsys)
    assert ok is False and "NoPE layer" in out
    assert "3617" not in run(check.keys_seen, lambda p, c: 1, capsys)[1]  # 20000 % 8192 + 1 stays hidden


@pytest.mark.parametrize("checker", [check.stale_from, check.longrope_context, check.keys_seen])
def test_grading_raises_on_a_wrong_function(checker, monkeypatch):
    monkeypatch.setenv("POSENC_GRADING", "1")
    with pytest.raises(AssertionError, match="hint"):
        checker(lambda *a: 0)


# ---------------------------------------------------------------- RoPE for a config, judged by diagnose_rope

def _rope_for_config(layout="half", r=32, factor=2.0, offset_ignored=False, angles_dtype=None):
    """The exercise's answer written with torch alone, with one of its decisions changed."""

    def fn(q, k, positions):
        theta = 10000.0 ** (-torch.arange(0, r, 2, dtype=torch.float64) / r) / factor
        pos = positions - positions[:, :1] if offset_ignored else positions
        if angles_dtype is not None:  # angles in the inputs' dtype
            angles = (pos.to(q.dtype)[..., None] * theta.to(q.dtype)).float()[:, None]
        else:
            angles = (pos[..., None].double() * theta).float()[:, None]
        cos, sin = angles.cos(), angles.sin()
        first, second = pl.pair_indices(r, layout)

        def rotate(x):
            out = x.clone().float()
            a, b = x[..., first].float(), x[..., second].float()
            out[..., first], out[..., second] = a * cos - b * sin, a * sin + b * cos
            return out.to(x.dtype)

        return rotate(q), rotate(k)

    return fn


def test_rope_for_config_accepts_the_config_and_names_each_bug(capsys):
    assert run(check.rope_for_config, None, capsys)[0] is None
    assert run(check.rope_for_config, _stub, capsys)[0] is None
    ok, out = run(check.rope_for_config, _rope_for_config(), capsys)
    assert ok is True and "all correct!" in out and "only on m − n" in out
    wrong = {
        "the pairs are laid out the other way": _rope_for_config(layout="interleaved"),
        "the wrong number of features is rotated": _rope_for_config(r=80),
        "the config's context extension (rope_scaling) is ignored": _rope_for_config(factor=1.0),
        "the positions restart at 0: the offset of a KV cache is ignored": _rope_for_config(offset_ignored=True),
        "the angles are computed in bfloat16": _rope_for_config(angles_dtype=True),
    }
    for diagnosis, fn in wrong.items():
        ok, out = run(check.rope_for_config, fn, capsys)
        assert ok is False and f"diagnosis: {diagnosis}" in out and "symptom:" in out and "hint" in out, out
        # the claimed RoPE's settings are never printed: no layout named as the answer, no r, no base, no factor
        assert "half layout" not in out and not re.search(r"\b32\b", out) and "10000" not in out and "linear" not in out
    ok, out = run(check.rope_for_config, _rope_for_config(factor=1.0), capsys)
    assert "with the same numbers: q or k is rotated twice" in out  # dropping PI's factor 2 = turning twice


def test_rope_for_config_reports_a_crash_and_a_wrong_shape(capsys):
    ok, out = run(check.rope_for_config, lambda q, k, positions: (q[..., :32], k), capsys)
    assert ok is False and "your answer raised ValueError" in out and "RoPE keeps the shape" in out
    ok, out = run(check.rope_for_config, lambda q, k, positions: (q, k, positions), capsys)
    assert ok is False and "fn must return (q, k)" in out


def test_rope_for_config_is_the_config_the_chapter_prints():
    cfg = check.ch08.ROPE_EXERCISE_CONFIG
    report = pl.diagnose_rope(_rope_for_config(), cfg)
    assert report.ok and pl.rope_settings(cfg).rotary_dim == 32 and pl.rope_config.pair_layout(cfg)[0] == "half"


def test_the_chapter_prints_the_config_the_checker_uses():
    """Exercise 5's markdown shows the config as a Python dict: it must be the checker's."""
    import ast
    from pathlib import Path

    source = (Path(__file__).resolve().parents[1] / "notebooks" / "src" / "08_rope_in_models.py").read_text()
    cell = next(c for c in source.split("# %%") if "my_rope(q, k, positions)" in c and "```python" in c)
    block = cell.split("```python")[1].split("```")[0]
    shown = ast.literal_eval("".join(line.removeprefix("#").strip() for line in block.splitlines()))
    assert shown == check.ch08.ROPE_EXERCISE_CONFIG
