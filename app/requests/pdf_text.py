"""A PDF's text, read in a process of its own within limits, so that a small file that
inflates into a long read (a "PDF bomb") costs one bounded process, never the time of the
server, CLI or MCP server that received it.

    read(data)  ->  Outcome: its text, or the limit or problem that stopped the reading

The process (bounded.process, its work `answer`) is this Python, isolated and given no
environment at all, so nothing a PDF makes pypdf do can see a key. Before it reads a byte
it lowers its own priority and sets its limits (council.limits): CPU time (the kernel
stops it at PDF_READ_CPU_SECONDS), address space (PDF_READ_MEMORY_BYTES) and no core file;
pypdf decodes no stream past MAX_PDF_STREAM_BYTES; the pages are read while their text
fits MAX_ATTACHMENT_TEXT_BYTES. The caller kills it past PDF_READ_SECONDS on the clock.
It answers on stdout, one JSON object.

`read` blocks until the process ends: a server calls it from a thread (app.requests.attachments
reads files apart from the event loop).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from bounded import process
from council import limits


@dataclass(frozen=True)
class Budget:
    """What reading one PDF may take."""

    cpu_seconds: int = limits.PDF_READ_CPU_SECONDS
    memory_bytes: int = limits.PDF_READ_MEMORY_BYTES
    seconds: float = limits.PDF_READ_SECONDS
    stream_bytes: int = limits.MAX_PDF_STREAM_BYTES
    text_bytes: int = limits.MAX_ATTACHMENT_TEXT_BYTES


@dataclass(frozen=True)
class Outcome:
    """What reading a PDF gave: its text, or why there is none.

    problem: "encrypted" (a password is needed), "unreadable" (`detail`: the reader's
    error), "stream" (a stream inflates past the budget's stream_bytes), "limit" (another of
    the reader's own limits; `detail` says which), "text" (the text outgrew text_bytes;
    `detail`: the bytes read and the pages they came from), "memory", "cpu", "time" (the
    budget's), or "stopped" (the process ended without an answer)."""

    text: str | None = None
    problem: str | None = None
    detail: str = ""


def read(data: bytes, budget: Budget = Budget()) -> Outcome:
    """The text of the PDF `data`, read in a process of its own within `budget`."""
    bounds = process.Limits(budget.cpu_seconds, budget.memory_bytes, budget.seconds)
    ended = process.run("app.requests.pdf_text:answer", data, bounds, json.dumps(asdict(budget)))
    if ended.stopped in ("memory", "cpu", "time"):
        return Outcome(problem=ended.stopped)
    try:
        return Outcome(**json.loads(ended.output or b""))
    except (ValueError, TypeError):
        return Outcome(problem="stopped", detail=ended.detail or "no answer")


def answer(data: bytes, argument: str) -> bytes:
    """The reading process's work: the PDF in, its Outcome as JSON out (the budget in
    `argument`)."""
    budget = Budget(**json.loads(argument))
    return json.dumps(asdict(_outcome(data, budget))).encode()


def _outcome(data: bytes, budget: Budget) -> Outcome:
    import io
    import logging

    import pypdf
    from pypdf.errors import LimitReachedError, PyPdfError

    # pypdf warns about every oddity of a PDF it can still read.
    logging.getLogger("pypdf").setLevel(logging.CRITICAL)
    cap = budget.stream_bytes
    pypdf.overwrite_configuration(**_stream_caps(cap))
    try:
        reader = pypdf.PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            return Outcome(problem="encrypted")
        pages: list[str] = []
        size = 0
        for page in reader.pages:
            text = (page.extract_text() or "").strip()
            if text:
                pages.append(text)
                size += len(text.encode("utf-8")) + 2
            if size > budget.text_bytes:
                return Outcome(problem="text", detail=f"{size} {len(pages)}")
    except LimitReachedError as error:
        said = str(error).lower()
        if "decompress" in said or "array-based stream" in said:
            return Outcome(problem="stream")
        return Outcome(problem="limit", detail=" ".join(str(error).split())[:200])
    except (PyPdfError, ValueError, KeyError, TypeError, OSError, RecursionError) as error:
        return Outcome(problem="unreadable", detail=type(error).__name__)
    return Outcome(text="\n\n".join(pages))


def _stream_caps(cap: int) -> dict[str, Any]:
    """pypdf's limits on what a stream may decode to, all at `cap`."""
    names = (
        "zlib_maximum_output_length",
        "lzw_maximum_output_length",
        "run_length_maximum_output_length",
        "brotli_maximum_output_length",
        "jbig2_maximum_output_length",
        "array_based_stream_maximum_output_length",
        "image_maximum_buffer_size",
    )
    return dict.fromkeys(names, cap)
