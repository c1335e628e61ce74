"""The course website (`make site`: scripts/build_site.py, scripts/site_widgets.py, site/).

Without a browser: the Binder and Colab addresses, how widget controls are sampled, that each
frame is the widget's own picture for its settings (in the order the page's script reads them),
and a two-page site built from small notebooks (offline, links, static widget, alt text).

With a browser (marker `browser`): the reader's test. The real site is built into build/site/,
served by a plain static file server on 127.0.0.1 and opened in headless Chromium; for every
page: math typeset, no request leaves 127.0.0.1, search finds a word of that page, every control
of every static widget changes its figure, no horizontal scroll at 390 px, readable text in the
light and the dark theme. Screenshots of a failing page go to build/artifacts/.
"""
from __future__ import annotations

import base64
import collections
import io
import json
import os
import re
import sys
import urllib.request
from pathlib import Path
from urllib.parse import unquote, urlsplit

import ipywidgets as widgets
import nbformat
import numpy as np
import pytest
import torch
from _scripts import load_script
from PIL import Image

from test_slides import node_assets  # noqa: F401  (npm's MathJax, `npm ci` when missing: as make site)

from posenc_lib import viz

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("POSENC_ARTIFACTS_DIR", ROOT / "build" / "artifacts"))
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# Every page of both editions: (language, the notebook the page shows). The Chinese pages are in zh/.
PAGES = [("en", p) for p in NOTEBOOKS] + [("zh", p.parent / "zh" / p.name) for p in NOTEBOOKS]
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
build_site = load_script("build_site")
site_widgets = load_script("site_widgets")


# -- Binder and Colab ----------------------------------------------------------------------------

def test_launch_links_open_the_chapter_on_binder_and_in_colab():
    repo = build_site.Repo.parse("https://github.com/you/posenc", "main")
    assert repo.binder("05_rope.ipynb") == (
        "https://mybinder.org/v2/gh/you/posenc/main?urlpath=lab%2Ftree%2Fnotebooks%2F05_rope.ipynb")
    assert repo.colab("05_rope.ipynb") == (
        "https://colab.research.google.com/github/you/posenc/blob/main/notebooks/05_rope.ipynb")
    assert build_site.Repo.parse("https://github.com/you/posenc.git/", "term-2") == \
        build_site.Repo("you", "posenc", "term-2")
    assert "/v2/gh/you/posenc/fix%2Fsite?" in build_site.Repo.parse(repo.url, "fix/site").binder("x.ipynb")


def test_readme_links_the_published_site_on_its_first_screen():
    repo = build_site.Repo.parse(load_script("build_notebooks").repository_url(), "main")
    assert build_site.Repo.parse("https://github.com/You/posenc", "main").pages == "https://you.github.io/posenc/"
    first_screen = "\n".join((ROOT / "README.md").read_text().splitlines()[:12])
    assert f"]({repo.pages})" in first_screen


# Links a README may hold besides repository files: documentation that exists whatever this project does.
WELL_KNOWN = {"docs.python.org", "pytorch.org", "docs.pytorch.org", "huggingface.co", "jupyter.org",
              "jupyterlab.readthedocs.io", "nbgrader.readthedocs.io", "jupyterhub.readthedocs.io", "mybinder.org",
              "colab.research.google.com", "arxiv.org", "www.sphinx-doc.org", "docs.github.com"}


def readme_link_problems(text: str, repo) -> list[str]:
    """Links of a README that lead nowhere: missing repository files, this project's unpublished
    addresses (its Pages site without the workflow and the sentence saying when it appears, its own
    repository), and anything else that is not well-known documentation."""
    problems = []
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        url = urlsplit(target)
        if not url.scheme:
            if not (ROOT / unquote(url.path)).exists():
                problems.append(f"{target}: no such file in the repository")
        elif url.netloc.endswith(".github.io"):
            if not target.startswith(repo.pages):
                problems.append(f"{target}: a Pages site that is not this project's")
            elif not (ROOT / ".github" / "workflows" / "site.yml").is_file():
                problems.append(f"{target}: the Pages address without the workflow that publishes it")
            elif not re.search(r"appears once the\s+workflow has run on a fork", text):
                problems.append(f"{target}: the README must say the address appears once the workflow has run on a fork")
        elif url.netloc == "github.com" and url.path.strip("/").lower().startswith(f"{repo.owner}/{repo.name}".lower()):
            problems.append(f"{target}: this project's own address; link the repository file relatively")
        elif url.netloc not in WELL_KNOWN:
            problems.append(f"{target}: neither a repository file nor well-known documentation")
    return problems


