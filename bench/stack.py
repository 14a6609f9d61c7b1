"""The processes every benchmark runs on, started the way a user starts them.

- the embedded Temporal dev server (app.devstack.start_temporal: headless, a free port,
  SQLite in memory, or with --sqlite-file in a file in the scratch folder as `make
  demo` keeps it: on a slow disk the file makes the server, not the workers, the limit);
- the simulator as its own process (app.devstack.start_simulator), whose latency the
  benchmarks set through its fault config and whose request log counts the calls;
- workers as subprocesses: `python worker.py` for the council, `python -m
  bench.bare_worker` for the bare-Temporal baseline, so that each one's CPU time and
  peak memory can be read off its own process.

CPU time and peak RSS come from /proc (Linux); elsewhere they are reported as n/a.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from app import devstack
from app.connection import connect
from council.models import DeliberationRecord
from simulator.personas import DEFAULT_MODELS

NAMESPACE = "default"
QUESTION = "How should a small team choose between SQLite and PostgreSQL for a new web service?"
# A key the simulator accepts and that is nobody's real key.
BENCH_API_KEY = "sk-council-bench"
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


# ---- process measurements (/proc) ------------------------------------------------------

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time of a process so far."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / _TICKS  # utime, stime


def _status_kb(pid: int, key: str) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def peak_rss_mb(pid: int) -> float | None:
    """The process's peak resident set size so far (VmHWM)."""
    kb = _status_kb(pid, "VmHWM")
    return kb / 1024 if kb is not None else None


def rss_mb(pid: int) -> float | None:
    kb = _status_kb(pid, "VmRSS")
    return kb / 1024 if kb is not None else None


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


# ---- workers ----------------------------------------------------------------------------


@dataclass
class WorkerProcess:
    process: devstack.Process
    queue: str

    @property
    def pid(self) -> int:
        return self.process.pid

    def peak_rss_mb(self) -> float | None:
        return peak_rss_mb(self.pid)

    def kill(self) -> None:
        self.process.kill()

    def stop(self) -> float | None:
        """Stop the worker; return its peak RSS in MB (read just before it stops)."""
        peak = self.peak_rss_mb()
        self.process.stop()
        return peak


# ---- the stack --------------------------------------------------------------------------


