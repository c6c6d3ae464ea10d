"""Racing writers on the prediction log, as separate processes, on SQLite and a real PostgreSQL (issue 10).

Each test starts its writers once (``multiprocessing`` with ``spawn``: a fresh interpreter
and its own engine per process, as separate serving replicas or labelling jobs would have)
and runs many rounds; in each round the writers wait on a barrier and then hit the same rows
at once. Before the fix, 2 of 3 replicas' first batches of a new version were refused (a
UNIQUE error on ``prediction_log_versions``) and both labellers were told every label was
attached.
"""

from __future__ import annotations

import multiprocessing
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa

from monitoring import LabelConflict, PredictionLog, PredictionRecord

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
K = 3
REPLICAS, REPLICA_ROUNDS, BATCH = 3, 10, 20
LABELLERS, LABEL_ROUNDS, N_IDS = 2, 12, 200
CREATORS, CREATE_ROUNDS = 4, 12
SAME_LABEL_EVERY = 3  # every third round both labellers send the same label (an idempotent re-send race)

pytestmark = pytest.mark.timeout(180)


# --------------------------------------------------------------------------- worker processes


def _records(version: str, ids: list[str]) -> list[PredictionRecord]:
    return [
        PredictionRecord(
            T0 + timedelta(seconds=i), "digits", version, rid, np.linspace(-1.0, 1.0, K) + 0.01 * i, K - 1, 0.5, 1.5
        )
        for i, rid in enumerate(ids)
    ]


def _replica(url: str, barrier: Any, results: Any, worker: int) -> None:
    """A serving replica: logs the first batch of a brand-new version in every round."""
    log = PredictionLog(url)
    log.count_rows()  # open the pooled connection before the first round
    try:
        for r in range(REPLICA_ROUNDS):
            version = f"new-{r}"
            batch = _records(version, [f"{version}-w{worker}-{i}" for i in range(BATCH)])
            barrier.wait(timeout=60)
            try:
                log.append(batch)
                results.put((worker, r, "ok"))
            except Exception as exc:  # noqa: BLE001 - the parent reports every refusal
                results.put((worker, r, f"{type(exc).__name__}: {exc}"))
    finally:
        log.dispose()


def _creator(folder: str, barrier: Any, results: Any, worker: int) -> None:
    """A server starting on a brand-new SQLite log (a new file every round): creates its tables,
    racing the other servers."""
    for r in range(CREATE_ROUNDS):
        log = PredictionLog(f"sqlite:///{folder}/round-{r}.db")
        barrier.wait(timeout=60)
        try:
            log.create()
            results.put((worker, r, "ok"))
        except Exception as exc:  # noqa: BLE001 - the parent reports every refusal
            results.put((worker, r, f"{type(exc).__name__}: {exc}"))
        finally:
            log.dispose()


def _round_label(worker: int, r: int) -> int:
    return 1 if r % SAME_LABEL_EVERY == SAME_LABEL_EVERY - 1 else worker


def _labeller(url: str, barrier: Any, results: Any, worker: int) -> None:
    """A labelling job: attaches its label to the round's ids, racing the other labeller."""
    log = PredictionLog(url)
    log.count_rows()
    try:
        for r in range(LABEL_ROUNDS):
            ids = [f"lab-{r}-{i}" for i in range(N_IDS)]
            labels = np.full(N_IDS, _round_label(worker, r))
            barrier.wait(timeout=60)
            try:
                report = log.attach_labels(ids, labels)
                results.put((worker, r, (report.attached, report.unchanged, len(report.conflicts),
                                         len(report.unknown_request_ids))))  # fmt: skip
            except Exception as exc:  # noqa: BLE001
                results.put((worker, r, f"{type(exc).__name__}: {exc}"))
    finally:
        log.dispose()