def test_readme_links_only_what_exists():
    repo = build_site.Repo.parse(load_script("build_notebooks").repository_url(), "main")
    readme = (ROOT / "README.md").read_text()
    assert readme_link_problems(readme, repo) == []
    made_up = ("[site](https://posenc.github.io/posenc/) [me](https://github.com/posenc/posenc/tree/main) "
               "[x](docs/missing.md) [y](https://example.org/posenc)")
    assert [p.split(":")[0] for p in readme_link_problems(made_up, repo)] == [
        "https", "https", "docs/missing.md", "https"]
    assert len(readme_link_problems(made_up, repo)) == 4
    # one line in Chinese points to the Chinese edition
    (line,) = [x for x in readme.splitlines() if re.search(r"[\u4e00-\u9fff]", x)]
    assert "](notebooks/zh/00_index.ipynb)" in line


def test_pages_workflow_builds_with_make_site_and_publishes_build_site():
    text = (ROOT / ".github" / "workflows" / "site.yml").read_text()
    torch_version = re.search(r"^TORCH_VERSION := (\S+)$", (ROOT / "Makefile").read_text(), re.M).group(1)
    assert re.search(r"^\s+make site$", text, re.M)
    assert 'REPO_URL="${{ github.server_url }}/${{ github.repository }}"' in text
    assert 'REPO_BRANCH="${{ github.ref_name }}"' in text
    assert f'TORCH_SPEC="torch=={torch_version} --index-url https://download.pytorch.org/whl/cpu"' in text
    assert re.search(r"upload-pages-artifact@v\d+\n\s+with:\n\s+path: build/site$", text, re.M)
    assert "actions/deploy-pages@" in text and "pages: write" in text and "id-token: write" in text
    assert re.search(r"python-version: \"3\.11\"", text)  # the lock's Python


@pytest.mark.parametrize("url, branch, name", [
    ("https://gitlab.com/you/posenc", "main", "repo_url"),  # Colab opens GitHub only
    ("git@github.com:you/posenc.git", "main", "repo_url"),
    ("https://github.com/you", "main", "repo_url"),
    ("https://github.com/you/posenc", "", "branch"),
    ("https://github.com/you/posenc", "my branch", "branch"),
])
def test_an_address_binder_and_colab_cannot_open_is_refused(url, branch, name):
    with pytest.raises(ValueError, match=name):
        build_site.Repo.parse(url, branch)


# -- sampling the controls -----------------------------------------------------------------------

def test_a_slider_offers_its_whole_grid_and_a_plan_keeps_both_ends_and_the_start():
    kind, values, labels = site_widgets.all_values(widgets.IntSlider(64, min=4, max=256, step=4))
    assert kind == "range" and values == list(range(4, 257, 4)) and labels[:2] == ["4", "8"]
    (axis,) = site_widgets.plan({"n": widgets.IntSlider(64, min=4, max=256, step=4)}, max_steps=9)
    assert len(axis["values"]) == 9 and axis["total"] == 64
    assert axis["values"][0] == 4 and axis["values"][-1] == 256 and axis["values"][axis["start"]] == 64
    assert axis["values"] == sorted(axis["values"])


def test_a_log_slider_offers_powers_of_its_base_and_a_float_slider_its_steps():
    _, values, labels = site_widgets.all_values(widgets.FloatLogSlider(1e4, base=10, min=1, max=6, step=1))
    assert values == pytest.approx([10.0, 100.0, 1e3, 1e4, 1e5, 1e6]) and labels[0] == "10"
    _, values, _ = site_widgets.all_values(widgets.FloatSlider(0.3, min=0.1, max=0.5, step=0.1))
    assert values == [0.1, 0.2, 0.3, 0.4, 0.5]  # no 0.30000000000000004: the start value is found
    (axis,) = site_widgets.plan({"p": widgets.FloatSlider(0.3, min=0.1, max=0.5, step=0.1)})
    assert axis["values"][axis["start"]] == 0.3


