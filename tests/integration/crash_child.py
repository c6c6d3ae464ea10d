"""Post-finetune runs in child processes that die (``os._exit``) at a chosen MLflow call.

``python -m tests.integration.crash_child SPECS_JSON`` imports the stack once, then forks one
child per spec, one after the other (a fork costs nothing; importing MLflow and Prefect costs
seconds), and prints ``{"exit_codes": [...]}``. Each spec has ``crash``
("after:create_model_version", "before:set_terminated", ...), ``run`` (post_finetune's keyword
arguments except settings), ``settings`` (ThermostatSettings fields) and ``pid_file`` (where
the PID of the embedded Prefect API server, if the child started one, is written just before
it dies). Exit status 70: died at the crash point, as ``kill -9`` would leave it.

A spec with ``pause_file`` pauses instead of dying: at the crash point the child writes its PID
to that file and stops itself with SIGSTOP (every thread stops, as in a long GC pause or a frozen
VM; the lease is not renewed); it goes on where it stopped when the test sends SIGCONT.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import sys
import threading
from typing import Any

CRASHED = 70


def _matches(method: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    if method == "set_terminated":  # the run's close, not a rollback's FAILED
        return kwargs.get("status", args[1] if len(args) > 1 else None) == "FINISHED"
    if method == "set_model_version_tag":  # the completion marker
        return (args[2] if len(args) > 2 else kwargs.get("key")) == "thermostat.registration"
    return True


def _child(spec: dict[str, Any]) -> None:
    from mlflow import MlflowClient

    from flows.orchestration.locks import ModelLease
    from flows.pipelines.post_finetune import post_finetune
    from flows.settings import ThermostatSettings

    when, method = spec["crash"].split(":")
    original = getattr(MlflowClient, method)

    def die() -> None:
        from prefect.server.api.server import SubprocessASGIServer

        server = SubprocessASGIServer._instances.get(None)
        process = None if server is None else server.server_process
        with open(spec["pid_file"], "w") as handle:
            handle.write("" if process is None else str(process.pid))
        os._exit(CRASHED)

    paused: list[bool] = []

    def pause() -> None:
        paused.append(True)  # once: a rollback may make the same call again
        with open(spec["pause_file"], "w") as handle:
            handle.write(str(os.getpid()))
        # Stopped between two renewals of its lease, not inside one: a process frozen in the middle
        # of a SQLite write holds the whole lock database (SQLite has one writer), which is another
        # fault than the pause this child stands for.
        with contextlib.ExitStack() as idle:
            for lease in (o for o in gc.get_objects() if isinstance(o, ModelLease)):
                idle.enter_context(lease.renewing)
            os.kill(os.getpid(), signal.SIGSTOP)

    def halt() -> None:
        if "pause_file" not in spec:
            die()
        elif not paused:
            pause()

    def crashing(self: MlflowClient, *args: Any, **kwargs: Any) -> Any:
        hit = _matches(method, args, kwargs)
        if hit and when == "before":
            halt()
        result = original(self, *args, **kwargs)
        if hit and when == "after":
            halt()
        return result

    setattr(MlflowClient, method, crashing)
    post_finetune(**spec["run"], settings=ThermostatSettings(**spec["settings"]))


def main() -> None:
    specs = json.loads(sys.argv[1])
    import flows.pipelines.post_finetune  # noqa: F401  (the whole stack, imported once before forking)

    if threading.active_count() != 1:  # a fork only copies the calling thread
        raise RuntimeError(f"cannot fork safely: threads {threading.enumerate()}")
    codes = []
    for spec in specs:
        pid = os.fork()
        if pid == 0:
            try:
                _child(spec)
            except BaseException as error:  # noqa: BLE001 - reported through the exit status
                print(f"child ended with {type(error).__name__}: {error}", file=sys.stderr, flush=True)
                os._exit(1)
            os._exit(0)
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    print(json.dumps({"exit_codes": codes}), flush=True)


if __name__ == "__main__":
    main()
