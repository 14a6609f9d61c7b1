"""The OpenAI-compatible API (`python -m web`, under /v1) through the real openai SDK, on
the dev server, a worker and the simulator: the models, a plain and a streamed
completion, a conversation and instructions reaching every member, the id that `show`
finds, every refusal with its status, the bearer token, and a client that goes away
stopping its deliberation."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import os
import re
import shlex
import shutil
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import yaml
from temporalio.testing import WorkflowEnvironment

from council import limits
from council.agreement import independent_votes
from council.calls import Stage
from council.models import DeliberationRecord
from runs import following, listing
from tests.attachment_files import notes, png
from tests.temporal_fixtures import Council, model_calls, stage_started, starter, until
from tests.web_fixtures import WEB_TOKEN, WebServer, web_server
from web.openai_api import ATTACHMENT_BODY_BYTES, MAX_BODY_BYTES, StreamedText

QUICK = ["sim/atlas", "sim/borealis", "sim/cirrus"]
COUNCIL_TOML = f"""
[councils.quick]
models = {json.dumps(QUICK)}
chairman = "sim/borealis"
max_rounds = 1
"""
ONE_ROUND = {"council": {"max_rounds": 1}}


def sdk(web: WebServer, key: str = "no-key-needed", **options: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{web.url}/v1", api_key=key, max_retries=0, **options)


def said(error: openai.APIStatusError) -> str:
    """The message of an error as the server wrote it."""
    assert isinstance(error.body, dict)
    return str(error.body["message"])


def user(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


async def record_of(council: Council, workflow: str) -> DeliberationRecord:
    handle = council.client.get_workflow_handle(workflow, result_type=DeliberationRecord)
    return await handle.result()


@pytest.fixture
def web_councils(
    temporal: WorkflowEnvironment, council: Council, tmp_path: Path
) -> Iterator[WebServer]:
    """The web server with a council.toml that names one council, `quick`."""
    config = tmp_path / "council.toml"
    config.write_text(COUNCIL_TOML)
    with web_server(temporal, council, tmp_path, COUNCIL_CONFIG=str(config)) as server:
        yield server


@pytest.fixture
async def api(web: WebServer) -> AsyncIterator[openai.AsyncOpenAI]:
    async with sdk(web) as client:
        yield client


# ---- answers ----------------------------------------------------------------------------


async def test_the_models_and_a_plain_completion_that_show_finds(
    web_councils: WebServer, council: Council, cli_env: dict[str, str]
) -> None:
    async with sdk(web_councils) as client:
        models = await client.models.list()
        assert [m.id for m in models.data] == ["council", "council/quick"]
        quick = await client.models.retrieve("council/quick")
        assert quick.model_extra["council"] == {"models": QUICK, "chairman": "sim/borealis"}
        completion = await client.chat.completions.create(
            model="council/quick", messages=user("Is tea better than coffee?")
        )
    record = await record_of(council, completion.id)
    assert record.models == QUICK and record.stage3 and record.stage3.model == "sim/borealis"
    assert completion.object == "chat.completion" and completion.model == "council/quick"
    [choice] = completion.choices
    assert choice.message.role == "assistant" and choice.finish_reason == "stop"
    assert choice.message.content == record.stage3.response != ""
    assert completion.usage is not None
    assert (completion.usage.prompt_tokens, completion.usage.completion_tokens) == (
        record.usage.prompt_tokens,
        record.usage.completion_tokens,
    )
    assert completion.usage.total_tokens == record.usage.total_tokens > 0
    about = completion.model_extra["council"]
    assert about["id"] == record.id and about["status"] == "completed"
    assert about["termination_reason"] == record.iteration.terminated_reason
    assert about["rounds"] == record.iteration.rounds_completed <= 1
    assert about["page"] == f"{web_councils.url}/deliberations/{record.id}"
    # The documented extra: how far the final review agreed.
    assert record.agreement is not None
    assert about["agreement"] == record.agreement.model_dump(mode="json")
    assert about["verdict"].startswith(
        f"reviewers' agreement on their ratings: {record.agreement.level}"
    )
    assert about["independent_votes"] == independent_votes(record.agreement)
    if record.agreement.alpha is not None:
        assert 1 <= about["independent_votes"] <= len(record.agreement.reviewers)

    code, out, _ = await starter("show", completion.id, env=cli_env)
    assert code == 0 and record.id in out and "Is tea better than coffee?" in out


async def test_a_streamed_completion_adds_up_to_the_final_answer(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    # The chairman (a member only for the synthesis) writes its reply over the last 4 s of
    # its 8: the stream carries it as it is written, refreshed about once a second.
    council.sim.set_faults({"sim/echo": {"latency": 8}})
    stream = await api.chat.completions.create(
        model="council",
        messages=user("How do I pick a name for a cat?"),
        stream=True,
        stream_options={"include_usage": True},
        extra_body={
            "council": {
                "max_rounds": 1,
                "chairman": "sim/echo",
                "policy": {"heartbeat_timeout_seconds": 2},
            }
        },
    )
    chunks = [chunk async for chunk in stream]
    workflow = chunks[0].id
    record = await record_of(council, workflow)
    assert record.stage3 is not None and record.stage3.model == "sim/echo"
    assert {chunk.id for chunk in chunks} == {workflow}
    assert chunks[0].choices[0].delta.role == "assistant"
    with_choices = [chunk for chunk in chunks if chunk.choices]
    deltas = [c.choices[0].delta.content for c in with_choices if c.choices[0].delta.content]
    assert "".join(deltas) == record.stage3.response
    assert len(deltas) >= 3, deltas  # written as it came, not only at the end
    assert with_choices[-1].choices[0].finish_reason == "stop"
    assert with_choices[-1].model_extra["council"]["id"] == workflow
    usage = chunks[-1]
    assert usage.choices == [] and usage.usage is not None
    assert usage.usage.total_tokens == record.usage.total_tokens


async def test_earlier_turns_and_the_system_message_reach_every_member(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    messages = [
        {"role": "system", "content": "Answer as a ship's captain would."},
        {"role": "user", "content": "Which sea is saltiest?"},
        {"role": "assistant", "content": "The Red Sea, of the open seas: EARLIER-ANSWER-7c2."},
        {"role": "user", "content": [{"type": "text", "text": "And the least salty?"}]},
    ]
    completion = await api.chat.completions.create(
        model="council", messages=messages, extra_body=ONE_ROUND
    )
    handle = council.client.get_workflow_handle(completion.id, result_type=DeliberationRecord)
    record = await handle.result()
    assert record.query == "And the least salty?"
    assert record.context is not None and record.context.turns == ["messages[1]"]
    first = [call for call in await model_calls(handle) if call.stage is Stage.ANSWER]
    assert sorted(call.model for call in first) == sorted(record.models)
    for call in first:
        prompt = call.messages[-1].content
        conversation = prompt[prompt.index("<conversation>") : prompt.index("</conversation>")]
        assert "Which sea is saltiest?" in conversation and "EARLIER-ANSWER-7c2" in conversation
        instructions = prompt[prompt.index("<instructions>") : prompt.index("</instructions>")]
        assert "Answer as a ship's captain would." in instructions
        assert prompt.index("And the least salty?") > prompt.index("</conversation>")

    # Trimmed as a follow-up's context is: the oldest turn goes first.
    long_turn = [
        {"role": "user", "content": "Tell me about tides. " * 200},
        {"role": "assistant", "content": "Tides follow the moon. " * 200},
    ]
    short_turn = [
        {"role": "user", "content": "Is the sea blue?"},
        {"role": "assistant", "content": "Mostly."},
    ]
    trimmed = await api.chat.completions.create(
        model="council",
        messages=[*long_turn, *short_turn, *user("Why?")],
        extra_body={"council": {"max_rounds": 1, "context_tokens": 200}},
    )
    record = await record_of(council, trimmed.id)
    assert record.context is not None
    assert (record.context.turns, record.context.dropped) == (["messages[2]"], ["messages[0]"])

    # However the client splits it: 45 long user messages join into one turn, which is
    # cut to the bound (question and answer, with a marker), not carried whole.
    flood = [{"role": "user", "content": f"part {i}: " + "why " * 5_000} for i in range(45)]
    split = await api.chat.completions.create(
        model="council",
        messages=[*flood, {"role": "assistant", "content": "I see."}, *user("So?")],
        extra_body={"council": {"max_rounds": 1, "context_tokens": 1_000}},
    )
    handle = council.client.get_workflow_handle(split.id, result_type=DeliberationRecord)
    record = await handle.result()
    assert record.context is not None and record.context.cut
    assert record.context.turns == ["messages[0]"] and record.context.tokens <= 1_000
    for call in await model_calls(handle):
        assert (
            len(call.messages[-1].content) < 20_000 and "part 44" not in call.messages[-1].content
        )


async def test_a_client_that_sends_the_councils_answers_back_continues_the_thread(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    # As the openai SDK's users (and `llm -c`) continue a chat: every earlier message sent
    # back as it came, the last one the council's own answer.
    question = "Which lake is deepest? (a thread of its own)"
    first = await api.chat.completions.create(
        model="council", messages=user(question), extra_body=ONE_ROUND
    )
    answer = first.choices[0].message.content
    assert answer
    chat = [*user(question), {"role": "assistant", "content": answer}]
    stream = await api.chat.completions.create(
        model="council",
        messages=[*chat, *user("And the second deepest?")],
        stream=True,
        extra_body=ONE_ROUND,
    )
    chunks = [chunk async for chunk in stream]
    second = chunks[0].id
    record = await record_of(council, second)
    assert (record.follow_up_of, record.thread_id) == (first.id, first.id)
    assert record.context is not None and record.context.turns == [first.id]

    streamed = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    chat += [*user("And the second deepest?"), {"role": "assistant", "content": streamed}]
    third = await api.chat.completions.create(
        model="council", messages=[*chat, *user("Which of them is oldest?")], extra_body=ONE_ROUND
    )
    record = await record_of(council, third.id)
    assert (record.follow_up_of, record.thread_id) == (second, first.id)
    assert record.context is not None and record.context.turns == ["messages[0]", second]
    thread = await listing.list_thread(council.client, first.id)
    assert [row.id for row in thread] == [first.id, second, third.id]

    # An answer the council did not give (edited, or another model's) follows nothing up.
    edited = [*user(question), {"role": "assistant", "content": answer + " Or so I heard."}]
    alone = await api.chat.completions.create(
        model="council", messages=[*edited, *user("Are you sure?")], extra_body=ONE_ROUND
    )
    record = await record_of(council, alone.id)
    assert (record.follow_up_of, record.thread_id) == (None, None)
    assert record.context is not None and record.context.turns == ["messages[0]"]


# ---- refusals -----------------------------------------------------------------------------


async def test_each_refusal_has_its_status_and_the_clis_message(
    web: WebServer, api: openai.AsyncOpenAI, council: Council, cli_env: dict[str, str]
) -> None:
    with pytest.raises(openai.NotFoundError) as missing:
        await api.chat.completions.create(model="gpt-4o", messages=user("Hi?"))
    assert missing.value.code == "model_not_found" and "council" in said(missing.value)
    with pytest.raises(openai.NotFoundError):
        await api.models.retrieve("council/nothing")

    refused = {
        "no user message": [{"role": "system", "content": "Be brief."}],
        "the last message is the assistant's": [
            *user("Hi?"),
            {"role": "assistant", "content": "!"},
        ],
        "a tool's message": [*user("Hi?"), {"role": "tool", "content": "42"}],
        "an image": [{"role": "user", "content": [{"type": "image_url", "image_url": {}}]}],
    }
    for why, messages in refused.items():
        with pytest.raises(openai.BadRequestError) as bad:
            await api.chat.completions.create(model="council", messages=messages)
        assert "\n" not in said(bad.value), why
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(model="council", messages=[])
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(
            model="council", messages=user("Hi?"), extra_body={"council": {"max_rounds": 9}}
        )
    assert said(bad.value) == "max_rounds must be between 1 and 5 (got 9)"
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(
            model="council", messages=user("Hi?"), extra_body={"council": {"history": []}}
        )
    # A key no option has is refused, not dropped; true is no number (pydantic reads 1).
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(
            model="council", messages=user("Hi?"), extra_body={"council": {"policy": {"x": 1}}}
        )
    assert said(bad.value).startswith("policy.x is not a known field (allowed: ")
    assert bad.value.body["param"] == "council.policy.x"  # type: ignore[index]
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(
            model="council", messages=user("Hi?"), extra_body={"council": {"context_tokens": True}}
        )
    assert said(bad.value).startswith("context_tokens must be a whole number from 0 to ")
    assert said(bad.value).endswith("(got true)") and "\n" not in said(bad.value)

    # The same one line the CLI gives.
    long_question = "why " * (limits.QUESTION_MAX_CHARS // 4 + 1)
    code, _, err = await starter("start", "-", env=cli_env, stdin=long_question.encode())
    assert code == 2
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(model="council", messages=user(long_question))
    # The CLI names the field as its argument, QUESTION.
    assert said(bad.value).startswith("question is too long: at most")
    assert err.strip() == f"starter: QUESTION{said(bad.value).removeprefix('question')}"
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(model="council", messages=user("Hi?"), temperature=2.5)
    code, _, err = await starter("start", "Hi?", "--temperature", "2.5", env=cli_env)
    assert said(bad.value) in err

    # Each earlier message is bounded too, and the body as a whole.
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(
            model="council",
            messages=[
                {"role": "assistant", "content": "x" * (limits.MAX_RESPONSE_BYTES + 1)},
                *user("Hi?"),
            ],
        )
    assert said(bad.value).startswith("messages[0].content is too long")
    with pytest.raises(openai.APIStatusError) as large:
        await api.chat.completions.create(
            model="council", messages=user("x" * (MAX_BODY_BYTES + ATTACHMENT_BODY_BYTES))
        )
    assert large.value.status_code == 413

    # A browser page on another origin, and a body that is not JSON.
    async with sdk(web, default_headers={"Origin": "http://evil.test"}) as foreign:
        with pytest.raises(openai.PermissionDeniedError):
            await foreign.chat.completions.create(model="council", messages=user("Hi?"))
    async with httpx.AsyncClient(base_url=web.url) as http:
        form = await http.post("/v1/chat/completions", data={"model": "council"})
        assert form.status_code == 415
        assert form.json()["error"]["code"] == "unsupported_media_type"
        broken = await http.post(
            "/v1/chat/completions", content=b"{", headers={"Content-Type": "application/json"}
        )
        assert broken.status_code == 400 and broken.json()["error"]["code"] == "invalid_json"
        nowhere = await http.get("/v1/embeddings")
        assert nowhere.status_code == 404 and nowhere.json()["error"]["code"] == "unknown_url"
        wrong_method = await http.get("/v1/chat/completions")
        assert wrong_method.status_code == 405
        port = web.url.rsplit(":", 1)[1]
        rebound = await http.get("/v1/models", headers={"Host": f"evil.example:{port}"})
        assert rebound.status_code == 400
    assert council.sim.log()["total"] == 0  # nothing started


async def test_a_failed_deliberation_is_a_502_with_its_reason(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    council.sim.set_faults({"*": {"errors": {"400": 1.0}}})
    with pytest.raises(openai.APIStatusError) as failed:
        await api.chat.completions.create(model="council", messages=user("Will this fail?"))
    assert failed.value.status_code == 502
    assert "fewer than two models answered" in said(failed.value)
    assert "\n" not in said(failed.value)
    # The SDK is told not to ask again: that would start (and pay for) another deliberation.
    assert failed.value.response.headers["x-should-retry"] == "false"
    stream = await api.chat.completions.create(
        model="council", messages=user("And streamed?"), stream=True
    )
    # Closed here, not left to the garbage collector: a later test would be blamed for the
    # unfinished stream it finds.
    async with stream:
        with pytest.raises(openai.APIError) as ended:
            async for _ in stream:
                pass
    assert "fewer than two models answered" in ended.value.message


async def test_with_a_token_every_route_needs_the_bearer(
    web_with_token: WebServer, council: Council
) -> None:
    async with sdk(web_with_token, key="guess") as client:
        with pytest.raises(openai.AuthenticationError) as refused:
            await client.models.list()
        assert refused.value.code == "invalid_api_key"
        with pytest.raises(openai.AuthenticationError):
            await client.chat.completions.create(model="council", messages=user("Hi?"))
    async with httpx.AsyncClient(base_url=web_with_token.url) as http:
        # The page's sign-in cookie is not the API's key.
        assert (await http.post("/login", data={"token": WEB_TOKEN})).status_code == 303
        bare = await http.post("/v1/chat/completions", json={"model": "council"})
        assert bare.status_code == 401
        assert bare.headers["www-authenticate"] == "Bearer"
        assert (await http.get("/v1/models")).status_code == 401
    async with sdk(web_with_token, key=WEB_TOKEN) as client:
        assert [m.id for m in (await client.models.list()).data] == ["council"]
        completion = await client.chat.completions.create(
            model="council", messages=user("With the token?"), extra_body=ONE_ROUND
        )
    assert completion.choices[0].message.content
    assert WEB_TOKEN not in web_with_token.log()
    assert council.sim.log()["total"] > 0


async def test_with_temporal_down_a_completion_is_a_503(web_without_temporal: WebServer) -> None:
    async with openai.AsyncOpenAI(
        base_url=f"{web_without_temporal.url}/v1", api_key="x", max_retries=0, timeout=90
    ) as client:
        with pytest.raises(openai.InternalServerError) as down:
            await client.chat.completions.create(model="council", messages=user("Up?"))
    assert down.value.status_code == 503
    address = web_without_temporal.extra["temporal"]
    assert f"the Temporal server at {address} does not answer" in said(down.value)


# ---- a client that goes away --------------------------------------------------------------


async def test_a_stream_closed_mid_deliberation_stops_it(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    council.sim.set_faults({"*": {"latency": 1.5}})
    comments = []
    async with api.chat.completions.with_streaming_response.create(
        model="council", messages=user("Should I learn the cello?"), stream=True
    ) as response:
        async for line in response.iter_lines():
            if line.startswith("data: ") and not comments:
                workflow = json.loads(line.removeprefix("data: "))["id"]
            if line.startswith(":"):
                comments.append(line)
                if "stage 2 review" in line:
                    break
    assert comments[0] in (
        f": {following.WAITING}",
        ": starting",
        ": working: stage 1 answer",
    )
    assert ": working: stage 1 answer" in comments
    record = await record_of(council, workflow)
    assert record.iteration.terminated_reason == "user_stopped"
    assert record.stop_reason == "the API client disconnected"
    assert record.stage3 is not None  # the chairman synthesized what the council had


async def test_a_plain_request_whose_client_leaves_stops_it(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    council.sim.set_faults({"*": {"latency": 1.5}})
    question = "Should I learn the oboe?"
    asking = asyncio.create_task(
        api.chat.completions.create(model="council", messages=user(question))
    )
    rows: list[listing.Listed] = []
    while not rows:
        await asyncio.sleep(0.2)
        rows = await listing.list_deliberations(council.client, 5, question)
    handle = council.client.get_workflow_handle(rows[0].id, result_type=DeliberationRecord)
    await until(handle, stage_started(Stage.REVIEW))
    asking.cancel()
    record = await handle.result()
    assert record.iteration.terminated_reason == "user_stopped"
    assert record.stop_reason == "the API client disconnected"


INTEGRATIONS = Path(__file__).resolve().parent.parent / "docs" / "integrations.md"


def first_sdk_example() -> str:
    """The first openai example of docs/integrations.md, as a reader copies it."""
    guide = INTEGRATIONS.read_text(encoding="utf-8")
    section = guide[guide.index("## The OpenAI-compatible API") :]
    return re.findall(r"```python\n(.*?)```", section, re.S)[0]


async def test_the_first_documented_client_starts_one_deliberation_when_its_request_times_out(
    web: WebServer, council: Council
) -> None:
    """A reader's client, as the guide's first example makes it, whose request times out
    (here after 2 s, a deliberation taking longer): one deliberation started, not one
    more for each retry of the SDK's."""
    example = first_sdk_example()
    assert "from openai import OpenAI" in example
    question = f"Is this migration safe to run online? ({uuid.uuid4().hex[:8]})"

    def client(*args: Any, **options: Any) -> openai.OpenAI:
        return openai.OpenAI(*args, **{**options, "base_url": f"{web.url}/v1", "timeout": 2})

    code = example.replace("from openai import OpenAI", "").replace(
        "Is this migration safe to run online?", question
    )
    assert question in code
    council.sim.set_faults({"*": {"latency": 3}})
    with pytest.raises(openai.APITimeoutError):
        await asyncio.to_thread(exec, code, {"OpenAI": client, "print": lambda *_: None})
    # Every try the SDK made was sent before it gave up, and each would have started its
    # own run by then: the runs of this question are all there is.
    rows: list[listing.Listed] = []
    while not rows:  # (until the server's list shows the run)
        await asyncio.sleep(0.1)
        rows = await listing.list_deliberations(council.client, 10, question)
    assert len(rows) == 1, [row.id for row in rows]
    record = await record_of(council, rows[0].id)
    assert record.stop_reason == "the API client disconnected"


