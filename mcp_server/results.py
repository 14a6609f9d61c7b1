"""What a tool returns: text content for the model to read (the final answer, then one
short line: the id, how it ended, tokens and cost) and, as structured content, the same
fields as data (DeliberationState). An error is one line with isError set."""

from __future__ import annotations

from mcp.types import CallToolResult, TextContent
from pydantic import BaseModel, Field

from app.views.record_view import RecordView, record_view
from council.agreement import Agreement
from council.models import DeliberationRecord
from council.progress import Progress
from council.report import DisagreementReport


class DeliberationState(BaseModel):
    """One deliberation as a tool reports it (the structured content of every tool)."""

    id: str = Field(description="the deliberation's id")
    status: str = Field(
        description="running; stuck (running, but its workflow task keeps failing: a stop "
        "ends it); completed, or stopped when it ended on a user's stop (both with an "
        "answer); failed, terminated, canceled or timed_out"
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
    chairman: str | None = Field(default=None, description="the member that wrote the answer")
    rounds_completed: int | None = Field(
        default=None, description="once completed: the refinement rounds run"
    )
    stop_reason: str | None = Field(default=None, description="the user's stop, with its reason")
    late: list[str] = Field(
        default_factory=list,
        description="the calls the straggler rule cut: whose, where, after how long, and what "
        "that did (a member whose answer was cut took no further part)",
    )
    failed: list[str] = Field(
        default_factory=list, description="the calls that failed for good: where, whose, why"
    )
    tool_calls: list[str] = Field(
        default_factory=list,
        description="the members' tool calls: where, whose, the tool and its arguments, and "
        "how it went; then the tools not offered, those withheld, and the members that "
        "answered without",
    )
    depth: str | None = Field(default=None, description="once completed: full or auto")
    gate: str | None = Field(
        default=None,
        description="depth auto: whether the first answers agreed (then the run went straight "
        "to the final answer), and the evidence",
    )
    not_needed: list[str] = Field(
        default_factory=list,
        description="calls cancelled because the run no longer needed them (depth auto: "
        "reviews once the ranking was settled)",
    )
    report: DisagreementReport | None = Field(
        default=None,
        description="once completed: where the council agreed and disagreed (consensus, "
        "contradictions with who holds which view and what became of each, points one member "
        "raised, what none addressed, each marked computed or written by the chairman; the "
        "value each member's first answer states; how many independent votes the reviewers "
        "are worth)",
    )


def _result(state: DeliberationState, *texts: str) -> CallToolResult:
    return CallToolResult(
        content=[TextContent(text=text) for text in texts],
        structured_content=state.model_dump(mode="json"),
    )


def _one_line(wid: str, status: str, summary: str) -> CallToolResult:
    """A deliberation in its summary line alone."""
    return _result(DeliberationState(id=wid, status=status, summary=summary), summary)


def problem(message: str) -> CallToolResult:
    """A tool error: the one-line message, nothing else."""
    return CallToolResult(content=[TextContent(text=message)], is_error=True)


def summary_line(view: RecordView) -> str:
    """ "ID · ended: REASON · N tokens in M calls · cost $X · agreement ..."."""
    agreement = [view.agreement.verdict, view.agreement.votes] if view.agreement else []
    gate = [f"depth {view.depth}: {view.gate.line}", view.gate.saved] if view.gate else []
    split = len(view.report.report.contradictions) if view.report else 0
    disputed = f"{split} contradiction(s) in the report" if split else None
    parts = [view.id, f"ended: {view.ended or '-'}", view.usage.short, view.answers_agree]
    parts += [*agreement, *gate, disputed, view.tool_failures_line]
    return " · ".join(part for part in parts if part)


def finished(record: DeliberationRecord) -> CallToolResult:
    """A completed deliberation (stopped, when it ended on a stop): its final answer, then
    the summary line."""
    return finished_view(record_view(record))


def finished_view(view: RecordView) -> CallToolResult:
    """A record's view as a tool returns it: the final answer, then the summary line, then
    the disagreement report's lines; the same as data."""
    answer = view.final.text if view.final else None
    state = DeliberationState(
        id=view.id,
        status=view.status,
        answer=answer,
        terminated_reason=view.ended,
        total_tokens=view.usage.total_tokens,
        calls=view.usage.calls,
        cost_usd=view.usage.cost_usd,
        summary=summary_line(view),
        agreement=view.agreement.agreement if view.agreement else None,
        chairman=view.final.chairman if view.final else None,
        rounds_completed=view.rounds_completed,
        stop_reason=view.stop_reason,
        late=view.late,
        failed=[f.line for f in view.failed],
        tool_calls=[f"{c.where} · {c.model} · {c.line}" for c in view.tool_calls]
        + [f"not offered: {line}" for line in view.tools_unavailable]
        + [f"withheld: {line}" for line in view.tools_withheld]
        + [f"{model} answered without tools" for model in view.without_tools],
        depth=view.depth,
        gate=view.gate.line if view.gate else None,
        not_needed=view.not_needed,
        report=view.report.report if view.report else None,
    )
    texts = [answer or "(no synthesis)", state.summary]
    if view.report and not view.report.empty:
        texts.append(
            "\n".join(
                f"{heading}: " + " | ".join(f"{i.text} [{i.source}]" for i in items)
                for heading, items in view.report.lines()
            )
        )
    return _result(state, *texts)


def started(wid: str) -> CallToolResult:
    summary = (
        f"deliberation {wid} started: get_deliberation reads its status, and its answer "
        "once it is done"
    )
    return _one_line(wid, "running", summary)


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
        return _one_line(wid, "running", summary)
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
    return _one_line(wid, status, f"{wid}: {status}: {message}")


def stop_requested(wid: str) -> CallToolResult:
    return _one_line(
        wid, "running", f"stop requested for {wid}; the council synthesizes what it has"
    )


def stuck(wid: str, line: str) -> CallToolResult:
    """A run whose workflow task keeps failing (`line`: the failure): a stop ends it."""
    return _one_line(wid, "stuck", f"{wid}: running, but {line} (the stop tool ends it)")


def terminated(wid: str, line: str) -> CallToolResult:
    """A stop that terminated a run whose workflow task kept failing (`line`: how)."""
    return _one_line(wid, "terminated", f"{wid}: {line}")
