"""The page on a phone (390 px), in a real browser: no view scrolls sideways, neither the
list, nor a running deliberation, nor a finished one; code blocks and the review matrix
scroll inside their own box, and the matrix says so. On a phone and on a desktop, a
section link leaves its heading just below the sticky section links."""

from __future__ import annotations

from typing import Any

from tests.temporal_fixtures import Council, ask
from tests.web_fixtures import WebServer

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
DESKTOP = {"viewport": {"width": 1280, "height": 800}}
LONG_QUESTION = (
    "Should a small team use SQLite or PostgreSQL for a web app whose busiest table holds "
    "customer_orders_with_a_very_long_unbroken_identifier_name_that_does_not_wrap_anywhere?"
)


async def page_width(page: Any) -> int:
    return await page.evaluate("document.documentElement.scrollWidth")


async def test_at_390_px_no_view_scrolls_sideways(
    web: WebServer, browser: Any, council: Council
) -> None:
    first, _ = await ask(council, LONG_QUESTION)
    second, _ = await ask(council, "And when would PostgreSQL be better?", follow_up_of=first.id)
    context = await browser.new_context(**PHONE)
    page = await context.new_page()

    await page.goto(web.url)
    assert await page.locator("#runs tr").count() >= 2
    assert await page_width(page) == 390, "the list"

    for turn in (first, second):
        await page.goto(f"{web.url}/deliberations/{turn.id}")
        await page.locator("#work").evaluate("e => e.open = true")
        for fold in await page.locator("#current details").all():
            await fold.evaluate("e => e.open = true")
        assert await page.locator("#current table.matrix").count() >= 1
        assert await page_width(page) == 390, f"the finished deliberation {turn.id}"
        # The matrix is wider than the screen: it scrolls in its own box.
        matrix = page.locator("#current .scroll:has(table.matrix)").first
        inner = await matrix.evaluate("e => [e.scrollWidth, e.clientWidth]")
        assert inner[0] > inner[1] and inner[1] <= 390

    # A running one: answers streaming in, then the matrix filling (each call long enough
    # that the page, however slow to open, finds stage 1 still writing).
    council.sim.set_faults({"*": {"latency": 5}})
    handle = await council.start(LONG_QUESTION, max_rounds=1)
    await page.goto(f"{web.url}/deliberations/{handle.id}")
    await page.locator("#statuses").wait_for()
    widths = []
    for stage in ("article.writing .partial", "#reviews table.matrix tbody tr"):
        await page.locator(stage).first.wait_for(timeout=20_000)
        widths.append(await page_width(page))
    assert widths == [390, 390], "the running deliberation"
    await context.close()
    await handle.terminate()


# Where a section link left its heading: the section links' box and the heading's, and
# whether the page could not scroll further (the last section, near the page's end).
LANDED = """(href) => {
  const nav = document.querySelector("#current nav.sections").getBoundingClientRect();
  const target = document.querySelector(href);
  const heading = target.matches("h1, h2, h3") ? target : target.querySelector("h2");
  const box = heading.getBoundingClientRect();
  const end = document.documentElement.scrollHeight - window.innerHeight - window.scrollY;
  return {href, nav: [nav.top, nav.bottom], heading: [box.top, box.bottom], atEnd: end < 1};
}"""


async def test_a_section_link_leaves_its_heading_just_below_the_section_links(
    web: WebServer, browser: Any, council: Council
) -> None:
    record, _ = await ask(council, LONG_QUESTION)
    for viewport in (PHONE, DESKTOP):
        context = await browser.new_context(**viewport)
        page = await context.new_page()
        await page.goto(f"{web.url}/deliberations/{record.id}")
        links = page.locator("#current nav.sections a")
        hrefs = await links.evaluate_all("links => links.map(a => a.getAttribute('href'))")
        assert hrefs == ["#final", "#answers", "#reviews", "#rounds", "#usage", "#errors"]
        width = viewport["viewport"]["width"]
        for href in [*hrefs, *reversed(hrefs)]:  # down the page, then up again
            await page.click(f'#current nav.sections a[href="{href}"]')
            landed = await page.evaluate(LANDED, href)
            (nav_top, nav_bottom), (top, bottom) = landed["nav"], landed["heading"]
            # Not under the section links ...
            assert top >= nav_bottom or bottom <= nav_top, (width, landed)
            # ... and just below them, not below the end of the section before it.
            assert landed["atEnd"] or top <= nav_bottom - nav_top + 16, (width, landed)
        await context.close()


async def test_a_matrix_wider_than_the_screen_says_it_scrolls(
    web: WebServer, browser: Any, council: Council
) -> None:
    record, _ = await ask(council, LONG_QUESTION)
    for viewport in (PHONE, DESKTOP):
        context = await browser.new_context(**viewport)
        page = await context.new_page()
        await page.goto(f"{web.url}/deliberations/{record.id}")
        box = page.locator("#current .scroll:has(table.matrix)").first
        hint = page.locator("#current .scroll-hint:has(+ .scroll table.matrix)").first
        wider = await box.evaluate("e => e.scrollWidth > e.clientWidth")
        if viewport is DESKTOP:
            # Four members' matrix fits a desktop's width: no hint, no fading edge.
            assert not wider
            assert await hint.is_hidden()
            assert await box.evaluate("e => e.className") == "scroll"
            await context.close()
            continue
        assert wider
        await box.scroll_into_view_if_needed()
        assert await hint.is_visible()
        assert "scroll sideways" in (await hint.text_content() or "")
        # Its right edge fades where more answers lie; once scrolled to the end, the left.
        await page.wait_for_function(
            "e => e.classList.contains('more-right') && !e.classList.contains('more-left')",
            arg=await box.element_handle(),
        )
        assert await box.evaluate("e => getComputedStyle(e).maskImage") != "none"
        await box.evaluate("e => { e.scrollLeft = e.scrollWidth; }")
        await page.wait_for_function(
            "e => e.classList.contains('more-left') && !e.classList.contains('more-right')",
            arg=await box.element_handle(),
        )
        await context.close()


BAT_AND_BALL = (
    "A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. How many "
    "cents does the ball cost?"
)


async def test_at_390_px_the_report_names_the_split_and_which_agreement_is_which(
    web: WebServer, browser: Any, council: Council
) -> None:
    """The first answers state 5, 5, 6 and 5 cents: on a phone, the report names 6 and who
    said it (computed), the members' answers are said beside the reviewers' agreement on
    their ratings, and nothing scrolls sideways."""
    with council.sim.disagreeing(1.0):
        record = await council.run(BAT_AND_BALL, max_rounds=1)
    report = record.disagreement_report
    assert report is not None and sorted(report.stated.values()) == ["5", "5", "5", "6"]
    [six] = [model for model, value in report.stated.items() if value == "6"]
    context = await browser.new_context(**PHONE)
    page = await context.new_page()
    await page.goto(f"{web.url}/deliberations/{record.id}")
    split = page.locator("#final-report li", has_text="the value the first answers state")
    assert f"6 (held by {six})" in await split.inner_text()
    assert await split.locator(".badge.source-computed").inner_text() == "computed"
    answers = await page.locator("#final-answers-agree").inner_text()
    assert (
        answers.startswith("members' first answers: 3 of 4 state 5")
        and f"{six} states 6" in answers
    )
    verdict = await page.locator("#final-agreement").inner_text()
    assert verdict.startswith("reviewers' agreement on their ratings: ")
    votes = await page.locator("#final-votes").inner_text()
    assert "independent opinion" in votes and "the more alike their ratings, the fewer" in votes
    assert await page_width(page) == 390
    await context.close()
