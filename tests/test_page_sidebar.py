"""The sidebar's recent conversations, in a real browser: another run's entry follows that
run to its end while the page stays open (the page asks for every entry's state in one
request), and an evaluation's runs are not among them (the list of every deliberation
still has them)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx

from council.ids import EVALUATION_ID_PREFIX
from council.validation import validate_request
from runs import finding, starting, steering
from tests.temporal_fixtures import Council, request
from tests.web_fixtures import WebServer


async def test_another_runs_entry_follows_it_and_evaluation_runs_stay_out(
    web: WebServer, page: Any, council: Council
) -> None:
    here = await council.run("Which database suits a small shop?", max_rounds=1)
    council.sim.set_faults({"*": {"latency": 3}})
    others = [
        await council.start(f"Which {thing} suits a small shop?", max_rounds=1)
        for thing in ("queue", "cache")
    ]
    evaluation = await starting.start(
        council.client,
        validate_request(request("Which CDN suits a small shop?", max_rounds=1)),
        council.task_queue,
        id=f"{EVALUATION_ID_PREFIX}sample-{uuid.uuid4().hex[:8]}-q1",
    )
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url) if "/statuses" in r.url else None)
    await page.goto(f"{web.url}/deliberations/{here.id}")
    await page.evaluate("window.__notReloaded = true")
    for other in others:
        entry = page.locator(f'#threads li[data-id="{other.id}"] .thread-status')
        assert await entry.text_content() == "running"
    assert await page.locator(f'#threads li[data-id="{here.id}"]').count() == 1
    assert await page.locator(f'#threads li[data-id="{evaluation.id}"]').count() == 0

    for other in others:
        await steering.stop(await finding.find(council.client, other.id), "enough")
    for other in others:
        await page.wait_for_function(
            "s => document.querySelector(s)?.textContent === 'stopped'",
            arg=f'#threads li[data-id="{other.id}"] .thread-status',
            timeout=30_000,
        )
    assert await page.evaluate("window.__notReloaded") is True
    # One request for every entry under way, never one per entry.
    both = [url for url in requests if all(o.id in url for o in others)]
    assert both, requests

    # The list of every deliberation has the evaluation's run.
    await page.goto(web.url)
    assert await page.locator(f'#runs tr[data-id="{evaluation.id}"]').count() == 1
    await evaluation.terminate("test over")


async def test_the_states_of_runs_by_id_and_a_bad_ask_in_one_line(
    web: WebServer, council: Council
) -> None:
    record = await council.run("Is a monolith fine to start with?", max_rounds=1)
    async with httpx.AsyncClient(base_url=web.url) as http:
        got = await http.get("/statuses", params=[("id", record.id), ("id", "no-such-run")])
        assert got.status_code == 200
        assert got.json() == {"statuses": {record.id: "completed"}}
        bad = await http.get("/statuses", params={"id": "../etc"})
        assert bad.status_code == 400
        assert bad.text.startswith("id: 0 to 50 deliberation ids, each 1 to 200 characters")
        many = await http.get("/statuses", params=[("id", f"run-{n}") for n in range(51)])
        assert many.status_code == 400
