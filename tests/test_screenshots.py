"""The screenshots of the README and docs/web.md, taken by the test suite's browser from
the page as it is: the list with the start form, a two-turn conversation and a
deliberation being written, at 1280 px (desktop) and 390 px (phone). Each run of the suite
writes them again to docs/screenshots/. The page runs on a Temporal server of its own, so
that only these deliberations show."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from temporalio.client import Client
from temporalio.contrib.pydantic import pydantic_data_converter

from council.validation import validate_request
from harness.processes import ROOT, free_port, start_temporal
from runs import starting
from runs.attributes import ensure_search_attributes
from simulator import SimulatorServer
from tests.temporal_fixtures import ask, council_worker, request
from tests.web_fixtures import web_server

SCREENSHOTS = ROOT / "docs" / "screenshots"
VIEWPORTS = {
    "desktop": {"viewport": {"width": 1280, "height": 1000}},
    "phone": {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True},
}
FIRST = "Should a small team use SQLite or PostgreSQL for a new web app?"
SECOND = "And when would PostgreSQL be the better choice?"


def is_png(path: Path) -> bool:
    return path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 10_000


async def test_the_readme_screenshots_come_from_the_page(
    temporal: Any, sim: SimulatorServer, browser: Any, tmp_path: Path
) -> None:
    server = start_temporal(None, port=free_port(), ui_port=None)
    try:
        address = server.extra["address"]
        client = await Client.connect(address, data_converter=pydantic_data_converter)
        await ensure_search_attributes(client)
        async with council_worker(client, sim) as council:
            first, _ = await ask(council, FIRST)
            await ask(council, SECOND, follow_up_of=first.id)
            with web_server(
                temporal, council, tmp_path, TEMPORAL_ADDRESS=address, COUNCIL_SIMULATED="1"
            ) as web:
                written = await take(web.url, browser, council, first.id)
    finally:
        server.stop()
    assert all(is_png(path) for path in written), written


async def take(url: str, browser: Any, council: Any, conversation: str) -> list[Path]:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    written = []
    for name, options in VIEWPORTS.items():
        context = await browser.new_context(**options)
        page = await context.new_page()
        await page.goto(url)
        written.append(SCREENSHOTS / f"list-{name}.png")
        await page.screenshot(path=str(written[-1]))
        await page.goto(f"{url}/deliberations/{conversation}")
        written.append(SCREENSHOTS / f"conversation-{name}.png")
        await page.screenshot(path=str(written[-1]), full_page=name == "desktop")
        await context.close()

    # A deliberation being written: two answers in, the others streaming.
    council.sim.set_faults(
        {"*": {"latency": 4}, "sim/atlas": {"latency": 1.2}, "sim/borealis": {"latency": 2}}
    )
    wanted = validate_request(request("Which message queue fits a small team?", max_rounds=1))
    handle = await starting.start(council.client, wanted, council.task_queue)
    context = await browser.new_context(viewport={"width": 1280, "height": 1300})
    page = await context.new_page()
    await page.goto(f"{url}/deliberations/{handle.id}")
    await page.wait_for_function(
        "() => document.querySelectorAll('#answers article.answer').length >= 2"
        " && document.querySelector('article.writing .partial')",
        timeout=20_000,
    )
    written.append(SCREENSHOTS / "running-desktop.png")
    await page.screenshot(path=str(written[-1]))
    await context.close()
    await handle.terminate()
    return written
