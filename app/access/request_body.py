"""A request's body read with a cap: refused as soon as it passes the cap, and before any
of it is read when its Content-Length says it would, so that a caller cannot make a
server hold more than the cap in memory (the codec server, the MCP transport)."""

from __future__ import annotations

from starlette.requests import Request

from council import numbers


class BodyTooLarge(Exception):
    """A body over the cap (the message says the cap, in one line)."""

    def __init__(self, most: int) -> None:
        super().__init__(f"the body is over {most:,} bytes")
        self.most = most


def media_type(request: Request) -> str:
    """The request's Content-Type without its parameters, lower case."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


async def read_body(request: Request, most: int) -> bytes:
    """The whole body, at most `most` bytes (BodyTooLarge beyond; a client that goes away
    raises Starlette's ClientDisconnect)."""
    declared = numbers.whole(request.headers.get("content-length", ""), signed=False)
    if declared is not None and declared > most:
        raise BodyTooLarge(most)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > most:
            raise BodyTooLarge(most)
    return bytes(body)
