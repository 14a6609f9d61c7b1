"""Real models, honestly handled, against scripted providers and the simulator: a stream
is stored only with a finish reason, a reply cut by the token limit says so, reviews and
refinements are asked for as JSON in the form the provider takes, a context overflow is
one final error whichever way the call was made, and a failed attempt is one log line.
(The same against a real local model: tests/test_real_tier.py, `make test-real`.)"""

from __future__ import annotations

import json
import logging
from typing import Any

import httpx
import pytest

from activities.errors import ErrorType
from activities.model_call import fit_context
from app.views.render import event_line
from council.calls import ChatMessage, ModelCall, Stage
from council.progress import EventKind
from council.reviews import read_review
from council.structured import (
    JSON_OBJECT,
    JSON_SCHEMA,
    RefinementReply,
    StructuredReply,
    refinement_schema,
    review_schema,
    synthesis_schema,
)
from council.validation import InvalidRequest, validate_request
from tests.temporal_fixtures import Council, model_calls
from tests.test_gateway_sse import CALL, chunk, fails, replying, run, sse
from workflows.deliberation import Deliberation

LABELS = {"Response A": "m/a", "Response B": "m/b", "Response C": "m/c"}


# ---- a stream is whole only with a finish reason -------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize("done", [True, False])
async def test_a_stream_without_a_finish_reason_is_a_retryable_cut(done: bool) -> None:
    body = sse(chunk("Tides are caused by"), chunk(" the"), done=done)
    error = await fails(replying(body))
    assert error.type == ErrorType.TRUNCATED_STREAM and not error.non_retryable
    assert "without a finish reason after 2 chunks" in error.message
    # Cut before any text (llama.cpp's interrupt right after the role chunk): the same.
    error = await fails(replying(sse({"id": "c1", "choices": [{"delta": {"role": "assistant"}}]})))
    assert error.type == ErrorType.TRUNCATED_STREAM and not error.non_retryable


@pytest.mark.fast
async def test_a_reply_cut_by_the_token_limit_is_stored_and_says_so() -> None:
    reply = await run(replying(sse(chunk("Tides are caused"), chunk(finish="length"))))
    assert reply.content == "Tides are caused" and reply.finish_reason == "length"
    assert reply.ending.cut_by_token_limit


