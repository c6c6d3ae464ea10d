"""``run_click``: a click command as a function returning the exit status (``flows.exit_status``)."""

from __future__ import annotations

import click
import pytest

from flows.exit_status import EXIT_BAD_INPUT, EXIT_OK, fail, run_click


@click.group()
def tool() -> None:
    """A tool with two subcommands."""


@tool.command()
@click.argument("status", type=int)
def returns(status: int) -> int:
    return status


@tool.command()
@click.option("--reason", required=True)
def refuses(reason: str) -> int:
    return fail(EXIT_BAD_INPUT, reason)


@click.command()
def silent() -> None:
    """Returns nothing: that is 0."""


def test_the_callbacks_status_is_returned_and_nothing_exits() -> None:
    assert run_click(tool, ["returns", "3"], "thermostat tool") == 3
    assert run_click(tool, ["returns", "0"], "thermostat tool") == 0
    assert run_click(silent, [], "thermostat silent") == EXIT_OK


def test_help_is_0_on_stdout(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_click(tool, ["--help"], "thermostat tool") == 0
    assert run_click(tool, ["returns", "--help"], "thermostat tool") == 0
    out, err = capsys.readouterr()
    assert "Usage: thermostat tool [OPTIONS] COMMAND" in out and "Usage: thermostat tool returns" in out and err == ""


@pytest.mark.parametrize(("argv", "message"), [
    (["returns", "x"], "thermostat tool returns: error: Invalid value for 'STATUS': 'x' is not a valid integer"),
    (["refuses"], "thermostat tool refuses: error: Missing option '--reason'"),
    (["frobnicate"], "thermostat tool: error: No such command 'frobnicate'"),
    (["returns", "1", "--no-such-flag"], "thermostat tool returns: error: No such option '--no-such-flag'"),
])
def test_a_usage_error_is_2_on_stderr_with_the_usage(argv: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert run_click(tool, argv, "thermostat tool") == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == "" and message in err and err.startswith("Usage: thermostat tool"), err


def test_a_refusal_names_the_running_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_click(tool, ["refuses", "--reason", "no such file"], "thermostat tool") == EXIT_BAD_INPUT
    assert capsys.readouterr().err == "thermostat tool refuses: error: no such file\n"


def test_a_group_without_its_subcommand_is_2_with_the_help_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    assert run_click(tool, [], "thermostat tool") == EXIT_BAD_INPUT
    out, err = capsys.readouterr()
    assert out == "" and "Commands:" in err
