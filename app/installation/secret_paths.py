"""The files and folders of this installation that hold keys or the council's data: what a
stdio tool server this process starts is kept from (activities.confinement hides each).

- council.toml (COUNCIL_CONFIG, else ./council.toml), and `.env` here and in the checkout
  (docker compose's, and many a setup's, file of keys);
- the data directory (COUNCIL_DATA) and the payload store (COUNCIL_STORE, when a folder);
- the Temporal client's profile (TEMPORAL_CONFIG_FILE, else the user's
  temporalio/temporal.toml folder) and its TLS files (TEMPORAL_TLS_*_PATH).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from platformdirs import user_config_path

from app.settings import config as app_config
from app.settings import environment as app_settings
from app.store import store
from app.store.data_dir import ROOT
from app.temporal.connection import TLS_FILES

ENV_FILE = ".env"
TEMPORAL_CONFIG_FILE = "TEMPORAL_CONFIG_FILE"


def kept_from_tools(env: Mapping[str, str] | None = None) -> list[Path]:
    """Every such path of this process's settings (that exists or not: the caller hides
    those that do)."""
    env = os.environ if env is None else env
    settings = app_settings.of(env)
    named = settings.config_file
    paths = [Path(named) if named else Path(app_config.DEFAULT_FILE)]
    paths += [Path.cwd() / ENV_FILE, ROOT / ENV_FILE]
    paths.append(settings.data())
    where = store.location(settings)
    if where.kind == "file" and where.path is not None:
        paths.append(where.path)
    profile = env.get(TEMPORAL_CONFIG_FILE, "").strip()
    paths.append(Path(profile) if profile else user_config_path("temporalio", appauthor=False))
    paths += [Path(env[name]) for name in TLS_FILES if env.get(name, "").strip()]
    return paths
