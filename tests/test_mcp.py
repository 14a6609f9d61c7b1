"""The MCP server as an MCP client sees it: `python starter.py mcp` spoken to over stdio
by the official SDK's client, and `--http` over the streamable HTTP transport, with the
page's rules (the token, the Host allowlist) in front."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, TextIO

import anyio
import httpx
import httpx2
import pytest
from mcp import Client, MCPError, StdioServerParameters, stdio_client
from mcp.client import ClientExtension
from mcp.client.streamable_http import streamable_http_client
from mcp.types import (
    INVALID_PARAMS,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    REQUEST_TIMEOUT,
    CallToolResult,
    TextContent,
)
from temporalio.testing import WorkflowEnvironment

from council import limits
from council.agreement import verdict, votes_note
from council.calls import Stage
from council.models import DeliberationRecord
from council.report import answers_line
from harness.processes import ROOT, Process, free_port, port_open, spawn
from mcp_server.http_transport import MAX_BODY_BYTES as MCP_BODY
from runs import finding
from tests import mcp_tasks_client as tasks
from tests.attachment_files import pdf, png
from tests.temporal_fixtures import (
    TEST_API_KEY,
    Council,
    stage_started,
    starter,
    temporal_address,
    until,
)

TOOLS = {"ask_council", "start_deliberation", "get_deliberation", "stop_deliberation"}
TOKEN = "mcp-test-token-9c41e"


def stdio_server(
    env: dict[str, str],
    log: TextIO,
    extensions: list[ClientExtension] | None = None,
    mode: str = "auto",
) -> Client:
    """An SDK client that runs `python starter.py mcp` and speaks to it over stdio, giving
    up on a request after 60 s (what common clients allow a tool call) unless a call says
    otherwise; `mode="legacy"` speaks the 2025-11-25 revision (the initialize handshake),
    as clients built on the TypeScript SDK 1.x do."""
    command = StdioServerParameters(
        command=sys.executable, args=["starter.py", "mcp"], env=env, cwd=ROOT
    )
    return Client(
        stdio_client(command, errlog=log),
        read_timeout_seconds=60,
        extensions=extensions,
        mode=mode,
    )


def texts(result: CallToolResult) -> list[str]:
    return [block.text for block in result.content if isinstance(block, TextContent)]


def error_text(result: CallToolResult) -> str:
    assert result.is_error, result
    [text] = texts(result)
    return text


async def record_of(council: Council, wid: str) -> DeliberationRecord:
    """The run's record, once it ends (a run that never ends fails the test in minutes)."""
    return await asyncio.wait_for(finding.handle(council.client, wid).result(), 180)


def summary_of(record: DeliberationRecord) -> str:
    """The line every tool ends a finished run's result with."""
    return (
        f"{record.id} · ended: {record.iteration.terminated_reason} · "
        f"{record.usage.total_tokens:,} tokens in {record.usage.calls} calls · "
        f"{record.usage.cost_line()}"
        + (f" · {answers}" if (answers := answers_of(record)) else "")
        + (f" · {verdict(record.agreement)}" if record.agreement is not None else "")
        + (f" · {votes}" if record.agreement and (votes := votes_note(record.agreement)) else "")
        + (f" · depth {record.depth}: {record.gate.describe()}" if record.gate else "")
        + (f" · {record.saved.describe()}" if record.gate and record.saved else "")
        + (f" · {n} contradiction(s) in the report" if (n := contradictions(record)) else "")
    )


def answers_of(record: DeliberationRecord) -> str | None:
    """How far the members' first answers agree by value (council.report.answers_line)."""
    report = record.disagreement_report
    return answers_line(report) if report else None


def contradictions(record: DeliberationRecord) -> int:
    report = record.disagreement_report
    return len(report.contradictions) if report else 0


def answered(record: DeliberationRecord) -> list[str]:
    """What a tool's result says of a finished run, before the disagreement report's text:
    the answer, then the summary line."""
    assert record.stage3 is not None
    return [record.stage3.response, summary_of(record)]


