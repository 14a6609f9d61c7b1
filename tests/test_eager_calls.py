"""A stage's calls start with the workflow task that schedules them (worker.EAGER_CALLS):
none of them waits in the task queue. Under load, a call that went through the queue
waited behind every run's backlog while the stage's other calls ran, and the straggler
rule had to look at it; with every call eager, the calls of a stage start together."""

from __future__ import annotations

from temporalio.api.enums.v1 import TaskQueueType
from temporalio.api.taskqueue.v1 import TaskQueue
from temporalio.api.workflowservice.v1 import DescribeTaskQueueRequest
from temporalio.client import Client

from tests.temporal_fixtures import Council

MEMBERS = ["sim/atlas", "sim/borealis", "sim/drift", "sim/mule", "sim/oracle"]


async def activities_queued(client: Client, queue: str) -> float:
    """How fast model calls were added to the task queue's backlog (not started eagerly)."""
    described = await client.workflow_service.describe_task_queue(
        DescribeTaskQueueRequest(
            namespace=client.namespace,
            task_queue=TaskQueue(name=queue),
            task_queue_type=TaskQueueType.TASK_QUEUE_TYPE_ACTIVITY,
            report_stats=True,
        )
    )
    return described.stats.tasks_add_rate


async def test_a_stage_of_five_calls_starts_them_all_without_the_queue(council: Council) -> None:
    record = await council.run(models=MEMBERS, max_rounds=1, min_rounds=1)
    assert {r.model for r in record.stage1} == set(MEMBERS) and record.errors == []
    assert await activities_queued(council.client, council.task_queue) == 0
