"""Encrypted payloads end to end: a deliberation started by the CLI and run by a worker
with COUNCIL_PAYLOAD_KEY leaves no question, answer or critique in Temporal's history or
in the payload store's blobs;
the temporal CLI decodes it through the codec server; the history replays with the
codec; the key shows up nowhere."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest
from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHistory
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.worker import Replayer

from app.codec.encryption import new_key
from app.store import store
from app.temporal import connection
from council.models import DeliberationRecord
from harness import processes
from simulator import SimulatorServer
from tests.temporal_fixtures import FOUR_MODELS, council_worker, temporal_address
from workflows.deliberation import Deliberation

KEY = new_key()
KEY_ID = "test-2025"
CODEC_TOKEN = "codec-token-" + uuid.uuid4().hex[:8]
QUESTION = "Should the lighthouse keeper of Skerryvore automate the foghorn schedule?"


def plaintexts(record: DeliberationRecord) -> list[str]:
    """What must not be readable at rest: the question, every answer, review and critique."""
    texts = [record.query]
    texts += [r.response for r in record.stage1]
    texts += [r.ranking for r in record.stage2]
    for refined in record.stage2_5 or []:
        texts += [refined.corrected_response, refined.peer_critiques]
    texts += [record.stage3.response] if record.stage3 else []
    return [t for t in texts if t.strip()]


def probes(texts: Iterable[str]) -> set[bytes]:
    """Slices of each text, raw and as they look inside a JSON payload."""
    found: set[bytes] = set()
    for text in texts:
        slices = (
            {text}
            if len(text) <= 40
            else {text[:40], text[len(text) // 2 : len(text) // 2 + 40], text[-40:]}
        )
        for piece in slices:
            found.add(piece.encode())
            found.add(json.dumps(piece)[1:-1].encode())
    return found


def leaks(history: WorkflowHistory, texts: Iterable[str]) -> list[bytes]:
    raw = b"".join(event.SerializeToString() for event in history.events)
    rendered = history.to_json().encode()
    return sorted(p for p in probes(texts) if p in raw or p in rendered)


@dataclass
class EncryptedRun:
    address: str
    workflow_id: str
    record: DeliberationRecord
    history: WorkflowHistory  # fetched with a plain client: what the server stores
    starter_output: str
    env: dict[str, str]


async def starter(env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    """`python starter.py ...` without blocking the in-process worker's event loop."""
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "starter.py",
        *args,
        cwd=processes.ROOT,
        env={**os.environ, **env},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(process.communicate(), 90)
    return subprocess.CompletedProcess(args, process.returncode, out.decode(), err.decode())


