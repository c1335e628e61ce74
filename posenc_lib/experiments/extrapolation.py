"""Train short, test long: does each positional method work beyond its training length?

    python -m posenc_lib.experiments.extrapolation            # full run -> ./results/, ./images/
    python -m posenc_lib.experiments.extrapolation --quick --out /tmp/x   # smoke test
    python -m posenc_lib.experiments.extrapolation --results r.json --figure f.png
    python -m posenc_lib.experiments.extrapolation --methods none,rope,irope
        --results results/irope.json --figure images/irope.png   # chapter 8's run (one line)

The task: a small random "grammar". One fixed table maps every pair of tokens
(a, b) to a next token T[a, b] (16 tokens, 256 entries, the same for all sequences);
each sequence starts with two random tokens and continues with T[x_{t-2}, x_{t-1}],
except that with probability 0.25 a token is replaced by a uniformly random one (so
sequences never settle into a loop and nothing far away helps). To predict x_t the
model must know the token *immediately before* the current one: a question about
order, as in language. NoPE is not trivially perfect here: without positions an
attention head sees its prefix as a set, so it has to derive "previous" from the
causal mask (the counter shown in the notebook), which is coarse and gets coarser
with length. The relative methods only need offset 1, which they saw in training;
what differs is how far-away tokens disturb them at lengths never seen.

Each method of ``TinyDecoder`` trains at length 64 with the same budget, seed and
batches. Evaluation uses 512-token sequences, split into non-overlapping chunks of
64, 128, 256 and 512 tokens (extrapolation: positions beyond 64 are new), and again
scored with a sliding window of 64 tokens (no position beyond 64 is ever used; every
token still gets at least 48 tokens of context, plenty for this local task). RoPE is also evaluated with PI, NTK
and YaRN frequencies for the factor L / 64, without retraining.

Deterministic: fixed seeds and thread count; the same config gives the same numbers.
``plot(results_path, out_png)`` redraws the figure from a results file (``make images``).
Output paths are relative to the working directory (run it from the repository root to
update the committed results); the package never writes next to its own files.
Taught in: notebooks/07_beyond.ipynb (the iRoPE run: notebooks/08_rope_in_models.ipynb)
"""
from __future__ import annotations

import argparse
import math
import platform
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor

from .. import _validate as v
from ..model import POSITIONAL_METHODS, DecoderConfig, TinyDecoder
from ..scaling import scaled_rope_frequencies
from . import _cli

# Defaults relative to the working directory, not to this file: an installed package
# has no repository around it.
RESULTS = Path("results") / "extrapolation.json"
FIGURE = Path("images") / "extrapolation.png"


@dataclass
class ExperimentConfig:
    """Everything that determines the numbers (stored in the results file)."""

    seed: int = 0
    threads: int = 1  # one thread: deterministic, and fastest on a busy 2-core machine
    vocab_size: int = 16  # the grammar's table has vocab_size**2 = 256 entries
    noise: float = 0.25  # probability that a token is random instead of T[x_{t-2}, x_{t-1}]
    train_len: int = 64
    eval_multiples: tuple[int, ...] = (1, 2, 4, 8)  # evaluate at 64, 128, 256, 512 tokens
    steps: int = 400
    batch_size: int = 32
    lr: float = 3e-3
    warmup: int = 50  # linear warm-up steps, then cosine decay to lr / 10
    eval_sequences: int = 64  # sequences of train_len * max(eval_multiples) tokens
    window_stride: int = 16  # sliding window: each window scores its last 16 tokens
    # Chapter 7's six (the committed results); any other key of POSITIONAL_METHODS (e.g. "irope") runs if named.
    methods: tuple[str, ...] = ("none", "learned", "sinusoidal", "rope", "alibi", "t5")
    scalings: tuple[str, ...] = ("linear", "ntk", "yarn")  # applied to the RoPE model at evaluation
    d_model: int = 64
    num_heads: int = 4
    num_layers: int = 2
    d_ff: int = 128


QUICK = dict(steps=4, batch_size=8, warmup=2, eval_sequences=2)


# ---------------------------------------------------------------- the task

def grammar_table(vocab_size: int, generator: torch.Generator) -> Tensor:
    """The grammar: next[a, b] for every pair of tokens. returns (vocab_size, vocab_size) long."""
    return torch.randint(0, vocab_size, (vocab_size, vocab_size), generator=generator)


