"""`starter.py doctor` as a user runs it (a subprocess), and the page's /doctor, against the
session's dev server, an in-process worker and the simulator over HTTP: every ✓ on a
working setup, and each thing that can be wrong found, with its fix."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from temporalio.service import RPCError

from activities.llm_client import make_http_client
from activities.settings import GatewaySettings
from app.settings import councils
from app.settings.environment import Settings
from doctor.providers import CONCURRENT, Provider, default_source, measured_concurrency
from harness.processes import free_port, temporal_binary
from simulator import SimulatorConfig, SimulatorServer
from simulator.config import parse_faults
from tests.sim_fixtures import wait_until
from tests.temporal_fixtures import (
    FOUR_MODELS,
    TEST_API_KEY,
    Council,
    council_worker,
    starter,
    temporal_address,
)
from tests.web_fixtures import WEB_TOKEN, web_server

NAMES = [
    "temporal server",
    "namespace",
    "search attributes",
    "worker",
    "runs",
    "payload store",
    "council.toml",
    "provider default reachable",
    "provider default key",
    "provider default models",
    "provider default context window",
    "provider default structured output",
    "provider default images",
    "provider default concurrent requests",
    "default council",
]
KEYED_KEY = "sk-keyed-9b2e41c7d0-Vq3"  # (no word a check names: see TEST_API_KEY)
CALCULATOR = Path(__file__).resolve().parent.parent / "examples" / "calculator_mcp.py"
NOTEBOOK = Path(__file__).resolve().parent / "notebook_mcp.py"


@pytest.fixture
def env(temporal: Any, council: Council, tmp_path: Path) -> dict[str, str]:
    """A working setup: the test's server and worker, the simulator as the default
    provider with a key, an empty council.toml."""
    config = tmp_path / "council.toml"
    config.write_text("")
    return {
        "TEMPORAL_ADDRESS": temporal_address(temporal),
        "TEMPORAL_NAMESPACE": "default",
        "COUNCIL_TASK_QUEUE": council.task_queue,
        "COUNCIL_LLM_BASE_URL": council.sim.url,
        "COUNCIL_LLM_API_KEY": TEST_API_KEY,
        "COUNCIL_MODELS": ",".join(FOUR_MODELS),
        "COUNCIL_CHAIRMAN": "",
        "COUNCIL_CONFIG": str(config),
        "OPENROUTER_API_KEY": "",
    }


async def doctor(env: dict[str, str]) -> tuple[int, dict[str, dict[str, Any]], str]:
    """`starter.py doctor --json`: its status, the checks by name, and all it printed."""
    code, out, err = await starter("doctor", "--json", env=env)
    checks = json.loads(out)
    assert [c["name"] for c in checks] == list(dict.fromkeys(c["name"] for c in checks))
    return code, {c["name"]: c for c in checks}, out + err


async def temporal_cli(*args: str) -> None:
    """The temporal CLI, as an operator runs it."""
    process = await asyncio.create_subprocess_exec(temporal_binary(), *args)
    assert await process.wait() == 0, args


def statuses(checks: dict[str, dict[str, Any]]) -> dict[str, str]:
    return {name: check["status"] for name, check in checks.items()}


async def test_a_working_setup_passes_every_check(env: dict[str, str]) -> None:
    code, out, err = await starter("doctor", env=env)
    assert code == 0, out + err
    lines = out.splitlines()
    assert [line.split(":")[0][2:] for line in lines] == NAMES
    assert all(line.startswith("✓ ") for line in lines), out
    assert " — fix: " not in out
    assert TEST_API_KEY not in out + err
    said = dict(line[2:].split(": ", 1) for line in lines)
    assert said["worker"].startswith(f"1 worker(s) poll task queue '{env['COUNCIL_TASK_QUEUE']}'")
    assert "CouncilStage" in said["search attributes"]
    assert said["provider default key"] == (
        "the key from COUNCIL_LLM_API_KEY: accepted by a test call"
    )
    assert (
        "sim/atlas answered a test call asked for as json_schema"
        in said["provider default structured output"]
    )
    assert said["default council"].startswith(
        "sim/atlas, sim/borealis, sim/cirrus, sim/drift; chairman sim/atlas (from COUNCIL_MODELS)"
    )
    assert said["provider default images"] == (
        "attached images are named to its members, not shown: set COUNCIL_LLM_IMAGES if its "
        "models take images"
    )
    assert said["provider default reachable"] == (
        f"{env['COUNCIL_LLM_BASE_URL']} answers (GET /models: HTTP 200); from COUNCIL_LLM_BASE_URL"
    )
    # A simulator on this machine: the worker keeps its queue, so nothing waits unseen.
    assert said["provider default concurrent requests"] == (
        "a server on this machine or a private network: Council queues for it itself (1024 "
        "at once, as the server's /props says; COUNCIL_LLM_MAX_CONCURRENT_REQUESTS sets "
        "another number)"
    )
    code, out, _ = await starter("doctor", env={**env, "COUNCIL_LLM_IMAGES": "true"})
    assert "✓ provider default images: attached images are shown to sim/atlas, " in out

    # --json: the same checks, as a list of objects.
    code, out, err = await starter("doctor", "--json", env=env)
    assert code == 0, err
    checks = json.loads(out)
    assert [c["name"] for c in checks] == NAMES
    for check in checks:
        assert set(check) == {"name", "status", "ok", "detail", "fix"}
        assert check["status"] == "ok" and check["ok"] is True and check["fix"] is None
    assert TEST_API_KEY not in out + err


async def test_a_closed_server_port_fails_and_skips_what_needs_the_server(
    env: dict[str, str],
) -> None:
    address = f"127.0.0.1:{free_port()}"
    code, checks, printed = await doctor({**env, "TEMPORAL_ADDRESS": address})
    assert code == 1
    server = checks["temporal server"]
    assert server["status"] == "failed" and server["ok"] is False
    assert f"cannot reach the Temporal server at {address}" in server["detail"]
    assert "TEMPORAL_ADDRESS" in server["fix"] and "make server" in server["fix"]
    for name in ("namespace", "search attributes", "worker", "runs"):
        assert checks[name]["status"] == "skipped"
        assert checks[name]["detail"] == "skipped: the server does not answer"
    # The model side is checked all the same.
    assert all(checks[name]["status"] == "ok" for name in NAMES[5:])
    assert TEST_API_KEY not in printed


async def test_an_unknown_namespace_is_named_with_its_fix(env: dict[str, str]) -> None:
    code, checks, _ = await doctor({**env, "TEMPORAL_NAMESPACE": "no-such-namespace"})
    assert code == 1
    assert checks["temporal server"]["status"] == "ok"
    namespace = checks["namespace"]
    assert namespace["status"] == "failed" and "'no-such-namespace'" in namespace["detail"]
    assert "temporal operator namespace create --namespace no-such-namespace" in namespace["fix"]
    assert checks["worker"]["status"] == "skipped"


async def test_missing_search_attributes_come_with_the_commands_that_add_them(
    env: dict[str, str], temporal: Any
) -> None:
    namespace = f"doctor-{uuid.uuid4().hex[:8]}"
    address = ["--address", temporal_address(temporal)]
    await temporal_cli("operator", "namespace", "create", *address, "--namespace", namespace)
    setup = {**env, "TEMPORAL_NAMESPACE": namespace}
    code, checks, _ = await doctor(setup)
    assert code == 1
    assert checks["namespace"] == {
        "name": "namespace",
        "status": "ok",
        "ok": True,
        "detail": f"{namespace} exists",
        "fix": None,
    }
    found = checks["search attributes"]
    assert found["status"] == "failed"
    assert found["detail"] == (
        f"missing on namespace {namespace}: CouncilStage, CouncilRound, "
        "CouncilTerminationReason, CouncilThread, CouncilAgreement, CouncilTenant, "
        "CouncilInputBytes"
    )
    # The fix, run as it is written, registers them.
    words = shlex.split(found["fix"].split("or: ", 1)[1])
    assert words[:4] == ["temporal", "operator", "search-attribute", "create"]
    await temporal_cli(*words[1:], *address)
    code, checks, _ = await doctor(setup)
    assert checks["search attributes"]["status"] == "ok", checks["search attributes"]
    assert checks["worker"]["status"] == "failed"  # nobody polls in that namespace


async def test_no_worker_on_the_task_queue_says_to_start_one(env: dict[str, str]) -> None:
    queue = f"nobody-polls-{uuid.uuid4().hex[:8]}"
    code, checks, _ = await doctor({**env, "COUNCIL_TASK_QUEUE": queue})
    assert code == 1
    worker = checks["worker"]
    assert worker["status"] == "failed"
    assert f"no worker has polled task queue '{queue}'" in worker["detail"]
    assert "make worker" in worker["fix"] and f"COUNCIL_TASK_QUEUE={queue}" in worker["fix"]
    assert [n for n, s in statuses(checks).items() if s != "ok"] == ["worker"]


async def test_a_provider_at_a_closed_port_fails_and_skips_its_other_checks(
    env: dict[str, str],
) -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"
    code, checks, printed = await doctor({**env, "COUNCIL_LLM_BASE_URL": base})
    assert code == 1
    reachable = checks["provider default reachable"]
    assert reachable["status"] == "failed"
    assert reachable["detail"].startswith(f"{base} does not answer: cannot connect to 127.0.0.1")
    assert "COUNCIL_LLM_BASE_URL" in reachable["fix"]
    for part in ("key", "models", "context window", "structured output", "images", CONCURRENT):
        check = checks[f"provider default {part}"]
        assert check["status"] == "skipped", check
        assert check["detail"] == "skipped: the provider does not answer"
    assert checks["default council"]["status"] == "skipped"
    assert all(checks[name]["status"] == "ok" for name in NAMES[:6])
    assert TEST_API_KEY not in printed


@pytest.fixture
def keyed() -> Iterator[SimulatorServer]:
    """A second provider that wants its own key (and echoes a wrong one in its error)."""
    with SimulatorServer(SimulatorConfig(api_key=KEYED_KEY)) as server:
        yield server


async def test_a_refused_key_fails_without_printing_any_key(
    env: dict[str, str], keyed: SimulatorServer, tmp_path: Path
) -> None:
    config = tmp_path / "keyed.toml"
    config.write_text(
        f'[providers.keyed]\nbase_url = "{keyed.url}"\napi_key_env = "KEYED_KEY"\n'
        'models = ["sim/*"]\n'
    )
    wrong = "sk-wrong-key-a41f0c93d2"
    setup = {**env, "COUNCIL_CONFIG": str(config), "KEYED_KEY": wrong}
    code, checks, printed = await doctor(setup)
    assert code == 1
    # Every member routes to the keyed provider: the default one is not checked.
    assert "provider default reachable" not in checks
    key = checks["provider keyed key"]
    assert key["status"] == "failed"
    assert key["detail"] == (
        "the provider refused the key from KEYED_KEY (HTTP 401 on the test call)"
    )
    assert key["fix"] == f"set KEYED_KEY to a valid key for 127.0.0.1:{keyed.port}"
    assert checks["provider keyed structured output"]["status"] == "skipped"
    assert checks["provider keyed models"]["status"] == "ok"
    code, text, err = await starter("doctor", env=setup)
    for shown in (printed, text + err):
        assert wrong not in shown and KEYED_KEY not in shown and TEST_API_KEY not in shown
    assert "✗ provider keyed key: the provider refused the key from KEYED_KEY" in text

    # The right key: every check of that provider passes.
    code, checks, printed = await doctor({**setup, "KEYED_KEY": KEYED_KEY})
    assert code == 0, printed
    assert checks["provider keyed key"]["detail"] == (
        "the key from KEYED_KEY: accepted by a test call"
    )
    assert checks["council.toml"]["detail"] == f"{config}: 1 provider(s), 0 council(s)"
    assert KEYED_KEY not in printed

    # The variable it names, unset.
    code, checks, _ = await doctor({**setup, "KEYED_KEY": ""})
    assert code == 1
    assert checks["provider keyed key"]["detail"] == "no key: KEYED_KEY is not set"


async def test_a_member_its_provider_does_not_list_is_named(env: dict[str, str]) -> None:
    models = "sim/atlas,sim/borealis,vendor/not-served"
    code, checks, _ = await doctor({**env, "COUNCIL_MODELS": models})
    assert code == 1
    listed = checks["provider default models"]
    assert listed["status"] == "failed"
    assert listed["detail"].startswith("not listed by the provider: vendor/not-served (")
    assert "sim/atlas" in listed["detail"]  # what it does list
    assert "COUNCIL_MODELS" in listed["fix"]
    council = checks["default council"]
    assert council["status"] == "failed"
    assert "not listed by its provider: vendor/not-served (provider default)" in council["detail"]


async def test_a_key_pasted_as_a_model_id_is_not_echoed(env: dict[str, str]) -> None:
    pasted = "sk-or-v1-3f9a0c2b7d1e4f6a8b0c"
    code, checks, printed = await doctor({**env, "COUNCIL_MODELS": f"sim/atlas,{pasted}"})
    assert code == 1
    assert pasted not in printed and "3f9a0c2b7d1e4f6a8b0c" not in printed
    assert "[redacted]" in checks["provider default models"]["detail"]


async def test_a_refused_schema_says_how_reviews_are_read_then(
    env: dict[str, str], council: Council
) -> None:
    council.sim.set_faults({"*": {"refuse_formats": {"json_schema": 400}}})
    code, checks, _ = await doctor(env)
    assert code == 1
    output = checks["provider default structured output"]
    assert output["status"] == "failed"
    assert output["detail"].startswith(
        "sim/atlas refused a reply asked for as json_schema: HTTP 400"
    )
    assert "COUNCIL_LLM_STRUCTURED_OUTPUT" in output["fix"]
    # Asked for as the setting says: json_object is taken.
    code, checks, _ = await doctor({**env, "COUNCIL_LLM_STRUCTURED_OUTPUT": "json_object"})
    assert code == 0
    assert "asked for as json_object" in checks["provider default structured output"]["detail"]


async def test_a_provider_that_ignores_the_schema_fails_the_structured_output_check(
    env: dict[str, str], council: Council
) -> None:
    # As many providers do: response_format is taken, and the reply is prose all the same.
    council.sim.set_faults({"*": {"structured": False}})
    code, checks, _ = await doctor(env)
    assert code == 1
    output = checks["provider default structured output"]
    assert output["status"] == "failed"
    assert output["detail"].startswith(
        "sim/atlas was asked for a reply in a JSON schema (as json_schema, "
        "COUNCIL_LLM_STRUCTURED_OUTPUT: auto) and answered otherwise: the reply is not JSON"
    )
    assert "a client's response_format (/v1, MCP) gets an error" in output["fix"]
    assert [n for n, status in statuses(checks).items() if status != "ok"] == [
        "provider default structured output"
    ]
    # With structured output off, only the prompt asks for the schema.
    code, checks, _ = await doctor({**env, "COUNCIL_LLM_STRUCTURED_OUTPUT": "off"})
    output = checks["provider default structured output"]
    assert output["status"] == "failed"
    assert output["detail"].startswith(
        "sim/atlas was asked for a reply in a JSON schema (in the prompt alone, "
        "COUNCIL_LLM_STRUCTURED_OUTPUT: off) and answered otherwise"
    )
    assert output["fix"].startswith("COUNCIL_LLM_STRUCTURED_OUTPUT is off, so only the prompt")
    # One that holds its reply to the schema (the simulator's default) passes.
    council.sim.set_faults(None)
    code, checks, _ = await doctor(env)
    assert code == 0
    assert checks["provider default structured output"]["detail"] == (
        "sim/atlas answered a test call asked for as json_schema "
        "(COUNCIL_LLM_STRUCTURED_OUTPUT: auto) in the JSON schema it was given"
    )


async def test_another_shell_checks_the_provider_of_the_running_make_up(
    env: dict[str, str], council: Council, tmp_path: Path
) -> None:
    """`make up` on the simulator shares its council and the simulator's address (never a
    key) in DATA/default-council.json; a shell with no COUNCIL_LLM_BASE_URL, on the same
    server and task queue, checks that simulator rather than OpenRouter."""
    data = tmp_path / "data"
    shell = {
        **env,
        "COUNCIL_DATA": str(data),
        "COUNCIL_LLM_BASE_URL": "",
        "COUNCIL_LLM_API_KEY": "",
        "COUNCIL_MODELS": "",
        "OPENROUTER_API_KEY": "sk-or-v1-0a1b2c3d4e5f60718293a4b5",
    }
    shared = councils.local_council_path(shell)
    councils.write_local_council(shared, FOUR_MODELS, "sim/borealis", shell, council.sim.url)
    try:
        since = council.sim.log()["total"]
        code, checks, printed = await doctor(shell)
        assert code == 0, printed
        assert checks["provider default reachable"]["detail"] == (
            f"{council.sim.url} answers (GET /models: HTTP 200); the simulator of the make up "
            f"running on this Temporal server and task queue (from {shared}), as "
            "COUNCIL_LLM_BASE_URL is unset"
        )
        assert checks["provider default key"]["detail"] == (
            "no key (none set): accepted by a test call"
        )
        assert checks["default council"]["detail"].startswith(
            "sim/atlas, sim/borealis, sim/cirrus, sim/drift; chairman sim/borealis (from the "
            "make up running on this Temporal server and task queue)"
        )
        # The shell's OpenRouter key went nowhere.
        calls = council.sim.log(since)["entries"]
        assert calls and not any(call["authorized"] for call in calls)
        assert shell["OPENROUTER_API_KEY"] not in printed
        # COUNCIL_LLM_BASE_URL, when set, is the provider the worker there uses.
        assert default_source({**shell, "COUNCIL_LLM_BASE_URL": council.sim.url})[1] == (
            "from COUNCIL_LLM_BASE_URL"
        )
    finally:
        councils.remove_local_council(shared)
    # Once it stops, the default is OpenRouter again, and the doctor says why.
    assert default_source(shell) == (
        Settings.read(shell).llm,
        "OpenRouter, the default: COUNCIL_LLM_BASE_URL is unset and no make up on the "
        "simulator runs on this Temporal server and task queue",
    )


async def test_a_set_limit_is_a_pass_without_a_test(env: dict[str, str]) -> None:
    code, checks, _ = await doctor({**env, "COUNCIL_LLM_MAX_CONCURRENT_REQUESTS": "2"})
    assert code == 0
    assert checks["provider default concurrent requests"]["detail"] == (
        "at most 2 at once (COUNCIL_LLM_MAX_CONCURRENT_REQUESTS): Council queues the rest "
        "itself, so no test was made"
    )


@pytest.mark.parametrize(
    ("name", "setting"),
    [
        ("default", "COUNCIL_LLM_MAX_CONCURRENT_REQUESTS=1"),
        ("lan", "max_concurrent_requests = 1 in [providers.lan] of council.toml"),
    ],
)
async def test_a_server_that_answers_one_request_at_a_time_is_told_its_setting(
    name: str, setting: str
) -> None:
    """A server Council cannot tell is its own (say, one on a host name of the network)
    that answers one request at a time: the check finds it with two streamed requests and
    names the setting; one that answers several at once passes."""
    pace = parse_faults({"*": {"latency": 1.0}})
    check = CONCURRENT
    for slots in (1, None):
        with SimulatorServer(SimulatorConfig(slots=slots, faults=pace)) as server:
            settings = GatewaySettings(base_url=server.url)
            provider = Provider(name, settings, None, "x", "x", False, members=FOUR_MODELS)
            async with make_http_client(settings) as http:
                found = await measured_concurrency(provider, settings, http, "sim/atlas", check)
            await wait_until(lambda: not server.log()["in_flight"])
            log = server.log()
        if slots == 1:
            assert found.status == "failed", found
            assert found.detail.startswith(
                "the provider answers one request at a time: of two test requests to sim/atlas "
                "sent together, the second began only after the first had ended"
            )
            assert found.fix is not None and found.fix.startswith(f"set {setting}, ")
            assert log["total"] == 4  # seen in two pairs before it is said
        else:
            assert found.status == "ok", found
            assert found.detail == ("two test requests to sim/atlas were answered at the same time")
            # Both were closed once they had begun: nothing waited for the whole replies.
            assert log["total"] == 2
            assert {e["outcome"] for e in log["entries"]} == {"disconnected"}
        assert {e["stream"] for e in log["entries"]} == {True}


# ---- the page ---------------------------------------------------------------------------


async def test_the_page_shows_the_same_checks_and_keeps_its_token(
    temporal: Any, council: Council, env: dict[str, str], tmp_path: Path
) -> None:
    settings = {k: v for k, v in env.items() if k not in ("TEMPORAL_ADDRESS",)}
    with web_server(temporal, council, tmp_path, COUNCIL_WEB_TOKEN=WEB_TOKEN, **settings) as web:
        async with httpx.AsyncClient(base_url=web.url, timeout=60) as http:
            refused = await http.get("/doctor")
            assert refused.status_code == 403 and "/login" in refused.text
            shown = await http.get("/doctor", headers={"Authorization": f"Bearer {WEB_TOKEN}"})
            assert shown.status_code == 200
            page = shown.text
            assert 'id="doctor-verdict">Every check passed.' in page
            for name in NAMES:
                assert f'data-check="{name}" data-status="ok"' in page, name
            assert TEST_API_KEY not in page
            wrong_host = await http.get(
                "/doctor", headers={"Host": "evil.example", "Authorization": f"Bearer {WEB_TOKEN}"}
            )
            assert wrong_host.status_code == 400


async def test_the_no_provider_notice_links_to_the_checks(
    temporal: Any, page: Any, tmp_path: Path
) -> None:
    base = f"http://127.0.0.1:{free_port()}/v1"
    nobody = GatewaySettings(base_url=base, api_key=TEST_API_KEY)
    async with council_worker(temporal.client, None, settings=nobody) as council:
        retries = {"max_attempts": 4, "initial_retry_seconds": 0.5, "max_retry_seconds": 1}
        handle = await council.start(policy=retries)
        page_env = {"COUNCIL_LLM_BASE_URL": base, "COUNCIL_LLM_API_KEY": TEST_API_KEY}
        try:
            with web_server(temporal, council, tmp_path, **page_env) as web:
                await page.goto(f"{web.url}/deliberations/{handle.id}")
                link = page.locator("#no-provider a")
                await link.wait_for(timeout=20_000)
                assert await link.text_content() == "Check the setup"
                await link.click()
                await page.wait_for_url(f"{web.url}/doctor", timeout=60_000)
                row = page.locator('#checks tr[data-check="provider default reachable"]')
                assert await row.get_attribute("data-status") == "failed"
                text = await row.text_content() or ""
                assert f"{base} does not answer" in text and "COUNCIL_LLM_BASE_URL" in text
                assert "✗" in text
                verdict = await page.text_content("#doctor-verdict") or ""
                assert "each ✗ says what to fix" in verdict
                # The same checks as the command line's, in the same order.
                shown = await page.eval_on_selector_all(
                    "#checks tr[data-check]", "rows => rows.map(r => r.dataset.check)"
                )
                assert shown == NAMES
                assert TEST_API_KEY not in await page.content()
        finally:
            # Every member's calls fail, so the run may have ended by itself by now.
            with contextlib.suppress(RPCError):
                await handle.terminate()


async def test_the_tools_of_council_toml_are_asked_what_they_offer(
    env: dict[str, str], tmp_path: Path
) -> None:
    config = tmp_path / "tools.toml"
    config.write_text(
        f'[tools.calc]\ncommand = ["python", "{CALCULATOR}"]\n'
        '[tools.gone]\ncommand = ["no-such-tool-server"]\nmax_attempts = 1\n'
        f'[tools.notes]\ncommand = ["python", "{NOTEBOOK}"]\n'
        f'[tools.scribe]\ncommand = ["python", "{NOTEBOOK}", "--writes-only"]\n'
        "[tools.web_search]\n"
    )
    code, checks, _ = await doctor({**env, "COUNCIL_CONFIG": str(config)})
    assert code == 1
    assert checks["tool calc"]["status"] == "ok"
    assert checks["tool calc"]["detail"] == "2 tool(s) offered: calc__evaluate, calc__convert"
    # The tools an entry withholds, and why; an entry that offers none fails, with the fix.
    notes = checks["tool notes"]
    assert notes["status"] == "ok"
    assert notes["detail"] == (
        "1 tool(s) offered: notes__read_notes; withheld: notes__write_note (does not declare "
        "readOnlyHint; offered with side_effects = true or by naming it in allow); "
        "notes__erase_notes (declares itself not read-only (readOnlyHint false); offered with "
        "side_effects = true or by naming it in allow)"
    )
    scribe = checks["tool scribe"]
    assert scribe["status"] == "failed"
    assert scribe["detail"].startswith("no tool offered; withheld: scribe__write_note (")
    assert "side_effects = true in [tools.scribe] of " in scribe["fix"]
    assert "name them in its allow" in scribe["fix"]
    gone = checks["tool gone"]
    assert gone["status"] == "failed" and "no-such-tool-server" in gone["detail"]
    assert gone["fix"].startswith("check [tools.gone] in ")
    search = checks["tool web_search"]
    assert search["status"] == "failed" and "searxng_url" in search["fix"]
    # Without [tools] there is no tool check (the working setup's list is unchanged).
    assert not any(name.startswith("tool ") for name in (await doctor(env))[1])
