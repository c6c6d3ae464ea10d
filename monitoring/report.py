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
from typing import Any

from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from calibration import PriorShiftTest, ReliabilityTable, TemperatureTest, json_safe

from .drift import DriftReport
from .drift_tests import DriftTest, TestOutcome, window_level

__all__ = [
    "DRIFT_PAYLOAD_KEYS",
    "LABEL_SHIFT_PAYLOAD_KEYS",
    "drift_markdown",
    "drift_metric_names",
    "drift_metrics",
    "drift_payload",
    "drift_table_rows",
    "group_metric_key",
    "label_shift_payload",
    "prior_test_numbers",
    "reliability_figure",
]


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
    """A markdown summary of a drift check: verdict, reasons, the tests, numbers and groups.

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
    >>> from monitoring import DriftReference, decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t, model_name="m",
    ...                      model_version="1")
    >>> print(drift_markdown(decide_drift(s, DriftReference.of(0.01))).splitlines()[0])
    ## Calibration check of m version 1: insufficient_data
    """
    headline = {
        "drift": "DRIFT" + (" (refit recommended)" if report.refit_recommended else " (in cool-down: no refit)"),
        "calibrated": "calibrated (within the margin, established)",
        "undetermined": "UNDETERMINED (no drift seen, calibration not established"
                        + ("" if report.rows_to_decide is None else
                           f"; about {report.rows_to_decide:,} labelled rows would decide") + ")",
        "insufficient_data": "insufficient_data",
    }[report.verdict]
    window, reference, level = report.window, report.reference.overall, report.policy.confidence_level
    consistency = report.consistency
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
        f"| window's optimal T ({level:.0%} interval) | {_temperature_cell(report.temperature_test)} |",
        *_outcome_rows(report),
        f"| reference ECE ({reference.ece_estimator}) | {_fmt(reference.ece)}"
        f"{_interval(reference.ece_low, reference.ece_high)} |",
        f"| ECE ({window.n_bins} equal-width bins) | {_fmt(window.ece)} (plug-in: biased upward on small windows) |",
        f"| calibrated-model binned ECE, 95th percentile (consistency p "
        f"{_fmt_p(math.nan if consistency is None else consistency.p_value)}) | "
        f"{_fmt(math.nan if consistency is None else consistency.null_quantile_95)} |",
        f"| NLL (mean nats) | {_fmt(window.nll)} |",
        f"| baseline NLL | {_fmt(report.reference.nll)} |",
        f"| accuracy | {_fmt(window.accuracy)} |",
        f"| mean confidence | {_fmt(window.mean_confidence)} |",
        f"| Brier score | {_fmt(window.brier)} |",
        *(f"| {name.replace('_', ' ')} | {_fmt(value)} |" for name, value in _gate_numbers(report).items()),
        f"| group-weighted ECE | {_fmt(report.summary.group_weighted_ece)} |",
        *_stream_rows(report),
        *_diagnosis_lines(report),
    ]
    if report.groups:
        tests = report.policy.tests
        lines += [
            "",
            "### Groups",
            "",
            "| group | n | " + " | ".join(f"{test} effect | {test} p" for test in tests) + " | ECE | reference | level | "
            "drifted |",
            "| --- | --- | " + " | ".join("--- | ---" for _ in tests) + " | --- | --- | --- | --- |",
            *(
                f"| {g.group} | {g.n} | " + " | ".join(_group_cells(g.outcome(test)) for test in tests)
                + f" | {_fmt(g.ece)} | {_fmt(g.baseline_ece)} | {f'{g.level:.2g}' if g.tested else '-'} | "
                f"{_fired(g.outcomes) if g.drifted else 'no' if g.tested else 'not tested'} |"
                for g in report.groups
            ),
        ]
    return "\n".join(lines) + "\n"


def _outcome_rows(report: DriftReport) -> list[str]:
    """The Numbers table's rows of the ECE test (its estimate and excess), when it ran."""
    ece = report.outcome("ece")
    if ece is None or ece.refused is not None:
        return []
    metrics, level = ece.metrics, report.policy.confidence_level
    return [f"| ECE, {report.policy.ece_estimator} ({level:.0%} interval) | {_fmt(metrics['ece_estimate'])}"
            f"{_interval(metrics['ece_low'], metrics['ece_high'])} |",
            f"| ECE excess (tolerance {_fmt(report.policy.ece_tolerance)}) | {_fmt(metrics['ece_excess'])} |"]


