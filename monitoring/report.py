"""Reports of a drift check for dashboards: reliability diagram, markdown, table rows, metrics.

Everything here is a pure function of a :class:`~monitoring.DriftReport` or a
:class:`~calibration.ReliabilityTable`. The figure is drawn on a bare
:class:`matplotlib.figure.Figure` with the Agg canvas: no display, no pyplot global state
(a long-running monitor does not accumulate open figures). The tables and payloads are
JSON-safe (NaN becomes None) because Prefect artifacts and events are JSON.
"""

from __future__ import annotations

import hashlib
import math
import posixpath
import re
from dataclasses import fields
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from calibration import ReliabilityTable, TemperatureTest, json_safe

from .drift import COLLAPSE_SPREAD_RATIO, DriftReport

__all__ = ["drift_markdown", "drift_metrics", "drift_payload", "drift_table_rows", "group_metric_key", "reliability_figure"]


def _fmt(value: float | None, digits: int = 4) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.{digits}f}"


def _fmt_p(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.2g}" if value < 0.01 else f"{value:.4f}"


def _interval(low: float, high: float, digits: int = 4) -> str:
    return "" if not (math.isfinite(low) and math.isfinite(high)) else f" [{low:.{digits}f}, {high:.{digits}f}]"


def _temperature_cell(test: TemperatureTest | None) -> str:
    if test is None or not math.isfinite(test.window_temperature):
        return "n/a"
    return f"{test.window_temperature:.4g}{_interval(test.window_temperature_low, test.window_temperature_high, 3)}"


def reliability_figure(
    table: ReliabilityTable,
    *,
    title: str,
    before: ReliabilityTable | None = None,
    captions: tuple[str, str] = ("before", "after"),
) -> Figure:
    """Reliability diagram: accuracy per confidence bin against the diagonal, counts annotated.

    Bars show each non-empty bin's accuracy over the bin's span; a dot marks its mean
    confidence (the gap is the vertical distance to it); the diagonal is perfect calibration.
    Every bar carries its count; sparse bins (fewer than ``table.min_count`` rows) are grey
    and hatched: noise, not signal. Each diagram's title gives n and the ECE with its binning.

    Parameters
    ----------
    table : ReliabilityTable
        The bins to draw (``CalibrationStats.reliability_table()`` or ``DriftReport.reliability``).
    title : str
        First line of the title (e.g. model, version and window); with ``before``, the
        figure's title above both diagrams.
    before : ReliabilityTable, optional
        The same rows measured before a change (e.g. at the previous temperature): drawn to
        the left of ``table``, on the same accuracy axis.
    captions : (str, str), default ("before", "after")
        With ``before``, the first line of each diagram's title (before, after).

    Returns
    -------
    matplotlib.figure.Figure
        An Agg-backed figure; save it with ``fig.savefig(path)`` or ``mlflow.log_figure``.

    Examples
    --------
    >>> import numpy as np
    >>> from calibration import CalibrationStats
    >>> logits, labels = np.log([[0.3, 0.7], [0.9, 0.1], [0.4, 0.6]]), [1, 0, 0]
    >>> stats = CalibrationStats.from_logits(logits, labels, n_bins=5)
    >>> fig = reliability_figure(stats.reliability_table(min_count=2), title="m v1")
    >>> sum(len(bars) for bars in fig.axes[0].containers)  # one bar per non-empty bin
    3
    >>> [text.get_text() for text in fig.axes[0].texts]  # its count
    ['1', '1', '1']
    >>> flatter = CalibrationStats.from_logits(logits, labels, temperature=2.0, n_bins=5)
    >>> fig = reliability_figure(flatter.reliability_table(), before=stats.reliability_table(), title="m v2",
    ...                          captions=("T = 1", "T = 2"))
    >>> [ax.get_title().splitlines()[0] for ax in fig.axes]
    ['T = 1', 'T = 2']
    """
    figure = Figure(figsize=(6.0, 6.0) if before is None else (11.0, 5.8), dpi=100)
    FigureCanvasAgg(figure)
    if before is None:
        _draw_reliability(figure.add_subplot(1, 1, 1), table, title)
    else:
        left, right = figure.subplots(1, 2, sharey=True)
        _draw_reliability(left, before, captions[0])
        _draw_reliability(right, table, captions[1])
        right.set_ylabel("")
        figure.suptitle(title, fontsize=9)
    figure.tight_layout()
    return figure


