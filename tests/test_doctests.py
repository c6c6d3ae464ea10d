"""Every docstring example in the pure packages runs (a doctest per public function)."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

from tests.support.examples import run_examples

PACKAGES = ("calibration", "monitoring")
MODULES = sorted(
    f"{package}.{info.name}"
    for package in PACKAGES
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    result = run_examples(module_name)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {module_name}"
