"""What a deliberation's page shows, read from Temporal: its record (the record so far
while it runs), where it is, each call in flight with its text and retries, and the
other turns of its thread. The pages and the live stream read through here, so that a
page loaded and a page refreshed by the stream show the same state.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from app.store import store
from app.temporal import connection
from app.views.render import event_line
from council.calls import Stage
from council.models import DeliberationRecord
from council.progress import EventKind, Progress, ProgressEvent
from runs import finding, following, listing
from runs.stuck import RunStuck, stuck
from web import views
from workflows.deliberation import Deliberation


async def read_record(handle: Any) -> tuple[DeliberationRecord | None, str | None]:
    """The record (the record so far while it runs), or None and why there is none, in our
    words. A server that does not answer is raised (the app answers 503); a blob the store
    cannot give back is the store's own line (naming the blob and the store)."""
    try:
        return await finding.read_record(handle), None
    except RunStuck as problem:
        return None, stuck_line(str(problem))
    except WorkflowFailureError as failure:
        why = f"the deliberation failed: {finding.failure_reason(failure)}"
        return finding.failed_record(failure), why
    except store.StoreError as error:
        return None, str(error)
    except Exception as error:  # a query no worker answers yet, and the like
        if isinstance(error, RPCError) and connection.unavailable(error):
            raise
        return None, "no record yet: no worker answers for this deliberation"


def stuck_line(line: str) -> str:
    """What the page says of a run whose workflow task keeps failing."""
    return (
        f"This run is stuck: {line}. No worker can go on with it; Stop ends it and keeps "
        "the record it had."
    )


async def progress_of(handle: Any) -> Progress | None:
    """The run's progress from its first event; None while no worker answers."""
    try:
        progress: Progress = await handle.query(
            Deliberation.progress, 0, rpc_timeout=finding.QUERY_TIMEOUT
        )
        return progress
    except Exception as error:
        if isinstance(error, RPCError) and connection.unavailable(error):
            raise
        return None


async def read_turn(
    found: finding.Found,
    events: list[ProgressEvent] | None = None,
    progress: Progress | None = None,
    known: tuple[DeliberationRecord | None, str | None] | None = None,
) -> views.Turn:
    """The deliberation as its page shows it. A running one: `events` (all so far) and the
    latest `progress` when the caller follows the run already, else read here; `known`:
    the record (and problem) when the caller read it since the run last moved."""
    if found.status == "running":
        problem = await stuck(found.handle, found.description)
        if problem is not None:
            return views.Turn(found.id, found.status, None, stuck_line(problem.line), stuck=True)
    record, why = known if known is not None else await read_record(found.handle)
    turn = views.Turn(found.id, found.status, record, why)
    if found.status == "failed":
        if record is not None:
            turn.provider_problem = _provider_problem(record, [])
        return turn
    if found.status != "running":
        return turn
    if progress is None:
        progress = await progress_of(found.handle)
        events = list(progress.events) if progress else []
    events = events or []
    in_flight = await finding.calls_in_flight(found.handle)
    turn.stage, turn.round, turn.calls = views.stage_calls(events, in_flight, datetime.now(UTC))
    turn.stop_requested = any(e.kind == EventKind.STOP_REQUESTED for e in events)
    turn.events = [(e.seq, event_line(e)) for e in events]
    if progress is not None:
        turn.where = views.where_line(
            progress.stage, progress.round, progress.max_rounds, progress.min_rounds, turn.view
        )
    else:
        turn.where = following.WAITING
    for call in in_flight:
        if call.stage == Stage.SYNTHESIS:
            turn.chairman_text, turn.chairman_writing = call.text, call.model
    if record is not None:
        turn.provider_problem = _provider_problem(record, in_flight)
    return turn


def _provider_problem(record: DeliberationRecord, in_flight: list[Any]) -> str | None:
    failures = [(c.failure_type, c.failure) for c in in_flight if c.failure]
    failures += [(e.error_type, e.describe()) for e in record.errors]
    return views.provider_problem(record.usage.calls, failures)


async def read_thread(
    client: Client, current: views.Turn
) -> tuple[list[views.Turn], list[views.Turn]]:
    """The other turns of the current one's thread, oldest first: those before it and those
    after it (its follow-ups and theirs)."""
    record = current.record
    if record is None:
        return [], []
    thread = record.thread_id or record.id
    before: list[views.Turn] = []
    after: list[views.Turn] = []
    for row in await listing.list_thread(client, thread):
        if row.id == current.id:
            continue
        earlier, problem = await read_record(finding.handle(client, row.id))
        turn = views.Turn(row.id, row.status, earlier, problem)
        later = (
            record.started_at is not None
            and row.started is not None
            and row.started > record.started_at
        )
        (after if later else before).append(turn)
    return before, after