def _draw_reliability(ax: Axes, table: ReliabilityTable, heading: str) -> None:
    filled = table.count > 0
    dense = filled & ~table.sparse
    sparse = filled & table.sparse
    width = table.upper - table.lower
    centre = (table.lower + table.upper) / 2.0
    ax.plot([0.0, 1.0], [0.0, 1.0], linestyle="--", color="black", linewidth=1.0, label="perfect calibration")
    if dense.any():
        ax.bar(
            table.lower[dense], table.accuracy[dense], width=width[dense], align="edge",
            color="tab:blue", edgecolor="white", alpha=0.85, label="accuracy",
        )  # fmt: skip
    if sparse.any():
        for lower, upper in zip(table.lower[sparse].tolist(), table.upper[sparse].tolist()):
            # Grey the whole column, so a sparse bin reads as "no evidence" even with accuracy 0.
            ax.axvspan(lower, upper, facecolor="0.93", edgecolor="0.8", hatch="//", zorder=0, linewidth=0)
        ax.bar(
            table.lower[sparse], table.accuracy[sparse], width=width[sparse], align="edge",
            color="lightgrey", edgecolor="grey", hatch="//",
            label=f"sparse bin (< {table.min_count} rows: noise)",
        )  # fmt: skip
    if filled.any():
        ax.scatter(
            centre[filled], table.mean_confidence[filled], marker="_", s=200, color="tab:red", zorder=3,
            label="mean confidence",
        )  # fmt: skip
    # Counts sit at the foot of each column, clear of the bars' tops and the confidence marks.
    for x, count in zip(centre[filled].tolist(), table.count[filled].tolist()):
        ax.annotate(
            f"{count}", (x, 0.0), xytext=(0, 3), textcoords="offset points", ha="center", va="bottom",
            rotation=90, fontsize=7, color="black", zorder=4,
        )  # fmt: skip
    n = table.n
    ece = table.ece if n else math.nan
    ax.set_title(f"{heading}\nn = {n}, ECE = {_fmt(ece)} ({table.n_bins} {table.scheme} bins)", fontsize=10)
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.08)
    ax.set_xlabel("confidence (top label)")
    ax.set_ylabel("accuracy")
    ax.legend(loc="upper left", fontsize=8)


