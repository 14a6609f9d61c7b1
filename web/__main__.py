"""python -m web [--host H] [--port N]: the web page, on the Temporal server the starter uses.

Reads COUNCIL_WEB_HOST (default 127.0.0.1), COUNCIL_WEB_PORT (8080), COUNCIL_WEB_TOKEN
(optional: starting and stopping then need it), COUNCIL_WEB_ALLOWED_HOSTS (names beyond
loopback and --host that the server answers to, comma-separated),
COUNCIL_WEB_TRUSTED_PROXIES (the reverse proxies whose X-Forwarded-For and
X-Forwarded-Proto count: addresses or networks, comma-separated; none by default, so
that no client can name its own address), COUNCIL_TASK_QUEUE,
COUNCIL_MODELS and COUNCIL_CHAIRMAN (the form's defaults), COUNCIL_UI_URL,
COUNCIL_SIMULATED (1: the members are the bundled simulator's, as `make up` runs them
without a key), and the Temporal and encryption settings of app.connection. Exit status
2 with one line when a setting cannot be used or the server cannot be reached.
"""

from __future__ import annotations

import argparse
import os
import sys

import uvicorn

from app import config as app_config
from app import connection
from council import numbers
from council.config import ConfigProblem
from web import guard
from web.app import Settings, build_app

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080


def _port(value: str) -> int:
    port = numbers.whole(value, signed=False)
    if port is None:
        raise argparse.ArgumentTypeError(f"must be a port number (got {value!r})")
    if not 1 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"must be between 1 and 65535 (got {port})")
    return port


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m web", description="The Council web page.")
    parser.add_argument("--host", default=os.environ.get("COUNCIL_WEB_HOST") or DEFAULT_HOST)
    parser.add_argument(
        "--port", type=_port, default=os.environ.get("COUNCIL_WEB_PORT") or DEFAULT_PORT
    )
    return parser.parse_args(argv)


def access_note(host: str, port: int, token: str | None) -> str:
    if token:
        return "starting and stopping need the access token (COUNCIL_WEB_TOKEN; sign in at /login)"
    if guard.loopback(host):
        return (
            f"no COUNCIL_WEB_TOKEN: serving on {host} only, so only this machine can start and "
            "stop deliberations"
        )
    return (
        f"no COUNCIL_WEB_TOKEN and --host {host}: anyone who can reach port {port} can start and "
        "stop deliberations; set COUNCIL_WEB_TOKEN"
    )


async def serve(args: argparse.Namespace) -> None:
    hosts = guard.allowed_hosts(args.host, os.environ.get("COUNCIL_WEB_ALLOWED_HOSTS"))
    proxies = guard.trusted_proxies(os.environ.get("COUNCIL_WEB_TRUSTED_PROXIES"))
    config = app_config.load()
    client = await connection.connect()
    token = (os.environ.get("COUNCIL_WEB_TOKEN") or "").strip() or None
    settings = Settings(
        task_queue=connection.task_queue(),
        token=token,
        temporal_address=connection.address(),
        allowed_hosts=hosts,
        config=config,
    )
    app = build_app(client, settings)
    print(
        f"council web page on http://{args.host}:{args.port} (Temporal {connection.address()}, "
        f"namespace {client.namespace}); {access_note(args.host, args.port, token)}; "
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
    args = parse_args(argv)
    try:
        connection.run(serve(args))
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
