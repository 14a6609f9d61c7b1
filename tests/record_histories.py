"""Record the workflow histories the replay tests run against the current code.

    .venv/bin/python -m tests.record_histories

Run it when a protocol change ships behind workflow.patched: keep the old files (they
prove old runs still replay) and add new ones. Each scenario runs on a throwaway dev
server with the simulator.
"""

from __future__ import annotations

import asyncio
import json
import tempfile
import uuid
from pathlib import Path

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from app.connection import ensure_search_attributes
from app.devstack import free_port, start_temporal
from council.progress import EventKind, Progress
from simulator import SimulatorConfig, SimulatorServer
from tests.temporal_fixtures import council_worker, request

HERE = Path(__file__).parent / "histories"


async def _until_refining(handle) -> None:
    while True:
        progress = await handle.query("progress", 0, result_type=Progress)
        if any(e.kind == EventKind.ROUND_START for e in progress.events):
            return
        await asyncio.sleep(0.05)


async def record_all(client: Client, sim: SimulatorServer) -> None:
    async with council_worker(client, sim) as council:
        scenarios = {
            "quality_threshold_met": ({}, None),
            "max_rounds_two_rounds": ({"quality_threshold": 5, "max_rounds": 2, "stop_on_convergence": False}, None),
            "failing_model_and_chairman_fallback": (
                {"chairman": "sim/oracle"},
                {"sim/drift": {"errors": {"500": 1.0}}, "sim/oracle": {"errors": {"503": 1.0}}},
            ),
            "stopped_mid_refinement": ({"quality_threshold": 5}, {"*": {"latency": 0.3}}),
            "invalid_request": ({"max_rounds": 9}, None),
        }
        for name, (fields, faults) in scenarios.items():
            sim.set_faults(faults)
            handle = await client.start_workflow(
                "Deliberation",
                request(**fields),
                id=f"history-{name}-{uuid.uuid4().hex[:6]}",
                task_queue=council.task_queue,
            )
            if name == "stopped_mid_refinement":
                await _until_refining(handle)
                await handle.signal("stop", "recorded stop")
            try:
                await handle.result()
            except Exception:
                pass
            history = await handle.fetch_history()
            (HERE / f"{name}.json").write_text(json.dumps(json.loads(history.to_json()), indent=1) + "\n")
            print(f"recorded {name}: {len(history.events)} events")


async def main() -> None:
    HERE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        server = start_temporal(Path(tmp) / "history.db", port=port, ui_port=None)
        try:
            client = await Client.connect(f"127.0.0.1:{port}", data_converter=pydantic_data_converter)
            await ensure_search_attributes(client)
            with SimulatorServer(SimulatorConfig(seed=7)) as sim:
                await record_all(client, sim)
        finally:
            server.stop()


if __name__ == "__main__":
    asyncio.run(main())
