"""The codec server: shows payloads to the Temporal Web UI and CLI of authorized users.

    python -m app.codec.server [--host 127.0.0.1] [--port 8081]

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

Who it answers, before a body is read (one hostile caller must not read, or slow, it):

- Host: this machine's loopback names, the host given to --host and
  COUNCIL_CODEC_ALLOWED_HOSTS, by the web page's rule (app.access.hosts); any other Host (a page
  on a name that resolves here) gets a 400.
- Origin: a browser's call must come from an origin of COUNCIL_CODEC_CORS_ORIGINS (403
  otherwise); a call without one (the `temporal` CLI, a script) is not a browser's.
- The token, when set (401). The body must be application/json (415): a page elsewhere
  cannot send JSON without a preflight that CORS refuses, while text/plain and forms
  need none.
- The body is read up to MAX_BODY_BYTES and refused (413) as soon as it passes them, or
  at once when its Content-Length says so.
- A reference is read only within the call's namespace (the /NAMESPACE/ path, or
  X-Namespace: what the UI and the CLI send) and, with an S3 store, the store's bucket;
  another is refused in one line (403), and a call naming no namespace reads none.

Settings:

    COUNCIL_CODEC_PORT          the port unless --port says otherwise (default 8081)
    COUNCIL_CODEC_CORS_ORIGINS  origins of the Web UI allowed to call it (comma-separated;
                                default http://localhost:8233,http://127.0.0.1:8233,
                                http://localhost:8080,http://127.0.0.1:8080)
    COUNCIL_CODEC_TOKEN         when set, every call but /health requires
                                "Authorization: Bearer <token>"
    COUNCIL_CODEC_ALLOWED_HOSTS more Host names it answers to (comma-separated;
                                *.example.com for a domain's subdomains)

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
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from temporalio.api.common.v1 import Payloads
from temporalio.converter import ExternalStorage, PayloadCodec

from app.access import hosts, request_body
from app.access.hosts import LOOPBACK_HOSTS
from app.codec.encryption import CodecConfigError, CodecError, codec_from_env
from app.settings import environment as app_settings
from app.settings.environment import CODEC_ORIGINS, Settings, SettingsError
from app.store import store
from council import numbers
from council.redaction import redact_logs

DEFAULT_PORT = app_settings.DEFAULT_CODEC_PORT
DEFAULT_ORIGINS = CODEC_ORIGINS
ORIGINS_VARIABLE = Settings.variables()["codec_cors_origins"]
HOSTS_VARIABLE = Settings.variables()["codec_allowed_hosts"]
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
    hosts: Sequence[str] = LOOPBACK_HOSTS,
) -> Starlette:
    """The server: `hosts` are the Host names it answers to (app.access.hosts.allowed_hosts),
    `origins` the pages that may call it (COUNCIL_CODEC_CORS_ORIGINS)."""
    expected = f"Bearer {token}".encode() if token else None
    any_origin = "*" in origins
    allowed_origins = {origin.lower() for origin in origins}

    def authorized(request: Request) -> bool:
        if expected is None:
            return True
        given = request.headers.get("authorization", "").encode()
        return hmac.compare_digest(given, expected)

    def refusal(request: Request) -> Response | None:
        """The rules every call meets before its body is read (the module's docstring)."""
        origin = request.headers.get("origin")
        if origin is not None and not any_origin and origin.lower() not in allowed_origins:
            return PlainTextResponse(
                f"refused: a request from another origin ({origin[:100]}); the origins "
                f"allowed are {ORIGINS_VARIABLE}'s",
                status_code=403,
            )
        if not authorized(request):
            return PlainTextResponse(
                "unauthorized", status_code=401, headers={"WWW-Authenticate": "Bearer"}
            )
        if request_body.media_type(request) != "application/json":
            return PlainTextResponse(
                "the body must be JSON: send Content-Type: application/json", status_code=415
            )
        return None

    async def transform(request: Request, action: Action) -> Response:
        refused = refusal(request)
        if refused is not None:
            return refused
        try:
            body = await request_body.read_body(request, MAX_BODY_BYTES)
        except request_body.BodyTooLarge as too_large:
            return PlainTextResponse(str(too_large), status_code=413)
        except ClientDisconnect:
            return PlainTextResponse("the body did not arrive whole", status_code=400)
        try:
            namespace = request_namespace(request)
        except ValueError as mixed:
            return PlainTextResponse(str(mixed), status_code=400)
        try:
            payloads = json_format.Parse(body, Payloads(), ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError):
            return PlainTextResponse('expected a JSON body {"payloads": [...]}', status_code=400)
        preserve = request.query_params.get("preserveStorageRefs", "").lower() == "true"
        keep_over = SHOWN_INLINE_BYTES if action == "decode" and preserve else None
        try:
            result = list(payloads.payloads)
            if action != "encode":
                result = await store.resolve(
                    storage, result, codec, namespace=namespace, keep_over=keep_over
                )
            if codec is not None:
                result = await (codec.encode if action == "encode" else codec.decode)(result)
        except store.OutsideReference as outside:
            return PlainTextResponse(str(outside), status_code=403)
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
    middleware = [
        # Another name that resolves here (DNS rebinding) gets a 400, preflights included.
        Middleware(TrustedHostMiddleware, allowed_hosts=list(hosts), www_redirect=False),
        # CORS wraps the routes, so a browser's preflight (OPTIONS, no credentials) passes
        # without the token, and error responses still carry the CORS headers.
        Middleware(
            CORSMiddleware,
            allow_origins=list(origins),
            allow_methods=["POST", "GET"],
            allow_headers=list(ALLOWED_HEADERS),
            allow_credentials=not any_origin,
            max_age=600,
        ),
    ]
    return Starlette(routes=routes, middleware=middleware)


def request_namespace(request: Request) -> str | None:
    """The namespace a call is for: the path's (/NAMESPACE/decode, as the `temporal` CLI
    sends it) or X-Namespace (the Web UI and the CLI); None when it names none. A call
    that names two different ones is refused (ValueError)."""
    in_path = request.path_params.get("namespace") or None
    in_header = request.headers.get("x-namespace") or None
    if in_path and in_header and in_path != in_header:
        raise ValueError(
            f"the path names namespace {in_path[:100]!r} and X-Namespace {in_header[:100]!r}: "
            "one namespace per request"
        )
    return in_path or in_header


def app_from_env(
    env: Settings | Mapping[str, str] | None = None, bind_host: str = "127.0.0.1"
) -> Starlette:
    settings = _settings(env)
    codec = codec_from_env(settings)
    storage = store.external_storage(settings)
    token = settings.secret("codec_token")
    redact_logs([token] if token else [])  # not even part of it in a log line
    return create_app(
        codec,
        storage=storage,
        origins=cors_origins(settings),
        token=token,
        hosts=allowed_hosts(bind_host, settings),
    )


def allowed_hosts(bind_host: str, env: Settings | Mapping[str, str] | None = None) -> list[str]:
    """The Host names the server answers to: loopback, `bind_host` (unless every address)
    and COUNCIL_CODEC_ALLOWED_HOSTS, by the web page's rule (app.access.hosts)."""
    try:
        return list(
            hosts.allowed_hosts(bind_host, _settings(env).codec_allowed_hosts, HOSTS_VARIABLE)
        )
    except hosts.ConfigError as error:
        raise CodecConfigError(str(error)) from None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m app.codec.server", description=__doc__.split("\n")[0]
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
        app = app_from_env(settings, bind_host=args.host)
    except (CodecConfigError, SettingsError) as err:
        print(f"codec server: {err}", file=sys.stderr)
        return 2
    import uvicorn

    port = args.port if args.port is not None else settings.codec_port
    token = "required" if settings.codec_token else "not required"
    print(
        f"codec server on http://{args.host}:{port} (POST /decode, /encode, /download; "
        f"token {token}; payload store {store.location(settings)}; "
        f"CORS for {', '.join(cors_origins(settings))}; "
        f"answers to the host names {', '.join(allowed_hosts(args.host, settings))})",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.run(app, host=args.host, port=port, log_level="warning")
    return 0


if __name__ == "__main__":
    sys.exit(main())
