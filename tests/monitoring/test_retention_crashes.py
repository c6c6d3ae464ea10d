"""Retention under crashes and concurrency, on SQLite and PostgreSQL: prunes and exports killed
(SIGKILL) at random moments while a labeller attaches labels and late rows keep arriving.

The invariant, checked after every round and at the end: **every labelled row served before the
cutoff is in the log or in the archive (never lost), the archive holds it at most once, and only
labelled rows; nothing served at or after the cutoff is deleted or changed.** After a last prune
with no labeller running, every labelled row served before the cutoff is in the archive exactly
once and none is left in the log.

Each round logs new rows over three days before the cutoff and one after it (some labelled at
once), forks the round's workers — a prune, sometimes a second prune or an export of the same
version — as real child processes, starts the labeller (a thread: labels for rows old and new,
half of them with an old labelling time, every report checked to account for each id asked),
and kills the children with SIGKILL after a random delay. The workers are forked from the test
process, whose modules are loaded, rather than started as scripts (which would spend ~2 s of
CPU each importing them): each is still a process of its own, killed as a crash kills one.
``HYPOTHESIS_PROFILE=ci`` runs more rounds; ``THERMOSTAT_RETENTION_ROUNDS`` sets them.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
from collections import Counter
from datetime import UTC, datetime, timedelta
from multiprocessing.process import BaseProcess
from pathlib import Path

import numpy as np
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError

from monitoring import (
    PredictionLog,
    PredictionLogExport,
    export_prediction_log,
    log_predictions,
    prune_prediction_log,
)

CUTOFF = datetime(2026, 5, 11, tzinfo=UTC)
OLD_DAYS = 3
_DEFAULT_ROUNDS = "12" if os.environ.get("HYPOTHESIS_PROFILE") == "ci" else "4"
ROUNDS = int(os.environ.get("THERMOSTAT_RETENTION_ROUNDS", _DEFAULT_ROUNDS))
K = 3


def _work(url: str, archive: str, what: str) -> None:
    """A worker's body, in the forked child: its own engine (never the parent's connections)."""
    log = PredictionLog(url)
    if what == "prune":
        prune_prediction_log(log, CUTOFF, archive=archive, batch_size=10)  # many short delete batches
    else:
        export_prediction_log(log, "m", "1", archive, until=CUTOFF + timedelta(days=2), chunk_size=40, row_group_size=64)


class _Truth:
    """What the test knows was logged and labelled: request id -> serving time, and -> label."""

    def __init__(self) -> None:
        self.served: dict[str, datetime] = {}
        self.labels: dict[str, int] = {}
        self.lock = threading.Lock()

    def unlabelled(self) -> list[str]:
        with self.lock:
            return [rid for rid in self.served if rid not in self.labels]


def _log_round(log: PredictionLog, truth: _Truth, round_: int, rng: np.random.Generator) -> None:
    """New rows: 240 over the three days before the cutoff (late rows, for the days already pruned),
    40 on the day after it; a third labelled as they are logged."""
    n_old, n_new = 240, 40
    seconds = np.concatenate([rng.integers(-OLD_DAYS * 86_400, 0, n_old), rng.integers(0, 86_400, n_new)])
    seconds[:10] = seconds[0]  # a batch served at one instant: ties in serving time
    times = [CUTOFF + timedelta(seconds=int(s)) for s in seconds]
    ids = [f"r{round_}-{i}" for i in range(n_old + n_new)]
    log_predictions(log, "m", "1", 1.0, rng.normal(size=(len(ids), K)).astype(np.float32), ids, None, times)
    truth.served.update(zip(ids, times, strict=True))
    now = [rid for rid in ids if rng.random() < 1 / 3]
    labels = rng.integers(0, K, len(now))
    log.attach_labels(now, labels)
    truth.labels.update(zip(now, labels.tolist(), strict=True))


def _labeller(url: str, truth: _Truth, stop: threading.Event, seed: int, failures: list[BaseException]) -> None:
    """Attach labels to rows not labelled yet, 25 a call, until told to stop; record what the log
    says it attached, after checking that the report accounts for every id asked."""
    log = PredictionLog(url)
    rng = random.Random(seed)
    try:
        while not stop.wait(0.01):  # about 2,000 labels a second
            waiting = truth.unlabelled()
            asked = rng.sample(waiting, min(25, len(waiting)))
            labels = [rng.randrange(K) for _ in asked]
            old_time = CUTOFF - timedelta(days=5) if rng.random() < 0.5 else None  # a labeller with its own clock
            try:
                report = log.attach_labels(asked, labels, labelled_at=old_time)
            except DBAPIError:  # a lock cycle broken by PostgreSQL: the call was rolled back whole
                continue
            unknown = set(report.unknown_request_ids)
            assert not report.conflicts and report.unchanged == 0
            assert report.attached + len(unknown) == len(asked), report  # every id asked accounted for
            with truth.lock:
                truth.labels.update((rid, label) for rid, label in zip(asked, labels, strict=True) if rid not in unknown)
    except BaseException as failure:  # noqa: BLE001 - reported by the test, not lost in the thread
        failures.append(failure)
    finally:
        log.dispose()


def _log_rows(log: PredictionLog) -> dict[str, tuple[datetime, int | None, bytes]]:
    table = log.table
    with log.engine.connect() as conn:
        rows = conn.execute(select(table.c.request_id, table.c.served_at, table.c.label, table.c.logits)).all()
    return {rid: (served, label, logits) for rid, served, label, logits in rows}


def _archive_rows(archive: Path) -> list[tuple[str, int]]:
    """(request id, label) of every archived row (the reader checks each day file's ids are unique)."""
    export = PredictionLogExport(archive)
    return [(rid, int(label)) for chunk in export.iter_labelled(
        "m", "1", CUTOFF - timedelta(days=OLD_DAYS + 1), CUTOFF + timedelta(days=3))
        for rid, label in zip(chunk.request_ids, chunk.labels, strict=True)]  # fmt: skip


def _check(log: PredictionLog, archive: Path, truth: _Truth, logged_new: dict[str, bytes]) -> tuple[int, int]:
    """The invariant at rest (no worker, no labeller running); (old labelled rows in the log, in the archive)."""
    rows = _log_rows(log)
    archived = _archive_rows(archive)
    repeated = [rid for rid, n in Counter(rid for rid, _ in archived).items() if n > 1]
    assert not repeated, f"archived more than once: {repeated[:5]}"
    assert all(truth.labels.get(rid) == label for rid, label in archived)  # only labelled rows, with their labels
    archived_ids = {rid for rid, _ in archived}
    old_labelled = {rid for rid, label in truth.labels.items() if truth.served[rid] < CUTOFF}
    in_log = {rid for rid in old_labelled if rid in rows and rows[rid][1] == truth.labels[rid]}
    lost = old_labelled - in_log - archived_ids
    assert not lost, f"{len(lost)} labelled rows are in neither the log nor the archive: {sorted(lost)[:5]}"
    # Nothing served at or after the cutoff was deleted or changed (its label is the labeller's).
    newer = {rid: (row[1], row[2]) for rid, row in rows.items() if row[0] >= CUTOFF}
    assert newer == {rid: (truth.labels.get(rid), logits) for rid, logits in logged_new.items()}
    return len(in_log), len(old_labelled & archived_ids)


def _old_rows(log: PredictionLog) -> int:
    return log.delete_served_before("m", "1", CUTOFF, dry_run=True)


def _kill_when(trigger: str, log: PredictionLog, workers: list[BaseProcess], to_delete: list[float],
               delays: random.Random) -> bool:
    """Wait for the round's kill moment, then SIGKILL the workers still running; whether one was.

    ``deleting``: a worker's first delete batch has committed (fewer rows served before the cutoff
    than at the start), then 0-10 ms more; ``random``: a random moment before the rounds so far
    reached their first delete (while archiving, mostly); ``finish``: no kill."""
    began, old = time.monotonic(), _old_rows(log)
    random_moment = delays.uniform(0, 1.5 * float(np.median(to_delete)))
    while any(worker.is_alive() for worker in workers):
        if trigger == "random" and time.monotonic() - began >= random_moment:
            break
        if trigger == "deleting" and _old_rows(log) < old:
            to_delete.append(time.monotonic() - began)
            time.sleep(delays.uniform(0, 0.01))
            break
        time.sleep(0.002)
    alive = [worker for worker in workers if worker.is_alive()]
    for worker in alive:
        worker.kill()  # SIGKILL
    for worker in workers:
        worker.join(60)
        assert worker.exitcode in (0, -signal.SIGKILL), f"a worker failed (exit code {worker.exitcode})"
    return bool(alive)


def test_no_labelled_row_is_lost_to_killed_prunes_and_exports(prediction_log: PredictionLog, log_url: str,
                                                              tmp_path: Path) -> None:
    archive = tmp_path / "archive"
    truth = _Truth()
    seed = int(os.environ.get("THERMOSTAT_RETENTION_SEED", "28"))
    rng = np.random.default_rng(seed)
    delays = random.Random(seed)
    fork = multiprocessing.get_context("fork")
    to_delete = [0.15]  # seconds from a round's start to its first delete, as seen so far
    killed: Counter[str] = Counter()
    for round_ in range(ROUNDS):
        _log_round(prediction_log, truth, round_, rng)
        logged_new = {rid: row[2] for rid, row in _log_rows(prediction_log).items() if row[0] >= CUTOFF}
        trigger = ("deleting", "random", "deleting", "finish")[round_ % 4]
        jobs = ["prune"] + {1: ["prune"], 2: ["export"]}.get(round_ % 3, [])
        # Forked before the labeller thread starts: a child never inherits a lock a thread holds.
        workers = [fork.Process(target=_work, args=(log_url, str(archive), job), daemon=True) for job in jobs]
        for worker in workers:
            worker.start()
        stop = threading.Event()
        failures: list[BaseException] = []
        labeller = threading.Thread(target=_labeller, args=(log_url, truth, stop, round_, failures))
        labeller.start()
        if _kill_when(trigger, prediction_log, workers, to_delete, delays):
            killed[trigger] += 1
        stop.set()
        labeller.join(60)
        assert not failures, failures
        _check(prediction_log, archive, truth, logged_new)
    assert killed["deleting"] >= 1 or ROUNDS < 2, f"no worker was killed between its delete batches: {killed}"

    # A prune that runs to its end with no label arriving leaves every old labelled row archived, once.
    prune_prediction_log(prediction_log, CUTOFF, archive=archive, batch_size=20)
    in_log, in_archive = _check(prediction_log, archive, truth, logged_new)
    old_labelled = {rid for rid in truth.labels if truth.served[rid] < CUTOFF}
    assert in_log == 0 and in_archive == len(old_labelled) > ROUNDS * 80
    assert all(row[0] >= CUTOFF for row in _log_rows(prediction_log).values())
