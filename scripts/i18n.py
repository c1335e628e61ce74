"""The Chinese edition (中文版): translated markdown beside each chapter, the code copied, freshness by hash.

    python scripts/i18n.py status [NN ...]   # `make zh-status`: stale, missing and unchecked cells per chapter
    python scripts/i18n.py update [NN ...]   # after changing the English: new entries, stale ones marked
    python scripts/i18n.py build [NN ...]    # `make zh`: notebooks/zh/NN_name.ipynb from the stored English

A translation is notebooks/i18n/zh/NN_name.md: one entry per markdown cell of notebooks/NN_name.ipynb,
in order. Each entry opens with a comment that holds the English cell it translates and the first 12 hex
digits of that text's SHA-1; the Chinese follows the comment:

    <!-- cell c004 sha 0123456789ab
    ## 1. A rotation in the plane
    -->
    ## 1. 平面上的旋转

An entry is *fresh* when its sha is the English cell's sha. When the English changes, the entry goes
*stale*: `status` prints the English diff, `update` writes the new English into the comment and puts
the old one in a STALE note above the Chinese; the translator fixes the Chinese and deletes the note.
`make test` (tests/test_i18n.py) fails while any cell is stale, missing or marked.

`build` copies the English notebook cell by cell: code cells and their stored outputs unchanged (the
two editions cannot compute different numbers), markdown cells replaced by their Chinese. A cell
without a fresh translation keeps its English, under a one-line note. Only the standard library is
used, so translators need no environment.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NB_DIR = ROOT / "notebooks"
LANG = "zh"
I18N_DIR = NB_DIR / "i18n" / LANG
OUT_DIR = NB_DIR / LANG
GLOSSARY = I18N_DIR / "glossary.tsv"
EDITION_NOTE = I18N_DIR / "edition_note.md"  # a cell of the Chinese index only: what stays English, and why

HEADER = re.compile(r"^<!-- cell (c\d{3}) sha ([0-9a-f]{12})\n(.*?)\n-->\n?", re.S | re.M)
STALE = re.compile(r"<!-- STALE:.*?-->\n?", re.S)
STALE_NOTE = ("<!-- STALE: the English in the comment above changed. Update the Chinese below to match it, then "
              "delete this note. The English this Chinese translated was:\n{old}\n-->\n")
UNTRANSLATED = "> *（本段译文待更新，以下为英文原文。）*\n\n"
PREAMBLE = ("<!-- posenc · {lang} · {name}: one entry per markdown cell of notebooks/{name}.ipynb. Each comment "
            "holds the English cell and its sha (do not edit them: scripts/i18n.py does); the translation follows "
            "it. CONTRIBUTING.md, \"The Chinese edition\". -->\n")


def sha(text: str) -> str:
    return hashlib.sha1(text.encode()).hexdigest()[:12]


@dataclass
class Entry:
    cell: str  # c + the cell's index in the English notebook when it was last updated (informative)
    sha: str
    english: str
    text: str  # the translation, possibly with a STALE note

    @property
    def marked(self) -> bool:
        return bool(STALE.search(self.text))


@dataclass
class Cell:
    index: int
    english: str
    entry: Entry | None = None
    state: str = "missing"  # fresh | stale | marked | missing
    problems: list[str] = field(default_factory=list)

    @property
    def key(self) -> str:
        return f"c{self.index:03d}"


# -- reading ---------------------------------------------------------------------------------------

def chapters(prefixes: list[str] | None = None) -> list[Path]:
    """The English notebooks (notebooks/NN_name.ipynb), those starting with a prefix if any are given."""
    found = sorted(NB_DIR.glob("[0-9][0-9]_*.ipynb"))
    return [p for p in found if not prefixes or any(p.stem.startswith(x) for x in prefixes)]


def read_notebook(path: Path) -> dict:
    return json.loads(path.read_text(encoding="utf-8"))


def source(cell: dict) -> str:
    s = cell["source"]
    return s if isinstance(s, str) else "".join(s)


def translation_path(notebook: Path) -> Path:
    return I18N_DIR / f"{notebook.stem}.md"


def parse(text: str) -> list[Entry]:
    heads = list(HEADER.finditer(text))
    entries = []
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        entries.append(Entry(m.group(1), m.group(2), m.group(3), text[m.end():end].strip("\n")))
    return entries


def load(notebook: Path) -> list[Entry]:
    path = translation_path(notebook)
    return parse(path.read_text(encoding="utf-8")) if path.exists() else []


def render(name: str, entries: list[Entry]) -> str:
    parts = [PREAMBLE.format(lang=LANG, name=name)]
    for e in entries:
        body = e.text.strip("\n")
        parts.append(f"<!-- cell {e.cell} sha {e.sha}\n{e.english}\n-->\n" + (body + "\n" if body else ""))
    return "\n".join(parts)


# -- matching English cells with entries ------------------------------------------------------------

def match(notebook: Path, entries: list[Entry] | None = None) -> tuple[list[Cell], list[Entry]]:
    """Each markdown cell of the English notebook with its entry (by sha, then by place), and the orphans."""
    nb = read_notebook(notebook)
    cells = [Cell(i, source(c)) for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown"]
    entries = load(notebook) if entries is None else entries
    a, b = [e.sha for e in entries], [sha(c.english) for c in cells]
    used: set[int] = set()
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes():
        if tag == "equal":
            for i, j in zip(range(i1, i2), range(j1, j2)):
                cells[j].entry, cells[j].state = entries[i], "fresh"
                used.add(i)
        elif tag == "replace":  # edited in place: pair them up in order
            for i, j in zip(range(i1, i2), range(j1, j2)):
                cells[j].entry, cells[j].state = entries[i], "stale"
                used.add(i)
    for c in cells:  # a cell that moved keeps its translation
        if c.entry is None:
            same = next((i for i, e in enumerate(entries) if i not in used and e.sha == sha(c.english)), None)
            if same is not None:
                c.entry, c.state = entries[same], "fresh"
                used.add(same)
    for c in cells:
        if c.entry is not None and c.state == "fresh":
            if c.entry.marked:
                c.state = "marked"
            elif not c.entry.text.strip():
                c.state = "missing"
    return cells, [e for i, e in enumerate(entries) if i not in used]


# -- what a translation must keep ---------------------------------------------------------------------

CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.S)
MATH = re.compile(r"\$\$.+?\$\$|\$[^$]+\$", re.S)  # inline math may span a line break
LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#{1,6}) ", re.M)
NUMBER = re.compile(r"(?<![\w.])\d+(?:[.,]\d+)*")


def kept(english: str) -> dict[str, list[str]]:
    """What the Chinese must carry over unchanged: code spans, math, link targets, numbers."""
    rest = MATH.sub(" ", CODE_SPAN.sub(" ", english))
    rest = LINK_TARGET.sub("] ", re.sub(r"<[^>]+>", " ", rest))
    return {"code": [m.group(0) for m in CODE_SPAN.finditer(english)],
            "math": [m.group(0) for m in MATH.finditer(CODE_SPAN.sub(" ", english))],
            "link": LINK_TARGET.findall(english),
            "number": NUMBER.findall(rest)}


def lint(english: str, chinese: str) -> list[str]:
    """Problems of a translation: anything `kept` lost, or headings that differ in number or level."""
    problems = []
    for kind, items in kept(english).items():
        if kind == "number":
            # one-digit numbers may become Chinese numerals (三个种子, 二维); longer ones are data
            have, items = NUMBER.findall(chinese), [x for x in items if len(x) > 1]
            lost = [x for x in dict.fromkeys(items) if have.count(x) < items.count(x)]
        else:  # a line break inside math or code is a space: a translation may rewrap it
            flat, items = re.sub(r"\s+", " ", chinese), [re.sub(r"\s+", " ", x) for x in items]
            lost = [x for x in dict.fromkeys(items) if flat.count(x) < items.count(x)]
        if lost:
            problems.append(f"{kind} lost: " + ", ".join(repr(x) for x in lost[:6]))
    if HEADING.findall(english) != HEADING.findall(chinese):
        problems.append(f"headings {HEADING.findall(english)} in English, {HEADING.findall(chinese)} here")
    return problems


def glossary() -> list[tuple[str, str, list[str]]]:
    rows = []
    for line in GLOSSARY.read_text(encoding="utf-8").splitlines():
        if line.startswith("#") or not line.strip():
            continue
        cols = line.split("\t") + ["", "", ""]
        rows.append((cols[0], cols[1], [v for v in cols[2].split(";") if v]))
    return rows


def glossary_problems(chinese: str, rows=None) -> list[str]:
    """Renderings the glossary rules out (outside code and math)."""
    prose = MATH.sub(" ", CODE_SPAN.sub(" ", chinese))
    return [f"glossary: {bad!r} for {en!r}: write {zh!r}"
            for en, zh, avoid in (rows if rows is not None else glossary()) for bad in avoid if bad in prose]


# -- status, update, build --------------------------------------------------------------------------

def report(notebook: Path) -> tuple[str, bool]:
    """One chapter's state as text, and whether it is complete and fresh."""
    cells, orphans = match(notebook)
    rows = glossary()
    lines, ok = [], True
    for c in cells:
        if c.state == "fresh":
            c.problems = lint(c.english, c.entry.text) + glossary_problems(c.entry.text, rows)
    count = {s: sum(c.state == s for c in cells) for s in ("fresh", "stale", "marked", "missing")}
    bad = [c for c in cells if c.state != "fresh" or c.problems]
    lines.append(f"{notebook.stem}: {count['fresh']}/{len(cells)} fresh, {count['stale']} stale, "
                 f"{count['marked']} marked STALE, {count['missing']} untranslated, "
                 f"{sum(bool(c.problems) for c in cells)} with problems, {len(orphans)} orphaned")
    for c in bad:
        ok = False
        first = c.english.strip().splitlines()[0][:70] if c.english.strip() else ""
        if c.state == "stale":
            diff = difflib.unified_diff(c.entry.english.splitlines(), c.english.splitlines(),
                                        "translated English", "current English", lineterm="", n=1)
            lines.append(f"  {c.key} STALE (translation of {c.entry.sha}, English now {sha(c.english)}):")
            lines += [f"    {d}" for d in diff]
        elif c.state == "marked":
            lines.append(f"  {c.key} marked STALE: update the Chinese and delete the note ({first})")
        elif c.state == "missing":
            lines.append(f"  {c.key} untranslated: {first}")
        for p in c.problems:
            lines.append(f"  {c.key} {p}")
    if orphans:
        lines.append(f"  orphaned entries (no English cell): {', '.join(e.cell for e in orphans)}")
    return "\n".join(lines), ok and not orphans


