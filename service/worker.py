"""The worker this build runs: the deliberation workflows, the model-call activity at this
build, the provider task queues and their rates, and the search attributes it needs.
`serving` runs one on a client until its block ends (the command, service.command, and the
tests' in-process worker alike).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import RateLimit, TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    UpdateTaskQueueConfigRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import UnsandboxedWorkflowRunner, Worker, WorkflowRunner
from temporalio.worker.workflow_sandbox import (
    RestrictedWorkflowAccessError,
    SandboxedWorkflowRunner,
    SandboxRestrictions,
)

from activities.call_clocks import CallClocks
from activities.model_call import PARTIAL_TEXT_SECONDS, ModelGateway
from activities.shares import CallShares, waiting_calls
from activities.tools import ToolBox
from app.settings import environment as app_settings
from app.temporal import deployment
from app.temporal.connection import (
    task_queue,
)
from council.config import DEFAULT_PROVIDER
from council.limits import MAX_MODELS
from runs.attributes import ensure_search_attributes
from workflows import search_attributes
from workflows.calls import provider_queue
from workflows.registry import MODEL_CALLS, WORKFLOWS

log = logging.getLogger("council.worker")


# The most calls a workflow task may start in this worker at once: a stage's, the largest
# council's.
EAGER_CALLS = MAX_MODELS

# The SDK's sandbox, passing through only what does not replay: what it passes by default
# (the standard library, the SDK, pydantic), our pure modules (council, grading) and the
# activities the workflows name. Every module of workflows/ is imported again in it for each
# run, so that a clock, randomness or file read there fails the run, as
# tests/test_determinism.py refuses it in the code. Council's own workflows are declared
# unsandboxed (`sandboxed=False`): the sandbox's work on every workflow task and every
# payload was an eighth of a saturated worker's CPU (bench/RESULTS.md). The suite's workers
# and the replay tests still run them in it (`checked`).
SANDBOX = SandboxedWorkflowRunner(
    restrictions=SandboxRestrictions.default.with_passthrough_modules(
        "council", "grading", "activities"
    )
)


def unsandboxed_runner(checked: bool) -> WorkflowRunner:
    """What runs the workflows declared unsandboxed: the sandbox itself when `checked`."""
    return SANDBOX if checked else UnsandboxedWorkflowRunner()


def call_limits() -> tuple[int, float | None]:
    """The calls this process takes from its task queue at once: those it sends
    (COUNCIL_MAX_CONCURRENT_CALLS, default 200) and those that wait for their turn
    (COUNCIL_MAX_WAITING_CALLS, activities.shares); and COUNCIL_MAX_CALLS_PER_SECOND (the
    task queue; unset: no limit), from the settings."""
    settings = app_settings.current()
    sent = settings.max_concurrent_calls
    return sent + waiting_calls(sent, settings.max_waiting_calls), settings.max_calls_per_second


def call_shares() -> CallShares:
    """The calls this process sends at once, of one tenant and of one run (the settings)."""
    settings = app_settings.current()
    return CallShares.of_worker(
        settings.max_concurrent_calls, settings.max_calls_per_tenant, settings.max_calls_per_run
    )


def default_toolbox(gateway: ModelGateway) -> ToolBox:
    """The built-in tools alone, the providers' keys kept out of their results."""
    redactor = getattr(gateway, "redactor", None)  # (a test's fake gateway has none)
    return ToolBox(secrets=redactor.secrets if redactor else ())


