"""Deliberations end to end: a real Temporal dev server, the worker's own code, the
simulator over HTTP."""

from __future__ import annotations

import asyncio

import pytest
from temporalio.api.enums.v1 import EventType
from temporalio.api.history.v1 import HistoryEvent
from temporalio.client import WorkflowFailureError
from temporalio.converter import decode_typed_search_attributes
from temporalio.exceptions import ApplicationError

from council import limits
from council.aggregate import aggregate_rankings, lowest_ratings
from council.calls import Stage
from council.labels import labels_shown_to
from council.progress import EventKind, Progress
from council.validation import validate_request
from runs.starting import start as client_start
from tests.sim_fixtures import wait_until
from tests.temporal_fixtures import FOUR_MODELS, Council, request
from workflows import search_attributes
from workflows.deliberation import Deliberation


def ok_requests(sim, stage: Stage | None = None) -> list[dict]:
    return [
        e
        for e in sim.log()["entries"]
        if e["outcome"] == "ok" and (stage is None or e["stage"] == stage.value)
    ]


async def test_full_deliberation(council: Council) -> None:
    handle = await council.start()
    record = await handle.result()

    assert record.status == "completed"
    assert [r.model for r in record.stage1] == FOUR_MODELS
    assert sorted(record.label_to_model.values()) == sorted(FOUR_MODELS)
    assert len(record.stage2) == 4
    for review in record.stage2:
        shown = labels_shown_to(review.model, record.label_to_model)
        assert sorted(review.parsed_ranking) == sorted(shown), review.ranking
        assert set(review.ratings) == set(shown)
    # The weak answer drew a refinement round; after it every answer met the threshold.
    assert len(record.rounds) >= 1
    assert record.iteration.terminated_reason == "quality_threshold_met"
    assert min(record.iteration.final_scores.values()) >= 1.5
    first_scores = {e.model: e.mean_rating for e in record.aggregate_rankings}
    assert set(first_scores) == set(FOUR_MODELS)
    assert record.stage2_5 is not None and len(record.stage2_5) == 4
    for entry, answer in zip(record.stage2_5, record.stage1, strict=False):
        assert entry.original_response == answer.response
        assert f"Peer evaluation from {entry.model}" not in entry.peer_critiques
    assert record.stage3 is not None and record.stage3.model == "sim/atlas"
    assert "simulated" in record.stage3.response.lower()
    assert record.errors == []

    # Every call is accounted for: one activity, one request, the provider's usage.
    requests = ok_requests(council.sim)
    assert record.usage.calls == len(requests)
    assert (
        record.usage.total_tokens == record.usage.prompt_tokens + record.usage.completion_tokens > 0
    )
    assert sum(t.calls for t in record.usage.by_model.values()) == record.usage.calls
    assert record.usage.by_stage[Stage.ANSWER.value].calls == 4
    assert record.usage.by_stage[Stage.SYNTHESIS.value].calls == 1
    assert record.usage.by_stage[Stage.REVIEW.value].calls == 4 * (1 + len(record.rounds))

    progress: Progress = await handle.query(Deliberation.progress, 0)
    kinds = [e.kind for e in progress.events]
    # A round event for every review, the first one (round 0) included.
    assert kinds.count(EventKind.ROUND_START) == len(record.rounds) + 1
    assert kinds.count(EventKind.ROUND_COMPLETE) == len(record.rounds) + 1
    first = next(e for e in progress.events if e.kind == EventKind.ROUND_COMPLETE)
    assert first.round == 0 and first.data["review_round"] == 1
    opening = aggregate_rankings(record.stage2, record.label_to_model)
    assert first.data["lowest"] == lowest_ratings(opening)
    assert first.data["lowest"]["sim/cirrus"] == 1  # the weak answer, before refining
    refined = [e for e in progress.events if e.kind == EventKind.MODEL_REFINED]
    assert len(refined) == sum(len(r.refinements) for r in record.rounds)
    assert kinds.count(EventKind.MODEL_COMPLETE) == record.usage.calls
    assert kinds[-1] == EventKind.FINISHED and progress.finished
    assert [e.seq for e in progress.events] == list(range(len(progress.events)))
    later: Progress = await handle.query(Deliberation.progress, 5)
    assert [e.seq for e in later.events] == list(range(5, len(progress.events)))


