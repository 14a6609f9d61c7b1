"""Secret hygiene: a deliberation run with a recognizable API key leaves no trace of it
in the full history (as `temporal workflow show` prints it), the worker's log at debug
level, or the record. One model's provider echoes the key in its 401 error, as some do.
A provider of the test's own (tests.hostile_provider) echoes, pads, cuts and drips it,
and echoes parts of it from anywhere in it, reversed and encoded: not even 8 characters
of it in a row (nor of its encodings) reach anything the run leaves."""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path

import httpx
from temporalio.testing import WorkflowEnvironment

from app.store import store
from council import limits
from harness.processes import ROOT, free_port, start_web, start_worker, temporal_binary
from simulator import SimulatorServer
from tests.hostile_provider import HostileProvider, echoed_parts, error_name
from tests.key_pieces import leaked
from tests.temporal_fixtures import (
    FOUR_MODELS,
    TEST_API_KEY,
    store_env,
    temporal_address,
    worker_env,
)


async def _run(*command: str, env: dict[str, str] | None = None) -> str:
    import os

    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await asyncio.wait_for(process.communicate(), 120)
    assert process.returncode == 0, out.decode()
    return out.decode()


async def test_api_key_never_leaves_the_worker(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    sim.set_faults({"sim/drift": {"errors": {"401": 1.0}}})  # echoes the key it received
    address = temporal_address(temporal)
    queue = f"council-secrets-{uuid.uuid4().hex[:8]}"
    env = worker_env(
        temporal, sim, queue, COUNCIL_LOG_LEVEL="DEBUG", COUNCIL_MODELS=",".join(FOUR_MODELS)
    )
    log = tmp_path / "worker.log"
    worker = await asyncio.to_thread(start_worker, env, log)
    try:
        record = await _run(
            sys.executable,
            "starter.py",
            "start",
            "Is the key safe?",
            "--id",
            "secrets-1",
            "--wait",
            "--json",
            env=env,
        )
        shown = await _run(sys.executable, "starter.py", "show", "secrets-1", env=env)
    finally:
        worker.stop()
    history = await _run(
        temporal_binary(),
        "workflow",
        "show",
        "--workflow-id",
        "secrets-1",
        "--address",
        address,
        "--output",
        "json",
    )

    # The run really used the key, and the failing provider really echoed it.
    assert all(entry["authorized"] for entry in sim.log()["entries"])
    parsed = json.loads(record[record.index("{") :])
    [error] = parsed["errors"]
    assert error["model"] == "sim/drift" and "401" in error["message"]
    assert "[redacted]" in error["message"]
    assert len(json.loads(history)["events"]) > 50
    assert "DEBUG" in log.read_text()

    for name, text in {
        "history": history,
        "worker log": log.read_text(),
        "record": record,
        "show": shown,
    }.items():
        assert TEST_API_KEY not in text, f"the API key leaked into the {name}"


CANARY = "sk-canary-7Qm2Xv9Lr4Tz8Wb3Nd6Hj1Kp"
PIECE = 8


def pieces_of_the_canary(text: str) -> list[str]:
    """The 8-character pieces of the canary key in the text."""
    wanted = {CANARY[i : i + PIECE] for i in range(len(CANARY) - PIECE + 1)}
    return sorted(p for p in wanted if p in text)


async def _history_text(temporal: WorkflowEnvironment, workflow_id: str) -> str:
    """The run's whole history as JSON, and every payload in it as stored (each reference
    read from the payload store)."""
    history = await temporal.client.get_workflow_handle(workflow_id).fetch_history()
    storage = store.external_storage()
    payloads = [p for event in history.events for p in store.payloads_in(event)]
    resolved = await store.resolve(storage, payloads, namespace=temporal.client.namespace)
    return history.to_json() + "\n".join(p.data.decode("utf-8", "replace") for p in resolved)


def _every_blob(root: Path) -> bytes:
    """Every file of the payload store, read as it lies on disk."""
    return b"".join(path.read_bytes() for path in root.rglob("*") if path.is_file())


async def _text(client: httpx.AsyncClient, url: str) -> str:
    response = await client.get(url)
    assert response.status_code == 200, (url, response.status_code)
    return response.text


async def _read_live(client: httpx.AsyncClient, url: str, into: list[str]) -> None:
    """The page's live stream of the run, to its end."""
    async with client.stream("GET", url, timeout=httpx.Timeout(120)) as response:
        async for text in response.aiter_text():
            into.append(text)


async def test_no_piece_of_the_key_leaves_when_the_provider_leaks_it(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    """Seven members, each leaking the key its own way (tests.hostile_provider): echoed in
    every reply, padded so that the reply cap cuts inside it, named as the model that
    served the reply, in a 400 cut inside it (by its length, and by the model name's), in
    a redirect's Location cut inside it, and dripped one character at a time. The
    history (with the payload store's blobs), the store, the worker's log at DEBUG, the
    web page's log, HTML and live stream, and the record hold no 8 characters of it."""
    with HostileProvider(drip_seconds=0.06) as provider:
        members = [
            "leak/echo",
            "leak/pad",
            "leak/served",
            "leak/drip",
            "leak/error",
            error_name(provider.host, CANARY),
            "leak/redirect",
        ]
        provider.cap = limits.response_byte_cap(len(members), limits.MAX_ROUNDS)
        queue = f"council-leaks-{uuid.uuid4().hex[:8]}"
        env = {
            "TEMPORAL_ADDRESS": temporal_address(temporal),
            "COUNCIL_TASK_QUEUE": queue,
            "COUNCIL_LLM_BASE_URL": provider.url,
            "COUNCIL_LLM_API_KEY": CANARY,
            "COUNCIL_LOG_LEVEL": "DEBUG",
            **store_env(),
        }
        live: list[str] = []
        run_id = f"leaks-{uuid.uuid4().hex[:8]}"
        web_log = tmp_path / "web.log"
        members_args = [arg for m in members for arg in ("--model", m)]
        start = (sys.executable, "starter.py", "start", "Is the key safe?", "--id", run_id)
        # The worker, the page and the run start at once (the run waits for the worker).
        started = await asyncio.gather(
            asyncio.to_thread(start_worker, env, tmp_path / "worker.log"),
            asyncio.to_thread(start_web, env, port=free_port(), log_path=web_log),
            _run(
                *start,
                *members_args,
                "--chairman",
                "leak/echo",
                "--max-rounds",
                "1",
                "--wait-for-all",
                env=env,
            ),
            return_exceptions=True,
        )
        try:
            for outcome in started:
                if isinstance(outcome, BaseException):
                    raise outcome
            _, web, _ = started
            async with httpx.AsyncClient(base_url=web.extra["url"], timeout=60) as client:
                await _read_live(client, f"/deliberations/{run_id}/stream", live)
                page, record_json, record = await asyncio.gather(
                    _text(client, f"/deliberations/{run_id}"),
                    _text(client, f"/deliberations/{run_id}/record.json"),
                    _run(sys.executable, "starter.py", "show", run_id, "--json", env=env),
                )
        finally:
            for process in started[:2]:
                if not isinstance(process, BaseException):
                    process.stop()
        history = await _history_text(temporal, run_id)

    # The attack really ran: the key was sent and echoed, the drip was seen live, the
    # failing members failed, the others answered.
    assert provider.keys == {CANARY}
    parsed = json.loads(record[record.index("{") :])
    answered = {entry["model"] for entry in parsed["stage1"]}
    assert answered == {"leak/echo", "leak/pad", "leak/served", "leak/drip"}, answered
    assert len(parsed["errors"]) == 3 and all(
        "[redacted]" in e["message"] for e in parsed["errors"]
    )
    assert "Here it comes" in "".join(live) and "[redacted]" in page
    blobs = await asyncio.to_thread(_every_blob, Path(store_env()["COUNCIL_STORE"]))
    for name, text in {
        "history": history,
        "payload store": blobs.decode("utf-8", "replace"),
        "worker log (DEBUG)": (tmp_path / "worker.log").read_text(),
        "web log": web_log.read_text(),
        "page": page,
        "live stream": "".join(live),
        "record.json": record_json,
        "record (show --json)": record,
    }.items():
        assert not pieces_of_the_canary(text), f"a piece of the key reached the {name}"


# 44 characters, two of which URL encoding changes.
LONG_CANARY = "sk-canary-7Qm2Xv9Lr4/Tz8Wb3+Nd6Hj1Kp0Ys5Fg2U"


async def test_no_piece_of_the_key_leaves_when_a_provider_echoes_it_from_anywhere_or_encoded(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    """Members whose every reply (the chairman's too) echoes the key without its first
    character, from its eighth, its last 20 characters, reversed, in base64 and in hex
    (tests.hostile_provider's `parts`): the record, the Markdown, the page, every payload
    of the history (each reference resolved from the store), the store's blobs and the
    worker's log at DEBUG hold no 8 characters in a row of the key or of its encodings."""
    with HostileProvider() as provider:
        members = ["leak/parts", "leak/parts:second", "leak/parts:third"]
        env = {
            "TEMPORAL_ADDRESS": temporal_address(temporal),
            "COUNCIL_TASK_QUEUE": f"council-parts-{uuid.uuid4().hex[:8]}",
            "COUNCIL_LLM_BASE_URL": provider.url,
            "COUNCIL_LLM_API_KEY": LONG_CANARY,
            "COUNCIL_LOG_LEVEL": "DEBUG",
            **store_env(),
        }
        run_id = f"parts-{uuid.uuid4().hex[:8]}"
        worker_log = tmp_path / "worker.log"
        members_args = [arg for m in members for arg in ("--model", m)]
        start = (sys.executable, "starter.py", "start", "Is the key safe?", "--id", run_id)
        started = await asyncio.gather(
            asyncio.to_thread(start_worker, env, worker_log),
            asyncio.to_thread(start_web, env, port=free_port(), log_path=tmp_path / "web.log"),
            _run(
                *start,
                *members_args,
                "--chairman",
                "leak/parts",
                "--max-rounds",
                "1",
                "--wait",
                env=env,
            ),
            return_exceptions=True,
        )
        try:
            for outcome in started:
                if isinstance(outcome, BaseException):
                    raise outcome
            _, web, _ = started
            async with httpx.AsyncClient(base_url=web.extra["url"], timeout=60) as client:
                page, record, markdown = await asyncio.gather(
                    _text(client, f"/deliberations/{run_id}"),
                    _run(sys.executable, "starter.py", "show", run_id, "--json", env=env),
                    _run(sys.executable, "starter.py", "show", run_id, "--markdown", env=env),
                )
        finally:
            for process in started[:2]:
                if not isinstance(process, BaseException):
                    process.stop()
        history = await _history_text(temporal, run_id)

    # The attack really ran: the key was sent, and every reply (the synthesis too) echoed
    # its parts.
    assert provider.keys == {LONG_CANARY}
    parsed = json.loads(record[record.index("{") :])
    assert {entry["model"] for entry in parsed["stage1"]} == set(members)
    replies = [*(entry["response"] for entry in parsed["stage1"]), parsed["stage3"]["response"]]
    assert all("The key I was sent, in part" in text for text in replies), replies
    blobs = await asyncio.to_thread(_every_blob, Path(store_env()["COUNCIL_STORE"]))
    shown = {
        "record (show --json)": record,
        "Markdown (show --markdown)": markdown,
        "page": page,
        "history and its payloads": history,
        "payload store": blobs.decode("utf-8", "replace"),
        "worker log (DEBUG)": worker_log.read_text(),
        "web log": (tmp_path / "web.log").read_text(),
    }
    leaks = {name: found for name, text in shown.items() if (found := leaked(text, LONG_CANARY))}
    assert not leaks, "pieces of the key reached " + "; ".join(
        f"the {name}: {sum(map(len, found.values()))} ({', '.join(found)})"
        for name, found in leaks.items()
    )
    # Each part the provider echoed is one [redacted] where it stood.
    for text in replies:
        assert text.count("[redacted]") >= len(echoed_parts(LONG_CANARY)), text[:400]
