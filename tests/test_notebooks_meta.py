"""The stored notebooks are what their sources say, executed in order, with honest tags."""
import re
from pathlib import Path

import jupytext
import nbformat
import pytest
from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
SOURCES = sorted((NB_DIR / "src").glob("[0-9][0-9]_*.py"))
# Appendices (title "# Appendix ...") are off the teaching path and carry no exercises.
APPENDICES = [p for p in SOURCES if re.search(r"^# # Appendix\b", p.read_text(), re.M)]
CHAPTERS = [p for p in SOURCES if not p.stem.startswith("00") and p not in APPENDICES]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
ids = [p.stem for p in SOURCES]
build_notebooks = load_script("build_notebooks")


def stored(src: Path) -> nbformat.NotebookNode:
    return nbformat.read(NB_DIR / f"{src.stem}.ipynb", as_version=4)


def test_there_are_notebooks():
    assert SOURCES, "notebooks/src is empty"


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_stored_notebook_matches_its_source(src):
    """Edit the source and run `make notebooks`; never the JSON. (The build adds one thing the
    source lacks: the Colab install lines on top of the first code cell, tests/test_colab.py.)"""
    want = build_notebooks.to_notebook(src).cells
    have = stored(src).cells
    assert [(c.cell_type, c.source) for c in have] == [(c.cell_type, c.source) for c in want]
    for h, w in zip(have, want):
        for key in ("tags", "jupyter", "slideshow", "nbgrader"):
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


def _stream(cell: nbformat.NotebookNode) -> str:
    return "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")


def _exercises_in_nbgrader_form(src: Path) -> list[str]:
    """Per exercise: the self-learner's cell, the collapsed nbgrader solution, the locked graded check.

    The self-learner's cell shows "not attempted yet"; the graded check, run after the instructor's
    solution, shows "all correct!" and nothing else (no stray return value). returns: the checkers' names
    """
    cells = [c for c in stored(src).cells if c.cell_type == "code"]
    graded = [i for i, c in enumerate(cells) if c.metadata.get("nbgrader", {}).get("grade")]
    names = []
    for i in graded:
        check_cell, solution, learner = cells[i], cells[i - 1], cells[i - 2]
        m = re.fullmatch(r"_ = check\.(\w+)\(\w+(?:, \w+)*\)", check_cell.source)  # the answer's names
        assert m, f"a graded cell only calls its checker: {check_cell.source!r}"
        name = m.group(1)
        names.append(name)
        assert check_cell.metadata["nbgrader"] == {"grade": True, "solution": False, "locked": True, "points": 1,
                                                   "grade_id": name, "schema_version": 3}
        assert "all correct!" in _stream(check_cell) and "✗" not in _stream(check_cell), name
        # its feedback explains the worked solution: folded in the stored notebook, like the solution
        assert check_cell.metadata.get("jupyter", {}).get("outputs_hidden") is True, f"{name}: feedback not folded"
        assert [o.output_type for o in check_cell.outputs] == ["stream"], f"{name}: stray output"
        assert solution.metadata.get("nbgrader") == {"grade": False, "solution": True, "locked": False,
                                                     "grade_id": f"{name}_answer", "schema_version": 3}, name
        assert solution.metadata.get("jupyter", {}).get("source_hidden"), f"{name}: solution not collapsed"
        lines = [line.strip() for line in solution.source.splitlines()]
        assert lines.count("### BEGIN SOLUTION") == 1 and lines.index("### BEGIN SOLUTION") < lines.index(
            "### END SOLUTION"), f"{name}: no solution between the markers"
        assert not solution.outputs, f"{name}: the solution cell prints"
        assert "nbgrader" not in learner.metadata and f"_ = check.{name}(" in learner.source, name
        assert not re.search(r"^check\.", learner.source, re.M), f"{name}: once solved, a bare call would show Out: True"
        assert "not attempted yet" in _stream(learner), f"{name}: the learner's cell is not left unattempted"
    assert len(set(names)) == len(names), names
    calls = {m for c in cells for m in re.findall(r"check\.(\w+)\(", c.source)}
    assert calls == set(names), f"checkers called outside an exercise: {calls - set(names)}"
    return names


