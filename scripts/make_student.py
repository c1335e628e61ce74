"""Write the students' copies of the chapters with nbgrader: solutions removed, checks locked.

    python scripts/make_student.py              # every chapter -> build/student/NN_name.ipynb
    python scripts/make_student.py 05 06        # only those whose name starts so
    python scripts/make_student.py --course DIR # the nbgrader course folder (default build/nbgrader)

Each exercise in a chapter is three cells: the self-learner's cell (`answer = None` or a stub,
then the checker), the collapsed nbgrader solution cell (the solution between
`### BEGIN SOLUTION` and `### END SOLUTION`) and the locked, graded check cell. A graded copy
needs only the last two, so this script copies each notebook into an nbgrader course as
`source/NN_name/NN_name.ipynb` without the self-learner's cells and with the solution cells
shown, runs `nbgrader generate_assignment` (which replaces each solution by
`# YOUR CODE HERE` / `raise NotImplementedError()`, clears outputs and records checksums in
the course's gradebook), and copies `release/NN_name/NN_name.ipynb` to the output folder.
Keep the course folder: `nbgrader autograde` needs its gradebook (see TEACHING.md).
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
CHECK_CALL = re.compile(r"\bcheck\.\w+\(")
# Autograding runs whole chapters; a cell of a chapter takes seconds, not nbgrader's default 30 s, and on a
# loaded machine a kernel can take longer than the default 60 s to start.
COURSE_CONFIG = """c = get_config()  # noqa: F821 (nbgrader's config file)
c.Execute.timeout = 300
c.Execute.startup_timeout = 300
"""


def is_graded(nb: nbformat.NotebookNode) -> bool:
    return any(c.metadata.get("nbgrader", {}).get("grade") for c in nb.cells)


def chapters(prefixes: list[str]) -> list[Path]:
    """The stored chapter notebooks that hold graded exercises, filtered by name prefix."""
    found = [p for p in sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb")) if is_graded(nbformat.read(p, as_version=4))]
    if prefixes:
        found = [p for p in found if any(p.stem.startswith(x) for x in prefixes)]
    return found


def is_self_learner_cell(cell: nbformat.NotebookNode) -> bool:
    """The self-learner's try-here cell: calls a checker but is no nbgrader cell."""
    return cell.cell_type == "code" and "nbgrader" not in cell.metadata and bool(CHECK_CALL.search(cell.source))


def for_grading(nb: nbformat.NotebookNode) -> nbformat.NotebookNode:
    """The instructor's version nbgrader starts from: one place to answer per exercise, in view."""
    nb = nbformat.from_dict(nb)
    nb.cells = [c for c in nb.cells if not is_self_learner_cell(c)]
    for c in nb.cells:
        jupyter = c.metadata.get("jupyter", {})
        if "nbgrader" in c.metadata:  # unfold the answer cell and the graded check's feedback
            jupyter.pop("source_hidden", None)
            jupyter.pop("outputs_hidden", None)
            if "jupyter" in c.metadata and not jupyter:
                del c.metadata["jupyter"]
    return nb


def nbgrader(course: Path, *args: str) -> None:
    """Run the nbgrader command line in the course folder (its nbgrader_config.py applies)."""
    cmd = [sys.executable, "-m", "nbgrader", *args, "--CourseDirectory.root=" + str(course)]
    subprocess.run(cmd, cwd=course, check=True, env=nbgrader_env())


def nbgrader_env(**extra: str) -> dict[str, str]:
    """This Python's bin folder first on PATH: nbgrader runs `alembic` from there for its gradebook."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, **extra}


def make_course(course: Path) -> None:
    course.mkdir(parents=True, exist_ok=True)
    (course / "nbgrader_config.py").write_text(COURSE_CONFIG)


def generate(notebooks: list[Path], course: Path, out: Path) -> list[Path]:
    """Each chapter becomes an assignment of its own name (one nbgrader run); return the student copies."""
    for notebook in notebooks:
        source = course / "source" / notebook.stem / notebook.name
        source.parent.mkdir(parents=True, exist_ok=True)
        nbformat.write(for_grading(nbformat.read(notebook, as_version=4)), source)
    # One run for all (nbgrader globs the assignment name): starting nbgrader takes seconds.
    nbgrader(course, "generate_assignment", notebooks[0].stem if len(notebooks) == 1 else "*",
             "--force", "--log-level=WARN")
    out.mkdir(parents=True, exist_ok=True)
    return [Path(shutil.copy(course / "release" / nb.stem / nb.name, out / nb.name)) for nb in notebooks]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("prefixes", nargs="*", help="chapter name prefixes, e.g. 05 06 (default: all)")
    parser.add_argument("--course", type=Path, default=ROOT / "build" / "nbgrader", help="nbgrader course folder")
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "student", help="where the copies go")
    args = parser.parse_args(argv)
    todo = chapters(args.prefixes)
    if not todo:
        print(f"no graded chapter notebooks match {args.prefixes} in {NB_DIR}", file=sys.stderr)
        return 1
    course = args.course.expanduser().resolve()  # nbgrader runs inside it: no relative paths
    make_course(course)
    for copy in generate(todo, course, args.out.expanduser().resolve()):
        print(copy)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
