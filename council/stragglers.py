"""The straggler rule: a slow member never sets the pace of a stage.

In stage 1, in each review stage and in each refinement stage, the calls start together.
Once a quorum has replied (more than half of the calls, and at least two), the stage waits
for the rest until the slowest of them has run `max(grace_seconds, factor x the median
duration of the replies so far)`; then the late calls are cut and the stage goes on with
what it has. A member that was cut once is not waited for again in the same deliberation:
its later calls count when they finish with the others, and are cut when the others are
done. The chairman's call is never cut (its own timeout applies).

Why these defaults (factor 2, grace 2 s): a call that takes more than twice the median of
its peers is a straggler on any provider (a reasoning model beside flash models, a queue
on one route), while ordinary jitter stays well under 2x; the floor keeps very fast
stages (a cached or local model answering in a fraction of a second) from cutting a call
that would cost only a moment more. A user who wants every member in every stage says
`--wait-for-all`.

What a cut does: a member cut in stage 1 has no answer in this deliberation (and, like a
member whose answer failed, reviews nothing: the reviewers are the members with answers);
a cut review gives no critiques; a cut refinement keeps the previous answer.

A member is judged by its own replies, never by time lost to a fault or to waiting its
turn. A call's own time runs from the moment its request is sent to the provider until
its reply's last bytes, in the request that answered (these durations set the patience);
a late call's is that of its current request. A provider that is silent before its
first bytes (overloaded, slow to begin, a hung connection) is spending the member's time:
that is what a slow hosted provider looks like. What counts for nothing: the wait for a
slot in the worker's own queue (activities.slots: a server of our own that answers one
request at a time is sent one request at a time, so its members wait here, in turn, and
none is cut for it), a stream cut and asked again, an attempt that Temporal retries after
a 429, a 5xx or a lost worker, and the minutes a worker or the server was down. What a
call has been doing, the workflow learns from its attempt's own heartbeats (CallClock),
read from Temporal when a call outlives the patience.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Self

from pydantic import BaseModel, ConfigDict, Field

from council.calls import Stage

DEFAULT_GRACE_SECONDS = 2.0
DEFAULT_FACTOR = 2.0
MAX_GRACE_SECONDS = 3600.0
MIN_FACTOR = 1.0
MAX_FACTOR = 100.0


class StragglerPolicy(BaseModel):
    """How long a stage waits for its late calls once a quorum has replied."""

    model_config = ConfigDict(extra="forbid")

    wait_for_all: bool = Field(
        default=False,
        description="every stage waits for every member (default: once most have replied, a "
        "late member is awaited for a while, then cut)",
    )
    grace_seconds: float = Field(
        default=DEFAULT_GRACE_SECONDS,
        ge=0,
        le=MAX_GRACE_SECONDS,
        description="seconds a stage waits for its late members at least",
    )
    factor: float = Field(
        default=DEFAULT_FACTOR,
        ge=MIN_FACTOR,
        le=MAX_FACTOR,
        description="...or F x the median reply time of the others, if longer",
    )

    def describe(self) -> str:
        if self.wait_for_all:
            return "waits for every member"
        return (
            f"waits for late members up to max({self.grace_seconds:g} s, "
            f"{self.factor:g} x the median reply time)"
        )


def quorum(calls: int) -> int:
    """How many replies a stage needs before it may cut the rest: more than half, at
    least two (a stage of two calls waits for both)."""
    return max(2, calls // 2 + 1)


def patience(policy: StragglerPolicy, durations: Sequence[float]) -> float:
    """How long, from the stage's start, the stage waits for its late calls: the grace
    floor or `factor` x the median duration of the replies so far, whichever is longer."""
    median = statistics.median(durations) if durations else 0.0
    return max(policy.grace_seconds, policy.factor * median)


EFFECTS = {
    Stage.ANSWER: "no answer in this deliberation",
    Stage.REVIEW: "no critiques from this review",
    Stage.REFINE: "keeps its previous answer",
}


class LateCall(BaseModel):
    """A call the straggler rule cut: where, whose, how long it had run, what that did."""

    stage: Stage
    round: int
    model: str
    seconds: float
    effect: str = ""

    @classmethod
    def cut(cls, stage: Stage, round_number: int, model: str, seconds: float) -> Self:
        return cls(
            stage=stage,
            round=round_number,
            model=model,
            seconds=round(seconds, 3),
            effect=EFFECTS.get(stage, ""),
        )

    def describe(self) -> str:
        return (
            f"{self.model} cut in {self.stage.place(self.round)} after "
            f"{self.seconds:.1f} s: {self.effect}"
        )


# A heartbeat that is older than this is not extrapolated: the attempt may be gone (a killed
# worker), and time nobody heard of is not counted against the member. Attempts beat every
# second (activities.model_call), so a live one is never this far behind.
FRESH_BEAT_SECONDS = 2.5


class CallClock(BaseModel):
    """A late call as Temporal last heard of it: the attempt it is on, whether that attempt
    runs, and its last heartbeat (which attempt beat, whether its request was with its
    provider, for how long, how long ago that was)."""

    attempt: int
    running: bool
    beat_attempt: int = 0
    answering: bool = False
    answer_seconds: float = 0.0
    since_beat: float = 0.0

    @property
    def stale(self) -> bool:
        """Its last beat is too old to extrapolate from."""
        return self.since_beat > FRESH_BEAT_SECONDS

    def own_seconds(self) -> float:
        """How long the provider has had the current request: nothing while it waits (to be
        retried, for its first heartbeat, for a slot in the worker's queue), the last
        beat's figure when that beat is too old to trust, and the time since the beat when
        it is fresh."""
        if not self.running or self.beat_attempt != self.attempt or not self.answering:
            return 0.0
        if self.stale:
            return self.answer_seconds
        return self.answer_seconds + max(0.0, self.since_beat)


def due(patience_seconds: float, clocks: dict[str, CallClock]) -> list[str]:
    """The late calls (by model) whose own time has reached the patience: to be cut."""
    return [model for model, clock in clocks.items() if clock.own_seconds() >= patience_seconds]


def earliest_due(patience_seconds: float, models: list[str], clocks: dict[str, CallClock]) -> float:
    """The least time, in seconds, before any of these late calls can be due. A call's own
    time grows no faster than the clock: one sent x seconds ago needs the patience less x
    more, one Temporal has not heard of (not started yet, or waiting for a slot) the whole
    patience. A stale beat bounds nothing (the next fresh one may count time nobody heard
    of): 0."""

    def wait(clock: CallClock | None) -> float:
        if clock is None:
            return patience_seconds
        if clock.running and clock.stale:
            return 0.0
        return max(0.0, patience_seconds - clock.own_seconds())

    return min((wait(clocks.get(model)) for model in models), default=0.0)


class LateCalls(BaseModel):
    """What the straggler watch waits on: a stage's late calls (by model) and the patience
    their own time is held to."""

    stage: Stage
    round: int
    models: list[str]
    patience_seconds: float