def update(notebook: Path) -> str:
    """Rewrite the translation in the English order: fresh entries kept, stale ones marked, new ones empty."""
    cells, orphans = match(notebook)
    out = []
    for c in cells:
        e = c.entry
        if e is None:
            out.append(Entry(c.key, sha(c.english), c.english, ""))
        elif c.state == "stale":
            note = STALE_NOTE.format(old=e.english) if e.text.strip() else ""
            out.append(Entry(c.key, sha(c.english), c.english, note + STALE.sub("", e.text)))
        else:
            out.append(Entry(c.key, e.sha, c.english, e.text))
    translation_path(notebook).parent.mkdir(parents=True, exist_ok=True)
    translation_path(notebook).write_text(render(notebook.stem, out), encoding="utf-8")
    return (f"{notebook.stem}: {len(out)} entries, {sum(c.state == 'stale' for c in cells)} marked STALE, "
            f"{sum(c.entry is None for c in cells)} new, {len(orphans)} orphaned entries dropped")


def jupyter_anchor(heading: str) -> str:
    """JupyterLab's id for a heading: its text, spaces as hyphens."""
    return re.sub(r"\s+", "-", heading.strip())


def headings(text: str) -> list[str]:
    return [line.lstrip("#").strip() for line in text.splitlines() if HEADING.match(line)]


