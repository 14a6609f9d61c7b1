"""ask_council as a task: the MCP Tasks extension (`io.modelcontextprotocol/tasks`,
SEP-2663, the task flow of the 2026-07-28 specification). A client that declares the
extension on its call gets a task at once instead of waiting minutes for the answer, and
polls it with tasks/get; a client that does not gets the answer at the end of the call,
with progress notifications on the way (mcp_server.progress).

A task is a deliberation's run, and nothing of it is kept in this process:
- its id is `DELIBERATION_ID/RUN_ID` (the workflow id and Temporal's run id, so that it
  cannot be guessed, as the extension asks),
- its status is the workflow's (running: working; closed: completed, with what
  ask_council returns as its result, an error result included; cancelled in Temporal:
  cancelled),
- tasks/cancel sends the stop signal: the chairman writes the answer from what the council
  has, and the task completes with it,
- tasks/update is acknowledged (a deliberation never asks its client for input).
So a task outlives a restart of this server, and any server on the same Temporal
namespace answers for it, for as long as Temporal keeps the closed run (the namespace's
retention; ttlMs is null).

The SDK carries the extension's plumbing (Extension: new methods and the tools/call
interceptor; require_client_extension answers -32021); the shapes are the extension's.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any, Literal

from mcp import MCPError
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.extension import Extension, MethodBinding
from mcp.server.mcpserver import require_client_extension
from mcp.types import (
    INTERNAL_ERROR,
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    RequestParams,
    TextContent,
)
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import BaseModel, ConfigDict, Field
from pydantic.alias_generators import to_camel
from temporalio.client import WorkflowExecutionDescription
from temporalio.service import RPCError

from app.temporal import connection
from mcp_server import results, runs
from mcp_server.inputs import Problem
from runs import finding, steering

EXTENSION = "io.modelcontextprotocol/tasks"
# The tools a task can stand for: the one that waits for the answer.
DEFERRED_TOOLS = {"ask_council"}
# How often a client should ask: a deliberation takes minutes.
POLL_INTERVAL_MS = 2000
CANCEL_REASON = "cancelled by the MCP client (tasks/cancel)"

_as_task: ContextVar[bool] = ContextVar("as_task", default=False)


def as_task() -> bool:
    """Whether the tool call being served becomes a task: the tool starts the run and
    returns at once (start_deliberation's result), and the interceptor hands the client
    the task instead."""
    return _as_task.get()


def offered(ctx: ServerRequestContext[Any, Any]) -> bool:
    """The client declared the extension on this request (on a 2026-07-28 connection: an
    older one cannot carry a task)."""
    if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False
    capabilities = ctx.session.client_capabilities
    return bool(capabilities and capabilities.extensions and EXTENSION in capabilities.extensions)


class TaskParams(RequestParams):
    task_id: str


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)


Status = Literal["working", "input_required", "completed", "failed", "cancelled"]


class Task(BaseModel):
    """A task as tasks/get (and the call that created it) reports it."""

    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True)

    task_id: str
    status: Status
    status_message: str | None = None
    created_at: datetime
    last_updated_at: datetime
    ttl_ms: int | None = None
    poll_interval_ms: int = POLL_INTERVAL_MS
    result: dict[str, Any] | None = None

    def wire(self, result_type: Literal["task", "complete"]) -> dict[str, Any]:
        """The result as sent: `task` for the call that created it, `complete` for
        tasks/get; ttlMs is always there (null: no limit)."""
        shape = self.model_dump(by_alias=True, mode="json", exclude_none=True)
        return {"resultType": result_type, **shape, "ttlMs": self.ttl_ms}

    @classmethod
    def of(
        cls,
        found: finding.Found,
        status: Status,
        message: str | None,
        updated: datetime | None = None,
        result: dict[str, Any] | None = None,
    ) -> Task:
        """The task of a run: created when it started, last updated when it closed (while
        it runs: now), unless `updated` says when."""
        about = described(found)
        return cls(
            task_id=f"{found.id}/{about.run_id}",
            status=status,
            status_message=message,
            created_at=about.start_time,
            last_updated_at=updated or about.close_time or datetime.now(UTC),
            result=result,
        )


def described(found: finding.Found) -> WorkflowExecutionDescription:
    """Temporal's description of a run found by id (runs.find always reads it)."""
    assert found.description is not None
    return found.description


def last_text(result: CallToolResult) -> str | None:
    """A tool result's status in one line: the summary line of an answer, or an error's
    message."""
    data = result.structured_content
    if isinstance(data, dict) and isinstance(data.get("summary"), str):
        return str(data["summary"])
    lines = [block.text for block in result.content if isinstance(block, TextContent)]
    return lines[-1] if lines else None


class DeliberationTasks(Extension):
    """The extension, acting through the backend the tools use."""

    identifier = EXTENSION

    def __init__(self, backend: runs.Backend) -> None:
        self.backend = backend

    def methods(self) -> Sequence[MethodBinding]:
        versions = frozenset(MODERN_PROTOCOL_VERSIONS)
        return [
            MethodBinding("tasks/get", TaskParams, self.get_task, protocol_versions=versions),
            MethodBinding(
                "tasks/update", UpdateTaskParams, self.update_task, protocol_versions=versions
            ),
            MethodBinding("tasks/cancel", TaskParams, self.cancel_task, protocol_versions=versions),
        ]

    async def intercept_tool_call(
        self,
        params: CallToolRequestParams,
        ctx: ServerRequestContext[Any, Any],
        call_next: CallNext,
    ) -> HandlerResult:
        if params.name not in DEFERRED_TOOLS or not offered(ctx):
            return await call_next(ctx)
        token = _as_task.set(True)
        try:
            result = await call_next(ctx)
        finally:
            _as_task.reset(token)
        data = (
            result.structured_content
            if isinstance(result, CallToolResult) and not result.is_error
            else None
        )
        if not isinstance(data, dict) or data.get("status") != "running":
            return result  # bad input, or Temporal could not be reached: the tool's error
        try:
            # Read back before it is handed out: tasks/get answers for it from now on.
            found = await runs.find(self.backend, str(data["id"]))
        except (Problem, RPCError):
            return result  # started, and its id said: get_deliberation reads it
        started = f"deliberation {found.id} started"
        return Task.of(found, "working", started, described(found).start_time).wire("task")

    async def get_task(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        require_client_extension(ctx, EXTENSION)
        found = await self.lookup(params.task_id)
        try:
            return (await self.state(found)).wire("complete")
        except Problem as problem:  # it vanished since it was found
            raise MCPError(code=INVALID_PARAMS, message=str(problem)) from None
        except RPCError as error:
            raise self.unreachable(error) from None

    async def update_task(
        self, ctx: ServerRequestContext[Any, Any], params: UpdateTaskParams
    ) -> dict[str, Any]:
        require_client_extension(ctx, EXTENSION)
        await self.lookup(params.task_id)
        return {}

    async def cancel_task(
        self, ctx: ServerRequestContext[Any, Any], params: TaskParams
    ) -> dict[str, Any]:
        require_client_extension(ctx, EXTENSION)
        found = await self.lookup(params.task_id)
        try:
            await steering.stop(found, CANCEL_REASON)
        except steering.AlreadyFinished:
            pass  # it ended first: the task keeps its result
        except RPCError as error:
            raise self.unreachable(error) from None
        return {}

    async def lookup(self, task: str) -> finding.Found:
        """The run a task id names; -32602 when it names none."""
        wid, _, run_id = task.rpartition("/")
        try:
            if wid and run_id:
                return await runs.find(self.backend, wid, run_id)
        except Problem:
            pass
        except RPCError as error:
            raise self.unreachable(error) from None
        shown = task if len(task) <= 80 else task[:77] + "..."
        message = f"no task with id {shown!r} on {self.backend.address}"
        raise MCPError(code=INVALID_PARAMS, message=message)

    async def state(self, found: finding.Found) -> Task:
        """The task of a run: working while it runs, then what ask_council returns."""
        if found.status == "running":
            progress = await runs.where(found.handle)
            if progress is not None or await finding.status_of(found.handle) == "running":
                line = results.running_line(found.id, progress)
                return Task.of(found, "working", line, datetime.now(UTC))
            found = await runs.find(self.backend, found.id, described(found).run_id)
        if found.status == "canceled":
            cancelled = f"deliberation {found.id} was cancelled in Temporal"
            return Task.of(found, "cancelled", cancelled)
        result = await runs.answered(self.backend, runs.answer(found.handle))
        shape = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return Task.of(found, "completed", last_text(result), result=shape)

    def unreachable(self, error: RPCError) -> MCPError:
        message = connection.described(error, self.backend.address)
        return MCPError(code=INTERNAL_ERROR, message=message)
