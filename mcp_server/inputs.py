"""The tools' arguments, read the way the CLI reads its flags: the council's options
(council.toml: the council named, else the default one), what the caller gave on top,
one validation. A problem is one line that names the argument, as the CLI's names its
flag; nothing is started or asked of Temporal before the input passes."""

from __future__ import annotations

from typing import Any

from app import councils
from council.config import Config, with_overrides
from council.models import DeliberationRequest
from council.steering import reason_problem
from council.validation import InvalidRequest, validate_request


class Problem(Exception):
    """Input that cannot be used (a tool's argument, a setting at start) or a call that
    cannot go on: the message is one line, the tool's error or the command's."""


def deliberation_request(
    config: Config,
    question: str,
    council: str | None = None,
    models: list[str] | None = None,
    chairman: str | None = None,
    max_rounds: int | None = None,
) -> DeliberationRequest:
    """The request a tool starts: the council's options with the given arguments on top."""
    try:
        options = councils.council_options(config, council)
    except councils.UnknownCouncil as error:
        raise Problem(f"council: {error.args[0]}") from None
    given: dict[str, Any] = {"models": models, "chairman": chairman, "max_rounds": max_rounds}
    overrides = {key: value for key, value in given.items() if value is not None}
    try:
        return validate_request(with_overrides(options, overrides) | {"question": question})
    except InvalidRequest as error:
        raise Problem(str(error)) from None


def stop_reason(reason: str | None) -> str | None:
    """A stop reason within its bound (council.limits.MAX_STOP_REASON_CHARS)."""
    problem = reason_problem(reason)
    if problem:
        raise Problem(f"reason: {problem}")
    return reason
