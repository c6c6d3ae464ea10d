"""Dashboard outputs: the reliability figure, markdown, table rows, metrics and the event payload."""

from __future__ import annotations

import io
import json
import math
import posixpath
import re
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from matplotlib.figure import Figure

from calibration import CalibrationStats
from monitoring import (
    DriftReport,
    decide_drift,
    drift_markdown,
    drift_metrics,
    drift_payload,
    drift_table_rows,
    group_metric_key,
    reliability_figure,
    summarise_arrays,
)

T0 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def group_drift_report() -> DriftReport:
    rng = np.random.default_rng(0)
    n = 3_000
    logits = 2.0 * rng.normal(size=(n, 4))
    true_temperature = np.where(np.arange(n) < 1_500, 2.0, 1.0)[:, None]
    p = np.exp(logits / true_temperature)
    p /= p.sum(axis=1, keepdims=True)
    labels = np.minimum((rng.random((n, 1)) > p.cumsum(axis=1)).sum(axis=1), 3)
    groups = np.array(["scans"] * 1_500 + ["web|mobile"] * 1_400 + ["rare"] * 100, dtype=object)
    summary = summarise_arrays(logits, labels, temperature=1.0, start=T0 - timedelta(hours=1), end=T0,
                               groups=groups, threshold=0.999, model_name="digits", model_version="4")  # fmt: skip
    return decide_drift(summary, baseline_ece=0.02, baseline_nll=0.9)


def test_reliability_figure_draws_bars_counts_and_sparse_bins() -> None:
    logits = np.log(np.array([[0.95, 0.05]] * 40 + [[0.55, 0.45]] * 3))
    labels = np.array([0] * 36 + [1] * 4 + [0, 1, 1])
    table = CalibrationStats.from_logits(logits, labels, n_bins=10).reliability_table(min_count=10)
    figure = reliability_figure(table, title="digits v4, last 24 h")
    assert isinstance(figure, Figure)
    ax = figure.axes[0]
    bars = [bar for container in ax.containers for bar in container]
    assert len(bars) == 2
    sparse_bars = [b for b in bars if b.get_hatch()]
    assert len(sparse_bars) == 1 and sparse_bars[0].get_x() == pytest.approx(0.5)
    assert sparse_bars[0].get_facecolor()[:3] != bars[0].get_facecolor()[:3], "sparse bins are greyed"
    assert sorted(t.get_text() for t in ax.texts) == ["3", "40"], "every bar carries its count"
    assert "n = 43" in ax.get_title() and "10 equal-width bins" in ax.get_title()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    assert buffer.getvalue()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reliability_figure_of_an_empty_table() -> None:
    table = CalibrationStats.empty(n_bins=5, n_classes=3).reliability_table()
    figure = reliability_figure(table, title="nothing yet")
    assert len(figure.axes[0].containers) == 0
    assert "ECE = n/a" in figure.axes[0].get_title()


def test_markdown_names_the_verdict_reasons_numbers_and_groups(group_drift_report: DriftReport) -> None:
    text = drift_markdown(group_drift_report)
    assert text.startswith("## Calibration check of digits version 4: DRIFT (refit recommended)")
    for reason in group_drift_report.reasons:
        assert f"- {reason}" in text
    assert "| ECE (15 equal-width bins) |" in text and "| accepted accuracy |" in text
    assert "| scans | 1500 |" in text and "| rare | 100 |" in text and "not tested" in text


def test_table_rows_and_payload_are_json_safe(group_drift_report: DriftReport) -> None:
    rows = drift_table_rows(group_drift_report)
    assert [(r["scope"], r["group"]) for r in rows] == [
        ("overall", None), ("group", "rare"), ("group", "scans"), ("group", "web|mobile"),
    ]  # fmt: skip
    assert rows[2]["drifted"] is True and rows[1]["tested"] is False and rows[1]["p_value"] is None
    json.dumps(rows, allow_nan=False)
    payload = drift_payload(group_drift_report)
    json.dumps(payload, allow_nan=False)
    assert payload["verdict"] == "drift" and payload["drifted_groups"] == ["scans"]
    assert payload["checked_at"] == T0.isoformat()
    assert len(payload["reliability"]) == 15


def test_group_metric_keys_are_bounded_valid_and_collision_free() -> None:
    """MLflow refuses metric keys over 250 characters (a 241-255 character group made every check
    fail) and keeps [A-Za-z0-9_-. /]; groups differing only in punctuation overwrote each other."""
    names = ["eu:west", "eu;west", "eu_west", "eu west", "eu/west", "eu//west", "eu/", "", "../x", "a" * 120,
             "a" * 121, *("g" * n for n in range(241, 256)), "é" * 130, "eu_west.h0123456789abcdef"]
    names += [group_metric_key("eu:west")]  # a plain name that looks like another group's key
    rng = np.random.default_rng(3)
    summary = summarise_arrays(2.0 * rng.normal(size=(len(names) * 3, 3)), rng.integers(0, 3, len(names) * 3),
                               temperature=1.0, start=T0 - timedelta(hours=1), end=T0, groups=names * 3)
    report = decide_drift(summary, baseline_ece=0.0, min_window=1, min_group_size=1)
    keys = {name: group_metric_key(name) for name in names}
    assert len(set(keys.values())) == len(names), "two groups share a key"
    metrics = drift_metrics(report)
    group_keys = [key for key in metrics if ".group." in key]
    assert len(group_keys) == 2 * len(names)
    for key in group_keys:
        assert len(key) <= 250 and re.fullmatch(r"[A-Za-z0-9_\-. /]+", key) and posixpath.normpath(key) == key, key
    assert keys["eu-west" if "eu-west" in keys else "eu_west"] == "eu_west" and keys["eu/west"] == "eu/west"
    assert keys["a" * 120] == "a" * 120 and keys["a" * 121].startswith("a" * 64 + ".h")
    assert keys["eu:west"].startswith("eu_west.h") and keys["eu;west"].startswith("eu_west.h")
    assert group_metric_key("eu:west") == keys["eu:west"], "stable"


def test_metrics_are_finite_and_group_names_sanitised(group_drift_report: DriftReport) -> None:
    metrics = drift_metrics(group_drift_report)
    assert metrics["drift"] == 1.0 and metrics["refit_recommended"] == 1.0
    # A name MLflow takes as it is keeps its key; "web|mobile" gets a readable prefix and a hash.
    assert f"ece.group.{group_metric_key('web|mobile')}" in metrics and "ece.group.scans" in metrics
    assert group_metric_key("web|mobile").startswith("web_mobile.h")
    assert all(np.isfinite(v) for v in metrics.values())
    assert ("accepted_accuracy" in metrics) == math.isfinite(group_drift_report.accepted_accuracy), "NaN is left out"
