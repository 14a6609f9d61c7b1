"""A run whose workflow task keeps failing, from a client: Temporal retries a failed
workflow task for good, so such a run stays Running, answers no query and processes no
signal (a stop included) until someone ends it. Every surface asks here:

- `stuck(handle)`: whether the run is such a one (Stuck: the attempt and the failure's
  message, in one line), else None;
- `task_failure(event)`: the one rule of what counts (a history event of a workflow task
  that failed because of the workflow's code or its commands, not one the server failed
  for a passing reason such as an event that arrived while it completed);
- `result_unless_stuck(handle)`: the run's result, or RunStuck once it is stuck;
- `end_stuck(handle, stuck, reason)`: the run terminated, with the record it had (replayed
  from its history with this build's code, as far as it replays) as the termination's
  details, which `runs.finding.failed_record` reads back.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TypeVar

from temporalio import workflow
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType, WorkflowTaskFailedCause
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import GetWorkflowExecutionHistoryReverseRequest
from temporalio.client import (
    Client,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.worker import (
    ExecuteWorkflowInput,
    Interceptor,
    Replayer,
    UnsandboxedWorkflowRunner,
    WorkflowInboundInterceptor,
    WorkflowInterceptorClassInput,
)

from council.limits import one_line
from council.models import DeliberationRecord
from workflows.registry import WORKFLOWS

MESSAGE_CHARS = 300
# How many of the newest history events are read for the last workflow task's outcome.
NEWEST_EVENTS = 100

_CAUSE = WorkflowTaskFailedCause
# A workflow task the server failed for a passing reason: the next one goes on, or the run
# has closed (an event came in while the task completed, the worker's cache was reset, the
# run was reset or closed under it).
PASSING_CAUSES = frozenset(
    {
        _CAUSE.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND,
        _CAUSE.WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_UPDATE,
        _CAUSE.WORKFLOW_TASK_FAILED_CAUSE_RESET_STICKY_TASK_QUEUE,
        _CAUSE.WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW,
        _CAUSE.WORKFLOW_TASK_FAILED_CAUSE_FAILOVER_CLOSE_COMMAND,
        # The run was closed (terminated, say) while the task was under way.
        _CAUSE.WORKFLOW_TASK_FAILED_CAUSE_FORCE_CLOSE_COMMAND,
        _CAUSE.WORKFLOW_TASK_FAILED_CAUSE_WORKFLOW_PAUSE_REQUESTED_BEFORE_TASK_STARTED,
    }
)
_CLOSED_TASK = frozenset(
    {
        EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED,
        EventType.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT,
    }
)


def task_failure(event: HistoryEvent) -> str | None:
    """The failure's message (`ValueError: ...`, one line), when this event is a workflow
    task that failed because of the workflow (its code, its commands); else None."""
    if event.event_type != EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED:
        return None
    attributes = event.workflow_task_failed_event_attributes
    if attributes.cause in PASSING_CAUSES:
        return None
    failure = attributes.failure
    info = (
        failure.application_failure_info if failure.HasField("application_failure_info") else None
    )
    kind = info.type if info is not None else ""
    cause = _CAUSE.Name(attributes.cause).removeprefix("WORKFLOW_TASK_FAILED_CAUSE_")
    message = failure.message or cause.replace("_", " ").lower()
    said = f"{kind}: {message}" if kind and not message.startswith(kind) else message
    return one_line(said, MESSAGE_CHARS) or "no reason given"


def task_failures(events: Sequence[HistoryEvent]) -> list[str]:
    """Every workflow task of these events that failed because of the workflow."""
    return [failure for failure in map(task_failure, events) if failure is not None]


@dataclass(frozen=True)
class Stuck:
    """A run whose workflow task keeps failing."""

    attempt: int  # the workflow task's attempt now
    message: str  # the latest failure's, in one line

    @property
    def line(self) -> str:
        return f"its workflow task keeps failing (attempt {self.attempt}): {self.message}"


async def stuck(
    handle: WorkflowHandle[Any, Any], description: WorkflowExecutionDescription | None = None
) -> Stuck | None:
    """Whether the run is stuck: running, its workflow task tried again after the last one
    that closed failed because of the workflow (a worker that died, whose task timed out,
    is not: another worker goes on). `description`: the run's, when read already."""
    description = description or await handle.describe()
    if description.status != WorkflowExecutionStatus.RUNNING:
        return None
    raw = description.raw_description
    if not raw.HasField("pending_workflow_task") or raw.pending_workflow_task.attempt < 2:
        return None
    client = client_of(handle)
    reply = await client.workflow_service.get_workflow_execution_history_reverse(
        GetWorkflowExecutionHistoryReverseRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=handle.id, run_id=description.run_id),
            maximum_page_size=NEWEST_EVENTS,
        )
    )
    last = next((e for e in reply.history.events if e.event_type in _CLOSED_TASK), None)
    message = task_failure(last) if last is not None else None
    return Stuck(raw.pending_workflow_task.attempt, message) if message else None


