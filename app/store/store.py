"""The payload store: large texts travel through Temporal by reference.

Every client and worker (app.temporal.connection.data_converter) and the codec server use the SDK's
external payload storage configured here. A payload of COUNCIL_STORE_THRESHOLD bytes or
more (after encryption, when COUNCIL_PAYLOAD_KEY is set: the SDK encodes first and stores
second, so a blob holds ciphertext) is written to the store, and the history holds a
small reference in its place: a stage that sends 12 members long prompts at once stays far
below Temporal's 4 MiB message limit, and no history holds a payload above 256 KiB.

    COUNCIL_STORE            unset: the directory DATA/store (DATA: app.store.data_dir); a
                             directory or file:PATH; s3://BUCKET[/PREFIX]
                             (endpoint, region and credentials from AWS's own variables,
                             such as AWS_ENDPOINT_URL, AWS_REGION, AWS_PROFILE). There
                             is no "off" (app.settings refuses it): the store is what
                             keeps every Temporal message within its limit
    COUNCIL_STORE_THRESHOLD  bytes from which a payload is stored (default 32768)

A directory store is content-addressed: NAMESPACE/sha256/ab/cd/<sha256 of the blob>,
written atomically (a temporary file renamed into place) and checked against its hash when
read. An S3 store uses the SDK's S3 driver (content-addressed keys under
PREFIX/v0/ns/NAMESPACE/...). Blobs that no history references any more are removed by
`starter.py store prune` (app.store.prune).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import re
import tempfile
import weakref
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError, Message
from temporalio.api.common.v1 import Payload
from temporalio.api.sdk.v1.external_storage_pb2 import ExternalStorageReference
from temporalio.contrib.aws.s3driver import S3StorageDriver, S3StorageDriverClient
from temporalio.converter import (
    ExternalStorage,
    PayloadCodec,
    StorageDriver,
    StorageDriverClaim,
    StorageDriverRetrieveContext,
    StorageDriverStoreContext,
)
from temporalio.exceptions import ApplicationError

from app.settings import environment as app_settings
from app.settings.environment import Settings, StoreLocation

STORE_VARIABLE = Settings.variables()["store"]
# What a read says of a blob that no retry brings back, after naming the store and the hash.
MISSING = (
    f"is missing (removed by store prune, or written to another store: check {STORE_VARIABLE})"
)
CORRUPT = "is corrupt: its content does not match its hash"
LOCAL_DRIVER = "council.local"
S3_DRIVER = "aws.s3driver"
_REFERENCE_TYPE = ExternalStorageReference.DESCRIPTOR.full_name.encode()
_LEGACY_REFERENCE = b"json/external-storage-reference"
# Codec-encoded references carry this marker (a later SDK writes them; this one reads them).
REFERENCE_MARKER = "__temporal_external_storage_reference"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


class StoreError(RuntimeError):
    """A blob that cannot be written or read: one line naming the store and the hash."""


class OutsideReference(StoreError):
    """A reference to a blob that the reader may not read: another namespace's, or another
    bucket's (one line)."""


class LostBlob(StoreError, ApplicationError):
    """A blob that is missing or corrupt: no retry brings it back. A non-retryable
    application error, so that a workflow task that cannot read its run's input (or any
    payload of its history) fails the run with this line instead of retrying for good
    (the SDK fails the workflow on such an error while it decodes an activation)."""

    def __init__(self, message: str) -> None:
        ApplicationError.__init__(self, message, non_retryable=True)


def namespace_dir(namespace: str) -> str:
    """A namespace as one safe directory name ("~" for none)."""
    if not namespace:
        return "~"
    return "".join(c if c in _SAFE else "".join(f"%{b:02X}" for b in c.encode()) for c in namespace)


def s3_segment(namespace: str) -> str:
    """A namespace as the SDK's S3 driver writes it in a key."""
    safe = _SAFE | frozenset("!.*'()")
    encoded = "".join(chr(b) if chr(b) in safe else f"%{b:02X}" for b in namespace.encode())
    return encoded or "null"


