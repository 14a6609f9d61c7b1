"""A tool server that answers with one huge single-line message (tests/hostile_mcp.py, a
process of its own) over stdio and over streamable HTTP on 127.0.0.1: the call ends with
the cap's error as the message streams in, having read about the cap and no more (the
worker's memory and CPU time measured by the worker itself), the server's session is
closed (a stdio server's process is gone) and the next call, on a new session, is
answered. Within the cap, a message is read whole, and the cap follows the call's result
cap (council.tools.message_bytes).

Before: the SDK's stdio reader joined and split its whole buffer at every read (on 2
busy cores, python -m bench.bombs: 30 MB took 9 s of CPU and 224 MiB, 60 MB 32 s and 367
MiB), and a JSON reply over HTTP was read whole whatever its size (30 MB: 227 MiB).
"""

from __future__ import annotations

import asyncio
import resource
import sys
import tracemalloc
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from temporalio.testing import ActivityEnvironment

from activities.mcp_tools import Sessions, ToolFailure, call_tool
from activities.tools import ToolBox
from council.tool_config import McpEntry, Tools
from council.tools import (
    DEFAULT_RESULT_BYTES,
    MAX_RESULT_BYTES,
    MIN_MESSAGE_BYTES,
    ToolCall,
    ToolRun,
    ToolSpec,
    message_bytes,
)

T = TypeVar("T")
HOSTILE = Path(__file__).resolve().parent / "hostile_mcp.py"
# A server's start on a busy machine: importing the SDK alone can take seconds.
STARTS_WITHIN = 120.0
FLOOD = 30_000_000
CAP_LINE = (
    "the MCP server sent a message larger than 1.0 MB, the most one may weigh (16 times the "
    "call's result cap, at least 1.0 MB): not read further, and its session was closed"
)
# What the worker may spend on a 30 MB message it stops reading at 1 MB: generous margins
# (reading a megabyte takes milliseconds), far below the message's own size and time.
MOST_MEMORY = 16_000_000
MOST_CPU_SECONDS = 10.0


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def costs(call: Awaitable[T]) -> tuple[T | BaseException, int, float]:
    """What the call gave (or raised), the most memory the worker's Python held above where
    it started meanwhile, and the worker's CPU time it took."""
    tracemalloc.start()
    cpu = cpu_seconds()
    try:
        outcome: T | BaseException = await call
    except Exception as error:
        outcome = error
    finally:
        took = cpu_seconds() - cpu
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return outcome, peak, took


def assert_cut_off(outcome: object, peak: int, took: float) -> None:
    assert isinstance(outcome, ToolFailure), outcome
    assert str(outcome) == CAP_LINE
    assert not outcome.transient  # the same call would send the same: not tried again
    assert peak < MOST_MEMORY, f"the worker held {peak:,} bytes for a message cut at 1 MB"
    assert took < MOST_CPU_SECONDS, f"the worker spent {took:.1f} s of CPU on it"


def live(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pid_in(path: Path) -> int:
    return int(path.read_text())


@pytest.fixture
def stdio_server(tmp_path: Path) -> tuple[McpEntry, Path]:
    pid_file = tmp_path / "server.pid"
    entry = McpEntry(
        command=[sys.executable, str(HOSTILE), "stdio"],
        env={"PID_FILE": str(pid_file)},
        timeout=STARTS_WITHIN,
        # Unconfined: it writes its process id beside the test, the id this process sees (a
        # confined server has a PID namespace, and a file system, of its own).
        trusted=True,
    )
    return entry, pid_file


async def test_a_huge_single_line_result_over_stdio_ends_its_call_at_the_cap(
    stdio_server: tuple[McpEntry, Path],
) -> None:
    entry, pid_file = stdio_server
    sessions = Sessions(idle_seconds=3600)
    try:
        assert await call_tool(entry, {}, "small", {}, sessions) == "small"
        server = pid_in(pid_file)
        flood = call_tool(entry, {}, "flood", {"size": FLOOD}, sessions)
        assert_cut_off(*await costs(flood))
        assert not live(server), "the server outlived the session the cap closed"
        # The next call has a new session (and server), and is answered.
        assert await call_tool(entry, {}, "small", {}, sessions) == "small"
        assert pid_in(pid_file) != server
    finally:
        await sessions.aclose()


@pytest.fixture(params=["json", "sse"])
async def http_server(request: pytest.FixtureRequest) -> AsyncIterator[McpEntry]:
    """The hostile server over streamable HTTP on 127.0.0.1, answering in JSON or in an
    event stream."""
    server = await asyncio.create_subprocess_exec(
        sys.executable, str(HOSTILE), "http", request.param, stdout=asyncio.subprocess.PIPE
    )
    try:
        assert server.stdout is not None
        port = int(await asyncio.wait_for(server.stdout.readline(), STARTS_WITHIN))
        yield McpEntry(url=f"http://127.0.0.1:{port}/mcp", timeout=STARTS_WITHIN)
    finally:
        server.kill()
        await server.wait()


async def test_a_huge_result_over_streamable_http_ends_its_call_at_the_cap(
    http_server: McpEntry,
) -> None:
    sessions = Sessions(idle_seconds=3600)
    try:
        assert await call_tool(http_server, {}, "small", {}, sessions) == "small"
        flood = call_tool(http_server, {}, "flood", {"size": FLOOD}, sessions)
        assert_cut_off(*await costs(flood))
        assert await call_tool(http_server, {}, "small", {}, sessions) == "small"
    finally:
        await sessions.aclose()


def test_the_cap_follows_the_calls_result_cap() -> None:
    assert message_bytes(DEFAULT_RESULT_BYTES) == MIN_MESSAGE_BYTES == 1_000_000
    assert message_bytes(100_000) == 1_600_000
    assert message_bytes(MAX_RESULT_BYTES) == 3_200_000


async def test_a_message_within_the_cap_is_read_whole(
    stdio_server: tuple[McpEntry, Path],
) -> None:
    """2 MB: past the default cap, within a result cap of 200 KB's (3.2 MB)."""
    entry, _ = stdio_server
    sessions = Sessions(idle_seconds=3600)

    def flood(result_bytes: int) -> Awaitable[str]:
        arguments = {"size": 2_000_000}
        return call_tool(entry, {}, "flood", arguments, sessions, result_bytes)

    try:
        assert await flood(MAX_RESULT_BYTES) == "x" * 2_000_000
        with pytest.raises(ToolFailure) as refused:
            await flood(DEFAULT_RESULT_BYTES)
        assert str(refused.value) == CAP_LINE
        assert await flood(MAX_RESULT_BYTES) == "x" * 2_000_000  # a new session
    finally:
        await sessions.aclose()


async def test_the_tool_activity_returns_the_cap_as_the_calls_error(
    stdio_server: tuple[McpEntry, Path],
) -> None:
    """Not tried again: the first attempt of two returns the error (a transient failure
    would have failed the attempt for Temporal to try again)."""
    entry, _ = stdio_server
    toolbox = ToolBox(Tools(entries={"hostile": entry}), env={})
    spec = ToolSpec(name="hostile__flood", source="hostile", tool="flood", max_attempts=2)
    call = ToolCall(id="call-1", name=spec.name, arguments=f'{{"size": {FLOOD}}}')
    run: Callable[[ToolRun], Awaitable[object]] = toolbox.call_tool
    try:
        result = await ActivityEnvironment().run(run, ToolRun(spec=spec, call=call))
    finally:
        await toolbox.aclose()
    assert getattr(result, "error", None) == CAP_LINE
