"""The benchmarks' own pieces (bench/): the no-durability baseline runs the same protocol
as the workflow, the closed loop keeps its runs in flight, profiles are read right.
The benchmarks themselves run with `make bench`, not here."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench import throughput
from bench.pinning import Pinning, PinningError, affinity
from bench.plain_asyncio import PlainCouncil
from bench.profiling import read_profile
from bench.run import parse_args
from bench.scale import limit
from bench.stack import (
    CpuMeter,
    council_plan,
    council_request,
    history_counts,
    history_timing,
    stages_of,
)
from bench.throughput import LoopResult, Sizes, _median, _median_ratio, closed_loop
from simulator import SimulatorServer
from tests.temporal_fixtures import Council


async def test_the_asyncio_baseline_makes_the_workflows_calls(
    council: Council, sim: SimulatorServer
) -> None:
    request = council_request(4, 2)
    record = await council.run(
        **{key: value for key, value in request.items() if key != "question"},
        question=request["question"],
    )
    by_workflow = sim.log()["counts"]
    sim.reset()
    plain = PlainCouncil(sim.url)
    try:
        result = await plain.deliberate(request)
    finally:
        await plain.aclose()
    assert sim.log()["counts"] == by_workflow
    assert result.calls == record.usage.calls == sum(council_plan(4, 2)) == 25
    assert result.rounds == len(record.rounds) == 2
    assert result.terminated_reason == record.iteration.terminated_reason
    assert stages_of(2) == len(council_plan(4, 2)) == 7


async def test_history_timing_reads_every_workflow_task_of_a_run(council: Council) -> None:
    handle = await council.start(max_rounds=1)
    record = await handle.result()
    timing = await history_timing(handle)
    history = await handle.fetch_history()
    completed = [
        e for e in history.events if e.HasField("workflow_task_completed_event_attributes")
    ]
    assert len(timing.task_ms) == len(completed) >= len(council_plan(len(record.models), 1))
    assert all(0 < ms < 5000 for ms in timing.task_ms)
    assert 0 < timing.span <= (record.completed_at - record.started_at).total_seconds() + 1


async def test_history_counts_read_what_a_run_wrote(council: Council) -> None:
    handle = await council.start(max_rounds=1, quality_threshold=5, stop_on_convergence=False)
    record = await handle.result()
    counts = await history_counts(handle)
    events = (await handle.fetch_history()).events
    assert counts.events == len(events)
    assert counts.activities == record.usage.calls == 4 + 4 + 4 + 4 + 1
    assert counts.workflow_tasks == len((await history_timing(handle)).task_ms)
    # Started without its first place: the run sets it, and its end, itself.
    assert counts.search_attribute_updates >= 2
    assert counts.markers >= 1  # which providers have a rate limit: asked once per run
    assert 0 < counts.payload_bytes < counts.history_bytes == sum(e.ByteSize() for e in events)


def _loop(per_minute: float) -> LoopResult:
    return LoopResult(completed=int(per_minute), window=60, ramp_up=1, started=0, failed=0)


@pytest.mark.fast
def test_repetitions_report_medians_and_ratios_within_each_repetition() -> None:
    turns = {
        "council": [_loop(90), _loop(200), _loop(80)],
        "same": [_loop(100), _loop(400), _loop(100)],
    }
    assert _median(turns["council"]).completed == 90
    assert _median([_loop(1), _loop(3), _loop(2), _loop(4)]).completed == 2
    # 0.9, 0.5 and 0.8 within the repetitions: not 90 / 100 of the medians.
    assert _median_ratio(turns, "council", "same") == 0.8


@pytest.mark.fast
def test_repeat_takes_1_to_20(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(throughput, "REPEAT", throughput.REPEAT)  # put back after the test
    with pytest.raises(SystemExit):
        parse_args(["--repeat", "0"])
    assert parse_args(["--repeat", "3", "--only", "throughput"]).repeat == 3
    assert throughput.REPEAT == 3


class _Run:
    def __init__(self, seconds: float) -> None:
        self.seconds = seconds

    async def result(self) -> None:
        await asyncio.sleep(self.seconds)

    async def terminate(self, reason: str) -> None:
        pass


@pytest.mark.fast
async def test_the_closed_loop_ramps_up_and_counts_inside_the_window() -> None:
    started: list[float] = []

    async def start() -> _Run:
        started.append(asyncio.get_running_loop().time())
        return _Run(0.05)

    result = await closed_loop(start, Sizes(in_flight=10, settle=0.1, window=0.5), CpuMeter({}))
    # 10 runs of 50 ms in flight for 0.5 s: about 100 complete inside the window.
    assert 50 <= result.completed <= 110
    assert result.failed == 0 and result.started >= result.completed
    assert result.cpu["bench driver"] is not None


@pytest.mark.fast
def test_a_py_spy_profile_is_read_by_function(tmp_path: Path) -> None:
    raw = tmp_path / "profile.txt"
    raw.write_text(
        "run (worker.py:1);call_model (activities/model_call.py:100);"
        "stream (httpx/_client.py:5) 30\n"
        "run (worker.py:1);activate (temporalio/worker/_workflow.py:9);"
        "parse_review (council/reviews.py:426);_clean (council/reviews.py:155) 10\n"
        "run (worker.py:1);select (selectors.py:1) 60\n"
    )
    total, own, self_samples, packages = read_profile(raw)
    assert total == 100
    assert own["call_model (activities/model_call.py)"] == 30
    assert own["parse_review (council/reviews.py)"] == 10
    assert self_samples["select (selectors.py)"] == 60
    assert packages["httpx"] == 30 and packages["council"] == 10


@pytest.mark.fast
def test_the_scale_benchmark_names_the_process_that_saturates() -> None:
    def cpu(window: float, **cores: float) -> dict[str, float | None]:
        names = {"worker_1": "worker 1", "worker_2": "worker 2", "server": "temporal server"}
        return {names.get(name, name): busy * window for name, busy in cores.items()}

    # A worker process at one core on a large machine: the worker is the limit.
    found = limit(cpu(30, worker_1=0.96, server=0.4, simulator=0.2, machine=1.6), 30, 16)
    assert found == "worker 1: 96% of one core (a Python process uses one)"
    # All cores busy, some of it other load: the machine is the limit.
    found = limit(cpu(30, worker_1=0.5, worker_2=0.5, server=0.3, machine=1.9), 30, 2)
    assert found == (
        "the machine: 95% of its 2 cores busy (this benchmark's processes 1.30 cores, "
        "most worker 1 0.50, other load 0.60)"
    )
    found = limit(cpu(30, worker_1=0.3, server=0.5, simulator=0.1, machine=0.9), 30, 16)
    assert found == "none saturated (6% of the machine busy; most: temporal server, 0.50 cores)"


@pytest.mark.fast
def test_rows_pin_and_sandbox_are_checked_before_anything_starts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(throughput, "ROWS", throughput.ROWS)  # put back after the test
    parse_args(["--only", "throughput", "--rows", "same, council"])
    assert throughput.ROWS == ("same", "council")  # measured in the table's order
    with pytest.raises(ValueError, match="--rows must name some of bare, calls, same, council"):
        throughput.rows("council,fast")
    with pytest.raises(SystemExit):
        parse_args(["--only", "throughput", "--rows", ""])
    with pytest.raises(SystemExit):
        parse_args(["--pin"])  # throughput only
    assert parse_args(["--pin", "--only", "throughput"]).pin
    monkeypatch.setattr(throughput, "SANDBOXED", False)
    with pytest.raises(SystemExit):
        parse_args(["--sandbox"])
    assert parse_args(["--sandbox", "--only", "throughput"]).sandbox and throughput.SANDBOXED


def test_pinning_moves_every_thread_of_a_worker_and_its_children() -> None:
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("pinning needs two cores")
    with pytest.raises(PinningError, match="more cores than worker processes"):
        Pinning.split(worker_cores=len(cores))
    pinning = Pinning.split(worker_cores=1)
    assert pinning.workers == {cores[0]} and pinning.rest == set(cores[1:])
    assert pinning.describe().startswith(f"pinned: the worker on CPU {cores[0]}, ")
    # A process with threads of its own that starts a child once it has been pinned
    # counts as pinned only when all of them are on the worker's core.
    script = (
        "import subprocess, sys, threading, time\n"
        "stop = threading.Event()\n"
        "threads = [threading.Thread(target=stop.wait) for _ in range(3)]\n"
        "[t.start() for t in threads]\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(child.pid, flush=True)\n"
        "sys.stdin.read()\n"
        "child.kill(); stop.set()\n"
    )
    worker = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert worker.stdout is not None
        child = int(worker.stdout.readline())
        before = affinity(worker.pid)
        assert len(before) >= 4 and all(cpus == set(cores) for cpus in before.values())
        pinning.worker(worker.pid)
        for pid in (worker.pid, child):
            assert set(affinity(pid).values()) == {pinning.workers}
    finally:
        worker.communicate("")
