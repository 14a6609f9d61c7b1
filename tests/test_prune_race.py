"""`store prune` against runs that are just starting: a client stores a run's input before
the run's first event exists, so a prune in that window must keep the blob whatever grace
it is given; and a run whose input blob is gone all the same fails with one line that
names the blob and the store, instead of retrying its first workflow task for good.

Each test has a namespace of its own on the session's server, so that a prune reads only
the runs the test started, and a store of its own, so that it sweeps only their blobs."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from google.protobuf.duration_pb2 import Duration
from temporalio.api.workflowservice.v1 import RegisterNamespaceRequest
from temporalio.client import Client, WorkflowExecutionStatus, WorkflowFailureError
from temporalio.converter import (
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
    WorkflowSerializationContext,
)
from temporalio.testing import WorkflowEnvironment

from app.store import prune, store
from app.temporal import connection
from council.validation import validate_request
from runs import finding, starting
from runs.attributes import ensure_search_attributes
from simulator import SimulatorServer
from tests.temporal_fixtures import council_worker, request, temporal_address
from workflows.deliberation import Deliberation

# A question long enough that the run's input goes to the store.
LONG_QUESTION = "Which of these queues suits a small team? " + "Some context. " * 400


@pytest.fixture
async def isolated(temporal: WorkflowEnvironment, tmp_path: Path) -> AsyncIterator[Client]:
    """A client on a namespace of its own, with a store of its own (the data converter
    every client and worker has)."""
    namespace = f"prune-{uuid.uuid4().hex[:10]}"
    await temporal.client.workflow_service.register_namespace(
        RegisterNamespaceRequest(
            namespace=namespace, workflow_execution_retention_period=Duration(seconds=86_400)
        )
    )
    env = {"COUNCIL_STORE": str(tmp_path / "store"), "COUNCIL_STORE_THRESHOLD": "1024"}
    client = await Client.connect(
        temporal_address(temporal),
        namespace=namespace,
        data_converter=connection.data_converter(env),
    )
    await ensure_search_attributes(client)
    yield client


def blob_path(client: Client, digest: str) -> Path:
    [driver] = client.data_converter.external_storage.drivers  # type: ignore[union-attr]
    assert isinstance(driver, store.LocalStore)
    return driver.path(client.namespace, digest)


async def input_digest(client: Client, workflow_id: str) -> str:
    """The blob that holds a run's input, from its first event."""
    handle = client.get_workflow_handle(workflow_id)
    async for event in handle.fetch_history_events():
        started = event.workflow_execution_started_event_attributes
        [ref] = await store.references(list(started.input.payloads))
        return ref.claim_data["sha256"]
    raise AssertionError("the run has no first event")


async def test_a_prune_keeps_an_input_stored_before_its_run_exists(isolated: Client) -> None:
    """The window itself, held open: the client has stored a run's input (as a start does,
    for the run's id) and the run has no event yet. `prune --grace 0` then sees a blob that
    no history names; it must keep it, and it says that it kept blobs younger than its
    floor."""
    client = isolated
    wid = f"not-started-yet-{uuid.uuid4().hex[:8]}"
    converter = client.data_converter._with_contexts(
        WorkflowSerializationContext(namespace=client.namespace, workflow_id=wid),
        StorageDriverStoreContext(
            target=StorageDriverWorkflowInfo(
                id=wid, type=Deliberation.__name__, namespace=client.namespace
            )
        ),
    )
    [stored] = await converter.encode([request(LONG_QUESTION)])
    ref = store.reference(stored)
    assert ref is not None, "the input travels by reference"
    blob = blob_path(client, ref.claim_data["sha256"])
    assert blob.is_file()

    pruned = await prune.prune(client, grace_seconds=0)
    assert blob.is_file(), f"prune --grace 0 deleted the input of a starting run: {pruned}"
    assert pruned.deleted == 0 and pruned.kept_recent == 1
    assert pruned.grace_seconds >= prune.MIN_GRACE_SECONDS


