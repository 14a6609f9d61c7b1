"""Pages whose markup is cheap to send and was dear to read, through the real fetch tool
from a server of the test's own on 127.0.0.1: read in time linear in their size, in a
process of its own (activities.page_text through bounded.process) within CPU, memory and
wall-clock limits, each limit ending the call in one line, and the reader gone whenever
its call ends (cancelled, timed out), so that a retry never reads beside the attempt it
replaces (a real Temporal dev server runs the tool activity with its retries).

Before: the text was made from a Beautiful Soup tree, in a thread that the call's timeout
abandoned, and a retry started a second one beside the first. CPU time on 2 busy cores
(python -m bench.bombs): a flat page of `<p>x</p>` 1 s at 20 KB, 17 to 33 s at 80 KB, no
end in 180 s at 200 KB; nested divs 5 s at 100 KB; 200 KB of unclosed tags 36 s.
"""

from __future__ import annotations

import asyncio
import os
import resource
import uuid
from datetime import timedelta
from pathlib import Path

import pytest
from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from activities.tools import ToolBox
from activities.web_tools import fetch, fetch_spec
from bounded.process import Limits
from council.tool_config import FetchEntry, Tools
from council.tools import ToolCall, ToolResult, ToolRun
from tests.test_web_tools import Site, fetch_failure, local, reply, site
from workflows.tools import ATTEMPT_MARGIN, TOOL_HEARTBEAT

__all__ = ["site"]  # (the fixture, used by name)

