"""The dashboard page: one HTML document rendered from a :class:`DashboardState`.

Self-contained: styles inline, charts inline SVG (:mod:`flows.dashboard.svg`), images served by
the same server, system fonts, no script. Layout for a 1280-pixel-wide screen: the alert list
first, then per model a table of its versions and its history, then per serving alias a grid of
panels — ECE over time, NLL over time, the reliability diagram of the latest window beside the
one at registration, ECE per group over time, and the temperature history.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Final
from urllib.parse import quote

from flows.dashboard.data import (
    REGISTRATION_DIAGRAM,
    WINDOW_DIAGRAM,
    AliasView,
    Check,
    DashboardState,
    ModelState,
    Thresholds,
    thresholds_of,
)
from flows.dashboard.svg import Annotation, Band, Marker, Point, Reference, Series, reliability_chart, swatch, time_chart
from flows.dashboard.text import html_text

__all__ = ["render_page"]

_STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; margin: 0;
       color: #1a1a1a; background: #fafafa; font-size: 14px; }
header { background: #1f2d3d; color: #fff; padding: 10px 20px; }
header h1 { margin: 0; font-size: 20px; }
header p { margin: 4px 0 0; font-size: 12px; color: #d6dee8; }
header a { color: #fff; }
nav { font-size: 13px; margin-top: 6px; }
nav a { margin-right: 12px; }
main { padding: 8px 20px 40px; max-width: 1260px; }
h2 { font-size: 18px; margin: 18px 0 6px; border-bottom: 2px solid #1f2d3d; }
h3 { font-size: 16px; margin: 14px 0 4px; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 13px; }
th, td { border: 1px solid #d9d9d9; padding: 3px 6px; text-align: left; vertical-align: top; }
th { background: #eef1f4; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { font-size: 12px; }
.alerts tr.alert td.kind { font-weight: 600; white-space: nowrap; }
.alerts tr[data-kind="drift"] td.kind { background: #fde2d6; }
.alerts tr[data-kind="refit_refused"] td.kind { background: #f8d0dc; }
.alerts tr[data-kind="insufficient_data"] td.kind { background: #fff1c6; }
.alerts tr[data-kind="check_failed"] td.kind { background: #e4d4f4; }
.alerts tr[data-kind="unreadable_version"] td.kind { background: #e4d4f4; }
.check-failed { color: #6a1b9a; font-weight: 600; }
.none { color: #555; font-style: italic; }
.grid { display: grid; grid-template-columns: repeat(2, minmax(0, 1fr)); gap: 10px; }
figure { margin: 0; background: #fff; border: 1px solid #d9d9d9; padding: 6px; }
figcaption { font-size: 12px; color: #333; margin-top: 4px; }
.pair { display: flex; gap: 8px; align-items: flex-start; }
.pair img { width: 760px; max-width: 100%; height: auto; border: 1px solid #eee; }
figure.reliability-pair { grid-column: 1 / -1; }
svg.chart { max-width: 100%; height: auto; font-family: inherit; }
svg .chart-title { font-size: 12px; font-weight: 600; }
svg .series-label { font-size: 11px; font-weight: 700; }
svg .annotation-label, svg .reference-label { font-size: 10px; fill: #333; }
svg text { fill: #222; }
ul.legend { list-style: none; padding: 0; margin: 4px 0 0; display: flex; flex-wrap: wrap; gap: 4px 14px;
            font-size: 12px; }
ul.legend li { display: flex; align-items: center; gap: 4px; }
.key { background: #fff; border: 1px solid #d9d9d9; padding: 6px 10px; font-size: 12px; margin-top: 8px; }
.notes { background: #fff7e0; border: 1px solid #e6c86e; padding: 6px 10px; }
"""


def _e(value: object) -> str:
    return html_text(value)


def _num(value: float | int | None, form: str = ".4f") -> str:
    if value is None:
        return "—"
    if isinstance(value, int):
        return f"{value:,}"
    return format(value, form)


def _time(moment: datetime | None) -> str:
    return "—" if moment is None else moment.strftime("%Y-%m-%d %H:%M:%S UTC")


