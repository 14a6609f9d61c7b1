"""What the pages show, computed from a record or from progress: plain data for the
templates, which escape every string they print. No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from typing import Any

from council.calls import Stage
from council.iteration import CritiqueItem, IterationRound, RefinementResult
from council.models import DeliberationRecord, DeliberationRequest
from council.progress import EventKind, ProgressEvent
from council.reviews import read_review
from council.stages import Stage2Result
from council.validation import InvalidRequest, validate_request

# ---- the start form -----------------------------------------------------------------------

FORM_FIELDS = (
    "question",
    "council",
    "models",
    "chairman",
    "max_rounds",
    "min_rounds",
    "quality_threshold",
    "token_budget",
    "max_cost_usd",
    "context_tokens",
)


@dataclass
class StartForm:
    """The start form's values as typed, and a one-line error per field."""

    values: dict[str, str] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def request_from_form(
    form: Mapping[str, str], defaults: Mapping[str, Any]
) -> tuple[DeliberationRequest | None, StartForm]:
    """The request the form describes (its fields on top of `defaults`: the chosen
    council's options), or None and the form with its error next to the field it
    concerns (the same one-line message the CLI prints)."""
    values = {name: str(form.get(name, "")).strip() for name in FORM_FIELDS}
    data: dict[str, Any] = {**defaults, "question": values["question"]}
    models = [m.strip() for m in re.split(r"[,\n]", values["models"]) if m.strip()]
    if models:
        if data.get("chairman") not in models:
            data.pop("chairman", None)
        data["models"] = models
    for name in FORM_FIELDS[3:]:
        if values[name]:
            data[name] = values[name] if name == "chairman" else _number(values[name])
    try:
        return validate_request(data), StartForm(values)
    except InvalidRequest as error:
        message = str(error)
        name = re.split(r"[\s.:]", message, maxsplit=1)[0]
        return None, StartForm(values, {name if name in FORM_FIELDS else "question": message})


def _number(text: str) -> int | float | str:
    """A number as the CLI would parse it; anything else as typed (validation says why)."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


# ---- reviews ------------------------------------------------------------------------------


@dataclass
class Cell:
    rating: float | None
    critique: str


@dataclass
class Matrix:
    """Reviewer x answer: each rating, with the critique that came with it."""

    title: str
    answers: list[tuple[str, str]]  # (label, model), in label order
    rows: list[tuple[str, dict[str, Cell]]]  # (reviewer, label -> cell)
    orders: dict[str, list[str]]  # reviewer -> the order it was shown the answers in


def review_matrix(
    title: str, reviews: Sequence[Stage2Result], label_to_model: Mapping[str, str]
) -> Matrix:
    labels = dict(label_to_model)
    rows = []
    for review in reviews:
        _, parsed = read_review(review.model, review.ranking, labels)
        cells = {
            label: Cell(review.ratings.get(label), parsed.critiques.get(label, ""))
            for label, model in labels.items()
            if model != review.model
        }
        rows.append((review.model, cells))
    return Matrix(
        title=title,
        answers=sorted(labels.items()),
        rows=rows,
        orders={review.model: review.presented_order for review in reviews},
    )


def review_matrices(record: DeliberationRecord) -> list[Matrix]:
    """One matrix per review: the first, then the one after each refinement round."""
    matrices = [review_matrix("Review round 1", record.stage2, record.label_to_model)]
    for round_data in record.rounds:
        if round_data.reviews:
            n = round_data.round_number
            title = f"Review round {n + 1} (after refinement round {n})"
            matrices.append(review_matrix(title, round_data.reviews, record.label_to_model))
    return [m for m in matrices if m.rows]


# ---- refinements --------------------------------------------------------------------------

_TOKEN = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """(op, text) pieces from old to new, word by word: op is "same", "del" or "ins";
    white space goes with the words around it."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    pieces: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append(("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(("del", "".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(("ins", "".join(b[j1:j2])))
    return pieces


@dataclass
class Refined:
    result: RefinementResult
    label: str
    critiques: list[CritiqueItem]
    diff: list[tuple[str, str]]


def refinements(round_data: IterationRound, label_to_model: Mapping[str, str]) -> list[Refined]:
    """Each refinement of the round: the critiques the model received, what it did with
    them, and its answer's change word by word."""
    model_to_label = {model: label for label, model in label_to_model.items()}
    out = []
    for result in round_data.refinements:
        label = model_to_label.get(result.model, "")
        received = [
            c for c in round_data.critiques.get(label, []) if c.source_model != result.model
        ]
        out.append(
            Refined(
                result,
                label,
                received,
                word_diff(result.original_response, result.refined_response),
            )
        )
    return out


# ---- usage --------------------------------------------------------------------------------


def usage_rows(totals: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """(name, totals) sorted by name, for a table."""
    return sorted(totals.items())


def stage_title(stage: str) -> str:
    try:
        return Stage(stage).title
    except ValueError:
        return stage


# ---- a running deliberation ---------------------------------------------------------------


def model_statuses(events: Sequence[ProgressEvent], models: Sequence[str]) -> dict[str, str]:
    """Each model's state in the stage under way: waiting, writing, done, failed, cancelled
    (from the progress events; "writing" once its call started)."""
    status = dict.fromkeys(models, "waiting")
    for event in events:
        if event.kind == EventKind.STAGE_START:
            status = dict.fromkeys(status, "idle")
            for model in event.data.get("models", []):
                status[model] = "writing"
        elif event.model and event.kind in _MODEL_STATES:
            status[event.model] = _MODEL_STATES[event.kind]
    return status


_MODEL_STATES = {
    EventKind.MODEL_COMPLETE: "done",
    EventKind.MODEL_FAILED: "failed",
    EventKind.MODEL_CANCELLED: "cancelled",
}
