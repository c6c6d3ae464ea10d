"""Write the MLflow store of ``tests/data/previous_main_store/`` with the code of an earlier main.

The store is what Thermostat at commit 463a28a (the main before issue 21's records) leaves in
MLflow: its own ``thermostat demo`` (two checkpoints registered by post-finetune under
``@champion`` and ``@challenger``, in-distribution and noisy traffic, the monitor's checks, the
refits the drift events start), then three checks of the current window without a labelled row
(the insufficient-data streak on each serving version) and, when the demo's refits all
registered, one refused refit record written by that code's own writer. Today's readers are
tested on it (``tests/integration/test_previous_store.py``).

It runs the earlier code, not this checkout's: from a checkout of this repository,

    git worktree add --detach /tmp/prev 463a28a
    PYTHONPATH=/tmp/prev .venv/bin/python tests/data/previous_main_store/make_store.py

(a few minutes). What it keeps, in this folder:

* ``mlflow.sql`` — the SQLite store as SQL text (``sqlite3``'s dump), every occurrence of the
  state folder's path written ``@STATE_DIR@`` (the test puts its own);
* ``artifacts/`` — of the runs' artifacts, only the ``check/report.json`` of each version's
  latest check (the dashboard reads the latest check's under each alias) and the refits'
  ``refit/outcome.json``; the models, the checkpoints, the diagrams and the older reports are
  left out to keep the folder small.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import sys
import tempfile
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace

HERE = Path(__file__).resolve().parent
PLACEHOLDER = "@STATE_DIR@"
# Each check run's version and window end (the experiment's runs carry them as tags).
_CHECKS = """
SELECT t.run_uuid, t.value, e.value FROM tags t JOIN tags e ON e.run_uuid = t.run_uuid
JOIN tags k ON k.run_uuid = t.run_uuid
WHERE t.key = 'thermostat.model_version' AND e.key = 'thermostat.window_end'
AND k.key = 'thermostat.kind' AND k.value = 'check'
"""


def _the_earlier_code() -> None:
    import flows

    source = Path(flows.__file__).resolve().parents[1]
    if (source / "flows" / "records").is_dir() or not (source / "flows" / "run_records.py").is_file():
        sys.exit(f"flows is imported from {source}, which is not the earlier main (463a28a): put a checkout of it "
                 "first on PYTHONPATH (see this script's docstring)")


def _write(state: Path) -> None:
    from flows.demo import MODEL_NAME, main
    from flows.monitor import monitor
    from flows.refit import record_refusal
    from flows.registry import MlflowRegistry
    from flows.run_records import DriftCause
    from flows.settings import ThermostatSettings

    if main(["--state-dir", str(state)]) != 0:
        sys.exit(f"the earlier demo failed; see {state / 'demo.log'}")
    settings = ThermostatSettings(state_dir=state)
    # Three checks of the current window with no labelled row in it: insufficient_data three times
    # in a row on every serving version (the streak the monitor keeps on the version).
    for _ in range(3):
        monitor(model_name=MODEL_NAME, window_start=datetime.now(UTC) - timedelta(seconds=1), settings=settings)
    registry = MlflowRegistry.from_settings(settings)
    refits = [run for run in registry.runs(settings.monitoring_experiment_name)
              if run.data.tags.get("thermostat.kind") == "refit"]
    if not refits:
        champion = registry.aliases(MODEL_NAME)["champion"]
        now = datetime.now(UTC)
        outcome = SimpleNamespace(
            model_name=MODEL_NAME, parent_version=champion, alias="champion", status="failed", step="verify",
            reason="the refit does not verify: the reliability curve is arched; a single temperature cannot fix it",
            escalation="needs retraining or a data fix", new_version=None,
            cause=DriftCause(),
        )
        payload = {"window_start": (now - timedelta(hours=1)).isoformat(), "window_end": now.isoformat(),
                   "ece_before": 0.31, "ece_after": 0.22, "verify_n": 400, "temperature": 2.7}
        record_refusal.fn(registry, outcome, payload, settings)
    if not any(run.data.tags.get("thermostat.kind") == "check" for run in registry.runs(settings.monitoring_experiment_name)):
        sys.exit("the earlier demo wrote no check run")


def _pack(state: Path) -> None:
    connection = sqlite3.connect(state / "mlflow.db")
    try:
        dump = "\n".join(connection.iterdump())
        latest: dict[str, tuple[str, str]] = {}
        for run_id, version, window_end in connection.execute(_CHECKS):
            if version not in latest or window_end > latest[version][0]:
                latest[version] = (window_end, run_id)
    finally:
        connection.close()
    kept = {f"{run_id}/artifacts/check/report.json" for _, run_id in latest.values()}
    root = str(state.resolve())
    if PLACEHOLDER in dump:
        sys.exit(f"the store already holds {PLACEHOLDER}")
    (HERE / "mlflow.sql").write_text(dump.replace(root, PLACEHOLDER) + "\n")
    shutil.rmtree(HERE / "artifacts", ignore_errors=True)
    for path in sorted((state / "artifacts").rglob("*")):
        relative = path.relative_to(state / "artifacts")
        if path.is_file() and (relative.as_posix().endswith("refit/outcome.json")
                               or any(relative.as_posix().endswith(name) for name in kept)):
            target = HERE / "artifacts" / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(path.read_text().replace(root, PLACEHOLDER))


def main() -> None:
    _the_earlier_code()
    with tempfile.TemporaryDirectory(prefix=f"thermostat-previous-{uuid.uuid4().hex[:6]}-") as workdir:
        # A Prefect of its own (the embedded server), nothing leaving the machine, no settings of the caller's.
        for key in [key for key in os.environ if key.startswith(("THERMOSTAT_", "MLFLOW_", "PREFECT_"))]:
            del os.environ[key]
        os.environ.update({"PREFECT_HOME": str(Path(workdir) / "prefect-home"), "MLFLOW_DISABLE_TELEMETRY": "true",
                           "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "DO_NOT_TRACK": "true",
                           "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS": "300"})
        state = Path(workdir) / "state"
        _write(state)
        _pack(state)
    print(f"wrote {HERE / 'mlflow.sql'} and {HERE / 'artifacts'}")


if __name__ == "__main__":
    main()
