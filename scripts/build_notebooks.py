"""Build the chapter notebooks from their sources and execute them from a clean kernel.

    python scripts/build_notebooks.py            # every notebook, in order
    python scripts/build_notebooks.py 05 06      # only those whose name starts so

Sources are jupytext "percent" scripts in notebooks/src/ (plain Python, easy to review
and diff); cell metadata such as tags, slide types and hidden sources sits on the
"# %%" line. Each becomes notebooks/<name>.ipynb with fresh outputs. Never edit
notebook JSON by hand: edit the source and rebuild (`make notebooks`).
"""
from __future__ import annotations

import hashlib
import os
import sys
import time
import tomllib
from pathlib import Path

import jupytext
import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
SRC_DIR = NB_DIR / "src"
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}


def sources(prefixes: list[str]) -> list[Path]:
    found = sorted(SRC_DIR.glob("[0-9][0-9]_*.py"))
    if prefixes:
        found = [p for p in found if any(p.stem.startswith(x) for x in prefixes)]
    return found


def repository_url() -> str:
    """The course repository (pyproject.toml, [project.urls] Repository)."""
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["urls"]["Repository"]


# Added here, in one place, to the top of every notebook's first code cell (the sources stay
# free of it). On Colab, a notebook opened from GitHub has no posenc_lib: this clones the course
# and installs it (editable, so results/ is found and a restarted runtime still imports it;
# --no-deps: Colab has torch, numpy, matplotlib and ipywidgets), then brings transformers, whose
# behaviour the chapters check, to the version of the lock (requirements/lab.txt) when Colab's
# differs. Anywhere else it does nothing.
COLAB_INSTALL = """\
# On Colab only (nothing happens elsewhere): fetch the course and install posenc_lib from it.
import importlib.metadata
import importlib.util
import os
import subprocess
import sys

if "google.colab" in sys.modules and importlib.util.find_spec("posenc_lib") is None:
    subprocess.run(["git", "clone", "-q", "--depth", "1", "{repo}", "posenc"], check=True)
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "-e", "./posenc"], check=True)
    sys.path.insert(0, os.path.abspath("posenc"))  # importable now, without restarting the runtime
    with open("posenc/requirements/lab.txt") as lock:  # the transformers the stored outputs were made with
        locked = next(line.split()[0] for line in lock if line.startswith("transformers=="))
    try:
        installed = "transformers==" + importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    if installed != locked:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", locked], check=True)
"""


def colab_install(repo: str | None = None) -> str:
    return COLAB_INSTALL.format(repo=repo or repository_url())


def to_notebook(src: Path) -> nbformat.NotebookNode:
    nb = jupytext.read(src, fmt="py:percent")
    first = next((c for c in nb.cells if c.cell_type == "code"), None)
    if first is not None:
        first.source = colab_install() + "\n" + first.source
    nb.metadata = {
        "kernelspec": KERNELSPEC,
        "language_info": {"name": "python"},
        "jupytext": {"text_representation": {"format_name": "percent", "extension": ".py"}},
    }
    # A graded check runs after the worked solution and its feedback explains that solution:
    # fold its output, as the solution's source is folded, so a learner reading the stored
    # notebook meets neither before trying. (make_student unfolds it for graded copies.)
    for cell in nb.cells:
        if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade"):
            cell.metadata.setdefault("jupyter", {})["outputs_hidden"] = True
    # Cell ids from the cell's place and text, not random: rebuilding an unchanged source
    # gives an unchanged notebook, so diffs show only what changed.
    for i, cell in enumerate(nb.cells):
        cell.id = f"c{i:03d}-{hashlib.sha1(cell.source.encode()).hexdigest()[:8]}"
    return nb


def coalesce_streams(outputs: list) -> list:
    """Merge consecutive stdout (or stderr) outputs into one: how the kernel happened to flush
    a cell's prints must not change the stored notebook."""
    merged: list = []
    for out in outputs:
        prev = merged[-1] if merged else None
        if out.output_type == "stream" and prev is not None and prev.output_type == "stream" \
                and prev.name == out.name:
            prev.text += out.text
        else:
            merged.append(out)
    return merged


def kernel_environment() -> None:
    """Same environment for every kernel this process starts: seeds are set inside the notebooks;
    hash seed and thread count here so dict order and float reductions repeat exactly."""
    os.environ.update(PYTHONHASHSEED="0", OMP_NUM_THREADS="2", MPLBACKEND="module://matplotlib_inline.backend_inline")
    for switch in ("POSENC_DEVICE", "POSENC_GRADING"):  # the stored outputs are the CPU's, in self-study mode
        os.environ.pop(switch, None)


def build(src: Path, timeout: int = 600) -> float:
    nb = to_notebook(src)
    kernel_environment()
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(NB_DIR)}},
                            record_timing=False, store_widget_state=False)
    t0 = time.perf_counter()
    client.execute()
    elapsed = time.perf_counter() - t0
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.outputs = coalesce_streams(cell.outputs)
    out = NB_DIR / f"{src.stem}.ipynb"
    nbformat.write(nb, out)
    return elapsed


def main(argv: list[str]) -> int:
    todo = sources(argv)
    if not todo:
        print(f"no notebook sources match {argv} in {SRC_DIR}", file=sys.stderr)
        return 1
    for src in todo:
        print(f"executing {src.relative_to(ROOT)} ...", end=" ", flush=True)
        print(f"{build(src):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
