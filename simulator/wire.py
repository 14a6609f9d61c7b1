"""The OpenAI chat-completions wire format, as the simulator writes it."""

from __future__ import annotations

import json
import math
import re
from http import HTTPStatus
from typing import Any

from council.refinement import parse_refinement
from council.reviews import parse_review

SYSTEM_FINGERPRINT = "council-simulator"
OWNER = "council-simulator"
SIMULATED_HEADER = (b"x-council-simulator", b"simulated")


def refinement_text(refine_format: str, data: dict[str, Any]) -> str:
    """A structured refinement (accepted and rejected critiques, reasoning, answer,
    confidence) in one of the forms models use."""
    text = json.dumps(data, indent=2, ensure_ascii=False)
    if refine_format == "fenced":
        return f"```json\n{text}\n```"
    if refine_format == "preamble":
        return f"Here is my refined answer, addressing the peer feedback:\n\n{text}"
    return text


def review_text(
    style: str,
    who: str,
    notes: list[tuple[str, int, str]],
    ranking: list[tuple[str, int, str]],
) -> str:
    """A simulated review: a paragraph per answer (label, rating, note), then the ranking
    (label, rating, reason), best first; in markdown headers and "N out of 5" for the
    "headers" style, in bold labels and "N/5" otherwise."""
    if style == "headers":
        head = f"## Peer review (simulated, by {who})"
        paragraphs = [
            f"### {label}\n**{rating} out of 5.** {note}" for label, rating, note in notes
        ]
        heading = "## Final ranking"
        lines = [f"**{label}**: {rating} out of 5, {why}" for label, rating, why in ranking]
    else:
        head = f"(Simulated review by {who}.)"
        paragraphs = [f"**{label}** Rating: {rating}/5. {note}" for label, rating, note in notes]
        heading = "FINAL RANKING:"
        lines = [f"{label} ({rating}/5) - {why}" for label, rating, why in ranking]
    numbered = [f"{i}. {line}" for i, line in enumerate(lines, start=1)]
    return "\n\n".join([head, *paragraphs, heading]) + "\n" + "\n".join(numbered)


def review_json(review: str, shown: list[str]) -> str:
    """A simulated review as the JSON the review schema asks for: each shown label's
    critique and rating, then the ranking (read from the review's own text)."""
    parsed = parse_review(review, shown)
    data: dict[str, Any] = {
        label: {"critique": parsed.critiques.get(label, ""), "rating": round(rating)}
        for label, rating in parsed.ratings.items()
    }
    data["ranking"] = parsed.ranking
    return json.dumps(data, ensure_ascii=False)


def refinement_json(reply: str) -> str:
    """A simulated refinement as the JSON the refinement schema asks for."""
    parsed = parse_refinement(reply)
    data = parsed.model_dump(exclude={"structured"})
    # Every field the schema requires, as a schema-bound model gives them.
    data["refinement_reasoning"] = parsed.refinement_reasoning or "(simulated) weighed the feedback"
    data["improvement_explanation"] = parsed.improvement_explanation or ""
    data["confidence"] = 0.7 if parsed.confidence is None else parsed.confidence
    if parsed.changed_from_original is None:
        data["changed_from_original"] = True
    return json.dumps(data, ensure_ascii=False)


_JSON_EXAMPLE = re.compile(r"^\{\n.*?\n\}$", re.DOTALL | re.MULTILINE)
_TAGGED = re.compile(r"<(\w+)[^>]*>.*?</\1>", re.DOTALL)


def echo(prompt: str) -> str:
    """What a small model that echoes its prompt replies: the prompt's JSON example when it
    has one (placeholders and all), else its last paragraph of instructions."""
    example = _JSON_EXAMPLE.search(prompt)
    if example:
        return example.group(0)
    paragraphs = [p.strip() for p in _TAGGED.sub("", prompt).split("\n\n")]
    instructions = [p for p in paragraphs if len(p) > 60 and not p.isupper()]
    return instructions[-1] if instructions else prompt.strip()


def tokens(text: str) -> int:
    return math.ceil(len(text) / 4)


def usage(
    prompt_texts: list[str], content: str, cost_per_million_tokens: float | None = 0.0
) -> dict[str, Any]:
    """OpenRouter's usage object. The simulator is free by default (a reported cost of 0);
    a price makes it report one, and None leaves the cost out, as most providers do."""
    prompt = max(1, sum(tokens(t) for t in prompt_texts))
    completion = tokens(content)
    data: dict[str, Any] = {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }
    if cost_per_million_tokens is not None:
        data["cost"] = round((prompt + completion) * cost_per_million_tokens / 1_000_000, 10)
    return data


def completion(
    reply_id: str,
    created: int,
    model: str,
    content: str,
    finish_reason: str,
    usage: dict[str, Any],
    tool_calls: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """A non-streamed reply: its text, or (with tool_calls) the tools it asks for."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
    return {
        "id": reply_id,
        "object": "chat.completion",
        "created": created,
        "model": model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": finish_reason,
            }
        ],
        "usage": usage,
    }


def chunk(
    reply_id: str,
    created: int,
    model: str,
    delta: dict[str, Any] | None = None,
    finish_reason: str | None = None,
    usage: dict[str, Any] | None = None,
) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": reply_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "system_fingerprint": SYSTEM_FINGERPRINT,
        "choices": []
        if delta is None
        else [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }
    if usage is not None:
        data["usage"] = usage
    return data


def sse(data: dict[str, Any] | str) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    return f"data: {payload}\n\n".encode()


def error(status: int, message: str) -> dict[str, Any]:
    """OpenRouter's error shape: {"error": {"code", "message", "metadata"}}."""
    return {
        "error": {
            "code": status,
            "message": message,
            "type": _error_type(status),
            "metadata": {"provider_name": OWNER},
        }
    }


def _error_type(status: int) -> str:
    if status == 429:
        return "rate_limit_error"
    if status in (401, 403):
        return "authentication_error"
    if status < 500:
        return "invalid_request_error"
    return "server_error"


def phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def whole_words(text: str, most: int) -> str:
    """The longest start of the text, at most `most` characters, that ends where a word
    ends (as a model cut by its token limit stops after a token, not inside a letter run);
    only a first word longer than `most` is cut inside itself."""
    if len(text) <= most:
        return text
    head = text[: most + 1]
    end = max((i for i, c in enumerate(head) if c.isspace()), default=-1)
    return head[:end].rstrip() if head[:end].strip() else text[:most]


def pieces(text: str, size: int) -> list[str]:
    """Split text into stream deltas of about `size` characters, at spaces where possible."""
    out: list[str] = []
    start = 0
    while start < len(text):
        end = min(len(text), start + size)
        if end < len(text):
            space = text.rfind(" ", start + 1, end)
            if space > start:
                end = space + 1
        out.append(text[start:end])
        start = end
    return out
