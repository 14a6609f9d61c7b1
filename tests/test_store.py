"""The payload store on its own: the directory store (content-addressed, sharded, atomic,
checked when read), its settings (one line naming the variable), and the S3 store against
an S3-compatible server (moto's) on 127.0.0.1: a round trip, encrypted blobs, a run
through it and its prune, and the doctor's check of each."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from google.protobuf import json_format
from temporalio.api.common.v1 import Payload, Payloads
from temporalio.client import Client
from temporalio.converter import StorageDriverStoreContext, StorageDriverWorkflowInfo
from temporalio.testing import WorkflowEnvironment

from app.settings.environment import Settings
from app.store import store
from app.temporal import connection
from app.temporal.connection import ConfigError
from council.models import DeliberationRecord
from doctor.store import store_check
from simulator import SimulatorServer
from tests.stored_payloads import stored_in
from tests.temporal_fixtures import council_worker, temporal_address

TEXT = "A long answer about queues. " * 200


def env_of(path: Path, threshold: int = 1024) -> dict[str, str]:
    return {"COUNCIL_STORE": str(path), "COUNCIL_STORE_THRESHOLD": str(threshold)}


async def test_a_large_payload_goes_to_the_directory_by_its_hash(tmp_path: Path) -> None:
    converter = connection.data_converter(env_of(tmp_path / "store"))
    stored, inline = await converter.encode([TEXT, "short"])
    ref = store.reference(stored)
    assert ref is not None and ref.driver_name == store.LOCAL_DRIVER
    assert store.reference(inline) is None
    digest = ref.claim_data["sha256"]
    [blob] = [p for p in (tmp_path / "store").rglob("*") if p.is_file()]
    # Content-addressed, sharded by the hash's first two bytes, no partial file left.
    assert blob.relative_to(tmp_path / "store").parts == (
        "~",
        "sha256",
        digest[:2],
        digest[2:4],
        digest,
    )
    assert hashlib.sha256(blob.read_bytes()).hexdigest() == digest
    assert await converter.decode([stored, inline], [str, str]) == [TEXT, "short"]
    # The same bytes again: the same blob.
    [again] = await converter.encode([TEXT])
    assert store.reference(again) == ref
    assert len([p for p in (tmp_path / "store").rglob("*") if p.is_file()]) == 1


async def test_a_missing_or_corrupt_blob_is_one_line_naming_store_and_hash(
    tmp_path: Path,
) -> None:
    root = tmp_path / "store"
    converter = connection.data_converter(env_of(root))
    [stored] = await converter.encode([TEXT])
    [blob] = [p for p in root.rglob("*") if p.is_file()]
    blob.write_bytes(blob.read_bytes()[:-1] + b"!")
    with pytest.raises(store.StoreError) as corrupt:
        await converter.decode([stored], [str])
    assert str(corrupt.value) == (
        f"payload store {root}: blob sha256:{blob.name} is corrupt: its content does not "
        "match its hash"
    )
    blob.unlink()
    with pytest.raises(store.StoreError) as missing:
        await converter.decode([stored], [str])
    assert f"payload store {root}: blob sha256:{blob.name} is missing" in str(missing.value)
    # Gone for good: a workflow task that needs it fails its run rather than retrying.
    assert isinstance(corrupt.value, store.LostBlob) and corrupt.value.non_retryable
    assert isinstance(missing.value, store.LostBlob) and missing.value.non_retryable
    assert "COUNCIL_STORE" in str(missing.value) and "\n" not in str(missing.value)


def test_the_store_settings(tmp_path: Path) -> None:
    default = Settings.read({"COUNCIL_DATA": str(tmp_path)})
    assert store.location(default) == store.StoreLocation("file", path=tmp_path / "store")
    assert default.store_threshold == 32 * 1024
    # There is no turning it off: it is what keeps every message within Temporal's limits.
    with pytest.raises(ConfigError, match="COUNCIL_STORE must be a directory"):
        connection.data_converter({"COUNCIL_STORE": "off"})
    s3 = store.location(Settings.read({"COUNCIL_STORE": "s3://council-payloads/prod/eu/"}))
    assert (s3.bucket, s3.prefix, str(s3)) == (
        "council-payloads",
        "prod/eu",
        "s3://council-payloads/prod/eu",
    )
    assert store.location(Settings.read({"COUNCIL_STORE": f"file:{tmp_path}"})).path == tmp_path


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (
            {"COUNCIL_STORE": "gs://bucket"},
            "COUNCIL_STORE must be a directory, file:PATH or s3://BUCKET[/PREFIX] "
            "(got 'gs://bucket')",
        ),
        ({"COUNCIL_STORE": "s3://A"}, "COUNCIL_STORE must be a directory, file:PATH or s3://"),
        ({"COUNCIL_STORE": "off"}, "COUNCIL_STORE must be a directory, file:PATH or s3://"),
        (
            {"COUNCIL_STORE_THRESHOLD": "32k"},
            "COUNCIL_STORE_THRESHOLD must be a whole number of bytes from 0 to 262144",
        ),
        ({"COUNCIL_STORE_THRESHOLD": "300000"}, "COUNCIL_STORE_THRESHOLD must be"),
    ],
)
def test_a_bad_store_setting_is_one_line(env: dict[str, str], message: str) -> None:
    with pytest.raises(connection.ConfigError) as error:
        connection.data_converter(env)
    assert str(error.value).startswith(message) and "\n" not in str(error.value)


async def test_doctor_checks_a_directory_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from app.settings import environment as app_settings

    monkeypatch.setenv("COUNCIL_STORE", str(tmp_path / "store"))
    app_settings.load()
    try:
        check = await store_check()
        assert check.ok and "is reachable, writable and readable" in check.detail
        assert [p for p in (tmp_path / "store").rglob("*") if p.is_file()] == []
        (tmp_path / "blocked").write_text("a file, not a directory")
        monkeypatch.setenv("COUNCIL_STORE", str(tmp_path / "blocked"))
        app_settings.load()
        check = await store_check()
        assert not check.ok and "cannot write blob" in check.detail
        assert check.fix is not None and "COUNCIL_STORE" in check.fix
    finally:
        monkeypatch.undo()
        app_settings.load()


# ---- S3, against moto's S3-compatible server on 127.0.0.1 ---------------------------------

BUCKET = "council-payloads"
OTHER_BUCKET = "another-teams-payloads"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def s3_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    port = free_port()
    log = (tmp_path_factory.mktemp("moto") / "moto.log").open("wb")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    deadline = time.monotonic() + 20
    while True:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                break
        assert server.poll() is None and time.monotonic() < deadline, "moto_server did not start"
        time.sleep(0.05)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.terminate()
        server.wait(10)
        log.close()


@pytest.fixture
async def s3(s3_server: str, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[str]:
    """AWS's own variables pointing at the local server, and a fresh bucket."""
    for name, value in {
        "AWS_ENDPOINT_URL": s3_server,
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    import aioboto3

    async with aioboto3.Session().client("s3") as client:
        await client.create_bucket(Bucket=BUCKET)
    yield s3_server
    await store.aclose()
    store._drivers.clear()


async def objects(prefix: str = "") -> dict[str, bytes]:
    import aioboto3

    async with aioboto3.Session().client("s3") as client:
        listed = await client.list_objects_v2(Bucket=BUCKET, Prefix=prefix)
        found = {}
        for item in listed.get("Contents", []):
            response = await client.get_object(Bucket=BUCKET, Key=item["Key"])
            async with response["Body"] as body:
                found[item["Key"]] = await body.read()
        return found


async def test_s3_store_round_trip_under_its_prefix(s3: str) -> None:
    converter = connection.data_converter(
        {"COUNCIL_STORE": f"s3://{BUCKET}/council/test", "COUNCIL_STORE_THRESHOLD": "1024"}
    )
    stored, inline = await converter.encode([TEXT, "short"])
    ref = store.reference(stored)
    assert ref is not None and ref.driver_name == store.S3_DRIVER
    assert store.reference(inline) is None
    [(key, blob)] = (await objects("council/test/")).items()
    assert key == f"council/test/{ref.claim_data['key']}"
    assert hashlib.sha256(blob).hexdigest() == ref.claim_data["hash_value"]
    assert await converter.decode([stored, inline], [str, str]) == [TEXT, "short"]

    import aioboto3

    async with aioboto3.Session().client("s3") as client:
        await client.delete_object(Bucket=BUCKET, Key=key)
    with pytest.raises(store.StoreError) as missing:
        await converter.decode([stored], [str])
    assert str(missing.value) == (
        f"payload store s3://{BUCKET}/council/test: blob "
        f"sha256:{ref.claim_data['hash_value']} is missing (removed by store prune, or "
        "written to another store: check COUNCIL_STORE)"
    )
    assert isinstance(missing.value, store.LostBlob) and missing.value.non_retryable


async def test_s3_blobs_are_encrypted_with_the_payload_key(s3: str) -> None:
    from app.codec.encryption import new_key

    converter = connection.data_converter(
        {
            "COUNCIL_STORE": f"s3://{BUCKET}/encrypted",
            "COUNCIL_STORE_THRESHOLD": "1024",
            "COUNCIL_PAYLOAD_KEY": new_key(),
        }
    )
    [stored] = await converter.encode([TEXT])
    assert store.reference(stored) is not None
    [blob] = (await objects("encrypted/")).values()
    assert b"queues" not in blob and b"binary/encrypted" in blob
    assert await converter.decode([stored], [str]) == [TEXT]


async def test_doctor_checks_an_s3_store(s3: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from app.settings import environment as app_settings

    monkeypatch.setenv("COUNCIL_STORE", f"s3://{BUCKET}/doctor")
    app_settings.load()
    try:
        check = await store_check()
        assert check.ok, check
        assert await objects("doctor/") == {}  # the probe is removed
        monkeypatch.setenv("COUNCIL_STORE", "s3://no-such-bucket-here")
        app_settings.load()
        check = await store_check()
        assert not check.ok and "s3://no-such-bucket-here" in check.detail
        assert check.fix is not None and "AWS_ENDPOINT_URL" in check.fix
    finally:
        monkeypatch.undo()
        app_settings.load()
        await asyncio.sleep(0)
        assert os.environ["COUNCIL_STORE"] != "s3://no-such-bucket-here"


async def test_s3_prune_keeps_what_runs_reference(
    s3: str, temporal: WorkflowEnvironment, sim: SimulatorServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run through the S3 store reads back after prune; a blob no history references
    (written for a run the namespace does not have) goes once past the grace period. (The
    S3 server dates its objects itself: the floor on the grace period, which
    test_prune_race checks, is lifted here so that a blob of a moment ago can be past it.)"""
    from app.store import prune

    monkeypatch.setattr(prune, "MIN_GRACE_SECONDS", 0)

    env = {"COUNCIL_STORE": f"s3://{BUCKET}/pruned", "COUNCIL_STORE_THRESHOLD": "1024"}
    address = temporal_address(temporal)
    client = await Client.connect(address, data_converter=connection.data_converter(env))
    async with council_worker(client, sim) as council:
        record = await council.run("Which bucket layout suits a small team?", max_rounds=1)
    driver = store.driver(store.location(Settings.read(env)))
    stray = Payload(metadata={"encoding": b"json/plain"}, data=b'"' + b"x" * 2000 + b'"')
    target = StorageDriverWorkflowInfo(namespace=client.namespace, id="never-ran", run_id="r")
    [claim] = await driver.store(StorageDriverStoreContext(target=target), [stray])
    before = await objects("pruned/")
    assert f"pruned/{claim.claim_data['key']}" in before and len(before) > 5

    within = await prune.prune(client, grace_seconds=3600)
    assert within.deleted == 0 and within.kept_recent >= 1
    swept = await prune.prune(client, grace_seconds=0)
    assert claim.claim_data["hash_value"] in swept.deleted_ids
    after = await objects("pruned/")
    assert f"pruned/{claim.claim_data['key']}" not in after
    reader = await Client.connect(address, data_converter=connection.data_converter(env))
    again = await reader.get_workflow_handle(record.id, result_type=DeliberationRecord).result()
    assert again == record


async def test_the_codec_server_reads_only_its_bucket_within_the_request_namespace(
    s3: str,
) -> None:
    """An S3 reference names a bucket and a key: the codec server refuses one naming
    another bucket its credentials can read, or a key of another namespace, in one line."""
    import aioboto3
    import httpx

    from app.codec.server import app_from_env

    async with aioboto3.Session().client("s3") as client:
        await client.create_bucket(Bucket=OTHER_BUCKET)
    ours = {"COUNCIL_STORE": f"s3://{BUCKET}/codec", "COUNCIL_STORE_THRESHOLD": "1024"}
    theirs = {**ours, "COUNCIL_STORE": f"s3://{OTHER_BUCKET}/codec"}
    own = await stored_in("default", ours, TEXT)
    other_bucket = await stored_in("default", theirs, "In another bucket. " * 100)
    other_namespace = await stored_in("team-b", ours, "In another namespace. " * 100)
    cli = {"Content-Type": "application/json", "X-Namespace": "default"}
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=app_from_env(ours)), base_url="http://127.0.0.1"
    ) as codec:

        async def decode(payload: Payload) -> httpx.Response:
            body = json_format.MessageToJson(Payloads(payloads=[payload]))
            return await codec.post("/default/decode", content=body, headers=cli)

        read = await decode(own)
        assert read.status_code == 200, read.text
        [plain] = json_format.Parse(read.text, Payloads()).payloads
        assert json.loads(plain.data) == TEXT
        for payload in (other_bucket, other_namespace):
            refused = await decode(payload)
            assert refused.status_code == 403, refused.text
            assert refused.text.startswith("refused: the reference to blob sha256:")
            assert "\n" not in refused.text


@pytest.mark.parametrize(
    ("command", "name"),
    [(["starter.py", "list"], "starter"), (["worker.py"], "worker"),
     (["-m", "app.codec.server"], "codec server")],
)  # fmt: skip
def test_every_process_stops_on_a_bad_store_setting_with_one_line(
    command: list[str], name: str
) -> None:
    env = {**os.environ, "COUNCIL_STORE": "gs://payloads", "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    done = subprocess.run(
        [sys.executable, *command],
        cwd=Path(__file__).parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == (
        f"{name}: COUNCIL_STORE must be a directory, file:PATH or s3://BUCKET[/PREFIX] "
        "(got 'gs://payloads')\n"
    )
