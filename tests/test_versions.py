"""Versions by worker deployment: two builds side by side on one task queue.

A run started on the old build finishes there while new runs go to the new one, once an
operator makes it current; each run shows the build it is pinned to (what `temporal
workflow describe` shows); a worker alone makes its build current when the deployment
has none, and says which build new runs go to when it is not the current one.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from types import SimpleNamespace
from typing import cast

import pytest
from temporalio.api.enums.v1 import VersioningBehavior
from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentResponse,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client, WorkflowHandle
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment

from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from app.temporal import deployment
from council.calls import Stage
from service.worker import serving
from simulator import SimulatorServer
from tests.temporal_fixtures import TEST_API_KEY, Council, stage_started, until

NEW_RUNS = ": new runs start on it"


async def pinned_to(handle: WorkflowHandle) -> tuple[int, str]:
    """The run's versioning behavior and the build it is pinned to."""
    info = (await handle.describe()).raw_description.workflow_execution_info.versioning_info
    return info.behavior, info.deployment_version.build_id


async def builds_that_ran(handle: WorkflowHandle) -> set[str]:
    """The builds of the workers that completed the run's workflow tasks."""
    builds = set()
    async for event in handle.fetch_history_events():
        if event.HasField("workflow_task_completed_event_attributes"):
            attributes = event.workflow_task_completed_event_attributes
            builds.add(attributes.deployment_version.build_id)
    return builds


async def make_current(client: Client, queue: str, build: str) -> None:
    """What an operator does (`temporal worker deployment set-current-version`): refused
    until the new build's workers poll every task queue the current one serves, and until
    the deployment has heard of the build at all (its first poll registers it)."""
    request = SetWorkerDeploymentCurrentVersionRequest(
        namespace=client.namespace, deployment_name=queue, build_id=build
    )
    for _ in range(100):
        try:
            await client.workflow_service.set_worker_deployment_current_version(request)
            return
        except RPCError as error:
            registering = error.status == RPCStatusCode.NOT_FOUND and build in error.message
            if "missing active task queues" not in error.message and not registering:
                raise
            await asyncio.sleep(0.1)
    raise AssertionError(f"build {build} never became current")


async def test_a_run_finishes_on_the_build_it_started_on(
    temporal: WorkflowEnvironment, sim: SimulatorServer
) -> None:
    client = temporal.client
    queue = f"council-versions-{uuid.uuid4().hex[:8]}"
    settings = GatewaySettings(base_url=sim.url, api_key=TEST_API_KEY)
    sim.set_faults({"*": {"latency": 0.6}})
    async with (
        ModelGateway(settings) as old_gateway,
        ModelGateway(settings) as new_gateway,
        serving(client, old_gateway, queue=queue, build="old") as routing,
    ):
        assert routing == f"build old is now the current version of deployment {queue}{NEW_RUNS}"
        council = Council(client, queue, sim)
        first = await council.start(max_rounds=1, min_rounds=1, stop_on_convergence=False)
        await until(first, stage_started(Stage.REVIEW))

        async with serving(client, new_gateway, queue=queue, build="new") as routing:
            # Beside a current build, a new one does not take over by itself.
            assert routing.startswith(f"this worker serves build new of deployment {queue}")
            assert "new runs start on build old" in routing
            await make_current(client, queue, "new")
            second = await council.start(max_rounds=1)
            assert await deployment.current_build(client, queue) == "new"

            await first.result()
            await second.result()
    # The first run was pinned to the old build and ran there to its end, after the new
    # build became current; the second started on the new one.
    assert await pinned_to(first) == (VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, "old")
    assert await pinned_to(second) == (VersioningBehavior.VERSIONING_BEHAVIOR_PINNED, "new")
    assert await builds_that_ran(first) == {"old"}
    assert await builds_that_ran(second) == {"new"}


@pytest.mark.fast
def test_the_build_id_is_the_package_version_unless_set() -> None:
    from app.settings.environment import Settings, SettingsError

    assert Settings.read({}).build_id is None
    assert deployment.build_id() == deployment.package_version()  # this process: none set
    assert Settings.read({"COUNCIL_BUILD_ID": "2026-11-25.1"}).build_id == "2026-11-25.1"
    try:
        Settings.read({"COUNCIL_BUILD_ID": "a b"})
    except SettingsError as error:
        assert str(error).startswith("COUNCIL_BUILD_ID: ")
        assert "\n" not in str(error)
    else:
        raise AssertionError("a build id with a blank was taken")


