"""The Colab install lines on top of every notebook's first code cell (scripts/build_notebooks.py).

On Colab they clone the course and install posenc_lib when it is missing; anywhere else, or when
posenc_lib is already there, they do nothing. Tested with the lines as the stored notebooks hold
them, a local git repository standing in for the GitHub address, and a stub `google.colab` module.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import nbformat
import pytest
from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
build_notebooks = load_script("build_notebooks")
REPO = build_notebooks.repository_url()

ON_COLAB = "import sys, types\nsys.modules['google.colab'] = types.ModuleType('google.colab')\n"


def first_code(nb_path: Path) -> str:
    return next(c.source for c in nbformat.read(nb_path, as_version=4).cells if c.cell_type == "code")


def guard(repo: str) -> str:
    """The install lines of the stored notebooks, with `repo` in place of the course's address."""
    lines = build_notebooks.colab_install(repo)
    assert lines == build_notebooks.colab_install().replace(REPO, repo)  # only the address differs
    return lines


def run(python: str | Path, code: str, cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "VIRTUAL_ENV"}}
    return subprocess.run([str(python), "-c", code], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout)


def test_every_notebook_opens_with_the_install_lines_and_the_repository_address():
    assert NOTEBOOKS
    assert REPO.startswith("https://github.com/")
    for nb_path in NOTEBOOKS:
        assert first_code(nb_path).startswith(build_notebooks.colab_install()), nb_path.name
    assert f'"git", "clone", "-q", "--depth", "1", "{REPO}"' in build_notebooks.colab_install()


def test_outside_colab_the_lines_do_nothing(tmp_path):
    """A missing repository would make the clone fail: nothing runs, so nothing fails."""
    r = run(sys.executable, guard(str(tmp_path / "no-such-repo")), tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "posenc").exists() and r.stdout == ""


def test_on_colab_with_posenc_lib_installed_the_lines_do_nothing(tmp_path):
    r = run(sys.executable, ON_COLAB + guard(str(tmp_path / "no-such-repo")), tmp_path)
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "posenc").exists()


def course_repository(dest: Path, lock_transformers: str | None = None) -> Path:
    """A git repository with what the lines need from the course: the package, its metadata, results/."""
    dest.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for name in ("posenc_lib", "results", "requirements"):
        shutil.copytree(ROOT / name, dest / name, ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    if lock_transformers is not None:  # a lock that names another transformers than the one installed
        lab = dest / "requirements" / "lab.txt"
        lab.write_text(re.sub(r"^transformers==\S+", f"transformers=={lock_transformers}", lab.read_text(), flags=re.M))
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@t", "-c", "init.defaultBranch=main"]
    for cmd in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "course"]):
        subprocess.run(git + cmd, check=True, capture_output=True)
    return dest


def colab_like_venv(tmp_path: Path) -> tuple[Path, Path]:
    """A fresh venv that has Colab's preinstalled packages (torch, numpy, matplotlib, ipywidgets,
    transformers: this venv's, on a path) but not posenc_lib; and Colab's working directory."""
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    site = run(py, "import sysconfig; print(sysconfig.get_paths()['purelib'])", tmp_path).stdout.strip()
    # This venv's packages on the path, without running its .pth files: posenc_lib's editable
    # install is one of those, so posenc_lib itself stays missing.
    Path(site, "colab_preinstalled.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    content = tmp_path / "content"
    content.mkdir()
    missing = run(py, "import importlib.util; print(importlib.util.find_spec('posenc_lib'))", content)
    assert missing.stdout.strip() == "None", missing.stderr
    return py, content


@pytest.mark.timeout(600)
def test_on_colab_without_posenc_lib_the_lines_install_it(tmp_path):
    """After the lines, posenc_lib imports from the clone in the same process (no restart), the
    committed results are found, and a new process (a restarted runtime) imports it too while the
    lines then do nothing. Colab's transformers here is the locked one, so pip is not asked for it."""
    repo = course_repository(tmp_path / "course")
    py, content = colab_like_venv(tmp_path)

    check = textwrap.dedent("""
        import json, os
        import posenc_lib
        from posenc_lib.experiments import extrapolation as ex
        print(posenc_lib.__file__)
        print(ex.load_results() == json.load(open(os.path.join(os.path.dirname(posenc_lib.__file__), "..",
                                                            "results", "extrapolation.json"))))
        print(tuple(posenc_lib.sinusoidal_positions(4, 8).shape))
    """)
    first = run(py, ON_COLAB + guard(str(repo)) + check, content)
    assert first.returncode == 0, first.stderr[-3000:]
    lines = first.stdout.splitlines()
    assert Path(lines[0]).resolve() == (content / "posenc" / "posenc_lib" / "__init__.py").resolve()
    assert lines[1:] == ["True", "(4, 8)"]  # the clone's results/ (chapters 6-8 read them); a formula runs

    again = run(py, ON_COLAB + guard(str(tmp_path / "no-such-repo")) + check, tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert Path(again.stdout.splitlines()[0]).resolve() == (content / "posenc" / "posenc_lib" / "__init__.py").resolve()


@pytest.mark.timeout(600)
def test_on_colab_a_transformers_other_than_the_locked_one_is_replaced(tmp_path):
    """The lock names a transformers other than the installed one (0.0.1, which no index has): the
    lines clone and install the course, then ask pip for exactly the locked version, and pip's
    failure to find it shows what was asked."""
    repo = course_repository(tmp_path / "course", lock_transformers="0.0.1")
    py, content = colab_like_venv(tmp_path)
    r = run(py, ON_COLAB + guard(str(repo)), content)
    assert r.returncode != 0
    assert (content / "posenc" / "posenc_lib").is_dir()  # the course was cloned first
    assert "transformers==0.0.1" in r.stderr and "'install', '-q', 'transformers==0.0.1'" in r.stderr, r.stderr[-3000:]