def build_worker(
    client: Client,
    gateway: ModelGateway,
    queue: str | None = None,
    workflows: Sequence[type] = WORKFLOWS,
    activities: Sequence[Callable[..., Any]] = (),
    build: str | None = None,
    checked: bool = False,
    *,
    toolbox: ToolBox,
    **options: Any,
) -> Worker:
    """The worker's Temporal worker: these workflows, the model-call activity, the
    straggler watch and the tools of `toolbox`, and any other activities, at this build of
    the task queue's deployment (app.temporal.deployment; runs are pinned to the build they start
    on), with the concurrency, rate limit and shutdown options below; `checked`:
    Council's workflows in the sandbox too (SANDBOX: the tests)."""
    concurrent_calls, calls_per_second = call_limits()
    queue = queue or task_queue()
    return Worker(
        client,
        task_queue=queue,
        workflows=list(workflows),
        deployment_config=deployment.deployment_config(queue, build or deployment.build_id()),
        activities=[
            gateway.call_model,
            gateway.limited_providers,
            CallClocks(client).await_late_calls,
            toolbox.list_tools,
            toolbox.call_tool,
            *activities,
        ],
        max_concurrent_activities=concurrent_calls,
        # A provider quota, enforced by the server across every worker of the queue.
        max_task_queue_activities_per_second=calls_per_second,
        # Eager activities (where the server allows them) skip the task queue, and with it
        # the server's rate limit: only without a limit.
        disable_eager_activity_execution=calls_per_second is not None,
        # Every call of a stage starts with the workflow task that schedules it (the SDK's
        # default is 3): a fourth member's call no longer waits behind the queue's backlog
        # while the others run, to be taken for a straggler under load.
        max_eager_activity_reservations_per_workflow_task=EAGER_CALLS,
        graceful_shutdown_timeout=timedelta(seconds=5),
        workflow_runner=SANDBOX,
        unsandboxed_workflow_runner=unsandboxed_runner(checked),
        # In the sandbox, code it refuses fails the run at once (a failed workflow task
        # would be retried for good, and a test wait for its timeout).
        workflow_failure_exception_types=[RestrictedWorkflowAccessError] if checked else [],
        # Heartbeats carry a streaming reply's text so far: send them on within a second.
        max_heartbeat_throttle_interval=timedelta(seconds=PARTIAL_TEXT_SECONDS),
        default_heartbeat_throttle_interval=timedelta(seconds=PARTIAL_TEXT_SECONDS),
        # After a crash, the dead worker's sticky queue holds the next workflow task
        # until this passes (SDK default 10 s); then any worker takes it from history.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=4),
        **options,
    )


def provider_workers(
    client: Client, gateway: ModelGateway, queue: str, build: str, **options: Any
) -> list[Worker]:
    """A worker for each provider with a request rate limit, on the provider's own task
    queue (workflows.calls.provider_queue), in the same deployment version as the main
    worker: the calls of a run pinned to this build come here."""
    concurrent_calls, _ = call_limits()
    return [
        Worker(
            client,
            task_queue=provider_queue(queue, name),
            activities=[gateway.call_model],
            deployment_config=deployment.deployment_config(queue, build),
            max_concurrent_activities=concurrent_calls,
            graceful_shutdown_timeout=timedelta(seconds=5),
            max_heartbeat_throttle_interval=timedelta(seconds=PARTIAL_TEXT_SECONDS),
            default_heartbeat_throttle_interval=timedelta(seconds=PARTIAL_TEXT_SECONDS),
            **options,
        )
        for name in gateway.limited()
    ]


async def set_provider_rates(client: Client, queue: str, rates: dict[str, float]) -> None:
    """Each limited provider's rate, set on its task queue: the Temporal server hands out
    no more of its calls per second, whichever worker polls. A server that refuses says
    why in the log, and the provider is then not limited."""
    for name, rate in rates.items():
        try:
            await client.workflow_service.update_task_queue_config(
                UpdateTaskQueueConfigRequest(
                    namespace=client.namespace,
                    identity=client.identity,
                    task_queue=provider_queue(queue, name),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
                    update_queue_rate_limit=UpdateTaskQueueConfigRequest.RateLimitUpdate(
                        rate_limit=RateLimit(requests_per_second=rate),
                        reason=f"council.toml: the provider {name}'s max_requests_per_second",
                    ),
                )
            )
        except RPCError as error:
            log.warning(
                "could not set the rate limit of the provider %s (%g per second) on its task "
                "queue: %s; its calls are not limited",
                name,
                rate,
                error.message,
            )
        else:
            log.info(
                "provider %s: at most %g requests per second, all workers together", name, rate
            )


