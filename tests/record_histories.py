"""Record the workflow histories the replay tests run against the current code.

    .venv/bin/python -m tests.record_histories [NAME ...] [--force]

Runs are pinned to the build they started on (app.temporal.deployment), so the histories are those
of the current build's protocol, recorded at the package's version (pyproject.toml): a
protocol change is a new build, so its version is raised and its histories are recorded
again (`--force`), replacing those of the build before (whose runs finish on their own
workers). The recorder refuses to record over histories of the package's own version, and
tests/test_replay.py fails while the histories are of another build. It records the
scenarios that have no file yet (or those named). Add a scenario for each path a change
takes. Each scenario runs on a throwaway dev server with the simulator, through a payload
store in a temporary directory as the suite runs; the committed file holds every stored
payload in place of its reference, so that it replays without the store.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import uuid
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from temporalio.client import Client, WorkflowHistory
from temporalio.common import TypedSearchAttributes

from activities.tools import ToolBox
from app.requests.attachments import from_bytes
from app.store import store
from app.temporal import connection, deployment
from council.calls import Stage
from council.progress import EventKind
from council.steering import HumanCritique, RoundsChange
from council.tool_config import Tools
from harness.processes import free_port, start_temporal
from runs.attributes import at_start, ensure_search_attributes
from simulator import SimulatorConfig, SimulatorServer
from tests.temporal_fixtures import council_worker, request
from tests.test_depth import PROBLEM, SETTLED
from workflows.deliberation import Deliberation

HERE = Path(__file__).parent / "histories"
# A problem the simulator knows (datasets/arithmetic_logic.jsonl), whose first answers split
# by value when its members are set to disagree.
SPLIT_QUESTION = (
    "A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. How many "
    "cents does the ball cost?"
)
ROOT = Path(__file__).resolve().parent.parent


def recorded_builds(path: Path) -> set[str]:
    """The builds of the workers that ran a recorded history's workflow tasks (each
    completed task names its worker's deployment version; "" an unversioned worker)."""
    events = json.loads(path.read_text())["events"]
    return {
        event["workflowTaskCompletedEventAttributes"]
        .get("deploymentVersion", {})
        .get("buildId", "")
        for event in events
        if "workflowTaskCompletedEventAttributes" in event
    }


def refusal(directory: Path, names: Iterable[str], version: str) -> str | None:
    """Why these scenarios may not be recorded into `directory` at `version`: histories of
    that build are there already (its protocol is recorded; a changed one is a new build)."""
    recorded = [
        name
        for name in names
        if (directory / f"{name}.json").exists()
        and version in recorded_builds(directory / f"{name}.json")
    ]
    if not recorded:
        return None
    which = ", ".join(recorded) if len(recorded) <= 3 else f"{len(recorded)} scenarios"
    return (
        f"build {version} has its histories recorded already ({which}): a "
        "protocol change is a new build, so raise the version in pyproject.toml, then "
        "record again with --force"
    )


async def _until_stage(handle, stage: Stage) -> None:
    while True:
        progress = await handle.query(Deliberation.progress, 0)
        if any(e.kind == EventKind.STAGE_START and e.stage == stage for e in progress.events):
            return
        await asyncio.sleep(0.05)