class LocalStore(StorageDriver):
    """A directory of content-addressed blobs, one per stored payload."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def __repr__(self) -> str:
        return f"LocalStore({str(self.root)!r})"

    def name(self) -> str:
        return LOCAL_DRIVER

    def type(self) -> str:
        return LOCAL_DRIVER

    def path(self, namespace: str, digest: str) -> Path:
        return self.root / namespace_dir(namespace) / "sha256" / digest[:2] / digest[2:4] / digest

    def outside(self, claim: Mapping[str, str], namespace: str) -> str | None:
        """Why a claim is not one of `namespace`'s blobs (None: it is)."""
        if claim.get("namespace") != namespace:
            return (
                f"is in namespace {_shown(claim.get('namespace', ''))}, not this request's "
                f"({_shown(namespace)})"
            )
        return None

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        namespace = context.target.namespace if context.target is not None else ""
        blobs = [payload.SerializeToString() for payload in payloads]
        return await asyncio.to_thread(lambda: [self._write(namespace, blob) for blob in blobs])

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        return await asyncio.to_thread(lambda: [self._read(claim) for claim in claims])

    def _write(self, namespace: str, blob: bytes) -> StorageDriverClaim:
        digest = hashlib.sha256(blob).hexdigest()
        path = self.path(namespace, digest)
        try:
            # Already stored: the same bytes. Touched, so that prune counts it as new.
            os.utime(path)
        except (FileNotFoundError, NotADirectoryError):
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                descriptor, partial = tempfile.mkstemp(prefix=".partial-", dir=path.parent)
                try:
                    with os.fdopen(descriptor, "wb") as file:
                        file.write(blob)
                        file.flush()
                        os.fsync(file.fileno())
                    os.replace(partial, path)
                except BaseException:
                    with contextlib.suppress(OSError):
                        os.unlink(partial)
                    raise
            except OSError as error:
                raise StoreError(
                    f"payload store {self.root}: cannot write blob sha256:{digest} "
                    f"({error.strerror or error}; check {STORE_VARIABLE} and the directory's "
                    "permissions)"
                ) from None
        return StorageDriverClaim(claim_data={"namespace": namespace, "sha256": digest})

    def _read(self, claim: StorageDriverClaim) -> Payload:
        digest = claim.claim_data.get("sha256", "")
        if not _DIGEST.fullmatch(digest):
            raise LostBlob(f"payload store {self.root}: a reference without a valid sha256")
        where = f"payload store {self.root}: blob sha256:{digest}"
        try:
            blob = self.path(claim.claim_data.get("namespace", ""), digest).read_bytes()
        except FileNotFoundError:
            raise LostBlob(f"{where} {MISSING}") from None
        except OSError as error:
            raise StoreError(f"{where} cannot be read ({error.strerror or error})") from None
        if hashlib.sha256(blob).hexdigest() != digest:
            raise LostBlob(f"{where} {CORRUPT}") from None
        try:
            return Payload.FromString(blob)
        except DecodeError:
            raise LostBlob(f"{where} is corrupt: not a payload") from None


class S3Client(S3StorageDriverClient):
    """An aioboto3 S3 client for the SDK's driver, opened on first use in each event loop
    (the data converter is built before any loop runs), with every key under the prefix.

    It always writes: the driver asks whether an object exists first, and an existing one
    written again gets a fresh age, so prune never removes a blob that a new reference
    names (and storing needs no read permission)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = f"{prefix}/" if prefix else ""
        self._session: Any = None
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = (
            weakref.WeakKeyDictionary()
        )
        self._opening: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    async def client(self) -> Any:
        """The raw aioboto3 S3 client of the running event loop."""
        loop = asyncio.get_running_loop()
        lock = self._opening.setdefault(loop, asyncio.Lock())
        async with lock:
            if loop not in self._clients:
                import aioboto3  # only a process with an S3 store pays for the import

                if self._session is None:
                    self._session = aioboto3.Session()
                manager = self._session.client("s3")
                self._clients[loop] = (manager, await manager.__aenter__())
        return self._clients[loop][1]

    async def aclose(self) -> None:
        """Close the running loop's client (if it opened one)."""
        opened = self._clients.pop(asyncio.get_running_loop(), None)
        if opened is not None:
            await opened[0].__aexit__(None, None, None)

    async def object_exists(self, *, bucket: str, key: str) -> bool:
        return False

    async def put_object(self, *, bucket: str, key: str, data: bytes) -> None:
        await (await self.client()).put_object(Bucket=bucket, Key=self.prefix + key, Body=data)

    async def get_object(self, *, bucket: str, key: str) -> bytes:
        response = await (await self.client()).get_object(Bucket=bucket, Key=self.prefix + key)
        async with response["Body"] as body:
            data: bytes = await body.read()
        return data


