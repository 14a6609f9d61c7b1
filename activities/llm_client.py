"""A chat completion from an OpenAI-compatible /chat/completions endpoint, streamed or not.

Everything that can go wrong on the wire becomes a CallFailure with the cause named, and
nothing here knows Temporal. Temporal owns the attempts: a failed call is retried by its
retry policy, never here. Within one attempt, the client asks again in two cases only,
both without waiting: a reply form the provider refuses (json_schema, then json_object,
then free text: ChatClient.complete), and a stream that gave no whole reply (asked once
more unstreamed, and once more if the connection it came on had closed).
"""

from __future__ import annotations

import asyncio
import codecs
import contextlib
import json
import re
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any
from urllib.parse import quote

import httpx

from activities.completion import Completion
from activities.errors import (
    CallFailure,
    ErrorType,
    one_line,
    retry_after_from_headers,
    status_failure,
)
from activities.reading import chunks, tls
from activities.settings import GatewaySettings
from activities.slots import AnswerClock
from activities.sse import DONE_EVENT, SSEDecoder
from council.calls import ModelCall
from council.redaction import Redactor
from council.structured import JSON_OBJECT, JSON_SCHEMA

ERROR_BODY_LIMIT = 64_000
# After a stream's [DONE]: how much more is read to reuse its connection (_read_to_the_end).
DRAIN_LINES = 16
DRAIN_SECONDS = 1.0
KEEPALIVE_SECONDS = 60.0
# How much of a reply that is not JSON its error quotes.
QUOTED_CHARS = 80
# Line ends in an event stream: CRLF, CR or LF.
_LINE_END = re.compile(r"\r\n|\r|\n")


