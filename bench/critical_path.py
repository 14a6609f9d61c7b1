"""1. Critical path: the time of one deliberation over the ideal, cold and warm.

4 models, 2 rounds, every simulated call takes 1 s. The ideal is the number of
sequential stages (stage 1, review, (refine, review) x 2, synthesis = 7) times 1 s.
Council is measured twice: the first deliberation after `worker.py` starts (cold: a new
worker process for each such run, given the 1 s latency at once) and warm runs on a worker
that has run before. Beside it, the same protocol as a plain in-process asyncio fan-out
(bench.plain_asyncio, no durability), and bare Temporal (bench.bare_workflow) twice: the
same graph of 1 s sleep activities, and the same model calls a deliberation made (its
prompts, stage by stage, through the model-call activity and the simulator). The last makes
the calls over the same activity and HTTP client as Council without the deliberation around
them, so Council's time over it is the protocol's own cost. Warm runs alternate between
the four, after one warm-up run of each at zero latency.
The workflow-task times come from the histories.
"""

from __future__ import annotations

import asyncio
import statistics

from bench import report
from bench.plain_asyncio import PlainCouncil
from bench.stack import (
    BENCH_API_KEY,
    BenchStack,
    Timing,
    council_plan,
    council_request,
    history_timing,
    stages_of,
)
from council.models import DeliberationRecord

MODELS = 4
ROUNDS = 2
LATENCY = 1.0
GOAL_COLD = 1.05
GOAL_WARM = 1.04
GOAL_TASK_MS = 10.0
GOAL_PROTOCOL = 1.01


def _check(record: DeliberationRecord) -> None:
    if len(record.rounds) != ROUNDS or record.stage3 is None or record.errors:
        raise RuntimeError(f"the council run did not run {ROUNDS} clean rounds")


def _p95(values: list[float]) -> float:
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


