"""`worker.py --processes N`: N worker processes on one task queue under a supervisor
(service/supervisor.py), on the real dev server; and the supervisor's restart and stop rules
with plain child processes."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from council.models import DeliberationRecord
from harness.processes import ROOT, Process, free_port, start_worker, worker_processes
from service import command as worker_command
from service import supervisor
from service.supervisor import Supervisor
from simulator import SimulatorServer
from tests.sim_fixtures import wait_until
from tests.temporal_fixtures import request, worker_env
from workflows.deliberation import Deliberation


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def start_pool(env: dict[str, str], log: Path, processes: int = 2) -> Process:
    return await asyncio.to_thread(start_worker, env, log, 90, None, processes)


async def deliberation(temporal: WorkflowEnvironment, queue: str, **fields) -> WorkflowHandle:
    return await temporal.client.start_workflow(
        Deliberation.run,
        request(**fields),
        id=f"processes-{uuid.uuid4().hex[:10]}",
        task_queue=queue,
        result_type=DeliberationRecord,
    )


async def identities(handle: WorkflowHandle) -> set[str]:
    """The workers that completed the run's workflow tasks and model calls."""
    found = set()
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED:
            found.add(event.workflow_task_completed_event_attributes.identity)
        elif event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            found.add(event.activity_task_started_event_attributes.identity)
    return found


async def pollers(temporal: WorkflowEnvironment, queue: str) -> set[str]:
    described = await temporal.client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=temporal.client.namespace, task_queue=TaskQueue(name=queue)
        )
    )
    return {poller.identity for poller in described.pollers}


def pid_of(identity: str) -> int:
    return int(identity.partition("@")[0])  # the SDK's default identity: pid@host


# ---- on the dev server --------------------------------------------------------------------


async def test_two_processes_both_take_work_each_with_its_metrics_port(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    queue = f"processes-{uuid.uuid4().hex[:8]}"
    base = free_port()
    env = worker_env(temporal, sim, queue, COUNCIL_METRICS_PORT=str(base))
    log = tmp_path / "worker.log"
    pool = await start_pool(env, log)
    try:
        pids = set(worker_processes(pool.log_text()).values())
        assert len(pids) == 2 and pool.pid not in pids
        # Workflows stick to the worker that ran their first task: start runs until both
        # processes have run some of the work (each batch goes to either, or both).
        seen: set[int] = set()
        for _ in range(6):
            handles = [await deliberation(temporal, queue, max_rounds=1) for _ in range(4)]
            for handle in handles:
                await asyncio.wait_for(handle.result(), 60)
                seen |= {pid_of(identity) for identity in await identities(handle)}
            if seen >= pids:
                break
        assert seen == pids
        assert {pid_of(identity) for identity in await pollers(temporal, queue)} >= pids
        # One metrics port per process: the base port, then the next.
        async with httpx.AsyncClient() as http:
            for port in (base, base + 1):
                text = (await http.get(f"http://127.0.0.1:{port}/metrics", timeout=10)).text
                assert "temporal_" in text and "council_model_calls_total" in text
    finally:
        pool.stop()


async def test_a_killed_process_is_restarted_and_the_work_goes_on(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    queue = f"processes-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    pool = await start_pool(worker_env(temporal, sim, queue), log)
    try:
        before = worker_processes(pool.log_text())
        os.kill(before[1], signal.SIGKILL)
        await wait_until(lambda: worker_processes(pool.log_text())[1] != before[1], timeout=60)
        after = worker_processes(pool.log_text())
        assert after[2] == before[2] and alive(after[1]) and not alive(before[1])
        assert (
            f"worker process 1 (pid {before[1]}) was killed by SIGKILL (signal 9); "
            "starting it again in 1 s" in pool.log_text()
        )
        record = await asyncio.wait_for((await deliberation(temporal, queue)).result(), 60)
        assert record.status == "completed"
        assert after[1] in {pid_of(identity) for identity in await pollers(temporal, queue)}
        # The supervisor killed outright: its processes notice and stop by themselves.
        os.kill(pool.pid, signal.SIGKILL)
        await wait_until(lambda: not any(alive(pid) for pid in after.values()), timeout=20)
        assert pool.log_text().count("is gone: shutting down") == 2
    finally:
        pool.stop()
        for pid in worker_processes(pool.log_text()).values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


async def test_sigterm_stops_every_process_after_its_calls_finish(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    sim.set_faults({"*": {"latency": 1.0}})
    queue = f"processes-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "worker.log"
    pool = await start_pool(worker_env(temporal, sim, queue), log)
    handles = []
    try:
        pids = worker_processes(pool.log_text()).values()
        handles = [await deliberation(temporal, queue, max_rounds=1) for _ in range(4)]
        await wait_until(lambda: sim.log()["in_flight"] >= 8, timeout=30)
        in_flight = {e["call_id"] for e in sim.log()["entries"] if e["finished"] is None}
        os.kill(pool.pid, signal.SIGTERM)  # the supervisor alone, not its process group
        status = await asyncio.to_thread(pool.popen.wait, 30)
        assert status == 0
        assert not any(alive(pid) for pid in pids)
        text = pool.log_text()
        assert "SIGTERM: stopping 2 worker processes" in text
        assert text.count("shutting down: in-flight calls get 5 s") == 2
        assert "all 2 worker processes stopped" in text
        # The calls in flight at the stop finished (1 s, inside the 5 s grace period).
        finished = {e["call_id"]: e["outcome"] for e in sim.log()["entries"]}
        assert {finished[call] for call in in_flight} == {"ok"}
    finally:
        pool.stop()
        for handle in handles:
            with contextlib.suppress(Exception):
                await handle.terminate("test over")


# ---- the process count ---------------------------------------------------------------------


def test_bad_process_counts_are_one_line_before_anything_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEMPORAL_ADDRESS", "127.0.0.1:1")  # nothing may try to connect
    wanted = "must be a whole number from 1 to 128, or auto"
    for value in ("0", "-1", "two", "1.5", "129", ""):
        assert worker_command.main(["--processes", value]) == 2
        assert capsys.readouterr().err == f"worker: --processes {wanted} (got {value!r})\n"
    monkeypatch.setenv("COUNCIL_WORKER_PROCESSES", "many")
    assert worker_command.main([]) == 2
    assert capsys.readouterr().err == f"worker: COUNCIL_WORKER_PROCESSES {wanted} (got 'many')\n"
    # The flag wins over the variable; each process needs its own metrics port.
    monkeypatch.setenv("COUNCIL_METRICS_PORT", "65535")
    assert worker_command.main(["--processes", "2"]) == 2
    assert capsys.readouterr().err == (
        "worker: COUNCIL_METRICS_PORT must be at most 65534 with 2 worker processes, which "
        "use the ports from it upwards (got 65535)\n"
    )


def test_the_command_line_says_it_in_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "worker.py", "--processes", "0"],
        cwd=ROOT,
        env={**os.environ, "TEMPORAL_ADDRESS": "127.0.0.1:1"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        "worker: --processes must be a whole number from 1 to 128, or auto (got '0')\n"
    )


def test_auto_is_one_process_per_available_core(monkeypatch: pytest.MonkeyPatch) -> None:
    cores = len(os.sched_getaffinity(0))
    assert supervisor.process_count("auto", "--processes") == min(cores, 128)
    assert supervisor.process_count(" AUTO ", "--processes") == min(cores, 128)
    assert supervisor.process_count("3", "--processes") == 3
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(300)))
    assert supervisor.process_count("auto", "--processes") == 128


