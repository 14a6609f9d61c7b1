"""The council's protocol as pure, deterministic Python: no Temporal, no I/O.

Safe to import inside the Temporal workflow sandbox. The public names below are stable.
"""

from council.aggregate import aggregate_rankings, mean_ratings
from council.calls import ChatMessage, ModelCall, ModelReply, Stage, TokenUsage
from council.changes import detect_significant_changes, estimate_tokens, summarize_changes
from council.critiques import extract_critiques_from_rankings
from council.iteration import (
    CritiqueItem,
    IterationConfig,
    IterationRound,
    IterationState,
    QualityGate,
    RefinementResult,
    RejectedCritique,
    TerminationReason,
    charge_tokens,
    complete_round,
    end_if_all_failed,
    get_iteration_summary,
    initialize_iteration_state,
    note_review,
    quality_threshold_met,
    should_continue_iteration,
    start_new_round,
    terminate_iteration,
)
from council.labels import assign_labels, labels_shown_to, presentation_orders
from council.models import (
    CallError,
    CallPolicy,
    Criterion,
    DeliberationRecord,
    DeliberationRequest,
    EvaluationCriteria,
    Usage,
    UsageTotals,
)
from council.progress import EventKind, Progress, ProgressEvent
from council.prompts import build_refinement_prompt, format_critiques_for_refinement
from council.refinement import (
    ParsedRefinement,
    RefinementTask,
    parse_refinement,
    plan_refinements,
    record_refinements,
    refinement_result,
)
from council.reviews import ParsedReview, parse_review, read_review
from council.stages import (
    AggregateRanking,
    Stage1Result,
    Stage2_5Result,
    Stage2Result,
    Stage3Result,
)
from council.validation import InvalidRequest, validate_request

__all__ = [
    "AggregateRanking",
    "CallError",
    "CallPolicy",
    "ChatMessage",
    "Criterion",
    "CritiqueItem",
    "DeliberationRecord",
    "DeliberationRequest",
    "EvaluationCriteria",
    "EventKind",
    "InvalidRequest",
    "IterationConfig",
    "IterationRound",
    "IterationState",
    "ModelCall",
    "ModelReply",
    "ParsedRefinement",
    "ParsedReview",
    "Progress",
    "ProgressEvent",
    "QualityGate",
    "RefinementResult",
    "RefinementTask",
    "RejectedCritique",
    "Stage",
    "Stage1Result",
    "Stage2Result",
    "Stage2_5Result",
    "Stage3Result",
    "TerminationReason",
    "TokenUsage",
    "Usage",
    "UsageTotals",
    "aggregate_rankings",
    "assign_labels",
    "build_refinement_prompt",
    "charge_tokens",
    "complete_round",
    "detect_significant_changes",
    "end_if_all_failed",
    "estimate_tokens",
    "extract_critiques_from_rankings",
    "format_critiques_for_refinement",
    "get_iteration_summary",
    "initialize_iteration_state",
    "labels_shown_to",
    "mean_ratings",
    "note_review",
    "parse_refinement",
    "parse_review",
    "plan_refinements",
    "presentation_orders",
    "quality_threshold_met",
    "read_review",
    "record_refinements",
    "refinement_result",
    "should_continue_iteration",
    "start_new_round",
    "summarize_changes",
    "terminate_iteration",
    "validate_request",
]
