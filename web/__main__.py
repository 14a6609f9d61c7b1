"""python -m web [--host H] [--port N]: the web page, on the Temporal server the starter uses.

Reads COUNCIL_WEB_HOST (default 127.0.0.1), COUNCIL_WEB_PORT (8080), COUNCIL_WEB_TOKEN
and COUNCIL_WEB_TOKENS or COUNCIL_WEB_TOKENS_FILE (optional: starting and stopping then
need one of their tokens; app.access.principals), COUNCIL_WEB_ALLOWED_HOSTS (names beyond
loopback and --host that the server answers to, comma-separated),
COUNCIL_WEB_TRUSTED_PROXIES (the reverse proxies whose X-Forwarded-For and
X-Forwarded-Proto count: addresses or networks, comma-separated; none by default, so
that no client can name its own address), COUNCIL_TASK_QUEUE,
COUNCIL_MODELS and COUNCIL_CHAIRMAN (the form's defaults), COUNCIL_UI_URL,
COUNCIL_SIMULATED (1: the members are the bundled simulator's, as `make up` runs them
without a key), and the Temporal and encryption settings of app.temporal.connection. Exit status
2 with one line when a setting cannot be used or the server cannot be reached.
"""

from __future__ import annotations

# First: a Python without Council's packages is told so in one line, and the fix.
from app.installation import dependencies  # noqa: F401  # isort: skip

import argparse
import sys

import uvicorn

from app.access.principals import Principals
from app.installation import commands
from app.settings import config as app_config
from app.settings import environment as app_settings
from app.settings.environment import Settings
from app.temporal import connection
from council.config import ConfigProblem
from council.redaction import redact_logs
from web import guard
from web.app import build_app
from web.settings import WebSettings


def parse_args(
    argv: list[str] | None = None, settings: Settings | None = None
) -> argparse.Namespace:
    settings = settings or app_settings.current()
    parser = argparse.ArgumentParser(
        prog=commands.invoked_as(commands.WEB, "python -m web"),
        description="The Council web page.",
    )
    parser.add_argument("--host", default=settings.web_host)
    # The same rule as COUNCIL_WEB_PORT's.
    parser.add_argument("--port", type=Settings.argument("web_port"), default=settings.web_port)
    return parser.parse_args(argv)


def access_note(host: str, port: int, principals: Principals, public_read: bool = False) -> str:
    known = (
        f"{len(principals)} token(s) of COUNCIL_WEB_TOKEN and COUNCIL_WEB_TOKENS; sign in at /login"
    )
    if principals and public_read:
        return (
            f"starting and stopping need an access token ({known}); anyone who can reach the "
            "page may read every run (COUNCIL_WEB_PUBLIC_READ)"
        )
    if principals:
        return f"reading, starting and stopping need an access token ({known})"
    if guard.loopback(host):
        return (
            f"no COUNCIL_WEB_TOKEN or COUNCIL_WEB_TOKENS: serving on {host} only, so only this "
            "machine can start and stop deliberations"
        )
    return (
        f"no COUNCIL_WEB_TOKEN or COUNCIL_WEB_TOKENS and --host {host}: anyone who can reach "
        f"port {port} can start and stop deliberations; set one"
    )


async def serve(args: argparse.Namespace, variables: Settings) -> None:
    settings = WebSettings.of(variables, args.host, app_config.load(), connection.address())
    proxies = guard.trusted_proxies(variables.web_trusted_proxies)
    client = await connection.connect()
    principals = settings.principals
    redact_logs(principals.tokens())  # not even part of one in a log line
    hosts = settings.allowed_hosts
    app = build_app(client, settings)
    access = access_note(args.host, args.port, principals, variables.web_public_read)
    print(
        f"council web page on http://{args.host}:{args.port} (Temporal {connection.address()}, "
        f"namespace {client.namespace}); {access}; "
        f"answers to the host names {', '.join(hosts)} (more: COUNCIL_WEB_ALLOWED_HOSTS)"
        + (f"; trusts forwarded headers from {', '.join(proxies)}" if proxies else ""),
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        # Forwarded headers only from the proxies named (uvicorn would trust loopback).
        proxy_headers=bool(proxies),
        forwarded_allow_ips=list(proxies),
    )
    await uvicorn.Server(config).serve()


def main(argv: list[str] | None = None) -> int:
    try:
        variables = app_settings.load()
    except app_settings.SettingsError as error:
        print(f"web: {error}", file=sys.stderr)
        return 2
    args = parse_args(argv, variables)
    try:
        connection.run(serve(args, variables))
    except (
        connection.ServerUnreachable,
        connection.ConfigError,
        guard.ConfigError,
        ConfigProblem,
    ) as error:
        print(f"web: {error}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