def make_http_client(
    settings: GatewaySettings, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The worker's one shared connection pool."""
    return httpx.AsyncClient(
        verify=tls(),
        timeout=httpx.Timeout(
            connect=settings.connect_timeout,
            read=settings.read_timeout,
            write=settings.connect_timeout,
            pool=None,
        ),
        limits=httpx.Limits(
            max_connections=settings.max_connections,
            # Every connection may stay open: with more calls at once than open connections
            # kept, each busy moment closed the surplus and the next opened it again (a new
            # TCP connection, and TLS with a provider, per call).
            max_keepalive_connections=settings.max_connections,
            # Idle connections stay open between deliberations (httpx's default is 5 s);
            # one the provider has closed meanwhile is noticed and replaced before use.
            keepalive_expiry=KEEPALIVE_SECONDS,
        ),
        follow_redirects=False,
        transport=transport,
    )


# The forms a reply's JSON schema can be asked in, and what the reply records of each.
JSON_OBJECT_WITH_SCHEMA = "json_object_with_schema"
FORMS: dict[str, list[str | None]] = {
    "auto": [JSON_SCHEMA, JSON_OBJECT_WITH_SCHEMA, JSON_OBJECT, None],
    "json_schema": [JSON_SCHEMA, None],
    "json_object": [JSON_OBJECT_WITH_SCHEMA, JSON_OBJECT, None],
    "off": [None],
}
# A provider that refuses a form says so in its error (400, 422; llama-cpp-python's server
# answers a json_schema with a 500 that names response_format).
_FORM_WORDS = re.compile(r"response_format|json_schema|json_object|schema|grammar|structured")


def response_format(call: ModelCall, form: str | None) -> dict[str, Any] | None:
    wanted = call.response_format
    if wanted is None or form is None:
        return None
    if form == JSON_SCHEMA:
        return {
            "type": JSON_SCHEMA,
            "json_schema": {"name": wanted.name, "schema": wanted.json_schema},
        }
    if form == JSON_OBJECT_WITH_SCHEMA:
        return {"type": JSON_OBJECT, "schema": wanted.json_schema}
    return {"type": JSON_OBJECT}


def refuses_form(failure: CallFailure) -> bool:
    """The provider refused the reply form asked for (not the call as such)."""
    status = failure.status or 0
    return (
        failure.kind is not ErrorType.CONTEXT_TOO_LONG
        and (status in (400, 422) or status >= 500)
        and bool(_FORM_WORDS.search(failure.detail.lower()))
    )


_TOOL_WORDS = re.compile(r"\btools?\b|tool_choice|function.call|functions")


def refuses_tools(failure: CallFailure) -> bool:
    """The provider refused the tools offered (not the call as such): 400 or 422 naming
    them (llama.cpp's server and vLLM without a tool parser, Ollama's "does not support
    tools")."""
    return (failure.status or 0) in (400, 422, 501) and bool(
        _TOOL_WORDS.search(failure.detail.lower())
    )


def request_body(
    call: ModelCall, settings: GatewaySettings, stream: bool, form: str | None = None
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": call.model,
        "messages": [message.wire() for message in call.messages],
    }
    if call.tools:
        body["tools"] = [tool.openai() for tool in call.tools]
    if call.temperature is not None:
        body["temperature"] = call.temperature
    if call.seed is not None:
        body["seed"] = call.seed
    if call.max_tokens is not None:
        body["max_tokens"] = call.max_tokens
    format_ = response_format(call, form)
    if format_ is not None:
        body["response_format"] = format_
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    if settings.is_openrouter:
        body["usage"] = {"include": True}  # OpenRouter: report cost
    return body


def _content_kind(content_type: str) -> str:
    value = content_type.lower()
    if "event-stream" in value:
        return "sse"
    if "json" in value:
        return "json"
    return "unknown"


CALL_ID_HEADER = "X-Council-Call"


class ChatClient:
    def __init__(
        self,
        settings: GatewaySettings,
        http: httpx.AsyncClient,
        redactor: Redactor | None = None,
    ) -> None:
        """`redactor`: the secrets kept out of every text a reply or an error brings (by
        default this provider's own)."""
        self.settings = settings
        self.http = http
        self.redactor = redactor or Redactor(settings.secrets())
        # Model -> the reply forms its provider refused (each is tried once per process).
        self.refused: dict[str, set[str]] = {}
        # The models whose provider refused tools (asked without them from then on).
        self.no_tools: set[str] = set()

    def forms(self, call: ModelCall) -> list[str | None]:
        """The forms to ask for the call's reply in, in order (None: free text)."""
        if call.response_format is None:
            return [None]
        refused = self.refused.get(call.model, set())
        return [f for f in FORMS[self.settings.structured_output] if f not in refused]

    async def complete(
        self,
        call: ModelCall,
        completion: Completion,
        call_id: str | None = None,
        clock: AnswerClock | None = None,
    ) -> str | None:
        """Fill `completion` with the reply to `call`, or raise CallFailure. Returns how
        the reply was asked for: json_schema, json_object, or None (free text).

        A form the provider refuses is remembered for the model and the next one tried
        (the last is free text). A stream that gives no whole reply is asked once more at
        once, without streaming: one cut without a finish reason (llama.cpp's server cuts
        a stream whenever another request waits, never an unstreamed reply), one that
        holds no data, and one whose connection closed before any reply (then the
        provider's own error is read: a prompt over the context window is the same error
        either way). If that fails too, Temporal retries the call. `call_id` (workflow id
        / activity id) goes out as X-Council-Call, so a provider's or the simulator's logs
        can tell a retry of a call from a new call. `clock` hears when each request is sent
        (activities.slots.AnswerClock).
        """
        clock = clock or AnswerClock()
        if call.tools and not self.takes_tools(call.model):
            call = call.model_copy(update={"tools": []})
            completion.tools_refused = True
        try:
            return await self._complete(call, completion, call_id, clock)
        except CallFailure as failure:
            if not (call.tools and refuses_tools(failure)):
                raise
        # The provider takes no tools for this model: remembered, and asked without.
        self.no_tools.add(call.model)
        completion.reset()
        completion.tools_refused = True
        return await self._complete(
            call.model_copy(update={"tools": []}), completion, call_id, clock
        )

    def takes_tools(self, model: str) -> bool:
        return self.settings.takes_tools(model) and model not in self.no_tools

    async def _complete(
        self, call: ModelCall, completion: Completion, call_id: str | None, clock: AnswerClock
    ) -> str | None:
        forms = self.forms(call)
        for form in forms:  # the last one is always tried
            try:
                try:
                    await self._exchange(
                        call, completion, call_id, form, self.settings.stream, clock
                    )
                except CallFailure as failure:
                    if not (failure.ask_unstreamed and self.settings.stream):
                        raise
                    await self._unstreamed(call, completion, call_id, form, clock)
            except CallFailure as failure:
                if form is None or form == forms[-1] or not refuses_form(failure):
                    raise
                self.refused.setdefault(call.model, set()).add(form)
                completion.reset()
                continue
            return JSON_OBJECT if form == JSON_OBJECT_WITH_SCHEMA else form
        return None

    async def _unstreamed(
        self,
        call: ModelCall,
        completion: Completion,
        call_id: str | None,
        form: str | None,
        clock: AnswerClock,
    ) -> None:
        """The call asked again without streaming, after a stream that gave no whole reply.
        The server may have closed the connection the stream came on while the pool still
        holds it: a connection that drops before any reply is replaced once."""
        for last in (False, True):
            completion.reset()
            try:
                await self._exchange(call, completion, call_id, form, False, clock)
                return
            except CallFailure as failure:
                if last or failure.kind is not ErrorType.CONNECTION_FAILED:
                    raise

    async def _exchange(
        self,
        call: ModelCall,
        completion: Completion,
        call_id: str | None,
        form: str | None,
        stream: bool,
        clock: AnswerClock,
    ) -> None:
        """One POST, its reply read into `completion`."""
        settings = self.settings
        headers = settings.headers(stream)
        if call_id:
            # Ids follow council.ids, but a workflow started elsewhere may have any id:
            # never a raw id in a header.
            headers[CALL_ID_HEADER] = quote(call_id, safe="/:._-~")
        headers_received = False
        clock.sent()
        try:
            async with self.http.stream(
                "POST",
                settings.chat_url,
                json=request_body(call, settings, stream, form),
                headers=headers,
            ) as response:
                headers_received = True
                await self._read(response, completion)
        except httpx.TimeoutException as err:
            if isinstance(err, httpx.ConnectTimeout):
                what = f"could not connect to {settings.host} within {settings.connect_timeout:g} s"
            elif isinstance(err, httpx.ReadTimeout):
                what = f"{settings.host} sent nothing for {settings.read_timeout:g} s"
            else:
                what = f"timed out talking to {settings.host}"
            raise CallFailure(ErrorType.TIMEOUT, f"{what} ({type(err).__name__})") from None
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.WriteError) as err:
            if headers_received:
                raise CallFailure(
                    ErrorType.TRUNCATED_STREAM,
                    f"the connection to {settings.host} broke mid-reply after "
                    f"{completion.received_bytes} bytes ({self._why(err)})",
                    ask_unstreamed=stream,
                ) from None
            # A server that fails a streamed reply before its first byte may just close the
            # connection (llama-cpp-python's, for a prompt over its context): asked again
            # unstreamed, it says why.
            raise CallFailure(
                ErrorType.CONNECTION_FAILED,
                f"{settings.host} dropped the connection ({self._why(err)})",
                ask_unstreamed=stream,
            ) from None
        except (httpx.ConnectError, httpx.NetworkError) as err:
            raise CallFailure(
                ErrorType.CONNECTION_FAILED, f"cannot connect to {settings.host} ({self._why(err)})"
            ) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as err:
            raise CallFailure(
                ErrorType.BAD_CONFIGURATION,
                f"cannot call the base URL (check COUNCIL_LLM_BASE_URL): {self._why(err)}",
            ) from None
        except httpx.DecodingError as err:
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE, f"the reply cannot be decoded ({self._why(err)})"
            ) from None
        except httpx.TransportError as err:
            raise CallFailure(
                ErrorType.CONNECTION_FAILED,
                f"the call to {settings.host} failed ({self._why(err)})",
            ) from None

    def _why(self, err: Exception) -> str:
        return one_line(self.redactor.redact(str(err)), 200) or type(err).__name__

    def _quote(self, body: bytes) -> str:
        """The start of a reply, as an error quotes it."""
        text = body[: 4 * (QUOTED_CHARS + self.redactor.longest)].decode("utf-8", "replace")
        return one_line(self.redactor.cut(text, QUOTED_CHARS))

    async def _read(self, response: httpx.Response, completion: Completion) -> None:
        status = response.status_code
        if status >= 300:
            body = await _read_limited(response, ERROR_BODY_LIMIT)
            if 300 <= status < 400:
                where = self.redactor.redact(response.headers.get("location", "elsewhere"))
                raise CallFailure(
                    ErrorType.UNEXPECTED_STATUS,
                    f"HTTP {status} redirect to {one_line(where, 200)}: check COUNCIL_LLM_BASE_URL",
                    status=status,
                )
            said = self.redactor.redact(body.decode("utf-8", "replace"))
            raise status_failure(
                status, said, retry_after_from_headers(response.headers), self.settings.host
            )
        kind = _content_kind(response.headers.get("content-type", ""))
        if kind == "sse":
            await self._read_stream(response, completion)
            return
        body = await self._read_body(response, completion)
        if kind == "unknown" and body.lstrip()[:5] in (b"data:", b":"):
            await self._replay_stream(body, completion)
            return
        try:
            data = json.loads(body)
        except RecursionError:
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE,
                f"the reply is JSON nested too deeply to read ({len(body):,} bytes: "
                f"{self._quote(body)!r})",
            ) from None
        except ValueError:
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE,
                f"the reply is not valid JSON ({len(body)} bytes: {self._quote(body)!r})",
            ) from None
        completion.apply_completion(data)

    async def _read_body(self, response: httpx.Response, completion: Completion) -> bytes:
        limit = self.settings.max_body_bytes
        parts = []
        async with chunks(response) as each:
            async for chunk in each:
                completion.received_bytes += len(chunk)
                if completion.received_bytes > limit:
                    raise CallFailure(
                        ErrorType.PAYLOAD_TOO_LARGE,
                        f"the reply body is over {limit:,} bytes; not read further",
                    )
                parts.append(chunk)
        return b"".join(parts)

    async def _read_stream(self, response: httpx.Response, completion: Completion) -> None:
        completion.streaming = True
        decoder = SSEDecoder(self.redactor)
        limit = self.settings.max_body_bytes
        try:
            async with contextlib.aclosing(_lines_within(response, completion, limit)) as lines:
                async for line in lines:
                    if _take_line(decoder, line, completion):
                        if not completion.cut:
                            await _read_to_the_end(lines)
                        return
        except _OverTheCap:
            if completion.content_bytes:
                completion.cut = True
                return
            raise CallFailure(
                ErrorType.PAYLOAD_TOO_LARGE, f"the stream is over {limit:,} bytes without content"
            ) from None
        _end_of_stream(decoder, completion)

    async def _replay_stream(self, body: bytes, completion: Completion) -> None:
        """An event stream sent without its content type."""
        completion.streaming = True
        decoder = SSEDecoder(self.redactor)
        for line in body.decode("utf-8", "replace").splitlines():
            if _take_line(decoder, line, completion):
                return
        _end_of_stream(decoder, completion)


