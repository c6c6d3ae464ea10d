"""Every link to a section (``file.md#anchor`` or ``#anchor``) in the README and docs/ lands on a heading."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCUMENTS = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").glob("*.md")])
LINK = re.compile(r"\]\(([^)\s]*?)#([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lowercase, punctuation dropped (not - or _), spaces to dashes.

    Examples
    --------
    >>> slug("6. Beyond one machine: the export and a Dask cluster")
    '6-beyond-one-machine-the-export-and-a-dask-cluster'
    >>> slug("`monitor`")
    'monitor'
    """
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(document: Path) -> set[str]:
    text = FENCE.sub("", document.read_text())
    return {slug(match) for match in re.findall(r"^#{1,6} +(.+?) *$", text, re.M)}


@pytest.mark.parametrize("document", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_section_links_land_on_a_heading(document: Path) -> None:
    broken = []
    for target, anchor in LINK.findall(FENCE.sub("", document.read_text())):
        if "://" in target:
            continue
        linked = (document.parent / target).resolve() if target else document
        if not linked.is_file() or anchor not in anchors(linked):
            broken.append(f"{target or document.name}#{anchor}")
    assert not broken, f"{document.relative_to(ROOT)} links to sections that do not exist: {broken}"
