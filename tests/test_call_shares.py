"""Each tenant's and each run's share of the worker's calls (activities.shares): one
tenant's calls to a provider that never answers do not take every call of the worker, and
stopping its runs gives their calls back at once. The real dev server (with fairness, as
`make up` starts it), an in-process worker that sends few calls at once, and the
simulator, which accepts the hanging models' requests and never answers them.

Scaled down from what was seen (17 runs of 12 members holding all 200 calls of a worker
for 100 s): four runs of three members against six calls; the honest run has 30 s where
it needs a few, and the hanging calls would have held their calls for 10 minutes."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import WorkflowHandle
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from activities.shares import Caller, CallShares, waiting_calls
from app.settings import environment as app_settings
from council.validation import validate_request
from runs import starting
from runs.priority import Launch
from simulator import SimulatorServer
from tests.temporal_fixtures import Council, council_worker, request
from workflows.deliberation import Deliberation

CALLS = 6
HANGING = ["hog/a", "hog/b", "hog/c"]
HOG_RUNS = 4
# The hog's calls wait (it sets its own policy) far longer than the test.
HOG_POLICY = {"call_timeout_seconds": 600, "heartbeat_timeout_seconds": 2, "max_attempts": 1}
HONEST_SECONDS = 30


@pytest.fixture
def few_calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("COUNCIL_MAX_CONCURRENT_CALLS", str(CALLS))
    app_settings.load()
    yield
    monkeypatch.undo()
    app_settings.load()


@pytest.fixture
async def shared(
    temporal: WorkflowEnvironment,
    sim: SimulatorServer,
    sim_faults: Callable[[dict[str, Any]], Any],
    few_calls: None,
) -> AsyncIterator[Council]:
    sim_faults({model: {"hang": 1.0} for model in [*HANGING, "hog/d", "hog/e"]})
    async with council_worker(temporal.client, sim) as council:
        yield council


async def start(council: Council, tenant: str, models: list[str], **fields: Any) -> WorkflowHandle:
    wanted = validate_request(request(f"{tenant}: a question?", models=models, **fields))
    return await starting.start(
        council.client, wanted, council.task_queue, launch=Launch(tenant=tenant)
    )


async def started_calls(handles: list[WorkflowHandle]) -> int:
    """The runs' model calls that a worker has taken (running or waiting in it)."""
    count = 0
    for handle in handles:
        described = await handle.describe()
        count += sum(
            pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED
            for pending in described.raw_description.pending_activities
        )
    return count


def requests_of(sim: SimulatorServer, models: list[str]) -> list[dict[str, Any]]:
    return [e for e in sim.log()["entries"] if e["model"] in models]


async def eventually(check: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, what
        await asyncio.sleep(0.1)


async def test_a_tenants_hanging_calls_leave_the_others_their_share(
    shared: Council, sim: SimulatorServer
) -> None:
    hogs = [
        await start(shared, "hog", HANGING, max_rounds=1, policy=HOG_POLICY)
        for _ in range(HOG_RUNS)
    ]
    try:

        async def taken() -> bool:
            # As many of the hog's calls as the worker will take: every one of its calls
            # (when the worker takes more calls than it sends) or all it sends.
            return await started_calls(hogs) >= CALLS and sim.log()["in_flight"] >= CALLS // 2

        await eventually(taken, 30, "the hog's calls never reached the worker")

        began = time.monotonic()
        honest = await start(shared, "honest", ["sim/atlas", "sim/borealis"], max_rounds=1)
        try:
            record = await asyncio.wait_for(honest.result(), HONEST_SECONDS)
        except TimeoutError:
            raise AssertionError(
                f"the honest run made no progress in {HONEST_SECONDS} s beside the hog's "
                f"hanging calls: {await started_calls([honest])} of its calls started"
            ) from None
        assert record.stage3 is not None
        print(f"honest run beside the hog: {time.monotonic() - began:.1f} s")
        # The hog never had more than its share with the provider at once.
        assert sim.log()["in_flight"] <= CALLS // 2 + 1

        # Stopping the hog's runs gives their calls back at once: the hanging requests are
        # cancelled within a heartbeat, and a new run of the hog has its calls sent.
        seen = len(sim.log()["entries"])
        for handle in hogs:
            await handle.signal(Deliberation.stop, "test: stop the hog")
        stopped = time.monotonic()
        again = await start(shared, "hog", ["hog/d", "hog/e"], max_rounds=1, policy=HOG_POLICY)
        hogs.append(again)

        async def new_calls_sent() -> bool:
            return len(requests_of(sim, ["hog/d", "hog/e"])) >= 2

        await eventually(new_calls_sent, 15, "the new run's calls were never sent")

        async def old_calls_ended() -> bool:
            return all(e["finished"] for e in requests_of(sim, HANGING))

        await eventually(old_calls_ended, 15, "the stopped runs' requests were never cancelled")
        given_back = time.monotonic() - stopped
        print(f"the stopped runs' calls given back, the new run's sent: {given_back:.1f} s")
        assert len(sim.log()["entries"]) > seen
    finally:
        for handle in hogs:
            with contextlib.suppress(RPCError):
                await handle.terminate("test over")


@pytest.mark.fast
def test_a_workers_shares_by_default() -> None:
    """Each tenant sends at most half the worker's calls, a run a stage's worth (at most its
    tenant's share), and twice as many calls as are sent wait for their turn."""
    shares = CallShares.of_worker(200)
    assert (shares.total, shares.per_tenant, shares.per_run) == (200, 100, 12)
    assert waiting_calls(200, None) == 400 and waiting_calls(200, 0) == 0
    few = CallShares.of_worker(1)
    assert (few.per_tenant, few.per_run) == (1, 1)
    assert CallShares.of_worker(8, per_tenant=6, per_run=7).per_run == 6


@pytest.mark.fast
async def test_a_tenant_over_its_share_waits_and_the_others_go_first() -> None:
    shares = CallShares(total=4, per_tenant=2, per_run=2)
    held: list[asyncio.Event] = []
    went: list[str] = []

    async def call(tenant: str, run: str) -> None:
        release = asyncio.Event()
        held.append(release)
        async with shares.turn(Caller(tenant, f"{tenant}/{run}")):
            went.append(tenant)
            await release.wait()

    hog = [asyncio.create_task(call("hog", str(i))) for i in range(6)]
    await _until(lambda: shares.waiting == 4)
    assert shares.sent == 2 and shares.sent_for("hog") == 2
    honest = [asyncio.create_task(call("honest", "1")) for _ in range(2)]
    await _until(lambda: shares.sent_for("honest") == 2)
    assert shares.sent == 4 and went[-2:] == ["honest", "honest"]
    # A waiting call that is cancelled (its run stopped) leaves the queue at once.
    hog[-1].cancel()
    await _until(lambda: shares.waiting == 3)
    for task in [*hog, *honest]:
        task.cancel()
    await asyncio.gather(*hog, *honest, return_exceptions=True)
    assert shares.sent == 0 and shares.waiting == 0


async def _until(check: Callable[[], bool]) -> None:
    async def checked() -> bool:
        return check()

    await eventually(checked, 5, "never came to pass")
