"""How much one tenant may start: runs and input bytes within a sliding window, counted
from Temporal's visibility, which every web server, MCP server and CLI sharing a namespace
(and so its store) reads alike.

Each run carries two search attributes from its start: its tenant (CouncilTenant, the
fairness key of runs.priority) and the size of its input in bytes
(CouncilInputBytes: the question, the thread and the attachments, which are what a start
writes to the store). A start counts the tenant's runs that started within the window and
sums their sizes; one that would take either past its limit is refused before anything is
written.

What is approximate: visibility lags a start by a moment, and starts that check at the same
time each see the others' runs not yet, so a burst may pass a limit by the starts in flight.
Only a run's input is counted: what workers store for it (model replies, bounded by each
call's token cap) is not.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Protocol

from temporalio.client import Client
from temporalio.service import RPCError, RPCStatusCode

from runs.attributes import ensure_search_attributes
from workflows import search_attributes


@dataclass(frozen=True)
class Quota:
    """One tenant's limits within `window_seconds`: runs started and their input bytes
    (0: no limit)."""

    runs: int
    bytes: int
    window_seconds: int

    def __bool__(self) -> bool:
        return bool(self.runs or self.bytes)

    @classmethod
    def of(cls, settings: QuotaSettings) -> Quota:
        """The quota the settings (app.settings.environment.Settings) give."""
        return cls(settings.quota_runs, settings.quota_bytes, settings.quota_window)


class QuotaSettings(Protocol):
    """What a quota is read from (read-only: the settings are frozen)."""

    @property
    def quota_runs(self) -> int: ...
    @property
    def quota_bytes(self) -> int: ...
    @property
    def quota_window(self) -> int: ...


class QuotaExceeded(Exception):
    """A start that would pass its tenant's quota: one line naming the limit."""


@dataclass(frozen=True)
class Usage:
    runs: int
    bytes: int


def _window(seconds: int) -> str:
    if seconds % 3600 == 0:
        hours = seconds // 3600
        return "hour" if hours == 1 else f"{hours} hours"
    if seconds % 60 == 0:
        minutes = seconds // 60
        return "minute" if minutes == 1 else f"{minutes} minutes"
    return f"{seconds} s"


async def usage(client: Client, tenant: str, window_seconds: int, most: int) -> Usage:
    """The tenant's runs that started within the window and their input bytes (reading at
    most `most` runs: enough to tell that a limit is reached)."""
    since = (datetime.now(UTC) - timedelta(seconds=window_seconds)).isoformat()
    query = f"{search_attributes.TENANT.name} = '{tenant}' AND StartTime > '{since}'"
    runs = size = 0
    try:
        async for run in client.list_workflows(query, limit=most):
            runs += 1
            size += run.typed_search_attributes.get(search_attributes.INPUT_BYTES) or 0
    except RPCError as error:
        # A server that lacks the attributes has no run that carries them yet.
        if error.status != RPCStatusCode.INVALID_ARGUMENT:
            raise
        await ensure_search_attributes(client)
        return Usage(0, 0)
    return Usage(runs, size)


async def check(client: Client, tenant: str, size: int, quota: Quota) -> None:
    """Refuse (QuotaExceeded) a start of `size` input bytes that would take the tenant past
    its quota."""
    if not quota:
        return
    window = _window(quota.window_seconds)
    if quota.bytes and size > quota.bytes:
        raise QuotaExceeded(
            f"this request's input is {size:,} bytes: over the quota of {quota.bytes:,} "
            f"bytes a caller may start per {window} (COUNCIL_QUOTA_BYTES)"
        )
    most = quota.runs + 1 if quota.runs else 10_000
    used = await usage(client, tenant, quota.window_seconds, most)
    if quota.runs and used.runs >= quota.runs:
        raise QuotaExceeded(
            f"quota reached: {used.runs} run(s) started in the last {window}, of at most "
            f"{quota.runs} per caller (COUNCIL_QUOTA_RUNS); try again later"
        )
    if quota.bytes and used.bytes + size > quota.bytes:
        raise QuotaExceeded(
            f"quota reached: {used.bytes:,} bytes of input started in the last {window}, "
            f"and this request's {size:,} would pass the {quota.bytes:,} a caller may start "
            "(COUNCIL_QUOTA_BYTES); try again later"
        )
