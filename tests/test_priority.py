"""Priority and fairness (runs.priority): a person's run goes ahead of batch work on
busy workers, and one tenant's backlog does not starve another's. Against the real dev
server (started with matching.enableFairness, as `make up` starts it), a worker that makes
one model call at a time, and the simulator answering each call after a short latency."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openai import AsyncOpenAI
from temporalio.common import Priority
from temporalio.testing import WorkflowEnvironment

from app.settings import environment as app_settings
from council.validation import validate_request
from runs import starting
from runs.priority import BATCH_KEY, INTERACTIVE_KEY, Launch, Urgency, tenant_of
from simulator import SimulatorServer
from tests.temporal_fixtures import Council, council_worker, request, starter
from tests.web_fixtures import WebServer, web_server

PAIR = ["sim/atlas", "sim/borealis"]
SCRIPT_TOKEN = "script-token-4f1c9a27e0"
PERSON_TOKEN = "person-token-b83d5e6012"


@pytest.fixture
def one_call_at_a_time(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("COUNCIL_MAX_CONCURRENT_CALLS", "1")
    app_settings.load()
    yield
    monkeypatch.undo()
    app_settings.load()


@pytest.fixture
async def busy(
    temporal: WorkflowEnvironment,
    sim: SimulatorServer,
    sim_faults: Callable[[dict[str, Any]], Any],
    one_call_at_a_time: None,
) -> AsyncIterator[Council]:
    sim_faults({"*": {"latency": 0.03}})
    async with council_worker(temporal.client, sim) as council:
        yield council


async def start(council: Council, launch: Launch, question: str) -> Any:
    wanted = validate_request(request(question, models=["sim/atlas", "sim/borealis"], max_rounds=1))
    return await starting.start(council.client, wanted, council.task_queue, launch=launch)


async def finishing_order(handles: list[tuple[str, Any]]) -> list[str]:
    """The names of the runs in the order they complete."""
    order: list[str] = []

    async def one(name: str, handle: Any) -> None:
        await handle.result()
        order.append(name)

    await asyncio.gather(*(one(name, handle) for name, handle in handles))
    return order


def priority_of(description: Any) -> Priority:
    raw = description.raw_description.workflow_execution_info.priority
    return Priority(raw.priority_key, raw.fairness_key)


async def test_a_persons_run_goes_ahead_of_a_batch_backlog(busy: Council) -> None:
    """Eight batch runs are started, then one a person waits on: with one call at a time,
        the batch calls queued ahead of its own, round after round, would hold it among them; it
    finishes first."""
    handles = [
        (f"batch{i}", await start(busy, Launch(Urgency.BATCH), f"Batch {i}?")) for i in range(8)
    ]
    handles.append(("person", await start(busy, Launch(), "A person's question?")))
    order = await finishing_order(handles)
    assert order[0] == "person", order


async def test_one_tenants_backlog_does_not_starve_another(busy: Council) -> None:
    """Tenant a starts eight batch runs, then tenant b two: the server hands out the
    backlog's calls to each tenant in turn, so b's finish while a's are still queued (in
    arrival order both of b's would come last)."""
    handles = [
        (f"a{i}", await start(busy, Launch(Urgency.BATCH, "a"), f"A {i}?")) for i in range(8)
    ]
    handles += [
        (f"b{i}", await start(busy, Launch(Urgency.BATCH, "b"), f"B {i}?")) for i in range(2)
    ]
    order = await finishing_order(handles)
    last_b = max(order.index("b0"), order.index("b1"))
    assert last_b < len(order) - 3, order


async def test_the_cli_starts_a_persons_run_or_batch_work_for_its_tenant(
    temporal: WorkflowEnvironment, sim: SimulatorServer
) -> None:
    async with council_worker(temporal.client, sim) as council:
        env = {"COUNCIL_TASK_QUEUE": council.task_queue, "TEMPORAL_ADDRESS": address(temporal)}
        code, out, err = await starter("start", "Tabs?", env=env | {"COUNCIL_TENANT": "team-a"})
        assert code == 0, err
        started = temporal.client.get_workflow_handle(out.strip())
        assert priority_of(await started.describe()) == Priority(INTERACTIVE_KEY, "team-a")
        code, out, err = await starter(
            "start", "Spaces?", "--priority", "batch", "--tenant", "nightly", env=env
        )
        assert code == 0, err
        batch = temporal.client.get_workflow_handle(out.strip())
        assert priority_of(await batch.describe()) == Priority(BATCH_KEY, "nightly")
        await started.result()
        await batch.result()


async def test_a_tenant_the_server_would_refuse_is_refused_before_anything_starts(
    temporal: WorkflowEnvironment,
) -> None:
    env = {"TEMPORAL_ADDRESS": address(temporal)}
    code, _, err = await starter("start", "Q?", "--tenant", "two words", env=env)
    assert code == 2
    assert "--tenant" in err and "not a valid tenant" in err and err.count("\n") == 1
    code, _, err = await starter("start", "Q?", env=env | {"COUNCIL_TENANT": "x" * 65})
    assert code == 2 and "COUNCIL_TENANT" in err and err.count("\n") == 1


