"""Threads: a follow-up question carries the earlier turns of its conversation.

A turn is a question and the council's final answer to it (the chairman's synthesis).
The context a follow-up gets is bounded in tokens: the newest turns are kept whole while
they fit, the oldest go first, and when not even the newest fits, its answer is cut to
fit. What was kept, dropped or cut is recorded.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from council.changes import CHARS_PER_TOKEN, estimate_tokens

DEFAULT_CONTEXT_TOKENS = 4_000
MAX_CONTEXT_TOKENS = 32_000
CUT_MARK = " [...]"


class Turn(BaseModel):
    """An earlier deliberation of the thread: its id, question and final answer."""

    id: str
    question: str
    answer: str

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.question, self.answer)


class Thread(BaseModel):
    """Where a request stands in a conversation: a follow-up's deliberation and thread and
    the thread's earlier turns (oldest first, with the ids of those left out), or the
    earlier turns a client brings (a chat's messages), which follow up no deliberation."""

    follow_up_of: str | None = None
    thread_id: str | None = None
    history: list[Turn] = Field(default_factory=list)
    dropped_turns: list[str] = Field(default_factory=list)


class ThreadContext(BaseModel):
    """The earlier turns a follow-up's prompts carry, oldest first."""

    turns: list[Turn] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list, description="ids of turns left out")
    cut: bool = Field(default=False, description="the newest turn's answer was cut to fit")

    @property
    def tokens(self) -> int:
        return sum(turn.tokens for turn in self.turns)


class ContextSummary(BaseModel):
    """What the record says of the context: ids only (the texts are in the earlier records)."""

    turns: list[str] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list)
    cut: bool = False
    tokens: int = 0
    max_tokens: int = DEFAULT_CONTEXT_TOKENS


def fit_context(history: Sequence[Turn], max_tokens: int) -> ThreadContext:
    """The newest turns that fit in max_tokens, whole; the oldest are dropped first."""
    kept: list[Turn] = []
    used = 0
    for turn in reversed(history):
        if used + turn.tokens > max_tokens:
            break
        kept.insert(0, turn)
        used += turn.tokens
    dropped = [turn.id for turn in history[: len(history) - len(kept)]]
    if kept or not history or max_tokens <= 0:
        return ThreadContext(turns=kept, dropped=dropped)
    # Not even the newest turn fits: keep its question, and as much of its answer as fits.
    newest = history[-1]
    room = max(0, (max_tokens - estimate_tokens(newest.question)) * CHARS_PER_TOKEN)
    room = max(0, room - len(CUT_MARK))
    cut = newest.model_copy(update={"answer": newest.answer[:room].rstrip() + CUT_MARK})
    return ThreadContext(turns=[cut], dropped=dropped[:-1], cut=True)


def summarize_context(context: ThreadContext, max_tokens: int) -> ContextSummary:
    return ContextSummary(
        turns=[turn.id for turn in context.turns],
        dropped=list(context.dropped),
        cut=context.cut,
        tokens=context.tokens,
        max_tokens=max_tokens,
    )
