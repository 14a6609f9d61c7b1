"""The workflows a Council worker runs, and where their model calls are found.

Temporal knows a workflow by its class's name and an activity by its method's name: they
are taken from the classes and the method here, never written out, so that a rename
cannot leave a stale name behind."""

from __future__ import annotations

from activities.model_call import ModelGateway
from activities.outage import ModelCalls
from workflows.deliberation import Deliberation
from workflows.judge import JudgeAnswers
from workflows.sampling import SelfConsistency

WORKFLOWS: tuple[type, ...] = (Deliberation, JudgeAnswers, SelfConsistency)
# The calls a provider's outage pauses and resumes (activities.outage).
MODEL_CALLS = ModelCalls(
    workflow_types=tuple(each.__name__ for each in WORKFLOWS),
    activity_type=ModelGateway.call_model.__name__,
)
