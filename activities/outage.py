"""A provider's outage: its calls paused instead of burning their retries, and resumed when
it answers again.

In each worker process, each provider's calls are counted as they end. A provider may be
down when a call finds no connection to it, or when OUTAGE_FAILURES calls in a row of at
least two models failed because the provider is not there (a 5xx, or no connection: the
failures of ErrorType.PROVIDER_UNAVAILABLE and CONNECTION_FAILED). That is only a
suspicion: the provider is down once its model list does not answer either (the probe: no
connection, or a 5xx from the provider itself). Models that fail while the provider
answers are those models' trouble, whoever names them: their calls retry as their policy
says, and fail when their attempts are spent; everyone else's calls go on. After 5xx
replies, a probe that answered stands for CONFIRM_REUSE_SECONDS: failing models have the
provider asked at most that often. Only a provider that has answered a call of this
process can be down: one never reached is a setup to fix (a wrong address or key), and
its calls fail as they always did, so that the page and `doctor` say so. From then on a
call of that provider, when it fails or as it starts, pauses itself (Temporal's activity
pause: the server schedules no further attempt until it is unpaused) and ends its attempt
with "waiting for provider NAME since TIME". The first call that finds no connection has
the probe asked at once, so that it spends one attempt on the outage, not all of them.
While paused a call spends no attempt, and the straggler rule's clock stands still (it
counts only attempts that run), so an outage of any length costs no member its place.

While it is down, the probe asks the provider for its model list every PROBE_SECONDS;
once it answers (any status below 500), the provider is up, and every paused call of it
is unpaused: the ones this process paused, and any other process's that the namespace's
running deliberations show (paused_calls). A process that died leaves its paused calls
behind: every worker, when it starts, takes over the calls it finds paused (adopt),
probes their provider and resumes them once it answers. A resumed call goes on from the
attempt it was on: a provider that answers its model list but keeps failing calls costs
each call an attempt per pause, so no call waits forever. `starter.py providers` lists
the paused calls and resumes them by hand.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

from temporalio import activity
from temporalio.api.common.v1 import WorkflowExecution
from temporalio.api.workflowservice.v1 import PauseActivityRequest, UnpauseActivityRequest
from temporalio.client import Client
from temporalio.service import RPCError

from activities.errors import ErrorType

log = logging.getLogger("council.outage")

OUTAGE_FAILURES = 3
PROBE_SECONDS = 5.0
CONFIRM_REUSE_SECONDS = 1.0
OUTAGE_ERRORS = frozenset({ErrorType.PROVIDER_UNAVAILABLE.value, ErrorType.CONNECTION_FAILED.value})
# The words that start a paused call's last failure: what surfaces show and list.
WAITING_FOR = "waiting for provider"


def waiting_line(provider: str, since: datetime) -> str:
    return f"{WAITING_FOR} {provider} since {since.strftime('%Y-%m-%d %H:%M:%S')} UTC"


@dataclass(frozen=True)
class ModelCalls:
    """Where a namespace's model calls are: the pending activities of `activity_type` in its
    running workflows of `workflow_types` (named by the layer that defines them:
    workflows.registry)."""

    workflow_types: tuple[str, ...]
    activity_type: str

    def running(self) -> str:
        """The visibility query of the running workflows that make these calls."""
        types = ", ".join(f'"{name}"' for name in self.workflow_types)
        return f'ExecutionStatus="Running" AND WorkflowType IN ({types})'


@dataclass(frozen=True)
class PausedCall:
    """A model call paused while its provider is down."""

    workflow_id: str
    run_id: str
    activity_id: str
    provider: str
    since: datetime | None = None


class ProviderDown(Exception):
    """The call's provider is down: the call paused itself (its attempt ends with this)."""


