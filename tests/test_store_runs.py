"""Texts travel by reference: the hostile runs that Temporal's 4 MiB message limit used to
terminate complete with their record, on the dev server, with the default threshold; no
payload in their history is over 256 KB and every workflow task's commands stay far
below 4 MiB."""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from pathlib import Path

from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.api.workflowservice.v1 import DeleteWorkflowExecutionRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.service import RPCError, RPCStatusCode
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Replayer

from app.codec.encryption import new_key
from app.requests import attachments, front_door
from app.store import prune, store
from app.temporal import connection
from council import limits
from council.config import Config
from council.models import DeliberationRecord
from runs import finding, starting
from simulator import SimulatorServer
from tests.attachment_files import pdf
from tests.history_bounds import GRPC_LIMIT, TWELVE, check_run
from tests.temporal_fixtures import (
    FOUR_MODELS,
    Council,
    council_worker,
    request,
    starter,
    temporal_address,
)
from workflows.deliberation import Deliberation


async def test_twelve_members_with_a_long_control_character_context_complete(
    default_store: Council,
) -> None:
    council = default_store
    context = "\x01" * 84_000
    handle = await council.client.start_workflow(
        Deliberation.run,
        request(
            models=TWELVE,
            max_rounds=1,
            context_tokens=32_000,
            history=[{"id": "earlier-turn", "question": "And before?", "answer": context}],
        ),
        id=f"test-store-context-{uuid.uuid4().hex[:8]}",
        task_queue=council.task_queue,
        result_type=DeliberationRecord,
    )
    record = await handle.result()
    assert record.stage3 is not None and record.stage3.response
    assert len(record.stage1) == 12 and record.errors == []
    assert record.context is not None and record.context.turns == ["earlier-turn"]
    largest, task, inline = await check_run(handle)
    print(
        f"\n12 members, 84,000 control characters of context: largest payload {largest:,} B, "
        f"largest task's commands {task:,} B ({inline:,} B had nothing been stored)"
    )
    # Without the store this stage would not have fitted in one gRPC message.
    assert inline > GRPC_LIMIT


async def test_twelve_members_given_megabyte_replies_complete(default_store: Council) -> None:
    council = default_store
    # Prose padded to a megabyte (filler after a JSON reply would leave it unparsable).
    council.sim.set_faults(
        {
            "*": {
                "pad_to_bytes": 1_000_000,
                "pad_with": "\x01",
                "ignore_max_tokens": True,
                "structured": False,
            }
        }
    )
    handle = await council.client.start_workflow(
        Deliberation.run,
        # Every member waited for: on a loaded machine the straggler rule may otherwise cut
        # a reviewer of megabytes (what is under test here is the store, not that rule).
        request(
            models=TWELVE,
            max_rounds=1,
            quality_threshold=5,
            stop_on_convergence=False,
            stragglers={"wait_for_all": True},
        ),
        id=f"test-store-replies-{uuid.uuid4().hex[:8]}",
        task_queue=council.task_queue,
        result_type=DeliberationRecord,
    )
    record = await handle.result()
    assert record.stage3 is not None and len(record.stage1) == 12
    assert len(record.stage2) == 12
    cap = limits.response_byte_cap(12, limits.MAX_ROUNDS)
    assert all(len(r.response.encode()) == cap for r in record.stage1)
    largest, task, inline = await check_run(handle)
    print(
        f"\n12 members, 1 MB replies of control characters: largest payload {largest:,} B, "
        f"largest task's commands {task:,} B ({inline:,} B had nothing been stored)"
    )
    assert inline > task * 4


# ---- prune: the blobs of deleted runs go, the others stay --------------------------------


def digests(history_events: list[HistoryEvent]) -> set[str]:
    return {
        ref.claim_data["sha256"]
        for event in history_events
        for payload in store.payloads_in(event)
        if (ref := store.reference(payload)) is not None
    }


