"""One check, whoever runs it: the monitor, ``thermostat drift``/``diagnose`` and the shift study
call the same :func:`monitoring.check_version`, and on the same window against the same
reference its outcome is the same to the bit.

The window is a label shift of a calibrated model (x | y ~ N(2 e_y, I), logits 2x + log π exact
at T = 1 for the reference priors π), float32 as the prediction log stores it. ``diagnose`` builds
the reference from its REFERENCE file; the study and the monitor are given that very reference
(the monitor as the tags of a registered version), and read the window from memory and from a
real SQLite prediction log.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import flows.pipelines.monitor as monitor_flow
import monitoring
from benchmarks import shift_study
from calibration import ScoredSet, write_scored_set
from flows.records.versions import RegisteredVersion, VersionRecord, encode_reference_priors
from flows.settings import ThermostatSettings
from monitoring import (
    CheckOutcome,
    CheckReference,
    DriftReport,
    PredictionLog,
    check_version,
    drift_payload,
    log_predictions,
)
from tests.support.cli import run

REFERENCE_PRIORS = np.array([0.4, 0.3, 0.2, 0.1])


def _rows(priors: np.ndarray, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    labels = rng.choice(4, size=n, p=priors)
    x = rng.normal(size=(n, 4))
    x[np.arange(n), labels] += 2.0
    return (2.0 * x + np.log(REFERENCE_PRIORS)).astype(np.float32), labels


Call = tuple[tuple[Any, ...], dict[str, Any], CheckOutcome]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[Call]:
    """Every call of check_version from the monitor, the command line and the study, with its outcome."""
    assert monitor_flow.check_version is check_version and shift_study.check_version is check_version
    assert monitoring.check_version is check_version  # what the command line imports when it runs
    recorded: list[Call] = []

    def spy(*args: Any, **kwargs: Any) -> CheckOutcome:
        outcome = check_version(*args, **kwargs)
        recorded.append((args, kwargs, outcome))
        return outcome

    for module in (monitor_flow, shift_study, monitoring):
        monkeypatch.setattr(module, "check_version", spy)
    return recorded


def _same(report: DriftReport) -> str:
    """Every number of the report a check decides, as JSON (NaN included): not the version's
    name, its window's times or when it was checked."""
    assert report.diagnosis is not None and report.prior_test is not None and report.early_warning is not None
    payload = {key: value for key, value in drift_payload(report).items()
               if key not in ("model_name", "model_version", "window_start", "window_end", "checked_at", "refit_window_start")}
    return json.dumps([payload, report.diagnosis.to_dict(), report.prior_test.to_dict(),
                       report.early_warning.to_dict(), dataclasses.asdict(report.window)], default=str)


def _registered(reference: CheckReference) -> RegisteredVersion:
    """A version registered at T = 1 with ``reference`` (its tags, read back as the monitor reads them)."""
    stats, overall = reference.drift.overall.temperature_stats, reference.drift.overall
    assert stats is not None and reference.priors is not None and reference.profile is not None
    record = dataclasses.replace(
        VersionRecord.example(), temperature=1.0, gate_threshold=None, holdout_nll_after=None, ece_n_bins=15,
        reference_n=stats.n, reference_gradient_sum=stats.gradient_sum,
        reference_gradient_square_sum=stats.gradient_square_sum, reference_curvature_sum=stats.curvature_sum,
        reference_expected_errors=stats.expected_errors, reference_ece_estimator=overall.ece_estimator,
        reference_ece=overall.ece, reference_ece_low=overall.ece_low, reference_ece_high=overall.ece_high,
        reference_confidence_profile=reference.profile.to_json(),
        reference_prior_sums=encode_reference_priors(reference.priors))
    record = VersionRecord.from_tags(record.to_tags())
    return RegisteredVersion("digits", "3", ("champion",), record)


def _logged(tmp_path: Path, logits: np.ndarray, labels: np.ndarray) -> tuple[PredictionLog, datetime, datetime]:
    log = PredictionLog(f"sqlite:///{tmp_path / 'predictions.db'}")
    log.create()
    start = datetime(2026, 3, 1, tzinfo=UTC)
    times = [start + timedelta(seconds=i) for i in range(labels.shape[0])]
    log_predictions(log, "digits", "3", 1.0, logits, [f"w{i}" for i in range(labels.shape[0])], time=times,
                    labels=labels)
    return log, start, start + timedelta(days=1)


def test_the_monitor_the_command_line_and_the_study_run_one_check(
        calls: list[Call], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reference_logits, reference_labels = _rows(REFERENCE_PRIORS, 5_000, 10)
    window, labels = _rows(np.array([0.2, 0.2, 0.2, 0.4]), 2_000, 12)
    write_scored_set(ScoredSet.from_arrays(reference_logits, reference_labels), tmp_path / "reference.npz")
    write_scored_set(ScoredSet.from_arrays(window, labels), tmp_path / "window.npz")
    code, out, _ = run(capsys, "diagnose", tmp_path / "reference.npz", tmp_path / "window.npz", "--temperature", "1",
                       "--json")
    (_, _, cli_reference, _, cli_policy, _), _, cli = calls[-1]
    assert code == 1 and json.loads(out)["kind"] == cli.report.diagnosis.kind == "label_shift"  # type: ignore[union-attr]

    study = shift_study.Reference(temperature=1.0, drift=cli_reference.drift, priors=cli_reference.priors,
                                  profile=cli_reference.profile, accuracy=2 * cli_reference.accuracy_floor)
    shift_study.check(study, window, labels, seed=cli_policy.seed)
    studied = calls[-1][2]

    settings = ThermostatSettings(state_dir=tmp_path, min_accuracy=cli_reference.accuracy_floor)
    assert settings.drift == cli_policy
    log, start, end = _logged(tmp_path, window, labels)
    with log:
        monitor_flow.check.fn(_registered(cli_reference), source=log, log=log, start=start, end=end, live=False,
                              settings=settings)
    monitored = calls[-1][2]

    assert len(calls) == 3 and cli.report is not None and studied.report is not None and monitored.report is not None
    assert _same(cli.report) == _same(studied.report) == _same(monitored.report)
    assert monitored.scan is not None and monitored.scan.served_rows == 2_000


def test_thermostat_drift_runs_the_check_without_the_stream(
        calls: list[Call], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    reference_logits, reference_labels = _rows(REFERENCE_PRIORS, 2_000, 20)
    window, labels = _rows(REFERENCE_PRIORS, 1_000, 21)
    write_scored_set(ScoredSet.from_arrays(reference_logits, reference_labels), tmp_path / "reference.npz")
    write_scored_set(ScoredSet.from_arrays(1.5 * window, labels), tmp_path / "window.npz")
    code, out, _ = run(capsys, "drift", tmp_path / "reference.npz", tmp_path / "window.npz", "--temperature", "1",
                       "--resamples", "200", "--json")
    [(_, kwargs, outcome)] = calls
    assert code == 1 and outcome.report is not None and json.loads(out)["verdict"] == outcome.report.verdict == "drift"
    # The drift decision alone: no served scan (no early warning, no sequential rule), no diagnosis.
    assert kwargs["stream"] is None and outcome.scan is None and outcome.report.diagnosis is None
