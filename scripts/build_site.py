"""Build the course website into build/site/ from the committed notebooks (`make site`).

    python scripts/build_site.py
    python scripts/build_site.py --repo-url https://github.com/you/posenc --branch main
    python scripts/build_site.py --out DIR --max-frames 160 --max-steps 9 --budget-mb 60

Stack: Sphinx with MyST-NB and sphinx-book-theme (the Jupyter Book 1 stack, all from PyPI, in
the test lock's `site` extra). It builds offline, gives navigation, full-text search (Sphinx's own
index, no server), light and dark themes and a phone layout; MathJax 2 comes from node_modules
(`npm ci`, as for the slides), so no page loads anything from another host.

1. Widgets. A page cannot run Python, so every `viz.InteractiveFigure` is rendered ahead: each
   notebook's code runs in a kernel up to its last widget cell, and right after each widget cell
   scripts/site_widgets.py renders its frames with the widget's own `update` (sliders subsampled
   to --max-steps values, at most --max-frames frames per widget). The notebooks' stored outputs
   are what the pages show; this run only makes the frames.
2. Staging (build/site-src/): site/ (Sphinx's conf.py, CSS, the frame-swapping JS) and a copy of
   each notebook with: "Launch on Binder" / "Open in Colab" / conventions links under its title,
   widget outputs replaced by their static copies, alt text on figures (the last paragraph before
   them), exercise solutions folded, the Colab install lines dropped (a reader runs nothing).
3. `sphinx-build -W` into build/site/; index.html sends the reader to 00_index.html.
4. The Chinese edition (notebooks/zh/, `make zh`), when every page has one: the same staging in Chinese
   into build/site/zh/ (Sphinx in zh_CN, its search split by jieba), each page linking the same chapter
   in the other language; its widgets use the English frames and MathJax, one folder up.
5. A size report: the site, and what each widget costs (build/site-report.json); over
   --budget-mb the build fails.
"""
from __future__ import annotations

import argparse
import html
import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple
from urllib.parse import quote

import nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = ROOT / "scripts"
sys.path.insert(0, str(SCRIPTS))
import build_notebooks  # noqa: E402  (scripts/ is not a package)
import build_slides  # noqa: E402
import site_widgets  # noqa: E402

NB_DIR = ROOT / "notebooks"
SITE_DIR = ROOT / "site"
WIDGET_MIME = "application/vnd.jupyter.widget-view+json"
FRAMES = "_static/frames"  # where the widget frames go, relative to the site's root (pages sit there too)
# The editions: English at the site's root, Chinese in zh/ (built from notebooks/zh/, `make zh`). A Chinese
# page shares the English frames and MathJax (one folder up) and says the same things in Chinese.
EDITIONS = ("en", "zh")
TEXT = {
    "en": {"sphinx": "en", "binder": "Launch on Binder", "colab": "Open in Colab", "conventions": "Conventions",
           "conventions_anchor": "conventions", "other": "中文版", "other_lang": "zh", "figure": "Figure.",
           "root": "", "title": "posenc: positional encodings, interactively"},
    "zh": {"sphinx": "zh_CN", "binder": "在 Binder 上运行", "colab": "在 Colab 中打开", "conventions": "约定",
           "conventions_anchor": "约定", "other": "English", "other_lang": "en", "figure": "图。",
           "root": "../", "title": "posenc：交互式学习位置编码"},
}
WIDGET_NOTES = {
    "en": ("A static copy with every setting of the notebook's widget, precomputed with its code; the notebook "
           "(Binder or Colab, top of the page) runs it live.",
           "A static copy ({thinned}), precomputed with the notebook's code: the notebook (Binder or Colab, top of "
           "the page) has the full range.",
           "{description} {kept} of {total} values"),
    "zh": ("静态副本：notebook 中这个交互控件的每种设置都已用它自己的代码预先算好；notebook（页首的 Binder 或 Colab"
           "链接）可实时运行它。",
           "静态副本（{thinned}），用 notebook 的代码预先算好：notebook（页首的 Binder 或 Colab 链接）有完整的取值范围。",
           "{description} 取 {total} 个值中的 {kept} 个"),
}
MATHJAX = [(src, dst) for src, dst in build_slides.ASSETS if src.startswith("mathjax/")]


