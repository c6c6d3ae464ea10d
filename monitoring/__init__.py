"""Reading recent labelled traffic, windowing, the drift decision and its reports. No Prefect."""

from __future__ import annotations

__all__: list[str] = []
