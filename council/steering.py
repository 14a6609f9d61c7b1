"""Steering a running deliberation: more (or fewer) rounds, and a critique from the user.

Both arrive as Temporal Updates. The checks here run in the updates' validators, so a
request that cannot apply is refused with one line before it touches the state.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, Field, StringConstraints

from council import limits
from council.iteration import CritiqueItem, IterationState

# A user's critique is attributed to this name, which no model id can have (it has spaces).
USER = "the user"
MAX_HUMAN_CRITIQUE_CHARS = 2_000


class HumanCritique(BaseModel):
    """The user's critique of one model's current answer."""

    model: str
    text: Annotated[str, StringConstraints(strip_whitespace=True)]


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


def max_rounds_problem(state: IterationState | None, rounds: int) -> str | None:
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
    return None


def critique_problem(
    state: IterationState | None, label_of: Mapping[str, str], critique: HumanCritique
) -> str | None:
    """Why this critique cannot be taken (None: it can). `label_of` maps each model that
    has an answer to refine to its label."""
    if state is None:
        return "the deliberation has not started yet"
    if state.terminated:
        return f"the refinement loop has ended ({state.termination_reason})"
    if critique.model not in label_of:
        known = ", ".join(sorted(label_of)) or "none yet"
        return f"model {critique.model!r} has no answer in this council (models: {known})"
    return text_problem(critique.text)


def human_critique_item(critique: HumanCritique, label: str) -> CritiqueItem:
    return CritiqueItem(
        source_model=USER,
        target_response=label,
        critique_text=critique.text,
        severity="high",
        from_user=True,
    )
