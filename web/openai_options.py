"""What /v1/chat/completions does with each field of OpenAI's chat-completions body, and
`response_format` read into the format the chairman is asked to answer in.

Rules:
- Every field is read, accepted and ignored, or refused with a 400 that names it. Read:
  the fields the body's model declares (web.openai_body.ChatBody). Ignored: the fields in
  IGNORED, on which nothing a council does depends (ids for the caller's own bookkeeping,
  a best-effort seed). `user` and `safety_identifier` are read within their bounds but
  pick nothing (the run's fairness key is the caller as it authenticated, web.guard);
  `service_tier` says how urgent the run is (runs.priority).
  Refused: the fields in REFUSED, which a council cannot honour; a refused field passes
  only with the value that asks for nothing (`n` 1, `logprobs` false, `top_p` 1...).
  Any other field is refused too, as OpenAI refuses an unrecognized argument, so that
  nothing a client asks for is dropped unsaid. A null value is a field not given.
- response_format: `text` (the default), `json_object` (a JSON object), `json_schema`
  (JSON valid against the client's schema: its `name` as OpenAI allows it, and its
  `schema` one the council takes (council.structured.schema_problem: a valid JSON
  Schema of a known draft, within its size and depth, whose references point inside
  it). llama.cpp's
  form, `json_object` with a `schema`, is read as a schema too. `strict` is accepted: the
  answer is always validated.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from council.structured import (
    DRAFT_KEY,
    JSON_OBJECT,
    JSON_SCHEMA,
    TEXT,
    StructuredReply,
    schema_problem,
)

DESCRIPTION_MAX_CHARS = 2_000
# OpenAI's rule for a response format's name.
NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
# What json_object asks for when it names no schema.
ANY_OBJECT = {"type": "object"}
IGNORED = frozenset(
    {
        "prompt_cache_key",
        "prompt_cache_retention",
        "seed",
        "metadata",
        "store",
    }
)
STREAM_OPTIONS_READ = ("include_usage",)
STREAM_OPTIONS_IGNORED = frozenset({"include_obfuscation"})


class OptionError(ValueError):
    """A field the API refuses: a one-line message and the field's name."""

    def __init__(self, message: str, param: str) -> None:
        super().__init__(message)
        self.param = param


@dataclass(frozen=True)
class Refused:
    """A field a council cannot honour, why, and the value (if any) that asks for nothing."""

    why: str
    passes: Callable[[Any], bool] = lambda value: False
    neutral: str = ""


def _equals(neutral: Any) -> Callable[[Any], bool]:
    return lambda value: not isinstance(value, bool) and value == neutral


NO_TOOLS = "the council answers in text and calls no tools"
NO_LOGPROBS = (
    "the final answer is a synthesis of several models' replies, with no log probabilities"
)
MEMBER_SETTINGS = "each member's settings come from the council (council.toml)"
SAMPLING = "the council sets only temperature on its calls"
TEXT_ONLY = "the council answers in text only"

REFUSED = {
    "tools": Refused(NO_TOOLS),
    "tool_choice": Refused(NO_TOOLS),
    "parallel_tool_calls": Refused(NO_TOOLS),
    "functions": Refused(NO_TOOLS),
    "function_call": Refused(NO_TOOLS),
    "n": Refused("the council gives one answer", _equals(1), "1"),
    "logprobs": Refused(NO_LOGPROBS, lambda value: value is False, "false"),
    "top_logprobs": Refused(NO_LOGPROBS),
    "logit_bias": Refused("token ids differ between the council's models", lambda v: v == {}, "{}"),
    "stop": Refused("the council's replies are not cut at stop sequences", lambda v: v == [], "[]"),
    "top_p": Refused(SAMPLING, _equals(1), "1"),
    "presence_penalty": Refused(SAMPLING, _equals(0), "0"),
    "frequency_penalty": Refused(SAMPLING, _equals(0), "0"),
    "modalities": Refused(TEXT_ONLY, lambda v: v == ["text"], '["text"]'),
    "audio": Refused(TEXT_ONLY),
    "prediction": Refused("the final answer is written anew, not predicted"),
    "web_search_options": Refused("the council's members do not search the web"),
    "reasoning_effort": Refused(MEMBER_SETTINGS),
    "verbosity": Refused(MEMBER_SETTINGS),
}


def shown(name: str) -> str:
    return repr(name if len(name) <= 40 else name[:37] + "...")


