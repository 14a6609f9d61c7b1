"""The web page's routes: list and start deliberations, watch one live, stop it, read it.

    GET  /                                  recent deliberations, a filter, the start form
    POST /deliberations                     start one (the form)
    GET  /deliberations/{id}                one deliberation: live while it runs, the record after
    GET  /deliberations/{id}/stream         its progress as Server-Sent Events (partial text too)
    POST /deliberations/{id}/stop           the stop signal, with an optional reason
    POST /deliberations/{id}/rounds         one more round (an Update of the maximum rounds)
    POST /deliberations/{id}/critique       the user's critique of a model's answer (an Update)
    POST /deliberations/{id}/follow-up      ask a follow-up of a completed deliberation
    GET  /deliberations/{id}/record.md      the record as Markdown (record.json: as JSON)
    GET  /login, POST /login                the access token, when COUNCIL_WEB_TOKEN is set

Model text is untrusted: the templates escape every string (Jinja2's autoescape), the
script sets text with textContent only, and a Content-Security-Policy allows no inline
script. Starting and stopping are refused from other origins, and need the token when
one is set.
"""

from __future__ import annotations

import hmac
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from starlette.applications import Starlette
from starlette.datastructures import FormData, MutableHeaders
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client, WorkflowFailureError, WorkflowUpdateFailedError
from temporalio.service import RPCError

from app.render import event_line, record_markdown
from council.models import DeliberationRecord
from council.progress import ProgressEvent
from council.steering import HumanCritique
from web import views
from workflows import client as deliberations
from workflows.deliberation import Deliberation

HERE = Path(__file__).parent
TOKEN_COOKIE = "council_token"
LIST_LIMIT = 50
MAX_REASON_CHARS = 500
# Scripts and styles from this server only; nothing inline, no plugins, no framing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}


@dataclass(frozen=True)
class Settings:
    task_queue: str
    token: str | None = None
    poll_seconds: float = 0.5


class Forbidden(Exception):
    pass