def _run_link(run_id: str | None, url: str | None, state: DashboardState) -> str:
    if run_id is None:
        return "—"
    if url is not None:
        return f'<a class="mlflow-run" href="{_e(url)}">MLflow run {_e(run_id[:8])}</a>'
    hint = f"open with: mlflow ui --backend-store-uri {state.tracking_uri}"
    return f'<span class="mlflow-run" title="{_e(hint)}">MLflow run <code>{_e(run_id)}</code></span>'


def _prefect_link(run_id: str | None, url: str | None) -> str:
    if run_id is None:
        return '<span class="none">no Prefect flow run recorded</span>'
    if url is not None:
        return f'<a class="prefect-run" href="{_e(url)}">Prefect flow run {_e(run_id[:8])}</a>'
    return f'<span class="prefect-run">Prefect flow run <code>{_e(run_id)}</code></span>'


_KIND_LABEL = {"drift": "▲ DRIFT", "refit_refused": "✕ REFIT REFUSED", "insufficient_data": "□ NO LABELS",
               "check_failed": "✕ CHECK FAILED", "unreadable_version": "✕ NOT CHECKED"}


def _numbers(numbers: Mapping[str, float | int | str | None]) -> str:
    shown = []
    for key, value in numbers.items():
        if value is None:
            continue
        text = _num(value, ".4g") if isinstance(value, (int, float)) and not isinstance(value, bool) else str(value)
        shown.append(f"{_e(key)} = {_e(text)}")
    return ", ".join(shown)


def _alerts(state: DashboardState) -> str:
    head = (f'<section id="alerts" aria-labelledby="alerts-title"><h2 id="alerts-title">Alerts '
            f'(<span class="alert-count">{len(state.alerts)}</span> open)</h2>')
    if not state.alerts:
        return head + '<p class="none">No open alert: every serving version\'s latest check is ok or has too ' \
                      'little data for a short while, and no refit of a serving version was refused.</p></section>'
    rows = []
    for alert in state.alerts:
        rows.append(
            f'<tr class="alert" data-kind="{_e(alert.kind)}" data-model="{_e(alert.model_name)}" '
            f'data-version="{_e(alert.version)}" data-alias="{_e(alert.alias)}">'
            f'<td class="kind">{_e(_KIND_LABEL.get(alert.kind, alert.kind))}</td><td>{_e(_time(alert.at))}</td>'
            f'<td>{_e(alert.model_name)}</td><td class="num">v{_e(alert.version)}</td><td>@{_e(alert.alias)}</td>'
            f'<td class="what">{_e(alert.title)}<br><small>{_numbers(alert.numbers)}</small></td>'
            f'<td>{_run_link(alert.run_id, alert.run_url, state)}<br>'
            f'{_prefect_link(alert.prefect_flow_run_id, alert.prefect_url)}</td></tr>'
        )
    return (head + '<table class="alerts"><thead><tr><th>kind</th><th>time</th><th>model</th><th>version</th>'
            '<th>alias</th><th>what</th><th>links</th></tr></thead><tbody>' + "".join(rows) + "</tbody></table>"
            "</section>")


def _key() -> str:
    markers: Sequence[tuple[Marker, str]] = (
        ("calibrated", "check: calibrated (established)"), ("undetermined", "check: undetermined (not established)"),
        ("drift", "check: drift"), ("insufficient_data", "check: insufficient data"),
        ("registration", "registration"),
    )
    items = "".join(f"<li>{swatch(6, label=label, marker=marker, width=18)} {_e(label)}</li>" for marker, label in markers)
    return (
        '<div class="key" id="key"><strong>How to read the charts.</strong> One line per model version, each '
        "with its own dash pattern and an end label (v1, v2 …). Markers: " f'<ul class="legend">{items}'
        "<li>thin solid line: the version's registration baseline</li><li>dashed line: drift threshold (baseline "
        "+ tolerance)</li><li>shaded band: tolerance band</li><li>vertical lines: alias move (dashed), refit "
        "(dotted), refused refit (dash-dot), each with a text label</li></ul>"
        "Hover a point for its numbers; click it for its MLflow run when the MLflow UI URL is known.</div>"
    )


