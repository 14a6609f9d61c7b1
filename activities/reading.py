"""A reply's bytes, read by a block that may stop early (a cap, a limit, a probe that has
seen enough): the iterator is closed when the block ends, never left to the collector.
And the TLS settings every HTTP client of the worker uses."""

from __future__ import annotations

import contextlib
import functools
import ssl
from collections.abc import AsyncGenerator
from typing import cast

import httpx


def chunks(response: httpx.Response) -> contextlib.aclosing[AsyncGenerator[bytes, None]]:
    """`async with chunks(response) as each: async for chunk in each: ...`. (httpx types
    its iterator as an AsyncIterator; it is an async generator, which has aclose.)"""
    return contextlib.aclosing(cast(AsyncGenerator[bytes, None], response.aiter_bytes()))


@functools.cache
def tls() -> ssl.SSLContext:
    """httpx's TLS defaults (certifi's CA bundle), made once: loading the bundle costs tens
    of milliseconds of CPU a client."""
    return httpx.create_ssl_context()
