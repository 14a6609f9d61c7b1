"""Tool calls are durable: a worker SIGKILLed while members' tool calls run resumes on a
new worker process without running again a call that had completed (a call in flight at
the kill runs again: at least once), and a stop while a tool call hangs ends the stage
with what it has, the hung call's activity cancelled.

The tool is a small MCP server over stdio, written here: `slow.evaluate` (offered as
`slow__evaluate`, which the simulator's members call with the question's arithmetic). The
first TOOL_FREE executions answer at once, the others wait until the go file exists; each
execution numbers itself (under a lock) and writes a line when it starts, completes or is
abandoned (its worker gone, its session closed), and its result names its number, so the
run's history says which execution served which activity.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from temporalio.api.enums.v1 import EventType
from temporalio.client import WorkflowHandle
from temporalio.testing import WorkflowEnvironment

from activities.tools import ToolBox
from app.temporal import connection
from council.calls import Stage
from council.models import DeliberationRecord
from council.progress import EventKind
from council.tool_config import Tools
from council.tools import ToolResult, ToolRun
from harness.processes import ROOT, Process, start_worker
from simulator import SimulatorServer
from tests.temporal_fixtures import TEST_POLICY, council_worker, request, worker_env
from workflows.deliberation import Deliberation

MEMBERS = ["sim/atlas", "sim/borealis", "sim/cirrus"]
QUESTION = "What is 37*91+12?"
EXPRESSION = "37*91+12"
# Members use the tool when answering (and refining); reviewers and the chairman do not.
MEMBERS_ONLY = {"reviewers": False, "chairman": False}
# The killed run's tool timeout: a call may start a server (a second or more of imports
# on a busy machine), and the test kills the worker before the waiting calls time out.
TIMEOUT = 15

SERVER = '''
"""An MCP server whose `evaluate` waits for a go file (after TOOL_FREE free executions)."""

import asyncio
import fcntl
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, {examples!r})
from calculator_mcp import evaluate_expression, shown  # noqa: E402
from mcp.server.mcpserver import MCPServer  # noqa: E402
from mcp.types import ToolAnnotations  # noqa: E402

LOG = Path(os.environ["TOOL_LOG"])
GO = Path(os.environ["TOOL_GO"])
FREE = int(os.environ["TOOL_FREE"])
server = MCPServer("slow", log_level="WARNING")


def note(event, number=None, **fields):
    """A line of the log; a start is numbered after the starts before it."""
    with open(LOG, "a+") as log:
        fcntl.flock(log, fcntl.LOCK_EX)
        if number is None:
            log.seek(0)
            number = 1 + sum(json.loads(line)["event"] == "start" for line in log)
        line = {{"event": event, "n": number, "pid": os.getpid(), "parent": os.getppid()}}
        log.write(json.dumps({{**line, **fields}}) + "\\n")
        log.flush()
    return number


@server.tool(annotations=ToolAnnotations(read_only_hint=True, destructive_hint=False))
async def evaluate(expression: str) -> str:
    """Evaluate an arithmetic expression, such as "2*(3+4)"."""
    parent = os.getppid()
    number = note("start", expression=expression)
    finished = False
    try:
        while number > FREE and not GO.exists():
            if os.getppid() != parent:  # the worker is gone: nobody reads the answer
                note("abandoned", number, why="orphaned")
                os._exit(0)
            await asyncio.sleep(0.02)
        value = shown(evaluate_expression(expression))
        note("done", number, expression=expression)
        finished = True
        return f"execution {{number}}: {{expression}} = {{value}}"
    finally:
        if not finished:
            note("abandoned", number, why="cancelled")


server.run()
'''


@dataclass
class SlowTool:
    """The tool server's files: its script, its log, the go file."""

    root: Path

    @property
    def script(self) -> Path:
        return self.root / "slow_mcp.py"

    @property
    def log(self) -> Path:
        return self.root / "tool.log"

    @property
    def go(self) -> Path:
        return self.root / "go"

    def write(self) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        self.script.write_text(SERVER.format(examples=str(ROOT / "examples")))

    def entry(self, free: int, timeout: float, max_attempts: int) -> dict[str, Any]:
        return {
            "command": [sys.executable, str(self.script)],
            "env": {"TOOL_LOG": str(self.log), "TOOL_GO": str(self.go), "TOOL_FREE": str(free)},
            "timeout": timeout,
            "max_attempts": max_attempts,
            # Unconfined: the server writes its log beside its script, and names the worker
            # by its parent's process id (a confined one has a PID namespace of its own).
            "trusted": True,
        }

    def lines(self) -> list[dict[str, Any]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines() if line]

    def numbers(self, event: str) -> list[int]:
        return [line["n"] for line in self.lines() if line["event"] == event]

    def unfinished(self) -> set[int]:
        """Executions started that neither completed nor were abandoned (yet)."""
        ended = set(self.numbers("done")) | set(self.numbers("abandoned"))
        return set(self.numbers("start")) - ended


