"""Datasets: validation with one-line errors, the bundled dataset, and the simulator's
(simulated) solving of its problems, checked without Temporal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from council import prompts
from council.iteration import CritiqueItem
from grading.dataset import NO_SIMULATED_ANSWER, DatasetError, Problem, load_dataset
from grading.judge import judge_prompt, parse_verdict, read_judge_prompt
from simulator import problems
from simulator.personas import PERSONAS, persona_for, reply
from simulator.reading import read_prompt

pytestmark = pytest.mark.fast

BUNDLED = Path(__file__).resolve().parents[1] / "datasets" / "arithmetic_logic.jsonl"
CAP = 37_500


def write(tmp_path: Path, *lines: str, name: str = "set.jsonl") -> Path:
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (['{"id": "a", "question": "q?"}'], "set.jsonl line 1: answer: is required"),
        (
            ['{"id": "a", "question": "q?", "answer": 1}', '{"id": "b" "question": "q?"}'],
            "set.jsonl line 2: not valid JSON (Expecting ',' delimiter at column 12)",
        ),
        (
            [
                '{"id": "a", "question": "q?", "answer": 1}',
                "",
                '{"id": "a", "question": "r?", "answer": 2}',
            ],
            "set.jsonl line 3: id: 'a' repeats line 1",
        ),
        (
            ['{"id": "a b", "question": "q?", "answer": 1}'],
            "line 1: id: 'a b' may hold only letters",
        ),
        (
            ['{"id": "a", "question": "q?", "answer": "x", "kind": "number"}'],
            "line 1: answer: 'x' is not a number (kind number)",
        ),
        (
            ['{"id": "a", "question": "Pick (A) x (B) y", "answer": "D", "kind": "choice"}'],
            "line 1: answer: 'D' is not one option letter (A, B) (kind choice)",
        ),
        (
            ['{"id": "a", "question": "q?", "answer": "x", "kind": "numeric"}'],
            "line 1: kind: must be number, choice or text (got 'numeric')",
        ),
        (['{"id": "a", "question": "  ", "answer": 1}'], "line 1: question: must not be empty"),
        (
            ['{"id": "a", "question": "q?", "answer": "Bob", "tolerance": 0.1}'],
            "line 1: tolerance: only a number answer has one (kind text)",
        ),
        (['["a", "q?", 1]'], "line 1: a problem must be a JSON object, got list"),
        (["", "  "], "set.jsonl: no problems"),
    ],
)
def test_a_bad_dataset_fails_with_one_line_naming_line_and_field(tmp_path, lines, message) -> None:
    with pytest.raises(DatasetError) as caught:
        load_dataset(write(tmp_path, *lines))
    assert message in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_missing_file_is_named(tmp_path) -> None:
    with pytest.raises(DatasetError, match=r"cannot read dataset .*nope\.jsonl"):
        load_dataset(tmp_path / "nope.jsonl")


def test_a_url_is_refused_as_one_not_as_a_missing_file() -> None:
    with pytest.raises(DatasetError) as caught:
        load_dataset("https://example.com/problems.jsonl")
    assert str(caught.value) == (
        "dataset https://example.com/problems.jsonl is a URL, and the council does not fetch "
        "URLs: download it first and give the file's path"
    )


def test_kinds_are_inferred_and_extra_fields_ignored(tmp_path) -> None:
    dataset = load_dataset(
        write(
            tmp_path,
            '{"id": "n", "question": "q?", "answer": 42, "source": "mine"}',
            '{"id": "c", "question": "Pick (A) x (B) y", "answer": "B"}',
            '{"id": "t", "question": "Who?", "answer": "Alice"}',
        )
    )
    assert [(p.id, p.kind, p.answer) for p in dataset.problems] == [
        ("n", "number", "42"),
        ("c", "choice", "B"),
        ("t", "text", "Alice"),
    ]
    assert dataset.name == "set" and len(dataset.sha256) == 64


def test_the_bundled_dataset_is_valid_and_varied() -> None:
    dataset = load_dataset(BUNDLED)
    kinds = [p.kind for p in dataset.problems]
    assert len(dataset) >= 30
    assert {kinds.count(k) >= 5 for k in ("number", "choice", "text")} == {True}
    for problem in dataset.problems:
        # The expected answer, written the way the instruction asks, reads back as correct.
        assert problem.is_correct(problem.read(f"Working.\n\nFinal answer: {problem.answer}")), (
            problem.id
        )
        assert problem.prompt().startswith(problem.question)
        assert "Final answer: <answer>" in problem.prompt()


# ---- the simulator plays solvers of known skill ----------------------------------------


@pytest.fixture(scope="module")
def bundled():
    return load_dataset(BUNDLED)


def ask(persona_name: str, text: str) -> str:
    return reply(persona_for(persona_name), read_prompt(text))


def test_the_simulator_knows_every_bundled_problem_and_nothing_else(bundled) -> None:
    for problem in bundled.problems:
        assert problems.problem_for(problem.prompt()) == problem
        assert problems.problem_for(problem.question) == problem
    assert problems.problem_for("What are the trade-offs between SQL and NoSQL databases?") is None
    question = "How many seconds are there in 2.5 hours? And in 3 hours?"  # not the same problem
    assert problems.problem_for(question) is None


def test_other_questions_keep_the_usual_personas(bundled) -> None:
    text = prompts.answer_prompt("What are the trade-offs between SQL and NoSQL databases?", CAP)[
        0
    ].content
    assert problems.reply(PERSONAS[0], read_prompt(text)) is None
    assert "Final answer" not in ask("sim/atlas", text)


def test_a_problem_the_simulator_does_not_know_gets_no_answer_at_any_stage() -> None:
    """A problem as the harness asks it, of a dataset the simulator was not given: no
    member answers it (right or wrong), a refinement keeps saying so, and the chairman too,
    so that no number of the question's is read as a wrong answer."""
    unknown = Problem(id="mine-01", question="What is 37*91+12?", answer="3379")
    assert problems.problem_for(unknown.prompt()) is None
    asked = prompts.answer_prompt(unknown.prompt(), CAP)[0].content
    answers = {persona.model: ask(persona.model, asked) for persona in PERSONAS}
    for text in answers.values():
        assert NO_SIMULATED_ANSWER in text and unknown.read(text) is None, text
    critique = CritiqueItem(
        source_model="sim/borealis",
        target_response="Response A",
        critique_text="The final answer (12) is wrong.",
        rating=1,
    )
    refined = ask(
        "sim/atlas",
        prompts.refinement_prompt(unknown.prompt(), answers["sim/atlas"], [critique], CAP)[
            0
        ].content,
    )
    data = json.loads(refined)
    assert data["changed_from_original"] is False
    assert (
        NO_SIMULATED_ANSWER in data["final_answer"] and unknown.read(data["final_answer"]) is None
    )
    synthesis = ask(
        "sim/atlas",
        prompts.synthesis_prompt(unknown.prompt(), answers, [], rounds_run=1, byte_cap=CAP)[
            0
        ].content,
    )
    assert NO_SIMULATED_ANSWER in synthesis and unknown.read(synthesis) is None
    # The question alone, without the harness's instruction, is any other question.
    plain = prompts.answer_prompt(unknown.question, CAP)[0].content
    assert NO_SIMULATED_ANSWER not in ask("sim/atlas", plain)


