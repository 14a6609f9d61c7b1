"""The streamable HTTP transport (`--http HOST:PORT`, the endpoint /mcp) behind the web
page's rules (web.guard), checked in front of every request:

- Host allowlist: loopback names, the host given to --http, COUNCIL_WEB_ALLOWED_HOSTS;
  another name (DNS rebinding) gets a 400.
- A browser's request must come from an allowed origin of this server (403 otherwise).
- With COUNCIL_WEB_TOKEN or named tokens (COUNCIL_WEB_TOKENS) set, every request carries
  one of them as `Authorization: Bearer TOKEN`, compared in constant time (401 otherwise);
  a client that sent too many wrong ones is refused for a while (429, web.guard).
- A request's body is at most MAX_BODY_BYTES, enough for a question and attachments at
  their limits (the SDK's own cap, 4 MiB, is below them); a larger one is refused as it
  arrives with a JSON-RPC error in one line (HTTP 413), which MCP clients show as such.
- The runs a request starts are its caller's, as the page's and /v1's are
  (web.guard.Guard.tenant): the principal whose token it sent (by its name), else, on a
  server without tokens, the client's address; never one key for every MCP client.

The SDK's own Host and Origin check is off: these rules replace it, with the page's
allowlist (which the SDK cannot express: `*.domain` patterns).
"""

from __future__ import annotations

import socket

import uvicorn
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp.types import INVALID_REQUEST
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.access import request_body
from council import limits, numbers
from mcp_server.inputs import Problem
from web.guard import Forbidden, Guard, TooManyFailures, too_many

ENDPOINT = "/mcp"
TOKEN_NEEDED = (
    "this server needs an access token: send Authorization: Bearer TOKEN (COUNCIL_WEB_TOKEN, "
    "or your own of COUNCIL_WEB_TOKENS)"
)
# A tool call with the question at its limit, every character escaped in JSON (six bytes
# each), room for the other arguments, and the attachments at their limit in all, each
# byte counted twice: base64 takes 4/3 of a file, and a text's escapes (newlines, quotes)
# rarely more.
MAX_BODY_BYTES = 6 * limits.QUESTION_MAX_CHARS + 1_000_000 + 2 * limits.MAX_ATTACHMENTS_TOTAL_BYTES


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
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request = Request(scope, receive)
        refusal = self.refusal(request)
        if refusal is None and request.method == "POST":
            try:
                body = await request_body.read_body(request, MAX_BODY_BYTES)
            except request_body.BodyTooLarge as too_large:
                refusal = too_large_answer(too_large)
            except ClientDisconnect:
                return
            else:
                receive = replaying(body, receive)
        if refusal is not None:
            await refusal(scope, receive, send)
            return
        # Whose runs this request starts (mcp_server.runs.caller_of): who it proved to be,
        # never a name or a session it chose itself.
        request.state.tenant = self.guard.tenant(request, session=False)
        await self.app(scope, receive, send)

    def refusal(self, request: Request) -> Response | None:
        try:
            self.guard.check_origin(request)
        except Forbidden as refused:
            return PlainTextResponse(str(refused), status_code=403)
        try:
            given = self.guard.token_given(request, session=False)
        except TooManyFailures as refused:
            return too_many(refused)
        if not given:
            return PlainTextResponse(
                TOKEN_NEEDED, status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        return None


def too_large_answer(too_large: request_body.BodyTooLarge) -> Response:
    """A body over the cap, as a JSON-RPC error (its id unread: null) that clients show."""
    message = (
        f"{too_large}: the most an MCP request over HTTP may carry (a question and "
        "attachments at their limits fit)"
    )
    return JSONResponse(
        {"jsonrpc": "2.0", "id": None, "error": {"code": INVALID_REQUEST, "message": message}},
        status_code=413,
    )


def replaying(body: bytes, receive: Receive) -> Receive:
    """A `receive` that gives the body already read, then what the client sends next (its
    disconnect)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def listening_socket(host: str, port: int) -> socket.socket:
    """The server's socket, bound now so that a port in use is a one-line error at start."""
    sock = None
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as error:
        if sock is not None:
            sock.close()
        raise Problem(f"--http: cannot listen on {host}:{port}: {error.strerror}") from None
    return sock


async def serve(server: MCPServer, sock: socket.socket, guard: Guard) -> None:
    """Serve the MCP endpoint on `sock` until the process is stopped."""
    app = server.streamable_http_app(
        streamable_http_path=ENDPOINT,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        max_request_body_size=MAX_BODY_BYTES,
    )
    checked = TrustedHostMiddleware(
        Guarded(app, guard), allowed_hosts=list(guard.allowed), www_redirect=False
    )
    # No forwarded header is believed (uvicorn would believe them from loopback).
    config = uvicorn.Config(checked, log_level="warning", access_log=False, proxy_headers=False)
    await uvicorn.Server(config).serve(sockets=[sock])
