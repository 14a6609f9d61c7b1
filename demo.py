"""`make demo`: one deliberation end to end, starting whatever is not running yet.

Starts the embedded Temporal dev server unless one answers at TEMPORAL_ADDRESS, the
simulator when no API key is set, and a worker; runs one deliberation with live
progress; prints the final answer and the run's address in the Web UI; then stops
the processes it started (the server's SQLite file in data/ keeps the run).
"""

from __future__ import annotations

import os
import subprocess
import sys

from app import devstack
from app.connection import DEFAULT_ADDRESS

QUESTION = (
    "What are the trade-offs between SQLite and PostgreSQL for a small web application?"
)
SIMULATED_MODELS = "sim/atlas,sim/borealis,sim/cirrus,sim/drift"


def say(message: str) -> None:
    print(f"demo: {message}", file=sys.stderr, flush=True)


def main() -> int:
    address = os.environ.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS)
    host, port = devstack.split_address(address)
    logs = devstack.DATA / "logs"
    started: list[devstack.Process] = []
    env: dict[str, str] = {"TEMPORAL_ADDRESS": address}
    try:
        if devstack.port_open(host, port):
            say(f"using the Temporal server already answering at {address}")
        else:
            say(f"starting the Temporal dev server at {address} (state in data/temporal.db, UI on :8233)")
            started.append(
                devstack.start_temporal(devstack.DATA / "temporal.db", port=port, log_path=logs / "temporal.log")
            )
        has_key = os.environ.get("COUNCIL_LLM_API_KEY") or os.environ.get("OPENROUTER_API_KEY")
        if not has_key and not os.environ.get("COUNCIL_LLM_BASE_URL"):
            simulator = devstack.start_simulator(log_path=logs / "simulator.log")
            started.append(simulator)
            env["COUNCIL_LLM_BASE_URL"] = simulator.extra["url"]
            env.setdefault("COUNCIL_MODELS", os.environ.get("COUNCIL_MODELS", SIMULATED_MODELS))
            say(
                "no API key set (COUNCIL_LLM_API_KEY or OPENROUTER_API_KEY): using the built-in "
                "SIMULATOR; every answer below is simulated, not written by a real model"
            )
        say("starting a worker (log in data/logs/worker.log)")
        started.append(devstack.start_worker(env, log_path=logs / "worker.log"))
        question = os.environ.get("QUESTION") or QUESTION
        say(f"asking the council: {question}")
        result = subprocess.run(
            [sys.executable, "starter.py", "start", question, "--wait"],
            cwd=devstack.ROOT,
            env={**os.environ, **env},
        )
        if result.returncode == 0:
            say("browse this and past runs in the Web UI with `make server` (http://localhost:8233)")
        return result.returncode
    finally:
        for process in reversed(started):
            process.stop()
        if started:
            say("stopped the processes the demo started")


if __name__ == "__main__":
    sys.exit(main())
