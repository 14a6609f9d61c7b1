"""A model call from a workflow: the model-call activity, with the timeouts and retries
of the run's CallPolicy. The one place a CallPolicy becomes activity options.

The call's attachments travel as the activity's second argument, apart from its prompt:
every call of a run carries the same files, so that argument is the same payload each
time, and the content-addressed payload store keeps it once (unencrypted payloads; an
encrypted one differs each time it is sealed)."""

from __future__ import annotations

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


async def call_model(call: ModelCall, policy: CallPolicy, summary: str | None = None) -> ModelReply:
    """One model call as one activity; failures surface as ActivityError once Temporal's
    retries are spent. The summary names the call in the Temporal UI."""
    return await workflow.execute_activity_method(
        ModelGateway.call_model,
        args=[call.model_copy(update={"attachments": []}), call.attachments],
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