def grammar_sequences(batch: int, length: int, table: Tensor, noise: float,
                      generator: torch.Generator) -> tuple[Tensor, Tensor]:
    """Sequences x_t = table[x_{t-2}, x_{t-1}], each token replaced by a random one with prob `noise`.

    returns: (tokens (batch, length) long, ruled (batch, length) bool: x_t followed the table)
    """
    V = table.shape[0]
    x = torch.randint(0, V, (batch, length), generator=generator)  # random tokens, used where noise hits
    keep = torch.rand(batch, length, generator=generator) >= noise
    keep[:, :2] = False  # the first two tokens are random
    for t in range(2, length):
        x[:, t] = torch.where(keep[:, t], table[x[:, t - 2], x[:, t - 1]], x[:, t])
    return x, keep


def token_scores(logits: Tensor, tokens: Tensor) -> tuple[Tensor, Tensor]:
    """Per target x_t, t = 2 .. L-1 (predicted at position t-1): (correct, loss), each (B, L-2)."""
    pred, target = logits[:, 1:-1], tokens[:, 2:]
    loss = F.cross_entropy(pred.flatten(0, 1), target.flatten(), reduction="none").view_as(target)
    return pred.argmax(-1) == target, loss


def bayes_accuracy(cfg: "ExperimentConfig") -> float:
    """The best possible accuracy: predict the table's token, right unless noise picked another."""
    return (1 - cfg.noise) + cfg.noise / cfg.vocab_size


# ---------------------------------------------------------------- training

def build_model(method: str, cfg: ExperimentConfig) -> TinyDecoder:
    return TinyDecoder(DecoderConfig(vocab_size=cfg.vocab_size, positional=method, d_model=cfg.d_model,
                                     num_heads=cfg.num_heads, num_layers=cfg.num_layers, d_ff=cfg.d_ff,
                                     max_len=cfg.train_len))


def train(method: str, cfg: ExperimentConfig, table: Tensor) -> tuple[TinyDecoder, list[float]]:
    """Train one method; every method sees the same batches. returns (model, loss every 50 steps)."""
    torch.manual_seed(cfg.seed)
    model = build_model(method, cfg)
    data = torch.Generator().manual_seed(cfg.seed + 1)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.98), weight_decay=0.0)

    def lr_at(step: int) -> float:
        if step < cfg.warmup:
            return (step + 1) / cfg.warmup
        t = (step - cfg.warmup) / max(1, cfg.steps - cfg.warmup)
        return 0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_at)
    curve = []
    model.train()
    for step in range(cfg.steps):
        tokens, _ = grammar_sequences(cfg.batch_size, cfg.train_len, table, cfg.noise, data)
        _, loss = token_scores(model(tokens), tokens)
        loss = loss.mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        if step % 50 == 0 or step == cfg.steps - 1:
            curve.append(round(loss.item(), 4))
    model.eval()
    return model, curve


# ---------------------------------------------------------------- evaluation

def _summary(correct: Tensor, loss: Tensor, ruled: Tensor) -> dict[str, float]:
    """acc and loss over every scored token; rule_acc over those that followed the table."""
    return {
        "acc": round(correct.float().mean().item(), 4),
        "loss": round(loss.mean().item(), 4),
        "rule_acc": round(correct[ruled].float().mean().item(), 4),
    }


@torch.no_grad()
def _forward(model: TinyDecoder, tokens: Tensor, rope: tuple[Tensor, float] | None, chunk: int = 64) -> Tensor:
    kw = {} if rope is None else dict(inv_freq=rope[0], attention_factor=rope[1])
    return torch.cat([model(tokens[i:i + chunk], **kw) for i in range(0, tokens.shape[0], chunk)])


def evaluate_nonoverlapping(model: TinyDecoder, seqs: Tensor, ruled: Tensor, length: int,
                            rope: tuple[Tensor, float] | None = None) -> dict[str, float]:
    """Split every sequence into independent chunks of `length` tokens; score tokens 2.. of each."""
    chunks = seqs.reshape(-1, length)
    correct, loss = token_scores(_forward(model, chunks, rope), chunks)
    return _summary(correct, loss, ruled.reshape(-1, length)[:, 2:])


