"""The architecture's boundaries, held by import-linter; by hand here only what it cannot say.

The contracts are in ``pyproject.toml`` (``[tool.importlinter]``): one direction
``flows`` → ``thermostat`` → ``monitoring`` → ``calibration``; the pure packages and the
serving front door import neither MLflow nor Prefect; the packages meet at their front doors
(no private module of ``calibration``, no submodule of ``monitoring`` from outside); each room
of ``flows/`` imports only the rooms below it; no module with a flow imports another.
:func:`test_the_import_contracts_hold` runs ``lint-imports``, so ``make test`` does.

Written by hand, because import-linter cannot say it:

1. **Which modules hold a flow.** The sibling contract lists them; the list is derived here
   from the ``@flow`` decorators (a Prefect ``Flow`` object at a module's top level, public:
   a private one, such as ``_summarise_export``, is a subflow its module runs for a flow).
2. **The tests enter the packages through their front doors.** ``tests/`` is not a package
   import-linter can graph. ``tests/calibration/`` may import ``calibration``'s private
   kernels and ``tests/monitoring/`` ``monitoring``'s submodules, each its own package only.
3. **What a fresh interpreter loads.** The modules that promise to be free of MLflow (and
   Prefect, pandas or the SQL layer) do not load it when imported: a chain through a third-party
   package, a package ``__init__`` or a lazy import is seen only by importing.
4. **Every room says what it is for**, in the first line of its ``__init__`` docstring.
"""

from __future__ import annotations

import ast
import importlib
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("calibration", "monitoring", "flows", "thermostat", "benchmarks")
CONTRACTS = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def _contract(contract_id: str) -> dict[str, Any]:
    return next(contract for contract in CONTRACTS if contract["id"] == contract_id)


