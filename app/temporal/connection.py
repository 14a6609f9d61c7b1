"""Connecting to Temporal: the environment contract and the data converter.

The client's connection comes from the Temporal SDK's environment configuration
(temporalio.envconfig): TEMPORAL_ADDRESS, TEMPORAL_NAMESPACE, TEMPORAL_API_KEY,
TEMPORAL_TLS*, TEMPORAL_GRPC_META_*, and the TOML profiles chosen by TEMPORAL_PROFILE and
TEMPORAL_CONFIG_FILE; with none of them, localhost:7233 and the namespace `default`.
The data converter (pydantic JSON, AES-GCM encrypted when COUNCIL_PAYLOAD_KEY is set,
large payloads in the payload store of app.store) is built here, once, for the worker,
the starter, the demo and the replay tests.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import gc
import logging
import os
import re
from collections.abc import Coroutine, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import TypeAdapter
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest
from temporalio.client import Client
from temporalio.contrib.pydantic import PydanticJSONPlainPayloadConverter
from temporalio.converter import (
    CompositePayloadConverter,
    DataConverter,
    DefaultFailureConverterWithEncodedAttributes,
    DefaultPayloadConverter,
    JSONPlainPayloadConverter,
)
from temporalio.envconfig import ClientConfigProfile
from temporalio.runtime import (
    LogForwardingConfig,
    LoggingConfig,
    PrometheusConfig,
    Runtime,
    TelemetryConfig,
)
from temporalio.service import RPCError, RPCStatusCode

from app.codec.encryption import CodecConfigError, codec_from_env
from app.settings import environment as app_settings
from app.settings.environment import DEFAULT_METRICS_HOST, Settings
from app.store import store

DEFAULT_ADDRESS = "localhost:7233"
DEFAULT_NAMESPACE = "default"
# host:port, the host a name, an IPv4 address or a bracketed IPv6 address.
_ADDRESS = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9][A-Za-z0-9.\-_]*):\d{1,5}")
T = TypeVar("T")


class ServerUnreachable(RuntimeError):
    """The Temporal server did not answer; the message names the address."""


class ConfigError(ValueError):
    """A connection or encryption setting that cannot be used: a one-line message that
    names the variable (or the config file) and never contains a secret."""


class NamespaceNotFound(ConfigError):
    """The server answers but has no such namespace (TEMPORAL_NAMESPACE)."""


def unavailable(error: RPCError) -> bool:
    """The Temporal server did not answer (as opposed to answering no)."""
    return error.status in (RPCStatusCode.UNAVAILABLE, RPCStatusCode.DEADLINE_EXCEEDED)


def described(error: RPCError, at: str | None = None) -> str:
    """What a Temporal error means for the user, in one line that names the server: it
    does not answer (unavailable), or it refused the request. Every surface says this."""
    where = at or address()
    if unavailable(error):
        return (
            f"the Temporal server at {where} does not answer: start it (make server) or check "
            "TEMPORAL_ADDRESS"
        )
    return f"the Temporal server at {where} refused the request ({error.status.name})"


def task_queue() -> str:
    """The task queue new deliberations go to, and the worker polls (COUNCIL_TASK_QUEUE)."""
    return app_settings.current().task_queue


TLS_FILES = (
    "TEMPORAL_TLS_CLIENT_CERT_PATH",
    "TEMPORAL_TLS_CLIENT_KEY_PATH",
    "TEMPORAL_TLS_SERVER_CA_CERT_PATH",
)


def connect_options(env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Client.connect arguments from TEMPORAL_* variables and config profiles (envconfig).

    An empty TEMPORAL_* variable counts as unset (a compose file passes `${VAR:-}`).
    """
    env = os.environ if env is None else env
    present = {k: v for k, v in env.items() if not k.startswith("TEMPORAL_") or v.strip()}
    tls = present.get("TEMPORAL_TLS", "").strip().lower()
    if tls and tls not in ("true", "false", "1", "0"):
        raise ConfigError(f"TEMPORAL_TLS must be true or false (got {present['TEMPORAL_TLS']!r})")
    config_file = present.get("TEMPORAL_CONFIG_FILE")
    if config_file and not Path(config_file).is_file():
        raise ConfigError(f"TEMPORAL_CONFIG_FILE: no such file: {config_file}")
    try:
        profile = ClientConfigProfile.load(override_env_vars=present)
        options: dict[str, Any] = dict(profile.to_client_connect_config())
    except OSError as err:
        named = [v for v in TLS_FILES if present.get(v) == getattr(err, "filename", None)]
        where = named[0] if named else "a TLS file of the Temporal config profile"
        raise ConfigError(f"{where}: cannot read {err.filename}: {err.strerror}") from None
    except Exception as err:  # the SDK's ConfigError: a bad TOML file, an unknown profile
        # Leave out the quoted source lines of a TOML error: they may hold an api_key.
        lines = [line.strip() for line in str(err).splitlines() if line.strip()]
        detail = "; ".join(line for line in lines if not re.match(r"^\d*\s*\|", line))[:300]
        if "not found" in detail and present.get("TEMPORAL_PROFILE"):
            detail = f"TEMPORAL_PROFILE: {detail}"
        raise ConfigError(f"Temporal client configuration: {detail}") from None
    options.setdefault("target_host", DEFAULT_ADDRESS)
    options.setdefault("namespace", DEFAULT_NAMESPACE)
    if not _ADDRESS.fullmatch(options["target_host"]):
        where = "TEMPORAL_ADDRESS" if present.get("TEMPORAL_ADDRESS") else "the Temporal address"
        raise ConfigError(
            f"{where} must be host:port, such as localhost:7233 (got {options['target_host']!r})"
        )
    return options


