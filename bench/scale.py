"""Scale: deliberations per minute with 1, 2, 4 and 8 worker processes on one machine.

`worker.py --processes N`, as a user runs it (N = 1 is the plain single worker), zero-latency
models, 200 runs in flight in the throughput benchmark's closed loop (bench.throughput),
each row on a dev server restarted empty. The CPU time of every process inside the window
(the dev server, the simulator, each worker process, the supervisor, the driver) says
where the limit is: a Python process (a worker, the simulator) can keep one core busy and
no more, the Temporal server several, and all of them share the machine's cores.
"""

from __future__ import annotations

import asyncio
import functools
import os

from bench import report
from bench.stack import BenchStack, CpuMeter, council_plan, council_request
from bench.throughput import FULL, LoopResult, Sizes, closed_loop
from harness.processes import worker_processes
from service.supervisor import available_cores

MODELS = 4
ROUNDS = 2
PROCESSES = (1, 2, 4, 8)
# Longer than the throughput benchmark's quick window: a run takes about as long as its
# 15 s, so the count would depend on where the window falls.
QUICK = Sizes(in_flight=50, settle=5.0, window=30.0)
# A process this busy (of one core, or of the machine) counts as the limit.
SATURATED = 0.9
SERVER, SIMULATOR, SUPERVISOR = "temporal server", "simulator", "supervisor"
MACHINE = "machine"  # every process on it, this benchmark's and any other load


def machine_cpu_seconds() -> float | None:
    """CPU time the whole machine has spent busy since boot, all cores (/proc/stat)."""
    try:
        with open("/proc/stat") as stat:
            fields = stat.readline().split()
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = map(int, fields[1:9])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class MachineMeter(CpuMeter):
    """CpuMeter, plus the whole machine's busy time (MACHINE) over the same window."""

    def _read(self) -> dict[str, float | None]:
        return {**super()._read(), MACHINE: machine_cpu_seconds()}


def _ours(cpu: dict[str, float | None]) -> dict[str, float]:
    return {name: s for name, s in cpu.items() if name != MACHINE and s is not None}


def _workers(cpu: dict[str, float | None]) -> dict[str, float]:
    return {name: s for name, s in cpu.items() if name.startswith("worker ") and s is not None}


def limit(cpu: dict[str, float | None], window: float, cores: int) -> str:
    """Which process saturates, from the CPU seconds each spent in a window of `window` s
    (and the whole machine's, MACHINE, where known)."""
    busy = {name: s / window for name, s in _ours(cpu).items()}
    ours = sum(busy.values())
    machine = cpu.get(MACHINE)
    whole = max(ours, machine / window if machine is not None else 0.0)
    largest = max(busy, key=lambda n: busy[n])
    if whole >= SATURATED * cores:
        other = f", other load {whole - ours:.2f}" if whole - ours >= 0.05 else ""
        return (
            f"the machine: {whole / cores:.0%} of its {cores} cores busy (this benchmark's "
            f"processes {ours:.2f} cores, most {largest} {busy[largest]:.2f}{other})"
        )
    # Python processes: one core each at most.
    single = {**_workers(busy), SIMULATOR: busy.get(SIMULATOR, 0.0)}
    name = max(single, key=lambda n: single[n])
    if single[name] >= SATURATED:
        return f"{name}: {single[name]:.0%} of one core (a Python process uses one)"
    return (
        f"none saturated ({whole / cores:.0%} of the machine busy; most: {largest}, "
        f"{busy[largest]:.2f} cores)"
    )


