"""The biggest runs we allow in shape (8 and 12 models, 5 rounds), with every reply at
the size cap, stay well inside Temporal's limits: 2 MB per payload, 50 MB and 51,200
events of history (the server warns from 10 MB and 10,240 events)."""

from __future__ import annotations

import pytest
from temporalio.api.history.v1 import History

from council import limits
from council.models import DeliberationRecord
from tests.temporal_fixtures import Council

MODELS = [
    "sim/atlas",
    "sim/borealis",
    "sim/cirrus",
    "sim/drift",
    "sim/echo",
    "sim/fjord",
    "sim/gale",
    "sim/halo",
    "sim/iris",
    "sim/juniper",
    "sim/kestrel",
    "sim/lumen",
]
PAYLOAD_LIMIT = 2 * 1024 * 1024
HISTORY_WARN_BYTES = 10 * 1024 * 1024
HISTORY_WARN_EVENTS = 10_240


@pytest.mark.parametrize("size", [8, 12])
async def test_largest_runs_at_the_size_cap(council: Council, size: int) -> None:
    models = MODELS[:size]
    cap = limits.response_byte_cap(size, 5)
    # Prose padded past the cap (filler after a JSON reply would leave it unparsable).
    council.sim.set_faults({"*": {"pad_to_bytes": cap + 2_000, "structured": False}})
    handle = await council.start(
        models=models,
        max_rounds=5,
        quality_threshold=5,
        stop_on_convergence=False,
        token_budget=10_000_000,
    )
    record: DeliberationRecord = await handle.result()
    history = await handle.fetch_history()

    assert record.errors == [], record.errors
    assert len(record.rounds) == 5, record.iteration
    assert all(len(r.response.encode()) <= cap for r in record.stage1)
    record_bytes = len(record.model_dump_json().encode())
    history_bytes = History(events=history.events).ByteSize()
    largest = max(e.ByteSize() for e in history.events)
    print(
        f"\n{size} models x 5 rounds at a {cap:,}-byte cap: {len(history.events)} events, "
        f"history {history_bytes / 1e6:.2f} MB, largest event {largest / 1e6:.2f} MB, "
        f"record {record_bytes / 1e6:.2f} MB, {record.usage.calls} calls"
    )
    assert record_bytes < limits.RECORD_BUDGET_BYTES * 1.1 < PAYLOAD_LIMIT
    assert largest < PAYLOAD_LIMIT
    assert history_bytes < HISTORY_WARN_BYTES
    assert len(history.events) < HISTORY_WARN_EVENTS
