"""Who a run is for on the page, /v1 and MCP over HTTP: the principal (the token used, by
its name), never the session (app.access.principals, web.guard).

Before: every sign-in was a tenant of its own, so three sign-ins with one token and a
quota of 2 runs per caller started 6 runs (5 in the probe, which did not wait for
visibility between starts), and the call share multiplied alike; every /v1 and MCP client
with the token was one tenant. Now the sign-ins share the token's principal (2 runs, then
the quota's refusal), each named token (COUNCIL_WEB_TOKENS, COUNCIL_WEB_TOKENS_FILE) is a
principal of its own on every surface, and tries are limited per client address.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import httpx2
import openai
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from starlette.requests import Request
from temporalio.testing import WorkflowEnvironment

from app.access.principals import SHARED, Principal, Principals
from app.settings.environment import Settings, SettingsError
from app.store import store
from harness.processes import ROOT, Process, free_port, port_open, spawn
from runs import quota
from tests.temporal_fixtures import Council
from tests.web_fixtures import web_server
from web.app import NO_MCP_HERE
from web.guard import (
    MAX_FAILED_LOGINS,
    MAX_SIGN_INS,
    SESSION_COOKIE,
    Guard,
    client_key,
    principals_of,
)
from workflows import search_attributes

PAIR = "sim/atlas\nsim/borealis"


def token() -> str:
    return secrets.token_urlsafe(24)


async def counted(temporal: WorkflowEnvironment, tenant: str, runs: int) -> None:
    """Wait (at most 20 s) until visibility shows the tenant's runs started so far: what
    the quota counts."""
    deadline = asyncio.get_running_loop().time() + 20
    while (await quota.usage(temporal.client, tenant, 3600, runs + 1)).runs < runs:
        assert asyncio.get_running_loop().time() < deadline, "visibility never showed the runs"
        await asyncio.sleep(0.1)


async def fairness_key(temporal: WorkflowEnvironment, workflow: str) -> tuple[str, str | None]:
    """A run's fairness key and its CouncilTenant search attribute."""
    described = await temporal.client.get_workflow_handle(workflow).describe()
    key = described.raw_description.workflow_execution_info.priority.fairness_key
    return key, described.typed_search_attributes.get(search_attributes.TENANT)


async def history_text(temporal: WorkflowEnvironment, workflow: str) -> str:
    """The run's whole history as JSON, and every payload in it as stored (each reference
    read from the payload store)."""
    history = await temporal.client.get_workflow_handle(workflow).fetch_history()
    storage = store.external_storage()
    payloads = [p for event in history.events for p in store.payloads_in(event)]
    resolved = await store.resolve(storage, payloads, namespace=temporal.client.namespace)
    return history.to_json() + "\n".join(p.data.decode("utf-8", "replace") for p in resolved)


@asynccontextmanager
async def mcp_http(env: dict[str, str], log: Path) -> AsyncIterator[tuple[str, Process]]:
    """`starter.py mcp --http` on a free port with `env`: its endpoint and process."""
    port = free_port()
    command = [sys.executable, "starter.py", "mcp", "--http", f"127.0.0.1:{port}"]
    process = spawn("mcp", command, log, env)
    try:
        for _ in range(600):
            if port_open("127.0.0.1", port) or not process.alive():
                break
            await asyncio.sleep(0.05)
        assert port_open("127.0.0.1", port), process.log_text()
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.stop()


async def mcp_start(url: str, given: str, question: str) -> Any:
    """start_deliberation over HTTP with the mcp SDK's client, as `given`'s holder."""
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {given}"}, timeout=30) as http,
        Client(streamable_http_client(url, http_client=http)) as client,
    ):
        return await client.call_tool("start_deliberation", {"question": question, "max_rounds": 1})


# ---- the tenant is the principal, never the session ----------------------------------------