# ---- the supervisor's rules, with plain processes -------------------------------------------


def python(code: str) -> list[str]:
    return [sys.executable, "-I", "-S", "-c", code]


async def test_a_crash_loop_is_capped_per_minute(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    starts = tmp_path / "starts"
    crash = python(f"open({str(starts)!r}, 'a').write('.'); raise SystemExit(3)")
    pool = Supervisor(lambda index: crash, 1, restart_delay=0.05, restarts_per_minute=3)
    caplog.set_level(logging.INFO, "council.supervisor")
    running = asyncio.create_task(pool.run())
    try:
        await wait_until(lambda: starts.exists() and len(starts.read_text()) >= 4, timeout=20)
        # The first start and 3 restarts; the next one waits for the minute to pass.
        await asyncio.sleep(1.0)
        assert len(starts.read_text()) == 4
        messages = [record.getMessage() for record in caplog.records]
        assert sum("exited with status 3; starting it again in 0 s" in m for m in messages) == 3
        assert any(
            "has restarted 3 times in the last minute (at most 3 a minute)" in m for m in messages
        )
        started = time.monotonic()
        pool.stop()
        assert await asyncio.wait_for(running, 10) == 0
        assert time.monotonic() - started < 5  # the stop does not wait out the minute
    finally:
        running.cancel()


async def test_a_configuration_error_at_the_first_start_stops_all_with_status_2(
    caplog: pytest.LogCaptureFixture,
) -> None:
    commands = {1: python("raise SystemExit(2)"), 2: python("import time; time.sleep(60)")}
    pool = Supervisor(commands.__getitem__, 2, restart_delay=0.05)
    caplog.set_level(logging.INFO, "council.supervisor")
    started = time.monotonic()
    assert await asyncio.wait_for(pool.run(), 20) == 2
    assert time.monotonic() - started < 10  # the sleeper got SIGTERM, not its 60 s
    assert any(
        "worker process 1 (pid" in r.getMessage()
        and "exited with status 2: the configuration cannot be used; stopping" in r.getMessage()
        for r in caplog.records
    )


async def test_a_command_that_cannot_start_stops_the_supervisor_with_status_1(
    tmp_path: Path,
) -> None:
    pool = Supervisor(lambda index: [str(tmp_path / "no-such-program")], 2)
    assert await asyncio.wait_for(pool.run(), 10) == 1
