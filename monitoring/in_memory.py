"""A window of one version held in memory, read like the prediction log.

The command line's ``thermostat drift`` and ``thermostat diagnose`` check files, the studies
check arrays they draw; the monitor checks the prediction log. All of them run one function
(:func:`monitoring.check_version`) on a :class:`~monitoring.PredictionStore`, and
:class:`WindowInMemory` is the store of arrays: its labelled rows, its served rows (the
labelled rows, or other rows whose labels are not known), every one served at one moment at
the T of the check.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal

import numpy as np
from numpy.typing import ArrayLike, NDArray

from calibration import ScoredSet, check_logits, check_temperature

from ._validation import check_chunk_size, check_window
from .store import LabelledChunk, ServedChunk, StoreScope, _ReadOnlyStore, _refuse_label_times
from .window import WindowQuery

__all__ = ["WindowInMemory"]

# Arrays have no time of their own: every row is served at this moment, in a window of a second.
_SERVED_AT: Final = datetime(1970, 1, 1, tzinfo=UTC)
_SCOPE: Final = StoreScope(served_rows=True, label_times=False, writable=False)


class WindowInMemory(_ReadOnlyStore):
    """One window of one version in memory: a read-only :class:`~monitoring.PredictionStore`.

    Parameters
    ----------
    logits : array of shape (n_samples, n_classes), or ScoredSet
        The window's labelled rows (a :class:`~calibration.ScoredSet` stands for logits, labels
        and groups, already checked).
    labels : array of int of shape (n_samples,), or None with a ScoredSet
    temperature : float
        The T the rows were served at (and are checked at).
    groups : array of shape (n_samples,), optional
        Each labelled row's group (str, or None for none); default: none (a ScoredSet's are not used).
    served_logits : array of shape (n_served, n_classes), optional
        The window's served rows, labelled or not, whose labels are not known (default: the
        labelled rows, labels included).
    model_name, model_version : str
        The version the rows stand for.

    Examples
    --------
    >>> window = WindowInMemory([[2.0, 0.0], [0.0, 1.0], [3.0, 0.0]], [0, 0, 1], temperature=1.0)
    >>> query = window.query()
    >>> [len(chunk) for chunk in window.iter_labelled("window", "1", query.start, query.end, chunk_size=2)]
    [2, 1]
    >>> next(window.iter_served("window", "1", query.start, query.end)).labels.tolist()
    [0, 0, 1]
    """

    def __init__(
        self, logits: ArrayLike | ScoredSet, labels: ArrayLike | None, *, temperature: float,
        groups: ArrayLike | None = None, served_logits: ArrayLike | None = None, model_name: str = "window",
        model_version: str = "1",
    ) -> None:
        if isinstance(logits, ScoredSet):
            scored = logits
        elif labels is None:
            raise TypeError("labels are required with logits (a ScoredSet stands for both)")
        else:
            scored = ScoredSet.from_arrays(logits, labels)
        self._logits: NDArray[np.floating[Any]] = scored.logits
        self._labels = scored.labels.astype(np.int64, copy=False)
        n = self._labels.shape[0]
        self._groups = np.full(n, None, dtype=object) if groups is None else np.asarray(groups, dtype=object)
        if self._groups.shape != (n,):
            raise ValueError(f"groups must be 1-D with one entry per row ({n}); got shape {self._groups.shape}")
        self._temperature = check_temperature(temperature)
        self._served = None if served_logits is None else check_logits(served_logits, name="served_logits")
        if self._served is not None and self._served.shape[1] != self._logits.shape[1]:
            raise ValueError(f"served_logits has {self._served.shape[1]} classes and logits {self._logits.shape[1]}; "
                             "both must score the same K classes")
        self._version = (model_name, model_version)

    def __repr__(self) -> str:
        return f"WindowInMemory({self._version[0]!r} v{self._version[1]}, {self._labels.shape[0]} labelled rows)"

    def query(self, *, n_bins: int = 15, threshold: float | None = None) -> WindowQuery:
        """The :class:`~monitoring.WindowQuery` of this window, at its T."""
        return WindowQuery(*self._version, temperature=self._temperature, start=_SERVED_AT,
                           end=_SERVED_AT + timedelta(seconds=1), n_bins=n_bins, threshold=threshold)

    @property
    def scope(self) -> StoreScope:
        """Every served row and its label when known; no label times; read-only."""
        return _SCOPE

    def n_classes(self, model_name: str, model_version: str) -> int | None:
        """K, for this window's version (None for another)."""
        return int(self._logits.shape[1]) if (model_name, model_version) == self._version else None

    def logged_versions(self, model_name: str | None = None) -> dict[tuple[str, str], int]:
        """This window's version and its K (when it is ``model_name``'s, if given)."""
        if model_name is not None and self._version[0] != model_name:
            return {}
        return {self._version: int(self._logits.shape[1])}

    def _holds(self, model_name: str, model_version: str, start: datetime, end: datetime) -> bool:
        start, end = check_window(start, end)
        return (model_name, model_version) == self._version and start <= _SERVED_AT < end

    def iter_labelled(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
        order: Literal["served", "labelled"] = "served",
    ) -> Iterator[LabelledChunk]:
        """The labelled rows, in order, ``chunk_size`` at a time (views, not copies); nothing for
        another version or a window that does not hold the rows' moment. Their ``predicted_class``
        is the first arg-max and their ``confidence`` NaN (none was logged)."""
        _refuse_label_times(self, labelled_from, labelled_to, order)
        chunk_size = check_chunk_size(chunk_size)
        if not self._holds(model_name, model_version, start, end):
            return
        for first in range(0, self._labels.shape[0], chunk_size):
            rows = slice(first, first + chunk_size)
            logits = self._logits[rows]
            yield LabelledChunk(
                time=_times(logits.shape[0]), logits=logits, labels=self._labels[rows], groups=self._groups[rows],
                temperature=np.full(logits.shape[0], self._temperature),
                request_ids=np.arange(first, first + logits.shape[0]).astype(str).astype(object),
                predicted_class=logits.argmax(axis=1).astype(np.int64),
                confidence=np.full(logits.shape[0], np.nan),
            )

    def iter_served(
        self, model_name: str, model_version: str, start: datetime, end: datetime, *, chunk_size: int = 50_000,
        labelled_from: datetime | None = None, labelled_to: datetime | None = None,
    ) -> Iterator[ServedChunk]:
        """The served rows, in order, ``chunk_size`` at a time: the labelled rows (``arrived``),
        or ``served_logits`` (label -1)."""
        _refuse_label_times(self, labelled_from, labelled_to)
        chunk_size = check_chunk_size(chunk_size)
        if not self._holds(model_name, model_version, start, end):
            return
        served = self._logits if self._served is None else self._served
        for first in range(0, served.shape[0], chunk_size):
            rows = slice(first, first + chunk_size)
            logits = served[rows]
            n = logits.shape[0]
            labels = self._labels[rows] if self._served is None else np.full(n, -1, dtype=np.int64)
            groups = self._groups[rows] if self._served is None else np.full(n, None, dtype=object)
            yield ServedChunk(time=_times(n), logits=logits, labels=labels, groups=groups,
                              temperature=np.full(n, self._temperature), arrived=labels >= 0)


def _times(n: int) -> NDArray[np.datetime64]:
    return np.full(n, np.datetime64(_SERVED_AT.replace(tzinfo=None), "us"))
