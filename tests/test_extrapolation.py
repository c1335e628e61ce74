"""The extrapolation experiment (posenc_lib.experiments.extrapolation): task, evaluation, quick run."""
import importlib
import json
import resource
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from posenc_lib.experiments import extrapolation as ex
from posenc_lib.model import POSITIONAL_METHODS
from posenc_lib.scaling import SCALINGS

ROOT = Path(__file__).resolve().parents[1]


def test_grammar_sequences_follow_the_table_where_marked():
    table = ex.grammar_table(5, torch.Generator().manual_seed(0))
    x, ruled = ex.grammar_sequences(4, 40, table, 0.3, torch.Generator().manual_seed(1))
    assert x.shape == ruled.shape == (4, 40) and not ruled[:, :2].any()
    b, t = ruled.nonzero(as_tuple=True)
    assert torch.equal(x[b, t], table[x[b, t - 2], x[b, t - 1]])
    assert 0.6 < ruled[:, 2:].float().mean() < 0.8  # about 1 - noise


def test_grammar_sequences_are_deterministic():
    table = ex.grammar_table(8, torch.Generator().manual_seed(0))
    a = ex.grammar_sequences(2, 16, table, 0.25, torch.Generator().manual_seed(3))
    b = ex.grammar_sequences(2, 16, table, 0.25, torch.Generator().manual_seed(3))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_token_scores_align_predictions_with_targets():
    """Logits at position t-1 predict x_t; targets start at t = 2."""
    tokens = torch.tensor([[0, 1, 2, 3]])
    logits = torch.nn.functional.one_hot(torch.tensor([[1, 2, 3, 0]]), 4).float() * 10  # predicts tokens[t+1]
    correct, loss = ex.token_scores(logits, tokens)
    assert correct.tolist() == [[True, True]] and loss.shape == (1, 2)


def test_sliding_window_scores_every_token_once():
    """With an oracle-free check: the number of scored tokens equals length - 2 per chunk."""
    cfg = ex.ExperimentConfig(**ex.QUICK)
    model = ex.build_model("alibi", cfg).eval()
    table = ex.grammar_table(cfg.vocab_size, torch.Generator().manual_seed(0))
    seqs, ruled = ex.grammar_sequences(2, 256, table, cfg.noise, torch.Generator().manual_seed(0))
    calls = []
    real = ex._summary
    try:
        ex._summary = lambda c, l, r: calls.append(c.numel()) or real(c, l, r)
        ex.evaluate_sliding(model, seqs, ruled, 256, 64, 16)
        ex.evaluate_nonoverlapping(model, seqs, ruled, 256)
    finally:
        ex._summary = real
    assert calls == [2 * 254, 2 * 254]


def test_sliding_window_at_training_length_equals_nonoverlapping():
    cfg = ex.ExperimentConfig(**ex.QUICK)
    model = ex.build_model("rope", cfg).eval()
    table = ex.grammar_table(cfg.vocab_size, torch.Generator().manual_seed(0))
    seqs, ruled = ex.grammar_sequences(2, 128, table, cfg.noise, torch.Generator().manual_seed(0))
    assert ex.evaluate_sliding(model, seqs, ruled, 64, 64, 16) == ex.evaluate_nonoverlapping(model, seqs, ruled, 64)


