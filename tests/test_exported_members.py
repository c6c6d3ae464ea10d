"""Every public name is exported through __all__ and has a docstring."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.parametrize("package", ["calibration"])
def test_all_names_exist_and_are_documented(package: str) -> None:
    module = importlib.import_module(package)
    assert sorted(module.__all__) == sorted(set(module.__all__)), "duplicates in __all__"
    for name in module.__all__:
        member = getattr(module, name)
        if callable(member):
            assert member.__module__.startswith(f"{package}._"), f"{name} is defined outside {package}'s modules"
            assert member.__doc__ and member.__doc__.strip(), f"{package}.{name} has no docstring"


def test_private_modules_do_not_leak_public_names() -> None:
    module = importlib.import_module("calibration")
    public = {name for name in vars(module) if not name.startswith("_") and not name.startswith("annotations")}
    assert public - set(module.__all__) - {"annotations"} <= {
        name for name in public if importlib.util.find_spec(f"calibration.{name}") is not None
    }


# --------------------------------------------------------------------------- lazy front doors

LAZY_PACKAGES = ("calibration", "monitoring")
ROOT = Path(__file__).resolve().parents[1]


def _type_checking_imports(package: str) -> dict[str, tuple[str, ...]]:
    """The ``from .module import names`` lines of the package's ``if _typing.TYPE_CHECKING:`` block."""
    tree = ast.parse((ROOT / package / "__init__.py").read_text())
    block = next(node for node in tree.body
                 if isinstance(node, ast.If) and ast.unparse(node.test) == "_typing.TYPE_CHECKING")
    return {node.module or "": tuple(alias.name for alias in node.names)
            for node in block.body if isinstance(node, ast.ImportFrom)}


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_the_lazy_table_names_what_the_type_checker_sees(package: str) -> None:
    """The names load on first use from a table; mypy reads the imports. They must agree, with __all__."""
    module = importlib.import_module(package)
    assert _type_checking_imports(package) == module._EXPORTS
    assert sorted(module.__all__) == sorted(module._MODULE_OF)
    for name in module.__all__:
        assert getattr(module, name) is getattr(importlib.import_module(f"{package}.{module._MODULE_OF[name]}"), name)


@pytest.mark.parametrize("package", LAZY_PACKAGES)
def test_importing_the_package_loads_none_of_its_modules(package: str) -> None:
    code = f"import sys, {package}; print(sorted(m for m in sys.modules if m.startswith('{package}.')))"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_an_unknown_name_is_an_attribute_error() -> None:
    module = importlib.import_module("calibration")
    with pytest.raises(AttributeError, match="has no attribute 'fit_temprature'"):
        getattr(module, "fit_temprature")
