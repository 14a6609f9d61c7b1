"""The refinement loop's rules end to end, on a real dev server with the simulator: the
minimum rounds, the quality gate on individual ratings, round events for every review,
a failed round, the cost budget, and each reviewer's own presentation order."""

from __future__ import annotations

import hashlib
import itertools
import json

from council import prompts
from council.calls import Stage
from council.labels import labels_shown_to
from council.models import DeliberationRecord
from council.progress import EventKind, Progress
from council.refinement import parse_refinement
from council.validation import validate_request
from tests.temporal_fixtures import FOUR_MODELS, QUESTION, Council, request
from workflows.deliberation import Deliberation

EVERYONE_RATES_4 = {"*": {"rating": 4}}
# sim/mule never changes its answer; sim/atlas rates it 1/5 in every review.
WITH_MULE = ["sim/atlas", "sim/borealis", "sim/drift", "sim/mule"]
ATLAS_RATES_MULE_1 = {"*": {"rating": 4}, "sim/atlas": {"ratings_by_author": {"sim/mule": 1}}}


def every_review(record: DeliberationRecord):
    yield record.stage2
    for round_data in record.rounds:
        if round_data.reviews:
            yield round_data.reviews


async def events(handle) -> list:
    progress: Progress = await handle.query(Deliberation.progress, 0)
    return progress.events


async def test_every_answer_rated_4_by_everyone_still_refines_once(council: Council) -> None:
    council.sim.set_faults(EVERYONE_RATES_4)
    record = await council.run()  # the default settings

    assert [rating for review in record.stage2 for rating in review.ratings.values()] == [4.0] * 12
    assert len(record.rounds) == 1
    assert record.iteration.terminated_reason == "quality_threshold_met"
    assert record.stage2_5 is not None
    assert sorted(entry.model for entry in record.stage2_5) == sorted(FOUR_MODELS)
    assert sorted(r.model for r in record.rounds[0].refinements) == sorted(FOUR_MODELS)
    assert record.iteration.final_lowest_ratings == {m: 4.0 for m in FOUR_MODELS}
    assert record.iteration.min_rounds == 1


async def test_one_reviewer_rating_one_answer_1_runs_every_round(council: Council) -> None:
    council.sim.set_faults(ATLAS_RATES_MULE_1)
    record = await council.run(models=WITH_MULE, max_rounds=2, stop_on_convergence=False)

    assert len(record.rounds) == 2
    assert record.iteration.terminated_reason == "max_rounds_reached"
    mule = next(label for label, model in record.label_to_model.items() if model == "sim/mule")
    reviews = list(every_review(record))
    assert len(reviews) == 3  # the first review and one after each round
    for stage in reviews:
        for review in stage:
            for label, rating in review.ratings.items():
                low = review.model == "sim/atlas" and label == mule
                assert rating == (1.0 if low else 4.0), (review.model, label, rating)
    # Its mean (1 + 4 + 4) / 3 is far above the threshold: the single 1 is what counts.
    assert record.iteration.final_scores["sim/mule"] == 3.0
    assert record.iteration.final_lowest_ratings["sim/mule"] == 1.0


async def test_min_rounds_zero_is_the_pure_quality_gate(council: Council) -> None:
    council.sim.set_faults(EVERYONE_RATES_4)
    handle = await council.start(min_rounds=0)
    record = await handle.result()
    assert record.rounds == [] and record.stage2_5 is None
    assert record.iteration.terminated_reason == "quality_threshold_met"
    # The first review still reports itself as a round (stage 2 round 1).
    rounds = [
        e
        for e in await events(handle)
        if e.kind in (EventKind.ROUND_START, EventKind.ROUND_COMPLETE)
    ]
    assert [(e.kind, e.round) for e in rounds] == [
        (EventKind.ROUND_START, 0),
        (EventKind.ROUND_COMPLETE, 0),
    ]
    assert rounds[1].data["lowest"] == {m: 4.0 for m in FOUR_MODELS}

    # With a low rating, min rounds 0 still refines: the gate asks for it.
    council.sim.set_faults(ATLAS_RATES_MULE_1)
    gated = await council.run(models=WITH_MULE, min_rounds=0, max_rounds=1)
    assert len(gated.rounds) == 1
    assert gated.iteration.terminated_reason == "max_rounds_reached"


async def test_min_rounds_run_even_when_nothing_changes(council: Council) -> None:
    # Nothing changes (sim/mule is stubborn, sim/atlas only praised), every rating is 4:
    # convergence and the quality gate wait until the minimum rounds have run.
    council.sim.set_faults(EVERYONE_RATES_4)
    record = await council.run(models=["sim/atlas", "sim/mule"], min_rounds=2, max_rounds=3)
    assert len(record.rounds) == 2
    assert all(r.models_that_changed == [] for r in record.rounds)
    assert record.iteration.terminated_reason == "quality_threshold_met"

    # Without the minimum, the same run converges after one round.
    converged = await council.run(
        models=["sim/atlas", "sim/mule"], quality_threshold=5, min_rounds=1, max_rounds=3
    )
    assert len(converged.rounds) == 1
    assert converged.iteration.terminated_reason == "models_converged"


