"""What every benchmark runs on: the harness's stack (harness.stack), the requests and
graphs they measure, and CPU accounting.

- the embedded Temporal dev server (headless, a free port, SQLite in memory, or with
  --sqlite-file in a file in the scratch folder as `make demo` keeps it: on a slow disk
  the file makes the server, not the workers, the limit);
- the simulator as its own process, whose latency the benchmarks set through its fault
  config and whose request log counts the calls;
- workers as subprocesses: `python worker.py` for the council, `python -m
  bench.bare_worker` for the bare-Temporal baseline (and for the council in the sandbox),
  so that each one's CPU time and peak memory can be read off its own process.

CPU time and peak RSS come from /proc (Linux); elsewhere they are reported as n/a.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from collections.abc import Awaitable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle

from app.store import store
from bench.bare_workflow import BareGraph, SameCalls
from council.calls import ModelCall
from harness.processes import cpu_seconds
from harness.stack import SIMULATOR_API_KEY, Stack, WorkerProcess
from simulator.personas import DEFAULT_MODELS
from workflows.calls import scheduled_call

QUESTION = "How should a small team choose between SQLite and PostgreSQL for a new web service?"
BENCH_API_KEY = SIMULATOR_API_KEY
# The simulated personas, then names that map onto them by hash; every council ends with
# sim/mule, which never takes up a critique: its answer stays weak, the quality threshold
# is never met, and every run goes the number of rounds it is given.
MEMBERS = DEFAULT_MODELS + ["sim/echo", "sim/fable", "sim/gale", "sim/halo", "sim/iris"]
STUBBORN = "sim/mule"


def models(count: int) -> list[str]:
    return MEMBERS[: count - 1] + [STUBBORN]


def council_request(
    model_count: int = 4, rounds: int = 2, question: str = QUESTION
) -> dict[str, Any]:
    """A request that runs exactly `rounds` refinement rounds: no early stop of any kind
    (the threshold of 5 is never met while sim/mule is in the council)."""
    return {
        "question": question,
        "models": models(model_count),
        "max_rounds": rounds,
        "quality_threshold": 5,
        "stop_on_convergence": False,
        "token_budget": 100_000_000,
    }


def stages_of(rounds: int) -> int:
    """Sequential stages: stage 1, review, (refine, review) per round, synthesis."""
    return 2 + 2 * rounds + 1


class CpuMeter:
    """CPU seconds spent by each named process (and this one) between start() and stop()."""

    def __init__(self, pids: dict[str, int]) -> None:
        self.pids = pids
        self._start: dict[str, float | None] = {}
        self.seconds: dict[str, float | None] = {}
        self.wall = 0.0

    def _read(self) -> dict[str, float | None]:
        now = {name: cpu_seconds(pid) for name, pid in self.pids.items()}
        now["bench driver"] = time.process_time()
        return now

    def start(self) -> None:
        self._start = self._read()
        self._t0 = time.monotonic()

    def stop(self) -> dict[str, float | None]:
        end = self._read()
        self.wall = time.monotonic() - self._t0
        self.seconds = {
            name: (end[name] - begin) if begin is not None and end[name] is not None else None
            for name, begin in self._start.items()
        }
        return self.seconds


class BenchStack(Stack):
    """The harness's stack, plus the bare-Temporal baseline's worker and runs."""

    def start_council_worker(
        self, queue: str | None = None, sandboxed: bool = False
    ) -> WorkerProcess:
        """`python worker.py`, the worker a user runs, on its own task queue; `sandboxed`:
        the bare worker, its workflows in the sandbox (service.worker.SANDBOX)."""
        if sandboxed:
            return self.start_bare_worker(sandboxed, queue)
        return self.start_worker(queue)

    async def fresh_server(self) -> None:
        """Restart the dev server empty, on the same port: no earlier run's workflows in
        its database to slow the next measurement down."""
        self.stop_server()
        if self.db_file is not None:
            self.db_file.unlink(missing_ok=True)
        await asyncio.to_thread(self.start_server)
        self.client = await self.connect()

    def start_bare_worker(self, sandboxed: bool = False, queue: str | None = None) -> WorkerProcess:
        """The bare-Temporal baseline's worker: same options, the bare graph; `sandboxed`:
        in the sandbox (service.worker.SANDBOX)."""
        runner = {"BENCH_RUNNER": "sandbox"} if sandboxed else {}
        return self.start_worker(queue, module="bench.bare_worker", **runner)

    async def start_bare(
        self, queue: str, plan: list[int], latency: float = 0.0, models: list[str] | None = None
    ) -> WorkflowHandle:
        """The bare graph: no-op activities, or the model-call activity when models are given."""
        assert self.client is not None
        return await self.client.start_workflow(
            BareGraph.run,
            args=[plan, latency, models, QUESTION],
            id=f"bare-{uuid.uuid4().hex[:12]}",
            task_queue=queue,
        )

    async def run_bare(
        self, queue: str, plan: list[int], latency: float = 0.0
    ) -> tuple[WorkflowHandle, float]:
        return await _to_the_end(self.start_bare(queue, plan, latency))

    async def start_same_calls(self, queue: str, stages: list[list[ModelCall]]) -> WorkflowHandle:
        """The calls of a deliberation (council_calls), made again on bare Temporal."""
        assert self.client is not None
        return await self.client.start_workflow(
            SameCalls.run, stages, id=f"same-{uuid.uuid4().hex[:12]}", task_queue=queue
        )

    async def run_same_calls(
        self, queue: str, stages: list[list[ModelCall]]
    ) -> tuple[WorkflowHandle, float]:
        return await _to_the_end(self.start_same_calls(queue, stages))

    async def council_calls(self, workflow_id: str) -> list[list[ModelCall]]:
        """The model calls a finished deliberation made, stage by stage, read from the inputs
        of its activities in the history."""
        assert self.client is not None
        history = await self.client.get_workflow_handle(workflow_id).fetch_history()
        stages: list[list[ModelCall]] = []
        place = None
        for event in history.events:
            if event.event_type != EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
                continue
            payloads = event.activity_task_scheduled_event_attributes.input.payloads
            call = await scheduled_call(self.client.data_converter, payloads)
            if (call.stage, call.round) != place:
                place = (call.stage, call.round)
                stages.append([])
            stages[-1].append(call)
        return stages


async def _to_the_end(start: Awaitable[WorkflowHandle]) -> tuple[WorkflowHandle, float]:
    """Start a run and wait for its result: its handle, and the wall time it took."""
    started = time.monotonic()
    handle = await start
    await handle.result()
    return handle, time.monotonic() - started


@dataclass
class Timing:
    """A finished run as its history tells it: first to last event, and the time each
    workflow task took (WORKFLOW_TASK_STARTED to WORKFLOW_TASK_COMPLETED, in ms): the
    worker's time on it plus the round trips to the server."""

    span: float
    task_ms: list[float]


