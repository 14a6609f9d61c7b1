"""`starter.py doctor` as a user runs it (a subprocess), and the page's /doctor, against the
session's dev server, an in-process worker and the simulator over HTTP: every ✓ on a
working setup, and each thing that can be wrong found, with its fix."""

from __future__ import annotations

import asyncio
import json
import shlex
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from activities.settings import GatewaySettings
from harness.processes import free_port, temporal_binary
from simulator import SimulatorConfig, SimulatorServer
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
    "payload store",
    "council.toml",
    "provider default reachable",
    "provider default key",
    "provider default models",
    "provider default context window",
    "provider default structured output",
    "provider default images",
    "default council",
]
KEYED_KEY = "sk-keyed-provider-9b2e41c7d0"


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
    for name in ("namespace", "search attributes", "worker"):
        assert checks[name]["status"] == "skipped"
        assert checks[name]["detail"] == "skipped: the server does not answer"
    # The model side is checked all the same.
    assert all(checks[name]["status"] == "ok" for name in NAMES[4:])
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
        "CouncilTerminationReason, CouncilThread, CouncilAgreement"
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
    for part in ("key", "models", "context window", "structured output", "images"):
        check = checks[f"provider default {part}"]
        assert check["status"] == "skipped", check
        assert check["detail"] == "skipped: the provider does not answer"
    assert checks["default council"]["status"] == "skipped"
    assert all(checks[name]["status"] == "ok" for name in NAMES[:5])
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
            await handle.terminate()
