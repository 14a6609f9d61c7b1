"""What /v1 does with the fields of a chat-completions body beyond the messages, through
the clients people use: LangChain's ChatOpenAI (`with_structured_output` and
`bind_tools`) and the openai SDK, on the dev server, a worker and the simulator.

`response_format` is honoured: the chairman is asked with the client's schema and the
content is its JSON (whole, also when streamed), or an error when it does not conform
after the repair. The simulator runs with its default settings, as `make up` runs it,
unless a test says otherwise. What a council cannot honour (tools, log probabilities,
n > 1...) and any unknown field is a 400 that names it, before anything starts; a few
fields pass harmlessly; max_tokens bounds the chairman's reply. The simulator's values built from a
client's schema are checked against the schema."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from typing import TYPE_CHECKING, Any, Literal

import httpx
import openai
import pytest
from jsonschema import Draft202012Validator
from openai.lib._pydantic import to_strict_json_schema
from pydantic import BaseModel, Field

from council.calls import Stage
from council.models import DeliberationRecord
from runs import listing
from simulator.instances import instance
from tests.temporal_fixtures import Council, model_calls
from tests.web_fixtures import WebServer

ONE_ROUND = {"council": {"max_rounds": 1}}
# A provider that ignores response_format, as many do (the simulator honours it by default).
IGNORES_SCHEMAS = {"*": {"structured": False}}


class Tradeoff(BaseModel):
    """A pydantic model as a LangChain user writes one."""

    answer: str
    confidence: float = Field(ge=0, le=1)
    kind: Literal["database", "other"]
    caveats: list[str]


class Short(BaseModel):
    answer: str


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def said(error: openai.APIStatusError) -> str:
    assert isinstance(error.body, dict)
    return str(error.body["message"])


if TYPE_CHECKING:  # LangChain is imported by the tests that use it, not by the fast ones
    from langchain_openai import ChatOpenAI

    Chat = Callable[..., ChatOpenAI]


@pytest.fixture
async def chat(web: WebServer) -> AsyncIterator[Chat]:
    """LangChain's chat model on the page's /v1, over an HTTP client the test closes (its
    default clients are kept for the process, their connections open to its end)."""
    from langchain_openai import ChatOpenAI

    async with httpx.AsyncClient(timeout=httpx.Timeout(600)) as http:

        def model(**options: Any) -> ChatOpenAI:
            return ChatOpenAI(
                model="council",
                base_url=f"{web.url}/v1",
                api_key="unused",
                max_retries=0,
                extra_body=ONE_ROUND,
                http_async_client=http,
                **options,
            )

        yield model


@pytest.fixture
async def api(web: WebServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with openai.AsyncOpenAI(
        base_url=f"{web.url}/v1", api_key="unused", max_retries=0
    ) as client:
        yield client


async def record_of(council: Council, workflow: str) -> DeliberationRecord:
    handle = council.client.get_workflow_handle(workflow, result_type=DeliberationRecord)
    return await handle.result()


async def only_run(council: Council, question: str) -> DeliberationRecord:
    [row] = await listing.list_deliberations(council.client, 5, question)
    return await record_of(council, row.id)


# ---- response_format honoured -------------------------------------------------------------


async def test_with_structured_output_returns_the_parsed_object(
    chat: Chat, council: Council
) -> None:
    question = "SQLite or PostgreSQL for a small team's internal tool?"
    structured = chat().with_structured_output(Tradeoff, include_raw=True)
    result = await structured.ainvoke(question)
    parsed, raw = result["parsed"], result["raw"]
    assert result["parsing_error"] is None
    assert isinstance(parsed, Tradeoff)

    record = await record_of(council, raw.response_metadata["id"])
    assert record.query == question and record.stage3 is not None
    assert record.stage3.format_problem is None
    assert json.loads(raw.content) == json.loads(record.stage3.response) == parsed.model_dump()
    # The simulated synthesis fills the first string, the rest name their fields.
    assert parsed.answer.strip() and parsed.kind == "database"

    # The chairman was asked with the client's schema, as the SDK sent it.
    handle = council.client.get_workflow_handle(record.id)
    [synthesis] = [c for c in await model_calls(handle) if c.stage is Stage.SYNTHESIS]
    assert synthesis.response_format is not None
    assert synthesis.response_format.name == "Tradeoff"
    assert synthesis.response_format.json_schema == to_strict_json_schema(Tradeoff)


async def test_the_openai_sdks_parse_returns_the_parsed_object(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    question = "SQLite or PostgreSQL for a small team's wiki?"
    completion = await api.chat.completions.parse(
        model="council", messages=user(question), response_format=Tradeoff, extra_body=ONE_ROUND
    )
    [choice] = completion.choices
    parsed = choice.message.parsed
    assert isinstance(parsed, Tradeoff) and parsed.answer.strip()
    assert choice.finish_reason == "stop" and choice.message.refusal is None
    record = await record_of(council, completion.id)
    assert record.stage3 is not None and record.stage3.format_problem is None
    assert Tradeoff.model_validate_json(record.stage3.response) == parsed


async def test_json_mode_gives_a_json_object(chat: Chat, council: Council) -> None:
    question = "Name one reason to prefer PostgreSQL."
    structured = chat().with_structured_output(Short, method="json_mode", include_raw=True)
    result = await structured.ainvoke(question)
    short = result["parsed"]
    assert isinstance(short, Short) and short.answer.strip()
    record = await record_of(council, result["raw"].response_metadata["id"])
    assert json.loads(record.stage3.response if record.stage3 else "") == short.model_dump()
    assert record.stage3 is not None and record.stage3.format_problem is None
    handle = council.client.get_workflow_handle(record.id)
    [synthesis] = [c for c in await model_calls(handle) if c.stage is Stage.SYNTHESIS]
    assert synthesis.response_format is not None
    assert synthesis.response_format.json_schema == {"type": "object"}


async def test_a_streamed_json_answer_comes_whole_once_it_conforms(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    # The chairman writes for 4 s: a free-text answer would stream as it is written.
    council.sim.set_faults({"sim/echo": {"latency": 4}})
    stream = await api.chat.completions.create(
        model="council",
        messages=user("Which is easier to back up?"),
        stream=True,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "short", "schema": Short.model_json_schema()},
        },
        extra_body={
            "council": {
                "max_rounds": 1,
                "chairman": "sim/echo",
                "policy": {"heartbeat_timeout_seconds": 2},
            }
        },
    )
    chunks = [chunk async for chunk in stream]
    record = await record_of(council, chunks[0].id)
    assert record.stage3 is not None and record.stage3.model == "sim/echo"
    deltas = [
        c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content
    ]
    assert deltas == [record.stage3.response]
    assert Short.model_validate_json(deltas[0]).answer.strip()
    assert chunks[-1].choices[0].finish_reason == "stop"


# ---- response_format unmet --------------------------------------------------------------


async def test_an_answer_that_does_not_conform_after_the_repair_is_an_error(
    web: WebServer, council: Council
) -> None:
    # A provider that ignores response_format, as many do: the chairman answers in
    # prose, is asked once more, and answers in prose again.
    council.sim.set_faults(IGNORES_SCHEMAS)
    question = "Does the simulator write JSON unasked?"
    async with openai.AsyncOpenAI(base_url=f"{web.url}/v1", api_key="unused") as retrying:
        with pytest.raises(openai.APIStatusError) as unmet:
            await retrying.chat.completions.create(
                model="council",
                messages=user(question),
                response_format={"type": "json_object"},
                extra_body=ONE_ROUND,
            )
    error = unmet.value
    assert error.status_code == 502 and error.code == "response_format_unmet"
    assert error.param == "response_format"
    assert error.response.headers["x-should-retry"] == "false"
    assert "does not match response_format" in said(error) and "\n" not in said(error)
    # The SDK did not ask again (it retries a 5xx by default): one deliberation, whose
    # record keeps the reason and the chairman's last reply.
    record = await only_run(council, question)
    assert record.id in said(error)
    assert record.stage3 is not None and record.stage3.format_problem
    handle = council.client.get_workflow_handle(record.id)
    synthesis = [c for c in await model_calls(handle) if c.stage is Stage.SYNTHESIS]
    assert len(synthesis) == 2  # the answer, and the repair

    async with openai.AsyncOpenAI(
        base_url=f"{web.url}/v1", api_key="unused", max_retries=0
    ) as client:
        stream = await client.chat.completions.create(
            model="council",
            messages=user("And streamed?"),
            response_format={"type": "json_object"},
            stream=True,
            extra_body=ONE_ROUND,
        )
        contents = []
        async with stream:  # closed here, not by the garbage collector in a later test
            with pytest.raises(openai.APIError) as ended:
                async for chunk in stream:
                    contents += [c.delta.content for c in chunk.choices if c.delta.content]
    assert "does not match response_format" in ended.value.message
    assert contents == []  # no prose passed for JSON


# ---- refusals -----------------------------------------------------------------------------

REFUSED = {
    "tools": [{"type": "function", "function": {"name": "f", "parameters": {}}}],
    "tool_choice": "auto",
    "parallel_tool_calls": False,
    "functions": [{"name": "f", "parameters": {}}],
    "function_call": "auto",
    "logprobs": True,
    "top_logprobs": 2,
    "n": 2,
    "logit_bias": {"50256": -100},
    "stop": ["\n"],
    "top_p": 0.5,
    "presence_penalty": 0.5,
    "frequency_penalty": -1,
    "modalities": ["text", "audio"],
    "audio": {"voice": "alloy", "format": "wav"},
    "prediction": {"type": "content", "content": "x"},
    "web_search_options": {},
    "reasoning_effort": "high",
    "verbosity": "low",
}
# Each malformed response_format, and the field its refusal names.
MALFORMED = [
    ({"type": "xml"}, "response_format.type"),
    ("json", "response_format.type"),
    ({"type": "text", "strict": True}, "response_format.strict"),
    ({"type": "json_schema"}, "response_format.json_schema"),
    (
        {"type": "json_schema", "json_schema": {"name": "has spaces", "schema": {}}},
        "response_format.json_schema.name",
    ),
    ({"type": "json_schema", "json_schema": {"name": "s"}}, "response_format.json_schema.schema"),
    (
        {"type": "json_schema", "json_schema": {"name": "s", "schema": {"type": "strnig"}}},
        "response_format.json_schema.schema",
    ),
    (
        {"type": "json_schema", "json_schema": {"name": "s", "schema": {"$schema": "x:/y"}}},
        "response_format.json_schema.schema.$schema",
    ),
    (
        {"type": "json_schema", "json_schema": {"name": "s", "schema": {}, "strict": "yes"}},
        "response_format.json_schema.strict",
    ),
    (
        {"type": "json_schema", "json_schema": {"name": "s", "schema": {}, "extra": 1}},
        "response_format.json_schema.extra",
    ),
    ({"type": "json_object", "schema": []}, "response_format.schema"),
]


async def test_bind_tools_is_refused_naming_tools(chat: Chat, council: Council) -> None:
    def weather(city: str) -> str:
        """The weather in a city."""
        return "sunny"

    with pytest.raises(openai.BadRequestError) as refused:
        await chat().bind_tools([weather]).ainvoke("Weather in Oslo?")
    assert refused.value.param == "tools" and said(refused.value).startswith("tools ")
    with pytest.raises(openai.BadRequestError) as refused:
        await chat().with_structured_output(Short, method="function_calling").ainvoke("Hi?")
    assert refused.value.param == "tools"
    assert council.sim.log()["total"] == 0  # nothing started


async def test_each_field_a_council_cannot_honour_is_refused_by_name(
    web: WebServer, api: openai.AsyncOpenAI, council: Council
) -> None:
    for name, value in REFUSED.items():
        with pytest.raises(openai.BadRequestError) as refused:
            await api.chat.completions.create(
                model="council", messages=user("Hi?"), extra_body={name: value}
            )
        assert refused.value.param == name, name
        assert said(refused.value).startswith(f"{name} is not supported"), said(refused.value)
        assert "\n" not in said(refused.value)

    # An unknown field, as OpenAI refuses one; and one in stream_options.
    refusal = await _refusal(api, {"best_of": 3})
    assert refusal.param == "best_of"
    assert said(refusal).startswith("unrecognized request argument 'best_of'")
    refusal = await _refusal(api, {"stream_options": {"include_usage": True, "chunk_size": 9}})
    assert refusal.param == "stream_options.chunk_size"

    for value, param in MALFORMED:
        refusal = await _refusal(api, {"response_format": value})
        assert refusal.param == param, value
        assert param in said(refusal), said(refusal)
        assert "\n" not in said(refusal)

    # The schema's bounds: its size, its depth, and references inside it.
    nested: dict[str, Any] = {"type": "string"}
    for _ in range(40):
        nested = {"type": "array", "items": nested}
    bounded = {
        "bytes": {"type": "object", "description": "x" * 40_000},
        "too deep": nested,
        "outside the schema": {"$ref": "https://schemas.invalid/thing.json"},
        "points at nothing": {"$ref": "#/$defs/Missing"},
    }
    for why, schema in bounded.items():
        with pytest.raises(openai.BadRequestError) as refused:
            await api.chat.completions.create(
                model="council",
                messages=user("Hi?"),
                response_format={
                    "type": "json_schema",
                    "json_schema": {"name": "bounded", "schema": schema},
                },
            )
        assert refused.value.param == "response_format.json_schema.schema", why
        assert why in said(refused.value), said(refused.value)

    # max_tokens in its range, one of its two names; the format only from response_format.
    too_few = {"max_tokens": 1}
    both = {"max_tokens": 100, "max_completion_tokens": 100}
    for body, param in ((too_few, "max_tokens"), (both, "max_completion_tokens")):
        with pytest.raises(openai.BadRequestError) as refused:
            await api.chat.completions.create(model="council", messages=user("Hi?"), **body)
        assert refused.value.param == param
    assert "must be between 16 and" in said(await _refusal(api, {"max_completion_tokens": 10**9}))
    refusal = await _refusal(api, {"council": {"answer_format": {"name": "x", "json_schema": {}}}})
    assert refusal.param == "council.answer_format"
    assert council.sim.log()["total"] == 0  # nothing started
    assert "Traceback" not in web.log()


async def _refusal(api: openai.AsyncOpenAI, body: dict[str, Any]) -> openai.BadRequestError:
    with pytest.raises(openai.BadRequestError) as refused:
        await api.chat.completions.create(model="council", messages=user("Hi?"), extra_body=body)
    return refused.value


async def test_neutral_and_bookkeeping_fields_pass_and_max_tokens_bounds_the_chairman(
    web: WebServer, council: Council
) -> None:
    async with httpx.AsyncClient(base_url=web.url, timeout=120) as http:
        reply = await http.post(
            "/v1/chat/completions",
            json={
                "model": "council",
                "messages": user("Is a text response_format free text?"),
                "response_format": {"type": "text"},
                "n": 1,
                "logprobs": False,
                "top_p": 1,
                "presence_penalty": 0,
                "frequency_penalty": 0,
                "modalities": ["text"],
                "tools": None,
                "user": "someone@example.com",
                "seed": 7,
                "metadata": {"team": "data"},
                "store": False,
                "service_tier": "auto",
                "max_completion_tokens": 20,
                **ONE_ROUND,
            },
        )
    assert reply.status_code == 200, reply.text
    completion = reply.json()
    record = await record_of(council, completion["id"])
    assert record.stage3 is not None
    [choice] = completion["choices"]
    assert choice["message"]["content"] == record.stage3.response
    # max_completion_tokens bounds the chairman's reply, which says it was cut.
    handle = council.client.get_workflow_handle(record.id)
    calls = await model_calls(handle)
    [synthesis] = [c for c in calls if c.stage is Stage.SYNTHESIS]
    assert synthesis.max_tokens == 20
    assert synthesis.response_format is not None and synthesis.response_format.name == "synthesis"
    assert all(c.max_tokens != 20 for c in calls if c.stage is not Stage.SYNTHESIS)
    assert record.stage3.finish_reason == "length" == choice["finish_reason"]
    # Cut inside its JSON: the answer as far as it was written, not the JSON.
    assert record.stage3.response and not record.stage3.response.lstrip().startswith("{")
    assert "someone@example.com" not in json.dumps(record.model_dump(mode="json"))


# ---- the simulator held to a client's schema ----------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize(
    "schema",
    [
        to_strict_json_schema(Tradeoff),
        Tradeoff.model_json_schema(),
        {"type": "object"},
        {
            "type": "object",
            "properties": {
                "when": {"type": "string", "format": "date-time"},
                "count": {"type": "integer", "exclusiveMinimum": 3, "multipleOf": 5},
                "tags": {"type": "array", "items": {"enum": ["a", "b"]}, "minItems": 2},
                "note": {"anyOf": [{"type": "null"}, {"type": "string", "maxLength": 4}]},
                "pair": {"type": "array", "prefixItems": [{"type": "number"}, {"const": 1}]},
            },
            "required": ["when", "count", "tags", "note", "pair"],
            "additionalProperties": False,
        },
    ],
)
def test_the_simulators_value_for_a_schema_is_valid_against_it(schema: dict[str, Any]) -> None:
    value = instance(schema, "The council's answer.")
    assert list(Draft202012Validator(schema).iter_errors(value)) == []


@pytest.mark.fast
def test_the_simulators_value_carries_its_reply_in_the_first_string() -> None:
    value = instance(to_strict_json_schema(Tradeoff), "The council's answer.")
    assert value["answer"] == "The council's answer." and value["caveats"] == [
        "(simulated) caveats"
    ]
    assert instance({"type": "object"}, "Yes.") == {"answer": "Yes."}
    # A maxLength cuts the reply after a whole word, as a model stopping early would.
    short = {"type": "string", "maxLength": 16}
    assert instance(short, "The council agrees on SQLite.") == "The council"
    assert instance({**short, "minLength": 14}, "The council agrees.") == "The council agre"
    # A pattern is not followed: the way to an answer that cannot conform.
    pattern = {"type": "string", "pattern": "^[0-9]+$"}
    assert not Draft202012Validator(pattern).is_valid(instance(pattern, "Yes."))
