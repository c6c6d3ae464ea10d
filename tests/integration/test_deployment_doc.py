"""The production how-to pages, run as written: every ```bash block, in order, against real servers on loopback.

How the document is run
-----------------------
The document is the how-to pages of :data:`RECIPE` read one after the other (the production
set-up, the monitor, refit, serving, labels and ingest, scale-out, sizing and retention). The
blocks are read from the pages when the test runs (nothing is copied here) and run in
document order by ``bash -euo pipefail``, each in the shell state the blocks before it left
(exported variables and working directory, carried from block to block), as a person
following the recipe in one terminal would. What the test adds is only:

- **placeholders**, replaced by :func:`document_placeholders` (the PostgreSQL host, the ports, the
  checkout, the state and data folders, the passwords, the run id): loopback, free ports and
  temporary folders. A block that still holds anything that looks like a placeholder
  (:data:`LEFTOVER`: ``<...>``, ``*.internal``, ``*.example.com``, ``/srv/``, ``/data/``, ``/path/to/``, a
  loopback port not assigned here) fails the test: add the new placeholder to the mapping.
- **markers**, an HTML comment on the line before a fence, few and each with its reason:
  ``<!-- doc-test: background (...) -->`` for a block that runs until stopped (the MLflow
  server, the worker): it is started with the state at that point and stopped at the end
  (the worker with SIGINT, as the document says, then the servers with SIGTERM);
  ``<!-- doc-test: skip (...) -->`` for a block that needs what this test does not create
  (a model server and its traffic, a Dask cluster on other machines). A ``prefect server
  start ... &`` in a block keeps running after its block, like in a terminal, and is stopped
  at the end too (each block runs in its own process group).
- **the fine-tune job** of section 3, before the block that names ``<run_id>``: it trains the
  demo's digits classifier, logs it to the document's MLflow server, and runs the document's
  own ``write_features``/``write_ids`` Python snippet on its holdout and training ids.
- an environment without any ``THERMOSTAT_*``, ``MLFLOW_*`` or ``PREFECT_*`` of the caller,
  with a temporary ``PREFECT_HOME``, nothing sent outside the machine
  (``flows.orchestration.local_only.LOCAL_ONLY_ENVIRONMENT``), and speed-only settings that change what
  runs but not whether it works (:data:`SPEED_ONLY`: a worker polling every second, Prefect's
  scheduler off so that the monitor's hourly cron cannot start a run, fewer bootstrap resamples).

Then it checks what the recipe promises: the fine-tune's checkpoint is registered as
``tickets@champion`` in MLflow, whose backend store is the PostgreSQL database ``mlflow`` made
by ``thermostat setup-db``; the worker's prediction log and lock live in the database
``thermostat``; and every flow run the document started finished (the monitor's too).
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from flows.orchestration.local_only import LOCAL_ONLY_ENVIRONMENT
from tests.monitoring.conftest import postgres_server  # noqa: F401 - the throwaway PostgreSQL (session fixture)
from tests.support.doc_blocks import Block, Placeholders, Shell, fenced_blocks, log_name
from tests.support.ports import free_port


REPO = Path(__file__).resolve().parents[2]
# The pages whose blocks make one recipe, in the order the site's navigation reads them.
RECIPE = tuple(REPO / "docs" / page for page in (
    "production.md", "monitor.md", "refit.md", "serving.md", "ingest.md", "scale-out.md", "retention.md"))
SPEED_ONLY = {
    "PREFECT_SERVER_SERVICES_SCHEDULER_ENABLED": "false",
    "PREFECT_WORKER_QUERY_SECONDS": "1",
    "PREFECT_WORKER_PREFETCH_SECONDS": "1",
    "THERMOSTAT_BOOTSTRAP_RESAMPLES": "300",
}
def recipe_blocks() -> list[Block]:
    """Every fenced block of the :data:`RECIPE` pages, page after page."""
    return [block for page in RECIPE for block in fenced_blocks(page.read_text(), page.name)]


def document_placeholders(pg_port: int, mlflow_port: int, prefect_port: int, root: Path) -> Placeholders:
    """The document's placeholders and their values here (``<run_id>`` is added once known)."""
    return Placeholders({
        "db.internal:5432": f"127.0.0.1:{pg_port}",                      # the PostgreSQL server
        "/path/to/thermostat": str(REPO),                                  # the checkout
        "/srv/thermostat": str(root / "srv-thermostat"),                   # state and artifact folders
        "/data/tickets": str(root / "tickets-data"),                       # what the fine-tune job writes
        "<mlflow password>": f"m-{secrets.token_urlsafe(12)}",
        "<thermostat password>": f"t-{secrets.token_urlsafe(12)}",
        "127.0.0.1:5000": f"127.0.0.1:{mlflow_port}",                      # the MLflow server
        "--port 5000": f"--port {mlflow_port}",
        "https://mlflow.internal": f"http://127.0.0.1:{mlflow_port}",      # its UI, for links only
        "127.0.0.1:4200": f"127.0.0.1:{prefect_port}",                     # the Prefect server
        "--port 4200": f"--port {prefect_port}",
    }, Path(__file__).name)


