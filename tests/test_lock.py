"""The lock (requirements/lab.txt, requirements/test.txt): what every install reads, kept in step.

Every way in (make lab, make test, .ci/run, binder/, environment.yml) installs the versions the
stored notebook outputs were made with; these tests keep the files saying so.
"""
import importlib.metadata as md
import re
import sys
import sysconfig
import tomllib
from pathlib import Path

import pytest
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[1]
LOCKS = {"lab": ROOT / "requirements" / "lab.txt", "test": ROOT / "requirements" / "test.txt"}
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
MAKEFILE = (ROOT / "Makefile").read_text()
TORCH_VERSION = re.search(r"^TORCH_VERSION := (\S+)$", MAKEFILE, re.M).group(1)
TEST_TOOLS = {"pytest", "nbval", "playwright", "nbgrader", "jupyterhub", "hypothesis", "nbgitpuller"}


def lock(name: str) -> dict[str, tuple[Version, str]]:
    """name -> (pinned version, marker text) for every entry of a lock."""
    out = {}
    for line in LOCKS[name].read_text().splitlines():
        if not line or line[0].isspace() or line.startswith("#"):
            continue
        req = Requirement(line)
        spec = list(req.specifier)
        assert len(spec) == 1 and spec[0].operator == "==", f"{LOCKS[name].name}: {line!r} is not one exact pin"
        key = canonicalize_name(req.name)
        assert key not in out, f"{LOCKS[name].name} pins {key} twice: one version for every platform"
        out[key] = (Version(spec[0].version), str(req.marker or ""))
    return out


def direct(name: str) -> set[str]:
    """Packages the lock holds because pyproject.toml asks for them (uv's `# via` notes)."""
    out, current = set(), None
    for line in LOCKS[name].read_text().splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            current = canonicalize_name(Requirement(line).name)
        elif current and re.fullmatch(r"\s+#\s+(via\s+)?posenc-lib \(pyproject\.toml\)", line):
            out.add(current)
    return out


def wanted(*extras: str) -> list[Requirement]:
    reqs = PYPROJECT["project"]["dependencies"] + [r for e in extras for r in PYPROJECT["project"]["optional-dependencies"][e]]
    return [Requirement(r) for r in reqs]


SETS = {"lab": ("lab",), "test": ("lab", "test", "site")}


@pytest.mark.parametrize("name", LOCKS)
def test_every_entry_is_one_exact_pin_for_every_platform(name):
    pins = lock(name)
    assert len(pins) > 50  # the transitive closure, not only the direct dependencies
    # lock() refuses a second pin of a package: markers only say where a package is needed at
    # all (appnope on macOS, pywin32 on Windows), never which version, so the platforms agree.
    assert "--universal" in LOCKS[name].read_text().split("\n", 2)[1]


# Triton is the one library of a CUDA torch the test set asks for itself (tests/test_rope_triton.py runs the
# GPU kernel under its interpreter), on Linux x86-64 only, where Triton and a CUDA torch both ship wheels.
TRITON_MARKER = "sys_platform == 'linux' and platform_machine == 'x86_64'"


@pytest.mark.parametrize("name", LOCKS)
def test_torch_and_cuda_libraries_are_left_to_torch_spec(name):
    pins = lock(name)
    assert not {p for p in pins if p == "torch" or p.startswith(("nvidia-", "cuda-"))}
    # ... but torch's own pure-Python dependencies are locked.
    assert {"sympy", "networkx", "filelock", "jinja2", "fsspec", "typing-extensions"} <= set(pins)
    assert f"torch=={TORCH_VERSION}" in LOCKS[name].read_text()  # resolved at the Makefile's torch


def test_triton_is_locked_for_the_tests_on_linux_x86_64_at_the_version_torch_requires():
    """In the test set only, under exactly pyproject's marker (not macOS, Windows or Linux on ARM), and
    resolved together with torch (``# via torch``): the version torch's own Linux wheel pins, so
    installing a CUDA torch through TORCH_SPEC after the lock changes nothing."""
    assert "triton" not in lock("lab")
    version, marker = lock("test")["triton"]
    assert Marker(marker) == Marker(TRITON_MARKER)
    assert Requirement(next(r for r in PYPROJECT["project"]["optional-dependencies"]["test"]
                            if r.startswith("triton"))).marker == Marker(TRITON_MARKER)
    lines = LOCKS["test"].read_text().splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("triton=="))
    via = []
    for line in lines[start + 1:]:
        if not line[:1].isspace():
            break
        via.append(line.strip("# ").strip())
    assert "torch" in via and "posenc-lib (pyproject.toml)" in via, via
    for platform in ({"sys_platform": "darwin", "platform_machine": "arm64"},
                     {"sys_platform": "win32", "platform_machine": "AMD64"},
                     {"sys_platform": "linux", "platform_machine": "aarch64"}):
        assert not Marker(marker).evaluate(platform)
    assert Marker(marker).evaluate({"sys_platform": "linux", "platform_machine": "x86_64"})


@pytest.mark.parametrize("name", LOCKS)
def test_lock_holds_what_pyproject_asks_for_within_its_floors(name):
    pins = lock(name)
    for req in wanted(*SETS[name]):
        key = canonicalize_name(req.name)
        if key == "torch":
            assert Version(TORCH_VERSION) in req.specifier
            continue
        assert key in pins, f"pyproject asks for {req}; requirements/{name}.txt lacks it: run `make lock`"
        assert pins[key][0] in req.specifier, f"{key}=={pins[key][0]} is outside pyproject's {req}"


