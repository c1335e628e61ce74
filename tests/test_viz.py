"""posenc_lib.viz: widget figures render fast and keep their labels clear of the ticks."""
import io

import numpy as np
import pytest
from PIL import Image

ipywidgets = pytest.importorskip("ipywidgets")

from posenc_lib import viz  # noqa: E402

viz.use_style()


def test_importing_viz_leaves_matplotlibs_style_alone():
    """The style is an explicit call (the notebooks make it), not a side effect of importing."""
    import subprocess
    import sys

    code = ("import matplotlib; before = dict(matplotlib.rcParams); import posenc_lib, posenc_lib.viz as viz; "
            "assert dict(matplotlib.rcParams) == before; viz.use_style(); "
            "assert matplotlib.rcParams['figure.facecolor'] == 'white' and matplotlib.rcParams['figure.dpi'] == 72")
    subprocess.run([sys.executable, "-c", code], check=True)


def line_widget():
    def draw(fig, scale):
        ax = fig.subplots()
        xs = np.linspace(0, 1000, 200)
        (line,) = ax.plot(xs, scale * np.sin(xs / 50))
        ax.set(xlabel="relative distance r", ylabel="score", title=f"scale = {scale}")

        def update(scale):
            line.set_ydata(scale * np.sin(xs / 50))
            ax.set_ylim(-1.1 * scale, 1.1 * scale)
            ax.set_title(f"scale = {scale}")

        return update

    return viz.InteractiveFigure(draw, figsize=(4.0, 3.0), scale=ipywidgets.IntSlider(1, 1, 1000))


def tick_label_boxes(ax, axis):
    renderer = ax.figure.canvas.get_renderer()
    return [t.get_window_extent(renderer) for t in axis.get_ticklabels() if t.get_visible() and t.get_text()]


def test_widget_png_has_the_figure_size_and_changes_with_the_control():
    w = line_widget()
    first = w.image.value
    img = Image.open(io.BytesIO(first))
    assert img.format == "PNG" and img.size == (4 * 72, 3 * 72)
    assert w.update(scale=700) != first
    before = w.image.value
    w.controls["scale"].value = 3  # moving the slider re-renders
    assert w.image.value != before


def test_labels_and_title_stay_clear_of_ticks_after_updates():
    w = line_widget()
    for scale in (5, 999, 1):  # y tick labels change width: "-5" ... "-1000"
        w.update(scale=scale)
        ax = w.fig.axes[0]
        renderer = w.fig.canvas.get_renderer()
        xl = ax.xaxis.label.get_window_extent(renderer)
        assert all(xl.ymax <= b.ymin + 0.5 for b in tick_label_boxes(ax, ax.xaxis))
        assert ax.title.get_window_extent(renderer).ymin >= ax.get_window_extent(renderer).ymax
        assert ax.get_title() == f"scale = {scale}"
        # y tick labels grow from "1.0" to "-1000": the y label moves with them
        yl = ax.yaxis.label.get_window_extent(renderer)
        assert all(yl.xmax <= b.xmin + 0.5 for b in tick_label_boxes(ax, ax.yaxis))


def test_png_bytes_draws_once_at_the_requested_dpi():
    fig, ax = viz.figure(width=2.0, height=1.0)
    ax.plot([0, 1], [0, 1])
    img = Image.open(io.BytesIO(viz.png_bytes(fig, dpi=50)))
    assert img.size == (100, 50)


def test_signed_heatmap_is_symmetric_about_zero_and_stays_so_after_updates():
    fig, ax = viz.figure()
    im = viz.heatmap(np.array([[-1.0, 3.0], [0.5, 2.0]]), ax=ax, colorbar="bias")
    assert (im.norm.vmin, im.norm.vmax) == (-3.0, 3.0) and im.get_cmap().name.startswith(viz.DIVERGING)
    assert im.colorbar_.ax.yaxis.get_scale() == "linear"  # plain Normalize: no per-tick Python calls
    viz.update_heatmap(im, np.array([[0.0, 0.25], [-5.0, 1.0]]))
    assert (im.norm.vmin, im.norm.vmax) == (-5.0, 5.0)
    seq = viz.heatmap(np.array([[1.0, 2.0], [3.0, 4.0]]), ax=viz.figure()[1])
    assert (seq.norm.vmin, seq.norm.vmax) == (1.0, 4.0) and seq.get_cmap().name.startswith(viz.SEQUENTIAL)