class Answers:
    """A workflow service whose describe_worker_deployment gives these answers in turn (an
    error is raised): a stand-in for a busy server's passing errors, which cannot be had
    from a dev server on demand."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def describe_worker_deployment(self, request: object) -> object:
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def client_of(service: Answers) -> Client:
    return cast(Client, SimpleNamespace(namespace="default", workflow_service=service))


def described(build: str) -> DescribeWorkerDeploymentResponse:
    response = DescribeWorkerDeploymentResponse()
    response.worker_deployment_info.routing_config.current_deployment_version.build_id = build
    return response


@pytest.mark.fast
async def test_a_passing_error_of_the_server_is_asked_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(deployment, "POLL_SECONDS", 0)
    canceled = RPCError("operation was canceled", RPCStatusCode.CANCELLED, b"")
    closing = RPCError("workflow is closing", RPCStatusCode.RESOURCE_EXHAUSTED, b"")
    service = Answers(canceled, closing, described("after"))
    assert await deployment.current_build(client_of(service), "queue") == "after"
    assert service.asked == 3
    # None where there is no deployment; any other error at once.
    none = RPCError("no deployment", RPCStatusCode.NOT_FOUND, b"")
    assert await deployment.current_build(client_of(Answers(none)), "queue") is None
    denied = RPCError("denied", RPCStatusCode.PERMISSION_DENIED, b"")
    with pytest.raises(RPCError, match="denied"):
        await deployment.current_build(client_of(Answers(denied, described("unread"))), "queue")


async def test_a_worker_told_to_make_its_build_current_takes_over(
    temporal: WorkflowEnvironment, sim: SimulatorServer
) -> None:
    """`worker.py --make-current` (make up, make demo): a checkout at a new version takes
    over its local server's deployment from the last one."""
    client = temporal.client
    queue = f"council-take-over-{uuid.uuid4().hex[:8]}"
    settings = GatewaySettings(base_url=sim.url, api_key=TEST_API_KEY)
    async with (
        ModelGateway(settings) as gateway,
        ModelGateway(settings) as later,
        serving(client, gateway, queue=queue, build="before"),
    ):
        assert await deployment.current_build(client, queue) == "before"
        async with serving(client, later, queue=queue, build="after", take_over=True) as line:
            assert line == f"build after is now the current version of deployment {queue}{NEW_RUNS}"
            assert await deployment.current_build(client, queue) == "after"
            record = await Council(client, queue, sim).run(max_rounds=1)
    assert record.status == "completed"


async def test_a_failed_run_carries_its_record_and_needs_no_worker_to_be_read(
    temporal: WorkflowEnvironment, sim: SimulatorServer
) -> None:
    """A closed run's record never needs a build's workers: a completed run's is its
    result, a failed run's travels in the details of its failure."""
    from temporalio.client import WorkflowFailureError

    from runs import finding
    from tests.temporal_fixtures import council_worker
    from web.reading import read_turn

    sim.set_faults({"*": {"errors": {"400": 1.0}}, "sim/atlas": {"errors": {}}})
    async with council_worker(temporal.client, sim) as council:
        handle = await council.start(max_rounds=1)
        with contextlib.suppress(WorkflowFailureError):
            await handle.result()
    # No worker polls the run's task queue any more.
    try:
        await finding.read_record(handle)
    except WorkflowFailureError as failure:
        record = finding.failed_record(failure)
    else:
        raise AssertionError("the run did not fail")
    assert record is not None and record.status == "failed"
    assert [r.model for r in record.stage1] == ["sim/atlas"]
    assert {e.model for e in record.errors} == {"sim/borealis", "sim/cirrus", "sim/drift"}
    found = await finding.find(temporal.client, handle.id)
    turn = await read_turn(found)
    assert turn.record == record
    assert turn.problem is not None and "fewer than two models answered" in turn.problem
