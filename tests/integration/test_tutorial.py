"""docs/tutorial.md, run as written: every fenced block, in order, on a state the demo made in a fresh folder.

Each block carries a ``<!-- doc-test: NAME (reason) -->`` marker or none:

- ``demo``: ``make demo``; the session's ``demo_state`` fixture has run ``thermostat demo`` in a
  fresh folder (what ``make demo`` runs once ``.venv`` exists), and its story must show the first
  registration and the first automatic refit;
- ``python``: run by this checkout's Python in the demo's folder;
- no marker (``bash``): run by ``bash -euo pipefail`` in the demo's folder, ``.venv/bin/`` being this
  checkout's and the dashboard's port a free one;
- ``background``: started there and stopped at the end (the dashboard);
- ``quick-start``: the own-model snippet (the README shows the same one), run in a fresh empty folder
  after a preamble that trains a digits classifier as the reader's ``model``;
- ``skip``: the clone (the test runs in the checkout) and a UI server.

The demo's state is shared with other tests of the session: the blocks run in its folder only read
it; the quick start, which registers a model, runs in a folder of its own.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.conftest import DemoState, isolated_env
from tests.support.doc_blocks import Block, fenced_blocks
from tests.support.ports import free_port
from tests.support.servers import stop_process

pytestmark = [pytest.mark.integration, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[2]
TUTORIAL = REPO / "docs" / "tutorial.md"
MARKERS = {None, "demo", "python", "background", "quick-start", "skip"}
# The reader's own model, as the quick start assumes it: a classifier and its data.
QUICK_START_PREAMBLE = """
from flows.cli.demo import digits_split, make_estimator
split = digits_split(seed=0)
model = make_estimator("logistic", 0).fit(split.features[split.train_index], split.labels[split.train_index])
X_holdout, y_holdout = split.features[split.holdout_index], split.labels[split.holdout_index]
holdout_ids, train_ids = split.ids[split.holdout_index], split.training_ids
"""


def _blocks() -> list[Block]:
    return fenced_blocks(TUTORIAL.read_text(), TUTORIAL.name)


def _run(command: list[str], cwd: Path, env: dict[str, str], block: Block, timeout: float = 600) -> str:
    done = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{block.where} exited {done.returncode}:\n{block.text}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.fixture
def background() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        stop_process(process, signal.SIGTERM, 20, group=True)


def test_every_block_is_marked_and_the_readme_shows_the_same_quick_start() -> None:
    blocks = _blocks()
    assert {block.marker for block in blocks} <= MARKERS, {block.marker for block in blocks}
    assert [block.marker for block in blocks].count("demo") == 1
    [quick_start] = [block for block in blocks if block.marker == "quick-start"]
    readme = [block for block in fenced_blocks((REPO / "README.md").read_text(), "README.md")
              if block.marker == "quick-start"]
    assert [block.text for block in readme] == [quick_start.text], "the README's quick start is the tutorial's"
    assert len(quick_start.text.splitlines()) <= 12


# The demo (the session's fixture, when this test is the first to ask for it) and a post-finetune in a
# fresh folder: 4-5 minutes on an idle machine, 15 on one loaded 6x over its cores.
@pytest.mark.timeout(1800)
def test_the_tutorial_runs_as_written(demo_state: DemoState, tmp_path: Path,
                                      background: list[subprocess.Popen[bytes]]) -> None:
    folder = demo_state.state_dir.parent
    port = free_port()
    outputs: list[str] = []
    for block in _blocks():
        if block.marker == "skip":
            continue
        if block.marker == "demo":
            assert block.text.strip() == "make demo"
            story = demo_state.output
            for phrase in ("digits@champion", "temperature     T =", "DRIFT", "REGISTERED -> version"):
                assert phrase in story, f"the demo's story lacks {phrase!r}:\n{story}"
            continue
        if block.marker == "quick-start":
            fresh = tmp_path / "own-model"
            fresh.mkdir()
            script = fresh / "quick_start.py"
            script.write_text(QUICK_START_PREAMBLE + block.text + "\n")
            out = _run([sys.executable, str(script)], fresh, isolated_env(fresh), block)
            assert "Registration(model_name='tickets', version='1', alias='champion', created=True" in out, out
            continue
        if block.marker == "python":
            outputs.append(_run([sys.executable, "-c", block.text], folder, demo_state.env, block))
            continue
        text = block.text.replace(".venv/bin/", f"{REPO}/.venv/bin/").replace("8765", str(port))
        if block.marker == "background":
            log = (tmp_path / f"block-{block.line}.log").open("wb")
            background.append(subprocess.Popen(["bash", "-euo", "pipefail", "-c", text], cwd=folder,
                                               env=demo_state.env, stdout=log, stderr=subprocess.STDOUT,
                                               start_new_session=True))
            continue
        outputs.append(_run(["bash", "-euo", "pipefail", "-c", text], folder, demo_state.env, block, timeout=120))

    versions, prediction, alerts = outputs
    assert "['champion']" in versions and "refit of v1" in versions, versions
    assert "model_version" in prediction and "temperature" in prediction, prediction
    assert '"refit_refused"' in alerts, alerts
