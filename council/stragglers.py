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

    wait_for_all: bool = False
    grace_seconds: float = Field(default=DEFAULT_GRACE_SECONDS, ge=0, le=MAX_GRACE_SECONDS)
    factor: float = Field(default=DEFAULT_FACTOR, ge=MIN_FACTOR, le=MAX_FACTOR)

    @classmethod
    def everyone(cls) -> Self:
        """Wait for every call (the behaviour of runs that started before the rule)."""
        return cls(wait_for_all=True)

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
