"""Structured replies: the JSON a reviewer or a refining member is asked for when its
provider supports structured output, and reading a review's JSON back.

The schemas are derived from pydantic models. A review's JSON holds, under each label
the reviewer was shown, the critique and the 1-5 rating of that answer, then the
ranking; it reads into the same ParsedReview that the text parser fills, so a review is
recorded the same way however it was read. Providers that enforce a schema (llama.cpp
turns it into a grammar) make even a small model's review readable.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Literal

from jsonschema import exceptions as schema_errors
from jsonschema import validators
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    SerializerFunctionWrapHandler,
    model_serializer,
    model_validator,
)
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import specification_with

from council.limits import MAX_CRITIQUE_CHARS, one_line
from council.report import AskedContradiction, AskedResolution, AskedUnique, Written, read_report

# How a reply was asked for: a JSON schema, a JSON object (with the schema where the
# provider takes one there, as llama.cpp's server does), or free text.
JSON_SCHEMA = "json_schema"
JSON_OBJECT = "json_object"
TEXT = "text"

_FENCED = re.compile(r"^\s*```(?:json|JSON)?[ \t]*\n(.*?)\n?```\s*$", re.DOTALL)


Own = Literal["review", "refinement", "synthesis", "agreement_check"]


class StructuredReply(BaseModel):
    """What the workflow asks of a call's reply: a named JSON schema. The worker decides,
    per provider, whether and how to send it (json_schema, json_object, or not at all).

    The council's own schemas (`own`: a review, given the labels the reviewer was shown; a
    refinement; a synthesis) travel by name: serialized without `json_schema`, they are
    made again where they are read, so that a run's history does not carry the same
    schema in every call. A client's schema (an answer format) travels whole."""

    name: str
    json_schema: dict[str, Any] = Field(default_factory=dict)
    own: Own | None = None
    labels: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _made_again(self) -> StructuredReply:
        if self.own is not None and not self.json_schema:
            self.json_schema = _own_schema(self.own, self.labels)
        return self

    @model_serializer(mode="wrap")
    def _by_name(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        data: dict[str, Any] = handler(self)
        if self.own is None:
            data.pop("own", None)
            data.pop("labels", None)
        else:
            data.pop("json_schema", None)
        return data


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
    """A point the council did not agree on, as a structured synthesis of build 0.4 gave
    it (read from older records; a newer one gives council.report's contradictions)."""

    point: str = Field(description="what the members disagreed about")
    held_by: list[str] = Field(
        default_factory=list, description="the model ids of the members who held that view"
    )
    resolution: str = Field(default="", description="why the final answer sides as it does")


class SynthesisReply(BaseModel):
    """The chairman's synthesis as one JSON object: the answer and the disagreement report
    (council.report)."""

    model_config = ConfigDict(extra="forbid")

    answer: str = Field(description="the final answer to the question, in Markdown")
    resolutions: list[AskedResolution] = Field(
        description="for each numbered split the prompt lists, why the final answer sides as "
        "it does"
    )
    consensus: list[str] = Field(description="points every member's answer holds")
    contradictions: list[AskedContradiction] = Field(
        description="other points the members contradict each other on"
    )
    unique: list[AskedUnique] = Field(description="points only one member raised")
    unaddressed: list[str] = Field(
        description="what the question asks that no member's answer addressed"
    )


class AgreementCheckReply(BaseModel):
    """The agreement check's verdict on the first answers (council.depth)."""

    model_config = ConfigDict(extra="forbid")

    agree: bool = Field(description="whether the answers agree on the answer to the question")
    differences: list[str] = Field(
        description="each point on which the answers differ in substance (empty if they agree)"
    )


_OWN_REPLIES: dict[str, type[BaseModel]] = {
    "refinement": RefinementReply,
    "synthesis": SynthesisReply,
    "agreement_check": AgreementCheckReply,
}


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

    inlined: dict[str, Any] = walk(schema)
    return inlined


@functools.cache
def _schema_text(model: type[BaseModel]) -> str:
    """A reply model's schema, inlined, as JSON: made once (pydantic's schema generation
    is costly), read afresh for each use so that no caller shares a dict."""
    return json.dumps(_inline(model.model_json_schema()))


def _schema_of(model: type[BaseModel]) -> dict[str, Any]:
    schema: dict[str, Any] = json.loads(_schema_text(model))
    return schema


def _own_schema(own: Own, labels: Sequence[str]) -> dict[str, Any]:
    if own == "review":
        return _review_schema(labels)
    return _schema_of(_OWN_REPLIES[own])


def review_schema(labels: Sequence[str]) -> StructuredReply:
    """The review a reviewer shown `labels` gives: each label's AnswerReview, and the
    ranking of those labels, best first."""
    return StructuredReply(name="review", own="review", labels=list(labels))


def _review_schema(labels: Sequence[str]) -> dict[str, Any]:
    answer = _schema_of(AnswerReview)
    properties: dict[str, Any] = {label: answer for label in labels}
    properties["ranking"] = {
        "type": "array",
        "description": "the labels, best answer first",
        "items": {"type": "string", "enum": list(labels)},
    }
    return {
        "type": "object",
        "properties": properties,
        "required": [*labels, "ranking"],
        "additionalProperties": False,
    }


def refinement_schema() -> StructuredReply:
    return StructuredReply(name="refinement", own="refinement")


def synthesis_schema() -> StructuredReply:
    return StructuredReply(name="synthesis", own="synthesis")


def agreement_check_schema() -> StructuredReply:
    return StructuredReply(name="agreement_check", own="agreement_check")


def read_synthesis(text: str, members: Sequence[str]) -> tuple[str, Written | None]:
    """The final answer and what the chairman wrote of the council (council.report) from a
    structured synthesis; a reply that is not that JSON is all answer, with nothing written
    besides (a provider that took no schema), and one cut before its end (a token limit) is
    its answer as far as it was written."""
    data = json_object(text)
    answer = data.get("answer") if data else None
    if data is None and _ANSWER_START.match(text):
        # The JSON was cut (a token limit): the answer as far as it was written.
        return partial_answer(text), None
    if data is None or not isinstance(answer, str) or not answer.strip():
        return text, None
    return answer, read_report(data, members)


_ANSWER_START = re.compile(r'^\s*(?:```(?:json|JSON)?\s*)?\{\s*"answer"\s*:\s*"')
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def partial_answer(text: str) -> str:
    """The answer of a structured synthesis as far as it has arrived (its JSON string read
    up to the last whole character), for showing while it streams; "" until the answer's
    string begins (a reply whose first field is not the answer shows nothing till the end)."""
    start = _ANSWER_START.match(text)
    if start is None:
        return "" if text.lstrip().startswith(("{", "```")) else text
    out: list[str] = []
    i, end = start.end(), len(text)
    while i < end:
        char = text[i]
        if char == '"':
            break
        if char != "\\":
            out.append(char)
            i += 1
            continue
        if i + 1 >= end:
            break  # an escape cut off: the rest comes with the next characters
        code = text[i + 1]
        if code == "u":
            unit = _unit(text, i)
            if unit is None:
                break
            if 0xD800 <= unit < 0xDC00:  # a surrogate pair: the character needs both halves
                low = _unit(text, i + 6) if text[i + 6 : i + 8] == "\\u" else None
                if low is None or not 0xDC00 <= low < 0xE000:
                    break
                out.append(chr(0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)))
                i += 12
                continue
            out.append(chr(unit))
            i += 6
            continue
        out.append(_ESCAPES.get(code, code))
        i += 2
    return "".join(out)


