"""`make images` draws every figure in images/ from posenc_lib (scripts/make_images.py)."""
from pathlib import Path

import pytest
from _scripts import load_script
from PIL import Image

ROOT = Path(__file__).resolve().parents[1]


make_images = load_script("make_images")


@pytest.mark.parametrize("name", ["alibi_biases", "cope_counting"])
def test_regenerated_figure_is_a_valid_png_on_white(tmp_path, name):
    assert make_images.main([name, "--out", str(tmp_path)]) == 0
    path = tmp_path / f"{name}.png"
    with Image.open(path) as im:
        im.verify()  # a complete, uncorrupted PNG
    with Image.open(path) as im:
        assert im.format == "PNG" and im.width > 200 and im.height > 100
        corner = im.convert("RGB").getpixel((1, 1))
    assert corner == (255, 255, 255), "figures have an opaque white background (viz style)"
    assert [p.name for p in tmp_path.iterdir()] == [f"{name}.png"], "only the asked figure is drawn"


def test_images_holds_exactly_the_figures_make_images_draws():
    """Run `make images` after adding a figure to scripts/make_images.py; nothing else lives in images/."""
    drawn = {f"{n}.png" for n in (*make_images.FIGURES, *make_images.EXPERIMENTS)}
    assert {p.name for p in (ROOT / "images").iterdir()} == drawn


def test_unknown_figure_name_is_refused(tmp_path, capsys):
    with pytest.raises(SystemExit):
        make_images.main(["no_such_figure", "--out", str(tmp_path)])
    assert "unknown figure" in capsys.readouterr().err
