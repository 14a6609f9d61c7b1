"""Work for bounded.process in the tests (tests/test_bounded.py): each function takes the
data and an argument and returns bytes, as a piece of work must. Those that never end
write their process id to the file their argument names first."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path


def echo(data: bytes, argument: str) -> bytes:
    return data[::-1] + argument.encode()


def environment(data: bytes, argument: str) -> bytes:
    return json.dumps(sorted(os.environ)).encode()


def _started(argument: str) -> None:
    if argument:
        Path(argument).write_text(str(os.getpid()))


def spin(data: bytes, argument: str) -> bytes:
    """Busy for good: only the CPU limit or a kill ends it."""
    _started(argument)
    while True:
        pass


def wait(data: bytes, argument: str) -> bytes:
    """Idle for good: only the clock or a kill ends it."""
    _started(argument)
    while True:
        time.sleep(3600)


def hoard(data: bytes, argument: str) -> bytes:
    """Takes memory until there is none."""
    kept = []
    while True:
        kept.append(bytearray(10_000_000))


def fail(data: bytes, argument: str) -> bytes:
    os._exit(7)