def test_options_and_checkboxes_keep_every_value():
    axes = site_widgets.plan({"form": widgets.Dropdown(options=[("causal", 1), ("two-sided", 2)], value=2),
                              "sel": widgets.SelectionSlider(options=[16, 32, 64], value=32),
                              "on": widgets.Checkbox(value=True, description="positions")})
    assert [a["kind"] for a in axes] == ["select", "select", "checkbox"]
    assert [a["labels"] for a in axes] == [["causal", "two-sided"], ["16", "32", "64"], ["off", "on"]]
    assert [a["start"] for a in axes] == [1, 1, 1]
    assert axes[2]["description"] == "positions"


def test_the_cross_product_is_thinned_to_the_frame_budget_sliders_first():
    controls = {"a": widgets.IntSlider(0, 0, 100), "b": widgets.IntSlider(0, 0, 10),
                "kind": widgets.Dropdown(options=["x", "y", "z"])}
    axes = site_widgets.plan(controls, max_steps=9, max_frames=60)
    counts = [len(a["values"]) for a in axes]
    assert counts[2] == 3 and counts[0] * counts[1] * 3 <= 60 and min(counts[:2]) >= 4
    with pytest.raises(ValueError, match="max_frames"):
        site_widgets.plan({"kind": widgets.Dropdown(options=list("abcdef")), "on": widgets.Checkbox()},
                          max_frames=10)


def test_a_control_of_unknown_kind_is_named_in_the_error():
    with pytest.raises(ValueError, match="'note'"):
        site_widgets.all_values(widgets.Text("hi", description="note"))


# -- frames --------------------------------------------------------------------------------------

def pixels(png: bytes) -> np.ndarray:
    return np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.float64)


def small_widget() -> viz.InteractiveFigure:
    viz.use_style()
    return viz.interactive_heatmap(
        lambda n, flip: (torch.arange(n * n, dtype=torch.float64).reshape(n, n) - n * n / 2) * (-1 if flip else 1),
        title=lambda n, flip: f"n = {n}", figsize=(3.0, 2.4),
        n=widgets.IntSlider(3, min=2, max=6, description="size"), flip=widgets.Checkbox(False, description="flip"))


def test_each_frame_is_the_widgets_own_picture_for_its_settings_in_row_major_order(tmp_path):
    w = small_widget()
    spec = site_widgets.render(w, tmp_path)
    assert [c["labels"] for c in spec["controls"]] == [["2", "3", "4", "5", "6"], ["off", "on"]]
    assert len(spec["frames"]) == 10 and spec["distinct"] == 10
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(set(spec["frames"]))
    assert spec["bytes"] == sum(p.stat().st_size for p in tmp_path.iterdir())
    # Row-major: the last control varies fastest. Compare with fresh renders of another widget.
    other = small_widget()
    for i, (n, flip) in enumerate((n, f) for n in range(2, 7) for f in (False, True)):
        want = pixels(other.update(n=n, flip=flip))
        have = pixels((tmp_path / spec["frames"][i]).read_bytes())
        assert have.shape == want.shape
        closest = min(range(10), key=lambda j: np.abs(pixels((tmp_path / spec["frames"][j]).read_bytes()) - want).mean())
        assert closest == i, f"frame {i} is not the picture for n={n}, flip={flip}"
        assert np.abs(have - want).mean() < 1.0 and np.abs(have - want).max() <= 8  # 256 colours: nearly exact
    assert w.values() == {"n": 3, "flip": False}
    assert np.abs(pixels(w.image.value) - pixels(other.update(n=3, flip=False))).mean() == 0  # left at its start


def test_identical_frames_are_stored_once(tmp_path):
    viz.use_style()
    w = viz.interactive_heatmap(lambda n, unused: torch.eye(n), title="eye", figsize=(3.0, 2.4),
                                n=widgets.IntSlider(2, min=2, max=3), unused=widgets.Checkbox(False))
    spec = site_widgets.render(w, tmp_path)
    assert len(spec["frames"]) == 4 and spec["distinct"] == 2 and len(list(tmp_path.iterdir())) == 2
    assert spec["frames"][0] == spec["frames"][1] != spec["frames"][2] == spec["frames"][3]


# -- a small site, built for real ----------------------------------------------------------------

WIDGET_CODE = """\
import ipywidgets as widgets
import torch
from posenc_lib import viz

viz.use_style()
viz.interactive_heatmap(
    lambda n, flip: (torch.arange(n * n, dtype=torch.float64).reshape(n, n) - n * n / 2) * (-1 if flip else 1),
    title=lambda n, flip: f"n = {n}", figsize=(3.0, 2.4),
    n=widgets.IntSlider(3, min=2, max=6, description="size"), flip=widgets.Checkbox(False, description="flip"))"""