# How often a worker counts the processes that share the providers' concurrency limits.
SHARE_SECONDS = 10.0


async def share_slots(client: Client, gateway: ModelGateway, queue: str) -> None:
    """Keep each limited provider's slots split between the worker processes of the task
    queue (activities.slots): the processes polling its activities, as the server sees
    them (those seen in the last minutes: a process that died still counts a while, so
    the shares err low)."""
    limited = [p.slots for p in gateway.providers.values() if p.slots.limit is not None]
    began = time.monotonic()
    while limited:
        try:
            described = await client.workflow_service.describe_task_queue(
                DescribeTaskQueueRequest(
                    namespace=client.namespace,
                    task_queue=TaskQueue(name=queue),
                    task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
                )
            )
        except RPCError as error:
            log.info("could not count the worker processes: %s", error.message)
        else:
            count = len({poller.identity for poller in described.pollers})
            for slots in limited:
                await slots.set_workers(count)
        # Often while the other processes start, then every SHARE_SECONDS.
        await asyncio.sleep(1.0 if time.monotonic() - began < 3 * SHARE_SECONDS else SHARE_SECONDS)


@contextlib.asynccontextmanager
async def serving(
    client: Client,
    gateway: ModelGateway,
    queue: str | None = None,
    take_over: bool = False,
    **options: Any,
) -> AsyncIterator[str]:
    """Run build_worker's worker (and a worker for each provider with a request rate
    limit, whose rate is set on its task queue) until the block ends, with the tools of
    `toolbox` (default: the built-ins alone), closed once the workers have stopped; once
    it polls, its version is made current if its deployment has none, or whatever is
    current with `take_over` (app.temporal.deployment.adopt). Yields the line that says which
    build new runs go to. Meanwhile the providers' concurrency limits are split between the worker
    processes (share_slots), each tenant and run sends its share of the calls
    (activities.shares), and a provider's calls pause while it is down
    (activities.outage)."""
    queue = queue or task_queue()
    build = options.pop("build", None) or deployment.build_id()
    toolbox = options.pop("toolbox", None) or default_toolbox(gateway)
    await set_provider_rates(client, queue, gateway.limited())
    gateway.watch_outages(client, MODEL_CALLS)
    gateway.shares = call_shares()
    outages = getattr(gateway, "outages", None)  # (a test's fake gateway has none)
    if outages is not None:
        # Calls a process that died left paused: watched here, resumed when they can be.
        await outages.adopt(DEFAULT_PROVIDER)
    try:
        async with contextlib.AsyncExitStack() as workers:
            for each in provider_workers(client, gateway, queue, build):
                await workers.enter_async_context(each)
            await workers.enter_async_context(
                build_worker(client, gateway, queue, build=build, toolbox=toolbox, **options)
            )
            sharing = asyncio.create_task(share_slots(client, gateway, queue))
            try:
                yield await deployment.adopt(client, deployment.version(queue, build), take_over)
            finally:
                sharing.cancel()
    finally:
        await toolbox.aclose()  # the MCP servers' sessions, once no call can use them


def metrics_port() -> int | None:
    """COUNCIL_METRICS_PORT: where the worker serves Prometheus metrics (unset: nowhere)."""
    return app_settings.current().metrics_port


def metrics_host() -> str:
    """COUNCIL_METRICS_HOST: the address the metrics listen on (default loopback)."""
    return app_settings.current().metrics_host


async def register_search_attributes(client: Client) -> None:
    try:
        added = await ensure_search_attributes(client)
    except RPCError as err:  # e.g. Temporal Cloud, or a key without operator rights
        log.warning(
            "could not check or register the search attributes %s on namespace %s (%s): an "
            "operator must register them (docs/deployment.md)",
            ", ".join(key.name for key in search_attributes.ALL),
            client.namespace,
            err.message,
        )
        added = []
    if added:
        log.info("registered search attributes: %s", ", ".join(added))
