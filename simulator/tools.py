"""Tool use (OpenAI function calling), as a simulated member does it.

A request may offer tools (`tools`: {"type": "function", "function": {"name", ...}}). When
it does and the conversation holds no tool call yet, the member asks for the tools its
question needs instead of answering (several at once: parallel tool calls):

- an http(s) URL in the question, with `fetch` offered: fetch {"url"} (one call a URL);
- an arithmetic expression ("37*91+12", "sqrt(2)*3"), with a tool whose name ends with
  "evaluate" offered (an MCP tool is offered as "<entry>__<tool>"): {"expression"}, in
  Python's notation as a calculator takes it (2^10 as 2**10, ln as log);
- a unit conversion ("convert 5 mi to km"), with a tool whose name ends with "convert":
  {"value", "from_unit", "to_unit"} (°F as F);
- a search ("search the web for ...", "look up ...", "find the latest ...", "what is the
  latest ..."), with `web_search` offered: {"query"} (a few words of the question);
- any other offered tool (a user's own MCP server's) whose name or description shares words
  with the question: the one or two that share the most, with arguments made from its
  input schema and the question (simulator.tool_match).

"The question" is the one simulator.reading finds in the prompt, whatever the stage: the
user's question, never the instructions, the conversation so far, the answers under
review or the template's own text. `tool_choice: "none"` asks for no call, and
`parallel_tool_calls: false` for one at most. A call's id is "call_" and a hash of the
request and the call's place in it, so a replayed request gets the same ids.

Once the conversation holds a tool call (an assistant message with `tool_calls`, and the
`tool` messages with their results), the member never calls again: it answers as it
would, with a paragraph on what the tools gave (`note`): the number a calculator
returned (the one after the last "=", if any), or a short excerpt of a fetched page or a
search, quoted and attributed. The text of a result is data: the member quotes a sentence
of it and follows nothing in it.

A model can be set to take no tools (FaultSpec.tools = false): a request that offers it
any is refused with 400, as a provider without function calling refuses it.
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import json
import re
from dataclasses import dataclass
from typing import Any

from council.tools import FETCH, WEB_SEARCH, ToolCall
from simulator import wire
from simulator.reading import content_text
from simulator.tool_match import Function, matching_calls

# The most calls one reply asks for, and URLs or expressions taken from one question.
MAX_CALLS = 4
MAX_EACH = 2
QUERY_WORDS = 12
QUERY_CHARS = 120
EXCERPT_CHARS = 200
ERROR_CHARS = 160

_URL = re.compile(r"https?://[^\s<>\"'`()\[\]{}]+", re.IGNORECASE)
_FUNCTIONS = ("sqrt", "sin", "cos", "tan", "log", "ln", "exp", "abs", "round", "pi")
_EXPRESSION_SPAN = re.compile(
    r"(?:\b(?:" + "|".join(_FUNCTIONS) + r")\b|[\d.\s+\-*/^%()×÷])+", re.IGNORECASE
)
_UNIT = r"(?:°\s?[CFK]\b|[^\W\d_][\w°/²³]*)"
_CONVERSION = re.compile(
    r"\bconvert\b.*?(?P<value>-?\d+(?:\.\d+)?)\s*(?P<from>" + _UNIT + r")\s+(?:to|into|in)\s+"
    r"(?P<to>" + _UNIT + r")",
    re.IGNORECASE | re.DOTALL,
)
# A request to search: at the start of a sentence or after "please", "can you", ...
_ASKING = r"(?:^|[.!?;:]\s+|\n|\b(?:please|can you|could you|would you|you to|and|then)\s+)"
_SEARCH = re.compile(
    _ASKING + r"(?:search(?:\s+(?:the\s+web|the\s+internet|online|the\s+news))?"
    r"(?:\s+(?:for|about|on))?|look(?:ing)?\s+up|find\s+(?:out\s+)?(?:the\s+)?"
    r"(?=(?:latest|newest|most\s+recent|current)\b))\b\s*(?P<rest>[^\n]*)",
    re.IGNORECASE,
)
_LATEST = re.compile(
    r"\b(?:what|which|who)(?:'s|\s+is|\s+are|\s+was)\s+the\s+"
    r"(?P<rest>(?:latest|newest|most\s+recent)\b[^\n]*)",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"[.!?](?:\s|$)")
_NUMBER = re.compile(r"-?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?")
# How council.tools.result_message frames a result, and says that a call failed.
_FRAMED = re.compile(r"<<<TOOL RESULT\n(.*)\nTOOL RESULT>>>", re.DOTALL)
_FAILED = re.compile(r"\AThe tool call (\S+) failed: (.*)\Z", re.DOTALL)


def offered(payload: dict[str, Any]) -> list[str]:
    """The names of the functions the request offers (none: it offers no tools)."""
    return [function.name for function in functions(payload)]


def functions(payload: dict[str, Any]) -> list[Function]:
    """The functions the request offers, with their descriptions and input schemas."""
    tools = payload.get("tools")
    found = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            description = function.get("description")
            parameters = function.get("parameters")
            found.append(
                Function(
                    function["name"],
                    description if isinstance(description, str) else "",
                    parameters if isinstance(parameters, dict) else None,
                )
            )
    return found


def invalid(payload: dict[str, Any]) -> str | None:
    """Why the request's tools or tool messages are not what OpenAI takes; None if fine."""
    tools = payload.get("tools")
    if tools is not None and (
        not isinstance(tools, list)
        or not all(
            isinstance(tool, dict)
            and tool.get("type") == "function"
            and isinstance(tool.get("function"), dict)
            and isinstance(tool["function"].get("name"), str)
            for tool in tools
        )
    ):
        return '\'tools\' must be a list of {"type": "function", "function": {"name": ...}}'
    messages = payload["messages"]
    for at, message in enumerate(messages):
        calls = message.get("tool_calls")
        if message.get("role") == "assistant" and calls:
            ids = _call_ids(calls)
            if ids is None:
                return f"messages[{at}].tool_calls must be a list of calls, each with an 'id'"
            replies = itertools.takewhile(lambda m: m.get("role") == "tool", messages[at + 1 :])
            answered = {reply.get("tool_call_id") for reply in replies}
            missing = [i for i in ids if i not in answered]
            if missing:
                return (
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    "responding to each 'tool_call_id'. The following tool_call_ids did not "
                    f"have response messages: {', '.join(missing)}"
                )
        if message.get("role") == "tool" and message.get("tool_call_id") not in _asked(
            messages[:at]
        ):
            return (
                f"messages[{at}]: messages with role 'tool' must be a response to a preceding "
                "message with 'tool_calls'"
            )
    return None