def test_a_tenant_from_a_secret_is_a_digest_of_it() -> None:
    token = "sk-secret-bearer-token"
    tenant = tenant_of("bearer", token)
    assert token not in tenant and tenant.startswith("bearer:")
    assert tenant == tenant_of("bearer", token) != tenant_of("bearer", token + "x")
    assert Launch(tenant=tenant).priority() == Priority(INTERACTIVE_KEY, tenant)
    with pytest.raises(ValueError, match="not a valid tenant"):
        Launch(tenant="a b")


async def test_v1_reads_who_the_run_is_for_and_flex_as_batch(
    web: WebServer, council: Council
) -> None:
    """`service_tier: flex` is batch work; a tier that is none of OpenAI's is refused. A
    run is its caller's whatever `user` it names: without a token on the server, a bearer
    proves nothing and the caller is its address."""
    async with AsyncOpenAI(base_url=f"{web.url}/v1", api_key="unused", max_retries=0) as api:
        flex = await api.chat.completions.create(
            model="council",
            messages=[{"role": "user", "content": "Tabs or spaces?"}],
            user="alice@example.com",
            service_tier="flex",
            extra_body={"council": {"max_rounds": 1}},
        )
        plain = await api.chat.completions.create(
            model="council",
            messages=[{"role": "user", "content": "Tabs or spaces?"}],
            extra_body={"council": {"max_rounds": 1}},
        )
    described = await council.client.get_workflow_handle(flex.id).describe()
    assert priority_of(described) == Priority(BATCH_KEY, tenant_of("address", "127.0.0.1"))
    described = await council.client.get_workflow_handle(plain.id).describe()
    assert priority_of(described) == Priority(INTERACTIVE_KEY, tenant_of("address", "127.0.0.1"))
    async with httpx.AsyncClient(base_url=f"{web.url}/v1") as http:
        refused = await http.post(
            "/chat/completions",
            json={
                "model": "council",
                "messages": [{"role": "user", "content": "Q?"}],
                "service_tier": "fast",
            },
        )
    assert refused.status_code == 400 and "service_tier" in refused.text


async def test_a_caller_naming_many_users_gets_one_share(
    busy: Council, temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    """Before: /v1's `user` picked the fairness key, so a caller naming a new user on each
    request held a share per name (another tenant's run: 34.7 s instead of 10.6 s in the
    probe), and `user: "alice"` got alice's exact key. Scaled down: with one call at a time,
    a script's eight runs through /v1 with its own token, each for another user, then a
    signed-in person's two runs through the page with theirs, all a person's runs (one
    priority, so that only fairness orders them): the person's finish while the script's
    are still queued (with eight keys against one they came last)."""
    order: list[str] = []
    tokens = f"script={SCRIPT_TOKEN},person={PERSON_TOKEN}"
    with web_server(temporal, busy, tmp_path, COUNCIL_WEB_TOKENS=tokens) as web:
        async with AsyncOpenAI(
            base_url=f"{web.url}/v1", api_key=SCRIPT_TOKEN, max_retries=0, timeout=120
        ) as api:

            async def hostile(i: int) -> str:
                answer = await api.chat.completions.create(
                    model="council",
                    messages=[{"role": "user", "content": f"Hostile {i}?"}],
                    user="alice" if i == 0 else f"user-{i}",
                    extra_body={"council": {"max_rounds": 1, "models": PAIR}},
                )
                order.append(f"a{i}")
                return answer.id

            async def honest(i: int, http: httpx.AsyncClient) -> None:
                form = {"question": f"Honest {i}?", "models": "\n".join(PAIR), "max_rounds": "1"}
                started = await http.post("/deliberations", data=form)
                assert started.status_code == 303, started.text[:300]
                workflow = started.headers["location"].rsplit("/", 1)[-1]
                await busy.client.get_workflow_handle(workflow).result()
                order.append(f"b{i}")

            attack = [asyncio.ensure_future(hostile(i)) for i in range(8)]
            try:
                await until_running(busy, 8)
                async with httpx.AsyncClient(base_url=web.url, timeout=60) as http:
                    signed_in = await http.post("/login", data={"token": PERSON_TOKEN})
                    assert signed_in.status_code == 303
                    people = [asyncio.ensure_future(honest(i, http)) for i in range(2)]
                    await asyncio.wait_for(asyncio.gather(*people), 120)
                ids = await asyncio.wait_for(asyncio.gather(*attack), 120)
            finally:
                for call in attack:
                    call.cancel()
    last_b = max(order.index("b0"), order.index("b1"))
    assert last_b < len(order) - 3, order
    caller = "script"
    for workflow in ids:
        described = await busy.client.get_workflow_handle(workflow).describe()
        assert priority_of(described) == Priority(INTERACTIVE_KEY, caller)
    assert caller != tenant_of("user", "alice")


async def until_running(council: Council, count: int, timeout: float = 60) -> None:
    """Wait until `count` runs are under way on the council's task queue."""
    deadline = asyncio.get_running_loop().time() + timeout
    query = f"TaskQueue = '{council.task_queue}' AND ExecutionStatus = 'Running'"
    while (await council.client.count_workflows(query)).count < count:
        assert asyncio.get_running_loop().time() < deadline, "the runs never started"
        await asyncio.sleep(0.1)


def address(temporal: WorkflowEnvironment) -> str:
    return temporal.client.service_client.config.target_host
