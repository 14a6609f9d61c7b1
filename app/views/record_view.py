"""The record as every surface shows it: one view model, built once from a record by
`record_view`. The page (web/templates), the Markdown transcript (app/views/render.py) and the
MCP results (mcp_server/results.py) only render it: labels, order, which member was cut,
the agreement's wording and the usage sums are worked out here, once.

Texts are the models' own and stay as written: each renderer escapes them for its medium.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from difflib import SequenceMatcher
from functools import cached_property

from council.agreement import Agreement, Dissent, verdict, votes_note
from council.calls import Stage
from council.iteration import CritiqueItem, IterationRound, RejectedCritique
from council.limits import size_text
from council.models import DeliberationRecord, ToolCallEntry, UsageTotals
from council.progress import shown_status
from council.report import Contradiction, DisagreementReport, HeldPosition, answers_line
from council.reviews import read_review
from council.stages import Ending, Stage2Result
from council.steering import SteeringAction
from council.stragglers import LateCall


def cut_note(result: Ending) -> str | None:
    """How a stored reply ended, when it was cut (None: it was not)."""
    if result.cut_by_token_limit:
        return "cut by the token limit"
    return "cut at the size cap" if result.truncated else None


def late_note(cuts: Sequence[LateCall], *, where: bool = True) -> str:
    """ "cut as late after 8.6 s (stage 1 answer)", one part per cut."""
    return "; ".join(
        f"cut as late after {c.seconds:.1f} s" + (f" ({c.stage.place(c.round)})" if where else "")
        for c in cuts
    )


# ---- the question ---------------------------------------------------------------------------


@dataclass(frozen=True)
class ContextView:
    """The earlier turns a follow-up (or a conversation a client brought) carried."""

    follow_up_of: str | None  # None: a conversation the client brought
    thread_id: str | None
    turns: int
    tokens: int
    max_tokens: int
    dropped: list[str]  # the turns left out that the record names, oldest first
    unnamed: int  # and how many older ones it does not name
    cut: bool  # the last turn was cut to fit


@dataclass(frozen=True)
class AttachmentView:
    name: str
    media_type: str
    size: str  # "1.2 KB"
    sha256: str
    cuts: str  # where its text was cut to fit a context window ("" when nowhere)

    @property
    def described(self) -> str:
        """ "notes.csv (text/csv, 1.2 KB)"."""
        return f"{self.name} ({self.media_type}, {self.size})"


# ---- tool calls -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ToolCallView:
    """A member's tool call, as it is shown under the reply whose call asked for it."""

    tool: str
    arguments: str
    excerpt: str  # the start of the result ("" when it failed)
    error: str | None
    truncated: bool  # the result was cut to the run's cap before the member saw it
    refused: bool  # not run: the budget was spent
    size: str  # "1.2 KB"
    seconds: float
    where: str  # "stage 1 answer", "stage 2 review after round 1", ...
    model: str

    @property
    def line(self) -> str:
        """ "fetch({"url": ...}) · 1.2 KB in 0.4 s", or how it failed."""
        if self.refused:
            how = "not run: the budget was spent"
        elif self.error:
            how = f"failed after {self.seconds:.1f} s: {self.error}"
        else:
            how = f"{self.size} in {self.seconds:.1f} s" + (", cut" if self.truncated else "")
        return f"{self.tool}({self.arguments}) · {how}"


def _tool_call(c: ToolCallEntry) -> ToolCallView:
    return ToolCallView(
        tool=c.tool,
        arguments=c.arguments,
        excerpt=c.excerpt,
        error=c.error,
        truncated=c.truncated,
        refused=c.refused,
        size=size_text(c.bytes),
        seconds=c.duration_ms / 1000,
        where=c.stage.place(c.round),
        model=c.model,
    )


def tool_call_views(
    record: DeliberationRecord, stage: Stage, round_number: int | None, model: str
) -> list[ToolCallView]:
    """The tool calls of one reply (round None: of any round, as for the synthesis)."""
    return [
        _tool_call(c)
        for c in record.tool_calls
        if c.stage == stage and c.model == model and round_number in (None, c.round)
    ]