@pytest.mark.parametrize("name", LOCKS)
def test_lock_was_written_from_this_pyproject(name):
    """A dependency added to (or dropped from) pyproject.toml without `make lock` fails here."""
    asked = {canonicalize_name(r.name) for r in wanted(*SETS[name])} - {"torch"}
    assert direct(name) == asked, "pyproject.toml and the lock disagree: run `make lock`"


def test_lab_lock_is_the_test_lock_without_the_test_tools():
    lab, test = lock("lab"), lock("test")
    assert lab.items() <= test.items(), "every lab version is one that `make test` tested"
    assert not TEST_TOOLS & set(lab)
    assert TEST_TOOLS <= set(test)
    assert {"jupyterlab", "ipywidgets", "matplotlib", "numpy", "transformers"} <= set(lab)


def test_makefile_installs_the_locks_and_only_the_locks():
    lab = MAKEFILE.split("\n$(LAB_STAMP):")[1].split("\n\n")[0]
    test = MAKEFILE.split("\n$(TEST_STAMP):")[1].split("\n\n")[0]
    assert "pip install --quiet --no-deps -r $(LAB_LOCK)" in lab and "$(TEST_LOCK)" not in lab
    assert "pip install --quiet --no-deps -r $(TEST_LOCK)" in test
    assert "--no-deps --no-build-isolation -e ." in lab  # posenc_lib itself, with the locked setuptools
    assert "$(TORCH_SPEC)" in lab and "pip check" in lab and "pip check" in test
    assert re.search(r"^LAB_LOCK := requirements/lab\.txt$", MAKEFILE, re.M)
    assert re.search(r"^TEST_LOCK := requirements/test\.txt$", MAKEFILE, re.M)
    assert re.search(r"^lab: \$\(LAB_STAMP\)$", MAKEFILE, re.M)  # the learner's set only
    assert re.search(r"^test: \$\(TEST_STAMP\)$", MAKEFILE, re.M)


def requirement_lines(text: str) -> list[str]:
    return [ln.split("#", 1)[0].strip() for ln in text.splitlines() if ln.split("#", 1)[0].strip()]


def test_binder_installs_the_lab_lock_and_the_makefiles_cpu_torch():
    lines = requirement_lines((ROOT / "binder" / "requirements.txt").read_text())
    assert lines == ["--extra-index-url https://download.pytorch.org/whl/cpu", "-r ../requirements/lab.txt",
                     f"torch=={TORCH_VERSION}+cpu"]


def test_environment_yml_installs_the_lab_lock_and_the_makefiles_torch_with_pip():
    text = (ROOT / "environment.yml").read_text()
    assert re.search(r"^\s+- python=3\.11$", text, re.M)
    pip_block = text.split("- pip:", 1)[1]
    assert requirement_lines(re.sub(r"^\s*- ", "", pip_block, flags=re.M)) == [
        "--extra-index-url https://download.pytorch.org/whl/cpu", "-r requirements/lab.txt", f"torch=={TORCH_VERSION}"]
    conda_items = re.findall(r"^  - (\S+)$", text.split("dependencies:", 1)[1].split("- pip:", 1)[0], re.M)
    assert conda_items == ["python=3.11", "pip"], "conda installs only Python and pip: the lock does the rest"


def test_binder_and_conda_python_is_the_locks_python():
    assert (ROOT / "binder" / "runtime.txt").read_text().strip() == "python-3.11"
    for path in LOCKS.values():
        assert "for Python 3.11" in path.read_text().splitlines()[0]


def installed() -> dict[str, Version]:
    """What pip installed into this venv (site-packages only: setuptools puts vendored copies on sys.path)."""
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    return {canonicalize_name(d.metadata["Name"]): Version(d.version) for d in md.distributions(path=paths)}


@pytest.mark.skipif(not (Path(sys.prefix) / ".posenc-test").exists(),
                    reason="runs inside the venv `make test` builds from the lock (.venv)")
def test_this_venv_holds_exactly_the_locked_versions():
    """The venv `make test` built (fresh in CI) has every locked package at its pin, and nothing else."""
    env = {"extra": ""}
    expected = {p: v for p, (v, marker) in lock("test").items() if not marker or Marker(marker).evaluate(env)}
    have = installed()
    wrong = {p: (str(v), str(have.get(p))) for p, v in expected.items() if have.get(p) != v}
    assert not wrong, f"locked vs installed: {wrong}"
    torch_deps = {canonicalize_name(Requirement(r).name) for r in md.requires("torch") or []}
    extra = set(have) - set(expected) - {"torch", "posenc-lib", "pip"} - torch_deps
    assert not extra, f"installed but not locked: {sorted(extra)}"
    assert str(have["torch"]).split("+")[0] == TORCH_VERSION


def test_readme_says_what_the_lock_is_and_what_each_command_installs():
    from _readme import section

    text = section("Two commands")
    assert "requirements/lab.txt" in text and "requirements/test.txt" in text
    assert f"torch=={TORCH_VERSION}" in text
    assert re.search(r"\d(\.\d)? GB", text) and re.search(r"\d+ (s|min)", text), "size and first-run time"
