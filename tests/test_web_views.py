"""What the web page computes from a form, a record and progress: no server, no browser."""

from __future__ import annotations

from datetime import UTC, datetime

from council.calls import Stage
from council.progress import EventKind, ProgressEvent
from council.stages import Stage2Result
from web.views import model_statuses, request_from_form, review_matrix, word_diff

DEFAULTS = {"models": ["a/x", "b/y"]}
AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_form_gives_a_request_with_numbers_and_its_defaults() -> None:
    request, form = request_from_form(
        {"question": " Why? ", "models": "m/1\nm/2, m/3", "max_rounds": "3", "max_cost_usd": "0.5"},
        DEFAULTS,
    )
    assert request is not None and form.errors == {}
    assert request.models == ["m/1", "m/2", "m/3"] and request.question == "Why?"
    assert (request.max_rounds, request.max_cost_usd, request.min_rounds) == (3, 0.5, 1)
    defaulted, _ = request_from_form({"question": "Q"}, DEFAULTS)
    assert defaulted is not None and defaulted.models == ["a/x", "b/y"]


def test_a_bad_field_gets_its_one_line_message() -> None:
    request, form = request_from_form({"question": "Q", "quality_threshold": "9"}, DEFAULTS)
    assert request is None
    assert form.errors == {
        "quality_threshold": "quality_threshold must be between 0.0 and 5.0 (got 9)"
    }
    assert form.values["quality_threshold"] == "9"
    _, form = request_from_form({"question": "Q", "models": "a/x\na/x"}, DEFAULTS)
    assert list(form.errors) == ["models"] and "listed twice" in form.errors["models"]
    _, form = request_from_form({"question": "Q", "max_rounds": "two"}, DEFAULTS)
    assert list(form.errors) == ["max_rounds"] and "valid integer" in form.errors["max_rounds"]


def test_word_diff_marks_words_added_and_removed_and_keeps_the_rest() -> None:
    pieces = word_diff("It depends on the context.", "It depends on the team and the context.")
    assert "".join(text for op, text in pieces if op != "del") == (
        "It depends on the team and the context."
    )
    assert "".join(text for op, text in pieces if op != "ins") == "It depends on the context."
    assert [text for op, text in pieces if op == "ins"] == ["team and the "]
    assert word_diff("same", "same") == [("same", "same")]


def test_the_matrix_holds_each_rating_with_its_critique_and_no_self_review() -> None:
    labels = {"Response A": "m1", "Response B": "m2", "Response C": "m3"}
    review = Stage2Result(
        model="m1",
        ranking="**Response B** Rating: 4/5. Clear.\n**Response C** Rating: 2/5. No numbers.\n\n"
        "FINAL RANKING:\n1. Response B (4/5)\n2. Response C (2/5)",
        ratings={"Response B": 4, "Response C": 2},
        presented_order=["Response C", "Response B"],
    )
    matrix = review_matrix("Review round 1", [review], labels)
    [(reviewer, cells)] = matrix.rows
    assert reviewer == "m1" and "Response A" not in cells
    assert (cells["Response B"].rating, cells["Response B"].critique) == (4, "Clear.")
    assert (cells["Response C"].rating, cells["Response C"].critique) == (2, "No numbers.")
    assert matrix.orders == {"m1": ["Response C", "Response B"]}


def test_each_models_state_follows_the_events_of_the_stage_under_way() -> None:
    def event(seq: int, kind: EventKind, **fields) -> ProgressEvent:
        return ProgressEvent(seq=seq, at=AT, kind=kind, **fields)

    events = [
        event(0, EventKind.STAGE_START, stage=Stage.ANSWER, data={"models": ["a", "b", "c"]}),
        event(1, EventKind.MODEL_COMPLETE, model="a"),
        event(2, EventKind.MODEL_FAILED, model="c"),
    ]
    assert model_statuses(events, []) == {"a": "done", "b": "writing", "c": "failed"}
    events.append(event(3, EventKind.STAGE_START, stage=Stage.REVIEW, data={"models": ["a", "b"]}))
    assert model_statuses(events, []) == {"a": "writing", "b": "writing", "c": "idle"}
