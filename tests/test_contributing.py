"""CONTRIBUTING.md's checklists name files that exist: a moved or renamed file fails here, not
in a contributor's hands."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A path in backticks: folders and a file name with an extension (`flows/cli/main.py`, `.ci/postgres.sh`).
NAMED = re.compile(r"`(\.?[\w.-]+(?:/[\w.-]+)*\.(?:py|md|yaml|yml|toml|txt|sh|json))`")


def named_files(text: str) -> list[str]:
    """The paths a page names in backticks.

    >>> named_files("edit `flows/cli/main.py` and `prefect.yaml`, not `thermostat --help`")
    ['flows/cli/main.py', 'prefect.yaml']
    """
    return NAMED.findall(text)


def test_every_named_file_exists() -> None:
    text = (ROOT / "CONTRIBUTING.md").read_text()
    checklists = text.split("## Checklists", 1)[1]
    named = named_files(text)
    assert len(set(named_files(checklists))) >= 25, "the checklists should name the files each change touches"
    missing = sorted({path for path in named if not (ROOT / path).exists()})
    assert not missing, f"CONTRIBUTING.md names files that do not exist: {missing}"


def test_every_checklist_is_there() -> None:
    headings = re.findall(r"^### (.+)$", (ROOT / "CONTRIBUTING.md").read_text(), re.M)
    for kind in ("a drift test", "an event", "a CLI command", "a prediction-log store", "a setting"):
        assert any(kind in heading for heading in headings), f"no checklist for adding {kind}: {headings}"
