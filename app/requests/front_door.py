"""The front door: the one way a user's input becomes a deliberation request, on every
surface (the CLI, the page, /v1, MCP).

    compose(question, options, council=NAME, ...)  ->  DeliberationRequest, or Refused

Rules:
- The council is the one named (council.toml), else the default council (app.settings.councils).
- `options` are what the user gave, as the surface gave them, under the request's own
  field names (council.models.DeliberationRequest): a value given replaces the council's,
  a table (policy, max_tokens, stragglers) is merged key by key (council.config
  .with_overrides). A value of None was not given. A number may come as text (a form,
  a JSON body): it is read in ASCII digits only (council.numbers), a whole number where
  the field takes one.
- What belongs to one request, never to a council, comes as its own argument: the
  question, the user's instructions, the JSON the final answer must be, and the thread
  (a follow-up's, or the conversation a client brings). An option that names one of
  them is refused.
- With attachments and no token budget set (by the user or the council), the default
  budget is left to the deliberation and the files come on top, once per call the run
  could make (council.attachments.budget_with).
- The user's attachments come read already (app.requests.attachments), each an Attachment or the
  AttachmentProblem that reading it met: a problem is the field `attachments`' (at its
  index), beside the rest. A file left unread because another was refused (Received) is
  passed over: the request is refused with that problem.
- The tools named (the council's or the user's) must be configured: council.toml's
  [tools] entries, fetch, and web_search where a search backend is set. Before the run
  starts, each MCP entry named must offer at least one of its tools (`check_tools`, with
  the surface's way of asking its servers: doctor.tools.offer_problem): one whose every tool
  its rules withhold is refused, naming the entry and the setting that offers them; two
  that offer one function name are refused, naming both.
- The whole is validated once, and every problem is raised at once as Refused: each with
  the pydantic location of its field, so that a surface names the field its own way (a
  CLI flag, a form's label, a path in a JSON body, an MCP argument) and says the rest in
  the same words. A council that does not exist is a problem of the field `council`.
"""

from __future__ import annotations

import typing
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import annotated_types
from pydantic import BaseModel, ValidationError

from app.requests.attachments import Attached, AttachmentProblem, Received
from app.settings import config as app_config
from app.settings import councils
from app.settings.environment import Settings
from council import numbers
from council.attachments import Attachment, budget_with
from council.config import NOT_COUNCIL_OPTIONS, Config, with_overrides
from council.models import DeliberationRequest
from council.structured import StructuredReply
from council.thread import Thread
from council.tool_config import Tools
from council.validation import InvalidRequest, Loc, Problem, problems

# The council's name, beside the request's fields.
COUNCIL = "council"
ATTACHMENTS = "attachments"
# Parts of one request that no option may set.
PER_REQUEST = NOT_COUNCIL_OPTIONS | {"answer_format"}
TOOLS = "tools"
# How a surface asks the MCP servers a request names what they offer: why a run given these
# tools must not start (one line, "tools: ..."), or None (doctor.tools.offer_problem).
ToolsCheck = Callable[[Tools, Sequence[str]], Awaitable[str | None]]


class Refused(InvalidRequest):
    """A request that must not start: every problem, each with its field's location (the
    message is the first, in the request's own words)."""

    def line(self, name: Callable[[Loc], str | None] = lambda loc: None) -> str:
        """The first problem in one line, its field named by `name` (None: the request's
        own name for it)."""
        first = self.problems[0]
        return first.line(name(first.loc))


def compose(
    question: str,
    options: Mapping[str, Any] | None = None,
    *,
    council: str | None = None,
    config: Config | None = None,
    thread: Thread | None = None,
    instructions: str | None = None,
    answer_format: StructuredReply | None = None,
    settings: Settings | None = None,
    attachments: Sequence[Attached] = (),
) -> DeliberationRequest:
    """The request the user asks for: the council's options (`council`, else the default
    council; `config`: council.toml, read now when not given), the user's `options` on top,
    and this request's own parts. Refused, with every problem, when it must not start."""
    config = config if config is not None else app_config.load()
    found: list[Problem] = []
    try:
        base = councils.council_options(config, council, settings)
    except councils.UnknownCouncil as unknown:
        # Said, and the rest checked with the default council: every problem at once.
        found.append(Problem((COUNCIL,), f": {unknown.args[0]}"))
        base = councils.council_options(config, None, settings)
    given, misread = read_options(options or {})
    found += misread
    data = with_overrides(base, given) | {"question": question}
    if instructions is not None:
        data["instructions"] = instructions
    if answer_format is not None:
        data["answer_format"] = answer_format.model_dump()
    if thread is not None:
        data |= thread.model_dump(exclude_defaults=True)
    read = []
    for index, attachment in enumerate(attachments):
        if isinstance(attachment, AttachmentProblem):
            found.append(Problem((ATTACHMENTS, index), attachment.text))
        elif isinstance(attachment, Attachment):
            read.append(attachment)
    unread = any(isinstance(attachment, Received) for attachment in attachments)
    if unread and not any(isinstance(a, AttachmentProblem) for a in attachments):
        raise TypeError("the attachments must be read first (app.requests.attachments.read_files)")
    if read:
        data[ATTACHMENTS] = read
    try:
        request = DeliberationRequest.model_validate(data)
    except ValidationError as error:
        seen = {problem.loc[:1] for problem in found}
        found += [problem for problem in problems(error) if problem.loc[:1] not in seen]
        raise Refused(found) from None
    unknown_tool = config.tool_set().problem(request.tools)
    if unknown_tool:
        found.append(Problem((TOOLS,), unknown_tool.removeprefix(TOOLS)))
    if found:
        raise Refused(found)
    if request.attachments and "token_budget" not in base and "token_budget" not in given:
        # The default budget is for the deliberation: the files every call carries come
        # on top (a budget the user or the council sets is kept as it is).
        budget = budget_with(request.attachments, len(request.models), request.token_budget)
        request = request.model_copy(update={"token_budget": budget})
    return request


