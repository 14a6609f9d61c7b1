"""The arms of an evaluation: the ways of answering a problem that a council is measured
against, on the same problems, with what each costs; the council's paired tests against
each; and conformity, whether deliberation helped or herded.

The arms, all from the council's own runs but one:

- "<model> alone": a member's stage-1 answer (its tokens: the stage-1 tokens shared
  evenly among the members that answered);
- "stage-1 vote": the majority of the members' independent answers;
- "council after round N": the majority of the members' answers after N refinement rounds
  (its tokens: everything before the chairman, less the later rounds);
- "chairman": the council's final answer, and the arm every other one is tested against;
- "council, depth auto": the same council under depth auto (council.depth), run apart on
  each problem: it goes straight to the final answer when the first answers agree. Only
  with `--arms all`: it makes its own calls. Besides the chairman's test against it, it
  is tested against the stage-1 vote and self-consistency (auto_tests), and summed up in
  AutoSummary (the share that stopped after stage 1, the tokens and time it saved);
- "self-consistency (<model>)": the strongest member (best stage-1 accuracy) asked k times
  at a temperature, its answers put to a vote, k chosen to spend about the council's tokens
  on the same problem (grading.sampling). Only with `--arms all`: it makes its own calls.

An arm's cost is the providers' reported cost for the same share of the run (prorated by
tokens for the round arms, which the record does not split by cost); None where no call
reported one. The paired test is the exact McNemar test on the problems both the chairman
and the arm answered (evaluation.statistics).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, Field

from council.calls import Stage
from council.models import UsageTotals
from evaluation.scoring import STAGE1, ProblemScore
from evaluation.statistics import paired, wilson_interval

CHAIRMAN_ARM = "chairman"
VOTE_ARM = "stage-1 vote"
AUTO_ARM = "council, depth auto"
ArmKind = Literal["member", "vote", "round", "chairman", "self-consistency", "auto"]


def member_arm(model: str) -> str:
    return f"{model} alone"


def round_arm(number: int) -> str:
    return f"council after round {number}"


def sampling_arm(model: str) -> str:
    return f"self-consistency ({model})"


class Arm(BaseModel):
    name: str
    kind: ArmKind
    correct: int = 0
    total: int = 0
    accuracy: float | None = None
    ci95: tuple[float, float] | None = Field(
        default=None, description="Wilson's 95 % interval of the accuracy"
    )
    tokens_per_problem: float | None = None
    cost_per_problem_usd: float | None = None
    tokens_per_correct: float | None = Field(
        default=None, description="all its tokens over its correct answers"
    )
    cost_per_correct_usd: float | None = None


class PairedTest(BaseModel):
    """The chairman against one arm on the problems both answered."""

    arm: str
    problems: int
    both_right: int
    only_council: int = Field(description="the chairman right, the arm wrong")
    only_arm: int = Field(description="the arm right, the chairman wrong")
    both_wrong: int
    mcnemar: float = Field(description="the exact McNemar test's two-sided p-value")


class AutoSummary(BaseModel):
    """The council under depth auto against the council under full depth, on the problems
    both answered."""

    run: bool
    note: str
    problems: int = 0
    stopped_after_stage1: int = 0
    stopped_share: float | None = None
    full_tokens_per_problem: float | None = None
    auto_tokens_per_problem: float | None = None
    tokens_saved_share: float | None = Field(
        default=None, description="1 - auto's tokens over full's, on the same problems"
    )
    full_seconds_per_problem: float | None = None
    auto_seconds_per_problem: float | None = None
    failed: int = 0
    paired: list[PairedTest] = Field(
        default_factory=list,
        description="depth auto against full depth (the chairman), the stage-1 vote and "
        "self-consistency: exact McNemar tests, 'only_council' counting auto's wins",
    )


class SelfConsistencySummary(BaseModel):
    run: bool
    note: str
    model: str | None = None
    temperature: float | None = None
    max_samples: int | None = None
    problems: int = 0
    samples_per_problem: float | None = None
    capped: int = Field(default=0, description="problems whose token target wanted more samples")
    failed_samples: int = 0


class MemberConformity(BaseModel):
    """A member's answers from stage 1 to the end of the rounds."""

    correct_to_wrong: int = 0
    wrong_to_correct: int = 0
    stayed_right: int = 0
    stayed_wrong: int = 0


class ProblemConformity(BaseModel):
    id: str
    correct_to_wrong: list[str] = Field(default_factory=list)
    wrong_to_correct: list[str] = Field(default_factory=list)
    chairman_overruled_majority: bool = False
    correct_minority_lost: bool = False