async def test_sign_ins_with_one_token_share_its_tenant_and_quota(
    temporal: WorkflowEnvironment, council: Council, tmp_path: Path
) -> None:
    """Three sign-ins with one token, each trying two starts, with a quota of 2 runs per
    caller: 2 runs start (before: 6), the other tries are the quota's refusal, and both
    runs are the token's principal's. (A named token of this test's own, whose only runs
    are this test's: COUNCIL_WEB_TOKEN's principal, `shared`, is every test's that uses it;
    its sessions are one tenant alike: test_every_session_of_a_principal_is_its_tenant.)"""
    name, secret = f"team-{uuid.uuid4().hex[:8]}", token()
    queue = f"nobody-{uuid.uuid4().hex[:8]}"  # no worker: the runs wait, and count
    env = {
        "COUNCIL_WEB_TOKENS": f"{name}={secret}",
        "COUNCIL_QUOTA_RUNS": "2",
        "COUNCIL_TASK_QUEUE": queue,
    }
    started: list[str] = []
    refusals: list[str] = []
    sessions = set()
    with web_server(temporal, council, tmp_path, **env) as web:
        for sign_in in range(3):
            async with httpx.AsyncClient(base_url=web.url, timeout=30) as http:
                assert (await http.post("/login", data={"token": secret})).status_code == 303
                sessions.add(http.cookies[SESSION_COOKIE])
                for attempt in range(2):
                    form = {"question": f"Run {sign_in}.{attempt}?", "models": PAIR}
                    answer = await http.post("/deliberations", data=form)
                    if answer.status_code == 303:
                        started.append(answer.headers["location"].rsplit("/", 1)[-1])
                        # What the quota counts shows it before the next try.
                        await counted(temporal, name, len(started))
                    else:
                        assert answer.status_code == 429, answer.text[:300]
                        refusals.append(answer.text)
    try:
        assert (len(sessions), len(started), len(refusals)) == (3, 2, 4)
        assert all("of at most 2 per caller (COUNCIL_QUOTA_RUNS)" in r for r in refusals)
        for workflow in started:
            assert await fairness_key(temporal, workflow) == (name, name)
            assert secret not in await history_text(temporal, workflow)
    finally:
        for workflow in started:
            await temporal.client.get_workflow_handle(workflow).terminate("test over")


