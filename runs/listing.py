"""Listing runs from outside, and searching them: the newest deliberations (a thread's, a
person's, some by id), a search by text of their questions (which the memo keeps, and a
codec encrypts, so Temporal cannot search it), and which running ones are stuck."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio.client import Client
from temporalio.service import RPCError

from council.ids import EVALUATION_ID_PREFIX
from council.limits import MAX_THREAD_TURNS
from council.progress import shown_status
from runs.finding import handle, question_of, status_name
from runs.stuck import stuck
from workflows import search_attributes
from workflows.deliberation import Deliberation

DELIBERATIONS = f'WorkflowType="{Deliberation.__name__}"'


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
    query = DELIBERATIONS if thread is None else _in_thread(DELIBERATIONS, thread)
    if conversations:
        query += f' AND WorkflowId NOT STARTS_WITH "{EVALUATION_ID_PREFIX}"'
    if ids is not None:
        if not ids:
            return []
        listed = ", ".join(f'"{_quoted(each)}"' for each in ids)
        query += f" AND WorkflowId IN ({listed})"
    return (await _read(client, query, limit, text, None, newest_first=thread is None)).rows


async def search_deliberations(client: Client, limit: int, text: str, reading: int) -> Searched:
    """As list_deliberations, newest first, a search by text reading at most `reading` of
    the newest runs. A search reads each run's question in turn: it is kept in the memo,
    which a codec encrypts, so Temporal cannot search it."""
    return await _read(client, DELIBERATIONS, limit, text, reading)


async def _read(
    client: Client,
    query: str,
    limit: int,
    text: str,
    reading: int | None,
    newest_first: bool = True,
) -> Searched:
    """The runs the query lists, at most `limit`, newest first (or oldest); with text, only
    those whose id or question contains it, of at most `reading` runs read (None: all)."""
    rows: list[Listed] = []
    bounded = False
    needle = text.strip().lower()
    most = (reading + 1 if reading is not None else None) if needle else limit
    read = 0
    async for execution in client.list_workflows(query, limit=most):
        read += 1
        if needle and reading is not None and read > reading:
            bounded = True  # one more than it may read: older ones were left
            break
        attrs = execution.typed_search_attributes
        row = Listed(
            id=execution.id,
            status=status_name(execution.status),
            round=attrs.get(search_attributes.ROUND),
            stage=attrs.get(search_attributes.STAGE),
            reason=attrs.get(search_attributes.TERMINATION_REASON),
            started=execution.start_time,
            question=await question_of(execution),
            thread=attrs.get(search_attributes.THREAD),
            agreement=attrs.get(search_attributes.AGREEMENT),
        )
        if needle and needle not in f"{row.id}\n{row.question or ''}".lower():
            continue
        rows.append(row)
        if len(rows) >= limit:
            break
    await _mark_stuck(client, rows)
    rows.sort(key=lambda r: r.started or datetime.min.replace(tzinfo=UTC), reverse=newest_first)
    return Searched(rows, bounded)


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
    query = f'{DELIBERATIONS} AND ExecutionStatus="Running"'
    found = await _read(client, query, STUCK_RUNS_READ, "", None)
    return [row for row in found.rows if row.stuck], len(found.rows)


async def list_thread(client: Client, thread: str) -> list[Listed]:
    """A thread's newest deliberations (at most MAX_THREAD_TURNS + 1), oldest first."""
    return await list_deliberations(client, limit=MAX_THREAD_TURNS + 1, thread=thread)


async def count_thread(client: Client, thread: str) -> int:
    """How many deliberations a thread has, however long it is."""
    return (await client.count_workflows(_in_thread(DELIBERATIONS, thread))).count


def _in_thread(query: str, thread: str) -> str:
    return f'{query} AND {search_attributes.THREAD.name}="{_quoted(thread)}"'


def _quoted(value: str) -> str:
    """A value inside a visibility query's double quotes."""
    return value.replace("\\", "\\\\").replace('"', '\\"')
