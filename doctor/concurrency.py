"""Whether a provider answers several requests at once, or one at a time.

Two small streamed requests go out together. A server that answers several at once
begins the second while the first still streams; one that answers one at a time (a
llama.cpp or LM Studio server with one slot, a small Ollama) holds the second back until
the first has ended: its first data comes after the first reply's end. A reply begins
with its first data event, not its headers, since some servers send the headers of a
request they have only queued. What one pair shows is confirmed by a second pair before
a server is called one-at-a-time, since a provider's time to the first token varies
(the later request of a pair can begin after a short reply ended by chance). The replies
are read only as far as the answer needs: both requests are closed once it is known.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import httpx

from activities.errors import status_failure
from activities.llm_client import request_body
from activities.settings import GatewaySettings
from council.calls import ChatMessage, ModelCall

# A reply long enough to still stream when the other request of the pair begins.
QUESTION = "Count from 1 to 40, the numbers separated by spaces."
REPLY_TOKENS = 64
PAIRS = 2
# The most of an error reply read, to say why a request failed.
ERROR_BYTES = 16_000


@dataclass
class _Stream:
    """What one streamed request has shown so far (time.monotonic())."""

    began: float | None = None  # its first data event
    ended: float | None = None  # the end of its reply
    problem: str | None = None  # why it gave no usable stream


@dataclass(frozen=True)
class Overlap:
    """What the pairs showed: answered together or one at a time, or why it is not known."""

    together: bool | None
    why_unknown: str | None = None


async def _follow(
    http: httpx.AsyncClient,
    settings: GatewaySettings,
    body: dict[str, object],
    stream: _Stream,
    changed: asyncio.Event,
) -> None:
    try:
        async with http.stream(
            "POST", settings.chat_url, json=body, headers=settings.headers(stream=True)
        ) as response:
            if not 200 <= response.status_code < 300:
                read = bytearray()
                async for chunk in response.aiter_bytes():
                    read += chunk
                    if len(read) > ERROR_BYTES:
                        break
                failure = status_failure(response.status_code, bytes(read), host=settings.host)
                stream.problem = f"HTTP {response.status_code}: {failure.detail}"
                return
            if "event-stream" not in response.headers.get("content-type", "").lower():
                stream.problem = "the provider does not stream its replies"
                return
            async for line in response.aiter_lines():
                if not line.startswith("data:"):
                    continue  # blank lines, and comments some servers send while they wait
                if line.removeprefix("data:").strip() == "[DONE]":
                    break
                if stream.began is None:
                    stream.began = time.monotonic()
                    changed.set()
            stream.ended = time.monotonic()
            if stream.began is None:
                stream.problem = "a streamed reply held no data"
    except httpx.HTTPError as error:
        stream.problem = f"the request failed ({type(error).__name__}: {error})"
    finally:
        changed.set()


async def _pair(http: httpx.AsyncClient, settings: GatewaySettings, model: str) -> Overlap:
    """Two requests at once: did the later one begin before the earlier one ended?"""
    call = ModelCall(
        model=model,
        messages=[ChatMessage(role="user", content=QUESTION)],
        max_tokens=REPLY_TOKENS,
    )
    body = request_body(call, settings, stream=True)
    streams = [_Stream(), _Stream()]
    changed = asyncio.Event()
    tasks = [asyncio.create_task(_follow(http, settings, body, s, changed)) for s in streams]
    try:
        while True:
            await changed.wait()
            changed.clear()
            problem = next((s.problem for s in streams if s.problem), None)
            if problem is not None:
                return Overlap(None, problem)
            if all(s.began is not None for s in streams):
                first, second = sorted(streams, key=lambda s: s.began or 0.0)
                # Both began: together unless the first had ended before the second began.
                ended = first.ended is not None and first.ended <= (second.began or 0.0)
                return Overlap(not ended)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def answered_together(
    http: httpx.AsyncClient, settings: GatewaySettings, model: str, seconds: float
) -> Overlap:
    """Whether the provider answers two of `model`'s requests at once (together: True),
    one at a time (False, seen in each of PAIRS pairs), or it cannot be told (None, with
    why), within `seconds`."""
    try:
        async with asyncio.timeout(seconds):
            for _ in range(PAIRS):
                seen = await _pair(http, settings, model)
                if seen.together is not False:
                    return seen
            return seen
    except TimeoutError:
        return Overlap(None, f"the test requests took longer than {seconds:g} s")