@pytest.fixture
def shell(tmp_path: Path) -> Iterator[Shell]:
    if not (REPO / ".venv" / "bin" / "activate").exists():
        pytest.fail(f"the document runs `source .venv/bin/activate` in {REPO}; create it with `make` first")
    env = {key: value for key, value in os.environ.items() if not key.startswith(("THERMOSTAT_", "MLFLOW_", "PREFECT_"))}
    env |= LOCAL_ONLY_ENVIRONMENT | SPEED_ONLY | {"PREFECT_HOME": str(tmp_path / "prefect-home")}
    env.pop("PGPASSWORD", None)
    logs = tmp_path / "logs"
    logs.mkdir()
    state = Shell(env=env, cwd=tmp_path, logs=logs)
    try:
        yield state
    finally:
        state.stop_all()


def _finetune_job(placeholders: Placeholders, snippet: Block, tracking_uri: str) -> None:
    """What a fine-tune job does before section 3's command: log its checkpoint to the MLflow
    server, then write its inputs with the document's own snippet (run as written)."""
    from flows.cli.demo import digits_split, make_estimator, train_checkpoint
    from flows.registry.adapter import MlflowRegistry

    split = digits_split(seed=0)
    checkpoint = train_checkpoint(MlflowRegistry(tracking_uri), split, name="tickets-finetune",
                                  estimator=make_estimator("logistic", 0))
    placeholders.values["<run_id>"] = checkpoint.uri.split("/")[1]
    holdout = split.holdout_index
    exec(compile(placeholders.apply(snippet), snippet.where, "exec"), {  # noqa: S102
        "holdout_ids": split.ids[holdout], "holdout_features": split.features[holdout],
        "holdout_labels": split.labels[holdout], "train_ids": split.training_ids,
    })


def _flow_runs(api_url: str) -> list[dict[str, object]]:
    answer = httpx.post(f"{api_url}/flow_runs/filter", json={"limit": 50}, timeout=10)
    answer.raise_for_status()
    runs: list[dict[str, object]] = answer.json()
    return runs