@pytest.fixture
def server_log(tmp_path: Path) -> Iterator[TextIO]:
    """Where the stdio server's stderr goes."""
    with (tmp_path / "mcp-stderr.log").open("w+") as log:
        yield log


async def test_the_tools_and_their_arguments(cli_env: dict[str, str], server_log: TextIO) -> None:
    async with stdio_server(cli_env, server_log) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        capabilities = client.server_capabilities
    assert set(tools) == TOOLS
    assert capabilities.extensions == {tasks.EXTENSION: {}}  # ask_council can be a task
    for name in ("ask_council", "start_deliberation"):
        schema = tools[name].input_schema
        assert schema["required"] == ["question"]
        assert set(schema["properties"]) == {
            "question",
            "council",
            "models",
            "chairman",
            "max_rounds",
            "attachments",
            "tools",
            "depth",
        }
        assert all(field["description"] for field in schema["properties"].values())
    for tool in tools.values():  # the docstring's words, not the source's indentation
        assert tool.description and tool.description == tool.description.strip()
        assert not any(line.startswith(" ") for line in tool.description.splitlines())
    assert tools["get_deliberation"].input_schema["required"] == ["id"]
    assert set(tools["stop_deliberation"].input_schema["properties"]) == {"id", "reason"}
    output = tools["ask_council"].output_schema
    assert output is not None
    assert {"id", "answer", "terminated_reason", "total_tokens", "cost_usd"} <= set(
        output["properties"]
    )
    annotations = tools["get_deliberation"].annotations
    assert annotations is not None and annotations.read_only_hint
    server_log.seek(0)  # stdout carried the protocol; the note went to stderr
    assert server_log.readline().startswith("council MCP server on stdio (Temporal ")


