"""A JSON value that a client's JSON Schema accepts, built from the schema: what a model
held to the schema (as a provider's grammar holds it) answers. The simulated reply fills
the first string; the other strings name their property.

Rules, in order: `const`; the first of `enum`; `$ref` inside the schema (#/...);
`allOf` merged; the first branch of `anyOf` / `oneOf`; then `type` (the first of a list
that is not null). An object has every property listed and each required one that is
not (as a string); one that lists none and allows others gets `answer`. An array has its
`prefixItems`, then items up to max(minItems, 1) within maxItems (minItems only, deeper
than NEST_DEPTH, which ends recursive schemas). A string keeps within minLength and
maxLength (cut after a whole word where it can), and a known `format` gets a fixed value
of it. A number keeps within its bounds (an exclusive one by 1, or 0.5) and rounds up to
its multipleOf. A `pattern` is not followed: a schema that needs one goes unmet, as it
can with a model.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

from simulator.wire import whole_words

NEST_DEPTH = 6
MAX_DEPTH = 24
FORMATS = {
    "date-time": "2024-06-01T12:00:00Z",
    "date": "2024-06-01",
    "time": "12:00:00Z",
    "email": "simulated@example.com",
    "uri": "https://example.com/simulated",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "ipv4": "192.0.2.1",
    "hostname": "example.com",
}


@dataclass
class _Filling:
    reply: str
    used: bool = False

    def text(self, name: str) -> str:
        if self.used:
            return f"(simulated) {name}"
        self.used = True
        return self.reply


def instance_json(schema: dict[str, Any], reply: str) -> str:
    """The JSON text of a value the schema accepts, its first string the reply."""
    return json.dumps(instance(schema, reply), ensure_ascii=False)


def instance(schema: dict[str, Any], reply: str) -> Any:
    return _build(schema, schema, _Filling(reply), "answer", 0)


def _resolve(root: dict[str, Any], ref: str) -> Any:
    node: Any = root
    for part in ref.removeprefix("#").split("/")[1:]:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node.get(part, {})
    return node


def _merged(root: dict[str, Any], parts: list[Any]) -> dict[str, Any]:
    """allOf's subschemas as one (their properties and requirements together)."""
    merged: dict[str, Any] = {}
    for part in parts:
        if isinstance(part, dict) and isinstance(part.get("$ref"), str):
            part = _resolve(root, part["$ref"])
        if not isinstance(part, dict):
            continue
        for key, value in part.items():
            if key == "properties" and isinstance(value, dict):
                merged["properties"] = {**merged.get("properties", {}), **value}
            elif key == "required" and isinstance(value, list):
                merged["required"] = [*merged.get("required", []), *value]
            else:
                merged.setdefault(key, value)
    return merged


def _build(root: dict[str, Any], schema: Any, fill: _Filling, name: str, depth: int) -> Any:
    if not isinstance(schema, dict) or depth > MAX_DEPTH:
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    if isinstance(schema.get("$ref"), str) and schema["$ref"].startswith("#"):
        rest = {k: v for k, v in schema.items() if k != "$ref"}
        target = _merged(root, [_resolve(root, schema["$ref"]), rest])
        return _build(root, target, fill, name, depth + 1)
    if isinstance(schema.get("allOf"), list):
        rest = {k: v for k, v in schema.items() if k != "allOf"}
        return _build(root, _merged(root, [*schema["allOf"], rest]), fill, name, depth + 1)
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            rest = {k: v for k, v in schema.items() if k != key}
            return _build(root, _merged(root, [schema[key][0], rest]), fill, name, depth + 1)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "string"
    if kind == "object":
        return _object(root, schema, fill, depth)
    if kind == "array":
        return _array(root, schema, fill, name, depth)
    if kind == "string":
        return _string(schema, fill, name)
    if kind in ("integer", "number"):
        return _number(schema, kind == "integer")
    if kind == "boolean":
        return True
    return None


def _object(root: dict[str, Any], schema: dict[str, Any], fill: _Filling, depth: int) -> Any:
    properties = schema.get("properties")
    properties = properties if isinstance(properties, dict) else {}
    required = [r for r in schema.get("required") or [] if isinstance(r, str)]
    value = {
        key: _build(root, sub, fill, key, depth + 1)
        for key, sub in properties.items()
        if key in required or depth < NEST_DEPTH
    }
    for key in required:
        value.setdefault(key, fill.text(key))
    if not value and schema.get("additionalProperties") is not False:
        value["answer"] = fill.text("answer")
    return value


def _array(
    root: dict[str, Any], schema: dict[str, Any], fill: _Filling, name: str, depth: int
) -> list[Any]:
    prefix = schema.get("prefixItems")
    value = [
        _build(root, sub, fill, name, depth + 1)
        for sub in (prefix if isinstance(prefix, list) else [])
    ]
    least = schema.get("minItems") if isinstance(schema.get("minItems"), int) else 0
    most = schema.get("maxItems") if isinstance(schema.get("maxItems"), int) else None
    count = least if depth >= NEST_DEPTH else max(least, 1)
    if most is not None:
        count = min(count, most)
    items = schema.get("items")
    if items is False:
        return value
    while len(value) < count:
        value.append(_build(root, items if isinstance(items, dict) else {}, fill, name, depth + 1))
    return value


def _string(schema: dict[str, Any], fill: _Filling, name: str) -> str:
    known = FORMATS.get(schema.get("format") or "")
    text = known if known is not None else fill.text(name)
    least = schema.get("minLength") if isinstance(schema.get("minLength"), int) else 0
    most = schema.get("maxLength") if isinstance(schema.get("maxLength"), int) else None
    if len(text) < least:
        text += "." * (least - len(text))
    if most is None:
        return text
    cut = whole_words(text, most)
    return cut if len(cut) >= least else text[:most]


def _number(schema: dict[str, Any], whole: bool) -> int | float:
    def bound(key: str) -> float | None:
        value = schema.get(key)
        return value if isinstance(value, int | float) and not isinstance(value, bool) else None

    step = 1 if whole else 0.5
    value: float = 0
    if (low := bound("minimum")) is not None:
        value = low
    if (above := bound("exclusiveMinimum")) is not None and value <= above:
        value = above + step
    if (high := bound("maximum")) is not None and value > high:
        value = high
    if (below := bound("exclusiveMaximum")) is not None and value >= below:
        value = below - step
    if multiple := bound("multipleOf"):
        value = math.ceil(value / multiple) * multiple
    return math.ceil(value) if whole else value
