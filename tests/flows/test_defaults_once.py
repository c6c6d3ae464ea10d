"""A parameter has one default: the command line's --help, the settings, the drift policy and the
site's settings reference (generated from the settings class) say the same, and the analysis
commands honour THERMOSTAT_*."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest

from calibration import ScoredSet, write_scored_set
from flows.cli import main
from flows.cli.options import COMMAND_OPTIONS
from flows.settings import ThermostatSettings
from monitoring import DEFAULT_POLICY, policy_knobs

ROOT = Path(__file__).resolve().parents[2]
_HELP_DEFAULT = re.compile(r"\(default ([-0-9.,]+); (THERMOSTAT_[A-Z_]+) sets it\)")


def _help_defaults(command: str, capsys: pytest.CaptureFixture[str]) -> dict[str, float]:
    """Each setting option's default as ``thermostat COMMAND --help`` prints it, by variable."""
    assert main([command, "--help"]) == 0
    flat = " ".join(capsys.readouterr().out.split())
    return {variable: float(number.replace(",", "")) for number, variable in _HELP_DEFAULT.findall(flat)}


@pytest.mark.parametrize("command", sorted(COMMAND_OPTIONS))
def test_help_settings_and_policy_give_each_default_once(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    shown = _help_defaults(command, capsys)
    assert len(shown) == len(COMMAND_OPTIONS[command]), f"{command} --help shows {sorted(shown)}"
    fields = ThermostatSettings.model_fields
    policy = {knob.setting: default for _, knob, default in policy_knobs()}
    for option in COMMAND_OPTIONS[command]:
        declared = fields[option.setting].default
        assert shown[option.variable] == pytest.approx(declared), (command, option.flag)
        if option.setting in policy:
            assert policy[option.setting] == declared, f"the settings' {option.setting} is not the policy's default"


def test_every_policy_knob_is_a_setting_with_the_policys_default_and_documented() -> None:
    from docsite.reference import settings_page

    table = settings_page()
    settings = ThermostatSettings()
    for name, knob, default in policy_knobs():
        assert getattr(settings.drift, name) == default == getattr(DEFAULT_POLICY, name)
        row = re.search(rf"^\| `{knob.variable}` \| `([^`]+)` \|", table, re.M)
        assert row is not None, f"the settings reference has no row for {knob.variable}"
        written = row.group(1)
        if isinstance(default, timedelta):
            assert written == f"PT{int(default.total_seconds() // 3600)}H" if default >= timedelta(hours=1) else (
                written == f"PT{int(default.total_seconds() // 60)}M"), (knob.variable, written)
        elif isinstance(default, tuple):
            assert written == ",".join(default), (knob.variable, written)
        elif isinstance(default, str):
            assert written == default, (knob.variable, written)
        else:
            assert float(written) == pytest.approx(default), (knob.variable, written)


def test_the_analysis_commands_honour_the_settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 600)
    data = tmp_path / "set.npz"
    write_scored_set(ScoredSet.from_arrays(rng.normal(size=(600, 3)) + 2.0 * np.eye(3)[labels], labels), data)
    assert main(["evaluate", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_bins"] == 15
    monkeypatch.setenv("THERMOSTAT_N_BINS", "20")
    assert main(["evaluate", str(data), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_bins"] == 20, "THERMOSTAT_N_BINS binned the pipeline, not the CLI"
    assert main(["evaluate", str(data), "--json", "--bins", "7"]) == 0
    assert json.loads(capsys.readouterr().out)["n_bins"] == 7, "a flag given wins over the setting"
    monkeypatch.setenv("THERMOSTAT_MIN_WINDOW", "5000")
    assert main(["drift", str(data), str(data), "--temperature", "1"]) == 2
    assert "--min-window 5000" in capsys.readouterr().err
    monkeypatch.setenv("THERMOSTAT_DRIFT_P_THRESHOLD", "2")
    assert main(["drift", str(data), str(data), "--temperature", "1", "--min-window", "10"]) == 2
    assert "THERMOSTAT_DRIFT_P_THRESHOLD must be in (0, 1)" in capsys.readouterr().err
