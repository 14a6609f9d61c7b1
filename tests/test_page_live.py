"""A running deliberation's page builds in place, in a real browser: answers appear as they
arrive and stay, the review matrix fills reviewer by reviewer, the rounds and the usage
grow, the critique select lists the members without a reload and the chairman's text
shows as it is written; after Stop only "stopping" remains, then "stopped" (in the list
too); a member whose calls fail shows its retries; no provider, and the page says so and
how to fix it; a server on the simulator says its answers are simulated."""

from __future__ import annotations

import contextlib
import re
from pathlib import Path
from typing import Any

import httpx
from temporalio.service import RPCError

from activities.settings import GatewaySettings
from council import limits
from council.calls import Stage
from council.progress import EventKind
from council.steering import HumanCritique
from harness.processes import free_port
from runs import finding, steering
from tests.temporal_fixtures import (
    FOUR_MODELS,
    TEST_API_KEY,
    Council,
    council_worker,
    stage_started,
    until,
)
from tests.web_fixtures import WebServer, web_server
from workflows.deliberation import Deliberation

# Members that finish one after another, all within the straggler rule's patience (twice
# the median of the first three), so that no call is cut.
LATENCY = {"sim/atlas": 0.8, "sim/borealis": 1.5, "sim/cirrus": 2.2, "sim/drift": 2.6}

# Records, at every change of the page, what it shows: how many answers and matrix rows,
# the critique select's options and the rounds while it runs, the calls counted, and the
# chairman's text before the final answer is in.
WATCH = """() => {
  window.__notReloaded = true;
  const seen = window.__seen = {answers: [], rows: [], options: 0, rounds: 0, calls: [],
                                chairman: "", statuses: []};
  const count = (selector) => document.querySelectorAll(selector).length;
  const look = () => {
    const status = document.querySelector("#status")?.textContent;
    seen.statuses.push(status);
    seen.answers.push([status, count("#answers article.answer")]);
    seen.rows.push([status, count("#reviews table.matrix tbody tr")]);
    if (status !== "running") return;
    seen.options = Math.max(seen.options, count("#critique-model option"));
    seen.rounds = Math.max(seen.rounds, count("#rounds article.round"));
    const usage = document.querySelector("#usage p")?.textContent || "";
    const calls = usage.match(/in (\\d+) calls/);
    if (calls) seen.calls.push(Number(calls[1]));
    const partial = document.querySelector("#final-partial")?.textContent.trim() || "";
    if (partial.length > seen.chairman.length && !document.querySelector("#final-answer")) {
      seen.chairman = partial;
    }
  };
  new MutationObserver(look).observe(document.body,
    {subtree: true, childList: true, characterData: true, attributes: true});
  look();
}"""


async def shows(page: Any, selector: str, count: int, timeout: float = 60) -> None:
    await page.wait_for_function(
        "([s, n]) => document.querySelectorAll(s).length === n",
        arg=[selector, count],
        timeout=timeout * 1000,
    )


async def wait_for_status(page: Any, status: str, timeout: float = 60) -> None:
    await page.wait_for_function(
        "s => document.querySelector('#status')?.textContent === s",
        arg=status,
        timeout=timeout * 1000,
    )


async def start_from_the_form(page: Any, web: WebServer, question: str, **fields: str) -> str:
    await page.goto(web.url)
    await page.fill("#question", question)
    for name, value in fields.items():
        await page.fill(f"#{name}", value)
    await page.click("#start-button")
    await page.wait_for_url(re.compile(r"/deliberations/council-"))
    return page.url.rsplit("/", 1)[-1]


