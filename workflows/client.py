"""The client side of the Deliberation workflow: starting one, finding one, listing them,
following one's progress, reading its record and the replies its models are writing,
stopping and steering one.

Every surface (the CLI, the web page, the OpenAI-compatible API, the MCP server) works
through these functions, so one rule holds everywhere: ids follow council.ids, only
workflows of the Deliberation type are acted on ("no deliberation with id X" for any
other), an id names one deliberation for good, and a steering request either applies
within seconds or never.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import re
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import aclosing
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

from pydantic import ValidationError
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import TaskQueueKind, TaskQueueType
from temporalio.api.taskqueue.v1 import PollerInfo, TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionDescription,
    WorkflowExecutionStatus,
    WorkflowFailureError,
    WorkflowHandle,
    WorkflowQueryFailedError,
    WorkflowQueryRejectedError,
    WorkflowUpdateFailedError,
    WorkflowUpdateHandle,
    WorkflowUpdateRPCTimeoutOrCancelledError,
    WorkflowUpdateStage,
)
from temporalio.common import (
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.converter import (
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
    WorkflowSerializationContext,
)
from temporalio.exceptions import ApplicationError, TerminatedError, WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from council.attachments import Attachment
from council.calls import CallProgress, Stage
from council.ids import EVALUATION_ID_PREFIX, is_valid_id
from council.limits import MAX_THREAD_TURNS
from council.models import DeliberationRecord, DeliberationRequest
from council.progress import Progress, ProgressEvent, shown_status
from council.steering import HumanCritique, RoundsChange, bounded_reason
from council.thread import Thread, Turn
from workflows import quota, search_attributes
from workflows.deliberation import Deliberation
from workflows.priority import INTERACTIVE, Launch
from workflows.registry import MODEL_CALLS
from workflows.shared import Shared
from workflows.stuck import RunStuck as RunStuck
from workflows.stuck import Stuck, end_stuck
from workflows.stuck import stuck as stuck

QUERY_TIMEOUT = timedelta(seconds=5)
# A steering update carries a deadline this far ahead: a worker that takes it later
# refuses it. The client waits a little longer than that for the worker's answer.
STEER_DEADLINE = timedelta(seconds=4)
STEER_WAIT_SECONDS = 6.0
# A worker that polled the task queue this recently may still be there.
POLLER_SEEN = timedelta(minutes=2)
QUESTION_MEMO_CHARS = 300
T = TypeVar("T")
# The memo holds the question, so that a listing can show it: encrypted with the other
# payloads when a payload key is set.
QUESTION_MEMO = "question"
# A PDF's own bytes (it travels as its text) are kept for its download in a memo entry of
# the run, ORIGINAL_MEMO + its SHA-256: always in the payload store, the memo holding a
# reference, never the bytes (every listing carries each run's memo).
ORIGINAL_MEMO = "original:"


def workflow_id(question: str, readable: bool = True) -> str:
    """council-<the question's first words>-<random>; with encrypted payloads the id (which
    Temporal stores in clear) leaves the question out."""
    if not readable:
        return f"council-{uuid.uuid4().hex[:12]}"
    slug = re.sub(r"[^a-z0-9]+", "-", question.lower()).strip("-")[:40].rstrip("-") or "question"
    return f"council-{slug}-{uuid.uuid4().hex[:6]}"


# The dev server's Web UI listens this far above its gRPC port (the CLI's own default:
# 7233 -> 8233).
DEV_UI_PORT_OFFSET = 1000
TEMPORAL_CLOUD_UI = "https://cloud.temporal.io"


def dev_ui_port(port: int) -> int:
    """The Web UI port of a dev server whose frontend listens on `port`."""
    return port + DEV_UI_PORT_OFFSET


def temporal_ui(address: str, configured: str | None = None) -> str:
    """The Temporal Web UI of the server at `address` (host:port): the one configured
    (COUNCIL_UI_URL, read by the caller's settings) when there is one, Temporal Cloud's for
    a *.tmprl.cloud address, else the dev server's UI on that host."""
    configured = (configured or "").strip().rstrip("/")
    if configured:
        return configured
    host, _, port = address.rpartition(":")
    host = host or "localhost"
    if host.lower().rstrip(".").endswith(".tmprl.cloud"):
        return TEMPORAL_CLOUD_UI
    return f"http://{host}:{dev_ui_port(int(port))}"


def ui_url(client: Client, workflow: str, configured: str | None = None) -> str:
    """The run's page in the Web UI of the Temporal server this client is connected to
    (`configured`: the UI's address when one is set, see temporal_ui)."""
    base = temporal_ui(client.service_client.config.target_host, configured)
    return f"{base}/namespaces/{client.namespace}/workflows/{workflow}"


def details(request: DeliberationRequest) -> str:
    """The run's settings as the Temporal UI shows them (markdown)."""
    cost = f" · **cost budget:** ${request.max_cost_usd:g}" if request.max_cost_usd else ""
    return (
        f"**Models:** {', '.join(request.models)}  \n"
        f"**Chairman:** {request.chairman}  \n"
        f"**Rounds:** {request.min_rounds} to {request.max_rounds} · **quality threshold:** "
        f"{request.quality_threshold:g}/5 · **token budget:** {request.token_budget:,}{cost}"
    )


class NoSuchDeliberation(LookupError):
    """No deliberation has this id (a foreign workflow's id counts as none)."""

    def __init__(self, workflow: str) -> None:
        shown = workflow if len(workflow) <= 80 else workflow[:77] + "..."
        super().__init__(f"no deliberation with id {shown!r}")
        self.workflow = workflow


class IdTaken(ValueError):
    """A start with an id that already names a workflow, finished or running."""


class SteeringRefused(ValueError):
    """A steering request that did not apply: the one-line reason (the workflow's
    validator's, or why no worker took it)."""


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


async def start(
    client: Client,
    request: DeliberationRequest,
    task_queue: str,
    id: str | None = None,
    launch: Launch = INTERACTIVE,
) -> WorkflowHandle[Deliberation, DeliberationRecord]:
    """Start a validated request; the id defaults to a readable one (see workflow_id). Its
    thread (the search attribute CouncilThread) is the thread it follows up, or its own id.
    `launch` says how urgent it is and for whom (workflows.priority): a person's run by
    default.
    An id that already names a workflow (running or finished) is refused with IdTaken: an
    id names one deliberation for good. The caller checks a given id with council.ids.
    A launch with a tenant and a quota is checked against it first (QuotaExceeded, from
    workflows.quota)."""
    readable = client.data_converter.payload_codec is None
    wanted = request.model_dump(mode="json")
    input_bytes = len(json.dumps(wanted, separators=(",", ":")).encode())
    if launch.tenant is not None and launch.quota:
        await quota.check(client, launch.tenant, input_bytes, launch.quota)
    wid = id or workflow_id(request.question, readable)
    originals = await _kept_originals(client, request, wid)
    for first in (True, False):
        try:
            return await client.start_workflow(
                Deliberation.run,
                wanted,
                id=wid,
                task_queue=task_queue,
                static_summary=request.question[:200],
                static_details=details(request),
                memo={QUESTION_MEMO: request.question[:QUESTION_MEMO_CHARS], **originals},
                search_attributes=search_attributes.at_start(
                    request.thread_id or wid, launch.tenant, input_bytes
                ),
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                priority=launch.priority(),
            )
        except WorkflowAlreadyStartedError:
            raise IdTaken(await _taken(client, wid)) from None
        except RPCError as error:
            # A server no worker has used yet lacks our search attributes: register them
            # as the worker would, once.
            if not (first and _unknown_search_attribute(error)):
                raise
            await search_attributes.ensure_search_attributes(client)
    raise AssertionError("unreachable")


async def _kept_originals(
    client: Client, request: DeliberationRequest, wid: str
) -> dict[str, Payload]:
    """The memo entries that keep the attachments' own bytes (ORIGINAL_MEMO), each stored
    in the payload store whatever its size, as the run's own payloads are (encrypted when
    they are). Nothing without a store: the bytes would sit in the memo itself."""
    kept = {
        f"{ORIGINAL_MEMO}{a.sha256}": a.original
        for a in request.attachments
        if a.original is not None
    }
    storage = client.data_converter.external_storage
    if not kept or storage is None:
        return {}
    always = dataclasses.replace(
        client.data_converter,
        external_storage=dataclasses.replace(storage, payload_size_threshold=0),
    )
    # As the client encodes a start's payloads: for this workflow, in this namespace.
    converter = always._with_contexts(
        WorkflowSerializationContext(namespace=client.namespace, workflow_id=wid),
        StorageDriverStoreContext(
            target=StorageDriverWorkflowInfo(
                id=wid, type=Deliberation.__name__, namespace=client.namespace
            )
        ),
    )
    payloads = await converter.encode(list(kept.values()))
    return dict(zip(kept, payloads, strict=True))


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


def _unknown_search_attribute(error: RPCError) -> bool:
    return error.status == RPCStatusCode.INVALID_ARGUMENT and "search attribute" in error.message


async def _taken(client: Client, wid: str) -> str:
    try:
        description = await client.get_workflow_handle(wid).describe()
    except RPCError:
        return f"{wid!r} already names a workflow on this server: choose another id"
    kind = "deliberation" if description.workflow_type == Deliberation.__name__ else "workflow"
    started = (
        description.start_time.strftime("%Y-%m-%d %H:%M:%S") if description.start_time else "?"
    )
    return (
        f"{wid!r} already names a {status_name(description.status)} {kind} (started {started} "
        "UTC): choose another id"
    )


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


async def workers_polling(client: Client, task_queue: str) -> bool:
    """Whether a worker polled this task queue for workflow tasks recently."""
    return bool(await recent_pollers(client, task_queue))


async def steer(found: Found, update: Any, argument: Callable[[datetime], Any]) -> Any:
    """A steering Update that applies within seconds or never: refused at once when no
    worker polls the run's task queue; sent with a deadline (`argument(deadline)` builds
    the update's argument) that the workflow's validator checks, so a worker that takes it
    late refuses it; given up after STEER_WAIT_SECONDS. Raises SteeringRefused, one line."""
    if found.status != "running":
        raise SteeringRefused(f"{found.id} is not running ({found.status}): it cannot be steered")
    if not await workers_polling(found.client, found.task_queue):
        raise SteeringRefused(
            f"no worker is polling task queue {found.task_queue!r}: start one (make worker) "
            "and try again"
        )
    deadline = datetime.now(UTC) + STEER_DEADLINE
    try:
        return await _within(
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


class FollowUpError(ValueError):
    """A deliberation that cannot be followed up: the message says why, in one line."""


async def thread_of(client: Client, follow_up_of: str, context_tokens: int) -> Thread:
    """A follow-up's place in the thread of a completed deliberation: the thread, and its
    earlier turns (the newest that fit in `context_tokens`, the request's; the ids of the
    older ones as dropped). The front door (app.front_door.in_thread) puts a request in it."""
    try:
        found = await find(client, follow_up_of)
    except NoSuchDeliberation as missing:
        raise FollowUpError(f"{missing} to follow up") from None
    previous, status = found.handle, found.status
    if status == "running":
        raise FollowUpError(f"{follow_up_of} is still running: follow it up once it completes")
    if status != "completed":
        raise FollowUpError(
            f"{follow_up_of} did not complete ({status}): only a completed deliberation can be "
            "followed up"
        )
    last = await previous.result()
    if last.stage3 is None:
        raise FollowUpError(f"{follow_up_of} has no final answer to follow up")
    thread = last.thread_id or last.id
    listed = await list_thread(client, thread)
    earlier = [
        row.id
        for row in listed
        if row.id != last.id
        and row.status == "completed"
        and row.started
        and last.started_at
        and row.started < last.started_at
    ]
    turns = [Turn(id=last.id, question=last.query, answer=last.stage3.response)]
    used = turns[0].tokens
    for wid in reversed(earlier):  # newest first, until the bound is passed
        if used > context_tokens or len(turns) == MAX_THREAD_TURNS:
            break
        record = await handle(client, wid).result()
        if record.stage3 is not None:
            turns.insert(0, Turn(id=wid, question=record.query, answer=record.stage3.response))
            used += turns[0].tokens
    dropped = earlier[: len(earlier) - (len(turns) - 1)]
    # A thread longer than its listing: the older turns are counted, not named.
    unlisted = 0
    if len(listed) > MAX_THREAD_TURNS:
        unlisted = max(0, await count_thread(client, thread) - len(listed))
    return Thread(
        follow_up_of=last.id,
        thread_id=thread,
        history=turns,
        dropped_turns=dropped,
        unnamed_dropped=unlisted,
    )


# A chat client that sends the council's answers back (the chat API's conversation) is
# matched to the deliberation that gave them among this many of the namespace's newest
# completed runs, of which at most ANSWER_READS whose question matches have their records
# read: a bounded cost per request, whatever the namespace holds.
ANSWER_SEARCH_RUNS = 200
ANSWER_READS = 3


async def answered(client: Client, question: str, answer: str) -> DeliberationRecord | None:
    """The newest completed deliberation, of the ANSWER_SEARCH_RUNS newest, whose question
    and final answer are exactly these (surrounding whitespace aside); None when there is
    none. A run this client cannot read (another key's memo and record) is passed over."""
    asked, said = question.strip(), answer.strip()
    if not asked or not said:
        return None
    listed = client.list_workflows(
        f'{_DELIBERATIONS} AND ExecutionStatus="Completed"',
        limit=ANSWER_SEARCH_RUNS,
        page_size=ANSWER_SEARCH_RUNS,
    )
    reads = 0
    async for execution in listed:
        if await _question(execution) != asked[:QUESTION_MEMO_CHARS]:
            continue
        try:
            record = await handle(client, execution.id).result()
        except Exception:  # not a record this client can read
            record = None
        final = record.stage3 if record and record.query == asked else None
        if final and final.response.strip() == said:
            return record
        reads += 1
        if reads == ANSWER_READS:
            return None
    return None


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


@dataclass
class Listed:
    """One deliberation as a listing shows it."""

    id: str
    status: str
    round: int | None
    stage: str | None
    reason: str | None
    started: datetime | None
    question: str | None
    thread: str | None = None
    agreement: str | None = None  # high, medium or low, once it ended
    # Running, but its workflow task keeps failing: the failure in one line (see stuck).
    stuck: str | None = None

    @property
    def where(self) -> str:
        """The termination reason once it ended, else the stage it is in."""
        return self.reason or self.stage or "-"

    @property
    def shown(self) -> str:
        """The status a listing shows: "stuck" for a run whose workflow task keeps failing,
        else council.progress.shown_status."""
        return "stuck" if self.stuck else shown_status(self.status, self.reason)


@dataclass
class Searched:
    """What a search found, newest first, and whether it read every run it could match."""

    rows: list[Listed]
    # Stopped at its bound with runs left unread: older runs were not searched.
    bounded: bool = False


async def list_deliberations(
    client: Client,
    limit: int = 20,
    text: str = "",
    thread: str | None = None,
    *,
    conversations: bool = False,
    ids: Sequence[str] | None = None,
) -> list[Listed]:
    """The most recent deliberations, newest first; with text, those whose id or question
    contains it (case-insensitive, every run read); with a thread, that thread's, oldest
    first; with `conversations`, a person's only (no evaluation's runs); with `ids`, only
    those."""
    query = _DELIBERATIONS if thread is None else _in_thread(_DELIBERATIONS, thread)
    if conversations:
        query += f' AND WorkflowId NOT STARTS_WITH "{EVALUATION_ID_PREFIX}"'
    if ids is not None:
        if not ids:
            return []
        listed = ", ".join(f'"{_quoted(each)}"' for each in ids)
        query += f" AND WorkflowId IN ({listed})"
    found = await _read(client, query, limit, text, None)
    found.rows.sort(
        key=lambda r: r.started or datetime.min.replace(tzinfo=UTC), reverse=thread is None
    )
    return found.rows


async def search_deliberations(client: Client, limit: int, text: str, reading: int) -> Searched:
    """As list_deliberations, newest first, a search by text reading at most `reading` of
    the newest runs. A search reads each run's question in turn: it is kept in the memo,
    which a codec encrypts, so Temporal cannot search it."""
    found = await _read(client, _DELIBERATIONS, limit, text, reading)
    found.rows.sort(key=lambda r: r.started or datetime.min.replace(tzinfo=UTC), reverse=True)
    return found


async def _read(client: Client, query: str, limit: int, text: str, reading: int | None) -> Searched:
    """The runs the query lists, as listed, at most `limit`; with text, only those whose id
    or question contains it, of at most `reading` runs read (None: all)."""
    rows: list[Listed] = []
    needle = text.strip().lower()
    most = (reading + 1 if reading is not None else None) if needle else limit
    read = 0
    async for execution in client.list_workflows(query, limit=most):
        read += 1
        if needle and reading is not None and read > reading:
            return Searched(rows, bounded=True)  # one more than it may read: older ones left
        attrs = execution.typed_search_attributes
        row = Listed(
            id=execution.id,
            status=status_name(execution.status),
            round=attrs.get(search_attributes.ROUND),
            stage=attrs.get(search_attributes.STAGE),
            reason=attrs.get(search_attributes.TERMINATION_REASON),
            started=execution.start_time,
            question=await _question(execution),
            thread=attrs.get(search_attributes.THREAD),
            agreement=attrs.get(search_attributes.AGREEMENT),
        )
        if needle and needle not in f"{row.id}\n{row.question or ''}".lower():
            continue
        rows.append(row)
        if len(rows) >= limit:
            break
    await _mark_stuck(client, rows)
    return Searched(rows)


# How many running runs of a listing are asked at once whether they are stuck.
STUCK_CHECKS_AT_ONCE = 16


async def _mark_stuck(client: Client, rows: Sequence[Listed]) -> None:
    """Mark each running row whose workflow task keeps failing (one description of each
    running run; the history only of those whose workflow task was tried again)."""
    running = [row for row in rows if row.status == "running"]
    if not running:
        return
    at_once = asyncio.Semaphore(STUCK_CHECKS_AT_ONCE)

    async def check(row: Listed) -> None:
        async with at_once:
            with contextlib.suppress(RPCError):
                problem = await stuck(handle(client, row.id))
                row.stuck = problem.line if problem is not None else None

    await asyncio.gather(*(check(row) for row in running))


# The most running deliberations `stuck_runs` asks (the newest first).
STUCK_RUNS_READ = 500


async def stuck_runs(client: Client) -> tuple[list[Listed], int]:
    """The running deliberations whose workflow task keeps failing (of the newest
    STUCK_RUNS_READ running ones), and how many running ones were asked."""
    query = f'{_DELIBERATIONS} AND ExecutionStatus="Running"'
    found = await _read(client, query, STUCK_RUNS_READ, "", None)
    return [row for row in found.rows if row.stuck], len(found.rows)


async def list_thread(client: Client, thread: str) -> list[Listed]:
    """A thread's newest deliberations (at most MAX_THREAD_TURNS + 1), oldest first."""
    return await list_deliberations(client, limit=MAX_THREAD_TURNS + 1, thread=thread)


async def count_thread(client: Client, thread: str) -> int:
    """How many deliberations a thread has, however long it is."""
    return (await client.count_workflows(_in_thread(_DELIBERATIONS, thread))).count


_DELIBERATIONS = f'WorkflowType="{Deliberation.__name__}"'


def _in_thread(query: str, thread: str) -> str:
    return f'{query} AND {search_attributes.THREAD.name}="{_quoted(thread)}"'


def _quoted(value: str) -> str:
    """A value inside a visibility query's double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


async def _question(execution: WorkflowExecution) -> str | None:
    """The question from the memo; None where there is none, or this client cannot read it
    (a run started without it, or encrypted with a key this process does not have)."""
    try:
        question = await execution.memo_value(QUESTION_MEMO, None)
    except Exception:
        return None
    return question if isinstance(question, str) else None


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


async def partial_replies(handle: WorkflowHandle[Any, Any]) -> list[CallProgress]:
    """The replies the models are writing now, as far as they have arrived: the heartbeat
    details of the model calls in flight."""
    description = await handle.describe()
    # The data converter: the details may be encrypted, or in the payload store.
    converter = description.data_converter
    replies = []
    for pending in description.raw_description.pending_activities:
        payloads = list(pending.heartbeat_details.payloads)
        if payloads:
            try:
                [reply] = await converter.decode(payloads[-1:], [CallProgress])
            except Exception:  # details of another shape (an older worker): nothing to show
                continue
            replies.append(reply)
    return replies


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
    converter = description.data_converter
    calls = []
    for pending in description.raw_description.pending_activities:
        if pending.activity_type.name != MODEL_CALLS.activity_type:
            continue  # the straggler watch
        progress = None
        payloads = list(pending.heartbeat_details.payloads)
        if payloads:
            try:
                [progress] = await converter.decode(payloads[-1:], [CallProgress])
            except Exception:  # details of another shape (an older worker)
                progress = None
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


# How often a run's follower tells its readers that the run may have moved (they read then
# what the models are writing), and the least time between two of its asks: the events of
# that moment come in one answer. Tests shorten it.
POLL_SECONDS = 0.5
# While an ask has waited this long, the follower checks that a worker still answers.
ALIVE_SECONDS = 5.0
# What every surface says while no worker answers a deliberation's queries.
WAITING = "waiting for a worker to pick the deliberation up…"


@dataclass(frozen=True)
class _Seen:
    """What a run's follower has seen: its events from the first (the first `count` of an
    append-only list), and where the run is (None while no worker answers)."""

    events: list[ProgressEvent]
    count: int
    progress: Progress | None


# One follower per run in this process, whoever reads it (workflows.shared).
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
            asked = await _within(
                handle.start_update(
                    Deliberation.wait_progress,
                    since,
                    id=f"progress-{since}",
                    wait_for_stage=WorkflowUpdateStage.ACCEPTED,
                ),
                QUERY_TIMEOUT.total_seconds(),
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


async def _within(call: Awaitable[T], seconds: float) -> T:
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
            Deliberation.progress, since, rpc_timeout=QUERY_TIMEOUT
        )
    except (RPCError, WorkflowQueryFailedError, WorkflowQueryRejectedError):
        return None
    return progress


async def _running(handle: WorkflowHandle[Any, Any]) -> bool:
    return await status_of(handle) == "running"


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


def failure_reason(error: BaseException) -> str:
    """Why a run failed (or why reading it did), in one line: the failure's own message,
    as the workflow gave it."""
    cause = getattr(error, "cause", None) or error
    text = " ".join(str(getattr(cause, "message", None) or cause).split())
    return text or "no reason given"