PAGE_ADDRESS = "http://127.0.0.1:8080"  # where the guide's examples find the page


def documented_llm_setup() -> tuple[dict[str, Any], list[list[str]]]:
    """The guide's extra-openai-models.yaml entry for `llm`, and its commands, split."""
    guide = INTEGRATIONS.read_text(encoding="utf-8")
    section = guide[guide.index("### The `llm` command line") :]
    section = section[: section.index("\n### ", 1)]
    [entry] = yaml.safe_load(re.findall(r"```yaml\n(.*?)```", section, re.S)[0])
    [commands] = re.findall(r"```sh\n(.*?)```", section, re.S)
    return entry, [shlex.split(line) for line in commands.strip().splitlines()]


async def test_the_documented_llm_configuration_points_at_v1_with_a_key_it_takes(
    web: WebServer,
) -> None:
    """What `llm` makes of the guide's entry: its OpenAI plugin asks `api_base` for
    `model_name` with the key stored under `api_key_name` (the guide's first command)."""
    entry, commands = documented_llm_setup()
    assert set(entry) == {"model_id", "model_name", "api_base", "api_key_name"}
    assert entry["api_base"] == f"{PAGE_ADDRESS}/v1"
    [_, _, _, name, _, key] = commands[0]
    assert commands[0][:3] == ["llm", "keys", "set"] and name == entry["api_key_name"]
    assert [c[:2] for c in commands[1:]] == [["llm", "-m"], ["llm", "-c"]]
    assert commands[1][2] == entry["model_id"]
    base = entry["api_base"].replace(PAGE_ADDRESS, web.url)
    async with openai.AsyncOpenAI(base_url=base, api_key=key, max_retries=0) as client:
        listed = [m.id for m in (await client.models.list()).data]
    assert entry["model_name"] in listed