def drift_markdown(report: DriftReport) -> str:
    """A markdown summary of a drift check: verdict, reasons, numbers and groups.

    Parameters
    ----------
    report : DriftReport
        The decision.

    Returns
    -------
    str
        Markdown for a Prefect artifact or an alert.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> import numpy as np
    >>> from monitoring import decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t, model_name="m",
    ...                      model_version="1")
    >>> print(drift_markdown(decide_drift(s, baseline_ece=0.01)).splitlines()[0])
    ## Calibration check of m version 1: insufficient_data
    """
    headline = {
        "drift": "DRIFT" + (" (refit recommended)" if report.refit_recommended else " (in cool-down: no refit)"),
        "ok": "ok",
        "insufficient_data": "insufficient_data",
    }[report.verdict]
    lines = [
        f"## Calibration check of {report.model_name} version {report.model_version}: {headline}",
        "",
        f"Window [{report.window_start.isoformat()}, {report.window_end.isoformat()}), checked at "
        f"{report.checked_at.isoformat()}; {report.n} labelled rows read at T = {report.temperature:.4g}.",
        "",
        "### Reasons",
        "",
        *(f"- {reason}" for reason in report.reasons),
        "",
        "### Tests",
        "",
        *_tests_table(report),
        "",
        "### Numbers",
        "",
        "| metric | value |",
        "| --- | --- |",
        f"| window's optimal T ({report.confidence_level:.0%} interval) | {_temperature_cell(report.temperature_test)} |",
        f"| ECE, {report.ece_estimator} ({report.confidence_level:.0%} interval) | {_fmt(report.ece_estimate)}"
        f"{_interval(report.ece_low, report.ece_high)} |",
        f"| reference ECE | {_fmt(report.baseline_ece)}{_interval(report.baseline_ece_low, report.baseline_ece_high)} |",
        f"| ECE excess (tolerance {_fmt(report.ece_tolerance)}) | {_fmt(report.ece_excess)} |",
        f"| ECE ({report.n_bins} {report.scheme} bins) | {_fmt(report.ece)} (plug-in: biased upward on small windows) |",
        f"| calibrated-model binned ECE, 95th percentile (consistency p {_fmt_p(report.consistency_p_value)}) | "
        f"{_fmt(report.null_quantile_95)} |",
        f"| NLL (mean nats) | {_fmt(report.nll)} |",
        f"| baseline NLL | {_fmt(report.baseline_nll)} |",
        f"| accuracy | {_fmt(report.accuracy)} |",
        f"| mean confidence | {_fmt(report.mean_confidence)} |",
        f"| Brier score | {_fmt(report.brier)} |",
        f"| gate threshold | {_fmt(report.threshold)} |",
        f"| coverage | {_fmt(report.coverage)} |",
        f"| accepted accuracy | {_fmt(report.accepted_accuracy)} |",
        f"| group-weighted ECE | {_fmt(report.group_weighted_ece)} |",
        *_stream_rows(report),
    ]
    if report.groups:
        lines += [
            "",
            "### Groups",
            "",
            "| group | n | optimal T | T test p | ECE | reference | ECE test p | level | drifted |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
            *(
                f"| {g.group} | {g.n} | {_temperature_cell(g.temperature_test) if g.tested else 'not tested'} | "
                f"{_fmt_p(g.temperature_test.p_value) if g.temperature_test is not None else '-'} | "
                f"{_fmt(g.ece_estimate if g.tested else g.ece)} | {_fmt(g.baseline_ece)} | "
                f"{_fmt_p(g.p_value) if g.tested else '-'} | {f'{g.p_threshold:.2g}' if g.tested else '-'} | "
                f"{_group_fired(g.temperature_drift, g.ece_drift, g.collapsed) if g.drifted else 'no'} |"
                for g in report.groups
            ),
        ]
    return "\n".join(lines) + "\n"


def _stream_rows(report: DriftReport) -> list[str]:
    """The Numbers table's rows of the sequential rule and the early warning (when they ran)."""
    rows: list[str] = []
    check = report.sequential
    if check is not None:
        rows.append(f"| sequential CUSUM, over- / under-confident (alarm at {check.threshold:g}) | "
                    f"{check.upper:.2f} / {check.lower:.2f}{' — ALARM' if check.alarm else ''} |")
        if report.change_point is not None:
            rows.append(f"| change point: rows served since (the refit reads from there) | "
                        f"{report.change_point.isoformat()} |")
    warning = report.early_warning
    if warning is not None and warning.n:
        rows.append(f"| predicted accuracy, {warning.n} served rows ({warning.confidence_level:.0%} interval) | "
                    f"{_fmt(warning.predicted_accuracy)}"
                    f"{_interval(warning.predicted_accuracy_low, warning.predicted_accuracy_high)} |")
        if warning.tested:
            rows.append(f"| confidence distribution vs reference (χ² p) | {_fmt_p(warning.p_value)}"
                        f"{' — SHIFTED ' + warning.direction if warning.shifted else ''} |")
    return rows


def _group_fired(temperature: bool, ece: bool, collapsed: bool) -> str:
    tests = (("output collapsed", collapsed), ("T", temperature), ("ECE", ece))
    return "yes (" + " and ".join(name for name, fired in tests if fired) + ")"


