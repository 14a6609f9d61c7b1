"""A fake model-call activity for the fast tier: `call_model` answered in this process.

Registered under the activity's own name on a worker built as worker.py builds it, it
stands where the gateway's HTTP call to a provider would be (as the samples' tests mock
an activity). Its rules:

- The replies are the simulator's personas' (simulator.personas), written from the same
  prompts, so the workflow reads what it reads in the full suite; usage is counted as
  the simulator counts it, with a cost per million tokens (None: no cost reported).
- A failing model raises the gateway's own error for an HTTP status (activities.errors),
  so retries, the record's errors and the non-retryable rule are the worker's.
- Calls of a held stage wait, heartbeating, until the test lets them go or the workflow
  cancels them; `held(n)` waits until n of them are waiting.
- Every attempt is kept in `attempts` (model, stage, attempt number); `reset()` starts
  afresh for the next test on the same worker.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from temporalio import activity

from activities.errors import application_error, status_failure
from activities.model_call import ModelGateway
from council.attachments import Attachment
from council.calls import ModelCall, ModelReply, Stage, TokenUsage
from simulator import persona_for, wire
from simulator.personas import Script, reply
from simulator.reading import prompt_text, read_prompt

HEARTBEAT_SECONDS = 0.1


class FakeModels:
    """The model calls of one test's worker."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """No failures, no held stages, free calls, the personas' ratings, no attempts."""
        self.cost_per_million_tokens: float | None = 0.0
        # Every reviewer gives every answer this rating (None: the personas' quality rule).
        self.rating: int | None = None
        self.attempts: list[tuple[str, Stage | None, int]] = []
        self._failing: dict[str, tuple[int, frozenset[Stage] | None]] = {}
        self._held: set[Stage] = set()
        self._waiting = 0
        self._changed = asyncio.Condition()
        self._released = asyncio.Event()

    def fail(self, model: str, status: int = 500, stages: Iterable[Stage] | None = None) -> None:
        """Every call of `model` (in these stages; None: all) fails with this HTTP status."""
        self._failing[model] = (status, frozenset(stages) if stages is not None else None)

    def hold(self, *stages: Stage) -> None:
        self._held.update(stages)

    def release(self) -> None:
        self._released.set()

    async def held(self, count: int, timeout: float = 30) -> None:
        """Until `count` calls wait in a held stage (an error, not a hang, if they never do)."""
        async with self._changed:
            await asyncio.wait_for(self._changed.wait_for(lambda: self._waiting >= count), timeout)

    def tried(self, model: str) -> int:
        return sum(1 for attempted, _, _ in self.attempts if attempted == model)

    # What service.worker.serving asks of a gateway besides its calls: no provider has a
    # limit, and none is watched for outages.
    @property
    def providers(self) -> dict[str, Any]:
        return {}

    def limited(self) -> dict[str, float]:
        return {}

    def watch_outages(self, client: Any, calls: Any) -> None:
        pass

    @activity.defn(name=ModelGateway.limited_providers.__name__)
    async def limited_providers(self, models: list[str]) -> dict[str, str]:
        return {}

    @activity.defn(name=ModelGateway.call_model.__name__)
    async def call_model(
        self, call: ModelCall, attachments: list[Attachment] | None = None
    ) -> ModelReply:
        attempt = activity.info().attempt
        self.attempts.append((call.model, call.stage, attempt))
        if call.stage in self._held:
            await self._wait_for_release()
        failing = self._failing.get(call.model)
        if failing is not None and (failing[1] is None or call.stage in failing[1]):
            status = failing[0]
            failure = status_failure(status, f"simulated {status} for {call.model}")
            raise application_error(failure, call.model, attempt)
        messages = [message.model_dump() for message in call.messages]
        prompt = read_prompt(prompt_text(messages))
        ratings = {label: self.rating for label in prompt.answers} if self.rating else {}
        content = reply(persona_for(call.model), prompt, Script(ratings))
        usage = wire.usage(
            [prompt_text([message]) for message in messages],
            content,
            self.cost_per_million_tokens,
        )
        return ModelReply(
            model=call.model,
            content=content,
            finish_reason="stop",
            usage=TokenUsage(
                prompt_tokens=usage["prompt_tokens"],
                completion_tokens=usage["completion_tokens"],
                total_tokens=usage["total_tokens"],
                cost_usd=usage.get("cost"),
            ),
            provider="default",
        )

    async def _wait_for_release(self) -> None:
        """Wait, heartbeating so that a cancellation reaches the call, until released."""
        async with self._changed:
            self._waiting += 1
            self._changed.notify_all()
        try:
            while not self._released.is_set():
                activity.heartbeat()
                await asyncio.sleep(HEARTBEAT_SECONDS)
        finally:
            self._waiting -= 1
