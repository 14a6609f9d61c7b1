"""Iteration state and termination rules beyond the specification's own tests (those are
in test_specification.py): the quality threshold, the order of the checks, token
charging and the summary."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from council import iteration as rules
from council.iteration import (
    IterationConfig,
    IterationRound,
    IterationState,
    TerminationReason,
)
from council.stages import AggregateRanking

pytestmark = pytest.mark.fast

NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)


def finished_round(number: int, changed: list[str], unchanged: list[str]) -> IterationRound:
    return IterationRound(
        round_number=number,
        started_at=NOW,
        completed_at=NOW,
        critiques={},
        refinements=[],
        models_that_changed=changed,
        models_unchanged=unchanged,
    )


# --- the rest of the rules ----------------------------------------------------------------


def test_disabled_iteration_never_continues_and_gives_no_reason():
    assert rules.should_continue_iteration(IterationState(enabled=False)) == (False, None)


def test_initialize_carries_every_setting_from_the_config():
    config = IterationConfig(
        max_rounds=4,
        min_rounds=2,
        quality_threshold=3.5,
        context_budget=1234,
        auto_stop_on_convergence=False,
        max_cost_usd=0.5,
    )
    state = rules.initialize_iteration_state(config)
    assert (state.max_rounds, state.quality_threshold, state.context_budget) == (4, 3.5, 1234)
    assert (state.min_rounds, state.max_cost_usd) == (2, 0.5)
    assert state.stop_on_convergence is False
    assert not state.terminated and state.termination_reason is None


def test_rounds_beyond_five_are_refused():
    with pytest.raises(ValidationError):
        IterationState(max_rounds=6)
    with pytest.raises(ValidationError):
        IterationState(max_rounds=0)


def test_budget_stop_is_strictly_above_ninety_percent():
    at_limit = IterationState(
        enabled=True, max_rounds=5, total_tokens_used=45_000, context_budget=50_000
    )
    over = at_limit.model_copy(update={"total_tokens_used": 45_001})
    assert rules.should_continue_iteration(at_limit) == (True, None)
    assert rules.should_continue_iteration(over) == (False, TerminationReason.CONTEXT_LIMIT)


def test_a_round_with_changes_lets_iteration_continue():
    state = IterationState(
        enabled=True,
        max_rounds=3,
        current_round=1,
        rounds=[finished_round(1, ["gpt-4"], ["claude"])],
    )
    assert rules.should_continue_iteration(state) == (True, None)


def test_convergence_is_ignored_when_the_user_turned_it_off():
    state = IterationState(
        enabled=True,
        max_rounds=3,
        current_round=1,
        stop_on_convergence=False,
        rounds=[finished_round(1, [], ["gpt-4", "claude"])],
    )
    assert rules.should_continue_iteration(state) == (True, None)


# --- the quality gate: individual peer ratings, after the minimum rounds -------------------


def test_stops_once_no_individual_rating_is_below_the_threshold():
    state = IterationState(
        enabled=True,
        max_rounds=3,
        current_round=1,
        quality_threshold=3.0,
        lowest_ratings={"m1": 3.0, "m2": 4.0},
    )
    assert rules.quality_threshold_met(state)
    assert rules.should_continue_iteration(state) == (
        False,
        TerminationReason.QUALITY_THRESHOLD_MET,
    )


def test_one_low_rating_asks_for_another_round_however_good_the_mean():
    # m2's mean is 4.25 (5, 5, 5, 2): only the individual rating of 2 is below 3.
    state = IterationState(
        enabled=True,
        max_rounds=3,
        current_round=1,
        quality_threshold=3.0,
        latest_scores={"m1": 4.9, "m2": 4.25},
        lowest_ratings={"m1": 4.0, "m2": 2.0},
    )
    assert not rules.quality_threshold_met(state)
    assert rules.should_continue_iteration(state) == (True, None)


def test_the_default_threshold_is_thirty_percent_of_five():
    low = IterationState(enabled=True, current_round=1, lowest_ratings={"m1": 1.0, "m2": 5.0})
    fine = IterationState(enabled=True, current_round=1, lowest_ratings={"m1": 1.5, "m2": 1.5})
    assert low.quality_threshold == 1.5
    assert rules.should_continue_iteration(low) == (True, None)
    assert rules.should_continue_iteration(fine) == (False, TerminationReason.QUALITY_THRESHOLD_MET)


def test_no_ratings_yet_does_not_meet_the_threshold():
    state = IterationState(enabled=True, current_round=1, quality_threshold=0.0)
    assert not rules.quality_threshold_met(state)
    assert rules.should_continue_iteration(state) == (True, None)


def test_the_threshold_holds_every_rating_not_the_mean():
    state = IterationState(
        enabled=True,
        quality_threshold=3.0,
        latest_scores={"m1": 3.0, "m2": 4.25},
        lowest_ratings={"m1": 1.0, "m2": 2.0},
    )
    assert not rules.quality_threshold_met(state)


# --- minimum rounds ----------------------------------------------------------------------------


def good_ratings(**fields) -> IterationState:
    """After the first review, every answer rated 4/5 by everyone."""
    defaults = {
        "enabled": True,
        "latest_scores": {"m1": 4.0, "m2": 4.0},
        "lowest_ratings": {"m1": 4.0, "m2": 4.0},
        "critiques_pending": 2,
    }
    return IterationState(**{**defaults, **fields})


def test_one_round_runs_by_default_even_when_every_rating_is_good():
    state = good_ratings()
    assert state.min_rounds == 1
    assert rules.should_continue_iteration(state) == (True, None)
    state.current_round = 1
    state.rounds = [finished_round(1, ["m1"], ["m2"])]
    assert rules.should_continue_iteration(state) == (
        False,
        TerminationReason.QUALITY_THRESHOLD_MET,
    )


def test_min_rounds_zero_is_the_pure_quality_gate():
    assert rules.should_continue_iteration(good_ratings(min_rounds=0)) == (
        False,
        TerminationReason.QUALITY_THRESHOLD_MET,
    )


def test_convergence_does_not_end_the_minimum_rounds():
    state = good_ratings(min_rounds=2, max_rounds=3, current_round=1)
    state.rounds = [finished_round(1, [], ["m1", "m2"])]
    assert rules.should_continue_iteration(state) == (True, None)
    state.current_round = 2
    state.rounds.append(finished_round(2, [], ["m1", "m2"]))
    assert rules.should_continue_iteration(state) == (
        False,
        TerminationReason.QUALITY_THRESHOLD_MET,
    )
    state.lowest_ratings = {"m1": 1.0, "m2": 4.0}
    assert rules.should_continue_iteration(state) == (False, TerminationReason.CONVERGENCE)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"total_tokens_used": 46_000}, TerminationReason.CONTEXT_LIMIT),
        ({"cost_usd": 0.91, "max_cost_usd": 1.0}, TerminationReason.COST_LIMIT),
        ({"critiques_pending": 0}, TerminationReason.NO_CHANGES),
    ],
)
def test_budgets_and_a_review_without_critiques_end_the_minimum_rounds(change, reason):
    state = good_ratings(min_rounds=3, max_rounds=5, **change)
    assert rules.should_continue_iteration(state) == (False, reason)


# --- the cost budget ---------------------------------------------------------------------------


def test_cost_stop_is_strictly_above_ninety_percent():
    state = IterationState(enabled=True, max_rounds=5, cost_usd=0.9, max_cost_usd=1.0)
    assert rules.should_continue_iteration(state) == (True, None)
    state.cost_usd = 0.9001
    assert rules.should_continue_iteration(state) == (False, TerminationReason.COST_LIMIT)


def test_no_reported_cost_or_no_cost_budget_never_stops_the_loop():
    assert not rules.over_budget(None, 1.0)
    assert not rules.over_budget(5.0, None)
    state = IterationState(enabled=True, max_rounds=5, cost_usd=None, max_cost_usd=0.01)
    assert rules.should_continue_iteration(state) == (True, None)


# --- a round whose every call failed -----------------------------------------------------------


def test_a_stage_whose_every_call_failed_ends_the_loop_with_error_occurred():
    state = IterationState(enabled=True, max_rounds=3)
    assert not rules.end_if_all_failed(state, [])  # no call, no failure
    assert not rules.end_if_all_failed(state, [False, True, False])
    assert not state.terminated
    assert rules.end_if_all_failed(state, [False, False])
    assert rules.should_continue_iteration(state) == (False, TerminationReason.ERROR)


def test_a_failed_stage_keeps_an_earlier_reason():
    stopped = IterationState(enabled=True)
    rules.terminate_iteration(stopped, TerminationReason.USER_STOP)
    assert not rules.end_if_all_failed(stopped, [False])
    assert stopped.termination_reason == TerminationReason.USER_STOP


# --- what a review tells the rules -----------------------------------------------------------


def test_note_review_keeps_means_and_lowest_ratings():
    state = IterationState(enabled=True)
    rankings = [
        AggregateRanking(model="m1", label="Response A", mean_rating=4.5, lowest_rating=4.0),
        AggregateRanking(model="m2", label="Response B", mean_rating=None, lowest_rating=None),
    ]
    rules.note_review(state, rankings, refinements_pending=1)
    assert state.latest_scores == {"m1": 4.5}
    assert state.lowest_ratings == {"m1": 4.0}
    assert state.critiques_pending == 1
    rules.note_review(state, [], refinements_pending=0)  # a review that gave nothing
    assert state.lowest_ratings == {"m1": 4.0} and state.critiques_pending == 0


# --- the order of the checks ----------------------------------------------------------------


def everything_says_stop() -> IterationState:
    """A state where every stop condition holds at once."""
    return IterationState(
        enabled=True,
        max_rounds=2,
        current_round=2,
        total_tokens_used=49_000,
        context_budget=50_000,
        cost_usd=2.0,
        max_cost_usd=1.0,
        critiques_pending=0,
        latest_scores={"m1": 5.0, "m2": 5.0},
        lowest_ratings={"m1": 5.0, "m2": 5.0},
        rounds=[finished_round(1, [], ["m1", "m2"]), finished_round(2, [], ["m1", "m2"])],
    )


def test_user_stop_is_checked_first():
    state = everything_says_stop()
    rules.terminate_iteration(state, TerminationReason.USER_STOP)
    assert state.terminated
    assert rules.should_continue_iteration(state) == (False, TerminationReason.USER_STOP)


def test_the_documented_order_of_the_rules():
    state = everything_says_stop()
    assert rules.should_continue_iteration(state)[1] == TerminationReason.QUALITY_THRESHOLD_MET
    state.lowest_ratings = {"m1": 1.0, "m2": 5.0}
    assert rules.should_continue_iteration(state)[1] == TerminationReason.MAX_ROUNDS
    state.max_rounds = 5
    assert rules.should_continue_iteration(state)[1] == TerminationReason.CONTEXT_LIMIT
    state.total_tokens_used = 0
    assert rules.should_continue_iteration(state)[1] == TerminationReason.COST_LIMIT
    state.max_cost_usd = None
    assert rules.should_continue_iteration(state)[1] == TerminationReason.CONVERGENCE
    state.stop_on_convergence = False
    assert rules.should_continue_iteration(state)[1] == TerminationReason.NO_CHANGES
    state.critiques_pending = 1
    assert rules.should_continue_iteration(state) == (True, None)


def test_stops_when_the_latest_review_left_no_critiques_to_refine_from():
    state = IterationState(enabled=True, max_rounds=3)
    assert rules.should_continue_iteration(state) == (True, None)  # not known yet
    state.critiques_pending = 2
    assert rules.should_continue_iteration(state) == (True, None)
    state.critiques_pending = 0
    assert rules.should_continue_iteration(state) == (False, TerminationReason.NO_CHANGES)


def test_an_earlier_termination_reason_is_kept():
    state = IterationState(enabled=True, max_rounds=5)
    rules.terminate_iteration(state, TerminationReason.ERROR)
    assert rules.should_continue_iteration(state) == (False, TerminationReason.ERROR)


# --- rounds, tokens and the summary ---------------------------------------------------------


def test_complete_round_uses_the_time_and_tokens_it_is_given():
    state = IterationState(enabled=True, max_rounds=3)
    round_data = rules.start_new_round(state, NOW)
    round_data.models_that_changed.append("m1")
    rules.complete_round(state, round_data, 1200, NOW + timedelta(seconds=90))

    assert state.rounds[-1].started_at == NOW
    assert state.rounds[-1].completed_at == NOW + timedelta(seconds=90)
    assert state.rounds[-1].tokens_used == 1200
    assert state.rounds[-1].models_that_changed == ["m1"]
    assert state.total_tokens_used == 1200


def test_rounds_are_numbered_in_order():
    state = IterationState(enabled=True, max_rounds=3)
    numbers = []
    for minute in range(3):
        round_data = rules.start_new_round(state, NOW + timedelta(minutes=minute))
        rules.complete_round(state, round_data, 10, NOW + timedelta(minutes=minute, seconds=30))
        numbers.append(round_data.round_number)
    assert numbers == [1, 2, 3]
    assert state.current_round == 3
    assert state.total_tokens_used == 30


def test_charge_tokens_counts_work_outside_rounds_towards_the_budget():
    state = IterationState(enabled=True, max_rounds=5, context_budget=1000)
    rules.charge_tokens(state, 600)
    assert rules.should_continue_iteration(state) == (True, None)
    rules.charge_tokens(state, 301)
    assert state.total_tokens_used == 901
    assert state.rounds == []
    assert rules.should_continue_iteration(state) == (False, TerminationReason.CONTEXT_LIMIT)


def test_summary_without_rounds_still_has_a_terminated_reason():
    state = IterationState(enabled=True, max_rounds=2, total_tokens_used=700)
    summary = rules.iteration_summary(state)
    assert summary.terminated_reason is None
    assert summary.message == "No iterations performed"
    assert summary.rounds_completed == 0
    assert summary.tokens_used == 700

    rules.terminate_iteration(state, TerminationReason.QUALITY_THRESHOLD_MET)
    assert rules.iteration_summary(state).terminated_reason == "quality_threshold_met"
    assert rules.iteration_summary(state).model_dump(mode="json")["terminated_reason"] == (
        "quality_threshold_met"
    )


def test_summary_with_rounds():
    state = IterationState(enabled=True, max_rounds=3, latest_scores={"m1": 4.0, "m2": 3.5})
    first = rules.start_new_round(state, NOW)
    first.models_that_changed += ["m1", "m2"]
    rules.complete_round(state, first, 500, NOW + timedelta(seconds=12))
    second = rules.start_new_round(state, NOW + timedelta(seconds=20))
    second.models_that_changed.append("m1")
    second.models_unchanged.append("m2")
    rules.terminate_iteration(state, TerminationReason.USER_STOP)  # stopped mid-round

    summary = rules.iteration_summary(state)

    assert summary.rounds_completed == 2
    assert summary.max_rounds == 3
    assert summary.total_refinements == 3
    assert summary.total_unchanged == 1
    assert summary.terminated_reason == "user_stopped"
    assert summary.tokens_used == 500
    assert summary.final_scores == {"m1": 4.0, "m2": 3.5}
    assert summary.message is None
    assert [r.model_dump() for r in summary.round_summaries] == [
        {
            "round": 1,
            "models_changed": 2,
            "models_unchanged": 0,
            "tokens_used": 500,
            "duration_seconds": 12.0,
        },
        {
            "round": 2,
            "models_changed": 1,
            "models_unchanged": 1,
            "tokens_used": 0,
            "duration_seconds": None,
        },
    ]


def test_the_specification_calls_without_a_time_read_the_clock():
    state = IterationState(enabled=True, max_rounds=2)
    before = datetime.now(UTC)
    round_data = rules.start_new_round(state)
    rules.complete_round(state, round_data, 120)
    rules.terminate_iteration(state, TerminationReason.MAX_ROUNDS)

    assert before <= round_data.started_at <= round_data.completed_at <= datetime.now(UTC)
    assert state.total_tokens_used == 120
    assert rules.get_iteration_summary(state)["round_summaries"][0]["round"] == 1


def test_the_specification_summary_is_a_dict_and_the_record_summary_reads_the_same_figures():
    state = IterationState(enabled=True, max_rounds=3, total_tokens_used=900)
    assert rules.get_iteration_summary(state)["message"] == "No iterations performed"
    first = rules.start_new_round(state, NOW)
    first.models_that_changed.append("m1")
    rules.complete_round(state, first, 300, NOW + timedelta(seconds=5))
    rules.terminate_iteration(state, TerminationReason.CONVERGENCE)

    figures = rules.get_iteration_summary(state)
    typed = rules.iteration_summary(state)

    assert "message" not in figures  # as the specification: a message only without rounds
    assert figures["terminated_reason"] == "models_converged"
    assert isinstance(figures["terminated_reason"], str)
    assert figures["round_summaries"][0]["duration_seconds"] == 5.0
    assert typed.model_dump(mode="json", exclude={"message"}) == figures


def test_state_survives_a_json_round_trip():
    # The state travels through Temporal payloads and workflow history as JSON.
    state = IterationState(enabled=True, max_rounds=3, latest_scores={"m1": 2.5})
    round_data = rules.start_new_round(state, NOW)
    rules.complete_round(state, round_data, 42, NOW + timedelta(seconds=1))
    rules.terminate_iteration(state, TerminationReason.CONVERGENCE)

    again = IterationState.model_validate_json(state.model_dump_json())

    assert again == state
    assert again.termination_reason is TerminationReason.CONVERGENCE


def test_a_record_written_before_the_summary_had_its_model_still_reads():
    """Records saved by earlier versions (the evaluation's raw outputs) read back."""
    from council.iteration import IterationSummary

    old = {
        "message": "No iterations performed",
        "rounds_completed": 0,
        "max_rounds": 2,
        "terminated_reason": "quality_threshold_met",
        "tokens_used": 4123,
        "token_budget": 50000,
        "quality_threshold": 1.5,
        "final_scores": {"m1": 4.5},
    }
    summary = IterationSummary.model_validate(old)
    assert summary.terminated_reason is TerminationReason.QUALITY_THRESHOLD_MET
    assert summary.round_summaries == [] and summary.final_lowest_ratings == {}
