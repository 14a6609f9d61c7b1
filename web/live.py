"""A running deliberation's progress as Server-Sent Events.

    GET /deliberations/{id}/stream[?since=N]   (or the Last-Event-ID header)

A bad `since` or Last-Event-ID is a 400 and an unknown id a 404, both before any stream
starts. Each message carries the new progress lines, each model's state and the replies
being written; the event `end` says the run closed.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from temporalio.client import Client

from app.render import event_line
from council.progress import ProgressEvent
from web import views
from workflows import client as deliberations

MAX_SEQ = 10**9


def since_of(request: Request) -> int | None:
    """Where the stream resumes: Last-Event-ID, else ?since=, else 0; None if malformed."""
    value = request.headers.get("last-event-id") or request.query_params.get("since") or "0"
    value = value.strip()
    if not value.isdigit() or int(value) > MAX_SEQ:
        return None
    return int(value)


class Live:
    def __init__(self, client: Client, poll_seconds: float) -> None:
        self.client = client
        self.poll_seconds = poll_seconds

    def routes(self) -> list[Route]:
        return [Route("/deliberations/{id}/stream", self.stream, methods=["GET"])]

    async def stream(self, request: Request) -> Response:
        since = since_of(request)
        if since is None:
            return PlainTextResponse(
                "since (or Last-Event-ID) must be an event number: a whole number from 0",
                status_code=400,
            )
        try:
            found = await deliberations.find(self.client, request.path_params["id"])
        except deliberations.NoSuchDeliberation as missing:
            return PlainTextResponse(str(missing), status_code=404)
        return StreamingResponse(
            progress_stream(request, found.handle, since, self.poll_seconds),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )


async def progress_stream(
    request: Request, handle: Any, since: int, poll_seconds: float
) -> AsyncIterator[str]:
    """A message each time the run may have moved; `end` when it closed."""
    seen: list[ProgressEvent] = []
    async for progress in deliberations.follow(handle, since, poll_seconds):
        if await request.is_disconnected():
            return
        if progress is None:
            yield _sse({"waiting": True})
            continue
        seen += progress.events
        partials = [] if progress.finished else await deliberations.partial_replies(handle)
        message = {
            "events": [
                {"seq": e.seq, "kind": e.kind.value, "line": event_line(e)} for e in progress.events
            ],
            "stage": progress.stage.title if progress.stage else None,
            "round": progress.round,
            "max_rounds": progress.max_rounds,
            "min_rounds": progress.min_rounds,
            "finished": progress.finished,
            "reason": progress.terminated_reason,
            "tokens": progress.tokens_used,
            "cost": progress.cost_usd,
            "statuses": views.model_statuses(seen, []),
            "partials": [
                {
                    "model": p.model,
                    "where": p.stage.place(p.round) if p.stage else "",
                    "text": p.text,
                    "bytes": p.content_bytes,
                }
                for p in partials
            ],
        }
        yield _sse(message, progress.next_seq)
    yield "event: end\ndata: {}\n\n"


def _sse(data: dict[str, Any], event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}data: {json.dumps(data)}\n\n"
