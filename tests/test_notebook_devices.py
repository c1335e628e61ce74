"""Every chapter, opted in to an accelerator, runs there and prints its stored outputs: checked without a GPU.

Each chapter runs under nbval (strict: every stored output compared) in a kernel whose
``POSENC_DEVICE`` is the stand-in accelerator of tests/_standin.py: PyTorch's ``lazy`` device,
whose tensors do not mix with the CPU's, refusing float64 (as MPS does) and random draws off the
CPU (a GPU's generator is not the CPU's). Its arithmetic is the CPU's, so a chapter that draws on
the CPU and keeps float64 there prints exactly its stored text; on a real GPU the same run is
``make test-gpu``'s ``POSENC_DEVICE=cuda`` pass, where only rounding may differ.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import _standin

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
pytestmark = [pytest.mark.standin,
              pytest.mark.skipif(_standin.available() is not None, reason=str(_standin.available()))]


def run_under_standin(notebook: Path, tmp_path: Path, *nbval: str) -> subprocess.CompletedProcess:
    _standin.startup_file(tmp_path / "ipython")
    env = {k: v for k, v in os.environ.items() if k != "POSENC_GRADING"}
    env.update(IPYTHONDIR=str(tmp_path / "ipython"), POSENC_DEVICE=_standin.DEVICE, MPLBACKEND="Agg")
    return subprocess.run(
        [sys.executable, "-m", "pytest", str(notebook), *nbval, "--nbval-current-env", "-q", "-p", "no:cacheprovider",
         "--nbval-sanitize-with", str(ROOT / "notebooks" / "sanitize.cfg"), "--rootdir", str(tmp_path)],
        cwd=ROOT / "notebooks", env=env, capture_output=True, text=True, timeout=1200)


@pytest.mark.parametrize("notebook", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_on_an_accelerator_prints_its_stored_outputs(notebook, tmp_path):
    run = run_under_standin(notebook, tmp_path, "--nbval")
    assert run.returncode == 0, f"{notebook.name} on the stand-in accelerator:\n{run.stdout[-6000:]}"


def _one_cell_chapter(tmp_path: Path, line: str) -> Path:
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("import torch\nimport posenc_lib as pl\n\ndevice = pl.default_device()\n"
                                          + line)]
    path = tmp_path / "chapter.ipynb"
    nbformat.write(nb, path)
    return path


@pytest.mark.parametrize("line, refusal", [
    ("x = torch.randn(4, 8, device=device)", "random draw"),
    ("w = torch.nn.Linear(8, 8, device=device)", "random draw"),
    ("x = torch.randn(4, 8).to(device).double()", "float64"),
    ("x = torch.zeros(3, dtype=torch.float64).to(device)", "float64"),
    ("x = torch.randn(4, 8).to(device) + torch.randn(4, 8)", "lazy tensor"),  # a CPU tensor meets a device tensor
])
def test_a_chapter_that_draws_or_widens_on_the_device_fails(tmp_path, line, refusal):
    """The issue's acceptance check: a draw on the device, float64 there, or mixed devices fail the chapter."""
    run = run_under_standin(_one_cell_chapter(tmp_path, line), tmp_path, "--nbval-lax")
    assert run.returncode != 0 and refusal in run.stdout, run.stdout[-3000:]


def test_the_same_cell_done_right_passes(tmp_path):
    line = ("x = torch.randn(4, 8).to(device)\nw = torch.nn.Linear(8, 8).to(device)\n"
            "y = w(x).cpu().double()\nassert x.device.type == 'lazy' and y.dtype == torch.float64")
    run = run_under_standin(_one_cell_chapter(tmp_path, line), tmp_path, "--nbval-lax")
    assert run.returncode == 0, run.stdout[-3000:]
