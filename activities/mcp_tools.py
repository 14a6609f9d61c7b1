"""The worker's side of council.toml's MCP servers: what one offers (`list_tools`, read
once per run and kept in history as ToolSpecs) and one call of one of its tools
(`call_tool`), spoken with the official SDK's client.

    sessions = Sessions()                                      # the worker's, kept open
    specs = await list_tools("calc", entry, os.environ, sessions)  # [ToolSpec("calc__evaluate"...)]
    listing = await read_tools("calc", entry, os.environ)      # .specs, and .withheld: {tool: why}
    text = await call_tool(entry, os.environ, "evaluate", {"expression": "2*(3+4)"}, sessions)
    await sessions.aclose()                                    # the worker stops

- A session with a server (a stdio server's process, an HTTP server's MCP session) is kept
  open between calls and serves one call at a time (Sessions): a call that fails, times out
  or is cancelled closes its session, one idle for a minute is closed, and one whose server
  went away while idle is replaced once. Without `sessions`, a call has a session of its own.
- stdio (`command`): the server runs with `env` over a minimal environment (PATH, HOME
  and LANG of the environment given, and the few names the SDK adds: LOGNAME, SHELL, TERM,
  USER), never the worker's own, which holds the providers' keys; in `cwd` when given.
  Its stderr is read as it is written and only its last STDERR_TAIL_BYTES kept (a chatty
  server costs neither disk nor memory, and never blocks on a full pipe), its last line
  named when it fails. When the call ends, however it ends, its stdin is closed and its
  process group killed if it does not exit (activities.mcp_wire.stdio_transport, which
  reads its stdout).
- streamable HTTP (`url`): with `Authorization: Bearer <token>`, the token read from the
  variable `token_env` names, in the environment given (never shown: a message names the
  variable).
- What a server sends is bounded (activities.mcp_wire): one message (a result, a page of
  its tools) may weigh at most council.tools.message_bytes of the call's result cap (16
  times it, at least 1 MB; a page of tools MAX_MESSAGE_BYTES), counted as it arrives. A
  message past it is read no further: the call fails in one line naming the cap (final:
  the same call would send the same), and the session is closed (a stdio server killed).
- Offered: as the entry's rules say (council.tool_config.McpEntry.withholds): with `allow`,
  the tools it names; without, the tools that declare themselves read-only (readOnlyHint),
  the others only with `side_effects = true`. The others are withheld, each with why
  (`read_tools`: a Listing).
- Every failure is a ToolFailure (activities.tool_failure) in one line: the server's own
  error text for a tool that reports one (isError), else what went wrong (it could not
  start, it closed the connection, it answered with HTTP 401, it did not answer within
  `timeout` seconds), with no traceback and no secret; the server's failures (it could not
  start, it went away, it did not answer in time) are transient, tried again as the
  entry's max_attempts says, the tool's own errors final. The timeout bounds the whole
  call, connecting included; a stdio server that outlives it is then given the SDK's
  grace (its stdin closed, a few seconds, then its process group killed) before the
  failure is raised.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import IO, Any, TypeVar, cast
from urllib.parse import urlsplit

import anyio
import httpx2
from mcp import Client, MCPError, StdioServerParameters
from mcp.client import Transport
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._stream_protocols import ReadStream
from mcp.shared.message import SessionMessage
from mcp.types import (
    CONNECTION_CLOSED,
    AudioContent,
    BlobResourceContents,
    CallToolResult,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
    Tool,
)
from pydantic import ValidationError

from activities.confinement import Confinement
from activities.errors import one_line
from activities.mcp_wire import CappedBody, MessageCap, event_stream, stdio_transport
from activities.tool_failure import ToolFailure
from council.limits import size_text
from council.redaction import Redactor
from council.tool_config import McpEntry
from council.tools import (
    DEFAULT_RESULT_BYTES,
    MAX_MESSAGE_BYTES,
    MESSAGE_FACTOR,
    MIN_MESSAGE_BYTES,
    ToolSpec,
    message_bytes,
    offered_name,
)

__all__ = ["Listing", "Sessions", "ToolFailure", "call_tool", "list_tools", "read_tools"]

# The variables of the environment given a stdio server inherits (its entry's env on top).
INHERITED = ("PATH", "HOME", "LANG")
# A stdio command's first word that means the worker's own interpreter.
PYTHON_NAMES = ("python", "python3")
# The most pages of a server's tools/list read (a server whose cursor never ends stops here).
MAX_PAGES = 100
# A failure's line, and what it quotes of the server's stderr or stray output.
ERROR_CHARS = 300
QUOTE_CHARS = 120
# How much of a stdio server's stderr is kept for its last line, and the most read from its
# pipe at one turn of the event loop (a server that never stops writing does not hold it).
STDERR_TAIL_BYTES = 8_192
STDERR_READ_BYTES = 65_536
STDERR_READS_A_TURN = 16
# A value of the entry's env shorter than this is not kept out of messages (a flag, a unit;
# council.redaction counts a start of this many characters as the secret).
SECRET_MIN_CHARS = 8

T = TypeVar("T")


@dataclass
class Listing:
    """What a server's tools are to a council: those offered, as the models are shown them,
    and those withheld (each tool, by its name at the server: why)."""

    specs: list[ToolSpec]
    withheld: dict[str, str]


async def list_tools(
    name: str, entry: McpEntry, env: Mapping[str, str], sessions: Sessions | None = None
) -> list[ToolSpec]:
    """The tools the server of `entry` (council.toml's `[tools.<name>]`) offers a council,
    as the models are shown them (in a session of `sessions`, or one of its own);
    ToolFailure (one line) when it cannot be asked."""
    return (await read_tools(name, entry, env, sessions)).specs


async def read_tools(
    name: str, entry: McpEntry, env: Mapping[str, str], sessions: Sessions | None = None
) -> Listing:
    """The tools of the server of `entry`: those offered and those withheld, and why
    (list_tools)."""

    async def listing(client: Client) -> list[Tool]:
        tools: list[Tool] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            page = await client.list_tools(cursor=cursor)
            tools += page.tools
            cursor = page.next_cursor
            if not cursor:
                break
        return tools

    specs: list[ToolSpec] = []
    withheld: dict[str, str] = {}
    offered: set[str] = set()
    for tool in await _session(entry, env, listing, sessions, MAX_MESSAGE_BYTES):
        hint = tool.annotations.read_only_hint if tool.annotations is not None else None
        why = entry.withholds(tool.name, hint)
        read_only = bool(hint)
        if why is not None:
            withheld[tool.name] = why
            continue
        function = offered_name(name, tool.name)
        if function in offered:  # two names that read the same once cut or cleaned
            continue
        offered.add(function)
        specs.append(
            ToolSpec(
                name=function,
                source=name,
                tool=tool.name,
                description=inspect.cleandoc(tool.description or ""),
                parameters=tool.input_schema,
                read_only=read_only,
                timeout_seconds=entry.timeout,
                max_attempts=entry.max_attempts,
            )
        )
    return Listing(specs, withheld)


async def call_tool(
    entry: McpEntry,
    env: Mapping[str, str],
    tool: str,
    arguments: dict[str, Any],
    sessions: Sessions | None = None,
    result_bytes: int = DEFAULT_RESULT_BYTES,
) -> str:
    """The text of one call of `tool` at the server of `entry`; ToolFailure (one line) when
    it gave none: the tool's own error, or why the server could not answer. `result_bytes`:
    the call's result cap, which bounds what the server may send (message_bytes)."""

    async def calling(client: Client) -> CallToolResult:
        return await client.call_tool(tool, arguments)

    result = await _session(entry, env, calling, sessions, message_bytes(result_bytes))
    if result.is_error:
        said = _redactor(entry, env).redact(result_text(result))
        raise ToolFailure(one_line(said, ERROR_CHARS) or f"{tool} failed (it gave no reason)")
    return result_text(result)


def result_text(result: CallToolResult) -> str:
    """A result's content as text: its text parts, a line in brackets for any other kind,
    and its structured content as JSON when no part is text."""
    parts: list[str] = []
    texts = 0
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
            texts += 1
        elif isinstance(block, ImageContent | AudioContent):
            parts.append(f"[{block.mime_type}: {_decoded_size(block.data):,} bytes]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource link: {block.name} <{block.uri}>]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, BlobResourceContents):
                kind = resource.mime_type or "application/octet-stream"
                parts.append(f"[{kind}: {_decoded_size(resource.blob):,} bytes <{resource.uri}>]")
            else:
                parts.append(resource.text)
                texts += 1
    if not texts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)


def _decoded_size(data: str) -> int:
    """The bytes that base64 text stands for."""
    data = data.strip()
    return max(0, len(data) * 3 // 4 - (len(data) - len(data.rstrip("="))))


class StderrTail:
    """A stdio server's stderr: a pipe read as the server writes it (on the event loop),
    of which only the last STDERR_TAIL_BYTES are kept. `writer` is the end the process is
    given; the worker's copy is closed once the process has it (`started`)."""

    def __init__(self) -> None:
        read, write = os.pipe()
        os.set_blocking(read, False)
        self._read: int | None = read
        self.writer: IO[bytes] | None = os.fdopen(write, "wb", buffering=0)
        self.kept = bytearray()
        self._loop = asyncio.get_running_loop()
        self._loop.add_reader(read, self.drain)

    def started(self) -> None:
        """The process has its own copy of the writing end: the pipe ends when it does."""
        if self.writer is not None:
            self.writer.close()
            self.writer = None

    def drain(self) -> None:
        """Read what the pipe holds (at most STDERR_READS_A_TURN reads), keeping the tail."""
        for _ in range(STDERR_READS_A_TURN):
            if self._read is None:
                return
            try:
                chunk = os.read(self._read, STDERR_READ_BYTES)
            except BlockingIOError:
                return
            except OSError:
                chunk = b""
            if not chunk:  # the server and every copy of its stderr are gone
                self._loop.remove_reader(self._read)
                os.close(self._read)
                self._read = None
                return
            self.kept += chunk
            del self.kept[:-STDERR_TAIL_BYTES]

    def last_line(self) -> str | None:
        """The last non-blank line written so far."""
        self.drain()
        text = self.kept.decode("utf-8", "replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1] if lines else None

    def close(self) -> None:
        self.started()
        if self._read is not None:
            self._loop.remove_reader(self._read)
            os.close(self._read)
            self._read = None


@dataclass
class _Watch:
    """What a session saw besides its messages, for a failure's line: the HTTP status of a
    refused request, lines of a stdio server's stdout that are not MCP, its stderr; and the
    cap on each message it may receive, with whether one went past it."""

    status: int | None = None
    stray: str | None = None
    stderr: StderrTail | None = None
    cap: MessageCap = field(default_factory=lambda: MessageCap(MAX_MESSAGE_BYTES))

    async def response(self, response: httpx2.Response) -> None:
        # A message's POST only: a server may answer the optional GET stream with 405.
        if response.request.method == "POST" and response.status_code >= 400:
            self.status = response.status_code
        # Every body is read within the cap, the GET stream's included (an async client's
        # streams are async).
        assert isinstance(response.stream, httpx2.AsyncByteStream)
        response.stream = CappedBody(response.stream, self.cap, event_stream(response))

    def noticed(self, error: Exception) -> None:
        if self.stray is None:
            self.stray = _stray_text(error)

    def last_words(self) -> str | None:
        """The last line the stdio server wrote on its stderr, if any."""
        return self.stderr.last_line() if self.stderr is not None else None


def _stray_text(error: Exception) -> str:
    """What the server wrote that could not be read as a message (the SDK hands the parse
    error to the session in its place)."""
    if isinstance(error, ValidationError):
        for problem in error.errors():
            if isinstance(problem.get("input"), str):
                return str(problem["input"])
    return str(error)


class _Watched:
    """A transport's read stream, telling the watch of what was not a message."""

    def __init__(self, stream: ReadStream[SessionMessage | Exception], watch: _Watch) -> None:
        self.stream = stream
        self.watch = watch

    def _seen(self, item: SessionMessage | Exception) -> SessionMessage | Exception:
        if isinstance(item, Exception):
            self.watch.noticed(item)
        return item

    async def receive(self) -> SessionMessage | Exception:
        return self._seen(await self.stream.receive())

    async def aclose(self) -> None:
        await self.stream.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        return self._seen(await self.stream.__anext__())

    async def __aenter__(self) -> _Watched:
        await self.stream.__aenter__()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        return await self.stream.__aexit__(exc_type, exc_val, exc_tb)


@contextlib.asynccontextmanager
async def _watched(transport: Transport, watch: _Watch) -> AsyncIterator[tuple[_Watched, Any]]:
    async with transport as (read, write):
        if watch.stderr is not None:
            watch.stderr.started()  # the process is running, with its own copy
        yield _Watched(read, watch), write


# How long a session with a server is kept open, unused, for the next call.
IDLE_SECONDS = 60.0


@dataclass(eq=False)
class _Kept:
    """One open session with a server: its client, and the task that holds it open (the
    SDK's sessions are entered and left in one task)."""

    key: str
    watch: _Watch
    ready: asyncio.Future[Client]
    keep: bool  # kept open for the next call (the entry's keep_open)
    closing: asyncio.Event = field(default_factory=asyncio.Event)
    keeper: asyncio.Task[None] = field(init=False)  # set as soon as it is made
    calls: int = 0
    expiry: asyncio.TimerHandle | None = None


class Sessions:
    """The worker's sessions with its MCP servers, kept open between calls: a stdio server
    is started once, not once a call (its imports alone take a second or more). A call
    takes an idle session of its server, or opens one; a session serves one call at a
    time; one left idle IDLE_SECONDS is closed. A call that fails, times out or is
    cancelled closes its session (a stop's cancellation reaches the server: the SDK closes
    its stdin, then kills its process group), and a session found broken at the start of
    its next call (its server went away while idle) is replaced once, within the call's
    timeout."""

    def __init__(
        self, idle_seconds: float = IDLE_SECONDS, confinement: Confinement | None = None
    ) -> None:
        """`confinement`: how stdio servers start (default: confined, hiding nothing more)."""
        self.idle_seconds = idle_seconds
        self.confinement = confinement or Confinement()
        self._idle: dict[str, list[_Kept]] = {}
        self._open: set[_Kept] = set()
        self._closing: set[asyncio.Task[None]] = set()

    async def use(
        self,
        entry: McpEntry,
        env: Mapping[str, str],
        work: Callable[[Client], Awaitable[T]],
        cap: int = MAX_MESSAGE_BYTES,
    ) -> T:
        """`work` done in a session with the server, within the entry's timeout, each
        message the server sends within `cap` bytes."""
        token = _token(entry, env)
        redactor = _redactor(entry, env)
        if entry.command is not None:  # a stdio server: the few variables it inherits
            inherited = {name: env[name] for name in INHERITED if name in env}
            entry = entry.model_copy(update={"env": inherited | entry.env})
        key = json.dumps([entry.model_dump(mode="json"), token])
        held: list[_Kept] = []  # the session in use (the last)
        value: Any = None
        done = False
        try:
            with anyio.move_on_after(entry.timeout):
                value = await self._work(key, entry, token, work, held, cap)
                done = True
        except Exception as error:
            # The server could not be reached, or went away: tried again; or it sent a
            # message past the cap: final.
            watch = held[-1].watch if held else _Watch()
            line = _failure(entry, error, watch)
            if held:
                await self._close(held[-1])
            raise ToolFailure(
                one_line(redactor.redact(line), ERROR_CHARS), transient=watch.cap.exceeded is None
            ) from None
        except BaseException:
            if held:  # cancelled: the server goes with the call
                await asyncio.shield(self._close(held[-1]))
            raise
        kept = held[-1]
        if not done:
            await self._close(kept)
            why = f"the MCP server did not answer within {entry.timeout:g} s"
            raise ToolFailure(
                one_line(redactor.redact(why + _stray(kept.watch)), ERROR_CHARS), transient=True
            )
        if kept.watch.cap.exceeded is not None:  # on another stream of its session (HTTP)
            await self._close(kept)
            raise ToolFailure(_too_large(kept.watch.cap.exceeded))
        kept.calls += 1
        self._put_back(kept)
        return cast(T, value)

    async def _work(
        self,
        key: str,
        entry: McpEntry,
        token: str | None,
        work: Callable[[Client], Awaitable[T]],
        held: list[_Kept],
        cap: int,
    ) -> T:
        kept = self._take(key, entry, token, cap)
        held.append(kept)
        try:
            # (shielded: a cancelled call must not cancel the session's own future)
            return await work(await asyncio.shield(kept.ready))
        except Exception:
            if kept.calls == 0 or kept.watch.cap.exceeded is not None:
                raise
        # Its server went away while the session was idle: a new one, once.
        await self._close(kept)
        kept = self._take(key, entry, token, cap, fresh=True)
        held.append(kept)
        return await work(await asyncio.shield(kept.ready))

    async def aclose(self) -> None:
        """Close every session (the worker stops)."""
        await asyncio.gather(
            *(self._close(kept) for kept in list(self._open)), *list(self._closing)
        )

    def _take(
        self, key: str, entry: McpEntry, token: str | None, cap: int, fresh: bool = False
    ) -> _Kept:
        """An idle session of the server (not with `fresh`), else one opened now; its
        messages within `cap` from now on."""
        idle = self._idle.get(key, [])
        while idle and not fresh:
            kept = idle.pop()
            if kept.expiry is not None:
                kept.expiry.cancel()
            if not kept.keeper.done():
                kept.watch.cap.limit = cap
                return kept
            self._later(kept)  # its server went away while it was idle
        watch = _Watch(cap=MessageCap(cap))
        if entry.command is not None:
            watch.stderr = StderrTail()  # closed by _close
        kept = _Kept(key, watch, asyncio.get_running_loop().create_future(), entry.keep_open)
        self._open.add(kept)
        kept.keeper = asyncio.create_task(self._keep(kept, entry, token))
        return kept

    async def _keep(self, kept: _Kept, entry: McpEntry, token: str | None) -> None:
        """Hold a session open until it is closed (or its server goes away)."""
        try:
            async with contextlib.AsyncExitStack() as stack:
                transport = await stack.enter_async_context(
                    _transport(entry, token, kept.watch, self.confinement)
                )
                client = await stack.enter_async_context(Client(transport, cache=None))
                kept.ready.set_result(client)
                await kept.closing.wait()
        except Exception as error:
            if not kept.ready.done():
                kept.ready.set_exception(error)
        finally:
            if not kept.ready.done():
                kept.ready.set_exception(RuntimeError("the MCP session was closed"))
            if not kept.ready.cancelled():
                kept.ready.exception()  # (retrieved: nobody may be waiting for it)

    def _put_back(self, kept: _Kept) -> None:
        if not kept.keep or kept.keeper.done():
            self._later(kept)
            return
        self._idle.setdefault(kept.key, []).append(kept)
        kept.expiry = asyncio.get_running_loop().call_later(self.idle_seconds, self._later, kept)

    def _later(self, kept: _Kept) -> None:
        """Close the session in the background."""
        closing = asyncio.get_running_loop().create_task(self._close(kept))
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    async def _close(self, kept: _Kept) -> None:
        """Close the session and wait for its server to be gone (the SDK's grace)."""
        idle = self._idle.get(kept.key, [])
        if kept in idle:
            idle.remove(kept)
        if kept.expiry is not None:
            kept.expiry.cancel()
        kept.closing.set()
        with contextlib.suppress(BaseException):
            await kept.keeper
        self._open.discard(kept)
        if kept.watch.stderr is not None:
            kept.watch.stderr.close()


async def _session(
    entry: McpEntry,
    env: Mapping[str, str],
    work: Callable[[Client], Awaitable[T]],
    sessions: Sessions | None,
    cap: int,
) -> T:
    """`work` in a session of `sessions`, or in one of its own (closed after), each message
    within `cap` bytes."""
    if sessions is not None:
        return await sessions.use(entry, env, work, cap)
    once = Sessions()
    try:
        return await once.use(entry.model_copy(update={"keep_open": False}), env, work, cap)
    finally:
        await once.aclose()


@contextlib.asynccontextmanager
async def _transport(
    entry: McpEntry, token: str | None, watch: _Watch, confinement: Confinement
) -> AsyncIterator[Transport]:
    if entry.command is not None:
        # "python" is the worker's own interpreter (which has the mcp package).
        program = sys.executable if entry.command[0] in PYTHON_NAMES else entry.command[0]
        server = confinement.wrap(
            StdioServerParameters(
                command=program,
                args=entry.command[1:],
                env=entry.env,
                cwd=entry.cwd,
            ),
            entry.trusted,
        )
        assert watch.stderr is not None and watch.stderr.writer is not None
        errlog = watch.stderr.writer
        yield cast(Transport, _watched(stdio_transport(server, errlog, watch.cap), watch))
        return
    assert entry.url is not None
    headers = {"Authorization": f"Bearer {token}"} if token is not None else None
    hooks = {"response": [watch.response]}
    async with httpx2.AsyncClient(
        headers=headers, timeout=httpx2.Timeout(entry.timeout), event_hooks=hooks
    ) as http:
        # The SDK's own cap on an event (1 MiB by default) above every cap of ours.
        transport = streamable_http_client(
            entry.url, http_client=http, max_sse_event_size=MAX_MESSAGE_BYTES
        )
        yield cast(Transport, _watched(transport, watch))


def _token(entry: McpEntry, env: Mapping[str, str]) -> str | None:
    if entry.token_env is None:
        return None
    token = env.get(entry.token_env, "")
    if not token.strip():
        raise ToolFailure(
            f"the MCP server's token is missing: {entry.token_env} (named by token_env) "
            "is not set or empty"
        )
    return token.strip()


def _redactor(entry: McpEntry, env: Mapping[str, str]) -> Redactor:
    """Keeps the token, and the values of the server's env, out of messages."""
    secrets = [v for v in entry.env.values() if len(v) >= SECRET_MIN_CHARS]
    if entry.token_env is not None:
        secrets.append(env.get(entry.token_env, "").strip())
    return Redactor(secrets)


def _leaf(error: BaseException) -> BaseException:
    """The first error an exception group holds that is not a cancellation."""
    if isinstance(error, BaseExceptionGroup):
        leaves = [_leaf(inner) for inner in error.exceptions]
        cancelled = anyio.get_cancelled_exc_class()
        chosen = [leaf for leaf in leaves if not isinstance(leaf, cancelled)]
        return (chosen or leaves)[0]
    return error


def _failure(entry: McpEntry, error: Exception, watch: _Watch) -> str:
    """One line: why the session with the server gave nothing."""
    if watch.cap.exceeded is not None:
        return _too_large(watch.cap.exceeded)
    leaf = _leaf(error)
    if entry.command is not None and isinstance(leaf, OSError):
        what = leaf.filename if leaf.filename is not None else entry.command[0]
        return f"the MCP server could not start: {what}: {leaf.strerror or leaf}"
    if watch.status is not None:
        refused = f"the MCP server refused the request (HTTP {watch.status})"
        if watch.status in (401, 403) and entry.token_env is not None:
            refused += f": check the token in {entry.token_env}"
        return refused
    if isinstance(leaf, MCPError) and leaf.code == CONNECTION_CLOSED:
        closed = "the MCP server closed the connection"
        said = watch.last_words()
        return closed + (f" ({_quoted(said)})" if said else "") + _stray(watch)
    if isinstance(leaf, MCPError):
        return f"the MCP server answered with an error: {leaf.message}" + _stray(watch)
    if isinstance(leaf, httpx2.HTTPError):
        where = urlsplit(entry.url or "").netloc.rpartition("@")[2]
        return f"cannot reach the MCP server at {where}: {leaf or type(leaf).__name__}"
    if isinstance(leaf, ValidationError):
        return f"the MCP server's answer is not valid MCP ({leaf.error_count()} problems)"
    return f"the MCP server failed: {type(leaf).__name__}: {leaf}" + _stray(watch)


def _too_large(cap: int) -> str:
    return (
        f"the MCP server sent a message larger than {size_text(cap)}, the most one may weigh "
        f"({MESSAGE_FACTOR} times the call's result cap, at least {size_text(MIN_MESSAGE_BYTES)}):"
        " not read further, and its session was closed"
    )


def _stray(watch: _Watch) -> str:
    if watch.stray is None:
        return ""
    return f"; it wrote what is not an MCP message on its stdout: {_quoted(watch.stray)}"


def _quoted(text: str) -> str:
    return repr(one_line(text, QUOTE_CHARS))
