"""The installed commands' names, and which one a process was started as.

Installed (`pipx install .`, `uv tool install .`), the CLI, the worker and the page are
the console scripts below (pyproject.toml's [project.scripts]); in a checkout, the same
names under bin/ run them in the checkout's .venv (bin/council), and `python starter.py`,
`python worker.py` and `python -m web` run them in the Python at hand. Help, usage and
hints name the one the user typed.
"""

from __future__ import annotations

import sys
from pathlib import Path

CLI = "council"
WORKER = "council-worker"
WEB = "council-web"


def invoked_as(installed: str, checkout: str) -> str:
    """`installed` when this process runs as that console script (found on the PATH: its
    path is absolute), the path as typed for the checkout's launcher (bin/council,
    ./bin/council), else `checkout`."""
    typed = sys.argv[0]
    if Path(typed).stem != installed:
        return checkout
    return installed if Path(typed).is_absolute() or "/" not in typed else typed
