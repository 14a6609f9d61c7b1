"""`starter.py mcp`: read the settings, connect to Temporal, then serve the tools on
stdio (stdout carries the protocol alone; notes and logs go to stderr) or, with
`--http HOST:PORT`, on the streamable HTTP transport.

Settings that cannot be used raise Problem (or app.temporal.connection's and council.config's
errors) before anything is served: the command exits 2 with one line.
"""

from __future__ import annotations

from app.access.principals import Principals
from app.settings import config as app_config
from app.settings import environment as app_settings
from app.temporal import connection
from council.config import Config
from council.redaction import redact_logs
from mcp_server import http_transport
from mcp_server.inputs import Problem
from mcp_server.runs import Backend
from mcp_server.tools import build_server, note
from web import guard


def access_note(host: str, principals: Principals) -> str:
    if principals:
        return (
            f"every request needs an access token (Authorization: Bearer; {len(principals)} "
            "token(s) of COUNCIL_WEB_TOKEN and COUNCIL_WEB_TOKENS)"
        )
    if guard.loopback(host):
        return (
            f"no COUNCIL_WEB_TOKEN or COUNCIL_WEB_TOKENS: serving on {host} only, so only this "
            "machine can call it"
        )
    return (
        f"no COUNCIL_WEB_TOKEN or COUNCIL_WEB_TOKENS and --http {host}: anyone who can reach the "
        "port can start and stop deliberations; set one"
    )


def http_guard(host: str) -> guard.Guard:
    """The page's rules for a server on `host`: its Host allowlist and token."""
    settings = app_settings.current()
    try:
        hosts = guard.allowed_hosts(host, settings.web_allowed_hosts)
    except guard.ConfigError as error:
        raise Problem(str(error)) from None
    return guard.Guard(hosts, guard.principals_of(settings))


async def serve(http: str | None) -> None:
    """Serve until the client hangs up (stdio) or the process is stopped (HTTP)."""
    if http is None:
        await serve_stdio()
    else:
        await serve_http(*http_transport.listen_address(http))


async def serve_stdio() -> None:
    config = app_config.load()
    backend = await connect(config)
    note(f"council MCP server on stdio ({described(backend)})")
    await build_server(backend).run_stdio_async()


async def serve_http(host: str, port: int) -> None:
    rules = http_guard(host)
    redact_logs(rules.principals.tokens())  # not even part of one in a log line
    config = app_config.load()
    with http_transport.listening_socket(host, port) as sock:
        backend = await connect(config)
        shown = f"[{host}]" if ":" in host else host
        note(
            f"council MCP server on http://{shown}:{port}{http_transport.ENDPOINT} "
            f"({described(backend)}); {access_note(host, rules.principals)}; answers to the host "
            f"names {', '.join(rules.allowed)} (more: COUNCIL_WEB_ALLOWED_HOSTS)"
        )
        await http_transport.serve(build_server(backend), sock, rules)


async def connect(config: Config) -> Backend:
    client = await connection.connect()
    return Backend(client, config, app_settings.current(), connection.address())


def described(backend: Backend) -> str:
    return (
        f"Temporal {backend.address}, namespace {backend.client.namespace}, task queue "
        f"{backend.task_queue}"
    )