def _child_cpu_seconds() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def test_quick_mode_runs_writes_json_and_png_fast(tmp_path):
    """The whole pipeline (train, evaluate, JSON, figure) in quick mode, in under 30 s of CPU.

    CPU time, not wall time: on a shared machine the wall clock measures the neighbours.
    (Most of it is importing torch, matplotlib and the optimiser's dependencies.)
    """
    cpu0 = _child_cpu_seconds()
    proc = subprocess.run([sys.executable, "-m", "posenc_lib.experiments.extrapolation", "--quick", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    cpu = _child_cpu_seconds() - cpu0
    assert proc.returncode == 0, proc.stderr
    res = json.loads((tmp_path / "extrapolation.json").read_text())
    assert cpu < 30, f"quick mode used {cpu:.1f} s of CPU"
    assert set(res["methods"]) == set(ex.ExperimentConfig().methods) | {"rope+linear", "rope+ntk", "rope+yarn"}
    assert res["methods"]["learned"]["nonoverlapping"]["128"] is None  # the table has 64 rows
    assert set(res["methods"]["rope"]["sliding_window"]) == {"64", "128", "256", "512"}
    assert res["config"]["steps"] == ex.QUICK["steps"] and res["wall_time_s"] > 0
    png = (tmp_path / "extrapolation.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("argv", [["--quick"], ["--quick", "--results", "r.json"], ["--quick", "--figure", "f.png"]])
def test_quick_mode_refuses_to_overwrite_committed_results(argv, monkeypatch):
    monkeypatch.setattr(ex, "run", lambda cfg: pytest.fail("ran the experiment"))
    with pytest.raises(SystemExit):
        ex.main(argv)


def _committed() -> dict:
    src = ROOT / "results" / "extrapolation.json"
    if not src.exists():
        pytest.skip("results/extrapolation.json not generated yet")
    return json.loads(src.read_text())


@pytest.mark.parametrize("name", ["extrapolation", "cope_counting"])
@pytest.mark.parametrize("argv,json_at,png_at", [
    ([], "results/{}.json", "images/{}.png"),  # relative to the working directory
    (["--out", "o"], "o/{}.json", "o/{}.png"),
    (["--out", "o", "--figure", "f/x.png"], "o/{}.json", "f/x.png"),
    (["--results", "r/x.json", "--figure", "f/x.png"], "r/x.json", "f/x.png"),
])
def test_main_writes_where_it_is_told(name, argv, json_at, png_at, tmp_path, monkeypatch):
    """Every experiment (its CLI is experiments/_cli.py): output paths come from the options or the
    working directory, never from the package's location."""
    module = importlib.import_module(f"posenc_lib.experiments.{name}")
    results = json.loads((ROOT / "results" / f"{name}.json").read_text())
    monkeypatch.setattr(module, "run", lambda cfg: results)  # the file handling, not the training
    monkeypatch.chdir(tmp_path)
    assert module.main(argv) == 0
    json_at, png_at = json_at.format(name), png_at.format(name)
    written = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*") if p.is_file())
    assert written == sorted([json_at, png_at])
    assert json.loads((tmp_path / json_at).read_text()) == results
    assert (tmp_path / png_at).read_bytes()[:4] == b"\x89PNG"
    assert not module.RESULTS.is_absolute() and not module.FIGURE.is_absolute()


def test_labels_and_colours_come_from_the_model_registry():
    for m, spec in POSITIONAL_METHODS.items():
        assert ex.LABELS[m] == spec.label and ex.COLORS[m] == spec.color
    assert set(ex.SCALING_STYLES) <= set(SCALINGS)  # "rope+<scaling>" curves are named after a real scaling
    assert ex.LABELS["rope+yarn"] == "RoPE + YaRN" and ex.LABELS["rope+linear"] == "RoPE + PI"
    assert set(ex.LABELS) == set(ex.COLORS) >= {f"rope+{s}" for s in ex.ExperimentConfig().scalings}
    assert len(set(ex.LABELS.values())) == len(set(ex.COLORS.values())) == len(ex.COLORS)  # one curve, one style
    fig = ex.draw(_committed())
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert legend == [POSITIONAL_METHODS[m].label for m in ex.ExperimentConfig().methods]
    assert set(ex.ExperimentConfig().methods) <= set(POSITIONAL_METHODS)


def test_plot_redraws_from_a_results_file(tmp_path):
    """`make images` path: the committed JSON redraws without training."""
    src = ROOT / "results" / "extrapolation.json"
    if not src.exists():
        pytest.skip("results/extrapolation.json not generated yet")
    out = ex.plot(src, tmp_path / "fig.png")
    assert out.read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("name, methods", [
    ("extrapolation.json", list(ex.ExperimentConfig().methods)),  # chapter 7
    ("irope.json", ["none", "rope", "irope"]),  # chapter 8: python -m ... --methods none,rope,irope
])
def test_committed_results_come_from_the_default_config(name, methods):
    res = json.loads((ROOT / "results" / name).read_text())
    scalings = ["linear", "ntk", "yarn"]
    assert res["config"] == {**ex.asdict(ex.ExperimentConfig()), "eval_multiples": [1, 2, 4, 8],
                             "methods": methods, "scalings": scalings}
    assert set(res["methods"]) == set(methods) | {f"rope+{s}" for s in scalings}
    assert res["cpu_time_s"] <= 600 and res["wall_time_s"] > 0  # CPU: the neighbours do not count


def test_methods_option_picks_registry_entries(monkeypatch, tmp_path):
    """--methods trains the named methods only (chapter 8's results/irope.json: none, rope, irope)."""
    seen = []
    results = _committed()
    monkeypatch.setattr(ex, "run", lambda cfg: seen.append(cfg.methods) or results)
    assert ex.main(["--methods", "none,rope,irope", "--out", str(tmp_path)]) == 0
    assert seen == [("none", "rope", "irope")]
    with pytest.raises(ValueError, match=r"--methods must be one of .*got 'ropee'"):
        ex.main(["--methods", "rope,ropee", "--out", str(tmp_path)])
