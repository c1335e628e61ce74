"""Figures for the notebooks: one heatmap helper and one widget builder.

Conventions (so every chapter looks the same and reads in light and dark themes):
* opaque white figure background with black text (inline figures are otherwise
  transparent, and black text vanishes in a dark theme);
* signed quantities use a diverging colormap centred on 0 (``RdBu_r`` with
  limits -v..v); -inf entries (masked attention) are drawn in grey;
* axes are labelled and every heatmap has a colour bar.

Widgets render the same matplotlib figure to PNG bytes in an ``ipywidgets.Image``:
the figure and its artists are built once and updated in place, which keeps an
update (compute + render) well under 150 ms on a laptop CPU.
"""
from __future__ import annotations

import io
import statistics
import time
from typing import Any, Callable, Mapping

import matplotlib
import numpy as np
import torch
from matplotlib.axes import Axes
from matplotlib.colors import Normalize
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.ticker import MaxNLocator

STYLE = {
    "figure.facecolor": "white",
    "axes.facecolor": "white",
    "savefig.facecolor": "white",
    "text.color": "black",
    "axes.labelcolor": "black",
    "axes.edgecolor": "black",
    "xtick.color": "black",
    "ytick.color": "black",
    "figure.dpi": 72,
    "font.size": 10,
    "axes.titlesize": 11,
    "figure.constrained_layout.use": True,
}


def use_style() -> None:
    """Apply the notebook figure style (white background, dark text) to matplotlib's global settings.

    Called once at the top of each notebook (and by the figure scripts); importing this module
    changes nothing, so a program that imports posenc_lib keeps its own matplotlib style.
    """
    matplotlib.rcParams.update(STYLE)


def _register_inline_png() -> None:
    """Let a bare ``Figure`` as a cell's last line display as PNG in Jupyter.

    Figures here are made without pyplot (no global state), so without this a notebook
    would need ``%matplotlib inline`` before its first figure.
    """
    try:
        from IPython import get_ipython
        from matplotlib_inline.backend_inline import set_matplotlib_formats
    except ImportError:
        return
    if get_ipython() is not None:
        set_matplotlib_formats("png")


_register_inline_png()

DIVERGING = "RdBu_r"
SEQUENTIAL = "viridis"


def _to_numpy(matrix: Any) -> np.ndarray:
    if isinstance(matrix, torch.Tensor):
        matrix = matrix.detach().to("cpu", torch.float64).numpy()
    a = np.asarray(matrix, dtype=np.float64)
    if a.ndim != 2:
        raise ValueError(f"matrix must be 2-D, got shape {a.shape}")
    return a


def _norm_for(a: np.ndarray, diverging: bool | None, vmin: float | None, vmax: float | None) -> tuple[Normalize, bool]:
    """The colour scale for a, and whether it is the diverging one (symmetric about 0).

    A plain ``Normalize`` in both cases: a colour bar draws a plain Normalize on a linear
    axis, where any subclass (``CenteredNorm`` included) costs a Python call per tick
    transform, about a seventh of a widget update.
    """
    finite = a[np.isfinite(a)]
    if diverging is None:  # signed data gets the diverging map
        diverging = finite.size > 0 and finite.min() < 0 < finite.max()
    if diverging:
        half = vmax if vmax is not None else (np.abs(finite).max() if finite.size else 1.0)
        half = float(half) or 1.0
        return Normalize(-half, half), True
    lo = vmin if vmin is not None else (finite.min() if finite.size else 0.0)
    hi = vmax if vmax is not None else (finite.max() if finite.size else 1.0)
    return Normalize(lo, hi if hi > lo else lo + 1.0), False


