"""``thermostat dashboard`` on a state made by the demo, seen through a real browser and a real Prometheus.

* Debian's ``chromium``, driven headless by Playwright (no browser download): the page loads
  with no console error and no request leaving loopback (every other request is recorded and
  aborted by a route filter), the ECE-over-time charts show one series per version of
  ``digits`` with every drift check marked, the alert list shows the challenger's refused
  refit; screenshots at 1280×800 are saved under ``tests/artifacts/`` (git-ignored), and with
  ``THERMOSTAT_DOCS_SCREENSHOT=1`` also as ``docs/img/dashboard.png``, the picture the README and
  the site show (``THERMOSTAT_DOCS_SCREENSHOT=1 .venv/bin/python -m pytest -n 0
  tests/integration/test_dashboard.py -k real_browser`` makes it again).
* Debian's ``prometheus``, started on loopback with a generated config, scrapes ``/metrics``
  every second; the ECE of ``digits@champion`` queried back through its HTTP API equals the
  latest check of the champion's version in the MLflow store.

The expected values are read from MLflow with its own client, not through the dashboard's code.
Both tools are installed by ``make test`` (``.ci/browser-and-prometheus.sh``); without them the
tests skip (fail under ``CI=true``).
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import textwrap
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from mlflow.entities import Run

from tests.integration.conftest import DemoState, dashboard_server, require_tool
from tests.support.ports import free_port
from tests.support.servers import running, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ARTIFACTS = Path(__file__).resolve().parents[1] / "artifacts"
# The README's and the site's screenshot of the dashboard, written when THERMOSTAT_DOCS_SCREENSHOT=1.
DOCS_SCREENSHOT = Path(__file__).resolve().parents[2] / "docs" / "img" / "dashboard.png"
DOCS_SCREENSHOT_HEIGHT = 1220
CHROMIUM = "/usr/bin/chromium"
INSTALL = "`make test` installs it as root (.ci/browser-and-prometheus.sh); otherwise: sudo apt-get install {}"


def _get(url: str, timeout: float = 10.0) -> bytes:
    with urllib.request.urlopen(url, timeout=timeout) as answer:
        return bytes(answer.read())


@pytest.fixture(scope="module")
def dashboard(demo_state: DemoState, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``thermostat dashboard`` on the demo's state, on a free loopback port; yields its base URL."""
    log = tmp_path_factory.mktemp("dashboard") / "server.log"
    with dashboard_server(demo_state.env, log, "--refresh", "2") as url:
        wait_until(lambda: _get(f"{url}/healthz") == b"ok", "the dashboard answering /healthz", log=log)
        yield url


# --------------------------------------------------------------- what MLflow says, read directly


def _client(demo_state: DemoState) -> MlflowClient:
    return MlflowClient(tracking_uri=demo_state.settings.resolved_tracking_uri())


def _checks(demo_state: DemoState) -> list[Run]:
    client = _client(demo_state)
    experiment = client.get_experiment_by_name(demo_state.settings.monitoring_experiment_name)
    assert experiment is not None
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    return [run for run in runs if "thermostat.verdict" in run.data.tags
            and run.data.tags["thermostat.model_name"] == "digits"]


def _aliases(demo_state: DemoState) -> dict[str, str]:
    return {alias: str(version) for alias, version in _client(demo_state).get_registered_model("digits").aliases.items()}


# ------------------------------------------------------------------------------- the browser


