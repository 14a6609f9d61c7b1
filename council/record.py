"""Record pieces derived from the rounds (the stage2_5 section), and the record fitted
under Temporal's payload limit."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from council.calls import Stage
from council.depth import Saved, saved
from council.iteration import IterationRound
from council.limits import RECORD_LIMIT_BYTES
from council.models import DeliberationRecord
from council.prompts import critiques_as_text
from council.stages import Stage1Result, Stage2_5Result

ELIDED = "[elided: {size:,} bytes, to keep the record within Temporal's payload limit]"
# Texts shorter than this are never elided: the marker would not save enough.
MIN_ELIDED_BYTES = 512
# When eliding texts is not enough (never, within the input limits): these lists go.
LAST_RESORT = ("rounds", "steering", "stage2", "errors")


def _last_critiques(model: str, label: str | None, rounds: Sequence[IterationRound]) -> str:
    """The peer feedback given to `model` in the last round it refined in, in the
    specification's plain pattern (the prompt frames each critique; the record need not)."""
    for round_data in reversed(rounds):
        refined = any(r.model == model and r.error is None for r in round_data.refinements)
        if refined and label:
            aimed = [c for c in round_data.critiques.get(label, []) if c.source_model != model]
            return critiques_as_text(aimed)
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


def _json_size(text: str) -> int:
    """Bytes a string takes in the record's JSON (escapes included)."""
    return len(json.dumps(text, ensure_ascii=False).encode())


def _texts(node: Any, path: str = "") -> Iterator[tuple[str, Any, Any, int]]:
    """(path, container, key, size) of every string in a JSON-like tree."""
    items = node.items() if isinstance(node, dict) else enumerate(node)
    for key, value in items:
        where = f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else key
        if isinstance(value, str):
            yield where, node, key, _json_size(value)
        elif isinstance(value, dict | list):
            yield from _texts(value, where)


def fit_record(record: DeliberationRecord, limit: int = RECORD_LIMIT_BYTES) -> DeliberationRecord:
    """The record as it can travel: unchanged when its JSON is within `limit` bytes;
    otherwise its largest texts are replaced by a marker, largest first, until it fits,
    and `elided` names each one's place (as a last resort, whole lists go: the rounds'
    details, steering, the reviews, the errors). The input limits keep a record far below
    the limit; this is what guarantees that a workflow never fails on its result's size."""
    size = len(record.model_dump_json().encode())
    if size <= limit:
        return record
    data = record.model_dump(mode="json")
    elided: list[str] = list(data.get("elided") or [])
    for where, container, key, text_size in sorted(_texts(data), key=lambda t: -t[3]):
        if size <= limit or text_size < MIN_ELIDED_BYTES:
            break
        marker = ELIDED.format(size=len(container[key].encode()))
        container[key] = marker
        size -= text_size - _json_size(marker)
        elided.append(where)
    for name in LAST_RESORT:
        if size <= limit:
            break
        size -= len(json.dumps(data[name], ensure_ascii=False).encode()) - 2
        data[name] = []
        elided.append(name)
    return DeliberationRecord.model_validate(data | {"elided": elided})


def saved_by_depth(record: DeliberationRecord, rounds: int) -> Saved:
    """What depth auto saved a run that went straight to the synthesis after stage 1
    (council.depth.saved), from its record's usage; `rounds`: the request's minimum."""
    usage = record.usage
    first = usage.by_stage.get(Stage.ANSWER.value)
    check = usage.by_stage.get(Stage.CHECK.value)
    return saved(
        answered=len(record.stage1),
        calls=usage.calls,
        tokens=usage.total_tokens,
        stage1_tokens=(first.prompt_tokens, first.completion_tokens) if first else (0, 0),
        check=(check.calls, check.total_tokens) if check else (0, 0),
        rounds=rounds,
    )
