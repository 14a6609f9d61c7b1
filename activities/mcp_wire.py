"""What an MCP server may send the worker, bounded: each message (a tool's result, a page
of its tools) may weigh at most a cap (`MessageCap`, council.tools.message_bytes: the
call's result cap times MESSAGE_FACTOR, at least MIN_MESSAGE_BYTES), counted as the bytes
arrive, so that a message past it costs the worker no more than the cap in time and
memory: reading stops there, the message is never parsed, and the server is told so by
the end of its session (activities.mcp_tools fails the call and closes the session).

    cap = MessageCap(message_bytes(16_000))
    async with stdio_transport(server, errlog, cap) as (read, write): ...   # over stdio
    response.stream = CappedBody(response.stream, cap, events)                # over HTTP

- stdio (`stdio_transport`): the server's process is started as the SDK's stdio_client
  starts it (from a StdioServerParameters: command, args, env over the SDK's default
  environment, cwd; a session and process group of its own) and stopped as it stops it
  (its stdin closed, a grace period, then its process group terminated, then killed),
  but its stdout is read here: one message a line, each line found in the bytes as they
  come (the SDK's reader joined and split its whole buffer again at every read: time
  quadratic in a long line's length), as UTF-8. A line past the cap ends the session at
  once: the session sees its end (the call fails) and the server's process group is
  killed. (POSIX: process groups and their signals.)
- streamable HTTP (`CappedBody`): a response's body counted as it is read; a JSON reply is
  one message, an event stream's message the bytes since its last blank line. Past the
  cap the body raises MessageTooLarge and the SDK fails the request it answered.
"""

from __future__ import annotations

import contextlib
import datetime
import os
import signal
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import IO

import anyio
import httpx2
from anyio.abc import ByteReceiveStream, Process
from mcp import StdioServerParameters
from mcp.client._transport import TransportStreams
from mcp.client.stdio import get_default_environment
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage
from mcp.types import jsonrpc_message_adapter

# The most read from a server's stdout at once.
READ_BYTES = 65_536
# A server's grace to exit once its stdin is closed, then from SIGTERM to SIGKILL, then for
# the kill to be seen; the time the writer has to send what it has already taken.
EXIT_GRACE_SECONDS = 2.0
KILL_GRACE_SECONDS = 2.0
REAP_SECONDS = 2.0
FLUSH_SECONDS = 0.5
# Where an event of an event stream ends: a blank line (each line ending in CR, LF or CRLF).
_EVENT_ENDS = (b"\n\n", b"\r\r", b"\n\r\n")
# How a line is handed to the session.
_Send = Callable[[SessionMessage | Exception], Awaitable[None]]


class MessageCap:
    """The most one message of a server may weigh, in bytes (set for each call of a kept
    session), and the cap a message went past (None while none did)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.exceeded: int | None = None

    def over(self, size: int) -> bool:
        """Whether a message of `size` bytes (so far) is past the cap (noted once)."""
        if size <= self.limit:
            return False
        if self.exceeded is None:
            self.exceeded = self.limit
        return True


class MessageTooLarge(httpx2.StreamError):
    """A response of an MCP server over HTTP held a message past its cap."""


class CappedBody(httpx2.AsyncByteStream):
    """A response's body, read within `cap`: the whole body (a JSON reply), or each event
    (`events`: an event stream)."""

    def __init__(self, stream: httpx2.AsyncByteStream, cap: MessageCap, events: bool) -> None:
        self._stream = stream
        self._cap = cap
        self._events = events

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        tail = b""  # the last bytes seen: a blank line may span two chunks
        async for chunk in self._stream:
            if self._events:
                seen = tail + chunk
                ends = [seen.rfind(end) + len(end) for end in _EVENT_ENDS if end in seen]
                size = len(seen) - max(ends) if ends else size + len(chunk)
                tail = seen[-3:]
            else:
                size += len(chunk)
            if self._cap.over(size):
                raise MessageTooLarge(f"a message of the MCP server is past {self._cap.limit}")
            yield chunk

    async def aclose(self) -> None:
        await self._stream.aclose()

    @property
    def elapsed(self) -> datetime.timedelta | None:
        """The response's time (httpx2 reads it from its stream)."""
        elapsed: datetime.timedelta | None = getattr(self._stream, "elapsed", None)
        return elapsed


def event_stream(response: httpx2.Response) -> bool:
    kind: str = response.headers.get("content-type", "")
    return kind.split(";", 1)[0].strip().lower() == "text/event-stream"