async def run(stack: BenchStack, quick: bool = False) -> report.Section:
    sizes = QUICK if quick else FULL
    request = council_request(MODELS, ROUNDS)
    plan = council_plan(MODELS, ROUNDS)
    stack.sim.set_latency(0)
    cores = available_cores()
    results: dict[int, LoopResult] = {}
    for count in PROCESSES:
        await stack.fresh_server()
        worker = await asyncio.to_thread(stack.start_worker, None, None, count)
        children = worker_processes(worker.process.log_text()) if count > 1 else {1: worker.pid}
        pids = {f"worker {index}": pid for index, pid in sorted(children.items())}
        if count > 1:
            pids[SUPERVISOR] = worker.pid
        meter = MachineMeter({**pids, **stack.server_pids()})
        start = functools.partial(stack.start_council, worker.queue, request, prefix="scale")
        try:
            results[count] = await closed_loop(start, sizes, meter)
        finally:
            await asyncio.to_thread(worker.stop)

    one = results[PROCESSES[0]].per_minute
    throughput = report.Table(
        [
            "worker processes",
            "completed per minute",
            "ratio to one process",
            "completed in window",
            "mean run latency",
            "failed",
        ]
    )
    cpu = report.Table(
        [
            "CPU time per completed run",
            "worker processes (all)",
            SUPERVISOR,
            SERVER,
            SIMULATOR,
            "bench driver",
            "all",
        ]
    )
    busy = report.Table(
        [
            "cores busy in the window",
            "each worker process",
            SERVER,
            SIMULATOR,
            "all of these",
            "the machine (any load)",
            "the limit",
        ]
    )
    for count, result in results.items():
        latency = sum(result.latencies) / len(result.latencies) if result.latencies else None
        throughput.add(
            count,
            f"{result.per_minute:,.0f}",
            report.ratio(result.per_minute / one if one else None, 2),
            f"{result.completed} in {result.window:.0f} s",
            report.seconds(latency, 1),
            result.failed,
        )
        done = result.completed
        workers = _workers(result.cpu)

        def per_run(seconds: float | None, done: int = done) -> str:
            return "-" if seconds is None or not done else f"{seconds / done * 1000:.0f} ms"

        known = list(_ours(result.cpu).values())
        cpu.add(
            count,
            per_run(sum(workers.values())),
            per_run(result.cpu.get(SUPERVISOR)),
            per_run(result.cpu.get(SERVER)),
            per_run(result.cpu.get(SIMULATOR)),
            per_run(result.cpu.get("bench driver")),
            per_run(sum(known)),
        )
        window = result.window

        def cores_of(seconds: float | None, window: float = window) -> str:
            return "n/a" if seconds is None else f"{seconds / window:.2f}"

        busy.add(
            count,
            ", ".join(cores_of(s) for s in workers.values()) or "n/a",
            cores_of(result.cpu.get(SERVER)),
            cores_of(result.cpu.get(SIMULATOR)),
            f"{sum(known) / window:.2f}",
            f"{cores_of(result.cpu.get(MACHINE))} of {cores}",
            limit(result.cpu, window, cores),
        )
    most = PROCESSES[-1]
    ratio = results[most].per_minute / one if one else None
    notes = [
        f"{sizes.in_flight} runs in flight ({MODELS} models, {ROUNDS} rounds, {sum(plan)} "
        "calls per run, zero model latency) in the throughput benchmark's closed loop: "
        f"a ramp-up ({', '.join(f'{n}: {r.ramp_up:.0f} s' for n, r in results.items())}), "
        f"{sizes.settle:.0f} s more, then {sizes.window:.0f} s measured.",
        "Each row: `python worker.py --processes N` (N = 1: the single worker, no "
        "supervisor) on a dev server restarted empty (SQLite "
        f"{'in a file' if stack.db_file else 'in memory'}), the simulator as its own "
        "process; all of them share this machine's cores.",
        "Cores busy = CPU seconds in the window / the window's length; the machine's "
        "column counts every process on it (/proc/stat), any other load included. A Python "
        f"process (a worker, the simulator) is the limit at {SATURATED:.0%} of one core; the "
        f"machine is the limit at {SATURATED:.0%} of all its cores, where every process "
        "competes for them.",
        f"Which process saturates with {most} worker processes: "
        f"{limit(results[most].cpu, results[most].window, cores)}.",
    ]
    return report.Section(
        f"Scale: worker processes on one machine, {sizes.in_flight} runs in flight",
        [throughput, cpu, busy],
        notes,
        [
            report.Headline(
                f"scale: deliberations per minute, {most} worker processes / 1",
                ratio,
                "none (measured)",
                None,
                f"{results[most].per_minute:,.0f} vs {one:,.0f} per minute on {cores} cores; "
                f"the limit: {limit(results[most].cpu, results[most].window, cores)}",
            )
        ],
    )
