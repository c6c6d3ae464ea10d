"""Credentials in settings: masked in their stored (JSON) form and in reports (issue 9, defect 6)."""

from __future__ import annotations

import dataclasses

import json
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from flows.pipelines.check_recorder import _markdown
from flows.pipelines.monitor import monitor
from flows.pipelines.refit import refit
from flows.settings import ThermostatSettings
from flows.records.versions import VersionRecord, registered_version

SECRET = "pw-Q7x"
TAGS = dataclasses.replace(
    VersionRecord.example(), temperature=1.0, gate_threshold=0.9, holdout_ece_after=0.02, holdout_nll_after=0.5
).to_tags()


def _with_credentials(password: str, ui_credentials: str) -> ThermostatSettings:
    return ThermostatSettings(
        tracking_uri=f"http://alice:{password}@mlflow.internal:5000",
        registry_uri=f"postgresql://mlflow:{password}@db.internal/mlflow",
        prediction_log_url=f"postgresql+psycopg://thermostat:{password}@db.internal/thermostat",
        mlflow_ui_url=f"https://{ui_credentials}@mlflow.example.internal/",
    )


@pytest.fixture
def credentialed() -> ThermostatSettings:
    return _with_credentials(SECRET, f"bob:{SECRET}")


def test_the_settings_json_form_masks_every_url_and_python_keeps_the_real_ones(credentialed: ThermostatSettings) -> None:
    stored = credentialed.model_dump_json()
    assert SECRET not in stored
    assert json.loads(stored)["prediction_log_url"] == "postgresql+psycopg://thermostat:***@db.internal/thermostat"
    assert credentialed.resolved_prediction_log_url().endswith(f":{SECRET}@db.internal/thermostat"), "connects for real"
    assert credentialed.resolved_tracking_uri() == f"http://alice:{SECRET}@mlflow.internal:5000"


@pytest.mark.parametrize("flow", [monitor, refit], ids=["monitor", "refit"])
def test_flow_parameters_as_prefect_stores_them_hold_no_password(flow: object, credentialed: ThermostatSettings) -> None:
    parameters = flow.serialize_parameters({"model_name": "m", "settings": credentialed})  # type: ignore[attr-defined]
    text = json.dumps(parameters)
    assert SECRET not in text and "alice:***@mlflow.internal" in text


def test_masked_settings_are_refused_with_where_the_secret_belongs(credentialed: ThermostatSettings) -> None:
    with pytest.raises(ValidationError, match=r"tracking_uri 'http://alice:\*\*\*@mlflow.internal:5000' holds a masked "
                                              r"password .*set THERMOSTAT_TRACKING_URI in the worker's environment"):
        ThermostatSettings.model_validate_json(credentialed.model_dump_json())


def test_run_links_are_masked(credentialed: ThermostatSettings) -> None:
    assert credentialed.resolved_mlflow_ui_url() == "https://bob:***@mlflow.example.internal"
    no_ui = ThermostatSettings(tracking_uri=f"https://alice:{SECRET}@mlflow.internal")
    assert no_ui.resolved_mlflow_ui_url() == "https://alice:***@mlflow.internal"


def test_the_monitor_report_names_a_database_tracking_uri_without_its_password() -> None:
    settings = ThermostatSettings(tracking_uri=f"postgresql://mlflow:{SECRET}@db.internal/mlflow")
    version = registered_version("digits", "1", TAGS, ["champion"])
    t = datetime(2026, 1, 1, tzinfo=UTC)
    markdown = _markdown(version, None, "run-1", settings.resolved_mlflow_ui_url(), None, settings, t, t)
    assert SECRET not in markdown
    assert "`mlflow ui --backend-store-uri postgresql://mlflow:***@db.internal/mlflow`" in markdown


# Generated passwords hold the characters that end a URL's parts (issue 19, item 12).
RESERVED_SECRET = "Zq/9#x?k@3:w"


@pytest.fixture
def reserved() -> ThermostatSettings:
    return _with_credentials(RESERVED_SECRET, "ghp_UiT0ken")


