"""Help names the command the user typed: `python starter.py`, `python worker.py` and
`python -m web` in a checkout, `council`, `council-worker` and `council-web` once
installed (test_packaging.py runs the installed ones), and `bin/council`,
`bin/council-worker` and `bin/council-web`, the checkout's launchers (test_launcher.py
runs them)."""

from __future__ import annotations

import pytest

import starter
from app.installation import commands
from service import command as worker_command
from web import __main__ as web

pytestmark = pytest.mark.fast

CHECKOUT = {
    commands.CLI: "starter.py",
    commands.WORKER: "worker.py",
    commands.WEB: "python -m web",
}


def usage(command: str, capsys: pytest.CaptureFixture[str]) -> str:
    if command == commands.CLI:
        return starter.parser().format_usage()
    parse = worker_command.parse_args if command == commands.WORKER else web.parse_args
    with pytest.raises(SystemExit):
        parse(["--help"])
    return capsys.readouterr().out


@pytest.mark.parametrize("command", sorted(CHECKOUT))
def test_help_names_the_command_as_it_was_typed(
    command: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.argv", ["starter.py"])
    assert usage(command, capsys).startswith(f"usage: {CHECKOUT[command]} ")
    monkeypatch.setattr("sys.argv", [f"/home/someone/.local/bin/{command}"])
    assert usage(command, capsys).startswith(f"usage: {command} ")
    # The checkout's launcher, as typed.
    monkeypatch.setattr("sys.argv", [f"bin/{command}"])
    assert usage(command, capsys).startswith(f"usage: bin/{command} ")


def test_hints_name_the_command_as_it_was_typed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.argv", ["starter.py"])
    assert starter.command() == "python starter.py"
    monkeypatch.setattr("sys.argv", ["/opt/pipx/venvs/council/bin/council"])
    assert starter.command() == "council"
    monkeypatch.setattr("sys.argv", ["./bin/council"])
    assert starter.command() == "./bin/council"
