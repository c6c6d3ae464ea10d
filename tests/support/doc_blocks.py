"""A document's fenced blocks, run as written: read, placeholders replaced, run in one shell's state.

The doc tests (``tests/integration/test_deployment_doc.py``, ``test_own_model_walkthrough.py``,
``test_tutorial.py``)
read a page's blocks when they run (nothing is copied into the test) and run them in document
order, as a person following the page in one terminal would:

- :func:`fenced_blocks` gives every fenced block with its **marker**, an HTML comment on the line
  before the fence (``<!-- doc-test: NAME (reason) -->``, e.g. ``background``, ``skip``);
- :class:`Placeholders` replaces the page's placeholders (hosts, ports, folders, passwords, run
  ids) with loopback values, and fails on anything left that looks like one (:data:`LEFTOVER`);
- :class:`Shell` runs each ``bash`` block with ``bash -euo pipefail`` in the state the blocks
  before it left (exported variables, working directory), each block in its own process group,
  and stops every group at the end (a worker with SIGINT first, then the servers with SIGTERM).
"""

from __future__ import annotations

import re
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.support.servers import stop_process

MARKER = re.compile(r"<!-- doc-test: ([\w-]+)(?: \((.+)\))? -->")
# Anything in a block that looks like a value the reader must replace, left after the mapping.
LEFTOVER = re.compile(
    r"<[a-z_ ]+>|[\w.-]+\.(?:internal|example\.com)\b|/srv/|/data/|/path/to/|(?:127\.0\.0\.1|localhost):\d+|--port \d+"
)


@dataclass(frozen=True)
class Block:
    """One fenced block: the page and line of its fence, its marker (or None) and its text."""

    line: int
    language: str
    marker: str | None
    text: str
    page: str = "document"

    @property
    def where(self) -> str:
        """``page.md:line``, for messages and log names."""
        return f"{self.page}:{self.line}"


def fenced_blocks(markdown: str, page: str = "document") -> list[Block]:
    """Every fenced block of ``markdown`` (the page ``page``), with the doc-test marker of the line before it."""
    blocks, lines, index = [], markdown.splitlines(), 0
    while index < len(lines):
        opening = re.fullmatch(r"```(\w*)\s*", lines[index])
        if opening is None:
            index += 1
            continue
        end = next(i for i in range(index + 1, len(lines)) if lines[i].startswith("```"))
        previous = lines[index - 1].strip() if index else ""
        marked = MARKER.fullmatch(previous)
        if previous.startswith("<!-- doc-test") and marked is None:
            pytest.fail(f"{page}:{index}: malformed marker {previous!r}; write <!-- doc-test: NAME (reason) -->")
        blocks.append(Block(index + 1, opening[1], None if marked is None else marked[1],
                            "\n".join(lines[index + 1:end]), page))
        index = end + 1
    return blocks


@dataclass
class Placeholders:
    """The page's placeholders and what they stand for here; a value known only later (a run id
    once the checkpoint is logged) is added to ``values`` then."""

    values: dict[str, str]
    test_file: str

    def apply(self, block: Block) -> str:
        text = block.text
        for placeholder, value in self.values.items():
            text = text.replace(placeholder, value)
        assigned = {value for value in self.values.values() if value.startswith(("127.0.0.1:", "--port "))}
        unknown = sorted({found for found in LEFTOVER.findall(text) if found not in assigned})
        if unknown:
            pytest.fail(f"{block.where}: unknown placeholder(s) {unknown} in the block below; add "
                        f"them to the placeholders of {self.test_file}\n{block.text}")
        return text


@dataclass
class Shell:
    """The state one terminal would carry from block to block, and every process group started."""

    env: dict[str, str]
    cwd: Path
    logs: Path
    # (log name, the block's bash, stop signal); each block's bash leads its own process group
    groups: list[tuple[str, subprocess.Popen[bytes], signal.Signals]] = field(default_factory=list)

    def run(self, text: str, where: str, *, timeout: float = 240) -> None:
        """Run the block at ``where`` (``page.md:line``) to its end (its ``&`` children keep
        running); carry its state on."""
        env_file, cwd_file, log = self.logs / "env", self.logs / "cwd", self.logs / log_name(where)
        script = f'{text}\nenv -0 > "{env_file}"; pwd > "{cwd_file}"\n'
        with log.open("wb") as output:
            process = subprocess.Popen(["bash", "-euo", "pipefail", "-c", script], cwd=self.cwd, env=self.env,
                                       stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self.groups.append((log.name, process, signal.SIGTERM))
        started = time.monotonic()
        try:
            status = process.wait(timeout=timeout)
            print(f"block {where}: {time.monotonic() - started:.1f} s")
        except subprocess.TimeoutExpired:
            pytest.fail(f"{where}: the block did not finish in {timeout:.0f} s:\n{text}\n"
                        f"{self.tails(log)}")
        if status != 0:
            pytest.fail(f"{where}: the block exited with {status}:\n{text}\n{self.tails(log)}")
        self.env = dict(entry.split("=", 1) for entry in env_file.read_text().split("\0") if "=" in entry)
        self.cwd = Path(cwd_file.read_text().strip())

    def start(self, text: str, where: str) -> None:
        """Start the block at ``where`` that runs until stopped, in the current state."""
        stop = signal.SIGINT if "prefect worker start" in text else signal.SIGTERM
        with (self.logs / log_name(where)).open("wb") as output:
            process = subprocess.Popen(["bash", "-euo", "pipefail", "-c", text], cwd=self.cwd, env=self.env,
                                       stdout=output, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                       start_new_session=True)
        self.groups.append((log_name(where), process, stop))

    def stop_all(self) -> None:
        """The worker first (SIGINT and a grace period, as the documents say), then the servers."""
        for _, process, stop in sorted(reversed(self.groups), key=lambda group: group[2] != signal.SIGINT):
            started = time.monotonic()
            stopped = stop_process(process, stop, 20, group=True)
            print(f"stop {process.pid} {stop!r}: {time.monotonic() - started:.1f} s{'' if stopped else ', killed'}")

    def tails(self, *first: Path) -> str:
        logs = [*first, *(self.logs / name for name, _, _ in self.groups if (self.logs / name) not in first)]
        return "\n".join(f"--- {log.name} (last 3000 characters)\n{log.read_text(errors='replace')[-3000:]}"
                         for log in logs if log.exists())


def log_name(where: str) -> str:
    """The log file of the block at ``page.md:line``."""
    return "block-" + where.replace(".md:", "-") + ".log"