# The shift diagnosis of a version's latest check, in a few words (calibration.ShiftDiagnosis's kinds).
_SHIFT_WORDS: Final = {"no_change": "no change", "label_shift": "label shift (class mix moved)",
                       "calibration_drift": "calibration drift", "accuracy_collapse": "accuracy collapse",
                       "covariate_shift": "calibrated, traffic moved",
                       "undetermined": "undetermined (calibration not established)"}


def _shift_cell(model: ModelState, version: str) -> str:
    """The version's latest check's shift diagnosis, in words (— when none was diagnosed)."""
    checks = [check for check in model.checks_of(version=version) if check.verdict != "failed"]
    kind = checks[-1].shift_kind if checks else None
    if kind is None:
        return "<td>—</td>"
    return f'<td class="shift" data-kind="{_e(kind)}">{_e(_SHIFT_WORDS.get(kind, kind))}</td>'


def _version_table(model: ModelState, state: DashboardState) -> str:
    rows = []
    for index, v in enumerate(model.versions):
        interval = "" if v.temperature_low is None or v.temperature_high is None else \
            f" [{v.temperature_low:.4g}, {v.temperature_high:.4g}]"
        served = v.served
        origin = f"refit of v{v.refit_of}" if v.refit_of else "post-finetune"
        if v.registered_for_alias:
            origin += f" for @{v.registered_for_alias}"
        rows.append(
            f'<tr class="version" data-model="{_e(model.name)}" data-version="{_e(v.version)}">'
            f'<td>{swatch(index, label=f"v{v.version}")} v{_e(v.version)}</td>'
            f'<td>{_e(" ".join("@" + a for a in v.aliases) or "—")}</td>'
            f'<td class="num">{_num(v.temperature, ".4g")}{_e(interval)}</td>'
            f'<td class="num">{_num(None if served is None else served.served_temperature, ".4g")}</td>'
            f'<td class="num">{_num(v.baseline_ece)}</td><td class="num">{_num(v.baseline_nll)}</td>'
            f'<td class="num">{_num(v.gate_threshold)}</td><td>{_e(origin)}</td><td>{_e(_time(v.registered_at))}</td>'
            f'<td class="num">{"—" if served is None else f"{served.rows:,} / {served.labelled_rows:,}"}</td>'
            f'{_shift_cell(model, v.version)}<td>{_run_link(v.registration_run_id, v.registration_run_url, state)}'
            f'{"" if v.problem is None else "<br><small>" + _e(v.problem) + "</small>"}</td></tr>'
        )
    return ('<table class="versions"><thead><tr><th>version</th><th>aliases now</th><th>T [interval]</th>'
            '<th>T served (latest logged)</th><th>baseline ECE</th><th>baseline NLL</th><th>gate threshold</th>'
            '<th>origin</th><th>registered</th><th>rows / labelled (last window)</th><th>shift (latest check)</th>'
            '<th>registration</th></tr>'
            '</thead><tbody>' + "".join(rows) + "</tbody></table>")


def _history(model: ModelState, state: DashboardState) -> str:
    events: list[tuple[datetime, str, str]] = []
    for move in model.alias_moves:
        text = f"@{move.alias} → v{move.version}" + (f" (was v{move.previous_version})" if move.previous_version else "")
        events.append((move.at, "alias move", f"{text} by {move.cause}"))
    for refit in model.refits:
        if refit.status == "failed":
            text = f"refit of v{refit.parent_version} @{refit.alias} refused at {refit.step}: {refit.reason}"
            events.append((refit.at, "refit refused", text + (f" — {refit.escalation}" if refit.escalation else "")))
        else:
            events.append((refit.at, "refit", f"v{refit.parent_version} → v{refit.new_version} @{refit.alias}"))
    rows = "".join(f'<tr class="event"><td>{_e(_time(at))}</td><td>{_e(kind)}</td><td>{_e(text)}</td></tr>'
                   for at, kind, text in sorted(events))
    if not rows:
        return ""
    return ('<details class="history"><summary>History: registrations, alias moves and refits '
            f'({len(events)})</summary><table><thead><tr><th>time</th><th>what</th><th>details</th></tr></thead>'
            f'<tbody>{rows}</tbody></table></details>')


