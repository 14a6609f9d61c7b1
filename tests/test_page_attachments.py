"""Attachments on the page, in a real browser: files chosen in the start form's input and
files dropped on the form reach every member; the deliberation page lists them and links
each to a download that is never shown as a page (a PDF as itself, and its text beside);
a file that cannot be attached is refused beside the field, with what the user typed
kept."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import httpx

from council.models import DeliberationRecord
from runs import finding
from tests.attachment_files import pdf, png
from tests.temporal_fixtures import FOUR_MODELS, Council
from tests.web_fixtures import WebServer

HOSTILE_HTML = b"<html><body><script>window.__pwned = 1</script>hello</body></html>\n"


async def record_of(council: Council, page: Any) -> DeliberationRecord:
    await page.wait_for_url(re.compile(r"/deliberations/council-"))
    workflow = page.url.rsplit("/", 1)[-1]
    return await finding.handle(council.client, workflow).result()


async def start_with_files(page: Any, web: WebServer, question: str) -> None:
    await page.goto(web.url)
    await page.fill("#question", question)
    await page.fill("#models", "\n".join(FOUR_MODELS[:3]))
    await page.fill("#max_rounds", "1")


async def test_files_chosen_in_the_form_are_listed_and_linked(
    web: WebServer, page: Any, council: Council, tmp_path: Path
) -> None:
    files = {
        "sales.csv": b"month,units\njan,12\nfeb,30\n",
        "chart.png": png(),
        "page.html": HOSTILE_HTML,
        "report.pdf": pdf("Quarterly revenue rose 12 percent"),
    }
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    await start_with_files(page, web, "What do the attached files show?")
    await page.set_input_files("#attachments", [str(tmp_path / name) for name in files])
    await page.click("#start-button")
    record = await record_of(council, page)
    assert [a.name for a in record.attachments] == list(files)
    for call in council.sim.log()["entries"]:
        assert [a["name"] for a in call["attachments"]] == list(files)

    await page.reload()
    links = page.locator("#attachments a:not(.as-text)")
    assert await links.all_text_contents() == list(files)
    async with httpx.AsyncClient(base_url=web.url) as http:
        for index, (name, data) in enumerate(files.items()):
            href = await links.nth(index).get_attribute("href")
            sha = hashlib.sha256(data).hexdigest()
            assert href == f"/deliberations/{record.id}/attachments/{sha}"
            got = await http.get(href)
            assert got.status_code == 200
            assert got.headers["x-content-type-options"] == "nosniff"
            assert got.headers["content-disposition"].startswith("attachment; filename=")
            if name == "chart.png":
                assert got.content == data and got.headers["content-type"] == "image/png"
            elif name == "report.pdf":  # the file itself, and beside it the text read
                assert got.content == data and got.headers["content-type"] == "application/pdf"
                assert 'filename="report.pdf"' in got.headers["content-disposition"]
                text_link = page.locator(f'#attachments li[data-sha256="{sha}"] a.as-text')
                assert await text_link.get_attribute("href") == f"{href}/text"
                text = await http.get(f"{href}/text")
                assert text.text == "Quarterly revenue rose 12 percent"
                assert text.headers["content-type"] == "text/plain; charset=utf-8"
                assert 'filename="report.pdf.txt"' in text.headers["content-disposition"]
                assert text.headers["x-content-type-options"] == "nosniff"
            else:  # an HTML file is text, never a page of the site
                assert got.content == data
                assert got.headers["content-type"] == "text/plain; charset=utf-8"
        missing = await http.get(f"/deliberations/{record.id}/attachments/{'0' * 64}")
        assert missing.status_code == 404
    # Following the link downloads the file; nothing in it ran on the site.
    async with page.expect_download() as download:
        await links.nth(2).click()
    assert (await download.value).suggested_filename == "page.html"
    assert await page.evaluate("window.__pwned") is None
    # Only the PDF has a text beside it; its link downloads the PDF itself.
    assert await page.locator("#attachments a.as-text").count() == 1
    async with page.expect_download() as download:
        await links.nth(3).click()
    assert (await download.value).suggested_filename == "report.pdf"
    # The history keeps a reference to the PDF's bytes, never the bytes themselves.
    history = await finding.handle(council.client, record.id).fetch_history()
    assert files["report.pdf"] not in b"".join(e.SerializeToString() for e in history.events)


async def test_files_dropped_on_the_form_are_attached(
    web: WebServer, page: Any, council: Council
) -> None:
    await start_with_files(page, web, "What do the dropped notes say?")
    dropped = await page.evaluate_handle(
        """() => {
            const files = new DataTransfer();
            files.items.add(new File(["# Notes\\nShip on Friday.\\n"], "notes.md",
                                     {type: "text/markdown"}));
            files.items.add(new File(["a,b\\n1,2\\n"], "table.csv", {type: "text/csv"}));
            return files;
        }"""
    )
    await page.dispatch_event("#start-form", "dragover", {"dataTransfer": dropped})
    assert "dropping" in (await page.get_attribute("#start-form", "class") or "")
    await page.dispatch_event("#question", "drop", {"dataTransfer": dropped})
    assert await page.evaluate("document.querySelector('#attachments').files.length") == 2
    await page.click("#start-button")
    record = await record_of(council, page)
    assert [(a.name, a.media_type) for a in record.attachments] == [
        ("notes.md", "text/markdown"),
        ("table.csv", "text/csv"),
    ]
    for call in council.sim.log()["entries"]:
        assert {a["name"] for a in call["attachments"]} == {"notes.md", "table.csv"}


async def test_a_file_that_cannot_be_attached_is_refused_beside_the_field(
    web: WebServer, page: Any, council: Council, tmp_path: Path
) -> None:
    (tmp_path / "blob.bin").write_bytes(bytes(range(256)))
    (tmp_path / "notes.txt").write_text("fine")
    await start_with_files(page, web, "Is this file refused?")
    await page.set_input_files(
        "#attachments", [str(tmp_path / "notes.txt"), str(tmp_path / "blob.bin")]
    )
    await page.click("#start-button")
    error = await page.locator("#error-attachments").text_content()
    assert error is not None and error.startswith(
        "Attachments: blob.bin is a binary file that is neither a PDF nor an image (allowed: "
    )
    assert await page.input_value("#question") == "Is this file refused?"  # kept
    assert await page.input_value("#max_rounds") == "1"
    chosen = await page.locator("#attachments-chosen").text_content() or ""
    assert "notes.txt, blob.bin" in chosen and "choose them again" in chosen
    assert council.sim.log()["total"] == 0  # nothing started
