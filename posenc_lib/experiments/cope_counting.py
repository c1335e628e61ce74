"""Counting writes, not tokens: CoPE, RoPE and NoPE on flip-flop, in and beyond the training length.

    python -m posenc_lib.experiments.cope_counting            # full run -> ./results/, ./images/
    python -m posenc_lib.experiments.cope_counting --quick --out /tmp/x   # smoke test
    python -m posenc_lib.experiments.cope_counting --results r.json --figure f.png

The task is flip-flop (Liu et al. 2023), one of the tasks CoPE's paper (Golovneva et al.
2024) trains on: a sequence of instructions, each two tokens (op, bit). "w b" writes the
bit b, "i b" is to be ignored, "r b" reads, and its b must equal the last written bit. The
model is scored on the bit after every "r" (the token predicted at the "r" position). Which
key holds the answer is fixed by counting writes (or reads, which repeat the last write), not
by counting tokens: the last write may be 2 tokens back or 200. A gate that fires on
written bits makes it CoPE's position 1; RoPE has to find it by content and recency.

Each method trains at train_len = 64 tokens on the "dense" mix (writes, reads and ignores
with probabilities ``mix``) and is evaluated at 64 to 512 tokens on the same mix and on a
"sparse" mix where ignores dominate (94 %), so the last write sits further back than in training,
though usually still within the training length (chapter 9 counts the distances). Several seeds per method (model initialisation and data); the
results file holds every seed and the mean and spread (min, max).

Deterministic: fixed seeds and one thread; the same config gives the same numbers on the same
CPU (other CPUs pick other vectorised kernels and change the last bits of training; see
posenc_lib.experiments.extrapolation). The results file holds, per mix and length, the number
of reads scored ("n"), and ``separation`` says how far apart two methods' seed ranges are.
``plot(results_path, out_png)`` redraws the figure from a results file. Output paths are
relative to the working directory (run it from the repository root to update the
committed results).
Taught in: notebooks/09_beyond_1d.ipynb
"""
from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from torch import Tensor

from ..device import device_named
from ..model import POSITIONAL_METHODS, DecoderConfig, TinyDecoder
from . import _cli, _training

RESULTS = Path("results") / "cope_counting.json"
FIGURE = Path("images") / "cope_counting.png"

# The vocabulary: three ops, two bits.
W, I, R, ZERO, ONE = range(5)
VOCAB = ("w", "i", "r", "0", "1")


@dataclass
class ExperimentConfig:
    """Everything that determines the numbers (stored in the results file)."""

    seeds: tuple[int, ...] = (0, 1, 2)
    threads: int = 1  # one thread: deterministic, and fastest on a busy 2-core machine
    train_len: int = 64  # tokens (32 instructions)
    eval_multiples: tuple[int, ...] = (1, 2, 4, 8)  # evaluate at 64, 128, 256, 512 tokens
    mix: tuple[float, float, float] = (0.15, 0.25, 0.60)  # P(w), P(r), P(i) in training and "dense"
    sparse_mix: tuple[float, float, float] = (0.03, 0.03, 0.94)  # "sparse": mostly ignores, writes rare
    steps: int = 1000
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 50  # linear warm-up steps, then cosine decay to lr / 10
    eval_sequences: int = 128  # per length and mix
    methods: tuple[str, ...] = ("none", "rope", "cope")
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 128


QUICK = dict(seeds=(0, 1), steps=4, batch_size=8, warmup=2, eval_sequences=2)


# ---------------------------------------------------------------- the task

