"""Each surface offers the members' tools and shows their calls, through the client its users
have: `python starter.py start --tools` and `show`, /v1 through the openai SDK (the `council`
options and a named council), the MCP server's `tools` argument through the official `mcp`
client, and the page's start form and record in Debian's chromium. One council.toml names
the example calculator (examples/calculator_mcp.py, over stdio) for the surfaces and for
the test's in-process worker; the simulator's members call calc__evaluate for arithmetic."""

from __future__ import annotations

import html
import json
import re
import sys
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from temporalio.testing import WorkflowEnvironment

from activities.tools import ToolBox
from app.settings import config as app_config
from council.calls import Stage
from council.models import DeliberationRecord
from harness.processes import ROOT
from simulator import SimulatorServer
from tests.temporal_fixtures import Council, council_worker, starter
from tests.test_mcp import error_text, record_of, stdio_server, texts
from tests.test_openai_api import said, sdk, user
from tests.web_fixtures import WebServer, web_server

QUESTION = "What is 37*91+12?"
RESULT = "3379"  # what calc__evaluate answers
QUICK = ["sim/atlas", "sim/borealis", "sim/cirrus"]
# What a refusal of an unknown tool lists: council.toml's, then the built-ins.
CONFIGURED = "configured: calc, scribe, fetch, web_search"
# A server none of whose tools declares itself read-only (tests/notebook_mcp.py): an entry
# that offers none of its tools, and how each surface's refusal of it reads.
SCRIBE = [sys.executable, str(ROOT / "tests/notebook_mcp.py"), "--writes-only"]
OFFERS_NONE = "scribe offers none of its tools: write_note, erase_notes are not declared"
OFFERED_BY = "offer them with side_effects = true in [tools.scribe] of "
# Tools for the members' answers and refinements only: fewer calls, a shorter run.
QUIET = {"reviewers": False, "chairman": False}


def calculated(record: DeliberationRecord) -> None:
    """The run was given the calculator, and its members used it."""
    assert record.status == "completed" and record.tools == ["calc"], record.errors
    used = [c for c in record.tool_calls if c.tool == "calc__evaluate" and not c.refused]
    assert used and all(RESULT in c.excerpt and c.error is None for c in used), record.tool_calls


@pytest.fixture
def toml(tmp_path: Path) -> Path:
    """council.toml: the calculator and the scribe (it offers none of its tools); a council
    `calc` whose members have the calculator, and a council `quiet` with no tools of its own
    (a run's tools come from its surface)."""
    path = tmp_path / "council.toml"
    command = [sys.executable, str(ROOT / "examples/calculator_mcp.py")]
    small = f"models = {json.dumps(QUICK)}\nmax_rounds = 1\n"
    quiet = "tool_options = { reviewers = false, chairman = false }\n"
    path.write_text(
        f"[tools.calc]\ncommand = {json.dumps(command)}\ntimeout = 30\n\n"
        f"[tools.scribe]\ncommand = {json.dumps(SCRIBE)}\ntimeout = 60\n\n"
        f'[councils.calc]\n{small}tools = ["calc"]\n{quiet}\n'
        f"[councils.quiet]\n{small}{quiet}"
    )
    return path


@pytest.fixture
async def council(
    temporal: WorkflowEnvironment, sim: SimulatorServer, toml: Path
) -> AsyncIterator[Council]:
    """The test's worker (the `council` that cli_env and the page point at), with the tools
    of the same council.toml, as worker.py builds its ToolBox."""
    tools = app_config.load({"COUNCIL_CONFIG": str(toml)}).tool_set()
    async with council_worker(temporal.client, sim, toolbox=ToolBox(tools)) as tooled:
        yield tooled


@pytest.fixture
def env(cli_env: dict[str, str], toml: Path) -> dict[str, str]:
    return {**cli_env, "COUNCIL_CONFIG": str(toml), "COUNCIL_MODELS": ",".join(QUICK)}


@pytest.fixture
def web(
    temporal: WorkflowEnvironment, council: Council, toml: Path, tmp_path: Path
) -> Iterator[WebServer]:
    config, models = str(toml), ",".join(QUICK)
    with web_server(
        temporal, council, tmp_path, COUNCIL_CONFIG=config, COUNCIL_MODELS=models
    ) as server:
        yield server


# ---- the command line ------------------------------------------------------------------


