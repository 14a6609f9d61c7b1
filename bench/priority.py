"""8. Priority: a person's run alone, and behind a backlog of batch runs.

One worker that makes CALLS model calls at a time (COUNCIL_MAX_CONCURRENT_CALLS), models
that answer after LATENCY seconds, councils of 4 members and one round. The person's run is
timed alone; then BACKLOG batch runs are started (as `eval` starts them) and the person's
run right after them, once as a person's run (interactive, ahead of batch work) and once
started as batch work itself, which is what every run was before priorities: it waits its
turn behind the backlog's calls, stage after stage.
"""

from __future__ import annotations

import asyncio
import time

from bench import report
from bench.stack import BenchStack, council_request
from runs.priority import BATCH, INTERACTIVE, Launch

CALLS = 4
LATENCY = 0.2
BACKLOG = 20


async def timed(stack: BenchStack, queue: str, launch: Launch) -> float:
    started = time.monotonic()
    handle = await stack.start_council(queue, council_request(4, 1), "person", launch=launch)
    await handle.result()
    return time.monotonic() - started


async def behind_backlog(stack: BenchStack, queue: str, launch: Launch, backlog: int) -> float:
    batch = [
        await stack.start_council(queue, council_request(4, 1), "batch", launch=BATCH)
        for _ in range(backlog)
    ]
    took = await timed(stack, queue, launch)
    await asyncio.gather(*(handle.result() for handle in batch))
    return took


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    backlog = 5 if quick else BACKLOG
    stack.sim.set_latency(LATENCY)
    worker = await asyncio.to_thread(
        stack.start_worker, None, None, None, COUNCIL_MAX_CONCURRENT_CALLS=str(CALLS)
    )
    try:
        alone = await timed(stack, worker.queue, INTERACTIVE)
        first = await behind_backlog(stack, worker.queue, INTERACTIVE, backlog)
        in_turn = await behind_backlog(stack, worker.queue, BATCH, backlog)
    finally:
        await asyncio.to_thread(worker.stop)
        stack.sim.set_latency(0)
    table = report.Table(["the person's run", "wall time", "vs alone"])
    table.add("alone", report.seconds(alone), "1.00x")
    table.add(
        f"behind {backlog} batch runs, interactive",
        report.seconds(first),
        report.ratio(first / alone),
    )
    table.add(
        f"behind {backlog} batch runs, in its turn (before)",
        report.seconds(in_turn),
        report.ratio(in_turn / alone),
    )
    return report.Section(
        f"8. Priority: a person's run behind {backlog} batch runs ({CALLS} calls at a time, "
        f"{LATENCY:g} s per call)",
        [table],
        [
            "Interactive runs (the page, /v1, MCP, `start`) have Temporal priority 1 and batch "
            "work (`eval`, `bench`, `start --priority batch`) 5: with the worker busy, the "
            "server hands the person's calls out first, and the backlog waits.",
        ],
    )
