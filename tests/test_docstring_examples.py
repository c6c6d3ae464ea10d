"""Every docstring example of the packages runs under ``pytest``, once.

``pytest`` runs them itself (``--doctest-modules`` over the packages in ``testpaths``; the names
they take as imported: the root ``conftest.py``). Held here: the configuration reaches every
package, and no example is written where the doctest finder does not look (a decorator that
hides a function's docstring, a nested function) — such an example would never run.
"""

from __future__ import annotations

import ast
import doctest
import importlib
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PACKAGES = sorted({name.split(".")[0] for name in PYPROJECT["tool"]["setuptools"]["packages"]["find"]["include"]})


def test_pytest_collects_the_examples_of_every_package(pytestconfig: pytest.Config) -> None:
    assert PACKAGES == ["calibration", "flows", "monitoring", "thermostat"]
    assert set(PACKAGES) <= set(pytestconfig.getini("testpaths"))
    assert pytestconfig.getoption("doctestmodules")


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _written(tree: ast.Module, module: str) -> set[str]:
    """The qualified names of the module's docstrings that hold an example (``>>>``)."""
    written: set[str] = set()

    def visit(node: ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef, name: str) -> None:
        if ">>>" in (ast.get_docstring(node, clean=False) or ""):
            written.add(name)
        for child in node.body:
            if isinstance(child, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                visit(child, f"{name}.{child.name}")

    visit(tree, module)
    return written


@pytest.mark.parametrize("package", PACKAGES)
def test_every_example_written_is_one_the_finder_runs(package: str) -> None:
    for path in sorted((ROOT / package).rglob("*.py")):
        module = _module_name(path)
        written = _written(ast.parse(path.read_text(), filename=str(path)), module)
        if not written:
            continue
        found = {test.name for test in doctest.DocTestFinder().find(importlib.import_module(module)) if test.examples}
        assert written <= found, f"{path.relative_to(ROOT)}: examples that never run in {sorted(written - found)}"
