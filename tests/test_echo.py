"""A reply that repeats our own prompt is no answer (council.echo).

As pure functions: the refinement prompt's JSON placeholder and the chairman's
instruction are echoes; a member that restates its own answer, a chairman that adopts a
member's answer word for word, and an answer that quotes one of our sentences are not.
On the dev server, with the simulator echoing as a small model does: a refinement that
echoes keeps the previous answer, a chairman that echoes is replaced by the next model,
and the record says why.
"""

from __future__ import annotations

from difflib import SequenceMatcher

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from council import prompts
from council.calls import Stage
from council.echo import ECHO, ECHO_PROBLEM, MIN_RUN_WORDS, _longest_shared_run, repeats_prompt
from council.iteration import CritiqueItem
from council.refinement import RefinementTask, refinement_result
from tests.temporal_fixtures import Council
from tests.tiers import examples

QUESTION = "A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. How much?"
ANSWER = "The ball costs 5 cents: the bat costs $1.05, and together they cost $1.10."
CRITIQUE = CritiqueItem(
    source_model="sim/atlas", target_response="Response A", critique_text="Show the algebra."
)


def refinement() -> str:
    return prompts.build_refinement_prompt(QUESTION, ANSWER, [CRITIQUE])


def synthesis() -> str:
    return prompts.synthesis_prompt(QUESTION, {"sim/atlas": ANSWER}, [], 1, 100_000)[0].content


@pytest.mark.fast
def test_the_prompts_own_words_are_an_echo() -> None:
    placeholder = "your complete refined response, self-contained, written for the person who asked"
    assert repeats_prompt(placeholder, refinement(), [QUESTION, ANSWER])
    instruction = (
        "one accurate, complete answer that draws on the strongest points, resolves "
        "disagreements and corrects the errors the reviews found"
    )
    assert repeats_prompt(instruction, synthesis(), [QUESTION, ANSWER])


def longest_shared_run(said: list[str], asked: list[str]) -> tuple[int, int]:
    """difflib's longest matching block (the earliest in `said` of the longest), as the
    search must find it."""
    match = SequenceMatcher(None, said, asked, autojunk=False).find_longest_match(
        0, len(said), 0, len(asked)
    )
    return (match.a, match.size) if match.size >= MIN_RUN_WORDS else (0, 0)


WORDS = st.lists(st.sampled_from(["a", "b", "c"]), max_size=60)


@pytest.mark.fast
@settings(max_examples=examples(400), deadline=None)
@given(said=WORDS, asked=WORDS)
def test_the_search_finds_the_run_difflib_finds(said, asked) -> None:
    """The linear search gives difflib's longest shared run, where it starts in the reply
    and its length, whenever that run could count (MIN_RUN_WORDS words or more)."""
    assert _longest_shared_run(said, asked) == longest_shared_run(said, asked)


@pytest.mark.fast
def test_an_answer_from_the_material_or_with_a_quotation_is_no_echo() -> None:
    # A member keeps its own answer; a chairman adopts a member's answer word for word.
    assert not repeats_prompt(ANSWER, refinement(), [QUESTION, ANSWER])
    assert not repeats_prompt(ANSWER, synthesis(), [QUESTION, ANSWER])
    # A real answer that happens to quote one of our sentences.
    quoting = (
        f"{ANSWER} Let x be the ball's price; then x + (x + 1.00) = 1.10, so 2x = 0.10 and "
        "x = 0.05. Address each critique point explicitly where valid: the algebra is above."
    )
    assert not repeats_prompt(quoting, refinement(), [QUESTION, ANSWER])
    assert not repeats_prompt("", refinement()) and not repeats_prompt("Yes.", refinement())


@pytest.mark.fast
def test_a_refinement_that_echoes_keeps_the_previous_answer() -> None:
    task = RefinementTask(
        model="sim/drift", label="Response A", original=ANSWER, critiques=[CRITIQUE]
    )
    echo = (
        '{"critiques_accepted": ["each critique you accept"], "final_answer": "your complete '
        'refined response, self-contained, written for the person who asked"}'
    )
    result = refinement_result(task, echo, prompt=refinement(), material=[QUESTION])
    assert result.error == ECHO_PROBLEM
    assert result.refined_response == ANSWER and not result.changes_made
    assert result.raw_response == echo  # what it said is kept
    real = refinement_result(task, '{"final_answer": "5 cents, since x + x + 1 = 1.10."}')
    assert real.error is None and real.refined_response != ANSWER


async def test_echoes_on_the_dev_server_are_no_answers(council: Council) -> None:
    council.sim.set_faults(
        {
            "*": {"latency": 0.1},
            "sim/drift": {"latency": 0.1, "echo": 1.0, "stages": ["stage2_5"]},
            "sim/oracle": {"latency": 0.1, "echo": 1.0, "stages": ["stage3"]},
        }
    )
    record = await council.run(
        question=QUESTION,
        models=["sim/atlas", "sim/borealis", "sim/drift"],
        chairman="sim/oracle",
        max_rounds=1,
        min_rounds=1,
        stop_on_convergence=False,
    )
    [drift] = [r for r in record.rounds[0].refinements if r.model == "sim/drift"]
    assert drift.error == ECHO_PROBLEM
    assert drift.refined_response == drift.original_response
    assert "your complete refined response" in (drift.raw_response or "")
    # The chairman echoed its instructions: the next model wrote the final answer.
    assert record.stage3 is not None and record.stage3.model != "sim/oracle"
    assert "one accurate, complete answer" not in record.stage3.response
    echoes = {(e.stage, e.model) for e in record.errors if e.error_type == ECHO}
    assert echoes == {(Stage.REFINE, "sim/drift"), (Stage.SYNTHESIS, "sim/oracle")}
    assert all(e.message == ECHO_PROBLEM for e in record.errors)


async def test_when_no_model_writes_the_synthesis_the_best_rated_answer_stands(
    council: Council,
) -> None:
    """Every member echoes the chairman's prompt (three small models did): the run still
    completes, with the best-rated member's answer as the final answer, and says so."""
    council.sim.set_faults({"*": {"latency": 0.05, "echo": 1.0, "stages": ["stage3"]}})
    models = ["sim/atlas", "sim/borealis", "sim/drift"]
    record = await council.run(question=QUESTION, models=models, max_rounds=1)
    assert record.status == "completed" and record.stage3 is not None
    best = record.aggregate_rankings[0].model
    assert record.stage3.model == best
    assert record.stage3.fallback is not None and best in record.stage3.fallback
    final = {r.model: r.corrected_response for r in record.stage2_5 or []}
    assert record.stage3.response == final.get(
        best, next(r.response for r in record.stage1 if r.model == best)
    )
    assert {(e.stage, e.model) for e in record.errors} == {(Stage.SYNTHESIS, m) for m in models}
    # The answer that stands keeps how it ended when it was written.
    assert record.stage3.finish_reason == "stop" and record.stage3.provider is not None