async def test_ui_metadata(council: Council) -> None:
    handle = await council.start()
    record = await handle.result()
    description = await handle.describe()
    attrs = description.typed_search_attributes
    assert attrs.get(search_attributes.TERMINATION_REASON) == record.iteration.terminated_reason
    assert attrs.get(search_attributes.STAGE) == Stage.SYNTHESIS.value
    assert attrs.get(search_attributes.ROUND) == len(record.rounds)

    metadata = await handle.query("__temporal_workflow_metadata")
    assert "Finished" in metadata.current_details
    summaries = []
    async for event in handle.fetch_history_events():
        if event.event_type == EventType.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
            summary = event.user_metadata.summary
            summaries.append(
                council.client.data_converter.payload_converter.from_payload(summary, str)
            )
    assert "stage 1 answer · sim/cirrus" in summaries
    assert "stage 2 review · sim/atlas" in summaries
    assert any(s.startswith("stage 2.5 refinement · round 1 · ") for s in summaries)
    assert "stage 2 review after round 1 · sim/drift" in summaries
    assert "stage 3 synthesis · round 1 · sim/atlas" in summaries


def places_set(events: list[HistoryEvent]) -> list[tuple[str | None, int | None]]:
    """The stage and round each search-attribute update set, in order."""
    places = []
    for event in events:
        if event.event_type == EventType.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
            attrs = decode_typed_search_attributes(
                event.upsert_workflow_search_attributes_event_attributes.search_attributes
            )
            places.append((attrs.get(search_attributes.STAGE), attrs.get(search_attributes.ROUND)))
    return places


async def test_a_run_starts_showing_its_first_place(council: Council) -> None:
    """Started through the front door, a run's first stage and round come with its start:
    no update of its own sets them. Started by any other client, it sets them itself."""
    fields = {"max_rounds": 1, "quality_threshold": 5, "stop_on_convergence": False}
    handle = await client_start(
        council.client, validate_request(request(**fields)), council.task_queue
    )
    record = await handle.result()
    events = (await handle.fetch_history()).events
    started = decode_typed_search_attributes(
        events[0].workflow_execution_started_event_attributes.search_attributes
    )
    assert search_attributes.place_of(started) == (Stage.ANSWER.value, 0)
    assert started.get(search_attributes.THREAD) == handle.id
    places = places_set(events)
    assert (Stage.ANSWER.value, 0) not in places
    assert places[-1] == (Stage.SYNTHESIS.value, len(record.rounds))

    other = await council.start(**fields)
    await other.result()
    places = places_set((await other.fetch_history()).events)
    assert places[0] == (Stage.ANSWER.value, 0)
    # Then at most one update a round (workflows.live.PLACE_EVERY), and the end's.
    rounds = [round_number for _, round_number in places[:-1]]
    assert rounds == sorted(set(rounds))


async def test_max_rounds_reached(council: Council) -> None:
    record = await council.run(quality_threshold=5, max_rounds=1, stop_on_convergence=False)
    assert record.iteration.terminated_reason == "max_rounds_reached"
    assert len(record.rounds) == 1
    assert len(record.rounds[0].reviews) == 4


async def test_convergence_when_no_answer_changes(council: Council) -> None:
    # sim/mule never takes up a critique; sim/atlas is only praised: nothing changes.
    record = await council.run(models=["sim/atlas", "sim/mule"], quality_threshold=5, max_rounds=3)
    assert record.iteration.terminated_reason == "models_converged"
    [round_one] = record.rounds
    assert round_one.models_that_changed == []
    assert sorted(round_one.models_unchanged) == ["sim/atlas", "sim/mule"]
    assert min(record.iteration.final_scores.values()) < 5


async def test_token_budget_stops_refinement(council: Council) -> None:
    record = await council.run(quality_threshold=5, token_budget=500)
    assert record.iteration.terminated_reason == "context_limit_reached"
    assert record.rounds == []
    assert record.usage.total_tokens > 450
    assert record.stage3 is not None  # the chairman still synthesizes