def _race(
    target: Callable[[str, Any, Any, int], None], url: str, n_workers: int, n_rounds: int
) -> dict[tuple[int, int], Any]:
    """Run ``n_workers`` processes of ``target`` through ``n_rounds`` barrier-started rounds."""
    context = multiprocessing.get_context("spawn")
    barrier, results = context.Barrier(n_workers), context.Queue()
    processes = [context.Process(target=target, args=(url, barrier, results, w), daemon=True) for w in range(n_workers)]
    for process in processes:
        process.start()
    outcomes: dict[tuple[int, int], Any] = {}
    try:
        for _ in range(n_workers * n_rounds):
            worker, r, outcome = results.get(timeout=120)
            outcomes[(worker, r)] = outcome
    except queue.Empty:
        pytest.fail(f"the racing processes reported {len(outcomes)} of {n_workers * n_rounds} outcomes in time")
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return outcomes


# --------------------------------------------------------------------------- the races


def test_replicas_racing_on_a_new_versions_first_batch_are_all_logged(prediction_log: PredictionLog) -> None:
    url = prediction_log.engine.url.render_as_string(hide_password=False)
    outcomes = _race(_replica, url, REPLICAS, REPLICA_ROUNDS)
    refused = {key: outcome for key, outcome in outcomes.items() if outcome != "ok"}
    assert not refused, (
        f"{len(refused)} of {len(outcomes)} valid first batches were refused; e.g. {next(iter(refused.values()))}"
    )
    assert prediction_log.count_rows() == REPLICAS * REPLICA_ROUNDS * BATCH
    assert {prediction_log.n_classes("digits", f"new-{r}") for r in range(REPLICA_ROUNDS)} == {K}


def test_servers_starting_together_on_a_new_log_all_create_it(tmp_path: Any) -> None:
    """Two served models started on one new SQLite log: the second lost its first 200 rows to
    "table prediction_log_versions already exists" (the other server created the table between
    its check and its CREATE)."""
    outcomes = _race(_creator, str(tmp_path), CREATORS, CREATE_ROUNDS)
    refused = {key: outcome for key, outcome in outcomes.items() if outcome != "ok"}
    assert not refused, refused


def test_labellers_racing_on_the_same_ids_are_told_what_the_database_applied(prediction_log: PredictionLog) -> None:
    for r in range(LABEL_ROUNDS):
        prediction_log.append(_records("1", [f"lab-{r}-{i}" for i in range(N_IDS)]))
    url = prediction_log.engine.url.render_as_string(hide_password=False)
    outcomes = _race(_labeller, url, LABELLERS, LABEL_ROUNDS)
    errors = [outcome for outcome in outcomes.values() if isinstance(outcome, str)]
    assert not errors, errors[0]

    table = prediction_log.table
    misreported: list[str] = []
    for r in range(LABEL_ROUNDS):
        reports = {w: outcomes[(w, r)] for w in range(LABELLERS)}
        with prediction_log.engine.connect() as conn:
            stored = dict(
                conn.execute(
                    sa.select(table.c.label, sa.func.count())
                    .where(table.c.request_id.like(f"lab-{r}-%"))
                    .group_by(table.c.label)
                ).all()
            )
        assert sum(stored.values()) == N_IDS and None not in stored, f"round {r}: every id got a label ({stored})"
        attached = sum(reports[w][0] for w in range(LABELLERS))
        same_label = len({_round_label(w, r) for w in range(LABELLERS)}) == 1
        for w, (n_attached, n_unchanged, n_conflicts, n_unknown) in reports.items():
            expected_rest = (n_unchanged, n_conflicts) if same_label else (n_conflicts, n_unchanged)
            if n_unknown or expected_rest != (N_IDS - n_attached, 0):
                misreported.append(f"round {r} labeller {w}: {reports[w]}")
            if not same_label and stored.get(_round_label(w, r), 0) != n_attached:
                misreported.append(
                    f"round {r} labeller {w}: told attached={n_attached}, the database holds "
                    f"{stored.get(_round_label(w, r), 0)} of its label"
                )
        if attached != N_IDS:
            misreported.append(f"round {r}: attached counts add up to {attached}, not {N_IDS}")
    assert not misreported, f"{len(misreported)} misreports in {LABEL_ROUNDS} rounds: {misreported[:6]}"