def _wait_for_flow_runs(api_url: str, timeout: float) -> list[dict[str, object]]:
    """The document's flow runs, once none is scheduled, pending or running any more."""
    deadline = time.monotonic() + timeout
    while True:
        runs = _flow_runs(api_url)
        if all(run["state_type"] in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED") for run in runs) \
                or time.monotonic() > deadline:
            return runs
        time.sleep(1)


def test_every_block_is_marked_or_runnable_with_known_placeholders(tmp_path: Path) -> None:
    """Without servers: the markers are known, and every block that runs has only known placeholders."""
    placeholders = document_placeholders(5432, 5000, 4200, tmp_path)
    placeholders.values["<run_id>"] = "0123456789abcdef"
    blocks = [block for block in recipe_blocks() if block.language == "bash"]
    assert {block.marker for block in blocks} <= {None, "background", "skip"}
    run = [block for block in blocks if block.marker != "skip"]
    assert any("thermostat setup-db" in block.text for block in run)
    assert any("prefect deployment run post-finetune/post-finetune" in block.text for block in run)
    for block in run:
        placeholders.apply(block)


def test_an_unknown_placeholder_fails_the_test(tmp_path: Path) -> None:
    placeholders = document_placeholders(5432, 5000, 4200, tmp_path)
    for text in ("prefect server start --port 4300", "curl https://hooks.example.com/x", "export X=<your token>",
                 "ls /srv/other", "psql -h pg.internal"):
        with pytest.raises(pytest.fail.Exception, match="unknown placeholder"):
            placeholders.apply(Block(1, "bash", None, text))


@pytest.mark.integration
@pytest.mark.slow
def test_the_production_recipe_runs_as_written(postgres_server: str, shell: Shell, tmp_path: Path) -> None:  # noqa: F811
    import psycopg
    from mlflow.tracking import MlflowClient

    pg_port = int(postgres_server.rsplit(":", 1)[1].split("/")[0])
    mlflow_port, prefect_port = free_port(), free_port()
    placeholders = document_placeholders(pg_port, mlflow_port, prefect_port, tmp_path)
    tracking_uri, api_url = f"http://127.0.0.1:{mlflow_port}", f"http://127.0.0.1:{prefect_port}/api"
    blocks = recipe_blocks()
    snippets = [block for block in blocks if block.language == "python" and "write_features(" in block.text]
    assert len(snippets) == 1, "production.md's section 3 should show one Python snippet that writes the inputs"
    for block in blocks:
        if block.language != "bash" or block.marker == "skip":
            continue
        if block.marker not in (None, "background"):
            pytest.fail(f"{block.where}: unknown marker {block.marker!r}; use background or skip")
        if "<run_id>" in block.text and "<run_id>" not in placeholders.values:
            _finetune_job(placeholders, snippets[0], tracking_uri)
        text = placeholders.apply(block)
        if block.marker == "background":
            shell.start(text, block.where)
        else:
            shell.run(text, block.where)
    assert "<run_id>" in placeholders.values, "no block started post-finetune with a checkpoint's <run_id>"

    started = time.monotonic()
    runs = _wait_for_flow_runs(api_url, timeout=120)
    print(f"waited for flow runs: {time.monotonic() - started:.1f} s")
    states = sorted((str(run["name"]), str(run["state_type"]), str(run["deployment_id"])) for run in runs)
    print(states)
    assert len(runs) >= 2, f"the document started {len(runs)} flow run(s): {states}"
    assert all(state in ("COMPLETED", "CANCELLED") for _, state, _ in states), f"{states}\n{shell.tails()}"

    # The registered version, read from the MLflow server the document started...
    client = MlflowClient(tracking_uri=tracking_uri)
    version = client.get_model_version_by_alias("tickets", "champion")
    assert version.version == "1"
    assert version.tags["checkpoint_uri"] == f"runs:/{placeholders.values['<run_id>']}/checkpoint"
    assert version.tags["train_data_version"] == "tickets-2026-11-28" and version.tags["train_steps"] == "12000"
    assert float(version.tags["temperature"]) > 1.0
    # The version page's description, and the outcome `--watch` printed on the fine-tune job's terminal.
    assert version.description.startswith(f"**T = {float(version.tags['temperature']):.4g}** (95% interval ")
    watched = next(block for block in blocks if "prefect deployment run post-finetune/post-finetune" in block.text)
    output = (shell.logs / log_name(watched.where)).read_text()
    assert '"flow": "post-finetune", "status": "registered", "message": "registered tickets version 1 ' \
           '(models:/tickets/1): T=' in " ".join(output.split()), output[-4000:]
    # ... whose backend store is the database setup-db made; the worker's log and lock are in the other one.
    admin = postgres_server.replace("postgresql+psycopg://", "postgresql://")
    with psycopg.connect(admin.rsplit("/", 1)[0] + "/mlflow") as mlflow_db:
        assert mlflow_db.execute("SELECT name FROM registered_models").fetchall() == [("tickets",)]
    with psycopg.connect(admin.rsplit("/", 1)[0] + "/thermostat") as log_db:
        tables = {row[0] for row in log_db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
        owners = {row[0] for row in log_db.execute("SELECT tableowner FROM pg_tables WHERE schemaname = 'public'")}
    assert "prediction_log" in tables and owners == {"thermostat"}, (tables, owners)
