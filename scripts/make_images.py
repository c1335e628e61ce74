"""Regenerate every figure in images/ from posenc_lib, so pictures never drift from the code.

    python scripts/make_images.py              # all figures (`make images`)
    python scripts/make_images.py rope_rotation alibi_biases   # only these
    python scripts/make_images.py --out DIR    # somewhere else (the tests use a temp dir)

Every figure is drawn with posenc_lib.viz (white background, labelled axes, colour bars,
diverging colours centred on 0) from the same functions the notebooks teach. The
experiments' plots (extrapolation, cope_counting) belong to their modules in
posenc_lib.experiments; each is redrawn from its committed results/NAME.json.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from typing import Callable

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle

from posenc_lib import alibi_bias, alibi_slopes, apply_rope, rope_frequencies, sinusoidal_positions, viz

ROOT = Path(__file__).resolve().parents[1]
DPI = 110


def sinusoid_heatmap() -> Figure:
    """Sinusoidal encodings (Vaswani et al.): 64 positions x 64 features."""
    fig, ax = viz.figure(width=6.4, height=4.2)
    viz.heatmap(sinusoidal_positions(64, 64), ax=ax, xlabel="feature i (sin, cos interleaved)",
                ylabel="position p", colorbar="PE[p, i]",
                title="Sinusoidal positions: fast pairs on the left, slow on the right")
    return fig


def _rotated_pair(positions: torch.Tensor, theta: float) -> torch.Tensor:
    """The unit vector (1, 0) rotated by RoPE at each position, for a 2-D pair of frequency theta."""
    x = torch.tensor([[1.0, 0.0]]).expand(len(positions), 2)
    return apply_rope(x, positions, inv_freq=torch.tensor([theta]))


def rope_rotation() -> Figure:
    """Left: one query pair rotated by m*theta. Right: RoPE scores depend only on n - m."""
    fig, (ax, ax2) = viz.figure(2, width=4.4, height=4.0)
    m = torch.arange(8)
    theta = 0.4
    pts = _rotated_pair(m, theta).numpy()
    ax.add_patch(Circle((0, 0), 1.0, fill=False, ls=":", color="0.6"))
    colors = matplotlib.colormaps["viridis"](np.linspace(0, 0.9, len(m)))
    for (x, y), c, mi in zip(pts, colors, m.tolist()):
        ax.annotate("", xy=(x, y), xytext=(0, 0), arrowprops=dict(arrowstyle="-|>", color=c, lw=2))
        ax.text(1.13 * x, 1.13 * y, f"m={mi}", ha="center", va="center", fontsize=9, color=c)
    ax.set(xlim=(-1.35, 1.35), ylim=(-1.35, 1.35), aspect="equal", xlabel="pair coordinate 2j",
           ylabel="pair coordinate 2j+1", title=f"R_m rotates each pair by m·θ_j (θ_j = {theta})")
    # q_m . k_n with the same q and k at every position: a Toeplitz matrix (constant diagonals).
    g = torch.Generator().manual_seed(0)
    d, n = 16, 24
    q, k = torch.randn(d, generator=g), torch.randn(d, generator=g)
    inv_freq = rope_frequencies(d, base=100.0)
    qs = apply_rope(q.expand(n, d), inv_freq=inv_freq)
    ks = apply_rope(k.expand(n, d), inv_freq=inv_freq)
    viz.heatmap(qs @ ks.T, ax=ax2, xlabel="key position n", ylabel="query position m", colorbar="q_m · k_n",
                title="Same q, k at every position:\nthe score depends only on m − n")
    return fig


def alibi_biases() -> Figure:
    """ALiBi's causal bias -m_h (i - j) for 4 of 8 heads, one colour scale."""
    heads, n = 8, 12
    bias = alibi_bias(heads, n)
    slopes = alibi_slopes(heads)
    shown = [0, 2, 5, 7]
    fig, axes = viz.figure(len(shown), width=3.0, height=3.0)
    lo = float(bias[torch.isfinite(bias)].min())
    for ax, h in zip(axes, shown):
        viz.heatmap(bias[h], ax=ax, xlabel="key j", ylabel="query i" if h == shown[0] else "",
                    colorbar="bias" if h == shown[-1] else None, diverging=False, cmap="viridis", vmin=lo, vmax=0.0,
                    title=f"head {h + 1}: m = 1/{1 / float(slopes[h]):g}")
    fig.suptitle("ALiBi: each head adds −m_h·(i − j) to its scores (grey: masked future)")
    return fig


def overview() -> Figure:
    """The README picture: three ways to tell attention where tokens are."""
    fig, axes = viz.figure(3, width=3.6, height=3.3)
    viz.heatmap(sinusoidal_positions(32, 32), ax=axes[0], xlabel="feature", ylabel="position",
                title="added to tokens:\nsinusoids", colorbar=None)
    g = torch.Generator().manual_seed(0)
    d, n = 16, 16
    q, k = torch.randn(d, generator=g), torch.randn(d, generator=g)
    inv_freq = rope_frequencies(d, base=100.0)
    scores = apply_rope(q.expand(n, d), inv_freq=inv_freq) @ apply_rope(k.expand(n, d), inv_freq=inv_freq).T
    viz.heatmap(scores, ax=axes[1], xlabel="key n", ylabel="query m", title="rotating q and k:\nRoPE scores",
                colorbar=None)
    viz.heatmap(alibi_bias(8, n)[2], ax=axes[2], xlabel="key j", ylabel="query i", diverging=False,
                title="biasing the scores:\nALiBi", colorbar=None)
    return fig


FIGURES: dict[str, Callable[[], Figure]] = {
    "overview": overview,
    "sinusoid_heatmap": sinusoid_heatmap,
    "rope_rotation": rope_rotation,
    "alibi_biases": alibi_biases,
}


def save(fig: Figure, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=DPI, facecolor="white", metadata={"Software": None})  # no version stamp: stable bytes
    return path


# Figures drawn by an experiment module from its committed results/NAME.json.
EXPERIMENTS = ("extrapolation", "cope_counting")


def experiment_figure(name: str, out: Path) -> Path:
    """Redraw NAME.png with the experiment's own plot(results_path, out_png)."""
    module = importlib.import_module(f"posenc_lib.experiments.{name}")
    return Path(module.plot(ROOT / "results" / f"{name}.json", out / f"{name}.png"))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help=f"figures to draw (default all): {', '.join((*FIGURES, *EXPERIMENTS))}")
    ap.add_argument("--out", type=Path, default=ROOT / "images")
    args = ap.parse_args(argv)
    viz.use_style()
    unknown = set(args.names) - set(FIGURES) - set(EXPERIMENTS)
    if unknown:
        ap.error(f"unknown figure(s) {sorted(unknown)}; choose from {sorted((*FIGURES, *EXPERIMENTS))}")
    torch.manual_seed(0)
    for name, draw in FIGURES.items():
        if not args.names or name in args.names:
            print(save(draw(), args.out / f"{name}.png").relative_to(args.out.parent))
    for name in EXPERIMENTS:
        if not args.names or name in args.names:
            print(experiment_figure(name, args.out).relative_to(args.out.parent))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
