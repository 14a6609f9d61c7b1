"""The COUNCIL_* variables: one typed object, read once when a process starts.

Every process that people run (the worker, the web page, the MCP server, the CLI, the
codec server) reads its settings here, at start: a variable that cannot be used stops it
with one line that names the variable and what it allows (numbers in ASCII digits only,
as everywhere: council.numbers). An empty variable counts as unset (a compose file passes
`${VAR:-}`), and so does one of white space. The model providers' variables
(COUNCIL_LLM_*, OPENROUTER_API_KEY) are the worker's alone and are read with its provider
settings (activities.settings); the configuration file itself (council.toml) is
app.config's.

Some values are checked where they are used, by the rule that owns them, still at start:
the Host patterns and proxies (web.guard), the origins of the codec server
(app.codec_server), the payload keys (app.codec) and the worker process count, which
--processes overrides (app.supervisor).

    settings.load()      read the environment (again), keep it for this process
    settings.current()   what load() read (reading it the first time if needed)
    Settings.read(env)   read a given mapping instead of the environment (tests, tools)
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import Field, SecretStr, ValidationError, ValidationInfo, field_validator
from pydantic_settings import BaseSettings, EnvSettingsSource, NoDecode, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

from app import data_dir
from council import numbers
from council.ids import id_problem, tenant_problem

DEFAULT_TASK_QUEUE = "council"
DEFAULT_WEB_HOST = "127.0.0.1"
DEFAULT_WEB_PORT = 8080
# The local stack's other fixed ports (harness.serve: `make codec-server`, `make simulator`;
# `make up`, `make demo` and `make server` start the codec server on its port too).
DEFAULT_CODEC_PORT = 8081
DEFAULT_SIM_PORT = 8800
DEFAULT_MAX_CONCURRENT_CALLS = 200
MAX_WAITING_CALLS = 1_000_000
# How often the MCP server's ask_council sends a progress notification when nothing else
# happened: well within the 60 s after which common clients give up on a call, for those
# that wait longer while progress comes (the TypeScript SDK's resetTimeoutOnProgress).
DEFAULT_MCP_PROGRESS_SECONDS = 10.0
MCP_PROGRESS_RANGE = (0.5, 60.0)
# The checkout's data directory: DATA, unless COUNCIL_DATA moves it.
CHECKOUT_DATA = Path(__file__).resolve().parent.parent / "data"
# Payloads from this many bytes go to the payload store (app.store): 12 members' prompts
# scheduled at once stay far below Temporal's 4 MiB message, and no payload above 256 KiB
# stays in a history.
DEFAULT_STORE_THRESHOLD = 32 * 1024
# What one tenant may start within the window (workflows.quota); 0: no limit.
DEFAULT_QUOTA_RUNS = 300
DEFAULT_QUOTA_BYTES = 256 * 1024 * 1024
DEFAULT_QUOTA_WINDOW = 3600
MAX_QUOTA_RUNS = 1_000_000
MAX_QUOTA_BYTES = 1 << 40
QUOTA_WINDOW_RANGE = (60, 30 * 86_400)
MAX_STORE_THRESHOLD = 256 * 1024
STORE_FORMS = "a directory, file:PATH or s3://BUCKET[/PREFIX]"
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
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


# A comma-separated list ("a, b,c" is three items); read as text, never as JSON.
Listed = Annotated[list[str], NoDecode]


def _whole(value: Any, low: int, high: int) -> int | None:
    number = numbers.whole(str(value), signed=False)
    return number if number is not None and low <= number <= high else None


class Settings(BaseSettings):
    """Every COUNCIL_* variable a process may read, by what it is for."""

    model_config = SettingsConfigDict(
        case_sensitive=True, env_ignore_empty=True, extra="ignore", frozen=True
    )

    # -- Temporal: where new deliberations go, and the UI runs are linked to
    task_queue: str = Field(DEFAULT_TASK_QUEUE, validation_alias="COUNCIL_TASK_QUEUE")
    ui_url: str | None = Field(None, validation_alias="COUNCIL_UI_URL")

    # -- the councils: council.toml, the default council, the local stack's files
    config_file: str | None = Field(None, validation_alias="COUNCIL_CONFIG")
    default_models: Listed = Field(default_factory=list, validation_alias="COUNCIL_MODELS")
    default_chairman: str | None = Field(None, validation_alias="COUNCIL_CHAIRMAN")
    data_dir: Path | None = Field(None, validation_alias="COUNCIL_DATA")
    # The payload store (app.store): where texts from the threshold on travel by reference.
    store: Annotated[StoreLocation, NoDecode] = Field(
        StoreLocation("file"), validation_alias="COUNCIL_STORE"
    )
    store_threshold: int = Field(
        DEFAULT_STORE_THRESHOLD, validation_alias="COUNCIL_STORE_THRESHOLD"
    )
    # Whose runs this client starts (workflows.priority): the fairness key of `start`,
    # `eval` and the MCP server, unless --tenant names another.
    tenant: str | None = Field(None, validation_alias="COUNCIL_TENANT")
    # What each tenant of the page, /v1 and MCP may start within a window (workflows.quota).
    quota_runs: int = Field(DEFAULT_QUOTA_RUNS, validation_alias="COUNCIL_QUOTA_RUNS")
    quota_bytes: int = Field(DEFAULT_QUOTA_BYTES, validation_alias="COUNCIL_QUOTA_BYTES")
    quota_window: int = Field(DEFAULT_QUOTA_WINDOW, validation_alias="COUNCIL_QUOTA_WINDOW")
    # Set by whatever starts the worker against the bundled simulator: pages say so.
    simulated: bool = Field(False, validation_alias="COUNCIL_SIMULATED")

    # -- the web page (and the MCP server's HTTP transport, which keeps the page's rules)
    web_host: str = Field(DEFAULT_WEB_HOST, validation_alias="COUNCIL_WEB_HOST")
    web_port: int = Field(DEFAULT_WEB_PORT, validation_alias="COUNCIL_WEB_PORT")
    web_token: SecretStr | None = Field(None, validation_alias="COUNCIL_WEB_TOKEN")
    # With a token: anyone who reaches the page may still read every run (not start one).
    web_public_read: bool = Field(False, validation_alias="COUNCIL_WEB_PUBLIC_READ")
    web_allowed_hosts: Listed = Field(
        default_factory=list, validation_alias="COUNCIL_WEB_ALLOWED_HOSTS"
    )
    web_trusted_proxies: Listed = Field(
        default_factory=list, validation_alias="COUNCIL_WEB_TRUSTED_PROXIES"
    )

    # -- the MCP server
    mcp_progress_seconds: float = Field(
        DEFAULT_MCP_PROGRESS_SECONDS, validation_alias="COUNCIL_MCP_PROGRESS_SECONDS"
    )

    # -- payload encryption (app.codec), in every client and worker, and the codec server
    payload_key: SecretStr | None = Field(None, validation_alias="COUNCIL_PAYLOAD_KEY")
    payload_key_id: str | None = Field(None, validation_alias="COUNCIL_PAYLOAD_KEY_ID")
    payload_old_keys: SecretStr | None = Field(None, validation_alias="COUNCIL_PAYLOAD_OLD_KEYS")
    codec_cors_origins: Listed = Field(
        default_factory=lambda: list(CODEC_ORIGINS), validation_alias="COUNCIL_CODEC_CORS_ORIGINS"
    )
    codec_token: SecretStr | None = Field(None, validation_alias="COUNCIL_CODEC_TOKEN")
    # Host names the codec server answers to beyond loopback and its --host (app.hosts).
    codec_allowed_hosts: Listed = Field(
        default_factory=list, validation_alias="COUNCIL_CODEC_ALLOWED_HOSTS"
    )
    # Where the codec server listens unless --port says otherwise.
    codec_port: int = Field(DEFAULT_CODEC_PORT, validation_alias="COUNCIL_CODEC_PORT")

    # -- the simulator as `make simulator` starts it (harness.serve)
    sim_port: int = Field(DEFAULT_SIM_PORT, validation_alias="COUNCIL_SIM_PORT")

    # -- the worker
    max_concurrent_calls: int = Field(
        DEFAULT_MAX_CONCURRENT_CALLS, validation_alias="COUNCIL_MAX_CONCURRENT_CALLS"
    )
    # Of those, the most one tenant and one run send at once, and how many more calls the
    # worker takes from its queue to wait for their turn (None: the defaults of
    # activities.shares).
    max_calls_per_tenant: int | None = Field(None, validation_alias="COUNCIL_MAX_CALLS_PER_TENANT")
    max_calls_per_run: int | None = Field(None, validation_alias="COUNCIL_MAX_CALLS_PER_RUN")
    max_waiting_calls: int | None = Field(None, validation_alias="COUNCIL_MAX_WAITING_CALLS")
    max_calls_per_second: float | None = Field(
        None, validation_alias="COUNCIL_MAX_CALLS_PER_SECOND"
    )
    metrics_port: int | None = Field(None, validation_alias="COUNCIL_METRICS_PORT")
    worker_processes: str | None = Field(None, validation_alias="COUNCIL_WORKER_PROCESSES")
    log_level: str = Field("INFO", validation_alias="COUNCIL_LOG_LEVEL")
    # The build the worker runs (app.deployment: runs are pinned to it); None: the version.
    build_id: str | None = Field(None, validation_alias="COUNCIL_BUILD_ID")

    @field_validator(
        "task_queue",
        "ui_url",
        "config_file",
        "default_chairman",
        "web_host",
        "payload_key_id",
        "build_id",
        "tenant",
        mode="before",
    )
    @classmethod
    def _stripped(cls, value: Any) -> Any:
        return value.strip() or None if isinstance(value, str) else value

    @field_validator("tenant", mode="after")
    @classmethod
    def _tenant(cls, value: str | None) -> str | None:
        problem = tenant_problem(value) if value is not None else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("build_id", mode="after")
    @classmethod
    def _build(cls, value: str | None) -> str | None:
        problem = id_problem(value) if value else None
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("task_queue", mode="after")
    @classmethod
    def _queue(cls, value: str | None) -> str:
        return value or DEFAULT_TASK_QUEUE

    @field_validator("web_host", mode="after")
    @classmethod
    def _host(cls, value: str | None) -> str:
        return value or DEFAULT_WEB_HOST

    @field_validator("ui_url", mode="after")
    @classmethod
    def _ui(cls, value: str | None) -> str | None:
        return value.rstrip("/") or None if value else None

    @field_validator(
        "default_models",
        "web_allowed_hosts",
        "web_trusted_proxies",
        "codec_cors_origins",
        "codec_allowed_hosts",
        mode="before",
    )
    @classmethod
    def _listed(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [item.strip() for item in value.split(",") if item.strip()]
        return value

    @field_validator("codec_cors_origins", mode="after")
    @classmethod
    def _origins(cls, value: list[str]) -> list[str]:
        return value or list(CODEC_ORIGINS)

    @field_validator("web_token", "codec_token", "payload_key", "payload_old_keys", mode="before")
    @classmethod
    def _secret(cls, value: Any) -> Any:
        return value.strip() or None if isinstance(value, str) else value

    @field_validator("simulated", mode="before")
    @classmethod
    def _flag(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = value.strip().lower()
        if text in ("1", "true", "yes", "on"):
            return True
        if text in ("0", "false", "no", "off", ""):
            return False
        raise ValueError(f"must be one of 1/0, true/false, yes/no, on/off (got {value!r})")

    @field_validator("store", mode="before")
    @classmethod
    def _store(cls, value: Any) -> Any:
        return parse_store(value) if isinstance(value, str) else value

    @field_validator("store_threshold", mode="before")
    @classmethod
    def _store_threshold(cls, value: Any) -> int:
        size = _whole(value, 0, MAX_STORE_THRESHOLD)
        if size is None:
            raise ValueError(
                f"must be a whole number of bytes from 0 to {MAX_STORE_THRESHOLD} (256 KiB) "
                f"(got {value!r})"
            )
        return size

    @field_validator("quota_runs", mode="before")
    @classmethod
    def _quota_runs(cls, value: Any) -> int:
        runs = _whole(value, 0, MAX_QUOTA_RUNS)
        if runs is None:
            raise ValueError(
                f"must be a whole number of runs from 0 (no limit) to {MAX_QUOTA_RUNS} "
                f"(got {value!r})"
            )
        return runs

    @field_validator("quota_bytes", mode="before")
    @classmethod
    def _quota_bytes(cls, value: Any) -> int:
        size = _whole(value, 0, MAX_QUOTA_BYTES)
        if size is None:
            raise ValueError(
                f"must be a whole number of bytes from 0 (no limit) to {MAX_QUOTA_BYTES} "
                f"(1 TiB) (got {value!r})"
            )
        return size

    @field_validator("quota_window", mode="before")
    @classmethod
    def _quota_window(cls, value: Any) -> int:
        low, high = QUOTA_WINDOW_RANGE
        seconds = _whole(value, low, high)
        if seconds is None:
            raise ValueError(
                f"must be a whole number of seconds from {low} to {high} (30 days) (got {value!r})"
            )
        return seconds

    @field_validator("web_port", "codec_port", "sim_port", mode="before")
    @classmethod
    def _port(cls, value: Any) -> int:
        port = _whole(value, 1, 65535)
        if port is None:
            raise ValueError(f"must be a port number from 1 to 65535 (got {value!r})")
        return port

    @field_validator("metrics_port", mode="before")
    @classmethod
    def _metrics_port(cls, value: Any) -> int | None:
        if value is None:
            return None
        port = _whole(value, 1, 65535)
        if port is None:
            raise ValueError(f"must be a port number, 1 to 65535 (got {value!r})")
        return port

    @field_validator("max_concurrent_calls", mode="before")
    @classmethod
    def _concurrent(cls, value: Any) -> int:
        count = _whole(value, 1, 1_000_000)
        if count is None:
            raise ValueError(f"must be a positive whole number (got {value!r})")
        return count

    @field_validator("max_calls_per_tenant", "max_calls_per_run", mode="before")
    @classmethod
    def _share(cls, value: Any, info: ValidationInfo) -> int | None:
        if value is None:
            return None
        total = info.data.get("max_concurrent_calls", DEFAULT_MAX_CONCURRENT_CALLS)
        count = _whole(value, 1, total)
        if count is None:
            raise ValueError(
                f"must be a whole number from 1 to COUNCIL_MAX_CONCURRENT_CALLS ({total}) "
                f"(got {value!r})"
            )
        return count

    @field_validator("max_waiting_calls", mode="before")
    @classmethod
    def _waiting(cls, value: Any) -> int | None:
        if value is None:
            return None
        count = _whole(value, 0, MAX_WAITING_CALLS)
        if count is None:
            raise ValueError(
                f"must be a whole number from 0 to {MAX_WAITING_CALLS} (got {value!r})"
            )
        return count

    @field_validator("max_calls_per_second", mode="before")
    @classmethod
    def _rate(cls, value: Any) -> float | None:
        if value is None:
            return None
        rate = numbers.decimal(str(value))
        if rate is None or rate <= 0:
            raise ValueError(f"must be a positive number (got {value!r})")
        return rate

    @field_validator("mcp_progress_seconds", mode="before")
    @classmethod
    def _progress_seconds(cls, value: Any) -> float:
        low, high = MCP_PROGRESS_RANGE
        seconds = numbers.decimal(str(value))
        if seconds is None or not low <= seconds <= high:
            raise ValueError(
                f"must be a number of seconds from {low:g} to {high:g} (got {value!r})"
            )
        return seconds

    @field_validator("log_level", mode="before")
    @classmethod
    def _level(cls, value: Any) -> str:
        level = str(value).strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)} (got {value!r})")
        return level

    # ---- reading ---------------------------------------------------------------------

    @classmethod
    def variables(cls) -> dict[str, str]:
        """Each field's variable, by field name."""
        return {name: str(field.validation_alias) for name, field in cls.model_fields.items()}

    @classmethod
    def read(cls, env: Mapping[str, str] | None = None) -> Settings:
        """The settings in `env` (the process's environment by default); SettingsError."""
        source = _Variables(cls, os.environ if env is None else env)
        try:
            return cls(_build_sources=((source,), {}))
        except ValidationError as error:
            raise SettingsError(_one_line(error)) from None

    def data(self) -> Path:
        """DATA: COUNCIL_DATA, else the checkout's data/ or the user's (app.data_dir)."""
        return self.data_dir or data_dir.default_data()

    def secret(self, name: Literal["web_token", "codec_token"]) -> str | None:
        """A token's value, for the one place that compares it."""
        value: SecretStr | None = getattr(self, name)
        return value.get_secret_value() if value is not None else None


class _Variables(EnvSettingsSource):
    """pydantic-settings' environment source, over a given mapping; a variable that holds
    only white space counts as unset."""

    def __init__(self, settings_cls: type[BaseSettings], variables: Mapping[str, str]) -> None:
        self._variables = {name: value for name, value in variables.items() if value.strip()}
        super().__init__(settings_cls)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(
            self._variables, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str
        )


def _one_line(error: ValidationError) -> str:
    """The first problem, naming the variable; a value is quoted only by our own checks
    (which never see a secret: the secrets are only stripped here)."""
    first = error.errors()[0]
    where = first["loc"][0] if first["loc"] else ""
    variable = Settings.variables().get(str(where), str(where))
    message = first["msg"].removeprefix("Value error, ")
    if first["type"] != "value_error":
        message = f"cannot be read ({message})"
    joint = " " if message.startswith(("must ", "is ", "cannot ")) else ": "
    return f"{variable}{joint}{' '.join(message.split())}"


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
