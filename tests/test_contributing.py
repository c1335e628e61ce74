"""CONTRIBUTING.md's module table stays true: every library module has a row, every named test file exists."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TEXT = (ROOT / "CONTRIBUTING.md").read_text()
ROWS = [line for line in TEXT.splitlines() if line.startswith("| `")]


def table_modules() -> set[str]:
    return {re.match(r"\| `([^`]+)`", row).group(1) for row in ROWS}


def library_modules() -> set[str]:
    found = set()
    for path in (ROOT / "posenc_lib").rglob("*.py"):
        rel = path.relative_to(ROOT / "posenc_lib").as_posix()
        if path.name == "__init__.py":
            continue
        found.add(re.sub(r"ch\d\d\.py$", "chNN.py", rel))  # one row stands for every chapter's checkers
    return found


def test_every_library_module_has_a_row_and_every_row_a_module():
    assert library_modules() == table_modules()


def test_every_test_file_named_exists():
    named = set(re.findall(r"`(test_\w+\.py)`", TEXT)) | set(re.findall(r"tests/(test_\w+\.py)", TEXT))
    assert named, "CONTRIBUTING.md names no test files"
    for name in named:
        if "chNN" in name:
            assert sorted(ROOT.glob(f"tests/{name.replace('NN', '[0-9][0-9]')}")), name
        else:
            assert (ROOT / "tests" / name).exists(), f"CONTRIBUTING.md names tests/{name}, which does not exist"
