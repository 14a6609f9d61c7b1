"""What a run on this machine needs, started and stopped around it: `make demo`,
`make eval` and `make up` use local_council."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from app import settings
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
from workflows.client import dev_ui_port, temporal_ui

# Set (to 1) for the processes of a council whose members are the simulator's, so that
# what they show can say the answers are simulated.
SIMULATED = "COUNCIL_SIMULATED"


def ui_address(env: Mapping[str, str]) -> str:
    """The Web UI of the Temporal server a local council uses (env from local_council)."""
    return temporal_ui(env["TEMPORAL_ADDRESS"], settings.current().ui_url)


@contextmanager
def local_council(
    say: Callable[[str], None],
    simulated_note: str,
    simulator_env: Mapping[str, str] | None = None,
    data: Path = DATA,
    started: list[Process] | None = None,
) -> Iterator[dict[str, str]]:
    """Whatever a run on this machine still needs, started here and stopped afterwards.

    The embedded dev server unless one answers at TEMPORAL_ADDRESS (state in
    `data`/temporal.db), the simulator when no API key or base URL is set (saying so with
    `simulated_note`), and a worker. Yields the environment for `starter.py` (COUNCIL_DATA:
    `data`, so that the payload store is `data`/store unless COUNCIL_STORE says otherwise;
    with the simulator: its members as COUNCIL_MODELS and COUNCIL_CHAIRMAN unless those
    are set, and COUNCIL_SIMULATED=1). `started`, when given, receives each process as it starts.
    """
    address = os.environ.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS)
    host, port = split_address(address)
    logs = data / "logs"
    started = [] if started is None else started
    mine = len(started)
    env: dict[str, str] = {"TEMPORAL_ADDRESS": address, "COUNCIL_DATA": str(data)}
    try:
        if port_open(host, port):
            say(f"using the Temporal server already answering at {address}")
        else:
            db = data / "temporal.db"
            say(
                f"starting the Temporal dev server at {address} (state in {shown(db)}, UI on "
                f"{temporal_ui(address, settings.current().ui_url)})"
            )
            started.append(
                start_temporal(
                    db, port=port, ui_port=dev_ui_port(port), log_path=logs / "temporal.log"
                )
            )
        has_key = os.environ.get("COUNCIL_LLM_API_KEY") or os.environ.get("OPENROUTER_API_KEY")
        if not has_key and not os.environ.get("COUNCIL_LLM_BASE_URL"):
            simulator = start_simulator(log_path=logs / "simulator.log", env=simulator_env)
            started.append(simulator)
            models = os.environ.get("COUNCIL_MODELS") or ",".join(DEFAULT_MODELS)
            env["COUNCIL_LLM_BASE_URL"] = simulator.extra["url"]
            env["COUNCIL_MODELS"] = models
            env["COUNCIL_CHAIRMAN"] = (
                os.environ.get("COUNCIL_CHAIRMAN") or models.split(",")[0].strip()
            )
            env[SIMULATED] = "1"
            say(f"no API key set (COUNCIL_LLM_API_KEY or OPENROUTER_API_KEY): {simulated_note}")
        say(f"starting a worker (log in {shown(logs / 'worker.log')})")
        # This checkout's build serves new runs on the local server, whatever ran before.
        started.append(start_worker(env, log_path=logs / "worker.log", make_current=True))
        yield env
    finally:
        ours = started[mine:]
        for process in reversed(ours):
            process.stop()
        if ours:
            say("stopped the processes it started")


def shown(path: Path) -> str:
    """A path as a message shows it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
