"""One reply as it arrives: content (capped), finish reason, usage, who answered.

The same accumulator reads streamed chunks and whole (non-streamed) completions, so both
paths obey the same size cap and the same error rules.
"""

from __future__ import annotations

import json
from typing import Any

from activities.errors import (
    CallFailure,
    ErrorType,
    describe_error_object,
    error_type_for_status,
    one_line,
    status_of_error_object,
)
from council.calls import CallProgress, ModelCall, TokenUsage
from council.changes import estimate_tokens
from council.redaction import Redactor
from council.structured import partial_answer
from council.tools import MAX_CALLS_PER_REPLY, ToolCall

MAX_SERVED_BY_CHARS = 200
MAX_FINISH_REASON_CHARS = 40
# A tool call as a provider writes it: its id and name are short, its arguments bounded
# (beyond this they are cut, and no longer JSON: the call then fails as such).
MAX_TOOL_ID_CHARS = 200
MAX_TOOL_NAME_CHARS = 64
MAX_TOOL_ARGUMENT_CHARS = 32_000
# Tool calls read from one reply (a reply asking for more is cut to these; the workflow
# runs at most MAX_CALLS_PER_REPLY of them).
MAX_TOOL_CALLS_READ = 4 * MAX_CALLS_PER_REPLY


def _text_of(content: Any) -> str:
    """Message content: a string, or a list of parts ({"type": "text", "text": ...})."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text") or "" if isinstance(part, dict) else str(part) for part in content
        )
    return ""


def provider_error(
    error: Any, default_status: int, where: str, redactor: Redactor | None = None
) -> CallFailure:
    """An error object sent inside a reply (a mid-stream event, or a 200 with an error body)."""
    status = status_of_error_object(error, default_status)
    kind = error_type_for_status(status)
    said = (redactor or Redactor()).redact(describe_error_object(error))
    message = one_line(said, 400) or "no error message"
    return CallFailure(kind, f"provider error {where} (code {status}): {message}", status=status)


def _utf8_prefix(text: str, size: int) -> str:
    """At most `size` UTF-8 bytes of the text, cut on a character boundary."""
    data = text.encode("utf-8")
    return text if len(data) <= size else data[:size].decode("utf-8", "ignore")


class Completion:
    """The reply of one call as it arrives. Its texts are redacted (council.redaction)
    before they are cut: the content is kept up to the cap and the longest secret beyond
    it, so that a key that straddles the cap is found whole."""

    def __init__(self, max_content_bytes: int, redactor: Redactor | None = None) -> None:
        self.max_content_bytes = max(1, max_content_bytes)
        self.redactor = redactor or Redactor()
        longest = self.redactor.secrets[0].encode("utf-8") if self.redactor else b""
        self._room = self.max_content_bytes + len(longest)
        # The call's tools were left out: its provider takes none for the model.
        self.tools_refused = False
        self.reset()

    def reset(self) -> None:
        """Empty, for the same call asked again (another form of reply, or unstreamed)."""
        self._parts: list[str] = []
        self.content_bytes = 0
        # No more content is read: the cap (and the longest secret past it) is reached, or
        # the body's own cap.
        self.cut = False
        self.finish_reason: str | None = None
        self.served_by: str | None = None
        self.usage: dict[str, Any] | None = None
        self.done = False
        # Progress, for heartbeats.
        self.received_bytes = 0
        self.chunks = 0
        self.streaming = False
        self._final_for: tuple[int, bool] | None = None
        self._final_text, self._final_cut = "", False
        # Tool calls by their index in the reply: id, name and the arguments' pieces.
        self._tools: dict[int, dict[str, Any]] = {}

    def _final(self) -> tuple[str, bool]:
        """The text redacted then cut to the cap, and whether it was cut; worked out once
        for what has arrived (a reply of megabytes is read after its call, more than once)."""
        key = (len(self._parts), self.cut)
        if self._final_for != key:
            raw = "".join(self._parts)
            # What was not read may have finished a piece of a secret that this text begins.
            text = self.redactor.settled(raw) if self.cut else self.redactor.redact(raw)
            kept = _utf8_prefix(text, self.max_content_bytes)
            self._final_text, self._final_cut = kept, self.cut or len(kept) < len(text)
            self._final_for = key
        return self._final_text, self._final_cut

    @property
    def content(self) -> str:
        """The reply's text: redacted, then cut to the cap (on a character boundary)."""
        return self._final()[0]

    @property
    def truncated(self) -> bool:
        """Whether the reply's text was cut: more came than the cap."""
        return self._final()[1]

    def progress(self, call: ModelCall) -> CallProgress:
        """The call so far, for a heartbeat: the counts and the text received, without an
        ending that the next characters could make the start of a secret."""
        text = self.redactor.settled("".join(self._parts))
        if call.response_format is not None and call.response_format.own == "synthesis":
            text = partial_answer(text)  # the answer as it is written, not its JSON
        return CallProgress(
            model=call.model,
            stage=call.stage,
            round=call.round,
            received_bytes=self.received_bytes,
            chunks=self.chunks,
            content_bytes=self.content_bytes,
            text=_utf8_prefix(text, self.max_content_bytes),
        )

    def add_content(self, text: str) -> None:
        if self.cut or not text:
            return
        data = text.encode("utf-8")
        room = self._room - self.content_bytes
        if len(data) > room:
            # Cut on a character boundary: drop a partial multi-byte sequence at the end.
            text = data[:room].decode("utf-8", "ignore")
            self.cut = True
        self._parts.append(text)
        self.content_bytes += len(text.encode("utf-8"))

    def _add_tool_calls(self, calls: Any) -> None:
        """Tool calls, whole (a reply) or in pieces (stream deltas, by their index)."""
        if not isinstance(calls, list):
            return
        for position, call in enumerate(calls):
            if not isinstance(call, dict):
                continue
            index = call.get("index", position)
            if not isinstance(index, int) or isinstance(index, bool):
                continue
            if index not in self._tools and len(self._tools) >= MAX_TOOL_CALLS_READ:
                continue
            entry = self._tools.setdefault(index, {"id": "", "name": "", "arguments": []})
            if isinstance(call.get("id"), str) and not entry["id"]:
                entry["id"] = call["id"][:MAX_TOOL_ID_CHARS]
            function = call.get("function")
            if not isinstance(function, dict):
                continue
            if isinstance(function.get("name"), str) and not entry["name"]:
                entry["name"] = function["name"][:MAX_TOOL_NAME_CHARS]
            arguments = function.get("arguments")
            if isinstance(arguments, dict):  # some servers send an object, not its text
                arguments = json.dumps(arguments)
            if isinstance(arguments, str):
                room = MAX_TOOL_ARGUMENT_CHARS - sum(map(len, entry["arguments"]))
                entry["arguments"].append(arguments[: max(0, room)])

    @property
    def tool_calls(self) -> list[ToolCall]:
        """The tools the reply asks for, in order, their texts redacted."""
        calls = []
        for index, entry in sorted(self._tools.items()):
            if not entry["name"]:
                continue
            calls.append(
                ToolCall(
                    id=self.redactor.redact(entry["id"]) or f"call_{index}",
                    name=self.redactor.redact(entry["name"]),
                    arguments=self.redactor.redact("".join(entry["arguments"])) or "{}",
                )
            )
        return calls

    def _note_model(self, data: dict[str, Any]) -> None:
        model = data.get("model")
        if self.served_by is None and isinstance(model, str) and model:
            self.served_by = self.redactor.cut(model, MAX_SERVED_BY_CHARS)

    def _note_finish(self, choice: dict[str, Any]) -> None:
        """The finish reason a provider names: a word, but any text it likes (kept short)."""
        reason = choice.get("finish_reason")
        if reason:
            self.finish_reason = self.redactor.cut(str(reason), MAX_FINISH_REASON_CHARS)

    def _note_usage(self, data: dict[str, Any]) -> None:
        usage = data.get("usage")
        if isinstance(usage, dict) and usage:
            self.usage = usage

    def apply_chunk(self, chunk: dict[str, Any]) -> None:
        """One streamed `chat.completion.chunk` (or an error event)."""
        self.chunks += 1
        if chunk.get("error"):
            raise provider_error(chunk["error"], 502, "mid-stream", self.redactor)
        self._note_model(chunk)
        self._note_usage(chunk)
        choices = chunk.get("choices")
        if choices is None:
            return  # a usage-only or bookkeeping chunk
        if not isinstance(choices, list):
            raise CallFailure(
                ErrorType.MALFORMED_RESPONSE, "a stream chunk's choices are not a list"
            )
        for choice in choices[:1]:
            if not isinstance(choice, dict):
                raise CallFailure(ErrorType.MALFORMED_RESPONSE, "a stream choice is not an object")
            delta = choice.get("delta") or choice.get("message") or {}
            if isinstance(delta, dict):
                self.add_content(_text_of(delta.get("content")))
                self._add_tool_calls(delta.get("tool_calls"))
            self._note_finish(choice)
        if self.finish_reason == "error":
            raise CallFailure(
                ErrorType.PROVIDER_UNAVAILABLE,
                "the provider ended the stream with finish_reason=error",
            )

    def apply_completion(self, body: Any) -> None:
        """A whole `chat.completion` object (the non-streaming reply)."""
        if not isinstance(body, dict):
            raise CallFailure(ErrorType.MALFORMED_RESPONSE, "the reply is not a JSON object")
        if body.get("error"):
            raise provider_error(body["error"], 502, "in the reply body", self.redactor)
        self._note_model(body)
        self._note_usage(body)
        choices = body.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise CallFailure(ErrorType.MALFORMED_RESPONSE, "the reply has no choices")
        choice = choices[0]
        message = choice.get("message") or {}
        text = _text_of(message.get("content")) if isinstance(message, dict) else ""
        self.add_content(text or _text_of(choice.get("text")))
        if isinstance(message, dict):
            self._add_tool_calls(message.get("tool_calls"))
        self._note_finish(choice)
        self.chunks += 1
        self.done = True


