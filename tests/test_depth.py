"""Depth auto on the dev server, with the simulator's members agreeing or disagreeing at
stage 1 as the test sets: agreement by values ends the run after stage 1 with a synthesis
and the gate's evidence; disagreement runs the whole protocol and hands the reviewers the
points of difference; answers without comparable values go to one agreement check call; a
review round stops once the ranking is settled, the cancelled review recorded as not
needed; every run's final answer comes with the disagreement report."""

from __future__ import annotations

import json
from pathlib import Path

from council.calls import Stage
from council.depth import NOT_NEEDED
from council.iteration import TerminationReason
from council.prompts import CHECK_OPENING, FOCUS_HEADER
from council.report import DisagreementReport
from tests.temporal_fixtures import Council, model_calls, until
from workflows.deliberation import Deliberation

ROOT = Path(__file__).resolve().parent.parent
PROBLEM = json.loads((ROOT / "datasets" / "arithmetic_logic.jsonl").read_text().splitlines()[0])
# Three members who each mark their final value (the fourth persona does not).
MARKING = ["sim/atlas", "sim/borealis", "sim/drift"]
FOUR = ["sim/atlas", "sim/borealis", "sim/cirrus", "sim/drift"]
ONE_ROUND = {"max_rounds": 1, "min_rounds": 1, "stop_on_convergence": False}
# Every reviewer rates atlas's answers best, and atlas's own reviews are held back: once the
# three other reviews are in, its review cannot change the top of the ranking.
SETTLED = {
    "*": {
        "ratings_by_author": {"sim/atlas": 5, "sim/borealis": 3, "sim/cirrus": 2, "sim/drift": 1}
    },
    "sim/atlas": {"stages": ["stage2"], "hold": True},
}


def stages(calls: list) -> list[Stage]:
    return [call.stage for call in calls]


async def test_members_who_state_one_value_end_after_stage_1_with_the_evidence(
    council: Council,
) -> None:
    with council.sim.disagreeing(0.0):
        handle = await council.start(PROBLEM["question"], models=MARKING, depth="auto", **ONE_ROUND)
        record = await handle.result()
    calls = await model_calls(handle)
    assert set(stages(calls)) == {Stage.ANSWER, Stage.SYNTHESIS}  # no check, no review
    assert record.depth == "auto"
    assert record.iteration.terminated_reason == TerminationReason.AGREEMENT
    gate = record.gate
    assert gate is not None and gate.agreed and gate.method == "values"
    assert gate.values == dict.fromkeys(MARKING, PROBLEM["answer"])
    assert gate.describe() == f"agreement after stage 1: all 3 answers state {PROBLEM['answer']}"
    assert record.stage2 == [] and record.rounds == []
    assert record.stage3 is not None and record.stage3.response
    report = record.disagreement_report
    assert report is not None and report.source == "chairman"
    assert f"the final answer is {PROBLEM['answer']}" in report.consensus
    assert report.independent_members is None  # no review to tell
    # The Temporal UI's current details say why the run ended there.
    metadata = await handle.query("__temporal_workflow_metadata")
    assert f"**Depth auto:** {gate.describe()}" in metadata.current_details


async def test_members_who_state_different_values_deliberate_on_the_difference(
    council: Council,
) -> None:
    with council.sim.disagreeing(1.0):
        handle = await council.start(PROBLEM["question"], models=MARKING, depth="auto", **ONE_ROUND)
        record = await handle.result()
    gate = record.gate
    assert gate is not None and not gate.agreed and gate.method == "values"
    assert len(set(gate.values.values())) > 1
    assert record.iteration.terminated_reason != TerminationReason.AGREEMENT
    calls = await model_calls(handle)
    assert Stage.REVIEW in stages(calls) and Stage.REFINE in stages(calls)
    opening = [c for c in calls if (c.stage, c.round) == (Stage.REVIEW, 0)]
    label_of = {model: label for label, model in record.label_to_model.items()}
    focus = gate.focus(label_of)
    # Each value and the labels of the answers that state it: never a member's name.
    assert sorted(focus) == sorted(
        f"{', '.join(sorted(label_of[m] for m, v in gate.values.items() if v == value))}: {value}"
        for value in set(gate.values.values())
    )
    for call in opening:
        prompt = call.messages[-1].content
        section = prompt.partition(FOCUS_HEADER)[2].partition("Write your review")[0]
        assert section and not any(model in section for model in MARKING)
        for point in focus:
            assert f"<difference>\n{point}\n</difference>" in section
    later = [c for c in calls if c.stage is Stage.REVIEW and c.round]
    assert later and all(FOCUS_HEADER not in c.messages[-1].content for c in later)


