"""A PDF bomb (a few KB whose page inflates into seconds of reading) against every server
that reads attachments: the page, /v1 and MCP over HTTP, each a process as users run it.
While one caller's bomb is read, the others are answered: each server reads a PDF in a
process of its own, apart from its event loop. A bomb past the limits is refused in one
line naming the file and the limit, and too many files are refused before any is read.

Scaled down: the bomb read beside the honest requests inflates to 1 MB (seconds), where
the one that was found froze a server for 112 s at 70 MB; the limits (CPU time, memory,
time on the clock) are tried with a budget of a second or a few MB.
"""

from __future__ import annotations

import asyncio
import base64
import html
import re
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import CallToolResult, TextContent

from app.requests import attachments
from app.requests.pdf_text import Budget
from council import limits
from harness.processes import Process, free_port, port_open, spawn
from tests.attachment_files import pdf_bomb
from tests.temporal_fixtures import Council
from tests.web_fixtures import WebServer

T = TypeVar("T")
# Seconds of reading (about half a second a MB on a fast idle machine, several on a loaded
# one; well inside the CPU budget), with no text: refused once read.
SLOW = pdf_bomb(3_000_000)
# As slow to read, with half a MB of text: a surface that read every file before counting
# them (/v1 and MCP did) spent most of a minute on eleven.
READABLE = pdf_bomb(1_000_000, shown=b"A")
# Past the most a stream may inflate to: refused as soon as the cap is reached.
PAST_CAP = pdf_bomb(limits.MAX_PDF_STREAM_BYTES + 2_000_000)
TOKEN = "mcp-bomb-token-51d2"
TOO_MANY = limits.MAX_ATTACHMENTS + 1
COUNT_LINE = f"attachments: at most {limits.MAX_ATTACHMENTS} files per run (got {TOO_MANY})"
STREAM_LINE = (
    "bomb.pdf is refused: a stream of it inflates past "
    f"{limits.size_text(limits.MAX_PDF_STREAM_BYTES)}"
)


async def beside(
    attack: Awaitable[T], honest: Callable[[], Awaitable[Any]]
) -> tuple[T, float, int]:
    """The attack's outcome, the seconds it took, and how many honest requests were answered
    while it still ran (one after another until the attack is answered; one asked before, so
    that a first request's own start-up is not counted as the attack's doing)."""
    await honest()
    started = time.monotonic()
    task = asyncio.ensure_future(attack)
    answered = 0
    while not task.done():
        await honest()
        answered += not task.done()
    return await task, time.monotonic() - started, answered


def assert_answered_beside(took: float, answered: int) -> None:
    """Before, an honest request waited for the whole bomb; now others are answered while
    it is read (a condition, not a time: it holds on a loaded machine too)."""
    assert took > 1.0, f"the bomb took only {took:.2f} s: too small to show anything"
    assert answered >= 2, f"{answered} honest request(s) answered beside a {took:.2f} s bomb"


# ---- the page -------------------------------------------------------------------------


def form_error(page: str) -> str:
    found = re.search(r'id="error-attachments">([^<]*)<', page)
    assert found, "no error beside the attachments field"
    return html.unescape(found.group(1))


async def test_the_page_answers_others_while_a_bomb_is_read(
    web: WebServer, council: Council
) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=120) as http:

        async def start(*files: tuple[str, bytes]) -> httpx.Response:
            return await http.post(
                "/deliberations",
                data={"question": "What does the report say?"},
                files=[("attachments", (name, data, "application/pdf")) for name, data in files],
                headers={"Origin": web.url},
            )

        async def honest() -> None:
            # A request the server answers itself: the list of runs asks Temporal, whose
            # answer takes a second now and then with no bomb at all.
            assert (await http.get("/static/council.css")).status_code == 200

        slow, took, answered = await beside(start(("slow.pdf", SLOW)), honest)
        assert slow.status_code == 400
        assert "slow.pdf is a PDF without text" in form_error(slow.text)
        assert_answered_beside(took, answered)

        capped = await start(("bomb.pdf", PAST_CAP))
        assert STREAM_LINE in form_error(capped.text)
        many, many_took, _ = await beside(start(*[("readable.pdf", READABLE)] * TOO_MANY), honest)
        assert form_error(many.text).endswith(COUNT_LINE.removeprefix("attachments"))
        assert many_took * 3 < took
    assert council.sim.log()["total"] == 0  # nothing started


# ---- /v1 ------------------------------------------------------------------------------


def said(error: openai.APIStatusError) -> str:
    assert isinstance(error.body, dict)
    return str(error.body["message"])


def with_files(*files: tuple[str, bytes]) -> list[dict[str, Any]]:
    parts = [
        {
            "type": "file",
            "file": {
                "filename": name,
                "file_data": "data:application/pdf;base64," + base64.b64encode(data).decode(),
            },
        }
        for name, data in files
    ]
    return [{"role": "user", "content": [{"type": "text", "text": "What do they say?"}, *parts]}]