def test_the_page_in_a_real_browser(dashboard: str, demo_state: DemoState) -> None:
    require_tool(Path(CHROMIUM).is_file(), f"chromium is not installed at {CHROMIUM}; " + INSTALL.format("chromium"))
    try:
        from playwright.sync_api import Request, Route, sync_playwright
    except ImportError:
        require_tool(False, "the Python package playwright is missing: pip install -c constraints.txt '.[test]'")
        raise

    checks = _checks(demo_state)
    drift_checks = [run for run in checks if run.data.tags["thermostat.verdict"] == "drift"]
    assert drift_checks, "the demo's story has drift checks"
    aliases = _aliases(demo_state)

    left_loopback: list[str] = []
    console: list[str] = []
    page_errors: list[str] = []

    def only_loopback(route: Route, request: Request) -> None:
        host = urllib.parse.urlsplit(request.url).hostname
        if request.url.startswith("data:") or host == "127.0.0.1":
            route.continue_()
        else:
            left_loopback.append(request.url)
            route.abort()

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True,
            args=["--no-sandbox", "--disable-background-networking", "--disable-component-update"],
        )
        try:
            context = browser.new_context(viewport={"width": 1280, "height": 800})
            context.route("**/*", only_loopback)
            page = context.new_page()
            page.on("console", lambda message: console.append(f"{message.type}: {message.text}")
                    if message.type in ("error", "warning") else None)
            page.on("pageerror", lambda error: page_errors.append(str(error)))
            started = time.perf_counter()
            answer = page.goto(f"{dashboard}/", wait_until="networkidle", timeout=120_000)
            load_seconds = time.perf_counter() - started
            assert answer is not None and answer.status == 200
            page.screenshot(path=str(ARTIFACTS / "dashboard-1280x800.png"))
            page.screenshot(path=str(ARTIFACTS / "dashboard-full.png"), full_page=True)
            if os.environ.get("THERMOSTAT_DOCS_SCREENSHOT") == "1":  # the alerts, the versions, the first charts
                page.screenshot(path=str(DOCS_SCREENSHOT), full_page=True,
                                clip={"x": 0, "y": 0, "width": 1280, "height": DOCS_SCREENSHOT_HEIGHT})

            # One ECE series per version of digits, per alias as the checks were tagged.
            charts = page.locator('svg.ece-chart[data-model="digits"]')
            assert charts.count() >= 2
            shown: dict[str, set[str]] = {}
            for index in range(charts.count()):
                chart = charts.nth(index)
                alias = chart.get_attribute("data-alias") or ""
                versions = [s.get_attribute("data-version") for s in chart.locator("g.series").all()]
                assert len(versions) == len(set(versions)), f"one series per version @{alias}: {versions}"
                shown[alias] = {v for v in versions if v}
            expected: dict[str, set[str]] = {}
            for run in checks:
                for alias in run.data.tags["thermostat.aliases"].split(","):
                    expected.setdefault(alias, set()).add(run.data.tags["thermostat.model_version"])
            assert shown == expected
            assert set().union(*shown.values()) == {run.data.tags["thermostat.model_version"] for run in checks}

            # Every drift check is a drift point (a triangle: marked by shape, not colour only).
            drift_points = page.locator('svg.ece-chart[data-model="digits"] .drift-point')
            expected_points = sum(len(run.data.tags["thermostat.aliases"].split(",")) for run in drift_checks)
            assert drift_points.count() == expected_points
            assert {p.get_attribute("data-run-id") for p in drift_points.all()} == {r.info.run_id for r in drift_checks}
            quiet = 'svg.ece-chart[data-model="digits"] :is(.calibrated-point, .undetermined-point)'
            ok_points = page.locator(quiet).count()
            assert ok_points == sum(len(r.data.tags["thermostat.aliases"].split(",")) for r in checks
                                    if r.data.tags["thermostat.verdict"] in ("calibrated", "undetermined"))

            # The alert list: the challenger's refused refit, with its escalation.
            refused = page.locator(f'#alerts tr.alert[data-kind="refit_refused"][data-alias="challenger"]'
                                   f'[data-version="{aliases["challenger"]}"]')
            assert refused.count() == 1
            assert "needs retraining or a data fix" in refused.inner_text()
            assert "MLflow run" in refused.inner_text()

            # The diagrams at registration are real images served by the dashboard.
            images = page.locator("img.registration-diagram")
            assert images.count() >= 2
            assert all(image.evaluate("i => i.complete && i.naturalWidth > 0") for image in images.all())
            # Usable at 1280 px: nothing wider than the window.
            assert page.evaluate("document.documentElement.scrollWidth") <= 1280
        finally:
            browser.close()

    print(f"\nscreenshots: {ARTIFACTS / 'dashboard-1280x800.png'} and {ARTIFACTS / 'dashboard-full.png'} "
          f"(page loaded in {load_seconds:.1f} s)")
    assert left_loopback == [], f"requests left loopback: {left_loopback}"
    assert console == [] and page_errors == [], f"console: {console}; page errors: {page_errors}"


def test_the_json_api_says_what_the_page_shows(dashboard: str, demo_state: DemoState) -> None:
    models = json.loads(_get(f"{dashboard}/api/models"))
    alerts = json.loads(_get(f"{dashboard}/api/alerts"))["alerts"]
    (digits,) = [m for m in models["models"] if m["name"] == "digits"]
    assert digits["aliases"] == _aliases(demo_state)
    assert {c["run_id"] for c in digits["checks"]} == {r.info.run_id for r in _checks(demo_state)}
    challenger = _aliases(demo_state)["challenger"]
    kinds = {(a["kind"], a["version"], a["alias"]) for a in alerts}
    assert ("refit_refused", challenger, "challenger") in kinds
    assert ("drift", challenger, "challenger") in kinds  # phase C: the challenger still drifts
    assert all(a["version"] != _aliases(demo_state)["champion"] for a in alerts)  # the refitted champion is ok
    refused = next(a for a in alerts if a["kind"] == "refit_refused")
    assert refused["prefect_flow_run_id"] and refused["run_id"]
    # Only the diagrams the page shows are served.
    with pytest.raises(urllib.error.HTTPError) as refused_read:
        _get(f"{dashboard}/artifacts/{refused['run_id']}/refit/outcome.json")
    assert refused_read.value.code == 404


# ----------------------------------------------------------------------------- Prometheus


