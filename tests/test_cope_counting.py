"""The CoPE counting experiment (posenc_lib.experiments.cope_counting): task, determinism, committed results."""
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from posenc_lib.experiments import cope_counting as cc
from posenc_lib.experiments import _training

ROOT = Path(__file__).resolve().parents[1]


def test_flip_flop_reads_repeat_the_last_write():
    tokens, read = cc.flip_flop(16, 40, (0.2, 0.3, 0.5), torch.Generator().manual_seed(0))
    assert tokens.shape == read.shape == (16, 40)
    for seq, r in zip(tokens.tolist(), read.tolist()):
        assert seq[0] == cc.W and not any(r[0::2])  # starts with a write; only bits are scored
        last = None
        for k in range(0, 40, 2):
            op, bit = seq[k], seq[k + 1]
            assert op in (cc.W, cc.R, cc.I) and bit in (cc.ZERO, cc.ONE)
            if op == cc.W:
                last = bit
            assert r[k + 1] == (op == cc.R)
            if op == cc.R:
                assert bit == last


def test_flip_flop_follows_its_mix_and_generator():
    gen = lambda: torch.Generator().manual_seed(5)  # noqa: E731
    a, b = cc.flip_flop(64, 200, (0.1, 0.2, 0.7), gen()), cc.flip_flop(64, 200, (0.1, 0.2, 0.7), gen())
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    ops = a[0][:, 2::2]  # the first op is always a write
    for op, p in ((cc.W, 0.1), (cc.R, 0.2), (cc.I, 0.7)):
        assert abs((ops == op).float().mean().item() - p) < 0.03


def test_read_bits_are_scored_from_the_r_position():
    """The bit after an "r" is predicted from the "r" position (the shared masked_scores)."""
    tokens = torch.tensor([[cc.W, cc.ONE, cc.R, cc.ONE, cc.I, cc.ZERO, cc.R, cc.ONE]])
    read = torch.tensor([[False, False, False, True, False, False, False, True]])
    logits = torch.full((1, 8, 5), -10.0)
    logits[0, 2, cc.ONE] = 10.0  # right at the first read
    logits[0, 6, cc.ZERO] = 10.0  # wrong at the second
    correct, loss = _training.masked_scores(logits, tokens, read)
    assert correct.tolist() == [True, False] and loss[0] < 1e-3 < loss[1]


def test_summarize_gives_mean_min_max_over_seeds_and_the_fewest_reads():
    per_seed = [{"dense": {"64": a}, "sparse": {"64": 1.0}, "reads": {"dense": {"64": n}, "sparse": {"64": 9}}}
                for a, n in ((0.5, 30), (0.7, 28), (0.9, 31))]
    assert cc.summarize(per_seed) == {"dense": {"64": {"mean": 0.7, "min": 0.5, "max": 0.9, "n": 28}},
                                      "sparse": {"64": {"mean": 1.0, "min": 1.0, "max": 1.0, "n": 9}}}


def test_separation_counts_the_gap_in_evaluation_noise():
    res = {"methods": {"a": {"dense": {"64": {"min": 0.9, "max": 0.95, "n": 400}}},
                       "b": {"dense": {"64": {"min": 0.7, "max": 0.8, "n": 100}}}}}
    # worst a 0.9, best b 0.8, n = 100 (the fewer): 0.1 / sqrt(2 * 0.85 * 0.15 / 100) = 1.98: thin
    assert cc.separation(res, "a", "b", "dense", 64) == pytest.approx(0.1 / (2 * 0.85 * 0.15 / 100) ** 0.5)
    assert cc.separation(res, "b", "a", "dense", 64) < 0


def _quick(seeds) -> dict:
    cfg = cc.ExperimentConfig(**{**cc.QUICK, "seeds": seeds, "eval_multiples": (1, 2)})
    res = cc.run(cfg, log=lambda s: None)
    return {m: e["seeds"] for m, e in res["methods"].items()}


def test_the_run_is_deterministic_per_seed():
    a, b, c = _quick((0,)), _quick((0,)), _quick((1,))
    assert a == b
    assert a != c


def test_quick_mode_writes_json_and_png(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "posenc_lib.experiments.cope_counting", "--quick", "--out",
                           str(tmp_path)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    res = json.loads((tmp_path / "cope_counting.json").read_text())
    assert list(res["methods"]) == ["none", "rope", "cope"]
    assert all(len(e["seeds"]) == len(cc.QUICK["seeds"]) for e in res["methods"].values())
    assert (tmp_path / "cope_counting.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_quick_mode_refuses_to_overwrite_committed_results(monkeypatch):
    monkeypatch.setattr(cc, "run", lambda cfg: pytest.fail("ran the experiment"))
    with pytest.raises(SystemExit):
        cc.main(["--quick"])


def test_committed_results_are_complete():
    res = json.loads((ROOT / "results" / "cope_counting.json").read_text())
    cfg = cc.ExperimentConfig()
    assert res["config"] == json.loads(json.dumps(cc.asdict(cfg)))  # the default config, tuples as lists
    assert list(res["methods"]) == list(cfg.methods) and len(cfg.seeds) >= 3
    lengths = {str(cfg.train_len * m) for m in cfg.eval_multiples}
    for entry in res["methods"].values():
        assert [s["seed"] for s in entry["seeds"]] == list(cfg.seeds)
        for mix in ("dense", "sparse"):
            assert set(entry[mix]) == lengths
            for L, r in entry[mix].items():
                xs = [s[mix][L] for s in entry["seeds"]]
                assert r["min"] == min(xs) and r["max"] == max(xs) and abs(r["mean"] - sum(xs) / len(xs)) < 1e-4
                assert r["n"] == min(s["reads"][mix][L] for s in entry["seeds"]) > 0
    assert 0 < res["cpu_time_s"] <= 600 and res["environment"]["cpu"]  # CPU seconds: the neighbours on a shared machine do not count
    fig = cc.draw(res)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == ["NoPE", "RoPE", "CoPE"]