@pytest.fixture(scope="module")
async def encrypted(
    temporal, simulator: SimulatorServer, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[EncryptedRun]:
    simulator.set_faults(None)
    env = {
        "COUNCIL_PAYLOAD_KEY": KEY,
        "COUNCIL_PAYLOAD_KEY_ID": KEY_ID,
        # A store of this run's alone, with a low threshold: most payloads become blobs.
        "COUNCIL_STORE": str(tmp_path_factory.mktemp("encrypted") / "store"),
        "COUNCIL_STORE_THRESHOLD": "512",
    }
    address = temporal_address(temporal)
    client = await Client.connect(address, data_converter=connection.data_converter(env))
    async with council_worker(client, simulator) as council:
        cli_env = {
            **env,
            "TEMPORAL_ADDRESS": address,
            "COUNCIL_TASK_QUEUE": council.task_queue,
            "COUNCIL_MODELS": ",".join(FOUR_MODELS),
        }
        # The CLI builds its converter in app.temporal.connection, as the worker does.
        done = await starter(
            cli_env,
            "start",
            QUESTION,
            "--max-rounds",
            "1",
            "--quality-threshold",
            "5",
            "--wait",
            "--json",
        )
        assert done.returncode == 0, done.stderr
    record = DeliberationRecord.model_validate_json(done.stdout)
    history = await temporal.client.get_workflow_handle(record.id).fetch_history()
    yield EncryptedRun(address, record.id, record, history, done.stdout + done.stderr, cli_env)


async def test_history_at_rest_holds_no_plaintext(encrypted: EncryptedRun) -> None:
    record = encrypted.record
    assert record.stage3 is not None and record.stage2_5, "the run refined and synthesized"
    texts = plaintexts(record)
    assert len(texts) >= 10
    assert leaks(encrypted.history, texts) == []
    # The workflow id is stored in clear: the starter leaves the question out of it.
    assert (
        encrypted.workflow_id.startswith("council-") and "lighthouse" not in encrypted.workflow_id
    )
    # Every payload in the history is ciphertext under our key id, or a store reference.
    assert payload_encodings(encrypted.history) == {"binary/encrypted"}
    references = [p for e in encrypted.history.events for p in store.payloads_in(e)]
    assert any(store.reference(p) for p in references)


async def test_stored_blobs_hold_no_plaintext(encrypted: EncryptedRun) -> None:
    """The SDK encrypts before it stores: a blob is an encrypted payload."""
    root = Path(encrypted.env["COUNCIL_STORE"])
    contents = await asyncio.to_thread(
        lambda: [p.read_bytes() for p in root.rglob("*") if p.is_file()]
    )
    assert len(contents) >= 10
    assert [
        probe for probe in probes(plaintexts(encrypted.record)) if any(probe in c for c in contents)
    ] == []
    for content in contents:
        payload = Payload.FromString(content)
        assert payload.metadata["encoding"] == b"binary/encrypted"
        assert payload.metadata["encryption-key-id"] == KEY_ID.encode()
    assert not any(KEY.encode() in c or base64.b64decode(KEY) in c for c in contents)
    raw = b"".join(e.SerializeToString() for e in encrypted.history.events)
    assert KEY.encode() not in raw and base64.b64decode(KEY) not in raw
    assert KEY not in encrypted.starter_output


def payload_encodings(history: WorkflowHistory) -> set[str]:
    """The encoding of every payload in the history, search attributes aside (they are
    indexed by the server, so they stay readable: stage, round, termination reason), and
    so are the SDK's own patch markers, should a history hold any (they hold only a patch
    id), and the SDK's bookkeeping of a local activity (its sequence number, attempt, type
    and time; its result is encrypted like any other)."""
    found: set[str] = set()

    def walk(node) -> None:
        if isinstance(node, dict):
            if node.get("markerName") == "core_patch":
                return
            if node.get("markerName") == "core_local_activity":
                walk(node.get("details", {}).get("result"))
                return
            if set(node) >= {"metadata", "data"} and b"ExternalStorageReference" in (
                base64.b64decode(node["metadata"].get("messageType", ""))
            ):
                return  # a store reference: a hash, the blob is encrypted
            if set(node) >= {"metadata", "data"} and "encoding" in node["metadata"]:
                found.add(base64.b64decode(node["metadata"]["encoding"]).decode())
            for key, value in node.items():
                if key != "searchAttributes":
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(history.to_json()))
    return found


async def test_the_same_check_finds_plaintext_without_encryption(council, temporal) -> None:
    """Control: the leak check is able to see plaintext when payloads are not encrypted."""
    handle = await council.start(QUESTION, max_rounds=1, quality_threshold=5)
    record = await handle.result()
    history = await temporal.client.get_workflow_handle(handle.id).fetch_history()
    found = leaks(history, plaintexts(record))
    assert len(found) >= len(plaintexts(record))


async def test_a_client_with_the_key_reads_the_record(encrypted: EncryptedRun) -> None:
    client = await Client.connect(
        encrypted.address, data_converter=connection.data_converter(encrypted.env)
    )
    handle = client.get_workflow_handle(encrypted.workflow_id, result_type=DeliberationRecord)
    assert (await handle.result()) == encrypted.record
    described = await handle.describe()
    assert await described.static_summary() == QUESTION  # the UI summary, decrypted
    # Without the key, the result cannot be read, even by a client that reads the store.
    plain = await Client.connect(
        encrypted.address,
        data_converter=connection.data_converter({"COUNCIL_STORE": encrypted.env["COUNCIL_STORE"]}),
    )
    with pytest.raises(KeyError, match="Unknown payload encoding binary/encrypted"):
        await plain.get_workflow_handle(
            encrypted.workflow_id, result_type=DeliberationRecord
        ).result()


@pytest.fixture(scope="module")
def codec_server(tmp_path_factory, encrypted: EncryptedRun) -> processes.Process:
    port = processes.free_port()
    log = tmp_path_factory.mktemp("codec") / "codec-server.log"
    process = processes.spawn(
        "codec-server",
        [sys.executable, "-m", "app.codec.server", "--host", "127.0.0.1", "--port", str(port)],
        log,
        {
            "COUNCIL_PAYLOAD_KEY": KEY,
            "COUNCIL_PAYLOAD_KEY_ID": KEY_ID,
            "COUNCIL_CODEC_TOKEN": CODEC_TOKEN,
            # The run's store: /decode reads the blobs its history references.
            "COUNCIL_STORE": encrypted.env["COUNCIL_STORE"],
        },
    )
    processes.wait_for(
        lambda: processes.port_open("127.0.0.1", port), "codec server", process, timeout=30
    )
    process.extra["url"] = f"http://127.0.0.1:{port}"
    yield process
    process.stop()
    assert KEY not in process.log_text() and CODEC_TOKEN not in process.log_text()


