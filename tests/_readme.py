"""The README's promises, read from the README itself so the tests follow the text."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def section(title: str) -> str:
    """The body of the README's `## title` section (up to the next `## ` heading)."""
    text = (ROOT / "README.md").read_text()
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    assert m, f"README has no '## {title}' section"
    return m.group(1)


def two_commands() -> list[str]:
    """The commands of the first ```bash block under '## Two commands', comments stripped."""
    block = re.search(r"```bash\n(.*?)```", section("Two commands"), re.S)
    assert block, "the 'Two commands' section has no ```bash block"
    lines = (line.split("#", 1)[0].strip() for line in block.group(1).splitlines())
    return [line for line in lines if line]
