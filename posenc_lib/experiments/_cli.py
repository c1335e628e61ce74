"""What every experiment's command line shares: where its results file and figure go.

Defaults are relative to the working directory, never to the package (an installed package
has no repository around it); ``--quick`` (a smoke test) must be told where to write, so the
committed results are never overwritten with throwaway numbers.
"""
from __future__ import annotations

import argparse
import json
import platform
from pathlib import Path
from typing import Callable

import torch


def add_output_options(p: argparse.ArgumentParser, results: Path, figure: Path) -> None:
    """--quick, --out, --results and --figure."""
    p.add_argument("--quick", action="store_true",
                   help="a few training steps (smoke test); needs --out, or --results and --figure")
    p.add_argument("--out", type=Path, help=f"write {results.name} and {figure.name} into this folder")
    p.add_argument("--results", type=Path, help=f"the results file (default: OUT/{results.name} or {results})")
    p.add_argument("--figure", type=Path, help=f"the figure (default: OUT/{figure.name} or {figure})")


def output_paths(p: argparse.ArgumentParser, args: argparse.Namespace, results: Path,
                 figure: Path) -> tuple[Path, Path]:
    """(results file, figure) from the options; refuses --quick without an explicit place."""
    if args.quick and args.out is None and (args.results is None or args.figure is None):
        p.error("--quick writes throwaway numbers: give --out DIR (or --results and --figure) "
                "so results/ stays untouched")
    return (args.results or (results if args.out is None else args.out / results.name),
            args.figure or (figure if args.out is None else args.out / figure.name))


def add_device_option(p: argparse.ArgumentParser) -> None:
    """--device: where the models train (the CPU by default, where the committed results were made)."""
    p.add_argument("--device", default="cpu",
                   help="cpu (default: the committed results), cuda, mps or auto; a GPU's kernels round "
                        "differently, so its accuracies differ in the last digits")


def environment(device: torch.device | str = "cpu") -> dict[str, str]:
    """Where the numbers were made: the device that trained, and the CPU. The CPU matters even then:
    torch's vectorised kernels (its "CPU capability") and MKL's matrix kernels are picked per CPU and
    change the last bits of training; on a GPU its own kernels do."""
    device = torch.device(device)
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    out = {"torch": torch.__version__, "python": platform.python_version(), "machine": platform.machine(),
           "cpu": cpu, "cpu_capability": torch.backends.cpu.get_cpu_capability(), "device": device.type}
    if device.type == "cuda":
        out["gpu"] = torch.cuda.get_device_name(device)
    return out


def plot_file(draw: Callable[[dict], object], results_path: str | Path, out_png: str | Path) -> Path:
    """Redraw a figure from a results file with ``draw(results) -> Figure``; returns the PNG's path."""
    results = json.loads(Path(results_path).read_text())
    out_png = Path(out_png)
    out_png.parent.mkdir(parents=True, exist_ok=True)
    draw(results).savefig(out_png, facecolor="white")
    return out_png


def write(results: dict, json_path: Path, png_path: Path, plot: Callable[[Path, Path], Path]) -> None:
    """Write the results file, draw its figure, and say where and how long the run took."""
    json_path.parent.mkdir(parents=True, exist_ok=True)
    json_path.write_text(json.dumps(results, indent=1) + "\n")
    plot(json_path, png_path)
    print(f"wrote {json_path} and {png_path} (wall time {results['wall_time_s']} s, "
          f"CPU time {results['cpu_time_s']} s)")


def load_results(name: str) -> dict:
    """results/<name>.json of the repository, found from the working directory or its parents
    (a notebook runs in notebooks/, a script at the root), else next to the package's checkout."""
    here = Path.cwd().resolve()
    checkout = Path(__file__).resolve().parents[2]  # an editable install: the repository itself
    for base in (here, *here.parents, checkout):
        path = base / "results" / f"{name}.json"
        if path.is_file():
            return json.loads(path.read_text())
    raise FileNotFoundError(f"results/{name}.json: not found in {here}, its parents or {checkout}; "
                            f"run `python -m posenc_lib.experiments.{name}` from the repository root")