def _group_cells(outcome: TestOutcome | None) -> str:
    if outcome is None:
        return "- | -"
    return f"{_fmt(outcome.effect)}{_interval(outcome.effect_low, outcome.effect_high, 3)} | {_fmt_p(outcome.p_value)}"


def _fired(outcomes: tuple[TestOutcome, ...]) -> str:
    return "yes (" + " and ".join(o.test for o in outcomes if o.fired) + ")"


def _gate_numbers(report: DriftReport) -> dict[str, float]:
    gate = report.summary.gate
    if gate is None:
        return {"gate_threshold": math.nan, "coverage": math.nan, "accepted_accuracy": math.nan}
    return {"gate_threshold": gate.threshold, "coverage": gate.coverage, "accepted_accuracy": gate.accepted_accuracy}


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
            rows.append(f"| confidence distribution vs reference (Anderson–Darling p) | {_fmt_p(warning.p_value)}"
                        f"{' — SHIFTED ' + warning.direction if warning.shifted else ''} |")
    return rows


# At most this many classes are listed in the markdown's priors table (the largest moves).
_LISTED_CLASSES = 10


def _diagnosis_lines(report: DriftReport) -> list[str]:
    """The shift diagnosis: its kind, fix and numbers, and the classes whose prior moved most."""
    diagnosis, test = report.diagnosis, report.prior_test
    if diagnosis is None:
        return []
    lines = ["", "### Shift diagnosis", "", f"**{diagnosis.kind.replace('_', ' ')}** — fix: "
             f"{diagnosis.fix.replace('_', ' ')}{'' if diagnosis.confirmed else ' (from unlabelled rows: to be confirmed)'}",
             "", *(f"- {reason}" for reason in diagnosis.reasons)]
    if test is None:
        return lines + ["- class priors: not tested (see the reasons)"]
    estimate = test.estimate
    moved = sorted(range(len(estimate.priors)), key=lambda c: -abs(estimate.priors[c] - estimate.reference_priors[c]))
    lines += ["", f"| class | reference prior | served rows' prior (EM, {test.confidence_level:.0%} interval) |",
              "| --- | --- | --- |"]
    lines += [f"| {c} | {_fmt(float(estimate.reference_priors[c]))} | {_fmt(float(estimate.priors[c]))}"
              f"{_interval(float(estimate.priors_low[c]), float(estimate.priors_high[c]))} |"
              for c in moved[:_LISTED_CLASSES]]
    if len(moved) > _LISTED_CLASSES:
        lines.append(f"| … {len(moved) - _LISTED_CLASSES} more classes | | |")
    return lines


def _tests_table(report: DriftReport) -> list[str]:
    """One row per test on the whole window: its sentence (what it compares), effect, p-value, level."""
    if not report.outcomes:
        return ["not tested: too few labelled rows (see the reasons)"]
    return [
        "| test | compares | statistic | p-value | level | fired |",
        "| --- | --- | --- | --- | --- | --- |",
        *(f"| {o.test} ({DriftTest.registry[o.test].effect_beyond(report.policy)}) | {o.compares} | {o.statistic} | "
          f"{_fmt_p(o.p_value)} | {_fmt_p(o.level)} | {'yes' if o.fired else 'no'} |" for o in report.outcomes),
    ]


def _test_columns(outcomes: tuple[TestOutcome, ...], tests: tuple[str, ...]) -> dict[str, Any]:
    """Each test's columns (its flags as booleans); a test that did not run gives None in its
    columns (its flag False)."""
    columns: dict[str, Any] = {}
    for test in tests:
        found = next((o for o in outcomes if o.test == test), None)
        for column, metric in _TEST_COLUMNS.get(test, ()):
            value = None if found is None else found.metrics.get(metric)
            columns[column] = bool(value) if metric in _FLAGS else json_safe(value)
    return columns


