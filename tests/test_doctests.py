"""Every docstring example in the pure packages runs (a doctest per public function)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

PACKAGES = ("calibration", "monitoring")
MODULES = sorted(
    f"{package}.{info.name}"
    for package in PACKAGES
    for info in pkgutil.iter_modules(importlib.import_module(package).__path__)
)


@pytest.mark.parametrize("module_name", MODULES)
def test_docstring_examples(module_name: str) -> None:
    module = importlib.import_module(module_name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {module_name}"
