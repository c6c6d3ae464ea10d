"""A prediction log that hangs delays an in-process prediction by the serving log timeout at most.

``ServedModel.predict_and_log`` against a real database that does not answer: a PostgreSQL
reached through a loopback proxy that swallows every byte (:meth:`tests.tcp_proxy.TcpProxy.blackhole`),
a PostgreSQL whose processes are paused (``SIGSTOP``), and a SQLite file whose write lock another
connection holds. Every request is answered within a few ``log_timeout`` (asserted generously:
under 5x), its rows written when the database answers again or counted lost, and the counts add
up with what the log holds. Before the bound a request waited as long as the database: 60 s of
blackhole, 60 s of request.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import mlflow.pyfunc
import mlflow.sklearn
import numpy as np
import pandas as pd
import pytest
import sqlalchemy as sa
from mlflow.models import infer_signature
from sklearn.datasets import load_digits
from sklearn.linear_model import LogisticRegression

from flows.registry.adapter import save_calibrated_model
from flows.registry.serving import ServedModel
from monitoring import PredictionLog
from tests.monitoring.conftest import PostgresCluster
from tests.monitoring.conftest import postgres_cluster, postgres_server, postgres_url  # noqa: F401 - session fixtures
from tests.support.servers import wait_until
from tests.tcp_proxy import TcpProxy

TIMEOUT = 1.0  # the served model's log_timeout, in seconds
BOUND = 5 * TIMEOUT  # generous: a loaded machine must not fail it
NEVER = 12.0  # a hang is ended by the test after this long (the code before the bound waited for it)


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    x, y = load_digits(return_X_y=True)
    return x, y


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, digits: tuple[np.ndarray, np.ndarray]) -> Callable[[], ServedModel]:
    """A calibrated pyfunc saved as a registration saves it, loaded as ``ServedModel.load`` loads a
    version; each call gives a new ``ServedModel`` (its own writers) with ``log_timeout`` = TIMEOUT."""
    x, y = digits
    root = tmp_path_factory.mktemp("served")
    estimator = LogisticRegression(max_iter=300).fit(x[:400], y[:400])
    mlflow.sklearn.save_model(estimator, str(root / "checkpoint"), pyfunc_predict_fn="predict_log_proba",
                              signature=infer_signature(x[:5], estimator.predict_log_proba(x[:5])))
    save_calibrated_model(root / "calibrated", checkpoint_dir=root / "checkpoint", n_classes=10,
                          model_config={"temperature": 1.8, "gate_threshold": 0.9, "checkpoint_output": "logits"})
    model = mlflow.pyfunc.load_model(str(root / "calibrated"), model_config={
        "registered_model_name": "digits", "registered_model_version": "5", "log_predictions": False})

    def new() -> ServedModel:
        return ServedModel(model_name="digits", version="5", alias=None, model=model,
                           calibrated=model.unwrap_python_model(), log_timeout=TIMEOUT)

    return new


class Requests:
    """Requests of 4 rows each, timed; the ids of each."""

    def __init__(self, served: ServedModel, log: PredictionLog, x: np.ndarray) -> None:
        self.served, self.log, self.x = served, log, x
        self.ids: dict[str, list[str]] = {}
        self.seconds: dict[str, float] = {}

    def send(self, name: str) -> pd.DataFrame:
        ids = [f"{name}-{j}" for j in range(4)]
        started = time.monotonic()
        frame = self.served.predict_and_log(self.x[500:504], ids, self.log, groups="web")
        self.seconds[name] = time.monotonic() - started
        self.ids[name] = ids
        assert frame["request_id"].tolist() == ids and len(frame) == 4  # answered
        return frame

    def of(self, *names: str) -> set[str]:
        return {rid for name in names for rid in self.ids[name]}


def _stored(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return set(conn.execute(sa.text("SELECT request_id FROM prediction_log")).scalars())
    finally:
        engine.dispose()


@contextmanager
def _ended_after(seconds: float, end: Callable[[], None]) -> Iterator[None]:
    """``end`` runs when the block ends, or after ``seconds`` if the block is still waiting (a
    request that hangs on the database is then let go, and fails its bound instead of the test run)."""
    timer = threading.Timer(seconds, end)
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        end()


@pytest.fixture
def fresh_log(postgres_url: str) -> Iterator[str]:  # noqa: F811 - the session fixture
    with PredictionLog(postgres_url) as log:
        log.metadata.drop_all(log.engine)
        log.create()
    yield postgres_url
    with PredictionLog(postgres_url) as log:
        log.metadata.drop_all(log.engine)


@pytest.mark.integration
def test_a_blackholed_database_delays_a_prediction_by_the_timeout_at_most(
    served: Callable[[], ServedModel], digits: tuple[np.ndarray, np.ndarray], fresh_log: str,
) -> None:
    x, _ = digits
    direct = sa.engine.make_url(fresh_log)
    with TcpProxy(direct.host or "127.0.0.1", direct.port or 5432) as proxy:
        url = direct.set(host="127.0.0.1", port=proxy.port).render_as_string(hide_password=False)
        model = served()
        requests = Requests(model, PredictionLog(url), x)
        # No connection yet: opening one hangs, and the connect timeout ends the write.
        with _ended_after(NEVER, proxy.restore):
            proxy.blackhole()
            requests.send("first")
            assert requests.seconds["first"] < BOUND, requests.seconds
            wait_until(lambda: model.prediction_log_stats.pending_rows == 0,
                       "the write that cannot connect ends (connect timeout) while the network still swallows",
                       timeout=5 * BOUND, interval=0.1)
        requests.send("up")  # written through a new connection, which the pool keeps
        with _ended_after(NEVER, proxy.restore):
            proxy.blackhole()
            requests.send("stuck")  # its statement is sent on the pooled connection and hangs there
            requests.send("queued")  # behind it: withdrawn when its time is up
            assert max(requests.seconds.values()) < BOUND, requests.seconds
        model.close_prediction_log()  # the stuck statement went through once the network came back

    stats = model.prediction_log_stats
    assert (stats.rows_submitted, stats.rows_written, stats.rows_dropped, stats.pending_rows) == (16, 8, 8, 0)
    assert stats.last_error is not None and f"not written within {TIMEOUT:g} s" in stats.last_error
    assert _stored(fresh_log) == requests.of("up", "stuck")


def _cluster_processes(cluster: PostgresCluster) -> list[int]:
    """The postmaster of ``cluster`` and its children (every backend and worker process)."""
    leader = int((cluster.data / "postmaster.pid").read_text().split()[0])
    found = [leader]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if parent == leader:
            found.append(int(stat.parent.name))
    return found


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


@pytest.mark.integration
def test_a_paused_database_delays_a_prediction_by_the_timeout_at_most(
    served: Callable[[], ServedModel], digits: tuple[np.ndarray, np.ndarray], fresh_log: str,
    postgres_cluster: PostgresCluster,  # noqa: F811 - the session fixture
) -> None:
    x, _ = digits
    model = served()
    requests = Requests(model, PredictionLog(fresh_log), x)
    requests.send("up")
    processes = _cluster_processes(postgres_cluster)
    with _ended_after(NEVER, lambda: _signal_all(processes, signal.SIGCONT)):
        _signal_all(processes, signal.SIGSTOP)
        requests.send("stuck")
        requests.send("queued")
        assert max(requests.seconds.values()) < BOUND, requests.seconds
    model.close_prediction_log()

    stats = model.prediction_log_stats
    assert (stats.rows_submitted, stats.rows_written, stats.rows_dropped, stats.pending_rows) == (12, 8, 4, 0)
    assert _stored(fresh_log) == requests.of("up", "stuck")


def test_a_locked_sqlite_log_delays_a_prediction_by_the_timeout_at_most(
    served: Callable[[], ServedModel], digits: tuple[np.ndarray, np.ndarray], tmp_path: Path,
) -> None:
    """Another writer holds the SQLite file's lock: the busy timeout is the serving timeout (the
    default 30 s of a log opened without one held the request that long), and the rows are lost."""
    x, _ = digits
    url = f"sqlite:///{tmp_path / 'predictions.db'}"
    with PredictionLog(url) as log:
        log.create()
    model = served()
    requests = Requests(model, PredictionLog(url), x)
    requests.send("up")
    holder = sqlite3.connect(tmp_path / "predictions.db", isolation_level=None)
    try:
        holder.execute("BEGIN EXCLUSIVE")
        requests.send("locked")
        requests.send("locked-too")
        assert max(requests.seconds.values()) < BOUND, requests.seconds
        wait_until(lambda: model.prediction_log_stats.pending_rows == 0, "the locked writes end (busy timeout)",
                   timeout=5 * BOUND, interval=0.1)
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    model.close_prediction_log()

    stats = model.prediction_log_stats
    assert (stats.rows_submitted, stats.rows_written, stats.rows_dropped, stats.pending_rows) == (12, 4, 8, 0)
    assert stats.last_error is not None and ("database is locked" in stats.last_error
                                             or "not written within" in stats.last_error), stats.last_error
    assert _stored(url) == requests.of("up")


def test_the_serving_log_timeout_is_a_setting_the_served_model_and_the_log_read() -> None:
    from flows.settings import ThermostatSettings
    from monitoring import DEFAULT_SERVING_LOG_TIMEOUT_MS

    assert ThermostatSettings().serving_log_timeout_ms == DEFAULT_SERVING_LOG_TIMEOUT_MS
    assert ThermostatSettings(serving_log_timeout_ms=750).serving_log_timeout_ms == 750
    log = PredictionLog("postgresql+psycopg://u@db.internal/log", timeout=0.75)
    assert log.timeout == 0.75
    with pytest.raises(ValueError, match="timeout must be a finite number of seconds > 0"):
        PredictionLog("sqlite://", timeout=0)
    with pytest.raises(ValueError, match="log_timeout must be a finite number of seconds > 0"):
        ServedModel(model_name="digits", version="5", alias=None, model=None,  # type: ignore[arg-type]
                    calibrated=_Calibrated(), log_timeout=float("inf"))


class _Calibrated:
    temperature = 1.5
    gate_threshold = None

    def raw_logits(self, model_input: Any) -> Any:
        return model_input
