"""An MCP server that answers as a hostile (or careless) one may: `flood(size)` returns one
text of `size` bytes, a single JSON-RPC message on a single line; `small()` a short one.
It is its own process, so that what it costs to make the message is not counted as the
client's.

    python tests/hostile_mcp.py stdio
    python tests/hostile_mcp.py http json|sse     # prints its port, then serves 127.0.0.1:
                                                  # replies in JSON, or as event streams

With PID_FILE in its environment it writes its process id there first.

(tests/test_mcp_bombs.py, and bench/bombs.py for the figures.)
"""

from __future__ import annotations

import os
import socket
import sys
from typing import Any

if "PID_FILE" in os.environ:
    with open(os.environ["PID_FILE"], "w") as pid_file:
        pid_file.write(str(os.getpid()))

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from starlette.types import ASGIApp, Message, Receive, Scope, Send

READ_ONLY = ToolAnnotations(read_only_hint=True)
server = MCPServer("hostile", log_level="WARNING")


@server.tool(annotations=READ_ONLY)
def flood(size: int) -> CallToolResult:
    """One text of `size` bytes."""
    return CallToolResult(content=[TextContent(text="x" * size)])


@server.tool(annotations=READ_ONLY)
def small() -> str:
    """A short answer."""
    return "small"


def as_event_stream(app: ASGIApp) -> ASGIApp:
    """Every JSON reply as an event stream of one event (the SDK's server answers a call
    with nothing to stream before its result in JSON)."""

    async def streamed(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        start: dict[str, Any] = {}
        body = bytearray()

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
                headers = dict(message.get("headers", []))
                if headers.get(b"content-type", b"").startswith(b"application/json"):
                    return  # held until the body is in
                start.clear()
            elif start and message["type"] == "http.response.body":
                body.extend(message.get("body", b""))
                if message.get("more_body"):
                    return
                kept = [(k, v) for k, v in start["headers"] if k.lower() != b"content-length"]
                kept = [(k, v) for k, v in kept if k.lower() != b"content-type"]
                events = b"event: message\r\ndata: " + bytes(body) + b"\r\n\r\n"
                await send(
                    {
                        "type": "http.response.start",
                        "status": start["status"],
                        "headers": [*kept, (b"content-type", b"text/event-stream")],
                    }
                )
                await send({"type": "http.response.body", "body": events})
                return
            await send(message)

        await app(scope, receive, sending)

    return streamed


def serve_http(answers: str) -> None:
    import uvicorn

    listening = socket.create_server(("127.0.0.1", 0))
    print(listening.getsockname()[1], flush=True)
    app: ASGIApp = server.streamable_http_app(host="127.0.0.1", json_response=True)
    if answers == "sse":
        app = as_event_stream(app)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[listening])


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run()
    else:
        serve_http(sys.argv[2])
