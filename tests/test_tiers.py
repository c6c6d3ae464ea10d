"""The fast tier starts no server: a test that uses a server fixture, or starts a server through
tests/support/servers.running, must be marked integration (make test-fast leaves those out)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import pytest

from tests.conftest import SERVER_FIXTURES, pytest_collection_modifyitems
from tests.support import servers

TESTS = Path(__file__).resolve().parent


@dataclass
class _Item:
    nodeid: str
    fixturenames: list[str]
    markers: list[str] = field(default_factory=list)

    def get_closest_marker(self, name: str) -> object | None:
        return name if name in self.markers else None


def _check(*items: _Item) -> None:
    pytest_collection_modifyitems(cast(pytest.Config, None), cast(list[pytest.Item], list(items)))


def test_a_test_using_a_server_fixture_without_the_integration_marker_fails_the_collection() -> None:
    unmarked = _Item("tests/x.py::test_a", ["tmp_path", "template", "prefect_api"])
    with pytest.raises(pytest.UsageError, match=r"tests/x.py::test_a \(uses prefect_api\)"):
        _check(_Item("tests/x.py::test_b", ["postgres_server"], ["integration"]), unmarked)
    _check(_Item("tests/x.py::test_b", ["postgres_server"], ["integration"]), _Item("tests/x.py::test_c", ["tmp_path"]))


def test_every_server_fixture_named_is_defined_under_tests() -> None:
    """A renamed fixture would silently leave the check: each name is a fixture of the suite."""
    sources = "\n".join(path.read_text() for path in TESTS.rglob("*.py"))
    defined = set(re.findall(r"@pytest\.fixture[^\n]*\n(?:@[^\n]*\n)*def (\w+)\(", sources))
    assert SERVER_FIXTURES <= defined, sorted(SERVER_FIXTURES - defined)


def test_starting_a_server_in_a_test_not_marked_integration_fails_it(tmp_path: Path,
                                                                    request: pytest.FixtureRequest) -> None:
    servers.note_current_test("tests/x.py::test_d", False)
    try:
        with pytest.raises(pytest.fail.Exception, match=r"tests/x.py::test_d starts a server \(sleep\) but is not "
                                                         r"marked integration"):
            with servers.running(["sleep", "60"], log=tmp_path / "log", what="sleep"):
                pass
    finally:
        servers.note_current_test(request.node.nodeid, False)  # this test's own record
    assert not (tmp_path / "log").exists()  # refused before anything started


def test_files_holding_slow_then_integration_tests_come_first_each_in_its_own_order() -> None:
    """`make test` hands files to its workers in collection order: the long ones must start first."""
    ordered = [_Item("tests/a.py::test_1", []), _Item("tests/b.py::test_1", [], ["integration"]),
               _Item("tests/a.py::test_2", []), _Item("tests/c.py::test_1", []),
               _Item("tests/c.py::test_2", [], ["integration", "slow"]), _Item("tests/b.py::test_2", []),
               _Item("tests/d.py::test_1", [], ["integration"]), _Item("tests/d.py::test_2", [], ["integration"])]
    pytest_collection_modifyitems(cast(pytest.Config, None), cast(list[pytest.Item], ordered))
    assert [item.nodeid for item in ordered] == [
        "tests/c.py::test_1", "tests/c.py::test_2", "tests/d.py::test_1", "tests/d.py::test_2",
        "tests/b.py::test_1", "tests/b.py::test_2", "tests/a.py::test_1", "tests/a.py::test_2"], (
        "slow files, then integration files (more integration tests first), then the rest")
