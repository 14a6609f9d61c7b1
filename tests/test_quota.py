"""A tenant's quota: one caller starting run after run of large inputs is refused, in one
line naming the limit, once its runs or their input bytes within the window reach the
quota; another tenant starts as before. (The report's attack, 18 runs of 8 x 1 MB,
scaled down: runs of a few KB against a quota of a few KB.)"""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import openai
import pytest
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment

from council.validation import validate_request
from runs import quota, starting
from runs.priority import Launch
from runs.quota import Quota, QuotaExceeded
from tests.temporal_fixtures import Council, request
from tests.web_fixtures import web_server

# About 5.6 KB of input per run.
LARGE = "Which of these queues suits a small team? " + "Some context. " * 400


async def counted(client: Client, tenant: str, runs: int) -> None:
    """Wait (at most 20 s) until visibility shows the tenant's runs started so far."""
    deadline = asyncio.get_running_loop().time() + 20
    while (await quota.usage(client, tenant, 3600, runs + 1)).runs < runs:
        assert asyncio.get_running_loop().time() < deadline, "visibility never showed the runs"
        await asyncio.sleep(0.2)


async def start(client: Client, tenant: str, limits: Quota, question: str) -> str:
    wanted = validate_request(request(question, max_rounds=1))
    queue = f"nobody-{uuid.uuid4().hex[:8]}"  # no worker: the runs wait, and count
    handle = await starting.start(client, wanted, queue, launch=Launch(tenant=tenant, quota=limits))
    return handle.id


@pytest.mark.parametrize("limit", ["runs", "bytes"])
async def test_a_tenant_over_its_quota_is_refused_in_one_line_another_is_not(
    temporal: WorkflowEnvironment, limit: str
) -> None:
    client = temporal.client
    hostile, honest = (f"{name}-{uuid.uuid4().hex[:8]}" for name in ("hostile", "honest"))
    # Two runs fit either way; the third passes the limit.
    limits = Quota(2, 0, 3600) if limit == "runs" else Quota(0, 15_000, 3600)
    for attempt in range(2):
        await start(client, hostile, limits, f"Try {attempt}. {LARGE}")
    await counted(client, hostile, 2)

    with pytest.raises(QuotaExceeded) as refused:
        await start(client, hostile, limits, f"Try 3. {LARGE}")
    line = str(refused.value)
    assert "\n" not in line and line.startswith("quota reached: ")
    assert f"COUNCIL_QUOTA_{limit.upper()}" in line
    if limit == "runs":
        assert "2 run(s) started in the last hour, of at most 2 per caller" in line
    else:
        assert "15,000 a caller may start" in line

    # Another tenant starts as before; the operator's own runs (no tenant) are not counted.
    assert await start(client, honest, limits, f"Honest. {LARGE}")
    wanted = validate_request(request(f"Own. {LARGE}", max_rounds=1))
    assert await starting.start(client, wanted, f"nobody-{uuid.uuid4().hex[:8]}")


async def test_one_input_larger_than_the_quota_is_refused_before_it_is_stored(
    temporal: WorkflowEnvironment,
) -> None:
    with pytest.raises(QuotaExceeded) as refused:
        await start(temporal.client, f"t-{uuid.uuid4().hex[:8]}", Quota(0, 1000, 600), LARGE)
    assert str(refused.value).startswith("this request's input is ")
    assert "over the quota of 1,000 bytes a caller may start per 10 minutes" in str(refused.value)


async def test_v1_answers_a_caller_over_its_quota_with_a_429_in_one_line(
    temporal: WorkflowEnvironment, council: Council, tmp_path: Path
) -> None:
    # A named token of this test's own: the caller is its principal, whose only runs are
    # this test's (the client's address, or COUNCIL_WEB_TOKEN's principal, would count every
    # run the suite started from 127.0.0.1 or with that token).
    token = f"quota-{uuid.uuid4().hex}"
    named = f"quota-{uuid.uuid4().hex[:8]}={token}"
    with web_server(
        temporal, council, tmp_path, COUNCIL_QUOTA_RUNS="1", COUNCIL_WEB_TOKENS=named
    ) as web:
        async with openai.AsyncOpenAI(
            base_url=f"{web.url}/v1", api_key=token, max_retries=0, timeout=60
        ) as api:
            first = await api.chat.completions.create(
                model="council", messages=[{"role": "user", "content": "Tea or coffee?"}]
            )
            assert first.choices[0].message.content
            deadline = asyncio.get_running_loop().time() + 20
            refused: openai.RateLimitError | None = None
            while refused is None:
                try:
                    await api.chat.completions.create(
                        model="council", messages=[{"role": "user", "content": "Again?"}]
                    )
                except openai.RateLimitError as error:
                    refused = error
                # Visibility had not shown the first run yet: the second started.
                assert asyncio.get_running_loop().time() < deadline, "never refused"
    assert isinstance(refused.body, dict)
    message = str(refused.body["message"])
    assert message.startswith("quota reached: ") and "of at most 1 per caller" in message
    assert "COUNCIL_QUOTA_RUNS" in message and "\n" not in message
    assert refused.body["code"] == "quota_exceeded"
