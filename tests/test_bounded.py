"""bounded.process: work in a process of its own, within limits, each limit met for real (a
process that spins, one that waits, one that hoards memory; tests/bounded_work.py), and
the process gone whenever its caller goes on: past the clock, when the task awaiting it
is cancelled, and when the process that started it is killed outright."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

import pytest

from bounded import process
from bounded.process import Ended, Limits
from harness.processes import ROOT

ROOMY = Limits(cpu_seconds=60, memory_bytes=1_000_000_000, seconds=120)


def live(pid: int) -> bool:
    """Whether the process runs (a zombie, dead but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def written(path: Path) -> int | None:
    """The process id in `path`, once written."""
    try:
        return int(path.read_text())
    except (OSError, ValueError):
        return None


async def pid_in(path: Path, within: float = 60) -> int:
    """The process id the work writes to `path` once it runs."""
    deadline = asyncio.get_running_loop().time() + within
    while (pid := written(path)) is None:
        assert asyncio.get_running_loop().time() < deadline, "the work never started"
        await asyncio.sleep(0.01)
    return pid


async def until_dead(pid: int, within: float = 30) -> bool:
    deadline = asyncio.get_running_loop().time() + within
    while live(pid):
        if asyncio.get_running_loop().time() > deadline:
            return False
        await asyncio.sleep(0.02)
    return True


def test_the_work_answers_from_a_process_with_no_environment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("COUNCIL_TEST_SECRET_KEY", "sk-not-for-children")
    assert process.run("tests.bounded_work:echo", b"abc", ROOMY, "!") == Ended(output=b"cba!")
    names = json.loads(process.run("tests.bounded_work:environment", b"", ROOMY).output or b"")
    # (Python sets LC_CTYPE itself under the C locale.)
    assert set(names) <= {"LC_CTYPE"}


async def test_the_same_on_the_event_loop() -> None:
    ended = await process.run_async("tests.bounded_work:echo", b"xyz", ROOMY, "?")
    assert ended == Ended(output=b"zyx?")


def test_each_limit_ends_the_work_and_says_which() -> None:
    assert process.run("tests.bounded_work:spin", b"", Limits(1, 1_000_000_000, 120)) == Ended(
        stopped="cpu"
    )
    assert process.run("tests.bounded_work:hoard", b"", Limits(60, 200_000_000, 120)) == Ended(
        stopped="memory"
    )
    assert process.run("tests.bounded_work:wait", b"", Limits(60, 1_000_000_000, 0.5)) == Ended(
        stopped="time"
    )
    assert process.run("tests.bounded_work:fail", b"", ROOMY) == Ended(
        stopped="failed", detail="exit status 7"
    )


async def test_past_the_clock_the_process_is_gone_before_the_caller_goes_on(
    tmp_path: Path,
) -> None:
    started = tmp_path / "pid"
    limits = Limits(60, 1_000_000_000, 1.0)
    ended = await process.run_async("tests.bounded_work:wait", b"", limits, str(started))
    assert ended == Ended(stopped="time")
    assert not live(await pid_in(started))


@pytest.mark.parametrize("work", ["spin", "wait"])
async def test_a_cancelled_caller_leaves_no_process(tmp_path: Path, work: str) -> None:
    started = tmp_path / "pid"
    task = asyncio.create_task(
        process.run_async(f"tests.bounded_work:{work}", b"", ROOMY, str(started))
    )
    pid = await pid_in(started)
    assert live(pid)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not live(pid), "the work outlived the task that awaited it"


CALLER = """
import sys
from bounded import process

limits = process.Limits(cpu_seconds=600, memory_bytes=1_000_000_000, seconds=3600)
process.run("tests.bounded_work:wait", b"", limits, sys.argv[1])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
async def test_the_work_dies_with_a_caller_killed_outright(tmp_path: Path) -> None:
    """A worker SIGKILLed (no finally runs, no timeout fires) leaves no reader behind: the
    idle work, an hour from its clock, goes with it."""
    started = tmp_path / "pid"
    caller = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CALLER, str(started), cwd=ROOT
    )
    try:
        pid = await pid_in(started)
        assert live(pid)
        caller.send_signal(signal.SIGKILL)
        await caller.wait()
        assert await until_dead(pid), "the work outlived the process that started it"
    finally:
        if caller.returncode is None:
            caller.kill()
            await caller.wait()