def _tests_table(report: DriftReport) -> list[str]:
    """One row per test on the whole window: what it compares, its statistic, p-value, level."""
    test = report.temperature_test
    if test is None:
        return ["not tested: too few labelled rows (see the reasons)"]
    reference = (f"reference T {test.reference_temperature:.4g} (n={test.reference_n})" if test.reference_n
                 else f"deployed T {test.temperature:.4g} (no reference sums: one-sample)")
    usual = "reference's" if report.reference_stats is not None else "1 (no reference sums)"
    collapsed = ([f"| model output collapsed | variance of z/T per row vs {COLLAPSE_SPREAD_RATIO:.0%} of the {usual} | "
                  f"{report.temperature_stats.scaled_logit_variance:.3g} | - | - | yes |"]
                 if report.output_collapsed else [])
    return [
        "| test | compares | statistic | p-value | level | fired |",
        "| --- | --- | --- | --- | --- | --- |",
        *collapsed,
        f"| temperature (margin {report.temperature_margin:.0%}) | window T {_temperature_cell(test)} vs {reference}; "
        f"ratio {test.ratio:.3f}{_interval(test.ratio_low, test.ratio_high, 3)}, {test.direction} | z = {test.z:+.2f} "
        f"(beyond the margin {test.margin_z:+.2f}) | {_fmt_p(test.p_value)} (no margin: "
        f"{_fmt_p(test.p_value_no_margin)}) | {report.test_level:g} | {'yes' if report.temperature_drift else 'no'} |",
        f"| ECE (tolerance {report.ece_tolerance:g}) | {report.ece_estimator} {_fmt(report.ece_estimate)}"
        f"{_interval(report.ece_low, report.ece_high)} vs reference {_fmt(report.baseline_ece)}"
        f"{_interval(report.baseline_ece_low, report.baseline_ece_high)} | excess {_fmt(report.ece_excess)} | "
        f"{_fmt_p(report.p_value)} | {report.test_level:g} | {'yes' if report.ece_drift else 'no'} |",
    ]


def drift_table_rows(report: DriftReport) -> list[dict[str, Any]]:
    """One JSON-safe row for the whole window and one per group, for a dashboard table.

    Columns: scope ("overall" or "group"), group, n, tested, drifted, collapsed (the outputs
    carry next to no information about T), temperature_drift,
    window_temperature, window_temperature_low, window_temperature_high, temperature_ratio,
    temperature_z, temperature_p_value, ece_drift, ece_estimate, ece_low, ece_high, ece,
    baseline_ece, ece_excess, p_value (the ECE test's), p_threshold, nll, accuracy,
    mean_confidence, coverage, accepted_accuracy (the last two for the overall row only).
    NaN is None.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> import numpy as np
    >>> from monitoring import decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t, groups=["a", "a", "b"])
    >>> [(row["scope"], row["group"], row["n"]) for row in drift_table_rows(decide_drift(s, baseline_ece=0.0))]
    [('overall', None, 3), ('group', 'a', 2), ('group', 'b', 1)]
    """
    rows: list[dict[str, Any]] = [
        {
            "scope": "overall",
            "group": None,
            "n": report.n,
            "tested": report.temperature_test is not None,
            "drifted": report.overall_drift,
            "collapsed": report.output_collapsed,
            **_temperature_columns(report.temperature_test, report.temperature_drift),
            "ece_drift": report.ece_drift,
            "ece_estimate": json_safe(report.ece_estimate),
            "ece_low": json_safe(report.ece_low),
            "ece_high": json_safe(report.ece_high),
            "ece": json_safe(report.ece),
            "baseline_ece": json_safe(report.baseline_ece),
            "ece_excess": json_safe(report.ece_excess),
            "p_value": json_safe(report.p_value),
            "p_threshold": report.test_level,
            "nll": json_safe(report.nll),
            "accuracy": json_safe(report.accuracy),
            "mean_confidence": json_safe(report.mean_confidence),
            "coverage": json_safe(report.coverage),
            "accepted_accuracy": json_safe(report.accepted_accuracy),
        }
    ]
    for g in report.groups:
        rows.append(
            {
                "scope": "group",
                "group": g.group,
                "n": g.n,
                "tested": g.tested,
                "drifted": g.drifted,
                "collapsed": g.collapsed,
                **_temperature_columns(g.temperature_test, g.temperature_drift),
                "ece_drift": g.ece_drift,
                "ece_estimate": json_safe(g.ece_estimate),
                "ece_low": json_safe(g.ece_low),
                "ece_high": json_safe(g.ece_high),
                "ece": json_safe(g.ece),
                "baseline_ece": json_safe(g.baseline_ece),
                "ece_excess": json_safe(g.ece_excess),
                "p_value": json_safe(g.p_value),
                "p_threshold": g.p_threshold,
                "nll": json_safe(g.nll),
                "accuracy": json_safe(g.accuracy),
                "mean_confidence": json_safe(g.mean_confidence),
                "coverage": None,
                "accepted_accuracy": None,
            }
        )
    return rows


