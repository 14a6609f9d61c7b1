"""Starting a run from outside: its id (readable, or not where payloads are encrypted),
its settings and search attributes, the originals of its attachments, its tenant's quota;
its place in a thread when it follows another up (and which run gave an answer a chat
client sends back); and its page in the Temporal UI."""

from __future__ import annotations

import dataclasses
import json
import re
import uuid

from temporalio.api.common.v1 import Payload
from temporalio.client import Client, WorkflowHandle
from temporalio.common import WorkflowIDConflictPolicy, WorkflowIDReusePolicy
from temporalio.converter import (
    StorageDriverStoreContext,
    StorageDriverWorkflowInfo,
    WorkflowSerializationContext,
)
from temporalio.exceptions import WorkflowAlreadyStartedError
from temporalio.service import RPCError, RPCStatusCode

from council.limits import MAX_THREAD_TURNS
from council.models import DeliberationRecord, DeliberationRequest
from council.thread import Thread, Turn
from runs import quota
from runs.attributes import at_start, ensure_search_attributes
from runs.finding import (
    ORIGINAL_MEMO,
    QUESTION_MEMO,
    QUESTION_MEMO_CHARS,
    NoSuchDeliberation,
    find,
    handle,
    question_of,
    status_name,
)
from runs.listing import DELIBERATIONS, count_thread, list_thread
from runs.priority import INTERACTIVE, Launch
from workflows.deliberation import Deliberation


def workflow_id(question: str, readable: bool = True) -> str:
    """council-<the question's first words>-<random>; with encrypted payloads the id (which
    Temporal stores in clear) leaves the question out."""
    if not readable:
        return f"council-{uuid.uuid4().hex[:12]}"
    slug = re.sub(r"[^a-z0-9]+", "-", question.lower()).strip("-")[:40].rstrip("-") or "question"
    return f"council-{slug}-{uuid.uuid4().hex[:6]}"


# The dev server's Web UI listens this far above its gRPC port (the CLI's own default:
# 7233 -> 8233).
DEV_UI_PORT_OFFSET = 1000
TEMPORAL_CLOUD_UI = "https://cloud.temporal.io"


def dev_ui_port(port: int) -> int:
    """The Web UI port of a dev server whose frontend listens on `port`."""
    return port + DEV_UI_PORT_OFFSET


def temporal_ui(address: str, configured: str | None = None) -> str:
    """The Temporal Web UI of the server at `address` (host:port): the one configured
    (COUNCIL_UI_URL, read by the caller's settings) when there is one, Temporal Cloud's for
    a *.tmprl.cloud address, else the dev server's UI on that host."""
    configured = (configured or "").strip().rstrip("/")
    if configured:
        return configured
    host, _, port = address.rpartition(":")
    host = host or "localhost"
    if host.lower().rstrip(".").endswith(".tmprl.cloud"):
        return TEMPORAL_CLOUD_UI
    return f"http://{host}:{dev_ui_port(int(port))}"


def ui_url(client: Client, workflow: str, configured: str | None = None) -> str:
    """The run's page in the Web UI of the Temporal server this client is connected to
    (`configured`: the UI's address when one is set, see temporal_ui)."""
    base = temporal_ui(client.service_client.config.target_host, configured)
    return f"{base}/namespaces/{client.namespace}/workflows/{workflow}"


def details(request: DeliberationRequest) -> str:
    """The run's settings as the Temporal UI shows them (markdown)."""
    cost = f" · **cost budget:** ${request.max_cost_usd:g}" if request.max_cost_usd else ""
    return (
        f"**Models:** {', '.join(request.models)}  \n"
        f"**Chairman:** {request.chairman}  \n"
        f"**Rounds:** {request.min_rounds} to {request.max_rounds} · **quality threshold:** "
        f"{request.quality_threshold:g}/5 · **token budget:** {request.token_budget:,}{cost}"
    )


class IdTaken(ValueError):
    """A start with an id that already names a workflow, finished or running."""


async def start(
    client: Client,
    request: DeliberationRequest,
    task_queue: str,
    id: str | None = None,
    launch: Launch = INTERACTIVE,
) -> WorkflowHandle[Deliberation, DeliberationRecord]:
    """Start a validated request; the id defaults to a readable one (see workflow_id). Its
    thread (the search attribute CouncilThread) is the thread it follows up, or its own id.
    `launch` says how urgent it is and for whom (runs.priority): a person's run by
    default.
    An id that already names a workflow (running or finished) is refused with IdTaken: an
    id names one deliberation for good. The caller checks a given id with council.ids.
    A launch with a tenant and a quota is checked against it first (QuotaExceeded, from
    runs.quota)."""
    readable = client.data_converter.payload_codec is None
    wanted = request.model_dump(mode="json")
    input_bytes = len(json.dumps(wanted, separators=(",", ":")).encode())
    if launch.tenant is not None and launch.quota:
        await quota.check(client, launch.tenant, input_bytes, launch.quota)
    wid = id or workflow_id(request.question, readable)
    originals = await _kept_originals(client, request, wid)
    for first in (True, False):
        try:
            return await client.start_workflow(
                Deliberation.run,
                wanted,
                id=wid,
                task_queue=task_queue,
                static_summary=request.question[:200],
                static_details=details(request),
                memo={QUESTION_MEMO: request.question[:QUESTION_MEMO_CHARS], **originals},
                search_attributes=at_start(request.thread_id or wid, launch.tenant, input_bytes),
                id_reuse_policy=WorkflowIDReusePolicy.REJECT_DUPLICATE,
                id_conflict_policy=WorkflowIDConflictPolicy.FAIL,
                priority=launch.priority(),
            )
        except WorkflowAlreadyStartedError:
            raise IdTaken(await _taken(client, wid)) from None
        except RPCError as error:
            # A server no worker has used yet lacks our search attributes: register them
            # as the worker would, once.
            if not (first and _unknown_search_attribute(error)):
                raise
            await ensure_search_attributes(client)
    raise AssertionError("unreachable")