def _unit(text: str, at: int) -> int | None:
    """The UTF-16 unit of the \\uXXXX escape at `at`; None when it has not all arrived."""
    digits = text[at + 2 : at + 6]
    if len(digits) < 4:
        return None
    try:
        return int(digits, 16)
    except ValueError:
        return None


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


# ---- a client's format for the final answer -------------------------------------------

# A client's schema is a Temporal payload and a prompt: bounded like any other input.
MAX_ANSWER_SCHEMA_BYTES = 32_000
MAX_ANSWER_SCHEMA_DEPTH = 32
DRAFT_KEY = "$schema"
_REFERENCE_KEYS = ("$ref", "$dynamicRef", "$recursiveRef")


def schema_problem(schema: dict[str, Any]) -> str | None:
    """Why `schema` cannot be a final answer's format (None: it can): larger or deeper than
    the bounds, naming a draft we do not know, not a valid JSON Schema, or with a reference
    that points outside it or at nothing in it (an answer is checked without fetching
    anything). The message starts with what is wrong; `$schema` problems name the key."""
    size = len(json.dumps(schema, ensure_ascii=False).encode("utf-8"))
    if size > MAX_ANSWER_SCHEMA_BYTES:
        return f"the schema is {size:,} bytes; at most {MAX_ANSWER_SCHEMA_BYTES:,} are taken"
    if _depth(schema) > MAX_ANSWER_SCHEMA_DEPTH:
        return f"the schema is too deep: at most {MAX_ANSWER_SCHEMA_DEPTH} levels"
    validator = _draft(schema)
    if validator is None:
        return (
            f"{DRAFT_KEY} names no JSON Schema draft this server knows: leave it out "
            "(2020-12), or name a draft's meta-schema such as "
            "https://json-schema.org/draft/2020-12/schema"
        )
    try:
        validator.check_schema(schema)
    except schema_errors.SchemaError as err:
        return f"not a valid JSON Schema: {_one_line(err.message)}"
    return _reference_problem(schema, validator)