def evaluate_sliding(model: TinyDecoder, seqs: Tensor, ruled: Tensor, length: int, window: int,
                     stride: int) -> dict[str, float]:
    """Chunks of `length` tokens, each read through windows of `window` tokens moved by `stride`.

    The first window scores all its tokens (from the third on), later ones only their last
    `stride` tokens, so every token is scored once, with at least window - stride tokens of
    context and never a position beyond the training length.
    """
    chunks = seqs.reshape(-1, length)
    windows = chunks.unfold(1, window, stride)  # (n, num_windows, window)
    rwin = ruled.reshape(-1, length).unfold(1, window, stride)
    n, w = windows.shape[:2]
    flat = windows.reshape(n * w, window)
    correct, loss = token_scores(_forward(model, flat, None), flat)  # (n * w, window - 2)
    scored = torch.zeros(w, window - 2, dtype=torch.bool)
    scored[0] = True
    scored[1:, -stride:] = True
    scored = scored.repeat(n, 1)
    return _summary(correct[scored], loss[scored], rwin.reshape(n * w, window)[:, 2:][scored])


def evaluate(model: TinyDecoder, method: str, seqs: Tensor, ruled: Tensor, cfg: ExperimentConfig) -> dict[str, dict]:
    """Both evaluations at every length; None where a method cannot run (learned beyond its table)."""
    out: dict[str, dict] = {"nonoverlapping": {}, "sliding_window": {}}
    for mult in cfg.eval_multiples:
        L = cfg.train_len * mult
        fits = L <= cfg.train_len or not POSITIONAL_METHODS[method].length_limited
        out["nonoverlapping"][str(L)] = evaluate_nonoverlapping(model, seqs, ruled, L) if fits else None
        out["sliding_window"][str(L)] = evaluate_sliding(model, seqs, ruled, L, cfg.train_len, cfg.window_stride)
    return out


def evaluate_rope_scalings(model: TinyDecoder, seqs: Tensor, ruled: Tensor, cfg: ExperimentConfig) -> dict[str, dict]:
    """The trained RoPE model with each scaling at factor L / train_len (non-overlapping)."""
    head_dim = cfg.d_model // cfg.num_heads
    out = {}
    for name in cfg.scalings:
        res = {}
        for mult in cfg.eval_multiples:
            L = cfg.train_len * mult
            rope = scaled_rope_frequencies(head_dim, method=name, factor=float(mult),
                                           original_max_position=cfg.train_len, seq_len=L,
                                           base=model.config.base)
            res[str(L)] = evaluate_nonoverlapping(model, seqs, ruled, L, rope)
        out[f"rope+{name}"] = {"nonoverlapping": res}
    return out


# ---------------------------------------------------------------- the run

def run(cfg: ExperimentConfig, *, log=print) -> dict:
    """Train and evaluate every method; returns the results dict (see ``main`` for the file)."""
    torch.set_num_threads(cfg.threads)
    t_start, cpu_start = time.perf_counter(), time.process_time()
    table = grammar_table(cfg.vocab_size, torch.Generator().manual_seed(cfg.seed))
    eval_len = cfg.train_len * max(cfg.eval_multiples)
    seqs, ruled = grammar_sequences(cfg.eval_sequences, eval_len, table, cfg.noise,
                                    torch.Generator().manual_seed(cfg.seed + 2))
    results: dict = {
        "config": asdict(cfg),
        "task": "order-2 random grammar: x_t = T[x_{t-2}, x_{t-1}], random with probability noise",
        "bayes_acc": round(bayes_accuracy(cfg), 4),
        "environment": {"torch": torch.__version__, "python": platform.python_version(),
                        "machine": platform.machine()},
        "methods": {},
        "train_seconds": {},
    }
    fmt = lambda r: "  n/a" if r is None else f"{r['acc']:.3f}"  # noqa: E731
    for method in cfg.methods:
        t0 = time.perf_counter()
        model, curve = train(method, cfg, table)
        results["train_seconds"][method] = round(time.perf_counter() - t0, 1)
        entry = {"train_loss_curve": curve, **evaluate(model, method, seqs, ruled, cfg)}
        results["methods"][method] = entry
        log(f"{method:>12}: trained in {results['train_seconds'][method]:5.1f} s; accuracy "
            + "  ".join(f"{L}: {fmt(r)}" for L, r in entry["nonoverlapping"].items())
            + "  | sliding " + "  ".join(f"{fmt(r)}" for r in entry["sliding_window"].values()))
        if method == "rope":
            for name, res in evaluate_rope_scalings(model, seqs, ruled, cfg).items():
                results["methods"][name] = res
                log(f"{name:>12}: " + "  ".join(f"{L}: {fmt(r)}" for L, r in res["nonoverlapping"].items()))
    results["wall_time_s"] = round(time.perf_counter() - t_start, 1)
    # CPU seconds of this process: equal to the wall time on an idle machine (one thread),
    # and unaffected by other programs sharing the cores.
    results["cpu_time_s"] = round(time.process_time() - cpu_start, 1)
    return results