def heatmap(
    matrix: Any,
    *,
    ax: Axes | None = None,
    title: str | None = None,
    xlabel: str = "",
    ylabel: str = "",
    colorbar: str | None = "",
    diverging: bool | None = None,
    cmap: str | None = None,
    vmin: float | None = None,
    vmax: float | None = None,
    annotate: bool | str = False,
) -> AxesImage:
    """Draw a 2-D tensor/array as a labelled heatmap with a colour bar.

    matrix:    (rows, cols); -inf/nan entries are drawn grey
    diverging: True forces RdBu_r centred on 0; None picks it when values have both signs
    colorbar:  label of the colour bar ("" = no label, None = no colour bar)
    annotate:  write each value in its cell (True, or a format string such as "{:.2f}")
    returns:   the AxesImage (update it with ``update_heatmap``)
    """
    a = _to_numpy(matrix)
    if ax is None:
        ax = Figure(figsize=(5, 4)).subplots()
    norm, is_div = _norm_for(a, diverging, vmin, vmax)
    cm = matplotlib.colormaps[cmap or (DIVERGING if is_div else SEQUENTIAL)].with_extremes(bad="#bbbbbb")
    im = ax.imshow(np.ma.masked_invalid(a), cmap=cm, norm=norm, aspect="auto", interpolation="nearest")
    im.diverging_ = is_div  # update_heatmap keeps the scale symmetric
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    # A handful of ticks reads better and draws faster (tick text dominates render time).
    ax.xaxis.set_major_locator(MaxNLocator(6, integer=True))
    ax.yaxis.set_major_locator(MaxNLocator(6, integer=True))
    if colorbar is not None:
        cb = ax.figure.colorbar(im, ax=ax, shrink=0.9, ticks=MaxNLocator(5))
        cb.set_label(colorbar)
        im.colorbar_ = cb  # keep a handle for updates
    if annotate:
        fmt = annotate if isinstance(annotate, str) else "{:.2f}"
        for (r, c), val in np.ndenumerate(a):
            ax.text(c, r, "−∞" if np.isneginf(val) else fmt.format(val), ha="center", va="center", fontsize=8,
                    color="black")
    return im


def update_heatmap(im: AxesImage, matrix: Any, *, diverging: bool | None = None, vmax: float | None = None) -> None:
    """Replace the data of a heatmap in place (shape may change), rescaling its colours."""
    a = _to_numpy(matrix)
    im.set_data(np.ma.masked_invalid(a))
    im.set_extent((-0.5, a.shape[1] - 0.5, a.shape[0] - 0.5, -0.5))
    im.axes.set_xlim(-0.5, a.shape[1] - 0.5)
    im.axes.set_ylim(a.shape[0] - 0.5, -0.5)
    norm, _ = _norm_for(a, diverging if diverging is not None else getattr(im, "diverging_", False), None, vmax)
    if (norm.vmin, norm.vmax) != (im.norm.vmin, im.norm.vmax):  # colour bar redraws are costly
        im.set_norm(norm)
        cb = getattr(im, "colorbar_", None)
        if cb is not None:
            cb.update_normal(im)


def figure(ncols: int = 1, nrows: int = 1, *, width: float = 4.2, height: float = 3.4, **kw) -> tuple[Figure, Any]:
    """A pyplot-free Figure (no global state) and its axes, sized per panel.

    Returned figures display inline in Jupyter when they are the last expression of a cell.
    """
    fig = Figure(figsize=(width * ncols, height * nrows))
    axes = fig.subplots(nrows, ncols, squeeze=True, **kw)
    return fig, axes


