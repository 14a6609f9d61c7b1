"""Depth: whether the council deliberates on every question (`full`) or only where its first
answers disagree (`auto`).

Under `auto` the agreement gate reads the first answers once stage 1 is over:

- when every answer states a final value that can be compared (a number, an option letter,
  yes or no: grading.answers.stated_value), or when the values some answers state already
  differ, the answers agree when at least `agree_share` of them state the same value
  (by_values): a computed difference is never left to a model's judgement;
- otherwise (no two answers state values that differ, and some state none) one agreement
  check call (the chairman's model unless `check_model` names another) reads the answers
  and replies with a structured verdict: whether they agree, and the points on which they
  differ (read_check).

When they agree, the run goes straight to the synthesis and the record keeps the gate's
evidence (`ended: agreement after stage 1`); when not, the protocol goes on and the points
of difference are handed to the reviewers as what to look at. Under `auto`, a review round
also stops collecting reviews once those in hand settle the top of the ranking
(council.aggregate.settled_leader): the outstanding calls are cancelled and recorded as not
needed. Pure: the workflow asks, nothing here calls anything.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from council.calls import Stage
from council.ids import ModelId
from council.limits import one_line
from council.structured import json_object

Depth = Literal["full", "auto"]

DEFAULT_AGREE_SHARE = 1.0
MIN_AGREE_SHARE = 0.5
# The points of difference a gate keeps, and the length of each (model text: bounded).
MAX_DIFFERENCES = 8
MAX_DIFFERENCE_CHARS = 300
# What a cancelled review call is recorded as.
NOT_NEEDED = "not needed: the reviews in hand settle the top of the ranking"


class AutoOptions(BaseModel):
    """The thresholds of depth `auto` (ignored under `full`)."""

    model_config = ConfigDict(extra="forbid")

    agree_share: float = Field(
        default=DEFAULT_AGREE_SHARE,
        ge=MIN_AGREE_SHARE,
        le=1.0,
        description="under depth auto, the share of first answers that must state the same "
        "final value for the council to skip deliberating",
    )
    check_model: ModelId | None = Field(
        default=None,
        description="under depth auto, the model that reads first answers without a "
        "comparable value for agreement (default: the chairman)",
    )
    settle_reviews: bool = Field(
        default=True,
        description="under depth auto, stop a review round once the reviews in hand settle "
        "the top of the ranking",
    )


class Gate(BaseModel):
    """The agreement gate's verdict on the first answers, with its evidence."""

    agreed: bool
    # How it was told: by the values the answers state, or by the agreement check's call.
    method: Literal["values", "check"]
    # By values: model -> the value its answer states; and the answers that state none
    # (beside values that differ).
    values: dict[str, str] = Field(default_factory=dict)
    unstated: list[str] = Field(default_factory=list)
    # Where the answers differ: by values, each value and who states it; by the check,
    # the points its reply names (model text, bounded).
    differences: list[str] = Field(default_factory=list)
    # The model that made the agreement check (by the check only).
    checker: str | None = None
    # Why the gate could not tell (the check failed or its reply could not be read): the
    # council deliberates.
    problem: str | None = None

    def focus(self, label_of: Mapping[str, str]) -> list[str]:
        """Where the first answers differ, for the reviewers: by values, each value and the
        labels of the answers that state it (never a model's name: reviews are anonymous);
        by the check, its points (it read the answers under the same labels)."""
        if self.agreed or self.problem:
            return []
        if self.method == "check":
            return list(self.differences)
        by_value: dict[str, list[str]] = {}
        for model, value in self.values.items():
            by_value.setdefault(value, []).append(label_of.get(model, "an answer"))
        return [f"{', '.join(sorted(labels))}: {value}" for value, labels in by_value.items()]

    def describe(self) -> str:
        """One line: `agreement after stage 1: all 4 answers state 42`."""
        if self.problem:
            return f"the agreement gate could not tell ({self.problem}): the council deliberates"
        if self.method == "values":
            counts = Counter(self.values.values())
            value, count = counts.most_common(1)[0]
            if self.agreed:
                answers = len(self.values) + len(self.unstated)
                every = "all" if count == answers else f"{count} of"
                return f"agreement after stage 1: {every} {answers} answers state {value}"
            return "the first answers state different values: " + "; ".join(self.differences)
        if self.agreed:
            return f"agreement after stage 1: {self.checker} found the answers in agreement"
        points = "; ".join(self.differences) or "no point named"
        return f"{self.checker} found the first answers in disagreement: {points}"