async def test_the_running_page_builds_in_place(
    web: WebServer, page: Any, council: Council
) -> None:
    timed = {model: {"latency": s} for model, s in LATENCY.items()}

    def holding(stage: str) -> dict[str, Any]:
        """The first member's replies go; the others' wait in `stage` until let go."""
        held = {"hold": True, "stages": [stage]}
        return {**timed, **{m: {**timed[m], **held} for m in FOUR_MODELS[1:]}}

    council.sim.set_faults(holding("stage1"))
    workflow = await start_from_the_form(
        page,
        web,
        "Which queue should a small team run?",
        models="\n".join(FOUR_MODELS),
        chairman="sim/drift",  # the slowest: its text streams for 2.6 s
        max_rounds="1",
        min_rounds="1",
    )
    await page.evaluate(WATCH)
    # One answer shows while the others are held back (a condition, not a pace the
    # machine must keep), then one review row while the other reviews are.
    await shows(page, "#answers article.answer", 1)
    council.sim.set_faults(holding("stage2"))
    await shows(page, "#reviews table.matrix tbody tr", 1)
    council.sim.set_faults(timed)
    await wait_for_status(page, "completed")
    seen = await page.evaluate("window.__seen")
    record = await finding.handle(council.client, workflow).result()

    # Answers came one by one while stage 1 ran, and once all four were in, they stayed.
    running = [n for status, n in seen["answers"] if status == "running"]
    assert any(0 < n < 4 for n in running), seen["answers"]
    after_all = [n for _, n in seen["answers"][[n for _, n in seen["answers"]].index(4) :]]
    assert min(after_all) == 4, seen["answers"]
    # The first review's matrix filled row by row before the run ended.
    rows = [n for status, n in seen["rows"] if status == "running"]
    assert any(0 < n < 4 for n in rows) and max(rows) >= 4, seen["rows"]
    # Without a reload: the critique select listed the members, the round appeared, the
    # calls were counted up, and the chairman's text showed before the final answer.
    assert await page.evaluate("window.__notReloaded") is True
    assert seen["options"] == 4
    assert seen["rounds"] == 1
    calls = seen["calls"]
    assert calls == sorted(calls) and calls[0] < 4 and len(set(calls)) >= 4, calls
    assert calls[-1] <= record.usage.calls
    assert seen["chairman"] and record.stage3 is not None
    words = record.stage3.response.split()
    assert seen["chairman"].split()[:3] == words[:3], seen["chairman"]
    assert len(seen["chairman"]) < len(record.stage3.response)
    # Finished: the page shows the record, and nothing of the live controls.
    assert await page.locator("#answers article.answer").count() == 4
    assert await page.locator("#final-answer .md").count() == 1
    assert await page.locator("#live").is_hidden()
    assert await page.locator("#stop-button, #more-rounds-button, #critique-button").count() == 0
    assert "running" in seen["statuses"] and "stopping" not in seen["statuses"]


async def test_after_stop_only_stopping_remains_then_the_list_says_stopped(
    web: WebServer, page: Any, council: Council
) -> None:
    council.sim.set_faults({"*": {"latency": 2}})
    workflow = await start_from_the_form(page, web, "Is it time to stop?")
    await page.locator("#stop-button").wait_for()
    await page.fill("#reason-input", "seen enough")
    await page.click("#stop-button")
    await page.wait_for_url(re.compile(r"\?done=stop$"))
    # At once: no control that no longer applies, and the state is stopping (or over).
    controls = "#stop-button, #more-rounds-button, #critique-button"
    assert await page.locator(controls).count() == 0
    assert await page.text_content("#status") in ("stopping", "stopped")
    await wait_for_status(page, "stopped")
    assert await page.locator(controls).count() == 0
    assert await page.text_content("#reason") == "user_stopped"
    await page.goto(web.url)
    row = page.locator(f'#runs tr[data-id="{workflow}"]')
    assert await row.locator("td.status").text_content() == "stopped"
    assert await row.get_attribute("data-status") == "stopped"


async def test_the_notices_go_once_the_run_has_ended(
    web: WebServer, page: Any, council: Council
) -> None:
    """What a control just did shows while the run goes ("the maximum is now 2 ...",
    "stop requested ..."), and goes once the run has ended, without a reload; the
    steering and the stop reason keep it as history."""
    # The reviews are held back (the controls stay on the page until the test has used
    # them), and so is the chairman's synthesis: the run stays under way (stopping) until
    # the test lets it go.
    council.sim.set_faults({"*": {"latency": 0.3, "hold": True, "stages": ["stage2", "stage3"]}})
    await start_from_the_form(page, web, "Do notices outlive their run?", max_rounds="1")
    await shows(page, "#answers article.answer", 4)
    await page.click("#more-rounds-button")
    await page.wait_for_url(re.compile(r"\?done=rounds$"))
    assert await page.text_content("#note") == "the maximum is now 2 refinement round(s)"
    await page.click("#stop-button")
    await page.wait_for_url(re.compile(r"\?done=stop$"))
    assert (await page.text_content("#note") or "").startswith("stop requested")
    await page.evaluate("window.__notReloaded = true")
    council.sim.set_faults({"*": {"latency": 0.3}})
    await wait_for_status(page, "stopped")
    await page.locator("#note").wait_for(state="detached", timeout=30_000)
    assert await page.evaluate("window.__notReloaded") is True
    assert "set the maximum rounds to 2" in (await page.text_content("#steering") or "")
    # Opened again at the address the stop left, the page shows no notice either.
    await page.reload()
    await wait_for_status(page, "stopped")
    assert await page.locator("#note").count() == 0


