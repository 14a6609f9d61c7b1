"""A member's tools, from a workflow: the run reads what its tools offer once (an
activity, kept in history: a replay never asks a server again), and runs each tool call a
model asks for as an activity of its own, with the tool's timeout and attempts, parallel
calls in parallel. The budgets (council.tools.ToolBudget) are kept here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError

with workflow.unsafe.imports_passed_through():
    from activities.tools import ToolBox
    from council.calls import ChatMessage, ModelReply, Stage
    from council.models import DeliberationRequest
    from council.tools import (
        MAX_CALLS_PER_REPLY,
        ToolCall,
        ToolResult,
        ToolRun,
        ToolSpec,
        ToolUse,
        result_message,
    )

# Reading what the tools offer: each MCP server is started or asked once.
LIST_TIMEOUT = timedelta(seconds=60)
LIST_RETRY = RetryPolicy(maximum_attempts=3, initial_interval=timedelta(seconds=1))
# Beyond a tool's own timeout (which the worker enforces, and reports as the call's
# failure), what Temporal allows the attempt: a worker that dies mid-call is noticed then.
ATTEMPT_MARGIN = timedelta(seconds=10)
# A tool call heartbeats every second (activities.tools): a worker that died during one is
# noticed within this, and a stop's cancellation reaches it at its next beat.
TOOL_HEARTBEAT = timedelta(seconds=5)


class MemberTools:
    """The run's tools: what they offer, and what of the budget is left."""

    def __init__(
        self,
        request: DeliberationRequest,
        unavailable: Callable[[str, str], None],
        withheld: Callable[[list[str]], None],
    ) -> None:
        """`unavailable`: told of each tool whose server could not say what it offers;
        `withheld`: of the tools their entries withhold (each a line), once."""
        self.request = request
        self.unavailable = unavailable
        self.withheld = withheld
        self.budget = request.tool_options.budget()
        self.specs: list[ToolSpec] | None = None
        self._reading = asyncio.Lock()  # the first calls of a run come at once

    async def offered(self, stage: Stage) -> list[ToolSpec]:
        """The functions this stage's calls are offered (none where the stage uses no
        tools); the first time, read from the worker."""
        if not self.request.uses_tools(stage):
            return []
        async with self._reading:
            if self.specs is None:
                offer = await workflow.execute_activity_method(
                    ToolBox.list_tools,
                    self.request.tools,
                    summary=f"the tools offered: {', '.join(self.request.tools)}",
                    start_to_close_timeout=LIST_TIMEOUT,
                    retry_policy=LIST_RETRY,
                )
                self.specs = offer.specs
                for name, why in offer.unavailable.items():
                    self.unavailable(name, why)
                if offer.withheld:
                    self.withheld(offer.withheld)
        return self.specs

    def left(self, stage: Stage, round_number: int, model: str) -> int:
        return self.budget.left(stage.value, round_number, model)

    async def run(
        self, stage: Stage, round_number: int, model: str, reply: ModelReply
    ) -> tuple[list[ChatMessage], list[ToolUse]]:
        """The tool calls of a reply, run (those the budget allows, at most
        MAX_CALLS_PER_REPLY, in parallel): the messages the member's next call carries
        (its reply, then a result for each call), and what the record keeps of each."""
        asked = reply.tool_calls
        allowed = min(self.left(stage, round_number, model), MAX_CALLS_PER_REPLY)
        run, refused = asked[:allowed], asked[allowed:]
        self.budget.spend(stage.value, round_number, model, len(run))
        by_name = {spec.name: spec for spec in self.specs or []}
        place = stage.place(round_number)
        results = await asyncio.gather(
            *(self._one(by_name.get(call.name), call, model, place) for call in run)
        )
        messages = [ChatMessage(role="assistant", content=reply.content, tool_calls=asked)]
        uses: list[ToolUse] = []
        for call, result in zip(run, results, strict=True):
            messages.append(tool_message(call, result))
            uses.append(ToolUse.of(call, result))
        for call in refused:
            why = "not run: the tool-call budget is spent"
            messages.append(tool_message(call, ToolResult(error=why)))
            uses.append(ToolUse.not_run(call, why))
        return messages, uses

    async def _one(
        self, spec: ToolSpec | None, call: ToolCall, model: str, place: str
    ) -> ToolResult:
        if spec is None:
            return ToolResult(error=f"there is no tool named {call.name[:64]!r}")
        run = ToolRun(
            spec=spec,
            call=call,
            max_bytes=self.request.tool_options.result_bytes,
            model=model,
            place=place,
        )
        started = workflow.now()
        try:
            return await workflow.execute_activity_method(
                ToolBox.call_tool,
                run,
                summary=run.summary,
                start_to_close_timeout=timedelta(seconds=spec.timeout_seconds) + ATTEMPT_MARGIN,
                heartbeat_timeout=TOOL_HEARTBEAT,
                retry_policy=RetryPolicy(
                    maximum_attempts=spec.max_attempts, initial_interval=timedelta(seconds=1)
                ),
            )
        except ActivityError as err:
            cause = err.cause if err.cause is not None else err
            message = getattr(cause, "message", None) or str(cause)
            took = int((workflow.now() - started).total_seconds() * 1000)
            return ToolResult(error=message[:300], duration_ms=took)


def tool_message(call: ToolCall, result: ToolResult) -> ChatMessage:
    return ChatMessage(role="tool", content=result_message(call, result), tool_call_id=call.id)
