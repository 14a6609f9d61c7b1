"""What every run's history must respect, read from the history itself: no payload over
256 KB, and each workflow task's commands (the message a worker sends when it completes a
task) far below gRPC's 4 MiB limit; and what the same task would have weighed had its
stored payloads travelled in it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from app.settings.environment import DEFAULT_STORE_THRESHOLD
from app.store import store
from app.temporal import connection
from harness.history import inline_size, task_commands
from simulator import SimulatorServer
from tests.temporal_fixtures import (
    Council,
    council_worker,
    failed_workflow_tasks,
    temporal_address,
)

TWELVE = [f"sim/member-{n:02d}" for n in range(12)]
GRPC_LIMIT = 4 * 1024 * 1024
PAYLOAD_CEILING = 256 * 1024


async def check_run(handle: WorkflowHandle) -> tuple[int, int, int]:
    """The run's bounds: (largest payload, largest task's commands, the same had nothing
    been stored), after asserting the first two."""
    history = await handle.fetch_history()
    events = list(history.events)
    assert failed_workflow_tasks(events) == []
    largest_payload = max(p.ByteSize() for e in events for p in store.payloads_in(e))
    tasks = task_commands(events)
    largest_task = max(sum(e.ByteSize() for e in task) for task in tasks)
    inline_task = max(sum(inline_size(e) for e in task) for task in tasks)
    stored = [p for e in events for p in store.payloads_in(e) if store.reference(p)]
    assert stored, "nothing went to the store"
    assert largest_payload < PAYLOAD_CEILING
    assert largest_task < GRPC_LIMIT / 4
    return largest_payload, largest_task, inline_task


@pytest.fixture
async def default_store(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> AsyncIterator[Council]:
    """A client and worker with the settings a user has: a directory store, the default
    threshold."""
    client = await Client.connect(
        temporal_address(temporal),
        data_converter=connection.data_converter({"COUNCIL_STORE": str(tmp_path / "store")}),
    )
    assert client.data_converter.external_storage is not None
    assert client.data_converter.external_storage.payload_size_threshold == (
        DEFAULT_STORE_THRESHOLD
    )
    async with council_worker(client, sim) as council:
        yield council
