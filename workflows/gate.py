"""Depth auto's agreement gate, after stage 1 (council.depth): by the values the first
answers state when each states one that can be compared or those stated already differ,
else by one agreement check call (the chairman's model unless the request names another),
asked as one activity like every model call."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from council import prompts
    from council.calls import Stage
    from council.depth import Gate, by_values, check_failed, read_check
    from council.models import DeliberationRequest
    from council.progress import EventKind
    from council.structured import agreement_check_schema
    from grading.answers import stated_shown

from workflows.fan_out import FanOut


async def agreement_gate(
    calls: FanOut,
    event: Callable[..., None],
    request: DeliberationRequest,
    answers: Mapping[str, str],
    label_to_model: Mapping[str, str],
    chairman: str,
) -> Gate:
    """Whether the first `answers` (model -> text; the checker reads them under their
    anonymous labels, in the labels' order) agree, with the evidence; an agreement check
    that fails or cannot be read is a gate that could not tell (the council deliberates)."""
    gate = by_values(
        {model: stated_shown(text) for model, text in answers.items()}, request.auto.agree_share
    )
    if gate is None:
        checker = request.auto.check_model or chairman
        labelled = {label: answers[model] for label, model in label_to_model.items()}
        messages = prompts.agreement_check_prompt(
            request.question,
            labelled,
            request.response_byte_cap,
            request.instructions,
        )
        # A stage of one call: a stop cancels it like any stage's calls.
        replies = await calls.stage(
            Stage.CHECK, 0, {checker: messages}, {checker: agreement_check_schema()}
        )
        reply = replies.get(checker)
        gate = (
            read_check(reply.content, checker)
            if reply is not None
            else check_failed(checker, "the agreement check call failed or was stopped")
        )
    event(
        EventKind.NOTICE,
        stage=Stage.CHECK,
        message=gate.describe(),
        # Agreement is good news (no warning glyph): data "good".
        data={"agreed": gate.agreed, "method": gate.method, "good": gate.agreed},
    )
    return gate
