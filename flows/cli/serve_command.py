"""``thermostat serve``: ``mlflow models serve`` of the version an alias points at, restarted when it moves.

``mlflow models serve -m models:/NAME@ALIAS`` resolves the alias once, at start-up: after a
refit moves the alias, it keeps serving the old version until someone restarts it. This command
runs ``mlflow models serve -m models:/NAME/VERSION`` (the version the alias points at) as its
child and restarts it on the new version

* at once on each ``thermostat.calibration.refitted`` event of the alias (the Prefect server's
  event stream, ``PREFECT_API_URL``; :class:`flows.orchestration.rollout.RefittedWatch`), and
* within ``--check-every`` seconds of any other move of the alias (a post-finetune
  registration, a prior correction, a move by hand: the registry is read every so often).

Either way the registry decides: the alias is read again and the version it points at is served.
A restart stops the old server (SIGTERM to its process group, then SIGKILL after ``--grace``)
before starting the new one on the same port: requests fail for the few seconds the new one
takes to start. The child inherits the environment (``THERMOSTAT_PREDICTION_LOG_URL``: the
served version logs its traffic) with ``MLFLOW_TRACKING_URI`` (and ``MLFLOW_REGISTRY_URI``) from
the settings, and this environment's ``bin`` first on ``PATH``. Exit status: 0 stopped (SIGINT,
SIGTERM); 2 bad input (the model or alias does not exist); 3 MLflow could not be read at start,
or the server exited by itself (its own status on stderr).
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click

from flows.exit_status import EXIT_BAD_INPUT, EXIT_COMPUTATION_FAILED, EXIT_OK, fail, refuse

if TYPE_CHECKING:
    from flows.orchestration.rollout import RefittedWatch
    from flows.records.events import RefittedEvent
    from flows.registry.adapter import MlflowRegistry

__all__ = ["command"]

_EPILOG = """\
The server is `mlflow models serve -m models:/NAME/VERSION --env-manager local -h HOST -p PORT`
plus the arguments after `--` (e.g. `-- --workers 2`). Needs THERMOSTAT_TRACKING_URI (the
registry), and PREFECT_API_URL for the refitted events (without it: the registry is read every
--check-every seconds only).

exit status: 0 stopped (SIGINT, SIGTERM); 2 bad input (the model or the alias does not exist);
3 MLflow could not be read at start, or the server exited by itself."""


@dataclass(frozen=True)
class _Options:
    """What the command was given: the model, its alias, where to serve, and ``mlflow models serve``'s own."""

    model: str
    alias: str
    host: str
    port: int
    check_every: float
    grace: float
    serve_arguments: tuple[str, ...]


@dataclass
class _Server:
    """One ``mlflow models serve`` of one version, leading its own process group."""

    version: str
    process: subprocess.Popen[bytes]

    @classmethod
    def start(cls, model: str, version: str, args: _Options, env: dict[str, str]) -> _Server:
        command = [str(Path(sys.executable).parent / "mlflow"), "models", "serve", "-m", f"models:/{model}/{version}",
                   "--env-manager", "local", "-h", args.host, "-p", str(args.port), *args.serve_arguments]
        return cls(version, subprocess.Popen(command, env=env, start_new_session=True))

    def stop(self, grace: float) -> None:
        """SIGTERM to the server's process group (the ``mlflow`` CLI and its uvicorn), SIGKILL to what
        is left of it after ``grace`` seconds; returns once every process of the group has ended,
        so the port is free for the next server."""
        deadline = time.monotonic() + grace
        for sig in (signal.SIGTERM, signal.SIGKILL):
            try:
                os.killpg(self.process.pid, sig)
            except ProcessLookupError:  # the whole group has ended
                break
            while self._group_alive() and (sig == signal.SIGKILL or time.monotonic() < deadline):
                time.sleep(0.1)
            if not self._group_alive():
                break
        self.process.wait()

    def _group_alive(self) -> bool:
        self.process.poll()  # reap the leader: a zombie still counts as a member of its group
        try:
            os.killpg(self.process.pid, 0)
        except ProcessLookupError:
            return False
        return True


def _say(prog: str, text: str) -> None:
    print(f"{prog}: {time.strftime('%Y-%m-%dT%H:%M:%S%z')} {text}", file=sys.stderr, flush=True)


@click.command(
    help="Serve the version MODEL@ALIAS points at with `mlflow models serve`, and restart it on the new version "
         "when the alias moves (at once on a refitted event).", epilog=_EPILOG)
@click.argument("model", metavar="MODEL")
@click.argument("serve_arguments", nargs=-1, type=click.UNPROCESSED, metavar="[-- ARGS]")
@click.option("--alias", default="champion", metavar="ALIAS", help="the alias to follow (default champion)")
@click.option("--host", default="127.0.0.1", metavar="HOST", help="the server's address (default 127.0.0.1)")
@click.option("--port", type=int, default=8080, metavar="PORT", help="the server's port (default 8080)")
@click.option("--check-every", type=float, default=60.0, metavar="SECONDS",
              help="read the alias at least this often (default 60)")
