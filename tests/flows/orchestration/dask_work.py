"""Functions that tests/flows/orchestration/test_engines.py runs on Dask workers.

The workers are spawned processes that import a function's module by name to unpickle it:
this one imports only the standard library and psutil (which the workers have loaded
already), so a worker, or its replacement after a kill, has it at once rather than after
loading pytest, numpy and the core.
"""

from __future__ import annotations

import os
import time

import psutil


def square_late_first(item: int) -> int:
    """``item ** 2``, the early items of ``range(20)`` slower: they finish in reverse order."""
    time.sleep(0.01 * (20 - item))
    return item * item


def refuse_negative(item: int) -> int:
    """``item``, or ``ValueError`` for a negative one."""
    if item < 0:
        raise ValueError(f"item {item} is negative")
    return item


def slow_square(item: int) -> int:
    """``item ** 2`` after half a second."""
    time.sleep(0.5)
    return item * item


def with_pid(item: int) -> tuple[int, int]:
    """``item`` and the process that saw it."""
    return item, os.getpid()


def listening_hosts() -> set[str]:
    """The addresses this process's listening TCP sockets are bound to."""
    return {c.laddr.ip for c in psutil.Process().net_connections("tcp") if c.status == psutil.CONN_LISTEN}
