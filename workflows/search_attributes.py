"""Typed search attributes the deliberation sets, so runs can be found in the UI and CLI,
and registering them on a server that lacks them (the worker does at start)."""

from __future__ import annotations

from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.common import (
    SearchAttributeIndexedValueType,
    SearchAttributeKey,
    SearchAttributePair,
    TypedSearchAttributes,
)

from council.calls import Stage

STAGE = SearchAttributeKey.for_keyword("CouncilStage")
ROUND = SearchAttributeKey.for_int("CouncilRound")
TERMINATION_REASON = SearchAttributeKey.for_keyword("CouncilTerminationReason")
# The thread a deliberation belongs to: the id of its first deliberation (set at start).
THREAD = SearchAttributeKey.for_keyword("CouncilThread")
# How far the final review agreed: high, medium or low (set when the run ends).
AGREEMENT = SearchAttributeKey.for_keyword("CouncilAgreement")
# Whom the run is for (its fairness key) and the size of its input: what a tenant's quota
# counts (workflows.quota). Set at start, for runs that have a tenant.
TENANT = SearchAttributeKey.for_keyword("CouncilTenant")
INPUT_BYTES = SearchAttributeKey.for_int("CouncilInputBytes")

ALL = (STAGE, ROUND, TERMINATION_REASON, THREAD, AGREEMENT, TENANT, INPUT_BYTES)

# Where every deliberation starts: set with the run's start, so that it costs no update.
FIRST_PLACE = (Stage.ANSWER.value, 0)


def at_start(thread: str, tenant: str | None = None, input_bytes: int = 0) -> TypedSearchAttributes:
    """The search attributes a deliberation starts with: its thread and its first place;
    its tenant and the size of its input, when it has a tenant."""
    stage, round_number = FIRST_PLACE
    pairs: list[SearchAttributePair[Any]] = [
        SearchAttributePair(THREAD, thread),
        SearchAttributePair(STAGE, stage),
        SearchAttributePair(ROUND, round_number),
    ]
    if tenant is not None:
        pairs += [
            SearchAttributePair(TENANT, tenant),
            SearchAttributePair(INPUT_BYTES, input_bytes),
        ]
    return TypedSearchAttributes(pairs)


def place_of(attributes: TypedSearchAttributes) -> tuple[str, int] | None:
    """The stage and round these attributes show, if they show both."""
    stage, round_number = attributes.get(STAGE), attributes.get(ROUND)
    return None if stage is None or round_number is None else (stage, round_number)


_INDEXED_TYPES = {
    SearchAttributeIndexedValueType.KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    SearchAttributeIndexedValueType.INT: IndexedValueType.INDEXED_VALUE_TYPE_INT,
}


async def missing_search_attributes(client: Client) -> dict[str, IndexedValueType.ValueType]:
    """The search attributes the workflow sets that the server lacks, with their types."""
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    known = set(existing.custom_attributes) | set(existing.system_attributes)
    return {
        key.name: _INDEXED_TYPES[key.indexed_value_type] for key in ALL if key.name not in known
    }


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register the search attributes the workflow sets, where the server lacks them."""
    missing = await missing_search_attributes(client)
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
    return sorted(missing)
