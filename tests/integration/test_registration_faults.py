"""Registration under crashes, transport retries and transient errors, on the real stack (issue 10).

* Deterministic crash points: a child process runs post-finetune and dies (``os._exit``) right
  before or after one MLflow call of the registration; then a fresh run of the same checkpoint
  must leave exactly one complete version, the alias on it, no open run and the lock free —
  on the embedded default (SQLite store) and against a real ``mlflow server`` on loopback.
* A proxy that answers 504 after forwarding the first ``runs/create`` and the first
  ``model-versions/create`` (MLflow's HTTP client then repeats the POST): one run, one version.
* One transient error in each retried step: the flow succeeds; a rolled-back run ends FAILED.
* The embedded Prefect API: a crashed run leaves no server process and no lock behind, and two
  runs starting together on a fresh PREFECT_HOME both succeed.
* A holder paused (SIGSTOP) right after its alias move, past its lease, while a successor takes
  the lock over and registers: once resumed it writes nothing (no rollback either), and the
  successor's version and alias stay — with the lock on SQLite and on PostgreSQL (issue 19).
"""

from __future__ import annotations

import http.client
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from flows.orchestration.locks import show_lock
from flows.pipelines.post_finetune import post_finetune
from flows.pipelines.registration import ALIAS_TAG, PREVIOUS_ALIAS_VERSION_TAG, Registration
from flows.registry.adapter import REGISTRATION_COMPLETE, REGISTRATION_TAG, MlflowRegistry
from flows.settings import ThermostatSettings
from tests.integration.conftest import Template, mlflow_client, mlflow_server
from tests.monitoring.conftest import postgres_server, postgres_url  # noqa: F401 - the throwaway PostgreSQL

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent
CRASHED = 70

# Crash point -> the MLflow call (and side) where the child dies, and what the fresh run must say.
CRASH_POINTS: dict[str, tuple[str, str, str | None]] = {
    "after-open-run": ("after:create_run", "registered", "marked run"),
    "after-create": ("after:create_model_version", "registered", "removed version 1"),
    "after-alias": ("after:set_registered_model_alias", "completed", "completed version 1"),
    "before-close-run": ("before:set_terminated", "completed", "completed version 1"),
    "after-close-run": ("after:set_terminated", "completed", "completed version 1"),
    "after-complete-tag": ("after:set_model_version_tag", "already_registered", None),
}


