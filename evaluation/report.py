"""The evaluation report: accuracy by stage and round, accuracy by agreement level, usage,
per-problem results; as report.json and as tables on a terminal.

Accuracies count the problems whose deliberation completed; a failed one is listed with
its error and counted in no accuracy, and so is one the simulator has no answer for
(unknown to it: a dataset it was not given), listed as not scored.

Accuracy by agreement level groups the problems by the level of their final review
(`record.agreement.level`: high, medium or low; "not measured" when no answer had two
ratings, or the record predates agreement), to see whether the council's agreement
predicts that its answer is right.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING

from pydantic import BaseModel, Field
from rich.console import Console, JustifyMethod
from rich.table import Table

from council.agreement import LEVELS
from council.models import UsageTotals
from evaluation.arms import (
    CHAIRMAN_ARM,
    Arm,
    AutoSummary,
    Conformity,
    PairedTest,
    SelfConsistencySummary,
    arms_and_tests,
    auto_summary,
    conformity,
)
from evaluation.plan import sampling_temperature
from evaluation.scoring import SOURCES, ProblemScore, stage_names
from grading.dataset import INSTRUCTION

if TYPE_CHECKING:
    from evaluation.plan import EvalPlan

SKIPPED = "not run: self-consistency makes calls of its own; eval --arms all runs it"
CHAIRMAN = "chairman"
MAJORITY = "majority vote"
NOT_MEASURED = "not measured"
# A problem the simulator has no answer for, as the report and the progress lines say it.
NOT_SCORED = "not scored: the simulator has no answer for this problem"
# The rows of accuracy by agreement level, from most to least agreement.
AGREEMENT_ROWS: tuple[str, ...] = (*reversed(LEVELS), NOT_MEASURED)


class Cell(BaseModel):
    correct: int = 0
    total: int = 0
    accuracy: float | None = None

    def count(self, correct: bool) -> None:
        self.total += 1
        self.correct += int(correct)
        self.accuracy = round(self.correct / self.total, 4)

    def __str__(self) -> str:
        if not self.total or self.accuracy is None:
            return "-"
        return f"{self.accuracy:.0%} ({self.correct}/{self.total})"


class Accuracy(BaseModel):
    models: dict[str, dict[str, Cell]] = Field(description="model -> stage -> its answers alone")
    majority_vote: dict[str, Cell] = Field(
        description="stage -> the majority of the models' answers"
    )
    chairman: Cell


class LevelAccuracy(BaseModel):
    """The problems whose final review had one agreement level, and how often they were right."""

    problems: int = 0
    chairman: Cell = Field(default_factory=Cell)
    majority_vote: Cell = Field(
        default_factory=Cell, description="the majority of the models' final answers"
    )
    answers: Cell = Field(
        default_factory=Cell, description="every model's final answer, each counted alone"
    )


def accuracy_by_agreement(scores: list[ProblemScore], final_stage: str) -> dict[str, LevelAccuracy]:
    """Level (high, medium, low, not measured) -> the completed problems at that level."""
    rows = {level: LevelAccuracy() for level in AGREEMENT_ROWS}
    for score in scores:
        if score.status != "completed":
            continue
        row = rows[score.agreement or NOT_MEASURED]
        row.problems += 1
        row.chairman.count(bool(score.chairman and score.chairman.correct))
        row.majority_vote.count(score.majority[final_stage].correct)
        for reading in score.answers[final_stage].values():
            row.answers.count(reading.correct)
    return rows


class UsageSummary(UsageTotals):
    """Every problem's usage together, per problem, and the judge's."""

    tokens_per_problem: float | None = None
    cost_per_problem_usd: float | None = None
    judge_tokens: int = 0
    judge_calls: int = 0


class DatasetInfo(BaseModel):
    name: str
    path: str
    sha256: str
    problems: int
    evaluated: int


class RunInfo(BaseModel):
    key: str
    workflow_ids: str
    task_queue: str
    models: list[str]
    chairman: str
    max_rounds: int
    quality_threshold: float
    token_budget: int
    stop_on_convergence: bool
    judge: str | None
    tag: str | None
    concurrency: int
    instruction: str
    started_at: datetime
    duration_seconds: float
    simulated: bool = Field(description="the answers came from the simulator, not real models")
    arms: str = Field(
        default="council", description="council: the council's own arms; all: also self-consistency"
    )


class EvalReport(BaseModel):
    dataset: DatasetInfo
    run: RunInfo
    stages: list[str]
    accuracy: Accuracy
    majority_ties: dict[str, int] = Field(description="stage -> votes decided by the tie rule")
    by_agreement: dict[str, LevelAccuracy] = Field(
        default_factory=dict,
        description="the final review's agreement level (high, medium, low, not measured) -> "
        "its problems and their accuracy",
    )
    completed: int
    failed: int
    unknown: int = Field(
        default=0,
        description="completed problems the simulator has no answer for: in no accuracy",
    )
    sources: dict[str, int] = Field(description="how each problem's deliberation was obtained")
    usage: UsageSummary
    arms: list[Arm] = Field(
        default_factory=list,
        description="every way of answering, on the completed problems: accuracy with its "
        "95 % interval, tokens and cost per problem and per correct answer",
    )
    paired: list[PairedTest] = Field(
        default_factory=list, description="the chairman against each arm: exact McNemar tests"
    )
    self_consistency: SelfConsistencySummary = Field(
        default_factory=lambda: SelfConsistencySummary(run=False, note=SKIPPED)
    )
    auto: AutoSummary = Field(
        default_factory=lambda: AutoSummary(run=False, note="not run: use --arms all")
    )
    conformity: Conformity = Field(default_factory=Conformity)
    problems: list[ProblemScore]

    @property
    def scored(self) -> int:
        """The problems the accuracies count: completed, and not unknown to the simulator."""
        return self.completed - self.unknown


def build_report(
    plan: EvalPlan,
    scores: list[ProblemScore],
    started_at: datetime,
    duration_seconds: float,
) -> EvalReport:
    template = plan.settings.template
    stages = stage_names(template.max_rounds)
    completed = [s for s in scores if s.status == "completed"]
    # What the accuracies count: a problem unknown to the simulator is neither right nor wrong.
    done = [s for s in completed if not s.unknown]
    models = {model: {stage: Cell() for stage in stages} for model in template.models}
    majority = {stage: Cell() for stage in stages}
    chairman = Cell()
    ties = dict.fromkeys(stages, 0)
    usage = UsageSummary()
    for score in done:
        for stage in stages:
            for model, reading in score.answers[stage].items():
                models.setdefault(model, {s: Cell() for s in stages})[stage].count(reading.correct)
            majority[stage].count(score.majority[stage].correct)
            ties[stage] += int(score.majority[stage].tie)
        chairman.count(bool(score.chairman and score.chairman.correct))
    for score in completed:  # what was spent, scored or not
        usage.merge(score.usage)
        if score.judge:
            usage.judge_tokens += score.judge.usage.total_tokens
            usage.judge_calls += score.judge.usage.calls
    if completed:
        usage.tokens_per_problem = round(usage.total_tokens / len(completed), 1)
        usage.cost_per_problem_usd = (
            round(usage.cost_usd / len(completed), 8) if usage.cost_usd is not None else None
        )
    sources = dict(Counter(score.source for score in scores))
    arms, paired = arms_and_tests(done, stages)
    return EvalReport(
        dataset=DatasetInfo(
            name=plan.dataset.name,
            path=str(plan.dataset.path),
            sha256=plan.dataset.sha256,
            problems=len(plan.dataset),
            evaluated=len(scores),
        ),
        run=RunInfo(
            key=plan.key,
            workflow_ids=plan.id_pattern,
            task_queue=plan.settings.task_queue,
            models=list(template.models),
            chairman=template.chairman or template.models[0],
            max_rounds=template.max_rounds,
            quality_threshold=template.quality_threshold,
            token_budget=template.token_budget,
            stop_on_convergence=template.stop_on_convergence,
            judge=plan.settings.judge,
            tag=plan.settings.tag,
            concurrency=plan.settings.concurrency,
            instruction=INSTRUCTION,
            started_at=started_at,
            duration_seconds=round(duration_seconds, 2),
            simulated=any(s.simulated for s in completed),
            arms=plan.settings.arms,
        ),
        stages=stages,
        accuracy=Accuracy(models=models, majority_vote=majority, chairman=chairman),
        majority_ties=ties,
        by_agreement=accuracy_by_agreement(done, stages[-1]),
        completed=len(completed),
        failed=len(scores) - len(completed),
        unknown=len(completed) - len(done),
        sources=sources,
        usage=usage,
        arms=arms,
        paired=paired,
        self_consistency=sampling_summary(plan, done),
        auto=auto_summary(done, stages, plan.settings.arms == "all", template.depth),
        conformity=conformity(done, stages[-1]),
        problems=scores,
    )


def sampling_summary(plan: EvalPlan, done: list[ProblemScore]) -> SelfConsistencySummary:
    settings = plan.settings
    if settings.arms != "all":
        return SelfConsistencySummary(run=False, note=SKIPPED)
    sampled = [s.self_consistency for s in done if s.self_consistency is not None]
    model = sampled[0].model if sampled else None
    temperature = sampling_temperature(settings.template)
    return SelfConsistencySummary(
        run=True,
        note=(
            f"{model or 'the strongest member'} (the most right at stage 1) sampled at "
            f"temperature {temperature:g}, k per problem chosen to spend about the council's "
            f"tokens on it (at most {settings.max_samples}), the samples' majority vote"
        ),
        model=model,
        temperature=temperature,
        max_samples=settings.max_samples,
        problems=sum(1 for v in sampled if v.answered),
        samples_per_problem=round(sum(v.samples for v in sampled) / len(sampled), 2)
        if sampled
        else None,
        capped=sum(v.capped for v in sampled),
        failed_samples=sum(len(v.errors) for v in sampled),
    )


# ---- on a terminal ------------------------------------------------------------------


def _mark(correct: bool) -> str:
    return "[green]✓[/green]" if correct else "[red]✗[/red]"


def _cost(value: float | None) -> str:
    return "-" if value is None else f"${value:.4f}"


def accuracy_table(report: EvalReport) -> Table:
    simulated = " · SIMULATED models" if report.run.simulated else ""
    table = Table(
        title=f"Accuracy on {report.dataset.name} ({report.scored} problems{simulated})",
        title_justify="left",
    )
    table.add_column("")
    for stage in report.stages:
        table.add_column(stage, justify="right")
    table.add_column(CHAIRMAN, justify="right")
    for model, cells in report.accuracy.models.items():
        table.add_row(model, *(str(cells[s]) for s in report.stages), "")
    table.add_row(
        MAJORITY,
        *(str(report.accuracy.majority_vote[s]) for s in report.stages),
        "",
        end_section=True,
    )
    table.add_row(
        f"{CHAIRMAN} (stage 3)", *("" for _ in report.stages), str(report.accuracy.chairman)
    )
    return table


def agreement_table(report: EvalReport) -> Table:
    last = report.stages[-1]
    table = Table(title="Accuracy by agreement level (the final review's)", title_justify="left")
    table.add_column("agreement")
    table.add_column("problems", justify="right")
    table.add_column(CHAIRMAN, justify="right")
    table.add_column(f"{MAJORITY} ({last})", justify="right")
    table.add_column(f"answers ({last})", justify="right")
    for level, row in report.by_agreement.items():
        counts = (row.problems, row.chairman, row.majority_vote, row.answers)
        table.add_row(level, *map(str, counts))
    return table


def problems_table(report: EvalReport) -> Table:
    last = report.stages[-1]
    table = Table(title="Per problem", title_justify="left")
    columns: tuple[tuple[str, JustifyMethod], ...] = (
        ("problem", "left"),
        ("expected", "left"),
        ("stage 1", "right"),
        ("vote", "center"),
        (last, "right"),
        ("chairman", "left"),
        ("rounds", "right"),
        ("ended", "left"),
        ("tokens", "right"),
        ("cost", "right"),
        ("run", "left"),
    )
    for name, justify in columns:
        table.add_column(name, justify=justify, overflow="fold")
    for score in report.problems:
        if score.status != "completed":
            failed = f"[red]failed: {score.error}[/red]"
            table.add_row(score.id, score.expected, *[""] * 3, failed, *[""] * 4, score.source)
            continue
        if score.unknown:
            answers: tuple[str, ...] = ("-", "", "-", f"[yellow]{NOT_SCORED}[/yellow]")
        else:
            first = score.answers[report.stages[0]].values()
            final = score.answers[last].values()
            chairman = score.chairman
            said = chairman.answer if chairman else "-"
            answers = (
                f"{sum(r.correct for r in first)}/{len(first)}",
                _mark(score.majority[report.stages[0]].correct),
                f"{sum(r.correct for r in final)}/{len(final)}",
                f"{_mark(bool(chairman and chairman.correct))} {said}",
            )
        table.add_row(
            score.id,
            score.expected,
            *answers,
            str(score.rounds_completed),
            score.terminated_reason or "-",
            f"{score.usage.total_tokens:,}",
            _cost(score.usage.cost_usd),
            score.source,
        )
    return table


def _interval(arm: Arm) -> str:
    if arm.accuracy is None or arm.ci95 is None:
        return "-"
    low, high = arm.ci95
    return f"{arm.accuracy:.0%} ({arm.correct}/{arm.total}) [{low:.0%}, {high:.0%}]"


def _number(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def arms_table(report: EvalReport) -> Table:
    """Every arm: accuracy with its 95 % interval, what it spent, and the chairman's paired
    test against it."""
    simulated = " · SIMULATED models" if report.run.simulated else ""
    table = Table(
        title=f"Arms: is the council worth its tokens? ({report.scored} problems{simulated})",
        title_justify="left",
        caption=f"self-consistency: {report.self_consistency.note}",
        caption_justify="left",
    )
    table.add_column("arm")
    for name in (
        "accuracy [95 % interval]",
        "tokens / problem",
        "cost / problem",
        "tokens / correct",
        "right only: chairman / arm",
        "McNemar p",
    ):
        table.add_column(name, justify="right")
    tests = {t.arm: t for t in report.paired}
    for arm in report.arms:
        test = tests.get(arm.name)
        table.add_row(
            arm.name,
            _interval(arm),
            _number(arm.tokens_per_problem),
            _cost(arm.cost_per_problem_usd),
            _number(arm.tokens_per_correct),
            f"{test.only_council} / {test.only_arm}" if test else "",
            f"{test.mcnemar:.3g}" if test else "",
        )
    return table


def auto_table(report: EvalReport) -> Table:
    """Depth auto against full depth: what stopping after stage 1 saved, and what it cost
    in accuracy (paired against full depth, the stage-1 vote and self-consistency)."""
    auto = report.auto
    simulated = " · SIMULATED models" if report.run.simulated else ""
    seconds = (
        f" · wall time per problem: full {auto.full_seconds_per_problem:g} s, auto "
        f"{auto.auto_seconds_per_problem:g} s"
        if auto.full_seconds_per_problem is not None and auto.auto_seconds_per_problem is not None
        else ""
    )
    saved = f"{auto.tokens_saved_share:.1%}" if auto.tokens_saved_share is not None else "-"
    table = Table(
        title=f"Depth auto against full depth ({auto.problems} problems{simulated})",
        title_justify="left",
        caption=(
            f"stopped after stage 1: {auto.stopped_after_stage1} of {auto.problems} "
            f"({auto.stopped_share or 0:.1%}) · tokens per problem: full "
            f"{_number(auto.full_tokens_per_problem)}, auto {_number(auto.auto_tokens_per_problem)}"
            f" (saved {saved}){seconds}"
        ),
        caption_justify="left",
    )
    for name in ("depth auto against", "problems", "right only: auto / arm", "McNemar p"):
        table.add_column(name, justify="left" if name == "depth auto against" else "right")
    for test in auto.paired:
        against = "full depth (chairman)" if test.arm == CHAIRMAN_ARM else test.arm
        table.add_row(
            against,
            str(test.problems),
            f"{test.only_council} / {test.only_arm}",
            f"{test.mcnemar:.3g}",
        )
    return table


def conformity_table(report: EvalReport) -> Table:
    """Did deliberation help or herd: each member's answers from stage 1 to the end."""
    flow = report.conformity
    last = report.stages[-1]
    table = Table(
        title=f"Conformity: stage 1 to {last}",
        title_justify="left",
        caption=(
            f"the chairman overruled a right majority on {flow.chairman_overruled_majority} "
            f"problem(s); a right minority at stage 1 was lost on {flow.correct_minority_lost}"
        ),
        caption_justify="left",
    )
    for name in ("member", "right → wrong", "wrong → right", "stayed right", "stayed wrong"):
        table.add_column(name, justify="left" if name == "member" else "right")
    for model, row in flow.members.items():
        counts = (row.correct_to_wrong, row.wrong_to_correct, row.stayed_right, row.stayed_wrong)
        table.add_row(model, *map(str, counts))
    return table


