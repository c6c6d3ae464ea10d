"""The dashboard's alerts, charts, page and metrics on hand-made records (no MLflow, no server)."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from flows.dashboard.data import (
    AliasMove,
    AliasView,
    Check,
    drift_text,
    DashboardState,
    ModelState,
    Refit,
    Thresholds,
    VersionInfo,
    alerts_for,
)
from flows.dashboard.metrics import exposition
from flows.dashboard.page import render_page
from flows.dashboard.svg import Point, Series, time_chart

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
THRESHOLDS = Thresholds(ece_tolerance=0.02, p_threshold=0.01, min_window=500, insufficient_data_streak=3)


def _version(number: str, aliases: tuple[str, ...], temperature: float, *, refit_of: str | None = None,
             model: str = "digits", streak: int = 0) -> VersionInfo:
    return VersionInfo(
        model_name=model, version=number, aliases=aliases, registered_at=T0 + timedelta(minutes=int(number)),
        temperature=temperature, temperature_low=None if number != "3" else temperature * 0.9,
        temperature_high=None if number != "3" else temperature * 1.1, baseline_ece=0.02, baseline_nll=0.2,
        gate_threshold=0.9, registered_for_alias=aliases[0] if aliases else "champion", previous_alias_version=refit_of,
        refit_of=refit_of, registration_run_id=f"reg{number}", registration_run_url=None, served=None, problem=None,
        insufficient_streak=streak,
    )


def _check(version: str, alias: str, minutes: int, verdict: str, ece: float = 0.03, *,
           model: str = "digits", groups: dict[str, float] | None = None) -> Check:
    return Check(
        run_id=f"run-{model}-{version}-{minutes}", model_name=model, version=version, aliases=(alias,),
        verdict=verdict, window_start=T0 + timedelta(minutes=minutes - 5), window_end=T0 + timedelta(minutes=minutes),
        ece=ece, nll=0.3, p_value=0.001 if verdict == "drift" else 0.5, drift=verdict == "drift",
        refit_recommended=verdict == "drift", baseline_ece=0.02, ece_excess=ece - 0.02,
        labelled_rows=100 if verdict == "insufficient_data" else 1200, accuracy=0.9, temperature=2.0,
        groups=groups or {}, prefect_flow_run_id="flow-1", run_url=None, prefect_url=None, predicted_accuracy=0.88,
        cusum=7.5 if verdict == "drift" else 1.25,
    )


def _model(checks: list[Check], refits: list[Refit] | None = None, *, name: str = "digits",
           streak: int = 0) -> ModelState:
    """The model; ``streak``: v3's insufficient-data streak as the monitor keeps it."""
    versions = (_version("1", (), 2.0, model=name), _version("2", ("challenger",), 1.05, model=name),
                _version("3", ("champion",), 4.7, refit_of="1", model=name, streak=streak))
    return ModelState(
        name=name, aliases={"champion": "3", "challenger": "2"}, versions=versions, checks=tuple(checks),
        refits=tuple(refits or ()),
        alias_moves=(AliasMove(T0 + timedelta(minutes=3), name, "champion", "3", "1", "refit"),),
        alias_views=(AliasView("champion", "3", ("1", "3"), checks[-1].run_id if checks else None, None, "reg3"),
                     AliasView("challenger", "2", ("2",), None, None, "reg2")),
    )


def _refused(at_minutes: int, version: str = "2", alias: str = "challenger") -> Refit:
    return Refit(at=T0 + timedelta(minutes=at_minutes), model_name="digits", parent_version=version, alias=alias,
                 status="failed", new_version=None, step="acceptance", reason="accuracy 0.30 below the floor 0.50",
                 escalation="needs retraining or a data fix", metrics={"temperature": 1.05}, run_id="refit-run",
                 run_url=None, prefect_flow_run_id="flow-2", prefect_url=None)


STORY = [
    _check("1", "champion", 10, "ok", 0.025), _check("2", "challenger", 10, "ok", 0.02),
    _check("1", "champion", 20, "drift", 0.07), _check("2", "challenger", 20, "drift", 0.5),
    _check("3", "champion", 30, "ok", 0.03), _check("2", "challenger", 30, "drift", 0.48),
]


