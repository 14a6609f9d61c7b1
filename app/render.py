"""How a deliberation looks in a terminal: progress lines and the record as Markdown."""

from __future__ import annotations

from collections.abc import Callable

from council.agreement import verdict
from council.calls import Stage
from council.labels import labels_shown_to
from council.models import DeliberationRecord
from council.progress import EventKind, ProgressEvent
from council.reviews import readable_review
from council.stages import Ending


def _where(event: ProgressEvent) -> str:
    if event.stage is not None:
        return event.stage.place(event.round or 0)
    return f"round {event.round}" if event.round else ""


def event_line(event: ProgressEvent) -> str:
    """One line per progress event, for `watch` and `start --wait`."""
    where = _where(event)
    line = _LINES.get(event.kind)
    return line(event, where) if line else f"{event.kind.value} {where} {event.message}".strip()


def _cut(result: Ending) -> str:
    """How a stored reply ended, when it was cut."""
    if result.cut_by_token_limit:
        return " (cut by the token limit)"
    return " (cut at the size cap)" if result.truncated else ""


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
    EventKind.MODEL_CANCELLED: lambda e, where: f"  ✗ {e.model} cancelled ({where}) by the stop",
    EventKind.WAITING: lambda e, where: f"  … {where}: {e.message}",
    EventKind.MODEL_LATE: lambda e, _: f"  ⌛ {e.message}",
    EventKind.NOTICE: lambda e, _: f"  ! {e.message}",
    EventKind.STOP_REQUESTED: lambda e, _: f"⏹ stop requested: {e.message}",
    EventKind.FALLBACK: lambda e, _: f"  ↪ {e.message}",
    EventKind.TERMINATED: lambda e, _: f"⏹ refinement ended: {e.message}",
    EventKind.FINISHED: lambda e, _: f"✔ finished: {e.message}",
}


def _fmt(value: float | None, pattern: str = "{:.2f}") -> str:
    return "-" if value is None else pattern.format(value)


def _usage_line(record: DeliberationRecord) -> str:
    usage = record.usage
    estimated = f" ({usage.estimated_calls} estimated)" if usage.estimated_calls else ""
    return (
        f"{usage.total_tokens:,} tokens ({usage.prompt_tokens:,} prompt, "
        f"{usage.completion_tokens:,} completion) in {usage.calls} calls{estimated}"
        f" · {usage.cost_line()}"
    )


