"""The deliberation request: one-line reasons for bad input, defaults, and the reply cap."""

from __future__ import annotations

import pytest

from council import limits
from council.models import DeliberationRequest
from council.validation import InvalidRequest, validate_request

pytestmark = pytest.mark.fast

BASE = {
    "question": "Why is the sky blue?",
    "models": ["openai/gpt-4o", "anthropic/claude-3.5-sonnet"],
}


def reason(**changes) -> str:
    with pytest.raises(InvalidRequest) as caught:
        validate_request({**BASE, **changes})
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_minimal_request_gets_the_documented_defaults():
    request = validate_request(BASE)
    assert request.chairman == "openai/gpt-4o"  # the first model
    assert request.max_rounds == 2
    assert request.quality_threshold == 1.5
    assert request.token_budget == 50_000
    assert request.stop_on_convergence is True


def test_an_explicit_chairman_is_kept_even_outside_the_council():
    request = validate_request({**BASE, "chairman": "google/gemini-2.5-pro"})
    assert request.chairman == "google/gemini-2.5-pro"


def test_question_is_stripped():
    assert validate_request({**BASE, "question": "  Why?  \n"}).question == "Why?"


def test_empty_question():
    assert reason(question="   ") == "question must not be empty"


def test_missing_question():
    with pytest.raises(InvalidRequest, match=r"^question is required$"):
        validate_request({"models": BASE["models"]})


def test_too_long_question_names_the_limit():
    message = reason(question="x" * (limits.QUESTION_MAX_CHARS + 1))
    assert message.startswith("question is too long")
    assert str(limits.QUESTION_MAX_CHARS) in message


@pytest.mark.parametrize("models", [["only/one"], [f"m{i}" for i in range(13)], []])
def test_model_count_outside_two_to_twelve(models):
    message = reason(models=models)
    assert message.startswith("models")
    assert "2 to 12" in message
    assert f"got {len(models)}" in message


def test_duplicate_models():
    message = reason(models=["a/x", "b/y", "a/x"])
    assert message.startswith("models")
    assert "'a/x'" in message and "twice" in message


def test_twelve_distinct_models_are_fine():
    assert len(validate_request({**BASE, "models": [f"m{i}" for i in range(12)]}).models) == 12


def test_a_model_id_with_spaces_is_refused():
    assert reason(models=["a/x", "not a model"]).startswith("models.1:")


@pytest.mark.parametrize("rounds", [0, 6, -1])
def test_rounds_outside_one_to_five(rounds):
    assert reason(max_rounds=rounds) == f"max_rounds must be between 1 and 5 (got {rounds})"


@pytest.mark.parametrize("rounds", [1, 5])
def test_rounds_at_the_bounds_are_fine(rounds):
    assert validate_request({**BASE, "max_rounds": rounds}).max_rounds == rounds


@pytest.mark.parametrize("threshold", [-0.1, 5.01])
def test_threshold_outside_zero_to_five(threshold):
    assert reason(quality_threshold=threshold) == (
        f"quality_threshold must be between 0.0 and 5.0 (got {threshold})"
    )


@pytest.mark.parametrize("threshold", [0, 5])
def test_threshold_at_the_bounds_is_fine(threshold):
    assert validate_request({**BASE, "quality_threshold": threshold}).quality_threshold == threshold


@pytest.mark.parametrize("threshold", [-0.1, 1.5])
def test_change_threshold_outside_zero_to_one(threshold):
    assert reason(min_change_threshold=threshold) == (
        f"min_change_threshold must be between 0 and 1 (got {threshold})"
    )


@pytest.mark.parametrize("budget", [0, -100])
def test_non_positive_budget(budget):
    message = reason(token_budget=budget)
    assert message.startswith("token_budget must be between 1 and ")
    assert f"(got {budget})" in message


def test_unknown_field_lists_the_allowed_ones():
    message = reason(max_round=3)
    assert message.startswith("max_round is not a known field")
    assert "max_rounds" in message and "question" in message


def test_nested_fields_are_named_by_their_path():
    assert (
        reason(policy={"max_attempts": 0}) == "policy.max_attempts must be between 1 and 20 (got 0)"
    )


def test_a_request_object_is_revalidated():
    request = DeliberationRequest.model_construct(**{**BASE, "max_rounds": 9})
    with pytest.raises(InvalidRequest, match="max_rounds"):
        validate_request(request)


def test_invalid_request_is_a_value_error():
    assert issubclass(InvalidRequest, ValueError)


# --- the reply cap ----------------------------------------------------------------------------


def test_reply_cap_of_a_request_follows_its_models_and_the_most_rounds_it_can_reach():
    small = validate_request(BASE)
    large = validate_request({**BASE, "models": [f"m{i}" for i in range(12)], "max_rounds": 5})
    # The user may raise the maximum rounds while it runs: the cap allows for the limit.
    assert small.response_byte_cap == limits.response_byte_cap(2, limits.MAX_ROUNDS)
    assert large.response_byte_cap == limits.response_byte_cap(12, limits.MAX_ROUNDS)
    assert large.response_byte_cap < small.response_byte_cap


def test_small_councils_get_the_ceiling():
    assert limits.response_byte_cap(2, 1) == limits.MAX_RESPONSE_BYTES


@pytest.mark.parametrize("models", range(limits.MIN_MODELS, limits.MAX_MODELS + 1))
@pytest.mark.parametrize("rounds", range(limits.MIN_ROUNDS, limits.MAX_ROUNDS + 1))
def test_every_allowed_shape_keeps_the_record_inside_its_budget(models, rounds):
    cap = limits.response_byte_cap(models, rounds)
    assert limits.MIN_RESPONSE_BYTES <= cap <= limits.MAX_RESPONSE_BYTES
    assert models * limits.texts_per_model(rounds) * cap <= limits.RECORD_BUDGET_BYTES


def test_cap_shrinks_with_more_models_and_rounds_but_never_below_the_floor():
    caps = [limits.response_byte_cap(m, 5) for m in range(2, 13)]
    assert caps == sorted(caps, reverse=True)
    assert limits.response_byte_cap(1000, 5) == limits.MIN_RESPONSE_BYTES
    assert limits.response_byte_cap(2, 1, ceiling=10_000) == 10_000


def test_min_rounds_defaults_to_one_and_stays_within_max_rounds():
    assert validate_request(BASE).min_rounds == 1
    assert validate_request({**BASE, "min_rounds": 0}).min_rounds == 0
    assert validate_request({**BASE, "min_rounds": 4, "max_rounds": 4}).min_rounds == 4
    assert reason(min_rounds=3) == "min_rounds must be between 0 and 2, the maximum rounds (got 3)"
    assert reason(min_rounds=-1) == "min_rounds must be between 0 and 5 (got -1)"
    config = validate_request({**BASE, "min_rounds": 0}).iteration_config()
    assert config.min_rounds == 0


def test_the_cost_budget_is_optional_and_positive():
    assert validate_request(BASE).max_cost_usd is None
    assert validate_request({**BASE, "max_cost_usd": 0.25}).iteration_config().max_cost_usd == 0.25
    assert reason(max_cost_usd=0) == "max_cost_usd must be more than 0 and at most 10000.0 (got 0)"
    assert reason(max_cost_usd=-2).startswith("max_cost_usd must be more than 0")
