"""The OpenAI-compatible API: a deliberation asked and answered as a chat completion.

    GET  /v1/models               council (the default council) and council/NAME per named one
    GET  /v1/models/{model}       one of them
    POST /v1/chat/completions     the chairman's final answer to the last user message

The last user message is the question; the user and assistant messages before it reach
every member as the conversation so far (trimmed to context_tokens, oldest turns first,
as a follow-up's are), and when the newest of them is a deliberation's own question and
final answer, the request follows that deliberation up, in its thread; system (and
developer) messages are the user's instructions. The
completion's id is the deliberation's workflow id. A streamed completion sends its role
at once, SSE comments while the council works, then the final answer as content deltas
(the chairman's reply as it is written, when it can be read). A client that goes away
before the end stops the deliberation. Errors come in the OpenAI shape, before any
stream starts; a deliberation that fails mid-stream ends the stream with an error event.

What is done with each other field of the body is web.openai_options': read, accepted and
ignored, or refused by name. With a response_format the chairman answers in the client's
JSON (checked by the workflow, repaired once); the answer is sent whole once it is in,
and an answer that does not conform is an error (502, which the SDKs must not retry).

The rules of the web server hold here too: the Host allowlist (web.app), a POST from a
browser only from this server's own origin, and with COUNCIL_WEB_TOKEN set,
`Authorization: Bearer TOKEN` on every route. Input is bounded: the body, the number of
messages, and each message's text.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import Receive, Scope, Send
from temporalio.client import Client, WorkflowFailureError, WorkflowHandle
from temporalio.service import RPCError

from app.access import request_body
from app.requests import front_door
from app.settings import councils
from app.store import store
from app.temporal import connection
from council import limits
from council.agreement import independent_votes, verdict
from council.calls import Stage
from council.config import DEFAULT_COUNCIL
from council.models import DeliberationRecord, DeliberationRequest
from council.progress import Progress
from council.report import answers_line
from council.thread import Thread
from doctor.tools import offer_problem
from runs import finding, following, starting, steering
from runs.priority import Launch, Urgency
from runs.quota import Quota, QuotaExceeded
from runs.stuck import RunStuck
from web.guard import Forbidden, Guard, TooManyFailures
from web.openai_body import ChatBody, Conversation, Refusal, read_body
from web.openai_options import OptionError, check_fields
from web.pages import deliberation_url
from web.settings import WebSettings

MODEL_PREFIX = "council"
SERVED = ("/v1/models", "/v1/chat/completions")
ANY_METHOD = ["GET", "POST", "PUT", "PATCH", "DELETE"]
# A question at its limit with every character escaped in JSON (six bytes each), and room
# for earlier turns; what the body holds is bounded again field by field.
MAX_BODY_BYTES = 6 * limits.QUESTION_MAX_CHARS + 1_000_000
# Attachments travel in the body as base64: room for the most a run may carry.
ATTACHMENT_BODY_BYTES = limits.MAX_ATTACHMENTS_TOTAL_BYTES * 4 // 3 + 64_000
KEEPALIVE_SECONDS = 3.0
DONE = "data: [DONE]\n\n"
STOP_REASON = "the API client disconnected"
# Said in the stream when the final answer does not continue the text already streamed
# (the chairman's call was asked again, or another member wrote the synthesis).
REWRITTEN = "\n\n(The synthesis was written again; the final answer follows.)\n\n"


class ApiError(Exception):
    """A refusal in the OpenAI error shape; the message is one line."""

    def __init__(
        self,
        status: int,
        message: str,
        code: str,
        kind: str = "invalid_request_error",
        param: str | None = None,
        retry: bool = True,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.kind = kind
        self.param = param
        # False: the SDKs must not ask again on their own (another deliberation, paid again).
        self.retry = retry

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": str(self),
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }

    def response(self) -> JSONResponse:
        headers = {"WWW-Authenticate": "Bearer"} if self.status == 401 else {}
        if not self.retry:
            headers["x-should-retry"] = "false"
        return JSONResponse(self.body(), status_code=self.status, headers=headers)


def bad_request(message: str, param: str | None = None, code: str = "invalid_request") -> ApiError:
    return ApiError(400, message, code, param=param)


# ---- the request --------------------------------------------------------------------------


@dataclass
class Asked:
    """A chat completion request, read and checked: its body, the council it names (None:
    the default council) and the conversation its messages make."""

    body: ChatBody
    council: str | None
    conversation: Conversation

    @property
    def include_usage(self) -> bool:
        return self.body.stream_options is not None and self.body.stream_options.include_usage

    def launch(self, caller: str, quota: Quota) -> Launch:
        """How urgent the run is and for whom: `flex` is batch work; the tenant is the
        caller as it authenticated (web.guard), whatever end user the body names (`user`
        and `safety_identifier` are the caller's word: naming others would give one caller
        the shares of many, and naming another's would take its share); held to `quota`."""
        return Launch(
            Urgency.BATCH if self.body.service_tier == "flex" else Urgency.INTERACTIVE,
            caller,
            quota,
        )


def model_ids(names: list[str]) -> dict[str, str | None]:
    """API model id -> council name (None: the default council)."""
    ids: dict[str, str | None] = {MODEL_PREFIX: None}
    ids.update({f"{MODEL_PREFIX}/{name}": name for name in names if name != DEFAULT_COUNCIL})
    return ids


def no_such_model(model: str, known: dict[str, str | None]) -> ApiError:
    shown = model if len(model) <= 100 else model[:97] + "..."
    return ApiError(
        404,
        f"no model {shown!r} here: the models are {', '.join(known)}",
        "model_not_found",
        param="model",
    )


async def read_asked(raw: Any, known: dict[str, str | None]) -> Asked:
    """The body read (web.openai_body): every field it may not hold refused by name; the
    files read last, apart from the event loop."""
    if not isinstance(raw, dict):
        raise bad_request("the body must be a JSON object")
    try:
        check_fields(raw, tuple(ChatBody.model_fields))
        body = read_body(raw)
        if body.model not in known:
            raise no_such_model(body.model, known)
        conversation = body.conversation()
        await conversation.read_attachments()
    except OptionError as refused:
        raise bad_request(str(refused), refused.param) from None
    except Refusal as refused:
        raise bad_request(str(refused), refused.param, refused.code) from None
    return Asked(body, known[body.model], conversation)


async def read_json(request: Request) -> Any:
    """The body as JSON: Content-Type application/json, at most MAX_BODY_BYTES."""
    if request_body.media_type(request) != "application/json":
        raise ApiError(
            415,
            "the body must be JSON: send Content-Type: application/json",
            "unsupported_media_type",
        )
    try:
        body = await request_body.read_body(request, MAX_BODY_BYTES + ATTACHMENT_BODY_BYTES)
    except request_body.BodyTooLarge as too_large:
        raise ApiError(413, str(too_large), "request_too_large") from None
    except ClientDisconnect:
        raise bad_request("the body did not arrive whole") from None
    try:
        return json.loads(body)
    except (ValueError, RecursionError):
        raise bad_request("the body is not valid JSON", code="invalid_json") from None


# ---- the answer -------------------------------------------------------------------------


@dataclass
class StreamedText:
    """What a stream has sent of the final answer, so that the deltas add up to it."""

    sent: str = ""

    def more(self, partial: str) -> str:
        """The new part of the reply being written; nothing while it does not continue
        what was sent (a call asked again starts over)."""
        if not partial.startswith(self.sent):
            return ""
        delta, self.sent = partial[len(self.sent) :], partial
        return delta

    def rest(self, final: str) -> str:
        """What is left to send of the final answer: after what was sent when that is its
        beginning, else a note and the whole answer."""
        if final.startswith(self.sent):
            return final[len(self.sent) :]
        return REWRITTEN + final


def final_answer(record: DeliberationRecord) -> str:
    return record.stage3.response if record.stage3 else ""


def finish_reason(record: DeliberationRecord) -> str:
    """The finish reason: length when the chairman's reply was cut by its token limit."""
    return "length" if record.stage3 and record.stage3.cut_by_token_limit else "stop"


def not_retried(message: str, code: str, param: str | None = None) -> ApiError:
    """A 502 the SDKs must not ask again on their own (another deliberation, paid again)."""
    return ApiError(502, message, code, "server_error", param=param, retry=False)


def usage_of(record: DeliberationRecord) -> dict[str, int]:
    return record.usage.model_dump(include={"prompt_tokens", "completion_tokens", "total_tokens"})


def where_of(progress: Progress | None) -> str:
    """Where the run is, for a keep-alive comment (one line, our words)."""
    if progress is None:
        return following.WAITING
    if progress.stage is None:
        return "starting"
    return f"working: {progress.stage.place(progress.round)}"


def failed(workflow: str, failure: WorkflowFailureError) -> ApiError:
    """A deliberation that failed, in one line: its reason as the workflow gave it."""
    reason = finding.failure_reason(failure)
    return not_retried(f"deliberation {workflow} failed: {reason}", "deliberation_failed")


def stuck(workflow: str, problem: RunStuck) -> ApiError:
    """A deliberation whose workflow task keeps failing: it would never answer."""
    return not_retried(
        f"deliberation {workflow} is stuck: {problem} (a stop ends it)", "deliberation_stuck"
    )


@dataclass
class Seen:
    """What one look at a running deliberation saw."""

    progress: Progress | None  # None: no worker answers yet
    partial: str | None  # the chairman's reply so far, while it writes it


@dataclass
class Started:
    """A deliberation the API started, and what its answer says about it."""

    handle: WorkflowHandle[Any, DeliberationRecord]
    asked: Asked
    created: int
    page: str
    ui: str

    @property
    def id(self) -> str:
        return self.handle.id

    def about(self, record: DeliberationRecord) -> dict[str, Any]:
        """The completion's `council` field."""
        reason = record.iteration.terminated_reason
        agreement, report = record.agreement, record.disagreement_report
        return {
            "id": record.id,
            "status": record.status,
            "termination_reason": str(reason) if reason else None,
            "rounds": record.iteration.rounds_completed,
            "chairman": record.stage3.model if record.stage3 else record.chairman,
            "page": self.page,
            "temporal_ui": self.ui,
            "agreement": agreement.model_dump(mode="json") if agreement else None,
            "verdict": verdict(agreement) if agreement else None,
            "independent_votes": independent_votes(agreement) if agreement else None,
            # The members' first answers by the values they state (not the ratings).
            "answers_agree": answers_line(report) if report else None,
            "depth": record.depth,
            "disagreement_report": report.model_dump(mode="json") if report else None,
            # Depth auto: the agreement gate's verdict, and the calls cancelled as not needed.
            **(
                {
                    "gate": record.gate.model_dump(mode="json"),
                    "gate_line": record.gate.describe(),
                    "not_needed": [n.model_dump(mode="json") for n in record.not_needed],
                    # Went straight to the synthesis: what that saved (an estimate).
                    "saved": record.saved.model_dump(mode="json") if record.saved else None,
                    "saved_line": record.saved.describe() if record.saved else None,
                }
                if record.gate
                else {}
            ),
            # The members' tools (absent without): each call made, where and whose.
            **(
                {
                    "tools": record.tools,
                    "tool_calls": [c.model_dump(mode="json") for c in record.tool_calls],
                    "tools_unavailable": record.tools_unavailable,
                    "tools_withheld": record.tools_withheld,
                    "without_tools": record.without_tools,
                }
                if record.tools
                else {}
            ),
        }

    def head(self, kind: str) -> dict[str, Any]:
        return {
            "id": self.id,
            "object": kind,
            "created": self.created,
            "model": self.asked.body.model,
        }

    def unmet(self, record: DeliberationRecord) -> ApiError | None:
        """The refusal of a final answer that is not the JSON response_format asked for (the
        chairman was asked with the schema, and once more with what was wrong)."""
        problem = record.stage3.format_problem if record.stage3 else "the council wrote no answer"
        if self.asked.body.response_format is None or problem is None:
            return None
        reason = " ".join(problem.split())
        reason = reason if len(reason) <= 300 else reason[:297] + "..."
        return not_retried(
            f"deliberation {self.id}: the final answer does not match response_format: {reason}",
            "response_format_unmet",
            "response_format",
        )

    def completion(self, record: DeliberationRecord) -> dict[str, Any]:
        message = {"role": "assistant", "content": final_answer(record)}
        finish = finish_reason(record)
        return {
            **self.head("chat.completion"),
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage_of(record),
            "council": self.about(record),
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return event({**self.head("chat.completion.chunk"), "choices": [choice], **extra})

    def usage_chunk(self, record: DeliberationRecord) -> str:
        return event(
            {**self.head("chat.completion.chunk"), "choices": [], "usage": usage_of(record)}
        )


def event(body: dict[str, Any]) -> str:
    return f"data: {json.dumps(body)}\n\n"


class StopWhenLeft(StreamingResponse):
    """A stream that, when it ends before its last event was sent (the client went away),
    stops the deliberation."""

    def __init__(self, events: AsyncIterator[str], stop: Callable[[], None]) -> None:
        self.finished = False
        self.stop = stop
        super().__init__(
            self._through(events),
            media_type="text/event-stream",
            headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"},
        )

    async def _through(self, events: AsyncIterator[str]) -> AsyncIterator[str]:
        async for text in events:
            yield text
        self.finished = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            if not self.finished:
                self.stop()


# ---- the routes -------------------------------------------------------------------------


class OpenAIApi:
    def __init__(self, client: Client, settings: WebSettings, guard: Guard) -> None:
        self.client = client
        self.settings = settings
        self.guard = guard
        self.created = int(time.time())
        self._stopping: set[asyncio.Task[None]] = set()

    def routes(self) -> list[Route]:
        return [
            Route("/v1/models", self.answering(self.models), methods=["GET"]),
            Route("/v1/models/{model:path}", self.answering(self.model), methods=["GET"]),
            Route("/v1/chat/completions", self.answering(self.completions), methods=["POST"]),
            Route("/v1/{rest:path}", self.answering(self.unknown), methods=ANY_METHOD),
        ]

    def answering(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """A handler behind the token, with its refusals in the OpenAI shape."""

        async def answer(request: Request) -> Response:
            try:
                self.check_token(request)
                return await handler(request)
            except ApiError as refused:
                return refused.response()
            except RPCError as error:
                return self.temporal_error(error).response()
            except store.StoreError as error:  # a blob gone or corrupt: the store's line
                return ApiError(502, str(error), "payload_unreadable", "api_error").response()

        return answer

    def check_token(self, request: Request) -> None:
        try:
            given = self.guard.token_given(request, session=False)
        except TooManyFailures as refused:
            raise ApiError(
                429, str(refused), "too_many_failed_tokens", "rate_limit_error", retry=False
            ) from None
        if not given:
            raise ApiError(
                401,
                "this server needs its access token: send Authorization: Bearer TOKEN "
                "(COUNCIL_WEB_TOKEN, or your own of COUNCIL_WEB_TOKENS)",
                "invalid_api_key",
            )

    def temporal_error(self, error: RPCError) -> ApiError:
        message = connection.described(error, self.settings.temporal_address)
        if connection.unavailable(error):
            return ApiError(503, message, "temporal_unavailable", "server_error")
        return ApiError(502, message, "temporal_error", "server_error")

    def known(self) -> dict[str, str | None]:
        return model_ids(councils.council_names(self.settings.config))

    # ---- models ----

    def model_object(self, model: str, name: str | None) -> dict[str, Any]:
        options = councils.council_options(self.settings.config, name, self.settings.variables)
        members = list(options.get("models", []))
        return {
            "id": model,
            "object": "model",
            "created": self.created,
            "owned_by": MODEL_PREFIX,
            "council": {"models": members, "chairman": options.get("chairman") or members[0]},
        }

    async def models(self, request: Request) -> Response:
        data = [self.model_object(model, name) for model, name in self.known().items()]
        return JSONResponse({"object": "list", "data": data})

    async def model(self, request: Request) -> Response:
        model = request.path_params["model"]
        known = self.known()
        if model not in known:
            raise no_such_model(model, known)
        return JSONResponse(self.model_object(model, known[model]))

    async def unknown(self, request: Request) -> Response:
        path = request.url.path
        if path in SERVED or path.startswith("/v1/models/"):
            raise ApiError(
                405, f"{request.method} is not served at {path[:100]}", "method_not_allowed"
            )
        raise ApiError(404, f"no route {request.method} {path[:100]}", "unknown_url")

    # ---- chat completions ----

    async def completions(self, request: Request) -> Response:
        try:
            self.guard.check_origin(request)
        except Forbidden as refused:
            raise ApiError(403, str(refused), "forbidden_origin", "permission_error") from None
        asked = await read_asked(await read_json(request), self.known())
        wanted = await self.deliberation_request(asked)
        thread = await self.thread_of(asked.conversation)
        if thread.follow_up_of:
            wanted = await self.deliberation_request(asked, thread)
        try:
            handle = await starting.start(
                self.client,
                wanted,
                self.settings.task_queue,
                launch=asked.launch(self.guard.tenant(request, session=False), self.settings.quota),
            )
        except QuotaExceeded as over:
            raise ApiError(
                429, str(over), "quota_exceeded", "rate_limit_error", retry=False
            ) from None
        started = Started(
            handle=handle,
            asked=asked,
            created=int(time.time()),
            page=str(request.base_url).rstrip("/") + deliberation_url(handle.id),
            ui=starting.ui_url(self.client, handle.id, self.settings.ui_url),
        )
        if asked.body.stream:
            return self.streamed(started)
        return await self.answered(request, started)

    async def thread_of(self, said: Conversation) -> Thread:
        """The earlier turns the messages bring; when the newest of them is a deliberation's
        own question and final answer (a client that sends the council's answers back, as
        `llm -c` does), the request follows that deliberation up, in its thread. The turns
        are the client's either way: what the council is shown is what the client sent."""
        thread = Thread(history=said.history)
        if not said.history:
            return thread
        last = said.history[-1]
        record = await starting.answered(self.client, last.question, last.answer)
        if record is None:
            return thread
        return Thread(
            follow_up_of=record.id,
            thread_id=record.thread_id or record.id,
            history=[*said.history[:-1], last.model_copy(update={"id": record.id})],
        )

    async def deliberation_request(
        self, asked: Asked, thread: Thread | None = None
    ) -> DeliberationRequest:
        """The request, through the front door, in `thread` (default: the turns the messages
        bring, following nothing up; then a 400 too when an MCP entry the request names
        offers none of its tools: app.requests.front_door.check_tools); a refusal names the
        body's field."""
        said = asked.conversation
        try:
            wanted = front_door.compose(
                said.question,
                asked.body.options(),
                council=asked.council,
                config=self.settings.config,
                settings=self.settings.variables,
                thread=thread or Thread(history=said.history),
                instructions=said.instructions,
                answer_format=asked.body.response_format,
                attachments=said.attachments,
            )
            if thread is None:
                await front_door.check_tools(wanted, self.settings.config, offer_problem)
            return wanted
        except front_door.Refused as refused:
            first = refused.problems[0]
            if first.loc == (front_door.COUNCIL,):  # the file changed under a running server
                why = first.text.removeprefix(": ")
                raise ApiError(404, why, "model_not_found", param="model") from None
            raise bad_request(first.line(), asked.body.param_of(first.loc)) from None

    async def answered(self, request: Request, started: Started) -> Response:
        """The completion, once the deliberation completes; if the client leaves first,
        the deliberation is stopped."""
        result = asyncio.ensure_future(started.handle.result())
        gone = asyncio.ensure_future(disconnected(request))
        # The follower says when the run is stuck (its result would never come).
        watcher = asyncio.ensure_future(self.watch(started.handle, asyncio.Queue(), False))
        left = False
        problem: RunStuck | None = None
        try:
            await asyncio.wait({result, gone, watcher}, return_when=asyncio.FIRST_COMPLETED)
            if not (result.done() or gone.done()):  # the follower ended first
                failure = watcher.exception()
                if isinstance(failure, RunStuck):
                    problem = failure
                else:
                    await asyncio.wait({result, gone}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            drop(gone)
            drop(watcher)
            if not result.done():
                drop(result)
                if problem is None:  # the client left: stopped (a stuck run is left as it is)
                    left = True
                    self.stop_soon(started.handle)
        if problem is not None:
            raise stuck(started.id, problem)
        if left:
            return Response(status_code=499)  # nobody is there to read it
        try:
            record = result.result()
        except WorkflowFailureError as failure:
            raise failed(started.id, failure) from None
        unmet = started.unmet(record)
        if unmet is not None:
            raise unmet
        return JSONResponse(started.completion(record))

    def streamed(self, started: Started) -> Response:
        return StopWhenLeft(self.stream(started), lambda: self.stop_soon(started.handle))

    async def stream(self, started: Started) -> AsyncIterator[str]:
        yield started.chunk({"role": "assistant", "content": ""})
        text = StreamedText()
        result = asyncio.ensure_future(started.handle.result())
        try:
            async for line in self.while_running(started, result, text):
                yield line
            record = await result
            refused = started.unmet(record)
        except WorkflowFailureError as failure:
            refused = failed(started.id, failure)
        except RunStuck as problem:
            refused = stuck(started.id, problem)
        except RPCError as error:
            refused = self.temporal_error(error)
        finally:
            drop(result)  # read already, or the client left first
        if refused is not None:
            yield event(refused.body())
        else:
            rest = text.rest(final_answer(record))
            if rest:
                yield started.chunk({"content": rest})
            yield started.chunk({}, finish_reason(record), council=started.about(record))
            if started.asked.include_usage:
                yield started.usage_chunk(record)
        yield DONE

    async def while_running(
        self, started: Started, result: asyncio.Future[Any], text: StreamedText
    ) -> AsyncIterator[str]:
        """Keep-alive comments that say where the run is, and the new part of the
        chairman's reply as it is written, until the result is in."""
        seen: asyncio.Queue[Seen] = asyncio.Queue()
        # JSON asked for comes whole once it is checked: a reply being written may not be it.
        partials = started.asked.body.response_format is None
        watcher = asyncio.ensure_future(self.watch(started.handle, seen, partials))
        said, last = "", 0.0
        step: asyncio.Future[Seen] | None = None
        try:
            while not result.done():
                step = asyncio.ensure_future(seen.get())
                await asyncio.wait({result, step, watcher}, return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    drop(step)
                    if watcher.done() and not result.done():
                        watcher.result()  # raises what ended the watch, if anything did
                        await asyncio.wait({result})  # the run closed: its result is coming
                    continue
                now = step.result()
                where = where_of(now.progress)
                if where != said or time.monotonic() - last >= KEEPALIVE_SECONDS:
                    yield f": {where}\n\n"
                    said, last = where, time.monotonic()
                delta = text.more(now.partial) if now.partial else ""
                if delta:
                    yield started.chunk({"content": delta})
                    last = time.monotonic()
        finally:
            drop(watcher)
            if step is not None:
                drop(step)

    async def watch(
        self, handle: WorkflowHandle[Any, Any], seen: asyncio.Queue[Seen], partials: bool = True
    ) -> None:
        """Where the run is, and (with `partials`) the chairman's reply so far, each time it
        may have moved."""
        async for progress in following.follow(handle):
            partial = None
            if (
                partials
                and progress
                and progress.stage is Stage.SYNTHESIS
                and not progress.finished
            ):
                replies = await finding.partial_replies(handle)
                writing = [reply.text for reply in replies if reply.stage is Stage.SYNTHESIS]
                partial = writing[-1] if writing else None
            seen.put_nowait(Seen(progress, partial))

    def stop_soon(self, handle: WorkflowHandle[Any, Any]) -> None:
        """Send the stop signal from a task of its own: the request's own task may be
        cancelled already."""
        task = asyncio.get_running_loop().create_task(self.send_stop(handle))
        self._stopping.add(task)
        task.add_done_callback(self._stopping.discard)

    async def send_stop(self, handle: WorkflowHandle[Any, Any]) -> None:
        found = finding.Found(self.client, handle, "running", self.settings.task_queue)
        # An RPCError: it closed meanwhile, or the server is down.
        with contextlib.suppress(RPCError):
            await steering.stop(found, STOP_REASON)


def drop(task: asyncio.Future[Any]) -> None:
    """Cancel a task whose outcome nobody will read (a failure it ended with counts as read)."""
    if not task.done():
        task.cancel()
    elif not task.cancelled():
        task.exception()


async def disconnected(request: Request) -> None:
    """Returns when the client has gone away (the body was read before)."""
    while (await request.receive())["type"] != "http.disconnect":
        continue