def _marker(check: Check) -> Marker:
    if check.verdict == "drift":
        return "drift"
    if check.verdict == "insufficient_data":
        return "insufficient_data"
    if check.verdict == "calibrated":
        return "calibrated"
    if check.verdict == "undetermined":
        return "undetermined"
    return "ok" if check.verdict == "ok" else "other"


def _check_title(check: Check, what: str, value: float) -> str:
    return (f"v{check.version} {check.verdict} at {_time(check.window_end)}: {what} {value:.4g}; ECE "
            f"{_num(check.ece)} (baseline {_num(check.baseline_ece)}), NLL {_num(check.nll)}, ECE test p = "
            f"{_num(check.p_value, '.3g')}, n = {check.labelled_rows}, T = {_num(check.temperature, '.4g')}"
            + (f", window T {_num(check.window_temperature, '.4g')}" if check.window_temperature is not None else "")
            + (f"; fired: {', '.join(check.tests_fired)}" if check.tests_fired else ""))


def _styles(model: ModelState) -> dict[str, int]:
    return {v.version: index for index, v in enumerate(model.versions)}


def _annotations(model: ModelState, view: AliasView) -> list[Annotation]:
    found = []
    for move in model.alias_moves:
        if move.alias == view.alias:
            found.append(Annotation(move.at, f"@{move.alias} → v{move.version} ({move.cause})", "alias-move",
                                    title=f"{move.cause}: @{move.alias} moved to v{move.version}",
                                    attrs={"data-version": move.version}))
    for refit in model.refits:
        if refit.alias != view.alias:
            continue
        if refit.status == "failed":
            found.append(Annotation(refit.at, f"refit of v{refit.parent_version} refused", "refit-refused",
                                    title=refit.reason, attrs={"data-version": refit.parent_version}))
        elif refit.new_version is not None and not any(m.version == refit.new_version for m in model.alias_moves):
            found.append(Annotation(refit.at, f"refit v{refit.parent_version} → v{refit.new_version}", "refit",
                                    attrs={"data-version": refit.new_version}))
    return found


def _spans(checks: Sequence[Check], view: AliasView) -> dict[str, tuple[datetime | None, datetime | None]]:
    """The time each version served under the alias, as seen by its checks (None: the chart's edge)."""
    spans: dict[str, tuple[datetime | None, datetime | None]] = {}
    for number in view.versions:
        own = [c.window_end for c in checks if c.version == number]
        if not own:
            continue
        first = None if number == view.versions[0] else min(own)
        last = None if number == view.version else max(own)
        spans[number] = (first, last)
    return spans


def _metric_chart(
    model: ModelState, view: AliasView, state: DashboardState, *, metric: str, label: str,
) -> str:
    checks = model.checks_of(alias=view.alias)
    styles, spans = _styles(model), _spans(checks, view)
    series, references, bands = [], [], []
    for number in view.versions:
        own = [c for c in checks if c.version == number]
        points = []
        for check in own:
            value = check.ece if metric == "ece" else check.nll
            if value is None:
                continue
            points.append(Point(check.window_end, value, _marker(check), _check_title(check, label, value),
                                check.run_url, {"data-run-id": check.run_id}))
        style = styles.get(number, 0)
        attrs = {"data-model": model.name, "data-version": number, "data-alias": view.alias, "data-metric": metric}
        series.append(Series(f"v{number}", style, tuple(points), attrs))
        info = model.version(number)
        start, end = spans.get(number, (None, None))
        baseline = None if info is None else (info.baseline_ece if metric == "ece" else info.baseline_nll)
        if baseline is None:
            continue
        references.append(Reference(baseline, f"v{number} baseline {baseline:.4f}", "baseline", style=style,
                                    start=start, end=end, attrs={"data-version": number}))
        if metric == "ece":
            for tolerance, since, until in _tolerance_spans(own, state.thresholds, start, end):
                threshold = baseline + tolerance
                bands.append(Band(baseline, threshold, f"v{number} tolerance band [{baseline:.4f}, {threshold:.4f}]",
                                  "tolerance", style=style, start=since, end=until, attrs={"data-version": number}))
                references.append(Reference(threshold, f"v{number} drift threshold {threshold:.4f}", "threshold",
                                            style=style, start=since, end=until, attrs={"data-version": number}))
    what = "ECE" if metric == "ece" else "NLL (mean, nats)"
    chart = time_chart(
        title=f"{what} per check — {model.name}@{view.alias}", y_label=what, series=series, references=references,
        bands=bands, annotations=_annotations(model, view), css_class=f"{metric}-chart",
        attrs={"data-model": model.name, "data-alias": view.alias},
    )
    legend = "".join(f"<li>{swatch(s.style, label=s.label)} {_e(s.label)} ({len(s.points)} checks)</li>"
                     for s in series)
    limits = {(t.p_threshold, t.ece_tolerance) for t in (thresholds_of(c, state.thresholds) for c in checks)}
    if len(limits) <= 1:
        level, tolerance = next(iter(limits), (state.thresholds.p_threshold, state.thresholds.ece_tolerance))
        rule = f"significant (p < {level:g}) and beyond the tolerance ({tolerance:g})"
    else:
        rule = "significant and beyond the tolerance of the policy each check recorded (the band follows it)"
    caption = (f"ECE of the window at the version's registered T; drift when the excess over the baseline is {rule}."
               if metric == "ece" else
               "Mean NLL of the window at the version's T; the thin line is the version's registration baseline.")
    return (f'<figure class="panel {metric}">{chart}<ul class="legend">{legend}</ul>'
            f"<figcaption>{_e(caption)}</figcaption></figure>")