async def test_free_answers_go_to_one_agreement_check_by_the_chairman(council: Council) -> None:
    with council.sim.disagreeing(0.0):
        agreeing = await council.start(models=FOUR, chairman="sim/borealis", depth="auto")
        record = await agreeing.result()
    calls = await model_calls(agreeing)
    [check] = [c for c in calls if c.stage is Stage.CHECK]
    assert check.model == "sim/borealis"
    assert check.messages[-1].content.startswith(CHECK_OPENING)
    assert check.response_format is not None and check.response_format.name == "agreement_check"
    assert Stage.REVIEW not in stages(calls)
    assert record.gate is not None and record.gate.agreed and record.gate.method == "check"
    assert record.gate.checker == "sim/borealis"
    assert record.iteration.terminated_reason == TerminationReason.AGREEMENT
    # The check counts in usage like every model call.
    assert record.usage.calls == len(calls)

    with council.sim.disagreeing(1.0):
        disagreeing = await council.start(
            models=FOUR, depth="auto", auto={"check_model": "sim/drift"}, **ONE_ROUND
        )
        record = await disagreeing.result()
    gate = record.gate
    assert gate is not None and not gate.agreed and gate.checker == "sim/drift"
    assert gate.differences and all(p.startswith("(simulated)") for p in gate.differences)
    calls = await model_calls(disagreeing)
    assert stages(calls).count(Stage.CHECK) == 1 and Stage.REFINE in stages(calls)


async def test_full_depth_asks_no_check_and_keeps_every_review(council: Council) -> None:
    with council.sim.disagreeing(0.0):
        handle = await council.start(PROBLEM["question"], models=MARKING, **ONE_ROUND)
        record = await handle.result()
    assert record.depth == "full" and record.gate is None
    calls = await model_calls(handle)
    assert Stage.CHECK not in stages(calls) and Stage.REVIEW in stages(calls)
    assert record.not_needed == []


async def test_a_review_round_stops_once_the_ranking_is_settled(council: Council) -> None:
    council.sim.set_faults(SETTLED)
    with council.sim.disagreeing(1.0):
        handle = await council.start(models=FOUR, depth="auto", **ONE_ROUND)
        record = await handle.result()
    assert [(n.stage, n.round, n.model) for n in record.not_needed] == [
        (Stage.REVIEW, 0, "sim/atlas"),
        (Stage.REVIEW, 1, "sim/atlas"),
    ]
    assert all(n.reason == NOT_NEEDED for n in record.not_needed)
    assert record.errors == [] and record.late == []  # not failed, not cut
    assert {r.model for r in record.stage2} == {"sim/borealis", "sim/cirrus", "sim/drift"}
    assert record.aggregate_rankings[0].model == "sim/atlas"
    progress = await handle.query(Deliberation.progress, 0)
    dropped = [e for e in progress.events if e.data.get("not_needed")]
    assert [(e.stage, e.model) for e in dropped] == [(Stage.REVIEW, "sim/atlas")] * 2
    # The simulator saw the held calls go: the client hung up.
    log = council.sim.log()
    held = [
        e
        for e in log["entries"]
        if e.get("model") == "sim/atlas" and e.get("stage") == Stage.REVIEW.value
    ]
    assert len(held) == 2 and all(e.get("outcome") != "ok" for e in held)


async def test_the_report_names_dissents_the_chairman_left_out(council: Council) -> None:
    # A harsh reviewer dissents; without structured output the chairman's reply is prose,
    # so the report is the reviews' part: the dissents, and the independent votes.
    council.sim.set_faults(
        {"*": {"rating": 4, "structured": False}, "sim/drift": {"rating": 1, "structured": False}}
    )
    record = await council.run(models=FOUR, **ONE_ROUND)
    report = record.disagreement_report
    assert isinstance(report, DisagreementReport) and report.source == "reviews"
    assert record.agreement is not None
    assert len(report.unreported_dissents) == len(record.agreement.dissent) > 0
    assert all(line.startswith("sim/drift rated ") for line in report.unreported_dissents)
    assert report.independent_members is not None
    assert 1 <= report.independent_members <= len(record.agreement.reviewers)


async def test_a_stop_during_the_check_ends_with_the_answers_there_are(
    council: Council,
) -> None:
    council.sim.set_faults({"sim/atlas": {"stages": ["agreement_check"], "hold": True}})
    with council.sim.disagreeing(0.0):
        handle = await council.start(models=FOUR, depth="auto")
        await until(handle, lambda e: e.stage is Stage.CHECK)
        await handle.signal(Deliberation.stop, "enough")
        record = await handle.result()
    assert record.iteration.terminated_reason == TerminationReason.USER_STOP
    assert record.gate is not None and not record.gate.agreed and record.gate.problem
    assert record.stage2 == [] and record.stage3 is not None
