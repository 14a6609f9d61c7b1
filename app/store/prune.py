"""Prune the payload store: remove the blobs that no run references any more.

    python starter.py store prune [--grace SECONDS] [--dry-run] [--json]

Mark and sweep. Mark: every workflow the namespace still has (running or closed, until
its retention ends or it is deleted) is read, its whole history and, while it runs, its
pending activities' heartbeat details; every store reference they hold is kept. Sweep:
a blob of this namespace (a directory store: NAMESPACE/sha256/...; S3: PREFIX/v0/ns/
NAMESPACE/...) that nothing references and that is older than the grace period (default one
hour) is deleted. When any history cannot be read, nothing is deleted.

The grace period never goes below MIN_GRACE_SECONDS, whatever is asked: a blob is written
before the event that names it exists (a client stores a run's input, then asks the server
to start the run; a worker stores a call's result, then reports it), and the server lists a
new run a moment after it starts, so a blob written a moment ago may belong to a run the
mark cannot see yet. The floor covers that time, the retries of the request that carries
the reference, and clocks that differ between the hosts that write and the one that prunes,
with a wide margin.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from temporalio.api.common.v1 import Payload, WorkflowExecution
from temporalio.api.workflowservice.v1 import (
    DescribeWorkflowExecutionRequest,
    GetWorkflowExecutionHistoryRequest,
)
from temporalio.client import Client, WorkflowExecutionStatus
from temporalio.service import RPCError, RPCStatusCode

from app.store import store
from app.store.store import LocalStore, S3Store

DEFAULT_GRACE_SECONDS = 3600
MIN_GRACE_SECONDS = 600
CONCURRENT_READS = 8


class PruneError(RuntimeError):
    """The mark could not be completed: nothing was deleted (one line)."""


@dataclass
class Pruned:
    store: str
    namespace: str
    grace_seconds: float = DEFAULT_GRACE_SECONDS
    runs: int = 0
    referenced: int = 0
    blobs: int = 0
    deleted: int = 0
    deleted_bytes: int = 0
    kept_recent: int = 0
    dry_run: bool = False
    deleted_ids: list[str] = field(default_factory=list)

    def summary(self) -> str:
        verb = "would delete" if self.dry_run else "deleted"
        return (
            f"payload store {self.store} (namespace {self.namespace}): {self.runs} run(s) read, "
            f"{self.referenced} blob(s) referenced; of {self.blobs} blob(s), {verb} "
            f"{self.deleted} ({self.deleted_bytes:,} bytes), kept {self.kept_recent} newer "
            f"than the grace period ({self.grace_seconds:g} s)"
        )

    def as_json(self) -> dict[str, object]:
        return asdict(self)


def grace_floor_warning(asked: float) -> str | None:
    """The warning for a grace period below the floor (None when it is not)."""
    if asked >= MIN_GRACE_SECONDS:
        return None
    return (
        f"a grace of {asked:g} s is below the floor of {MIN_GRACE_SECONDS} s (a run's input "
        f"is stored before the run exists): blobs younger than {MIN_GRACE_SECONDS} s are kept"
    )


def _key(driver_name: str, claim: dict[str, str]) -> str | None:
    """The blob a claim names, as the sweep names it: a directory store's digest, an S3
    object's key (without the prefix)."""
    if driver_name == store.LOCAL_DRIVER:
        return claim.get("sha256")
    if driver_name == store.S3_DRIVER:
        return claim.get("key")
    return None


async def referenced(client: Client) -> tuple[int, set[str]]:
    """Mark: the runs of the namespace, and every blob their histories and pending
    heartbeats reference. PruneError when one cannot be read (other than gone)."""
    codec = client.data_converter.payload_codec
    keys: set[str] = set()
    semaphore = asyncio.Semaphore(CONCURRENT_READS)

    async def collect(payloads: AsyncIterator[Payload]) -> None:
        async for payload in payloads:
            for ref in await store.references([payload], codec):
                key = _key(ref.driver_name, dict(ref.claim_data))
                if key:
                    keys.add(key)

    async def history_payloads(workflow_id: str, run_id: str) -> AsyncIterator[Payload]:
        token = b""
        while True:
            page = await client.workflow_service.get_workflow_execution_history(
                GetWorkflowExecutionHistoryRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
                    next_page_token=token,
                )
            )
            for event in page.history.events:
                for payload in store.payloads_in(event):
                    yield payload
            token = page.next_page_token
            if not token:
                return

    async def pending_payloads(workflow_id: str, run_id: str) -> AsyncIterator[Payload]:
        described = await client.workflow_service.describe_workflow_execution(
            DescribeWorkflowExecutionRequest(
                namespace=client.namespace,
                execution=WorkflowExecution(workflow_id=workflow_id, run_id=run_id),
            )
        )
        for pending in described.pending_activities:
            for payload in store.payloads_in(pending):
                yield payload

    async def mark(workflow_id: str, run_id: str, running: bool) -> None:
        async with semaphore:
            try:
                await collect(history_payloads(workflow_id, run_id))
                if running:
                    await collect(pending_payloads(workflow_id, run_id))
            except RPCError as error:
                if error.status == RPCStatusCode.NOT_FOUND:
                    return  # deleted since the listing: it references nothing
                raise PruneError(
                    f"cannot read the history of {workflow_id} ({error.status.name}: "
                    f"{error.message}); nothing was deleted"
                ) from None

    runs = []
    async for execution in client.list_workflows():
        running = execution.status in (None, WorkflowExecutionStatus.RUNNING)
        runs.append(mark(execution.id, execution.run_id, running))
    await asyncio.gather(*runs)
    return len(runs), keys