class S3Store(S3StorageDriver):
    """The SDK's S3 driver, with one-line errors that name the store and the hash."""

    def __init__(self, location: StoreLocation) -> None:
        self.location = location
        self.s3 = S3Client(location.prefix)
        super().__init__(client=self.s3, bucket=location.bucket, driver_name=S3_DRIVER)

    def __repr__(self) -> str:
        return f"S3Store({str(self.location)!r})"

    def outside(self, claim: Mapping[str, str], namespace: str) -> str | None:
        """Why a claim is not one of `namespace`'s blobs in this store's bucket (None: it
        is): the SDK's keys are v0/ns/NAMESPACE/.../d/sha256/HASH."""
        if claim.get("bucket") != self.location.bucket:
            return (
                f"names bucket {_shown(claim.get('bucket', ''))}, not this store's "
                f"({self.location})"
            )
        key, digest = claim.get("key", ""), claim.get("hash_value", "")
        within = f"v0/ns/{s3_segment(namespace)}/"
        if not key.startswith(within) or ".." in key.split("/"):
            return f"names key {_shown(key)}, outside this request's namespace ({within})"
        if not _DIGEST.fullmatch(digest) or not key.endswith(f"/d/sha256/{digest}"):
            return f"names key {_shown(key)}, which is not its hash's"
        return None

    async def store(
        self, context: StorageDriverStoreContext, payloads: Sequence[Payload]
    ) -> list[StorageDriverClaim]:
        try:
            return await super().store(context, payloads)
        except RuntimeError as error:
            raise StoreError(
                f"payload store {self.location}: cannot write a blob ({_cause(error)}; check "
                f"{STORE_VARIABLE} and the AWS settings)"
            ) from None

    async def retrieve(
        self, context: StorageDriverRetrieveContext, claims: Sequence[StorageDriverClaim]
    ) -> list[Payload]:
        async def one(claim: StorageDriverClaim) -> Payload:
            try:
                [payload] = await super(S3Store, self).retrieve(context, [claim])
            except (RuntimeError, ValueError) as error:
                digest = claim.claim_data.get("hash_value", "?")
                cause = _cause(error)
                where = f"payload store {self.location}: blob sha256:{digest}"
                if "integrity check failed" in str(error):
                    raise LostBlob(f"{where} {CORRUPT}") from None
                if "NoSuchKey" in cause:
                    raise LostBlob(f"{where} {MISSING}") from None
                raise StoreError(f"{where} cannot be read ({cause})") from None
            return payload

        return list(await asyncio.gather(*(one(claim) for claim in claims)))


def _shown(value: str) -> str:
    """A value a caller wrote into a reference, as one short line."""
    return repr(value[:100])


def _cause(error: BaseException) -> str:
    cause = error.__cause__ or error
    return " ".join(str(cause).split())[:300] or type(cause).__name__


def location(settings: Settings) -> StoreLocation:
    """The store's location: COUNCIL_STORE, the default directory made DATA/store."""
    if settings.store.kind == "file" and settings.store.path is None:
        return StoreLocation("file", path=settings.data() / "store")
    return settings.store


_drivers: dict[StoreLocation, StorageDriver] = {}


def driver(location: StoreLocation) -> StorageDriver:
    """The driver of a location (one per location and process)."""
    if location not in _drivers:
        if location.kind == "s3":
            _drivers[location] = S3Store(location)
        else:
            assert location.path is not None
            _drivers[location] = LocalStore(location.path)
    return _drivers[location]


def external_storage(env: Settings | Mapping[str, str] | None = None) -> ExternalStorage:
    """The SDK's external storage of the settings."""
    settings = app_settings.of(env)
    return ExternalStorage(
        drivers=[driver(location(settings))], payload_size_threshold=settings.store_threshold
    )


async def aclose() -> None:
    """Close the S3 clients this event loop opened (before the loop ends)."""
    for each in list(_drivers.values()):
        if isinstance(each, S3Store):
            await each.s3.aclose()


# ---- references: reading them out of payloads and histories ---------------------------