def anchors(notebook: Path) -> dict[str, str]:
    """{English heading anchor: Chinese heading anchor} of one chapter (headings pair up in order)."""
    cells, _ = match(notebook)
    found = {}
    for c in cells:
        if c.state == "fresh":
            for en, zh in zip(headings(c.english), headings(c.entry.text)):
                found[jupyter_anchor(en)] = jupyter_anchor(zh)
    return found


def localise(text: str, anchor_maps: dict[str, dict[str, str]]) -> str:
    """Links in a Chinese cell: repository files one folder further up, chapter anchors in Chinese."""
    text = re.sub(r"(\]\(|src=\"|href=\")\.\./", r"\1../../", text)

    def chapter_link(m: re.Match) -> str:
        stem, anchor = m.group(1), m.group(2)
        return f"]({stem}.ipynb#{anchor_maps.get(stem, {}).get(anchor, anchor)})"
    return re.sub(r"\]\((\d\d_\w+)\.ipynb#([^)\s]+)\)", chapter_link, text)


def build(notebook: Path, anchor_maps: dict[str, dict[str, str]]) -> Path:
    """notebooks/zh/<name>.ipynb: the English notebook with its markdown in Chinese."""
    nb = read_notebook(notebook)
    cells, _ = match(notebook)
    by_index = {c.index: c for c in cells}
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "markdown":
            continue
        c = by_index[i]
        text = c.entry.text if c.state == "fresh" else UNTRANSLATED + c.english
        cell["source"] = localise(text, anchor_maps).splitlines(True)  # as nbformat stores it
    if notebook.stem.startswith("00") and EDITION_NOTE.exists():
        note = {"cell_type": "markdown", "id": "zh-edition-note", "metadata": {},
                "source": EDITION_NOTE.read_text(encoding="utf-8").strip().splitlines(True)}
        first = next(i for i, c in enumerate(nb["cells"]) if c["cell_type"] == "markdown")
        nb["cells"].insert(first + 1, note)
    nb["metadata"]["posenc"] = {"edition": LANG, "english": f"../{notebook.name}"}
    out = OUT_DIR / notebook.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(nb, sort_keys=True, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def main(argv: list[str]) -> int:
    if not argv or argv[0] not in {"status", "update", "build"}:
        print(__doc__)
        return 2
    command, prefixes = argv[0], argv[1:]
    selected = chapters(prefixes)
    if not selected:
        raise SystemExit(f"no notebook matches {prefixes} in {NB_DIR}: run `make notebooks` first")
    if command == "status":
        ok = True
        for nb in selected:
            text, fine = report(nb)
            print(text)
            ok &= fine
        print("all translations fresh" if ok else
              "\nTo update: `python scripts/i18n.py update NN`, then edit notebooks/i18n/zh/NN_*.md "
              "(CONTRIBUTING.md, \"The Chinese edition\").")
        return 0 if ok else 1
    if command == "update":
        for nb in selected:
            print(update(nb))
        return 0
    maps = {nb.stem: anchors(nb) for nb in chapters()}
    for nb in selected:
        print(f"wrote {build(nb, maps).relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
