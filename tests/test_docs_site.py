"""The documentation site: it builds with ``mkdocs build --strict`` (a broken link or anchor, a page
missing from the navigation, an unresolved API reference fail), offline, and its pages say what is
true now, in pages a reader can finish."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
# What users read; the changelog is where history goes, and is exempt.
USER_PAGES = sorted([ROOT / "README.md", ROOT / "benchmarks" / "README.md", *(ROOT / "docs").rglob("*.md")])
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


@pytest.mark.parametrize("page", ["cli-reference.md", "cli-analysis.md", "cli-drift.md", "cli-operations.md",
                                  "settings.md", "events.md"])
def test_a_generated_page_can_be_read_in_one_sitting(page: str) -> None:
    from docsite.hooks import PAGES

    assert len(PAGES[page]()) <= MAX_PAGE_CHARACTERS, page


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


CHROMIUM = "/usr/bin/chromium"
# The site's home page as Chromium shows it (git-ignored, like the dashboard's screenshots); with
# THERMOSTAT_DOCS_SCREENSHOT=1 also as docs/img/site-home.png (CONTRIBUTING.md shows it).
HOME_SCREENSHOT = ROOT / "tests" / "artifacts" / "site-home-1280x800.png"
DOCS_HOME_SCREENSHOT = ROOT / "docs" / "img" / "site-home.png"


@pytest.fixture(scope="module")
def built_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` into a fresh folder, with nothing of this user's (an empty HOME)."""
    pytest.importorskip("mkdocs", reason="the docs extra is missing: pip install -c constraints.txt -e '.[docs]'")
    root = tmp_path_factory.mktemp("docs")
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(root / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "NO_MKDOCS_2_WARNING": "1", "HOME": str(root)})
    print(f"mkdocs build --strict: {time.perf_counter() - started:.1f} s")
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-6000:]
    return root / "site"


@pytest.mark.slow
def test_the_site_builds_strictly(built_site: Path) -> None:
    site = built_site
    for page in ("index.html", "tutorial.html", "cli-reference.html", "cli-operations.html", "settings.html",
                 "events.html", "python-api.html", "changelog.html"):
        assert (site / page).is_file(), page
    html = (site / "index.html").read_text()
    assert "fonts.googleapis.com" not in html and "fonts.gstatic.com" not in html
    assert "thermostat.calibration.drift" in (site / "events.html").read_text()
    assert "THERMOSTAT_MONITOR_WINDOW" in (site / "settings.html").read_text()
    assert "fit_temperature" in (site / "python-api.html").read_text()


@contextlib.contextmanager
def _chromium_page(site: Path, outside: list[str], errors: list[str]) -> Iterator[Any]:
    """A headless Chromium page that may read ``site``'s files and nothing else (every other
    request recorded in ``outside`` and aborted), its console errors recorded in ``errors``."""
    from tests.integration.conftest import require_tool

    require_tool(Path(CHROMIUM).is_file(), f"chromium is not installed at {CHROMIUM}; `make test` installs it as "
                                           "root (.ci/browser-and-prometheus.sh); otherwise: sudo apt-get install chromium")
    try:
        from playwright.sync_api import Request, Route, sync_playwright
    except ImportError:
        require_tool(False, "the Python package playwright is missing: pip install -c constraints.txt '.[test]'")
        raise

    def only_the_site(route: Route, request: Request) -> None:
        if request.url.startswith(("data:", site.as_uri())):
            route.continue_()
        else:
            outside.append(request.url)
            route.abort()

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True,
                                             args=["--no-sandbox", "--disable-background-networking",
                                                   "--disable-component-update"])
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.route("**/*", only_the_site)
            page = context.new_page()
            page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
            page.on("pageerror", lambda error: errors.append(str(error)))
            yield page
        finally:
            browser.close()


@pytest.mark.slow
def test_the_site_reads_in_a_real_browser_from_the_file_system(built_site: Path) -> None:
    """Headless Chromium opens the built site from disk (as ``use_directory_urls: false`` promises):
    the home page shows the navigation, the two loops and the dashboard, follows a link to the
    tutorial, asks for nothing but files of the site, and logs no error."""
    outside: list[str] = []
    errors: list[str] = []
    HOME_SCREENSHOT.parent.mkdir(exist_ok=True)
    with _chromium_page(built_site, outside, errors) as page:
        page.goto((built_site / "index.html").as_uri(), wait_until="load")
        assert "Thermostat" in page.title()
        navigation = page.locator("nav.md-nav--primary").inner_text()
        for entry in ("Tutorial", "How-to guides", "Reference", "Explanation"):
            assert entry in navigation, entry
        assert "Where to go" in page.locator("article").inner_text()
        for picture in ("img/loops.svg", "img/dashboard.png"):  # both pictures load and are drawn
            width = page.locator(f'article img[src="{picture}"]').evaluate("image => image.naturalWidth")
            assert width > 0, picture
        page.screenshot(path=str(HOME_SCREENSHOT))
        if os.environ.get("THERMOSTAT_DOCS_SCREENSHOT") == "1":
            page.screenshot(path=str(DOCS_HOME_SCREENSHOT))
        page.locator("nav.md-nav--primary a", has_text="Tutorial").first.click()
        page.wait_for_load_state("load")
        assert page.url.endswith("tutorial.html"), page.url
    assert not outside, f"the site asked for something outside itself: {outside}"
    assert not errors, errors