# The columns each test gives a table row: (column, metric of the outcome); a test without an entry gives none.
_TEST_COLUMNS: dict[str, tuple[tuple[str, str], ...]] = {
    "collapsed": (("collapsed", "output_collapsed"),),
    "temperature": tuple((name, name) for name in (
        "temperature_drift", "window_temperature", "window_temperature_low", "window_temperature_high",
        "temperature_ratio", "temperature_z", "temperature_p_value")),
    "ece": tuple((name, name) for name in ("ece_drift", "ece_estimate", "ece_low", "ece_high", "ece_excess", "p_value")),
}
_FLAGS = frozenset({"output_collapsed", "temperature_drift", "ece_drift"})


def drift_table_rows(report: DriftReport) -> list[dict[str, Any]]:
    """One JSON-safe row for the whole window and one per group, for a dashboard table.

    Columns: scope ("overall" or "group"), group, n, tested, drifted, then each test's columns
    (temperature: temperature_drift, window_temperature, window_temperature_low,
    window_temperature_high, temperature_ratio, temperature_z, temperature_p_value; ece:
    ece_drift, ece_estimate, ece_low, ece_high, ece_excess, p_value), then ece (the plug-in
    binned ECE), baseline_ece, p_threshold (the level of each of the row's tests), nll,
    accuracy, mean_confidence, coverage, accepted_accuracy (the last two for the overall row
    only). NaN is None.

    Examples
    --------
    >>> from monitoring import DriftReference, decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t, groups=["a", "a", "b"])
    >>> [(row["scope"], row["group"], row["n"]) for row in drift_table_rows(decide_drift(s, DriftReference.of(0.0)))]
    [('overall', None, 3), ('group', 'a', 2), ('group', 'b', 1)]
    """
    tests, window, gate = report.policy.tests, report.window, _gate_numbers(report)
    rows: list[dict[str, Any]] = [{
        "scope": "overall", "group": None, "n": report.n, "tested": bool(report.outcomes),
        "drifted": any(o.fired for o in report.outcomes), **_test_columns(report.outcomes, tests),
        "ece": json_safe(window.ece), "baseline_ece": json_safe(report.baseline_ece),
        "p_threshold": window_level(report.policy), "nll": json_safe(window.nll), "accuracy": json_safe(window.accuracy),
        "mean_confidence": json_safe(window.mean_confidence), "coverage": json_safe(gate["coverage"]),
        "accepted_accuracy": json_safe(gate["accepted_accuracy"]),
    }]
    rows += [{
        "scope": "group", "group": g.group, "n": g.n, "tested": g.tested, "drifted": g.drifted,
        **_test_columns(g.outcomes, tests), "ece": json_safe(g.ece), "baseline_ece": json_safe(g.baseline_ece),
        "p_threshold": g.level, "nll": json_safe(g.calibration.nll), "accuracy": json_safe(g.calibration.accuracy),
        "mean_confidence": json_safe(g.calibration.mean_confidence), "coverage": None, "accepted_accuracy": None,
    } for g in report.groups]
    return rows


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
    (:class:`flows.records.runs.GroupMetricKeys`).

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


# The metrics of drift_metrics besides the tests' own (DriftTest.metric_names) and the groups'.
_WINDOW_METRICS = ("ece", "nll", "accuracy", "mean_confidence", "brier", "coverage", "accepted_accuracy", "n", "drift",
                   "refit_recommended", "calibrated", "undetermined", "rows_to_decide")
_SEQUENTIAL_METRICS = ("cusum_upper", "cusum_lower", "sequential_alarm")
_WARNING_METRICS = ("predicted_accuracy", "predicted_accuracy_low", "predicted_accuracy_high", "served_n",
                    "confidence_shift_p_value", "confidence_shifted")
_DIAGNOSIS_METRICS = ("prior_shift_p_value", "prior_shift", "priors_moved")


def drift_metric_names() -> tuple[frozenset[str], tuple[str, ...]]:
    """What :func:`drift_metrics` may write: every name, and the prefixes of the groups' names (a
    group's metric is ``<prefix><key>``, the key of :func:`group_metric_key`).

    The names are the window's, each registered drift test's (:attr:`DriftTest.metric_names`),
    the sequential rule's, the early warning's and the shift diagnosis's.

    >>> names, prefixes = drift_metric_names()
    >>> {"ece", "p_value", "cusum_upper", "predicted_accuracy"} <= names, prefixes
    (True, ('ece.group.', 'temperature_z.group.'))
    """
    tests = {name for test in DriftTest.registry.values() for name in test.metric_names}
    return (frozenset({*_WINDOW_METRICS, *tests, *_SEQUENTIAL_METRICS, *_WARNING_METRICS, *_DIAGNOSIS_METRICS}),
            _GROUP_KEY_PREFIXES)