def build_app(client: Client, settings: Settings) -> Starlette:
    templates = Jinja2Templates(directory=HERE / "templates")
    templates.env.globals["stage_title"] = views.stage_title

    def page(request: Request, name: str, code: int = 200, **context: Any) -> Response:
        context.setdefault("token_required", bool(settings.token))
        return templates.TemplateResponse(request, name, context, status_code=code)

    def check_write(request: Request) -> None:
        """Same origin only; and the token, when the server has one."""
        own = f"{request.url.scheme}://{request.headers.get('host', '')}"
        origin = request.headers.get("origin")
        referer = request.headers.get("referer")
        if origin is not None and origin != own:
            raise Forbidden(f"refused: a request from another origin ({origin})")
        if origin is None and referer is not None and not referer.startswith(own + "/"):
            raise Forbidden("refused: a request from another page's origin")
        if settings.token:
            bearer = request.headers.get("authorization", "")
            given = request.cookies.get(TOKEN_COOKIE) or bearer.removeprefix("Bearer ").strip()
            if not hmac.compare_digest(given.encode(), settings.token.encode()):
                raise Forbidden("this server needs its access token to start or stop: /login")

    def defaults() -> dict[str, Any]:
        chairman = deliberations.default_chairman()
        return {
            "models": deliberations.default_models(),
            **({"chairman": chairman} if chairman else {}),
        }

    def writing(
        handler: Callable[[Request, FormData], Awaitable[Response]],
    ) -> Callable[[Request], Awaitable[Response]]:
        """A handler that starts, stops or steers: refused (403) unless check_write lets
        the request through; given the posted form."""

        async def checked(request: Request) -> Response:
            try:
                check_write(request)
            except Forbidden as refused:
                return PlainTextResponse(str(refused), status_code=403)
            return await handler(request, await request.form())

        return checked

    async def index(
        request: Request, form: views.StartForm | None = None, status: int = 200
    ) -> Response:
        text = request.query_params.get("q", "")
        rows = await deliberations.list_deliberations(client, LIST_LIMIT, text)
        if form is None:
            form = views.StartForm({"models": "\n".join(deliberations.default_models())})
        return page(request, "index.html", status, rows=rows, q=text, form=form)

    async def start(request: Request, form: FormData) -> Response:
        request_, state = views.request_from_form(
            {k: v for k, v in form.items() if isinstance(v, str)}, defaults()
        )
        if request_ is None:
            return await index(request, state, status=400)
        handle = await deliberations.start(client, request_, settings.task_queue)
        return RedirectResponse(f"/deliberations/{handle.id}", status_code=303)

    async def show(request: Request) -> Response:
        workflow = request.path_params["id"]
        handle = deliberations.handle(client, workflow)
        try:
            status = await deliberations.status_of(handle)
        except RPCError:
            return page(request, "missing.html", 404, workflow=workflow)
        record, problem = await _record(handle)
        return page(
            request,
            "deliberation.html",
            workflow=workflow,
            status=status,
            record=record,
            problem=problem,
            note=request.query_params.get("note"),
            refused=request.query_params.get("refused"),
            thread=await _thread(record),
            running=status == "running",
            matrices=views.review_matrices(record) if record else [],
            model_labels={m: label for label, m in record.label_to_model.items()} if record else {},
            rounds=[(r, views.refinements(r, record.label_to_model)) for r in record.rounds]
            if record
            else [],
            ui_url=deliberations.ui_url(client, workflow),
        )

    async def stream(request: Request) -> Response:
        handle = deliberations.handle(client, request.path_params["id"])
        since = int(request.headers.get("last-event-id") or request.query_params.get("since") or 0)
        return StreamingResponse(
            _progress_stream(request, handle, since, settings.poll_seconds),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def stop(request: Request, form: FormData) -> Response:
        workflow = request.path_params["id"]
        reason = str(form.get("reason") or "").strip()[:MAX_REASON_CHARS] or None
        handle = deliberations.handle(client, workflow)
        try:
            if await deliberations.status_of(handle) == "running":
                await handle.signal(Deliberation.stop, reason)
        except RPCError:
            return page(request, "missing.html", 404, workflow=workflow)
        return RedirectResponse(f"/deliberations/{workflow}", status_code=303)

    async def steer(request: Request, form: FormData) -> Response:
        """One more round, or the user's critique: an Update, refused with its reason."""
        workflow = request.path_params["id"]
        handle = deliberations.handle(client, workflow)
        try:
            if request.url.path.endswith("/rounds"):
                rounds = int(str(form.get("rounds") or "0"))
                done = await handle.execute_update(Deliberation.set_max_rounds, rounds)
                note = f"the maximum is now {done} refinement round(s)"
            else:
                critique = HumanCritique(
                    model=str(form.get("model") or ""), text=str(form.get("text") or "")
                )
                note = await handle.execute_update(Deliberation.add_critique, critique)
        except WorkflowUpdateFailedError as failed:
            cause = failed.cause
            return _back(workflow, refused=getattr(cause, "message", None) or str(cause))
        except (ValueError, RPCError) as error:
            return _back(workflow, refused=str(getattr(error, "message", None) or error))
        return _back(workflow, note=note)

    async def follow_up(request: Request, form: FormData) -> Response:
        workflow = request.path_params["id"]
        fields = {"question": str(form.get("question") or "")}
        if form.get("context_tokens"):
            fields["context_tokens"] = str(form.get("context_tokens"))
        wanted, state = views.request_from_form(
            fields | _settings_of(await _record(deliberations.handle(client, workflow))), defaults()
        )
        if wanted is None:
            return _back(workflow, refused=next(iter(state.errors.values())))
        try:
            wanted = await deliberations.follow_up(client, wanted, workflow)
        except deliberations.FollowUpError as error:
            return _back(workflow, refused=str(error))
        handle = await deliberations.start(client, wanted, settings.task_queue)
        return RedirectResponse(f"/deliberations/{handle.id}", status_code=303)

    async def _thread(record: DeliberationRecord | None) -> list[tuple[str, str, str | None]]:
        """The thread's other deliberations, oldest first: (id, question, final answer)."""
        if record is None or not record.thread_id:
            return []
        turns = []
        for row in await deliberations.list_thread(client, record.thread_id):
            if row.id == record.id:
                continue
            answer = None
            if row.status == "completed":
                earlier, _ = await _record(deliberations.handle(client, row.id))
                answer = earlier.stage3.response if earlier and earlier.stage3 else None
            turns.append((row.id, row.question or row.id, answer))
        return turns

    async def download(request: Request) -> Response:
        workflow = request.path_params["id"]
        record, problem = await _record(deliberations.handle(client, workflow))
        if record is None:
            return PlainTextResponse(problem or "no record yet", status_code=404)
        if request.path_params["format"] == "json":
            body, kind = record.model_dump_json(indent=2), "application/json"
        else:
            body, kind = record_markdown(record), "text/markdown; charset=utf-8"
        name = f"{workflow}.{request.path_params['format']}"
        return Response(
            body, media_type=kind, headers={"Content-Disposition": f'attachment; filename="{name}"'}
        )

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return page(request, "login.html")
        form = await request.form()
        given = str(form.get("token") or "")
        if not settings.token or not hmac.compare_digest(given.encode(), settings.token.encode()):
            return page(request, "login.html", 403, error="that is not this server's token")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
        return response

    return Starlette(
        middleware=[Middleware(SecurityHeaders)],
        routes=[
            Route("/", index, methods=["GET"]),
            Route("/deliberations", writing(start), methods=["POST"]),
            Route("/deliberations/{id}", show, methods=["GET"]),
            Route("/deliberations/{id}/stream", stream, methods=["GET"]),
            Route("/deliberations/{id}/stop", writing(stop), methods=["POST"]),
            Route("/deliberations/{id}/rounds", writing(steer), methods=["POST"]),
            Route("/deliberations/{id}/critique", writing(steer), methods=["POST"]),
            Route("/deliberations/{id}/follow-up", writing(follow_up), methods=["POST"]),
            Route("/deliberations/{id}/record.{format:str}", download, methods=["GET"]),
            Route("/login", login, methods=["GET", "POST"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
    )


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, sending)


def _back(workflow: str, **message: str) -> Response:
    """Back to the deliberation's page, with a note or the reason a request was refused."""
    return RedirectResponse(f"/deliberations/{workflow}?{urlencode(message)}", status_code=303)


def _settings_of(found: tuple[DeliberationRecord | None, str | None]) -> dict[str, str]:
    """A follow-up asks the same council: the models and chairman of the turn it follows."""
    record, _ = found
    if record is None:
        return {}
    return {"models": "\n".join(record.models), "chairman": record.chairman}


async def _record(handle: Any) -> tuple[DeliberationRecord | None, str | None]:
    """The record (the record so far while it runs), or None and why there is none."""
    try:
        return await deliberations.read_record(handle), None
    except WorkflowFailureError as failure:
        cause = failure.cause
        return None, f"the deliberation failed: {getattr(cause, 'message', None) or cause}"
    except RPCError as error:
        return None, f"no record yet ({error.message})"
    except Exception as error:  # a query no worker answers yet, and the like
        return None, f"no record yet ({error})"


async def _progress_stream(
    request: Request, handle: Any, since: int, poll_seconds: float
) -> AsyncIterator[str]:
    """Server-Sent Events: a message each time the run may have moved, with the new
    progress lines, each model's state, and the replies being written; `end` when it
    closed."""
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
