"""The bounds on what a client adds, as pure functions: the id rule, the steering limits,
the feedback budget of a refinement prompt, and the record fitted under the payload
limit."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from council import limits
from council.calls import Stage
from council.ids import MAX_ID_CHARS, id_problem
from council.iteration import CritiqueItem, IterationState
from council.models import CallError, DeliberationRecord
from council.record import ELIDED, fit_record
from council.refinement import fit_feedback
from council.stages import Stage1Result, Stage3Result
from council.steering import (
    HumanCritique,
    SteeringAction,
    bounded_reason,
    critique_problem,
    expired_problem,
    max_rounds_problem,
    reason_problem,
)

pytestmark = pytest.mark.fast

NOW = datetime(2026, 1, 2, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    "good", ["council-why-is-the-sky-blue-3f2a1c", "a", "A.b:c_d-1", "9" * MAX_ID_CHARS]
)
def test_ids_that_follow_the_rule(good: str) -> None:
    assert id_problem(good) is None


@pytest.mark.parametrize(
    "bad", ["", ".", "..", "-x", "a b", "a/b", "a?b", "a#b", "a%2F", "ü", "a\nb", "9" * 201]
)
def test_ids_that_break_the_rule(bad: str) -> None:
    problem = id_problem(bad)
    assert problem is not None and "is not a valid id" in problem and "\n" not in problem


def critique(text: str, model: str = "m1") -> HumanCritique:
    return HumanCritique(model=model, text=text)


def given(*texts: str, delivered: int | None = None) -> list[SteeringAction]:
    return [
        SteeringAction(at=NOW, kind="critique", during_round=0, model="m1", text=t,
                       delivered_in_round=delivered)
        for t in texts
    ]  # fmt: skip


def test_critiques_are_bounded_per_round_per_run_and_in_total() -> None:
    state = IterationState(enabled=True)
    labels = {"m1": "Response A"}
    waiting = given(*["x"] * limits.MAX_HUMAN_CRITIQUES_PER_ROUND)
    assert "can wait for one round (8 wait now)" in critique_problem(
        state, labels, critique("one more"), waiting
    )
    handed_over = given(*["x"] * limits.MAX_HUMAN_CRITIQUES_PER_ROUND, delivered=1)
    assert critique_problem(state, labels, critique("one more"), handed_over) is None
    many = given(*["x"] * limits.MAX_HUMAN_CRITIQUES_PER_RUN, delivered=1)
    assert "at most 20 critiques" in critique_problem(state, labels, critique("more"), many)
    long = given(*["y" * 2_000] * 5, delivered=1)
    assert critique_problem(state, labels, critique("z" * 2_000), long) is None
    longer = given(*["y" * 2_000] * 5, "w", delivered=1)
    assert critique_problem(state, labels, critique("z" * 2_000), longer) == (
        "the critiques of one deliberation are at most 12,000 characters in all "
        "(10,001 used, 2,000 more asked)"
    )


def test_round_changes_and_the_stop_reason_are_bounded() -> None:
    state = IterationState(enabled=True, max_rounds=2)
    changes = [
        SteeringAction(at=NOW, kind="max_rounds", during_round=0, max_rounds=2)
    ] * limits.MAX_ROUND_CHANGES
    assert max_rounds_problem(state, 3, changes[:-1]) is None
    assert "at most 20 times" in max_rounds_problem(state, 3, changes)
    assert reason_problem("r" * 500) is None
    assert reason_problem("r" * 501) == "the reason is too long: at most 500 characters (got 501)"
    assert bounded_reason("  " + "r" * 900) == "r" * 500
    assert bounded_reason("   ") is None


def test_a_late_update_is_refused() -> None:
    assert expired_problem(None, NOW) is None
    assert expired_problem(NOW + timedelta(seconds=1), NOW) is None
    assert "not applied" in expired_problem(NOW - timedelta(seconds=1), NOW)


def item(text: str, rating: float | None = None, from_user: bool = False) -> CritiqueItem:
    return CritiqueItem(
        source_model="the user" if from_user else f"peer-{text[:3]}",
        target_response="Response A",
        critique_text=text,
        rating=rating,
        from_user=from_user,
    )


def test_the_feedback_budget_keeps_the_user_first_then_the_harshest_in_order() -> None:
    mild, harsh, user = item("m" * 500, 4), item("h" * 500, 1), item("u" * 600, from_user=True)
    unrated = item("n" * 500)
    critiques = [mild, harsh, unrated, user]
    assert fit_feedback(critiques, 10_000) == critiques
    # 1,200 characters: the user's (600), then the harshest peer's (500); kept in order.
    assert fit_feedback(critiques, 1_200) == [harsh, user]
    assert fit_feedback(critiques, 1_600) == [harsh, unrated, user]
    assert fit_feedback(critiques, 100) == []


def record_with(answer_bytes: int) -> DeliberationRecord:
    return DeliberationRecord(
        id="r1",
        query="Which?",
        models=["a", "b"],
        chairman="a",
        stage1=[
            Stage1Result(model="a", response="é" * (answer_bytes // 2)),
            Stage1Result(model="b", response="short"),
        ],
        stage3=Stage3Result(model="a", response="The final answer."),
    )


def test_a_record_within_the_limit_is_untouched() -> None:
    record = record_with(1_000)
    assert fit_record(record, 100_000) is record
    assert "elided" not in record.model_dump(mode="json")


def test_an_oversized_record_elides_its_largest_texts_and_fits() -> None:
    record = record_with(20_000_000)
    fitted = fit_record(record)
    size = len(fitted.model_dump_json().encode())
    assert size <= limits.RECORD_LIMIT_BYTES
    assert fitted.elided == ["stage1[0].response"]
    assert fitted.stage1[0].response == ELIDED.format(size=20_000_000)
    assert fitted.stage1[1].response == "short"
    assert fitted.stage3 is not None and fitted.stage3.response == "The final answer."
    # It travels as a record: the JSON reads back.
    again = DeliberationRecord.model_validate_json(fitted.model_dump_json())
    assert again.elided == fitted.elided


def test_many_small_texts_that_cannot_be_elided_go_as_whole_lists() -> None:
    record = record_with(100)
    record.errors = [
        CallError(stage=Stage.ANSWER, round=0, model="a", message="e" * 400) for _ in range(40_000)
    ]
    fitted = fit_record(record)
    assert len(fitted.model_dump_json().encode()) <= limits.RECORD_LIMIT_BYTES
    assert fitted.errors == [] and "errors" in fitted.elided