def _tolerance_spans(
    checks: Sequence[Check], settings: Thresholds, start: datetime | None, end: datetime | None,
) -> list[tuple[float, datetime | None, datetime | None]]:
    """(tolerance, from, to) over a version's span: each run of its checks that recorded one
    tolerance, from its first check to the next run's (the span's ``start`` / ``end`` at the ends);
    ``settings``' over the whole span for a version without checks."""
    runs: list[tuple[float, datetime | None]] = []
    for check in checks:
        tolerance = thresholds_of(check, settings).ece_tolerance
        if not runs or runs[-1][0] != tolerance:
            runs.append((tolerance, check.window_end if runs else start))
    if not runs:
        return [(settings.ece_tolerance, start, end)]
    return [(tolerance, since, runs[k + 1][1] if k + 1 < len(runs) else end) for k, (tolerance, since) in enumerate(runs)]


def _reliability_panel(model: ModelState, view: AliasView) -> str:
    checks = model.checks_of(alias=view.alias)
    latest = next((c for c in reversed(checks) if c.run_id == view.latest_check_run_id), None)
    if latest is None:
        left = '<p class="none">no check of this alias yet</p>'
    elif latest.verdict == "failed":
        left = (f'<p class="check-failed" data-run-id="{_e(latest.run_id)}" data-version="{_e(latest.version)}">'
                f"latest check of v{_e(latest.version)} at {_e(_time(latest.window_end))}: check failed, no verdict"
                f"<br><small>{_e(latest.error or '')}</small></p>")
    else:
        title = f"latest window: v{latest.version}, {latest.verdict}, n = {latest.labelled_rows}, ECE {_num(latest.ece)}"
        if view.latest_reliability is not None:
            left = reliability_chart(view.latest_reliability.bins, title=title, size=330,
                                     attrs={"data-run-id": latest.run_id, "data-version": latest.version})
        else:
            left = (f'<img src="/artifacts/{quote(latest.run_id)}/{WINDOW_DIAGRAM}" alt="{_e(title)}" '
                    'width="330">')
        left += f'<br><small><a href="/artifacts/{quote(latest.run_id)}/{WINDOW_DIAGRAM}">PNG of this window</a></small>'
    if view.registration_run_id is None:
        right = '<p class="none">no registration run</p>'
    else:
        drawn = view.registration_version or view.version
        right = (f'<img class="registration-diagram" src="/artifacts/{quote(view.registration_run_id)}/'
                 f'{REGISTRATION_DIAGRAM}" alt="reliability at registration of v{_e(drawn)}: before and after '
                 f'T, on the evaluation part of the holdout">'
                 f"<br><small>at registration of v{_e(drawn)} (evaluation part of the holdout; before → "
                 "after T)" + ("" if drawn == view.version else
                               f"; v{_e(view.version)} is a prior correction of it, same checkpoint and T")
                 + "</small>")
    return (f'<figure class="panel reliability-pair"><div class="pair"><div>{left}</div><div>{right}</div></div>'
            "<figcaption>Reliability: accuracy per confidence bin (bars), mean confidence (black tick), counts in "
            "the bars; hatched bins are sparse (noise). Latest window (left) beside registration (right)."
            "</figcaption></figure>")


