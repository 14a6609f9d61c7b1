"""Committed histories of the current build's protocol replay against the current workflow
code: a change that would make the workflow take another path on its own histories (a
nondeterminism) fails here. A protocol change is a new build (runs are pinned to the
build they start on: app.temporal.deployment) at a new version of the package, and its histories
are recorded again: the histories are of the package's version, and the recorder refuses to
record over the histories of the version it runs at."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from temporalio.client import WorkflowHistory
from temporalio.worker import Replayer

from app.temporal import connection, deployment
from service.worker import unsandboxed_runner
from tests.record_histories import recorded_builds, refusal
from workflows.deliberation import Deliberation

pytestmark = pytest.mark.fast

ROOT = Path(__file__).parent.parent
HISTORIES = sorted((Path(__file__).parent / "histories").glob("*.json"))
# Where the image of a build is named by its tag: the tag is the package's version.
IMAGE_TAGGED = ("docker-compose.yml", "Dockerfile", "docs/deployment.md")


def test_histories_are_committed() -> None:
    assert len(HISTORIES) >= 5


@pytest.mark.parametrize("path", HISTORIES, ids=lambda p: p.stem)
async def test_history_replays(path: Path) -> None:
    history = WorkflowHistory.from_json(
        f"replay-{path.stem}", await asyncio.to_thread(path.read_text)
    )
    # In the sandbox, whose checks the workers in production skip (service.worker.SANDBOX).
    replayer = Replayer(
        workflows=[Deliberation],
        data_converter=connection.data_converter(),
        unsandboxed_workflow_runner=unsandboxed_runner(checked=True),
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=True)
    assert result.replay_failure is None


def test_the_histories_are_of_the_package_version() -> None:
    """A protocol change is a new build (a new version of the package), and the histories
    are recorded again at it: histories of another build mean one of the two was left."""
    assert HISTORIES
    version = deployment.package_version()
    builds = {path.stem: recorded_builds(path) for path in HISTORIES}
    others = {name: sorted(found) for name, found in builds.items() if found != {version}}
    assert not others, (
        f"histories not of build {version} (pyproject.toml's version): {others}; record "
        "them again: .venv/bin/python -m tests.record_histories --force"
    )


def test_the_recorder_refuses_to_record_over_its_own_build(tmp_path: Path) -> None:
    [recorded] = [path for path in HISTORIES if path.stem == "invalid_request"]
    (tmp_path / recorded.name).write_text(recorded.read_text())
    [build] = recorded_builds(recorded)
    line = refusal(tmp_path, ["invalid_request", "quality_threshold_met"], build)
    assert line is not None and "\n" not in line
    assert "invalid_request" in line and "raise the version in pyproject.toml" in line
    assert "quality_threshold_met" not in line
    # A new build, or a scenario with no history yet, is recorded.
    assert refusal(tmp_path, ["invalid_request"], f"{build}.1") is None
    assert refusal(tmp_path, ["quality_threshold_met"], build) is None


def test_the_image_tags_are_the_package_version() -> None:
    """The image a deployment runs is tagged with its build: a new version is a new tag."""
    version = deployment.package_version()
    tags = {
        name: sorted(set(re.findall(r"\bcouncil:([\w.\-]+)", (ROOT / name).read_text())))
        for name in IMAGE_TAGGED
    }
    assert all(tags.values()), f"no council:VERSION tag in {tags}"
    others = {name: found for name, found in tags.items() if found != [version]}
    assert not others, f"image tags not of version {version} (pyproject.toml's): {others}"
