"""The prior correction on the embedded stack (SQLite MLflow, a SQLite prediction log, the Prefect
test API): register -> correct-priors with one class at 40 % -> the alias serves a new version of
the same checkpoint and T whose probabilities are the re-weighted ones (to 1e-12, through
``mlflow.pyfunc.load_model`` of the registered version) -> undo -> the uncorrected ones again."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration import PriorCorrection, prior_corrected_log_probabilities
from flows.cli.demo import digits_traffic
from flows.pipelines.prior_correction import CorrectionFailed, correct_priors
from flows.pipelines.tasks import open_prediction_log
from flows.records.corrections import CorrectionProvenance
from flows.records.versions import VersionRecord
from flows.registry.adapter import MlflowRegistry
from flows.settings import ThermostatSettings
from monitoring import log_predictions
from tests.integration.conftest import Registered

pytestmark = pytest.mark.integration

SHIFTED_CLASS = 3
PRIORS = [0.6 / 9] * 3 + [0.4] + [0.6 / 9] * 6
REFERENCE = [0.1] * 10


@pytest.fixture
def settings(registered: Registered, tmp_path: Path) -> ThermostatSettings:
    shutil.copyfile(registered.db, tmp_path / "mlflow.db")
    return ThermostatSettings(state_dir=tmp_path, bootstrap_resamples=300)


def _traffic(registered: Registered, share: float | None, n: int, seed: int) -> tuple[Any, Any]:
    """Holdout digits (features, labels); with ``share``, resampled so that one class is that share."""
    features, labels = digits_traffic(registered.template.split, 4 * n, np.random.default_rng(seed))
    if share is None:
        return features[:n], labels[:n]
    weights = np.where(labels == SHIFTED_CLASS, share / np.mean(labels == SHIFTED_CLASS),
                       (1 - share) / np.mean(labels != SHIFTED_CLASS))
    rows = np.random.default_rng(seed + 1).choice(labels.shape[0], size=n, replace=True, p=weights / weights.sum())
    return features[rows], labels[rows]


def _log(settings: ThermostatSettings, model: Any, features: Any, labels: Any, *, tag: str, version: str
         ) -> tuple[datetime, datetime]:
    """Log labelled traffic served by ``version`` (raw logits, as the serving wrapper does)."""
    start = datetime.now(UTC) - timedelta(minutes=30)
    n = len(labels)
    calibrated = model.unwrap_python_model()
    with open_prediction_log(settings) as log:
        log_predictions(log, "digits", version, calibrated.temperature, calibrated.raw_logits(features),
                        [f"{tag}-{i}" for i in range(n)],
                        time=[start + timedelta(seconds=60 * i / n) for i in range(n)], labels=np.asarray(labels))
    return start, start + timedelta(minutes=1)


def _load(registry: MlflowRegistry, version: str, tmp: Path) -> Any:
    """The registered version through mlflow.pyfunc.load_model of its downloaded files."""
    return registry.load_version_model("digits", version, tmp / f"v{version}")


def _probabilities(model: Any, features: Any) -> Any:
    return model.predict(features)[[f"prob_{k}" for k in range(10)]].to_numpy()


def test_correct_priors_serves_the_reweighted_posteriors_and_undo_serves_the_uncorrected_again(
    registered: Registered, settings: ThermostatSettings, tmp_path: Path
) -> None:
    registry = MlflowRegistry.from_settings(settings)
    parent = _load(registry, "1", tmp_path)
    temperature = parent.unwrap_python_model().temperature
    features, labels = _traffic(registered, 0.4, 1200, seed=11)
    start, end = _log(settings, parent, features, labels, tag="shifted", version="1")

    outcome = correct_priors(model_name="digits", priors=PRIORS, reference_priors=REFERENCE, window_start=start,
                             window_end=end, settings=settings, shift_event_id="e-1")
    assert outcome.status == "registered", outcome.reason
    assert outcome.verification is not None and outcome.verification.confirmed
    assert outcome.verification.bootstrap is not None and outcome.verification.bootstrap.verdict == "improved"
    assert registry.alias_holder("digits", "champion").version == outcome.new_version == "2"
    tags = dict(registry.get_version("digits", "2").tags)
    record = VersionRecord.from_tags(tags)
    first = VersionRecord.from_tags(dict(registry.get_version("digits", "1").tags))
    assert record.temperature == first.temperature and record.checkpoint_digest == first.checkpoint_digest
    assert record.prior_correction == PriorCorrection(PRIORS, REFERENCE)
    assert CorrectionProvenance.from_tags(tags) == CorrectionProvenance("1", "labelled traffic", True, 600, "e-1")

    corrected = _load(registry, "2", tmp_path)
    raw = corrected.unwrap_python_model().raw_logits(features)
    served = _probabilities(corrected, features)
    expected = np.exp(prior_corrected_log_probabilities(raw, temperature=temperature, priors=PRIORS,
                                                        reference_priors=REFERENCE))
    np.testing.assert_allclose(served, expected, rtol=0, atol=1e-12)
    uncorrected = _probabilities(parent, features)
    assert np.abs(served - uncorrected).max() > 0.05

    # The same call again: the parent is no longer served, so nothing is registered.
    again = correct_priors(model_name="digits", model_version="1", priors=PRIORS, reference_priors=REFERENCE,
                           window_start=start, window_end=end, settings=settings)
    assert again.status == "skipped" and registry.alias_holder("digits", "champion").version == "2"
    same = correct_priors(model_name="digits", priors=PRIORS, window_start=start, window_end=end, settings=settings)
    assert same.status == "unchanged"  # version 2 already serves it (its reference priors reused)

    # The mix goes back: undo registers a version without the correction.
    back_features, back_labels = _traffic(registered, None, 1200, seed=12)
    start, end = _log(settings, corrected, back_features, back_labels, tag="back", version="2")
    undone = correct_priors(model_name="digits", undo=True, window_start=start, window_end=end, settings=settings)
    assert undone.status == "registered" and undone.new_version == "3", undone.reason
    assert registry.alias_holder("digits", "champion").version == "3"
    tags = dict(registry.get_version("digits", "3").tags)
    assert VersionRecord.from_tags(tags).prior_correction is None and "prior_correction" not in tags
    assert CorrectionProvenance.from_tags(tags) == CorrectionProvenance("2", "undo", True, 600, None)
    np.testing.assert_allclose(_probabilities(_load(registry, "3", tmp_path), features), uncorrected, rtol=0,
                               atol=1e-12)


def test_a_correction_from_unlabelled_traffic_is_registered_unconfirmed_with_the_parents_gate(
    registered: Registered, settings: ThermostatSettings
) -> None:
    registry = MlflowRegistry.from_settings(settings)
    outcome = correct_priors(model_name="digits", priors=PRIORS, reference_priors=REFERENCE, settings=settings)
    assert outcome.status == "registered" and outcome.verification is not None, outcome.reason
    assert not outcome.verification.confirmed and "unlabelled traffic" in outcome.verification.summary
    tags = dict(registry.get_version("digits", "2").tags)
    assert tags["thermostat.prior_correction.confirmed"] == "false"
    first = VersionRecord.from_tags(dict(registry.get_version("digits", "1").tags))
    assert VersionRecord.from_tags(tags).gate_threshold == first.gate_threshold


def test_a_correction_labelled_traffic_contradicts_registers_nothing(
    registered: Registered, settings: ThermostatSettings, tmp_path: Path
) -> None:
    registry = MlflowRegistry.from_settings(settings)
    parent = _load(registry, "1", tmp_path)
    features, labels = _traffic(registered, None, 1200, seed=13)  # the mix did not move
    start, end = _log(settings, parent, features, labels, tag="same", version="1")
    with pytest.raises(CorrectionFailed, match="does not verify"):
        correct_priors(model_name="digits", priors=PRIORS, reference_priors=REFERENCE, window_start=start,
                       window_end=end, settings=settings)
    assert registry.alias_holder("digits", "champion").version == "1"
    assert [v.version for v in registry.versions("digits")] == ["1"]


def test_bad_priors_are_refused_by_name_before_anything_is_written(settings: ThermostatSettings) -> None:
    with pytest.raises(ValueError, match=r"priors\[2\] is -0.1"):
        correct_priors(model_name="digits", priors=[0.5, 0.6] + [-0.1] * 8, reference_priors=REFERENCE,
                       settings=settings)
    with pytest.raises(ValueError, match="priors is required"):
        correct_priors(model_name="digits", settings=settings)
