"""The evaluation harness's judge: grade free-text replies against a reference answer.

One activity per reply (the same model-call activity as the deliberation), in parallel.
A call that fails for good leaves that reply without a verdict; the harness then keeps
the exact-match result.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from council.calls import ModelCall, ModelReply
    from grading.judge import JudgeRequest, JudgeResult, judge_prompt, parse_verdict

from workflows.calls import SANDBOXED, Routes, call_model

MAX_RESPONSE_BYTES = 16_000


@workflow.defn(versioning_behavior=VersioningBehavior.PINNED, sandboxed=SANDBOXED)
class JudgeAnswers:
    @workflow.run
    async def run(self, request: JudgeRequest) -> JudgeResult:
        routes = Routes([request.model])
        replies = await asyncio.gather(
            *(
                self._grade(request, routes, i, candidate)
                for i, candidate in enumerate(request.candidates)
            )
        )
        result = JudgeResult(model=request.model, verdicts=[], replies=[])
        for i, (reply, error) in enumerate(replies):
            if reply is None:
                result.verdicts.append(None)
                result.replies.append("")
                result.errors.append(f"reply {i + 1}: {error}")
                continue
            result.usage.add(reply.usage)
            result.verdicts.append(parse_verdict(reply.content))
            result.replies.append(reply.content)
        return result

    async def _grade(
        self, request: JudgeRequest, routes: Routes, index: int, candidate: str
    ) -> tuple[ModelReply | None, str]:
        call = ModelCall(
            model=request.model,
            messages=judge_prompt(request.question, request.reference, candidate),
            max_response_bytes=MAX_RESPONSE_BYTES,
        )
        summary = (
            f"evaluation judge · {request.model} · reply {index + 1} of {len(request.candidates)}"
        )
        try:
            reply = await call_model(call, request.policy, routes, summary)
        except ActivityError as err:
            return None, str(err.cause if err.cause is not None else err)
        return reply, ""
