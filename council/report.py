"""The disagreement report: a structured account of where the council agreed and where it did
not, beside every final answer.

It comes from the chairman's structured synthesis (council.structured.SynthesisReply): the
points all members hold, the points they contradict each other on (who holds which view),
points only one member raised, and what none addressed. Model text is untrusted: every
member the chairman names must be one of the council (others are dropped), every list and
text is bounded. The report is then checked against the reviews (`checked`): each
dissent of the latest review (a reviewer whose rating stands apart, council.agreement) that
no contradiction names is listed as left out, and the report carries how many independent
votes the reviewers are worth (council.agreement.independent_votes). Without a structured
synthesis (an answer format was asked for, or the provider took no schema) the report holds
what the reviews say alone.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from council.agreement import Agreement, independent_votes
from council.limits import one_line

MAX_POINTS = 12
MAX_POINT_CHARS = 500


class Position(BaseModel):
    model_config = ConfigDict(extra="forbid")

    view: str = Field(description="one view on the point, in a sentence")
    held_by: list[str] = Field(description="the model ids of the members who hold this view")


class Contradiction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    point: str = Field(description="what the members contradict each other on")
    positions: list[Position] = Field(description="each view on it and who holds it")
    resolution: str = Field(description="why the final answer sides as it does")


class UniquePoint(BaseModel):
    model_config = ConfigDict(extra="forbid")

    point: str = Field(description="a point only one member raised")
    raised_by: str = Field(description="the model id of that member")


class DisagreementReport(BaseModel):
    """Where the council agreed and where it did not."""

    consensus: list[str] = Field(default_factory=list)
    contradictions: list[Contradiction] = Field(default_factory=list)
    unique: list[UniquePoint] = Field(default_factory=list)
    unaddressed: list[str] = Field(default_factory=list)
    # The latest review's dissents that no contradiction names (each a line).
    unreported_dissents: list[str] = Field(default_factory=list)
    # How many independent votes the reviewers are worth (None: no review to tell).
    independent_members: float | None = None
    members: int = 0  # the council's members, of whom the account speaks
    # Where the account comes from: the chairman's structured synthesis, or the reviews
    # alone (no structured synthesis).
    source: Literal["chairman", "reviews"] = "chairman"


def _text(value: Any) -> str | None:
    return (one_line(value, MAX_POINT_CHARS) or None) if isinstance(value, str) else None


def _texts(value: Any) -> list[str]:
    items = value if isinstance(value, list) else []
    return [t for t in (_text(item) for item in items[:MAX_POINTS]) if t]


def _members(value: Any, members: Sequence[str]) -> list[str]:
    named = value if isinstance(value, list) else [value]
    return list(dict.fromkeys(m for m in named if isinstance(m, str) and m in members))


def _objects(value: Any) -> list[Mapping[str, Any]]:
    items = value if isinstance(value, list) else []
    return [item for item in items[:MAX_POINTS] if isinstance(item, Mapping)]


def read_report(data: Mapping[str, Any], members: Sequence[str]) -> DisagreementReport:
    """The report in a structured synthesis's JSON (its fields besides `answer`), bounded,
    naming only the council's `members`."""
    contradictions = []
    for item in _objects(data.get("contradictions")):
        point = _text(item.get("point"))
        if point is None:
            continue
        positions = []
        for position in _objects(item.get("positions")):
            view = _text(position.get("view"))
            if view is not None:
                positions.append(
                    Position(view=view, held_by=_members(position.get("held_by"), members))
                )
        contradictions.append(
            Contradiction(
                point=point, positions=positions, resolution=_text(item.get("resolution")) or ""
            )
        )
    unique = []
    for item in _objects(data.get("unique")):
        point = _text(item.get("point"))
        by = _members(item.get("raised_by"), members)
        if point is not None and by:
            unique.append(UniquePoint(point=point, raised_by=by[0]))
    return DisagreementReport(
        consensus=_texts(data.get("consensus")),
        contradictions=contradictions,
        unique=unique,
        unaddressed=_texts(data.get("unaddressed")),
        members=len(members),
    )


def from_reviews(members: Sequence[str]) -> DisagreementReport:
    """The report when the chairman gave no structured account: the reviews' part only."""
    return DisagreementReport(members=len(members), source="reviews")


def checked(report: DisagreementReport, agreement: Agreement | None) -> DisagreementReport:
    """The report checked against the latest review: each dissent that no contradiction
    names (neither the reviewer nor the member whose answer it rated holds a position in
    one), and how many independent votes the reviewers are worth."""
    if agreement is None:
        return report
    named = {m for c in report.contradictions for p in c.positions for m in p.held_by}
    left_out = [
        f"{d.reviewer} rated {d.author}'s answer {d.rating:g}/5 where the others' median "
        f"was {d.others_median:g}/5"
        for d in agreement.dissent
        if d.reviewer not in named and d.author not in named
    ]
    return report.model_copy(
        update={
            "unreported_dissents": left_out[:MAX_POINTS],
            "independent_members": independent_votes(agreement),
        }
    )
