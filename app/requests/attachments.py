"""Reading the files a user attaches, on every surface: a file on disk (the CLI), an
upload (the page), a data URL (/v1), text or base64 (MCP). What is read becomes a
council.attachments.Attachment; what cannot be is an AttachmentProblem, one line that the
surface puts after its own name for the field.

- UTF-8 text (text, Markdown, code, CSV, JSON, ...) travels as its text; its media type is
  the one its name suggests (text/plain when it suggests none, or a binary type).
- A PDF travels as its text, read in a process of its own within limits (app.requests.pdf_text);
  an encrypted PDF, one without text (a scan), or one that goes past a limit is refused,
  naming the limit.
- PNG, JPEG, GIF and WebP images (known by their first bytes, whatever the name or the
  type given says) travel as their bytes.
- Anything else is refused, and so is an http(s) URL: the council fetches nothing.
Reading is in two steps, so that a request that must be refused reads no file:
- received: each file's size is checked for what it is (by its first bytes) and its
  bytes decoded (base64, a data URL); cheap, done for every file first, once the count
  of files is known to be within its limit (council.attachments.count_problem).
- read: a PDF's text is extracted, a text decoded, an image encoded. `read_files` reads
  the received files in order, up to the first that cannot be read (the request is
  refused: the rest are left unread); a server awaits `read_files_apart`, which reads a
  request's PDFs in a thread of the readers' pool (limits.PDF_READERS at once), never on
  its event loop.
The sizes are checked again against council.limits once read.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import mimetypes
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import unquote_to_bytes

from pydantic import ValidationError

from app.requests import pdf_text as pdf_reading
from council import limits
from council.attachments import IMAGE_TYPES, PDF_TYPE, Attachment
from council.paths import url_problem

ALLOWED = (
    "UTF-8 text (text, Markdown, code, CSV, JSON), PDF with text, or a PNG, JPEG, GIF or WebP image"
)
# Text types the name may suggest beside text/*.
_TEXT_TYPES = {
    "application/json",
    "application/xml",
    "application/javascript",
    "application/x-sh",
    "application/sql",
    "application/toml",
    "application/yaml",
    "application/x-yaml",
    "image/svg+xml",
}
_SIGNATURES = (
    (b"\x89PNG\r\n\x1a\n", "image/png"),
    (b"\xff\xd8\xff", "image/jpeg"),
    (b"GIF87a", "image/gif"),
    (b"GIF89a", "image/gif"),
)
_DATA_URL = re.compile(r"^data:([^;,]*)((?:;[^;,]*)*),(.*)$", re.DOTALL)
_EXTENSIONS = {
    ".md": "text/markdown",
    ".markdown": "text/markdown",
    ".csv": "text/csv",
    ".json": "application/json",
    ".toml": "application/toml",
    ".yaml": "application/yaml",
    ".yml": "application/yaml",
}
# The threads a server reads PDFs in (each waits for the process that reads one).
_READERS = ThreadPoolExecutor(limits.PDF_READERS, thread_name_prefix="attachment-reader")


class AttachmentProblem(ValueError):
    """A file that cannot be attached: `text` follows the surface's name for the field
    (": notes.bin is a binary file ...")."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def line(self, field: str) -> str:
        return f"{field}{self.text}"


def _size_line(name: str, kind: str, size: int, most: int) -> AttachmentProblem:
    return AttachmentProblem(
        f": {name} is too large: {kind} may have {limits.over_limit_text(most, size)}"
    )


def largest_file() -> int:
    """The largest file worth reading (a PDF, whose text may still fit)."""
    return max(
        limits.MAX_ATTACHMENT_PDF_BYTES,
        limits.MAX_ATTACHMENT_IMAGE_BYTES,
        limits.MAX_ATTACHMENT_TEXT_BYTES,
    )


def sniffed_image(data: bytes) -> str | None:
    """The image type of `data` by its first bytes (PNG, JPEG, GIF, WebP), else None."""
    for signature, media_type in _SIGNATURES:
        if data.startswith(signature):
            return media_type
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def clean_name(name: str | None, fallback: str) -> str:
    """A file's name without its path; `fallback` when there is none."""
    base = PurePath((name or "").replace("\\", "/")).name.strip()
    base = "".join(ch for ch in base if ch.isprintable())
    return base[: limits.MAX_ATTACHMENT_NAME_CHARS] or fallback


def _text_type(name: str, given: str | None) -> str:
    suffix = PurePath(name).suffix.lower()
    guessed = _EXTENSIONS.get(suffix) or mimetypes.guess_type(name)[0]
    for candidate in (given, guessed):
        kind = (candidate or "").split(";")[0].strip().lower()
        if kind.startswith("text/") or kind in _TEXT_TYPES:
            return kind
    return "text/plain"


