"""The command line's council options (`start`, `eval`), derived from the request's fields
(council.models.DeliberationRequest): each flag's type, repetition, help (the field's
description, its range and its default) and how a refusal names it.

FLAGS names the fields that are flags and spells each flag, the one thing not derived;
a field without a flag is set in council.toml, or on another surface. A flag given
becomes the field's value in the options of the front door (app.requests.front_door), which puts
it on top of the council's; a flag not given leaves the council's value.

- A number is read in ASCII digits only (council.numbers), a whole number where the field
  takes one; argparse's error names the flag.
- A list is a repeated flag (`--model A --model B`); a yes/no field is a flag that sets
  the value other than the default (`--wait-for-all`, `--no-convergence-stop`).
- Two flags have a syntax of their own: `--max-tokens STAGE=N` and `--criterion
  "name[:description]"` (both repeat); their errors are one line naming the flag.
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

from app.requests.attachments import Attached, AttachmentProblem, read_files, received_file
from app.requests.front_door import ATTACHMENTS, COUNCIL, bounds
from council import limits, numbers
from council.attachments import count_problem
from council.models import DeliberationRequest, ReplyTokens
from council.validation import Loc


class FlagError(ValueError):
    """A flag's value that cannot be read: one line naming the flag."""


def reply_tokens(given: list[str]) -> dict[str, int]:
    """--max-tokens STAGE=N (repeatable) as the request's max_tokens."""
    stages = ", ".join(ReplyTokens.model_fields)
    tokens: dict[str, int] = {}
    for item in given:
        stage, _, number = (part.strip() for part in item.partition("="))
        if stage not in ReplyTokens.model_fields:
            raise FlagError(f"--max-tokens must be STAGE=N, STAGE one of {stages} (got {item!r})")
        count = numbers.whole(number, signed=False)
        if count is None:
            raise FlagError(f"--max-tokens {stage}=N: N must be a whole number (got {number!r})")
        tokens[stage] = count
    return tokens


def tool_names(given: list[str]) -> list[str]:
    """--tools NAME[,NAME] (repeatable) as the request's tools."""
    return [name.strip() for item in given for name in item.split(",") if name.strip()]


def criteria(given: list[str]) -> dict[str, Any]:
    """--criterion "name[:description]" (repeatable) as the request's criteria."""
    parts = (item.partition(":") for item in given)
    return {"criteria": [{"name": name, "description": about} for name, _, about in parts]}


@dataclass(frozen=True)
class Flag:
    """A field of the request as a flag: where the field is, the flag's name, the word
    that stands for its value in the help (derived from the type when not given), and the
    reading of a flag with a syntax of its own (given every value of the repeated flag)."""

    loc: tuple[str, ...]
    name: str
    metavar: str | None = None
    read: Callable[[list[str]], Any] | None = None
    help: str | None = None

    @property
    def dest(self) -> str:
        return "_".join(self.loc)


FLAGS = (
    Flag(("models",), "--model", "M"),
    Flag(("chairman",), "--chairman", "M"),
    Flag(("max_rounds",), "--max-rounds"),
    Flag(("min_rounds",), "--min-rounds"),
    Flag(("quality_threshold",), "--quality-threshold"),
    Flag(("token_budget",), "--token-budget"),
    Flag(("max_cost_usd",), "--max-cost", "USD"),
    Flag(("stop_on_convergence",), "--no-convergence-stop"),
    Flag(("min_change_threshold",), "--min-change"),
    Flag(
        ("criteria",),
        "--criterion",
        "NAME[:DESCRIPTION]",
        criteria,
        'an evaluation criterion "name[:description]" (repeat)',
    ),
    Flag(("temperature",), "--temperature"),
    Flag(
        ("max_tokens",),
        "--max-tokens",
        "STAGE=N",
        reply_tokens,
        "the token limit of a stage's replies: answer, review, refine or synthesis (repeat; "
        "default: the stage's own, within the reply size cap)",
    ),
    Flag(("policy", "call_timeout_seconds"), "--call-timeout", "S"),
    Flag(("policy", "heartbeat_timeout_seconds"), "--heartbeat-timeout", "S"),
    Flag(("policy", "max_attempts"), "--max-attempts"),
    Flag(("stragglers", "wait_for_all"), "--wait-for-all"),
    Flag(("stragglers", "grace_seconds"), "--straggler-grace", "S"),
    Flag(("stragglers", "factor"), "--straggler-factor", "F"),
    Flag(
        ("tools",),
        "--tools",
        "NAME[,NAME]",
        tool_names,
        "tools the members may call: council.toml's [tools] entries, fetch, web_search "
        "(repeat, or separate with commas)",
    ),
    Flag(("tool_options", "reviewers"), "--no-reviewer-tools"),
    Flag(("tool_options", "chairman"), "--no-chairman-tools"),
    Flag(("tool_options", "calls_per_stage"), "--tool-calls-per-stage"),
    Flag(("tool_options", "calls_per_run"), "--tool-calls-per-run"),
    Flag(("tool_options", "result_bytes"), "--tool-result-bytes"),
    Flag(("depth",), "--depth", "full|auto"),
    Flag(("auto", "agree_share"), "--agree-share", "X"),
    Flag(("auto", "check_model"), "--check-model", "M"),
    Flag(("auto", "settle_reviews"), "--no-settled-reviews"),
)
# The options of a follow-up (`start` only).
FOLLOW_UP_FLAGS = (Flag(("context_tokens",), "--context-tokens"),)
COUNCIL_FLAG = "--council"
# The user's files (`start` only): read here, each as the front door takes it.
ATTACH_FLAG = "--attach"