def client_of(handle: WorkflowHandle[Any, Any]) -> Client:
    """The client a handle was made by (the SDK keeps it to itself): its namespace, its
    service and its data converter."""
    client: Client = handle._client
    return client


class RunStuck(RuntimeError):
    """A run whose workflow task keeps failing, asked for what it cannot answer."""

    def __init__(self, stuck: Stuck) -> None:
        super().__init__(stuck.line)
        self.stuck = stuck


# While a result is awaited, how often the run is asked whether it is stuck.
STUCK_CHECK_SECONDS = 5.0

ResultT = TypeVar("ResultT")


async def result_unless_stuck(
    handle: WorkflowHandle[Any, ResultT], every: float = STUCK_CHECK_SECONDS
) -> ResultT:
    """The run's result (what handle.result() raises, it raises); RunStuck as soon as its
    workflow task keeps failing (asked every `every` seconds while it runs), instead of
    waiting for good."""
    result = asyncio.ensure_future(handle.result())
    try:
        while not (await asyncio.wait({result}, timeout=every))[0]:
            problem = await stuck(handle)
            if problem is not None:
                raise RunStuck(problem)
        return result.result()
    finally:
        if not result.done():
            result.cancel()


class _Kept:
    """The workflow instances a replay made (the last one is the replayed run's)."""

    def __init__(self) -> None:
        self.instances: list[Any] = []

    def interceptor(self) -> Interceptor:
        kept = self.instances

        class Inbound(WorkflowInboundInterceptor):
            async def execute_workflow(self, input: ExecuteWorkflowInput) -> Any:
                kept.append(workflow.instance())
                return await super().execute_workflow(input)

        class Keeping(Interceptor):
            def workflow_interceptor_class(
                self, input: WorkflowInterceptorClassInput
            ) -> type[WorkflowInboundInterceptor]:
                return Inbound

        return Keeping()


async def record_it_had(handle: WorkflowHandle[Any, Any]) -> DeliberationRecord | None:
    """The record a stuck run had: its history replayed with this build's code (the failing
    task included, as far as it goes), and the record read from the replayed run as its
    query would; None when it cannot be (a run of another build that does not replay)."""
    history = await handle.fetch_history()
    kept = _Kept()
    replayer = Replayer(
        workflows=list(WORKFLOWS),
        data_converter=client_of(handle).data_converter,
        interceptors=[kept.interceptor()],
        workflow_runner=UnsandboxedWorkflowRunner(),
        unsandboxed_workflow_runner=UnsandboxedWorkflowRunner(),
    )
    try:
        await replayer.replay_workflow(history, raise_on_replay_failure=False)
        reader = getattr(kept.instances[-1], "current_record", None) if kept.instances else None
        record = reader() if reader is not None else None
    except Exception:
        return None
    return record if isinstance(record, DeliberationRecord) else None


async def end_stuck(handle: WorkflowHandle[Any, Any], stuck: Stuck, reason: str) -> bool:
    """Terminate a stuck run (a signal would never be processed), with the record it had as
    the termination's details; whether a record was kept."""
    record = await record_it_had(handle)
    why = f"{reason}: {stuck.line}"
    if record is not None:
        record.status, record.completed_at = "terminated", datetime.now(UTC)
        record.stop_reason = why
    details = [record] if record is not None else []
    await handle.terminate(*details, reason=one_line(why, MESSAGE_CHARS))
    return record is not None
