"""The HTML pages: list and start deliberations, show one, stop and steer it, ask a
follow-up, download its record, sign in.

    GET  /                                  recent deliberations, a filter, the start form
    POST /deliberations                     start one (the form)
    GET  /deliberations/{id}                one deliberation: live while it runs, the record after
    POST /deliberations/{id}/stop           the stop signal, with an optional reason
    POST /deliberations/{id}/rounds         one more round (an Update of the maximum rounds)
    POST /deliberations/{id}/critique       the user's critique of a model's answer (an Update)
    POST /deliberations/{id}/follow-up      ask a follow-up of a completed deliberation
    GET  /deliberations/{id}/record.md      the record as Markdown (record.json: as JSON)
    GET  /login, POST /login                the access token, when COUNCIL_WEB_TOKEN is set

Model text is untrusted: the templates escape every string (Jinja2's autoescape) and
every id in a URL is percent-encoded. A notice after a redirect is a code from NOTICES,
never text from the address; a refusal is shown on the page it concerns, in our words.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates
from temporalio.client import Client, WorkflowFailureError
from temporalio.service import RPCError

from app import councils
from app.render import record_markdown
from council.limits import MAX_STOP_REASON_CHARS
from council.models import DeliberationRecord
from council.steering import HumanCritique, rounds_problem
from web import views
from web.guard import TOKEN_COOKIE, Forbidden, Guard
from web.settings import Settings
from workflows import client as deliberations

HERE = Path(__file__).parent
LIST_LIMIT = 50
DOWNLOADS = {"json": "application/json", "md": "text/markdown; charset=utf-8"}
# What a redirect may ask the page to say: codes only, so that no link can put its own
# words on the page. {max_rounds} is the record's.
NOTICES = {
    "stop": "stop requested: calls in flight are cancelled and the chairman synthesizes what "
    "the council has",
    "rounds": "the maximum is now {max_rounds} refinement round(s)",
    "critique": "your critique waits for the next refinement round",
}


def url_id(workflow: str) -> str:
    """An id as a URL path segment."""
    return quote(workflow, safe="")


def deliberation_url(workflow: str, suffix: str = "") -> str:
    return f"/deliberations/{url_id(workflow)}{suffix}"


def templates() -> Jinja2Templates:
    found = Jinja2Templates(directory=HERE / "templates")
    found.env.globals["stage_title"] = views.stage_title
    found.env.globals["deliberation_url"] = deliberation_url
    return found


class Pages:
    def __init__(
        self, client: Client, settings: Settings, guard: Guard, templates: Jinja2Templates
    ) -> None:
        self.client = client
        self.settings = settings
        self.guard = guard
        self.templates = templates

    def routes(self) -> list[Route]:
        return [
            Route("/", self.index, methods=["GET"]),
            Route("/deliberations", self.writing(self.start), methods=["POST"]),
            Route("/deliberations/{id}", self.show, methods=["GET"]),
            Route("/deliberations/{id}/stop", self.writing(self.stop), methods=["POST"]),
            Route("/deliberations/{id}/rounds", self.writing(self.rounds), methods=["POST"]),
            Route("/deliberations/{id}/critique", self.writing(self.critique), methods=["POST"]),
            Route("/deliberations/{id}/follow-up", self.writing(self.follow_up), methods=["POST"]),
            Route("/deliberations/{id}/record.{format:str}", self.download, methods=["GET"]),
            Route("/login", self.login, methods=["GET", "POST"]),
        ]

    def page(self, request: Request, name: str, code: int = 200, **context: Any) -> Response:
        context.setdefault("token_required", bool(self.settings.token))
        return self.templates.TemplateResponse(request, name, context, status_code=code)

    def missing(self, request: Request, workflow: str) -> Response:
        return self.page(request, "missing.html", 404, workflow=workflow)

    def writing(
        self, handler: Callable[[Request, FormData], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A handler that starts, stops or steers: refused (403) unless the guard lets the
        request through; given the posted form."""

        async def checked(request: Request) -> Response:
            try:
                self.guard.check_write(request)
            except Forbidden as refused:
                return PlainTextResponse(str(refused), status_code=403)
            return await handler(request, await request.form())

        return checked

    def council(self, name: str | None) -> dict[str, Any]:
        """A council's options (the default council's without a name)."""
        return councils.council_options(self.settings.config, name or None)

    # ---- the list and the start form ------------------------------------------------

    async def index(
        self, request: Request, form: views.StartForm | None = None, status: int = 200
    ) -> Response:
        text = request.query_params.get("q", "")
        rows = await deliberations.list_deliberations(self.client, LIST_LIMIT, text)
        if form is None:
            form = views.StartForm()
        names = councils.council_names(self.settings.config)
        members = {name: self.council(name)["models"] for name in names}
        return self.page(
            request,
            "index.html",
            status,
            rows=rows,
            q=text,
            form=form,
            councils=names,
            members=members,
        )

    async def start(self, request: Request, form: FormData) -> Response:
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        try:
            council = self.council(fields.get("council"))
        except councils.UnknownCouncil as unknown:
            state = views.StartForm(fields, {"council": str(unknown.args[0])})
            return await self.index(request, state, status=400)
        wanted, state = views.request_from_form(fields, council)
        if wanted is None:
            return await self.index(request, state, status=400)
        handle = await deliberations.start(self.client, wanted, self.settings.task_queue)
        return RedirectResponse(deliberation_url(handle.id), status_code=303)

    # ---- one deliberation -------------------------------------------------------------

    async def show(self, request: Request) -> Response:
        notice = request.query_params.get("done", "")
        return await self.deliberation_page(request, request.path_params["id"], notice=notice)

    async def deliberation_page(
        self,
        request: Request,
        workflow: str,
        *,
        notice: str | None = None,
        refused: str | None = None,
        code: int = 200,
    ) -> Response:
        try:
            found = await deliberations.find(self.client, workflow)
        except deliberations.NoSuchDeliberation:
            return self.missing(request, workflow)
        record, problem = await read(found.handle)
        note = NOTICES.get(notice or "")
        if note and record:
            note = note.format(max_rounds=record.iteration.max_rounds)
        return self.page(
            request,
            "deliberation.html",
            code,
            workflow=workflow,
            status=found.status,
            record=record,
            problem=problem,
            note=note,
            refused=refused,
            thread=await self.thread(record),
            running=found.status == "running",
            matrices=views.review_matrices(record) if record else [],
            model_labels={m: label for label, m in record.label_to_model.items()} if record else {},
            rounds=[(r, views.refinements(r, record.label_to_model)) for r in record.rounds]
            if record
            else [],
            ui_url=deliberations.ui_url(self.client, workflow),
        )

    async def stop(self, request: Request, form: FormData) -> Response:
        workflow = request.path_params["id"]
        reason = str(form.get("reason") or "").strip()[:MAX_STOP_REASON_CHARS] or None
        try:
            found = await deliberations.find(self.client, workflow)
        except deliberations.NoSuchDeliberation:
            return self.missing(request, workflow)
        if found.status == "running":
            await deliberations.stop(found, reason)
        return RedirectResponse(deliberation_url(workflow, "?done=stop"), status_code=303)

    async def rounds(self, request: Request, form: FormData) -> Response:
        text = str(form.get("rounds") or "").strip()
        rounds = int(text) if text.isdigit() and len(text) < 3 else 0
        problem = None
        if rounds_problem(rounds):
            problem = "the maximum rounds must be a whole number from 1 to 5"
        return await self.steer(request, deliberations.set_max_rounds, rounds, problem, "rounds")

    async def critique(self, request: Request, form: FormData) -> Response:
        critique = HumanCritique(
            model=str(form.get("model") or ""), text=str(form.get("text") or "")
        )
        return await self.steer(request, deliberations.add_critique, critique, None, "critique")

    async def steer(
        self,
        request: Request,
        update: Callable[[deliberations.Found, Any], Awaitable[Any]],
        argument: Any,
        problem: str | None,
        done: str,
    ) -> Response:
        """One more round, or the user's critique: an Update, or the page again with the
        reason it was refused."""
        workflow = request.path_params["id"]
        try:
            found = await deliberations.find(self.client, workflow)
        except deliberations.NoSuchDeliberation:
            return self.missing(request, workflow)
        if problem is None:
            try:
                await update(found, argument)
            except deliberations.SteeringRefused as refused:
                problem = str(refused)
        if problem:
            return await self.deliberation_page(request, workflow, refused=problem, code=409)
        return RedirectResponse(deliberation_url(workflow, f"?done={done}"), status_code=303)

    async def follow_up(self, request: Request, form: FormData) -> Response:
        workflow = request.path_params["id"]
        fields = {"question": str(form.get("question") or "")}
        if form.get("context_tokens"):
            fields["context_tokens"] = str(form.get("context_tokens"))
        try:
            found = await deliberations.find(self.client, workflow)
        except deliberations.NoSuchDeliberation:
            return self.missing(request, workflow)
        record, _ = await read(found.handle)
        wanted, state = views.request_from_form(fields | _settings_of(record), self.council(None))
        problem = None if wanted else next(iter(state.errors.values()))
        if wanted is not None:
            try:
                wanted = await deliberations.follow_up(self.client, wanted, workflow)
            except deliberations.FollowUpError as error:
                problem = str(error)
        if problem or wanted is None:
            return await self.deliberation_page(request, workflow, refused=problem, code=409)
        handle = await deliberations.start(self.client, wanted, self.settings.task_queue)
        return RedirectResponse(deliberation_url(handle.id), status_code=303)

    async def thread(self, record: DeliberationRecord | None) -> list[tuple[str, str, str | None]]:
        """The thread's other deliberations, oldest first: (id, question, final answer)."""
        if record is None or not record.thread_id:
            return []
        turns = []
        for row in await deliberations.list_thread(self.client, record.thread_id):
            if row.id == record.id:
                continue
            answer = None
            if row.status == "completed":
                earlier, _ = await read(deliberations.handle(self.client, row.id))
                answer = earlier.stage3.response if earlier and earlier.stage3 else None
            turns.append((row.id, row.question or row.id, answer))
        return turns

    async def download(self, request: Request) -> Response:
        workflow, kind = request.path_params["id"], request.path_params["format"]
        if kind not in DOWNLOADS:
            return PlainTextResponse(f"no download as .{kind[:20]} (json or md)", status_code=404)
        try:
            found = await deliberations.find(self.client, workflow)
        except deliberations.NoSuchDeliberation as missing:
            return PlainTextResponse(str(missing), status_code=404)
        record, problem = await read(found.handle)
        if record is None:
            return PlainTextResponse(problem or "no record yet", status_code=404)
        body = record.model_dump_json(indent=2) if kind == "json" else record_markdown(record)
        # The id follows the id rule: safe in a header as it is.
        disposition = f'attachment; filename="{workflow}.{kind}"'
        return Response(
            body, media_type=DOWNLOADS[kind], headers={"Content-Disposition": disposition}
        )

    # ---- the access token ---------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self.page(request, "login.html")
        try:
            self.guard.check_origin(request)
        except Forbidden as refused:
            return PlainTextResponse(str(refused), status_code=403)
        client = request.client.host if request.client else "?"
        wait = self.guard.login_wait(client)
        if wait:
            error = f"too many failed sign-ins: try again in {wait:.0f} s"
            response = self.page(request, "login.html", 429, error=error)
            response.headers["Retry-After"] = f"{wait:.0f}"
            return response
        form = await request.form()
        given = str(form.get("token") or "")
        if not self.guard.token_matches(given):
            self.guard.login_failed(client)
            return self.page(request, "login.html", 403, error="that is not this server's token")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(TOKEN_COOKIE, given, httponly=True, samesite="strict")
        return response


def _settings_of(record: DeliberationRecord | None) -> dict[str, str]:
    """A follow-up asks the same council: the models and chairman of the turn it follows."""
    if record is None:
        return {}
    return {"models": "\n".join(record.models), "chairman": record.chairman}


async def read(handle: Any) -> tuple[DeliberationRecord | None, str | None]:
    """The record (the record so far while it runs), or None and why there is none, in our
    words. A server that does not answer is raised (the app answers 503)."""
    try:
        return await deliberations.read_record(handle), None
    except WorkflowFailureError as failure:
        cause = failure.cause
        return None, f"the deliberation failed: {getattr(cause, 'message', None) or cause}"
    except RPCError as error:
        if deliberations.unavailable(error):
            raise
        return None, "no record yet: no worker answers for this deliberation"
    except Exception:  # a query no worker answers yet, and the like
        return None, "no record yet: no worker answers for this deliberation"
