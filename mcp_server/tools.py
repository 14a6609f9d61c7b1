"""The tools: ask_council, start_deliberation, get_deliberation and stop_deliberation, a
thin layer over the runs they act on (mcp_server.runs), with ask_council's progress
notifications (mcp_server.progress) and, for a client that takes tasks, ask_council as a
task (mcp_server.tasks)."""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, InputRequiredResult, ToolAnnotations
from pydantic import BaseModel, BeforeValidator, Field, ValidationError
from pydantic_core import PydanticCustomError

from council import limits, numbers
from council.depth import Depth
from council.validation import one_line
from mcp_server import results, runs, tasks
from mcp_server.inputs import AttachmentInput, Problem
from mcp_server.progress import Reporter, started_line
from mcp_server.runs import Backend
from runs.stuck import RunStuck

INSTRUCTIONS = (
    "A council of language models answers a question together: each model answers, the "
    "models review each other's answers anonymously, refine them, and a chairman writes "
    "the final answer. ask_council waits for that answer (minutes, with progress "
    "notifications; a client that takes tasks gets a task at once and polls it); "
    "start_deliberation returns an id at once, get_deliberation reads its status and "
    "answer, stop_deliberation ends it early with an answer from what it has."
)


def ascii_whole(value: Any) -> Any:
    """A number sent as text counts in ASCII digits only (pydantic alone would also read
    "1_0" as 10), as everywhere else (council.numbers); true or false is no number
    (pydantic would read true as 1)."""
    if isinstance(value, bool):
        raise PydanticCustomError(
            "int_type", "must be a whole number (got {value})", {"value": str(value).lower()}
        )
    if isinstance(value, str) and numbers.whole(value) is None:
        raise PydanticCustomError(
            "int_parsing", "Input should be a valid integer, unable to parse string as an integer"
        )
    return value


class StartArguments(BaseModel):
    """What ask_council and start_deliberation take: the question, and options that stand
    in for the council's own."""

    question: str = Field(description="the question the council deliberates on")
    council: str | None = Field(
        None, description="a council of council.toml (default: the default council)"
    )
    models: list[str] | None = Field(
        None, description="the council's models, 2 to 12 (default: the council's)"
    )
    chairman: str | None = Field(
        None, description="the model that writes the final answer (default: the council's)"
    )
    max_rounds: Annotated[int | None, BeforeValidator(ascii_whole)] = Field(
        None, description="refinement rounds at most, 1 to 5 (default: the council's)"
    )
    attachments: list[AttachmentInput] | None = Field(
        None,
        description=(
            "files every member, reviewer and the chairman reads: each {name, media_type?, "
            "text | data_base64}; text (Markdown, code, CSV, JSON), a PDF (read as its text) "
            "or a PNG, JPEG, GIF or WebP image; at most "
            f"{limits.MAX_ATTACHMENTS} files, {limits.size_text(limits.MAX_ATTACHMENT_TEXT_BYTES)}"
            f" of text or {limits.size_text(limits.MAX_ATTACHMENT_IMAGE_BYTES)} of image each, "
            f"{limits.size_text(limits.MAX_ATTACHMENTS_TOTAL_BYTES)} in all"
        ),
    )
    tools: list[str] | None = Field(
        None,
        description="tools the members may call: council.toml's [tools] entries, fetch, "
        "web_search (default: the council's)",
    )
    depth: Depth | None = Field(
        None,
        description="full: the whole protocol on every question; auto: straight to the "
        "final answer when the members' first answers agree, reviews stopped once the "
        "ranking is settled (default: the council's)",
    )


Tool = TypeVar("Tool", bound=Callable[..., Any])


def takes_start_arguments(tool: Tool) -> Tool:
    """A tool whose `**arguments` are StartArguments' fields: each a parameter of its own,
    with its description, in the schema the client reads, as if the tool declared them."""
    own = inspect.signature(tool, eval_str=True)
    fields = [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if field.is_required() else field.default,
            annotation=Annotated[field.annotation, field],
        )
        for name, field in StartArguments.model_fields.items()
    ]
    signature = own.replace(parameters=[own.parameters["ctx"], *fields])
    tool.__signature__ = signature  # type: ignore[attr-defined]
    return tool


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


def note(line: str) -> None:
    """A line for the server's log (stderr: stdout carries the protocol on stdio)."""
    print(line, file=sys.stderr, flush=True)


async def ask(backend: Backend, ctx: Context, **arguments: Any) -> CallToolResult:
    """Start the run and report it until it closes: its answer. A client that gives up
    first leaves it running (its first notification named the run)."""
    handle = await runs.begin(backend, runs.caller_of(ctx.request_context.request), **arguments)
    reporter = Reporter(ctx, backend.settings.mcp_progress_seconds)
    try:
        await reporter.send(started_line(handle.id))
        await reporter.follow(handle)
    except RunStuck as problem:
        raise Problem(f"deliberation {handle.id} is stuck: {problem} (stop ends it)") from None
    except BaseException:
        note(f"ask_council: the call ended before deliberation {handle.id} did; it goes on")
        raise
    return await runs.answer(handle)


def build_server(backend: Backend) -> MCPServer:
    """The MCP server with the four tools, acting through `backend`."""
    server = CouncilServer(
        "council",
        instructions=INSTRUCTIONS,
        log_level="WARNING",
        extensions=[tasks.DeliberationTasks(backend)],
    )
    starts = ToolAnnotations(read_only_hint=False, destructive_hint=False, open_world_hint=True)

    @server.tool(annotations=starts)
    @takes_start_arguments
    async def ask_council(ctx: Context, **arguments: Any) -> Outcome:
        """Ask the council a question and wait for its final answer (this takes minutes;
        progress notifications follow each stage and round, the first naming the
        deliberation's id; a client that takes tasks gets a task at once). Returns the
        answer, then one line with the deliberation's id, why it ended, and the tokens and
        cost it took."""
        if tasks.as_task():  # the client polls a task: start, and return at once
            caller = runs.caller_of(ctx.request_context.request)
            return await runs.answered(backend, runs.start(backend, caller, **arguments))
        return await runs.answered(backend, ask(backend, ctx, **arguments))

    @server.tool(annotations=starts)
    @takes_start_arguments
    async def start_deliberation(ctx: Context, **arguments: Any) -> Outcome:
        """Start a deliberation and return its id at once, without waiting for the answer;
        get_deliberation reads its status, and its answer once it is done."""
        caller = runs.caller_of(ctx.request_context.request)
        return await runs.answered(backend, runs.start(backend, caller, **arguments))

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    async def get_deliberation(id: Id) -> Outcome:
        """A deliberation's status: where it is while it runs; its final answer and a
        summary line (why it ended, tokens, cost) once it is done."""
        return await runs.answered(backend, runs.get(backend, id))

    @server.tool(annotations=ToolAnnotations(destructive_hint=False, open_world_hint=False))
    async def stop_deliberation(id: Id, reason: Reason = None) -> Outcome:
        """Stop a running deliberation: the refinement ends and the chairman writes the
        final answer from what the council has; get_deliberation then reads it."""
        return await runs.answered(backend, runs.stop(backend, id, reason))

    return server
