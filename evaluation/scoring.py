"""One problem's deliberation record, scored: what each model answered at each stage, the
majority vote, the chairman, and what the run cost.

Stages are "stage 1" (the independent answers) and "round 1" ... "round N" (each model's
answer after that refinement round), N being the run's maximum number of rounds. A model
that did not refine in a round keeps its previous answer, and so does every model after
the last round a deliberation ran (it stopped early because the answers met the quality
threshold or stopped changing): "round N" is always the council's final answers.

The majority vote counts the models' answers at a stage (models without a readable answer
do not vote). A tie goes to the answer given first in the council's order (the order of
--model); the vote records that it was a tie.

A problem the simulator has no answer for (it says so in place of an answer: a dataset it
was not given) is marked unknown: the report counts it in no accuracy, as neither right
nor wrong.

Each problem keeps its final review's agreement (record.agreement: level, alpha, number of
dissents) for the report's accuracy by agreement level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Literal

from pydantic import BaseModel, Field

from council.agreement import Level
from council.iteration import TerminationReason
from council.models import DeliberationRecord, UsageTotals
from grading.answers import ABS_TOL, REL_TOL, Answer, matches
from grading.dataset import NO_SIMULATED_ANSWER, Problem
from grading.sampling import SamplingResult

STAGE1 = "stage 1"
Source = Literal["started", "awaited", "restarted", "reused", "saved"]
SOURCES: dict[str, str] = {
    "started": "deliberated now",
    "awaited": "was running: awaited",
    "restarted": "had failed: run again",
    "reused": "completed earlier: result fetched from Temporal",
    "saved": "completed earlier: result read from the raw outputs",
}


def stage_names(max_rounds: int) -> list[str]:
    return [STAGE1] + [f"round {r}" for r in range(1, max_rounds + 1)]


class Reading(BaseModel):
    """One reply as the harness read it."""

    answer: str | None = Field(description="the final answer as read, None if there was none")
    correct: bool
    judged: bool | None = Field(default=None, description="the judge's verdict, if it was asked")


class Vote(BaseModel):
    answer: str | None
    correct: bool
    votes: int = 0
    voters: int = 0
    tie: bool = False


class JudgeSummary(BaseModel):
    model: str
    asked: int
    turned_correct: int
    no_verdict: int
    usage: UsageTotals


class SampledVote(BaseModel):
    """The self-consistency arm on one problem: one model's k samples, put to a vote."""

    model: str
    samples: int
    answered: int = Field(description="samples whose call succeeded")
    vote: Vote
    capped: bool = False
    usage: UsageTotals = Field(default_factory=UsageTotals)
    errors: list[str] = Field(default_factory=list)


class AutoRun(BaseModel):
    """A problem's deliberation under depth auto: its final answer read, what it spent, and
    whether it stopped after stage 1 (the first answers agreed)."""

    workflow_id: str
    chairman: Reading | None = None
    stopped_after_stage1: bool = False
    usage: UsageTotals = Field(default_factory=UsageTotals)
    seconds: float | None = None
    error: str | None = None

    @property
    def answered(self) -> bool:
        return self.chairman is not None  # None: the run failed (error says why)


def wall_seconds(record: DeliberationRecord) -> float | None:
    if record.started_at is None or record.completed_at is None:
        return None
    return round((record.completed_at - record.started_at).total_seconds(), 3)


def score_auto(problem: Problem, record: DeliberationRecord, workflow_id: str) -> AutoRun:
    reply = record.stage3.response if record.stage3 else None
    reading, _ = read_reply(problem, reply, {})
    return AutoRun(
        workflow_id=workflow_id,
        chairman=reading,
        stopped_after_stage1=record.iteration.terminated_reason == TerminationReason.AGREEMENT,
        usage=record.usage.totals(),
        seconds=wall_seconds(record),
    )


class ProblemScore(BaseModel):
    id: str
    kind: str
    expected: str
    workflow_id: str
    status: Literal["completed", "failed"]
    source: Source
    error: str | None = None
    answers: dict[str, dict[str, Reading]] = Field(
        default_factory=dict
    )  # stage -> model -> reading
    majority: dict[str, Vote] = Field(default_factory=dict)  # stage -> vote
    chairman: Reading | None = None
    chairman_model: str | None = None
    terminated_reason: str | None = None
    rounds_completed: int = 0
    usage: UsageTotals = Field(default_factory=UsageTotals)
    call_errors: int = 0
    judge: JudgeSummary | None = None
    simulated: bool = False
    unknown: bool = Field(
        default=False,
        description="the simulator has no answer for this problem (it was not given its "
        "dataset): its simulated replies are not scored",
    )
    agreement: Level | None = Field(
        default=None,
        description="the final review's agreement level (record.agreement); None: not measured",
    )
    agreement_alpha: float | None = None
    dissents: int = 0
    # What each part of the run spent: the protocol's stages (stage1, stage2, stage2_5,
    # stage3) and each refinement round (its refinements and the review after them).
    usage_by_stage: dict[str, UsageTotals] = Field(default_factory=dict)
    round_tokens: list[int] = Field(default_factory=list)
    # The run's wall time, from its record (None: not told).
    seconds: float | None = None
    self_consistency: SampledVote | None = None
    # The same problem under depth auto (council.depth), with --arms all.
    auto: AutoRun | None = None


