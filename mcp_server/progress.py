"""ask_council's progress notifications, sent when the client asks for them (a progress
token): the run's id first, then each stage and round as it starts and ends, and between
them, whenever nothing was sent for a while (COUNCIL_MCP_PROGRESS_SECONDS), where the run
is. A client that waits as long as progress comes (the TypeScript SDK's
resetTimeoutOnProgress) never gives up on a run that goes on; one that gives up anyway
leaves the run going, and has been told its id."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from mcp.server.mcpserver import Context
from temporalio.client import WorkflowHandle

from app.views.render import event_line
from council.progress import EventKind, Progress
from mcp_server import results
from runs import following

# The events a progress notification reports: stages and rounds starting and ending,
# the stop and the end (each model's reply is left out).
REPORTED = {
    EventKind.STAGE_START,
    EventKind.STAGE_COMPLETE,
    EventKind.ROUND_START,
    EventKind.ROUND_COMPLETE,
    EventKind.STOP_REQUESTED,
    EventKind.TERMINATED,
    EventKind.FINISHED,
}


def started_line(wid: str) -> str:
    return (
        f"deliberation {wid} started: should this call time out, the run goes on and "
        f"get_deliberation reads it by its id"
    )


class Reporter:
    """Progress notifications for one tool call: a count that grows, and a line for a
    person. Between events, a line that says where the run is goes out each time nothing
    was sent for `every` seconds."""

    def __init__(self, ctx: Context, every: float) -> None:
        self.ctx = ctx
        self.every = every
        self.sent = 0
        self.last_sent = time.monotonic()
        self.lock = asyncio.Lock()  # one notification at a time, in the order of the count
        self.position: Progress | None = None  # where the run is (None: no worker answers)
        self.closed = False

    async def send(self, message: str) -> None:
        async with self.lock:
            await self._send(message)

    async def _send(self, message: str) -> None:
        self.sent += 1
        self.last_sent = time.monotonic()
        await self.ctx.report_progress(self.sent, message=message)

    async def follow(self, handle: WorkflowHandle[Any, Any]) -> None:
        """Report the run until it closes."""
        keeping = asyncio.create_task(self.keep_alive(handle.id))
        try:
            await self.report_events(handle)
        finally:
            self.closed = True
            keeping.cancel()
            await asyncio.wait({keeping})
        failed = None if keeping.cancelled() else keeping.exception()
        if failed is not None:
            raise failed

    async def report_events(self, handle: WorkflowHandle[Any, Any]) -> None:
        """Each stage and round as it starts and ends, and when no worker answers."""
        waiting = False
        async for progress in following.follow(handle):
            self.position = progress
            if progress is None and not waiting:
                await self.send(following.WAITING)
            waiting = progress is None
            for event in progress.events if progress is not None else ():
                if event.kind in REPORTED:
                    await self.send(event_line(event))

    async def keep_alive(self, wid: str) -> None:
        """Where the run is, each time nothing was sent for `every` seconds."""
        while True:
            await asyncio.sleep(max(0.0, self.last_sent + self.every - time.monotonic()))
            async with self.lock:
                if self.closed:
                    return
                if time.monotonic() - self.last_sent >= self.every:
                    await self._send(results.running_line(wid, self.position))