def record_markdown(record: DeliberationRecord) -> str:
    """The whole record, final answer first."""
    reason = record.iteration.terminated_reason or "-"
    rounds = record.iteration.rounds_completed
    out = [
        f"# Council deliberation `{record.id}`",
        "",
        f"**Question:** {record.query}",
        "",
        f"**Status:** {record.status} · ended: {reason} after {rounds} refinement round(s)"
        + (f" · stop: {record.stop_reason}" if record.stop_reason else ""),
        "",
        f"**Usage:** {_usage_line(record)}",
        "",
    ]
    if record.agreement is not None:
        trend = record.agreement_trend
        raised = (
            f" (review by review: {' → '.join(level or '-' for level in trend.levels)})"
            if trend is not None and len(trend.levels) > 1
            else ""
        )
        out += [f"**Verdict:** {verdict(record.agreement)}{raised}", ""]
    if record.context:
        context = record.context
        unnamed = context.dropped_count - len(context.dropped)
        dropped = f"; left out: {', '.join(context.dropped)}" if context.dropped else ""
        dropped += f" and {unnamed} older turn(s)" if unnamed > 0 else ""
        cut = "; the last turn cut to fit" if context.cut else ""
        origin = (
            f"**Follow-up of** `{record.follow_up_of}` in thread `{record.thread_id}`"
            if record.follow_up_of
            else "**A conversation the client brought**"
        )
        out += [
            f"{origin}: {len(context.turns)} earlier turn(s) in the prompts ({context.tokens} of "
            f"{context.max_tokens} tokens){dropped}{cut}",
            "",
        ]
    if record.attachments:
        out += ["## Attachments", ""]
        for attachment in record.attachments:
            cut = attachment.cuts_line()
            out.append(
                f"- {attachment.described()} · sha256 {attachment.sha256}"
                + (f" · cut to fit a context window: {cut}" if cut else "")
            )
        out.append("")
    for action in record.steering:
        if action.kind == "max_rounds":
            what = f"set the maximum rounds to {action.max_rounds}"
        else:
            where = (
                f"handed over in round {action.delivered_in_round}"
                if action.delivered_in_round
                else "never handed over"
            )
            what = f"added a critique of {action.model} ({where}): {action.text}"
        out += [f"**Steering** (during round {action.during_round}): the user {what}", ""]
    if record.stage3:
        out += [
            f"## Final answer (chairman: {record.stage3.model}){_cut(record.stage3)}",
            "",
            record.stage3.response,
            "",
        ]
    else:
        out += [
            "## Final answer",
            "",
            "_Not written yet._" if record.status == "running" else "_None._",
            "",
        ]

    labels = {model: label for label, model in record.label_to_model.items()}
    out += [
        "## Council",
        "",
        "| model | label | mean peer rating | lowest rating | average rank | rated by |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for entry in record.aggregate_rankings:
        out.append(
            f"| {entry.model} | {entry.label} | {_fmt(entry.mean_rating)} | "
            f"{_fmt(entry.lowest_rating, '{:g}')} | {_fmt(entry.average_rank)} | "
            f"{entry.ratings_count} |"
        )
    for model in record.models:
        if model not in labels:
            out.append(f"| {model} | dropped | - | - | - | 0 |")
    out.append("")

    out += ["## Stage 1: answers", ""]
    for result in record.stage1:
        head = f"### {result.model} ({labels.get(result.model, '-')}){_cut(result)}"
        out += [head, "", result.response, ""]

    out += ["## Stage 2: reviews", ""]
    for review in record.stage2:
        ratings = ", ".join(f"{label} {rating:g}" for label, rating in review.ratings.items())
        inferred = " (inferred from the ranking)" if review.ratings_inferred else ""
        shown = (
            f" · shown in the order {', '.join(review.presented_order)}"
            if review.presented_order
            else ""
        )
        out += [
            f"### Review by {review.model}{_cut(review)}",
            "",
            f"Ranking: {' > '.join(review.parsed_ranking) or '-'} · "
            f"ratings: {ratings or '-'}{inferred}{shown} · read as {review.read_as}",
            "",
            readable_review(review.ranking, labels_shown_to(review.model, record.label_to_model)),
            "",
        ]

    for round_data in record.rounds:
        out += [
            f"## Round {round_data.round_number}: "
            ""
            f"{len(round_data.models_that_changed)} changed, "
            f"{len(round_data.models_unchanged)} unchanged",
            "",
        ]
        for refinement in round_data.refinements:
            if refinement.error:
                status = f"kept its answer ({refinement.error})"
            elif refinement.changes_made:
                status = refinement.change_summary or "changed"
            else:
                status = "no significant change"
            confidence = (
                f" · confidence {refinement.confidence:.2f}"
                if refinement.confidence is not None
                else ""
            )
            out += [
                f"### {refinement.model}: {status}{confidence}{_cut(refinement)}",
                "",
                f"Critiques addressed: {len(refinement.critiques_addressed)}"
                + (
                    f" · accepted {len(refinement.critiques_accepted)}"
                    if refinement.critiques_accepted
                    else ""
                )
                + (
                    f" · rejected {len(refinement.critiques_rejected)}"
                    if refinement.critiques_rejected
                    else ""
                ),
                "",
            ]
            if refinement.reasoning_steps:
                out += [
                    f"{i}. {step}" for i, step in enumerate(refinement.reasoning_steps, start=1)
                ]
                out.append("")
            out += [refinement.refined_response, ""]
        if round_data.reviews:
            out.append(
                "Ratings after the round: "
                + "; ".join(
                    f"{r.model}: " + ", ".join(f"{label} {v:g}" for label, v in r.ratings.items())
                    for r in round_data.reviews
                )
            )
            out.append("")

    if record.late:
        out += ["## Late calls (cut by the straggler rule)", ""]
        out += [f"- {late.describe()}" for late in record.late]
        out.append("")
    if record.errors:
        out += ["## Failed calls", ""]
        out += [f"- {Stage(e.stage).place(e.round)}: {e.describe()}" for e in record.errors]
        out.append("")
    return "\n".join(out)