class Repo(NamedTuple):
    """A GitHub repository and branch: Binder and Colab both open notebooks from GitHub."""

    owner: str
    name: str
    branch: str

    @classmethod
    def parse(cls, url: str, branch: str) -> "Repo":
        m = re.fullmatch(r"https://github\.com/([\w.-]+)/([\w.-]+?)(?:\.git)?/?", url)
        if not m:
            raise ValueError(f"repo_url must be a GitHub repository, https://github.com/<owner>/<repo> "
                             f"(Binder and Colab open GitHub repositories), got {url!r}")
        if not branch or any(ch.isspace() for ch in branch):
            raise ValueError(f"branch must be a branch name such as 'main', got {branch!r}")
        return cls(m.group(1), m.group(2), branch)

    @property
    def url(self) -> str:
        return f"https://github.com/{self.owner}/{self.name}"

    @property
    def pages(self) -> str:
        """Where GitHub Pages publishes the site (.github/workflows/site.yml)."""
        if self.name.lower() == f"{self.owner}.github.io".lower():  # a user's own site
            return f"https://{self.name.lower()}/"
        return f"https://{self.owner.lower()}.github.io/{self.name}/"

    def binder(self, notebook: str) -> str:
        """mybinder.org builds binder/ and opens JupyterLab on the notebook."""
        return (f"https://mybinder.org/v2/gh/{self.owner}/{self.name}/{quote(self.branch, safe='')}"
                f"?urlpath={quote(f'lab/tree/notebooks/{notebook}', safe='')}")

    def colab(self, notebook: str) -> str:
        return (f"https://colab.research.google.com/github/{self.owner}/{self.name}/blob/"
                f"{quote(self.branch, safe='/')}/notebooks/{notebook}")


# -- 1. widget frames ------------------------------------------------------------------------------

def widget_cells(nb: nbformat.NotebookNode) -> list[int]:
    """Indices of the code cells whose stored output shows a widget."""
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code"
            and any(WIDGET_MIME in o.get("data", {}) for o in c.get("outputs", []))]


def frame_run(nb: nbformat.NotebookNode, frames_dir: Path, max_steps: int, max_frames: int) -> nbformat.NotebookNode:
    """The notebook's code cells up to its last widget cell, each widget cell followed by an export."""
    targets = widget_cells(nb)
    run = nbformat.v4.new_notebook(metadata={"kernelspec": build_notebooks.KERNELSPEC})
    code = nbformat.v4.new_code_cell
    run.cells.append(code(f"import sys\nsys.path.insert(0, {str(SCRIPTS)!r})\nimport site_widgets as _posenc_site\n"
                          "_posenc_site.start_recording()"))
    for i, cell in enumerate(nb.cells[: targets[-1] + 1] if targets else []):
        if cell.cell_type != "code":
            continue
        if i in targets:
            run.cells.append(code("_posenc_site_first = _posenc_site.made_count()"))
        run.cells.append(code(cell.source))
        if i in targets:
            run.cells.append(code(f"_posenc_site.export(_posenc_site_first, {str(frames_dir)!r}, {i}, "
                                  f"max_steps={max_steps}, max_frames={max_frames})"))
    return run


WIDGET_TIMEOUT = 900  # seconds a notebook's kernel may spend on one cell while its frames are rendered


def render_widgets(nb_path: Path, frames_dir: Path, max_steps: int, max_frames: int) -> dict[int, list[dict]]:
    """{widget cell index: its widgets' frame descriptions}, from a kernel running the notebook's code."""
    nb = nbformat.read(nb_path, as_version=4)
    if not widget_cells(nb):
        return {}
    run = frame_run(nb, frames_dir, max_steps, max_frames)
    build_notebooks.kernel_environment()
    client = NotebookClient(run, timeout=WIDGET_TIMEOUT, kernel_name="python3",
                            resources={"metadata": {"path": str(nb_path.parent)}})
    try:
        client.execute()
    except CellExecutionError as e:
        raise SystemExit(f"{nb_path.name}: a cell failed while rendering its widgets' frames:\n{e}") from None
    found: dict[int, list[dict]] = {}
    for cell in run.cells:
        if not cell.source.startswith("_posenc_site.export("):
            continue
        text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream" and o.name == "stdout")
        spec = json.loads(text.strip().splitlines()[-1])
        found[spec["cell"]] = spec["widgets"]
    return found


