"""The model-call activity's wire handling, against scripted replies (httpx.MockTransport):
SSE framing, usage and cost, comments, mid-stream errors, the JSON fallback, provider
error dialects and Retry-After."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from temporalio.exceptions import ApplicationError
from temporalio.testing import ActivityEnvironment

from activities.completion import Completion, token_usage
from activities.errors import (
    NON_RETRYABLE_ERROR_TYPES,
    CallFailure,
    ErrorType,
    application_error,
    parse_retry_after,
    retry_after_from_headers,
)
from activities.model_call import ModelGateway, heartbeat_interval
from activities.settings import OPENROUTER_BASE_URL, GatewaySettings
from activities.sse import DONE_EVENT, SSEDecoder
from app.settings.environment import Settings, SettingsError
from council.calls import ChatMessage, ModelCall, Stage
from council.changes import estimate_tokens

pytestmark = pytest.mark.fast

BASE = "http://llm.test/v1"
CALL = ModelCall(
    model="acme/model-1",
    messages=[ChatMessage(role="user", content="How do tides work? " * 10)],
    stage=Stage.ANSWER,
)


def chunk(content: str | None = None, finish: str | None = None, **extra: Any) -> dict[str, Any]:
    delta = {} if content is None else {"content": content}
    return {
        "id": "c1",
        "model": "acme/model-1-0613",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }


def sse(*events: dict[str, Any] | str, done: bool = True) -> bytes:
    lines = [e if isinstance(e, str) else f"data: {json.dumps(e)}\n\n" for e in events]
    if done:
        lines.append("data: [DONE]\n\n")
    return "".join(lines).encode()


Handler = Callable[[httpx.Request], httpx.Response]


def replying(
    body: bytes, content_type: str = "text/event-stream", status: int = 200, **headers: str
) -> Handler:
    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            status, content=body, headers={"content-type": content_type, **headers}
        )

    return handle


async def run(handler: Handler, call: ModelCall = CALL, attempt: int = 1, **settings: Any):
    settings.setdefault("base_url", BASE)
    gateway = ModelGateway(GatewaySettings(**settings), transport=httpx.MockTransport(handler))
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, attempt=attempt)
    try:
        return await env.run(gateway.call_model, call)
    finally:
        await gateway.aclose()


async def fails(handler: Handler, **kwargs: Any) -> ApplicationError:
    with pytest.raises(ApplicationError) as caught:
        await run(handler, **kwargs)
    return caught.value


# ---- the stream --------------------------------------------------------------------


async def test_a_stream_is_assembled_with_usage_cost_and_the_serving_model() -> None:
    body = sse(
        ": OPENROUTER PROCESSING\n\n",
        chunk("Tides are "),
        ": OPENROUTER PROCESSING\n\n",
        chunk("caused by the Moon."),
        chunk(finish="stop"),
        {
            "id": "c1",
            "choices": [],
            "usage": {
                "prompt_tokens": 42,
                "completion_tokens": 7,
                "total_tokens": 49,
                "cost": 0.00021,
            },
        },
    )
    reply = await run(replying(body))
    assert reply.content == "Tides are caused by the Moon."
    assert reply.finish_reason == "stop"
    assert reply.served_by == "acme/model-1-0613" and reply.model == "acme/model-1"
    assert reply.usage.model_dump() == {
        "prompt_tokens": 42,
        "completion_tokens": 7,
        "total_tokens": 49,
        "cost_usd": 0.00021,
        "estimated": False,
    }
    assert not reply.truncated


async def test_events_without_blank_lines_and_multi_line_data_are_read() -> None:
    first = json.dumps(chunk("one "))
    second = json.dumps(chunk("two", finish="stop"), indent=1).splitlines()
    body = (
        f"data: {first}\n" + "".join(f"data: {line}\n" for line in second) + "\ndata: [DONE]\n"
    ).encode()
    reply = await run(replying(body))
    assert reply.content == "one two"


def test_the_decoder_ignores_comments_and_other_fields() -> None:
    decoder = SSEDecoder()
    events = []
    for line in [
        ": keep-alive",
        "event: message",
        "id: 7",
        'data: {"a": 1}',
        "",
        "retry: 10",
        "data: [DONE]",
        "",
    ]:
        events += list(decoder.feed(line))
    assert events == [{"a": 1}, DONE_EVENT]
    assert decoder.comments == 1


async def test_the_request_asks_for_usage_and_carries_the_key() -> None:
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return replying(sse(chunk("ok", finish="stop")))(request)

    await run(handle, api_key="sk-test-1", extra_headers={"X-Team": "council"})
    await run(handle, base_url=OPENROUTER_BASE_URL, api_key="sk-or-1")
    await run(handle, stream=False)
    local, openrouter, plain = seen
    body = json.loads(local.content)
    assert str(local.url) == f"{BASE}/chat/completions"
    assert body["stream"] is True and body["stream_options"] == {"include_usage": True}
    assert body["model"] == "acme/model-1" and body["messages"][0]["role"] == "user"
    assert "usage" not in body and "temperature" not in body
    assert (
        local.headers["authorization"] == "Bearer sk-test-1"
        and local.headers["x-team"] == "council"
    )
    assert "x-title" not in local.headers
    assert json.loads(openrouter.content)["usage"] == {"include": True}
    assert openrouter.headers["x-title"] == "Council"
    assert "stream" not in json.loads(plain.content) and "authorization" not in plain.headers


async def test_a_stream_without_usage_gets_a_flagged_estimate() -> None:
    reply = await run(replying(sse(chunk("A short answer."), chunk(finish="stop"))))
    assert reply.usage.estimated
    assert reply.usage.prompt_tokens == estimate_tokens(CALL.messages[0].content)
    assert reply.usage.completion_tokens == estimate_tokens("A short answer.")
    assert reply.usage.cost_usd is None


def test_usage_in_other_dialects() -> None:
    assert token_usage({"prompt_tokens": 5, "completion_tokens": 3}, [], "x").total_tokens == 8
    anthropic_style = token_usage({"input_tokens": 4, "output_tokens": 6}, [], "x")
    assert (
        anthropic_style.prompt_tokens,
        anthropic_style.completion_tokens,
        anthropic_style.estimated,
    ) == (4, 6, False)
    assert (
        token_usage({"prompt_tokens": 1, "completion_tokens": 1, "cost": True}, [], "x").cost_usd
        is None
    )


async def test_a_mid_stream_error_event_is_classified_by_its_code() -> None:
    def stream_with(error: dict[str, Any]) -> Handler:
        event = {
            "id": "c1",
            "error": error,
            "choices": [{"index": 0, "delta": {"content": ""}, "finish_reason": "error"}],
        }
        return replying(sse(chunk("partial "), event, done=False))

    err = await fails(stream_with({"code": 502, "message": "Upstream provider went away"}))
    assert err.type == "ProviderUnavailable" and not err.non_retryable
    assert (
        "acme/model-1" in err.message
        and "Upstream provider went away" in err.message
        and "502" in err.message
    )
    limited = await fails(stream_with({"code": 429, "message": "slow down"}))
    assert limited.type == "RateLimited" and limited.next_retry_delay == timedelta(seconds=5)
    too_long = await fails(
        stream_with({"code": "context_length_exceeded", "message": "too many tokens"})
    )
    assert too_long.type == "BadRequest" and too_long.non_retryable


async def test_finish_reason_error_without_an_error_object_retries() -> None:
    err = await fails(replying(sse(chunk("x"), chunk(finish="error"), done=False)))
    assert err.type == "ProviderUnavailable" and not err.non_retryable


async def test_how_a_stream_ends() -> None:
    no_done = await run(replying(sse(chunk("complete"), chunk(finish="stop"), done=False)))
    assert no_done.content == "complete"  # a finish reason is enough
    cut = await fails(replying(sse(chunk("half an ans"), done=False)))
    assert cut.type == "TruncatedStream" and not cut.non_retryable
    mid_event = await fails(replying(b'data: {"id": "c1", "choices": [{"delta": {"content": "x'))
    assert mid_event.type == "TruncatedStream"
    nothing = await fails(replying(b": just a comment\n\n"))
    assert nothing.type == "MalformedResponse"


async def test_a_broken_event_is_malformed() -> None:
    err = await fails(replying(b"data: {not json}\n\n"))
    assert err.type == "MalformedResponse" and not err.non_retryable
    final = await fails(replying(b"data: {not json}\n\n"), attempt=3)
    assert final.non_retryable


async def test_content_given_as_parts() -> None:
    parts = chunk(finish="stop")
    parts["choices"][0]["delta"] = {
        "content": [{"type": "text", "text": "in "}, {"type": "text", "text": "parts"}]
    }
    assert (await run(replying(sse(parts)))).content == "in parts"


# ---- plain JSON --------------------------------------------------------------------


def completion_body(content: Any = "Plain answer.", **extra: Any) -> bytes:
    return json.dumps(
        {
            "id": "c2",
            "model": "acme/model-1-0613",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
            **extra,
        }
    ).encode()


async def test_a_server_that_does_not_stream_is_read_as_json() -> None:
    reply = await run(replying(completion_body(), "application/json"), stream=True)
    assert reply.content == "Plain answer." and reply.served_by == "acme/model-1-0613"
    assert reply.usage.total_tokens == 14 and reply.usage.cost_usd is None


async def test_an_event_stream_without_its_content_type_is_recognised() -> None:
    reply = await run(replying(sse(chunk("sniffed", finish="stop")), "text/plain"))
    assert reply.content == "sniffed"


async def test_json_replies_that_are_not_answers() -> None:
    bad = await fails(replying(b'{"id": "c2", "choices": [', "application/json"), stream=False)
    assert bad.type == "MalformedResponse"
    empty = await fails(replying(completion_body(None), "application/json"), stream=False)
    assert empty.type == "EmptyContent" and "finish_reason=stop" in empty.message
    no_choices = await fails(
        replying(b'{"id": "c2", "choices": []}', "application/json"), stream=False
    )
    assert no_choices.type == "MalformedResponse"
    error_with_200 = await fails(
        replying(b'{"error": {"code": 503, "message": "no capacity"}}', "application/json"),
        stream=False,
    )
    assert error_with_200.type == "ProviderUnavailable" and "no capacity" in error_with_200.message


async def test_content_over_the_cap_is_cut_on_a_character_boundary() -> None:
    text = "ab☕" * 50  # 5 bytes a repeat
    call = CALL.model_copy(update={"max_response_bytes": 14})
    reply = await run(replying(completion_body(text), "application/json"), call=call, stream=False)
    assert reply.truncated and reply.content == "ab☕ab☕ab"  # 12 bytes: the next ☕ would pass 14
    streamed = await run(replying(sse(*[chunk("ab☕") for _ in range(50)])), call=call)
    assert streamed.truncated and streamed.content == "ab☕ab☕ab"


def test_the_accumulator_counts_bytes_not_characters() -> None:
    completion = Completion(max_content_bytes=4)
    completion.add_content("é")  # 2 bytes
    completion.add_content("éé")  # 4 more: only one fits
    assert completion.content == "éé" and completion.truncated and completion.content_bytes == 4


# ---- provider errors -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (
            {
                "error": {
                    "code": 404,
                    "message": "No endpoints found for acme/model-1.",
                    "metadata": {"provider_name": "Acme", "raw": "upstream 404"},
                }
            },
            "No endpoints found for acme/model-1. (upstream 404) [upstream: Acme]",
        ),
        (
            {"error": "model 'llama3' not found, try pulling it first"},
            "model 'llama3' not found, try pulling it first",
        ),
        (
            {
                "object": "error",
                "message": "The model `x` does not exist.",
                "type": "NotFoundError",
                "code": 404,
            },
            "The model `x` does not exist.",
        ),
        ({"detail": "Not Found"}, "Not Found"),
    ],
)
async def test_provider_error_dialects_reach_the_message(body: dict[str, Any], said: str) -> None:
    err = await fails(replying(json.dumps(body).encode(), "application/json", status=404))
    assert err.type == "ModelNotFound" and err.non_retryable
    assert err.message == f"acme/model-1: HTTP 404 Not Found from llm.test: {said}"


async def test_a_non_json_error_page_is_quoted_on_one_line() -> None:
    err = await fails(
        replying(b"<html>\n<body>Bad Gateway</body>\n</html>", "text/html", status=502)
    )
    assert err.type == "ProviderUnavailable"
    page = "<html> <body>Bad Gateway</body> </html>"
    assert err.message == f"acme/model-1: HTTP 502 Bad Gateway from llm.test: {page}"


async def test_a_redirect_points_at_the_base_url() -> None:
    err = await fails(replying(b"", "text/html", status=301, location="https://elsewhere.test/v1"))
    assert (
        err.type == "UnexpectedStatus"
        and err.non_retryable
        and "COUNCIL_LLM_BASE_URL" in err.message
    )


async def test_rate_limit_headers() -> None:
    err = await fails(
        replying(
            b'{"error": {"code": 429, "message": "Rate limit exceeded"}}',
            "application/json",
            429,
            **{"retry-after-ms": "2500"},
        )
    )
    assert err.next_retry_delay == timedelta(seconds=2.5)


def test_retry_after_values() -> None:
    now = datetime(2025, 1, 1, 12, 0, 0, tzinfo=UTC)
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after(" 1.5 ") == 1.5
    assert parse_retry_after("Wed, 01 Jan 2025 12:00:30 GMT", now) == 30.0
    assert parse_retry_after("Wed, 01 Jan 2025 11:00:00 GMT", now) == 0.0
    assert (
        parse_retry_after("soon") is None
        and parse_retry_after(None) is None
        and parse_retry_after("") is None
    )
    assert retry_after_from_headers(httpx.Headers({"retry-after-ms": "250"})) == 0.25
    assert retry_after_from_headers(httpx.Headers({})) is None


def test_every_class_has_its_retry_rule() -> None:
    def rule(kind: ErrorType, attempt: int = 1, retry_after: float | None = None):
        err = application_error(CallFailure(kind, "why", retry_after=retry_after), "m", attempt)
        return err.type, err.non_retryable, err.next_retry_delay

    assert rule(ErrorType.RATE_LIMITED, retry_after=0.2) == (
        "RateLimited",
        False,
        timedelta(seconds=1),
    )
    for kind in (
        ErrorType.TIMEOUT,
        ErrorType.CONNECTION_FAILED,
        ErrorType.TRUNCATED_STREAM,
        ErrorType.PROVIDER_UNAVAILABLE,
    ):
        assert rule(kind) == (kind.value, False, None)
    assert (
        rule(ErrorType.MALFORMED_RESPONSE, 2)[1] is False
        and rule(ErrorType.MALFORMED_RESPONSE, 3)[1] is True
    )
    for name in NON_RETRYABLE_ERROR_TYPES:
        assert rule(ErrorType(name))[1] is True
    assert (
        "PayloadTooLarge" in NON_RETRYABLE_ERROR_TYPES
        and "RateLimited" not in NON_RETRYABLE_ERROR_TYPES
    )


# ---- settings --------------------------------------------------------------------------


def of(variables: dict[str, str]) -> GatewaySettings:
    """The default provider's settings as the worker reads them from these variables."""
    return GatewaySettings.of(Settings.read(variables).llm)


