"""The stored notebooks are what their sources say, executed in order, with honest tags."""
import re
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
SOURCES = sorted((NB_DIR / "src").glob("[0-9][0-9]_*.py"))
CHAPTERS = [p for p in SOURCES if not p.stem.startswith("00")]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
ids = [p.stem for p in SOURCES]


def stored(src: Path) -> nbformat.NotebookNode:
    return nbformat.read(NB_DIR / f"{src.stem}.ipynb", as_version=4)


def test_there_are_notebooks():
    assert SOURCES, "notebooks/src is empty"


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_stored_notebook_matches_its_source(src):
    """Edit the source and run `make notebooks`; never the JSON."""
    want = jupytext.read(src, fmt="py:percent").cells
    have = stored(src).cells
    assert [(c.cell_type, c.source) for c in have] == [(c.cell_type, c.source) for c in want]
    for h, w in zip(have, want):
        for key in ("tags", "jupyter", "slideshow"):
            assert h.metadata.get(key) == w.metadata.get(key), f"metadata {key!r} differs in cell:\n{h.source[:200]}"


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_stored_notebook_was_executed_top_to_bottom_without_errors(src):
    code = [c for c in stored(src).cells if c.cell_type == "code"]
    assert [c.execution_count for c in code] == list(range(1, len(code) + 1))
    for c in code:
        assert not any(o.output_type == "error" for o in c.outputs), c.source[:200]


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_ignored_outputs_are_widgets_or_give_a_reason(src):
    """nbval-ignore-output only on widget cells, or with a '# nbval-ignore-output: <reason>' line."""
    for c in stored(src).cells:
        if c.cell_type != "code":
            continue
        src_text = c.source
        assert "NBVAL_SKIP" not in src_text and "nbval-skip" not in c.metadata.get("tags", [])
        if "nbval-ignore-output" in c.metadata.get("tags", []) or "NBVAL_IGNORE_OUTPUT" in src_text:
            is_widget = any(WIDGET_MIME in o.get("data", {}) for o in c.outputs)
            has_reason = re.search(r"^# nbval-ignore-output: \S.{5,}", src_text, re.M)
            assert is_widget or has_reason, f"ignored output without a reason:\n{src_text[:300]}"


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_every_widget_follows_a_static_figure(src):
    """Readers without a kernel (GitHub, nbviewer) still see the picture."""
    last_png = False
    for c in stored(src).cells:
        if c.cell_type != "code" or not c.outputs:
            continue
        if any(WIDGET_MIME in o.get("data", {}) for o in c.outputs):
            assert last_png, f"widget without a static figure before it:\n{c.source[:300]}"
        last_png = any("image/png" in o.get("data", {}) for o in c.outputs)


@pytest.mark.parametrize("src", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_has_three_to_five_checked_exercises_with_passing_hidden_solutions(src):
    cells = [c for c in stored(src).cells if c.cell_type == "code"]
    exercises = {m for c in cells for m in re.findall(r"check\.(\w+)\(", c.source)}
    assert 3 <= len(exercises) <= 5, f"{sorted(exercises)}"
    for name in exercises:
        calls = [c for c in cells if f"check.{name}(" in c.source]
        text = lambda c: "".join(o.get("text", "") for o in c.outputs if o.output_type == "stream")
        assert any("not attempted yet" in text(c) for c in calls), f"{name}: no learner cell left unattempted"
        solutions = [c for c in calls if c.metadata.get("jupyter", {}).get("source_hidden")]
        assert solutions, f"{name}: no collapsed solution cell"
        assert all("all correct!" in text(c) and "✗" not in text(c) for c in solutions), f"{name}: solution fails"


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_notebook_reads_nothing_outside_the_project(src):
    text = src.read_text()
    assert "shared/" not in text and ".cuda()" not in text
