"""Prefect flows and thin tasks, the MLflow registry adapter, settings and the CLI.

Side effects live here and only here.
"""

from __future__ import annotations

__all__: list[str] = []