def _count(usage: dict[str, Any], *keys: str) -> int | None:
    for key in keys:
        value = usage.get(key)
        if isinstance(value, bool):
            continue
        if isinstance(value, int | float):
            return int(value)
    return None


def token_usage(raw: dict[str, Any] | None, prompt_texts: list[str], content: str) -> TokenUsage:
    """The provider's usage as reported; an estimate (flagged) only when it reported none."""
    prompt = completion = None
    if raw:
        prompt = _count(raw, "prompt_tokens", "input_tokens")
        completion = _count(raw, "completion_tokens", "output_tokens")
    if prompt is None and completion is None:
        prompt_estimate = estimate_tokens(*prompt_texts)
        completion_estimate = estimate_tokens(content)
        return TokenUsage(
            prompt_tokens=prompt_estimate,
            completion_tokens=completion_estimate,
            total_tokens=prompt_estimate + completion_estimate,
            estimated=True,
        )
    prompt, completion = prompt or 0, completion or 0
    total = _count(raw or {}, "total_tokens")
    cost = (raw or {}).get("cost")
    return TokenUsage(
        prompt_tokens=prompt,
        completion_tokens=completion,
        total_tokens=total if total is not None else prompt + completion,
        cost_usd=float(cost)
        if isinstance(cost, int | float) and not isinstance(cost, bool)
        else None,
    )
