"""The bare-Temporal baselines: the council's graph of calls with no protocol around it.

BareGraph takes a list of stage widths (4, 4, 4, 4, 4, 4, 1 for 4 models and 2 rounds):
each stage runs that many activities in parallel and waits for all of them, as the
deliberation does. Each activity is either `bare_step`, which does nothing but sleep for
the given latency (0: a no-op), or, when models are given, the worker's own model-call
activity asked the question alone (a stage 1 call).

SameCalls takes the calls a deliberation made, stage by stage (its prompts with the
answers, reviews and critiques in them), and makes them again the same way: the same
activities with the same inputs and replies, without the deliberation's own work
(parsing, rules, state, events, search attributes) around them.

Both call models through the deliberation's own call (workflows.calls) with the default
policy, and run as Council's workflows do (workflows.calls.SANDBOXED: the same runner).
"""

from __future__ import annotations

import asyncio
from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    from council.calls import ChatMessage, ModelCall, Stage
    from council.models import CallPolicy
    from workflows.calls import SANDBOXED, call_model


@activity.defn
async def bare_step(latency: float) -> str:
    if latency > 0:
        await asyncio.sleep(latency)
    return "ok"


def _model_call(model: str, question: str) -> ModelCall:
    return ModelCall(
        model=model,
        messages=[ChatMessage(role="user", content=question)],
        stage=Stage.ANSWER,
    )


@workflow.defn(sandboxed=SANDBOXED)
class BareGraph:
    @workflow.run
    async def run(
        self, plan: list[int], latency: float, models: list[str] | None = None, question: str = ""
    ) -> int:
        calls = 0
        for width in plan:
            if models:
                stage = [
                    call_model(_model_call(models[i % len(models)], question), CallPolicy(), None)
                    for i in range(width)
                ]
            else:
                stage = [
                    workflow.execute_activity(
                        bare_step, latency, start_to_close_timeout=timedelta(seconds=60)
                    )
                    for _ in range(width)
                ]
            calls += len(await asyncio.gather(*stage))
        return calls


@workflow.defn(sandboxed=SANDBOXED)
class SameCalls:
    @workflow.run
    async def run(self, stages: list[list[ModelCall]]) -> int:
        calls = 0
        for stage in stages:
            replies = await asyncio.gather(
                *(call_model(call, CallPolicy(), None) for call in stage)
            )
            calls += len(replies)
        return calls
