"""The same protocol as a plain in-process asyncio fan-out: no Temporal, no durability.

This is the original llm-council's approach (asyncio.gather over an HTTP client), and
the critical-path baseline. It runs the deliberation workflow's protocol step for step
with the same pieces: the prompts of council.prompts, the same parsers, aggregation,
change detection and termination rules, the same calls per stage, and the worker's own
HTTP client (activities.llm_client, with the settings the worker uses). What it lacks
is what Temporal adds: nothing survives a crash, nothing is retried, nothing is recorded.
"""

from __future__ import annotations

import asyncio
import random
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from activities.completion import Completion, token_usage
from activities.errors import CallFailure
from activities.llm_client import ChatClient, make_http_client
from activities.settings import GatewaySettings
from council import prompts
from council.aggregate import aggregate_rankings
from council.calls import ChatMessage, ModelReply, Stage
from council.critiques import critiques_from_parsed
from council.iteration import (
    CritiqueItem,
    IterationState,
    charge_tokens,
    complete_round,
    end_if_all_failed,
    initialize_iteration_state,
    note_review,
    refine_until_done,
    start_new_round,
)
from council.labels import assign_labels, presentation_orders
from council.models import DeliberationRequest, Usage
from council.refinement import plan_refinements, record_refinements, refinement_result
from council.reviews import read_review
from council.stages import Stage2Result
from council.validation import validate_request


@dataclass
class PlainResult:
    answer: str
    rounds: int
    calls: int
    total_tokens: int
    terminated_reason: str
    failures: list[str] = field(default_factory=list)


def _now() -> datetime:
    return datetime.now(UTC)


class PlainCouncil:
    """A deliberation as one coroutine; model calls through the worker's HTTP client."""

    def __init__(self, base_url: str, api_key: str | None = None) -> None:
        self.settings = GatewaySettings(base_url=base_url, api_key=api_key)
        self.http = make_http_client(self.settings)
        self.chat = ChatClient(self.settings, self.http)

    async def aclose(self) -> None:
        await self.http.aclose()

    async def deliberate(self, raw_request: dict[str, Any], seed: int = 0) -> PlainResult:
        run = _Run(self.chat, validate_request(raw_request), f"plain-{uuid.uuid4().hex[:12]}")
        return await run.deliberate(random.Random(seed))


