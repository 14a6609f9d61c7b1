"""Committed histories of the current build's protocol replay against the current workflow
code: a change that would make the workflow take another path on its own histories (a
nondeterminism) fails here. A protocol change is a new build (runs are pinned to the
build they start on: app.deployment), and its histories are recorded again."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from app import connection
from workflows.deliberation import Deliberation

HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))


def test_histories_are_committed() -> None:
    assert len(HISTORIES) >= 5


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(
        f"replay-{path.stem}", await asyncio.to_thread(path.read_text)
    )
    replayer = Replayer(workflows=[Deliberation], data_converter=connection.data_converter())
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None
