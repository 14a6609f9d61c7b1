"""The search attributes of a run from outside: the ones it starts with, and registering
every one the workflow sets (workflows.search_attributes) on a server that lacks them (the
worker does at start, a start or a quota check once it finds one missing)."""

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
    SearchAttributePair,
    TypedSearchAttributes,
)

from council.calls import Stage
from workflows.search_attributes import ALL, INPUT_BYTES, ROUND, STAGE, TENANT, THREAD

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
