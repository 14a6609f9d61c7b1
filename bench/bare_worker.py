"""The bare-Temporal baseline's worker: `python -m bench.bare_worker`.

The same connection, data converter and worker options as worker.py; the workflow is
bench.bare_workflow's BareGraph; its activities are a no-op and the worker's own
model-call activity (configured from the environment, as worker.py does).
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
import sys
from datetime import timedelta

from temporalio.worker import Worker

from activities.model_call import ModelGateway
from app.connection import connect, task_queue
from bench.bare_workflow import BareGraph, bare_step

log = logging.getLogger("council.bench.bare_worker")


async def run() -> None:
    client = await connect()
    gateway = ModelGateway.from_env()
    worker = Worker(
        client,
        task_queue=task_queue(),
        workflows=[BareGraph],
        activities=[bare_step, gateway.call_model],
        max_concurrent_activities=int(os.environ.get("COUNCIL_MAX_CONCURRENT_CALLS", "200")),
        graceful_shutdown_timeout=timedelta(seconds=5),
        sticky_queue_schedule_to_start_timeout=timedelta(seconds=4),
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    log.info("worker ready: task queue %s", task_queue())
    async with worker:
        await stop.wait()
    await gateway.aclose()


def main() -> int:
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(run())
    return 0


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # as worker.py: skip interpreter finalization after the Temporal client ran
