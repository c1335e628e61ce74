"""Write the locks every install reads: requirements/lab.txt and requirements/test.txt.

    python scripts/lock.py --uv .venv-tools/bin/uv --torch 2.13.0   (what `make lock` runs)

uv resolves pyproject.toml's dependencies and extras to the newest releases, once for every
platform and Python >= 3.11 (`--universal`), preferring one version per package across them
(`--fork-strategy fewest`), so Linux, macOS and Windows install the same versions:
  requirements/test.txt  runtime + `lab` + `test` + `site` extras (what `make test`, `make site`
                         and CI install)
  requirements/lab.txt   runtime + `lab` extra, at the same versions as test.txt (`make lab`,
                         binder/, environment.yml)
torch itself is resolved at the Makefile's version (so its dependencies are locked too) but
left out of the files, with the CUDA libraries only a Linux PyPI torch pulls (nvidia-*,
cuda-*, triton): the Makefile installs torch from TORCH_SPEC, a CPU wheel by default or a GPU
build where the user asks for one. One of them pyproject asks for itself: triton, in the test
set on Linux x86-64 (the GPU kernel's tests run under its interpreter). The lock keeps it under
pyproject's own marker, at the version the resolver chose together with torch, which is the
one torch's Linux wheel requires, so a GPU install through TORCH_SPEC agrees with the lock.
"""
from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PYTHON = "3.11"  # the oldest Python pyproject allows; binder/runtime.txt and environment.yml use it
LOCKS = {"test": ("lab", "test", "site"), "lab": ("lab",)}  # file -> extras; test first: lab is pinned to it
# Installed by TORCH_SPEC, not from the lock: torch and what only a CUDA build of it needs
# (unless pyproject asks for it itself: ``asked``).
NOT_LOCKED = re.compile(r"^(torch|triton|nvidia-[\w.-]+|cuda-[\w.-]+)$")
HEADER = """\
# THE LOCK ({name}): every package {who} installs, for Python {python} and later on Linux, macOS and Windows.
# Written by `make lock` (scripts/lock.py, uv {uv_version}, --universal): one version per package
# on every platform; do not edit by hand.
# Install with `pip install --no-deps -r requirements/{name}.txt`, then torch from the Makefile's
# TORCH_SPEC (torch=={torch}: its pure-Python dependencies are pinned here, torch and the CUDA
# libraries of a GPU build are not, except what pyproject asks for itself), then `pip install --no-deps -e .`.
"""
WHO = {"test": "`make test` (and .ci/run)", "lab": "`make lab`, binder/ and environment.yml"}


def entries(text: str) -> list[str]:
    """uv's output split into one block per package (the pin line and its `# via` comments)."""
    blocks: list[str] = []
    for line in text.splitlines(keepends=True):
        if line.startswith("#") and not blocks:
            continue  # uv's own header
        if not line[:1].isspace():
            blocks.append(line)
        elif blocks:
            blocks[-1] += line
    return blocks


def name_of(block: str) -> str:
    return re.match(r"[A-Za-z0-9][\w.-]*", block).group(0).lower()


def asked(extras: tuple[str, ...]) -> dict[str, str]:
    """name -> environment marker ("" for none) of what pyproject.toml lists for these extras."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    out = {}
    for line in project["dependencies"] + [r for e in extras for r in project["optional-dependencies"][e]]:
        spec, _, marker = line.partition(";")
        out[re.match(r"[A-Za-z0-9][\w.-]*", spec.strip()).group(0).lower()] = marker.strip()
    return out


def with_marker(block: str, marker: str) -> str:
    """A lock entry with its pin line's marker replaced by ``marker``."""
    pin, _, rest = block.partition("\n")
    pin = pin.split(";")[0].rstrip() + (f" ; {marker}" if marker else "")
    return f"{pin}\n{rest}"


def compile_lock(uv: str, extras: tuple[str, ...], out: Path, constraints: list[Path], build_in: Path) -> None:
    cmd = [uv, "pip", "compile", "pyproject.toml", str(build_in), "--universal", "--python-version", PYTHON,
           "--fork-strategy", "fewest", "--upgrade", "--no-header", "--quiet", "-o", str(out)]
    for extra in extras:
        cmd += ["--extra", extra]
    for c in constraints:
        cmd += ["-c", str(c)]
    subprocess.run(cmd, cwd=ROOT, check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--uv", default="uv", help="the uv executable")
    ap.add_argument("--torch", required=True, help="torch's version (the Makefile's TORCH_VERSION)")
    ap.add_argument("--keep", nargs="*", default=[], type=Path, metavar="LOCK",
                    help="earlier lock files whose versions stay (e.g. both sides of a merge): "
                         "only packages they do not name are resolved to the newest release")
    args = ap.parse_args(argv)
    uv_version = subprocess.run([args.uv, "--version"], capture_output=True, text=True, check=True).stdout.split()[1]
    build_requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    out_dir = ROOT / "requirements"
    out_dir.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        torch_pin = tmp / "torch.txt"
        torch_pin.write_text(f"torch=={args.torch}\n")
        build_in = tmp / "build.in"  # setuptools: `pip install --no-build-isolation -e .` uses the locked one
        build_in.write_text("\n".join(build_requires) + "\n")
        for name, extras in LOCKS.items():
            raw = tmp / f"{name}.txt"
            # lab is resolved inside test's pins, so every lab version is one CI tested.
            constraints = [torch_pin] + ([out_dir / "test.txt"] if name == "lab" else args.keep)
            compile_lock(args.uv, extras, raw, constraints, build_in)
            text = raw.read_text().replace(f"-r {build_in}", "pyproject.toml [build-system]")
            text = text.replace(f"-c {torch_pin}", f"torch=={args.torch} (TORCH_SPEC)")
            wanted = {n: m for n, m in asked(extras).items() if n != "torch"}  # torch: always TORCH_SPEC
            # A CUDA library pyproject asks for itself stays, under pyproject's marker (uv's is the union
            # with torch's, which would install it wherever torch's Linux wheel would).
            kept = [with_marker(b, wanted[name_of(b)]) if NOT_LOCKED.match(name_of(b)) else b
                    for b in entries(text) if not NOT_LOCKED.match(name_of(b)) or name_of(b) in wanted]
            header = HEADER.format(name=name, who=WHO[name], python=PYTHON, uv_version=uv_version, torch=args.torch)
            (out_dir / f"{name}.txt").write_text(header + "".join(kept))
            print(f"requirements/{name}.txt: {len(kept)} packages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