async def test_ask_council_reports_progress_and_returns_the_answer(
    council: Council, cli_env: dict[str, str], server_log: TextIO
) -> None:
    updates: list[tuple[float, str | None]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        updates.append((value, message))

    async with stdio_server(cli_env, server_log) as client:
        result = await client.call_tool(
            "ask_council",
            {"question": "Should a library pin its dependencies?", "max_rounds": 1},
            progress_callback=progress,
        )
    assert not result.is_error, texts(result)
    data = result.structured_content
    assert isinstance(data, dict)
    record = await record_of(council, data["id"])
    assert record.stage3 is not None
    summary = summary_of(record)
    # The answer, then one short line, then the disagreement report's lines; the structured
    # content carries the same fields.
    assert texts(result)[:2] == [record.stage3.response, summary]
    report = record.disagreement_report
    assert report is not None and data["report"] == report.model_dump(mode="json")
    for point in [p.text for p in report.consensus] + [u.point for u in report.unique]:
        assert point in texts(result)[2]
    assert data["summary"] == summary and data["status"] == "completed"
    assert data["answer"] == record.stage3.response
    assert data["terminated_reason"] == record.iteration.terminated_reason
    assert data["total_tokens"] == record.usage.total_tokens > 0
    assert data["calls"] == record.usage.calls
    assert data["agreement"] == record.agreement.model_dump(mode="json")

    messages = [message or "" for _, message in updates]
    assert [value for value, _ in updates] == list(range(1, len(updates) + 1))
    assert messages[0] == (
        f"deliberation {record.id} started: should this call time out, the run goes on and "
        "get_deliberation reads it by its id"
    )
    assert "▶ stage 1 answer: 4 call(s)" in messages
    assert any(m.startswith("■ stage 2 review") for m in messages)
    assert any(m.startswith("↻ ") for m in messages) and any(m.startswith("✓ ") for m in messages)
    assert any(m.startswith("■ stage 3 synthesis") for m in messages)
    assert messages[-1].startswith("✔ finished")
    assert not any(" done (" in m for m in messages)  # each model's reply is left out


def started_line(wid: str) -> str:
    return (
        f"deliberation {wid} started: should this call time out, the run goes on and "
        "get_deliberation reads it by its id"
    )


async def call_waiting_while_progress_comes(
    client: Client, idle: float, name: str, arguments: dict[str, Any], messages: list[str]
) -> CallToolResult:
    """call_tool as a client with the TypeScript SDK's resetTimeoutOnProgress makes it (the
    Inspector does): it gives up, and cancels the call, once `idle` seconds pass without a
    progress notification. The Python SDK's client has no such option: its timeout is a
    deadline, progress or not."""
    with anyio.CancelScope() as waiting:
        waiting.deadline = anyio.current_time() + idle

        async def progress(value: float, total: float | None, message: str | None) -> None:
            messages.append(message or "")
            waiting.deadline = anyio.current_time() + idle

        result = await client.call_tool(
            name, arguments, read_timeout_seconds=3600, progress_callback=progress
        )
    if waiting.cancelled_caught:
        raise TimeoutError(f"{name}: {idle:g} s without a progress notification after {messages}")
    return result


async def test_a_client_that_times_out_learned_the_id_and_the_run_goes_on(
    council: Council, cli_env: dict[str, str], server_log: TextIO
) -> None:
    """Without tasks: the SDK's client, given a request timeout shorter than the run (3 s
    for the 60 s of common clients, 5 s without progress for a client that waits while
    progress comes: scaled down so that the test is short), against runs several times
    longer (the simulator takes 10 s over each first answer; the server says where the
    run is each second nothing else was sent, COUNCIL_MCP_PROGRESS_SECONDS=1, where its
    default is 10 s)."""
    council.sim.set_faults({"*": {"slow": 1.0, "slow_seconds": 10.0, "stages": ["stage1"]}})
    env = {**cli_env, "COUNCIL_MCP_PROGRESS_SECONDS": "1"}
    question = {"question": "Should a library pin its dependencies?", "max_rounds": 1}
    async with stdio_server(env, server_log, mode="legacy") as client:
        assert client.session.protocol_version == "2025-11-25"
        # The Python SDK's client gives up at its deadline whatever comes; the first
        # notification had named the run.
        first: list[str] = []

        async def progress(value: float, total: float | None, message: str | None) -> None:
            first.append(message or "")

        with pytest.raises(MCPError) as timed_out:
            await client.call_tool(
                "ask_council", question, read_timeout_seconds=3, progress_callback=progress
            )
        assert timed_out.value.code == REQUEST_TIMEOUT
        wid = first[0].split()[1]
        assert first[0] == started_line(wid)

        # A client that waits as long as progress comes gets the answer: between the
        # stages' events, where the run is keeps coming.
        messages: list[str] = []
        result = await call_waiting_while_progress_comes(
            client, 5.0, "ask_council", question, messages
        )
        assert not result.is_error, texts(result)
        assert isinstance(result.structured_content, dict)
        second = result.structured_content["id"]
        assert messages[0] == started_line(second)
        stage_one = messages[
            messages.index("▶ stage 1 answer: 4 call(s)") : next(
                i for i, m in enumerate(messages) if m.startswith("■ stage 1 answer")
            )
        ]
        assert any(m.startswith(f"{second}: running · stage 1 answer · ") for m in stage_one)
        assert messages[-1].startswith("✔ finished")

        # The run the first call gave up on went on to its end; get_deliberation reads it.
        record = await record_of(council, wid)
        assert record.stage3 is not None
        answer = await client.call_tool("get_deliberation", {"id": wid})
        assert texts(answer)[0] == record.stage3.response
    server_log.seek(0)
    assert f"ask_council: the call ended before deliberation {wid} did; it goes on" in (
        server_log.read()
    )


async def test_ask_council_as_a_task_outlives_its_server(
    council: Council, cli_env: dict[str, str], server_log: TextIO
) -> None:
    """A client that takes tasks (the Tasks extension of the 2026-07-28 specification)
    gets one from ask_council at once, polls it and reads the answer, though it gives up
    on a request after 5 s (the 60 s of common clients, scaled down so that the test is
    short) and the run takes several times longer (the simulator takes 12 s over each first
    answer). A task is the run itself: a new server process answers for one that the first
    handed out."""
    council.sim.set_faults({"*": {"slow": 1.0, "slow_seconds": 12.0, "stages": ["stage1"]}})
    question = {"question": "Tabs or spaces?", "max_rounds": 1}
    first = tasks.Tasks()
    async with stdio_server(cli_env, server_log, extensions=[first]) as client:
        assert client.session.protocol_version == "2026-07-28"
        created = await client.session.call_tool(
            "ask_council", question, read_timeout_seconds=5, allow_claimed=True
        )
        assert isinstance(created, tasks.CreatedTask)
        # The SDK's client finishes a task by itself: call_tool polls it to the answer.
        result = await client.call_tool("ask_council", question, read_timeout_seconds=5)
        assert not result.is_error, texts(result)
        assert isinstance(result.structured_content, dict)
        assert result.structured_content["status"] == "completed"
        [polled_one] = first.created
        assert first.polls[0].status == "working" and first.polls[-1].status == "completed"
        assert polled_one.task_id.startswith(result.structured_content["id"] + "/")

    wid, _, run_id = created.task_id.rpartition("/")
    assert created.status == "working" and created.status_message == f"deliberation {wid} started"
    assert created.ttl_ms is None and created.poll_interval_ms == 2000
    description = await finding.handle(council.client, wid).describe()
    assert description.run_id == run_id

    async with stdio_server(cli_env, server_log, extensions=[tasks.Tasks()]) as client:
        polls = await tasks.polled(client.session, created.task_id, timeout=5)
        ended = tasks.outcome(polls[-1])
        got = await client.call_tool("get_deliberation", {"id": wid})
        unknown = f"{wid}/{'0' * 8}-0000-4000-8000-{'0' * 12}"
        with pytest.raises(MCPError) as missing:
            await tasks.get_task(client.session, unknown)
    record = await record_of(council, wid)
    assert record.stage3 is not None and polls[-1].status == "completed"
    assert polls[-1].created_at == created.created_at
    # Its result is what ask_council returns: the answer, then the summary line.
    assert texts(ended)[:2] == texts(got)[:2] == answered(record)
    assert ended.structured_content == got.structured_content
    assert polls[-1].status_message == summary_of(record)
    assert (missing.value.code, missing.value.error.message) == (
        INVALID_PARAMS,
        f"no task with id {unknown!r} on {cli_env['TEMPORAL_ADDRESS']}",
    )


async def test_tasks_over_http_cancel_and_need_the_extension(
    council: Council, http_server: tuple[int, Process]
) -> None:
    """Over streamable HTTP, with the token: tasks/cancel is the stop signal (the task
    completes with the answer from what the council had), and the task methods refuse a
    client that did not declare the extension."""
    council.sim.set_faults({"*": {"latency": 1.0}})
    port, _ = http_server
    url = f"http://127.0.0.1:{port}/mcp"
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http:
        async with Client(
            streamable_http_client(url, http_client=http),
            read_timeout_seconds=30,
            extensions=[tasks.Tasks()],
        ) as client:
            created = await client.session.call_tool(
                "ask_council", {"question": "Monorepo or many repos?"}, allow_claimed=True
            )
            assert isinstance(created, tasks.CreatedTask)
            wid = created.task_id.rpartition("/")[0]
            await until(finding.handle(council.client, wid), stage_started(Stage.REVIEW))
            assert (await tasks.update_task(client.session, created.task_id)).result_type == (
                "complete"
            )
            await tasks.cancel_task(client.session, created.task_id)
            polls = await tasks.polled(client.session, created.task_id)
            # Bad input is the tool's error, as ask_council gives it, not a task.
            refused = await client.call_tool("ask_council", {"question": " "})
        async with Client(streamable_http_client(url, http_client=http)) as plain:
            with pytest.raises(MCPError) as undeclared:
                await tasks.get_task(plain.session, created.task_id)
    assert error_text(refused) == "question must not be empty"
    record = await record_of(council, wid)
    assert record.iteration.terminated_reason == "user_stopped" and record.stage3 is not None
    assert record.stop_reason == "cancelled by the MCP client (tasks/cancel)"
    ended = tasks.outcome(polls[-1])
    assert texts(ended)[:2] == answered(record)
    assert isinstance(ended.structured_content, dict)
    assert ended.structured_content["status"] == "stopped"
    assert undeclared.value.code == MISSING_REQUIRED_CLIENT_CAPABILITY


async def test_start_get_and_stop(
    council: Council, cli_env: dict[str, str], temporal: WorkflowEnvironment, server_log: TextIO
) -> None:
    council.sim.set_faults({"*": {"latency": 1.0}})  # still running when it is stopped
    async with stdio_server(cli_env, server_log) as client:
        started = await client.call_tool("start_deliberation", {"question": "Tabs or spaces?"})
        assert not started.is_error, texts(started)
        assert isinstance(started.structured_content, dict)
        wid = started.structured_content["id"]
        assert started.structured_content["status"] == "running"

        status = await client.call_tool("get_deliberation", {"id": wid})
        assert not status.is_error and texts(status)[0].startswith(f"{wid}: running")
        assert isinstance(status.structured_content, dict)
        assert status.structured_content["status"] == "running"

        # In the refinement round, the running line says where, naming the round once.
        await until(finding.handle(council.client, wid), stage_started(Stage.REFINE, 1))
        status = await client.call_tool("get_deliberation", {"id": wid})
        assert isinstance(status.structured_content, dict)
        line = texts(status)[0]
        assert line.startswith(f"{wid}: running · stage 2.5 refinement · round 1 of at most 2 · ")
        assert line.count("round") == 1 and line.endswith(" tokens so far")
        assert status.structured_content["stage"] == "stage 2.5 refinement"
        assert status.structured_content["round"] == 1

        # Stopped mid-round: the chairman writes the final answer from what the council has.
        stopped = await client.call_tool("stop_deliberation", {"id": wid, "reason": "seen enough"})
        assert texts(stopped) == [f"stop requested for {wid}; the council synthesizes what it has"]
        record = await record_of(council, wid)
        assert record.iteration.terminated_reason == "user_stopped"
        assert record.stop_reason == "seen enough" and record.stage3 is not None

        done = await client.call_tool("get_deliberation", {"id": wid})
        assert not done.is_error
        assert texts(done)[0] == record.stage3.response
        assert isinstance(done.structured_content, dict)
        assert done.structured_content["status"] == "stopped"  # as the CLI and the page say
        assert done.structured_content["terminated_reason"] == record.iteration.terminated_reason

        again = await client.call_tool("stop_deliberation", {"id": wid})
        assert error_text(again) == (
            f"{wid}: this deliberation has already finished (completed): nothing to stop"
        )
        address = temporal_address(temporal)
        for unknown in ("no-such-run", "../etc/passwd"):
            missing = await client.call_tool("get_deliberation", {"id": unknown})
            assert error_text(missing) == f"no deliberation with id {unknown!r} on {address}"
            missing = await client.call_tool("stop_deliberation", {"id": unknown})
            assert error_text(missing) == f"no deliberation with id {unknown!r} on {address}"


async def test_a_failed_deliberation_is_a_tool_error(
    council: Council, cli_env: dict[str, str], server_log: TextIO
) -> None:
    council.sim.set_faults({"*": {"errors": {"401": 1.0}}})
    async with stdio_server(cli_env, server_log) as client:
        failed = await client.call_tool("ask_council", {"question": "Doomed?"})
        message = error_text(failed)
        assert message.startswith("deliberation ")
        assert " failed: fewer than two models answered (0 of 4): " in message
        assert "\n" not in message and TEST_API_KEY not in message
        wid = message.split()[1]
        status = await client.call_tool("get_deliberation", {"id": wid})
    assert not status.is_error
    [text] = texts(status)
    assert text.startswith(f"{wid}: failed: fewer than two models answered (0 of 4): ")
    assert isinstance(status.structured_content, dict)
    assert status.structured_content["status"] == "failed"
    assert status.structured_content["answer"] is None


BAD_INPUT: list[tuple[str, dict[str, Any], str]] = [
    ("ask_council", {"question": ""}, "question must not be empty"),
    ("ask_council", {"question": "   "}, "question must not be empty"),
    (
        "ask_council",
        {"question": "Q?", "max_rounds": 9},
        "max_rounds must be between 1 and 5 (got 9)",
    ),
    (
        "start_deliberation",
        {"question": "Q?", "models": ["a/b"]},
        "models: need 2 to 12 models, got 1",
    ),
    (
        "start_deliberation",
        {"question": "Q?", "council": "nope"},
        "council: no council 'nope' (known: default)",
    ),
    (
        "start_deliberation",
        {"question": "x" * (limits.QUESTION_MAX_CHARS + 1)},
        f"question is too long: at most {limits.QUESTION_MAX_CHARS} characters "
        f"(got {limits.QUESTION_MAX_CHARS + 1})",
    ),
    (
        "ask_council",
        {"question": "Q?", "max_rounds": "two"},
        "max_rounds: Input should be a valid integer, unable to parse string as an integer",
    ),
    ("get_deliberation", {}, "id is required"),
    # An argument a tool does not take is refused, not ignored: the id is not the caller's.
    (
        "start_deliberation",
        {"question": "Q?", "id": "my-own-id"},
        "start_deliberation takes no argument 'id' (it takes question, council, models, "
        "chairman, max_rounds, attachments, tools, depth)",
    ),
    (
        "ask_council",
        {"question": "Q?", "rounds": 2},
        "ask_council takes no argument 'rounds' (it takes question, council, models, chairman, "
        "max_rounds, attachments, tools, depth)",
    ),
    (
        "get_deliberation",
        {"id": "x", "verbose": True},
        "get_deliberation takes no argument 'verbose' (it takes id)",
    ),
    *(
        (
            "ask_council",
            {"question": "Q?", "max_rounds": text},
            "max_rounds: Input should be a valid integer, unable to parse string as an integer",
        )
        for text in ("²", "١", "0_1")  # ASCII digits only: "0_1" is no 1
    ),
    # true is no number (pydantic alone would read it as 1).
    (
        "ask_council",
        {"question": "Q?", "max_rounds": True},
        "max_rounds must be a whole number (got true)",
    ),
    (
        "stop_deliberation",
        {"id": "anything", "reason": "r" * 501},
        "reason: the reason is too long: at most 500 characters (got 501)",
    ),
]


async def test_bad_input_is_a_tool_error_and_nothing_starts(
    council: Council, cli_env: dict[str, str], server_log: TextIO
) -> None:
    async with stdio_server(cli_env, server_log) as client:
        for tool, arguments, message in BAD_INPUT:
            result = await client.call_tool(tool, arguments)
            assert error_text(result) == message, (tool, arguments)
            assert result.structured_content is None
        good = await client.call_tool("start_deliberation", {"question": "Q?", "max_rounds": 1})
    assert isinstance(good.structured_content, dict)
    wid = good.structured_content["id"]
    # Once the good one is listed, the task queue holds it alone.
    query = f'TaskQueue="{council.task_queue}"'
    for _ in range(100):
        ids = [run.id async for run in council.client.list_workflows(query)]
        if ids:
            break
        await asyncio.sleep(0.1)
    assert ids == [wid]
    await record_of(council, wid)


async def test_problems_at_start_exit_2_with_one_line() -> None:
    unreachable = {"TEMPORAL_ADDRESS": "127.0.0.1:1"}
    code, out, err = await starter("mcp", env=unreachable)
    assert (code, out) == (2, "")
    assert err.startswith("starter: cannot reach the Temporal server at 127.0.0.1:1")
    assert err.count("\n") == 1
    code, out, err = await starter("mcp", "--http", "nowhere", env=unreachable)
    assert (code, out) == (2, "")
    assert err == "starter: --http must be HOST:PORT, such as 127.0.0.1:8765 (got 'nowhere')\n"
    code, out, err = await starter("mcp", "--http", "127.0.0.1:²", env=unreachable)
    assert (code, out) == (2, "")
    assert err == "starter: --http must be HOST:PORT, such as 127.0.0.1:8765 (got '127.0.0.1:²')\n"
    code, _, err = await starter(
        "mcp", "--http", "127.0.0.1:8765", env={**unreachable, "COUNCIL_WEB_ALLOWED_HOSTS": "*"}
    )
    assert code == 2 and err.startswith("starter: COUNCIL_WEB_ALLOWED_HOSTS: '*'")
    assert err.count("\n") == 1


@pytest.fixture
async def http_server(
    cli_env: dict[str, str], tmp_path: Path
) -> AsyncIterator[tuple[int, Process]]:
    """`starter.py mcp --http` with a token and one extra allowed host name."""
    port = free_port()
    env = {**cli_env, "COUNCIL_WEB_TOKEN": TOKEN, "COUNCIL_WEB_ALLOWED_HOSTS": "council.example"}
    command = [sys.executable, "starter.py", "mcp", "--http", f"127.0.0.1:{port}"]
    process = spawn("mcp", command, tmp_path / "mcp-http.log", env)
    try:
        for _ in range(300):
            if port_open("127.0.0.1", port) or not process.alive():
                break
            await asyncio.sleep(0.05)
        assert port_open("127.0.0.1", port), process.log_text()
        yield port, process
    finally:
        process.stop()


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
JSON_HEADERS = {"Accept": "application/json, text/event-stream"}


async def test_http_needs_the_token_and_an_allowed_host(
    http_server: tuple[int, Process],
) -> None:
    port, process = http_server
    url = f"http://127.0.0.1:{port}/mcp"
    signed = {**JSON_HEADERS, "Authorization": f"Bearer {TOKEN}"}
    async with httpx.AsyncClient(timeout=10) as http:

        async def post(headers: dict[str, str]) -> httpx.Response:
            return await http.post(url, json=INITIALIZE, headers=headers)

        refused = await post(JSON_HEADERS)
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert TOKEN not in refused.text
        for wrong in ("wrong", TOKEN[:-1], TOKEN + "x", TOKEN.upper()):
            assert (
                await post({**JSON_HEADERS, "Authorization": f"Bearer {wrong}"})
            ).status_code == 401
        assert (await post({**JSON_HEADERS, "Authorization": TOKEN})).status_code == 401
        # A name that is not this server's (DNS rebinding) is refused, token or not.
        for host in ("evil.example", f"evil.example:{port}", f"council.example.evil:{port}"):
            assert (await post({**signed, "Host": host})).status_code == 400
        assert (await post({**signed, "Origin": "http://evil.example"})).status_code == 403
        # Loopback and the allowed name, with the token: the server answers.
        assert (await post(signed)).status_code == 200
        assert (await post({**signed, "Host": f"council.example:{port}"})).status_code == 200

    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
        missing = await client.call_tool("get_deliberation", {"id": "no-such-run"})
        assert error_text(missing).startswith("no deliberation with id 'no-such-run' on ")
    assert TOKEN not in process.log_text()


async def test_an_http_caller_starts_runs_under_its_own_fairness_key(
    http_server: tuple[int, Process], council: Council
) -> None:
    """Before: every MCP client's runs shared one fairness key ("mcp"), so one client's
    backlog was every other's. Over HTTP a run is now its caller's, as on the page and /v1:
    the principal of the token it sent (COUNCIL_WEB_TOKEN's: `shared`), never a key all
    clients share."""
    port, _ = http_server
    url = f"http://127.0.0.1:{port}/mcp"
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        started = await client.call_tool("start_deliberation", {"question": "Tabs?"})
    assert not started.is_error, texts(started)
    assert isinstance(started.structured_content, dict)
    handle = finding.handle(council.client, started.structured_content["id"])
    described = await handle.describe()
    key = described.raw_description.workflow_execution_info.priority.fairness_key
    assert key == "shared"
    await handle.terminate("test over")


async def test_the_attachments_argument(
    council: Council, cli_env: dict[str, str], server_log: TextIO
) -> None:
    report = pdf("Quarterly revenue rose 12 percent")
    files = [
        {"name": "notes.md", "text": "# Notes\nShip on Friday.\n"},
        {"name": "report.pdf", "data_base64": base64.b64encode(report).decode()},
        {
            "name": "chart.png",
            "media_type": "image/png",
            "data_base64": base64.b64encode(png()).decode(),
        },
    ]
    async with stdio_server(cli_env, server_log) as client:
        result = await client.call_tool(
            "ask_council",
            {"question": "What do the files say?", "max_rounds": 1, "attachments": files},
        )
        assert not result.is_error, texts(result)
        assert isinstance(result.structured_content, dict)
        record = await record_of(council, result.structured_content["id"])
        assert [(a.name, a.media_type) for a in record.attachments] == [
            ("notes.md", "text/markdown"),
            ("report.pdf", "application/pdf"),
            ("chart.png", "image/png"),
        ]
        assert record.attachments[1].sha256 == hashlib.sha256(report).hexdigest()
        for call in council.sim.log()["entries"]:
            shown = {a["name"]: a["shown"] for a in call["attachments"]}
            assert shown == {"notes.md": "text", "report.pdf": "text", "chart.png": "unseen"}

        before = council.sim.log()["total"]
        blob = {"name": "blob.bin", "data_base64": base64.b64encode(bytes(range(256))).decode()}
        refused = await client.call_tool(
            "start_deliberation", {"question": "Q?", "attachments": [files[0], blob]}
        )
        assert error_text(refused).startswith(
            "attachments[1]: blob.bin is a binary file that is neither a PDF nor an image"
        )
        both = await client.call_tool(
            "start_deliberation",
            {"question": "Q?", "attachments": [{"name": "x", "text": "a", "data_base64": "YQ=="}]},
        )
        assert error_text(both) == "attachments[0]: give either text or data_base64"
        many = await client.call_tool(
            "start_deliberation", {"question": "Q?", "attachments": [files[0]] * 11}
        )
        assert error_text(many) == "attachments: at most 10 files per run (got 11)"
        assert council.sim.log()["total"] == before  # nothing started


async def test_http_takes_attachments_up_to_their_limits_and_refuses_more_in_one_line(
    http_server: tuple[int, Process],
) -> None:
    """The streamable HTTP transport takes a request as large as the documented limits
    allow (the SDK's own cap, 4 MiB, answered a bare 413 below them): attachments just
    under the limits reach the tool, which checks them like any other argument; over the
    transport's cap, the client is told why in one line."""
    port, _ = http_server
    url = f"http://127.0.0.1:{port}/mcp"
    file = "A line of the report.\n" * (999_000 // 22)
    under = [{"name": f"part-{n}.txt", "text": file} for n in range(8)]
    assert len(file) * 8 < limits.MAX_ATTACHMENTS_TOTAL_BYTES < len(file) * 9
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        # Under the limits, and a bad max_rounds: the tool read the request and refused
        # only the argument (so nothing starts).
        arguments = {"question": "Q?", "max_rounds": 9, "attachments": under}
        result = await client.call_tool("start_deliberation", arguments)
        assert error_text(result) == "max_rounds must be between 1 and 5 (got 9)"
        # Over the attachments' limit: the tool's error, naming the argument.
        over = {**arguments, "max_rounds": 1, "attachments": [*under, under[0]]}
        result = await client.call_tool("start_deliberation", over)
        assert error_text(result).startswith("attachments: at most 8.0 MB in all")
        # Over what the transport takes: a JSON-RPC error in one line, naming the limit.
        huge = {**arguments, "attachments": [{"name": "huge.txt", "text": "x" * MCP_BODY}]}
        with pytest.raises(MCPError) as refused:
            await client.call_tool("start_deliberation", huge)
        message = refused.value.error.message
        assert f"{MCP_BODY:,} bytes" in message and "\n" not in message, message
        # The session goes on.
        assert {tool.name for tool in (await client.list_tools()).tools} == TOOLS