async def test_each_named_token_is_a_principal_of_its_own_on_every_surface(
    temporal: WorkflowEnvironment, council: Council, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """alice (COUNCIL_WEB_TOKENS), bob and carol (a file of them, COUNCIL_WEB_TOKENS_FILE),
    with a quota of one run each: alice's run from the page spends her quota on /v1 and
    MCP as well; bob's through /v1 and carol's through MCP are their own. Each run's
    fairness key and CouncilTenant is its principal's name; no token is in a history, the
    payload store's texts or a log."""
    suffix = uuid.uuid4().hex[:6]
    alice, bob, carol = (f"{name}-{suffix}" for name in ("alice", "bob", "carol"))
    tokens = {name: token() for name in (alice, bob, carol)}
    listed = tmp_path / "tokens"
    listed.write_text(
        f"# the team's API callers\n{bob} = {tokens[bob]}\n\n{carol}={tokens[carol]}\n"
    )
    env = {
        "COUNCIL_WEB_TOKENS": f"{alice}={tokens[alice]}",
        "COUNCIL_WEB_TOKENS_FILE": str(listed),
        "COUNCIL_QUOTA_RUNS": "1",
    }
    runs: dict[str, str] = {}
    with web_server(temporal, council, tmp_path, **env) as web:
        async with mcp_http({**cli_env, **env}, tmp_path / "mcp.log") as (url, mcp):
            async with httpx.AsyncClient(base_url=web.url, timeout=30) as http:
                assert (await http.post("/login", data={"token": tokens[alice]})).status_code == 303
                form = {"question": "Alice's?", "models": PAIR, "max_rounds": "1"}
                answer = await http.post("/deliberations", data=form)
                assert answer.status_code == 303, answer.text[:300]
                runs[alice] = answer.headers["location"].rsplit("/", 1)[-1]
            await counted(temporal, alice, 1)

            def api(name: str) -> openai.AsyncOpenAI:
                return openai.AsyncOpenAI(
                    base_url=f"{web.url}/v1", api_key=tokens[name], max_retries=0, timeout=120
                )

            asked = {"model": "council", "extra_body": {"council": {"max_rounds": 1}}}
            async with api(alice) as client:
                with pytest.raises(openai.RateLimitError) as over:
                    await client.chat.completions.create(
                        messages=[{"role": "user", "content": "Alice again?"}], **asked
                    )
            assert isinstance(over.value.body, dict)
            assert over.value.body["code"] == "quota_exceeded"
            refused = await mcp_start(url, tokens[alice], "Alice over MCP?")
            assert refused.is_error and "quota reached" in str(refused.content)

            async with api(bob) as client:
                answered = await client.chat.completions.create(
                    messages=[{"role": "user", "content": "Bob's?"}], **asked
                )
            runs[bob] = answered.id
            started = await mcp_start(url, tokens[carol], "Carol's?")
            assert not started.is_error, started.content
            assert isinstance(started.structured_content, dict)
            runs[carol] = started.structured_content["id"]
            await council.client.get_workflow_handle(runs[carol]).result()
            await council.client.get_workflow_handle(runs[alice]).result()
            logs = web.log() + mcp.log_text()

    texts = "".join([logs, *[await history_text(temporal, run) for run in runs.values()]])
    for name, workflow in runs.items():
        assert await fairness_key(temporal, workflow) == (name, name)
    for name, secret in tokens.items():
        assert secret not in texts, f"{name}'s token reached a history or a log"
        assert secret[:12] not in texts


# ---- sign-in attempts --------------------------------------------------------------------


async def test_sign_ins_are_limited_whatever_their_outcome(
    temporal: WorkflowEnvironment, council: Council, tmp_path: Path
) -> None:
    shared = token()
    with web_server(temporal, council, tmp_path, COUNCIL_WEB_TOKEN=shared) as web:
        async with httpx.AsyncClient(base_url=web.url, timeout=30) as http:
            codes = [
                (await http.post("/login", data={"token": shared})).status_code
                for _ in range(MAX_SIGN_INS + 1)
            ]
            again = await http.post("/login", data={"token": shared})
    assert codes == [303] * MAX_SIGN_INS + [429]
    assert again.status_code == 429 and int(again.headers["retry-after"]) > 0
    assert "too many sign-ins from this address" in again.text


async def test_wrong_bearers_count_as_failed_sign_ins_on_every_route(
    temporal: WorkflowEnvironment, council: Council, tmp_path: Path
) -> None:
    """A bearer is a sign-in on each request: wrong ones on /v1 count as failed sign-ins,
    and past the limit every try from the address is a 429, the right token too (else the
    API would answer guesses without end)."""
    shared = token()
    with web_server(temporal, council, tmp_path, COUNCIL_WEB_TOKEN=shared) as web:
        for n in range(MAX_FAILED_LOGINS):
            async with openai.AsyncOpenAI(
                base_url=f"{web.url}/v1", api_key=f"guess-{n}", max_retries=0
            ) as wrong:
                with pytest.raises(openai.AuthenticationError):
                    await wrong.models.list()
        async with openai.AsyncOpenAI(
            base_url=f"{web.url}/v1", api_key=shared, max_retries=0
        ) as right:
            with pytest.raises(openai.RateLimitError) as locked:
                await right.models.list()
        async with httpx.AsyncClient(base_url=web.url, timeout=30) as http:
            page = await http.get("/", headers={"Authorization": f"Bearer {shared}"})
            sign_in = await http.post("/login", data={"token": shared})
    assert isinstance(locked.value.body, dict)
    assert locked.value.body["code"] == "too_many_failed_tokens"
    assert str(locked.value.body["message"]).startswith("too many failed sign-ins")
    assert page.status_code == 429 and int(page.headers["retry-after"]) > 0
    assert sign_in.status_code == 429 and "council_session" not in sign_in.cookies


# ---- where MCP is served ---------------------------------------------------------------------


async def test_mcp_is_served_by_its_own_server_and_the_page_says_so(
    temporal: WorkflowEnvironment, council: Council, cli_env: dict[str, str], tmp_path: Path
) -> None:
    """`starter.py mcp --http HOST:PORT` serves MCP at http://HOST:PORT/mcp: with a token,
    the SDK's client lists the tools; without, a 401. The page's server serves no MCP: its
    /mcp is a 404 that says where MCP is, with the token or without."""
    shared = token()
    with web_server(temporal, council, tmp_path, COUNCIL_WEB_TOKEN=shared) as web:
        async with httpx.AsyncClient(base_url=web.url, timeout=30) as http:
            for headers in ({}, {"Authorization": f"Bearer {shared}"}):
                for method in ("GET", "POST"):
                    answer = await http.request(method, "/mcp", headers=headers, json={})
                    assert answer.status_code == 404 and answer.text == NO_MCP_HERE
    async with mcp_http({**cli_env, "COUNCIL_WEB_TOKEN": shared}, tmp_path / "mcp.log") as (
        url,
        _,
    ):
        assert url.endswith("/mcp")
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {shared}"}, timeout=30) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            assert "ask_council" in {tool.name for tool in (await client.list_tools()).tools}
        async with httpx.AsyncClient(timeout=30) as http:
            initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
            refused = await http.post(url, json=initialize)
            elsewhere = await http.post(
                url.removesuffix("/mcp") + "/", headers={"Authorization": f"Bearer {shared}"}
            )
        assert refused.status_code == 401 and refused.headers["www-authenticate"] == "Bearer"
        assert elsewhere.status_code == 404


# ---- the settings ---------------------------------------------------------------------------


@pytest.mark.fast
@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"COUNCIL_WEB_TOKENS": "alice"}, "COUNCIL_WEB_TOKENS: entry 1 must be NAME=TOKEN"),
        (
            {"COUNCIL_WEB_TOKENS": "a=aaaaaaaaaaaaaaaaaaaa,bob=short"},
            "COUNCIL_WEB_TOKENS: entry 2: its token must be at least 16 printable ASCII",
        ),
        (
            {"COUNCIL_WEB_TOKENS": "two words=aaaaaaaaaaaaaaaaaaaa"},
            "COUNCIL_WEB_TOKENS: entry 1: its name must be 1 to 32 letters, digits and - _ .",
        ),
        (
            {"COUNCIL_WEB_TOKENS": "alice=aaaaaaaaaaaaaaaaaaaa,bob=aaaaaaaaaaaaaaaaaaaa"},
            "COUNCIL_WEB_TOKENS: bob has the same token as alice: give each its own",
        ),
        (
            {"COUNCIL_WEB_TOKENS": "alice=aaaaaaaaaaaaaaaaaaaa,alice=bbbbbbbbbbbbbbbbbbbb"},
            "COUNCIL_WEB_TOKENS: the name alice is given twice: each name once",
        ),
        (
            {"COUNCIL_WEB_TOKENS": "batch=aaaaaaaaaaaaaaaaaaaa"},
            "COUNCIL_WEB_TOKENS: the name batch is taken (the tenant of batch work)",
        ),
        (
            {
                "COUNCIL_WEB_TOKEN": "aaaaaaaaaaaaaaaaaaaa",
                "COUNCIL_WEB_TOKENS": "a=aaaaaaaaaaaaaaaaaaaa",
            },
            "COUNCIL_WEB_TOKENS: a has the same token as COUNCIL_WEB_TOKEN",
        ),
        (
            {"COUNCIL_WEB_TOKENS_FILE": "/nonexistent/tokens"},
            "COUNCIL_WEB_TOKENS_FILE cannot read /nonexistent/tokens: No such file or directory",
        ),
    ],
)
def test_named_tokens_that_cannot_be_used_are_refused_in_one_line(
    env: dict[str, str], said: str
) -> None:
    with pytest.raises(SettingsError) as refused:
        Settings.read(env)
    line = str(refused.value)
    assert line.startswith(said) and "\n" not in line
    assert "aaaaaaaaaaaaaaaa" not in line and "bbbbbbbbbbbbbbbb" not in line and "short" not in line


