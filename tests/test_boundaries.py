"""The architecture's boundaries, enforced by tests rather than by review.

1. One direction of dependency: ``calibration`` imports neither ``monitoring``, ``flows``,
   MLflow, Prefect nor SQLAlchemy; ``monitoring`` imports neither ``flows``, MLflow nor Prefect.
2. Packages meet at their front doors. Outside ``calibration/``, nothing imports a private
   module of ``calibration`` (``calibration._stats``, or ``from calibration import _stats``);
   outside ``monitoring/``, nothing imports a submodule of ``monitoring`` (``monitoring.window``)
   or a private name: ``from calibration import X`` and ``from monitoring import Y`` only.
   The packages' own unit tests are the exception, each for its own package only:
   ``tests/calibration/`` may import ``calibration``'s private kernels, ``tests/monitoring/``
   may import ``monitoring``'s submodules. ``benchmarks/__main__.py`` and
   ``benchmarks/kernels.py`` measure ``calibration``'s private kernels themselves (passes per
   fit, partitioned sums; a pass against the memory floor, another revision's kernels swapped
   in) and are the only other files allowed to import them.
3. The modules that promise to be free of MLflow (and Prefect) are: importing them in a fresh
   interpreter does not load it. The drift decision and the window summary do not load the
   prediction log's SQL layer through their own imports.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path, PurePosixPath

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "calibration": {"mlflow", "prefect", "flows", "monitoring", "sqlalchemy"},
    "monitoring": {"mlflow", "prefect", "flows"},
}
# Where the public-entry-point rule is checked: every Python file of the project.
SCANNED = ("calibration", "monitoring", "flows", "benchmarks", "tests")
# Submodules of monitoring: importing one from outside bypasses ``monitoring.__all__``.
MONITORING_SUBMODULES = frozenset(
    path.stem if path.is_file() else path.name
    for path in (ROOT / "monitoring").iterdir()
    if (path.suffix == ".py" and path.stem != "__init__") or (path / "__init__.py").is_file()
)
# White-box measurements of calibration's private kernels (see the module docstring).
PRIVATE_CALIBRATION_ALLOWED = frozenset({PurePosixPath("benchmarks/__main__.py"), PurePosixPath("benchmarks/kernels.py")})


def _imported_top_levels(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_does_not_import_forbidden(package: str) -> None:
    files = sorted((ROOT / package).rglob("*.py"))
    assert files, f"no modules found under {package}/"
    offenders = {
        f"{path.relative_to(ROOT)} imports {name}"
        for path in files
        for name in _imported_top_levels(path) & FORBIDDEN[package]
    }
    assert not offenders, sorted(offenders)


def test_boundary_check_sees_a_violation(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text("import mlflow.pyfunc\nfrom prefect import flow\n")
    assert {"mlflow", "prefect"} <= _imported_top_levels(bad)


# --------------------------------------------------------------------------- public entry points


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


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _bypasses_front_door(name: str) -> str | None:
    """Which package's front door ``name`` bypasses, or None for a public name."""
    package, _, rest = name.partition(".")
    if not rest:
        return None
    first = rest.split(".")[0]
    if package == "calibration" and _private(first):
        return "calibration"
    if package == "monitoring" and (_private(first) or first in MONITORING_SUBMODULES):
        return "monitoring"
    return None


def _own_packages(path: PurePosixPath) -> set[str]:
    """The packages whose insides the file at ``path`` (relative to the root) may import."""
    top = path.parts[:2] if path.parts[0] == "tests" else path.parts[:1]
    owner = top[-1] if top and top[-1] in {"calibration", "monitoring"} else None
    allowed = {owner} if owner else set()
    if path in PRIVATE_CALIBRATION_ALLOWED:
        allowed.add("calibration")
    return allowed


def front_door_violations(source: str, path: str) -> list[str]:
    """Each import in ``source`` (the file at ``path``, relative to the repository root) that
    reaches a private module of ``calibration`` or a submodule of ``monitoring`` from outside."""
    relative = PurePosixPath(path)
    allowed = _own_packages(relative)
    violations = []
    for line, name in _imported_names(ast.parse(source, filename=path)):
        package = _bypasses_front_door(name)
        if package is not None and package not in allowed:
            violations.append(
                f"{path}:{line} imports {name}; outside {package}/ use its public names "
                f"(from {package} import ...), or make what is needed public in {package}/__init__.py"
            )
    return violations