@functools.lru_cache(maxsize=1024)
def _type_adapter(hint: Any) -> TypeAdapter[Any]:
    return TypeAdapter(hint)


class _SharedAdapters(PydanticJSONPlainPayloadConverter):
    """Pydantic JSON whose type adapters one cache keeps for the whole process. The SDK
    makes a new payload converter for every serialization and store context, and each new
    one would build its adapters again (a few per cent of a busy worker's CPU)."""

    def __init__(self) -> None:
        super().__init__()
        self._type_adapter = _type_adapter


class PayloadConverter(CompositePayloadConverter):
    """The SDK's pydantic payload converter (temporalio.contrib.pydantic), with shared
    type adapters."""

    def __init__(self) -> None:
        json = _SharedAdapters()
        super().__init__(
            *(
                json if isinstance(c, JSONPlainPayloadConverter) else c
                for c in DefaultPayloadConverter.default_encoding_payload_converters
            )
        )


PYDANTIC = DataConverter(payload_converter_class=PayloadConverter)


def data_converter(env: Settings | Mapping[str, str] | None = None) -> DataConverter:
    """Pydantic JSON payloads, encrypted with AES-GCM when COUNCIL_PAYLOAD_KEY is set, the
    large ones in the payload store (`env`: the settings, or the variables to read them
    from; the process's by default).

    With encryption, failure messages and stack traces travel as encrypted payloads too.
    """
    try:
        settings = app_settings.of(env)
        codec = codec_from_env(settings)
    except (CodecConfigError, app_settings.SettingsError) as err:
        raise ConfigError(str(err)) from None
    storage = store.external_storage(settings)
    if codec is None:
        return dataclasses.replace(PYDANTIC, external_storage=storage)
    return dataclasses.replace(
        PYDANTIC,
        payload_codec=codec,
        failure_converter_class=DefaultFailureConverterWithEncodedAttributes,
        external_storage=storage,
    )


def encryption_note(converter: DataConverter) -> str:
    """For a log line: whether payloads are encrypted, and with which key id."""
    codec = converter.payload_codec
    key_id = getattr(codec, "key_id", None)
    return f"payloads encrypted (key id {key_id})" if key_id else "payloads not encrypted"


def store_note(converter: DataConverter) -> str:
    """For a log line: where payloads from which size are stored."""
    storage = converter.external_storage
    if storage is None:
        return "no payload store: every payload travels in the history"
    where = ", ".join(repr(driver) for driver in storage.drivers)
    return f"payloads from {storage.payload_size_threshold:,} bytes stored in {where}"


def address() -> str:
    return str(connect_options()["target_host"])


# The process's Temporal runtime (the SDK's Rust core and its Tokio threads), created here
# rather than left to the SDK's default so that run() can release it before exit.
_runtime: Runtime | None = None
CORE_LOGGER = logging.getLogger("temporalio.core")


