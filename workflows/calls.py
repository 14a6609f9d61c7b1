"""A model call from a workflow: the model-call activity, with the timeouts and retries
of the run's CallPolicy, on the task queue its provider's calls go to. The one place a
CallPolicy becomes activity options.

A provider with a request rate limit (`max_requests_per_second` in council.toml) has its
calls on a task queue of their own, whose rate the Temporal server enforces across every
worker (worker.py sets it when it starts). Which providers those are is the workers'
configuration: a run asks once, by a local activity (Routes), and history keeps the answer.

The call's attachments travel as the activity's second argument, apart from its prompt:
every call of a run carries the same files, so that argument is the same payload each
time, and the content-addressed payload store keeps it once (unencrypted payloads; an
encrypted one differs each time it is sealed)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import timedelta

from temporalio import workflow
from temporalio.api.common.v1 import Payload
from temporalio.common import RetryPolicy
from temporalio.converter import DataConverter

with workflow.unsafe.imports_passed_through():
    from activities.model_call import ModelGateway
    from council.attachments import Attachment
    from council.calls import ModelCall, ModelReply
    from council.models import CallPolicy

# Whether Council's workflows, and the bench's bare-Temporal ones beside them, run in the
# SDK's sandbox: the worker's runner for those declared unsandboxed runs them
# (service.worker; docs/architecture.md says why it is not the sandbox).
SANDBOXED = False
# How long the local activity that reads the routes may take.
ROUTES_TIMEOUT = timedelta(seconds=10)
# Temporal reports an over-limit payload as a retryable error; it never gets smaller.
NON_RETRYABLE_ERRORS = ["PayloadSizeError"]
BACKOFF = 2.0


def retry_policy(policy: CallPolicy) -> RetryPolicy:
    return RetryPolicy(
        initial_interval=timedelta(seconds=policy.initial_retry_seconds),
        backoff_coefficient=BACKOFF,
        maximum_interval=timedelta(seconds=policy.max_retry_seconds),
        maximum_attempts=policy.max_attempts,
        non_retryable_error_types=NON_RETRYABLE_ERRORS,
    )


def provider_queue(task_queue: str, provider: str) -> str:
    """The task queue of a provider's calls (one with a request rate limit)."""
    return f"{task_queue}.provider.{provider}"


class Routes:
    """The task queue of each model's calls: the run's own, or its provider's."""

    def __init__(self, models: Sequence[str]) -> None:
        self.models = list(dict.fromkeys(models))
        self.queues: dict[str, str] | None = None
        self._reading = asyncio.Lock()  # the first calls of a run come at once

    async def read(self) -> None:
        """Ask the workers' configuration once: which of the models have a limited
        provider."""
        async with self._reading:
            if self.queues is not None:
                return
            limited: dict[str, str] = await workflow.execute_local_activity_method(
                ModelGateway.limited_providers,
                self.models,
                start_to_close_timeout=ROUTES_TIMEOUT,
                summary="which providers have a request rate limit",
            )
            here = workflow.info().task_queue
            self.queues = {model: provider_queue(here, name) for model, name in limited.items()}

    def queue_of(self, model: str) -> str | None:
        """Its provider's queue; None: the run's own."""
        assert self.queues is not None, "Routes.read first"
        return self.queues.get(model)


async def call_model(
    call: ModelCall, policy: CallPolicy, routes: Routes | None, summary: str | None = None
) -> ModelReply:
    """One model call as one activity, on its provider's queue (`routes`; None: the run's
    own queue); failures surface as ActivityError once Temporal's retries are spent. The
    summary names the call in the Temporal UI."""
    if routes is not None:
        await routes.read()
    return await workflow.execute_activity_method(
        ModelGateway.call_model,
        args=[call.model_copy(update={"attachments": []}), call.attachments],
        task_queue=routes.queue_of(call.model) if routes is not None else None,
        summary=summary or call.summary,
        start_to_close_timeout=timedelta(seconds=policy.call_timeout_seconds),
        heartbeat_timeout=timedelta(seconds=policy.heartbeat_timeout_seconds),
        retry_policy=retry_policy(policy),
    )


async def scheduled_call(converter: DataConverter, payloads: Sequence[Payload]) -> ModelCall:
    """A model call as a run scheduled it (an ActivityTaskScheduled event's input), its
    attachments back in place."""
    call, attachments = await converter.decode(payloads, [ModelCall, list[Attachment]])
    assert isinstance(call, ModelCall)
    return call.model_copy(update={"attachments": attachments})
