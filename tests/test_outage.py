"""A provider down mid-run (activities.outage): its calls pause instead of burning their
retries, the run says what it waits for, `starter.py providers` lists the paused calls,
and once the provider answers again every call resumes: no member loses its place. The
provider is the simulator as its own process, stopped for a minute and started again on
the same port; the worker is the one users run, in process, against the real dev server."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowExecutionStatus
from temporalio.testing import WorkflowEnvironment

from activities import outage
from activities.settings import GatewaySettings
from council.calls import Stage
from council.config import DEFAULT_PROVIDER
from council.models import DeliberationRecord
from harness.processes import free_port, start_simulator
from runs import finding
from simulator import SimulatorServer
from tests.temporal_fixtures import (
    FOUR_MODELS,
    TEST_API_KEY,
    council_worker,
    stage_started,
    starter,
    until,
)
from workflows.registry import MODEL_CALLS

OUTAGE_SECONDS = 60
# Models the provider answers with 503, every time: one caller's trouble, not an outage.
FAILING = ["failing/a", "failing/b", "failing/c", "failing/d"]


async def test_a_provider_down_for_a_minute_costs_no_member_its_place(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    port = free_port()
    provider = start_simulator(port, log_path=tmp_path / "sim.log")
    settings = GatewaySettings(base_url=provider.extra["url"], api_key=TEST_API_KEY)
    env = {"TEMPORAL_ADDRESS": temporal.client.service_client.config.target_host}
    try:
        async with council_worker(temporal.client, None, settings=settings) as council:
            # A heartbeat missed on a busy machine must not spend an attempt of its own.
            handle = await council.start(max_rounds=1, policy={"heartbeat_timeout_seconds": 10})
            await until(handle, stage_started(Stage.REVIEW), timeout=60)
            provider.stop()
            down_at = time.monotonic()

            # The stage's calls fail, the provider is found down, and every call in flight
            # waits, paused, saying for what: no attempt is spent while they wait.
            seen: list[finding.CallInFlight] = []

            async def all_paused() -> list[finding.CallInFlight]:
                while True:
                    seen[:] = await finding.calls_in_flight(handle)
                    waiting = f"waiting for provider {DEFAULT_PROVIDER} since"
                    if seen and all(c.paused and waiting in (c.failure or "") for c in seen):
                        return list(seen)
                    await asyncio.sleep(0.5)

            try:
                paused = await asyncio.wait_for(all_paused(), 60)
            except TimeoutError:
                raise AssertionError(f"not every call paused: {seen}") from None
            # Each spent one attempt on the outage, not all of them: the first call that
            # found no connection had the outage confirmed at once.
            assert all(c.attempt <= 2 for c in paused), [c.attempt for c in paused]
            code, out, err = await starter("providers", "--json", env=env)
            assert code == 0, err
            listed = [c for c in json.loads(out) if c["workflow_id"] == handle.id]
            assert len(listed) == len(paused)
            assert {c["provider"] for c in listed} == {DEFAULT_PROVIDER}
            code, out, _ = await starter("providers", env=env)
            assert f"{DEFAULT_PROVIDER}: " in out and handle.id in out

            await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
            # Not one attempt spent while paused.
            after = await finding.calls_in_flight(handle)
            assert sorted(c.attempt for c in after) == sorted(c.attempt for c in paused)
            provider = start_simulator(port, log_path=tmp_path / "sim.log")
            record: DeliberationRecord = await asyncio.wait_for(handle.result(), 90)
    finally:
        provider.stop()
    assert record.errors == []
    assert record.stage3 is not None
    assert len(record.stage1) == len(FOUR_MODELS)
    assert len(record.stage2) == len(FOUR_MODELS)
    left = await outage.paused_calls(temporal.client, MODEL_CALLS)
    assert all(call.workflow_id != handle.id for call in left)


def test_the_provider_a_paused_call_waits_for_is_read_from_its_last_failure() -> None:
    from datetime import UTC, datetime

    line = outage.waiting_line("openrouter", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert line == "waiting for provider openrouter since 2026-01-02 03:04:05 UTC"
    assert outage._provider_in(f"sim/atlas: {line}") == "openrouter"
    assert outage._provider_in("sim/atlas: HTTP 503 from the provider") is None


def test_a_provider_may_be_down_after_three_failures_of_two_models_or_no_connection() -> None:
    async def never() -> bool:
        return False

    health = outage.Health("p", never)
    # Never reached: a setup to fix, not an outage.
    for model in "abcabc":
        assert not health.failed("ConnectionFailed", model)
    health.succeeded()
    assert not health.failed("ProviderUnavailable", "a")
    assert not health.failed("BadRequest", "b")  # not an outage: the count starts again
    assert not health.failed("ProviderUnavailable", "a")
    assert not health.failed("ProviderUnavailable", "b")
    # One model failing again and again is that model's trouble, not an outage.
    health.succeeded()
    for _ in range(5):
        assert not health.failed("ProviderUnavailable", "a")
    assert health.failed("ProviderUnavailable", "b")
    # A call that finds no connection: at once.
    health.succeeded()
    assert health.failed("ConnectionFailed", "a")
    assert health.down_since is None  # a suspicion, until the probe confirms it


async def test_a_provider_is_down_only_when_its_model_list_does_not_answer_either() -> None:
    answers = True
    probes = 0

    async def probe() -> bool:
        nonlocal probes
        probes += 1
        await asyncio.sleep(0.01)
        return answers

    health = outage.Health("p", probe)
    # No call is paused here: no client.
    outages = outage.Outages(None, {}, MODEL_CALLS)  # type: ignore[arg-type]
    outages.health["p"] = health
    health.succeeded()
    for model in "abab":
        health.failed("ProviderUnavailable", model)
    # The calls that fail at once share one probe; it answers: their models' trouble.
    failing = [outages.confirmed_down("p", "ProviderUnavailable") for _ in range(4)]
    assert await asyncio.gather(*failing) == [False] * 4
    assert probes == 1 and health.down_since is None and health.failures_in_row == 0
    # More 503s a moment later: that answer stands.
    assert not await outages.confirmed_down("p", "ProviderUnavailable") and probes == 1
    # A call that finds no connection asks again; the model list does not answer: down.
    answers = False
    assert health.failed("ConnectionFailed", "a")
    assert await outages.confirmed_down("p", "ConnectionFailed")
    assert health.down_since is not None and probes == 2
    assert await outages.confirmed_down("p", "ProviderUnavailable") and probes == 2


async def test_models_that_always_fail_do_not_make_their_provider_down_for_everyone(
    temporal: WorkflowEnvironment,
    sim: SimulatorServer,
    sim_faults: Callable[[dict[str, Any]], Any],
    caplog: pytest.LogCaptureFixture,
) -> None:
    """One caller names four models the provider answers with 503 (its calls retry every
    second); another's run on the same provider takes the time it takes alone, and the
    provider is never declared down. Scaled down from what was seen (22 outages in 80 s,
    other runs 33-43 s instead of 8): two such runs beside one honest run."""
    sim_faults({"*": {"latency": 0.3}, **{m: {"errors": {"503": 1.0}} for m in FAILING}})
    caplog.set_level(logging.INFO, logger="council.outage")
    failing_policy = {"max_attempts": 20, "initial_retry_seconds": 0.2, "max_retry_seconds": 1}
    async with council_worker(temporal.client, sim) as council:
        began = time.monotonic()
        await council.run(max_rounds=1)  # alone (and the provider has answered this worker)
        alone = time.monotonic() - began
        failing = [
            await council.start("Fail?", models=FAILING, max_rounds=1, policy=failing_policy)
            for _ in range(2)
        ]
        try:
            began = time.monotonic()
            record = await asyncio.wait_for(council.run(max_rounds=1), 120)
            beside = time.monotonic() - began
            # The failing runs were still at it when the honest run ended.
            still_failing = [
                h for h in failing if (await h.describe()).status == WorkflowExecutionStatus.RUNNING
            ]
        finally:
            for handle in failing:
                await handle.terminate("test over")
    downs = [r.getMessage() for r in caplog.records if " is down" in r.getMessage()]
    print(f"honest run alone {alone:.1f} s, beside the failing models {beside:.1f} s; {downs}")
    assert still_failing
    assert record.errors == [] and record.stage3 is not None
    assert downs == []
    assert beside < 2 * alone + 5
