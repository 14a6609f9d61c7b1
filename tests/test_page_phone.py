"""The page on a phone (390 px), in a real browser: no view scrolls sideways, neither the
list, nor a running deliberation, nor a finished one; code blocks and the review matrix
scroll inside their own box."""

from __future__ import annotations

from typing import Any

from tests.temporal_fixtures import Council, ask
from tests.web_fixtures import WebServer

PHONE = {"viewport": {"width": 390, "height": 844}, "is_mobile": True, "has_touch": True}
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
