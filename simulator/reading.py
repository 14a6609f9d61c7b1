"""What a simulated model reads in a prompt: the stage, the question and the framed texts.

The openings are council.prompts' own constants; the rest follows the layout of the
prompts that module builds. Anything unrecognised is a stage 1 question.
"""

from __future__ import annotations

import base64
import hashlib
import re
from dataclasses import dataclass, field

from council.attachments import ATTACHMENTS_HEADER, UNSEEN_IMAGE
from council.calls import Stage
from council.prompts import (
    CHAIRMAN_OPENING,
    CHECK_OPENING,
    CONTEXT_OPENING,
    FOLLOW_UP_HEADER,
    INSTRUCTIONS_HEADER,
    QUESTION_HEADER,
    REFINE_OPENING,
    REVIEW_OPENING,
    USER_CRITIQUE_HEADER,
)
from council.steering import USER

_LENGTH_NOTE = re.compile(r"\s*\(Keep your reply under about [\d,]+ words\.\)\s*$")
_REVIEW_QUESTION = re.compile(
    r"QUESTION:\n(.*?)\n\n(?:Judge the answers on these criteria:|Below are the other)", re.DOTALL
)
_CHECK_QUESTION = re.compile(r"QUESTION:\n(.*?)\n\nBelow are the members' independent", re.DOTALL)
_REFINE_QUESTION = re.compile(
    r"QUESTION: (.*?)\n(?:\nThe evaluation criteria were:.*?\n)?\nYOUR ORIGINAL RESPONSE:",
    re.DOTALL,
)
_CHAIRMAN_QUESTION = re.compile(r"QUESTION:\n(.*?)\n\nTHE COUNCIL'S FINAL ANSWERS", re.DOTALL)
_RESPONSE_FRAME = re.compile(r'<response label="([^"]+)">\n(.*?)\n</response>', re.DOTALL)
_ORIGINAL_FRAME = re.compile(r"<original>\n(.*?)\n</original>", re.DOTALL)
_ANSWER_FRAME = re.compile(
    r'<answer model="([^"]*)" standing="([^"]*)">\n(.*?)\n</answer>', re.DOTALL
)
_FEEDBACK = re.compile(r"PEER FEEDBACK:[^\n]*\n(.*?)\n\n---\n", re.DOTALL)
# A peer's critique, or the user's.
_HEAD = re.compile(
    r"^(?:Peer evaluation from (.+?)(?: \(rated your answer ([\d.]+)/5\))?:|"
    + re.escape(USER_CRITIQUE_HEADER)
    + r")$",
    re.MULTILINE,
)
_RATING_LINE = re.compile(r"^\s*Rating of your answer: ([\d.]+)/5\s*\n?")
# A critique's text in its frame; what is inside is never read as a heading.
_CRITIQUE_FRAME = re.compile(r"\A<critique>\n(.*?)\n</critique>", re.DOTALL)
_MEAN_RATING = re.compile(r"mean peer rating ([\d.]+)/5")
# A follow-up's conversation so far: read past it, never as the question.
_CONVERSATION = re.compile(r"<conversation>\n.*?\n</conversation>\n\n", re.DOTALL)
# The user's attachments, before a stage's prompt: read past them too.
_ATTACHMENTS = re.compile(
    re.escape(ATTACHMENTS_HEADER) + r".*?<attachments>\n(.*?)\n</attachments>\n\n", re.DOTALL
)
_ATTACHMENT_FRAME = re.compile(
    r'<attachment n="\d+" name="([^"]*)" type="[^"]*" size="[^"]*">\n(.*?)\n</attachment>',
    re.DOTALL,
)


@dataclass
class Critique:
    reviewer: str
    text: str
    rating: float | None = None

    @property
    def quoted(self) -> str:
        """The critique as a refinement quotes it: "reviewer: text"."""
        return f"{self.reviewer}: {self.text}"


@dataclass
class ChairmanAnswer:
    model: str
    text: str
    mean_rating: float | None = None


@dataclass
class Prompt:
    stage: Stage
    question: str
    answers: dict[str, str] = field(default_factory=dict)  # review: label -> answer
    original: str = ""  # refinement: the answer to refine
    critiques: list[Critique] = field(default_factory=list)  # refinement
    council: list[ChairmanAnswer] = field(default_factory=list)  # synthesis
    seed: int | None = None  # the request's sampling seed: an independent sample asks with one
    disagree: float | None = None  # the simulator's share of contested problems (its config)
    # What the member says of the tool results in the conversation (simulator.tools.note).
    tool_note: str = ""


