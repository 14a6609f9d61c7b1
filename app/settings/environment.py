"""The COUNCIL_* variables: one typed object, read once when a process starts.

Every process that people run (the worker, the web page, the MCP server, the CLI, the
codec server) reads its settings here, at start: a variable that cannot be used stops it
with one line that names the variable and what it allows (numbers in ASCII digits only,
as everywhere: council.numbers). An empty variable counts as unset (a compose file passes
`${VAR:-}`), and so does one of white space. The default model provider's variables
(COUNCIL_LLM_*, OPENROUTER_API_KEY) are `Settings.llm` (council.config.DefaultProvider),
which the worker's gateway works with (activities.settings.GatewaySettings.of); the web
server's view is web.settings.WebSettings. The configuration file itself (council.toml)
is app.settings.config's; the simulator's own variables are simulator.settings'.

A field says everything about its variable: the name (validation_alias), the default,
what a value must be (description) and, for a number, its range (Field's ge/gt/le); a
refusal of any kind becomes one line of those (_one_line).

Some values are checked where they are used, by the rule that owns them, still at start:
the Host patterns and proxies (web.guard), the origins of the codec server
(app.codec.server), the payload keys (app.codec.encryption) and the worker process count, which
--processes overrides (service.supervisor).

    settings.load()      read the environment (again), keep it for this process
    settings.current()   what load() read (reading it the first time if needed)
    Settings.read(env)   read a given mapping instead of the environment (tests, tools)
"""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    BaseModel,
    BeforeValidator,
    Field,
    SecretStr,
    TypeAdapter,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from pydantic_settings import (
    BaseSettings,
    NoDecode,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from app.access import principals as access
from app.access.principals import Principal
from app.store import data_dir
from council.config import SECONDS, DefaultProvider, variable
from council.ids import id_problem, tenant_problem
from council.numbers import Number, WholeNumber

DEFAULT_TASK_QUEUE = "council"
DEFAULT_WEB_HOST = "127.0.0.1"
DEFAULT_WEB_PORT = 8080
# The local stack's other fixed ports (harness.serve: `make codec-server`, `make simulator`;
# `make up`, `make demo` and `make server` start the codec server on its port too).
DEFAULT_CODEC_PORT = 8081
DEFAULT_SIM_PORT = 8800
# Where the worker's Prometheus metrics listen: loopback, as the page does, unless
# COUNCIL_METRICS_HOST widens it (0.0.0.0 in a container that a Prometheus scrapes).
DEFAULT_METRICS_HOST = "127.0.0.1"
METRICS_HOSTS = (
    "an IP address to listen on: 127.0.0.1 (loopback, the default), ::1, 0.0.0.0 (every "
    "IPv4 address), :: or one of this machine's"
)
DEFAULT_MAX_CONCURRENT_CALLS = 200
MAX_CONCURRENT_CALLS = 1_000_000
MAX_WAITING_CALLS = 1_000_000
# How often the MCP server's ask_council sends a progress notification when nothing else
# happened: well within the 60 s after which common clients give up on a call, for those
# that wait longer while progress comes (the TypeScript SDK's resetTimeoutOnProgress).
DEFAULT_MCP_PROGRESS_SECONDS = 10.0
# Payloads from this many bytes go to the payload store (app.store): 12 members' prompts
# scheduled at once stay far below Temporal's 4 MiB message, and no payload above 256 KiB
# stays in a history.
DEFAULT_STORE_THRESHOLD = 32 * 1024
# What one tenant may start within the window (runs.quota); 0: no limit.
DEFAULT_QUOTA_RUNS = 300
DEFAULT_QUOTA_BYTES = 256 * 1024 * 1024
DEFAULT_QUOTA_WINDOW = 3600
MAX_QUOTA_RUNS = 1_000_000
MAX_QUOTA_BYTES = 1 << 40  # 1 TiB
MAX_QUOTA_WINDOW = 30 * 86_400  # 30 days
MAX_STORE_THRESHOLD = 256 * 1024
# A search on the page reads each run's question in turn (the memo, which a codec encrypts,
# so Temporal cannot search it): at most this many of the newest runs for one search, a
# bounded cost whatever the namespace holds (about a second for 2,000 on a dev server).
DEFAULT_WEB_SEARCH_RUNS = 2_000
MAX_WEB_SEARCH_RUNS = 1_000_000
STORE_FORMS = "a directory, file:PATH or s3://BUCKET[/PREFIX]"
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
LogLevel = Annotated[
    Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"],
    BeforeValidator(lambda value: value.upper() if isinstance(value, str) else value),
]
CODEC_ORIGINS = (
    "http://localhost:8233",
    "http://127.0.0.1:8233",
    "http://localhost:8080",
    "http://127.0.0.1:8080",
)


class SettingsError(ValueError):
    """A variable that cannot be used: one line naming it, never a secret's value."""


@dataclass(frozen=True)
class StoreLocation:
    """Where the payload store keeps its blobs: a directory (None: DATA/store), or an S3
    bucket and key prefix. There is always one: it is what keeps every Temporal message
    within its limit."""

    kind: Literal["file", "s3"]
    path: Path | None = None
    bucket: str = ""
    prefix: str = ""

    def __str__(self) -> str:
        if self.kind == "s3":
            return f"s3://{self.bucket}/{self.prefix}".rstrip("/")
        return str(self.path) if self.path else "DATA/store"


def parse_store(text: str) -> StoreLocation:
    """COUNCIL_STORE's value as a location; ValueError with one line otherwise."""
    value = text.strip()
    if value.lower() in ("off", "none", "false", "0"):
        raise ValueError(
            f"must be {STORE_FORMS}: the store cannot be turned off, it is what keeps every "
            "Temporal message within its limit"
        )
    if value.startswith("s3://"):
        bucket, _, prefix = value.removeprefix("s3://").partition("/")
        prefix = prefix.strip("/")
        if not _BUCKET.fullmatch(bucket) or ".." in bucket:
            raise ValueError(
                f"must be {STORE_FORMS}: {bucket!r} is not an S3 bucket name (3 to 63 "
                "lower-case letters, digits, dots and hyphens)"
            )
        if "//" in prefix or any(c in prefix for c in "\\\n\r\t"):
            raise ValueError(f"must be {STORE_FORMS}: the prefix {prefix!r} cannot be used")
        return StoreLocation("s3", bucket=bucket, prefix=prefix)
    path = value.removeprefix("file:") if value.startswith("file:") else value
    if not path or "://" in value:
        raise ValueError(f"must be {STORE_FORMS} (got {text!r})")
    return StoreLocation("file", path=Path(path).expanduser().resolve())


def _items(value: Any) -> Any:
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


def _location(value: Any) -> Any:
    return parse_store(value) if isinstance(value, str) else value


# A comma-separated list ("a, b,c" is three items); read as text, never as JSON.
Listed = Annotated[list[str], NoDecode, BeforeValidator(_items)]
Port = Annotated[WholeNumber, Field(ge=1, le=65535, description="a port number")]
# What a value must be, as the refusals say it.
WHOLE, BYTES, RUNS = "a whole number", "a whole number of bytes", "a whole number of runs"
WHOLE_SECONDS = "a whole number of seconds"
AT_MOST_ALL = {"most": "COUNCIL_MAX_CONCURRENT_CALLS"}


class Settings(BaseSettings):
    """Every COUNCIL_* variable a process may read, by what it is for. A field names its
    variable (council.config.variable: the validation_alias), its default, and what its
    value must be: a description ("a number of seconds") and, for a number, its range as
    Field constraints; _one_line makes any refusal one line of them."""

    model_config = SettingsConfigDict(
        case_sensitive=True, env_ignore_empty=True, extra="ignore", frozen=True
    )

    # -- Temporal: where new deliberations go, and the UI runs are linked to
    task_queue: str = variable("COUNCIL_TASK_QUEUE", DEFAULT_TASK_QUEUE)
    ui_url: str | None = variable("COUNCIL_UI_URL")

    # -- the councils: council.toml, the default council, the local stack's files
    config_file: str | None = variable("COUNCIL_CONFIG")
    default_models: Listed = Field(default_factory=list, validation_alias="COUNCIL_MODELS")
    default_chairman: str | None = variable("COUNCIL_CHAIRMAN")
    data_dir: Path | None = variable("COUNCIL_DATA")
    # The payload store (app.store): where texts from the threshold on travel by reference.
    store: Annotated[StoreLocation, NoDecode, BeforeValidator(_location)] = variable(
        "COUNCIL_STORE", StoreLocation("file")
    )
    store_threshold: WholeNumber = variable(
        "COUNCIL_STORE_THRESHOLD", DEFAULT_STORE_THRESHOLD, BYTES, ge=0, le=MAX_STORE_THRESHOLD
    )
    # Whose runs this client starts (runs.priority): the fairness key of `start`,
    # `eval` and the MCP server, unless --tenant names another.
    tenant: str | None = variable("COUNCIL_TENANT")
    # What each tenant of the page, /v1 and MCP may start within a window (runs.quota);
    # 0: no limit.
    quota_runs: WholeNumber = variable(
        "COUNCIL_QUOTA_RUNS", DEFAULT_QUOTA_RUNS, RUNS, ge=0, le=MAX_QUOTA_RUNS
    )
    quota_bytes: WholeNumber = variable(
        "COUNCIL_QUOTA_BYTES", DEFAULT_QUOTA_BYTES, BYTES, ge=0, le=MAX_QUOTA_BYTES
    )
    quota_window: WholeNumber = variable(
        "COUNCIL_QUOTA_WINDOW", DEFAULT_QUOTA_WINDOW, WHOLE_SECONDS, ge=60, le=MAX_QUOTA_WINDOW
    )
    # Set by whatever starts the worker against the bundled simulator: pages say so.
    simulated: bool = variable("COUNCIL_SIMULATED", False)

    # -- the web page (and the MCP server's HTTP transport, which keeps the page's rules)
    web_host: str = variable("COUNCIL_WEB_HOST", DEFAULT_WEB_HOST)
    web_port: Port = variable("COUNCIL_WEB_PORT", DEFAULT_WEB_PORT)
    web_token: SecretStr | None = variable("COUNCIL_WEB_TOKEN", repr=False)
    # Named tokens, each a principal of its own (app.access.principals): NAME=TOKEN pairs, and
    # those of a file.
    web_tokens: Annotated[tuple[Principal, ...], NoDecode] = variable(
        "COUNCIL_WEB_TOKENS", (), repr=False
    )
    web_tokens_file: Annotated[tuple[Principal, ...], NoDecode] = variable(
        "COUNCIL_WEB_TOKENS_FILE", (), repr=False
    )
    # With a token: anyone who reaches the page may still read every run (not start one).
    web_public_read: bool = variable("COUNCIL_WEB_PUBLIC_READ", False)
    web_allowed_hosts: Listed = Field(
        default_factory=list, validation_alias="COUNCIL_WEB_ALLOWED_HOSTS"
    )
    web_trusted_proxies: Listed = Field(
        default_factory=list, validation_alias="COUNCIL_WEB_TRUSTED_PROXIES"
    )
    web_search_runs: WholeNumber = variable(
        "COUNCIL_WEB_SEARCH_RUNS", DEFAULT_WEB_SEARCH_RUNS, RUNS, ge=1, le=MAX_WEB_SEARCH_RUNS
    )

    # -- the MCP server
    mcp_progress_seconds: Number = variable(
        "COUNCIL_MCP_PROGRESS_SECONDS", DEFAULT_MCP_PROGRESS_SECONDS, SECONDS, ge=0.5, le=60
    )

    # -- payload encryption (app.codec.encryption), in every client and worker, and the codec server
    payload_key: SecretStr | None = variable("COUNCIL_PAYLOAD_KEY", repr=False)
    payload_key_id: str | None = variable("COUNCIL_PAYLOAD_KEY_ID")
    payload_old_keys: SecretStr | None = variable("COUNCIL_PAYLOAD_OLD_KEYS", repr=False)
    codec_cors_origins: Listed = Field(
        default_factory=lambda: list(CODEC_ORIGINS), validation_alias="COUNCIL_CODEC_CORS_ORIGINS"
    )
    codec_token: SecretStr | None = variable("COUNCIL_CODEC_TOKEN", repr=False)
    # Host names the codec server answers to beyond loopback and its --host (app.access.hosts).
    codec_allowed_hosts: Listed = Field(
        default_factory=list, validation_alias="COUNCIL_CODEC_ALLOWED_HOSTS"
    )
    # Where the codec server listens unless --port says otherwise.
    codec_port: Port = variable("COUNCIL_CODEC_PORT", DEFAULT_CODEC_PORT)

    # -- the simulator as `make simulator` starts it (harness.serve)
    sim_port: Port = variable("COUNCIL_SIM_PORT", DEFAULT_SIM_PORT)

    # -- the worker
    max_concurrent_calls: WholeNumber = variable(
        "COUNCIL_MAX_CONCURRENT_CALLS",
        DEFAULT_MAX_CONCURRENT_CALLS,
        WHOLE,
        ge=1,
        le=MAX_CONCURRENT_CALLS,
    )
    # Of those, the most one tenant and one run send at once, and how many more calls the
    # worker takes from its queue to wait for their turn (None: the defaults of
    # activities.shares).
    max_calls_per_tenant: WholeNumber | None = variable(
        "COUNCIL_MAX_CALLS_PER_TENANT", None, WHOLE, ge=1, json_schema_extra=AT_MOST_ALL
    )
    max_calls_per_run: WholeNumber | None = variable(
        "COUNCIL_MAX_CALLS_PER_RUN", None, WHOLE, ge=1, json_schema_extra=AT_MOST_ALL
    )
    max_waiting_calls: WholeNumber | None = variable(
        "COUNCIL_MAX_WAITING_CALLS", None, WHOLE, ge=0, le=MAX_WAITING_CALLS
    )
    max_calls_per_second: Number | None = variable(
        "COUNCIL_MAX_CALLS_PER_SECOND", None, "a number of calls per second", gt=0
    )
    metrics_port: WholeNumber | None = variable(
        "COUNCIL_METRICS_PORT", None, "a port number", ge=1, le=65535
    )
    metrics_host: str = variable("COUNCIL_METRICS_HOST", DEFAULT_METRICS_HOST)
    worker_processes: str | None = variable("COUNCIL_WORKER_PROCESSES")
    log_level: LogLevel = variable("COUNCIL_LOG_LEVEL", "INFO")
    # The build the worker runs (app.temporal.deployment: runs are pinned to it); None: the version.
    build_id: str | None = variable("COUNCIL_BUILD_ID")
    # The default provider of model calls (COUNCIL_LLM_*, OPENROUTER_API_KEY): the worker's
    # gateway works with it (activities.settings.GatewaySettings.of).
    llm: DefaultProvider = DefaultProvider()

    @field_validator("tenant", mode="after")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        problem = tenant_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("web_tokens", "web_tokens_file", mode="before")
    @classmethod
    def _named_tokens(cls, value: Any, info: ValidationInfo) -> Any:
        """NAME=TOKEN pairs (COUNCIL_WEB_TOKENS), or the file of them (one a line), beside
        COUNCIL_WEB_TOKEN and the pairs read before (app.access.principals)."""
        if not isinstance(value, str):
            return value
        from_file = info.field_name == "web_tokens_file"
        named = access.read_file(value) if from_file else access.parse(value)
        shared: SecretStr | None = info.data.get("web_token")
        held = {shared.get_secret_value(): "COUNCIL_WEB_TOKEN"} if shared is not None else {}
        problem = access.conflict(named, info.data.get("web_tokens", ()), held)
        if problem:
            raise ValueError(problem)
        return tuple(named)

    @field_validator("build_id", mode="after")
    @classmethod
    def _build(cls, value: str | None) -> str | None:
        problem = id_problem(value) if value else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("metrics_host", mode="after")
    @classmethod
    def _metrics_host(cls, value: str) -> str:
        try:
            return str(ipaddress.ip_address(value.strip("[]")))
        except ValueError:
            raise ValueError(f"must be {METRICS_HOSTS} (got {value[:80]!r})") from None

    @field_validator("ui_url", mode="after")
    @classmethod
    def _ui(cls, value: str | None) -> str | None:
        return value.rstrip("/") or None if value else None

    @field_validator("codec_cors_origins", mode="after")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        return value or list(CODEC_ORIGINS)

    @field_validator("max_calls_per_tenant", "max_calls_per_run", mode="after")
    @classmethod
    def _share(cls, value: int | None, info: ValidationInfo) -> int | None:
        """Of the calls sent at once, a share: at most all of them."""
        total = info.data.get("max_concurrent_calls", DEFAULT_MAX_CONCURRENT_CALLS)
        if value is not None and value > total:
            raise PydanticCustomError(
                "less_than_equal",
                "Input should be less than or equal to {le}",
                {"le": f"COUNCIL_MAX_CONCURRENT_CALLS ({total})"},
            )
        return value

    # ---- reading ---------------------------------------------------------------------

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Each field's variable, by field name (the default provider's as llm.NAME)."""
        found = {
            name: field.validation_alias
            for name, field in cls.model_fields.items()
            if isinstance(field.validation_alias, str)
        }
        for name, field in DefaultProvider.model_fields.items():
            found[f"llm.{name}"] = str(field.validation_alias)
        return found

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only the values given to the constructor, which read() picks from the variables:
        no other source reads the environment or a file behind its back."""
        return (init_settings,)

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings in `env` (the process's environment by default); SettingsError.
        Values are stripped, a variable of only white space is unset, and the default
        provider's variables (COUNCIL_LLM_*, OPENROUTER_API_KEY) go to the nested `llm`."""
        variables = os.environ if env is None else env
        given = {name: text for name, value in variables.items() if (text := value.strip())}
        values: dict[str, Any] = {}
        for field, name in cls.variables().items():
            if name in given:
                nested = field.rpartition(".")[0]
                (values.setdefault(nested, {}) if nested else values)[name] = given[name]
        try:
            return cls(**values)
        except ValidationError as error:
            raise SettingsError(_one_line(error, given)) from None

    @classmethod
    def argument(cls, name: str) -> Callable[[str], Any]:
        """argparse's `type` for a flag that stands in for a field (--port for web_port):
        the field's rule, refused in the same words."""
        field = cls.model_fields[name]
        shape: Any = Annotated[(field.annotation, *field.metadata)]
        adapter: TypeAdapter[Any] = TypeAdapter(shape)

        def read(text: str) -> Any:
            try:
                return adapter.validate_python(text.strip())
            except ValidationError as error:
                ctx = error.errors()[0].get("ctx") or {}
                must = _allowed(field, ctx) or field.description or "usable"
                raise argparse.ArgumentTypeError(f"must be {must} (got {text!r})") from None

        return read

    def data(self) -> Path:
        """DATA: COUNCIL_DATA, else the checkout's data/ or the user's (app.store.data_dir)."""
        return self.data_dir or data_dir.default_data()

    def secret(self, name: Literal["web_token", "codec_token"]) -> str | None:
        """A token's value, for the one place that compares it."""
        value: SecretStr | None = getattr(self, name)
        return value.get_secret_value() if value is not None else None

    def secrets(self) -> list[str]:
        """Every secret value set: what nothing may show."""
        held = [getattr(self, name) for name in type(self).model_fields]
        held += [getattr(self.llm, name) for name in type(self.llm).model_fields]
        values = [value.get_secret_value() for value in held if isinstance(value, SecretStr)]
        # The named tokens (COUNCIL_WEB_TOKENS and its file).
        values += [
            principal.token
            for value in held
            if isinstance(value, tuple)
            for principal in value
            if isinstance(principal, Principal)
        ]
        return values + list(self.llm.extra_headers.values())


# ---- one line for any refusal ------------------------------------------------------------

FLAGS = "one of 1/0, true/false, yes/no, on/off"


def _one_line(error: ValidationError, given: Mapping[str, str]) -> str:
    """The first problem as one line: the variable, what its value must be (the field's
    description, range, choices), and the value given unless the field is never shown
    (repr=False: secrets, headers). A check of our own (the store, a tenant, a build id)
    says in its own words what is wrong."""
    first = error.errors()[0]
    variable, field = _field_at(first["loc"])
    allowed = _allowed(field, first.get("ctx") or {}) if field is not None else None
    if allowed is None and first["type"] == "value_error":
        message = str(first["msg"]).removeprefix("Value error, ")
        return f"{variable}{_joint(message)}{' '.join(message.split())}"
    if allowed is None:
        allowed = field.description if field is not None else None
    if allowed is None:
        message = f"cannot be read ({first['msg']})"
        return f"{variable} {' '.join(message.split())}"
    shown = field is not None and field.repr
    got = f" (got {given.get(variable, str(first['input']))[:80]!r})" if shown else ""
    return f"{variable} must be {allowed}{got}"


def _joint(message: str) -> str:
    return " " if message.startswith(("must ", "is ", "cannot ")) else ": "


def _field_at(loc: tuple[int | str, ...]) -> tuple[str, FieldInfo | None]:
    """The variable and field an error's location names (a field or a variable, nested
    models followed)."""
    model: type[BaseModel] | None = Settings
    field: FieldInfo | None = None
    for part in loc:  # down to the deepest field named (not, say, a key of a field's dict)
        fields = model.model_fields.items() if model is not None else ()
        named = next((info for name, info in fields if part in (name, info.validation_alias)), None)
        if named is None:
            break
        field, kind = named, named.annotation
        model = kind if isinstance(kind, type) and issubclass(kind, BaseModel) else None
    if field is None or not isinstance(field.validation_alias, str):
        return str(loc[-1] if loc else ""), None
    return field.validation_alias, field


def _allowed(field: FieldInfo, ctx: Mapping[str, Any]) -> str | None:
    """What a flag, a choice or a number must be; None for other fields."""
    kind = field.annotation
    if kind is bool:
        return FLAGS
    if get_origin(kind) is Literal:
        return f"one of {', '.join(map(str, get_args(kind)))}"
    bounds: dict[str, Any] = {}
    for constraint in field.metadata:
        for name in ("ge", "gt", "le"):
            if hasattr(constraint, name):
                bounds[name] = getattr(constraint, name)
    if not bounds:
        return None
    bounds.update({name: ctx[name] for name in ("ge", "gt", "le") if name in ctx})
    extra = field.json_schema_extra if isinstance(field.json_schema_extra, dict) else {}
    most = bounds.get("le", extra.get("most"))
    what = field.description or "a number"
    if "ge" in bounds:
        low = f"from {_figure(bounds['ge'])}"
        return f"{what} {low} to {_figure(most)}" if most is not None else f"{what} {low} up"
    low = f"above {_figure(bounds['gt'])}"
    return f"{what} {low}, at most {_figure(most)}" if most is not None else f"{what} {low}"


def _figure(value: Any) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


_current: Settings | None = None


def load(env: Mapping[str, str] | None = None) -> Settings:
    """Read the settings (the environment's by default) and keep them for this process:
    what a process does once at start. SettingsError with one line."""
    global _current
    _current = Settings.read(env)
    return _current


def current() -> Settings:
    """This process's settings: as load() read them, else read from the environment now."""
    return _current if _current is not None else load()


def of(given: Settings | Mapping[str, str] | None) -> Settings:
    """Settings as a function takes them: given, read from the variables given, or the
    process's (current())."""
    if isinstance(given, Settings):
        return given
    return current() if given is None else Settings.read(given)
