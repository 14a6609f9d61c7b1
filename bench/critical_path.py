"""1. Critical path: the wall time of one deliberation over the ideal.

4 models, 2 rounds, every simulated call takes 1 s. The ideal is the number of
sequential stages (stage 1, review, (refine, review) x 2, synthesis = 7) times 1 s.
Beside it, the same protocol as a plain in-process asyncio fan-out (bench.plain_asyncio,
no durability) and the same graph of 1 s activities on bare Temporal (bench.bare_workflow).
Runs alternate between the three, after one warm-up run of each at zero latency.
"""

from __future__ import annotations

import asyncio
import statistics

from bench import report
from bench.plain_asyncio import PlainCouncil
from bench.stack import BENCH_API_KEY, BenchStack, council_plan, council_request, stages_of

MODELS = 4
ROUNDS = 2
LATENCY = 1.0
GOAL = 1.05


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    reps = 1 if quick else 3
    request = council_request(MODELS, ROUNDS)
    plan = council_plan(MODELS, ROUNDS)
    stages = stages_of(ROUNDS)
    ideal = stages * LATENCY
    expected_calls = sum(plan)

    council = await asyncio.to_thread(stack.start_council_worker)
    bare = await asyncio.to_thread(stack.start_bare_worker)
    plain = PlainCouncil(stack.sim_url, BENCH_API_KEY)
    times: dict[str, list[float]] = {"council": [], "plain": [], "bare": []}
    calls: dict[str, int] = {}
    try:
        stack.sim.set_latency(0)
        await stack.run_council(council.queue, request)
        await plain.deliberate(request)
        await stack.run_bare(bare.queue, plan)
        stack.sim.set_latency(LATENCY)
        for _ in range(reps):
            stack.sim.reset()
            record, elapsed = await stack.run_council(council.queue, request)
            if len(record.rounds) != ROUNDS or record.stage3 is None or record.errors:
                raise RuntimeError(f"the council run did not run {ROUNDS} clean rounds")
            times["council"].append(elapsed)
            calls["council"] = stack.sim.log()["total"]

            stack.sim.reset()
            loop = asyncio.get_running_loop()
            started = loop.time()
            result = await plain.deliberate(request)
            times["plain"].append(loop.time() - started)
            if result.rounds != ROUNDS or result.failures:
                raise RuntimeError(f"the asyncio run did not run {ROUNDS} clean rounds")
            calls["plain"] = stack.sim.log()["total"]

            times["bare"].append(await stack.run_bare(bare.queue, plan, LATENCY))
            calls["bare"] = expected_calls
    finally:
        stack.sim.set_latency(0)
        await plain.aclose()
        await asyncio.to_thread(council.stop)
        await asyncio.to_thread(bare.stop)

    medians = {name: statistics.median(values) for name, values in times.items()}
    table = report.Table(
        [
            "implementation",
            f"wall time (median of {reps})",
            "ideal",
            "ratio to ideal",
            "overhead per stage",
            "model calls",
        ]
    )
    names = {
        "council": "Council on Temporal (worker.py, durable)",
        "plain": "plain asyncio fan-out, same protocol and HTTP client (no durability)",
        "bare": "bare Temporal, same graph of 1 s sleep activities",
    }
    for key, name in names.items():
        wall = medians[key]
        table.add(
            name,
            report.seconds(wall, 3),
            report.seconds(ideal, 1),
            report.ratio(wall / ideal),
            f"{(wall - ideal) / stages * 1000:.0f} ms",
            calls[key],
        )
    council_ratio = medians["council"] / ideal
    section = report.Section(
        f"1. Critical path: {MODELS} models, {ROUNDS} rounds, every call {LATENCY:g} s",
        [table],
        [
            f"ideal = {stages} sequential stages (stage 1, review, (refine, review) x {ROUNDS}, "
            f"synthesis) x {LATENCY:g} s; {expected_calls} model calls per run.",
            "wall time is measured by the client from starting the run to holding its result; "
            "each run of the three kinds alternates with the others, after a warm-up run of each.",
            "all runs: "
            + "; ".join(
                f"{key} " + ", ".join(f"{t:.3f}" for t in values) for key, values in times.items()
            ),
        ],
        [
            report.Headline(
                "critical path: Council / ideal",
                council_ratio,
                f"<= {GOAL}",
                council_ratio <= GOAL,
                f"{medians['council']:.3f} s for {ideal:g} s ideal; asyncio "
                f"{medians['plain'] / ideal:.3f}, bare Temporal {medians['bare'] / ideal:.3f}",
            )
        ],
    )
    return section
