"""A conversation is fitted to its bound however long it is and however a client splits
it: the newest turns whole while they fit, at most MAX_THREAD_TURNS of them; a newest turn
too long on its own is cut (question and answer, each with a marker); dropped turns are
named (the newest MAX_THREAD_TURNS) or counted; a request carries only what fits."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from council.limits import MAX_THREAD_TURNS
from council.thread import CUT_MARK, Turn, fit_context, summarize_context
from council.validation import validate_request

pytestmark = pytest.mark.fast

MODELS = ["sim/a", "sim/b"]


def turns(count: int, size: int = 40) -> list[Turn]:
    return [Turn(id=f"t{i}", question="q" * size, answer="a" * size) for i in range(count)]


@given(
    st.lists(st.tuples(st.integers(0, 5_000), st.integers(0, 5_000)), max_size=8),
    st.integers(0, 3_000),
)
def test_the_context_never_passes_its_bound(sizes: list[tuple[int, int]], bound: int) -> None:
    history = [Turn(id=f"t{i}", question="q" * q, answer="a" * a) for i, (q, a) in enumerate(sizes)]
    fitted = fit_context(history, bound)
    assert fitted.tokens <= bound
    # Nothing is lost without a word: each turn is carried or named as dropped.
    assert [t.id for t in fitted.turns][-1:] == [t.id for t in history][-1:] or not fitted.turns
    assert sorted([*fitted.dropped, *(t.id for t in fitted.turns)]) == sorted(
        t.id for t in history
    ) or (bound == 0 and not fitted.turns)


def test_a_newest_turn_too_long_alone_has_its_question_and_answer_cut_with_a_marker() -> None:
    # A client that sends many long user messages: they join into one turn.
    newest = Turn(id="messages[0]", question="why? " * 20_000, answer="because " * 10_000)
    fitted = fit_context([newest], 1_000)
    [kept] = fitted.turns
    assert fitted.cut and kept.cut and fitted.tokens <= 1_000
    assert kept.question.endswith(CUT_MARK) and kept.answer.endswith(CUT_MARK)
    assert newest.question.startswith(kept.question.removesuffix(CUT_MARK))
    # Fitting again keeps what was cut, and still says it was cut.
    again = fit_context(fitted.turns, 1_000)
    assert again.turns == fitted.turns and again.cut


def test_a_short_question_is_kept_whole_when_only_the_answer_is_too_long() -> None:
    newest = Turn(id="t0", question="Is it safe?", answer="yes " * 5_000)
    [kept] = fit_context([newest], 500).turns
    assert kept.question == "Is it safe?" and kept.answer.endswith(CUT_MARK)


def test_at_most_max_thread_turns_are_carried() -> None:
    history = turns(MAX_THREAD_TURNS + 30, size=1)
    fitted = fit_context(history, 32_000)
    assert len(fitted.turns) == MAX_THREAD_TURNS
    assert fitted.turns[-1].id == history[-1].id
    assert fitted.dropped == [t.id for t in history[:30]]


def test_a_request_carries_only_what_fits_and_counts_what_it_cannot_name() -> None:
    # A thread of 500 turns: the request keeps the newest that fit, names the newest
    # MAX_THREAD_TURNS dropped ones and counts the rest.
    request = validate_request(
        {
            "question": "And now?",
            "models": MODELS,
            "history": [t.model_dump() for t in turns(500)],
            "context_tokens": 200,
        }
    )
    carried = [t.id for t in request.history]
    assert carried and carried[-1] == "t499" and sum(t.tokens for t in request.history) <= 200
    assert len(request.dropped_turns) == MAX_THREAD_TURNS
    assert request.dropped_turns[-1] == f"t{499 - len(carried)}"
    assert request.unnamed_dropped == 500 - len(carried) - MAX_THREAD_TURNS
    summary = summarize_context(request.context(), request.context_tokens)
    assert summary.dropped_count == 500 - len(carried) and summary.tokens <= 200
    # Read back (as the workflow reads its input), the request is the same.
    assert validate_request(request.model_dump()) == request
