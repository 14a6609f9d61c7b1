"""A model call from a workflow: the model-call activity, with the timeouts and retries
of the run's CallPolicy. The one place a CallPolicy becomes activity options."""

from __future__ import annotations

from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    from activities.model_call import ModelGateway
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
        call,
        summary=summary or call.summary,
        start_to_close_timeout=timedelta(seconds=policy.call_timeout_seconds),
        heartbeat_timeout=timedelta(seconds=policy.heartbeat_timeout_seconds),
        retry_policy=retry_policy(policy),
    )