# ---- answers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class AnswerView:
    """A member's stage 1 answer, and its final answer when refinement changed it."""

    model: str
    label: str  # its anonymous label ("" when it has none)
    text: str
    cut: str | None
    final_text: str | None = None  # its final answer, when not its first
    final_round: int = 0  # the last round it refined in
    tool_calls: list[ToolCallView] = field(default_factory=list)


@dataclass(frozen=True)
class CutMember:
    """A member whose call the straggler rule cut: "cut as late after 8.6 s"."""

    model: str
    note: str


@dataclass(frozen=True)
class MemberRow:
    """A member in the council's table: its label and the latest review's figures (a
    member dropped before the review has no label and no figures)."""

    model: str
    label: str | None
    mean_rating: float | None = None
    lowest_rating: float | None = None
    average_rank: float | None = None
    rated_by: int = 0

    @property
    def dropped(self) -> bool:
        return self.label is None


# ---- reviews --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    rating: float | None
    critique: str


@dataclass(frozen=True)
class ReviewView:
    """One member's review as written, and as a person reads it."""

    model: str
    ranking: list[str]
    ratings: dict[str, float]
    ratings_inferred: bool
    presented_order: list[str]
    read_as: str
    cut: str | None
    text: str  # the review as a person reads it (one given as JSON, written out)
    tool_calls: list[ToolCallView] = field(default_factory=list)


@dataclass(frozen=True)
class Matrix:
    """One review: reviewer x answer, each rating with the critique that came with it."""

    title: str
    answers: list[tuple[str, str]]  # (label, model), in label order
    rows: list[tuple[str, dict[str, Cell]]]  # (reviewer, label -> cell)
    orders: dict[str, list[str]]  # reviewer -> the order it was shown the answers in
    reviews: list[ReviewView] = field(default_factory=list)
    key: str = ""  # names the review on the page (what stays open as the page refreshes)
    agreement: Agreement | None = None  # how far this review agreed
    dissents: dict[tuple[str, str], Dissent] = field(default_factory=dict)  # (reviewer, label)
    # (reviewer, "cut as late after 8.6 s"): the members whose review the straggler rule cut
    late: list[tuple[str, str]] = field(default_factory=list)

    @property
    def verdict(self) -> str | None:
        return verdict(self.agreement) if self.agreement is not None else None

    @property
    def texts(self) -> dict[str, str]:
        """reviewer -> its review as a person reads it."""
        return {review.model: review.text for review in self.reviews}


def review_matrix(
    title: str,
    reviews: Sequence[Stage2Result],
    label_to_model: Mapping[str, str],
    agreement: Agreement | None = None,
    key: str = "",
    late: Sequence[tuple[str, str]] = (),
    tool_calls: Mapping[str, list[ToolCallView]] | None = None,
) -> Matrix:
    """`tool_calls`: each reviewer's, for this review."""
    labels = dict(label_to_model)
    reviews = [_as_stored(review, labels) for review in reviews]
    rows = []
    for review in reviews:
        said = review.critiques or {}
        cells = {
            label: Cell(review.ratings.get(label), said.get(label, ""))
            for label, model in labels.items()
            if model != review.model
        }
        rows.append((review.model, cells))
    return Matrix(
        title=title,
        answers=sorted(labels.items()),
        rows=rows,
        orders={review.model: review.presented_order for review in reviews},
        reviews=[
            ReviewView(
                model=review.model,
                ranking=list(review.parsed_ranking),
                ratings=dict(review.ratings),
                ratings_inferred=review.ratings_inferred,
                presented_order=list(review.presented_order),
                read_as=review.read_as,
                cut=cut_note(review),
                text=review.ranking if review.written_out is None else review.written_out,
                tool_calls=list((tool_calls or {}).get(review.model, [])),
            )
            for review in reviews
        ],
        key=key,
        agreement=agreement,
        dissents={
            (d.reviewer, label): d
            for d in (agreement.dissent if agreement else [])
            for label, model in labels.items()
            if model == d.author
        },
        late=list(late),
    )


def _as_stored(review: Stage2Result, labels: dict[str, str]) -> Stage2Result:
    """A review as the record keeps it; an older record's, with what that did not keep
    (the critiques, the JSON written out) read from its text."""
    if review.critiques is not None:
        return review
    read, _ = read_review(review.model, review.ranking, labels)
    return review.model_copy(update={"critiques": read.critiques, "written_out": read.written_out})