def _temperature_columns(test: TemperatureTest | None, drifted: bool) -> dict[str, Any]:
    if test is None:
        return {"temperature_drift": False, "window_temperature": None, "window_temperature_low": None,
                "window_temperature_high": None, "temperature_ratio": None, "temperature_z": None,
                "temperature_p_value": None}
    return {
        "temperature_drift": drifted,
        "window_temperature": json_safe(test.window_temperature),
        "window_temperature_low": json_safe(test.window_temperature_low),
        "window_temperature_high": json_safe(test.window_temperature_high),
        "temperature_ratio": json_safe(test.ratio),
        "temperature_z": json_safe(test.z),
        "temperature_p_value": json_safe(test.p_value),
    }


# MLflow's metric keys: at most 250 characters of [A-Za-z0-9_-. /], a path that normalises to itself.
_METRIC_KEY_PLAIN = re.compile(r"[A-Za-z0-9_\-. /]+")
_READABLE_UNSAFE = re.compile(r"[^A-Za-z0-9_\-. ]")  # and no "/": a hashed key is never a path to normalise
_HASHED_KEY = re.compile(r"\.h[0-9a-f]{16}\Z")
_GROUP_KEY_PREFIXES = ("ece.group.", "temperature_z.group.")
_PLAIN_KEY_LENGTH = 120
_READABLE_LENGTH = 64