def _depth(node: Any) -> int:
    """How many levels of objects and lists the value nests."""
    deepest, stack = 0, [(node, 1)]
    while stack:
        value, level = stack.pop()
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list):
            deepest = max(deepest, level)
            stack.extend((child, level + 1) for child in value)
    return deepest


def _draft(schema: dict[str, Any]) -> Any:
    """The validator class of the draft the schema names (2020-12 when it names none)."""
    if DRAFT_KEY not in schema:
        return validators.Draft202012Validator
    named = schema[DRAFT_KEY]
    if not isinstance(named, str):
        return None
    found = validators.validator_for(schema, default=validators.Draft202012Validator)
    known = str(found.META_SCHEMA["$schema"]).rstrip("#")
    return found if named.rstrip("#") == known else None


def _references(node: Any) -> Iterator[str]:
    stack = [node]
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                if key in _REFERENCE_KEYS and isinstance(child, str):
                    yield child
                else:
                    stack.append(child)
        elif isinstance(value, list):
            stack.extend(value)


def _reference_problem(schema: dict[str, Any], validator: Any) -> str | None:
    resource = specification_with(
        validator.META_SCHEMA["$schema"], default=validator.META_SCHEMA
    ).create_resource(schema)
    resolver = Registry().with_resource("", resource).resolver()
    for ref in _references(schema):
        if not ref.startswith("#"):
            return (
                f"the reference {ref[:80]!r} points outside the schema: use #/$defs/NAME and "
                "put the definition in the schema"
            )
        try:
            resolver.lookup(ref)
        except Unresolvable:
            return f"the reference {ref[:80]!r} points at nothing in the schema"
    return None


def conforming_json(text: str, fmt: StructuredReply) -> tuple[str, str | None]:
    """The reply as the client's JSON (fences and surrounding blanks removed) and why it
    does not follow `fmt` (None: it does)."""
    fenced = _FENCED.match(text)
    body = (fenced.group(1) if fenced else text).strip()
    try:
        data = json.loads(body)
    except (ValueError, RecursionError) as err:
        return body, f"the reply is not JSON ({_one_line(str(err))})"
    try:
        validator = validators.validator_for(fmt.json_schema)(fmt.json_schema)
        error = next(iter(sorted(validator.iter_errors(data), key=lambda e: list(e.path))), None)
    except Exception as err:  # a schema that passed schema_problem should never get here
        return body, f"the schema cannot be applied ({_one_line(str(err))})"
    if error is None:
        return body, None
    where = "/".join(str(part) for part in error.absolute_path) or "the top level"
    return body, f"at {where}: {_one_line(error.message)}"


def _one_line(text: str) -> str:
    return one_line(text, 300)
