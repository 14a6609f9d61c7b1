"""Where and how the worker calls models: read from the worker's environment only.

The API key lives here and nowhere else: it never enters a workflow input, an activity
argument or result, an error message, a log line or a heartbeat.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from council import numbers
from council.config import ProviderConfig

OPENROUTER_BASE_URL = "https://openrouter.ai/api/v1"
APP_TITLE = "Council"

_FALSE = {"0", "false", "no", "off"}
_TRUE = {"1", "true", "yes", "on"}
# How a reply's JSON schema is sent: auto tries json_schema, then json_object (with the
# schema, as llama.cpp's server takes it), then json_object alone, then nothing, keeping
# for each model the first form the provider accepts; the others send that form or nothing.
STRUCTURED_OUTPUTS = ("auto", "json_schema", "json_object", "off")
# The most requests per second a provider may be given (council.config takes the same).
MAX_REQUESTS_PER_SECOND = 10_000


class SettingsError(ValueError):
    """A worker setting that cannot be used; the message names the variable."""


@dataclass(frozen=True)
class GatewaySettings:
    base_url: str = OPENROUTER_BASE_URL
    api_key: str | None = field(default=None, repr=False)
    stream: bool = True
    extra_headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    connect_timeout: float = 10.0
    # Longest silence while waiting for the next bytes of a reply; for a server that
    # does not stream, the time it may take to produce the whole reply.
    read_timeout: float = 300.0
    # Largest raw reply the worker reads (a non-streamed JSON body, or a whole stream).
    max_body_bytes: int = 8_000_000
    max_connections: int = 256
    structured_output: str = "auto"
    # The models' context window in tokens, when known: a prompt that cannot fit is refused
    # before the call, and max_tokens is lowered to what fits.
    context_window: int | None = None
    # Requests sent to the provider at once by this worker process (None: decided by
    # activities.slots: one for a server of our own unless it reports more, else no limit).
    max_concurrent_requests: int | None = None
    # Requests started per second by all workers together (None: no limit): the
    # provider's calls then have a task queue of their own (workflows.routes).
    max_requests_per_second: float | None = None
    # Whether the models take images: all (True), none (False), or those these patterns
    # match.
    images: bool | tuple[str, ...] = False

    def sees_images(self, model: str) -> bool:
        if isinstance(self.images, bool):
            return self.images
        return any(fnmatchcase(model, pattern) for pattern in self.images)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> GatewaySettings:
        env = os.environ if env is None else env
        key = (env.get("COUNCIL_LLM_API_KEY") or "").strip() or (
            env.get("OPENROUTER_API_KEY") or ""
        ).strip()
        return cls(
            base_url=(env.get("COUNCIL_LLM_BASE_URL") or "").strip() or OPENROUTER_BASE_URL,
            api_key=key or None,
            stream=_flag(env, "COUNCIL_LLM_STREAM", default=True),
            extra_headers=_headers(env, "COUNCIL_LLM_EXTRA_HEADERS"),
            connect_timeout=_seconds(env, "COUNCIL_LLM_CONNECT_TIMEOUT", 10.0),
            read_timeout=_seconds(env, "COUNCIL_LLM_READ_TIMEOUT", 300.0),
            structured_output=_choice(env, "COUNCIL_LLM_STRUCTURED_OUTPUT", STRUCTURED_OUTPUTS),
            context_window=_tokens(env, "COUNCIL_LLM_CONTEXT_WINDOW"),
            max_concurrent_requests=_count(env, "COUNCIL_LLM_MAX_CONCURRENT_REQUESTS", 1024),
            max_requests_per_second=_rate(env, "COUNCIL_LLM_MAX_REQUESTS_PER_SECOND"),
            images=_flag(env, "COUNCIL_LLM_IMAGES", default=False),
        )

    @classmethod
    def from_provider(
        cls, provider: ProviderConfig, env: Mapping[str, str] | None = None
    ) -> GatewaySettings:
        """A council.toml provider's settings, its key from the variable it names."""
        env = os.environ if env is None else env
        key = (env.get(provider.api_key_env) or "").strip() if provider.api_key_env else ""
        return cls(
            base_url=provider.base_url,
            api_key=key or None,
            stream=provider.stream,
            extra_headers=dict(provider.extra_headers),
            connect_timeout=provider.connect_timeout,
            read_timeout=provider.read_timeout,
            structured_output=provider.structured_output,
            context_window=provider.context_window,
            max_concurrent_requests=provider.max_concurrent_requests,
            max_requests_per_second=provider.max_requests_per_second,
            images=provider.images if isinstance(provider.images, bool) else tuple(provider.images),
        )

    @property
    def chat_url(self) -> str:
        return self.base_url.rstrip("/") + "/chat/completions"

    @property
    def host(self) -> str:
        """Host and port of the base URL, without any credentials it might carry."""
        parts = urlsplit(self.base_url)
        return parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "?"

    @property
    def is_openrouter(self) -> bool:
        host = urlsplit(self.base_url).hostname or ""
        return host == "openrouter.ai" or host.endswith(".openrouter.ai")

    def secrets(self) -> list[str]:
        """Values that must never appear in anything the worker reports."""
        values = [self.api_key or ""]
        values += [v for k, v in self.extra_headers.items() if _sensitive(k)]
        parts = urlsplit(self.base_url)
        values += [parts.password or ""]
        return [v for v in values if len(v) >= 4]

    def headers(self, stream: bool) -> dict[str, str]:
        headers = {"Accept": "text/event-stream" if stream else "application/json"}
        if self.is_openrouter:
            headers["X-Title"] = APP_TITLE
        headers.update(self.extra_headers)
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        return headers


