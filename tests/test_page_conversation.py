"""A thread reads as a conversation, in a real browser: each question with its final answer
first and the council's work folded under it, newest at the bottom, and a box at the
bottom that asks the next question as a follow-up carrying the earlier answers. A refused
form shows every error beside its field, in the words of its labels, the first focused
and in view, the input kept, and the address still answers a reload."""

from __future__ import annotations

import re
from typing import Any

import httpx

from runs import finding
from tests.temporal_fixtures import Council, ask
from tests.web_fixtures import WebServer


async def box(page: Any, selector: str) -> dict[str, float]:
    found = await page.locator(selector).first.bounding_box()
    assert found is not None, selector
    return found


async def in_view(page: Any, selector: str) -> bool:
    return await page.locator(selector).evaluate(
        "e => { const r = e.getBoundingClientRect();"
        " return r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0; }"
    )


async def test_a_thread_reads_as_one_conversation_and_the_box_asks_the_next_question(
    web: WebServer, page: Any, council: Council
) -> None:
    first, _ = await ask(council, "Is Rust hard to learn?")
    await page.goto(f"{web.url}/deliberations/{first.id}")
    # The final answer comes first; the box to ask the next question is below it.
    assert (await box(page, "#follow-up"))["y"] > (await box(page, "#final-answer"))["y"]
    await page.fill("#follow-up-question", "And Go?")
    await page.select_option("#follow-up-council", "")  # the same council
    notes = {"name": "notes.md", "mimeType": "text/markdown", "buffer": b"# Go\nFast builds."}
    await page.set_input_files("#follow-up-attachments", files=[notes])
    await page.click("#follow-up-button")
    await page.wait_for_url(re.compile(r"/deliberations/council-and-go"))
    second = page.url.rsplit("/", 1)[-1]
    await page.wait_for_function(
        "() => document.querySelector('#status')?.textContent === 'completed'", timeout=45_000
    )
    handle = finding.handle(council.client, second)
    record = await handle.result()
    assert record.follow_up_of == first.id and record.context.turns == [first.id]
    started = await anext(aiter(handle.fetch_history_events()))
    [started_with] = await council.client.data_converter.decode(
        started.workflow_execution_started_event_attributes.input.payloads, [dict]
    )
    carried = started_with["history"]
    assert [(t["question"], t["answer"]) for t in carried] == [(first.query, first.stage3.response)]
    # The follow-up's own file reached its record.
    assert [(a.name, a.media_type, a.size) for a in record.attachments] == [
        ("notes.md", "text/markdown", len(notes["buffer"]))
    ]

    # One conversation, oldest first: each question, its final answer rendered, the
    # council's work folded under it (open while the turn ran; folded when read again).
    await page.reload()
    turns = page.locator("#conversation > li.turn")
    assert await turns.count() == 2
    assert [await turns.nth(i).get_attribute("data-id") for i in range(2)] == [first.id, second]
    assert await turns.nth(0).locator("h2.question").text_content() == first.query
    assert await turns.nth(1).locator("#question").text_content() == "And Go?"
    for i in range(2):
        turn = turns.nth(i)
        assert await turn.locator(".final-answer .md").count() == 1
        answer_y = (await turn.locator(".final-answer").bounding_box() or {})["y"]
        work_y = (await turn.locator("details.work").bounding_box() or {})["y"]
        assert answer_y < work_y
    for i in range(2):
        assert await turns.nth(i).locator("details.work").get_attribute("open") is None
        await turns.nth(i).locator("details.work > summary").click()
        assert await turns.nth(i).locator("table.matrix").first.is_visible()
    # The box asks a follow-up of the newest turn, below the whole conversation.
    assert (await page.get_attribute("#follow-up", "action") or "").endswith(f"/{second}/follow-up")
    assert (await box(page, "#follow-up"))["y"] > (await box(page, "#conversation"))["y"] + (
        await box(page, "#conversation")
    )["height"] - 1
    # The sidebar lists the thread once; the first question's page links its follow-up.
    assert await page.locator(f'#threads a[href="/deliberations/{second}"]').count() == 1
    await page.goto(f"{web.url}/deliberations/{first.id}")
    assert await page.get_attribute("#follow-ups a", "href") == f"/deliberations/{second}"
    assert await page.locator("#conversation > li.turn").count() == 2
    # A section link leaves its heading in view, below the sticky section links.
    await page.click("#work > summary")
    await page.click('nav.sections a[href="#reviews"]')
    heading = await box(page, "#reviews h2")
    bar = await page.locator("nav.sections").evaluate("e => e.getBoundingClientRect().bottom")
    assert heading["y"] >= bar, (heading, bar)