def add_attach_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        ATTACH_FLAG,
        metavar="FILE",
        action="append",
        help=_escaped(
            "a file every member, reviewer and the chairman reads (repeat): UTF-8 text "
            "(Markdown, code, CSV, JSON), a PDF (its text) or a PNG, JPEG, GIF or WebP image; "
            f"at most {limits.MAX_ATTACHMENTS} files, "
            f"{limits.size_text(limits.MAX_ATTACHMENT_TEXT_BYTES)} of text or "
            f"{limits.size_text(limits.MAX_ATTACHMENT_IMAGE_BYTES)} of image each, "
            f"{limits.size_text(limits.MAX_ATTACHMENTS_TOTAL_BYTES)} in all"
        ),
    )


def attachments(args: argparse.Namespace) -> list[Attached]:
    """The files of --attach, read (a file that cannot be is its problem): their count and
    then each one's size checked before any is read."""
    given = getattr(args, "attach", None) or []
    too_many = count_problem(len(given))
    if too_many:  # said before any file is read
        return [AttachmentProblem(f": {too_many}")]
    received: list[Attached] = []
    for path in given:
        try:
            received.append(received_file(path))
        except AttachmentProblem as problem:
            received.append(problem)
    return read_files(received)


def field_at(loc: Sequence[str]) -> FieldInfo:
    """The request's field at `loc` (a nested model's field for a longer one)."""
    model: Any = DeliberationRequest
    field: FieldInfo | None = None
    for part in loc:
        field = model.model_fields[part]
        model = next((k for k in _kinds(field) if _is_model(k)), None)
    assert field is not None
    return field


def _kinds(field: FieldInfo) -> tuple[Any, ...]:
    return typing.get_args(field.annotation) or (field.annotation,)


def _is_model(kind: Any) -> bool:
    return isinstance(kind, type) and issubclass(kind, BaseModel)


def add_council_flags(parser: argparse.ArgumentParser, flags: Sequence[Flag] = FLAGS) -> None:
    """--council and the flags of `flags`, each as its field says."""
    parser.add_argument(
        COUNCIL_FLAG, metavar="NAME", help="a council of council.toml (flags override its options)"
    )
    for flag in flags:
        add_flag(parser, flag)


def add_flag(parser: argparse.ArgumentParser, flag: Flag) -> None:
    field = field_at(flag.loc)
    kinds = _kinds(field)
    described = flag.help or _help(field)
    if bool in kinds:
        turns_off = field.default is True
        help_text = f"turns off: {described}" if turns_off else described
        parser.add_argument(
            flag.name,
            dest=flag.dest,
            action="store_const",
            const=not turns_off,
            help=_escaped(help_text),
        )
        return
    choices = _choices(field)
    repeated = flag.read is not None or typing.get_origin(field.annotation) is list
    if flag.read is not None or not (int in kinds or float in kinds):
        kind: Callable[[str], Any] = str
        word = "VALUE"
    elif int in kinds and float not in kinds:
        kind, word = numbers.whole_argument, "N"
    else:
        kind, word = numbers.decimal_argument, "X"
    parser.add_argument(
        flag.name,
        dest=flag.dest,
        type=kind,
        action="append" if repeated else "store",
        choices=choices,
        metavar=flag.metavar or word,
        help=_escaped(described + (" (repeat)" if repeated and not flag.help else "")),
    )


def _choices(field: FieldInfo) -> tuple[str, ...] | None:
    """The values a field of one of a few words takes (a Literal), for argparse to check."""
    if typing.get_origin(field.annotation) is typing.Literal:
        return typing.get_args(field.annotation)
    return None


def _help(field: FieldInfo) -> str:
    """The field's description, its range and its default."""
    text = field.description or ""
    span = bounds(field.metadata)
    if span:
        text += f",{span}"
    default = field.default
    if default is not None and default is not PydanticUndefined and not isinstance(default, bool):
        if isinstance(default, str):
            shown = default
        elif isinstance(default, int) and default >= 10_000:
            shown = f"{default:,}"
        else:
            shown = f"{default:g}"
        text += f" (default {shown})"
    return text


def _escaped(text: str) -> str:
    return text.replace("%", "%%")


def options(args: argparse.Namespace, flags: Sequence[Flag] = FLAGS) -> dict[str, Any]:
    """The options the flags given set, under the request's field names (nested where the
    field is); FlagError for a value a flag of its own syntax cannot read."""
    out: dict[str, Any] = {}
    for flag in flags:
        value = getattr(args, flag.dest, None)
        if value is None:
            continue
        if flag.read is not None:
            value = flag.read(value)
        table = out
        for part in flag.loc[:-1]:
            table = table.setdefault(part, {})
        table[flag.loc[-1]] = value
    return out


def flag_of(loc: Loc, flags: Sequence[Flag] = (*FLAGS, *FOLLOW_UP_FLAGS)) -> str | None:
    """How the command line names the field at `loc` (in a refusal): its flag, QUESTION,
    `--criterion name`, `--max-tokens answer=N`; None for a field no flag sets."""
    if loc[:1] == ("question",):
        return "QUESTION"
    if loc[:1] == (COUNCIL,):
        return COUNCIL_FLAG
    if loc[:1] == (ATTACHMENTS,):
        return ATTACH_FLAG
    if loc[:2] == ("criteria", "criteria") and len(loc) > 3:
        return "--criterion " + ".".join(str(part) for part in loc[3:])
    if loc[:1] == ("max_tokens",) and len(loc) > 1:
        return f"--max-tokens {loc[1]}=N"
    for flag in flags:
        if tuple(loc[: len(flag.loc)]) == flag.loc:
            return flag.name
    return None