# -- 2. staging ------------------------------------------------------------------------------------

def plain_text(markdown: str) -> str:
    """Markdown as one line of plain text (for alt text): no math delimiters, links, code marks or tags."""
    text = re.sub(r"<[^>]+>", "", markdown)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"\$+|`|\*\*|(?<!\w)\*|\\(?=[a-zA-Z])", "", text)
    return re.sub(r"\s+", " ", text).strip()


def figure_alt(nb: nbformat.NotebookNode, index: int, limit: int = 240, lang: str = "en") -> str:
    """Alt text for the figures of cell `index`: the last paragraph of the markdown before it
    ("narrate, then compute": that paragraph says what the figure shows), cut at a sentence."""
    for cell in reversed(nb.cells[:index]):
        if cell.cell_type == "markdown":
            paragraphs = [p for p in re.split(r"\n\s*\n", cell.source) if p.strip() and not p.lstrip().startswith("#")]
            text = plain_text(paragraphs[-1] if paragraphs else cell.source.lstrip("# "))
            if len(text) > limit:
                cut = text[:limit]
                end = max(cut.rfind(". ") + 1, cut.rfind("。") + 1)
                text = cut[:end] if end else cut.rsplit(" ", 1)[0] + " …"
            return f"{TEXT[lang]['figure']} {text}"
    return TEXT[lang]["figure"]


def widget_note(spec: dict, lang: str = "en") -> str:
    every, some, control = WIDGET_NOTES[lang]
    thinned = [control.format(description=c["description"], kept=len(c["labels"]), total=c["total"])
               for c in spec["controls"] if len(c["labels"]) < c["total"]]
    return some.format(thinned="; ".join(thinned)) if thinned else every


def control_html(c: dict) -> str:
    a = html.escape
    data = (f'data-count="{len(c["labels"])}" data-name="{a(c["description"])}" '
            f'data-labels="{a(json.dumps(c["labels"]))}"')
    if c["kind"] == "range":
        return (f'<label><span>{a(c["description"])}</span><input type="range" min="0" '
                f'max="{len(c["labels"]) - 1}" step="1" value="{c["start"]}" {data}>'
                f'<output>{a(c["labels"][c["start"]])}</output></label>')
    if c["kind"] == "checkbox":
        checked = " checked" if c["start"] else ""
        return f'<label><input type="checkbox"{checked} {data}><span>{a(c["description"])}</span></label>'
    options = "".join(f'<option value="{i}"{" selected" if i == c["start"] else ""}>{a(lab)}</option>'
                      for i, lab in enumerate(c["labels"]))
    return f'<label><span>{a(c["description"])}</span><select {data}>{options}</select></label>'


def widget_html(spec: dict, alt: str, lang: str = "en") -> str:
    """The static widget: its controls, the frame for their start values, and the one-line note."""
    base = TEXT[lang]["root"] + FRAMES
    a = html.escape
    start = 0
    for c in spec["controls"]:
        start = start * len(c["labels"]) + c["start"]
    settings = ", ".join(f"{c['description']} = {c['labels'][c['start']]}" for c in spec["controls"])
    controls = "".join(control_html(c) for c in spec["controls"])
    return (f'<div class="posenc-widget" data-base="{base}/" data-frames="{a(json.dumps(spec["frames"]))}" '
            f'data-alt="{a(alt)}">\n<div class="posenc-widget-controls">{controls}</div>\n'
            f'<img class="posenc-widget-frame" src="{base}/{spec["frames"][start]}" width="{spec["width"]}" '
            f'alt="{a(alt)} Settings: {a(settings)}.">\n'
            f'<p class="posenc-widget-note">{a(widget_note(spec, lang))}</p>\n</div>')