def test_settings_from_the_environment() -> None:
    default = of({})
    assert default.base_url == OPENROUTER_BASE_URL and default.api_key is None and default.stream
    assert (
        default.is_openrouter
        and default.chat_url == "https://openrouter.ai/api/v1/chat/completions"
    )
    fallback = of({"OPENROUTER_API_KEY": "sk-or", "COUNCIL_LLM_API_KEY": " "})
    assert fallback.api_key == "sk-or"
    local = of(
        {
            "COUNCIL_LLM_BASE_URL": "http://localhost:11434/v1/",
            "COUNCIL_LLM_API_KEY": "sk-own",
            "OPENROUTER_API_KEY": "sk-or",
            "COUNCIL_LLM_STREAM": "off",
            "COUNCIL_LLM_READ_TIMEOUT": "900",
        }
    )
    assert local.api_key == "sk-own" and not local.stream and local.read_timeout == 900
    assert (
        local.chat_url == "http://localhost:11434/v1/chat/completions" and not local.is_openrouter
    )
    assert "sk-own" not in repr(local)


def test_bad_settings_name_the_variable_and_never_echo_headers() -> None:
    with pytest.raises(SettingsError, match="COUNCIL_LLM_STREAM"):
        of({"COUNCIL_LLM_STREAM": "maybe"})
    with pytest.raises(SettingsError, match="COUNCIL_LLM_READ_TIMEOUT"):
        of({"COUNCIL_LLM_READ_TIMEOUT": "-1"})
    for headers in ("Authorization: hunter2-secret", '{"Authorization": ["hunter2-secret"]}'):
        with pytest.raises(SettingsError) as caught:
            of({"COUNCIL_LLM_EXTRA_HEADERS": headers})
        assert str(caught.value).startswith("COUNCIL_LLM_EXTRA_HEADERS must be a JSON object")
        assert "hunter2" not in str(caught.value)


