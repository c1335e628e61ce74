"""diagnose_rope: a gallery of buggy RoPE implementations, each diagnosed by name; real implementations
(transformers, rotary-embedding-torch, the three adapters' shapes) passed as correct; bad functions and
bad claims give clear errors, never a false "correct"."""

import re

import pytest
import torch

import posenc_lib as pl
from posenc_lib.rope_config import rope_settings
from posenc_lib.rope_diagnose import HYPOTHESES, diagnose_rope, from_engine, from_hf, from_one_tensor

# ---------------------------------------------------------------- claims (tiny heads, real configs' shapes)

PLAIN = dict(head_dim=32)  # apply_rope's defaults: base 10000, interleaved
LLAMA3 = {"model_type": "llama", "hidden_size": 128, "num_attention_heads": 2, "max_position_embeddings": 131072,
          "rope_theta": 500000.0, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                                   "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}
YARN = {"model_type": "qwen2", "hidden_size": 128, "num_attention_heads": 2, "max_position_embeddings": 32768,
        "rope_theta": 1e6, "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768}}
LONGROPE = {"model_type": "phi3", "hidden_size": 64, "num_attention_heads": 2, "max_position_embeddings": 131072,
            "original_max_position_embeddings": 4096, "rope_theta": 10000.0,
            "rope_scaling": {"type": "longrope", "short_factor": [1.0 + 0.1 * j for j in range(16)],
                             "long_factor": [1.0 + 4.0 * j for j in range(16)]}}
NEOX = {"model_type": "gpt_neox", "hidden_size": 128, "num_attention_heads": 2, "max_position_embeddings": 2048,
        "rope_theta": 10000.0, "partial_rotary_factor": 0.25}  # 16 of 64 features turn, half layout
PROPORTIONAL = {"model_type": "gemma4_text", "head_dim": 64, "max_position_embeddings": 8192,
                "rope_parameters": {"rope_type": "proportional", "rope_theta": 1e6, "partial_rotary_factor": 0.25}}
MROPE = {"model_type": "qwen2_vl", "hidden_size": 128, "num_attention_heads": 2, "max_position_embeddings": 32768,
         "rope_theta": 1e6, "rope_scaling": {"type": "mrope", "mrope_section": [8, 12, 12]}}
DEEPSEEK = dict(head_dim=48, rotary_dim=16, rotated="last")  # MLA's shape: rotated features last


def claim_kwargs(claim):
    """diagnose_rope's keywords for a claim: a config (it has a model_type) or apply_rope's arguments."""
    return {"config": claim} if "model_type" in claim else claim


def reference(claim, *, layout=None, **changes):
    """fn computing the claimed RoPE with apply_rope / apply_rope_nd, one of its steps changed."""
    kw = claim_kwargs(claim)
    if "config" in kw:
        s = rope_settings(kw["config"])
        layout = layout or pl.rope_config.pair_layout(kw["config"])[0]
        r = s.head_dim if s.method == "proportional" else s.rotary_dim
        return _fn(layout=layout, settings=s, r=r, **changes)
    return _fn(layout=layout or "interleaved", settings=None, r=kw.get("rotary_dim") or kw["head_dim"],
               rotated=kw.get("rotated", "first"), **changes)


def _fn(*, layout, settings, r, rotated="first", positions=lambda p: p, inv_freq=None, factor=None,
        k_positions=None, axes_order=None, sections=None, rounding=None):
    def rotate(x, pos):
        seq_len = int(pos.max()) + 1
        if settings is not None:
            inv, a = settings.frequencies(seq_len)
        else:
            inv, a = pl.rope_frequencies(r), 1.0
        inv = inv if inv_freq is None else inv_freq(seq_len, inv)
        a = a if factor is None else factor(a)
        if rounding == "bf16 buffer":
            inv = inv.bfloat16().float()
        if settings is not None and settings.mrope_section is not None:
            coords = pos if axes_order is None else pos[..., list(axes_order)]
            style = "interleaved" if settings.mrope_interleaved else "contiguous"
            return pl.apply_rope_nd(x, coords, sections=sections or settings.mrope_section, layout=layout,
                                    section_style=style,
                                    inv_freq=inv, attention_factor=a)
        if rotated == "last":
            d = x.shape[-1]
            return torch.cat((x[..., :d - r], pl.apply_rope(x[..., d - r:], pos, layout=layout, inv_freq=inv)), -1)
        return pl.apply_rope(x, pos, layout=layout, inv_freq=inv, attention_factor=a, rotary_dim=r)

    def fn(q, k, pos):
        kp = pos if k_positions is None else k_positions(pos)
        return rotate(q, positions(pos)), rotate(k, positions(kp))

    return fn


# ---------------------------------------------------------------- the gallery: (claim, buggy fn, diagnosis)

def _bf16_product(q, k, pos):
    """Angles computed in the inputs' dtype: exact for float32 inputs, rounded to 8 bits for bfloat16 ones."""
    inv = pl.rope_frequencies(32)
    angles = (pos.to(q.dtype)[..., None] * inv.to(q.dtype)).float()[:, None]
    return tuple(pl.rotate_pairs(x.float(), angles.cos(), angles.sin()).to(x.dtype) for x in (q, k))


def _llama3_bands_at(L0):
    s = rope_settings(LLAMA3)
    from dataclasses import replace
    moved = replace(s, original_max_position=L0)
    return lambda seq_len, inv: moved.frequencies(seq_len)[0]


def _longrope_switch(rule):
    s = rope_settings(LONGROPE)
    short, long_ = s.frequencies(4096)[0], s.frequencies(4097)[0]
    return lambda seq_len, inv: long_ if rule(seq_len) else short


def _exponent_head_dim(claim):
    s = rope_settings(claim)
    return lambda seq_len, inv: pl.rope_frequencies(s.head_dim, base=s.base)[: s.rotary_dim // 2]


def _proportional_instead_of_partial(q, k, pos):
    s = rope_settings(NEOX)
    inv = pl.rope_frequencies(s.head_dim, base=s.base)
    inv[s.rotary_dim // 2:] = 0
    return pl.apply_rope(q, pos, layout="half", inv_freq=inv), pl.apply_rope(k, pos, layout="half", inv_freq=inv)


def _partial_instead_of_proportional(q, k, pos):
    inv = pl.rope_frequencies(16, base=1e6)  # a RoPE of dimension p * head_dim = 16
    return (pl.apply_rope(q, pos, layout="half", inv_freq=inv, rotary_dim=16),
            pl.apply_rope(k, pos, layout="half", inv_freq=inv, rotary_dim=16))


def _all_head_dim(q, k, pos):
    return pl.apply_rope(q, pos, layout="half"), pl.apply_rope(k, pos, layout="half")  # theta of 64, all 64 turn


GALLERY = {
    # name: (claim, fn, expected hypotheses)
    "half layout for interleaved": (PLAIN, reference(PLAIN, layout="half"), ("layout",)),
    "interleaved layout for half (llama3)": (LLAMA3, reference(LLAMA3, layout="interleaved"), ("layout",)),
    "clockwise": (PLAIN, reference(PLAIN, positions=lambda p: -p), ("clockwise",)),
    "1-based positions": (PLAIN, reference(PLAIN, positions=lambda p: p + 1), ("position_plus_one",)),
    "positions one early": (PLAIN, reference(PLAIN, positions=lambda p: p - 1), ("position_minus_one",)),
    "cache offset dropped": (PLAIN, reference(PLAIN, positions=lambda p: p - p[:, :1]), ("restart_at_zero",)),
    "first sequence's positions for all": (PLAIN, reference(PLAIN, positions=lambda p: p[:1].expand_as(p)),
                                           ("first_row_positions",)),
    "keys rotated twice": (PLAIN, reference(PLAIN, k_positions=lambda p: 2 * p), ("double_rotation",)),
    "angles in bf16": (PLAIN, _bf16_product, ("low_precision_angles",)),
    "bf16 inv_freq buffer": (PLAIN, reference(PLAIN, rounding="bf16 buffer"), ("low_precision_angles",)),
    "base 10000 for 500000 (llama3)": (LLAMA3, reference(LLAMA3, inv_freq=lambda n, inv: rope_settings(
        {**LLAMA3, "rope_theta": 10000.0}).frequencies(n)[0]), ("wrong_base",)),
    "yarn factor missing": (YARN, reference(YARN, factor=lambda a: 1.0), ("attention_factor",)),
    "yarn factor squared": (YARN, reference(YARN, factor=lambda a: a * a), ("attention_factor",)),
    "last 16 rotated for the first": (NEOX, reference(NEOX, rotated="last"), ("rotated_slice",)),
    "head_dim instead of rotary_dim": (NEOX, _all_head_dim, ("rotary_dim",)),
    "head_dim in the exponent": (NEOX, reference(NEOX, inv_freq=_exponent_head_dim(NEOX)), ("head_dim_exponent",)),
    "proportional for partial": (NEOX, _proportional_instead_of_partial, ("partial_proportional",)),
    "partial for proportional": (PROPORTIONAL, _partial_instead_of_proportional, ("partial_proportional",)),
    "llama3 scaling dropped": (LLAMA3, reference(LLAMA3, inv_freq=lambda n, inv: pl.rope_frequencies(
        64, base=500000.0)), ("scaling_dropped",)),
    "yarn scaling dropped": (YARN, reference(YARN, inv_freq=lambda n, inv: pl.rope_frequencies(64, base=1e6)),
                             ("scaling_dropped",)),
    "llama3 bands at max_position_embeddings": (LLAMA3, reference(LLAMA3, inv_freq=_llama3_bands_at(131072)),
                                                ("llama3_bands",)),
    "longrope switched one token early": (LONGROPE, reference(LONGROPE, inv_freq=_longrope_switch(
        lambda n: n >= 4096)), ("longrope_switch",)),
    "longrope never switched": (LONGROPE, reference(LONGROPE, inv_freq=_longrope_switch(lambda n: False)),
                                ("longrope_switch",)),
    "mrope sections reversed": (MROPE, reference(MROPE, sections=(12, 12, 8)), ("section_order",)),
    "mrope axes (w, h, t)": (MROPE, reference(MROPE, axes_order=(2, 1, 0)), ("section_order",)),
    "no rotation": (PLAIN, lambda q, k, pos: (q.clone(), k.clone()), ("no_rotation",)),
    "deepseek rotates the first 16": (DEEPSEEK, reference({**DEEPSEEK, "rotated": "first"}), ("rotated_slice",)),
    # two bugs at once
    "half layout, clockwise": (PLAIN, reference(PLAIN, layout="half", positions=lambda p: -p),
                               ("layout", "clockwise")),
    "half layout, cache offset dropped": (PLAIN, reference(PLAIN, layout="half", positions=lambda p: p - p[:, :1]),
                                          ("layout", "restart_at_zero")),
    "1-based positions, keys twice": (PLAIN, reference(PLAIN, positions=lambda p: p + 1,
                                                       k_positions=lambda p: 2 * p + 1),
                                      ("position_plus_one", "double_rotation")),
    "yarn base 10000 and factor squared": (YARN, reference(YARN, inv_freq=lambda n, inv: rope_settings(
        {**YARN, "rope_theta": 10000.0}).frequencies(n)[0], factor=lambda a: a * a),
        ("wrong_base", "attention_factor")),
}


@pytest.mark.parametrize("name", GALLERY)
def test_gallery_entry_is_diagnosed_by_name(name):
    claim, fn, expected = GALLERY[name]
    report = diagnose_rope(fn, **claim_kwargs(claim))
    assert not report.ok and report.failed_probe is not None, report.text
    assert set(report.hypotheses) == set(expected), report.text
    assert report.residual <= 1 and report.verdict == ("convention" if expected == ("clockwise",) else "bug")
    assert "Diagnosis:" in report.text and report.text.count("\n") == 0  # one paragraph


def test_every_hypothesis_has_a_gallery_entry():
    """Here or in the independent gallery (tests/_rope_gallery.py)."""
    from _rope_gallery import GALLERY as INDEPENDENT

    named = {h for _, _, hs in GALLERY.values() for h in hs}
    named |= {h for e in INDEPENDENT if isinstance(e.expect, frozenset) for h in e.expect}
    assert named == set(HYPOTHESES)


def _single_entries():
    from _rope_gallery import GALLERY as INDEPENDENT, config

    here = [(n, lambda c=c, f=f: diagnose_rope(f, **claim_kwargs(c)), h) for n, (c, f, (h, *more)) in GALLERY.items()
            if not more]
    there = [(e.name, lambda e=e: diagnose_rope(e.fn, config(e.config) if isinstance(e.config, str) else e.config,
                                                **e.claim), next(iter(e.expect)))
             for e in INDEPENDENT if isinstance(e.expect, frozenset) and len(e.expect) == 1]
    return here + there


@pytest.mark.parametrize("name,run,hypothesis", _single_entries(), ids=[n for n, _, _ in _single_entries()])
def test_each_hypothesis_is_exposed_by_the_probe_the_module_names(name, run, hypothesis):
    """The table in rope_diagnose's docstring ("exposed by") is what both galleries' reports show."""
    report = run()
    failed = {p.name for p in report.probes if not p.passed}
    assert failed & set(HYPOTHESES[hypothesis].probe.split(" / ")), (hypothesis, failed)
    row = next(line for line in pl.rope_diagnose.__doc__.splitlines() if line.startswith(f"  {hypothesis} "))
    assert row.rstrip().endswith(HYPOTHESES[hypothesis].probe)


def test_probes_cover_shapes_offsets_batches_half_precision_gqa_and_lengths():
    report = diagnose_rope(reference(LLAMA3), config=LLAMA3)
    assert [p.name for p in report.probes] == ["start", "offset", "gqa", "batched", "bf16", "decode", "fp16",
                                               "at L0", "past L0", "far"]
    by = {p.name: p.what for p in report.probes}
    assert "(131066..131071)" in by["far"] and "bfloat16" in by["bf16"] and "float16" in by["fp16"]
    assert "(2044..2051)" in by["fp16"]  # across 2048, where float16 stops holding every integer
    assert "q (1, 4, 8, 64) k (1, 2, 8, 64)" in by["gqa"]  # k with fewer heads than q
    assert "positions 0..131071 checked, the context ends at 131071 (max_position_embeddings)" in report.text
    shapes = {p.what.split(", q ")[-1] for p in report.probes}
    assert len(shapes) >= 5  # several (batch, heads, seq) shapes


def test_device_argument_reaches_fn():
    seen = []

    def fn(q, k, pos):
        seen.append((q.device.type, pos.device.type))
        return reference(PLAIN)(q, k, pos)

    assert diagnose_rope(fn, **PLAIN, device="cpu").ok and set(seen) == {("cpu", "cpu")}


@pytest.mark.parametrize("name", ["half layout for interleaved", "interleaved layout for half (llama3)"])
def test_gallery_passes_once_the_bug_is_the_claim(name):
    """Control: the same function, claimed with the layout it really uses, is correct (the probes are not too strict)."""
    claim, fn, _ = GALLERY[name]
    other = "half" if "half layout" in name else "interleaved"
    assert diagnose_rope(fn, **claim_kwargs(claim), layout=other).ok


CORRECT = {"plain": PLAIN, "llama3": LLAMA3, "yarn": YARN, "longrope": LONGROPE, "partial (neox)": NEOX,
           "proportional": PROPORTIONAL, "mrope": MROPE, "deepseek shape": DEEPSEEK}


@pytest.mark.parametrize("name", CORRECT)
def test_the_library_itself_is_correct_under_every_claim(name):
    report = diagnose_rope(reference(CORRECT[name]), **claim_kwargs(CORRECT[name]))
    assert report.ok and report.verdict == "correct" and report.relative, report.text
    assert report.text.startswith("✓ Matches")


# ---------------------------------------------------------------- what the report says

def test_symptoms_come_first_and_name_the_error_shape():
    texts = {name: diagnose_rope(GALLERY[name][1], **claim_kwargs(GALLERY[name][0])) for name in
             ("clockwise", "1-based positions", "cache offset dropped", "yarn factor missing",
              "longrope never switched", "angles in bf16")}
    assert "zero at position 0" in texts["clockwise"].symptoms[0]
    assert "wrong already at position 0" in texts["1-based positions"].symptoms[0]
    assert "once they start past 0" in texts["cache offset dropped"].symptoms[0]
    assert "a constant factor" in texts["yarn factor missing"].symptoms[0]
    assert "right up to position 4095" in texts["longrope never switched"].symptoms[0]
    assert "bfloat16" in texts["angles in bf16"].symptoms[0]
    for report in texts.values():
        assert report.text.index("Symptoms:") < report.text.index("Diagnosis:")


def test_clockwise_is_a_convention_that_keeps_the_relative_property():
    report = diagnose_rope(GALLERY["clockwise"][1], **PLAIN)
    assert report.verdict == "convention" and report.relative and not report.ok
    assert "will not load checkpoints" in report.text and "depend only on n − m" in report.text


@pytest.mark.parametrize("name,relative", [("keys rotated twice", False), ("angles in bf16", True),
                                           ("half layout for interleaved", True), ("cache offset dropped", True)])
def test_the_relative_property_is_measured_on_every_implementation(name, relative):
    """Keys turned twice break m - n; a wrong layout or a dropped offset keep it (bf16 angles: only at large m)."""
    claim, fn, _ = GALLERY[name]
    assert diagnose_rope(fn, **claim_kwargs(claim)).relative is relative


def test_the_convention_is_worded_as_the_course_writes_it():
    """The score of query m and key n is q^T R_m^T R_n k = q^T R_{n-m} k (00_index's conventions table); the
    clockwise rotation gives R_{m-n}."""
    text = diagnose_rope(GALLERY["clockwise"][1], **PLAIN).text
    assert "turns with R_{m−n} where the reference's turns with R_m^T R_n = R_{n−m}" in text
    assert "n − m where the reference sees m − n" not in text


# ---------------------------------------------------------------- a pair layout the config does not fix

UNKNOWN = {"model_type": "my_lab_model", "hidden_size": 128, "num_attention_heads": 2, "max_position_embeddings": 8192,
           "rope_theta": 10000.0}


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_an_unknown_layout_is_read_off_fn_not_assumed(layout):
    report = diagnose_rope(reference(UNKNOWN, layout=layout), UNKNOWN)
    assert report.ok and report.layout == layout and report.layout_inferred, report.text
    assert f"fn implements the {layout} layout" in report.text and "model_type 'my_lab_model'" in report.text
    assert "check that the checkpoint was trained with it" in report.text


def test_a_bug_under_an_unknown_layout_is_named_without_blaming_the_layout():
    report = diagnose_rope(reference(UNKNOWN, layout="interleaved", positions=lambda p: p + 1), UNKNOWN)
    assert report.hypotheses == ("position_plus_one",) and report.layout == "interleaved", report.text
    assert "laid out" not in (report.explanation or "")


def test_kimi_k2_is_interleaved_through_its_architectures():
    """The issue's false bug: a correct interleaved Kimi K2 kernel told 'half instead of interleaved'. Its
    model_type is custom; architectures names transformers' DeepseekV3ForCausalLM, whose pairs are interleaved."""
    kimi = {"model_type": "kimi_k2", "architectures": ["DeepseekV3ForCausalLM"], "hidden_size": 7168,
            "num_attention_heads": 64, "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "max_position_embeddings": 262144,
            "rope_theta": 50000.0, "rope_scaling": {"type": "yarn", "factor": 64.0, "beta_fast": 1.0, "beta_slow": 1.0,
                                                   "mscale": 1.0, "mscale_all_dim": 1.0,
                                                   "original_max_position_embeddings": 4096}}
    assert pl.rope_config.pair_layout(kimi) == ("interleaved", "kimi_k2")
    report = diagnose_rope(reference(kimi), kimi)
    assert report.ok and not report.layout_inferred, report.text


# ---------------------------------------------------------------- MRoPE in both section styles

QWEN3_VL = {"model_type": "qwen3_vl_text", "head_dim": 128, "num_attention_heads": 2, "max_position_embeddings": 32768,
            "rope_parameters": {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [24, 20, 20],
                                "mrope_interleaved": True}}


def test_mrope_kernels_are_diagnosed_in_both_section_styles():
    from dataclasses import replace

    vl3 = rope_settings(QWEN3_VL)
    contiguous = _fn(layout="half", settings=replace(vl3, mrope_interleaved=False), r=128)
    found = diagnose_rope(contiguous, QWEN3_VL)  # Qwen2-VL's blocks on a Qwen3-VL model
    assert found.hypotheses == ("section_style",) and "contiguous MRoPE sections" in found.text, found.text
    assert diagnose_rope(_fn(layout="half", settings=vl3, r=128), QWEN3_VL).ok
    interleaved_pairs = diagnose_rope(_fn(layout="interleaved", settings=vl3, r=128), QWEN3_VL)
    assert interleaved_pairs.hypotheses == ("layout",)  # the wrong pair layout inside MRoPE: named, no raise


def test_sections_interleaving_cannot_hold_are_the_kernels_bug_not_an_error():
    """Qwen2-VL's (16, 24, 24) cannot be interleaved (axis 1 would need pairs past 64): a kernel that tries stops
    at the last pair, as slicing does; the doctor names the style instead of raising."""
    def kernel(q, k, coords):
        s = rope_settings(MROPE)
        axes = torch.zeros(32, dtype=torch.long)
        axes[1:3 * 12:3], axes[2:3 * 12:3] = 1, 2
        theta = s.frequencies()[0].double()
        angles = (coords.index_select(-1, axes).double() * theta)[:, None]
        return tuple(pl.rotate_pairs(x.double(), angles.cos(), angles.sin(), "half").to(x.dtype) for x in (q, k))

    report = diagnose_rope(kernel, MROPE)
    assert report.hypotheses == ("section_style",), report.text


# ---------------------------------------------------------------- the five bugs the issue found unexplained

@pytest.mark.parametrize("name,words", [
    ("YaRN mscale on the queries only", "on q only"),
    ("dynamic NTK run as PI", "linear position interpolation"),
    ("dynamic NTK frozen at max_len x factor", "computed once, for a length of"),
    ("GPT-OSS ramp rounded", "ramp ends rounded to whole pairs (truncate ignored"),
    ("cos/sin cache cast by model.to()", "cos and sin tables stored in bfloat16"),
])
def test_the_issues_unexplained_bugs_are_named_in_words(name, words):
    from _rope_gallery import GALLERY as INDEPENDENT, config

    entry = next(e for e in INDEPENDENT if e.name == name)
    report = diagnose_rope(entry.fn, config(entry.config), **entry.claim)
    assert report.verdict == "bug" and words in report.explanation, report.text


def test_the_nearest_cause_never_claims_more_than_it_explains():
    """When nothing reproduces fn, the report names the single candidate that leaves the smallest share of fn's
    squared difference from the reference, and that share is what it really leaves (recomputed here with
    apply_rope on the same probes, not with the doctor's code)."""
    from posenc_lib.rope_diagnose import make_probes
    from posenc_lib.rope_diagnose.claim import build_claim

    def fn(q, k, pos):  # the half layout, plus a distortion outside every class
        rq, rk = reference(PLAIN, layout="half")(q, k, pos)
        return rq + 0.05 * torch.sin(3 * q), rk

    report = diagnose_rope(fn, **PLAIN)
    words, share = report.closest
    assert report.verdict == "unexplained" and words == "pairs laid out half instead of interleaved"
    claim = build_claim(None, layer_type=None, head_dim=32, layout=None, base=None, inv_freq=None,
                        attention_factor=None, rotary_dim=None, rotated="first", sections=None,
                        section_style="contiguous", max_positions=None)
    sums = {"half": 0.0, "interleaved": 0.0}
    for probe in make_probes(claim):
        got = fn(probe.q, probe.k, probe.positions)
        for layout in sums:
            for x, y in zip((probe.q, probe.k), got):
                want = pl.apply_rope(x.double(), probe.positions, layout=layout)
                sums[layout] += float(((y.double() - want) ** 2).sum())
    assert share == pytest.approx(sums["half"] / sums["interleaved"], rel=1e-3)
    assert f"still leaves {share:.0%}" in report.text and "not the diagnosis" in report.text


def test_max_positions_caps_the_probes_and_is_checked():
    report = diagnose_rope(reference(LLAMA3), LLAMA3, max_positions=16384)
    assert report.ok and max(p.what.count("16383") for p in report.probes) == 1
    with pytest.raises(ValueError, match="max_positions must be an integer >= 64"):
        diagnose_rope(reference(LLAMA3), LLAMA3, max_positions=10)


def test_scores_equal_but_features_reordered_is_equivalent_not_correct():
    """Writing the rotated pairs back in another order (same for q and k) keeps every score."""
    perm = torch.randperm(32, generator=torch.Generator().manual_seed(0))
    fn = lambda q, k, pos: tuple(t[..., perm] for t in reference(PLAIN)(q, k, pos))  # noqa: E731
    report = diagnose_rope(fn, **PLAIN)
    assert report.verdict == "equivalent" and not report.ok and "scores q·k are the reference's" in report.text


def test_an_unexplained_mismatch_is_not_forced_onto_a_hypothesis():
    fn = lambda q, k, pos: (q + 0.01 * torch.sin(3 * q), k)  # noqa: E731
    report = diagnose_rope(fn, **PLAIN)
    assert report.verdict == "unexplained" and report.hypotheses == () and "No named hypothesis" in report.text


# ---------------------------------------------------------------- bad functions and bad claims

def _raises(q, k, pos):
    raise RuntimeError("index out of range in self")


@pytest.mark.parametrize("fn,match", [
    (_raises, r"fn raised RuntimeError on the probe 'start'.*index out of range"),
    (lambda q, k, pos: (q[..., :16], k), r"fn returned q of shape \(1, 2, 12, 16\) for q of shape \(1, 2, 12, 32\)"),
    (lambda q, k, pos: (q * float("nan"), k), r"fn returned q with NaN"),
    (lambda q, k, pos: q, r"fn must return \(q, k\)"),
    (lambda q, k, pos: (q.long(), k), r"fn returned q of dtype torch.int64.*floating point"),
    (lambda q, k, pos: (q, k * float("inf")), r"fn returned k with NaN or infinite values"),
])
def test_bad_functions_are_one_line_findings_not_exceptions(fn, match):
    report = diagnose_rope(fn, **PLAIN)
    assert report.verdict == "broken" and not report.ok and report.hypotheses == ()
    assert re.search(match, report.text) and report.text.count("\n") == 0 and "Nothing else was checked" in report.text


def test_a_function_broken_only_for_bf16_is_not_called_correct():
    def fn(q, k, pos):
        if q.dtype == torch.bfloat16:
            raise TypeError("bf16 not supported")
        return reference(PLAIN)(q, k, pos)

    report = diagnose_rope(fn, **PLAIN)
    assert report.verdict == "broken" and report.failed_probe == "bf16"
    assert re.search(r"probe 'bf16'.*bfloat16.*bf16 not supported", report.text)
    assert "matched the reference on 4 of 4 probes" in report.text  # the probes before it: start, offset, gqa, batched


def test_a_stub_is_not_attempted_yet():
    """NotImplementedError passes through: the exercise checkers say "not attempted yet" for a stub."""
    def stub(q, k, pos):
        raise NotImplementedError

    with pytest.raises(NotImplementedError):
        diagnose_rope(stub, **PLAIN)


@pytest.mark.parametrize("kw,match", [
    (dict(config={"head_dim": 32, "rope_scaling": {"rope_type": "llama9"}}), "rope_type must be one of"),
    (dict(config={"head_dim": 32, "rope_scaling": {"rope_type": "llama3", "factor": 8.0}}),
     "needs the key 'low_freq_factor'"),
    (dict(config={"rope_theta": 10000.0}), "config needs a head dimension"),
    (dict(config={"head_dim": 32, "rope_theta": -1}), "rope_theta must be"),
    (dict(config=LLAMA3, base=10000.0), "give either config or base"),
    (dict(head_dim=31), "head_dim must be even"),
    (dict(head_dim=32, rotary_dim=48), "rotary_dim must be at most head_dim"),
    (dict(head_dim=32, layout="zigzag"), "layout must be one of"),
    (dict(head_dim=32, rotated="middle"), "rotated must be one of"),
    (dict(head_dim=32, rotary_dim=32, sections=(4, 4)), r"sections must sum to rotary_dim / 2 = 16"),
    (dict(config=NEOX, head_dim=8), "head_dim must be at least the config's rotated features 16"),
])
def test_bad_claims_raise_value_errors_naming_the_field(kw, match):
    with pytest.raises(ValueError, match=match):
        diagnose_rope(reference(PLAIN), **kw)


def test_fn_must_be_callable():
    with pytest.raises(ValueError, match="fn must be callable"):
        diagnose_rope("apply_rope", **PLAIN)


# ---------------------------------------------------------------- the adapters

def test_one_tensor_adapter_checks_a_cs336_style_run_rope():
    """Stanford CS336's signature run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions),
    written here as a student would: cos/sin tables for max_seq_len, indexed by the positions."""

    def run_rope(d_k, theta, max_seq_len, in_query_or_key, token_positions):
        inv = 1.0 / theta ** (torch.arange(0, d_k, 2).float() / d_k)
        table = torch.arange(max_seq_len).float()[:, None] * inv  # (max_seq_len, d_k / 2)
        cos, sin = table.cos()[token_positions], table.sin()[token_positions]
        x = in_query_or_key.float()
        even, odd = x[..., 0::2], x[..., 1::2]
        out = torch.stack((even * cos - odd * sin, even * sin + odd * cos), -1).flatten(-2)
        return out.to(in_query_or_key.dtype)

    fn = from_one_tensor(lambda x, pos: run_rope(32, 10000.0, 2048, x, pos))
    assert diagnose_rope(fn, **PLAIN, max_positions=2048).ok  # its tables hold 2048 positions
    beyond = diagnose_rope(fn, **PLAIN)  # no context claimed: the fp16 probe crosses 2048 and fn raises, a finding
    assert beyond.verdict == "broken" and "IndexError on the probe 'fp16'" in beyond.text
    buggy = from_one_tensor(lambda x, pos: run_rope(32, 10000.0, 4096, x, pos + 1))
    assert diagnose_rope(buggy, **PLAIN, max_positions=2048).hypotheses == ("position_plus_one",)


def test_engine_adapter_checks_a_flattened_forward():
    """An inference engine's forward(positions, query, key) on (tokens, heads * head_dim), GPT-NeoX style,
    with a cos/sin cache indexed by position (the layout vLLM's RotaryEmbedding uses)."""
    head, max_len = 32, 2048
    inv = 1.0 / 10000.0 ** (torch.arange(0, head, 2).float() / head)
    angles = torch.arange(max_len).float()[:, None] * inv
    cache = torch.cat((angles.cos(), angles.sin()), -1)  # (max_len, head)

    def forward(positions, query, key, neox=True):
        cos, sin = cache[positions].chunk(2, dim=-1)  # (tokens, head / 2)

        def rot(x):
            x = x.view(x.shape[0], -1, head)
            a, b = (x[..., : head // 2], x[..., head // 2:]) if neox else (x[..., 0::2], x[..., 1::2])
            c, s = cos[:, None], sin[:, None]
            if neox:
                return torch.cat((a * c - b * s, b * c + a * s), -1).flatten(1)
            return torch.stack((a * c - b * s, b * c + a * s), -1).flatten(1)

        return rot(query), rot(key)

    assert diagnose_rope(from_engine(forward), head_dim=head, layout="half", max_positions=max_len).ok
    wrong = diagnose_rope(from_engine(lambda p, q, k: forward(p, q, k, neox=False)), head_dim=head, layout="half",
                          max_positions=max_len)
    assert wrong.hypotheses == ("layout",)


# ---------------------------------------------------------------- real implementations (offline, tiny configs)

import transformers  # noqa: E402  (locked in requirements/test.txt: a missing one is an error, not a skip)


def _llama_config(rope_parameters, max_position):
    return {"model_type": "llama", "hidden_size": 128, "num_attention_heads": 2, "num_key_value_heads": 2,
            "max_position_embeddings": max_position, "rope_parameters": rope_parameters}


LLAMA_TYPES = {
    "default": ({"rope_type": "default", "rope_theta": 500000.0}, 8192),
    "llama3": ({"rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0,
                "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}, 131072),
    "yarn": ({"rope_type": "yarn", "rope_theta": 1e6, "factor": 4.0, "original_max_position_embeddings": 32768},
             32768),
    "longrope": ({"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 4096,
                  "short_factor": [1.0 + 0.1 * j for j in range(32)],
                  "long_factor": [1.0 + 2.0 * j for j in range(32)]}, 131072),
}


@pytest.mark.crosscheck
@pytest.mark.parametrize("rope_type", LLAMA_TYPES)
def test_transformers_llama_rope_is_correct(rope_type):
    """transformers' own LlamaRotaryEmbedding + apply_rotary_pos_emb, built offline from a tiny config."""
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb

    params, max_position = LLAMA_TYPES[rope_type]
    config = _llama_config(params, max_position)
    rotary = LlamaRotaryEmbedding(LlamaConfig(**{k: v for k, v in config.items() if k != "model_type"}))
    report = diagnose_rope(from_hf(apply_rotary_pos_emb, rotary), config)
    assert report.ok and report.relative, report.text
    probes = {p.name for p in report.probes}
    assert {"start", "offset", "batched", "decode", "bf16"} <= probes
    assert rope_type == "default" or "far" in probes
    assert rope_type in ("default", "yarn") or {"at L0", "past L0"} <= probes  # yarn's L0 is its whole context
    # the same transformers code under the other layout is diagnosed, not passed
    assert diagnose_rope(from_hf(apply_rotary_pos_emb, rotary), config, layout="interleaved").hypotheses == ("layout",)


@pytest.mark.crosscheck
def test_transformers_gpt_neox_partial_rotary_is_correct():
    """GPT-NeoX (partial_rotary_factor 0.25): its apply_rotary_pos_emb turns the first r features, half layout."""
    from transformers import GPTNeoXConfig
    from transformers.models.gpt_neox.modeling_gpt_neox import GPTNeoXRotaryEmbedding, apply_rotary_pos_emb

    rotary = GPTNeoXRotaryEmbedding(GPTNeoXConfig(
        hidden_size=128, num_attention_heads=2, max_position_embeddings=2048,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.25}))
    fn = from_hf(apply_rotary_pos_emb, rotary)
    report = diagnose_rope(fn, NEOX)
    assert report.ok and report.relative, report.text
    assert diagnose_rope(fn, NEOX, rotated="last").hypotheses == ("rotated_slice",)
    assert diagnose_rope(fn, {**NEOX, "partial_rotary_factor": 0.5}).hypotheses == ("rotary_dim",)  # 32 claimed


@pytest.mark.crosscheck
def test_transformers_qwen2_vl_mrope_is_correct_against_apply_rope_nd():
    """Qwen2-VL's multimodal rotary, checked against apply_rope_nd's contiguous sections, and from its config."""
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig
    from transformers.models.qwen2_vl.modeling_qwen2_vl import Qwen2VLRotaryEmbedding, apply_rotary_pos_emb

    params = {"rope_type": "default", "rope_theta": 1e6, "mrope_section": [16, 24, 24]}
    rotary = Qwen2VLRotaryEmbedding(Qwen2VLTextConfig(hidden_size=256, num_attention_heads=2, rope_parameters=params))
    fn = from_hf(apply_rotary_pos_emb, rotary)
    report = diagnose_rope(fn, sections=(16, 24, 24), base=1e6, layout="half")
    assert report.ok and report.relative, report.text
    config = {"model_type": "qwen2_vl", "hidden_size": 256, "num_attention_heads": 2, "rope_theta": 1e6,
              "max_position_embeddings": 32768, "rope_scaling": {"type": "mrope", "mrope_section": [16, 24, 24]}}
    assert diagnose_rope(fn, config).ok
    wrong = diagnose_rope(fn, sections=(24, 24, 16), base=1e6, layout="half")
    assert wrong.hypotheses == ("section_order",)


@pytest.mark.crosscheck
@pytest.mark.parametrize("rotary_dim", [32, 16])
def test_rotary_embedding_torch_is_correct(rotary_dim):
    """lucidrains' rotary-embedding-torch (PyPI): interleaved pairs, partial when dim < head_dim."""
    import rotary_embedding_torch as ret  # locked in requirements/test.txt
    rotary = ret.RotaryEmbedding(dim=rotary_dim)

    def fn(q, k, positions):
        freqs = rotary(positions)[:, None]  # (batch, 1, seq, rotary_dim)
        return ret.apply_rotary_emb(freqs, q), ret.apply_rotary_emb(freqs, k)

    report = diagnose_rope(fn, head_dim=32, rotary_dim=rotary_dim)
    assert report.ok and report.relative, report.text
    assert diagnose_rope(fn, head_dim=32, rotary_dim=rotary_dim, base=500000.0).hypotheses == ("wrong_base",)