async def check_tools(request: DeliberationRequest, config: Config, check: ToolsCheck) -> None:
    """Refused (the field `tools`) when an MCP entry the request (composed already) names
    offers none of its tools, as `check` finds: what its server lists, read as a run would."""
    if not request.tools:
        return
    problem = await check(config.tool_set(), request.tools)
    if problem:
        raise Refused([Problem((TOOLS,), problem.removeprefix(TOOLS))])


def in_thread(request: DeliberationRequest, thread: Thread) -> DeliberationRequest:
    """A request (composed already) as a turn of `thread`, validated again."""
    try:
        placed = DeliberationRequest.model_validate(
            request.model_dump() | thread.model_dump(exclude_defaults=True)
        )
    except ValidationError as error:
        raise Refused(problems(error)) from None
    # The same files, as read (with the bytes kept for their downloads).
    return placed.model_copy(update={ATTACHMENTS: request.attachments})


def read_options(options: Mapping[str, Any]) -> tuple[dict[str, Any], list[Problem]]:
    """The options given (None: not given), numbers written as text read as numbers; and
    the problems found on the way (an option no council may set, a number that is none)."""
    given: dict[str, Any] = {}
    found: list[Problem] = []
    for name, value in options.items():
        if value is None:
            continue
        if name in PER_REQUEST:
            found.append(Problem((name,), " is not an option: it belongs to one request"))
            continue
        given[name] = _read(DeliberationRequest, (name,), value, found)
    return given, found


def _read(model: type[BaseModel], loc: Loc, value: Any, found: list[Problem]) -> Any:
    """`value` of the field at `loc` of `model`, a number in text read as one."""
    field = model.model_fields.get(str(loc[-1]))
    if field is None:
        return value
    kinds = typing.get_args(field.annotation) or (field.annotation,)
    if isinstance(value, Mapping):
        inner = next((k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)), None)
        if inner is None:
            return value
        out = {}
        for key, item in value.items():
            if item is not None:
                out[key] = _read(inner, (*loc, key), item, found)
        return out
    numeric = any(k in (int, float) for k in kinds)
    whole = int in kinds and float not in kinds
    if isinstance(value, bool) and numeric and bool not in kinds:
        # pydantic would read true as 1: a number is asked for, and this is none.
        kind = "a whole number" if whole else "a number"
        found.append(
            Problem(loc, f" must be {kind}{bounds(field.metadata)} (got {str(value).lower()})")
        )
        return value
    if not isinstance(value, str) or not numeric:
        return value
    number: int | float | None = numbers.whole(value)
    if number is None and not whole:
        number = numbers.decimal(value)
    if number is None:
        kind = "a whole number" if whole else "a number"
        shown = value if len(value) <= 40 else value[:37] + "..."
        found.append(Problem(loc, f" must be {kind}{bounds(field.metadata)} (got {shown!r})"))
        return value
    return number


def bounds(metadata: list[Any]) -> str:
    """ " from 1 to 5", " above 0, at most 10,000": a numeric field's range, for a person."""
    low: Any = None
    high: Any = None
    above = False
    for meta in metadata:
        if isinstance(meta, annotated_types.Ge):
            low = meta.ge
        elif isinstance(meta, annotated_types.Gt):
            low, above = meta.gt, True
        elif isinstance(meta, annotated_types.Le):
            high = meta.le
    if low is None or high is None:
        return ""
    low, high = _shown(low), _shown(high)
    return f" above {low}, at most {high}" if above else f" from {low} to {high}"


def _shown(number: Any) -> str:
    if float(number).is_integer() and abs(number) >= 1000:
        return f"{int(number):,}"
    return f"{number:g}"