def flip_flop(batch: int, length: int, mix: tuple[float, float, float],
              generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Flip-flop sequences of length // 2 instructions (op, bit); the first one is a write.

    mix: probabilities of w, r, i
    returns: (tokens (batch, length) long, read (batch, length) bool: the token is a bit after "r")
    """
    n = length // 2
    ops = torch.multinomial(torch.tensor(mix, dtype=torch.float64), batch * n, replacement=True,
                            generator=generator).view(batch, n)
    ops = torch.tensor([W, R, I])[ops]
    ops[:, 0] = W
    bits = torch.randint(0, 2, (batch, n), generator=generator)
    last = bits[:, 0].clone()
    for k in range(1, n):  # a read repeats the last written bit
        is_w, is_r = ops[:, k] == W, ops[:, k] == R
        last = torch.where(is_w, bits[:, k], last)
        bits[:, k] = torch.where(is_r, last, bits[:, k])
    tokens = torch.stack([ops, ZERO + bits], dim=-1).view(batch, 2 * n)
    read = torch.zeros_like(tokens, dtype=torch.bool)
    read[:, 1::2] = ops == R
    return tokens, read


# ---------------------------------------------------------------- training and evaluation

def build_model(method: str, cfg: ExperimentConfig) -> TinyDecoder:
    return TinyDecoder(DecoderConfig(vocab_size=len(VOCAB), positional=method, d_model=cfg.d_model,
                                     num_heads=cfg.num_heads, num_layers=cfg.num_layers, d_ff=cfg.d_ff,
                                     max_len=cfg.train_len))


def train(method: str, cfg: ExperimentConfig, seed: int,
          device: torch.device | str = "cpu") -> tuple[TinyDecoder, list[float]]:
    """Train one method for one seed; every method sees the same batches (drawn on the CPU); the model is
    initialised on the CPU and moved to ``device``. returns (model, loss every 100 steps)."""
    torch.manual_seed(seed)
    model = build_model(method, cfg).to(device)
    data = torch.Generator().manual_seed(seed + 1000)
    curve = _training.train(model, lambda: flip_flop(cfg.batch_size, cfg.train_len, cfg.mix, data),
                            steps=cfg.steps, lr=cfg.lr, warmup=cfg.warmup, log_every=100)
    return model, curve


MIXES = ("dense", "sparse")


@torch.no_grad()
def evaluate(model: TinyDecoder, cfg: ExperimentConfig, seed: int) -> dict[str, dict[str, float]]:
    """Read accuracy per mix ("dense", "sparse") and length, and under "reads" the number of reads
    scored; the same sequences for every method."""
    out: dict[str, dict[str, float]] = {"reads": {}}
    for name, mix in zip(MIXES, (cfg.mix, cfg.sparse_mix)):
        gen = torch.Generator().manual_seed(seed + 2000)
        out[name], out["reads"][name] = {}, {}
        for mult in cfg.eval_multiples:
            L = cfg.train_len * mult
            tokens, read = flip_flop(cfg.eval_sequences, L, mix, gen)
            correct, _ = _training.masked_scores(_training.logits_on_cpu(model, tokens, 16), tokens, read)
            out[name][str(L)] = round(correct.float().mean().item(), 4) if correct.numel() else float("nan")
            out["reads"][name][str(L)] = correct.numel()
    return out


def summarize(per_seed: list[dict[str, dict]]) -> dict[str, dict[str, dict[str, float]]]:
    """mean, min and max over seeds of every (mix, length) accuracy, and n: the fewest reads any seed scored."""
    return {mix: {L: {**_training.spread([r[mix][L] for r in per_seed]),
                      "n": min(r["reads"][mix][L] for r in per_seed)} for L in per_seed[0][mix]}
            for mix in MIXES}


def separation(results: dict, a: str, b: str, mix: str, L: int) -> float:
    """The gap between the worst seed of `a` and the best seed of `b` in units of evaluation noise
    (``_training.separation``): below 0 the ranges overlap, 0 to 2 a thin win, above 2 a clear one."""
    ra, rb = results["methods"][a][mix][str(L)], results["methods"][b][mix][str(L)]
    return _training.separation(ra["min"], rb["max"], min(ra["n"], rb["n"]))


def run(cfg: ExperimentConfig, *, log=print, device: torch.device | str = "cpu") -> dict:
    """Train (on ``device``) and evaluate every method for every seed; returns the results dict."""
    torch.set_num_threads(cfg.threads)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    results: dict = {
        "config": asdict(cfg),
        "task": "flip-flop: instructions (op, bit); the bit after each 'r' equals the last written bit",
        "environment": _cli.environment(device),
        "methods": {},
    }
    for method in cfg.methods:
        t0 = time.perf_counter()
        seeds = []
        for seed in cfg.seeds:
            model, curve = train(method, cfg, seed, device)
            seeds.append({"seed": seed, "train_loss_curve": curve, **evaluate(model, cfg, seed)})
        summary = summarize(seeds)
        results["methods"][method] = {"seeds": seeds, **summary,
                                      "train_seconds": round(time.perf_counter() - t0, 1)}
        log(f"{method:>6}: {results['methods'][method]['train_seconds']:6.1f} s; mean read accuracy  dense "
            + " ".join(f"{L}: {r['mean']:.3f}" for L, r in summary["dense"].items())
            + "  | sparse " + " ".join(f"{L}: {r['mean']:.3f}" for L, r in summary["sparse"].items()))
    results["wall_time_s"] = round(time.perf_counter() - t_start, 1)
    results["cpu_time_s"] = round(time.process_time() - cpu_start, 1)  # one thread: unaffected by neighbours
    return results


def load_results(name: str = "cope_counting") -> dict:
    """The committed results file, results/<name>.json, wherever the caller runs (notebooks/, the root)."""
    return _cli.load_results(name)


# ---------------------------------------------------------------- the figure

def draw(results: dict, fig=None):
    """Two panels (dense, sparse): mean read accuracy per method, error bars from min to max over seeds."""
    from matplotlib.figure import Figure

    cfg = results["config"]
    if fig is None:
        fig = Figure(figsize=(10, 4), dpi=100, facecolor="white", layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    lengths = [cfg["train_len"] * m for m in cfg["eval_multiples"]]
    titles = {"dense": "training mix (P(w), P(r), P(i)) = {}", "sparse": "sparse mix {}: mostly ignores"}
    for ax, mix in zip(axes, ("dense", "sparse")):
        for k, (method, entry) in enumerate(results["methods"].items()):
            spec = POSITIONAL_METHODS[method]
            rows = [entry[mix][str(L)] for L in lengths]
            mean = [r["mean"] for r in rows]
            err = [[r["mean"] - r["min"] for r in rows], [r["max"] - r["mean"] for r in rows]]
            xs = [L * 1.04 ** (k - 1) for L in lengths]  # small offsets so the bars do not overlap
            ax.errorbar(xs, mean, yerr=err, marker="o", capsize=3, color=spec.color, label=spec.label)
        ax.axvline(cfg["train_len"], color="black", lw=0.8, ls=":")
        ax.axhline(0.5, color="black", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(L) for L in lengths])
        ax.set_xlabel("evaluation length L (tokens)")
        ax.set_title(titles[mix].format(tuple(cfg["mix" if mix == "dense" else "sparse_mix"])), fontsize=10)
        ax.set_ylim(0.3, 1.02)
        ax.grid(alpha=0.3)
        ax.set_facecolor("white")
    axes[0].set_ylabel("read accuracy (0.5 = guessing)")
    axes[0].legend(fontsize=8, loc="lower left")
    fig.suptitle(f"Flip-flop, trained at {cfg['train_len']} tokens: mean over {len(cfg['seeds'])} seeds "
                 "(bars: min to max)", fontsize=11)
    return fig


def plot(results_path: str | Path = RESULTS, out_png: str | Path = FIGURE) -> Path:
    """Redraw the figure from a results file without retraining."""
    return _cli.plot_file(draw, results_path, out_png)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _cli.add_output_options(p, RESULTS, FIGURE)
    _cli.add_device_option(p)
    args = p.parse_args(argv)
    device = device_named(args.device, "--device")
    json_path, png_path = _cli.output_paths(p, args, RESULTS, FIGURE)
    _cli.write(run(ExperimentConfig(**(QUICK if args.quick else {})), device=device), json_path, png_path, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