def _sweep_directory(
    driver: LocalStore, namespace: str, keep: set[str], cutoff: float, pruned: Pruned
) -> None:
    base = driver.root / store.namespace_dir(namespace) / "sha256"
    if not base.is_dir():
        return
    for path in base.rglob("*"):
        if not path.is_file():
            continue
        # A writer's temporary file, or one that an interrupted prune set aside.
        leftover = path.name.startswith((".partial-", _SET_ASIDE))
        if not leftover:
            pruned.blobs += 1
            if path.name in keep:
                continue
        try:
            stat = path.stat()
        except FileNotFoundError:
            continue
        if stat.st_mtime > cutoff:
            pruned.kept_recent += 0 if leftover else 1
            continue
        if not pruned.dry_run and not leftover and not _set_aside_unless_touched(path, cutoff):
            pruned.kept_recent += 1
            continue
        pruned.deleted += 1
        pruned.deleted_bytes += stat.st_size
        pruned.deleted_ids.append(path.name)


_SET_ASIDE = ".pruning-"


def _set_aside_unless_touched(path: Path, cutoff: float) -> bool:
    """Delete an old blob unless a writer stored the same bytes again since the sweep read
    its age (the store then touches the blob instead of writing it, and hands out a
    reference to it). The blob is renamed first: a writer's touch lands before the rename
    (and shows on the renamed file, which goes back) or after it (and finds no file, so the
    writer writes the blob anew). True when it was deleted."""
    aside = path.with_name(f"{_SET_ASIDE}{path.name}")
    try:
        os.rename(path, aside)
    except FileNotFoundError:
        return False
    if aside.stat().st_mtime > cutoff:
        os.replace(aside, path)
        return False
    aside.unlink(missing_ok=True)
    return True


async def _sweep_s3(
    driver: S3Store, namespace: str, keep: set[str], cutoff: float, pruned: Pruned
) -> None:
    s3 = await driver.s3.client()
    prefix = driver.s3.prefix
    listed = f"{prefix}v0/ns/{store.s3_segment(namespace)}/"
    doomed: list[str] = []
    paginator = s3.get_paginator("list_objects_v2")
    async for page in paginator.paginate(Bucket=driver.location.bucket, Prefix=listed):
        for item in page.get("Contents", []):
            key = item["Key"].removeprefix(prefix)
            pruned.blobs += 1
            if key in keep:
                continue
            if item["LastModified"].timestamp() > cutoff:
                pruned.kept_recent += 1
                continue
            pruned.deleted += 1
            pruned.deleted_bytes += int(item.get("Size", 0))
            pruned.deleted_ids.append(key.rsplit("/", 1)[-1])
            doomed.append(item["Key"])
    if pruned.dry_run:
        return
    for start in range(0, len(doomed), 1000):
        batch = [{"Key": key} for key in doomed[start : start + 1000]]
        await s3.delete_objects(Bucket=driver.location.bucket, Delete={"Objects": batch})


async def prune(
    client: Client, grace_seconds: float = DEFAULT_GRACE_SECONDS, dry_run: bool = False
) -> Pruned:
    """Delete the namespace's unreferenced blobs older than the grace period (at least
    MIN_GRACE_SECONDS; with dry_run, only count them) in the store of the client's data
    converter."""
    storage = client.data_converter.external_storage
    if storage is None:
        raise PruneError("this client has no payload store: nothing to prune")
    [driver] = storage.drivers
    where = str(getattr(driver, "root", None) or getattr(driver, "location", driver))
    grace = max(grace_seconds, MIN_GRACE_SECONDS)
    pruned = Pruned(store=where, namespace=client.namespace, grace_seconds=grace, dry_run=dry_run)
    # The cut-off is taken before the mark: a blob written after it is never swept.
    cutoff = time.time() - grace
    pruned.runs, keep = await referenced(client)
    pruned.referenced = len(keep)
    if isinstance(driver, LocalStore):
        await asyncio.to_thread(_sweep_directory, driver, client.namespace, keep, cutoff, pruned)
    elif isinstance(driver, S3Store):
        await _sweep_s3(driver, client.namespace, keep, cutoff, pruned)
    return pruned
