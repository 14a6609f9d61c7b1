"""The pure rules of depth auto and the disagreement report: the agreement gate by values
and by the check's reply, the report's computed facts (the values the first answers state,
the dissents) with what the chairman's structured synthesis adds on top (bounded, naming
only the council's members), what depth auto saved, and the answer of a structured
synthesis read as it streams."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from app.views.render import event_line
from council.agreement import Agreement, AnswerAgreement, Dissent
from council.calls import Stage
from council.depth import (
    MAX_DIFFERENCE_CHARS,
    MAX_DIFFERENCES,
    NOT_NEEDED,
    by_values,
    read_check,
    saved,
)
from council.models import DeliberationRequest
from council.progress import EventKind, ProgressEvent
from council.report import (
    MAX_POINT_CHARS,
    MAX_POINTS,
    VALUE_POINT,
    DisagreementReport,
    answers_line,
    facts,
    merged,
    split_lines,
)
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
    assert by_values({"m/a": "42", "m/b": None, "m/c": None}) is None
    assert by_values({"m/a": "42"}) is None  # one answer: nothing to compare


def test_values_that_differ_are_judged_by_value_even_beside_an_answer_without_one() -> None:
    """Before: one answer without a value left the gate to the check call, whose model reads
    the answers (and can be swayed by what they say), even where others' values differed."""
    gate = by_values({"m/a": "42", "m/b": None, "m/c": "41"})
    assert gate is not None and gate.method == "values" and not gate.agreed
    assert gate.differences == ["42 (m/a)", "41 (m/c)", "no comparable value (m/b)"]
    assert gate.unstated == ["m/b"]
    # The share counts every answer, the one without a value against every value.
    five = {"m/a": "5", "m/b": "5", "m/c": "5", "m/d": "6", "m/e": None}
    assert not by_values(five, 0.75).agreed  # type: ignore[union-attr]
    passed = by_values(five, 0.6)
    assert passed is not None and passed.agreed
    assert passed.describe() == "agreement after stage 1: 3 of 5 answers state 5"


def test_different_values_disagree_and_say_who_states_which() -> None:
    gate = by_values({"m/a": "42", "m/b": "41", "m/c": "42"})
    assert gate is not None and not gate.agreed
    assert gate.differences == ["42 (m/a, m/c)", "41 (m/b)"]


