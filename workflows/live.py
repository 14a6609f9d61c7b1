"""What a deliberation shows while it runs: its progress events, where it is, and the
record so far; and what the Temporal UI shows of it (search attributes, current details).

The deliberation hands Live the values it reads (the request, the record, the iteration
state, the reviews round by round, the calls of the stage under way), so that this module
imports nothing from workflows.deliberation. Nothing here decides anything: it describes.

The record is built when it is read: the reviews are held round by round (ReviewRound), and
`stage2`, each round's `reviews`, the latest `agreement` and its trend are derived from
them; while a stage runs, the replies that have arrived are read as the stage will read
them (with_arrivals), on a copy.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import SearchAttributeUpdate

with workflow.unsafe.imports_passed_through():
    from activities.metrics import OBSERVER_FAILURES, OBSERVER_FAILURES_HELP
    from council.agreement import Agreement, compare_rounds, verdict
    from council.calls import ModelReply, Stage
    from council.iteration import IterationState, RefinementResult, iteration_summary
    from council.models import DeliberationRecord, DeliberationRequest
    from council.progress import EventKind, Progress, ProgressEvent
    from council.record import stage2_5_results
    from council.refinement import RefinementTask, refinement_result
    from council.reviews import ParsedReview, read_review
    from council.stages import Stage1Result, Stage2Result

from workflows import search_attributes
from workflows.details import current_details

# The stage and round search attributes are updated when the round changes (what a person
# lists runs by: `CouncilRound`), at most once in this much workflow time, and with the
# run's end: each update is a history event and a write to the server's visibility store.
# The stage within a round is the current details' and the progress query's. A new round
# not shown yet is shown with the next event after the interval, with the place it is at.
PLACE_EVERY = timedelta(seconds=5)


@dataclass
class ReviewRound:
    """One review stage: the reviews that came back, and how far they agreed."""

    reviews: list[Stage2Result]
    agreement: Agreement | None


class Live:
    def __init__(self, shown: tuple[str, int] | None = None) -> None:
        """`shown`: the stage and round the run's search attributes showed at its start."""
        self.events: list[ProgressEvent] = []
        self.stage: Stage | None = None
        # What reading the replies of the stage under way needs: each reviewer's order,
        # each refinement's task.
        self.orders: dict[str, list[str]] = {}
        self.tasks: dict[str, RefinementTask] = {}
        # The stage and round the search attributes show, the ones to show, and when they
        # were last set.
        self._place: tuple[str, int] | None = None
        self._shown = shown
        self._shown_at: datetime | None = workflow.now() if shown is not None else None
        # What failed while only observing the run, and how often (see `observing`).
        self.failures: Counter[str] = Counter()

    @contextmanager
    def observing(self, what: str) -> Iterator[None]:
        """Run something that only observes the run (a metric, the search attributes, the
        current details, a progress event): a failure is logged and counted, never raised.
        A failed workflow task is retried for good, and the run would never end. Each
        observer is guarded on its own, so that one that fails (a metric, which a replay
        does not record) never skips another that issues a command (the search
        attributes), which a replay would then find out of place."""
        try:
            yield
        except Exception:
            self.failures[what] += 1
            workflow.logger.exception("%s failed; the deliberation goes on", what)
            with contextlib.suppress(Exception):
                workflow.metric_meter().create_counter(
                    OBSERVER_FAILURES, OBSERVER_FAILURES_HELP
                ).add(1, {"observer": what})

    @property
    def is_finished(self) -> bool:
        """The run has said its last event."""
        return bool(self.events) and self.events[-1].kind == EventKind.FINISHED

    # ---- events ---------------------------------------------------------------------

    def event(self, kind: EventKind, **fields: Any) -> None:
        now = workflow.now()
        with self.observing("progress event"):
            self.events.append(ProgressEvent(seq=len(self.events), at=now, kind=kind, **fields))
        if self._shown_at is None or (now - self._shown_at >= PLACE_EVERY and self._new_round):
            self._upsert([])

    @property
    def _new_round(self) -> bool:
        """The place to show is in another round than the one shown."""
        return self._place is not None and (self._shown is None or self._place[1] != self._shown[1])

    def _upsert(self, others: list[SearchAttributeUpdate[Any]]) -> None:
        """Set these search attributes, and the place where it changed: in one update."""
        updates = list(others)
        if self._place is not None and self._place != self._shown:
            stage, round_number = self._place
            updates += [
                search_attributes.STAGE.value_set(stage),
                search_attributes.ROUND.value_set(round_number),
            ]
            self._shown, self._shown_at = self._place, workflow.now()
        if updates:
            with self.observing("search attributes"):
                workflow.upsert_search_attributes(updates)

    def stage_started(
        self,
        stage: Stage,
        round_number: int,
        models: list[str],
        state: IterationState,
        record: DeliberationRecord,
        agreement: Agreement | None,
    ) -> None:
        """A stage starts: its event, the UI's search attributes and details."""
        self.stage = stage
        self._place = (stage.value, round_number)
        self.event(
            EventKind.STAGE_START,
            stage=stage,
            round=round_number,
            message=f"{stage.heading}: {len(models)} model(s)",
            data={"models": models},
        )
        self.details(state, record, agreement)

    def round_complete(
        self,
        round_number: int,
        message: str,
        state: IterationState,
        review: ReviewRound | None,
        changed: list[str] | None = None,
    ) -> None:
        self.event(
            EventKind.ROUND_COMPLETE,
            round=round_number,
            message=message,
            data={
                "review_round": round_number + 1,
                "changed": changed or [],
                "scores": dict(state.latest_scores),
                "lowest": dict(state.lowest_ratings),
                "threshold": state.quality_threshold,
                "tokens": state.total_tokens_used,
                "cost_usd": state.cost_usd,
                "agreement": verdict(review.agreement)
                if review is not None and review.agreement is not None
                else None,
            },
        )

    def refinements(
        self, round_number: int, results: list[RefinementResult], stopping: bool
    ) -> None:
        """One event per refinement: whether the answer changed, and how (a cut or cancelled
        call has said so already)."""
        for result in results:
            if result.late or (result.error is not None and stopping):
                continue
            self.event(
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

    def finished(self, state: IterationState, record: DeliberationRecord) -> None:
        """The run's end as the UI and the metrics see it: its termination reason and
        agreement as search attributes (one update, with the last stage and round if they
        are not shown yet), the counter and histogram, the last event."""
        reason = str(state.termination_reason)
        ending: list[SearchAttributeUpdate[Any]] = [
            search_attributes.TERMINATION_REASON.value_set(reason)
        ]
        with self.observing("metrics"):
            workflow.metric_meter().create_counter(
                "council_deliberations_finished", "Deliberations finished, by termination reason"
            ).add(1, {"reason": reason})
        agreement = record.agreement
        if agreement is not None and agreement.level is not None:
            ending.append(search_attributes.AGREEMENT.value_set(agreement.level))
            with self.observing("metrics"):
                workflow.metric_meter().create_histogram_float(
                    "council_agreement",
                    "Krippendorff's alpha of the final review, from 0 (below 0, a systematic "
                    "disagreement, counts as 0) to 1 (1 when every rating was equal)",
                ).record(metric_alpha(agreement.alpha), {"level": agreement.level})
        self._upsert(ending)  # with the last place, if it is not shown yet
        self.event(EventKind.FINISHED, message=reason)
        self.details(state, record, agreement, finished=True)

    def details(
        self,
        state: IterationState,
        record: DeliberationRecord,
        agreement: Agreement | None,
        finished: bool = False,
    ) -> None:
        """The Temporal UI's current details of the run."""
        with self.observing("current details"):
            workflow.set_current_details(
                current_details(
                    self.stage, state, record, agreement, finished=finished, failed=self.failures
                )
            )

    def progress(
        self, since: int, state: IterationState | None, record: DeliberationRecord | None
    ) -> Progress:
        return Progress(
            events=[e for e in self.events if e.seq >= since],
            next_seq=len(self.events),
            stage=self.stage,
            round=state.current_round if state else 0,
            max_rounds=state.max_rounds if state else 0,
            min_rounds=state.min_rounds if state else 0,
            finished=self.is_finished,
            terminated_reason=state.termination_reason if state and state.terminated else None,
            scores=dict(state.latest_scores) if state else {},
            lowest_ratings=dict(state.lowest_ratings) if state else {},
            tokens_used=record.usage.total_tokens if record else 0,
            token_budget=state.context_budget if state else 0,
            cost_usd=record.usage.cost_usd if record else None,
            max_cost_usd=state.max_cost_usd if state else None,
        )

    # ---- the record -----------------------------------------------------------------

    def read_review(
        self, reviewer: str, reply: ModelReply, labels: dict[str, str]
    ) -> tuple[Stage2Result, ParsedReview]:
        """A review as the record keeps it, read once (in the order the reviewer saw)."""
        return read_review(
            reviewer,
            reply.content,
            labels,
            self.orders.get(reviewer, []),
            asked=reply.structured,
            ending=reply.ending,
        )

    @staticmethod
    def record(
        record: DeliberationRecord,
        state: IterationState,
        answers: dict[str, str],
        reviews: dict[int, ReviewRound],
        stop_reason: str | None,
    ) -> DeliberationRecord:
        """The record as it stands: the reviews placed where the record shows them."""
        built = record.model_copy(deep=False)
        first = reviews.get(0)
        built.stage2 = first.reviews if first else []
        built.stage2_agreement = first.agreement if first else None
        built.rounds = [
            r.model_copy(
                update={
                    "reviews": reviews[r.round_number].reviews,
                    "agreement": reviews[r.round_number].agreement,
                }
            )
            if r.round_number in reviews
            else r
            for r in state.rounds
        ]
        agreements = [reviews[n].agreement for n in sorted(reviews)]
        agreed = [a for a in agreements if a is not None]
        built.agreement = agreed[-1] if agreed else None
        built.agreement_trend = compare_rounds(agreed) if agreed else None
        built.iteration = iteration_summary(state)
        built.stage2_5 = stage2_5_results(built.stage1, built.rounds, built.label_to_model, answers)
        built.stop_reason = stop_reason
        return built

    def with_arrivals(
        self,
        record: DeliberationRecord,
        request: DeliberationRequest,
        arriving: tuple[Stage, int] | None,
        arrived: dict[str, ModelReply],
    ) -> DeliberationRecord:
        """The record with the replies of the stage under way that have arrived, read as the
        stage will read them (on the copy `record.record` built)."""
        if not arrived or arriving is None:
            return record
        stage, round_number = arriving
        replies = [(m, arrived[m]) for m in request.models if m in arrived]
        if stage == Stage.ANSWER and not record.stage1:
            record.stage1 = [answer(m, r) for m, r in replies]
        elif stage == Stage.REVIEW:
            read = [self.read_review(m, r, record.label_to_model)[0] for m, r in replies]
            if round_number == 0 and not record.stage2:
                record.stage2 = read
            elif round_number and record.rounds and not record.rounds[-1].reviews:
                record.rounds[-1] = record.rounds[-1].model_copy(update={"reviews": read})
        elif stage == Stage.REFINE and record.rounds and not record.rounds[-1].refinements:
            refined = [
                refinement_result(
                    self.tasks[m],
                    r.content,
                    min_change=request.min_change_threshold,
                    ending=r.ending,
                )
                for m, r in replies
                if m in self.tasks
            ]
            record.rounds[-1] = record.rounds[-1].model_copy(update={"refinements": refined})
        return record


def metric_alpha(alpha: float | None) -> float:
    """The final review's alpha as the agreement histogram records it: a metric takes no
    negative value, so a systematic disagreement (alpha below 0) counts as 0; all ratings
    equal (no alpha) as 1."""
    return 1.0 if alpha is None else min(1.0, max(0.0, alpha))


def answer(model: str, reply: ModelReply) -> Stage1Result:
    """A stage-1 answer as the record keeps it, with how the reply ended."""
    return Stage1Result(model=model, response=reply.content, **reply.ending.model_dump())