class Health:
    """One provider's health in this process, and its probe while it is down."""

    def __init__(self, name: str, probe: Callable[[], Awaitable[bool]]) -> None:
        self.name = name
        self.probe = probe
        self.failures_in_row = 0
        self.failing_models: set[str] = set()  # the models of those failures
        self.answered = False  # a call of this process has had its reply
        self.down_since: datetime | None = None
        self.paused: set[PausedCall] = set()
        self._probing: asyncio.Task[None] | None = None
        self._confirming: asyncio.Task[bool] | None = None
        self._probe_answered: float | None = None  # when (time.monotonic) it last did

    def succeeded(self) -> None:
        self.answered = True
        self._reset()

    def _reset(self) -> None:
        self.failures_in_row = 0
        self.failing_models.clear()

    def failed(self, error_type: str | None, model: str) -> bool:
        """Count a failed call of `model`; whether the provider is down or may be (to be
        confirmed: confirmed_down)."""
        if error_type in OUTAGE_ERRORS:
            self.failures_in_row += 1
            self.failing_models.add(model)
        else:
            self._reset()
        if self.down_since is not None:
            return True
        return self.answered and (
            error_type == ErrorType.CONNECTION_FAILED.value
            or (self.failures_in_row >= OUTAGE_FAILURES and len(self.failing_models) >= 2)
        )

    def went_down(self) -> None:
        self.down_since = datetime.now(UTC)
        log.warning(
            "provider %s is down: %d call(s) in a row failed, and its model list does not "
            "answer either; its calls wait, paused, until it answers again",
            self.name,
            self.failures_in_row,
        )

    def answered_lately(self) -> bool:
        """Whether the probe answered a moment ago (CONFIRM_REUSE_SECONDS)."""
        answered = self._probe_answered
        return answered is not None and time.monotonic() - answered < CONFIRM_REUSE_SECONDS

    async def confirmed_down(self, error_type: str | None) -> bool:
        """Whether the provider is down (failed() said it may be), its probe asked once for
        the calls that wonder at the same time. After 5xx replies, a probe that answered a
        moment ago stands; a call that found no connection asks again."""
        if self.down_since is not None:
            return True
        if error_type != ErrorType.CONNECTION_FAILED.value and self.answered_lately():
            return False
        if self._confirming is None or self._confirming.done():
            self._confirming = asyncio.get_running_loop().create_task(self.confirm())
        # Shielded: a call cancelled meanwhile leaves the probe to the others.
        return await asyncio.shield(self._confirming)

    async def confirm(self) -> bool:
        """Ask the provider's model list: whether the provider is down. If it answers, the
        failures are their models' own."""
        if await self.probe():
            self._probe_answered = time.monotonic()
            if self.failing_models:
                log.info(
                    "calls of %s failed, but provider %s answers: not an outage, those "
                    "calls retry as their policy says",
                    ", ".join(sorted(self.failing_models)),
                    self.name,
                )
            self._reset()
            return False
        if self.down_since is None:
            self.went_down()
        return True


class Outages:
    """Every provider's Health in this worker process; pauses and resumes calls."""

    def __init__(
        self,
        client: Client,
        probes: dict[str, Callable[[], Awaitable[bool]]],
        calls: ModelCalls,
    ) -> None:
        self.client = client
        self.calls = calls
        self.health = {name: Health(name, probe) for name, probe in probes.items()}
        self._closed = False

    def down(self, provider: str) -> datetime | None:
        return self.health[provider].down_since

    async def confirmed_down(self, provider: str, error_type: str | None) -> bool:
        return await self.health[provider].confirmed_down(error_type)

    async def adopt(self, default: str) -> int:
        """The calls paused in the namespace when this process starts (their process may
        have died): each is watched as if this process had paused it, under the provider
        its last failure names (else `default`), and resumed once that answers. How many."""
        try:
            found = await paused_calls(self.client, self.calls, any_provider=True)
        except RPCError as error:
            log.warning("could not look for paused calls: %s", error.message)
            return 0
        for call in found:
            health = self.health.get(call.provider) or self.health[default]
            health.down_since = health.down_since or call.since or datetime.now(UTC)
            health.paused.add(call)
            self._probe(health)
        if found:
            log.warning("%d call(s) found paused: resumed once their provider answers", len(found))
        return len(found)

    async def pause_this_call(self, provider: str) -> str:
        """Pause the calling activity (its next attempt waits until it is unpaused); the
        line its attempt ends with."""
        health = self.health[provider]
        since = health.down_since or datetime.now(UTC)
        info = activity.info()
        assert info.workflow_id is not None and info.workflow_run_id is not None
        call = PausedCall(info.workflow_id, info.workflow_run_id, info.activity_id, provider)
        line = waiting_line(provider, since)
        await pause(self.client, call, line)
        health.paused.add(call)
        self._probe(health)
        return line

    def _probe(self, health: Health) -> None:
        if health._probing is None or health._probing.done():
            health._probing = asyncio.get_running_loop().create_task(self._until_up(health))

    async def _until_up(self, health: Health) -> None:
        while not self._closed:
            await asyncio.sleep(PROBE_SECONDS)
            if await health.probe():
                break
        else:
            return
        was = health.down_since
        health.down_since = None
        health.succeeded()
        mine, health.paused = health.paused, set()
        others = await paused_calls(self.client, self.calls, health.name)
        resumed = await resume(self.client, {*mine, *others})
        log.warning(
            "provider %s answers again (down since %s): %d paused call(s) resumed",
            health.name,
            was,
            resumed,
        )

    async def aclose(self) -> None:
        self._closed = True
        for health in self.health.values():
            for task in (health._probing, health._confirming):
                if task is not None:
                    task.cancel()


