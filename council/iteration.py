"""Iteration state and the termination rules of the refinement loop.

Time is passed in: the workflow supplies workflow.now(), tests a fixed datetime. The
specification's own calls (`start_new_round(state)`, `complete_round(state, round, tokens)`)
leave it out, and then the wall clock is read, as the specification does.

The loop runs at least `min_rounds` refinement rounds, then another round only while
some individual peer rating of some current answer is below the quality threshold.
`should_continue_iteration` checks the rules in one fixed order; when two hold at once,
the first one named is the reason reported:

1. the run already ended: the user stopped it, or every call of a round failed
2. every peer rating is at least the threshold (only once min_rounds have run)
3. max_rounds have run
4. the tokens spent passed 90 % of the token budget
5. the reported cost passed 90 % of the cost budget
6. no answer changed significantly in the last round (only once min_rounds have run)
7. the latest review gave no model a critique to refine from

A critique from the user waiting for the next round sets aside rules 2, 6 and 7: the
user asked for another round, which then runs unless a limit (1, 3, 4, 5) holds.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from council import limits
from council.aggregate import lowest_ratings, mean_ratings
from council.agreement import Agreement
from council.changes import NEW_WORD_RATIO
from council.stages import AggregateRanking, Ending, Stage2Result

DEFAULT_MAX_ROUNDS = 2
DEFAULT_MIN_ROUNDS = 1
DEFAULT_TOKEN_BUDGET = 50_000
# 30 % of the 1-5 scale: a rating below it asks for another round.
DEFAULT_QUALITY_THRESHOLD = 1.5
BUDGET_STOP_FRACTION = 0.9


class TerminationReason(StrEnum):
    MAX_ROUNDS = "max_rounds_reached"
    CONVERGENCE = "models_converged"
    USER_STOP = "user_stopped"
    NO_CHANGES = "no_significant_changes"
    # What ends the loop with that value: the latest review gave no member a critique to
    # refine from (the specification's name, NO_CHANGES, is kept as the member's alias).
    NO_CRITIQUES = "no_significant_changes"
    ERROR = "error_occurred"
    CONTEXT_LIMIT = "context_limit_reached"
    QUALITY_THRESHOLD_MET = "quality_threshold_met"
    COST_LIMIT = "cost_limit_reached"
    # Depth auto: the first answers agreed, no deliberation was needed (council.depth).
    AGREEMENT = "agreement_after_stage1"


class CritiqueItem(BaseModel):
    """One reviewer's critique of one anonymous answer."""

    source_model: str
    target_response: str  # "Response A", "Response B", ...
    critique_text: str
    severity: str = "medium"  # high, medium, low
    rating: float | None = None
    from_user: bool = False  # the user's own critique (an Update), not a peer's


class RejectedCritique(BaseModel):
    critique: str
    reason: str = ""


class RefinementResult(Ending):
    """A model's refinement of its own answer, with the structured fields of its reply
    (and how the reply ended: Ending)."""

    model: str
    original_response: str
    refined_response: str
    critiques_addressed: list[str] = Field(default_factory=list)
    # Critiques aimed at it that its prompt's feedback budget left out.
    critiques_left_out: int = 0
    changes_made: bool = False
    change_summary: str | None = None
    # The structured reply's fields, present when the model gave them.
    critiques_accepted: list[str] = Field(default_factory=list)
    critiques_rejected: list[RejectedCritique] = Field(default_factory=list)
    refinement_reasoning: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    changed_from_original: bool | None = None
    improvement_explanation: str | None = None
    reasoning_steps: list[str] = Field(default_factory=list)
    # The model's whole reply, as it arrived (within the reply size cap).
    raw_response: str | None = None
    # Set when the call failed and the model kept its previous answer.
    error: str | None = None
    # Set when the straggler rule cut the call (error says so): the previous answer stays.
    late: bool = False


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
    # How far that review agreed (council.agreement).
    agreement: Agreement | None = None
    tokens_used: int = 0


