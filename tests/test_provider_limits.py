"""A provider's request rate limit across every worker (council.toml's
`max_requests_per_second`): its calls go to a task queue of their own, whose rate the
Temporal server enforces whichever worker polls. Two `worker.py` processes against the
real dev server and the simulator, whose log says when each request came."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from app.settings.environment import Settings, SettingsError
from council.config import ConfigProblem, parse_config
from council.models import DeliberationRecord
from harness.processes import start_worker
from simulator import SimulatorServer
from tests.temporal_fixtures import TEST_API_KEY, request, worker_env
from workflows.calls import provider_queue
from workflows.deliberation import Deliberation

MODELS = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]


def council_toml(url: str, rate: float | None) -> str:
    limit = f"max_requests_per_second = {rate}\n" if rate is not None else ""
    return (
        "[providers.quota]\n"
        f'base_url = "{url}"\n'
        'api_key_env = "COUNCIL_LLM_API_KEY"\n'
        'models = ["sim/*"]\n'
        f"{limit}"
    )


def per_second(sim: SimulatorServer) -> Counter[int]:
    """Requests the simulator received in each whole second."""
    return Counter(int(entry["started"]) for entry in sim.log()["entries"])


async def deliberation(temporal: WorkflowEnvironment, queue: str) -> WorkflowHandle:
    return await temporal.client.start_workflow(
        Deliberation.run,
        request(models=MODELS, max_rounds=1),
        id=f"limits-{uuid.uuid4().hex[:10]}",
        task_queue=queue,
        result_type=DeliberationRecord,
    )


async def activity_queues(handle: WorkflowHandle) -> set[str]:
    queues = set()
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == ModelGateway.call_model.__name__:
                queues.add(attrs.task_queue.name)
    return queues


async def test_two_workers_send_a_limited_provider_at_most_its_rate(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    """With 2 requests per second for the provider and two worker processes: after the
    opening burst (the server's limiter starts with a full bucket: about one second's
    worth, which may straddle two clock seconds), no second sees more than 3 of its
    calls, and no span of k seconds more than 2k + 3; the same run without the limit
    sends many more in its busiest second. The seconds are those the simulator received
    the calls in: on a busy machine a call sent at the end of one second may arrive in the
    next, so the spans allow one call more than the rate."""
    queue = f"limits-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "council.toml"
    config.write_text(council_toml(sim.url, 2))
    env = worker_env(temporal, sim, queue, COUNCIL_CONFIG=str(config))
    pool = await asyncio.to_thread(start_worker, env, tmp_path / "workers.log", 90, None, 2)
    try:
        handle = await deliberation(temporal, queue)
        record = await asyncio.wait_for(handle.result(), 120)
    finally:
        pool.stop()
    assert not record.errors and record.stage3 is not None
    assert await activity_queues(handle) == {provider_queue(queue, "quota")}
    seconds = per_second(sim)
    assert sum(seconds.values()) == record.usage.calls
    first, last = min(seconds), max(seconds)
    assert last - first >= (record.usage.calls - 1) / 2 - 2, sorted(seconds.items())
    assert max(seconds[s] for s in range(first + 2, last + 1)) <= 3, sorted(seconds.items())
    for start in range(first, last + 1):
        for span in range(1, last - start + 2):
            sent = sum(seconds[s] for s in range(start, start + span))
            assert sent <= 2 * span + 3, sorted(seconds.items())

    sim.reset()
    free = f"free-{uuid.uuid4().hex[:8]}"
    config.write_text(council_toml(sim.url, None))
    env = worker_env(temporal, sim, free, COUNCIL_CONFIG=str(config))
    pool = await asyncio.to_thread(start_worker, env, tmp_path / "free.log", 90, None, 2)
    try:
        handle = await deliberation(temporal, free)
        await asyncio.wait_for(handle.result(), 120)
    finally:
        pool.stop()
    assert await activity_queues(handle) == {free}
    assert max(per_second(sim).values()) > 3


def most_at_once(sim: SimulatorServer) -> int:
    """The most requests the simulator was answering at the same moment."""
    moments = []
    for entry in sim.log()["entries"]:
        moments += [(entry["started"], 1), (entry["finished"], -1)]
    busy = most = 0
    for _, step in sorted(moments, key=lambda m: (m[0], m[1])):
        busy += step
        most = max(most, busy)
    return most


async def test_two_workers_share_a_providers_concurrency_limit(
    temporal: WorkflowEnvironment,
    sim: SimulatorServer,
    sim_faults: Callable[[dict[str, Any]], Any],
    tmp_path: Path,
) -> None:
    """`max_concurrent_requests = 2` and two worker processes: each takes one slot, so the
    provider never answers more than two at once (four members ask at once)."""
    sim_faults({"*": {"latency": 0.5}})
    queue = f"slots-{uuid.uuid4().hex[:8]}"
    config = tmp_path / "council.toml"
    config.write_text(council_toml(sim.url, None) + "max_concurrent_requests = 2\n")
    env = worker_env(temporal, sim, queue, COUNCIL_CONFIG=str(config))
    pool = await asyncio.to_thread(start_worker, env, tmp_path / "workers.log", 90, None, 2)
    try:
        await asyncio.sleep(2)  # each has counted the other
        handle = await deliberation(temporal, queue)
        record = await asyncio.wait_for(handle.result(), 120)
    finally:
        pool.stop()
    assert not record.errors and record.stage3 is not None
    assert most_at_once(sim) <= 2


@pytest.mark.fast
def test_a_rate_is_a_positive_number_of_requests_per_second() -> None:
    parsed = parse_config(council_toml("http://127.0.0.1:9/v1", 0.5))
    assert parsed.providers["quota"].max_requests_per_second == 0.5
    with pytest.raises(ConfigProblem, match="max_requests_per_second"):
        parse_config(council_toml("http://127.0.0.1:9/v1", 0))
    settings = Settings.read({"COUNCIL_LLM_MAX_REQUESTS_PER_SECOND": "2.5"}).llm
    assert GatewaySettings.of(settings).max_requests_per_second == 2.5
    with pytest.raises(SettingsError, match="COUNCIL_LLM_MAX_REQUESTS_PER_SECOND must be"):
        Settings.read({"COUNCIL_LLM_MAX_REQUESTS_PER_SECOND": "fast"})


@pytest.mark.fast
async def test_only_the_models_of_a_limited_provider_have_a_queue_of_their_own() -> None:
    config = parse_config(council_toml("http://127.0.0.1:9/v1", 2).replace('"sim/*"', '"sim/a*"'))
    async with ModelGateway(
        GatewaySettings(base_url="http://127.0.0.1:9/v1", api_key=TEST_API_KEY),
        providers=config.providers,
    ) as gateway:
        assert gateway.limited() == {"quota": 2}
        assert await gateway.limited_providers(["sim/atlas", "sim/borealis"]) == {
            "sim/atlas": "quota"
        }
