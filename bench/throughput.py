"""2. Throughput: deliberations completed per minute with 200 runs in flight.

Zero-latency models, one worker process, the embedded dev server. A closed loop keeps
200 runs in flight (each finished run is replaced at once); after a ramp-up, the figure
is the runs completed inside a measured window, per minute. Beside it, run the same way
for the same duration, two bare-Temporal baselines with the same graph
(bench.bare_workflow): the worker's own model-call activity sent the question alone (the
goal's reference: what calling models over HTTP costs without the deliberation workflow
around it), and no-op activities. Each of the three runs on a dev server restarted empty.

The CPU time each process spent inside the window is reported too, because all of them
share the machine: the simulator's work of serving every call counts against the runs
that call it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import WorkflowHandle

from bench import profiling, report
from bench.stack import BenchStack, CpuMeter, WorkerProcess, council_plan, council_request

MODELS = 4
ROUNDS = 2
IN_FLIGHT = 200
GOAL = 0.95  # of bare Temporal running the same graph with the model-call activity


@dataclass
class Sizes:
    in_flight: int
    settle: float  # after the ramp-up reaches in_flight, before the window
    window: float


FULL = Sizes(in_flight=IN_FLIGHT, settle=10.0, window=60.0)
QUICK = Sizes(in_flight=50, settle=3.0, window=15.0)
# The ramp-up starts this share of the lanes, then one more with every completed run.
FIRST_LANES = 0.1


@dataclass
class LoopResult:
    completed: int  # inside the window
    window: float
    ramp_up: float
    started: int
    failed: int
    latencies: list[float] = field(default_factory=list)  # of the runs completed in the window
    cpu: dict[str, float | None] = field(default_factory=dict)
    peak_rss_mb: float | None = None

    @property
    def per_minute(self) -> float:
        return self.completed / self.window * 60


async def closed_loop(
    start: Callable[[], Awaitable[WorkflowHandle]],
    sizes: Sizes,
    meter: CpuMeter,
    on_window: Callable[[], None] | None = None,
) -> LoopResult:
    """Keep `in_flight` runs going; count the ones that complete inside the window.

    Runs that start together move through the queues together and finish together, in
    waves that would make the count depend on where the window falls. So the ramp-up
    starts a tenth of the lanes and adds one with every completed run: the start times
    spread over about one run's latency, at the system's own pace, and completions
    arrive evenly once all lanes run.
    """
    loop = asyncio.get_running_loop()
    t0 = loop.time()
    window: list[float] = []  # [start, end] once the ramp-up is over
    completions: list[tuple[float, float]] = []
    running: set[WorkflowHandle] = set()
    lanes: list[asyncio.Task] = []
    counts = {"started": 0, "failed": 0}
    full = asyncio.Event()

    def add_lane() -> None:
        if len(lanes) < sizes.in_flight:
            lanes.append(asyncio.create_task(lane()))
        if len(lanes) >= sizes.in_flight:
            full.set()

    async def lane() -> None:
        while not window or loop.time() < window[1]:
            began = loop.time()
            handle = await start()
            counts["started"] += 1
            running.add(handle)
            try:
                await handle.result()
            except Exception:
                counts["failed"] += 1
            else:
                completions.append((loop.time(), loop.time() - began))
                add_lane()
            finally:
                running.discard(handle)

    for _ in range(max(1, int(sizes.in_flight * FIRST_LANES))):
        add_lane()
        await asyncio.sleep(0.05)
    await full.wait()
    ramp_up = loop.time() - t0
    await asyncio.sleep(sizes.settle)
    window += [loop.time(), loop.time() + sizes.window]
    meter.start()
    if on_window is not None:
        on_window()
    await asyncio.sleep(max(0.0, window[1] - loop.time()))
    cpu = meter.stop()
    for task in lanes:
        task.cancel()
    await asyncio.gather(*lanes, return_exceptions=True)
    await asyncio.gather(
        *(handle.terminate("benchmark window over") for handle in list(running)),
        return_exceptions=True,
    )
    inside = [latency for at, latency in completions if window[0] <= at < window[1]]
    return LoopResult(
        completed=len(inside),
        window=meter.wall,
        ramp_up=ramp_up,
        started=counts["started"],
        failed=counts["failed"],
        latencies=inside,
        cpu=cpu,
    )


def _profile_start(worker: WorkerProcess, seconds: float, out: Path) -> subprocess.Popen | None:
    py_spy = shutil.which("py-spy") or str(Path(__import__("sys").executable).parent / "py-spy")
    if not Path(py_spy).exists():
        print("bench: --profile needs py-spy (pip install py-spy); not profiling", flush=True)
        return None
    return subprocess.Popen(
        [
            py_spy,
            "record",
            "--pid",
            str(worker.pid),
            "--duration",
            str(int(seconds)),
            "--rate",
            "50",
            "--format",
            "raw",
            "--output",
            str(out),
            "--nonblocking",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _measure(
    stack: BenchStack,
    worker: WorkerProcess,
    start: Callable[[], Awaitable[WorkflowHandle]],
    sizes: Sizes,
    profile_to: Path | None = None,
) -> LoopResult:
    meter = CpuMeter({"worker": worker.pid, **stack.server_pids()})
    spy: list[subprocess.Popen | None] = [None]

    def on_window() -> None:
        if profile_to is not None:
            spy[0] = _profile_start(worker, sizes.window, profile_to)

    try:
        result = await closed_loop(start, sizes, meter, on_window)
    finally:
        result_peak = await asyncio.to_thread(worker.stop)
        if spy[0] is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(spy[0].wait, 30)
    result.peak_rss_mb = result_peak
    return result


async def run(stack: BenchStack, quick: bool = False, profile: bool = False) -> report.Section:
    sizes = QUICK if quick else FULL
    request = council_request(MODELS, ROUNDS)
    plan = council_plan(MODELS, ROUNDS)
    stack.sim.set_latency(0)

    stamp = time.strftime("%Y%m%d-%H%M%S")
    kinds = ("bare", "calls", "council")
    profiles = {
        kind: stack.workdir.parent / f"profile-{kind}-worker-{stamp}.txt" if profile else None
        for kind in kinds
    }
    results: dict[str, LoopResult] = {}
    for kind in kinds:
        # Each row on an empty server: the runs before it would otherwise have filled the
        # server's database, and the row measured last would pay for it.
        await stack.fresh_server()
        if kind == "council":
            worker = await asyncio.to_thread(stack.start_council_worker)
            start = functools.partial(stack.start_council, worker.queue, request, prefix="tput")
        else:
            worker = await asyncio.to_thread(stack.start_bare_worker)
            members = request["models"] if kind == "calls" else None
            start = functools.partial(stack.start_bare, worker.queue, plan, 0.0, members)
        results[kind] = await _measure(stack, worker, start, sizes, profiles[kind])
    council, calls, bare = results["council"], results["calls"], results["bare"]

    def per(result: LoopResult, baseline: LoopResult) -> float | None:
        return result.per_minute / baseline.per_minute if baseline.per_minute else None

    names = {
        "council": "Council on Temporal (worker.py: the deliberation workflow)",
        "calls": "bare Temporal, same graph, each activity the model-call activity "
        "(the question alone)",
        "bare": "bare Temporal, same graph of no-op activities",
    }
    short = {"council": "Council", "calls": "bare + model calls", "bare": "bare (no-op)"}
    table = report.Table(
        [
            "implementation",
            "completed per minute",
            "ratio to bare",
            "ratio to bare + model calls",
            "completed in window",
            "mean run latency",
            "failed",
            "worker peak RSS",
        ]
    )
    for kind in kinds[::-1]:
        result = results[kind]
        mean_latency = sum(result.latencies) / len(result.latencies) if result.latencies else None
        table.add(
            names[kind],
            f"{result.per_minute:,.0f}",
            report.ratio(per(result, bare)),
            report.ratio(per(result, calls)) if kind != "bare" else "-",
            f"{result.completed} in {result.window:.0f} s",
            report.seconds(mean_latency, 1),
            result.failed,
            report.megabytes(result.peak_rss_mb),
        )
    processes = list(council.cpu)
    cpu = report.Table(["CPU time per completed run", *processes, "all"])
    for kind in kinds[::-1]:
        result = results[kind]
        values = [result.cpu.get(name) for name in processes]
        known = [v for v in values if v is not None]
        done = result.completed
        cpu.add(
            short[kind],
            *["n/a" if v is None or not done else f"{v / done * 1000:.0f} ms" for v in values],
            f"{sum(known) / done * 1000:.0f} ms" if done else "n/a",
        )
    ramps = ", ".join(f"{kind} {results[kind].ramp_up:.0f} s" for kind in kinds)
    notes = [
        f"{sizes.in_flight} runs in flight ({MODELS} models, {ROUNDS} rounds, "
        f"{sum(plan)} calls per run, zero model latency), closed loop: a ramp-up (a tenth "
        f"of the runs, then one more per completed run: {ramps}), {sizes.settle:.0f} s more, "
        f"then {sizes.window:.0f} s measured; runs in flight at the end are terminated, "
        "not counted.",
        "One worker process each, with the same worker options, one after the other "
        "(no-op baseline first), each on a dev server restarted empty, so that no row "
        "pays for the workflows of the rows before it.",
        "Included in each figure: everything on the machine it took, since all processes "
        "share its cores. Council and the middle row pay for the simulator serving every "
        "call over HTTP (its CPU time is in the second table) and for the worker's HTTP "
        "client; the middle row has the same activities and graph as Council without the "
        "deliberation workflow (its prompts, parsing, state, progress and search attributes), "
        "so the gap between the two is the protocol's own cost, the larger prompts and "
        "replies that carry the answers and critiques included.",
    ]
    if profile:
        notes.append(
            "profiled with py-spy during the window (so these figures are lower than "
            "unprofiled ones): "
            + "; ".join(
                f"{kind}: {profiling.summary_note(path)}" for kind, path in profiles.items() if path
            )
        )
    ratio = per(council, calls)
    return report.Section(
        f"2. Throughput: {sizes.in_flight} runs in flight, zero-latency models, one worker",
        [table, cpu],
        notes,
        [
            report.Headline(
                "throughput: Council / bare Temporal with the model-call activity",
                ratio,
                f">= {GOAL}",
                None if ratio is None else ratio >= GOAL,
                f"{council.per_minute:,.0f} vs {calls.per_minute:,.0f} per minute "
                f"(bare with no-op activities {bare.per_minute:,.0f}: Council is "
                f"{report.ratio(per(council, bare))} of it); "
                f"worker peak RSS {report.megabytes(council.peak_rss_mb)}",
            )
        ],
    )