class Conformity(BaseModel):
    """Whether deliberation helped or herded: members' answers that went from right to
    wrong, and from wrong to right, between stage 1 and the last round; the chairman
    overruling a right majority of the final answers; and a right minority at stage 1
    (the vote wrong, someone right) that neither the final vote nor the chairman kept."""

    members: dict[str, MemberConformity] = Field(default_factory=dict)
    correct_to_wrong: int = 0
    wrong_to_correct: int = 0
    chairman_overruled_majority: int = 0
    correct_minority_lost: int = 0
    problems: list[ProblemConformity] = Field(
        default_factory=list, description="the problems where any of these happened"
    )


# ---- one arm's outcome on one problem --------------------------------------------------


class Outcome(BaseModel):
    kind: ArmKind
    correct: bool
    tokens: int
    cost_usd: float | None

    @classmethod
    def spent(cls, kind: ArmKind, correct: bool, usage: UsageTotals) -> Outcome:
        """An arm's outcome that cost what `usage` counts."""
        return cls(kind=kind, correct=correct, tokens=usage.total_tokens, cost_usd=usage.cost_usd)


def _stage(score: ProblemScore, stage: Stage) -> UsageTotals:
    return score.usage_by_stage.get(stage.value, UsageTotals())


def _share(total: UsageTotals, part: int) -> tuple[int, float | None]:
    """`part` of the run's tokens and that share of its cost."""
    if total.cost_usd is None or not total.total_tokens:
        return part, None
    return part, total.cost_usd * part / total.total_tokens


def outcomes(score: ProblemScore, stages: Sequence[str]) -> dict[str, Outcome]:
    """Arm name -> its outcome on this (completed) problem."""
    found: dict[str, Outcome] = {}
    first = _stage(score, Stage.ANSWER)
    answered = max(1, sum(r.answer is not None for r in score.answers[STAGE1].values()))
    for model, reading in score.answers[STAGE1].items():
        cost = first.cost_usd / answered if first.cost_usd is not None else None
        found[member_arm(model)] = Outcome(
            kind="member",
            correct=reading.correct,
            tokens=first.total_tokens // answered,
            cost_usd=cost,
        )
    found[VOTE_ARM] = Outcome.spent("vote", score.majority[STAGE1].correct, first)
    before_chairman = score.usage.total_tokens - _stage(score, Stage.SYNTHESIS).total_tokens
    for number, stage in enumerate(stages[1:], start=1):
        tokens, cost = _share(score.usage, before_chairman - sum(score.round_tokens[number:]))
        found[round_arm(number)] = Outcome(
            kind="round", correct=score.majority[stage].correct, tokens=tokens, cost_usd=cost
        )
    chairman = bool(score.chairman and score.chairman.correct)
    found[CHAIRMAN_ARM] = Outcome.spent("chairman", chairman, score.usage)
    auto = score.auto
    if auto is not None and auto.answered:
        right = bool(auto.chairman and auto.chairman.correct)
        found[AUTO_ARM] = Outcome.spent("auto", right, auto.usage)
    sampled = score.self_consistency
    if sampled is not None and sampled.answered:
        vote = sampled.vote.correct
        found[sampling_arm(sampled.model)] = Outcome.spent("self-consistency", vote, sampled.usage)
    return found


# ---- the report's sections -------------------------------------------------------------


def _arm(name: str, results: Sequence[Outcome]) -> Arm:
    correct = sum(o.correct for o in results)
    tokens = sum(o.tokens for o in results)
    costs = [o.cost_usd for o in results if o.cost_usd is not None]
    cost = sum(costs) if costs else None
    n = len(results)
    return Arm(
        name=name,
        kind=results[0].kind,
        correct=correct,
        total=n,
        accuracy=round(correct / n, 4) if n else None,
        ci95=_rounded(wilson_interval(correct, n)),
        tokens_per_problem=round(tokens / n, 1) if n else None,
        cost_per_problem_usd=round(cost / n, 8) if cost is not None and n else None,
        tokens_per_correct=round(tokens / correct, 1) if correct else None,
        cost_per_correct_usd=round(cost / correct, 8) if cost is not None and correct else None,
    )


