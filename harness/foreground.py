"""Processes kept in the foreground until Ctrl-C (`make up`, `make server`): the signals
that stop them, the wait, and the stopping of exactly what was started."""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

from harness.processes import Process


class Stopped(BaseException):
    """SIGINT or SIGTERM arrived: stop what was started (BaseException, like
    KeyboardInterrupt, so that no `except Exception` on the way swallows it)."""


def _stop(signum: int, frame: FrameType | None) -> None:
    # A second Ctrl-C must not cut the stopping short.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise Stopped(signal.Signals(signum).name)


def stop_on_signals() -> None:
    """From now on SIGINT and SIGTERM raise Stopped."""
    signal.signal(signal.SIGINT, _stop)
    signal.signal(signal.SIGTERM, _stop)


def watch(started: list[Process], say: Callable[[str], None]) -> int:
    """Wait for a signal; a process that exits on its own ends the wait (status 1)."""
    while True:
        for process in started:
            if not process.alive():
                log = f", log in {shown(process.log_path)}" if process.log_path else ""
                say(
                    f"the {process.name} exited (status {process.popen.returncode}{log}); "
                    "stopping the rest"
                )
                return 1
        time.sleep(0.5)


def stop_all(started: list[Process], say: Callable[[str], None]) -> None:
    """Stop what was started, last first, and say so."""
    for process in reversed(started):
        process.stop()
    if started:
        say("stopped the processes it started")


def shown(path: Path) -> str:
    """A path as a message shows it: relative to the working directory when inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(path)