@pytest.fixture(scope="module")
def server_url(template: Template, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real ``mlflow server`` on loopback for this module, over a copy of the template store."""
    root = tmp_path_factory.mktemp("mlflow-server")
    with mlflow_server(template.db, root, "--default-artifact-root", str(root / "artifacts")) as url:
        yield url


@dataclass(frozen=True)
class Target:
    settings: ThermostatSettings
    model_name: str

    @property
    def registry(self) -> MlflowRegistry:
        return MlflowRegistry.from_settings(self.settings)


def _target(backend: str, state_dir: Path, template: Template, model_name: str, server_url: str | None) -> Target:
    state_dir.mkdir(parents=True, exist_ok=True)
    if backend == "embedded":
        shutil.copyfile(template.db, state_dir / "mlflow.db")
        settings = ThermostatSettings(state_dir=state_dir, bootstrap_resamples=300)
    else:
        settings = ThermostatSettings(state_dir=state_dir, tracking_uri=server_url, bootstrap_resamples=300)
    return Target(settings=settings, model_name=model_name)


def _run_args(template: Template, model_name: str) -> dict[str, Any]:
    return {"model_name": model_name, "checkpoint_uri": template.checkpoints["logistic"].uri, "train_steps": 7,
            "train_data_version": "digits-train-v1", "features_path": str(template.features_path),
            "training_ids_path": str(template.training_ids_path)}


def _crash_spec(target: Target, template: Template, crash: str, workdir: Path) -> dict[str, Any]:
    settings: dict[str, Any] = {"state_dir": str(target.settings.state_dir), "bootstrap_resamples": 300}
    if target.settings.tracking_uri:
        settings["tracking_uri"] = target.settings.tracking_uri
    return {"crash": crash, "run": _run_args(template, target.model_name), "settings": settings,
            "pid_file": str(workdir / "server.pid")}


def _run_crashes(specs: list[dict[str, Any]], env: dict[str, str], log: Path) -> list[int]:
    """Each spec's run in its own process (forked from one that imported the stack), one by one."""
    with log.open("wb") as output:
        done = subprocess.run([sys.executable, "-m", "tests.integration.crash_child", json.dumps(specs)], cwd=ROOT,
                              env=env, stdout=subprocess.PIPE, stderr=output, timeout=600)
    if done.returncode != 0:
        pytest.fail(f"the crash runner failed: {log.read_text(errors='replace')[-3000:]}")
    return list(json.loads(done.stdout.decode().strip().splitlines()[-1])["exit_codes"])


def _harness_env() -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    api_url = PREFECT_API_URL.value()
    assert api_url, "the Prefect test harness sets PREFECT_API_URL"
    return os.environ | {"PREFECT_API_URL": str(api_url)}


def _open_runs(registry: MlflowRegistry, model_name: str) -> list[str]:
    runs = mlflow_client(registry).search_runs([registry.experiment_id()], "attributes.status = 'RUNNING'")
    return [run.info.run_id for run in runs if run.data.tags.get("thermostat.model_name") == model_name]


def _assert_one_complete_version_with_alias(target: Target, registration: Registration) -> None:
    registry, name = target.registry, target.model_name
    versions = registry.versions(name)
    assert [str(v.version) for v in versions] == [registration.version], [v.version for v in versions]
    assert versions[0].tags[REGISTRATION_TAG] == REGISTRATION_COMPLETE
    assert registry.aliases(name) == {"champion": registration.version}
    assert _open_runs(registry, name) == []
    assert registry.run_state(str(versions[0].run_id)) == "FINISHED"
    assert show_lock(name, target.settings) is None


@pytest.fixture(scope="module", params=["embedded", "server"])
def crashed(request: pytest.FixtureRequest, template: Template, prefect_api: None,
            tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Target, int, str]]:
    """Every crash point's child run (one store and lock per point), died."""
    backend = str(request.param)
    server_url = request.getfixturevalue("server_url") if backend == "server" else None
    root = tmp_path_factory.mktemp(f"crashes-{backend}")
    targets = {point: _target(backend, root / point / "state", template, f"crash-{backend}-{point}", server_url)
               for point in CRASH_POINTS}
    specs = [_crash_spec(targets[point], template, crash, root / point) for point, (crash, _, _) in CRASH_POINTS.items()]
    codes = _run_crashes(specs, _harness_env(), root / "children.log")
    log = (root / "children.log").read_text(errors="replace")[-3000:]
    return {point: (targets[point], code, log) for point, code in zip(CRASH_POINTS, codes)}


@pytest.mark.parametrize("point", list(CRASH_POINTS))
def test_a_fresh_run_after_a_crash_leaves_one_complete_version(
    crashed: dict[str, tuple[Target, int, str]], template: Template, point: str
) -> None:
    target, code, log = crashed[point]
    assert code == CRASHED, f"the child did not die at {point}: exit {code}\n{log}"
    left = show_lock(target.model_name, target.settings)
    assert left is not None and left.alive is False  # the dead holder's row: taken over at once
    _, outcome, repair = CRASH_POINTS[point]
    registration = post_finetune(**_run_args(template, target.model_name), settings=target.settings)
    assert registration.outcome == outcome, registration.repairs
    if repair is None:
        assert registration.repairs == ()
    else:
        assert any(r.startswith(repair) for r in registration.repairs), registration.repairs
    _assert_one_complete_version_with_alias(target, registration)
    # And a run after that is a plain repeat.
    again = post_finetune(**_run_args(template, target.model_name), settings=target.settings)
    assert (again.outcome, again.version, again.repairs) == ("already_registered", registration.version, ())