def drift_metrics(report: DriftReport) -> dict[str, float]:
    """Finite metrics of a check for a time-series store (e.g. MLflow ``log_metrics``).

    Keys: ece, nll, accuracy, mean_confidence, brier, coverage, accepted_accuracy, n, drift,
    refit_recommended, calibrated, undetermined (0/1), rows_to_decide (an undetermined verdict's
    labelled rows that would decide), then each window test's metrics (temperature: window_temperature,
    window_temperature_low, window_temperature_high, temperature_ratio, temperature_z,
    temperature_p_value, temperature_drift; ece: ece_estimate, ece_low, ece_high, ece_excess,
    p_value, ece_drift); with the sequential rule cusum_upper, cusum_lower, sequential_alarm
    (0/1); with the early warning predicted_accuracy (low, high), served_n,
    confidence_shift_p_value, confidence_shifted (0/1); with the shift diagnosis's prior test
    prior_shift_p_value, prior_shift (total variation) and priors_moved (0/1); and per group ``ece.group.<key>`` and
    ``temperature_z.group.<key>``, the key of :func:`group_metric_key` (the name itself when
    MLflow accepts it). Undefined values (NaN) are left out, so a chart shows a gap rather than a
    fake number.

    Examples
    --------
    >>> from monitoring import DriftReference, decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t, groups=["a:b", "a:b", None])
    >>> metrics = drift_metrics(decide_drift(s, DriftReference.of(0.0)))
    >>> metrics["drift"], metrics["n"], f"ece.group.{group_metric_key('a:b')}" in metrics, "p_value" in metrics
    (0.0, 3.0, True, False)
    """
    window, gate = report.window, _gate_numbers(report)
    values: dict[str, float] = {
        "ece": window.ece, "nll": window.nll, "accuracy": window.accuracy, "mean_confidence": window.mean_confidence,
        "brier": window.brier, "coverage": gate["coverage"], "accepted_accuracy": gate["accepted_accuracy"],
        "n": float(report.n), "drift": float(report.drift_detected), "refit_recommended": float(report.refit_recommended),
        "calibrated": float(report.verdict == "calibrated"), "undetermined": float(report.verdict == "undetermined"),
        "rows_to_decide": math.nan if report.rows_to_decide is None else float(report.rows_to_decide),
    }
    for outcome in report.outcomes:
        values |= outcome.metrics
    if report.sequential is not None:
        values |= {"cusum_upper": report.sequential.upper, "cusum_lower": report.sequential.lower,
                   "sequential_alarm": float(report.sequential.alarm)}
    warning = report.early_warning
    if warning is not None:
        values |= {"predicted_accuracy": warning.predicted_accuracy,
                   "predicted_accuracy_low": warning.predicted_accuracy_low,
                   "predicted_accuracy_high": warning.predicted_accuracy_high,
                   "served_n": float(warning.n), "confidence_shift_p_value": warning.p_value,
                   "confidence_shifted": float(warning.shifted)}
    if report.prior_test is not None:
        values |= {"prior_shift_p_value": report.prior_test.p_value, "prior_shift": report.prior_test.effect,
                   "priors_moved": float(report.prior_test.fired)}
    for g in report.groups:
        name = group_metric_key(g.group)
        values[f"ece.group.{name}"] = g.ece
        temperature = g.outcome("temperature")
        if temperature is not None:
            values[f"temperature_z.group.{name}"] = temperature.metrics["temperature_z"]
    return {key: float(value) for key, value in values.items() if math.isfinite(value)}