async def test_prune_removes_the_blobs_of_a_deleted_run_only(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    env = {"COUNCIL_STORE": str(tmp_path / "store"), "COUNCIL_STORE_THRESHOLD": "1024"}
    address = temporal_address(temporal)
    client = await Client.connect(address, data_converter=connection.data_converter(env))
    async with council_worker(client, sim) as council:
        kept = await council.start("Which queue suits a small team?", max_rounds=1)
        gone = await council.start("Which cache suits a small team?", max_rounds=1)
        await kept.result()
        await gone.result()
    kept_blobs = digests(list((await kept.fetch_history()).events))
    gone_blobs = digests(list((await gone.fetch_history()).events)) - kept_blobs
    assert kept_blobs and gone_blobs
    blobs = {p.name: p for p in (tmp_path / "store").rglob("*") if p.is_file()}
    assert kept_blobs | gone_blobs <= set(blobs)

    cli = {**env, "TEMPORAL_ADDRESS": address}
    # While the namespace has both runs, nothing of theirs goes, whatever the grace.
    status, out, err = await starter("store", "prune", "--grace", "0", "--json", env=cli)
    assert status == 0, err
    assert not (kept_blobs | gone_blobs) & set(json.loads(out)["deleted_ids"])

    described = await gone.describe()
    await client.workflow_service.delete_workflow_execution(
        DeleteWorkflowExecutionRequest(
            namespace=client.namespace,
            workflow_execution=WorkflowExecution(workflow_id=gone.id, run_id=described.run_id),
        )
    )
    # The dev server deletes a closed run's history about half a minute after it is asked.
    deadline = asyncio.get_running_loop().time() + 120
    while True:
        try:
            await gone.fetch_history()
        except RPCError as error:
            assert error.status == RPCStatusCode.NOT_FOUND
            break
        assert asyncio.get_running_loop().time() < deadline, "the run was never deleted"
        await asyncio.sleep(0.5)

    # The deleted run's blobs as they are once its retention ended: older than the floor
    # on the grace period (which keeps what a starting run may need).
    aged = time.time() - 2 * prune.MIN_GRACE_SECONDS
    for digest in gone_blobs:
        os.utime(blobs[digest], (aged, aged))

    # Within the grace period nothing goes; a dry run deletes nothing.
    status, out, err = await starter("store", "prune", "--json", env=cli)
    assert status == 0, err
    within = json.loads(out)
    assert within["deleted"] == 0 and within["kept_recent"] >= len(gone_blobs)
    print(
        f"\nprune: {within['blobs']} blobs, {within['referenced']} referenced, runs read "
        f"{within['runs']}; this run's {len(kept_blobs)} and the deleted run's {len(gone_blobs)}"
    )
    status, out, err = await starter("store", "prune", "--grace", "0", "--dry-run", env=cli)
    assert status == 0, err
    assert "would delete" in out and all(blobs[d].exists() for d in kept_blobs | gone_blobs)

    status, out, err = await starter("store", "prune", "--grace", "0", "--json", env=cli)
    assert status == 0, err
    assert err.endswith(f"blobs younger than {prune.MIN_GRACE_SECONDS} s are kept\n")
    assert err.count("\n") == 1
    pruned = json.loads(out)
    assert pruned["grace_seconds"] == prune.MIN_GRACE_SECONDS
    assert gone_blobs <= set(pruned["deleted_ids"])
    assert not kept_blobs & set(pruned["deleted_ids"])
    assert not any(blobs[d].exists() for d in gone_blobs)
    assert all(blobs[d].exists() for d in kept_blobs)
    # The run that stays still reads whole, through a client of its own.
    reader = await Client.connect(address, data_converter=connection.data_converter(env))
    record = await reader.get_workflow_handle(kept.id, result_type=DeliberationRecord).result()
    assert record.stage3 is not None and record.query == "Which queue suits a small team?"


async def test_a_recorded_history_holds_its_stored_payloads_and_replays_without_the_store(
    council: Council,
) -> None:
    """What tests/record_histories.py commits: the payloads in place of the references."""
    from tests.record_histories import standalone

    handle = await council.start(max_rounds=1)
    await handle.result()
    history = await handle.fetch_history()
    assert any(store.reference(p) for e in history.events for p in store.payloads_in(e))
    whole = await standalone(council.client, history)
    assert not any(store.reference(p) for e in whole.events for p in store.payloads_in(e))
    replayer = Replayer(
        workflows=[Deliberation],
        data_converter=pydantic_data_converter,
    )
    result = await replayer.replay_workflow(whole, raise_on_replay_failure=False)
    assert result.replay_failure is None


async def test_show_says_which_blob_is_missing(council: Council, cli_env: dict[str, str]) -> None:
    """The record of a finished run is read from its history's result: with its blob
    gone, `show` says so in one line (exit status 1)."""
    handle = await council.start(max_rounds=1)
    await handle.result()
    events = list((await handle.fetch_history()).events)
    [completed] = [
        e for e in events if e.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED
    ]
    [result] = completed.workflow_execution_completed_event_attributes.result.payloads
    ref = store.reference(result)
    assert ref is not None, "the record travels by reference"
    digest = ref.claim_data["sha256"]
    root = os.environ["COUNCIL_STORE"]
    [blob] = await asyncio.to_thread(lambda: list(Path(root).rglob(digest)))
    blob.unlink()
    status, out, err = await starter("show", handle.id, env=cli_env)
    assert status == 1 and out == ""
    assert err.startswith(f"{handle.id}: completed: payload store ") and err.count("\n") == 1
    assert f"blob sha256:{digest} is missing" in err


async def test_a_pdfs_own_bytes_are_kept_in_the_store_sealed_and_marked_by_prune(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    """A PDF travels as its text; its own bytes are kept for its download, in the store
    whatever their size (the memo holds a reference), encrypted with the payload key, read
    back whole, and referenced for prune by the run's history."""
    env = {"COUNCIL_STORE": str(tmp_path / "store"), "COUNCIL_PAYLOAD_KEY": new_key()}
    client = await Client.connect(
        temporal_address(temporal), data_converter=connection.data_converter(env)
    )
    data = pdf("The memo says ship on Friday")
    assert len(data) < 32_768  # below the threshold: kept in the store all the same
    read = attachments.from_bytes("memo.pdf", data)
    wanted = front_door.compose(
        "What does the memo say?",
        {"models": FOUR_MODELS[:2], "max_rounds": 1},
        config=Config(),
        attachments=[read],
    )
    async with council_worker(client, sim) as council:
        handle = await starting.start(client, wanted, council.task_queue)
        record = await handle.result()
    assert [a.name for a in record.attachments] == ["memo.pdf"]
    found = await finding.find(client, handle.id)
    assert await finding.kept_originals(found) == {read.sha256}
    assert await finding.original_of(found, read.sha256) == data

    started = (await handle.fetch_history()).events[0]
    memo = started.workflow_execution_started_event_attributes.memo.fields
    [held] = [memo[key] for key in memo if key.startswith(finding.ORIGINAL_MEMO)]
    [ref] = await store.references([held], client.data_converter.payload_codec)
    blob = (tmp_path / "store").rglob(ref.claim_data["sha256"])
    [path] = list(blob)
    assert b"ship on Friday" not in path.read_bytes() and b"%PDF" not in path.read_bytes()
    _, marked = await prune.referenced(client)
    assert ref.claim_data["sha256"] in marked