async def pause(client: Client, call: PausedCall, reason: str) -> None:
    await client.workflow_service.pause_activity(
        PauseActivityRequest(
            namespace=client.namespace,
            execution=WorkflowExecution(workflow_id=call.workflow_id, run_id=call.run_id),
            identity=client.identity,
            id=call.activity_id,
            reason=reason,
        )
    )


async def resume(client: Client, calls: Iterable[PausedCall]) -> int:
    """Unpause these calls (each goes on from its attempt); how many were unpaused (one
    another process unpaused already, or whose run ended, is passed over)."""
    done = 0
    for call in {(c.workflow_id, c.run_id, c.activity_id): c for c in calls}.values():
        try:
            await client.workflow_service.unpause_activity(
                UnpauseActivityRequest(
                    namespace=client.namespace,
                    execution=WorkflowExecution(workflow_id=call.workflow_id, run_id=call.run_id),
                    identity=client.identity,
                    id=call.activity_id,
                )
            )
        except RPCError as error:
            log.info(
                "call %s/%s not unpaused: %s", call.workflow_id, call.activity_id, error.message
            )
            continue
        done += 1
    return done


UNKNOWN = "?"


async def paused_calls(
    client: Client, calls: ModelCalls, provider: str | None = None, any_provider: bool = False
) -> list[PausedCall]:
    """The model calls paused in the namespace's running deliberations (and judges), of
    one provider or of all: from each run's pending activities, the provider named by the
    line their last attempt ended with. With `any_provider`, also those whose last attempt
    names none (a process that paused its call and died before it ended the attempt),
    under the provider "?"."""
    found = []
    async for execution in client.list_workflows(calls.running()):
        try:
            described = await client.get_workflow_handle(
                execution.id, run_id=execution.run_id
            ).describe()
        except RPCError:
            continue  # closed meanwhile
        for pending in described.raw_description.pending_activities:
            if pending.activity_type.name != calls.activity_type or not pending.paused:
                continue
            message = pending.last_failure.message if pending.HasField("last_failure") else ""
            named = _provider_in(message)
            if named is None and any_provider:
                named = UNKNOWN
            if named is None or (provider is not None and named != provider):
                continue
            since = (
                pending.pause_info.pause_time.ToDatetime(UTC)
                if pending.pause_info.HasField("pause_time")
                else None
            )
            found.append(
                PausedCall(execution.id, execution.run_id, pending.activity_id, named, since)
            )
    return found


def _provider_in(message: str) -> str | None:
    """The provider a paused call's last failure names ("MODEL: waiting for provider NAME
    since ...")."""
    _, found, rest = message.partition(f"{WAITING_FOR} ")
    return rest.split(" ", 1)[0] or None if found else None
