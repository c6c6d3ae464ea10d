"""Windowed, chunked evaluation: merged chunk statistics equal the statistics of the whole window."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from calibration import CalibrationStats, TemperatureStats, TopLabelScores, top_label_confidence
from monitoring import (
    DriftReference,
    GateCounts,
    PredictionLog,
    WindowQuery,
    WindowSummary,
    decide_drift,
    log_predictions,
    summarise_arrays,
    summarise_window,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)


def assert_stats_equal(got: CalibrationStats, want: CalibrationStats) -> None:
    assert (got.n_bins, got.temperature, got.n_classes) == (want.n_bins, want.temperature, want.n_classes)
    assert np.array_equal(got.bin_count, want.bin_count)
    assert np.array_equal(got.bin_correct, want.bin_correct)
    np.testing.assert_allclose(got.bin_confidence_sum, want.bin_confidence_sum, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got.bin_variance_sum, want.bin_variance_sum, rtol=0, atol=1e-9)
    assert got.nll_sum == pytest.approx(want.nll_sum, rel=0, abs=1e-9)
    assert got.brier_sum == pytest.approx(want.brier_sum, rel=0, abs=1e-9)


@pytest.fixture
def filled_log(prediction_log: PredictionLog) -> tuple[PredictionLog, dict[str, np.ndarray]]:
    """1 000 rows of version 1 (most labelled, three groups and ungrouped), plus noise around them."""
    rng = np.random.default_rng(7)
    n, k = 1_000, 4
    logits = (2.5 * rng.normal(size=(n, k))).astype(np.float32)
    labels = rng.integers(0, k, size=n)
    groups = rng.choice(np.array(["a", "b", "c", None], dtype=object), size=n)
    times = [T0 + timedelta(seconds=int(s)) for s in rng.integers(0, 7_200, size=n)]  # two hours
    ids = [f"r{i}" for i in range(n)]
    log_predictions(prediction_log, "digits", "1", 1.3, logits, ids, list(groups), times)
    labelled = rng.random(n) < 0.9
    prediction_log.attach_labels([ids[i] for i in np.flatnonzero(labelled)], labels[labelled])
    # Another version in the same hours must not leak in.
    log_predictions(prediction_log, "digits", "2", 1.0, np.zeros((50, 4)), [f"x{i}" for i in range(50)], time=T0,
                    labels=np.zeros(50, dtype=int))  # fmt: skip
    in_window = labelled & np.array([T0 <= t < T0 + HOUR for t in times])
    return prediction_log, {"logits": logits[in_window], "labels": labels[in_window], "groups": groups[in_window]}


@pytest.mark.parametrize("chunk_size", [1_000_000, 97, 1])
def test_merged_chunks_equal_the_whole_window(
    filled_log: tuple[PredictionLog, dict[str, np.ndarray]], chunk_size: int
) -> None:
    log, rows = filled_log
    query = WindowQuery("digits", "1", temperature=0.8, start=T0, end=T0 + HOUR, n_bins=12, threshold=0.7)
    summary = summarise_window(log, query, chunk_size=chunk_size)
    n = rows["labels"].shape[0]
    assert 300 < n < 600
    assert summary.n == n
    assert summary.n_chunks == math.ceil(n / chunk_size)
    whole = CalibrationStats.from_logits(rows["logits"], rows["labels"], temperature=0.8, n_bins=12)
    assert_stats_equal(summary.overall, whole)
    assert summary.overall == whole
    assert sorted(summary.groups) == ["a", "b", "c"]
    for key, stats in summary.groups.items():
        mask = rows["groups"] == key
        assert_stats_equal(stats, CalibrationStats.from_logits(rows["logits"][mask], rows["labels"][mask],
                                                               temperature=0.8, n_bins=12))  # fmt: skip
    assert summary.n_ungrouped == int(np.count_nonzero(rows["groups"] == None))  # noqa: E711
    predicted, confidence = top_label_confidence(rows["logits"], temperature=0.8)
    accepted = confidence >= 0.7
    assert summary.gate == GateCounts(0.7, n, int(accepted.sum()), int((accepted & (predicted == rows["labels"])).sum()))
    assert summary.served_temperatures == (1.3,)
    assert summary.temperature == 0.8 and summary.n_classes == 4
    # The temperature test's sums merge like the rest, overall and per group.
    assert summary.temperature_stats == TemperatureStats.from_logits(rows["logits"], rows["labels"], temperature=0.8)
    assert sorted(summary.group_temperature_stats) == ["a", "b", "c"]
    for key, sums in summary.group_temperature_stats.items():
        mask = rows["groups"] == key
        assert sums == TemperatureStats.from_logits(rows["logits"][mask], rows["labels"][mask], temperature=0.8)


def test_window_equals_the_array_summary(filled_log: tuple[PredictionLog, dict[str, np.ndarray]]) -> None:
    log, rows = filled_log
    query = WindowQuery("digits", "1", temperature=1.3, start=T0, end=T0 + HOUR)
    from_log = summarise_window(log, query, chunk_size=64)
    from_arrays = summarise_arrays(rows["logits"], rows["labels"], temperature=1.3, start=T0, end=T0 + HOUR,
                                   groups=rows["groups"])  # fmt: skip
    assert from_log.overall == from_arrays.overall
    assert from_log.groups.keys() == from_arrays.groups.keys()
    assert from_log.group_weighted_ece == pytest.approx(from_arrays.group_weighted_ece, abs=1e-12)


def test_adjacent_windows_merge_into_the_longer_one(filled_log: tuple[PredictionLog, dict[str, np.ndarray]]) -> None:
    log, _ = filled_log
    def window(start: datetime, end: datetime) -> WindowSummary:
        return summarise_window(log, WindowQuery("digits", "1", temperature=1.0, start=start, end=end, threshold=0.6))
    first, second = window(T0, T0 + HOUR), window(T0 + HOUR, T0 + 2 * HOUR)
    both = window(T0, T0 + 2 * HOUR)
    merged = second + first
    assert (merged.start, merged.end) == (T0, T0 + 2 * HOUR)
    assert merged.overall == both.overall
    assert all(merged.groups[key] == both.groups[key] for key in both.groups)
    assert merged.gate == both.gate
    assert merged.n_ungrouped == both.n_ungrouped
    with pytest.raises(ValueError, match="windows must be adjacent"):
        _ = first + window(T0 + 90 * timedelta(minutes=1), T0 + 2 * HOUR)


def test_an_empty_window_and_an_unknown_version(prediction_log: PredictionLog) -> None:
    log_predictions(prediction_log, "digits", "1", 1.0, np.zeros((3, 2)), ["a", "b", "c"], time=T0)  # no labels
    query = WindowQuery("digits", "1", temperature=1.0, start=T0, end=T0 + HOUR, threshold=0.9)
    summary = summarise_window(prediction_log, query)
    assert summary.n == 0 and summary.n_chunks == 0 and summary.groups == {}
    assert math.isnan(summary.overall.ece) and summary.gate is not None and math.isnan(summary.gate.coverage)
    report = decide_drift(summary, DriftReference.of(0.02))
    assert report.verdict == "insufficient_data" and report.n == 0 and math.isnan(report.window.ece)
    assert report.reasons[0].startswith("only 0 labelled rows in the window")
    with pytest.raises(LookupError, match="no prediction of model 'digits' version '9' was ever logged"):
        summarise_window(prediction_log, WindowQuery("digits", "9", temperature=1.0, start=T0, end=T0 + HOUR))


def test_gate_counts() -> None:
    counts = GateCounts.from_confidence([0.2, 0.8, 0.8, 0.95], [True, True, False, True], threshold=0.8)
    assert (counts.n, counts.accepted, counts.accepted_correct) == (4, 3, 2)
    assert counts.coverage == 0.75 and counts.accepted_accuracy == pytest.approx(2 / 3)
    nothing = GateCounts.from_confidence([0.2, 0.3], [True, True], threshold=0.99)
    assert nothing.coverage == 0.0 and math.isnan(nothing.accepted_accuracy), "empty accepted set: undefined"
    assert counts + GateCounts.empty(0.8) == counts
    with pytest.raises(ValueError, match="different thresholds"):
        _ = counts + nothing
    with pytest.raises(ValueError, match=r"threshold must be in \[0, 1\]"):
        GateCounts.empty(1.5)


def test_summarise_arrays_checks_its_input() -> None:
    with pytest.raises(ValueError, match="groups must be 1-D with one entry per row"):
        summarise_arrays(np.zeros((2, 2)), [0, 1], temperature=1.0, start=T0, end=T0, groups=["a"])
    with pytest.raises(ValueError, match="has no timezone"):
        summarise_arrays(np.zeros((2, 2)), [0, 1], temperature=1.0, start=datetime(2026, 1, 1), end=T0)
    with pytest.raises(ValueError, match="row 1 contains nan"):
        summarise_arrays(np.array([[0.0, 1.0], [np.nan, 0.0]]), [0, 1], temperature=1.0, start=T0, end=T0)


def test_one_calibration_pass_per_chunk_whatever_the_groups(
    filled_log: tuple[PredictionLog, dict[str, np.ndarray]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each chunk is scored once (confidence, correctness, NLL and Brier terms per row); the
    groups, the overall and the gate are all built from that pass. Results equal the previous
    accumulator's, which binned the overall chunk and then every group again."""
    log, rows = filled_log
    chunk_size = 97
    scored_rows: list[int] = []
    score = TopLabelScores.from_logits

    def counted(cls: type[TopLabelScores], logits: np.ndarray, labels: np.ndarray, *, temperature: float) -> TopLabelScores:
        scored_rows.append(int(logits.shape[0]))
        return score(logits, labels, temperature=temperature)

    def second_pass(*args: object, **kwargs: object) -> CalibrationStats:
        raise AssertionError("the chunk's logits were read again to bin a group or the overall")

    with monkeypatch.context() as patched:
        patched.setattr(TopLabelScores, "from_logits", classmethod(counted))
        patched.setattr(CalibrationStats, "from_logits", classmethod(second_pass))
        query = WindowQuery("digits", "1", temperature=0.8, start=T0, end=T0 + HOUR, n_bins=12, threshold=0.7)
        summary = summarise_window(log, query, chunk_size=chunk_size)
    assert sorted(summary.groups) == ["a", "b", "c"] and summary.n_ungrouped > 0
    assert summary.n_chunks == math.ceil(rows["labels"].shape[0] / chunk_size) > 3
    assert len(scored_rows) == summary.n_chunks, "one calibration pass per chunk"
    assert sum(scored_rows) == summary.n

    # The previous accumulator, in miniature: per chunk, the overall binned, every group binned
    # again (4 calibration passes with 3 groups), and a fifth scan for the gate.
    overall = CalibrationStats.empty(n_bins=12, temperature=0.8, n_classes=4)
    groups: dict[str, CalibrationStats] = {}
    gate = GateCounts.empty(0.7)
    for chunk in log.iter_labelled("digits", "1", T0, T0 + HOUR, chunk_size=chunk_size):
        overall = overall + CalibrationStats.from_logits(chunk.logits, chunk.labels, temperature=0.8, n_bins=12)
        predicted, confidence = top_label_confidence(chunk.logits, temperature=0.8)
        gate = gate + GateCounts.from_confidence(confidence, predicted == chunk.labels, threshold=0.7)
        for key in sorted({g for g in chunk.groups.tolist() if g is not None}):
            mask = chunk.groups == key
            part = CalibrationStats.from_logits(chunk.logits[mask], chunk.labels[mask], temperature=0.8, n_bins=12)
            groups[key] = groups[key] + part if key in groups else part
    assert_stats_equal(summary.overall, overall)
    assert summary.groups.keys() == groups.keys()
    for key, stats in groups.items():
        assert_stats_equal(summary.groups[key], stats)
    assert summary.gate == gate
    assert summary.overall.n == sum(stats.n for stats in summary.groups.values()) + summary.n_ungrouped


def test_a_read_given_the_version_and_window_apart_says_to_pass_a_window_query(prediction_log: PredictionLog) -> None:
    """The reads took (name, version, temperature=..., start=..., end=...) before WindowQuery: the old
    call is refused naming what to pass, not an AttributeError from inside."""
    from monitoring import PredictionLogExport, reweight_window, scan_window, summarise_export

    reads = [lambda: summarise_window(prediction_log, "digits"),  # type: ignore[arg-type]
             lambda: scan_window(prediction_log, "digits"),  # type: ignore[arg-type]
             lambda: summarise_export(PredictionLogExport("."), "digits"),  # type: ignore[arg-type]
             lambda: reweight_window(prediction_log, "digits", priors=[0.5, 0.5],  # type: ignore[arg-type]
                                     reference_priors=[0.5, 0.5])]
    for read in reads:
        with pytest.raises(TypeError, match=r"must be a WindowQuery; got str 'digits': pass WindowQuery\(model_name"):
            read()
    with pytest.raises(TypeError, match=r"summarise_window\(\) (got an unexpected keyword|takes 2 positional)"):
        summarise_window(prediction_log, "digits", "1", temperature=1.0, start=T0, end=T0 + HOUR)  # type: ignore[call-arg]

