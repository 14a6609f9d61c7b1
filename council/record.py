"""Record pieces derived from the rounds (the stage2_5 section)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from council.iteration import IterationRound
from council.prompts import format_critiques_for_refinement
from council.stages import Stage1Result, Stage2_5Result


def _last_critiques(model: str, label: str | None, rounds: Sequence[IterationRound]) -> str:
    """The peer feedback shown to `model` in the last round it refined in."""
    for round_data in reversed(rounds):
        refined = any(r.model == model and r.error is None for r in round_data.refinements)
        if refined and label:
            aimed = [c for c in round_data.critiques.get(label, []) if c.source_model != model]
            return format_critiques_for_refinement(aimed)
    return ""


def stage2_5_results(
    stage1: Sequence[Stage1Result],
    rounds: Sequence[IterationRound],
    label_to_model: Mapping[str, str],
    final_answers: Mapping[str, str],
) -> list[Stage2_5Result] | None:
    """Each answering model's stage 1 answer, last critiques and final answer; None if no
    round ran."""
    if not any(r.refinements for r in rounds):
        return None
    model_to_label = {model: label for label, model in label_to_model.items()}
    return [
        Stage2_5Result(
            model=result.model,
            original_response=result.response,
            peer_critiques=_last_critiques(result.model, model_to_label.get(result.model), rounds),
            corrected_response=final_answers.get(result.model, result.response),
        )
        for result in stage1
        if result.model in model_to_label
    ]
