"""The deliberation: answer, review, refine and re-review until a termination rule holds,
then synthesize. Every model call is one activity; all state lives in workflow history.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from council import prompts
    from council.aggregate import aggregate_rankings, review_agreement
    from council.agreement import Agreement, compare_rounds, verdict
    from council.calls import ChatMessage, ModelReply, Stage
    from council.critiques import critiques_from_parsed
    from council.echo import ECHO, ECHO_PROBLEM, repeats_prompt
    from council.iteration import (
        CritiqueItem,
        IterationState,
        RefinementResult,
        TerminationReason,
        charge_tokens,
        complete_round,
        end_if_all_failed,
        initialize_iteration_state,
        iteration_summary,
        note_review,
        refine_until_done,
        start_new_round,
        terminate_iteration,
    )
    from council.labels import assign_labels, labels_shown_to, presentation_orders
    from council.limits import MAX_FEEDBACK_CHARS
    from council.models import DeliberationRecord, DeliberationRequest
    from council.progress import EventKind, Progress, ProgressEvent
    from council.record import fit_record, stage2_5_results
    from council.refinement import (
        RefinementTask,
        plan_refinements,
        record_refinements,
        refinement_result,
    )
    from council.reviews import ParsedReview, read_review
    from council.stages import Stage1Result, Stage2Result, Stage3Result
    from council.steering import (
        HumanCritique,
        RoundsChange,
        SteeringAction,
        bounded_reason,
        critique_problem,
        expired_problem,
        human_critique_item,
        max_rounds_problem,
    )
    from council.stragglers import StragglerPolicy
    from council.structured import (
        StructuredReply,
        conforming_json,
        read_synthesis,
        refinement_schema,
        review_schema,
        synthesis_schema,
    )
    from council.thread import ThreadContext, summarize_context
    from council.validation import InvalidRequest, validate_request
    from workflows import search_attributes, versions
    from workflows.details import current_details
    from workflows.fan_out import FanOut


@workflow.defn
class Deliberation:
    def __init__(self) -> None:
        self._events: list[ProgressEvent] = []
        self._stop_reason: str | None = None
        self._request: DeliberationRequest | None = None
        self._state: IterationState | None = None
        self._record: DeliberationRecord | None = None
        self._answers: dict[str, str] = {}  # model -> its current answer
        # Label -> the critiques of the latest review stage, parsed once as reviews arrive.
        self._critiques: dict[str, list[CritiqueItem]] = {}
        self._stage: Stage | None = None
        self._context = ThreadContext()  # a follow-up's earlier turns
        # Critiques from the user for the next round, by model.
        self._human: dict[str, list[HumanCritique]] = {}
        # Critiques framed in the refinement prompt and trimmed to a budget (see versions).
        self._bounded = False
        # Token limits, JSON reviews and refinements, no critique from noise (see versions).
        self._real = False
        # The run's model calls (workflows.fan_out), once the request is read.
        self._calls: FanOut | None = None
        # A reply that repeats its prompt is no answer (see versions).
        self._echoes = False
        # Agreement review by review (round number -> the review's agreement), and whether
        # the chairman is told of it (see versions).
        self._agreements: dict[int, Agreement] = {}
        self._agreement = False
        # What reading the replies of the stage under way needs (each reviewer's order, each
        # refinement's task): the record query shows them before the stage ends (see
        # _with_arrivals). Read by queries only.
        self._orders: dict[str, list[str]] = {}
        self._tasks: dict[str, RefinementTask] = {}

    # ---- the protocol -------------------------------------------------------------

    @workflow.run
    async def run(self, request: dict[str, Any]) -> DeliberationRecord:
        self._start(request)
        await self._stage1_collect_answers()
        await self._opening_review()
        reason = await refine_until_done(self.state, self._refinement_round)
        self._event(EventKind.TERMINATED, message=reason)
        await self._stage3_synthesize()
        return self._finish()

    def _start(self, raw_request: dict[str, Any]) -> None:
        try:
            self._request = validate_request(raw_request)
        except InvalidRequest as err:
            raise ApplicationError(str(err), type="InvalidRequest", non_retryable=True) from None
        config = self.request.iteration_config()
        if not workflow.patched(versions.REFINE_BY_DEFAULT):
            config = config.first_release()  # a run that started before the change
        self._bounded = workflow.patched(versions.BOUNDED_INPUT)
        self._real = workflow.patched(versions.REAL_MODELS)
        self._agreement = workflow.patched(versions.AGREEMENT)
        stragglers = StragglerPolicy.everyone()  # runs that started before the rule
        if workflow.patched(versions.STRAGGLERS):
            stragglers = self.request.stragglers
        own_time = self._echoes = workflow.patched(versions.OWN_TIME_AND_ECHOES)
        self._state = initialize_iteration_state(config)
        if self._stop_reason is not None:
            terminate_iteration(self._state, TerminationReason.USER_STOP)
        self._context = self.request.context()
        self._record = DeliberationRecord(
            id=workflow.info().workflow_id,
            query=self.request.question,
            models=self.request.models,
            chairman=self.request.chairman or self.request.models[0],
            started_at=workflow.now(),
            follow_up_of=self.request.follow_up_of,
            thread_id=self.request.thread_id,
            context=summarize_context(self._context, self.request.context_tokens)
            if self.request.history
            else None,
        )
        self._calls = FanOut(
            self.request,
            self._record,
            self._event,
            lambda: self.stopping,
            self._begin_stage,
            stragglers,
            real=self._real,
            own_time=own_time,
        )

    async def _stage1_collect_answers(self) -> None:
        cap = self.request.response_byte_cap
        replies = await self._fan_out(
            Stage.ANSWER,
            0,
            {
                model: prompts.answer_prompt(
                    self.request.question, cap, self._context, self.request.instructions
                )
                for model in self.request.models
            },
        )
        self.record.stage1 = [
            _answer(model, replies[model]) for model in self.request.models if model in replies
        ]
        self._answers = {result.model: result.response for result in self.record.stage1}
        if len(self._answers) < 2 and not self.stopping:
            failures = "; ".join(e.describe() for e in self.record.errors)
            raise ApplicationError(
                f"fewer than two models answered ({len(self._answers)} of "
                f"{len(self.request.models)}): {failures or 'no answers'}",
                type="CouncilTooSmall",
                non_retryable=True,
            )
        self.record.label_to_model = assign_labels(list(self._answers), workflow.random())

    async def _opening_review(self) -> None:
        """Stage 2 round 1: every member reviews the others' first answers."""
        if not self.stopping:
            self._event(
                EventKind.ROUND_START,
                stage=Stage.REVIEW,
                round=0,
                message="review round 1: every member reviews the others' answers",
                data={"review_round": 1},
            )
        await self._stage2_collect_reviews(round_number=0)
        charge_tokens(self.state, self.record.usage.total_tokens)
        if self.request.max_cost_usd is not None and self.record.usage.cost_usd is None:
            self._event(
                EventKind.NOTICE,
                message="the provider reports no cost: the cost budget cannot end the loop",
            )
        if not self.stopping:
            self._round_complete(0, "review round 1 complete")

    async def _stage2_collect_reviews(self, round_number: int) -> list[Stage2Result]:
        labels = self.record.label_to_model
        # Each reviewer sees the others' answers in its own order (position bias control).
        orders = presentation_orders(labels, workflow.random()) if len(self._answers) >= 2 else {}
        self._orders = orders
        calls = prompts.review_prompts(
            self.request.question,
            self._answers,
            labels,
            orders,
            self.request.response_byte_cap,
            self.request.criteria,
            structured=self._real,
            instructions=self.request.instructions,
        )
        formats = {r: review_schema(labels_shown_to(r, labels)) for r in calls}
        replies = await self._fan_out(
            Stage.REVIEW, round_number, calls, formats if self._real else None
        )
        read = [self._read_review(r, replies[r], labels) for r in self._answers if r in replies]
        reviews = [review for review, _ in read]
        if round_number == 0:
            self.record.stage2 = reviews
        if reviews:
            self._critiques = critiques_from_parsed(
                (review.model, parsed) for review, parsed in read
            )
            self.record.aggregate_rankings = aggregate_rankings(reviews, labels)
            agreement = review_agreement([(r, parsed.critiques) for r, parsed in read], labels)
            self._agreements[round_number] = self.record.agreement = agreement
            if round_number == 0:
                self.record.stage2_agreement = agreement
        pending = plan_refinements(self._answers, self._critiques, labels)
        note_review(self.state, self.record.aggregate_rankings if reviews else [], len(pending))
        if end_if_all_failed(self.state, [model in replies for model in calls]):
            self._event(
                EventKind.NOTICE,
                stage=Stage.REVIEW,
                round=round_number,
                message="every review call failed: the loop ends (error_occurred)",
            )
        self._update_details()
        return reviews

    async def _refinement_round(self) -> None:
        tokens_before = self.record.usage.total_tokens
        round_data = start_new_round(self.state, workflow.now())
        n = round_data.round_number
        self._event(
            EventKind.ROUND_START,
            round=n,
            message=f"refinement round {n} of {self.state.max_rounds}, then review round {n + 1}",
            data={"review_round": n + 1},
        )
        labels = self.record.label_to_model
        round_data.critiques = {label: list(items) for label, items in self._critiques.items()}
        self._hand_over_human_critiques(round_data.critiques, n)
        budget = MAX_FEEDBACK_CHARS if self._bounded else None
        tasks = plan_refinements(self._answers, round_data.critiques, labels, budget)
        self._tasks = {task.model: task for task in tasks}
        cap = self.request.response_byte_cap
        asked = {
            task.model: prompts.refinement_prompt(
                self.request.question,
                task.original,
                task.critiques,
                cap,
                self.request.criteria,
                framed=self._bounded,
                instructions=self.request.instructions,
            )
            for task in tasks
        }
        replies = await self._fan_out(
            Stage.REFINE,
            n,
            asked,
            dict.fromkeys((t.model for t in tasks), refinement_schema()) if self._real else {},
        )
        failures = {
            e.model: e.describe()
            for e in self.record.errors
            if e.stage == Stage.REFINE and e.round == n
        }
        failures |= {
            c.model: c.describe()
            for c in self.record.late
            if c.stage == Stage.REFINE and c.round == n
        }
        results = [
            refinement_result(
                task,
                replies[task.model].content if task.model in replies else None,
                error=None
                if task.model in replies
                else failures.get(task.model, "stopped by the user"),
                ending=replies[task.model].ending if task.model in replies else None,
                late=self.calls.was_cut(Stage.REFINE, n, task.model),
                prompt=asked[task.model][0].content if self._echoes else None,
                material=self._material(),
            )
            for task in tasks
        ]
        for result in results:
            if result.error == ECHO_PROBLEM:
                self.calls.failed(
                    Stage.REFINE, n, result.model, message=ECHO_PROBLEM, error_type=ECHO
                )
        self._answers = record_refinements(round_data, self._answers, results)
        self._report_refinements(n, results)
        if end_if_all_failed(self.state, [r.error is None for r in results]):
            self._event(
                EventKind.NOTICE,
                stage=Stage.REFINE,
                round=n,
                message="every refinement failed: the loop ends (error_occurred); "
                "the chairman works from the last good answers",
            )
        else:
            round_data.reviews = await self._stage2_collect_reviews(round_number=n)
            round_data.agreement = self._agreements.get(n)
        complete_round(
            self.state, round_data, self.record.usage.total_tokens - tokens_before, workflow.now()
        )
        self._round_complete(
            n,
            f"{len(round_data.models_that_changed)} changed, "
            f"{len(round_data.models_unchanged)} unchanged",
            changed=round_data.models_that_changed,
        )

    def _report_refinements(self, round_number: int, results: list[RefinementResult]) -> None:
        """One event per refinement: whether the answer changed, and how."""
        for result in results:
            if result.late or (result.error is not None and self.stopping):
                continue  # a cut or cancelled call: MODEL_LATE or MODEL_CANCELLED said so
            self._event(
                EventKind.MODEL_REFINED,
                stage=Stage.REFINE,
                round=round_number,
                model=result.model,
                message=result.error or result.change_summary or "no significant change",
                data={
                    "changed": result.changes_made,
                    "failed": result.error is not None,
                    "accepted": len(result.critiques_accepted),
                    "rejected": len(result.critiques_rejected),
                    "critiques": len(result.critiques_addressed),
                    "confidence": result.confidence,
                },
            )

    def _round_complete(
        self, round_number: int, message: str, changed: list[str] | None = None
    ) -> None:
        self._event(
            EventKind.ROUND_COMPLETE,
            round=round_number,
            message=message,
            data={
                "review_round": round_number + 1,
                "changed": changed or [],
                "scores": dict(self.state.latest_scores),
                "lowest": dict(self.state.lowest_ratings),
                "threshold": self.state.quality_threshold,
                "tokens": self.state.total_tokens_used,
                "cost_usd": self.state.cost_usd,
                "agreement": verdict(self._agreements[round_number])
                if round_number in self._agreements
                else None,
            },
        )

    async def _stage3_synthesize(self) -> None:
        if not self._answers:
            return
        rankings = self.record.aggregate_rankings
        agreement = self.record.agreement if self._agreement else None
        # The format the person who asked needs, if any; else, where the council did not
        # agree, the points of disagreement come back as JSON.
        wanted = self.request.answer_format
        disputed = (
            wanted is None
            and self._real
            and agreement is not None
            and agreement.level in ("medium", "low")
        )
        messages = prompts.synthesis_prompt(
            self.request.question,
            self._answers,
            rankings,
            rounds_run=len(self.state.rounds),
            byte_cap=self.request.response_byte_cap,
            stopped_early=self.stopping,
            context=self._context,
            instructions=self.request.instructions,
            agreement=agreement,
            structured=disputed,
            answer_format=wanted,
        )
        chairman = self.record.chairman
        candidates = [chairman] + [e.model for e in rankings if e.model != chairman]
        candidates += [m for m in self._answers if m not in candidates]
        self._begin_stage(Stage.SYNTHESIS, self.state.current_round, candidates[:1])
        for model in candidates:
            if model != chairman:
                self._event(
                    EventKind.FALLBACK,
                    stage=Stage.SYNTHESIS,
                    model=model,
                    message=f"the chairman call failed; {model} synthesizes instead",
                )
            reply = await self._call(
                Stage.SYNTHESIS,
                self.state.current_round,
                model,
                messages,
                wanted or (synthesis_schema() if disputed else None),
            )
            if reply is not None and self._echoes and self._echoed(reply, messages):
                self.calls.failed(
                    Stage.SYNTHESIS,
                    self.state.current_round,
                    model,
                    message=ECHO_PROBLEM,
                    error_type=ECHO,
                )
                reply = None
            if reply is None:
                continue
            answer, points = read_synthesis(reply.content) if disputed else (reply.content, [])
            problem = None
            if wanted is not None:
                reply, answer, problem = await self._conform(model, messages, reply, wanted)
            self.record.stage3 = Stage3Result(
                model=model,
                response=answer,
                disagreements=points,
                format_problem=problem,
                **reply.ending.model_dump(),
            )
            self._event(EventKind.STAGE_COMPLETE, stage=Stage.SYNTHESIS, model=model)
            return
        raise ApplicationError(
            "no model could write the synthesis: "
            + "; ".join(e.describe() for e in self.record.errors if e.stage == Stage.SYNTHESIS),
            type="SynthesisFailed",
            non_retryable=True,
        )

    async def _conform(
        self,
        model: str,
        messages: list[ChatMessage],
        reply: ModelReply,
        wanted: StructuredReply,
    ) -> tuple[ModelReply, str, str | None]:
        """The synthesis as the JSON the person asked for: checked against their schema and,
        if it does not follow it, asked for once more with what is wrong. Returns the reply
        kept, its JSON text, and why it still does not follow the schema (None: it does)."""
        answer, problem = conforming_json(reply.content, wanted)
        if problem is None:
            return reply, answer, None
        self._event(
            EventKind.NOTICE,
            stage=Stage.SYNTHESIS,
            model=model,
            message=f"the final answer does not follow the requested schema ({problem}): "
            "asked once more",
        )
        repair = prompts.format_repair(messages, reply.content, problem)
        again = await self._call(Stage.SYNTHESIS, self.state.current_round, model, repair, wanted)
        if again is None:
            return reply, answer, problem
        fixed, still = conforming_json(again.content, wanted)
        return (again, fixed, still) if still is None else (reply, answer, still)

    def _echoed(self, reply: ModelReply, messages: list[ChatMessage]) -> bool:
        """The reply only repeats the prompt it was given (council.echo)."""
        return repeats_prompt(
            reply.content,
            "\n".join(m.content for m in messages),
            [*self._answers.values(), *self._material()],
        )

    def _material(self) -> list[str]:
        """What every prompt carries besides the council's own texts: the user's texts."""
        context = [t for turn in self._context.turns for t in (turn.question, turn.answer)]
        return [self.request.question, self.request.instructions or "", *context]

    def _finish(self) -> DeliberationRecord:
        record = fit_record(self._snapshot())
        record.status = "completed"
        record.completed_at = workflow.now()
        reason = str(self.state.termination_reason)
        workflow.upsert_search_attributes([search_attributes.TERMINATION_REASON.value_set(reason)])
        meter = workflow.metric_meter()
        meter.create_counter(
            "council_deliberations_finished", "Deliberations finished, by termination reason"
        ).add(1, {"reason": reason})
        agreement = record.agreement
        if self._agreement and agreement is not None and agreement.level is not None:
            workflow.upsert_search_attributes(
                [search_attributes.AGREEMENT.value_set(agreement.level)]
            )
            meter.create_histogram_float(
                "council_agreement",
                "Krippendorff's alpha of the final review (1 when every rating was equal)",
            ).record(
                1.0 if agreement.alpha is None else agreement.alpha, {"level": agreement.level}
            )
        self._event(EventKind.FINISHED, message=str(self.state.termination_reason))
        self._update_details(finished=True)
        return record

    # ---- model calls ----------------------------------------------------------------

    async def _fan_out(
        self,
        stage: Stage,
        round_number: int,
        calls: dict[str, list[ChatMessage]],
        formats: dict[str, StructuredReply] | None = None,
    ) -> dict[str, ModelReply]:
        """One call per model, in parallel, under the straggler rule (workflows.fan_out)."""
        replies = await self.calls.stage(stage, round_number, calls, formats)
        self.state.cost_usd = self.record.usage.cost_usd
        return replies

    async def _call(
        self,
        stage: Stage,
        round_number: int,
        model: str,
        messages: list[ChatMessage],
        response_format: StructuredReply | None = None,
    ) -> ModelReply | None:
        reply = await self.calls.call(stage, round_number, model, messages, response_format)
        self.state.cost_usd = self.record.usage.cost_usd
        return reply

    # ---- steering: updates ------------------------------------------------------------

    @workflow.update
    def set_max_rounds(self, change: int | RoundsChange) -> int:
        """Raise or lower the maximum number of refinement rounds; returns the new limit.
        A deadline (the client's) refuses the update if no worker took it in time."""
        rounds = RoundsChange.of(change).rounds
        self.state.max_rounds = rounds
        self.state.min_rounds = min(self.state.min_rounds, rounds)
        self._steer(SteeringAction(kind="max_rounds", max_rounds=rounds, **self._now()))
        self._event(EventKind.NOTICE, message=f"the user set the maximum rounds to {rounds}")
        self._update_details()
        return rounds

    @set_max_rounds.validator
    def _check_max_rounds(self, change: int | RoundsChange) -> None:
        change = RoundsChange.of(change)
        problem = expired_problem(change.deadline, workflow.now()) or max_rounds_problem(
            self._state, change.rounds, self._steering_so_far()
        )
        if problem:
            raise ValueError(problem)

    @workflow.update
    def add_critique(self, critique: HumanCritique) -> str:
        """A critique from the user for a model's current answer: handed to that model in
        the next refinement round, beside its peers' critiques (see set_max_rounds for the
        deadline)."""
        self._human.setdefault(critique.model, []).append(critique)
        self.state.human_critiques_pending = sum(len(c) for c in self._human.values())
        self._steer(
            SteeringAction(kind="critique", model=critique.model, text=critique.text, **self._now())
        )
        message = f"a critique from the user for {critique.model} waits for the next round"
        self._event(EventKind.NOTICE, model=critique.model, message=message)
        return f"{message} (round {self.state.current_round + 1})"

    @add_critique.validator
    def _check_critique(self, critique: HumanCritique) -> None:
        problem = expired_problem(critique.deadline, workflow.now()) or critique_problem(
            self._state, self._answered(), critique, self._steering_so_far()
        )
        if problem:
            raise ValueError(problem)

    def _steering_so_far(self) -> list[SteeringAction]:
        return self._record.steering if self._record is not None else []

    def _answered(self) -> set[str]:
        """The models whose answer has arrived: those with an answer, and in stage 1 those
        whose first answer came in before the stage ended."""
        arrived = set()
        if self._calls is not None and self._calls.arriving == (Stage.ANSWER, 0):
            arrived = set(self._calls.arrived)
        return set(self._answers) | arrived

    def _labels_of_answers(self) -> dict[str, str]:
        if self._record is None:
            return {}
        labels = self._record.label_to_model.items()
        return {model: label for label, model in labels if model in self._answers}

    def _hand_over_human_critiques(
        self, critiques: dict[str, list[CritiqueItem]], round_number: int
    ) -> None:
        """Add the user's waiting critiques to this round's, each to its model's label."""
        label_of = self._labels_of_answers()
        for model, items in self._human.items():
            label = label_of.get(model)
            if label is None:  # never: an answer that arrived has a label
                continue
            for critique in items:
                critiques.setdefault(label, []).append(human_critique_item(critique, label))
        for action in self.record.steering:
            if action.kind == "critique" and action.delivered_in_round is None:
                action.delivered_in_round = round_number
        self._human = {}
        self.state.human_critiques_pending = 0

    def _steer(self, action: SteeringAction) -> None:
        self.record.steering.append(action)

    def _now(self) -> dict[str, Any]:
        return {"at": workflow.now(), "during_round": self.state.current_round}

    # ---- stop signal, queries, UI ---------------------------------------------------

    @workflow.signal
    def stop(self, reason: str | None = None) -> None:
        """Stop after the calls in flight are cancelled; synthesize from what there is."""
        if self._stop_reason is not None:
            return
        self._stop_reason = bounded_reason(reason) or "stopped by the user"
        if self._state is not None and not self._state.terminated:
            terminate_iteration(self._state, TerminationReason.USER_STOP)
        self._event(EventKind.STOP_REQUESTED, message=self._stop_reason)

    @workflow.query
    def progress(self, since: int = 0) -> Progress:
        state = self._state
        return Progress(
            events=[e for e in self._events if e.seq >= since],
            next_seq=len(self._events),
            stage=self._stage,
            round=state.current_round if state else 0,
            max_rounds=state.max_rounds if state else 0,
            min_rounds=state.min_rounds if state else 0,
            finished=bool(self._events) and self._events[-1].kind == EventKind.FINISHED,
            terminated_reason=state.termination_reason if state and state.terminated else None,
            scores=dict(state.latest_scores) if state else {},
            lowest_ratings=dict(state.lowest_ratings) if state else {},
            tokens_used=self._record.usage.total_tokens if self._record else 0,
            token_budget=state.context_budget if state else 0,
            cost_usd=state.cost_usd if state else None,
            max_cost_usd=state.max_cost_usd if state else None,
        )

    @workflow.query(name="record")
    def current_record(self) -> DeliberationRecord:
        """The record so far (the final record once the run has completed)."""
        if self._record is None:
            raise ApplicationError("the deliberation has not started yet")
        return fit_record(self._with_arrivals(self._snapshot()))

    @property
    def stopping(self) -> bool:
        return self._stop_reason is not None

    @property
    def request(self) -> DeliberationRequest:
        assert self._request is not None
        return self._request

    @property
    def state(self) -> IterationState:
        assert self._state is not None
        return self._state

    @property
    def calls(self) -> FanOut:
        assert self._calls is not None
        return self._calls

    @property
    def record(self) -> DeliberationRecord:  # type: ignore[override]
        assert self._record is not None
        return self._record

    def _snapshot(self) -> DeliberationRecord:
        record = self.record.model_copy(deep=False)
        record.rounds = list(self.state.rounds)
        record.iteration = iteration_summary(self.state)
        record.stage2_5 = stage2_5_results(
            record.stage1, record.rounds, record.label_to_model, self._answers
        )
        record.stop_reason = self._stop_reason
        if self._agreements:
            record.agreement_trend = compare_rounds(
                [self._agreements[n] for n in sorted(self._agreements)]
            )
        return record

    def _read_review(
        self, reviewer: str, reply: ModelReply, labels: dict[str, str]
    ) -> tuple[Stage2Result, ParsedReview]:
        """A review as the record keeps it, read once (in the order the reviewer saw)."""
        return read_review(
            reviewer,
            reply.content,
            labels,
            self._orders.get(reviewer, []),
            asked=reply.structured,
            legacy=not self._real,
            ending=reply.ending,
        )

    def _with_arrivals(self, record: DeliberationRecord) -> DeliberationRecord:
        """The record so far with the replies of the stage under way that have arrived, read
        as the stage will read them (a copy: the workflow's own state is not touched)."""
        calls = self._calls
        if calls is None or not calls.arrived or calls.arriving is None:
            return record
        stage, round_number = calls.arriving
        arrived = [(m, calls.arrived[m]) for m in self.request.models if m in calls.arrived]
        if stage == Stage.ANSWER and not record.stage1:
            record.stage1 = [_answer(m, r) for m, r in arrived]
        elif stage == Stage.REVIEW:
            reviews = [self._read_review(m, r, record.label_to_model)[0] for m, r in arrived]
            if round_number == 0 and not record.stage2:
                record.stage2 = reviews
            elif round_number and record.rounds and not record.rounds[-1].reviews:
                record.rounds[-1] = record.rounds[-1].model_copy(update={"reviews": reviews})
        elif stage == Stage.REFINE and record.rounds and not record.rounds[-1].refinements:
            refined = [
                refinement_result(self._tasks[m], r.content, ending=r.ending)
                for m, r in arrived
                if m in self._tasks
            ]
            record.rounds[-1] = record.rounds[-1].model_copy(update={"refinements": refined})
        return record

    def _begin_stage(self, stage: Stage, round_number: int, models: list[str]) -> None:
        self._stage = stage
        self._event(
            EventKind.STAGE_START,
            stage=stage,
            round=round_number,
            message=f"{stage.title}: {len(models)} model(s)",
            data={"models": models},
        )
        workflow.upsert_search_attributes(
            [
                search_attributes.STAGE.value_set(stage.value),
                search_attributes.ROUND.value_set(round_number),
            ]
        )
        self._update_details()

    def _event(self, kind: EventKind, **fields: Any) -> None:
        self._events.append(
            ProgressEvent(seq=len(self._events), at=workflow.now(), kind=kind, **fields)
        )

    def _update_details(self, finished: bool = False) -> None:
        if self._state is None or self._record is None:
            return
        workflow.set_current_details(
            current_details(self._stage, self.state, self.record, finished=finished)
        )


def _answer(model: str, reply: ModelReply) -> Stage1Result:
    """A stage-1 answer as the record keeps it, with how the reply ended."""
    return Stage1Result(model=model, response=reply.content, **reply.ending.model_dump())