async def test_a_member_whose_calls_fail_shows_its_retries(
    web: WebServer, page: Any, council: Council
) -> None:
    council.sim.set_faults(
        {"*": {"latency": 4}, "sim/cirrus": {"latency": 0, "errors": {"500": 1.0}}}
    )
    retries = {"max_attempts": 10, "initial_retry_seconds": 0.5, "max_retry_seconds": 1}
    handle = await council.start(policy=retries)
    try:
        await page.goto(f"{web.url}/deliberations/{handle.id}")
        state = '#statuses tr[data-model="sim/cirrus"] td:nth-child(2)'
        await page.wait_for_function(
            "s => /^retrying: attempt [2-9]/.test(document.querySelector(s)?.textContent || '')",
            arg=state,
            timeout=20_000,
        )
        line = await page.text_content(state) or ""
        assert "the last one failed: sim/cirrus" in line and "500" in line, line
        box = page.locator('#answers article.writing[data-model="sim/cirrus"] .state')
        assert (await box.text_content() or "").startswith("retrying: attempt")
        # The members that answer are writing, not retrying.
        assert await page.text_content('#statuses tr[data-model="sim/atlas"] td:nth-child(2)')
        assert "retrying" not in (
            await page.text_content('#statuses tr[data-model="sim/atlas"] td:nth-child(2)') or ""
        )
    finally:
        with contextlib.suppress(RPCError):  # the run may have ended by itself
            await handle.terminate()


async def test_with_no_provider_the_page_says_so_and_how_to_fix_it(
    temporal: Any, page: Any, tmp_path: Path
) -> None:
    nobody = GatewaySettings(base_url=f"http://127.0.0.1:{free_port()}/v1", api_key=TEST_API_KEY)
    async with council_worker(temporal.client, None, settings=nobody) as council:
        retries = {"max_attempts": 4, "initial_retry_seconds": 0.5, "max_retry_seconds": 1}
        handle = await council.start(policy=retries)
        with web_server(temporal, council, tmp_path) as web:
            await page.goto(f"{web.url}/deliberations/{handle.id}")
            said = page.locator("#no-provider")
            await said.wait_for(timeout=20_000)
            while_running = await said.text_content() or ""
            for words in ("No model provider answers", "OPENROUTER_API_KEY", "make up"):
                assert words in while_running, while_running
            await wait_for_status(page, "failed", timeout=30)
            await page.reload()
            assert "make up" in (await page.text_content("#no-provider") or "")


async def test_a_server_on_the_simulator_says_its_answers_are_simulated(
    temporal: Any, council: Council, web: WebServer, tmp_path: Path
) -> None:
    async with httpx.AsyncClient(base_url=web.url) as http:
        assert 'id="simulated"' not in (await http.get("/")).text
    with web_server(temporal, council, tmp_path / "sim", COUNCIL_SIMULATED="1") as simulated:
        async with httpx.AsyncClient(base_url=simulated.url) as http:
            listing = (await http.get("/")).text
    assert 'id="simulated"' in listing and "simulated models" in listing
    # The form offers the members the simulator plays (COUNCIL_MODELS, as `make up` sets).
    assert "sim/atlas" in listing and "openai/gpt-4o-mini" not in listing


async def test_the_record_so_far_holds_each_reply_as_soon_as_it_arrived(council: Council) -> None:
    """What the page builds on: the `record` query includes the replies of the stage under
    way that have arrived (read as the stage reads them), and the final record is the same
    as ever."""
    council.sim.set_faults({"*": {"latency": 1.2}, "sim/atlas": {"latency": 0.2}})
    handle = await council.start(max_rounds=1, min_rounds=1)

    def completed(model: str, stage: Stage, round_number: int = 0) -> Any:
        return lambda e: (
            (e.kind, e.model, e.stage, e.round)
            == (
                EventKind.MODEL_COMPLETE,
                model,
                stage,
                round_number,
            )
        )

    await until(handle, completed("sim/atlas", Stage.ANSWER))
    so_far = await handle.query(Deliberation.current_record)
    assert [r.model for r in so_far.stage1] == ["sim/atlas"]
    await until(handle, completed("sim/atlas", Stage.REVIEW))
    so_far = await handle.query(Deliberation.current_record)
    assert [r.model for r in so_far.stage1] == FOUR_MODELS
    [review] = so_far.stage2
    assert review.model == "sim/atlas" and len(review.ratings) == 3
    await until(handle, completed("sim/atlas", Stage.REFINE, 1))
    so_far = await handle.query(Deliberation.current_record)
    [refined] = so_far.rounds[0].refinements
    assert refined.model == "sim/atlas" and refined.refined_response
    record = await handle.result()
    assert [r.model for r in record.stage1] == FOUR_MODELS and len(record.stage2) == 4
    assert len(record.rounds[0].refinements) == 4


