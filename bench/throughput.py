"""2. Throughput: deliberations completed per minute with 200 runs in flight.

Zero-latency models, one worker process, the embedded dev server. A closed loop keeps
200 runs in flight (each finished run is replaced at once); after a ramp-up, the figure
is the runs completed inside a measured window, per minute. Beside it, run the same way
for the same duration, three bare-Temporal baselines with the same graph
(bench.bare_workflow): the very calls of a deliberation made again (its prompts, with the
answers and critiques in them: what the protocol's texts cost without the deliberation
workflow around them), the worker's own model-call activity sent the question alone (what
calling models over HTTP costs), and no-op activities. Each runs on a dev server restarted
empty. One more run of each kind, alone after the window, is counted from its history:
what a deliberation writes there over the bare runs.

The CPU time each process spent inside the window is reported too, because all of them
share the machine: the simulator's work of serving every call counts against the runs
that call it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import statistics
import subprocess
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from temporalio.client import WorkflowHandle

from bench import profiling, report
from bench.pinning import Pinning
from bench.stack import (
    BenchStack,
    CpuMeter,
    HistoryCounts,
    WorkerProcess,
    council_plan,
    council_request,
    history_counts,
)
from council.calls import ModelCall
from workflows.calls import SANDBOXED as COUNCIL_SANDBOXED

MODELS = 4
ROUNDS = 2
IN_FLIGHT = 200
GOAL = 0.95  # of bare Temporal running the same graph with the model-call activity
GOAL_SAME = 0.85  # of bare Temporal making the very calls of a deliberation


@dataclass
class Sizes:
    in_flight: int
    settle: float  # after the ramp-up reaches in_flight, before the window
    window: float


FULL = Sizes(in_flight=IN_FLIGHT, settle=10.0, window=60.0)
QUICK = Sizes(in_flight=50, settle=3.0, window=15.0)
# The ramp-up starts this share of the lanes, then one more with every completed run.
FIRST_LANES = 0.1
# How many of the runs completed inside the window have their histories counted.
WINDOW_SAMPLE = 20


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
    counts: HistoryCounts | None = None  # of one run of the kind, alone after the window
    # Runs completed inside the window (the first WINDOW_SAMPLE), for their histories.
    finished: list[WorkflowHandle] = field(default_factory=list)
    # Their histories' counts, averaged: what a run writes under the window's load.
    window_counts: dict[str, float] | None = None
    # Model calls the simulator served inside the window (runs completed or not): the
    # worker's CPU per call does not depend on where the window cuts the runs.
    calls: int | None = None

    @property
    def per_minute(self) -> float:
        return self.completed / self.window * 60

    @property
    def calls_per_minute(self) -> float:
        """Model calls served in the window, per minute: every row makes the same calls a
        run, and unlike the runs completed, the count does not depend on where the window
        falls in the runs' waves."""
        return (self.calls or 0) / self.window * 60


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
    completions: list[tuple[float, float, WorkflowHandle]] = []
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
                completions.append((loop.time(), loop.time() - began, handle))
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
    inside = [
        (latency, handle) for at, latency, handle in completions if window[0] <= at < window[1]
    ]
    return LoopResult(
        completed=len(inside),
        window=meter.wall,
        ramp_up=ramp_up,
        started=counts["started"],
        failed=counts["failed"],
        latencies=[latency for latency, _ in inside],
        cpu=cpu,
        finished=[handle for _, handle in inside[:WINDOW_SAMPLE]],
    )


def _served(stack: BenchStack) -> int:
    """Model calls the simulator has served so far (its count, without its log entries)."""
    return int(stack.sim.log(since=2**62)["total"])


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

    served: list[int] = []

    def on_window() -> None:
        served.append(_served(stack))
        if profile_to is not None:
            spy[0] = _profile_start(worker, sizes.window, profile_to)

    try:
        result = await closed_loop(start, sizes, meter, on_window)
        result.calls = _served(stack) - served[0]
        result.window_counts = averaged(
            [await history_counts(handle) for handle in result.finished]
        )
        alone = await start()
        await alone.result()
        result.counts = await history_counts(alone)
    finally:
        result_peak = await asyncio.to_thread(worker.stop)
        if spy[0] is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                await asyncio.to_thread(spy[0].wait, 30)
    result.peak_rss_mb = result_peak
    return result


