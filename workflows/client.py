"""The client side of the Deliberation workflow: starting one, listing them, following
one's progress, reading its record and the replies its models are writing.

The CLI (starter.py) and the web page (web/) both work through these functions.
"""

from __future__ import annotations

import asyncio
import os
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from temporalio.client import (
    Client,
    WorkflowExecution,
    WorkflowExecutionStatus,
    WorkflowHandle,
)
from temporalio.common import SearchAttributePair, TypedSearchAttributes
from temporalio.service import RPCError

from council.calls import CallProgress
from council.limits import MAX_THREAD_TURNS
from council.models import DeliberationRecord, DeliberationRequest
from council.progress import Progress
from council.thread import Turn
from workflows import search_attributes
from workflows.deliberation import Deliberation

# OpenRouter ids; COUNCIL_MODELS (comma-separated) replaces them.
DEFAULT_MODELS = (
    "openai/gpt-4o-mini",
    "anthropic/claude-3.5-haiku",
    "google/gemini-2.0-flash-001",
    "meta-llama/llama-3.3-70b-instruct",
)
QUERY_TIMEOUT = timedelta(seconds=5)
QUESTION_MEMO_CHARS = 300
# The memo holds the question, so that a listing can show it: encrypted with the other
# payloads when a payload key is set.
QUESTION_MEMO = "question"


def default_models() -> list[str]:
    configured = os.environ.get("COUNCIL_MODELS", "")
    return [m.strip() for m in configured.split(",") if m.strip()] or list(DEFAULT_MODELS)


def default_chairman() -> str | None:
    return os.environ.get("COUNCIL_CHAIRMAN") or None


def workflow_id(question: str, readable: bool = True) -> str:
    """council-<the question's first words>-<random>; with encrypted payloads the id (which
    Temporal stores in clear) leaves the question out."""
    if not readable:
        return f"council-{uuid.uuid4().hex[:12]}"
    slug = re.sub(r"[^a-z0-9]+", "-", question.lower()).strip("-")[:40].rstrip("-") or "question"
    return f"council-{slug}-{uuid.uuid4().hex[:6]}"


def ui_url(client: Client, workflow: str) -> str:
    """The run's page in the Temporal Web UI (COUNCIL_UI_URL, default the dev server's)."""
    base = os.environ.get("COUNCIL_UI_URL", "http://localhost:8233").rstrip("/")
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


async def start(
    client: Client, request: DeliberationRequest, task_queue: str, id: str | None = None
) -> WorkflowHandle[Deliberation, DeliberationRecord]:
    """Start a validated request; the id defaults to a readable one (see workflow_id). Its
    thread (the search attribute CouncilThread) is the thread it follows up, or its own id."""
    readable = client.data_converter.payload_codec is None
    wid = id or workflow_id(request.question, readable)
    thread = TypedSearchAttributes(
        [SearchAttributePair(search_attributes.THREAD, request.thread_id or wid)]
    )
    return await client.start_workflow(
        Deliberation.run,
        request.model_dump(mode="json"),
        id=wid,
        task_queue=task_queue,
        static_summary=request.question[:200],
        static_details=details(request),
        memo={QUESTION_MEMO: request.question[:QUESTION_MEMO_CHARS]},
        search_attributes=thread,
        result_type=DeliberationRecord,
    )


class FollowUpError(ValueError):
    """A deliberation that cannot be followed up: the message says why, in one line."""


async def follow_up(
    client: Client, request: DeliberationRequest, follow_up_of: str
) -> DeliberationRequest:
    """The request as a follow-up of a completed deliberation: its thread, and the
    thread's earlier turns (the newest that fit the request's context_tokens; the ids of
    the older ones as dropped)."""
    previous = handle(client, follow_up_of)
    try:
        status = await status_of(previous)
    except RPCError:
        raise FollowUpError(f"no deliberation with id {follow_up_of!r} to follow up") from None
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
    earlier = [
        row.id
        for row in await list_thread(client, thread)
        if row.id != last.id
        and row.status == "completed"
        and row.started
        and last.started_at
        and row.started < last.started_at
    ]
    turns = [Turn(id=last.id, question=last.query, answer=last.stage3.response)]
    used = turns[0].tokens
    for wid in reversed(earlier):  # newest first, until the bound is passed
        if used > request.context_tokens:
            break
        record = await handle(client, wid).result()
        if record.stage3 is not None:
            turns.insert(0, Turn(id=wid, question=record.query, answer=record.stage3.response))
            used += turns[0].tokens
    dropped = earlier[: len(earlier) - (len(turns) - 1)]
    return DeliberationRequest.model_validate(
        {
            **request.model_dump(),
            "follow_up_of": last.id,
            "thread_id": thread,
            "history": [turn.model_dump() for turn in turns],
            "dropped_turns": dropped,
        }
    )