def test_credentials_in_the_base_url_are_secrets_too() -> None:
    settings = GatewaySettings(
        base_url="https://user:pa55word@proxy.test/v1", extra_headers={"api-key": "azure-key-1"}
    )
    assert settings.host == "proxy.test"
    assert set(settings.secrets()) == {"pa55word", "azure-key-1"}


def test_heartbeat_interval_follows_the_heartbeat_timeout() -> None:
    info = ActivityEnvironment.default_info()
    assert heartbeat_interval(info) == 1.0
    assert (
        heartbeat_interval(dataclasses.replace(info, heartbeat_timeout=timedelta(seconds=30)))
        == 1.0
    )
    assert (
        heartbeat_interval(dataclasses.replace(info, heartbeat_timeout=timedelta(seconds=1.5)))
        == 0.5
    )
    assert (
        heartbeat_interval(dataclasses.replace(info, heartbeat_timeout=timedelta(milliseconds=30)))
        == 0.1
    )


@pytest.mark.parametrize("after", ["silence", "chatter"])
async def test_what_a_stream_sends_after_done_cannot_hold_the_call(after: str) -> None:
    """The rest of a stream is read after [DONE] so that its connection can serve the next
    call, but only briefly: a server that keeps the stream open, or goes on sending, does
    not keep the call from ending (without that bound it would wait for the read
    timeout, or forever)."""
    never = asyncio.Event()

    async def body() -> AsyncIterator[bytes]:
        yield sse(chunk("Tides follow the moon."), chunk(finish="stop"))
        if after == "silence":
            await never.wait()
        while True:
            yield b": still here\n\n"
            await asyncio.sleep(0)

    def handle(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=body(), headers={"content-type": "text/event-stream"})

    reply = await asyncio.wait_for(run(handle, read_timeout=600), timeout=60)
    assert reply.content == "Tides follow the moon." and reply.finish_reason == "stop"
