"""The command line answers at once: parsing the arguments (``--help``, ``--version``, a usage
error) loads neither the numeric core's scipy, pandas and numba nor MLflow or Prefect; and the
``--json`` keys that ``--help`` lists without running anything are the commands' real output.

Each check runs in a fresh interpreter, as ``thermostat`` does, so that no module imported by
another test hides an import.
"""

from __future__ import annotations

import json
import pprint
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from calibration import ScoredSet, json_safe
from flows.cli import commands
from flows.json_keys import JSON_KEYS, model_keys
from flows.cli.main import COMMANDS

ROOT = Path(__file__).resolve().parents[3]

# What parsing must not load. numpy is allowed only where a module needs it to define its types
# (the demo's dataclasses): ~0.1 s, not seconds.
HEAVY = ("scipy", "pandas", "pyarrow", "numba", "llvmlite", "mlflow", "prefect", "sklearn", "matplotlib", "dask",
         "distributed", "psycopg", "playwright")
CORE_COMMANDS = ("fit", "evaluate", "sweep", "qualify", "compare", "drift", "diagnose")

_PROBE = """
import json, sys
from flows.cli.main import main
status = main(sys.argv[1:])
print(json.dumps({"status": status, "modules": sorted(sys.modules)}))
"""


def _parse_in_a_fresh_interpreter(*argv: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return int(result["status"]), set(result["modules"])


def _packages(modules: set[str]) -> set[str]:
    return {name.split(".")[0] for name in modules}


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], *([command, "--help"] for command in CORE_COMMANDS), ["fit"],
     ["evaluate", "data.npz", "--bins", "many"], ["demo", "--help"], ["setup-db", "--help"], ["lock", "--help"],
     ["export", "--help"], ["serve", "--help"], ["alerts", "install", "--help"], ["prune", "--help"],
     ["log", "--help"], ["labels", "attach", "--help"]],
    ids=lambda argv: " ".join(argv),
)
def test_parsing_the_arguments_loads_no_heavy_module(argv: list[str]) -> None:
    status, modules = _parse_in_a_fresh_interpreter(*argv)
    packages = _packages(modules)
    assert status == (0 if "--help" in argv or "--version" in argv else 2)
    assert not packages & set(HEAVY), f"`thermostat {' '.join(argv)}` loaded {sorted(packages & set(HEAVY))}"
    if argv[0] in ("--help", "--version", *CORE_COMMANDS):
        assert "numpy" not in packages, f"`thermostat {' '.join(argv)}` loaded numpy"
    if argv[:2] == ["lock", "--help"]:  # the lock command's help: not the lease's SQLAlchemy nor the settings
        assert not packages & {"sqlalchemy", "pydantic_settings"}, sorted(packages & {"sqlalchemy", "pydantic_settings"})
    if argv[0] in ("--help", "--version"):  # the list comes from the table: no command's module is imported
        tables = {target.split(":")[0] for target, _ in COMMANDS.values()} - {"flows.cli.main"}
        assert not modules & tables, f"`thermostat {argv[0]}` imported {sorted(modules & tables)}"


# Example arguments per command for the generated --json key lists; a later variant lists the
# keys it adds ("with --by-group also ...").
_EXAMPLES: dict[str, tuple[tuple[str, ...], ...]] = {
    "fit": (("DATA",), ("DATA", "--priors", "0.2,0.3,0.5")),
    "evaluate": (("DATA",), ("DATA", "--by-group"), ("DATA", "--estimator", "all"),
                 ("DATA", "--priors", "0.2,0.3,0.5", "--reference-priors", "1,1,1")),
    "sweep": (("DATA", "--temperature", "1", "--target-accuracy", "0.5"),),
    "qualify": (("DATA",),),
    "compare": (("FIT_DATA", "EVAL_DATA", "--resamples", "20"),),
    "drift": (("REFERENCE", "WINDOW", "--temperature", "1", "--min-window", "10", "--resamples", "100", "--groups",
               "--min-group-size", "10", "--estimator", "debiased_l1"),),
    "diagnose": (("REFERENCE", "WINDOW", "--temperature", "1", "--min-window", "10", "--resamples", "100"),),
}


def _example_set() -> ScoredSet:
    n = 120  # diagnose tests the class priors from 100 served rows (the monitor's prior_min_rows)
    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, n)
    logits = rng.normal(size=(n, 3)) + 2.0 * np.eye(3)[labels]
    return ScoredSet.from_arrays(logits, labels, ids=[f"example-{i}" for i in range(n)],
                                 groups=np.where(np.arange(n) % 2 == 0, "a", "b"))


def _describe(payload: Mapping[str, Any]) -> str:
    """The keys of a JSON object, nested objects and lists of objects shown with theirs."""
    parts = []
    for key, value in payload.items():
        if isinstance(value, Mapping):
            parts.append(f"{key} {{{_describe(value)}}}")
        elif isinstance(value, list) and value and isinstance(value[0], Mapping):
            parts.append(f"{key} [{{{_describe(value[0])}}}]")
        else:
            parts.append(key)
    return ", ".join(parts)


