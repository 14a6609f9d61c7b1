"""A whole local stack for a run of many deliberations: the Temporal dev server, the
simulator as its own process, workers as subprocesses, and a client.

    stack = await Stack(workdir).start()
    worker = stack.start_worker()                 # python worker.py, its own task queue
    record, seconds = await stack.run_council(worker.queue, request)
    stack.sim.set_latency(1.0)                    # the simulator's controls
    stack.stop_server(); stack.start_server()     # a server restart on the same file
    stack.close()

The chaos run and the benchmarks run on it; the client connects the way the starter
does (app.temporal.connection), so the Temporal and encryption settings apply. Its payload store is
a directory in the workdir, for its client and its workers alike.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError

from app.temporal.connection import DEFAULT_NAMESPACE, connect, data_converter
from council.models import DeliberationRecord
from harness.processes import Process, free_port, start_simulator, start_temporal, start_worker
from harness.simulator_client import SimulatorClient
from runs.attributes import at_start
from runs.priority import BATCH, Launch
from workflows.deliberation import Deliberation

# A key the simulator accepts and that is nobody's real key.
SIMULATOR_API_KEY = "sk-council-simulated"


@dataclass
class WorkerProcess:
    process: Process
    queue: str

    @property
    def pid(self) -> int:
        return self.process.pid

    def kill(self) -> None:
        """SIGKILL: what a crash looks like."""
        self.process.kill()

    def stop(self) -> float | None:
        """Stop the worker; return its peak RSS in MB (read just before it stops)."""
        peak = self.process.peak_rss_mb()
        self.process.stop()
        return peak


class Stack:
    """One Temporal dev server (in memory, or on `db_file`), one simulator, workers."""

    def __init__(self, workdir: Path, db_file: Path | None = None) -> None:
        self.workdir = workdir
        self.db_file = db_file
        self.port: int | None = None
        self.temporal: Process | None = None
        self.simulator: Process | None = None
        self.sim: SimulatorClient | None = None  # type: ignore[assignment]
        self.client: Client | None = None
        self._workers: list[WorkerProcess] = []  # stopped on close if still running

    async def start(self, **connect_overrides: Any) -> Stack:
        self.workdir.mkdir(parents=True, exist_ok=True)
        await asyncio.to_thread(self.start_server)
        self.simulator = await asyncio.to_thread(
            start_simulator, log_path=self.workdir / "simulator.log"
        )
        self.sim = SimulatorClient(self.simulator.extra["url"])
        self.client = await self.connect(**connect_overrides)
        return self

    def start_server(self) -> None:
        """Start the dev server, on the same port and file as before after a stop."""
        for attempt in range(3):
            port = self.port or free_port()
            try:
                self.temporal = start_temporal(
                    self.db_file,
                    port=port,
                    ui_port=None,
                    log_path=self.workdir / f"temporal-{attempt}.log",
                )
                self.port = port
                return
            except RuntimeError:  # a free port taken before the server bound it
                if attempt == 2 or self.port is not None:
                    raise

    def stop_server(self) -> None:
        assert self.temporal is not None
        self.temporal.stop()

    async def connect(self, timeout: float = 60, **overrides: Any) -> Client:
        """A client, once the server answers (it may be starting or restarting)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                return await connect(
                    target_host=self.address,
                    data_converter=data_converter({**os.environ, **self.store_env}),
                    **overrides,
                )
            except (RuntimeError, RPCError):
                if time.monotonic() > deadline:
                    raise
                await asyncio.sleep(0.2)

    def close(self) -> None:
        if self.sim is not None:
            self.sim.close()
        for worker in self._workers:
            worker.process.stop()
        for process in (self.simulator, self.temporal):
            if process is not None:
                process.stop()

    @property
    def store_env(self) -> dict[str, str]:
        """The variable that points a process at the stack's payload store: a directory of
        its own, beside its server's files."""
        return {"COUNCIL_STORE": str(self.workdir / "store")}

    @property
    def address(self) -> str:
        assert self.port is not None
        return f"127.0.0.1:{self.port}"

    @property
    def sim_url(self) -> str:
        assert self.simulator is not None
        return self.simulator.extra["url"]

    def server_pids(self) -> dict[str, int]:
        assert self.temporal is not None and self.simulator is not None
        return {"temporal server": self.temporal.pid, "simulator": self.simulator.pid}

    # ---- workers ----

    def worker_env(self, queue: str, **extra: str) -> dict[str, str]:
        return {
            "TEMPORAL_ADDRESS": self.address,
            "TEMPORAL_NAMESPACE": DEFAULT_NAMESPACE,
            "COUNCIL_TASK_QUEUE": queue,
            "COUNCIL_LLM_BASE_URL": self.sim_url,
            "COUNCIL_LLM_API_KEY": SIMULATOR_API_KEY,
            **self.store_env,
            **extra,
        }

    def start_worker(
        self,
        queue: str | None = None,
        module: str | None = None,
        processes: int | None = None,
        **env: str,
    ) -> WorkerProcess:
        """`python worker.py` (or `python -m module`) on its task queue (a new one if None);
        `worker.py --processes N` with `processes`."""
        queue = queue or f"{(module or 'council').rsplit('.', 1)[-1]}-{uuid.uuid4().hex[:8]}"
        log = self.workdir / f"worker-{queue}.log"
        process = start_worker(
            self.worker_env(queue, **env), log, module=module, processes=processes
        )
        worker = WorkerProcess(process, queue)
        self._workers.append(worker)
        return worker

    # ---- deliberations ----

    async def start_council(
        self,
        queue: str,
        request: dict[str, Any],
        prefix: str = "council",
        id: str | None = None,
        launch: Launch = BATCH,
    ) -> WorkflowHandle:
        """A run as a benchmark starts it: batch work unless `launch` says otherwise."""
        assert self.client is not None
        wid = id or f"{prefix}-{uuid.uuid4().hex[:12]}"
        return await self.client.start_workflow(
            Deliberation.run,
            request,
            id=wid,
            task_queue=queue,
            result_type=DeliberationRecord,
            priority=launch.priority(),
            search_attributes=at_start(request.get("thread_id") or wid),
        )

    async def run_council(
        self, queue: str, request: dict[str, Any]
    ) -> tuple[DeliberationRecord, float]:
        """One deliberation from start to result; its wall time as the client sees it."""
        started = time.monotonic()
        handle = await self.start_council(queue, request)
        record = await handle.result()
        return record, time.monotonic() - started
