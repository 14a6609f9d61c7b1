"""The bare-Temporal baseline's worker: `python -m bench.bare_worker`.

The worker a user runs (service.worker.serving: the same connection, data converter and
options), with bench.bare_workflow's BareGraph and SameCalls beside Council's workflows and
a no-op activity beside the model-call activity. With BENCH_RUNNER=sandbox (`python -m
bench --sandbox`), every workflow declared unsandboxed runs in the sandbox the suite checks
them in (service.worker.SANDBOX: narrow pass-through), for the throughput rows to measure
the sandbox against the runner of production.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys

from activities.model_call import ModelGateway
from app.settings import environment as app_settings
from app.temporal import connection
from app.temporal.connection import connect, task_queue
from bench.bare_workflow import BareGraph, SameCalls, bare_step
from service.worker import register_search_attributes, serving
from workflows.registry import WORKFLOWS

log = logging.getLogger("council.bench.bare_worker")


async def run() -> None:
    client = await connect()
    await register_search_attributes(client)  # for the Council rows
    sandboxed = os.environ.get("BENCH_RUNNER") == "sandbox"
    async with ModelGateway.of(app_settings.load().llm) as gateway:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with serving(
            client,
            gateway,
            workflows=[*WORKFLOWS, BareGraph, SameCalls],
            activities=[bare_step],
            checked=sandboxed,
        ):
            log.info(
                "worker ready: task queue %s%s", task_queue(), ", sandboxed" if sandboxed else ""
            )
            await stop.wait()


def main() -> int:
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    connection.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