KB = 1_000
# What one of the pages below may cost the worker and its reader together, in CPU time:
# ten times what each takes (a few tenths of a second, the reader's start included), and
# below what the smallest of them but one took before (nested divs: 5 s).
MOST_CPU_SECONDS = 3.0
# A page whose text takes many seconds of CPU time to read (about 0.8 s a MB here): past
# every limit the tests below set.
HEAVY_BYTES = 30_000_000
HEAVY = b"<p>" * (HEAVY_BYTES // 3)
READER = "activities.page_text:answer"


def cpu_seconds() -> float:
    """This process's CPU time and that of the processes it has reaped (the readers)."""
    own, reaped = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


def flat(size: int) -> bytes:
    return b"<p>x</p>" * (size // 8)


def nested(size: int) -> bytes:
    return b"<div>" * (size // 11) + b"x" + b"</div>" * (size // 11)


def unclosed(size: int) -> bytes:
    """Tags that never close: quadratic in Python's own html.parser."""
    return b"<a" * (size // 2)


@pytest.mark.parametrize(
    ("page", "text"),
    [
        (flat(20 * KB), "\n".join(["x"] * 2_500)),
        (flat(80 * KB), "\n".join(["x"] * 10_000)),
        (flat(200 * KB), "\n".join(["x"] * 25_000)),
        (nested(100 * KB), "x"),
        (unclosed(200 * KB), "(no readable text)"),
    ],
    ids=["flat-20KB", "flat-80KB", "flat-200KB", "nested-100KB", "unclosed-200KB"],
)
async def test_pages_that_took_minutes_are_read_in_linear_time(
    site: Site, page: bytes, text: str
) -> None:
    site.routes["/page"] = reply(200, "text/html; charset=utf-8", page)
    before = cpu_seconds()
    got = await fetch({"url": f"{site.url}/page"}, local())
    took = cpu_seconds() - before
    assert got == f"URL: {site.url}/page\n\n{text}"
    assert took < MOST_CPU_SECONDS, f"{len(page):,} bytes of markup took {took:.1f} s of CPU"


def heavy_entry(**fields: float) -> FetchEntry:
    return local(max_bytes=HEAVY_BYTES, **fields)


async def test_a_page_past_the_cpu_limit_is_not_read(site: Site) -> None:
    site.routes["/heavy"] = reply(200, "text/html", HEAVY)
    limits = Limits(cpu_seconds=1, memory_bytes=1_000_000_000, seconds=120)
    message = await fetch_failure(f"{site.url}/heavy", heavy_entry(timeout=120), page_limits=limits)
    assert message == (
        f"fetch: the text of {site.url}/heavy takes more than 1 s of CPU time to read; not read"
    )


async def test_a_page_past_the_memory_limit_is_not_read(site: Site) -> None:
    site.routes["/heavy"] = reply(200, "text/html", HEAVY)
    limits = Limits(cpu_seconds=60, memory_bytes=60_000_000, seconds=120)
    message = await fetch_failure(f"{site.url}/heavy", heavy_entry(timeout=120), page_limits=limits)
    assert message == (
        f"fetch: the text of {site.url}/heavy needs more than 60.0 MB of memory to read; not read"
    )


def readers() -> set[int]:
    """This process's children that read a page's text."""
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parent = int(stat.read_text().rsplit(")", 1)[1].split()[1])
            if parent == os.getpid() and READER.encode() in (stat.parent / "cmdline").read_bytes():
                found.add(int(stat.parent.name))
        except (OSError, ValueError, IndexError):
            continue
    return found


async def until_reading(within: float = 120) -> set[int]:
    deadline = asyncio.get_running_loop().time() + within
    while not (found := readers()):
        assert asyncio.get_running_loop().time() < deadline, "no reader ever started"
        await asyncio.sleep(0.01)
    return found


async def test_a_cancelled_fetch_leaves_no_reader(site: Site) -> None:
    site.routes["/heavy"] = reply(200, "text/html", HEAVY)
    call = asyncio.create_task(fetch({"url": f"{site.url}/heavy"}, heavy_entry(timeout=120)))
    reading = await until_reading()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert not readers() & reading, "the reader outlived its call"


@workflow.defn(sandboxed=False)
class OneToolCall:
    """One tool call with the options the deliberation gives it (workflows.tools)."""

    @workflow.run
    async def run(self, run: ToolRun) -> ToolResult:
        return await workflow.execute_activity_method(
            ToolBox.call_tool,
            run,
            start_to_close_timeout=timedelta(seconds=run.spec.timeout_seconds) + ATTEMPT_MARGIN,
            heartbeat_timeout=TOOL_HEARTBEAT,
            retry_policy=RetryPolicy(
                maximum_attempts=run.spec.max_attempts, initial_interval=timedelta(seconds=1)
            ),
        )


async def test_a_retry_never_reads_beside_the_attempt_it_replaces(
    temporal: WorkflowEnvironment, site: Site
) -> None:
    """Each attempt's reader times out with its call (3 s) and is gone before the attempt
    fails; the retry's reader starts after, never beside it."""
    site.routes["/heavy"] = reply(200, "text/html", HEAVY)
    entry = heavy_entry(timeout=3, max_attempts=2)
    toolbox = ToolBox(Tools(entries={"fetch": entry}), env={})
    call = ToolCall(id="call-1", name="fetch", arguments=f'{{"url": "{site.url}/heavy"}}')
    seen: set[int] = set()
    most = 0

    async def watch() -> None:
        nonlocal most
        while True:
            now = readers()
            seen.update(now)
            most = max(most, len(now))
            await asyncio.sleep(0.01)

    watching = asyncio.create_task(watch())
    queue = f"fetch-bombs-{uuid.uuid4().hex[:8]}"
    try:
        async with Worker(
            temporal.client,
            task_queue=queue,
            workflows=[OneToolCall],
            activities=[toolbox.call_tool],
        ):
            result = await temporal.client.execute_workflow(
                OneToolCall.run,
                ToolRun(spec=fetch_spec(entry), call=call),
                id=f"fetch-bombs-{uuid.uuid4().hex[:8]}",
                task_queue=queue,
            )
    finally:
        watching.cancel()
        await toolbox.aclose()
    assert result.error == f"fetch: the text of {site.url}/heavy was not read within 3 s"
    assert len(seen) == 2, f"readers seen: {sorted(seen)} (one an attempt)"
    assert most == 1, "a retry's reader ran beside the one of the attempt it replaced"
    assert not readers()