# --------------------------------------------------------------------------- the loser's path, step by step


def _before(log: PredictionLog, prefix: str, action: Callable[[], None]) -> Callable[..., None]:
    """A hook that runs ``action`` (another writer, on its own engine) once, just before ``prefix``."""
    done = False

    def hook(conn: sa.Connection, cursor: object, statement: str, *args: object) -> None:
        nonlocal done
        if not done and statement.lstrip().upper().startswith(prefix):
            done = True
            action()

    sa.event.listen(log.engine, "before_cursor_execute", hook)
    return hook


def test_the_loser_of_a_new_version_race_checks_its_k_against_the_winners(prediction_log: PredictionLog) -> None:
    url = prediction_log.engine.url.render_as_string(hide_password=False)
    with PredictionLog(url) as other:
        hook = _before(prediction_log, "INSERT INTO PREDICTION_LOG_VERSIONS",
                       lambda: other.append(_records("7", ["winner-0"])))  # fmt: skip
        try:
            assert prediction_log.append(_records("7", ["loser-0", "loser-1"])) == 2, "same K: logged"
        finally:
            sa.event.remove(prediction_log.engine, "before_cursor_execute", hook)

        two_classes = [
            PredictionRecord(T0, "digits", "8", f"loser-k2-{i}", [0.5, -0.5], 0, 0.7, 1.0) for i in range(2)
        ]
        hook = _before(prediction_log, "INSERT INTO PREDICTION_LOG_VERSIONS",
                       lambda: other.append(_records("8", ["winner-k3"])))  # fmt: skip
        try:
            with pytest.raises(ValueError, match=r"row 0 \(request id 'loser-k2-0'\): logits have 2 classes but "
                                                 r"'digits' version '8' has 3 in the log; every row of a version "
                                                 r"must have the same K"):  # fmt: skip
                prediction_log.append(two_classes)
        finally:
            sa.event.remove(prediction_log.engine, "before_cursor_execute", hook)
    assert prediction_log.n_classes("digits", "8") == K
    assert prediction_log.count_rows() == 4, "the winners' rows and the same-K loser's; not the other K's"


def test_labels_written_between_the_read_and_the_update_are_reported_as_what_they_are(
    prediction_log: PredictionLog,
) -> None:
    prediction_log.append(_records("1", [f"r{i}" for i in range(4)]))
    url = prediction_log.engine.url.render_as_string(hide_password=False)
    with PredictionLog(url) as other:
        hook = _before(prediction_log, "UPDATE PREDICTION_LOG", lambda: other.attach_labels(["r0", "r1"], [2, 1]))
        try:
            report = prediction_log.attach_labels(["r0", "r1", "r2", "r3"], [2, 0, 0, 1])
        finally:
            sa.event.remove(prediction_log.engine, "before_cursor_execute", hook)
    assert (report.attached, report.unchanged) == (2, 1), "r2, r3 attached; r0 got the same label first"
    assert report.conflicts == (LabelConflict("r1", 1, 0),), "r1 got another label first: kept, reported"
    (chunk,) = prediction_log.iter_labelled("digits", "1", T0, T0 + timedelta(hours=1))
    assert chunk.labels.tolist() == [2, 1, 0, 1]


# --------------------------------------------------------------------------- new versions in different orders (issue 19)

CONCURRENT_BATCHES, NEW_VERSIONS = 20, 6


