"""A deliberation's page beside its final answer and in its details, in a real browser at
1280 px: how far the council agreed, a member cut as late where its answer would be and
in the usage table, a reviewer cut as late in its row of the matrix, usage tables that
fit, a steering log in words ("before the first refinement round", never "round 0"), and
a sidebar that follows the run to its end."""

from __future__ import annotations

import re
from typing import Any

from council.agreement import verdict, votes_note
from council.calls import Stage
from council.steering import HumanCritique
from runs import finding
from runs.steering import add_critique
from tests.temporal_fixtures import Council, stage_started, until
from tests.web_fixtures import WebServer

MODELS = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]
# sim/drift's first answer is slow (begun, then 30 s): the straggler rule cuts it. So is
# sim/cirrus's first review.
LATE_ANSWER = {"slow": 1.0, "max_faults": 1, "stages": ["stage1"]}
LATE_REVIEW = {"slow": 1.0, "max_faults": 1, "stages": ["stage2"]}
# Patience enough for a busy machine's ordinary calls, far short of the slow ones' 30 s.
QUICK = {"grace_seconds": 6.0, "factor": 2.0}


async def wait_for_status(page: Any, status: str, timeout: float = 60) -> None:
    await page.wait_for_function(
        "s => document.querySelector('#status')?.textContent === s",
        arg=status,
        timeout=timeout * 1000,
    )


async def test_the_page_shows_agreement_a_cut_member_and_follows_the_run_to_its_end(
    web: WebServer, browser: Any, council: Council
) -> None:
    council.sim.set_faults(
        {
            "*": {"latency": 0.8},
            "sim/drift": {"latency": 0.8, **LATE_ANSWER},
            # Cut once, cirrus is not waited for again: it answers first from then on, so
            # that the review after the round has its ratings.
            "sim/cirrus": {"latency": 0.1, **LATE_REVIEW},
        }
    )
    handle = await council.start(
        models=MODELS,
        max_rounds=1,
        min_rounds=1,
        quality_threshold=5,
        stop_on_convergence=False,
        stragglers=QUICK,
    )
    context = await browser.new_context(viewport={"width": 1280, "height": 900})
    page = await context.new_page()
    await page.goto(f"{web.url}/deliberations/{handle.id}")
    await page.evaluate("window.__notReloaded = true")
    mine = page.locator(f'#threads li[data-id="{handle.id}"] .thread-status')
    assert await mine.text_content() == "running"

    # A critique while the first review runs: before any refinement round.
    await until(handle, stage_started(Stage.REVIEW))
    found = await finding.find(council.client, handle.id)
    await add_critique(found, HumanCritique(model="sim/atlas", text="Cite one."))
    await wait_for_status(page, "completed")
    record = await handle.result()
    assert [(late.model, late.stage, late.round) for late in record.late][:2] == [
        ("sim/drift", Stage.ANSWER, 0),
        ("sim/cirrus", Stage.REVIEW, 0),
    ]

    # The sidebar followed the run to its end, without a reload.
    await page.wait_for_function(
        "s => document.querySelector(s)?.textContent === 'completed'",
        arg=f'#threads li[data-id="{handle.id}"] .thread-status',
        timeout=10_000,
    )
    assert await page.evaluate("window.__notReloaded") is True

    # How far the council agreed, beside the final answer (the reviews stay folded).
    assert record.agreement is not None
    assert await page.text_content("#final-agreement") == verdict(record.agreement)
    # And how many independent votes the reviewers were worth.
    assert await page.text_content("#final-votes") == votes_note(record.agreement)
    assert await page.locator("#final #final-agreement").is_visible()

    # The member cut as late, where its answer would be and in the usage table.
    cut = page.locator('#answers article.answer.late[data-model="sim/drift"]')
    assert re.search(r"cut as late after \d+\.\d s", await cut.text_content() or "")
    row = page.locator('#usage table.usage tr[data-name="sim/drift"]')
    assert "cut as late after" in (await row.text_content() or "")
    assert await page.locator('#usage table.usage tr[data-name="sim/atlas"]').count() == 1
    # The reviewer cut as late keeps its row in the first review's matrix, labelled so; the
    # review after the round has its ratings.
    matrices = page.locator("#reviews table.matrix")
    first, second = matrices.nth(0), matrices.nth(1)
    late = first.locator('tr.late[data-reviewer="sim/cirrus"]')
    assert re.search(r"cut as late after \d+\.\d s", await late.locator("th").text_content() or "")
    assert "No review" in (await late.locator("td").text_content() or "")
    assert await first.locator("tbody tr").count() == 3  # atlas, borealis, and cirrus cut
    assert await second.locator('tr[data-reviewer="sim/cirrus"]:not(.late)').count() == 1

    # The usage tables fit the page at 1280 px: none scrolls sideways.
    if not await page.locator("#usage").is_visible():
        await page.click("#work > summary")
    widths = await page.eval_on_selector_all(
        "#usage .scroll", "boxes => boxes.map(b => [b.scrollWidth, b.clientWidth])"
    )
    assert widths and all(scroll <= client for scroll, client in widths), widths

    # The steering log names the moment in words.
    steering = await page.text_content("#steering") or ""
    assert "before the first refinement round" in steering and "round 0" not in steering
    await context.close()
