"""`make eval`: the bundled dataset through the council, starting whatever is not running.

    python -m harness.local_eval [DATASET.jsonl] [bin/council eval options...]

Like demo.py: starts the embedded Temporal dev server unless one answers at
TEMPORAL_ADDRESS (with its codec server), the simulator when no API key is set (and says
so: its answers are simulated; it is told about the dataset through COUNCIL_SIM_DATASETS),
and a worker; runs `bin/council eval`; then stops what it started. The server's SQLite file
keeps the runs, so running it again resumes instead of deliberating again.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from harness.local import local_council
from harness.processes import ROOT
from simulator.settings import SimulatorSettings

DATASET = ROOT / "datasets" / "arithmetic_logic.jsonl"


def say(message: str) -> None:
    print(f"eval: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    dataset = args.pop(0) if args and not args[0].startswith("-") else str(DATASET)
    try:
        with local_council(
            say,
            "using the built-in SIMULATOR, which knows the dataset's answers and plays solvers "
            "that sometimes slip; the accuracies below measure the harness, not real models",
            simulator_env=SimulatorSettings.read().with_dataset(Path(dataset).resolve()),
        ) as env:
            result = subprocess.run(
                [sys.executable, "bin/council", "eval", dataset, *args],
                cwd=ROOT,
                env={**os.environ, **env},
            )
            return result.returncode
    except (RuntimeError, ValueError) as error:
        say(f"could not start: {error}")
        return 1


if __name__ == "__main__":
    sys.exit(main())
