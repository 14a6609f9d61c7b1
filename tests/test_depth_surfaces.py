"""Depth on every surface, through the client its users have: `python starter.py start
--depth auto` and `show`, /v1 through the openai SDK (the `council` options and a named
council of council.toml), the MCP server's `depth` argument through the official `mcp`
client, and the page's start form and record in Debian's chromium. The simulated members
agree at stage 1 (the test sets it), so a run of depth auto ends after stage 1; each
surface shows the gate's evidence and the disagreement report."""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from temporalio.testing import WorkflowEnvironment

from council.iteration import TerminationReason
from council.models import DeliberationRecord
from simulator import SimulatorServer
from tests.temporal_fixtures import Council, starter
from tests.test_mcp import record_of, stdio_server, texts
from tests.test_openai_api import sdk, user
from tests.web_fixtures import WebServer, web_server

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = json.loads((ROOT / "datasets" / "arithmetic_logic.jsonl").read_text().splitlines()[0])
QUESTION, ANSWER = PROBLEM["question"], PROBLEM["answer"]
MARKING = ["sim/atlas", "sim/borealis", "sim/drift"]  # each marks its final value
AGREED = f"agreement after stage 1: all 3 answers state {ANSWER}"


@pytest.fixture(autouse=True)
def agreeing(sim: SimulatorServer) -> Iterator[None]:
    with sim.disagreeing(0.0):
        yield


@pytest.fixture
def toml(tmp_path: Path) -> Path:
    """council.toml: a council `quick` of depth auto."""
    path = tmp_path / "council.toml"
    path.write_text(f'[councils.quick]\nmodels = {json.dumps(MARKING)}\ndepth = "auto"\n')
    return path


@pytest.fixture
def env(cli_env: dict[str, str], toml: Path) -> dict[str, str]:
    return {**cli_env, "COUNCIL_CONFIG": str(toml), "COUNCIL_MODELS": ",".join(MARKING)}


@pytest.fixture
def web(
    temporal: WorkflowEnvironment, council: Council, toml: Path, tmp_path: Path
) -> Iterator[WebServer]:
    with web_server(
        temporal, council, tmp_path, COUNCIL_CONFIG=str(toml), COUNCIL_MODELS=",".join(MARKING)
    ) as server:
        yield server


def ended_after_stage_1(record: DeliberationRecord) -> str:
    """What the run saved, in the line every surface shows."""
    assert record.status == "completed", record.errors
    assert record.iteration.terminated_reason == TerminationReason.AGREEMENT
    assert record.gate is not None and record.gate.describe() == AGREED
    assert record.stage2 == [] and record.stage3 is not None
    assert record.disagreement_report is not None
    assert record.saved is not None and record.saved.saved_calls > 0
    return record.saved.describe()


# ---- the command line ------------------------------------------------------------------


async def test_start_depth_auto_wait_json_then_show_and_the_transcript(
    council: Council, env: dict[str, str]
) -> None:
    wid = f"cli-depth-{uuid.uuid4().hex[:8]}"
    code, out, err = await starter(
        "start", QUESTION, "--depth", "auto", "--id", wid, "--wait", "--json", env=env
    )
    assert code == 0, err
    record = DeliberationRecord.model_validate_json(out)
    saved = ended_after_stage_1(record)
    assert json.loads(out)["gate"]["values"] == dict.fromkeys(MARKING, ANSWER)
    # What it spent against the full protocol's estimate, and no warning glyph for it.
    assert f"  ✔ {AGREED}" in err and f"  ✔ {saved}" in err and "  ! " not in err

    code, shown, err = await starter("show", wid, env=env)
    assert code == 0, err
    assert f"depth auto · {AGREED} · {saved}" in shown
    assert f"**Answers:** members' first answers: all 3 state {ANSWER}" in shown
    assert "Where the council agreed and disagreed" in shown
    assert f"the final answer is {ANSWER}" in shown

    code, markdown, err = await starter("show", wid, "--markdown", env=env)
    assert code == 0 and "## Where the council agreed and disagreed" in markdown


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (("--depth", "deep"), "argument --depth: invalid choice: 'deep'"),
        (("--depth", "auto", "--agree-share", "0.2"), "--agree-share must be between 0.5 and 1"),
        (("--check-model", "bad model!"), "--check-model"),
    ],
)
async def test_bad_depth_options_exit_2_in_one_line_before_anything_starts(
    flags: tuple[str, ...], said: str
) -> None:
    env = {"TEMPORAL_ADDRESS": "127.0.0.1:1"}  # nothing to reach: refused before
    code, out, err = await starter(
        "start", QUESTION, "--model", "a", "--model", "b", *flags, env=env
    )
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and said in err, err


