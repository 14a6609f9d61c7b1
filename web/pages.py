"""The HTML pages: list and start deliberations, show one, stop and steer it, ask a
follow-up, download its record, sign in.

    GET  /                                  the start form, recent deliberations, a filter
    POST /  (or /deliberations)             start one (the form); a refusal is the list page
                                            again, every error beside its field
    GET  /deliberations/{id}                one deliberation, in its thread (a conversation):
                                            built in place while it runs, the record after
    POST /deliberations/{id}/stop           the stop signal, with an optional reason
    POST /deliberations/{id}/rounds         one more round (an Update of the maximum rounds)
    POST /deliberations/{id}/critique       the user's critique of a model's answer (an Update)
    POST /deliberations/{id}/follow-up      ask a follow-up of a completed deliberation
    GET  /deliberations/{id}/record.md      the record as Markdown (record.json: as JSON)
    GET  /deliberations/{id}/attachments/{sha256}
                                            a file the user attached, as a download (never
                                            shown as a page): a PDF as the file itself where
                                            the run kept it, else from the run's input
    GET  /deliberations/{id}/attachments/{sha256}/text
                                            the same as the council read it (a PDF's text)
    GET  /statuses?id=ID[&id=ID...]         the state of each (JSON): keeps the sidebar current
    GET  /login, POST /login                the access token, when COUNCIL_WEB_TOKEN is set

A GET of an address that only takes a POST (reloading a refused form) goes to the page
the form belongs to.

Model text is untrusted: the templates escape every string (Jinja2's autoescape), show
model text through the `markdown` filter (web/markdown.py: no raw HTML, no image, links
to http, https and mailto only), and every id in a URL is percent-encoded. A notice after
a redirect is a code from NOTICES, never text from the address, and shows only while the
run is running (on a finished run nothing was or will be applied); a refusal is shown on
the page it concerns, in our words, with a refused critique kept in its box as typed.
"""

from __future__ import annotations

import base64
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

from starlette.datastructures import FormData, UploadFile
from starlette.formparsers import MultiPartException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates
from starlette.types import Message
from temporalio.client import Client, WorkflowHandle

from app.requests import attachments as files
from app.requests import front_door
from app.settings import councils
from app.views.render import record_markdown
from council import limits, numbers
from council.attachments import PDF_TYPE, Attachment, count_problem
from council.ids import ID_RULE, is_valid_id
from council.limits import MAX_STOP_REASON_CHARS
from council.models import DeliberationRecord, DeliberationRequest
from council.progress import shown_status
from council.steering import HumanCritique, rounds_problem
from doctor.tools import offer_problem
from runs import finding, listing, starting, steering
from runs.priority import Launch
from runs.quota import QuotaExceeded
from web import markdown, reading, views
from web.guard import (
    SESSION_COOKIE,
    SESSION_SECONDS,
    Forbidden,
    Guard,
    TooManyFailures,
    client_key,
    sign_in_target,
    too_many,
)
from web.settings import WebSettings

HERE = Path(__file__).parent
ATTACHMENT_LIMITS = (
    "UTF-8 text (Markdown, code, CSV, JSON), PDF (its text) or PNG, JPEG, GIF, WebP images: "
    f"at most {limits.MAX_ATTACHMENTS} files, "
    f"{limits.size_text(limits.MAX_ATTACHMENT_TEXT_BYTES)} of text or "
    f"{limits.size_text(limits.MAX_ATTACHMENT_IMAGE_BYTES)} of image each, "
    f"{limits.size_text(limits.MAX_ATTACHMENTS_TOTAL_BYTES)} in all"
)
LIST_LIMIT = 50
THREADS_SHOWN = 15
DOWNLOADS = {"json": "application/json", "md": "text/markdown; charset=utf-8"}
# A refused critique comes back as it was typed, up to this much (far above what is taken).
KEPT_CRITIQUE_CHARS = 20_000
# What a redirect may ask the page to say: codes only, so that no link can put its own
# words on the page. {max_rounds} is the record's; {model} one of the run's own members
# (named by the redirect, shown only when the record has it).
NOTICES = {
    "stop": "stop requested: calls in flight are cancelled and the chairman synthesizes what "
    "the council has",
    "rounds": "the maximum is now {max_rounds} refinement round(s)",
    "critique": "your critique of {model} waits for the next refinement round",
}