class Stack:
    """One Temporal dev server, one simulator and a Temporal client, for a whole run."""

    def __init__(self, workdir: Path, sqlite_file: bool = False) -> None:
        self.workdir = workdir
        self.sqlite_file = sqlite_file
        self.temporal: devstack.Process | None = None
        self.simulator: devstack.Process | None = None
        self.client: Client | None = None
        self._http = httpx.Client(timeout=30)
        self._workers: list[WorkerProcess] = []  # stopped on close if still running

    async def start(self) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        for attempt in range(3):
            try:
                self.temporal = await asyncio.to_thread(
                    devstack.start_temporal,
                    self.workdir / "temporal.db" if self.sqlite_file else None,
                    port=devstack.free_port(),
                    ui_port=None,
                    log_path=self.workdir / f"temporal-{attempt}.log",
                )
                break
            except RuntimeError:  # the free port was taken before the server bound it
                if attempt == 2:
                    raise
        self.simulator = await asyncio.to_thread(
            devstack.start_simulator, log_path=self.workdir / "simulator.log"
        )
        self.client = await self._connect()
        return self

    async def _connect(self) -> Client:
        deadline = time.monotonic() + 60
        while True:
            try:
                client = await connect(target_host=self.address, namespace=NAMESPACE)
                await client.workflow_service.describe_namespace(
                    DescribeNamespaceRequest(namespace=NAMESPACE)
                )
                return client
            except (RuntimeError, RPCError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    def close(self) -> None:
        self._http.close()
        for worker in self._workers:
            worker.process.stop()
        for process in (self.simulator, self.temporal):
            if process is not None:
                process.stop()

    @property
    def address(self) -> str:
        assert self.temporal is not None
        return self.temporal.extra["address"]

    @property
    def sim_url(self) -> str:
        assert self.simulator is not None
        return self.simulator.extra["url"]

    @property
    def sim_root(self) -> str:
        return self.sim_url.removesuffix("/v1")

    def server_pids(self) -> dict[str, int]:
        assert self.temporal is not None and self.simulator is not None
        return {"temporal server": self.temporal.pid, "simulator": self.simulator.pid}

    # ---- the simulator's controls ----

    def set_latency(self, seconds: float) -> None:
        faults = {"*": {"latency": seconds}} if seconds else {}
        self._http.post(f"{self.sim_root}/_sim/faults", json=faults).raise_for_status()

    def reset_log(self) -> None:
        self._http.post(f"{self.sim_root}/_sim/reset").raise_for_status()

    def sim_log(self, since: int = 0) -> dict[str, Any]:
        response = self._http.get(f"{self.sim_root}/_sim/log", params={"since": since})
        response.raise_for_status()
        return response.json()

    # ---- workers ----

    def worker_env(self, queue: str) -> dict[str, str]:
        return {
            "TEMPORAL_ADDRESS": self.address,
            "TEMPORAL_NAMESPACE": NAMESPACE,
            "COUNCIL_TASK_QUEUE": queue,
            "COUNCIL_LLM_BASE_URL": self.sim_url,
            "COUNCIL_LLM_API_KEY": BENCH_API_KEY,
        }

    def start_council_worker(self, queue: str | None = None) -> WorkerProcess:
        """`python worker.py`, the worker a user runs, on its own task queue."""
        queue = queue or f"bench-council-{uuid.uuid4().hex[:8]}"
        log = self.workdir / f"worker-{queue}.log"
        worker = WorkerProcess(devstack.start_worker(self.worker_env(queue), log), queue)
        self._workers.append(worker)
        return worker

    def start_bare_worker(self) -> WorkerProcess:
        """The bare-Temporal baseline's worker: same options, no-op activities."""
        queue = f"bench-bare-{uuid.uuid4().hex[:8]}"
        log = self.workdir / f"worker-{queue}.log"
        process = devstack.spawn(
            "bare worker", [sys.executable, "-m", "bench.bare_worker"], log, self.worker_env(queue)
        )
        worker = WorkerProcess(process, queue)
        self._workers.append(worker)
        devstack.wait_for(lambda: "worker ready" in process.log_text(), "bare worker", process)
        return worker

    # ---- runs ----

    async def start_council(
        self, queue: str, request: dict[str, Any], prefix: str = "bench"
    ) -> WorkflowHandle:
        assert self.client is not None
        return await self.client.start_workflow(
            "Deliberation",
            request,
            id=f"{prefix}-{uuid.uuid4().hex[:12]}",
            task_queue=queue,
            result_type=DeliberationRecord,
        )

    async def run_council(
        self, queue: str, request: dict[str, Any]
    ) -> tuple[DeliberationRecord, float]:
        """One deliberation from start to result; its wall time as the client sees it."""
        started = time.monotonic()
        handle = await self.start_council(queue, request)
        record = await handle.result()
        return record, time.monotonic() - started

    async def start_bare(
        self, queue: str, plan: list[int], latency: float = 0.0, models: list[str] | None = None
    ) -> WorkflowHandle:
        """The bare graph: no-op activities, or the model-call activity when models are given."""
        assert self.client is not None
        return await self.client.start_workflow(
            "BareGraph",
            args=[plan, latency, models, QUESTION],
            id=f"bare-{uuid.uuid4().hex[:12]}",
            task_queue=queue,
        )

    async def run_bare(self, queue: str, plan: list[int], latency: float = 0.0) -> float:
        started = time.monotonic()
        handle = await self.start_bare(queue, plan, latency)
        await handle.result()
        return time.monotonic() - started


async def history_size(handle: WorkflowHandle) -> tuple[int, int]:
    """Events and their total size in bytes (the sum of the serialized events)."""
    history = await handle.fetch_history()
    return len(history.events), sum(event.ByteSize() for event in history.events)


def council_plan(model_count: int, rounds: int) -> list[int]:
    """The council's graph of calls: a fan-out per stage, then the chairman alone."""
    return [model_count] * (2 + 2 * rounds) + [1]
