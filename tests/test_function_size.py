"""The size of a function: ruff's limits over the packages, and flows/'s 60 lines.

Ruff holds what it can say (``[tool.ruff.lint]`` in ``pyproject.toml``: pyflakes, and complexity,
branches, returns, arguments, statements), over ``calibration``, ``monitoring``, ``flows`` and
``thermostat``; :func:`test_ruff_limits_hold` runs exactly those rules, nothing else of ruff's.

Written here because ruff has no rule for it: no function in ``flows/`` over 60 lines. A function
is counted from its ``def`` line to its last line, its docstring included (its decorators not). A
longer one is split along a seam — a step, a rendering part, a helper whose name says what it
does — and a long explanation belongs in the module docstring, the function's docstring keeping
its parameters.
"""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

from ruff import find_ruff_bin

ROOT = Path(__file__).resolve().parents[1]
MAX_LINES = 60
PACKAGES = ("calibration", "monitoring", "flows", "thermostat")


def _ruff(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([find_ruff_bin(), "check", "--no-cache", "--output-format", "concise", *arguments], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)


def test_ruff_limits_hold() -> None:
    done = _ruff(*PACKAGES)
    assert done.returncode == 0, done.stdout + done.stderr


def test_ruff_limits_see_a_function_over_them(tmp_path: Path) -> None:
    """The configured limits are in force (a function over each is reported), pyflakes too (the
    unused ``os`` and ``x0``...), and no other rule is (the long line, the bare ``except``)."""
    arguments = ", ".join(f"a{i}" for i in range(14))
    statements = "".join(f"    x{i} = {i}\n" for i in range(41))
    branches = "".join(f"    if a{i}:\n        return {i}\n" for i in range(13))
    (tmp_path / "big.py").write_text(f"import os\ndef big({arguments}):\n{statements}{branches}"
                                     f"    try:\n        return {'1 + ' * 60}1\n    except:\n        return None\n")
    done = _ruff("--config", str(ROOT / "pyproject.toml"), str(tmp_path / "big.py"))
    assert done.returncode == 1
    found = {line.split(": ", 1)[1].split()[0] for line in done.stdout.splitlines() if ": " in line and "big.py" in line}
    assert found == {"F401", "F841", "C901", "PLR0911", "PLR0912", "PLR0913", "PLR0915"}, done.stdout


def long_functions(source: str, path: str, limit: int = MAX_LINES) -> list[str]:
    """Every function (methods and nested functions included) of ``source`` longer than ``limit`` lines."""
    functions = sorted((node for node in ast.walk(ast.parse(source, filename=path))
                        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))), key=lambda node: node.lineno)
    return [f"{path}:{node.lineno}: {node.name} is {lines} lines from its def to its last line; at most {limit}: "
            "split it along a seam (a step, a part, a helper named for what it does)"
            for node in functions if (lines := (node.end_lineno or node.lineno) - node.lineno + 1) > limit]


def test_no_function_in_flows_is_over_60_lines() -> None:
    files = sorted((ROOT / "flows").rglob("*.py"))
    assert files, "no modules found under flows/"
    found = [violation for path in files
             for violation in long_functions(path.read_text(), path.relative_to(ROOT).as_posix())]
    assert found == []


def test_the_size_check_reports_a_long_function_and_a_long_method() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(58))
    # short: 60 lines from its def (line 2); long: 61 (line 63); method: 63 (line 126), its inner function 2.
    source = (f"@decorated\ndef short():\n    '''Its decorator is not counted.'''\n{body}"
              f"\nasync def long():\n    '''One line too many.'''\n{body}    return x0\n"
              f"\nclass Holder:\n    def method(self):\n        def inner():\n            pass\n"
              + "".join(f"        y{i} = {i}\n" for i in range(60)))
    assert long_functions(source, "flows/example.py") == [
        "flows/example.py:63: long is 61 lines from its def to its last line; at most 60: split it along a seam "
        "(a step, a part, a helper named for what it does)",
        "flows/example.py:126: method is 63 lines from its def to its last line; at most 60: split it along a seam "
        "(a step, a part, a helper named for what it does)",
    ]


def test_the_drift_decision_stays_small() -> None:
    """``decide_drift`` is the gate, a fold over the configured tests and groups and the cool-down
    (under 80 lines, its docstring and example included); its report holds the outcomes, under 30
    fields: a new drift test is a class and a line in the policy, not a change of either."""
    import dataclasses

    from monitoring import DriftReport

    source = (ROOT / "monitoring" / "drift.py").read_text()
    assert [v for v in long_functions(source, "monitoring/drift.py", limit=79) if ": decide_drift " in v] == []
    assert len(dataclasses.fields(DriftReport)) < 30
