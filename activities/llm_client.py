"""One POST to an OpenAI-compatible /chat/completions endpoint, streamed or not.

Everything that can go wrong on the wire becomes a CallFailure with the cause named;
nothing here retries (Temporal owns every attempt) and nothing here knows Temporal.
"""

from __future__ import annotations

import json
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
from activities.settings import GatewaySettings
from activities.sse import DONE_EVENT, SSEDecoder
from council.calls import ModelCall

ERROR_BODY_LIMIT = 64_000
KEEPALIVE_SECONDS = 60.0


def make_http_client(
    settings: GatewaySettings, transport: httpx.AsyncBaseTransport | None = None
) -> httpx.AsyncClient:
    """The worker's one shared connection pool."""
    return httpx.AsyncClient(
        timeout=httpx.Timeout(
            connect=settings.connect_timeout,
            read=settings.read_timeout,
            write=settings.connect_timeout,
            pool=None,
        ),
        limits=httpx.Limits(
            max_connections=settings.max_connections,
            max_keepalive_connections=min(64, settings.max_connections),
            # Idle connections stay open between deliberations (httpx's default is 5 s);
            # one the provider has closed meanwhile is noticed and replaced before use.
            keepalive_expiry=KEEPALIVE_SECONDS,
        ),
        follow_redirects=False,
        transport=transport,
    )


def request_body(call: ModelCall, settings: GatewaySettings, stream: bool) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": call.model,
        "messages": [message.model_dump() for message in call.messages],
    }
    if call.temperature is not None:
        body["temperature"] = call.temperature
    if call.max_tokens is not None:
        body["max_tokens"] = call.max_tokens
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
    def __init__(self, settings: GatewaySettings, http: httpx.AsyncClient) -> None:
        self.settings = settings
        self.http = http

    async def complete(
        self, call: ModelCall, completion: Completion, call_id: str | None = None
    ) -> None:
        """Fill `completion` with the reply to `call`, or raise CallFailure.

        `call_id` (workflow id / activity id) goes out as X-Council-Call, so a provider's
        or the simulator's logs can tell a retry of a call from a new call.
        """
        settings = self.settings
        stream = settings.stream
        headers = settings.headers(stream)
        if call_id:
            # Ids follow council.ids, but a workflow started elsewhere may have any id:
            # never a raw id in a header.
            headers[CALL_ID_HEADER] = quote(call_id, safe="/:._-~")
        headers_received = False
        try:
            async with self.http.stream(
                "POST",
                settings.chat_url,
                json=request_body(call, settings, stream),
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
                    f"{completion.received_bytes} bytes ({_why(err)})",
                ) from None
            raise CallFailure(
                ErrorType.CONNECTION_FAILED, f"{settings.host} dropped the connection ({_why(err)})"
            ) from None
        except (httpx.ConnectError, httpx.NetworkError) as err:
            raise CallFailure(
                ErrorType.CONNECTION_FAILED, f"cannot connect to {settings.host} ({_why(err)})"
            ) from None
        except (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError) as err:
            raise CallFailure(
                ErrorType.BAD_CONFIGURATION,
                f"cannot call the base URL (check COUNCIL_LLM_BASE_URL): {_why(err)}",
            ) from None
        except httpx.DecodingError as err:
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE, f"the reply cannot be decoded ({_why(err)})"
            ) from None
        except httpx.TransportError as err:
            raise CallFailure(
                ErrorType.CONNECTION_FAILED, f"the call to {settings.host} failed ({_why(err)})"
            ) from None

    async def _read(self, response: httpx.Response, completion: Completion) -> None:
        status = response.status_code
        if status >= 300:
            body = await _read_limited(response, ERROR_BODY_LIMIT)
            if 300 <= status < 400:
                where = response.headers.get("location", "elsewhere")
                raise CallFailure(
                    ErrorType.UNEXPECTED_STATUS,
                    f"HTTP {status} redirect to {one_line(where, 200)}: check COUNCIL_LLM_BASE_URL",
                    status=status,
                )
            raise status_failure(
                status, body, retry_after_from_headers(response.headers), self.settings.host
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
        except ValueError:
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE,
                f"the reply is not valid JSON ({len(body)} bytes: {_start(body)!r})",
            ) from None
        completion.apply_completion(data)

    async def _read_body(self, response: httpx.Response, completion: Completion) -> bytes:
        limit = self.settings.max_body_bytes
        parts = []
        async for chunk in response.aiter_bytes():
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
        decoder = SSEDecoder()
        async for line in response.aiter_lines():
            completion.received_bytes += len(line) + 1
            if _take_line(decoder, line, completion):
                return
            if completion.received_bytes > self.settings.max_body_bytes:
                if completion.content_bytes:
                    completion.truncated = True
                    return
                raise CallFailure(
                    ErrorType.PAYLOAD_TOO_LARGE,
                    f"the stream is over {self.settings.max_body_bytes:,} bytes without content",
                )
        _end_of_stream(decoder, completion)

    async def _replay_stream(self, body: bytes, completion: Completion) -> None:
        """An event stream sent without its content type."""
        completion.streaming = True
        decoder = SSEDecoder()
        for line in body.decode("utf-8", "replace").splitlines():
            if _take_line(decoder, line, completion):
                return
        _end_of_stream(decoder, completion)


def _take_line(decoder: SSEDecoder, line: str, completion: Completion) -> bool:
    """Apply the events one stream line completes; True once the reply is whole ([DONE])
    or over the size cap (then it is flagged truncated and nothing more is read)."""
    for event in decoder.feed(line):
        if event is DONE_EVENT:
            completion.done = True
            return True
        completion.apply_chunk(event)  # type: ignore[arg-type]
    return completion.truncated


def _end_of_stream(decoder: SSEDecoder, completion: Completion) -> None:
    """The server closed the stream cleanly but without [DONE]."""
    decoder.close()
    if decoder.events == 0:
        raise CallFailure(ErrorType.MALFORMED_RESPONSE, "the event stream held no data events")
    if completion.finish_reason is None:
        raise CallFailure(
            ErrorType.TRUNCATED_STREAM,
            f"the stream ended without a finish reason or [DONE] after {completion.chunks} chunks",
        )
    completion.done = True


async def _read_limited(response: httpx.Response, limit: int) -> bytes:
    parts: list[bytes] = []
    size = 0
    async for chunk in response.aiter_bytes():
        parts.append(chunk)
        size += len(chunk)
        if size >= limit:
            break
    return b"".join(parts)[:limit]


def _start(body: bytes) -> str:
    return one_line(body[:80].decode("utf-8", "replace"))


def _why(err: Exception) -> str:
    return one_line(str(err), 200) or type(err).__name__
