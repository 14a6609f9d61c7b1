"""The 'current details' the Temporal UI shows for a running deliberation (markdown)."""

from __future__ import annotations

from collections.abc import Mapping

from council.agreement import Agreement, verdict
from council.calls import Stage
from council.iteration import IterationState
from council.models import DeliberationRecord


def current_details(
    stage: Stage | None,
    state: IterationState,
    record: DeliberationRecord,
    agreement: Agreement | None = None,
    finished: bool = False,
    failed: Mapping[str, int] | None = None,
) -> str:
    """Where the run is, what it spent, each member's standing in the latest review and
    how far that review agreed (`agreement`), its cuts and failures; and what failed while
    only observing the run (`failed`: what -> how often), which the run went on without."""
    if finished:
        head = f"**Finished**: {state.termination_reason} after {len(state.rounds)} round(s)"
    else:
        where = stage.heading if stage else "starting"
        head = (
            f"**{where}** · round {state.current_round} of {state.max_rounds}"
            f" (at least {state.min_rounds})"
        )
    cost = f" · {record.usage.cost_line()}"
    if state.max_cost_usd is not None:
        cost += f" of budget ${state.max_cost_usd:g}"
    lines = [
        head,
        f"tokens {record.usage.total_tokens:,} of budget {state.context_budget:,}{cost}"
        f" · quality threshold {state.quality_threshold:g}/5",
        "",
        "| model | label | mean rating | lowest rating | average rank |",
        "| --- | --- | --- | --- | --- |",
    ]
    by_model = {entry.model: entry for entry in record.aggregate_rankings}
    labels = {model: label for label, model in record.label_to_model.items()}
    for model in record.models:
        entry = by_model.get(model)
        rating = f"{entry.mean_rating:.2f}" if entry and entry.mean_rating is not None else "-"
        lowest = f"{entry.lowest_rating:g}" if entry and entry.lowest_rating is not None else "-"
        rank = f"{entry.average_rank:.2f}" if entry and entry.average_rank is not None else "-"
        label = labels.get(model, "dropped" if record.stage1 else "-")
        lines.append(f"| {model} | {label} | {rating} | {lowest} | {rank} |")
    if agreement is not None:
        lines += ["", f"**Verdict:** {verdict(agreement)}"]
    if record.gate is not None:
        lines += ["", f"**Depth auto:** {record.gate.describe()}"]
    if record.saved is not None:
        lines += ["", record.saved.describe()]
    if record.not_needed:
        lines += ["", "Not needed: " + "; ".join(n.describe() for n in record.not_needed)]
    if record.late:
        lines += ["", "Cut as late (not errors): " + "; ".join(c.describe() for c in record.late)]
    if record.errors:
        lines += ["", f"{len(record.errors)} failed call(s); see the record's errors."]
    if failed:
        told = ", ".join(f"{what} ({count}x)" for what, count in sorted(failed.items()))
        lines += [
            "",
            f"Failed while only observing the run (it went on; the worker log says why): {told}",
        ]
    return "\n".join(lines)
