"""Faults and turns are not slowness: the straggler rule judges a member by its own
replies, timed from the moment each request is sent.

On the dev server and the simulator: a member whose provider is silent for ten times the
others before its first byte is cut, with the default settings; a call retried after a
429 is not cut, however long the retry took by the stage's clock; a council served one
request at a time by a server of its own (the simulator with one slot, as llama-cpp-python's
server answers) is sent one request at a time and loses no member, whether the worker
recognises the server or is told so (`max_concurrent_requests = 1`), and the calls waiting
for their turn say so in their heartbeats; sent everything at once, the server's own
queue is the members' own time, and the last in it are cut. And the pieces, as pure
functions: a call's own time, which calls are due, which providers are our own and how
many requests they take at once. (A killed worker and a restarted server are tested under
`make chaos`'s short run: tests/test_chaos.py.)
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator

import httpx
import pytest
from temporalio.testing import WorkflowEnvironment

from activities.model_call import ModelGateway
from activities.settings import GatewaySettings
from activities.slots import Slots, props_url, reported_slots, self_hosted
from app.settings.environment import Settings
from council.calls import Stage
from council.config import parse_config
from council.stragglers import FRESH_BEAT_SECONDS, CallClock, due
from runs.finding import partial_replies
from simulator import SimulatorServer
from simulator.config import SimulatorConfig
from simulator.faults import FaultConfig
from tests.temporal_fixtures import FOUR_MODELS, TEST_API_KEY, Council, council_worker

FIVE = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift", "sim/mule"]
QUICK = {"grace_seconds": 0.5, "factor": 2.0}
ONE_ROUND = {"max_rounds": 1, "min_rounds": 1, "stop_on_convergence": False}


# ---- the pieces ---------------------------------------------------------------------


@pytest.mark.fast
def test_a_calls_own_time_counts_only_its_current_attempt_while_it_is_answered() -> None:
    answering = CallClock(
        attempt=2, running=True, beat_attempt=2, answering=True, answer_seconds=3, since_beat=1
    )
    assert answering.own_seconds() == 4
    # Waiting: for its provider to begin, for the first beat of a new attempt, for a retry.
    assert CallClock(attempt=2, running=True, beat_attempt=2).own_seconds() == 0
    was = {"answering": True, "answer_seconds": 9}
    assert CallClock(attempt=3, running=True, beat_attempt=2, **was).own_seconds() == 0
    assert CallClock(attempt=2, running=False, beat_attempt=2, **was).own_seconds() == 0
    # A beat too old to trust (the worker may be gone): its figure, not the time since.
    stale = CallClock(
        attempt=1, running=True, beat_attempt=1, answering=True, answer_seconds=1.5, since_beat=60
    )
    assert stale.own_seconds() == 1.5
    fresh = stale.model_copy(update={"since_beat": FRESH_BEAT_SECONDS - 0.5})
    assert fresh.own_seconds() == pytest.approx(1.5 + FRESH_BEAT_SECONDS - 0.5)
    clocks = {"a": answering, "b": stale}
    assert due(4, clocks) == ["a"] and due(1, clocks) == ["a", "b"] and due(5, clocks) == []


@pytest.mark.fast
def test_which_providers_are_our_own() -> None:
    for url in (
        "http://127.0.0.1:8080/v1",
        "http://localhost:11434/v1",
        "http://[::1]:8000/v1",
        "http://192.168.1.20:8080/v1",
        "http://10.0.0.5/v1",
        "http://gpu.localhost:8000/v1",
    ):
        assert self_hosted(url), url
    for url in ("https://openrouter.ai/api/v1", "https://api.openai.com/v1", "http://8.8.8.8/v1"):
        assert not self_hosted(url), url
    assert props_url("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/props"
    assert props_url("http://127.0.0.1:8080/llm/v1/") == "http://127.0.0.1:8080/llm/props"


@pytest.mark.fast
async def test_how_many_requests_a_server_of_our_own_is_sent_at_once(
    sim: SimulatorServer,
) -> None:
    async with httpx.AsyncClient() as http:
        # The simulator says how many it answers at once, as llama.cpp's server does.
        assert await reported_slots(http, sim.url) == 1024
        assert await Slots(None, sim.url).decide(http) == 1024
        with SimulatorServer(SimulatorConfig(slots=1)) as serial:  # says nothing: one
            assert await reported_slots(http, serial.url) is None
            assert await Slots(None, serial.url).decide(http) == 1
            assert await Slots(3, serial.url).decide(http) == 3  # what the user set
        # A provider elsewhere gets no limit, and is not asked.
        assert await Slots(None, "https://provider.invalid/v1").decide(http) is None


@pytest.mark.fast
async def test_a_one_at_a_time_server_elsewhere_is_one_setting_away() -> None:
    """A server at an address that is not ours gets no limit unless it is told one:
    `max_concurrent_requests = 1` in council.toml, or COUNCIL_LLM_MAX_CONCURRENT_REQUESTS=1
    for the default provider (the worker sends its calls one at a time then, as it does to
    a server of its own)."""
    url = "https://gpu.invalid/v1"
    toml = parse_config(
        f'[providers.gpu]\nbase_url = "{url}"\nmodels = ["gpu/*"]\nmax_concurrent_requests = 1\n'
    )
    told = {"COUNCIL_LLM_BASE_URL": url, "COUNCIL_LLM_MAX_CONCURRENT_REQUESTS": "1"}
    async with ModelGateway.of(Settings.read(told).llm, toml.providers) as gateway:
        limits = {name: await p.slots.decide(p.http) for name, p in gateway.providers.items()}
        assert limits == {"default": 1, "gpu": 1}
    async with ModelGateway.of(Settings.read({"COUNCIL_LLM_BASE_URL": url}).llm) as gateway:
        default = gateway.providers["default"]
        assert await default.slots.decide(default.http) is None


# ---- on the dev server --------------------------------------------------------------


async def test_a_provider_silent_before_its_first_byte_is_cut(council: Council) -> None:
    """What a slow or overloaded hosted provider looks like: nothing at all, not even
    headers, for ten times what the others take. Its call's own time runs from the
    sending of its request, so the default rule (max(2 s, 2 x the median)) cuts it."""
    council.sim.set_faults(
        {"*": {"latency": 0.5}, "sim/drift": {"first_byte_seconds": 5.0, "latency": 0.5}}
    )
    record = await council.run(models=FOUR_MODELS, max_rounds=1, min_rounds=0, quality_threshold=1)
    assert [(c.stage, c.model) for c in record.late] == [(Stage.ANSWER, "sim/drift")]
    assert [r.model for r in record.stage1] == FOUR_MODELS[:3]
    assert record.errors == [] and record.stage3 is not None
    [cut] = [e for e in council.sim.log()["entries"] if e["model"] == "sim/drift"]
    assert cut["outcome"] == "disconnected"  # cut before its first byte


async def test_a_call_retried_after_a_429_is_not_cut_as_late(council: Council) -> None:
    council.sim.set_faults(
        {
            "*": {"latency": 0.3},
            # Its first answer is a 429 (retry after 1.5 s): by the stage's clock it comes
            # long after the patience (max(0.5 s, 2 x 0.3 s)), by its own in 0.3 s.
            "sim/mule": {
                "latency": 0.3,
                "errors": {"429": 1.0},
                "retry_after": 1.5,
                "max_faults": 1,
                "stages": ["stage1"],
            },
        }
    )
    record = await council.run(models=FIVE, stragglers=QUICK, **ONE_ROUND)
    assert record.late == []
    assert [r.model for r in record.stage1] == FIVE
    assert "sim/mule" in record.label_to_model.values()
    assert record.errors == []


@pytest.fixture
async def serial_sim() -> AsyncIterator[SimulatorServer]:
    """A server of our own that answers one request at a time and says nothing of it."""
    config = SimulatorConfig(slots=1, faults=FaultConfig.model_validate({"*": {"latency": 0.3}}))
    with SimulatorServer(config) as server:
        yield server


async def test_a_council_on_a_server_that_answers_one_at_a_time_loses_no_member(
    temporal: WorkflowEnvironment, serial_sim: SimulatorServer
) -> None:
    async with council_worker(temporal.client, serial_sim) as council:
        handle = await council.start(models=FIVE, stragglers=QUICK, **ONE_ROUND)
        # The calls waiting for their turn say so (their heartbeats: not answered yet).
        queued = False
        for _ in range(100):
            replies = await partial_replies(handle)
            queued = queued or any(not r.answering and r.stage == Stage.ANSWER for r in replies)
            if queued:
                break
            await asyncio.sleep(0.05)
        record = await handle.result()
    assert queued
    assert record.late == [] and record.errors == []
    assert [r.model for r in record.stage1] == FIVE
    assert len(record.stage2) == len(FIVE) and len(record.rounds[0].reviews) == len(FIVE)
    # One at a time: the worker sent each answer's request once the one before had its
    # reply (each takes 0.3 s), so the server never had a queue.
    sent = sorted(e["started"] for e in serial_sim.log()["entries"] if e["stage"] == "stage1")
    assert len(sent) == len(FIVE)
    assert all(later - earlier >= 0.25 for earlier, later in itertools.pairwise(sent))


@pytest.mark.parametrize("told", [None, 1], ids=["recognised", "told"])
async def test_three_members_on_a_server_that_answers_one_at_a_time_all_answer(
    temporal: WorkflowEnvironment, serial_sim: SimulatorServer, told: int | None
) -> None:
    """With the default settings: the worker recognises a server on this machine (it
    reports no slots: one), or is told so by `max_concurrent_requests = 1` (what a server
    it cannot recognise needs), and the members take their turns in its queue."""
    settings = GatewaySettings(
        base_url=serial_sim.url, api_key=TEST_API_KEY, max_concurrent_requests=told
    )
    serial_sim.set_faults({"*": {"latency": 0.5}})
    async with council_worker(temporal.client, serial_sim, settings=settings) as council:
        record = await council.run(models=FIVE[:3], max_rounds=1, min_rounds=0, quality_threshold=1)
    assert record.late == [] and record.errors == []
    assert [r.model for r in record.stage1] == FIVE[:3] and len(record.stage2) == 3
    sent = sorted(e["started"] for e in serial_sim.log()["entries"] if e["stage"] == "stage1")
    assert all(later - earlier >= 0.45 for earlier, later in itertools.pairwise(sent))


async def test_a_servers_own_queue_is_its_members_time(
    temporal: WorkflowEnvironment, serial_sim: SimulatorServer
) -> None:
    """Told the server takes many requests at once (as a server at an address the worker
    cannot recognise as one of ours gets no limit), the worker sends every call together
    and the server queues them. A call's time starts when it is sent, so the last in the
    server's queue is cut like a slow member: what `max_concurrent_requests = 1` is for."""
    settings = GatewaySettings(
        base_url=serial_sim.url, api_key=TEST_API_KEY, max_concurrent_requests=64
    )
    serial_sim.set_faults({"*": {"latency": 1.0}})
    async with council_worker(temporal.client, serial_sim, settings=settings) as council:
        # Replies at 1 s and 2 s: the patience is their median, 1.5 s; the third, sent
        # with them, has been out 2 s by then (it would reply at 3 s).
        record = await council.run(
            models=FIVE[:3],
            stragglers={"grace_seconds": 0.5, "factor": 1.0},
            max_rounds=1,
            min_rounds=0,
            quality_threshold=1,
        )
    answers = [e for e in serial_sim.log()["entries"] if e["stage"] == "stage1"]
    assert max(e["started"] for e in answers) - min(e["started"] for e in answers) < 0.25
    last = max(answers, key=lambda e: e["seq"])["model"]  # the server answers in turn
    assert [(c.stage, c.model) for c in record.late] == [(Stage.ANSWER, last)]
    assert record.errors == [] and len(record.stage1) == 2