def handle(client: Client, workflow: str) -> WorkflowHandle[Deliberation, DeliberationRecord]:
    return client.get_workflow_handle(workflow, result_type=DeliberationRecord)


def status_name(status: WorkflowExecutionStatus | None) -> str:
    return status.name.lower() if status else "unknown"


async def status_of(handle: WorkflowHandle) -> str:
    """running, completed, failed, terminated, ... (raises RPCError if there is no such run)."""
    return status_name((await handle.describe()).status)


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

    @property
    def where(self) -> str:
        """The termination reason once it ended, else the stage it is in."""
        return self.reason or self.stage or "-"


async def list_deliberations(
    client: Client, limit: int = 20, text: str = "", thread: str | None = None
) -> list[Listed]:
    """The most recent deliberations, newest first; with text, those whose id or question
    contains it (case-insensitive); with a thread, that thread's, oldest first."""
    rows = []
    needle = text.strip().lower()
    query = f'WorkflowType="{Deliberation.__name__}"'
    if thread is not None:
        query += f' AND {search_attributes.THREAD.name}="{_quoted(thread)}"'
    async for execution in client.list_workflows(query, limit=None if needle else limit):
        attrs = execution.typed_search_attributes
        question = await _question(execution)
        row = Listed(
            id=execution.id,
            status=status_name(execution.status),
            round=attrs.get(search_attributes.ROUND),
            stage=attrs.get(search_attributes.STAGE),
            reason=attrs.get(search_attributes.TERMINATION_REASON),
            started=execution.start_time,
            question=question,
        )
        if needle and needle not in f"{row.id}\n{row.question or ''}".lower():
            continue
        rows.append(row)
        if len(rows) >= limit:
            break
    rows.sort(key=lambda r: r.started or datetime.min.replace(tzinfo=UTC), reverse=thread is None)
    return rows


async def list_thread(client: Client, thread: str) -> list[Listed]:
    """Every deliberation of a thread, oldest first."""
    return await list_deliberations(client, limit=MAX_THREAD_TURNS + 1, thread=thread)


def _quoted(value: str) -> str:
    """A value inside a visibility query's double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"')


async def _question(execution: WorkflowExecution) -> str | None:
    """The question from the memo; None where there is none, or this client cannot read it
    (a run started without it, or encrypted with a key this process does not have)."""
    try:
        memo = await execution.memo()
    except Exception:
        return None
    question = memo.get(QUESTION_MEMO)
    return question if isinstance(question, str) else None


async def read_record(handle: WorkflowHandle) -> DeliberationRecord:
    """The record: the result once the run completed, the record so far while it runs.
    Raises what Temporal raised when the run failed or no worker answers."""
    if await status_of(handle) == "running":
        return await handle.query(Deliberation.current_record, rpc_timeout=QUERY_TIMEOUT)
    return await handle.result()


async def partial_replies(handle: WorkflowHandle) -> list[CallProgress]:
    """The replies the models are writing now, as far as they have arrived: the heartbeat
    details of the model calls in flight."""
    description = await handle.describe()
    converter = description.data_converter.payload_converter
    replies = []
    for pending in description.raw_description.pending_activities:
        payloads = pending.heartbeat_details.payloads
        if payloads:
            try:
                replies.append(converter.from_payload(payloads[-1], CallProgress))
            except Exception:  # details of another shape (an older worker): nothing to show
                continue
    return replies


async def follow(
    handle: WorkflowHandle, since: int = 0, poll_seconds: float = 0.5
) -> AsyncIterator[Progress | None]:
    """The run's progress, each time it may have moved, until it closes: a Progress with
    the events after the last one seen, or None while no worker answers the query."""
    closed = False
    while True:
        try:
            progress = await handle.query(Deliberation.progress, since, rpc_timeout=QUERY_TIMEOUT)
        except (RPCError, Exception):  # no worker yet, or the run just closed
            if await status_of(handle) != "running":
                return
            yield None
            await asyncio.sleep(poll_seconds * 2)
            continue
        since = progress.next_seq
        yield progress
        if progress.finished or closed:
            return
        closed = await status_of(handle) != "running"  # if so, one last read for the final events
        await asyncio.sleep(poll_seconds)
