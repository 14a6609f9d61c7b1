"""The codec server: shows payloads to the Temporal Web UI and CLI of authorized users.

    python -m app.codec_server [--host 127.0.0.1] [--port 8081]

Temporal's remote codec protocol: POST /decode, /encode and /download (also under
/{namespace}/...) take and return {"payloads": [...]} in protobuf JSON. It must run where
the worker's payload store (COUNCIL_STORE; unset: COUNCIL_DATA/store) and its keys
(COUNCIL_PAYLOAD_KEY, COUNCIL_PAYLOAD_KEY_ID, COUNCIL_PAYLOAD_OLD_KEYS) may be read.

- /decode replaces each reference to the payload store by the stored payload, then
  decrypts. The Web UI asks with ?preserveStorageRefs=true: then a stored payload larger
  than a history could hold inline (SHOWN_INLINE_BYTES, Temporal's own 2 MiB limit) stays
  a reference, which the UI shows with its size and a download button. Any other caller
  (the `temporal` CLI) gets every text.
- /download is the UI's download button: the payload in full, whatever its size.
- /encode only encrypts.

Settings:

    COUNCIL_CODEC_PORT          the port unless --port says otherwise (default 8081)
    COUNCIL_CODEC_CORS_ORIGINS  origins of the Web UI allowed to call it (comma-separated;
                                default http://localhost:8233,http://127.0.0.1:8233,
                                http://localhost:8080,http://127.0.0.1:8080)
    COUNCIL_CODEC_TOKEN         when set, every call but /health requires
                                "Authorization: Bearer <token>"

Point the CLI at it with `temporal workflow show --codec-endpoint http://127.0.0.1:8081
--codec-auth "Bearer <token>"` (or TEMPORAL_CODEC_ENDPOINT / TEMPORAL_CODEC_AUTH), the dev
server's UI with `temporal server start-dev --ui-codec-endpoint http://127.0.0.1:8081`
(`make up`, `make demo` and `make server` start both), and the UI container with
TEMPORAL_CODEC_ENDPOINT.
"""

from __future__ import annotations

import argparse
import hmac
import sys
from collections.abc import Mapping, Sequence
from typing import Literal

from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.cors import CORSMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payloads
from temporalio.converter import ExternalStorage, PayloadCodec

from app import settings as app_settings
from app import store
from app.codec import CodecConfigError, CodecError, codec_from_env
from app.settings import CODEC_ORIGINS, Settings, SettingsError
from council import numbers
from council.redaction import redact_logs

DEFAULT_PORT = app_settings.DEFAULT_CODEC_PORT
DEFAULT_ORIGINS = CODEC_ORIGINS
MAX_BODY_BYTES = 64 * 1024 * 1024  # a page of history events, each payload at most 2 MB
# The Web UI sends Authorization-Extras beside the user's own access token (SSO).
ALLOWED_HEADERS = ("Authorization", "Authorization-Extras", "Content-Type", "X-Namespace")
# The largest stored payload /decode gives the Web UI in full: what a history could have
# held inline (the server's blob size limit). Larger ones stay references for /download.
SHOWN_INLINE_BYTES = 2 * 1024 * 1024
Action = Literal["decode", "encode", "download"]


def _settings(env: Settings | Mapping[str, str] | None) -> Settings:
    try:
        return app_settings.of(env)
    except SettingsError as error:
        raise CodecConfigError(str(error)) from None


def cors_origins(env: Settings | Mapping[str, str] | None = None) -> list[str]:
    """The origins of COUNCIL_CODEC_CORS_ORIGINS, each one checked."""
    origins = [o.rstrip("/") for o in _settings(env).codec_cors_origins]
    for origin in origins:
        if origin != "*" and not origin.startswith(("http://", "https://")):
            raise CodecConfigError(
                f"COUNCIL_CODEC_CORS_ORIGINS: {origin!r} is not an origin such as http://localhost:8233"
            )
    return origins


def create_app(
    codec: PayloadCodec | None,
    *,
    storage: ExternalStorage | None = None,
    origins: Sequence[str] = DEFAULT_ORIGINS,
    token: str | None = None,
) -> Starlette:
    expected = f"Bearer {token}".encode() if token else None

    def authorized(request: Request) -> bool:
        if expected is None:
            return True
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)

    async def transform(request: Request, action: Action) -> Response:
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
        preserve = request.query_params.get("preserveStorageRefs", "").lower() == "true"
        keep_over = SHOWN_INLINE_BYTES if action == "decode" and preserve else None
        try:
            result = list(payloads.payloads)
            if action != "encode":
                result = await store.resolve(storage, result, codec, keep_over=keep_over)
            if codec is not None:
                result = await (codec.encode if action == "encode" else codec.decode)(result)
        except (CodecError, store.StoreError) as err:
            return PlainTextResponse(str(err), status_code=400)
        return Response(
            json_format.MessageToJson(Payloads(payloads=result)),
            media_type="application/json",
        )

    async def decode(request: Request) -> Response:
        return await transform(request, "decode")

    async def encode(request: Request) -> Response:
        return await transform(request, "encode")

    async def download(request: Request) -> Response:
        return await transform(request, "download")

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    routes = [
        Route("/decode", decode, methods=["POST"]),
        Route("/encode", encode, methods=["POST"]),
        Route("/{namespace}/decode", decode, methods=["POST"]),
        Route("/{namespace}/encode", encode, methods=["POST"]),
        Route("/download", download, methods=["POST"]),
        Route("/{namespace}/download", download, methods=["POST"]),
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


def app_from_env(env: Settings | Mapping[str, str] | None = None) -> Starlette:
    settings = _settings(env)
    codec = codec_from_env(settings)
    storage = store.external_storage(settings)
    token = settings.secret("codec_token")
    redact_logs([token] if token else [])  # not even part of it in a log line
    return create_app(codec, storage=storage, origins=cors_origins(settings), token=token)


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
        help=f"port (default COUNCIL_CODEC_PORT, else {DEFAULT_PORT})",
    )
    args = parser.parse_args(argv)
    try:
        settings = app_settings.load()
        app = app_from_env(settings)
    except (CodecConfigError, SettingsError) as err:
        print(f"codec server: {err}", file=sys.stderr)
        return 2
    import uvicorn

    port = args.port if args.port is not None else settings.codec_port
    token = "required" if settings.codec_token else "not required"
    print(
        f"codec server on http://{args.host}:{port} (POST /decode, /encode, /download; "
        f"token {token}; payload store {store.location(settings)}; "
        f"CORS for {', '.join(cors_origins(settings))})",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
