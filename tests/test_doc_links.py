"""Every link in the README, the contributor pages and the site's pages lands: on a file, and
for ``file.md#anchor`` or ``#anchor`` on a heading of it (the site's generated reference pages
included: they are generated here as ``mkdocs build`` generates them)."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md",
                    ROOT / "benchmarks" / "README.md", *(ROOT / "docs").rglob("*.md")])
LINK = re.compile(r"\]\(([^)\s]*?)(?:#([^)\s]+))?\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading (and the site's: ``pymdownx.slugs.slugify`` in ``mkdocs.yml``):
    lowercase, punctuation dropped (not - or _), spaces to dashes.

    Examples
    --------
    >>> slug("6. Beyond one machine: the export and a Dask cluster")
    '6-beyond-one-machine-the-export-and-a-dask-cluster'
    >>> slug("`monitor`")
    'monitor'
    """
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


@cache
def _text(path: Path) -> str | None:
    """A document's Markdown: the file, or the site's generated page of that name ("" for a picture or
    any other file, which has no headings)."""
    if path.is_file():
        return path.read_text() if path.suffix == ".md" else ""
    if path.parent == ROOT / "docs":
        from docsite.hooks import PAGES

        if path.name in PAGES:
            return PAGES[path.name]()
    return None


def anchors(text: str) -> set[str]:
    return {slug(match) for match in re.findall(r"^#{1,6} +(.+?) *$", FENCE.sub("", text), re.M)}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_links_land_on_a_file_and_a_heading(document: Path) -> None:
    broken = []
    for target, anchor in LINK.findall(FENCE.sub("", document.read_text())):
        if "://" in target or target.startswith("mailto:") or (not target and not anchor):
            continue
        linked = (document.parent / target).resolve() if target else document
        text = _text(linked)
        if text is None and linked.is_dir():
            continue
        if text is None or (anchor and anchor not in anchors(text)):
            broken.append(f"{target or document.name}" + (f"#{anchor}" if anchor else ""))
    assert not broken, f"{document.relative_to(ROOT)} links to files or sections that do not exist: {broken}"