async def _recorded_calls(stack: BenchStack, request: dict) -> list[list[ModelCall]]:
    """The calls of one deliberation, stage by stage, for the same-calls baseline."""
    await stack.fresh_server()
    worker = await asyncio.to_thread(stack.start_council_worker)
    try:
        handle = await stack.start_council(worker.queue, request, prefix="recorded")
        await handle.result()
        return await stack.council_calls(handle.id)
    finally:
        await asyncio.to_thread(worker.stop)


# Every row's workflows in the sandbox with narrow pass-through (`python -m bench --sandbox`:
# service.worker.SANDBOX), not under the runner of production (workflows.calls.SANDBOXED).
SANDBOXED = False
# How many times each row is measured (`python -m bench --repeat N`): the tables show each
# row's median run, and the headlines the median of the ratios within each repetition.
REPEAT = 1


def _worker_ms(result: LoopResult) -> str:
    """The worker's CPU per completed run."""
    return _per(result.cpu.get("worker"), result.completed, 0)


def _worker_ms_per_call(result: LoopResult) -> str:
    """The worker's CPU per model call served in the window."""
    return _per(result.cpu.get("worker"), result.calls, 2)


def _per(seconds: float | None, count: int | None, digits: int) -> str:
    if seconds is None or not count:
        return "n/a"
    return f"{seconds / count * 1000:.{digits}f} ms"


