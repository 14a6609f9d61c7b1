"""Server-sent events as OpenAI-compatible servers send them.

Comment lines (": OPENROUTER PROCESSING") are keep-alives. An event is its `data:`
lines joined by newlines and ends at a blank line; servers that omit the blank line
between one-line events are common, so an event is also complete as soon as its data
parses as JSON or is the `[DONE]` marker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from activities.errors import CallFailure, ErrorType, one_line
from council.redaction import Redactor

DONE = "[DONE]"


class Done:
    """The end-of-stream marker."""


DONE_EVENT = Done()


QUOTED_CHARS = 120


class SSEDecoder:
    def __init__(self, redactor: Redactor | None = None) -> None:
        """`redactor`: the secrets kept out of the stream's text that an error quotes."""
        self.redactor = redactor or Redactor()
        self._data: list[str] = []
        self.events = 0
        self.comments = 0

    def feed(self, line: str) -> Iterator[dict[str, Any] | Done]:
        """The events completed by one line (without its line break)."""
        if line.startswith(":"):
            self.comments += 1
            return
        if not line.strip():
            if self._data:
                yield self._complete(final=True)
            return
        name, _, value = line.partition(":")
        if name != "data":
            return  # event:, id:, retry: and unknown fields carry nothing we use
        self._data.append(value.removeprefix(" "))
        event = self._complete(final=False)
        if event is not None:
            yield event

    def close(self) -> None:
        """At the end of the stream: an event cut off mid-way means a truncated stream."""
        if self._data:
            pending = self._quote("\n".join(self._data))
            self._data = []
            raise CallFailure(
                ErrorType.TRUNCATED_STREAM, f"the stream ended inside an event ({pending!r})"
            )

    def _complete(self, final: bool) -> Any:
        text = "\n".join(self._data)
        if text.strip() == DONE:
            self._data = []
            self.events += 1
            return DONE_EVENT
        try:
            event = json.loads(text)
        except RecursionError:
            self._data = []
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE,
                f"a stream event is JSON nested too deeply to read ({len(text):,} characters: "
                f"{self._quote(text)!r})",
            ) from None
        except ValueError:
            if not final:
                return None
            self._data = []
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE,
                f"a stream event is not JSON ({self._quote(text)!r})",
            ) from None
        self._data = []
        self.events += 1
        if not isinstance(event, dict):
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE,
                f"a stream event is not a JSON object ({self._quote(text)!r})",
            )
        return event

    def _quote(self, text: str) -> str:
        return one_line(self.redactor.cut(text, 4 * QUOTED_CHARS), QUOTED_CHARS)
