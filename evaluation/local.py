"""`make eval`: the bundled dataset through the council, starting whatever is not running.

    python -m evaluation.local [DATASET.jsonl] [starter.py eval options...]

Like demo.py: starts the embedded Temporal dev server unless one answers at
TEMPORAL_ADDRESS, the simulator when no API key is set (and says so: its answers are
simulated; it is told about the dataset through COUNCIL_SIM_DATASETS), and a worker;
runs `starter.py eval`; then stops what it started. The server's SQLite file keeps the
runs, so running it again resumes instead of deliberating again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app import devstack
from app.connection import DEFAULT_ADDRESS

DATASET = devstack.ROOT / "datasets" / "arithmetic_logic.jsonl"
SIMULATED_MODELS = "sim/atlas,sim/borealis,sim/cirrus,sim/drift"


def say(message: str) -> None:
    print(f"eval: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    dataset = args.pop(0) if args and not args[0].startswith("-") else str(DATASET)
    address = os.environ.get("TEMPORAL_ADDRESS", DEFAULT_ADDRESS)
    host, port = devstack.split_address(address)
    logs = devstack.DATA / "logs"
    started: list[devstack.Process] = []
    env: dict[str, str] = {"TEMPORAL_ADDRESS": address}
    try:
        if devstack.port_open(host, port):
            say(f"using the Temporal server already answering at {address}")
        else:
            ui_port = 8233 if port == 7233 else port + 1000
            say(f"starting the Temporal dev server at {address} (state in data/temporal.db, UI on :{ui_port})")
            started.append(
                devstack.start_temporal(
                    devstack.DATA / "temporal.db", port=port, ui_port=ui_port, log_path=logs / "temporal.log"
                )
            )
        has_key = os.environ.get("COUNCIL_LLM_API_KEY") or os.environ.get("OPENROUTER_API_KEY")
        if not has_key and not os.environ.get("COUNCIL_LLM_BASE_URL"):
            known = [p for p in os.environ.get("COUNCIL_SIM_DATASETS", "").split(os.pathsep) if p]
            os.environ["COUNCIL_SIM_DATASETS"] = os.pathsep.join([*known, str(Path(dataset).resolve())])
            simulator = devstack.start_simulator(log_path=logs / "simulator.log")
            started.append(simulator)
            env["COUNCIL_LLM_BASE_URL"] = simulator.extra["url"]
            env["COUNCIL_MODELS"] = os.environ.get("COUNCIL_MODELS", SIMULATED_MODELS)
            say(
                "no API key set (COUNCIL_LLM_API_KEY or OPENROUTER_API_KEY): using the built-in "
                "SIMULATOR, which knows the dataset's answers and plays solvers that sometimes slip; "
                "the accuracies below measure the harness, not real models"
            )
        say("starting a worker (log in data/logs/worker.log)")
        started.append(devstack.start_worker(env, log_path=logs / "worker.log"))
        result = subprocess.run(
            [sys.executable, "starter.py", "eval", dataset, *args],
            cwd=devstack.ROOT,
            env={**os.environ, **env},
        )
        return result.returncode
    finally:
        for process in reversed(started):
            process.stop()
        if started:
            say("stopped the processes it started")


if __name__ == "__main__":
    sys.exit(main())