@contextlib.asynccontextmanager
async def stdio_transport(
    server: StdioServerParameters, errlog: IO[bytes], cap: MessageCap
) -> AsyncIterator[TransportStreams]:
    """A session's streams with the stdio server `server` (its stderr to `errlog`), every
    message it sends within `cap`."""
    process = await anyio.open_process(
        [server.command, *server.args],
        env=get_default_environment() | (server.env or {}),
        stderr=errlog,
        cwd=server.cwd,
        start_new_session=True,
    )
    # No awaits until the task group is entered: a cancellation in between would leave the
    # server running.
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](0)
    written = anyio.Event()
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    async def reader() -> None:
        async with to_session:
            ended = await _read_lines(stdout, cap, to_session.send)
            if ended == "cap":
                _kill_group(process)  # its session ends now: nothing more is read
                return
        if ended == "session":  # the session went first: the rest is read and dropped
            await _drain(stdout)

    async def writer() -> None:
        try:
            async with from_session:
                async for message in from_session:
                    line = message.message.model_dump_json(by_alias=True, exclude_unset=True)
                    await stdin.send(line.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            # The server may be alive still: the session sees the end, not a hang.
            await to_session.aclose()
        finally:
            written.set()

    async with anyio.create_task_group() as tasks:
        tasks.start_soon(reader)
        tasks.start_soon(writer)
        try:
            yield read_stream, write_stream
        finally:
            # However the session ends (cancelled included), the server is stopped; every
            # wait in it is bounded.
            with anyio.CancelScope(shield=True):
                read_stream.close()
                write_stream.close()
                with anyio.move_on_after(FLUSH_SECONDS):
                    await written.wait()
                await _stop(process)
                for stream in (read_stream, write_stream, to_session, from_session):
                    await stream.aclose()
            tasks.cancel_scope.cancel()


async def _read_lines(stdout: ByteReceiveStream, cap: MessageCap, send: _Send) -> str:
    """Hand each line of the server's stdout to the session, as a message (or the error of
    reading it as one); why it stopped: "end" (the server's stdout ended), "session" (the
    session is gone) or "cap" (a line went past the cap)."""
    line = bytearray()
    while True:
        try:
            chunk = await stdout.receive(READ_BYTES)
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            return "end"
        except OSError:
            return "end"
        start = 0
        view = memoryview(chunk)
        while (end := chunk.find(b"\n", start)) >= 0:
            line += view[start:end]
            start = end + 1
            if cap.over(len(line)):
                return "cap"
            text = line.decode("utf-8", "replace").strip()
            line.clear()
            if not text:
                continue
            try:
                await send(_message(text))
            except (anyio.ClosedResourceError, anyio.BrokenResourceError):
                return "session"
        line += view[start:]
        if cap.over(len(line)):
            return "cap"


def _message(text: str) -> SessionMessage | Exception:
    """A line as a message, or why it is not one (handed to the session in its place)."""
    try:
        return SessionMessage(jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError as error:
        return error


async def _drain(stdout: ByteReceiveStream) -> None:
    """Read and drop the rest of the server's stdout: a server that writes as it exits must
    not block on a full pipe. Ends when the stream does, or is closed."""
    with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
        while True:
            await stdout.receive(READ_BYTES)


def _kill_group(process: Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _stop(process: Process) -> None:
    """The MCP specification's shutdown: stdin closed, a grace period, then the process
    group terminated (SIGTERM, then SIGKILL); then the process's pipes closed. Every wait
    is bounded: a process that even the kill does not end is left, its pipes closed."""
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.ClosedResourceError, anyio.BrokenResourceError):
        await process.stdin.aclose()
    if not await _exited(process, EXIT_GRACE_SECONDS):
        await terminate_posix_process_tree(process, KILL_GRACE_SECONDS)
        await _exited(process, REAP_SECONDS)
    if process.returncode is not None:
        await process.aclose()  # (its pipes closed; it has exited, so nothing to wait for)
    else:
        with contextlib.suppress(OSError, anyio.ClosedResourceError):
            await process.stdout.aclose()


async def _exited(process: Process, within: float) -> bool:
    """Whether the process has exited within `within` seconds (anyio's wait is for the
    process alone, not for its pipes, which a child of it may hold)."""
    with anyio.move_on_after(within):
        await process.wait()
    return process.returncode is not None
