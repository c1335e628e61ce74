"""Median update time of every notebook widget (compute + render), timed directly.

Each notebook source (notebooks/src/NN_*.py, jupytext percent format) is executed cell by
cell in one namespace with cwd = notebooks/ and IPython's display made a no-op; every
``viz.InteractiveFigure`` created on the way is recorded. Then each widget's ``update``
is timed over a few values of each control (slider min / max / middle / start value,
every dropdown option up to four, both checkbox states), one control at a time.
Goal: each widget's median update <= 150 ms.
Run: python -m benchmarks.bench_widgets [--quick] [NN ...]
"""
from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import time
import traceback
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
GOAL_MS = 150.0


def control_values(control: Any) -> list[Any]:
    """A few representative values of one ipywidget control."""
    opts = getattr(control, "_options_values", None)
    if opts is None and hasattr(control, "options"):
        opts = [o[1] if isinstance(o, tuple) and len(o) == 2 else o for o in control.options]
    if opts:
        return list(opts)[:4]
    value = control.value
    if isinstance(value, bool):
        return [not value, value]
    lo, hi = getattr(control, "min", None), getattr(control, "max", None)
    if isinstance(value, tuple) or lo is None or hi is None:
        return [value]
    if "Log" in type(control).__name__:  # FloatLogSlider: min/max are exponents of control.base
        b = control.base
        vals = [b ** lo, b ** hi, b ** ((lo + hi) / 2), value]
        return list(dict.fromkeys(vals))
    mid = (lo + hi) / 2
    if isinstance(value, int):
        mid = int(round(mid))
    step = getattr(control, "step", None)
    if step and not isinstance(value, int):
        mid = lo + round((mid - lo) / step) * step
    vals = []
    for x in (lo, hi, mid, value):
        if x not in vals:
            vals.append(x)
    return vals


def settings_for(widget: Any) -> list[dict[str, Any]]:
    settings = []
    for name, c in widget.controls.items():
        for val in control_values(c):
            settings.append({name: val})
    return settings or [{}]


def _code_cells(path: Path) -> list[str]:
    import jupytext

    nb = jupytext.read(path, fmt="py:percent")
    cells = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        lines = [ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!"))]
        cells.append("\n".join(lines))
    return cells


@contextlib.contextmanager
def _recording():
    """Record every InteractiveFigure created; make IPython display a no-op."""
    from posenc_lib import viz

    created: list[Any] = []
    original = viz.InteractiveFigure.__init__

    def init(self, *a, **kw):
        original(self, *a, **kw)
        created.append(self)

    patches = [(viz.InteractiveFigure, "__init__", init)]
    try:
        import IPython.display as ipd

        patches.append((ipd, "display", lambda *a, **k: None))
    except ImportError:
        pass
    saved = [(obj, name, getattr(obj, name)) for obj, name, _ in patches]
    for obj, name, new in patches:
        setattr(obj, name, new)
    try:
        yield created
    finally:
        for obj, name, old in saved:
            setattr(obj, name, old)


def run_notebook(path: Path, *, repeats: int = 3, max_settings: int | None = None) -> dict:
    """Execute one notebook source; time every widget it creates."""
    ns: dict[str, Any] = {"__name__": "__main__"}
    errors = []
    cwd = os.getcwd()
    t0 = time.perf_counter()
    with _recording() as created:
        os.chdir(path.parent.parent)  # notebooks/
        try:
            with open(os.devnull, "w") as quiet, contextlib.redirect_stdout(quiet):
                for i, src in enumerate(_code_cells(path)):
                    try:
                        exec(compile(src, f"{path.name}[cell {i}]", "exec"), ns)
                    except Exception as exc:  # keep going: report the cell
                        errors.append(f"cell {i}: {type(exc).__name__}: {exc}".splitlines()[0][:200])
        finally:
            os.chdir(cwd)
    exec_s = time.perf_counter() - t0
    widgets = []
    for j, w in enumerate(created):
        settings = settings_for(w)[:max_settings]
        try:
            times, cpu = [], []
            for _ in range(repeats):
                for s in settings:
                    t1, c1 = time.perf_counter(), time.process_time()
                    w.update(**s)
                    times.append((time.perf_counter() - t1) * 1e3)
                    cpu.append((time.process_time() - c1) * 1e3)
            widgets.append({"index": j, "controls": list(w.controls), "median_ms": statistics.median(times),
                            "max_ms": max(times), "cpu_median_ms": statistics.median(cpu), "n": len(times)})
        except Exception as exc:
            widgets.append({"index": j, "controls": list(w.controls), "error": traceback.format_exception_only(exc)[-1].strip()})
    return {"notebook": path.name, "exec_s": exec_s, "widgets": widgets, "errors": errors}


def run(chapters: list[str] | None = None, *, repeats: int = 3, max_settings: int | None = None) -> list[dict]:
    sources = sorted((NOTEBOOKS / "src").glob("[0-9][0-9]_*.py"))
    if chapters:
        sources = [s for s in sources if s.name[:2] in chapters]
    return [run_notebook(s, repeats=repeats, max_settings=max_settings) for s in sources]


def table(results: list[dict]) -> str:
    lines = ["| notebook | widget (controls) | median update, wall (ms) | median CPU time (ms) | max wall (ms) "
             "| wall <= 150 ms |", "|---|---|---|---|---|---|"]
    for r in results:
        if not r["widgets"]:
            lines.append(f"| {r['notebook']} | (no widgets) | | | | |")
        for w in r["widgets"]:
            ctl = ", ".join(w["controls"])
            if "error" in w:
                lines.append(f"| {r['notebook']} | #{w['index']} ({ctl}) | error: {w['error']} | | | no |")
            else:
                ok = "yes" if w["median_ms"] <= GOAL_MS else "**no**"
                lines.append(f"| {r['notebook']} | #{w['index']} ({ctl}) | {w['median_ms']:.0f} | "
                             f"{w['cpu_median_ms']:.0f} | {w['max_ms']:.0f} | {ok} |")
        for e in r["errors"]:
            lines.append(f"| {r['notebook']} | (source error) {e} | | | | |")
    return "\n".join(lines)


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("chapters", nargs="*", help="two-digit chapter numbers (default: all)")
    p.add_argument("--repeats", type=int, default=3)
    a = p.parse_args(argv)
    from ._timing import machine

    print(machine())
    print(table(run(a.chapters or None, repeats=a.repeats)))


if __name__ == "__main__":
    main()