def _kinds(alerts: list[Any]) -> set[tuple[str, str, str]]:
    return {(a.kind, a.version, a.alias) for a in alerts}


def test_alerts_are_open_drifts_and_refusals_of_serving_versions() -> None:
    alerts = alerts_for(_model(STORY, [_refused(25)]), THRESHOLDS)
    # v1's drift was answered by a refit (v3 now holds @champion): history, not an alert.
    assert _kinds(alerts) == {("drift", "2", "challenger"), ("refit_refused", "2", "challenger")}
    refused = next(a for a in alerts if a.kind == "refit_refused")
    assert "needs retraining or a data fix" in refused.title and refused.prefect_flow_run_id == "flow-2"


def test_a_failed_latest_check_shows_check_failed_instead_of_the_last_verdict() -> None:
    failed = replace(_check("2", "challenger", 40, "failed", 0.0), ece=None, nll=None, p_value=None,
                     labelled_rows=None, error="FileNotFoundError: the prediction log sqlite:///x.db does not exist")
    model = _model([*STORY, failed])
    model = replace(model, alias_views=(model.alias_views[0],
                                        AliasView("challenger", "2", ("2",), failed.run_id, None, "reg2")))
    alerts = alerts_for(model, THRESHOLDS)
    assert _kinds(alerts) == {("check_failed", "2", "challenger")}, "not its last verdict (drift)"
    (alert,) = alerts
    assert "check failed, no verdict: FileNotFoundError: the prediction log" in alert.title
    state = _state(model)
    html = render_page(state)
    assert 'data-kind="check_failed"' in html and "CHECK FAILED" in html
    assert 'class="check-failed"' in html and "sqlite:///x.db does not exist" in html
    families = {f.name: f for f in text_string_to_metric_families(exposition(lambda: state).decode())}
    verdicts = {(s.labels["version"], s.labels["verdict"]): s.value for s in families["thermostat_verdict"].samples}
    assert verdicts[("2", "failed")] == 1.0 and verdicts[("2", "drift")] == 0.0
    assert [s.value for s in families["thermostat_drift"].samples if s.labels["version"] == "2"] == [0.0]


def test_a_refusal_followed_by_an_ok_check_is_closed() -> None:
    story = [*STORY[:-1], _check("2", "challenger", 30, "ok", 0.02)]
    assert _kinds(alerts_for(_model(story, [_refused(25)]), THRESHOLDS)) == set()


def test_an_insufficient_data_streak_alerts_from_its_threshold_on() -> None:
    quiet = [_check("3", "champion", 30 + 10 * i, "insufficient_data") for i in range(3)]
    alerts = alerts_for(_model([*STORY[:5], *quiet], streak=3), THRESHOLDS)
    assert ("insufficient_data", "3", "champion") in _kinds(alerts)
    streak = next(a for a in alerts if a.kind == "insufficient_data")
    assert streak.numbers["streak"] == 3 and streak.at == quiet[-1].window_end
    assert streak.numbers["first_at"] == quiet[0].window_end.isoformat()
    # Not a bare "insufficient data": what the served confidences predict is in the alert.
    assert streak.numbers["predicted_accuracy"] == 0.88 and "predicted from the served confidences: 0.880" in streak.title
    assert ("insufficient_data", "3", "champion") not in _kinds(alerts_for(_model([*STORY[:5], *quiet[:2]], streak=2),
                                                                            THRESHOLDS))


def test_the_streak_is_the_one_the_monitor_counted_not_a_recount_of_check_runs() -> None:
    """The monitor counts a check of a version that never logged a prediction (no MLflow run) and
    leaves a backfill out; the dashboard reads its count instead of recounting the runs it sees."""
    quiet = [_check("3", "champion", 30 + 10 * i, "insufficient_data") for i in range(2)]
    # Two runs seen, three checks counted by the monitor: the alert is open, as the automation's.
    counted = alerts_for(_model([*STORY[:5], *quiet], streak=3), THRESHOLDS)
    assert next(a for a in counted if a.kind == "insufficient_data").numbers["streak"] == 3
    # Three runs seen, but the monitor's streak is 1 (two were backfills): no alert, no event either.
    backfilled = [*quiet, _check("3", "champion", 50, "insufficient_data")]
    assert "insufficient_data" not in {a.kind for a in alerts_for(_model([*STORY[:5], *backfilled], streak=1),
                                                                    THRESHOLDS)}
    # A serving version that never logged: no check run at all, the monitor's count alerts.
    (never,) = alerts_for(_model([], streak=4), THRESHOLDS)
    assert (never.kind, never.version, never.numbers["streak"], never.run_id) == ("insufficient_data", "3", 4, None)
    assert never.at == T0 + timedelta(minutes=3) and "no labelled row" in never.title  # since its registration