async def _cold_run(stack: BenchStack, request: dict) -> tuple[float, Timing]:
    """A new worker process, then at once a deliberation with 1 s calls."""
    worker = await asyncio.to_thread(stack.start_council_worker)
    try:
        stack.sim.set_latency(LATENCY)
        record, elapsed = await stack.run_council(worker.queue, request)
        _check(record)
        handle = stack.client.get_workflow_handle(record.id)
        return elapsed, await history_timing(handle)
    finally:
        await asyncio.to_thread(worker.stop)


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    reps = 1 if quick else 3
    request = council_request(MODELS, ROUNDS)
    plan = council_plan(MODELS, ROUNDS)
    stages = stages_of(ROUNDS)
    ideal = stages * LATENCY
    expected_calls = sum(plan)
    assert stack.client is not None

    walls: dict[str, list[float]] = {
        "cold": [],
        "council": [],
        "plain": [],
        "bare_calls": [],
        "bare": [],
    }
    timings: dict[str, list[Timing]] = {"cold": [], "council": [], "bare_calls": [], "bare": []}
    calls: dict[str, int] = {}
    for _ in range(reps):
        stack.sim.reset()
        elapsed, timing = await _cold_run(stack, request)
        walls["cold"].append(elapsed)
        timings["cold"].append(timing)
        calls["cold"] = stack.sim.log()["total"]

    council = await asyncio.to_thread(stack.start_council_worker)
    bare = await asyncio.to_thread(stack.start_bare_worker)
    plain = PlainCouncil(stack.sim_url, BENCH_API_KEY)
    try:
        stack.sim.set_latency(0)
        warm_up, _ = await stack.run_council(council.queue, request)
        same_calls = await stack.council_calls(warm_up.id)
        await plain.deliberate(request)
        await stack.run_bare(bare.queue, plan)
        await stack.run_same_calls(bare.queue, same_calls)
        stack.sim.set_latency(LATENCY)
        for _ in range(reps):
            stack.sim.reset()
            record, elapsed = await stack.run_council(council.queue, request)
            _check(record)
            walls["council"].append(elapsed)
            handle = stack.client.get_workflow_handle(record.id)
            timings["council"].append(await history_timing(handle))
            calls["council"] = stack.sim.log()["total"]

            stack.sim.reset()
            loop = asyncio.get_running_loop()
            started = loop.time()
            result = await plain.deliberate(request)
            walls["plain"].append(loop.time() - started)
            if result.rounds != ROUNDS or result.failures:
                raise RuntimeError(f"the asyncio run did not run {ROUNDS} clean rounds")
            calls["plain"] = stack.sim.log()["total"]

            stack.sim.reset()
            bare_handle, elapsed = await stack.run_same_calls(bare.queue, same_calls)
            walls["bare_calls"].append(elapsed)
            timings["bare_calls"].append(await history_timing(bare_handle))
            calls["bare_calls"] = stack.sim.log()["total"]

            bare_handle, elapsed = await stack.run_bare(bare.queue, plan, LATENCY)
            walls["bare"].append(elapsed)
            timings["bare"].append(await history_timing(bare_handle))
            calls["bare"] = expected_calls
    finally:
        stack.sim.set_latency(0)
        await plain.aclose()
        await asyncio.to_thread(council.stop)
        await asyncio.to_thread(bare.stop)

    wall = {name: statistics.median(values) for name, values in walls.items()}
    # The ratio is read off the history (first to last event) where there is one.
    span = {name: statistics.median(t.span for t in runs) for name, runs in timings.items()}
    span["plain"] = wall["plain"]
    tasks = {name: [ms for t in runs for ms in t.task_ms] for name, runs in timings.items()}
    table = report.Table(
        [
            "implementation",
            f"wall time (median of {reps})",
            "in history",
            "ratio to ideal",
            "overhead per stage",
            "workflow task: median / p95",
            "workflow tasks per run",
            "model calls",
        ]
    )
    names = {
        "cold": "Council, the first run after worker.py starts (cold)",
        "council": "Council on a worker that has run before (warm)",
        "plain": "plain asyncio fan-out, same protocol and HTTP client (no durability)",
        "bare_calls": "bare Temporal, the same model calls as a deliberation (no protocol)",
        "bare": "bare Temporal, same graph of 1 s sleep activities",
    }
    for key, name in names.items():
        task_ms = tasks.get(key)
        table.add(
            name,
            report.seconds(wall[key], 3),
            report.seconds(span[key], 3) if key in timings else "-",
            report.ratio(span[key] / ideal),
            f"{(span[key] - ideal) / stages * 1000:.0f} ms",
            f"{statistics.median(task_ms):.1f} / {_p95(task_ms):.1f} ms" if task_ms else "-",
            f"{len(task_ms) / reps:.1f}" if task_ms else "-",
            calls[key],
        )
    cold, warm = span["cold"] / ideal, span["council"] / ideal
    protocol = span["council"] / span["bare_calls"]
    protocol_ms = (span["council"] - span["bare_calls"]) / stages * 1000
    task_median = statistics.median(tasks["cold"] + tasks["council"])
    bare_median = statistics.median(tasks["bare"])
    section = report.Section(
        f"1. Critical path: {MODELS} models, {ROUNDS} rounds, every call {LATENCY:g} s",
        [table],
        [
            f"ideal = {stages} sequential stages (stage 1, review, (refine, review) x {ROUNDS}, "
            f"synthesis) x {LATENCY:g} s; {expected_calls} model calls per run.",
            "ratio to ideal: from the run's first to its last history event (the asyncio "
            "fan-out has no history: its wall time); wall time is measured by the client "
            "from starting the run to holding its result.",
            f"cold: {reps} run(s), each the first deliberation of a new worker process; warm: "
            "runs alternate with the other three kinds, after a zero-latency warm-up run of each.",
            "Council / bare Temporal with the same model calls: both warm, from history; "
            "the difference is the deliberation's own work on the critical path (prompts, "
            "review parsing, state, events, search attributes).",
            "workflow task: WORKFLOW_TASK_STARTED to WORKFLOW_TASK_COMPLETED in the history, "
            "the worker's time on the task plus its round trips to the server, over every "
            "task of the runs.",
            "all runs (wall): "
            + "; ".join(
                f"{key} " + ", ".join(f"{t:.3f}" for t in values) for key, values in walls.items()
            ),
        ],
        [
            report.Headline(
                "critical path, first run after a worker start: Council / ideal",
                cold,
                f"<= {GOAL_COLD}",
                cold <= GOAL_COLD,
                f"{span['cold']:.3f} s for {ideal:g} s ideal",
            ),
            report.Headline(
                "critical path, warm: Council / ideal",
                warm,
                f"<= {GOAL_WARM}",
                warm <= GOAL_WARM,
                f"{span['council']:.3f} s for {ideal:g} s ideal; asyncio "
                f"{span['plain'] / ideal:.3f}, bare Temporal {span['bare'] / ideal:.3f}, "
                f"bare Temporal with the same model calls {span['bare_calls'] / ideal:.3f}",
            ),
            report.Headline(
                "critical path, warm: Council / bare Temporal with the same model calls",
                protocol,
                f"<= {GOAL_PROTOCOL}",
                protocol <= GOAL_PROTOCOL,
                f"{span['council']:.3f} vs {span['bare_calls']:.3f} s: the protocol's own "
                f"cost is {protocol_ms:.1f} ms per stage",
            ),
            report.Headline(
                "workflow task time, median",
                task_median,
                f"<= {GOAL_TASK_MS:g} ms",
                task_median <= GOAL_TASK_MS,
                f"p95 {_p95(tasks['cold'] + tasks['council']):.1f} ms; bare Temporal "
                f"{bare_median:.1f} ms (p95 {_p95(tasks['bare']):.1f})",
                unit="ms",
            ),
        ],
    )
    return section
