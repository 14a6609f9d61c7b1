"""Structured replies: the JSON a reviewer or a refining member is asked for when its
provider supports structured output, and reading a review's JSON back.

The schemas are derived from pydantic models. A review's JSON holds, under each label
the reviewer was shown, the critique and the 1-5 rating of that answer, then the
ranking; it reads into the same ParsedReview that the text parser fills, so a review is
recorded the same way however it was read. Providers that enforce a schema (llama.cpp
turns it into a grammar) make even a small model's review readable.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from council.limits import MAX_CRITIQUE_CHARS

# How a reply was asked for: a JSON schema, a JSON object (with the schema where the
# provider takes one there, as llama.cpp's server does), or free text.
JSON_SCHEMA = "json_schema"
JSON_OBJECT = "json_object"
TEXT = "text"
READS = (JSON_SCHEMA, JSON_OBJECT, TEXT)

_FENCED = re.compile(r"^\s*```(?:json|JSON)?[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


class StructuredReply(BaseModel):
    """What the workflow asks of a call's reply: a named JSON schema. The worker decides,
    per provider, whether and how to send it (json_schema, json_object, or not at all)."""

    name: str
    json_schema: dict[str, Any]


class AnswerReview(BaseModel):
    """One reviewer's verdict on one answer: the critique first (reasons before the score),
    then the rating."""

    model_config = ConfigDict(extra="forbid")

    critique: str = Field(
        max_length=MAX_CRITIQUE_CHARS,
        description="what is wrong, missing or unclear in the answer, or what makes it strong",
    )
    rating: Literal[1, 2, 3, 4, 5] = Field(description="1 (poor) to 5 (excellent)")


class RejectedCritique(BaseModel):
    model_config = ConfigDict(extra="forbid")

    critique: str
    reason: str


class RefinementReply(BaseModel):
    """A refinement as one JSON object (the refinement prompt asks for these fields)."""

    model_config = ConfigDict(extra="forbid")

    critiques_accepted: list[str]
    critiques_rejected: list[RejectedCritique]
    refinement_reasoning: str
    reasoning_steps: list[str]
    final_answer: str
    confidence: float = Field(ge=0, le=1)
    changed_from_original: bool
    improvement_explanation: str


class Disagreement(BaseModel):
    """A point the council did not agree on, as the chairman's structured synthesis gives
    it: the point, the members who held the view the answer did not take, and why the
    answer sides as it does."""

    point: str = Field(description="what the members disagreed about")
    held_by: list[str] = Field(
        default_factory=list, description="the model ids of the members who held that view"
    )
    resolution: str = Field(default="", description="why the final answer sides as it does")


class SynthesisReply(BaseModel):
    """The chairman's synthesis as one JSON object, when the council did not agree."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(description="the final answer to the question, in Markdown")
    disagreements: list[Disagreement]


def _inline(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema with its $defs inlined and titles dropped (every provider reads that)."""
    defs = schema.get("$defs", {})

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            if "$ref" in node:
                return walk(defs[node["$ref"].rsplit("/", 1)[-1]])
            return {k: walk(v) for k, v in node.items() if k not in ("$defs", "title")}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    return walk(schema)


def review_schema(labels: Sequence[str]) -> StructuredReply:
    """The review a reviewer shown `labels` gives: each label's AnswerReview, and the
    ranking of those labels, best first."""
    answer = _inline(AnswerReview.model_json_schema())
    properties: dict[str, Any] = {label: answer for label in labels}
    properties["ranking"] = {
        "type": "array",
        "description": "the labels, best answer first",
        "items": {"type": "string", "enum": list(labels)},
    }
    return StructuredReply(
        name="review",
        json_schema={
            "type": "object",
            "properties": properties,
            "required": [*labels, "ranking"],
            "additionalProperties": False,
        },
    )


def refinement_schema() -> StructuredReply:
    return StructuredReply(
        name="refinement", json_schema=_inline(RefinementReply.model_json_schema())
    )


def synthesis_schema() -> StructuredReply:
    return StructuredReply(
        name="synthesis", json_schema=_inline(SynthesisReply.model_json_schema())
    )


def read_synthesis(text: str) -> tuple[str, list[Disagreement]]:
    """The final answer and the points of disagreement from a structured synthesis; a
    reply that is not that JSON is all answer (a provider that took no schema)."""
    data = json_object(text)
    answer = data.get("answer") if data else None
    if not isinstance(answer, str) or not answer.strip():
        return text, []
    points = []
    for item in data.get("disagreements") or []:
        if not isinstance(item, dict) or not isinstance(item.get("point"), str):
            continue
        held = item.get("held_by")
        points.append(
            Disagreement(
                point=item["point"],
                held_by=[str(m) for m in held] if isinstance(held, list) else [],
                resolution=str(item.get("resolution") or ""),
            )
        )
    return answer, points


def json_object(text: str) -> dict[str, Any] | None:
    """The reply as one JSON object (alone, or alone in a code fence); None otherwise."""
    fenced = _FENCED.match(text)
    body = fenced.group(1) if fenced else text.strip()
    if not body.startswith("{"):
        return None
    try:
        data = json.loads(body, strict=False)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _rating(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        rating = float(value)
    except (TypeError, ValueError):
        return None
    return rating if 1 <= rating <= 5 else None


def review_verdicts(
    text: str, shown: Sequence[str]
) -> tuple[dict[str, float], dict[str, str], list[str]] | None:
    """(ratings, critiques, ranking) from a review given as JSON, for the labels shown;
    None when the reply is not such JSON (then it is read as text). A label's entry may
    also be a bare rating. The ranking keeps shown labels once each, in order."""
    data = json_object(text)
    if data is None:
        return None
    ratings: dict[str, float] = {}
    critiques: dict[str, str] = {}
    for label in shown:
        entry = data.get(label)
        if isinstance(entry, dict):
            rating = _rating(entry.get("rating"))
            critique = entry.get("critique")
            if isinstance(critique, str):
                critiques[label] = critique
        else:
            rating = _rating(entry)
        if rating is not None:
            ratings[label] = rating
    if not ratings and not critiques:
        return None
    ranked = data.get("ranking")
    ranking = (
        list(dict.fromkeys(x for x in ranked if x in shown)) if isinstance(ranked, list) else []
    )
    return ratings, critiques, ranking
