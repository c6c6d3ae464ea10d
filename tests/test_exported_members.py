"""Every public name is exported through __all__ and has a docstring."""

from __future__ import annotations

import importlib

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
