"""Stragglers: one slow member against the straggler rule (council.stragglers).

1. Five members, four at 1 s per call and one at 10 s, two rounds (seven sequential
   stages): wall time with the default rule, with --wait-for-all, and with no straggler at
   all (the five at 1 s). Goal: the default rule within 1.3x of the no-straggler time.
2. A mixed latency profile like real providers' (each call drawn from its member's range:
   two at 0.5-3 s, two at 2-8 s, one at 5-40 s), the same deliberation N times in
   parallel with and without the rule: median and p90 wall time, and how many calls were
   cut.
The chairman is a fast member, so the figures measure the stages the rule applies to.
"""

from __future__ import annotations

import asyncio
import statistics
from typing import Any

from bench import report
from bench.stack import BenchStack, council_request

ROUNDS = 2
FAST = 1.0
SLOW = 10.0
GOAL = 1.3
MIXED = ([0.5, 3.0], [0.5, 3.0], [2.0, 8.0], [2.0, 8.0], [5.0, 40.0])


def _request(policy: dict[str, Any] | None) -> dict[str, Any]:
    request = council_request(model_count=5, rounds=ROUNDS)
    request["chairman"] = request["models"][0]
    if policy is not None:
        request["stragglers"] = policy
    return request


def _p90(values: list[float]) -> float:
    return statistics.quantiles(values, n=10, method="inclusive")[-1]


async def _one_slow(stack: BenchStack, queue: str, repeats: int) -> tuple[report.Table, float]:
    members = _request(None)["models"]
    slow = members[3]
    cases = [
        ("no straggler (all at 1 s)", {"*": {"latency": FAST}}, None),
        ("one at 10 s, default rule", {"*": {"latency": FAST}, slow: {"latency": SLOW}}, None),
        (
            "one at 10 s, --wait-for-all",
            {"*": {"latency": FAST}, slow: {"latency": SLOW}},
            {"wait_for_all": True},
        ),
    ]
    table = report.Table(["case", "runs", "median wall", "calls cut", "ratio to no straggler"])
    medians: dict[str, float] = {}
    for name, faults, policy in cases:
        stack.sim.set_faults(faults)
        times, cut = [], 0
        runs = 1 if policy else repeats
        for _ in range(runs):
            record, seconds = await stack.run_council(queue, _request(policy))
            times.append(seconds)
            cut += len(record.late)
        medians[name] = statistics.median(times)
        base = medians[cases[0][0]]
        table.add(
            name,
            runs,
            report.seconds(medians[name]),
            cut,
            report.ratio(medians[name] / base, 2),
        )
    ratio = medians[cases[1][0]] / medians[cases[0][0]]
    return table, ratio


async def _mixed(stack: BenchStack, queue: str, runs: int, scale: float) -> report.Table:
    members = _request(None)["models"]
    faults = {
        m: {"latency": [lo * scale, hi * scale]} for m, (lo, hi) in zip(members, MIXED, strict=True)
    }
    table = report.Table(["rule", "runs", "median wall", "p90 wall", "calls cut", "answers cut"])
    for name, policy in (("default rule", None), ("--wait-for-all", {"wait_for_all": True})):
        stack.sim.set_faults(faults)
        results = await asyncio.gather(
            *(stack.run_council(queue, _request(policy)) for _ in range(runs))
        )
        times = [seconds for _, seconds in results]
        late = [entry for record, _ in results for entry in record.late]
        answers = sum(entry.stage == "stage1" for entry in late)
        table.add(
            name,
            runs,
            report.seconds(statistics.median(times)),
            report.seconds(_p90(times)),
            len(late),
            f"{answers} of {runs * len(members)}",
        )
    return table


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    worker = await asyncio.to_thread(stack.start_council_worker)
    try:
        one_slow, ratio = await _one_slow(stack, worker.queue, repeats=1 if quick else 3)
        runs, scale = (5, 0.25) if quick else (20, 1.0)
        mixed = await _mixed(stack, worker.queue, runs, scale)
    finally:
        worker.stop()
        stack.sim.set_faults({})
    return report.Section(
        title="Stragglers: a slow member and the straggler rule",
        tables=[one_slow, mixed],
        notes=[
            f"5 members, {ROUNDS} rounds (7 sequential stages), the chairman a fast member; "
            "the rule's defaults (factor 2, grace 2 s): once a quorum has replied, the rest "
            "are awaited until max(2 s, 2 x the median reply time) from the stage's start, "
            "then cut; a member cut once is not awaited again in that deliberation.",
            "Mixed profile: calls drawn uniformly from "
            + ", ".join(f"{lo * scale:g}-{hi * scale:g} s" for lo, hi in MIXED)
            + f" (one range per member), {runs} deliberations in parallel per rule.",
        ],
        headlines=[
            report.Headline(
                "stragglers: default rule / no straggler",
                ratio,
                f"≤ {GOAL}",
                ratio <= GOAL,
                "4 members at 1 s, one at 10 s",
            )
        ],
    )
