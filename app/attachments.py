"""Reading the files a user attaches, on every surface: a file on disk (the CLI), an
upload (the page), a data URL (/v1), text or base64 (MCP). What is read becomes a
council.attachments.Attachment; what cannot be is an AttachmentProblem, one line that the
surface puts after its own name for the field.

- UTF-8 text (text, Markdown, code, CSV, JSON, ...) travels as its text; its media type is
  the one its name suggests (text/plain when it suggests none, or a binary type).
- A PDF travels as its text (pypdf); an encrypted PDF, or one without text (a scan), is
  refused.
- PNG, JPEG, GIF and WebP images (known by their first bytes, whatever the name or the
  type given says) travel as their bytes.
- Anything else is refused, and so is an http(s) URL: the council fetches nothing.
Sizes are checked before a file is read, and again against council.limits once read.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import io
import logging
import mimetypes
import re
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import unquote_to_bytes

from pydantic import ValidationError

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
# pypdf warns on stderr about every oddity of a PDF it can still read.
logging.getLogger("pypdf").setLevel(logging.ERROR)


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


def pdf_text(name: str, data: bytes) -> str:
    """The text of a PDF, page after page; AttachmentProblem for one that is encrypted,
    unreadable, or has no text."""
    # Imported when a PDF comes: it takes a tenth of a second, which every CLI start would pay.
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise AttachmentProblem(
                f": {name} is an encrypted PDF: attach one without a password ({ALLOWED})"
            )
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
    except AttachmentProblem:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, OSError) as error:
        kind = type(error).__name__
        raise AttachmentProblem(f": {name} is not a readable PDF ({kind})") from None
    text = "\n\n".join(page for page in pages if page)
    if not text.strip():
        raise AttachmentProblem(
            f": {name} is a PDF without text (a scan?): attach its text, or its pages as images"
        )
    return text


def from_bytes(name: str, data: bytes, media_type: str | None = None) -> Attachment:
    """An attachment of the bytes of a file called `name` (`media_type`: what the client
    said it is, a hint for a text file's type only)."""
    image = sniffed_image(data)
    if image is not None:
        if len(data) > limits.MAX_ATTACHMENT_IMAGE_BYTES:
            raise _size_line(name, "an image", len(data), limits.MAX_ATTACHMENT_IMAGE_BYTES)
        encoded = base64.b64encode(data).decode("ascii")
        return _attachment(name, image, data, data_base64=encoded)
    if data.startswith(b"%PDF-"):
        if len(data) > limits.MAX_ATTACHMENT_PDF_BYTES:
            raise _size_line(name, "a PDF", len(data), limits.MAX_ATTACHMENT_PDF_BYTES)
        text = pdf_text(name, data)
        return _attachment(name, PDF_TYPE, data, text=text).with_original(data)
    if len(data) > limits.MAX_ATTACHMENT_TEXT_BYTES:
        raise _size_line(name, "a text file", len(data), limits.MAX_ATTACHMENT_TEXT_BYTES)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        text = None
    if text is None or "\x00" in text:
        raise AttachmentProblem(
            f": {name} is a binary file that is neither a PDF nor an image (allowed: {ALLOWED})"
        )
    return _attachment(name, _text_type(name, media_type), data, text=text)


def from_text(name: str, text: str, media_type: str | None = None) -> Attachment:
    """An attachment of text a client sent as text (MCP)."""
    data = text.encode("utf-8")
    if len(data) > limits.MAX_ATTACHMENT_TEXT_BYTES:
        raise _size_line(name, "a text file", len(data), limits.MAX_ATTACHMENT_TEXT_BYTES)
    return _attachment(name, _text_type(name, media_type), data, text=text)


def from_base64(name: str, encoded: str, media_type: str | None = None) -> Attachment:
    """An attachment of a file's bytes in base64 (MCP, a data URL)."""
    most = largest_file()
    if len(encoded) > most * 4 // 3 + 4:
        raise _size_line(name, "a file", len(encoded) * 3 // 4, most)
    try:
        data = base64.b64decode("".join(encoded.split()), validate=True)
    except (binascii.Error, ValueError):
        raise AttachmentProblem(f": {name}: the data is not base64") from None
    return from_bytes(name, data, media_type)


def from_data_url(url: str, name: str | None, fallback: str) -> Attachment:
    """An attachment of a data URL (data:TYPE;base64,...); an http(s) URL is refused: the
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
        return from_bytes(shown, unquote_to_bytes(payload), media_type or None)
    if not name:
        suffix = mimetypes.guess_extension(media_type or "") or ""
        shown = clean_name(None, fallback + suffix)
    return from_base64(shown, payload, media_type or None)


def read_file(path: str | Path) -> Attachment:
    """An attachment of a file on disk (its size checked before it is read)."""
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
    return from_bytes(name, data)


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
    "AttachmentProblem",
    "from_base64",
    "from_bytes",
    "from_data_url",
    "from_text",
    "read_file",
]
