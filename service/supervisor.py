"""Several worker processes on one task queue under one supervisor (`worker.py --processes N`).

A Python process runs its workflow code, its HTTP client and its share of the SDK's work
on one core at a time, so one worker process cannot use a large machine. The supervisor
starts N worker processes, restarts one that dies, and stops them all on SIGINT or
SIGTERM.

Each child is a subprocess running `python worker.py --processes 1`, not a
multiprocessing child: it is exactly the worker a user starts by hand (its own Temporal
client, connection pool and metrics port; nothing inherited from the supervisor's
memory, nothing pickled), and its exit status says how it ended. The supervisor itself
runs no Temporal code while it supervises.

- Stop: the first SIGINT or SIGTERM sends SIGTERM to every child, which stops the way a
  single worker does (in-flight calls get their grace period, then Temporal retries
  them elsewhere); a child still running after `stop_timeout` gets SIGKILL, and so does
  every child at a second signal. A Ctrl-C in a terminal reaches the children directly
  too (they share the supervisor's process group), which changes nothing.
- Restart: a child that exits while no stop was asked for is started again after
  `restart_delay`, at most `restarts_per_minute` times a minute each; past that, the
  next start waits for the minute to pass (a child that crashes at once costs a second
  of CPU per start, not a spinning core). Every exit is logged with its status.
- A child of the first start that exits with status 2 (bad configuration: the worker
  printed why) stops the supervisor with status 2; later, status 2 (a server that could
  not be reached on a restart) is restarted like any other exit.
- A child whose supervisor is gone (killed with SIGKILL) stops by itself within a
  second (`stop_when_orphaned`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import signal
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

log = logging.getLogger("council.supervisor")

MAX_PROCESSES = 128
RESTART_DELAY = 1.0  # seconds between a child's exit and its next start
RESTARTS_PER_MINUTE = 5  # per child; further restarts wait until the minute has passed
STOP_TIMEOUT = 30.0  # seconds a child gets to stop after SIGTERM, then SIGKILL
CONFIG_ERROR = 2  # the worker's exit status for a setting it cannot use


class ProcessCountError(ValueError):
    """A process count that cannot be used: one line naming its source and the range."""


def available_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS tells it)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this OS (macOS)
        return os.cpu_count() or 1


def process_count(value: str, source: str) -> int:
    """A whole number from 1 to MAX_PROCESSES, or `auto`: one per available core (at most
    MAX_PROCESSES). `source` names the flag or variable in the error message."""
    text = value.strip()
    if text.lower() == "auto":
        return min(available_cores(), MAX_PROCESSES)
    if re.fullmatch(r"[0-9]{1,4}", text) and 1 <= int(text) <= MAX_PROCESSES:
        return int(text)
    raise ProcessCountError(
        f"{source} must be a whole number from 1 to {MAX_PROCESSES}, or auto (got {value!r})"
    )


def describe_exit(code: int) -> str:
    """How a child ended, for a log line: its exit status, or the signal that killed it."""
    if code >= 0:
        return f"exited with status {code}"
    try:
        name = signal.Signals(-code).name
    except ValueError:
        name = "a signal"
    return f"was killed by {name} (signal {-code})"


async def stop_when_orphaned(
    supervisor_pid: int, stop: Callable[[], None], interval: float = 1.0
) -> None:
    """In a child: call `stop` once the supervisor is gone (the child's parent changes)."""
    while True:
        if os.getppid() != supervisor_pid:
            break
        await asyncio.sleep(interval)
    log.warning("the supervisor (pid %d) is gone: shutting down", supervisor_pid)
    stop()


@dataclass
class _Child:
    index: int  # 1 to N, for people: "worker process 2"
    process: asyncio.subprocess.Process | None = None
    restarts: deque[float] = field(default_factory=deque)  # when it restarted, last minute

    def signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(sig)


class Supervisor:
    """Keeps `count` children running `command(index)` (index 1 to count), each with the
    supervisor's environment plus `env(index)`, until SIGINT or SIGTERM."""

    def __init__(
        self,
        command: Callable[[int], Sequence[str]],
        count: int,
        env: Callable[[int], Mapping[str, str]] | None = None,
        *,
        restart_delay: float = RESTART_DELAY,
        restarts_per_minute: int = RESTARTS_PER_MINUTE,
        stop_timeout: float = STOP_TIMEOUT,
        name: str = "worker process",
    ) -> None:
        self.command = command
        self.env = env or (lambda index: {})
        self.children = [_Child(index) for index in range(1, count + 1)]
        self.restart_delay = restart_delay
        self.restarts_per_minute = restarts_per_minute
        self.stop_timeout = stop_timeout
        self.name = name
        self.status = 0
        self._stopping = asyncio.Event()

    async def run(self) -> int:
        """Start the children, keep them running, stop them on a signal; the exit status:
        0 after a stop, 2 when a first child found the configuration unusable, 1 when one
        could not be started at all."""
        loop = asyncio.get_running_loop()
        signals = (signal.SIGINT, signal.SIGTERM)
        for sig in signals:
            loop.add_signal_handler(sig, self._on_signal, sig)
        try:
            keepers = [asyncio.create_task(self._keep_safely(child)) for child in self.children]
            await self._stopping.wait()
            done, running = await asyncio.wait(keepers, timeout=self.stop_timeout)
            if running:
                late = [c for c in self.children if c.process and c.process.returncode is None]
                for child in late:
                    log.warning(
                        "%s %d (pid %d) did not stop within %.0f s: killing it",
                        self.name,
                        child.index,
                        child.process.pid,  # type: ignore[union-attr]
                        self.stop_timeout,
                    )
                    child.signal(signal.SIGKILL)
                await asyncio.gather(*running)
            for task in done:
                task.result()  # an unexpected error of the supervisor's own surfaces here
        finally:
            for sig in signals:
                loop.remove_signal_handler(sig)
        log.info("all %d %ses stopped", len(self.children), self.name)
        return self.status

    def stop(self, status: int = 0) -> None:
        if self._stopping.is_set():
            return
        self.status = status
        self._stopping.set()
        for child in self.children:
            child.signal(signal.SIGTERM)

    def _on_signal(self, sig: signal.Signals) -> None:
        if not self._stopping.is_set():
            log.info("%s: stopping %d %ses", sig.name, len(self.children), self.name)
            self.stop()
        else:
            log.warning("%s again: killing the %ses now", sig.name, self.name)
            for child in self.children:
                child.signal(signal.SIGKILL)

    async def _keep_safely(self, child: _Child) -> None:
        try:
            await self._keep(child)
        except Exception:
            log.exception("supervising %s %d failed; stopping", self.name, child.index)
            self.stop(1)
            raise

    async def _keep(self, child: _Child) -> None:
        first = True
        while not self._stopping.is_set():
            try:
                child.process = await asyncio.create_subprocess_exec(
                    *self.command(child.index),
                    env={**os.environ, **self.env(child.index)},
                    stdin=asyncio.subprocess.DEVNULL,
                )
            except OSError as err:  # no process at all: the command, or the OS's limits
                how = f"{self.name} {child.index} could not start ({err})"
                if first:
                    log.error("%s; stopping", how)
                    self.stop(1)
                    return
            else:
                if self._stopping.is_set():  # the stop came while this child was starting
                    child.signal(signal.SIGTERM)
                code = await child.process.wait()
                if self._stopping.is_set():
                    return
                how = f"{self.name} {child.index} (pid {child.process.pid}) {describe_exit(code)}"
                if first and code == CONFIG_ERROR:
                    log.error("%s: the configuration cannot be used; stopping", how)
                    self.stop(CONFIG_ERROR)
                    return
            first = False
            delay = self._next_start(child)
            log.warning("%s; starting it again in %.0f s", how, delay)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._stopping.wait(), delay)

    def _next_start(self, child: _Child) -> float:
        """Seconds until the child may start again: restart_delay, or longer while it has
        used up its restarts of the last minute."""
        now = time.monotonic()
        while child.restarts and child.restarts[0] <= now - 60:
            child.restarts.popleft()
        delay = self.restart_delay
        if len(child.restarts) >= self.restarts_per_minute:
            delay = max(delay, child.restarts[0] + 60 - now)
            log.warning(
                "%s %d has restarted %d times in the last minute (at most %d a minute)",
                self.name,
                child.index,
                len(child.restarts),
                self.restarts_per_minute,
            )
        child.restarts.append(now + delay)
        return delay
