"""Typed search attributes the deliberation sets, so runs can be found in the UI and CLI."""

from temporalio.common import SearchAttributeKey

STAGE = SearchAttributeKey.for_keyword("CouncilStage")
ROUND = SearchAttributeKey.for_int("CouncilRound")
TERMINATION_REASON = SearchAttributeKey.for_keyword("CouncilTerminationReason")

ALL = (STAGE, ROUND, TERMINATION_REASON)
