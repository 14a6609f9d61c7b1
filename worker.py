"""The Council worker: runs the deliberation workflow and the model-call activity.

    python worker.py

Reads TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE (or a Temporal config profile),
COUNCIL_TASK_QUEUE, COUNCIL_LLM_BASE_URL and COUNCIL_LLM_API_KEY (or OPENROUTER_API_KEY),
and council.toml (COUNCIL_CONFIG, else ./council.toml) for more providers.
The API key stays in this process: it never enters a workflow input, result or history.
Throughput: COUNCIL_MAX_CONCURRENT_CALLS (this worker, default 200) and
COUNCIL_MAX_CALLS_PER_SECOND (model calls started per second on the whole task queue,
all workers together). Payload encryption: COUNCIL_PAYLOAD_KEY (see app/codec.py).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from collections.abc import Callable, Sequence
from datetime import timedelta
from typing import Any

from temporalio.client import Client
from temporalio.service import RPCError
from temporalio.worker import Worker

from activities.metrics import HISTOGRAM_BUCKETS
from activities.model_call import PARTIAL_TEXT_SECONDS, ModelGateway
from activities.settings import SettingsError
from app import config as app_config
from app import connection
from app.connection import (
    ConfigError,
    ServerUnreachable,
    connect,
    encryption_note,
    task_queue,
)
from council.config import ConfigProblem
from workflows import search_attributes
from workflows.deliberation import Deliberation
from workflows.judge import JudgeAnswers
from workflows.search_attributes import ensure_search_attributes

log = logging.getLogger("council.worker")


def _env_number(name: str, kind: type[int] | type[float]) -> int | float | None:
    value = os.environ.get(name, "").strip()
    if not value:
        return None
    try:
        number = kind(value)
    except ValueError:
        number = 0
    if number <= 0:
        raise ConfigError(f"{name} must be a positive {kind.__name__} (got {value!r})")
    return number


def build_worker(
    client: Client,
    gateway: ModelGateway,
    queue: str | None = None,
    workflows: Sequence[type] = (Deliberation, JudgeAnswers),
    activities: Sequence[Callable[..., Any]] = (),
    **options: Any,
) -> Worker:
    """The worker's Temporal worker: these workflows, the model-call activity (and any
    other activities), with the concurrency, rate limit and shutdown options below."""
    calls_per_second = _env_number("COUNCIL_MAX_CALLS_PER_SECOND", float)
    return Worker(
        client,
        task_queue=queue or task_queue(),
        workflows=list(workflows),
        activities=[gateway.call_model, *activities],
        max_concurrent_activities=_env_number("COUNCIL_MAX_CONCURRENT_CALLS", int) or 200,
        # A provider quota, enforced by the server across every worker of the queue.
        max_task_queue_activities_per_second=calls_per_second,
        # Eager activities (where the server allows them) skip the task queue, and with it
        # the server's rate limit: only without a limit.
        disable_eager_activity_execution=calls_per_second is not None,
        graceful_shutdown_timeout=timedelta(seconds=5),
        # Heartbeats carry a streaming reply's text so far: send them on within a second.
        max_heartbeat_throttle_interval=timedelta(seconds=PARTIAL_TEXT_SECONDS),
        default_heartbeat_throttle_interval=timedelta(seconds=PARTIAL_TEXT_SECONDS),
        # After a crash, the dead worker's sticky queue holds the next workflow task
        # until this passes (SDK default 10 s); then any worker takes it from history.
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=4),
        **options,
    )


def metrics_port() -> int | None:
    """COUNCIL_METRICS_PORT: where the worker serves Prometheus metrics (unset: nowhere)."""
    value = os.environ.get("COUNCIL_METRICS_PORT", "").strip()
    if not value:
        return None
    if not value.isdigit() or not 1 <= int(value) <= 65535:
        raise ConfigError(f"COUNCIL_METRICS_PORT must be a port number, 1 to 65535 (got {value!r})")
    return int(value)


async def run() -> None:
    config = app_config.load(keys=True)  # council.toml's providers (an error: exit 2)
    port = metrics_port()
    client = await connect(runtime=connection.runtime(port, HISTOGRAM_BUCKETS))
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
    gateway = ModelGateway.from_env(providers=config.providers)
    worker = build_worker(client, gateway)
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
    log.info("%s", encryption_note(client.data_converter))
    if port:
        log.info("Prometheus metrics on http://0.0.0.0:%d/metrics", port)
    # Printed whatever the log level: harness.processes.start_worker waits for this line.
    providers = ", ".join(
        f"{name} {p.settings.host} ({'API key set' if p.settings.api_key else 'no API key'})"
        for name, p in gateway.providers.items()
    )
    print(
        f"worker ready: task queue {task_queue()}, namespace {client.namespace}, models via "
        f"{providers}",
        file=sys.stderr,
        flush=True,
    )
    async with worker:
        await stop.wait()
        log.info("shutting down: in-flight calls get 5 s to finish, then Temporal retries them")
    await gateway.aclose()


def main() -> int:
    logging.basicConfig(
        level=os.environ.get("COUNCIL_LOG_LEVEL", "INFO"),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        connection.run(run())
    except (ServerUnreachable, ConfigError, ConfigProblem, SettingsError) as err:
        print(f"worker: {err}", file=sys.stderr)
        return 2
    return 0


def entry() -> None:
    """The `council-worker` command."""
    sys.exit(main())


if __name__ == "__main__":
    entry()