class _Run:
    def __init__(self, chat: ChatClient, request: DeliberationRequest, run_id: str) -> None:
        self.chat = chat
        self.request = request
        self.run_id = run_id
        self.cap = request.response_byte_cap
        self.state: IterationState = initialize_iteration_state(request.iteration_config())
        self.usage = Usage()
        self.failures: list[str] = []
        self.answers: dict[str, str] = {}
        self.labels: dict[str, str] = {}
        self.reviews: list[Stage2Result] = []
        self.critiques: dict[str, list[CritiqueItem]] = {}
        self._calls = 0

    async def deliberate(self, rng: random.Random) -> PlainResult:
        question = self.request.question
        replies = await self.fan_out(
            Stage.ANSWER,
            0,
            {m: prompts.answer_prompt(question, self.cap) for m in self.request.models},
        )
        self.answers = {m: replies[m].content for m in self.request.models if m in replies}
        if len(self.answers) < 2:
            raise RuntimeError(f"fewer than two models answered: {self.failures}")
        self.labels = assign_labels(list(self.answers), rng)
        self.rng = rng
        await self.review(0)
        charge_tokens(self.state, self.usage.total_tokens)
        await refine_until_done(self.state, self.refinement_round)
        answer = await self.synthesize()
        return PlainResult(
            answer=answer,
            rounds=len(self.state.rounds),
            calls=self.usage.calls,
            total_tokens=self.usage.total_tokens,
            terminated_reason=str(self.state.termination_reason),
            failures=self.failures,
        )

    async def review(self, round_number: int) -> list[Stage2Result]:
        orders = presentation_orders(self.labels, self.rng)
        calls = prompts.review_prompts(
            self.request.question,
            self.answers,
            self.labels,
            orders,
            self.cap,
            self.request.criteria,
        )
        replies = await self.fan_out(Stage.REVIEW, round_number, calls)
        read = [
            read_review(r, replies[r].content, self.labels, orders[r])
            for r in self.answers
            if r in replies
        ]
        reviews = [review for review, _ in read]
        if reviews:
            self.reviews = reviews
            self.critiques = critiques_from_parsed(
                (review.model, parsed) for review, parsed in read
            )
        rankings = aggregate_rankings(reviews, self.labels) if reviews else []
        pending = plan_refinements(self.answers, self.critiques, self.labels)
        note_review(self.state, rankings, len(pending))
        end_if_all_failed(self.state, [model in replies for model in calls])
        return reviews

    async def refinement_round(self) -> None:
        tokens_before = self.usage.total_tokens
        round_data = start_new_round(self.state, _now())
        n = round_data.round_number
        round_data.critiques = {label: list(items) for label, items in self.critiques.items()}
        tasks = plan_refinements(self.answers, round_data.critiques, self.labels)
        replies = await self.fan_out(
            Stage.REFINE,
            n,
            {
                task.model: prompts.refinement_prompt(
                    self.request.question,
                    task.original,
                    task.critiques,
                    self.cap,
                    self.request.criteria,
                )
                for task in tasks
            },
        )
        results = [
            refinement_result(
                task,
                replies[task.model].content if task.model in replies else None,
                error=None if task.model in replies else "the call failed",
            )
            for task in tasks
        ]
        self.answers = record_refinements(round_data, self.answers, results)
        if not end_if_all_failed(self.state, [r.error is None for r in results]):
            round_data.reviews = await self.review(n)
        complete_round(self.state, round_data, self.usage.total_tokens - tokens_before, _now())

    async def synthesize(self) -> str:
        rankings = aggregate_rankings(self.reviews, self.labels)
        messages = prompts.synthesis_prompt(
            self.request.question,
            self.answers,
            rankings,
            rounds_run=len(self.state.rounds),
            byte_cap=self.cap,
            stopped_early=False,
        )
        chairman = self.request.chairman or self.request.models[0]
        candidates = [chairman] + [e.model for e in rankings if e.model != chairman]
        for model in candidates:
            reply = await self.call(Stage.SYNTHESIS, self.state.current_round, model, messages)
            if reply is not None:
                return reply.content
        raise RuntimeError(f"no model could write the synthesis: {self.failures}")

    async def fan_out(
        self, stage: Stage, round_number: int, calls: dict[str, list[ChatMessage]]
    ) -> dict[str, ModelReply]:
        replies = await asyncio.gather(
            *(self.call(stage, round_number, model, messages) for model, messages in calls.items())
        )
        return {
            model: reply for model, reply in zip(calls, replies, strict=False) if reply is not None
        }

    async def call(
        self, stage: Stage, round_number: int, model: str, messages: list[ChatMessage]
    ) -> ModelReply | None:
        call = self.request.model_call(stage, round_number, model, messages)
        self._calls += 1
        completion = Completion(call.max_response_bytes, self.chat.redactor)
        try:
            await self.chat.complete(call, completion, f"{self.run_id}/{self._calls}")
        except CallFailure as failure:
            self.failures.append(f"{stage} {model}: {failure}")
            return None
        if not completion.content.strip():
            self.failures.append(f"{stage} {model}: empty reply")
            return None
        reply = ModelReply(
            model=model,
            content=completion.content,
            served_by=completion.served_by,
            finish_reason=completion.finish_reason,
            usage=token_usage(completion.usage, [m.content for m in messages], completion.content),
            truncated=completion.truncated,
        )
        self.usage.record(model, stage, reply.usage)
        self.state.cost_usd = self.usage.cost_usd
        return reply