async def test_start_tools_wait_then_show_lists_the_calls(
    council: Council, env: dict[str, str]
) -> None:
    wid = f"cli-tools-{uuid.uuid4().hex[:8]}"
    code, out, err = await starter(
        *("start", QUESTION, "--tools", "calc", "--no-reviewer-tools", "--no-chairman-tools"),
        *("--max-rounds", "1", "--id", wid, "--wait"),
        env=env,
    )
    assert code == 0, err
    assert "calc__evaluate" in err  # the progress names each call as it runs
    record = await record_of(council, wid)
    calculated(record)
    assert {c.stage for c in record.tool_calls} == {Stage.ANSWER, Stage.REFINE}  # as the flags say
    assert record.stage3 is not None and out.strip().startswith(record.stage3.response.strip())

    code, shown, err = await starter("show", wid, env=env)
    assert code == 0, err
    assert "Tool calls" in shown and "calc__evaluate" in shown and RESULT in shown


async def test_start_with_an_unknown_tool_exits_2_naming_it_before_anything_starts(
    toml: Path,
) -> None:
    # An unreachable server: the refusal comes before any connection.
    env = {"COUNCIL_CONFIG": str(toml), "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    code, out, err = await starter("start", QUESTION, "--tools", "calc,nope", env=env)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "'nope'" in err and CONFIGURED in err, err


async def test_start_with_an_entry_that_offers_none_of_its_tools_exits_2_naming_the_setting(
    toml: Path,
) -> None:
    # The server is asked what it offers before anything starts (Temporal is unreachable).
    env = {"COUNCIL_CONFIG": str(toml), "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    code, out, err = await starter("start", QUESTION, "--tools", "calc,scribe", env=env)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and f"--tools: {OFFERS_NONE}" in err, err
    assert f"{OFFERED_BY}{toml}" in err and "or name them in its allow" in err


# ---- /v1 through the openai SDK --------------------------------------------------------


async def test_v1_takes_tools_in_the_council_options_and_by_a_named_council(
    web: WebServer, council: Council
) -> None:
    async with sdk(web) as client:
        completion = await client.chat.completions.create(
            model="council",
            messages=user(QUESTION),
            extra_body={"council": {"tools": ["calc"], "max_rounds": 1, "tool_options": QUIET}},
        )
        named = await client.chat.completions.create(model="council/calc", messages=user(QUESTION))
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="council",
                messages=user(QUESTION),
                extra_body={"council": {"tools": ["nope"]}},
            )
    record = await record_of(council, completion.id)
    calculated(record)
    assert record.stage3 is not None
    assert completion.choices[0].message.content == record.stage3.response
    calculated(await record_of(council, named.id))
    assert "'nope'" in said(refused.value) and CONFIGURED in said(refused.value)
    assert refused.value.body["param"] == "council.tools"  # type: ignore[index]
    # (Client-side OpenAI tools stay refused: tests/test_openai_structured.py.)


async def test_v1_and_the_page_refuse_an_entry_that_offers_none_of_its_tools(
    web: WebServer, council: Council
) -> None:
    async with sdk(web) as client:
        with pytest.raises(openai.BadRequestError) as refused:
            await client.chat.completions.create(
                model="council",
                messages=user(QUESTION),
                extra_body={"council": {"tools": ["scribe"]}},
            )
    assert OFFERS_NONE in said(refused.value) and OFFERED_BY in said(refused.value)
    assert refused.value.body["param"] == "council.tools"  # type: ignore[index]
    # The page's start form: the form again, the line beside its Tools.
    form = {"question": QUESTION, "council": "quiet", "tools": "scribe"}
    async with httpx.AsyncClient(base_url=web.url) as http:
        page = await http.post("/deliberations", data=form, headers={"Origin": web.url})
    assert page.status_code == 400
    [line] = re.findall(r'<p class="error field-error" id="error-tools">([^<]*)</p>', page.text)
    assert html.unescape(line).startswith(f"Tools: {OFFERS_NONE}") and OFFERED_BY in html.unescape(
        line
    )


# ---- MCP through the official client -----------------------------------------------------


async def test_mcp_start_deliberation_takes_tools(
    council: Council, env: dict[str, str], tmp_path: Path
) -> None:
    with (tmp_path / "mcp-stderr.log").open("w+") as log:
        async with stdio_server(env, log) as client:
            unknown = await client.call_tool(
                "start_deliberation", {"question": QUESTION, "tools": ["nope"]}
            )
            nothing = await client.call_tool(
                "start_deliberation", {"question": QUESTION, "tools": ["scribe"]}
            )
            started = await client.call_tool(
                "start_deliberation",
                {"question": QUESTION, "council": "quiet", "tools": ["calc"]},
            )
            assert not started.is_error, texts(started)
            assert isinstance(started.structured_content, dict)
            wid = started.structured_content["id"]
            calculated(await record_of(council, wid))
            done = await client.call_tool("get_deliberation", {"id": wid})
    message = error_text(unknown)
    assert "'nope'" in message and CONFIGURED in message
    assert error_text(nothing).startswith(f"tools: {OFFERS_NONE}")
    assert OFFERED_BY in error_text(nothing)
    assert isinstance(done.structured_content, dict)
    shown = done.structured_content["tool_calls"]
    assert any("calc__evaluate" in line for line in shown), shown


# ---- the page in a browser ---------------------------------------------------------------


async def test_the_start_form_offers_the_tools_and_the_page_shows_their_calls(
    web: WebServer, page: Any, council: Council
) -> None:
    await page.goto(web.url)
    boxes = page.locator("fieldset.tools input[type=checkbox][name=tools]")
    values = [await boxes.nth(i).get_attribute("value") for i in range(await boxes.count())]
    assert values == ["calc", "scribe", "fetch"]
    await page.fill("#question", QUESTION)
    await page.select_option("#council", "quiet")
    await page.check("fieldset.tools input[value=calc]")
    await page.click("#start-button")
    await page.wait_for_url(re.compile(r"/deliberations/council-"))
    wid = page.url.rsplit("/", 1)[-1]
    calculated(await record_of(council, wid))

    await page.wait_for_function(
        "() => document.querySelector('#status')?.textContent === 'completed'", timeout=60_000
    )
    calls = page.locator("#answers article.answer details.tool-calls").first
    summary = calls.locator("summary")
    await summary.wait_for()
    assert (await summary.inner_text()).startswith("Tool calls (")
    line = calls.locator(".tool-call .tool-line").first
    assert not await line.is_visible()  # folded until the reader opens it
    await summary.click()
    assert "calc__evaluate" in (await line.inner_text())
    excerpt = calls.locator(".tool-call .excerpt").first
    await excerpt.wait_for()  # shown once opened
    assert RESULT in await excerpt.inner_text()


# ---- two entries that offer one function name ------------------------------------------


@pytest.fixture
def twins(tmp_path: Path) -> Path:
    """council.toml with the calculator twice, under names that read the same once cleaned:
    both would offer calc_v2__evaluate and calc_v2__convert."""
    path = tmp_path / "council.toml"
    command = json.dumps([sys.executable, str(ROOT / "examples/calculator_mcp.py")])
    path.write_text(
        f'[tools."calc.v2"]\ncommand = {command}\n\n[tools.calc_v2]\ncommand = {command}\n'
    )
    return path


async def test_start_with_two_entries_offering_one_name_exits_2_naming_both(twins: Path) -> None:
    # Both servers are asked what they offer before anything starts (Temporal is unreachable).
    env = {"COUNCIL_CONFIG": str(twins), "TEMPORAL_ADDRESS": "127.0.0.1:1"}
    code, out, err = await starter("start", QUESTION, "--tools", "calc.v2,calc_v2", env=env)
    assert code == 2 and out == ""
    assert err.count("\n") == 1, err
    assert (
        f"--tools: [tools.calc.v2] and [tools.calc_v2] of {twins} both offer calc_v2__evaluate"
        in err
    ), err
    assert err.rstrip().endswith("rename one of the two entries")
    # Each alone starts (is refused only for want of a server).
    code, _, err = await starter("start", QUESTION, "--tools", "calc_v2", env=env)
    assert code == 2 and "cannot reach the Temporal server" in err, err


async def test_a_run_whose_entries_offer_one_name_is_offered_it_once(twins: Path) -> None:
    """Where the start could not tell (a server that answered only later), the run's
    listing keeps the first entry's function and says why the other's is not offered."""
    toolbox = ToolBox(app_config.load({"COUNCIL_CONFIG": str(twins)}).tool_set())
    try:
        offer = await toolbox.list_tools(["calc.v2", "calc_v2"])
    finally:
        await toolbox.aclose()
    assert [(s.name, s.source) for s in offer.specs] == [
        ("calc_v2__evaluate", "calc.v2"),
        ("calc_v2__convert", "calc.v2"),
    ]
    assert offer.withheld == [
        "calc_v2__evaluate: offered by calc.v2 already; rename one of the two entries",
        "calc_v2__convert: offered by calc.v2 already; rename one of the two entries",
    ]
