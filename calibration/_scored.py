"""Scored sets: ids, logits, labels, optional groups; read from and written to .npz/.parquet/.csv.

STUB: signatures fixed; implementation pending.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import NDArray

__all__ = ["ScoredSet", "ScoredSetError", "read_scored_set", "write_scored_set"]


class ScoredSetError(ValueError):
    """A scored-set file or array was refused; the message names the file, column or row."""


@dataclass(frozen=True, slots=True, eq=False)
class ScoredSet:
    """A validated scored set. Construct through :meth:`from_arrays` or :func:`read_scored_set`."""

    ids: NDArray[np.str_]
    logits: NDArray[np.floating[Any]]
    labels: NDArray[np.intp]
    groups: NDArray[np.str_] | None = None

    @property
    def n_samples(self) -> int:
        return int(self.logits.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.logits.shape[1])


def read_scored_set(path: str | Path) -> ScoredSet:
    raise NotImplementedError


def write_scored_set(scored: ScoredSet, path: str | Path) -> Path:
    raise NotImplementedError
