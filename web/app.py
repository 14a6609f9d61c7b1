"""The web server, composed: the pages (web.pages), the live stream (web.live), the
OpenAI-compatible API (web.openai_api), the setup checks (web.doctor), the static files, a
pointer at the MCP server for a client that looks for one at /mcp, and the rules every
route follows (web.guard): the Host allowlist, the write check and the tokens (for reads
too); security headers on every response; Temporal unreachable is a 503 that names the
server.
"""

from __future__ import annotations

from pathlib import Path

from starlette.applications import Starlette
from starlette.datastructures import MutableHeaders
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from temporalio.client import Client
from temporalio.service import RPCError

from app.store import store
from app.temporal import connection
from web.doctor import DoctorPage
from web.guard import Guard, ReadsNeedToken
from web.live import Live
from web.openai_api import OpenAIApi
from web.pages import Pages, templates
from web.settings import WebSettings

HERE = Path(__file__).parent
# Scripts and styles from this server only; nothing inline, no plugins, no framing.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
}

__all__ = ["WebSettings", "build_app"]


def build_app(client: Client, settings: WebSettings) -> Starlette:
    guard = Guard(settings.allowed_hosts, settings.principals, settings.public_read)
    hosts = list(settings.allowed_hosts)
    pages = templates()

    def unavailable(request: Request, said: str, code: int, **more: str) -> Response:
        """The page that says what cannot be reached, in a sentence."""
        message = f"{said[:1].upper()}{said[1:]}."
        context = {"message": message, **more}
        return pages.TemplateResponse(request, "unavailable.html", context, status_code=code)

    async def temporal_error(request: Request, error: Exception) -> Response:
        assert isinstance(error, RPCError)
        said = connection.described(error, settings.temporal_address)
        return unavailable(request, said, 503 if connection.unavailable(error) else 502)

    async def store_error(request: Request, error: Exception) -> Response:
        # A blob the payload store cannot give back: its one line names the store and hash.
        return unavailable(request, str(error), 502, heading="A text cannot be read")

    return Starlette(
        middleware=[
            Middleware(SecurityHeaders),
            Middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False),
            Middleware(ReadsNeedToken, guard=guard),
        ],
        routes=[
            *Pages(client, settings, guard, pages).routes(),
            *Live(client, settings, pages).routes(),
            *DoctorPage(settings, guard, pages).routes(),
            *OpenAIApi(client, settings, guard).routes(),
            Route("/mcp", no_mcp_here, methods=["GET", "POST", "DELETE"]),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        exception_handlers={RPCError: temporal_error, store.StoreError: store_error},
    )


# The MCP server is a process of its own (`starter.py mcp --http HOST:PORT`, the endpoint
# http://HOST:PORT/mcp): a client pointed at the page's /mcp is told so.
NO_MCP_HERE = (
    "no MCP server here: it is a process of its own, `bin/council mcp --http HOST:PORT` "
    "(starter.py mcp), with its endpoint at http://HOST:PORT/mcp (docs/integrations.md)"
)


async def no_mcp_here(request: Request) -> Response:
    return PlainTextResponse(NO_MCP_HERE, status_code=404)


class SecurityHeaders:
    """Adds SECURITY_HEADERS to every response."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        await self.app(scope, receive, sending)
