"""monitoring's public surface: exported, documented, doctested, and free of Prefect/MLflow."""

from __future__ import annotations

import importlib
import inspect

import monitoring

MODULES = [
    "monitoring.prediction_log", "monitoring.window", "monitoring.drift", "monitoring.report", "monitoring.urls",
    "monitoring.export", "monitoring.log_writer", "monitoring.sequential", "monitoring.early_warning",
    "monitoring.policy", "monitoring.drift_tests", "monitoring.escalation", "monitoring.scan", "monitoring.retention",
    "monitoring.check", "monitoring.change_point", "monitoring.store", "monitoring.in_memory",
    "monitoring.diagnosis", "monitoring.ingest", "monitoring.ingest_files",
]


def test_all_names_exist_are_unique_and_documented() -> None:
    assert len(monitoring.__all__) == len(set(monitoring.__all__))
    for name in monitoring.__all__:
        member = getattr(monitoring, name)
        if inspect.isfunction(member) or inspect.isclass(member):
            assert member.__module__ in MODULES, f"{name} is defined in {member.__module__}"
            assert member.__doc__ and member.__doc__.strip(), f"monitoring.{name} has no docstring"


def test_every_module_name_in_all_is_exported_by_the_package() -> None:
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        missing = set(module.__all__) - set(monitoring.__all__)
        assert not missing, f"{module_name} exports {sorted(missing)} but monitoring does not"


def test_every_public_function_has_a_doctest() -> None:
    for name in monitoring.__all__:
        member = getattr(monitoring, name)
        if inspect.isfunction(member):
            assert ">>>" in (member.__doc__ or ""), f"monitoring.{name} has no example"

