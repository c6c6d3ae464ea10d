"""The per-model lock: two pipeline runs for the same registered model never interleave.

Prefect's ``concurrency(name, strict=False)`` silently *skips* a global concurrency limit
that does not exist (it only logs a line), so the lock is taken with ``strict=True`` after
making sure the limit exists. It is created through the Prefect client, which works the
same against ``prefect server start`` and the ephemeral in-process API.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from prefect.client.orchestration import get_client
from prefect.client.schemas.actions import GlobalConcurrencyLimitCreate
from prefect.concurrency.sync import concurrency
from prefect.exceptions import ObjectAlreadyExists, ObjectNotFound

__all__ = ["ensure_limit", "model_lock", "model_lock_name"]


def model_lock_name(model_name: str) -> str:
    return f"thermostat-register-{model_name}"


def ensure_limit(name: str, *, limit: int = 1) -> None:
    """Create the global concurrency limit ``name`` with ``limit`` slots unless it exists."""
    with get_client(sync_client=True) as client:
        try:
            client.read_global_concurrency_limit_by_name(name)
            return
        except ObjectNotFound:
            pass
        try:
            client.create_global_concurrency_limit(GlobalConcurrencyLimitCreate(name=name, limit=limit))
        except ObjectAlreadyExists:  # another run created it first
            pass


@contextmanager
def model_lock(model_name: str, *, timeout_seconds: float) -> Iterator[None]:
    """Hold the model's one slot for the duration of the block (strict: never skipped)."""
    name = model_lock_name(model_name)
    ensure_limit(name)
    with concurrency(name, occupy=1, timeout_seconds=timeout_seconds, strict=True):
        yield
