"""9. Providers: a rate-limited provider with and without `max_requests_per_second`, and a
provider that goes down for a minute in the middle of a run.

1. The simulator as a provider with a quota of QUOTA requests per second (a request over it
   gets 429 with Retry-After: 1 s), RUNS councils of 4 members and one round at once, on
   two worker processes. Before: the provider without a limit in council.toml (what every
   provider was), so calls go out as fast as the runs make them and the provider refuses
   the excess, which the calls retry. After: `max_requests_per_second = QUOTA` for it, so
   the Temporal server hands out no more than that across both workers; and a limit of
   UNDER, a little under the quota. Counted from the
   simulator's log: requests, 429s, the busiest second; and the wall time of the batch.
2. One council on a provider of its own (a second simulator), stopped for OUTAGE seconds
   once the review stage starts and started again on the same port. Counted: the members
   that kept their place, the calls paused, the most attempts any call had made, and how
   long after the provider was back the run took to finish.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench import report
from bench.stack import BenchStack, council_request
from council.calls import Stage
from council.progress import EventKind
from harness.processes import free_port, start_simulator
from runs import finding
from workflows.deliberation import Deliberation

QUOTA = 2
# A limit a little under the quota: the server's limiter may hand out a second's worth at
# once after a pause, which a provider that counts over a sliding second refuses in part.
UNDER = 1.6
RUNS = 4
OUTAGE = 60.0
LATENCY = 0.5  # the outage case's calls, so that the run is mid-stage when it stops


def council_toml(url: str, rate: float | None) -> str:
    limit = f"max_requests_per_second = {rate}\n" if rate is not None else ""
    return (
        f'[providers.quota]\nbase_url = "{url}"\napi_key_env = "COUNCIL_LLM_API_KEY"\n'
        f'models = ["sim/*"]\n{limit}'
    )


async def quota_case(stack: BenchStack, rate: float | None, runs: int) -> list[Any]:
    config = stack.workdir / f"council-{'limited' if rate else 'free'}.toml"
    config.write_text(council_toml(stack.sim_url, rate))
    worker = await asyncio.to_thread(stack.start_worker, None, None, 2, COUNCIL_CONFIG=str(config))
    try:
        stack.sim.reset()
        started = time.monotonic()
        handles = [
            await stack.start_council(worker.queue, council_request(4, 1), "quota")
            for _ in range(runs)
        ]
        records = await asyncio.gather(*(handle.result() for handle in handles))
        wall = time.monotonic() - started
    finally:
        await asyncio.to_thread(worker.stop)
    entries = stack.sim.log()["entries"]
    refused = sum(1 for e in entries if e.get("status") == 429)
    busiest = max(Counter(int(e["started"]) for e in entries if e.get("status") != 429).values())
    failed = sum(len(r.errors) for r in records)
    return [
        f"{rate:g} per second" if rate else "none (before)",
        len(entries),
        refused,
        busiest,
        failed,
        report.seconds(wall),
    ]


async def outage_case(stack: BenchStack, workdir: Path, outage: float) -> list[Any]:
    port = free_port()
    provider = start_simulator(port, latency=LATENCY, log_path=workdir / "outage-sim.log")
    url = provider.extra["url"]
    worker = await asyncio.to_thread(stack.start_worker, None, None, None, COUNCIL_LLM_BASE_URL=url)
    try:
        handle = await stack.start_council(worker.queue, council_request(4, 1), "outage")
        while True:
            progress = await handle.query(Deliberation.progress, 0)
            if any(
                e.kind == EventKind.STAGE_START and e.stage == Stage.REVIEW for e in progress.events
            ):
                break
            await asyncio.sleep(0.2)
        provider.stop()
        await asyncio.sleep(outage)
        calls = await finding.calls_in_flight(handle)
        paused = sum(1 for c in calls if c.paused)
        attempts = max((c.attempt for c in calls), default=0)
        provider = start_simulator(port, latency=LATENCY, log_path=workdir / "outage-sim.log")
        back = time.monotonic()
        record = await handle.result()
        after = time.monotonic() - back
    finally:
        provider.stop()
        await asyncio.to_thread(worker.stop)
    kept = len({r.model for r in record.stage2})
    return [
        f"{outage:.0f} s",
        f"{kept} of {len(record.models)}",
        paused,
        attempts,
        len(record.errors),
        report.seconds(after),
    ]


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    runs = 2 if quick else RUNS
    outage = 15.0 if quick else OUTAGE
    stack.sim.set_faults({"*": {"requests_per_second": QUOTA, "retry_after": 1}})
    try:
        quota = report.Table(
            [
                "limit in council.toml",
                "requests",
                "refused (429)",
                "busiest second (answered)",
                "failed calls",
                "wall time",
            ]
        )
        quota.add(*await quota_case(stack, None, runs))
        quota.add(*await quota_case(stack, QUOTA, runs))
        quota.add(*await quota_case(stack, UNDER, runs))
    finally:
        stack.sim.set_faults(None)
    down = report.Table(
        [
            "provider down",
            "members that kept their place",
            "calls paused",
            "most attempts of a call",
            "failed calls",
            "finished after it was back",
        ]
    )
    down.add(*await outage_case(stack, stack.workdir, outage))
    return report.Section(
        f"9. Providers: a quota of {QUOTA} requests per second ({runs} runs at once, two "
        "worker processes), and a provider down mid-run",
        [quota, down],
        [
            "With the limit, the provider's calls go to a task queue of their own whose "
            "rate the Temporal server enforces across both worker processes: the provider "
            "refuses (almost) nothing, where without it the excess comes back as 429 and is "
            "retried after its Retry-After.",
            "A provider that fails three calls in a row (of two models or more) is down: each "
            "of its calls pauses "
            "itself (Temporal's activity pause) and spends no attempt while it waits; a probe "
            "asks for the model list every 5 s and resumes them once it answers.",
        ],
    )
