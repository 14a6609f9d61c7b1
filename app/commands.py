"""The installed commands' names, and which one a process was started as.

Installed (`pipx install .`, `uv tool install .`), the CLI, the worker and the page are
the console scripts below (pyproject.toml's [project.scripts]); from a checkout they are
`python starter.py`, `python worker.py` and `python -m web`. Help, usage and hints name
the one the user typed.
"""

from __future__ import annotations

import sys
from pathlib import Path

CLI = "council"
WORKER = "council-worker"
WEB = "council-web"


def invoked_as(installed: str, checkout: str) -> str:
    """`installed` when this process runs as that console script, else `checkout`."""
    return installed if Path(sys.argv[0]).stem == installed else checkout
