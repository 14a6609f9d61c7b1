"""Model calls without Temporal: the worker's HTTP client and settings, called directly.

For code that wants the council's stages in plain asyncio (the specification's functions
take this form): nothing is retried, recorded or durable here. The default provider's
variables (COUNCIL_LLM_BASE_URL, COUNCIL_LLM_API_KEY, ...), read as the worker reads them
(council.config.DefaultProvider), say where the calls go.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from activities.completion import Completion, token_usage
from activities.errors import CallFailure
from activities.llm_client import ChatClient, make_http_client
from activities.settings import GatewaySettings
from council import refinement
from council.calls import ChatMessage, ModelCall
from council.config import DefaultProvider
from council.iteration import IterationRound, IterationState
from council.models import EvaluationCriteria


async def query_models_parallel_with_prompts(
    model_prompts: dict[str, list[dict[str, str]]], settings: GatewaySettings | None = None
) -> dict[str, dict[str, Any]]:
    """Each model's messages sent at once; model -> {"content", "finish_reason", "usage"}.
    A model whose call failed, or whose reply is empty, is left out."""
    settings = settings or GatewaySettings.of(DefaultProvider.read(os.environ))
    run = uuid.uuid4().hex[:12]
    async with make_http_client(settings) as http:
        chat = ChatClient(settings, http)

        async def one(model: str, messages: list[dict[str, str]]) -> dict[str, Any] | None:
            call = ModelCall(model=model, messages=[ChatMessage(**m) for m in messages])
            completion = Completion(call.max_response_bytes, chat.redactor)
            try:
                await chat.complete(call, completion, f"direct-{run}/{model}")
            except CallFailure:
                return None
            if not completion.content.strip():
                return None
            texts = [m.text for m in call.messages]
            return {
                "content": completion.content,
                "finish_reason": completion.finish_reason,
                "usage": token_usage(completion.usage, texts, completion.content).model_dump(),
            }

        replies = await asyncio.gather(*(one(m, msgs) for m, msgs in model_prompts.items()))
    return {model: reply for model, reply in zip(model_prompts, replies, strict=True) if reply}


async def stage2_5_refine_responses(
    user_query: str,
    stage1_results: Sequence[Mapping[str, Any]],
    stage2_results: Sequence[Mapping[str, Any]],
    label_to_model: Mapping[str, str],
    iteration_state: IterationState,
    criteria: EvaluationCriteria | None = None,
) -> tuple[list[dict[str, Any]], IterationRound]:
    """The specification's stage 2.5 function (council.refinement's rules), its models
    called over HTTP as the worker would call them."""
    return await refinement.stage2_5_refine_responses(
        user_query,
        stage1_results,
        stage2_results,
        label_to_model,
        iteration_state,
        criteria,
        query_models=query_models_parallel_with_prompts,
    )
