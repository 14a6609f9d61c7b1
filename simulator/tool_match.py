"""Any offered tool, as a simulated member picks it: the tool whose name or description
shares words with the question, called with arguments made from its input schema. This is
what lets a user's own MCP server show its real call path with the simulator (`make up`).

    matching_calls("What is the current time in Asia/Tokyo?", functions)
    -> [("time__get_current_time", {"timezone": "Asia/Tokyo"})]

- Words: the question's and a tool's (its name, split at _, -, . and camelCase, and its
  description), lower-case, a plural's "s" left off, stop words ("what", "the", "get",
  ...), single letters and numbers ignored. A word of the tool's name counts twice, one of
  its description or its entry's name once; the tools with the highest count (at least 1)
  are called, at most MAX_TOOLS of them.
- Arguments: the schema's required properties (with $ref to its own $defs resolved, the
  first branch that is not null of anyOf/oneOf), each given its `const` or `default` when
  it has one, else: an enum its value that shares words with the question (else its first);
  a string words of the question that are not the tool's own (a word shaped like the
  examples in the property's description, such as "Asia/Tokyo" for 'America/New_York' or
  "09:30" for HH:MM, goes to that property; the one string property of a tool takes them
  all); a number the question's numbers in turn, within minimum and maximum; a boolean
  false; an array one item; an object its own required properties.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from council.tools import SEPARATOR

MAX_TOOLS = 2
QUERY_WORDS = 12
# Past this depth of nested schemas a property is left out (a schema that refers to itself).
MAX_DEPTH = 6

# Words that say nothing of what a tool is for.
_STOP = """
a about above after again all also am an and any are as at be been before being below
between both but by can could did do does doing done each either else every few for
from further get gets given gives had has have having he her here hers him his how i if
in into is it its itself just let me more most much my no nor not now of off on once
only or other our out over own please same she should show so some such tell than that
the their them then there these they this those through to too under until up use used
using very was we were what when where which while who whom why will with would you
your yours returns return specific
"""
STOP_WORDS = frozenset(_STOP.split())
# Characters whose place in a word gives it its shape ("Asia/Tokyo", "09:30", "a@b.org").
SHAPE_MARKS = frozenset("/:@-")

_WORD = re.compile(r"[A-Za-z][a-z]+|[A-Z]+(?![a-z])|[a-z]+|\d+")
_TOKEN = re.compile(r"[\w][\w/:@.+-]*[\w]|\w")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?")


@dataclass(frozen=True)
class Function:
    """An offered function: its name, description and input schema."""

    name: str
    description: str = ""
    parameters: dict[str, Any] | None = None


def words(text: str) -> set[str]:
    """The words of a text or a name that can be shared: lower-case, singular, no stop word,
    single letter or number."""
    found = set()
    for piece in _WORD.findall(text.replace("_", " ")):
        word = piece.lower()
        if len(word) < 2 or word.isdigit() or word in STOP_WORDS:
            continue
        if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
            word = word[:-1]
        found.add(word)
    return found


def score(question: set[str], function: Function) -> int:
    """How many of the question's words the tool shares: twice those of its own name."""
    entry, _, tool = function.name.rpartition(SEPARATOR)
    named = words(tool)
    other = (words(entry) | words(function.description)) - named
    return 2 * len(question & named) + len(question & other)


def matching_calls(question: str, functions: list[Function]) -> list[tuple[str, dict[str, Any]]]:
    """(function, arguments) for the offered tools that share the most words with the
    question (none shares any: no call)."""
    asked = words(question)
    scores = [(score(asked, function), function) for function in functions]
    best = max((points for points, _ in scores), default=0)
    if best <= 0:
        return []
    chosen = [function for points, function in scores if points == best][:MAX_TOOLS]
    return [(function.name, arguments_for(question, function)) for function in chosen]


def arguments_for(question: str, function: Function) -> dict[str, Any]:
    """Arguments for the function, made from its input schema and the question."""
    schema = function.parameters if isinstance(function.parameters, dict) else {}
    own = words(function.name) | words(function.description)
    subject = [t for t in _tokens(question) if not (words(t) and words(t) <= own)]
    filler = _Filler(schema, subject, _numbers(question), question)
    value = filler.value(schema, 0)
    return value if isinstance(value, dict) else {}


