"""The MCP Tasks extension (`io.modelcontextprotocol/tasks`, SEP-2663) as a client takes
it, on the SDK's own client extension interface (mcp.client.ClientExtension): a
tools/call answered with a task is polled with tasks/get, at the interval the task asks,
until it ends, and Client.call_tool returns its result. Written from the extension's
text, not from the server's code, so that a wrong shape on either side shows."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import anyio
from mcp import MCPError
from mcp.client import ClaimContext, ClientExtension, ResultClaim
from mcp.client.session import ClientSession
from mcp.types import CallToolResult, Request, RequestParams, Result
from pydantic import Field

EXTENSION = "io.modelcontextprotocol/tasks"
TaskStatus = Literal["working", "input_required", "completed", "failed", "cancelled"]
ENDED = ("completed", "failed", "cancelled")


class TaskParams(RequestParams):
    task_id: str


class UpdateTaskParams(TaskParams):
    input_responses: dict[str, Any] = Field(default_factory=dict)


class GetTask(Request[TaskParams, Literal["tasks/get"]]):
    method: Literal["tasks/get"] = "tasks/get"
    params: TaskParams
    name_param = "taskId"  # the extension routes its methods by the Mcp-Name header


class UpdateTask(Request[UpdateTaskParams, Literal["tasks/update"]]):
    method: Literal["tasks/update"] = "tasks/update"
    params: UpdateTaskParams
    name_param = "taskId"


class CancelTask(Request[TaskParams, Literal["tasks/cancel"]]):
    method: Literal["tasks/cancel"] = "tasks/cancel"
    params: TaskParams
    name_param = "taskId"


class CreatedTask(Result):
    """A tools/call's answer when the server made a task of it."""

    result_type: Literal["task"] = "task"
    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None  # required, null for no limit
    poll_interval_ms: int | None = None


class DetailedTask(Result):
    """tasks/get's answer: the task, with its result or error once it ended."""

    result_type: Literal["complete"]
    task_id: str
    status: TaskStatus
    status_message: str | None = None
    created_at: str
    last_updated_at: str
    ttl_ms: int | None
    poll_interval_ms: int | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None


class Acknowledged(Result):
    result_type: Literal["complete"]


async def get_task(
    session: ClientSession, task_id: str, timeout: float | None = None
) -> DetailedTask:
    request = GetTask(params=TaskParams(task_id=task_id))
    return await session.send_request(request, DetailedTask, request_read_timeout_seconds=timeout)


async def cancel_task(session: ClientSession, task_id: str) -> Acknowledged:
    return await session.send_request(CancelTask(params=TaskParams(task_id=task_id)), Acknowledged)


async def update_task(session: ClientSession, task_id: str) -> Acknowledged:
    params = UpdateTaskParams(task_id=task_id, input_responses={"unasked": {"action": "accept"}})
    return await session.send_request(UpdateTask(params=params), Acknowledged)


async def polled(
    session: ClientSession, task_id: str, timeout: float | None = None, within: float = 120
) -> list[DetailedTask]:
    """Every answer of tasks/get until the task ends, at the interval it asks (each
    request given `timeout` seconds; None: the session's). A task still going after
    `within` seconds is a failure that says what it last reported."""
    seen = [await get_task(session, task_id, timeout)]
    with anyio.move_on_after(within):
        while seen[-1].status not in ENDED:
            await anyio.sleep((seen[-1].poll_interval_ms or 1000) / 1000)
            seen.append(await get_task(session, task_id, timeout))
    last = seen[-1]
    assert last.status in ENDED, f"{task_id} still {last.status} after {within} s: {last}"
    return seen


def outcome(task: DetailedTask) -> CallToolResult:
    """The result of a task that ended as the call's own result would have been."""
    if task.status == "completed":
        return CallToolResult.model_validate(task.result)
    if task.status == "failed" and task.error is not None:
        raise MCPError(task.error["code"], task.error["message"], task.error.get("data"))
    raise RuntimeError(f"task {task.task_id} ended {task.status}: {task.status_message}")


class Tasks(ClientExtension):
    """Declares the extension on every request, and finishes each task a tool call gets by
    polling it; what it saw is kept for the test to read."""

    identifier = EXTENSION

    def __init__(self) -> None:
        self.created: list[CreatedTask] = []
        self.polls: list[DetailedTask] = []

    def claims(self) -> Sequence[ResultClaim[Any]]:
        return [ResultClaim(result_type="task", model=CreatedTask, resolve=self.finish)]

    async def finish(self, created: CreatedTask, ctx: ClaimContext) -> CallToolResult:
        self.created.append(created)
        polls = await polled(ctx.session, created.task_id, ctx.read_timeout_seconds)
        self.polls.extend(polls)
        return outcome(polls[-1])