async def test_every_review_failing_ends_the_loop_with_error_occurred(council: Council) -> None:
    council.sim.set_faults({"*": {"errors": {"400": 1.0}, "stages": ["stage2"]}})
    record = await council.run()
    assert record.iteration.terminated_reason == "error_occurred"
    assert record.stage2 == [] and record.rounds == []
    assert {e.stage for e in record.errors} == {Stage.REVIEW}
    assert len(record.errors) == 4
    assert record.stage3 is not None


async def test_one_model_failing_every_call(council: Council) -> None:
    council.sim.set_faults({"sim/drift": {"errors": {"500": 1.0}}})
    record = await council.run()
    assert [r.model for r in record.stage1] == ["sim/atlas", "sim/borealis", "sim/cirrus"]
    assert "sim/drift" not in record.label_to_model.values()
    assert len(record.errors) == 1
    error = record.errors[0]
    assert (error.stage, error.model) == (Stage.ANSWER, "sim/drift")
    assert "500" in error.message
    # Three attempts (the test policy), then the model is dropped, not the run.
    drift = [e for e in council.sim.log()["entries"] if e["model"] == "sim/drift"]
    assert len(drift) == 3
    assert record.stage3 is not None


async def test_non_retryable_error_is_not_retried(council: Council) -> None:
    council.sim.set_faults({"sim/drift": {"errors": {"401": 1.0}}})
    record = await council.run()
    [error] = record.errors
    assert error.error_type == "Unauthorized" and "sim/drift" in error.message
    drift = [e for e in council.sim.log()["entries"] if e["model"] == "sim/drift"]
    assert len(drift) == 1


async def test_bad_key_ends_the_run_within_seconds(council: Council) -> None:
    council.sim.set_faults({"*": {"errors": {"401": 1.0}}})
    started = asyncio.get_running_loop().time()
    handle = await council.start()
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    assert asyncio.get_running_loop().time() - started < 5
    message = failure.value.cause.message
    for model in FOUR_MODELS:
        assert f"{model}: HTTP 401 Unauthorized from" in message
    assert len(council.sim.log()["entries"]) == 4  # one attempt each, no retries


async def test_fewer_than_two_answers_fails_clearly(council: Council) -> None:
    council.sim.set_faults({"*": {"errors": {"404": 1.0}}, "sim/atlas": {"errors": {}}})
    handle = await council.start()
    with pytest.raises(WorkflowFailureError) as failure:
        await handle.result()
    cause = failure.value.cause
    assert isinstance(cause, ApplicationError) and cause.type == "CouncilTooSmall"
    assert "fewer than two models answered (1 of 4)" in cause.message
    assert "sim/cirrus" in cause.message


async def test_every_refinement_failing_ends_the_loop_with_error_occurred(
    council: Council,
) -> None:
    council.sim.set_faults({"*": {"errors": {"503": 1.0}, "stages": ["stage2_5"]}})
    record = await council.run(quality_threshold=5, max_rounds=3)
    assert record.iteration.terminated_reason == "error_occurred"
    [round_one] = record.rounds
    assert round_one.refinements and all(r.error for r in round_one.refinements)
    for refinement in round_one.refinements:
        assert refinement.refined_response == refinement.original_response
        assert refinement.raw_response is None
    assert round_one.models_that_changed == []
    assert round_one.reviews == []  # no re-review of unchanged answers
    assert {e.stage for e in record.errors} == {Stage.REFINE}
    assert len(record.errors) == 4
    assert len(ok_requests(council.sim, Stage.REVIEW)) == 4  # the first review only
    # The chairman synthesized from the last good answers: the stage 1 answers.
    assert record.stage2_5 is None or all(
        e.corrected_response == e.original_response for e in record.stage2_5
    )
    assert record.stage3 is not None
    chairman = [e for e in council.sim.log()["entries"] if e["stage"] == "stage3"]
    assert [e["outcome"] for e in chairman] == ["ok"]


async def test_one_failed_refinement_keeps_that_answer_and_the_loop_goes_on(
    council: Council,
) -> None:
    council.sim.set_faults({"sim/drift": {"errors": {"400": 1.0}, "stages": ["stage2_5"]}})
    record = await council.run(quality_threshold=5, max_rounds=1)
    assert record.iteration.terminated_reason == "max_rounds_reached"
    [round_one] = record.rounds
    failed = [r for r in round_one.refinements if r.error]
    assert [r.model for r in failed] == ["sim/drift"]
    assert failed[0].refined_response == failed[0].original_response
    assert len(round_one.reviews) == 4