class _GatewayTimeoutOnce(http.server.BaseHTTPRequestHandler):
    """Forwards everything to the MLflow server; the first POST to each path in ``fail_once``
    is forwarded, committed, and then answered 504 (a gateway that timed out waiting)."""

    upstream: tuple[str, int]
    fail_once: set[str]
    failed: list[str]
    lock = threading.Lock()

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        connection = http.client.HTTPConnection(*self.upstream, timeout=60)
        headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
        connection.request(self.command, self.path, body=body, headers=headers)
        answer = connection.getresponse()
        payload = answer.read()
        connection.close()
        path = self.path.split("?")[0]
        with self.lock:
            suffixes = [suffix for suffix in self.fail_once if path.endswith(suffix)]
            fail = self.command == "POST" and bool(suffixes)
            if fail:
                self.fail_once.difference_update(suffixes)  # the class's set: shared by every request
                self.failed.append(path)
        if fail:
            self.send_response(504)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    do_GET = do_POST = do_PATCH = do_DELETE = do_PUT = _forward


def test_a_504_after_the_create_calls_were_committed_leaves_one_run_and_one_version(
    server_url: str, template: Template, prefect_api: None, tmp_path: Path
) -> None:
    host, port = server_url.removeprefix("http://").split(":")
    handler = type("Handler", (_GatewayTimeoutOnce,), {
        "upstream": (host, int(port)), "fail_once": {"/runs/create", "/model-versions/create"}, "failed": [],
    })
    proxy = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=proxy.serve_forever, daemon=True)
    thread.start()
    try:
        proxy_url = f"http://127.0.0.1:{proxy.server_address[1]}"
        target = _target("server", tmp_path / "state", template, "behind-a-gateway", proxy_url)
        registration = post_finetune(**_run_args(template, target.model_name), settings=target.settings)
    finally:
        proxy.shutdown()
        thread.join()
    assert sorted(handler.failed) == ["/api/2.0/mlflow/model-versions/create", "/api/2.0/mlflow/runs/create"]
    direct = Target(settings=target.settings.model_copy(update={"tracking_uri": server_url}),
                    model_name=target.model_name)
    assert registration.outcome == "registered"
    _assert_one_complete_version_with_alias(direct, registration)
    runs = mlflow_client(direct.registry).search_runs([direct.registry.experiment_id()],
                                              f"tags.idempotency_key = '{registration.tags['idempotency_key']}'")
    statuses = sorted(run.info.status for run in runs if run.data.tags["thermostat.model_name"] == target.model_name)
    assert statuses == ["FAILED", "FINISHED"]  # the HTTP retry's copy of the run is closed


# Each retried step of the transaction, and the MLflow call that fails once in it.
BLIPS = {
    "evidence": ("log_batch", lambda args, kwargs: True),
    "model-upload": ("log_artifacts", lambda args, kwargs: True),
    "alias": ("set_registered_model_alias", lambda args, kwargs: True),
    "close-run": ("set_terminated", lambda args, kwargs: kwargs.get("status") == "FINISHED"),
    "complete-tag": ("set_model_version_tag", lambda args, kwargs: args[2] == REGISTRATION_TAG),
}


def _blip_once(monkeypatch: pytest.MonkeyPatch, method: str, matches: Any, *, commit_first: bool = False) -> list[str]:
    original, hits = getattr(MlflowClient, method), []

    def flaky(self: MlflowClient, *args: Any, **kwargs: Any) -> Any:
        if not hits and matches(args, kwargs):
            hits.append(method)
            if commit_first:  # the server did it, the reply was lost
                original(self, *args, **kwargs)
            raise MlflowException("injected: 503 from the gateway", error_code="TEMPORARILY_UNAVAILABLE")
        return original(self, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, method, flaky)
    return hits