LIVE_ONLY = {"en": '<p class="posenc-widget-note">A live widget: it needs a running kernel. Open the notebook '
                   '(Binder or Colab, top of the page) to use it.</p>',
             "zh": '<p class="posenc-widget-note">实时交互控件：需要运行中的内核。请打开 notebook（页首的 Binder 或 Colab '
                   '链接）来使用它。</p>'}


def launch_links(repo: Repo, notebook: str, is_index: bool, lang: str = "en", other: bool = False) -> str:
    """Where to run the page's notebook, the conventions, and (when the site has both) the other edition."""
    t = TEXT[lang]
    path = notebook if lang == "en" else f"{lang}/{notebook}"
    links = [f"[{t['binder']}]({repo.binder(path)})", f"[{t['colab']}]({repo.colab(path)})"]
    if not is_index:
        links.append(f"[{t['conventions']}](00_index.ipynb#{t['conventions_anchor']})")
    if other:  # the same chapter in the other language: a page outside this Sphinx project, so plain HTML
        there = f"{lang}/" if lang != "en" else ""
        href = ("../" if there else f"{t['other_lang']}/") + Path(notebook).with_suffix(".html").name
        links.append(f'<a class="posenc-lang" href="{href}" hreflang="{t["other_lang"]}">{t["other"]}</a>')
    return '<p class="posenc-launch">\n\n' + " · ".join(links) + "\n\n</p>"


def stage_notebook(nb_path: Path, widgets: dict[int, list[dict]], repo: Repo, colab_lines: str,
                   lang: str = "en", other: bool = False) -> nbformat.NotebookNode:
    nb = nbformat.read(nb_path, as_version=4)
    is_index = nb_path.stem.startswith("00")
    first_code = True
    for i, cell in enumerate(nb.cells):
        if cell.cell_type == "markdown":
            # Jupyter's heading anchors keep case (#Conventions); MyST's are lower case.
            cell.source = re.sub(r"\]\((\d\d_\w+\.ipynb)#([^)\s]+)\)",
                                 lambda m: f"]({m.group(1)}#{m.group(2).lower()})", cell.source)
            cell.source = cell.source.replace("](../images/", "](images/")
            if lang != "en":  # notebooks/zh/: the images, then other repository files, one folder further up
                cell.source = cell.source.replace("](../../images/", "](images/")
                cell.source = re.sub(r"\]\(\.\./([^)\s]+)\)",
                                     lambda m: f"]({repo.url}/blob/{repo.branch}/notebooks/{m.group(1)})", cell.source)
            continue
        if cell.cell_type != "code":
            continue
        if first_code:
            first_code = False
            cell.source = cell.source.removeprefix(colab_lines).lstrip("\n")
        if cell.metadata.get("jupyter", {}).get("source_hidden"):  # exercise solutions: folded, as in the lab
            cell.metadata.setdefault("tags", []).append("hide-input")
        if cell.metadata.get("jupyter", {}).get("outputs_hidden"):  # a graded check's feedback: folded too
            cell.metadata.setdefault("tags", []).append("hide-output")
        alt = figure_alt(nb, i, lang=lang)
        if any("image/png" in o.get("data", {}) for o in cell.outputs):
            cell.metadata["mystnb"] = {"image": {"alt": alt}}
        specs = list(widgets.get(i, []))
        for out in cell.outputs:
            if WIDGET_MIME in out.get("data", {}):
                body = widget_html(specs.pop(0), alt, lang) if specs else LIVE_ONLY[lang]
                out["data"] = {"text/html": body}
    # Under the title: where to run it.
    title = next(c for c in nb.cells if c.cell_type == "markdown")
    lines = title.source.split("\n")
    at = next((k + 1 for k, line in enumerate(lines) if line.startswith("# ")), 0)
    lines[at:at] = ["", launch_links(repo, nb_path.name, is_index, lang, other), ""]
    title.source = "\n".join(lines)
    return nb


def toctree(pages: list[str]) -> nbformat.NotebookNode:
    return nbformat.v4.new_markdown_cell("```{toctree}\n:hidden:\n:maxdepth: 2\n\n" + "\n".join(pages) + "\n```")