def small_notebooks(folder: Path) -> list[Path]:
    colab = load_script("build_notebooks").colab_install()
    fig, ax = viz.figure()
    ax.plot([0, 1], [1, 0])
    png = base64.b64encode(viz.png_bytes(fig)).decode()
    index = nbformat.v4.new_notebook()
    index.cells = [nbformat.v4.new_markdown_cell("# Small course\n\nAngles $\\theta_j = b^{-2j/d}$.\n\n## Conventions\n\n"
                                                 "Offsets are $j - i$."),
                   nbformat.v4.new_code_cell(colab + "\nx = 1")]
    demo = nbformat.v4.new_notebook()
    figure = nbformat.v4.new_code_cell("fig = None  # the stored output below stands for a figure")
    figure.outputs = [nbformat.v4.new_output("display_data", data={"image/png": png, "text/plain": "<Figure>"})]
    widget = nbformat.v4.new_code_cell(WIDGET_CODE)
    widget.outputs = [nbformat.v4.new_output("execute_result", execution_count=3, data={
        "text/plain": "<InteractiveFigure>", WIDGET_MIME: {"model_id": "x", "version_major": 2, "version_minor": 0}})]
    demo.cells = [nbformat.v4.new_markdown_cell("# Chapter 1 — Quokkas\n\nSee the [conventions](00_index.ipynb#Conventions)."),
                  nbformat.v4.new_code_cell(colab + "\ny = 2"),
                  nbformat.v4.new_markdown_cell("The line falls from one to zero.\n\nA falling line, drawn once."),
                  figure,
                  nbformat.v4.new_markdown_cell("Move the size: the heatmap of $n^2$ numbers grows."),
                  widget]
    paths = [folder / "00_index.ipynb", folder / "01_quokkas.ipynb"]
    for nb, path in zip((index, demo), paths):
        nb.metadata = {"kernelspec": load_script("build_notebooks").KERNELSPEC, "language_info": {"name": "python"}}
        nbformat.write(nb, path)
    # The Chinese edition: the same code cells, the prose in Chinese (as `make zh` writes it).
    chinese = {"# Small course": "# 小课程\n\n角度 $\\theta_j = b^{-2j/d}$。\n\n## 约定\n\n偏移为 $j - i$。",
               "# Chapter 1": "# 第 1 章 — 短尾矮袋鼠\n\n见[约定](00_index.ipynb#约定)。",
               "The line": "这条线从一降到零。\n\n一条下降的线，只画一次。",
               "Move the size": "拖动大小：$n^2$ 个数的热图随之变大。"}
    (folder / "zh").mkdir(exist_ok=True)
    for nb, path in zip((index, demo), paths):
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                cell.source = next(zh for en, zh in chinese.items() if cell.source.startswith(en))
        nbformat.write(nb, folder / "zh" / path.name)
    return paths


@pytest.fixture(scope="module")
def small_site(node_assets, tmp_path_factory) -> tuple[Path, dict]:
    tmp = tmp_path_factory.mktemp("site")
    src = tmp / "notebooks"
    src.mkdir()
    repo = build_site.Repo.parse("https://github.com/you/posenc", "main")
    report = build_site.build(tmp / "site", repo, notebooks=small_notebooks(src), log=lambda *_: None)
    return tmp / "site", report


def loads(page: str) -> list[str]:
    """Every address a page's tags load (script src, link href, img src)."""
    return [u for u in re.findall(r'<(?:script|link|img)\b[^>]*?\b(?:src|href)="([^"]+)"', page)
            if not u.startswith("#")]


def test_small_site_loads_everything_from_itself(small_site):
    out, _ = small_site
    for page in ("00_index.html", "01_quokkas.html", "search.html"):
        html = (out / page).read_text()
        for url in loads(html):
            assert not re.match(r"(https?:)?//", url), f"{page} loads {url} from the network"
            assert (out / unquote(urlsplit(url).path)).is_file(), f"{page}: {url} is not in the site"
        assert not re.search(r"cdn\.jsdelivr|unpkg\.com|cdnjs|googleapis", html), page
    assert "_static/mathjax/MathJax.js" in (out / "00_index.html").read_text()
    assert (out / ".nojekyll").is_file()  # GitHub Pages serves _static/ only then
    assert 'url=00_index.html' in (out / "index.html").read_text()


