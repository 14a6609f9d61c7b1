"""DATA's default: where Council keeps what it stores (the payload store, the local council,
the run index) when COUNCIL_DATA does not say.

A checkout keeps it in its own data/, beside pyproject.toml, as `make` and the tests expect.
An installed Council (a wheel, pipx, uv tool) has no checkout around its packages, only
site-packages, which is no place for a user's data: it keeps it in the user's data directory
as platformdirs names it for the platform (~/.local/share/council on Linux, or under
$XDG_DATA_HOME; ~/Library/Application Support/council on macOS; %LOCALAPPDATA%\\council on
Windows).
"""

from __future__ import annotations

from pathlib import Path

from platformdirs import user_data_path

APP_NAME = "council"
# The folder that holds the `app` package: a checkout's root, or site-packages once installed.
ROOT = Path(__file__).resolve().parents[2]


def in_checkout() -> bool:
    """Whether the packages run from a checkout (its pyproject.toml beside them)."""
    return (ROOT / "pyproject.toml").is_file()


def default_data() -> Path:
    """The checkout's data/, else the user's data directory for Council."""
    if in_checkout():
        return ROOT / "data"
    return user_data_path(APP_NAME, appauthor=False)
