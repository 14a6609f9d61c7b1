"""Finding a run and reading it from outside: a deliberation by id (only workflows of the
Deliberation type count, "no deliberation with id X" for any other), its status, its
record (so far, final, or what a failed run had), the replies its models are writing and
their calls in flight, and the attachments it was given."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from pydantic import ValidationError
from temporalio.api.workflow.v1 import PendingActivityInfo
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
)
from temporalio.exceptions import ApplicationError, TerminatedError
from temporalio.service import RPCError, RPCStatusCode

from council.attachments import Attachment
from council.calls import CallProgress, Stage
from council.ids import is_valid_id
from council.models import DeliberationRecord, DeliberationRequest
from council.progress import shown_status
from runs.stuck import RunStuck, stuck
from workflows import search_attributes
from workflows.deliberation import Deliberation
from workflows.registry import MODEL_CALLS

# How long a query waits for a worker to answer.
QUERY_TIMEOUT = timedelta(seconds=5)
QUESTION_MEMO_CHARS = 300
# The memo holds the question, so that a listing can show it: encrypted with the other
# payloads when a payload key is set.
QUESTION_MEMO = "question"
# A PDF's own bytes (it travels as its text) are kept for its download in a memo entry of
# the run, ORIGINAL_MEMO + its SHA-256: always in the payload store, the memo holding a
# reference, never the bytes (every listing carries each run's memo).
ORIGINAL_MEMO = "original:"


class NoSuchDeliberation(LookupError):
    """No deliberation has this id (a foreign workflow's id counts as none)."""

    def __init__(self, workflow: str) -> None:
        shown = workflow if len(workflow) <= 80 else workflow[:77] + "..."
        super().__init__(f"no deliberation with id {shown!r}")
        self.workflow = workflow


@dataclass
class Found:
    """A deliberation found by id: its handle, status and the task queue it runs on (and
    Temporal's description of it, when it was read: its run id, start and close times)."""

    client: Client
    handle: WorkflowHandle[Deliberation, DeliberationRecord]
    status: str
    task_queue: str
    description: WorkflowExecutionDescription | None = None

    @property
    def id(self) -> str:
        return self.handle.id


async def find(client: Client, workflow: str, run_id: str | None = None) -> Found:
    """The deliberation with this id (the run `run_id` of it, when given); NoSuchDeliberation
    for an id that breaks the id rule, names nothing, or names a workflow of another type.
    Other RPC errors (the server is down) are raised as they are."""
    if not is_valid_id(workflow):
        raise NoSuchDeliberation(workflow)
    found = client.get_workflow_handle(workflow, run_id=run_id, result_type=DeliberationRecord)
    try:
        description = await found.describe()
    except RPCError as error:
        if error.status in (RPCStatusCode.NOT_FOUND, RPCStatusCode.INVALID_ARGUMENT):
            raise NoSuchDeliberation(workflow) from None
        raise
    if description.workflow_type != Deliberation.__name__:
        raise NoSuchDeliberation(workflow)
    status = status_name(description.status)
    return Found(client, found, status, description.task_queue, description)


def handle(client: Client, workflow: str) -> WorkflowHandle[Deliberation, DeliberationRecord]:
    """The handle of an id known to be a deliberation's (from a listing); see find."""
    return client.get_workflow_handle(workflow, result_type=DeliberationRecord)


def status_name(status: WorkflowExecutionStatus | None) -> str:
    return status.name.lower() if status else "unknown"


async def status_of(handle: WorkflowHandle[Any, Any]) -> str:
    """running, completed, failed, terminated, ... (raises RPCError if there is no such run)."""
    return status_name((await handle.describe()).status)


async def shown_status_of(handle: WorkflowHandle[Any, Any]) -> str:
    """The status a listing shows (council.progress.shown_status): "stopped" for a run that
    ended on the user's stop, else Temporal's."""
    described = await handle.describe()
    reason = described.typed_search_attributes.get(search_attributes.TERMINATION_REASON)
    return shown_status(status_name(described.status), reason)


async def read_record(handle: WorkflowHandle[Any, Any]) -> DeliberationRecord:
    """The record: the result once the run completed, the record so far while it runs.
    Raises what Temporal raised when the run failed or was terminated (failed_record reads
    what it had) or no worker answers; RunStuck for a run whose workflow task keeps failing
    (it answers no query)."""
    description = await handle.describe()
    if description.status == WorkflowExecutionStatus.RUNNING:
        problem = await stuck(handle, description)
        if problem is not None:
            raise RunStuck(problem)
        record: DeliberationRecord = await handle.query(
            Deliberation.current_record, rpc_timeout=QUERY_TIMEOUT
        )
        return record
    result: DeliberationRecord = await handle.result()
    return result


def failed_record(failure: WorkflowFailureError) -> DeliberationRecord | None:
    """What a failed run had when it failed (its answers, errors and usage), from the
    details of its failure, or of its termination when a stop ended it stuck: no worker,
    and no build of the workflow, is needed to read it. None for a run that failed before
    it had a record (an invalid request), or was terminated without one."""
    cause = failure.cause
    details = cause.details if isinstance(cause, ApplicationError | TerminatedError) else ()
    if not details:
        return None
    try:
        return DeliberationRecord.model_validate(details[0])
    except ValidationError:
        return None


def failure_reason(error: BaseException) -> str:
    """Why a run failed (or why reading it did), in one line: the failure's own message,
    as the workflow gave it."""
    cause = getattr(error, "cause", None) or error
    text = " ".join(str(getattr(cause, "message", None) or cause).split())
    return text or "no reason given"


async def partial_replies(handle: WorkflowHandle[Any, Any]) -> list[CallProgress]:
    """The replies the models are writing now, as far as they have arrived: the heartbeat
    details of the model calls in flight."""
    description = await handle.describe()
    pending = description.raw_description.pending_activities
    replies = [await _reply_so_far(description, each) for each in pending]
    return [reply for reply in replies if reply is not None]


async def _reply_so_far(
    description: WorkflowExecutionDescription, pending: PendingActivityInfo
) -> CallProgress | None:
    """A pending call's heartbeat details, decoded with the run's data converter (they may be
    encrypted, or in the payload store); None for none, or details of another shape (an
    older worker's)."""
    payloads = list(pending.heartbeat_details.payloads)
    if not payloads:
        return None
    try:
        [reply] = await description.data_converter.decode(payloads[-1:], [CallProgress])
    except Exception:
        return None
    return reply if isinstance(reply, CallProgress) else None


@dataclass
class CallInFlight:
    """A model call the run is waiting for: who, where, the reply so far (its heartbeat
    details), and how its retries go (the attempt it is on, and why the last one failed)."""

    model: str | None
    stage: Stage | None
    round: int
    text: str
    content_bytes: int
    attempt: int
    max_attempts: int
    failure: str | None
    failure_type: str | None
    retry_at: datetime | None
    # Paused while its provider is down (activities.outage): `failure` says since when.
    paused: bool = False


async def calls_in_flight(handle: WorkflowHandle[Any, Any]) -> list[CallInFlight]:
    """The run's model calls in flight, from its pending activities. The model is named by
    the heartbeat details, else by the last failure's message ("MODEL: why"); None when the
    call has done neither yet."""
    description = await handle.describe()
    calls = []
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name != MODEL_CALLS.activity_type:
            continue  # the straggler watch
        progress = await _reply_so_far(description, pending)
        failure = pending.last_failure if pending.HasField("last_failure") else None
        kind = None
        if failure is not None and failure.HasField("application_failure_info"):
            kind = failure.application_failure_info.type or None
        retry_at = None
        if pending.HasField("next_attempt_schedule_time"):
            retry_at = pending.next_attempt_schedule_time.ToDatetime(UTC)
        calls.append(
            CallInFlight(
                model=progress.model if progress else None,
                stage=progress.stage if progress else None,
                round=progress.round if progress else 0,
                text=progress.text if progress else "",
                content_bytes=progress.content_bytes if progress else 0,
                attempt=pending.attempt,
                max_attempts=pending.maximum_attempts,
                failure=(failure.message or None) if failure is not None else None,
                failure_type=kind,
                retry_at=retry_at,
                paused=pending.paused,
            )
        )
    return calls


async def attachment_of(found: Found, sha256: str) -> Attachment | None:
    """The attachment of a deliberation with this SHA-256, from the run's input (the first
    event of its history); None when it has none such."""
    async for event in found.handle.fetch_history_events():
        started = event.workflow_execution_started_event_attributes
        payloads = list(started.input.payloads)
        if not payloads:
            return None
        [request] = await found.client.data_converter.decode(payloads[:1], [DeliberationRequest])
        return next((a for a in request.attachments if a.sha256 == sha256), None)
    return None


async def kept_originals(found: Found) -> set[str]:
    """The SHA-256 of each attachment whose own bytes the run's start kept (read from the
    memo's keys: nothing is fetched from the store)."""
    description = await found.handle.describe()
    keys = description.raw_description.workflow_execution_info.memo.fields
    return {key.removeprefix(ORIGINAL_MEMO) for key in keys if key.startswith(ORIGINAL_MEMO)}


async def original_of(found: Found, sha256: str) -> bytes | None:
    """The own bytes of an attachment of a deliberation (a PDF's), where its start kept
    them; None where it did not (a text file or an image: what the run's input carries is
    the file)."""
    description = await found.handle.describe()
    data = await description.memo_value(f"{ORIGINAL_MEMO}{sha256}", None, type_hint=bytes)
    return data if isinstance(data, bytes) else None


async def question_of(execution: WorkflowExecution) -> str | None:
    """The question from the memo; None where there is none, or this client cannot read it
    (a run started without it, or encrypted with a key this process does not have)."""
    try:
        question = await execution.memo_value(QUESTION_MEMO, None)
    except Exception:
        return None
    return question if isinstance(question, str) else None
