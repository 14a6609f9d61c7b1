"""How progress reads in a terminal: every event kind has its own line."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from app.views.render import event_line
from council.calls import Stage
from council.progress import EventKind, ProgressEvent

pytestmark = pytest.mark.fast

AT = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.mark.parametrize("kind", list(EventKind))
def test_every_event_kind_has_its_own_line(kind: EventKind) -> None:
    event = ProgressEvent(seq=0, at=AT, kind=kind, stage=Stage.REVIEW, round=1, model="m/x")
    line = event_line(event)
    assert line and not line.startswith(kind.value), line


def test_where_a_review_follows_its_round() -> None:
    event = ProgressEvent(
        seq=0,
        at=AT,
        kind=EventKind.STAGE_START,
        stage=Stage.REVIEW,
        round=2,
        data={"models": ["a", "b"]},
    )
    assert event_line(event) == "▶ stage 2 review after round 2: 2 call(s)"
    refined = ProgressEvent(
        seq=1,
        at=AT,
        kind=EventKind.MODEL_REFINED,
        model="m/x",
        message="Added content (+2 lines)",
        data={"changed": True, "accepted": 2, "rejected": 1, "confidence": 0.8},
    )
    assert event_line(refined) == (
        "  ↳ m/x changed its answer: Added content (+2 lines) · accepted 2, rejected 1 "
        "critique(s) · confidence 0.80"
    )
    review_round = ProgressEvent(
        seq=2,
        at=AT,
        kind=EventKind.ROUND_COMPLETE,
        round=0,
        message="review round 1 complete",
        data={"scores": {"a": 3.5}, "lowest": {"a": 1.0}, "threshold": 1.5},
    )
    assert event_line(review_round) == (
        "✓ review round 1 complete · mean ratings a 3.5 · lowest rating 1 (below the threshold)"
    )


def test_watch_prints_the_verdict_after_a_review_and_a_cut_as_a_cut() -> None:
    verdict = (
        "agreement low (alpha -0.22) · 1 dissent: c rated a's answer 1/5 against a median of 4"
    )
    review = ProgressEvent(
        seq=0,
        at=AT,
        kind=EventKind.ROUND_COMPLETE,
        round=1,
        message="1 changed, 2 unchanged",
        data={"agreement": verdict},
    )
    assert event_line(review).splitlines()[-1] == f"  ≈ {verdict}"
    assert "≈" not in event_line(review.model_copy(update={"data": {}}))
    cut = ProgressEvent(
        seq=1,
        at=AT,
        kind=EventKind.MODEL_LATE,
        stage=Stage.ANSWER,
        model="m/slow",
        message="m/slow cut in stage 1 answer after 2.1 s: no answer in this deliberation",
    )
    assert event_line(cut) == f"  ⌛ {cut.message}"
