"""The evaluation's arms as pure functions: what each arm answered and spent on a problem,
the chairman's paired tests, conformity, the strongest member, how many samples
self-consistency draws, and the simulator's seeded samples."""

from __future__ import annotations

from pathlib import Path
from typing import get_args

import pytest

from council.models import UsageTotals
from evaluation.arms import (
    CHAIRMAN_ARM,
    VOTE_ARM,
    ArmKind,
    arms_and_tests,
    conformity,
    member_arm,
    outcomes,
    round_arm,
    strongest_member,
)
from evaluation.plot import ARM_MARKERS
from evaluation.scoring import STAGE1, ProblemScore, Reading, SampledVote, Vote, score_samples
from grading.dataset import load_dataset
from grading.sampling import SamplingResult, samples_for
from simulator.problems import SKILLS, chance, stage1_value

pytestmark = pytest.mark.fast

STAGES = [STAGE1, "round 1"]
MODELS = ["a", "b", "c"]
GSM8K = Path(__file__).resolve().parents[1] / "datasets" / "gsm8k_test_subset.jsonl"


def reading(correct: bool, answer: str | None = "1") -> Reading:
    return Reading(answer=answer, correct=correct)


def problem(
    pid: str,
    first: list[bool],
    last: list[bool],
    chairman: bool,
    sampled: bool | None = None,
) -> ProblemScore:
    """A completed problem: members a, b, c right or wrong at stage 1 and after round 1,
    the votes as the majority of those, the chairman; 1,000 tokens ($0.01), of which stage 1
    300 ($0.003), the round 400, the chairman 100."""
    score = ProblemScore(
        id=pid,
        kind="number",
        expected="1",
        workflow_id=f"eval-{pid}",
        status="completed",
        source="started",
        usage=UsageTotals(total_tokens=1000, cost_usd=0.01, calls=10),
        usage_by_stage={
            "stage1": UsageTotals(total_tokens=300, cost_usd=0.003, calls=3),
            "stage3": UsageTotals(total_tokens=100, cost_usd=0.001, calls=1),
        },
        round_tokens=[400],
        chairman=reading(chairman),
    )
    for stage, results in ((STAGE1, first), ("round 1", last)):
        score.answers[stage] = {m: reading(r) for m, r in zip(MODELS, results, strict=True)}
        score.majority[stage] = Vote(answer="1", correct=sum(results) >= 2)
    if sampled is not None:
        score.self_consistency = SampledVote(
            model="a",
            samples=4,
            answered=4,
            vote=Vote(answer="1", correct=sampled),
            usage=UsageTotals(total_tokens=960, cost_usd=0.008, calls=4),
        )
    return score


def test_each_arm_answers_and_spends_its_share_of_the_run() -> None:
    found = outcomes(problem("p1", [True, False, False], [True, True, False], True, False), STAGES)
    assert list(found) == [
        member_arm("a"),
        member_arm("b"),
        member_arm("c"),
        VOTE_ARM,
        round_arm(1),
        CHAIRMAN_ARM,
        "self-consistency (a)",
    ]
    assert (found["a alone"].correct, found["a alone"].tokens) == (True, 100)
    assert found["a alone"].cost_usd == pytest.approx(0.001)
    assert (found[VOTE_ARM].correct, found[VOTE_ARM].tokens) == (False, 300)
    # Everything before the chairman: 1,000 - 100; its cost prorated by tokens.
    assert (found[round_arm(1)].correct, found[round_arm(1)].tokens) == (True, 900)
    assert found[round_arm(1)].cost_usd == pytest.approx(0.009)
    assert (found[CHAIRMAN_ARM].tokens, found[CHAIRMAN_ARM].cost_usd) == (1000, 0.01)
    assert (found["self-consistency (a)"].correct, found["self-consistency (a)"].tokens) == (
        False,
        960,
    )


def test_a_later_round_is_left_out_of_an_earlier_rounds_tokens() -> None:
    score = problem("p1", [True, True, True], [True, True, True], True)
    score.round_tokens = [300, 250]
    score.answers["round 2"] = score.answers["round 1"]
    score.majority["round 2"] = score.majority["round 1"]
    found = outcomes(score, [*STAGES, "round 2"])
    assert (found[round_arm(1)].tokens, found[round_arm(2)].tokens) == (650, 900)