def _call_ids(calls: object) -> list[str] | None:
    if not isinstance(calls, list):
        return None
    ids = [call.get("id") for call in calls if isinstance(call, dict)]
    if len(ids) != len(calls) or not all(isinstance(i, str) and i for i in ids):
        return None
    return [str(i) for i in ids]


def _asked(messages: list[dict[str, Any]]) -> set[str]:
    return {
        call_id
        for message in messages
        if message.get("role") == "assistant"
        for call_id in _call_ids(message.get("tool_calls")) or []
    }


def used(messages: list[dict[str, Any]]) -> bool:
    """Whether the conversation already holds a tool call or a tool's result."""
    return any(
        message.get("role") == "tool"
        or (message.get("role") == "assistant" and message.get("tool_calls"))
        for message in messages
    )


def plan(payload: dict[str, Any], question: str) -> list[ToolCall]:
    """The tool calls the member makes instead of answering (none: it answers)."""
    names = offered(payload)
    messages = payload["messages"]
    if not names or used(messages) or payload.get("tool_choice") == "none":
        return []
    wanted = wanted_calls(question, names, functions(payload))
    if payload.get("parallel_tool_calls") is False:
        wanted = wanted[:1]
    digest = hashlib.sha256(
        json.dumps(
            [payload["model"], messages, payload.get("tools")], sort_keys=True, ensure_ascii=False
        ).encode("utf-8")
    ).hexdigest()[:16]
    return [
        ToolCall(
            id=f"call_{digest}_{i}", name=name, arguments=json.dumps(arguments, ensure_ascii=False)
        )
        for i, (name, arguments) in enumerate(wanted)
    ]


