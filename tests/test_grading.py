"""Graded classes: `make student` and a real nbgrader round trip.

scripts/make_student.py runs the nbgrader command line on every chapter (module fixture).
Every chapter is then checked from its files: no solution survives in the student copy, the
graded checks are the instructor's, and with POSENC_GRADING=1 the instructor's solutions pass
every graded check while the student copy's untouched cells fail every one. One chapter goes
all the way through `nbgrader autograde` (it executes the whole notebook twice): the
unattempted copy scores zero, the instructor's answers full points.
"""
import csv
import math
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
import torch
import torch.nn.functional as F

import posenc_lib as pl
from _scripts import ROOT, load_script
from posenc_lib import check

make_student = load_script("make_student")
CHAPTERS = [p.stem for p in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")) if p.stem != "00_index"]
# (the appendix, 10, is off the lecture path but has an exercise: graded like a chapter)
ROUND_TRIP = "01_why_positions"  # 4 exercises, both kinds (values and functions), quick to run
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


@pytest.fixture(scope="module")
def course(tmp_path_factory):
    """An nbgrader course holding every chapter, made by the script `make student` runs."""
    root = tmp_path_factory.mktemp("grading")
    assert make_student.main(["--course", str(root / "course"), "--out", str(root / "student")]) == 0
    return root


def cells(path: Path, key: str) -> dict[str, nbformat.NotebookNode]:
    """The cells of a notebook that carry nbgrader metadata `key` (solution or grade), by grade_id."""
    nb = nbformat.read(path, as_version=4)
    return {c.metadata["nbgrader"]["grade_id"]: c for c in nb.cells if c.metadata.get("nbgrader", {}).get(key)}


def test_make_student_covers_every_chapter(course):
    assert sorted(p.stem for p in (course / "student").glob("*.ipynb")) == CHAPTERS
    assert "00_index" not in CHAPTERS  # the index has no exercises


@pytest.mark.parametrize("name", CHAPTERS)
def test_student_copy_has_no_solution_and_the_instructors_locked_checks(course, name):
    instructor = ROOT / "notebooks" / f"{name}.ipynb"
    student = course / "student" / f"{name}.ipynb"
    text = student.read_text()
    assert "BEGIN SOLUTION" not in text and "END SOLUTION" not in text
    nb = nbformat.read(student, as_version=4)
    assert not any(c.get("outputs") for c in nb.cells), "the student copy carries outputs"
    # Exercise cells open (a chapter's optional asides, such as chapter 8's bulk config checks, may stay folded).
    exercise = [c for c in nb.cells if "nbgrader" in c.metadata]
    assert exercise and not any(c.metadata.get("jupyter", {}).get("source_hidden") for c in exercise), "answer cells collapsed"
    assert not any(c.metadata.get("jupyter", {}).get("outputs_hidden") for c in exercise), "feedback folded"
    ungraded_checks = [c.source for c in nb.cells if re.search(r"\bcheck\.\w+\(", c.source)
                       and "nbgrader" not in c.metadata]
    assert not ungraded_checks, "the self-learner's cells are left in: two places to answer"
    for grade_id, solution in cells(instructor, "solution").items():
        answer = cells(student, "solution")[grade_id].source
        inside = re.search(r"^ *### BEGIN SOLUTION\n(.*?)^ *### END SOLUTION", solution.source, re.M | re.S).group(1)
        assert inside.strip() and inside.strip() not in answer, f"{grade_id}: the solution survived"
        indent = re.search(r"^( *)### BEGIN SOLUTION", solution.source, re.M).group(1)
        assert STUB.replace("\n", "\n" + indent) in answer, grade_id
    graded = cells(student, "grade")
    assert graded.keys() == cells(instructor, "grade").keys()
    for grade_id, cell in cells(instructor, "grade").items():
        assert graded[grade_id].source == cell.source and graded[grade_id].metadata["editable"] is False


def run_exercises(path: Path) -> dict[str, str]:
    """Run a notebook's answer and graded cells in order, as an autograder would (errors do not
    stop it): grade_id -> "pass" or the exception class a graded cell raised."""
    env = {"math": math, "torch": torch, "F": F, "pl": pl, "check": check}  # what the solutions import
    results = {}
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if not (meta.get("solution") or meta.get("grade")):
            continue
        try:
            exec(compile(cell.source, meta["grade_id"], "exec"), env)
            outcome = "pass"
        except Exception as e:  # noqa: BLE001 (an unanswered cell raises NotImplementedError)
            outcome = type(e).__name__
        if meta.get("grade"):
            results[meta["grade_id"]] = outcome
    return results


@pytest.mark.parametrize("name", CHAPTERS)
def test_under_grading_solutions_pass_and_the_student_copy_fails(course, name, monkeypatch, capsys):
    monkeypatch.setenv("POSENC_GRADING", "1")
    solved = run_exercises(ROOT / "notebooks" / f"{name}.ipynb")
    assert set(solved.values()) == {"pass"}, solved
    assert capsys.readouterr().out.count("all correct!") == len(solved)
    blank = run_exercises(course / "student" / f"{name}.ipynb")
    assert blank.keys() == solved.keys() and set(blank.values()) == {"AssertionError"}, blank


def test_nbgrader_autograde_gives_zero_unattempted_and_full_marks_solved(course):
    root = course / "course"
    for student, folder in (("blank", "release"), ("solved", "source")):
        target = root / "submitted" / student / ROUND_TRIP
        target.mkdir(parents=True)
        shutil.copy(root / folder / ROUND_TRIP / f"{ROUND_TRIP}.ipynb", target)
    env = make_student.nbgrader_env(POSENC_GRADING="1")  # the kernels nbgrader starts inherit it
    nbgrader = [sys.executable, "-m", "nbgrader"]
    graded = subprocess.run([*nbgrader, "autograde", ROUND_TRIP, "--student=*", "--log-level=WARN"],
                            cwd=root, env=env, timeout=600, capture_output=True, text=True)
    assert graded.returncode == 0, graded.stderr[-4000:]  # nbgrader's own reason, not just its exit status
    subprocess.run([*nbgrader, "export", "--log-level=WARN"], cwd=root, env=env, check=True, timeout=120,
                   capture_output=True)
    with open(root / "grades.csv", newline="") as f:
        scores = {row["student_id"]: (float(row["score"]), float(row["max_score"]))
                  for row in csv.DictReader(f) if row["assignment"] == ROUND_TRIP}
    points = len(cells(ROOT / "notebooks" / f"{ROUND_TRIP}.ipynb", "grade"))
    assert scores == {"blank": (0.0, points), "solved": (points, points)}
    # Zero because the checkers raised, not because a cell broke: every graded cell failed an assertion.
    graded = cells(root / "autograded" / "blank" / ROUND_TRIP / f"{ROUND_TRIP}.ipynb", "grade")
    for grade_id, cell in graded.items():
        assert [o.get("ename") for o in cell.outputs if o.output_type == "error"] == ["AssertionError"], grade_id
        assert "not attempted yet" in "".join(o.get("evalue", "") for o in cell.outputs), grade_id