def temporal_cli(run: EncryptedRun, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [
            processes.temporal_binary(),
            "workflow",
            "show",
            "--workflow-id",
            run.workflow_id,
            "--address",
            run.address,
            "--output",
            "json",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env={k: v for k, v in os.environ.items() if not k.startswith("TEMPORAL_")},
    )


def decoded_payload_text(cli_json: str) -> str:
    """Every payload's data in `temporal workflow show -o json`, base64-decoded."""
    texts: list[str] = []

    def walk(node) -> None:
        if isinstance(node, dict):
            if set(node) >= {"metadata", "data"} and isinstance(node["data"], str):
                texts.append(base64.b64decode(node["data"]).decode(errors="replace"))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(json.loads(cli_json))
    return "\n".join(texts)


async def test_temporal_cli_decodes_through_the_codec_server(
    encrypted: EncryptedRun, codec_server
) -> None:
    url = codec_server.extra["url"]
    shown = temporal_cli(
        encrypted, "--codec-endpoint", url, "--codec-auth", f"Bearer {CODEC_TOKEN}"
    )
    assert shown.returncode == 0, shown.stderr
    text = decoded_payload_text(shown.stdout)
    record = encrypted.record
    assert QUESTION in text
    assert record.stage3 is not None
    for answer in (r.response for r in record.stage1):
        assert json.dumps(answer[:60])[1:-1] in text
    assert "binary/encrypted" not in shown.stdout and "YmluYXJ5L2VuY3J5cHRlZA==" not in shown.stdout

    # Without the codec endpoint, or with a wrong token, the CLI sees only ciphertext.
    bare = temporal_cli(encrypted)
    assert bare.returncode == 0, bare.stderr
    assert QUESTION not in decoded_payload_text(bare.stdout)
    assert "YmluYXJ5L2VuY3J5cHRlZA==" in bare.stdout  # base64 of binary/encrypted
    # (The CLI retries a refused codec call until its deadline: keep that short.)
    refused = temporal_cli(
        encrypted,
        "--codec-endpoint",
        url,
        "--codec-auth",
        "Bearer wrong",
        "--command-timeout",
        "2s",
    )
    assert refused.returncode != 0 and QUESTION not in refused.stdout + refused.stderr
    assert KEY not in shown.stdout + shown.stderr + bare.stdout + refused.stdout + refused.stderr


async def test_encrypted_history_replays_with_the_codec(encrypted: EncryptedRun) -> None:
    history = WorkflowHistory.from_json(encrypted.workflow_id, encrypted.history.to_json())
    replayer = Replayer(
        workflows=[Deliberation], data_converter=connection.data_converter(encrypted.env)
    )
    result = await replayer.replay_workflow(history, raise_on_replay_failure=False)
    assert result.replay_failure is None

    # After a key rotation, the old key (in COUNCIL_PAYLOAD_OLD_KEYS) still replays it.
    rotated = {
        "COUNCIL_STORE": encrypted.env["COUNCIL_STORE"],
        "COUNCIL_PAYLOAD_KEY": new_key(),
        "COUNCIL_PAYLOAD_KEY_ID": "test-2026",
        "COUNCIL_PAYLOAD_OLD_KEYS": f"{KEY_ID}:{KEY}",
    }
    replayer = Replayer(workflows=[Deliberation], data_converter=connection.data_converter(rotated))
    assert (
        await replayer.replay_workflow(history, raise_on_replay_failure=False)
    ).replay_failure is None

    # Without the key, replay cannot even read the input.
    plain = Replayer(workflows=[Deliberation], data_converter=pydantic_data_converter)
    assert (
        await plain.replay_workflow(history, raise_on_replay_failure=False)
    ).replay_failure is not None


def test_bad_key_stops_the_worker_and_the_starter_with_one_line() -> None:
    secret = "c2hvcnQta2V5"  # 9 bytes of base64: the wrong length
    env = {**os.environ, "COUNCIL_PAYLOAD_KEY": secret, "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    for command in (["worker.py"], ["starter.py", "list"]):
        done = subprocess.run(
            [sys.executable, *command],
            cwd=processes.ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert done.returncode == 2, done.stderr
        assert done.stderr.count("\n") == 1, done.stderr
        assert "COUNCIL_PAYLOAD_KEY must be 32 random bytes" in done.stderr
        assert secret not in done.stderr + done.stdout
