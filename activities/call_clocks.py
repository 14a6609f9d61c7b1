"""The straggler watch: how long a stage's late calls have really been with their providers.

The workflow cannot see its activities run; Temporal can. Once a stage's late calls have
outlived the patience by the workflow's clock, this activity reads the run's pending
activities (their attempt, state and last heartbeat, whose details each call fills in:
council.calls.CallProgress), and returns the calls whose current request has been with
its provider for the patience (council.stragglers.due). It reads them again when the
first could be due (council.stragglers.earliest_due: a call still queued, under load or
for a slot, has the whole patience to go), at most every half second. It heartbeats, so
the workflow cancels it at once when the calls finish or the run stops, and Temporal
retries it on another worker when its own worker dies.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from temporalio import activity
from temporalio.api.enums.v1 import PendingActivityState
from temporalio.client import Client

from council.calls import CallProgress
from council.stragglers import CallClock, LateCalls, due, earliest_due

POLL_SECONDS = 0.5  # the least time between two reads of the run's pending activities
BEAT_SECONDS = 1.0  # heartbeats while it waits (the workflow's heartbeat timeout is 5 s)


class CallClocks:
    def __init__(self, client: Client) -> None:
        self.client = client

    @activity.defn(name="await_late_calls")
    async def await_late_calls(self, late: LateCalls) -> list[str]:
        """The late calls (by model) to cut: those whose own time reached the patience."""
        info = activity.info()
        assert info.workflow_id is not None  # (a standalone activity has none; ours never)
        handle = self.client.get_workflow_handle(info.workflow_id, run_id=info.workflow_run_id)
        while True:
            clocks = await self.clocks(handle, late)
            cut = due(late.patience_seconds, clocks)
            if cut:
                return cut
            wait = max(POLL_SECONDS, earliest_due(late.patience_seconds, late.models, clocks))
            while wait > 0:
                activity.heartbeat()
                await asyncio.sleep(min(wait, BEAT_SECONDS))
                wait -= BEAT_SECONDS

    async def clocks(self, handle, late: LateCalls) -> dict[str, CallClock]:  # type: ignore[no-untyped-def]
        """Each late call's clock, from the run's pending activities."""
        description = await handle.describe()
        converter = self.client.data_converter
        now = datetime.now(UTC)
        clocks: dict[str, CallClock] = {}
        for pending in description.raw_description.pending_activities:
            payloads = list(pending.heartbeat_details.payloads)
            if not payloads:
                continue
            try:
                [progress] = await converter.decode(payloads[-1:], [CallProgress])
            except Exception:  # details of another kind of activity (this watch's own)
                continue
            if (progress.stage, progress.round) != (late.stage, late.round):
                continue
            if progress.model not in late.models:
                continue
            beat = (
                pending.last_heartbeat_time.ToDatetime(UTC)
                if pending.HasField("last_heartbeat_time")
                else now
            )
            clocks[progress.model] = CallClock(
                attempt=pending.attempt,
                running=pending.state == PendingActivityState.PENDING_ACTIVITY_STATE_STARTED,
                beat_attempt=progress.attempt,
                answering=progress.answering,
                answer_seconds=progress.answer_seconds,
                since_beat=(now - beat).total_seconds(),
            )
        return clocks
