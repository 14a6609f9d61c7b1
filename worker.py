"""The Council worker: runs the deliberation workflow and the model-call activity.

    python worker.py                     one worker process
    python worker.py --processes auto    one per core, under a supervisor (app/supervisor.py)

Reads TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE (or a Temporal config profile),
COUNCIL_TASK_QUEUE, COUNCIL_LLM_BASE_URL and COUNCIL_LLM_API_KEY (or OPENROUTER_API_KEY),
and council.toml (COUNCIL_CONFIG, else ./council.toml) for more providers.
The API key stays in this process: it never enters a workflow input, result or history.
Throughput: COUNCIL_MAX_CONCURRENT_CALLS (calls this worker sends at once, default 200;
of them COUNCIL_MAX_CALLS_PER_TENANT and COUNCIL_MAX_CALLS_PER_RUN, and
COUNCIL_MAX_WAITING_CALLS more wait for their turn: activities/shares.py) and
COUNCIL_MAX_CALLS_PER_SECOND (model calls started per second on the whole task queue,
all workers together). Payload encryption: COUNCIL_PAYLOAD_KEY (see app/codec.py).
COUNCIL_WORKER_PROCESSES: the default of --processes. With N processes, process i serves
its metrics on COUNCIL_METRICS_PORT + i - 1.
"""

from __future__ import annotations

# First: a Python without Council's packages is told so in one line, and the fix.
from app import dependencies  # noqa: F401  # isort: skip

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator, Callable, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any, NoReturn

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import RateLimit, TaskQueue
from temporalio.api.workflowservice.v1 import (
    DescribeTaskQueueRequest,
    UpdateTaskQueueConfigRequest,
)
from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker
from temporalio.worker.workflow_sandbox import SandboxedWorkflowRunner, SandboxRestrictions

from activities.call_clocks import CallClocks
from activities.metrics import HISTOGRAM_BUCKETS
from activities.model_call import PARTIAL_TEXT_SECONDS, ModelGateway
from activities.settings import SettingsError
from activities.shares import CallShares, waiting_calls
from app import commands, connection, deployment, supervisor
from app import config as app_config
from app import settings as app_settings
from app.connection import (
    ConfigError,
    ServerUnreachable,
    connect,
    encryption_note,
    store_note,
    task_queue,
)
from app.supervisor import ProcessCountError, Supervisor
from council import numbers
from council.config import DEFAULT_PROVIDER, ConfigProblem
from council.limits import MAX_MODELS
from workflows import search_attributes
from workflows.calls import provider_queue
from workflows.registry import MODEL_CALLS, WORKFLOWS
from workflows.search_attributes import ensure_search_attributes

log = logging.getLogger("council.worker")


# The most calls a workflow task may start in this worker at once: a stage's, the largest
# council's.
EAGER_CALLS = MAX_MODELS


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