#: The keys of :func:`drift_payload`, in order: the flat report every consumer of the drift
#: event and of ``check/report.json`` reads (unchanged since they were first written), then the
#: outcomes of the tests and the policy the decision used.
DRIFT_PAYLOAD_KEYS: tuple[str, ...] = (
    "verdict", "rows_to_decide", "drift_detected", "refit_recommended", "in_cooldown", "cooldown_until", "reasons", "tests_fired",
    "fired",
    "model_name", "model_version", "window_start", "window_end", "checked_at", "temperature", "n_bins", "scheme", "n",
    "min_window", "overall_drift", "temperature_drift", "temperature_margin", "temperature_test", "temperature_stats",
    "reference_stats", "ece_drift", "ece_estimator", "ece_estimate", "ece_low", "ece_high", "confidence_level", "ece",
    "baseline_ece", "baseline_ece_low", "baseline_ece_high", "ece_excess", "ece_tolerance", "p_value", "p_threshold",
    "test_level", "consistency_p_value", "null_mean", "null_quantile_95", "n_resamples", "seed", "nll",
    "baseline_nll", "accuracy", "mean_confidence", "brier", "mce", "threshold", "coverage", "accepted_accuracy",
    "output_collapsed", "groups", "drifted_groups", "skipped_groups", "min_group_size", "group_weighted_ece", "served_temperatures",
    "reliability", "sequential", "early_warning", "change_point", "refit_window_start", "tests", "policy",
    "shift_kind", "shift_fix", "diagnosis", "prior_test",
)


def _fired_tests(report: DriftReport) -> list[dict[str, Any]]:
    """What fired on a check, in ``tests_fired``'s order, each ``{label, test, statistic, p_value,
    level, sentence}``: the window's and the groups' tests that fired, then the sequential rule's
    alarm (its statistic the CUSUM, no p-value). A test that did not fire is never listed.

    Examples
    --------
    >>> from monitoring import DriftReference, decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> _fired_tests(decide_drift(summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t),
    ...                          DriftReference.of(0.0)))
    []
    """
    outcomes = [o for o in report.outcomes if o.fired] + [o for g in report.groups for o in g.outcomes if o.fired]
    fired: list[dict[str, Any]] = [
        {"label": o.label, "test": o.test, "statistic": o.statistic, "p_value": json_safe(o.p_value),
         "level": json_safe(o.level), "sentence": o.sentence} for o in outcomes]
    check = report.sequential
    if check is not None and check.alarm:
        fired.append({"label": "sequential", "test": "sequential",
                      "statistic": f"CUSUM {max(check.upper, check.lower):.2f} sd (alarm at {check.threshold:g})",
                      "p_value": None, "level": None, "sentence": check.sentence()})
    return fired