def _rounded(interval: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if interval is None else (round(interval[0], 4), round(interval[1], 4))


def arms_and_tests(
    scores: Sequence[ProblemScore], stages: Sequence[str]
) -> tuple[list[Arm], list[PairedTest]]:
    """Every arm over the completed problems, and the chairman's paired test against each."""
    per_problem = [outcomes(s, stages) for s in scores if s.status == "completed"]
    names: list[str] = []
    for found in per_problem:
        names += [name for name in found if name not in names]
    arms = [_arm(name, [f[name] for f in per_problem if name in f]) for name in names]
    tests = [_test(per_problem, CHAIRMAN_ARM, name) for name in names if name != CHAIRMAN_ARM]
    return arms, tests


def _test(per_problem: Sequence[dict[str, Outcome]], first: str, arm: str) -> PairedTest:
    """`first` against `arm` on the problems both answered."""
    both = [f for f in per_problem if first in f and arm in f]
    table = paired([f[first].correct for f in both], [f[arm].correct for f in both])
    return PairedTest(
        arm=arm,
        problems=table.total,
        both_right=table.both_right,
        only_council=table.only_first,
        only_arm=table.only_second,
        both_wrong=table.both_wrong,
        mcnemar=table.mcnemar,
    )


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


def auto_summary(
    scores: Sequence[ProblemScore], stages: Sequence[str], ran: bool, depth: str = "full"
) -> AutoSummary:
    """Depth auto against full depth on the problems both completed: the share that stopped
    after stage 1, tokens and wall time per problem, and the paired tests of auto against
    full, the stage-1 vote and self-consistency."""
    if depth == "auto":
        return AutoSummary(run=False, note="not run: the council's own runs are depth auto")
    if not ran:
        return AutoSummary(run=False, note="not run: it makes its own calls (use --arms all)")
    done = [s for s in scores if s.status == "completed" and s.auto is not None]
    both = [s for s in done if s.auto is not None and s.auto.answered]
    if not both:
        return AutoSummary(
            run=True, note="no problem was answered under depth auto", failed=len(done)
        )
    runs = [s.auto for s in both if s.auto is not None]
    full_tokens = sum(s.usage.total_tokens for s in both)
    auto_tokens = sum(r.usage.total_tokens for r in runs)
    stopped = sum(r.stopped_after_stage1 for r in runs)
    per_problem = [outcomes(s, stages) for s in both]
    names = [CHAIRMAN_ARM, VOTE_ARM] + sorted(
        {name for f in per_problem for name, o in f.items() if o.kind == "self-consistency"}
    )
    return AutoSummary(
        run=True,
        note="the same council under depth auto, run apart on each problem",
        problems=len(both),
        stopped_after_stage1=stopped,
        stopped_share=round(stopped / len(both), 4),
        full_tokens_per_problem=round(full_tokens / len(both), 1),
        auto_tokens_per_problem=round(auto_tokens / len(both), 1),
        tokens_saved_share=round(1 - auto_tokens / full_tokens, 4) if full_tokens else None,
        full_seconds_per_problem=_mean([s.seconds for s in both if s.seconds is not None]),
        auto_seconds_per_problem=_mean([r.seconds for r in runs if r.seconds is not None]),
        failed=len(done) - len(both),
        paired=[_test(per_problem, AUTO_ARM, name) for name in names],
    )


def conformity(scores: Sequence[ProblemScore], final_stage: str) -> Conformity:
    result = Conformity()
    for score in scores:
        if score.status != "completed":
            continue
        entry = ProblemConformity(id=score.id)
        final = score.answers[final_stage]
        for model, first in score.answers[STAGE1].items():
            member = result.members.setdefault(model, MemberConformity())
            last = final.get(model, first)
            if first.answer is None or last.answer is None:
                continue
            if first.correct and not last.correct:
                member.correct_to_wrong += 1
                entry.correct_to_wrong.append(model)
            elif last.correct and not first.correct:
                member.wrong_to_correct += 1
                entry.wrong_to_correct.append(model)
            elif first.correct:
                member.stayed_right += 1
            else:
                member.stayed_wrong += 1
        chairman_right = bool(score.chairman and score.chairman.correct)
        entry.chairman_overruled_majority = (
            score.majority[final_stage].correct and not chairman_right
        )
        minority_right = not score.majority[STAGE1].correct and any(
            r.correct for r in score.answers[STAGE1].values()
        )
        entry.correct_minority_lost = (
            minority_right and not score.majority[final_stage].correct and not chairman_right
        )
        result.correct_to_wrong += len(entry.correct_to_wrong)
        result.wrong_to_correct += len(entry.wrong_to_correct)
        result.chairman_overruled_majority += int(entry.chairman_overruled_majority)
        result.correct_minority_lost += int(entry.correct_minority_lost)
        if _eventful(entry):
            result.problems.append(entry)
    return result


def _eventful(entry: ProblemConformity) -> bool:
    return bool(
        entry.correct_to_wrong
        or entry.wrong_to_correct
        or entry.chairman_overruled_majority
        or entry.correct_minority_lost
    )


def strongest_member(scores: Sequence[ProblemScore], models: Sequence[str]) -> str | None:
    """The member with the most right stage-1 answers (a tie: the first in the council's
    order); None before any problem completed."""
    done = [s for s in scores if s.status == "completed"]
    if not done or not models:
        return None
    right = {
        m: sum(s.answers[STAGE1][m].correct for s in done if m in s.answers[STAGE1]) for m in models
    }
    return max(models, key=lambda m: right[m])