async def test_v1_answers_others_while_a_bomb_is_read(web: WebServer, council: Council) -> None:
    async with openai.AsyncOpenAI(
        base_url=f"{web.url}/v1", api_key="no-key-needed", max_retries=0, timeout=120
    ) as api:

        async def ask(*files: tuple[str, bytes]) -> str:
            with pytest.raises(openai.BadRequestError) as refused:
                await api.chat.completions.create(model="council", messages=with_files(*files))
            return said(refused.value)

        async def honest() -> None:
            await api.models.list()

        slow, took, answered = await beside(ask(("slow.pdf", SLOW)), honest)
        assert slow.startswith("messages[0].content[1].file.file_data: slow.pdf is a PDF without")
        assert_answered_beside(took, answered)

        capped = await ask(("bomb.pdf", PAST_CAP))
        assert capped.startswith(f"messages[0].content[1].file.file_data: {STREAM_LINE}")
        assert "\n" not in capped
        many, many_took, _ = await beside(ask(*[("readable.pdf", READABLE)] * TOO_MANY), honest)
        assert many == COUNT_LINE
        assert many_took * 3 < took  # refused before any file was read
    assert council.sim.log()["total"] == 0


# ---- MCP over HTTP --------------------------------------------------------------------


@pytest.fixture
async def mcp_http(cli_env: dict[str, str], tmp_path: Path) -> AsyncIterator[str]:
    """`starter.py mcp --http` with a token: its URL."""
    port = free_port()
    command = [sys.executable, "starter.py", "mcp", "--http", f"127.0.0.1:{port}"]
    process: Process = spawn(
        "mcp", command, tmp_path / "mcp-http.log", {**cli_env, "COUNCIL_WEB_TOKEN": TOKEN}
    )
    try:
        for _ in range(600):
            if port_open("127.0.0.1", port) or not process.alive():
                break
            await asyncio.sleep(0.05)
        assert port_open("127.0.0.1", port), process.log_text()
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.stop()


def error_of(result: CallToolResult) -> str:
    assert result.is_error, result
    [text] = [block.text for block in result.content if isinstance(block, TextContent)]
    return text


async def test_mcp_answers_others_while_a_bomb_is_read(mcp_http: str, council: Council) -> None:
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(mcp_http, http_client=http), read_timeout_seconds=120) as one,
        Client(
            streamable_http_client(mcp_http, http_client=http), read_timeout_seconds=120
        ) as other,
    ):

        async def start(*files: tuple[str, bytes]) -> str:
            given = [
                {"name": name, "data_base64": base64.b64encode(data).decode()}
                for name, data in files
            ]
            result = await one.call_tool(
                "start_deliberation", {"question": "What do they say?", "attachments": given}
            )
            return error_of(result)

        async def honest() -> None:
            await other.list_tools()

        slow, took, answered = await beside(start(("slow.pdf", SLOW)), honest)
        assert slow.startswith("attachments[0]: slow.pdf is a PDF without text")
        assert_answered_beside(took, answered)

        capped = await start(("bomb.pdf", PAST_CAP))
        assert capped.startswith(f"attachments[0]: {STREAM_LINE}")
        many, many_took, _ = await beside(start(*[("readable.pdf", READABLE)] * TOO_MANY), honest)
        assert many == COUNT_LINE
        assert many_took * 3 < took
    assert council.sim.log()["total"] == 0


# ---- the limits, as any surface meets them --------------------------------------------


def refusal(budget: Budget, data: bytes = SLOW) -> str:
    with pytest.raises(attachments.AttachmentProblem) as refused:
        attachments.pdf_text("bomb.pdf", data, budget)
    return refused.value.line("attachments")


def test_each_limit_of_reading_a_pdf_is_refused_in_one_line_naming_it() -> None:
    longer = pdf_bomb(3_000_000)  # several seconds of CPU time
    assert refusal(Budget(cpu_seconds=1), longer) == (
        "attachments: bomb.pdf is refused: reading it takes more than 1 s of CPU time, "
        "the most a PDF may take"
    )
    assert refusal(Budget(seconds=1, cpu_seconds=60), longer) == (
        "attachments: bomb.pdf is refused: it was not read within 1 s, the most a PDF may take"
    )
    # 60 MB inflated, where the stream cap would allow it: the memory limit stops it.
    big = pdf_bomb(60_000_000)
    assert refusal(Budget(memory_bytes=120_000_000, stream_bytes=75_000_000), big) == (
        "attachments: bomb.pdf is refused: reading it needs more than 120.0 MB of memory, "
        "the most a PDF may take"
    )
    assert refusal(Budget(stream_bytes=1_000_000)) == (
        "attachments: bomb.pdf is refused: a stream of it inflates past 1.0 MB, the most a "
        "PDF's page or stream may hold"
    )
    assert refusal(Budget(text_bytes=100_000), pdf_bomb(400_000, shown=b"A")) == (
        "attachments: bomb.pdf is too large: a file's text may have at most 100.0 KB "
        "(got 200.0 KB from its first page)"
    )
