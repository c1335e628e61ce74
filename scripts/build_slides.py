"""Build reveal.js slide decks from the chapter notebooks that open with no network.

    python scripts/build_slides.py              # every notebooks/NN_*.ipynb -> build/slides/
    python scripts/build_slides.py 05 06        # only those whose name starts so
    python scripts/build_slides.py --out DIR    # another output folder

nbconvert's slides pull reveal.js, require.js, jQuery and MathJax from CDNs. Here they
come from the npm packages pinned in package.json (`npm ci` installs them into
node_modules/; `make slides` does it for you) and are copied into <out>/lib/, so the
folder is self-contained: open <out>/index.html from disk, a USB stick or a lecture-hall
PC with networking off. Each deck follows the cells' `slideshow` metadata (slide,
subslide, fragment, skip). Widgets need a live kernel, so in a deck each widget cell shows
only a note pointing to the notebook; the static figure before it is kept.
"""
from __future__ import annotations

import argparse
import html
import shutil
import sys
from pathlib import Path

import nbformat
from jinja2 import DictLoader
from nbconvert import SlidesExporter
from traitlets.config import Config

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
NODE_MODULES = ROOT / "node_modules"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"

# What each deck loads, relative to the deck (decks sit next to lib/).
REVEAL = "lib/reveal.js"
REQUIRE_JS = "lib/require.js"
JQUERY = "lib/jquery.min.js"
MATHJAX = "lib/mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"

# Files copied from node_modules into <out>/lib (MathJax 2 only what TeX -> CommonHTML needs:
# the full package is 73 MB, this subset about 6 MB).
ASSETS: list[tuple[str, str]] = [
    ("reveal.js/dist/reveal.js", "reveal.js/dist/reveal.js"),
    ("reveal.js/dist/reveal.css", "reveal.js/dist/reveal.css"),
    ("reveal.js/dist/theme", "reveal.js/dist/theme"),
    ("reveal.js/plugin/notes", "reveal.js/plugin/notes"),
    ("reveal.js/LICENSE", "reveal.js/LICENSE"),
    ("requirejs/require.js", "require.js"),
    ("jquery/dist/jquery.min.js", "jquery.min.js"),
    ("jquery/LICENSE.txt", "jquery.LICENSE.txt"),
    ("mathjax/MathJax.js", "mathjax/MathJax.js"),
    ("mathjax/LICENSE", "mathjax/LICENSE"),
    ("mathjax/config/TeX-AMS_CHTML-full.js", "mathjax/config/TeX-AMS_CHTML-full.js"),
    ("mathjax/config/Safe.js", "mathjax/config/Safe.js"),
    ("mathjax/extensions", "mathjax/extensions"),
    ("mathjax/jax/element", "mathjax/jax/element"),
    ("mathjax/jax/input/TeX", "mathjax/jax/input/TeX"),
    ("mathjax/jax/output/CommonHTML", "mathjax/jax/output/CommonHTML"),
    ("mathjax/jax/output/PreviewHTML", "mathjax/jax/output/PreviewHTML"),
    ("mathjax/fonts/HTML-CSS/TeX/woff", "mathjax/fonts/HTML-CSS/TeX/woff"),
    ("mathjax/fonts/HTML-CSS/TeX/otf", "mathjax/fonts/HTML-CSS/TeX/otf"),
]