class _OverTheCap(Exception):
    """A stream sent more bytes than the body's cap."""


class _Lines:
    """An event stream's lines from its bytes as they arrive (CRLF, CR or LF ends one)."""

    def __init__(self) -> None:
        self._decode = codecs.getincrementaldecoder("utf-8")("replace").decode
        self._pending: list[str] = []
        self._after_cr = False

    def feed(self, data: bytes) -> list[str]:
        text = self._decode(data)
        if self._after_cr and text.startswith("\n"):
            text = text[1:]
            self._after_cr = False
        if text:
            self._after_cr = text.endswith("\r")
        *complete, rest = _LINE_END.split(text)
        if not complete:
            self._pending.append(rest)
            return []
        complete[0] = "".join(self._pending) + complete[0]
        self._pending = [rest]
        return complete

    def close(self) -> list[str]:
        """The last line, when the stream ended without a line end."""
        rest = "".join(self._pending) + self._decode(b"", final=True)
        self._pending = []
        return [rest] if rest else []


async def _lines_within(
    response: httpx.Response, completion: Completion, limit: int
) -> AsyncGenerator[str, None]:
    """The stream's lines, each byte counted against `limit` as it arrives: a line that
    never ends is read no further than that (then _OverTheCap, after the lines the bytes
    within the limit completed)."""
    lines = _Lines()
    async with chunks(response) as each:
        async for chunk in each:
            room = limit - completion.received_bytes
            completion.received_bytes += len(chunk)
            if len(chunk) > room:
                for line in lines.feed(chunk[: max(room, 0)]):
                    yield line
                raise _OverTheCap
            for line in lines.feed(chunk):
                yield line
    for line in lines.close():
        yield line


