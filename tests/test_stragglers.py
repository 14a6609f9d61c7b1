"""The straggler rule on the dev server: a slow member is awaited for a while, then cut,
in stage 1, in a review and in a refinement; the record's `late` entries say what each
cut did; `--wait-for-all` waits for everyone; a stop while a straggler is awaited; a run
with cuts replays; the chairman is never cut; a request that hangs with no reply at all
is the member's time only until its call timeout ends it: the retry's clock starts at
zero."""

from __future__ import annotations

import pytest
from temporalio.worker import Replayer

from app.temporal import connection
from council.calls import Stage
from council.progress import EventKind
from council.stragglers import (
    CallClock,
    StragglerPolicy,
    due,
    earliest_due,
    patience,
    quorum,
)
from tests.temporal_fixtures import Council, starter, until
from workflows.deliberation import Deliberation

MODELS = ["sim/atlas", "sim/borealis", "sim/drift", "sim/mule"]
SLOW = {"slow": 1.0, "max_faults": 1}  # answers, but takes 30 s
QUICK = {"grace_seconds": 0.5, "factor": 2.0}


def test_quorum_and_patience() -> None:
    assert [quorum(n) for n in (2, 3, 4, 5, 8)] == [2, 2, 3, 3, 5]
    policy = StragglerPolicy(grace_seconds=2, factor=2)
    assert patience(policy, [0.4, 0.5, 0.6]) == 2  # the floor
    assert patience(policy, [3, 4, 30]) == 8  # twice the median, not the mean
    with pytest.raises(ValueError, match="factor"):
        StragglerPolicy(factor=0.5)


def test_the_watch_looks_again_when_the_first_late_call_can_be_due() -> None:
    def answering(seconds: float, beat: float, running: bool = True) -> CallClock:
        return CallClock(
            attempt=1,
            running=running,
            beat_attempt=1,
            answering=True,
            answer_seconds=seconds,
            since_beat=beat,
        )

    queued = CallClock(attempt=1, running=False)
    waiting = CallClock(attempt=1, running=True, beat_attempt=1, since_beat=0.5)
    late = ["a", "b"]
    # Not heard of, queued or waiting for its provider: the whole patience to go.
    assert earliest_due(4, late, {}) == 4
    assert earliest_due(4, late, {"a": queued, "b": waiting}) == 4
    # Answered for 1.5 s at a beat 0.5 s ago: 2 s more at the soonest.
    assert earliest_due(4, late, {"a": answering(1.5, 0.5), "b": queued}) == 2
    # A stale beat bounds nothing; one past the patience is due now.
    assert earliest_due(4, late, {"a": answering(1.0, 3.0), "b": queued}) == 0
    assert earliest_due(4, late, {"a": answering(3.8, 0.5)}) == 0
    # However its clock moves on, no call is due before that time.
    for clock in (answering(1.5, 0.5), waiting, queued):
        wait = earliest_due(4, ["a"], {"a": clock})
        later = answering(clock.own_seconds() + wait - 0.01, 0.0)
        assert not due(4, {"a": later})


async def test_a_cut_in_each_stage_kind_is_recorded_and_replays(council: Council) -> None:
    council.sim.set_faults(
        {
            "*": {"latency": 0.2},
            "sim/mule": {"latency": 0.2, **SLOW, "stages": ["stage1"]},
            "sim/drift": {"latency": 0.2, **SLOW, "stages": ["stage2"]},
            "sim/borealis": {"latency": 0.2, **SLOW, "stages": ["stage2_5"]},
            "sim/oracle": {"latency": 1.5},  # the chairman: slow, never cut
        }
    )
    handle = await council.start(
        models=MODELS,
        chairman="sim/oracle",
        max_rounds=1,
        min_rounds=1,
        stop_on_convergence=False,
        stragglers=QUICK,
    )
    record = await handle.result()

    first_cut = {}
    for late in record.late:
        first_cut.setdefault(late.model, late)
    assert (first_cut["sim/mule"].stage, first_cut["sim/mule"].round) == (Stage.ANSWER, 0)
    assert (first_cut["sim/drift"].stage, first_cut["sim/drift"].round) == (Stage.REVIEW, 0)
    assert (first_cut["sim/borealis"].stage, first_cut["sim/borealis"].round) == (Stage.REFINE, 1)
    assert "sim/atlas" not in first_cut
    # A first cut comes after the patience; a member cut once is not waited for again.
    assert all(late.seconds >= QUICK["grace_seconds"] for late in first_cut.values())
    assert first_cut["sim/mule"].effect == "no answer in this deliberation"

    # What each cut did: no answer; no critiques from that review; the previous answer kept.
    assert "sim/mule" not in {r.model for r in record.stage1}
    assert "sim/mule" not in record.label_to_model.values()
    assert "sim/drift" not in {r.model for r in record.stage2}
    [refinement] = [r for r in record.rounds[0].refinements if r.model == "sim/borealis"]
    assert refinement.late and refinement.refined_response == refinement.original_response
    assert record.errors == []  # a cut is not an error
    assert record.stage3 is not None and record.stage3.model == "sim/oracle"

    progress = await handle.query(Deliberation.progress, 0)
    waiting = [e for e in progress.events if e.kind == EventKind.WAITING]
    assert waiting[0].stage == Stage.ANSWER and waiting[0].data["models"] == ["sim/mule"]
    assert "until" in waiting[0].data
    assert sum(e.kind == EventKind.MODEL_LATE for e in progress.events) == len(record.late)

    history = await handle.fetch_history()
    replayer = Replayer(workflows=[Deliberation], data_converter=connection.data_converter())
    await replayer.replay_workflow(history)


