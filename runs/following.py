"""Following a run from outside: its progress events as they come, each once, and what its
models are writing, however many read it in one process (one follower per run, shared by
runs.shared)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, TypeVar

from temporalio.client import (
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.service import RPCError

from council.progress import Progress, ProgressEvent
from runs import finding
from runs.shared import Shared
from runs.stuck import RunStuck, Stuck, stuck
from workflows.deliberation import Deliberation

# How often a run's follower tells its readers that the run may have moved (they read then
# what the models are writing), and the least time between two of its asks: the events of
# that moment come in one answer. Tests shorten it.
POLL_SECONDS = 0.5
# While an ask has waited this long, the follower checks that a worker still answers.
ALIVE_SECONDS = 5.0
# What every surface says while no worker answers a deliberation's queries.
WAITING = "waiting for a worker to pick the deliberation up…"
T = TypeVar("T")


@dataclass(frozen=True)
class _Seen:
    """What a run's follower has seen: its events from the first (the first `count` of an
    append-only list), and where the run is (None while no worker answers)."""

    events: list[ProgressEvent]
    count: int
    progress: Progress | None


# One follower per run in this process, whoever reads it (runs.shared).
_followers: Shared[_Seen] = Shared()


async def follow(
    handle: WorkflowHandle[Any, Any], since: int = 0
) -> AsyncIterator[Progress | None]:
    """The run's progress until it closes: a Progress with the events after the last one
    seen (from `since`), each time there are new ones and every POLL_SECONDS between (for
    readers of what is being written); None while no worker answers. RunStuck when the
    run's workflow task keeps failing (no worker will ever answer: a stop ends it). Every
    reader of a run in this process shares one follower, which waits on the run
    (Deliberation.wait_progress) rather than asking it on a clock; the run is named by its
    run id, which no other run of any server has."""
    offset = since
    key = (handle.id, (await handle.describe()).run_id)
    async with aclosing(_followers.subscribe(key, lambda: _follow_run(handle))) as seen_all:
        async for seen in seen_all:
            if seen.progress is None:
                problem = await _stuck_or_none(handle)
                if problem is not None:
                    raise RunStuck(problem)
                yield None
                continue
            fresh = seen.events[offset : seen.count] if offset < seen.count else []
            offset = max(offset, seen.count)
            yield seen.progress.model_copy(update={"events": fresh})


async def _stuck_or_none(handle: WorkflowHandle[Any, Any]) -> Stuck | None:
    with contextlib.suppress(RPCError):
        return await stuck(handle)
    return None


# What an ask of a run can end in besides its answer: no worker took it in time (the SDK's
# timeout, or ours), or the run closed under it.
_ASK_ERRORS = (
    TimeoutError,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    RPCError,
)


async def _follow_run(handle: WorkflowHandle[Any, Any]) -> AsyncIterator[_Seen]:
    """A run's one follower in this process: every event once, from the first. It reads
    where the run is with the progress query (no history), then waits with the
    wait_progress update for each next batch of events (a few history events each, the
    same however many read it: an ask is named by its offset, so that the followers of
    other processes share it too). An ask no worker takes says None (waiting) and is asked
    again; once the run has closed, the rest comes by the query, and the end."""
    events: list[ProgressEvent] = []
    current: Progress | None = None

    def seen(progress: Progress | None) -> _Seen:
        nonlocal current
        if progress is not None:
            for event in progress.events:  # each once, in order (answers may overlap)
                if event.seq == len(events):
                    events.append(event)
            progress = progress.model_copy(update={"events": []})
        current = progress
        return _Seen(events, len(events), progress)

    progress = await _progress_query(handle, 0)
    if progress is None and not await _running(handle):
        return  # closed, and no worker answers for it
    failed = False
    while True:
        if failed and not await _running(handle):
            last = await _progress_query(handle, len(events))
            if last is not None:
                yield seen(last)
            return
        yield seen(progress)
        if progress is not None and progress.finished:
            return
        await asyncio.sleep(POLL_SECONDS)  # the events of this moment come in one answer
        since = len(events)
        try:
            asked = await within(
                handle.start_update(
                    Deliberation.wait_progress,
                    since,
                    id=f"progress-{since}",
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                ),
                finding.QUERY_TIMEOUT.total_seconds(),
            )
        except _ASK_ERRORS:
            progress, failed = None, True
            continue
        answer = asyncio.ensure_future(_answer(asked))
        try:
            waited = 0.0
            while not (await asyncio.wait({answer}, timeout=POLL_SECONDS))[0]:
                waited += POLL_SECONDS
                if waited >= ALIVE_SECONDS:  # is a worker still there?
                    waited = 0.0
                    yield seen(await _progress_query(handle, len(events)))
                else:
                    yield _Seen(events, len(events), current)
            progress, failed = answer.result(), False
        except _ASK_ERRORS:
            progress, failed = current, True
        finally:
            if not answer.done():
                answer.cancel()
                # A cancelled wait can still end in the SDK's own error: read it, so that
                # asyncio does not log it as never retrieved.
                answer.add_done_callback(_read_outcome)


async def within(call: Awaitable[T], seconds: float) -> T:
    """asyncio.wait_for of an update call, whose error is read however the wait ends: the
    SDK turns a cancelled call into WorkflowUpdateRPCTimeoutOrCancelledError, which
    wait_for leaves unread (and asyncio logs as never retrieved) when the waiter itself is
    cancelled, as a follower is when its last reader leaves."""
    task = asyncio.ensure_future(call)
    task.add_done_callback(_read_outcome)
    return await asyncio.wait_for(task, seconds)


def _read_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


async def _answer(asked: WorkflowUpdateHandle[Any]) -> Progress:
    progress: Progress = await asked.result()
    return progress


async def _progress_query(handle: WorkflowHandle[Any, Any], since: int) -> Progress | None:
    """The progress query's answer; None when no worker answers it (or the run just closed)."""
    try:
        progress: Progress = await handle.query(
            Deliberation.progress, since, rpc_timeout=finding.QUERY_TIMEOUT
        )
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        return None
    return progress


async def _running(handle: WorkflowHandle[Any, Any]) -> bool:
    return await finding.status_of(handle) == "running"


async def events(handle: WorkflowHandle[Any, Any]) -> AsyncIterator[ProgressEvent | str]:
    """The run's progress events until it closes, and WAITING once each time no worker
    answers (again after a worker answered): the follow loop of a surface that reports
    events one by one (the CLI, MCP's progress notifications)."""
    waiting = False
    async for progress in follow(handle):
        if progress is None:
            if not waiting:
                yield WAITING
            waiting = True
            continue
        waiting = False
        for event in progress.events:
            yield event
