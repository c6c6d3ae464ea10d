"""How a flow ends its run: its outcome logged, and carried by the final state's message.

``prefect deployment run ... --watch`` prints the run's logs as they arrive (when the server
streams them: ``PREFECT_SERVER_LOGS_STREAM_OUT_ENABLED`` and
``PREFECT_SERVER_LOGS_STREAM_PUBLISHING_ENABLED``) and then only the final state's name; the
Prefect UI and ``run_deployment`` show the state and its message. A flow that returns
:func:`finish`'s state gives all of them its :class:`flows.records.outcomes.FlowSummary`: the JSON
form as its last own log line (sent to the server before the final state, so ``--watch`` prints
it), the one-line message as the state's message, which Prefect's flow engine logs last
(``Finished in state Completed('registered tickets version 4 ...')``).
Called from Python, the flow still returns the typed outcome (the state's data).
"""

from __future__ import annotations

import json
from typing import TypeVar, cast

from prefect import get_run_logger
from prefect.client.schemas.objects import State
from prefect.logging.handlers import APILogHandler
from prefect.states import Completed, Failed

from flows.records.outcomes import FlowSummary

__all__ = ["finish"]

_T = TypeVar("_T")


def finish(summary: FlowSummary, data: _T, *, failed: bool = False) -> _T:
    """The state a flow returns to end its run with ``summary``: ``Completed`` (or ``Failed``)
    with the summary's message, ``data`` its result; the summary's JSON is logged first.

    A flow's caller in Python gets ``data`` back (Prefect returns a returned state's data), or,
    for a Failed state, ``data`` raised when it is an exception.
    """
    logger = get_run_logger()
    (logger.error if failed else logger.info)("outcome %s", json.dumps(summary.to_dict(), allow_nan=False))
    # Sent now, before the final state: `--watch` follows a run's logs only a few seconds past its end.
    APILogHandler().flush()
    state: State[_T] = (Failed if failed else Completed)(message=summary.message, data=data)
    return cast(_T, state)
