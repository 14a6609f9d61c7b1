"""Connecting to Temporal: the environment contract, the data converter, search attributes."""

from __future__ import annotations

import os
from typing import Any

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.operatorservice.v1 import (
    AddSearchAttributesRequest,
    ListSearchAttributesRequest,
)
from temporalio.client import Client
from temporalio.common import SearchAttributeIndexedValueType
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.envconfig import ClientConfigProfile

from workflows import search_attributes

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
DEFAULT_TASK_QUEUE = "council"


class ServerUnreachable(RuntimeError):
    """The Temporal server did not answer; the message names the address."""


def task_queue() -> str:
    return os.environ.get("COUNCIL_TASK_QUEUE") or DEFAULT_TASK_QUEUE


def connect_options() -> dict[str, Any]:
    """Client.connect arguments from TEMPORAL_* variables and config profiles (envconfig)."""
    options: dict[str, Any] = dict(ClientConfigProfile.load().to_client_connect_config())
    options.setdefault("target_host", DEFAULT_ADDRESS)
    options.setdefault("namespace", DEFAULT_NAMESPACE)
    return options


def address() -> str:
    return connect_options()["target_host"]


async def connect(**overrides: Any) -> Client:
    options = {**connect_options(), **overrides}
    try:
        return await Client.connect(data_converter=pydantic_data_converter, **options)
    except RuntimeError as err:
        raise ServerUnreachable(
            f"cannot reach the Temporal server at {options['target_host']} "
            f"(namespace {options['namespace']}): {str(err).splitlines()[0]}"
        ) from None


_INDEXED_TYPES = {
    SearchAttributeIndexedValueType.KEYWORD: IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD,
    SearchAttributeIndexedValueType.INT: IndexedValueType.INDEXED_VALUE_TYPE_INT,
}


async def ensure_search_attributes(client: Client) -> list[str]:
    """Register the search attributes the workflow sets, where the server lacks them."""
    existing = await client.operator_service.list_search_attributes(
        ListSearchAttributesRequest(namespace=client.namespace)
    )
    known = set(existing.custom_attributes) | set(existing.system_attributes)
    missing = {
        key.name: _INDEXED_TYPES[key.indexed_value_type]
        for key in search_attributes.ALL
        if key.name not in known
    }
    if missing:
        await client.operator_service.add_search_attributes(
            AddSearchAttributesRequest(namespace=client.namespace, search_attributes=missing)
        )
    return sorted(missing)
