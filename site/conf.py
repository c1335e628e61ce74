"""Sphinx configuration of the course website; `make site` (scripts/build_site.py) copies this folder
next to the staged notebooks and writes posenc_site.json (repository, branch) beside it.

Everything the pages load is in the site itself: MathJax 2 from npm (package-lock.json), the book
theme's own files, and posenc-widgets.js. Nothing is executed: pages show the stored outputs.
"""
import json
from pathlib import Path

SITE = json.loads((Path(__file__).parent / "posenc_site.json").read_text())

project = SITE.get("title", "posenc: positional encodings, interactively")
language = SITE.get("language", "en")  # zh_CN: Chinese labels, and search split by jieba
if language.startswith("zh"):
    # Sphinx 9's Chinese search stems Latin words with the English stemmer but names it after its
    # language ("window.Stemmer = ChineseStemmer;", undefined: the search page stops). Name it right.
    from sphinx.search.zh import SearchChinese

    SearchChinese.language_name = "English"
author = "the posenc authors"
copyright = "the posenc authors (MIT licence)"
root_doc = "00_index"
extensions = ["myst_nb", "sphinx.ext.githubpages"]  # githubpages: .nojekyll, so Pages serves _static/
exclude_patterns = ["_build", "posenc_site.json"]

# MyST-NB: show the stored outputs, never execute; no ipywidgets manager from a CDN.
nb_execution_mode = "off"
nb_ipywidgets_js = {}
nb_merge_streams = True
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3  # `00_index.ipynb#conventions` resolves to the heading
myst_update_mathjax = False  # its MathJax 3/4 settings do not apply to MathJax 2

# MathJax 2.7 from node_modules, copied into _static/mathjax by the build (the slides use the same copy).
mathjax_path = SITE.get("mathjax_path", "mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe")
mathjax2_config = {
    "tex2jax": {"inlineMath": [["\\(", "\\)"]], "displayMath": [["\\[", "\\]"]], "processEscapes": True},
    "CommonHTML": {"linebreaks": {"automatic": True}},  # long formulas wrap on a phone
    "showMathMenu": False,
    "messageStyle": "none",
}

html_theme = "sphinx_book_theme"
html_title = "posenc"
html_static_path = ["_static"]
html_css_files = ["posenc-site.css"]
html_js_files = ["posenc-widgets.js"]
html_copy_source = False  # the notebooks are in the repository; no second copy on the site
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "repository_url": SITE["repository_url"],
    "repository_branch": SITE["branch"],
    "path_to_docs": SITE.get("path_to_docs", "notebooks"),
    "use_repository_button": True,
    "use_download_button": False,
    "show_toc_level": 2,
    "navigation_with_keys": False,
}