def test_stage1_slips_follow_each_personas_skill(bundled) -> None:
    right = {}
    for persona in PERSONAS:
        replies = [
            ask(persona.model, prompts.answer_prompt(p.prompt(), CAP)[0].content)
            for p in bundled.problems
        ]
        assert all(r.startswith("[simulated]") for r in replies)
        right[persona.name] = sum(
            problems.reads_right(p, r) for p, r in zip(bundled.problems, replies, strict=False)
        )
        assert replies == [  # deterministic
            ask(persona.model, prompts.answer_prompt(p.prompt(), CAP)[0].content)
            for p in bundled.problems
        ]
    total = len(bundled)
    assert right["Atlas"] >= right["Borealis"] > right["Cirrus"]
    assert right["Drift"] > right["Cirrus"]
    assert 0.4 * total < right["Cirrus"] < 0.8 * total  # it slips on some, not all


def _wrong_and_right(problem):
    right = problems.solution(problem, problems._expected_value(problem), "marked")
    wrong = problems.solution(problem, problems.mistakes(problem)[0], "marked")
    return wrong, right


def test_reviewers_flag_wrong_answers_and_refinements_fix_them(bundled) -> None:
    problem = next(p for p in bundled.problems if p.id == "arith-03")
    wrong, right = _wrong_and_right(problem)
    assert not problem.is_correct(problem.read(wrong)) and problem.is_correct(problem.read(right))
    review = ask(
        "sim/borealis",
        prompts.review_prompt(problem.prompt(), {"Response A": wrong, "Response B": right}, CAP)[
            0
        ].content,
    )
    slip = problems.mistakes(problem)[0]
    assert f"**Response A** Rating: 1/5. The final answer ({slip}) is wrong" in review
    assert "**Response B** Rating: 5/5. The final answer (36) checks out" in review
    assert review.index("1. Response B (5/5)") < review.index("2. Response A (1/5)")

    flagged = [
        CritiqueItem(
            source_model="sim/borealis",
            target_response="Response A",
            critique_text=f"The final answer ({slip}) is wrong: recheck it.",
            rating=1,
        )
    ]
    refined = ask(
        "sim/atlas", prompts.refinement_prompt(problem.prompt(), wrong, flagged, CAP)[0].content
    )
    data = json.loads(refined)
    assert data["changed_from_original"] is True and data["critiques_accepted"]
    assert problem.is_correct(problem.read(data["final_answer"]))

    # A right answer flagged by one reviewer is re-checked and kept.
    kept = json.loads(
        ask(
            "sim/atlas", prompts.refinement_prompt(problem.prompt(), right, flagged, CAP)[0].content
        )
    )
    assert kept["changed_from_original"] is False and kept["critiques_rejected"]
    assert problem.is_correct(problem.read(kept["final_answer"]))


