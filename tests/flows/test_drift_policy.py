"""The drift policy is declared once, as pydantic fields: the settings' drift section is those
fields, a changed copy is validated, and a refusal names the value's source and the rule."""

from __future__ import annotations

from datetime import timedelta

import pytest
from pydantic import ValidationError

from flows.settings import ThermostatSettings
from monitoring import DEFAULT_POLICY, DriftPolicy, policy_knobs


def test_the_settings_drift_section_is_the_policys_fields() -> None:
    for name, knob, default in policy_knobs():
        setting, field = ThermostatSettings.model_fields[knob.setting], DriftPolicy.model_fields[name]
        assert (setting.metadata, setting.description, setting.default) == (field.metadata, knob.help, default), name


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("THERMOSTAT_DRIFT_COOLDOWN", "-PT1H", "THERMOSTAT_DRIFT_COOLDOWN must be >= 0 seconds"),
        ("THERMOSTAT_DRIFT_TESTS", "ece,ece", "THERMOSTAT_DRIFT_TESTS must name at least one drift test, each once"),
        ("THERMOSTAT_DRIFT_ECE_ESTIMATOR", "kde", "THERMOSTAT_DRIFT_ECE_ESTIMATOR must be one of ['binned'"),
        ("THERMOSTAT_DRIFT_CUSUM_THRESHOLD", "inf", "THERMOSTAT_DRIFT_CUSUM_THRESHOLD must be finite and > 0"),
        ("THERMOSTAT_SEED", "1.5", "THERMOSTAT_SEED must be an integer >= 0; got '1.5'"),
    ],
)
def test_a_bad_variable_is_refused_naming_it_and_the_rule(monkeypatch: pytest.MonkeyPatch, variable: str, value: str,
                                                           message: str) -> None:
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValidationError) as caught:
        ThermostatSettings()
    assert message in str(caught.value)


def test_the_settings_read_the_policy_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("THERMOSTAT_DRIFT_TESTS", "ece, temperature")
    monkeypatch.setenv("THERMOSTAT_DRIFT_COOLDOWN", "PT30M")
    drift = ThermostatSettings().drift
    assert (drift.tests, drift.cooldown) == (("ece", "temperature"), timedelta(minutes=30))
    assert drift == DEFAULT_POLICY.replace(tests=("ece", "temperature"), cooldown=timedelta(minutes=30))


def test_a_changed_copy_is_validated_and_python_values_are_strict() -> None:
    assert DEFAULT_POLICY.replace(seed=3).seed == 3 and DEFAULT_POLICY.seed == 0
    with pytest.raises(ValueError, match=r"^min_window must be >= 1; got 0$"):
        DEFAULT_POLICY.replace(min_window=0)
    with pytest.raises(TypeError, match=r"^min_window must be an integer >= 1; got True$"):
        DriftPolicy(min_window=True)
    with pytest.raises(TypeError, match=r"^p_threshold must be a number in \(0, 1\)"):
        DriftPolicy(p_threshold="0.05")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="DriftPolicy has no field 'volume'"):
        DriftPolicy(volume=1)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"^--resamples must be in \[100, 1,000,000\]; got 50$"):
        DriftPolicy.from_values({"n_resamples": 50}, lambda name, knob: str(knob.flag))


def test_the_json_form_is_unchanged_and_reads_back() -> None:
    written = DEFAULT_POLICY.to_dict()
    assert list(written) == [name for name, _, _ in policy_knobs()]
    assert (written["cooldown"], written["label_settle_time"], written["tests"]) == (
        21600.0, 300.0, ["collapsed", "temperature", "ece"])
    assert DriftPolicy.from_dict(written) == DEFAULT_POLICY
    assert hash(DriftPolicy.from_dict(written)) == hash(DEFAULT_POLICY)