@click.option("--grace", type=float, default=30.0, metavar="SECONDS",
              help="how long a stopped server may take to exit before it is killed (default 30)")
def command(model: str, serve_arguments: tuple[str, ...], alias: str, host: str, port: int, check_every: float,
            grace: float) -> int:
    """Serve MODEL@ALIAS until stopped; return the exit status (see the module docstring)."""
    args = _Options(model, alias, host, port, check_every, grace, serve_arguments)
    prog = click.get_current_context().command_path
    from mlflow.exceptions import MlflowException  # after parsing: --help loads neither MLflow nor Prefect

    from flows.registry.adapter import MlflowRegistry
    from flows.settings import ThermostatSettings

    settings = ThermostatSettings()
    registry = MlflowRegistry.from_settings(settings)
    try:
        version = registry.aliases(args.model).get(args.alias)
    except MlflowException as error:
        return fail(EXIT_COMPUTATION_FAILED, f"the registry could not be read: {settings.redacted(str(error))}")
    if version is None:
        return fail(EXIT_BAD_INPUT, f"{args.model}@{args.alias} does not exist (no such model, or no such alias): "
                                    "register a version first")
    env = os.environ | {"MLFLOW_TRACKING_URI": registry.tracking_uri, "MLFLOW_REGISTRY_URI": registry.registry_uri,
                        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    return asyncio.run(_supervise(prog, args, registry, version, env, settings.redacted))


async def _supervise(prog: str, args: _Options, registry: MlflowRegistry, version: str,
                     env: dict[str, str], redacted: Callable[[str], str]) -> int:
    """Serve ``version``; on a refitted event, and every ``--check-every`` seconds, read the alias and
    restart the server on the version it points at when that changed."""
    from flows.orchestration.rollout import events_reachable

    stopping = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        asyncio.get_running_loop().add_signal_handler(sig, stopping.set)
    server = _Server.start(args.model, version, args, env)
    _say(prog, f"serving models:/{args.model}/{version} (@{args.alias}) on http://{args.host}:{args.port} (pid "
               f"{server.process.pid}); restarted when @{args.alias} moves")
    try:
        async with AsyncExitStack() as stack:
            watch = await _watch(prog, stack, args) if events_reachable() else None
            if watch is None:
                _say(prog, f"no refitted events (PREFECT_API_URL not set, or its event stream unreachable); "
                           f"@{args.alias} is read every {args.check_every:g} s")
            checked = time.monotonic()
            while not stopping.is_set():
                if server.process.poll() is not None:
                    return refuse(prog, EXIT_COMPUTATION_FAILED, f"mlflow models serve of version {server.version} "
                                                                 f"exited by itself with status {server.process.returncode}")
                event = await _next_event(prog, watch, args.check_every)
                if event is None and time.monotonic() - checked < args.check_every:
                    continue
                checked = time.monotonic()
                holder = _alias_holder(prog, registry, args.model, args.alias, redacted)
                if holder is not None and holder != server.version:
                    why = ("the alias moved" if event is None else f"refitted event: version {event.new_version}, "
                           f"T={event.temperature:.4g}, {event.model_uri}")
                    _say(prog, f"@{args.alias} points at version {holder} ({why}): restarting mlflow models serve on "
                               f"models:/{args.model}/{holder}")
                    await asyncio.to_thread(server.stop, args.grace)
                    server = _Server.start(args.model, holder, args, env)
    finally:
        await asyncio.to_thread(server.stop, args.grace)
    _say(prog, f"stopped (was serving version {server.version})")
    return EXIT_OK


async def _watch(prog: str, stack: AsyncExitStack, args: _Options) -> RefittedWatch | None:
    """The refitted events of the alias, or None (said) when the Prefect server's stream cannot be joined."""
    from flows.orchestration.rollout import RefittedWatch

    try:
        return await stack.enter_async_context(RefittedWatch(args.model, args.alias))
    except Exception as error:  # noqa: BLE001 - serving goes on, reading the alias instead
        _say(prog, f"could not join the Prefect server's event stream ({type(error).__name__}: {error})")
        return None


async def _next_event(prog: str, watch: RefittedWatch | None, check_every: float) -> RefittedEvent | None:
    """The next refitted event within a second (None: none); without a working watch, a second's wait."""
    if watch is not None and watch.broken is None:
        event = await watch.next(timeout=1.0)
        if watch.broken is not None:
            _say(prog, f"the event stream broke ({watch.broken}): the alias is read every {check_every:g} s")
        return event
    await asyncio.sleep(1.0)
    return None


def _alias_holder(prog: str, registry: MlflowRegistry, model: str, alias: str,
                  redacted: Callable[[str], str]) -> str | None:
    """The version ``alias`` points at now; None when it cannot be read (said, and the server keeps serving)."""
    try:
        return registry.aliases(model).get(alias)
    except Exception as error:  # noqa: BLE001 - a registry that is down must not stop serving
        _say(prog, f"could not read @{alias} ({type(error).__name__}: {redacted(str(error))}); still serving")
        return None
