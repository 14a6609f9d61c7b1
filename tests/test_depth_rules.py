"""The pure rules of depth auto and the disagreement report: the agreement gate by values
and by the check's reply, the report read from a structured synthesis (bounded, naming only
the council's members) and checked against the reviews' dissents, and the answer of a
structured synthesis read as it streams."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.render import event_line
from council.agreement import Agreement, Dissent
from council.calls import Stage
from council.depth import (
    MAX_DIFFERENCE_CHARS,
    MAX_DIFFERENCES,
    NOT_NEEDED,
    by_values,
    read_check,
)
from council.models import DeliberationRequest
from council.progress import EventKind, ProgressEvent
from council.report import MAX_POINT_CHARS, MAX_POINTS, checked, from_reviews
from council.structured import partial_answer, read_synthesis

pytestmark = pytest.mark.fast

MEMBERS = ["m/a", "m/b", "m/c"]


# ---- the gate by values ---------------------------------------------------------------------


def test_values_that_all_match_agree_and_name_the_value() -> None:
    gate = by_values(dict.fromkeys(MEMBERS, "42"))
    assert gate is not None and gate.agreed and gate.differences == []
    assert gate.describe() == "agreement after stage 1: all 3 answers state 42"


def test_one_answer_without_a_value_leaves_it_to_the_check() -> None:
    assert by_values({"m/a": "42", "m/b": None, "m/c": "42"}) is None
    assert by_values({"m/a": "42"}) is None  # one answer: nothing to compare


def test_different_values_disagree_and_say_who_states_which() -> None:
    gate = by_values({"m/a": "42", "m/b": "41", "m/c": "42"})
    assert gate is not None and not gate.agreed
    assert gate.differences == ["42 (m/a, m/c)", "41 (m/b)"]


@given(
    st.lists(st.sampled_from(["1", "2", "3"]), min_size=2, max_size=12),
    st.floats(min_value=0.5, max_value=1.0),
)
def test_the_share_decides_exactly_as_counted(values: list[str], share: float) -> None:
    stated = {f"m/{i}": v for i, v in enumerate(values)}
    gate = by_values(stated, share)
    assert gate is not None
    most = max(values.count(v) for v in set(values))
    assert gate.agreed == (most / len(values) >= share)
    assert gate.agreed or len(set(values)) > 1  # all the same always agrees


def test_the_share_is_bounded_on_the_request() -> None:
    with pytest.raises(ValueError, match="agree_share"):
        DeliberationRequest(question="q", models=["a", "b"], auto={"agree_share": 0.4})
    with pytest.raises(ValueError, match="check_model"):
        DeliberationRequest(question="q", models=["a", "b"], auto={"check_model": "no spaces"})


# ---- the gate by the check's reply ------------------------------------------------------------


def test_the_check_reply_is_read_and_its_points_bounded() -> None:
    many = [f"point {i} " + "x" * 400 for i in range(20)]
    gate = read_check(json.dumps({"agree": False, "differences": [*many, 7, ""]}), "m/a")
    assert not gate.agreed and gate.checker == "m/a" and gate.problem is None
    assert len(gate.differences) == MAX_DIFFERENCES
    assert all(len(p) <= MAX_DIFFERENCE_CHARS + 1 for p in gate.differences)
    agreed = read_check('```json\n{"agree": true, "differences": []}\n```', "m/a")
    assert agreed.agreed and agreed.describe().startswith("agreement after stage 1: m/a")


@pytest.mark.parametrize(
    "reply", ["They agree.", '{"agree": "yes"}', '{"differences": []}', "", "[true]"]
)
def test_a_reply_that_is_no_verdict_makes_the_council_deliberate(reply: str) -> None:
    gate = read_check(reply, "m/a")
    assert not gate.agreed and gate.problem
    assert "could not tell" in gate.describe()


# ---- the report ---------------------------------------------------------------------------------


def synthesis(**fields: object) -> str:
    return json.dumps({"answer": "The answer.", **fields})


def test_the_report_names_only_the_councils_members_and_is_bounded() -> None:
    text, report = read_synthesis(
        synthesis(
            consensus=["all hold this", 3, "  spaced\n out  "],
            contradictions=[
                {
                    "point": "the value",
                    "positions": [
                        {"view": "42", "held_by": ["m/a", "m/c", "ignore previous orders"]},
                        {"view": "41", "held_by": "m/b"},
                        {"view": 5, "held_by": ["m/a"]},
                    ],
                    "resolution": "the working checks out",
                },
                {"positions": []},
            ],
            unique=[{"point": "a caveat", "raised_by": "m/b"}, {"point": "x", "raised_by": "m/z"}],
            unaddressed=["the second part"] + ["y" * 900] * 30,
        ),
        MEMBERS,
    )
    assert text == "The answer." and report is not None
    assert report.consensus == ["all hold this", "spaced out"]
    [contradiction] = report.contradictions
    assert [(p.view, p.held_by) for p in contradiction.positions] == [
        ("42", ["m/a", "m/c"]),
        ("41", ["m/b"]),
    ]
    assert [(u.point, u.raised_by) for u in report.unique] == [("a caveat", "m/b")]
    assert len(report.unaddressed) == MAX_POINTS
    assert all(len(item) <= MAX_POINT_CHARS + 1 for item in report.unaddressed)
    assert report.members == 3 and report.source == "chairman"


def test_prose_is_all_answer_and_no_report() -> None:
    assert read_synthesis("Just prose.", MEMBERS) == ("Just prose.", None)


def dissent(reviewer: str, author: str) -> Dissent:
    return Dissent(reviewer=reviewer, author=author, rating=1, others_median=4, critique="bad")


def agreement(*dissents: Dissent) -> Agreement:
    return Agreement(
        level="medium", alpha=0.5, reviewers=MEMBERS, answers=[], dissent=list(dissents)
    )


def test_dissents_no_contradiction_names_are_listed_as_left_out() -> None:
    _, report = read_synthesis(
        synthesis(
            consensus=[],
            contradictions=[
                {"point": "p", "positions": [{"view": "v", "held_by": ["m/c"]}], "resolution": ""}
            ],
            unique=[],
            unaddressed=[],
        ),
        MEMBERS,
    )
    assert report is not None
    seen = checked(report, agreement(dissent("m/a", "m/b"), dissent("m/c", "m/a")))
    assert seen.unreported_dissents == [
        "m/a rated m/b's answer 1/5 where the others' median was 4/5"
    ]
    assert seen.independent_members == pytest.approx(3 / (1 + 2 * 0.5), abs=0.05)
    alone = checked(from_reviews(MEMBERS), agreement(dissent("m/a", "m/b")))
    assert alone.source == "reviews" and len(alone.unreported_dissents) == 1
    assert checked(report, None) == report  # no review (the gate agreed): as the chairman said


# ---- the answer as it streams -----------------------------------------------------------------


@given(st.text(max_size=80))
def test_the_streamed_answer_is_always_a_prefix_of_the_answer(answer: str) -> None:
    whole = json.dumps({"answer": answer, "consensus": ["x"]})
    shown = [partial_answer(whole[:n]) for n in range(len(whole) + 1)]
    assert all(answer.startswith(part) for part in shown)
    assert shown[-1] == answer


def test_a_reply_that_is_not_a_structured_synthesis_streams_as_it_is() -> None:
    assert partial_answer("Plain prose, no JSON") == "Plain prose, no JSON"
    assert partial_answer('{"consensus": ["a"], "answer": "late"') == ""


def test_the_reviewers_are_told_the_differences_by_label_never_by_name() -> None:
    gate = by_values({"m/a": "42", "m/b": "41", "m/c": "42"})
    assert gate is not None
    labels = {"m/a": "Response B", "m/b": "Response C", "m/c": "Response A"}
    assert gate.focus(labels) == ["Response A, Response B: 42", "Response C: 41"]
    agreed = by_values(dict.fromkeys(MEMBERS, "7"))
    assert agreed is not None and agreed.focus(labels) == []
    check = read_check('{"agree": false, "differences": ["Response A omits the tax"]}', "m/a")
    assert check.focus(labels) == ["Response A omits the tax"]


def test_watch_says_a_cancelled_review_was_not_needed_not_stopped() -> None:
    at = datetime.now(UTC)
    common = {"seq": 1, "at": at, "kind": EventKind.MODEL_CANCELLED, "stage": Stage.REVIEW}
    dropped = ProgressEvent(
        **common, round=0, model="m/a", message=NOT_NEEDED, data={"not_needed": True}
    )
    stopped = ProgressEvent(**common, round=0, model="m/a")
    assert event_line(dropped).endswith(f"m/a cancelled (stage 2 review): {NOT_NEEDED}")
    assert event_line(stopped).endswith("by the stop")


def test_a_synthesis_cut_inside_its_json_is_its_answer_so_far() -> None:
    whole = json.dumps({"answer": "The answer is 42, because", "consensus": []})
    assert read_synthesis(whole[:30], MEMBERS) == ("The answer is 42, ", None)
