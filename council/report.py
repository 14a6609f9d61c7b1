"""The disagreement report: where the council agreed and where it did not, beside every
final answer, for every run.

Its facts are computed (`facts`), whatever the chairman writes:

- the value each member's first answer states, where answers state one (the workflow reads
  them with grading.answers.stated_value): all alike is a point of consensus that says the
  value; values that differ are a contradiction with each value and who states it, and
  what became of the split (each member's value after refinement, and the final answer's);
- the latest review's dissents (council.agreement: a rating at least 2 points from the
  other ratings' median), each answer's a contradiction: the dissenting rating and who gave
  it, against the other reviewers' ratings and who gave them;
- how many independent votes the reviewers are worth (council.agreement.independent_votes).

The chairman's structured synthesis (council.structured.SynthesisReply) adds on top
(`merged`): a resolution of each computed split (asked by its number), its own points of
consensus and of contradiction, points one member raised, what none addressed. Every point
says whether it was computed or written by the chairman. Model text is untrusted: every
member the chairman names must be one of the council (others are dropped), every list and
text is bounded. Without a usable structured reply the computed report stands whole.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from council.agreement import Agreement, independent_votes
from council.limits import one_line

MAX_POINTS = 12
MAX_POINT_CHARS = 500
# What a dissent's position quotes of its critique.
MAX_WHY_CHARS = 200
# Who wrote a point: computed from the answers and the reviews, or the chairman.
Source = Literal["computed", "chairman"]
VALUE_POINT = "the value the first answers state"


class Position(BaseModel):
    model_config = ConfigDict(extra="forbid")

    view: str = Field(description="one view on the point, in a sentence")
    held_by: list[str] = Field(description="the model ids of the members who hold this view")


class HeldPosition(Position):
    """A view on a point of the record's report, who holds it, and why where it is said
    (a dissenting reviewer's critique: model text)."""

    model_config = ConfigDict(extra="ignore")

    why: str = ""


class Point(BaseModel):
    """A point of consensus, or one none addressed, and who found it."""

    text: str
    source: Source = "chairman"


class Contradiction(BaseModel):
    """A point the members contradict each other on: each position and who holds it."""

    point: str
    positions: list[HeldPosition]
    # Why the final answer sides as it does (the chairman's), and what became of the split
    # (computed: the values after refinement, the final answer's).
    resolution: str = ""
    outcome: str = ""
    source: Source = "chairman"


class UniquePoint(BaseModel):
    point: str
    raised_by: str  # the model id of the member who raised it
    source: Source = "chairman"


class AskedContradiction(BaseModel):
    """A contradiction as the chairman is asked to write it."""

    model_config = ConfigDict(extra="forbid")

    point: str = Field(description="what the members contradict each other on")
    positions: list[Position] = Field(description="each view on it and who holds it")
    resolution: str = Field(description="why the final answer sides as it does")


class AskedUnique(BaseModel):
    model_config = ConfigDict(extra="forbid")

    point: str = Field(description="a point only one member raised")
    raised_by: str = Field(description="the model id of that member")


class AskedResolution(BaseModel):
    model_config = ConfigDict(extra="forbid")

    split: int = Field(description="the number of a split the prompt lists")
    resolution: str = Field(description="why the final answer sides as it does on it")


class DisagreementReport(BaseModel):
    """Where the council agreed and where it did not."""

    consensus: list[Point] = Field(default_factory=list)
    contradictions: list[Contradiction] = Field(default_factory=list)
    unique: list[UniquePoint] = Field(default_factory=list)
    unaddressed: list[Point] = Field(default_factory=list)
    # model -> the value its first answer states (those that state one), and the final
    # answer's (None: it states none, or there is no final answer yet).
    stated: dict[str, str] = Field(default_factory=dict)
    unstated: list[str] = Field(default_factory=list)  # those whose first answer states none
    final_value: str | None = None
    # (Records of build 0.5: the latest review's dissents no contradiction named.)
    unreported_dissents: list[str] = Field(default_factory=list)
    # How many independent votes the reviewers are worth (None: no review to tell).
    independent_members: float | None = None
    members: int = 0  # the council's members, of whom the account speaks
    # Whether the chairman's structured synthesis is in it ("chairman"), or only what is
    # computed ("computed"; "reviews" in records of build 0.5).
    source: Literal["chairman", "computed", "reviews"] = "computed"

    @field_validator("consensus", "unaddressed", mode="before")
    @classmethod
    def _points(cls, value: Any) -> Any:
        """A record of build 0.5 holds these as the chairman's texts."""
        if isinstance(value, list):
            return [{"text": v, "source": "chairman"} if isinstance(v, str) else v for v in value]
        return value


# ---- computed ---------------------------------------------------------------------------


def facts(
    members: Sequence[str],
    stated: Mapping[str, str | None],
    refined: Mapping[str, str | None] | None = None,
    agreement: Agreement | None = None,
) -> DisagreementReport:
    """The report's computed facts: `stated`, the value each member's first answer states
    (model -> the value, None where it states none); `refined`, each member's value after
    refinement (where refinement ran); `agreement`, the latest review's."""
    report = DisagreementReport(
        members=len(members),
        stated={m: v for m, v in stated.items() if v is not None},
        unstated=[m for m, v in stated.items() if v is None],
        independent_members=independent_votes(agreement) if agreement else None,
    )
    _values(report, stated, refined or {})
    if agreement is not None:
        report.contradictions += _dissents(agreement)
    return report


def _values(
    report: DisagreementReport, stated: Mapping[str, str | None], refined: Mapping[str, str | None]
) -> None:
    """What the values the first answers state say: consensus, or a split."""
    if len(report.stated) < 2:
        return
    holders = _holders(stated)
    silent = holders.pop(None, [])
    if len(holders) == 1:
        [(value, who)] = holders.items()
        if silent:
            text = f"every first answer that states a value states {value} ({_names(who)}); "
            text += f"{_names(silent)} state{'s' if len(silent) == 1 else ''} none"
        else:
            text = f"every member's first answer states {value}"
        report.consensus.append(Point(text=text, source="computed"))
        return
    positions = [HeldPosition(view=str(value), held_by=who) for value, who in holders.items()]
    if silent:
        positions.append(HeldPosition(view="states no value", held_by=silent))
    changed = {m: v for m, v in refined.items() if v != stated.get(m)}
    outcome = ""
    if changed:
        after = _holders(refined)
        after.pop(None, None)
        outcome = "after refinement: " + "; ".join(
            f"{value} ({_names(who)})" for value, who in after.items()
        )
    report.contradictions.insert(
        0, Contradiction(point=VALUE_POINT, positions=positions, outcome=outcome, source="computed")
    )


def _holders(values: Mapping[str, str | None]) -> dict[str | None, list[str]]:
    """Each value (None: none) and who states it, the most held first (then as met)."""
    held: dict[str | None, list[str]] = {}
    for model, value in values.items():
        held.setdefault(value, []).append(model)
    return dict(sorted(held.items(), key=lambda item: (item[0] is None, -len(item[1]))))


def _dissents(agreement: Agreement) -> list[Contradiction]:
    """Each answer a reviewer's rating stands apart on: the dissenting ratings and who gave
    them (with their critiques), against the other reviewers' ratings and who gave them."""
    ratings = {answer.author: answer.ratings for answer in agreement.answers}
    found: list[Contradiction] = []
    for author in dict.fromkeys(d.author for d in agreement.dissent):
        dissents = [d for d in agreement.dissent if d.author == author]
        apart = {d.reviewer for d in dissents}
        positions = [
            HeldPosition(
                view=f"rated it {_rating(d.rating)}/5",
                held_by=[d.reviewer],
                why=one_line(d.critique, MAX_WHY_CHARS),
            )
            for d in dissents
        ]
        others = {r: v for r, v in ratings.get(author, {}).items() if r not in apart}
        if others:
            low, high = min(others.values()), max(others.values())
            span = _rating(low) if low == high else f"{_rating(low)}-{_rating(high)}"
            positions.append(HeldPosition(view=f"rated it {span}/5", held_by=list(others)))
        found.append(
            Contradiction(
                point=f"how good {author}'s answer is", positions=positions, source="computed"
            )
        )
    return found[:MAX_POINTS]


def _rating(value: float) -> str:
    return f"{value:g}"


def _names(models: Sequence[str]) -> str:
    return ", ".join(models)


def answers_line(report: DisagreementReport) -> str | None:
    """How far the members' first answers agree, where they state values: `members' first
    answers: all 4 state 5`, or `members' first answers: 3 of 4 state 5 (sim/atlas,
    sim/borealis, sim/drift); sim/cirrus states 6`; None when fewer than two state one (or a
    record of build 0.5, which kept no values)."""
    if len(report.stated) < 2:
        return None
    held = _holders(report.stated)
    (value, who), *rest = held.items()
    n = len(report.stated) + len(report.unstated)
    head = "members' first answers: "
    if not rest and len(who) == n:
        return f"{head}all {n} state {value}"
    others = "; ".join(f"{_names(w)} state{'s' if len(w) == 1 else ''} {v}" for v, w in rest)
    silent = report.unstated
    none = f"{_names(silent)} state{'s' if len(silent) == 1 else ''} no value" if silent else ""
    tail = "; ".join(part for part in (others, none) if part)
    return f"{head}{len(who)} of {n} state {value} ({_names(who)})" + (f"; {tail}" if tail else "")


def split_lines(report: DisagreementReport) -> list[str]:
    """The computed splits as the chairman is shown them, numbered from 1 (the numbers its
    resolutions name): each point, and each position with who holds it (the critiques stay
    out: the prompt frames them where it shows the dissents)."""
    return [
        f"{n}. {c.point}: "
        + "; ".join(f"{p.view} ({_names(p.held_by) or 'no one'})" for p in c.positions)
        for n, c in enumerate(report.contradictions, start=1)
        if c.source == "computed"
    ]


# ---- the chairman's ---------------------------------------------------------------------


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


class Written(BaseModel):
    """What the chairman's structured synthesis says besides its answer, read and bounded:
    its report, and its resolution of each computed split (by number)."""

    report: DisagreementReport
    resolutions: dict[int, str] = Field(default_factory=dict)


def read_report(data: Mapping[str, Any], members: Sequence[str]) -> Written:
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
                    HeldPosition(view=view, held_by=_members(position.get("held_by"), members))
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
    resolutions: dict[int, str] = {}
    for item in _objects(data.get("resolutions")):
        split, text = item.get("split"), _text(item.get("resolution"))
        if isinstance(split, int) and not isinstance(split, bool) and text:
            resolutions.setdefault(split, text)
    report = DisagreementReport(
        consensus=[Point(text=t) for t in _texts(data.get("consensus"))],
        contradictions=contradictions,
        unique=unique,
        unaddressed=[Point(text=t) for t in _texts(data.get("unaddressed"))],
        members=len(members),
        source="chairman",
    )
    return Written(report=report, resolutions=resolutions)


def merged(
    computed: DisagreementReport, written: Written | None, final_value: str | None
) -> DisagreementReport:
    """The computed facts with what the chairman wrote on top: its resolution of each
    computed split; its own points, but for a contradiction whose positions are held by the
    same members as a computed one's (the same split in its words: its resolution is kept
    where the computed one has none); and what the final answer states."""
    report = computed.model_copy(deep=True)
    report.final_value = final_value
    for contradiction in report.contradictions:
        if contradiction.point == VALUE_POINT and final_value is not None:
            said = f"the final answer states {final_value}"
            contradiction.outcome = "; ".join(p for p in (contradiction.outcome, said) if p)
    if written is None:
        return report
    own = written.report
    computed_splits = [c for c in report.contradictions if c.source == "computed"]
    for number, contradiction in enumerate(computed_splits, start=1):
        contradiction.resolution = written.resolutions.get(number, "")
    for contradiction in own.contradictions:
        same = next((c for c in computed_splits if _split(c) == _split(contradiction)), None)
        if same is None:
            report.contradictions.append(contradiction)
        elif not same.resolution:
            same.resolution = contradiction.resolution
    known = {point.text for point in report.consensus}
    report.consensus += [p for p in own.consensus if p.text not in known]
    report.unique, report.unaddressed = own.unique, own.unaddressed
    report.contradictions = report.contradictions[: MAX_POINTS * 2]
    report.source = "chairman"
    return report


def _split(contradiction: Contradiction) -> frozenset[frozenset[str]]:
    """Who holds which side, whatever the words."""
    return frozenset(frozenset(p.held_by) for p in contradiction.positions if p.held_by)
