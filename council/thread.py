"""Threads: a follow-up question carries the earlier turns of its conversation.

A turn is a question and the council's final answer to it (the chairman's synthesis),
or, in a conversation a client brings, its user messages and the replies to them.
The context a follow-up gets is bounded in tokens, whatever the thread's length and
however a client splits its messages: the newest turns are kept whole while they fit (at
most MAX_THREAD_TURNS of them), the oldest go first, and when not even the newest fits,
its question and its answer are cut to fit, each ending with a marker. What was kept,
dropped or cut is recorded; of a long thread's dropped turns the newest MAX_THREAD_TURNS
are named and the rest counted.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, Field

from council.changes import CHARS_PER_TOKEN, estimate_tokens
from council.limits import MAX_THREAD_TURNS

DEFAULT_CONTEXT_TOKENS = 4_000
MAX_CONTEXT_TOKENS = 32_000
CUT_MARK = " [...]"


class Turn(BaseModel):
    """An earlier deliberation of the thread: its id, question and final answer."""

    id: str
    question: str
    answer: str
    # The turn was cut to fit the context's bound (its texts end with CUT_MARK).
    cut: bool = False

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
    # Earlier turns left out and not named (older than those listed).
    unnamed_dropped: int = 0


class ThreadContext(BaseModel):
    """The earlier turns a follow-up's prompts carry, oldest first."""

    turns: list[Turn] = Field(default_factory=list)
    dropped: list[str] = Field(default_factory=list, description="ids of turns left out")
    cut: bool = Field(default=False, description="the newest turn was cut to fit")
    unnamed_dropped: int = Field(default=0, description="turns left out, older than those named")

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
    # Every earlier turn left out: those named in `dropped` and the older ones.
    dropped_count: int = 0


def fit_context(history: Sequence[Turn], max_tokens: int) -> ThreadContext:
    """The newest turns that fit in max_tokens, whole, at most MAX_THREAD_TURNS of them;
    the oldest are dropped first. When not even the newest fits, it is cut to fit."""
    kept: list[Turn] = []
    used = 0
    for turn in reversed(history):
        if used + turn.tokens > max_tokens or len(kept) == MAX_THREAD_TURNS:
            break
        kept.insert(0, turn)
        used += turn.tokens
    dropped = [turn.id for turn in history[: len(history) - len(kept)]]
    if kept or not history or max_tokens <= 0:
        return ThreadContext(turns=kept, dropped=dropped, cut=any(turn.cut for turn in kept))
    return ThreadContext(
        turns=[cut_to_fit(history[-1], max_tokens)], dropped=dropped[:-1], cut=True
    )


def cut_to_fit(turn: Turn, max_tokens: int) -> Turn:
    """The turn within max_tokens: its question keeps at least half the room (all of it
    that the answer leaves), its answer the rest; a text that is cut ends with CUT_MARK
    (room for the two markers is kept aside)."""
    room = max(0, max_tokens * CHARS_PER_TOKEN - 2 * len(CUT_MARK))
    asked = min(len(turn.question), max(room // 2, room - len(turn.answer)))
    answered = min(len(turn.answer), room - asked)
    return turn.model_copy(
        update={
            "question": _cut(turn.question, asked),
            "answer": _cut(turn.answer, answered),
            "cut": True,
        }
    )


def _cut(text: str, keep: int) -> str:
    """The text, or its first `keep` characters and the marker; nothing when no room is
    left for any of it (the context then says the turn was cut)."""
    if keep >= len(text):
        return text
    return text[:keep].rstrip() + CUT_MARK if keep > 0 else ""


def named_dropped(dropped: Sequence[str], unnamed: int) -> tuple[list[str], int]:
    """Dropped turns' ids, oldest first, as a request carries them: the newest
    MAX_THREAD_TURNS named, the older counted with the `unnamed` ones."""
    overflow = max(0, len(dropped) - MAX_THREAD_TURNS)
    return list(dropped[overflow:]), unnamed + overflow


def summarize_context(context: ThreadContext, max_tokens: int) -> ContextSummary:
    return ContextSummary(
        turns=[turn.id for turn in context.turns],
        dropped=list(context.dropped),
        cut=context.cut,
        tokens=context.tokens,
        max_tokens=max_tokens,
        dropped_count=len(context.dropped) + context.unnamed_dropped,
    )