def pdf_text(name: str, data: bytes, budget: pdf_reading.Budget | None = None) -> str:
    """The text of a PDF, page after page, read in a process of its own (app.requests.pdf_text)
    within `budget` (None: council.limits'); AttachmentProblem for one that is encrypted,
    unreadable, has no text, or goes past a limit, naming the limit."""
    budget = budget or pdf_reading.Budget()
    outcome = pdf_reading.read(data, budget)
    if outcome.problem is not None:
        raise _pdf_problem(name, outcome, budget)
    text = outcome.text or ""
    if not text.strip():
        raise AttachmentProblem(
            f": {name} is a PDF without text (a scan?): attach its text, or its pages as images"
        )
    return text


def _pdf_problem(
    name: str, outcome: pdf_reading.Outcome, budget: pdf_reading.Budget
) -> AttachmentProblem:
    """The line for a PDF whose reading stopped short."""
    refused = f": {name} is refused:"
    problem, detail = outcome.problem, outcome.detail
    if problem == "text":
        size, pages = (int(part) for part in detail.split())
        where = "its first page" if pages == 1 else f"its first {pages} pages"
        return AttachmentProblem(
            f": {name} is too large: a file's text may have at most "
            f"{limits.size_text(budget.text_bytes)} (got {limits.size_text(size)} from {where})"
        )
    lines = {
        "encrypted": f": {name} is an encrypted PDF: attach one without a password ({ALLOWED})",
        "unreadable": f": {name} is not a readable PDF ({detail})",
        "stream": f"{refused} a stream of it inflates past "
        f"{limits.size_text(budget.stream_bytes)}, the most a PDF's page or stream may hold",
        "memory": f"{refused} reading it needs more than "
        f"{limits.size_text(budget.memory_bytes)} of memory, the most a PDF may take",
        "cpu": f"{refused} reading it takes more than {budget.cpu_seconds} s of CPU time, "
        "the most a PDF may take",
        "time": f"{refused} it was not read within {budget.seconds:g} s, the most a PDF may take",
        "limit": f"{refused} it goes past a limit of the PDF reader ({detail})",
    }
    stopped = f": {name} is not a readable PDF (the reader stopped: {detail})"
    return AttachmentProblem(lines.get(problem or "", stopped))


@dataclass(frozen=True)
class Received:
    """A file as a surface received it, within the size its kind may have, not read yet."""

    name: str
    data: bytes
    media_type: str | None = None

    @property
    def is_pdf(self) -> bool:
        return self.data.startswith(b"%PDF-")


# A file as a surface holds it: read, received and not read yet, or refused.
Attached = Attachment | Received | AttachmentProblem


def received(name: str, data: bytes, media_type: str | None = None) -> Received:
    """The bytes of a file called `name`, their size checked for what they are (an image
    or a PDF by its first bytes, else text); `media_type`: what the client said it is, a
    hint for a text file's type only."""
    if sniffed_image(data) is not None:
        if len(data) > limits.MAX_ATTACHMENT_IMAGE_BYTES:
            raise _size_line(name, "an image", len(data), limits.MAX_ATTACHMENT_IMAGE_BYTES)
    elif data.startswith(b"%PDF-"):
        if len(data) > limits.MAX_ATTACHMENT_PDF_BYTES:
            raise _size_line(name, "a PDF", len(data), limits.MAX_ATTACHMENT_PDF_BYTES)
    elif len(data) > limits.MAX_ATTACHMENT_TEXT_BYTES:
        raise _size_line(name, "a text file", len(data), limits.MAX_ATTACHMENT_TEXT_BYTES)
    return Received(name, data, media_type)


def read(file: Received) -> Attachment:
    """The attachment of a received file: a PDF's text (in a process of its own), a text
    decoded, an image's bytes."""
    name, data = file.name, file.data
    image = sniffed_image(data)
    if image is not None:
        encoded = base64.b64encode(data).decode("ascii")
        return _attachment(name, image, data, data_base64=encoded)
    if file.is_pdf:
        return _attachment(name, PDF_TYPE, data, text=pdf_text(name, data)).with_original(data)
    text: str | None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        raise AttachmentProblem(
            f": {name} is a binary file that is neither a PDF nor an image (allowed: {ALLOWED})"
        )
    return _attachment(name, _text_type(name, file.media_type), data, text=text)


