"""Who a run is for, and so which task goes first when workers are busy: Temporal's
task-queue priority and fairness, set when a run starts and inherited by every workflow
task and model call of the run.

- Priority: a run a person waits on (the page, /v1, MCP, `start`) goes ahead of batch
  work (`eval`, `bench`, `start --priority batch`). Lower goes first; runs of other
  programs on the same queue, with Temporal's default (3), sit between the two.
- Fairness: each caller (a tenant) has its own key, and the server hands out a backlogged
  queue's tasks across keys in turn (weighted), so that one caller's hundred runs do not
  starve another's one. A key is a name a person gives (`--tenant`) or a digest of what
  identifies a caller (a sign-in, a bearer token, /v1's `user`): never a secret itself,
  since it is written into the run's history.

Both need a server that orders its queues by them: the dev server with
`matching.enableFairness` (what `make up`, `make demo` and the tests start), a cluster with
the same dynamic config (docs/deployment.md). A server without it still runs everything, in
arrival order.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from enum import StrEnum

from temporalio.common import Priority

from council.ids import tenant_problem
from runs.quota import Quota

# Temporal's priority keys run from 1 (first) to 5; its default is 3.
INTERACTIVE_KEY = 1
BATCH_KEY = 5


class Urgency(StrEnum):
    INTERACTIVE = "interactive"
    BATCH = "batch"


def tenant_of(kind: str, identity: str) -> str:
    """A caller's tenant from what identifies it (a session, a bearer token, a client's
    user id): a digest, so that the identity itself never reaches history."""
    digest = hashlib.sha256(f"council tenant\0{kind}\0{identity}".encode()).hexdigest()
    return f"{kind}:{digest[:16]}"


@dataclass(frozen=True)
class Launch:
    """How a run starts: how urgent, and for whom (None: the server's default key); and the
    quota the tenant's starts are held to (None: none, as for the operator's own runs)."""

    urgency: Urgency = Urgency.INTERACTIVE
    tenant: str | None = None
    quota: Quota | None = None

    def __post_init__(self) -> None:
        if self.tenant is not None and (problem := tenant_problem(self.tenant)):
            raise ValueError(problem)

    def priority(self) -> Priority:
        key = INTERACTIVE_KEY if self.urgency is Urgency.INTERACTIVE else BATCH_KEY
        return Priority(priority_key=key, fairness_key=self.tenant)


INTERACTIVE = Launch()
BATCH = Launch(Urgency.BATCH, "batch")