@pytest.mark.fast
def test_a_file_of_named_tokens_is_read_beside_the_list(tmp_path: Path) -> None:
    listed = tmp_path / "tokens"
    listed.write_text("# callers\n\nbob = bbbbbbbbbbbbbbbbbbbb==\n carol=cccccccccccccccccccc\n")
    settings = Settings.read(
        {
            "COUNCIL_WEB_TOKEN": "the-team-token",
            "COUNCIL_WEB_TOKENS": "alice=aaaaaaaaaaaaaaaaaaaa",
            "COUNCIL_WEB_TOKENS_FILE": str(listed),
        }
    )
    principals = principals_of(settings)
    assert [p.name for p in principals] == [SHARED, "alice", "bob", "carol"]
    assert principals.matching("bbbbbbbbbbbbbbbbbbbb==") == Principal(
        "bob", "bbbbbbbbbbbbbbbbbbbb=="
    )
    assert principals.matching("bbbbbbbbbbbbbbbbbbbb") is None
    assert {"the-team-token", "aaaaaaaaaaaaaaaaaaaa", "cccccccccccccccccccc"} <= set(
        settings.secrets()
    )
    shown = repr(settings) + repr(principals)
    assert "aaaaaaaa" not in shown and "bbbbbbbb" not in shown and "the-team" not in shown
    # The same name in the list and the file: refused, naming the file.
    listed.write_text("alice=dddddddddddddddddddd\n")
    with pytest.raises(SettingsError, match=r"^COUNCIL_WEB_TOKENS_FILE: the name alice is given"):
        Settings.read(
            {
                "COUNCIL_WEB_TOKENS": "alice=aaaaaaaaaaaaaaaaaaaa",
                "COUNCIL_WEB_TOKENS_FILE": str(listed),
            }
        )