async def test_a_refused_critique_keeps_its_text_and_the_refusal_goes_once_edited(
    web: WebServer, page: Any, council: Council
) -> None:
    # The reviews take a minute: the round cannot move on (and take critiques again) while
    # the page is used, however busy the machine (the run is ended at the test's end).
    council.sim.set_faults(
        {"*": {"latency": 4, "slow": 1.0, "slow_seconds": 60.0, "stages": ["stage2"]}}
    )
    handle = await council.start(max_rounds=1, quality_threshold=5, stop_on_convergence=False)
    await until(handle, stage_started(Stage.REVIEW))
    # As many critiques wait as one round takes: the page's next one is refused.
    found = await finding.find(council.client, handle.id)
    for n in range(limits.MAX_HUMAN_CRITIQUES_PER_ROUND):
        await steering.add_critique(found, HumanCritique(model="sim/atlas", text=f"{n}"))
    await page.goto(f"{web.url}/deliberations/{handle.id}")
    await page.select_option("#critique-model", "sim/atlas")
    typed = "Say which versions this applies to."
    await page.fill("#critique-text", typed)
    await page.click("#critique-button")
    await page.wait_for_load_state()
    refusal = await page.text_content("#refused") or ""
    assert refusal.startswith("at most 8 critiques can wait for one round"), refusal
    assert await page.input_value("#critique-text") == typed
    assert await page.input_value("#critique-model") == "sim/atlas"
    # The page goes on building in place: the text stays when the controls are redrawn.
    await page.evaluate("document.querySelector('#live-state > *').dataset.old = '1'")
    await page.wait_for_function(
        "() => !document.querySelector('#live-state [data-old]')", timeout=30_000
    )
    assert await page.input_value("#critique-text") == typed
    assert await page.locator("#refused").is_visible()
    # Once the user changes the critique, the refusal of the last one goes; no reload.
    await page.evaluate("window.__notReloaded = true")
    await page.press("#critique-text", "End")
    await page.type("#critique-text", " And why.")
    await page.locator("#refused").wait_for(state="detached", timeout=5_000)
    assert await page.input_value("#critique-text") == typed + " And why."
    assert await page.evaluate("window.__notReloaded") is True
    await handle.terminate("test over")


# Counts the changes of the live region on every page load (a critique or a stop is a
# form's POST, then the page again).
COUNT_UPDATES = """document.addEventListener("DOMContentLoaded", () => {
  window.__updates = 0;
  const region = document.querySelector("#live-state");
  if (!region) return;
  new MutationObserver(() => { window.__updates += 1; }).observe(region,
    {subtree: true, childList: true, characterData: true, attributes: true});
});"""


async def click_across_an_update(page: Any, selector: str) -> None:
    """A click as a person's that takes a moment: the button pressed just after the live
    region changed, and let go only once it has changed again."""
    button = page.locator(selector)
    await button.wait_for()
    before = await page.evaluate("window.__updates")
    await page.wait_for_function("n => window.__updates > n", arg=before, timeout=30_000)
    box = await button.bounding_box()
    assert box is not None
    await page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    await page.mouse.down()
    pressed = await page.evaluate("window.__updates")
    await page.wait_for_function("n => window.__updates > n", arg=pressed, timeout=30_000)
    await page.mouse.up()


async def test_every_click_on_the_live_controls_lands_while_the_page_updates(
    web: WebServer, page: Any, council: Council
) -> None:
    # Every call streams its reply over the second half of 6 s, and the run has five rounds
    # to go (a minute): the live region changes every few seconds throughout (the bytes
    # written so far, the calls done).
    council.sim.set_faults({"*": {"latency": 6}})
    handle = await council.start(
        max_rounds=5, min_rounds=5, quality_threshold=5, stop_on_convergence=False
    )
    await until(handle, stage_started(Stage.REVIEW))
    await page.add_init_script(COUNT_UPDATES)
    await page.goto(f"{web.url}/deliberations/{handle.id}")
    clicked = []
    for n in range(limits.MAX_HUMAN_CRITIQUES_PER_ROUND):
        member = FOUR_MODELS[n % len(FOUR_MODELS)]
        await page.select_option("#critique-model", member)
        await page.fill("#critique-text", f"Critique {n}: say what it costs.")
        async with page.expect_navigation(timeout=30_000):
            await click_across_an_update(page, "#critique-button")
        clicked.append(member)
        # The confirmation names the member the critique went to.
        assert await page.text_content("#note") == (
            f"your critique of {member} waits for the next refinement round"
        )
    async with page.expect_navigation(timeout=30_000):
        await click_across_an_update(page, "#stop-button")
    assert await page.text_content("#status") in ("stopping", "stopped")
    await wait_for_status(page, "stopped")

    record = await handle.result()
    critiques = [a for a in record.steering if a.kind == "critique"]
    assert [a.model for a in critiques] == clicked
    assert record.iteration.terminated_reason == "user_stopped"
