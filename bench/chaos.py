"""`make chaos`: 30 deliberations at once while everything goes wrong.

The same 30 deliberations run twice on a fresh Temporal dev server (SQLite file), a
simulator subprocess and worker subprocesses: once calmly (the baseline), once under
chaos: the worker is killed with SIGKILL at random moments and restarted, the Temporal
server is stopped and restarted once on the same SQLite file, and the simulator
answers with 429 storms, 5xx bursts, hangs and truncated streams. Then it prints how
many runs completed with full records, how many model calls the chaos cost beyond the
baseline, whether any completed call was made again, and the worst added latency.

    .venv/bin/python -m bench.chaos [--runs 30] [--kills 5] [--seed 7]     (or `make chaos`)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import random
import statistics
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import Client, WorkflowHandle
from temporalio.runtime import LoggingConfig, Runtime, TelemetryConfig, TelemetryFilter
from temporalio.service import RPCError

from app.temporal import connection
from council.models import DeliberationRecord
from harness.processes import DATA
from harness.stack import Stack, WorkerProcess
from runs.stuck import task_failure
from simulator.personas import DEFAULT_MODELS

MODELS = DEFAULT_MODELS
ROUNDS = 2
CALLS_PER_RUN = 4 + 4 + ROUNDS * (4 + 4) + 1
LATENCY = [0.5, 1.5]  # long enough that the runs outlive the kills
POLICY = {
    "call_timeout_seconds": 8,
    "heartbeat_timeout_seconds": 3,
    "max_attempts": 15,
    "initial_retry_seconds": 0.5,
    "max_retry_seconds": 3,
}
# A request that hangs cannot be told from a slow member (a provider silent before its
# first byte), so the straggler rule rightly counts it as the member's time until the call
# timeout ends it; the chaos runs give the rule a floor above that timeout, so that a hang
# is retried rather than cut and every record can be whole. (The rule still watches the
# calls that a kill or the server's restart keeps longer than that.)
STRAGGLERS = {"grace_seconds": POLICY["call_timeout_seconds"] + 2}
# The fault weather, one phase after another, each for a few seconds.
WEATHER = [
    ("calm", {}),
    ("429 storm", {"errors": {"429": 0.45}, "retry_after": 1}),
    ("calm", {}),
    ("5xx burst", {"errors": {"500": 0.25, "502": 0.1, "503": 0.1}}),
    ("hangs", {"hang": 0.08}),
    ("truncated streams", {"truncate": 0.3}),
    ("everything but hangs", {"errors": {"429": 0.15, "500": 0.1}, "truncate": 0.1}),
]
PHASE_SECONDS = 3.0
OUT = DATA / "chaos"
QUEUE = "council-chaos"


def say(message: str) -> None:
    print(f"chaos: {message}", file=sys.stderr, flush=True)


def question(i: int) -> str:
    return f"Chaos question {i}: how should a team of {i + 2} plan a reliable release?"


def request(i: int) -> dict:
    return {
        "question": question(i),
        "models": MODELS,
        "max_rounds": ROUNDS,
        "quality_threshold": 5,
        "stop_on_convergence": False,
        "token_budget": 10_000_000,
        "policy": POLICY,
        "stragglers": STRAGGLERS,
    }


@dataclass
class Chaos:
    """What the chaos did to the stack: the worker it keeps restarting, kills, restarts."""

    stack: Stack
    worker: WorkerProcess | None = None
    kills: list[float] = field(default_factory=list)
    server_restarts: int = 0
    server_stops: list[float] = field(default_factory=list)

    def start_worker(self) -> None:
        self.worker = self.stack.start_worker(QUEUE, COUNCIL_LOG_LEVEL="WARNING")


def quiet_runtime() -> Runtime:
    """The server restart makes the client retry; its warnings would drown the report."""
    return Runtime(
        telemetry=TelemetryConfig(
            logging=LoggingConfig(filter=TelemetryFilter(core_level="ERROR", other_level="ERROR"))
        )
    )


async def result(handle: WorkflowHandle) -> DeliberationRecord:
    """Wait for a run, riding out a server restart."""
    while True:
        try:
            return await handle.result()
        except RPCError:
            await asyncio.sleep(0.5)


async def run_all(stack: Stack, prefix: str, runs: int) -> list[DeliberationRecord]:
    handles = [
        await stack.start_council(QUEUE, request(i), id=f"{prefix}-{i:02d}") for i in range(runs)
    ]
    return list(await asyncio.gather(*(result(h) for h in handles)))


def set_weather(stack: Stack, spec: dict) -> None:
    assert stack.sim is not None
    stack.sim.set_latency(LATENCY, **spec)  # type: ignore[arg-type]


async def weather(stack: Stack, done: asyncio.Event) -> list[str]:
    seen = []
    i = 0
    while not done.is_set():
        name, spec = WEATHER[i % len(WEATHER)]
        await asyncio.to_thread(set_weather, stack, spec)
        seen.append(name)
        i += 1
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), PHASE_SECONDS)
    await asyncio.to_thread(set_weather, stack, {})
    return seen


async def crashes(chaos: Chaos, done: asyncio.Event, kills: int, rng: random.Random) -> None:
    """Kill the worker at random moments; once, stop and restart the server."""
    restart_server_after = rng.randint(2, max(2, kills - 1))
    while len(chaos.kills) < kills and not done.is_set():
        await asyncio.sleep(rng.uniform(1.5, 4.0))
        if done.is_set():
            break
        assert chaos.worker is not None
        chaos.worker.kill()
        chaos.kills.append(time.time())
        say(f"killed the worker (SIGKILL #{len(chaos.kills)})")
        if len(chaos.kills) == restart_server_after:
            chaos.server_stops.append(time.time())
            chaos.stack.stop_server()
            say("stopped the Temporal server")
            await asyncio.sleep(rng.uniform(1.0, 3.0))
            await asyncio.to_thread(chaos.stack.start_server)
            chaos.server_restarts += 1
            say("restarted the Temporal server on the same SQLite file")
        await asyncio.sleep(rng.uniform(0.3, 1.5))
        await asyncio.to_thread(chaos.start_worker)


async def completion_times(
    client: Client, workflow_ids: list[str]
) -> tuple[dict[str, float], set[str]]:
    """call id (workflow/activity id) -> when Temporal recorded the call as completed; and
    the runs whose history holds a failed workflow task (runs.stuck.task_failure)."""
    times: dict[str, float] = {}
    failed: set[str] = set()
    for workflow_id in workflow_ids:
        scheduled: dict[int, str] = {}
        async for event in client.get_workflow_handle(workflow_id).fetch_history_events():
            if task_failure(event) is not None:
                failed.add(workflow_id)
            if event.HasField("activity_task_scheduled_event_attributes"):
                scheduled[event.event_id] = (
                    event.activity_task_scheduled_event_attributes.activity_id
                )
            elif event.HasField("activity_task_completed_event_attributes"):
                activity = scheduled[
                    event.activity_task_completed_event_attributes.scheduled_event_id
                ]
                times[f"{workflow_id}/{activity}"] = event.event_time.ToDatetime().timestamp()
    return times, failed


def complete(record: DeliberationRecord) -> bool:
    return (
        record.status == "completed"
        and [r.model for r in record.stage1] == MODELS
        and len(record.stage2) == len(MODELS)
        and len(record.rounds) == ROUNDS
        and all(
            len(r.reviews) == len(MODELS) and not any(f.error for f in r.refinements)
            for r in record.rounds
        )
        and record.stage3 is not None
        and not record.errors
    )


def gaps(record: DeliberationRecord) -> list[str]:
    """What keeps a record from being whole: its cuts, its failed calls, what is missing."""
    found = [f"cut: {late.describe()}" for late in record.late]
    found += [f"failed: {error.describe()}" for error in record.errors]
    if record.status != "completed":
        found.append(f"status {record.status}")
    if len(record.rounds) != ROUNDS:
        found.append(f"{len(record.rounds)} rounds")
    return found or (["incomplete"] if not complete(record) else [])


def wall(record: DeliberationRecord) -> float:
    assert record.started_at and record.completed_at
    return (record.completed_at - record.started_at).total_seconds()


async def phase(chaos: Chaos, prefix: str, runs: int, wild: bool, kills: int, rng: random.Random):
    stack = chaos.stack
    assert stack.sim is not None and stack.client is not None
    stack.sim.reset()
    set_weather(stack, {})
    chaos.start_worker()
    done = asyncio.Event()
    started = time.monotonic()
    chaos_tasks = []
    if wild:
        chaos_tasks = [
            asyncio.create_task(weather(stack, done)),
            asyncio.create_task(crashes(chaos, done, kills, rng)),
        ]
    records = await run_all(stack, prefix, runs)
    elapsed = time.monotonic() - started
    recorded, failed_tasks = await completion_times(stack.client, [r.id for r in records])
    done.set()
    weather_seen = (await chaos_tasks[0]) if chaos_tasks else []
    if chaos_tasks:
        await chaos_tasks[1]
    log = stack.sim.log()
    assert chaos.worker is not None
    chaos.worker.stop()
    return records, log, elapsed, weather_seen, recorded, failed_tasks


def table(rows: list[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    lines = [f"| {'measure':<{width}} | value |", f"| {'-' * width} | --- |"]
    lines += [f"| {k:<{width}} | {v} |" for k, v in rows]
    return "\n".join(lines)


async def main(runs: int, kills: int, seed: int) -> int:
    rng = random.Random(seed)
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        stack = Stack(OUT, db_file=Path(tmp) / "chaos.db")
        chaos = Chaos(stack)
        try:
            await stack.start(runtime=quiet_runtime())
            say(f"baseline: {runs} deliberations, no faults")
            base_records, base_log, base_elapsed, _, _, base_failed = await phase(
                chaos, "calm", runs, False, 0, rng
            )
            say(f"baseline done in {base_elapsed:.1f} s; now the same {runs} under chaos")
            records, log, elapsed, weather_seen, recorded, failed = await phase(
                chaos, "chaos", runs, True, kills, rng
            )
        finally:
            stack.close()

    entries = log["entries"]
    crashes_at = sorted(chaos.kills + chaos.server_stops)
    # A completed call is one Temporal recorded; none may be requested again after that.
    made_again = [e for e in entries if e["started"] > recorded.get(e["call_id"], float("inf"))]
    # Answered twice: the provider's answer was lost with a killed worker or the stopped
    # server before Temporal recorded it. Each must have been in flight at such a crash.
    ok_per_call = Counter(e["call_id"] for e in entries if e["outcome"] == "ok")
    paid_twice = {call for call, n in ok_per_call.items() if n > 1}
    first_start = {}
    for e in entries:
        first_start.setdefault(e["call_id"], e["started"])
    in_flight_any = {
        call
        for call, begun in first_start.items()
        if any(begun < crash < recorded.get(call, float("inf")) for crash in crashes_at)
    }
    outcomes = Counter(e["outcome"] for e in entries)
    added = [wall(c) - wall(b) for b, c in zip(base_records, records, strict=False)]
    rows = [
        ("runs completed / started", f"{sum(r.status == 'completed' for r in records)} / {runs}"),
        (
            "records complete (4 answers, 2 rounds, synthesis, no errors)",
            f"{sum(map(complete, records))} / {runs}",
        ),
        ("worker SIGKILLs / server restarts", f"{len(chaos.kills)} / {chaos.server_restarts}"),
        ("fault phases", ", ".join(dict.fromkeys(weather_seen))),
        ("model calls, baseline", f"{base_log['total']} ({runs} x {CALLS_PER_RUN} expected)"),
        ("model calls, chaos", f"{log['total']}"),
        ("calls beyond the baseline", f"{log['total'] - base_log['total']}"),
        (
            "failed attempts, by outcome",
            ", ".join(f"{k} {v}" for k, v in sorted(outcomes.items()) if k != "ok"),
        ),
        ("completed calls made again", f"{len(made_again)}"),
        # A failed workflow task is retried for good: such a run would never end.
        ("runs with a failed workflow task", f"{len(base_failed | failed)}"),
        (
            "calls answered twice (answer lost in a crash)",
            f"{len(paid_twice)}; all in flight at a crash: {paid_twice <= in_flight_any} "
            f"({len(in_flight_any)} calls were in flight at the {len(crashes_at)} crashes)",
        ),
        (
            "distinct calls completed, baseline / chaos",
            f"{len({e['call_id'] for e in base_log['entries'] if e['outcome'] == 'ok'})} / "
            f"{len(ok_per_call)}",
        ),
        ("wall time of the batch, baseline / chaos", f"{base_elapsed:.1f} s / {elapsed:.1f} s"),
        (
            "added latency per run, median / worst",
            f"{statistics.median(added):.1f} s / {max(added):.1f} s",
        ),
    ]
    report = table(rows)
    print(report)
    for record in records:
        for gap in gaps(record):
            say(f"{record.id}: {gap}")
    (OUT / "results.md").write_text(report + "\n")
    (OUT / "results.json").write_text(
        json.dumps(
            {
                "table": dict(rows),
                "kills": chaos.kills,
                "server_stops": chaos.server_stops,
                "paid_twice": sorted(paid_twice),
                "entries": entries,
            },
            indent=1,
        )
        + "\n"
    )
    success = (
        all(map(complete, records))
        and not made_again
        and paid_twice <= in_flight_any
        and len(chaos.kills) >= min(kills, 5)
    )
    return 0 if success else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    code = connection.run(main(args.runs, args.kills, args.seed))
    sys.stdout.flush()
    sys.stderr.flush()
    sys.exit(code)