class IterationState(BaseModel):
    enabled: bool = False
    max_rounds: int = Field(default=DEFAULT_MAX_ROUNDS, ge=limits.MIN_ROUNDS, le=limits.MAX_ROUNDS)
    min_rounds: int = Field(default=DEFAULT_MIN_ROUNDS, ge=0, le=limits.MAX_ROUNDS)
    current_round: int = 0
    rounds: list[IterationRound] = Field(default_factory=list)
    terminated: bool = False
    termination_reason: TerminationReason | None = None
    total_tokens_used: int = 0
    context_budget: int = DEFAULT_TOKEN_BUDGET
    quality_threshold: float = DEFAULT_QUALITY_THRESHOLD
    stop_on_convergence: bool = True
    # A refinement with at most this share of new words, in the middle band of similarity,
    # counts as unchanged (council.changes).
    min_change_threshold: float = Field(default=NEW_WORD_RATIO, ge=0, le=1)
    # Cost in USD as the providers reported it (None: no call reported a cost).
    cost_usd: float | None = None
    max_cost_usd: float | None = None
    # Mean peer rating (1-5) of each model's current answer, from the latest review.
    latest_scores: dict[str, float] = Field(default_factory=dict)
    # The lowest individual peer rating of each model's current answer, same review.
    lowest_ratings: dict[str, float] = Field(default_factory=dict)
    # How many models the latest review gave critiques to (None: not known yet).
    critiques_pending: int | None = None
    # Critiques from the user waiting for the next round: they keep the loop going.
    human_critiques_pending: int = 0


class IterationConfig(BaseModel):
    enabled: bool = True
    max_rounds: int = DEFAULT_MAX_ROUNDS
    min_rounds: int = DEFAULT_MIN_ROUNDS
    auto_stop_on_convergence: bool = True
    min_change_threshold: float = NEW_WORD_RATIO
    quality_threshold: float = DEFAULT_QUALITY_THRESHOLD
    context_budget: int = DEFAULT_TOKEN_BUDGET
    max_cost_usd: float | None = None


def initialize_iteration_state(config: IterationConfig) -> IterationState:
    return IterationState(
        enabled=config.enabled,
        max_rounds=config.max_rounds,
        min_rounds=config.min_rounds,
        context_budget=config.context_budget,
        quality_threshold=config.quality_threshold,
        stop_on_convergence=config.auto_stop_on_convergence,
        min_change_threshold=config.min_change_threshold,
        max_cost_usd=config.max_cost_usd,
    )


def quality_threshold_met(state: IterationState) -> bool:
    """No individual peer rating of the latest review is below the threshold (and there
    are ratings)."""
    ratings = state.lowest_ratings.values()
    return bool(ratings) and min(ratings) >= state.quality_threshold


def over_budget(spent: float | None, budget: float | None) -> bool:
    """Spent more than 90 % of a budget (never, without a budget or a figure)."""
    return spent is not None and budget is not None and spent > budget * BUDGET_STOP_FRACTION


def should_continue_iteration(
    state: IterationState,
) -> tuple[bool, TerminationReason | None]:
    """Whether another refinement round should run, and if not, why (in the order of the
    module's docstring)."""
    if not state.enabled:
        return False, None
    if state.terminated:
        return False, state.termination_reason
    # Nothing left to do ends the loop only when the user has not asked for more.
    settled = state.current_round >= state.min_rounds and not state.human_critiques_pending
    if settled and quality_threshold_met(state):
        return False, TerminationReason.QUALITY_THRESHOLD_MET
    if state.current_round >= state.max_rounds:
        return False, TerminationReason.MAX_ROUNDS
    if over_budget(state.total_tokens_used, state.context_budget):
        return False, TerminationReason.CONTEXT_LIMIT
    if over_budget(state.cost_usd, state.max_cost_usd):
        return False, TerminationReason.COST_LIMIT
    if (
        settled
        and state.stop_on_convergence
        and state.rounds
        and not state.rounds[-1].models_that_changed
    ):
        return False, TerminationReason.CONVERGENCE
    if state.critiques_pending == 0 and not state.human_critiques_pending:
        return False, TerminationReason.NO_CRITIQUES
    return True, None


def note_review(
    state: IterationState, rankings: Sequence[AggregateRanking], refinements_pending: int
) -> None:
    """What a review tells the rules: the ratings of the current answers (when it gave
    any) and how many models have critiques to refine from."""
    if rankings:
        state.latest_scores = mean_ratings(rankings)
        state.lowest_ratings = lowest_ratings(rankings)
    state.critiques_pending = refinements_pending


def end_if_all_failed(state: IterationState, succeeded: Sequence[bool]) -> bool:
    """A stage of the loop whose every call failed for good ends it with error_occurred,
    unless it has ended already. True if it ended it here."""
    if not succeeded or any(succeeded) or state.terminated:
        return False
    terminate_iteration(state, TerminationReason.ERROR)
    return True


