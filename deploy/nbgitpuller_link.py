"""Print the nbgitpuller links that put the course's chapters into each student's home.

    python deploy/nbgitpuller_link.py https://hub.example.edu https://github.com/you/posenc
    python deploy/nbgitpuller_link.py HUB_URL REPO_URL --branch spring-2027 --chapter 05_rope.ipynb

A link has the form

    {hub}/hub/user-redirect/git-pull?repo={repo}&branch={branch}&targetpath={target}
        &urlpath=lab/tree/{target}/notebooks/{chapter}

(query values URL-encoded). A student who clicks it logs in if needed; their server starts;
nbgitpuller clones the repository into ~/{target} on the first click and on later clicks
merges the lecturer's new commits while keeping the student's own edits; JupyterLab then
opens the chapter. Put the links in the course page or the LMS. The standard library only:
no install needed to run this file.
"""
from __future__ import annotations

import argparse
import re
from pathlib import Path
from urllib.parse import urlencode

CHAPTER_RE = re.compile(r"\d\d_[a-z0-9_]+\.ipynb")
NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _url(name: str, value: str, schemes: tuple[str, ...]) -> str:
    if not isinstance(value, str) or not value.startswith(schemes) or " " in value:
        raise ValueError(f"{name} must be a URL starting with {' or '.join(schemes)}, got {value!r}")
    return value.rstrip("/")


def pull_link(hub_url: str, repo_url: str, chapter: str, *, branch: str = "main", target: str = "posenc") -> str:
    """The link that pulls `repo_url` at `branch` into ~/`target` and opens notebooks/`chapter`."""
    hub = _url("hub_url", hub_url, ("https://", "http://"))
    repo = _url("repo_url", repo_url, ("https://", "http://", "file://"))
    if not isinstance(chapter, str) or not CHAPTER_RE.fullmatch(chapter):
        raise ValueError(f"chapter must be a notebook name like '01_why_positions.ipynb', got {chapter!r}")
    for name, value in (("branch", branch), ("target", target)):
        if not isinstance(value, str) or not re.fullmatch(r"[\w.-]+", value) or value.startswith("."):
            raise ValueError(f"{name} must be a plain name (letters, digits, '_', '-', '.'), got {value!r}")
    query = {"repo": repo, "branch": branch, "targetpath": target,
             "urlpath": f"lab/tree/{target}/notebooks/{chapter}"}
    return f"{hub}/hub/user-redirect/git-pull?{urlencode(query)}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("hub_url", help="the hub's address, e.g. https://hub.example.edu")
    parser.add_argument("repo_url", help="the course repository, e.g. https://github.com/you/posenc")
    parser.add_argument("--branch", default="main")
    parser.add_argument("--target", default="posenc", help="folder in each student's home")
    parser.add_argument("--chapter", action="append", help="one notebook (repeatable); default: every chapter")
    args = parser.parse_args(argv)
    chapters = args.chapter or sorted(p.name for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    try:
        links = [pull_link(args.hub_url, args.repo_url, ch, branch=args.branch, target=args.target) for ch in chapters]
    except ValueError as exc:
        parser.error(str(exc))
    print("\n".join(links))


if __name__ == "__main__":
    main()