def test_small_site_page_has_run_links_the_conventions_and_no_install_lines(small_site):
    out, _ = small_site
    html = (out / "01_quokkas.html").read_text()
    assert 'href="https://mybinder.org/v2/gh/you/posenc/main?urlpath=lab%2Ftree%2Fnotebooks%2F01_quokkas.ipynb"' in html
    assert 'href="https://colab.research.google.com/github/you/posenc/blob/main/notebooks/01_quokkas.ipynb"' in html
    assert ">Launch on Binder<" in html and ">Open in Colab<" in html
    assert html.count('href="00_index.html#conventions"') == 2  # the chapter's own link and the one under the title
    assert "google.colab" not in html and "y</span> <span class=\"o\">=</span>" in html


def test_small_site_static_widget_shows_its_frames_and_says_the_notebook_has_the_full_range(small_site):
    out, report = small_site
    html = (out / "01_quokkas.html").read_text()
    (widget,) = re.findall(r'<div class="posenc-widget".*?</div>\n</div>', html, re.S)
    frames = json.loads(re.search(r'data-frames="([^"]+)"', widget).group(1).replace("&quot;", '"'))
    assert len(frames) == 10 and all((out / "_static" / "frames" / f).is_file() for f in frames)
    assert f'src="_static/frames/{frames[2]}"' in widget  # size 3 (second of five), flip off
    assert 'type="range" min="0" max="4" step="1" value="1"' in widget and 'type="checkbox"' in widget
    assert "every setting" in widget and "Settings: size = 3, flip = off" in widget
    assert "has the full range" in build_site.widget_note(
        {"controls": [{"description": "size", "labels": ["2", "6"], "total": 5}]})  # a thinned slider says so
    assert "Move the size" in widget  # alt text: the paragraph before the widget
    assert "Loading widget" not in html and WIDGET_MIME not in html
    assert report["widgets"] == [{"page": "01_quokkas", "cell": 5, "controls": {"size": "5/5", "flip": "2/2"},
                                  "frames": 10, "distinct": 10, "bytes": report["frames_bytes"]}]


def test_small_site_has_the_chinese_edition_beside_the_english(small_site):
    out, report = small_site
    en, zh = (out / "01_quokkas.html").read_text(), (out / "zh" / "01_quokkas.html").read_text()
    assert report["editions"] == ["en", "zh"] and 0 < report["edition_bytes"]["zh"] < report["total_bytes"] / 2
    # the language switch: the same chapter in the other language, both ways
    assert 'href="zh/01_quokkas.html" hreflang="zh">中文版<' in en
    assert 'href="../01_quokkas.html" hreflang="en">English<' in zh
    assert 'href="../00_index.html" hreflang="en">English<' in (out / "zh" / "00_index.html").read_text()
    # Binder and Colab open the Chinese notebook; the conventions link reaches the Chinese heading
    assert "urlpath=lab%2Ftree%2Fnotebooks%2Fzh%2F01_quokkas.ipynb" in zh and ">在 Binder 上运行<" in zh
    assert 'href="https://colab.research.google.com/github/you/posenc/blob/main/notebooks/zh/01_quokkas.ipynb"' in zh
    anchors = re.findall(r'href="00_index.html#([^"]+)"', zh)
    assert len(anchors) == 2 and len(set(anchors)) == 1
    assert f'id="{anchors[0]}"' in (out / "zh" / "00_index.html").read_text()
    # the widget and MathJax come from the English site: one copy of each
    (widget,) = re.findall(r'<div class="posenc-widget".*?</div>\n</div>', zh, re.S)
    assert 'data-base="../_static/frames/"' in widget and "预先算好" in widget
    for url in loads(zh):
        assert not re.match(r"(https?:)?//", url), f"zh page loads {url} from the network"
        assert (out / "zh" / unquote(urlsplit(url).path)).resolve().is_file(), f"zh: {url} is not in the site"
    assert not (out / "zh" / "_static" / "frames").exists() and not (out / "zh" / "_static" / "mathjax").exists()
    assert "../_static/mathjax/MathJax.js" in zh.replace("_static/../../", "../")
    assert re.search(r'<img alt="图。 一条下降的线，只画一次。" src="_images/', zh)
    assert '<html lang="zh-CN"' in zh or "<html lang=\"zh_CN\"" in zh
    # Chinese search: Sphinx's index of the Chinese pages has the Chinese words (split by jieba)
    index = json.loads(re.fullmatch(r"Search\.setIndex\((.*)\)", (out / "zh" / "searchindex.js").read_text().strip(),
                                    re.S).group(1))
    assert "袋鼠" in index["titleterms"] and "下降" in index["terms"] and "01_quokkas" in index["docnames"]