def _json_keys(name: str) -> str:
    """The command's --json keys, from its own output on the small example (never written out)."""
    command: commands.Analysis = getattr(commands, name)
    example, described, seen = _example_set(), [], set[str]()
    for argv in _EXAMPLES[name]:
        args = command.arguments(command.make_context(name, list(argv)).params)
        args.progress = commands.Progress()
        sets = {read: example for read in command.reads if getattr(args, read, None) is not None}
        assert command.callback is not None
        payload = json_safe(command.callback(sets, args).payload)
        added = {key: value for key, value in payload.items() if key not in seen}
        flags = " ".join(arg for arg in argv if arg.startswith("--") and arg not in _EXAMPLES[name][0])
        described.append(_describe(added) if not seen else f"with {flags} also {_describe(added)}")
        seen |= payload.keys()
    return "; ".join(described)


def _model_outputs() -> dict[str, str]:
    """The --json keys of the commands whose output is a model, from the model (with the keys the
    command puts beside it)."""
    from flows.cli.database_setup import DatabaseSetup
    from flows.ingest.payloads import IngestAnswer, LabelAnswer
    from flows.orchestration.alerts import InstallResult
    from flows.orchestration.locks import LockHolder
    from flows.pipelines.retention import PruneReport
    from monitoring import ExportResult

    return {"export": model_keys(ExportResult), "prune": model_keys(PruneReport), "setup-db": model_keys(DatabaseSetup),
            "alerts install": model_keys(InstallResult), "lock": f"action, model_name, holder {{{model_keys(LockHolder)}}}",
            "log": f"file, {model_keys(IngestAnswer)}", "labels attach": f"file, {model_keys(LabelAnswer)}"}


def test_every_analysis_command_is_in_the_table_and_has_its_one_line_help() -> None:
    analyses = {name for name, (target, _) in COMMANDS.items() if target.startswith("flows.cli.commands:")}
    assert analyses == set(_EXAMPLES) and set(JSON_KEYS) == analyses | set(_model_outputs())
    for name in analyses:
        command = getattr(commands, name)
        assert isinstance(command, commands.Analysis) and command.name == name
        assert command.help is not None and command.help.startswith(COMMANDS[name][1]), name
        assert "  " not in command.help, f"{name}'s help keeps its docstring's indentation"


def test_the_listed_json_keys_are_the_commands_output() -> None:
    generated = {name: _json_keys(name) for name in _EXAMPLES} | _model_outputs()
    assert generated == JSON_KEYS, (
        "a command's --json output changed: replace JSON_KEYS in flows/json_keys.py with\n"
        + pprint.pformat(generated, width=120)
    )


def test_a_model_commands_printed_output_has_the_listed_keys() -> None:
    """Not only model_keys against itself: real outputs, dumped as the commands print them."""
    from datetime import UTC, datetime

    from flows.cli.database_setup import DatabaseSetup, SetupStep
    from flows.orchestration.alerts import InstalledAutomation, InstallResult
    from flows.orchestration.locks import LockHolder
    from monitoring import ExportResult

    now = datetime(2026, 1, 1, tzinfo=UTC)
    printed = {
        "setup-db": DatabaseSetup(steps=(SetupStep(subject="role mlflow", action="created", detail="set"),),
                                  urls={"MLFLOW_BACKEND_STORE_URI": "postgresql://mlflow:***@db/mlflow"}).model_dump(),
        "alerts install": InstallResult(
            api_url="http://127.0.0.1:4200/api", block="custom-webhook/thermostat-alerts", block_id="1",
            block_status="saved", destination=None,
            automations=(InstalledAutomation(key="drift", name="n", event="e", id="2", status="created"),)).model_dump(),
        "export": ExportResult(directory="d", model_name="m", model_version="1", until=now, n_classes=3,
                               days_written=("2026-01-01",), days_skipped=(), rows_written=4).to_dict(),
        "lock": {"action": "show", "model_name": "m", "holder": LockHolder(
            name="thermostat-register-m", holder="h", machine="host", pid=1, description="refit", acquired_at=now,
            expires_at=now, expired=False, alive=True).to_dict()},
    }
    printed["setup-db"]["urls"] = "by variable"  # its keys are data (the variables' names), not listed
    for name, output in printed.items():
        assert _describe(json_safe(output)) == re.sub(r" \([a-z|_]+\)", "", JSON_KEYS[name]), name


def test_help_lists_each_commands_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli.main import main

    for command in CORE_COMMANDS:
        assert main([command, "--help"]) == 0
        flat = " ".join(capsys.readouterr().out.split())
        assert f"--json keys: {JSON_KEYS[command]}" in flat