async def refine_until_done(
    state: IterationState, refinement_round: Callable[[], Awaitable[None]]
) -> TerminationReason:
    """Run refinement rounds while the rules allow another; end the loop with their reason."""
    while True:
        go_on, reason = should_continue_iteration(state)
        if not go_on:
            break
        await refinement_round()
    terminate_iteration(state, reason or TerminationReason.MAX_ROUNDS)
    return state.termination_reason or TerminationReason.MAX_ROUNDS


def _clock(now: datetime | None) -> datetime:
    """The time given; the wall clock only for a caller that gives none (never the
    workflow, which passes workflow.now())."""
    return now if now is not None else datetime.now(UTC)


def start_new_round(state: IterationState, now: datetime | None = None) -> IterationRound:
    state.current_round += 1
    new_round = IterationRound(round_number=state.current_round, started_at=_clock(now))
    state.rounds.append(new_round)
    return new_round


def charge_tokens(state: IterationState, tokens: int) -> None:
    """Count tokens spent outside a round (stage 1 and the first review)."""
    state.total_tokens_used += tokens


def complete_round(
    state: IterationState,
    round_data: IterationRound,
    tokens_used: int,
    now: datetime | None = None,
) -> None:
    round_data.completed_at = _clock(now)
    round_data.tokens_used = tokens_used
    state.total_tokens_used += tokens_used
    state.rounds[-1] = round_data


def terminate_iteration(state: IterationState, reason: TerminationReason) -> None:
    state.terminated = True
    state.termination_reason = reason


class RoundSummary(BaseModel):
    round: int
    models_changed: int = 0
    models_unchanged: int = 0
    tokens_used: int = 0
    duration_seconds: float | None = None


class IterationSummary(BaseModel):
    """The loop in figures, for the record and for display (with the rules it ran by)."""

    message: str | None = None  # "No iterations performed" when no round ran
    rounds_completed: int = 0
    total_refinements: int = 0
    total_unchanged: int = 0
    max_rounds: int = DEFAULT_MAX_ROUNDS
    min_rounds: int = DEFAULT_MIN_ROUNDS
    terminated_reason: TerminationReason | None = None
    tokens_used: int = 0
    token_budget: int = DEFAULT_TOKEN_BUDGET
    cost_usd: float | None = None
    max_cost_usd: float | None = None
    quality_threshold: float = DEFAULT_QUALITY_THRESHOLD
    final_scores: dict[str, float] = Field(default_factory=dict)
    final_lowest_ratings: dict[str, float] = Field(default_factory=dict)
    round_summaries: list[RoundSummary] = Field(default_factory=list)


def get_iteration_summary(state: IterationState) -> dict[str, Any]:
    """The loop in figures, for display: the specification's dict (its keys, with the
    termination reason as its string value), extended with the rules the loop ran by.
    Without rounds it carries the specification's message, "No iterations performed",
    beside the same figures (which then say so in numbers)."""
    message = {} if state.rounds else {"message": "No iterations performed"}
    return message | {
        "rounds_completed": len(state.rounds),
        "max_rounds": state.max_rounds,
        "total_refinements": sum(len(r.models_that_changed) for r in state.rounds),
        "total_unchanged": sum(len(r.models_unchanged) for r in state.rounds),
        "terminated_reason": state.termination_reason.value if state.termination_reason else None,
        "tokens_used": state.total_tokens_used,
        "round_summaries": [
            {
                "round": r.round_number,
                "models_changed": len(r.models_that_changed),
                "models_unchanged": len(r.models_unchanged),
                "duration_seconds": (r.completed_at - r.started_at).total_seconds()
                if r.completed_at
                else None,
                "tokens_used": r.tokens_used,
            }
            for r in state.rounds
        ],
        "min_rounds": state.min_rounds,
        "token_budget": state.context_budget,
        "cost_usd": state.cost_usd,
        "max_cost_usd": state.max_cost_usd,
        "quality_threshold": state.quality_threshold,
        "final_scores": dict(state.latest_scores),
        "final_lowest_ratings": dict(state.lowest_ratings),
    }


def iteration_summary(state: IterationState) -> IterationSummary:
    """The record's typed summary: get_iteration_summary's figures, validated."""
    return IterationSummary.model_validate(get_iteration_summary(state))
