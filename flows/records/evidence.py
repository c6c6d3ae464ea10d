"""What a run records beside its tags, as one value: params, metrics, figures, tables, JSON.

A pipeline builds a :class:`RunEvidence` from its results (no I/O), and the MLflow adapter
writes it in one call (:meth:`flows.registry.adapter.MlflowRegistry.log_evidence`): the params
and metrics in one batch, every artifact in one upload. Artifacts are keyed by their path in
the run (``evidence/gate_sweep.csv``); a figure is stored as a PNG, a table as a CSV without
its index, a document as indented JSON with sorted keys, a text as it is (UTF-8).

>>> evidence = RunEvidence(params={"n_bins": 15}, metrics={"temperature": 1.4},
...                        documents={"evidence/split_ids.json": {"calibration_ids": ["a", "b"]}})
>>> evidence.artifact_paths
('evidence/split_ids.json',)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the types only: building the value imports neither
    import pandas as pd
    from matplotlib.figure import Figure

__all__ = ["RunEvidence"]


@dataclass(frozen=True, slots=True)
class RunEvidence:
    """A run's evidence, written in one call.

    Parameters
    ----------
    params : mapping of str to value
        The run's parameters (stored as their ``str``).
    metrics : mapping of str to float
        Numeric results; a value that is undefined is left out by the builder, never logged as 0.
    metrics_at : datetime, optional
        The time the metrics describe (e.g. a checked window's end); default: when written.
    figures, tables, documents, texts : mapping of artifact path to Figure, DataFrame, JSON value, str
        The artifacts, by their path in the run.
    """

    params: Mapping[str, Any] = field(default_factory=dict)
    metrics: Mapping[str, float] = field(default_factory=dict)
    metrics_at: datetime | None = None
    figures: Mapping[str, Figure] = field(default_factory=dict)
    tables: Mapping[str, pd.DataFrame] = field(default_factory=dict)
    documents: Mapping[str, Any] = field(default_factory=dict)
    texts: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        paths = [*self.figures, *self.tables, *self.documents, *self.texts]
        repeated = sorted({path for path in paths if paths.count(path) > 1})
        if repeated:
            raise ValueError(f"artifact paths {repeated} are given twice; every artifact needs its own path")
        outside = sorted(path for path in paths if path.startswith("/") or ".." in PurePosixPath(path).parts)
        if outside:
            raise ValueError(f"artifact paths {outside} leave the run; give each a relative path without '..'")

    @property
    def artifact_paths(self) -> tuple[str, ...]:
        """Every artifact's path, sorted."""
        return tuple(sorted([*self.figures, *self.tables, *self.documents, *self.texts]))