async def test_wait_for_all_waits_for_the_slow_member(council: Council) -> None:
    council.sim.set_faults({"*": {"latency": 0.1}, "sim/mule": {"latency": 1.2}})
    record = await council.run(
        models=MODELS,
        max_rounds=1,
        min_rounds=1,
        stragglers={"wait_for_all": True, "grace_seconds": 0.1},
    )
    assert record.late == []
    assert "sim/mule" in {r.model for r in record.stage1}
    assert "sim/mule" in {r.model for r in record.stage2}


async def test_a_stop_while_a_straggler_is_awaited(council: Council) -> None:
    council.sim.set_faults({"*": {"latency": 0.1}, "sim/mule": {"slow": 1.0}})
    handle = await council.start(
        models=MODELS, stragglers={"grace_seconds": 60, "factor": 2}, max_rounds=1
    )
    await until(handle, lambda e: e.kind == EventKind.WAITING)
    await handle.signal(Deliberation.stop, "enough")
    record = await handle.result()
    assert record.iteration.terminated_reason == "user_stopped"
    assert record.late == []  # stopped, not cut
    assert {r.model for r in record.stage1} == {"sim/atlas", "sim/borealis", "sim/drift"}
    assert record.stage3 is not None
    progress = await handle.query(Deliberation.progress, 0)
    assert any(
        e.kind == EventKind.MODEL_CANCELLED and e.model == "sim/mule" for e in progress.events
    )


@pytest.mark.parametrize(
    ("flag", "value", "message"),
    [
        ("--straggler-factor", "0.5", "--straggler-factor must be between 1.0 and 100.0 (got 0.5)"),
        ("--straggler-grace", "-1", "--straggler-grace must be between 0 and 3600.0 (got -1.0)"),
    ],
)
async def test_bad_straggler_flags_are_one_line_before_anything_starts(
    flag: str, value: str, message: str
) -> None:
    code, _, err = await starter("start", "Q", flag, value, env={"TEMPORAL_ADDRESS": "x:1"})
    assert code == 2 and err.strip() == f"starter: {message}"


async def test_a_request_that_hangs_is_retried_and_its_retry_timed_from_zero(
    council: Council,
) -> None:
    """No byte of a reply in 1.5 s (the call timeout): the attempt ends and is retried.
    The hung request was the member's own time (it was sent), but only until its timeout,
    within the patience (2.2 s); the retry's own time starts at zero, so the member keeps
    its place although, by the stage's clock, it replies after the patience (1.5 s, a
    backoff, 0.9 s)."""
    council.sim.set_faults(
        {
            "*": {"latency": 0.2},
            "sim/mule": {"latency": 0.9, "hang": 1.0, "max_faults": 1, "stages": ["stage1"]},
        }
    )
    record = await council.run(
        models=MODELS,
        max_rounds=1,
        min_rounds=0,
        quality_threshold=1,
        stragglers={"grace_seconds": 2.2, "factor": 2.0},
        policy={"call_timeout_seconds": 1.5},
    )
    assert record.late == [] and record.errors == []
    assert [r.model for r in record.stage1] == MODELS
    hung = [
        e
        for e in council.sim.log()["entries"]
        if e["model"] == "sim/mule" and e["stage"] == "stage1"
    ]
    assert [e["fault"] for e in hung] == ["hang", None]
