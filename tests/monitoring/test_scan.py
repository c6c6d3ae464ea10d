"""One pass over a check's window gives what the three reads gave: the window summary, the early
warning's profile of every served row, and the sequential increment (also its rows served
outside the window), on SQLite and PostgreSQL."""

from __future__ import annotations

import sys
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from sqlalchemy import event

from calibration import ServedPriorStats

from monitoring import (
    LabelArrivals,
    NewlyLabelled,
    PredictionLog,
    WindowQuery,
    confidence_profile,
    log_predictions,
    scan_window,
    summarise_window,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
START, END = T0, T0 + timedelta(hours=24)
SINCE, UNTIL = T0 + timedelta(hours=23), END - timedelta(minutes=5)
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _log_traffic(log: PredictionLog) -> dict[str, list[str]]:
    """Rows of every kind around the window [START, END) and the increment [SINCE, UNTIL):
    served in the window and labelled before, inside or after the increment, or not at all;
    served the day before and labelled inside the increment (late labels) or before it; served
    after the window's end yet labelled inside it (a label stamped before its row was logged)."""
    rng = np.random.default_rng(5)
    kinds = {
        "early": (START, 40, SINCE - timedelta(hours=3)), "arrived": (START + timedelta(hours=1), 45, SINCE),
        "later": (START + timedelta(hours=2), 20, UNTIL + timedelta(minutes=1)), "unlabelled": (START, 30, None),
        "late": (START - timedelta(hours=20), 25, SINCE + timedelta(minutes=30)),
        "old": (START - timedelta(hours=30), 15, SINCE - timedelta(hours=1)),
        "after": (END + timedelta(seconds=1), 5, SINCE + timedelta(minutes=1)),
    }
    ids: dict[str, list[str]] = {}
    for kind, (first, n, labelled_at) in kinds.items():
        logits = (2.5 * rng.normal(size=(n, 4))).astype(np.float32)
        ids[kind] = [f"{kind}-{i}" for i in range(n)]
        groups = [None if i % 5 == 0 else ("web", "app")[i % 2] for i in range(n)]
        log_predictions(log, "m", "1", 1.5, logits, ids[kind], groups, [first + timedelta(minutes=7 * i) for i in range(n)])
        if labelled_at is not None:  # one label time for the whole batch: ties for the keyset
            log.attach_labels(ids[kind], rng.integers(0, 4, n), labelled_at=labelled_at)
    return ids


def test_one_pass_gives_the_three_reads(prediction_log: PredictionLog) -> None:
    _log_traffic(prediction_log)
    arrivals = LabelArrivals(since=SINCE, until=UNTIL, served_from=EPOCH, served_to=END + timedelta(hours=1))
    query = WindowQuery("m", "1", temperature=1.5, start=START, end=END, threshold=0.6)
    scan = scan_window(prediction_log, query, chunk_size=7, arrivals=arrivals)

    query = WindowQuery("m", "1", temperature=1.5, start=START, end=END, threshold=0.6)
    summary = summarise_window(prediction_log, query, chunk_size=7)
    assert scan.summary is not None and scan.summary.n == summary.n == 40 + 45 + 20
    assert scan.summary.gate == summary.gate and scan.summary.n_ungrouped == summary.n_ungrouped
    assert {k: v.n for k, v in scan.summary.groups.items()} == {k: v.n for k, v in summary.groups.items()}
    assert scan.summary.overall.ece == pytest.approx(summary.overall.ece, rel=1e-12)
    assert scan.summary.overall.nll == pytest.approx(summary.overall.nll, rel=1e-12)
    assert scan.summary.temperature_stats.gradient_sum == pytest.approx(summary.temperature_stats.gradient_sum,
                                                                         rel=1e-12)

    profile = confidence_profile(prediction_log, "m", "1", temperature=1.5, start=START, end=END, chunk_size=7)
    assert scan.profile == profile and scan.profile.n == scan.served_rows == 40 + 45 + 20 + 30

    # The increment: the labels that arrived in [SINCE, UNTIL), wherever their rows were served.
    query = WindowQuery("m", "1", temperature=1.5, start=EPOCH, end=arrivals.served_to)
    increment = summarise_window(NewlyLabelled(prediction_log, since=SINCE, until=UNTIL), query,
                                 chunk_size=7).temperature_stats
    assert scan.arrived is not None and scan.arrived.n == increment.n == 45 + 25 + 5
    assert scan.outside_rows == 25 + 5
    for name in ("gradient_sum", "gradient_square_sum", "curvature_sum"):
        assert getattr(scan.arrived, name) == pytest.approx(getattr(increment, name), rel=1e-12)
    assert scan.arrived_first_served == START - timedelta(hours=20)


def test_the_first_increment_and_a_pass_without_one(prediction_log: PredictionLog) -> None:
    _log_traffic(prediction_log)
    first = LabelArrivals(since=None, until=UNTIL, served_from=START, served_to=END)
    scan = scan_window(prediction_log, WindowQuery("m", "1", temperature=1.5, start=START, end=END), arrivals=first)
    assert scan.arrived is not None and scan.arrived.n == 40 + 45  # served in the window, labelled before UNTIL
    assert scan.outside_rows == 0 and scan.arrived_first_served == START

    bare = scan_window(prediction_log, WindowQuery("m", "1", temperature=1.5, start=START, end=END), summarise=False)
    assert bare.summary is None and bare.arrived is None and bare.arrived_first_served is None
    assert bare.profile == scan.profile


def test_a_version_never_logged_and_an_increment_that_misses_the_window(prediction_log: PredictionLog) -> None:
    with pytest.raises(LookupError, match="no prediction of model 'm' version '9' was ever logged"):
        scan_window(prediction_log, WindowQuery("m", "9", temperature=1.0, start=START, end=END))
    log_predictions(prediction_log, "m", "1", 1.0, np.zeros((1, 2)), ["a"], time=START)
    inside = LabelArrivals(since=None, until=UNTIL, served_from=START + timedelta(hours=1), served_to=END)
    with pytest.raises(ValueError, match="must cover the window"):
        scan_window(prediction_log, WindowQuery("m", "1", temperature=1.0, start=START, end=END), arrivals=inside)


def test_late_labels_are_read_in_labelling_order(prediction_log: PredictionLog) -> None:
    ids = _log_traffic(prediction_log)
    chunks = list(prediction_log.iter_labelled("m", "1", EPOCH, START, chunk_size=4, labelled_from=SINCE,
                                               labelled_to=UNTIL, order="labelled"))
    assert sorted(rid for chunk in chunks for rid in chunk.request_ids) == sorted(ids["late"])
    assert all(len(chunk) <= 4 for chunk in chunks)
    with pytest.raises(ValueError, match="order must be"):
        next(prediction_log.iter_labelled("m", "1", EPOCH, START, order="time"))  # type: ignore[arg-type]


def test_a_version_k_is_read_once(prediction_log: PredictionLog) -> None:
    log_predictions(prediction_log, "m", "1", 1.0, np.zeros((2, 3)), ["a", "b"], time=START)
    statements: list[str] = []
    event.listen(prediction_log.engine, "before_cursor_execute", lambda *args: statements.append(args[2]))
    assert prediction_log.logged_versions() == {("m", "1"): 3}
    assert [prediction_log.n_classes("m", "1") for _ in range(3)] == [3, 3, 3]
    assert len(statements) == 1  # one read for every version; K never changes once logged
    assert prediction_log.n_classes("m", "2") is None  # never logged: asked again next time
    log_predictions(prediction_log, "m", "2", 1.0, np.zeros((1, 4)), ["c"], time=START)
    assert prediction_log.n_classes("m", "2") == 4


def test_each_served_logit_is_scanned_once_and_the_priors_equal_their_own_read(
    prediction_log: PredictionLog, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pass checks a chunk once for its three uses (the profile, the priors, the scores; each
    scanned it before) and takes one softmax for the profile and the priors: the same numbers."""
    validation = sys.modules["calibration._validation"]  # private: spied as tests/flows/cli/test_validate_once.py does

    _log_traffic(prediction_log)
    scanned: list[int] = []
    real = getattr(validation, "first_refused_row")

    def counting(logits: np.ndarray, max_spread: float) -> int:
        scanned.append(int(logits.shape[0]))
        return int(real(logits, max_spread))

    monkeypatch.setattr(validation, "first_refused_row", counting)
    query = WindowQuery("m", "1", temperature=1.5, start=START, end=END)
    scan = scan_window(prediction_log, query, chunk_size=7, prior_capacity=11, seed=3)
    assert sum(scanned) == scan.served_rows == 40 + 45 + 20 + 30
    monkeypatch.setattr(validation, "first_refused_row", real)

    expected = None
    for index, chunk in enumerate(prediction_log.iter_served("m", "1", START, END, chunk_size=7)):
        part = ServedPriorStats.from_logits(chunk.logits, temperature=1.5, capacity=11,
                                            seed=np.random.default_rng([3, index]))
        expected = part if expected is None else expected + part
    assert scan.served_priors is not None and expected is not None
    assert np.array_equal(scan.served_priors.posterior_sum, expected.posterior_sum)
    assert np.array_equal(scan.served_priors.sample, expected.sample)
    assert np.array_equal(scan.served_priors.predicted_counts, expected.predicted_counts)
    assert scan.profile == confidence_profile(prediction_log, "m", "1", temperature=1.5, start=START, end=END,
                                              chunk_size=7)


def test_the_next_check_folds_in_every_row_labelled_since_the_last_one_whenever_served(
        prediction_log: PredictionLog) -> None:
    """A user saw "0 new labelled rows since the last check" although 1,000 rows had been labelled
    since: the increment is cut by label arrival, whatever the rows' serving time — before the
    window, in it, or served before the previous check."""
    from calibration import TemperatureStats
    from monitoring import DEFAULT_POLICY, CheckReference, CheckState, DriftReference, check_version

    rng = np.random.default_rng(9)
    served = {"before": (T0 - timedelta(hours=30), 600), "inside": (T0, 400), "seen": (T0, 200)}
    ids: dict[str, list[str]] = {}
    labels: dict[str, np.ndarray] = {}
    for kind, (first, n) in served.items():
        logits = (2.5 * rng.normal(size=(n, 4))).astype(np.float32)
        ids[kind], labels[kind] = [f"{kind}-{i}" for i in range(n)], logits.argmax(axis=1)
        log_predictions(prediction_log, "m", "1", 1.0, logits, ids[kind],
                        time=[first + timedelta(seconds=9 * i) for i in range(n)])
    prediction_log.attach_labels(ids["seen"], labels["seen"], labelled_at=T0 + timedelta(hours=1))
    reference = CheckReference(DriftReference.of(0.0, temperature_stats=TemperatureStats.empty(1.0)))

    def check(now: datetime, state: CheckState) -> object:
        query = WindowQuery("m", "1", temperature=1.0, start=now - timedelta(hours=24), end=now)
        return check_version(prediction_log, query, reference, state, DEFAULT_POLICY, now, stream=prediction_log)

    first = check(T0 + timedelta(hours=2), CheckState(live=True))
    assert first.report is not None and first.report.sequential is not None and first.report.sequential.n == 200
    for kind in ("before", "inside"):  # 1,000 labels after the first check, of rows served before it
        prediction_log.attach_labels(ids[kind], labels[kind], labelled_at=T0 + timedelta(hours=3))
    second = check(T0 + timedelta(hours=8), CheckState(sequential=first.report.sequential.state, live=True))
    assert second.report is not None and second.report.sequential is not None
    assert second.report.sequential.n == 1_000, second.report.sequential.sentence()
    assert second.arrivals is not None and second.scan is not None and second.scan.outside_rows == 600
    assert second.report.sequential.start == first.report.sequential.end  # the cursor: label arrival


def test_labels_inside_the_settle_time_are_counted_and_left_to_the_next_check(prediction_log: PredictionLog) -> None:
    """The "0 new labelled rows since the last check" a user saw came right after 1,000 labels
    were attached: inside the label settle time, they are the next increment's. The check says
    so, with their number, and the next check folds in every one of them."""
    from calibration import TemperatureStats
    from monitoring import DEFAULT_POLICY, CheckReference, CheckState, DriftReference, check_version

    rng = np.random.default_rng(10)
    logits = (2.5 * rng.normal(size=(1_000, 4))).astype(np.float32)
    ids = [f"s-{i}" for i in range(1_000)]
    log_predictions(prediction_log, "m", "1", 1.0, logits, ids, time=[T0 + timedelta(seconds=9 * i) for i in range(1_000)])
    reference = CheckReference(DriftReference.of(0.0, temperature_stats=TemperatureStats.empty(1.0)))

    def check(now: datetime, state: CheckState) -> object:
        query = WindowQuery("m", "1", temperature=1.0, start=now - timedelta(hours=24), end=now)
        return check_version(prediction_log, query, reference, state, DEFAULT_POLICY, now, stream=prediction_log)

    first = check(T0 + timedelta(hours=3), CheckState(live=True))
    assert first.report.sequential.n == 0 and first.scan.settling == 0
    labelled = T0 + timedelta(hours=4)
    prediction_log.attach_labels(ids, logits.argmax(axis=1), labelled_at=labelled)
    assert DEFAULT_POLICY.label_settle_time == timedelta(minutes=5)
    soon = check(labelled + timedelta(minutes=1), CheckState(sequential=first.report.sequential.state, live=True))
    sentence = soon.report.sequential.sentence()
    assert soon.report.sequential.n == 0 and soon.scan.settling == 1_000, sentence
    assert "1000 rows labelled since, inside the label settle time, go to the next check" in sentence, sentence
    later = check(labelled + timedelta(minutes=10), CheckState(sequential=soon.report.sequential.state, live=True))
    assert later.report.sequential.n == 1_000 and later.scan.settling == 0, later.report.sequential.sentence()


def test_a_drift_that_began_mid_window_is_dated_and_the_refit_reads_from_there(prediction_log: PredictionLog) -> None:
    """A refit after a mid-window drift fitted T on the older, pre-drift half of the window and was
    refused as "not a fix": without a sequential alarm, the window's own change point (CUSUM of the
    temperature score) is where the refit starts reading."""
    from calibration import TemperatureStats
    from monitoring import DEFAULT_POLICY, CheckReference, CheckState, DriftReference, check_version

    rng = np.random.default_rng(11)
    logits = 2.5 * rng.normal(size=(3_000, 4))

    def labels_at(temperature: float, z: np.ndarray) -> np.ndarray:
        p = np.exp(z / temperature)
        p /= p.sum(axis=1, keepdims=True)
        return (rng.random((len(z), 1)) > p.cumsum(axis=1)).sum(axis=1).clip(0, 3)

    labels = np.concatenate([labels_at(1.0, logits[:1_800]), labels_at(1.6, logits[1_800:])])
    times = [T0 + timedelta(seconds=10 * i) for i in range(3_000)]
    log_predictions(prediction_log, "m", "1", 1.0, logits.astype(np.float32), [f"r{i}" for i in range(3_000)],
                    time=times, labels=labels)
    reference = CheckReference(DriftReference.of(
        0.0, temperature_stats=TemperatureStats.from_logits(logits[:1_800], labels_at(1.0, logits[:1_800]))))
    query = WindowQuery("m", "1", temperature=1.0, start=T0, end=T0 + timedelta(hours=10))
    report = check_version(prediction_log, query, reference, CheckState(), DEFAULT_POLICY, query.end).report
    assert report is not None and report.drift_detected and report.sequential is None
    found = report.window_change_point
    assert found is not None and found.significant and found.at is not None
    assert abs((found.at - times[1_800]).total_seconds()) < 10 * 150, found  # within 150 rows of the drift's start
    assert report.refit_window_start == found.at == report.change_point
    assert any(reason.startswith("the drift began inside the window at about") for reason in report.reasons)
    calm = check_version(prediction_log, WindowQuery("m", "1", temperature=1.0, start=T0, end=times[1_700]),
                         reference, CheckState(), DEFAULT_POLICY, query.end).report
    assert calm is not None and not calm.drift_detected and calm.window_change_point is None
