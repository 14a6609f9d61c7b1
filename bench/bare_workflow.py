"""The bare-Temporal baselines: the council's graph of calls with no protocol around it.

A list of stage widths (4, 4, 4, 4, 4, 4, 1 for 4 models and 2 rounds): each stage runs
that many activities in parallel and waits for all of them, as the deliberation does.
Each activity is either `bare_step`, which does nothing but sleep for the given latency
(0: a no-op), or, when models are given, the worker's own model-call activity asked the
question alone (a stage 1 call), with the deliberation's default timeouts.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import activity, workflow

STEP = "bare_step"
CALL_MODEL = "call_model"


@activity.defn(name=STEP)
async def bare_step(latency: float) -> str:
    if latency > 0:
        await asyncio.sleep(latency)
    return "ok"


def _model_call(model: str, question: str) -> dict[str, Any]:
    return {
        "model": model,
        "messages": [{"role": "user", "content": question}],
        "stage": "stage1",
        "max_response_bytes": 37_000,
    }


@workflow.defn(name="BareGraph")
class BareGraph:
    @workflow.run
    async def run(
        self, plan: list[int], latency: float, models: list[str] | None = None, question: str = ""
    ) -> int:
        calls = 0
        for width in plan:
            if models:
                stage = [
                    workflow.execute_activity(
                        CALL_MODEL,
                        _model_call(models[i % len(models)], question),
                        start_to_close_timeout=timedelta(seconds=300),
                        heartbeat_timeout=timedelta(seconds=10),
                    )
                    for i in range(width)
                ]
            else:
                stage = [
                    workflow.execute_activity(
                        STEP, latency, start_to_close_timeout=timedelta(seconds=60)
                    )
                    for _ in range(width)
                ]
            calls += len(await asyncio.gather(*stage))
        return calls
