"""What the wheel declares: every third-party module the packages import is a declared dependency
with a lower bound (not something MLflow or Prefect happen to pull in today), pinned in
constraints.txt; the optional extras' modules are imported only where a command needs them,
never when a module is loaded. (That the wheel's own files are enough, installed outside the
checkout: tests/integration/test_wheel.py.)
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("calibration", "monitoring", "flows", "thermostat")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# The extras a base install goes without, and the modules each brings.
OPTIONAL_EXTRAS = {"distributed": {"distributed", "dask", "prefect_dask"}, "postgresql": {"psycopg"}, "torch": {"torch"}}


def _normalised(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirements(group: str | None) -> dict[str, Requirement]:
    texts = PYPROJECT["project"]["dependencies"] if group is None else PYPROJECT["project"]["optional-dependencies"][group]
    return {_normalised(requirement.name): requirement for requirement in map(Requirement, texts)}


def _third_party_imports() -> dict[str, dict[str, bool]]:
    """Top-level module -> {file: imported when the module loads (at module level, outside TYPE_CHECKING)}."""
    found: dict[str, dict[str, bool]] = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            tree = ast.parse(path.read_text(), filename=str(path))
            at_load = {id(node) for node in tree.body if isinstance(node, ast.Import | ast.ImportFrom)}
            for node in ast.walk(tree):
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                    names = [node.module]
                else:
                    continue
                for name in names:
                    top = name.split(".")[0]
                    if top in sys.stdlib_module_names or top in PACKAGES:
                        continue
                    where = found.setdefault(top, {})
                    key = str(path.relative_to(ROOT))
                    where[key] = where.get(key, False) or id(node) in at_load
    return found


def test_every_imported_module_is_a_declared_dependency() -> None:
    base = _requirements(None)
    extras = {extra: _requirements(extra) for extra in OPTIONAL_EXTRAS}
    distributions = packages_distributions()
    undeclared = []
    for module, files in sorted(_third_party_imports().items()):
        names = {_normalised(name) for name in distributions.get(module, [module])}
        extra = next((extra for extra, modules in OPTIONAL_EXTRAS.items() if module in modules), None)
        declared = names & (base.keys() if extra is None else extras[extra].keys() | base.keys())
        if not declared:
            undeclared.append(f"{module} ({', '.join(sorted(names))}) imported by {', '.join(sorted(files))}")
    assert not undeclared, "imported but not declared in pyproject.toml:\n" + "\n".join(undeclared)


def test_the_optional_extras_are_not_imported_when_a_module_loads() -> None:
    imports = _third_party_imports()
    at_load = sorted(f"{module} in {file}" for modules in OPTIONAL_EXTRAS.values() for module in modules
                     for file, loaded in imports.get(module, {}).items() if loaded)
    assert not at_load, f"a base install (no extras) would fail to import: {at_load}"


def test_every_dependency_has_a_lower_bound() -> None:
    unbounded = [str(requirement) for requirement in _requirements(None).values()
                 if not any(spec.operator in (">=", "==", "~=") for spec in requirement.specifier)]
    assert not unbounded, unbounded


@pytest.mark.parametrize("group", [None, *OPTIONAL_EXTRAS, "test"])
def test_every_dependency_is_pinned_in_constraints(group: str | None) -> None:
    pinned = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        name, separator, version = line.partition("==")
        if separator:
            pinned[_normalised(name.strip())] = version.strip()
    missing = sorted(set(_requirements(group)) - set(pinned))
    assert not missing, f"{group or 'dependencies'}: not pinned in constraints.txt: {missing}"
    for name, requirement in _requirements(group).items():
        assert requirement.specifier.contains(pinned[name], prereleases=True), (
            f"constraints.txt pins {name}=={pinned[name]}, outside pyproject's {requirement}")
