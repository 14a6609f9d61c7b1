"""Progress events a running deliberation reports: stage and round starts and ends, each
model's completion and refinement, failures, the stop and the termination."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, Field

from council.calls import Stage
from council.iteration import TerminationReason


class EventKind(StrEnum):
    STAGE_START = "stage_start"
    STAGE_COMPLETE = "stage_complete"
    ROUND_START = "round_start"
    ROUND_COMPLETE = "round_complete"
    MODEL_COMPLETE = "model_complete"
    MODEL_FAILED = "model_failed"
    MODEL_CANCELLED = "model_cancelled"
    MODEL_REFINED = "model_refined"
    # The straggler rule: a stage waits for its late members (until when), then cuts them.
    WAITING = "waiting"
    MODEL_LATE = "model_late"
    # A member's tool call ran (council.tools): which tool, how it went.
    TOOL_CALL = "tool_call"
    NOTICE = "notice"
    STOP_REQUESTED = "stop_requested"
    FALLBACK = "fallback"
    TERMINATED = "terminated"
    FINISHED = "finished"


class ProgressEvent(BaseModel):
    seq: int
    at: datetime
    kind: EventKind
    stage: Stage | None = None
    round: int | None = None
    model: str | None = None
    message: str = ""
    data: dict[str, Any] = Field(default_factory=dict)


class Progress(BaseModel):
    """What a progress query returns: the events after a sequence number, and where the run is."""

    events: list[ProgressEvent] = Field(default_factory=list)
    next_seq: int = 0
    stage: Stage | None = None
    round: int = 0
    max_rounds: int = 0
    min_rounds: int = 0
    finished: bool = False
    terminated_reason: str | None = None
    scores: dict[str, float] = Field(default_factory=dict)
    lowest_ratings: dict[str, float] = Field(default_factory=dict)
    tokens_used: int = 0
    token_budget: int = 0
    cost_usd: float | None = None
    max_cost_usd: float | None = None


def shown_status(status: str, reason: str | None, stop_requested: bool = False) -> str:
    """The state a page shows: Temporal's status, except that a run asked to stop is
    "stopping" until it ends, and a run that ended on the user's stop is "stopped"."""
    if status == "running":
        return "stopping" if stop_requested else "running"
    if status == "completed" and reason == TerminationReason.USER_STOP:
        return "stopped"
    return status
