"""The final answer in the JSON the person who asked needs (DeliberationRequest.answer_format).

The chairman is asked for it with the client's schema (through the reply forms the worker
tries); its reply is checked against the schema (council.structured.conforming_json) and,
if it does not follow it, asked for once more with what is wrong. The reply kept is the
repaired one when it follows the schema, else the first, with why it does not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from council import prompts
    from council.calls import ChatMessage, ModelReply
    from council.structured import StructuredReply, conforming_json

Ask = Callable[[list[ChatMessage], StructuredReply], Awaitable[ModelReply | None]]


async def conform(
    ask: Ask,
    notice: Callable[..., None],
    messages: list[ChatMessage],
    reply: ModelReply,
    wanted: StructuredReply,
) -> tuple[ModelReply, str, str | None]:
    """The reply kept, its JSON text, and why it does not follow the schema (None: it does).
    `ask` asks the same model again; `notice(message=...)` says what happens, in the run's
    progress."""
    text, problem = conforming_json(reply.content, wanted)
    if problem is None:
        return reply, text, None
    notice(
        message=f"the final answer does not follow the requested schema ({problem}): "
        "asked once more"
    )
    again = await ask(prompts.format_repair(messages, reply.content, problem), wanted)
    if again is None:
        return reply, text, problem
    fixed, still = conforming_json(again.content, wanted)
    return (again, fixed, still) if still is None else (reply, text, still)
