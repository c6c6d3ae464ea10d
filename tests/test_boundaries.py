"""The architecture's one direction of dependency, enforced by a test (STYLE.md §1)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "calibration": {"mlflow", "prefect", "flows", "monitoring", "sqlalchemy"},
    "monitoring": {"mlflow", "prefect", "flows"},
}


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