@pytest.mark.parametrize("src", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_has_three_to_five_exercises_in_nbgrader_form(src):
    assert 3 <= len(_exercises_in_nbgrader_form(src)) <= 5


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_notebook_reads_nothing_outside_the_project(src):
    text = src.read_text()
    assert "shared/" not in text and ".cuda()" not in text


# torch's dispatch mode has no public import path in the locked torch; the appendix counts
# operators with it (a tool it uses, not a claim about torch it checks).
TORCH_PRIVATE_ALLOWED = {"torch.utils._python_dispatch", "torch.utils._pytree"}


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_notebook_checks_other_libraries_by_behaviour_not_by_their_code(src):
    """No chapter reads another package's source or docstrings or imports its private names: a
    new release may rewrite those without changing what the chapter claims (tests/test_upstream_claims.py
    holds what only the code shows)."""
    code = "\n".join(c.source for c in jupytext.read(src).cells if c.cell_type == "code")
    assert "getsource" not in code and "import inspect" not in code
    assert not re.search(r"(?<!pl)\.__doc__", code), "a docstring's text is not behaviour"
    for m in re.finditer(r"^\s*from ([\w.]+) import (.+)$", code, re.M):
        module, names = m.group(1), m.group(2)
        if module.startswith("posenc_lib"):
            continue
        private_module = any(part.startswith("_") for part in module.split("."))
        private_name = re.search(r"(^|[\s,(])_\w", names)
        if private_module or private_name:
            assert module in TORCH_PRIVATE_ALLOWED, f"{src.stem} imports private {module}: {names}"
    for m in re.finditer(r"\b(transformers|torch)((?:\.\w+)+)", code):
        private = [p for p in m.group(2).split(".")[1:] if p.startswith("_") and not p.startswith("__")]
        if private:
            assert f"{m.group(1)}{m.group(2)}".startswith(tuple(TORCH_PRIVATE_ALLOWED)), m.group(0)


@pytest.mark.parametrize("src", APPENDICES, ids=[p.stem for p in APPENDICES])
def test_appendix_is_reading_only_and_links_to_its_chapters(src):
    """Off the lecture path (0 minutes in the lecture table); the appendix on speed has two exercises (a design and
    a prediction), in the chapters' nbgrader form (so `make student` and the grading tests take it like a chapter)."""
    cells = stored(src).cells
    assert len(_exercises_in_nbgrader_form(src)) == (2 if src.stem == "10_making_it_fast" else 0)
    assert re.search(r"\]\(0[1-9]_\w+\.ipynb\)", cells[0].source), "the first cell links to the chapters it extends"


def _exercise_names(src: Path) -> list[str]:
    return [m.group(1) for c in jupytext.read(src, fmt="py:percent").cells
            if c.metadata.get("nbgrader", {}).get("grade")
            for m in [re.fullmatch(r"_ = check\.(\w+)\(\w+(?:, \w+)*\)", c.source)] if m]


def _lecture_table() -> dict[str, dict[str, str]]:
    """{chapter number or "A": {"notebook", "path", "live", "assign"}} from the one lecture table (00_index)."""
    rows = {}
    for line in (NB_DIR / "src" / "00_index.py").read_text().splitlines():
        m = re.match(r"^# \| ([0-9A]) `(\d\d_\w+)` \|(.*)\|$", line)
        if m:
            path, live, assign = (cell.strip() for cell in m.group(3).split("|"))
            rows[m.group(1)] = {"notebook": m.group(2), "path": path, "live": live, "assign": assign}
    return rows


def _number(src: Path) -> str:
    return "A" if src in APPENDICES else str(int(src.stem[:2]))


def test_lecture_table_has_a_row_per_notebook_and_only_in_00_index():
    """One copy of the lecture plan: 00_index holds it, the README links to it."""
    rows = _lecture_table()
    assert {n: r["notebook"] for n, r in rows.items()} == {_number(src): src.stem for src in SOURCES}
    readme = (ROOT / "README.md").read_text()
    assert "notebooks/00_index.ipynb" in readme and not re.search(r"^\| [0-9A] `\d\d_\w+` \|.*§", readme, re.M)


def test_lecture_minutes_fill_each_session():
    """Every path's minutes add up to 40, the 50-minute session less 10 for the exercises; chapter 0's
    minutes open chapter 1's session, and the appendix is reading only."""
    minutes = {n: sum(map(int, re.findall(r"\((\d+)\)", row["path"]))) for n, row in _lecture_table().items()}
    assert minutes.pop("A") == 0
    assert minutes.pop("0") + minutes.pop("1") == 40
    assert set(minutes.values()) == {40}, minutes


def _index_map(heading: str) -> list[list[str]]:
    """The method-by-property table under `heading` in 00_index: per row, the method and the leading mark
    (✔, ✘, ~, – or ?) of each property."""
    text = (NB_DIR / "src" / "00_index.py").read_text()
    section = text[text.index(heading):]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("# ##"):
            break
        if line.startswith("# | ") and not line.startswith("# | method"):
            cells = [c.strip() for c in line[3:].strip().strip("|").split("|")]
            rows.append([cells[0]] + [c.split(" ")[0] for c in cells[1:]])
    return rows


def test_index_shows_the_same_map_twice():
    """00_index shows the map at a glance before the conventions, and again with the evidence in the appendix
    at the end, after the lecture plan: the same methods with the same marks. Columns: 1, 2a, 2b, 3, 4, 5."""
    appendix = "## Appendix: the map with its evidence (read after chapter 9)"
    glance, again = _index_map("## The map at a glance"), _index_map(appendix)
    text = (NB_DIR / "src" / "00_index.py").read_text()
    headings = re.findall(r"^# (## .*)$", text, re.M)  # the page's sections, in order (### not counted)
    assert headings[-1] == appendix and headings.index("## The map at a glance") < headings.index("## Conventions")
    col = {"1": 1, "2a": 2, "2b": 3, "3": 4, "4": 5, "5": 6}
    name = lambda row: re.sub(r" \(ch\. [\d, ]+\)$", "", row[0])  # noqa: E731
    # the glance names the methods bare; the evidence adds the chapters that treat each: same names, same marks
    assert all(re.search(r" \(ch\. [\d, ]+\)$", row[0]) for row in again) and not any("(ch." in row[0] for row in glance)
    assert len(glance) == 9 and glance == [[name(row)] + row[1:] for row in again] and {len(row) for row in glance} == {7}
    assert {mark for row in glance for mark in row[1:]} == {"✔", "✘", "~", "–", "?", "[7]", "[9]"}
    # column 5 of the axial forms is left to chapter 9 (its Exercise 3 asks for it)
    assert {name(row) for row in glance if row[col["5"]] == "[9]"} == {
        "integer $i\\cdot\\mathbf 1$", "normalised $i/m$", "binary", "sinusoidal", "RoPE"}
    assert "[9]" not in {mark for row in glance for i, mark in enumerate(row) if i != col["5"]}
    # column 3 of the methods chapter 7 trains is left to it (its "Predict first" asks for those marks)
    assert {name(row) for row in glance if row[col["3"]] == "[7]"} == {
        "none (NoPE)", "sinusoidal", "relative: Shaw, T5", "RoPE", "ALiBi"}
    assert "[7]" not in {mark for row in glance for i, mark in enumerate(row) if i != col["3"]}
    assert {name(row) for row in glance if row[col["3"]] == "?"} == {"integer $i\\cdot\\mathbf 1$", "binary",
                                                                      "normalised $i/m$"}  # no model trained
    learned = next(row for row in glance if row[0].startswith("learned absolute"))
    assert learned[1:4] == ["?", "?", "✘"]  # columns 1, 2a: training decides; 2b: no added code passes
    assert learned[col["5"]] == "?"  # on a fixed grid ViT's 1-D table learns the 2-D layout: training decides
    assert {name(row) for row in glance if "?" in row[1:]} == {"integer $i\\cdot\\mathbf 1$", "binary",
                                                                "normalised $i/m$", "learned absolute"}
    # 2b: only the methods whose position enters the scores as an offset
    assert {name(row) for row in glance if row[col["2b"]] == "✔"} == {"relative: Shaw, T5", "RoPE", "ALiBi"}


def test_index_sources_table_names_the_chapters_that_cite_each_source():
    """00_index's table of the five sources: a chapter is listed for a source exactly when it cites it."""
    text = (NB_DIR / "src" / "00_index.py").read_text()
    rows = dict(re.findall(r"^# \| `(00\d)` \| .* \| ([\d, ]+) \|$", text, re.M))
    assert sorted(rows) == ["000", "001", "002", "003", "004"]
    for source, listed in rows.items():
        cites = re.compile(rf"`{source}`|[Ss]ources? {source}\b|and {source}\b|{source}'s")
        citing = {int(p.name[:2]) for p in SOURCES if p.name[:2] != "00" and cites.search(p.read_text())}
        assert {int(c) for c in listed.split(", ")} == citing, source


@pytest.mark.parametrize("src", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_lecture_table_row_names_what_the_chapter_has(src):
    """A lecturer plans from this row: its sections, widgets and exercises must exist in the chapter now."""
    row, text = _lecture_table()[_number(src)], src.read_text()
    sections = set(re.findall(r"^# ## (\d+)[ .·]", text, re.M))
    cited = set(re.findall(r"§(\d+)", row["path"] + " " + row["live"]))
    cited |= {str(k) for a, b in re.findall(r"§(\d+)–(\d+)", row["path"]) for k in range(int(a), int(b) + 1)}
    assert cited and cited <= sections, f"sections cited but missing: {sorted(cited - sections, key=int)}"
    widgets = set(re.findall(r"`(\w+_widget)`", row["live"]))
    assert widgets <= set(re.findall(r"^(\w+_widget) = ", text, re.M)), widgets
    in_class, _, at_home = row["assign"].partition(" in class; ")
    names_in_class, names_at_home = set(re.findall(r"`(\w+)`", in_class)), set(re.findall(r"`(\w+)`", at_home))
    assert at_home.endswith(" at home") and names_in_class and names_at_home
    assert not names_in_class & names_at_home
    assert names_in_class | names_at_home == set(_exercise_names(src))


@pytest.mark.parametrize("src", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_chapter_opens_with_a_link_to_the_conventions_page(src):
    """One set of conventions for the course (00_index, "## Conventions"); every chapter points to it."""
    index = jupytext.read(NB_DIR / "src" / "00_index.py", fmt="py:percent").cells
    assert any(c.cell_type == "markdown" and re.search(r"^## Conventions$", c.source, re.M) for c in index)
    first = next(c for c in jupytext.read(src, fmt="py:percent").cells if c.cell_type == "markdown")
    assert "](00_index.ipynb#Conventions)" in first.source


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_cell_ids_come_from_the_source(src):
    """`make notebooks` names cells by place and text, so rebuilding an unchanged chapter changes no id."""
    import hashlib

    for i, c in enumerate(stored(src).cells):
        assert c.id == f"c{i:03d}-{hashlib.sha1(c.source.encode()).hexdigest()[:8]}"


@pytest.mark.parametrize("src", SOURCES, ids=ids)
def test_prints_of_a_cell_are_stored_as_one_output(src):
    """Consecutive prints are merged at build time, so the kernel's flush timing never shows in a diff."""
    for c in stored(src).cells:
        kinds = [(o.output_type, o.get("name")) for o in c.get("outputs", [])]
        assert all(not (a == b and a[0] == "stream") for a, b in zip(kinds, kinds[1:])), c.source[:200]
