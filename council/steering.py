"""Steering a running deliberation: more (or fewer) rounds, and a critique from the user.

Both arrive as Temporal Updates. The checks here run in the updates' validators, so a
request that cannot apply is refused with one line before it touches the state. What a
user adds is bounded (council.limits): each critique, the critiques waiting for one
round, those of the whole run and their text, the changes of the maximum rounds, and
the stop reason. An update carries a deadline: one that reaches the workflow after it
(no worker took it in time, and the user was told it failed) is refused, never applied.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from council import limits
from council.iteration import CritiqueItem, IterationState
from council.limits import (
    MAX_HUMAN_CRITIQUE_CHARS,
    MAX_HUMAN_CRITIQUE_TOTAL_CHARS,
    MAX_HUMAN_CRITIQUES_PER_ROUND,
    MAX_HUMAN_CRITIQUES_PER_RUN,
    MAX_ROUND_CHANGES,
    MAX_STOP_REASON_CHARS,
)

# A user's critique is attributed to this name, which no model id can have (it has spaces).
USER = "the user"


class HumanCritique(BaseModel):
    """The user's critique of one model's current answer (the add_critique Update). A
    client's deadline refuses it once passed (see expired_problem)."""

    model: str
    text: Annotated[str, StringConstraints(strip_whitespace=True)]
    deadline: datetime | None = None


class RoundsChange(BaseModel):
    """A new maximum of refinement rounds (the set_max_rounds Update takes this, or the
    bare number without a deadline)."""

    rounds: int
    deadline: datetime | None = None

    @classmethod
    def of(cls, change: int | RoundsChange) -> RoundsChange:
        return change if isinstance(change, RoundsChange) else cls(rounds=change)


class SteeringAction(BaseModel):
    """What the user did to a running deliberation, as the record keeps it."""

    at: datetime
    kind: Literal["max_rounds", "critique"]
    during_round: int = Field(description="the refinement round under way (0: before any)")
    max_rounds: int | None = None
    model: str | None = None
    text: str | None = None
    delivered_in_round: int | None = Field(
        default=None, description="for a critique: the round that handed it to the model"
    )


def rounds_problem(rounds: int) -> str | None:
    """Why `rounds` can never be a maximum (None: it can be)."""
    if not limits.MIN_ROUNDS <= rounds <= limits.MAX_ROUNDS:
        return f"rounds must be between {limits.MIN_ROUNDS} and {limits.MAX_ROUNDS} (got {rounds})"
    return None


def text_problem(text: str) -> str | None:
    """Why a critique's text cannot be taken (None: it can)."""
    if not text.strip():
        return "the critique is empty"
    if len(text.strip()) > MAX_HUMAN_CRITIQUE_CHARS:
        return (
            f"the critique is too long: at most {MAX_HUMAN_CRITIQUE_CHARS} characters "
            f"(got {len(text.strip())})"
        )
    return None


def reason_problem(reason: str | None) -> str | None:
    """Why a stop reason cannot be sent (None: it can)."""
    if reason is not None and len(reason.strip()) > MAX_STOP_REASON_CHARS:
        return (
            f"the reason is too long: at most {MAX_STOP_REASON_CHARS} characters "
            f"(got {len(reason.strip())})"
        )
    return None


def bounded_reason(reason: str | None) -> str | None:
    """A stop reason as the record keeps it: at most MAX_STOP_REASON_CHARS (a client that
    sent more, bypassing the checks, is cut), None when empty."""
    text = (reason or "").strip()[:MAX_STOP_REASON_CHARS]
    return text or None


def expired_problem(deadline: datetime | None, now: datetime) -> str | None:
    """Why an update that carries a deadline is refused now (None: it is in time)."""
    if deadline is not None and now > deadline:
        return (
            "no worker took the request before its deadline; the client reported it as "
            "failed, so it is not applied"
        )
    return None


def max_rounds_problem(
    state: IterationState | None, rounds: int, steering: Sequence[SteeringAction] = ()
) -> str | None:
    """Why the maximum cannot become `rounds` now (None: it can)."""
    if state is None:
        return "the deliberation has not started yet"
    if state.terminated:
        return f"the refinement loop has ended ({state.termination_reason})"
    if rounds_problem(rounds):
        return rounds_problem(rounds)
    if rounds < state.current_round:
        return (
            f"rounds must be at least {state.current_round}, the rounds already run or under "
            f"way (got {rounds})"
        )
    if sum(action.kind == "max_rounds" for action in steering) >= MAX_ROUND_CHANGES:
        return f"the maximum rounds can be changed at most {MAX_ROUND_CHANGES} times in a run"
    return None


def critique_problem(
    state: IterationState | None,
    answered: Collection[str],
    critique: HumanCritique,
    steering: Sequence[SteeringAction] = (),
) -> str | None:
    """Why this critique cannot be taken (None: it can). `answered`: the models whose
    answer has arrived (from the first answers on: a critique waits for the first
    refinement round like any other); `steering` is what the user did so far."""
    if state is None:
        return "the deliberation has not started yet"
    if state.terminated:
        return f"the refinement loop has ended ({state.termination_reason})"
    if critique.model not in answered:
        known = ", ".join(sorted(answered)) or "none yet"
        return f"model {critique.model!r} has no answer in this council (models: {known})"
    problem = text_problem(critique.text)
    if problem:
        return problem
    given = [action for action in steering if action.kind == "critique"]
    waiting = sum(action.delivered_in_round is None for action in given)
    if waiting >= MAX_HUMAN_CRITIQUES_PER_ROUND:
        return (
            f"at most {MAX_HUMAN_CRITIQUES_PER_ROUND} critiques can wait for one round "
            f"({waiting} wait now): add more once the next round has started"
        )
    if len(given) >= MAX_HUMAN_CRITIQUES_PER_RUN:
        return f"at most {MAX_HUMAN_CRITIQUES_PER_RUN} critiques can be added to one deliberation"
    used = sum(len(action.text or "") for action in given)
    if used + len(critique.text.strip()) > MAX_HUMAN_CRITIQUE_TOTAL_CHARS:
        return (
            f"the critiques of one deliberation are at most {MAX_HUMAN_CRITIQUE_TOTAL_CHARS:,} "
            f"characters in all ({used:,} used, {len(critique.text.strip()):,} more asked)"
        )
    return None


def human_critique_item(critique: HumanCritique, label: str) -> CritiqueItem:
    return CritiqueItem(
        source_model=USER,
        target_response=label,
        critique_text=critique.text,
        severity="high",
        from_user=True,
    )


def hand_over(
    waiting: Mapping[str, Sequence[HumanCritique]],
    label_to_model: Mapping[str, str],
    critiques: dict[str, list[CritiqueItem]],
    steering: Sequence[SteeringAction],
    round_number: int,
) -> None:
    """The user's waiting critiques (by model) join a round's critiques (by label), each
    under its model's label, and the steering log says which round they were given in."""
    label_of = {model: label for label, model in label_to_model.items()}
    for model, items in waiting.items():
        label = label_of.get(model)
        if label is None:  # never: a critique is taken only of an answer that arrived
            continue
        critiques.setdefault(label, []).extend(human_critique_item(c, label) for c in items)
    for action in steering:
        if action.kind == "critique" and action.delivered_in_round is None:
            action.delivered_in_round = round_number
