"""Secrets kept out of every text that leaves a process, even in part.

A provider may echo the key it was sent, and a text is cut in many places (a reply's size
cap, an error's one line, a model name's length) or shown while it streams. So any start
of a secret of MIN_PIECE characters or more counts as the secret (a shorter secret counts
whole) and becomes REDACTED, as far as the text goes on matching it; a text is redacted
before it is cut; and a text still arriving is shown without an ending that could be the
start of a secret, until the next characters say it is not. A key cut anywhere thus
leaves no MIN_PIECE characters of it in a row.

    redactor = Redactor([key, ...])
    redactor.redact(text)          # every secret, and every start of one, replaced
    redactor.settled(text)         # and without an ending that may begin one (live text)
    redactor.cut(text, limit)      # redacted, then at most `limit` characters

`redact_logs(secrets)` makes every log record of the process, at every level and from
every library, pass through the same rule before any handler sees it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

REDACTED = "[redacted]"
# The fewest characters of a secret's start that count as the secret.
MIN_PIECE = 8


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(sorted({s for s in secrets if s}, key=len, reverse=True))
        # How far past a cut a secret that began before it may reach.
        self.longest = len(self.secrets[0]) if self.secrets else 0

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def redact(self, text: str) -> str:
        """The text with every secret, and every start of one, replaced by REDACTED."""
        if not self.secrets or not text:
            return text
        spans: list[tuple[int, int]] = []
        for secret in self.secrets:
            start = text.find(secret[:MIN_PIECE])
            while start >= 0:
                spans.append((start, start + _common_start(text, start, secret)))
                start = text.find(secret[:MIN_PIECE], start + 1)
        if not spans:
            return text
        spans.sort()
        parts: list[str] = []
        done = 0
        begin, end = spans[0]
        for start, stop in spans[1:]:
            if start <= end:
                end = max(end, stop)
                continue
            parts += [text[done:begin], REDACTED]
            done, begin, end = end, start, stop
        parts += [text[done:begin], REDACTED, text[end:]]
        return "".join(parts)

    def unsettled(self, text: str) -> int:
        """How many characters at the end of the text could be the start of a secret."""
        for secret in self.secrets:
            if secret[0] in text[-len(secret) :]:
                break
        else:
            return 0
        most = 0
        for secret in self.secrets:
            for size in range(min(len(secret) - 1, len(text)), most, -1):
                if text.endswith(secret[:size]):
                    most = size
                    break
        return most

    def settled(self, text: str) -> str:
        """Text that is still arriving, as it may be shown: redacted, and without an ending
        that the next characters could make a secret's start."""
        clean = self.redact(text)
        return clean[: len(clean) - self.unsettled(clean)]

    def cut(self, text: str, limit: int) -> str:
        """At most `limit` characters of the text, redacted before the cut (only as much of
        the text is read as the cut and the longest secret need)."""
        window = text[: limit + self.longest]
        clean = self.redact(window)
        if len(window) < len(text):
            clean = clean[: len(clean) - self.unsettled(clean)]
        return clean[:limit]


def _common_start(text: str, at: int, secret: str) -> int:
    """How many characters of the text from `at` match the start of the secret."""
    size = min(MIN_PIECE, len(secret))
    while size < len(secret) and at + size < len(text) and text[at + size] == secret[size]:
        size += 1
    return size


class _LogRedaction:
    """The log record factory that redacts every record as it is made: its message and
    arguments, its traceback and its stack."""

    def __init__(self) -> None:
        self.redactor = Redactor()
        self._secrets: set[str] = set()
        self._lock = threading.Lock()
        self._make = logging.getLogRecordFactory()
        logging.setLogRecordFactory(self.record)

    def add(self, secrets: Iterable[str]) -> None:
        with self._lock:
            new = {s for s in secrets if s} - self._secrets
            if new:
                self._secrets |= new
                self.redactor = Redactor(self._secrets)

    def record(self, *args: Any, **kwargs: Any) -> logging.LogRecord:
        record = self._make(*args, **kwargs)
        redactor = self.redactor
        if not redactor:
            return record
        try:
            message = record.getMessage()
            clean = redactor.redact(message)
        except Exception:  # a format that does not fit its arguments: shown as it came
            message = ""
            clean = redactor.redact(f"{record.msg} {record.args!r}")
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_info and record.exc_info[0] is not None:
            trace = logging.Formatter().formatException(record.exc_info)
            record.exc_text = redactor.redact(trace)
        if record.stack_info:
            record.stack_info = redactor.redact(record.stack_info)
        return record


_LOGS: _LogRedaction | None = None


def redact_logs(secrets: Iterable[str]) -> None:
    """From now on, every log record of this process has these secrets (and those given
    before) redacted as it is made."""
    global _LOGS
    if _LOGS is None:
        _LOGS = _LogRedaction()
    _LOGS.add(secrets)
