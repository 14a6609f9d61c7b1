"""The tools' arguments, read through the front door (app.requests.front_door) as the CLI reads
its flags: the council's options (council.toml: the council named, else the default
one), what the caller gave on top, one validation. A problem is one line that names the
argument (the request's own name for it), as the CLI's names its flag; nothing is
started or asked of Temporal before the input passes. Files are counted before any is
decoded, and every one's size checked before any is read (app.requests.attachments)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from app.requests import attachments as reading
from app.requests import front_door
from app.settings.environment import Settings
from council.attachments import count_problem
from council.config import Config
from council.models import DeliberationRequest
from council.steering import reason_problem
from doctor.tools import offer_problem


class Problem(Exception):
    """Input that cannot be used (a tool's argument, a setting at start) or a call that
    cannot go on: the message is one line, the tool's error or the command's."""


class AttachmentInput(BaseModel):
    """A file the council reads: its name, and its text or its bytes in base64."""

    name: str = Field(description="the file's name, as the members are told it")
    media_type: str | None = Field(
        None, description="its type, e.g. text/csv (default: from the name, or the bytes)"
    )
    text: str | None = Field(None, description="a text file's text (give this or data_base64)")
    data_base64: str | None = Field(
        None, description="the file's bytes in base64: a PDF (read as its text) or an image"
    )


def received_attachment(given: AttachmentInput, index: int) -> reading.Attached:
    """One attachment argument, received (app.requests.attachments: its size checked; a text is
    read as it is), or the problem it met."""
    name = reading.clean_name(given.name, f"file-{index + 1}")
    try:
        if (given.text is None) == (given.data_base64 is None):
            raise reading.AttachmentProblem(": give either text or data_base64")
        if given.text is not None:
            return reading.from_text(name, given.text, given.media_type)
        return reading.received_base64(name, given.data_base64 or "", given.media_type)
    except reading.AttachmentProblem as problem:
        return problem


async def read_attachments(given: list[AttachmentInput]) -> list[reading.Attached]:
    """The attachment arguments read: their count checked first, then each one's size,
    then the files read apart from the event loop (a PDF's text)."""
    too_many = count_problem(len(given))
    if too_many:
        raise Problem(f"{front_door.ATTACHMENTS}: {too_many}")
    received = [received_attachment(file, index) for index, file in enumerate(given)]
    return await reading.read_files_apart(received)


def argument_of(loc: tuple[str | int, ...]) -> str | None:
    """How a tool's arguments name a request field: attachments[1]; None: its own name."""
    if loc[:1] == (front_door.ATTACHMENTS,) and len(loc) > 1:
        return f"attachments[{loc[1]}]"
    return None


async def deliberation_request(
    config: Config,
    question: str,
    council: str | None = None,
    settings: Settings | None = None,
    attachments: list[AttachmentInput] | None = None,
    **options: Any,
) -> DeliberationRequest:
    """The request a tool starts: the council's options with the arguments given (the
    request's options, by their names: models, chairman, max_rounds) on top, and the files
    of `attachments`."""
    files = await read_attachments(attachments or [])
    try:
        request = front_door.compose(
            question,
            options,
            council=council,
            config=config,
            settings=settings,
            attachments=files,
        )
        await front_door.check_tools(request, config, offer_problem)
    except front_door.Refused as refused:
        raise Problem(refused.line(argument_of)) from None
    return request


def stop_reason(reason: str | None) -> str | None:
    """A stop reason within its bound (council.limits.MAX_STOP_REASON_CHARS)."""
    problem = reason_problem(reason)
    if problem:
        raise Problem(f"reason: {problem}")
    return reason