@pytest.mark.parametrize("step", list(BLIPS))
def test_one_transient_error_in_a_step_is_retried_in_place(
    step: str, template: Template, prefect_api: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _target("embedded", tmp_path, template, "digits", None)
    method, matches = BLIPS[step]
    hits = _blip_once(monkeypatch, method, matches)
    registration = post_finetune(**_run_args(template, "digits"), settings=target.settings)
    assert hits == [method] and registration.outcome == "registered" and registration.version == "1"
    _assert_one_complete_version_with_alias(target, registration)


def test_a_rolled_back_run_ends_failed_even_after_a_blip_in_closing_it(
    template: Template, prefect_api: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = _target("embedded", tmp_path, template, "digits", None)
    # Closing the run: committed by the server, reply lost, retried in place. Then the completion
    # tag fails for good: the whole registration rolls back, and the run must end FAILED.
    _blip_once(monkeypatch, "set_terminated", BLIPS["close-run"][1], commit_first=True)
    original = MlflowClient.set_model_version_tag

    def refuse(self: MlflowClient, name: str, version: str, key: str, value: Any) -> None:
        if key == REGISTRATION_TAG:
            raise MlflowException("injected: permission denied", error_code="PERMISSION_DENIED")
        original(self, name, version, key, value)

    monkeypatch.setattr(MlflowClient, "set_model_version_tag", refuse)
    with pytest.raises(MlflowException, match="permission denied"):
        post_finetune(**_run_args(template, "digits"), settings=target.settings)
    registry = target.registry
    assert registry.versions("digits") == [] and registry.aliases("digits") == {}
    runs = mlflow_client(registry).search_runs([registry.experiment_id()])
    assert [run.info.status for run in runs] == ["FAILED"]
    assert show_lock("digits", target.settings) is None


def test_a_step_that_fails_after_the_server_applied_it_undoes_its_own_part(
    template: Template, prefect_api: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Prefect stages a task's rollback hooks only when the task succeeds: the alias move that
    the server applied before failing must put the alias back itself (not leave it unset when
    the new version is deleted)."""
    target = _target("embedded", tmp_path, template, "digits", None)
    first = post_finetune(**_run_args(template, "digits"), settings=target.settings)
    original = MlflowClient.set_registered_model_alias

    def applied_then_refused(self: MlflowClient, name: str, alias: str, version: str) -> None:
        original(self, name, alias, version)
        if version != first.version:  # the move to the new version (the undo moves it back)
            raise MlflowException("injected: the reply was lost, then access denied", error_code="PERMISSION_DENIED")

    monkeypatch.setattr(MlflowClient, "set_registered_model_alias", applied_then_refused)
    with pytest.raises(MlflowException, match="access denied"):
        post_finetune(**(_run_args(template, "digits") | {"checkpoint_uri": template.checkpoints["mlp"].uri}),
                      settings=target.settings)
    registry = target.registry
    assert [str(v.version) for v in registry.versions("digits")] == [first.version]
    assert registry.aliases("digits") == {"champion": first.version}
    runs = mlflow_client(registry).search_runs([registry.experiment_id()], order_by=["attributes.start_time ASC"])
    assert [run.info.status for run in runs] == ["FINISHED", "FAILED"]
    assert show_lock("digits", target.settings) is None


def test_recovery_gives_the_alias_back_when_it_removes_a_version_it_points_at(
    template: Template, prefect_api: None, tmp_path: Path
) -> None:
    """A pending version an alias points at whose run was rolled back (FAILED) is removed by the
    next run, and the alias goes back to the version it held before (recorded with the version)."""
    target = _target("embedded", tmp_path, template, "digits", None)
    first = post_finetune(**_run_args(template, "digits"), settings=target.settings)
    client = mlflow_client(target.registry)
    run = client.create_run(target.registry.experiment_id())
    left = client.create_model_version(
        "digits", source=f"runs:/{run.info.run_id}/model", run_id=run.info.run_id,
        tags=first.tags | {REGISTRATION_TAG: "pending", ALIAS_TAG: "champion", PREVIOUS_ALIAS_VERSION_TAG: first.version},
    )
    client.set_registered_model_alias("digits", "champion", str(left.version))
    client.set_terminated(run.info.run_id, status="FAILED")
    again = post_finetune(**_run_args(template, "digits"), settings=target.settings)
    assert again.outcome == "already_registered" and again.version == first.version
    assert any(f"removed version {left.version}" in repair and f"@champion is back on version {first.version}" in repair
               for repair in again.repairs), again.repairs
    assert target.registry.aliases("digits") == {"champion": first.version}
    assert [str(v.version) for v in target.registry.versions("digits")] == [first.version]


def test_a_quoted_model_name_registers_and_repeats(template: Template, prefect_api: None, tmp_path: Path) -> None:
    """Issue 9, defect 5: the idempotency look-up of ``o'brien`` used to end in an MLflow filter error."""
    target = _target("embedded", tmp_path, template, "o'brien", None)
    first = post_finetune(**_run_args(template, "o'brien"), settings=target.settings)
    again = post_finetune(**_run_args(template, "o'brien"), settings=target.settings)
    assert (first.outcome, again.outcome, again.version) == ("registered", "already_registered", first.version)
    with pytest.raises(ValueError, match="cannot contain '/' or ':'"):
        post_finetune(**_run_args(template, "team/model"), settings=target.settings)


# ------------------------------------------------------------------ the embedded Prefect API


def _gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return True
        if state == "Z":
            return True
        time.sleep(0.2)
    return False


def test_a_crash_on_the_embedded_default_leaves_no_server_and_no_lock(
    template: Template, prefect_api: None, tmp_path: Path
) -> None:
    """The child has no PREFECT_API_URL: Prefect starts its own API server on a fresh home.
    It dies right after creating the version, as ``kill -9`` would leave it."""
    target = _target("embedded", tmp_path / "state", template, "digits", None)
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {"PREFECT_HOME": str(tmp_path / "home")}
    codes = _run_crashes([_crash_spec(target, template, "after:create_model_version", tmp_path)], env,
                         tmp_path / "child.log")
    assert codes == [CRASHED], (tmp_path / "child.log").read_text()[-3000:]
    server_pid = int((tmp_path / "server.pid").read_text())
    assert _gone(server_pid, timeout=15), f"the embedded Prefect server (pid {server_pid}) outlived its run"
    registration = post_finetune(**_run_args(template, "digits"), settings=target.settings)
    assert registration.outcome == "registered" and registration.version == "2"
    assert any(r.startswith("removed version 1") for r in registration.repairs), registration.repairs
    _assert_one_complete_version_with_alias(target, registration)


_PING_FLOW = """
import sys
import flows.pipelines.post_finetune  # installs the guard of the embedded API server
from prefect import flow

@flow(name="ping")
def ping() -> int:
    return 1

sys.exit(0 if ping() == 1 else 1)
"""


def test_two_runs_starting_together_on_a_fresh_prefect_home_both_succeed(tmp_path: Path) -> None:
    """Issue 10, item 5: they used to race in Prefect's schema migration (1 of 5 died)."""
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"} | {"PREFECT_HOME": str(tmp_path / "home")}
    children = [subprocess.Popen([sys.executable, "-c", _PING_FLOW], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT) for _ in range(2)]
    outputs = [child.communicate(timeout=300)[0].decode(errors="replace") for child in children]
    assert [child.returncode for child in children] == [0, 0], "\n----\n".join(o[-2000:] for o in outputs)
    assert (tmp_path / "home" / "thermostat-ephemeral-start.lock").exists()


# ----------------------------------------------------------------- a paused holder (issue 19)


def _stopped_pid(pause_file: Path, runner: subprocess.Popen[bytes], log: Path, timeout: float = 300) -> int:
    """The PID the paused child wrote, once that process is stopped (state T)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = pause_file.read_text().strip() if pause_file.exists() else ""
        if text:
            state = Path(f"/proc/{text}/stat").read_text().rsplit(")", 1)[1].split()[0]
            if state == "T":
                return int(text)
        if runner.poll() is not None:
            break
        time.sleep(0.05)
    runner.kill()
    pytest.fail(f"the child did not pause after its alias move: {log.read_text(errors='replace')[-3000:]}")


# The lock database, and what the successor registers: another checkpoint (a new version and
# @champion moved to it) or the same one (it completes the paused run's version).
@pytest.mark.parametrize(("lock_database", "successor_checkpoint"),
                         [("sqlite", "mlp"), ("sqlite", "logistic"), ("postgresql", "mlp")])
def test_a_holder_paused_after_its_alias_move_cannot_undo_its_successors_registration(
    lock_database: str, successor_checkpoint: str, template: Template, prefect_api: None, tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    """Issue 19, item 1: the paused run used to roll back when it resumed (its lease taken over):
    @champion deleted and the version its successor completed deleted — with the same checkpoint
    the registry was left with no version and no alias after both runs had reported success."""
    name = f"paused-{lock_database}-{successor_checkpoint}"
    target = _target("embedded", tmp_path / "state", template, name, None)
    # A short lease (the successor waits for it), long enough that a busy machine does not starve the
    # holder's renewals before its pause: the test is about the pause, not a lost renewal.
    lock: dict[str, Any] = {"lock_lease_seconds": 6.0}
    if lock_database == "postgresql":
        lock["prediction_log_url"] = request.getfixturevalue("postgres_url")
    settings = target.settings.model_copy(update=lock)
    spec = _crash_spec(target, template, "after:set_registered_model_alias", tmp_path)
    spec["settings"] |= lock
    spec["pause_file"] = str(tmp_path / "paused.pid")
    log = tmp_path / "child.log"
    with log.open("wb") as output:
        runner = subprocess.Popen([sys.executable, "-m", "tests.integration.crash_child", json.dumps([spec])], cwd=ROOT,
                                  env=_harness_env(), stdout=subprocess.PIPE, stderr=output)
    try:
        paused = _stopped_pid(Path(spec["pause_file"]), runner, log)
        successor = post_finetune(**(_run_args(template, name) | {"checkpoint_uri": template.checkpoints[
            successor_checkpoint].uri}), settings=settings)
        os.kill(paused, signal.SIGCONT)
        out, _ = runner.communicate(timeout=300)
    finally:
        if runner.poll() is None:
            os.kill(paused, signal.SIGCONT)
            runner.kill()
            runner.wait(timeout=30)
    child_log = log.read_text(errors="replace")
    codes = json.loads(out.decode().strip().splitlines()[-1])["exit_codes"]
    assert codes == [1] and "child ended with LockLostError" in child_log, (codes, child_log[-3000:])
    # The successor found the paused run's version with @champion on it and completed it.
    assert any(r.startswith("completed version 1") for r in successor.repairs), successor.repairs
    registry = target.registry
    expected = ["1", "2"] if successor_checkpoint == "mlp" else ["1"]
    assert (successor.outcome, successor.version) == (("registered", "2") if successor_checkpoint == "mlp"
                                                      else ("completed", "1"))
    versions = registry.versions(name)
    assert sorted(str(v.version) for v in versions) == expected, [v.version for v in versions]
    assert all(v.tags[REGISTRATION_TAG] == REGISTRATION_COMPLETE for v in versions)
    assert registry.aliases(name) == {"champion": successor.version}
    assert all(registry.run_state(str(v.run_id)) == "FINISHED" for v in versions)
    assert _open_runs(registry, name) == []
    assert show_lock(name, settings) is None
