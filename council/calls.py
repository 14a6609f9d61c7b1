"""The boundary of one model call: what the workflow asks for, what the activity returns.

These types cross Temporal (workflow -> activity -> workflow), so they hold data only:
no API keys, no base URLs. The worker alone knows where and with which key to call.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal

from pydantic import BaseModel, Field

from council.attachments import Attachment, AttachmentCut
from council.limits import MAX_RESPONSE_BYTES
from council.stages import Ending
from council.structured import StructuredReply


class Stage(StrEnum):
    """The protocol's stages, named as in the record."""

    ANSWER = "stage1"
    REVIEW = "stage2"
    REFINE = "stage2_5"
    SYNTHESIS = "stage3"

    @property
    def heading(self) -> str:
        """The stage as prose names it: "stage 1 answer", ..."""
        return STAGE_HEADINGS[self]

    def place(self, round_number: int) -> str:
        """Where in the protocol: "stage 1 answer", "stage 2.5 refinement · round 1", and
        for the review that follows refinement round n, "stage 2 review after round n"."""
        if not round_number:
            return self.heading
        if self is Stage.REVIEW:
            return f"{self.heading} after round {round_number}"
        return f"{self.heading} · round {round_number}"


STAGE_HEADINGS = {
    Stage.ANSWER: "stage 1 answer",
    Stage.REVIEW: "stage 2 review",
    Stage.REFINE: "stage 2.5 refinement",
    Stage.SYNTHESIS: "stage 3 synthesis",
}


class TextPart(BaseModel):
    type: Literal["text"] = "text"
    text: str


class ImageUrl(BaseModel):
    url: str


class ImagePart(BaseModel):
    """An image, as OpenAI-compatible providers take it (a data URL here)."""

    type: Literal["image_url"] = "image_url"
    image_url: ImageUrl


ContentPart = Annotated[TextPart | ImagePart, Field(discriminator="type")]


class ChatMessage(BaseModel):
    role: str
    # Text, or (a message that shows images) OpenAI's content parts.
    content: str | list[ContentPart]

    @property
    def text(self) -> str:
        """The message's text (its text parts joined)."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content if isinstance(part, TextPart))

    @property
    def images(self) -> int:
        if isinstance(self.content, str):
            return 0
        return sum(isinstance(part, ImagePart) for part in self.content)


class ModelCall(BaseModel):
    """One chat-completions request, fully built by the workflow."""

    model: str
    messages: list[ChatMessage]
    stage: Stage | None = None  # None: a call outside the protocol (the evaluation's judge)
    round: int = 0
    temperature: float | None = None
    # The provider's sampling seed, where it takes one: independent samples of one prompt
    # (self-consistency) each ask with their own.
    seed: int | None = None
    max_tokens: int | None = None
    # Content longer than this (UTF-8 bytes) is cut and flagged, so that a reply never
    # pushes a Temporal payload or the record past its size limit.
    max_response_bytes: int = MAX_RESPONSE_BYTES
    # The reply's JSON schema, where the provider takes one (the worker decides how).
    response_format: StructuredReply | None = None
    # The user's files: the worker shows them before the first message's text, each as
    # this member can take it (council.prompts.with_attachments).
    attachments: list[Attachment] = Field(default_factory=list)

    @property
    def summary(self) -> str:
        """One line for the Temporal UI: stage, round, model."""
        return f"{self.stage.place(self.round)} · {self.model}" if self.stage else self.model


class TokenUsage(BaseModel):
    """Tokens of one call as the provider reported them (estimated only when it did not)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0
    cost_usd: float | None = None
    estimated: bool = False


class CallProgress(BaseModel):
    """What a model call reports while it runs (its heartbeat details): who is writing,
    how much has arrived, and the reply so far. Temporal keeps it with the running
    activity, not in the workflow's history; the web page reads it to show replies as
    they stream."""

    model: str
    stage: Stage | None = None
    round: int = 0
    received_bytes: int = 0
    chunks: int = 0
    content_bytes: int = 0
    text: str = ""
    # The attempt this heartbeat comes from; whether its request is with the provider
    # (sent: not while it waits for a free slot in the worker's own queue), and for how
    # long, its provider's silence before the first bytes included. The straggler rule
    # reads these (council.stragglers.CallClock).
    attempt: int = 0
    answering: bool = False
    answer_seconds: float = 0.0


class ModelReply(BaseModel):
    model: str
    content: str
    served_by: str | None = Field(default=None, description="the model the provider says answered")
    finish_reason: str | None = None
    usage: TokenUsage = Field(default_factory=TokenUsage)
    # From the moment the request was sent (after any wait for a slot at the provider) to
    # the end of the reply, in the attempt that answered.
    latency_ms: int = 0
    # Of that, the time the provider had the request that answered (from its sending; see
    # activities.slots.AnswerClock): what the straggler rule's patience is made of.
    answer_ms: int = 0
    truncated: bool = False
    # How the reply was asked for: json_schema, json_object, or None (free text).
    structured: str | None = None
    # The provider that answered, by its council.toml name ("default": COUNCIL_LLM_*).
    provider: str | None = None
    # The attachments whose text was cut to fit the model's context window.
    attachment_cuts: list[AttachmentCut] = Field(default_factory=list)

    @property
    def ending(self) -> Ending:
        """How the reply ended, as the record keeps it with the text."""
        return Ending(
            finish_reason=self.finish_reason, truncated=self.truncated, provider=self.provider
        )
