"""What a run on this machine needs, started and stopped around it: `make demo` and
`make eval` use local_council."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

from app.connection import DEFAULT_ADDRESS
from harness.processes import (
    DATA,
    Process,
    port_open,
    split_address,
    start_simulator,
    start_temporal,
    start_worker,
)
from simulator.personas import DEFAULT_MODELS


@contextmanager
def local_council(
    say: Callable[[str], None],
    simulated_note: str,
    simulator_env: Mapping[str, str] | None = None,
) -> Iterator[dict[str, str]]:
    """Whatever a run on this machine still needs, started here and stopped afterwards.

    The embedded dev server unless one answers at TEMPORAL_ADDRESS (state in
    data/temporal.db), the simulator when no API key or base URL is set (saying so with
    `simulated_note`), and a worker. Yields the environment for `starter.py`.
    """
    address = os.environ.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS)
    host, port = split_address(address)
    logs = DATA / "logs"
    started: list[Process] = []
    env: dict[str, str] = {"TEMPORAL_ADDRESS": address}
    try:
        if port_open(host, port):
            say(f"using the Temporal server already answering at {address}")
        else:
            ui_port = 8233 if port == 7233 else port + 1000
            say(
                f"starting the Temporal dev server at {address} (state in data/temporal.db, UI on "
                f":{ui_port})"
            )
            started.append(
                start_temporal(
                    DATA / "temporal.db", port=port, ui_port=ui_port, log_path=logs / "temporal.log"
                )
            )
        has_key = os.environ.get("COUNCIL_LLM_API_KEY") or os.environ.get("OPENROUTER_API_KEY")
        if not has_key and not os.environ.get("COUNCIL_LLM_BASE_URL"):
            simulator = start_simulator(log_path=logs / "simulator.log", env=simulator_env)
            started.append(simulator)
            env["COUNCIL_LLM_BASE_URL"] = simulator.extra["url"]
            env["COUNCIL_MODELS"] = os.environ.get("COUNCIL_MODELS", ",".join(DEFAULT_MODELS))
            say(f"no API key set (COUNCIL_LLM_API_KEY or OPENROUTER_API_KEY): {simulated_note}")
        say("starting a worker (log in data/logs/worker.log)")
        started.append(start_worker(env, log_path=logs / "worker.log"))
        yield env
    finally:
        for process in reversed(started):
            process.stop()
        if started:
            say("stopped the processes it started")
