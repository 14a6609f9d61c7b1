"""Performance fixes found by profiling the worker under load (bench/, `make bench`):
each must keep the protocol's results exactly as they were."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
from datetime import timedelta

import pytest
from temporalio.testing import ActivityEnvironment

from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from council import prompts
from council import reviews as reviews_module
from council.calls import ModelCall, Stage
from council.reviews import parse_review
from tests.temporal_fixtures import Council

MODELS = {f"Response {x}": f"m/{x.lower()}" for x in "ABCDE"}


async def test_a_deliberation_parses_each_review_once(
    council: Council, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The workflow used to parse every review three times (for the record, for the
    critiques, and again when the next round began): the top hotspot of our own code in
    the worker's profile."""
    parsed: list[str] = []

    def counting(text, shown, *rules):
        parsed.append(text)
        return parse_review(text, shown, *rules)

    # The workflow's sandbox imports parse_review from council.reviews for each new run.
    monkeypatch.setattr(reviews_module, "parse_review", counting)
    council.sim.set_faults({"*": {"structured": False}})  # reviews in prose, for parse_review
    record = await council.run(quality_threshold=5, max_rounds=2, stop_on_convergence=False)
    review_stages = 1 + len(record.rounds)
    assert len(record.rounds) == 2
    assert len(parsed) == review_stages * 4  # was 32: 12 + 8 for the critiques + 12 again


@pytest.mark.fast
async def test_a_call_shorter_than_the_heartbeat_interval_sends_no_heartbeat(sim) -> None:
    """The first heartbeat used to go out as the call started: one write on the server
    for every model call, however short."""
    beats: list[tuple] = []
    env = ActivityEnvironment()
    env.info = dataclasses.replace(env.info, heartbeat_timeout=timedelta(seconds=3))
    env.on_heartbeat = lambda *details: beats.append(details)
    gateway = ModelGateway(GatewaySettings(base_url=sim.url))
    messages = prompts.answer_prompt("Why is the sky blue?", 4_000)
    call = ModelCall(model="sim/atlas", messages=messages, stage=Stage.ANSWER)
    try:
        reply = await env.run(gateway.call_model, call)
    finally:
        await gateway.aclose()
    assert reply.content
    assert beats == []


@pytest.mark.fast
def test_httpcore_finds_sniffio() -> None:
    """httpcore imports sniffio whenever it sets up a lock, several times per request.
    Without the package each of those was a failed import that searched sys.path: the
    worker's costliest line under load (a fifth of its CPU per deliberation with it)."""
    from httpcore._synchronization import current_async_library

    assert importlib.util.find_spec("sniffio") is not None

    async def library() -> str:
        return current_async_library()

    assert asyncio.run(library()) == "asyncio"
