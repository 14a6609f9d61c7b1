"""What a tool returns: text content for the model to read (the final answer, then one
short line: the id, how it ended, tokens and cost) and, as structured content, the same
fields as data (DeliberationState). An error is one line with isError set."""

from __future__ import annotations

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from council.agreement import Agreement, verdict
from council.models import DeliberationRecord
from council.progress import Progress, shown_status


class DeliberationState(BaseModel):
    """One deliberation as a tool reports it (the structured content of every tool)."""

    id: str = Field(description="the deliberation's id")
    status: str = Field(
        description="running; completed, or stopped when it ended on a user's stop (both with "
        "an answer); failed, terminated, canceled or timed_out"
    )
    answer: str | None = Field(default=None, description="the final answer, once completed")
    terminated_reason: str | None = Field(
        default=None, description="why the refinement loop ended, once it has"
    )
    stage: str | None = Field(default=None, description="while running: the stage under way")
    round: int | None = Field(default=None, description="while running: the refinement round")
    max_rounds: int | None = Field(default=None, description="while running: the most rounds")
    total_tokens: int | None = Field(default=None, description="tokens spent so far")
    calls: int | None = Field(default=None, description="model calls made, once completed")
    cost_usd: float | None = Field(
        default=None, description="the cost the providers reported (none: not reported)"
    )
    summary: str = Field(description="the one-line summary the text content ends with")
    agreement: Agreement | None = Field(
        default=None,
        description="once completed: how far the final review agreed (level, alpha, Kendall's "
        "W, each answer's ratings, the dissents with their critiques)",
    )


def _result(state: DeliberationState, *texts: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=text) for text in texts],
        structured_content=state.model_dump(mode="json"),
    )


def problem(message: str) -> CallToolResult:
    """A tool error: the one-line message, nothing else."""
    return CallToolResult(content=[TextContent(text=message)], is_error=True)


def summary_line(record: DeliberationRecord) -> str:
    """ "ID · ended: REASON · N tokens in M calls · cost $X"."""
    usage = record.usage
    return (
        f"{record.id} · ended: {record.iteration.terminated_reason or '-'} · "
        f"{usage.total_tokens:,} tokens in {usage.calls} calls · {usage.cost_line()}"
        + (f" · {verdict(record.agreement)}" if record.agreement is not None else "")
    )


def finished(record: DeliberationRecord) -> CallToolResult:
    """A completed deliberation (stopped, when it ended on a stop): its final answer, then
    the summary line."""
    answer = record.stage3.response if record.stage3 else None
    state = DeliberationState(
        id=record.id,
        status=shown_status("completed", record.iteration.terminated_reason),
        answer=answer,
        terminated_reason=record.iteration.terminated_reason,
        total_tokens=record.usage.total_tokens,
        calls=record.usage.calls,
        cost_usd=record.usage.cost_usd,
        summary=summary_line(record),
        agreement=record.agreement,
    )
    return _result(state, answer or "(no synthesis)", state.summary)


def started(wid: str) -> CallToolResult:
    summary = (
        f"deliberation {wid} started: get_deliberation reads its status, and its answer "
        "once it is done"
    )
    return _result(DeliberationState(id=wid, status="running", summary=summary), summary)


def running_line(wid: str, progress: Progress | None) -> str:
    """ "ID: running · STAGE · round N of at most M · T tokens so far" (None: no worker
    answered the query)."""
    if progress is None:
        return f"{wid}: running · no worker answers yet (is one running on its task queue?)"
    stage = progress.stage.heading if progress.stage else None
    where = f" · {stage}" if stage else ""
    rounds = f" · round {progress.round} of at most {progress.max_rounds}" if progress.round else ""
    return f"{wid}: running{where}{rounds} · {progress.tokens_used:,} tokens so far"


def running(wid: str, progress: Progress | None) -> CallToolResult:
    """A running deliberation: where it is (None: no worker answered the query)."""
    summary = running_line(wid, progress)
    if progress is None:
        return _result(DeliberationState(id=wid, status="running", summary=summary), summary)
    state = DeliberationState(
        id=wid,
        status="running",
        stage=progress.stage.heading if progress.stage else None,
        round=progress.round,
        max_rounds=progress.max_rounds,
        terminated_reason=progress.terminated_reason,
        total_tokens=progress.tokens_used,
        cost_usd=progress.cost_usd,
        summary=summary,
    )
    return _result(state, summary)


def closed(wid: str, status: str, message: str) -> CallToolResult:
    """A deliberation that ended without an answer (failed, terminated, ...): why."""
    summary = f"{wid}: {status}: {message}"
    return _result(DeliberationState(id=wid, status=status, summary=summary), summary)


def stop_requested(wid: str) -> CallToolResult:
    summary = f"stop requested for {wid}; the council synthesizes what it has"
    return _result(DeliberationState(id=wid, status="running", summary=summary), summary)
