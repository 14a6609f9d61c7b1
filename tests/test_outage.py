"""A provider down mid-run (activities.outage): its calls pause instead of burning their
retries, the run says what it waits for, `starter.py providers` lists the paused calls,
and once the provider answers again every call resumes: no member loses its place. The
provider is the simulator as its own process, stopped for a minute and started again on
the same port; the worker is the one users run, in process, against the real dev server."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

from temporalio.testing import WorkflowEnvironment

from activities import outage
from activities.settings import GatewaySettings
from council.calls import Stage
from council.config import DEFAULT_PROVIDER
from council.models import DeliberationRecord
from harness.processes import free_port, start_simulator
from tests.temporal_fixtures import (
    FOUR_MODELS,
    TEST_API_KEY,
    council_worker,
    stage_started,
    starter,
    until,
)
from workflows import client as deliberations

OUTAGE_SECONDS = 60


async def test_a_provider_down_for_a_minute_costs_no_member_its_place(
    temporal: WorkflowEnvironment, tmp_path: Path
) -> None:
    port = free_port()
    provider = start_simulator(port, log_path=tmp_path / "sim.log")
    settings = GatewaySettings(base_url=provider.extra["url"], api_key=TEST_API_KEY)
    env = {"TEMPORAL_ADDRESS": temporal.client.service_client.config.target_host}
    try:
        async with council_worker(temporal.client, None, settings=settings) as council:
            handle = await council.start(max_rounds=1)
            await until(handle, stage_started(Stage.REVIEW), timeout=60)
            provider.stop()
            down_at = time.monotonic()

            # The stage's calls fail, the provider is found down, and every call in flight
            # waits, paused, saying for what: no attempt is spent while they wait.
            async def all_paused() -> list[deliberations.CallInFlight]:
                while True:
                    calls = await deliberations.calls_in_flight(handle)
                    waiting = f"waiting for provider {DEFAULT_PROVIDER} since"
                    if calls and all(c.paused and waiting in (c.failure or "") for c in calls):
                        return calls
                    await asyncio.sleep(0.5)

            paused = await asyncio.wait_for(all_paused(), 30)
            code, out, err = await starter("providers", "--json", env=env)
            assert code == 0, err
            listed = [c for c in json.loads(out) if c["workflow_id"] == handle.id]
            assert len(listed) == len(paused)
            assert {c["provider"] for c in listed} == {DEFAULT_PROVIDER}
            code, out, _ = await starter("providers", env=env)
            assert f"{DEFAULT_PROVIDER}: " in out and handle.id in out

            await asyncio.sleep(max(0.0, OUTAGE_SECONDS - (time.monotonic() - down_at)))
            # Not one attempt spent while paused.
            after = await deliberations.calls_in_flight(handle)
            assert sorted(c.attempt for c in after) == sorted(c.attempt for c in paused)
            provider = start_simulator(port, log_path=tmp_path / "sim.log")
            record: DeliberationRecord = await asyncio.wait_for(handle.result(), 90)
    finally:
        provider.stop()
    assert record.errors == []
    assert record.stage3 is not None
    assert len(record.stage1) == len(FOUR_MODELS)
    assert len(record.stage2) == len(FOUR_MODELS)
    left = await outage.paused_calls(temporal.client)
    assert all(call.workflow_id != handle.id for call in left)


def test_the_provider_a_paused_call_waits_for_is_read_from_its_last_failure() -> None:
    from datetime import UTC, datetime

    line = outage.waiting_line("openrouter", datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC))
    assert line == "waiting for provider openrouter since 2026-01-02 03:04:05 UTC"
    assert outage._provider_in(f"sim/atlas: {line}") == "openrouter"
    assert outage._provider_in("sim/atlas: HTTP 503 from the provider") is None


def test_three_failures_in_a_row_of_two_models_make_a_provider_down() -> None:
    async def never() -> bool:
        return False

    health = outage.Health("p", never)
    # Never reached: a setup to fix, not an outage.
    for model in "abcabc":
        assert not health.failed("ConnectionFailed", model)
    health.succeeded()
    assert not health.failed("ProviderUnavailable", "a")
    assert not health.failed("BadRequest", "b")  # not an outage: the count starts again
    assert not health.failed("ConnectionFailed", "a")
    assert not health.failed("ProviderUnavailable", "b")
    health.succeeded()
    # One model failing again and again is that model's trouble, not an outage.
    for _ in range(5):
        assert not health.failed("ProviderUnavailable", "a")
    assert health.failed("ConnectionFailed", "b")
    assert health.down_since is not None
