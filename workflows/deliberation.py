"""The deliberation: answer, review, refine and re-review until a termination rule holds,
then synthesize. Every model call is one activity (workflows.fan_out); what the run shows
while it runs is described by workflows.live; all state lives in workflow history. A run is
pinned to the build it started on (app.temporal.deployment): a protocol change is a new build.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from temporalio import workflow
from temporalio.common import VersioningBehavior
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from council import prompts
    from council.aggregate import aggregate_rankings, review_agreement, settled_leader
    from council.agreement import Agreement
    from council.calls import ModelReply, Stage
    from council.critiques import critiques_from_parsed
    from council.echo import ECHO, ECHO_PROBLEM
    from council.iteration import (
        CritiqueItem,
        IterationState,
        TerminationReason,
        charge_tokens,
        complete_round,
        end_if_all_failed,
        initialize_iteration_state,
        note_review,
        refine_until_done,
        start_new_round,
        terminate_iteration,
    )
    from council.labels import assign_labels, labels_shown_to, presentation_orders
    from council.limits import MAX_FEEDBACK_CHARS
    from council.models import DeliberationRecord, DeliberationRequest
    from council.progress import EventKind, Progress
    from council.record import fit_record, saved_by_depth
    from council.refinement import (
        plan_refinements,
        record_refinements,
        refinement_result,
    )
    from council.report import DisagreementReport, facts, merged, split_lines
    from council.reviews import ParsedReview
    from council.stages import Stage2Result
    from council.steering import (
        HumanCritique,
        RoundsChange,
        SteeringAction,
        bounded_reason,
        critique_problem,
        expired_problem,
        hand_over,
        max_rounds_problem,
    )
    from council.structured import (
        refinement_schema,
        review_schema,
    )
    from council.thread import summarize_context
    from council.validation import InvalidRequest, validate_request
    from grading.answers import stated_shown

from workflows import search_attributes
from workflows.calls import SANDBOXED
from workflows.fan_out import Enough, FanOut
from workflows.final_answer import best_answer_stands, candidates, synthesize
from workflows.gate import agreement_gate
from workflows.live import Live, ReviewRound, answer


@workflow.defn(versioning_behavior=VersioningBehavior.PINNED, sandboxed=SANDBOXED)
class Deliberation:
    @workflow.init
    def __init__(self, request: dict[str, Any]) -> None:
        try:
            self.request: DeliberationRequest = validate_request(request)
        except InvalidRequest as err:
            raise ApplicationError(str(err), type="InvalidRequest", non_retryable=True) from None
        self.state: IterationState = initialize_iteration_state(self.request.iteration_config())
        self.context = self.request.context()  # a follow-up's earlier turns
        self.record = DeliberationRecord(
            id=workflow.info().workflow_id,
            query=self.request.question,
            models=self.request.models,
            chairman=self.request.chairman or self.request.models[0],
            started_at=workflow.now(),
            follow_up_of=self.request.follow_up_of,
            thread_id=self.request.thread_id,
            context=summarize_context(self.context, self.request.context_tokens)
            if self.request.history
            else None,
            attachments=[attachment.entry() for attachment in self.request.attachments],
            depth=self.request.depth,
        )
        self.live = Live(search_attributes.place_of(workflow.info().typed_search_attributes))
        self.calls = FanOut(
            self.request,
            self.record,
            self.live.event,
            lambda: self.stopping,
            self._stage_started,
            self.request.stragglers,
        )
        self.stop_reason: str | None = None
        self.answers: dict[str, str] = {}  # model -> its current answer
        self.reviews: dict[int, ReviewRound] = {}  # review round -> its reviews
        # Label -> the critiques of the latest review, parsed once as its reviews arrive.
        self.critiques: dict[str, list[CritiqueItem]] = {}
        self.human: dict[str, list[HumanCritique]] = {}  # the user's, for the next round

    # ---- the protocol -------------------------------------------------------------

    @workflow.run
    async def run(self, request: dict[str, Any]) -> DeliberationRecord:
        await self._stage1_collect_answers()
        if not await self._agreed_after_stage1():
            await self._opening_review()
            await refine_until_done(self.state, self._refinement_round)
        self.live.event(EventKind.TERMINATED, message=self.state.termination_reason)
        await self._stage3_synthesize()
        record = self._finish()
        # Followers waiting in wait_progress get the last events before the run closes.
        await workflow.wait_condition(workflow.all_handlers_finished)
        return record

    async def _stage1_collect_answers(self) -> None:
        ask = prompts.answer_prompt(
            self.request.question,
            self.request.response_byte_cap,
            self.context,
            self.request.instructions,
        )
        replies = await self.calls.stage(Stage.ANSWER, 0, dict.fromkeys(self.request.models, ask))
        self.record.stage1 = [answer(m, replies[m]) for m in self.request.models if m in replies]
        self.answers = {result.model: result.response for result in self.record.stage1}
        if len(self.answers) < 2 and not self.stopping:
            failures = "; ".join(e.describe() for e in self.record.errors)
            raise self._failure(
                f"fewer than two models answered ({len(self.answers)} of "
                f"{len(self.request.models)}): {failures or 'no answers'}",
                "CouncilTooSmall",
            )
        self.record.label_to_model = assign_labels(list(self.answers), workflow.random())

    async def _agreed_after_stage1(self) -> bool:
        """Depth auto: whether the first answers agree (council.depth), when the run goes
        straight to the synthesis; the gate's verdict and evidence go in the record."""
        if self.request.depth != "auto" or self.stopping or len(self.answers) < 2:
            return False
        gate = await agreement_gate(
            self.calls,
            self.live.event,
            self.request,
            self.answers,
            self.record.label_to_model,
            self.record.chairman,
        )
        self.record.gate = gate
        if not gate.agreed or self.stopping:
            return False
        terminate_iteration(self.state, TerminationReason.AGREEMENT)
        return True

    async def _opening_review(self) -> None:
        """Stage 2 round 1: every member reviews the others' first answers."""
        if not self.stopping:
            self.live.event(
                EventKind.ROUND_START,
                stage=Stage.REVIEW,
                round=0,
                message="review round 1: every member reviews the others' answers",
                data={"review_round": 1},
            )
        await self._stage2_collect_reviews(round_number=0)
        charge_tokens(self.state, self.record.usage.total_tokens)
        self.state.cost_usd = self.record.usage.cost_usd
        if self.request.max_cost_usd is not None and self.record.usage.cost_usd is None:
            self.live.event(
                EventKind.NOTICE,
                message="the provider reports no cost: the cost budget cannot end the loop",
            )
        if not self.stopping:
            self.live.round_complete(0, "review round 1 complete", self.state, self.reviews.get(0))

    async def _stage2_collect_reviews(self, round_number: int) -> None:
        labels = self.record.label_to_model
        # Each reviewer sees the others' answers in its own order (position bias control).
        enough = len(self.answers) >= 2
        self.live.orders = presentation_orders(labels, workflow.random()) if enough else {}
        gate = self.record.gate
        focus = (
            gate.focus({model: label for label, model in labels.items()})
            if gate and not round_number
            else ()
        )
        calls = prompts.review_prompts(
            self.request.question,
            self.answers,
            labels,
            self.live.orders,
            self.request.response_byte_cap,
            self.request.criteria,
            instructions=self.request.instructions,
            focus=focus,
        )
        formats = {r: review_schema(labels_shown_to(r, labels)) for r in calls}
        parsed: dict[str, tuple[Stage2Result, ParsedReview]] = {}

        def read_once(reviewer: str, reply: ModelReply) -> tuple[Stage2Result, ParsedReview]:
            """A review read once: as it arrives (depth auto asks) or once the stage ends."""
            if reviewer not in parsed:
                parsed[reviewer] = self.live.read_review(reviewer, reply, labels)
            return parsed[reviewer]

        replies = await self.calls.stage(
            Stage.REVIEW, round_number, calls, formats, self._ranking_settled(labels, read_once)
        )
        read = [read_once(r, replies[r]) for r in self.answers if r in replies]
        reviews = [review for review, _ in read]
        agreement = None
        if reviews:
            self.critiques = critiques_from_parsed((r.model, parsed) for r, parsed in read)
            self.record.aggregate_rankings = aggregate_rankings(reviews, labels)
            agreement = review_agreement([(r, parsed.critiques) for r, parsed in read], labels)
        if calls:
            self.reviews[round_number] = ReviewRound(reviews, agreement)
        pending = plan_refinements(self.answers, self.critiques, labels)
        note_review(self.state, self.record.aggregate_rankings if reviews else [], len(pending))
        if end_if_all_failed(self.state, [model in replies for model in calls]):
            self.live.event(
                EventKind.NOTICE,
                stage=Stage.REVIEW,
                round=round_number,
                message="every review call failed: the loop ends (error_occurred)",
            )
        self.live.details(self.state, self.record, self._latest_agreement())

    def _ranking_settled(
        self,
        labels: dict[str, str],
        read: Callable[[str, ModelReply], tuple[Stage2Result, ParsedReview]],
    ) -> Enough | None:
        """Depth auto: a review round needs no more reviews once those in hand (each read
        by `read`) fix the top of the aggregate ranking whatever the outstanding reviewers
        say."""
        if self.request.depth != "auto" or not self.request.auto.settle_reviews:
            return None

        def settled(arrived: dict[str, ModelReply], outstanding: Sequence[str]) -> bool:
            reviews = [read(r, reply)[0] for r, reply in arrived.items()]
            return settled_leader(reviews, outstanding, labels) is not None

        return settled

    async def _refinement_round(self) -> None:
        tokens_before = self.record.usage.total_tokens
        round_data = start_new_round(self.state, workflow.now())
        n = round_data.round_number
        self.live.event(
            EventKind.ROUND_START,
            round=n,
            message=f"refinement round {n} of {self.state.max_rounds}, then review round {n + 1}",
            data={"review_round": n + 1},
        )
        round_data.critiques = {label: list(items) for label, items in self.critiques.items()}
        labels = self.record.label_to_model
        hand_over(self.human, labels, round_data.critiques, self.record.steering, n)
        self.human, self.state.human_critiques_pending = {}, 0
        tasks = plan_refinements(self.answers, round_data.critiques, labels, MAX_FEEDBACK_CHARS)
        self.live.tasks = {task.model: task for task in tasks}
        asked = {
            task.model: prompts.refinement_prompt(
                self.request.question,
                task.original,
                task.critiques,
                self.request.response_byte_cap,
                self.request.criteria,
                instructions=self.request.instructions,
            )
            for task in tasks
        }
        schemas = dict.fromkeys(asked, refinement_schema())
        replies = await self.calls.stage(Stage.REFINE, n, asked, schemas)
        missing = self.calls.missing(Stage.REFINE, n)
        results = [
            refinement_result(
                task,
                replies[task.model].content if task.model in replies else None,
                error=None if task.model in replies else missing.get(task.model, "stopped"),
                min_change=self.state.min_change_threshold,
                ending=replies[task.model].ending if task.model in replies else None,
                late=self.calls.was_cut(Stage.REFINE, n, task.model),
                prompt=asked[task.model][0].text,
                material=self.request.user_texts(),
            )
            for task in tasks
        ]
        for echoed in (r for r in results if r.error == ECHO_PROBLEM):
            self.calls.failed(Stage.REFINE, n, echoed.model, message=ECHO_PROBLEM, error_type=ECHO)
        self.answers = record_refinements(round_data, self.answers, results)
        self.live.refinements(n, results, self.stopping)
        if end_if_all_failed(self.state, [r.error is None for r in results]):
            self.live.event(
                EventKind.NOTICE,
                stage=Stage.REFINE,
                round=n,
                message="every refinement failed: the loop ends (error_occurred); "
                "the chairman works from the last good answers",
            )
        else:
            await self._stage2_collect_reviews(round_number=n)
        spent = self.record.usage.total_tokens - tokens_before
        complete_round(self.state, round_data, spent, workflow.now())
        self.state.cost_usd = self.record.usage.cost_usd
        self.live.round_complete(
            n,
            f"{len(round_data.models_that_changed)} changed, "
            f"{len(round_data.models_unchanged)} unchanged",
            self.state,
            self.reviews.get(n),
            changed=round_data.models_that_changed,
        )

    async def _stage3_synthesize(self) -> None:
        if not self.answers:
            return
        rankings = self.record.aggregate_rankings
        agreement = self._latest_agreement()
        computed = self._facts(agreement)
        # The format the person who asked needs, if any; else the answer comes back as JSON
        # with the disagreement report (council.report).
        wanted = self.request.answer_format
        messages = prompts.synthesis_prompt(
            self.request.question,
            self.answers,
            rankings,
            rounds_run=len(self.state.rounds),
            byte_cap=self.request.response_byte_cap,
            stopped_early=self.stopping,
            context=self.context,
            instructions=self.request.instructions,
            agreement=agreement,
            answer_format=wanted,
            reviewed=self.state.termination_reason != TerminationReason.AGREEMENT,
            splits=split_lines(computed),
        )
        round_number = self.state.current_round
        models = candidates(self.record.chairman, rankings, self.answers)
        self._stage_started(Stage.SYNTHESIS, round_number, models[:1])
        material = [*self.answers.values(), *self.request.user_texts()]
        written = await synthesize(
            self.calls,
            self.live.event,
            round_number,
            models,
            self.record.models,
            messages,
            material,
            wanted,
        )
        stage3, account = written or (None, None)
        self.record.stage3 = stage3 or best_answer_stands(
            self.live.event,
            rankings,
            self.answers,
            self.record.stage1,
            self.record.rounds,
            wanted,
        )
        final = self.record.stage3
        value = stated_shown(final.response) if final is not None and wanted is None else None
        self.record.disagreement_report = merged(computed, account, value)

    def _facts(self, agreement: Agreement | None) -> DisagreementReport:
        """Where the members split, computed (council.report): the value each first answer
        states and each after refinement, the latest review's dissents."""
        return facts(
            self.record.models,
            {answer.model: stated_shown(answer.response) for answer in self.record.stage1},
            {m: stated_shown(text) for m, text in self.answers.items()}
            if self.record.rounds
            else None,
            agreement,
        )

    def _failure(self, message: str, kind: str) -> ApplicationError:
        """The run's end when the council cannot go on: the failure carries the record as
        it stood (its details), so that reading it never needs this build's workers."""
        self.state.cost_usd = self.record.usage.cost_usd
        record = fit_record(self._built())
        record.status, record.completed_at = "failed", workflow.now()
        return ApplicationError(message, record, type=kind, non_retryable=True)

    def _finish(self) -> DeliberationRecord:
        self.state.cost_usd = self.record.usage.cost_usd
        if self.state.termination_reason == TerminationReason.AGREEMENT:
            self.record.saved = saved_by_depth(self.record, self.request.min_rounds)
            # Good news: said as such (council.progress: data "good").
            self.live.event(
                EventKind.NOTICE, message=self.record.saved.describe(), data={"good": True}
            )
        record = fit_record(self._built())
        record.status, record.completed_at = "completed", workflow.now()
        self.live.finished(self.state, record)
        return record

    # ---- what the run shows -------------------------------------------------------------

    def _stage_started(self, stage: Stage, round_number: int, models: list[str]) -> None:
        self.live.stage_started(
            stage, round_number, models, self.state, self.record, self._latest_agreement()
        )

    # ---- steering: updates ------------------------------------------------------------

    @workflow.update
    def set_max_rounds(self, change: int | RoundsChange) -> int:
        """Raise or lower the maximum number of refinement rounds; returns the new limit.
        A deadline (the client's) refuses the update if no worker took it in time."""
        rounds = RoundsChange.of(change).rounds
        self.state.max_rounds = rounds
        self.state.min_rounds = min(self.state.min_rounds, rounds)
        self._steer(SteeringAction(kind="max_rounds", max_rounds=rounds, **self._now()))
        self.live.event(EventKind.NOTICE, message=f"the user set the maximum rounds to {rounds}")
        self.live.details(self.state, self.record, self._latest_agreement())
        return rounds

    @set_max_rounds.validator
    def _check_max_rounds(self, change: int | RoundsChange) -> None:
        change = RoundsChange.of(change)
        problem = expired_problem(change.deadline, workflow.now()) or max_rounds_problem(
            self.state, change.rounds, self.record.steering
        )
        if problem:
            raise ValueError(problem)

    @workflow.update
    def add_critique(self, critique: HumanCritique) -> str:
        """A critique from the user for a model's current answer: handed to that model in
        the next refinement round, beside its peers' critiques (see set_max_rounds for the
        deadline)."""
        self.human.setdefault(critique.model, []).append(critique)
        self.state.human_critiques_pending = sum(len(c) for c in self.human.values())
        self._steer(
            SteeringAction(kind="critique", model=critique.model, text=critique.text, **self._now())
        )
        message = f"a critique from the user for {critique.model} waits for the next round"
        self.live.event(EventKind.NOTICE, model=critique.model, message=message)
        return f"{message} (round {self.state.current_round + 1})"

    @add_critique.validator
    def _check_critique(self, critique: HumanCritique) -> None:
        problem = expired_problem(critique.deadline, workflow.now()) or critique_problem(
            self.state, self._answered(), critique, self.record.steering
        )
        if problem:
            raise ValueError(problem)

    def _answered(self) -> set[str]:
        """The models whose answer has arrived: those with an answer, and in stage 1 those
        whose first answer came in before the stage ended."""
        arriving = self.calls.arriving == (Stage.ANSWER, 0)
        return set(self.answers) | (set(self.calls.arrived) if arriving else set())

    def _steer(self, action: SteeringAction) -> None:
        self.record.steering.append(action)

    def _now(self) -> dict[str, Any]:
        return {"at": workflow.now(), "during_round": self.state.current_round}

    # ---- stop signal, queries -------------------------------------------------------

    @workflow.signal
    def stop(self, reason: str | None = None) -> None:
        """Stop after the calls in flight are cancelled; synthesize from what there is."""
        if self.stop_reason is not None:
            return
        self.stop_reason = bounded_reason(reason) or "stopped by the user"
        if not self.state.terminated:
            terminate_iteration(self.state, TerminationReason.USER_STOP)
        self.live.event(EventKind.STOP_REQUESTED, message=self.stop_reason)

    @workflow.query
    def progress(self, since: int = 0) -> Progress:
        return self.live.progress(since, self.state, self.record)

    @workflow.update(unfinished_policy=workflow.HandlerUnfinishedPolicy.ABANDON)
    async def wait_progress(self, since: int) -> Progress:
        """The progress query's answer once there are events after `since`: a follower's
        long poll (runs.following.follow). Each accepted call costs history events, so a
        follower asks once for every batch of events, not on a clock; a run that fails
        abandons the calls still waiting (the follower reads the rest with the query)."""
        # A run that has finished has no event to wait for: an ask at its end is answered
        # at once (else the run, which waits for its handlers, would never close).
        await workflow.wait_condition(
            lambda: len(self.live.events) > since or self.live.is_finished
        )
        try:
            return self.live.progress(since, self.state, self.record)
        except Exception as error:  # only observing: the follower's call fails, not the run
            raise ApplicationError(f"the progress could not be read: {error}") from None

    @wait_progress.validator
    def _check_since(self, since: int) -> None:
        # Refused before it is accepted (no history): an offset no event has reached would
        # hold one of the run's few in-flight updates until it ends.
        if not 0 <= since <= len(self.live.events):
            raise ValueError(f"no event {since} yet: the run has {len(self.live.events)}")

    @workflow.query(name="record")
    def current_record(self) -> DeliberationRecord:
        """The record so far (the final record once the run has completed)."""
        built = self.live.with_arrivals(
            self._built(), self.request, self.calls.arriving, self.calls.arrived
        )
        return fit_record(built)

    @property
    def stopping(self) -> bool:
        return self.stop_reason is not None

    def _built(self) -> DeliberationRecord:
        return Live.record(self.record, self.state, self.answers, self.reviews, self.stop_reason)

    def _latest_agreement(self) -> Agreement | None:
        agreed = [r.agreement for _, r in sorted(self.reviews.items()) if r.agreement]
        return agreed[-1] if agreed else None
