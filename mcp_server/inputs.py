"""The tools' arguments, read through the front door (app.front_door) as the CLI reads
its flags: the council's options (council.toml: the council named, else the default
one), what the caller gave on top, one validation. A problem is one line that names the
argument (the request's own name for it), as the CLI's names its flag; nothing is
started or asked of Temporal before the input passes."""

from __future__ import annotations

from typing import Any

from app import front_door
from app.settings import Settings
from council.config import Config
from council.models import DeliberationRequest
from council.steering import reason_problem


class Problem(Exception):
    """Input that cannot be used (a tool's argument, a setting at start) or a call that
    cannot go on: the message is one line, the tool's error or the command's."""


def deliberation_request(
    config: Config,
    question: str,
    council: str | None = None,
    settings: Settings | None = None,
    **options: Any,
) -> DeliberationRequest:
    """The request a tool starts: the council's options with the arguments given (the
    request's options, by their names: models, chairman, max_rounds) on top."""
    try:
        return front_door.compose(
            question, options, council=council, config=config, settings=settings
        )
    except front_door.Refused as refused:
        raise Problem(refused.line()) from None


def stop_reason(reason: str | None) -> str | None:
    """A stop reason within its bound (council.limits.MAX_STOP_REASON_CHARS)."""
    problem = reason_problem(reason)
    if problem:
        raise Problem(f"reason: {problem}")
    return reason
