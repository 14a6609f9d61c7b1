"""How many requests one provider is sent at once by this worker process, and when a
call's own time starts.

A call's own time (the straggler rule's, council.stragglers) starts when its request is
sent (AnswerClock): a provider that is silent before its first bytes is as slow to the
council as one that writes slowly, and is cut like it. A server of our own (llama.cpp's,
Ollama, LM Studio, vLLM on this machine or this network) often answers one request at a
time and queues the rest, and a call in its queue is not slow: so the worker keeps that
queue itself. A provider's calls wait here for a free slot, sent only once one is theirs,
and the wait counts for nothing.

How many slots: the provider's `max_concurrent_requests` (council.toml; the default
provider's COUNCIL_LLM_MAX_CONCURRENT_REQUESTS) when it is set, for all the worker
processes of the task queue together: each process takes an equal share (at least one),
from the number of processes the server sees polling the queue (worker.share_slots).
Otherwise a provider on this machine or a private network address gets the number of
slots the server reports (llama.cpp's server and the simulator say it as `total_slots`
under /props) or, when it reports none, one; any other provider gets no limit. A server
that answers one request at a time at an address that is not ours (a tunnel, a rented
GPU) needs `max_concurrent_requests = 1`: sent everything at once, it queues the calls
itself, and their time in its queue is theirs (the last in it may be cut). More worker
processes than the limit are the same case: each still sends one request at a time, and
the server queues the rest. A wait for a slot counts toward the call's timeout
(--call-timeout).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import json
import time
from collections.abc import AsyncIterator
from urllib.parse import urlsplit, urlunsplit

import httpx

from activities.reading import chunks

PROBE_SECONDS = 3.0
MAX_SLOTS = 1024
# /props is a few KB; a server that sends more is not read further.
PROPS_BYTES = 256_000


def self_hosted(base_url: str) -> bool:
    """A base URL on this machine or a private network: a server someone runs themselves."""
    host = (urlsplit(base_url).hostname or "").lower()
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return False
    return address.is_loopback or address.is_private or address.is_link_local


def props_url(base_url: str) -> str:
    """llama.cpp's /props, at the server's root (the base URL without its /v1)."""
    parts = urlsplit(base_url)
    path = parts.path.rstrip("/")
    if path.endswith("/v1"):
        path = path[: -len("/v1")]
    return urlunsplit((parts.scheme, parts.netloc, path + "/props", "", ""))


async def reported_slots(http: httpx.AsyncClient, base_url: str) -> int | None:
    """The number of requests the server says it answers at once, if it says."""
    try:
        async with asyncio.timeout(PROBE_SECONDS):
            body = await _props(http, props_url(base_url))
        slots = json.loads(body).get("total_slots") if body is not None else None
    except (TimeoutError, httpx.HTTPError, ValueError, AttributeError, RecursionError):
        return None
    if isinstance(slots, int) and not isinstance(slots, bool) and 1 <= slots <= MAX_SLOTS:
        return slots
    return None


async def _props(http: httpx.AsyncClient, url: str) -> bytes | None:
    """The body of a 200 from /props, read no further than PROPS_BYTES (None otherwise)."""
    async with http.stream("GET", url, timeout=PROBE_SECONDS) as response:
        if response.status_code != 200:
            return None
        body = b""
        async with chunks(response) as each:
            async for chunk in each:
                body += chunk
                if len(body) > PROPS_BYTES:
                    return None
        return body


class Slots:
    """The provider's slots in this process: its share of the limit, which is for all the
    worker processes of the task queue together (set_workers). `limit` None: decided on
    first use (above)."""

    def __init__(self, limit: int | None, base_url: str) -> None:
        self.base_url = base_url
        self.limit = limit
        self.workers = 1
        self._decided = limit is not None or not self_hosted(base_url)
        self._deciding = asyncio.Lock()
        self._busy = 0
        self._changed = asyncio.Condition()

    @property
    def share(self) -> int | None:
        """The slots of this process: the limit split between the workers (at least one
        each); None: no limit."""
        return None if self.limit is None else max(1, self.limit // self.workers)

    async def set_workers(self, count: int) -> None:
        """How many worker processes share the limit now (their pollers, as the server
        sees them)."""
        async with self._changed:
            self.workers = max(1, count)
            self._changed.notify_all()

    async def decide(self, http: httpx.AsyncClient) -> int | None:
        """The limit, asking the server once if it is ours and none was set."""
        if self._decided:
            return self.limit
        async with self._deciding:
            if not self._decided:
                self.limit = await reported_slots(http, self.base_url) or 1
                self._decided = True
        return self.limit

    @contextlib.asynccontextmanager
    async def turn(self, http: httpx.AsyncClient) -> AsyncIterator[None]:
        """Wait for a free slot (if the provider has a limit), then hold it."""
        await self.decide(http)
        if self.limit is None:
            yield
            return
        async with self._changed:
            await self._changed.wait_for(lambda: self._busy < (self.share or 0))
            self._busy += 1
        try:
            yield
        finally:
            async with self._changed:
                self._busy -= 1
                self._changed.notify()


class AnswerClock:
    """How long the provider has had this attempt's current request: from the moment it
    was sent (after any wait for a slot here, in Slots) to its reply's last bytes. Its
    silence before the first bytes counts: a provider slow to begin, overloaded or queueing
    requests behind others' looks exactly so from here, and a member is cut for it like
    for a slow reply. Each new request of the attempt (asked again unstreamed after a cut
    stream, or in another reply form) starts the clock again."""

    def __init__(self) -> None:
        self._since: float | None = None

    def sent(self) -> None:
        self._since = time.monotonic()

    @property
    def answering(self) -> bool:
        """Whether the request is with the provider (False while it waits for a slot)."""
        return self._since is not None

    def seconds(self) -> float:
        return 0.0 if self._since is None else time.monotonic() - self._since