def late_reviewers(record: DeliberationRecord, round_number: int) -> list[tuple[str, str]]:
    """(reviewer, "cut as late after 8.6 s") for each review of this round (0: the first
    review) that the straggler rule cut."""
    rounds = {d.round_number: d.reviews for d in record.rounds}
    reviewed = {r.model for r in (rounds.get(round_number, []) if round_number else record.stage2)}
    return [
        (cut.model, late_note([cut], where=False))
        for cut in record.late
        if cut.stage == Stage.REVIEW and cut.round == round_number and cut.model not in reviewed
    ]


def _first_review(record: DeliberationRecord) -> Matrix | None:
    first = record.stage2_agreement or (record.agreement if not record.rounds else None)
    return _review(record, 0, record.stage2, first)


def _review(
    record: DeliberationRecord,
    round_number: int,
    reviews: Sequence[Stage2Result],
    agreement: Agreement | None,
) -> Matrix | None:
    """The review of a round (0: the first review); None when no member reviewed and the
    straggler rule cut none."""
    n = round_number
    title = f"Review round {n + 1}" + (f" (after refinement round {n})" if n else "")
    late = late_reviewers(record, n)
    if not (reviews or late):
        return None
    return review_matrix(
        title,
        reviews,
        record.label_to_model,
        agreement,
        key=f"review-{n + 1}",
        late=late,
        tool_calls={r.model: tool_call_views(record, Stage.REVIEW, n, r.model) for r in reviews},
    )


def review_matrices(record: DeliberationRecord) -> list[Matrix]:
    """One matrix per review: the first, then the one after each refinement round; each
    with a row for every reviewer the straggler rule cut, labelled so."""
    return record_view(record).reviews


# ---- refinements ----------------------------------------------------------------------------

_TOKEN = re.compile(r"\s+|[^\s]+")


