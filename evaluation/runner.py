"""Every problem of a dataset as a deliberation on Temporal, a few at a time, resumable.

Each problem's workflow id comes from the plan (evaluation.plan), so a rerun of the same
command finds the runs of the first one. For each problem, in order:
a saved record with that workflow id in the raw outputs is read back; otherwise Temporal is
asked: a completed run's result is fetched (no model is called again), a running one is
awaited, a failed, terminated, cancelled or timed-out one is started again as a new run of
the same id (id reuse policy ALLOW_DUPLICATE_FAILED_ONLY), and a problem never seen is
started. With every arm asked for (`--arms all`), the strongest member is then sampled on
each completed problem (the SelfConsistency workflow, found again the same way).
Interrupting the harness leaves the deliberations running in Temporal; the next
run picks them up.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, TypeVar

from temporalio.client import Client, WorkflowFailureError
from temporalio.common import (
    TypedSearchAttributes,
    WorkflowIDConflictPolicy,
    WorkflowIDReusePolicy,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode
from temporalio.types import MethodAsyncSingleParam

from council.models import DeliberationRecord, DeliberationRequest
from evaluation.arms import strongest_member
from evaluation.outputs import Outputs, write_atomically
from evaluation.plan import EvalPlan, problem_request, sampling_request
from evaluation.plot import plot_accuracy, plot_agreement, plot_arms
from evaluation.report import EvalReport, build_report
from evaluation.scoring import (
    AutoRun,
    JudgeSummary,
    ProblemScore,
    SampledVote,
    Source,
    failed_problem,
    judge_candidates,
    score_auto,
    score_problem,
    score_samples,
)
from grading.dataset import Problem
from grading.judge import JudgeRequest, JudgeResult
from grading.sampling import SamplingResult
from runs.attributes import at_start
from runs.finding import QUESTION_MEMO, QUESTION_MEMO_CHARS
from runs.priority import Launch, Urgency
from runs.stuck import RunStuck, result_unless_stuck
from workflows.deliberation import Deliberation
from workflows.judge import JudgeAnswers
from workflows.sampling import SelfConsistency

# An evaluation's runs (and their judges) are batch work, under their own tenant.
EVALUATION = Launch(Urgency.BATCH, "eval")

ArgT = TypeVar("ArgT")
ResultT = TypeVar("ResultT")
# Told of each problem done: its score, how many are done, of how many.
Progress = Callable[[ProblemScore, int, int], None]


def _failure(error: BaseException) -> str:
    cause = getattr(error, "cause", None) or error
    message = getattr(cause, "message", None) or str(cause)
    return message.splitlines()[0] if message else type(cause).__name__


class Evaluation:
    def __init__(
        self,
        client: Client,
        eval_plan: EvalPlan,
        on_problem: Progress | None = None,
        on_sampled: Progress | None = None,
        on_auto: Progress | None = None,
    ) -> None:
        self.client = client
        self.plan = eval_plan
        self.settings = eval_plan.settings
        self.outputs = Outputs(self.settings.out_dir)
        self.on_problem = on_problem
        self.on_sampled = on_sampled
        self.on_auto = on_auto
        self._done = 0

    async def run(self) -> EvalReport:
        started_at = datetime.now(UTC)
        clock = time.monotonic()
        slots = asyncio.Semaphore(self.settings.concurrency)

        async def one(problem: Problem) -> ProblemScore:
            async with slots:
                score = await self.solve(problem)
            self._done += 1
            if self.on_problem:
                self.on_problem(score, self._done, len(self.plan.problems))
            return score

        scores = await asyncio.gather(*(one(problem) for problem in self.plan.problems))
        if self.settings.arms == "all":
            await self.sample(list(scores), slots)
            if self.settings.template.depth == "full":
                await self.deepen(list(scores), slots)
        report = build_report(
            self.plan,
            list(scores),
            started_at=started_at,
            duration_seconds=time.monotonic() - clock,
        )
        write_atomically(self.outputs.report_path, report.model_dump_json(indent=2))
        plot_accuracy(report, self.outputs.plot_path)
        plot_agreement(report, self.outputs.agreement_plot_path)
        plot_arms(report, self.outputs.arms_plot_path)
        return report

    # ---- one problem ------------------------------------------------------------------

    async def solve(self, problem: Problem) -> ProblemScore:
        wid = self.plan.workflow_id(problem)
        record = self.outputs.saved_record(problem.id, wid)
        source: Source = "saved"
        if record is None:
            request = problem_request(self.settings.template, problem)
            try:
                ran = await self._run_workflow(
                    Deliberation.run,
                    request.model_dump(mode="json"),
                    wid,
                    DeliberationRecord,
                    summary=f"eval {self.plan.dataset.name} · {problem.id}: {problem.question}"[
                        :200
                    ],
                    memo={
                        **self._memo(problem),
                        QUESTION_MEMO: problem.question[:QUESTION_MEMO_CHARS],
                    },
                    search=at_start(wid),
                )
            except _Failed as failed:
                return failed_problem(problem, wid, failed.source, failed.message)
            except RPCError as err:  # the run itself may be fine: a rerun finds it
                return failed_problem(problem, wid, "started", f"Temporal: {err.message}")
            record, source = ran
            self.outputs.save_record(problem.id, record)
        max_rounds = self.settings.template.max_rounds
        verdicts, summary = await self._judge(problem, record, wid, max_rounds)
        score = score_problem(problem, record, max_rounds, wid, source, verdicts, summary)
        self.outputs.save_refined(problem, record, score)
        return score

    async def _judge(
        self, problem: Problem, record: DeliberationRecord, wid: str, max_rounds: int
    ) -> tuple[dict[str, bool | None], JudgeSummary | None]:
        model = self.settings.judge
        candidates = judge_candidates(problem, record, max_rounds) if model else []
        if not model or not candidates:
            return {}, None
        digest = hashlib.sha256(json.dumps([model, candidates]).encode("utf-8")).hexdigest()[:8]
        judge_id = f"{wid}-judge-{digest}"
        result = self.outputs.saved_judgement(problem.id, judge_id)
        if result is None:
            request = JudgeRequest(
                model=model,
                question=problem.question,
                reference=problem.answer,
                candidates=candidates,
                policy=self.settings.template.policy,
            )
            try:
                judged, _ = await self._run_workflow(
                    JudgeAnswers.run,
                    request,
                    judge_id,
                    JudgeResult,
                    summary=f"judge {model} · eval {self.plan.dataset.name} · {problem.id}",
                    memo=self._memo(problem),
                )
            except _Failed:
                result = JudgeResult(
                    model=model, verdicts=[None] * len(candidates), replies=[""] * len(candidates)
                )
            else:
                result = judged
                self.outputs.save_judgement(problem.id, judge_id, candidates, result)
        verdicts = dict(zip(candidates, result.verdicts, strict=False))
        summary = JudgeSummary(
            model=model,
            asked=len(candidates),
            turned_correct=sum(1 for v in result.verdicts if v is True),
            no_verdict=sum(1 for v in result.verdicts if v is None),
            usage=result.usage.totals(),
        )
        return verdicts, summary

    def _memo(self, problem: Problem) -> dict[str, Any]:
        """Which evaluation a problem's runs (its deliberation, judge and samples) belong to."""
        return {"dataset": self.plan.dataset.name, "problem": problem.id, "run_key": self.plan.key}

    # ---- the self-consistency arm ---------------------------------------------------------

    async def sample(self, scores: list[ProblemScore], slots: asyncio.Semaphore) -> None:
        """The strongest member sampled on every completed problem (grading.sampling)."""
        model = strongest_member(scores, self.settings.template.models)
        if model is None:
            return
        problems = {p.id: p for p in self.plan.problems}

        async def one(score: ProblemScore) -> None:
            score.self_consistency = await self._sample(problems[score.id], score, model)

        await self._each_completed(scores, slots, one, self.on_sampled)

    async def _sample(self, problem: Problem, score: ProblemScore, model: str) -> SampledVote:
        request = sampling_request(
            self.settings.template,
            problem,
            model,
            score.usage.total_tokens,
            self.settings.max_samples,
        )
        blob = request.model_dump_json(include={"call", "token_target", "max_samples"})
        digest = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:8]
        try:
            result, _ = await self._run_workflow(
                SelfConsistency.run,
                request,
                f"{score.workflow_id}-sc-{digest}",
                SamplingResult,
                summary=f"self-consistency {model} · eval {self.plan.dataset.name} · {problem.id}",
                memo=self._memo(problem),
            )
        except (_Failed, RPCError) as failed:
            why = failed.message if isinstance(failed, _Failed) else f"Temporal: {failed.message}"
            result = SamplingResult(model=model, samples=0, replies=[], errors=[why])
        return score_samples(problem, result)

    # ---- the depth auto arm -------------------------------------------------------------

    async def deepen(self, scores: list[ProblemScore], slots: asyncio.Semaphore) -> None:
        """Each completed problem again under depth auto (council.depth), run apart."""
        problems = {p.id: p for p in self.plan.problems}
        template = self.settings.template.model_copy(update={"depth": "auto"})

        async def one(score: ProblemScore) -> None:
            score.auto = await self._auto(problems[score.id], score, template)

        await self._each_completed(scores, slots, one, self.on_auto)

    @staticmethod
    async def _each_completed(
        scores: list[ProblemScore],
        slots: asyncio.Semaphore,
        work: Callable[[ProblemScore], Awaitable[None]],
        done_one: Progress | None,
    ) -> None:
        """`work` on every completed problem, within the slots, saying each one done."""
        completed = [s for s in scores if s.status == "completed"]
        done = 0

        async def one(score: ProblemScore) -> None:
            nonlocal done
            async with slots:
                await work(score)
            done += 1
            if done_one:
                done_one(score, done, len(completed))

        await asyncio.gather(*(one(s) for s in completed))

    async def _auto(
        self, problem: Problem, score: ProblemScore, template: DeliberationRequest
    ) -> AutoRun:
        wid = f"{score.workflow_id}-auto"
        request = problem_request(template, problem)
        try:
            record, _ = await self._run_workflow(
                Deliberation.run,
                request.model_dump(mode="json"),
                wid,
                DeliberationRecord,
                summary=f"depth auto · eval {self.plan.dataset.name} · {problem.id}",
                memo=self._memo(problem),
                search=at_start(wid),
            )
        except (_Failed, RPCError) as failed:
            why = failed.message if isinstance(failed, _Failed) else f"Temporal: {failed.message}"
            return AutoRun(workflow_id=wid, error=why)
        return score_auto(problem, record, wid)

    # ---- starting, finding and awaiting workflows -------------------------------------

    async def _status(self, wid: str) -> str | None:
        try:
            description = await self.client.get_workflow_handle(wid).describe()
        except RPCError as err:
            if err.status == RPCStatusCode.NOT_FOUND:
                return None
            raise
        return description.status.name if description.status else None

    async def _run_workflow(
        self,
        workflow: MethodAsyncSingleParam[Any, ArgT, ResultT],
        arg: ArgT,
        wid: str,
        result_type: type[ResultT],
        summary: str,
        memo: dict[str, Any],
        search: TypedSearchAttributes = TypedSearchAttributes.empty,
    ) -> tuple[ResultT, Source]:
        status = await self._status(wid)
        source: Source
        if status in ("COMPLETED", "RUNNING"):
            source = "reused" if status == "COMPLETED" else "awaited"
            handle = self.client.get_workflow_handle(wid, result_type=result_type)
        else:
            source = "started" if status is None else "restarted"
            try:
                handle = await self.client.start_workflow(
                    workflow,
                    arg,
                    id=wid,
                    task_queue=self.settings.task_queue,
                    id_reuse_policy=WorkflowIDReusePolicy.ALLOW_DUPLICATE_FAILED_ONLY,
                    id_conflict_policy=WorkflowIDConflictPolicy.USE_EXISTING,
                    static_summary=summary,
                    memo=memo,
                    search_attributes=search,
                    # Batch work: a person's run goes ahead of it (runs.priority).
                    priority=EVALUATION.priority(),
                )
            except WorkflowAlreadyStartedError:  # another harness completed it meanwhile
                source = "reused"
                handle = self.client.get_workflow_handle(wid, result_type=result_type)
        try:
            return await result_unless_stuck(handle), source
        except WorkflowFailureError as err:
            raise _Failed(source, _failure(err)) from None
        except RunStuck as problem:  # it would never end: said, and the others go on
            raise _Failed(source, f"stuck, left running: {problem} (stop {wid} ends it)") from None


class _Failed(Exception):
    def __init__(self, source: Source, message: str) -> None:
        super().__init__(message)
        self.source = source
        self.message = message