def test_prometheus_scrapes_the_metrics(dashboard: str, demo_state: DemoState, tmp_path: Path) -> None:
    binary = shutil.which("prometheus")
    require_tool(binary is not None, "prometheus is not installed; " + INSTALL.format("prometheus"))
    assert binary is not None
    target = urllib.parse.urlsplit(dashboard).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        "scrape_configs:\n  - job_name: thermostat\n    metrics_path: /metrics\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    port, log = free_port(), tmp_path / "prometheus.log"
    api = f"http://127.0.0.1:{port}"

    def query(expression: str) -> list[dict[str, Any]]:
        answer = json.loads(_get(f"{api}/api/v1/query?" + urllib.parse.urlencode({"query": expression})))
        assert answer["status"] == "success", answer
        return list(answer["data"]["result"])

    command = [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
               f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=1h"]
    with running(command, log=log, what="Prometheus", ready=lambda: _get(f"{api}/-/ready").startswith(b"Prometheus"),
                 cwd=tmp_path, grace=30) as server:
        found = wait_until(lambda: query('thermostat_ece{model="digits",alias="champion"}'),
                           "thermostat_ece of digits@champion in Prometheus", process=server, log=log)
        up = query('up{job="thermostat"}')
        alerts = query('sum(thermostat_open_alerts{model="digits"})')
        verdict = query('thermostat_verdict{model="digits",alias="champion"} == 1')
        # Every query of the Grafana dashboard runs, on series the exposition has.
        grafana = {expression: query(expression) for expression in _grafana_queries()}

    champion = _aliases(demo_state)["champion"]
    latest = max((run for run in _checks(demo_state) if run.data.tags["thermostat.model_version"] == champion),
                 key=lambda run: run.data.tags["thermostat.window_end"])
    (sample,) = found
    assert sample["metric"]["version"] == champion
    assert float(sample["value"][1]) == pytest.approx(latest.data.metrics["ece"], rel=1e-12)
    assert [float(s["value"][1]) for s in up] == [1.0]
    assert float(alerts[0]["value"][1]) == len(json.loads(_get(f"{dashboard}/api/alerts"))["alerts"])
    assert [s["metric"]["verdict"] for s in verdict] == [latest.data.tags["thermostat.verdict"]]
    empty = [expression for expression, result in grafana.items() if not result and "changes(" not in expression]
    assert empty == [], f"Grafana queries with no series on the demo's state: {empty}"


DOCS = Path(__file__).resolve().parents[2] / "docs"


def _grafana_queries() -> list[str]:
    """Every PromQL query of docs/grafana-dashboard.json (panels, variables, annotations), its
    variables set as Grafana would for "all" ($model = digits)."""
    dashboard = json.loads((DOCS / "grafana-dashboard.json").read_text())
    found = [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]
    found += [a["expr"] for a in dashboard["annotations"]["list"] if "expr" in a]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":  # label_values(METRIC{...}, label): the series it lists
            found.append(variable["query"]["query"].removeprefix("label_values(").rsplit(",", 1)[0])
    return [expression.replace("$model", "digits").replace("$alias", ".*") for expression in found]


def _documented_yaml(name: str) -> str:
    """The YAML block of docs/prometheus-grafana.md whose first line is ``# NAME``."""
    text = (DOCS / "prometheus-grafana.md").read_text()
    for block in text.split("```yaml\n")[1:]:
        body = block.split("```", 1)[0]
        if body.lstrip().startswith(f"# {name}"):
            return textwrap.dedent(body)
    raise AssertionError(f"docs/prometheus-grafana.md has no yaml block starting with '# {name}'")


def test_the_documented_prometheus_config_and_rules_pass_promtool(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    require_tool(promtool is not None, "promtool (Debian's prometheus package) is not installed; "
                 + INSTALL.format("prometheus"))
    assert promtool is not None
    (tmp_path / "prometheus.yml").write_text(_documented_yaml("prometheus.yml"))
    (tmp_path / "thermostat-rules.yml").write_text(_documented_yaml("thermostat-rules.yml"))
    for command in (["check", "config", "prometheus.yml"], ["check", "rules", "thermostat-rules.yml"]):
        done = subprocess.run([promtool, *command], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                              check=False)
        assert done.returncode == 0, done.stdout + done.stderr


def test_the_exposition_passes_promtool(dashboard: str) -> None:
    promtool = shutil.which("promtool")
    require_tool(promtool is not None, "promtool (Debian's prometheus package) is not installed; "
                 + INSTALL.format("prometheus"))
    assert promtool is not None
    text = _get(f"{dashboard}/metrics")
    done = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, timeout=60, check=False)
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    samples = [line for line in text.decode().splitlines() if line.startswith("thermostat_ece{")]
    assert samples and all(math.isfinite(float(line.rsplit(" ", 1)[1])) for line in samples)
    # The Grafana dashboard reads only metrics the exposition has.
    exposed = set(re.findall(r"^# TYPE (thermostat_[a-z_]+) gauge$", text.decode(), flags=re.M))
    used = {name for expression in _grafana_queries() for name in re.findall(r"thermostat_[a-z_]+", expression)}
    assert used and used <= exposed, used - exposed