def replies_by_stage(
    record: DeliberationRecord, max_rounds: int
) -> dict[str, dict[str, str | None]]:
    """Each model's reply text after each stage (None: it never answered)."""
    current: dict[str, str | None] = {model: None for model in record.models}
    for result in record.stage1:
        current[result.model] = result.response
    timeline = {STAGE1: dict(current)}
    for number in range(1, max_rounds + 1):
        if number <= len(record.rounds):
            for refinement in record.rounds[number - 1].refinements:
                current[refinement.model] = refinement.refined_response
        timeline[f"round {number}"] = dict(current)
    return timeline


def same_answer(problem: Problem, a: Answer, b: Answer) -> bool:
    tolerance = problem.tolerance if problem.tolerance is not None else ABS_TOL
    return matches(a, b, REL_TOL, tolerance)


def majority_vote(problem: Problem, answers: Sequence[Answer | None]) -> Vote:
    """The most common answer; a tie goes to the group whose first answer came first."""
    groups: list[list[Answer]] = []
    for answer in answers:
        if answer is None:
            continue
        for group in groups:
            if same_answer(problem, group[0], answer):
                group.append(answer)
                break
        else:
            groups.append([answer])
    if not groups:
        return Vote(answer=None, correct=False)
    most = max(len(group) for group in groups)
    winner = next(group for group in groups if len(group) == most)
    return Vote(
        answer=winner[0].shown,
        correct=problem.is_correct(winner[0]),
        votes=most,
        voters=sum(len(group) for group in groups),
        tie=sum(1 for group in groups if len(group) == most) > 1,
    )


def read_reply(
    problem: Problem, reply: str | None, verdicts: Mapping[str, bool | None]
) -> tuple[Reading, Answer | None]:
    """A reply's reading, and the answer it counts as in a vote (the expected answer when
    the judge found it correct)."""
    answer = problem.read(reply)
    exact = problem.is_correct(answer)
    verdict = verdicts.get(reply) if reply is not None and not exact else None
    correct = exact or verdict is True
    reading = Reading(answer=answer.shown if answer else None, correct=correct, judged=verdict)
    return reading, (problem.expected if correct and not exact else answer)


def judge_candidates(problem: Problem, record: DeliberationRecord, max_rounds: int) -> list[str]:
    """The distinct replies of a text problem whose final answer does not match exactly."""
    if problem.kind != "text":
        return []
    replies = [r for stage in replies_by_stage(record, max_rounds).values() for r in stage.values()]
    if record.stage3 is not None:
        replies.append(record.stage3.response)
    wanted = []
    for reply in replies:
        if reply and reply not in wanted and not problem.is_correct(problem.read(reply)):
            wanted.append(reply)
    return wanted


def is_simulated(record: DeliberationRecord) -> bool:
    """The simulator marks every answer it writes (simulator.quality.SIMULATED_MARK)."""
    return any("[simulated]" in result.response for result in record.stage1)


def unknown_to_simulator(record: DeliberationRecord) -> bool:
    """Whether the simulator said it has no answer for the problem (simulator.problems)."""
    return any(NO_SIMULATED_ANSWER in result.response for result in record.stage1)


def score_problem(
    problem: Problem,
    record: DeliberationRecord,
    max_rounds: int,
    workflow_id: str,
    source: Source,
    verdicts: Mapping[str, bool | None] | None = None,
    judge: JudgeSummary | None = None,
) -> ProblemScore:
    verdicts = verdicts or {}
    score = ProblemScore(
        **_identity(problem, workflow_id, source),
        status="completed",
        terminated_reason=record.iteration.terminated_reason,
        rounds_completed=len(record.rounds),
        usage=record.usage.totals(),
        usage_by_stage=record.usage.by_stage,
        round_tokens=[r.tokens_used for r in record.rounds],
        call_errors=len(record.errors),
        judge=judge,
        simulated=is_simulated(record),
        unknown=unknown_to_simulator(record),
        seconds=wall_seconds(record),
    )
    if record.agreement is not None:
        score.agreement = record.agreement.level
        score.agreement_alpha = record.agreement.alpha
        score.dissents = len(record.agreement.dissent)
    for stage, replies in replies_by_stage(record, max_rounds).items():
        readings, votes = {}, []
        for model in record.models:
            readings[model], counted = read_reply(problem, replies.get(model), verdicts)
            votes.append(counted)
        score.answers[stage] = readings
        score.majority[stage] = majority_vote(problem, votes)
    if record.stage3 is not None:
        score.chairman, _ = read_reply(problem, record.stage3.response, verdicts)
        score.chairman_model = record.stage3.model
    else:
        score.chairman = Reading(answer=None, correct=False)
    return score


def score_samples(problem: Problem, result: SamplingResult) -> SampledVote:
    """The samples' majority vote (exact matching: the judge reads no sample)."""
    answers = [problem.read(reply) for reply in result.replies if reply is not None]
    return SampledVote(
        model=result.model,
        samples=result.samples,
        answered=sum(reply is not None for reply in result.replies),
        vote=majority_vote(problem, answers),
        capped=result.capped,
        usage=result.usage,
        errors=result.errors,
    )


def failed_problem(problem: Problem, workflow_id: str, source: Source, error: str) -> ProblemScore:
    return ProblemScore(**_identity(problem, workflow_id, source), status="failed", error=error)


def _identity(problem: Problem, workflow_id: str, source: Source) -> dict[str, object]:
    return {
        "id": problem.id,
        "kind": problem.kind,
        "expected": problem.answer,
        "workflow_id": workflow_id,
        "source": source,
    }
