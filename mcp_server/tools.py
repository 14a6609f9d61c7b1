"""The tools: ask_council, start_deliberation, get_deliberation and stop_deliberation, a
thin layer over workflows.client (the functions the CLI and the page call), so the same
rules hold: ids follow council.ids, only deliberations are acted on, requests are built
and validated as the CLI builds them, and a problem is one line."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from dataclasses import dataclass
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from app import connection
from app.render import event_line
from app.settings import Settings
from council import limits, numbers
from council.config import Config
from council.models import DeliberationRecord
from council.progress import EventKind, Progress
from council.validation import one_line
from mcp_server import results
from mcp_server.inputs import AttachmentInput, Problem, deliberation_request, stop_reason
from workflows import client as deliberations
from workflows.priority import Launch

INSTRUCTIONS = (
    "A council of language models answers a question together: each model answers, the "
    "models review each other's answers anonymously, refine them, and a chairman writes "
    "the final answer. ask_council waits for that answer (minutes, with progress "
    "notifications); start_deliberation returns an id at once, get_deliberation reads its "
    "status and answer, stop_deliberation ends it early with an answer from what it has."
)
# The events a progress notification reports: stages and rounds starting and ending,
# the stop and the end (each model's reply is left out).
REPORTED = {
    EventKind.STAGE_START,
    EventKind.STAGE_COMPLETE,
    EventKind.ROUND_START,
    EventKind.ROUND_COMPLETE,
    EventKind.STOP_REQUESTED,
    EventKind.TERMINATED,
    EventKind.FINISHED,
}
# A progress query from this sequence number returns where the run is and no events.
NO_EVENTS = 2**31 - 1


def ascii_whole(value: Any) -> Any:
    """A number sent as text counts in ASCII digits only (pydantic alone would also read
    "1_0" as 10), as everywhere else (council.numbers)."""
    if isinstance(value, str) and numbers.whole(value) is None:
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    return value


Question = Annotated[str, Field(description="the question the council deliberates on")]
CouncilName = Annotated[
    str | None,
    Field(description="a council of council.toml (default: the default council)"),
]
Models = Annotated[
    list[str] | None,
    Field(description="the council's models, 2 to 12 (default: the council's)"),
]
Chairman = Annotated[
    str | None,
    Field(description="the model that writes the final answer (default: the council's)"),
]
MaxRounds = Annotated[
    int | None,
    BeforeValidator(ascii_whole),
    Field(description="refinement rounds at most, 1 to 5 (default: the council's)"),
]
Attachments = Annotated[
    list[AttachmentInput] | None,
    Field(
        description=(
            "files every member, reviewer and the chairman reads: each {name, media_type?, "
            "text | data_base64}; text (Markdown, code, CSV, JSON), a PDF (read as its text) "
            "or a PNG, JPEG, GIF or WebP image; at most "
            f"{limits.MAX_ATTACHMENTS} files, {limits.size_text(limits.MAX_ATTACHMENT_TEXT_BYTES)}"
            f" of text or {limits.size_text(limits.MAX_ATTACHMENT_IMAGE_BYTES)} of image each, "
            f"{limits.size_text(limits.MAX_ATTACHMENTS_TOTAL_BYTES)} in all"
        )
    ),
]
Id = Annotated[str, Field(description="the deliberation's id")]
Reason = Annotated[
    str | None, Field(description="why it is stopped, kept in the record (at most 500 characters)")
]
Outcome = Annotated[CallToolResult, results.DeliberationState]


def unwrapped(text: str) -> str:
    """A docstring as prose: each paragraph on one line, without the source's indentation."""
    paragraphs = text.split("\n\n")
    return "\n\n".join(" ".join(part.split()) for part in paragraphs if part.strip())


class CouncilServer(MCPServer):
    """The SDK's server, with arguments of the wrong type (or missing) reported as every
    other bad input is: one line, as council.validation words it (the SDK's report is
    several lines, with a link); an argument a tool does not take refused, not ignored
    (an `id` would otherwise be replaced without a word); and each tool's description its
    docstring without the source's indentation."""

    def tool(self, *args: Any, **options: Any) -> Callable[[Any], Any]:
        register = super().tool

        def described(fn: Any) -> Any:
            options.setdefault("description", unwrapped(inspect.getdoc(fn) or ""))
            return register(*args, **options)(fn)

        return described

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        tools = {tool.name: tool for tool in await self.list_tools()}
        if name in tools:
            takes = list(tools[name].input_schema.get("properties", {}))
            unknown = sorted(set(arguments) - set(takes))
            if unknown:
                known = ", ".join(takes)
                raise ToolError(f"{name} takes no argument {unknown[0]!r} (it takes {known})")
        try:
            return await super().call_tool(name, arguments, context)
        except ToolError as error:
            if isinstance(error.__cause__, ValidationError):
                raise ToolError(one_line(error.__cause__)) from None
            raise


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

    @property
    def launch(self) -> Launch:
        """A person's run (an assistant asks for its user), under COUNCIL_TENANT if set."""
        return Launch(tenant=self.settings.tenant or "mcp")