def toml_entry(name: str, entry: dict[str, Any]) -> str:
    """council.toml's [tools.NAME] for an entry (json's strings are TOML's basic strings)."""
    env = ", ".join(f"{key} = {json.dumps(value)}" for key, value in entry["env"].items())
    return (
        f"[tools.{name}]\n"
        f"command = {json.dumps(entry['command'])}\n"
        f"env = {{ {env} }}\n"
        f"timeout = {entry['timeout']}\n"
        f"max_attempts = {entry['max_attempts']}\n"
        f"trusted = {json.dumps(entry.get('trusted', False))}\n"
    )


@dataclass
class ToolActivity:
    """One call_tool activity in a run's history."""

    scheduled_id: int
    run: ToolRun
    attempt: int | None = None  # the ActivityTaskStarted's: the attempt that ended it
    ends: list[str] = field(default_factory=list)  # completed, failed, timed out, canceled
    result: ToolResult | None = None
    cancel_requested: bool = False

    @property
    def execution(self) -> int | None:
        """The tool server's execution that produced the result."""
        text = self.result.text if self.result else ""
        if not text.startswith("execution "):
            return None
        return int(text.split()[1].rstrip(":"))


ENDS = {
    EventType.EVENT_TYPE_ACTIVITY_TASK_COMPLETED: ("completed", "activity_task_completed"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_FAILED: ("failed", "activity_task_failed"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_TIMED_OUT: ("timed out", "activity_task_timed_out"),
    EventType.EVENT_TYPE_ACTIVITY_TASK_CANCELED: ("canceled", "activity_task_canceled"),
}


async def tool_activities(handle: WorkflowHandle[Any, Any]) -> dict[int, ToolActivity]:
    """The run's call_tool activities by scheduled event id, as its history tells them."""
    converter = connection.data_converter()
    found: dict[int, ToolActivity] = {}
    async for event in handle.fetch_history_events():
        kind = event.event_type
        if kind == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            attrs = event.activity_task_scheduled_event_attributes
            if attrs.activity_type.name == ToolBox.call_tool.__name__:
                [run] = await converter.decode(attrs.input.payloads, [ToolRun])
                found[event.event_id] = ToolActivity(event.event_id, run)
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_STARTED:
            started = event.activity_task_started_event_attributes
            if started.scheduled_event_id in found:
                found[started.scheduled_event_id].attempt = started.attempt
        elif kind == EventType.EVENT_TYPE_ACTIVITY_TASK_CANCEL_REQUESTED:
            asked = event.activity_task_cancel_requested_event_attributes
            if asked.scheduled_event_id in found:
                found[asked.scheduled_event_id].cancel_requested = True
        elif kind in ENDS:
            name, attribute = ENDS[kind]
            attrs = getattr(event, f"{attribute}_event_attributes")
            activity = found.get(attrs.scheduled_event_id)
            if activity is None:
                continue
            activity.ends.append(name)
            if name == "completed":
                [activity.result] = await converter.decode(attrs.result.payloads, [ToolResult])
    return found


async def eventually(check: Callable[[], Awaitable[bool]], what: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not await check():
        assert time.monotonic() < deadline, f"{what}: not within {timeout:g} s"
        await asyncio.sleep(0.05)


async def test_worker_killed_during_tool_calls_resumes_without_repeating_a_completed_one(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    # One execution answers at once, the others wait for the go file. The tool's timeout
    # (which the worker enforces, starting the server included) leaves time to kill the
    # worker while they wait; Temporal notices the killed attempts after it and its margin
    # (workflows.tools.ATTEMPT_MARGIN): a tool call does not heartbeat.
    tool = SlowTool(tmp_path / "tool")
    tool.write()
    entry = tool.entry(free=1, timeout=TIMEOUT, max_attempts=3)
    config = tmp_path / "council.toml"
    config.write_text(toml_entry("slow", entry))
    queue = f"council-tool-kill-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal, sim, queue, COUNCIL_CONFIG=str(config))
    log = tmp_path / "worker.log"
    first = await asyncio.to_thread(start_worker, env, log)
    second: Process | None = None
    try:
        handle = await temporal.client.start_workflow(
            Deliberation.run,
            request(
                QUESTION,
                models=MEMBERS,
                max_rounds=1,
                min_rounds=1,
                tools=["slow"],
                tool_options=MEMBERS_ONLY,
            ),
            id=f"tool-kill-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
            result_type=DeliberationRecord,
        )
        began = time.monotonic()

        async def one_done_two_waiting() -> bool:
            if len(tool.numbers("done")) < 1 or len(tool.numbers("start")) < len(MEMBERS):
                return False
            activities = (await tool_activities(handle)).values()
            return sum(a.ends == ["completed"] for a in activities) >= 1

        # Every member's stage-1 call has started at the server; one has completed, and
        # Temporal has its result (the others wait for the go file).
        await eventually(one_done_two_waiting, "one tool call done, two waiting", 30)
        before = await tool_activities(handle)
        # (What the server has done so far: nothing changes before the go file but the
        # abandonment, which the kill sets off.)
        done_before = set(tool.numbers("done"))
        in_flight = tool.unfinished()
        first.kill()
        killed_at = time.monotonic()
        completed_before = {i for i, a in before.items() if a.ends == ["completed"]}
        running_before = {i for i, a in before.items() if not a.ends}
        assert len(done_before) == len(completed_before) == 1
        assert len(in_flight) == len(running_before) == len(MEMBERS) - 1, (
            f"the waiting calls should still wait (a tool timeout of {TIMEOUT} s too short "
            f"for this machine?): {tool.lines()}"
        )

        # The servers of the calls in flight see their worker gone and give up.
        async def abandoned() -> bool:
            return not (tool.unfinished() & in_flight)

        await eventually(abandoned, "the orphaned tool servers to give up", 20)

        second = await asyncio.to_thread(start_worker, env, log)
        tool.go.touch()
        record = await asyncio.wait_for(handle.result(), 90)
        finished_at = time.monotonic()
    finally:
        tool.go.touch()
        for worker in (first, second):
            if worker is not None:
                worker.stop()

    assert record.status == "completed" and record.errors == []
    assert {r.model for r in record.stage1} == set(MEMBERS)
    assert all("3379" in r.response for r in record.stage1)  # the tool's value, used

    activities = await tool_activities(handle)
    lines = tool.lines()
    done = [line for line in lines if line["event"] == "done"]
    # Each tool call activity completed exactly once (nothing failed or timed out for
    # good), and its result names the server execution that produced it.
    assert activities and all(a.ends == ["completed"] for a in activities.values())
    served = [a.execution for a in activities.values()]
    assert None not in served and len(set(served)) == len(served)
    # Every execution that completed at the server served exactly one activity: none ran
    # again for a call that had completed, none completed in vain.
    assert Counter(line["n"] for line in done) == Counter(served)
    # The call completed before the kill: its first attempt's result, never run again.
    for index in completed_before:
        assert activities[index].attempt == 1
        assert activities[index].execution in done_before
        assert activities[index].result == before[index].result
    # The calls in flight at the kill ran again (at least once) on the new worker.
    for index in running_before:
        assert (activities[index].attempt or 0) >= 2
        assert activities[index].execution not in done_before | in_flight
    # The server saw the calls in flight start, then abandoned; no other was abandoned.
    gave_up = [line for line in lines if line["event"] == "abandoned"]
    assert {line["n"] for line in gave_up} == in_flight
    assert Counter(line["n"] for line in lines if line["event"] == "start") == Counter(
        [*served, *in_flight]
    )
    # Before the kill, the executions ran under the first worker; after it, the second.
    parents = {line["n"]: line["parent"] for line in lines if line["event"] == "start"}
    assert {parents[n] for n in done_before | in_flight} == {first.pid}
    assert second is not None
    assert {parents[n] for n in set(served) - done_before} == {second.pid}

    # The record lists each tool call once, as the history has it.
    listed = [
        (Stage(c.stage).place(c.round), c.model, c.tool, c.arguments)
        for c in record.tool_calls
        if not c.refused
    ]
    scheduled = [
        (a.run.place, a.run.model, a.run.call.name, a.run.call.arguments)
        for a in activities.values()
    ]
    assert Counter(listed) == Counter(scheduled)
    excerpts = Counter(c.excerpt.split(":")[0] for c in record.tool_calls if not c.refused)
    assert excerpts == Counter(f"execution {n}" for n in served)
    assert not [c for c in record.tool_calls if c.stage in (Stage.REVIEW, Stage.SYNTHESIS)]
    print(
        f"\ntool calls: {len(activities)}; before the kill {killed_at - began:.1f} s, "
        f"after it {finished_at - killed_at:.1f} s; attempts "
        f"{sorted(a.attempt or 0 for a in activities.values())}"
    )


async def test_a_stop_during_a_tool_call_ends_the_stage_with_what_it_has(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    # One execution answers at once; the others hang (their timeout far beyond the test's
    # wait for the stop) until the go file, created once the run has ended.
    tool = SlowTool(tmp_path / "tool")
    tool.write()
    timeout = 120
    tools = Tools.of({"slow": tool.entry(free=1, timeout=timeout, max_attempts=1)})
    async with council_worker(temporal.client, sim, toolbox=ToolBox(tools)) as council:
        try:
            handle = await council.start(
                QUESTION,
                models=MEMBERS,
                max_rounds=1,
                min_rounds=1,
                policy=TEST_POLICY,
                tools=["slow"],
                tool_options=MEMBERS_ONLY,
            )

            async def one_answered_two_stuck() -> bool:
                if len(tool.numbers("start")) < len(MEMBERS):
                    return False
                progress = await handle.query(Deliberation.progress, 0)
                return any(
                    e.kind == EventKind.MODEL_COMPLETE and e.stage == Stage.ANSWER
                    for e in progress.events
                )

            # One member has its tool's result and has answered; two wait on their tool.
            await eventually(one_answered_two_stuck, "one answer, two tool calls hanging", 30)
            stuck = tool.unfinished()
            assert len(stuck) == len(MEMBERS) - 1
            stopped_at = time.monotonic()
            await handle.signal(Deliberation.stop, "enough waiting")
            record = await asyncio.wait_for(handle.result(), 30)
            took = time.monotonic() - stopped_at
            progress = await handle.query(Deliberation.progress, 0)

            # The cancellation reaches the worker at the calls' next heartbeat: their
            # servers are closed without the go file.
            async def abandoned() -> bool:
                return not (tool.unfinished() & stuck)

            await eventually(abandoned, "the stopped tool calls' servers to be closed", 30)
        finally:
            tool.go.touch()

            async def released() -> bool:
                return not tool.unfinished()

            await eventually(released, "the hanging tool servers to finish", 30)

    # The run ended long before the tool's timeout, with what it had: the stop recorded.
    assert took < timeout / 4
    assert record.status == "completed" and record.errors == []
    assert record.stop_reason == "enough waiting"
    assert record.iteration.terminated_reason == "user_stopped"

    activities = await tool_activities(handle)
    by_model = {a.run.model: a for a in activities.values()}
    assert len(activities) == len(by_model) == len(MEMBERS)
    [answered] = [m for m, a in by_model.items() if a.ends == ["completed"]]
    hung = [a for m, a in by_model.items() if m != answered]
    # The hung calls' activities were cancelled (Temporal was asked; the workflow did not
    # wait for the worker to confirm) and never completed.
    assert all(a.cancel_requested and "completed" not in a.ends for a in hung)
    assert not by_model[answered].cancel_requested
    # Only the member whose tool answered has an answer; the record lists its call alone.
    assert [r.model for r in record.stage1] == [answered]
    assert "3379" in record.stage1[0].response
    # The record lists its call, and the two the stop cancelled, as such.
    listed = sorted((c.model, c.tool, c.error) for c in record.tool_calls)
    assert listed == sorted(
        [(answered, "slow__evaluate", None)]
        + [(a.run.model, "slow__evaluate", "cancelled: stopped") for a in hung]
    )
    cancelled = {e.model for e in progress.events if e.kind == EventKind.MODEL_CANCELLED}
    assert cancelled == {a.run.model for a in hung}
    assert record.rounds == []
    # The stage ended with what it had; the synthesis was written from the one answer.
    ended = [e.message for e in progress.events if e.kind == EventKind.STAGE_COMPLETE]
    assert ended[0] == f"1 of {len(MEMBERS)} completed"
    assert record.stage3 is not None
    print(f"\nstop to end of run {took:.2f} s; stage 3 {'written' if record.stage3 else 'none'}")
