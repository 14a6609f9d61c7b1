"""The Council worker: runs the deliberation workflow and the model-call activity.

    python worker.py                     one worker process
    python worker.py --processes auto    one per core, under a supervisor (service/supervisor.py)

Reads TEMPORAL_ADDRESS / TEMPORAL_NAMESPACE (or a Temporal config profile),
COUNCIL_TASK_QUEUE, COUNCIL_LLM_BASE_URL and COUNCIL_LLM_API_KEY (or OPENROUTER_API_KEY),
and council.toml (COUNCIL_CONFIG, else ./council.toml) for more providers.
The API key stays in this process: it never enters a workflow input, result or history.
Throughput: COUNCIL_MAX_CONCURRENT_CALLS (calls this worker sends at once, default 200;
of them COUNCIL_MAX_CALLS_PER_TENANT and COUNCIL_MAX_CALLS_PER_RUN, and
COUNCIL_MAX_WAITING_CALLS more wait for their turn: activities/shares.py) and
COUNCIL_MAX_CALLS_PER_SECOND (model calls started per second on the whole task queue,
all workers together). Payload encryption: COUNCIL_PAYLOAD_KEY (see app/codec/encryption.py).
COUNCIL_WORKER_PROCESSES: the default of --processes. Metrics: COUNCIL_METRICS_PORT, on
COUNCIL_METRICS_HOST (default 127.0.0.1, loopback); with N processes, process i serves
its metrics on COUNCIL_METRICS_PORT + i - 1.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import NoReturn

from activities.confinement import Confinement, protect_this_process
from activities.metrics import HISTOGRAM_BUCKETS
from activities.model_call import ModelGateway
from activities.tools import ToolBox
from app.installation import commands
from app.installation.secret_paths import kept_from_tools
from app.settings import config as app_config
from app.settings import environment as app_settings
from app.temporal import connection, deployment
from app.temporal.connection import (
    ConfigError,
    ServerUnreachable,
    connect,
    encryption_note,
    store_note,
    task_queue,
)
from council import numbers
from council.config import ConfigProblem
from service import supervisor
from service.supervisor import ProcessCountError, Supervisor
from service.worker import (
    call_limits,
    metrics_host,
    metrics_port,
    register_search_attributes,
    serving,
)

log = logging.getLogger("council.worker")

# What a supervisor's child runs: the worker script, which sits beside this package in a
# checkout and in an installed wheel alike (pyproject.toml's py-modules).
SCRIPT = Path(__file__).resolve().parent.parent / "worker.py"


async def run(
    supervisor_pid: int | None = None, process_index: int | None = None, take_over: bool = False
) -> None:
    config = app_config.load(keys=True)  # council.toml's providers (an error: exit 2)
    port, host = metrics_port(), metrics_host()
    client = await connect(runtime=connection.runtime(port, HISTOGRAM_BUCKETS, host))
    await register_search_attributes(client)
    gateway = ModelGateway.of(app_settings.current().llm, config.providers)
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
        log.info("Prometheus metrics on http://%s/metrics", connection.metrics_address(host, port))
    providers = ", ".join(
        f"{name} {p.settings.host} ({'API key set' if p.settings.api_key else 'no API key'})"
        for name, p in gateway.providers.items()
    )
    which = f" (process {process_index}, pid {os.getpid()})" if process_index else ""
    # Its stdio tool servers start confined, kept from the files that hold keys, and no
    # process of its user may read its memory (activities.confinement).
    toolbox = ToolBox(
        config.tool_set(),
        secrets=gateway.redactor.secrets,
        confinement=Confinement.hiding(kept_from_tools()),
    )
    tools = ", ".join(config.tool_set().available())
    async with serving(client, gateway, take_over=take_over, toolbox=toolbox) as routing:
        log.info("%s", routing)
        # Printed whatever the log level, once the worker polls and new runs can start:
        # harness.processes.start_worker waits for this line.
        print(
            f"worker ready: task queue {task_queue()}, namespace {client.namespace}, build "
            f"{deployment.build_id()}, models via {providers}, tools {tools}{which}",
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
    async with ModelGateway.of(app_settings.current().llm, config.providers):
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

    def command(index: int) -> list[str]:
        return [
            sys.executable,
            str(SCRIPT),
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
    # No process of this user but root may read the keys in this one's memory or
    # environment (a tool server of the worker least of all).
    protect_this_process()
    try:
        if count > 1:
            return run_processes(count, args.make_current)
        connection.run(run(args.supervisor_pid, args.process_index, args.make_current))
    except (ServerUnreachable, ConfigError, ConfigProblem) as err:
        print(f"worker: {err}", file=sys.stderr)
        return 2
    return 0


def entry() -> None:
    """The `council-worker` command."""
    sys.exit(main())
