"""The streamable HTTP transport (`--http HOST:PORT`, the endpoint /mcp) behind the web
page's rules (web.guard), checked in front of every request:

- Host allowlist: loopback names, the host given to --http, COUNCIL_WEB_ALLOWED_HOSTS;
  another name (DNS rebinding) gets a 400.
- A browser's request must come from an allowed origin of this server (403 otherwise).
- With COUNCIL_WEB_TOKEN set, every request carries `Authorization: Bearer TOKEN`,
  compared in constant time (401 otherwise).
- The runs a request starts are its caller's, as the page's and /v1's are
  (web.guard.Guard.tenant): the token's holder, else the client's address; each caller
  its own fairness key, never one for every MCP client.

The SDK's own Host and Origin check is off: these rules replace it, with the page's
allowlist (which the SDK cannot express: `*.domain` patterns).
"""

from __future__ import annotations

import socket

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import ASGIApp, Receive, Scope, Send

from council import numbers
from mcp_server.inputs import Problem
from web.guard import Forbidden, Guard

ENDPOINT = "/mcp"
TOKEN_NEEDED = "this server needs its access token: send Authorization: Bearer <COUNCIL_WEB_TOKEN>"


def listen_address(text: str) -> tuple[str, int]:
    """--http's HOST:PORT (an IPv6 host in brackets) as (host, port)."""
    host, _, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    number = numbers.whole(port, signed=False)
    if not host or number is None or not 1 <= number <= 65535:
        raise Problem(f"--http must be HOST:PORT, such as 127.0.0.1:8765 (got {text!r})")
    return host, number


class Guarded:
    """The rules of this module's docstring, in front of the MCP app."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            request = Request(scope)
            refusal = self.refusal(request)
            if refusal is not None:
                await refusal(scope, receive, send)
                return
            # Whose runs this request starts (mcp_server.runs.caller_of): who it proved to
            # be, never a name or a session it chose itself.
            request.state.tenant = self.guard.tenant(request)
        await self.app(scope, receive, send)

    def refusal(self, request: Request) -> Response | None:
        try:
            self.guard.check_origin(request)
        except Forbidden as refused:
            return PlainTextResponse(str(refused), status_code=403)
        if not self.guard.bearer_given(request):
            return PlainTextResponse(
                TOKEN_NEEDED, status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        return None


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound now so that a port in use is a one-line error at start."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as error:
        raise Problem(f"--http: cannot listen on {host}:{port}: {error.strerror}") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as error:
        sock.close()
        raise Problem(f"--http: cannot listen on {host}:{port}: {error.strerror}") from None
    return sock


async def serve(server: MCPServer, sock: socket.socket, guard: Guard) -> None:
    """Serve the MCP endpoint on `sock` until the process is stopped."""
    app = server.streamable_http_app(
        streamable_http_path=ENDPOINT,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    checked = TrustedHostMiddleware(
        Guarded(app, guard), allowed_hosts=list(guard.allowed), www_redirect=False
    )
    # No forwarded header is believed (uvicorn would believe them from loopback).
    config = uvicorn.Config(checked, log_level="warning", access_log=False, proxy_headers=False)
    await uvicorn.Server(config).serve(sockets=[sock])
