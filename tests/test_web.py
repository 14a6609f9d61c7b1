"""The web page, in a real browser: start from the form, watch a reply stream, stop, read
the record; hostile HTML shown as text everywhere; the form's errors, the listing, the
downloads, the access token and the same-origin rule; what partial text costs history."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
from temporalio.api.enums.v1 import EventType

from council.calls import Stage
from council.models import DeliberationRecord
from simulator.personas import MARKUP, answer, persona_for
from tests.temporal_fixtures import FOUR_MODELS, Council, ask, stage_started, until
from tests.web_fixtures import PAGE_SCRIPTS, WEB_TOKEN, WebServer, web_server

HOSTILE = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/markup"]
WORKFLOW_TASK_EVENTS = {
    EventType.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_STARTED,
    EventType.EVENT_TYPE_WORKFLOW_TASK_COMPLETED,
}
# The straggler rule's timer: started when a quorum has replied and some calls have not,
# so it too follows how the completions bunch up.
STRAGGLER_TIMER_EVENTS = {
    EventType.EVENT_TYPE_TIMER_STARTED,
    EventType.EVENT_TYPE_TIMER_FIRED,
    EventType.EVENT_TYPE_TIMER_CANCELED,
}
# The stage and round search attributes: updated with a new round at most every few seconds
# of the run (workflows.live.PLACE_EVERY), so a slower run shows more of its rounds.
PLACE_EVENTS = {EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES}
SCRIPT_TEXT = "<script>window.__pwned = 'script'</script>"


def in_history(history: Any, text: str) -> bool:
    """Whether the text is in any event, as it is or as a JSON payload holds it."""
    raw = b"".join(event.SerializeToString() for event in history.events)
    return text.encode() in raw or json.dumps(text)[1:-1].encode() in raw


async def text_of(page: Any, selector: str) -> str:
    return await page.locator(selector).first.text_content() or ""


async def wait_for_status(page: Any, status: str, timeout: float = 45) -> None:
    await page.wait_for_function(
        "s => document.querySelector('#status')?.textContent === s",
        arg=status,
        timeout=timeout * 1000,
    )


async def nothing_ran(page: Any) -> None:
    """No injected element exists and no injected handler or script ran."""
    assert await page.evaluate("window.__pwned") is None
    assert await page.evaluate("document.querySelectorAll('img, b[onmouseover]').length") == 0
    # The page's own scripts only, none inline.
    sources = await page.evaluate("Array.from(document.scripts, s => s.getAttribute('src'))")
    assert set(sources) <= PAGE_SCRIPTS, sources


async def test_start_from_the_form_watch_a_reply_stream_stop_and_read_the_synthesis(
    temporal: Any, page: Any, council: Council, tmp_path: Path
) -> None:
    # sim/markup's reply is hostile HTML, and it streams a piece, then pauses until the page
    # has shown it, then writes its first paragraph and pauses until the stop cancels it.
    # The council waits for every member, so the straggler rule does not cut it first.
    config = tmp_path / "council.toml"
    config.write_text(
        f"[councils.default]\nmodels = {json.dumps(HOSTILE)}\n"
        "stragglers = { wait_for_all = true }\n"
    )
    question = "What makes a code review useful?"
    full = answer(persona_for("sim/markup"), question)

    def markup_pauses_after(chars: int) -> None:
        council.sim.set_faults(
            {"*": {"latency": 4}, "sim/markup": {"latency": 2, "pause_after": chars}}
        )

    markup_pauses_after(1)
    with web_server(temporal, council, tmp_path, COUNCIL_CONFIG=str(config)) as web:
        await page.goto(web.url)
        await page.fill("#question", question)
        await page.fill("#models", "\n".join(HOSTILE))
        await page.click("#start-button")
        await page.wait_for_url(re.compile(r"/deliberations/council-what-makes-a-code-review"))
        workflow = page.url.rsplit("/", 1)[-1]

        # The reply appears while it is being written, refreshed as it grows.
        writing = '#answers article.writing[data-model="sim/markup"] .partial'
        partial = page.locator(writing)
        await partial.wait_for(timeout=20_000)
        first = await partial.text_content() or ""
        state = page.locator('#statuses tr[data-model="sim/markup"] td').nth(1)
        assert (await state.text_content() or "").startswith("writing")
        assert first.split()[0] == full.split()[0] and len(first) < len(full)
        markup_pauses_after(full.index("\n- "))  # its first paragraph, the hostile HTML in it
        await page.wait_for_function(
            "([selector, n]) => document.querySelector(selector)?.textContent.length > n",
            arg=[writing, len(first)],
            timeout=10_000,
        )
        # The three others answered: their answers are on the page before the stage ends.
        await page.wait_for_function(
            "() => document.querySelectorAll('#answers article.answer').length === 3",
            timeout=10_000,
        )
        later = await partial.text_content() or ""
        assert MARKUP[:30] in later  # hostile text, shown as text
        await nothing_ran(page)
        assert "stage 1 answer" in await text_of(page, "#events")

        # Stop: the call in flight is cancelled and the chairman synthesizes the rest.
        await page.fill("#reason-input", "seen enough")
        await page.click("#stop-button")
        await wait_for_status(page, "stopped")
        assert await text_of(page, "#reason") == "user_stopped"
        assert "stopped: seen enough" in await text_of(page, "#final .who")
        final = await text_of(page, "#final-answer .raw pre")  # the exact text
        assert final.startswith("(Simulated council synthesis)")
        answered = await page.locator("#answers article h3").all_text_contents()
        assert [a.split()[0] for a in answered] == ["sim/atlas", "sim/borealis", "sim/cirrus"]
        await nothing_ran(page)

        # The partial text never entered the workflow's history, though it was shown.
        history = await council.client.get_workflow_handle(workflow).fetch_history()
        assert in_history(history, question)  # the check sees payloads
        # Only sim/markup wrote it, and it was cancelled.
        assert not in_history(history, MARKUP[:30])


async def test_a_finished_record_shows_the_matrix_critiques_and_diffs(
    web: WebServer, page: Any, council: Council, tmp_path: Path
) -> None:
    record = await council.run(max_rounds=1)
    await page.goto(f"{web.url}/deliberations/{record.id}")
    assert await text_of(page, "#status") == "completed"
    assert await text_of(page, "#final-answer .raw pre") == record.stage3.response
    # The first review: 4 reviewers x 3 answers each, and their own answer blank.
    matrix = page.locator("table.matrix").first
    assert await matrix.locator("td.cell").count() == 12
    assert await matrix.locator("td.self").count() == 4
    reviewer = record.stage2[0]
    row = matrix.locator("tbody tr").first
    assert (await row.locator("th").text_content() or "").startswith(reviewer.model)
    ratings = [await cell.text_content() for cell in await row.locator("summary.rating").all()]
    labels = [
        label
        for label in sorted(record.label_to_model)
        if record.label_to_model[label] != reviewer.model
    ]
    assert [r.strip() for r in ratings] == [f"{reviewer.ratings[label]:g}" for label in labels]
    # A critique opens under its rating.
    await row.locator("summary.rating").first.click()
    critique = await row.locator(".critique").first.text_content() or ""
    assert critique and critique != "(no critique)"
    # sim/cirrus changed its answer: its refinement shows the words it added.
    cirrus = page.locator('#rounds .refinement[data-model="sim/cirrus"]')
    assert "changed" in (await cirrus.locator(".verdict").text_content() or "")
    assert await cirrus.locator(".diff ins").count() > 0
    added = "".join(await cirrus.locator(".diff ins").all_text_contents())
    [refined] = [r for r in record.rounds[0].refinements if r.model == "sim/cirrus"]
    assert added.strip() and added.strip()[:40] in refined.refined_response
    # Usage per model and stage, and the way to the Temporal UI.
    assert await page.locator("table.usage").count() == 2
    assert f"/workflows/{record.id}" in (await page.get_attribute("#temporal-ui", "href") or "")

    target = tmp_path / "page.png"  # the README's screenshots: tests/test_screenshots.py
    await page.set_viewport_size({"width": 1200, "height": 1500})
    await page.evaluate("window.scrollTo(0, 0)")
    await page.screenshot(path=str(target))
    assert target.stat().st_size > 20_000


async def test_hostile_html_is_shown_as_text_in_every_place(
    web: WebServer, page: Any, council: Council
) -> None:
    record = await council.run(models=HOSTILE, chairman="sim/markup", max_rounds=1)
    await page.goto(f"{web.url}/deliberations/{record.id}")
    for section in ("#final", "#answers", "#reviews", "#rounds"):
        assert SCRIPT_TEXT in await text_of(page, section), section
    # In a rating's critique (title and expanded text) and in a refinement's diff too.
    cell = page.locator("table.matrix td.cell[title*='<script>']").first
    assert MARKUP in (await cell.get_attribute("title") or "")
    await cell.locator("summary.rating").click()
    assert MARKUP in (await cell.locator(".critique").text_content() or "")
    await page.hover("#final-answer")
    await nothing_ran(page)


async def test_bad_input_shows_the_one_line_message_next_to_the_field(
    web: WebServer, page: Any, council: Council
) -> None:
    await page.goto(web.url)
    await page.fill("#question", "Is the form checked?")
    await page.fill("#max_rounds", "9")
    await page.click("#start-button")
    assert await text_of(page, "#error-max_rounds") == "Max rounds must be between 1 and 5 (got 9)"
    assert await page.input_value("#question") == "Is the form checked?"  # kept
    await page.fill("#max_rounds", "2")
    await page.fill("#min_rounds", "3")
    await page.click("#start-button")
    assert await text_of(page, "#error-min_rounds") == (
        "Min rounds must be between 0 and 2, the maximum rounds (got 3)"
    )
    await page.fill("#min_rounds", "")
    await page.fill("#models", "sim/atlas")
    await page.click("#start-button")
    assert "need 2 to 12 models, got 1" in await text_of(page, "#error-models")
    assert council.sim.log()["total"] == 0  # nothing started


async def test_the_listing_filters_and_the_record_downloads(
    web: WebServer, council: Council
) -> None:
    record = await council.run(question="Which is faster, a train or a plane?", max_rounds=1)
    async with httpx.AsyncClient(base_url=web.url) as http:
        listing = (await http.get("/")).text
        assert record.id in listing and "Which is faster, a train or a plane?" in listing
        assert record.id in (await http.get("/", params={"q": "TRAIN or a"})).text
        filtered = (await http.get("/", params={"q": "no such question"})).text
        assert record.id not in filtered and "No deliberation matches" in filtered
        as_json = await http.get(f"/deliberations/{record.id}/record.json")
        assert as_json.headers["content-disposition"] == f'attachment; filename="{record.id}.json"'
        assert DeliberationRecord.model_validate_json(as_json.text) == record
        as_markdown = await http.get(f"/deliberations/{record.id}/record.md")
        assert as_markdown.text.startswith(f"# Council deliberation `{record.id}`")
        missing = await http.get("/deliberations/no-such-run")
        assert missing.status_code == 404 and "No such deliberation" in missing.text
        assert "Content-Security-Policy" in missing.headers


async def test_a_search_reads_only_the_newest_runs_it_may_and_says_so(
    temporal: Any, council: Council, tmp_path: Path
) -> None:
    questions = [
        f"Which {word} is searched for (bounded search)?" for word in ("owl", "elk", "yak")
    ]
    handles = [await council.start(question, max_rounds=1) for question in questions]
    with web_server(temporal, council, tmp_path, COUNCIL_WEB_SEARCH_RUNS="2") as web:
        async with httpx.AsyncClient(base_url=web.url) as http:
            # The newest of the three is among the two newest runs: found, and the page says
            # that older ones were not read.
            newest = (await http.get("/", params={"q": "which yak"})).text
            assert handles[2].id in newest and 'id="search-bound"' in newest
            assert "Searched the 2 newest deliberations" in newest
            # The oldest is not: not found, and the page says why it may still exist.
            oldest = (await http.get("/", params={"q": "which owl"})).text
            assert handles[0].id not in oldest and "No deliberation matches" in oldest
            assert 'id="search-bound"' in oldest
            # The list without a search reads no question and says nothing of the kind.
            listing = (await http.get("/")).text
            assert handles[0].id in listing and 'id="search-bound"' not in listing
    # With the default bound the oldest is found, and nothing is said.
    with web_server(temporal, council, tmp_path) as web:
        async with httpx.AsyncClient(base_url=web.url) as http:
            found = (await http.get("/", params={"q": "which owl"})).text
            assert handles[0].id in found and 'id="search-bound"' not in found
    for handle in handles:
        await handle.result()


async def test_starting_and_stopping_need_the_same_origin(web: WebServer, council: Council) -> None:
    form = {"question": "From elsewhere?", "models": "\n".join(FOUR_MODELS)}
    async with httpx.AsyncClient(base_url=web.url) as http:
        foreign = await http.post(
            "/deliberations", data=form, headers={"Origin": "http://evil.test"}
        )
        assert foreign.status_code == 403 and "another origin" in foreign.text
        referred = await http.post(
            "/deliberations", data=form, headers={"Referer": "http://evil.test/page"}
        )
        assert referred.status_code == 403
        stop = await http.post("/deliberations/x/stop", headers={"Origin": "http://evil.test"})
        assert stop.status_code == 403
        own = await http.post("/deliberations", data=form, headers={"Origin": web.url})
        assert own.status_code == 303
    assert "serving on 127.0.0.1 only" in web.log()


async def test_with_a_token_starting_and_stopping_need_it(
    web_with_token: WebServer, council: Council
) -> None:
    web = web_with_token
    form = {"question": "With a token?", "models": "\n".join(FOUR_MODELS)}
    origin = {"Origin": web.url}
    async with httpx.AsyncClient(base_url=web.url) as http:
        refused = await http.post("/deliberations", data=form, headers=origin)
        assert refused.status_code == 403 and "/login" in refused.text
        wrong = await http.post("/login", data={"token": "guess"}, headers=origin)
        assert wrong.status_code == 403 and "council_session" not in wrong.cookies
        signed_in = await http.post("/login", data={"token": WEB_TOKEN}, headers=origin)
        assert signed_in.status_code == 303
        assert http.cookies.get("council_session") not in (None, WEB_TOKEN)  # never the token
        started = await http.post("/deliberations", data=form, headers=origin)
        assert started.status_code == 303
        workflow = started.headers["location"].rsplit("/", 1)[-1]
        stopped = await http.post(f"/deliberations/{workflow}/stop", headers=origin)
        assert stopped.status_code == 303
        # Reading needs it too (tests/test_page_reading.py).
        http.cookies.clear()
        assert (await http.get(f"/deliberations/{workflow}")).status_code == 403
        bearer = await http.post(
            "/deliberations", data=form, headers={"Authorization": f"Bearer {WEB_TOKEN}"}
        )
        assert bearer.status_code == 303
    assert "need an access token" in web.log()


async def test_partial_text_costs_the_history_nothing(council: Council) -> None:
    """Replies streamed over 1.5 s send heartbeats with their text (about two a call);
    replies at once send none. The two histories have the same events, nearly the same
    size, and neither holds any text beyond the replies themselves."""
    sizes = {}
    for latency in (0.0, 1.5):
        council.sim.set_faults({"*": {"latency": latency}} if latency else None)
        handle = await council.start(max_rounds=1, quality_threshold=5)
        record = await handle.result()
        history = await handle.fetch_history()
        # Workflow tasks and timers follow how the calls' completions happen to bunch up,
        # and the search attributes how long the stages take.
        left_out = WORKFLOW_TASK_EVENTS | STRAGGLER_TIMER_EVENTS | PLACE_EVENTS
        calls = [e for e in history.events if e.event_type not in left_out]
        sizes[latency] = (len(calls), sum(e.ByteSize() for e in calls))
        assert record.usage.calls == 4 + 4 + 4 + 4 + 1
        assert in_history(history, '"content_bytes"') is False  # no heartbeat details
    (fast_events, fast_bytes), (slow_events, slow_bytes) = sizes[0.0], sizes[1.5]
    print(f"\nhistory without workflow tasks: at once {sizes[0.0]}, streamed {sizes[1.5]}")
    assert slow_events == fast_events
    assert abs(slow_bytes - fast_bytes) < 0.01 * fast_bytes, sizes


async def test_a_follow_up_more_rounds_and_a_critique_from_the_page(
    web: WebServer, page: Any, council: Council
) -> None:
    first, _ = await ask(council, "Is Rust hard to learn?")
    await page.goto(f"{web.url}/deliberations/{first.id}")
    await page.fill("#follow-up-question", "And Go?")
    await page.click("#follow-up-button")
    await page.wait_for_url(re.compile(r"/deliberations/council-and-go"))
    await wait_for_status(page, "completed")
    conversation = page.locator("#conversation .turn:not(.current)")
    assert await conversation.count() == 1
    assert await conversation.locator("h2.question").text_content() == first.query
    assert "carried 1 earlier turn(s)" in await text_of(page, "#context")

    # A running deliberation: one more round, and a critique for the next one. The first
    # round's refinements are held until both are in, so that a round follows the critique.
    council.sim.set_faults({"*": {"latency": 0.8, "hold": True, "stages": ["stage2_5"]}})
    handle = await council.start(max_rounds=1, quality_threshold=5, stop_on_convergence=False)
    await until(handle, stage_started(Stage.REVIEW))
    await page.goto(f"{web.url}/deliberations/{handle.id}")
    await page.click("#more-rounds-button")
    assert await text_of(page, "#note") == "the maximum is now 2 refinement round(s)"
    await page.select_option("#critique-model", "sim/drift")
    await page.fill("#critique-text", "Name one database that does <b>not</b> fit.")
    await page.click("#critique-button")
    assert await text_of(page, "#note") == (
        "your critique of sim/drift waits for the next refinement round"
    )
    await page.fill("#critique-text", "")
    await page.click("#critique-button")
    assert await text_of(page, "#refused") == "the critique is empty"
    council.sim.set_faults({"*": {"latency": 0.8}})
    await wait_for_status(page, "completed")
    record = await handle.result()
    assert len(record.rounds) == 2 and [a.kind for a in record.steering] == [
        "max_rounds",
        "critique",
    ]
    steering = await text_of(page, "#steering")
    assert "set the maximum rounds to 2" in steering
    assert "handed over in round" in steering and "<b>not</b>" in steering  # as text
