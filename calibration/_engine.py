"""Engines: where the per-partition work of a partitioned scored set runs.

The core computes on a partitioned set as a map over its partitions followed by a reduce in
the calling process (sums that add up: see :mod:`calibration._partitioned`). An engine is
whatever runs the map. :class:`LocalEngine` runs it here, one partition after another; the
Dask engine (``flows.orchestration.engines.DaskEngine``) runs it on a Dask cluster. Both return the
results in the order of the items, so the reduce adds them in the same order and the
numbers do not depend on the engine.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

__all__ = ["Engine", "LocalEngine", "LOCAL_ENGINE"]

Item = TypeVar("Item")
Result = TypeVar("Result")


class Engine(Protocol):
    """Runs ``fn`` on every item and returns the results in the items' order.

    ``fn`` and the items must be picklable (module-level functions, ``functools.partial``
    of them, frozen dataclasses) for engines that ship them to other processes.
    """

    @property
    def name(self) -> str:
        """``"local"``, ``"dask"``, ... (reported by the CLI's ``--json``)."""
        ...

    @property
    def n_workers(self) -> int:
        """How many workers the map can use (1 for the local engine)."""
        ...

    def map(self, fn: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
        """``[fn(item) for item in items]``, possibly computed elsewhere."""
        ...


@dataclass(frozen=True, slots=True)
class LocalEngine:
    """The in-process engine: one partition after another, in the calling thread.

    >>> LOCAL_ENGINE.map(abs, [-1, 2, -3])
    [1, 2, 3]
    """

    name: str = "local"
    n_workers: int = 1

    def map(self, fn: Callable[[Item], Result], items: Sequence[Item]) -> list[Result]:
        return [fn(item) for item in items]


LOCAL_ENGINE = LocalEngine()
