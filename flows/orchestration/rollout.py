"""The ``refitted`` events of one model's alias, as they happen: what a serving hook rolls on.

:class:`RefittedWatch` subscribes to the Prefect server's event stream (``PREFECT_API_URL``;
websocket ``/api/events/out``) for ``thermostat.calibration.refitted`` on the model's versions and
hands over each event for the watched alias as a :class:`flows.records.events.RefittedEvent`.
``thermostat serve`` (:mod:`flows.cli.serve_command`) restarts ``mlflow models serve`` on them.
The stream is read by a background task into a queue, so waiting for the next event with a
time-out never cancels a read half-way. A stream that breaks (its reconnections exhausted) ends
the watch quietly: :attr:`RefittedWatch.broken` says why, and the caller goes on without it.
"""

from __future__ import annotations

import asyncio
import logging
from types import TracebackType
from typing import Self

from prefect.events.clients import PrefectEventSubscriber, get_events_subscriber
from prefect.events.filters import EventFilter, EventNameFilter, EventResourceFilter
from prefect.settings import PREFECT_API_URL

from flows.records.events import REFITTED_EVENT, RefittedEvent

__all__ = ["RefittedWatch", "events_reachable"]

_logger = logging.getLogger(__name__)


def events_reachable() -> bool:
    """Whether this process talks to a Prefect server (``PREFECT_API_URL`` set): without one there
    is no event stream to watch (and no temporary server is started for it)."""
    return bool(PREFECT_API_URL.value())


class RefittedWatch:
    """The ``refitted`` events of ``model_name``'s ``alias``, from now on (an async context manager).

    Examples
    --------
    ``async with RefittedWatch("tickets", "champion") as watch: event = await watch.next(timeout=60)``
    gives the next event, or None after a minute without one.
    """

    def __init__(self, model_name: str, alias: str) -> None:
        self.model_name, self.alias = model_name, alias
        self.broken: str | None = None
        self._queue: asyncio.Queue[RefittedEvent] = asyncio.Queue()
        self._reader: asyncio.Task[None] | None = None

    async def __aenter__(self) -> Self:
        subscriber = get_events_subscriber(filter=EventFilter(
            event=EventNameFilter(name=[REFITTED_EVENT]),
            resource=EventResourceFilter(id_prefix=[f"mlmodel.{self.model_name}.v"]),
        ), reconnection_attempts=10, reconnect_on_clean_close=True)
        await subscriber.__aenter__()  # connected: events from now on reach the queue
        self._reader = asyncio.create_task(self._read(subscriber))
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        traceback: TracebackType | None) -> None:
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)

    async def _read(self, subscriber: PrefectEventSubscriber) -> None:
        try:
            async for event in subscriber:
                try:
                    refitted = RefittedEvent.from_payload(event.payload)
                except ValueError as error:
                    _logger.warning("ignored %s %s: %s", REFITTED_EVENT, event.id, error)
                    continue
                if refitted.model_name == self.model_name and refitted.alias == self.alias:
                    self._queue.put_nowait(refitted)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - the watch ends; the caller keeps its own checks
            self.broken = f"{type(error).__name__}: {error}"
        finally:
            await subscriber.__aexit__(None, None, None)

    async def next(self, timeout: float) -> RefittedEvent | None:
        """The next event of the alias, or None when none came within ``timeout`` seconds."""
        try:
            return await asyncio.wait_for(self._queue.get(), timeout)
        except TimeoutError:
            return None
