"""Watchers: what following one running deliberation costs, with 1 and with 50 viewers.

Each case watches a fresh run (4 members, 2 rounds, every call several seconds, so that
the run is still going when the window ends) and measures the CPU time of the worker, the
Temporal server and the page server (/proc) over the same window, with:

- before: each viewer on its own asks the run twice a second, as every surface did before
  the progress stream (the page did this per viewer): the progress query every 0.5 s, a
  describe (the calls in flight and their text) every 0.5 s, and the record query whenever
  new events came. The bench driver itself plays the viewers, so the page server idles.
- after: real HTTP clients on the page's live stream (GET /deliberations/{id}/stream): the
  page server follows the run once for all of them (one follower per run, waiting on the
  run's wait_progress update) and reads and renders each moment once.

It also counts what the watching left in the run's history: its events, and the updates
accepted (the follower's asks).
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from bench import report
from bench.stack import BenchStack, CpuMeter, council_request
from council.calls import Stage
from council.progress import EventKind, Progress
from harness.processes import Process, free_port, start_web
from runs import finding
from workflows.deliberation import Deliberation

VIEWERS = (1, 50)
LATENCY = 4.0  # seconds per model call: 7 stages, so about 30 s a run
SETTLE = 2.0  # after the viewers connect, before the window opens
WINDOW = 15.0
QUICK_WINDOW = 6.0
TICK = 0.5  # how often a polling viewer asked (the old POLL_SECONDS)


async def _poll_like_before(handle: WorkflowHandle, stop: asyncio.Event) -> None:
    """One viewer as the page was before: progress query, describe, and the record query
    when events came, every TICK."""
    since = 0
    while not stop.is_set():
        with contextlib.suppress(Exception):
            progress: Progress = await handle.query(
                Deliberation.progress, since, rpc_timeout=finding.QUERY_TIMEOUT
            )
            if progress.events or since == 0:
                await handle.query(Deliberation.current_record)
            since = progress.next_seq
            await finding.calls_in_flight(handle)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), TICK)


async def _view_the_page(http: httpx.AsyncClient, url: str, stop: asyncio.Event) -> int:
    """One viewer on the page's live stream: the bytes it read until told to stop."""
    read = 0
    with contextlib.suppress(httpx.HTTPError, asyncio.CancelledError):
        async with http.stream("GET", url) as response:
            async for chunk in response.aiter_bytes():
                read += len(chunk)
                if stop.is_set():
                    break
    return read


async def _started(handle: WorkflowHandle, timeout: float = 60) -> None:
    """Until the run's first stage started (a worker has it)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(Exception):
            progress: Progress = await handle.query(Deliberation.progress, 0)
            if any(
                e.kind == EventKind.STAGE_START and e.stage == Stage.ANSWER for e in progress.events
            ):
                return
        await asyncio.sleep(0.1)
    raise TimeoutError("the run never started")


async def _history(handle: WorkflowHandle) -> tuple[int, int]:
    """The run's history events so far, and the updates it accepted."""
    accepted = EventType.EVENT_TYPE_WORKFLOW_EXECUTION_UPDATE_ACCEPTED
    events = [e.event_type async for e in handle.fetch_history_events()]
    return len(events), sum(e == accepted for e in events)


async def _case(
    stack: BenchStack,
    queue: str,
    pids: dict[str, int],
    viewers: int,
    watch: Callable[[WorkflowHandle, asyncio.Event], Awaitable[Any]],
    window: float,
) -> tuple[dict[str, float | None], float, tuple[int, int]]:
    handle = await stack.start_council(queue, council_request(4, rounds=2), prefix="watched")
    await _started(handle)
    stop = asyncio.Event()
    tasks = [asyncio.ensure_future(watch(handle, stop)) for _ in range(viewers)]
    try:
        await asyncio.sleep(SETTLE)
        meter = CpuMeter(pids)
        meter.start()
        await asyncio.sleep(window)
        seconds = meter.stop()
        history = await _history(handle)
    finally:
        stop.set()
        await asyncio.sleep(TICK * 2)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        with contextlib.suppress(Exception):
            await handle.terminate("benchmark window over")
    return seconds, meter.wall, history