SCENARIOS = {
    "quality_threshold_met": ({}, None),
    "max_rounds_two_rounds": (
        {"quality_threshold": 5, "max_rounds": 2, "stop_on_convergence": False},
        None,
    ),
    "failing_model_and_chairman_fallback": (
        {"chairman": "sim/oracle"},
        {"sim/drift": {"errors": {"500": 1.0}}, "sim/oracle": {"errors": {"503": 1.0}}},
    ),
    "stopped_mid_refinement": ({"quality_threshold": 5}, {"*": {"latency": 0.3}}),
    "invalid_request": ({"max_rounds": 9}, None),
    # Good answers still refine once (min rounds); a failed round ends the loop; the cost
    # budget.
    "min_rounds_good_answers_refine_once": (
        {"models": ["sim/atlas", "sim/borealis", "sim/drift"]},
        {"*": {"rating": 4}},
    ),
    "every_refinement_failed_error_occurred": (
        {"quality_threshold": 5, "max_rounds": 2},
        {"*": {"errors": {"503": 1.0}, "stages": ["stage2_5"]}},
    ),
    "cost_limit_reached": (
        {"quality_threshold": 5, "max_rounds": 3, "max_cost_usd": 5.0},
        {"*": {"cost_per_million_tokens": 1000.0}},
    ),
    # The user's critique (framed, within the feedback budget) and a change of the maximum
    # rounds, each with a deadline.
    "user_critique_and_more_rounds": (
        {"quality_threshold": 5, "max_rounds": 1, "stop_on_convergence": False},
        {"*": {"latency": 0.3}},
    ),
    # Token limits, reviews and refinements asked for as JSON (the provider refuses
    # json_schema and takes json_object), no critique from noise.
    "structured_reviews_and_token_limits": (
        {"quality_threshold": 5, "max_rounds": 1, "max_tokens": {"answer": 300}},
        {"*": {"structured": True, "refuse_formats": {"json_schema": 500}}},
    ),
    # A harsh reviewer's dissent reaches the chairman, whose synthesis comes back as JSON
    # with the points of disagreement.
    "agreement_dissent_and_structured_synthesis": (
        {"quality_threshold": 5, "max_rounds": 1, "stop_on_convergence": False},
        {"*": {"rating": 4, "structured": True}, "sim/drift": {"rating": 1}},
    ),
    # The straggler rule (the straggler watch reads the calls' own time): a member cut in
    # stage 1, a review cut, a refinement cut.
    "stragglers_cut_in_each_stage": (
        {
            "quality_threshold": 5,
            "max_rounds": 1,
            "stop_on_convergence": False,
            "stragglers": {"grace_seconds": 0.5},
        },
        {
            "*": {"latency": 0.2},
            "sim/cirrus": {"latency": 0.2, "slow": 1.0, "max_faults": 1, "stages": ["stage1"]},
            "sim/drift": {"latency": 0.2, "slow": 1.0, "max_faults": 1, "stages": ["stage2"]},
            "sim/borealis": {
                "latency": 0.2,
                "slow": 1.0,
                "max_faults": 1,
                "stages": ["stage2_5"],
            },
        },
    ),
    # A call retried after a 429 outlives the patience by the stage's clock: the watch
    # starts, finds it answering for less than the patience, and is cancelled when it ends.
    "retried_call_not_cut": (
        {"max_rounds": 1, "stragglers": {"grace_seconds": 0.5}},
        {
            "*": {"latency": 0.2},
            "sim/drift": {
                "latency": 0.2,
                "errors": {"429": 1.0},
                "retry_after": 1.5,
                "max_faults": 1,
                "stages": ["stage1"],
            },
        },
    ),
    # A refinement and the chairman that echo their prompts (no answers), and the final
    # answer in a client's JSON Schema, repaired once.
    "echoes_and_answer_format": (
        {
            "quality_threshold": 5,
            "max_rounds": 1,
            "stop_on_convergence": False,
            "chairman": "sim/oracle",
            "answer_format": {
                "name": "verdict",
                "json_schema": {
                    "type": "object",
                    "properties": {"answer": {"type": "string"}},
                    "required": ["answer"],
                },
            },
        },
        {
            "*": {"latency": 0.1},
            "sim/drift": {"echo": 1.0, "stages": ["stage2_5"]},
            "sim/oracle": {"echo": 1.0, "stages": ["stage3"], "max_faults": 1},
        },
    ),
    # A small text file that every member, reviewer and the chairman is shown.
    "small_text_attachment": (
        {
            "max_rounds": 1,
            "attachments": [
                from_bytes(
                    "notes.md",
                    b"# Notes\n\n- SQLite: one file, one writer.\n- PostgreSQL: a server.\n",
                ).model_dump()
            ],
        },
        None,
    ),
    # Members that calculate with the example MCP server's tools: each tool call an
    # activity, its result in the member's next call; a server that cannot start is not
    # offered; a provider that takes no tools answers without them.
    "members_use_tools": (
        {
            "question": "What is 37*91+12?",
            "max_rounds": 1,
            "tools": ["calc", "gone"],
        },
        {"sim/drift": {"tools": False}},
    ),
    # Depth auto: members who state one value end after stage 1 (the gate by values) ...
    "depth_auto_agreement_after_stage1": (
        {
            "question": PROBLEM["question"],
            "models": ["sim/atlas", "sim/borealis", "sim/drift"],
            "depth": "auto",
        },
        None,
    ),
    # The first answers split by the value they state (5, 5, 6 and 5 cents): the report
    # names the split and who holds each value, the chairman resolves it by its number.
    "values_split_named_in_the_report": (
        {"question": SPLIT_QUESTION, "max_rounds": 1, "min_rounds": 1},
        None,
    ),
    # Depth auto: first answers whose values differ deliberate, no check asked (the values
    # outweigh any check).
    "depth_auto_values_differ": (
        {"question": SPLIT_QUESTION, "max_rounds": 1, "min_rounds": 1, "depth": "auto"},
        None,
    ),
    # ... and members who give free answers go to the agreement check, disagree, and
    # deliberate on the difference; a review round stops once its leader is settled (atlas's
    # own review, held back, is cancelled as not needed).
    "depth_auto_check_and_settled_reviews": (
        {"max_rounds": 1, "min_rounds": 1, "stop_on_convergence": False, "depth": "auto"},
        SETTLED,
    ),
}
# The share of problems on which the simulated members disagree, where a scenario sets it.
DISAGREE = {
    "depth_auto_agreement_after_stage1": 0.0,
    "depth_auto_check_and_settled_reviews": 1.0,
    "values_split_named_in_the_report": 1.0,
    "depth_auto_values_differ": 1.0,
}
# The tools of the recording worker.
TOOLS = Tools.of(
    {
        "calc": {"command": [sys.executable, str(ROOT / "examples" / "calculator_mcp.py")]},
        "gone": {"command": ["no-such-tool-server"], "max_attempts": 1},
    }
)