# The stock reveal template also imports mermaid.js from a CDN (an ES module that nbconvert
# offers no option for) and, for notebooks with saved widget state, the widget manager from
# unpkg. No chapter uses mermaid or saved widget state, so both blocks are left out.
OFFLINE_TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_css -%}
<style type="text/css">
/* Keep headings as written: the white theme upper-cases them, which turns R_m into R_M. */
.reveal .slides h1, .reveal .slides h2, .reveal .slides h3, .reveal .slides h4 { text-transform: none; }
/* Wrap long code lines instead of cutting them off at the slide's right edge. */
.reveal .jp-InputArea pre, .reveal .jp-OutputArea pre { white-space: pre-wrap; word-break: break-word; }
</style>
{%- endblock html_head_css -%}
"""

WIDGET_NOTE = (
    '<div style="border:1px dashed #888;padding:0.4em 0.8em;color:#333;font-size:0.8em">'
    "Live widget (it needs a running kernel): open <code>notebooks/{name}.ipynb</code> with "
    "<code>make lab</code> and move its controls. The static figure just before shows its starting state.</div>"
)


def missing_assets() -> list[str]:
    return [src for src, _ in ASSETS if not (NODE_MODULES / src).exists()]


def copy_assets(out: Path) -> None:
    lib = out / "lib"
    for src, dst in ASSETS:
        s, d = NODE_MODULES / src, lib / dst
        d.parent.mkdir(parents=True, exist_ok=True)
        if s.is_dir():
            shutil.copytree(s, d, dirs_exist_ok=True)
        else:
            shutil.copy2(s, d)


def exporter() -> SlidesExporter:
    c = Config()
    c.SlidesExporter.reveal_url_prefix = REVEAL
    c.SlidesExporter.reveal_theme = "white"
    c.SlidesExporter.reveal_transition = "none"
    c.SlidesExporter.reveal_number = "c/t"
    c.SlidesExporter.reveal_scroll = True  # long code cells scroll instead of overflowing
    c.SlidesExporter.require_js_url = REQUIRE_JS
    c.SlidesExporter.jquery_url = JQUERY
    c.SlidesExporter.mathjax_url = MATHJAX
    c.SlidesExporter.embed_images = True  # markdown images (../images/*.png) go inside the deck
    c.SlidesExporter.exclude_input_prompt = True
    c.SlidesExporter.exclude_output_prompt = True
    ex = SlidesExporter(config=c, extra_loaders=[DictLoader({"posenc_offline.html.j2": OFFLINE_TEMPLATE})])
    ex.template_file = "posenc_offline.html.j2"
    return ex


def replace_widgets(nb: nbformat.NotebookNode, name: str) -> int:
    """Swap each widget output (useless without a kernel) for a short note; returns how many.

    The widget-building code is left out of the deck too (it fills a slide and says little
    in a lecture); the notebook keeps it.
    """
    n = 0
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        for i, out in enumerate(cell.get("outputs", [])):
            if WIDGET_MIME in out.get("data", {}):
                cell.outputs[i] = nbformat.v4.new_output(
                    "display_data", data={"text/html": WIDGET_NOTE.format(name=html.escape(name))})
                cell.metadata.setdefault("transient", {})["remove_source"] = True
                n += 1
    return n


def build_deck(nb_path: Path, out: Path, ex: SlidesExporter | None = None) -> Path:
    ex = ex or exporter()
    nb = nbformat.read(nb_path, as_version=4)
    replace_widgets(nb, nb_path.stem)
    body, _ = ex.from_notebook_node(nb, resources={"metadata": {"name": nb_path.stem, "path": str(nb_path.parent)}})
    deck = out / f"{nb_path.stem}.slides.html"
    deck.write_text(body, encoding="utf-8")
    return deck


def write_index(out: Path, decks: list[Path]) -> Path:
    items = "\n".join(f'  <li><a href="{d.name}">{html.escape(d.name.removesuffix(".slides.html"))}</a></li>'
                      for d in decks)
    index = out / "index.html"
    index.write_text(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>posenc slides</title></head>\n"
        "<body style=\"font-family:sans-serif;max-width:40em;margin:2em auto\">\n"
        "<h1>posenc: slide decks</h1>\n<p>One deck per chapter; arrows move, <kbd>S</kbd> opens speaker notes, "
        "<kbd>Esc</kbd> the overview. Everything loads from <code>lib/</code>: no network needed.</p>\n"
        f"<ul>\n{items}\n</ul>\n</body></html>\n", encoding="utf-8")
    return index


def build(prefixes: list[str], out: Path) -> list[Path]:
    missing = missing_assets()
    if missing:
        raise SystemExit(f"missing {', '.join(missing)} in {NODE_MODULES}: run `npm ci` (or `make slides`, "
                         "which runs it) first")
    notebooks = sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))
    if prefixes:
        notebooks = [p for p in notebooks if any(p.stem.startswith(x) for x in prefixes)]
    if not notebooks:
        raise SystemExit(f"no notebooks match {prefixes} in {NB_DIR}: run `make notebooks` first")
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    ex = exporter()
    decks = []
    for nb_path in notebooks:
        decks.append(build_deck(nb_path, out, ex))
        print(decks[-1])
    write_index(out, sorted(out.glob("[0-9][0-9]_*.slides.html")))
    return decks


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prefixes", nargs="*", help="notebook name prefixes, e.g. 05")
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "slides")
    args = ap.parse_args(argv)
    build(args.prefixes, args.out.resolve())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
