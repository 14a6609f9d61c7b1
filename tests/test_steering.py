"""Steering a running deliberation with Updates: the maximum rounds raised and lowered,
a critique from the user handed to exactly one model in the next round; what the
validators refuse; updates while calls are in flight and after a worker crash."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path
from typing import Any

import pytest
from temporalio.client import WorkflowUpdateFailedError
from temporalio.testing import WorkflowEnvironment

from council.calls import Stage
from council.steering import USER, HumanCritique
from harness.processes import start_worker
from simulator import SimulatorServer
from tests.sim_fixtures import wait_until
from tests.temporal_fixtures import (
    Council,
    model_calls,
    request,
    stage_started,
    starter,
    until,
    worker_env,
)
from workflows.deliberation import Deliberation

WITH_MULE = ["sim/atlas", "sim/borealis", "sim/drift", "sim/mule"]  # the threshold 5 never holds
EVERY_ROUND = {"quality_threshold": 5, "stop_on_convergence": False, "models": WITH_MULE}
NOTE = "Say which versions of PostgreSQL this applies to (a note from the user, 7f3e)."


async def refused(update: Any) -> str:
    with pytest.raises(WorkflowUpdateFailedError) as failure:
        await update
    return failure.value.cause.message


async def test_more_rounds_while_calls_are_in_flight(council: Council) -> None:
    council.sim.set_faults({"*": {"latency": 0.8}})
    handle = await council.start(max_rounds=1, **EVERY_ROUND)
    await until(handle, stage_started(Stage.REVIEW))
    # The stage is set when the calls are scheduled; wait until they reach the provider.
    await wait_until(lambda: council.sim.log()["in_flight"] > 0, timeout=5)
    assert await handle.execute_update(Deliberation.set_max_rounds, 3) == 3
    record = await handle.result()
    assert len(record.rounds) == 3
    assert record.iteration.terminated_reason == "max_rounds_reached"
    assert record.iteration.max_rounds == 3
    [action] = record.steering
    assert (action.kind, action.max_rounds, action.during_round) == ("max_rounds", 3, 0)
    progress = await handle.query(Deliberation.progress, 0)
    assert any("set the maximum rounds to 3" in e.message for e in progress.events)


async def test_fewer_rounds_but_never_below_those_run_and_what_is_refused(
    council: Council,
) -> None:
    council.sim.set_faults({"*": {"latency": 0.6}, "sim/oracle": {"latency": 3}})
    handle = await council.start(max_rounds=4, chairman="sim/oracle", **EVERY_ROUND)
    await until(handle, stage_started(Stage.REFINE, 2))
    message = await refused(handle.execute_update(Deliberation.set_max_rounds, 1))
    assert message == "rounds must be at least 2, the rounds already run or under way (got 1)"
    message = await refused(handle.execute_update(Deliberation.set_max_rounds, 6))
    assert message == "rounds must be between 1 and 5 (got 6)"
    assert await handle.execute_update(Deliberation.set_max_rounds, 2) == 2
    # Once the loop has ended (the chairman is writing), neither update is taken.
    await until(handle, stage_started(Stage.SYNTHESIS, 2))
    message = await refused(handle.execute_update(Deliberation.set_max_rounds, 3))
    assert message == "the refinement loop has ended (max_rounds_reached)"
    critique = HumanCritique(model="sim/atlas", text="Too late?")
    message = await refused(handle.execute_update(Deliberation.add_critique, critique))
    assert message == "the refinement loop has ended (max_rounds_reached)"
    record = await handle.result()
    assert len(record.rounds) == 2 and [a.max_rounds for a in record.steering] == [2]


async def test_a_critique_from_the_user_reaches_exactly_one_model_in_the_next_round(
    council: Council,
) -> None:
    council.sim.set_faults({"*": {"latency": 0.6}})
    handle = await council.start(max_rounds=2, **EVERY_ROUND)
    await until(handle, stage_started(Stage.REVIEW))
    for bad, why in [
        (HumanCritique(model="sim/nobody", text="Hi"), "model 'sim/nobody' has no answer"),
        (HumanCritique(model="sim/atlas", text="   "), "the critique is empty"),
        (HumanCritique(model="sim/atlas", text="x" * 2001), "at most 2000 characters (got 2001)"),
    ]:
        assert why in await refused(handle.execute_update(Deliberation.add_critique, bad))
    critique = HumanCritique(model="sim/atlas", text=NOTE)
    reply = await handle.execute_update(Deliberation.add_critique, critique)
    assert reply.endswith("(round 1)")
    record = await handle.result()

    atlas = next(label for label, model in record.label_to_model.items() if model == "sim/atlas")
    first = record.rounds[0].critiques
    from_user = {label: [c for c in items if c.from_user] for label, items in first.items()}
    assert [c.critique_text for c in from_user[atlas]] == [NOTE]
    assert from_user[atlas][0].source_model == USER
    assert all(items == [] for label, items in from_user.items() if label != atlas)
    assert not any(c.from_user for items in record.rounds[1].critiques.values() for c in items)
    # Its refinement prompt, and only that one, carries the note, marked as the user's.
    refinements = [c for c in await model_calls(handle) if c.stage == Stage.REFINE]
    carrying = [c for c in refinements if NOTE in c.messages[-1].content]
    assert [c.model for c in carrying] == ["sim/atlas"] and carrying[0].round == 1
    assert (
        f"Critique from the user who asked the question:\n<critique>\n{NOTE}\n</critique>"
        in carrying[0].messages[-1].content
    )
    [action] = record.steering
    assert (action.kind, action.model, action.text, action.delivered_in_round) == (
        "critique",
        "sim/atlas",
        NOTE,
        1,
    )


async def test_a_pending_critique_keeps_the_loop_going(council: Council) -> None:
    # Every rating 4: one round and the quality threshold would end the loop.
    council.sim.set_faults({"*": {"latency": 0.6, "rating": 4}})
    handle = await council.start(max_rounds=3)
    await until(handle, stage_started(Stage.REFINE, 1))
    critique = HumanCritique(model="sim/borealis", text="Compare the two on backups.")
    assert (await handle.execute_update(Deliberation.add_critique, critique)).endswith("(round 2)")
    record = await handle.result()
    assert len(record.rounds) == 2 and record.iteration.terminated_reason == "quality_threshold_met"

    # Reviewers who write no critique: the user's alone makes a round, for its model only.
    council.sim.set_faults({"*": {"latency": 0.6, "critiques": False}})
    handle = await council.start()
    await until(handle, stage_started(Stage.REVIEW))
    example = HumanCritique(model="sim/borealis", text="Please add a concrete example.")
    await handle.execute_update(Deliberation.add_critique, example)
    record = await handle.result()
    [refined] = record.rounds[0].refinements
    assert refined.model == "sim/borealis" and refined.changes_made  # it took up the example
    assert record.iteration.terminated_reason == "no_significant_changes"


async def test_updates_sent_while_the_worker_is_down_apply_on_the_next_worker(
    temporal: WorkflowEnvironment, sim: SimulatorServer, tmp_path: Path
) -> None:
    sim.set_faults({"*": {"latency": 1.0}})
    queue = f"steer-{uuid.uuid4().hex[:8]}"
    env = worker_env(temporal, sim, queue)
    first = await asyncio.to_thread(start_worker, env, tmp_path / "first.log")
    second = None
    try:
        handle = await temporal.client.start_workflow(
            Deliberation.run,
            request(max_rounds=1, **EVERY_ROUND),
            id=f"steer-{uuid.uuid4().hex[:8]}",
            task_queue=queue,
        )
        await until(handle, stage_started(Stage.REFINE, 1))
        first.kill()
        # Both updates wait for a worker; the next one to start takes them.
        rounds = asyncio.create_task(handle.execute_update(Deliberation.set_max_rounds, 2))
        note = HumanCritique(model="sim/drift", text=NOTE)
        critique = asyncio.create_task(handle.execute_update(Deliberation.add_critique, note))
        await asyncio.sleep(1.0)
        assert not rounds.done() and not critique.done()
        second = await asyncio.to_thread(start_worker, env, tmp_path / "second.log")
        assert await asyncio.wait_for(rounds, 60) == 2
        assert (await asyncio.wait_for(critique, 60)).endswith("(round 2)")
        record = await handle.result()
        assert len(record.rounds) == 2
        drift = next(label for label, m in record.label_to_model.items() if m == "sim/drift")
        assert any(c.from_user for c in record.rounds[1].critiques[drift])
    finally:
        for worker in (first, second):
            if worker is not None:
                worker.stop()


async def test_the_cli_extends_and_critiques(council: Council, cli_env: dict[str, str]) -> None:
    council.sim.set_faults({"*": {"latency": 0.8}})
    handle = await council.start(max_rounds=1, **EVERY_ROUND)
    await until(handle, stage_started(Stage.REVIEW))
    # While the CLI talks to the run (a process each, seconds apiece on a busy machine),
    # every call takes 6 s: the run is still under way when the last command arrives.
    council.sim.set_faults({"*": {"latency": 6}})
    code, out, err = await starter("extend", handle.id, "--rounds", "2", env=cli_env)
    assert code == 0 and out == "2\n", err
    code, out, err = await starter("critique", handle.id, "--model", "sim/mule", NOTE, env=cli_env)
    assert code == 0 and "a critique from the user for sim/mule waits" in out, err
    code, _, err = await starter("critique", handle.id, "--model", "sim/ghost", "Hi", env=cli_env)
    assert code == 2 and err.count("\n") == 1 and "model 'sim/ghost' has no answer" in err
    code, _, err = await starter("extend", handle.id, "--rounds", "0", env=cli_env)
    assert code == 2 and err == "starter: --rounds: rounds must be between 1 and 5 (got 0)\n"
    council.sim.set_faults({"*": {"latency": 0.1}})
    record = await handle.result()
    assert len(record.rounds) == 2
    code, _, err = await starter("extend", handle.id, "--rounds", "3", env=cli_env)
    assert code == 2 and f"{handle.id} is not running (completed)" in err


async def test_a_critique_of_an_answer_that_arrived_during_stage_1_is_taken(
    council: Council, cli_env: dict[str, str]
) -> None:
    # drift answers at once; the others' answers are held until the critique is in: stage 1
    # is still under way however long the CLI takes.
    council.sim.set_faults(
        {"*": {"hold": True, "stages": ["stage1"]}, "sim/drift": {"hold": False}}
    )
    handle = await council.start(max_rounds=1, **EVERY_ROUND)
    await until(
        handle,
        lambda e: (e.kind, e.stage, e.model) == ("model_complete", Stage.ANSWER, "sim/drift"),
    )
    # Not yet arrived: still refused, naming the answers that are there.
    message = await refused(
        handle.execute_update(Deliberation.add_critique, HumanCritique(model="sim/atlas", text="x"))
    )
    assert message == "model 'sim/atlas' has no answer in this council (models: sim/drift)"
    # The CLI, as a user sends it while the answer is on screen.
    code, out, err = await starter("critique", handle.id, "--model", "sim/drift", NOTE, env=cli_env)
    assert code == 0, err
    assert "(round 1)" in out + err
    progress = await handle.query(Deliberation.progress, 0)
    assert progress.stage == Stage.ANSWER  # taken while stage 1 ran
    council.sim.set_faults({})
    record = await handle.result()
    drift = next(label for label, model in record.label_to_model.items() if model == "sim/drift")
    assert [c.critique_text for c in record.rounds[0].critiques[drift] if c.from_user] == [NOTE]
    [action] = record.steering
    assert (action.model, action.delivered_in_round) == ("sim/drift", 1)