def prompt_text(messages: list[dict]) -> str:
    """The text the simulated model answers: the last user message."""
    for message in reversed(messages):
        if message.get("role") == "user":
            return content_text(message.get("content"))
    return content_text(messages[-1].get("content")) if messages else ""


def content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content
        )
    return ""


def detect_stage(text: str) -> Stage:
    start = text.lstrip()
    if start.startswith(REVIEW_OPENING):
        return Stage.REVIEW
    if start.startswith(REFINE_OPENING):
        return Stage.REFINE
    if start.startswith(CHAIRMAN_OPENING):
        return Stage.SYNTHESIS
    if start.startswith(CHECK_OPENING):
        return Stage.CHECK
    return Stage.ANSWER


def _question(pattern: re.Pattern[str], text: str) -> str:
    match = pattern.search(text)
    return match.group(1).strip() if match else ""


def attachments_seen(messages: list[dict]) -> list[dict[str, object]]:
    """The attachments the last user message showed: each one's name, the SHA-256 of the
    text shown (for an image shown, of the image's bytes) and how it was shown (text, an
    image, or named as an image the member could not see)."""
    user = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    content = user[-1].get("content") if user else None
    found = _ATTACHMENTS.match(content_text(content).lstrip())
    if found is None:
        return []
    images = [
        part["image_url"].get("url", "")
        for part in (content if isinstance(content, list) else [])
        if isinstance(part, dict) and isinstance(part.get("image_url"), dict)
    ]
    seen: list[dict[str, object]] = []
    for frame in _ATTACHMENT_FRAME.finditer(found.group(1)):
        body = frame.group(2)
        if body.startswith("[an image, shown after this text:") and images:
            data = base64.b64decode(images.pop(0).partition(",")[2] or b"")
            seen.append({"name": frame.group(1), "shown": "image", "sha256": _sha(data)})
        elif body.startswith(f"[{UNSEEN_IMAGE}:"):
            seen.append({"name": frame.group(1), "shown": "unseen", "sha256": None})
        else:
            seen.append(
                {
                    "name": frame.group(1),
                    "shown": "text",
                    "sha256": _sha(body.encode()),
                    "chars": len(body),
                }
            )
    return seen


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def read_prompt(text: str) -> Prompt:
    text = _ATTACHMENTS.sub("", text.lstrip(), count=1)
    text = _CONVERSATION.sub("", text, count=1)
    stage = detect_stage(text)
    if stage in (Stage.REVIEW, Stage.CHECK):
        asked = _REVIEW_QUESTION if stage is Stage.REVIEW else _CHECK_QUESTION
        return Prompt(
            stage=stage,
            question=_question(asked, text),
            answers={m.group(1): m.group(2) for m in _RESPONSE_FRAME.finditer(text)},
        )
    if stage is Stage.REFINE:
        original = _ORIGINAL_FRAME.search(text)
        return Prompt(
            stage=stage,
            question=_question(_REFINE_QUESTION, text),
            original=original.group(1) if original else "",
            critiques=_critiques(text),
        )
    if stage is Stage.SYNTHESIS:
        council = []
        for m in _ANSWER_FRAME.finditer(text):
            rating = _MEAN_RATING.search(m.group(2))
            council.append(
                ChairmanAnswer(m.group(1), m.group(3), float(rating.group(1)) if rating else None)
            )
        return Prompt(stage=stage, question=_question(_CHAIRMAN_QUESTION, text), council=council)
    question = _LENGTH_NOTE.sub("", text).strip()
    if question.startswith(CONTEXT_OPENING):
        question = question.partition(FOLLOW_UP_HEADER)[2].strip() or question
    if question.startswith(INSTRUCTIONS_HEADER):
        question = question.partition(f"\n{QUESTION_HEADER}\n")[2].strip() or question
    return Prompt(stage=stage, question=question)


def _critiques(text: str) -> list[Critique]:
    section = _FEEDBACK.search(text)
    if not section:
        return []
    body = section.group(1)
    critiques = []
    at = 0
    while head := _HEAD.search(body, at):
        rating = float(head.group(2)) if head.group(2) else None
        rest = body[head.end() :].lstrip("\n")
        line = _RATING_LINE.match(rest)
        if line:
            rating, rest = float(line.group(1)), rest[line.end() :]
        framed = _CRITIQUE_FRAME.match(rest)
        if framed:  # the text ends at its frame's close, whatever it says
            text = framed.group(1)
            at = len(body) - len(rest) + framed.end()
        else:  # unframed (the first releases' prompts): up to the next heading
            following = _HEAD.search(rest)
            text = rest[: following.start()] if following else rest
            at = len(body) - len(rest) + len(text)
        critiques.append(Critique(head.group(1) or USER, text.strip(), rating))
    return critiques