def test_arms_with_intervals_per_correct_answer_and_paired_tests() -> None:
    scores = [
        # The chairman right where the stage-1 vote is wrong, three times; the reverse once.
        problem("p1", [True, False, False], [True, True, False], True),
        problem("p2", [False, True, False], [True, True, True], True),
        problem("p3", [False, False, True], [True, True, False], True),
        problem("p4", [True, True, False], [True, True, False], False),
        problem("p5", [True, True, True], [True, True, True], True),
    ]
    scores.append(
        problem("p6", [False] * 3, [False] * 3, False).model_copy(update={"status": "failed"})
    )
    arms, tests = arms_and_tests(scores, STAGES)
    by_name = {arm.name: arm for arm in arms}
    vote = by_name[VOTE_ARM]
    assert (vote.correct, vote.total, vote.accuracy) == (2, 5, 0.4)
    assert vote.ci95 == (0.1176, 0.7693)  # Wilson's interval for 2 of 5
    assert (vote.tokens_per_problem, vote.tokens_per_correct) == (300, 750)
    assert vote.cost_per_correct_usd == pytest.approx(0.0075)
    assert by_name[CHAIRMAN_ARM].kind == "chairman" and by_name["a alone"].kind == "member"
    paired = {t.arm: t for t in tests}
    assert CHAIRMAN_ARM not in paired
    test = paired[VOTE_ARM]
    assert (test.both_right, test.only_council, test.only_arm, test.both_wrong) == (1, 3, 1, 0)
    assert test.mcnemar == 0.625  # 2 * (1 + 4) / 16
    assert paired[round_arm(1)].mcnemar == 1.0


def test_conformity_counts_what_deliberation_changed() -> None:
    scores = [
        # b gave in: right to wrong; c fixed its slip; the chairman overruled a right majority.
        problem("herded", [True, True, False], [True, False, True], False),
        # A right minority (a) at stage 1, lost by the end: a gave in, the chairman wrong.
        problem("lost", [True, False, False], [False, False, False], False),
        problem("quiet", [True, True, True], [True, True, True], True),
    ]
    flow = conformity(scores, "round 1")
    assert flow.members["a"].correct_to_wrong == 1 and flow.members["a"].stayed_right == 2
    assert flow.members["b"].correct_to_wrong == 1 and flow.members["c"].wrong_to_correct == 1
    assert flow.members["c"].stayed_wrong == 1
    assert (flow.correct_to_wrong, flow.wrong_to_correct) == (2, 1)
    assert (flow.chairman_overruled_majority, flow.correct_minority_lost) == (1, 1)
    by_id = {p.id: p for p in flow.problems}
    assert set(by_id) == {"herded", "lost"}  # only problems where something happened
    assert by_id["herded"].correct_to_wrong == ["b"] and by_id["herded"].wrong_to_correct == ["c"]
    assert by_id["herded"].chairman_overruled_majority and by_id["lost"].correct_minority_lost


def test_the_strongest_member_is_the_most_right_at_stage_1_first_in_order_on_a_tie() -> None:
    scores = [
        problem("p1", [False, True, True], [True] * 3, True),
        problem("p2", [True, False, True], [True] * 3, True),
    ]
    assert strongest_member(scores, MODELS) == "c"
    assert strongest_member(scores[:1], MODELS) == "b"  # b and c tie: b comes first
    assert strongest_member([], MODELS) is None


@pytest.mark.parametrize(
    ("target", "one", "expected"),
    [
        (1000, 100, (10, False)),
        (1049, 100, (10, False)),
        (50, 100, (1, False)),
        (100_000, 100, (128, True)),
        (500, 0, (128, True)),
    ],
)
def test_self_consistency_draws_the_councils_tokens_worth(target, one, expected) -> None:
    assert samples_for(target, one, 128) == expected


def test_the_samples_vote_and_failed_samples_do_not() -> None:
    [first] = load_dataset(GSM8K).problems[:1]
    right = f"Final answer: {first.answer}"
    wrong = f"Final answer: {int(first.answer) + 1}"
    result = SamplingResult(
        model="a", samples=4, replies=[wrong, right, None, right], errors=["sample 3: timed out"]
    )
    vote = score_samples(first, result)
    assert vote.answered == 3 and vote.vote.correct and vote.vote.votes == 2
    assert not score_samples(
        first, result.model_copy(update={"replies": [wrong, None]})
    ).vote.correct


def slip_rate(persona: str, group: list, seeds: range = range(1, 9)) -> float:
    skill = SKILLS[persona]
    draws = [stage1_value(persona, skill, p, s) != p.answer for p in group for s in seeds]
    return sum(draws) / len(draws)


def test_seeded_samples_slip_as_often_and_mostly_on_the_personas_hard_problems() -> None:
    problems = load_dataset(GSM8K).problems
    for persona in ("Atlas", "Cirrus"):
        skill = SKILLS[persona]
        hard = [p for p in problems if chance("slip", persona, p.id) < skill.slip]
        easy = [p for p in problems if p not in hard]
        on_hard, on_easy = slip_rate(persona, hard), slip_rate(persona, easy)
        overall = (on_hard * len(hard) + on_easy * len(easy)) / len(problems)
        assert overall == pytest.approx(skill.slip, abs=0.05), persona
        assert on_hard > 0.55 and on_easy < skill.slip
        # Unseeded: the fixed hard problems, as a council member answers them.
        assert all(stage1_value(persona, skill, p) != p.answer for p in hard)
        # A seed is a pure function of the request.
        assert [stage1_value(persona, skill, p, 3) for p in problems] == [
            stage1_value(persona, skill, p, 3) for p in problems
        ]


def test_every_kind_of_arm_has_a_marker_in_the_plot() -> None:
    assert set(ARM_MARKERS) == set(get_args(ArmKind))