async def _kept_originals(
    client: Client, request: DeliberationRequest, wid: str
) -> dict[str, Payload]:
    """The memo entries that keep the attachments' own bytes (ORIGINAL_MEMO), each stored
    in the payload store whatever its size, as the run's own payloads are (encrypted when
    they are). Nothing without a store: the bytes would sit in the memo itself."""
    kept = {
        f"{ORIGINAL_MEMO}{a.sha256}": a.original
        for a in request.attachments
        if a.original is not None
    }
    storage = client.data_converter.external_storage
    if not kept or storage is None:
        return {}
    always = dataclasses.replace(
        client.data_converter,
        external_storage=dataclasses.replace(storage, payload_size_threshold=0),
    )
    # As the client encodes a start's payloads: for this workflow, in this namespace.
    converter = always._with_contexts(
        WorkflowSerializationContext(namespace=client.namespace, workflow_id=wid),
        StorageDriverStoreContext(
            target=StorageDriverWorkflowInfo(
                id=wid, type=Deliberation.__name__, namespace=client.namespace
            )
        ),
    )
    payloads = await converter.encode(list(kept.values()))
    return dict(zip(kept, payloads, strict=True))


def _unknown_search_attribute(error: RPCError) -> bool:
    return error.status == RPCStatusCode.INVALID_ARGUMENT and "search attribute" in error.message


async def _taken(client: Client, wid: str) -> str:
    try:
        description = await client.get_workflow_handle(wid).describe()
    except RPCError:
        return f"{wid!r} already names a workflow on this server: choose another id"
    kind = "deliberation" if description.workflow_type == Deliberation.__name__ else "workflow"
    started = (
        description.start_time.strftime("%Y-%m-%d %H:%M:%S") if description.start_time else "?"
    )
    return (
        f"{wid!r} already names a {status_name(description.status)} {kind} (started {started} "
        "UTC): choose another id"
    )


class FollowUpError(ValueError):
    """A deliberation that cannot be followed up: the message says why, in one line."""


async def thread_of(client: Client, follow_up_of: str, context_tokens: int) -> Thread:
    """A follow-up's place in the thread of a completed deliberation: the thread, and its
    earlier turns (the newest that fit in `context_tokens`, the request's; the ids of the
    older ones as dropped). The front door (app.requests.front_door.in_thread) puts a
    request in it."""
    try:
        found = await find(client, follow_up_of)
    except NoSuchDeliberation as missing:
        raise FollowUpError(f"{missing} to follow up") from None
    previous, status = found.handle, found.status
    if status == "running":
        raise FollowUpError(f"{follow_up_of} is still running: follow it up once it completes")
    if status != "completed":
        raise FollowUpError(
            f"{follow_up_of} did not complete ({status}): only a completed deliberation can be "
            "followed up"
        )
    last = await previous.result()
    if last.stage3 is None:
        raise FollowUpError(f"{follow_up_of} has no final answer to follow up")
    thread = last.thread_id or last.id
    listed = await list_thread(client, thread)
    earlier = [
        row.id
        for row in listed
        if row.id != last.id
        and row.status == "completed"
        and row.started
        and last.started_at
        and row.started < last.started_at
    ]
    turns = [Turn(id=last.id, question=last.query, answer=last.stage3.response)]
    used = turns[0].tokens
    for wid in reversed(earlier):  # newest first, until the bound is passed
        if used > context_tokens or len(turns) == MAX_THREAD_TURNS:
            break
        record = await handle(client, wid).result()
        if record.stage3 is not None:
            turns.insert(0, Turn(id=wid, question=record.query, answer=record.stage3.response))
            used += turns[0].tokens
    dropped = earlier[: len(earlier) - (len(turns) - 1)]
    # A thread longer than its listing: the older turns are counted, not named.
    unlisted = 0
    if len(listed) > MAX_THREAD_TURNS:
        unlisted = max(0, await count_thread(client, thread) - len(listed))
    return Thread(
        follow_up_of=last.id,
        thread_id=thread,
        history=turns,
        dropped_turns=dropped,
        unnamed_dropped=unlisted,
    )


# A chat client that sends the council's answers back (the chat API's conversation) is
# matched to the deliberation that gave them among this many of the namespace's newest
# completed runs, of which at most ANSWER_READS whose question matches have their records
# read: a bounded cost per request, whatever the namespace holds.
ANSWER_SEARCH_RUNS = 200
ANSWER_READS = 3


async def answered(client: Client, question: str, answer: str) -> DeliberationRecord | None:
    """The newest completed deliberation, of the ANSWER_SEARCH_RUNS newest, whose question
    and final answer are exactly these (surrounding whitespace aside); None when there is
    none. A run this client cannot read (another key's memo and record) is passed over."""
    asked, said = question.strip(), answer.strip()
    if not asked or not said:
        return None
    listed = client.list_workflows(
        f'{DELIBERATIONS} AND ExecutionStatus="Completed"',
        limit=ANSWER_SEARCH_RUNS,
        page_size=ANSWER_SEARCH_RUNS,
    )
    reads = 0
    async for execution in listed:
        if await question_of(execution) != asked[:QUESTION_MEMO_CHARS]:
            continue
        try:
            record = await handle(client, execution.id).result()
        except Exception:  # not a record this client can read
            record = None
        final = record.stage3 if record and record.query == asked else None
        if final and final.response.strip() == said:
            return record
        reads += 1
        if reads == ANSWER_READS:
            return None
    return None
