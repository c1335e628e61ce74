"""The project's own promises: install metadata, make targets, the README's commands."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CONDA_NAMES = {"torch": "pytorch"}  # conda-forge packages PyTorch as "pytorch"


def _name(req: str) -> str:
    return re.split(r"[<>=!~\[ ;]", req.strip(), maxsplit=1)[0].lower()


def pyproject_requirements() -> set[str]:
    import tomllib

    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(meta["dependencies"])
    for extra in meta["optional-dependencies"].values():
        reqs += extra
    return {CONDA_NAMES.get(_name(r), _name(r)) for r in reqs}


def environment_requirements() -> set[str]:
    names = set()
    deps = (ROOT / "environment.yml").read_text().split("dependencies:", 1)[1]
    for line in deps.splitlines():
        m = re.match(r"\s*-\s+([A-Za-z0-9_.\-]+)", line)
        if m and m.group(1) not in {"python", "pip", "-e"}:
            names.add(_name(m.group(1)))
    return names


def test_environment_yml_lists_the_same_packages_as_pyproject():
    assert environment_requirements() == pyproject_requirements()


def make_targets() -> set[str]:
    out = subprocess.run(["make", "-pRrq", "-C", str(ROOT)], capture_output=True, text=True).stdout
    return {m.group(1) for m in re.finditer(r"^([a-zA-Z][\w-]*):", out, re.M)}


def test_every_make_command_in_readme_is_a_target():
    readme = (ROOT / "README.md").read_text()
    named = set(re.findall(r"`make ([a-z][\w-]*)", readme))
    assert {"lab", "test"} <= named
    assert named <= make_targets(), f"README names targets the Makefile lacks: {named - make_targets()}"


def test_ci_runs_make_test():
    assert re.search(r"^make test\b", (ROOT / ".ci" / "run").read_text(), re.M)


def test_make_test_runs_nbval_strict_over_notebooks():
    text = (ROOT / "Makefile").read_text()
    recipe = text.split("\ntest:")[1].split("\n\n")[0]
    assert "--nbval " in recipe and "--nbval-lax" not in recipe and "notebooks" in recipe


def test_torch_is_pinned_to_the_local_cpu_wheel_by_default():
    assert re.search(r"^TORCH_SPEC \?= torch==2\.13\.0$", (ROOT / "Makefile").read_text(), re.M)


def test_package_imports_from_this_checkout():
    import posenc_lib

    assert Path(posenc_lib.__file__).resolve().parent == ROOT / "posenc_lib"