@pytest.mark.parametrize("program", ["web", "mcp"])
async def test_the_servers_refuse_named_tokens_that_cannot_be_used_at_start(program: str) -> None:
    command = ["-m", "web"] if program == "web" else ["starter.py", "mcp", "--http", "127.0.0.1:1"]
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        *command,
        cwd=ROOT,
        env={**os.environ, "COUNCIL_WEB_TOKENS": "alice=short", "TEMPORAL_ADDRESS": "127.0.0.1:1"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(process.communicate(), 60)
    line = err.decode()
    assert process.returncode == 2
    prefix = "web" if program == "web" else "starter"
    assert line.startswith(f"{prefix}: COUNCIL_WEB_TOKENS: entry 1: its token must be "), line
    assert line.count("\n") == 1


# ---- the guard's rules ------------------------------------------------------------------------


def request_from(host: str, cookie: str | None = None, bearer: str | None = None) -> Request:
    headers = []
    if cookie is not None:
        headers.append((b"cookie", f"{SESSION_COOKIE}={cookie}".encode()))
    if bearer is not None:
        headers.append((b"authorization", f"Bearer {bearer}".encode()))
    scope = {"type": "http", "method": "GET", "path": "/", "headers": headers, "client": (host, 1)}
    return Request(scope)


@pytest.mark.fast
def test_every_session_of_a_principal_is_its_tenant_and_only_its_key_signs_it() -> None:
    alice, bob = Principal("alice", "a" * 20), Principal("bob", "b" * 20)
    guard = Guard(("localhost",), Principals.of("the-team-token", [alice, bob]))
    sessions = [guard.new_session(alice) for _ in range(3)]
    assert len(set(sessions)) == 3
    assert {guard.tenant(request_from("10.0.0.1", cookie=s)) for s in sessions} == {"alice"}
    assert guard.tenant(request_from("10.0.0.2", bearer="a" * 20)) == "alice"
    assert guard.tenant(request_from("10.0.0.3", bearer="the-team-token")) == SHARED
    [shared] = [p for p in guard.principals if p.name == SHARED]
    team = {guard.tenant(request_from("10.0.0.4", cookie=guard.new_session(shared))) for _ in "ab"}
    assert team == {SHARED}
    # A session that names bob, signed with alice's key: nobody's.
    body = sessions[0].rpartition(".")[0].removesuffix(".alice") + ".bob"
    forged = f"{body}.{guard._signature(body, alice)}"
    assert guard.session_principal(forged) is None
    assert guard.session_principal(f"{body}.{guard._signature(body, bob)}") == bob
    # A new token for alice signs her sessions out.
    renewed = Guard(("localhost",), Principals.of(None, [Principal("alice", "c" * 20), bob]))
    assert renewed.session_principal(sessions[0]) is None
    # Without tokens, the client's address (a digest) is the tenant.
    open_guard = Guard(("localhost",))
    assert open_guard.tenant(request_from("10.0.0.1")).startswith("address:")


@pytest.mark.fast
def test_an_ipv6_client_is_limited_by_its_network() -> None:
    def key(host: str) -> str:
        return client_key(request_from(host))

    assert key("2001:db8:1:2::1") == key("2001:db8:1:2:ffff::9") == "2001:db8:1:2::/64"
    assert key("2001:db8:1:3::1") != key("2001:db8:1:2::1")
    assert key("::ffff:10.0.0.1") == key("10.0.0.1") == "10.0.0.1"


@pytest.mark.fast
def test_the_tries_of_a_client_are_forgotten_once_their_window_passed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from web import guard as rules

    now = [1000.0]
    guard = Guard(("localhost",), Principals.of("the-team-token"), clock=lambda: now[0])
    monkeypatch.setattr(rules, "MAX_CLIENTS_KEPT", 3)
    for _ in range(MAX_FAILED_LOGINS):
        guard.sign_in_failed("10.0.0.9")
    assert guard.sign_in_wait("10.0.0.9") == rules.LOGIN_WINDOW_SECONDS
    for n in range(2):
        guard.sign_in_failed(f"10.0.0.{n}")
    now[0] += rules.LOGIN_WINDOW_SECONDS + 1
    assert guard.sign_in_wait("10.0.0.9") == 0
    guard.sign_in_failed("10.0.1.1")
    assert set(guard._failures) == {"10.0.1.1"}
