"""The calibrated pyfunc's arithmetic, the checkpoint digest, and the settings class."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pydantic import ValidationError

from calibration import calibrated_probabilities
from flows.registry.checkpoint import detect_output, digest_directory
from flows.registry.model import calibrated_frame
from flows.settings import ThermostatSettings


def test_calibrated_frame_is_softmax_of_logits_over_temperature() -> None:
    logits = np.random.default_rng(0).normal(scale=20.0, size=(50, 5))
    frame = calibrated_frame(logits, 2.5, 0.8)
    probabilities = frame[[f"prob_{k}" for k in range(5)]].to_numpy()
    np.testing.assert_allclose(probabilities, calibrated_probabilities(logits, temperature=2.5), rtol=0, atol=1e-15)
    assert frame["class"].tolist() == logits.argmax(axis=1).tolist()
    np.testing.assert_array_equal(frame["confidence"], probabilities.max(axis=1))
    assert set(frame["decision"]) <= {"auto", "review"}
    assert (frame["decision"] == "auto").tolist() == (frame["confidence"] >= 0.8).tolist()


def test_no_threshold_sends_everything_to_review() -> None:
    assert set(calibrated_frame(np.eye(3) * 10, 1.0, None)["decision"]) == {"review"}


def test_digest_names_files_and_contents(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "w.bin").write_bytes(b"weights")
    (tmp_path / "MLmodel").write_text("flavors: {}")
    first = digest_directory(tmp_path)
    assert first == digest_directory(tmp_path)
    (tmp_path / "a" / "w.bin").write_bytes(b"weightz")
    assert digest_directory(tmp_path) != first


def test_output_kind_is_detected_on_the_whole_holdout() -> None:
    assert detect_output(np.array([[0.2, 0.8], [0.5, 0.5]])) == "probabilities"
    assert detect_output(np.array([[-0.2, 1.2], [0.5, 0.5]])) == "logits"


def test_settings_read_the_thermostat_prefix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("THERMOSTAT_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("THERMOSTAT_GATE_TARGET_ACCURACY", "0.9")
    settings = ThermostatSettings()
    assert settings.gate_target_accuracy == 0.9
    assert settings.resolved_tracking_uri() == f"sqlite:///{tmp_path.absolute() / 'mlflow.db'}"
    assert settings.resolved_registry_uri() == settings.resolved_tracking_uri()
    assert settings.bounds == (0.05, 20.0)
    assert (settings.min_total, settings.min_per_class, settings.max_tv_distance) == (300, 30, 0.15)


def test_settings_refuse_bounds_that_exclude_one() -> None:
    with pytest.raises(ValidationError, match="must enclose T = 1"):
        ThermostatSettings(bounds_lower=1.5)


@pytest.mark.parametrize(("field", "value"), [("gate_target_accuracy", 1.0), ("seed", -1), ("calibration_fraction", 1.0)])
def test_settings_refuse_values_the_core_would_refuse_later(field: str, value: float) -> None:
    """Refused when read, naming the field: not after acceptance and a fit, blaming the data."""
    # The drift section's settings (seed among them) are named by their environment variable.
    with pytest.raises(ValidationError, match=rf"{field}|THERMOSTAT_{field.upper()}"):
        ThermostatSettings(**{field: value})
