"""The configuration as a process finds it: `council.toml` (the file COUNCIL_CONFIG
names, else ./council.toml when it exists) and the variables beside it.

- Providers (the worker): each with its key read from the variable its `api_key_env`
  names; a missing variable is an error at start.
- Councils (every surface): the options a named council starts with. The default
  council is COUNCIL_MODELS / COUNCIL_CHAIRMAN when set, else `[councils.default]`, else
  the built-in default members.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from council.config import DEFAULT_COUNCIL, Config, ConfigProblem, parse_config

CONFIG_VARIABLE = "COUNCIL_CONFIG"
DEFAULT_FILE = "council.toml"
# OpenRouter ids; COUNCIL_MODELS (comma-separated) or [councils.default] replaces them.
DEFAULT_MODELS = (
    "openai/gpt-4o-mini",
    "anthropic/claude-3.5-haiku",
    "google/gemini-2.0-flash-001",
    "meta-llama/llama-3.3-70b-instruct",
)


class UnknownCouncil(LookupError):
    """A council name the configuration does not define (the message lists the known)."""


def config_path(env: Mapping[str, str] | None = None) -> Path | None:
    """The file to read: COUNCIL_CONFIG's (it must exist), else ./council.toml if any."""
    env = os.environ if env is None else env
    named = (env.get(CONFIG_VARIABLE) or "").strip()
    if named:
        path = Path(named)
        if not path.is_file():
            raise ConfigProblem(f"{CONFIG_VARIABLE}: no such file: {named}")
        return path
    local = Path(DEFAULT_FILE)
    return local if local.is_file() else None


def load(env: Mapping[str, str] | None = None) -> Config:
    """The configuration (empty when there is no file); ConfigProblem with one line."""
    env = os.environ if env is None else env
    path = config_path(env)
    if path is None:
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigProblem(f"{path}: cannot be read ({error})") from None
    config = parse_config(text, str(path))
    for name, provider in config.providers.items():
        if provider.api_key_env and not (env.get(provider.api_key_env) or "").strip():
            raise ConfigProblem(
                f"{path}: providers.{name}.api_key_env names {provider.api_key_env}, "
                "which is not set"
            )
    return config


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