def test_each_check_is_held_to_the_thresholds_of_the_policy_it_recorded() -> None:
    """The dashboard's own settings stand in only for checks written before policies were recorded."""
    recorded = Thresholds(ece_tolerance=0.1, p_threshold=0.001, min_window=50, insufficient_data_streak=2)
    drift = replace(_check("2", "challenger", 30, "drift", 0.48), thresholds=recorded)
    (alert,) = alerts_for(_model([*STORY[:5], drift]), THRESHOLDS)
    assert alert.numbers["ece_tolerance"] == 0.1 and alert.numbers["p_threshold"] == 0.001
    assert "tolerance 0.1;" in alert.title
    # The streak length and minimum window of the latest check's policy: 2 checks in a row alert.
    quiet = [replace(_check("3", "champion", 30 + 10 * i, "insufficient_data"), thresholds=recorded) for i in range(2)]
    streak = next(a for a in alerts_for(_model([*STORY[:5], *quiet], streak=2), THRESHOLDS)
                  if a.kind == "insufficient_data")
    assert streak.numbers["min_window"] == 50 and "< 50)" in streak.title
    # The chart's tolerance band follows each check's policy: two bands for v2 (0.02, then 0.1).
    html = render_page(_state(_model([*STORY[:5], drift])))
    assert html.count('v2 tolerance band') == 2 and "the band follows it" in html
    families = {f.name: f for f in text_string_to_metric_families(exposition(lambda: _state(
        _model([*STORY[:5], drift]))).decode())}
    thresholds = {s.labels["version"]: s.value for s in families["thermostat_ece_threshold"].samples}
    assert thresholds["2"] == pytest.approx(0.02 + 0.1)


def _state(model: ModelState) -> DashboardState:
    return DashboardState(
        generated_at=T0 + timedelta(hours=1), tracking_uri="sqlite:///x/mlflow.db",
        prediction_log_url="sqlite:///x/predictions.db", mlflow_ui_url=None, prefect_ui_url=None,
        thresholds=THRESHOLDS, models=(model,), alerts=tuple(alerts_for(model, THRESHOLDS)),
    )


def test_the_page_draws_one_series_per_version_and_marks_drift() -> None:
    html = render_page(_state(_model(STORY, [_refused(25)])))
    assert html.count('<g class="series" data-model="digits" data-version="1" data-alias="champion" '
                      'data-metric="ece">') == 1
    assert html.count('data-model="digits" data-version="3" data-alias="champion" data-metric="ece"') == 1
    # Drift points in the ECE charts: v1@champion once, v2@challenger twice (and in NLL, group, T charts too).
    ece_part = html.split('class="chart ece-chart"')
    assert sum(part.split("</svg>")[0].count("drift-point") for part in ece_part[1:]) == 3
    assert 'data-kind="refit_refused"' in html and "ESCALATION" in html
    assert "<script" not in html and "http://" not in html.replace("http://www.w3.org/2000/svg", "")
    assert "T interval" in html  # v3 carries temperature_low/high


