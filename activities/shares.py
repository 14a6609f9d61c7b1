"""How many model calls this worker process sends at once, and each tenant's and each run's
share of them.

A call's turn comes before its request is sent: at most `total` calls of the process are
with their providers at once (COUNCIL_MAX_CONCURRENT_CALLS), at most `per_tenant` of one
tenant (the run's fairness key, runs.priority; runs started without one share the
key "") and at most `per_run` of one run. The tenant's bound is below the total, so that
calls that never end (a provider that accepts requests and never answers) hold at most
their tenant's share: the rest of the worker stays free for the others.

The other calls wait here, in the worker (its Temporal activity slots are the calls it
sends plus those that may wait: worker.py), and the wait counts for nothing: the call
heartbeats while it waits, so that a stop cancels it at once, and its own time
(activities.slots.AnswerClock) starts only when its request is sent. When a call ends,
the next to go is the waiting call of the highest priority (Temporal's priority key, as the
server orders its queue), then of the tenant with the fewest calls sent, then of the run
with the fewest, then the first to come.

Temporal's worker cannot do this itself: a slot supplier (temporalio.worker
.CustomSlotSupplier) reserves a slot before it polls, knowing nothing of the task it will
get, and learns only the activity's type when the task comes, so it cannot hold back one
tenant's calls.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

from council.limits import MAX_MODELS

# Temporal's priority key when a run sets none.
DEFAULT_PRIORITY = 3
# A run's share by default: a stage's calls of the largest council.
DEFAULT_PER_RUN = MAX_MODELS
# Calls the worker takes to wait for their turn, by default, per call it sends.
WAITING_CALLS_FACTOR = 2


def default_per_tenant(total: int) -> int:
    """A tenant's share by default: half the worker's calls (at least one)."""
    return max(1, total // 2)


def waiting_calls(total: int, waiting: int | None) -> int:
    """How many calls wait for their turn (`waiting`; None: the default for `total`)."""
    return WAITING_CALLS_FACTOR * total if waiting is None else waiting


@dataclass(frozen=True)
class Caller:
    """Whose call it is: the run's tenant (its fairness key), the run, its priority."""

    fairness_key: str
    run: str
    priority: int = DEFAULT_PRIORITY


@dataclass(eq=False)
class _Waiting:
    caller: Caller
    order: int
    turn: asyncio.Future[None] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class CallShares:
    """The calls this process sends at once (`total`; None: no bound), of one tenant
    (`per_tenant`) and of one run (`per_run`), each at most the one before it."""

    def __init__(
        self, total: int | None = None, per_tenant: int | None = None, per_run: int | None = None
    ) -> None:
        self.total = total
        self.per_tenant = min(filter(None, (per_tenant, total)), default=None)
        self.per_run = min(filter(None, (per_run, self.per_tenant)), default=None)
        self._sent = 0
        self._tenants: Counter[str] = Counter()
        self._runs: Counter[str] = Counter()
        self._waiting: list[_Waiting] = []
        self._arrivals = itertools.count()

    @classmethod
    def of_worker(
        cls, total: int, per_tenant: int | None = None, per_run: int | None = None
    ) -> CallShares:
        """A worker's shares: `total` calls sent at once, of a tenant `per_tenant` (None:
        default_per_tenant) and of a run `per_run` (None: DEFAULT_PER_RUN)."""
        return cls(total, per_tenant or default_per_tenant(total), per_run or DEFAULT_PER_RUN)

    @property
    def sent(self) -> int:
        return self._sent

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def sent_for(self, tenant: str) -> int:
        return self._tenants[tenant]

    @contextlib.asynccontextmanager
    async def turn(self, caller: Caller) -> AsyncIterator[None]:
        """Wait for the caller's turn, then hold it while the block runs."""
        waiting = _Waiting(caller, next(self._arrivals))
        self._waiting.append(waiting)
        self._hand_out()
        try:
            await waiting.turn
        except asyncio.CancelledError:
            if waiting.turn.done() and not waiting.turn.cancelled():
                self._give_back(caller)  # its turn came as it was cancelled
            elif waiting in self._waiting:
                self._waiting.remove(waiting)
            raise
        try:
            yield
        finally:
            self._give_back(caller)

    def _may_send(self, caller: Caller) -> bool:
        return (
            (self.total is None or self._sent < self.total)
            and (self.per_tenant is None or self._tenants[caller.fairness_key] < self.per_tenant)
            and (self.per_run is None or self._runs[caller.run] < self.per_run)
        )

    def _hand_out(self) -> None:
        # A call cancelled as it waited may not have left the queue yet: its turn is gone.
        self._waiting = [w for w in self._waiting if not w.turn.done()]
        while self._waiting and (self.total is None or self._sent < self.total):
            ready = [w for w in self._waiting if self._may_send(w.caller)]
            if not ready:
                return
            chosen = min(
                ready,
                key=lambda w: (
                    w.caller.priority,
                    self._tenants[w.caller.fairness_key],
                    self._runs[w.caller.run],
                    w.order,
                ),
            )
            self._waiting.remove(chosen)
            self._sent += 1
            self._tenants[chosen.caller.fairness_key] += 1
            self._runs[chosen.caller.run] += 1
            chosen.turn.set_result(None)

    def _give_back(self, caller: Caller) -> None:
        self._sent -= 1
        for counter, key in ((self._tenants, caller.fairness_key), (self._runs, caller.run)):
            counter[key] -= 1
            if counter[key] <= 0:
                del counter[key]
        self._hand_out()