def test_passwords_with_reserved_characters_and_tokens_are_masked_in_the_stored_form(
    reserved: ThermostatSettings,
) -> None:
    stored = reserved.model_dump_json()
    assert RESERVED_SECRET not in stored and "ghp_UiT0ken" not in stored
    for fragment in RESERVED_SECRET.replace("/", " ").replace("#", " ").replace("?", " ").replace("@", " ").split():
        assert f":{fragment}" not in stored and f"{fragment}@" not in stored
    assert json.loads(stored)["prediction_log_url"] == "postgresql+psycopg://thermostat:***@db.internal/thermostat"
    assert json.loads(stored)["mlflow_ui_url"] == "https://***@mlflow.example.internal/"
    assert reserved.resolved_prediction_log_url().endswith(f":{RESERVED_SECRET}@db.internal/thermostat")


@pytest.mark.parametrize("flow", [monitor, refit], ids=["monitor", "refit"])
def test_flow_parameters_hold_no_password_with_reserved_characters(flow: object, reserved: ThermostatSettings) -> None:
    parameters = flow.serialize_parameters({"model_name": "m", "settings": reserved})  # type: ignore[attr-defined]
    text = json.dumps(parameters)
    assert RESERVED_SECRET not in text and "alice:***@mlflow.internal" in text


@pytest.mark.parametrize("field", ["tracking_uri", "registry_uri", "prediction_log_url", "mlflow_ui_url"])
def test_the_masked_form_of_a_reserved_password_or_token_is_refused(field: str, reserved: ThermostatSettings) -> None:
    stored = json.loads(reserved.model_dump_json())
    with pytest.raises(ValidationError, match=rf"{field} .* holds a masked password"):
        ThermostatSettings(**{field: stored[field]})


def test_the_settings_repr_masks_every_password(credentialed: ThermostatSettings, reserved: ThermostatSettings) -> None:
    """repr() and str() are what a debug line or a traceback's locals print."""
    from urllib.parse import quote

    for settings, secrets in ((credentialed, [SECRET]), (reserved, [RESERVED_SECRET, quote(RESERVED_SECRET, safe=""),
                                                                    "ghp_UiT0ken"])):
        shown = repr(settings) + str(settings)
        assert not [secret for secret in secrets if secret in shown], shown
        assert "tracking_uri='http://alice:***@mlflow.internal:5000'" in shown
        assert settings.tracking_uri is not None and "***" not in settings.tracking_uri  # Python keeps the real one


def test_an_error_that_quotes_a_url_or_a_piece_of_its_password_is_redacted_in_place() -> None:
    """What leaves a flow or the MLflow adapter: same type and traceback, no secret in any form,
    also in the errors it came from, also a piece a parser cut the URL at ("Invalid port: ...")."""
    import traceback
    from urllib.parse import quote

    from monitoring import credentials_redacted

    password = "Pr3f/9#x?k@3:w"
    encoded, piece = quote(password, safe=""), "Pr3f"
    reserved = _with_credentials(encoded, "ghp_UiT0ken")
    with pytest.raises(RuntimeError) as caught:
        with credentials_redacted(*reserved.urls()):
            try:
                raise ValueError(f"Invalid port: {piece!r}")
            except ValueError as cause:
                raise RuntimeError(f"API request to http://alice:{encoded}@mlflow.internal:5000/api failed") from cause
    printed = "".join(traceback.format_exception(caught.value))
    assert password not in printed and encoded not in printed and repr(piece) not in printed, printed
    assert "http://alice:***@mlflow.internal:5000/api" in printed and "Invalid port: '***'" in printed


def test_the_mlflow_adapter_quotes_no_password_when_mlflow_is_unreachable(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """MLflow's REST client quotes the request's URL, credentials included: its errors leave the
    adapter (and its retry warnings) without them, in any form."""
    import logging
    from urllib.parse import quote

    import flows.registry.adapter as adapter
    from flows.registry.adapter import MlflowRegistry
    from tests.support.ports import free_port

    password = "Pr3f/9#x?k@3:w"
    monkeypatch.setattr(adapter.retry_transient, "__kwdefaults__", {"attempts": 2, "delays": (0.0,)})
    for name, value in ThermostatSettings(mlflow_http_max_retries=0).mlflow_http_environment().items():
        monkeypatch.setenv(name, value)
    registry = MlflowRegistry(f"http://alice:{quote(password, safe='')}@127.0.0.1:{free_port()}")
    with caplog.at_level(logging.WARNING, logger="thermostat"), pytest.raises(Exception) as caught:
        registry.get_version("digits", "1")
    shown = str(caught.value) + caplog.text
    assert "http://alice:***@127.0.0.1:" in shown and "attempt 1 of 2" in caplog.text
    assert not [form for form in (password, quote(password, safe=""), "Pr3f") if form in shown], shown
