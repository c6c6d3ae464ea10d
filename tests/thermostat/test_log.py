"""The light client (thermostat.log): what a serving process imports to log and label, without the
flows, Prefect, MLflow or pandas; the same log the monitor reads; the recipe for a user's own
FastAPI service in docs/ingest.md, run as written."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration import top_label_confidence
from flows.settings import ThermostatSettings
from monitoring import PredictionLog
from thermostat import log as thermostat_log

ROOT = Path(__file__).resolve().parents[2]
RECIPE = re.compile(r"<!-- recipe: fastapi -->\n```python\n(.*?)```", re.S)


@pytest.mark.parametrize("environment", [{}, {"THERMOSTAT_STATE_DIR": "some/state"},
                                         {"THERMOSTAT_PREDICTION_LOG_URL": "postgresql+psycopg://u:p@db/log",
                                          "THERMOSTAT_STATE_DIR": "elsewhere"}])
def test_the_client_opens_the_log_the_flows_read(environment: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("THERMOSTAT_STATE_DIR", "THERMOSTAT_PREDICTION_LOG_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert thermostat_log.log_url() == ThermostatSettings().resolved_prediction_log_url()


def test_log_a_batch_and_its_labels(tmp_path: Path) -> None:
    plog = thermostat_log.open_log(f"sqlite:///{tmp_path / 'new' / 'log.db'}")  # its folder created
    logits = np.array([[2.0, 0.5, -1.0], [np.inf, 0.0, 0.0], [0.0, 3.0, 1.0]])
    report = thermostat_log.log_batch(plog, "tickets", "7", 1.37, logits, ["a", "b", "c"], groups="web")
    assert (report.written, [(r.index, r.request_id) for r in report.refused]) == (2, [(1, "b")])
    assert thermostat_log.log_batch(plog, "tickets", "7", 1.37, logits[[0]], ["a"]).unchanged == 1
    rows = thermostat_log.log_rows(plog, [{"request_id": "d", "logits": [0.0, 0.0, 5.0]}],
                                   defaults={"model_name": "tickets", "model_version": "7", "temperature": 1.37})
    assert rows.written == 1
    labels = thermostat_log.attach_labels(plog, ["a", "c", "zz", "d"], [0, 5, 1, 2])
    assert (labels.attached, labels.unknown_request_ids, labels.refused[0].index) == (2, ("zz",), 1)
    with pytest.raises(ValueError, match="nothing of the 1 rows was written"):
        thermostat_log.attach_labels(plog, ["c"], [5], atomic=True)
    chunk = next(plog.iter_labelled("tickets", "7", report_start(), report_end()))
    predicted, confidence = top_label_confidence(logits[[0]].astype(np.float32), temperature=1.37)
    assert chunk.confidence[0] == confidence[0] and chunk.predicted_class[0] == predicted[0]
    plog.dispose()


def report_start() -> Any:
    from datetime import UTC, datetime

    return datetime(2000, 1, 1, tzinfo=UTC)


def report_end() -> Any:
    from datetime import UTC, datetime, timedelta

    return datetime.now(UTC) + timedelta(hours=1)


def test_importing_the_client_loads_neither_the_flows_nor_pandas() -> None:
    """What a model server pays to import it: the figure is printed (and in benchmarks/README.md);
    the assertion is on the modules, which do not depend on the machine's load."""
    code = ("import sys, time; started = time.perf_counter(); import thermostat.log; "
            "print(time.perf_counter() - started); "
            "print(' '.join(m for m in ('flows', 'prefect', 'mlflow', 'pandas', 'scipy', 'matplotlib', 'pyarrow') "
            "if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    seconds, loaded = (done.stdout.splitlines() + [""])[:2]
    print(f"import thermostat.log: {float(seconds):.2f} s")
    assert loaded == ""


def test_the_fastapi_recipe_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from starlette.testclient import TestClient

    [recipe] = RECIPE.findall((ROOT / "docs" / "ingest.md").read_text())
    assert len([line for line in recipe.splitlines() if line.strip()]) <= 15
    monkeypatch.setenv("THERMOSTAT_PREDICTION_LOG_URL", f"sqlite:///{tmp_path / 'log.db'}")

    class Model:  # the user's model: raw logits of a text
        def logits(self, texts: list[str]) -> Any:
            return np.array([[len(text) / 10, 1.0, 0.0] for text in texts])

    namespace: dict[str, Any] = {"model": Model()}
    exec(compile(recipe, "docs/ingest.md (FastAPI recipe)", "exec"), namespace)  # noqa: S102 - our own doc
    with TestClient(namespace["app"], base_url="http://127.0.0.1") as client:
        answers = [client.post("/predict", json={"request_id": f"t-{i}", "text": "x" * (5 * i)}).json()
                   for i in range(4)]
    assert [answer["class"] for answer in answers] == [1, 1, 0, 0]  # logits [0.5 i, 1, 0]: a tie goes to 0
    stats = namespace["writer"].close()
    assert (stats.rows_written, stats.rows_dropped) == (4, 0)
    log = PredictionLog(f"sqlite:///{tmp_path / 'log.db'}")
    assert log.count_rows() == 4 and log.logged_versions() == {("tickets", "7"): 3}
    log.dispose()
