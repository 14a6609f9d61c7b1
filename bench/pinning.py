"""Where the worker is the limit, on any machine: the worker processes on cores of their
own, the dev server, the simulator and the bench driver on the others (`--pin`).

On a big machine one worker process saturates long before the server or the simulator do,
so the throughput rows measure the worker's own cost per run. On 2 cores the machine is the
limit first, and every process's cost counts against every other's. Pinned, a 2-core run
gives the worker one core and everything else the other: the worker saturates as it does
on 16 cores, and the ratio to bare Temporal is again the worker's cost.

The driver pins itself first, so that every process it starts afterwards (the dev server
and its restarts, the simulator, py-spy) inherits the other cores; each worker process is
moved onto the worker cores once it is ready, every thread of it (Linux: an affinity is a
thread's, and the threads a worker starts later inherit it from the thread that starts
them).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


class PinningError(RuntimeError):
    """Pinning is not possible here (no CPU affinity, or too few cores)."""


def _cores() -> list[int]:
    try:
        return sorted(os.sched_getaffinity(0))
    except AttributeError:  # no CPU affinity on this OS (macOS)
        raise PinningError("--pin needs CPU affinity (Linux)") from None


@dataclass(frozen=True)
class Pinning:
    """The worker cores and the rest; the driver is on the rest once `apply` has run."""

    workers: frozenset[int]
    rest: frozenset[int]

    @classmethod
    def split(cls, worker_cores: int = 1) -> Pinning:
        """The first `worker_cores` of the cores this process may use for the workers, the
        others for the rest; at least one core must be left for the rest."""
        cores = _cores()
        if not 1 <= worker_cores < len(cores):
            raise PinningError(
                f"--pin needs more cores than worker processes: {len(cores)} core(s) here, "
                f"{worker_cores} for the workers"
            )
        return cls(frozenset(cores[:worker_cores]), frozenset(cores[worker_cores:]))

    def apply(self) -> None:
        """Move this process (the driver) onto the rest: whatever it starts from now on
        runs there."""
        pin(os.getpid(), self.rest)

    def worker(self, pid: int) -> None:
        """Move a worker process (and the processes it started) onto the worker cores."""
        for each in [pid, *_children(pid)]:
            pin(each, self.workers)

    def describe(self) -> str:
        return (
            f"pinned: the worker on {_cpus(self.workers)}, the dev server, simulator and "
            f"bench driver on {_cpus(self.rest)}"
        )


def pin(pid: int, cpus: frozenset[int]) -> None:
    """Every thread of the process onto these CPUs."""
    for tid in _threads(pid):
        try:
            os.sched_setaffinity(tid, cpus)
        except ProcessLookupError:  # a thread that ended meanwhile
            continue


def affinity(pid: int) -> dict[int, frozenset[int]]:
    """Each thread's CPUs (thread id: CPUs): what `pin` set, for a check."""
    found = {}
    for tid in _threads(pid):
        try:
            found[tid] = frozenset(os.sched_getaffinity(tid))
        except ProcessLookupError:
            continue
    return found


def _threads(pid: int) -> list[int]:
    """The process's thread ids (itself alone where /proc does not list them)."""
    tasks = Path(f"/proc/{pid}/task")
    return [int(t.name) for t in tasks.iterdir()] if tasks.is_dir() else [pid]


def _children(pid: int) -> list[int]:
    """The processes a process started, and theirs (from each process's parent in /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parent = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(parent, []).append(int(entry.name))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cpus(cpus: frozenset[int]) -> str:
    ordered = sorted(cpus)
    if len(ordered) > 2 and ordered == list(range(ordered[0], ordered[-1] + 1)):
        return f"CPUs {ordered[0]}-{ordered[-1]}"
    return ("CPU " if len(ordered) == 1 else "CPUs ") + ", ".join(map(str, ordered))
