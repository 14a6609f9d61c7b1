"""What a council starts with, on every surface (the CLI, the page, the API, MCP): a
named council's options from council.toml, or the default council: COUNCIL_MODELS /
COUNCIL_CHAIRMAN when set, else `[councils.default]`, else the built-in members."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from council.config import DEFAULT_COUNCIL, Config

# OpenRouter ids; COUNCIL_MODELS (comma-separated) or [councils.default] replaces them.
DEFAULT_MODELS = (
    "openai/gpt-4o-mini",
    "anthropic/claude-3.5-haiku",
    "google/gemini-2.0-flash-001",
    "meta-llama/llama-3.3-70b-instruct",
)


class UnknownCouncil(LookupError):
    """A council name the configuration does not define (the message lists the known)."""


def _listed(value: str | None) -> list[str]:
    return [item.strip() for item in (value or "").split(",") if item.strip()]


def council_options(
    config: Config, name: str | None = None, env: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """The start options of a council: the named one, or the default council."""
    env = os.environ if env is None else env
    if name is not None and name != DEFAULT_COUNCIL:
        try:
            return config.council(name)
        except KeyError:
            known = ", ".join(council_names(config))
            raise UnknownCouncil(f"no council {name!r} (known: {known})") from None
    options = dict(config.councils.get(DEFAULT_COUNCIL, {}))
    models = _listed(env.get("COUNCIL_MODELS"))
    if models:
        options["models"] = models
        options.pop("chairman", None)
    options.setdefault("models", list(DEFAULT_MODELS))
    chairman = (env.get("COUNCIL_CHAIRMAN") or "").strip()
    if chairman:
        options["chairman"] = chairman
    return options


def council_names(config: Config) -> list[str]:
    """Every council a user can pick: the default first, then the named ones."""
    return [DEFAULT_COUNCIL, *(n for n in config.council_names() if n != DEFAULT_COUNCIL)]