def word_diff(old: str, new: str) -> list[tuple[str, str]]:
    """(op, text) pieces from old to new, word by word: op is "same", "del" or "ins";
    white space goes with the words around it."""
    a, b = _TOKEN.findall(old), _TOKEN.findall(new)
    pieces: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append(("same", "".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(("del", "".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(("ins", "".join(b[j1:j2])))
    return pieces


@dataclass(frozen=True)
class RefinementView:
    """One member's refinement in a round: the critiques it received, what it did with
    them, and its answer's change word by word."""

    model: str
    label: str
    changed: bool
    failed: bool
    verdict: str  # "changed: ...", "no significant change", "kept its previous answer: ..."
    confidence: float | None
    critiques: list[CritiqueItem]  # the peer critiques it received
    addressed: int
    accepted: list[str]
    rejected: list[RejectedCritique]
    reasoning_steps: list[str]
    explanation: str | None
    previous: str  # its answer before the round
    text: str  # its answer after the round
    cut: str | None
    tool_calls: list[ToolCallView] = field(default_factory=list)

    @cached_property
    def diff(self) -> list[tuple[str, str]]:
        """Its answer's change in the round, word by word (worked out when first shown)."""
        return word_diff(self.previous, self.text)


@dataclass(frozen=True)
class RoundView:
    number: int
    complete: bool
    changed: list[str]  # the members whose answer changed
    unchanged: list[str]
    refinements: list[RefinementView]
    review: Matrix | None  # the review that followed it


def _refinement_verdict(error: str | None, changed: bool, summary: str | None) -> str:
    if error:
        return f"kept its previous answer: {error}"
    if changed:
        return f"changed: {summary}" if summary else "changed"
    return "no significant change"


def _round(record: DeliberationRecord, round_data: IterationRound) -> RoundView:
    model_to_label = {model: label for label, model in record.label_to_model.items()}
    refined = []
    for result in round_data.refinements:
        label = model_to_label.get(result.model, "")
        refined.append(
            RefinementView(
                model=result.model,
                label=label,
                changed=result.changes_made and not result.error,
                failed=result.error is not None,
                verdict=_refinement_verdict(
                    result.error, result.changes_made, result.change_summary
                ),
                confidence=result.confidence,
                critiques=[
                    c for c in round_data.critiques.get(label, []) if c.source_model != result.model
                ],
                addressed=len(result.critiques_addressed),
                accepted=list(result.critiques_accepted),
                rejected=list(result.critiques_rejected),
                reasoning_steps=list(result.reasoning_steps),
                explanation=result.improvement_explanation,
                previous=result.original_response,
                text=result.refined_response,
                cut=cut_note(result),
                tool_calls=tool_call_views(
                    record, Stage.REFINE, round_data.round_number, result.model
                ),
            )
        )
    return RoundView(
        number=round_data.round_number,
        complete=round_data.completed_at is not None,
        changed=list(round_data.models_that_changed),
        unchanged=list(round_data.models_unchanged),
        refinements=refined,
        review=_review(record, round_data.round_number, round_data.reviews, round_data.agreement),
    )


# ---- agreement, usage, steering, failures ---------------------------------------------------


@dataclass(frozen=True)
class AgreementView:
    """How far the final review agreed."""

    agreement: Agreement  # level, alpha, Kendall's W, each answer's ratings, the dissents
    verdict: str  # in one line: "agreement high (alpha 0.91) · no dissent"
    trend: list[str]  # the level review by review, when there was more than one review
    # How many independent opinions the reviewers count as, in a plain sentence
    # (council.agreement.votes_note); None when it cannot be told.
    votes: str | None = None

    @property
    def level(self) -> str:
        return self.agreement.level or "none"


@dataclass(frozen=True)
class ReportLine:
    """A point of the report, and who found it: "computed" (from the answers' values and
    the reviews' ratings) or "chairman" (written by the chairman)."""

    text: str
    source: str


@dataclass(frozen=True)
class ReportView:
    """Where the council agreed and where it did not (council.report), as lines."""

    report: DisagreementReport
    # (How many independent votes the reviewers are worth is the agreement's `votes`.)

    @property
    def source_note(self) -> str | None:
        """Where the account comes from, when not the chairman's structured synthesis too."""
        if self.report.source == "chairman":
            return None
        return (
            "the chairman gave no structured account: what is computed from the answers and "
            "the reviews"
        )

    @property
    def empty(self) -> bool:
        return not self.lines()

    def lines(self) -> list[tuple[str, list[ReportLine]]]:
        """Each part that has something to say: its heading and its lines (a
        contradiction: the point, each view and who holds it, what became of it and the
        chairman's resolution), each saying who found it."""
        report = self.report
        parts = [
            ("All members hold", [ReportLine(p.text, p.source) for p in report.consensus]),
            (
                "Contradictions",
                [ReportLine(_contradiction(c), c.source) for c in report.contradictions],
            ),
            (
                "Raised by one member only",
                [
                    ReportLine(f"{u.point} (raised by {u.raised_by})", u.source)
                    for u in report.unique
                ],
            ),
            (
                "Not addressed by any member",
                [ReportLine(p.text, p.source) for p in report.unaddressed],
            ),
            (
                "Dissents in the reviews the account leaves out",
                [ReportLine(text, "computed") for text in report.unreported_dissents],
            ),
        ]
        return [(heading, items) for heading, items in parts if items]


def _contradiction(c: Contradiction) -> str:
    held = "; ".join(
        f"{p.view} ({_held(p.held_by)})" + (f": {p.why}" if p.why else "") for p in c.positions
    )
    outcome = f" · then: {c.outcome}" if c.outcome else ""
    by = "resolved by the chairman" if c.source == "computed" else "resolved"
    resolved = f" · {by}: {c.resolution}" if c.resolution else ""
    return f"{c.point}: {held or 'positions not named'}{outcome}{resolved}"


def _held(models: Sequence[str]) -> str:
    return f"held by {', '.join(models)}" if models else "holders not named"


@dataclass(frozen=True)
class GateView:
    """Depth auto's agreement gate (council.depth): its verdict in one line, and, for a run
    that went straight to the synthesis, what that saved (council.depth.Saved.describe)."""

    agreed: bool
    line: str
    saved: str | None = None


@dataclass(frozen=True)
class UsageRow:
    name: str
    totals: UsageTotals | None  # None: no call of this member completed
    note: str = ""  # its calls the straggler rule cut


@dataclass(frozen=True)
class UsageView:
    total_tokens: int
    prompt_tokens: int
    completion_tokens: int
    calls: int
    estimated_calls: int
    cost_usd: float | None
    cost: str  # "cost $0.0123", "cost not reported", ...
    tables: list[tuple[str, list[UsageRow]]]  # by model, by stage, by provider

    @property
    def short(self) -> str:
        """ "12,345 tokens in 9 calls · cost $0.0123"."""
        return f"{self.total_tokens:,} tokens in {self.calls} calls · {self.cost}"

    @property
    def line(self) -> str:
        """The totals in full: tokens, prompt and completion, calls (estimated), cost."""
        estimated = f" ({self.estimated_calls} estimated)" if self.estimated_calls else ""
        return (
            f"{self.total_tokens:,} tokens ({self.prompt_tokens:,} prompt, "
            f"{self.completion_tokens:,} completion) in {self.calls} calls{estimated}"
            f" · {self.cost}"
        )


def stage_title(stage: str) -> str:
    try:
        return Stage(stage).heading
    except ValueError:
        return stage


def _usage(record: DeliberationRecord) -> UsageView:
    """The totals, and the tables: by model (every member, a member cut as late too, with
    its cuts), by stage, and by provider where there is more than one."""
    usage = record.usage
    cuts: dict[str, list[LateCall]] = {}
    for cut in record.late:
        cuts.setdefault(cut.model, []).append(cut)
    names = sorted({*usage.by_model, *cuts})
    by_model = [UsageRow(n, usage.by_model.get(n), late_note(cuts.get(n, []))) for n in names]
    by_stage = [UsageRow(stage_title(n), t) for n, t in sorted(usage.by_stage.items())]
    tables = [("By model", by_model), ("By stage", by_stage)]
    if len(usage.by_provider) > 1:
        tables.append(
            ("By provider", [UsageRow(n, t) for n, t in sorted(usage.by_provider.items())])
        )
    return UsageView(
        total_tokens=usage.total_tokens,
        prompt_tokens=usage.prompt_tokens,
        completion_tokens=usage.completion_tokens,
        calls=usage.calls,
        estimated_calls=usage.estimated_calls,
        cost_usd=usage.cost_usd,
        cost=usage.cost_line(),
        tables=[(title, rows) for title, rows in tables if rows],
    )


@dataclass(frozen=True)
class SteeringView:
    """What the user did while the run went: raised the rounds, or added a critique."""

    at: datetime
    when: str  # "during refinement round 2", "before the first refinement round"
    max_rounds: int | None  # set the maximum rounds to this (None: a critique)
    model: str | None  # the critique's member
    text: str | None  # the critique, as the user wrote it
    handed: str  # "handed over in round 2", "waiting for the next round", ...


def _steering(action: SteeringAction, running: bool) -> SteeringView:
    when = (
        f"during refinement round {action.during_round}"
        if action.during_round
        else "before the first refinement round"
    )
    if action.delivered_in_round:
        handed = f"handed over in round {action.delivered_in_round}"
    elif running:
        handed = "waiting for the next round"
    else:
        handed = "never handed over (no round followed)"
    return SteeringView(
        at=action.at,
        when=when,
        max_rounds=action.max_rounds if action.kind == "max_rounds" else None,
        model=action.model,
        text=action.text,
        handed=handed,
    )


@dataclass(frozen=True)
class FailedCall:
    """A call that failed for good: where, through which provider, why."""

    where: str  # "stage 2.5 refinement · round 1"
    provider: str | None
    text: str  # names the model once

    @property
    def line(self) -> str:
        """ "stage 1 answer (provider default): MODEL: why"."""
        provider = f" (provider {self.provider})" if self.provider else ""
        return f"{self.where}{provider}: {self.text}"


@dataclass(frozen=True)
class FinalView:
    chairman: str
    text: str
    cut: str | None
    tool_calls: list[ToolCallView] = field(default_factory=list)


# ---- the record -----------------------------------------------------------------------------


@dataclass(frozen=True)
class RecordView:
    """A deliberation's record, as every surface shows it."""

    id: str
    question: str
    status: str  # running, stopping, completed, stopped (on the user's stop), failed
    ended: str | None  # why the refinement loop ended, once it has
    stop_reason: str | None  # the user's stop, with its reason
    rounds_completed: int
    min_rounds: int
    max_rounds: int
    quality_threshold: float
    context: ContextView | None
    attachments: list[AttachmentView]
    final: FinalView | None
    agreement: AgreementView | None
    usage: UsageView
    members: list[MemberRow]  # the latest review's figures, then the members dropped
    answers: list[AnswerView]
    cut_answers: list[CutMember]  # the members with no answer: the straggler rule cut it
    first_review: Matrix | None
    rounds: list[RoundView]
    steering: list[SteeringView]
    late: list[str]  # every call the straggler rule cut, described
    failed: list[FailedCall]
    tools: list[str] = field(default_factory=list)  # the tools the members were given
    without_tools: list[str] = field(default_factory=list)  # members whose provider takes none
    tools_unavailable: list[str] = field(default_factory=list)  # "calc: why", not offered
    tools_withheld: list[str] = field(default_factory=list)  # "calc__delete: why", not offered
    tool_calls: list[ToolCallView] = field(default_factory=list)  # every one, in order
    depth: str = "full"
    gate: GateView | None = None  # depth auto: whether the first answers agreed, and why
    not_needed: list[str] = field(default_factory=list)  # calls cancelled as not needed
    report: ReportView | None = None  # the disagreement report
    # How far the members' first answers agree by the values they state (council.report.
    # answers_line): beside the reviewers' agreement on their ratings, which is another thing.
    answers_agree: str | None = None

    @property
    def running(self) -> bool:
        return self.status in ("running", "stopping")

    @property
    def reviews(self) -> list[Matrix]:
        """Every review in order: the first, then the one after each refinement round."""
        first = [self.first_review] if self.first_review else []
        return first + [r.review for r in self.rounds if r.review is not None]

    @property
    def tool_failures(self) -> list[ToolCallView]:
        """The tool calls that gave their member no result: refused (the budget was spent)
        or failed. They count among the run's errors, beside the failed model calls."""
        return [c for c in self.tool_calls if c.refused or c.error]

    @property
    def tool_failures_line(self) -> str | None:
        """ "12 tool calls refused (the budget was spent), 1 failed"; None when none."""
        refused = sum(c.refused for c in self.tool_calls)
        failed = sum(bool(c.error) and not c.refused for c in self.tool_calls)
        if not (refused or failed):
            return None
        parts = [f"{refused} refused (the budget was spent)"] if refused else []
        parts += [f"{failed} failed"] if failed else []
        calls = "tool call" if refused + failed == 1 else "tool calls"
        return f"{refused + failed} {calls}: {', '.join(parts)}"

    @property
    def nothing_failed(self) -> bool:
        """No model call failed for good, and every tool call gave its member a result."""
        return not (self.failed or self.tool_failures)


def _context(record: DeliberationRecord) -> ContextView | None:
    context = record.context
    if context is None:
        return None
    return ContextView(
        follow_up_of=record.follow_up_of,
        thread_id=record.thread_id,
        turns=len(context.turns),
        tokens=context.tokens,
        max_tokens=context.max_tokens,
        dropped=list(context.dropped),
        unnamed=max(0, context.dropped_count - len(context.dropped)),
        cut=context.cut,
    )


def _agreement(record: DeliberationRecord) -> AgreementView | None:
    if record.agreement is None:
        return None
    trend = record.agreement_trend
    levels: list[str] = [level or "-" for level in trend.levels] if trend is not None else []
    return AgreementView(
        record.agreement,
        verdict(record.agreement),
        levels if len(levels) > 1 else [],
        votes_note(record.agreement),
    )


def _report(record: DeliberationRecord) -> ReportView | None:
    """The disagreement report; for a record of build 0.4, the points of disagreement its
    structured synthesis gave, each a contradiction with the view the answer did not take."""
    report = record.disagreement_report
    if report is None:
        legacy = record.stage3.disagreements if record.stage3 else []
        if not legacy:
            return None
        report = DisagreementReport(
            contradictions=[
                Contradiction(
                    point=d.point,
                    positions=[HeldPosition(view="not the answer's view", held_by=d.held_by)],
                    resolution=d.resolution,
                )
                for d in legacy
            ]
        )
    return ReportView(report)


def _gate(record: DeliberationRecord) -> GateView | None:
    gate = record.gate
    saved = record.saved.describe() if record.saved else None
    return GateView(gate.agreed, gate.describe(), saved) if gate else None


def _answers(record: DeliberationRecord, labels: Mapping[str, str]) -> list[AnswerView]:
    """Each stage 1 answer; with the final answer (the record's stage2_5) of each member
    whose final answer is not its first, and the last round it refined in."""
    finals = {r.model: r.corrected_response for r in record.stage2_5 or []}
    refined_in = {
        result.model: round_data.round_number
        for round_data in record.rounds
        for result in round_data.refinements
        if result.error is None
    }
    out = []
    for result in record.stage1:
        final = finals.get(result.model, result.response)
        changed = final != result.response
        out.append(
            AnswerView(
                model=result.model,
                label=labels.get(result.model, ""),
                text=result.response,
                cut=cut_note(result),
                final_text=final if changed else None,
                final_round=refined_in.get(result.model, 0) if changed else 0,
                tool_calls=tool_call_views(record, Stage.ANSWER, 0, result.model),
            )
        )
    return out


def _cut_answers(record: DeliberationRecord) -> list[CutMember]:
    answered = {r.model for r in record.stage1}
    cuts: dict[str, list[LateCall]] = {}
    for cut in record.late:
        if cut.stage == Stage.ANSWER and cut.model not in answered:
            cuts.setdefault(cut.model, []).append(cut)
    return [CutMember(model, late_note(c, where=False)) for model, c in cuts.items()]


def _members(record: DeliberationRecord, labels: Mapping[str, str]) -> list[MemberRow]:
    rows = [
        MemberRow(e.model, e.label, e.mean_rating, e.lowest_rating, e.average_rank, e.ratings_count)
        for e in record.aggregate_rankings
    ]
    return rows + [MemberRow(model, None) for model in record.models if model not in labels]


def record_view(record: DeliberationRecord) -> RecordView:
    """The view of a record (a finished one, or one so far) that every surface renders."""
    labels = {model: label for label, model in record.label_to_model.items()}
    iteration = record.iteration
    stage3 = record.stage3
    return RecordView(
        id=record.id,
        question=record.query,
        status=shown_status(record.status, iteration.terminated_reason, bool(record.stop_reason)),
        ended=iteration.terminated_reason,
        stop_reason=record.stop_reason,
        rounds_completed=iteration.rounds_completed,
        min_rounds=iteration.min_rounds,
        max_rounds=iteration.max_rounds,
        quality_threshold=iteration.quality_threshold,
        context=_context(record),
        attachments=[
            AttachmentView(a.name, a.media_type, size_text(a.size), a.sha256, a.cuts_line())
            for a in record.attachments
        ],
        final=FinalView(
            stage3.model,
            stage3.response,
            cut_note(stage3),
            tool_call_views(record, Stage.SYNTHESIS, None, stage3.model),
        )
        if stage3
        else None,
        agreement=_agreement(record),
        usage=_usage(record),
        members=_members(record, labels),
        answers=_answers(record, labels),
        cut_answers=_cut_answers(record),
        first_review=_first_review(record),
        rounds=[_round(record, round_data) for round_data in record.rounds],
        steering=[_steering(action, record.status == "running") for action in record.steering],
        late=[late.describe() for late in record.late],
        failed=[
            FailedCall(e.stage.place(e.round), e.provider, e.describe()) for e in record.errors
        ],
        tools=list(record.tools),
        without_tools=list(record.without_tools),
        tools_unavailable=list(record.tools_unavailable),
        tools_withheld=list(record.tools_withheld),
        tool_calls=[_tool_call(c) for c in record.tool_calls],
        depth=record.depth,
        gate=_gate(record),
        not_needed=[n.describe() for n in record.not_needed],
        report=_report(record),
        answers_agree=answers_line(record.disagreement_report)
        if record.disagreement_report
        else None,
    )