def _median(runs: list[LoopResult]) -> LoopResult:
    """The run with the median throughput (of an even number, the lower of the middle two)."""
    ordered = sorted(runs, key=lambda result: result.per_minute)
    return ordered[(len(ordered) - 1) // 2]


def _median_ratio(
    turns: dict[str, list[LoopResult]], kind: str, baseline: str, by_calls: bool = False
) -> float | None:
    """The median over the repetitions of kind / baseline, each measured in the same one
    (None where either row was not measured): of the runs completed, or `by_calls`, of the
    model calls served."""
    if kind not in turns or baseline not in turns:
        return None
    ratios = [
        ratio
        for a, b in zip(turns[kind], turns[baseline], strict=True)
        if (ratio := _rate(a, b, by_calls)) is not None
    ]
    return statistics.median(ratios) if ratios else None


KINDS = ("bare", "calls", "same", "council")
# The rows measured (`python -m bench --only throughput --rows council,same`): Council's
# ratio to the same calls needs those two, the others add the question alone and no-ops.
ROWS: tuple[str, ...] = KINDS
NAMES = {
    "council": "Council on Temporal (worker.py: the deliberation workflow)",
    "same": "bare Temporal, the very calls of a deliberation made again (its prompts)",
    "calls": "bare Temporal, same graph, each activity the model-call activity "
    "(the question alone)",
    "bare": "bare Temporal, same graph of no-op activities",
}
SHORT = {
    "council": "Council",
    "same": "bare + the same calls",
    "calls": "bare + model calls",
    "bare": "bare (no-op)",
}


def rows(value: str) -> tuple[str, ...]:
    """`--rows`: a comma-separated choice of KINDS, measured in KINDS' order."""
    chosen = {name.strip() for name in value.split(",") if name.strip()}
    unknown = sorted(chosen - set(KINDS))
    if unknown or not chosen:
        raise ValueError(f"--rows must name some of {', '.join(KINDS)} (got {value!r})")
    return tuple(kind for kind in KINDS if kind in chosen)


def averaged(counts: list[HistoryCounts]) -> dict[str, float] | None:
    """Each count's mean over these histories (None without any)."""
    if not counts:
        return None
    return {
        name: statistics.fmean(getattr(each, name) for each in counts)
        for name in HistoryCounts.__dataclass_fields__
    }


def _history_table(results: dict[str, LoopResult], in_window: bool) -> report.Table:
    """What a run of each kind wrote to its history: the mean over the runs completed
    inside the window (`in_window`), or the one run alone after it."""
    table = report.Table(
        [
            "a run's history in the window (mean)" if in_window else "one run's history",
            *(["runs read"] if in_window else []),
            "events",
            "workflow tasks",
            "activities",
            "timers (fired)",
            "search-attribute updates",
            "markers",
            "payload bytes",
            "history bytes",
        ]
    )
    digits = 1 if in_window else 0
    for kind in ROWS[::-1]:
        result = results[kind]
        alone = [result.counts] if result.counts is not None else []
        counts = result.window_counts if in_window else averaged(alone)
        if counts is None:
            continue

        def shown(name: str, counts: dict[str, float] = counts) -> str:
            return f"{counts[name]:,.{digits}f}"

        table.add(
            SHORT[kind],
            *([len(result.finished)] if in_window else []),
            shown("events"),
            shown("workflow_tasks"),
            shown("activities"),
            f"{shown('timers')} ({shown('timers_fired')})",
            shown("search_attribute_updates"),
            shown("markers"),
            f"{counts['payload_bytes']:,.0f}",
            f"{counts['history_bytes']:,.0f}",
        )
    return table


def _rate(a: LoopResult | None, b: LoopResult | None, by_calls: bool = False) -> float | None:
    """a / b per minute (runs completed, or `by_calls` model calls served), where both were
    measured."""
    if a is None or b is None:
        return None
    if by_calls:
        return a.calls_per_minute / b.calls_per_minute if b.calls_per_minute else None
    return a.per_minute / b.per_minute if b.per_minute else None


def _turns_table(turns: dict[str, list[LoopResult]]) -> report.Table:
    table = report.Table(
        [
            "repetition",
            *(f"{SHORT[kind]} per minute" for kind in ROWS[::-1]),
            *(f"Council / {SHORT[kind]}" for kind in ("same", "calls") if kind in ROWS),
            *(["Council / the same calls, by calls served"] if "same" in ROWS else []),
            *(f"worker CPU per run, {SHORT[kind]}" for kind in ("council", "same") if kind in ROWS),
            *(
                f"worker CPU per call, {SHORT[kind]}"
                for kind in ("council", "same")
                if kind in ROWS
            ),
        ]
    )
    for turn in range(REPEAT):
        now = {kind: turns[kind][turn] for kind in ROWS}
        council = now.get("council")
        table.add(
            turn + 1,
            *(f"{now[kind].per_minute:,.0f}" for kind in ROWS[::-1]),
            *(
                report.ratio(_rate(council, now[kind]))
                for kind in ("same", "calls")
                if kind in ROWS
            ),
            *([report.ratio(_rate(council, now["same"], by_calls=True))] if "same" in ROWS else []),
            *(_worker_ms(now[kind]) for kind in ("council", "same") if kind in ROWS),
            *(_worker_ms_per_call(now[kind]) for kind in ("council", "same") if kind in ROWS),
        )
    return table


async def run(
    stack: BenchStack, quick: bool = False, profile: bool = False, pin: Pinning | None = None
) -> report.Section:
    sizes = QUICK if quick else FULL
    request = council_request(MODELS, ROUNDS)
    plan = council_plan(MODELS, ROUNDS)
    stack.sim.set_latency(0)
    recorded = await _recorded_calls(stack, request) if "same" in ROWS else []

    stamp = time.strftime("%Y%m%d-%H%M%S")
    profiles = {
        kind: stack.workdir.parent / f"profile-{kind}-worker-{stamp}.txt" if profile else None
        for kind in ROWS
    }
    turns: dict[str, list[LoopResult]] = {kind: [] for kind in ROWS}
    for turn in range(REPEAT):
        # Each repetition starts one row later, so no row is always measured first or last.
        for kind in ROWS[turn % len(ROWS) :] + ROWS[: turn % len(ROWS)]:
            # Each row on an empty server: the runs before it would otherwise have filled
            # the server's database, and the row measured last would pay for it.
            await stack.fresh_server()
            if kind == "council":
                worker = await asyncio.to_thread(stack.start_council_worker, None, SANDBOXED)
                start = functools.partial(stack.start_council, worker.queue, request, prefix="tput")
            elif kind == "same":
                worker = await asyncio.to_thread(stack.start_bare_worker, SANDBOXED)
                start = functools.partial(stack.start_same_calls, worker.queue, recorded)
            else:
                worker = await asyncio.to_thread(stack.start_bare_worker, SANDBOXED)
                members = request["models"] if kind == "calls" else None
                start = functools.partial(stack.start_bare, worker.queue, plan, 0.0, members)
            if pin is not None:
                pin.worker(worker.pid)
            spy = profiles[kind] if turn == 0 else None
            turns[kind].append(await _measure(stack, worker, start, sizes, spy))
    results = {kind: _median(runs) for kind, runs in turns.items()}
    council, same, calls, bare = (
        results.get(kind) for kind in ("council", "same", "calls", "bare")
    )

    table = report.Table(
        [
            "implementation",
            "completed per minute",
            "ratio to bare",
            "ratio to bare + model calls",
            "ratio to bare + the same calls",
            "completed in window",
            "model calls served per minute",
            "mean run latency",
            "failed",
            "worker peak RSS",
        ]
    )
    for kind in ROWS[::-1]:
        result = results[kind]
        mean_latency = sum(result.latencies) / len(result.latencies) if result.latencies else None
        table.add(
            NAMES[kind],
            f"{result.per_minute:,.0f}",
            report.ratio(_rate(result, bare)),
            report.ratio(_rate(result, calls)) if kind in ("council", "same") else "-",
            report.ratio(_rate(result, same)) if kind == "council" else "-",
            f"{result.completed} in {result.window:.0f} s",
            f"{result.calls_per_minute:,.0f}",
            report.seconds(mean_latency, 1),
            result.failed,
            report.megabytes(result.peak_rss_mb),
        )
    processes = list(results[ROWS[0]].cpu)
    cpu = report.Table(
        ["CPU time per completed run", *processes, "all", "worker, per model call in the window"]
    )
    for kind in ROWS[::-1]:
        result = results[kind]
        values = [result.cpu.get(name) for name in processes]
        known = [v for v in values if v is not None]
        done = result.completed
        cpu.add(
            SHORT[kind],
            *["n/a" if v is None or not done else f"{v / done * 1000:.0f} ms" for v in values],
            f"{sum(known) / done * 1000:.0f} ms" if done else "n/a",
            _worker_ms_per_call(result),
        )
    ramps = ", ".join(f"{kind} {results[kind].ramp_up:.0f} s" for kind in ROWS)
    way = pin.describe() if pin is not None else "not pinned: every process on every core"
    runner = (
        "every row's workflows in the sandbox, narrow pass-through (`--sandbox`)"
        if SANDBOXED
        else "every row's workflows under Council's runner "
        + ("(the sandbox)" if COUNCIL_SANDBOXED else "(outside the sandbox)")
    )
    notes = [
        f"{runner[0].upper()}{runner[1:]}: the Council row's worker is "
        + ("bench.bare_worker's, with Council's workflows." if SANDBOXED else "worker.py."),
        f"{way[0].upper()}{way[1:]}"
        + (
            " (`--pin`): the worker is the limit, as on a machine with many cores, and the "
            "ratios are its own cost per run."
            if pin is not None
            else "; on a machine with few cores the machine, not the worker, may be the limit "
            "(`--pin` makes the worker the limit)."
        ),
        f"{sizes.in_flight} runs in flight ({MODELS} models, {ROUNDS} rounds, "
        f"{sum(plan)} calls per run, zero model latency), closed loop: a ramp-up (a tenth "
        f"of the runs, then one more per completed run: {ramps}), {sizes.settle:.0f} s more, "
        f"then {sizes.window:.0f} s measured; runs in flight at the end are terminated, "
        "not counted.",
        "One worker process each, with the same worker options, one after the other, each "
        "on a dev server restarted empty, so that no row pays for the workflows of the rows "
        "before it" + ("." if ROWS == KINDS else f" (rows measured: {', '.join(ROWS)}: `--rows`)."),
        "Included in each figure: everything on the machine it took, since all processes "
        "share its cores. Council and the bare rows with model calls pay for the simulator "
        "serving every call over HTTP (its CPU time is in the second table) and for the "
        "worker's HTTP client. The same-calls row makes a recorded deliberation's calls "
        "again, stage by stage, with its prompts (the answers and critiques in them): "
        "Council's gap to it is the deliberation workflow's own cost (prompts built, "
        "reviews parsed, rules, state, progress, search attributes, the straggler rule's "
        "timers). The question-alone row's gap to it is what the protocol's longer texts "
        "cost the worker, the server and the simulator.",
        f"The history tables: the first {WINDOW_SAMPLE} runs of each kind completed inside "
        "the window (their means: what a run writes under the window's load, timers and "
        "straggler watches included), and one more run of each kind, alone after the window.",
    ]
    if profile:
        notes.append(
            "profiled with py-spy during the window (so these figures are lower than "
            "unprofiled ones): "
            + "; ".join(
                f"{kind}: {profiling.summary_note(path)}" for kind, path in profiles.items() if path
            )
        )
    ratio = _median_ratio(turns, "council", "calls")
    own = _median_ratio(turns, "council", "same")
    own_calls = _median_ratio(turns, "council", "same", by_calls=True)
    tables = [table, cpu, _history_table(results, in_window=True), _history_table(results, False)]
    if REPEAT > 1:
        tables.append(_turns_table(turns))
        notes.append(
            f"Each row measured {REPEAT} times, the rows in turn (each repetition starting "
            "one row later); the first two tables show each row's median run, the headlines "
            "the median of the ratios within each repetition (the last table)."
        )
    headlines = []
    if council is not None and calls is not None:
        headlines.append(
            report.Headline(
                "throughput: Council / bare Temporal with the model-call activity",
                ratio,
                f">= {GOAL}",
                None if ratio is None else ratio >= GOAL,
                f"{way}; {council.per_minute:,.0f} vs {calls.per_minute:,.0f} per minute"
                + (
                    f" (bare with no-op activities {bare.per_minute:,.0f}: Council is "
                    f"{report.ratio(_rate(council, bare))} of it)"
                    if bare is not None
                    else ""
                )
                + f"; worker peak RSS {report.megabytes(council.peak_rss_mb)}",
            )
        )
    if council is not None and same is not None:
        headlines.append(
            report.Headline(
                "throughput: Council / bare Temporal making the same calls",
                own,
                f">= {GOAL_SAME}",
                None if own is None else own >= GOAL_SAME,
                f"{way}; {runner}; {council.per_minute:,.0f} vs {same.per_minute:,.0f} per "
                "minute: the "
                "deliberation workflow's own cost at scale; worker CPU per run "
                f"{_worker_ms(council)} vs {_worker_ms(same)}, per model call "
                f"{_worker_ms_per_call(council)} vs {_worker_ms_per_call(same)}",
            )
        )
        headlines.append(
            report.Headline(
                "throughput by the calls served in the window: Council / bare Temporal "
                "making the same calls",
                own_calls,
                f">= {GOAL_SAME}",
                None if own_calls is None else own_calls >= GOAL_SAME,
                f"{way}; {council.calls_per_minute:,.0f} vs {same.calls_per_minute:,.0f} model "
                f"calls a minute ({sum(plan)} a run in both): the same work, counted where "
                "the window's edges cut no run",
            )
        )
    return report.Section(
        f"2. Throughput: {sizes.in_flight} runs in flight, zero-latency models, one worker "
        f"({'pinned' if pin is not None else 'not pinned'}"
        f"{', in the sandbox' if SANDBOXED else ''})",
        tables,
        notes,
        headlines,
    )