def _growth(cpu: dict[tuple[str, int], dict[str, float]], name: str, process: str) -> str:
    """A process's CPU with the most viewers over that with one: the ratio, and both."""
    one, many = cpu[(name, 1)].get(process), cpu[(name, max(VIEWERS))].get(process)
    if one is None or many is None or one <= 0:
        return "n/a"
    return f"{many / one:.1f}x ({one:.1f} -> {many:.1f} %)"


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    window = QUICK_WINDOW if quick else WINDOW
    worker = await asyncio.to_thread(stack.start_council_worker)
    web: Process | None = None
    stack.sim.set_faults({"*": {"latency": LATENCY}})
    try:
        env = {
            "TEMPORAL_ADDRESS": stack.address,
            "COUNCIL_TASK_QUEUE": worker.queue,
            **stack.store_env,
        }
        web = await asyncio.to_thread(
            start_web, env, port=free_port(), log_path=stack.workdir / "web.log"
        )
        url = web.extra["url"]
        pids = {
            "worker": worker.pid,
            "temporal server": stack.server_pids()["temporal server"],
            "page server": web.pid,
        }
        limits = httpx.Limits(max_connections=max(VIEWERS) + 10)
        async with httpx.AsyncClient(base_url=url, timeout=None, limits=limits) as http:

            async def page(handle: WorkflowHandle, stop: asyncio.Event) -> int:
                return await _view_the_page(http, f"/deliberations/{handle.id}/stream", stop)

            table = report.Table(
                [
                    "viewers",
                    "how they watch",
                    "worker CPU",
                    "Temporal server CPU",
                    "page server CPU",
                    "bench driver CPU",
                    "history events (updates accepted)",
                ]
            )
            cpu: dict[tuple[str, int], dict[str, float]] = {}
            watches = {"before": _poll_like_before, "after": page}
            for viewers in VIEWERS:
                for name, watch in watches.items():
                    print(f"bench: watchers: {viewers} viewer(s), {name}", file=sys.stderr)
                    seconds, wall, (events, updates) = await _case(
                        stack, worker.queue, pids, viewers, watch, window
                    )
                    shares = {k: 100 * v / wall for k, v in seconds.items() if v is not None}
                    cpu[(name, viewers)] = shares
                    table.add(
                        viewers,
                        "before: each polls the run twice a second"
                        if name == "before"
                        else "after: the page's live stream",
                        *(
                            f"{shares[k]:.1f} %" if k in shares else "n/a"
                            for k in ("worker", "temporal server", "page server", "bench driver")
                        ),
                        f"{events} ({updates})",
                    )
    finally:
        if web is not None:
            web.stop()
        worker.stop()
        stack.sim.set_faults({})
    ratios = report.Table(["process", "before: 50 / 1 viewer", "after: 50 / 1 viewer"])
    for process in ("worker", "temporal server", "page server"):
        ratios.add(process, *(_growth(cpu, name, process) for name in ("before", "after")))
    server = {
        name: cpu[(name, max(VIEWERS))].get("temporal server") for name in ("before", "after")
    }
    return report.Section(
        title=f"Watchers: one run followed by 1 and {max(VIEWERS)} viewers",
        tables=[table, ratios],
        notes=[
            f"Each case watches a fresh run (4 members, 2 rounds, every call {LATENCY:g} s) "
            f"from its first stage on, {SETTLE:g} s after the viewers connect, for {window:g} s; "
            "CPU is the process's user + system time over the window, as a share of one core.",
            "before: the bench driver plays each viewer as the page did before the progress "
            "stream (progress query and describe every 0.5 s, the record query on new events); "
            "after: HTTP clients on the page's live stream, which the page server serves from "
            "one follower per run.",
            "history events: the run's history when the window closed (the runs are at about "
            "the same point); updates accepted: the follower's asks (wait_progress).",
        ],
        headlines=[
            report.Headline(
                f"watchers: Temporal server CPU, {max(VIEWERS)} viewers, after / before",
                server["after"] / server["before"]
                if server["after"] is not None and server["before"]
                else None,
                "< 0.2",
                server["after"] / server["before"] < 0.2
                if server["after"] is not None and server["before"]
                else None,
                f"{server['before'] or 0:.1f} -> {server['after'] or 0:.1f} % of a core",
            )
        ],
    )