# ---- /v1 through the openai SDK --------------------------------------------------------


async def test_v1_takes_depth_in_the_council_options_and_by_a_named_council(
    web: WebServer, council: Council
) -> None:
    async with sdk(web) as client:
        completion = await client.chat.completions.create(
            model="council",
            messages=user(QUESTION),
            extra_body={"council": {"depth": "auto", "models": MARKING}},
        )
        named = await client.chat.completions.create(model="council/quick", messages=user(QUESTION))
    record = await record_of(council, completion.id)
    saved = ended_after_stage_1(record)
    about = completion.model_extra["council"]
    assert about["depth"] == "auto" and about["gate_line"] == AGREED
    assert about["saved_line"] == saved and about["saved"]["full_calls"] > about["saved"]["calls"]
    assert about["answers_agree"] == f"members' first answers: all 3 state {ANSWER}"
    assert about["termination_reason"] == TerminationReason.AGREEMENT
    report = record.disagreement_report
    assert report is not None and about["disagreement_report"] == report.model_dump(mode="json")
    assert about["not_needed"] == []
    ended_after_stage_1(await record_of(council, named.id))


# ---- MCP through the official client -----------------------------------------------------


async def test_mcp_takes_depth_and_returns_the_report(
    council: Council, env: dict[str, str], tmp_path: Path
) -> None:
    with (tmp_path / "mcp-stderr.log").open("w+") as log:
        async with stdio_server(env, log) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            depth = tools["ask_council"].input_schema["properties"]["depth"]
            started = await client.call_tool(
                "start_deliberation", {"question": QUESTION, "depth": "auto"}
            )
            assert not started.is_error, texts(started)
            assert isinstance(started.structured_content, dict)
            wid = started.structured_content["id"]
            record = await record_of(council, wid)
            done = await client.call_tool("get_deliberation", {"id": wid})
            wrong = await client.call_tool("start_deliberation", {"question": "q", "depth": "deep"})
    assert "auto" in json.dumps(depth) and "full" in json.dumps(depth)
    saved = ended_after_stage_1(record)
    data = done.structured_content
    assert isinstance(data, dict)
    assert data["depth"] == "auto" and data["gate"] == AGREED
    assert record.disagreement_report is not None
    assert data["report"] == record.disagreement_report.model_dump(mode="json")
    assert f"depth auto: {AGREED} · {saved}" in data["summary"]
    assert f"the final answer is {ANSWER}" in texts(done)[2]
    assert wrong.is_error and len(texts(wrong)) == 1 and "depth" in texts(wrong)[0]


# ---- the page in a browser ---------------------------------------------------------------


async def test_the_start_form_takes_depth_and_the_page_shows_the_gate_and_report(
    web: WebServer, page: Any, council: Council
) -> None:
    await page.goto(web.url)
    await page.fill("#question", QUESTION)
    await page.fill("#models", "\n".join(MARKING))
    await page.select_option("#depth", "auto")
    await page.click("#start-button")
    await page.wait_for_url(re.compile(r"/deliberations/council-"))
    wid = page.url.rsplit("/", 1)[-1]
    saved = ended_after_stage_1(await record_of(council, wid))
    await page.wait_for_function(
        "() => document.querySelector('#status')?.textContent === 'completed'", timeout=60_000
    )
    gate = page.locator("#final-gate")
    await gate.wait_for()
    assert await gate.inner_text() == f"depth auto · {AGREED}"
    assert await page.locator("#final-saved").inner_text() == saved
    assert await page.locator("#final-answers-agree").inner_text() == (
        f"members' first answers: all 3 state {ANSWER}"
    )
    report = page.locator("#final-report")
    assert "Where the council agreed and disagreed" in await report.inner_text()
    assert f"the final answer is {ANSWER}" in await report.inner_text()
    # Each point says who found it: the value computed, the chairman's own wording.
    computed = report.locator("li", has_text=f"every member's first answer states {ANSWER}")
    assert await computed.locator(".badge.source-computed").inner_text() == "computed"
    written = report.locator("li", has_text=f"the final answer is {ANSWER}")
    assert await written.locator(".badge.source-chairman").inner_text() == "chairman"
