"""The Temporal side: the server at its address, the namespace, the search attributes the
worker registers, and a worker polling the task queue (with its build).

The connection is the one every surface makes (app.temporal.connection.connect, from the same
TEMPORAL_* settings); when it fails, the checks that need it are skipped.
"""

from __future__ import annotations

from temporalio.api.enums.v1 import IndexedValueType
from temporalio.api.taskqueue.v1 import PollerInfo
from temporalio.client import Client
from temporalio.service import RPCError

from app.temporal import connection
from doctor.checks import Check, failed, passed, skipped
from runs import listing, steering
from runs.attributes import missing_search_attributes
from workflows import search_attributes

SERVER = "temporal server"
NAMESPACE = "namespace"
SEARCH_ATTRIBUTES = "search attributes"
WORKER = "worker"
RUNS = "runs"
# The stuck runs a check names (the others are counted).
SHOWN_STUCK = 5
_TYPE_NAMES = {
    IndexedValueType.INDEXED_VALUE_TYPE_KEYWORD: "Keyword",
    IndexedValueType.INDEXED_VALUE_TYPE_INT: "Int",
}


async def temporal_checks() -> list[Check]:
    """The server, the namespace, the search attributes and the worker, in that order."""
    try:
        address = connection.address()
        client = await connection.connect()
    except connection.NamespaceNotFound as missing:
        namespace = connection.connect_options()["namespace"]
        return [
            passed(SERVER, f"{address} answers"),
            failed(
                NAMESPACE,
                str(missing),
                f"create it (temporal operator namespace create --namespace {namespace}) or "
                "set TEMPORAL_NAMESPACE to one the server has",
            ),
            *_unchecked("the namespace does not exist", SEARCH_ATTRIBUTES, WORKER, RUNS),
        ]
    except connection.ServerUnreachable as unreachable:
        fix = (
            "start it (make server, or make up), or set TEMPORAL_ADDRESS to the host:port "
            "of a running server"
        )
        return [failed(SERVER, str(unreachable), fix), *_unchecked("the server does not answer")]
    except connection.ConfigError as problem:
        fix = "correct the setting the message names (docs/cli.md: Environment)"
        return [failed(SERVER, str(problem), fix), *_unchecked("the server cannot be reached")]
    return [
        passed(SERVER, f"{address} answers"),
        passed(NAMESPACE, f"{client.namespace} exists"),
        await search_attributes_check(client),
        await worker_check(client, connection.task_queue()),
        await runs_check(client),
    ]


def _unchecked(why: str, *names: str) -> list[Check]:
    """The checks `names` (all after the server's: none given), skipped for `why`."""
    return [skipped(name, why) for name in names or (NAMESPACE, SEARCH_ATTRIBUTES, WORKER, RUNS)]


async def runs_check(client: Client) -> Check:
    """No running deliberation is stuck (its workflow task failing again and again: it
    would never end); each one that is, named with its failure."""
    try:
        stuck, asked = await listing.stuck_runs(client)
    except RPCError as error:
        return failed(
            RUNS,
            f"cannot list the running deliberations ({error.status.name}: {error.message})",
            "check that the Temporal credentials may read the namespace",
        )
    if not stuck:
        return passed(RUNS, f"{asked} running, none stuck")
    named = "; ".join(f"{row.id}: {row.stuck}" for row in stuck[:SHOWN_STUCK])
    more = f"; and {len(stuck) - SHOWN_STUCK} more" if len(stuck) > SHOWN_STUCK else ""
    return failed(
        RUNS,
        f"{len(stuck)} of {asked} running deliberation(s) stuck: {named}{more}",
        "bin/council stop ID ends each (terminated, with the record it had); the worker's "
        "log says where its workflow task fails",
    )


async def search_attributes_check(client: Client) -> Check:
    """The search attributes the deliberation sets are registered on the namespace."""
    namespace = client.namespace
    try:
        missing = await missing_search_attributes(client)
    except RPCError as error:
        return failed(
            SEARCH_ATTRIBUTES,
            f"cannot list them on namespace {namespace} ({error.status.name}: {error.message})",
            "an operator registers them (docs/deployment.md: search attributes)",
        )
    if not missing:
        names = ", ".join(key.name for key in search_attributes.ALL)
        return passed(SEARCH_ATTRIBUTES, f"registered on {namespace}: {names}")
    # The temporal CLI pairs each --name with the --type at the same place.
    pairs = " ".join(
        f"--name {name} --type {_TYPE_NAMES.get(kind, 'Keyword')}" for name, kind in missing.items()
    )
    return failed(
        SEARCH_ATTRIBUTES,
        f"missing on namespace {namespace}: {', '.join(missing)}",
        "start the worker once (it registers them), or: temporal operator search-attribute "
        f"create --namespace {namespace} {pairs}",
    )


def _build(poller: PollerInfo) -> str:
    deployment = poller.deployment_options
    if deployment.build_id:
        return f"{deployment.deployment_name} {deployment.build_id}".strip()
    return poller.worker_version_capabilities.build_id or "no build id"


async def worker_check(client: Client, queue: str) -> Check:
    """A worker polled the task queue recently; which builds poll it."""
    try:
        pollers = await steering.recent_pollers(client, queue)
    except RPCError as error:
        return failed(
            WORKER,
            f"cannot describe task queue {queue!r} ({error.status.name}: {error.message})",
            "check that the Temporal credentials may read the namespace",
        )
    seen = int(steering.POLLER_SEEN.total_seconds() // 60)
    if not pollers:
        return failed(
            WORKER,
            f"no worker has polled task queue {queue!r} on {client.namespace} in the last "
            f"{seen} minutes",
            f"start one (make worker, or bin/council-worker) with COUNCIL_TASK_QUEUE={queue}, "
            "the same TEMPORAL_* settings and the providers' keys",
        )
    builds = sorted({_build(poller) for poller in pollers})
    return passed(
        WORKER,
        f"{len(pollers)} worker(s) poll task queue {queue!r} (build {', '.join(builds)})",
    )