def metrics_address(host: str, port: int) -> str:
    """HOST:PORT as a socket address ([::1]:9464 for an IPv6 address)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def runtime(
    metrics_port: int | None = None,
    histogram_buckets: Mapping[str, Sequence[float]] = {},
    metrics_host: str = DEFAULT_METRICS_HOST,
) -> Runtime:
    """The process's runtime; the first call decides whether it serves Prometheus metrics
    (the SDK's temporal_* series and the application's council_* ones, with the given
    bucket bounds for the application's histograms) on metrics_host:metrics_port/metrics
    (loopback unless the host says otherwise)."""
    global _runtime
    if _runtime is None:
        metrics = (
            PrometheusConfig(
                bind_address=metrics_address(metrics_host, metrics_port),
                counters_total_suffix=True,
                histogram_bucket_overrides=dict(histogram_buckets),
            )
            if metrics_port
            else None
        )
        # The SDK core's own log lines (such as its TMPRL1103 payload-size warning) would go
        # to stdout, which carries a command's JSON or the MCP protocol: send them through
        # Python's logging, to stderr.
        core_logs = LoggingConfig(
            filter=LoggingConfig.default.filter,
            forwarding=LogForwardingConfig(logger=CORE_LOGGER),
        )
        _runtime = Runtime(telemetry=TelemetryConfig(metrics=metrics, logging=core_logs))
    return _runtime


def run(main: Coroutine[Any, Any, T]) -> T:
    """asyncio.run(main), then release the Temporal runtime while Python is still whole.

    Without this, a Tokio thread of the SDK can hand the last RPC's result back while the
    interpreter finalizes and abort it ("Fatal Python error: PyGILState_Release", exit
    status 134, or a segmentation fault): about 1 run in 10 of a short client process.
    Dropping the runtime joins those threads first; gc.collect() frees the clients whose
    reference cycles keep it alive. https://github.com/temporalio/sdk-python/issues/300
    """
    global _runtime

    async def closing() -> T:
        try:
            return await main
        finally:
            await store.aclose()

    try:
        return asyncio.run(closing())
    finally:
        _runtime = None
        gc.collect()


# The SDK's connection failures carry the Rust core's debug text: the reason a person needs
# is inside (`... ConnectError("tcp connect error", ..., Os { ..., message: "Connection
# refused" })`, `ConnectError("dns error", Custom { ..., error: "failed to lookup ..." })`).
_OS_MESSAGE = re.compile(r'Os \{[^}]*message: "([^"]+)"')
_DNS_ERROR = re.compile(r'"dns error".*?error: "([^"]+)"')
_AFTER_CONNECTION = "call error after connection"


def unreachable_reason(error: str) -> str:
    """Why the connection failed, in a few words, from the SDK's error text: the system's
    reason ("connection refused"), a name that does not resolve, or a port that answered
    but not as a Temporal server; else the error's first line as it is."""
    line = error.strip().splitlines()[0] if error.strip() else "no reason given"
    if _AFTER_CONNECTION in line:
        return (
            "something answers there, but not a Temporal server's gRPC port (the Web UI "
            "listens on another port)"
        )
    if found := _OS_MESSAGE.search(line):
        return found.group(1)[:1].lower() + found.group(1)[1:]
    if found := _DNS_ERROR.search(line):
        return f"the name does not resolve ({found.group(1)})"
    if "timed out" in line.lower() or "deadline" in line.lower():
        return "no answer in time"
    return line


async def connect(**overrides: Any) -> Client:
    options = {
        "data_converter": data_converter(),
        "runtime": runtime(),
        **connect_options(),
        **overrides,
    }
    try:
        client = await Client.connect(**options)
    except ValueError as err:  # an address the SDK cannot parse (a port over 65535, ...)
        raise ConfigError(
            f"the Temporal address {options['target_host']!r} cannot be used: {err}"
        ) from None
    except RuntimeError as err:
        raise ServerUnreachable(
            f"cannot reach the Temporal server at {options['target_host']} "
            f"(namespace {options['namespace']}): {unreachable_reason(str(err))}"
        ) from None
    try:
        await client.workflow_service.describe_namespace(
            DescribeNamespaceRequest(namespace=client.namespace)
        )
    except RPCError as err:
        if err.status == RPCStatusCode.NOT_FOUND:
            raise NamespaceNotFound(
                f"TEMPORAL_NAMESPACE: there is no namespace {client.namespace!r} on the "
                f"Temporal server at {options['target_host']}"
            ) from None
        # Anything else (such as a key without the right to describe): later calls say.
    return client
