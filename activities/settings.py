"""Where and how the worker calls models: the view of the default provider's settings
(COUNCIL_LLM_*: `Settings.llm` of app.settings, a council.config.DefaultProvider) or of a
council.toml provider that the gateway works with.

The API key lives here and nowhere else: it never enters a workflow input, an activity
argument or result, an error message, a log line or a heartbeat.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from urllib.parse import urlsplit

from council.config import OPENROUTER_BASE_URL, DefaultProvider, ProviderConfig

APP_TITLE = "Council"


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
    # Whether the models take tools (function calling): all, none, or these patterns'.
    tools: bool | tuple[str, ...] = True

    def sees_images(self, model: str) -> bool:
        return _matches(self.images, model)

    def takes_tools(self, model: str) -> bool:
        return _matches(self.tools, model)

    @classmethod
    def of(cls, llm: DefaultProvider) -> GatewaySettings:
        """The default provider's settings, as the process read them (app.settings)."""
        return cls._read(llm, llm.key)

    @classmethod
    def from_provider(
        cls, provider: ProviderConfig, env: Mapping[str, str] | None = None
    ) -> GatewaySettings:
        """A council.toml provider's settings, its key from the variable it names."""
        env = os.environ if env is None else env
        key = (env.get(provider.api_key_env) or "").strip() if provider.api_key_env else ""
        return cls._read(provider, key or None)

    @classmethod
    def _read(
        cls, provider: DefaultProvider | ProviderConfig, api_key: str | None
    ) -> GatewaySettings:
        """A provider's fields (the default one's and council.toml's have the same names)."""
        images, tools = provider.images, provider.tools
        return cls(
            base_url=provider.base_url,
            api_key=api_key,
            stream=provider.stream,
            extra_headers=dict(provider.extra_headers),
            connect_timeout=provider.connect_timeout,
            read_timeout=provider.read_timeout,
            structured_output=provider.structured_output,
            context_window=provider.context_window,
            max_concurrent_requests=provider.max_concurrent_requests,
            max_requests_per_second=provider.max_requests_per_second,
            images=images if isinstance(images, bool) else tuple(images),
            tools=tools if isinstance(tools, bool) else tuple(tools),
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


def _matches(which: bool | tuple[str, ...], model: str) -> bool:
    """All (True), none (False), or the models these patterns match."""
    if isinstance(which, bool):
        return which
    return any(fnmatchcase(model, pattern) for pattern in which)


def _sensitive(header: str) -> bool:
    name = header.lower()
    return any(word in name for word in ("auth", "key", "token", "secret", "cookie"))