async def test_what_changed_is_reported_for_every_refinement(council: Council) -> None:
    # Each persona's own form (JSON, fenced, plain text), as a provider that ignores
    # response_format gives them.
    council.sim.set_faults({"*": {"structured": False}})
    handle = await council.start()
    record = await handle.result()
    refined = {e.model: e for e in await events(handle) if e.kind == EventKind.MODEL_REFINED}
    [round_one] = record.rounds[:1]
    for result in round_one.refinements:
        event = refined[result.model]
        assert event.data["changed"] == result.changes_made
        assert event.message == (result.change_summary or "no significant change")
        assert event.data["accepted"] == len(result.critiques_accepted)
        # The whole reply is kept, with the reasoning steps the model gave.
        assert parse_refinement(result.raw_response).final_answer == result.refined_response
        if parse_refinement(result.raw_response).structured:
            assert result.reasoning_steps[0].startswith("Read the"), result.model
        else:  # sim/cirrus replies in plain text: no steps to keep
            assert result.reasoning_steps == [] and result.raw_response == result.refined_response
    assert refined["sim/cirrus"].data["changed"] is True


async def test_the_cost_budget_ends_the_loop(council: Council) -> None:
    # $0.001 a token; sim/mule's answer stays poor, so every round runs unless the budget
    # ends the loop. A run without a budget shows what each check of the rules saw.
    council.sim.set_faults({"*": {"cost_per_million_tokens": 1000.0}})
    settings = {"models": WITH_MULE, "max_rounds": 3, "stop_on_convergence": False}
    handle = await council.start(**settings)
    free = await handle.result()
    checks = [
        e.data["cost_usd"] for e in await events(handle) if e.kind == EventKind.ROUND_COMPLETE
    ]
    assert len(checks) == 4 and checks == sorted(checks) and free.usage.cost_usd > checks[-1]
    assert free.usage.cost_usd == round(free.usage.total_tokens / 1000, 10)

    # A budget whose 90 % falls between the checks after rounds 1 and 2: two rounds run.
    budget = (checks[1] + checks[2]) / 2 / 0.9
    record = await council.run(**settings, max_cost_usd=budget)
    assert record.iteration.terminated_reason == "cost_limit_reached"
    assert len(record.rounds) == 2
    assert record.iteration.max_cost_usd == budget
    assert record.stage3 is not None  # the chairman still synthesizes


async def test_a_provider_that_reports_no_cost(council: Council) -> None:
    council.sim.set_faults({"*": {"cost_per_million_tokens": None}})
    handle = await council.start(quality_threshold=5, max_rounds=1, max_cost_usd=0.0001)
    record = await handle.result()
    assert record.iteration.terminated_reason == "max_rounds_reached"
    assert record.usage.cost_usd is None and record.iteration.cost_usd is None
    assert record.usage.calls_without_cost == record.usage.calls > 0
    assert json.loads(record.model_dump_json())["usage"]["cost_usd"] is None
    assert record.usage.cost_line() == "cost not reported"
    notices = [e.message for e in await events(handle) if e.kind == EventKind.NOTICE]
    assert any("reports no cost" in message for message in notices)


async def test_each_reviewer_sees_the_answers_in_its_own_order(council: Council) -> None:
    record = await council.run(max_rounds=1)
    labels = record.label_to_model
    for stage in every_review(record):
        orders = {review.model: review.presented_order for review in stage}
        for reviewer, order in orders.items():
            assert sorted(order) == sorted(labels_shown_to(reviewer, labels))
        # Every answer is shown first to exactly one reviewer...
        assert sorted(order[0] for order in orders.values()) == sorted(labels)
        # ...and two reviewers disagree on which of two answers comes first.
        disagree = False
        for a, b in itertools.combinations(orders.values(), 2):
            common = [label for label in a if label in b]
            disagree |= common != [label for label in b if label in common]
        assert disagree

    # The prompt each reviewer was sent lists the answers in the recorded order.
    answers = {result.model: result.response for result in record.stage1}
    orders = {review.model: review.presented_order for review in record.stage2}
    cap = validate_request(request(max_rounds=1)).response_byte_cap
    sent = prompts.review_prompts(QUESTION, answers, labels, orders, cap)
    first_reviews = [e for e in council.sim.log()["entries"] if e["stage"] == "stage2"][:4]
    for entry in first_reviews:
        messages = [m.model_dump() for m in sent[entry["model"]]]
        digest = hashlib.sha256(
            json.dumps(messages, sort_keys=True, ensure_ascii=False).encode("utf-8")
        ).hexdigest()
        assert digest == entry["prompt_sha256"], entry["model"]
    assert {e["model"] for e in first_reviews} == set(FOUR_MODELS)
    assert Stage.REVIEW.value == "stage2"


async def test_a_review_without_critiques_ends_the_loop_even_before_the_minimum(
    council: Council,
) -> None:
    council.sim.set_faults({"*": {"critiques": False}})
    record = await council.run(min_rounds=2)
    assert record.iteration.terminated_reason == "no_significant_changes"
    assert record.rounds == [] and record.stage2_5 is None
    assert all(review.ratings for review in record.stage2)  # rated, but nothing to act on
    assert record.stage3 is not None
