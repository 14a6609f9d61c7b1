"""The 'current details' the Temporal UI shows for a running deliberation (markdown)."""

from __future__ import annotations

from council.calls import Stage
from council.iteration import IterationState
from council.models import DeliberationRecord


def current_details(
    stage: Stage | None, state: IterationState, record: DeliberationRecord, finished: bool = False
) -> str:
    if finished:
        head = f"**Finished**: {state.termination_reason} after {len(state.rounds)} round(s)"
    else:
        where = stage.title if stage else "starting"
        head = f"**{where}** · round {state.current_round} of {state.max_rounds}"
    lines = [
        head,
        f"tokens {record.usage.total_tokens:,} of budget {state.context_budget:,}"
        f" · quality threshold {state.quality_threshold:g}/5",
        "",
        "| model | label | mean rating | average rank |",
        "| --- | --- | --- | --- |",
    ]
    by_model = {entry.model: entry for entry in record.aggregate_rankings}
    labels = {model: label for label, model in record.label_to_model.items()}
    for model in record.models:
        entry = by_model.get(model)
        rating = f"{entry.mean_rating:.2f}" if entry and entry.mean_rating is not None else "-"
        rank = f"{entry.average_rank:.2f}" if entry and entry.average_rank is not None else "-"
        lines.append(f"| {model} | {labels.get(model, 'dropped' if record.stage1 else '-')} | {rating} | {rank} |")
    if record.errors:
        lines += ["", f"{len(record.errors)} failed call(s); see the record's errors."]
    return "\n".join(lines)
