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
last message renders the finished page's sections and the sidebar, empties the notice of
what a control just did, and the event `end` follows.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.templating import Jinja2Templates
from temporalio.client import Client

from app.views.render import event_line
from council import numbers
from council.models import DeliberationRecord
from council.progress import ProgressEvent
from runs import finding, following, listing, starting
from runs.shared import Shared
from runs.stuck import RunStuck
from web import reading, views
from web.pages import LIST_LIMIT, THREADS_SHOWN, ask_target, council_choices
from web.settings import WebSettings

MAX_SEQ = 10**9
# A viewer hears from its stream at least this often (a comment when nothing changed), so
# that a connection its reader left is noticed.
KEEPALIVE_SECONDS = 2.0
# How often the page of a run whose workflow task keeps failing looks again whether a stop
# has ended it.
STUCK_SECONDS = 2.0
# The sections of the council's work, each rendered by the macro of its name.
SECTIONS = ("answers", "reviews", "rounds", "usage", "steering", "errors")


def since_of(request: Request) -> int | None:
    """Where the stream resumes: Last-Event-ID, else ?since=, else 0; None if malformed."""
    value = request.headers.get("last-event-id") or request.query_params.get("since") or "0"
    since = numbers.whole(value, signed=False)
    return since if since is not None and since <= MAX_SEQ else None


class Live:
    def __init__(self, client: Client, settings: WebSettings, templates: Jinja2Templates) -> None:
        self.client = client
        self.settings = settings
        self.templates = templates
        self.moments: Shared[Moment] = Shared()

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
            found = await finding.find(self.client, request.path_params["id"])
        except finding.NoSuchDeliberation as missing:
            return PlainTextResponse(str(missing), status_code=404)
        return StreamingResponse(
            self.updates(request, found, since),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def sidebar(self, turn: views.Turn) -> str:
        """The recent conversations, with this run's state as the page shows it."""
        # A template's macros: attributes of a module that Jinja makes as it loads it.
        parts: Any = self.templates.env.get_template("_turn.html").module
        rows = await listing.list_deliberations(self.client, LIST_LIMIT, conversations=True)
        return str(parts.threads(views.sidebar(rows, turn, THREADS_SHOWN), turn.thread))

    def sections(self, turn: views.Turn, finished: bool = False) -> dict[str, str]:
        """The page's sections for this state, by the id of the element that holds each."""
        parts = self.templates.env.get_template("_turn.html").module

        def render(macro: str, *args: Any) -> str:
            return str(getattr(parts, macro)(*args))

        ui_url = starting.ui_url(self.client, turn.id, self.settings.ui_url)
        out = {
            "turn-head": render("head", turn, ui_url, self.settings.simulated),
            "live-state": render("live", turn),
            "final-body": render("final", turn),
            **{name: render(name, turn) for name in SECTIONS},
        }
        if finished:
            # What a control did while the run went ("stop requested", "the maximum is now
            # 4 refinement round(s)") is no news once it has ended: the steering and the
            # stop reason keep it as history.
            out["notice"] = ""
            names, members = council_choices(self.settings)
            out["ask"] = render("ask", ask_target([turn]), names, members, views.StartForm())
        return out

    async def updates(
        self, request: Request, found: finding.Found, since: int
    ) -> AsyncIterator[str]:
        """A message each time the run moved (a comment at least every KEEPALIVE_SECONDS
        between); the finished page and `end` once it closed. Every viewer of a run in this
        server reads the same moments (see watch): its own work is to send what changed
        since its last message."""
        sent: dict[str, str] = {}
        next_seq = since
        shown: str | None = None
        moments = self.moments.subscribe(found.id, lambda: self.watch(found))
        async with aclosing(moments) as each:
            async for moment in each:
                if await request.is_disconnected():
                    return
                if moment.waiting:
                    yield _sse({"waiting": True})
                    continue
                fresh = moment.events[next_seq : moment.count]
                next_seq = max(next_seq, moment.count)
                sections = dict(moment.sections)
                if shown is not None and moment.state != shown and moment.sidebar is not None:
                    sections["threads"] = moment.sidebar  # stopping, say
                changed = _changed(sections, sent)
                if moment.closed:
                    yield _sse({"events": [], "state": moment.state, "sections": changed})
                    yield "event: end\ndata: {}\n\n"
                    return
                if not fresh and not changed and moment.state == shown:
                    yield ": nothing new\n\n"  # the connection is still checked
                    continue
                shown = moment.state
                lines = [_line(e) for e in fresh]
                yield _sse({"events": lines, "state": moment.state, "sections": changed}, next_seq)

    async def watch(self, found: finding.Found) -> AsyncIterator[Moment]:
        """The moments of a run's page, read and rendered once for every viewer of it in
        this server: each time the run moved (its events, the record when they came, each
        call's state and text so far), at least every KEEPALIVE_SECONDS; then the finished
        page."""
        events: list[ProgressEvent] = []
        try:
            async with aclosing(self._moments(found, events)) as moments:
                async for moment in moments:
                    yield moment
        except RunStuck:
            # No worker can go on with it: said (not "waiting") until a stop ends it.
            while True:
                turn = await reading.read_turn(await finding.find(self.client, found.id))
                if not turn.stuck:
                    break
                yield Moment(
                    events=events, count=len(events), state=turn.shown, sections=self.sections(turn)
                )
                await asyncio.sleep(STUCK_SECONDS)
        try:
            closed = await finding.find(self.client, found.id)
        except finding.NoSuchDeliberation:
            return
        turn = await reading.read_turn(closed)
        sections = {**self.sections(turn, True), "threads": await self.sidebar(turn)}
        yield Moment(
            events=events, count=len(events), state=turn.shown, sections=sections, closed=True
        )

    async def _moments(
        self, found: finding.Found, events: list[ProgressEvent]
    ) -> AsyncGenerator[Moment]:
        """The moments of a running deliberation (see watch), until it closes; `events`
        gathers its events."""
        known: tuple[DeliberationRecord | None, str | None] | None = None
        last: tuple[Any, ...] | None = None
        said = 0.0
        first: str | None = None  # the state shown when the watch began
        sidebar: tuple[str, str] | None = None  # (state, the recent conversations then)
        async for progress in following.follow(found.handle, 0):
            if progress is None:
                last = None
                yield Moment(waiting=True)
                continue
            events += progress.events
            if progress.events or known is None:
                known = await reading.read_record(found.handle)
            turn = await reading.read_turn(found, events, progress, known)
            now = _moment(turn, len(events))
            if now == last and time.monotonic() - said < KEEPALIVE_SECONDS:
                continue
            last, said = now, time.monotonic()
            first = turn.shown if first is None else first
            if turn.shown != first and (sidebar is None or sidebar[0] != turn.shown):
                sidebar = (turn.shown, await self.sidebar(turn))
            yield Moment(
                events=events,
                count=len(events),
                state=turn.shown,
                sections=self.sections(turn),
                sidebar=sidebar[1] if sidebar is not None and sidebar[0] == turn.shown else None,
            )


@dataclass(frozen=True)
class Moment:
    """A running deliberation's page at one moment, as every viewer of it is sent it: its
    events so far (the first `count` of an append-only list), the state shown, the sections
    by id, the recent conversations once the state shown changed, whether the run closed;
    or only that no worker answers."""

    waiting: bool = False
    events: list[ProgressEvent] = field(default_factory=list)
    count: int = 0
    state: str | None = None
    sections: dict[str, str] = field(default_factory=dict)
    sidebar: str | None = None
    closed: bool = False


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