class Reporter:
    """Progress notifications for one tool call (sent only when the client asked for them
    with a progress token): a count that grows, and a line for a person."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.sent = 0

    async def send(self, message: str) -> None:
        self.sent += 1
        await self.ctx.report_progress(self.sent, message=message)

    async def follow(self, handle: WorkflowHandle) -> None:
        """Report the run until it closes: each stage and round as it starts and ends, and
        when no worker answers."""
        async for event in deliberations.events(handle):
            if isinstance(event, str):
                await self.send(event)
            elif event.kind in REPORTED:
                await self.send(event_line(event))


async def ask(backend: Backend, ctx: Context, **arguments: Any) -> CallToolResult:
    request = deliberation_request(backend.config, settings=backend.settings, **arguments)
    handle = await deliberations.start(
        backend.client, request, backend.task_queue, launch=backend.launch
    )
    reporter = Reporter(ctx)
    await reporter.send(f"deliberation {handle.id} started")
    await reporter.follow(handle)
    return results.finished(await outcome(handle))


async def outcome(handle: WorkflowHandle) -> DeliberationRecord:
    """The record of a run that closed; a Problem saying why when it failed."""
    try:
        return await handle.result()
    except WorkflowFailureError as error:
        reason = deliberations.failure_reason(error)
        raise Problem(f"deliberation {handle.id} failed: {reason}") from None


async def start(backend: Backend, **arguments: Any) -> CallToolResult:
    request = deliberation_request(backend.config, settings=backend.settings, **arguments)
    handle = await deliberations.start(
        backend.client, request, backend.task_queue, launch=backend.launch
    )
    return results.started(handle.id)


async def find(backend: Backend, wid: str) -> deliberations.Found:
    try:
        return await deliberations.find(backend.client, wid)
    except deliberations.NoSuchDeliberation as missing:
        raise Problem(f"{missing} on {backend.address}") from None


async def where(handle: WorkflowHandle) -> Progress | None:
    """Where a running deliberation is; None when no worker answers."""
    async with aclosing(deliberations.follow(handle, since=NO_EVENTS)) as updates:
        async for progress in updates:
            return progress
    return None


async def get(backend: Backend, wid: str) -> CallToolResult:
    found = await find(backend, wid)
    status = found.status
    if status == "running":
        progress = await where(found.handle)
        if progress is None:  # no worker answers, or the run closed just now
            status = await deliberations.status_of(found.handle)
        if status == "running":
            return results.running(found.id, progress)
    try:
        record = await deliberations.read_record(found.handle)
    except WorkflowFailureError as error:
        return results.closed(found.id, status, deliberations.failure_reason(error))
    return results.finished(record)


async def stop(backend: Backend, wid: str, reason: str | None) -> CallToolResult:
    reason = stop_reason(reason)
    found = await find(backend, wid)
    try:
        await deliberations.stop(found, reason)
    except deliberations.AlreadyFinished as finished:
        raise Problem(f"{wid}: {finished}") from None
    return results.stop_requested(found.id)


async def answered(backend: Backend, call: Awaitable[CallToolResult]) -> CallToolResult:
    """The call's result; a Problem or a Temporal error as a one-line tool error."""
    try:
        return await call
    except Problem as problem:
        return results.problem(str(problem))
    except RPCError as error:
        return results.problem(connection.described(error, backend.address))


def build_server(backend: Backend) -> MCPServer:
    """The MCP server with the four tools, acting through `backend`."""
    server = CouncilServer("council", instructions=INSTRUCTIONS, log_level="WARNING")
    starts = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

    @server.tool(annotations=starts)
    async def ask_council(
        question: Question,
        ctx: Context,
        council: CouncilName = None,
        models: Models = None,
        chairman: Chairman = None,
        max_rounds: MaxRounds = None,
        attachments: Attachments = None,
    ) -> Outcome:
        """Ask the council a question and wait for its final answer (this takes minutes;
        progress notifications follow each stage and round). Returns the answer, then one
        line with the deliberation's id, why it ended, and the tokens and cost it took."""
        arguments = {
            "question": question,
            "council": council,
            "models": models,
            "chairman": chairman,
            "max_rounds": max_rounds,
            "attachments": attachments,
        }
        return await answered(backend, ask(backend, ctx, **arguments))

    @server.tool(annotations=starts)
    async def start_deliberation(
        question: Question,
        council: CouncilName = None,
        models: Models = None,
        chairman: Chairman = None,
        max_rounds: MaxRounds = None,
        attachments: Attachments = None,
    ) -> Outcome:
        """Start a deliberation and return its id at once, without waiting for the answer;
        get_deliberation reads its status, and its answer once it is done."""
        arguments = {
            "question": question,
            "council": council,
            "models": models,
            "chairman": chairman,
            "max_rounds": max_rounds,
            "attachments": attachments,
        }
        return await answered(backend, start(backend, **arguments))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def get_deliberation(id: Id) -> Outcome:
        """A deliberation's status: where it is while it runs; its final answer and a
        summary line (why it ended, tokens, cost) once it is done."""
        return await answered(backend, get(backend, id))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def stop_deliberation(id: Id, reason: Reason = None) -> Outcome:
        """Stop a running deliberation: the refinement ends and the chairman writes the
        final answer from what the council has; get_deliberation then reads it."""
        return await answered(backend, stop(backend, id, reason))

    return server