# -- 3. build --------------------------------------------------------------------------------------

def dir_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def missing_assets() -> list[str]:
    return [src for src, _ in MATHJAX if not (build_slides.NODE_MODULES / src).exists()]


def translated_widgets(widgets: dict[int, list[dict]], english: Path, translated: Path) -> dict[int, list[dict]]:
    """The English widgets' frames, at the indices of the same code cells in a translated notebook."""
    ids = [c.get("id") for c in nbformat.read(english, as_version=4).cells]
    where = {c.get("id"): i for i, c in enumerate(nbformat.read(translated, as_version=4).cells)}
    return {where[ids[i]]: specs for i, specs in widgets.items()}


def stage_site(stage: Path, repo: Repo, lang: str) -> None:
    """Sphinx's sources for one edition: site/, its settings, and (English only) MathJax, which the
    Chinese pages load from the English site one folder up."""
    shutil.copytree(SITE_DIR, stage)
    mathjax = "mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe"
    (stage / "posenc_site.json").write_text(json.dumps({
        "repository_url": repo.url, "branch": repo.branch, "language": TEXT[lang]["sphinx"],
        "title": TEXT[lang]["title"], "path_to_docs": "notebooks" if lang == "en" else f"notebooks/{lang}",
        "mathjax_path": mathjax if lang == "en" else f"../../_static/{mathjax}"}, ensure_ascii=False))
    if lang == "en":
        for src, dst in MATHJAX:
            s, d = build_slides.NODE_MODULES / src, stage / "_static" / dst
            d.parent.mkdir(parents=True, exist_ok=True)
            (shutil.copytree if s.is_dir() else shutil.copy2)(s, d)
    if (ROOT / "images").is_dir():
        shutil.copytree(ROOT / "images", stage / "images")


def sphinx(stage: Path, out: Path, root: str, lang: str) -> None:
    cmd = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", "-E",
           "-d", str(stage / "_doctrees"), str(stage), str(out)]
    if subprocess.run(cmd, cwd=stage).returncode:
        raise SystemExit(f"sphinx-build ({lang}) failed (its warnings count as errors): see the messages above")
    (out / "index.html").write_text(
        f'<!DOCTYPE html>\n<html lang="{lang}"><head><meta charset="utf-8"><title>posenc</title>\n'
        f'<meta http-equiv="refresh" content="0; url={root}.html"></head>\n'
        f'<body><p><a href="{root}.html">{TEXT[lang]["title"]}</a></p></body></html>\n')