async def history_timing(handle: WorkflowHandle) -> Timing:
    events = (await handle.fetch_history()).events
    started: dict[int, datetime] = {}
    task_ms = []
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED:
            started[event.event_id] = event.event_time.ToDatetime()
        elif event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            began = started[event.workflow_task_completed_event_attributes.started_event_id]
            task_ms.append((event.event_time.ToDatetime() - began).total_seconds() * 1000)
    span = events[-1].event_time.ToDatetime() - events[0].event_time.ToDatetime()
    return Timing(span.total_seconds(), task_ms)


@dataclass
class HistoryCounts:
    """What one finished run wrote to its history: the events by kind and the payload
    bytes they carry (inputs, results, search attributes, markers)."""

    events: int
    workflow_tasks: int
    activities: int
    timers: int
    timers_fired: int
    search_attribute_updates: int
    markers: int
    payload_bytes: int
    history_bytes: int


async def history_counts(handle: WorkflowHandle) -> HistoryCounts:
    events = (await handle.fetch_history()).events
    kinds = Counter(event.event_type for event in events)
    return HistoryCounts(
        events=len(events),
        workflow_tasks=kinds[EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED],
        activities=kinds[EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED],
        timers=kinds[EventType.EVENT_TYPE_TIMER_STARTED],
        timers_fired=kinds[EventType.EVENT_TYPE_TIMER_FIRED],
        search_attribute_updates=kinds[EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES],
        markers=kinds[EventType.EVENT_TYPE_MARKER_RECORDED],
        payload_bytes=sum(p.ByteSize() for event in events for p in store.payloads_in(event)),
        history_bytes=sum(event.ByteSize() for event in events),
    )


async def history_size(handle: WorkflowHandle) -> tuple[int, int]:
    """Events and their total size in bytes (the sum of the serialized events)."""
    counts = await history_counts(handle)
    return counts.events, counts.history_bytes


def council_plan(model_count: int, rounds: int) -> list[int]:
    """The council's graph of calls: a fan-out per stage, then the chairman alone."""
    return [model_count] * (2 + 2 * rounds) + [1]
