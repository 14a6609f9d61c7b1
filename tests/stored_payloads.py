"""Texts stored in the payload store as a client of a given namespace stores them, for
tests of what reads them back (the codec server)."""

from __future__ import annotations

from collections.abc import Mapping

from temporalio.api.common.v1 import Payload
from temporalio.converter import (
    DataConverter,
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
)

from app.store import store
from app.temporal import connection


def converter_of(namespace: str, env: Mapping[str, str]) -> DataConverter:
    """The data converter of `env` as a client of `namespace` uses it for a run's input
    (the SDK names the namespace of the workflow it starts to the store)."""
    target = StorageDriverWorkflowInfo(namespace=namespace, id="a-run", type="Deliberation")
    return connection.data_converter(dict(env))._with_store_context(
        StorageDriverStoreContext(target=target)
    )


async def stored_in(namespace: str, env: Mapping[str, str], text: str) -> Payload:
    """`text` stored as a client of `namespace` stores it, as the reference its history
    holds."""
    [payload] = await converter_of(namespace, env).encode([text])
    assert store.reference(payload) is not None, "the text is below the store's threshold"
    return payload
