"""The bare-Temporal baseline's worker: `python -m bench.bare_worker`.

The worker a user runs (service.worker.build_worker: the same connection, data converter and
options), with bench.bare_workflow's BareGraph and SameCalls as its workflows and a no-op
activity beside the model-call activity.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

from activities.model_call import ModelGateway
from app.settings import environment as app_settings
from app.temporal import connection
from app.temporal.connection import connect, task_queue
from bench.bare_workflow import BareGraph, SameCalls, bare_step
from service.worker import serving

log = logging.getLogger("council.bench.bare_worker")


async def run() -> None:
    client = await connect()
    async with ModelGateway.of(app_settings.load().llm) as gateway:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        async with serving(
            client, gateway, workflows=[BareGraph, SameCalls], activities=[bare_step]
        ):
            log.info("worker ready: task queue %s", task_queue())
            await stop.wait()


def main() -> int:
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    connection.run(run())
    return 0


if __name__ == "__main__":
    sys.exit(main())
