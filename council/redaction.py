"""Secrets kept out of every text that leaves a process, even in part.

A provider may echo the key it was sent, whole or in part, reversed or encoded, and a text
is cut in many places (a reply's size cap, an error's one line, a model name's length) or
shown while it streams. So every piece of MIN_PIECE characters of a secret, wherever it
starts in the secret, counts as the secret, and so does every such piece of the secret's
common encodings (`forms`): base64 (at each of the three byte alignments, standard and
URL-safe, without padding), hex (lower and upper case), URL encoding, and the secret
reversed. A secret shorter than MIN_PIECE counts whole. A piece found becomes REDACTED,
and so does every piece that overlaps or follows it, so that an echoed run is one
REDACTED. A text is redacted before it is cut; and a text still arriving is shown without
an ending that could begin a piece, until the next characters say it does not. A key cut
anywhere, or encoded, thus leaves no MIN_PIECE characters of it (or of its encoding) in a
row.

The pieces of all secrets are one Aho-Corasick automaton (the `ahocorasick_rs` package, a
binding of the Rust `aho-corasick` crate), built once per set of secrets: a text is read
once whatever the number of pieces, and the cost is linear in the text (bench.redaction).

    redactor = Redactor([key, ...])
    redactor.redact(text)          # every piece of every secret and its encodings replaced
    redactor.settled(text)         # and without an ending that may begin one (live text)
    redactor.cut(text, limit)      # redacted, then at most `limit` characters

`redact_logs(secrets)` makes every log record of the process, at every level and from
every library, pass through the same rule before any handler sees it.
"""

from __future__ import annotations

import base64
import functools
import logging
import re
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, quote_plus

from ahocorasick_rs import AhoCorasick, MatchKind

REDACTED = "[redacted]"
# The fewest characters in a row of a secret (or of its encoding) that count as the secret.
MIN_PIECE = 8
_ESCAPE = re.compile(r"%[0-9A-F]{2}")


def forms(secret: str) -> list[str]:
    """The secret as a provider may echo it: as it is, reversed, and its UTF-8 bytes in
    base64 (each of the three byte alignments, so that a part of the key that starts
    anywhere is found, in both alphabets, without padding), hex in either case, and URL
    encoding (with upper or lower case escapes)."""
    data = secret.encode("utf-8")
    found = [secret, secret[::-1]]
    for skip in range(3):
        for encode in (base64.b64encode, base64.urlsafe_b64encode):
            found.append(encode(data[skip:]).decode("ascii").rstrip("="))
    found += [data.hex(), data.hex().upper()]
    # Every reserved character escaped, all but '/' (a path's), and a form's ('+' for space).
    for quoted in (quote(secret, safe=""), quote(secret), quote_plus(secret)):
        found += [quoted, _ESCAPE.sub(lambda escape: escape[0].lower(), quoted)]
    return [form for form in dict.fromkeys(found) if form]


def pieces(secret: str) -> set[str]:
    """What counts as the secret: every MIN_PIECE characters in a row of each of its forms
    (the whole secret when it is shorter)."""
    if len(secret) < MIN_PIECE:
        return {secret}
    return {
        form[at : at + MIN_PIECE]
        for form in forms(secret)
        for at in range(len(form) - MIN_PIECE + 1)
    }


@dataclass(frozen=True)
class _Matcher:
    """What finds the pieces of a set of secrets."""

    automaton: AhoCorasick | None
    pieces: frozenset[str]
    # The pieces' lengths, longest first (MIN_PIECE, and any shorter secret's).
    sizes: tuple[int, ...]
    # Every start of a piece shorter than it (what a text still arriving may end in).
    starts: frozenset[str]
    widest_start: int
    # How far past a cut a secret (or an encoding of it) that began before it may reach.
    longest: int


@functools.lru_cache(maxsize=64)
def _matcher(secrets: tuple[str, ...]) -> _Matcher:
    """Built once per set of secrets in a process (a tool's redactor is made per call)."""
    found = sorted({piece for secret in secrets for piece in pieces(secret)})
    starts = frozenset(piece[:size] for piece in found for size in range(1, len(piece)))
    return _Matcher(
        automaton=AhoCorasick(found, matchkind=MatchKind.LeftmostLongest) if found else None,
        pieces=frozenset(found),
        sizes=tuple(sorted({len(piece) for piece in found}, reverse=True)),
        starts=starts,
        widest_start=max(map(len, starts), default=0),
        longest=max((len(form) for secret in secrets for form in forms(secret)), default=0),
    )


class Redactor:
    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self.secrets = tuple(sorted({s for s in secrets if s}, key=lambda s: (-len(s), s)))
        self._matcher = _matcher(self.secrets)
        self.longest = self._matcher.longest

    def __bool__(self) -> bool:
        return bool(self.secrets)

    def _spans(self, text: str) -> list[tuple[int, int]]:
        """Where the pieces are in the text, overlapping and adjacent ones merged, in order.

        The automaton finds the leftmost pieces that do not overlap (a long echo is one
        match every MIN_PIECE characters, not one a character); the pieces that begin
        inside a match are looked up beside it (fewer than MIN_PIECE starts, whatever the
        number of pieces), and the furthest end among them is the span's."""
        matcher = self._matcher
        assert matcher.automaton is not None
        spans: list[tuple[int, int]] = []
        for _, start, stop in matcher.automaton.find_matches_as_indexes(text):
            end = stop
            for at in range(stop - 1, start, -1):
                if at + matcher.sizes[0] <= end:
                    break
                for size in matcher.sizes:
                    if at + size > end and text[at : at + size] in matcher.pieces:
                        end = at + size
                        break
            if spans and start <= spans[-1][1]:
                spans[-1] = (spans[-1][0], max(end, spans[-1][1]))
            else:
                spans.append((start, end))
        return spans

    def _shown(self, text: str, upto: int) -> str:
        """The text redacted, up to the character `upto` of the text (a piece that begins
        before it is REDACTED whole)."""
        if self._matcher.automaton is None or not text:
            return text[:upto]
        parts: list[str] = []
        done = 0
        for start, stop in self._spans(text):
            if start >= upto:
                break
            parts += [text[done:start], REDACTED]
            done = stop
        if done < upto:
            parts.append(text[done:upto])
        return "".join(parts)

    def redact(self, text: str) -> str:
        """The text with every piece of a secret, or of its encodings, replaced by
        REDACTED."""
        return self._shown(text, len(text))

    def unsettled(self, text: str) -> int:
        """How many characters at the end of the text could be the start of a piece (at
        most MIN_PIECE - 1: as many look-ups, whatever the number of pieces)."""
        starts = self._matcher.starts
        for size in range(min(self._matcher.widest_start, len(text)), 0, -1):
            if text[-size:] in starts:
                return size
        return 0

    def settled(self, text: str) -> str:
        """Text that is still arriving, as it may be shown: redacted, and without an ending
        that the next characters could make a piece. What it shows of a text only grows
        as the text does."""
        return self._shown(text, len(text) - self.unsettled(text))

    def cut(self, text: str, limit: int) -> str:
        """At most `limit` characters of the text, redacted before the cut (only as much of
        the text is read as the cut and the longest secret need)."""
        window = text[: limit + self.longest]
        clean = self.redact(window) if len(window) == len(text) else self.settled(window)
        return clean[:limit]


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
