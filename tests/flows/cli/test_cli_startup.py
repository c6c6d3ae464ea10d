"""The command line answers at once: parsing the arguments (``--help``, ``--version``, a usage
error) loads neither the numeric core's scipy, pandas and numba nor MLflow or Prefect; and the
``--json`` keys that ``--help`` lists without running anything are the commands' real output.

Each check runs in a fresh interpreter, as ``thermostat`` does, so that no module imported by
another test hides an import.
"""

from __future__ import annotations

import json
import pprint
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli.main import _generated_json_keys
from flows.cli.json_keys import JSON_KEYS

ROOT = Path(__file__).resolve().parents[3]

# What parsing must not load. numpy is allowed only where a module needs it to define its types
# (the demo's dataclasses): ~0.1 s, not seconds.
HEAVY = ("scipy", "pandas", "pyarrow", "numba", "llvmlite", "mlflow", "prefect", "sklearn", "matplotlib", "dask",
         "distributed", "psycopg", "playwright")
CORE_COMMANDS = ("fit", "evaluate", "sweep", "qualify", "compare", "drift")

_PROBE = """
import json, sys
from flows.cli.main import main
status = main(sys.argv[1:])
print(json.dumps({"status": status, "modules": sorted({name.split(".")[0] for name in sys.modules})}))
"""


def _parse_in_a_fresh_interpreter(*argv: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return int(result["status"]), set(result["modules"])


@pytest.mark.parametrize(
    "argv",
    [["--help"], ["--version"], *([command, "--help"] for command in CORE_COMMANDS), ["fit"],
     ["evaluate", "data.npz", "--bins", "many"], ["demo", "--help"], ["setup-db", "--help"], ["lock", "--help"],
     ["export", "--help"], ["serve", "--help"]],
    ids=lambda argv: " ".join(argv),
)
def test_parsing_the_arguments_loads_no_heavy_module(argv: list[str]) -> None:
    status, modules = _parse_in_a_fresh_interpreter(*argv)
    assert status == (0 if "--help" in argv or "--version" in argv else 2)
    assert not modules & set(HEAVY), f"`thermostat {' '.join(argv)}` loaded {sorted(modules & set(HEAVY))}"
    if argv[0] in ("--help", "--version", *CORE_COMMANDS):
        assert "numpy" not in modules, f"`thermostat {' '.join(argv)}` loaded numpy"


def test_the_listed_json_keys_are_the_commands_output() -> None:
    generated = _generated_json_keys()
    assert generated == JSON_KEYS, (
        "a command's --json output changed: replace JSON_KEYS in flows/cli/json_keys.py with\n"
        + pprint.pformat(generated, width=120)
    )


def test_help_lists_each_commands_json_keys(capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli.main import main

    for command in CORE_COMMANDS:
        assert main([command, "--help"]) == 0
        flat = " ".join(capsys.readouterr().out.split())
        assert f"--json keys: {JSON_KEYS[command]}" in flat