def test_packages_are_entered_through_their_public_names() -> None:
    files = sorted(path for folder in SCANNED for path in (ROOT / folder).rglob("*.py"))
    assert len(files) > 50
    violations = [
        violation
        for path in files
        for violation in front_door_violations(path.read_text(), path.relative_to(ROOT).as_posix())
    ]
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
    flows = front_door_violations(source, "flows/bad.py")
    assert [v.split(" imports ")[1].split(";")[0] for v in flows] == [
        "calibration._stats",
        "calibration._softmax",
        "calibration._validation",
        "monitoring.window",
        "monitoring.drift",
    ], flows
    assert flows[0].startswith("flows/bad.py:1 imports calibration._stats; outside calibration/ use its public names")
    # A package's own unit tests may reach inside that package, and only that one.
    assert [v.split(" imports ")[1].split(";")[0] for v in front_door_violations(source, "tests/calibration/t.py")] == [
        "monitoring.window",
        "monitoring.drift",
    ]
    assert len(front_door_violations(source, "tests/monitoring/t.py")) == 3
    assert len(front_door_violations(source, "monitoring/window.py")) == 3
    assert len(front_door_violations(source, "tests/integration/t.py")) == 5
    assert front_door_violations("from calibration import fit_temperature\nfrom monitoring import decide_drift\n",
                                 "flows/good.py") == []  # fmt: skip


# --------------------------------------------------------------------------- modules free of MLflow


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
        ("flows.pipelines.steps", ("mlflow", "prefect")),
        ("flows.records.versions", ("mlflow", "prefect")),
        ("flows.records.runs", ("mlflow", "prefect")),
        ("flows.records.situations", ("mlflow", "prefect")),
    ],
)
def test_modules_that_promise_no_mlflow_do_not_load_it(module: str, forbidden: tuple[str, ...]) -> None:
    assert _loaded_after_import(module, forbidden) == []


def test_the_mlflow_probe_sees_mlflow_when_it_is_loaded() -> None:
    """The probe above is not vacuous: a module that does import MLflow is seen doing it."""
    assert _loaded_after_import("flows.registry.checkpoint", ("mlflow",)) == ["mlflow"]


def _module_level_imports(path: Path) -> tuple[set[str], set[str]]:
    """(external top-level packages, sibling modules) imported when ``path`` runs, without the
    imports guarded by ``if TYPE_CHECKING:`` (types only, never executed)."""
    external: set[str] = set()
    siblings: set[str] = set()
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.parent.name

    def visit(statements: list[ast.stmt]) -> None:
        for node in statements:
            if isinstance(node, ast.If):
                test = node.test
                guarded = (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
                    isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
                )
                if not guarded:
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body + node.orelse + node.finalbody)
                for handler in node.handlers:
                    visit(handler.body)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    top, _, rest = alias.name.partition(".")
                    (siblings.add(rest.split(".")[0]) if top == package and rest else external.add(top))
            elif isinstance(node, ast.ImportFrom):
                if node.level == 1:
                    if node.module:
                        siblings.add(node.module.split(".")[0])
                    else:
                        siblings.update(alias.name for alias in node.names)
                elif node.level == 0 and node.module:
                    top, _, rest = node.module.partition(".")
                    (siblings.add(rest.split(".")[0]) if top == package and rest else external.add(top))

    visit(tree.body)
    return external, siblings


def _reachable_packages(path: Path) -> set[str]:
    """External packages a module of a package loads through its own imports, transitively over
    its sibling modules (the package's ``__init__`` aside)."""
    seen: set[Path] = set()
    external: set[str] = set()
    todo = [path]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        found, siblings = _module_level_imports(current)
        external |= found
        todo.extend(p for name in siblings if (p := current.parent / f"{name}.py").is_file())
    return external


@pytest.mark.parametrize("module", ["drift", "window"])
def test_the_drift_decision_does_not_import_the_sql_layer(module: str) -> None:
    reached = _reachable_packages(ROOT / "monitoring" / f"{module}.py")
    assert "numpy" in reached
    assert "sqlalchemy" not in reached, f"monitoring/{module}.py reaches SQLAlchemy through its imports"


def test_the_sql_probe_sees_the_prediction_log() -> None:
    assert "sqlalchemy" in _reachable_packages(ROOT / "monitoring" / "prediction_log.py")


# ------------------------------------------------------------------------- sibling flows

FLOW_MODULES = frozenset({"flows.pipelines.post_finetune", "flows.pipelines.monitor", "flows.pipelines.refit"})


def flow_to_flow_imports(source: str, path: str) -> list[str]:
    """Imports of one flow module by another (siblings share flows.pipelines.tasks and flows.pipelines.registration)."""
    module = path.removesuffix(".py").replace("/", ".")
    return [f"{path}:{line}: imports {name}, another flow; share it through flows.pipelines.tasks or flows.pipelines.registration"
            for line, name in _imported_names(ast.parse(source))
            if any(name == other or name.startswith(other + ".") for other in FLOW_MODULES - {module})]


