"""diagnose_rope against a gallery of RoPE implementations written independently of posenc_lib
(tests/_rope_gallery.py), each modelled on a public bug report: no wrong one passes, no correct one fails,
nothing raises, at least 85% of the wrong ones are named by class, and every run stays under a few
CPU-seconds. diagnose_model checks transformers' own models (tiny configs, built offline) in one call."""
import re
import time

import pytest
import torch

from _rope_gallery import CORRECT, GALLERY, config
from posenc_lib.rope_diagnose import HYPOTHESES, diagnose_model, diagnose_rope

ALL = GALLERY + CORRECT


def _diagnose(entry):
    cfg = config(entry.config) if isinstance(entry.config, str) else entry.config
    start = time.process_time()
    report = diagnose_rope(entry.fn, cfg, **entry.claim)
    return report, time.process_time() - start


def _outcome(report):
    if report.ok:
        return "correct"
    if report.verdict == "broken":
        return "broken"
    if report.verdict in ("bug", "convention"):
        return frozenset(report.hypotheses)
    return "unexplained"


@pytest.mark.parametrize("entry", ALL, ids=[e.name for e in ALL])
def test_each_entry_gets_its_verdict(entry):
    report, seconds = _diagnose(entry)  # never raises on fn
    assert _outcome(report) == entry.expect, report.text
    assert report.text.count("\n") == 0 and report.checked.startswith("positions 0..")
    assert seconds < 5.0, f"{seconds:.2f} CPU-seconds"


def test_the_gallery_as_a_whole():
    """The issue's bar: >= 30 wrong and >= 8 correct implementations; 0 false correct, 0 false bug, 0 raised,
    >= 85% of the wrong ones named by class; every entry cites a public report (engine, issue or PR)."""
    wrong = [e for e in ALL if e.expect != "correct"]
    right = [e for e in ALL if e.expect == "correct"]
    assert len(wrong) >= 30 and len(right) >= 8
    outcomes = {e.name: _outcome(_diagnose(e)[0]) for e in ALL}
    assert not [e.name for e in wrong if outcomes[e.name] == "correct"]  # no wrong one passes
    assert not [e.name for e in right if outcomes[e.name] != "correct"]  # no correct one fails
    named = [e.name for e in wrong if isinstance(e.expect, frozenset) and outcomes[e.name] == e.expect]
    assert len(named) / len(wrong) >= 0.85, (len(named), len(wrong))
    for e in ALL:
        assert re.search(r"[\w.-]+/[\w.-]+ (PR )?#\d+", e.report), e.report
    assert {h for e in wrong if isinstance(e.expect, frozenset) for h in e.expect} <= set(HYPOTHESES)


def test_a_crash_is_one_line_and_says_where():
    entry = next(e for e in GALLERY if e.expect == "broken" and "GQA" in e.name)
    report, _ = _diagnose(entry)
    assert report.verdict == "broken" and report.failed_probe == "gqa" and not report.ok
    assert report.text.startswith("✗ fn raised RuntimeError on the probe 'gqa'") and "Nothing else" in report.text


def test_an_overflow_to_inf_is_a_finding_not_an_exception():
    """float16 angles past 65504 turn inf (Megatron-LM #535's class): the probe near the context's end says so."""
    entry = next(e for e in GALLERY if e.name == "fp16 angles past 65504")
    report, _ = _diagnose(entry)
    assert report.verdict == "broken" and report.failed_probe == "far" and "NaN or infinite" in report.text


def test_an_engine_cache_of_exactly_the_context_is_not_probed_past_it():
    """The issue's IndexError: a correct engine holding max_position_embeddings positions. The far probe ends
    at the last of them, the report names the range, and a smaller cache gets max_positions=."""
    entry = next(e for e in CORRECT if "131072-position cache" in e.name)
    report, _ = _diagnose(entry)
    assert report.ok and "positions 0..131071 checked" in report.text and "max_position_embeddings" in report.text
    from _rope_gallery import _engine

    small = _engine("llama3.2-3b", 4096)
    assert diagnose_rope(small, config("llama3.2-3b")).verdict == "broken"  # its own limit: a finding
    capped = diagnose_rope(small, config("llama3.2-3b"), max_positions=4096)
    assert capped.ok and "positions 0..4095 checked" in capped.text and "max_positions = 4096" in capped.text


# ---------------------------------------------------------------- transformers' own models, one call each

import transformers  # noqa: E402  (locked in requirements/test.txt)


def _tiny(model_type, **kw):
    from transformers import AutoConfig, AutoModelForCausalLM

    cfg = AutoConfig.for_model(model_type, hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, vocab_size=32, **kw)
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(cfg)


@pytest.mark.crosscheck
@pytest.mark.parametrize("model_type,kw,kinds", [
    ("llama", dict(max_position_embeddings=4096, rope_parameters={
        "rope_type": "llama3", "rope_theta": 500000.0, "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 512}), [None]),
    ("gemma3_text", dict(head_dim=16, max_position_embeddings=4096, sliding_window=64, layer_types=[
        "sliding_attention", "full_attention"], rope_parameters={
        "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
        "full_attention": {"rope_type": "linear", "factor": 8.0, "rope_theta": 1e6}}),
     ["sliding_attention", "full_attention"]),
    ("gpt_oss", dict(head_dim=16, max_position_embeddings=8192, num_local_experts=2, num_experts_per_tok=1,
                     rope_parameters={"rope_type": "yarn", "rope_theta": 150000.0, "factor": 4.0, "beta_fast": 32.0,
                                      "beta_slow": 1.0, "truncate": False, "original_max_position_embeddings": 2048}),
     [None]),
    ("qwen3_next", dict(head_dim=32, max_position_embeddings=4096, num_experts=2, num_experts_per_tok=1,
                        moe_intermediate_size=32, shared_expert_intermediate_size=32, linear_num_key_heads=2,
                        linear_num_value_heads=2, linear_key_head_dim=8, linear_value_head_dim=8,
                        layer_types=["linear_attention", "full_attention"]), [None]),
])
def test_diagnose_model_checks_every_rope_of_a_transformers_model(model_type, kw, kinds):
    model = _tiny(model_type, **kw)
    found = diagnose_model(model)
    assert list(found.reports) == kinds and found.ok, found.text
    assert all(r.ok and r.relative for r in found.reports.values())


@pytest.mark.crosscheck
def test_diagnose_model_says_deepseeks_written_back_pairs_are_equivalent():
    """transformers' DeepSeek-V3 turns interleaved pairs and writes them back de-interleaved: every score is the
    reference's, the features are not (the 'equivalent' verdict, not 'correct' and not a bug)."""
    model = _tiny("deepseek_v3", qk_rope_head_dim=16, qk_nope_head_dim=16, v_head_dim=16, kv_lora_rank=16,
                  q_lora_rank=16, n_routed_experts=2, num_experts_per_tok=1, moe_intermediate_size=32,
                  first_k_dense_replace=2, max_position_embeddings=4096)
    (report,) = diagnose_model(model).reports.values()
    assert report.verdict == "equivalent" and report.relative, report.text


def test_diagnose_model_refuses_what_is_not_a_transformers_model():
    with pytest.raises(ValueError, match="model must be a transformers model"):
        diagnose_model(torch.nn.Linear(2, 2))