def test_small_site_figures_have_alt_text_and_search_has_the_pages(small_site):
    out, _ = small_site
    html = (out / "01_quokkas.html").read_text()
    assert re.search(r'<img alt="Figure\. A falling line, drawn once\." src="_images/', html)
    index = (out / "searchindex.js").read_text()
    assert "quokka" in index and "01_quokkas" in index


# -- the reader's test: the real site in Chromium --------------------------------------------------

def plain_words(nb_path: Path) -> collections.Counter:
    """Words of six letters or more in a notebook's prose (not its math or code)."""
    words: collections.Counter = collections.Counter()
    for cell in nbformat.read(nb_path, as_version=4).cells:
        if cell.cell_type == "markdown":
            text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|\]\([^)]*\)|<[^>]+>", " ", cell.source, flags=re.S)
            words.update(w.lower() for w in re.findall(r"\b[A-Za-z]{6,}\b", text))
    return words


def chinese_words(nb_path: Path) -> collections.Counter:
    """Words of two or more Chinese characters in a notebook's prose, split as Sphinx's index splits them."""
    import jieba

    words: collections.Counter = collections.Counter()
    for cell in nbformat.read(nb_path, as_version=4).cells:
        if cell.cell_type == "markdown":
            text = re.sub(r"\$\$.*?\$\$|\$[^$]*\$|`[^`]*`|\]\([^)]*\)|<[^>]+>", " ", cell.source, flags=re.S)
            words.update(w for w in jieba.cut_for_search(text) if re.fullmatch(r"[\u4e00-\u9fff]{2,}", w))
    return words


def search_term(nb_path: Path, lang: str = "en", indexed: set[str] | None = None) -> str:
    """A word of this page that the fewest other pages use (the most frequent such word here)."""
    words = plain_words if lang == "en" else chinese_words
    others = [set(words(p)) for _, p in PAGES if p.parent == nb_path.parent and p != nb_path]
    mine = words(nb_path)
    return min((w for w in mine if indexed is None or w in indexed),
               key=lambda w: (sum(w in o for o in others), -mine[w], w))


def search_terms(site: Path) -> set[str]:
    index = (site / "searchindex.js").read_text().strip()
    data = json.loads(re.fullmatch(r"Search\.setIndex\((.*)\)", index, re.S).group(1))
    return set(data["terms"]) | set(data["titleterms"])


# Colours: readable text is at least 4.5:1 against its background (WCAG AA).
JS_CONTRAST = """(el) => {
  const rgb = s => (s.match(/[\\d.]+/g) || []).map(Number);
  const lum = ([r, g, b]) => [r, g, b].map(v => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; })
      .reduce((acc, v, i) => acc + v * [0.2126, 0.7152, 0.0722][i], 0);
  let bg = el; while (bg && (rgb(getComputedStyle(bg).backgroundColor)[3] === 0 || getComputedStyle(bg).backgroundColor === 'transparent')) bg = bg.parentElement;
  const fg = lum(rgb(getComputedStyle(el).color)), back = lum(rgb(getComputedStyle(bg || document.body).backgroundColor));
  return (Math.max(fg, back) + 0.05) / (Math.min(fg, back) + 0.05);
}"""
JS_MATH = """() => { const m = Array.from(document.querySelectorAll('span.math, div.math'));
  return {total: m.length, typeset: m.filter(e => e.querySelector('.MathJax_CHTML')).length,
          errors: document.querySelectorAll('.mjx-merror, .MathJax_Error, .mjx-noError').length}; }"""
JS_IMAGE_READY = "img => img.complete && img.naturalWidth > 0"
# A static widget's note says where the live one is and whether the copy has every setting.
NOTE_WORDS = {"en": ("(Binder or Colab, top of the page)", ("full range", "every setting")),
              "zh": ("页首的 Binder 或 Colab", ("完整的取值范围", "每种设置"))}


@pytest.fixture(scope="module")
def real_site(node_assets) -> Path:
    """The site as `make site` builds it, into build/site/ (rebuilt: the test reads what the code makes
    now; POSENC_SITE_REUSE=1 reads the site already there, to debug the test itself)."""
    out = ROOT / "build" / "site"
    if os.environ.get("POSENC_SITE_REUSE") == "1" and (out / "index.html").is_file():
        return out
    repo = build_site.Repo.parse(load_script("build_notebooks").repository_url(), "main")
    build_site.build(out, repo)
    return out