def test_names_are_escaped_in_the_page_and_the_metrics() -> None:
    name = 'we"ird\\<b>\nname'
    checks = [_check("3", "champion", 30, "drift", 0.09, model=name)]
    state = _state(_model(checks, name=name))
    html = render_page(state)
    assert "<b>" not in html and "we&quot;ird" in html
    families = {f.name: f for f in text_string_to_metric_families(exposition(lambda: state).decode())}
    (sample,) = families["thermostat_ece"].samples
    assert sample.labels == {"model": name, "version": "3", "alias": "champion"} and sample.value == 0.09
    assert [s.value for s in families["thermostat_drift"].samples] == [1.0]
    verdicts = {s.labels["verdict"]: s.value for s in families["thermostat_verdict"].samples}
    assert verdicts == {"calibrated": 0.0, "undetermined": 0.0, "drift": 1.0, "insufficient_data": 0.0, "failed": 0.0,
                        "ok": 0.0}
    temperatures = {s.labels["version"]: s.value for s in families["thermostat_temperature"].samples}
    assert temperatures == {"2": 1.05, "3": 4.7}  # the versions an alias points at, checked or not
    assert families["thermostat_temperature_low"].samples[0].value == 4.7 * 0.9
    assert [s.value for s in families["thermostat_predicted_accuracy"].samples] == [0.88]
    assert [s.value for s in families["thermostat_cusum"].samples] == [7.5]
    assert {s.labels["kind"]: s.value for s in families["thermostat_open_alerts"].samples} == {
        "drift": 1.0, "label_shift": 0.0, "refit_refused": 0.0, "insufficient_data": 0.0, "undetermined": 0.0,
        "check_failed": 0.0, "unreadable_version": 0.0}
    last = families["thermostat_last_check_timestamp_seconds"].samples[0].value
    assert last == (T0 + timedelta(minutes=30)).timestamp()


def test_metrics_say_down_when_the_store_cannot_be_read() -> None:
    families = list(text_string_to_metric_families(exposition(lambda: None).decode()))
    assert [(f.name, f.samples[0].value) for f in families] == [("thermostat_dashboard_up", 0.0)]


def test_a_chart_without_points_says_so() -> None:
    svg = time_chart(title="ECE", y_label="ECE", series=[Series("v1", 0, ())], empty_text="no checks yet")
    assert "no checks yet" in svg and "<path" not in svg
    one = time_chart(title="T", y_label="T", series=[Series("v1", 0, (Point(T0, 2.0, "registration"),))],
                     y_floor=None)
    assert 'class="point registration-point"' in one and "v1" in one


def test_the_command_refuses_a_missing_store_without_creating_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli.main import main

    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path / "nothing-here"))
    assert main(["dashboard", "--port", "1"]) == 2
    assert "no MLflow store at" in capsys.readouterr().err
    assert not (tmp_path / "nothing-here").exists()
    assert main(["dashboard", "--port", "70000"]) == 2


# --------------------------------------------------------------------------- issue 19, items 15 and 16


@pytest.mark.parametrize("refresh", ["nan", "NaN", "inf", "-inf", "0", "-1", "1e9", "86401", "ten", ""])
def test_refresh_must_be_a_sane_number_of_seconds(refresh: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    """``--refresh nan`` made every comparison with the cache's age false: 503 for ever."""
    from flows.cli.main import main

    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path / "nothing-here"))
    assert main(["dashboard", f"--refresh={refresh}"]) == 2
    err = capsys.readouterr().err
    assert "'--refresh': must be a number of seconds, more than 0 and at most 86400" in err
    assert "Traceback" not in err