def drift_payload(report: DriftReport) -> dict[str, Any]:
    """The report as a JSON-safe dict (event payloads, ``check/report.json``): :data:`DRIFT_PAYLOAD_KEYS`.

    Datetimes are ISO 8601 strings, NaN is None; the reliability table is a list of bins, the
    groups the table's group rows, ``tests`` each outcome (:meth:`TestOutcome.to_dict`), ``policy``
    the parameters, ``fired`` what fired (each test's label, statistic, p-value, level and sentence;
    never a test that did not fire). ``verdict`` is drift, calibrated (established within the margin), undetermined
    (``rows_to_decide``: the labelled rows a window would need to decide, None when no size does)
    or insufficient_data. ``refit_window_start`` is where a refit should start reading (the sequential
    rule's change point after its alarm, else the window's start); ``change_point`` is None
    without an alarm. ``shift_kind`` and ``shift_fix`` are the shift diagnosis's kind and fix,
    ``diagnosis`` all of it and ``prior_test`` the prior test's numbers (:func:`prior_test_numbers`;
    each None when the check was not diagnosed).

    Examples
    --------
    >>> import json
    >>> from monitoring import DriftReference, decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> s = summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t)
    >>> payload = drift_payload(decide_drift(s, DriftReference.of(0.0)))
    >>> payload["verdict"], payload["window_start"], tuple(payload) == DRIFT_PAYLOAD_KEYS
    ('insufficient_data', '2026-01-01T00:00:00+00:00', True)
    >>> _ = json.dumps(payload, allow_nan=False)
    """
    window, policy, reference, consistency = report.window, report.policy, report.reference.overall, report.consistency
    ece = report.outcome("ece")
    ece_metrics = {} if ece is None else ece.metrics
    gate = report.summary.gate
    values: dict[str, Any] = {
        "verdict": report.verdict, "rows_to_decide": report.rows_to_decide, "drift_detected": report.drift_detected,
        "refit_recommended": report.refit_recommended, "in_cooldown": report.in_cooldown,
        "cooldown_until": report.cooldown_until, "reasons": report.reasons, "tests_fired": report.tests_fired,
        "fired": _fired_tests(report),
        "model_name": report.model_name, "model_version": report.model_version, "window_start": report.window_start,
        "window_end": report.window_end, "checked_at": report.checked_at, "temperature": report.temperature,
        "n_bins": window.n_bins, "scheme": "equal-width", "n": report.n, "min_window": policy.min_window,
        "overall_drift": any(o.fired for o in report.outcomes),
        "temperature_drift": any(o.fired for o in report.outcomes if o.test == "temperature"),
        "temperature_margin": policy.temperature_margin, "temperature_test": report.temperature_test,
        "temperature_stats": report.summary.temperature_stats, "reference_stats": reference.temperature_stats,
        "ece_drift": ece is not None and ece.fired, "ece_estimator": policy.ece_estimator,
        "ece_estimate": ece_metrics.get("ece_estimate", math.nan), "ece_low": ece_metrics.get("ece_low", math.nan),
        "ece_high": ece_metrics.get("ece_high", math.nan), "confidence_level": policy.confidence_level,
        "ece": window.ece, "baseline_ece": reference.ece, "baseline_ece_low": reference.ece_low,
        "baseline_ece_high": reference.ece_high, "ece_excess": ece_metrics.get("ece_excess", math.nan),
        "ece_tolerance": policy.ece_tolerance, "p_value": ece_metrics.get("p_value", math.nan),
        "p_threshold": policy.p_threshold, "test_level": window_level(policy),
        "output_collapsed": any(o.fired for o in report.outcomes if o.test == "collapsed"),
        "consistency_p_value": math.nan if consistency is None else consistency.p_value,
        "null_mean": math.nan if consistency is None else consistency.null_mean,
        "null_quantile_95": math.nan if consistency is None else consistency.null_quantile_95,
        "n_resamples": policy.n_resamples, "seed": policy.seed, "nll": window.nll, "baseline_nll": report.reference.nll,
        "accuracy": window.accuracy, "mean_confidence": window.mean_confidence, "brier": window.brier,
        "mce": window.mce, "threshold": None if gate is None else gate.threshold,
        "coverage": math.nan if gate is None else gate.coverage,
        "accepted_accuracy": math.nan if gate is None else gate.accepted_accuracy,
        "groups": drift_table_rows(report)[1:], "drifted_groups": report.drifted_groups,
        "skipped_groups": tuple(g.group for g in report.groups if g.n < policy.min_group_size),
        "min_group_size": policy.min_group_size, "group_weighted_ece": report.summary.group_weighted_ece,
        "served_temperatures": report.summary.served_temperatures, "reliability": report.reliability.rows(),
        "sequential": report.sequential, "early_warning": report.early_warning, "change_point": report.change_point,
        "refit_window_start": report.refit_window_start.isoformat(),
        "tests": [outcome.to_dict() for outcome in report.outcomes], "policy": policy.to_dict(),
        "shift_kind": None if report.diagnosis is None else report.diagnosis.kind,
        "shift_fix": None if report.diagnosis is None else report.diagnosis.fix, "diagnosis": report.diagnosis,
        "prior_test": None if report.prior_test is None else prior_test_numbers(report.prior_test),
    }
    return {key: json_safe(values[key]) for key in DRIFT_PAYLOAD_KEYS}