def by_values(values: Mapping[str, str | None], share: float = DEFAULT_AGREE_SHARE) -> Gate | None:
    """The gate from the value each answer states (model -> the value, shown as text; None
    where an answer states none), agreed when the most common value is stated by at least
    `share` of all the answers. None (the agreement check decides) when there are fewer
    than two answers, or when some answer states no value and those that do state the same
    one (or only one does): nothing computed tells them apart. Values that differ are
    always the values' to judge, an answer that states none counting against every value:
    a computed difference is never outweighed by a model's reading of the answers (which
    an answer's own words could sway)."""
    if len(values) < 2:
        return None
    stated = {model: value for model, value in values.items() if value is not None}
    counts = Counter(stated.values())
    unstated = [model for model, value in values.items() if value is None]
    if unstated and len(counts) < 2:
        return None
    _, most = counts.most_common(1)[0]
    agreed = most / len(values) >= share
    differences = (
        []
        if len(counts) == 1
        else [
            f"{value} ({', '.join(m for m, v in stated.items() if v == value)})"
            for value, _ in counts.most_common()
        ]
    )
    if unstated:
        differences.append(f"no comparable value ({', '.join(unstated)})")
    return Gate(
        agreed=agreed, method="values", values=stated, unstated=unstated, differences=differences
    )


def read_check(text: str, checker: str) -> Gate:
    """The agreement check's reply (council.structured.AgreementCheckReply) as the gate: a
    reply that is not that JSON is a problem, and the council deliberates."""
    data = json_object(text)
    agree = data.get("agree") if data else None
    if data is None or not isinstance(agree, bool):
        return Gate(
            agreed=False,
            method="check",
            checker=checker,
            problem="the agreement check's reply was not the verdict asked for",
        )
    raw = data.get("differences")
    points = [p for p in raw if isinstance(p, str) and p.strip()] if isinstance(raw, list) else []
    return Gate(agreed=agree, method="check", checker=checker, differences=bounded(points))


def check_failed(checker: str, why: str) -> Gate:
    return Gate(agreed=False, method="check", checker=checker, problem=why)


def bounded(points: Sequence[str]) -> list[str]:
    """At most MAX_DIFFERENCES points, each on one line and at most MAX_DIFFERENCE_CHARS."""
    return [one_line(point, MAX_DIFFERENCE_CHARS) for point in points[:MAX_DIFFERENCES]]


class NotNeeded(BaseModel):
    """A call cancelled because the run no longer needed its reply (not a failure)."""

    stage: Stage
    round: int
    model: str
    reason: str = NOT_NEEDED

    def describe(self) -> str:
        return f"{self.model} ({self.stage.place(self.round)}): {self.reason}"


class Saved(BaseModel):
    """What a run that went straight to the synthesis after stage 1 spent, against what the
    full protocol would have spent for the same council: an estimate from this run's own
    stage-1 calls (see `saved`)."""

    calls: int
    tokens: int
    full_calls: int  # estimated
    full_tokens: int  # estimated
    rounds: int  # the refinement rounds the estimate counts (the run's minimum)

    @property
    def saved_calls(self) -> int:
        return max(0, self.full_calls - self.calls)

    @property
    def saved_tokens(self) -> int:
        return max(0, self.full_tokens - self.tokens)

    def describe(self) -> str:
        """One line: what it spent, what the full protocol would have, what that saved."""
        return (
            f"spent {self.calls} calls and {self.tokens:,} tokens, where the full protocol "
            f"would have spent about {self.full_calls} calls and {self.full_tokens:,} tokens "
            f"(an estimate from this run's stage-1 calls: the review and "
            f"{self.rounds} refinement round(s)): about {self.saved_calls} calls and "
            f"{self.saved_tokens:,} tokens saved"
        )


def saved(
    answered: int,
    calls: int,
    tokens: int,
    stage1_tokens: tuple[int, int],
    check: tuple[int, int],
    rounds: int,
) -> Saved:
    """What depth auto saved a run that ended on agreement after stage 1, estimated from its
    own stage-1 calls. `answered`: the members that answered; `calls`, `tokens`: what the run
    spent in all; `stage1_tokens`: stage 1's prompt and completion tokens; `check`: the
    agreement check's calls and tokens (the full protocol makes none); `rounds`: the
    refinement rounds the full protocol runs at least (the request's minimum).

    The full protocol would have made, besides the same answers and synthesis, a review by
    each member and `rounds` rounds of a refinement and a review by each: each such call
    estimated as a stage-1 call's prompt with the other answers it reads (a review, the
    others' answers; a refinement, its own and a critique from each reviewer, each as long
    as an answer) and an answer's length for its reply."""
    n = max(answered, 1)
    prompt, answer = stage1_tokens[0] / n, stage1_tokens[1] / n
    review = prompt + (n - 1) * answer + answer
    refinement = prompt + n * answer + answer
    extra_calls = n + rounds * 2 * n
    extra_tokens = n * review + rounds * n * (refinement + review)
    check_calls, check_tokens = check
    return Saved(
        calls=calls,
        tokens=tokens,
        full_calls=calls - check_calls + extra_calls,
        full_tokens=round(tokens - check_tokens + extra_tokens),
        rounds=rounds,
    )
