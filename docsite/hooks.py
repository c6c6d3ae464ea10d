"""The MkDocs hook (``mkdocs.yml``: ``hooks: [docsite/hooks.py]``): adds the generated reference pages."""

from __future__ import annotations

import sys
from pathlib import Path
from collections.abc import Callable
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from functools import partial  # noqa: E402

from docsite.reference import CLI_PAGES, cli_commands_page, cli_page, events_page, settings_page  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]


def changelog_page() -> str:
    """The repository's CHANGELOG.md, as the site's history page."""
    return (ROOT / "CHANGELOG.md").read_text()


PAGES: dict[str, Callable[[], str]] = {
    "cli-reference.md": cli_page, **{page: partial(cli_commands_page, page) for page in CLI_PAGES},
    "settings.md": settings_page, "events.md": events_page, "changelog.md": changelog_page,
}


def on_files(files: Any, config: Any) -> Any:
    """Add each generated page to the site's files (nothing is written into docs/)."""
    from mkdocs.structure.files import File

    for path, page in PAGES.items():
        files.append(File.generated(config, path, content=page()))
    return files