@given(
    st.lists(st.sampled_from(["1", "2", "3", None]), min_size=2, max_size=12),
    st.floats(min_value=0.5, max_value=1.0),
)
def test_the_share_decides_exactly_as_counted(values: list[str | None], share: float) -> None:
    """Over every answer, one without a value counting against every value; left to the
    check only where no two stated values differ and some answer states none."""
    stated = {f"m/{i}": v for i, v in enumerate(values)}
    gate = by_values(stated, share)
    distinct = {v for v in values if v is not None}
    if None in values and len(distinct) < 2:
        assert gate is None
        return
    assert gate is not None and gate.method == "values"
    most = max(values.count(v) for v in distinct)
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
    text, written = read_synthesis(
        synthesis(
            resolutions=[{"split": 1, "resolution": "the working checks out"}, {"split": "x"}],
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
    assert text == "The answer." and written is not None
    report = written.report
    assert written.resolutions == {1: "the working checks out"}
    assert [(p.text, p.source) for p in report.consensus] == [
        ("all hold this", "chairman"),
        ("spaced out", "chairman"),
    ]
    [contradiction] = report.contradictions
    assert [(p.view, p.held_by) for p in contradiction.positions] == [
        ("42", ["m/a", "m/c"]),
        ("41", ["m/b"]),
    ]
    assert [(u.point, u.raised_by) for u in report.unique] == [("a caveat", "m/b")]
    assert len(report.unaddressed) == MAX_POINTS
    assert all(len(item.text) <= MAX_POINT_CHARS + 1 for item in report.unaddressed)
    assert report.members == 3 and report.source == "chairman"


def test_prose_is_all_answer_and_no_report() -> None:
    assert read_synthesis("Just prose.", MEMBERS) == ("Just prose.", None)


FOUR = ["m/a", "m/b", "m/c", "m/d"]


def test_a_split_of_stated_values_names_each_value_and_who_states_it() -> None:
    computed = facts(FOUR, {"m/a": "5", "m/b": "5", "m/c": "6", "m/d": "5"})
    [split] = computed.contradictions
    assert (split.point, split.source) == (VALUE_POINT, "computed")
    assert [(p.view, p.held_by) for p in split.positions] == [
        ("5", ["m/a", "m/b", "m/d"]),
        ("6", ["m/c"]),
    ]
    assert computed.consensus == []
    assert (
        answers_line(computed)
        == "members' first answers: 3 of 4 state 5 (m/a, m/b, m/d); m/c states 6"
    )
    assert split_lines(computed) == [f"1. {VALUE_POINT}: 5 (m/a, m/b, m/d); 6 (m/c)"]
    # What became of it: refinement brought m/c round, and the final answer states 5.
    after = facts(FOUR, computed.stated, {m: "5" for m in FOUR})
    report = merged(after, None, "5")
    assert report.contradictions[0].outcome == (
        "after refinement: 5 (m/a, m/b, m/c, m/d); the final answer states 5"
    )
    assert report.source == "computed" and report.final_value == "5"


def test_values_that_agree_are_consensus_that_says_the_value() -> None:
    computed = facts(FOUR, dict.fromkeys(FOUR, "42"))
    assert [(p.text, p.source) for p in computed.consensus] == [
        ("every member's first answer states 42", "computed")
    ]
    assert computed.contradictions == [] and split_lines(computed) == []
    assert answers_line(computed) == "members' first answers: all 4 state 42"
    partly = facts(FOUR, {"m/a": "42", "m/b": "42", "m/c": None, "m/d": "42"})
    assert partly.consensus[0].text == (
        "every first answer that states a value states 42 (m/a, m/b, m/d); m/c states none"
    )
    assert answers_line(partly) == (
        "members' first answers: 3 of 4 state 42 (m/a, m/b, m/d); m/c states no value"
    )
    assert facts(FOUR, {"m/a": "42", "m/b": None}).consensus == []  # one value: nothing said


def test_each_answer_a_rating_stands_apart_on_names_both_sides_and_who_gave_them() -> None:
    rated = Agreement(
        level="low",
        alpha=0.1,
        reviewers=FOUR,
        answers=[AnswerAgreement(author="m/a", ratings={"m/b": 5, "m/c": 1, "m/d": 4})],
        dissent=[
            Dissent(reviewer="m/c", author="m/a", rating=1, others_median=4.5, critique="wrong")
        ],
    )
    [split] = facts(FOUR, {}, agreement=rated).contradictions
    assert split.point == "how good m/a's answer is" and split.source == "computed"
    assert [(p.view, p.held_by, p.why) for p in split.positions] == [
        ("rated it 1/5", ["m/c"], "wrong"),
        ("rated it 4-5/5", ["m/b", "m/d"], ""),
    ]


def test_the_chairman_adds_resolutions_and_its_own_points_on_top() -> None:
    computed = facts(FOUR, {"m/a": "5", "m/b": "5", "m/c": "6", "m/d": "5"})
    _, written = read_synthesis(
        synthesis(
            resolutions=[{"split": 1, "resolution": "5 fits both conditions"}],
            consensus=["the bat costs a dollar more"],
            contradictions=[
                # The computed split in its own words: not listed twice.
                {
                    "point": "the ball's price",
                    "positions": [
                        {"view": "six cents", "held_by": ["m/c"]},
                        {"view": "five cents", "held_by": ["m/a", "m/b", "m/d"]},
                    ],
                    "resolution": "",
                },
                {
                    "point": "whether to show the algebra",
                    "positions": [{"view": "yes", "held_by": ["m/a"]}],
                    "resolution": "it helps",
                },
            ],
            unique=[],
            unaddressed=[],
        ),
        FOUR,
    )
    report = merged(computed, written, "5")
    assert [(c.point, c.source, c.resolution) for c in report.contradictions] == [
        (VALUE_POINT, "computed", "5 fits both conditions"),
        ("whether to show the algebra", "chairman", "it helps"),
    ]
    assert [(p.text, p.source) for p in report.consensus] == [
        ("the bat costs a dollar more", "chairman")
    ]
    assert report.source == "chairman" and report.stated == computed.stated


def test_without_a_structured_reply_the_computed_report_is_whole() -> None:
    rated = Agreement(
        level="medium",
        alpha=0.5,
        reviewers=FOUR,
        answers=[AnswerAgreement(author="m/b", ratings={"m/a": 1, "m/c": 4, "m/d": 4})],
        dissent=[Dissent(reviewer="m/a", author="m/b", rating=1, others_median=4)],
    )
    report = merged(
        facts(FOUR, {"m/a": "7", "m/b": "8", "m/c": "7", "m/d": "7"}, None, rated), None, None
    )
    assert [c.point for c in report.contradictions] == [VALUE_POINT, "how good m/b's answer is"]
    assert all(c.source == "computed" and c.positions for c in report.contradictions)
    assert report.independent_members == pytest.approx(4 / (1 + 3 * 0.5), abs=0.05)
    assert report.source == "computed"


def test_a_record_of_the_build_before_reads_its_points_as_the_chairmans() -> None:
    old = DisagreementReport.model_validate(
        {"consensus": ["all hold this"], "unaddressed": ["the tax"], "source": "reviews"}
    )
    assert [(p.text, p.source) for p in old.consensus] == [("all hold this", "chairman")]
    assert old.unaddressed[0].source == "chairman" and old.source == "reviews"


def test_what_depth_auto_saved_is_estimated_from_the_runs_own_first_answers() -> None:
    # 4 members: stage 1 spent 400 prompt and 800 completion tokens (100 and 200 each); the
    # check 1 call of 50 tokens; the synthesis the rest (6 calls, 2,000 tokens in all).
    spent = saved(4, 6, 2000, (400, 800), (1, 50), rounds=1)
    # A review: 100 + 3 x 200 + 200 = 900; a refinement: 100 + 4 x 200 + 200 = 1,100.
    assert spent.full_calls == 6 - 1 + 4 + 1 * 2 * 4
    assert spent.full_tokens == 2000 - 50 + 4 * 900 + 4 * (1100 + 900)
    assert (spent.saved_calls, spent.saved_tokens) == (11, 11550)
    line = spent.describe()
    assert line.startswith("spent 6 calls and 2,000 tokens, where the full protocol would")
    assert "an estimate from this run's stage-1 calls" in line and "11,550 tokens saved" in line
    # No refinement round at least: the review alone.
    assert saved(4, 6, 2000, (400, 800), (0, 0), rounds=0).full_calls == 10


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
