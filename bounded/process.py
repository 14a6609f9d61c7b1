"""One piece of work in a process of its own, within limits, so that an input that makes
it long or large (a PDF bomb, a page of deeply nested markup) costs one bounded process,
never the time or memory of the server or worker that asked for it.

    ended = run("app.requests.pdf_text:answer", data, Limits(cpu_seconds=30, ...), argument)
    ended = await run_async("activities.page_text:answer", data, limits, argument)
    ended.output      # what the work returned (bytes), or None; ended.stopped says why:
                      # "cpu", "memory", "time" or "failed" (ended.detail: its exit status)

The work is a function `module:name` taking (data: bytes, argument: str) and returning
bytes. The process is this Python, isolated (-I: no environment variables, no user site,
not the current directory on its path) and given no environment at all, so that nothing
its input makes it do can see a key. Before it imports the work it lowers its priority
and sets its own limits: CPU time (the kernel stops it at `cpu_seconds`), address space
(`memory_bytes`; past it the work's MemoryError ends the process with MEMORY_STATUS) and
no core file; on Linux it also dies with the thread that started it (PR_SET_PDEATHSIG), so
that a worker killed outright leaves no reader behind. The data goes in on stdin, the
answer comes back on stdout.

The caller kills it past `seconds` on the clock, and `run_async` kills it as well when
the task awaiting it is cancelled (a timeout of the call around it, a stop, the worker
shutting down); either way the process has exited before `run` or `run_async` returns or
raises, so the work of an attempt never runs beside the attempt that replaces it.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

# The folder that holds the `bounded` package and the work's (a checkout, or
# site-packages once installed).
_ROOT = str(Path(__file__).resolve().parents[1])
_START = "import sys; sys.path.insert(0, sys.argv[1]); from bounded.process import child; child()"
# What the process lowers its priority by: the process that waits for it (a server
# answering others) comes first.
NICENESS = 5
# The exit status of a process whose work ran out of memory.
MEMORY_STATUS = 3
_PR_SET_PDEATHSIG = 1


@dataclass(frozen=True)
class Limits:
    """What one piece of work may take: CPU time (whole seconds), address space (bytes) and
    time on the clock (seconds)."""

    cpu_seconds: int
    memory_bytes: int
    seconds: float


@dataclass(frozen=True)
class Ended:
    """How the process ended: the work's answer, or why there is none ("cpu", "memory",
    "time", or "failed": `detail` names the exit status)."""

    output: bytes | None = None
    stopped: str | None = None
    detail: str = ""


def command(work: str, limits: Limits, argument: str = "") -> list[str]:
    """The process's command line: the work, its limits and its argument in argv."""
    given = json.dumps({"limits": asdict(limits), "parent": os.getpid(), "argument": argument})
    return [sys.executable, "-I", "-c", _START, _ROOT, work, given]


def run(work: str, data: bytes, limits: Limits, argument: str = "") -> Ended:
    """`work` on `data` in a process of its own within `limits`: blocks until it ends (a
    server calls it from a thread)."""
    try:
        done = subprocess.run(
            command(work, limits, argument),
            input=data,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={},
            timeout=limits.seconds,
            check=False,
        )
    except subprocess.TimeoutExpired:  # run() has killed it and waited for it
        return Ended(stopped="time")
    return _ended(done.returncode, done.stdout)


async def run_async(work: str, data: bytes, limits: Limits, argument: str = "") -> Ended:
    """`work` on `data` in a process of its own within `limits`, awaited on the event loop;
    the process is killed, and waited for, when the awaiting task is cancelled."""
    process = await asyncio.create_subprocess_exec(
        *command(work, limits, argument),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={},
    )
    try:
        async with asyncio.timeout(limits.seconds):
            output, _ = await process.communicate(data)
    except TimeoutError:
        return Ended(stopped="time")
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            # Gone before the caller goes on, even when it is being cancelled.
            await asyncio.shield(process.wait())
    assert process.returncode is not None
    return _ended(process.returncode, output)


def _ended(status: int, output: bytes) -> Ended:
    if status == 0:
        return Ended(output=output)
    if status == MEMORY_STATUS:
        return Ended(stopped="memory")
    # The soft CPU limit sends SIGXCPU; the hard one, a second or two later, SIGKILL.
    if status in (-signal.SIGXCPU, -signal.SIGKILL):
        return Ended(stopped="cpu")
    return Ended(stopped="failed", detail=f"exit status {status}")


def child() -> None:
    """The process: the work and its limits in argv, the data on stdin, the answer on
    stdout."""
    work, given = sys.argv[2], json.loads(sys.argv[3])
    _confine(Limits(**given["limits"]), given["parent"])
    module, _, name = work.partition(":")
    function = getattr(importlib.import_module(module), name)
    try:
        sys.stdout.buffer.write(function(sys.stdin.buffer.read(), given["argument"]))
        sys.stdout.flush()
    except MemoryError:
        os._exit(MEMORY_STATUS)


def _confine(limits: Limits, parent: int) -> None:
    import resource

    if sys.platform.startswith("linux"):
        import ctypes

        # Killed when the thread that started it ends (its caller waits for it, so only
        # the death of the caller's process does that); and at once if that was before.
        ctypes.CDLL(None).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:
            os._exit(1)
    os.nice(NICENESS)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 2))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_bytes, limits.memory_bytes))