def png_bytes(fig: Figure, dpi: int | None = None) -> bytes:
    """Render a figure to PNG quickly: one Agg draw and a light zlib level.

    (``savefig`` draws twice and compresses hard, which triples the cost of a widget update.)
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image

    if dpi is not None and fig.dpi != dpi:
        fig.set_dpi(dpi)
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    buf = io.BytesIO()
    Image.fromarray(np.asarray(canvas.buffer_rgba())).save(buf, format="png", compress_level=1)
    return buf.getvalue()


def _thin_default_ticks(fig: Figure, nbins: int = 5) -> None:
    """Fewer ticks on axes that use matplotlib's default locator (fixed tick labels stay).

    Tick labels are most of the cost of drawing a frame; five per axis read fine.
    """
    from matplotlib.ticker import AutoLocator

    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if type(axis.get_major_locator()) is AutoLocator:
                axis.set_major_locator(MaxNLocator(nbins))


def _freeze_x_labels(fig: Figure) -> None:
    """Pin every x-axis label where the last draw put it (``Axis.set_label_coords``).

    By default each draw measures all tick labels of the axis (and its siblings) to push the
    label clear of them. An x label only needs the tick labels' height, which is one line of
    text whatever the numbers say, so the first render's place stays right. (y labels are
    left alone: their distance depends on the tick labels' width, which changes.)
    """
    for ax in fig.axes:
        label = ax.xaxis.label
        if label.get_text():
            x, y = ax.transAxes.inverted().transform(label.get_transform().transform(label.get_position()))
            ax.xaxis.set_label_coords(x, y)


class InteractiveFigure:
    """Controls (sliders, dropdowns) driving a figure that is drawn once and updated in place.

    draw(fig, **values) is called once to build the figure and must return an
    ``update(**values)`` callable that changes the existing artists (set_data,
    ``update_heatmap``, ...). Moving a control calls update and re-renders the PNG.

    >>> w = InteractiveFigure(draw, n=IntSlider(8, 2, 64))  # then show `w` as a cell's last line
    """

    def __init__(self, draw: Callable[..., Callable[..., None]], *, figsize=(6.0, 4.0), dpi: int = 72,
                 **controls: Any):
        import ipywidgets as widgets

        self.controls: Mapping[str, Any] = controls
        self.dpi = dpi
        self.fig = Figure(figsize=figsize, dpi=dpi, layout="constrained")
        # Titles sit at the top of their axes (axes.titley = 1): matplotlib otherwise
        # re-measures every tick label on each draw to dodge ticks that are not on top.
        with matplotlib.rc_context({"axes.titley": 1.0}):
            self._update = draw(self.fig, **self.values())
        _thin_default_ticks(self.fig)
        first = png_bytes(self.fig)
        # Freeze the layout found on the first render: re-solving constrained layout on
        # every slider move costs ~250 ms, more than everything else together.
        self.fig.set_layout_engine("none")
        _freeze_x_labels(self.fig)
        self.image = widgets.Image(format="png", value=first)
        for c in controls.values():
            c.observe(self._on_change, names="value")
        # Show the PNG at its own size: a stretched image is blurry and its text too large.
        self.image.layout = widgets.Layout(width=f"{self.fig.get_figwidth() * dpi:.0f}px")
        self.widget = widgets.VBox([widgets.HBox(list(controls.values())), self.image],
                                   layout=widgets.Layout(align_items="flex-start"))

    def values(self) -> dict[str, Any]:
        return {name: c.value for name, c in self.controls.items()}

    def update(self, **values: Any) -> bytes:
        """Redraw for the given values (defaults: the controls' current values); returns the PNG."""
        self._update(**{**self.values(), **values})
        self.image.value = png_bytes(self.fig)
        return self.image.value

    def _on_change(self, _change: Any) -> None:
        self.update()

    def _repr_mimebundle_(self, **kwargs: Any):
        return self.widget._repr_mimebundle_(**kwargs)

    def median_update_ms(self, settings: list[dict[str, Any]], repeats: int = 3) -> float:
        """Median wall time of ``update`` over the given control settings (for benchmarks)."""
        times = []
        for _ in range(repeats):
            for s in settings:
                t0 = time.perf_counter()
                self.update(**s)
                times.append((time.perf_counter() - t0) * 1e3)
        return statistics.median(times)


def interactive_heatmap(
    compute: Callable[..., Any],
    *,
    title: Callable[..., str] | str = "",
    xlabel: str = "",
    ylabel: str = "",
    colorbar: str | None = "",
    diverging: bool | None = None,
    figsize=(5.2, 3.9),
    **controls: Any,
) -> InteractiveFigure:
    """The common case: one heatmap of compute(**values), recoloured on every change.

    compute(**values) -> 2-D tensor/array; title may be a function of the same values.
    """

    def draw(fig: Figure, **values: Any):
        ax = fig.subplots()
        im = heatmap(compute(**values), ax=ax, xlabel=xlabel, ylabel=ylabel, colorbar=colorbar, diverging=diverging)

        def update(**values: Any) -> None:
            update_heatmap(im, compute(**values), diverging=diverging)
            ax.set_title(title(**values) if callable(title) else title)

        update(**values)
        return update

    return InteractiveFigure(draw, figsize=figsize, **controls)
