"""A run whose workflow task keeps failing (a fault planted in the workflow's code, as a
metric that refused a value once did): Temporal retries the task for good, so the run
stays Running, answers no query and processes no signal. Every surface says so in one
line with the failure's message, and a stop ends it: terminated, with the record it had.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from temporalio import workflow

# This module defines workflows: the sandbox imports it again for each of their runs
# (service.worker.SANDBOX), and what is not workflow code passes through.
with workflow.unsafe.imports_passed_through():
    import httpx
    import pytest
    from temporalio.client import WorkflowHandle
    from temporalio.common import VersioningBehavior
    from temporalio.testing import WorkflowEnvironment

    from council.models import DeliberationRecord
    from council.validation import validate_request
    from doctor.temporal import runs_check
    from runs import listing, starting
    from runs.stuck import RunStuck, Stuck, result_unless_stuck, stuck
    from simulator import SimulatorServer
    from tests.temporal_fixtures import (
        FOUR_MODELS,
        Council,
        council_worker,
        request,
        runs_with_failed_tasks,
        starter,
        temporal_address,
    )
    from tests.web_fixtures import web_server
    from workflows.deliberation import Deliberation

PLANTED = "a fault planted after stage 1"


@workflow.defn(
    name=Deliberation.__name__, versioning_behavior=VersioningBehavior.PINNED, sandboxed=False
)
class PlantedFault(Deliberation):
    """The deliberation, with a fault in its code once the first answers are in."""

    @workflow.run
    async def run(self, request: dict[str, Any]) -> DeliberationRecord:
        await self._stage1_collect_answers()
        raise RuntimeError(PLANTED)


@pytest.fixture
async def planted(temporal: WorkflowEnvironment, sim: SimulatorServer) -> AsyncIterator[Council]:
    async with council_worker(temporal.client, sim, workflows=[PlantedFault]) as council:
        yield council


async def until_stuck(handle: WorkflowHandle[Any, Any], timeout: float = 60) -> Stuck:
    deadline = asyncio.get_running_loop().time() + timeout
    while (problem := await stuck(handle)) is None:
        assert asyncio.get_running_loop().time() < deadline, "the run never got stuck"
        await asyncio.sleep(0.1)
    return problem


@pytest.mark.provokes_failed_workflow_task("a fault planted in the workflow after stage 1")
async def test_a_stuck_run_is_said_on_every_surface_and_stop_ends_it_with_its_record(
    temporal: WorkflowEnvironment, planted: Council, tmp_path: Path
) -> None:
    since = datetime.now(UTC)
    wid = f"stuck-{uuid.uuid4().hex[:8]}"
    handle = await starting.start(
        temporal.client, validate_request(request(max_rounds=1)), planted.task_queue, wid
    )
    problem = await until_stuck(handle)
    assert problem.message == f"RuntimeError: {PLANTED}", problem
    line = f"its workflow task keeps failing (attempt {problem.attempt}): RuntimeError: {PLANTED}"
    assert problem.line == line

    env = {"TEMPORAL_ADDRESS": temporal_address(temporal), "COUNCIL_TASK_QUEUE": planted.task_queue}
    # show: one line with the failure and what ends it (no query is asked, none would answer).
    code, out, err = await starter("show", wid, env=env)
    assert code == 1 and out == ""
    assert err.startswith(f"{wid}: running, but its workflow task keeps failing (attempt "), err
    assert f"RuntimeError: {PLANTED}" in err and f"stop {wid} ends it" in err
    # watch says the same, instead of waiting for a worker for good.
    code, _, err = await starter("watch", wid, env=env)
    assert code == 1 and f"{wid}: running, but its workflow task keeps failing" in err, err
    # list: the status is stuck, and the failure follows the table.
    code, out, err = await starter("list", "--json", env=env)
    row = next(r for r in json.loads(out) if r["id"] == wid)
    assert row["status"] == "stuck" and PLANTED in row["stuck"], row
    code, out, err = await starter("list", env=env)
    assert code == 0 and any(line.split()[:2] == [wid, "stuck"] for line in out.splitlines())
    assert f"{wid}: its workflow task keeps failing" in err and PLANTED in err
    # doctor names it, with its fix.
    check = await runs_check(temporal.client)
    assert check.status == "failed" and f"{wid}: its workflow task keeps failing" in check.detail
    assert "stop ID ends each" in (check.fix or "")
    # The page: the status says stuck, the failure and what ends it in one line.
    with web_server(temporal, planted, tmp_path) as web:
        async with httpx.AsyncClient(base_url=web.url, timeout=30) as http:
            page = (await http.get(f"/deliberations/{wid}")).text
    assert ">stuck</span>" in page and PLANTED in page and "Stop ends it" in page
    # What awaits a result (the evaluation's runs) is told, instead of waiting for good.
    with pytest.raises(RunStuck, match=PLANTED):
        await result_unless_stuck(handle, every=0.1)
    # The suite's guard finds the failed workflow task (this test says it provokes one).
    assert wid in await runs_with_failed_tasks(temporal.client, since)

    # stop: the signal would never be processed, so the run is terminated, with its record.
    code, out, err = await starter("stop", wid, "--reason", "enough", env=env)
    assert code == 0, err
    assert err.startswith(f"{wid}: terminated: its workflow task keeps failing"), err
    assert err.rstrip().endswith("the record it had is kept"), err
    assert (await handle.describe()).status.name == "TERMINATED"
    code, out, err = await starter("show", wid, "--json", env=env)
    assert code == 1 and err.startswith(f"{wid}: terminated: enough: its workflow task"), err
    record = DeliberationRecord.model_validate_json(out)
    assert record.status == "terminated"
    assert [a.model for a in record.stage1] == FOUR_MODELS
    assert all(answer.response for answer in record.stage1)
    assert record.usage.calls >= 4
    assert record.stop_reason is not None and record.stop_reason.startswith("enough: its workflow")
    # A second stop: it has finished, refused in one line as extend and critique are.
    code, _, err = await starter("stop", wid, env=env)
    assert code == 2 and "has already finished (terminated): nothing to stop" in err


async def test_a_run_that_is_not_stuck_is_not_said_to_be(council: Council) -> None:
    handle = await council.start(max_rounds=1)
    assert await stuck(handle) is None  # running
    await handle.result()
    assert await stuck(handle) is None  # completed
    rows = await listing.list_deliberations(council.client, ids=[handle.id])
    assert [(row.shown, row.stuck) for row in rows] == [("completed", None)]
