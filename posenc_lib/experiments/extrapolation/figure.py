"""The figure: accuracy against evaluation length, one panel per task, one style per curve."""
from __future__ import annotations

from pathlib import Path

from ...model import POSITIONAL_METHODS
from .. import _cli
from .config import FIGURE, RECALL_TASKS, RESULTS, key_blind_floor
from .reading import accuracy


# One colour and label per curve, the same in every panel. Trained methods take theirs from
# the model's registry; "rope+<scaling>" (RoPE evaluated with a scaling of posenc_lib.scaling)
# from the scaling's name.
SCALING_STYLES = {"linear": ("PI", "#ff7f0e"), "ntk": ("NTK", "#e377c2"), "yarn": ("YaRN", "#17becf"),
                  "llama3": ("Llama 3", "#bcbd22"), "dynamic": ("dynamic NTK", "#aec7e8")}
COLORS = {**{m: spec.color for m, spec in POSITIONAL_METHODS.items()},
          **{f"rope+{s}": color for s, (_, color) in SCALING_STYLES.items()}, "irope+chunk": "#c5b0d5",
          "irope+notemp": "#c49c94"}
LABELS = {**{m: spec.label for m, spec in POSITIONAL_METHODS.items()},
          **{f"rope+{s}": f"{POSITIONAL_METHODS['rope'].label} + {label}" for s, (label, _) in SCALING_STYLES.items()},
          "irope+chunk": f"{POSITIONAL_METHODS['irope'].label}, chunked",
          "irope+notemp": f"{POSITIONAL_METHODS['irope'].label}, no temperature"}


def draw(results: dict, fig=None):
    """One row per task, three panels each; points are the mean over seeds, bars the min to max."""
    from matplotlib.figure import Figure

    cfg = results["config"]
    tasks = list(results["tasks"])
    if fig is None:
        fig = Figure(figsize=(13, 3.9 * len(tasks)), dpi=100, facecolor="white", layout="constrained")
    grid = fig.subplots(len(tasks), 3, sharey="row", squeeze=False)
    lengths = [cfg["train_len"] * m for m in cfg["eval_multiples"]]
    for row, task in zip(grid, tasks):
        entry = results["tasks"][task]
        floor = float(key_blind_floor(cfg["values"], cfg["entries"])) if task in RECALL_TASKS else None
        base = [m for m in entry["methods"] if "+" not in m]
        scaled = ["rope"] + [m for m in entry["methods"] if m.startswith("rope+")] if "rope" in base else []
        panels = [
            (row[0], base, "nonoverlapping", "the model reads L tokens"),
            (row[1], scaled, "nonoverlapping", "RoPE stretched at evaluation (no retraining)"),
            (row[2], base, "sliding_window", f"sliding window of {cfg['train_len']} (stride {cfg['window_stride']})"),
        ]
        for ax, methods, mode, title in panels:
            for k, m in enumerate(methods):
                pts = [(L, r) for L, r in accuracy(results, task, m, mode).items() if r is not None]
                if not pts:
                    continue
                xs = [L * 1.03 ** (k - len(methods) / 2) for L, _ in pts]  # nudge apart so bars stay visible
                mean = [r["mean"] for _, r in pts]
                err = [[r["mean"] - r["min"] for _, r in pts], [r["max"] - r["mean"] for _, r in pts]]
                ax.errorbar(xs, mean, yerr=err, marker="o", ms=4, capsize=3, color=COLORS.get(m),
                            label=LABELS.get(m, m))
            ax.axvline(cfg["train_len"], color="black", lw=0.8, ls=":")
            ax.axhline(entry["best_acc"], color="black", lw=0.8, ls="--")
            ax.axhline(entry["chance_acc"], color="grey", lw=0.8, ls="-.")
            if floor is not None:
                ax.axhline(floor, color="black", lw=0.8, ls=(0, (6, 2, 1, 2, 1, 2)))  # dash-dot-dot
            ax.set_xscale("log", base=2)
            ax.set_xticks(lengths, [str(L) for L in lengths])
            ax.minorticks_off()
            ax.set_xlabel("evaluation length L (tokens)")
            ax.set_title(f"{task}: {title}", fontsize=10)
            ax.set_ylim(-0.02, 1.02)
            ax.grid(alpha=0.3)
            ax.set_facecolor("white")
            if methods:
                ax.legend(fontsize=7, loc="lower left")
        row[0].set_ylabel(f"{task}: accuracy")
        row[0].annotate("best possible", (lengths[-1], entry["best_acc"]), fontsize=8, ha="right", va="bottom")
        row[0].annotate("guessing", (lengths[-1], entry["chance_acc"]), fontsize=8, ha="right", va="bottom")
        if floor is not None:
            row[0].annotate("key-blind floor", (lengths[-1], floor), fontsize=8, ha="right", va="bottom",
                            color="black")
    fig.suptitle(f"Trained at {cfg['train_len']} tokens, tested longer: mean over {len(cfg['seeds'])} seeds "
                 "(bars: min to max)\nRows: a local grammar; recall across a gap, the dictionary first; "
                 "the same, the dictionary anywhere", fontsize=11)
    return fig


def plot(results_path: str | Path = RESULTS, out_png: str | Path = FIGURE) -> Path:
    """Redraw the figure from a results file without retraining (``make images``)."""
    return _cli.plot_file(draw, results_path, out_png)
