"""Static copies of the notebooks' widgets for the course website (scripts/build_site.py).

A `viz.InteractiveFigure` redraws its figure in Python when a control moves, so a page without
a kernel cannot run it. The site build runs each notebook's code in a kernel up to its widgets
and, right after each widget cell, calls `export(...)` from this module there: the widget's own
`update(**values)` (posenc_lib's code, nothing rewritten) renders a PNG for every combination of
its control values, sliders subsampled to a few steps. The page swaps these PNGs when a control
moves (`site/_static/posenc-widgets.js`).

`start_recording()` (run first in that kernel) notes every InteractiveFigure the notebook makes,
so a widget is found whatever the cell does with it (last expression, `display(...)`, unnamed).
"""
from __future__ import annotations

import hashlib
import io
import itertools
import json
from pathlib import Path
from typing import Any

MAX_STEPS = 9  # a slider keeps at most this many values, evenly spaced, its start value among them
MAX_FRAMES = 160  # per widget: sliders are thinned further until the cross product fits

_made: list[Any] = []


def start_recording() -> None:
    """From now on, every `viz.InteractiveFigure` created in this process is appended to `_made`."""
    from posenc_lib import viz

    cls = viz.InteractiveFigure
    if getattr(cls.__init__, "_site_recording", False):
        return
    original = cls.__init__

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _made.append(self)

    __init__._site_recording = True
    cls.__init__ = __init__


def made_count() -> int:
    return len(_made)


def _options(control: Any) -> tuple[list[Any], list[str]] | None:
    """(values, labels) of a control with a list of options (Dropdown, SelectionSlider, ...)."""
    if not hasattr(control, "options"):
        return None
    items = list(control.options)
    if items and all(isinstance(x, tuple) and len(x) == 2 for x in items):  # (label, value) pairs
        return [v for _, v in items], [str(lab) for lab, _ in items]
    return items, [str(x) for x in items]


def all_values(control: Any) -> tuple[str, list[Any], list[str]]:
    """(kind, every value the control can take, its label for each): kind is "select", "checkbox" or "range"."""
    opts = _options(control)
    if opts is not None:
        return "select", *opts
    if isinstance(control.value, bool):
        return "checkbox", [False, True], ["off", "on"]
    if all(hasattr(control, a) for a in ("min", "max", "step")):
        fmt = getattr(control, "readout_format", "") or ""
        n = int(round((control.max - control.min) / control.step)) + 1
        raw = [control.min + i * control.step for i in range(n)]
        if hasattr(control, "base"):  # FloatLogSlider: min, max and step are exponents
            values = [float(control.base) ** e for e in raw]
        elif isinstance(control.value, int):
            values = [int(round(v)) for v in raw]
        else:
            values = [round(v, 12) for v in raw]  # 0.1 + 0.2 noise would miss the stored start value
        return "range", values, [format(v, fmt) if fmt else str(v) for v in values]
    raise ValueError(f"control {getattr(control, 'description', control)!r}: expected a slider, a list of "
                     f"options or a checkbox, got {type(control).__name__}")


def start_index(values: list[Any], value: Any) -> int:
    """Where the control starts: its value, or (a float slider off its grid) the nearest one."""
    if value in values:
        return values.index(value)
    return min(range(len(values)), key=lambda i: abs(values[i] - value))


def thin(n: int, start: int, steps: int) -> list[int]:
    """At most `steps` indices of range(n), evenly spread, first and last kept, `start` among them."""
    if n <= steps:
        return list(range(n))
    picked = sorted({round(i * (n - 1) / (steps - 1)) for i in range(steps)})
    if start not in picked:
        nearest = min(picked[1:-1] or picked, key=lambda i: abs(i - start))
        picked[picked.index(nearest)] = start
    return sorted(set(picked))


def plan(controls: dict[str, Any], max_steps: int = MAX_STEPS, max_frames: int = MAX_FRAMES) -> list[dict]:
    """For each control: kind, kept values and labels, the start's position, and how many values it has in all.

    Sliders keep at most `max_steps` values; while the cross product exceeds `max_frames`, the
    slider with the most kept values loses one. Options and checkboxes keep every value.
    """
    axes = []
    for name, c in controls.items():
        kind, values, labels = all_values(c)
        start = start_index(values, c.value)
        axes.append(dict(name=name, description=getattr(c, "description", "") or name, kind=kind,
                         all_values=values, all_labels=labels, start=start, total=len(values),
                         steps=len(values) if kind != "range" else min(max_steps, len(values))))

    def frames() -> int:
        out = 1
        for a in axes:
            out *= a["steps"]
        return out

    while frames() > max_frames:
        sliders = [a for a in axes if a["kind"] == "range" and a["steps"] > 2]
        if not sliders:
            raise ValueError(f"controls {list(controls)}: {frames()} combinations of options exceed "
                             f"max_frames={max_frames}")
        max(sliders, key=lambda a: a["steps"])["steps"] -= 1
    for a in axes:
        keep = thin(a["total"], a["start"], a["steps"]) if a["kind"] == "range" else list(range(a["total"]))
        a["values"] = [a["all_values"][i] for i in keep]
        a["labels"] = [a["all_labels"][i] for i in keep]
        a["start"] = keep.index(a["start"])
        del a["all_values"], a["all_labels"], a["steps"]
    return axes


def compact_png(png: bytes) -> bytes:
    """The frame as a 256-colour PNG (about a third of the size; figures have few colours)."""
    from PIL import Image

    img = Image.open(io.BytesIO(png)).convert("RGB")
    img = img.quantize(256, method=Image.Quantize.MAXCOVERAGE, dither=Image.Dither.NONE)  # white stays white
    buf = io.BytesIO()
    img.save(buf, format="png", optimize=True)
    return buf.getvalue()


def render(widget: Any, frames_dir: Path, max_steps: int = MAX_STEPS, max_frames: int = MAX_FRAMES) -> dict:
    """Render `widget` for every combination of its planned control values; write each distinct
    frame once, named by its content, into frames_dir; return the page's description of it.

    Frames are listed in row-major order of the controls (the last control varies fastest).
    """
    frames_dir.mkdir(parents=True, exist_ok=True)
    axes = plan(dict(widget.controls), max_steps, max_frames)
    names, files, written = [], [], 0
    for combo in itertools.product(*(a["values"] for a in axes)):
        png = compact_png(widget.update(**{a["name"]: v for a, v in zip(axes, combo)}))
        name = hashlib.sha256(png).hexdigest()[:20] + ".png"
        path = frames_dir / name
        if not path.exists():
            path.write_bytes(png)
            written += len(png)
        names.append(name)
        files.append(path)
    widget.update(**{a["name"]: a["values"][a["start"]] for a in axes})  # leave it as the notebook shows it
    width = round(widget.fig.get_figwidth() * widget.dpi)
    return {"controls": [{k: a[k] for k in ("name", "description", "kind", "labels", "start", "total")}
                         for a in axes],
            "frames": names, "width": width, "bytes": written, "distinct": len(set(names))}


def export(first: int, out: str, cell: int, max_steps: int = MAX_STEPS, max_frames: int = MAX_FRAMES) -> None:
    """Render the widgets made since `first` (the widget cell's) and print them as one JSON line."""
    specs = [render(w, Path(out), max_steps, max_frames) for w in _made[first:]]
    print(json.dumps({"cell": cell, "widgets": specs}))