async def pruned_once_stored(client: Client, before: set[Path]) -> prune.Pruned:
    """`prune --grace 0` the moment a file that was not in the store appears in it."""
    folder = blob_path(client, "0" * 64).parents[2]
    deadline = asyncio.get_running_loop().time() + 10
    while not (folder.exists() and set(folder.rglob("*")) - before):
        assert asyncio.get_running_loop().time() < deadline, "no input was stored"
        await asyncio.sleep(0.001)
    return await prune.prune(client, grace_seconds=0)


async def test_a_prune_racing_starts_never_removes_a_new_runs_input(isolated: Client) -> None:
    """`store prune --grace 0` started the moment a run's input is in the store, while the
    start's request is on its way to the server, many times over: every run's input is
    still in the store afterwards. (On the code without the grace's floor, most tries lost
    the input.)"""
    client = isolated
    queue = f"nobody-{uuid.uuid4().hex[:8]}"  # no worker: the run waits, as in the report
    folder = blob_path(client, "0" * 64).parents[2]
    lost = []
    for attempt in range(10):
        wanted = validate_request(request(f"Try {attempt}. {LONG_QUESTION}"))
        before = set(folder.rglob("*")) if folder.exists() else set()
        handle, _ = await asyncio.gather(
            starting.start(client, wanted, queue), pruned_once_stored(client, before)
        )
        digest = await input_digest(client, handle.id)
        if not blob_path(client, digest).is_file():
            lost.append(handle.id)
    assert lost == [], f"prune --grace 0 removed the input of {len(lost)} of 10 new runs"


async def test_a_run_whose_input_is_gone_fails_in_one_line(
    isolated: Client, sim: SimulatorServer
) -> None:
    """A run started while no worker ran, whose input blob was removed before a worker came:
    the worker cannot read the input, and the run fails at once with a reason that names
    the blob and the store (it used to retry its first workflow task for good, stuck in
    stage 1, with no reason anywhere a user looks)."""
    client = isolated
    queue = f"later-{uuid.uuid4().hex[:8]}"
    handle = await starting.start(client, validate_request(request(LONG_QUESTION)), queue)
    digest = await input_digest(client, handle.id)
    blob_path(client, digest).unlink()

    async with council_worker(client, sim, queue=queue):
        deadline = asyncio.get_running_loop().time() + 30
        while (await handle.describe()).status == WorkflowExecutionStatus.RUNNING:
            assert asyncio.get_running_loop().time() < deadline, (
                "the run whose input is gone is still running after 30 s"
            )
            await asyncio.sleep(0.2)
        with pytest.raises(WorkflowFailureError) as failed:
            await handle.result()
    reason = finding.failure_reason(failed.value)
    root = blob_path(client, digest).parents[4]
    assert reason.startswith(f"payload store {root}: blob sha256:{digest} is missing"), reason
    assert "\n" not in reason
    assert (await handle.describe()).status == WorkflowExecutionStatus.FAILED


@pytest.mark.fast
def test_a_blob_stored_again_while_the_sweep_decides_stays(tmp_path: Path) -> None:
    """The sweep read an old blob's age; before it deletes, a writer stores the same bytes
    again (the store touches the blob and hands out a reference to it): the blob stays."""
    blob = tmp_path / ("ab" * 32)
    blob.write_bytes(b"the same bytes")
    old = time.time() - 2 * prune.MIN_GRACE_SECONDS
    os.utime(blob, (old, old))
    cutoff = time.time() - prune.MIN_GRACE_SECONDS
    os.utime(blob)  # the writer's touch, after the sweep read the age
    assert not prune._set_aside_unless_touched(blob, cutoff)
    assert blob.read_bytes() == b"the same bytes"
    assert [p.name for p in tmp_path.iterdir()] == [blob.name]
    os.utime(blob, (old, old))  # untouched since: it goes
    assert prune._set_aside_unless_touched(blob, cutoff)
    assert list(tmp_path.iterdir()) == []
