"""Following a run: every reader of a run in one process shares one follower, which waits
on the run (the wait_progress update) instead of asking it on a clock, so that many
readers cost the run no more than one; a reader that comes back with its offset gets
exactly the events after it; a reader of a run whose worker is gone hears "waiting" and
goes on when a worker returns."""

from __future__ import annotations

import asyncio
import gc
import uuid
from collections.abc import AsyncIterator
from contextlib import aclosing
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from council.models import DeliberationRecord
from council.progress import Progress, ProgressEvent
from harness.processes import start_worker
from runs import finding, following
from simulator import SimulatorServer
from tests.temporal_fixtures import Council, request, worker_env
from workflows.deliberation import Deliberation

LATENCY = 0.4


async def accepted_updates(handle: WorkflowHandle) -> int:
    """How many updates the run accepted (each one is in its history)."""
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    return sum([e.event_type == accepted async for e in handle.fetch_history_events()])


async def every_event(handle: WorkflowHandle) -> list[ProgressEvent]:
    progress: Progress = await handle.query(Deliberation.progress, 0)
    return progress.events


async def read(updates: AsyncIterator[Progress | None]) -> list[ProgressEvent]:
    """Every event a follower yields until the run closes."""
    seen: list[ProgressEvent] = []
    async for progress in updates:
        if progress is not None:
            seen += progress.events
    return seen


async def test_many_readers_in_one_process_cost_the_run_what_one_does(council: Council) -> None:
    council.sim.set_faults({"*": {"latency": LATENCY}})
    alone = await council.start(max_rounds=1)
    crowded = await council.start(max_rounds=1)
    one = asyncio.ensure_future(read(following.follow(alone)))
    many = [asyncio.ensure_future(read(following.follow(crowded))) for _ in range(20)]
    await asyncio.sleep(0.5)
    assert following._followers.producers() == 2  # one follower per run
    seen_alone = await asyncio.wait_for(one, 60)
    seen_many = await asyncio.wait_for(asyncio.gather(*many), 60)
    assert following._followers.producers() == 0  # each ended with its run

    assert seen_alone == await every_event(alone)
    everything = await every_event(crowded)
    assert all(seen == everything for seen in seen_many)  # each event once, in order
    asked_alone, asked_many = await accepted_updates(alone), await accepted_updates(crowded)
    # About one ask per batch of events, however many read them.
    assert 1 <= asked_alone <= len(everything)
    assert 1 <= asked_many <= len(everything)
    assert asked_many <= asked_alone * 1.5 + 3, (asked_alone, asked_many)


async def test_a_reader_that_comes_back_gets_exactly_the_events_after_its_offset(
    council: Council,
) -> None:
    council.sim.set_faults({"*": {"latency": LATENCY}})
    handle = await council.start(max_rounds=1)
    first: list[ProgressEvent] = []
    async with aclosing(following.follow(handle)) as updates:
        async for progress in updates:
            if progress is not None:
                first += progress.events
            if len(first) >= 3:
                break
    offset = first[-1].seq + 1
    # Another reader, on a follower of its own, reads from the start meanwhile.
    whole = asyncio.ensure_future(read(following.follow(handle)))
    await asyncio.sleep(1.5)  # the run goes on while the first reader is away
    rest = await asyncio.wait_for(read(following.follow(handle, since=offset)), 60)
    everything = await every_event(handle)
    assert [e.seq for e in first + rest] == list(range(len(everything)))
    assert first + rest == everything
    assert await asyncio.wait_for(whole, 60) == everything
    # A closed run: the rest by the query, from any offset.
    assert await read(following.follow(handle, since=offset)) == everything[offset:]
    assert await read(following.follow(handle, since=len(everything))) == []


async def test_a_reader_hears_waiting_while_the_worker_is_gone_and_goes_on_after(
    temporal: WorkflowEnvironment,
    sim: SimulatorServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(finding, "QUERY_TIMEOUT", timedelta(seconds=1))
    monkeypatch.setattr(following, "ALIVE_SECONDS", 1.0)
    sim.set_faults({"*": {"latency": 1.0}})
    queue = f"council-follow-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal, sim, queue)
    log = tmp_path / "worker.log"
    first = await asyncio.to_thread(start_worker, env, log)
    second = None
    said: list[Progress | None] = []
    try:
        handle = await temporal.client.start_workflow(
            Deliberation.run,
            request(max_rounds=1),
            id=f"follow-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=DeliberationRecord,
        )

        async def reading() -> None:
            async for progress in following.follow(handle):
                said.append(progress)

        reader = asyncio.ensure_future(reading())
        await until_said(said, lambda p: p is not None and bool(p.events))
        first.kill()
        await until_said(said, lambda p: p is None)
        second = await asyncio.to_thread(start_worker, env, log)
        await asyncio.wait_for(reader, 90)
        everything = await every_event(handle)
    finally:
        for worker in (first, second):
            if worker is not None:
                worker.stop()
    gone = said.index(None)
    assert any(p is not None for p in said[gone:])  # it went on after
    seen = [e for p in said if p is not None for e in p.events]
    assert seen == everything and said[-1] is not None and said[-1].finished


async def until_said(said: list[Any], wanted: Any, timeout: float = 30) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not any(wanted(p) for p in said):
        assert asyncio.get_running_loop().time() < deadline, "never said"
        await asyncio.sleep(0.05)


async def test_a_reader_that_leaves_while_an_ask_waits_leaves_no_error_unread(
    temporal: WorkflowEnvironment,
    sim: SimulatorServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before: the page server logged "Task exception was never retrieved ...
    WorkflowUpdateRPCTimeoutOrCancelledError" whenever the last reader of a run left while
    its follower waited for the run to take an ask (the SDK turns the cancelled call into
    that error, which asyncio.wait_for left unread). The worker is stopped between two asks
    (each a few seconds apart here), so that the next one waits."""
    monkeypatch.setattr(finding, "QUERY_TIMEOUT", timedelta(seconds=30))
    monkeypatch.setattr(following, "POLL_SECONDS", 3.0)
    sim.set_faults({"*": {"latency": 1.0}})
    queue = f"council-leave-{uuid.uuid4().hex[:8]}"
    worker = await asyncio.to_thread(start_worker, worker_env(temporal, sim, queue), tmp_path / "w")
    loop = asyncio.get_running_loop()
    unread: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _, context: unread.append(context))
    asked = asyncio.Event()
    start_update = WorkflowHandle.start_update

    async def noted(self: WorkflowHandle, *args: Any, **kwargs: Any) -> Any:
        asked.set()
        return await start_update(self, *args, **kwargs)

    try:
        handle = await temporal.client.start_workflow(
            Deliberation.run,
            request(max_rounds=1),
            id=f"leave-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=DeliberationRecord,
        )
        said: list[Progress | None] = []

        async def reading() -> None:
            async for progress in following.follow(handle):
                said.append(progress)

        monkeypatch.setattr(WorkflowHandle, "start_update", noted)
        reader = asyncio.ensure_future(reading())
        await until_said(said, lambda p: p is not None and bool(p.events))
        worker.kill()
        asked.clear()
        await asyncio.wait_for(asked.wait(), 30)  # the follower waits on an ask
        await asyncio.sleep(0.5)
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        del reader
        for _ in range(5):  # an error left unread is said when its task is collected
            await asyncio.sleep(0.2)
            gc.collect()
    finally:
        loop.set_exception_handler(None)
        worker.stop()
    assert following._followers.producers() == 0
    assert unread == []
