"""4. Crash cost: the model calls of a run whose worker is killed mid-round, against a
clean run.

Every call takes 1 s. The worker (`python worker.py`) gets SIGKILL while the calls of
round 1's refinement stage are in flight (the simulator's request log shows them), and a
new worker process starts at once. The simulator's log tells a retry from a new call:
every attempt of one call carries the same X-Council-Call id (workflow id/activity id).
The run uses the default call policy a user gets (10 s heartbeat timeout).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter

from bench import report
from bench.stack import BenchStack, council_request

MODELS = 4
ROUNDS = 2
LATENCY = 1.0


def _mine(entries: list[dict], workflow_id: str) -> list[dict]:
    return [e for e in entries if (e.get("call_id") or "").startswith(workflow_id + "/")]


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    request = council_request(MODELS, ROUNDS)
    stack.sim.set_latency(LATENCY)
    try:
        # A clean run.
        worker = await asyncio.to_thread(stack.start_council_worker)
        try:
            stack.sim.reset()
            clean, clean_wall = await stack.run_council(worker.queue, request)
            clean_calls = len(stack.sim.log()["entries"])
        finally:
            await asyncio.to_thread(worker.stop)

        # A run whose worker dies mid-round.
        stack.sim.reset()
        first = await asyncio.to_thread(stack.start_council_worker)
        second = None
        try:
            started = time.monotonic()
            handle = await stack.start_council(first.queue, request, prefix="crash")
            deadline = time.monotonic() + 120
            while not any(
                e["stage"] == "stage2_5" for e in _mine(stack.sim.log()["entries"], handle.id)
            ):
                if time.monotonic() > deadline:
                    raise RuntimeError("the refinement stage never started")
                await asyncio.sleep(0.02)
            await asyncio.sleep(LATENCY / 3)
            before = _mine(stack.sim.log()["entries"], handle.id)
            first.kill()
            killed = time.monotonic()
            in_flight = {e["call_id"] for e in before if e["finished"] is None}
            done_before = {e["call_id"] for e in before if e["outcome"] == "ok"}
            second = await asyncio.to_thread(stack.start_council_worker, first.queue)
            record = await handle.result()
            crash_wall = time.monotonic() - started
            recovered = time.monotonic() - killed
        finally:
            for process in (first, second):
                if process is not None:
                    await asyncio.to_thread(process.stop)
    finally:
        stack.sim.set_latency(0)

    entries = _mine(stack.sim.log()["entries"], handle.id)
    per_call = Counter(e["call_id"] for e in entries)
    repeated = {call for call, n in per_call.items() if n > 1}
    crash_calls = len(entries)
    extra = crash_calls - clean_calls
    ok = record.status == "completed" and len(record.rounds) == ROUNDS and not record.errors
    if not ok:
        raise RuntimeError("the crashed run did not complete cleanly")

    table = report.Table(
        [
            "run",
            "model calls served",
            "distinct calls",
            "calls in flight at the kill",
            "extra calls",
            "completed calls made again",
            "wall time",
        ]
    )
    table.add("clean", clean_calls, clean.usage.calls, "-", "-", "-", report.seconds(clean_wall, 1))
    table.add(
        "worker killed mid-round (SIGKILL), new worker started",
        crash_calls,
        len(per_call),
        len(in_flight),
        extra,
        len(repeated & done_before),
        report.seconds(crash_wall, 1),
    )
    return report.Section(
        f"4. Crash cost: worker killed mid-round "
        f"({MODELS} models, {ROUNDS} rounds, calls {LATENCY:g} s)",
        [table],
        [
            f"killed {LATENCY / 3:.2f} s into round 1's refinement stage; the calls in flight "
            "are the simulator's unfinished requests of this run at that moment.",
            "extra calls = served in the crashed run - served in the clean run; "
            f"{len(repeated)} call(s) were served more than once, "
            + ("all of them" if repeated <= in_flight else "NOT all of them")
            + " in flight at the kill.",
            f"the run finished {recovered:.1f} s after the kill: the server gives up on the dead "
            "worker's calls at their heartbeat timeout (10 s by default; the request's policy "
            "sets it), then retries them on the new worker.",
        ],
        [
            report.Headline(
                "crash: extra calls / calls in flight",
                extra / len(in_flight) if in_flight else None,
                "<= 1",
                extra <= len(in_flight),
                f"{extra} extra calls, {len(in_flight)} in flight at the kill "
                f"({crash_calls} vs {clean_calls} served)",
            )
        ],
    )
