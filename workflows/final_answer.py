"""Stage 3's final answer: who writes it, and in what form.

The chairman is asked first; if its call fails or its reply echoes the prompt, the members
are asked in the order of the aggregate ranking, then any left; if none can write it, the
best-ranked answer stands and the record says so. Each call is one activity, asked one after
the other, so the order of the candidates is the order of the commands in history.

With DeliberationRequest.answer_format, the reply must be the JSON the person who asked needs.
The chairman is asked for it with the client's schema (through the reply forms the worker
tries); its reply is checked against the schema (council.structured.conforming_json) and,
if it does not follow it, asked for once more with what is wrong. The reply kept is the
repaired one when it follows the schema, else the first, with why it does not.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from functools import partial

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from council import prompts
    from council.calls import ChatMessage, ModelReply, Stage
    from council.echo import ECHO, ECHO_PROBLEM, echoes
    from council.iteration import IterationRound
    from council.progress import EventKind
    from council.refinement import answer_ending
    from council.report import Written
    from council.stages import AggregateRanking, Stage1Result, Stage3Result
    from council.structured import (
        StructuredReply,
        conforming_json,
        read_synthesis,
        synthesis_schema,
    )

from workflows.fan_out import FanOut

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


def candidates(
    chairman: str, rankings: Sequence[AggregateRanking], answers: dict[str, str]
) -> list[str]:
    """Who is asked for the synthesis, in turn: the chairman, then the members by rank,
    then those the ranking does not name."""
    order = [chairman] + [e.model for e in rankings if e.model != chairman]
    return order + [m for m in answers if m not in order]


async def synthesize(
    calls: FanOut,
    event: Callable[..., None],
    round_number: int,
    models: list[str],
    members: Sequence[str],
    messages: list[ChatMessage],
    material: list[str],
    wanted: StructuredReply | None,
) -> tuple[Stage3Result, Written | None] | None:
    """The synthesis by the first of `models` whose call succeeds with a reply that does not
    echo `material` (the answers and the user's own text), and what it writes of the council
    (council.report; None from a reply that is not the structured synthesis); None when
    none does. `wanted` is the schema the person who asked gave: then the reply is
    that, and no report is asked for."""
    chairman = models[0]
    fmt = wanted or synthesis_schema()
    for model in models:
        if model != chairman:
            event(
                EventKind.FALLBACK,
                stage=Stage.SYNTHESIS,
                model=model,
                message=f"the chairman call failed; {model} synthesizes instead",
            )
        reply = await calls.call(Stage.SYNTHESIS, round_number, model, messages, fmt)
        if reply is not None and echoes(reply.content, messages, material):
            calls.failed(
                Stage.SYNTHESIS, round_number, model, message=ECHO_PROBLEM, error_type=ECHO
            )
            continue
        if reply is None:
            continue
        text, report = (
            read_synthesis(reply.content, members) if wanted is None else (reply.content, None)
        )
        problem = None
        if wanted is not None:
            reply, text, problem = await conform(
                partial(calls.call, Stage.SYNTHESIS, round_number, model),
                partial(event, EventKind.NOTICE, stage=Stage.SYNTHESIS, model=model),
                messages,
                reply,
                wanted,
            )
        event(EventKind.STAGE_COMPLETE, stage=Stage.SYNTHESIS, model=model)
        written = Stage3Result(
            model=model, response=text, format_problem=problem, **reply.ending.model_dump()
        )
        return written, report
    return None


def best_answer_stands(
    event: Callable[..., None],
    rankings: Sequence[AggregateRanking],
    answers: dict[str, str],
    stage1: Sequence[Stage1Result],
    rounds: Sequence[IterationRound],
    wanted: StructuredReply | None,
) -> Stage3Result:
    """The final answer when no model could write the synthesis (every call failed or
    echoed its prompt): the council's best-ranked answer, and the record says so."""
    best = next((e.model for e in rankings if e.model in answers), next(iter(answers)))
    why = f"no model could write the synthesis: {best}'s answer, the best rated, stands"
    event(EventKind.FALLBACK, stage=Stage.SYNTHESIS, model=best, message=why)
    return Stage3Result(
        model=best,
        response=answers[best],
        fallback=why,
        **answer_ending(best, answers[best], stage1, rounds).model_dump(),
        format_problem="no model wrote the final answer in the requested format"
        if wanted is not None
        else None,
    )