async def test_a_refused_form_shows_every_error_beside_its_field_focused_and_in_view(
    web: WebServer, browser: Any, council: Council
) -> None:
    context = await browser.new_context(viewport={"width": 390, "height": 844}, is_mobile=True)
    page = await context.new_page()
    await page.goto(web.url)
    await page.fill("#question", "Is the form checked?")
    await page.fill("#max_rounds", "9")
    await page.fill("#quality_threshold", "high")
    await page.fill("#max_cost_usd", "-2")
    await page.click("#start-button")
    await page.wait_for_load_state()
    errors = {
        "max_rounds": "Max rounds must be between 1 and 5 (got 9)",
        "quality_threshold": "Quality threshold must be a number from 0 to 5 (got 'high')",
        "max_cost_usd": "Cost budget (USD) must be more than 0",
    }
    for name, words in errors.items():
        assert (await page.text_content(f"#error-{name}") or "").startswith(words), name
        # Beside its field: right under it, and the field says it is invalid.
        field, error = await box(page, f"#{name}"), await box(page, f"#error-{name}")
        assert 0 <= error["y"] - (field["y"] + field["height"]) < 20, name
        assert await page.get_attribute(f"#{name}", "aria-invalid") == "true"
    # The line above the form names the fields that need a change.
    assert await page.text_content("#form-errors") == (
        "Max rounds, Quality threshold and Cost budget (USD) need a change: see below."
    )
    # The first one is focused and on the screen; what was typed is kept.
    assert await page.evaluate("document.activeElement.id") == "max_rounds"
    assert await in_view(page, "#max_rounds") and await in_view(page, "#error-max_rounds")
    assert await page.input_value("#question") == "Is the form checked?"
    assert await page.input_value("#quality_threshold") == "high"
    # The address answers a reload with the page, not "Method Not Allowed".
    assert page.url.rstrip("/") == web.url
    reloaded = await page.goto(page.url)
    assert reloaded is not None and reloaded.status == 200
    await context.close()
    assert council.sim.log()["total"] == 0  # nothing started
    async with httpx.AsyncClient(base_url=web.url) as http:
        listing = await http.get("/deliberations")
        assert listing.status_code == 303 and listing.headers["location"] == "/"
        again = await http.get("/deliberations/some-run/follow-up")
        assert again.status_code == 303
        assert again.headers["location"] == "/deliberations/some-run"


async def test_a_refused_follow_up_keeps_the_question_and_says_why_beside_it(
    web: WebServer, page: Any, council: Council
) -> None:
    first, _ = await ask(council, "Is Rust hard to learn?")
    await page.goto(f"{web.url}/deliberations/{first.id}")
    await page.fill("#follow-up-question", "And Go?")
    await page.fill("#follow-up-context", "lots")
    await page.click("#follow-up-button")
    error = await page.text_content("#error-follow-up-context") or ""
    assert error.startswith("Context (tokens of earlier turns) must be a whole number"), error
    assert await page.evaluate("document.activeElement.id") == "follow-up-context"
    assert await in_view(page, "#follow-up-context")
    assert await page.input_value("#follow-up-question") == "And Go?"
    reloaded = await page.goto(page.url)
    assert reloaded is not None and reloaded.status == 200  # the deliberation's page again

    # A file the council cannot read is refused beside the file input, its name kept.
    await page.fill("#follow-up-question", "And Go?")
    blob = {"name": "blob.bin", "mimeType": "application/octet-stream", "buffer": b"\x00\x01" * 64}
    await page.set_input_files("#follow-up-attachments", files=[blob])
    await page.click("#follow-up-button")
    error = await page.text_content("#error-follow-up-attachments") or ""
    assert "blob.bin is a binary file" in error, error
    assert "blob.bin" in (await page.text_content("#follow-up-attachments-chosen") or "")
    assert await page.input_value("#follow-up-question") == "And Go?"
