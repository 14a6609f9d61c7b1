"""A worker killed with SIGKILL mid-round: the run resumes on a new worker process and
no model call that completed before the kill is made again."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from pathlib import Path

from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from council.calls import Stage
from council.models import DeliberationRecord
from harness.processes import new_interpreters, start_worker
from simulator import SimulatorServer
from tests.sim_fixtures import wait_until
from tests.temporal_fixtures import FOUR_MODELS, request, worker_env
from workflows.deliberation import Deliberation

LATENCY = 1.0


def _key(entry: dict) -> str:
    """One model call: every attempt of it carries the same workflow/activity id."""
    return entry["call_id"]


async def test_worker_killed_mid_round_resumes_without_repeating_calls(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    sim.set_faults({"*": {"latency": LATENCY}})
    queue = f"council-kill-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal, sim, queue)
    log = tmp_path / "worker.log"
    # `python worker.py` in a new interpreter; the one after the kill is forked, as the
    # suite's workers are (tests/forked_cli.py).
    with new_interpreters():
        first = await asyncio.to_thread(start_worker, env, log)
    second = None
    try:
        handle = await temporal.client.start_workflow(
            Deliberation.run,
            request(quality_threshold=5, max_rounds=2, stop_on_convergence=False),
            id=f"kill-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=DeliberationRecord,
        )

        def refining() -> list[dict]:
            return [e for e in sim.log()["entries"] if e["stage"] == Stage.REFINE.value]

        # Mid-round: every refinement of round 1 has reached the provider and one at least
        # is still in flight; everything before is done (waited for as a condition: on a
        # loaded machine a fixed pause could outlast the calls, and a call still on its way
        # at the kill would be missed by the snapshot).
        def mid_round() -> bool:
            calls = refining()
            return len(calls) >= len(FOUR_MODELS) and any(e["finished"] is None for e in calls)

        await wait_until(mid_round, timeout=30)
        first.kill()
        killed_at = time.time()
        snapshot = sim.log()
        in_flight = {
            _key(e)
            for e in snapshot["entries"]
            if e["finished"] is None or e["finished"] >= killed_at - 0.05
        }
        done_before = {
            _key(e)
            for e in snapshot["entries"]
            if e["outcome"] == "ok" and e["finished"] < killed_at - 0.05
        }
        assert in_flight and done_before

        second = await asyncio.to_thread(start_worker, env, log)
        record = await asyncio.wait_for(handle.result(), 60)
    finally:
        for worker in (first, second):
            if worker is not None:
                worker.stop()

    assert record.status == "completed" and record.stage3 is not None
    assert len(record.rounds) == 2 and record.errors == []

    entries = sim.log()["entries"]
    served = Counter(_key(e) for e in entries)
    repeated = {key for key, count in served.items() if count > 1}
    # No call that completed before the kill was made again...
    assert not (repeated & done_before)
    # ...and only the calls in flight at the kill were repeated, once each at most.
    assert repeated <= in_flight
    assert len(entries) - len(served) <= len(in_flight)

    # The history holds one completed activity per call the record accounts for.
    completed = 0
    async for event in handle.fetch_history_events():
        completed += event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED
    assert completed == record.usage.calls == len(served)
