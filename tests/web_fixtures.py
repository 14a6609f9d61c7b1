"""Web page fixtures, loaded by tests/conftest.py as a pytest plugin.

- `web`: `python -m web` as a user runs it, on a free port, against the test dev server
  and the test's worker (the `council` fixture's task queue) and simulator.
- `web_with_token`: the same with COUNCIL_WEB_TOKEN set.
- `browser`: Debian's chromium driven by Playwright (one for the session); the tests that
  need it are skipped, saying why, where there is no chromium or no Playwright.
- `page`: a fresh page in that browser, which fails the test on a script error.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from harness.processes import Process, free_port, port_open, spawn, start_temporal, wait_for
from tests.temporal_fixtures import FOUR_MODELS, Council, temporal_address

CHROMIUM = "/usr/bin/chromium"
# Chromium as root, headless, without reaching for the network on its own.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WEB_TOKEN = "web-test-token-8c1d"
# Every script a page may hold: its own files, none inline.
PAGE_SCRIPTS = {"/static/council.js", "/static/vendor/idiomorph-0.8.0.js"}


@dataclass
class WebServer:
    url: str
    process: Process
    extra: dict[str, str] = field(default_factory=dict)

    def log(self) -> str:
        return self.process.log_text()


def web_process(port: int, log_path: Path, env: dict[str, str]) -> Process:
    """`python -m web --port PORT` as a user starts it, its output in `log_path` (forked in
    the suite from a process that has made the imports already: tests/forked_cli.py)."""
    return spawn("web", [sys.executable, "-m", "web", "--port", str(port)], log_path, env)


@contextmanager
def web_server(temporal: Any, council: Council, tmp: Path, **env: str) -> Iterator[WebServer]:
    port = free_port()
    process = web_process(
        port,
        tmp / "web.log",
        {
            "TEMPORAL_ADDRESS": temporal_address(temporal),
            "COUNCIL_TASK_QUEUE": council.task_queue,
            "COUNCIL_MODELS": ",".join(FOUR_MODELS),
            **env,
        },
    )
    try:
        wait_for(lambda: port_open("127.0.0.1", port), "web page", process, timeout=30)
        yield WebServer(f"http://127.0.0.1:{port}", process)
    finally:
        process.stop()


@pytest.fixture
def web_without_temporal(tmp_path: Path) -> Iterator[WebServer]:
    """`python -m web` on a Temporal server of its own, stopped once the page is up (its
    address in `extra["temporal"]`)."""
    port = free_port()
    server = start_temporal(None, port=port, ui_port=None)
    web_port = free_port()
    process = web_process(web_port, tmp_path / "web.log", {"TEMPORAL_ADDRESS": f"127.0.0.1:{port}"})
    try:
        wait_for(lambda: port_open("127.0.0.1", web_port), "web page", process, timeout=30)
        server.stop()
        yield WebServer(f"http://127.0.0.1:{web_port}", process, {"temporal": f"127.0.0.1:{port}"})
    finally:
        process.stop()
        server.stop()


@pytest.fixture
def web(temporal: Any, council: Council, tmp_path: Path) -> Iterator[WebServer]:
    with web_server(temporal, council, tmp_path) as server:
        yield server


@pytest.fixture
def web_with_token(temporal: Any, council: Council, tmp_path: Path) -> Iterator[WebServer]:
    with web_server(temporal, council, tmp_path, COUNCIL_WEB_TOKEN=WEB_TOKEN) as server:
        yield server


def _why_no_browser() -> str | None:
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        return "no chromium: install Debian's chromium package (make test does, as root)"
    try:
        import playwright.async_api  # noqa: F401
    except ImportError:
        return "no Playwright: pip install -r requirements-dev.txt"
    return None


@pytest.fixture(scope="session")
async def browser() -> AsyncIterator[Any]:
    reason = _why_no_browser()
    if reason:
        pytest.skip(f"browser tests skipped: {reason}")
    from playwright.async_api import async_playwright

    executable = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")  # noqa: ASYNC240
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@pytest.fixture
async def page(browser: Any) -> AsyncIterator[Any]:
    context = await browser.new_context(viewport={"width": 1200, "height": 900})
    opened = await context.new_page()
    errors: list[str] = []
    opened.on("pageerror", lambda error: errors.append(str(error)))
    yield opened
    await context.close()
    assert errors == [], f"script errors on the page: {errors}"
