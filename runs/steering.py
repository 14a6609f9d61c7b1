"""Steering a run from outside, and stopping it: a steering Update applies within seconds
or never (refused at once when no worker polls, carried with a deadline the workflow's
validator checks); a stop signals the run, or terminates one whose workflow task keeps
failing with the record it had (runs.stuck)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowUpdateFailedError,
    WorkflowUpdateRPCTimeoutOrCancelledError,
)
from temporalio.service import RPCError, RPCStatusCode

from council.steering import HumanCritique, RoundsChange, bounded_reason
from runs.finding import Found, status_of
from runs.following import within
from runs.stuck import end_stuck, stuck
from workflows.deliberation import Deliberation

# A steering update carries a deadline this far ahead: a worker that takes it later
# refuses it. The client waits a little longer than that for the worker's answer.
STEER_DEADLINE = timedelta(seconds=4)
STEER_WAIT_SECONDS = 6.0
# A worker that polled the task queue this recently may still be there.
POLLER_SEEN = timedelta(minutes=2)


class SteeringRefused(ValueError):
    """A steering request that did not apply: the one-line reason (the workflow's
    validator's, or why no worker took it)."""


async def recent_pollers(client: Client, task_queue: str) -> list[PollerInfo]:
    """The workers that polled this task queue for workflow tasks recently."""
    reply = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=task_queue, kind=TaskQueueKind.TASK_QUEUE_KIND_NORMAL),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_WORKFLOW,
        )
    )
    now = datetime.now(UTC)
    return [p for p in reply.pollers if now - p.last_access_time.ToDatetime(UTC) < POLLER_SEEN]


async def steer(found: Found, update: Any, argument: Callable[[datetime], Any]) -> Any:
    """A steering Update that applies within seconds or never: refused at once when no
    worker polls the run's task queue; sent with a deadline (`argument(deadline)` builds
    the update's argument) that the workflow's validator checks, so a worker that takes it
    late refuses it; given up after STEER_WAIT_SECONDS. Raises SteeringRefused, one line."""
    if found.status != "running":
        raise SteeringRefused(f"{found.id} is not running ({found.status}): it cannot be steered")
    if not await recent_pollers(found.client, found.task_queue):
        raise SteeringRefused(
            f"no worker is polling task queue {found.task_queue!r}: start one (make worker) "
            "and try again"
        )
    deadline = datetime.now(UTC) + STEER_DEADLINE
    try:
        return await within(
            found.handle.execute_update(update, argument(deadline)), STEER_WAIT_SECONDS
        )
    except WorkflowUpdateFailedError as failed:
        cause = failed.cause
        raise SteeringRefused(getattr(cause, "message", None) or str(cause)) from None
    except (TimeoutError, WorkflowUpdateRPCTimeoutOrCancelledError):
        raise SteeringRefused(
            f"no worker took the request within {STEER_WAIT_SECONDS:g} s (task queue "
            f"{found.task_queue!r}): it will not apply; check that a worker runs"
        ) from None


async def set_max_rounds(found: Found, rounds: int) -> int:
    """Deliberation.set_max_rounds through steer: the new maximum."""
    changed: int = await steer(
        found, Deliberation.set_max_rounds, lambda by: RoundsChange(rounds=rounds, deadline=by)
    )
    return changed


async def add_critique(found: Found, critique: HumanCritique) -> str:
    """Deliberation.add_critique through steer: the workflow's reply."""
    reply: str = await steer(
        found, Deliberation.add_critique, lambda by: critique.model_copy(update={"deadline": by})
    )
    return reply


class AlreadyFinished(ValueError):
    """A stop of a deliberation that has already finished (one line)."""


@dataclass(frozen=True)
class Stopped:
    """How a stop ended a run: the stop signal (the council synthesizes what it has), or,
    for a run whose workflow task keeps failing (which would never process the signal),
    a termination with the record it had."""

    terminated: bool
    line: str  # what happened, in one line


STOP_REQUESTED = "stop requested; the council synthesizes what it has"


async def stop(found: Found, reason: str | None) -> Stopped:
    """The stop signal (the reason cut to its bound); only while the run is running. A run
    whose workflow task keeps failing is terminated instead, with the record it had.
    AlreadyFinished when it has finished, also when it finished since it was found."""
    try:
        if found.status == "running":
            problem = await stuck(found.handle)
            if problem is not None:
                why = bounded_reason(reason) or "stopped by the user"
                kept = await end_stuck(found.handle, problem, why)
                record = "the record it had is kept" if kept else "no record could be kept"
                return Stopped(True, f"terminated: {problem.line}; {record}")
            await found.handle.signal(Deliberation.stop, bounded_reason(reason))
            return Stopped(False, STOP_REQUESTED)
        status = found.status
    except RPCError as error:
        if error.status != RPCStatusCode.NOT_FOUND:
            raise
        status = await status_of(found.handle)
    raise AlreadyFinished(f"this deliberation has already finished ({status}): nothing to stop")
