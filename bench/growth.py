"""3. Growth: how a deliberation's cost grows with models (2, 4, 8) and rounds (1, 3, 5).

Zero-latency models. For each cell, a fresh worker process runs deliberations alone
(their median wall time; model calls, tokens, and the history size: events and the sum
of their serialized sizes from fetch_history), then a batch of runs at once, whose time
per run is the cell's throughput cost and whose peak is the worker's memory under load.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from dataclasses import dataclass

from bench import report
from bench.stack import BenchStack, council_request, history_size, stages_of


@dataclass
class Sizes:
    models: tuple[int, ...]
    rounds: tuple[int, ...]
    batch: int
    alone: int  # runs on an idle worker, for the median wall time


FULL = Sizes(models=(2, 4, 8), rounds=(1, 3, 5), batch=20, alone=3)
QUICK = Sizes(models=(2, 4), rounds=(1, 3), batch=5, alone=1)


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    sizes = QUICK if quick else FULL
    stack.sim.set_latency(0)
    table = report.Table(
        [
            "models",
            "rounds",
            "stages",
            "model calls",
            "tokens",
            "history events",
            "history size",
            f"wall time, alone (median of {sizes.alone})",
            f"time per run, {sizes.batch} at once",
            f"worker peak RSS, {sizes.batch} at once",
        ]
    )
    for model_count in sizes.models:
        for rounds in sizes.rounds:
            request = council_request(model_count, rounds)
            worker = await asyncio.to_thread(stack.start_council_worker)
            try:
                alone = []
                for _ in range(sizes.alone):
                    stack.sim.reset()
                    started = time.monotonic()
                    handle = await stack.start_council(worker.queue, request, prefix="growth")
                    record = await handle.result()
                    alone.append(time.monotonic() - started)
                    served = stack.sim.log()["total"]
                    if (
                        len(record.rounds) != rounds
                        or record.errors
                        or served != record.usage.calls
                    ):
                        raise RuntimeError(
                            f"{model_count} models, {rounds} rounds: not a clean run"
                        )
                events, size = await history_size(handle)

                started = time.monotonic()
                handles = await asyncio.gather(
                    *(
                        stack.start_council(worker.queue, request, prefix="growth")
                        for _ in range(sizes.batch)
                    )
                )
                await asyncio.gather(*(h.result() for h in handles))
                per_run = (time.monotonic() - started) / sizes.batch
            finally:
                peak = await asyncio.to_thread(worker.stop)
            table.add(
                model_count,
                rounds,
                stages_of(rounds),
                record.usage.calls,
                f"{record.usage.total_tokens:,}",
                events,
                report.kilobytes(size),
                report.seconds(statistics.median(alone)),
                report.seconds(per_run),
                report.megabytes(peak),
            )
    return report.Section(
        "3. Growth with models and rounds (zero-latency models)",
        [table],
        [
            "model calls = 2 x models x (rounds + 1) + 1 (the chairman); every reviewer reads "
            "every other answer, so tokens grow with the square of the number of models.",
            "history size = the sum of the serialized history events (fetch_history); "
            "the simulator's replies are a few hundred bytes to a few KB, far below the "
            "per-reply cap, so real models make larger histories.",
            f"'alone' is a run on an idle worker; 'time per run' is the wall time of "
            f"{sizes.batch} runs started together, divided by {sizes.batch}; a fresh worker "
            "process per cell, so its peak RSS is that cell's.",
        ],
    )
