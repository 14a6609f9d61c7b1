"""Typed search attributes the deliberation sets, so runs can be found in the UI and CLI
(runs.attributes registers them on a server, and gives a run the ones it starts with)."""

from __future__ import annotations

from temporalio.common import SearchAttributeKey, TypedSearchAttributes

STAGE = SearchAttributeKey.for_keyword("CouncilStage")
ROUND = SearchAttributeKey.for_int("CouncilRound")
TERMINATION_REASON = SearchAttributeKey.for_keyword("CouncilTerminationReason")
# The thread a deliberation belongs to: the id of its first deliberation (set at start).
THREAD = SearchAttributeKey.for_keyword("CouncilThread")
# How far the final review agreed: high, medium or low (set when the run ends).
AGREEMENT = SearchAttributeKey.for_keyword("CouncilAgreement")
# Whom the run is for (its fairness key) and the size of its input: what a tenant's quota
# counts (runs.quota). Set at start, for runs that have a tenant.
TENANT = SearchAttributeKey.for_keyword("CouncilTenant")
INPUT_BYTES = SearchAttributeKey.for_int("CouncilInputBytes")

ALL = (STAGE, ROUND, TERMINATION_REASON, THREAD, AGREEMENT, TENANT, INPUT_BYTES)


def place_of(attributes: TypedSearchAttributes) -> tuple[str, int] | None:
    """The stage and round these attributes show, if they show both."""
    stage, round_number = attributes.get(STAGE), attributes.get(ROUND)
    return None if stage is None or round_number is None else (stage, round_number)
