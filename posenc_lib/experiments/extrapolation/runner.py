"""The whole run: every method, task and seed (in processes), summarised over seeds."""
from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict
from multiprocessing import get_context

import torch

from .. import _cli, _training
from .config import ExperimentConfig, TASK_DESCRIPTIONS, best_accuracy, chance_accuracy
from .training import train
from .evaluation import evaluate, evaluate_rope_scalings, evaluation_sets


def run_seed(cfg: ExperimentConfig, task: str, seed: int, device: str = "cpu") -> dict:
    """Train and evaluate every method on one task for one seed (one process's unit of work)."""
    torch.set_num_threads(cfg.threads)
    cpu_start = time.process_time()
    sets = evaluation_sets(task, cfg, seed)
    out: dict = {"seed": seed, "methods": {}, "train_seconds": {}}
    for method in cfg.methods:
        t0 = time.perf_counter()
        model, curve = train(method, cfg, task, seed, device)
        out["train_seconds"][method] = round(time.perf_counter() - t0, 1)
        out["methods"][method] = {"train_loss_curve": curve, **evaluate(model, method, sets, cfg, task)}
        if method == "rope":
            out["methods"].update(evaluate_rope_scalings(model, sets, cfg, task))
        if method == "irope":  # Llama 4's chunked RoPE layers: the same trained model (train_len = one chunk)
            model.positional.chunk = cfg.train_len
            out["methods"]["irope+chunk"] = evaluate(model, method, sets, cfg, task)
            model.positional.chunk = None
            # the temperature off: it is 1 inside every sliding window's scored positions, so no windows
            model.positional.temperature = False
            out["methods"]["irope+notemp"] = evaluate(model, method, sets, cfg, task, windows=False)
            model.positional.temperature = True
    out["cpu_time_s"] = round(time.process_time() - cpu_start, 1)
    return out


def summarize(per_seed: list[dict]) -> dict[str, dict]:
    """Per method, mode and length: the accuracies of every seed and their mean, min and max."""
    out: dict = {}
    for method, modes in per_seed[0]["methods"].items():
        out[method] = {}
        for mode, by_len in modes.items():
            if mode in ("train_loss_curve", "attention"):  # attention: per seed only (attention_heads)
                continue
            out[method][mode] = {}
            for L, r in by_len.items():
                if r is None:
                    out[method][mode][L] = None
                    continue
                accs = [s["methods"][method][mode][L]["acc"] for s in per_seed]
                n = min(s["methods"][method][mode][L]["n"] for s in per_seed)
                out[method][mode][L] = {"acc": accs, **_training.spread(accs), "n": n}
    return out


def run(cfg: ExperimentConfig, *, jobs: int = 1, log=print, device: torch.device | str = "cpu") -> dict:
    """Every task, seed and method; `jobs` processes share the (task, seed) units; the models train on
    ``device`` (the data are drawn on the CPU either way). Returns the results dict."""
    device = str(device)
    t_start = time.perf_counter()
    units = [(task, seed) for task in cfg.tasks for seed in cfg.seeds]
    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            done = list(pool.map(run_seed, [cfg] * len(units), *zip(*units), [device] * len(units)))
    else:
        done = [run_seed(cfg, task, seed, device) for task, seed in units]
    results: dict = {"config": asdict(cfg), "environment": _cli.environment(device), "tasks": {}}
    for task in cfg.tasks:
        per_seed = [r for (t, _), r in zip(units, done) if t == task]
        results["tasks"][task] = {
            "description": TASK_DESCRIPTIONS[task],
            "best_acc": round(best_accuracy(task, cfg), 4),
            "chance_acc": round(chance_accuracy(task, cfg), 4),
            "methods": summarize(per_seed),
            "seeds": per_seed,
        }
        for method, entry in results["tasks"][task]["methods"].items():
            row = entry["nonoverlapping"]
            log(f"{task:>8} {method:>12}: mean accuracy "
                + "  ".join(f"{L}: " + ("  n/a" if r is None else f"{r['mean']:.3f}") for L, r in row.items()))
    results["wall_time_s"] = round(time.perf_counter() - t_start, 1)
    # CPU seconds of the work, summed over processes: the wall time of a one-process run on an
    # idle machine, and unaffected by other programs sharing the cores.
    results["cpu_time_s"] = round(sum(r["cpu_time_s"] for r in done), 1)
    return results
