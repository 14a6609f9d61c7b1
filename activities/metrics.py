"""The model calls' metrics, recorded through the Temporal SDK's metric meter, so that the
worker's runtime exports them beside the SDK's own (COUNCIL_METRICS_PORT: Prometheus).

    council_model_calls_total{model, stage, outcome}     ok, retrying, failed, cancelled
    council_model_call_latency_seconds{model, stage}     a histogram, per attempt
    council_prompt_tokens_total{model, stage}            as the provider reported them
    council_completion_tokens_total{model, stage}
    council_model_cost_usd{model, stage}                 a histogram of the cost each call
                                                         reported (its _sum is the total)
    council_model_call_retries_total{model, stage, error_type}

The SDK adds the activity's own attributes (namespace, task queue, activity and workflow
type). The deliberation workflow counts council_deliberations_finished_total{reason} and records
the council_agreement{level} histogram (the final review's alpha).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import ParamSpec

from temporalio import activity
from temporalio.common import MetricMeter

from council.calls import ModelCall, ModelReply

# Bucket bounds for the application's histograms (the SDK's default bounds are for
# milliseconds): model calls take from a fraction of a second to minutes, and cost from
# fractions of a cent to dollars.
HISTOGRAM_BUCKETS: dict[str, list[float]] = {
    "council_model_call_latency_seconds": [
        0.25,
        0.5,
        1,
        2,
        3,
        5,
        7.5,
        10,
        15,
        20,
        30,
        45,
        60,
        90,
        120,
        180,
        300,
        600,
    ],
    "council_model_cost_usd": [
        0.00001,
        0.0001,
        0.0005,
        0.001,
        0.0025,
        0.005,
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
        5,
    ],
}


P = ParamSpec("P")
# What failed while only observing a run (a metric, the search attributes, the current
# details, a progress event), by what failed: the workflow's and the calls' alike.
OBSERVER_FAILURES = "council_observer_failures"
OBSERVER_FAILURES_HELP = "Failures of what only observes a run, by what failed"
log = logging.getLogger("council.metrics")


def observing(record: Callable[P, None]) -> Callable[P, None]:
    """A metric's recording never fails the call it observes (a provider that reports a
    negative cost, say: the SDK's metrics take no negative value): its failure is logged
    and counted (OBSERVER_FAILURES, as in the workflow), never raised."""

    @functools.wraps(record)
    def recorded(*args: P.args, **kwargs: P.kwargs) -> None:
        try:
            record(*args, **kwargs)
        except Exception:
            log.exception("a model call's metrics failed; the call goes on")
            try:
                activity.metric_meter().create_counter(
                    OBSERVER_FAILURES, OBSERVER_FAILURES_HELP
                ).add(1, {"observer": "metrics"})
            except Exception:
                log.debug("the failure could not be counted either", exc_info=True)

    return recorded


def labels(call: ModelCall) -> dict[str, str]:
    return {"model": call.model, "stage": call.stage.value if call.stage else "other"}


class CallMetrics:
    def __init__(self, meter: MetricMeter, call: ModelCall) -> None:
        self.labels = labels(call)
        self.calls = meter.create_counter("council_model_calls", "Model call attempts by outcome")
        self.latency = meter.create_histogram_float(
            "council_model_call_latency_seconds", "Model call attempt latency", "s"
        )
        self.prompt_tokens = meter.create_counter("council_prompt_tokens", "Prompt tokens")
        self.completion_tokens = meter.create_counter(
            "council_completion_tokens", "Completion tokens"
        )
        self.cost = meter.create_histogram_float(
            "council_model_cost_usd", "Cost of a model call as the provider reported it", "USD"
        )
        self.retries = meter.create_counter(
            "council_model_call_retries", "Failed model call attempts Temporal retries"
        )

    @classmethod
    def of(cls, call: ModelCall) -> CallMetrics:
        """The metrics of a call in the running activity."""
        return cls(activity.metric_meter(), call)

    @observing
    def succeeded(self, reply: ModelReply) -> None:
        self.calls.add(1, {**self.labels, "outcome": "ok"})
        self.latency.record(reply.latency_ms / 1000, self.labels)
        self.prompt_tokens.add(reply.usage.prompt_tokens, self.labels)
        self.completion_tokens.add(reply.usage.completion_tokens, self.labels)
        if reply.usage.cost_usd is not None:
            self.cost.record(reply.usage.cost_usd, self.labels)

    @observing
    def failed(self, error_type: str, retried: bool, seconds: float) -> None:
        self.calls.add(1, {**self.labels, "outcome": "retrying" if retried else "failed"})
        self.latency.record(seconds, self.labels)
        if retried:
            self.retries.add(1, {**self.labels, "error_type": error_type})

    @observing
    def cancelled(self, seconds: float) -> None:
        self.calls.add(1, {**self.labels, "outcome": "cancelled"})
        self.latency.record(seconds, self.labels)
