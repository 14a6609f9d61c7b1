"""Reading behind the access token (web.guard): with COUNCIL_WEB_TOKEN set, the list, each
run, its record, its live stream, its files and /statuses answer only with the token (a
bearer token, or the sign-in's session; a browser is sent to /login and back), unless
COUNCIL_WEB_PUBLIC_READ opens reading on purpose. Through httpx against `python -m web`,
and the sign-in in Chromium."""

from __future__ import annotations

import asyncio
import functools
import hashlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from runs import finding
from tests.attachment_files import pdf
from tests.temporal_fixtures import FOUR_MODELS, Council
from tests.web_fixtures import WEB_TOKEN, WebServer, web_server
from web.guard import MAX_FAILED_LOGINS, SESSION_COOKIE, sign_in_target

BEARER = {"Authorization": f"Bearer {WEB_TOKEN}"}


@functools.cache
def report() -> bytes:
    """The PDF the runs attach (drawn once, when a test first needs it)."""
    return pdf("Quarterly revenue rose 12 percent")


@pytest.fixture
def web_public_read(temporal: Any, council: Council, tmp_path: Path) -> Iterator[WebServer]:
    env = {"COUNCIL_WEB_TOKEN": WEB_TOKEN, "COUNCIL_WEB_PUBLIC_READ": "1"}
    with web_server(temporal, council, tmp_path, **env) as server:
        yield server


async def finished_run(web: WebServer, council: Council) -> str:
    """A run started through the page with the token, a PDF attached, once it has ended."""
    async with httpx.AsyncClient(base_url=web.url, timeout=60, headers=BEARER) as http:
        started = await http.post(
            "/deliberations",
            data={"question": "What does the report say?", "models": "\n".join(FOUR_MODELS[:3])},
            files={"attachments": ("report.pdf", report(), "application/pdf")},
        )
    assert started.status_code == 303, started.text[:300]
    workflow = started.headers["location"].rsplit("/", 1)[-1]
    await asyncio.wait_for(finding.handle(council.client, workflow).result(), 60)
    return workflow


def read_routes(workflow: str) -> list[str]:
    sha = hashlib.sha256(report()).hexdigest()
    run = f"/deliberations/{workflow}"
    return [
        "/",
        run,
        f"{run}/record.json",
        f"{run}/record.md",
        f"{run}/stream",
        f"{run}/attachments/{sha}",
        f"{run}/attachments/{sha}/text",
        f"/statuses?id={workflow}",
    ]


async def status_of(http: httpx.AsyncClient, path: str, **headers: str) -> int:
    """The status a GET of `path` answers (the live stream's too, without reading it)."""
    async with http.stream("GET", path, headers=headers) as answer:
        return answer.status_code


async def test_with_a_token_every_read_needs_it(
    web_with_token: WebServer, council: Council
) -> None:
    """Before: each of these answered 200 without the token (the run's question, answers,
    record and attached files to anyone who could reach the page)."""
    web = web_with_token
    workflow = await finished_run(web, council)
    async with httpx.AsyncClient(base_url=web.url, timeout=60) as http:
        for path in read_routes(workflow):
            assert await status_of(http, path) == 403, path
            assert await status_of(http, path, Accept="text/html") == 303, path
            assert await status_of(http, path, **BEARER) == 200, path
        refused = await http.get(f"/deliberations/{workflow}/record.json")
        assert refused.text.startswith("this server needs its access token to read")
        assert "What does the report say" not in refused.text
        # A browser is sent to the sign-in, which leads back to where it was going.
        sent = await http.get(f"/deliberations/{workflow}", headers={"Accept": "text/html"})
        assert sent.headers["location"] == f"/login?next=%2Fdeliberations%2F{workflow}"
        assert (await http.get(sent.headers["location"])).status_code == 200
        assert (await http.get("/static/council.js")).status_code == 200
        signed_in = await http.post(
            "/login", data={"token": WEB_TOKEN, "next": f"/deliberations/{workflow}"}
        )
        assert signed_in.status_code == 303
        assert signed_in.headers["location"] == f"/deliberations/{workflow}"
        assert SESSION_COOKIE in http.cookies
        for path in read_routes(workflow):
            assert await status_of(http, path) == 200, path
    # A wrong token reads nothing either; each is a failed sign-in of the address, which is
    # refused every try once past their limit.
    async with httpx.AsyncClient(base_url=web.url, timeout=60) as http:
        codes = [
            await status_of(http, path, Authorization="Bearer guess")
            for path in read_routes(workflow)
        ]
    assert codes == [403] * MAX_FAILED_LOGINS + [429] * (len(codes) - MAX_FAILED_LOGINS)


async def test_public_reading_is_a_setting_of_its_own(
    web_public_read: WebServer, council: Council
) -> None:
    web = web_public_read
    workflow = await finished_run(web, council)
    async with httpx.AsyncClient(base_url=web.url, timeout=60) as http:
        for path in read_routes(workflow):
            assert await status_of(http, path) == 200, path
        # Writing still needs the token.
        stop = await http.post(f"/deliberations/{workflow}/stop")
        assert stop.status_code == 403 and "/login" in stop.text


async def test_a_browser_signs_in_and_comes_back_to_the_run(
    web_with_token: WebServer, council: Council, page: Any
) -> None:
    web = web_with_token
    workflow = await finished_run(web, council)
    await page.goto(f"{web.url}/deliberations/{workflow}")
    assert page.url.startswith(f"{web.url}/login?next=")
    await page.fill("#token", WEB_TOKEN)
    async with page.expect_navigation():
        await page.click("button[type=submit]")
    assert page.url == f"{web.url}/deliberations/{workflow}"
    assert "What does the report say?" in await page.content()


@pytest.mark.fast
def test_the_sign_in_leads_back_only_to_this_server() -> None:
    assert sign_in_target("/deliberations/council-1?x=1") == "/deliberations/council-1?x=1"
    for elsewhere in ("https://evil.example/", "//evil.example/", "/\\evil.example", "", None):
        assert sign_in_target(elsewhere) == "/", elsewhere
    assert sign_in_target("/\nSet-Cookie: x") == "/"