@pytest.mark.parametrize("name", ["evil example", "a/b", "-x", "x..y", ""])
def test_allow_host_takes_host_names_only(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli.main import main

    assert main(["dashboard", f"--allow-host={name}"]) == 2
    assert "'--allow-host': " in capsys.readouterr().err


def test_invisible_characters_in_names_are_spelled_out_in_the_page_and_its_charts() -> None:
    name = "bidi\u202egnp.exe\x1b[31m\u200b"
    checks = [_check("3", "champion", 30, "drift", 0.09, model=name, groups={"eu\u2066west": 0.05})]
    html = render_page(_state(_model(checks, name=name)))
    assert not any(c in html for c in "\u202e\x1b\u200b\u2066")
    assert html.count("bidi\\u202egnp.exe\\x1b[31m\\u200b") >= 5  # heading, nav, charts' titles and attributes
    assert "eu\\u2066west" in html


def test_a_model_that_cannot_be_read_is_named_and_the_others_drawn() -> None:
    broken = ModelState.unreadable("it's \"odd\"", "cannot be quoted in a search filter")
    readable = _state(_model(STORY))
    state = dataclasses.replace(readable, models=(broken, *readable.models))
    html = render_page(state)
    assert 'class="model unreadable"' in html and "cannot be quoted in a search filter" in html
    assert html.count('class="chart ece-chart"') == 2, "the readable model is drawn"
    families = {f.name: f for f in text_string_to_metric_families(exposition(lambda: state).decode())}
    assert {s.labels["model"] for s in families["thermostat_open_alerts"].samples} == {"digits"}


def test_the_version_card_shows_its_latest_checks_shift_diagnosis_and_a_label_shift_alerts() -> None:
    label_shift = replace(_check("3", "champion", 40, "drift", 0.05), shift_kind="label_shift", refit_recommended=False)
    drift = replace(_check("2", "challenger", 40, "drift", 0.48), shift_kind="calibration_drift")
    model = _model([*STORY, label_shift, drift])
    html = render_page(_state(model))
    rows = {number: row for number, row in re.findall(
        r'<tr class="version" data-model="digits" data-version="(\d)">(.*?)</tr>', html)}
    assert '<td class="shift" data-kind="label_shift">label shift (class mix moved)</td>' in rows["3"]
    assert '<td class="shift" data-kind="calibration_drift">calibration drift</td>' in rows["2"]
    assert 'class="shift"' not in rows["1"]  # its checks were never diagnosed
    assert "<th>shift (latest check)</th>" in html
    alerts = alerts_for(model, THRESHOLDS)
    # v3's latest check saw the tests fire but diagnosed a label shift: its alert is the label shift's, not drift's.
    assert {kind for kind in _kinds(alerts) if kind[1] == "3"} == {("label_shift", "3", "champion")}
    (shifted,) = [a for a in alerts if a.kind == "label_shift"]
    assert shifted.title.startswith("label shift: the class mix of the traffic moved")


def test_the_drift_alert_names_what_fired_with_the_window_t_and_never_a_quiet_test() -> None:
    """The dashboard said "calibration drift: ECE 0.0571 vs baseline 0.0172 … p = 0.0238" when only
    the temperature test had fired: it names the test that fired, its statistic and p-value, and T."""
    only_t = replace(_check("2", "champion", 30, "drift", 0.0571), p_value=0.0238, tests_fired=("temperature",),
                     window_temperature=1.391, window_temperature_low=1.3, window_temperature_high=1.49,
                     temperature_z=4.1, temperature_p_value=0.0004)
    text = drift_text(only_t, THRESHOLDS)
    assert text.startswith("fired: temperature (z = +4.10, p = 0.0004)")
    assert "window T 1.391 [1.3, 1.49] vs the registered T 2" in text
    assert "ECE" not in text and "0.0238" not in text
    both = drift_text(replace(only_t, tests_fired=("temperature", "ece", "sequential")), THRESHOLDS)
    assert "ece (ECE 0.0571 vs baseline 0.0200" in both and "p = 0.0238" in both and "sequential (CUSUM 7.50 sd)" in both
    page = render_page(_state(_model([only_t])))
    assert "fired: temperature (z = +4.10" in page and "p = 0.0238" not in page


def test_a_run_of_undetermined_checks_is_an_alert_of_its_own_and_its_own_marker() -> None:
    recorded = Thresholds(ece_tolerance=0.02, p_threshold=0.01, min_window=500, insufficient_data_streak=3,
                          undetermined_streak=3)
    quiet = [replace(_check("3", "champion", 10 * i, "undetermined"), thresholds=recorded, rows_to_decide=9_000,
                     window_temperature=2.1, window_temperature_low=1.9, window_temperature_high=2.3)
             for i in (1, 2, 3)]
    assert [a.kind for a in alerts_for(_model(quiet[:2]), THRESHOLDS)] == []
    (alert,) = alerts_for(_model(quiet), THRESHOLDS)
    assert alert.kind == "undetermined" and "3 or more checks in a row saw no drift" in alert.title
    assert "window T 2.1 [1.9, 2.3] vs the registered T 2" in alert.title and "about 9,000 labelled rows" in alert.title
    assert alerts_for(_model([*quiet, replace(quiet[-1], verdict="calibrated")]), THRESHOLDS) == []
    page = render_page(_state(_model(quiet)))
    assert 'data-verdict="undetermined"' in page and "check: undetermined (not established)" in page