def test_no_flow_imports_another_flow() -> None:
    found = [violation for module in sorted(FLOW_MODULES)
             for path in [module.replace(".", "/") + ".py"]
             for violation in flow_to_flow_imports((ROOT / path).read_text(), path)]
    assert found == []


def test_the_sibling_check_reports_a_flow_importing_another() -> None:
    source = "from flows.pipelines.post_finetune import register\nfrom flows.pipelines.tasks import gate\nimport flows.pipelines.monitor\n"
    assert flow_to_flow_imports(source, "flows/pipelines/refit.py") == [
        "flows/pipelines/refit.py:1: imports flows.pipelines.post_finetune, another flow; share it through flows.pipelines.tasks or "
        "flows.pipelines.registration",
        "flows/pipelines/refit.py:3: imports flows.pipelines.monitor, another flow; share it through flows.pipelines.tasks or flows.pipelines.registration",
    ]


# ------------------------------------------------------------------------- the rooms of flows

# What each room of flows/ may import of the others, and which libraries it must not load
# (flows/__init__.py says what each room is for). settings, holdout, exit_status and defaults are read by
# every room (settings reads the shared defaults). cli is the top: nothing imports it.
ROOMS: dict[str, set[str]] = {
    "records": set(),
    "registry": {"records", "settings", "defaults"},
    "orchestration": {"records", "settings", "exit_status", "defaults"},
    "pipelines": {"records", "registry", "orchestration", "settings", "holdout", "exit_status", "defaults"},
    "dashboard": {"records", "registry", "orchestration", "settings", "exit_status", "defaults"},
    "cli": {"records", "registry", "orchestration", "pipelines", "dashboard", "settings", "holdout", "exit_status",
            "defaults"},
    "settings": {"defaults"},
    "holdout": set(),
    "exit_status": set(),
    "defaults": set(),
}
ROOM_FORBIDDEN: dict[str, set[str]] = {
    "records": {"mlflow", "prefect", "prefect_dask", "sqlalchemy"},
    "registry": {"prefect", "prefect_dask"},
    "orchestration": {"mlflow"},
    # The dashboard reads MLflow through the adapter, whose records it gets (flows.records.stored).
    "dashboard": {"prefect", "prefect_dask", "mlflow"},
}


def _room(path: PurePosixPath) -> str:
    """The room of a file under flows/: its sub-package, or the module itself at the top."""
    return path.parts[1] if len(path.parts) > 2 else path.stem


def room_violations(source: str, path: str) -> list[str]:
    """Each import in ``source`` (a file of flows/ at ``path``) of a room its own may not import,
    and each import of a library its room must not load (at any depth: a lazy import counts)."""
    room = _room(PurePosixPath(path))
    found = []
    for line, name in _imported_names(ast.parse(source, filename=path)):
        parts = name.split(".")
        if parts[0] == "flows" and len(parts) > 1 and parts[1] in ROOMS and parts[1] != room:
            if parts[1] not in ROOMS[room]:
                found.append(f"{path}:{line} imports {name}: the room {room} may import only {sorted(ROOMS[room])}")
        elif parts[0] in ROOM_FORBIDDEN.get(room, set()):
            found.append(f"{path}:{line} imports {name}: the room {room} must not load {parts[0]}")
    return found


def test_each_room_imports_only_what_it_may() -> None:
    files = sorted((ROOT / "flows").rglob("*.py"))
    assert {_room(PurePosixPath(p.relative_to(ROOT).as_posix())) for p in files} >= set(ROOMS)
    found = [v for p in files for v in room_violations(p.read_text(), p.relative_to(ROOT).as_posix())]
    assert found == [], "\n".join(found)


def test_every_room_says_what_it_is_for() -> None:
    for room in (name for name in ROOMS if (ROOT / "flows" / name).is_dir()):
        doc = ast.get_docstring(ast.parse((ROOT / "flows" / room / "__init__.py").read_text()))
        assert doc and len(doc.splitlines()[0]) > 20, f"flows/{room}/__init__.py must open with its purpose"


def test_the_room_check_reports_a_room_importing_what_it_may_not() -> None:
    source = ("from flows.pipelines.monitor import monitor\nimport mlflow\nfrom flows.records.versions import VersionRecord\n"
              "from flows.settings import ThermostatSettings\n")
    assert [v.split(" imports ")[1].split(":")[0] for v in room_violations(source, "flows/dashboard/data.py")] == [
        "flows.pipelines.monitor", "mlflow"]
    assert [v.split(" imports ")[1].split(":")[0] for v in room_violations(source, "flows/records/runs.py")] == [
        "flows.pipelines.monitor", "mlflow", "flows.settings"]
    assert room_violations(source, "flows/cli/demo.py") == []