def read_files(files: Sequence[Attached]) -> list[Attached]:
    """The received files read, in order, up to the first that cannot be: once one file
    is refused (here or before), the request is, and the files not read yet stay unread."""
    refused = any(isinstance(file, AttachmentProblem) for file in files)
    out: list[Attached] = []
    for file in files:
        if isinstance(file, Received) and not refused:
            try:
                file = read(file)
            except AttachmentProblem as problem:
                file, refused = problem, True
        out.append(file)
    return out


async def read_files_apart(files: Sequence[Attached]) -> list[Attached]:
    """read_files for a server: with a PDF among the files, in a thread of the readers'
    pool, so that the event loop answers others while the PDF is read."""
    if not any(isinstance(file, Received) and file.is_pdf for file in files):
        return read_files(files)
    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(_READERS, read_files, list(files))


def from_bytes(name: str, data: bytes, media_type: str | None = None) -> Attachment:
    """An attachment of the bytes of a file called `name` (`media_type`: what the client
    said it is, a hint for a text file's type only)."""
    return read(received(name, data, media_type))


def from_text(name: str, text: str, media_type: str | None = None) -> Attachment:
    """An attachment of text a client sent as text (MCP)."""
    data = text.encode("utf-8")
    if len(data) > limits.MAX_ATTACHMENT_TEXT_BYTES:
        raise _size_line(name, "a text file", len(data), limits.MAX_ATTACHMENT_TEXT_BYTES)
    return _attachment(name, _text_type(name, media_type), data, text=text)


def received_base64(name: str, encoded: str, media_type: str | None = None) -> Received:
    """The bytes of a file given in base64 (MCP, a data URL), its size checked before it
    is decoded."""
    most = largest_file()
    if len(encoded) > most * 4 // 3 + 4:
        raise _size_line(name, "a file", len(encoded) * 3 // 4, most)
    try:
        data = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentProblem(f": {name}: the data is not base64") from None
    return received(name, data, media_type)


def from_base64(name: str, encoded: str, media_type: str | None = None) -> Attachment:
    """An attachment of a file's bytes in base64 (MCP, a data URL)."""
    return read(received_base64(name, encoded, media_type))


def received_data_url(url: str, name: str | None, fallback: str) -> Received:
    """The bytes of a data URL (data:TYPE;base64,...); an http(s) URL is refused: the
    council does not fetch URLs."""
    shown = clean_name(name, fallback)
    if re.match(r"^\s*https?:", url, re.IGNORECASE):
        raise AttachmentProblem(
            ": must be a data URL (data:TYPE;base64,...): the council does not fetch URLs"
        )
    match = _DATA_URL.match(url.strip())
    if match is None:
        raise AttachmentProblem(": must be a data URL (data:TYPE;base64,...)")
    media_type, params, payload = match.groups()
    if ";base64" not in params.lower():
        return received(shown, unquote_to_bytes(payload), media_type or None)
    if not name:
        suffix = mimetypes.guess_extension(media_type or "") or ""
        shown = clean_name(None, fallback + suffix)
    return received_base64(shown, payload, media_type or None)


def from_data_url(url: str, name: str | None, fallback: str) -> Attachment:
    """An attachment of a data URL (data:TYPE;base64,...)."""
    return read(received_data_url(url, name, fallback))


def received_file(path: str | Path) -> Received:
    """The bytes of a file on disk (its size checked before it is read)."""
    file = Path(path)
    name = clean_name(file.name, "file")
    try:
        size = file.stat().st_size
        if not file.is_file():
            raise AttachmentProblem(f": {path} is not a file")
        if size > largest_file():
            raise _size_line(name, "a file", size, largest_file())
        data = file.read_bytes()
    except OSError as error:
        remote = url_problem(str(path))
        if remote:
            raise AttachmentProblem(f": {remote}") from None
        raise AttachmentProblem(f": cannot read {path} ({error.strerror or error})") from None
    return received(name, data)


def read_file(path: str | Path) -> Attachment:
    """An attachment of a file on disk."""
    return read(received_file(path))


def _attachment(name: str, media_type: str, data: bytes, **content: Any) -> Attachment:
    try:
        return Attachment(
            name=name,
            media_type=media_type,
            size=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
            **content,
        )
    except ValidationError as error:
        message = error.errors()[0]["msg"].removeprefix("Value error, ")
        raise AttachmentProblem(f": {message}") from None


__all__ = [
    "ALLOWED",
    "IMAGE_TYPES",
    "Attached",
    "AttachmentProblem",
    "Received",
    "from_base64",
    "from_bytes",
    "from_data_url",
    "from_text",
    "read",
    "read_file",
    "read_files",
    "read_files_apart",
    "received",
    "received_base64",
    "received_data_url",
    "received_file",
]
