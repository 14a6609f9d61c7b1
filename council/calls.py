"""The boundary of one model call: what the workflow asks for, what the activity returns.

These types cross Temporal (workflow -> activity -> workflow), so they hold data only:
no API keys, no base URLs. The worker alone knows where and with which key to call.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_serializer

from council.attachments import Attachment, AttachmentCut
from council.limits import MAX_RESPONSE_BYTES
from council.stages import Ending
from council.structured import StructuredReply
from council.tools import ToolCall, ToolSpec


class Stage(StrEnum):
    """The protocol's stages, named as in the record."""

    ANSWER = "stage1"
    REVIEW = "stage2"
    REFINE = "stage2_5"
    SYNTHESIS = "stage3"
    # Under depth auto, after stage 1: whether the first answers agree (council.depth).
    CHECK = "agreement_check"

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
    Stage.CHECK: "agreement check",
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
    # An assistant message that asked for tools (its content then may be empty), and a
    # tool's result (role "tool"): the id of the call it answers.
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @model_serializer(mode="wrap")
    def _plain_without_tool_fields(self, handler: Any) -> dict[str, Any]:
        """A message without tools serialises as before they existed (role and content)."""
        data: dict[str, Any] = handler(self)
        for name in ("tool_calls", "tool_call_id"):
            if data.get(name) is None:
                data.pop(name, None)
        return data

    def wire(self) -> dict[str, Any]:
        """As a chat-completions request carries it."""
        message: dict[str, Any] = {"role": self.role}
        if isinstance(self.content, str):
            message["content"] = self.content if self.content or not self.tool_calls else None
        else:
            message["content"] = [part.model_dump() for part in self.content]
        if self.tool_calls:
            message["tool_calls"] = [call.openai() for call in self.tool_calls]
        if self.tool_call_id is not None:
            message["tool_call_id"] = self.tool_call_id
        return message

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
    # The functions the model may call (council.tools): a reply may then be tool calls.
    tools: list[ToolSpec] = Field(default_factory=list)
    # The member's own model time in this stage before this call (its earlier calls,
    # before their tool calls): the straggler rule counts it with this call's, and never
    # the time its tools took.
    prior_answer_ms: int = 0

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
    # The tools the model asked for instead of (or before) an answer (council.tools).
    tool_calls: list[ToolCall] = Field(default_factory=list)
    # Tools were offered, but the provider takes none (its council.toml entry says
    # `tools = false`, or it refused them): the call was made without.
    tools_refused: bool = False

    @property
    def ending(self) -> Ending:
        """How the reply ended, as the record keeps it with the text."""
        return Ending(
            finish_reason=self.finish_reason, truncated=self.truncated, provider=self.provider
        )


def added(a: TokenUsage, b: TokenUsage) -> TokenUsage:
    """Two calls' usage together."""
    return TokenUsage(
        prompt_tokens=a.prompt_tokens + b.prompt_tokens,
        completion_tokens=a.completion_tokens + b.completion_tokens,
        total_tokens=a.total_tokens + b.total_tokens,
        cost_usd=None if a.cost_usd is None or b.cost_usd is None else a.cost_usd + b.cost_usd,
        estimated=a.estimated or b.estimated,
    )


def joined(steps: list[ModelReply]) -> ModelReply:
    """A member's reply after its tool calls: the last model call's, with the usage and
    the times of every model call it made."""
    last = steps[-1]
    if len(steps) == 1:
        return last
    usage = steps[0].usage
    for step in steps[1:]:
        usage = added(usage, step.usage)
    return last.model_copy(
        update={
            "usage": usage,
            "latency_ms": sum(step.latency_ms for step in steps),
            "answer_ms": sum(step.answer_ms for step in steps),
            "attachment_cuts": [cut for step in steps for cut in step.attachment_cuts],
            "tools_refused": any(step.tools_refused for step in steps),
        }
    )