def group_metric_key(group: str) -> str:
    """The part of a group's metric keys (``ece.group.<key>``, ``temperature_z.group.<key>``)
    that names it: bounded and collision-free.

    A group name that MLflow accepts as it is (at most 120 characters of ``[A-Za-z0-9_-. /]``,
    no path that normalises to something else) is its own key, as before. Any other name gets a
    readable prefix (its first 64 characters, each other character as ``_``) and ``.h`` with 16
    hex digits of its SHA-256, so ``eu:west`` and ``eu;west`` no longer overwrite each other's
    metric, and a 255-character group no longer makes every check fail (MLflow's limit is 250
    characters). A name that looks like a hashed key is hashed too: no plain name can equal
    another group's key. The name of each key is recorded with the check
    (:class:`flows.run_records.GroupMetricKeys`).

    Examples
    --------
    >>> group_metric_key("eu-west"), group_metric_key("en/US")
    ('eu-west', 'en/US')
    >>> group_metric_key("eu:west"), group_metric_key("eu;west")
    ('eu_west.hc0a20939aed2dfe9', 'eu_west.h1583a88944c90319')
    >>> len(group_metric_key("x" * 255))
    82
    """
    full = [prefix + group for prefix in _GROUP_KEY_PREFIXES]
    if (_METRIC_KEY_PLAIN.fullmatch(group) and len(group) <= _PLAIN_KEY_LENGTH and not _HASHED_KEY.search(group)
            and all(posixpath.normpath(key) == key for key in full)):
        return group
    digest = hashlib.sha256(group.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{_READABLE_UNSAFE.sub('_', group[:_READABLE_LENGTH])}.h{digest}"


def drift_metrics(report: DriftReport) -> dict[str, float]:
    """Finite metrics of a check for a time-series store (e.g. MLflow ``log_metrics``).

    Keys: ece, ece_estimate, ece_low, ece_high, ece_excess, nll, accuracy, mean_confidence,
    brier, coverage, accepted_accuracy, p_value (the ECE test's), window_temperature,
    window_temperature_low, window_temperature_high, temperature_ratio, temperature_z,
    temperature_p_value, n, drift, temperature_drift, ece_drift, output_collapsed,
    refit_recommended (0/1 each);
    with the sequential rule cusum_upper, cusum_lower, sequential_alarm (0/1); with the early
    warning predicted_accuracy (low, high), served_n, confidence_shift_p_value,
    confidence_shifted (0/1);
    and per group ``ece.group.<key>`` and ``temperature_z.group.<key>``, the key of
    :func:`group_metric_key` (the name itself when MLflow accepts it). Undefined values (NaN)
    are left out, so a chart shows a gap rather than a fake number.

    Examples
    --------
    >>> from datetime import UTC, datetime
    >>> import numpy as np
    >>> from monitoring import decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t, groups=["a:b", "a:b", None])
    >>> metrics = drift_metrics(decide_drift(s, baseline_ece=0.0))
    >>> metrics["drift"], metrics["n"], f"ece.group.{group_metric_key('a:b')}" in metrics, "p_value" in metrics
    (0.0, 3.0, True, False)
    """
    test = report.temperature_test
    values: dict[str, float] = {
        "ece": report.ece,
        "ece_estimate": report.ece_estimate,
        "ece_low": report.ece_low,
        "ece_high": report.ece_high,
        "ece_excess": report.ece_excess,
        "nll": report.nll,
        "accuracy": report.accuracy,
        "mean_confidence": report.mean_confidence,
        "brier": report.brier,
        "coverage": report.coverage,
        "accepted_accuracy": report.accepted_accuracy,
        "p_value": report.p_value,
        "n": float(report.n),
        "drift": 1.0 if report.drift_detected else 0.0,
        "temperature_drift": 1.0 if report.temperature_drift else 0.0,
        "ece_drift": 1.0 if report.ece_drift else 0.0,
        "output_collapsed": 1.0 if report.output_collapsed else 0.0,
        "refit_recommended": 1.0 if report.refit_recommended else 0.0,
    }
    if test is not None:
        values |= {
            "window_temperature": test.window_temperature,
            "window_temperature_low": test.window_temperature_low,
            "window_temperature_high": test.window_temperature_high,
            "temperature_ratio": test.ratio,
            "temperature_z": test.z,
            "temperature_p_value": test.p_value,
        }
    if report.sequential is not None:
        values |= {"cusum_upper": report.sequential.upper, "cusum_lower": report.sequential.lower,
                   "sequential_alarm": 1.0 if report.sequential.alarm else 0.0}
    warning = report.early_warning
    if warning is not None:
        values |= {"predicted_accuracy": warning.predicted_accuracy,
                   "predicted_accuracy_low": warning.predicted_accuracy_low,
                   "predicted_accuracy_high": warning.predicted_accuracy_high,
                   "served_n": float(warning.n), "confidence_shift_p_value": warning.p_value,
                   "confidence_shifted": 1.0 if warning.shifted else 0.0}
    for g in report.groups:
        name = group_metric_key(g.group)
        values[f"ece.group.{name}"] = g.ece
        if g.temperature_test is not None:
            values[f"temperature_z.group.{name}"] = g.temperature_test.z
    return {key: float(value) for key, value in values.items() if math.isfinite(value)}


def drift_payload(report: DriftReport) -> dict[str, Any]:
    """The report as a JSON-safe dict (event payloads): numbers, reasons, groups, bins.

    Datetimes are ISO 8601 strings, NaN is None; the reliability table is a list of bins.
    ``refit_window_start`` is where a refit should start reading (the sequential rule's change
    point after its alarm, else the window's start); ``change_point`` is None without an alarm.

    Examples
    --------
    >>> import json
    >>> from datetime import UTC, datetime
    >>> import numpy as np
    >>> from monitoring import decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t)
    >>> payload = drift_payload(decide_drift(s, baseline_ece=0.0))
    >>> payload["verdict"], payload["window_start"]
    ('insufficient_data', '2026-01-01T00:00:00+00:00')
    >>> _ = json.dumps(payload, allow_nan=False)
    """
    payload: dict[str, Any] = {}
    for name in (f.name for f in fields(DriftReport)):
        if name == "reliability":
            payload[name] = report.reliability.rows()
        elif name == "groups":
            payload[name] = drift_table_rows(report)[1:]
        else:
            payload[name] = json_safe(getattr(report, name))
    payload["change_point"] = json_safe(report.change_point)
    payload["refit_window_start"] = report.refit_window_start.isoformat()
    return payload