def _groups_panel(model: ModelState, view: AliasView) -> str:
    checks = model.checks_of(alias=view.alias)
    names = sorted({g for c in checks for g in c.groups})
    series = []
    for index, name in enumerate(names):
        points = tuple(Point(c.window_end, c.groups[name], _marker(c),
                             f"group {name}, v{c.version} {c.verdict}: ECE {c.groups[name]:.4f}", c.run_url)
                       for c in checks if name in c.groups)
        series.append(Series(name, index, points, {"data-model": model.name, "data-alias": view.alias,
                                                   "data-group": name}))
    chart = time_chart(title=f"ECE per group — {model.name}@{view.alias}", y_label="group ECE", series=series,
                       annotations=_annotations(model, view), css_class="group-chart",
                       attrs={"data-model": model.name, "data-alias": view.alias}, empty_text="no groups logged")
    legend = "".join(f"<li>{swatch(s.style, label=s.label)} group {_e(s.label)}</li>" for s in series)
    return (f'<figure class="panel groups">{chart}<ul class="legend">{legend}</ul><figcaption>Per-group ECE of each '
            "check (groups with enough labelled rows are tested on their own).</figcaption></figure>")


def _temperature_panel(model: ModelState, view: AliasView) -> str:
    checks = model.checks_of(alias=view.alias)
    styles, series, bands = _styles(model), [], []
    for number in view.versions:
        info = model.version(number)
        if info is None or info.temperature is None:
            continue
        points = [Point(info.registered_at, info.temperature, "registration",
                        f"v{number} registered with T = {info.temperature:.6g}")]
        points += [Point(c.window_end, c.temperature, _marker(c), f"v{number} checked at T = {c.temperature:.6g}")
                   for c in checks if c.version == number and c.temperature is not None]
        style = styles.get(number, 0)
        label = f"v{number} T={info.temperature:.3g}"
        series.append(Series(label, style, tuple(points), {"data-model": model.name, "data-version": number,
                                                           "data-alias": view.alias}))
        if info.temperature_low is not None and info.temperature_high is not None:
            bands.append(Band(info.temperature_low, info.temperature_high,
                              f"v{number} T interval [{info.temperature_low:.4g}, {info.temperature_high:.4g}]",
                              "interval", style=style, start=info.registered_at, end=max(p.at for p in points),
                              attrs={"data-version": number}))
    chart = time_chart(title=f"Temperature — {model.name}@{view.alias}", y_label="T", series=series, bands=bands,
                       annotations=_annotations(model, view), css_class="temperature-chart",
                       attrs={"data-model": model.name, "data-alias": view.alias}, y_floor=None,
                       empty_text="no version with a temperature")
    legend = "".join(f"<li>{swatch(s.style, label=s.label)} {_e(s.label)}</li>" for s in series)
    has_interval = any(b.kind == "interval" for b in bands)
    note = "shaded: the T interval registered with the version" if has_interval else \
        "no T interval registered with these versions"
    return (f'<figure class="panel temperature">{chart}<ul class="legend">{legend}</ul><figcaption>T of each version '
            f"that served @{_e(view.alias)}: ◇ at registration, then at each check; {note}.</figcaption></figure>")


