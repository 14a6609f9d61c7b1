"""What the web page computes from a form, a record and progress: no server, no browser."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import pytest

from app.settings.environment import Settings
from app.views.render import record_markdown
from council.calls import Stage
from council.config import Config
from council.iteration import IterationRound
from council.limits import MAX_COST_USD, MAX_TOKEN_BUDGET
from council.models import DeliberationRecord
from council.progress import EventKind, ProgressEvent
from council.reviews import parse_review
from council.stages import Stage2Result
from council.stragglers import LateCall
from runs.listing import Listed
from web.pages import notice_line
from web.views import (
    model_statuses,
    provider_problem,
    recent_threads,
    request_from_form,
    review_matrices,
    review_matrix,
    shown_status,
    stage_calls,
    where_line,
    word_diff,
)

pytestmark = pytest.mark.fast

# The default council's members, as COUNCIL_MODELS gives them; no council.toml.
DEFAULTS = (Config(), Settings.read({"COUNCIL_MODELS": "a/x, b/y"}))
AT = datetime(2026, 1, 1, tzinfo=UTC)


def test_the_form_gives_a_request_with_numbers_and_its_defaults() -> None:
    request, form = request_from_form(
        {"question": " Why? ", "models": "m/1\nm/2, m/3", "max_rounds": "3", "max_cost_usd": "0.5"},
        *DEFAULTS,
    )
    assert request is not None and form.errors == {}
    assert request.models == ["m/1", "m/2", "m/3"] and request.question == "Why?"
    assert (request.max_rounds, request.max_cost_usd, request.min_rounds) == (3, 0.5, 1)
    defaulted, _ = request_from_form({"question": "Q"}, *DEFAULTS)
    assert defaulted is not None and defaulted.models == ["a/x", "b/y"]


def test_a_bad_field_gets_its_one_line_message() -> None:
    request, form = request_from_form({"question": "Q", "quality_threshold": "9"}, *DEFAULTS)
    assert request is None
    assert form.errors == {
        "quality_threshold": "Quality threshold must be between 0.0 and 5.0 (got 9)"
    }
    assert form.values["quality_threshold"] == "9"
    _, form = request_from_form({"question": "Q", "models": "a/x\na/x"}, *DEFAULTS)
    assert list(form.errors) == ["models"] and "listed twice" in form.errors["models"]
    _, form = request_from_form({"question": "Q", "max_rounds": "two"}, *DEFAULTS)
    assert form.errors == {
        "max_rounds": "Max rounds must be a whole number from 1 to 5 (got 'two')"
    }


def test_every_bad_field_gets_its_message_at_once_in_the_words_of_its_label() -> None:
    _, form = request_from_form(
        {
            "question": " ",
            "max_rounds": "2.5",
            "quality_threshold": "high",
            "token_budget": "0",
            "max_cost_usd": "-1",
            "context_tokens": "x",
        },
        *DEFAULTS,
    )
    assert form.errors == {
        "question": "Question must not be empty",
        "max_rounds": "Max rounds must be a whole number from 1 to 5 (got '2.5')",
        "quality_threshold": "Quality threshold must be a number from 0 to 5 (got 'high')",
        "token_budget": f"Token budget must be between 1 and {MAX_TOKEN_BUDGET} (got 0)",
        "max_cost_usd": (
            f"Cost budget (USD) must be more than 0 and at most {MAX_COST_USD} (got -1)"
        ),
        "context_tokens": (
            "Context (tokens of earlier turns) must be a whole number from 0 to 32,000 (got 'x')"
        ),
    }
    assert form.first_error == "question"
    assert form.values["max_rounds"] == "2.5"  # kept as typed
    _, form = request_from_form({"question": "Q", "models": "a/x\nnot a model id"}, *DEFAULTS)
    assert form.errors["models"].startswith("Models, line 2")


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


def test_a_review_given_as_json_reads_as_text_on_the_page_and_in_the_transcript() -> None:
    labels = {"Response A": "m1", "Response B": "m2", "Response C": "m3"}
    given = {
        "Response B": {"rating": 4, "critique": "Clear, but <b>no</b> sources."},
        "Response C": {"rating": 2, "critique": "No numbers."},
        "Response A": {"rating": 5, "critique": "its own: never shown to it"},
        "ranking": ["Response B", "Response C"],
    }
    text = json.dumps(given)
    review = Stage2Result(model="m1", ranking=text, ratings={"Response B": 4, "Response C": 2})
    matrix = review_matrix("Review round 1", [review], labels)
    shown = matrix.texts["m1"]
    assert "{" not in shown and "own: never" not in shown
    assert "**Response B** Rating: 4/5\n\nClear, but <b>no</b> sources." in shown
    # Written out in the text form, it reads back as the same review.
    again = parse_review(shown, ["Response B", "Response C"])
    assert again.ratings == {"Response B": 4, "Response C": 2}
    assert again.ranking == ["Response B", "Response C"]
    assert again.critiques["Response C"] == "No numbers."
    record = DeliberationRecord(
        id="r",
        query="Q?",
        models=list(labels.values()),
        chairman="m1",
        stage2=[review],
        label_to_model=labels,
    )
    assert shown in record_markdown(record) and text not in record_markdown(record)
    # A review written as text is shown as written.
    prose = review.model_copy(update={"ranking": "FINAL RANKING:\n1. Response B"})
    assert review_matrix("R", [prose], labels).texts["m1"] == prose.ranking


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


def test_where_a_run_is_names_the_refinement_round_only_once_one_runs() -> None:
    assert where_line(Stage.ANSWER, 0, 2, 1, None) == "stage 1 answer"
    assert where_line(Stage.REVIEW, 0, 2, 1, None) == "stage 2 review"
    assert where_line(Stage.REFINE, 1, 2, 1, None) == (
        "stage 2.5 refinement · refinement round 1 of 2 (at least 1)"
    )


def test_the_state_shown_says_stopping_and_stopped_not_running_and_completed() -> None:
    assert shown_status("running", None) == "running"
    assert shown_status("running", None, stop_requested=True) == "stopping"
    assert shown_status("completed", "user_stopped") == "stopped"
    assert shown_status("completed", "quality_threshold_met") == "completed"
    assert shown_status("failed", None) == "failed"


@dataclass
class Flying:
    """The shape of runs.finding.CallInFlight the view reads."""

    model: str | None
    text: str = ""
    content_bytes: int = 0
    attempt: int = 1
    max_attempts: int = 6
    failure: str | None = None
    retry_at: datetime | None = None


def test_a_call_whose_attempts_fail_shows_its_retry_and_error_not_writing() -> None:
    events = [
        ProgressEvent(
            seq=0,
            at=AT,
            kind=EventKind.STAGE_START,
            stage=Stage.ANSWER,
            data={"models": ["a/x", "b/y"]},
        )
    ]
    in_flight = [
        # No heartbeat yet: named by its failure ("MODEL: why").
        Flying(None, attempt=3, failure="b/y: cannot connect", retry_at=AT + timedelta(seconds=4)),
        Flying("a/x", text="so far", content_bytes=6),
    ]
    stage, round_number, calls = stage_calls(events, in_flight, AT)
    assert (stage, round_number) == (Stage.ANSWER, 0)
    a, b = calls
    assert (a.state, a.text, a.line) == ("writing", "so far", "writing · 6 bytes so far")
    assert b.state == "retrying"
    assert (
        b.line
        == "retrying: attempt 3 of 6 (next in 4 s) · the last one failed: b/y: cannot connect"
    )


def test_no_provider_is_said_only_while_no_call_completed() -> None:
    failures = [("ProviderUnavailable", "x: HTTP 503"), ("ConnectionFailed", "x: cannot connect")]
    said = provider_problem(0, failures)
    assert said is not None and "x: HTTP 503" in said and "make up" in said
    assert provider_problem(3, failures) is None
    assert provider_problem(0, [("MalformedResponse", "x: not JSON")]) is None


def test_recent_threads_list_each_thread_once_by_its_newest_turn() -> None:
    def row(id: str, thread: str | None, question: str, status: str = "completed") -> Listed:
        return Listed(id, status, 1, None, None, AT, question, thread)

    rows = [
        row("t2", "t1", "And Go?"),
        row("s1", None, "Stopped one?", "completed"),
        row("t1", "t1", "Is Rust hard?"),
    ]
    rows[1].reason = "user_stopped"
    threads = recent_threads(rows)
    assert [(t.id, t.question, t.turns, t.status) for t in threads] == [
        ("t2", "Is Rust hard?", 2, "completed"),
        ("s1", "Stopped one?", 1, "stopped"),
    ]


def test_a_reviewer_cut_as_late_has_a_labelled_row_in_its_reviews_matrix_only() -> None:
    labels = {"Response A": "m/a", "Response B": "m/b", "Response C": "m/c"}

    def review(model: str) -> Stage2Result:
        return Stage2Result(model=model, ranking="FINAL RANKING:\n1. Response A", ratings={})

    record = DeliberationRecord(
        id="r",
        query="Q?",
        models=list(labels.values()),
        chairman="m/a",
        stage2=[review("m/a"), review("m/b")],
        label_to_model=labels,
        rounds=[
            IterationRound(round_number=1, started_at=AT, reviews=[review("m/a"), review("m/c")])
        ],
        late=[
            LateCall.cut(Stage.REVIEW, 0, "m/c", 8.64),
            LateCall.cut(Stage.REVIEW, 1, "m/b", 3.2),
            LateCall.cut(Stage.REFINE, 1, "m/a", 5.0),
        ],
    )
    first, second = review_matrices(record)
    assert [reviewer for reviewer, _ in first.rows] == ["m/a", "m/b"]
    assert first.late == [("m/c", "cut as late after 8.6 s")]
    assert [reviewer for reviewer, _ in second.rows] == ["m/a", "m/c"]
    assert second.late == [("m/b", "cut as late after 3.2 s")]


def test_a_critiques_notice_names_only_one_of_the_runs_own_members() -> None:
    record = DeliberationRecord(id="r", query="Q?", models=["m/a", "m/b"], chairman="m/a")
    named = "your critique of m/b waits for the next refinement round"
    assert notice_line("critique", record, "m/b") == named
    unnamed = "your critique waits for the next refinement round"
    assert notice_line("critique", record, "<b>someone else</b>") == unnamed
    assert notice_line("critique", record, None) == unnamed
    assert (
        notice_line("stop", None, None) is not None and notice_line("bogus", record, None) is None
    )