# ---------------------------------------------------------------- the figure

# One colour and label per curve, the same in every panel. Trained methods take theirs from
# the model's registry; "rope+<scaling>" (RoPE evaluated with a scaling of posenc_lib.scaling)
# from the scaling's name.
SCALING_STYLES = {"linear": ("PI", "#ff7f0e"), "ntk": ("NTK", "#e377c2"), "yarn": ("YaRN", "#17becf"),
                  "llama3": ("Llama 3", "#bcbd22"), "dynamic": ("dynamic NTK", "#aec7e8")}
COLORS = {**{m: spec.color for m, spec in POSITIONAL_METHODS.items()},
          **{f"rope+{s}": color for s, (_, color) in SCALING_STYLES.items()}}
LABELS = {**{m: spec.label for m, spec in POSITIONAL_METHODS.items()},
          **{f"rope+{s}": f"{POSITIONAL_METHODS['rope'].label} + {label}" for s, (label, _) in SCALING_STYLES.items()}}


def _series(results: dict, method: str, mode: str, metric: str) -> tuple[list[int], list[float]]:
    xs, ys = [], []
    for L, r in results["methods"][method].get(mode, {}).items():
        if r is not None:
            xs.append(int(L))
            ys.append(r[metric])
    return xs, ys


def draw(results: dict, fig=None):
    """The three-panel figure from a results dict; returns the matplotlib Figure."""
    from matplotlib.figure import Figure

    cfg = results["config"]
    if fig is None:
        fig = Figure(figsize=(13, 4.2), dpi=100, facecolor="white", layout="constrained")
    axes = fig.subplots(1, 3, sharey=True)
    base = [m for m in results["methods"] if "+" not in m]
    scaled = ["rope"] + [m for m in results["methods"] if m.startswith("rope+")]
    panels = [
        (axes[0], base, "nonoverlapping", "Non-overlapping: the model reads L tokens"),
        (axes[1], scaled, "nonoverlapping", "RoPE stretched at evaluation (no retraining)"),
        (axes[2], base, "sliding_window", f"Sliding window of {cfg['train_len']} (stride {cfg['window_stride']})"),
    ]
    lengths = [cfg["train_len"] * m for m in cfg["eval_multiples"]]
    for ax, methods, mode, title in panels:
        for m in methods:
            xs, ys = _series(results, m, mode, "acc")
            if xs:
                ax.plot(xs, ys, marker="o", color=COLORS.get(m), label=LABELS.get(m, m))
        ax.axvline(cfg["train_len"], color="black", lw=0.8, ls=":")
        ax.set_xscale("log", base=2)
        ax.set_xticks(lengths, [str(L) for L in lengths])
        ax.set_xlabel("evaluation length L (tokens)")
        ax.set_title(title, fontsize=10)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="lower left")
        ax.set_facecolor("white")
    axes[0].set_ylabel("next-token accuracy")
    for ax in axes:
        ax.axhline(results["bayes_acc"], color="black", lw=0.8, ls="--")
    axes[0].annotate("best possible", (lengths[-1], results["bayes_acc"]), fontsize=8, ha="right", va="bottom")
    fig.suptitle(f"Trained at {cfg['train_len']} tokens, tested longer: next-token accuracy on a random "
                 "order-2 grammar", fontsize=11)
    return fig


def plot(results_path: str | Path = RESULTS, out_png: str | Path = FIGURE) -> Path:
    """Redraw the figure from a results file without retraining (``make images``)."""
    return _cli.plot_file(draw, results_path, out_png)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    _cli.add_output_options(p, RESULTS, FIGURE)
    p.add_argument("--steps", type=int, help="override the number of training steps")
    p.add_argument("--methods", help="comma-separated keys of POSITIONAL_METHODS to train instead of the "
                   "default six, e.g. none,rope,irope (chapter 8's results/irope.json)")
    args = p.parse_args(argv)
    json_path, png_path = _cli.output_paths(p, args, RESULTS, FIGURE)
    cfg = ExperimentConfig(**(QUICK if args.quick else {}))
    if args.steps is not None:
        cfg.steps = args.steps
    if args.methods is not None:
        cfg.methods = tuple(v.one_of("--methods", m, POSITIONAL_METHODS) for m in args.methods.split(","))
    _cli.write(run(cfg), json_path, png_path, plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