def _tokens(text: str) -> list[str]:
    """The question's words as written ("Asia/Tokyo", "09:30"), stop words left out."""
    found = []
    for match in _TOKEN.finditer(text):
        token = match.group(0).rstrip(".")
        if token.lower() in STOP_WORDS or (len(token) < 2 and not token.isdigit()):
            continue
        if token not in found:
            found.append(token)
    return found


def _numbers(text: str) -> list[float]:
    return [float(number.replace(",", "")) for number in _NUMBER.findall(text)]


def _shape(text: str) -> set[str]:
    return {c for c in text if c in SHAPE_MARKS}


class _Filler:
    """Values for a schema's properties, from the question's words and numbers, each used
    once while some are left."""

    def __init__(
        self, root: dict[str, Any], subject: list[str], numbers: list[float], question: str
    ) -> None:
        self.root = root
        self.unused = list(subject)
        self.subject = subject
        self.numbers = iter(numbers)
        self.question = question
        self.strings = 0  # the string properties of the whole schema

    def resolve(self, schema: Any, depth: int) -> dict[str, Any]:
        """The schema itself: its $ref followed (within the root's $defs), the first branch
        of anyOf/oneOf that is not null."""
        while isinstance(schema, dict) and depth <= MAX_DEPTH:
            ref = schema.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/"):
                target: Any = self.root
                for part in ref[2:].split("/"):
                    target = target.get(part) if isinstance(target, dict) else None
                schema, depth = target, depth + 1
                continue
            for key in ("anyOf", "oneOf"):
                branches = schema.get(key)
                if isinstance(branches, list) and branches:
                    kept = [
                        b for b in branches if not (isinstance(b, dict) and b.get("type") == "null")
                    ]
                    return self.resolve({**schema, key: None, **(kept or branches)[0]}, depth + 1)
            return schema
        return {}

    def value(self, schema: Any, depth: int, hint: str = "") -> Any:
        if isinstance(schema, dict) and "default" in schema:
            return schema["default"]
        schema = self.resolve(schema, depth)
        if "const" in schema:
            return schema["const"]
        if "default" in schema:
            return schema["default"]
        hint = f"{hint} {schema.get('description', '')}"
        choices = schema.get("enum")
        if isinstance(choices, list) and choices:
            asked = words(self.question)
            return next((c for c in choices if words(str(c)) & asked), choices[0])
        kind = schema.get("type", "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "null")
        if kind == "object" or "properties" in schema:
            return self.object(schema, depth)
        if kind == "array":
            return [self.value(schema.get("items", {}), depth + 1, hint)]
        if kind in ("integer", "number"):
            return self.number(schema, kind == "integer")
        if kind == "boolean":
            return False
        if kind == "null":
            return None
        return self.string(hint)

    def object(self, schema: dict[str, Any], depth: int) -> dict[str, Any]:
        properties = schema.get("properties")
        if not isinstance(properties, dict) or depth > MAX_DEPTH:
            return {}
        required = schema.get("required")
        required = [n for n in required if isinstance(n, str)] if isinstance(required, list) else []
        # In the schema's order; one required and not described: a string.
        names = [n for n in properties if n in required] + [
            n for n in required if n not in properties
        ]
        self.strings += sum(
            self.resolve(properties.get(n, {}), depth + 1).get("type", "string") == "string"
            for n in names
        )
        return {
            name: self.value(properties.get(name, {}), depth + 1, hint=name.replace("_", " "))
            for name in names
        }

    def number(self, schema: dict[str, Any], whole: bool) -> int | float:
        value = next(self.numbers, 0.0)
        low, high = schema.get("minimum"), schema.get("maximum")
        if isinstance(low, int | float) and value < low:
            value = float(low)
        if isinstance(high, int | float) and value > high:
            value = float(high)
        return int(value) if whole or value.is_integer() else value

    def string(self, hint: str) -> str:
        """Words of the question: one shaped like the hint's examples, else (the only string
        property) all of them, else the next one unused."""
        shapes = {frozenset(_shape(t)) for t in _TOKEN.findall(hint) if _shape(t)}
        for token in self.unused:
            if _shape(token) and any(_shape(token) & shape for shape in shapes):
                self.unused.remove(token)
                return token
        if self.strings <= 1 or not self.unused:
            phrase = " ".join((self.unused or self.subject)[:QUERY_WORDS])
            self.unused = []
            return phrase or self.question.strip()[:120]
        return self.unused.pop(0)
