"""Secret hygiene: a deliberation run with a recognizable API key leaves no trace of it
in the full history (as `temporal workflow show` prints it), the worker's log at debug
level, or the record. One model's provider echoes the key in its 401 error, as some do."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from harness.processes import ROOT, start_worker, temporal_binary
from simulator import SimulatorServer
from tests.temporal_fixtures import FOUR_MODELS, TEST_API_KEY, temporal_address, worker_env


async def _run(*command: str, env: dict[str, str] | None = None) -> str:
    import os

    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, out.decode()
    return out.decode()


async def test_api_key_never_leaves_the_worker(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    sim.set_faults({"sim/drift": {"errors": {"401": 1.0}}})  # echoes the key it received
    address = temporal_address(temporal)
    queue = f"council-secrets-{uuid.uuid4().hex[:8]}"
    env = worker_env(
        temporal, sim, queue, COUNCIL_LOG_LEVEL="DEBUG", COUNCIL_MODELS=",".join(FOUR_MODELS)
    )
    log = tmp_path / "worker.log"
    worker = await asyncio.to_thread(start_worker, env, log)
    try:
        record = await _run(
            sys.executable,
            "starter.py",
            "start",
            "Is the key safe?",
            "--id",
            "secrets-1",
            "--wait",
            "--json",
            env=env,
        )
        shown = await _run(sys.executable, "starter.py", "show", "secrets-1", env=env)
    finally:
        worker.stop()
    history = await _run(
        temporal_binary(),
        "workflow",
        "show",
        "--workflow-id",
        "secrets-1",
        "--address",
        address,
        "--output",
        "json",
    )

    # The run really used the key, and the failing provider really echoed it.
    assert all(entry["authorized"] for entry in sim.log()["entries"])
    parsed = json.loads(record[record.index("{") :])
    [error] = parsed["errors"]
    assert error["model"] == "sim/drift" and "401" in error["message"]
    assert "[redacted]" in error["message"]
    assert len(json.loads(history)["events"]) > 50
    assert "DEBUG" in log.read_text()

    for name, text in {
        "history": history,
        "worker log": log.read_text(),
        "record": record,
        "show": shown,
    }.items():
        assert TEST_API_KEY not in text, f"the API key leaked into the {name}"
