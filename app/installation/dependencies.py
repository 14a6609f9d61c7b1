"""Council's packages, checked before a command imports them: a Python that lacks them (the
system's python3, where the checkout's .venv is not active) gets one line that names the
fix and exit status 2, where it would otherwise end in a traceback.

The commands a user may run from a checkout (starter.py, worker.py, `python -m web`,
up.py, demo.py) import this module first; importing it is the check. The packages are
those requirements.txt pins, by name: an installed Council (pipx, a wheel) has no
requirements.txt beside it, and its installer saw to them. It runs on whatever Python
the user has, so it uses the standard library only.
"""

from __future__ import annotations

import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUIREMENTS = ROOT / "requirements.txt"
VENV = ROOT / ".venv"
PYTHON = (3, 11)
# The command a user ran, by its script's (or package's) name, as its messages name it;
# and what runs it in the checkout's environment, set up on first use (the launchers at
# the checkout's root and the make targets).
COMMANDS = {
    "starter": ("starter.py", "bin/council"),
    "worker": ("worker.py", "bin/council-worker"),
    "web": ("python -m web", "bin/council-web"),
    "up": ("up.py", "make up"),
    "demo": ("demo.py", "make demo"),
    "council": ("council", "bin/council"),
    "council-worker": ("council-worker", "bin/council-worker"),
    "council-web": ("council-web", "bin/council-web"),
}


def required() -> list[str]:
    """The distributions requirements.txt names (none outside a checkout)."""
    try:
        lines = REQUIREMENTS.read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    names = []
    for line in lines:
        spec = line.split("#", 1)[0].strip()
        if spec and not spec.startswith("-"):
            for mark in "=<>!~;[ @":
                spec = spec.split(mark, 1)[0]
            names.append(spec)
    return names


def missing(names: list[str]) -> list[str]:
    """Those of `names` that this Python does not have installed."""
    absent = []
    for name in names:
        try:
            metadata.distribution(name)
        except metadata.PackageNotFoundError:
            absent.append(name)
    return absent


def running() -> tuple[str, str]:
    """The command this process runs, as its messages name it, and its launcher."""
    main = Path(sys.argv[0] if sys.argv and sys.argv[0] else "starter")
    name = main.parent.name if main.stem == "__main__" else main.stem
    return COMMANDS.get(name, COMMANDS["starter"])


def in_checkout_venv() -> bool:
    """Whether this is the checkout's .venv's Python (its bin/ holds the interpreter)."""
    try:
        return Path(sys.executable).parent.parent.resolve() == VENV.resolve()
    except OSError:
        return False


def problem() -> str | None:
    """Why this Python cannot run Council, in one line with the fix; None when it can."""
    command, launcher = running()
    if sys.version_info < PYTHON:
        shown = ".".join(str(part) for part in sys.version_info[:3])
        return (
            f"{command}: Council needs Python {PYTHON[0]}.{PYTHON[1]} or newer "
            f"({sys.executable} is {shown}): run {launcher} instead, which uses the checkout's "
            ".venv"
        )
    absent = missing(required())
    if not absent:
        return None
    more = f" and {len(absent) - 1} more" if len(absent) > 1 else ""
    lacks = f"lacks Council's packages ({absent[0]}{more})"
    if in_checkout_venv():
        return f"{command}: .venv {lacks}: run make install"
    return (
        f"{command}: {sys.executable} {lacks}: run {launcher} instead, which sets up the "
        "checkout's .venv and runs in it"
    )


def check() -> None:
    found = problem()
    if found:
        print(found, file=sys.stderr)
        raise SystemExit(2)


check()