@pytest.fixture(scope="module")
def server(real_site):
    from _browser import LoggedServer, free_port

    srv = LoggedServer()
    port = free_port()
    base = f"http://127.0.0.1:{port}/"
    log = ROOT / "build" / "site-server.log"
    srv.start([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "--directory", str(real_site)],
              log, "the static file server", lambda: urllib.request.urlopen(base, timeout=5).close())
    yield base
    srv.stop()


@pytest.fixture(scope="module")
def chromium(server):
    from _browser import CHROMIUM, CHROMIUM_ARGS, chromium_or_skip

    sync_playwright = chromium_or_skip()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class Reader:
    """A browser context that lets no request leave 127.0.0.1 and remembers every one."""

    def __init__(self, browser, base: str, **context):
        self.base = base
        self.ctx = browser.new_context(**context)
        self.requests: list[str] = []
        self.failed: list[str] = []
        self.ctx.route("**/*", self._route)
        # A page left while a font still loads aborts it (net::ERR_ABORTED): not a missing file.
        self.ctx.on("requestfailed", lambda r: "ERR_ABORTED" not in (r.failure or "")
                    and self.failed.append(f"{r.failure} {r.url}"))
        self.ctx.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))
        self.page = self.ctx.new_page()

    def _route(self, route):
        url = route.request.url
        self.requests.append(url)
        if url.startswith(self.base) or url.startswith(("data:", "blob:")):
            route.continue_()
        else:
            route.abort()

    def open(self, path: str) -> None:
        self.page.goto(self.base + path)
        self.page.wait_for_load_state("load")

    def remote(self) -> list[str]:
        return [u for u in self.requests if not u.startswith((self.base, "data:", "blob:"))]


def wait_for_math(page) -> dict:
    page.wait_for_function(
        "() => { const m = Array.from(document.querySelectorAll('span.math, div.math'));"
        " return m.every(e => e.querySelector('.MathJax_CHTML')); }", timeout=60_000)
    return page.evaluate(JS_MATH)


def move_until_the_figure_changes(page, widget, control, index: int) -> None:
    """Move one control as a reader does (arrow keys, the drop-down, a click) until its widget's
    figure changes; check the new frame loads; put the control back and check the first frame returns."""
    img = widget.locator("img.posenc-widget-frame")
    start = img.get_attribute("src")
    kind = control.evaluate("c => c.tagName === 'SELECT' ? 'select' : c.type")
    count = int(control.get_attribute("data-count"))
    name = control.get_attribute("data-name")
    if kind == "checkbox":
        control.click()

        def undo():
            control.click()
    elif kind == "select":
        first = control.input_value()
        for value in control.locator("option").evaluate_all("os => os.map(o => o.value)"):
            if value != first:
                control.select_option(value)
                if img.get_attribute("src") != start:
                    break

        def undo():
            control.select_option(first)
    else:
        first = int(control.input_value())
        key, back = ("ArrowRight", "ArrowLeft") if first < count - 1 else ("ArrowLeft", "ArrowRight")
        control.focus()
        moves = 0
        while moves < count - 1:
            page.keyboard.press(key)
            moves += 1
            if img.get_attribute("src") != start or int(control.input_value()) in (0, count - 1):
                break

        def undo():
            control.focus()
            for _ in range(moves):
                page.keyboard.press(back)
    assert img.get_attribute("src") != start, f"widget {index}: moving {name!r} does not change the figure"
    img.wait_for(state="visible")
    page.wait_for_function(JS_IMAGE_READY, arg=img.element_handle(), timeout=10_000)
    undo()
    assert img.get_attribute("src") == start, f"widget {index}: {name!r} moved back does not bring the first frame back"


def stored_widget_cells(nb_path: Path) -> int:
    nb = nbformat.read(nb_path, as_version=4)
    return sum(any(WIDGET_MIME in o.get("data", {}) for o in c.get("outputs", [])) for c in nb.cells
               if c.cell_type == "code")


def screenshot_on_failure(reader: Reader, name: str):
    class Guard:
        def __enter__(self):
            return self

        def __exit__(self, kind, exc, tb):
            if kind is not None:
                ARTIFACTS.mkdir(parents=True, exist_ok=True)
                try:
                    reader.page.screenshot(path=str(ARTIFACTS / f"site-{name}.png"), full_page=True)
                except Exception:  # noqa: BLE001  (the failure itself matters more than its picture)
                    pass
            return False

    return Guard()


