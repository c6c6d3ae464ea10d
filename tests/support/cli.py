"""The command line as the tests run it: in this process (``run``, ``run_json``, ``refused``)
or as the installed ``thermostat`` program (``thermostat``)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from flows.cli.main import main as thermostat_main

THERMOSTAT = Path(sys.executable).with_name("thermostat")


def run(capsys: pytest.CaptureFixture[str], *args: object,
        main: Callable[[list[str]], int] = thermostat_main) -> tuple[int, str, str]:
    """``main`` (``thermostat``'s) on ``args`` (each as ``str``) in this process: its exit status,
    stdout and stderr. Whatever the status, stderr holds no traceback."""
    code = main([str(arg) for arg in args])
    captured = capsys.readouterr()
    assert "Traceback" not in captured.err, captured.err
    return code, captured.out, captured.err


def run_json(capsys: pytest.CaptureFixture[str], *args: object, status: int = 0) -> dict[str, Any]:
    """``thermostat ARGS --json``: exits ``status``; its stdout, one JSON object."""
    code, out, err = run(capsys, *args, "--json")
    assert code == status, (code, err)
    payload = json.loads(out)
    assert isinstance(payload, dict), payload
    return payload


def refused(capsys: pytest.CaptureFixture[str], *args: object,
            main: Callable[[list[str]], int] = thermostat_main) -> str:
    """``thermostat ARGS`` refused as bad input: exit 2, nothing on stdout; its stderr."""
    code, out, err = run(capsys, *args, main=main)
    assert (code, out) == (2, ""), (code, out, err)
    return err


def thermostat(*args: object, env: Mapping[str, str] | None = None, cwd: Path | None = None,
               timeout: float = 120.0, program: Path = THERMOSTAT) -> subprocess.CompletedProcess[str]:
    """The ``thermostat`` console script (``program``) run as its own process, to its end:
    status, stdout and stderr (text), never raising on a non-zero status."""
    return subprocess.run([str(program), *(str(arg) for arg in args)], env=None if env is None else dict(env),
                          cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
