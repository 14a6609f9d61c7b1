"""Model text on the page, in a real browser: a deliberation whose every model writes
Markdown (a heading, a list, a table, a code block, a link) shows those elements, and
the hostile Markdown beside it (raw script, an image with an error handler, a javascript:
link, an image to load, a data: autolink) is inert. The models are an in-test
OpenAI-compatible server that answers every call with that text. A chairman's structured
synthesis (JSON) with markup and a script in its answer and every part of its report is
inert the same way."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from activities.settings import GatewaySettings
from council.calls import Stage
from simulator.reading import prompt_text, read_prompt
from tests.temporal_fixtures import TEST_API_KEY, council_worker
from tests.web_fixtures import PAGE_SCRIPTS, web_server

MODELS = ["md/one", "md/two"]
THREE = [*MODELS, "md/three"]
PIXEL = "/pixel.png"
LONG_LINE = "x = [" + ", ".join(str(n) for n in range(100)) + "]"


def markdown_reply(root: str) -> str:
    return f"""## Plan

- keep the **schema** small
- measure ~~guess~~ first

| option | cost |
|--------|------|
| SQLite | none |

```python
print("<b>not bold</b>")
{LONG_LINE}
```

Read [the guide](https://example.org/guide).

<script>window.__pwned = 'script'</script>

<img src="x" onerror="window.__pwned = 'img'">

[click](javascript:window.__pwned='link') [again](jav&#x61;script:window.__pwned='entity')

![tracker]({root}{PIXEL})

<data:text/html,<script>window.__pwned='data'</script>>
"""


# A reviewer's critique: inline Markdown, hostile too.
CRITIQUE = (
    "Needs a `benchmark` and **a source** like [this one](https://example.org/src), "
    "not [that](javascript:window.__pwned='review')."
)


def review(labels: list[str]) -> str:
    notes = [f"**{label}** Rating: 1/5. {CRITIQUE}" for label in labels]
    ranking = [f"{i}. {label} (1/5) - {CRITIQUE}" for i, label in enumerate(labels, start=1)]
    return "\n\n".join(["## Review", *notes, "FINAL RANKING:"]) + "\n" + "\n".join(ranking)


class Models:
    """An OpenAI-compatible server on a free port whose models write Markdown: every
    answer, refinement and synthesis is the same text, every review rates each answer
    1/5 with the same critique (the prompt is read as the simulator reads it). It counts
    the requests for the image the text names."""

    def __init__(self) -> None:
        # Listening before the server runs: a connection waits in the backlog meanwhile.
        self.socket = socket.create_server(("127.0.0.1", 0))
        self.root = f"http://127.0.0.1:{self.socket.getsockname()[1]}"
        self.text = markdown_reply(self.root)
        self.pixel_requests = 0
        app = Starlette(
            routes=[
                Route("/v1/chat/completions", self.complete, methods=["POST"]),
                Route(PIXEL, self.pixel, methods=["GET"]),
            ]
        )
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))

    async def complete(self, request: Request) -> Response:
        body = await request.json()
        prompt = read_prompt(prompt_text(body["messages"]))
        text = review(sorted(prompt.answers)) if prompt.stage is Stage.REVIEW else self.text
        return JSONResponse(
            {
                "id": "md-1",
                "object": "chat.completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 90, "total_tokens": 140},
            }
        )

    async def pixel(self, request: Request) -> Response:
        self.pixel_requests += 1
        return Response(b"", media_type="image/png")


@pytest.fixture
async def models() -> AsyncIterator[Models]:
    served = Models()
    task = asyncio.create_task(served.server.serve(sockets=[served.socket]))
    yield served
    served.server.should_exit = True
    await task
    served.socket.close()


async def test_markdown_renders_as_elements_and_hostile_markdown_is_inert(
    temporal: Any, models: Models, page: Any, tmp_path: Path
) -> None:
    settings = GatewaySettings(base_url=f"{models.root}/v1", api_key=TEST_API_KEY, stream=False)
    async with council_worker(temporal.client, None, settings=settings) as council:
        record = await council.run(models=MODELS, chairman=MODELS[0], max_rounds=1)
        with web_server(temporal, council, tmp_path) as web:
            requested: list[str] = []
            dialogs: list[str] = []
            page.on("request", lambda request: requested.append(request.url))
            page.on("dialog", lambda dialog: dialogs.append(dialog.message))
            await page.goto(f"{web.url}/deliberations/{record.id}")

            # Rendered: the final answer and every member's answer.
            for scope in ["#final-answer", *(f"#answers article:nth-of-type({i})" for i in (1, 2))]:
                md = page.locator(f"{scope} .md").first
                for element in ("h2", "ul li", "strong", "s", "table th", "pre code"):
                    assert await md.locator(element).count() > 0, (scope, element)
                code = await md.locator("pre code").text_content()
                assert code == f'print("<b>not bold</b>")\n{LONG_LINE}\n'
                link = md.locator("a[href='https://example.org/guide']")
                assert await link.get_attribute("rel") == "noopener noreferrer nofollow"
                assert await md.locator("a.image-link").get_attribute("href") == (
                    f"{models.root}{PIXEL}"
                )
            # Reviews and refinements are model text too.
            # (every review round's texts: at least the first one's)
            assert await page.locator("#reviews details.review .md h2").count() >= len(MODELS)
            await page.locator("table.matrix td.cell summary").first.click()
            critique = page.locator("table.matrix td.cell .critique .md").first
            assert await critique.locator("code").text_content() == "benchmark"
            assert await page.locator("#rounds .critiques .md code").count() == len(MODELS)
            assert await page.locator("#rounds .refined .md table").count() == len(MODELS)

            # The raw toggle shows the exact text.
            raw = page.locator("#final-answer details.raw").first
            await raw.locator("summary").click()
            assert await raw.locator("pre").text_content() == record.stage3.response
            assert "<script>" in record.stage3.response  # the hostile text reached the page

            # Inert: no script ran, no image or frame, no link but http(s)/mailto.
            await page.hover("#final-answer")
            assert await page.evaluate("window.__pwned") is None
            assert dialogs == []
            assert await page.evaluate("document.querySelectorAll('img, iframe').length") == 0
            sources = "Array.from(document.scripts, s => s.getAttribute('src'))"
            assert set(await page.evaluate(sources)) <= PAGE_SCRIPTS  # the page's own
            hrefs = await page.eval_on_selector_all("a[href]", "links => links.map(a => a.href)")
            assert all(h.startswith(("http://", "https://", "mailto:")) for h in hrefs), hrefs
            assert await page.locator("a[href^='javascript:' i], a[href^='data:' i]").count() == 0
            assert not [url for url in requested if url.endswith(PIXEL)]
            assert models.pixel_requests == 0

            # On a phone, model text stays in the page's width; a long code line scrolls
            # inside its own block.
            await page.set_viewport_size({"width": 390, "height": 800})
            rights = await page.eval_on_selector_all(
                ".md",  # (those in the matrix scroll with it)
                "bs => bs.filter(b => !b.closest('table'))"
                ".map(b => b.getBoundingClientRect().right)",
            )
            assert rights and max(rights) <= 390, rights
            code = page.locator("#final-answer .md pre").first
            assert await code.evaluate("pre => pre.scrollWidth > pre.clientWidth")
            assert await code.evaluate("pre => getComputedStyle(pre).overflowX") == "auto"


# ---- a structured synthesis whose every field is hostile -----------------------------------


def hostile(field: str) -> str:
    """Markup and script that name the field they stand in."""
    return (
        f"<script>window.__pwned = '{field}'</script><b>{field} in bold</b>"
        f'<img src="x" onerror="window.__pwned = \'{field} img\'">'
    )


class StructuredModels(Models):
    """Members who state different values (5, 6, 6: the chairman is shown a split to
    resolve), and a chairman whose structured synthesis carries markup and a script in its
    answer and in every part of its report (its own contradiction, md/one against md/two
    alone, is not the computed split)."""

    async def complete(self, request: Request) -> Response:
        body = await request.json()
        prompt = read_prompt(prompt_text(body["messages"]))
        if prompt.stage is not Stage.SYNTHESIS:
            if prompt.stage is Stage.REVIEW:
                text = review(sorted(prompt.answers))
            else:
                value = 5 if body["model"] == MODELS[0] else 6  # md/two, md/three: 6
                text = f"The ball costs {value} cents.\n\nFinal answer: {value}"
            return self.reply(body["model"], text)
        synthesis = {
            "answer": f"The ball costs 5 cents.\n\n{hostile('answer')}",
            "resolutions": [{"split": 1, "resolution": hostile("resolution")}],
            "consensus": [hostile("consensus")],
            "contradictions": [
                {
                    "point": hostile("point"),
                    "positions": [
                        {"view": hostile("view one"), "held_by": [MODELS[0]]},
                        {"view": hostile("view two"), "held_by": [MODELS[1]]},
                    ],
                    "resolution": hostile("contradiction resolution"),
                }
            ],
            "unique": [{"point": hostile("unique"), "raised_by": MODELS[1]}],
            "unaddressed": [hostile("unaddressed")],
        }
        return self.reply(body["model"], json.dumps(synthesis))

    def reply(self, model: str, text: str) -> Response:
        return JSONResponse(
            {
                "id": "md-2",
                "object": "chat.completion",
                "model": model,
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 50, "completion_tokens": 90, "total_tokens": 140},
            }
        )


@pytest.fixture
async def structured_models() -> AsyncIterator[StructuredModels]:
    served = StructuredModels()
    task = asyncio.create_task(served.server.serve(sockets=[served.socket]))
    yield served
    served.server.should_exit = True
    await task
    served.socket.close()


async def test_a_structured_synthesis_with_markup_and_script_is_inert_on_the_page(
    temporal: Any, structured_models: StructuredModels, page: Any, tmp_path: Path
) -> None:
    """The chairman's JSON is model text like any other: its answer and each part of its
    report (consensus, contradictions and their views, resolutions, unique points, what none
    addressed) show on the page as the text they are, markup and all; no script runs, no
    image loads, no element of theirs is made."""
    models = structured_models
    settings = GatewaySettings(base_url=f"{models.root}/v1", api_key=TEST_API_KEY, stream=False)
    async with council_worker(temporal.client, None, settings=settings) as council:
        record = await council.run(models=THREE, chairman=MODELS[0], max_rounds=1)
        report = record.disagreement_report
        assert report is not None and report.source == "chairman"  # the JSON was read
        shown = report.model_dump_json()
        fields = [
            "consensus",
            "resolution",
            "point",
            "view one",
            "view two",
            "contradiction resolution",
            "unique",
            "unaddressed",
        ]
        assert all(json.dumps(hostile(field))[1:-1] in shown for field in fields), shown
        with web_server(temporal, council, tmp_path) as web:
            dialogs: list[str] = []
            page.on("dialog", lambda dialog: dialogs.append(dialog.message))
            await page.goto(f"{web.url}/deliberations/{record.id}")
            answer = await page.locator("#final-answer").inner_text()
            section = await page.locator("#final-report").inner_text()
            assert hostile("answer") in answer
            for field in fields:
                assert hostile(field) in section, field
            await page.hover("#final-report")
            assert await page.evaluate("window.__pwned") is None
            assert dialogs == []
            for scope in ("#final-answer", "#final-report"):
                made = await page.locator(scope).evaluate(
                    "el => el.querySelectorAll('script, b, img, iframe').length"
                )
                assert made == 0, scope
            sources = "Array.from(document.scripts, s => s.getAttribute('src'))"
            assert set(await page.evaluate(sources)) <= PAGE_SCRIPTS
