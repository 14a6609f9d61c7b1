"""Iteration state and termination rules (seed 002), plus the quality threshold (seed 004).

Time is always passed in: the workflow supplies workflow.now(), tests a fixed datetime.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from council.stages import Stage2Result

DEFAULT_MAX_ROUNDS = 2
DEFAULT_TOKEN_BUDGET = 50_000
DEFAULT_QUALITY_THRESHOLD = 1.5
BUDGET_STOP_FRACTION = 0.9


class TerminationReason(StrEnum):
    MAX_ROUNDS = "max_rounds_reached"
    CONVERGENCE = "models_converged"
    USER_STOP = "user_stopped"
    NO_CHANGES = "no_significant_changes"
    ERROR = "error_occurred"
    CONTEXT_LIMIT = "context_limit_reached"
    QUALITY_THRESHOLD_MET = "quality_threshold_met"


class CritiqueItem(BaseModel):
    """One reviewer's critique of one anonymous answer."""

    source_model: str
    target_response: str  # "Response A", "Response B", ...
    critique_text: str
    severity: str = "medium"  # high, medium, low
    rating: float | None = None


class RejectedCritique(BaseModel):
    critique: str
    reason: str = ""


class RefinementResult(BaseModel):
    """A model's refinement of its own answer (seed 000/002, with seed 001's structure)."""

    model: str
    original_response: str
    refined_response: str
    critiques_addressed: list[str] = Field(default_factory=list)
    changes_made: bool = False
    change_summary: str | None = None
    # Seed 001's structured fields, present when the model gave them.
    critiques_accepted: list[str] = Field(default_factory=list)
    critiques_rejected: list[RejectedCritique] = Field(default_factory=list)
    refinement_reasoning: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    changed_from_original: bool | None = None
    improvement_explanation: str | None = None
    # Set when the call failed and the model kept its previous answer (seed 003).
    error: str | None = None


class IterationRound(BaseModel):
    """One refinement round and the fresh review that followed it."""

    round_number: int
    started_at: datetime
    completed_at: datetime | None = None
    critiques: dict[str, list[CritiqueItem]] = Field(default_factory=dict)  # label -> critiques
    refinements: list[RefinementResult] = Field(default_factory=list)
    models_that_changed: list[str] = Field(default_factory=list)
    models_unchanged: list[str] = Field(default_factory=list)
    reviews: list[Stage2Result] = Field(default_factory=list)
    tokens_used: int = 0


class IterationState(BaseModel):
    enabled: bool = False
    max_rounds: int = Field(default=DEFAULT_MAX_ROUNDS, ge=1, le=5)
    current_round: int = 0
    rounds: list[IterationRound] = Field(default_factory=list)
    terminated: bool = False
    termination_reason: TerminationReason | None = None
    total_tokens_used: int = 0
    context_budget: int = DEFAULT_TOKEN_BUDGET
    quality_threshold: float = DEFAULT_QUALITY_THRESHOLD
    stop_on_convergence: bool = True
    # Mean peer rating (1-5) of each model's current answer, from the latest review.
    latest_scores: dict[str, float] = Field(default_factory=dict)
    # How many models the latest review gave critiques to (None: not known yet).
    critiques_pending: int | None = None


class IterationConfig(BaseModel):
    enabled: bool = True
    max_rounds: int = DEFAULT_MAX_ROUNDS
    auto_stop_on_convergence: bool = True
    min_change_threshold: float = 0.1
    quality_threshold: float = DEFAULT_QUALITY_THRESHOLD
    context_budget: int = DEFAULT_TOKEN_BUDGET


def initialize_iteration_state(config: IterationConfig) -> IterationState:
    return IterationState(
        enabled=config.enabled,
        max_rounds=config.max_rounds,
        context_budget=config.context_budget,
        quality_threshold=config.quality_threshold,
        stop_on_convergence=config.auto_stop_on_convergence,
    )


def quality_threshold_met(state: IterationState) -> bool:
    """Seed 004: another round is wanted while any answer is rated below the threshold."""
    scores = state.latest_scores.values()
    return bool(scores) and min(scores) >= state.quality_threshold


def should_continue_iteration(
    state: IterationState,
) -> tuple[bool, TerminationReason | None]:
    """Whether another refinement round should run, and if not, why."""
    if not state.enabled:
        return False, None
    if state.terminated:
        return False, state.termination_reason
    if quality_threshold_met(state):
        return False, TerminationReason.QUALITY_THRESHOLD_MET
    if state.current_round >= state.max_rounds:
        return False, TerminationReason.MAX_ROUNDS
    if state.total_tokens_used > state.context_budget * BUDGET_STOP_FRACTION:
        return False, TerminationReason.CONTEXT_LIMIT
    if state.stop_on_convergence and state.rounds and not state.rounds[-1].models_that_changed:
        return False, TerminationReason.CONVERGENCE
    if state.critiques_pending == 0:
        return False, TerminationReason.NO_CHANGES
    return True, None


def start_new_round(state: IterationState, now: datetime) -> IterationRound:
    state.current_round += 1
    new_round = IterationRound(round_number=state.current_round, started_at=now)
    state.rounds.append(new_round)
    return new_round


def charge_tokens(state: IterationState, tokens: int) -> None:
    """Count tokens spent outside a round (stage 1 and the first review)."""
    state.total_tokens_used += tokens


def complete_round(
    state: IterationState, round_data: IterationRound, tokens_used: int, now: datetime
) -> None:
    round_data.completed_at = now
    round_data.tokens_used = tokens_used
    state.total_tokens_used += tokens_used
    state.rounds[-1] = round_data


def terminate_iteration(state: IterationState, reason: TerminationReason) -> None:
    state.terminated = True
    state.termination_reason = reason


def get_iteration_summary(state: IterationState) -> dict[str, Any]:
    reason = state.termination_reason.value if state.termination_reason else None
    common = {
        "max_rounds": state.max_rounds,
        "terminated_reason": reason,
        "tokens_used": state.total_tokens_used,
        "token_budget": state.context_budget,
        "quality_threshold": state.quality_threshold,
        "final_scores": dict(state.latest_scores),
    }
    if not state.rounds:
        return {"message": "No iterations performed", "rounds_completed": 0, **common}
    return {
        "rounds_completed": len(state.rounds),
        "total_refinements": sum(len(r.models_that_changed) for r in state.rounds),
        "total_unchanged": sum(len(r.models_unchanged) for r in state.rounds),
        **common,
        "round_summaries": [
            {
                "round": r.round_number,
                "models_changed": len(r.models_that_changed),
                "models_unchanged": len(r.models_unchanged),
                "tokens_used": r.tokens_used,
                "duration_seconds": (r.completed_at - r.started_at).total_seconds()
                if r.completed_at
                else None,
            }
            for r in state.rounds
        ],
    }