def check_fields(body: dict[str, Any], read: Sequence[str]) -> None:
    """Refuse the first field of the body that the council cannot honour (in REFUSED's
    order: tools before what goes with them), then any it does not know (neither `read`
    nor ignored); a null value is a field not given."""
    for name, refused in REFUSED.items():
        value = body.get(name)
        if value is not None and not refused.passes(value):
            only = f" (only {refused.neutral} is accepted)" if refused.neutral else ""
            raise OptionError(f"{name} is not supported{only}: {refused.why}", name)
    for name, value in body.items():
        if value is None or name in read or name in IGNORED or name in REFUSED:
            continue
        raise OptionError(
            f"unrecognized request argument {shown(name)}: /v1/chat/completions reads "
            f"{', '.join(read)} (see the API's documentation)",
            name[:40],
        )


def check_stream_options(options: dict[str, Any]) -> None:
    for name, value in options.items():
        if value is None or name in STREAM_OPTIONS_READ or name in STREAM_OPTIONS_IGNORED:
            continue
        raise OptionError(
            f"unrecognized argument stream_options.{name[:40]}: only include_usage is read",
            f"stream_options.{name[:40]}",
        )


# ---- response_format --------------------------------------------------------------------


def answer_format(raw: Any) -> StructuredReply | None:
    """The format the chairman is asked to answer in; None: free text."""
    if raw is None:
        return None
    where = "response_format"
    if not isinstance(raw, dict) or raw.get("type") not in (TEXT, JSON_OBJECT, JSON_SCHEMA):
        got = raw.get("type") if isinstance(raw, dict) else raw
        raise OptionError(
            f"{where}.type must be text, json_object or json_schema (got {str(got)[:40]!r})",
            f"{where}.type",
        )
    kind = raw["type"]
    allowed = {TEXT: ("type",), JSON_OBJECT: ("type", "schema"), JSON_SCHEMA: ("type", JSON_SCHEMA)}
    _only(raw, allowed[kind], where)
    if kind == TEXT:
        return None
    if kind == JSON_OBJECT:
        if raw.get("schema") is None:
            return StructuredReply(name=JSON_OBJECT, json_schema=ANY_OBJECT)
        return StructuredReply(name=JSON_OBJECT, json_schema=checked_schema(raw["schema"], where))
    where = f"{where}.{JSON_SCHEMA}"
    spec = raw.get(JSON_SCHEMA)
    if not isinstance(spec, dict):
        raise OptionError(f"{where} must be an object with a name and a schema", where)
    _only(spec, ("name", "schema", "strict", "description"), where)
    name = spec.get("name")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise OptionError(
            f"{where}.name must be 1 to 64 letters, digits, underscores or dashes", f"{where}.name"
        )
    if spec.get("strict") is not None and not isinstance(spec["strict"], bool):
        raise OptionError(f"{where}.strict must be true or false", f"{where}.strict")
    description = spec.get("description")
    if description is not None and (
        not isinstance(description, str) or len(description) > DESCRIPTION_MAX_CHARS
    ):
        raise OptionError(
            f"{where}.description must be text of at most {DESCRIPTION_MAX_CHARS} characters",
            f"{where}.description",
        )
    if spec.get("schema") is None:
        raise OptionError(
            f"{where}.schema is required: the JSON Schema of the answer", f"{where}.schema"
        )
    return StructuredReply(name=name, json_schema=checked_schema(spec["schema"], where))


def _only(raw: dict[str, Any], known: tuple[str, ...], where: str) -> None:
    for key in raw:
        if key not in known:
            raise OptionError(
                f"unrecognized argument {where}.{str(key)[:40]}: {where} takes {', '.join(known)}",
                f"{where}.{str(key)[:40]}",
            )


def checked_schema(schema: Any, where: str) -> dict[str, Any]:
    """The client's schema, if it is one a council can be asked to answer in (the
    council's rule: council.structured.schema_problem); the error names the field."""
    where = f"{where}.schema"
    if not isinstance(schema, dict):
        raise OptionError(f"{where} must be a JSON Schema object", where)
    problem = schema_problem(schema)
    if problem is None:
        return schema
    if problem.startswith(DRAFT_KEY):  # the problem is the draft its $schema names
        field = f"{where}.{DRAFT_KEY}"
        raise OptionError(field + problem.removeprefix(DRAFT_KEY), field)
    raise OptionError(f"{where}: {problem}", where)
