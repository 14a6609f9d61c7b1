"""The evaluation's self-consistency arm: one model sampled k times (grading.sampling).

The first sample runs alone, its tokens choose k, and the other k - 1 run in parallel, each
with its own seed (seed i for sample i). A sample whose call fails for good is recorded
and left out of the vote.
"""

from __future__ import annotations

import asyncio

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from council.calls import ModelReply
    from grading.sampling import (
        FIRST_SAMPLE_TRIES,
        SamplingRequest,
        SamplingResult,
        samples_for,
    )

from workflows.calls import SANDBOXED, Routes, call_model


@workflow.defn(versioning_behavior=VersioningBehavior.PINNED, sandboxed=SANDBOXED)
class SelfConsistency:
    @workflow.run
    async def run(self, request: SamplingRequest) -> SamplingResult:
        routes = Routes([request.call.model])
        result = SamplingResult(model=request.call.model, samples=0, replies=[])
        first: ModelReply | None = None
        for seed in range(1, FIRST_SAMPLE_TRIES + 1):
            first = self._keep(result, seed, await self._sample(request, routes, seed))
            if first is not None:
                break
        if first is None:
            return result
        result.samples, result.capped = samples_for(
            request.token_target, first.usage.total_tokens, request.max_samples
        )
        seeds = range(seed + 1, seed + result.samples)
        replies = await asyncio.gather(*(self._sample(request, routes, s) for s in seeds))
        for s, reply in zip(seeds, replies, strict=True):
            self._keep(result, s, reply)
        return result

    @staticmethod
    def _keep(result: SamplingResult, seed: int, reply: ModelReply | str) -> ModelReply | None:
        if isinstance(reply, str):
            result.replies.append(None)
            result.errors.append(f"sample {seed}: {reply}")
            return None
        result.usage.add(reply.usage)
        result.replies.append(reply.content)
        return reply

    async def _sample(
        self, request: SamplingRequest, routes: Routes, seed: int
    ) -> ModelReply | str:
        """One sample's reply, or why its call failed for good."""
        call = request.call.model_copy(update={"seed": seed})
        summary = f"self-consistency · {call.model} · sample {seed}"
        try:
            return await call_model(call, request.policy, routes, summary)
        except ActivityError as err:
            return str(err.cause if err.cause is not None else err)
