"""The documentation site: it builds with ``mkdocs build --strict`` (a broken link or anchor, a page
missing from the navigation, an unresolved API reference fail), offline, and its pages say what is
true now, in pages a reader can finish."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What users read; the changelog is where history goes, and is exempt.
USER_PAGES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])
# History and bookkeeping that belong in CHANGELOG.md, not in a page that says how things are.
HISTORY = re.compile(
    r"\bissue #?\d+|\(issues? \d|(?<![\w(])#\d{1,3}\b|\bround \d+\b|\(before[:,]|\bbefore this\b|\bbefore/after table\b"
    r"|\bsince this version\b|\bwhat changed\b",
    re.I,
)
MAX_PAGE_CHARACTERS = 25_000
MAX_README_CHARACTERS = 10_000


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda path: str(Path(path).relative_to(ROOT)))
def test_a_user_page_says_what_is_true_now(page: Path) -> None:
    found = [f"{page.name}:{number}: {match.group(0)!r} in {line.strip()[:120]!r}"
             for number, line in enumerate(page.read_text().splitlines(), 1) for match in HISTORY.finditer(line)]
    assert not found, "history belongs in CHANGELOG.md:\n" + "\n".join(found)


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda path: str(Path(path).relative_to(ROOT)))
def test_a_user_page_can_be_read_in_one_sitting(page: Path) -> None:
    limit = MAX_README_CHARACTERS if page.name == "README.md" and page.parent == ROOT else MAX_PAGE_CHARACTERS
    assert len(page.read_text()) <= limit, f"{page.relative_to(ROOT)}: {len(page.read_text()):,} characters; split it"


def test_the_readme_shows_the_loops_and_the_dashboard() -> None:
    readme = (ROOT / "README.md").read_text()
    for picture in ("docs/img/loops.svg", "docs/img/dashboard.png"):
        assert f"]({picture})" in readme and (ROOT / picture).is_file(), picture


def test_the_site_fetches_nothing_when_built_or_read() -> None:
    config = (ROOT / "mkdocs.yml").read_text()
    assert re.search(r"^\s+font: false\b", config, re.M), "Material would fetch Google Fonts"
    plugins = re.findall(r"^  - (\w+)", config.split("\nplugins:", 1)[1].split("\n\n", 1)[0], re.M)
    assert set(plugins) <= {"search", "mkdocstrings"}, f"a plugin that may fetch: {plugins}"


def test_the_settings_reference_names_every_variable_the_code_reads() -> None:
    from docsite.reference import settings_page

    page = settings_page()
    read = {name for folder in ("calibration", "monitoring", "flows", "thermostat")
            for source in (ROOT / folder).rglob("*.py")
            for name in re.findall(r"THERMOSTAT_[A-Z][A-Z_]*[A-Z]", source.read_text())}
    documented = set(re.findall(r"`(THERMOSTAT_[A-Z_]+)`", page))
    # A name that only starts documented ones (`THERMOSTAT_MLFLOW_HTTP_*` in a comment) is a family, not a variable.
    missing = sorted(name for name in read - documented if not any(d.startswith(name + "_") for d in documented))
    assert not missing, f"read by the code, missing from the settings reference (docsite/reference.py): {missing}"


@pytest.mark.slow
def test_the_site_builds_strictly(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="the docs extra is missing: pip install -c constraints.txt -e '.[docs]'")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(tmp_path)})
    print(f"mkdocs build --strict: {time.perf_counter() - started:.1f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    site = tmp_path / "site"
    for page in ("index.html", "tutorial.html", "cli-reference.html", "settings.html", "events.html",
                 "python-api.html", "changelog.html"):
        assert (site / page).is_file(), page
    html = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in html and "fonts.gstatic.com" not in html
    assert "thermostat.calibration.drift" in (site / "events.html").read_text()
    assert "THERMOSTAT_MONITOR_WINDOW" in (site / "settings.html").read_text()
    assert "fit_temperature" in (site / "python-api.html").read_text()