@pytest.mark.browser
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("lang, nb_path", PAGES, ids=[f"{lang}-{p.stem}" for lang, p in PAGES])
def test_a_reader_can_use_every_page(lang, nb_path, real_site, server, chromium):
    name = nb_path.stem
    folder = "" if lang == "en" else f"{lang}/"
    text = build_site.TEXT[lang]
    desktop = Reader(chromium, server, viewport={"width": 1280, "height": 900}, color_scheme="light")
    try:
        with screenshot_on_failure(desktop, f"{lang}-{name}-desktop"):
            desktop.open(f"{folder}{name}.html")
            page = desktop.page
            math = wait_for_math(page)
            assert math["typeset"] == math["total"] and math["errors"] == 0, math
            assert page.locator("a", has_text=text["binder"]).count() == 1
            assert page.locator("a", has_text=text["colab"]).count() == 1
            if not name.startswith("00"):
                assert page.locator("a", has_text=text["conventions"]).first.get_attribute("href").startswith("00_index.html#")
            # the language switch opens this chapter in the other edition
            other = page.locator("a.posenc-lang")
            assert other.count() == 1 and other.get_attribute("hreflang") == text["other_lang"]
            href = other.get_attribute("href")
            assert (real_site / folder / href).resolve() == (
                real_site / ("" if lang != "en" else f"{text['other_lang']}/") / f"{name}.html").resolve()
            ratio = page.locator("article p").first.evaluate(JS_CONTRAST)
            assert ratio >= 4.5, f"light theme: body text contrast {ratio:.1f}:1"
            for img in page.locator("article img").all():
                assert img.get_attribute("alt"), "a figure without alt text"
            # Every widget of the notebook is a static copy here, and each of its controls works.
            static = page.locator(".posenc-widget")
            assert static.count() == stored_widget_cells(nb_path)
            assert page.locator(".posenc-widget-note", has_text=re.compile("running kernel|运行中的内核")).count() == 0
            for i in range(static.count()):
                w = static.nth(i)
                w.scroll_into_view_if_needed()
                note = w.locator(".posenc-widget-note").inner_text()
                where, full = NOTE_WORDS[lang]
                assert where in note and any(w in note for w in full), note
                for control in w.locator("[data-count]").all():
                    move_until_the_figure_changes(page, w, control, i)
            page.wait_for_load_state("networkidle")
            # Search (Sphinx's own index, in the page) finds a word of this page.
            term = search_term(nb_path, lang, search_terms(real_site / folder) if lang != "en" else None)
            desktop.open(f"{folder}search.html?q={term}")
            page.wait_for_function("() => /Search finished|搜索完成/.test(document.querySelector('.search-summary')?.textContent || '')",
                                   timeout=30_000)
            hits = page.locator("ul.search li a").evaluate_all("as => as.map(a => a.getAttribute('href'))")
            assert any(h.split("?")[0].split("#")[0] == f"{name}.html" for h in hits), f"searching {term!r}: {hits}"
            assert not desktop.remote(), f"requests left 127.0.0.1: {desktop.remote()}"
            assert not desktop.failed, f"failed or missing: {desktop.failed}"
    finally:
        desktop.ctx.close()

    phone = Reader(chromium, server, viewport={"width": 390, "height": 844}, color_scheme="dark",
                   is_mobile=True, has_touch=True, device_scale_factor=2)
    try:
        with screenshot_on_failure(phone, f"{lang}-{name}-phone-dark"):
            phone.open(f"{folder}{name}.html")
            page = phone.page
            wait_for_math(page)
            page.wait_for_load_state("networkidle")
            assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
            widths = page.evaluate("() => [document.documentElement.scrollWidth, window.innerWidth]")
            assert widths[0] <= widths[1], f"horizontal scroll at 390 px: the page is {widths[0]} px wide"
            ratio = page.locator("article p").first.evaluate(JS_CONTRAST)
            assert ratio >= 4.5, f"dark theme: body text contrast {ratio:.1f}:1"
            assert not phone.remote(), f"requests left 127.0.0.1: {phone.remote()}"
            assert not phone.failed, f"failed or missing: {phone.failed}"
    finally:
        phone.ctx.close()