async def test_chairman_failure_falls_back_to_a_council_model(council: Council) -> None:
    council.sim.set_faults({"sim/oracle": {"errors": {"500": 1.0}}})
    record = await council.run(chairman="sim/oracle")
    assert record.stage3 is not None
    assert record.stage3.model == record.aggregate_rankings[0].model
    [error] = record.errors
    assert (error.stage, error.model) == (Stage.SYNTHESIS, "sim/oracle")


async def test_invalid_request_fails_without_retrying(council: Council) -> None:
    for bad, expected in [
        ({"max_rounds": 9}, "max_rounds must be between 1 and 5 (got 9)"),
        ({"models": ["sim/atlas"]}, "models: need 2 to 12 models, got 1"),
        ({"quality_threshold": -1}, "quality_threshold must be between 0.0 and 5.0"),
        ({"token_budget": 0}, "token_budget must be between 1 and"),
        ({"question": "   "}, "question must not be empty"),
        (
            {"question": "x" * (limits.QUESTION_MAX_CHARS + 1)},
            f"question is too long: at most {limits.QUESTION_MAX_CHARS} characters",
        ),
        ({"models": ["sim/atlas", "sim/atlas"]}, "'sim/atlas' is listed twice"),
        ({"models": [f"m{i}" for i in range(13)]}, "models: need 2 to 12 models, got 13"),
        ({"max_rounds": "many"}, "max_rounds"),
        ({"surprise": 1}, "surprise is not a known field"),
    ]:
        handle = await council.client.start_workflow(
            Deliberation.run,
            {**request(), **bad},
            id=f"bad-{abs(hash(str(bad)))}",
            task_queue=council.task_queue,
        )
        with pytest.raises(WorkflowFailureError) as failure:
            await asyncio.wait_for(handle.result(), 10)
        cause = failure.value.cause
        assert isinstance(cause, ApplicationError) and cause.type == "InvalidRequest"
        assert cause.non_retryable and expected in cause.message
    assert council.sim.log()["entries"] == []


async def test_stop_during_refinement(council: Council) -> None:
    council.sim.set_faults({"*": {"latency": 0.5}})
    handle = await council.start(quality_threshold=5, max_rounds=3)

    async def refining() -> bool:
        progress = await handle.query(Deliberation.progress, 0)
        return any(
            e.kind == EventKind.STAGE_START and e.stage == Stage.REFINE for e in progress.events
        )

    deadline = asyncio.get_running_loop().time() + 20
    while not await refining():
        assert asyncio.get_running_loop().time() < deadline
        await asyncio.sleep(0.05)
    await handle.signal(Deliberation.stop, "enough for now")
    record = await handle.result()

    assert record.iteration.terminated_reason == "user_stopped"
    assert record.stop_reason == "enough for now"
    [round_one] = record.rounds
    assert round_one.reviews == []  # no fresh review after the stop
    cancelled = [r for r in round_one.refinements if r.error]
    assert cancelled, "the in-flight refinements were cancelled"
    assert all(r.refined_response == r.original_response for r in cancelled)
    assert record.stage3 is not None
    assert record.errors == []  # a cancelled call is not a failure
    progress = await handle.query(Deliberation.progress, 0)
    assert any(e.kind == EventKind.MODEL_CANCELLED for e in progress.events)
    # Nothing ran after the synthesis: one review stage, no second round.
    assert len(ok_requests(council.sim, Stage.REVIEW)) == 4


async def test_stop_before_any_answer(council: Council) -> None:
    council.sim.set_faults({"*": {"latency": 5}})
    handle = await council.start()
    await wait_until(lambda: council.sim.log()["in_flight"] == 4, timeout=10)
    await handle.signal(Deliberation.stop)
    record = await asyncio.wait_for(handle.result(), 10)
    assert record.iteration.terminated_reason == "user_stopped"
    assert record.stage1 == [] and record.stage3 is None