def test_batches_introducing_the_same_new_versions_in_different_orders_are_all_logged(
    prediction_log: PredictionLog,
) -> None:
    """Twenty writers (threads, one engine each, as replicas have) start at once, each with one batch
    holding rows of the same six new versions in its own order. In PostgreSQL two of them taking a
    version row each and then waiting for the other's deadlocked: before the fix 8-10 of 20 batches
    were refused (``DeadlockDetected``) and lost. Every batch must be logged."""
    url = prediction_log.engine.url.render_as_string(hide_password=False)
    versions = [f"fresh-{v}" for v in range(NEW_VERSIONS)]
    orders = [np.random.default_rng(seed).permutation(versions).tolist() for seed in range(CONCURRENT_BATCHES)]
    assert len({tuple(order) for order in orders}) > 1
    logs = [PredictionLog(url) for _ in range(CONCURRENT_BATCHES)]
    for log in logs:
        log.count_rows()  # each writer's connection open before the start
    barrier = threading.Barrier(CONCURRENT_BATCHES)
    outcomes: dict[int, str] = {}

    def write(writer: int) -> None:
        batch = [record for version in orders[writer]
                 for record in _records(version, [f"{version}-b{writer}-{i}" for i in range(3)])]  # fmt: skip
        barrier.wait(timeout=60)
        try:
            logs[writer].append(batch)
            outcomes[writer] = "ok"
        except Exception as exc:  # noqa: BLE001 - the assertion reports every refusal
            outcomes[writer] = f"{type(exc).__name__}: {' '.join(str(exc).split())[:300]}"

    threads = [threading.Thread(target=write, args=(w,)) for w in range(CONCURRENT_BATCHES)]
    try:
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
    finally:
        for log in logs:
            log.dispose()
    refused = {writer: outcome for writer, outcome in outcomes.items() if outcome != "ok"}
    assert len(outcomes) == CONCURRENT_BATCHES and not refused, (
        f"{len(refused)} of {CONCURRENT_BATCHES} batches refused; e.g. {next(iter(refused.values()), None)}"
    )
    assert prediction_log.count_rows() == CONCURRENT_BATCHES * NEW_VERSIONS * 3
    assert {prediction_log.n_classes("digits", version) for version in versions} == {K}


@pytest.mark.integration
def test_a_batch_the_database_aborts_to_break_a_deadlock_is_written_again(postgres_url: str) -> None:
    """A real deadlock in PostgreSQL: our batch holds its new version's row and waits for a request id
    that another transaction inserted, which then waits for our version's row. PostgreSQL aborts the
    first waiter — our batch (``DeadlockDetected``, refused and lost before the fix) — and the other
    transaction rolls back: the batch, run again, is written whole."""
    log = PredictionLog(postgres_url)
    log.metadata.drop_all(log.engine)
    log.create()
    other = sa.create_engine(postgres_url)
    batch = _records("deadlock", ["ours-0", "contested", "ours-1"])
    contested = {"served_at": T0, "model_name": "digits", "model_version": "other", "request_id": "contested",
                 "n_classes": K, "logits": np.zeros(K, dtype="<f4").tobytes(), "predicted_class": 0,
                 "confidence": 0.5, "temperature": 1.0}  # fmt: skip
    their_version = {"model_name": "digits", "model_version": "deadlock", "n_classes": K, "first_logged_at": T0}
    versions = log.metadata.tables["prediction_log_versions"]
    waits: list[threading.Thread] = []

    def hold_then_wait() -> None:
        """Just before our rows go in: take 'contested', then (once we wait for it) want our version's row."""
        conn = other.connect()
        conn.begin()
        conn.execute(log.table.insert(), contested)

        def want_our_version() -> None:
            time.sleep(0.3)  # we wait first, so PostgreSQL's deadlock check (after 1 s) fires in our session
            try:
                conn.execute(versions.insert(), their_version)
            finally:
                conn.rollback()
                conn.close()

        waits.append(threading.Thread(target=want_our_version))
        waits[0].start()

    hook = _before(log, "INSERT INTO PREDICTION_LOG (", hold_then_wait)
    try:
        assert log.append(batch) == 3
    finally:
        sa.event.remove(log.engine, "before_cursor_execute", hook)
        for thread in waits:
            thread.join(timeout=30)
        other.dispose()
    assert waits, "the other transaction never ran"
    with log.engine.connect() as conn:
        stored = set(conn.execute(sa.select(log.table.c.request_id)).scalars())
    log.metadata.drop_all(log.engine)
    log.dispose()
    assert stored == {"ours-0", "contested", "ours-1"}
