"""A blob the store cannot give back (removed by hand, written to another store, corrupt)
reads as one line naming the blob and the store on every surface: the CLI's show, watch
and list, the page and its downloads, /v1 and MCP (it used to read as "no record yet: no
worker answers", an MCP "Error executing tool" with a traceback in the server's log, or
an HTML error page for an API client)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx
import openai
from temporalio.api.enums.v1 import EventType
from temporalio.testing import WorkflowEnvironment

from app.store import store
from tests.temporal_fixtures import Council, starter
from tests.test_mcp import stdio_server, texts
from tests.web_fixtures import web_server

# A question whose record is well past the store's threshold.
QUESTION = "Which of these queues suits a small team? " + "Some context. " * 400
LINE = re.compile(r"payload store (\S+): blob sha256:([0-9a-f]{64}) is missing \(removed by")


async def result_blob(council: Council, wid: str) -> Path:
    """The blob that holds a completed run's record."""
    handle = council.client.get_workflow_handle(wid)
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED:
            [payload] = event.workflow_execution_completed_event_attributes.result.payloads
            ref = store.reference(payload)
            assert ref is not None, "the record travels by reference"
            [driver] = council.client.data_converter.external_storage.drivers  # type: ignore[union-attr]
            assert isinstance(driver, store.LocalStore)
            return driver.path(ref.claim_data.get("namespace", ""), ref.claim_data["sha256"])
    raise AssertionError("the run did not complete")


def one_line(text: str, blob: Path) -> str:
    """The store's line in `text`, checked to name this blob, with nothing else around it
    that a user would read as a different story."""
    found = LINE.search(text)
    assert found, text[-2000:]
    assert found.group(2) == blob.name
    assert "Traceback" not in text and "no worker answers" not in text
    return found.group(0)


async def lost_record(council: Council) -> tuple[str, Path]:
    """A completed run whose record's blob was removed: its id and the blob's path."""
    handle = await council.start(QUESTION, max_rounds=1)
    await handle.result()
    blob = await result_blob(council, handle.id)
    blob.unlink()
    return handle.id, blob


async def test_a_missing_record_is_one_line_in_the_cli(
    council: Council, cli_env: dict[str, str]
) -> None:
    wid, blob = await lost_record(council)
    status, out, err = await starter("show", wid, env=cli_env, timeout=60)
    assert status == 1 and out == "", err
    one_line(err, blob)
    assert err.count("\n") == 1, err
    # The list reads no record: the run is listed as it is. (Neither does watch, which
    # follows the run's events and ends pointing to show.)
    status, out, err = await starter("list", env=cli_env, timeout=60)
    assert status == 0 and wid in out, err


async def test_a_missing_record_is_one_line_on_the_page(
    temporal: WorkflowEnvironment, council: Council, tmp_path: Path
) -> None:
    wid, blob = await lost_record(council)
    with web_server(temporal, council, tmp_path) as web:
        async with httpx.AsyncClient(base_url=web.url, timeout=60) as client:
            page = await client.get(f"/deliberations/{wid}")
            one_line(page.text, blob)
            for kind in ("json", "md"):
                download = await client.get(f"/deliberations/{wid}/record.{kind}")
                assert download.status_code == 404, download.text
                assert one_line(download.text, blob) and download.text.startswith("payload store")
                assert "\n" not in download.text


async def test_a_missing_record_is_one_line_in_mcp(
    council: Council, cli_env: dict[str, str], tmp_path: Path
) -> None:
    wid, blob = await lost_record(council)
    with (tmp_path / "mcp.log").open("w+") as log:
        async with stdio_server(cli_env, log) as mcp:
            got = await mcp.call_tool("get_deliberation", {"id": wid})
        log.seek(0)
        assert "Traceback" not in log.read()
    assert got.is_error
    [text] = texts(got)
    assert one_line(text, blob) and "\n" not in text


async def test_v1_whose_record_is_in_another_store_answers_one_line(
    temporal: WorkflowEnvironment, council: Council, tmp_path: Path
) -> None:
    """A page server given another store than the worker's: the run completes, and its
    record cannot be read there. The API client gets the store's line in the OpenAI error
    shape, not an HTML page."""
    elsewhere = tmp_path / "another-store"
    with web_server(temporal, council, tmp_path, COUNCIL_STORE=str(elsewhere)) as web:
        async with openai.AsyncOpenAI(
            base_url=f"{web.url}/v1", api_key="no-key-needed", max_retries=0, timeout=60
        ) as api:
            try:
                await api.chat.completions.create(
                    model="council", messages=[{"role": "user", "content": QUESTION[:300]}]
                )
            except openai.APIStatusError as error:
                failed = error
            else:
                raise AssertionError("the record was read from a store that does not hold it")
    assert failed.status_code == 502
    assert isinstance(failed.body, dict), failed.response.text[:500]
    message = str(failed.body["message"])
    assert f"payload store {elsewhere}" in message and "is missing" in message
    assert "\n" not in message
