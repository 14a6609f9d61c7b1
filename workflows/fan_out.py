"""A stage's model calls: one activity per member, in parallel, and the straggler rule.

The deliberation hands a FanOut what it needs as values and callbacks (the request, the
record whose errors, late calls and usage the calls fill, a way to report events, whether
the run is stopping, what to do when a stage starts), so that this module imports nothing
from workflows.deliberation.

A stop cancels the calls still running; what completed is kept. A call that fails for good
is recorded in `errors` and left out. Once a quorum of a stage has replied, the late calls
are cut by the straggler rule (council.stragglers) and recorded in `late`: each is judged by
its own time, which the straggler watch (activities.call_clocks) reads from Temporal once
the patience has passed by the workflow's clock.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, is_cancelled_exception

with workflow.unsafe.imports_passed_through():
    from activities.call_clocks import CallClocks
    from council.calls import ChatMessage, ModelCall, ModelReply, Stage, joined
    from council.depth import NotNeeded
    from council.models import CallError, DeliberationRecord, DeliberationRequest, ToolCallEntry
    from council.progress import EventKind
    from council.stragglers import LateCall, LateCalls, StragglerPolicy, patience, quorum
    from council.structured import StructuredReply
    from council.tools import ToolUse

from workflows.calls import Routes, call_model
from workflows.tools import MemberTools

# The straggler watch polls Temporal; its own worker dying is noticed within this.
WATCH_HEARTBEAT = timedelta(seconds=5)
WATCH_RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1), maximum_interval=timedelta(seconds=5)
)
# Longest a watch runs before it is started again (it returns at once if a call is due).
WATCH_TIMEOUT = timedelta(hours=1)

Emit = Callable[..., None]
# The withheld tools a run's notice names (the record names them all).
WITHHELD_SHOWN = 3
# Whether the replies in hand (by model) make the outstanding calls (the models named) not
# needed: a stage that asks it stops once it says so (council.depth).
Enough = Callable[[dict[str, ModelReply], Sequence[str]], bool]


class FanOut:
    """The run's model calls."""

    def __init__(
        self,
        request: DeliberationRequest,
        record: DeliberationRecord,
        emit: Emit,
        stopping: Callable[[], bool],
        begin: Callable[[Stage, int, list[str]], None],
        stragglers: StragglerPolicy,
    ) -> None:
        self.request = request
        self.record = record
        self.emit = emit
        self.stopping = stopping
        self.begin = begin
        self.stragglers = stragglers
        self.routes = Routes(
            [*request.models, record.chairman, *filter(None, [request.auto.check_model])]
        )
        self.tools = MemberTools(request, self._unavailable, self._withheld)
        record.tools = list(request.tools)
        # The calls the straggler rule cut: (stage, round, model).
        self.cutting: set[tuple[Stage, int, str]] = set()
        # The calls cancelled as not needed (recorded in not_needed), and whether the
        # stage under way has all it needs.
        self.unneeded: set[tuple[Stage, int, str]] = set()
        self.enough = False
        # The replies of the stage under way as they arrive (the record query shows them
        # before the stage ends).
        self.arriving: tuple[Stage, int] | None = None
        self.arrived: dict[str, ModelReply] = {}

    def was_cut(self, stage: Stage, round_number: int, model: str) -> bool:
        return (stage, round_number, model) in self.cutting

    def was_dropped(self, stage: Stage, round_number: int, model: str) -> bool:
        """Cut by the straggler rule or cancelled as not needed: no failure."""
        place = (stage, round_number, model)
        return place in self.cutting or place in self.unneeded

    def missing(self, stage: Stage, round_number: int) -> dict[str, str]:
        """Why each call of a stage that gave no reply gave none: failed, or cut."""
        why = {
            e.model: e.describe()
            for e in self.record.errors
            if (e.stage, e.round) == (stage, round_number)
        }
        return why | {
            c.model: c.describe()
            for c in self.record.late
            if (c.stage, c.round) == (stage, round_number)
        }

    async def stage(
        self,
        stage: Stage,
        round_number: int,
        calls: dict[str, list[ChatMessage]],
        formats: dict[str, StructuredReply] | None = None,
        enough: Enough | None = None,
    ) -> dict[str, ModelReply]:
        """One activity per model, in parallel (each reply asked for in its JSON schema,
        where `formats` gives one); the replies that arrived, by model. With `enough`, the
        calls still out once it says the replies in hand suffice are cancelled and
        recorded as not needed."""
        if self.stopping() or not calls:
            return {}
        self.begin(stage, round_number, list(calls))
        self.arriving, self.arrived, self.enough = (stage, round_number), {}, False
        started = workflow.now()
        own: dict[str, float] = {}  # model -> seconds its reply took (its own)

        async def timed(model: str, messages: list[ChatMessage]) -> ModelReply | None:
            reply = await self.call(
                stage, round_number, model, messages, (formats or {}).get(model)
            )
            if reply is not None:
                own[model] = reply.answer_ms / 1000
            if enough is not None and not (self.enough or self.stopping()):
                outstanding = [m for m, t in tasks.items() if m != model and not t.done()]
                self.enough = bool(outstanding) and enough(self.arrived, outstanding)
            return reply

        tasks = {
            model: asyncio.create_task(timed(model, messages)) for model, messages in calls.items()
        }
        await self._await_late_calls(stage, round_number, tasks, own, started)
        for model, task in tasks.items():
            if task.done():
                continue
            if self.enough:
                self._not_needed(stage, round_number, model)
            elif not self.stopping():
                self._cut(stage, round_number, model, started)
            task.cancel()
        replies = {}
        for model, task in tasks.items():
            reply = await task
            if reply is not None:
                replies[model] = reply
        self.emit(
            EventKind.STAGE_COMPLETE,
            stage=stage,
            round=round_number,
            message=f"{len(replies)} of {len(calls)} completed",
        )
        return replies

    # ---- the straggler rule ---------------------------------------------------------

    def _settled(self, tasks: dict[str, asyncio.Task[ModelReply | None]]) -> bool:
        return self.stopping() or self.enough or all(task.done() for task in tasks.values())

    def _only_known_late(
        self, tasks: dict[str, asyncio.Task[ModelReply | None]], cut_before: set[str]
    ) -> bool:
        """Every call still running is a member the rule cut before: not waited for again."""
        return all(t.done() or m in cut_before for m, t in tasks.items())

    async def _quorum(
        self, tasks: dict[str, asyncio.Task[ModelReply | None]], replied: dict[str, float]
    ) -> bool:
        """Wait for a quorum (or the end); False when there is nothing more to wait for."""
        if self.stragglers.wait_for_all:
            await workflow.wait_condition(lambda: self._settled(tasks))
            return False
        await workflow.wait_condition(
            lambda: self._settled(tasks) or len(replied) >= quorum(len(tasks))
        )
        return not self._settled(tasks)

    def _waiting(self, stage: Stage, round_number: int, late: list[str], until: datetime) -> None:
        wait = (until - workflow.now()).total_seconds()
        self.emit(
            EventKind.WAITING,
            stage=stage,
            round=round_number,
            message=f"waiting for {', '.join(late)} until {until:%H:%M:%S} UTC",
            data={"models": late, "until": until.isoformat(), "seconds": round(wait, 3)},
        )

    async def _await_late_calls(
        self,
        stage: Stage,
        round_number: int,
        tasks: dict[str, asyncio.Task[ModelReply | None]],
        own: dict[str, float],
        started: datetime,
    ) -> None:
        """Once a quorum has replied, each late call gets the patience (from the replies'
        own durations) of its own time: no call can have used it before the stage's clock
        says so, and after that the straggler watch says which have. Those are cut as
        they become due; a member cut before is not waited for again."""
        if not await self._quorum(tasks, own):
            return
        cut_before = {model for _, _, model in self.cutting}
        if self._only_known_late(tasks, cut_before):
            return
        allowed = patience(self.stragglers, list(own.values()))
        until = started + timedelta(seconds=allowed)
        wait = (until - workflow.now()).total_seconds()
        self._waiting(stage, round_number, [m for m, t in tasks.items() if not t.done()], until)

        def over() -> bool:
            return self._settled(tasks) or self._only_known_late(tasks, cut_before)

        if wait > 0:
            with contextlib.suppress(TimeoutError):
                await workflow.wait_condition(over, timeout=timedelta(seconds=wait))
        while not over():
            late = [m for m, t in tasks.items() if not t.done() and m not in cut_before]
            watch = workflow.start_activity_method(
                CallClocks.await_late_calls,
                LateCalls(stage=stage, round=round_number, models=late, patience_seconds=allowed),
                summary=f"{stage.place(round_number)} · late calls: {', '.join(late)}",
                start_to_close_timeout=WATCH_TIMEOUT,
                heartbeat_timeout=WATCH_HEARTBEAT,
                retry_policy=WATCH_RETRY,
                cancellation_type=workflow.ActivityCancellationType.TRY_CANCEL,
            )
            await workflow.wait_condition(lambda: over() or watch.done())  # noqa: B023
            if not watch.done():
                watch.cancel()
                with contextlib.suppress(ActivityError, asyncio.CancelledError):
                    await watch
                return
            try:
                due = await watch
            except ActivityError:
                continue  # the watch timed out: start it again
            for model in due:
                if not tasks[model].done():
                    self._cut(stage, round_number, model, started)
                    tasks[model].cancel()

    def _of_call(
        self,
        kind: EventKind,
        stage: Stage,
        round_number: int,
        model: str,
        message: str | None = None,
        data: dict[str, Any] | None = None,
    ) -> None:
        """A progress event about one member's call, with its message and data where given."""
        given = {name: v for name, v in (("message", message), ("data", data)) if v is not None}
        self.emit(kind, stage=stage, round=round_number, model=model, **given)

    def _cut(self, stage: Stage, round_number: int, model: str, started: datetime) -> None:
        """The straggler rule cuts a late call: recorded in `late`, not as an error."""
        late = LateCall.cut(stage, round_number, model, (workflow.now() - started).total_seconds())
        self.cutting.add((stage, round_number, model))
        self.record.late.append(late)
        data = {"seconds": late.seconds, "effect": late.effect}
        self._of_call(EventKind.MODEL_LATE, stage, round_number, model, late.describe(), data)

    def _not_needed(self, stage: Stage, round_number: int, model: str) -> None:
        """A call the replies in hand made unnecessary: recorded in `not_needed`."""
        dropped = NotNeeded(stage=stage, round=round_number, model=model)
        self.unneeded.add((stage, round_number, model))
        self.record.not_needed.append(dropped)
        data = {"not_needed": True}
        self._of_call(EventKind.MODEL_CANCELLED, stage, round_number, model, dropped.reason, data)

    # ---- one call ---------------------------------------------------------------------

    async def call(
        self,
        stage: Stage,
        round_number: int,
        model: str,
        messages: list[ChatMessage],
        response_format: StructuredReply | None = None,
    ) -> ModelReply | None:
        """One member's call: its model call and, while the model asks for tools and the
        budget allows, the tool calls and the next model call with their results (council
        .tools). The reply that answered, its usage and time those of every model call
        made; None when a call failed for good (recorded), was cut or cancelled."""
        max_tokens = self.request.reply_tokens(stage)
        offered = await self.tools.offered(stage)
        steps: list[ModelReply] = []
        while True:
            tools = offered if self.tools.left(stage, round_number, model) else []
            call = self.request.model_call(
                stage, round_number, model, messages, max_tokens, response_format, tools
            )
            call.prior_answer_ms = sum(step.answer_ms for step in steps)
            reply = await self._model_call(call)
            if reply is None:
                return None
            steps.append(reply)
            self._account(stage, model, reply)
            if not (tools and reply.tool_calls):
                break
            try:
                more, uses = await self.tools.run(stage, round_number, model, reply)
            except asyncio.CancelledError:
                cut = self.was_cut(stage, round_number, model)
                dropped = self.was_dropped(stage, round_number, model)
                if not (dropped or self.stopping()):
                    raise
                # Cut or not needed (recorded), or stopped during its tool calls: they are
                # cancelled.
                why = (
                    "cancelled: the straggler rule cut the member"
                    if cut
                    else "cancelled: not needed"
                    if dropped
                    else "cancelled: stopped"
                )
                self._note_tools(
                    stage,
                    round_number,
                    model,
                    [ToolUse.cancelled(c, why) for c in reply.tool_calls],
                )
                if not dropped:
                    self._of_call(EventKind.MODEL_CANCELLED, stage, round_number, model)
                return None
            self._note_tools(stage, round_number, model, uses)
            messages = [*messages, *more]
        reply = joined(steps)
        if self.arriving == (stage, round_number):
            self.arrived[model] = reply
        self._of_call(
            EventKind.MODEL_COMPLETE,
            stage,
            round_number,
            model,
            data={
                "tokens": reply.usage.total_tokens,
                "latency_ms": reply.latency_ms,
                "served_by": reply.served_by,
                "truncated": reply.truncated,
                "finish_reason": reply.finish_reason,
                "structured": reply.structured,
                "provider": reply.provider,
                "attachments_cut": len(reply.attachment_cuts),
                "tool_calls": sum(len(step.tool_calls) for step in steps[:-1]),
            },
        )
        return reply

    async def _model_call(self, call: ModelCall) -> ModelReply | None:
        """One model call; None when it failed for good (recorded), was cut or cancelled."""
        stage, round_number, model = call.stage, call.round, call.model
        assert stage is not None
        try:
            return await call_model(call, self.request.policy, self.routes)
        except (ActivityError, asyncio.CancelledError) as err:
            if self.was_dropped(stage, round_number, model) and is_cancelled_exception(err):
                return None  # cut or not needed: _cut or _not_needed recorded it
            if self.stopping() and is_cancelled_exception(err):
                self.emit(EventKind.MODEL_CANCELLED, stage=stage, round=round_number, model=model)
                return None
            if isinstance(err, asyncio.CancelledError):
                raise
            self.failed(stage, round_number, model, err)
            return None

    def _account(self, stage: Stage, model: str, reply: ModelReply) -> None:
        """A model call's usage, the attachments cut for it, and (once per model) that it
        answered without tools."""
        self.record.usage.record(model, stage, reply.usage, reply.provider)
        for cut in reply.attachment_cuts:
            for entry in self.record.attachments:
                if entry.sha256 == cut.sha256 and entry.name == cut.name:
                    entry.note_cut(model, stage.value, cut)
        if reply.tools_refused and model not in self.record.without_tools:
            self.record.without_tools.append(model)
            self.emit(
                EventKind.NOTICE,
                stage=stage,
                model=model,
                message=f"{model} takes no tools: it answers without them",
            )

    def _unavailable(self, name: str, why: str) -> None:
        """A tool whose server could not say what it offers: not offered in this run."""
        line = f"{name}: {why}"
        self.record.tools_unavailable.append(line)
        self.emit(EventKind.NOTICE, message=f"the tool {line}; the members go on without it")

    def _withheld(self, lines: list[str]) -> None:
        """The tools their entries withhold (each a line): not offered in this run."""
        self.record.tools_withheld += lines
        shown = "; ".join(lines[:WITHHELD_SHOWN])
        more = f"; and {len(lines) - WITHHELD_SHOWN} more" if len(lines) > WITHHELD_SHOWN else ""
        self.emit(EventKind.NOTICE, message=f"tools withheld (not offered): {shown}{more}")

    def _note_tools(self, stage: Stage, round_number: int, model: str, uses: list[ToolUse]) -> None:
        for use in uses:
            self.record.tool_calls.append(
                ToolCallEntry(stage=stage, round=round_number, model=model, **use.model_dump())
            )
            data = {"tool": use.tool, "error": use.error, "duration_ms": use.duration_ms}
            self._of_call(EventKind.TOOL_CALL, stage, round_number, model, use.describe(), data)

    def failed(
        self,
        stage: Stage,
        round_number: int,
        model: str,
        err: ActivityError | None = None,
        message: str | None = None,
        error_type: str | None = None,
    ) -> CallError:
        """Record a call that failed for good: the activity's error, or (a reply that is
        no answer) the message given."""
        provider = None
        if err is not None:
            cause: Any = err.cause if err.cause is not None else err
            details = getattr(cause, "details", None) or ()
            message = getattr(cause, "message", None) or str(cause)
            error_type = getattr(cause, "type", None) or type(cause).__name__
            provider = details[0] if details and isinstance(details[0], str) else None
        error = CallError(
            stage=stage,
            round=round_number,
            model=model,
            message=message or "failed",
            error_type=error_type,
            provider=provider,
        )
        self.record.errors.append(error)
        self._of_call(EventKind.MODEL_FAILED, stage, round_number, model, error.message)
        return error
