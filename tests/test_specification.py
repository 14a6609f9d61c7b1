"""The specification's own unit tests, as the user wrote them.

These assertions are the user's: they are copied from the specification (stage 2.5
refinement, and iteration state management) and are never edited to fit the code. Only
the imports are ours (and one fixture: stage 2.5 calls models, here the simulator over
HTTP). When one of these fails, the code is wrong, not the test.
"""

from datetime import datetime

import pytest

from activities.direct import stage2_5_refine_responses
from council.changes import detect_significant_changes
from council.iteration import (
    CritiqueItem,
    IterationConfig,
    IterationRound,
    IterationState,
    TerminationReason,
    get_iteration_summary,
    initialize_iteration_state,
    should_continue_iteration,
    start_new_round,
)
from council.prompts import build_refinement_prompt

pytestmark = pytest.mark.fast


@pytest.fixture(autouse=True)
def models_over_http(sim, monkeypatch):
    """Stage 2.5's model calls go to the simulator, as a worker's would."""
    monkeypatch.setenv("COUNCIL_LLM_BASE_URL", sim.url)


# ---- stage 2.5 refinement -------------------------------------------------------------


@pytest.mark.asyncio
async def test_stage2_5_basic_flow():
    """Should refine responses based on critiques"""
    stage1_results = [
        {"model": "gpt-4", "response": "Original answer about Python"},
        {"model": "claude", "response": "Another answer about Python"}
    ]

    stage2_results = [
        {"model": "gpt-4", "ranking": "Response A lacks examples. Response B is good."},
        {"model": "claude", "ranking": "Response A should be more detailed."}
    ]

    label_to_model = {
        "Response A": "gpt-4",
        "Response B": "claude"
    }

    state = IterationState(enabled=True, max_rounds=2)

    refined, round_data = await stage2_5_refine_responses(
        user_query="What is Python?",
        stage1_results=stage1_results,
        stage2_results=stage2_results,
        label_to_model=label_to_model,
        iteration_state=state
    )

    assert len(refined) == 2
    assert round_data.round_number == 1


def test_detect_significant_changes():
    """Should detect meaningful changes"""
    original = "Python is a programming language."
    refined = "Python is a versatile programming language used for web development, data science, and automation. It features clean syntax and extensive libraries."

    assert detect_significant_changes(original, refined) == True


def test_detect_no_changes():
    """Should detect when response unchanged"""
    original = "Python is a programming language."
    refined = "Python is a programming language."

    assert detect_significant_changes(original, refined) == False


def test_detect_minor_changes():
    """Should detect minor changes as unchanged"""
    original = "Python is a programming language."
    refined = "Python is a programming language!"  # Just punctuation

    assert detect_significant_changes(original, refined) == False


def test_build_refinement_prompt():
    """Should build valid refinement prompt"""
    critiques = [
        CritiqueItem(source_model="m1", target_response="A", critique_text="lacks examples")
    ]

    prompt = build_refinement_prompt(
        user_query="What is Python?",
        original_response="Python is a language.",
        critiques=critiques
    )

    assert "What is Python?" in prompt
    assert "Python is a language." in prompt
    assert "lacks examples" in prompt
    assert "REFINED RESPONSE" in prompt


# ---- iteration state management -------------------------------------------------------


def test_initialize_state():
    """Should create state from config"""
    config = IterationConfig(enabled=True, max_rounds=3)
    state = initialize_iteration_state(config)

    assert state.enabled == True
    assert state.max_rounds == 3
    assert state.current_round == 0
    assert len(state.rounds) == 0


def test_should_continue_first_round():
    """Should continue on first round"""
    state = IterationState(enabled=True, max_rounds=2, current_round=0)
    should_continue, reason = should_continue_iteration(state)

    assert should_continue == True
    assert reason is None


def test_should_stop_at_max_rounds():
    """Should stop when max rounds reached"""
    state = IterationState(enabled=True, max_rounds=2, current_round=2)
    should_continue, reason = should_continue_iteration(state)

    assert should_continue == False
    assert reason == TerminationReason.MAX_ROUNDS


def test_should_stop_on_convergence():
    """Should stop when no models changed"""
    state = IterationState(
        enabled=True,
        max_rounds=3,
        current_round=1,
        rounds=[
            IterationRound(
                round_number=1,
                started_at=datetime.utcnow(),
                completed_at=datetime.utcnow(),
                critiques={},
                refinements=[],
                models_that_changed=[],  # No changes
                models_unchanged=["gpt-4", "claude"]
            )
        ]
    )
    should_continue, reason = should_continue_iteration(state)

    assert should_continue == False
    assert reason == TerminationReason.CONVERGENCE


def test_context_budget_limit():
    """Should stop when approaching context limit"""
    state = IterationState(
        enabled=True,
        max_rounds=5,
        current_round=1,
        total_tokens_used=46000,
        context_budget=50000
    )
    should_continue, reason = should_continue_iteration(state)

    assert should_continue == False
    assert reason == TerminationReason.CONTEXT_LIMIT


def test_start_new_round():
    """Should increment round and create new entry"""
    state = IterationState(enabled=True, max_rounds=3, current_round=0)
    new_round = start_new_round(state)

    assert state.current_round == 1
    assert len(state.rounds) == 1
    assert new_round.round_number == 1


def test_iteration_summary():
    """Should generate correct summary"""
    state = IterationState(
        enabled=True,
        max_rounds=2,
        current_round=2,
        terminated=True,
        termination_reason=TerminationReason.MAX_ROUNDS,
        total_tokens_used=25000,
        rounds=[
            IterationRound(
                round_number=1,
                started_at=datetime.utcnow(),
                completed_at=datetime.utcnow(),
                critiques={},
                refinements=[],
                models_that_changed=["gpt-4"],
                models_unchanged=["claude"]
            )
        ]
    )

    summary = get_iteration_summary(state)

    assert summary["rounds_completed"] == 1
    assert summary["total_refinements"] == 1
    assert summary["terminated_reason"] == "max_rounds_reached"
