"""The Chinese edition (scripts/i18n.py, notebooks/i18n/zh/, notebooks/zh/).

- Freshness: every markdown cell of every chapter has a translation of its current English (sha), none
  marked STALE, nothing lost (numbers, math, code, link targets, headings), glossary terms only.
- Identity: notebooks/zh/NN.ipynb is what `make zh` writes now, and its code cells (source, outputs,
  metadata) are the English ones byte for byte.
- The mechanism itself, on a copy: one changed English sentence makes the chapter stale and the report
  names the cell with the English diff; `update` marks it; a moved cell keeps its translation.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
from _scripts import load_script

i18n = load_script("i18n")
CHAPTERS = i18n.chapters()
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_every_markdown_cell_has_a_fresh_translation(nb):
    text, ok = i18n.report(nb)
    assert ok, "the Chinese edition is out of date (`make zh-status`; CONTRIBUTING.md, \"The Chinese edition\"):\n" + text


def code_cells(nb: dict) -> list[str]:
    return [json.dumps(c, sort_keys=True, ensure_ascii=False) for c in nb["cells"] if c["cell_type"] != "markdown"]


@pytest.mark.parametrize("nb", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_the_chinese_notebook_is_the_english_code_with_chinese_prose(nb, tmp_path, monkeypatch):
    stored = i18n.OUT_DIR / nb.name
    assert stored.is_file(), f"{stored.relative_to(i18n.ROOT)} is missing: run `make zh`"
    english, chinese = i18n.read_notebook(nb), i18n.read_notebook(stored)
    assert code_cells(chinese) == code_cells(english), "code cells or outputs differ from the English notebook"
    md_en = [c for c in english["cells"] if c["cell_type"] == "markdown"]
    md_zh = [c for c in chinese["cells"] if c["cell_type"] == "markdown" and c["id"] != "zh-edition-note"]
    assert len(md_zh) == len(md_en)
    for en, zh in zip(md_en, md_zh):
        assert i18n.UNTRANSLATED.strip() not in i18n.source(zh), f"cell {en['id']} shows the English"
        if re.search(r"[A-Za-z]{3}", i18n.MATH.sub("", i18n.source(en))):  # prose, not a formula alone
            assert CJK.search(i18n.source(zh)), f"cell {en['id']} has no Chinese"
    # ...and the stored file is what `make zh` writes from the current English and translation.
    monkeypatch.setattr(i18n, "OUT_DIR", tmp_path)
    maps = {p.stem: i18n.anchors(p) for p in CHAPTERS}
    assert i18n.build(nb, maps).read_text(encoding="utf-8") == stored.read_text(encoding="utf-8"), \
        f"{stored.name} is older than its sources: run `make zh`"


def test_the_chinese_index_says_what_stays_english_and_why():
    note = i18n.EDITION_NOTE.read_text(encoding="utf-8")
    for word in ("代码注释", "检查器", "逐字节", "英文"):
        assert word in note
    index = i18n.read_notebook(i18n.OUT_DIR / CHAPTERS[0].name)
    assert any(c["id"] == "zh-edition-note" for c in index["cells"])


def test_links_to_the_conventions_reach_the_chinese_heading():
    maps = {p.stem: i18n.anchors(p) for p in CHAPTERS}
    assert maps["00_index"].get("Conventions") == "约定"
    for path in sorted(i18n.OUT_DIR.glob("[0-9][0-9]_*.ipynb")):
        text = "".join(i18n.source(c) for c in i18n.read_notebook(path)["cells"] if c["cell_type"] == "markdown")
        assert "00_index.ipynb#Conventions" not in text, path.name
        for target in re.findall(r"\]\((\.\./[^)#\s]+)", text):  # repository files, from notebooks/zh/
            assert (i18n.OUT_DIR / target).resolve().exists(), f"{path.name}: {target}"


# -- the glossary -------------------------------------------------------------------------------------

def test_the_glossary_rules_out_no_term_it_prescribes():
    rows = i18n.glossary()
    assert len(rows) >= 50
    chosen = [zh for _, zh, _ in rows]
    for en, zh, avoid in rows:
        assert zh and en, (en, zh)
        for bad in avoid:
            clash = [c for c in chosen if bad in c]
            assert not clash, f"{en}: avoiding {bad!r} would forbid the prescribed {clash}"
    for term in ("位置编码", "旋转位置编码", "相对位置编码", "外推", "内插"):  # the sources' own words
        assert term in chosen


def test_a_rendering_the_glossary_rules_out_is_named():
    rows = [("interpolation", "内插", ["插值"])]
    assert i18n.glossary_problems("位置插值的效果", rows) == ["glossary: '插值' for 'interpolation': write '内插'"]
    assert i18n.glossary_problems("位置内插，`插值` 与 $插值$", rows) == []  # code and math are not prose


def test_each_term_has_one_rendering_across_the_course():
    rows = i18n.glossary()
    text = "".join(e.text for p in CHAPTERS for e in i18n.load(p))
    assert i18n.glossary_problems(text, rows) == []
    for term in ("位置编码", "旋转位置编码", "外推", "注意力分数", "远程衰减", "格雷码"):
        assert term in text


# -- what a translation must keep -------------------------------------------------------------------

def test_lint_names_what_a_translation_lost():
    english = "## 2. Decay\nThe bound at $n = 512$ is 0.247 (see [ch. 3](03_sinusoids.ipynb)), `apply_rope` in 3 lines."
    good = "## 2. 衰减\n在 $n = 512$ 处的上界是 0.247（见[第 3 章](03_sinusoids.ipynb)），`apply_rope` 只需三行。"
    assert i18n.lint(english, good) == []
    bad = "## 衰减\n### 小节\n上界约为 0.25（见第 3 章），apply_rope 只需三行，$n=512$。"
    problems = "\n".join(i18n.lint(english, bad))
    for lost in ("code lost: '`apply_rope`'", "math lost: '$n = 512$'", "link lost: '03_sinusoids.ipynb'",
                 "number lost: '0.247'", "headings"):
        assert lost in problems


# -- the mechanism, on a copy of one chapter ----------------------------------------------------------

@pytest.fixture
def copy(tmp_path, monkeypatch):
    """notebooks/05_rope.ipynb and its translation in a scratch tree, the module pointed at it."""
    nb_dir, i18n_dir = tmp_path / "notebooks", tmp_path / "notebooks" / "i18n" / "zh"
    i18n_dir.mkdir(parents=True)
    nb = next(p for p in CHAPTERS if p.stem.startswith("05"))
    shutil.copy(nb, nb_dir / nb.name)
    # Entries not translated yet stand in with their English (the tests need fresh entries, not Chinese).
    entries = [i18n.Entry(e.cell, e.sha, e.english, e.text or e.english) for e in i18n.load(nb)]
    (i18n_dir / f"{nb.stem}.md").write_text(i18n.render(nb.stem, entries), encoding="utf-8")
    shutil.copy(i18n.GLOSSARY, i18n_dir / "glossary.tsv")
    for name, value in (("NB_DIR", nb_dir), ("I18N_DIR", i18n_dir), ("OUT_DIR", nb_dir / "zh"),
                        ("GLOSSARY", i18n_dir / "glossary.tsv")):
        monkeypatch.setattr(i18n, name, value)
    return nb_dir / nb.name


def edit_english(path: Path, index: int, change) -> str:
    nb = json.loads(path.read_text())
    md = [c for c in nb["cells"] if c["cell_type"] == "markdown"]
    old = i18n.source(md[index])
    md[index]["source"] = change(old)
    path.write_text(json.dumps(nb))
    return old


def test_changing_one_english_sentence_makes_the_cell_stale_and_names_it(copy):
    assert i18n.report(copy)[1]
    cells, _ = i18n.match(copy)
    target = cells[3]
    old = edit_english(copy, 3, lambda s: s.replace(".", ", quietly.", 1))
    text, ok = i18n.report(copy)
    assert not ok
    assert f"{target.key} STALE" in text and "1 stale" in text.splitlines()[0]
    changed = next(line for line in old.splitlines() if "." in line)
    assert f"    -{changed}" in text and f"    +{changed.replace('.', ', quietly.', 1)}" in text  # the English diff
    assert sum("STALE (translation" in line for line in text.splitlines()) == 1  # only that cell
    i18n.update(copy)  # the translator's step: the new English in, the old Chinese kept under a note
    text, ok = i18n.report(copy)
    assert not ok and f"{target.key} marked STALE" in text
    entries = i18n.load(copy)
    entry = next(e for e in entries if e.sha == i18n.sha(target.english.replace(".", ", quietly.", 1)))
    assert "STALE" in entry.text and target.entry.text.strip() in entry.text
    entry.text = i18n.STALE.sub("", entry.text)  # the translator updates the Chinese and deletes the note
    i18n.translation_path(copy).write_text(i18n.render(copy.stem, entries), encoding="utf-8")
    assert i18n.report(copy)[1]


def test_a_moved_or_new_cell_is_matched_and_reported(copy):
    nb = json.loads(copy.read_text())
    md = [i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]
    moved = nb["cells"].pop(md[2])
    nb["cells"].insert(md[6], moved)  # a paragraph moved further down keeps its translation
    nb["cells"].insert(md[1], {"cell_type": "markdown", "id": "new", "metadata": {}, "source": "A new remark."})
    copy.write_text(json.dumps(nb))
    text, ok = i18n.report(copy)
    assert not ok
    assert "1 untranslated" in text and "0 stale" in text and "untranslated: A new remark." in text
    i18n.update(copy)
    assert sum(not e.text.strip() for e in i18n.load(copy)) == 1


def test_a_stale_cell_is_built_in_english_under_a_note(copy):
    edit_english(copy, 0, lambda s: s + "\nOne more sentence.")
    out = i18n.build(copy, {})
    first = next(c for c in json.loads(out.read_text())["cells"] if c["cell_type"] == "markdown")
    assert i18n.source(first).startswith(i18n.UNTRANSLATED) and "One more sentence." in i18n.source(first)