@pytest.mark.fast
async def test_an_empty_stream_is_asked_again_unstreamed_to_read_the_real_error() -> None:
    seen: list[bool] = []
    overflow = {
        "error": {
            "message": "This model's maximum context length is 2048 tokens. However, you "
            "requested 3051 tokens.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
    }

    def handle(request: httpx.Request) -> httpx.Response:
        streamed = json.loads(request.content).get("stream") is True
        seen.append(streamed)
        if streamed:
            return httpx.Response(200, content=b"", headers={"content-type": "text/event-stream"})
        return httpx.Response(400, json=overflow)

    error = await fails(handle)
    assert seen == [True, False]
    assert error.type == ErrorType.CONTEXT_TOO_LONG and error.non_retryable
    assert "does not fit the model's context window" in error.message
    # Asked unstreamed from the start, the same error, the same class.
    seen.clear()
    error = await fails(handle, stream=False)
    assert seen == [False] and error.type == ErrorType.CONTEXT_TOO_LONG


@pytest.mark.fast
async def test_an_empty_stream_whose_unstreamed_retry_answers_is_an_answer() -> None:
    def handle(request: httpx.Request) -> httpx.Response:
        if json.loads(request.content).get("stream"):
            return httpx.Response(
                200, content=b"data: [DONE]\n\n", headers={"content-type": "text/event-stream"}
            )
        return httpx.Response(
            200, json={"choices": [{"message": {"content": "Whole."}, "finish_reason": "stop"}]}
        )

    reply = await run(handle)
    assert reply.content == "Whole." and reply.finish_reason == "stop"


# ---- a known context window ------------------------------------------------------------


@pytest.mark.fast
def test_a_known_context_window_lowers_max_tokens_or_refuses_the_prompt() -> None:
    call = CALL.model_copy(update={"max_tokens": 4_000})
    prompt_chars = len(CALL.messages[0].content)
    fitted = fit_context(call, 2_048)
    assert fitted.max_tokens == 2_048 - (-(-prompt_chars // 3) + 8)
    assert fit_context(call.model_copy(update={"max_tokens": 100}), 2_048).max_tokens == 100
    assert fit_context(call, None) is call


@pytest.mark.fast
async def test_a_prompt_over_the_known_window_is_refused_before_any_call() -> None:
    calls: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return httpx.Response(500)

    huge = ModelCall(model="m", messages=[ChatMessage(role="user", content="word " * 3_000)])
    error = await fails(handle, call=huge, context_window=2_048)
    assert calls == []
    assert error.type == ErrorType.CONTEXT_TOO_LONG and error.non_retryable
    assert "does not fit the context window of 2,048 tokens" in error.message


# ---- structured reviews ----------------------------------------------------------------


@pytest.mark.fast
def test_the_councils_own_schemas_travel_by_name_and_a_clients_whole() -> None:
    """A call's payload names the council's schema (and the labels a review was shown); the
    worker reading it has the same schema again. A client's answer format keeps its own."""
    for own in (review_schema(["Response B", "Response C"]), synthesis_schema()):
        call = ModelCall(model="m", messages=[ChatMessage(role="user", content="q")])
        sent = call.model_copy(update={"response_format": own}).model_dump_json()
        assert "json_schema" not in sent and f'"own":"{own.own}"' in sent
        read = ModelCall.model_validate_json(sent).response_format
        assert read is not None and read.json_schema == own.json_schema and read.json_schema
    client = StructuredReply(name="review", json_schema={"type": "object"})
    assert json.loads(client.model_dump_json()) == {
        "name": "review",
        "json_schema": {"type": "object"},
    }
    with pytest.raises(InvalidRequest, match="own: the council's own schemas"):
        validate_request(
            {
                "question": "q",
                "models": ["a/b", "c/d"],
                "answer_format": {"name": "x", "own": "review"},
            }
        )


@pytest.mark.fast
def test_the_review_schema_asks_each_shown_label_a_critique_and_a_rating() -> None:
    schema = review_schema(["Response B", "Response C"]).json_schema
    assert schema["required"] == ["Response B", "Response C", "ranking"]
    answer = schema["properties"]["Response B"]
    assert list(answer["properties"]) == ["critique", "rating"]  # the reasons first
    assert answer["properties"]["rating"]["enum"] == [1, 2, 3, 4, 5]
    assert schema["properties"]["ranking"]["items"]["enum"] == ["Response B", "Response C"]
    assert "$defs" not in json.dumps(refinement_schema().json_schema)
    sample = {
        "critiques_accepted": ["a"],
        "critiques_rejected": [{"critique": "b", "reason": "c"}],
        "refinement_reasoning": "d",
        "reasoning_steps": ["e"],
        "final_answer": "f",
        "confidence": 0.5,
        "changed_from_original": True,
        "improvement_explanation": "g",
    }
    assert RefinementReply.model_validate(sample).final_answer == "f"


@pytest.mark.fast
def test_a_json_review_reads_like_a_text_one() -> None:
    reply = json.dumps(
        {
            "Response B": {"critique": "It misses the units of the answer.", "rating": 2},
            "Response C": {"critique": "4.0", "rating": 4},
            "Response A": {"critique": "my own answer is the best", "rating": 5},
            "ranking": ["Response C", "Response C", "Response Z"],
        }
    )
    review, parsed = read_review("m/a", reply, LABELS, asked=JSON_SCHEMA)
    assert review.read_as == JSON_SCHEMA
    assert review.ratings == {"Response B": 2.0, "Response C": 4.0}  # never its own
    assert parsed.critiques == {"Response B": "It misses the units of the answer."}  # "4.0": noise
    assert review.parsed_ranking == ["Response C", "Response B"]  # completed from the ratings
    fenced = f"```json\n{reply}\n```"
    assert read_review("m/a", fenced, LABELS)[0].read_as == JSON_OBJECT
    assert read_review("m/a", "Response B is fine (3/5).", LABELS)[0].read_as == "text"


# ---- the same through the workflow, against the simulator ------------------------------


async def test_reviews_fall_back_to_the_form_the_provider_takes(council: Council) -> None:
    # Like llama-cpp-python's server: json_schema is a 500, json_object with a schema works.
    council.sim.set_faults({"*": {"structured": True, "refuse_formats": {"json_schema": 500}}})
    handle = await council.start(max_rounds=1, quality_threshold=5)
    record = await handle.result()
    reviews = record.stage2 + [r for round_ in record.rounds for r in round_.reviews]
    assert reviews and {r.read_as for r in reviews} == {JSON_OBJECT}
    assert all(r.ratings for r in reviews)
    assert all(r.finish_reason == "stop" for r in reviews)
    refusals = [e for e in council.sim.log()["entries"] if e["status"] == 500]
    # One refusal per model, in its first structured call; remembered from then on.
    assert sorted(e["model"] for e in refusals) == sorted(record.models)
    assert {e["stage"] for e in refusals} == {Stage.REVIEW.value}
    assert record.errors == []  # nothing else failed
    calls = await model_calls(handle)
    assert all(
        c.response_format is not None
        for c in calls
        if c.stage in (Stage.REVIEW, Stage.REFINE, Stage.SYNTHESIS)
    )
    assert all(c.response_format is None for c in calls if c.stage is Stage.ANSWER)
    assert all(c.max_tokens for c in calls)


async def test_a_provider_that_takes_the_schema_gets_json_schema(council: Council) -> None:
    council.sim.set_faults({"*": {"structured": True}})
    record = await council.run(max_rounds=1, quality_threshold=5)
    reviews = record.stage2 + [r for round_ in record.rounds for r in round_.reviews]
    assert {r.read_as for r in reviews} == {JSON_SCHEMA}
    assert all(json.loads(r.ranking) for r in reviews)
    assert record.rounds and all(r.error is None for r in record.rounds[0].refinements)
    assert all(r.refinement_reasoning is not None for r in record.rounds[0].refinements)


async def test_a_provider_that_ignores_the_schema_is_read_as_text(council: Council) -> None:
    council.sim.set_faults({"*": {"structured": False}})
    record = await council.run(max_rounds=1)
    assert {r.read_as for r in record.stage2} == {"text"}
    assert all(r.ratings for r in record.stage2)


async def test_a_cut_stream_is_retried_and_never_stored(council: Council) -> None:
    council.sim.set_faults({"sim/atlas": {"interrupt": 1.0, "max_faults": 1, "stages": ["stage1"]}})
    record = await council.run(max_rounds=1)
    atlas = [
        e
        for e in council.sim.log()["entries"]
        if e["model"] == "sim/atlas" and e["stage"] == "stage1"
    ]
    # Cut half-way, then asked again at once without streaming (which is never cut).
    assert [(e["outcome"], e["stream"]) for e in atlas] == [("interrupted", True), ("ok", False)]
    [answer] = [r for r in record.stage1 if r.model == "sim/atlas"]
    assert answer.finish_reason == "stop" and not answer.truncated
    assert all(r.finish_reason for r in record.stage1)


async def test_answers_cut_by_the_token_limit_say_so(council: Council) -> None:
    # Every reply at least 400 bytes, so that every answer is longer than its 20 tokens.
    council.sim.set_faults({"*": {"pad_to_bytes": 400}})
    handle = await council.start(max_rounds=1, max_tokens={"answer": 20})
    record = await handle.result()
    assert {r.finish_reason for r in record.stage1} == {"length"}
    assert all(r.cut_by_token_limit for r in record.stage1)
    progress = await handle.query(Deliberation.progress, 0)
    done = [
        e for e in progress.events if e.kind == EventKind.MODEL_COMPLETE and e.stage == Stage.ANSWER
    ]
    assert done and all("cut by the token limit" in event_line(e) for e in done)


async def test_a_failed_attempt_is_one_log_line(council: Council, caplog: Any) -> None:
    caplog.set_level(logging.DEBUG)
    council.sim.set_faults({"sim/drift": {"errors": {"500": 1.0}}})
    record = await council.run(max_rounds=1, policy={"max_attempts": 2})
    assert [e.model for e in record.errors if e.stage == Stage.ANSWER] == ["sim/drift"]
    ours = [r for r in caplog.records if r.name == "council.model_call"]
    assert [r.levelno for r in ours] == [logging.WARNING, logging.WARNING]
    assert "(attempt 1, retried)" in ours[0].getMessage()
    assert "(attempt 2, final)" in ours[1].getMessage()
    assert all(r.exc_info is None for r in ours)
    sdk = [r for r in caplog.records if r.name.startswith("temporalio") and r.exc_info]
    assert sdk and all(r.levelno == logging.DEBUG for r in sdk)
