"""The codec server: decrypts payloads for the Temporal Web UI and CLI of authorized users.

    python -m app.codec_server [--host 127.0.0.1] [--port 8081]

Temporal's remote codec protocol: POST /decode and POST /encode (also under
/{namespace}/...) take and return {"payloads": [...]} in protobuf JSON. It uses the same
keys as the worker (COUNCIL_PAYLOAD_KEY, COUNCIL_PAYLOAD_KEY_ID, COUNCIL_PAYLOAD_OLD_KEYS),
so it must run where those keys may live. Settings:

    COUNCIL_CODEC_CORS_ORIGINS  origins of the Web UI allowed to call it (comma-separated;
                                default http://localhost:8233,http://127.0.0.1:8233,
                                http://localhost:8080,http://127.0.0.1:8080)
    COUNCIL_CODEC_TOKEN         when set, /encode and /decode require
                                "Authorization: Bearer <token>"

Point the CLI at it with `temporal workflow show --codec-endpoint http://127.0.0.1:8081
--codec-auth "Bearer <token>"` (or TEMPORAL_CODEC_ENDPOINT / TEMPORAL_CODEC_AUTH), the dev
server's UI with `temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8081`,
and the UI container with TEMPORAL_CODEC_ENDPOINT.
"""

from __future__ import annotations

import argparse
import hmac
import os
import sys
from collections.abc import Mapping, Sequence

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payloads
from temporalio.converter import PayloadCodec

from app.codec import CodecConfigError, CodecError, codec_from_env
from council import numbers

DEFAULT_PORT = 8081
DEFAULT_ORIGINS = (
    "http://localhost:8233",
    "http://127.0.0.1:8233",
    "http://localhost:8080",
    "http://127.0.0.1:8080",
)
MAX_BODY_BYTES = 64 * 1024 * 1024  # a page of history events, each payload at most 2 MB
ALLOWED_HEADERS = ("Authorization", "Content-Type", "X-Namespace")


def cors_origins(env: Mapping[str, str] | None = None) -> list[str]:
    env = os.environ if env is None else env
    value = (env.get("COUNCIL_CODEC_CORS_ORIGINS") or "").strip()
    if not value:
        return list(DEFAULT_ORIGINS)
    origins = [o.strip().rstrip("/") for o in value.split(",") if o.strip()]
    for origin in origins:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            raise CodecConfigError(
                f"COUNCIL_CODEC_CORS_ORIGINS: {origin!r} is not an origin such as http://localhost:8233"
            )
    return origins


def create_app(
    codec: PayloadCodec,
    *,
    origins: Sequence[str] = DEFAULT_ORIGINS,
    token: str | None = None,
) -> Starlette:
    expected = f"Bearer {token}".encode() if token else None

    def authorized(request: Request) -> bool:
        if expected is None:
            return True
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)

    async def transform(request: Request, encode: bool) -> Response:
        if not authorized(request):
            return PlainTextResponse(
                "unauthorized", status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        body = await request.body()
        if len(body) > MAX_BODY_BYTES:
            return PlainTextResponse("request body too large", status_code=413)
        try:
            payloads = json_format.Parse(body, Payloads(), ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError):
            return PlainTextResponse('expected a JSON body {"payloads": [...]}', status_code=400)
        try:
            result = await (codec.encode if encode else codec.decode)(payloads.payloads)
        except CodecError as err:
            return PlainTextResponse(str(err), status_code=400)
        return Response(
            json_format.MessageToJson(Payloads(payloads=result)),
            media_type="application/json",
        )

    async def decode(request: Request) -> Response:
        return await transform(request, encode=False)

    async def encode(request: Request) -> Response:
        return await transform(request, encode=True)

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [
        Route("/decode", decode, methods=["POST"]),
        Route("/encode", encode, methods=["POST"]),
        Route("/{namespace}/decode", decode, methods=["POST"]),
        Route("/{namespace}/encode", encode, methods=["POST"]),
        Route("/health", health, methods=["GET"]),
    ]
    # CORS wraps everything, so a browser's preflight (OPTIONS, no credentials) passes
    # without the token, and error responses still carry the CORS headers.
    middleware = [
        Middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["POST", "GET"],
            allow_headers=list(ALLOWED_HEADERS),
            allow_credentials="*" not in origins,
            max_age=600,
        )
    ]
    return Starlette(routes=routes, middleware=middleware)


def app_from_env(env: Mapping[str, str] | None = None) -> Starlette:
    env = os.environ if env is None else env
    codec = codec_from_env(env)
    if codec is None:
        raise CodecConfigError(
            "COUNCIL_PAYLOAD_KEY is not set: the codec server needs the key the worker encrypts "
            "with"
        )
    token = (env.get("COUNCIL_CODEC_TOKEN") or "").strip() or None
    return create_app(codec, origins=cors_origins(env), token=token)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.codec_server", description=__doc__.split("\n")[0]
    )
    parser.add_argument(
        "--host", default="127.0.0.1", help="interface to listen on (default 127.0.0.1)"
    )
    parser.add_argument(
        "--port",
        type=numbers.whole_argument,
        default=DEFAULT_PORT,
        help=f"port (default {DEFAULT_PORT})",
    )
    args = parser.parse_args(argv)
    try:
        app = app_from_env()
    except CodecConfigError as err:
        print(f"codec server: {err}", file=sys.stderr)
        return 2
    import uvicorn

    token = "required" if os.environ.get("COUNCIL_CODEC_TOKEN", "").strip() else "not required"
    print(
        f"codec server on http://{args.host}:{args.port} (POST /decode, /encode; "
        f"token {token}; CORS for {', '.join(cors_origins())})",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=args.port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