def test_the_chairman_gives_the_answer_with_most_peer_support(bundled) -> None:
    problem = next(p for p in bundled.problems if p.id == "logic-04")
    wrong, right = _wrong_and_right(problem)
    rankings = []
    answers = {"sim/atlas": right, "sim/borealis": wrong, "sim/cirrus": wrong, "sim/drift": right}
    text = prompts.synthesis_prompt(
        problem.prompt(), answers, rankings, rounds_run=1, byte_cap=CAP
    )[0].content
    text = text.replace(
        'standing="not rated"', 'standing="mean peer rating 1.00/5"', 2
    )  # the wrong ones
    text = text.replace('standing="not rated"', 'standing="mean peer rating 5.00/5"')
    synthesis = ask("sim/atlas", text)
    assert synthesis.startswith(problems.SYNTHESIS_LABEL)
    assert problem.read(synthesis).value == "B"  # 2 members with 5/5 beat 2 with 1/5


def test_the_judge_prompt_round_trips_and_the_simulated_judge_is_lenient() -> None:
    messages = judge_prompt("Who wins the race?", "Iris", "[simulated] It must be Iris.")
    assert read_judge_prompt(messages[0].content) == (
        "Who wins the race?",
        "Iris",
        "[simulated] It must be Iris.",
    )
    verdict = ask("sim/drift", messages[0].content)
    assert verdict.startswith("[simulated]") and parse_verdict(verdict) is True
    other = ask("sim/drift", judge_prompt("Who wins?", "Iris", "It must be Leo.")[0].content)
    assert parse_verdict(other) is False
    assert parse_verdict("no verdict here") is None
    assert parse_verdict("VERDICT: INCORRECT ... on reflection VERDICT: **CORRECT**") is True


