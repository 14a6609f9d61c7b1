"""Versions by worker deployment: each run is pinned to the build it started on.

A deliberation lasts minutes. Instead of patching the workflow for every protocol change,
every worker belongs to a Worker Deployment (named after its task queue) at a build id
(COUNCIL_BUILD_ID, else the package's version), and the deliberation workflows are PINNED:
a run started on a build finishes on that build's workers, whatever is deployed meanwhile,
and new runs go to the deployment's current version. So a protocol change is a new build.

On a dev server `worker.py` alone is enough: a worker makes its version current when the
deployment has no current version yet (adopt); `worker.py --make-current` makes it current
whatever is current (what `make up` and `make demo` do on their own server, so that a
checkout at a new version takes over from the last one). In a cluster an operator rolls a
new build out: start its workers beside the old ones, make it current (or ramp it), let
the old version drain, roll back by making the old one current again
(docs/deployment.md).
"""

from __future__ import annotations

import asyncio
import tomllib
from importlib import metadata
from pathlib import Path

from temporalio.api.workflowservice.v1 import (
    DescribeWorkerDeploymentRequest,
    DescribeWorkerDeploymentResponse,
    SetWorkerDeploymentCurrentVersionRequest,
)
from temporalio.client import Client
from temporalio.common import VersioningBehavior, WorkerDeploymentVersion
from temporalio.service import RPCError, RPCStatusCode
from temporalio.worker import WorkerDeploymentConfig

from app.settings import environment as settings

PACKAGE = "council"
PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
# How long a starting worker waits for the server to list its version before it gives up
# making it current (the server learns of a version from the worker's first polls).
ADOPT_SECONDS = 30.0
POLL_SECONDS = 0.2
# What a server answers now and then while a deployment's own workflow changes hands (a
# busy dev server: "operation was canceled", "workflow is closing"): asked again.
PASSING = (
    RPCStatusCode.CANCELLED,
    RPCStatusCode.ABORTED,
    RPCStatusCode.UNAVAILABLE,
    RPCStatusCode.RESOURCE_EXHAUSTED,
    RPCStatusCode.DEADLINE_EXCEEDED,
)


def package_version() -> str:
    """The version in the checkout's pyproject.toml, else the installed package's."""
    try:
        return str(tomllib.loads(PYPROJECT.read_text())["project"]["version"])
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        return metadata.version(PACKAGE)


def build_id() -> str:
    """COUNCIL_BUILD_ID (app.settings, checked there), else the package's version."""
    return settings.current().build_id or package_version()


def version(task_queue: str, build: str) -> WorkerDeploymentVersion:
    """This worker's version: the deployment of its task queue, at its build."""
    return WorkerDeploymentVersion(deployment_name=task_queue, build_id=build)


def deployment_config(task_queue: str, build: str) -> WorkerDeploymentConfig:
    """Versioned, and every workflow the worker runs pinned unless it says otherwise."""
    return WorkerDeploymentConfig(
        version=version(task_queue, build),
        use_worker_versioning=True,
        default_versioning_behavior=VersioningBehavior.PINNED,
    )


async def current_build(client: Client, deployment: str) -> str | None:
    """The build id of the deployment's current version (None: none, or no deployment)."""
    described = await _described(client, deployment)
    if described is None:
        return None
    current = described.worker_deployment_info.routing_config.current_deployment_version
    return current.build_id or None


async def _described(client: Client, deployment: str) -> DescribeWorkerDeploymentResponse | None:
    """The deployment as the server describes it (None: there is none), asked again while
    the server answers with a passing error, for at most ADOPT_SECONDS."""
    request = DescribeWorkerDeploymentRequest(
        namespace=client.namespace, deployment_name=deployment
    )
    deadline = asyncio.get_running_loop().time() + ADOPT_SECONDS
    while True:
        try:
            return await client.workflow_service.describe_worker_deployment(request)
        except RPCError as error:
            if error.status == RPCStatusCode.NOT_FOUND:
                return None
            if error.status not in PASSING or asyncio.get_running_loop().time() > deadline:
                raise
        await asyncio.sleep(POLL_SECONDS)


async def adopt(client: Client, wanted: WorkerDeploymentVersion, take_over: bool = False) -> str:
    """Make `wanted` the deployment's current version if it has none (a dev server, a first
    deployment: at once, before its workers' first polls reach the server), or whatever is
    current with `take_over` (once its workers poll every task queue the current one
    serves); returns one line that says which build new runs go to."""
    deadline = asyncio.get_running_loop().time() + ADOPT_SECONDS
    while True:
        described = await _described(client, wanted.deployment_name)
        if described is None:
            current, token = None, b""
        else:
            current = described.worker_deployment_info.routing_config.current_deployment_version
            token = described.conflict_token
        build = current.build_id if current is not None else ""
        if build == wanted.build_id or (build and not take_over):
            return _routing_line(wanted, build)
        try:
            await client.workflow_service.set_worker_deployment_current_version(
                SetWorkerDeploymentCurrentVersionRequest(
                    namespace=client.namespace,
                    deployment_name=wanted.deployment_name,
                    build_id=wanted.build_id,
                    conflict_token=token,
                    identity=f"council-worker {wanted.build_id}",
                    # With no current version, nothing is taken from anyone: new runs wait
                    # for this build's workers, which are starting.
                    allow_no_pollers=not build,
                )
            )
        except RPCError as error:
            # Another worker set it first, or (taking over) the server does not list this
            # build yet, or it does not poll every task queue of the current one yet, or a
            # passing error: read it again.
            if error.status not in (
                RPCStatusCode.NOT_FOUND,
                RPCStatusCode.FAILED_PRECONDITION,
                RPCStatusCode.ALREADY_EXISTS,
                *PASSING,
            ):
                raise
            if asyncio.get_running_loop().time() > deadline:
                return (
                    f"build {wanted.build_id} could not be made the current version of "
                    f"deployment {wanted.deployment_name} ({error.message}): make it current "
                    "by hand (docs/deployment.md)"
                )
            await asyncio.sleep(POLL_SECONDS)
            continue
        return (
            f"build {wanted.build_id} is now the current version of deployment "
            f"{wanted.deployment_name}: new runs start on it"
        )


def _routing_line(wanted: WorkerDeploymentVersion, current: str) -> str:
    if current == wanted.build_id:
        return f"build {current} is the current version of deployment {wanted.deployment_name}"
    return (
        f"this worker serves build {wanted.build_id} of deployment {wanted.deployment_name} "
        f"(runs pinned to it); new runs start on build {current}, the current version: "
        f"`temporal worker deployment set-current-version --deployment-name "
        f"{wanted.deployment_name} --build-id {wanted.build_id}` moves them here"
    )
