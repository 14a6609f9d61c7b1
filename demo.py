"""`make demo`: one deliberation end to end, starting whatever is not running yet.

    python demo.py [QUESTION]      (make demo QUESTION="...")

Starts the embedded Temporal dev server unless one answers at TEMPORAL_ADDRESS (with the
codec server its Web UI reads stored texts through), the simulator when no API key is
set, and a worker; runs one deliberation with live progress; prints the final answer and
the run's address in the Web UI; then stops the processes it started (the server's SQLite
file in data/ keeps the run) and names `make up`, which serves the web page.
"""

from __future__ import annotations

# First: a Python without Council's packages is told so in one line, and the fix.
from app.installation import dependencies  # noqa: F401  # isort: skip

import os
import subprocess
import sys

from harness.local import local_council, ui_address
from harness.processes import ROOT

# With the simulator, the members calculate the yearly rows with the example calculator
# (examples/offline.toml) before they answer.
QUESTION = (
    "A small web application stores about 1500 * 365 rows a year: what are the trade-offs "
    "between SQLite and PostgreSQL for it?"
)


def say(message: str) -> None:
    print(f"demo: {message}", file=sys.stderr, flush=True)


def main(argv: list[str]) -> int:
    question = argv[0].strip() if argv and argv[0].strip() else QUESTION
    try:
        with local_council(
            say,
            "using the built-in SIMULATOR; every answer below is simulated, not written by a "
            "real model",
            tools=True,
        ) as env:
            say(f"asking the council: {question}")
            result = subprocess.run(
                [sys.executable, "bin/council", "start", question, "--wait"],
                cwd=ROOT,
                env={**os.environ, **env},
            )
    except (RuntimeError, ValueError) as error:
        say(f"could not start: {error}")
        return 1
    if result.returncode == 0:
        say(
            "to see this run and the ones before it on the web page, run `make up` (it starts "
            f"what the page needs and prints its address; the Temporal UI: {ui_address(env)})"
        )
    return result.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