def wanted_calls(
    question: str, names: list[str], offered: list[Function] | None = None
) -> list[tuple[str, dict[str, Any]]]:
    """(function, arguments) for each call the question asks for, of the offered ones (the
    others than fetch, web_search, evaluate and convert: `offered`, with their schemas)."""
    calls: list[tuple[str, dict[str, Any]]] = []
    urls = urls_in(question)
    if FETCH in names:
        calls += [(FETCH, {"url": url}) for url in urls[:MAX_EACH]]
    rest = _URL.sub(" ", question)
    evaluate = _ending(names, "evaluate")
    if evaluate:
        calls += [
            (evaluate, {"expression": python_notation(e)}) for e in expressions(rest)[:MAX_EACH]
        ]
    convert = _ending(names, "convert")
    conversion = conversion_in(rest) if convert else None
    if convert and conversion:
        calls.append((convert, conversion))
    query = search_query(question) if WEB_SEARCH in names else None
    if query:
        calls.append((WEB_SEARCH, {"query": query}))
    others = [f for f in offered or [] if f.name in names and not _known(f.name)]
    calls += matching_calls(question, others)
    return calls[:MAX_CALLS]


def _known(name: str) -> bool:
    """A tool the rules above are for: fetch, web_search, one named like evaluate or convert."""
    lowered = name.lower()
    return name in (FETCH, WEB_SEARCH) or lowered.endswith(("evaluate", "convert"))


def _ending(names: list[str], suffix: str) -> str | None:
    return next((name for name in names if name.lower().endswith(suffix)), None)


def urls_in(text: str) -> list[str]:
    """The distinct http(s) URLs in the text, in order (sentence punctuation left off)."""
    found: list[str] = []
    for match in _URL.finditer(text):
        url = match.group(0).rstrip(".,;:!?")
        if url not in found and "://" in url and len(url) > len(url.split("://")[0]) + 3:
            found.append(url)
    return found


def expressions(text: str) -> list[str]:
    """The arithmetic expressions in the text ("37*91+12", "sqrt(2)*3"), as written: at
    least one operation on numbers; a date, a range ("3-5") or a lone number is none."""
    found: list[str] = []
    for match in _EXPRESSION_SPAN.finditer(text):
        candidate = match.group(0).strip().rstrip(".").strip()
        if _is_expression(candidate) and candidate not in found:
            found.append(candidate)
    return found


def python_notation(expression: str) -> str:
    """The expression as a calculator that parses Python's arithmetic takes it."""
    python = expression.replace("^", "**").replace("×", "*").replace("÷", "/")
    return re.sub(r"\bln\b", "log", python, flags=re.IGNORECASE)


def _is_expression(candidate: str) -> bool:
    if not re.search(r"\d", candidate):
        return False
    try:
        tree = ast.parse(python_notation(candidate), mode="eval")
    except SyntaxError:
        return False
    operations = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.BinOp | ast.Call):
            operations += 1
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id.lower() in _FUNCTIONS
        ):
            return False
        if isinstance(node, ast.Name) and node.id.lower() not in _FUNCTIONS:
            return False
        if isinstance(node, ast.Constant) and not isinstance(node.value, int | float):
            return False
    if not operations:
        return False
    # "3-5 days", "2024-1-5": a range or a date, not a subtraction.
    operators = set(re.findall(r"[-+*/^%×÷]", candidate))
    return not (operators == {"-"} and " " not in candidate and "(" not in candidate)


def conversion_in(text: str) -> dict[str, Any] | None:
    """{"value", "from_unit", "to_unit"} of "convert 5 mi to km"; None without one."""
    match = _CONVERSION.search(text)
    if match is None:
        return None
    number = float(match.group("value"))
    value: int | float = int(number) if number.is_integer() else number
    return {
        "value": value,
        "from_unit": _unit(match.group("from")),
        "to_unit": _unit(match.group("to")),
    }


def _unit(text: str) -> str:
    return text.replace(" ", "").removeprefix("°") or text


def search_query(question: str) -> str | None:
    """A few words of the question to search for, when it asks for a search."""
    match = _SEARCH.search(question) or _LATEST.search(question)
    if match is None:
        return None
    rest = _URL.sub(" ", match.group("rest"))
    end = _SENTENCE_END.search(rest)
    rest = rest[: end.start()] if end else rest
    words = rest.strip(" ?!.,;:\"'").split()
    if not words:
        words = _URL.sub(" ", question).strip(" ?!.,;:\"'").split()
    query = " ".join(words[:QUERY_WORDS])
    return wire.whole_words(query, QUERY_CHARS) or None


