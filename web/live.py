"""A running deliberation's page, kept up to date: Server-Sent Events that carry the
page's sections rendered again from the state of the moment.

    GET /deliberations/{id}/stream[?since=N]   (or the Last-Event-ID header)

A bad `since` or Last-Event-ID is a 400 and an unknown id a 404, both before any stream
starts. Each message carries the progress lines after the last one sent and every section
of the page (the same macros as the page, templates/_turn.html) whose HTML changed: the
answers as they arrive and the text each member is writing, the review matrix row by
row, the rounds, the usage, the state of each call (its retries too), the controls that
still apply, and the final answer as the chairman writes it. When the state shown
changes (stopping) the sidebar's recent conversations come too. Once the run closed, one
last message renders the finished page's sections and the sidebar, and the event `end`
follows.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.templating import Jinja2Templates
from temporalio.client import Client

from app.render import event_line
from council import numbers
from council.models import DeliberationRecord
from council.progress import ProgressEvent
from web import reading, views
from web.pages import LIST_LIMIT, THREADS_SHOWN, council_choices
from web.settings import Settings
from workflows import client as deliberations

MAX_SEQ = 10**9
# The sections of the council's work, each rendered by the macro of its name.
SECTIONS = ("answers", "reviews", "rounds", "usage", "steering", "errors")


def since_of(request: Request) -> int | None:
    """Where the stream resumes: Last-Event-ID, else ?since=, else 0; None if malformed."""
    value = request.headers.get("last-event-id") or request.query_params.get("since") or "0"
    since = numbers.whole(value, signed=False)
    return since if since is not None and since <= MAX_SEQ else None


class Live:
    def __init__(self, client: Client, settings: Settings, templates: Jinja2Templates) -> None:
        self.client = client
        self.settings = settings
        self.templates = templates

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
            self.updates(request, found, since),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def sidebar(self, turn: views.Turn) -> str:
        """The recent conversations, with this run's state as the page shows it."""
        parts = self.templates.env.get_template("_turn.html").module
        rows = await deliberations.list_deliberations(self.client, LIST_LIMIT)
        return str(parts.threads(views.sidebar(rows, turn, THREADS_SHOWN), turn.thread))

    def sections(self, turn: views.Turn, finished: bool = False) -> dict[str, str]:
        """The page's sections for this state, by the id of the element that holds each."""
        parts = self.templates.env.get_template("_turn.html").module

        def render(macro: str, *args: Any) -> str:
            return str(getattr(parts, macro)(*args))

        ui_url = deliberations.ui_url(self.client, turn.id, self.settings.ui_url)
        out = {
            "turn-head": render("head", turn, ui_url, self.settings.simulated),
            "live-state": render("live", turn),
            "final-body": render("final", turn),
            **{name: render(name, turn) for name in SECTIONS},
        }
        if finished:
            names, members = council_choices(self.settings)
            target = turn if turn.status == "completed" and turn.final is not None else None
            out["ask"] = render("ask", target, names, members, views.StartForm())
        return out

    async def updates(
        self, request: Request, found: deliberations.Found, since: int
    ) -> AsyncIterator[str]:
        """A message each time the run may have moved; the finished page and `end` once it
        closed."""
        sent: dict[str, str] = {}
        events: list[ProgressEvent] = []
        known: tuple[DeliberationRecord | None, str | None] | None = None
        next_seq = since
        last: tuple[Any, ...] | None = None
        shown = None
        async for progress in deliberations.follow(found.handle, 0, self.settings.poll_seconds):
            if await request.is_disconnected():
                return
            if progress is None:
                yield _sse({"waiting": True})
                continue
            events += progress.events
            if progress.events or known is None:
                known = await reading.read_record(found.handle)
            turn = await reading.read_turn(found, events, progress, known)
            fresh = [e for e in progress.events if e.seq >= next_seq]
            next_seq = max(next_seq, progress.next_seq)
            moment = _moment(turn, len(events))
            if moment == last and not fresh:
                yield ": nothing new\n\n"  # the connection is still checked
                continue
            last = moment
            sections = self.sections(turn)
            if shown is not None and turn.shown != shown:
                sections["threads"] = await self.sidebar(turn)  # stopping, say
            shown = turn.shown
            yield _sse(
                {
                    "events": [_line(e) for e in fresh],
                    "state": turn.shown,
                    "sections": _changed(sections, sent),
                },
                next_seq,
            )
        try:
            closed = await deliberations.find(self.client, found.id)
        except deliberations.NoSuchDeliberation:
            return
        turn = await reading.read_turn(closed)
        sections = {**self.sections(turn, True), "threads": await self.sidebar(turn)}
        yield _sse({"events": [], "state": turn.shown, "sections": _changed(sections, sent)})
        yield "event: end\ndata: {}\n\n"


def _moment(turn: views.Turn, events: int) -> tuple[Any, ...]:
    """What the sections of a running deliberation follow: the events (every change of the
    record comes with one) and each call's state and text so far."""
    calls = tuple((c.model, c.state, c.content_bytes, c.attempt) for c in turn.calls)
    return events, calls, turn.chairman_writing, len(turn.chairman_text or "")


def _line(event: ProgressEvent) -> dict[str, Any]:
    return {"seq": event.seq, "kind": event.kind.value, "line": event_line(event)}


def _changed(sections: dict[str, str], sent: dict[str, str]) -> dict[str, str]:
    """The sections whose HTML differs from what this stream sent last (and remember it)."""
    out = {}
    for name, html in sections.items():
        if sent.get(name) != html:
            out[name] = sent[name] = html
    return out


def _sse(data: dict[str, Any], event_id: int | None = None) -> str:
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}data: {json.dumps(data)}\n\n"