def _sensitive(header: str) -> bool:
    name = header.lower()
    return any(word in name for word in ("auth", "key", "token", "secret", "cookie"))


def _flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = (env.get(name) or "").strip().lower()
    if not value:
        return default
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(f"{name} must be one of 1/0, true/false, yes/no, on/off (got {value!r})")


def _choice(env: Mapping[str, str], name: str, choices: tuple[str, ...]) -> str:
    value = (env.get(name) or "").strip().lower()
    if not value:
        return choices[0]
    if value not in choices:
        raise SettingsError(f"{name} must be one of {', '.join(choices)} (got {value!r})")
    return value


def _tokens(env: Mapping[str, str], name: str) -> int | None:
    value = (env.get(name) or "").strip().replace("_", "")
    if not value:
        return None
    tokens = numbers.whole(value, signed=False)
    if tokens is None or not 256 <= tokens <= 10_000_000:
        raise SettingsError(f"{name} must be a number of tokens, 256 to 10000000 (got {value!r})")
    return tokens


def _count(env: Mapping[str, str], name: str, most: int) -> int | None:
    value = (env.get(name) or "").strip()
    if not value:
        return None
    count = numbers.whole(value, signed=False)
    if count is None or not 1 <= count <= most:
        raise SettingsError(f"{name} must be a whole number, 1 to {most} (got {value!r})")
    return count


def _rate(env: Mapping[str, str], name: str) -> float | None:
    value = (env.get(name) or "").strip()
    if not value:
        return None
    rate = numbers.decimal(value)
    if rate is None or not 0 < rate <= MAX_REQUESTS_PER_SECOND:
        raise SettingsError(
            f"{name} must be a number of requests per second, above 0, at most "
            f"{MAX_REQUESTS_PER_SECOND:,} (got {value[:40]!r})"
        )
    return rate


def _seconds(env: Mapping[str, str], name: str, default: float) -> float:
    value = (env.get(name) or "").strip()
    if not value:
        return default
    seconds = numbers.decimal(value)
    if seconds is None:
        raise SettingsError(f"{name} must be a number of seconds (got {value!r})")
    if seconds <= 0:
        raise SettingsError(f"{name} must be positive (got {value!r})")
    return seconds


def _headers(env: Mapping[str, str], name: str) -> dict[str, str]:
    value = (env.get(name) or "").strip()
    if not value:
        return {}
    # The value may hold credentials: never echo it.
    try:
        data = json.loads(value)
    except ValueError:
        raise SettingsError(
            f'{name} must be a JSON object such as {{"X-Header": "value"}}'
        ) from None
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise SettingsError(f"{name} must be a JSON object of string header values")
    return {str(k): v for k, v in data.items()}
