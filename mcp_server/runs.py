"""The deliberations the tools and the tasks act on, a thin layer over runs/
(the functions the CLI and the page call), so the same rules hold: ids follow
council.ids, only deliberations are acted on, requests are built and validated as the
CLI builds them, and a problem is one line."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Any, cast

from mcp.types import CallToolResult
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from app.settings.environment import Settings
from app.store import store
from app.temporal import connection
from council.config import Config
from council.models import DeliberationRecord
from council.progress import Progress
from mcp_server import results
from mcp_server.inputs import Problem, deliberation_request, stop_reason
from runs import finding, following, starting, steering
from runs.priority import Launch
from runs.quota import Quota, QuotaExceeded
from runs.stuck import stuck

# A progress query from this sequence number returns where the run is and no events.
NO_EVENTS = 2**31 - 1


@dataclass(frozen=True)
class Backend:
    """What the tools act on: the Temporal client, the configuration (council.toml), the
    settings the server started with, and the task queue new deliberations go to."""

    client: Client
    config: Config
    settings: Settings
    address: str

    @property
    def task_queue(self) -> str:
        return self.settings.task_queue

    def launch(self, caller: str | None = None) -> Launch:
        """A person's run (an assistant asks for its user) for its caller: over HTTP, who
        it proved to be (mcp_server.http_transport), else COUNCIL_TENANT, else "mcp"; held
        to the callers' quota."""
        return Launch(tenant=caller or self.settings.tenant or "mcp", quota=Quota.of(self.settings))


def caller_of(request: Any) -> str | None:
    """The fairness key the HTTP transport found for a tool call's request (None on
    stdio, where the one client is the process's)."""
    return getattr(getattr(request, "state", None), "tenant", None)


async def begin(
    backend: Backend, caller: str | None = None, **arguments: Any
) -> WorkflowHandle[Any, DeliberationRecord]:
    """Start the deliberation the arguments ask for (a Problem when they cannot be used)."""
    request = await deliberation_request(backend.config, settings=backend.settings, **arguments)
    try:
        return await starting.start(
            backend.client, request, backend.task_queue, launch=backend.launch(caller)
        )
    except QuotaExceeded as over:
        raise Problem(str(over)) from None


async def start(backend: Backend, caller: str | None = None, **arguments: Any) -> CallToolResult:
    return results.started((await begin(backend, caller, **arguments)).id)


async def answer(handle: WorkflowHandle[Any, DeliberationRecord]) -> CallToolResult:
    """What ask_council returns for a run once it closes: its answer and summary line; a
    Problem saying why when it failed."""
    try:
        record: DeliberationRecord = await handle.result()
    except WorkflowFailureError as error:
        reason = finding.failure_reason(error)
        raise Problem(f"deliberation {handle.id} failed: {reason}") from None
    return results.finished(record)


async def find(backend: Backend, wid: str, run_id: str | None = None) -> finding.Found:
    try:
        return await finding.find(backend.client, wid, run_id)
    except finding.NoSuchDeliberation as missing:
        raise Problem(f"{missing} on {backend.address}") from None


async def where(handle: WorkflowHandle[Any, Any]) -> Progress | None:
    """Where a running deliberation is; None when no worker answers."""
    # follow is an async generator (declared an iterator): closed here, not when collected.
    followed = cast(AsyncGenerator[Progress | None], following.follow(handle, NO_EVENTS))
    async with aclosing(followed) as updates:
        return await anext(updates, None)


async def get(backend: Backend, wid: str) -> CallToolResult:
    found = await find(backend, wid)
    status = found.status
    if status == "running":
        problem = await stuck(found.handle, found.description)
        if problem is not None:
            return results.stuck(found.id, problem.line)
        progress = await where(found.handle)
        if progress is None:  # no worker answers, or the run closed just now
            status = await finding.status_of(found.handle)
        if status == "running":
            return results.running(found.id, progress)
    try:
        record = await finding.read_record(found.handle)
    except WorkflowFailureError as error:
        return results.closed(found.id, status, finding.failure_reason(error))
    return results.finished(record)


async def stop(backend: Backend, wid: str, reason: str | None) -> CallToolResult:
    reason = stop_reason(reason)
    found = await find(backend, wid)
    try:
        stopped = await steering.stop(found, reason)
    except steering.AlreadyFinished as finished:
        raise Problem(f"{wid}: {finished}") from None
    if stopped.terminated:
        return results.terminated(found.id, stopped.line)
    return results.stop_requested(found.id)


async def answered(backend: Backend, call: Awaitable[CallToolResult]) -> CallToolResult:
    """The call's result; a Problem or a Temporal error as a one-line tool error."""
    try:
        return await call
    except Problem as problem:
        return results.problem(str(problem))
    except store.StoreError as error:  # a blob gone or corrupt: the store's one line
        return results.problem(str(error))
    except RPCError as error:
        return results.problem(connection.described(error, backend.address))