def _alias_section(model: ModelState, view: AliasView, state: DashboardState) -> str:
    holder = model.version(view.version) if view.version is not None else None
    if holder is None:
        status = "no version holds this alias now (seen in earlier checks)"
    else:
        served = holder.served.served_temperature if holder.served is not None else None
        status = (f"version {holder.version}, T = {_num(holder.temperature, '.4g')}"
                  + ("" if served is None else f" (T served, from the prediction log: {served:.4g})"))
    anchor = f"{model.name}-{view.alias}"
    return (
        f'<section class="alias" id="{_e(anchor)}" data-model="{_e(model.name)}" data-alias="{_e(view.alias)}">'
        f"<h3>{_e(model.name)}@{_e(view.alias)} — {_e(status)}</h3><div class=\"grid\">"
        + _metric_chart(model, view, state, metric="ece", label="ECE")
        + _metric_chart(model, view, state, metric="nll", label="NLL")
        + _reliability_panel(model, view)
        + _groups_panel(model, view)
        + _temperature_panel(model, view)
        + "</div></section>"
    )


def _model_section(model: ModelState, state: DashboardState) -> str:
    aliases = ", ".join(f"@{a} → v{v}" for a, v in sorted(model.aliases.items())) or "no alias"
    return (
        f'<section class="model" id="model-{_e(model.name)}" data-model="{_e(model.name)}">'
        f"<h2>{_e(model.name)} <small>({_e(aliases)}; {len(model.checks)} checks)</small></h2>"
        + _version_table(model, state) + _history(model, state)
        + "".join(_alias_section(model, view, state) for view in model.alias_views)
        + "</section>"
    )


def _unreadable_section(model: ModelState, problem: str) -> str:
    return (f'<section class="model unreadable" id="model-{_e(model.name)}" data-model="{_e(model.name)}">'
            f'<h2>{_e(model.name)} <small>(cannot be read)</small></h2><p class="notes">{_e(problem)}</p></section>')


def _model_or_why_not(model: ModelState, state: DashboardState) -> str:
    """The model's section; one that cannot be read or drawn says why, and the page shows the others."""
    if model.problem is not None:
        return _unreadable_section(model, model.problem)
    try:
        return _model_section(model, state)
    except Exception as error:  # noqa: BLE001 - one model's record must not take the page down
        return _unreadable_section(model, f"this model cannot be shown: {type(error).__name__}: {error}")


def render_page(state: DashboardState) -> str:
    """The whole page as one HTML document (UTF-8). A model whose records cannot be read or
    drawn is shown by name with the reason; the others are drawn."""
    nav = "".join(f'<a href="#{_e(m.name)}-{_e(v.alias)}">{_e(m.name)}@{_e(v.alias)}</a>'
                  for m in state.models for v in m.alias_views)
    t = state.thresholds
    notes = "" if not state.notes else \
        '<div class="notes">' + "".join(f"<p>{_e(note)}</p>" for note in state.notes) + "</div>"
    body = "".join(_model_or_why_not(m, state) for m in state.models) or \
        '<p class="none">No registered model in this MLflow store yet.</p>'
    links = (f"MLflow UI: {_e(state.mlflow_ui_url)}" if state.mlflow_ui_url else
             "MLflow run links: set THERMOSTAT_MLFLOW_UI_URL (run ids are shown)")
    return (
        '<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        "<title>Thermostat — calibration dashboard</title>"
        '<link rel="icon" href="data:,">'
        f"<style>{_STYLE}</style></head><body>"
        "<header><h1>Thermostat — calibration dashboard</h1>"
        f"<p>Generated {_e(_time(state.generated_at))} from MLflow <code>{_e(state.tracking_uri)}</code> and the "
        f"prediction log <code>{_e(state.prediction_log_url)}</code>. Each check is drawn with the drift policy it "
        f"recorded; this dashboard's settings (for checks written before policies were recorded): drift when the ECE "
        f"is more than {t.ece_tolerance:g} above the registration baseline with p &lt; {t.p_threshold:g}; "
        f"insufficient data: fewer than {t.min_window} labelled rows (alert after {t.insufficient_data_streak} in a "
        f"row); undetermined: no drift seen, calibration not established (alert after {t.undetermined_streak} in a "
        f"row). {links}. "
        '<a href="/metrics">Prometheus metrics</a> · <a href="/api/models">/api/models</a> · '
        '<a href="/api/alerts">/api/alerts</a></p>'
        f'<nav aria-label="models and aliases"><a href="#alerts">alerts</a>{nav}</nav></header>'
        f"<main>{notes}{_alerts(state)}{_key()}{body}</main></body></html>"
    )