def _lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` on the packages under ``cwd``, with the configuration there."""
    code = "import sys; from importlinter.cli import lint_imports; sys.exit(lint_imports(no_cache=True, no_logo=True))"
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(cwd), "COLUMNS": "200"}, timeout=300)


def test_the_import_contracts_hold() -> None:
    done = _lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in done.stdout, done.stdout


def test_the_contracts_see_a_violation(tmp_path: Path) -> None:
    """The contracts are not vacuous: in a copy of the packages, each bad import breaks the contracts it should."""
    for package in PACKAGES:
        shutil.copytree(ROOT / package, tmp_path / package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    bad = {"flows/pipelines/prior_correction.py": "from flows.pipelines.refit import refit",
           "flows/records/stored.py": "from flows.registry.adapter import MlflowRegistry",
           "thermostat/log.py": "import mlflow",
           "calibration/_fit.py": "import sqlalchemy",
           "flows/dashboard/text.py": "from monitoring.window import summarise_window"}
    for path, line in bad.items():
        with (tmp_path / path).open("a") as module:
            module.write(f"\n{line}\n")
    done = _lint_imports(tmp_path)
    assert done.returncode == 1
    broken = {contract["id"] for contract in CONTRACTS if f"{contract['name']} BROKEN" in " ".join(done.stdout.split())}
    assert broken == {"sibling-flows", "rooms", "records", "pure-core", "calibration-no-sql", "monitoring-front-door"}, (
        done.stdout)


# --------------------------------------------------------------------------- 1. which modules hold a flow


def modules_with_a_flow(root: Path = ROOT) -> set[str]:
    """Every module of ``flows/`` with a public Prefect flow at its top level (imported to be sure:
    only a module that mentions ``prefect`` can define one)."""
    from prefect import Flow

    found = set()
    for path in sorted((root / "flows").rglob("*.py")):
        if "prefect" not in path.read_text():
            continue
        name = ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        module = importlib.import_module(name)
        if any(isinstance(value, Flow) and not attribute.startswith("_") and value.fn.__module__ == name
               for attribute, value in vars(module).items()):
            found.add(name)
    return found


def test_the_sibling_contract_names_every_module_with_a_flow() -> None:
    found = modules_with_a_flow()
    assert {"flows.pipelines.post_finetune", "flows.pipelines.monitor", "flows.pipelines.refit"} <= found
    assert set(_contract("sibling-flows")["modules"]) == found, (
        "pyproject.toml's sibling-flows contract must list exactly the modules with a public @flow")


# --------------------------------------------------------------------------- 2. the tests' front doors


def _imported_names(tree: ast.AST) -> list[tuple[int, str]]:
    """Every dotted name an import reaches, with its line: ``from pkg import b`` reaches ``pkg.b``.

    Relative imports stay inside their own package and are not listed. A call to
    ``importlib.import_module`` (or ``__import__``) with a literal name counts as an import.
    """
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            if "." not in node.module:  # from package import name: the name may be a module
                found.extend((node.lineno, f"{node.module}.{alias.name}") for alias in node.names if alias.name != "*")
        elif isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
            func = node.func
            called = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
            if called in {"import_module", "__import__"} and isinstance(node.args[0].value, str):
                found.append((node.lineno, node.args[0].value))
    return found


MONITORING_SUBMODULES = frozenset(
    path.stem if path.is_file() else path.name
    for path in (ROOT / "monitoring").iterdir()
    if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
)


def _bypasses_front_door(name: str) -> str | None:
    """Which package's front door ``name`` bypasses, or None for a public name."""
    package, _, rest = name.partition(".")
    first = rest.split(".")[0]
    private = first.startswith("_") and not (first.startswith("__") and first.endswith("__"))
    if package == "calibration" and private:
        return "calibration"
    if package == "monitoring" and (private or first in MONITORING_SUBMODULES):
        return "monitoring"
    return None


def front_door_violations(source: str, path: str) -> list[str]:
    """Each import in ``source`` (the test file at ``path``, relative to the repository root) that
    reaches a private module of ``calibration`` or a submodule of ``monitoring`` from outside
    that package's own tests."""
    parts = PurePosixPath(path).parts
    own = parts[1] if len(parts) > 2 and parts[1] in {"calibration", "monitoring"} else None
    return [f"{path}:{line} imports {name}; outside {package}/ use its public names (from {package} import ...), "
            f"or make what is needed public in {package}/__init__.py"
            for line, name in _imported_names(ast.parse(source, filename=path))
            if (package := _bypasses_front_door(name)) is not None and package != own]


def test_the_tests_enter_the_packages_through_their_public_names() -> None:
    files = sorted((ROOT / "tests").rglob("*.py"))
    assert len(files) > 50
    violations = [violation for path in files
                  for violation in front_door_violations(path.read_text(), path.relative_to(ROOT).as_posix())]
    assert not violations, "\n".join(violations)


def test_front_door_check_reports_a_private_import() -> None:
    """The check above is not vacuous: it fails on a deliberately bad import."""
    source = (
        "from calibration._stats import CalibrationStats\n"
        "import calibration._softmax as softmax\n"
        "from calibration import _validation\n"
        "from monitoring.window import summarise_window\n"
        "import importlib\n"
        "drift = importlib.import_module('monitoring.drift')\n"
        "from calibration import CalibrationStats, fit_temperature\n"
        "from monitoring import PredictionLog, summarise_window\n"
        "from . import sibling\n"
    )
    flows = front_door_violations(source, "tests/flows/bad.py")
    assert [v.split(" imports ")[1].split(";")[0] for v in flows] == [
        "calibration._stats",
        "calibration._softmax",
        "calibration._validation",
        "monitoring.window",
        "monitoring.drift",
    ], flows
    assert flows[0].startswith("tests/flows/bad.py:1 imports calibration._stats; outside calibration/ use its public")
    # A package's own unit tests may reach inside that package, and only that one.
    assert [v.split(" imports ")[1].split(";")[0] for v in front_door_violations(source, "tests/calibration/t.py")] == [
        "monitoring.window",
        "monitoring.drift",
    ]
    assert len(front_door_violations(source, "tests/monitoring/t.py")) == 3
    assert front_door_violations("from calibration import fit_temperature\nfrom monitoring import decide_drift\n",
                                 "tests/integration/good.py") == []  # fmt: skip


# --------------------------------------------------------------------------- 3. what a fresh interpreter loads


def _loaded_after_import(module: str, heavy: tuple[str, ...]) -> list[str]:
    """Which of ``heavy`` a fresh interpreter has loaded after ``import module``."""
    code = f"import sys, {module}; print(' '.join(m for m in {heavy!r} if m in sys.modules))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    return done.stdout.split()


@pytest.mark.parametrize(
    ("module", "forbidden"),
    [
        ("calibration", ("mlflow", "prefect", "sqlalchemy")),
        ("monitoring", ("mlflow", "prefect")),
        # The drift decision and the window summary read the source they are given: no SQL layer.
        ("monitoring.drift", ("sqlalchemy",)),
        ("monitoring.window", ("sqlalchemy",)),
        ("flows.pipelines.steps", ("mlflow", "prefect")),
        ("flows.records.versions", ("mlflow", "prefect")),
        ("flows.records.runs", ("mlflow", "prefect")),
        ("flows.records.situations", ("mlflow", "prefect")),
        # The ingestion service and its command: no Prefect or MLflow at start-up.
        ("flows.ingest", ("mlflow", "prefect", "pandas")),
        ("flows.web", ("mlflow", "prefect", "sqlalchemy")),
        # The serving front door: what a model server imports; not the pipeline, nor pandas.
        ("thermostat.log", ("mlflow", "prefect", "flows", "pandas", "scipy", "matplotlib")),
    ],
)
def test_modules_that_promise_no_mlflow_do_not_load_it(module: str, forbidden: tuple[str, ...]) -> None:
    assert _loaded_after_import(module, forbidden) == []


def test_the_probe_sees_what_a_module_loads() -> None:
    """The probe above is not vacuous: a module that does import MLflow (or the SQL layer) is seen doing it."""
    assert _loaded_after_import("flows.registry.checkpoint", ("mlflow",)) == ["mlflow"]
    assert _loaded_after_import("monitoring.prediction_log", ("sqlalchemy",)) == ["sqlalchemy"]


# --------------------------------------------------------------------------- 4. every room says what it is for


def test_every_room_says_what_it_is_for() -> None:
    layers = _contract("rooms")["layers"]
    rooms = [room.strip() for layer in layers for room in layer.split("|")]
    assert {"pipelines", "records", "registry", "orchestration", "cli", "dashboard", "ingest"} <= set(rooms)
    for room in (name for name in rooms if (ROOT / "flows" / name).is_dir()):
        doc = ast.get_docstring(ast.parse((ROOT / "flows" / room / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()[0]) > 20, f"flows/{room}/__init__.py must open with its purpose"
