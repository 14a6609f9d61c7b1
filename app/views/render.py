"""How a deliberation looks in a terminal: progress lines and the record as Markdown."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from app.views.record_view import (
    ContextView,
    Matrix,
    RecordView,
    ReportView,
    RoundView,
    ToolCallView,
    UsageView,
    record_view,
)
from council.models import DeliberationRecord
from council.progress import EventKind, ProgressEvent


def _where(event: ProgressEvent) -> str:
    if event.stage is not None:
        return event.stage.place(event.round or 0)
    return f"round {event.round}" if event.round else ""


def event_line(event: ProgressEvent) -> str:
    """One line per progress event, for `watch` and `start --wait`."""
    where = _where(event)
    line = _LINES.get(event.kind)
    return line(event, where) if line else f"{event.kind.value} {where} {event.message}".strip()


def _model_complete(event: ProgressEvent, where: str) -> str:
    data = event.data
    extra = " (truncated at the size cap)" if data.get("truncated") else ""
    if data.get("finish_reason") == "length":
        extra += " (cut by the token limit)"
    return (
        f"  · {event.model} done ({where}): {data.get('tokens', 0)} tokens, "
        f"{data.get('latency_ms', 0) / 1000:.1f} s{extra}"
    )


def _round_complete(event: ProgressEvent, where: str) -> str:
    data = event.data
    head = (
        f"✓ {event.message}"
        if not event.round
        else f"✓ round {event.round} complete: {event.message}"
    )
    scores = data.get("scores", {})
    lowest = data.get("lowest", {})
    if scores:
        head += " · mean ratings " + ", ".join(f"{m} {s:.1f}" for m, s in scores.items())
    if lowest:
        low = min(lowest.values())
        threshold = data.get("threshold")
        gate = "" if threshold is None else (" (below the threshold)" if low < threshold else "")
        head += f" · lowest rating {low:g}{gate}"
    if data.get("agreement"):
        head += f"\n  ≈ {data['agreement']}"
    return head


def _refined(event: ProgressEvent, where: str) -> str:
    data = event.data
    if data.get("failed"):
        return f"  ↳ {event.model} kept its previous answer: {event.message}"
    verdict = "changed its answer" if data.get("changed") else "kept its answer"
    parts = [f"  ↳ {event.model} {verdict}: {event.message}"]
    if data.get("accepted") or data.get("rejected"):
        parts.append(
            f"accepted {data.get('accepted', 0)}, rejected {data.get('rejected', 0)} critique(s)"
        )
    else:
        parts.append(f"{data.get('critiques', 0)} critique(s)")
    if data.get("confidence") is not None:
        parts.append(f"confidence {data['confidence']:.2f}")
    return " · ".join(parts)


Line = Callable[[ProgressEvent, str], str]
_LINES: dict[EventKind, Line] = {
    EventKind.STAGE_START: lambda e, where: f"▶ {where}: {len(e.data.get('models', []))} call(s)",
    EventKind.STAGE_COMPLETE: lambda e, where: f"■ {where}: {e.message or 'done'}",
    EventKind.ROUND_START: lambda e, _: f"↻ {e.message}",
    EventKind.ROUND_COMPLETE: _round_complete,
    EventKind.MODEL_COMPLETE: _model_complete,
    EventKind.MODEL_REFINED: _refined,
    EventKind.MODEL_FAILED: lambda e, where: f"  ✗ {e.model} failed ({where}): {e.message}",
    EventKind.MODEL_CANCELLED: lambda e, where: (
        f"  – {e.model} cancelled ({where}): {e.message}"
        if e.data.get("not_needed")
        else f"  ✗ {e.model} cancelled ({where}) by the stop"
    ),
    EventKind.WAITING: lambda e, where: f"  … {where}: {e.message}",
    EventKind.MODEL_LATE: lambda e, _: f"  ⌛ {e.message}",
    EventKind.TOOL_CALL: lambda e, where: f"  ⚙ {e.model} ({where}): {e.message}",
    # A notice of good news (depth auto's agreement, what it saved) is no warning.
    EventKind.NOTICE: lambda e, _: f"  {'✔' if e.data.get('good') else '!'} {e.message}",
    EventKind.STOP_REQUESTED: lambda e, _: f"⏹ stop requested: {e.message}",
    EventKind.FALLBACK: lambda e, _: f"  ↪ {e.message}",
    EventKind.TERMINATED: lambda e, _: f"⏹ refinement ended: {e.message}",
    EventKind.FINISHED: lambda e, _: f"✔ finished: {e.message}",
}


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def _cut(note: str | None) -> str:
    return f" ({note})" if note else ""


def _ratings(ratings: Mapping[str, float]) -> str:
    return ", ".join(f"{label} {rating:g}" for label, rating in ratings.items())


def _report_markdown(report: ReportView | None) -> list[str]:
    """The disagreement report as a section (model text as written)."""
    if report is None or report.empty:
        return []
    out = ["## Where the council agreed and disagreed", ""]
    if report.source_note:
        out += [f"_{report.source_note}._", ""]
    for heading, items in report.lines():
        out += [f"**{heading}:**", "", *(f"- {i.text} _({i.source})_" for i in items), ""]
    return out


def record_markdown(record: DeliberationRecord) -> str:
    """The whole record, final answer first."""
    return view_markdown(record_view(record))


def view_markdown(view: RecordView) -> str:
    """A record's view as Markdown (model text as written, as a transcript keeps it)."""
    out = [
        f"# Council deliberation `{view.id}`",
        "",
        f"**Question:** {view.question}",
        "",
        f"**Status:** {view.status} · ended: {view.ended or '-'} after "
        f"{view.rounds_completed} refinement round(s) of {view.min_rounds} to "
        f"{view.max_rounds} · quality threshold {view.quality_threshold}/5"
        + (f" · stop: {view.stop_reason}" if view.stop_reason else ""),
        "",
        f"**Usage:** {view.usage.line}",
        "",
    ]
    if view.answers_agree:
        out += [f"**Answers:** {view.answers_agree}", ""]
    if view.agreement is not None:
        trend = view.agreement.trend
        raised = f" (review by review: {' → '.join(trend)})" if trend else ""
        votes = f" · {view.agreement.votes}" if view.agreement.votes else ""
        out += [f"**Verdict:** {view.agreement.verdict}{votes}{raised}", ""]
    if view.gate or view.depth != "full":
        gate = f" · {view.gate.line}" if view.gate else ""
        saved = f" · {view.gate.saved}" if view.gate and view.gate.saved else ""
        out += [f"**Deliberation:** depth {view.depth}{gate}{saved}", ""]
    if view.not_needed:
        out += [f"**Cancelled as not needed:** {'; '.join(view.not_needed)}", ""]
    if view.context:
        out += [_context_line(view.context), ""]
    if view.tools:
        made = sum(not call.refused for call in view.tool_calls)
        out += [f"**Tools:** {', '.join(view.tools)} · {made} call(s) made", ""]
    if view.tools_unavailable:
        out += [
            f"**Tools not offered** (their server could not say what it offers): "
            f"{'; '.join(view.tools_unavailable)}",
            "",
        ]
    if view.tools_withheld:
        out += [f"**Tools withheld** (not offered): {'; '.join(view.tools_withheld)}", ""]
    if view.without_tools:
        out += [
            f"**Answered without tools** (their provider takes none): "
            f"{', '.join(view.without_tools)}",
            "",
        ]
    if view.attachments:
        out += ["## Attachments", ""]
        for attachment in view.attachments:
            out.append(
                f"- {attachment.described} · sha256 {attachment.sha256}"
                + (f" · cut to fit a context window: {attachment.cuts}" if attachment.cuts else "")
            )
        out.append("")
    for action in view.steering:
        if action.max_rounds is not None:
            what = f"set the maximum rounds to {action.max_rounds}"
        else:
            what = f"added a critique of {action.model} ({action.handed}): {action.text}"
        out += [f"**Steering** ({action.when}): the user {what}", ""]
    if view.final:
        out += [
            f"## Final answer (chairman: {view.final.chairman}){_cut(view.final.cut)}",
            "",
            view.final.text,
            "",
            *_tools_markdown(view.final.tool_calls),
        ]
    else:
        out += ["## Final answer", "", "_Not written yet._" if view.running else "_None._", ""]
    out += _report_markdown(view.report)

    out += [
        "## Council",
        "",
        "| model | label | mean peer rating | lowest rating | average rank | rated by |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for member in view.members:
        out.append(
            f"| {member.model} | {member.label or 'dropped'} | {_fmt(member.mean_rating)} | "
            f"{_fmt(member.lowest_rating, '{:g}')} | {_fmt(member.average_rank)} | "
            f"{member.rated_by} |"
        )
    out.append("")

    out += ["## Stage 1: answers", ""]
    for answer in view.answers:
        out += [
            f"### {answer.model} ({answer.label or '-'}){_cut(answer.cut)}",
            "",
            answer.text,
            "",
            *_tools_markdown(answer.tool_calls),
        ]
    for cut in view.cut_answers:
        out += [
            f"### {cut.model} ({cut.note})",
            "",
            "_No answer: the straggler rule cut its call._",
            "",
        ]

    out += ["## Stage 2: reviews", ""]
    for review in view.first_review.reviews if view.first_review else []:
        inferred = " (inferred from the ranking)" if review.ratings_inferred else ""
        shown = (
            f" · shown in the order {', '.join(review.presented_order)}"
            if review.presented_order
            else ""
        )
        out += [
            f"### Review by {review.model}{_cut(review.cut)}",
            "",
            f"Ranking: {' > '.join(review.ranking) or '-'} · "
            f"ratings: {_ratings(review.ratings) or '-'}{inferred}{shown} · "
            f"read as {review.read_as}",
            "",
            review.text,
            "",
            *_tools_markdown(review.tool_calls),
        ]
    out += _late_reviewers(view.first_review)

    for round_view in view.rounds:
        out += _round_markdown(round_view)

    out += _usage_markdown(view.usage)
    if view.late:
        out += ["## Late calls (cut by the straggler rule)", ""]
        out += [f"- {late}" for late in view.late]
        out.append("")
    if view.tool_calls:
        out += ["## Tool calls", ""]
        out += [f"- {c.where} · {c.model} · {c.line}" for c in view.tool_calls]
        out.append("")
    if not view.nothing_failed:
        out += ["## Failed calls", ""]
        out += [f"- {f.line}" for f in view.failed]
        if view.tool_failures_line:
            out.append(f"- {view.tool_failures_line} (listed under Tool calls)")
        out.append("")
    return "\n".join(out)


def _tools_markdown(calls: list[ToolCallView]) -> list[str]:
    """The tool calls under a reply: one item each, with the start of its result."""
    if not calls:
        return []
    out = ["Tool calls:", ""]
    for call in calls:
        out.append(f"- {call.line}")
        if call.excerpt:
            out.append(f"  > {' '.join(call.excerpt.split())}")
    return [*out, ""]


def _usage_markdown(usage: UsageView) -> list[str]:
    out = ["## Usage", ""]
    for title, rows in usage.tables:
        out += [
            f"| {title.lower()} | calls | prompt | completion | total | cost |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        for row in rows:
            name = row.name + (f" ({row.note})" if row.note else "")
            t = row.totals
            if t is None:
                out.append(f"| {name} | 0 | - | - | - | - |")
                continue
            cost = "not reported" if t.cost_usd is None else f"${t.cost_usd:.4f}"
            out.append(
                f"| {name} | {t.calls} | {t.prompt_tokens:,} | {t.completion_tokens:,} | "
                f"{t.total_tokens:,} | {cost} |"
            )
        out.append("")
    return out


def _context_line(context: ContextView) -> str:
    dropped = f"; left out: {', '.join(context.dropped)}" if context.dropped else ""
    dropped += f" and {context.unnamed} older turn(s)" if context.unnamed else ""
    cut = "; the last turn cut to fit" if context.cut else ""
    origin = (
        f"**Follow-up of** `{context.follow_up_of}` in thread `{context.thread_id}`"
        if context.follow_up_of
        else "**A conversation the client brought**"
    )
    return (
        f"{origin}: {context.turns} earlier turn(s) in the prompts ({context.tokens} of "
        f"{context.max_tokens} tokens){dropped}{cut}"
    )


def _late_reviewers(review: Matrix | None) -> list[str]:
    if review is None or not review.late:
        return []
    return [*(f"- {model}: no review, {note}" for model, note in review.late), ""]


def _round_markdown(round_view: RoundView) -> list[str]:
    head = (
        f"{len(round_view.changed)} changed, {len(round_view.unchanged)} unchanged"
        if round_view.complete
        else "under way"
    )
    out = [f"## Round {round_view.number}: {head}", ""]
    for refinement in round_view.refinements:
        confidence = (
            f" · confidence {refinement.confidence:.2f}"
            if refinement.confidence is not None
            else ""
        )
        out += [
            f"### {refinement.model}: {refinement.verdict}{confidence}{_cut(refinement.cut)}",
            "",
            f"Critiques addressed: {refinement.addressed}"
            + (f" · accepted {len(refinement.accepted)}" if refinement.accepted else "")
            + (f" · rejected {len(refinement.rejected)}" if refinement.rejected else ""),
            "",
        ]
        if refinement.reasoning_steps:
            out += [f"{i}. {step}" for i, step in enumerate(refinement.reasoning_steps, start=1)]
            out.append("")
        out += [refinement.text, "", *_tools_markdown(refinement.tool_calls)]
    review = round_view.review
    if review is not None and review.reviews:
        out += [
            "Ratings after the round: "
            + "; ".join(f"{r.model}: {_ratings(r.ratings)}" for r in review.reviews),
            "",
        ]
        for r in review.reviews:
            if r.tool_calls:
                out += [f"Review by {r.model}:", "", *_tools_markdown(r.tool_calls)]
    return out + _late_reviewers(review)
