"""One store protocol: the SQL log, its Parquet export and a window in memory answer the same
requests with the same rows, and refuse, naming what to use, what their scope does not hold."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from monitoring import (
    DEFAULT_POLICY,
    CheckReference,
    CheckState,
    DriftReference,
    PredictionLog,
    PredictionLogExport,
    PredictionStore,
    WindowInMemory,
    WindowQuery,
    check_version,
    drift_payload,
    export_prediction_log,
    log_predictions,
    scan_window,
)

START = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def stores(tmp_path: Path) -> tuple[PredictionLog, PredictionLogExport, np.ndarray, np.ndarray]:
    """300 labelled rows of "m" v1 served a minute apart in the SQL log, and its export."""
    rng = np.random.default_rng(0)
    logits = (2.0 * rng.normal(size=(300, 3))).astype(np.float32)
    labels = rng.integers(0, 3, size=300)
    log = PredictionLog(f"sqlite:///{tmp_path / 'log.db'}")
    log.create()
    log_predictions(log, "m", "1", 1.0, logits, [f"r{i}" for i in range(300)],
                    time=[START + timedelta(minutes=i) for i in range(300)], labels=labels)
    export_prediction_log(log, "m", "1", tmp_path / "export", until=START + timedelta(days=1))
    return log, PredictionLogExport(tmp_path / "export"), logits, labels


def test_the_log_its_export_and_a_window_in_memory_are_stores_of_the_same_rows(
        stores: tuple[PredictionLog, PredictionLogExport, np.ndarray, np.ndarray]) -> None:
    log, export, logits, labels = stores
    memory = WindowInMemory(logits, labels, temperature=1.0, model_name="m")  # every row served at one moment
    end = START + timedelta(days=1)
    for store, (start, stop) in ((log, (START, end)), (export, (START, end)),
                                 (memory, (memory.query().start, memory.query().end))):
        assert isinstance(store, PredictionStore)
        assert store.logged_versions() == {("m", "1"): 3} and store.n_classes("m", "1") == 3
        read = list(store.iter_labelled("m", "1", start, stop, chunk_size=128))
        assert [len(chunk) for chunk in read] == [128, 128, 44]
        np.testing.assert_array_equal(np.concatenate([chunk.logits for chunk in read]), logits)
        np.testing.assert_array_equal(np.concatenate([chunk.labels for chunk in read]), labels)
        assert sum(len(chunk) for chunk in store.iter_served("m", "1", start, stop)) == 300
        assert store.served_rows("m", "1", start, stop)[0] == 300 and store.served_rows("m", "2", start, stop) == (0, None)
    last = START + timedelta(minutes=299)
    assert log.served_rows("m", "1", START, end) == export.served_rows("m", "1", START, end) == (300, last)
    assert log.served_rows("m", "1", START, START + timedelta(minutes=10)) == (10, START + timedelta(minutes=9))
    assert export.served_rows("m", "1", START, START + timedelta(minutes=10)) == (10, START + timedelta(minutes=9))
    assert (log.scope.label_times, export.scope.label_times, memory.scope.label_times) == (True, False, False)
    assert (log.scope.served_rows, export.scope.served_rows, memory.scope.served_rows) == (True, False, True)


def test_a_store_refuses_what_its_scope_does_not_hold(
        stores: tuple[PredictionLog, PredictionLogExport, np.ndarray, np.ndarray]) -> None:
    _, export, logits, labels = stores
    memory = WindowInMemory(logits, labels, temperature=1.0)
    end = START + timedelta(days=1)
    for store in (export, memory):
        with pytest.raises(ValueError, match="keeps no labelling times: .* from the SQL prediction log"):
            next(iter(store.iter_labelled("m", "1", START, end, labelled_from=START)))
        with pytest.raises(NotImplementedError, match="is read-only: attach labels in the SQL prediction log"):
            store.attach_labels(["r0"], [1])
        with pytest.raises(NotImplementedError, match="is read-only: prune rows in the SQL prediction log"):
            store.delete_served_before("m", "1", end)
    query = WindowQuery("m", "1", temperature=1.0, start=START, end=end)
    with pytest.raises(ValueError, match="holds labelled rows only: scan the served rows of a store that holds every"):
        scan_window(export, query)


def test_one_check_decides_the_same_from_the_log_and_from_its_export(
        stores: tuple[PredictionLog, PredictionLogExport, np.ndarray, np.ndarray]) -> None:
    log, export, _, _ = stores
    query = WindowQuery("m", "1", temperature=1.0, start=START, end=START + timedelta(days=1))
    reference = CheckReference(DriftReference.of(0.02))
    now = query.end + timedelta(hours=1)
    from_log = check_version(log, query, reference, CheckState(), DEFAULT_POLICY, now, stream=log)
    from_export = check_version(export, query, reference, CheckState(), DEFAULT_POLICY, now, stream=log)
    alone = check_version(export, query, reference, CheckState(), DEFAULT_POLICY, now)
    assert from_log.report is not None and from_export.report is not None and alone.report is not None
    assert from_log.scan is not None and from_log.scan.served_rows == 300 and alone.scan is None
    payloads = [{k: v for k, v in drift_payload(outcome.report).items() if k != "checked_at"}  # type: ignore[arg-type]
                for outcome in (from_log, from_export, alone)]
    assert payloads[0]["n"] == 300 and payloads[0]["ece"] == payloads[1]["ece"] == payloads[2]["ece"]
    assert payloads[0]["verdict"] == payloads[1]["verdict"] == payloads[2]["verdict"]