def test_a_refined_solution_counts_as_changed_only_when_it_changed_in_substance(bundled) -> None:
    from datetime import UTC, datetime

    from council.iteration import IterationRound, RefinementResult
    from council.models import DeliberationRecord
    from council.stages import Stage1Result
    from evaluation.outputs import stage3_refined
    from evaluation.scoring import score_problem

    problem = bundled.problems[0]
    original = "[simulated] Working: 6 times 6 is 36.\nFinal answer: 36"
    round_one = IterationRound(
        round_number=1,
        started_at=datetime(2026, 1, 1, tzinfo=UTC),
        refinements=[
            RefinementResult(  # punctuation only: not a change
                model="sim/atlas",
                original_response=original,
                refined_response=original.replace("36.", "36!"),
                reasoning_steps=["Recheck the product."],
            ),
            RefinementResult(
                model="sim/borealis",
                original_response=original,
                refined_response=(
                    "[simulated] A different method entirely, with new steps.\nFinal answer: 35"
                ),
            ),
        ],
    )
    record = DeliberationRecord(
        id="x",
        query=problem.prompt(),
        models=["sim/atlas", "sim/borealis"],
        chairman="sim/atlas",
        stage1=[Stage1Result(model=m, response=original) for m in ("sim/atlas", "sim/borealis")],
        rounds=[round_one],
    )
    data = stage3_refined(problem, record, score_problem(problem, record, 1, "x", "saved"))
    solutions = data["refined_solutions"]
    assert solutions["sim/atlas"]["changed_from_original"] is False
    assert solutions["sim/atlas"]["reasoning_steps"] == ["Recheck the product."]
    assert solutions["sim/borealis"]["changed_from_original"] is True


def test_every_setting_that_can_change_an_answer_changes_the_run_key(bundled) -> None:
    from council.models import DeliberationRequest
    from council.validation import validate_request
    from evaluation.plan import KEY_SETTINGS, run_key

    # Left out: the question (each problem sets its own), the call policy, the thread
    # fields (a dataset's problems are never follow-ups) and attachments (they bring none).
    thread = {
        "follow_up_of",
        "thread_id",
        "history",
        "dropped_turns",
        "unnamed_dropped",
        "context_tokens",
    }
    left_out = {"question", "policy", "attachments", *thread}
    assert set(DeliberationRequest.model_fields) - left_out == KEY_SETTINGS
    base = {"question": "q", "models": ["sim/atlas", "sim/borealis"]}
    keys = {
        run_key(bundled, validate_request({**base, **change}))
        for change in ({}, {"min_rounds": 0}, {"max_cost_usd": 1.0}, {"max_rounds": 3})
    }
    assert len(keys) == 4
    assert run_key(bundled, validate_request({**base, "policy": {"max_attempts": 2}})) in keys


# ---- the GSM8K subset -------------------------------------------------------------------

GSM8K = BUNDLED.parent / "gsm8k_test_subset.jsonl"


def test_the_gsm8k_subset_is_valid_and_licensed() -> None:
    dataset = load_dataset(GSM8K)
    ids = [p.id for p in dataset.problems]
    assert len(dataset) >= 200
    assert len(set(ids)) == len(ids)
    assert all(re.fullmatch(r"gsm8k-test-\d{4}", i) for i in ids), ids
    assert ids == sorted(ids)  # drawn, then sorted by the index in GSM8K's test.jsonl
    for problem in dataset.problems:
        assert problem.kind == "number", problem.id
        assert "," not in problem.answer, problem.id
        assert problem.is_correct(problem.expected), problem.id
        assert problem.is_correct(problem.read(f"Working.\n\nFinal answer: {problem.answer}")), (
            problem.id
        )
    licence = (GSM8K.parent / "LICENSE-gsm8k").read_text(encoding="utf-8")
    assert licence.startswith("MIT License") and "OpenAI" in licence
