"""The configuration as a process finds it: `council.toml` (the file COUNCIL_CONFIG
names, else ./council.toml when it exists). A provider's key is read, by the worker,
from the variable its `api_key_env` names; a missing one stops the worker at start. What
a council starts with: app.settings.councils."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from app.settings import environment as app_settings
from app.settings.environment import Settings
from council.config import Config, ConfigProblem, parse_config

CONFIG_VARIABLE = Settings.variables()["config_file"]
DEFAULT_FILE = "council.toml"


def config_path(env: Settings | Mapping[str, str] | None = None) -> Path | None:
    """The file to read: COUNCIL_CONFIG's (it must exist), else ./council.toml if any."""
    named = app_settings.of(env).config_file
    if named:
        path = Path(named)
        if not path.is_file():
            raise ConfigProblem(f"{CONFIG_VARIABLE}: no such file: {named}")
        return path
    local = Path(DEFAULT_FILE)
    return local if local.is_file() else None


def load(env: Mapping[str, str] | None = None, keys: bool = False) -> Config:
    """The configuration (empty when there is no file); ConfigProblem with one line. With
    `keys` (the worker, which calls the providers), every variable a provider's
    `api_key_env` names must be set; the surfaces that only start and read runs need none.
    `env`: the variables to read (the process's settings and environment by default)."""
    path = config_path(env)
    env = os.environ if env is None else env
    if path is None:
        return Config()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigProblem(f"{path}: cannot be read ({error})") from None
    config = parse_config(text, str(path))
    for name, provider in config.providers.items():
        if keys and provider.api_key_env and not (env.get(provider.api_key_env) or "").strip():
            raise ConfigProblem(
                f"{path}: providers.{name}.api_key_env names {provider.api_key_env}, "
                "which is not set"
            )
    return config