async def _read_to_the_end(lines: AsyncIterator[str]) -> None:
    """What a stream sends after its reply is whole (usually nothing but the end of the
    chunked body), read so that its connection goes back to the pool: a response left
    unread closes it, and every call would open a new one. A server that goes on sending
    (more than DRAIN_LINES lines, or past the body's cap) or keeps the stream open
    (DRAIN_SECONDS) gets the connection closed, as before."""
    with contextlib.suppress(TimeoutError, httpx.HTTPError, _OverTheCap):
        async with asyncio.timeout(DRAIN_SECONDS):
            for _ in range(DRAIN_LINES):
                if await anext(lines, None) is None:
                    return


def _take_line(decoder: SSEDecoder, line: str, completion: Completion) -> bool:
    """Apply the events one stream line completes; True once the reply is whole ([DONE]
    after a finish reason) or over the size cap (then it is flagged truncated and nothing
    more is read)."""
    for event in decoder.feed(line):
        if event is DONE_EVENT:
            _whole(completion, "[DONE]")
            return True
        completion.apply_chunk(event)  # type: ignore[arg-type]
    return completion.cut


def _end_of_stream(decoder: SSEDecoder, completion: Completion) -> None:
    """The server closed the stream cleanly but without [DONE]."""
    decoder.close()
    _whole(completion, "the end of the stream")


def _whole(completion: Completion, end: str) -> None:
    """A stream that ended is whole only with a finish reason: without one the server cut
    it (llama.cpp ends a stream with [DONE] when another request waits), and the reply is
    asked for again, never stored; so is a stream with no data at all."""
    streamed = completion.streaming
    if completion.chunks == 0:
        raise CallFailure(
            ErrorType.MALFORMED_RESPONSE,
            f"the event stream held no data events (it ended with {end})",
            ask_unstreamed=streamed,
        )
    if completion.finish_reason is None:
        raise CallFailure(
            ErrorType.TRUNCATED_STREAM,
            f"the stream ended ({end}) without a finish reason after {completion.chunks} "
            f"chunks and {completion.content_bytes} bytes of text: the server cut the reply",
            ask_unstreamed=streamed,
        )
    completion.done = True


async def _read_limited(response: httpx.Response, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async with chunks(response) as each:
        async for chunk in each:
            parts.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
    return b"".join(parts)[:limit]