def url_id(workflow: str) -> str:
    """An id as a URL path segment."""
    return quote(workflow, safe="")


def deliberation_url(workflow: str, suffix: str = "") -> str:
    return f"/deliberations/{url_id(workflow)}{suffix}"


def templates() -> Jinja2Templates:
    found = Jinja2Templates(directory=HERE / "templates")
    found.env.globals["deliberation_url"] = deliberation_url
    found.env.filters["markdown"] = markdown.render
    found.env.globals["shown_status"] = shown_status
    found.env.globals["attachment_limits"] = ATTACHMENT_LIMITS
    return found


class Pages:
    def __init__(
        self, client: Client, settings: WebSettings, guard: Guard, templates: Jinja2Templates
    ) -> None:
        self.client = client
        self.settings = settings
        self.guard = guard
        self.templates = templates

    def routes(self) -> list[Route]:
        return [
            Route("/", self.index, methods=["GET"]),
            Route("/", self.writing(self.start), methods=["POST"]),
            Route("/deliberations", self.to_index, methods=["GET"]),
            Route("/deliberations", self.writing(self.start), methods=["POST"]),
            Route("/deliberations/{id}", self.show, methods=["GET"]),
            *(
                route
                for action, handler in (
                    ("stop", self.stop),
                    ("rounds", self.rounds),
                    ("critique", self.critique),
                    ("follow-up", self.follow_up),
                )
                for route in (
                    Route(f"/deliberations/{{id}}/{action}", self.to_deliberation, methods=["GET"]),
                    Route(
                        f"/deliberations/{{id}}/{action}", self.writing(handler), methods=["POST"]
                    ),
                )
            ),
            Route("/deliberations/{id}/record.{format:str}", self.download, methods=["GET"]),
            Route(
                "/deliberations/{id}/attachments/{sha256:str}",
                partial(self.attachment, original=True),
                methods=["GET"],
            ),
            Route(
                "/deliberations/{id}/attachments/{sha256:str}/text",
                partial(self.attachment, original=False),
                methods=["GET"],
            ),
            Route("/statuses", self.statuses, methods=["GET"]),
            Route("/login", self.login, methods=["GET", "POST"]),
        ]

    def page(self, request: Request, name: str, code: int = 200, **context: Any) -> Response:
        context.setdefault("token_required", self.guard.token_required)
        context.setdefault("public_read", self.settings.public_read)
        context.setdefault("simulated", self.settings.simulated)
        return self.templates.TemplateResponse(request, name, context, status_code=code)

    async def to_index(self, request: Request) -> Response:
        return RedirectResponse("/", status_code=303)

    async def to_deliberation(self, request: Request) -> Response:
        return RedirectResponse(deliberation_url(request.path_params["id"]), status_code=303)

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
            except TooManyFailures as refused:
                return too_many(refused)
            except Forbidden as refused:
                return PlainTextResponse(str(refused), status_code=403)
            form = await read_form(request, FORM_MAX_BYTES, max_files=UPLOADS_READ)
            return form if isinstance(form, Response) else await handler(request, form)

        return checked

    # ---- the list and the start form ------------------------------------------------

    async def index(
        self, request: Request, form: views.StartForm | None = None, status: int = 200
    ) -> Response:
        text = request.query_params.get("q", "")
        reading = self.settings.variables.web_search_runs
        found = await listing.search_deliberations(self.client, LIST_LIMIT, text, reading)
        names, members = council_choices(self.settings)
        return self.page(
            request,
            "index.html",
            status,
            rows=found.rows,
            q=text,
            searched=reading if found.bounded else None,
            form=form or views.StartForm(),
            councils=names,
            members=members,
            # council.toml's, fetch, and web_search where it has a search backend
            tool_choices=self.settings.config.tool_set().available(),
        )

    async def start(self, request: Request, form: FormData) -> Response:
        fields = {k: v for k, v in form.items() if isinstance(v, str)}
        # The tools ticked (several values of one field), as one.
        fields[views.TOOLS] = ",".join(v for v in form.getlist(views.TOOLS) if isinstance(v, str))
        wanted, state = await self.from_form(fields, form)
        refused = await self.tools_refused(wanted)
        if refused is not None:
            state.errors.update(views.form_errors(refused))
            wanted = None
        if wanted is None:
            return await self.index(request, state, status=400)
        try:
            handle = await self.start_for(request, wanted)
        except QuotaExceeded as over:
            state.errors[views.FORM_WIDE] = str(over)
            return await self.index(request, state, status=429)
        return RedirectResponse(deliberation_url(handle.id), status_code=303)

    async def from_form(
        self, fields: dict[str, str], form: FormData
    ) -> tuple[DeliberationRequest | None, views.StartForm]:
        """The request the fields describe (views.request_from_form), with the form's files."""
        uploads = [
            f
            for f in form.getlist(front_door.ATTACHMENTS)
            if isinstance(f, UploadFile) and f.filename
        ]
        return views.request_from_form(
            fields,
            self.settings.config,
            self.settings.variables,
            files=await read_uploads(uploads),
            chosen=[files.clean_name(f.filename, "file") for f in uploads],
        )

    async def tools_refused(self, wanted: DeliberationRequest | None) -> front_door.Refused | None:
        """The refusal of a request (composed already) an MCP entry of which offers none of
        its tools (app.requests.front_door.check_tools); None when it may start."""
        if wanted is None:
            return None
        try:
            await front_door.check_tools(wanted, self.settings.config, offer_problem)
        except front_door.Refused as refused:
            return refused
        return None

    async def start_for(
        self, request: Request, wanted: DeliberationRequest
    ) -> WorkflowHandle[Any, DeliberationRecord]:
        """Start the run as whoever asked: its fairness key and its quota (QuotaExceeded)."""
        return await starting.start(
            self.client,
            wanted,
            self.settings.task_queue,
            launch=Launch(tenant=self.guard.tenant(request), quota=self.settings.quota),
        )

    # ---- one deliberation -------------------------------------------------------------

    async def show(self, request: Request) -> Response:
        notice = request.query_params.get("done", "")
        model = request.query_params.get("model")
        return await self.deliberation_page(
            request, request.path_params["id"], notice=notice, notice_model=model
        )

    async def deliberation_page(
        self,
        request: Request,
        workflow: str,
        *,
        notice: str | None = None,
        notice_model: str | None = None,
        refused: str | None = None,
        typed: views.TypedCritique | None = None,
        ask_form: views.StartForm | None = None,
        code: int = 200,
    ) -> Response:
        try:
            found = await finding.find(self.client, workflow)
        except finding.NoSuchDeliberation:
            return self.missing(request, workflow)
        current = await reading.read_turn(found)
        if notice == "stop" and current.running:
            current.stop_requested = True  # the signal is in; the run may not have said so yet
        record = current.record
        # Nothing was or will be applied to a run that has ended: no notice says so.
        note = notice_line(notice or "", record, notice_model) if current.running else None
        before, after = await reading.read_thread(self.client, current)
        pdfs = record is not None and any(a.media_type == PDF_TYPE for a in record.attachments)
        originals = await finding.kept_originals(found) if pdfs else set()
        rows = await listing.list_deliberations(self.client, LIST_LIMIT, conversations=True)
        names, members = council_choices(self.settings)
        turns = [*before, current, *after]
        return self.page(
            request,
            "deliberation.html",
            code,
            current=current,
            before=before,
            after=after,
            follow_ups=[t for t in after if t.record and t.record.follow_up_of == current.id],
            note=note,
            refused=refused,
            typed=typed,
            ui_url=starting.ui_url(self.client, workflow, self.settings.ui_url),
            originals=originals,
            threads=views.sidebar(rows, current, THREADS_SHOWN),
            here=current.thread,
            ask_of=ask_target(turns),
            ask_waiting=turns[-1].running,
            ask_form=ask_form or views.StartForm(),
            councils=names,
            members=members,
        )

    async def stop(self, request: Request, form: FormData) -> Response:
        workflow = request.path_params["id"]
        reason = str(form.get("reason") or "").strip()[:MAX_STOP_REASON_CHARS] or None
        try:
            found = await finding.find(self.client, workflow)
            await steering.stop(found, reason)
        except finding.NoSuchDeliberation:
            return self.missing(request, workflow)
        except steering.AlreadyFinished as finished:
            return await self.deliberation_page(request, workflow, refused=str(finished), code=409)
        return RedirectResponse(deliberation_url(workflow, "?done=stop"), status_code=303)

    async def rounds(self, request: Request, form: FormData) -> Response:
        rounds = numbers.whole(str(form.get("rounds") or "")) or 0
        problem = None
        if rounds_problem(rounds):
            problem = "the maximum rounds must be a whole number from 1 to 5"
        return await self.steer(request, steering.set_max_rounds, rounds, problem, "rounds")

    async def critique(self, request: Request, form: FormData) -> Response:
        """The user's critique; refused, the page again keeps what was typed."""
        typed = views.TypedCritique(
            model=str(form.get("model") or "")[:200],
            text=str(form.get("text") or "")[:KEPT_CRITIQUE_CHARS],
        )
        critique = HumanCritique(model=typed.model, text=typed.text)
        return await self.steer(request, steering.add_critique, critique, None, "critique", typed)

    async def steer(
        self,
        request: Request,
        update: Callable[[finding.Found, Any], Awaitable[Any]],
        argument: Any,
        problem: str | None,
        done: str,
        typed: views.TypedCritique | None = None,
    ) -> Response:
        """One more round, or the user's critique: an Update, or the page again with the
        reason it was refused (and the critique as it was typed)."""
        workflow = request.path_params["id"]
        try:
            found = await finding.find(self.client, workflow)
        except finding.NoSuchDeliberation:
            return self.missing(request, workflow)
        if problem is None:
            try:
                await update(found, argument)
            except steering.SteeringRefused as refused:
                problem = str(refused)
        if problem:
            return await self.deliberation_page(
                request, workflow, refused=problem, typed=typed, code=409
            )
        about = f"&model={quote(typed.model, safe='')}" if typed is not None else ""
        return RedirectResponse(deliberation_url(workflow, f"?done={done}{about}"), status_code=303)

    async def follow_up(self, request: Request, form: FormData) -> Response:
        """A follow-up from the box at the bottom of a conversation: the same council as the
        turn it follows, or the one picked beside the box. A refusal is the page again, the
        error beside the field it concerns and the question kept."""
        workflow = request.path_params["id"]
        fields = {
            name: str(form.get(name) or "") for name in ("question", "council", "context_tokens")
        }
        try:
            found = await finding.find(self.client, workflow)
        except finding.NoSuchDeliberation:
            return self.missing(request, workflow)
        record, _ = await reading.read_record(found.handle)
        same = _settings_of(record) if not fields["council"] else {}
        wanted, state = await self.from_form({**fields, **same}, form)
        state.values = {**fields, front_door.ATTACHMENTS: state.values[front_door.ATTACHMENTS]}
        refused = await self.tools_refused(wanted)
        if refused is not None:
            state.errors[views.FORM_WIDE] = str(refused)
            wanted = None
        if wanted is not None:
            try:
                thread = await starting.thread_of(self.client, workflow, wanted.context_tokens)
                wanted = front_door.in_thread(wanted, thread)
            except (starting.FollowUpError, front_door.Refused) as error:
                state.errors[views.FORM_WIDE] = str(error)
                wanted = None
        if wanted is None:
            return await self.deliberation_page(request, workflow, ask_form=state, code=409)
        try:
            handle = await self.start_for(request, wanted)
        except QuotaExceeded as over:
            state.errors[views.FORM_WIDE] = str(over)
            return await self.deliberation_page(request, workflow, ask_form=state, code=429)
        return RedirectResponse(deliberation_url(handle.id), status_code=303)

    async def download(self, request: Request) -> Response:
        workflow, kind = request.path_params["id"], request.path_params["format"]
        if kind not in DOWNLOADS:
            return PlainTextResponse(f"no download as .{kind[:20]} (json or md)", status_code=404)
        try:
            found = await finding.find(self.client, workflow)
        except finding.NoSuchDeliberation as missing:
            return PlainTextResponse(str(missing), status_code=404)
        record, problem = await reading.read_record(found.handle)
        if record is None:
            return PlainTextResponse(problem or "no record yet", status_code=404)
        body = record.model_dump_json(indent=2) if kind == "json" else record_markdown(record)
        # The id follows the id rule: safe in a header as it is.
        disposition = f'attachment; filename="{workflow}.{kind}"'
        return Response(
            body, media_type=DOWNLOADS[kind], headers={"Content-Disposition": disposition}
        )

    async def attachment(self, request: Request, *, original: bool) -> Response:
        """A file the user attached, as a download, its type never sniffed: with `original`,
        the file as it was given where the run kept it (a PDF), else as it was read (a
        PDF's text; any other file the same either way)."""
        workflow, sha256 = request.path_params["id"], request.path_params["sha256"].lower()
        try:
            found = await finding.find(self.client, workflow)
        except finding.NoSuchDeliberation as missing:
            return PlainTextResponse(str(missing), status_code=404)
        attachment = await finding.attachment_of(found, sha256)
        if attachment is None:
            return PlainTextResponse(f"{workflow} has no attachment {sha256[:64]}", 404)
        kept = None
        if original and attachment.media_type == PDF_TYPE:
            kept = await finding.original_of(found, sha256)
        if kept is not None:
            body, media_type, name = kept, PDF_TYPE, attachment.name
        else:
            body, media_type, name = served(attachment)
        return Response(
            body,
            media_type=media_type,
            headers={
                "Content-Disposition": disposition(name),
                "X-Content-Type-Options": "nosniff",
                "Content-Security-Policy": "sandbox; default-src 'none'",
            },
        )

    async def statuses(self, request: Request) -> Response:
        """The state each of these deliberations is in, as the page shows it: what keeps
        the sidebar's entries current, one request for all of them."""
        ids = request.query_params.getlist("id")
        if len(ids) > LIST_LIMIT or not all(is_valid_id(each) for each in ids):
            return PlainTextResponse(
                f"id: 0 to {LIST_LIMIT} deliberation ids, each {ID_RULE}", status_code=400
            )
        rows = await listing.list_deliberations(self.client, len(ids), ids=ids)
        return JSONResponse({"statuses": {row.id: row.shown for row in rows}})

    # ---- the access token ---------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self.page(
                request, "login.html", then=sign_in_target(request.query_params.get("next"))
            )
        try:
            self.guard.check_origin(request)
        except Forbidden as refused:
            return PlainTextResponse(str(refused), status_code=403)
        client = client_key(request)
        wait = self.guard.sign_in_wait(client, signing_in=True)
        if wait:
            error = f"too many sign-ins from this address: try again in {wait:.0f} s"
            response = self.page(request, "login.html", 429, error=error)
            response.headers["Retry-After"] = f"{wait:.0f}"
            return response
        form = await read_form(request, LOGIN_FORM_BYTES, max_files=0)
        if isinstance(form, Response):
            return form
        given = str(form.get("token") or "")
        then = sign_in_target(str(form.get("next") or ""))
        self.guard.sign_in_tried(client)
        principal = self.guard.principals.matching(given) if given else None
        if principal is None:
            self.guard.sign_in_failed(client)
            refusal = "that is not a token of this server"
            return self.page(request, "login.html", 403, error=refusal, then=then)
        response = RedirectResponse(then, status_code=303)
        response.set_cookie(
            SESSION_COOKIE,
            self.guard.new_session(principal),
            max_age=SESSION_SECONDS,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        return response


# A start form's uploads: more than a run may carry are read (and refused in the form, in one
# line); past this many, the form is not read at all.
UPLOADS_READ = 100
# The files of one form together, as uploaded: the largest PDF a run may read, and as much
# again as a run's texts and images may hold in all.
UPLOADS_MAX_BYTES = limits.MAX_ATTACHMENT_PDF_BYTES + limits.MAX_ATTACHMENTS_TOTAL_BYTES
# The most a form may send, counted as it arrives (a 413 past it, the rest never read):
# a question at its limit (4 bytes a character in UTF-8, 12 percent-encoded: a urlencoded
# form carries no files) with the uploads, and room for the other fields. It bounds each
# field too, so that a question over its limit is read and refused by the front door in
# its own words, not by the form's parser.
FORM_MAX_BYTES = (
    max(12 * limits.QUESTION_MAX_CHARS, 4 * limits.QUESTION_MAX_CHARS + UPLOADS_MAX_BYTES)
    + 1_000_000
)
LOGIN_FORM_BYTES = 64_000


class FormTooLarge(MultiPartException):
    """A form over its cap (a MultiPartException, so that the parser closes the files it
    spooled when it is raised mid-read)."""

    def __init__(self, most: int) -> None:
        super().__init__(
            f"the form is too large: at most {limits.size_text(most)} in all (a question, and "
            f"files of at most {limits.size_text(UPLOADS_MAX_BYTES)} together)"
            if most == FORM_MAX_BYTES
            else f"the form is too large: at most {limits.size_text(most)}"
        )


async def read_form(request: Request, most: int, *, max_files: int) -> FormData | Response:
    """The request's form, its body counted as it arrives: a 413 as soon as it is over
    `most` bytes (at once when its Content-Length says so), before the rest is read or
    spooled to disk; a 400 when it cannot be read. Each field may be as long as the whole."""
    declared = numbers.whole(request.headers.get("content-length", ""), signed=False)
    if declared is not None and declared > most:
        return PlainTextResponse(FormTooLarge(most).message, status_code=413)
    received = 0

    async def receive() -> Message:
        nonlocal received
        message = await request.receive()
        if message["type"] == "http.request":
            received += len(message.get("body", b""))
            if received > most:
                raise FormTooLarge(most)
        return message

    # A Request of its own over the capped stream; Starlette would answer the parser's own
    # errors with a bare 400 of its words where the scope names the app.
    scope = {key: value for key, value in request.scope.items() if key != "app"}
    try:
        return await Request(scope, receive).form(max_files=max_files, max_part_size=most)
    except FormTooLarge as refused:
        return PlainTextResponse(refused.message, status_code=413)
    except MultiPartException as error:
        return PlainTextResponse(f"the form cannot be read: {error}", status_code=400)


async def read_uploads(uploads: list[UploadFile]) -> list[files.Attached]:
    """The files of the start form, read (app.requests.attachments): their count and then each one's
    size checked before any is read, the PDFs read apart from the event loop."""
    too_many = count_problem(len(uploads))
    if too_many:  # said before any file is read
        return [files.AttachmentProblem(f": {too_many}")]
    given: list[files.Attached] = []
    for upload in uploads:
        name = files.clean_name(upload.filename, "file")
        most = files.largest_file()
        if upload.size is not None and upload.size > most:
            given.append(
                files.AttachmentProblem(
                    f": {name} is too large: a file may have at most {limits.size_text(most)}"
                )
            )
            continue
        data = await upload.read(most + 1)
        try:
            given.append(files.received(name, data, upload.content_type))
        except files.AttachmentProblem as problem:
            given.append(problem)
    return await files.read_files_apart(given)


def served(attachment: Attachment) -> tuple[bytes, str, str]:
    """An attachment as a download: its bytes, type and file name. A text is served as
    text/plain whatever it is (an HTML file is never a page of this site); a PDF as the
    text the council read."""
    if attachment.data_base64 is not None:
        return base64.b64decode(attachment.data_base64), attachment.media_type, attachment.name
    text = (attachment.text or "").encode("utf-8")
    name = attachment.name + (".txt" if attachment.media_type == PDF_TYPE else "")
    return text, "text/plain; charset=utf-8", name


def notice_line(code: str, record: DeliberationRecord | None, model: str | None) -> str | None:
    """What a redirect asked the page to say (NOTICES), filled from the record; the member a
    critique went to is named only when it is one of the run's own."""
    line = NOTICES.get(code)
    if line is None:
        return None
    if record is None:
        return line if "{" not in line else None
    member = model if model in record.models else None
    if member is None:
        line = line.replace(" of {model}", "")
    return line.format(max_rounds=record.iteration.max_rounds, model=member)


def disposition(name: str) -> str:
    """Content-Disposition of a download: an ASCII fallback and the name itself (RFC 6266)."""
    fallback = "".join(ch if (ch.isascii() and ch.isalnum()) or ch in "._-" else "_" for ch in name)
    return f"attachment; filename=\"{fallback or 'attachment'}\"; filename*=UTF-8''{quote(name)}"


def _settings_of(record: DeliberationRecord | None) -> dict[str, str]:
    """A follow-up asks the same council: the models and chairman of the turn it follows."""
    if record is None:
        return {}
    return {"models": "\n".join(record.models), "chairman": record.chairman}


def council_choices(settings: WebSettings) -> tuple[list[str], dict[str, list[str]]]:
    """The councils a user can pick, and each one's members."""
    names = councils.council_names(settings.config)
    return names, {
        name: councils.council_options(settings.config, name, settings.variables)["models"]
        for name in names
    }


def ask_target(turns: list[views.Turn]) -> views.Turn | None:
    """The turn the box at the bottom follows up: the newest that completed with a final
    answer, unless a newer one is still running."""
    if turns and turns[-1].running:
        return None
    return next(
        (t for t in reversed(turns) if t.status == "completed" and t.final is not None), None
    )