def reference(payload: Payload) -> ExternalStorageReference | None:
    """The store reference a payload holds in place of its data, or None."""
    encoding = payload.metadata.get("encoding", b"")
    if encoding == b"json/protobuf" and payload.metadata.get("messageType") == _REFERENCE_TYPE:
        try:
            return json_format.Parse(payload.data, ExternalStorageReference())
        except json_format.ParseError:
            return None
    if encoding == _LEGACY_REFERENCE:
        try:
            legacy = json.loads(payload.data)
            return ExternalStorageReference(
                driver_name=legacy["driver_name"],
                claim_data=legacy["driver_claim"]["claim_data"],
            )
        except (ValueError, KeyError, TypeError):
            return None
    return None


async def plain_reference(payload: Payload, codec: PayloadCodec | None = None) -> Payload | None:
    """The reference a payload of a history holds in place of its data, as a payload in
    clear (a codec-encoded one decoded with `codec`, its stored size kept), or None."""
    if REFERENCE_MARKER in payload.metadata and codec is not None:
        inner = Payload()
        inner.CopyFrom(payload)
        del inner.metadata[REFERENCE_MARKER]
        del inner.external_payloads[:]
        [plain] = await codec.decode([inner])
        if not plain.external_payloads:
            plain.external_payloads.extend(payload.external_payloads)
        payload = plain
    return payload if reference(payload) is not None else None


async def references(
    payloads: Sequence[Payload], codec: PayloadCodec | None = None
) -> list[ExternalStorageReference]:
    """The references among payloads (codec-encoded ones decoded with `codec`)."""
    found = []
    for payload in payloads:
        plain = await plain_reference(payload, codec)
        ref = reference(plain) if plain is not None else None
        if ref is not None:
            found.append(ref)
    return found


def stored_size(plain: Payload) -> int | None:
    """The size of the payload a reference stands for, as the SDK recorded it beside the
    reference (None when it did not)."""
    return plain.external_payloads[0].size_bytes if plain.external_payloads else None


def payloads_in(message: Message) -> Iterator[Payload]:
    """Every Payload inside a protobuf message (a history event, a description), at any
    depth: inputs, results, memos, headers, failures' details."""
    if isinstance(message, Payload):
        yield message
        return
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE or field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            values = value.values()
        elif field.is_repeated:
            values = value
        else:
            values = [value]
        for item in values:
            if isinstance(item, Message):
                yield from payloads_in(item)


async def resolve(
    storage: ExternalStorage | None,
    payloads: Sequence[Payload],
    codec: PayloadCodec | None = None,
    *,
    namespace: str | None,
    keep_over: int | None = None,
) -> list[Payload]:
    """The payloads with each reference replaced by the stored payload, as a client reads
    them before it decrypts (the codec server; `codec` reads codec-encoded references).
    Only references to `namespace`'s blobs (and, in S3, to the store's bucket) are read:
    any other is refused (OutsideReference), and so is every reference when no namespace
    is given. With `keep_over`, a reference to a payload of more bytes than that stays a
    reference, in clear and with its size."""
    resolved = list(payloads)
    if storage is None:
        return resolved
    drivers = {each.name(): each for each in storage.drivers}
    for index, payload in enumerate(payloads):
        plain = await plain_reference(payload, codec)
        ref = reference(plain) if plain is not None else None
        if plain is None or ref is None:
            continue
        found = drivers.get(ref.driver_name)
        if found is None:
            raise StoreError(
                f"a payload is stored by driver {ref.driver_name!r}, which this process does "
                f"not have (check {STORE_VARIABLE})"
            )
        if namespace is None:
            raise StoreError(
                "a reference to the payload store is read only within a namespace, and the "
                "request names none"
            )
        claim = dict(ref.claim_data)
        problem = (
            found.outside(claim, namespace)
            if isinstance(found, LocalStore | S3Store)
            else f"is stored by driver {ref.driver_name!r}, whose references are not checked"
        )
        if problem is not None:
            digest = claim.get("sha256") or claim.get("hash_value") or ""
            blob = f"blob sha256:{digest}" if _DIGEST.fullmatch(digest) else "a blob"
            raise OutsideReference(f"refused: the reference to {blob} {problem}")
        size = stored_size(plain)
        if keep_over is not None and size is not None and size > keep_over:
            resolved[index] = plain
            continue
        [resolved[index]] = await found.retrieve(
            StorageDriverRetrieveContext(), [StorageDriverClaim(claim_data=claim)]
        )
    return resolved
