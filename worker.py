"""The Council worker: runs the deliberation workflow and the model-call activity.

    python worker.py                     one worker process
    python worker.py --processes auto    one per core, under a supervisor (service/supervisor.py)

The command (its options and settings) is service.command; what it runs, service.worker.
"""

from __future__ import annotations

# First: a Python without Council's packages is told so in one line, and the fix.
from app.installation import dependencies  # noqa: F401  # isort: skip

from service.command import entry

if __name__ == "__main__":
    entry()