# ---- answering with the results -------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """A tool's result as the member read it: the call, and its text or its error."""

    name: str
    arguments: dict[str, Any]
    text: str = ""
    error: str | None = None


def results(messages: list[dict[str, Any]]) -> list[Result]:
    """The tool results in the conversation, each with the call it answers."""
    calls: dict[str, tuple[str, dict[str, Any]]] = {}
    found: list[Result] = []
    for message in messages:
        if message.get("role") == "assistant" and isinstance(message.get("tool_calls"), list):
            for call in message["tool_calls"]:
                if isinstance(call, dict) and isinstance(call.get("function"), dict):
                    function = call["function"]
                    calls[str(call.get("id"))] = (
                        str(function.get("name") or "the tool"),
                        _arguments(function.get("arguments")),
                    )
        elif message.get("role") == "tool":
            name, arguments = calls.get(
                str(message.get("tool_call_id")), (str(message.get("name") or "the tool"), {})
            )
            found.append(_read(name, arguments, content_text(message.get("content"))))
    return found


def _arguments(text: object) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def _read(name: str, arguments: dict[str, Any], content: str) -> Result:
    framed = _FRAMED.search(content)
    if framed:
        return Result(name, arguments, text=framed.group(1))
    failed = _FAILED.match(content.strip())
    if failed:
        return Result(name, arguments, error=failed.group(2))
    return Result(name, arguments, text=content)


def note(messages: list[dict[str, Any]]) -> str:
    """What the member says of the tool results in the conversation ("" without any): a
    sentence each, the number a calculator gave or a short excerpt, quoted."""
    return " ".join(sentence(result) for result in results(messages))


def sentence(result: Result) -> str:
    if result.error is not None:
        why = wire.whole_words(_squash(result.error), ERROR_CHARS)
        return f"The tool {result.name} gave no result ({why}), so this rests on what I know."
    text = _squash(result.text)
    lowered = result.name.lower()
    # A calculator's value; of "5 mi = 8.04672 km", the one after the "=".
    number = (
        _NUMBER.search(text.rpartition("=")[2]) or _NUMBER.search(text)
        if lowered.endswith(("evaluate", "convert"))
        else None
    )
    if number is not None:
        value = number.group(0)
        arguments = result.arguments
        if lowered.endswith("evaluate") and isinstance(arguments.get("expression"), str):
            return f"Using {result.name}, {arguments['expression']} = {value}."
        if lowered.endswith("convert") and {"value", "from_unit", "to_unit"} <= set(arguments):
            return (
                f"Using {result.name}, {arguments['value']} {arguments['from_unit']} is "
                f"{value} {arguments['to_unit']}."
            )
        return f"According to {result.name}, the result is {value}."
    if not text:
        return f"The tool {result.name} returned nothing."
    return f'According to {result.name}, "{excerpt(text)}"'


def excerpt(text: str) -> str:
    """The first sentence of the text, at most about EXCERPT_CHARS, fit to quote."""
    text = _squash(text).replace('"', "'")
    end = _SENTENCE_END.search(text)
    first = text[: end.start() + 1] if end else text
    if len(first) <= EXCERPT_CHARS:
        return first
    return wire.whole_words(first, EXCERPT_CHARS - 1) + "…"


def _squash(text: str) -> str:
    return " ".join(text.split())


# ---- on the wire ----------------------------------------------------------------------


def usage_text(calls: list[ToolCall]) -> str:
    """The text a reply of tool calls counts as completion tokens."""
    return "".join(call.name + call.arguments for call in calls)


def stream_deltas(calls: list[ToolCall], size: int) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The first delta of a streamed reply of tool calls, and the rest: each call opens
    with its index, id, type and name, and its arguments follow in two or more pieces."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        deltas.append(
            {
                "tool_calls": [
                    {
                        "index": index,
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": ""},
                    }
                ]
            }
        )
        step = max(1, min(size, -(-len(call.arguments) // 2)))
        deltas += [
            {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
            for piece in wire.pieces(call.arguments, step)
        ]
    first = {"role": "assistant", "content": None, **deltas[0]}
    return first, deltas[1:]