# Started as a client other than the front door starts a run: no search attributes.
STARTED_ELSEWHERE = {"quality_threshold_met"}


async def record(client: Client, sim: SimulatorServer, names: list[str]) -> None:
    async with council_worker(client, sim, toolbox=ToolBox(TOOLS)) as council:
        for name in names:
            fields, faults = SCENARIOS[name]
            sim.set_faults(faults)
            sim.simulator.config.disagree = DISAGREE.get(name)
            wid = f"history-{name}-{uuid.uuid4().hex[:6]}"
            handle = await client.start_workflow(
                Deliberation.run,
                request(**fields),
                id=wid,
                task_queue=council.task_queue,
                # As the front door starts a run (its first place with it); one started
                # by any other client sets it itself.
                search_attributes=TypedSearchAttributes.empty
                if name in STARTED_ELSEWHERE
                else at_start(wid),
            )
            if name == "stopped_mid_refinement":
                await _until_stage(handle, Stage.REFINE)
                await handle.signal(Deliberation.stop, "recorded stop")
            if name == "user_critique_and_more_rounds":
                await _until_stage(handle, Stage.REVIEW)
                deadline = datetime.now(UTC) + timedelta(seconds=30)
                critique = HumanCritique(
                    model="sim/atlas", text="Name a version.", deadline=deadline
                )
                await handle.execute_update(Deliberation.add_critique, critique)
                await handle.execute_update(
                    Deliberation.set_max_rounds, RoundsChange(rounds=2, deadline=deadline)
                )
            try:
                outcome = (await handle.result()).iteration.terminated_reason
            except Exception as error:
                outcome = f"failed ({error})"
            history = await standalone(client, await handle.fetch_history())
            (HERE / f"{name}.json").write_text(
                json.dumps(without_stacks(json.loads(history.to_json())), indent=1) + "\n"
            )
            print(f"recorded {name}: {outcome}, {len(history.events)} events")


def without_stacks(value: Any) -> Any:
    """The history with its failures' stack traces left out: they name the recording
    machine's files, and a replay never reads them."""
    if isinstance(value, dict):
        return {k: "" if k == "stackTrace" else without_stacks(v) for k, v in value.items()}
    if isinstance(value, list):
        return [without_stacks(v) for v in value]
    return value


async def standalone(client: Client, history: WorkflowHistory) -> WorkflowHistory:
    """The history with each stored payload in place of its reference."""
    storage = client.data_converter.external_storage
    for event in history.events:
        for payload in store.payloads_in(event):
            if store.reference(payload) is not None:
                [stored] = await store.resolve(storage, [payload], namespace=client.namespace)
                payload.CopyFrom(stored)
    return history


async def main(argv: list[str]) -> None:
    force = "--force" in argv
    names = [a for a in argv if not a.startswith("--")] or list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise SystemExit(f"no scenario {', '.join(unknown)} (known: {', '.join(SCENARIOS)})")
    names = [n for n in names if force or not (HERE / f"{n}.json").exists()]
    if not names:
        print(
            "every scenario has its history; after a protocol change, raise the version in "
            "pyproject.toml and record them again with --force"
        )
        return
    version = deployment.package_version()
    if deployment.build_id() != version:
        raise SystemExit(
            f"COUNCIL_BUILD_ID is {deployment.build_id()}: histories are recorded at the "
            f"package's version ({version}); unset it"
        )
    refused = refusal(HERE, names, version)
    if refused is not None:
        raise SystemExit(refused)
    HERE.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["COUNCIL_STORE"] = str(Path(tmp) / "store")
        os.environ.setdefault("COUNCIL_STORE_THRESHOLD", "4096")
        port = free_port()
        server = start_temporal(Path(tmp) / "history.db", port=port, ui_port=None)
        try:
            client = await Client.connect(
                f"127.0.0.1:{port}", data_converter=connection.data_converter(os.environ)
            )
            await ensure_search_attributes(client)
            with SimulatorServer(SimulatorConfig(seed=7)) as sim:
                await record(client, sim, names)
        finally:
            server.stop()
    others = [p.stem for p in sorted(HERE.glob("*.json")) if recorded_builds(p) != {version}]
    if others:
        print(
            f"not of build {version} yet: {', '.join(others)} (record them with --force, "
            "or delete those of scenarios that are gone)"
        )


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
