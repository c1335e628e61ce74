"""`make slides` builds reveal.js decks that open with no network (scripts/build_slides.py)."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import nbformat
import pytest
from _scripts import load_script

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("POSENC_ARTIFACTS_DIR", ROOT / "build" / "artifacts"))
CHROMIUM = "/usr/bin/chromium"


build_slides = load_script("build_slides")


class Refs(HTMLParser):
    """Collects what a page loads: script src, link href, and URLs inside inline scripts."""

    def __init__(self):
        super().__init__()
        self.loads: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "script":
            self._in_script = True
            if a.get("src"):
                self.loads.append(a["src"])
        elif tag == "link" and a.get("href"):
            self.loads.append(a["href"])

    def handle_endtag(self, tag):
        if tag == "script":
            self._in_script = False

    def handle_data(self, data):
        if self._in_script:  # require([...]) lists, ES module imports
            self.loads += re.findall(r"""["']((?:https?:)?//[^"'\s]+|[^"'\s]+\.(?:m?js|css))["']""", data)


def refs(html: str) -> list[str]:
    p = Refs()
    p.feed(html)
    return p.loads


@pytest.fixture(scope="module")
def node_assets():
    """The npm copies of reveal.js & co.; installed here with `npm ci` when missing (as `make slides` does)."""
    if build_slides.missing_assets():
        if shutil.which("npm") is None:
            pytest.skip("npm is not installed: it is needed to fetch reveal.js/MathJax for the slides")
        subprocess.run(["npm", "ci", "--no-audit", "--no-fund"], cwd=ROOT, check=True, capture_output=True)
    assert not build_slides.missing_assets()


def small_notebook() -> nbformat.NotebookNode:
    nb = nbformat.v4.new_notebook()
    md = nbformat.v4.new_markdown_cell("# Rotations\nAngles $\\theta_j = b^{-2j/d}$ and\n$$R_m q \\cdot R_n k$$",
                                       metadata={"slideshow": {"slide_type": "slide"}})
    setup = nbformat.v4.new_code_cell("import torch", metadata={"slideshow": {"slide_type": "skip"}})
    code = nbformat.v4.new_code_cell("1 + 1", metadata={"slideshow": {"slide_type": "subslide"}})
    code.outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=1)]
    widget = nbformat.v4.new_code_cell("w", metadata={"slideshow": {"slide_type": "fragment"}})
    widget.outputs = [nbformat.v4.new_output("execute_result", execution_count=2, data={
        "text/plain": "VBox(children=(...))",
        "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2, "version_minor": 0}})]
    nb.cells = [md, setup, code, widget]
    return nb


@pytest.fixture(scope="module")
def deck(node_assets, tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("slides")
    nb_path = tmp / "99_small.ipynb"
    nbformat.write(small_notebook(), nb_path)
    out = tmp / "out"
    out.mkdir()
    build_slides.copy_assets(out)
    return build_slides.build_deck(nb_path, out)


def test_deck_loads_no_remote_script_or_stylesheet(deck):
    loads = refs(deck.read_text())
    assert any("reveal.js" in u for u in loads) and any("MathJax" in u for u in loads)
    remote = [u for u in loads if re.match(r"(https?:)?//", u)]
    assert not remote, f"the deck loads from the network: {remote}"
    assert not re.search(r"unpkg\.com|cdnjs|cdn\.jsdelivr", deck.read_text()), "a CDN address is left in the deck"


def test_everything_the_deck_loads_is_in_its_folder(deck):
    for url in refs(deck.read_text()):
        path = deck.parent / unquote(urlsplit(url).path)
        assert path.is_file(), f"{url} is not in {deck.parent}"


def test_deck_follows_slide_metadata_and_replaces_widgets(deck):
    html = deck.read_text()
    assert "import torch" not in html, "cells marked skip stay out of the deck"
    assert "fragment" in html and html.count("<section") >= 2
    assert "VBox(children" not in html and "Live widget" in html and "99_small.ipynb" in html


def test_real_chapter_deck_is_offline(node_assets, tmp_path):
    chapters = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    if not chapters:
        pytest.skip("no chapter notebooks built yet (`make notebooks`)")
    out = tmp_path / "slides"
    decks = build_slides.build([chapters[-1].stem[:2]], out)
    assert decks and (out / "index.html").is_file()
    for url in refs(decks[0].read_text()):
        assert not re.match(r"(https?:)?//", url), f"{decks[0].name} loads {url} from the network"
        assert (out / unquote(urlsplit(url).path)).is_file(), url


@pytest.mark.browser
@pytest.mark.timeout(180)
def test_deck_renders_in_chromium_with_networking_off(deck):
    """Open the deck from disk, offline: reveal.js starts, MathJax typesets, nothing asks the network."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # pragma: no cover
        pytest.skip("the `playwright` Python package is not installed (pyproject's test extra)")
    if not os.access(CHROMIUM, os.X_OK):
        pytest.skip(f"{CHROMIUM} is missing: install Debian's chromium (`apt-get install -y chromium`)")
    from test_browser import CHROMIUM_ARGS

    requests, failed = [], []
    with tempfile.TemporaryDirectory() as profile, sync_playwright() as p:
        ctx = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                   args=CHROMIUM_ARGS, offline=True,
                                                   viewport={"width": 1280, "height": 800})
        try:
            page = ctx.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("requestfailed", lambda r: failed.append(r.url))
            page.goto(deck.as_uri())
            page.wait_for_function("() => document.querySelector('.reveal.ready') !== null", timeout=30_000)
            page.wait_for_function("() => document.querySelectorAll('.MathJax_CHTML, .mjx-chtml').length >= 2",
                                   timeout=30_000)
            time.sleep(0.5)
            ARTIFACTS.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "slides-offline.png"))
        finally:
            ctx.close()
    remote = [u for u in requests if not u.startswith(("file:", "data:", "blob:"))]
    assert not remote, f"the deck asked the network for {remote}"
    assert not failed, f"files the deck could not load: {failed}"