def build_worker(
    client: Client,
    gateway: ModelGateway,
    queue: str | None = None,
    workflows: Sequence[type] = WORKFLOWS,
    activities: Sequence[Callable[..., Any]] = (),
    build: str | None = None,
    **options: Any,
) -> Worker:
    """The worker's Temporal worker: these workflows, the model-call activity and the
    straggler watch (and any other activities), at this build of the task queue's
    deployment (app.deployment; runs are pinned to the build they start on), with the
    concurrency, rate limit and shutdown options below."""
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
        # Every run in the sandbox, its calls checked (no clock, no randomness), but no
        # module imported again for each run: ours define classes and functions only.
        workflow_runner=SandboxedWorkflowRunner(
            restrictions=SandboxRestrictions.default.with_passthrough_all_modules()
        ),
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
    limit, whose rate is set on its task queue) until the block ends; once it polls, its
    version is made current if its deployment has none, or whatever is current with
    `take_over` (app.deployment.adopt). Yields the line that says which build new runs go
    to. Meanwhile the providers' concurrency limits are split between the worker
    processes (share_slots), each tenant and run sends its share of the calls
    (activities.shares), and a provider's calls pause while it is down
    (activities.outage)."""
    queue = queue or task_queue()
    build = options.pop("build", None) or deployment.build_id()
    await set_provider_rates(client, queue, gateway.limited())
    gateway.watch_outages(client, MODEL_CALLS)
    gateway.shares = call_shares()
    outages = getattr(gateway, "outages", None)  # (a test's fake gateway has none)
    if outages is not None:
        # Calls a process that died left paused: watched here, resumed when they can be.
        await outages.adopt(DEFAULT_PROVIDER)
    async with contextlib.AsyncExitStack() as workers:
        for each in provider_workers(client, gateway, queue, build):
            await workers.enter_async_context(each)
        await workers.enter_async_context(
            build_worker(client, gateway, queue, build=build, **options)
        )
        sharing = asyncio.create_task(share_slots(client, gateway, queue))
        try:
            yield await deployment.adopt(client, deployment.version(queue, build), take_over)
        finally:
            sharing.cancel()


def metrics_port() -> int | None:
    """COUNCIL_METRICS_PORT: where the worker serves Prometheus metrics (unset: nowhere)."""
    return app_settings.current().metrics_port


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


async def run(
    supervisor_pid: int | None = None, process_index: int | None = None, take_over: bool = False
) -> None:
    config = app_config.load(keys=True)  # council.toml's providers (an error: exit 2)
    port = metrics_port()
    client = await connect(runtime=connection.runtime(port, HISTOGRAM_BUCKETS))
    await register_search_attributes(client)
    gateway = ModelGateway.from_env(providers=config.providers)
    # Before the first deliberation, not during it: connections to the providers.
    for name, opened in (await gateway.warm_up()).items():
        where = gateway.providers[name].settings.host
        if opened:
            log.info("connected to the provider %s at %s", name, where)
        else:
            log.warning("the provider %s at %s does not answer yet", name, where)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    # Under a supervisor (--processes N): stop when it is gone.
    orphaned = (
        loop.create_task(supervisor.stop_when_orphaned(supervisor_pid, stop.set))
        if supervisor_pid is not None
        else None
    )
    log.info("%s", encryption_note(client.data_converter))
    log.info("%s", store_note(client.data_converter))
    if port:
        log.info("Prometheus metrics on http://0.0.0.0:%d/metrics", port)
    providers = ", ".join(
        f"{name} {p.settings.host} ({'API key set' if p.settings.api_key else 'no API key'})"
        for name, p in gateway.providers.items()
    )
    which = f" (process {process_index}, pid {os.getpid()})" if process_index else ""
    async with serving(client, gateway, take_over=take_over) as routing:
        log.info("%s", routing)
        # Printed whatever the log level, once the worker polls and new runs can start:
        # harness.processes.start_worker waits for this line.
        print(
            f"worker ready: task queue {task_queue()}, namespace {client.namespace}, build "
            f"{deployment.build_id()}, models via {providers}{which}",
            file=sys.stderr,
            flush=True,
        )
        await stop.wait()
        log.info("shutting down: in-flight calls get 5 s to finish, then Temporal retries them")
    if orphaned is not None:
        orphaned.cancel()
    await gateway.aclose()


# ---- several processes --------------------------------------------------------------------


async def check_before_starting() -> None:
    """What every worker process would find wrong, found once before any starts (an error:
    exit 2): the settings, the server and namespace; and the search attributes registered
    once, not by N processes at the same moment."""
    config = app_config.load(keys=True)
    metrics_port()
    call_limits()
    async with ModelGateway.from_env(providers=config.providers):
        pass
    await register_search_attributes(await connect())


def run_processes(count: int, take_over: bool = False) -> int:
    """`count` worker processes under a supervisor until SIGINT or SIGTERM; its status."""
    base = metrics_port()
    if base is not None and base + count - 1 > 65535:
        raise ConfigError(
            f"COUNCIL_METRICS_PORT must be at most {65536 - count} with {count} worker "
            f"processes, which use the ports from it upwards (got {base})"
        )
    connection.run(check_before_starting())
    this_file = str(Path(__file__).resolve())

    def command(index: int) -> list[str]:
        return [
            sys.executable,
            this_file,
            "--processes",
            "1",
            "--supervisor-pid",
            str(os.getpid()),
            "--process-index",
            str(index),
            *(["--make-current"] if take_over else []),
        ]

    def env(index: int) -> dict[str, str]:
        return {"COUNCIL_METRICS_PORT": str(base + index - 1)} if base is not None else {}

    ports = f"; metrics on ports {base} to {base + count - 1}" if base is not None else ""
    log.info("starting %d worker processes on task queue %s%s", count, task_queue(), ports)
    return asyncio.run(Supervisor(command, count, env).run())


# ---- the command ------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise ConfigError(message)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = _Parser(
        prog=commands.invoked_as(commands.WORKER, "worker.py"),
        description=__doc__.splitlines()[0],
    )
    parser.add_argument(
        "--processes",
        metavar="N",
        help=f"worker processes on this machine, 1 to {supervisor.MAX_PROCESSES}, or auto (one "
        "per core): more than 1 runs them under a supervisor that restarts one that dies "
        "(default: COUNCIL_WORKER_PROCESSES, else 1)",
    )
    parser.add_argument(
        "--make-current",
        action="store_true",
        help="make this build the current version of the task queue's deployment even when "
        "another is (a local server: what make up and make demo do); without it, the build "
        "becomes current only when the deployment has none",
    )
    # Set by the supervisor for its children.
    parser.add_argument("--supervisor-pid", type=numbers.whole_argument, help=argparse.SUPPRESS)
    parser.add_argument("--process-index", type=numbers.whole_argument, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def process_count(args: argparse.Namespace) -> int:
    if args.processes is not None:
        return supervisor.process_count(args.processes, "--processes")
    value = app_settings.current().worker_processes
    return supervisor.process_count(value, "COUNCIL_WORKER_PROCESSES") if value else 1


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = parse_args(argv)
        settings = app_settings.load()
        count = process_count(args)
    except (ConfigError, ProcessCountError, app_settings.SettingsError) as err:
        print(f"worker: {err}", file=sys.stderr)
        return 2
    which = f" [process {args.process_index}]" if args.process_index else ""
    logging.basicConfig(
        level=settings.log_level,
        format=f"%(asctime)s %(levelname)s %(name)s{which}: %(message)s",
        stream=sys.stderr,
    )
    try:
        if count > 1:
            return run_processes(count, args.make_current)
        connection.run(run(args.supervisor_pid, args.process_index, args.make_current))
    except (ServerUnreachable, ConfigError, ConfigProblem, SettingsError) as err:
        print(f"worker: {err}", file=sys.stderr)
        return 2
    return 0


def entry() -> None:
    """The `council-worker` command."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