def build(out: Path, repo: Repo, *, notebooks: list[Path] | None = None,
          max_steps: int = site_widgets.MAX_STEPS, max_frames: int = site_widgets.MAX_FRAMES,
          budget_mb: float = 60.0, log=print) -> dict:
    """Build the site into `out` (the Chinese edition into out/zh/ when every notebook has one in
    notebooks/zh/); returns the report (sizes, widget costs, time)."""
    t0 = time.perf_counter()
    missing = missing_assets()
    if missing:
        raise SystemExit(f"missing {', '.join(missing)} in {build_slides.NODE_MODULES}: run `npm ci` "
                         "(`make site` runs it) first")
    notebooks = notebooks if notebooks is not None else sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))
    if not notebooks or not notebooks[0].stem.startswith("00"):
        raise SystemExit(f"no 00_*.ipynb (the entry page) among {[p.name for p in notebooks]}: run `make notebooks`")
    translations = {lang: [nb.parent / lang / nb.name for nb in notebooks] for lang in EDITIONS[1:]}
    langs = ["en"] + [lang for lang, paths in translations.items() if all(p.is_file() for p in paths)]
    stages = {lang: out.parent / (f"{out.name}-src" + ("" if lang == "en" else f"-{lang}")) for lang in langs}
    for d in (*stages.values(), out):
        if d.exists():
            shutil.rmtree(d)
    for lang, stage in stages.items():
        stage_site(stage, repo, lang)
    frames_dir = stages["en"] / FRAMES
    colab_lines = build_notebooks.colab_install()
    report: dict = {"widgets": [], "pages": [], "editions": langs}
    both = len(langs) > 1
    for k, nb_path in enumerate(notebooks):
        t = time.perf_counter()
        widgets = render_widgets(nb_path, frames_dir, max_steps, max_frames)
        for lang in langs:
            path = nb_path if lang == "en" else translations[lang][k]
            found = widgets if lang == "en" else translated_widgets(widgets, nb_path, path)
            nb = stage_notebook(path, found, repo, colab_lines, lang, both)
            if k == 0:
                nb.cells.append(toctree([p.stem for p in notebooks[1:]]))
            nbformat.write(nb, stages[lang] / nb_path.name)
        for cell, specs in sorted(widgets.items()):
            for spec in specs:
                report["widgets"].append({"page": nb_path.stem, "cell": cell,
                                          "controls": {c["description"]: f"{len(c['labels'])}/{c['total']}"
                                                       for c in spec["controls"]},
                                          "frames": len(spec["frames"]), "distinct": spec["distinct"],
                                          "bytes": spec["bytes"]})
        report["pages"].append(nb_path.stem)
        log(f"{nb_path.name}: {sum(len(s) for s in widgets.values())} widgets, {time.perf_counter() - t:.1f} s")
    for lang, stage in stages.items():
        t = time.perf_counter()
        sphinx(stage, out if lang == "en" else out / lang, notebooks[0].stem, lang)
        log(f"sphinx-build ({lang}): {time.perf_counter() - t:.1f} s")
    report.update(total_bytes=dir_size(out), frames_bytes=dir_size(out / FRAMES) if (out / FRAMES).exists() else 0,
                  mathjax_bytes=dir_size(out / "_static" / "mathjax"),
                  edition_bytes={lang: dir_size(out / lang) for lang in langs[1:]},
                  seconds=round(time.perf_counter() - t0, 1),
                  max_steps=max_steps, max_frames=max_frames, budget_mb=budget_mb)
    (out.parent / f"{out.name}-report.json").write_text(json.dumps(report, indent=1) + "\n")
    log(summary(report))
    if report["total_bytes"] > budget_mb * 1e6:
        raise SystemExit(f"the site is {report['total_bytes'] / 1e6:.1f} MB, over its {budget_mb} MB budget: "
                         "lower --max-frames or --max-steps")
    return report


def summary(report: dict) -> str:
    rows = [f"| {w['page']} cell {w['cell']} | {', '.join(f'{k} {v}' for k, v in w['controls'].items())} | "
            f"{w['frames']} ({w['distinct']} distinct) | {w['bytes'] / 1e6:.2f} MB |" for w in report["widgets"]]
    return "\n".join(["| widget | values kept per control | frames | size |", "|---|---|---|---|", *rows,
                      f"site: {report['total_bytes'] / 1e6:.1f} MB (widget frames {report['frames_bytes'] / 1e6:.1f} MB, "
                      f"MathJax {report['mathjax_bytes'] / 1e6:.1f} MB"
                      + "".join(f", the {k} edition {v / 1e6:.1f} MB" for k, v in report.get("edition_bytes", {}).items())
                      + f"; budget {report['budget_mb']} MB), "
                      f"built in {report['seconds']:.0f} s"])


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=ROOT / "build" / "site")
    ap.add_argument("--repo-url", default="", help="GitHub repository of the Binder and Colab links "
                    "(default: pyproject.toml's [project.urls] Repository)")
    ap.add_argument("--branch", default="main", help="the branch Binder and Colab open (default: main)")
    ap.add_argument("--max-steps", type=int, default=site_widgets.MAX_STEPS)
    ap.add_argument("--max-frames", type=int, default=site_widgets.MAX_FRAMES)
    ap.add_argument("--budget-mb", type=float, default=60.0)
    args = ap.parse_args(argv)
    repo = Repo.parse(args.repo_url or build_notebooks.repository_url(), args.branch)
    build(args.out.resolve(), repo, max_steps=args.max_steps, max_frames=args.max_frames, budget_mb=args.budget_mb)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