def prior_test_numbers(test: PriorShiftTest) -> dict[str, Any]:
    """The prior test's numbers without EM's covariance (K × K): its verdict, statistic and
    effect, and EM's priors with their intervals, iterations and convergence.

    >>> from calibration import ReferencePriors, ServedPriorStats, prior_shift_test
    >>> logits = np.log([[0.8, 0.2]] * 40 + [[0.2, 0.8]] * 40)
    >>> reference = ReferencePriors.from_logits(logits, [0] * 32 + [1] * 8 + [1] * 32 + [0] * 8)
    >>> numbers = prior_test_numbers(prior_shift_test(ServedPriorStats.from_logits(logits[:50]), reference))
    >>> numbers["fired"], numbers["served_n"], numbers["em_converged"]
    (True, 50, True)
    """
    estimate = test.estimate
    return {"fired": test.fired, "p_value": test.p_value, "level": test.level, "statistic": test.statistic,
            "df": test.df, "prior_shift": test.effect, "prior_shift_low": test.effect_low,
            "prior_shift_high": test.effect_high, "served_n": test.n, "reference_n": test.reference_n,
            "confidence_level": test.confidence_level, "priors": estimate.priors,
            "reference_priors": estimate.reference_priors, "priors_low": estimate.priors_low,
            "priors_high": estimate.priors_high, "em_rows": estimate.n, "em_iterations": estimate.iterations,
            "em_converged": estimate.converged}


#: The keys of :func:`label_shift_payload`: the version and window, the diagnosis's verdict, the
#: prior test's numbers (:func:`prior_test_numbers`) and what the labelled rows said.
LABEL_SHIFT_PAYLOAD_KEYS: tuple[str, ...] = (
    "model_name", "model_version", "temperature", "window_start", "window_end", "checked_at", "shift_kind",
    "shift_fix", "confirmed", "fired", "p_value", "level", "statistic", "df", "prior_shift", "prior_shift_low",
    "prior_shift_high", "served_n", "reference_n", "confidence_level", "priors", "reference_priors", "priors_low",
    "priors_high", "em_rows", "em_iterations", "em_converged", "labelled_n", "accuracy", "tests_fired",
    "reweighted_tests_fired", "gain", "gain_z", "reasons", "undo",
)


def label_shift_payload(report: DriftReport, *, undo: bool = False) -> dict[str, Any]:
    """A check diagnosed as a label shift, as a JSON-safe dict (:data:`LABEL_SHIFT_PAYLOAD_KEYS`):
    what a prior correction of the version needs (EM's priors and the reference's, the prior
    test) and whether labelled rows confirmed it.

    ``undo``: the check of a prior-corrected version whose traffic is back at the reference's
    priors (its prior test quiet): the same keys, ``undo`` true and ``shift_fix``
    ``undo_prior_correction`` — the correction is removed.

    Raises
    ------
    ValueError
        If the report was not diagnosed as a label shift (with its prior test); with ``undo``, if
        it has no prior test or its priors moved.

    Examples
    --------
    >>> from monitoring import DriftReference, decide_drift, summarise_arrays
    >>> t = datetime(2026, 1, 1, tzinfo=UTC)
    >>> report = decide_drift(summarise_arrays(np.zeros((3, 2)), [0, 1, 0], temperature=1.0, start=t, end=t),
    ...                       DriftReference.of(0.0))
    >>> label_shift_payload(report)
    Traceback (most recent call last):
    ...
    ValueError: the check of  v was not diagnosed as a label shift (diagnosis: None)
    """
    diagnosis, test = report.diagnosis, report.prior_test
    if diagnosis is None or test is None or (test.fired if undo else diagnosis.kind != "label_shift"):
        raise ValueError(
            f"the check of {report.model_name} v{report.model_version} cannot undo a prior correction: its "
            "traffic's priors were not tested, or they moved" if undo else
            f"the check of {report.model_name} v{report.model_version} was not diagnosed as a label shift "
            f"(diagnosis: {None if diagnosis is None else diagnosis.kind})")
    values: dict[str, Any] = {
        "model_name": report.model_name, "model_version": report.model_version, "temperature": report.temperature,
        "window_start": report.window_start, "window_end": report.window_end, "checked_at": report.checked_at,
        "shift_kind": diagnosis.kind, "shift_fix": "undo_prior_correction" if undo else diagnosis.fix,
        "confirmed": diagnosis.confirmed, "undo": undo,
        **prior_test_numbers(test), "labelled_n": report.n, "accuracy": diagnosis.accuracy,
        "tests_fired": diagnosis.tests_fired, "reweighted_tests_fired": diagnosis.reweighted_tests_fired,
        "gain": diagnosis.gain, "gain_z": diagnosis.gain_z, "reasons": diagnosis.reasons,
    }
    return {key: json_safe(values[key]) for key in LABEL_SHIFT_PAYLOAD_KEYS}