# The `llm` command of this interpreter's environment (requirements-dev.txt), else the PATH's.
LLM = next(
    (str(p) for p in [Path(sys.executable).parent / "llm"] if p.exists()), shutil.which("llm")
)


@pytest.mark.skipif(LLM is None, reason="no `llm` command (pip install llm)")
async def test_llm_set_up_as_documented_asks_the_council_and_continues_the_thread(
    web: WebServer, council: Council, tmp_path: Path
) -> None:
    """The `llm` command itself, with the guide's entry (at the test page's address) and
    its commands: `llm -m` starts a deliberation, `llm -c` a follow-up in its thread."""
    entry, commands = documented_llm_setup()
    home = tmp_path / "llm"
    home.mkdir()
    served = {**entry, "api_base": entry["api_base"].replace(PAGE_ADDRESS, web.url)}
    (home / "extra-openai-models.yaml").write_text(yaml.safe_dump([served]))
    env = {**os.environ, "LLM_USER_PATH": str(home)}
    mark = uuid.uuid4().hex[:8]
    questions = []
    for command in commands:
        if command[1] in ("-m", "-c"):
            command = [*command[:-1], f"{command[-1]} ({mark})"]
            questions.append(command[-1])
        assert LLM is not None and command[0] == "llm"
        done = await asyncio.create_subprocess_exec(
            LLM,
            *command[1:],
            env=env,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(done.communicate(), 120)
        assert done.returncode == 0, (command, err.decode())
    first, second = [
        (await listing.list_deliberations(council.client, 5, question))[0].id
        for question in questions
    ]
    record = await record_of(council, second)
    assert (record.follow_up_of, record.thread_id) == (first, first)
    assert out.decode().strip() == (record.stage3.response if record.stage3 else None)


# ---- the streamed text ------------------------------------------------------------------


def test_the_streamed_deltas_always_add_up_to_the_final_answer() -> None:
    text = StreamedText()
    sent = [text.more("The "), text.more("The sea"), text.more(""), text.more("The sea is")]
    assert sent == ["The ", "sea", "", " is"]
    assert "".join(sent) + text.rest("The sea is wide.") == "The sea is wide."
    # A call asked again starts over: nothing is sent until it passes what was sent.
    assert text.more("A") == "" and text.more("The sea is wide") == " wide"
    rewritten = StreamedText()
    streamed = rewritten.more("Red")
    rest = rewritten.rest("Blue.")
    assert streamed + rest == "Red" + rest and rest.endswith("Blue.") and "written again" in rest


# ---- attachments ------------------------------------------------------------------------


async def test_file_and_image_url_parts_are_the_runs_attachments(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    text = notes(400_000)  # reaches every member whole
    image = png()
    csv = b"month,units\njan,12\n"
    reply = await api.chat.completions.create(
        model="council",
        messages=[
            {
                "role": "user",
                "content": [
                    {"type": "text", "text": "What do these files say?"},
                    {
                        "type": "file",
                        "file": {
                            "filename": "notes.md",
                            "file_data": "data:text/markdown;base64,"
                            + base64.b64encode(text.encode()).decode(),
                        },
                    },
                    {
                        "type": "file",
                        "file": {
                            "filename": "sales.csv",
                            "file_data": "data:text/csv;base64," + base64.b64encode(csv).decode(),
                        },
                    },
                    {
                        "type": "image_url",
                        "image_url": {
                            "url": "data:image/png;base64," + base64.b64encode(image).decode()
                        },
                    },
                ],
            }
        ],
        extra_body={"council": {"max_rounds": 1, "token_budget": 10_000_000}},
    )
    record = await record_of(council, reply.id)
    assert [(a.name, a.media_type, a.size) for a in record.attachments] == [
        ("notes.md", "text/markdown", len(text.encode())),
        ("sales.csv", "text/csv", len(csv)),
        ("image-4.png", "image/png", len(image)),
    ]
    whole = hashlib.sha256(text.encode()).hexdigest()
    calls = council.sim.log()["entries"]
    assert {c["stage"] for c in calls} >= {Stage.ANSWER, Stage.REVIEW, Stage.SYNTHESIS}
    for call in calls:
        shown = {a["name"]: a for a in call["attachments"]}
        assert shown["notes.md"]["sha256"] == whole
        assert shown["image-4.png"]["shown"] == "unseen"


async def test_parts_the_council_cannot_take_are_a_400_naming_the_part(
    api: openai.AsyncOpenAI, council: Council
) -> None:
    def asking(*parts: dict[str, Any]) -> list[dict[str, Any]]:
        return [{"role": "user", "content": [{"type": "text", "text": "Q?"}, *parts]}]

    cases = [
        (
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            "messages[0].content[1].image_url.url: must be a data URL (data:TYPE;base64,...): "
            "the council does not fetch URLs",
        ),
        (
            {
                "type": "file",
                "file": {
                    "filename": "blob.bin",
                    "file_data": "data:application/octet-stream;base64,"
                    + base64.b64encode(bytes(range(256))).decode(),
                },
            },
            "messages[0].content[1].file.file_data: blob.bin is a binary file that is neither "
            "a PDF nor an image",
        ),
        (
            {"type": "input_audio", "input_audio": {"data": "", "format": "wav"}},
            "messages[0].content: the parts read are text, file (file_data a data URL) or "
            "image_url (a data URL) (got input_audio)",
        ),
    ]
    for part, message in cases:
        with pytest.raises(openai.BadRequestError) as bad:
            await api.chat.completions.create(model="council", messages=asking(part))
        assert said(bad.value).startswith(message), said(bad.value)
        assert "\n" not in said(bad.value)
    too_many = [
        {"type": "file", "file": {"filename": f"{n}.txt", "file_data": "data:text/plain,x"}}
        for n in range(limits.MAX_ATTACHMENTS + 1)
    ]
    with pytest.raises(openai.BadRequestError) as bad:
        await api.chat.completions.create(model="council", messages=asking(*too_many))
    assert said(bad.value) == "attachments: at most 10 files per run (got 11)"
    assert isinstance(bad.value.body, dict) and bad.value.body["param"] == "messages"
    assert council.sim.log()["total"] == 0  # nothing started