def print_report(report: EvalReport, out: Console, per_problem: bool = True) -> None:
    if per_problem:
        out.print(problems_table(report))
    out.print(accuracy_table(report))
    out.print(agreement_table(report))
    if report.arms:
        out.print(arms_table(report))
        if report.auto.run:
            out.print(auto_table(report))
        out.print(conformity_table(report))
    usage = report.usage
    ties = ", ".join(f"{stage} {n}" for stage, n in report.majority_ties.items() if n) or "none"
    out.print(
        f"tokens {usage.total_tokens:,} ({usage.tokens_per_problem or 0:,.0f} per problem) in "
        f"{usage.calls:,} calls · cost {_cost(usage.cost_usd)} "
        f"({_cost(usage.cost_per_problem_usd)} per problem)"
        + (
            f" · judge {usage.judge_tokens:,} tokens in {usage.judge_calls} calls"
            if usage.judge_calls
            else ""
        ),
        markup=False,
    )
    out.print(
        f"majority-vote ties (broken in favour of the answer given first in --model order): {ties}",
        markup=False,
    )
    sources = ", ".join(f"{n} {SOURCES.get(k, k)}" for k, n in report.sources.items())
    out.print(f"runs: {sources} · {report.run.duration_seconds:.1f} s", markup=False)
